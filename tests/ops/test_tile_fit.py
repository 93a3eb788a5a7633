"""Subgroup tiles cut to the column-block order (``linalg.SG_FIT``; ``WEBNN_GPU_FORCE_TILE_SG_FIT=
off|short|narrow``): a tile of more than ``COLS_FIRST_MAX_BLOCKS`` accumulators (8 x 48) takes the
rows that fit its column blocks (7 x 48) where those pad at most ``SG_FIT_PAD`` times the rows,
else the widest column blocks that fit its rows (8 x 36, 8 x 44, 8 x 32, 8 x 24). The choice
without a GPU, then products where the rule fires either way and near misses (tiles of at most 88
accumulators, the forced row order, one-row tiles) on the GPU: the cut tile's output is
bit-identical to the uncut one's (each output adds the same terms in the same order) and within
the f32 accumulation bound of float64 NumPy (``check`` of test_tile.py: ``4 * K * 2**-24 *
(|A| @ |B|)`` plus the output's rounding and the epilogue's).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from references import conv2d_nhwc
from test_tile import build_run, check, data, tile_steps
from test_tile_cols import residual_hard_swish

from webnn_gpu.ops import linalg


@pytest.fixture(autouse=True)
def _tile_kernel(monkeypatch):
    """The tile kernel on few rows too (not ``matmul/matvec.wgsl``); the rule as it is by default."""
    monkeypatch.setenv("WEBNN_GPU_FORCE_MATMUL_MATVEC", "off")
    monkeypatch.delenv("WEBNN_GPU_FORCE_TILE_SG_FIT", raising=False)
    monkeypatch.delenv("WEBNN_GPU_FORCE_TILE_COLS", raising=False)


# ---------------------------------------------------------------- the choice (no GPU)
@pytest.mark.parametrize("M, N, tile", [
    (3136, 144, (7, 12)),  # 448 row tiles of 7: no more padding than 392 of 8
    (4096, 144, (7, 12)),  # 4144 rows against 4096 (1.2%)
    (256, 384, (8, 8)),  # 7-row tiles would pad to 280 rows: narrower columns
    (256, 528, (8, 11)),
    (64, 864, (8, 9)),  # 7 rows would pad a whole subgroup: 8 x 36
    (2304, 48, (7, 12)),  # 2352 rows against 2304 (2.1%)
    (1024, 96, (8, 8)),  # 7-row tiles: 1064 rows against 1024 (3.9%): 8 x 32
    (576, 48, (8, 6)),  # 616 rows against 576: 8 x 24
])
def test_wide_tiles_are_cut(M, N, tile):
    assert linalg.choose_tile_sg(M, N, 1, 8) == (tile if linalg.SG_FIT else (8, 12))


@pytest.mark.parametrize("M, N", [(784, 240), (1024, 1024), (256, 352), (49, 1152), (4, 384), (16, 288)])
def test_tiles_that_fit_are_kept(monkeypatch, M, N):
    """At most 88 accumulators (7 x 48, 8 x 32, 8 x 44), and one- or two-row tiles: unchanged."""
    tile = linalg.choose_tile_sg(M, N, 1, 8)
    monkeypatch.setenv("WEBNN_GPU_FORCE_TILE_SG_FIT", "off")
    assert linalg.choose_tile_sg(M, N, 1, 8) == tile


def test_switch_and_row_order(monkeypatch):
    monkeypatch.setenv("WEBNN_GPU_FORCE_TILE_SG_FIT", "off")
    assert linalg.choose_tile_sg(3136, 144, 1, 8) == (8, 12)
    monkeypatch.setenv("WEBNN_GPU_FORCE_TILE_SG_FIT", "short")
    assert linalg.choose_tile_sg(256, 384, 1, 8) == (7, 12)
    assert linalg.choose_tile_sg(64, 864, 1, 8) == (4, 12)  # the fewest-cost rows up to 7
    monkeypatch.setenv("WEBNN_GPU_FORCE_TILE_SG_FIT", "narrow")
    assert linalg.choose_tile_sg(3136, 144, 1, 8) == (8, 9)
    # the rows order (forced) is the one the 8 x 48 tile was measured in: no cut
    monkeypatch.delenv("WEBNN_GPU_FORCE_TILE_SG_FIT")
    monkeypatch.setenv("WEBNN_GPU_FORCE_TILE_COLS", "rows")
    assert linalg.choose_tile_sg(3136, 144, 1, 8) == (8, 12)
    # nor where the column-block order is off in the code (the cut tile would not take it)
    monkeypatch.delenv("WEBNN_GPU_FORCE_TILE_COLS")
    monkeypatch.setattr(linalg, "TILE_COLS_FIRST", False)
    assert linalg.choose_tile_sg(3136, 144, 1, 8) == (8, 12)
    assert linalg.choose_tile_sg(256, 384, 1, 8) == (8, 12)


def test_every_cut_tile_fits_the_column_order():
    """Over many sizes: at most COLS_FIRST_MAX_BLOCKS accumulators, padding at most 2M rows where
    the uncut choice had that, TN4 a divisor of the column blocks; the pool partials are sized
    with the same rows."""
    lanes, most = 8, linalg.COLS_FIRST_MAX_BLOCKS
    for M in list(range(4, 300, 7)) + [784, 2304, 3136, 4096, 9216]:
        for N in (48, 96, 144, 240, 288, 384, 528, 864, 1152):
            tm, tn4 = linalg.choose_tile_sg(M, N, 1, lanes)
            assert tm * tn4 <= most and (N // 4) % tn4 == 0, (M, N, tm, tn4)
            assert linalg.sg_rows_ok(M, tm, lanes), (M, N, tm)
            assert linalg.dense_tile_rows(M, N, 64, "lane-loop", lanes, True) == tm


# ---------------------------------------------------------------- on the GPU
def _both(ctx, monkeypatch, build, inputs):
    """The default build and the uncut one (``off``): (default output, its tile notes); the two
    outputs bit-identical."""
    runs = {}
    for v in ("off", ""):
        monkeypatch.setenv("WEBNN_GPU_FORCE_TILE_SG_FIT", v)
        out, steps = build_run(ctx, build, inputs)
        runs[v] = (np.ascontiguousarray(np.asarray(out)), [s.note for s in tile_steps(steps)])
    monkeypatch.delenv("WEBNN_GPU_FORCE_TILE_SG_FIT")
    assert runs[""][1], "the product runs on the tile kernel"
    np.testing.assert_array_equal(runs[""][0].view(np.uint8), runs["off"][0].view(np.uint8))
    return runs[""][0], runs[""][1], runs["off"][1]


def _tile(note: str) -> tuple[int, int]:
    tm, cols = re.search(r" (\d+)x(\d+) sg", note).groups()
    return int(tm), int(cols) // 4


@pytest.mark.parametrize("M, K, N, cut", [
    (3137, 24, 144, (7, 12)),  # short: ragged rows, the last tile of 1
    (250, 44, 384, (8, 8)),  # narrow, padded row tiles
    (64, 130, 288, (8, 9)),  # narrow, K % 4 = 2 (the reduction's tail), panels of B
    (300, 27, 48, (8, 6)),  # narrow to 8 x 24, K % 4 = 3
    (784, 40, 240, None),  # near miss: 7 x 48 fits
    (12, 64, 384, None),  # near miss: 2-row tiles
], ids=["short", "narrow384", "narrow288-ktail", "narrow48", "fits", "two-rows"])
def test_pointwise_conv_bias_relu6(ctx, rng, monkeypatch, M, K, N, cut):
    x, w, bias = data(rng, (1, M, 1, K)), data(rng, (N, 1, 1, K)), data(rng, (N,))

    def build(bld, o):
        y = bld.conv2d(o["x"], bld.constant(w), bias=bld.constant(bias), input_layout="nhwc", filter_layout="ohwi")
        return bld.clamp(y, min_value=0.0, max_value=6.0)

    out, notes, uncut = _both(ctx, monkeypatch, build, {"x": x})
    if ctx._subgroup:
        assert _tile(notes[0]) == (cut if cut and linalg.SG_FIT else _tile(uncut[0])), (notes, uncut)
    z = conv2d_nhwc(x, w, bias)
    absref = conv2d_nhwc(np.abs(x), np.abs(w), np.abs(bias))
    check(out, np.clip(z, 0, 6), absref, K + 1, np.float32, f"{M}x{K}->{N}")


def test_residual_and_hard_swish(ctx, rng, monkeypatch):
    """A residual read at each output's index (``gres``) with stores of 8 values, on a cut tile."""
    inputs, build, verify = residual_hard_swish(rng, 56, 56)
    out, notes, _ = _both(ctx, monkeypatch, build, inputs)
    if ctx._subgroup and linalg.SG_FIT:
        assert _tile(notes[0]) == (7, 12), notes
    verify(out)


def test_batched_matmul_and_float16(ctx, rng, monkeypatch):
    a, b = data(rng, (2, 64, 96), np.float16), data(rng, (2, 96, 288), np.float16)
    if "float16" not in ctx.supported_data_types:
        pytest.fail("float16 is not supported on this adapter")
    out, _, _ = _both(ctx, monkeypatch, lambda bld, o: bld.matmul(o["a"], bld.constant(b)), {"a": a})
    A, B = a.astype(np.float64), b.astype(np.float64)
    check(out, A @ B, np.abs(A) @ np.abs(B), 96, np.float16, "f16 batched")

