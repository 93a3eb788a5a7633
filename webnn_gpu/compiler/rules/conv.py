"""Convolution rules: work moved into a conv2d's kernel (its input's scale, skip add or
upsampling; a global pool of its output), a pointwise conv run before an upsampling, and a
depthwise conv with the pointwise conv around it as one ``depthwise_project`` kernel."""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np

from ..._env import DEBUG
from ..._ir import GraphView, Node, Value
from ._common import _is_linear_doubling, _max_bindings
from .epilogue import EPILOGUE_HOSTS

log = logging.getLogger("webnn_gpu")


def swap_resample_conv(nodes: list, outputs: dict, context=None) -> list:
    """``conv1x1(resample_linear(x))`` becomes ``resample_linear(conv1x1(x))`` when the
    resample enlarges the image and the conv does not widen the channels.

    Both are linear and the bilinear weights of every output sum to one, so the two orders
    agree (bias included) up to floating-point rounding: ``resample(W x + b) = W resample(x)
    + b``. The conv then runs on the small image (a quarter of the pixels for a 2x upsampling)
    and the resample moves no more channels than before: the segmenter's decoder upsamples
    and then projects at each of its three stages. The conv must be a plain pointwise
    convolution (1x1, stride 1, no padding, one group, no epilogue yet) over the two
    resampled axes, and the resample must feed nothing else. ``WEBNN_GPU_PASSES=
    -swap_resample_conv`` keeps the graph's order (bit-for-bit the unswapped results).
    """
    from ...ops.conv import _geometry as conv_geometry

    view = GraphView(nodes, outputs)
    replaced: dict[int, Any] = {}
    dropped: set[int] = set()
    for conv in nodes:
        if conv.op != "conv2d" or conv.attrs.get("epilogue") or len(conv.outputs) != 1:
            continue
        r = conv.inputs[0]
        rs = view.producer(r)
        if rs is None or rs.op != "resample2d" or rs.attrs.get("mode") != "linear" or view.is_output(r):
            continue
        if len(view.consumers(r)) != 1 or any(v is r for v in conv.inputs[1:]):
            continue
        a = conv.attrs
        spatial = [1, 2] if a.get("input_layout") == "nhwc" else [2, 3]
        chan = 3 if a.get("input_layout") == "nhwc" else 1
        g = conv_geometry(conv)
        if (sorted(rs.attrs.get("axes", [])) != spatial or g["G"] != 1 or g["KH"] != 1 or g["KW"] != 1
                or g["sh"] != 1 or g["sw"] != 1 or g["pt"] != 0 or g["pl"] != 0 or g["OH"] != g["H"] or g["OW"] != g["W"]):
            continue
        x, y = rs.inputs[0], conv.outputs[0]
        if x.size >= r.size or y.shape[chan] > r.shape[chan]:
            continue  # not an enlargement, or the conv widens the channels (a costlier resample)
        low_shape = list(y.shape)
        for d in spatial:
            low_shape[d] = x.shape[d]
        low = Value(y.data_type, tuple(low_shape), "op")
        new_conv = Node("conv2d", [x] + list(conv.inputs[1:]), [low], dict(a), conv.label)
        low.producer = new_conv
        new_rs = Node("resample2d", [low], [y], dict(rs.attrs), rs.label)
        # both take the conv's place in the order: the conv's filter and bias may be computed
        # after the resample (only there are all its inputs ready)
        replaced[conv.id] = [new_conv, new_rs]
        dropped.add(rs.id)
        if DEBUG >= 2:
            log.debug("swap_resample_conv: conv2d [%s] before resample2d [%s]", conv.label, rs.label)
    return view.replace(replaced, dropped)


#: The most nodes of an input affine (:func:`_affine_chain`) a conv takes as its prologue.
AFFINE_MAX_NODES = 4
#: Element-wise ops an input affine is made of: ``v op c`` for a constant ``c`` (``c - v`` is
#: taken as ``v * -1 + c``, the same value; ``c / v`` is no affine and stops the chain).
AFFINE_OPS = ("mul", "add", "sub", "div")


def _per_channel(c, C: int) -> tuple | None:
    """The values of constant ``c`` as a tuple of floats when it holds one value, or one per
    channel along the last of at most 4 axes (ones before it); else None."""
    from ...ops.linalg import constant_array

    data = constant_array(c)
    shape = tuple(c.shape) if c is not None else ()
    if data is None or len(shape) > 4 or any(d != 1 for d in shape[:-1]) or data.size not in (1, C):
        return None
    return tuple(float(v) for v in data.reshape(-1))


def _literal_safe(op: str, vals: tuple) -> bool:
    """Whether ``v op c`` for each of ``vals`` keeps IEEE results once ``c`` is a WGSL literal:
    the shader compilers simplify ``v * 0.0`` to 0 and ``v / 0.0`` likewise, as if no inf or NaN
    existed (the element-wise kernel, reading ``c`` from a buffer, gives NaN or inf), so a
    multiplier or divisor of 0 and any value that is not finite keep the op's own kernel."""
    return all(math.isfinite(c) and (c != 0.0 or op not in ("mul", "div")) for c in vals)


