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


def compose_transposes(nodes: list, outputs: dict, context=None) -> list:
    """``transpose(transpose(x, p1), p2)`` becomes ``transpose(x, p1[p2])``, or a view of ``x``
    (a reshape to the same shape, no kernel) when the two cancel: tf2onnx wraps NCHW layers in
    NHWC transposes and :func:`nchw_conv_to_nhwc` adds the inverse ones around a depthwise conv.
    The first transpose is dropped when the second was its only reader (and it is no graph
    output). Transposes move values without arithmetic: results are unchanged."""
    from ..._env import DEBUG
    from ..._ir import Node

    out_ids = {v.id for v in outputs.values()}
    producer = {v.id: n for n in nodes for v in n.outputs}
    readers: dict[int, int] = {}
    for n in nodes:
        for vid in {v.id for v in n.inputs if v is not None}:
            readers[vid] = readers.get(vid, 0) + 1
    replaced: dict[int, Any] = {}
    dropped: set[int] = set()
    for b in nodes:
        if b.op != "transpose" or b.id in replaced:
            continue
        mid = b.inputs[0]
        a = producer.get(mid.id)
        if a is None or a.op != "transpose" or a.id in dropped or a.id in replaced:
            continue
        x, y = a.inputs[0], b.outputs[0]
        perm = [a.attrs["permutation"][p] for p in b.attrs["permutation"]]
        if perm == list(range(len(perm))):
            new = Node("reshape", [x], [y], {"alias": True}, b.label)
        else:
            new = Node("transpose", [x], [y], {"permutation": perm, "alias": _alias(x.shape, perm)}, b.label)
        replaced[b.id] = new
        if readers.get(mid.id, 0) == 1 and mid.id not in out_ids:
            dropped.add(a.id)
        if DEBUG >= 2:
            log.debug("compose_transposes: [%s] and [%s] as %s %s", a.label, b.label, new.op, perm)
    if not replaced:
        return nodes
    return [replaced.get(n.id, n) for n in nodes if n.id not in dropped]
