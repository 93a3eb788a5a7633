"""Rewrites of an ONNX graph's node list before it is converted.

Each rewrite takes the top-level nodes and the values known at load time (the
:class:`~.convert.Converter`'s ``env`` holding the initializers) and returns a new node list,
adding the arrays it makes to ``env`` under new names; it never changes the model it was
given. A rewrite fires only where its result is the same computation up to float rounding.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

__all__ = ["fold_conv_affine"]

_DEFAULT = ("", "ai.onnx")
#: element-wise ops with a known per-channel operand that fold into a conv's weights and bias
_AFFINE = ("Mul", "Div", "Add", "Sub")


def _uses(nodes, outputs) -> Counter:
    """How many times each value name is read (by a node of ``nodes`` or as a graph output)."""
    n = Counter(i for p in nodes for i in p.input if i)
    n.update(outputs)
    for p in nodes:
        for a in p.attribute:
            if a.type == a.GRAPH:  # a subgraph may read an outer value: count it as a reader
                n.update(i for q in a.g.node for i in q.input if i)
                n.update(o.name for o in a.g.output)
    return n


def _attr(p, name, default):
    from onnx import helper

    for a in p.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def _per_channel(a: np.ndarray, rank: int, channels: int) -> np.ndarray | None:
    """``a`` (broadcast against a rank-``rank`` NC... tensor without changing its shape) as a
    float64 vector of ``channels`` values, or None when it varies along another axis."""
    if a.ndim > rank:
        return None
    shp = (1,) * (rank - a.ndim) + a.shape
    if any(d != 1 for k, d in enumerate(shp) if k != 1) or shp[1] not in (1, channels):
        return None
    return np.broadcast_to(a.reshape(-1).astype(np.float64), (channels,))


def _plain_conv(conv, w, b_name, known) -> bool:
    """``conv`` is an ai.onnx Conv with known float weights and a known bias (or none)."""
    if conv.op_type != "Conv" or conv.domain not in _DEFAULT or w is None or w.ndim < 3:
        return False
    return not b_name or isinstance(known.get(b_name), np.ndarray)


def fold_conv_affine(nodes, env: dict, outputs) -> list:
    """Fold known per-channel scales and offsets into the weights and bias of the ``Conv``
    nodes next to them (as ONNX Runtime's ConvBNFusion, ConvMulFusion and ConvAddFusion do).

    * Output side: a ``Conv`` whose only reader is an inference ``BatchNormalization``, or a
      ``Mul``, ``Add``, ``Div`` or ``Sub`` (for these two the conv on the left) with a known
      operand that is the same along every axis but the channels (a ``[C, 1, 1]`` offset, a
      ``[1]`` scale), becomes one ``Conv``: ``W' = W * s``,
      ``B' = B * s + a`` (a normalization: ``s = scale / sqrt(var + epsilon)``,
      ``a = bias - mean * s``).
    * Input side: a ``Mul``, ``Div``, ``Add`` or ``Sub`` (the conv's input on the left) of a
      known per-channel operand whose only reader is a ``Conv`` without padding and with one
      group: ``W' = W * s`` along the input channels, ``B' = B + sum(W * a)`` (exact without
      padding: every window reads only transformed values); not a scale of a product of two
      run-time values (the ``/ 6`` of ``x * clip(x + 3, 0, 6) / 6``, which the compiler's
      hard-swish fusion takes).

    Chains fold one step after the other (a conv followed by a scale and an offset). The
    folded values are computed in float64 and stored in the weights' type. Fires only where
    the folded node is read by nothing else (no graph output, no other node, no subgraph) and
    every operand is a known float array.

    Arguments:
        nodes (sequence[onnx.NodeProto]): the graph's nodes in order.
        env (dict): value name -> NumPy array for the values known at load time (with the
            tensors of the ``Constant`` nodes of ``nodes``, weights and parameters may come
            from either); the folded weights are added to it.
        outputs (sequence[str]): the graph's output names.

    Returns:
        list[onnx.NodeProto]: the new node list (the conv nodes that changed are copies).
    """
    from onnx import NodeProto, numpy_helper

    nodes = list(nodes)
    known = dict(env)
    for p in nodes:  # Constant nodes holding a tensor (the weights of some exporters)
        if p.op_type == "Constant" and p.domain in _DEFAULT and len(p.attribute) == 1 \
                and p.attribute[0].name == "value":
            known[p.output[0]] = numpy_helper.to_array(p.attribute[0].t)

    def known_float(name):
        v = known.get(name) if name else None
        return v if isinstance(v, np.ndarray) and v.dtype.kind == "f" else None

    count = 0

    def new_conv(conv, w2, b2, x_name, out_name, other):
        nonlocal count
        count += 1
        wname, bname = f"{conv.output[0]}::folded_weight{count}", f"{conv.output[0]}::folded_bias{count}"
        for name, arr in ((wname, w2), (bname, b2)):
            env[name] = known[name] = arr
        new = NodeProto()
        new.CopyFrom(conv)
        del new.input[:]
        new.input.extend([x_name, wname, bname])
        new.output[0] = out_name
        new.name = f"{conv.name}+{other.name}" if conv.name and other.name else (conv.name or other.name)
        return new

    def output_side(conv, reader, w, b):
        """(s, a) with conv's output -> reader == conv * s + a, or None."""
        cout = w.shape[0]
        if reader.op_type == "BatchNormalization":
            if len(reader.input) < 5 or int(_attr(reader, "training_mode", 0)) or int(_attr(reader, "spatial", 1)) != 1:
                return None
            params = [known_float(name) for name in reader.input[1:5]]
            if any(p is None or p.size != cout for p in params):
                return None
            scale, bias, mean, var = (p.reshape(-1).astype(np.float64) for p in params)
            s = scale / np.sqrt(var + float(_attr(reader, "epsilon", 1e-5)))
            return s, bias - mean * s
        if reader.op_type not in _AFFINE or len(reader.input) != 2:
            return None
        left = reader.input[0] == conv.output[0]
        k = known_float(reader.input[1] if left else reader.input[0])
        if k is None or (not left and reader.op_type in ("Sub", "Div")):
            return None
        vec = _per_channel(k, w.ndim, cout)
        if vec is None or (reader.op_type == "Div" and not np.all(vec)):
            return None
        ones, zeros = np.ones(cout), np.zeros(cout)
        return {"Mul": (vec, zeros), "Div": (1.0 / vec, zeros), "Add": (ones, vec), "Sub": (ones, -vec)}[
            reader.op_type]

    def one_pass(nodes):
        uses = _uses(nodes, outputs)
        readers: dict[str, list[int]] = {}
        for k, p in enumerate(nodes):
            for i in p.input:
                if i:
                    readers.setdefault(i, []).append(k)
        producer = {o: k for k, p in enumerate(nodes) for o in p.output if o}
        drop: set[int] = set()
        replace: dict[int, NodeProto] = {}
        for j, conv in enumerate(nodes):
            b_name = conv.input[2] if len(conv.input) > 2 else ""
            w = known_float(conv.input[1]) if len(conv.input) > 1 else None
            if j in replace or not _plain_conv(conv, w, b_name, known):
                continue
            b = known_float(b_name) if b_name else None
            if b_name and b is None:
                continue
            cout = w.shape[0]
            b0 = np.zeros(cout) if b is None else b.reshape(-1).astype(np.float64)
            # output side
            out = conv.output[0]
            rs = readers.get(out, [])
            if uses[out] == 1 and len(rs) == 1 and rs[0] not in drop and rs[0] not in replace:
                reader = nodes[rs[0]]
                if reader.domain in _DEFAULT and all(not o or not uses[o] for o in reader.output[1:]):
                    sa = output_side(conv, reader, w, b)
                    if sa is not None:
                        s, a = sa
                        w2 = (w.astype(np.float64) * s.reshape((-1,) + (1,) * (w.ndim - 1))).astype(w.dtype)
                        replace[j] = new_conv(conv, w2, (b0 * s + a).astype(w.dtype), conv.input[0],
                                              reader.output[0], reader)
                        drop.add(rs[0])
                        continue
            # input side: no padding, one group
            x = conv.input[0]
            i = producer.get(x)
            if i is None or i in drop or i in replace or uses[x] != 1 or int(_attr(conv, "group", 1)) != 1:
                continue
            pads = _attr(conv, "pads", None)
            if _attr(conv, "auto_pad", "NOTSET") not in ("NOTSET", "VALID") or (pads and any(pads)):
                continue
            prod = nodes[i]
            if prod.op_type not in _AFFINE or prod.domain not in _DEFAULT or len(prod.input) != 2:
                continue
            left = known_float(prod.input[1])
            k = left if left is not None else known_float(prod.input[0])
            if k is None or (left is None and prod.op_type in ("Sub", "Div")) or isinstance(
                    known.get(prod.input[0] if left is not None else prod.input[1]), np.ndarray):
                continue
            cin = w.shape[1]
            vec = _per_channel(k, w.ndim, cin)
            if vec is None or (prod.op_type == "Div" and not np.all(vec)):
                continue
            x_in = prod.input[0] if left is not None else prod.input[1]
            before = producer.get(x_in)
            if prod.op_type in ("Mul", "Div") and before is not None and nodes[before].op_type == "Mul" and not any(
                    isinstance(known.get(t), np.ndarray) for t in nodes[before].input):
                continue  # the scale ends an activation x * f(x) (hard-swish's / 6): its fusion takes it
            w64 = w.astype(np.float64)
            cshape = (1, -1) + (1,) * (w.ndim - 2)
            if prod.op_type in ("Mul", "Div"):
                s = vec if prod.op_type == "Mul" else 1.0 / vec
                w2, b2 = w64 * s.reshape(cshape), b0
            else:
                a = vec if prod.op_type == "Add" else -vec
                w2, b2 = w64, b0 + (w64 * a.reshape(cshape)).reshape(cout, -1).sum(axis=1)
            replace[j] = new_conv(conv, w2.astype(w.dtype), b2.astype(w.dtype), x_in, conv.output[0], prod)
            drop.add(i)
        if not replace:
            return None
        return [replace.get(k, p) for k, p in enumerate(nodes) if k not in drop]

    for _ in range(8):  # a scale and an offset on each side of a conv fold in four passes
        folded = one_pass(nodes)
        if folded is None:
            break
        nodes = folded
    return nodes
