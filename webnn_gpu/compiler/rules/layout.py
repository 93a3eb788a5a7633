"""Compiler rules that fold layout operators (``pad``, ``slice``) into the kernels next to them.

Same contract as the other rules of :mod:`webnn_gpu.compiler`: ``(nodes, outputs, context=None)
-> nodes``, never mutating a node it receives (a changed node is replaced by a copy), and
firing only where the result is the same (when in doubt it does not fire).

* :func:`fold_layout`: a zero ``pad`` of the spatial axes of a conv2d's input becomes the
  conv's own padding; a zero ``pad`` read by a fused epilogue step (a residual ``add`` whose
  branch is channel-padded) is read in place, through a guarded load; so is a unit-stride
  ``slice`` read by an epilogue step (a residual taking some of a branch's channels). The
  ``pad`` / ``slice`` kernel is then gone when nothing else reads its output.
* :func:`fuse_concat_map`: an element-wise chain over a concat's output (read elsewhere too)
  is stored by the concat kernel beside that output.
* :func:`concat_in_place`: a concat whose inputs are contiguous blocks of its output is no
  kernel: their producers write their blocks.
* :func:`store_depth_to_space`: a depth_to_space (a reshape and a transpose) of a depthwise
  conv's output is no kernel: the conv stores each vec4 of channels at its place in it.
* :func:`fuse_remap_chain`: a chain of layout operators (slice, reverse, transpose, expand,
  tile, pad, reshapes between) is one remap kernel.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from ..._env import DEBUG

log = logging.getLogger("webnn_gpu")


def zero_pad(node) -> bool:
    """Whether ``node`` is a float ``pad`` filling with +0.0 (``mode="constant"``)."""
    if node is None or node.op != "pad" or node.attrs.get("mode", "constant") != "constant":
        return False
    if len(node.inputs) != 1 or len(node.outputs) != 1 or node.outputs[0].data_type not in ("float32", "float16"):
        return False
    value = float(node.attrs.get("value", 0))
    return value == 0.0 and math.copysign(1.0, value) > 0  # -0.0 is another value (1 / -0.0 = -inf)


def unit_slice(node) -> bool:
    """Whether ``node`` is a ``slice`` with unit strides (a window read at an offset)."""
    return (node is not None and node.op == "slice" and len(node.inputs) == 1 and len(node.outputs) == 1
            and all(s == 1 for s in node.attrs.get("strides", [1] * len(node.outputs[0].shape))))


def _conv_padding(conv, pad) -> list[int] | None:
    """conv2d ``conv``'s padding with ``pad``'s (a zero pad of its input) added, or None when
    ``pad`` pads an axis the conv's padding does not cover (batch, channels)."""
    h, w = (2, 3) if conv.attrs.get("input_layout", "nchw") == "nchw" else (1, 2)
    beg, end = pad.attrs["beginning_padding"], pad.attrs["ending_padding"]
    if len(beg) != 4 or any(beg[d] or end[d] for d in range(4) if d not in (h, w)):
        return None
    p = list(conv.attrs["padding"])
    return [p[0] + beg[h], p[1] + end[h], p[2] + beg[w], p[3] + end[w]]


def _non_negative(v, g) -> bool:
    """Whether every element of ``v`` is >= 0 (or NaN) by how ``g`` (a GraphView) makes it: a
    relu, a sigmoid or a clamp with a lower bound >= 0, as an operator or as the last step of
    an epilogue."""
    p = g.producer(v)
    if p is None or len(p.outputs) != 1:
        return False
    steps = p.attrs.get("epilogue") if isinstance(p.attrs, dict) else None
    last = dict(steps[-1]) if steps else {"op": p.op, **(p.attrs if isinstance(p.attrs, dict) else {})}
    if last.get("input") is not None:
        return False
    if last["op"] in ("relu", "sigmoid"):
        return True
    lo = last.get("min_value")
    return last["op"] == "clamp" and lo is not None and float(lo) >= 0.0


