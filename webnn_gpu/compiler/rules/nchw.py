"""Compiler rule for NCHW graphs (ONNX models): run a depthwise conv2d in NHWC.

The depthwise kernel (``conv/depthwise.wgsl``) reads NHWC tensors; an NCHW depthwise
``conv2d`` falls back to the direct kernel, several times slower (the selfie model converted to ONNX by
tf2onnx spent 60% of its time in ``conv/direct.wgsl``). :func:`nchw_conv_to_nhwc` rewrites
such a conv2d as ``transpose (NCHW -> NHWC)``, the same conv2d with ``input_layout="nhwc"``
(the filter keeps its layout; constants are re-laid out at build time) and ``transpose
(NHWC -> NCHW)`` into the original output value. Transposes move values without arithmetic,
so the result is the conv's, computed by the NHWC kernel.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger("webnn_gpu")

__all__ = ["nchw_conv_to_nhwc", "compose_transposes"]

#: The NHWC-only conv2d kernels worth two transposes (the pixel-block kernel was not: on the
#: selfie twin its two transposes cost more than the block kernel saved over the GEMM one).
NHWC_VARIANTS = ("depthwise",)


def nchw_conv_to_nhwc(nodes: list, outputs: dict, context=None) -> list:
    """Run an NCHW conv2d in NHWC, between two transposes, when its NHWC form gets the
    depthwise kernel (and its NCHW form does not). The conv must have one
    output and no fused epilogue yet (the rule runs before the fusions)."""
    from ..._env import DEBUG
    from ..._ir import Node, Value
    from ...ops.conv import _conv_variant
    from ...ops.conv import _geometry as conv_geometry

    tuning = getattr(context, "_tuning", "default")
    replaced: dict[int, list[Any]] = {}
    for conv in nodes:
        a = conv.attrs
        if (conv.op != "conv2d" or a.get("input_layout", "nchw") != "nchw" or a.get("epilogue")
                or len(conv.outputs) != 1 or len(conv.inputs[0].shape) != 4):
            continue
        x, y = conv.inputs[0], conv.outputs[0]
        n, c, h, w = x.shape
        _, o, oh, ow = y.shape
        xt = Value(x.data_type, (n, h, w, c), "op")
        yt = Value(y.data_type, (n, oh, ow, o), "op")
        new_conv = Node("conv2d", [xt, *conv.inputs[1:]], [yt], {**a, "input_layout": "nhwc"}, conv.label)
        try:
            nhwc = _conv_variant(conv_geometry(new_conv), "nhwc", tuning)
            nchw = _conv_variant(conv_geometry(conv), "nchw", tuning)
        except Exception:  # noqa: BLE001 - a geometry the kernels do not describe: leave the conv alone
            continue
        if nhwc not in NHWC_VARIANTS or nchw == nhwc:
            continue
        to_nhwc = Node("transpose", [x], [xt], {"permutation": [0, 2, 3, 1], "alias": _alias(x.shape, [0, 2, 3, 1])},
                       conv.label)
        to_nchw = Node("transpose", [yt], [y], {"permutation": [0, 3, 1, 2], "alias": _alias(yt.shape, [0, 3, 1, 2])},
                       conv.label)
        xt.producer, yt.producer = to_nhwc, new_conv
        replaced[conv.id] = [to_nhwc, new_conv, to_nchw]
        if DEBUG >= 2:
            log.debug("nchw_conv_to_nhwc: conv2d [%s] on the %s kernel in NHWC (was %s)", conv.label, nhwc, nchw)
    if not replaced:
        return nodes
    result: list = []
    for node in nodes:
        result += replaced.get(node.id, [node])
    return result


def _alias(shape, perm) -> bool:
    """Whether the transpose only moves axes of size 1 (a view; as ``MLGraphBuilder.transpose``)."""
    moved = [p for p in perm if shape[p] != 1]
    return moved == sorted(moved)


def _unit_reshape(node) -> bool:
    """Whether ``node`` is a reshape that only adds or drops axes of size 1 (the other axes keep
    their order)."""
    if node.op != "reshape" or len(node.inputs) != 1:
        return False
    return [d for d in node.inputs[0].shape if d != 1] == [d for d in node.outputs[0].shape if d != 1]


def _view_source(b, producer: dict):
    """The first value of the longest chain of transposes and reshapes adding or dropping axes
    of size 1 ending at transpose ``b`` whose output holds that value's elements in the same
    order (so ``b``'s output is a view of it), or None. At least two nodes (b and one more)."""
    chain = [b]
    while True:
        p = producer.get(chain[-1].inputs[0].id)
        if p is None or not (p.op == "transpose" or _unit_reshape(p)):
            break
        chain.append(p)
    best = None
    for k in range(2, len(chain) + 1):
        src = chain[k - 1].inputs[0]
        labels: list = list(range(len(src.shape)))
        for node in reversed(chain[:k]):
            x, y = node.inputs[0], node.outputs[0]
            if node.op == "transpose":
                labels = [labels[p] for p in node.attrs["permutation"]]
            else:
                kept = iter([lab for lab, d in zip(labels, x.shape) if d != 1])
                labels = [next(kept) if d != 1 else None for d in y.shape]
        order = [lab for lab, d in zip(labels, b.outputs[0].shape) if d != 1]
        if order == sorted(order):
            best = src
    return best


def compose_transposes(nodes: list, outputs: dict, context=None) -> list:
    """``transpose(transpose(x, p1), p2)`` becomes ``transpose(x, p1[p2])``, or a view of ``x``
    (a reshape to the same shape, no kernel) when the two cancel: tf2onnx wraps NCHW layers in
    NHWC transposes and :func:`nchw_conv_to_nhwc` adds the inverse ones around a depthwise conv.
    Likewise a chain of transposes and reshapes that add or drop axes of size 1 (an ONNX
    ``Squeeze`` between two ``Transpose``) ending in a transpose is a view of its first value
    where the elements stay in order. A transpose or reshape whose every reader was so
    replaced is dropped (unless it is a graph output). Transposes move values without
    arithmetic: results are unchanged."""
    from ..._env import DEBUG
    from ..._ir import Node

    out_ids = {v.id for v in outputs.values()}
    producer = {v.id: n for n in nodes for v in n.outputs}
    replaced: dict[int, Any] = {}
    for b in nodes:
        if b.op != "transpose" or b.id in replaced:
            continue
        src = _view_source(b, producer)
        if src is not None:
            replaced[b.id] = Node("reshape", [src], [b.outputs[0]], {"alias": True}, b.label)
            if DEBUG >= 2:
                log.debug("compose_transposes: [%s] as a view of %r", b.label, src)
            continue
        mid = b.inputs[0]
        a = producer.get(mid.id)
        if a is None or a.op != "transpose":
            continue
        x, y = a.inputs[0], b.outputs[0]
        perm = [a.attrs["permutation"][p] for p in b.attrs["permutation"]]
        if perm == list(range(len(perm))):
            new = Node("reshape", [x], [y], {"alias": True}, b.label)
        else:
            new = Node("transpose", [x], [y], {"permutation": perm, "alias": _alias(x.shape, perm)}, b.label)
        replaced[b.id] = new
        if DEBUG >= 2:
            log.debug("compose_transposes: [%s] and [%s] as %s %s", a.label, b.label, new.op, perm)
    if not replaced:
        return nodes
    result = [replaced.get(n.id, n) for n in nodes]
    # drop the transposes and reshapes nothing reads any more (a chain: repeat)
    while True:
        read = set(out_ids)
        for n in result:
            read.update(v.id for v in n.inputs if v is not None)
        keep = [n for n in result if n.op not in ("transpose", "reshape") or any(v.id in read for v in n.outputs)]
        if len(keep) == len(result):
            return result
        result = keep
