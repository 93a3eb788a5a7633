"""Canonical forms: an operator rewritten as an equivalent one that later rules fuse, and
identical nodes computed once.

Same contract as the other rules of :mod:`webnn_gpu.compiler`: ``(nodes, outputs, context=None)
-> nodes``, never mutating a node it receives, firing only where the result is the same.

* :func:`depthwise_to_scale`: a 1x1 depthwise conv2d (one filter value per channel) is a
  per-channel ``mul`` and ``add``, which the producing kernel takes as epilogue steps.
* :func:`mean_to_pool`: a ``reduce_mean`` over the two spatial axes of a 4-D value is a
  global ``average_pool2d`` (the same reduction kernels), which the pool rules fuse.
* :func:`sum_to_mean`: a ``reduce_sum`` scaled by exactly one over its count is a
  ``reduce_mean`` (the sum kept in float32 until it is divided).
* :func:`merge_duplicates`: two nodes with the same operator, operands and attributes
  compute the same value: the later one's readers read the first one's.
* :func:`self_add_to_scale`: ``add(x, x)`` is ``mul(x, 2)``, a step with a constant operand
  that the producing kernel takes as its epilogue.
* :func:`sink_reshapes`: an element-wise operator after a ``reshape`` runs before it, next to
  the kernel that makes the value (whose epilogue then takes it).
* :func:`merge_reshapes`: a ``reshape`` of a ``reshape`` is one reshape, and a reshape to its
  input's own shape is its input.
"""

from __future__ import annotations

import logging

import numpy as np

from ..._env import DEBUG
from ..._ir import GraphView, Node, Value

log = logging.getLogger("webnn_gpu")

__all__ = ["depthwise_to_scale", "scale_chain", "mean_to_pool", "merge_duplicates", "merge_reshapes", "self_add_to_scale",
           "sink_reshapes", "sum_to_mean"]


def _host_data(v, data_type: str) -> bool:
    return v is not None and v.kind == "constant" and v.data is not None and v.data_type == data_type


def _plain(node) -> bool:
    """Whether ``node`` carries no fusion of an earlier rule (an epilogue, a prologue, a second
    output): its attributes are the builder's."""
    from ...ops.conv import INPUT_PROLOGUES

    return (isinstance(node.attrs, dict) and len(node.outputs) == 1
            and not any(k in node.attrs for k in ("epilogue", "input_partials", "pool_output", *INPUT_PROLOGUES)))


def scale_chain(conv) -> list[Node] | None:
    """For a 1x1 depthwise ``conv2d(x, filter, bias)`` (groups = input channels = output
    channels, one filter value per channel, unit strides, no padding, a float filter and bias
    that are host data of the conv's data type, no fusion of an earlier rule): the equivalent
    ``mul(x, w)`` (and ``add(., b)`` with a bias) with the filter and bias as per-channel
    constants shaped for the input layout (``[1, 1, 1, C]`` NHWC, ``[1, C, 1, 1]`` NCHW),
    the last node producing the conv's output; else None."""
    if conv.op != "conv2d" or not _plain(conv) or len(conv.inputs) > 3:
        return None
    x, w = conv.inputs[0], conv.inputs[1]
    b = conv.inputs[2] if len(conv.inputs) > 2 else None
    y = conv.outputs[0]
    a = conv.attrs
    dt = y.data_type
    if dt not in _SCALE_TYPES or x.data_type != dt or len(x.shape) != 4:
        return None
    nhwc = a.get("input_layout", "nchw") == "nhwc"
    C = x.shape[3 if nhwc else 1]
    if (tuple(y.shape) != tuple(x.shape) or a.get("groups") != C or w.size != C or b is not None and b.size != C
            or list(a.get("strides", [1, 1])) != [1, 1] or list(a.get("padding", [0] * 4)) != [0] * 4
            or sorted(w.shape) != [1, 1, 1, C]):
        return None  # (a 1x1 filter of one input channel per group has the output channels as its only axis)
    if not _host_data(w, dt) or (b is not None and not _host_data(b, dt)):
        return None
    shape = (1, 1, 1, C) if nhwc else (1, C, 1, 1)
    npt = _SCALE_TYPES[dt]
    scale = Value(dt, shape, "constant", data=np.ascontiguousarray(w.data, dtype=npt).reshape(-1))
    mid = y if b is None else Value(dt, tuple(y.shape), "op")
    chain = [Node("mul", [x, scale], [mid], {}, conv.label)]
    if b is not None:
        mid.producer = chain[0]
        shift = Value(dt, shape, "constant", data=np.ascontiguousarray(b.data, dtype=npt).reshape(-1))
        chain.append(Node("add", [mid, shift], [y], {}, conv.label))
    return chain


