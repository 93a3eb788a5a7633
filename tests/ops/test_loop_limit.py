"""Products whose reduction is too long for one shader invocation's loops on llvmpipe (Mesa 22.3
ends all loops of an invocation after ``LOOP_LIMIT`` iterations, silently): matmul, gemm and
pointwise conv2d split K in chunks (:func:`webnn_gpu.ops.linalg.k_chunks`), an NHWC implicit
GEMM its input channels, one tile launch of the chunks' partial products and
``matmul/ksum.wgsl`` summing them with the epilogue; against float64 NumPy just past the limit,
and the chunk plan without a GPU. Convolutions that cannot split raise NotSupportedError at
build time.

Tolerance: ``check`` of test_tile.py, the f32 accumulation bound ``4 * K * 2**-24 * (|A| @ |B|)``
plus the output's rounding.
"""

from __future__ import annotations

import numpy as np
import pytest

from test_tile import build_run, check, data

import webnn_gpu as webnn
from webnn_gpu.ops import conv, linalg
from webnn_gpu.ops.recurrent import LOOP_LIMIT


# ---------------------------------------------------------------- the chunk plan (no GPU)
@pytest.mark.parametrize("K", [245_540, 245_764, 300_000, 300_007, 786_432, 4_000_001])
def test_chunks_cover_k_within_the_budget(K):
    C, KC = linalg.k_chunks(K)
    assert KC % 4 == 0 and C * KC <= K
    rem = K - C * KC
    assert rem < 5 * C, "the remainder ksum.wgsl sums in its loop stays small"
    assert linalg.tile_loop_iterations(KC) <= linalg.LOOP_BUDGET
    assert C + 1 + rem + 1 <= linalg.LOOP_BUDGET, "ksum.wgsl's own loops"
    assert linalg.LOOP_BUDGET < LOOP_LIMIT


def test_products_under_the_budget_do_not_split():
    assert linalg.k_chunks(1) is None
    assert linalg.k_chunks(64) is None
    k_max = max(k for k in range(4 * linalg.LOOP_BUDGET - 400, 4 * linalg.LOOP_BUDGET, 4)
                if linalg.tile_loop_iterations(k) <= linalg.LOOP_BUDGET)
    assert linalg.k_chunks(k_max) is None
    assert linalg.k_chunks(k_max + 4) is not None
    # the naive kernel's loop is K long
    assert linalg.k_chunks(70_000, naive=True) is not None and linalg.k_chunks(70_000) is None


def test_tile_loop_bound_grows_with_the_window():
    assert linalg.tile_loop_iterations(64, 3, 3, 8) > 9 * 16


# ---------------------------------------------------------------- on the GPU, past the limit
@pytest.fixture(autouse=True)
def _tile_kernel(monkeypatch):
    """The tile kernel's split (these products of a few rows would otherwise take
    ``matmul/matvec.wgsl``, whose loop is K / 32 long: test_matvec.py runs it past this limit)."""
    monkeypatch.setenv("WEBNN_GPU_FORCE_MATMUL_MATVEC", "off")


def _ref(a, w):
    a64, w64 = a.astype(np.float64), w.astype(np.float64)
    return a64 @ w64, np.abs(a64) @ np.abs(w64)


def _kernels(steps):
    return [s.template for s in steps]


@pytest.mark.parametrize("M,K,N", [(1, 300_000, 4), (3, 300_007, 5)])
def test_matmul_past_the_loop_limit(ctx, rng, M, K, N):
    a, w = data(rng, (M, K)), data(rng, (K, N))
    got, steps = build_run(ctx, lambda b, o: b.matmul(o["a"], b.constant(w)), {"a": a})
    assert "matmul/ksum.wgsl" in _kernels(steps)
    ref, absref = _ref(a, w)
    check(got, ref, absref, K, np.float32, f"matmul {M}x{K}->{N}")


def test_matmul_just_under_the_budget_takes_one_tile_launch(ctx, rng):
    K = 245_000  # about 61,300 loop iterations by the bound: one launch, and still right
    assert linalg.k_chunks(K) is None
    a, w = data(rng, (1, K)), data(rng, (K, 4))
    got, steps = build_run(ctx, lambda b, o: b.matmul(o["a"], b.constant(w)), {"a": a})
    assert _kernels(steps) == ["matmul/tile.wgsl"]
    ref, absref = _ref(a, w)
    check(got, ref, absref, K, np.float32, "matmul under the budget")


def test_batched_matmul_of_two_inputs_past_the_loop_limit(ctx, rng):
    K = 250_003
    a, w = data(rng, (2, 1, K)), data(rng, (2, K, 4))
    got, steps = build_run(ctx, lambda b, o: b.matmul(o["a"], o["w"]), {"a": a, "w": w})
    assert "matmul/ksum.wgsl" in _kernels(steps)
    ref, absref = _ref(a, w)
    check(got, ref, absref, K, np.float32, "batched matmul")


def test_gemm_with_c_alpha_beta_and_relu_past_the_loop_limit(ctx, rng):
    K = 262_144
    a, w, c = data(rng, (2, K)), data(rng, (3, K)), data(rng, (3,))

    def build(b, o):
        y = b.gemm(o["a"], b.constant(w), c=b.constant(c), alpha=0.5, beta=-2.0, b_transpose=True)
        return b.relu(y)

    got, steps = build_run(ctx, build, {"a": a})
    assert "matmul/ksum.wgsl" in _kernels(steps)
    prod, absref = _ref(a, w.T)
    ref = np.maximum(0.5 * prod - 2.0 * c.astype(np.float64), 0.0)
    check(got, ref, 0.5 * absref + 2.0 * np.abs(c), K, np.float32, "gemm")


