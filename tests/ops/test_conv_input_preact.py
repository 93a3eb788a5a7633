"""A pre-activation ``act(y * s + b)`` (``s``, ``b`` one value per channel, either absent; act a
relu, a clamp or none) read only by convs on the tile kernel (the compiler's
fuse_conv_input_preact): each ``matmul/tile.wgsl`` launch applies it to each in-image input
value it loads, and the chain's own launch goes. On the GPU against float64 NumPy: 1x1, 3x3
"same" padding, 3x3 stride 2, scale only, shift only, relu alone, clamp, a clamp with
clamp(0) != 0 before a padded conv (the padding is of the activated input: 0), several
readers; ``y`` also read by the next residual add (stored as before). Near misses run without
it and are right: the activation also a graph output, a depthwise reader besides a 1x1 one, a
scale that is not one per channel.

Tolerance: y = x + r is rounded to float32 (``U |y|``, carried by ``|s|``), ``y * s`` and
``+ b`` round once each (``U (|y s| + |y s + b|)``; the activations are 1-Lipschitz), carried
through the conv by ``|f|``, plus the conv's own ``4 K U (|f| |a| + |bias|)`` and the output's
rounding.
"""

from __future__ import annotations

import numpy as np
import pytest

import webnn_gpu as webnn
from webnn_gpu._lower import KernelStep
from helpers import check_bounds, same_padding
from references import ref_conv2d

U = 2.0**-24


@pytest.fixture(autouse=True)
def _windowed(monkeypatch):
    """Windowed readers too (by default only pointwise convs take the chain)."""
    monkeypatch.setenv("WEBNN_GPU_FORCE_INPUT_PREACT", "windowed")


def _nhwc(x, w, **kw):
    return ref_conv2d(x.transpose(0, 3, 1, 2), w.transpose(0, 3, 1, 2), **kw).transpose(0, 2, 3, 1)


def _run(ctx, *, hw=12, c=16, o=24, convs=((1, 1),), scale=True, shift=True, act=("relu",), s_shape=None,
         keep=False, depthwise=False):
    """x, r -> y = x + r -> act(y * s + b) read by one conv per (win, stride) of ``convs``, also
    n = y + q; (outputs, refs, templates)."""
    rng = np.random.default_rng(hw * 1000 + c * 10 + len(convs))
    x, r, q = (rng.uniform(-2, 2, (1, hw, hw, c)).astype(np.float32) for _ in range(3))
    s = rng.uniform(0.5, 2, s_shape or (c,)).astype(np.float32)
    t = rng.uniform(-1, 1, (1, 1, 1, c)).astype(np.float32)
    b = webnn.MLGraphBuilder(ctx)
    desc = {"data_type": "float32", "shape": list(x.shape)}
    xi, ri, qi = b.input("x", desc), b.input("r", desc), b.input("q", desc)
    y = b.add(xi, ri)
    v = y
    if scale:
        v = b.mul(v, b.constant(s))
    if shift:
        v = b.add(v, b.constant(t))
    if act is not None and act[0] == "relu":
        v = b.relu(v)
    elif act is not None:
        v = b.clamp(v, min_value=act[1], max_value=act[2])
    y64 = x.astype(np.float64) + r
    s64 = s.astype(np.float64) if scale else np.ones(1)
    t64 = t.astype(np.float64) if shift else np.zeros(1)
    u = y64 * s64
    p64 = u + t64
    a64 = p64 if act is None else np.maximum(p64, 0) if act[0] == "relu" else np.clip(p64, act[1], act[2])
    ea = U * np.abs(y64) * np.abs(s64) + U * (np.abs(u) + np.abs(p64)) + 1e-30
    outs, refs = {}, {}
    for i, (win, stride) in enumerate(convs):
        f = rng.uniform(-1, 1, (o, win, win, c)).astype(np.float32)
        bias = rng.uniform(-1, 1, o).astype(np.float32)
        pad = same_padding(hw, win, stride)
        outs[f"z{i}"] = b.conv2d(v, b.constant(f), bias=b.constant(bias), padding=list(pad), strides=[stride] * 2,
                                 input_layout="nhwc", filter_layout="ohwi")
        f64 = f.astype(np.float64)
        kw = dict(padding=pad, strides=(stride, stride), dilations=(1, 1), groups=1)
        z64 = _nhwc(a64, f64, **kw) + bias
        zabs = _nhwc(np.abs(a64) + ea, np.abs(f64), **kw) + np.abs(bias.astype(np.float64))
        refs[f"z{i}"] = (z64, _nhwc(ea, np.abs(f64), **kw) + 4 * win * win * c * U * zabs + U * np.abs(z64) + 1e-30)
    if depthwise:
        f = rng.uniform(-1, 1, (c, 3, 3, 1)).astype(np.float32)
        outs["d"] = b.conv2d(v, b.constant(f), padding=[1] * 4, groups=c, input_layout="nhwc", filter_layout="ohwi")
        kw = dict(padding=(1, 1, 1, 1), strides=(1, 1), dilations=(1, 1), groups=c)
        d64 = _nhwc(a64, f.astype(np.float64), **kw)
        zabs = _nhwc(np.abs(a64) + ea, np.abs(f.astype(np.float64)), **kw)
        refs["d"] = (d64, _nhwc(ea, np.abs(f.astype(np.float64)), **kw) + 40 * U * zabs + 1e-30)
    outs["n"] = b.add(y, qi)
    n64 = y64 + q
    refs["n"] = (n64, 2 * U * (np.abs(y64) + np.abs(n64)) + 1e-30)
    if keep:
        outs["a"] = v
        refs["a"] = (a64, ea + U * np.abs(a64))
    graph = b.build(outs)
    templates = [st.template for st in graph._steps if isinstance(st, KernelStep)]
    got = ctx.compute(graph, {"x": x, "r": r, "q": q})
    graph.destroy()
    return got, refs, templates


