"""Rewrites of an ONNX graph's node list before it is converted.

Each rewrite takes the top-level nodes and the values known at load time (the
:class:`~.convert.Converter`'s ``env`` holding the initializers) and returns a new node list,
adding the arrays it makes to ``env`` under new names; it never changes the model it was
given. A rewrite fires only where its result is the same computation up to float rounding.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

__all__ = ["fold_conv_batchnorm"]


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


def fold_conv_batchnorm(nodes, env: dict, outputs) -> list:
    """A ``Conv`` whose only reader is an inference ``BatchNormalization`` becomes one ``Conv``
    with the normalization folded into its weights and bias.

    With ``s = scale / sqrt(var + epsilon)`` per output channel, ``W' = W * s`` and
    ``B' = (B - mean) * s + bias`` (computed in float64, stored in the weights' type), as ONNX
    Runtime's ``ConvBNFusion`` does. Fires when the conv's weights, its bias (if any) and the
    normalization's four parameters are known arrays of float type, the conv's output is read
    by nothing else (no graph output, no other node, no subgraph), the normalization is in
    inference mode (``training_mode=0``, ``spatial=1``) and its running-statistics outputs are
    unused.

    Arguments:
        nodes (sequence[onnx.NodeProto]): the graph's nodes in order.
        env (dict): value name -> NumPy array for the values known at load time (with the
            tensors of the ``Constant`` nodes of ``nodes``, the weights and parameters may
            come from either); the folded weights are added to it.
        outputs (sequence[str]): the graph's output names.

    Returns:
        list[onnx.NodeProto]: the new node list (the conv nodes that changed are copies).
    """
    from onnx import NodeProto

    nodes = list(nodes)
    uses = _uses(nodes, outputs)
    producer = {o: k for k, p in enumerate(nodes) for o in p.output if o}
    drop: set[int] = set()
    replace: dict[int, NodeProto] = {}

    known = dict(env)
    for p in nodes:  # Constant nodes holding a tensor (the weights of some exporters)
        if p.op_type == "Constant" and p.domain in ("", "ai.onnx") and len(p.attribute) == 1 \
                and p.attribute[0].name == "value":
            from onnx import numpy_helper

            known[p.output[0]] = numpy_helper.to_array(p.attribute[0].t)

    def known_float(name):
        v = known.get(name) if name else None
        return v if isinstance(v, np.ndarray) and v.dtype.kind == "f" else None

    for k, bn in enumerate(nodes):
        if bn.op_type != "BatchNormalization" or bn.domain not in ("", "ai.onnx") or len(bn.input) < 5:
            continue
        if int(_attr(bn, "training_mode", 0)) or int(_attr(bn, "spatial", 1)) != 1:
            continue
        if any(o and uses[o] for o in bn.output[1:]):
            continue
        j = producer.get(bn.input[0])
        if j is None or j in replace or j in drop:
            continue
        conv = nodes[j]
        if conv.op_type != "Conv" or conv.domain not in ("", "ai.onnx") or uses[conv.output[0]] != 1:
            continue
        w = known_float(conv.input[1])
        b = known_float(conv.input[2]) if len(conv.input) > 2 and conv.input[2] else None
        if w is None or w.ndim < 3 or (len(conv.input) > 2 and conv.input[2] and b is None):
            continue
        params = [known_float(name) for name in bn.input[1:5]]
        cout = w.shape[0]
        if any(p is None or p.size != cout for p in params):
            continue
        scale, bias, mean, var = (p.reshape(-1).astype(np.float64) for p in params)
        s = scale / np.sqrt(var + float(_attr(bn, "epsilon", 1e-5)))
        w2 = (w.astype(np.float64) * s.reshape((-1,) + (1,) * (w.ndim - 1))).astype(w.dtype)
        b0 = np.zeros(cout) if b is None else b.reshape(-1).astype(np.float64)
        b2 = ((b0 - mean) * s + bias).astype(w.dtype)
        wname, bname = f"{conv.output[0]}::bn_weight", f"{conv.output[0]}::bn_bias"
        env[wname], env[bname] = w2, b2
        new = NodeProto()
        new.CopyFrom(conv)
        del new.input[:]
        new.input.extend([conv.input[0], wname, bname])
        new.output[0] = bn.output[0]
        new.name = f"{conv.name}+{bn.name}" if conv.name and bn.name else (conv.name or bn.name)
        replace[j] = new
        drop.add(k)
    if not replace:
        return nodes
    return [replace.get(k, p) for k, p in enumerate(nodes) if k not in drop]