def _pool_padding(pool, pad) -> list[int] | None:
    """max_pool2d ``pool``'s padding for reading ``pad``'s input (a zero pad of the spatial axes,
    less than the window on each side, of a pool without padding or dilation), or None."""
    a = pool.attrs
    h, w = (2, 3) if a.get("layout", "nchw") == "nchw" else (1, 2)
    beg, end = pad.attrs["beginning_padding"], pad.attrs["ending_padding"]
    if (len(beg) != 4 or any(beg[d] or end[d] for d in range(4) if d not in (h, w)) or list(a["padding"]) != [0] * 4
            or list(a["dilations"]) != [1, 1]):
        return None
    (wh, ww) = a["window"]
    if max(beg[h], end[h]) >= wh or max(beg[w], end[w]) >= ww:
        return None  # (a window entirely in the padding: the pool would give -inf, the pad 0)
    return [beg[h], end[h], beg[w], end[w]]


def fold_layout(nodes: list, outputs: dict, context=None) -> list:
    """Fold zero ``pad`` nodes into the kernels that read them.

    * ``conv2d(pad(x))`` where the pad fills the two spatial axes with zeros becomes
      ``conv2d(x)`` with the pad's counts added to the conv's padding (the conv's padding is
      zeros too: the same sums, the zero terms left out). The conv must read the padded value
      only as its input (not as filter, bias or epilogue operand) and take no input prologue.
      A pad of the batch or channel axes, with a non-zero (or -0.0) value, or of another mode
      stays; so does a pad before an average pool (a pool's padding is excluded from its
      window, a zero pad is not).
    * ``max_pool2d(pad(x))``, the pad filling the spatial axes with zeros, less than the
      window on each side, and ``x`` non-negative by construction (a relu, a sigmoid or a clamp
      at >= 0, as an operator or the last epilogue step of its producer), becomes the max pool
      of ``x`` with the pad's counts as its padding: every window holds an element of ``x``,
      and a zero beside values >= 0 changes no maximum (Keras' ``ZeroPadding2D`` before the
      stem's ``MaxPooling2D`` in ResNet and DenseNet).
    * An epilogue step ``{"op": ..., "input": i}`` of a kernel hosting epilogues whose operand is ``pad(x)`` (zeros, any axes) reads ``x`` instead, through the
      step's ``"pad"`` offsets (zero outside ``x``; :mod:`webnn_gpu.ops._epilogue`): a
      residual add whose branch was channel-padded. The operand must be bound for that step
      alone (no other input slot of the host holds it) and not be read per channel. A
      ``slice`` with unit strides is read the same way, at offsets ``-starts``.

    A pad or slice whose every reader took it is dropped (unless it is a graph output).
    """
    from ..._ir import GraphView, Node
    from ...ops.conv import INPUT_PROLOGUES

    g = GraphView(nodes, outputs)
    replaced: dict[int, Node] = {}
    for node in nodes:
        new = node
        x = node.inputs[0] if node.op == "conv2d" and node.inputs else None
        p = g.producer(x)
        if (p is not None and zero_pad(p) and not any(v is x for v in node.inputs[1:])
                and not any(k in node.attrs for k in INPUT_PROLOGUES)):
            padding = _conv_padding(node, p)
            if padding is not None:
                new = Node(node.op, [p.inputs[0], *node.inputs[1:]], list(node.outputs),
                           {**node.attrs, "padding": padding}, node.label)
                if DEBUG >= 2:
                    log.debug("fold_layout: conv2d [%s] pads as pad [%s] did", node.label, p.label)
        if (node.op == "max_pool2d" and isinstance(node.attrs, dict) and node.inputs and not node.attrs.get("epilogue")
                and len(node.inputs) == 1):
            p = g.producer(node.inputs[0])
            padding = _pool_padding(node, p) if p is not None and zero_pad(p) else None
            if p is not None and padding is not None and _non_negative(p.inputs[0], g):
                new = Node(node.op, [p.inputs[0]], list(node.outputs), {**node.attrs, "padding": padding}, node.label)
                if DEBUG >= 2:
                    log.debug("fold_layout: max_pool2d [%s] pads as pad [%s] did", node.label, p.label)
        new = _read_padded_operands(new, g)
        if new is not node:
            replaced[node.id] = new
    if not replaced:
        return nodes
    # drop the pads nothing reads any more
    read: set[int] = {v.id for v in outputs.values()}
    for node in nodes:
        read.update(v.id for v in replaced.get(node.id, node).inputs if v is not None)
    dropped = {n.id for n in nodes if n.op in ("pad", "slice") and not any(v.id in read for v in n.outputs)}
    return [replaced.get(n.id, n) for n in nodes if n.id not in dropped]


