"""A relu whose only reader is a depthwise conv2d (the compiler's fuse_conv_input_relu): the
``conv/depthwise.wgsl`` launch applies it to each input value it loads, and the relu's own
launch goes. On the GPU against float64 NumPy: 3x3 "same" padding, 5x5 stride 2 (asymmetric
padding), valid padding, dilation 2, channels not a multiple of 4 (the scalar loads), a batch of
2, float16; the relu's input also read by the next residual add (stored as before). Near
misses run without it and are right: the relu also a graph output, a sigmoid (sigmoid(0) != 0,
so padded taps would be wrong), a dense 3x3 conv.

Tolerance: y = x + r is rounded to the data type (``rnd |y|``, ``rnd`` 2**-24 or 2**-11),
carried through the conv by ``|f|`` (relu is 1-Lipschitz), plus the conv's own
``4 KH KW u (|f| * |relu(y)| + |b|)`` and the output's rounding.
"""

from __future__ import annotations

import numpy as np
import pytest

import webnn_gpu as webnn
from webnn_gpu._lower import KernelStep
from helpers import check_bounds, same_padding
from references import ref_conv2d

U = 2.0**-24


def _nhwc(x, w, **kw):
    return ref_conv2d(x.transpose(0, 3, 1, 2), w.transpose(0, 3, 1, 2), **kw).transpose(0, 2, 3, 1)


def _run(ctx, *, hw=10, c=16, win=3, stride=1, pad=None, dil=1, batch=1, dtype=np.float32, act="relu",
         groups=None, keep=False, twice=False):
    """x, r -> y = x + r -> act(y) -> conv (bias), also n = y + q; (outputs, refs, templates)."""
    rng = np.random.default_rng(hw * 1000 + c * 10 + win)
    dt = np.dtype(dtype)
    g = c if groups is None else groups
    x, r, q = (rng.uniform(-2, 2, (batch, hw, hw, c)).astype(dt) for _ in range(3))
    f = rng.uniform(-1, 1, (c, win, win, c // g)).astype(dt)
    bias = rng.uniform(-1, 1, c).astype(dt)
    if pad is None:
        pad = same_padding(hw, win, stride, dil)
    b = webnn.MLGraphBuilder(ctx)
    desc = {"data_type": webnn._dtypes.from_numpy(dt), "shape": list(x.shape)}
    xi, ri, qi = b.input("x", desc), b.input("r", desc), b.input("q", desc)
    y = b.add(xi, ri)
    a = getattr(b, act)(y)
    z = b.conv2d(a, b.constant(f), bias=b.constant(bias), padding=list(pad), strides=[stride] * 2,
                 dilations=[dil] * 2, groups=g, input_layout="nhwc", filter_layout="ohwi")
    if twice:  # the conv's epilogue then reads its own input (fuse_epilogue)
        z = b.add(z, a)
    graph = b.build({"z": z, "n": b.add(y, qi), **({"a": a} if keep else {})})
    templates = [s.template for s in graph._steps if isinstance(s, KernelStep)]
    got = ctx.compute(graph, {"x": x, "r": r, "q": q})
    graph.destroy()

    y64 = x.astype(np.float64) + r
    a64 = np.maximum(y64, 0) if act == "relu" else 1 / (1 + np.exp(-y64))
    rnd = 2.0**-11 if dt == np.float16 else U
    ea = rnd * np.abs(y64) + (4 * U * np.abs(a64) if act != "relu" else 0)
    f64, b64 = f.astype(np.float64), bias.astype(np.float64)
    kw = dict(padding=pad, strides=(stride, stride), dilations=(dil, dil), groups=g)
    z64 = _nhwc(a64, f64, **kw) + b64
    zabs = _nhwc(np.abs(a64) + ea, np.abs(f64), **kw) + np.abs(b64)
    if twice:
        z64, zabs = z64 + a64, zabs + np.abs(a64) + ea
    k = win * win * (c // g)
    ez = _nhwc(ea, np.abs(f64), **kw) + 4 * k * U * zabs + rnd * np.abs(z64) + 1e-30
    n64 = y64 + q
    refs = {"z": (z64, ez), "n": (n64, 2 * rnd * (np.abs(y64) + np.abs(n64)) + 1e-30)}
    if keep:
        refs["a"] = (a64, ea + rnd * np.abs(a64) + 1e-30)
    return got, refs, templates


CASES = {
    "10x10 3x3 same": dict(),
    "19x19 5x5 stride 2 same": dict(hw=19, c=24, win=5, stride=2),
    "12x12 3x3 valid": dict(hw=12, pad=(0, 0, 0, 0)),
    "9x9 3x3 dilation 2": dict(hw=9, c=8, dil=2),
    "7x7 3x3, 6 channels": dict(hw=7, c=6),
    "6x6 batch 2": dict(hw=6, c=32, batch=2),
}


@pytest.mark.parametrize("case", CASES)
def test_the_relu_is_the_depthwise_conv_s_prologue(ctx, case):
    got, refs, templates = _run(ctx, **CASES[case])
    assert "conv/depthwise.wgsl" in templates and len(templates) == 3, templates  # y, n and the conv
    check_bounds(got, refs)


def test_float16(ctx):
    if "shader-f16" not in ctx.features:
        pytest.skip("no shader-f16")
    for kw in (dict(), dict(hw=19, c=24, win=5, stride=2)):
        got, refs, templates = _run(ctx, dtype=np.float16, **kw)
        assert "conv/depthwise.wgsl" in templates and len(templates) == 3, templates
        check_bounds(got, refs)


@pytest.mark.parametrize("kw", [dict(keep=True), dict(act="sigmoid"), dict(groups=1), dict(act="sigmoid", pad=(2, 0, 1, 1)),
                                dict(twice=True)],
                         ids=["relu output", "sigmoid", "dense", "sigmoid asymmetric", "conv + relu"])
def test_near_misses_run_without_it(ctx, kw):
    got, refs, templates = _run(ctx, **kw)
    assert len(templates) == 4, templates  # the activation keeps its launch
    check_bounds(got, refs)
