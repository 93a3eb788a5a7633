"""The subgroup tile's rows on products with few rows (small images' pointwise convs): the row
count weighs each row tile's shared cost (``linalg.SG_TILE_COST``), so 81, 100 or 289 rows take
6-8-row tiles instead of one-row tiles. The choice without a GPU, then the chosen tiles against
float64 NumPy with odd M, N and K, several column tiles, and epilogues (bias, clamp, a residual
add, hard_swish, float16).

On an adapter without the variant (``MLContext._subgroup == 0``) the same cases check the plain
kernel; on lavapipe before Mesa 24 each asserts that the variant ran with the expected rows.

Tolerance: the float64 result of the same inputs, within the f32 accumulation bound
``4 * K * 2**-24 * (|A| @ |B|)`` plus the output's rounding (an f16 ulp for float16) and the
epilogue's f32 roundings (``check`` of test_tile.py).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from references import conv2d_nhwc
from test_tile import build_run, check, data, tile_steps

from webnn_gpu.ops import linalg


def padded(M: int, tm: int, lanes: int = 8) -> int:
    return -(-(-(-M // tm)) // lanes) * lanes * tm


# ---------------------------------------------------------------- the choice (no GPU)
def test_few_rows_take_taller_row_tiles():
    lanes = 8
    # one-row tiles broadcast every vector of B for a single row: 6 x 16 rows cost less than 1 x 88
    assert linalg.choose_tile_sg(81, 728, 1, lanes, K=728)[0] == 6
    assert linalg.choose_tile_sg(100, 256, 1, lanes, K=256)[0] == 7
    assert linalg.choose_tile_sg(289, 256, 1, lanes, K=256)[0] == 8
    assert linalg.choose_tile_sg(225, 256, 1, lanes, K=256)[0] == 6
    # where the fewest padded rows already come with tall tiles, nothing changes
    assert linalg.choose_tile_sg(49, 192, 1, lanes, K=1152) == (7, 12)
    assert linalg.choose_tile_sg(144, 256, 1, lanes, K=256)[0] == 6
    assert linalg.choose_tile_sg(1024, 1024, 1, lanes, K=1024) == (8, 8)
    # a tall tile here would pad a whole subgroup of rows: few rows keep short tiles
    assert linalg.choose_tile_sg(16, 512, 1, lanes, K=512)[0] == 2
    assert linalg.choose_tile_sg(4, 64, 1, lanes, K=128)[0] == 1


def test_row_tiles_minimise_the_weighted_cost():
    lanes = 8
    for M in range(4, 400):
        tm = linalg.choose_tile_sg(M, 256, 1, lanes)[0]
        assert linalg.sg_rows_ok(M, tm, lanes), M
        cost = padded(M, tm) * (tm + linalg.SG_TILE_COST) / tm
        for t in range(1, linalg.SG_TILE_M + 1):
            if padded(M, t) <= 2 * M:
                assert cost <= padded(M, t) * (t + linalg.SG_TILE_COST) / t + 1e-9, (M, tm, t)
        # the pool partials are sized with the same rows
        assert linalg.dense_tile_rows(M, 256, 256, "lane-loop", lanes, True) == tm


# ---------------------------------------------------------------- on the GPU
def rows_of(ctx, steps, want_tm: int) -> None:
    """The one tile launch of ``steps`` runs the subgroup variant with ``want_tm`` rows (where the
    adapter has the variant)."""
    (step,) = tile_steps(steps)
    if ctx._subgroup:
        assert "subgroupBroadcast" in step.wgsl
        m = re.search(r" (\d+)x\d+ sg", step.note)
        assert m and int(m.group(1)) == want_tm, step.note


@pytest.fixture(autouse=True)
def _tile_kernel(monkeypatch):
    """The tile kernel on few rows too (not ``matmul/matvec.wgsl``)."""
    monkeypatch.setenv("WEBNN_GPU_FORCE_MATMUL_MATVEC", "off")


@pytest.mark.parametrize("M, K, N, tm", [
    (81, 123, 200, 6),  # 9 x 9 pixels; K % 4 = 3; four column tiles of 48 + a ragged one
    (100, 64, 70, 7),  # N % 4 = 2 (scalar stores), K a multiple of 4
    (289, 37, 96, 8),  # 17 x 17 pixels, 37 rows of padding, K % 4 = 1
], ids=["m81", "m100", "m289"])
def test_few_rows_matmul(ctx, rng, M, K, N, tm):
    a, b = data(rng, (M, K)), data(rng, (K, N))
    out, steps = build_run(ctx, lambda bld, o: bld.matmul(o["a"], bld.constant(b)), {"a": a})
    rows_of(ctx, steps, tm)
    A, B = a.astype(np.float64), b.astype(np.float64)
    check(out, A @ B, np.abs(A) @ np.abs(B), K, np.float32, f"{M}x{K}->{N}")


def test_few_rows_pointwise_conv_with_bias_and_clamp(ctx, rng):
    """A 9 x 9 image, 72 -> 136 channels (the parameter-buffer path, several column tiles)."""
    x, w, bias = data(rng, (1, 9, 9, 72)), data(rng, (136, 1, 1, 72)), data(rng, (136,))

    def build(bld, o):
        y = bld.conv2d(o["x"], bld.constant(w), bias=bld.constant(bias), input_layout="nhwc", filter_layout="ohwi")
        return bld.clamp(y, min_value=0.0, max_value=6.0)

    out, steps = build_run(ctx, build, {"x": x})
    rows_of(ctx, steps, 6)
    absref = conv2d_nhwc(np.abs(x), np.abs(w), np.abs(bias))
    check(out, np.clip(conv2d_nhwc(x, w, bias), 0, 6), absref, 73, np.float32, "9x9 conv relu6")


def test_few_rows_pointwise_conv_with_residual_and_hard_swish(ctx, rng):
    """A 15 x 15 image (225 rows: 6-row tiles), bias, a residual add and hard_swish in the epilogue."""
    x, res = data(rng, (1, 15, 15, 40)), data(rng, (1, 15, 15, 56))
    w, bias = data(rng, (56, 1, 1, 40)), data(rng, (56,))

    def build(bld, o):
        y = bld.conv2d(o["x"], bld.constant(w), bias=bld.constant(bias), input_layout="nhwc", filter_layout="ohwi")
        return bld.hard_swish(bld.add(y, o["r"]))

    out, steps = build_run(ctx, build, {"x": x, "r": res})
    rows_of(ctx, steps, 6)
    z = conv2d_nhwc(x, w, bias) + res
    absref = conv2d_nhwc(np.abs(x), np.abs(w), np.abs(bias)) + np.abs(res)
    # hard_swish multiplies the sum by at most (|z| + 3) / 6 + 1 / 6 of its error
    check(out, z * np.clip(z + 3, 0, 6) / 6, absref * (np.abs(z) / 3 + 2), 42, np.float32, "15x15 residual hard_swish")


def test_few_rows_matmul_float16_with_bias(ctx, rng):
    if "float16" not in ctx.supported_data_types:
        pytest.fail("float16 is not supported on this adapter")
    a, b, bias = data(rng, (81, 52), np.float16), data(rng, (52, 40), np.float16), data(rng, (40,), np.float16)
    out, steps = build_run(ctx, lambda bld, o: bld.add(bld.matmul(o["a"], bld.constant(b)), bld.constant(bias)),
                           {"a": a})
    rows_of(ctx, steps, 6)
    A, B = a.astype(np.float64), b.astype(np.float64)
    check(out, A @ B + bias, np.abs(A) @ np.abs(B) + np.abs(bias.astype(np.float64)), 53, np.float16, "81 rows f16")
