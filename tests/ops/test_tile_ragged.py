"""Ragged column tiles of the tile kernel (``linalg.ragged_cols``; ``WEBNN_GPU_FORCE_TILE_RAGGED=off|N``):
widths whose vec4 column blocks have few divisors (104 = 26 blocks, 116 = 29, 244 = 61, 1001 = 251)
take a wider column tile whose last one is ragged (B's panels zero-padded, B's loads clamped, the
epilogue's channel operands read clamped, the padding columns not stored) where the estimate says
so; widths with a good divisor keep theirs (100 = 25 blocks of 5; 96, 128). The choice without a
GPU, then products on the GPU against float64 NumPy: awkward widths with a bias, an activation, a
residual add, float16, a batch, a transposed B, a B that is not a constant, the plain kernel and
an implicit GEMM with a 3x3 window; each ragged output is also bit-identical to the divisor
tile's (every output adds the same terms in the same order).

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


@pytest.fixture(autouse=True)
def _tile_kernel(monkeypatch):
    """The tile kernel on few rows too (not ``matmul/matvec.wgsl``); the rule as it is by default."""
    monkeypatch.setenv("WEBNN_GPU_FORCE_MATMUL_MATVEC", "off")
    monkeypatch.delenv("WEBNN_GPU_FORCE_TILE_RAGGED", raising=False)


def blocks(step) -> int:
    """The column blocks TN4 of a tile launch, from its note (``MxK[ KHxKW]->N[ bB] TMx(4 TN4) ...``)."""
    tile = next(w for w in step.note.split("->", 1)[1].split() if re.fullmatch(r"\d+x\d+", w))
    return int(tile.split("x")[1]) // 4


# ---------------------------------------------------------------- the choice (no GPU)
@pytest.mark.parametrize("M, N, tile", [
    (196, 104, (5, 9)),  # 26 blocks: 3 tiles of 9 (27 computed), not 13 of 2
    (3136, 104, (8, 9)),
    (784, 116, (7, 10)),  # 29 blocks (prime): 3 tiles of 10, not 29 of 1
    (49, 244, (7, 9)),  # 61 blocks: 7 tiles of 9
    (49, 1001, (7, 12)),  # 251 blocks: 21 tiles of 12
    (3136, 1004, (8, 11)),  # 8 rows: at most 88 accumulators (the column-block order)
    (16, 20, (2, 3)),  # one subgroup of rows: 2 tiles of 3 still give two subgroups
])
def test_subgroup_tile_takes_a_ragged_column_tile(M, N, tile):
    assert linalg.choose_tile_sg(M, N, 1, 8) == tile
    n4 = -(-N // 4)
    assert n4 % tile[1], "ragged"
    assert linalg.choose_tile_sg(M, N, 1, 8, ragged=False)[1] < tile[1]


@pytest.mark.parametrize("M, N", [(49, 100), (3136, 100), (196, 96), (784, 128), (64, 72), (49, 192), (4, 8), (196, 4)])
def test_widths_with_a_good_divisor_keep_it(M, N):
    """Near misses: 100 columns (25 blocks, tiles of 5: 6 or 12 blocks measured 1.09 and 1.16),
    widths of a divisor up to 12 blocks."""
    assert linalg.choose_tile_sg(M, N, 1, 8) == linalg.choose_tile_sg(M, N, 1, 8, ragged=False)
    assert -(-N // 4) % linalg.choose_tile_sg(M, N, 1, 8)[1] == 0


def test_ragged_tiles_are_bounded_and_cover_the_columns():
    for N in range(1, 1300, 3):
        for M, batches in ((1, 1), (16, 1), (49, 1), (196, 2), (3136, 1)):
            tm, t = linalg.choose_tile_sg(M, N, batches, 8)
            n4 = -(-N // 4)
            d = linalg.choose_tile_sg(M, N, batches, 8, ragged=False)[1]
            assert 1 <= t <= max(d, linalg.SG_TILE_N4)
            if n4 % t:  # the rule fired: the estimate wins by RAGGED_GAIN, within 88 accumulators
                est = lambda c: -(-n4 // c) * (c + linalg.RAGGED_A_COST_SG)  # noqa: E731
                assert est(t) <= linalg.RAGGED_GAIN * est(d) and tm * t <= linalg.COLS_FIRST_MAX_BLOCKS
                assert batches * -(-(-(-M // tm)) // 8) * -(-n4 // t) >= 2 or d == n4


def test_plain_kernel_and_window_choices():
    assert linalg.choose_tile(196, 116, 1, "lane-loop", K=128) == (16, 6)  # 0.69 measured
    assert linalg.choose_tile(196, 104, 1, "lane-loop", K=128) == (16, 2)  # 16 x 24: 0.96-1.01, not taken
    assert linalg.choose_tile(49, 116, 1, "lane-loop", K=128) == (16, 1)  # 5 tiles: too few invocations
    assert linalg.choose_tile(196, 116, 1, "lane-loop", K=128, window=True) == (16, 3)
    assert linalg.choose_tile(196, 116, 1, "default", K=128) == (8, 1), "not measured on other profiles"
    # an implicit GEMM that keeps its window: at most WINDOW_MAX_TN4 blocks
    assert linalg.choose_tile_sg(784, 116, 1, 8, window=True) == (7, 3)  # 0.62 measured (3x3, 32 channels)
    assert linalg.choose_tile_sg(784, 52, 1, 8, window=True) == (7, 3)
    assert linalg.choose_tile_sg(784, 100, 1, 8, window=True) == linalg.choose_tile_sg(784, 100, 1, 8)  # no rule


def test_forced_off_and_forced_width(monkeypatch):
    monkeypatch.setenv("WEBNN_GPU_FORCE_TILE_RAGGED", "off")
    assert linalg.choose_tile_sg(784, 116, 1, 8) == (7, 1)
    assert linalg.choose_tile(196, 116, 1, "lane-loop", K=128) == (16, 1)
    monkeypatch.setenv("WEBNN_GPU_FORCE_TILE_RAGGED", "6")
    assert linalg.choose_tile_sg(784, 116, 1, 8) == (7, 6)
    assert linalg.choose_tile_sg(49, 100, 1, 8) == (7, 6)
    assert linalg.choose_tile_sg(49, 96, 1, 8) == (7, 12), "a wider divisor stays"


# ---------------------------------------------------------------- on the GPU
def _run_both(ctx, monkeypatch, build, inputs, ragged=True):
    """The output with the rule and with it off (bit-identical); the tile launch of the former."""
    monkeypatch.setenv("WEBNN_GPU_FORCE_TILE_RAGGED", "off")
    off, _ = build_run(ctx, build, inputs)
    monkeypatch.delenv("WEBNN_GPU_FORCE_TILE_RAGGED")
    out, steps = build_run(ctx, build, inputs)
    np.testing.assert_array_equal(out, off)
    (step,) = tile_steps(steps)
    return out, step


def _ragged(ctx, step, N, want=True):
    if ctx._subgroup:
        assert bool(-(-N // 4) % blocks(step)) == want, step.note


@pytest.mark.parametrize("M, K, N", [(300, 64, 1), (300, 24, 3), (200, 20, 5), (49, 96, 100), (70, 40, 104),
                                     (83, 36, 116), (49, 128, 244), (21, 64, 1001)])
def test_matmul_bias_relu_on_awkward_widths(ctx, rng, monkeypatch, M, K, N):
    a, b, bias = data(rng, (M, K)), data(rng, (K, N)), data(rng, (N,))
    out, step = _run_both(ctx, monkeypatch, lambda bld, o: bld.relu(bld.add(bld.matmul(o["a"], bld.constant(b)),
                                                                             bld.constant(bias))), {"a": a})
    _ragged(ctx, step, N, N in (104, 116, 244, 1001))
    A, B = a.astype(np.float64), b.astype(np.float64)
    check(out, np.maximum(A @ B + bias, 0), np.abs(A) @ np.abs(B) + np.abs(bias.astype(np.float64)), K + 1,
          np.float32, f"{M}x{K}->{N}")


def test_gemm_transposed_b_residual_and_clamp(ctx, rng, monkeypatch):
    """A gemm by W^T (a dense layer) with a bias, a residual add and a clamp, 116 columns."""
    x, w, c, r = data(rng, (83, 40)), data(rng, (116, 40)), data(rng, (116,)), data(rng, (83, 116))

    def build(bld, o):
        y = bld.gemm(o["x"], bld.constant(w), c=bld.constant(c), b_transpose=True)
        return bld.clamp(bld.add(y, o["r"]), min_value=-3.0, max_value=3.0)

    out, step = _run_both(ctx, monkeypatch, build, {"x": x, "r": r})
    _ragged(ctx, step, 116)
    X, W = x.astype(np.float64), w.astype(np.float64)
    check(out, np.clip(X @ W.T + c + r, -3, 3), np.abs(X) @ np.abs(W).T + np.abs(c) + np.abs(r), 42,
          np.float32, "gemm residual clamp")


def test_float16_and_batches(ctx, rng, monkeypatch):
    if "float16" not in ctx.supported_data_types:
        pytest.fail("float16 is not supported on this adapter")
    a, b = data(rng, (3, 29, 64), np.float16), data(rng, (64, 244), np.float16)
    out, step = _run_both(ctx, monkeypatch, lambda bld, o: bld.sigmoid(bld.matmul(o["a"], bld.constant(b))), {"a": a})
    _ragged(ctx, step, 244)
    A, B = a.astype(np.float64), b.astype(np.float64)
    z = A @ B
    check(out, 1 / (1 + np.exp(-z)), np.abs(A) @ np.abs(B) / 4, 64, np.float16, "f16 batched sigmoid")


def test_b_not_a_constant_and_batched_b(ctx, rng, monkeypatch):
    """B an input (no panels: B's loads clamped to its last column block), two batches of it."""
    a, b = data(rng, (2, 49, 32)), data(rng, (2, 32, 116))
    out, step = _run_both(ctx, monkeypatch, lambda bld, o: bld.matmul(o["a"], o["b"]), {"a": a, "b": b})
    _ragged(ctx, step, 116)
    A, B = a.astype(np.float64), b.astype(np.float64)
    check(out, A @ B, np.abs(A) @ np.abs(B), 32, np.float32, "input B")


def test_plain_kernel(ctx, rng, monkeypatch):
    monkeypatch.setenv("WEBNN_GPU_FORCE_MATMUL_SG", "off")
    a, b, bias = data(rng, (196, 32)), data(rng, (32, 116)), data(rng, (116,))
    out, step = _run_both(ctx, monkeypatch, lambda bld, o: bld.add(bld.matmul(o["a"], bld.constant(b)),
                                                                   bld.constant(bias)), {"a": a})
    assert "subgroupBroadcast" not in step.wgsl
    if ctx._tuning == "lane-loop":
        assert 29 % blocks(step), step.note
    A, B = a.astype(np.float64), b.astype(np.float64)
    check(out, A @ B + bias, np.abs(A) @ np.abs(B) + np.abs(bias.astype(np.float64)), 33, np.float32, "plain")


@pytest.mark.parametrize("shape, cout, win", [
    ((1, 28, 28, 8), 116, True),  # the divisor tile (1 block) shares input columns: at most 4 blocks
    ((1, 28, 28, 12), 52, True),
    ((1, 9, 11, 12), 52, False),  # 11 pixels a row: no tile shares them, the wide ragged tile
    ((1, 15, 13, 16), 244, False),
], ids=["116-win", "52-win", "52", "244"])
def test_conv3x3_implicit_gemm(ctx, rng, monkeypatch, shape, cout, win):
    monkeypatch.setenv("WEBNN_GPU_FORCE_CONV", "gemm")
    x, w, bias = data(rng, shape), data(rng, (cout, 3, 3, shape[3])), data(rng, (cout,))

    def build(bld, o):
        y = bld.conv2d(o["x"], bld.constant(w), bias=bld.constant(bias), padding=[1] * 4,
                       input_layout="nhwc", filter_layout="ohwi")
        return bld.relu(y)

    out, step = _run_both(ctx, monkeypatch, build, {"x": x})
    if ctx._subgroup:
        assert (" win" in step.note) == win, step.note
        assert blocks(step) <= (linalg.WINDOW_MAX_TN4 if win else linalg.SG_TILE_N4)
    _ragged(ctx, step, cout)
    ref = conv2d_nhwc(x, w, bias, pad=1)
    absref = conv2d_nhwc(np.abs(x), np.abs(w), np.abs(bias), pad=1)
    check(out, np.maximum(ref, 0), absref, 9 * shape[3] + 1, np.float32, "3x3 conv")


def test_grouped_pointwise_conv(ctx, rng, monkeypatch):
    """Two groups of 116 output channels (the product's batch): each group's ragged last tile reads
    its own channels' bias (clamped within the group) and stores none of the next group's."""
    monkeypatch.setenv("WEBNN_GPU_FORCE_CONV", "gemm")
    x, w, bias = data(rng, (1, 14, 14, 16)), data(rng, (232, 1, 1, 8)), data(rng, (232,))

    def build(bld, o):
        return bld.conv2d(o["x"], bld.constant(w), bias=bld.constant(bias), groups=2,
                          input_layout="nhwc", filter_layout="ohwi")

    out, step = _run_both(ctx, monkeypatch, build, {"x": x})
    _ragged(ctx, step, 116)
    ref = conv2d_nhwc(x, w, bias, groups=2)
    check(out, ref, conv2d_nhwc(np.abs(x), np.abs(w), np.abs(bias), groups=2), 9, np.float32, "grouped")