def _affine_chain(g: GraphView, y: Value, conv: Node):
    """``(fused nodes, x, steps)`` when ``y``, ``conv``'s input, is ``x`` through a chain of
    :data:`AFFINE_OPS` by constants of one value or one per channel (:func:`_per_channel`),
    each node read only by the next (the last only by ``conv``) and none a graph output; the
    chain goes back as far as it can (at most :data:`AFFINE_MAX_NODES` nodes). ``steps`` is
    ``attrs["input_affine"]``: ``(op, values)`` pairs applied in order. None without a step."""
    C = y.shape[-1]
    steps: list = []
    fused: list = []
    v, reader = y, conv
    while len(fused) < AFFINE_MAX_NODES:
        p = g.producer(v)
        if (p is None or p.op not in AFFINE_OPS or len(p.inputs) != 2 or p.attrs or len(p.outputs) != 1
                or g.sole_consumer(v) is not reader):
            break
        for x, c, swapped in ((p.inputs[0], p.inputs[1], False), (p.inputs[1], p.inputs[0], True)):
            vals = _per_channel(c, C)
            if (vals is not None and x is not None and x.kind != "constant" and x.data_type == v.data_type
                    and c.data_type == v.data_type and tuple(x.shape) == tuple(v.shape)):
                break
        else:
            break
        if swapped and p.op == "div" or not _literal_safe(p.op, vals):
            break
        new = [("mul", (-1.0,)), ("add", vals)] if swapped and p.op == "sub" else [(p.op, vals)]
        steps[:0] = new
        fused.append(p)
        v, reader = x, p
    return (fused, v, tuple(steps)) if fused else None


def fuse_conv_input(nodes: list, outputs: dict, context=None) -> list:
    """Fold the element-wise ops that make a conv2d's input into the conv, which applies them
    as it loads that input. For a pointwise conv: ``mul(x, s)`` with ``s`` one value per
    channel (``attrs["input_scale"]``: MobileNetV3's squeeze-and-excite), ``add(x, r)`` with
    ``r`` of the input's shape (``attrs["input_add"]``: a skip connection), or
    ``add(mul(x, s), r)`` (both: the segmenter's decoder); the attributes hold the operands'
    indices in the conv's inputs. For a conv on the first-layer block kernel: an affine of
    constants (``x * s + b``, ``(x - m) / d``, ``x * s``, ``x + b``; :func:`_affine_chain`,
    ``attrs["input_affine"]``: Keras' ``Rescaling``, an ONNX export's normalization), applied
    only to the in-image values (the conv's zero padding stays zero after it). The folded
    values were written once and read once more, a kernel of their own, for arithmetic the
    conv does in registers. Each folded node must feed only the next one or the conv.
    """
    from ...ops.conv import INPUT_PROLOGUES, input_affine_ok, input_prologue_ok

    tuning = getattr(context, "_tuning", "default")
    max_bindings = _max_bindings(context)
    g = GraphView(nodes, outputs)

    def only_feeds(v, node) -> bool:
        cs = g.consumers(v)
        return not g.is_output(v) and len(cs) == 1 and cs[0] is node

    def scaled(v, consumer):
        """(x, s) when v = mul(x, s) feeds only ``consumer``, s per channel; else None."""
        m = g.producer(v)
        if m is None or m.op != "mul" or len(m.inputs) != 2 or not only_feeds(v, consumer):
            return None
        a, b = m.inputs
        for x, s in ((a, b), (b, a)):
            if tuple(x.shape) == tuple(v.shape) and x.data_type == v.data_type and tuple(s.shape) != tuple(v.shape):
                return m, x, s
        return None

    def operands(y, conv):
        """(fused nodes, x, s, r) of ``mul(x, s)``, ``add(x, r)`` or ``add(mul(x, s), r)`` making
        ``y``; None when its producer is none of them."""
        got = scaled(y, conv)
        if got is not None:
            m, x, s = got
            return [m], x, s, None
        add = g.producer(y)
        if add is None or add.op != "add" or len(add.inputs) != 2:
            return None
        a, b = add.inputs
        same = [v.data_type == y.data_type and tuple(v.shape) == tuple(y.shape) for v in (a, b)]
        if a is b or not all(same):
            return None
        for u, w in ((a, b), (b, a)):  # a scaled operand first, wherever it is
            inner = scaled(u, add)
            if inner is not None:
                m, x, s = inner
                return [add, m], x, s, w
        return [add], a, None, b

    replaced: dict[int, Node] = {}
    dropped: set[int] = set()
    for conv in nodes:
        if conv.op != "conv2d" or conv.inputs[0] is None or any(k in conv.attrs for k in INPUT_PROLOGUES):
            continue
        y = conv.inputs[0]
        if any(v is y for v in conv.inputs[1:]) or not only_feeds(y, conv):
            continue
        got = operands(y, conv)
        if got is None or not input_prologue_ok(conv, scale=got[2], residual=got[3]):
            affine = _affine_chain(g, y, conv) if input_affine_ok(conv, tuning) else None
            if affine is not None:
                fused, x, steps = affine
                attrs = dict(conv.attrs)
                attrs["input_affine"] = steps
                replaced[conv.id] = Node(conv.op, [x] + list(conv.inputs[1:]), list(conv.outputs), attrs, conv.label)
                dropped.update(n.id for n in fused)
                if DEBUG >= 2:
                    log.debug("fuse_conv_input: conv2d [%s] applies %s to its input", conv.label, steps)
            continue
        fused, x, s, r = got
        extra = [v for v in (s, r) if v is not None]
        inputs = [x] + list(conv.inputs[1:]) + extra
        # the conv's own bindings plus a re-laid-out filter, the parameters and the output
        if len({v.id for v in inputs if v is not None}) + 3 > max_bindings:
            continue
        attrs = dict(conv.attrs)
        # index 2 is the conv's bias: without one the slot stays None, the operands go after it
        base = max(len(conv.inputs), EPILOGUE_HOSTS["conv2d"])
        inputs = [x] + list(conv.inputs[1:]) + [None] * (base - len(conv.inputs)) + extra
        if s is not None:
            attrs["input_scale"] = base
        if r is not None:
            attrs["input_add"] = base + (1 if s is not None else 0)
        replaced[conv.id] = Node(conv.op, inputs, list(conv.outputs), attrs, conv.label)
        dropped.update(n.id for n in fused)
        if DEBUG >= 2:
            log.debug("fuse_conv_input: conv2d [%s] absorbs %s", conv.label, [n.op for n in fused])
    return g.replace(replaced, dropped)


