"""``matmul/matvec.wgsl``: products of a few rows with a constant B (a dense layer on one sample,
a conv2d whose window covers its whole input, a 1x1 conv on up to 4 pixels, any other window
over up to 4 output pixels, gathered), the reduction split
over a subgroup's lanes. The plan and B's layout without a GPU; on the GPU against float64 NumPy
at odd sizes (K and N not multiples of 4, 1 to 4 rows), with epilogues (bias, gemm's alpha and
beta * c, a residual add, PReLU, a sigmoid), float16, K past the tile kernel's loop limit (one
launch: a lane's loop is K / 32 long), B past 64 KiB in a texture (wide products of up to 1404
columns), B as u64 words from a storage buffer (float32 words of 8 values; 16 float16 values
where B is float16 or holds only float16 values, subnormals included; the default on lavapipe
with shader-int64), several heads on one input in one launch (the compiler's fuse_heads), and
each lane's k steps as one contiguous run (``runs``: from 4 MiB of packed B, and forced on every
form of the kernel).

Tolerance: ``check`` of test_tile.py, the f32 accumulation bound ``4 * K * 2**-24 * (|A| @ |B|)``
plus the output's rounding (an f16 ulp for float16).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from test_tile import build_run, check, data

import webnn_gpu as webnn
from webnn_gpu._lower import KernelStep
from webnn_gpu.errors import OperationError
from webnn_gpu.ops import linalg


def _lc(subgroup=8, tuning="lane-loop", max_texture=8192):
    return SimpleNamespace(subgroup=subgroup, tuning=tuning, limits={"max-texture-dimension-2d": max_texture})


def _takes_matvec(ctx) -> bool:
    """Whether this adapter runs the matvec kernel (the "lane-loop" profile with subgroups)."""
    return ctx._tuning == "lane-loop" and ctx._subgroup > 0


def _templates(steps):
    return [s.template for s in steps]


def _words(ctx) -> bool:
    """Whether this adapter reads matvec's B as u64 words by default (lane-loop, shader-int64)."""
    return _takes_matvec(ctx) and "shader-int64" in ctx._features


WORDS = "var<storage, read> b: array<vec4<u64>>;"


# ---------------------------------------------------------------- the plan and B's layout (no GPU)
def test_plan_takes_few_rows_and_columns_on_lane_loop_only():
    assert linalg.matvec_plan(_lc(), 1, 63, 1152) == (1, 16)
    assert linalg.matvec_plan(_lc(), 1, 213, 512) == (2, 24)
    assert linalg.matvec_plan(_lc(), 3, 77, 1000) == (4, 8), "several rows, few columns: wider groups"
    assert linalg.matvec_plan(_lc(), linalg.MATVEC_MAX_M + 1, 63, 1152) is None
    assert linalg.matvec_plan(_lc(), 1, 16, 1000) is None, "fewer than MATVEC_MIN_MACS: small.wgsl"
    assert linalg.matvec_plan(_lc(), 1, 512, linalg.MATVEC_MIN_K - 4) is None, "a short reduction"
    assert linalg.matvec_plan(_lc(tuning="default"), 1, 63, 1152) is None
    assert linalg.matvec_plan(_lc(subgroup=0), 1, 63, 1152) is None


def test_plan_takes_four_rows_of_a_large_b_only(monkeypatch):
    """4 rows (MATVEC_TALL_M): matvec where K >= MATVEC_MIN_K_TALL and K x N >= MATVEC_MIN_KN_TALL;
    below, the tile kernel's subgroup variant (which shares B between rows); 5 rows never."""
    assert linalg.MATVEC_MAX_M == linalg.MATVEC_TALL_M == 4
    assert linalg.matvec_plan(_lc(), 4, 301, 512) is not None
    assert linalg.matvec_plan(_lc(), 4, 213, 512) is None, "a B of 109k values"
    assert linalg.matvec_plan(_lc(), 4, 128, 992) is None, "a B of 127k values"
    assert linalg.matvec_rows_ok(4, 1176, 128) and not linalg.matvec_rows_ok(4, 1168, 128)
    assert linalg.matvec_plan(_lc(), 4, 512, 4608) is not None
    assert linalg.matvec_plan(_lc(), 4, 64, 512) is None, "a B of 32k values"
    assert linalg.matvec_plan(_lc(), 4, 288, 288) is None, "a reduction under MATVEC_MIN_K_TALL"
    assert linalg.matvec_plan(_lc(), 4, 4096, 256) is None, "a reduction under MATVEC_MIN_K_TALL"
    assert linalg.matvec_plan(_lc(), 3, 64, 512) is not None, "3 rows: MATVEC_MIN_K only"
    assert linalg.matvec_plan(_lc(), 5, 512, 4608) is None
    monkeypatch.setenv("WEBNN_GPU_FORCE_MATMUL_MATVEC_ROWS", "3")
    assert linalg.matvec_plan(_lc(), 4, 512, 4608) is None
    monkeypatch.setenv("WEBNN_GPU_FORCE_MATMUL_MATVEC_ROWS", "17")
    with pytest.raises(ValueError, match="MATVEC_ROWS"):
        linalg.matvec_plan(_lc(), 4, 512, 4608)


def test_plan_gives_several_rows_fewer_wider_column_groups(monkeypatch):
    """One row keeps MATVEC_MIN_GROUPS groups; several rows whose groups would be single vec4
    columns take at least MATVEC_ROWS_GROUPS of up to 4 (A's loads are per group)."""
    assert linalg.matvec_plan(_lc(), 1, 64, 4608) == (1, 16)
    assert linalg.matvec_plan(_lc(), 2, 64, 4608) == (4, 8)
    assert linalg.matvec_plan(_lc(), 3, 40, 4608) == (2, 8), "10 vec4 columns: 5 groups of 2"
    assert linalg.matvec_plan(_lc(), 2, 12, 4608) == (1, 8), "3 vec4 columns: one each"
    assert linalg.matvec_plan(_lc(), 2, 213, 4608) == (2, 24), "wide enough already"
    monkeypatch.setenv("WEBNN_GPU_FORCE_MATMUL_MATVEC_GROUPS", "16")
    assert linalg.matvec_plan(_lc(), 2, 64, 4608) == (1, 16)


@pytest.mark.parametrize("knob,value", [("WEBNN_GPU_FORCE_MATMUL_MATVEC_GROUPS", "8"),
                                        ("WEBNN_GPU_FORCE_MATMUL_MATVEC_GROUPS", "of"),
                                        ("WEBNN_GPU_FORCE_MATMUL_MATVEC", "of")])