#: Data types :func:`scale_chain` takes, with their host data's NumPy type.
_SCALE_TYPES = {"float32": np.float32, "float16": np.float16}


def depthwise_to_scale(nodes: list, outputs: dict, context=None) -> list:
    """``conv2d(x, filter, bias)`` with a 1x1 window, one filter per input channel and one
    output channel per group (``groups`` = input channels = output channels), unit strides and
    no padding computes ``x * w[c] + b[c]`` for each element: it becomes ``mul(x, w)`` and
    ``add(., b)`` with the filter and bias as per-channel constants shaped for the input
    layout (:func:`scale_chain`). ``fuse_epilogue`` then gives them to
    the kernel producing ``x`` (two epilogue steps reading one value per channel) or
    ``fuse_elementwise`` merges them with their element-wise neighbours: one kernel less, and
    no pass over the tensor. (TFLite models scale channels after an activation with such a
    conv; the conv kernel's one product and the bias add are the same two float32 roundings.)

    Not rewritten: float16 (the kernels round an epilogue once, two element-wise kernels
    twice: ``fuse_epilogue`` and the side maps take float16's such convs as the two steps
    where they take them whole), a filter or bias that is not host data, a conv with a
    fusion of an earlier rule, a channel multiplier above 1, strides, padding or a window
    larger than 1x1.
    """
    replaced: dict[int, list[Node]] = {}
    for conv in nodes:
        if conv.op != "conv2d" or conv.outputs[0].data_type != "float32":
            continue
        chain = scale_chain(conv)
        if chain is None:
            continue
        replaced[conv.id] = chain
        if DEBUG >= 2:
            log.debug("depthwise_to_scale: conv2d [%s] as a per-channel mul%s", conv.label, " and add" * (len(chain) > 1))
    return GraphView(nodes, outputs).replace(replaced) if replaced else nodes


def mean_to_pool(nodes: list, outputs: dict, context=None) -> list:
    """``reduce_mean(x, axes)`` of a float 4-D ``x`` over its two spatial axes (``[1, 2]``, the
    NHWC layout, or ``[2, 3]``, NCHW) becomes the global ``average_pool2d`` of that layout
    (followed by a ``reshape``, a view, when the reduction drops the axes). Both lower to the
    same reduction kernels; as a pool, the rules that take global average pools apply:
    ``fuse_pool_input`` (a skip add summed as it loads), ``fuse_conv_pool`` and
    ``fuse_pool_partials`` (the producer's partial sums) and ``fuse_squeeze_excite`` (the
    means taken into the excitation's kernel). TFLite's converter writes Keras'
    ``GlobalAveragePooling2D`` and squeeze-and-excite's pool as ``MEAN``.

    Not rewritten: other axes (a mean over the channels, or over one spatial axis), other
    ranks, integer data, a ``reduce_mean`` with a fusion of an earlier rule."""
    replaced: dict[int, list[Node]] = {}
    for red in nodes:
        if red.op != "reduce_mean" or not _plain(red) or len(red.inputs) != 1:
            continue
        x, y = red.inputs[0], red.outputs[0]
        if len(x.shape) != 4 or x.data_type not in ("float32", "float16") or y.data_type != x.data_type:
            continue
        axes = sorted(int(d) % 4 for d in red.attrs.get("axes", ()))
        if axes == [1, 2]:
            layout, hw = "nhwc", (x.shape[1], x.shape[2])
        elif axes == [2, 3]:
            layout, hw = "nchw", (x.shape[2], x.shape[3])
        else:
            continue
        pooled = tuple(1 if d in axes else s for d, s in enumerate(x.shape))
        out = y if tuple(y.shape) == pooled else Value(y.data_type, pooled, "op")
        pool = Node("average_pool2d", [x], [out], {"window": list(hw), "padding": [0, 0, 0, 0], "strides": [1, 1],
                                                   "dilations": [1, 1], "layout": layout}, red.label)
        chain = [pool]
        if out is not y:
            out.producer = pool
            chain.append(Node("reshape", [out], [y], {}, red.label))
        replaced[red.id] = chain
        if DEBUG >= 2:
            log.debug("mean_to_pool: reduce_mean [%s] as a global %s average pool", red.label, layout)
    return GraphView(nodes, outputs).replace(replaced) if replaced else nodes