def _channel_constant(c, C: int) -> bool:
    """Whether ``c`` is a host constant of one value per channel along the last axis (shape
    ``[..., C]``, ones before)."""
    from ...ops.linalg import constant_array

    return (c is not None and constant_array(c) is not None and tuple(c.shape)[-1:] == (C,)
            and all(d == 1 for d in c.shape[:-1]))


#: The most element-wise steps (:data:`webnn_gpu.ops.conv.PREACT_STEPS`) of a chain
#: :func:`preact_chain` takes (a decomposed normalization: sub, div, mul, add).
PREACT_MAX_STEPS = 4


def _bn_steps(bn, C: int):
    """``(steps, act)`` of ``batch_normalization`` node ``bn`` over the last axis with float32
    host statistics (and scale and bias when given) and an epilogue of at most one relu or
    clamp: the steps :func:`~webnn_gpu.compiler.rules.norm.split_batch_norm` makes
    (``sub`` mean, ``div`` sqrt(variance + epsilon) computed on the host in float32, ``mul``
    scale, ``add`` bias; one value per channel), else None."""
    x, mean, var, scale, bias = (list(bn.inputs) + [None] * 5)[:5]
    host = [v for v in (mean, var, scale, bias) if v is not None]
    if (len(bn.inputs) > 5 or mean is None or var is None or bn.attrs.get("axis") != len(x.shape) - 1
            or any(v.kind != "constant" or v.data is None or v.data_type != "float32" or v.size != C for v in host)):
        return None
    ep = bn.attrs.get("epilogue") or []
    if len(ep) > 1 or ep and ep[0].get("op") not in ("relu", "clamp"):
        return None
    act: tuple | None = None
    if ep and ep[0]["op"] == "relu":
        if set(ep[0]) != {"op"}:
            return None
        act = ("relu",)
    elif ep:
        if set(ep[0]) - {"op", "min_value", "max_value"}:
            return None
        act = ("clamp", ep[0].get("min_value"), ep[0].get("max_value"))

    def const(data) -> Value:
        return Value("float32", (C,), "constant", data=np.ascontiguousarray(data, dtype=np.float32).reshape(-1))

    d = np.sqrt(var.data.astype(np.float32) + np.float32(bn.attrs["epsilon"]), dtype=np.float32)
    steps = [("sub", const(mean.data)), ("div", const(d))]
    steps += [("mul", const(scale.data))] if scale is not None else []
    steps += [("add", const(bias.data))] if bias is not None else []
    return steps, act


def _siblings(readers: list, context) -> bool:
    """Whether some of ``readers`` (convs of one input) would run as one ``siblings`` launch
    (``fuse_siblings``), which reads that input once: the chain before them keeps its kernel."""
    from ...fusions.siblings import _key, sibling_group, sibling_ok
    from ...ops.linalg import plan_context

    lc = plan_context(context)
    keyed: dict = {}
    for n in readers:
        if sibling_ok(n, lc):
            keyed.setdefault(_key(n), []).append(n)
    return any(sibling_group(ns, context) for ns in keyed.values())


