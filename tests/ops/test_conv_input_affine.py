"""An affine of constants read only by a first-layer conv2d (the compiler's fuse_conv_input,
``attrs["input_affine"]``): the ``conv/block.wgsl`` launch applies it to each in-image value it
loads and the affine's own launch goes; the padded taps stay 0 (the padding of the affine's
output, not the affine of a zero). On the GPU against float64 NumPy: Keras' Rescaling (x * s +
b, scalars) with "same" padding and stride 2, an ONNX-style (x - m) / d per channel with explicit
padding, x * s and x + b alone, c - x, valid padding, 1 to 4 channels (vec4 and scalar row
loads), a filter that is a graph input (loaded, not baked), the one-row wide form, a batch of 2,
a relu6 epilogue, float16. Near misses run without it and are right: the affine also a graph
output, c / x (no affine), a grouped conv (not the block kernel).

Tolerance: the affine's steps each round (``2 u`` per step of the running bound ``M`` of
``|value|``, plus float16's rounding of a stand-alone affine's output), carried through the conv
by ``|f|``, plus the conv's own ``4 KH KW C u (|f| * (|y| + e) + |b|)`` and the output's
rounding (``u`` = 2**-24; 2**-11 for float16 values).
"""

from __future__ import annotations

import numpy as np
import pytest

import webnn_gpu as webnn
from webnn_gpu._lower import KernelStep
from helpers import check_bounds, same_padding
from references import ref_conv2d

U = 2.0**-24
RESCALE = [("mul", 1 / 127.5, False), ("add", -1.0, False)]
NORMALIZE = [("sub", [0.485, 0.456, 0.406], False), ("div", [0.229, 0.224, 0.225], False)]
NP = {"mul": np.multiply, "add": np.add, "sub": np.subtract, "div": np.divide}


def _nhwc(x, w, **kw):
    return ref_conv2d(x.transpose(0, 3, 1, 2), w.transpose(0, 3, 1, 2), **kw).transpose(0, 2, 3, 1)