def _read_padded_operands(node, g):
    """``node`` (a copy if anything changes) with each epilogue operand made by a zero pad
    (its producer in the GraphView ``g``) read through the step's ``"pad"`` offsets from the
    pad's input."""
    from ..._ir import Node
    from ...ops import _epilogue

    own = _epilogue.HOST_SLOTS.get(node.op)  # an operand at a lower index is the kernel's own
    steps = _epilogue.steps_of(node) if own is not None else []
    if not steps or len(node.outputs) != 1:
        return node
    out = node.outputs[0]
    inputs = list(node.inputs)
    new_steps = [dict(st) for st in steps]
    changed = False
    for i in sorted({st["input"] for st in steps if isinstance(st.get("input"), int)}):
        if i < own or i >= len(inputs) or inputs[i] is None:
            continue
        v = inputs[i]
        p = g.producer(v)
        users = [st for st in new_steps if st.get("input") == i]
        if p is None or not (zero_pad(p) or unit_slice(p)) or sum(1 for u in inputs if u is v) != 1:
            continue
        if (tuple(v.shape) != tuple(out.shape) or p.inputs[0].data_type != out.data_type
                or any(st.get("axis") is not None or st.get("pad") is not None for st in users)):
            continue
        if any(u is p.inputs[0] for u in inputs):
            continue  # the pad's input is bound already (by another slot): keep one reading per binding
        inputs[i] = p.inputs[0]
        offsets = p.attrs["beginning_padding"] if p.op == "pad" else [-s for s in p.attrs["starts"]]
        for st in users:
            st["pad"] = [int(b) for b in offsets]
        changed = True
        if DEBUG >= 2:
            log.debug("fold_layout: %s [%s] reads pad [%s]'s input in place", node.op, node.label, p.label)
    if not changed:
        return node
    return Node(node.op, inputs, list(node.outputs), {**node.attrs, "epilogue": new_steps}, node.label)


def _left_to_preact(g, chain: list, context) -> bool:
    """Whether a concat map's element-wise ``chain`` is left to the convs reading its value, which
    apply it as they load their input (``fuse_conv_input_preact``, later:
    :func:`~webnn_gpu.compiler.rules.conv.preact_chain`; the concat then stores its output
    alone): only with ``WEBNN_GPU_FORCE_INPUT_PREACT=concat``. By default the concat stores
    the chain's value (Keras DenseNet121's 57 dense-layer maps: the map in the concat costs
    less than the step in each 1x1 conv reading up to 992 channels; ``knob_ab``: those
    kernels 1.11, wall 1.06 with the convs applying it)."""
    from ..._env import force_choice
    from .conv import preact_chain

    if force_choice("input_preact", ("off", "concat", "windowed")) != "concat":
        return False
    got = preact_chain(g, chain[-1], context)
    return got is not None and {n.id for n in got[0]} == {n.id for n in chain}