def preact_chain(g: GraphView, last, context=None):
    """``(fused nodes, x, steps, act, readers)`` when ``last``'s value is ``x`` through ``steps``
    (``(op, constant)`` pairs, op one of :data:`webnn_gpu.ops.conv.PREACT_STEPS`, each constant
    one value per channel) and then ``act`` (None, ``("relu",)`` or ``("clamp", lo, hi)``), and
    every node that reads it is a conv2d that can apply them as it loads its input
    (:func:`fuse_conv_input_preact`), else None. The chain: element-wise ``mul``, ``add``,
    ``sub``, ``div`` of ``x`` by such a constant (``sub`` and ``div`` with ``x`` first; at most
    :data:`PREACT_MAX_STEPS`) and an activation (a relu without attributes, a clamp), each
    optional but one, or one ``batch_normalization`` with host statistics whose epilogue is
    at most a relu or a clamp (:func:`_bn_steps`); each node's value read only by the next
    and no graph output; the values of ``x``'s shape and data type; float32, or float16 with
    the activation alone (the kernel computes in float32 without the stand-alone kernels'
    rounding between the steps), a clamp's bounds then values of float16. ``x`` may have other readers; an ``x`` made by an element-wise
    op and read by the chain alone keeps the chain (``fuse_elementwise`` merges them: no launch
    to save). Each reader reads the chain's value as its input alone and
    :func:`webnn_gpu.ops.conv.input_preact_ok` takes it; readers of which some would run as one
    ``siblings`` launch (:func:`_siblings`) keep it."""
    from ...ops.conv import PREACT_OPS, PREACT_STEPS, input_preact_ok
    from ...ops.elementwise import FUSIBLE

    if last is None or len(last.outputs) != 1 or not last.inputs or last.inputs[0] is None:
        return None
    r = last.outputs[0]
    if g.is_output(r) or len(r.shape) != 4 or r.data_type not in ("float32", "float16"):
        return None
    C = r.shape[-1]
    fused: list = []
    act: tuple | None = None
    steps: list = []
    v, reader, p = r, None, last
    if p.op == "batch_normalization":
        got = _bn_steps(p, C) if r.data_type == "float32" else None
        if got is None:
            return None
        steps, act = got
        fused.append(p)
        v = p.inputs[0]
    else:
        if p.op in PREACT_OPS and len(p.inputs) == 1:
            if p.op == "relu" and not p.attrs:
                act = ("relu",)
            elif p.op == "clamp" and set(p.attrs) <= {"min_value", "max_value"}:
                act = ("clamp", p.attrs.get("min_value"), p.attrs.get("max_value"))
            else:
                return None
            fused.append(p)
            v, reader = p.inputs[0], p
            p = g.producer(v)
        while (p is not None and p.op in PREACT_STEPS and len(p.inputs) == 2 and not p.attrs
               and len(p.outputs) == 1 and len(steps) < PREACT_MAX_STEPS):
            if reader is not None and (g.is_output(v) or g.sole_consumer(v) is not reader):
                break
            a, b = p.inputs
            x, c = (b, a) if p.op in ("mul", "add") and _channel_constant(a, C) else (a, b)
            if x is None or not _channel_constant(c, C) or x.kind == "constant" or c.data_type != r.data_type:
                break
            steps.insert(0, (p.op, c))
            fused.append(p)
            v, reader = x, p
            p = g.producer(v)
    if not fused or v is None or v.data_type != r.data_type or tuple(v.shape) != tuple(r.shape):
        return None
    if r.data_type != "float32" and steps:
        return None
    if r.data_type == "float16" and act is not None and act[0] == "clamp" and any(
            b is not None and abs(b) != float("inf") and float(np.float16(b)) != float(b) for b in act[1:]):
        return None  # the stand-alone clamp bounds by float16(b), the kernel's literal is float32(b)
    p = g.producer(v)
    if p is not None and p.op in FUSIBLE and not g.is_output(v) and len(g.consumers(v)) == 1:
        return None  # fuse_elementwise merges the chain into x's kernel: taking it would save no launch
    readers = g.consumers(r)
    if not readers or len(readers) > 1 and _siblings(readers, context):
        return None
    for n in readers:
        if n.op != "conv2d" or not n.inputs or n.inputs[0] is not r or any(u is r for u in n.inputs[1:]):
            return None
        if not input_preact_ok(n, [c for _, c in steps], context):
            return None
    return fused, v, steps, act, readers


def fuse_conv_input_preact(nodes: list, outputs: dict, context=None) -> list:
    """``act(x op1 c1 op2 c2 ...)`` (each ``c`` a constant of one value per channel, ``op`` a mul,
    add, sub or div; ``act`` a relu, a clamp or none; either part may be absent: a
    pre-activation's normalize then activate, as element-wise ops or one batch_normalization
    with host statistics) whose every reader is a conv2d on the tile kernel reading it as its
    input: each reader applies it to each in-image value it loads (``attrs["input_preact"]``:
    ``{"steps": ((op, index of c in the conv's inputs), ...), "act": None, ("relu",) or
    ("clamp", lo, hi)}``) and reads ``x``, which its producer stores anyway (``x`` may have
    other readers: the next residual add). The chain's launch and its store go. A padded
    conv's out-of-image taps stay 0, the padding of the activated input (so a clamp with
    op(0) != 0 qualifies). A chain that is a graph output, any of whose values another node
    reads, or that a node reads that cannot apply it, stays whole (:func:`preact_chain`)."""
    g = GraphView(nodes, outputs)
    max_bindings = _max_bindings(context)
    replaced: dict[int, Node] = {}
    dropped: set[int] = set()
    for last in nodes:
        got = preact_chain(g, last, context)
        if got is None:
            continue
        fused, x, steps, act, readers = got
        if any(n.id in replaced or n.id in dropped for n in readers + fused):
            continue
        new = {}
        for conv in readers:
            base = max(len(conv.inputs), EPILOGUE_HOSTS["conv2d"])
            inputs = [x] + list(conv.inputs[1:]) + [None] * (base - len(conv.inputs)) + [c for _, c in steps]
            # the conv's own bindings (the steps' operands one), a re-laid-out filter, the parameters, the output
            if len({v.id for v in inputs[:base] if v is not None}) + (1 if steps else 0) + 3 > max_bindings:
                break
            at = {"steps": tuple((op, base + i) for i, (op, _) in enumerate(steps)), "act": act}
            new[conv.id] = Node(conv.op, inputs, list(conv.outputs), {**conv.attrs, "input_preact": at}, conv.label)
        else:
            replaced.update(new)
            dropped.update(n.id for n in fused)
            if DEBUG >= 2:
                log.debug("fuse_conv_input_preact: %s applied by %s", [f"{n.op} [{n.label}]" for n in fused],
                          [f"conv2d [{n.label}]" for n in readers])
    return g.replace(replaced, dropped)


