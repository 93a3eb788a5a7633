"""A pointwise conv and the depthwise conv after it on a small image (the compiler's
fuse_pw_depthwise): one ``conv/pw_depthwise.wgsl`` launch. On the GPU against float64 NumPy:
3x3 and 5x5 windows, stride 2 with "same" padding (asymmetric), valid padding, dilation 2, a
batch of 2, a residual add and PReLU in the pointwise conv's epilogue, the pointwise output also
a graph output (stored too, with the switch on), float16 (with the switch on), channel vec4s per workgroup that do
not divide the workgroup; near misses (channels not a multiple of 4, an image past the limit)
run without it, also right.

Tolerance: the pointwise output's bound ``4 K u (|x| @ |w1| + |b1|)`` plus its rounding to the
data type (``u`` 2**-24; the float16 rounding 2**-11), carried through the depthwise conv by
``|f|``, plus the depthwise conv's own ``4 KH KW u (|f| * (|h| + bound) + |b2|)`` and the
output's rounding (activations are 1-Lipschitz).
"""

from __future__ import annotations

import numpy as np
import pytest

import webnn_gpu as webnn
from webnn_gpu._lower import KernelStep
from helpers import check_bounds, same_padding
from references import ref_conv2d

U = 2.0**-24


def _nhwc(fn, x, w, **kw):
    """``ref_conv2d`` on NHWC ``x`` and OHWI ``w`` (float64), NHWC out."""
    return fn(x.transpose(0, 3, 1, 2), w.transpose(0, 3, 1, 2), **kw).transpose(0, 2, 3, 1)


def _run(ctx, *, hw=12, k=16, n=32, win=3, stride=1, pad=None, dil=1, batch=1, dtype=np.float32,
         residual=False, prelu=False, keep=False):
    """Build x -> 1x1 conv (bias, relu6 or prelu, maybe + residual) -> depthwise conv (bias, relu),
    run it; (outputs, float64 references with their bounds, kernel templates)."""
    rng = np.random.default_rng(hw * 1000 + k * 10 + n)
    dt = np.dtype(dtype)
    x = rng.uniform(-2, 2, (batch, hw, hw, k)).astype(dt)
    w1 = rng.uniform(-1, 1, (n, 1, 1, k)).astype(dt)
    b1 = rng.uniform(-1, 1, n).astype(dt)
    f = rng.uniform(-1, 1, (n, win, win, 1)).astype(dt)
    b2 = rng.uniform(-1, 1, n).astype(dt)
    r = rng.uniform(-1, 1, (batch, hw, hw, n)).astype(dt)
    slope = rng.uniform(0, 1, n).astype(dt)
    if pad is None:
        pad = same_padding(hw, win, stride, dil)
    b = webnn.MLGraphBuilder(ctx)
    desc = {"data_type": webnn._dtypes.from_numpy(dt), "shape": list(x.shape)}
    xi = b.input("x", desc)
    h = b.conv2d(xi, b.constant(w1), bias=b.constant(b1), input_layout="nhwc", filter_layout="ohwi")
    h = b.prelu(h, b.constant(slope)) if prelu else b.clamp(h, min_value=0.0, max_value=6.0)
    if residual:
        h = b.add(h, b.input("r", {**desc, "shape": list(r.shape)}))
    y = b.relu(b.conv2d(h, b.constant(f), bias=b.constant(b2), padding=list(pad), strides=[stride] * 2,
                        dilations=[dil] * 2, groups=n, input_layout="nhwc", filter_layout="ohwi"))
    graph = b.build({"y": y, **({"h": h} if keep else {})})
    templates = [s.template for s in graph._steps if isinstance(s, KernelStep)]
    feeds = {"x": x, **({"r": r} if residual else {})}
    got = ctx.compute(graph, feeds)
    graph.destroy()

    f64 = {a: v.astype(np.float64) for a, v in dict(x=x, w1=w1, b1=b1, f=f, b2=b2, r=r, slope=slope).items()}
    h64 = _nhwc(ref_conv2d, f64["x"], f64["w1"]) + f64["b1"]
    habs = _nhwc(ref_conv2d, np.abs(f64["x"]), np.abs(f64["w1"])) + np.abs(f64["b1"])
    h64 = np.where(h64 >= 0, h64, h64 * f64["slope"]) if prelu else np.clip(h64, 0, 6)
    if residual:
        h64, habs = h64 + f64["r"], habs + np.abs(f64["r"])
    rnd = 2.0**-11 if dt == np.float16 else U
    eh = 4 * k * U * habs + rnd * np.abs(h64) + (U * np.abs(h64) if residual else 0)
    dwk = dict(padding=pad, strides=(stride, stride), dilations=(dil, dil), groups=n)
    y64 = np.maximum(_nhwc(ref_conv2d, h64, f64["f"], **dwk) + f64["b2"], 0)
    yabs = _nhwc(ref_conv2d, np.abs(h64) + eh, np.abs(f64["f"]), **dwk) + np.abs(f64["b2"])
    ey = _nhwc(ref_conv2d, eh, np.abs(f64["f"]), **dwk) + 4 * win * win * U * yabs + rnd * np.abs(y64) + 1e-30
    refs = {"y": (y64, ey), **({"h": (h64, eh + 1e-30)} if keep else {})}
    return got, refs, templates


