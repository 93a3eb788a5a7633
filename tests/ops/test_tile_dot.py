"""The tile kernel's ``bdot`` mode (1 to 3 output columns, B a constant stored transposed, one
``dot`` per column and k step) against float64 NumPy at its boundaries: N = 1, 2, 3; M = 1, 2,
4, 5 (the plain kernel's smallest tiles, below one subgroup's rows) and ragged; conv2d as an
implicit GEMM with a window sharing its input columns, stride 2, padding and a batch of 2; the
subgroup variant; a PReLU (per-channel slope) and a residual add in the epilogue; float16; and
the products that keep vec4 column blocks (N = 4, K not a multiple of 4, a B that is not a
constant).

Tolerance: ``check`` of test_tile.py (the f32 accumulation bound plus the output's rounding).
"""

from __future__ import annotations

import numpy as np
import pytest

from references import conv2d_nhwc
from test_tile import build_run, check, data, tile_steps

from webnn_gpu.ops import linalg


def is_dot(step) -> bool:
    return "dot(a0, bt0)" in step.wgsl


def test_dot_columns_choice():
    """Only constants of 1 to 3 columns whose rows are a multiple of 4, stored [N, rows]."""
    from webnn_gpu.builder import Value

    b = linalg.make_constant(np.arange(24, dtype=np.float32).reshape(6, 4), "float32")
    assert linalg.dot_columns(b, 3, 6, 4) is None, "rows not a multiple of 4"
    b = linalg.make_constant(np.arange(32, dtype=np.float32).reshape(8, 4), "float32")
    t = linalg.dot_columns(b, 3, 8, 4)
    np.testing.assert_array_equal(linalg.constant_array(t), np.arange(32, dtype=np.float32).reshape(8, 4)[:, :3].T)
    assert linalg.dot_columns(b, 4, 8, 4) is None and linalg.dot_columns(b, 0, 8, 4) is None
    assert linalg.dot_columns(Value("float32", (8, 4), "op"), 2, 8, 4) is None, "not a host constant"


@pytest.mark.parametrize("M, K, N", [(1, 1200, 1), (2, 1200, 3), (4, 1100, 2), (5, 1200, 3), (333, 96, 1),
                                     (70, 260, 3)], ids=["m1", "m2", "m4", "m5", "ragged-n1", "n3"])
def test_dot_matmul(ctx, rng, monkeypatch, M, K, N):
    """matmul with a constant B of N <= 3 columns (M x N x K past matmul/small.wgsl's limits; 1 to
    3 rows take matmul/matvec.wgsl on lavapipe, kept off here)."""
    monkeypatch.setenv("WEBNN_GPU_FORCE_MATMUL_MATVEC", "off")
    a, b = data(rng, (M, K)), data(rng, (K, N))
    out, steps = build_run(ctx, lambda bld, o: bld.matmul(o["a"], bld.constant(b)), {"a": a})
    (step,) = tile_steps(steps)
    assert is_dot(step)
    A, B = a.astype(np.float64), b.astype(np.float64)
    check(out, A @ B, np.abs(A) @ np.abs(B), K, np.float32, f"dot {M}x{K}x{N}")


@pytest.mark.parametrize("shape, O, k, stride, pad", [((1, 37, 36, 8), 1, 3, 1, 1), ((2, 17, 20, 12), 2, 3, 2, 1),
                                                       ((1, 9, 11, 16), 3, 5, 1, 2), ((1, 24, 24, 128), 2, 1, 1, 0)],
                         ids=["3x3-n1-shared-columns", "3x3-s2-n2-batch2", "5x5-n3", "pointwise-n2"])
def test_dot_conv2d_prelu_residual(ctx, rng, shape, O, k, stride, pad):
    """conv2d heads of 1 to 3 channels: bias, PReLU with a per-channel slope, a residual add."""
    x = data(rng, shape)
    w, bias, slope = data(rng, (O, k, k, shape[3])), data(rng, (O,)), rng.uniform(0.05, 0.5, (O,)).astype(np.float32)
    ref = conv2d_nhwc(x, w, bias, pad=pad, stride=stride)
    res = data(rng, ref.shape)

    def build(bld, o):
        y = bld.conv2d(o["x"], bld.constant(w), bias=bld.constant(bias), strides=[stride] * 2, padding=[pad] * 4,
                       input_layout="nhwc", filter_layout="ohwi")
        return bld.add(bld.prelu(y, bld.constant(slope)), o["r"])

    out, steps = build_run(ctx, build, {"x": x, "r": res})
    (step,) = tile_steps(steps)
    assert is_dot(step) and ("subgroupBroadcast(btl" in step.wgsl) == (ctx._subgroup > 0)
    want = np.where(ref >= 0, ref, slope * ref) + res
    absref = conv2d_nhwc(np.abs(x), np.abs(w), np.abs(bias), pad=pad, stride=stride)
    check(out, want, absref * (1 + slope.max()) + np.abs(res), k * k * shape[3] + 2, np.float32, "dot conv")


def test_dot_conv2d_float16(ctx, rng):
    if "float16" not in ctx.supported_data_types:
        pytest.fail("float16 is not supported on this adapter")
    x, w = data(rng, (1, 14, 16, 8), np.float16), data(rng, (1, 3, 3, 8), np.float16)
    out, steps = build_run(ctx, lambda bld, o: bld.conv2d(o["x"], bld.constant(w), padding=[1] * 4,
                                                          input_layout="nhwc", filter_layout="ohwi"), {"x": x})
    assert is_dot(tile_steps(steps)[0])
    check(out, conv2d_nhwc(x, w, pad=1), conv2d_nhwc(np.abs(x), np.abs(w), pad=1), 72, np.float16, "dot f16")


@pytest.mark.parametrize("K, N, const", [(64, 4, True), (66, 2, True), (64, 2, False)],
                         ids=["n4", "k-not-multiple-of-4", "b-not-constant"])
def test_vec4_columns_kept(ctx, rng, K, N, const):
    """N = 4, K % 4 != 0 (scalar A loads) and a computed B keep the vec4 column blocks."""
    a, b = data(rng, (200, K)), data(rng, (K, N))
    inputs = {"a": a} | ({} if const else {"b": b})
    out, steps = build_run(ctx, lambda bld, o: bld.matmul(o["a"], bld.constant(b) if const else o["b"]), inputs)
    assert not is_dot(tile_steps(steps)[0])
    A, B = a.astype(np.float64), b.astype(np.float64)
    check(out, A @ B, np.abs(A) @ np.abs(B), K, np.float32, "vec4 columns")