def fuse_concat_map(nodes: list, outputs: dict, context=None) -> list:
    """A float concat whose output ``v`` is read by an element-wise chain and by other
    readers (or is a graph output) stores the chain's value too, as it copies each element:
    the concat gets a second output, the chain's last value, and ``attrs["side"]``, the chain
    as epilogue steps over the output element (:mod:`webnn_gpu.ops._epilogue`; operands read
    along the last axis, and one constant or graph input of another broadcast shape, read per
    element; ``attrs["side_parts"]`` counting the concat's own inputs). Where the
    chain is ``v``'s only reader, the concat stores the chain's value alone (its one output).

    Pattern: ``concat(parts) -> v``; ``v`` read by a chain of float unary operators and binary
    ones whose other operand is a constant varying along the last axis alone (a batch
    normalization's scale and shift, an activation) or one other constant, each value of the chain but the last read
    by its next operator alone and no graph output, and ``v`` read elsewhere as well. A dense
    block (DenseNet) concatenates the features so far, normalizes and activates them for the
    next layer's conv, and concatenates them again: the copy and the element-wise kernel become
    one kernel (and the last concat of a block, read by the transition's normalization alone,
    applies it as it copies; a ViT's class token concatenated to the patches, then the
    position embedding added). Near misses: a second operand read per element, a computed one,
    a chain value read elsewhere or a graph output in the middle, data that is not float32 or
    float16 (in float16 the chain runs in float32 and its value is rounded once, as a conv's
    epilogue is; the element-wise kernel it replaces rounds each operator's result to float16),
    parts whose slabs are not multiples of 4 elements (``concat_vec4_ok``), the last axis not a
    multiple of 4, more bindings than the device allows.
    """
    from ..._ir import GraphView, Node
    from ...ops.movement import concat_vec4_ok
    from ._common import _max_bindings
    from .epilogue import side_chain

    g = GraphView(nodes, outputs)
    taken: set[int] = set()
    replaced: dict[int, Node] = {}
    dropped: set[int] = set()
    limits = {"max-storage-buffers-per-shader-stage": _max_bindings(context)}
    for cat in nodes:
        if cat.op != "concat" or "side" in cat.attrs or cat.id in taken or len(cat.outputs) != 1:
            continue
        v = cat.outputs[0]
        if v.data_type not in ("float32", "float16") or v.shape[-1] % 4 or not concat_vec4_ok(cat, 1, limits):
            continue
        readers = g.consumers(v)
        n = len(cat.inputs)
        steps, operands, chain = side_chain(g, cat, v, readers, len(v.shape) - 1, n, taken, loads=1)
        if not chain or not concat_vec4_ok(cat, 1 + len(operands), limits) or _left_to_preact(g, chain, context):
            continue
        y = chain[-1].outputs[0]
        # the chain v's only reader: the concat stores its value alone (an epilogue)
        outs = [v, y] if len(readers) > 1 or g.is_output(v) else [y]
        attrs = {**cat.attrs, "side": steps, "side_parts": n}
        label = "+".join(dict.fromkeys(x.label for x in (cat, *chain) if x.label))
        replaced[cat.id] = Node("concat", list(cat.inputs) + operands, outs, attrs, label)
        dropped.update(x.id for x in chain)
        taken.update(x.id for x in (cat, *chain))
        if DEBUG >= 2:
            log.debug("fuse_concat_map: concat [%s] stores %s of its output", cat.label, [s["op"] for s in steps])
    return g.replace(replaced, dropped)


#: Operators whose lowering writes its output with kernels (bound at an offset like any
#: other value), which :func:`concat_in_place` lets write into a concat's output.
IN_PLACE_PRODUCERS = ("conv2d", "conv_transpose2d", "matmul", "gemm", "depthwise_project", "siblings")
#: Data-movement operators whose lowering writes its one output with kernels unless it is a view
#: (``alias``), a concat read in place itself or a concat storing a side map: they may write
#: into a concat's output too
IN_PLACE_MOVERS = ("slice", "transpose", "expand", "tile", "reverse", "pad", "remap_chain", "gather", "concat")


def _writes_in_place(p, replaced) -> bool:
    """Whether ``p`` (a producer, maybe marked ``in_place`` in ``replaced`` by this rule) may
    write its output at an offset of a concat's output."""
    if p is None or p.id in replaced or p.attrs.get("in_place"):
        return False
    if p.op in IN_PLACE_PRODUCERS:
        return True
    return (p.op in IN_PLACE_MOVERS and len(p.outputs) == 1 and not p.attrs.get("alias")
            and "side" not in p.attrs)


