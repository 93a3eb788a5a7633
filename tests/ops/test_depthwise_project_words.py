"""The fused depthwise + projection kernels moving words of 8 values (vec4<u64> for float32,
vec2<u64> for float16): the channel-lane kernel (``conv/depthwise_project_lanes.wgsl``) its
input and output (``xw``, ``ow``; where those are not, words of 4 values, ``w4``: vec2<u64> for
float32, one u64 for float16), the pixel-block kernel (``conv/depthwise_project.wgsl``) its
input (``xw``), against float64 NumPy and bit for bit against their vec4 forms
(``WEBNN_GPU_FORCE_DWP_WORDS=vec4``), and the rules that pick them
(``webnn_gpu.ops.conv._dwpl_words``, ``_dwpl_words4``, ``_dwp_words``)."""

from __future__ import annotations

import numpy as np
import pytest

from webnn_gpu.ops import conv

from helpers import kernel_steps, run_graph
from test_depthwise_project_strip import _case

LANES = "conv/depthwise_project_lanes.wgsl"
BLOCKS = "conv/depthwise_project.wgsl"

# (batch, image H x W, channels C, projected channels N, window, strides, residual, float type,
# rows per chunk, (xw, ow) expected)
_CASES = {
    "C=64 N=64, residual of its own input (held rows), odd image, 3 row chunks":
        (1, (13, 11), 64, 64, (3, 3), (1, 1), "x", "float32", 5, (True, True)),
    "C=40 N=36 (input words, 9 output vec4s: vec4 stores), 5x5, batch 2, residual of another tensor":
        (2, (9, 7), 40, 36, (5, 5), (1, 1), "r", "float32", 4, (True, False)),
    "C=64 N=64, stride 2, residual of another tensor, float16":
        (1, (15, 12), 64, 64, (3, 3), (2, 2), "r", "float16", 3, (True, True)),
    "C=56 N=28, 5x5, float16 (input words, 4 pixels per pass)":
        (1, (8, 9), 56, 28, (5, 5), (1, 1), "r", "float16", 4, (True, False)),
    "C=36 N=64 (9 channel vec4s: vec4 loads, output words), stride 2":
        (1, (11, 9), 36, 64, (3, 3), (2, 2), None, "float32", 3, (False, True)),
    "C=36 N=36, residual of its own input: neither (a lane's columns are its channels)":
        (1, (10, 9), 36, 36, (3, 3), (1, 1), "x", "float32", 4, (False, False)),
    "C=64 N=48, 66,000 rows of 1 column: chunks within llvmpipe's loop limit":
        (1, (66_000, 1), 64, 48, (3, 3), (1, 1), "r", "float32", 66_000, (True, True)),
}


def _kernel(ctx, build, inputs, template=LANES):
    steps = kernel_steps(ctx, build, inputs)
    assert [st.template for st in steps] == [template]
    return steps[0].wgsl


def _numpy_and_vec4_bits(ctx, monkeypatch, build, inputs, ref, dt, template=LANES):
    """The words form's output against float64 ``ref`` (float32 3e-5, float16 3e-2), then the
    same bits from the vec4 form (``WEBNN_GPU_FORCE_DWP_WORDS=vec4``, whose kernel has no u64)."""
    got = run_graph(ctx, build, inputs)["y"]
    tol = 3e-5 if dt == "float32" else 3e-2
    np.testing.assert_allclose(got.astype(np.float64), ref, atol=tol, rtol=tol)
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP_WORDS", "vec4")
    assert "u64" not in _kernel(ctx, build, inputs, template)
    old = run_graph(ctx, build, inputs)["y"]
    assert got.dtype == old.dtype and np.array_equal(got.view(np.uint8), old.view(np.uint8))


