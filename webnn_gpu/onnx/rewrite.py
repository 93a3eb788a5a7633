"""Rewrites of an ONNX graph's node list before it is converted.

Each rewrite takes the top-level nodes and the values known at load time (the
:class:`~.convert.Converter`'s ``env`` holding the initializers) and returns a new node list,
adding the arrays it makes to ``env`` under new names; it never changes the model it was
given. A rewrite fires only where its result is the same computation up to float rounding.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np

__all__ = ["fold_conv_affine", "fuse_erf_gelu", "fuse_gru_cell", "fuse_lstm_cell", "rewrite", "split_gemm_accumulate"]

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


def _readers(nodes) -> dict[str, list[int]]:
    """Value name -> the indices of the nodes of ``nodes`` reading it, in order."""
    readers: dict[str, list[int]] = {}
    for k, p in enumerate(nodes):
        for i in p.input:
            if i:
                readers.setdefault(i, []).append(k)
    return readers


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
    """``conv`` is an ai.onnx Conv or ConvTranspose with known float weights and a known bias
    (or none)."""
    if conv.op_type not in ("Conv", "ConvTranspose") or conv.domain not in _DEFAULT or w is None or w.ndim < 3:
        return False
    return not b_name or isinstance(known.get(b_name), np.ndarray)


def fold_conv_affine(nodes, env: dict, outputs) -> list:
    """Fold known per-channel scales and offsets into the weights and bias of the ``Conv``
    nodes next to them (as ONNX Runtime's ConvBNFusion, ConvMulFusion and ConvAddFusion do).

    * Output side: a ``Conv`` or ``ConvTranspose`` whose only reader is an inference
      ``BatchNormalization``, or a ``Mul``, ``Add``, ``Div`` or ``Sub`` (for these two the conv
      on the left) with a known operand that is the same along every axis but the channels (a
      ``[C, 1, 1]`` offset, a ``[1]`` scale), becomes one such node: ``W' = W * s`` along the
      output channels, ``B' = B * s + a`` (a normalization: ``s = scale / sqrt(var + epsilon)``,
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
    every operand is a known float array (an initializer, a ``Constant`` or a movement of known
    values that :func:`_known_consts` folds, such as ``Identity``).

    Arguments:
        nodes (sequence[onnx.NodeProto]): the graph's nodes in order.
        env (dict): value name -> NumPy array for the values known at load time (with the
            tensors of the ``Constant`` nodes of ``nodes``, weights and parameters may come
            from either); the folded weights are added to it.
        outputs (sequence[str]): the graph's output names.

    Returns:
        list[onnx.NodeProto]: the new node list (the conv nodes that changed are copies).
    """
    from onnx import NodeProto

    nodes = list(nodes)
    # Constant nodes holding a tensor (the weights of some exporters) and movements of known
    # values: an export without constant folding reads a normalization's statistics through
    # Identity nodes of equal initializers (running_var = Identity(weight) when both are ones)
    known = _known_consts(nodes, env)

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

    def output_side(conv, reader, w, cout):
        """(s, a) with conv's output -> reader == conv * s + a, or None."""
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
        uses, readers = _uses(nodes, outputs), _readers(nodes)
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
            groups = int(_attr(conv, "group", 1))
            transposed = conv.op_type == "ConvTranspose"  # weights [C, O / group, kh, kw]
            cout = w.shape[1] * groups if transposed else w.shape[0]
            if transposed and w.shape[0] % groups:
                continue
            b0 = np.zeros(cout) if b is None else b.reshape(-1).astype(np.float64)
            # output side
            out = conv.output[0]
            rs = readers.get(out, [])
            if uses[out] == 1 and len(rs) == 1 and rs[0] not in drop and rs[0] not in replace:
                reader = nodes[rs[0]]
                if reader.domain in _DEFAULT and all(not o or not uses[o] for o in reader.output[1:]):
                    sa = output_side(conv, reader, w, cout)
                    if sa is not None:
                        s, a = sa
                        if transposed:  # output channel gi * (O / group) + j: weights [gi * C / group:, j]
                            sg = s.reshape(groups, 1, -1, *(1,) * (w.ndim - 2))
                            w2 = (w.astype(np.float64).reshape(groups, -1, *w.shape[1:]) * sg).reshape(w.shape)
                            w2 = w2.astype(w.dtype)
                        else:
                            w2 = (w.astype(np.float64) * s.reshape((-1,) + (1,) * (w.ndim - 1))).astype(w.dtype)
                        replace[j] = new_conv(conv, w2, (b0 * s + a).astype(w.dtype), conv.input[0],
                                              reader.output[0], reader)
                        drop.add(rs[0])
                        continue
            # input side: no padding, one group
            x = conv.input[0]
            i = producer.get(x)
            if transposed or i is None or i in drop or i in replace or uses[x] != 1 or int(_attr(conv, "group", 1)) != 1:
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


def _known_consts(nodes, env: dict) -> dict:
    """``env`` plus the tensors of the ``Constant`` nodes of ``nodes`` and the values that
    :func:`.fold.fold` computes from known ones (a weight's ``Split`` and ``Squeeze``, as
    tf2onnx writes a recurrent cell's biases), value name -> array."""
    from onnx import numpy_helper

    from .convert import Node
    from .fold import fold

    known = dict(env)
    for p in nodes:
        if p.op_type == "Constant" and p.domain in _DEFAULT and len(p.attribute) == 1 \
                and p.attribute[0].name == "value":
            known[p.output[0]] = numpy_helper.to_array(p.attribute[0].t)
        elif p.op_type in _PRE_FOLDED and p.domain in _DEFAULT and p.input and all(
                not i or isinstance(known.get(i), np.ndarray) for i in p.input):
            attrs = {a.name: _attr(p, a.name, None) for a in p.attribute}
            out = fold(Node(p.name, p.op_type, p.domain, 0, attrs, list(p.input), list(p.output), p),
                       [known[i] if i else None for i in p.input])
            for name, v in zip(p.output, out or []):
                if name and v is not None:
                    known[name] = np.asarray(v)
    return known


#: Operators :func:`_known_consts` evaluates on known inputs: movements whose folding does not
#: depend on the operator's version (axes as an input or an attribute alike)
_PRE_FOLDED = ("Split", "Squeeze", "Unsqueeze", "Identity", "Transpose", "Concat", "Cast")


class _Index:
    """One graph's node list as a rewrite reads it: ``nodes`` (a list), ``known`` (the values
    known at load time, :func:`_known_consts`), ``uses`` (reads per value name, :func:`_uses`),
    ``producer`` (value name -> index of the node making it) and ``readers`` (value name ->
    indices of the nodes reading it)."""

    def __init__(self, nodes, env: dict, outputs):
        self.nodes = list(nodes)
        self.known = _known_consts(self.nodes, env)
        self.uses = _uses(self.nodes, outputs)
        self.producer = {o: k for k, p in enumerate(self.nodes) for o in p.output if o}
        self.readers = _readers(self.nodes)

    def made_by(self, name, *ops):
        """The index of the node making ``name`` when it is one of ``ops`` (default domain), else None."""
        k = self.producer.get(name)
        return k if k is not None and self.nodes[k].op_type in ops and self.nodes[k].domain in _DEFAULT else None

    def sole_reader(self, name, *ops):
        """The index of the one node reading ``name`` (read once) when it is one of ``ops``, else None."""
        rs = self.readers.get(name, [])
        if self.uses[name] != 1 or len(rs) != 1 or self.nodes[rs[0]].op_type not in ops \
                or self.nodes[rs[0]].domain not in _DEFAULT:
            return None
        return rs[0]


def _plain_gemm(p, known: dict):
    """(input name, weight [N, K] float64, bias [N] float64) of Gemm node ``p`` with alpha 1,
    transA 0, known float weights and a known (or no) bias, else None."""
    if len(p.input) < 2 or float(_attr(p, "alpha", 1.0)) != 1.0 or int(_attr(p, "transA", 0)):
        return None
    w = known.get(p.input[1])
    if not isinstance(w, np.ndarray) or w.dtype.kind != "f" or w.ndim != 2:
        return None
    w = w if int(_attr(p, "transB", 0)) else w.T
    n = w.shape[0]
    b = np.zeros(n)
    if len(p.input) > 2 and p.input[2]:
        bb = known.get(p.input[2])
        if not isinstance(bb, np.ndarray) or bb.dtype.kind != "f" or float(_attr(p, "beta", 1.0)) != 1.0:
            return None
        if bb.size == 1:
            b = np.full(n, float(bb.reshape(-1)[0]))
        elif bb.size == n and bb.shape[-1] == n:
            b = bb.reshape(-1).astype(np.float64)
        else:
            return None
    return p.input[0], w, b


def _equal_split(split, known: dict, H: int) -> bool:
    """Whether Split node ``split`` cuts its input into parts of ``H`` each (its ``split``
    sizes, input or attribute, all ``H``, or none given); False when the sizes are a value not
    known at load time."""
    if len(split.input) > 1 and split.input[1]:
        sizes = known.get(split.input[1])
        if not isinstance(sizes, np.ndarray):
            return False
    else:
        sizes = _attr(split, "split", None)
    return sizes is None or [int(v) for v in np.asarray(sizes).reshape(-1)] == [H] * len(split.output)


def _one_batch(known: dict, names) -> bool:
    """False when a value of ``names`` whose shape is known at load time (a constant or a
    run-time operand in ``known``) is not 2-D or two of them differ in their first axis (ONNX
    would broadcast the batch, a recurrent node of one step does not); True otherwise."""
    shapes = [tuple(s) for v in names if (s := getattr(known.get(v), "shape", None)) is not None]
    return all(len(s) == 2 for s in shapes) and len({s[0] for s in shapes}) <= 1


def _splice(nodes: list, replaced: dict, drop: set) -> list:
    """``nodes`` with node ``k`` replaced by the list ``replaced[k]`` and the nodes of ``drop``
    left out (``nodes`` itself where nothing was replaced)."""
    if not replaced:
        return nodes
    return [q for k, p in enumerate(nodes) if k not in drop for q in replaced.get(k, [p])]


def _step_consts(env: dict, known: dict, base: str, w: np.ndarray, r: np.ndarray, b: np.ndarray, dt) -> None:
    """The constants of a one-step recurrent node named ``base``: ``W`` ``[1, G*H, I]``, ``R``
    ``[1, G*H, H]``, ``B`` ``[1, 2*G*H]`` (in ``dt``) and the reshape targets ``in3`` ``[1, -1,
    I]``, ``st3`` ``[1, -1, H]``, ``st2`` ``[-1, H]``, added to ``env`` and ``known``."""
    H = r.shape[1]
    consts = {"W": w[None], "R": r[None], "B": b[None], "in3": np.array([1, -1, w.shape[1]], np.int64),
              "st3": np.array([1, -1, H], np.int64), "st2": np.array([-1, H], np.int64)}
    for key, v in consts.items():
        env[f"{base}/{key}"] = known[f"{base}/{key}"] = v.astype(dt) if v.dtype.kind == "f" else v


def fuse_lstm_cell(nodes, env: dict, outputs) -> list:
    """Write one step of a long short-term memory cell spelled out in ONNX operators as an
    ``LSTM`` node of one time step (as PyTorch's exporter writes ``nn.LSTMCell``, and as
    ``torch.export`` writes a one-step ``nn.LSTM``).

    The pattern, each intermediate value read only inside it::

        z = Gemm(x, W1, b1) + Gemm(h, W2, b2)            # alpha = beta = 1, transA = 0
        z0, z1, z2, z3 = Split(z, 4 equal parts along the last axis)
        c' = Sigmoid(zf) * c + Sigmoid(zi) * Tanh(zg)     # any operand order
        h' = Sigmoid(zo) * Tanh(c')

    where ``{zi, zf, zg, zo}`` are the four parts in any order (told apart by the role each
    plays) and the Gemm weights and biases are known. It becomes ``LSTM`` (``hidden_size`` H,
    gates in ONNX's ``iofc`` order, ``W`` from the Gemm of the input whose width is not H when
    one is, else the first) between reshapes to and from its ``[1, batch, .]`` layout: the
    same products, sums and activations (one recurrent kernel instead of two matrix products,
    four slices and the element-wise ops). ``c'`` and ``h'`` may be read anywhere.

    Arguments:
        nodes (sequence[onnx.NodeProto]): a graph's nodes in order.
        env (dict): value name -> NumPy array for the values known at load time; the new
            weights and shapes are added to it.
        outputs (sequence[str]): the graph's output names.

    Returns:
        list[onnx.NodeProto]: the new node list (the input list where nothing matched).
    """
    from onnx import helper

    ix = _Index(nodes, env, outputs)
    nodes, known, uses, readers = ix.nodes, ix.known, ix.uses, ix.readers
    prod, only_reader = ix.made_by, ix.sole_reader

    def gemm(k):
        return _plain_gemm(nodes[k], known)

    def mul_parts(k):
        """The two input names of Mul node ``k``."""
        return list(nodes[k].input)

    count = 0
    replaced: dict[int, list] = {}
    drop: set[int] = set()
    for ks, split in enumerate(nodes):
        if split.op_type != "Split" or split.domain not in _DEFAULT or len(split.output) != 4:
            continue
        if any(not o or uses[o] != 1 for o in split.output):
            continue
        ka = prod(split.input[0], "Add")
        if ka is None or uses[split.input[0]] != 1 or len(nodes[ka].input) != 2:
            continue
        kg = [prod(i, "Gemm") for i in nodes[ka].input]
        if None in kg or kg[0] == kg[1] or any(uses[i] != 1 for i in nodes[ka].input):
            continue
        gs = [gemm(k) for k in kg]
        if None in gs or gs[0][1].shape[0] != gs[1][1].shape[0] or gs[0][1].shape[0] % 4:
            continue
        H = gs[0][1].shape[0] // 4
        axis = int(_attr(split, "axis", 0))
        if axis not in (1, -1) or not _equal_split(split, known, H):
            continue
        # each part's activation, by role
        act = {}
        for j, o in enumerate(split.output):
            r = readers.get(o, [None])[0]
            if r is None or nodes[r].op_type not in ("Sigmoid", "Tanh") or uses[nodes[r].output[0]] != 1:
                break
            act[j] = r
        if len(act) != 4 or sorted(nodes[r].op_type for r in act.values()) != ["Sigmoid"] * 3 + ["Tanh"]:
            continue
        g_part = next(j for j, r in act.items() if nodes[r].op_type == "Tanh")
        km_ig = only_reader(nodes[act[g_part]].output[0], "Mul")
        if km_ig is None:
            continue
        i_names = [v for v in mul_parts(km_ig) if v != nodes[act[g_part]].output[0]]
        i_part = next((j for j, r in act.items() if j != g_part and [nodes[r].output[0]] == i_names), None)
        if i_part is None:
            continue
        kc = only_reader(nodes[km_ig].output[0], "Add")
        if kc is None:
            continue
        other = [v for v in nodes[kc].input if v != nodes[km_ig].output[0]]
        kmf = prod(other[0], "Mul") if len(other) == 1 else None
        if kmf is None or uses[other[0]] != 1:
            continue
        f_part = c_prev = None
        for j, r in act.items():
            if j in (g_part, i_part):
                continue
            ins = mul_parts(kmf)
            if nodes[r].output[0] in ins and len(ins) == 2:
                f_part, c_prev = j, ins[1 - ins.index(nodes[r].output[0])]
        if f_part is None or c_prev is None or c_prev == nodes[act[f_part]].output[0]:
            continue
        o_part = ({0, 1, 2, 3} - {g_part, i_part, f_part}).pop()
        c_new = nodes[kc].output[0]
        kt = next((r for r in readers.get(c_new, []) if nodes[r].op_type == "Tanh" and nodes[r].domain in _DEFAULT),
                  None)
        if kt is None or uses[nodes[kt].output[0]] != 1:
            continue
        kh = only_reader(nodes[kt].output[0], "Mul")
        if kh is None or sorted(mul_parts(kh)) != sorted([nodes[kt].output[0], nodes[act[o_part]].output[0]]) \
                or only_reader(nodes[act[o_part]].output[0], "Mul") != kh:
            continue
        h_new = nodes[kh].output[0]
        pattern = {*kg, ka, ks, *act.values(), km_ig, kc, kmf, kt, kh}
        if pattern & (drop | set(replaced)) or len(pattern) != 13 or max(pattern) != kh:
            continue
        if any(r <= kh for r in readers.get(c_new, []) if r not in pattern):
            continue  # c' read before h' is computed: the fused node could not stand at h'
        # W applies to the input whose width is not H (either one when both are)
        (x0, w0, b0), (x1, w1, b1) = gs
        if w1.shape[1] != H:
            (x0, w0, b0), (x1, w1, b1) = (x1, w1, b1), (x0, w0, b0)
        if w1.shape[1] != H or not _one_batch(known, (x0, x1, c_prev)):
            continue
        order = [i_part, o_part, f_part, g_part]  # ONNX's iofc
        dt = known[nodes[kg[0]].input[1]].dtype

        def gates(m):
            return np.concatenate([m[j * H:(j + 1) * H] for j in order])

        count += 1
        base = f"{h_new}::lstm_cell{count}"
        _step_consts(env, known, base, gates(w0), gates(w1), np.concatenate([gates(b0), gates(b1)]), dt)
        name = nodes[kh].name or h_new
        new = [helper.make_node("Reshape", [x0, f"{base}/in3"], [f"{base}/x"], name=f"{name}/x"),
               helper.make_node("Reshape", [x1, f"{base}/st3"], [f"{base}/h"], name=f"{name}/h"),
               helper.make_node("Reshape", [c_prev, f"{base}/st3"], [f"{base}/c"], name=f"{name}/c"),
               helper.make_node("LSTM", [f"{base}/x", f"{base}/W", f"{base}/R", f"{base}/B", "", f"{base}/h",
                                         f"{base}/c"], ["", f"{base}/Y_h", f"{base}/Y_c"], name=name,
                                hidden_size=H),
               helper.make_node("Reshape", [f"{base}/Y_h", f"{base}/st2"], [h_new], name=f"{name}/h'"),
               helper.make_node("Reshape", [f"{base}/Y_c", f"{base}/st2"], [c_new], name=f"{name}/c'")]
        replaced[kh] = new  # at the last node of the pattern: every input is ready there
        drop |= pattern - {kh}
    return _splice(nodes, replaced, drop)


def _gru_h_parts(ix: _Index, gh_parts: dict, H: int, third):
    """The nodes cutting the recurrent product into a GRU's three parts, the product's name and
    which third each role reads: three ``Slice`` nodes of one value read three times (tf2onnx),
    or one ``Split`` in three equal parts along the last axis of a value read once (PyTorch's
    ``GRUCell``); ``([], None, {})`` when neither."""
    nodes, uses = ix.nodes, ix.uses
    slices = {j: ix.made_by(v, "Slice") for j, v in gh_parts.items()}
    if None not in slices.values():
        name = nodes[slices[next(iter(slices))]].input[0]
        if uses[name] == 3:
            return list(slices.values()), name, {j: third(k, name, H) for j, k in slices.items()}
    splits = {ix.made_by(v, "Split") for v in gh_parts.values()}
    if len(splits) == 1 and None not in splits:
        k = splits.pop()
        sp = nodes[k]
        if len(sp.output) == 3 and int(_attr(sp, "axis", 0)) in (1, -1) and _equal_split(sp, ix.known, H) \
                and uses[sp.input[0]] == 1:
            return [k], sp.input[0], {j: list(sp.output).index(v) for j, v in gh_parts.items()}
    return [], None, {}


def _same_value(known: dict, a: str, b: str) -> bool:
    """Whether value names ``a`` and ``b`` are one value: the same name, or both known at load
    time with equal shapes and contents (PyTorch writes a zero initial state twice)."""
    if a == b:
        return True
    va, vb = known.get(a), known.get(b)
    return isinstance(va, np.ndarray) and isinstance(vb, np.ndarray) and va.shape == vb.shape \
        and bool(np.array_equal(va, vb))


def _gru_update(ix: _Index, z: str, n: str, h: str) -> list[int] | None:
    """The nodes computing a GRU's new state from its update gate ``z``, candidate ``n`` and
    state ``h`` (the last one making ``h'``), or None: ``z * h + (1 - z) * n`` (tf2onnx: Mul,
    Sub, Mul, Add) or ``(h - n) * z + n`` (PyTorch's ``GRUCell``: Sub, Mul, Add); operands of
    the commutative ops in any order, each intermediate value read only inside."""
    nodes, uses, readers, known = ix.nodes, ix.uses, ix.readers, ix.known
    if uses[z] == 2 and uses[n] == 1:
        kzh = ksub = None
        for r in readers.get(z, []):
            one = known.get(nodes[r].input[0])
            rest = list(nodes[r].input)
            if nodes[r].op_type == "Mul" and len(rest) == 2 and z in rest:
                rest.remove(z)
                if _same_value(known, rest[0], h):
                    kzh = r
            elif nodes[r].op_type == "Sub" and nodes[r].input[1] == z and isinstance(one, np.ndarray) \
                    and one.size == 1 and float(one.reshape(-1)[0]) == 1.0:
                ksub = r
        if kzh is None or ksub is None or uses[nodes[kzh].output[0]] != 1:
            return None
        kzn = ix.sole_reader(nodes[ksub].output[0], "Mul")
        if kzn is None or uses[nodes[kzn].output[0]] != 1 \
                or sorted(nodes[kzn].input) != sorted([nodes[ksub].output[0], n]) or ix.sole_reader(n, "Mul") != kzn:
            return None
        kout = ix.sole_reader(nodes[kzh].output[0], "Add")
        if kout is None or sorted(nodes[kout].input) != sorted([nodes[kzh].output[0], nodes[kzn].output[0]]):
            return None
        return [kzh, ksub, kzn, kout]
    if uses[z] == 1 and uses[n] == 2:
        ksub = next((r for r in readers.get(n, []) if nodes[r].op_type == "Sub" and nodes[r].domain in _DEFAULT
                     and len(nodes[r].input) == 2 and nodes[r].input[1] == n
                     and _same_value(known, nodes[r].input[0], h)), None)
        if ksub is None or uses[nodes[ksub].output[0]] != 1:
            return None
        kmul = ix.sole_reader(nodes[ksub].output[0], "Mul")
        if kmul is None or sorted(nodes[kmul].input) != sorted([nodes[ksub].output[0], z]) \
                or ix.sole_reader(z, "Mul") != kmul or uses[nodes[kmul].output[0]] != 1:
            return None
        kout = ix.sole_reader(nodes[kmul].output[0], "Add")
        if kout is None or sorted(nodes[kout].input) != sorted([nodes[kmul].output[0], n]):
            return None
        return [ksub, kmul, kout]
    return None


def fuse_gru_cell(nodes, env: dict, outputs) -> list:
    """Write one step of a gated recurrent unit spelled out in ONNX operators (Keras' GRU cell
    with ``reset_after=True``, as tf2onnx writes it; PyTorch's ``nn.GRUCell``, as both of its
    exporters write it) as a ``GRU`` node of one time step with ``linear_before_reset=1``.

    The pattern, each intermediate value read only inside it::

        gx = Gemm(x, Wx, bx); gx_0, gx_1, gx_2 = Split(gx, 3 equal parts along the last axis)
        gh = Gemm(h, Wh, bh); gh_j = Slice(gh, the j-th third of the last axis)  # read 3 times
                          or gh_0, gh_1, gh_2 = Split(gh, 3 equal parts along the last axis)
        z = Sigmoid(gx_a + gh_a'); r = Sigmoid(gx_b + gh_b')                  # any operand order
        n = Tanh(gx_c + r * gh_c')
        h' = z * h + (1 - z) * n        or        h' = (h - n) * z + n

    where the parts are told apart by their roles, the Gemm weights and biases are known and
    ``h`` is the second Gemm's input (or a known value equal to it: PyTorch writes a zero
    initial state as two constants). It becomes ``GRU`` (``hidden_size`` H, gates in ONNX's
    ``zrh`` order) between reshapes to and from its ``[1, batch, .]`` layout: the same
    products, sums and activations in one recurrent kernel. ``h'`` may be read anywhere.

    Arguments and result as :func:`fuse_lstm_cell`'s.
    """
    from onnx import helper

    ix = _Index(nodes, env, outputs)
    nodes, known, uses, readers = ix.nodes, ix.known, ix.uses, ix.readers
    node, sole_reader = ix.made_by, ix.sole_reader

    def other(k, name):
        ins = list(nodes[k].input)
        return ins[1 - ins.index(name)] if len(ins) == 2 and name in ins and ins[0] != ins[1] else None

    def third(k, gh, H):
        """Which third (0-2) of ``gh``'s last axis Slice node ``k`` takes, or None."""
        p = nodes[k]
        if p.op_type != "Slice" or p.input[0] != gh or len(p.input) < 4 or (len(p.input) > 4 and p.input[4]):
            return None
        st, en, ax = (known.get(i) for i in p.input[1:4])
        if not all(isinstance(v, np.ndarray) for v in (st, en, ax)) or not st.size == en.size == ax.size:
            return None
        part = None
        for a, b, e in zip(ax.reshape(-1), st.reshape(-1), en.reshape(-1)):
            if int(a) in (1, -1) and int(b) % H == 0 and min(int(e), 3 * H) == int(b) + H:
                part = int(b) // H
            elif int(a) not in (0, -2) or int(b) != 0 or int(e) < 2 ** 31 - 1:
                return None
        return part

    count = 0
    replaced: dict[int, list] = {}
    drop: set[int] = set()
    for ks, split in enumerate(nodes):
        if split.op_type != "Split" or split.domain not in _DEFAULT or len(split.output) != 3 \
                or int(_attr(split, "axis", 0)) not in (1, -1):
            continue
        kx = node(split.input[0], "Gemm")
        gx = _plain_gemm(nodes[kx], known) if kx is not None and uses[split.input[0]] == 1 else None
        if gx is None or gx[1].shape[0] % 3:
            continue
        H = gx[1].shape[0] // 3
        if not _equal_split(split, known, H):
            continue
        adds = [sole_reader(o, "Add") for o in split.output]
        if None in adds:
            continue
        acts = [sole_reader(nodes[k].output[0], "Sigmoid", "Tanh") for k in adds]
        if None in acts or sorted(nodes[k].op_type for k in acts) != ["Sigmoid", "Sigmoid", "Tanh"]:
            continue
        jn = next(j for j in range(3) if nodes[acts[j]].op_type == "Tanh")
        km = node(other(adds[jn], split.output[jn]), "Mul")
        if km is None or uses[nodes[km].output[0]] != 1:
            continue
        jr = next((j for j in range(3) if j != jn and nodes[acts[j]].output[0] in nodes[km].input), None)
        if jr is None:
            continue
        jz = 3 - jn - jr
        gh_parts = {jz: other(adds[jz], split.output[jz]), jr: other(adds[jr], split.output[jr]),
                    jn: other(km, nodes[acts[jr]].output[0])}
        if any(v is None or uses[v] != 1 for v in gh_parts.values()):
            continue
        gh_nodes, gh_name, parts = _gru_h_parts(ix, gh_parts, H, third)
        kh = node(gh_name, "Gemm") if gh_name is not None else None
        gh = _plain_gemm(nodes[kh], known) if kh is not None else None
        if gh is None or gh[1].shape != (3 * H, H) or sorted(parts.values()) != [0, 1, 2] \
                or uses[nodes[acts[jr]].output[0]] != 1:
            continue
        z, n, h = nodes[acts[jz]].output[0], nodes[acts[jn]].output[0], gh[0]
        update = _gru_update(ix, z, n, h)
        if update is None:
            continue
        kout = update[-1]
        pattern = {kx, ks, *adds, *acts, km, *gh_nodes, kh, *update}
        if pattern & (drop | set(replaced)) or len(pattern) != 10 + len(gh_nodes) + len(update) \
                or max(pattern) != kout:
            continue
        (x, wx, bx), (_, wh, bh) = gx, gh
        if not _one_batch(known, (x, h)):
            continue
        dt = known[nodes[kx].input[1]].dtype
        roles = [jz, jr, jn]  # ONNX's zrh

        def x_gates(m):
            return np.concatenate([m[j * H:(j + 1) * H] for j in roles])

        def h_gates(m):
            return np.concatenate([m[parts[j] * H:(parts[j] + 1) * H] for j in roles])

        count += 1
        h_new = nodes[kout].output[0]
        base = f"{h_new}::gru_cell{count}"
        _step_consts(env, known, base, x_gates(wx), h_gates(wh), np.concatenate([x_gates(bx), h_gates(bh)]), dt)
        name = nodes[kout].name or h_new
        replaced[kout] = [
            helper.make_node("Reshape", [x, f"{base}/in3"], [f"{base}/x"], name=f"{name}/x"),
            helper.make_node("Reshape", [h, f"{base}/st3"], [f"{base}/h"], name=f"{name}/h"),
            helper.make_node("GRU", [f"{base}/x", f"{base}/W", f"{base}/R", f"{base}/B", "", f"{base}/h"],
                             ["", f"{base}/Y_h"], name=name, hidden_size=H, linear_before_reset=1),
            helper.make_node("Reshape", [f"{base}/Y_h", f"{base}/st2"], [h_new], name=f"{name}/h'")]
        drop |= pattern - {kout}
    return _splice(nodes, replaced, drop)


def split_gemm_accumulate(nodes, env: dict, outputs) -> list:
    """Write a Gemm that accumulates a second product, then adds a known bias, as the sum of
    two Gemms (tf2onnx's spelling of a TensorFlow LSTM cell's two products, which
    :func:`fuse_lstm_cell` then takes)::

        Gemm(x, W, C = [Reshape](MatMul(h, R))) + b   ->   Gemm(x, W, b) + Gemm(Reshape(h, [-1, K]), R)

    where the Gemm has alpha = beta = 1 and transA = 0, ``W``, ``R`` (2-D, ``[K, N]``) and
    ``b`` (``[N]`` or ``[1, N]``) are known, the Reshape (if any) is to ``[N]`` or ``[M, N]``,
    and the Gemm's and MatMul's outputs are read only here. The same products; the sum
    ``x W + h R + b`` is taken as ``(x W + b) + h R``.

    Arguments and result as :func:`fuse_lstm_cell`'s.
    """
    from onnx import helper

    ix = _Index(nodes, env, outputs)
    nodes, known, uses = ix.nodes, ix.known, ix.uses

    def prod(name, op):
        """The node making ``name`` (read once) when it is an ``op``, else None."""
        k = ix.made_by(name, op)
        return k if k is not None and uses[name] == 1 else None

    replaced: dict[int, list] = {}
    drop: set[int] = set()
    for ka, add in enumerate(nodes):
        if add.op_type != "Add" or add.domain not in _DEFAULT or len(add.input) != 2:
            continue
        kg = b = None
        for j in (0, 1):
            kg, b = prod(add.input[j], "Gemm"), known.get(add.input[1 - j])
            if kg is not None and isinstance(b, np.ndarray) and b.dtype.kind == "f":
                break
        else:
            continue
        g = nodes[kg]
        w = known.get(g.input[1]) if len(g.input) > 1 else None
        if len(g.input) != 3 or not g.input[2] or not isinstance(w, np.ndarray) or w.ndim != 2 \
                or float(_attr(g, "alpha", 1.0)) != 1.0 or float(_attr(g, "beta", 1.0)) != 1.0 \
                or int(_attr(g, "transA", 0)):
            continue
        n_out = w.shape[0] if int(_attr(g, "transB", 0)) else w.shape[1]
        if b.shape not in ((n_out,), (1, n_out)):
            continue
        chain, c_name = [], g.input[2]
        kr = prod(c_name, "Reshape")
        if kr is not None:
            shape = known.get(nodes[kr].input[1])
            if not isinstance(shape, np.ndarray) or shape.ndim != 1 or shape.size not in (1, 2) \
                    or int(shape[-1]) != n_out or (shape.size == 2 and int(shape[0]) <= 0):
                continue
            chain, c_name = [kr], nodes[kr].input[0]
        km = prod(c_name, "MatMul")
        r = known.get(nodes[km].input[1]) if km is not None else None
        if not isinstance(r, np.ndarray) or r.ndim != 2 or r.shape[1] != n_out or r.dtype.kind != "f" \
                or {km, kg, *chain} & (drop | set(replaced)):
            continue
        y = add.output[0]
        base = f"{y}::split_gemm"
        env[f"{base}/k"] = np.array([-1, r.shape[0]], np.int64)
        name = add.name or y
        replaced[ka] = [
            helper.make_node("Gemm", [g.input[0], g.input[1], add.input[1 - list(add.input).index(g.output[0])]],
                             [f"{base}/xw"], name=f"{name}/xw", transB=int(_attr(g, "transB", 0))),
            helper.make_node("Reshape", [nodes[km].input[0], f"{base}/k"], [f"{base}/h"], name=f"{name}/h"),
            helper.make_node("Gemm", [f"{base}/h", nodes[km].input[1]], [f"{base}/hr"], name=f"{name}/hr"),
            helper.make_node("Add", [f"{base}/xw", f"{base}/hr"], [y], name=name)]
        drop |= {km, kg, *chain}
    return _splice(nodes, replaced, drop)


def _is_scalar(v, target: float) -> bool:
    """``v`` is a known float scalar (shape ``[]`` or ``[1]``, as ONNX Runtime's fusions take)
    within two units in the last place of its type of ``target``."""
    if not isinstance(v, np.ndarray) or v.dtype.kind != "f" or v.size != 1 or v.ndim > 1:
        return False
    return abs(float(v.reshape(-1)[0]) - target) <= 2 * float(np.finfo(v.dtype).eps) * abs(target)


def fuse_erf_gelu(nodes, env: dict, outputs) -> list:
    """Write the exact GELU spelled with ``Erf`` as one ``Gelu`` node (PyTorch's TorchScript
    exporter writes ``F.gelu`` so before opset 20, as ONNX Runtime's GeluFusion reads it)::

        y = x * (Erf(x / sqrt(2)) + 1) * 0.5   ->   y = Gelu(x)

    ``x / sqrt(2)`` as ``Div(x, sqrt 2)`` or ``Mul(x, 1 / sqrt 2)``, ``Erf(.) + 1`` with the
    one on either side, and the two products in either association and order: ``(x * e) *
    0.5``, ``(x * 0.5) * e`` or ``x * (e * 0.5)``. The constants are known float scalars (shape
    ``[]`` or ``[1]``) within 2 units in the last place of their type of sqrt 2, 1 / sqrt 2, 1
    and 0.5; every value between ``x`` and ``y`` is read only by the next node of the pattern
    (not a graph output). Not the tanh form (the compiler takes that one as it is).

    A constant of shape ``[1]`` broadcasts a 0-D ``x`` to ``y`` of shape ``[1]``: the ``Gelu`` is
    then followed by ``Expand(., [1])``, which gives the pattern's shape for ``x`` of any rank
    (the value itself, no kernel, where ``x`` has a rank of at least 1).

    Arguments and result as :func:`fuse_lstm_cell`'s.
    """
    from onnx import helper

    ix = _Index(nodes, env, outputs)
    nodes, known = ix.nodes, ix.known

    def other(k, name):
        """The input of two-input node ``k`` that is not ``name`` (None if both are)."""
        a, b = nodes[k].input
        return b if a == name else a if b == name else None

    replaced: dict[int, list] = {}
    drop: set[int] = set()
    for ke, erf in enumerate(nodes):
        if erf.op_type != "Erf" or erf.domain not in _DEFAULT or ke in drop:
            continue
        kd = ix.made_by(erf.input[0], "Div", "Mul")
        if kd is None or ix.uses[erf.input[0]] != 1 or len(nodes[kd].input) != 2:
            continue
        d = nodes[kd]
        if d.op_type == "Div" and _is_scalar(known.get(d.input[1]), math.sqrt(2)):
            x, consts = d.input[0], [d.input[1]]
        elif d.op_type == "Mul" and _is_scalar(known.get(d.input[1]), 1 / math.sqrt(2)):
            x, consts = d.input[0], [d.input[1]]
        elif d.op_type == "Mul" and _is_scalar(known.get(d.input[0]), 1 / math.sqrt(2)):
            x, consts = d.input[1], [d.input[0]]
        else:
            continue
        ka = ix.sole_reader(erf.output[0], "Add")
        if ka is None or len(nodes[ka].input) != 2 or not _is_scalar(known.get(other(ka, erf.output[0])), 1.0):
            continue
        consts.append(other(ka, erf.output[0]))
        e = nodes[ka].output[0]
        k1 = ix.sole_reader(e, "Mul")
        if k1 is None or len(nodes[k1].input) != 2:
            continue
        m1 = other(k1, e)
        if m1 == x:  # (x * e) * 0.5
            k2 = ix.sole_reader(nodes[k1].output[0], "Mul")
            ok = k2 is not None and len(nodes[k2].input) == 2 and _is_scalar(
                known.get(other(k2, nodes[k1].output[0])), 0.5)
            chain, half = [k1], other(k2, nodes[k1].output[0]) if ok else None
        elif _is_scalar(known.get(m1), 0.5):  # x * (e * 0.5)
            k2 = ix.sole_reader(nodes[k1].output[0], "Mul")
            ok = k2 is not None and len(nodes[k2].input) == 2 and other(k2, nodes[k1].output[0]) == x
            chain, half = [k1], m1
        else:  # (x * 0.5) * e
            kh = ix.made_by(m1, "Mul")
            ok = kh is not None and ix.uses[m1] == 1 and len(nodes[kh].input) == 2 and (
                other(kh, x) is not None and _is_scalar(known.get(other(kh, x)), 0.5))
            k2, chain, half = k1, [kh] if kh is not None else [], other(kh, x) if ok else None
        if not ok or {kd, ke, ka, k2, *chain} & (drop | set(replaced)):
            continue
        y = nodes[k2].output[0]
        name = nodes[k2].name or y
        if all(known[k].ndim == 0 for k in [*consts, half]):
            replaced[k2] = [helper.make_node("Gelu", [x], [y], name=name)]
        else:  # a [1] constant: y is x's shape broadcast with [1]
            base = f"{y}::erf_gelu"
            env[f"{base}/one"] = np.array([1], np.int64)
            replaced[k2] = [helper.make_node("Gelu", [x], [f"{base}/gelu"], name=f"{name}/gelu"),
                            helper.make_node("Expand", [f"{base}/gelu", f"{base}/one"], [y], name=name)]
        drop |= {kd, ke, ka, *chain}
    return _splice(nodes, replaced, drop)


def fuse_hard_sigmoid_swish(nodes, env: dict, outputs) -> list:
    """Write ``x * HardSigmoid(x)`` with ``alpha`` 1/6 and ``beta`` 0.5 as one ``HardSwish``
    node, the function ONNX defines ``HardSwish`` by (PyTorch's TorchScript exporter writes
    ``nn.Hardswish`` so before opset 14)::

        h = HardSigmoid(x, alpha=1/6, beta=0.5); y = Mul(x, h)   ->   y = HardSwish(x)

    ``x`` on either side of the ``Mul``; ``alpha`` and ``beta`` within 2 units in the last place
    of float32 (attributes are float32) of 1/6 and 0.5; ``h`` read only by the ``Mul`` (not a
    graph output). Another ``alpha`` or ``beta``, a ``Mul`` of ``h`` and another value (a
    squeeze-and-excite gate) or ``h`` read elsewhere keep the nodes. The values agree up to
    float rounding (``hard_swish`` computes ``x * clamp(x + 3, 0, 6) / 6``).

    Arguments and result as :func:`fuse_lstm_cell`'s.
    """
    from onnx import helper

    ix = _Index(nodes, env, outputs)
    nodes = ix.nodes
    ulp2 = 2 * float(np.finfo(np.float32).eps)
    replaced: dict[int, list] = {}
    drop: set[int] = set()
    for kh, hs in enumerate(nodes):
        if hs.op_type != "HardSigmoid" or hs.domain not in _DEFAULT or not hs.input or not hs.input[0]:
            continue
        alpha, beta = float(_attr(hs, "alpha", 0.2)), float(_attr(hs, "beta", 0.5))
        if abs(alpha - 1 / 6) > ulp2 / 6 or abs(beta - 0.5) > ulp2 * 0.5:
            continue
        km = ix.sole_reader(hs.output[0], "Mul")
        if km is None or len(nodes[km].input) != 2 or sorted(nodes[km].input) != sorted([hs.input[0], hs.output[0]]):
            continue
        y = nodes[km].output[0]
        replaced[km] = [helper.make_node("HardSwish", [hs.input[0]], [y], name=nodes[km].name or y)]
        drop.add(kh)
    return _splice(nodes, replaced, drop)


def rewrite(nodes, env: dict, outputs) -> list:
    """Every load-time rewrite of this module, in order, on one graph's node list
    (:func:`split_gemm_accumulate`, :func:`fuse_lstm_cell`, :func:`fuse_gru_cell`,
    :func:`fuse_erf_gelu`, :func:`fuse_hard_sigmoid_swish`, then :func:`fold_conv_affine`;
    ``WEBNN_GPU_FORCE_SPLIT_GEMM=off`` skips the first, ``WEBNN_GPU_FORCE_GRU_CELL=off`` the third,
    ``WEBNN_GPU_FORCE_ERF_GELU=off`` the fourth, ``WEBNN_GPU_FORCE_HARD_SIGMOID_SWISH=off`` the
    fifth, read at each call)."""
    from .. import _env

    if _env.force_choice("split_gemm", ("off",)) != "off":
        nodes = split_gemm_accumulate(nodes, env, outputs)
    nodes = fuse_lstm_cell(nodes, env, outputs)
    if _env.force_choice("gru_cell", ("off",)) != "off":
        nodes = fuse_gru_cell(nodes, env, outputs)
    if _env.force_choice("erf_gelu", ("off",)) != "off":
        nodes = fuse_erf_gelu(nodes, env, outputs)
    if _env.force_choice("hard_sigmoid_swish", ("off",)) != "off":
        nodes = fuse_hard_sigmoid_swish(nodes, env, outputs)
    return fold_conv_affine(nodes, env, outputs)