CASES = {
    "1x1": dict(),
    "3x3 same": dict(convs=((3, 1),)),
    "3x3 stride 2": dict(hw=13, convs=((3, 2),)),
    "scale only, 3x3": dict(shift=False, convs=((3, 1),)),
    "shift only": dict(scale=False),
    "relu alone, 3x3": dict(scale=False, shift=False, convs=((3, 1),)),
    "no activation": dict(act=None),
    "clamp 0..6, 3x3": dict(act=("clamp", 0.0, 6.0), convs=((3, 1),)),
    "clamp(0) = 0.5 before a padded 3x3": dict(act=("clamp", 0.5, 2.0), convs=((3, 1),)),
    "three readers": dict(convs=((1, 1), (3, 1), (3, 2))),
}


@pytest.mark.parametrize("case", CASES)
def test_the_chain_is_the_tile_kernel_s_input_step(ctx, case):
    kw = CASES[case]
    got, refs, templates = _run(ctx, **kw)
    readers = len(kw.get("convs", ((1, 1),)))
    assert templates.count("matmul/tile.wgsl") == readers and len(templates) == 2 + readers, templates
    check_bounds(got, refs)


@pytest.mark.parametrize("kw", [dict(keep=True), dict(depthwise=True), dict(s_shape=(12, 1), shift=False, act=None),
                                dict(convs=((3, 1),), default=True)],
                         ids=["activation output", "depthwise reader", "scale along W", "3x3 by default"])
def test_near_misses_run_without_it(ctx, kw, monkeypatch):
    if kw.pop("default", False):
        monkeypatch.delenv("WEBNN_GPU_FORCE_INPUT_PREACT")
    got, refs, templates = _run(ctx, **kw)
    assert len(templates) == 4 + (1 if kw.get("depthwise") else 0), templates  # y, the chain, the conv, n
    check_bounds(got, refs)


def test_a_batch_normalization_then_relu_read_by_a_padded_conv(ctx):
    """``relu(batch_normalization(y))`` (ONNX BatchNormalization -> Relu, its input also read
    by the next residual add): the conv applies (y - mean) / sqrt(var + eps) * g + b and the
    relu, the sqrt computed on the host in float32 (as split_batch_norm does)."""
    rng = np.random.default_rng(7)
    hw, c, o = 12, 16, 24
    x, r, q = (rng.uniform(-2, 2, (1, hw, hw, c)).astype(np.float32) for _ in range(3))
    mean, gamma, beta = (rng.uniform(-1, 1, c).astype(np.float32) for _ in range(3))
    var = rng.uniform(0.5, 2, c).astype(np.float32)
    f = rng.uniform(-1, 1, (o, 3, 3, c)).astype(np.float32)
    b = webnn.MLGraphBuilder(ctx)
    desc = {"data_type": "float32", "shape": list(x.shape)}
    xi, ri, qi = b.input("x", desc), b.input("r", desc), b.input("q", desc)
    y = b.add(xi, ri)
    a = b.relu(b.batch_normalization(y, b.constant(mean), b.constant(var), scale=b.constant(gamma),
                                     bias=b.constant(beta), axis=3, epsilon=1e-5))
    z = b.conv2d(a, b.constant(f), padding=[1] * 4, input_layout="nhwc", filter_layout="ohwi")
    graph = b.build({"z": z, "n": b.add(y, qi)})
    templates = [st.template for st in graph._steps if isinstance(st, KernelStep)]
    got = ctx.compute(graph, {"x": x, "r": r, "q": q})
    graph.destroy()
    assert templates.count("matmul/tile.wgsl") == 1 and len(templates) == 3, templates
    y64 = x.astype(np.float64) + r
    d = np.sqrt(var.astype(np.float64) + 1e-5)
    p64 = (y64 - mean) / d * gamma + beta
    a64 = np.maximum(p64, 0)
    # y's rounding carried by |g| / d, four roundings of the steps (and the float32 sqrt)
    ea = U * np.abs(y64) * np.abs(gamma) / d + 6 * U * (np.abs((y64 - mean) / d * gamma) + np.abs(p64) + 1) + 1e-30
    kw = dict(padding=(1, 1, 1, 1), strides=(1, 1), dilations=(1, 1), groups=1)
    f64 = f.astype(np.float64)
    z64 = _nhwc(a64, f64, **kw)
    zb = _nhwc(ea, np.abs(f64), **kw) + 4 * 9 * c * U * _nhwc(np.abs(a64) + ea, np.abs(f64), **kw) + U * np.abs(z64)
    n64 = y64 + q
    check_bounds(got, {"z": (z64, zb), "n": (n64, 2 * U * (np.abs(y64) + np.abs(n64)) + 1e-30)})
