"""The channel-lane depthwise + projection kernel (``conv/depthwise_project_lanes.wgsl``) at
channel counts that are not powers of two: channels not a multiple of 4 (the input loaded value
by value in its last channel group, the taps zero-padded; ``webnn_gpu.ops.conv._lanes_tail_ok``)
and BlazeFace's residual of the depthwise input padded with zero channels, read from the held
rows (``_lanes_residual``), against float64 NumPy (the rule's condition on the IR:
``tests/compiler/test_rule_depthwise_tail.py``)."""

from __future__ import annotations

import numpy as np
import pytest

from helpers import kernel_steps, kernel_templates, run_graph
from references import ref_conv2d
from _dwp_blocks import dw_project_block

LANES = "conv/depthwise_project_lanes.wgsl"


def _case(rng, hw, C, N, s, residual, npdt, act="relu", k=3):
    """:func:`dw_project_block` with relu after the residual (``"pad"``: the depthwise input
    padded with N - C zero channels, BlazeFace's; ``"x"``: the input itself; ``"max"`` /
    ``"average"``: its 2 x 2 stride-2 pool, padded; ``"r"``: another tensor; None) and SAME
    padding."""
    return dw_project_block(rng, hw, C, N, k=k, s=s, act=act, residual="x" if residual == "pad" else residual,
                            npdt=npdt)


def _lane_loop(ctx, monkeypatch):
    if not ctx._subgroup:
        pytest.fail("subgroups are expected on lavapipe")
    monkeypatch.setattr(ctx, "_tuning", "lane-loop")
    for var in ("WEBNN_GPU_FORCE_DWP", "WEBNN_GPU_FORCE_DWP_FORM"):
        monkeypatch.delenv(var, raising=False)


# (image, C, N, stride, residual, float type, depthwise activation, forced onto the lanes,
# the kernels expected[, window])
_CASES = {
    "C=42 N=48 stride 2 (face detection's 16 x 16 pair), its 2 x 2 max pool padded as the residual":
        ((32, 32), 42, 48, 2, "max", "float32", "relu", False, [LANES]),
    "C=24 N=28 64 x 64, the input padded to 28 channels as the residual (no load)":
        ((64, 64), 24, 28, 1, "pad", "float32", "relu", False, [LANES]),
    "C=24 N=24 64 x 64, the input itself as the residual (the same pipeline)":
        ((64, 64), 24, 24, 1, "x", "float32", "relu", False, [LANES]),
    "C=24 N=28 5 x 7 stride 2, an average pool padded as the residual":
        ((5, 7), 24, 28, 2, "average", "float32", "relu", True, [LANES]),
    "C=20 N=24 5 x 7, the padded residual, float16":
        ((5, 7), 20, 24, 1, "pad", "float16", "relu", True, [LANES]),
    "C=28 N=48 5 x 7, the padded residual past the lane's held groups (two columns, one group)":
        ((5, 7), 28, 48, 1, "pad", "float32", "relu", True, [LANES]),
    "C=29 N=48 1 x 1 image, stride 2, residual of another tensor (3 values in the last group)":
        ((1, 1), 29, 48, 2, "r", "float32", "relu", True, [LANES]),
    "C=28 N=50 5 x 7 (two columns, the last stored value by value), residual of another tensor":
        ((5, 7), 28, 50, 1, "r", "float32", "relu", True, [LANES]),
    "C=20 N=14 9 x 8 stride 2 (2 pixels per pass, the output stored value by value), float16":
        ((9, 8), 20, 14, 2, "r", "float16", "prelu", True, [LANES]),
    "C=44 N=50 5 x 7 without the channel-lane kernel: the pixel blocks":
        ((5, 7), 44, 50, 1, None, "float32", "relu", "blocks", ["conv/depthwise_project.wgsl"]),
    "C=36 N=42 32 x 32 (face detection's), the input padded to 42 channels as the residual":
        ((32, 32), 36, 42, 1, "pad", "float32", "relu", False, [LANES]),
    "C=30 N=36 5x5 stride 2 (palm detection's window), a max pool padded as the residual":
        ((12, 10), 30, 36, 2, "max", "float32", "relu", True, [LANES], 5),
    "C=20 N=24 9 x 8 stride 2, a max pool padded as the residual, float16":
        ((9, 8), 20, 24, 2, "max", "float16", "relu", True, [LANES]),
    "C=32 N=32 9 x 8 stride 2, its max pool unpadded as the residual":
        ((9, 8), 32, 32, 2, "max", "float32", "prelu", True, [LANES]),
    "C=42 N=48 5 x 7, the input padded as the residual, prelu per channel":
        ((5, 7), 42, 48, 1, "pad", "float32", "prelu", True, [LANES]),
    "C=45 N=48 1 x 1 image, stride 2, residual of another tensor (two groups per lane, 3 values in the last)":
        ((1, 1), 45, 48, 2, "r", "float32", "relu", True, [LANES]),
    "C=36 N=28 5 x 7 stride 2, float16":
        ((5, 7), 36, 28, 2, None, "float16", "prelu", True, [LANES]),
    "C=44 N=50 5 x 7 (the output stored value by value), residual of another tensor":
        ((5, 7), 44, 50, 1, "r", "float32", "relu", True, [LANES]),
}


