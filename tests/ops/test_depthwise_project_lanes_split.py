"""The channel-lane depthwise + projection kernel with its projection's columns split between
subgroups (``_dwp_lanes``), combined with the residual forms the pixel blocks fuse: the input
padded with zero channels, a 2 x 2 max or average pool of it (stride 2), broadcast residuals,
tiny images with uneven padding and float16: float64 NumPy."""

from __future__ import annotations

import numpy as np
import pytest

from webnn_gpu.ops import conv

from helpers import kernel_steps, run_graph
from _dwp_blocks import dw_project_block, same_pads
from test_depthwise_project_lanes import force_lanes

LANES = "conv/depthwise_project_lanes.wgsl"


def _case(rng, nb, hw, C, N, k, s, residual, npdt, pads):
    """A depthwise k x k conv (bias, prelu) projected to N channels (bias), the residual, a
    prelu: (build, inputs, float64 reference); :func:`dw_project_block` (``"pad"``: its ``"x"``)."""
    return dw_project_block(rng, hw, C, N, k=k, s=s, pads=pads, nb=nb, act="prelu", out_act="prelu",
                            residual="x" if residual == "pad" else residual, npdt=npdt)


# (batch, image, C, N, window, stride, residual, data type, padding)
_CASES = {
    "input padded with zero channels, C=42 N=96 (3 subgroups)": (1, (9, 7), 42, 96, 3, 1, "pad", "float32", None),
    "input padded with zero channels, C=44 N=128, float16": (1, (7, 9), 44, 128, 3, 1, "pad", "float16", None),
    "2x2 max pool of the input, stride 2, odd image": (1, (11, 9), 42, 96, 3, 2, "max", "float32", "same"),
    "2x2 max pool of the input, C=64 N=128, batch 2": (2, (10, 9), 64, 128, 3, 2, "max", "float32", "same"),
    "2x2 average pool of the input, 5x5 stride 2": (1, (13, 11), 40, 100, 5, 2, "average", "float32", "same"),
    "2x2 max pool of the input, float16": (1, (9, 13), 36, 100, 3, 2, "max", "float16", "same"),
    "residual per channel [1,1,1,N]": (1, (6, 6), 64, 128, 3, 1, "per-channel", "float32", None),
    "residual per pixel [n,h,w,1], batch 2": (2, (6, 7), 64, 128, 3, 1, "per-pixel", "float32", None),
    "1x1 image, stride 2": (1, (1, 1), 64, 128, 3, 2, "r", "float32", [1, 1, 1, 1]),
    "2x1 image, uneven padding, stride 2": (1, (2, 1), 64, 100, 3, 2, "r", "float32", [0, 1, 1, 1]),
    "last subgroup with one column, batch 2": (2, (7, 5), 64, 68, 3, 1, "r", "float32", None),
}


@pytest.mark.parametrize("case", list(_CASES))
def test_split_columns_with_residuals_against_numpy(ctx, rng, monkeypatch, case):
    """Forced onto the channel-lane kernel, each case splits its columns between subgroups and
    matches float64 NumPy (a residual the split kernel cannot take from its held rows is loaded)."""
    nb, hw, C, N, k, s, residual, dt, pads = _CASES[case]
    if dt == "float16" and "float16" not in ctx.supported_data_types:
        pytest.fail("float16 is expected on lavapipe")
    force_lanes(ctx, monkeypatch)
    pads = same_pads(k, s, hw) if pads == "same" else pads or [k // 2] * 4
    build, inputs, ref = _case(rng, nb, hw, C, N, k, s, residual, np.float32 if dt == "float32" else np.float16, pads)
    steps = [st for st in kernel_steps(ctx, build, inputs) if st.template == LANES]
    assert len(steps) == 1 and "let cb = " in steps[0].wgsl  # the split form
    got = run_graph(ctx, build, inputs)["y"].astype(np.float64)
    tol = 3e-5 if dt == "float32" else 3e-2
    np.testing.assert_allclose(got, ref, atol=tol * max(1.0, np.abs(ref).max()), rtol=tol)


def test_one_column_per_lane_switch_keeps_the_split_limits(monkeypatch):
    """DWPL_SPLIT (one column per lane, the A/B switch) splits no wider than DWPL_MAX_SPLITS and
    not at all with WEBNN_GPU_FORCE_DWPL_SPLIT=off (pairs that need no split keep their plan)."""
    g = {"dh": 1, "KH": 3, "sh": 1, "C": 64, "OH": 16, "OW": 16, "NB": 1}
    monkeypatch.setattr(conv, "DWPL_SPLIT", True)
    assert conv._dwp_lanes(g, 64, 8) is None  # 8 subgroups of one column per lane
    plan = conv._dwp_lanes(g, 32, 8)
    assert plan is not None and plan[4] == 1 and conv._dwpl_splits(32, 8, 1) == conv.DWPL_MAX_SPLITS
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWPL_SPLIT", "off")
    assert conv._dwp_lanes(g, 32, 8) is None
    assert conv._dwp_lanes(g, 4, 8) is not None and conv._dwp_lanes(g, 16, 8) is not None