def sum_to_mean(nodes: list, outputs: dict, context=None) -> list:
    """``mul(reduce_sum(x, axes), c)`` of float ``x``, where ``c`` is a host-data scalar equal
    to exactly ``1 / n`` (``n`` the number of elements each sum adds, a power of two) and the
    product is the sum's only reader, becomes ``reduce_mean(x, axes)``; so does
    ``div(reduce_sum(x, axes), n)``. (jax2tf writes a mean so: a decomposed layer
    normalization's ``sum(x) / n`` and ``sum(x * x) / n``.) The mean kernel divides its float32
    sum by ``n`` before it stores: in float16 it rounds once where the two kernels round the
    sum to float16 before they scale it, and a sum past float16's largest value (65504) is
    +inf there but not here (the sum of squares of 512 values of magnitude 20). In float32
    the result is the same number (the same float32 sum scaled exactly by a power of two) in
    one kernel instead of a sum and a product.

    Not rewritten: a count that is not a power of two (its reciprocal is rounded; a quotient
    and a product by the reciprocal may differ in float32's last bit), ``c`` other than
    ``1 / n`` (or ``n`` for a quotient), a ``c`` that is not one host-data value, a sum read elsewhere or
    a graph output, a product that broadcasts the sum to a larger shape, ``n / sum``, a
    ``reduce_sum`` with a fusion of an earlier rule, integer data."""
    g = GraphView(nodes, outputs)
    replaced: dict[int, Node] = {}
    dropped: list[int] = []
    for red in nodes:
        if red.op != "reduce_sum" or not _plain(red) or len(red.inputs) != 1:
            continue
        x, s = red.inputs[0], red.outputs[0]
        if x.data_type not in ("float32", "float16") or s.data_type != x.data_type:
            continue
        scale = g.sole_consumer(s)
        if scale is None or scale.op not in ("mul", "div") or not _plain(scale) or len(scale.inputs) != 2:
            continue
        if scale.op == "div" and scale.inputs[0] is not s:
            continue
        c = scale.inputs[1] if scale.inputs[0] is s else scale.inputs[0]
        if (c is s or not _host_data(c, x.data_type) or c.data.size != 1
                or tuple(scale.outputs[0].shape) != tuple(s.shape)):
            continue
        n = int(np.prod([x.shape[a] for a in red.attrs["axes"]], dtype=np.int64))
        value = float(c.data.reshape(-1)[0])
        if n & (n - 1) or (value * n if scale.op == "mul" else value / n) != 1.0:
            continue  # (a power of two: a float32 sum scaled by 1/n is the same number however computed)
        replaced[scale.id] = Node("reduce_mean", [x], [scale.outputs[0]], dict(red.attrs), red.label)
        dropped.append(red.id)
        if DEBUG >= 2:
            log.debug("sum_to_mean: reduce_sum [%s] / %d as reduce_mean", red.label, n)
    return g.replace(replaced, dropped) if replaced else nodes


