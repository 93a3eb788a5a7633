"""The stand-alone depthwise kernel's memory words (``conv/depthwise.wgsl``): float32 and float16
channels moved as u64 words (``x64``), two channel vec4s per invocation (``NH``), input loads
skipped outside the image and the row loop starting below the rows above it, against float64
NumPy; the rule that picks them (``webnn_gpu.ops.conv._dw_words``) and the strips' loop bound."""

from __future__ import annotations

import numpy as np
import pytest

import webnn_gpu as webnn
from webnn_gpu.ops import conv
from webnn_gpu.ops.linalg import LOOP_BUDGET

from helpers import run_graph


def _ref(x, wt, pad, s, d, m=1):
    """float64 depthwise conv2d of NHWC ``x`` ([N, H, W, C]) with filter ``wt`` [KH, KW, C * m],
    output channel o reading input channel o // m: a sum of strided slices of the padded input."""
    x = x.astype(np.float64)
    kh, kw, O = wt.shape
    xp = np.pad(x, ((0, 0), (pad[0], pad[1]), (pad[2], pad[3]), (0, 0)))
    xp = np.repeat(xp, m, axis=3)
    oh = (xp.shape[1] - (kh - 1) * d - 1) // s + 1
    ow = (xp.shape[2] - (kw - 1) * d - 1) // s + 1
    out = np.zeros((x.shape[0], oh, ow, O))
    for i in range(kh):
        for j in range(kw):
            out += xp[:, i * d:i * d + (oh - 1) * s + 1:s, j * d:j * d + (ow - 1) * s + 1:s, :] * wt[i, j].astype(np.float64)
    return out


def _kernel_texts(ctx, build, inputs):
    b = webnn.MLGraphBuilder(ctx)
    g = b.build(build(b, {n: b.input(n, {"data_type": webnn._dtypes.from_numpy(a.dtype), "shape": list(a.shape)})
                          for n, a in inputs.items()}))
    texts = [s.wgsl for s in g._steps if getattr(s, "template", "") == "conv/depthwise.wgsl"]
    g.destroy()
    return texts


_ACTS = {
    "clamp": (lambda b, y: b.clamp(y, min_value=-1.0, max_value=1.5), lambda r: np.clip(r, -1.0, 1.5)),
    "hard_swish": (lambda b, y: b.hard_swish(y), lambda r: r * np.clip(r + 3.0, 0.0, 6.0) / 6.0),
    "leaky_relu": (lambda b, y: b.leaky_relu(y, alpha=0.1), lambda r: np.where(r >= 0, r, 0.1 * r)),
}

# (image H x W, input channels, multiplier, window, stride, dilation, padding [t, b, l, r], dtype,
#  activation, the storage word the kernel must declare (None: plain scalar loads))
_CASES = {
    "2 vec4s, 3x3, odd image": ((13, 11), 24, 1, 3, 1, 1, [1, 1, 1, 1], "float32", "clamp", "vec4<u64>"),
    "2 vec4s, stride 2, uneven padding": ((15, 13), 16, 1, 3, 2, 1, [0, 1, 1, 0], "float32", "hard_swish",
                                          "vec4<u64>"),
    "2 vec4s, dilation 2": ((12, 12), 16, 1, 3, 1, 2, [2, 2, 2, 2], "float32", "leaky_relu", "vec4<u64>"),
    "2 vec4s, padding past the window": ((9, 10), 8, 1, 3, 1, 1, [3, 0, 2, 1], "float32", "clamp", "vec4<u64>"),
    "1 vec4: channels 12": ((10, 9), 12, 1, 5, 1, 1, [2, 2, 2, 2], "float32", "clamp", "vec2<u64>"),
    "1 vec4: 5x5 stride 2": ((11, 13), 16, 1, 5, 2, 1, [2, 2, 2, 2], "float32", "hard_swish", "vec2<u64>"),
    "float16, 2 vec4s": ((9, 10), 16, 1, 3, 1, 1, [1, 1, 1, 1], "float16", "clamp", "vec2<u64>"),
    "float16, 1 vec4, 5x5": ((10, 9), 8, 1, 5, 1, 1, [2, 2, 2, 2], "float16", "leaky_relu", "u64"),
    "channels 6: scalar": ((7, 9), 6, 1, 3, 2, 1, [1, 1, 1, 1], "float32", "clamp", None),
    "multiplier 2: scalar": ((9, 8), 4, 2, 3, 1, 1, [1, 1, 1, 1], "float32", "hard_swish", None),
}