def _run(ctx, *, chain=RESCALE, h=19, w=24, c=3, o=16, win=3, stride=2, pad=None, batch=1, dtype=np.float32,
         groups=1, constant=True, keep=False, relu6=False, lo=0.0, hi=255.0):
    """x -> chain of (op, constant, constant first) -> conv (bias) [-> relu6]; (outputs, refs,
    templates)."""
    rng = np.random.default_rng(h * 1000 + c * 10 + win)
    dt = np.dtype(dtype)
    x = rng.uniform(lo, hi, (batch, h, w, c)).astype(dt)
    f = rng.uniform(-1, 1, (o, win, win, c // groups)).astype(dt)
    bias = rng.uniform(-1, 1, o).astype(dt)
    if pad is None:
        pad = same_padding(h, win, stride)[:2] + same_padding(w, win, stride)[2:]
    b = webnn.MLGraphBuilder(ctx)
    desc = {"data_type": webnn._dtypes.from_numpy(dt), "shape": list(x.shape)}
    xi = b.input("x", desc)
    v = xi
    y64, mag, steps = x.astype(np.float64), np.abs(x.astype(np.float64)), 0
    for op, k, first in chain:
        k = np.asarray(k, dt)
        kc = b.constant(k.reshape(k.shape or (1,)))
        v = getattr(b, op)(kc, v) if first else getattr(b, op)(v, kc)
        k64 = k.astype(np.float64)
        y64 = NP[op](k64, y64) if first else NP[op](y64, k64)
        mag = mag / np.abs(k64) if op == "div" else (mag * np.abs(k64) if op == "mul" else mag + np.abs(k64))
        steps += 1
    fi = b.constant(f) if constant else b.input("f", {"data_type": desc["data_type"], "shape": list(f.shape)})
    z = b.conv2d(v, fi, bias=b.constant(bias), padding=list(pad), strides=[stride] * 2, groups=groups,
                 input_layout="nhwc", filter_layout="ohwi")
    if relu6:
        z = b.clamp(z, min_value=0.0, max_value=6.0)
    graph = b.build({"z": z, **({"y": v} if keep else {})})
    templates = [s.template for s in graph._steps if isinstance(s, KernelStep)]
    got = ctx.compute(graph, {"x": x, **({} if constant else {"f": f})})
    graph.destroy()

    rnd = 2.0**-11 if dt == np.float16 else U
    ea = (2 * steps * U + (rnd if dt == np.float16 else 0)) * mag
    f64, b64 = f.astype(np.float64), bias.astype(np.float64)
    kw = dict(padding=pad, strides=(stride, stride), dilations=(1, 1), groups=groups)
    z64 = _nhwc(y64, f64, **kw) + b64
    zabs = _nhwc(np.abs(y64) + ea, np.abs(f64), **kw) + np.abs(b64)
    k = win * win * (c // groups)
    ez = _nhwc(ea, np.abs(f64), **kw) + 4 * k * U * zabs + rnd * np.abs(z64) + 1e-30
    if relu6:
        z64 = np.clip(z64, 0, 6)
    refs = {"z": (z64, ez)}
    if keep:
        refs["y"] = (y64, ea + rnd * np.abs(y64) + 1e-30)
    return got, refs, templates


CASES = {
    "rescaling 19x24 3x3 stride 2 same": dict(),
    "normalize per channel 17x23 3x3 explicit padding": dict(chain=NORMALIZE, h=17, w=23, o=12, stride=1,
                                                             pad=(1, 1, 1, 1), lo=0.0, hi=1.0),
    "x * s per channel, 4 channels, 5x5 valid": dict(chain=[("mul", [0.5, -2.0, 1.5, 0.25], False)], h=9, w=11,
                                                     c=4, o=8, win=5, stride=1, pad=(0, 0, 0, 0), lo=-1.0, hi=1.0),
    "x + b, 1 channel, 7x7 stride 2 explicit": dict(chain=[("add", 0.75, False)], h=21, w=18, c=1, o=4, win=7,
                                                    pad=(3, 2, 1, 3), lo=-1.0, hi=1.0),
    "c - x and s * x, 2 channels": dict(chain=[("sub", [1.0, -2.0], True), ("mul", 0.5, True)], h=8, w=10, c=2,
                                        o=12, stride=1, pad=(1, 1, 1, 1), lo=-1.0, hi=1.0),
    "loaded filter": dict(constant=False),
    "wide 5x5 stride 2, 24 outputs": dict(h=17, w=22, o=24, win=5, pad=(1, 2, 1, 2)),
    "batch 2, relu6": dict(batch=2, h=12, w=12, relu6=True),
}


@pytest.mark.parametrize("case", CASES)
def test_the_affine_is_the_block_conv_s_prologue(ctx, case):
    got, refs, templates = _run(ctx, **CASES[case])
    assert [t for t in templates if t != "conv/permute.wgsl"] == ["conv/block.wgsl"], templates  # permute: a loaded filter
    check_bounds(got, refs)


def test_float16(ctx):
    if "shader-f16" not in ctx.features:
        pytest.skip("no shader-f16")
    for kw in (dict(), dict(chain=NORMALIZE, h=13, w=15, lo=0.0, hi=1.0, pad=(1, 1, 1, 1))):
        got, refs, templates = _run(ctx, dtype=np.float16, **kw)
        assert templates == ["conv/block.wgsl"], templates
        check_bounds(got, refs)


@pytest.mark.parametrize("kw", [dict(keep=True), dict(chain=[("div", 2.0, True)], lo=1.0, hi=2.0),
                                dict(c=4, groups=2, o=8)],
                         ids=["affine output", "c / x", "grouped"])
def test_near_misses_run_without_it(ctx, kw):
    got, refs, templates = _run(ctx, **kw)
    assert len(templates) == 2 and templates[0].startswith("elementwise/"), templates  # the affine keeps its launch
    check_bounds(got, refs)


def test_the_switch_keeps_the_affine_s_launch(ctx, monkeypatch):
    monkeypatch.setenv("WEBNN_GPU_FORCE_INPUT_AFFINE", "off")
    monkeypatch.setenv("WEBNN_GPU_PLAN_CACHE", "0")
    got, refs, templates = _run(ctx)
    assert templates == ["elementwise/map.wgsl", "conv/block.wgsl"], templates
    check_bounds(got, refs)


def test_an_nchw_graph_s_normalization(ctx):
    """An ONNX-style NCHW graph: (x - m) / d with m, d of shape [1, 3, 1, 1] before a 3x3 stride-2
    conv, a depthwise conv and a pointwise conv; the compiler runs the region in NHWC
    (nhwc_regions), the first conv on the block kernel with the affine. Bound: ``1e-5`` of the
    chain computed on magnitudes (|values|, |filters|), a few hundred float32 roundings."""
    rng = np.random.default_rng(7)
    x = rng.uniform(0, 1, (1, 3, 32, 32)).astype(np.float32)
    m, d = (np.array(v, np.float32).reshape(1, 3, 1, 1) for v in ([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]))
    fs = [rng.uniform(-1, 1, s).astype(np.float32) for s in ((16, 3, 3, 3), (16, 1, 3, 3), (8, 16, 1, 1))]
    b = webnn.MLGraphBuilder(ctx)
    xi = b.input("x", {"data_type": "float32", "shape": list(x.shape)})
    z = b.relu(b.conv2d(b.div(b.sub(xi, b.constant(m)), b.constant(d)), b.constant(fs[0]), padding=[1, 1, 1, 1],
                        strides=[2, 2]))
    z = b.relu(b.conv2d(z, b.constant(fs[1]), padding=[1, 1, 1, 1], groups=16))
    graph = b.build({"z": b.conv2d(z, b.constant(fs[2]))})
    templates = [s.template for s in graph._steps if isinstance(s, KernelStep)]
    got = ctx.compute(graph, {"x": x})
    graph.destroy()
    assert "conv/block.wgsl" in templates and not any(t.startswith("elementwise/") for t in templates), templates

    def chain(v, absolute):
        for f, kw in zip(fs, (dict(padding=(1, 1, 1, 1), strides=(2, 2)), dict(padding=(1, 1, 1, 1), groups=16), {})):
            v = ref_conv2d(v, np.abs(f.astype(np.float64)) if absolute else f.astype(np.float64), **kw)
            v = np.abs(v) if absolute else (np.maximum(v, 0) if f is not fs[2] else v)
        return v

    y64 = (x.astype(np.float64) - m) / d
    check_bounds(got, {"z": (chain(y64, False), 1e-5 * chain(np.abs(y64), True) + 1e-30)})


@pytest.mark.parametrize("op", ["mul", "div"])
def test_a_zero_multiplier_or_divisor_keeps_its_launch(ctx, op):
    """A multiplier or divisor of 0 is no literal for the kernel: the shader compilers simplify
    ``v * 0.0`` and ``v / 0.0`` as if no inf or NaN existed. With NaN and inf in the input the
    affine keeps its own launch and the result is IEEE's: NaN * 0 = NaN, inf * 0 = NaN,
    2 / 0 = inf (exact: the filter's one tap of weight 1 reads channel 0 at the window's center)."""
    x = np.full((1, 3, 3, 3), 2.0, np.float32)
    x[0, 1, 1, 0], x[0, 0, 1, 0], x[0, 1, 0, 0] = np.nan, np.inf, -np.inf
    k = np.array([0.0, 1.0, 1.0], np.float32)
    f = np.zeros((4, 3, 3, 3), np.float32)
    f[:, 1, 1, 0] = 1.0
    b = webnn.MLGraphBuilder(ctx)
    xi = b.input("x", {"data_type": "float32", "shape": list(x.shape)})
    y = getattr(b, op)(xi, b.constant(k))
    out = b.conv2d(y, b.constant(f), padding=[1, 1, 1, 1], input_layout="nhwc", filter_layout="ohwi")
    graph = b.build({"out": out})
    templates = [s.template for s in graph._steps if isinstance(s, KernelStep)]
    got = ctx.compute(graph, {"x": x})["out"]
    with np.errstate(divide="ignore", invalid="ignore"):
        want = np.repeat(getattr(np, {"mul": "multiply", "div": "divide"}[op])(x, k)[..., :1], 4, axis=3)
    assert templates[0].startswith("elementwise/"), templates
    np.testing.assert_array_equal(got, want)
