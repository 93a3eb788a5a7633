"""The stand-alone depthwise kernel's strips (``conv/depthwise.wgsl``: TH output rows walked in a
loop, TW columns unrolled, accumulator slots rolling down) and its plan
(``webnn_gpu.ops.conv._dw_strip``), against float64 NumPy."""

from __future__ import annotations

import numpy as np
import pytest

from webnn_gpu.ops import conv

from helpers import kernel_templates as _templates
from helpers import run_graph
from references import ref_conv2d


def _geometry(h, w, c, kh, kw, s=1, d=1, m=1):
    """conv.py's geometry dict of a 'same'-padded depthwise conv2d on one NHWC image."""
    ph, pw = (kh - 1) // 2 * d, (kw - 1) // 2 * d
    oh, ow = (h + 2 * ph - (kh - 1) * d - 1) // s + 1, (w + 2 * pw - (kw - 1) * d - 1) // s + 1
    return dict(NB=1, H=h, W=w, C=c, O=c * m, G=c, OH=oh, OW=ow, KH=kh, KW=kw, sh=s, sw=s, dh=d, dw=d,
                pt=ph, pl=pw)


def _ref(x, wt, pad, s, d, groups):
    """float64 depthwise conv2d of NHWC ``x`` with an OIHW filter."""
    return ref_conv2d(x.astype(np.float64).transpose(0, 3, 1, 2), wt.astype(np.float64), pad, (s, s), (d, d),
                      groups=groups).transpose(0, 2, 3, 1)


def test_tap_rows_feed_the_slot_of_their_output_row():
    """Tap row kh reads input row kh dh mod sh of a row step into slot kh dh // sh."""
    assert conv._dw_taps(_geometry(8, 8, 4, 3, 3)) == [(0, 0, 0), (1, 0, 1), (2, 0, 2)]
    assert conv._dw_taps(_geometry(8, 8, 4, 5, 5, s=2)) == [(0, 0, 0), (1, 1, 0), (2, 0, 1), (3, 1, 1), (4, 0, 2)]
    assert conv._dw_taps(_geometry(8, 8, 4, 3, 3, s=2, d=2)) == [(0, 0, 0), (1, 0, 1), (2, 0, 2)]
    assert conv._dw_taps(_geometry(8, 8, 4, 3, 3, s=3)) == [(0, 0, 0), (1, 1, 0), (2, 2, 0)]


