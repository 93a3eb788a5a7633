"""The tile kernel on few output rows and odd widths, against float64 NumPy at the boundaries of
its choices: B as contiguous column panels (``linalg.panel_pack``; M = 1, 2, 4, 5, K not a
multiple of 4, N not a multiple of the panel, batched A, the parameter-buffer path with a
residual epilogue, float16), a one-group conv2d whose output channels are not a multiple of 4
(vec4 loads of B), which products ``matmul/small.wgsl`` keeps (``linalg.small_product``), and
the implicit GEMM's shared input columns (``win``, ``linalg.window_rows``: padding at every edge,
strides, dilations, 3 input channels with scalar loads and a K tail, two images, groups, one
output channel, an NCHW input, float16, the plain kernel and the subgroup variant).

Tolerance: the float64 result of the same inputs, within the f32 accumulation bound
``4 * K * 2**-24 * (|A| @ |B|)`` plus the output's rounding (an f16 ulp for float16) and the
epilogue's f32 roundings (``check`` of test_tile.py).
"""

from __future__ import annotations

import numpy as np
import pytest

from references import conv2d_nhwc, ref_conv2d
from test_tile import build_run, check, data, tile_steps

from webnn_gpu.builder import Value
from webnn_gpu.ops import linalg

PANEL = "B is stored as one contiguous"


@pytest.fixture(autouse=True)
def _tile_kernel(monkeypatch):
    """The tile kernel on few rows (products of up to 4 rows and 512 columns with a constant B
    otherwise take ``matmul/matvec.wgsl``: test_matvec.py)."""
    monkeypatch.setenv("WEBNN_GPU_FORCE_MATMUL_MATVEC", "off")


def vec4_b(step) -> bool:
    """B read as vec4s (of its storage type, or as the u64 words of 4 values on lavapipe)."""
    return any(f"var<storage, read> b: array<{t}>;" in step.wgsl
               for t in ("vec4<f32>", "vec4<f16>", "vec2<u64>", "u64"))


# ---------------------------------------------------------------- rules (no GPU)
def test_panel_pack_lays_out_column_tiles_one_after_the_other():
    m = np.arange(5 * 12, dtype=np.float32).reshape(5, 12)
    v = linalg.make_constant(m, "float32")
    p = linalg.panel_pack(v, 5, 12, 12, 8, 2)
    got = p.data.reshape(p.shape)
    assert got.shape == (2, 5, 8)
    np.testing.assert_array_equal(got[0], m[:, :8])
    np.testing.assert_array_equal(got[1, :, :4], m[:, 8:])
    assert not got[1, :, 4:].any(), "the last panel is zero-padded"
    # a row stride wider than the used columns (a packed B): only b_cols columns are kept
    q = linalg.panel_pack(v, 5, 12, 8, 4, 2).data.reshape(2, 5, 4)
    np.testing.assert_array_equal(np.concatenate([q[0], q[1]], axis=1), m[:, :8])
    assert linalg.panel_pack(Value("float32", (5, 12), "input"), 5, 12, 12, 8, 2) is None, "not a host constant"
    assert linalg.panel_pack(v, 4, 12, 12, 8, 2) is None, "size mismatch"
    assert linalg.panel_pack(v, 5, 12, 12, 4, 2) is None, "panels narrower than B"


def test_small_kernel_only_for_dispatch_bound_products(monkeypatch):
    assert linalg.small_product(1, 128, 1, 32)  # 4096 multiply-adds: one shared pipeline
    assert not linalg.small_product(1, 216, 1, 512), "a long K takes the tile kernel"
    assert not linalg.small_product(2, 128, 1, 1024)
    assert not linalg.small_product(1, 600, 1, 8), "too many outputs"
    monkeypatch.setenv("WEBNN_GPU_FORCE_MATMUL", "small")
    assert linalg.small_product(1, 216, 1, 512) and not linalg.small_product(1, 216, 1, 2048)


# ---------------------------------------------------------------- B panels on the GPU
@pytest.mark.parametrize("M", [1, 2, 4, 5])
def test_few_rows_read_b_as_panels(ctx, rng, M):
    """[M, 202] x [202, 100] (a constant B of 20200 values: a storage buffer): K % 4 = 2 (the
    reduction's tail rows), 25 vec4 columns (ragged against the panels); M = 1, 2 run the plain
    kernel, 4 and 5 its subgroup variant where the adapter has it."""
    a, b = data(rng, (M, 202)), data(rng, (202, 100))
    out, steps = build_run(ctx, lambda bld, o: bld.matmul(o["a"], bld.constant(b)), {"a": a})
    (step,) = tile_steps(steps)
    assert PANEL in step.wgsl
    A, B = a.astype(np.float64), b.astype(np.float64)
    check(out, A @ B, np.abs(A) @ np.abs(B), 202, np.float32, f"panels M={M}")


