"""The tile kernel's workgroup size across one graph: a launch takes the size an earlier launch of
the same kernel already uses (one pipeline instead of two) when it keeps at least four workgroups
(or gets more), and keeps its own otherwise (:func:`webnn_gpu.ops.linalg._twin_workgroup`), and
subgroup launches below 16 workgroups of 64 take one size (one subgroup) whatever their count; the
choice rule without a GPU, and twin matmuls of one graph against float64 NumPy (``check`` of
test_tile.py: the f32 accumulation bound ``4 * K * 2**-24 * (|A| @ |B|)`` plus the output's
rounding).
"""

from __future__ import annotations

import re

import numpy as np
from test_tile import check, data, tile_steps

import webnn_gpu as webnn
from webnn_gpu._lower import KernelStep
from webnn_gpu.ops import linalg


def workgroup(step) -> int:
    return int(re.search(r"@workgroup_size\((\d+)", step.wgsl).group(1))


# ---------------------------------------------------------------- the choice (no GPU)
def test_a_launch_takes_its_twins_workgroup_size_when_it_keeps_two_workgroups():
    # 1024 x 32 -> 192 (512 invocations, 16 of its own) after 4096 x 24 -> 144 (64): 8 workgroups of 64
    assert linalg._twin_workgroup(512, 16, {64: ""}) == 64
    # 64 invocations (8 of its own) after a launch of workgroups of 16: four workgroups of 16
    assert linalg._twin_workgroup(64, 8, {16: ""}) == 16
    # a big launch takes a smaller twin size (more workgroups)
    assert linalg._twin_workgroup(2048, 64, {16: ""}) == 16
    # the closest size to its own, the smaller on a tie
    assert linalg._twin_workgroup(512, 16, {8: "", 64: ""}) == 8
    assert linalg._twin_workgroup(512, 16, {64: "", 256: ""}) == 64


def test_a_tiny_launch_keeps_its_small_workgroups():
    assert linalg._twin_workgroup(16, 8, {}) == 8  # no twin
    assert linalg._twin_workgroup(16, 8, {16: ""}) == 8  # 16 would be one workgroup: a core idle
    assert linalg._twin_workgroup(32, 8, {16: ""}) == 8  # two workgroups of 16 instead of four of 8
    assert linalg._twin_workgroup(48, 8, {16: ""}) == 8  # three
    assert linalg._twin_workgroup(64, 16, {64: "", 256: ""}) == 16
    assert linalg._twin_workgroup(100, 16, {16: "", 64: ""}) == 16  # its own size is already built


def test_workgroup_free_text_ignores_only_the_size():
    src = "@compute @workgroup_size(16)\nfn main() {\n  let idx = gid.x + gid.y * nwg.x * 16u;\n}\n"
    other = src.replace("(16)", "(64)").replace("* 16u", "* 64u")
    assert linalg._workgroup_free(src, 16) == linalg._workgroup_free(other, 64)
    assert linalg._workgroup_free(src, 16) != linalg._workgroup_free(other.replace("fn main", "fn f"), 64)


# ---------------------------------------------------------------- two twin launches on the GPU
def two_matmuls(ctx, a1, b1, a2, b2, what: str) -> list:
    """Build and run one graph of ``a1 @ b1`` and ``a2 @ b2`` (constant Bs), check both products
    against float64 NumPy and return the graph's two tile launches."""
    b = webnn.MLGraphBuilder(ctx)
    x1 = b.input("a1", {"data_type": "float32", "shape": list(a1.shape)})
    x2 = b.input("a2", {"data_type": "float32", "shape": list(a2.shape)})
    w1 = b.constant({"data_type": "float32", "shape": list(b1.shape)}, b1)
    w2 = b.constant({"data_type": "float32", "shape": list(b2.shape)}, b2)
    graph = b.build({"y": b.matmul(x1, w1), "z": b.matmul(x2, w2)})
    steps = tile_steps([s for s in graph._steps if isinstance(s, KernelStep)])
    out = ctx.compute(graph, {"a1": a1, "a2": a2})
    graph.destroy()
    assert len(steps) == 2
    for got, a, w in ((out["y"], a1, b1), (out["z"], a2, b2)):
        a64, w64 = a.astype(np.float64), w.astype(np.float64)
        check(got, a64 @ w64, np.abs(a64) @ np.abs(w64), a.shape[1], np.float32, what)
    return steps


def test_two_twin_matmuls_share_one_pipeline(ctx, rng):
    """1024 x 24 -> 96 (16 workgroups of 16) and 256 x 32 -> 96 (8 of 8 on its own, 4 of 16 as
    the twin): one kernel text, both launches with at least four workgroups, both products right."""
    a1, b1 = data(rng, (1024, 24)), data(rng, (24, 96))
    a2, b2 = data(rng, (256, 32)), data(rng, (32, 96))
    steps = two_matmuls(ctx, a1, b1, a2, b2, "matmul")
    if ctx._subgroup:  # the subgroup variant's dynamic kernel: the two are twins
        assert steps[0].wgsl == steps[1].wgsl, [s.note for s in steps]
    for s in steps:
        assert s.groups[0] * s.groups[1] * s.groups[2] >= linalg.TWIN_WORKGROUPS, (s.note, s.groups, workgroup(s))


def test_small_subgroup_launches_share_one_pipeline(ctx, rng, monkeypatch):
    """256 x 64 -> 264 (24 subgroups: workgroups of 16 under the former rule) and then 64 x 64 ->
    264 (6 subgroups: 6 workgroups of 8, 3 of 16 too few for a twin), both 8 x 44 tiles: one
    workgroup size, one kernel text; with ``WEBNN_GPU_FORCE_TILE_SG_WORKGROUP=16`` (the near miss)
    two. Both products against float64 NumPy either way."""
    a1, b1 = data(rng, (256, 64)), data(rng, (64, 264))
    a2, b2 = data(rng, (64, 64)), data(rng, (64, 264))
    texts = []
    for forced in ("", "16"):
        monkeypatch.setenv("WEBNN_GPU_FORCE_TILE_SG_WORKGROUP", forced)
        texts.append({s.wgsl for s in two_matmuls(ctx, a1, b1, a2, b2, f"matmul forced={forced!r}")})
    if ctx._subgroup:  # the subgroup variant's dynamic kernel: twins in size only
        assert len(texts[0]) == 1, "one workgroup size: one pipeline"
        assert len(texts[1]) == 2, "workgroups of 16 for the larger launch: a pipeline each"