def _key(node):
    """A hashable key of what ``node`` computes (operator, operand ids, attributes), or None
    when its attributes are not plain data the key can hold."""
    def freeze(x):
        if isinstance(x, dict):
            return tuple(sorted((k, freeze(v)) for k, v in x.items()))
        if isinstance(x, (list, tuple)):
            return tuple(freeze(v) for v in x)
        if isinstance(x, (str, int, float, bool)) or x is None:
            return (type(x).__name__, x)
        raise TypeError

    if not isinstance(node.attrs, dict) or len(node.outputs) != 1:
        return None
    try:
        attrs = freeze(node.attrs)
    except TypeError:  # (a NumPy array, a typed fused attribute: not compared)
        return None
    ins = tuple(None if v is None else v.id for v in node.inputs)
    out = node.outputs[0]
    return node.op, ins, attrs, out.data_type, tuple(out.shape)


#: operators whose result depends on nothing but their operands and attributes, computed by a
#: kernel (not a view): two of them over the same operands compute the same value
_PURE = {"max_pool2d", "average_pool2d", "l2_pool2d", "conv2d", "conv_transpose2d", "matmul", "gemm",
         "resample2d", "concat", "pad", "slice", "transpose", "reduce_mean", "reduce_max", "reduce_min",
         "reduce_sum", "softmax", "relu", "sigmoid", "tanh", "clamp", "add", "sub", "mul", "div", "max", "min",
         "prelu", "leaky_relu", "hard_swish", "elu", "gelu", "abs", "neg", "exp", "log", "sqrt"}


def merge_duplicates(nodes: list, outputs: dict, context=None) -> list:
    """Two nodes of the same operator over the same operand values with equal attributes (plain
    data) and the same output type compute the same value: the later one is dropped and its
    readers read the earlier one's output (common subexpressions; MediaPipe's face landmark
    model max-pools one tensor twice with the same window). Applies to the operators of
    ``_PURE`` with one output. A later node that is a graph output stays (the output keeps its
    own value), as does anything whose attributes hold arrays or typed fused attributes."""
    g = GraphView(nodes, outputs)
    first: dict = {}
    alias: dict[int, Value] = {}  # id of a dropped node's output -> the value that replaces it
    for node in nodes:
        if node.op not in _PURE:
            continue
        if any(v is not None and v.id in alias for v in node.inputs):
            continue  # (its operands are renamed below; a second round would compare it: one pass is enough)
        key = _key(node)
        if key is None:
            continue
        if key in first and not g.is_output(node.outputs[0]):
            alias[node.outputs[0].id] = first[key].outputs[0]
            continue
        first.setdefault(key, node)
    if not alias:
        return nodes
    result = []
    for node in nodes:
        if node.outputs and node.outputs[0].id in alias:
            if DEBUG >= 2:
                log.debug("merge_duplicates: %s [%s] is computed already", node.op, node.label)
            continue
        if any(v is not None and v.id in alias for v in node.inputs):
            node = Node(node.op, [alias.get(v.id, v) if v is not None else None for v in node.inputs],
                        list(node.outputs), node.attrs, node.label)
        result.append(node)
    return result


def self_add_to_scale(nodes: list, outputs: dict, context=None) -> list:
    """``add(x, x)`` of float ``x`` becomes ``mul(x, 2)`` with a one-value constant: the same
    number for every ``x`` (doubling is exact in binary floating point, infinities, NaNs and an
    overflow to infinity included), and ``fuse_epilogue`` gives a product by a constant to the
    kernel producing ``x``, where an add reading the producer's output twice stayed a kernel
    of its own. (TensorFlow's converter merges Keras' two identical pools of NASNet's normal
    cell into one, leaving ``add(pool(p), pool(p))`` with the same operand twice;
    :func:`merge_duplicates` makes the same form.)

    Not rewritten: integer data, two different operands, an add with a fusion of an earlier
    rule, an output whose type or shape is not ``x``'s."""
    replaced: dict[int, Node] = {}
    for node in nodes:
        if node.op != "add" or not _plain(node) or len(node.inputs) != 2 or node.inputs[0] is not node.inputs[1]:
            continue
        x, y = node.inputs[0], node.outputs[0]
        if (x is None or x.data_type not in _SCALE_TYPES or y.data_type != x.data_type
                or tuple(y.shape) != tuple(x.shape)):
            continue
        two = Value(x.data_type, (), "constant", data=np.array([2.0], dtype=_SCALE_TYPES[x.data_type]))
        replaced[node.id] = Node("mul", [x, two], [y], {}, node.label)
        if DEBUG >= 2:
            log.debug("self_add_to_scale: add [%s] of one value twice as mul by 2", node.label)
    return GraphView(nodes, outputs).replace(replaced) if replaced else nodes