def test_batched_a_with_one_b_reads_panels(ctx, rng):
    a, b = data(rng, (3, 5, 64)), data(rng, (64, 264))
    out, steps = build_run(ctx, lambda bld, o: bld.matmul(o["a"], bld.constant(b)), {"a": a})
    (step,) = tile_steps(steps)
    assert PANEL in step.wgsl
    A, B = a.astype(np.float64), b.astype(np.float64)
    check(out, A @ B, np.abs(A) @ np.abs(B), 64, np.float32, "batched panels")


def test_pointwise_conv_panels_with_residual_epilogue(ctx, rng):
    """Six pixels, 208 -> 96 channels: sizes from the parameter buffer (the panel stride too),
    bias, a residual add loaded as vec4 by the kernel, then relu."""
    x, res = data(rng, (1, 2, 3, 208)), data(rng, (1, 2, 3, 96))
    w, bias = data(rng, (96, 1, 1, 208)), data(rng, (96,))

    def build(bld, o):
        y = bld.conv2d(o["x"], bld.constant(w), bias=bld.constant(bias), input_layout="nhwc", filter_layout="ohwi")
        return bld.relu(bld.add(y, o["r"]))

    out, steps = build_run(ctx, build, {"x": x, "r": res})
    (step,) = tile_steps(steps)
    assert PANEL in step.wgsl and "prm" in step.wgsl and "gres" in step.wgsl
    z = conv2d_nhwc(x, w, bias) + res
    absref = conv2d_nhwc(np.abs(x), np.abs(w), np.abs(bias)) + np.abs(res)
    check(out, np.maximum(z, 0), absref, 210, np.float32, "pointwise panels residual")


def test_float16_panels(ctx, rng):
    if "float16" not in ctx.supported_data_types:
        pytest.fail("float16 is not supported on this adapter")
    a, b = data(rng, (5, 128), np.float16), data(rng, (128, 40), np.float16)
    out, steps = build_run(ctx, lambda bld, o: bld.matmul(o["a"], bld.constant(b)), {"a": a})
    (step,) = tile_steps(steps)
    assert PANEL in step.wgsl
    A, B = a.astype(np.float64), b.astype(np.float64)
    check(out, A @ B, np.abs(A) @ np.abs(B), 128, np.float16, "f16 panels")


# ---------------------------------------------------------------- conv2d heads
@pytest.mark.parametrize("hw", [(2, 2), (4, 6)], ids=["m1", "m6"])
def test_conv_with_odd_output_channels_loads_b_as_vec4(ctx, rng, hw):
    """A 2x2 stride-2 conv of 128 channels to 38 (one group; 38 is not a multiple of 4): the
    filter's columns are padded to 40 and read as vec4, in panels; bias and relu."""
    x, w, bias = data(rng, (1, *hw, 128)), data(rng, (38, 2, 2, 128)), data(rng, (38,))

    def build(bld, o):
        y = bld.conv2d(o["x"], bld.constant(w), bias=bld.constant(bias), strides=[2, 2], input_layout="nhwc",
                       filter_layout="ohwi")
        return bld.relu(y)

    out, steps = build_run(ctx, build, {"x": x})
    (step,) = tile_steps(steps)
    assert vec4_b(step) and PANEL in step.wgsl
    ref = conv2d_nhwc(x, w, bias, stride=2)
    absref = conv2d_nhwc(np.abs(x), np.abs(w), np.abs(bias), stride=2)
    check(out, np.maximum(ref, 0), absref, 513, np.float32, "odd O")


def test_one_row_with_a_long_k_takes_the_tile_kernel(ctx, rng):
    a, b = data(rng, (1, 512)), data(rng, (512, 36))
    out, steps = build_run(ctx, lambda bld, o: bld.matmul(o["a"], bld.constant(b)), {"a": a})
    assert [s.template for s in steps] == ["matmul/tile.wgsl"]
    A, B = a.astype(np.float64), b.astype(np.float64)
    check(out, A @ B, np.abs(A) @ np.abs(B), 512, np.float32, "1 x 512 x 36")


# ---------------------------------------------------------------- shared input columns
WINDOW_CASES = [
    # x shape (NHWC), filter (OHWI), stride, dilation, pad, groups
    ((1, 12, 16, 8), (1, 3, 3, 8), 1, 1, 1, 1),  # one output channel, padded edges
    ((2, 8, 8, 3), (6, 3, 3, 3), 1, 1, 1, 1),  # 3 channels: scalar loads, K tail; 2 images; O padded to 8
    ((1, 15, 15, 16), (4, 5, 5, 16), 2, 1, 2, 1),  # 5x5 stride 2: 19 columns for 8 pixels x 5 taps
    ((1, 10, 12, 8), (2, 3, 3, 8), 1, 2, 2, 1),  # dilation 2
    ((1, 8, 8, 16), (8, 3, 3, 8), 1, 1, 1, 2),  # two groups of 4 output channels
]