def test_misspelt_matvec_switches_raise(monkeypatch, knob, value):
    """A value the switch does not take raises (it would otherwise measure the default form)."""
    monkeypatch.setenv(knob, value)
    with pytest.raises(ValueError, match=knob):
        linalg.matvec_plan(_lc(), 2, 64, 4608)


def test_a_misspelt_b_form_raises(monkeypatch):
    """``WEBNN_GPU_FORCE_MATMUL_MATVEC_B`` takes one of ``linalg.MATVEC_B_FORMS``; another value
    raises where B's form is chosen instead of measuring the default form."""
    b = np.ones((8, 8), np.float32)
    for form in linalg.MATVEC_B_FORMS:
        monkeypatch.setenv("WEBNN_GPU_FORCE_MATMUL_MATVEC_B", form)
        linalg.matvec_words(_lc(), b, "float32", b.size)
    monkeypatch.setenv("WEBNN_GPU_FORCE_MATMUL_MATVEC_B", "texure")
    with pytest.raises(ValueError, match="MATVEC_B"):
        linalg.matvec_words(_lc(), b, "float32", b.size)


def test_a_misspelt_window_switch_raises(ctx, rng, monkeypatch):
    """``WEBNN_GPU_FORCE_MATMUL_MATVEC_WINDOW`` takes "off" only (read when a conv is lowered: the
    build's error names it)."""
    monkeypatch.setenv("WEBNN_GPU_FORCE_MATMUL_MATVEC_WINDOW", "of")
    x, w = data(rng, (1, 2, 2, 8)), data(rng, (4, 3, 3, 8))
    with pytest.raises(OperationError, match="WEBNN_GPU_FORCE_MATMUL_MATVEC_WINDOW='of'"):
        build_run(ctx, lambda b, o: b.conv2d(o["x"], b.constant(w), padding=[1, 1, 1, 1], input_layout="nhwc",
                                             filter_layout="ohwi"), {"x": x})


def test_window_rows_of_a_conv():
    """matvec_window: a row per output pixel, its first vec4 and whether its taps pass an edge."""
    g = dict(NB=1, C=8, H=4, W=4, OH=2, OW=2, KH=3, KW=3, sh=2, sw=2, dh=1, dw=1, pt=1, pl=1)
    w = linalg.matvec_window(g)
    assert (w["C4"], w["KW"], w["ky4"], w["kx4"], w["last"]) == (2, 3, 8, 2, 31)
    assert [(r["y0"], r["x0"], r["ty"], r["tx"]) for r in w["rows"]] == [
        (-1, -1, True, True), (-1, 1, True, False), (1, -1, False, True), (1, 1, False, False)]
    assert w["rows"][0]["base"] == (-1 * 4 - 1) * 2 and w["rows"][3]["base"] == (1 * 4 + 1) * 2
    assert linalg.matvec_window(dict(g, C=6)) is None, "channels not a multiple of 4"


def test_plan_takes_few_multiply_adds_where_b_is_read_as_words(monkeypatch):
    """Below MATVEC_MIN_MACS (iris_landmark's 1 x 512 -> 15 head) only with B as words; a short
    reduction never."""
    monkeypatch.delenv("WEBNN_GPU_FORCE_MATMUL_MATVEC_B", raising=False)
    words = SimpleNamespace(**vars(_lc()), features={"shader-int64"})
    assert 512 * 15 < linalg.MATVEC_MIN_MACS
    assert linalg.matvec_plan(_lc(), 1, 15, 512) is None
    assert linalg.matvec_plan(words, 1, 15, 512) == (1, 8)
    assert linalg.matvec_plan(words, 1, 1, 288) == (1, 8)
    assert linalg.matvec_plan(words, 1, 4, linalg.MATVEC_MIN_K - 4) is None
    monkeypatch.setenv("WEBNN_GPU_FORCE_MATMUL_MATVEC_B", "texture")
    assert linalg.matvec_plan(words, 1, 15, 512) is None


def test_plan_takes_any_width_where_b_fits_a_texture(monkeypatch):
    """Past MATVEC_MAX_N columns only with B in a texture: from a storage buffer the tile kernel's
    column tiles were as fast."""
    assert linalg.matvec_plan(_lc(), 1, 1404, 288) == (4, 64)
    assert linalg.matvec_plan(_lc(), 3, 1000, 4096) is not None
    wide = linalg.MATVEC_MAX_N + 1
    assert linalg.matvec_plan(_lc(), 1, wide, 1152) is not None
    assert linalg.matvec_plan(_lc(max_texture=16), 1, wide, 1152) is None, "more texel rows than the device allows"
    assert linalg.matvec_plan(_lc(max_texture=16), 1, linalg.MATVEC_MAX_N, 1152) is not None
    monkeypatch.setenv("WEBNN_GPU_FORCE_MATMUL_MATVEC_B", "storage")
    assert linalg.matvec_plan(_lc(), 1, wide, 1152) is None
    assert linalg.matvec_plan(_lc(), 1, linalg.MATVEC_MAX_N, 1152) is not None


def test_texture_copy_lays_b_out_in_rows_of_texels():
    """vec4 i of the packed B is texel (i % width, i // width); zero past the data."""
    data = np.arange(4 * 5000, dtype=np.float32) + 1
    tex = linalg.texture_copy(_lc(), linalg.make_constant(data, "float32"))
    assert tex.texture_width == linalg.TEXTURE_WIDTH and tex.shape == (2, linalg.TEXTURE_WIDTH, 4)
    flat = tex.data.reshape(-1, 4)
    assert np.array_equal(flat[:5000].reshape(-1), data) and not flat[5000:].any()
    small = linalg.texture_copy(_lc(), linalg.make_constant(np.ones(4 * 300, np.float16), "float16"))
    assert small.texture_width == 512 and small.data.dtype == np.float32 and small.data[:1200].all()
    assert linalg.texture_copy(_lc(tuning="default"), linalg.make_constant(data, "float32")) is None
    assert linalg.texture_copy(_lc(max_texture=1), linalg.make_constant(data, "float32")) is None


def test_plan_refuses_loops_past_the_budget(monkeypatch):
    k_max = (linalg.LOOP_BUDGET - 8) * 8 * 4
    assert linalg.matvec_plan(_lc(), 1, 4, k_max) is not None
    assert linalg.matvec_plan(_lc(), 1, 4, k_max + 32) is None
    monkeypatch.setenv("WEBNN_GPU_FORCE_MATMUL", "tile")
    assert linalg.matvec_plan(_lc(), 1, 63, 1152) is None