def input_relu_readers(g: GraphView, act, tuning: str = "default") -> list | None:
    """The nodes that would each apply ``act``, an element-wise node, as they load their input
    (``fuse_conv_input_relu``), else None: ``act`` an op of
    :data:`webnn_gpu.ops.conv.INPUT_RELU_OPS` without attributes, of its input's shape and data
    type, no graph output, and every node reading its value reading it as its input alone
    (``inputs[0]``; a ``depthwise_project`` node's depthwise conv likewise), reading neither it
    nor ``act``'s input anywhere else, and being one :func:`webnn_gpu.ops.conv.input_relu_ok`
    takes. One reader that cannot apply it keeps
    ``act`` for all of them (its launch and store would stay)."""
    from ...ops.conv import INPUT_RELU_OPS, input_relu_ok

    if act is None or act.op not in INPUT_RELU_OPS or len(act.inputs) != 1 or len(act.outputs) != 1 or act.attrs:
        return None
    r, y = act.outputs[0], act.inputs[0]
    if y is None or y.data_type != r.data_type or tuple(y.shape) != tuple(r.shape) or g.is_output(r):
        return None
    readers = g.consumers(r)
    if not readers:
        return None
    for n in readers:
        if n.op not in ("conv2d", "depthwise_project") or not n.inputs or n.inputs[0] is not r:
            return None
        # a reader that reads r or y anywhere else (a projection's residual add of y, pad(y),
        # pool(y)): the depthwise + projection kernels take an operand that is their input from
        # the rows they hold, which would then hold relu(y)
        if any(v is r or v is y for v in n.inputs[1:]) or not input_relu_ok(n, tuning):
            return None
    return readers


def _reading(node: Node, y: Value) -> Node:
    """``node`` (a conv2d or a ``depthwise_project`` node that :func:`input_relu_readers`
    accepted) reading ``y`` in place of its input and applying the relu as it loads it."""
    if node.op == "depthwise_project":
        dw = node.attrs["depthwise"]
        dw = Node(dw.op, [y] + list(dw.inputs[1:]), list(dw.outputs), {**dw.attrs, "input_relu": True}, dw.label)
        attrs = dict(node.attrs)
        attrs["depthwise"] = dw
        return Node(node.op, [y] + list(node.inputs[1:]), list(node.outputs), attrs, node.label)
    return Node(node.op, [y] + list(node.inputs[1:]), list(node.outputs), {**node.attrs, "input_relu": True},
                node.label)


def fuse_conv_input_relu(nodes: list, outputs: dict, context=None) -> list:
    """``relu(y)`` whose every reader is a conv2d on the stand-alone depthwise kernel or a
    ``depthwise_project`` node without an expansion, reading it as its input: each reader
    applies the relu to each input value it loads (``attrs["input_relu"]``, on the depthwise
    conv of a ``depthwise_project`` node) and reads ``y``, which its producer stores anyway
    (``y`` may have other readers, e.g. the next residual add). The relu's launch and its
    store go. Only ops with op(0) == 0 qualify (:data:`webnn_gpu.ops.conv.INPUT_RELU_OPS`),
    since the kernels' zero padding is then op(padding); a relu that is a graph output, or that
    any node reads which cannot apply it, stays whole (:func:`input_relu_readers`).
    """
    tuning = getattr(context, "_tuning", "default")
    g = GraphView(nodes, outputs)
    replaced: dict[int, Node] = {}
    dropped: set[int] = set()
    for act in nodes:
        readers = input_relu_readers(g, act, tuning)
        if readers is None or any(n.id in replaced or n.id in dropped for n in readers):
            continue
        for n in readers:
            replaced[n.id] = _reading(n, act.inputs[0])
        dropped.add(act.id)
        if DEBUG >= 2:
            log.debug("fuse_conv_input_relu: %s [%s] applied by %s", act.op, act.label,
                      [f"{n.op} [{n.label}]" for n in readers])
    return g.replace(replaced, dropped)


def fuse_conv_pool(nodes: list, outputs: dict, context=None) -> list:
    """A global average pool of a depthwise conv2d's output becomes the conv's second output
    (``attrs["pool_output"]``): the conv kernel writes each invocation's per-channel sums of
    the outputs it computed, and a small reduction of those partials gives the mean, instead
    of a pass that reads the whole output again. That is the squeeze in MobileNetV3's
    squeeze-and-excite. The conv's output keeps its other consumers.
    """
    from ...ops.conv import pool_output_ok
    from ...ops.pool import _is_global

    tuning = getattr(context, "_tuning", "default")
    g = GraphView(nodes, outputs)
    replaced: dict[int, Node] = {}
    dropped: set[int] = set()
    for pool in nodes:
        if pool.op != "average_pool2d" or "input_add" in pool.attrs or pool.attrs.get("layout") != "nhwc":
            continue
        conv = g.producer(pool.inputs[0])
        if conv is None or conv.op != "conv2d" or conv.id in replaced or not _is_global(pool):
            continue
        if not pool_output_ok(conv, tuning):
            continue
        attrs = dict(conv.attrs)
        attrs["pool_output"] = True
        replaced[conv.id] = Node(conv.op, list(conv.inputs), [conv.outputs[0], pool.outputs[0]], attrs, conv.label)
        dropped.add(pool.id)
        if DEBUG >= 2:
            log.debug("fuse_conv_pool: conv2d [%s] also pools into [%s]", conv.label, pool.label)
    return g.replace(replaced, dropped)