@pytest.mark.parametrize("case", list(_CASES))
def test_words_match_numpy_and_vec4_bit_for_bit(ctx, rng, monkeypatch, case):
    """Input and output words with lanes past the channels and columns, strides 1 and 2, 5x5,
    padding, strips past the image's edge, row chunks, a batch of 2, float16, bias, prelu, a
    residual of another tensor or of the held input, channel and column counts not a multiple
    of 8 (vec4s there), a tall image: float64 NumPy, and the same bits as the vec4 form."""
    nb, hw, C, N, k, s, residual, dt, th, words = _CASES[case]
    if dt == "float16" and "float16" not in ctx.supported_data_types:
        pytest.fail("float16 is expected on lavapipe")
    if not ctx._subgroup or "shader-int64" not in ctx._features:
        pytest.fail("subgroups and 64-bit integers are expected on lavapipe")
    monkeypatch.setattr(ctx, "_tuning", "lane-loop")
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP", "fused")
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP_FORM", "lanes")
    monkeypatch.setattr(conv, "DWPL_MIN_TH", th)
    monkeypatch.setattr(conv, "DWPL_MIN_GROUPS", 64)
    npdt = np.float32 if dt == "float32" else np.float16
    build, inputs, ref = _case(rng, nb, hw, C, N, k, s, (1, 1), residual, npdt)
    monkeypatch.delenv("WEBNN_GPU_FORCE_DWP_WORDS", raising=False)
    text = _kernel(ctx, build, inputs)
    word = "vec4<u64>" if dt == "float32" else "vec2<u64>"
    assert (f"x: array<{word}>;" in text, f"out: array<{word}>;" in text) == words
    half = "vec2<u64>" if dt == "float32" else "u64"  # words of 4 values elsewhere (w4)
    assert (f"x: array<{half}>;" in text, f"out: array<{half}>;" in text) == (not words[0], not words[1])
    _numpy_and_vec4_bits(ctx, monkeypatch, build, inputs, ref, dt)


# (batch, image H x W, channels C, projected channels N, window, strides, residual, float type,
# input words expected)
_BLOCK_CASES = {
    "C=64 N=64, residual of its own input, odd image": (1, (13, 11), 64, 64, (3, 3), (1, 1), "x", "float32", True),
    "C=40 N=20 (scalar stores), 5x5 stride 2, batch 2": (2, (11, 9), 40, 20, (5, 5), (2, 2), None, "float32", True),
    "C=96 N=96, residual of another tensor, float16": (1, (9, 10), 96, 96, (3, 3), (1, 1), "r", "float16", True),
    "C=48 N=56, 5x5, float16": (1, (8, 7), 48, 56, (5, 5), (1, 1), None, "float16", True),
    "C=36 N=40 (9 channel vec4s: vec4 loads)": (1, (10, 9), 36, 40, (3, 3), (1, 1), None, "float32", False),
    "C=16 N=24, 66,000 rows of 2 columns": (1, (66_000, 2), 16, 24, (3, 3), (1, 1), "r", "float32", True),
}


@pytest.mark.parametrize("case", list(_BLOCK_CASES))
def test_block_words_match_numpy_and_vec4_bit_for_bit(ctx, rng, monkeypatch, case):
    """The pixel-block kernel's input words (two channel groups per iteration) with strides 1
    and 2, 5x5, padding, blocks past the image's edge, a batch of 2, float16, bias, prelu, a
    residual of another tensor or of the depthwise input, scalar stores, channels not a
    multiple of 8 (vec4s there), a tall image: float64 NumPy, and the same bits as the vec4 form."""
    nb, hw, C, N, k, s, residual, dt, words = _BLOCK_CASES[case]
    monkeypatch.setattr(conv, "DWP_BLOCK_WORDS", True)
    if dt == "float16" and "float16" not in ctx.supported_data_types:
        pytest.fail("float16 is expected on lavapipe")
    if "shader-int64" not in ctx._features:
        pytest.fail("64-bit integers are expected on lavapipe")
    monkeypatch.setattr(ctx, "_tuning", "lane-loop")
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP", "fused")
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP_FORM", "blocks")
    npdt = np.float32 if dt == "float32" else np.float16
    build, inputs, ref = _case(rng, nb, hw, C, N, k, s, (1, 1), residual, npdt)
    monkeypatch.delenv("WEBNN_GPU_FORCE_DWP_WORDS", raising=False)
    text = _kernel(ctx, build, inputs, BLOCKS)
    word = "vec4<u64>" if dt == "float32" else "vec2<u64>"
    assert (f"x: array<{word}>;" in text) == words
    _numpy_and_vec4_bits(ctx, monkeypatch, build, inputs, ref, dt, BLOCKS)