@pytest.mark.parametrize("case", list(_CASES))
def test_tail_channels_against_numpy(ctx, rng, monkeypatch, case):
    """Channels not a multiple of 4 on the channel-lane kernel (its last group loaded value by
    value, the padding's depthwise values zeroed; projections stored value by value),
    residuals of the depthwise input padded with zero channels or 2 x 2 pools of it taken from
    the held rows (no ``pg``), 3x3 and 5x5 windows, strides 1 and 2, images of one pixel to
    64 x 64, relu and per-channel prelu, float16: float64 NumPy."""
    hw, C, N, s, residual, dt, act, force, expected, *k = _CASES[case]
    if dt == "float16" and "float16" not in ctx.supported_data_types:
        pytest.fail("float16 is expected on lavapipe")
    _lane_loop(ctx, monkeypatch)
    if force:
        monkeypatch.setenv("WEBNN_GPU_FORCE_DWP", "fused")
        monkeypatch.setenv("WEBNN_GPU_FORCE_DWP_FORM", "blocks" if force == "blocks" else "lanes")
    npdt = np.float32 if dt == "float32" else np.float16
    build, inputs, ref = _case(rng, hw, C, N, s, residual, npdt, act, *k)
    got = run_graph(ctx, build, inputs)["y"].astype(np.float64)
    tol = 3e-5 if dt == "float32" else 3e-2
    np.testing.assert_allclose(got, ref, atol=tol * max(1.0, np.abs(ref).max()), rtol=tol)
    steps = kernel_steps(ctx, build, inputs)
    assert [st.template for st in steps] == expected
    if expected == [LANES] and residual in ("pad", "x", "max", "average"):
        assert " pg:" not in steps[0].wgsl  # read from the held rows


def test_tail_near_miss_runs_unfused(ctx, rng, monkeypatch):
    """C = 45 projected to 50 (not a multiple of 4): no fused kernel takes it; the depthwise
    kernel and the projection run apart and match float64 NumPy."""
    _lane_loop(ctx, monkeypatch)
    build, inputs, ref = _case(rng, (5, 7), 45, 50, 1, None, np.float32)
    got = run_graph(ctx, build, inputs)["y"].astype(np.float64)
    np.testing.assert_allclose(got, ref, atol=3e-5 * max(1.0, np.abs(ref).max()), rtol=3e-5)
    templates = kernel_templates(ctx, build, inputs)
    assert "depthwise_project" not in " ".join(templates) and len(templates) == 2, templates


@pytest.mark.parametrize("stride", [1, 2])
def test_one_channel_residual_broadcast_is_not_a_padded_one(ctx, rng, stride):
    """A one-channel depthwise input (or its 2x2 max pool, stride 2) added to a 24-channel
    projection broadcasts over the channels; it is not the input padded with zero channels that
    the channel-lane kernel works out from its rows."""
    n = 24
    x = rng.standard_normal((1, 8, 6, 1)).astype(np.float32)
    wd = (rng.standard_normal((1, 3, 3, 1)) * 0.3).astype(np.float32)
    wp = (rng.standard_normal((n, 1, 1, 1)) * 0.3).astype(np.float32)
    pads = [1, 1, 1, 1] if stride == 1 else [0, 1, 0, 1]

    def build(b, o):
        d = b.relu(b.conv2d(o["x"], b.constant(wd), input_layout="nhwc", filter_layout="ohwi", padding=pads,
                            strides=[stride, stride]))
        p = b.conv2d(d, b.constant(wp), input_layout="nhwc", filter_layout="ohwi")
        r = o["x"] if stride == 1 else b.max_pool2d(o["x"], window_dimensions=[2, 2], strides=[2, 2], layout="nhwc")
        return {"y": b.relu(b.add(p, r))}

    got = run_graph(ctx, build, {"x": x})["y"].astype(np.float64)
    X = x.astype(np.float64)
    D = np.maximum(ref_conv2d(X.transpose(0, 3, 1, 2), wd.astype(np.float64).transpose(0, 3, 1, 2), pads,
                              (stride, stride), (1, 1)).transpose(0, 2, 3, 1), 0)
    R = X if stride == 1 else X.reshape(1, 4, 2, 3, 2, 1).max(axis=(2, 4))
    np.testing.assert_allclose(got, np.maximum(D * wp[:, 0, 0, 0].astype(np.float64) + R, 0), atol=1e-5, rtol=1e-5)
