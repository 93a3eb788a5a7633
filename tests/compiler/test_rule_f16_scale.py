"""Float16 1x1 depthwise convs (a per-channel scale and shift: ``depthwise_to_scale`` rewrites
float32's) taken whole as two steps by ``fuse_epilogue`` and by a pool's map (``fuse_pool_map``,
the float16 pool kernel moving u64 words): on hand-made IR (no GPU), checked by a float64
evaluator of the IR, near misses included; and on the GPU against float64 NumPy within float16's
rounding."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from _ireval import checked_rewrite
from _irb import IR
from helpers import kernel_templates, run_graph

from webnn_gpu.compiler.rules.epilogue import EPILOGUE_MAX_STEPS, fuse_epilogue
from webnn_gpu.compiler.rules.pool import fuse_pool_map

C = 8
#: a context on the profile where the float16 pool kernel moves u64 words
WORDS = SimpleNamespace(_tuning="lane-loop", features=frozenset({"shader-int64"}), limits={})


def _conv3(ir, x):
    """A 3x3 NHWC conv2d, C -> C channels (an epilogue host)."""
    w = ir.const(np.linspace(-0.4, 0.4, C * 9 * x.shape[3]).reshape(C, 3, 3, x.shape[3]))
    return ir.op("conv2d", [x, w], x.shape[:3] + (C,), padding=[1] * 4, strides=[1, 1], dilations=[1, 1],
                 groups=1, input_layout="nhwc", filter_layout="ohwi")


def _scale(ir, x, *, layout="nhwc", bias=True, k=1, stride=1, const=True):
    """A depthwise conv2d of ``x`` (groups = channels), 1x1 unless ``k``."""
    n, h, w, c = x.shape if layout == "nhwc" else (x.shape[0], x.shape[2], x.shape[3], x.shape[1])
    wdata = np.linspace(-1.5, 1.5, c * k * k).reshape((c, k, k, 1) if layout == "nhwc" else (c, 1, k, k))
    f = ir.const(wdata) if const else ir.input(wdata.shape)
    ins = [x, f] + ([ir.const(np.linspace(-0.5, 0.7, c))] if bias else [])
    pad = (k - 1) // 2
    oh, ow = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
    return ir.op("conv2d", ins, (n, oh, ow, c) if layout == "nhwc" else (n, c, oh, ow), padding=[pad] * 4,
                 strides=[stride] * 2, dilations=[1, 1], groups=c, input_layout=layout,
                 filter_layout="ohwi" if layout == "nhwc" else "oihw")


def _ops(nodes):
    return [n.op for n in nodes]


@pytest.mark.parametrize("bias", [True, False])
def test_a_float16_scale_conv_is_two_steps_of_its_producers_epilogue(bias):
    ir = IR("float16")
    y = ir.op("neg", [_scale(ir, ir.op("relu", [_conv3(ir, ir.input((1, 5, 4, C)))]), bias=bias)])
    new = checked_rewrite(fuse_epilogue, ir, {"y": y}, rtol=1e-12, atol=1e-12)
    assert _ops(new) == ["conv2d"] and new[0].outputs == [y]
    steps = new[0].attrs["epilogue"]
    assert [s["op"] for s in steps] == ["relu", "mul"] + ["add"] * bias + ["neg"]
    assert all(s["axis"] == 3 and new[0].inputs[s["input"]].shape == (C,) for s in steps if "input" in s)


def test_an_nchw_scale_conv_reads_its_operands_at_the_channel():
    ir = IR("float16")
    x = ir.input((1, C, 5, 4))
    w = ir.const(np.linspace(-0.4, 0.4, C * C * 9).reshape(C, C, 3, 3))
    h = ir.op("conv2d", [x, w], (1, C, 5, 4), padding=[1] * 4, strides=[1, 1], dilations=[1, 1], groups=1,
              input_layout="nchw", filter_layout="oihw")
    y = _scale(ir, h, layout="nchw")
    new = checked_rewrite(fuse_epilogue, ir, {"y": y}, rtol=1e-12, atol=1e-12)
    assert _ops(new) == ["conv2d"] and [s["axis"] for s in new[0].attrs["epilogue"]] == [1, 1]


@pytest.mark.parametrize("case", ["3x3 window", "stride 2", "filter an input", "float32", "knob off"])
def test_near_misses_stay_a_conv(case, monkeypatch):
    ir = IR("float32" if case == "float32" else "float16")
    h = ir.op("relu", [_conv3(ir, ir.input((1, 6, 6, C)))])
    kw = {"3x3 window": dict(k=3), "stride 2": dict(stride=2), "filter an input": dict(const=False)}.get(case, {})
    if case == "knob off":
        monkeypatch.setenv("WEBNN_GPU_FORCE_SCALE_STEPS", "off")
    y = _scale(ir, h, **kw)
    new = checked_rewrite(fuse_epilogue, ir, {"y": y}, rtol=1e-12, atol=1e-12)
    assert _ops(new) == ["conv2d", "conv2d"], case
    assert [s["op"] for s in new[0].attrs["epilogue"]] == ["relu"], case


@pytest.mark.parametrize("room", ["steps", "operands"])
def test_with_room_for_one_of_its_two_steps_the_conv_stays(room):
    """Where the epilogue has room for the mul but not the add, neither is taken (the two steps
    are the conv's one rounding)."""
    ir = IR("float16")
    h = _conv3(ir, ir.input((1, 4, 4, C)))
    if room == "steps":  # unary steps up to one short of the most
        for _ in range(EPILOGUE_MAX_STEPS - 1):
            h = ir.op("relu", [h])
    else:  # three computed per-channel operands bound: the filter would be the fourth, the bias a fifth
        for _ in range(3):
            h = ir.op("mul", [h, ir.op("sigmoid", [ir.input((1, 1, 1, C))])])
    y = _scale(ir, h)
    new = checked_rewrite(fuse_epilogue, ir, {"y": y}, rtol=1e-12, atol=1e-12)
    assert new[-1].op == "conv2d" and new[-1].outputs == [y] and "epilogue" not in new[-1].attrs, room
    host = next(n for n in new if n.attrs.get("epilogue"))
    want = ["relu"] * (EPILOGUE_MAX_STEPS - 1) if room == "steps" else ["mul"] * 3
    assert [s["op"] for s in host.attrs["epilogue"]] == want, room


def test_a_float16_pool_stores_a_prelu_and_scale_conv_of_its_input():
    """BlazeBlock's ``prelu(x)`` then a 1x1 depthwise conv beside ``max_pool2d(x)``: the pool
    stores the chain as its map (prelu, mul, add) where the float16 pool kernel moves words."""
    ir = IR("float16")
    x = ir.op("relu", [ir.input((1, 8, 6, C))])
    p = ir.op("max_pool2d", [x], (1, 4, 3, C), window=[2, 2], padding=[0] * 4, strides=[2, 2], dilations=[1, 1],
              layout="nhwc")
    z = _scale(ir, ir.op("prelu", [x, ir.const(np.linspace(0.1, 0.4, C), (1, 1, C))]))
    outputs = {"p": ir.op("neg", [p]), "z": ir.op("transpose", [z], (1, C, 8, 6), permutation=[0, 3, 1, 2])}
    rule = lambda nodes, outs: fuse_pool_map(nodes, outs, WORDS)  # noqa: E731
    rule.__name__ = "fuse_pool_map"
    new = checked_rewrite(rule, ir, outputs, rtol=1e-12, atol=1e-12)
    assert _ops(new) == ["relu", "max_pool2d", "neg", "transpose"]
    assert new[1].outputs == [p, z] and [s["op"] for s in new[1].attrs["side"]] == ["prelu", "mul", "add"]
    # near misses: no words (another profile, or no shader-int64), a strided scale conv
    assert fuse_pool_map(list(ir.nodes), outputs) == ir.nodes
    no64 = SimpleNamespace(_tuning="lane-loop", features=frozenset(), limits={})
    assert fuse_pool_map(list(ir.nodes), outputs, no64) == ir.nodes
    ir = IR("float16")
    x = ir.op("relu", [ir.input((1, 8, 6, C))])
    p = ir.op("max_pool2d", [x], (1, 4, 3, C), window=[2, 2], padding=[0] * 4, strides=[2, 2], dilations=[1, 1],
              layout="nhwc")
    z = _scale(ir, ir.op("prelu", [x, ir.const(np.linspace(0.1, 0.4, C), (1, 1, C))]), stride=2)
    new = fuse_pool_map(list(ir.nodes), {"p": p, "z": z}, WORDS)
    assert [s["op"] for s in new[1].attrs["side"]] == ["prelu"] and new[2].op == "conv2d"


@pytest.mark.parametrize("reader", ["depthwise 3x3", "pointwise"])
def test_a_float16_output_map_of_a_relu_a_depthwise_conv_applies_is_left_to_it(reader):
    """A pool's output read by a residual branch and by a relu that only a depthwise conv reads
    (Keras Xception): no float16 output map (``fuse_conv_input_relu`` applies the relu as the conv
    loads, and the pool may go into the branch it adds); a relu read by a pointwise conv (which
    applies none) is the map."""
    ir = IR("float16")
    x = ir.op("relu", [ir.input((1, 8, 8, C))])
    p = ir.op("max_pool2d", [x], (1, 4, 4, C), window=[3, 3], padding=[1, 1, 1, 1], strides=[2, 2],
              dilations=[1, 1], layout="nhwc")
    r = ir.op("relu", [p])
    k = 3 if reader == "depthwise 3x3" else 1
    w = ir.const(np.linspace(-1, 1, C * k * k * (1 if k == 3 else C)).reshape((C, k, k, 1 if k == 3 else C)))
    y = ir.op("conv2d", [r, w], (1, 4, 4, C), padding=[k // 2] * 4, strides=[1, 1], dilations=[1, 1],
              groups=C if k == 3 else 1, input_layout="nhwc", filter_layout="ohwi")
    outputs = {"y": y, "q": ir.op("neg", [p])}
    new = fuse_pool_map(list(ir.nodes), outputs, WORDS)
    if reader == "depthwise 3x3":
        assert new == ir.nodes
    else:
        assert _ops(new) == ["relu", "max_pool2d", "conv2d", "neg"] and new[1].attrs["side_of"] == "output"


# ---------------------------------------------------------------- on the GPU
def _f16(a):
    return np.asarray(a, np.float16)


def test_on_the_gpu_a_float16_scale_conv_is_the_producers_epilogue(ctx, rng):
    """float16 NHWC conv2d 3x3 -> relu -> 1x1 depthwise conv (scale and bias): float64 NumPy's
    result (of the float16 data) within float16's rounding, in one kernel; the near miss, the
    1x1 depthwise conv with stride 2, stays a conv."""
    x = _f16(rng.standard_normal((1, 7, 6, 4)))
    w = _f16(rng.standard_normal((C, 3, 3, 4)) * 0.3)
    s, t = _f16(rng.standard_normal(C)), _f16(rng.standard_normal(C))

    def build(b, ops, stride=1):
        h = b.relu(b.conv2d(ops["x"], b.constant(w), padding=[1] * 4, input_layout="nhwc", filter_layout="ohwi"))
        d = b.conv2d(h, b.constant(s.reshape(C, 1, 1, 1)), bias=b.constant(t), groups=C, strides=[stride] * 2,
                     input_layout="nhwc", filter_layout="ohwi")
        return {"y": d}

    h = np.zeros((1, 7, 6, C))
    xp = np.pad(x.astype(np.float64), ((0, 0), (1, 1), (1, 1), (0, 0)))
    for i in range(3):
        for j in range(3):
            h += np.einsum("nhwc,oc->nhwo", xp[:, i:i + 7, j:j + 6], w[:, i, j].astype(np.float64))
    h = np.maximum(h, 0)
    want = h * s.astype(np.float64) + t.astype(np.float64)
    # the fused kernel keeps h in f32 (the unfused graph rounds it to float16: half an ulp of h, times s)
    tol = 2.0**-11 * (np.abs(want) + np.abs(h * s.astype(np.float64))) + 1e-3
    got = run_graph(ctx, build, {"x": x})["y"]
    assert got.dtype == np.float16 and np.all(np.abs(got.astype(np.float64) - want) <= tol)
    assert len(kernel_templates(ctx, build, {"x": x})) == 1
    got = run_graph(ctx, lambda b, o: build(b, o, 2), {"x": x})["y"]
    assert np.all(np.abs(got.astype(np.float64) - want[:, ::2, ::2]) <= tol[:, ::2, ::2])
    assert len(kernel_templates(ctx, lambda b, o: build(b, o, 2), {"x": x})) == 2


@pytest.mark.parametrize("shape", [(1, 8, 12, 8), (2, 6, 10, 12)])
def test_on_the_gpu_a_float16_pool_writes_the_map(ctx, rng, monkeypatch, shape):
    """float16 NHWC max pool 2x2/2 and prelu -> 1x1 depthwise conv of its input, both read by
    later ops: float64 NumPy's results within float16's rounding from one pool kernel (the
    pool's map off, ``WEBNN_GPU_FORCE_POOL=scalar``: the pool, the prelu and the conv)."""
    c = shape[3]
    x = _f16(rng.standard_normal(shape))
    slope = _f16(rng.uniform(0.05, 0.5, (1, 1, c)))
    s, t = _f16(rng.standard_normal(c)), _f16(rng.standard_normal(c))

    def build(b, ops):
        h = b.sub(ops["x"], b.constant(_f16(np.full((1,), 0.1))))
        p = b.max_pool2d(h, window_dimensions=[2, 2], strides=[2, 2], layout="nhwc")
        z = b.conv2d(b.prelu(h, b.constant(slope)), b.constant(s.reshape(c, 1, 1, 1)), bias=b.constant(t),
                     groups=c, input_layout="nhwc", filter_layout="ohwi")
        return {"p": b.abs(p), "z": z}

    h = (x.astype(np.float64) - np.float16(0.1)).astype(np.float16).astype(np.float64)  # the sub's rounding
    n, H, W, _ = shape
    want_p = np.abs(h.reshape(n, H // 2, 2, W // 2, 2, c).max(axis=(2, 4)))
    pr = np.where(h >= 0, h, h * slope.astype(np.float64))
    want_z = pr * s.astype(np.float64) + t.astype(np.float64)
    got = run_graph(ctx, build, {"x": x})
    np.testing.assert_array_equal(got["p"], want_p.astype(np.float16))
    tol = 2.0**-11 * (np.abs(want_z) + np.abs(pr * s.astype(np.float64))) + 1e-3
    assert np.all(np.abs(got["z"].astype(np.float64) - want_z) <= tol)
    assert kernel_templates(ctx, build, {"x": x}) == ["elementwise/map4.wgsl", "pool/pool2d_vec4.wgsl"]
    monkeypatch.setenv("WEBNN_GPU_FORCE_POOL", "scalar")
    assert len(kernel_templates(ctx, build, {"x": x})) == 4


def test_on_the_gpu_a_float16_pool_writes_the_map_of_its_output(ctx, rng):
    """A padded 3x3/2 float16 max pool, its output also a graph output, read by a prelu and a
    1x1 depthwise conv: the map computed from the rounded pooled value, one pool kernel (the neg
    before it another). Near miss: a relu after the conv, which the conv takes as its own
    epilogue first (``fuse_epilogue`` runs before ``fuse_pool_map``): the conv stays a kernel."""
    x = _f16(rng.standard_normal((1, 7, 9, 8)))
    slope = _f16(rng.uniform(0.05, 0.5, (8,)))
    s, t = _f16(rng.standard_normal(8)), _f16(rng.standard_normal(8))

    def build(b, ops, relu=False):
        p = b.max_pool2d(b.neg(ops["x"]), window_dimensions=[3, 3], strides=[2, 2], padding=[1, 1, 1, 1],
                         layout="nhwc")
        d = b.conv2d(b.prelu(p, b.constant(slope)), b.constant(s.reshape(8, 1, 1, 1)), bias=b.constant(t), groups=8,
                     input_layout="nhwc", filter_layout="ohwi")
        return {"p": p, "z": b.relu(d) if relu else d}

    xp = np.pad(-x.astype(np.float64), [(0, 0), (1, 1), (1, 1), (0, 0)], constant_values=-np.inf)
    want_p = np.stack([xp[:, i:i + 7:2, j:j + 9:2] for i in range(3) for j in range(3)]).max(0)
    pr = np.where(want_p >= 0, want_p, want_p * slope.astype(np.float64))
    want_z = pr * s.astype(np.float64) + t.astype(np.float64)
    tol = 2.0**-11 * (np.abs(want_z) + np.abs(pr * s.astype(np.float64))) + 1e-3
    for relu in (False, True):
        got = run_graph(ctx, lambda b, o: build(b, o, relu), {"x": x})
        np.testing.assert_array_equal(got["p"], want_p.astype(np.float16))
        want = np.maximum(want_z, 0) if relu else want_z
        assert np.all(np.abs(got["z"].astype(np.float64) - want) <= tol), relu
    assert kernel_templates(ctx, build, {"x": x}) == ["elementwise/map4.wgsl", "pool/pool2d_vec4.wgsl"]
    assert len(kernel_templates(ctx, lambda b, o: build(b, o, True), {"x": x})) == 3