@pytest.mark.parametrize("shape, filt, stride, dil, pad, groups", WINDOW_CASES,
                         ids=["o1", "c3", "s2", "d2", "groups"])
def test_window_shares_input_columns(ctx, rng, shape, filt, stride, dil, pad, groups):
    x, w, bias = data(rng, shape), data(rng, filt), data(rng, (filt[0],))

    def build(bld, o):
        y = bld.conv2d(o["x"], bld.constant(w), bias=bld.constant(bias), strides=[stride] * 2, padding=[pad] * 4,
                       dilations=[dil] * 2, groups=groups, input_layout="nhwc", filter_layout="ohwi")
        return bld.relu(y)

    out, steps = build_run(ctx, build, {"x": x})
    (step,) = tile_steps(steps)
    assert "let xc0 = iw0 + 0;" in step.wgsl, "the shared columns"

    def ref(xx, ww, bb):
        r = ref_conv2d(xx.astype(np.float64).transpose(0, 3, 1, 2), ww.astype(np.float64).transpose(0, 3, 1, 2),
                       padding=(pad,) * 4, strides=(stride,) * 2, dilations=(dil,) * 2, groups=groups)
        return r.transpose(0, 2, 3, 1) + bb.astype(np.float64)

    k = filt[1] * filt[2] * filt[3]
    check(out, np.maximum(ref(x, w, bias), 0), ref(np.abs(x), np.abs(w), np.abs(bias)), k + 1, np.float32, "window")


def test_window_on_the_plain_kernel(ctx, rng, monkeypatch):
    monkeypatch.setenv("WEBNN_GPU_FORCE_MATMUL_SG", "off")
    x, w = data(rng, (1, 7, 12, 8)), data(rng, (3, 3, 3, 8))
    out, steps = build_run(ctx, lambda bld, o: bld.conv2d(o["x"], bld.constant(w), padding=[1] * 4, input_layout="nhwc",
                                                           filter_layout="ohwi"), {"x": x})
    (step,) = tile_steps(steps)
    assert "let xc0 = iw0 + 0;" in step.wgsl and "subgroupBroadcast" not in step.wgsl
    check(out, conv2d_nhwc(x, w, pad=1), conv2d_nhwc(np.abs(x), np.abs(w), pad=1), 72, np.float32, "plain window")


def test_window_rows_rule():
    conv = dict(OW=64, sw=1, dw=1)
    assert linalg.window_rows(8, 1, 3, conv) == 8
    assert linalg.window_rows(8, 8, 3, conv) == 0, "wide tiles keep per-tap loads"
    assert linalg.window_rows(8, 1, 1, conv) == 0, "no window to share"
    assert linalg.window_rows(5, 1, 3, dict(conv, OW=14)) == 0, "2 of 5 rows: too short"
    assert linalg.window_rows(8, 1, 3, dict(conv, OW=14)) == 7
    assert linalg.window_rows(8, 1, 2, dict(conv, sw=2)) == 0, "2x2 stride 2: no column is shared"
    assert linalg.window_rows(8, 4, 7, conv) == 0, "too much unrolled code"


def test_window_on_nchw_and_float16(ctx, rng):
    """An NCHW input of 3 channels (read through strides, an NCHW output) and a float16 one."""
    x, w = data(rng, (1, 3, 10, 16)), data(rng, (2, 3, 3, 3))
    out, steps = build_run(ctx, lambda bld, o: bld.conv2d(o["x"], bld.constant(w), padding=[1] * 4), {"x": x})
    (step,) = tile_steps(steps)
    assert "let xc0 = iw0 + 0;" in step.wgsl
    ref = ref_conv2d(x.astype(np.float64), w.astype(np.float64), padding=(1,) * 4)
    check(out, ref, ref_conv2d(np.abs(x).astype(np.float64), np.abs(w).astype(np.float64), padding=(1,) * 4), 27,
          np.float32, "nchw window")
    if "float16" not in ctx.supported_data_types:
        pytest.fail("float16 is not supported on this adapter")
    xh, wh = data(rng, (1, 8, 16, 8), np.float16), data(rng, (4, 3, 3, 8), np.float16)
    out, steps = build_run(ctx, lambda bld, o: bld.conv2d(o["x"], bld.constant(wh), padding=[1] * 4, input_layout="nhwc",
                                                           filter_layout="ohwi"), {"x": xh})
    (step,) = tile_steps(steps)
    assert "let xc0 = iw0 + 0;" in step.wgsl
    check(out, conv2d_nhwc(xh, wh, pad=1), conv2d_nhwc(np.abs(xh), np.abs(wh), pad=1), 72, np.float16, "f16 window")