CASES = {
    "12x12 3x3": dict(),
    "14x14 5x5 stride 2 same": dict(hw=14, k=24, n=64, win=5, stride=2),
    "14x14 3x3 valid": dict(hw=14, pad=(0, 0, 0, 0)),
    "9x9 3x3 dilation 2": dict(hw=9, k=8, n=24, dil=2),
    "7x7 5x5 wide": dict(hw=7, k=40, n=96, win=5),
    "6x6 batch 2 prelu": dict(hw=6, k=32, n=48, batch=2, prelu=True),
    "10x10 residual": dict(hw=10, residual=True),
    "13x13 3x3 stride 2, 20 channels": dict(hw=13, k=48, n=20, stride=2),
}


@pytest.mark.parametrize("case", CASES)
def test_pw_depthwise_is_one_launch_and_right(ctx, case):
    got, refs, templates = _run(ctx, **CASES[case])
    assert templates == ["conv/pw_depthwise.wgsl"], templates
    check_bounds(got, refs)


def test_float16(ctx, monkeypatch):
    if "shader-f16" not in ctx.features:
        pytest.skip("no shader-f16")
    got, refs, templates = _run(ctx, dtype=np.float16)  # not by default (PWDW_TYPES), right either way
    assert "conv/pw_depthwise.wgsl" not in templates
    check_bounds(got, refs)
    monkeypatch.setenv("WEBNN_GPU_FORCE_PWDW", "on")
    for kw in (dict(), dict(hw=7, k=16, n=40, win=5)):
        got, refs, templates = _run(ctx, dtype=np.float16, **kw)
        assert templates == ["conv/pw_depthwise.wgsl"], templates
        check_bounds(got, refs)


def test_the_pointwise_output_read_elsewhere_is_stored_too(ctx, monkeypatch):
    got, refs, templates = _run(ctx, keep=True)  # not fused by default (PWDW_KEEP), right either way
    assert "conv/pw_depthwise.wgsl" not in templates
    check_bounds(got, refs)
    monkeypatch.setenv("WEBNN_GPU_FORCE_PWDW", "on")
    got, refs, templates = _run(ctx, keep=True, residual=True)
    assert templates == ["conv/pw_depthwise.wgsl"], templates
    check_bounds(got, refs)


@pytest.mark.parametrize("kw", [dict(k=6, n=32), dict(k=16, n=30), dict(hw=15)], ids=["k6", "n30", "15x15"])
def test_near_misses_run_without_it(ctx, kw):
    got, refs, templates = _run(ctx, **kw)
    assert "conv/pw_depthwise.wgsl" not in templates, templates
    check_bounds(got, refs)


@pytest.mark.parametrize("case", ["12x12 3x3", "13x13 3x3 stride 2, 20 channels", "10x10 residual"])
def test_vec4_stores_without_words(ctx, monkeypatch, case):
    """With the tile kernel's u64 words off (``WEBNN_GPU_FORCE_TILE_WORDS=vec4``, as on a device
    without shader-int64 or off the "lane-loop" profile) the kernel stores vec4s: the same values."""
    monkeypatch.setenv("WEBNN_GPU_FORCE_TILE_WORDS", "vec4")
    got, refs, templates = _run(ctx, **CASES[case])
    assert templates == ["conv/pw_depthwise.wgsl"], templates
    check_bounds(got, refs)
    monkeypatch.setenv("WEBNN_GPU_FORCE_PWDW", "on")
    got, refs, templates = _run(ctx, keep=True, residual=True)
    assert templates == ["conv/pw_depthwise.wgsl"], templates
    check_bounds(got, refs)