@pytest.mark.parametrize("case", list(_CASES))
def test_word_forms_against_numpy(ctx, rng, monkeypatch, case):
    """Every word form on odd images, strides 1 and 2, dilation, uneven padding and padding
    wider than the window reaches (whole rows above the image skipped), channels not a multiple
    of 8 or 4, a multiplier, float16, with a bias and an activation in the epilogue."""
    (h, w), C, m, k, s, d, pad, dt, act, word = _CASES[case]
    monkeypatch.setattr(conv, "DW_NH_MIN_GROUPS", 0)  # two vec4s even on these small images
    if dt == "float16" and "float16" not in ctx.supported_data_types:
        pytest.fail("float16 is expected on lavapipe")
    npdt = np.float32 if dt == "float32" else np.float16
    x = rng.standard_normal((1, h, w, C)).astype(npdt)
    wt = (rng.standard_normal((k, k, C * m)) * 0.3).astype(npdt)  # [KH, KW, O]
    bias = rng.standard_normal(C * m).astype(npdt)
    fn, ref_fn = _ACTS[act]

    def build(b, o):
        y = b.conv2d(o["x"], b.constant(wt.reshape(1, k, k, C * m)), input_layout="nhwc", filter_layout="ihwo",
                     groups=C, padding=pad, strides=[s, s], dilations=[d, d], bias=b.constant(bias))
        return {"y": fn(b, y)}

    got = run_graph(ctx, build, {"x": x})["y"].astype(np.float64)
    ref = ref_fn(_ref(x, wt, pad, s, d, m) + bias.astype(np.float64))
    tol = 2e-5 if dt == "float32" else 1e-2 * k
    np.testing.assert_allclose(got, ref, atol=tol, rtol=tol)
    texts = _kernel_texts(ctx, build, {"x": x})
    assert len(texts) == 1
    if word is None:
        assert "u64" not in texts[0]
    else:
        assert f"var<storage, read> x: array<{word}>;" in texts[0]


def test_residual_near_misses_and_pool_partials_on_two_vec4s(ctx, rng, monkeypatch):
    """Two channel vec4s per invocation with a residual read at each output, a per-channel
    scale, a following global average pool's per-strip sums (fuse_conv_pool), and operands that
    do not fit the epilogue (a residual broadcast along the rows, a second consumer)."""
    monkeypatch.setattr(conv, "DW_NH_MIN_GROUPS", 0)
    x = rng.standard_normal((1, 10, 11, 16)).astype(np.float32)
    r = rng.standard_normal((1, 10, 11, 16)).astype(np.float32)
    rb = rng.standard_normal((1, 1, 11, 16)).astype(np.float32)
    sc = rng.standard_normal(16).astype(np.float32)
    wt = (rng.standard_normal((3, 3, 16)) * 0.3).astype(np.float32)

    def dw(b, v):
        return b.conv2d(v, b.constant(wt.reshape(1, 3, 3, 16)), input_layout="nhwc", filter_layout="ihwo",
                        groups=16, padding=[1] * 4)

    def build(b, o):
        y = b.mul(b.add(dw(b, o["x"]), o["r"]), b.constant(sc))
        d2 = dw(b, o["x"])
        return {"y": y, "m": b.reduce_mean(y, axes=[1, 2]), "z": b.add(d2, o["rb"]), "d2": d2}

    got = run_graph(ctx, build, {"x": x, "r": r, "rb": rb})
    d = _ref(x, wt, [1] * 4, 1, 1)
    ref = (d + r) * sc
    np.testing.assert_allclose(got["y"], ref, atol=2e-5, rtol=2e-5)
    np.testing.assert_allclose(got["m"], ref.mean(axis=(1, 2)), atol=2e-5, rtol=2e-5)
    np.testing.assert_allclose(got["z"], d + rb, atol=2e-5, rtol=2e-5)
    np.testing.assert_allclose(got["d2"], d, atol=2e-5, rtol=2e-5)
    texts = _kernel_texts(ctx, build, {"x": x, "r": r, "rb": rb})
    assert texts and all("vec4<u64>" in t for t in texts)


