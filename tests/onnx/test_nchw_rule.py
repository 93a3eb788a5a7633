"""The nchw_conv_to_nhwc compiler rule: NCHW depthwise convolutions on the NHWC depthwise kernel."""

from __future__ import annotations

import numpy as np
import pytest

import webnn_gpu as webnn
from webnn_gpu.profile import profile_graph


def _conv_ref(x, w, groups, pad, stride):
    """NCHW / OIHW convolution in float64."""
    n, c, h, wd = x.shape
    o, ci, kh, kw = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    out = np.zeros((n, o, oh, ow))
    og = o // groups
    for g in range(groups):
        for i in range(kh):
            for j in range(kw):
                patch = xp[:, g * ci:(g + 1) * ci, i:i + stride * oh:stride, j:j + stride * ow:stride]
                out[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", patch, w[g * og:(g + 1) * og, :, i, j])
    return out


@pytest.mark.parametrize("groups,cin,cout,k,stride", [(16, 16, 16, 3, 1), (16, 16, 16, 5, 2)])
def test_nchw_depthwise_conv_runs_on_the_depthwise_kernel(ctx, groups, cin, cout, k, stride):
    """An NCHW depthwise conv2d + relu: same values as NumPy (float64, rtol 1e-4), with the conv
    on the depthwise kernel between two transposes (WEBNN_GPU_PASSES=-nchw_conv_to_nhwc: direct)."""
    rng = np.random.default_rng(groups + k)
    x = rng.standard_normal((1, cin, 20, 24)).astype(np.float32)
    w = rng.standard_normal((cout, cin // groups, k, k)).astype(np.float32)
    b = webnn.MLGraphBuilder(ctx)
    xi = b.input("x", {"data_type": "float32", "shape": list(x.shape)})
    f = b.constant({"data_type": "float32", "shape": list(w.shape)}, w)
    y = b.relu(b.conv2d(xi, f, padding=[k // 2] * 4, strides=[stride] * 2, groups=groups, label="conv"))
    g = b.build({"y": y})
    got = ctx.compute(g, {"x": x})["y"]
    want = np.maximum(_conv_ref(x, w, groups, k // 2, stride), 0)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    templates = [r["template"] for r in profile_graph(ctx, g, {"x": x}, repeats=1)]
    assert any(t.startswith("conv/depthwise") for t in templates), templates
    assert "conv/direct.wgsl" not in templates


def test_transposes_around_an_nchw_depthwise_cancel(ctx):
    """NHWC input -> transpose to NCHW -> depthwise conv -> transpose back (tf2onnx's pattern):
    with nchw_conv_to_nhwc and compose_transposes no transpose kernel is left, same values."""
    rng = np.random.default_rng(9)
    x = rng.standard_normal((1, 12, 10, 8)).astype(np.float32)
    w = rng.standard_normal((8, 1, 3, 3)).astype(np.float32)
    b = webnn.MLGraphBuilder(ctx)
    xi = b.input("x", {"data_type": "float32", "shape": list(x.shape)})
    f = b.constant({"data_type": "float32", "shape": list(w.shape)}, w)
    t = b.transpose(xi, permutation=[0, 3, 1, 2])
    y = b.transpose(b.conv2d(t, f, padding=[1, 1, 1, 1], groups=8), permutation=[0, 2, 3, 1])
    g = b.build({"y": y})
    got = ctx.compute(g, {"x": x})["y"]
    want = _conv_ref(x.transpose(0, 3, 1, 2), w, 8, 1, 1).transpose(0, 2, 3, 1)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    templates = [r["template"] for r in profile_graph(ctx, g, {"x": x}, repeats=1)]
    assert templates == ["conv/depthwise.wgsl"], templates