def test_words_rule(monkeypatch):
    """Input words with two channel groups per lane (an even count), output words with two
    columns per lane (an even count, one pixel per pass, no split); a residual read from the
    held rows takes both or neither; words of 4 values for the input and output elsewhere
    (_dwpl_words4); only on the lane-loop profile with shader-int64;
    WEBNN_GPU_FORCE_DWP_WORDS=vec4 keeps vec4s, WEBNN_GPU_FORCE_DWPL_WORDS4 picks the words of 4."""
    monkeypatch.delenv("WEBNN_GPU_FORCE_DWP_WORDS", raising=False)
    f = {"shader-int64"}
    w = conv._dwpl_words
    assert w(16, 16, 2, 2, 1, False, True, "lane-loop", f) == (True, True)
    assert w(9, 16, 2, 2, 1, False, False, "lane-loop", f) == (False, True)
    assert w(16, 9, 2, 2, 1, False, False, "lane-loop", f) == (True, False)
    assert w(16, 16, 2, 2, 1, True, True, "lane-loop", f) == (False, False)  # split: columns l + m sg
    assert w(16, 2, 2, 1, 4, False, False, "lane-loop", f) == (True, False)
    assert w(8, 8, 1, 1, 1, False, False, "lane-loop", f) == (False, False)
    assert w(16, 16, 2, 2, 1, False, False, "default", f) == (False, False)
    assert w(16, 16, 2, 2, 1, False, False, "lane-loop", set()) == (False, False)
    w4 = conv._dwpl_words4
    assert w4("lane-loop", f) == ("x", "out") and w4("default", f) == () and w4("lane-loop", set()) == ()
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWPL_WORDS4", "out")
    assert w4("default", f) == ("out",) and w4("lane-loop", set()) == ()
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWPL_WORDS4", "vec4")
    assert w4("lane-loop", f) == ()
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWPL_WORDS4", "pg")
    with pytest.raises(ValueError):
        w4("lane-loop", f)
    monkeypatch.delenv("WEBNN_GPU_FORCE_DWPL_WORDS4")
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP_WORDS", "vec4")
    assert w4("lane-loop", f) == ()
    monkeypatch.delenv("WEBNN_GPU_FORCE_DWP_WORDS")
    b = conv._dwp_words
    g = lambda c: dict(C=c)  # noqa: E731
    monkeypatch.setattr(conv, "DWP_BLOCK_WORDS", False)
    assert not b(g(64), "conv", False, "lane-loop", f)  # off by default (compile time)
    monkeypatch.setattr(conv, "DWP_BLOCK_WORDS", True)
    assert b(g(64), "conv", False, "lane-loop", f) and b(g(8), "conv", False, "lane-loop", f)
    assert not b(g(36), "conv", False, "lane-loop", f)  # 9 vec4s
    assert not b(g(64), "store", False, "lane-loop", f) and not b(g(64), "transpose", False, "lane-loop", f)
    assert not b(g(64), "conv", True, "lane-loop", f)  # an expansion
    assert not b(g(64), "conv", False, "default", f) and not b(g(64), "conv", False, "lane-loop", set())
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP_WORDS", "vec4")
    assert w(16, 16, 2, 2, 1, False, False, "lane-loop", f) == (False, False)
    assert not b(g(64), "conv", False, "lane-loop", f)


