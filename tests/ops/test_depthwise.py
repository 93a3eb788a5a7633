"""Depthwise conv2d kernels (``conv/depthwise.wgsl``, ``conv/depthwise_project.wgsl``) and the
cost model that chooses between one fused kernel and two (``webnn_gpu.ops.conv.project_pays``),
against float64 NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import webnn_gpu as webnn
from webnn_gpu.ops import conv

from helpers import kernel_templates as _templates
from helpers import run_graph
from references import ref_conv2d


def _geometry(h, w, c, k, s=1, d=1, m=1):
    """conv.py's geometry dict of a 'same'-padded depthwise conv2d on one NHWC image."""
    p = (k - 1) // 2 * d
    oh, ow = [(n + 2 * p - d * (k - 1) - 1) // s + 1 for n in (h, w)]
    return dict(NB=1, H=h, W=w, C=c, O=c * m, OH=oh, OW=ow, KH=k, KW=k, G=c, sh=s, sw=s, dh=d, dw=d, pt=p, pl=p)


def _pair_case(rng, hw, nb, C, N, k, s, d, residual, npdt=np.float32):
    """A depthwise conv2d (relu) and its pointwise projection, with an optional residual add and
    prelu after it: (build, inputs, float64 reference) for ``run_graph``."""
    h, w = hw
    pad = (k - 1) // 2 * d
    oh, ow = [(n + 2 * pad - d * (k - 1) - 1) // s + 1 for n in (h, w)]
    x = rng.standard_normal((nb, h, w, C)).astype(npdt)
    wd = (rng.standard_normal((1, k, k, C)) * 0.3).astype(npdt)  # ihwo
    bd = rng.standard_normal(C).astype(npdt)
    wp = (rng.standard_normal((N, 1, 1, C)) * (0.3 if C < 64 else 0.1)).astype(npdt)  # ohwi
    bp = rng.standard_normal(N).astype(npdt)
    slope = rng.uniform(0.05, 0.5, N).astype(npdt)
    inputs = {"x": x}
    if residual:
        inputs["r"] = rng.standard_normal((nb, oh, ow, N)).astype(npdt)

    def build(b, o):
        dd = b.conv2d(o["x"], b.constant(wd), input_layout="nhwc", filter_layout="ihwo", groups=C, padding=[pad] * 4,
                      strides=[s, s], dilations=[d, d], bias=b.constant(bd))
        p = b.conv2d(b.relu(dd), b.constant(wp), input_layout="nhwc", filter_layout="ohwi", bias=b.constant(bp))
        if residual:
            p = b.prelu(b.add(p, o["r"]), b.constant(slope))
        return {"y": p}

    dref = ref_conv2d(x.astype(np.float64).transpose(0, 3, 1, 2), wd.astype(np.float64).transpose(3, 0, 1, 2),
                      [pad] * 4, (s, s), (d, d), groups=C).transpose(0, 2, 3, 1) + bd.astype(np.float64)
    ref = np.einsum("nhwc,oc->nhwo", np.maximum(dref, 0), wp[:, 0, 0, :].astype(np.float64)) + bp
    if residual:
        ref = ref + inputs["r"]
        ref = np.where(ref >= 0, ref, ref * slope.astype(np.float64))
    return build, inputs, ref


# ---------------------------------------------------------------- the cost model (no GPU)
@pytest.mark.parametrize("tuning", ["lane-loop", "default"])
def test_cost_model_keeps_small_layers_fused_and_splits_wide_ones(tuning, monkeypatch):
    """Few channels: one kernel (the second kernel's fixed cost and the depthwise output's round
    trip dominate); a 672-channel 5x5 layer projected to 112 channels (its projection matrix
    reloaded per pixel block): two kernels on lavapipe before Mesa 24. WEBNN_GPU_FORCE_DWP=fused
    forces one kernel."""
    monkeypatch.delenv("WEBNN_GPU_FORCE_DWP", raising=False)
    assert conv.project_pays(_geometry(9, 7, 8, 3), 6, tuning)
    assert conv.project_pays(_geometry(64, 40, 12, 3, s=2), 8, tuning)
    if tuning == "lane-loop":
        assert not conv.project_pays(_geometry(14, 14, 672, 5), 112, tuning)
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP", "fused")
    assert conv.project_pays(_geometry(14, 14, 672, 5), 112, tuning)


def test_cost_model_splits_wide_5x5_layers_and_fuses_small_3x3_ones(monkeypatch):
    """The fitted model on lavapipe before Mesa 24 (docs/conv.md, The cost model): a 5x5 window
    on a large image (palm detection's 96 x 96 x 32 -> 32) runs faster as the depthwise strips
    and the tile kernel than on the pixel blocks, but faster on the channel-lane kernel than
    either; small 3x3 layers (face detection's 8 x 8 x 96 -> 96, iris's 8 x 8 x 64 -> 128) as
    one kernel; and a pair the strip kernel takes is fused even where the pixel-block kernel's
    estimate says otherwise."""
    monkeypatch.delenv("WEBNN_GPU_FORCE_DWP", raising=False)
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP_FORM", "blocks")
    assert not conv.project_pays(_geometry(96, 96, 32, 5), 32, "lane-loop")
    monkeypatch.delenv("WEBNN_GPU_FORCE_DWP_FORM")
    assert conv.project_pays(_geometry(96, 96, 32, 5), 32, "lane-loop")
    assert not conv.project_pays(_geometry(28, 28, 144, 5), 24, "lane-loop")
    assert conv.project_pays(_geometry(8, 8, 96, 3), 96, "lane-loop")
    assert conv.project_pays(_geometry(8, 8, 64, 3), 128, "lane-loop")
    strip = _geometry(256, 256, 4, 3)
    assert conv._dwp_strip(strip, 4, "lane-loop") is not None
    fused, two = conv._project_cost(strip, 16, "lane-loop")
    assert fused > two and conv.project_pays(strip, 16, "lane-loop")


def _dw_pw_nodes(hw, C, k, N):
    """IR of a 'same' depthwise conv2d (bias) on [1, hw, hw, C] and a 1x1 conv2d to N channels."""
    from types import SimpleNamespace

    from webnn_gpu.builder import Node, Value

    def const(shape):
        return Value("float32", tuple(shape), "constant", data=np.ones(int(np.prod(shape)), np.float32))

    x, mid, out = (Value("float32", (1, hw, hw, c), kind) for c, kind in ((C, "input"), (C, "op"), (N, "op")))
    p = (k - 1) // 2
    dw = Node("conv2d", [x, const((1, k, k, C)), const((C,))], [mid],
              {"padding": [p] * 4, "strides": [1, 1], "dilations": [1, 1], "groups": C, "input_layout": "nhwc",
               "filter_layout": "ihwo"})
    pw = Node("conv2d", [mid, const((N, 1, 1, C))], [out],
              {"padding": [0] * 4, "strides": [1, 1], "dilations": [1, 1], "groups": 1, "input_layout": "nhwc",
               "filter_layout": "ohwi"})
    mid.producer, out.producer = dw, pw
    return [dw, pw], {"y": out}, SimpleNamespace(_tuning="lane-loop", limits={})


def test_fuse_depthwise_project_asks_the_cost_model(monkeypatch):
    """The rule on IR (no GPU): a small pair becomes one depthwise_project node, a wide one
    (672 channels, 5x5, projected to 112) stays two conv2d nodes on lavapipe before Mesa 24."""
    from webnn_gpu.compiler.rules.conv import fuse_depthwise_project

    monkeypatch.delenv("WEBNN_GPU_FORCE_DWP", raising=False)
    nodes, outs, context = _dw_pw_nodes(9, 8, 3, 8)
    assert [n.op for n in fuse_depthwise_project(nodes, outs, context)] == ["depthwise_project"]
    nodes, outs, context = _dw_pw_nodes(14, 672, 5, 112)
    assert [n.op for n in fuse_depthwise_project(nodes, outs, context)] == ["conv2d", "conv2d"]


def test_cost_model_splits_mid_sized_3x3_layers(monkeypatch):
    """The two-kernel side refitted after the u64 depthwise words and the cut tiles (docs/conv.md,
    The cost model): 3x3 layers of 128-384 channels on 6-14 pixel images (the zoo's
    hand_landmark, pose_detection and face pairs that measured faster split) run as the
    depthwise strips and the tile kernel; fewer channels, a narrow projection or a smaller image
    stay one kernel."""
    monkeypatch.delenv("WEBNN_GPU_FORCE_DWP", raising=False)
    for (hw, C, s), N in (((28, 240, 2), 80), ((14, 288, 1), 48), ((12, 128, 1), 128), ((6, 384, 1), 96)):
        assert not conv.project_pays(_geometry(hw, hw, C, 3, s=s), N, "lane-loop"), (hw, C, s, N)
    for (hw, C, s), N in (((28, 40, 1), 96), ((28, 48, 2), 24), ((14, 288, 2), 72), ((16, 64, 1), 128),
                          ((12, 48, 1), 96), ((8, 96, 1), 96)):
        assert conv.project_pays(_geometry(hw, hw, C, 3, s=s), N, "lane-loop"), (hw, C, s, N)


# (image, channels, projected channels, window, fused?) on each side of the cost model's boundary
# (lane-loop profile: 16 x 16 x 64, 5x5: N = 96 is estimated faster as one kernel, 112 as two;
# 3x3: 14 x 14 x 288 -> 48 two kernels, 16 x 16 x 64 -> 128 one on the channel-lane kernel, which
# needs subgroup lanes, and two without them: "lanes")
_NEAR_MISS = {"N=112, two kernels": (16, 64, 112, 5, False), "N=96, one kernel": (16, 64, 96, 5, True),
              "3x3 288 -> 48, two kernels": (14, 288, 48, 3, False),
              "3x3 64 -> 128, one kernel with lanes": (16, 64, 128, 3, "lanes")}


@pytest.mark.parametrize("lanes", [True, False], ids=["sg", "no-sg"])
@pytest.mark.parametrize("case", list(_NEAR_MISS))
def test_fused_or_not_both_sides_of_the_boundary_match_numpy(ctx, rng, monkeypatch, case, lanes):
    """A depthwise conv (bias, relu6) and its projection (bias) on each side of the cost
    model's boundary, the fused kernel with and without its lane-shared loads (``sg``): the
    kernels it picks, and the float64 NumPy result either way."""
    monkeypatch.setattr(ctx, "_tuning", "lane-loop")
    monkeypatch.delenv("WEBNN_GPU_FORCE_DWP", raising=False)
    monkeypatch.setattr(conv, "DWP_SUBGROUP", lanes)
    hw, C, N, k, fused = _NEAR_MISS[case]
    fused = lanes if fused == "lanes" else fused
    assert conv.project_pays(_geometry(hw, hw, C, k), N, "lane-loop") == fused
    x = rng.standard_normal((1, hw, hw, C)).astype(np.float32)
    wd = (rng.standard_normal((1, k, k, C)) * 0.3).astype(np.float32)  # ihwo
    bd = rng.standard_normal(C).astype(np.float32)
    wp = (rng.standard_normal((N, 1, 1, C)) * 0.2).astype(np.float32)  # ohwi
    bp = rng.standard_normal(N).astype(np.float32)

    def build(b, o):
        d = b.conv2d(o["x"], b.constant(wd), input_layout="nhwc", filter_layout="ihwo", groups=C,
                     padding=[k // 2] * 4, bias=b.constant(bd))
        d = b.clamp(d, min_value=0.0, max_value=6.0)
        return {"y": b.conv2d(d, b.constant(wp), input_layout="nhwc", filter_layout="ohwi", bias=b.constant(bp))}

    got = run_graph(ctx, build, {"x": x})["y"].astype(np.float64)
    d = ref_conv2d(x.astype(np.float64).transpose(0, 3, 1, 2), wd.astype(np.float64).transpose(3, 0, 1, 2),
                   [k // 2] * 4, groups=C).transpose(0, 2, 3, 1) + bd
    ref = np.einsum("nhwc,oc->nhwo", np.clip(d, 0, 6), wp[:, 0, 0, :].astype(np.float64)) + bp
    np.testing.assert_allclose(got, ref, atol=2e-5, rtol=2e-5)
    templates = _templates(ctx, build, {"x": x})
    if fused:  # the pixel blocks or (3x3, with the lane-shared loads) the channel-lane kernel
        assert len(templates) == 1 and templates[0].startswith("conv/depthwise_project"), templates
    else:
        assert templates == ["conv/depthwise.wgsl", "matmul/tile.wgsl"]


# ---------------------------------------------------------------- the depthwise kernel
# (image H x W, input channels, multiplier, window, stride, dilation, padding t/b/l/r, dtype)
_DW_CASES = {
    "multiplier 2, odd image": ((9, 7), 3, 2, 3, 1, 1, (1, 1, 1, 1), "float32"),
    "multiplier 3, stride 2": ((11, 10), 5, 3, 3, 2, 1, (1, 1, 1, 1), "float32"),
    "multiplier 4, C4 vec width, 5x5": ((8, 9), 2, 4, 5, 1, 1, (2, 2, 2, 2), "float32"),
    "C=7, dilation 2, uneven pad": ((10, 13), 7, 1, 3, 1, 2, (2, 1, 0, 2), "float32"),
    "C=12, 7x7, stride 2": ((15, 17), 12, 1, 7, 2, 1, (3, 3, 3, 3), "float32"),
    "many channels, small image": ((5, 5), 96, 1, 3, 1, 1, (1, 1, 1, 1), "float32"),
    "multiplier 2, dilation 2, float16": ((9, 11), 4, 2, 3, 1, 2, (2, 2, 2, 2), "float16"),
    "C=6, stride 2, float16": ((7, 9), 6, 1, 3, 2, 1, (1, 1, 1, 1), "float16"),
    "C=8, stride 2 and dilation 2": ((13, 11), 8, 1, 3, 2, 2, (2, 2, 2, 2), "float32"),
    "C=16, 5x5 dilation 3, uneven pad": ((14, 12), 16, 1, 5, 1, 3, (6, 5, 4, 6), "float32"),
}


@pytest.mark.parametrize("case", list(_DW_CASES))
def test_depthwise_kernel_against_numpy(ctx, rng, case):
    """conv/depthwise.wgsl for channel multipliers 1-4, strides, dilations, uneven padding, odd
    images, channels not a multiple of 4 and float16 (bias and relu in the epilogue)."""
    (h, w), C, m, k, s, d, pad, dt = _DW_CASES[case]
    if dt == "float16" and "float16" not in ctx.supported_data_types:
        pytest.fail("float16 is expected on lavapipe")
    npdt = np.float32 if dt == "float32" else np.float16
    x = rng.standard_normal((2 if m == 3 else 1, h, w, C)).astype(npdt)
    wt = (rng.standard_normal((C * m, 1, k, k)) * 0.3).astype(npdt)  # oihw
    bias = rng.standard_normal(C * m).astype(npdt)

    def build(b, o):
        y = b.conv2d(o["x"], b.constant(wt), input_layout="nhwc", filter_layout="oihw", groups=C, padding=list(pad),
                     strides=[s, s], dilations=[d, d], bias=b.constant(bias))
        return {"y": b.relu(y)}

    got = run_graph(ctx, build, {"x": x})["y"].astype(np.float64)
    ref = ref_conv2d(x.astype(np.float64).transpose(0, 3, 1, 2), wt.astype(np.float64), pad, (s, s), (d, d),
                     groups=C).transpose(0, 2, 3, 1) + bias.astype(np.float64)
    ref = np.maximum(ref, 0)
    tol = 2e-5 if dt == "float32" else 1e-2 * k
    np.testing.assert_allclose(got, ref, atol=tol, rtol=tol)
    assert _templates(ctx, build, {"x": x}) == ["conv/depthwise.wgsl"]


def test_multiplier_2_depthwise_and_projection_stay_two_kernels(ctx, rng):
    """The fused kernel takes multiplier 1 only: a multiplier-2 depthwise conv, its global
    average pool and a 1x1 projection run as the depthwise kernel and others, exactly."""
    x = rng.standard_normal((1, 8, 6, 4)).astype(np.float32)
    wd = (rng.standard_normal((1, 3, 3, 8)) * 0.3).astype(np.float32)  # ihwo, 2 outputs per input channel
    wp = (rng.standard_normal((12, 1, 1, 8)) * 0.3).astype(np.float32)

    def build(b, o):
        d = b.relu(b.conv2d(o["x"], b.constant(wd), input_layout="nhwc", filter_layout="ihwo", groups=4,
                            padding=[1] * 4))
        p = b.conv2d(d, b.constant(wp), input_layout="nhwc", filter_layout="ohwi")
        return {"y": p, "m": b.reduce_mean(d, axes=[1, 2])}

    got = run_graph(ctx, build, {"x": x})
    d = np.maximum(ref_conv2d(x.astype(np.float64).transpose(0, 3, 1, 2), wd.astype(np.float64).transpose(3, 0, 1, 2),
                              [1] * 4, groups=4).transpose(0, 2, 3, 1), 0)
    np.testing.assert_allclose(got["y"], np.einsum("nhwc,oc->nhwo", d, wp[:, 0, 0, :].astype(np.float64)),
                               atol=2e-5, rtol=2e-5)
    np.testing.assert_allclose(got["m"], d.mean(axis=(1, 2)), atol=2e-5, rtol=2e-5)
    templates = _templates(ctx, build, {"x": x})
    assert templates[0] == "conv/depthwise.wgsl" and "conv/depthwise_project.wgsl" not in templates


# ---------------------------------------------------------------- the depthwise + projection kernel's plans
# (image H x W, batch, channels, projected channels, window, stride, dilation, (TH, TW, S), dtype,
# a residual add and prelu after the projection)
_SPLIT_CASES = {
    "3x3 image, N=128 over 8 invocations, residual": ((3, 3), 1, 128, 128, 3, 1, 1, (3, 3, 8), "float32", True),
    "odd 7x5, stride 2, N=24 split 3": ((7, 5), 1, 8, 24, 3, 2, 1, (2, 2, 3), "float32", False),
    "N=10 (not a multiple of 4), split 3": ((6, 6), 1, 12, 10, 3, 1, 1, (2, 3, 3), "float32", False),
    "5x5 dilation 2, float16, split 2, residual": ((9, 8), 1, 16, 16, 5, 1, 2, (2, 2, 2), "float16", True),
    "batch 2, block past the edges, split 2": ((5, 6), 2, 4, 8, 3, 1, 1, (4, 4, 2), "float32", True),
    "N=28 over 2 invocations (4 + 3 columns), residual": ((6, 7), 1, 8, 28, 3, 1, 1, (2, 2, 2), "float32", True),
    "N=22 over 4 invocations (2 + 2 + 2 + 0 columns)": ((5, 5), 1, 8, 22, 3, 2, 1, (2, 2, 4), "float32", False),
    "4x4 block, stride 2, dilation 2, N=20 ragged": ((11, 10), 1, 8, 20, 3, 2, 2, (4, 4, 2), "float32", True),
    "7x7 window, 4x2 block, one invocation": ((12, 9), 1, 4, 8, 7, 1, 1, (4, 2, 1), "float32", True),
}


@pytest.mark.parametrize("case", list(_SPLIT_CASES))
def test_depthwise_project_plans_against_numpy(ctx, rng, monkeypatch, case):
    """conv/depthwise_project.wgsl with its projection columns split over several invocations
    per pixel block (S), blocks past the image's edges, a projection width not a multiple of
    4 (scalar stores), a last column block with fewer columns, odd images with stride 2, dilation, float16, and the projection's
    residual add loaded as vec4 (pep.given): against float64 NumPy."""
    (h, w), nb, C, N, k, s, d, plan, dt, residual = _SPLIT_CASES[case]
    if dt == "float16" and "float16" not in ctx.supported_data_types:
        pytest.fail("float16 is expected on lavapipe")
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP", "fused")
    monkeypatch.setattr(conv, "_dwp_plan", lambda *a, **kw: plan)
    npdt = np.float32 if dt == "float32" else np.float16
    build, inputs, ref = _pair_case(rng, (h, w), nb, C, N, k, s, d, residual, npdt)
    got = run_graph(ctx, build, inputs)["y"].astype(np.float64)
    tol = 2e-5 if dt == "float32" else 3e-2
    np.testing.assert_allclose(got, ref, atol=tol, rtol=tol)
    assert _templates(ctx, build, inputs) == ["conv/depthwise_project.wgsl"]


def test_depthwise_project_layers_of_one_structure_share_a_pipeline(ctx, rng, monkeypatch):
    """Sizes come from the parameter buffer: two layers with different images, channels and
    projection widths (16 and 32 columns, 4 vec4s per invocation) render one WGSL text."""
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP", "fused")
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP_FORM", "blocks")  # the pixel-block kernel
    monkeypatch.setattr(conv, "_dwp_plan", lambda g, n4, k4, tuning, split=True, sg=0: (2, 2, n4 // 4))
    x = rng.standard_normal((1, 10, 12, 8)).astype(np.float32)
    w1, w2 = (rng.standard_normal((1, 3, 3, c)).astype(np.float32) * 0.3 for c in (8, 16))
    p1 = (rng.standard_normal((16, 1, 1, 8)) * 0.3).astype(np.float32)
    p2 = (rng.standard_normal((32, 1, 1, 16)) * 0.3).astype(np.float32)
    b = webnn.MLGraphBuilder(ctx)
    xi = b.input("x", {"data_type": "float32", "shape": list(x.shape)})
    y = b.conv2d(b.relu(b.conv2d(xi, b.constant(w1), input_layout="nhwc", filter_layout="ihwo", groups=8,
                                 padding=[1] * 4)), b.constant(p1), input_layout="nhwc", filter_layout="ohwi")
    y = b.conv2d(b.relu(b.conv2d(y, b.constant(w2), input_layout="nhwc", filter_layout="ihwo", groups=16,
                                 padding=[1] * 4, strides=[2, 2])), b.constant(p2), input_layout="nhwc",
                 filter_layout="ohwi")
    y = b.conv2d(b.relu(b.conv2d(y, b.constant(rng.standard_normal((1, 3, 3, 32)).astype(np.float32) * 0.3),
                                 input_layout="nhwc", filter_layout="ihwo", groups=32, padding=[1] * 4)),
                 b.constant((rng.standard_normal((16, 1, 1, 32)) * 0.3).astype(np.float32)), input_layout="nhwc",
                 filter_layout="ohwi")
    g = b.build({"y": y})
    texts = [s.wgsl for s in g._steps if getattr(s, "template", "") == "conv/depthwise_project.wgsl"]
    assert len(texts) == 3 and texts[0] == texts[2] and texts[0] != texts[1]  # the second has stride 2
    assert np.isfinite(ctx.compute(g, {"x": x})["y"]).all()


def test_small_images_split_the_projection_over_invocations():
    """The plan (lane-loop profile) for a 3 x 3 image with 128 channels projected to 128 spreads
    the columns over several invocations per pixel block (few blocks would leave a core
    idle); a large image keeps one invocation per block."""
    th, tw, splits = conv._dwp_plan(_geometry(3, 3, 128, 3), 32, 0, "lane-loop")
    assert splits > 1 and th * tw * -(-32 // splits) <= conv.DWP_PLAN_MAX_ACC
    assert conv._dwp_plan(_geometry(96, 96, 16, 3), 4, 0, "lane-loop")[2] == 1
    assert conv._dwp_plan(_geometry(3, 3, 128, 3), 32, 4, "lane-loop")[2] == 1  # an expansion: never split


# ---------------------------------------------------------------- loads shared by a subgroup's lanes
# (image H x W, batch, channels, projected channels, window, stride, dilation, plan or None for
# the kernel's own, a residual add and prelu after the projection)
_LANE_CASES = {
    "192 -> 96 (a storage-buffer matrix), 5x4 image, residual": ((5, 4), 1, 192, 96, 3, 1, 1, None, True),
    "stride 2, dilation 2, N=20, 13 blocks (not a multiple of 8)": ((9, 11), 1, 16, 20, 3, 2, 2, None, True),
    "5x5 window, batch 2, 2x3 block": ((7, 6), 2, 8, 16, 5, 1, 1, (2, 3, 1), False),
    "N=28 split 3 (ragged), 1x1 blocks padded to 8 lanes": ((3, 3), 1, 8, 28, 3, 1, 1, (1, 1, 3), True),
}


@pytest.mark.parametrize("lanes", [True, False], ids=["sg", "no-sg"])
@pytest.mark.parametrize("case", list(_LANE_CASES))
def test_depthwise_project_lane_shared_loads_against_numpy(ctx, rng, monkeypatch, case, lanes):
    """conv/depthwise_project.wgsl with the taps and projection rows loaded once per subgroup and
    handed out by subgroupBroadcast (``sg``, the lane-loop profile with subgroups; pixel blocks
    padded to whole subgroups, the padding lanes storing nothing) and without (DWP_SUBGROUP off):
    a projection matrix too large for the uniform buffer, stride 2 with dilation, a 5x5 window on
    a batch of 2, a ragged column split; against float64 NumPy."""
    (h, w), nb, C, N, k, s, d, plan, residual = _LANE_CASES[case]
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP", "fused")
    monkeypatch.setattr(conv, "DWP_SUBGROUP", lanes)
    if plan is not None:
        monkeypatch.setattr(conv, "_dwp_plan", lambda *a, **kw: plan)
    build, inputs, ref = _pair_case(rng, (h, w), nb, C, N, k, s, d, residual)
    got = run_graph(ctx, build, inputs)["y"].astype(np.float64)
    np.testing.assert_allclose(got, ref, atol=3e-5, rtol=3e-5)
    b = webnn.MLGraphBuilder(ctx)
    gi = {name: b.input(name, {"data_type": "float32", "shape": list(v.shape)}) for name, v in inputs.items()}
    steps = [st for st in b.build(build(b, gi))._steps if hasattr(st, "template")]
    assert [st.template for st in steps] == ["conv/depthwise_project.wgsl"]
    assert ("subgroupBroadcast" in steps[0].wgsl) == (lanes and ctx._subgroup > 0 and ctx._tuning == "lane-loop")


def test_lane_shared_plan_keeps_every_column_in_one_invocation():
    """With subgroup lanes the plan keeps one column block (the lanes share the projection's
    loads, so a split only recomputes the depthwise values) and chooses the block by the cost
    model: a matrix too large for the uniform buffer is planned too."""
    for g, n4 in ((_geometry(3, 3, 128, 3), 32), (_geometry(96, 96, 16, 3), 4), (_geometry(6, 6, 384, 3), 24),
                  (_geometry(16, 16, 528, 5), 22)):
        th, tw, splits = conv._dwp_plan(g, n4, 0, "lane-loop", sg=8)
        assert splits == 1 and th * tw * n4 <= max(conv.DWP_PLAN_MAX_ACC, min(conv.PROJECT_MAX_ACC, 4 * n4))
    assert conv._dwp_plan(_geometry(96, 96, 16, 3), 4, 0, "lane-loop", sg=8)[:2] == (4, 4)
    assert conv._dwp_plan(_geometry(16, 16, 528, 5), 22, 0, "lane-loop", sg=8)[:2] == (2, 2)


# ---------------------------------------------------------------- the expansion computed in the kernel
# (image, expansion input channels K, expanded channels C, projected channels N, stride, (TH, TW));
# the K / 4 vec4s of each input pixel are loaded in a loop (K4 iterations), the stores in a loop
# over the block's columns, and the image's edges cut the last blocks
_EXPAND_CASES = {
    "K=24 (6 vec4s), 2x2 block, residual": ((9, 7), 24, 40, 24, 1, (2, 2)),
    "K=8, stride 2, 2x4 block, N=12 ragged edge": ((11, 13), 8, 16, 12, 2, (2, 4)),
    "K=12 (3 vec4s: no words), 1x2 block, residual": ((6, 5), 12, 8, 12, 1, (1, 2)),
}


def test_expansion_loads_shift_only_from_six_vec4s(monkeypatch):
    """The expansion's held inputs are shifted into place at K / 4 >= 6 (measured no slower
    there), put there by selects below (K / 4 = 4 ran 1.5-5% slower shifted); the switch forces
    either form."""
    monkeypatch.delenv("WEBNN_GPU_FORCE_DWP_EXPAND_LOAD", raising=False)
    assert [conv._expand_shift(k4) for k4 in (1, 2, 4, 5, 6, 8, 24)] == [False] * 4 + [True] * 3
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP_EXPAND_LOAD", "select")
    assert not conv._expand_shift(8)
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP_EXPAND_LOAD", "shift")
    assert conv._expand_shift(2)


def test_expansion_words_rule(monkeypatch):
    """The expansion's input loop loads words of 8 values where K / 4 is even, the loop is
    on, the profile allows words (``_words_ok``) and the held values are put in place by
    selects (below DWP_EXPAND_SHIFT_MIN_K4); the switch forces either form (words shifted
    too), and an odd K / 4 or no loop keeps vec4 loads whatever it says."""
    monkeypatch.setattr(conv, "_words_ok", lambda tuning, features: True)
    monkeypatch.delenv("WEBNN_GPU_FORCE_DWP_EXPAND_WORDS", raising=False)
    monkeypatch.delenv("WEBNN_GPU_FORCE_DWP_EXPAND_LOAD", raising=False)
    assert [conv._expand_words(k4, True, "lane-loop", ()) for k4 in (1, 2, 3, 4, 6, 8)] == [False, True, False, True,
                                                                                           False, False]
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP_EXPAND_LOAD", "select")  # K / 4 = 6 held by selects: words
    assert conv._expand_words(6, True, "lane-loop", ())
    monkeypatch.delenv("WEBNN_GPU_FORCE_DWP_EXPAND_LOAD")
    assert not conv._expand_words(4, False, "lane-loop", ())
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP_EXPAND_WORDS", "vec4")
    assert not conv._expand_words(4, True, "lane-loop", ())
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP_EXPAND_WORDS", "words")
    assert conv._expand_words(4, True, "lane-loop", ()) and not conv._expand_words(3, True, "lane-loop", ())
    monkeypatch.setattr(conv, "_words_ok", lambda tuning, features: False)
    assert not conv._expand_words(4, True, "default", ())
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP_EXPAND_WORDS", "u64")
    with pytest.raises(ValueError, match="DWP_EXPAND_WORDS"):
        conv._expand_words(4, True, "lane-loop", ())


@pytest.mark.parametrize("words", ["words", "vec4"])
@pytest.mark.parametrize("form", ["shift", "select"])
@pytest.mark.parametrize("case", list(_EXPAND_CASES))
def test_expansion_depthwise_projection_against_numpy(ctx, rng, monkeypatch, case, form, words):
    """conv/depthwise_project.wgsl with the expansion conv computed in the kernel (inverted
    residual block: expand + relu6, depthwise + relu6, project + the block's input), for an
    expansion of 6 vec4s, one with stride 2 whose blocks pass the image's edges and one of 3
    vec4s (odd: no words): against float64 NumPy, in one kernel whose text has one load per
    input pixel of the block, its values put in place by shifting them down (x_shift) or by
    selects (``WEBNN_GPU_FORCE_DWP_EXPAND_LOAD=shift|select``), loaded as vec4s or, K / 4 even
    where the profile allows words, two per word of 8 values
    (``WEBNN_GPU_FORCE_DWP_EXPAND_WORDS=words|vec4``)."""
    (h, w), K, C, N, s, block = _EXPAND_CASES[case]
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP", "fused")
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP_EXPAND_LOAD", form)
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP_EXPAND_WORDS", words)
    monkeypatch.setattr(conv, "expand_block_ok", lambda *a, **kw: True)
    monkeypatch.setattr(conv, "_dwp_plan", lambda g, n4, k4, tuning, split=True, sg=0: (*block, 1))
    x = rng.standard_normal((1, h, w, K)).astype(np.float32)
    we = (rng.standard_normal((C, 1, 1, K)) * 0.3).astype(np.float32)  # ohwi
    be = rng.standard_normal(C).astype(np.float32)
    wd = (rng.standard_normal((1, 3, 3, C)) * 0.3).astype(np.float32)  # ihwo
    bd = rng.standard_normal(C).astype(np.float32)
    wp = (rng.standard_normal((N, 1, 1, C)) * 0.2).astype(np.float32)  # ohwi
    bp = rng.standard_normal(N).astype(np.float32)
    residual = s == 1 and N == K

    def build(b, o):
        e = b.clamp(b.conv2d(o["x"], b.constant(we), input_layout="nhwc", filter_layout="ohwi", bias=b.constant(be)),
                    min_value=0.0, max_value=6.0)
        d = b.clamp(b.conv2d(e, b.constant(wd), input_layout="nhwc", filter_layout="ihwo", groups=C, padding=[1] * 4,
                             strides=[s, s], bias=b.constant(bd)), min_value=0.0, max_value=6.0)
        p = b.conv2d(d, b.constant(wp), input_layout="nhwc", filter_layout="ohwi", bias=b.constant(bp))
        return {"y": b.add(p, o["x"]) if residual else p}

    got = run_graph(ctx, build, {"x": x})["y"].astype(np.float64)
    x64 = x.astype(np.float64)
    e = np.clip(np.einsum("nhwk,ck->nhwc", x64, we[:, 0, 0, :].astype(np.float64)) + be, 0, 6)
    d = ref_conv2d(e.transpose(0, 3, 1, 2), wd.astype(np.float64).transpose(3, 0, 1, 2), [1] * 4, (s, s),
                   groups=C).transpose(0, 2, 3, 1) + bd
    ref = np.einsum("nhwc,oc->nhwo", np.clip(d, 0, 6), wp[:, 0, 0, :].astype(np.float64)) + bp
    if residual:
        ref = ref + x64
    np.testing.assert_allclose(got, ref, atol=3e-5, rtol=3e-5)
    b = webnn.MLGraphBuilder(ctx)
    xi = b.input("x", {"data_type": "float32", "shape": list(x.shape)})
    g = b.build(build(b, {"x": xi}))
    steps = [st for st in g._steps if getattr(st, "template", "") == "conv/depthwise_project.wgsl"]
    assert len(steps) == 1 and len([st for st in g._steps if hasattr(st, "template")]) == 1
    assert ("= select(X" in steps[0].wgsl) == (form == "select")
    in_words = words == "words" and K // 4 % 2 == 0 and conv._words_ok(ctx._tuning, ctx.features)
    assert ("for (var kw = 0u;" if in_words else "for (var kk = 0u;") in steps[0].wgsl
    assert ("array<vec4<u64>>" in steps[0].wgsl.split("\n", 1)[0]) == in_words
    assert steps[0].wgsl.count("x[(hrow") == len(conv._rows(
        dict(KH=3, sh=s, dh=1), block[0])) * len(conv._segment(dict(KW=3, sw=s, dw=1), block[1]))
    if in_words:  # the same values in the same registers: bit for bit the vec4 form's
        monkeypatch.setenv("WEBNN_GPU_FORCE_DWP_EXPAND_WORDS", "vec4")
        np.testing.assert_array_equal(run_graph(ctx, build, {"x": x})["y"], got.astype(np.float32))


@pytest.mark.parametrize("act", ["swish", "sigmoid"])
@pytest.mark.parametrize("stride", [1, 2])
def test_expansion_with_exp_through_its_edges_against_numpy(ctx, rng, act, stride):
    """An expansion with swish (x sigmoid(x), EfficientNet's) or sigmoid computed inside the
    depthwise kernel (the store form: no projection) writes exp_acc with selects, not branches
    (``act.defs(..., selects)``): expanded values from -150 to 150 (exp's overflow at 88.72,
    its denormal range below -87.3 and its 0 below -103.97, both signs), a NaN input pixel
    (NaN through every output that reads it) and an odd-sized image whose blocks pass its
    edges, against float64 NumPy; the depthwise epilogue takes the same activation."""
    h, w, K, C = 37, 29, 8, 16
    x = rng.standard_normal((1, h, w, K)).astype(np.float32)
    x[0, 5, 7, :] = np.nan
    we = (rng.standard_normal((C, 1, 1, K)) * 40.0).astype(np.float32)  # ohwi: |expanded| up to about 150
    be = np.linspace(-100.0, 100.0, C).astype(np.float32)
    wd = (rng.standard_normal((1, 3, 3, C)) * 0.3).astype(np.float32)  # ihwo
    bd = rng.standard_normal(C).astype(np.float32)

    def f(b, v):
        return b.mul(v, b.sigmoid(v)) if act == "swish" else b.sigmoid(v)

    def build(b, o):
        e = f(b, b.conv2d(o["x"], b.constant(we), input_layout="nhwc", filter_layout="ohwi", bias=b.constant(be)))
        return {"y": f(b, b.conv2d(e, b.constant(wd), input_layout="nhwc", filter_layout="ihwo", groups=C,
                                   padding=[1] * 4, strides=[stride] * 2, bias=b.constant(bd)))}

    b = webnn.MLGraphBuilder(ctx)
    g = b.build(build(b, {"x": b.input("x", {"data_type": "float32", "shape": list(x.shape)})}))
    steps = [st for st in g._steps if getattr(st, "template", "") == "conv/depthwise_project.wgsl"]
    assert len(steps) == 1 and len([st for st in g._steps if hasattr(st, "template")]) == 1
    assert "clamp(x, -104.0, 89.0)" in steps[0].wgsl and "if (x > 88.72284)" not in steps[0].wgsl
    got = run_graph(ctx, build, {"x": x})["y"].astype(np.float64)

    def f64(v):
        with np.errstate(over="ignore"):
            s = 1.0 / (1.0 + np.exp(-v))
        return v * s if act == "swish" else s

    x64 = x.astype(np.float64)
    e = f64(np.einsum("nhwk,ck->nhwc", x64, we[:, 0, 0, :].astype(np.float64)) + be)
    ref = f64(ref_conv2d(e.transpose(0, 3, 1, 2), wd.astype(np.float64).transpose(3, 0, 1, 2), [1] * 4,
                         (stride, stride), groups=C).transpose(0, 2, 3, 1) + bd)
    assert np.isnan(ref).any() and np.array_equal(np.isnan(got), np.isnan(ref))
    ok = ~np.isnan(ref)
    np.testing.assert_allclose(got[ok], ref[ok], atol=3e-5 * np.abs(ref[ok]).max(), rtol=3e-5)


# (image H = W, C, window, stride, N) of zoo pairs whose decision the launch term (LAUNCH_US)
# decides, measured in the models (2026-11-26; benchmarks/dw_shapes.py --paired set, both
# decisions built in one process, 30 rounds alternating, per-round medians, a launch counted):
# split, face_detection_full_range_sparse's 12 x 12 x 48 -> 192 and 192 -> 48 (two kernels
# 0.70-0.94 of the fused one's time in three runs) and pose_landmark_full's 32 x 32 x 192 -> 32
# 5x5 and 8 x 8 x 864 -> 48 (0.59-0.73 and 0.63-0.93)
_LAUNCH_SPLIT = [(12, 48, 3, 1, 192), (12, 192, 3, 1, 48), (32, 192, 5, 1, 32), (8, 864, 3, 1, 48)]
# ... and fused: pairs that a launch term of 10 us split and that ran 0.81-1.16 of the fused
# kernel as two kernels across runs (face_detection_full_range_sparse's 12 x 12 x 128 -> 48 and
# 6 x 6 x 192 -> 96, face_landmark's 12 x 12 x 64 -> 128, all stride 2: not sure, so one kernel),
# iris_landmark's 16 x 16 x 64 -> 128 on the channel-lane kernel (the two kernels 1.01-1.23 of its
# time) and face detection's small 3x3 pairs
_LAUNCH_FUSED = [(24, 128, 3, 2, 48), (12, 192, 3, 2, 96), (24, 64, 3, 2, 128), (16, 64, 3, 1, 128), (8, 96, 3, 1, 96),
                 (12, 48, 3, 1, 96)]


@pytest.mark.parametrize("shape", _LAUNCH_SPLIT + _LAUNCH_FUSED)
def test_launch_term_decides_the_measured_pairs(monkeypatch, shape):
    """project_pays with one launch more at LAUNCH_US (the wall time beyond the kernels'
    timestamps that the fitted sides do not hold): the zoo pairs that ran faster as two kernels
    split, the near misses and the pairs that ran faster fused stay one kernel."""
    for var in ("WEBNN_GPU_FORCE_DWP", "WEBNN_GPU_FORCE_DWP_FORM"):
        monkeypatch.delenv(var, raising=False)
    hw, c, k, s, n = shape
    assert conv.project_pays(_geometry(hw, hw, c, k, s=s), n, "lane-loop") == (shape in _LAUNCH_FUSED)


def test_launch_term_is_one_constant_of_both_cost_models():
    """The two-kernel side of project_pays and the separate expansion conv of expand_shared_ok
    add the same LAUNCH_US, and each side moves by it."""
    fit = conv.DWP_PAY_FIT["lane-loop"]
    assert fit["dispatch"] == conv.LAUNCH_US
    g = _geometry(12, 12, 48, 3)
    two = conv._project_cost(g, 192, "lane-loop")[1]
    sep = conv._expand_shared_cost(g, 32, 48, "lane-loop")[1]
    old = conv.LAUNCH_US
    try:
        fit["dispatch"] = old + 100.0
        assert conv._project_cost(g, 192, "lane-loop")[1] == pytest.approx(two + 100.0)
        assert conv._expand_shared_cost(g, 32, 48, "lane-loop")[1] == pytest.approx(sep + 100.0)
    finally:
        fit["dispatch"] = old
