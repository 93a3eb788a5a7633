"""The fused depthwise + projection strip kernel (``conv/depthwise_project_strip.wgsl``: strips
of TW columns walking down TH output rows, every channel unrolled, the window's shared input
rows held from one output row to the next) and its plan (``webnn_gpu.ops.conv._dwp_strip``),
against float64 NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import webnn_gpu as webnn
from webnn_gpu.ops import conv

from helpers import run_graph
from references import ref_conv2d

STRIP = "conv/depthwise_project_strip.wgsl"


def _geometry(h, w, c, k, s=1, d=1):
    """conv.py's geometry dict of a 'same'-padded depthwise conv2d on one NHWC image."""
    p = (k - 1) // 2 * d
    oh, ow = [(n + 2 * p - d * (k - 1) - 1) // s + 1 for n in (h, w)]
    return dict(NB=1, H=h, W=w, C=c, O=c, OH=oh, OW=ow, KH=k, KW=k, G=c, sh=s, sw=s, dh=d, dw=d, pt=p, pl=p)


# ---------------------------------------------------------------- the plan (no GPU)
def test_strip_plan_takes_tall_layers_with_few_channels():
    """Vertical stride 1, at most DWP_STRIP_MAX_C channels and DWP_STRIP_MAX_N projected ones,
    at most DWP_STRIP_MAX_TAPS taps, vertical dilation 1, at least DWP_STRIP_MIN_TH output rows,
    on the lane-loop profile; the rows are cut into as few chunks as give DWP_STRIP_MIN_GROUPS
    workgroups, and a layer with fewer workgroups than lavapipe's threads stays on the pixel
    blocks."""
    assert conv._dwp_strip(_geometry(96, 96, 16, 3), 4, "lane-loop") == (4, 48, 2)  # face_landmark's first layers
    assert conv._dwp_strip(_geometry(256, 256, 8, 3), 2, "lane-loop") == (4, 256, 1)
    assert conv._dwp_strip(_geometry(47, 64, 8, 5), 3, "lane-loop") == (4, 47, 1)  # 2 chunks would be < 24 rows
    for g, n4, tuning in ((_geometry(96, 96, 16, 3), 4, "default"), (_geometry(96, 96, 24, 3), 4, "lane-loop"),
                          (_geometry(96, 96, 16, 3), 5, "lane-loop"), (_geometry(96, 96, 16, 3, s=2), 4, "lane-loop"),
                          (_geometry(96, 96, 16, 3, d=2), 4, "lane-loop"), (_geometry(16, 16, 16, 3), 4, "lane-loop"),
                          (_geometry(32, 32, 16, 3), 4, "lane-loop"),  # 8 strips of 32 rows: one workgroup
                          (_geometry(96, 96, 16, 7), 4, "lane-loop")):
        assert conv._dwp_strip(g, n4, tuning) is None


# ---------------------------------------------------------------- the kernel against NumPy
# (batch, image H x W, channels C, projected channels N, window KH x KW, strides, dilations,
# residual: "x" (the depthwise input itself, read from the held rows), "r" (another tensor) or
# None, float type, row chunk TH of the plan)
_CASES = {
    "C=16 N=16, residual of its own input and prelu, ragged strip, 3 row chunks":
        (1, (13, 10), 16, 16, (3, 3), (1, 1), (1, 1), "x", "float32", 5),
    "C=8 N=12, 5x5, batch 2, residual of another tensor, one chunk of 9 rows":
        (2, (9, 7), 8, 12, (5, 5), (1, 1), (1, 1), "r", "float32", 9),
    "C=4 N=8, 1x3 window (no held rows), column stride 2 and dilation 2, float16":
        (1, (6, 11), 4, 8, (1, 3), (1, 2), (1, 2), None, "float16", 4),
    "C=8 N=8, 3x5 window, residual of its own input, last chunk of 1 row":
        (1, (7, 10), 8, 8, (3, 5), (1, 1), (1, 1), "x", "float32", 3),
}


def _case(rng, nb, hw, C, N, k, s, d, residual, npdt):
    """A depthwise conv2d (bias), its pointwise projection (bias), an optional residual add and
    prelu: (build, inputs, float64 reference)."""
    (h, w), (kh, kw) = hw, k
    pads = [(kh - 1) // 2 * d[0]] * 2 + [(kw - 1) // 2 * d[1]] * 2
    oh = (h + 2 * pads[0] - d[0] * (kh - 1) - 1) // s[0] + 1
    ow = (w + 2 * pads[2] - d[1] * (kw - 1) - 1) // s[1] + 1
    x = rng.standard_normal((nb, h, w, C)).astype(npdt)
    wd = (rng.standard_normal((1, kh, kw, C)) * 0.3).astype(npdt)  # ihwo
    bd = rng.standard_normal(C).astype(npdt)
    wp = (rng.standard_normal((N, 1, 1, C)) * 0.3).astype(npdt)  # ohwi
    bp = rng.standard_normal(N).astype(npdt)
    slope = rng.uniform(0.05, 0.5, N).astype(npdt)
    inputs = {"x": x}
    if residual == "r":
        inputs["r"] = rng.standard_normal((nb, oh, ow, N)).astype(npdt)

    def build(b, o):
        dd = b.conv2d(o["x"], b.constant(wd), input_layout="nhwc", filter_layout="ihwo", groups=C, padding=pads,
                      strides=list(s), dilations=list(d), bias=b.constant(bd))
        p = b.conv2d(dd, b.constant(wp), input_layout="nhwc", filter_layout="ohwi", bias=b.constant(bp))
        if residual == "pool":  # a 3x3 stride-1 max pool of the input: fuse_pool_residual reads its window
            p = b.add(p, b.max_pool2d(o["x"], window_dimensions=[3, 3], padding=[1, 1, 1, 1], layout="nhwc"))
        elif residual:
            p = b.add(p, o[residual])
        return {"y": b.prelu(p, b.constant(slope))}

    dref = ref_conv2d(x.astype(np.float64).transpose(0, 3, 1, 2), wd.astype(np.float64).transpose(3, 0, 1, 2),
                      [pads[0], pads[1], pads[2], pads[3]], s, d, groups=C).transpose(0, 2, 3, 1) + bd
    ref = np.einsum("nhwc,oc->nhwo", dref, wp[:, 0, 0, :].astype(np.float64)) + bp
    if residual == "pool":
        xp = np.pad(x.astype(np.float64), ((0, 0), (1, 1), (1, 1), (0, 0)), constant_values=-np.inf)
        ref = ref + np.max([xp[:, i:i + h, j:j + w] for i in range(3) for j in range(3)], axis=0)
    elif residual:
        ref = ref + inputs[residual].astype(np.float64)
    return build, inputs, np.where(ref >= 0, ref, ref * slope.astype(np.float64))


def test_pooled_residual_is_not_read_as_the_input(ctx, rng, monkeypatch):
    """A residual that is a stride-1 pool of the depthwise input (fuse_pool_residual reads the
    pool's window in the epilogue) has the output's shape and is the held input itself, but is
    not its value: the strip kernel must not take it (near miss), and the result is the pool's."""
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP", "fused")
    monkeypatch.setattr(conv, "DWP_STRIP_PROFILES", (ctx._tuning,))
    monkeypatch.setattr(conv, "DWP_STRIP_MIN_TH", 4)
    monkeypatch.setitem(conv.DWP_CORES, ctx._tuning, 0)
    build, inputs, ref = _case(rng, 1, (12, 12), 16, 16, (3, 3), (1, 1), (1, 1), "pool", np.float32)
    got = run_graph(ctx, build, inputs)["y"].astype(np.float64)
    np.testing.assert_allclose(got, ref, atol=2e-5, rtol=2e-5)
    b = webnn.MLGraphBuilder(ctx)
    g = b.build(build(b, {n: b.input(n, {"data_type": "float32", "shape": list(a.shape)}) for n, a in inputs.items()}))
    templates = [st.template for st in g._steps if hasattr(st, "template")]
    g.destroy()
    assert STRIP not in templates and "pool/pool2d_vec4.wgsl" not in templates, templates


@pytest.mark.parametrize("case", list(_CASES))
def test_strip_kernel_against_numpy(ctx, rng, monkeypatch, case):
    """The strip kernel with strips past the image's right edge, several row chunks (the last
    shorter), a 5x5 window on a batch of 2, a window of one row (nothing held), column stride and
    dilation, float16, a projection width not a multiple of 16, and the projection's residual
    add read from the held input rows (no load, no ``pg`` binding) or loaded: float64 NumPy."""
    nb, hw, C, N, k, s, d, residual, dt, th = _CASES[case]
    if dt == "float16" and "float16" not in ctx.supported_data_types:
        pytest.fail("float16 is expected on lavapipe")
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP", "fused")
    monkeypatch.setattr(conv, "DWP_STRIP_PROFILES", (ctx._tuning,))
    monkeypatch.setattr(conv, "DWP_STRIP_MIN_TH", th)
    monkeypatch.setattr(conv, "DWP_STRIP_MIN_GROUPS", 64)  # as many chunks of th rows as the image has
    monkeypatch.setitem(conv.DWP_CORES, ctx._tuning, 0)  # however few workgroups that makes
    npdt = np.float32 if dt == "float32" else np.float16
    build, inputs, ref = _case(rng, nb, hw, C, N, k, s, d, residual, npdt)
    got = run_graph(ctx, build, inputs)["y"].astype(np.float64)
    tol = 2e-5 if dt == "float32" else 3e-2
    np.testing.assert_allclose(got, ref, atol=tol, rtol=tol)
    b = webnn.MLGraphBuilder(ctx)
    g = b.build(build(b, {n: b.input(n, {"data_type": dt, "shape": list(a.shape)}) for n, a in inputs.items()}))
    steps = [st for st in g._steps if hasattr(st, "template")]
    g.destroy()
    assert [st.template for st in steps] == [STRIP]
    assert (" pg:" in steps[0].wgsl) == (residual == "r")