def concat_in_place(nodes: list, outputs: dict, context=None) -> list:
    """A concat whose every input is a contiguous block of its output (the output's dimensions
    before the axis all 1) costs no kernel: each input's producer writes its block of the
    concat's buffer, bound at the block's byte offset (``attrs["in_place"]``; the graph's
    memory plan stores the input, and the views it is read through, inside the output:
    :meth:`webnn_gpu._lower.LowerContext.place`). Detector heads reshape their 1x1 convs'
    outputs to ``[1, anchors, k]`` and concatenate them along the anchors.

    Conditions: each input is made by a conv, matmul, gemm or depthwise + projection kernel, or
    by a data-movement kernel (:data:`IN_PLACE_MOVERS`: a slice, transpose, expand, tile,
    reverse, pad, remap chain, gather or a concat that is neither a view nor read in place),
    maybe through views (reshapes, moving transposes) that nothing else reads, no graph output
    on the way; the inputs distinct; every block's byte offset a multiple of the device's
    ``min-storage-buffer-offset-alignment`` (256 without a device) and every block but the
    last a multiple of 4 bytes. Near misses: an input read elsewhere or a graph output, an
    input that is a graph input or constant or made by another kind of kernel, a misaligned
    offset (pose detection's 1568-anchor head: 6,272 bytes), an axis with a larger dimension
    before it, a concat that stores a side map.
    """
    from ..._dtypes import byte_length
    from ..._ir import GraphView, Node

    align = 256 if context is None else int(context.limits.get("min-storage-buffer-offset-alignment", 256))
    g = GraphView(nodes, outputs)
    replaced: dict[int, Any] = {}
    for node in nodes:
        if node.op != "concat" or node.attrs.get("alias") or "side" in node.attrs or len(node.outputs) != 1:
            continue
        dst, ax = node.outputs[0], node.attrs["axis"]
        if any(d != 1 for d in dst.shape[:ax]) or len(node.inputs) < 2:
            continue
        roots: list = []
        offset = 0
        for k, v in enumerate(node.inputs):
            if k and offset % align:
                break
            src = v
            while True:  # through views read by nothing else
                if src.kind != "op" or g.sole_consumer(src) is None:
                    src = None
                    break
                p = g.producer(src)
                if p is None or not (p.attrs.get("alias") and p.op in ("reshape", "transpose")):
                    break
                src = p.inputs[0]
            p = g.producer(src)
            if not _writes_in_place(p, replaced) or any(src is r for r in roots):
                break
            roots.append(src)
            offset += byte_length(v.data_type, v.shape)
            if k < len(node.inputs) - 1 and offset % 4:
                break
        else:
            replaced[node.id] = Node(node.op, list(node.inputs), list(node.outputs),
                                     {**node.attrs, "in_place": True}, node.label)
            if DEBUG >= 2:
                log.debug("concat_in_place: %s [%s]", node.op, node.label)
    return g.replace(replaced)


#: :func:`store_depth_to_space` checks the transpose's element order on an index array of the
#: conv's output up to this many elements (a build-time cost; the zoo's is 36,864)
D2S_CHECK_MAX = 1 << 22