def test_tall_image_past_the_loop_limit(ctx, rng):
    """A 66000-row image whose cost model would take one strip of every row: the strips keep the
    row loop within llvmpipe's loop limit, and every row is right."""
    h, C = 66000, 128
    g = dict(NB=1, H=h, W=1, C=C, O=C, KH=3, KW=3, sh=1, sw=1, dh=1, dw=1, OH=h, OW=1, pt=1, pl=1)
    th, _ = conv._dw_strip(g, "lane-loop")
    assert th + 2 <= LOOP_BUDGET
    x = rng.standard_normal((1, h, 1, C)).astype(np.float32)
    wt = (rng.standard_normal((3, 3, C)) * 0.3).astype(np.float32)

    def build(b, o):
        return {"y": b.conv2d(o["x"], b.constant(wt.reshape(1, 3, 3, C)), input_layout="nhwc",
                              filter_layout="ihwo", groups=C, padding=[1] * 4)}

    got = run_graph(ctx, build, {"x": x}, tensor_path=False)["y"]
    np.testing.assert_allclose(got, _ref(x, wt, [1] * 4, 1, 1), atol=2e-5, rtol=2e-5)


def _g(h, w, c, k, s=1, m=1):
    p = (k - 1) // 2
    oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    return dict(NB=1, H=h, W=w, C=c, O=c * m, G=c, OH=oh, OW=ow, KH=k, KW=k, sh=s, sw=s, dh=1, dw=1, pt=p, pl=p)


def test_words_rule():
    """u64 words on the lane-loop profile with 64-bit integers and vec4 channels; two vec4s per
    invocation for 3x3 windows with an even count of channel vec4s and enough workgroups left;
    WEBNN_GPU_FORCE_DW_WORDS takes vec4s or one vec4."""
    f = frozenset({"shader-int64"})
    assert conv._dw_words(_g(14, 14, 480, 3), "lane-loop", f, 10_000) == (True, 2)
    assert conv._dw_words(_g(14, 14, 480, 5), "lane-loop", f, 10_000) == (True, 1)  # 25 taps
    assert conv._dw_words(_g(14, 14, 20, 3), "lane-loop", f, 10_000) == (True, 1)  # 5 vec4s
    assert conv._dw_words(_g(14, 14, 480, 3), "lane-loop", f, 60) == (True, 1)  # too few workgroups
    assert conv._dw_words(_g(14, 14, 480, 3), "default", f, 10_000) == (False, 1)
    assert conv._dw_words(_g(14, 14, 480, 3), "lane-loop", frozenset(), 10_000) == (False, 1)
    assert conv._dw_words(_g(14, 14, 6, 3), "lane-loop", f, 10_000) == (False, 1)  # scalar channels
    assert conv._dw_words(_g(14, 14, 8, 3, m=2), "lane-loop", f, 10_000) == (False, 1)  # multiplier


@pytest.mark.parametrize("forced, words", [("vec4", (False, 1)), ("u64", (True, 1)), ("", (True, 2))])
def test_words_can_be_forced(monkeypatch, forced, words):
    monkeypatch.setenv("WEBNN_GPU_FORCE_DW_WORDS", forced)
    assert conv._dw_words(_g(14, 14, 480, 3), "lane-loop", frozenset({"shader-int64"}), 10_000) == words


@pytest.mark.parametrize("dt", ["float32", "float16"])
def test_vec4_words_where_u64_is_off(ctx, rng, monkeypatch, dt):
    """Without u64 words (other drivers, or no 64-bit integers) the kernel moves vec4s of the
    storage type, with the same skipped loads and rows: stride 2, padding past the window."""
    monkeypatch.setattr(conv, "DW_X64", False)
    npdt = np.float32 if dt == "float32" else np.float16
    x = rng.standard_normal((1, 11, 9, 8)).astype(npdt)
    wt = (rng.standard_normal((3, 3, 8)) * 0.3).astype(npdt)
    pad = [3, 1, 0, 2]

    def build(b, o):
        return {"y": b.relu(b.conv2d(o["x"], b.constant(wt.reshape(1, 3, 3, 8)), input_layout="nhwc",
                                     filter_layout="ihwo", groups=8, padding=pad, strides=[2, 2]))}

    got = run_graph(ctx, build, {"x": x})["y"].astype(np.float64)
    tol = 2e-5 if dt == "float32" else 3e-2
    np.testing.assert_allclose(got, np.maximum(_ref(x, wt, pad, 2, 1), 0), atol=tol, rtol=tol)
    texts = _kernel_texts(ctx, build, {"x": x})
    assert len(texts) == 1 and "u64" not in texts[0]
