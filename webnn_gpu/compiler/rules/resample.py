"""Resample rules: a 2x bilinear upsampling read only by a pointwise conv's epilogue step is
interpolated where that step reads it."""

from __future__ import annotations

import logging

from ..._env import DEBUG
from ..._ir import GraphView, Node
from .pool import _pooled_reader

log = logging.getLogger("webnn_gpu")


def fuse_upsampled_residual(nodes: list, outputs: dict, context=None) -> list:
    """An exact 2x bilinear upsampling of NHWC data (resample2d, linear, axes 1 and 2, both
    doubled; maybe with unary epilogue steps such as a clamp) read only by an epilogue step of
    one pointwise conv2d (the skip add of a feature pyramid's top-down path: ``add(conv(skip),
    upsample(top))``) is interpolated where that step reads it: the step reads the small image
    (``"up2"``, :mod:`webnn_gpu.ops._epilogue`; the tile kernel loads it as vec4 through the
    epilogue's helpers, four loads of the small image per vec4) and the upsampling's kernel
    goes, with its launch, its store and the reader's load of the large image.

    Conditions (:func:`webnn_gpu.ops._epilogue.given_up2_ok`,
    :func:`webnn_gpu.ops.conv.upsampled_residual_ok`): a float resample2d whose output is
    ``[N, 2H, 2W, C]`` of its ``[N, H, W, C]`` input, its own steps unary ones of
    ``VEC4_UNARY``; on the lane-loop profile with ``shader-int64``, C a multiple of 8 (the tile
    kernel loads the small image as 8-value words, four per two vec4s it stores: vec4 loads, four
    per vec4, cost about the doubling kernel), a small image of at most
    ``UP2_RESIDUAL_MAX_BYTES`` (past that the wall measured the same). Near misses: nearest-neighbor mode,
    another factor or other axes, a resample read twice or a graph output, one read as the
    host's own operand (its image) or by a step that reads it per channel, broadcast, padded or
    twice, a resample whose epilogue reads an operand, a host that is not a pointwise conv (a
    depthwise + projection kernel measured slower), a larger small image.
    ``WEBNN_GPU_PASSES=-fuse_upsampled_residual`` keeps the upsampling's kernel.
    """
    from ...ops._epilogue import given_up2_ok
    from ...ops.conv import upsampled_residual_ok

    tuning = getattr(context, "_tuning", "default")
    features = getattr(context, "features", ())
    g = GraphView(nodes, outputs)
    replaced: dict[int, Node] = {}
    dropped: set[int] = set()
    for rs in nodes:
        if rs.op != "resample2d" or rs.attrs.get("mode") != "linear" or sorted(rs.attrs.get("axes", [])) != [1, 2]:
            continue
        y, x = rs.outputs[0], rs.inputs[0]
        host = g.sole_consumer(y)
        if (host is None or host.id in replaced or host.id in dropped or len(rs.inputs) != 1
                or len(rs.outputs) != 1 or not upsampled_residual_ok(host, x, tuning, features)):
            continue
        new = _pooled_reader(host, y, x, {"steps": list(rs.attrs.get("epilogue") or [])}, "up2")
        if new is None or not all(given_up2_ok(st, x, new.outputs[0]) for st in new.attrs["epilogue"] if "up2" in st):
            continue
        replaced[host.id] = new
        dropped.add(rs.id)
        if DEBUG >= 2:
            log.debug("fuse_upsampled_residual: resample2d [%s] read by %s [%s]", rs.label, host.op, host.label)
    return g.replace(replaced, dropped)
