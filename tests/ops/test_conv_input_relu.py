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


# ---------------------------------------------------------------- several readers
def _bound_conv(a64, ea, f64, b64, kw, k):
    """(float64 conv of ``a64``, its bound): ``ea`` the input's error, ``k`` the terms per output."""
    z64 = _nhwc(a64, f64, **kw) + b64
    zabs = _nhwc(np.abs(a64) + ea, np.abs(f64), **kw) + np.abs(b64)
    return z64, _nhwc(ea, np.abs(f64), **kw) + 4 * k * U * zabs


def _readers(ctx, branches, *, hw=10, c=16, dtype=np.float32, keep=False, dense=False, texts=None):
    """y = x + r, a = relu(y) read by one branch per entry of ``branches`` ((win, stride, n):
    a depthwise conv, then a pointwise conv to ``n`` channels unless n is 0), and n = y + q;
    ``dense``: a 3x3 conv of ``a`` too. (outputs, refs, templates)."""
    rng = np.random.default_rng(hw * 7 + c)
    dt = np.dtype(dtype)
    x, r, q = (rng.uniform(-2, 2, (1, hw, hw, c)).astype(dt) for _ in range(3))
    b = webnn.MLGraphBuilder(ctx)
    desc = {"data_type": webnn._dtypes.from_numpy(dt), "shape": list(x.shape)}
    xi, ri, qi = b.input("x", desc), b.input("r", desc), b.input("q", desc)
    y = b.add(xi, ri)
    a = b.relu(y)
    y64 = x.astype(np.float64) + r
    a64 = np.maximum(y64, 0)
    rnd = 2.0**-11 if dt == np.float16 else U
    ea = rnd * np.abs(y64)
    outs, refs = {"n": b.add(y, qi)}, {}
    n64 = y64 + q
    refs["n"] = (n64, 2 * rnd * (np.abs(y64) + np.abs(n64)) + 1e-30)
    if keep:
        outs["a"], refs["a"] = a, (a64, ea + 1e-30)
    for i, (win, stride, n) in enumerate(branches + ([(3, 1, -1)] if dense else [])):
        groups = 1 if n == -1 else c
        f = rng.uniform(-1, 1, (c, win, win, c // groups)).astype(dt)
        bias = rng.uniform(-1, 1, c).astype(dt)
        pad = same_padding(hw, win, stride, 1)
        z = b.conv2d(a, b.constant(f), bias=b.constant(bias), padding=list(pad), strides=[stride] * 2, groups=groups,
                     input_layout="nhwc", filter_layout="ohwi")
        kw = dict(padding=pad, strides=(stride, stride), dilations=(1, 1), groups=groups)
        z64, ez = _bound_conv(a64, ea, f.astype(np.float64), bias.astype(np.float64), kw, win * win * (c // groups))
        ez = ez + rnd * np.abs(z64)
        if n > 0:
            p = rng.uniform(-1, 1, (n, 1, 1, c)).astype(dt)
            pb = rng.uniform(-1, 1, n).astype(dt)
            z = b.conv2d(z, b.constant(p), bias=b.constant(pb), input_layout="nhwc", filter_layout="ohwi")
            kw = dict(padding=(0, 0, 0, 0), strides=(1, 1), dilations=(1, 1), groups=1)
            z64, ez = _bound_conv(z64, ez, p.astype(np.float64), pb.astype(np.float64), kw, c)
            ez = ez + rnd * np.abs(z64)
        outs[f"z{i}"], refs[f"z{i}"] = z, (z64, ez + 1e-30)
    graph = b.build(outs)
    templates = [s.template for s in graph._steps if isinstance(s, KernelStep)]
    if texts is not None:
        texts += [s.wgsl for s in graph._steps if isinstance(s, KernelStep) and s.template in DWP]
    got = ctx.compute(graph, {"x": x, "r": r, "q": q})
    graph.destroy()
    return got, refs, templates


DWP = ("conv/depthwise_project.wgsl", "conv/depthwise_project_strip.wgsl", "conv/depthwise_project_lanes.wgsl")

READERS = {  # branches, input size and channels, WEBNN_GPU_FORCE_DWP_FORM
    "3 depthwise convs": (dict(branches=[(3, 1, 0), (5, 1, 0), (3, 2, 0)]), ""),
    "2 depthwise + projection, pixel blocks": (dict(branches=[(3, 1, 8), (5, 1, 12)]), "blocks"),
    "2 depthwise + projection, channel lanes": (dict(branches=[(3, 1, 16), (5, 2, 16)], hw=8, c=44), "lanes"),
    "depthwise + projection and a depthwise conv": (dict(branches=[(3, 1, 8), (3, 1, 0)]), "blocks"),
    "2 depthwise + projection, 6 channels (lanes, scalar loads)": (dict(branches=[(3, 1, 8), (3, 2, 8)], c=6), ""),
}


@pytest.mark.parametrize("case", READERS)
def test_a_relu_with_several_readers_is_applied_by_each(ctx, monkeypatch, case):
    """The relu has no launch of its own; each reader's result matches float64 NumPy."""
    kw, form = READERS[case]
    if form:
        monkeypatch.setenv("WEBNN_GPU_FORCE_DWP_FORM", form)
    got, refs, templates = _run_readers(ctx, kw)
    dwp = [t for t in templates if t in DWP]
    assert len(templates) == 2 + len(kw["branches"]), templates  # y, n and one per branch
    if form == "lanes" or "6 channels" in case:
        assert set(dwp) == {DWP[2]}, templates
    elif form == "blocks":
        assert set(dwp) == {DWP[0]}, templates
    check_bounds(got, refs)


def _run_readers(ctx, kw):
    return _readers(ctx, **kw)


def test_strip_kernel_reader(ctx):
    """A tall layer with few channels runs on the strip kernel (lane-loop profile): its held
    rows are the relu's."""
    got, refs, templates = _readers(ctx, [(3, 1, 16), (3, 1, 8)], hw=96, c=16)
    if getattr(ctx, "_tuning", "") == "lane-loop":
        assert DWP[1] in templates, templates
    assert len(templates) == 4, templates  # y, n and one per branch
    check_bounds(got, refs)


def test_several_readers_float16(ctx):
    if "shader-f16" not in ctx.features:
        pytest.skip("no shader-f16")
    got, refs, templates = _readers(ctx, [(3, 1, 8), (5, 1, 0)], dtype=np.float16)
    assert len(templates) == 4, templates
    check_bounds(got, refs)


@pytest.mark.parametrize("kw", [dict(keep=True), dict(dense=True)], ids=["relu output", "a dense reader"])
def test_several_readers_near_misses_keep_the_relu(ctx, kw):
    """The relu also a graph output, or also read by a dense conv: it keeps its launch and no
    reader applies it (the readers' results are still right)."""
    branches = [(3, 1, 8), (3, 1, 0)]
    got, refs, templates = _readers(ctx, branches, **kw)
    assert len(templates) == 3 + len(branches) + kw.get("dense", 0), templates
    check_bounds(got, refs)


def test_the_knob_keeps_the_relu_for_fused_readers(ctx, monkeypatch):
    """WEBNN_GPU_FORCE_INPUT_RELU=depthwise: depthwise + projection readers keep the relu."""
    monkeypatch.setenv("WEBNN_GPU_FORCE_INPUT_RELU", "depthwise")
    got, refs, templates = _readers(ctx, [(3, 1, 8), (5, 1, 12)])
    assert len(templates) == 5, templates
    check_bounds(got, refs)


LOADS = {  # the input's load form in each fused kernel: (kwargs, environment, DWP_BLOCK_WORDS, relu'd load)
    "pixel blocks, words": (dict(hw=8, c=32), {"WEBNN_GPU_FORCE_DWP_FORM": "blocks"}, True, "max(up("),
    "channel lanes, vec4": (dict(hw=8, c=32), {"WEBNN_GPU_FORCE_DWP_FORM": "lanes",
                                               "WEBNN_GPU_FORCE_DWP_WORDS": "vec4"}, False, "max(vec4<f32>(x["),
    "strip, vec4": (dict(hw=96, c=16), {"WEBNN_GPU_FORCE_DWP_WORDS": "vec4"}, False, "max(vec4<f32>(x["),
}


@pytest.mark.parametrize("case", LOADS)
def test_each_load_form_applies_the_relu(ctx, monkeypatch, case):
    """The load forms the cases above do not reach on lavapipe (words in the pixel blocks, vec4s
    in the channel-lane and strip kernels) apply it too, and match float64 NumPy."""
    from webnn_gpu.ops import conv

    kw, env, block_words, load = LOADS[case]
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(conv, "DWP_BLOCK_WORDS", block_words)
    texts: list = []
    got, refs, templates = _readers(ctx, [(3, 1, 16), (3, 1, 8)], texts=texts, **kw)
    assert len(templates) == 4 and len(texts) == 2, templates
    if getattr(ctx, "_tuning", "") == "lane-loop" and "shader-int64" in ctx.features:
        assert all(load in t for t in texts), case
    check_bounds(got, refs)


@pytest.mark.parametrize("hw, c, form", [(32, 32, "lanes"), (96, 16, ""), (16, 16, "")],
                         ids=["channel lanes", "strip", "pixel blocks"])
def test_a_pre_activation_residual_keeps_its_relu(ctx, monkeypatch, hw, c, form):
    """``y = x + r; out = y + pw(dw3x3(relu(y)))``: the projection's residual is the relu's
    input. The depthwise + projection kernels take an operand that is their own input from the
    rows they hold, so with the relu applied on load they would add relu(y): the relu keeps its
    launch (before the fix: 3.96 off on the lanes and strip kernels). Against float64 NumPy,
    within ``16 u (9 + C)`` of the sum of the terms' magnitudes."""
    if form:
        monkeypatch.setenv("WEBNN_GPU_FORCE_DWP_FORM", form)
    rng = np.random.default_rng(hw + c)
    x, r = (rng.uniform(-2, 2, (1, hw, hw, c)).astype(np.float32) for _ in range(2))
    f = rng.uniform(-1, 1, (c, 3, 3, 1)).astype(np.float32)
    p = rng.uniform(-1, 1, (c, 1, 1, c)).astype(np.float32)
    b = webnn.MLGraphBuilder(ctx)
    desc = {"data_type": "float32", "shape": list(x.shape)}
    y = b.add(b.input("x", desc), b.input("r", desc))
    d = b.conv2d(b.relu(y), b.constant(f), padding=[1] * 4, groups=c, input_layout="nhwc", filter_layout="ohwi")
    out = b.add(b.conv2d(d, b.constant(p), input_layout="nhwc", filter_layout="ohwi"), y)
    graph = b.build({"out": out})
    templates = [s.template for s in graph._steps if isinstance(s, KernelStep)]
    got = ctx.compute(graph, {"x": x, "r": r})["out"].astype(np.float64)
    graph.destroy()
    assert len(templates) == 3, templates  # y, the relu, the depthwise + projection pair

    def block(y64, f64, p64):
        a = np.pad(np.maximum(y64, 0), ((0, 0), (1, 1), (1, 1), (0, 0)))
        dw = sum(a[:, i:i + hw, j:j + hw, :] * f64[:, i, j, 0] for i in range(3) for j in range(3))
        return np.einsum("nhwc,oc->nhwo", dw, p64[:, 0, 0, :]) + y64

    y64 = x.astype(np.float64) + r
    ref = block(y64, f.astype(np.float64), p.astype(np.float64))
    mag = block(np.abs(y64), np.abs(f.astype(np.float64)), np.abs(p.astype(np.float64)))
    assert np.all(np.abs(got - ref) <= 16 * U * (9 + c) * mag + U), np.abs(got - ref).max()