def _view_reshape(node) -> bool:
    """Whether ``node`` is a ``reshape`` as the builder records it or a rule adds it (a view:
    no attributes but ``alias``), not a rule's marked view of an operand (``operand_view``)."""
    return (node.op == "reshape" and len(node.inputs) == 1 and len(node.outputs) == 1
            and isinstance(node.attrs, dict) and set(node.attrs) <= {"alias"})


def merge_reshapes(nodes: list, outputs: dict, context=None) -> list:
    """``reshape(reshape(x))`` reads ``x`` itself (one reshape: the row-major order is the same
    through both), and a reshape to its input's own shape is dropped, its readers reading the
    input. A reshape left read by nothing (not a graph output) goes too. A rule that asks
    whether a value is read by one node only, or what produced it, then sees through such
    chains: Keras' ``GlobalAveragePooling2D`` in a squeeze-and-excite block is a ``MEAN``
    dropping the spatial axes and a ``RESHAPE`` restoring them, which ``mean_to_pool`` made a
    pool, a reshape to ``[1, C]`` and the ``RESHAPE`` back to ``[1, 1, 1, C]``: the excitation's
    first conv then reads the pool itself, and ``fuse_squeeze_excite`` takes the depthwise conv's
    partial sums instead of a separate column reduction.

    Not changed: a reshape that is a graph output (the output keeps its own value; a reshape
    of it still reads its input), a reshape with a rule's marks (``operand_view``), any other
    operator between two reshapes."""
    producer: dict[int, Node] = {}  # output id -> a kept view reshape (rewritten to read its root)
    out_ids = {v.id for v in outputs.values()}
    alias: dict[int, Value] = {}  # id of a dropped identity reshape's output -> its input
    result: list[Node] = []
    for node in nodes:
        if any(v is not None and v.id in alias for v in node.inputs):
            node = Node(node.op, [alias.get(v.id, v) if v is not None else None for v in node.inputs],
                        list(node.outputs), node.attrs, node.label)
        if _view_reshape(node):
            x, y = node.inputs[0], node.outputs[0]
            inner = producer.get(x.id)
            if inner is not None:
                x = inner.inputs[0]
                node = Node("reshape", [x], [y], node.attrs, node.label)
            if tuple(x.shape) == tuple(y.shape) and x.data_type == y.data_type and y.id not in out_ids:
                alias[y.id] = x
                if DEBUG >= 2:
                    log.debug("merge_reshapes: reshape [%s] to its input's shape is its input", node.label)
                continue
            producer[y.id] = node
        result.append(node)
    # reshapes no node reads any more (their readers now read what they reshape)
    read = set(out_ids)
    kept: list[Node] = []
    for node in reversed(result):
        if _view_reshape(node) and node.outputs[0].id not in read:
            continue
        read.update(v.id for v in node.inputs if v is not None)
        kept.append(node)
    kept.reverse()
    if len(kept) == len(nodes) and all(a is b for a, b in zip(kept, nodes)):
        return nodes
    return kept


#: most reshapes one call moves (each move is one element-wise op; a chain moves one op per round)
_SINK_ROUNDS = 16