def test_plan_fills_both_cores():
    for n in (16, 63, 100, 213, 512):
        cn, wg = linalg.matvec_plan(_lc(), 1, n, 4096)
        groups = -(-(-(-n // 4)) // cn)
        assert wg % 8 == 0 and wg <= linalg.MATVEC_MAX_WORKGROUP
        assert -(-groups * 8 // wg) >= min(groups, 2), (n, cn, wg)


def test_pack_puts_a_lanes_step_together():
    K, N, cn, lanes = 9, 11, 2, 8
    b = np.arange(K * N, dtype=np.float32).reshape(K, N) + 1
    packed = linalg.matvec_pack(b, K, N, cn, lanes, "float32").data.reshape(-1, 4)
    k4 = -(-(-(-K // 4)) // lanes) * lanes
    for g in range(2):
        for s in range(k4):
            for i in range(4):
                for c in range(cn):
                    v = packed[((g * k4 + s) * 4 + i) * cn + c]
                    k, n0 = 4 * s + i, 4 * (g * cn + c)
                    want = [b[k, n] if k < K and n < N else 0 for n in range(n0, n0 + 4)]
                    assert list(v) == want, (g, s, i, c)


# ---------------------------------------------------------------- on the GPU
@pytest.mark.parametrize("M,K,N", [(1, 1152, 63), (3, 1001, 77), (3, 516, 130), (2, 4099, 5)])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_matmul_of_few_rows(ctx, rng, M, K, N, dtype):
    if dtype == np.float16 and "float16" not in ctx.supported_data_types:
        pytest.fail("float16 is not supported on this adapter")
    a, w = data(rng, (M, K), dtype), data(rng, (K, N), dtype)
    got, steps = build_run(ctx, lambda b, o: b.matmul(o["a"], b.constant(w)), {"a": a})
    if _takes_matvec(ctx):
        assert _templates(steps) == ["matmul/matvec.wgsl"]
        a_decl = next(line for line in steps[0].wgsl.split("\n") if " a: " in line)
        assert ("array<vec4<" in a_decl) == (K % 4 == 0), "vec4 loads of A where aligned"
        if _words(ctx):
            assert WORDS in steps[0].wgsl and ("unpack2x16float" in steps[0].wgsl) == (dtype == np.float16)
        else:
            assert "var b: texture_2d<f32>;" in steps[0].wgsl, "B past 64 KiB: a texture"
    A, W = a.astype(np.float64), w.astype(np.float64)
    check(got, A @ W, np.abs(A) @ np.abs(W), K, dtype, f"matvec {M}x{K}->{N}")


def test_a_small_b_is_read_from_a_uniform_buffer(ctx, rng, monkeypatch):
    """2 x 256 -> 60: B packed is 15 column groups x 64 k steps x 4 vec4s, 64 KiB at most (words
    off: ``WEBNN_GPU_FORCE_MATMUL_MATVEC_B=texture``)."""
    monkeypatch.setenv("WEBNN_GPU_FORCE_MATMUL_MATVEC_B", "texture")
    M, K, N = 2, 256, 60
    a, w = data(rng, (M, K)), data(rng, (K, N))
    got, steps = build_run(ctx, lambda b, o: b.matmul(o["a"], b.constant(w)), {"a": a})
    if _takes_matvec(ctx):
        assert _templates(steps) == ["matmul/matvec.wgsl"] and "var<uniform> b:" in steps[0].wgsl
    A, W = a.astype(np.float64), w.astype(np.float64)
    check(got, A @ W, np.abs(A) @ np.abs(W), K, np.float32, "uniform B")


@pytest.mark.parametrize("M,K,N,dtype", [(1, 288, 1404, np.float32), (2, 333, 777, np.float16), (3, 517, 1001, np.float32)])
@pytest.mark.parametrize("b_form", ["texture", "words"])
def test_wide_products_read_b_from_a_texture(ctx, rng, monkeypatch, M, K, N, dtype, b_form):
    """Past MATVEC_MAX_N columns (a landmark head, a classifier) with B in a texture or as words:
    odd K and N, 1 to 3 rows, float16; gemm's bias and a sigmoid in the epilogue."""
    monkeypatch.setenv("WEBNN_GPU_FORCE_MATMUL_MATVEC_B", b_form)
    if dtype == np.float16 and "float16" not in ctx.supported_data_types:
        pytest.fail("float16 is not supported on this adapter")
    a, w, c = data(rng, (M, K), dtype), data(rng, (K, N), dtype), data(rng, (N,), dtype)
    got, steps = build_run(ctx, lambda b, o: b.sigmoid(b.gemm(o["a"], b.constant(w), c=b.constant(c))), {"a": a})
    if _takes_matvec(ctx):
        want = WORDS if b_form == "words" and "shader-int64" in ctx._features else "var b: texture_2d<f32>;"
        assert _templates(steps) == ["matmul/matvec.wgsl"] and want in steps[0].wgsl
    A, W, C = a.astype(np.float64), w.astype(np.float64), c.astype(np.float64)
    # the sigmoid's slope is at most 1/4: the product's error bound carries over
    check(got, 1 / (1 + np.exp(-(A @ W + C))), np.abs(A) @ np.abs(W) + np.abs(C), K + 1, dtype, f"wide {M}x{K}->{N}")


def test_a_texture_is_not_held_to_the_storage_binding_size(ctx, rng, monkeypatch):
    """float16 weights go into the texture as float32 (twice their bytes): a B within the
    device's maxStorageBufferBindingSize as float16 but past it as a texture still builds (a
    texture's size is bounded by maxTextureDimension2D, linalg.texture_fits)."""
    if "float16" not in ctx.supported_data_types:
        pytest.fail("float16 is not supported on this adapter")
    M, K, N = 1, 512, 600
    monkeypatch.setenv("WEBNN_GPU_FORCE_MATMUL_MATVEC_B", "texture")
    a, w = data(rng, (M, K), np.float16), data(rng, (K, N), np.float16)
    limit = K * N * 2 + 4096  # float16 B fits; as float32 texels it does not
    monkeypatch.setitem(ctx._limits, "max-storage-buffer-binding-size", limit)
    got, steps = build_run(ctx, lambda b, o: b.matmul(o["a"], b.constant(w)), {"a": a})
    if _takes_matvec(ctx):
        assert _templates(steps) == ["matmul/matvec.wgsl"] and "var b: texture_2d<f32>;" in steps[0].wgsl
    A, W = a.astype(np.float64), w.astype(np.float64)
    check(got, A @ W, np.abs(A) @ np.abs(W), K, np.float16, f"texture past the storage limit {M}x{K}->{N}")


def test_gemm_with_transposed_b_c_alpha_beta_and_relu(ctx, rng):
    M, K, N = 2, 700, 45
    a, w, c = data(rng, (M, K)), data(rng, (N, K)), data(rng, (N,))

    def build(b, o):
        return b.relu(b.gemm(o["a"], b.constant(w), c=b.constant(c), alpha=0.5, beta=-2.0, b_transpose=True))

    got, steps = build_run(ctx, build, {"a": a})
    if _takes_matvec(ctx):
        assert _templates(steps) == ["matmul/matvec.wgsl"]
    A, W, C = a.astype(np.float64), w.astype(np.float64), c.astype(np.float64)
    ref = np.maximum(0.5 * (A @ W.T) - 2.0 * C, 0)
    check(got, ref, 0.5 * (np.abs(A) @ np.abs(W.T)) + 2.0 * np.abs(C), K + 2, np.float32, "gemm")


def test_matmul_with_a_residual_add(ctx, rng):
    M, K, N = 1, 640, 50
    a, w, r = data(rng, (M, K)), data(rng, (K, N)), data(rng, (M, N))
    got, steps = build_run(ctx, lambda b, o: b.add(b.matmul(o["a"], b.constant(w)), o["r"]), {"a": a, "r": r})
    if _takes_matvec(ctx):
        assert _templates(steps) == ["matmul/matvec.wgsl"]
    A, W, R = a.astype(np.float64), w.astype(np.float64), r.astype(np.float64)
    check(got, A @ W + R, np.abs(A) @ np.abs(W) + np.abs(R), K + 1, np.float32, "residual")


@pytest.mark.parametrize("shape,window,O", [((1, 3, 3, 32), (3, 3), 70), ((2, 2, 2, 67), (2, 2), 70),
                                            ((1, 1, 3, 260), (1, 1), 70), ((1, 3, 3, 32), (3, 3), 1404)],
                         ids=["whole-3x3", "whole-2x2-two-images", "pointwise-3-pixels", "whole-3x3-wide"])
def test_conv_of_one_output_pixel_or_few_pixels(ctx, rng, shape, window, O):
    """A window covering the whole input (one output pixel per image) or a 1x1 conv on 3 pixels:
    the input read as rows of a product; bias and PReLU in the epilogue. 1404 channels: a
    landmark model's head, B in a texture."""
    x = data(rng, shape)
    w, bias, slope = data(rng, (O, *window, shape[3])), data(rng, (O,)), data(rng, (O,))

    def build(b, o):
        y = b.conv2d(o["x"], b.constant(w), bias=b.constant(bias), input_layout="nhwc", filter_layout="ohwi")
        return b.prelu(y, b.constant(slope))

    got, steps = build_run(ctx, build, {"x": x})
    if _takes_matvec(ctx):
        assert _templates(steps) == ["matmul/matvec.wgsl"]
    if window == (1, 1):
        X, W = x.reshape(-1, shape[3]).astype(np.float64), w.reshape(O, -1).T.astype(np.float64)
        out_shape = (*shape[:3], O)
    else:
        X, W = x.reshape(shape[0], -1).astype(np.float64), w.reshape(O, -1).T.astype(np.float64)
        out_shape = (shape[0], 1, 1, O)
    pre = X @ W + bias.astype(np.float64)
    ref = np.where(pre >= 0, pre, pre * slope.astype(np.float64))
    absref = (np.abs(X) @ np.abs(W) + np.abs(bias)) * np.maximum(1, np.abs(slope))
    check(got, ref.reshape(out_shape), absref.reshape(out_shape), W.shape[0] + 2, np.float32, "conv")


@pytest.mark.parametrize("M,K,N,dtype", [(4, 516, 301, np.float32), (4, 1030, 151, np.float16),
                                         (4, 4608, 64, np.float32), (2, 517, 64, np.float32),
                                         (3, 1001, 1, np.float32), (3, 300, 3, np.float16)])
def test_matmul_of_up_to_four_rows(ctx, rng, M, K, N, dtype):
    """4 rows of a large B (K not a multiple of the lanes' 32-value steps, N odd) and several
    rows of few columns (wider column groups), bias and relu; float16."""
    if dtype == np.float16 and "float16" not in ctx.supported_data_types:
        pytest.fail("float16 is not supported on this adapter")
    a, w, c = data(rng, (M, K), dtype), data(rng, (N, K), dtype), data(rng, (N,), dtype)
    got, steps = build_run(ctx, lambda b, o: b.relu(b.gemm(o["a"], b.constant(w), c=b.constant(c), b_transpose=True)),
                           {"a": a})
    if _takes_matvec(ctx):
        assert _templates(steps) == ["matmul/matvec.wgsl"]
    A, W, C = a.astype(np.float64), w.astype(np.float64).T, c.astype(np.float64)
    check(got, np.maximum(A @ W + C, 0), np.abs(A) @ np.abs(W) + np.abs(C), K + 1, dtype, f"matvec {M}x{K}->{N}")


@pytest.mark.parametrize("M,K,N", [(4, 288, 288), (4, 512, 64), (4, 512, 213), (4, 992, 129), (5, 1024, 256),
                                   (8, 512, 213), (16, 1152, 64)])
def test_tall_or_small_products_stay_on_the_tile_kernel(ctx, rng, M, K, N):
    """Near misses: 4 rows of a small B (under MATVEC_MIN_KN_TALL values) or a short reduction,
    and more than 4 rows, keep the tile kernel."""
    a, w = data(rng, (M, K)), data(rng, (K, N))
    got, steps = build_run(ctx, lambda b, o: b.matmul(o["a"], b.constant(w)), {"a": a})
    assert "matmul/matvec.wgsl" not in _templates(steps)
    A, W = a.astype(np.float64), w.astype(np.float64)
    check(got, A @ W, np.abs(A) @ np.abs(W), K, np.float32, f"tile {M}x{K}->{N}")


# (H, W, C, KH, KW, strides, dilations, padding [t, b, l, r], O[, images]): output pixels 1 to 4
WINDOWS = {
    "resnet-2x2-3x3-same": (2, 2, 128, 3, 3, 1, 1, [1, 1, 1, 1], 137),
    "stride2-pad1": (4, 4, 64, 3, 3, 2, 1, [1, 1, 1, 1], 263),
    "stride2-valid-2x2": (4, 4, 128, 2, 2, 2, 1, [0, 0, 0, 0], 301),
    "dilated-one-pixel": (5, 5, 68, 3, 3, 1, 2, [0, 0, 0, 0], 201),
    "dilated-asym-pad": (3, 4, 48, 2, 3, 2, 2, [0, 1, 2, 0], 351),
    "two-images-stride2-pad1": (2, 4, 64, 3, 3, 2, 1, [1, 1, 1, 1], 263, 2),
}


@pytest.mark.parametrize("case", list(WINDOWS))
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_conv_windows_of_a_few_pixels_are_gathered_rows(ctx, rng, case, dtype):
    """A conv with any window over 1 to 4 output pixels (strides, dilations, padding: taps past
    the edge read zeros) as matvec rows gathered from its input; bias, relu and a residual add."""
    if dtype == np.float16 and "float16" not in ctx.supported_data_types:
        pytest.fail("float16 is not supported on this adapter")
    from references import ref_conv2d

    H, W, C, KH, KW, s, d, pad, O, NB = (*WINDOWS[case], 1)[:10]
    x, w, bias = data(rng, (NB, H, W, C), dtype), data(rng, (O, KH, KW, C), dtype), data(rng, (O,), dtype)
    OH = (H + pad[0] + pad[1] - (KH - 1) * d - 1) // s + 1
    OW = (W + pad[2] + pad[3] - (KW - 1) * d - 1) // s + 1
    r = data(rng, (NB, OH, OW, O), dtype)

    def build(b, o):
        y = b.conv2d(o["x"], b.constant(w), bias=b.constant(bias), padding=pad, strides=[s, s], dilations=[d, d],
                     input_layout="nhwc", filter_layout="ohwi")
        return b.add(b.relu(y), o["r"])

    got, steps = build_run(ctx, build, {"x": x, "r": r})
    if _takes_matvec(ctx):
        assert C * KH * KW * O >= (linalg.MATVEC_MIN_KN_TALL if NB * OH * OW == 4 else linalg.MATVEC_MIN_KN_WINDOW)
        assert _templates(steps) == ["matmul/matvec.wgsl"], case
        assert "matvec win" in steps[0].note
    nchw = (0, 3, 1, 2)
    X, Wt = x.astype(np.float64).transpose(nchw), w.astype(np.float64).transpose(nchw)
    conv = ref_conv2d(X, Wt, padding=pad, strides=(s, s), dilations=(d, d)).transpose(0, 2, 3, 1)
    mag = ref_conv2d(np.abs(X), np.abs(Wt), padding=pad, strides=(s, s), dilations=(d, d)).transpose(0, 2, 3, 1)
    ref = np.maximum(conv + bias.astype(np.float64), 0) + r.astype(np.float64)
    check(got, ref, mag + np.abs(bias) + np.abs(r), KH * KW * C + 2, dtype, case)


@pytest.mark.parametrize("case", ["channels-not-a-multiple-of-4", "window-off", "nine-pixels", "small-filter",
                                  "four-pixels-under-tall"])
def test_conv_windows_near_misses_keep_the_tile_kernel(ctx, rng, monkeypatch, case):
    """Input channels not a multiple of 4, ``WEBNN_GPU_FORCE_MATMUL_MATVEC_WINDOW=off``, more
    output pixels than MATVEC_MAX_M, a filter under MATVEC_MIN_KN_WINDOW values, and 4 output
    pixels of a filter under MATVEC_MIN_KN_TALL: no matvec (and the same values)."""
    from references import conv2d_nhwc

    H, C, O = {"channels-not-a-multiple-of-4": (2, 126, 96), "window-off": (2, 128, 96), "nine-pixels": (3, 64, 192),
               "small-filter": (1, 64, 96), "four-pixels-under-tall": (2, 128, 104)}[case]
    if case == "window-off":
        monkeypatch.setenv("WEBNN_GPU_FORCE_MATMUL_MATVEC_WINDOW", "off")
    x, w = data(rng, (1, H, H, C)), data(rng, (O, 3, 3, C))
    got, steps = build_run(ctx, lambda b, o: b.conv2d(o["x"], b.constant(w), padding=[1, 1, 1, 1],
                                                      input_layout="nhwc", filter_layout="ohwi"), {"x": x})
    assert "matmul/matvec.wgsl" not in _templates(steps), case
    ref = conv2d_nhwc(x, w, pad=1)
    check(got, ref, conv2d_nhwc(np.abs(x), np.abs(w), pad=1), 9 * C, np.float32, case)


def test_forced_matvec_takes_small_windowed_convs(ctx, rng, monkeypatch):
    """``WEBNN_GPU_FORCE_MATMUL=matvec`` takes a gathered window whose filter is under
    MATVEC_MIN_KN_TALL values (2 x 2 x 64 pixels, 3x3 by 96: 55k values) as it takes every other
    product of a few rows; the values as the tile kernel's."""
    from references import conv2d_nhwc

    x, w, bias = data(rng, (1, 2, 2, 64)), data(rng, (96, 3, 3, 64)), data(rng, (96,))
    assert 9 * 64 * 96 < linalg.MATVEC_MIN_KN_TALL
    monkeypatch.setenv("WEBNN_GPU_FORCE_MATMUL", "matvec")
    got, steps = build_run(ctx, lambda b, o: b.relu(b.conv2d(o["x"], b.constant(w), bias=b.constant(bias),
                                                             padding=[1, 1, 1, 1], input_layout="nhwc",
                                                             filter_layout="ohwi")), {"x": x})
    if _takes_matvec(ctx):
        assert _templates(steps) == ["matmul/matvec.wgsl"] and "matvec win" in steps[0].note
    ref = np.maximum(conv2d_nhwc(x, w, bias, pad=1), 0)
    check(got, ref, conv2d_nhwc(np.abs(x), np.abs(w), np.abs(bias), pad=1), 9 * 64 + 1, np.float32, "forced")


def test_matmul_past_the_tile_kernels_loop_limit_takes_one_launch(ctx, rng):
    """K = 300,007: the tile kernel would split it in two launches (test_loop_limit.py); a matvec
    lane loops K / 32 times."""
    M, K, N = 2, 300_007, 5
    assert linalg.k_chunks(K) is not None
    a, w = data(rng, (M, K)), data(rng, (K, N))
    got, steps = build_run(ctx, lambda b, o: b.matmul(o["a"], b.constant(w)), {"a": a})
    if _takes_matvec(ctx):
        assert _templates(steps) == ["matmul/matvec.wgsl"]
    A, W = a.astype(np.float64), w.astype(np.float64)
    check(got, A @ W, np.abs(A) @ np.abs(W), K, np.float32, "long K")


# ---------------------------------------------------------------- several heads in one launch
@pytest.mark.parametrize("M,K,dtype", [(1, 672, np.float32), (1, 673, np.float16), (3, 300, np.float32),
                                       (4, 517, np.float16)])
def test_heads_reading_one_input_take_one_launch(ctx, rng, M, K, dtype):
    """A landmark model's heads (the compiler's fuse_heads): two scores through a sigmoid, 63
    coordinates and 700 more (B past 512 columns: the texture) on the same rows, each with its
    bias; odd K (scalar loads of A), float16, 3 and 4 rows."""
    if dtype == np.float16 and "float16" not in ctx.supported_data_types:
        pytest.fail("float16 is not supported on this adapter")
    sizes = [1, 1, 63, 700]
    ws = [data(rng, (n, K), dtype) for n in sizes]
    cs = [data(rng, (n,), dtype) for n in sizes]
    x = data(rng, (M, K), dtype)
    b = webnn.MLGraphBuilder(ctx)
    xi = b.input("x", {"data_type": webnn._dtypes.from_numpy(x.dtype), "shape": [M, K]})
    ys = {}
    for j, (w, c) in enumerate(zip(ws, cs)):
        y = b.gemm(xi, b.constant(w), c=b.constant(c), b_transpose=True)
        ys[f"y{j}"] = b.sigmoid(y) if sizes[j] == 1 else y
    graph = b.build(ys)
    steps = [s for s in graph._steps if isinstance(s, KernelStep)]
    got = ctx.compute(graph, {"x": x})
    graph.destroy()
    if _takes_matvec(ctx):
        assert _templates(steps) == ["matmul/matvec.wgsl"] and "heads" in steps[0].note
    X = x.astype(np.float64)
    for j, (w, c) in enumerate(zip(ws, cs)):
        W, C = w.astype(np.float64).T, c.astype(np.float64)
        pre = X @ W + C
        ref = 1 / (1 + np.exp(-pre)) if sizes[j] == 1 else pre
        check(got[f"y{j}"], ref, np.abs(X) @ np.abs(W) + np.abs(C), K + 1, dtype, f"head {j}")


def test_small_heads_take_one_launch(ctx, rng):
    """Two heads of 7680 multiply-adds in all on one vector (below MATVEC_MIN_MACS): where
    matvec reads B as words or from a uniform buffer (shader-int64) they are one launch."""
    ws = [data(rng, (512, n)) for n in (7, 8)]
    x = data(rng, (1, 512))
    b = webnn.MLGraphBuilder(ctx)
    xi = b.input("x", {"data_type": "float32", "shape": [1, 512]})
    graph = b.build({f"y{j}": b.matmul(xi, b.constant(w)) for j, w in enumerate(ws)})
    steps = [s for s in graph._steps if isinstance(s, KernelStep)]
    got = ctx.compute(graph, {"x": x})
    graph.destroy()
    if _takes_matvec(ctx) and "shader-int64" in ctx.features:
        assert _templates(steps) == ["matmul/matvec.wgsl"] and "heads" in steps[0].note
    X = x.astype(np.float64)
    for j, w in enumerate(ws):
        W = w.astype(np.float64)
        check(got[f"y{j}"], X @ W, np.abs(X) @ np.abs(W), 512, np.float32, f"small head {j}")


def test_conv_heads_over_the_whole_input_take_one_launch(ctx, rng):
    """pose_landmark's heads: 2x2 convs over the same 2x2 features (287 channels: K = 1148),
    with biases, one through a relu."""
    shape, outs = (1, 2, 2, 287), (195, 117)
    x = data(rng, shape)
    ws = [data(rng, (o, 2, 2, shape[3])) for o in outs]
    bs = [data(rng, (o,)) for o in outs]
    b = webnn.MLGraphBuilder(ctx)
    xi = b.input("x", {"data_type": "float32", "shape": list(shape)})
    ys = {}
    for j, (w, bias) in enumerate(zip(ws, bs)):
        y = b.conv2d(xi, b.constant(w), bias=b.constant(bias), input_layout="nhwc", filter_layout="ohwi")
        ys[f"y{j}"] = b.relu(y) if j == 0 else y
    graph = b.build(ys)
    steps = [s for s in graph._steps if isinstance(s, KernelStep)]
    got = ctx.compute(graph, {"x": x})
    graph.destroy()
    if _takes_matvec(ctx):
        assert _templates(steps) == ["matmul/matvec.wgsl"] and "heads" in steps[0].note
    X = x.reshape(1, -1).astype(np.float64)
    for j, (w, bias) in enumerate(zip(ws, bs)):
        W = w.reshape(w.shape[0], -1).T.astype(np.float64)
        pre = X @ W + bias.astype(np.float64)
        ref = np.maximum(pre, 0) if j == 0 else pre
        absref = np.abs(X) @ np.abs(W) + np.abs(bias)
        check(got[f"y{j}"], ref.reshape(1, 1, 1, -1), absref.reshape(1, 1, 1, -1), W.shape[0] + 1, np.float32,
              f"conv head {j}")


# ---------------------------------------------------------------- B as u64 words
def test_exact_f16_takes_float16_values_only():
    """float16 values widened (subnormals only when asked): B may be stored as float16."""
    h = np.array([0.0, -0.0, 1.0, -2.5, 65504.0, 2.0**-14, 1e-3], np.float16).astype(np.float32)
    assert linalg.exact_f16(h)
    sub = np.append(h, np.float32(2.0**-24))  # float16's least subnormal
    assert not linalg.exact_f16(sub) and linalg.exact_f16(sub, subnormals=True)
    assert not linalg.exact_f16(np.append(h, np.float32(1.0 + 2.0**-12)), subnormals=True), "not a float16 value"
    assert not linalg.exact_f16(np.append(h, np.float32(70000.0)), subnormals=True), "past float16's range"
    assert not linalg.exact_f16(np.append(h, np.float32(np.nan)), subnormals=True)
    assert not linalg.exact_f16(np.append(h, np.float32(2.0**-25)), subnormals=True), "below float16's subnormals"


def test_words_rule(monkeypatch):
    """Words on the lane-loop profile with shader-int64: float16 ones for a float16 B or a float32
    B of float16 values, float32 ones past a uniform buffer; WEBNN_GPU_FORCE_MATMUL_MATVEC_B=
    texture|storage keeps the other forms, =f32 words of the storage type, =words words wherever
    64-bit integers are."""
    monkeypatch.delenv("WEBNN_GPU_FORCE_MATMUL_MATVEC_B", raising=False)
    lc = SimpleNamespace(tuning="lane-loop", features={"shader-int64"})
    f32 = np.array([[0.1, 2.0]], np.float32)
    f16 = np.array([[0.5, 2.0**-20]], np.float32)
    big, small = linalg.B_UNIFORM_FLOATS + 4, linalg.B_UNIFORM_FLOATS  # packed float32 values
    assert linalg.matvec_words(lc, f32, "float32", big) == "f32"
    assert linalg.matvec_words(lc, f32, "float32", small) == "", "float32 within a uniform buffer: that"
    assert linalg.matvec_words(lc, f16, "float32", small) == "f16", "subnormals kept on lavapipe"
    assert linalg.matvec_words(lc, f32, "float16", small) == "f16"
    assert linalg.matvec_words(SimpleNamespace(tuning="lane-loop", features=set()), f32, "float32", big) == ""
    assert linalg.matvec_words(SimpleNamespace(tuning="default", features={"shader-int64"}), f32, "float32", big) == ""
    monkeypatch.setenv("WEBNN_GPU_FORCE_MATMUL_MATVEC_B", "words")
    other = SimpleNamespace(tuning="default", features={"shader-int64"})
    assert linalg.matvec_words(other, f16, "float32", small) == "f32", "float16 subnormals only where kept"
    assert linalg.matvec_words(other, f16[:, :1], "float32", small) == "f16"
    assert linalg.matvec_words(lc, f32, "float32", small) == "f32"
    for forced in ("texture", "storage"):
        monkeypatch.setenv("WEBNN_GPU_FORCE_MATMUL_MATVEC_B", forced)
        assert linalg.matvec_words(lc, f32, "float32", big) == ""
    monkeypatch.setenv("WEBNN_GPU_FORCE_MATMUL_MATVEC_B", "f32")
    assert linalg.matvec_words(lc, f16, "float32", big) == "f32"


def _f16_values(rng, shape, subnormal_share=0.0):
    """float32 weights that are all float16 values, a share of them float16 subnormals."""
    w = data(rng, shape).astype(np.float16).astype(np.float32)
    sub = rng.random(shape) < subnormal_share
    w[sub] = (rng.integers(-1023, 1024, sub.sum()) * 2.0**-24).astype(np.float32)
    return w


@pytest.mark.parametrize("M,K,N,weights,epilogue", [
    (1, 512, 213, "float32", "bias"),            # iris_landmark's head
    (1, 333, 777, "float32", "sigmoid"),         # odd K (scalar A) and N, past 512 columns
    (3, 1001, 77, "float16 values", "residual"),  # odd K, 3 rows, a residual add
    (1, 288, 1404, "float16 values", "bias"),     # face_landmark's head
    (2, 516, 130, "float16 graph", "sigmoid"),
    (1, 672, 63, "one value not float16", "bias"),  # near miss: float32 words
    (1, 512, 15, "float32", "sigmoid"),          # iris_landmark's other head: few multiply-adds, B uniform
    (2, 259, 3, "float16 values", "residual"),   # odd K, N < 4
], ids=["512x213-f32", "333x777-odd", "3-rows-f16-values", "288x1404-f16-values", "float16", "near-miss",
        "512x15-few-macs", "259x3-odd"])
def test_words_match_numpy_and_the_texture_bit_for_bit(ctx, rng, monkeypatch, M, K, N, weights, epilogue):
    """B as words (float32, or float16 values widened by unpack2x16float) against float64 NumPy,
    and the same bits as B from the texture or uniform buffer (the same products in the same
    order). A float32 B within a uniform buffer stays there (=words forces the words too)."""
    if not _words(ctx):
        pytest.fail("the matvec kernel and 64-bit integers are expected on lavapipe")
    dtype = np.float16 if weights == "float16 graph" else np.float32
    a = data(rng, (M, K), dtype)
    w = (_f16_values(rng, (K, N)) if weights in ("float16 values", "one value not float16") else data(rng, (K, N), dtype))
    if weights == "one value not float16":
        w[K // 2, N // 2] = np.float32(1.0 + 2.0**-20)
    c, r = data(rng, (N,), dtype), data(rng, (M, N), dtype)

    def build(b, o):
        y = b.matmul(o["a"], b.constant(w))
        if epilogue == "residual":
            return b.add(y, o["r"])
        y = b.add(y, b.constant(c))
        return b.sigmoid(y) if epilogue == "sigmoid" else y

    inputs = {"a": a, "r": r} if epilogue == "residual" else {"a": a}
    monkeypatch.delenv("WEBNN_GPU_FORCE_MATMUL_MATVEC_B", raising=False)
    got, steps = build_run(ctx, build, inputs)
    assert _templates(steps) == ["matmul/matvec.wgsl"]
    if (M, K, N) == (1, 512, 15):
        assert "var<uniform> b:" in steps[0].wgsl, "float32 within 64 KiB: the uniform buffer"
        monkeypatch.setenv("WEBNN_GPU_FORCE_MATMUL_MATVEC_B", "words")
        got, steps = build_run(ctx, build, inputs)
    assert WORDS in steps[0].wgsl
    assert ("unpack2x16float" in steps[0].wgsl) == (weights in ("float16 values", "float16 graph"))
    A, W = a.astype(np.float64), w.astype(np.float64)
    pre, mag = A @ W, np.abs(A) @ np.abs(W)
    if epilogue == "residual":
        ref, mag = pre + r, mag + np.abs(r)
    else:
        ref, mag = pre + c, mag + np.abs(c)
        ref = 1 / (1 + np.exp(-ref)) if epilogue == "sigmoid" else ref
    check(got, ref, mag, K + 1, dtype, f"words {M}x{K}->{N} {weights}")
    monkeypatch.setenv("WEBNN_GPU_FORCE_MATMUL_MATVEC_B", "texture")
    monkeypatch.setenv("WEBNN_GPU_FORCE_MATMUL", "matvec")  # few multiply-adds: the tile kernel otherwise
    old, steps = build_run(ctx, build, inputs)
    assert _templates(steps) == ["matmul/matvec.wgsl"] and "u64" not in steps[0].wgsl
    assert np.array_equal(got.view(np.uint8), old.view(np.uint8))


def test_float16_subnormal_weights_are_kept(ctx, rng, monkeypatch):
    """Weights that are float16 subnormals where they alone make the sums (the other rows of A
    zero, A large): the words of float16 values give the float32 texture's bits (lavapipe's
    unpack2x16float keeps subnormals, which exact_f16's ``subnormals`` relies on)."""
    if not _words(ctx):
        pytest.fail("the matvec kernel and 64-bit integers are expected on lavapipe")
    K, N = 512, 64
    w = _f16_values(rng, (K, N))
    w[::2] = (rng.integers(-1023, 1024, (K // 2, N)) * 2.0**-24).astype(np.float32)
    a = np.zeros((1, K), np.float32)
    a[0, ::2] = data(rng, (K // 2,)) * 1e6
    monkeypatch.delenv("WEBNN_GPU_FORCE_MATMUL_MATVEC_B", raising=False)
    got, steps = build_run(ctx, lambda b, o: b.matmul(o["a"], b.constant(w)), {"a": a})
    assert "unpack2x16float" in steps[0].wgsl
    A, W = a.astype(np.float64), w.astype(np.float64)
    assert np.abs(A @ W).min() > 0
    check(got, A @ W, np.abs(A) @ np.abs(W), K, np.float32, "subnormal weights")
    monkeypatch.setenv("WEBNN_GPU_FORCE_MATMUL_MATVEC_B", "texture")
    old, _ = build_run(ctx, lambda b, o: b.matmul(o["a"], b.constant(w)), {"a": a})
    assert np.array_equal(got.view(np.uint8), old.view(np.uint8))


# ---------------------------------------------------------------- lane runs (matvec_runs)
RUNS = "let s = lane * "


def test_runs_rule(monkeypatch):
    """A lane's k steps one contiguous run from MATVEC_RUNS_BYTES of packed B in a storage buffer
    (words or vec4s), never from a uniform buffer or a texture; WEBNN_GPU_FORCE_MATMUL_MATVEC_ORDER
    =runs|steps forces either (runs still storage only), anything else raises."""
    monkeypatch.delenv("WEBNN_GPU_FORCE_MATMUL_MATVEC_ORDER", raising=False)
    big = linalg.MATVEC_RUNS_BYTES
    assert linalg.matvec_runs(big, True) and not linalg.matvec_runs(big - 1, True)
    assert not linalg.matvec_runs(big, False), "a texture: not measured, not taken"
    monkeypatch.setenv("WEBNN_GPU_FORCE_MATMUL_MATVEC_ORDER", "runs")
    assert linalg.matvec_runs(64, True) and not linalg.matvec_runs(big, False)
    monkeypatch.setenv("WEBNN_GPU_FORCE_MATMUL_MATVEC_ORDER", "steps")
    assert not linalg.matvec_runs(big, True)
    monkeypatch.setenv("WEBNN_GPU_FORCE_MATMUL_MATVEC_ORDER", "run")
    with pytest.raises(ValueError, match="MATMUL_MATVEC_ORDER"):
        linalg.matvec_runs(big, True)


def test_a_large_b_takes_lane_runs(ctx, rng, monkeypatch):
    """1 x 1024 -> 1100 (4.5 MB of float32 words): runs by themselves, against float64 NumPy; the
    near miss 1 x 1024 -> 1000 (4.13 MB packed, under MATVEC_RUNS_BYTES) keeps the L-th steps."""
    monkeypatch.delenv("WEBNN_GPU_FORCE_MATMUL_MATVEC_ORDER", raising=False)
    for N, runs in ((1100, True), (1000, False)):
        a, w = data(rng, (1, 1024)), data(rng, (1024, N))
        got, steps = build_run(ctx, lambda b, o: b.matmul(o["a"], b.constant(w)), {"a": a})
        if _words(ctx):
            assert _templates(steps) == ["matmul/matvec.wgsl"] and (RUNS in steps[0].wgsl) == runs, N
        A, W = a.astype(np.float64), w.astype(np.float64)
        check(got, A @ W, np.abs(A) @ np.abs(W), 1024, np.float32, f"runs 1x1024->{N}")


#: the kernel's forms with the runs forced: (test of this module or test_pooled_head.py, its arguments)
RUN_CASES = {
    "few-rows-odd-K": ("test_matmul_of_few_rows", (2, 4099, 5, np.float32)),
    "few-rows-f16": ("test_matmul_of_few_rows", (3, 1001, 77, np.float16)),
    "four-rows-f16": ("test_matmul_of_up_to_four_rows", (4, 1030, 151, np.float16)),
    "four-rows-deep": ("test_matmul_of_up_to_four_rows", (4, 4608, 64, np.float32)),
    "wide-words-f16": ("test_wide_products_read_b_from_a_texture", ("M", 2, 333, 777, np.float16, "words")),
    "window-two-images": ("test_conv_windows_of_a_few_pixels_are_gathered_rows", ("two-images-stride2-pad1", np.float32)),
    "window-dilated-f16": ("test_conv_windows_of_a_few_pixels_are_gathered_rows", ("dilated-asym-pad", np.float16)),
    "heads-odd-K-f16": ("test_heads_reading_one_input_take_one_launch", (1, 673, np.float16)),
    "heads-four-rows": ("test_heads_reading_one_input_take_one_launch", (4, 517, np.float16)),
    "means-shared": ("pooled:test_the_means_per_workgroup_or_per_subgroup", ("M", "shared")),
    "means-lanes": ("pooled:test_the_means_per_workgroup_or_per_subgroup", ("M", "lanes")),
    "softmax-f16": ("pooled:test_a_classifier_with_its_softmax_in_one_launch", (np.float16,)),
}


@pytest.mark.parametrize("case", list(RUN_CASES))
def test_lane_runs_match_numpy(ctx, rng, monkeypatch, case):
    """Every form of the kernel with each lane's k steps one run (forced at any size): odd K (k
    steps not a multiple of the lanes: zeros past them), 1 to 4 rows, float16, words, epilogues,
    gathered conv windows, heads, the pooled mean (both prologues) and the softmax; each against
    float64 NumPy as its own test does (not bit for bit against the L-th steps: the lanes' partial
    sums hold other k)."""
    import test_pooled_head

    name, args = RUN_CASES[case]
    fn = getattr(test_pooled_head, name[7:]) if name.startswith("pooled:") else globals()[name]
    taken = []

    def spy(b_bytes, storage, real=linalg.matvec_runs):
        taken.append(real(b_bytes, storage))
        return taken[-1]

    monkeypatch.setattr(linalg, "matvec_runs", spy)
    monkeypatch.setenv("WEBNN_GPU_FORCE_MATMUL_MATVEC_ORDER", "runs")
    fn(ctx, rng, *[monkeypatch if v == "M" else v for v in args])
    if _takes_matvec(ctx):
        assert taken and taken[0], case
