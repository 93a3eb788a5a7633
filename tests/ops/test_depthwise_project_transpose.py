"""The pixel-block kernel (``conv/depthwise_project.wgsl``) in mode "transpose": a depthwise
conv2d whose output feeds a conv_transpose2d with its filter equal to its stride (the selfie
segmenters' last layers: 3x3 depthwise, relu, its own input added, then 2x2 stride 2 to one
channel and a sigmoid), against float64 NumPy; with its stores as words of 8 values, a block
row's output row at a time (``orow``, :func:`webnn_gpu.ops.conv.dwp_row_words`), bit for bit
against the per-value stores (``WEBNN_GPU_FORCE_DWP_ROW_WORDS=off``); and the rule's near misses
(rows that are not 8 values, an image width that is not a multiple of the block's)."""

from __future__ import annotations

import numpy as np
import pytest

from webnn_gpu.ops import conv

from helpers import kernel_steps, run_graph

BLOCKS = "conv/depthwise_project.wgsl"


def _ref(x, wd, bd, wt, bt, residual):
    """float64 NumPy: the 'same' 3x3 depthwise conv (bias, relu, plus its input when
    ``residual``), then the KxK stride-K transposed conv (filter [O, K, K, C]) with bias and a
    sigmoid."""
    x = x.astype(np.float64)
    n, h, w, c = x.shape
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    d = sum(xp[:, i:i + h, j:j + w, :] * wd[0, i, j].astype(np.float64) for i in range(3) for j in range(3))
    d = np.maximum(d + bd.astype(np.float64), 0)
    if residual:
        d = d + x
    o, k = wt.shape[0], wt.shape[1]
    y = np.einsum("nhwc,oabc->nhawbo", d, wt.astype(np.float64)).reshape(n, h * k, w * k, o)
    return 1 / (1 + np.exp(-(y + bt.astype(np.float64))))


def _build(wd, bd, wt, bt, residual):
    def build(b, o):
        c = {k: b.constant(v) for k, v in dict(wd=wd, bd=bd, wt=wt, bt=bt).items()}
        C, k = wd.shape[3], wt.shape[1]
        d = b.relu(b.conv2d(o["x"], c["wd"], bias=c["bd"], groups=C, padding=[1, 1, 1, 1], input_layout="nhwc",
                            filter_layout="ihwo"))
        if residual:
            d = b.add(d, o["x"])
        y = b.conv_transpose2d(d, c["wt"], bias=c["bt"], strides=[k, k], input_layout="nhwc", filter_layout="ohwi")
        return {"y": b.sigmoid(y)}
    return build


# (batch, image H x W, channels C, transposed conv's channels O and kernel K, residual, float type,
#  whether its stores are row words)
_CASES = {
    "32 x 32 x 16 -> 64 x 64 x 1 (the segmenters' last layer, smaller: 4 x 4 blocks)":
        (1, (32, 32), 16, 1, 2, True, "float32", True),
    "batch 2, 24 x 28 x 8, no residual (2 x 4 blocks)": (2, (24, 28), 8, 1, 2, False, "float32", True),
    "image rows not a multiple of the block's (27 x 32)": (1, (27, 32), 16, 1, 2, True, "float32", True),
    "float16, 32 x 24 x 16": (1, (32, 24), 16, 1, 2, True, "float16", True),
    "16 x 16 x 16 -> 2 channels: 2 x 2 blocks, rows of 2 x 2 x 2 = 8 values": (1, (16, 16), 16, 2, 2, True, "float32", True),
    "width 30: not a multiple of the block's 4 columns (per-value stores)": (1, (32, 30), 16, 1, 2, True, "float32", False),
    "2 channels out on 4 x 4 blocks: rows of 16 values (per-value stores)": (1, (32, 32), 16, 2, 2, True, "float32", False),
    "16 x 16 x 16 -> 1 channel: 2 x 2 blocks, rows of 4 values (per-value stores)": (1, (16, 16), 16, 1, 2, True, "float32", False),
}


@pytest.mark.parametrize("case", list(_CASES))
def test_transposed_projection_against_numpy_and_per_value_stores(ctx, rng, monkeypatch, case):
    nb, (h, w), C, O, K, residual, dt, words = _CASES[case]
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP", "fused")
    monkeypatch.delenv("WEBNN_GPU_FORCE_DWP_ROW_WORDS", raising=False)
    x = rng.standard_normal((nb, h, w, C)).astype(dt)
    wd = (rng.standard_normal((1, 3, 3, C)) * 0.4).astype(dt)
    bd = rng.standard_normal(C).astype(dt)
    wt = (rng.standard_normal((O, K, K, C)) * 0.3).astype(dt)
    bt = rng.standard_normal(O).astype(dt)
    build = _build(wd, bd, wt, bt, residual)
    steps = kernel_steps(ctx, build, {"x": x})
    assert [s.template for s in steps] == [BLOCKS]
    assert ("u64" in steps[0].wgsl) == words
    got = run_graph(ctx, build, {"x": x})["y"]
    tol = 2e-6 if dt == "float32" else 3e-3  # outputs in (0, 1): the sigmoid's and the sums' rounding
    np.testing.assert_allclose(got.astype(np.float64), _ref(x, wd, bd, wt, bt, residual), atol=tol, rtol=0)
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP_ROW_WORDS", "off")
    assert "u64" not in kernel_steps(ctx, build, {"x": x})[0].wgsl
    old = run_graph(ctx, build, {"x": x})["y"]
    assert got.dtype == old.dtype and np.array_equal(got.view(np.uint8), old.view(np.uint8))


def test_row_words_rule():
    """Row words where a block row's output row is 8 values and the output width is a multiple of
    the block's: 4 columns x a 2x2 filter x 1 channel; not 2 channels (16), a 4 x 4 filter (16),
    a width of 10, mode "conv", or without 64-bit integers or on another profile."""
    g = dict(OW=16)
    f = ("shader-int64",)
    t = {"KW": 2, "O": 1}
    assert conv.dwp_row_words(g, t, "transpose", 4, "lane-loop", f)
    assert conv.dwp_row_words(g, {"KW": 2, "O": 2}, "transpose", 2, "lane-loop", f)
    assert not conv.dwp_row_words(g, {"KW": 2, "O": 2}, "transpose", 4, "lane-loop", f)
    assert not conv.dwp_row_words(g, {"KW": 4, "O": 1}, "transpose", 4, "lane-loop", f)
    assert not conv.dwp_row_words(dict(OW=10), t, "transpose", 4, "lane-loop", f)
    assert not conv.dwp_row_words(g, t, "conv", 4, "lane-loop", f)
    assert not conv.dwp_row_words(g, t, "transpose", 4, "lane-loop", ())
    assert not conv.dwp_row_words(g, t, "transpose", 4, "default", f)