def fuse_conv_upsample(nodes: list, outputs: dict, context=None) -> list:
    """A skip add that ``fuse_conv_input`` folded into a pointwise conv, whose operand is an
    exact 2x bilinear upsampling read by nothing else, reads the small image instead: the
    conv's kernel interpolates as it loads (``attrs["input_add_up2"]``; a tile of one image
    row reads two rows of the small image), and the upsampled image is never written. The
    segmenter's decoder upsamples and adds at each of its three stages.
    """
    from ...ops.conv import upsampled_add_ok

    g = GraphView(nodes, outputs)
    replaced: dict[int, Node] = {}
    dropped: set[int] = set()
    for conv in nodes:
        if conv.op != "conv2d" or "input_add" not in conv.attrs or conv.attrs.get("input_add_up2"):
            continue
        i = conv.attrs["input_add"]
        r = conv.inputs[i]
        up = g.producer(r)
        if (up is None or not _is_linear_doubling(up) or sorted(up.attrs.get("axes", [])) != [1, 2]
                or g.is_output(r) or len(g.consumers(r)) != 1 or up.id in dropped
                or any(v is r for k, v in enumerate(conv.inputs) if k != i)):
            continue
        small = up.inputs[0]
        if not upsampled_add_ok(conv, small):
            continue
        inputs = list(conv.inputs)
        inputs[i] = small
        replaced[conv.id] = Node(conv.op, inputs, list(conv.outputs), {**conv.attrs, "input_add_up2": True},
                                 conv.label)
        dropped.add(up.id)
        if DEBUG >= 2:
            log.debug("fuse_conv_upsample: conv2d [%s] interpolates [%s]", conv.label, up.label)
    return g.replace(replaced, dropped)


#: ``depthwise_project`` kernels store a block of pixels times all projected channels, each
#: through the projection's epilogue (several hundred inlined calls): the two epilogues may
#: load at most this many operands per output element between them (a residual add).
DWP_MAX_LOADS = 1


def _epilogue_loads(conv) -> int:
    """Epilogue steps of conv2d ``conv`` that load an operand per output element (not per
    channel; a depthwise conv's own input at the window's center is held, not loaded)."""
    from ...ops.conv import _center, _geometry

    held = 0 if conv.op == "conv2d" and conv.attrs.get("groups", 1) > 1 and _center(_geometry(conv)) else None
    return sum(1 for st in conv.attrs.get("epilogue") or [] if "input" in st and "axis" not in st
               and st["input"] != held)


