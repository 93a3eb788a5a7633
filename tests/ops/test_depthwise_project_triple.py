"""An expansion conv, a depthwise conv and its projection whose pair alone runs as two kernels,
run as one ``conv/depthwise_project.wgsl`` kernel (``webnn_gpu.ops.conv.triple_pays``; the rule's
decisions without a GPU are in tests/compiler/test_rule_expand_shared.py): 5x5 and 3x3 windows,
strides 1 and 2, odd image sizes, "same" padding that is not symmetric, a projection width that
is not a multiple of 4, a residual add, against float64 NumPy."""

from __future__ import annotations

import numpy as np
import pytest

from helpers import kernel_templates, run_graph
from references import ref_conv2d


def _block(rng, hw, K, C, N, window, stride, pads, residual=False):
    """relu6(conv1x1(x, K -> C) + b) -> depthwise window x window (stride, ``pads``: top,
    bottom, left, right) + b, relu -> conv1x1(C -> N) + b (``residual``: + x): the build
    function, the inputs and the float64 reference."""
    x = rng.standard_normal((1, *hw, K)).astype(np.float32)
    we = (rng.standard_normal((C, 1, 1, K)) / np.sqrt(K)).astype(np.float32)
    be = (rng.standard_normal(C) * 0.1).astype(np.float32)
    wd = (rng.standard_normal((1, window, window, C)) * 0.3).astype(np.float32)
    bd = (rng.standard_normal(C) * 0.1).astype(np.float32)
    wp = (rng.standard_normal((N, 1, 1, C)) / np.sqrt(C)).astype(np.float32)
    bp = (rng.standard_normal(N) * 0.1).astype(np.float32)

    def build(b, o):
        e = b.clamp(b.conv2d(o["x"], b.constant(we), input_layout="nhwc", filter_layout="ohwi",
                             bias=b.constant(be)), min_value=0.0, max_value=6.0)
        d = b.relu(b.conv2d(e, b.constant(wd), input_layout="nhwc", filter_layout="ihwo", groups=C,
                            bias=b.constant(bd), padding=list(pads), strides=[stride] * 2))
        y = b.conv2d(d, b.constant(wp), input_layout="nhwc", filter_layout="ohwi", bias=b.constant(bp))
        return {"y": b.add(y, o["x"]) if residual else y}

    def ref():
        e = np.clip(np.einsum("nhwk,ck->nhwc", x.astype(np.float64), we[:, 0, 0, :].astype(np.float64)) + be, 0, 6)
        d = ref_conv2d(e.transpose(0, 3, 1, 2), wd.astype(np.float64).transpose(3, 0, 1, 2), padding=pads,
                       strides=(stride, stride), groups=C).transpose(0, 2, 3, 1)
        d = np.maximum(d + bd, 0)
        y = np.einsum("nhwc,oc->nhwo", d, wp[:, 0, 0, :].astype(np.float64)) + bp
        return y + x if residual else y

    return build, {"x": x}, ref


# (image, K, C, N, window, stride, pads, residual): forced (WEBNN_GPU_FORCE_DWP_TRIPLE=on) on
# small images, the model's own choice on hand_landmark_lite's block
_CASES = {
    "5x5s2-odd": ((15, 13), 16, 24, 8, 5, 2, (2, 2, 2, 2), False, "on"),
    "5x5s2-same-N12": ((16, 16), 8, 16, 12, 5, 2, (1, 2, 1, 2), False, "on"),
    "3x3s1-residual": ((10, 9), 16, 32, 16, 3, 1, (1, 1, 1, 1), True, "on"),
    "5x5s2-model": ((56, 56), 16, 96, 24, 5, 2, (1, 2, 1, 2), False, ""),
}


@pytest.mark.parametrize("case", list(_CASES))
def test_three_kernels_as_one(ctx, rng, monkeypatch, case):
    hw, K, C, N, window, stride, pads, residual, force = _CASES[case]
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP_TRIPLE", force)
    build, inputs, ref = _block(rng, hw, K, C, N, window, stride, pads, residual)
    assert kernel_templates(ctx, build, inputs) == ["conv/depthwise_project.wgsl"]
    got = run_graph(ctx, build, inputs)["y"].astype(np.float64)
    np.testing.assert_allclose(got, ref(), atol=2e-5, rtol=2e-5)