def test_block_words_depthwise_residual_of_its_input(ctx, rng, monkeypatch):
    """The pixel-block kernel's input words with the depthwise epilogue adding its own input
    (``center``: the input at each output pixel kept from the loaded words), float32: float64
    NumPy, and the same bits as the vec4 form."""
    if "shader-int64" not in ctx._features:
        pytest.fail("64-bit integers are expected on lavapipe")
    monkeypatch.setattr(ctx, "_tuning", "lane-loop")
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP", "fused")
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP_FORM", "blocks")
    monkeypatch.setattr(conv, "DWP_BLOCK_WORDS", True)
    C, N = 32, 24
    x = rng.standard_normal((1, 9, 11, C)).astype(np.float32)
    wd = (rng.standard_normal((1, 3, 3, C)) * 0.3).astype(np.float32)
    wp = (rng.standard_normal((N, 1, 1, C)) * 0.3).astype(np.float32)

    def build(b, o):
        d = b.conv2d(o["x"], b.constant(wd), input_layout="nhwc", filter_layout="ihwo", groups=C, padding=[1] * 4)
        return {"y": b.conv2d(b.relu(b.add(d, o["x"])), b.constant(wp), input_layout="nhwc", filter_layout="ohwi")}

    x64 = x.astype(np.float64)
    xp = np.pad(x64, ((0, 0), (1, 1), (1, 1), (0, 0)))
    d = sum(xp[:, i:i + 9, j:j + 11] * wd[0, i, j].astype(np.float64) for i in range(3) for j in range(3))
    ref = np.einsum("nhwc,oc->nhwo", np.maximum(d + x64, 0), wp[:, 0, 0, :].astype(np.float64))
    monkeypatch.delenv("WEBNN_GPU_FORCE_DWP_WORDS", raising=False)
    text = _kernel(ctx, build, {"x": x}, BLOCKS)
    assert "x: array<vec4<u64>>;" in text and "xch0_" in text
    got = run_graph(ctx, build, {"x": x})["y"]
    np.testing.assert_allclose(got.astype(np.float64), ref, atol=3e-5, rtol=3e-5)
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP_WORDS", "vec4")
    old = run_graph(ctx, build, {"x": x})["y"]
    assert np.array_equal(got.view(np.uint8), old.view(np.uint8))


STRIP = "conv/depthwise_project_strip.wgsl"
# (batch, image H x W, channels C, projected channels N, window, residual, float type, rows per
# chunk, (input words, output words) expected)
_STRIP_CASES = {
    "C=16 N=16, residual of its own input, ragged strip, 3 row chunks":
        (1, (13, 10), 16, 16, (3, 3), "x", "float32", 5, (True, True)),
    "C=8 N=16, 5x5, batch 2, residual of another tensor (loaded as words)":
        (2, (9, 7), 8, 16, (5, 5), "r", "float32", 9, (True, True)),
    "C=12 N=8 (3 channel vec4s: vec4 loads), float16, residual of another tensor":
        (1, (11, 9), 12, 8, (3, 3), "r", "float16", 4, (False, True)),
    "C=16 N=12 (3 output vec4s: vec4 stores), float16": (1, (10, 7), 16, 12, (3, 3), None, "float16", 3, (True, False)),
    "C=8 N=8, 66,000 rows of 2 columns": (1, (66_000, 2), 8, 8, (3, 3), "r", "float32", 66_000, (True, True)),
}


@pytest.mark.parametrize("case", list(_STRIP_CASES))
def test_strip_words_match_numpy_and_vec4_bit_for_bit(ctx, rng, monkeypatch, case):
    """The strip kernel's input words (C a multiple of 8) and output and residual words (N a
    multiple of 8), with strips past the image's edge, row chunks, a batch of 2, 5x5, float16,
    bias, prelu, a residual of another tensor or of the held input, a tall image: float64 NumPy,
    and the same bits as the vec4 form."""
    nb, hw, C, N, k, residual, dt, th, words = _STRIP_CASES[case]
    if dt == "float16" and "float16" not in ctx.supported_data_types:
        pytest.fail("float16 is expected on lavapipe")
    if "shader-int64" not in ctx._features:
        pytest.fail("64-bit integers are expected on lavapipe")
    monkeypatch.setattr(ctx, "_tuning", "lane-loop")
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP", "fused")
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP_FORM", "")
    monkeypatch.setattr(conv, "DWP_STRIP_MIN_TH", th)
    monkeypatch.setattr(conv, "DWP_STRIP_MIN_GROUPS", 64)
    monkeypatch.setitem(conv.DWP_CORES, "lane-loop", 0)
    npdt = np.float32 if dt == "float32" else np.float16
    build, inputs, ref = _case(rng, nb, hw, C, N, k, (1, 1), (1, 1), residual, npdt)
    monkeypatch.delenv("WEBNN_GPU_FORCE_DWP_WORDS", raising=False)
    text = _kernel(ctx, build, inputs, STRIP)
    word = "vec4<u64>" if dt == "float32" else "vec2<u64>"
    assert (f"x: array<{word}>;" in text, f"out: array<{word}>;" in text) == words
    assert (f"pg: array<{word}>;" in text) == (residual == "r" and words[1])
    _numpy_and_vec4_bits(ctx, monkeypatch, build, inputs, ref, dt, STRIP)
