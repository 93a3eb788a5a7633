"""The choice of the channel-lane kernel (``conv/depthwise_project_lanes.wgsl``) for strided
depthwise + projection pairs (``webnn_gpu.ops.conv._dwp_form``: a strided window's input loads
weighted apart in ``DWPL_FIT``) without a GPU, and the pairs it now takes, unforced, against
float64 NumPy: odd images, SAME (asymmetric) and VALID padding, activations, a residual of
another tensor and BlazeFace's max-pooled residual among zero channels."""

from __future__ import annotations

import numpy as np
import pytest

from webnn_gpu.ops import conv

from helpers import kernel_templates, run_graph
from _dwp_blocks import dw_project_block
from test_depthwise_project_strip import _geometry

LANES = "conv/depthwise_project_lanes.wgsl"
BLOCKS = "conv/depthwise_project.wgsl"


def _form(g: dict, n4: int) -> str:
    return conv._dwp_form(g, n4, "lane-loop", 8)[0]


# ---------------------------------------------------------------- the choice (no GPU)
# (input H, W, C, window, projected vec4 columns): stride-2 pairs the channel-lane kernel ran
# faster (forced, 0.68-0.94x of the pixel blocks) and _dwp_form now takes, and those it keeps on
# the pixel blocks (small outputs, where it ran 0.9-1.1x and the margin holds)
_STRIDED_LANES = [(96, 96, 32, 3, 4), (48, 48, 64, 3, 8), (56, 56, 24, 3, 6), (112, 112, 16, 3, 4),
                  (97, 97, 16, 3, 6), (95, 93, 32, 3, 4), (28, 28, 64, 3, 16), (56, 56, 24, 5, 10)]
_STRIDED_BLOCKS = [(28, 28, 48, 3, 6), (15, 15, 48, 3, 8), (14, 14, 64, 3, 24), (31, 29, 24, 3, 6),
                   (13, 13, 32, 3, 8)]


@pytest.mark.parametrize("shape", _STRIDED_LANES + _STRIDED_BLOCKS)
def test_form_of_stride_2_pairs(monkeypatch, shape):
    """_dwp_form on stride-2 pairs: the channel-lane kernel on face detection's 96 x 96 x 32 ->
    16 and 48 x 48 x 64 -> 32, pose detection's 56 x 56 x 24 -> 24 and other outputs of 28 x 28
    and up (odd images too), and a 14 x 14 x 64 -> 64 output; the pixel blocks where the margin
    (DWPL_MARGIN) outweighs what the estimate saves (outputs of 14 x 14 and less here)."""
    monkeypatch.delenv("WEBNN_GPU_FORCE_DWP_FORM", raising=False)
    h, w, c, k, n4 = shape
    assert _form(_geometry(h, w, c, k, s=2), n4) == ("lanes" if shape in _STRIDED_LANES else "blocks")


def test_strided_loads_weighted_apart():
    """DWPL_FIT's sixth weight prices a strided window's loads (below a stride-1 window's, the
    first): _dwpl_terms puts a pair's loads in one of the two terms by its vertical stride, so
    that a stride-1 pair's estimate is what it was."""
    w = conv.DWPL_FIT["lane-loop"]
    assert len(w) == 6 and 0 < w[5] < w[0]
    for s in (1, 2):
        g = _geometry(48, 48, 32, 3, s=s)
        t = conv._dwpl_terms(g, 4, conv._dwp_lanes(g, 4, 8), 8)
        assert (t[0] > 0, t[5] > 0) == (s == 1, s == 2)


# ---------------------------------------------------------------- the kernel against NumPy
def _case(rng, hw, C, N, k, pads, act, residual, npdt=np.float32):
    """A depthwise conv2d with stride 2 (bias, ``pads``, its filter in the ihwo layout), ``act``
    on it (relu, clamp or prelu), its pointwise projection to N channels (bias), an optional
    residual add (``"r"``: another tensor; ``"maxpad"``: the input's 2 x 2 stride-2 max pool
    padded with N - C zero channels), then relu: :func:`dw_project_block`."""
    return dw_project_block(rng, hw, C, N, k=k, s=2, pads=pads, act=act, filter_layout="ihwo", npdt=npdt,
                            residual="max" if residual == "maxpad" else residual)


# (image H x W, C, N, window, padding [top, bottom, left, right], activation, residual, kernel)
_CASES = {
    "face detection's 96 x 96 x 32 -> 16, SAME (0, 1), relu, residual of another tensor":
        ((96, 96), 32, 16, 3, [0, 1, 0, 1], "relu", "r", LANES),
    "48 x 48 x 64 -> 32 (two channel groups per lane), SAME (0, 1), prelu":
        ((48, 48), 64, 32, 3, [0, 1, 0, 1], "prelu", None, LANES),
    "pose detection's 56 x 56 x 24 -> 24, SAME (0, 1), clamp":
        ((56, 56), 24, 24, 3, [0, 1, 0, 1], "clamp", None, LANES),
    "97 x 96 x 32 -> 16, VALID (odd output), clamp, residual of another tensor":
        ((97, 96), 32, 16, 3, [0, 0, 0, 0], "clamp", "r", LANES),
    "97 x 95 x 16 -> 24 (odd image), SAME (1, 1), relu":
        ((97, 95), 16, 24, 3, [1, 1, 1, 1], "relu", "r", LANES),
    "BlazeFace's block: 96 x 96 x 24 -> 32 with the max-pooled input among zero channels, prelu":
        ((96, 96), 24, 32, 3, [0, 1, 0, 1], "prelu", "maxpad", LANES),
    "56 x 56 x 24 -> 40, 5x5 SAME (1, 2), relu":
        ((56, 56), 24, 40, 5, [1, 2, 1, 2], "relu", None, LANES),
    "near miss: 28 x 28 x 48 -> 24 (a 14 x 14 output), SAME (0, 1), prelu: the pixel blocks":
        ((28, 28), 48, 24, 3, [0, 1, 0, 1], "prelu", "r", BLOCKS),
}


@pytest.mark.parametrize("case", list(_CASES))
def test_strided_pairs_unforced_match_numpy(ctx, rng, monkeypatch, case):
    """Stride-2 pairs that _dwp_form now leaves to the channel-lane kernel, unforced, with
    asymmetric SAME and VALID padding, odd images, relu, clamp and prelu between the two
    convolutions, and a residual of another tensor or the input's max pool among zero channels,
    and a small one it keeps on the pixel blocks: one kernel, the one expected, float64 NumPy."""
    if not ctx._subgroup:
        pytest.fail("subgroups are expected on lavapipe")
    monkeypatch.setattr(ctx, "_tuning", "lane-loop")
    for var in ("WEBNN_GPU_FORCE_DWP", "WEBNN_GPU_FORCE_DWP_FORM", "WEBNN_GPU_FORCE_DWPL_SPLIT"):
        monkeypatch.delenv(var, raising=False)
    hw, C, N, k, pads, act, residual, template = _CASES[case]
    build, inputs, ref = _case(rng, hw, C, N, k, pads, act, residual)
    got = run_graph(ctx, build, inputs)["y"].astype(np.float64)
    np.testing.assert_allclose(got, ref, atol=3e-5, rtol=3e-5)
    assert kernel_templates(ctx, build, inputs) == [template]