def test_pointwise_conv_of_many_channels_splits_like_matmul(ctx, rng):
    C = 250_000
    x, w = data(rng, (1, 1, 2, C)), data(rng, (3, 1, 1, C))
    bias = data(rng, (3,))

    def build(b, o):
        return b.conv2d(o["x"], b.constant(w), bias=b.constant(bias), input_layout="nhwc", filter_layout="ohwi")

    got, steps = build_run(ctx, build, {"x": x})
    assert "matmul/ksum.wgsl" in _kernels(steps)
    prod, absref = _ref(x.reshape(2, C), w.reshape(3, C).T)
    ref = (prod + bias.astype(np.float64)).reshape(1, 1, 2, 3)
    check(got, ref, (absref + np.abs(bias)).reshape(1, 1, 2, 3), C, np.float32, "pointwise conv")


def test_pointwise_nchw_conv_of_many_channels_splits_like_matmul(ctx, rng):
    C = 250_000
    x, w = data(rng, (2, C, 1, 2)), data(rng, (3, C, 1, 1))
    bias = data(rng, (3,))

    def build(b, o):
        return b.relu(b.conv2d(o["x"], b.constant(w), bias=b.constant(bias)))

    got, steps = build_run(ctx, build, {"x": x})
    assert "matmul/ksum.wgsl" in _kernels(steps)
    w64 = w.reshape(3, C).astype(np.float64)
    x64 = x.reshape(2, C, 2).astype(np.float64)
    ref = np.maximum(np.einsum("oc,ncp->nop", w64, x64) + bias.astype(np.float64)[:, None], 0).reshape(2, 3, 1, 2)
    absref = (np.einsum("oc,ncp->nop", np.abs(w64), np.abs(x64)) + np.abs(bias)[:, None]).reshape(2, 3, 1, 2)
    check(got, ref, absref, C, np.float32, "pointwise nchw conv")


def _raises_at_build(ctx, build, shape, match):
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": shape})
    y = build(b, x)
    with pytest.raises(webnn.errors.NotSupportedError, match=match) as e:
        b.build({"y": y})
    assert "65535" in str(e.value)


def test_implicit_gemm_conv_splits_its_channels(ctx, rng):
    C = 30_000  # 3 x 3 taps of 30000 channels: two chunks of 15000
    x, w, bias = data(rng, (1, 4, 3, C)), data(rng, (4, 3, 3, C)), data(rng, (4,))

    def build(b, o):
        return b.relu(b.conv2d(o["x"], b.constant(w), bias=b.constant(bias), input_layout="nhwc",
                               filter_layout="ohwi"))

    got, steps = build_run(ctx, build, {"x": x})
    assert "matmul/ksum.wgsl" in _kernels(steps)
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    prod = np.stack([np.einsum("hwc,ohwc->o", x64[0, i:i + 3], w64) for i in range(2)]).reshape(1, 2, 1, 4)
    absref = np.stack([np.einsum("hwc,ohwc->o", np.abs(x64[0, i:i + 3]), np.abs(w64)) for i in range(2)])
    ref = np.maximum(prod + bias.astype(np.float64), 0)
    check(got, ref, absref.reshape(1, 2, 1, 4) + np.abs(bias), 9 * C, np.float32, "implicit GEMM conv")


def test_channel_chunks_are_equal_multiples_of_4():
    assert conv._channel_chunks(30_000, 3, 3) == 2
    assert conv._channel_chunks(4, 150, 150) is None  # the taps alone pass the budget


def test_conv_with_a_window_past_the_loop_limit_raises_at_build(ctx):
    w = np.zeros((2, 150, 150, 4), np.float32)  # implicit GEMM: 150 x 150 taps of 4 channels
    _raises_at_build(ctx, lambda b, x: b.conv2d(x, b.constant(w), input_layout="nhwc", filter_layout="ohwi",
                                                label="huge"),
                     [1, 150, 150, 4], r"conv2d.*huge.*90000 multiply-adds")


def test_depthwise_conv_with_a_window_past_the_loop_limit_raises_at_build(ctx):
    w = np.zeros((1, 256, 256, 2), np.float32)  # the direct kernel: 256 x 256 taps
    _raises_at_build(ctx, lambda b, x: b.conv2d(x, b.constant(w), input_layout="nhwc", filter_layout="ihwo",
                                                groups=2, label="dw"),
                     [1, 256, 256, 2], r"conv2d.*dw.*65536 multiply-adds.*256x256 taps")


@pytest.mark.parametrize("tiled", [True, False])
def test_conv_transpose_past_the_loop_limit_raises_at_build(ctx, tiled):
    k = 2 if tiled else 3  # kernel == strides tiles the output
    w = np.zeros((300_000, 1, k, k), np.float32)  # 75000 vec4 loads of the channels per tap
    _raises_at_build(ctx, lambda b, x: b.conv_transpose2d(x, b.constant(w), strides=[2, 2], label="ct"),
                     [1, 300_000, 1, 1], r"conv_transpose2d.*ct.*input channels")


def test_squeeze_excite_bound_keeps_many_rows_of_partials_out():
    from webnn_gpu.fusions.squeeze_excite import se_loop_iterations

    # the zoo's excitations: a few thousand iterations
    assert se_loop_iterations(32, 8, 32, 784) < 1000
    assert se_loop_iterations(576, 144, 576, 49) < 5000
    # 1024 channels: 16 channels per invocation, each over every row of partials
    assert se_loop_iterations(1024, 64, 1024, 4096) > linalg.LOOP_BUDGET
    assert se_loop_iterations(64, 16, 64, 61_000, 1000) > linalg.LOOP_BUDGET
