"""fuse_depthwise_project with an expansion of any input width computed in workgroup memory
(``expand_shared``): a 1x1 conv (bias, PReLU) -> depthwise 3x3 (bias, maybe a residual add of
its own input) -> 1x1 projection (bias, residual add, PReLU) as one kernel, against float64
NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import webnn_gpu as webnn
from webnn_gpu.errors import NotSupportedError

from helpers import kernel_steps
from helpers import kernel_templates as _templates
from helpers import run_graph
from references import conv2d_nhwc


def _prelu(x, slope):
    return np.where(x >= 0, x, x * slope)


def _block(rng, K, C, N, hw, stride=1, npdt=np.float32, self_add=False):
    """The inverted-residual block's data and its build function (expansion K -> C with PReLU,
    depthwise 3x3 with bias (``self_add``: plus its input), projection C -> N with bias,
    residual add and PReLU)."""
    x = rng.standard_normal((1, *hw, K)).astype(npdt)
    d = {
        "x": x,
        "we": (rng.standard_normal((C, 1, 1, K)) / np.sqrt(K)).astype(npdt),
        "be": (rng.standard_normal(C) * 0.1).astype(npdt),
        "ae": (rng.random(C) * 0.5).astype(npdt),
        "wd": (rng.standard_normal((1, 3, 3, C)) * 0.3).astype(npdt),
        "bd": (rng.standard_normal(C) * 0.1).astype(npdt),
        "wp": (rng.standard_normal((N, 1, 1, C)) / np.sqrt(C)).astype(npdt),
        "bp": (rng.standard_normal(N) * 0.1).astype(npdt),
        "ap": (rng.random(N) * 0.5).astype(npdt),
    }
    oh, ow = [(s + 2 - 3) // stride + 1 for s in hw]
    r = rng.standard_normal((1, oh, ow, N)).astype(npdt)

    def build(b, o):
        e = b.conv2d(o["x"], b.constant(d["we"]), input_layout="nhwc", filter_layout="ohwi", bias=b.constant(d["be"]))
        e = b.prelu(e, b.constant(d["ae"]))
        t = b.conv2d(e, b.constant(d["wd"]), input_layout="nhwc", filter_layout="ihwo", groups=C,
                     bias=b.constant(d["bd"]), padding=[1, 1, 1, 1], strides=[stride] * 2)
        if self_add:
            t = b.add(t, e)
        p = b.conv2d(t, b.constant(d["wp"]), input_layout="nhwc", filter_layout="ohwi", bias=b.constant(d["bp"]))
        return {"y": b.prelu(b.add(p, o["r"]), b.constant(d["ap"]))}

    def ref():
        f = {k: v.astype(np.float64) for k, v in d.items()}
        e = _prelu(np.einsum("nhwk,ck->nhwc", f["x"], f["we"][:, 0, 0, :]) + f["be"], f["ae"])
        t = conv2d_nhwc(e, f["wd"].transpose(3, 1, 2, 0), f["bd"], 1, stride, groups=C)
        if self_add:
            t = t + e
        p = np.einsum("nhwc,oc->nhwo", t, f["wp"][:, 0, 0, :]) + f["bp"]
        return _prelu(p + r.astype(np.float64), f["ap"])

    return build, {"x": x, "r": r}, ref


# chunks of 3, 8, 8 and 5 vec4s (K4 = 9, 16, 32, 65); the depthwise conv adds its own input
# (held from workgroup memory) for K 64 and 260 (not on 1x1 images, whose add the compiler
# folds elsewhere)
@pytest.mark.parametrize("hw", [(1, 1), (2, 2), (3, 5), (8, 8)], ids=lambda hw: f"{hw[0]}x{hw[1]}")
@pytest.mark.parametrize("K", [36, 64, 128, 260])
def test_expansion_of_any_width_runs_inside_the_fused_kernel(ctx, rng, monkeypatch, K, hw):
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP", "fused")
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP_EXPAND", "shared")
    build, inputs, ref = _block(rng, K, 16, 32, hw, self_add=K in (64, 260) and hw != (1, 1))
    got = run_graph(ctx, build, inputs)["y"].astype(np.float64)
    np.testing.assert_allclose(got, ref(), atol=2e-5, rtol=2e-5)
    assert _templates(ctx, build, inputs) == ["conv/depthwise_project.wgsl"]


@pytest.mark.parametrize("tuning", ["lane-loop", "default"])
def test_expansion_in_workgroup_memory_float16_and_tunings(ctx, rng, monkeypatch, tuning):
    """float16 storage (float32 accumulation), on both tuning profiles (with and without lanes
    sharing a column block), a stride-2 depthwise conv."""
    monkeypatch.setattr(ctx, "_tuning", tuning)
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP", "fused")
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP_EXPAND", "shared")
    build, inputs, ref = _block(rng, 64, 16, 32, (5, 6), stride=2, npdt=np.float16)
    got = run_graph(ctx, build, inputs)["y"].astype(np.float64)
    np.testing.assert_allclose(got, ref(), atol=3e-2, rtol=3e-2)
    assert _templates(ctx, build, inputs) == ["conv/depthwise_project.wgsl"]


def test_expansion_in_workgroup_memory_on_a_tall_image(ctx, rng, monkeypatch):
    """A wide expansion (K = 1024) on a tall image: many workgroups, each its band of rows, and
    every invocation's loops within llvmpipe's budget of 65535 iterations."""
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP", "fused")
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP_EXPAND", "shared")
    build, inputs, ref = _block(rng, 1024, 8, 8, (96, 2))
    got = run_graph(ctx, build, inputs)["y"].astype(np.float64)
    np.testing.assert_allclose(got, ref(), atol=5e-5, rtol=5e-5)
    assert _templates(ctx, build, inputs) == ["conv/depthwise_project.wgsl"]


# (image, K, C, N, window, stride, dilation, tuning): the band's rows for other windows, strides
# and dilations, projections not a multiple of 4, and column splits without lanes (default)
_GEOMETRIES = [((7, 9), 40, 8, 6, 5, 1, 2, "lane-loop"), ((10, 3), 48, 12, 10, 3, 2, 1, "lane-loop"),
               ((6, 6), 36, 16, 20, 5, 2, 1, "default"), ((5, 7), 100, 8, 8, 3, 1, 3, "default")]


@pytest.mark.parametrize("geometry", _GEOMETRIES,
                         ids=lambda g: f"{g[0][0]}x{g[0][1]}-{g[4]}x{g[4]}s{g[5]}d{g[6]}-{g[7]}")
def test_expansion_in_workgroup_memory_for_other_windows(ctx, rng, monkeypatch, geometry):
    from references import ref_conv2d

    hw, K, C, N, k, s, dil, tuning = geometry
    monkeypatch.setattr(ctx, "_tuning", tuning)
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP", "fused")
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP_EXPAND", "shared")
    pad = (k - 1) // 2 * dil
    x = rng.standard_normal((1, *hw, K)).astype(np.float32)
    we = (rng.standard_normal((C, 1, 1, K)) / np.sqrt(K)).astype(np.float32)
    be = rng.standard_normal(C).astype(np.float32)
    wd = (rng.standard_normal((1, k, k, C)) * 0.3).astype(np.float32)
    bd = rng.standard_normal(C).astype(np.float32)
    wp = (rng.standard_normal((N, 1, 1, C)) / np.sqrt(C)).astype(np.float32)
    bp = rng.standard_normal(N).astype(np.float32)

    def build(b, o):
        e = b.relu(b.conv2d(o["x"], b.constant(we), input_layout="nhwc", filter_layout="ohwi", bias=b.constant(be)))
        d = b.conv2d(e, b.constant(wd), input_layout="nhwc", filter_layout="ihwo", groups=C, bias=b.constant(bd),
                     padding=[pad] * 4, strides=[s, s], dilations=[dil, dil])
        p = b.conv2d(b.relu(d), b.constant(wp), input_layout="nhwc", filter_layout="ohwi", bias=b.constant(bp))
        return {"y": b.sigmoid(p)}

    got = run_graph(ctx, build, {"x": x})["y"].astype(np.float64)
    e = np.maximum(np.einsum("nhwk,ck->nhwc", x.astype(np.float64), we[:, 0, 0, :].astype(np.float64)) + be, 0)
    d = ref_conv2d(e.transpose(0, 3, 1, 2), wd.astype(np.float64).transpose(3, 0, 1, 2), [pad] * 4, [s, s],
                   [dil, dil], groups=C).transpose(0, 2, 3, 1)
    p = np.einsum("nhwc,oc->nhwo", np.maximum(d + bd, 0), wp[:, 0, 0, :].astype(np.float64)) + bp
    np.testing.assert_allclose(got, 1 / (1 + np.exp(-p)), atol=2e-5, rtol=2e-5)
    assert _templates(ctx, build, {"x": x}) == ["conv/depthwise_project.wgsl"]


def _padded_block(rng, K, C, N, hw, pad):
    """Expansion K -> C (bias, PReLU), 3x3 depthwise with padding ``pad`` (top, bottom, left,
    right), projection C -> N (bias): its build function, inputs and float64 reference."""
    from references import ref_conv2d

    x = rng.standard_normal((1, *hw, K)).astype(np.float32)
    we = (rng.standard_normal((C, 1, 1, K)) / np.sqrt(K)).astype(np.float32)
    be = (rng.standard_normal(C) * 0.1).astype(np.float32)
    ae = (rng.random(C) * 0.5).astype(np.float32)
    wd = (rng.standard_normal((1, 3, 3, C)) * 0.3).astype(np.float32)
    wp = (rng.standard_normal((N, 1, 1, C)) / np.sqrt(C)).astype(np.float32)
    bp = (rng.standard_normal(N) * 0.1).astype(np.float32)

    def build(b, o):
        e = b.prelu(b.conv2d(o["x"], b.constant(we), input_layout="nhwc", filter_layout="ohwi",
                             bias=b.constant(be)), b.constant(ae))
        d = b.conv2d(e, b.constant(wd), input_layout="nhwc", filter_layout="ihwo", groups=C, padding=pad)
        return {"y": b.conv2d(d, b.constant(wp), input_layout="nhwc", filter_layout="ohwi", bias=b.constant(bp))}

    def ref():
        e = _prelu(np.einsum("nhwk,ck->nhwc", x.astype(np.float64), we[:, 0, 0, :].astype(np.float64)) + be, ae)
        d = ref_conv2d(e.transpose(0, 3, 1, 2), wd.astype(np.float64).transpose(3, 0, 1, 2), pad, [1, 1], [1, 1],
                       groups=C).transpose(0, 2, 3, 1)
        return np.einsum("nhwc,oc->nhwo", d, wp[:, 0, 0, :].astype(np.float64)) + bp

    return build, {"x": x}, ref


# (image, bottom padding, forced): workgroups whose blocks read only the padding rows below the
# image expand no rows (their band starts at the image's end); the first two fuse under the
# default cost model
@pytest.mark.parametrize("case", [((2, 2), 4, False), ((4, 4), 8, False), ((8, 2), 6, True)],
                         ids=lambda c: f"{c[0][0]}x{c[0][1]}-bottom{c[1]}{'-forced' if c[2] else ''}")
def test_expansion_in_workgroup_memory_with_blocks_below_the_image(ctx, rng, monkeypatch, case):
    hw, bottom, forced = case
    if forced:
        monkeypatch.setenv("WEBNN_GPU_FORCE_DWP", "fused")
        monkeypatch.setenv("WEBNN_GPU_FORCE_DWP_EXPAND", "shared")
    build, inputs, ref = _padded_block(rng, 128, 64, 128, hw, [1, bottom, 1, 1])
    got = run_graph(ctx, build, inputs)["y"].astype(np.float64)
    np.testing.assert_allclose(got, ref(), atol=1e-4, rtol=1e-4)
    assert _templates(ctx, build, inputs) == ["conv/depthwise_project.wgsl"]


def test_expansion_in_workgroup_memory_declined_past_the_loop_limit(ctx, rng, monkeypatch):
    """K / 4 = 347 (prime: chunks of one vec4) into 4 channels on a 4 x 256 image would run
    1 + 64 (2 + 347 (1 + 2)) > 65535 loop iterations per invocation: the rule keeps the two
    kernels even when forced, and the result is right."""
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP", "fused")
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP_EXPAND", "shared")
    build, inputs, ref = _padded_block(rng, 1388, 4, 4, (4, 256), [1, 1, 1, 1])
    got = run_graph(ctx, build, inputs)["y"].astype(np.float64)
    np.testing.assert_allclose(got, ref(), atol=1e-4, rtol=1e-4)
    assert len(_templates(ctx, build, inputs)) == 2


@pytest.mark.parametrize("tuning", ["lane-loop", "default"])
def test_expansion_epilogue_operands_split_between_lanes(ctx, rng, monkeypatch, tuning):
    """With lanes sharing a column block (lane-loop), the expansion's per-channel operands (bias,
    PReLU slope) of a channel group are loaded once per subgroup, lane l < 4 those of channel
    4 cb + l, and broadcast; without (default) each invocation loads its own. Three channel
    groups (C = 12), K / 4 = 9 (chunks of 3), against float64 NumPy."""
    monkeypatch.setattr(ctx, "_tuning", tuning)
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP", "fused")
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP_EXPAND", "shared")
    build, inputs, ref = _block(rng, 36, 12, 20, (6, 5))
    got = run_graph(ctx, build, inputs)["y"].astype(np.float64)
    np.testing.assert_allclose(got, ref(), atol=2e-5, rtol=2e-5)
    (step,) = kernel_steps(ctx, build, inputs)
    assert step.template == "conv/depthwise_project.wgsl"
    split = "expand_q(cb * 4u + min(lane, 3u))" in step.wgsl
    assert split == (tuning == "lane-loop")
    assert ("expand_q(cb * 4u + 1u)" in step.wgsl) == (tuning != "lane-loop")