def fuse_depthwise_project(nodes: list, outputs: dict, context=None) -> list:
    """A depthwise conv2d and the pointwise conv2d (or the conv_transpose2d whose filter
    equals its stride) that reads its output become one ``depthwise_project`` node: one kernel
    computes the depthwise values of a pixel block, all channels, and projects them in
    registers, so the depthwise output is never written and read back (MobileNet's projection
    after a depthwise conv without squeeze-and-excite, and the segmenter's decoder stages and
    last layer). The node keeps both originals in ``attrs["depthwise"]`` / ``["project"]``;
    its inputs are theirs (the depthwise output aside). The depthwise output must feed nothing
    else; :func:`webnn_gpu.ops.conv.project_ok` says which pairs the kernel takes.
    """
    from ...ops.conv import (EXPAND_MAX_K, dwp_lanes, expand_block_ok, expand_ok, expand_shared_ok, project_ok,
                             project_wide, store_ok)

    tuning = getattr(context, "_tuning", "default")
    lanes = dwp_lanes(tuning, getattr(context, "_subgroup", 0))  # the channel-lane kernel's
    max_bindings = _max_bindings(context)
    g = GraphView(nodes, outputs)
    replaced: dict[int, Node] = {}
    dropped: set[int] = set()

    def expansion(dw, max_k=EXPAND_MAX_K):
        """The pointwise conv making ``dw``'s input (at most ``max_k`` input channels, None:
        any), when the kernel can compute it too."""
        v = dw.inputs[0]
        e = g.producer(v) if v is not None else None
        if (e is None or e.id in dropped or e.id in replaced or g.is_output(v)
                or len(g.consumers(v)) != 1 or not expand_ok(e, dw, tuning, max_k)):
            return None
        return e

    def fuse(attrs: dict, inputs: list, last) -> bool:
        """Put a depthwise_project node of ``attrs`` in ``last``'s place (every operand is ready
        there); False when its bindings would exceed the device's limit."""
        unique: list = []
        for v in inputs:
            if v is not None and all(v is not u for u in unique):
                unique.append(v)
        if len(unique) + len(last.outputs) > max_bindings:  # every input may be a storage binding, + outputs
            return False
        labels = [n.label for n in (attrs.get("expand"), attrs["depthwise"], attrs["project"])
                  if n is not None and n.label]
        fused = Node("depthwise_project", unique, list(last.outputs), attrs, "+".join(labels))
        replaced[last.id] = fused
        if attrs.get("expand") is not None:
            dropped.add(attrs["expand"].id)
        if DEBUG >= 2:
            log.debug("fuse_depthwise_project: %s", fused.label)
        return True

    for proj in nodes:
        if proj.op not in ("conv2d", "conv_transpose2d") or not proj.inputs or proj.inputs[0] is None:
            continue
        mid = proj.inputs[0]
        dw = g.producer(mid)
        if dw is None or dw.id in dropped or g.is_output(mid) or len(g.consumers(mid)) != 1:
            continue
        if _epilogue_loads(dw) + _epilogue_loads(proj) > DWP_MAX_LOADS:
            continue
        pair = project_ok(dw, proj, tuning, lanes)
        if not pair and (dw.op != "conv2d" or dw.attrs.get("input_layout") != "nhwc"):
            continue
        # channels not a multiple of 4 run only on the lane kernel; a wide projection's column
        # blocks take no expansion
        e = expansion(dw, None) if dw.inputs[0].shape[3] % 4 == 0 and not project_wide(proj) else None
        # a pair that runs faster as two kernels may run faster as one with its expansion (the
        # three kernels against one; project_ok checks the rest)
        triple = (not pair and e is not None and e.inputs[0].shape[3] <= EXPAND_MAX_K
                  and project_ok(dw, proj, tuning, lanes, e.inputs[0].shape[3] // 4))
        if not pair and not triple:
            continue
        attrs = {"depthwise": dw, "project": proj}
        first = list(dw.inputs)
        if e is not None and e.inputs[0].shape[3] <= EXPAND_MAX_K and (triple or expand_block_ok(e, dw, proj, tuning)):
            attrs["expand"] = e  # the inverted residual's expansion too: its output is never stored
            first = list(e.inputs) + list(dw.inputs[1:])
        elif e is not None and expand_shared_ok(e, dw, proj, tuning, lanes):
            # any input width on small images: each workgroup expands its band of input rows
            # into workgroup memory first
            attrs.update(expand=e, expand_shared=True)
            first = list(e.inputs) + list(dw.inputs[1:])
        if fuse(attrs, [*first, *proj.inputs[1:]], proj):
            dropped.add(dw.id)
    # a depthwise conv without a projection to take (squeeze-and-excite follows it): it still
    # computes its input, the expansion, in registers
    for dw in nodes:
        if dw.id in dropped or dw.id in replaced or dw.op != "conv2d" or dw.inputs[0] is None:
            continue
        e = expansion(dw)
        if e is not None and store_ok(dw, tuning, e.inputs[0].shape[3] // 4):
            fuse({"depthwise": dw, "project": None, "expand": e}, [*e.inputs, *dw.inputs[1:]], dw)
    return g.replace(replaced, dropped)


#: ``conv_columns_to_channels``: the most input channels of a conv it rewrites (with 4 or more
#: the tile kernel loads its input as vec4s of channels already: 8 -> 1 5x5, 32 -> 1 7x3 and
#: 33 -> 1 3x3 ran 1.3-2.3x slower rewritten, lavapipe, 2026-11-26).
COLUMNS_MAX_C = 3
#: the most multiply-adds of the rewritten conv per multiply-add of the original (the packed
#: window covers up to 3 strides more columns than the original's; a 1x256 window at stride 2
#: takes 1.03 times as many, a 1x16 at stride 1 1.25 times)
COLUMNS_MAX_GROWTH = 1.25
#: the fewest multiply-adds (output pixels x window x channels) of a conv it rewrites: the
#: rewritten conv adds a pad and a slice kernel where the width needs them (a 1x256 stride-2
#: conv to 171 outputs: 115 us as it was, 127 us rewritten; to 342 outputs 197 and 180 us)
COLUMNS_MIN_MACS = 1 << 16


def _columns_plan(g: dict) -> tuple[int, int, int, int] | None:
    """``(P, KW2, OW4, Wp)`` of :func:`conv_columns_to_channels` for a conv of geometry ``g``,
    or None where it does not fire: ``P = 4 * stride`` input columns per packed pixel, the packed
    window ``KW2``, the packed output width ``OW4`` and the input width ``Wp`` it reads."""
    if (g["O"] != 1 or g["G"] != 1 or g["C"] > COLUMNS_MAX_C or g["dw"] != 1
            or g["NB"] * g["OH"] * g["OW"] * g["KH"] * g["KW"] * g["C"] < COLUMNS_MIN_MACS):
        return None
    P = 4 * g["sw"]
    KW2 = -(-(3 * g["sw"] + g["KW"]) // P)
    if KW2 * P > COLUMNS_MAX_GROWTH * g["KW"]:
        return None
    OW4 = -(-g["OW"] // 4)
    return P, KW2, OW4, (OW4 - 1 + KW2) * P


def conv_columns_to_channels(nodes: list, outputs: dict, context=None) -> list:
    """An NHWC ``conv2d`` with one output channel, one group, at most :data:`COLUMNS_MAX_C`
    input channels and a window of at least about 13 columns (a long 1-D filter: an audio
    model's FIR resampler or a constant-Q transform) computes four adjacent output columns as
    four output channels of a conv over the input's columns taken ``P = 4 * stride`` at a time
    as channels:

        y[n, h, 4q + r, 0] = sum_{p, t, c} x'[n, h, q + p, t * C + c] * f'[r, :, p, t * C + c]
        x'[n, h, j, t * C + c] = pad(x)[n, h, j * P + t, c],  f'[r, kh, p, t*C + c] = f[0, kh, p * P + t - r * stride, c]

    (``f`` zero outside its window). The input is padded along the width (its left padding and
    what the last packed pixel reads, a ``pad``; or cut with a ``slice`` where it reads fewer
    columns), read through a ``reshape`` (a view: NHWC keeps a pixel's columns together), and
    the conv's ``[n, oh, OW / 4, 4]`` output is the original ``[n, oh, OW, 1]`` through a
    reshape (and a slice of the first OW columns when OW is not a multiple of 4). The same
    products are summed, in another order, and products of the zero taps with the neighbouring
    columns are added: an infinity or NaN in the input, which the conv spreads only over the
    outputs whose window holds it, turns up to 3 more outputs beside them into NaN (0 * inf).
    So the rule changes results on non-finite inputs and is **off unless asked for**:
    ``WEBNN_GPU_FORCE_CONV_COLUMNS=on`` (for models whose inputs are known to be finite, e.g.
    audio). A bias is repeated for the four channels; the height's window, strides, dilations
    and padding stay the conv's.

    Why: the tile kernel stores output channels as vec4s and loads the input as vec4s of
    channels; a conv with one output channel and one input channel used a quarter of its
    multiply-adds and loaded one value at a time (Basic Pitch's constant-Q resampler, 1x256 at
    stride 2 over 21,922 outputs: 8.0 ms as it was, 1.4 ms rewritten with the pad and the
    slice; lavapipe, 2026-11-26).

    Not rewritten: a conv with an epilogue or another rule's fusion (the rule runs before
    them), a filter or bias that is not host data, NCHW, groups, more output or input
    channels, a dilation along the width, a packed window that would do more than
    :data:`COLUMNS_MAX_GROWTH` times the multiply-adds (short windows), or fewer than
    :data:`COLUMNS_MIN_MACS` multiply-adds.
    """
    from ... import _env
    from ...ops.conv import _geometry as conv_geometry

    if _env.force_choice("conv_columns", ("on", "off")) != "on":
        return nodes
    base = {"padding", "strides", "dilations", "groups", "input_layout", "filter_layout"}
    view = GraphView(nodes, outputs)
    replaced: dict[int, list[Node]] = {}
    for conv in nodes:
        a = conv.attrs
        if (conv.op != "conv2d" or set(a) != base or len(conv.outputs) != 1 or a["input_layout"] != "nhwc"
                or conv.outputs[0].data_type not in ("float32", "float16")):
            continue
        f = conv.inputs[1]
        b = conv.inputs[2] if len(conv.inputs) > 2 else None
        if f.kind != "constant" or f.data is None or (b is not None and (b.kind != "constant" or b.data is None)):
            continue
        g = conv_geometry(conv)
        plan = _columns_plan(g)
        if plan is None:
            continue
        P, KW2, OW4, Wp = plan
        x, y = conv.inputs[0], conv.outputs[0]
        NB, H, W, C, KH, KW, s = g["NB"], g["H"], g["W"], g["C"], g["KH"], g["KW"], g["sw"]
        dt, pl = y.data_type, g["pl"]
        chain: list[Node] = []

        def node(op, inputs, shape, attrs) -> Value:
            out = Value(dt, tuple(shape), "op")
            n = Node(op, inputs, [out], attrs, conv.label)
            out.producer = n
            chain.append(n)
            return out

        v = x
        keep = Wp - pl  # input columns the packed conv reads (after its pl zeros)
        if keep < W:
            v = node("slice", [v], (NB, H, keep, C), {"starts": [0, 0, 0, 0], "strides": [1, 1, 1, 1], "alias": False})
        if pl or keep > W:
            v = node("pad", [v], (NB, H, Wp, C), {"beginning_padding": [0, 0, pl, 0],
                                                  "ending_padding": [0, 0, max(keep - W, 0), 0], "mode": "constant",
                                                  "value": 0.0, "alias": False})
        v = node("reshape", [v], (NB, H, Wp // P, P * C), {"alias": True})
        fl = a["filter_layout"]
        w = np.transpose(f.data.reshape(f.shape), [fl.index(ch) for ch in "ohwi"])[0]  # [KH, KW, C]
        w2 = np.zeros((4, KH, KW2 * P, C), w.dtype)
        for r in range(4):
            w2[r, :, r * s:r * s + KW, :] = w
        fv = Value(f.data_type, (4, KH, KW2, P * C), "constant", data=w2.reshape(-1).copy())
        ins = [v, fv]
        if b is not None:
            ins.append(Value(b.data_type, (4,), "constant", data=np.repeat(b.data.reshape(-1), 4)))
        attrs = dict(a, padding=[a["padding"][0], a["padding"][1], 0, 0], strides=[a["strides"][0], 1],
                     filter_layout="ohwi")
        v = node("conv2d", ins, (NB, g["OH"], OW4, 4), attrs)
        if OW4 * 4 == g["OW"]:
            chain.append(Node("reshape", [v], [y], {"alias": True}, conv.label))
        else:
            v = node("reshape", [v], (NB, g["OH"], OW4 * 4, 1), {"alias": True})
            chain.append(Node("slice", [v], [y], {"starts": [0, 0, 0, 0], "strides": [1, 1, 1, 1], "alias": False},
                              conv.label))
        replaced[conv.id] = chain
        if DEBUG >= 2:
            log.debug("conv_columns_to_channels: conv2d [%s] %dx%d of %d channel(s) as 4 channels of %d columns",
                      conv.label, KH, KW, C, P)
    return view.replace(replaced) if replaced else nodes