def _sink_operand(operand, x, y):
    """How the other operand of an element-wise op on ``y = reshape(x)`` is read on ``x``'s
    shape: ``"same"`` (it broadcasts to ``x`` the way it did to ``y``: a single value, or it
    varies only along trailing axes that ``x`` and ``y`` share), ``"view"`` (it has ``y``'s
    shape: a reshape view to ``x``'s), or None."""
    shp = tuple(operand.shape)
    core = shp[next((i for i, d in enumerate(shp) if d != 1), len(shp)):]  # leading 1s dropped
    if not core:
        return "same" if len(shp) <= len(x.shape) else None
    k = len(core)
    if k <= len(x.shape) and tuple(x.shape[-k:]) == tuple(y.shape[-k:]) == core and len(shp) <= len(x.shape):
        return "same"
    if shp == tuple(y.shape):
        return "view"
    return None


def sink_reshapes(nodes: list, outputs: dict, context=None) -> list:
    """``op(reshape(x), ...)``, a float element-wise operator (unary, or binary with the other
    operand a single value, of the reshaped shape, or varying only along trailing axes the
    reshape keeps) of a reshape read by nothing else, becomes ``reshape(op(x, ...))``: the
    same values in the same order (a reshape keeps the row-major order), computed next to the
    kernel that makes ``x``, whose epilogue (or element-wise chain) then takes the op; the
    reshape stays a view. Applied until no reshape moves, so a chain moves as a whole.
    TFLite's converter writes a ``FULLY_CONNECTED`` of a sequence as a 2-D product and a
    ``RESHAPE`` back, then the activation and the residual add: each was a kernel of its own.

    Not moved: a reshape that is a graph output or read elsewhere, one of a graph input or a
    constant, or whose producer hosts no epilogue and is no element-wise operator (nothing to
    join), an operator changing the data type, an operand that broadcasts across axes the
    reshape changes, an op reading the reshape twice.
    """
    from ...ops import _epilogue
    from ...ops.elementwise import FUSIBLE

    for _ in range(_SINK_ROUNDS):
        g = GraphView(nodes, outputs)
        replaced: dict[int, list[Node]] = {}
        dropped: set[int] = set()
        for r in nodes:
            if r.op != "reshape" or len(r.inputs) != 1 or len(r.outputs) != 1 or r.attrs.get("operand_view"):
                continue  # (a view this rule made of another operand stays: moving it back would undo the move)
            x, y = r.inputs[0], r.outputs[0]
            p = g.producer(x)
            if (p is None or not (_epilogue.hosts(p) or p.op in FUSIBLE) or x.data_type not in ("float32", "float16")
                    or p.id in dropped or p.id in replaced or r.id in replaced):
                continue
            e = g.sole_consumer(y)
            if (e is None or e.op not in FUSIBLE or e.id in replaced or len(e.outputs) != 1
                    or e.outputs[0].data_type != y.data_type or tuple(e.outputs[0].shape) != tuple(y.shape)
                    or sum(1 for v in e.inputs if v is y) != 1 or len(e.inputs) > 2):
                continue
            views: list[Node] = []
            ins = []
            ok = True
            for v in e.inputs:
                if v is y:
                    ins.append(x)
                    continue
                how = _sink_operand(v, x, y) if v.data_type == y.data_type else None
                if how is None:
                    ok = False
                    break
                if how == "view":
                    w = Value(v.data_type, tuple(x.shape), "op")
                    views.append(Node("reshape", [v], [w], {"operand_view": True}, r.label))
                    w.producer = views[-1]
                    v = w
                ins.append(v)
            if not ok:
                continue
            z = e.outputs[0]
            mid = Value(z.data_type, tuple(x.shape), "op")
            moved = Node(e.op, ins, [mid], e.attrs, e.label)
            mid.producer = moved
            replaced[e.id] = [*views, moved, Node("reshape", [mid], [z], {}, r.label)]
            dropped.add(r.id)
            if DEBUG >= 2:
                log.debug("sink_reshapes: %s [%s] before reshape [%s]", e.op, e.label, r.label)
        if not replaced:
            return nodes
        nodes = GraphView(nodes, outputs).replace(replaced, dropped)
    return nodes