def _invocations(g, th, tw):
    return -(-g["OH"] // th) * -(-g["OW"] // tw) * -(-g["O"] // 4)


def test_plan_takes_whole_columns_where_channels_fill_the_threads():
    """Many channels: one strip per column of 4 (each input row loaded once); few channels on a
    tall image: strips short enough for a workgroup per thread; a tiny image: no more
    invocations than one SIMD row runs at once."""
    g = _geometry(48, 48, 64, 5, 5)
    assert conv._dw_strip(g, "lane-loop") == (48, 4)
    g = _geometry(512, 8, 4, 3, 3)
    th, tw = conv._dw_strip(g, "lane-loop")
    n = _invocations(g, th, tw)
    assert th < 512 and -(-n // conv.DW_WORKGROUP) >= conv.DW_CORES
    g = _geometry(3, 3, 16, 3, 3)
    assert _invocations(g, *conv._dw_strip(g, "lane-loop")) <= conv.DW_LANES
    for tuning in ("lane-loop", "default"):  # the cost counts the strips' overlap
        g = _geometry(40, 40, 256, 5, 5)
        assert conv._dw_cost(g, 40, 4, tuning) < conv._dw_cost(g, 4, 4, tuning)


def test_plan_takes_the_whole_width_of_narrow_outputs(monkeypatch):
    """An output at most DW_TW_WHOLE (7) columns wide is one column block (7 x 7 and 6 x 6 images:
    no ragged second block); 8 and wider keep DW_TW = 4 columns, and
    WEBNN_GPU_FORCE_DW_WIDTH=fixed keeps them everywhere (any other value raises)."""
    monkeypatch.delenv("WEBNN_GPU_FORCE_DW_WIDTH", raising=False)
    assert conv._dw_strip(_geometry(7, 7, 672, 5, 5), "lane-loop")[1] == 7
    assert conv._dw_strip(_geometry(12, 12, 256, 5, 5, s=2), "lane-loop")[1] == 6
    assert conv._dw_strip(_geometry(5, 9, 64, 3, 3), "lane-loop")[1] == 4  # 9 wide
    assert conv._dw_strip(_geometry(8, 8, 864, 5, 5), "lane-loop")[1] == conv.DW_TW
    assert conv._dw_strip(_geometry(3, 3, 16, 3, 3), "lane-loop")[1] == 3
    assert conv._dw_strip(_geometry(7, 7, 672, 5, 5), "default")[1] == conv.DW_TW  # lavapipe's only
    monkeypatch.setenv("WEBNN_GPU_FORCE_DW_WIDTH", "fixed")
    assert conv._dw_strip(_geometry(7, 7, 672, 5, 5), "lane-loop")[1] == conv.DW_TW
    monkeypatch.setenv("WEBNN_GPU_FORCE_DW_WIDTH", "whole")
    with pytest.raises(ValueError, match="WEBNN_GPU_FORCE_DW_WIDTH"):
        conv._dw_strip(_geometry(7, 7, 672, 5, 5), "lane-loop")


# (image H x W, channels, multiplier, window KH x KW, stride, dilation, dtype, forced (TH, TW))
_CASES = {
    "ragged strips both ways": ((13, 11), 8, 1, (3, 3), 1, 1, "float32", (5, 3)),
    "one-row strips, one column": ((6, 7), 4, 1, (3, 3), 1, 1, "float32", (1, 1)),
    "stride 2, odd image, ragged": ((15, 13), 12, 1, (5, 5), 2, 1, "float32", (3, 4)),
    "stride 2 and dilation 2": ((14, 12), 8, 1, (3, 3), 2, 2, "float32", (4, 2)),
    "dilation 2: empty slots": ((11, 12), 4, 1, (3, 3), 1, 2, "float32", (4, 8)),
    "stride 3: one slot": ((10, 11), 8, 1, (3, 3), 3, 1, "float32", (2, 3)),
    "1x5 and one slot": ((7, 12), 8, 1, (1, 5), 1, 1, "float32", (3, 4)),
    "5x1, tall strip": ((12, 5), 8, 1, (5, 1), 1, 1, "float32", (12, 2)),
    "multiplier 2, channels 6": ((9, 8), 3, 2, (3, 3), 1, 1, "float32", (4, 3)),
    "channels 7, stride 2": ((9, 10), 7, 1, (3, 3), 2, 1, "float32", (2, 4)),
    "float16, 5x5": ((10, 9), 8, 1, (5, 5), 1, 1, "float16", (3, 4)),
    "the plan": ((23, 19), 20, 1, (5, 5), 1, 1, "float32", None),
    "the plan, 7 wide: one block of 7": ((7, 7), 64, 1, (5, 5), 1, 1, "float32", None),
    "the plan, stride 2 to 6 wide": ((12, 11), 24, 1, (5, 5), 2, 1, "float32", None),
    "the plan, 5 wide, 3x3, channels 6": ((9, 5), 6, 1, (3, 3), 1, 1, "float32", None),
    "the plan, 7 wide, float16": ((6, 7), 16, 1, (3, 3), 1, 1, "float16", None),
}


@pytest.mark.parametrize("case", list(_CASES))
def test_strips_against_numpy(ctx, rng, monkeypatch, case):
    """Strips of several heights and widths, ragged at the image's bottom and right edges, on
    strides 1-3, dilations, one-row and one-column windows, multipliers, channels not a multiple
    of 4 and float16, with a bias and clamp in the epilogue."""
    (h, w), C, m, (kh, kw), s, d, dt, strip = _CASES[case]
    if strip is not None:
        monkeypatch.setattr(conv, "_dw_strip", lambda g, tuning="default": (min(strip[0], g["OH"]),
                                                                            min(strip[1], g["OW"])))
    if dt == "float16" and "float16" not in ctx.supported_data_types:
        pytest.fail("float16 is expected on lavapipe")
    npdt = np.float32 if dt == "float32" else np.float16
    x = rng.standard_normal((1, h, w, C)).astype(npdt)
    wt = (rng.standard_normal((C * m, 1, kh, kw)) * 0.3).astype(npdt)  # oihw
    bias = rng.standard_normal(C * m).astype(npdt)
    pad = [(kh - 1) // 2 * d, kh // 2 * d, (kw - 1) // 2 * d, kw // 2 * d]

    def build(b, o):
        y = b.conv2d(o["x"], b.constant(wt), input_layout="nhwc", filter_layout="oihw", groups=C, padding=pad,
                     strides=[s, s], dilations=[d, d], bias=b.constant(bias))
        return {"y": b.clamp(y, min_value=-1.0, max_value=1.5)}

    got = run_graph(ctx, build, {"x": x})["y"].astype(np.float64)
    ref = np.clip(_ref(x, wt, pad, s, d, C) + bias.astype(np.float64), -1.0, 1.5)
    tol = 2e-5 if dt == "float32" else 1e-2 * kh
    np.testing.assert_allclose(got, ref, atol=tol, rtol=tol)
    assert _templates(ctx, build, {"x": x}) == ["conv/depthwise.wgsl"]


def test_residual_add_and_pool_partials_on_ragged_strips(ctx, rng, monkeypatch):
    """An epilogue operand read at each output (a residual add) and the per-strip channel sums
    of a following global average pool (fuse_conv_pool), with strips ragged both ways."""
    monkeypatch.setattr(conv, "_dw_strip", lambda g, tuning="default": (min(4, g["OH"]), min(3, g["OW"])))
    x = rng.standard_normal((1, 10, 11, 8)).astype(np.float32)
    r = rng.standard_normal((1, 10, 11, 8)).astype(np.float32)
    wt = (rng.standard_normal((1, 3, 3, 8)) * 0.3).astype(np.float32)  # ihwo

    def build(b, o):
        d = b.conv2d(o["x"], b.constant(wt), input_layout="nhwc", filter_layout="ihwo", groups=8, padding=[1] * 4)
        y = b.add(d, o["r"])
        return {"y": y, "m": b.reduce_mean(y, axes=[1, 2])}

    got = run_graph(ctx, build, {"x": x, "r": r})
    ref = _ref(x, wt.transpose(3, 0, 1, 2), [1] * 4, 1, 1, 8) + r.astype(np.float64)
    np.testing.assert_allclose(got["y"], ref, atol=2e-5, rtol=2e-5)
    np.testing.assert_allclose(got["m"], ref.mean(axis=(1, 2)), atol=2e-5, rtol=2e-5)
    assert _templates(ctx, build, {"x": x, "r": r})[0] == "conv/depthwise.wgsl"


def test_layers_of_different_sizes_and_strip_heights_share_a_pipeline(ctx, rng, monkeypatch):
    """The strip height, image size, channels and padding are parameters: two 3x3 layers of
    different images, channels and TH run one kernel text, each right."""
    monkeypatch.setattr(conv, "_dw_strip", lambda g, tuning="default": (3 if g["OH"] == 12 else 5, 4))
    x1 = rng.standard_normal((1, 12, 10, 8)).astype(np.float32)
    x2 = rng.standard_normal((1, 7, 9, 20)).astype(np.float32)
    w1 = (rng.standard_normal((8, 1, 3, 3)) * 0.3).astype(np.float32)
    w2 = (rng.standard_normal((20, 1, 3, 3)) * 0.3).astype(np.float32)

    def build(b, o):
        def dw(v, wt, pad):
            return b.relu(b.conv2d(v, b.constant(wt), input_layout="nhwc", filter_layout="oihw",
                                   groups=wt.shape[0], padding=pad))
        return {"y1": dw(o["x1"], w1, [1] * 4), "y2": dw(o["x2"], w2, [2, 0, 1, 1])}

    got = run_graph(ctx, build, {"x1": x1, "x2": x2})
    np.testing.assert_allclose(got["y1"], np.maximum(_ref(x1, w1, [1] * 4, 1, 1, 8), 0), atol=2e-5, rtol=2e-5)
    np.testing.assert_allclose(got["y2"], np.maximum(_ref(x2, w2, [2, 0, 1, 1], 1, 1, 20), 0), atol=2e-5, rtol=2e-5)
    import webnn_gpu as webnn

    b = webnn.MLGraphBuilder(ctx)
    g = b.build(build(b, {n: b.input(n, {"data_type": "float32", "shape": list(a.shape)})
                          for n, a in (("x1", x1), ("x2", x2))}))
    texts = [s.wgsl for s in g._steps if getattr(s, "template", "") == "conv/depthwise.wgsl"]
    g.destroy()
    assert len(texts) == 2 and texts[0] == texts[1]
