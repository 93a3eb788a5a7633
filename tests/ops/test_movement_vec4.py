"""``layout/remap.wgsl`` moving a vec4 per invocation (``ops.movement.remap_unit``): 32-bit data
whose coalesced index map keeps a contiguous innermost run of 4k elements at vec4 boundaries
(a depth_to_space's transpose whose block rows hold 4k elements, a slice or split along an outer axis,
an expand of whole rows, a reverse of outer axes). Each case is checked bit for bit against
NumPy, and so are its near misses, which must stay one element per invocation: a run that is not
a multiple of 4, an offset or a stride off a vec4 boundary, the last axis moved or reversed,
16-bit and 8-bit data, tile's modular and pad's padded terms.
"""

from __future__ import annotations

import numpy as np
import pytest

from _movement_data import assert_moved, data
from helpers import kernel_steps, run_graph


def _d2s(b, x, bs: int):
    """TFLite's DEPTH_TO_SPACE as the loader builds it: [1, H, W, bs * bs * C] -> reshape ->
    transpose [0, 1, 3, 2, 4, 5] -> reshape [1, H bs, W bs, C]."""
    n, h, w, c = x.shape
    t = b.reshape(x, [n, h, w, bs, bs, c // (bs * bs)])
    t = b.transpose(t, permutation=[0, 1, 3, 2, 4, 5])
    return b.reshape(t, [n, h * bs, w * bs, c // (bs * bs)])


def _d2s_ref(x, bs: int):
    n, h, w, c = x.shape
    return x.reshape(n, h, w, bs, bs, c // (bs * bs)).transpose(0, 1, 3, 2, 4, 5).reshape(n, h * bs, w * bs, -1)


# (id, shape, build(b, x), reference(x), vec4 expected)
CASES = [
    ("d2s_c16", (1, 5, 7, 64), lambda b, x: _d2s(b, x, 2), lambda x: _d2s_ref(x, 2), True),
    ("d2s_c4", (1, 3, 6, 16), lambda b, x: _d2s(b, x, 2), lambda x: _d2s_ref(x, 2), True),
    ("d2s_c12_bs3", (1, 2, 3, 108), lambda b, x: _d2s(b, x, 3), lambda x: _d2s_ref(x, 3), True),
    # 2 or 6 channels per block: the two pixels of a block row are one run of 4 or 12
    ("d2s_c2", (1, 3, 4, 8), lambda b, x: _d2s(b, x, 2), lambda x: _d2s_ref(x, 2), True),
    ("d2s_c6", (1, 2, 3, 24), lambda b, x: _d2s(b, x, 2), lambda x: _d2s_ref(x, 2), True),
    ("rows_swap", (3, 5, 8), lambda b, x: b.transpose(x, permutation=[1, 0, 2]), lambda x: x.transpose(1, 0, 2), True),
    ("slice_outer", (6, 5, 8), lambda b, x: b.slice(x, [1, 2, 0], [4, 3, 8]), lambda x: x[1:5, 2:5], True),
    ("slice_inner_aligned", (3, 12), lambda b, x: b.slice(x, [1, 4], [2, 8]), lambda x: x[1:3, 4:12], True),
    ("slice_outer_strided", (7, 4), lambda b, x: b.slice(x, [1, 0], [5, 4], strides=[2, 1]), lambda x: x[1:6:2], True),
    ("expand_rows", (1, 8), lambda b, x: b.expand(x, [3, 8]), lambda x: np.broadcast_to(x, (3, 8)), True),
    ("reverse_outer", (5, 3, 4), lambda b, x: b.reverse(x, axes=[0, 1]), lambda x: x[::-1, ::-1], True),
    # near misses: one element per invocation
    ("d2s_c1", (1, 4, 5, 4), lambda b, x: _d2s(b, x, 2), lambda x: _d2s_ref(x, 2), False),
    ("d2s_c3", (1, 2, 3, 12), lambda b, x: _d2s(b, x, 2), lambda x: _d2s_ref(x, 2), False),
    ("d2s_c2_bs3", (1, 2, 2, 18), lambda b, x: _d2s(b, x, 3), lambda x: _d2s_ref(x, 3), False),
    ("rows_swap_odd", (3, 5, 6), lambda b, x: b.transpose(x, permutation=[1, 0, 2]), lambda x: x.transpose(1, 0, 2),
     False),
    ("last_axis_moved", (4, 8), lambda b, x: b.transpose(x), lambda x: x.T, False),
    ("slice_inner_offset", (3, 12), lambda b, x: b.slice(x, [0, 2], [3, 8]), lambda x: x[:, 2:10], False),
    ("slice_inner_strided", (3, 16), lambda b, x: b.slice(x, [0, 0], [3, 8], strides=[1, 2]), lambda x: x[:, 0:8:2],
     False),
    ("slice_outer_odd_row", (4, 6), lambda b, x: b.slice(x, [1, 0], [2, 4]), lambda x: x[1:3, 0:4], False),
    ("reverse_last", (3, 8), lambda b, x: b.reverse(x, axes=[1]), lambda x: x[:, ::-1], False),
    ("tile", (2, 4), lambda b, x: b.tile(x, [2, 2]), lambda x: np.tile(x, (2, 2)), False),
    ("pad_rows", (2, 8), lambda b, x: b.pad(x, [1, 0], [1, 0]), lambda x: np.pad(x, [(1, 1), (0, 0)]), False),
]


@pytest.mark.parametrize("dt", ["float32", "int32", "uint32"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_remap_vec4_moves_exactly_where_it_may(ctx, rng, case, dt):
    """The result is NumPy's bit for bit; the kernel moves vec4s exactly where the map allows."""
    _, shape, build, ref, vec4 = case
    x = data(rng, dt, shape)
    out = run_graph(ctx, lambda b, o: {"y": build(b, o["x"])}, {"x": x})["y"]
    assert_moved(out, np.ascontiguousarray(ref(x)))
    steps = [s for s in kernel_steps(ctx, lambda b, o: {"y": build(b, o["x"])}, {"x": x})
             if s.template == "layout/remap.wgsl"]
    assert len(steps) == 1
    assert ("array<vec4<" in steps[0].wgsl) == vec4


@pytest.mark.parametrize("dt", ["float16", "int8", "uint8", "int64"])
def test_remap_vec4_not_for_other_widths(ctx, rng, dt):
    """16-, 8- and 64-bit data keep one element per invocation (exact, bit for bit)."""
    x = data(rng, dt, (1, 3, 4, 32))
    out = run_graph(ctx, lambda b, o: {"y": _d2s(b, o["x"], 2)}, {"x": x})["y"]
    assert_moved(out, _d2s_ref(x, 2))
    (step,) = [s for s in kernel_steps(ctx, lambda b, o: {"y": _d2s(b, o["x"], 2)}, {"x": x})
               if s.template == "layout/remap.wgsl"]
    assert "array<vec4<" not in step.wgsl


def test_remap_vec4_forced_off(ctx, rng, monkeypatch):
    """``WEBNN_GPU_FORCE_REMAP=scalar`` keeps one element per invocation, with the same result."""
    monkeypatch.setenv("WEBNN_GPU_FORCE_REMAP", "scalar")
    x = data(rng, "float32", (1, 3, 5, 64))
    out = run_graph(ctx, lambda b, o: {"y": _d2s(b, o["x"], 2)}, {"x": x})["y"]
    assert_moved(out, _d2s_ref(x, 2))
    (step,) = [s for s in kernel_steps(ctx, lambda b, o: {"y": _d2s(b, o["x"], 2)}, {"x": x})
               if s.template == "layout/remap.wgsl"]
    assert "array<vec4<" not in step.wgsl