def _d2s_block(v, u, perm) -> int:
    """The block size b where transposing ``u`` (a reshape of ``v``, NHWC [N, H, W, C]) by
    ``perm`` gives ``v``'s depth_to_space with b x b blocks in TensorFlow's order (DCR: channel
    (by b + bx) C / b^2 + c of pixel (h, w) goes to pixel (h b + by, w b + bx), channel c),
    whatever shape ``u`` spells it in; else 0. Checked on an index array, element by element."""
    import numpy as np

    if len(v.shape) != 4 or math.prod(v.shape) > D2S_CHECK_MAX:
        return 0
    n, h, w, c = v.shape
    idx = None
    for b in range(2, 9):
        if c % (b * b):
            continue
        if idx is None:
            idx = np.arange(math.prod(v.shape), dtype=np.int64)
            got = idx.reshape(u.shape).transpose(perm).reshape(-1)
        ref = idx.reshape(n, h, w, b, b, c // (b * b)).transpose(0, 1, 3, 2, 4, 5).reshape(-1)
        if np.array_equal(got, ref):
            return b
    return 0


def store_depth_to_space(nodes: list, outputs: dict, context=None) -> list:
    """A transpose that makes the depth_to_space of a conv2d's output (read through a reshape,
    TensorFlow's DEPTH_TO_SPACE as the TFLite loader spells it: ``reshape -> transpose ->
    reshape``) costs no kernel where the conv can store that order itself
    (:func:`webnn_gpu.ops.conv.store_d2s_ok`: the depthwise kernel with vec4 channels, C / b^2 a
    multiple of 4): the conv gets ``attrs["store_d2s"] = b`` and writes each vec4 of channels
    at its pixel of the depth_to_space, and the transpose becomes a view of those bytes
    (``alias``). The conv's output and the reshape then hold the transposed bytes, so both
    must be read by nothing else and be no graph output. Runs after every fusion (only
    ``concat_in_place``, which follows views, comes after it): a rule after it that read the
    conv's output would see the permuted bytes.

    Near misses: a transpose whose order is not a depth_to_space (space_to_depth, ONNX's CRD
    order), a conv on another kernel or with C / b^2 not a multiple of 4 (one channel per
    block position: the remap kernel stays), a conv output or reshape read elsewhere or a
    graph output."""
    from ..._ir import GraphView, Node
    from ...ops.conv import store_d2s_ok

    tuning = getattr(context, "_tuning", "default")
    g = GraphView(nodes, outputs)
    replaced: dict[int, Any] = {}
    for t in nodes:
        if t.op != "transpose" or t.attrs.get("alias"):
            continue
        u = t.inputs[0]
        r = g.producer(u)
        reader = g.sole_consumer(u)
        if r is None or r.op != "reshape" or reader is None or reader is not t:
            continue
        v = r.inputs[0]
        conv = g.producer(v)
        if conv is None or conv.op != "conv2d" or conv.id in replaced or g.sole_consumer(v) is not r:
            continue
        b = _d2s_block(v, u, t.attrs["permutation"])
        if not b or not store_d2s_ok(conv, b, tuning):
            continue
        replaced[conv.id] = Node(conv.op, list(conv.inputs), list(conv.outputs), {**conv.attrs, "store_d2s": b},
                                 conv.label)
        replaced[t.id] = Node(t.op, list(t.inputs), list(t.outputs), {**t.attrs, "alias": True}, t.label)
        if DEBUG >= 2:
            log.debug("store_depth_to_space: %s [%s] stores the depth_to_space (%d) of its output", conv.op,
                      conv.label, b)
    return g.replace(replaced)


def _chain_link(node, ops) -> bool:
    """Whether ``node`` may be a link of a remap chain: a layout operator of ``ops``
    (:data:`~webnn_gpu.ops.movement.CHAIN_OPS`) with one input and one output and no rule's
    marks (a reshape with no attribute but ``alias``)."""
    return (node is not None and node.op in ops and len(node.inputs) == 1 and len(node.outputs) == 1
            and isinstance(node.attrs, dict) and (node.op != "reshape" or set(node.attrs) <= {"alias"}))


def _costs_kernel(node) -> bool:
    """Whether ``node``, a link of a remap chain, runs a kernel of its own
    (:func:`webnn_gpu.ops.movement.is_view` says no)."""
    from ...ops.movement import is_view

    return not is_view(node.op, node.attrs)


def _split_into_slices(nodes: list, outputs: dict, ops) -> list:
    """``nodes`` with each split (of several outputs) that has an output read, maybe through
    reshapes, by a layout operator costing a kernel alone made one ``slice`` node per output
    (the same kernels: a split runs one slice-like remap per output), so that the slice can
    head that operator's chain."""
    from ..._ir import GraphView, Node

    g = GraphView(nodes, outputs)
    replaced: dict[int, list] = {}
    for sp in nodes:
        if sp.op != "split" or len(sp.outputs) < 2 or not isinstance(sp.attrs, dict):
            continue
        heads = False
        for v in sp.outputs:
            c = g.sole_consumer(v)
            while c is not None and _chain_link(c, ops) and not _costs_kernel(c):
                c = g.sole_consumer(c.outputs[0])
            heads = heads or (c is not None and _chain_link(c, ops))
        if not heads:
            continue
        src, ax, offset, slices = sp.inputs[0], sp.attrs["axis"], 0, []
        for v in sp.outputs:
            starts = [offset if d == ax else 0 for d in range(len(v.shape))]
            slices.append(Node("slice", [src], [v], {"starts": starts, "strides": [1] * len(v.shape), "alias": False},
                               sp.label))
            offset += v.shape[ax]
        replaced[sp.id] = slices
    return g.replace(replaced) if replaced else nodes


def fuse_remap_chain(nodes: list, outputs: dict, context=None) -> list:
    """A chain of layout operators, each value but the last read by the next operator alone and
    no graph output, is one ``remap_chain`` node (``attrs["chain"]``: each operator's op,
    attributes and input and output shapes, from the chain's input on), lowered as one
    ``layout/remap.wgsl`` kernel that maps each output index through the operators' index maps
    in turn, composed per axis where they compose
    (:func:`webnn_gpu.ops.movement.chain_stages`). The values move as raw bits: the result is
    the same for every data type.

    Pattern: two or more of slice (any strides), reverse, transpose, expand, tile and pad
    that each cost a kernel, with reshapes (views) between them; TFLite's STRIDED_SLICE with a
    negative stride is a reverse and a slice. An output of a split read by such an operator
    alone is a slice heading its chain (the split becomes one slice per output: as many
    kernels). The chain starts and ends at an operator that costs a kernel (a reshape before
    or after it stays a view). Near misses: a value in the middle read by another node too or
    a graph output (the chain ends before it), one costing operator with views around it
    (already one kernel), a second constant pad (its fill is another value), a concat (several
    inputs), a split none of whose outputs such an operator reads alone (it stays a split), a
    reshape a rule marked.
    """
    from ..._ir import GraphView, Node
    from ...ops.movement import CHAIN_OPS, chain_pays

    if sum(1 for n in nodes if (n.op in CHAIN_OPS and n.op != "reshape") or n.op == "split") < 2:
        return nodes  # (most graphs: no GraphView to build)
    nodes = _split_into_slices(nodes, outputs, CHAIN_OPS)
    g = GraphView(nodes, outputs)
    replaced: dict[int, Node] = {}
    dropped: set[int] = set()
    for last in reversed(nodes):
        if last.id in dropped or not _chain_link(last, CHAIN_OPS) or not _costs_kernel(last):
            continue
        chain = [last]
        while True:
            p = g.producer(chain[-1].inputs[0])
            if (p is None or not _chain_link(p, CHAIN_OPS) or g.sole_consumer(p.outputs[0]) is not chain[-1]
                    or p.id in dropped):
                break
            chain.append(p)
        while not _costs_kernel(chain[-1]):  # leading views stay views
            chain.pop()
        chain.reverse()
        pads = [n for n in chain if n.op == "pad" and n.attrs.get("mode", "constant") == "constant" and _costs_kernel(n)]
        if sum(1 for n in chain if _costs_kernel(n)) < 2 or len(pads) > 1:
            continue
        steps = [{"op": n.op, "attrs": dict(n.attrs), "in_shape": list(n.inputs[0].shape),
                  "out_shape": list(n.outputs[0].shape)} for n in chain]
        if not chain_pays(steps, last.outputs[0].data_type):
            continue
        label = "+".join(dict.fromkeys(n.label for n in chain if n.label))
        replaced[last.id] = Node("remap_chain", [chain[0].inputs[0]], list(last.outputs), {"chain": steps}, label)
        dropped.update(n.id for n in chain[:-1])
        if DEBUG >= 2:
            log.debug("fuse_remap_chain: [%s] %s as one kernel", label, [n.op for n in chain])
    return g.replace(replaced, dropped)
