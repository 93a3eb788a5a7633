"""The canonical-form rules (``depthwise_to_scale``, ``mean_to_pool``, ``merge_duplicates``,
``sink_reshapes``, ``merge_reshapes``): on hand-made IR (no GPU), checked by a float64 evaluator of the IR, near
misses included; and on the GPU against float64 NumPy, with the kernels they save."""

from __future__ import annotations

import numpy as np
import pytest
from _ireval import checked_rewrite
from _irb import IR
from helpers import kernel_templates, run_graph

from webnn_gpu.compiler.rules.canonical import (depthwise_to_scale, mean_to_pool, merge_duplicates, merge_reshapes,
                                               sink_reshapes)

C = 6


def _dw(ir, x, *, layout="nhwc", k=1, mult=1, bias=True, stride=1, pad=0, const=True, fused=None):
    """A depthwise conv2d of ``x`` (groups = channels) as the builder records it."""
    n, h, w, c = x.shape if layout == "nhwc" else (x.shape[0], x.shape[2], x.shape[3], x.shape[1])
    o = c * mult
    wdata = np.linspace(-1.5, 1.5, o * k * k).reshape((o, k, k, 1) if layout == "nhwc" else (o, 1, k, k))
    f = ir.const(wdata) if const else ir.input(wdata.shape)
    ins = [x, f] + ([ir.const(np.linspace(-0.5, 0.7, o))] if bias else [])
    oh, ow = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
    attrs = dict(padding=[pad] * 4, strides=[stride] * 2, dilations=[1, 1], groups=c, input_layout=layout,
                 filter_layout="ohwi" if layout == "nhwc" else "oihw")
    if fused:
        attrs.update(fused)
    return ir.op("conv2d", ins, (n, oh, ow, o) if layout == "nhwc" else (n, o, oh, ow), **attrs)


# ---------------------------------------------------------------- depthwise_to_scale
@pytest.mark.parametrize("layout,bias", [("nhwc", True), ("nchw", True), ("nhwc", False)])
def test_a_1x1_depthwise_conv_becomes_a_per_channel_mul_and_add(layout, bias):
    ir = IR()
    x = ir.input((1, 5, 4, C) if layout == "nhwc" else (1, C, 5, 4))
    y = ir.op("relu", [_dw(ir, ir.op("sigmoid", [x]), layout=layout, bias=bias)])
    new = checked_rewrite(depthwise_to_scale, ir, {"y": y}, rtol=1e-12, atol=1e-12)
    assert [n.op for n in new] == ["sigmoid", "mul"] + ["add"] * bias + ["relu"]
    assert new[1].inputs[1].shape == ((1, 1, 1, C) if layout == "nhwc" else (1, C, 1, 1))


@pytest.mark.parametrize("case", ["3x3 window", "channel multiplier 2", "stride 2", "padding", "filter an input",
                                  "has an epilogue", "float16", "grouped, not depthwise"])
def test_near_misses_stay_a_conv(case):
    ir = IR("float16" if case == "float16" else "float32")
    x = ir.input((1, 5, 5, C))
    kw = {"3x3 window": dict(k=3, pad=1), "channel multiplier 2": dict(mult=2), "stride 2": dict(stride=2),
          "padding": dict(pad=1), "filter an input": dict(const=False),
          "has an epilogue": dict(fused={"epilogue": [{"op": "relu"}]})}.get(case, {})
    if case == "grouped, not depthwise":
        f = ir.const(np.ones((C, 1, 1, 2)))
        y = ir.op("conv2d", [x, f], x.shape, padding=[0] * 4, strides=[1, 1], dilations=[1, 1], groups=C // 2,
                  input_layout="nhwc", filter_layout="ohwi")
    else:
        y = _dw(ir, x, **kw)
    assert depthwise_to_scale(list(ir.nodes), {"y": y}) == ir.nodes


# ---------------------------------------------------------------- mean_to_pool
@pytest.mark.parametrize("axes,keep", [([1, 2], True), ([2, 1], False), ([2, 3], True), ([-2, -1], False)])
def test_a_spatial_mean_becomes_a_global_average_pool(axes, keep):
    ir = IR()
    x = ir.input((2, 5, 4, C))
    h = ir.op("relu", [x])
    red = sorted(a % 4 for a in axes)
    shape = tuple(1 if d in red else s for d, s in enumerate(x.shape))
    y = ir.op("reduce_mean", [h], shape if keep else tuple(s for d, s in enumerate(x.shape) if d not in red),
              axes=axes, keep=keep)
    new = checked_rewrite(mean_to_pool, ir, {"y": y}, rtol=1e-12, atol=1e-12)
    assert [n.op for n in new] == ["relu", "average_pool2d"] + ["reshape"] * (not keep)
    assert new[1].attrs["layout"] == ("nhwc" if red == [1, 2] else "nchw")


@pytest.mark.parametrize("case", ["channel axis", "one spatial axis", "3-D", "int32"])
def test_other_means_stay_reductions(case):
    ir = IR("int32" if case == "int32" else "float32")
    x = ir.input((1, 4, 6) if case == "3-D" else (1, 5, 4, C))
    axes = {"channel axis": [3], "one spatial axis": [1], "3-D": [1, 2]}.get(case, [1, 2])
    y = ir.mean(x, axes)
    assert mean_to_pool(list(ir.nodes), {"y": y}) == ir.nodes


# ---------------------------------------------------------------- merge_duplicates
def _max_pool(ir, x, strides=(2, 2)):
    n, h, w, c = x.shape
    return ir.op("max_pool2d", [x], (n, (h - 2) // strides[0] + 1, (w - 2) // strides[1] + 1, c), window=[2, 2],
                 padding=[0, 0, 0, 0], strides=list(strides), dilations=[1, 1], layout="nhwc")


def test_the_same_pool_of_the_same_value_is_computed_once():
    ir = IR()
    x = ir.op("relu", [ir.input((1, 6, 6, C))])
    a, b = _max_pool(ir, x), _max_pool(ir, x)
    y = ir.op("add", [ir.op("neg", [a]), ir.op("sigmoid", [b])])
    new = checked_rewrite(merge_duplicates, ir, {"y": y}, rtol=0, atol=0)
    assert [n.op for n in new] == ["relu", "max_pool2d", "neg", "sigmoid", "add"]
    assert new[3].inputs[0] is a


@pytest.mark.parametrize("case", ["other strides", "other operand", "output", "array attribute"])
def test_near_misses_are_computed_twice(case):
    ir = IR()
    x = ir.op("relu", [ir.input((1, 6, 6, C))])
    a = _max_pool(ir, x)
    if case == "other strides":
        b = _max_pool(ir, x, strides=(1, 1))
        b = ir.op("max_pool2d", [b], a.shape, window=[1, 1], padding=[0] * 4, strides=[2, 2], dilations=[1, 1],
                  layout="nhwc")
    elif case == "other operand":
        b = _max_pool(ir, ir.op("neg", [x]))
    else:
        b = _max_pool(ir, x)
    if case == "array attribute":
        for n in ir.nodes[1:3]:
            n.attrs["table"] = np.ones(2)  # (plain data only: an array is not compared)
    y = ir.op("add", [a, b])
    outputs = {"y": y, "b": b} if case == "output" else {"y": y}
    assert merge_duplicates(list(ir.nodes), outputs) == ir.nodes


# ---------------------------------------------------------------- on the GPU
def test_on_the_gpu_a_1x1_depthwise_conv_is_the_producers_epilogue(ctx, rng):
    """NHWC conv2d 3x3 -> 1x1 depthwise conv (scale and bias) -> relu: float64 NumPy's result
    in one kernel; and the near miss, a 1x1 depthwise conv with stride 2, stays a conv."""
    x = rng.standard_normal((1, 7, 6, 4)).astype(np.float32)
    w = (rng.standard_normal((C, 3, 3, 4)) * 0.3).astype(np.float32)
    s, t = rng.standard_normal(C).astype(np.float32), rng.standard_normal(C).astype(np.float32)

    def build(b, ops, stride=1):
        h = b.conv2d(ops["x"], b.constant(w), padding=[1] * 4, input_layout="nhwc", filter_layout="ohwi")
        d = b.conv2d(h, b.constant(s.reshape(C, 1, 1, 1)), bias=b.constant(t), groups=C, strides=[stride] * 2,
                     input_layout="nhwc", filter_layout="ohwi")
        return {"y": b.relu(d)}

    h = np.zeros((1, 7, 6, C))
    xp = np.pad(x.astype(np.float64), ((0, 0), (1, 1), (1, 1), (0, 0)))
    for i in range(3):
        for j in range(3):
            h += np.einsum("nhwc,oc->nhwo", xp[:, i:i + 7, j:j + 6], w[:, i, j].astype(np.float64))
    want = np.maximum(h * s + t, 0)
    np.testing.assert_allclose(run_graph(ctx, build, {"x": x})["y"], want, rtol=1e-5, atol=1e-5)
    assert len(kernel_templates(ctx, build, {"x": x})) == 1
    got = run_graph(ctx, lambda b, o: build(b, o, 2), {"x": x})["y"]
    np.testing.assert_allclose(got, want[:, ::2, ::2], rtol=1e-5, atol=1e-5)
    assert len(kernel_templates(ctx, lambda b, o: build(b, o, 2), {"x": x})) == 2


def test_on_the_gpu_a_spatial_mean_of_a_sum_is_one_pool(ctx, rng):
    """reduce_mean over H and W of an NHWC sum (a skip add): float64 NumPy's result; the add is
    summed by the reduction as it loads (no element-wise kernel); a mean over the channels
    stays a reduction of its own."""
    a = rng.standard_normal((1, 9, 8, 16)).astype(np.float32)
    b2 = rng.standard_normal((1, 9, 8, 16)).astype(np.float32)

    def build(b, ops):
        s = b.add(ops["a"], ops["b"])
        return {"y": b.reduce_mean(s, axes=[1, 2]), "z": b.reduce_mean(b.relu(ops["a"]), axes=[3],
                                                                       keep_dimensions=True)}

    got = run_graph(ctx, build, {"a": a, "b": b2})
    s = a.astype(np.float64) + b2
    np.testing.assert_allclose(got["y"], s.mean(axis=(1, 2)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got["z"], np.maximum(a.astype(np.float64), 0).mean(axis=3, keepdims=True),
                               rtol=1e-5, atol=1e-6)
    assert not any(t.startswith("elementwise/") and "add" in t for t in kernel_templates(ctx, build, {"a": a, "b": b2}))


def test_on_the_gpu_a_pool_computed_twice_runs_once(ctx, rng):
    """Two identical max pools of one value (and one with other strides, the near miss):
    float64 NumPy's result, one pool kernel fewer."""
    x = rng.standard_normal((1, 8, 8, C)).astype(np.float32)

    def build(b, ops):
        p1 = b.max_pool2d(ops["x"], window_dimensions=[2, 2], strides=[2, 2], layout="nhwc")
        p2 = b.max_pool2d(ops["x"], window_dimensions=[2, 2], strides=[2, 2], layout="nhwc")
        p3 = b.max_pool2d(ops["x"], window_dimensions=[2, 2], strides=[1, 1], layout="nhwc")
        return {"y": b.sub(b.relu(p1), b.sigmoid(p2)), "z": p3}

    got = run_graph(ctx, build, {"x": x})
    xd = x.astype(np.float64)
    p = np.max([xd[:, i::2, j::2] for i in range(2) for j in range(2)], axis=0)
    np.testing.assert_allclose(got["y"], np.maximum(p, 0) - 1 / (1 + np.exp(-p)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got["z"], np.max([xd[:, i:i + 7, j:j + 7] for i in range(2) for j in range(2)], axis=0))
    assert kernel_templates(ctx, build, {"x": x}).count("pool/pool2d.wgsl") == 2


# ---------------------------------------------------------------- sink_reshapes
def _conv_reshape(ir):
    """NHWC 1x1 conv2d -> reshape [1, H * W, C] (a fully connected layer's unflatten)."""
    x = ir.input((1, 3, 4, C))
    h = ir.conv(x, ir.filt(C, 1, C))
    return h, ir.op("reshape", [h], (1, 12, C))


def test_element_wise_ops_after_a_reshape_move_before_it():
    """relu, a residual of the reshaped shape (read through a view) and a per-channel bias (the
    trailing axis the reshape keeps) run on the conv's shape; one reshape at the end."""
    ir = IR()
    h, r = _conv_reshape(ir)
    res = ir.input((1, 12, C))
    y = ir.op("add", [ir.op("add", [ir.op("relu", [r]), res]), ir.const(np.linspace(-1, 1, C))])
    new = checked_rewrite(sink_reshapes, ir, {"y": y}, rtol=0, atol=0)
    assert [n.op for n in new] == ["conv2d", "relu", "reshape", "add", "add", "reshape"]
    assert all(tuple(n.outputs[0].shape) == (1, 3, 4, C) for n in new[1:-1] if n.op != "reshape")
    assert new[2].inputs == [res] and new[-1].outputs == [y]


@pytest.mark.parametrize("case", ["reshape read elsewhere", "reshape an output", "operand across changed axes",
                                  "producer an input", "reshape read twice"])
def test_near_misses_keep_the_reshape_first(case):
    ir = IR()
    if case == "producer an input":
        h = ir.input((1, 3, 4, C))
        r = ir.op("reshape", [h], (1, 12, C))
    else:
        h, r = _conv_reshape(ir)
    outputs = {}
    if case == "operand across changed axes":
        y = ir.op("mul", [r, ir.const(np.linspace(1, 2, 12).reshape(1, 12, 1))])
    elif case == "reshape read twice":
        y = ir.op("mul", [r, r])
    else:
        y = ir.op("relu", [r])
    if case == "reshape read elsewhere":
        outputs["z"] = ir.op("neg", [r])
    elif case == "reshape an output":
        outputs["r"] = r
    outputs["y"] = y
    assert sink_reshapes(list(ir.nodes), outputs) == ir.nodes


def test_on_the_gpu_ops_after_a_reshape_are_the_convs_epilogue(ctx, rng):
    """NHWC 1x1 conv2d -> reshape [1, H * W, C] -> gelu -> add a residual: float64 NumPy's
    result in one kernel (the element-wise ops ran as a kernel of their own behind the view)."""
    from math import erf

    x = rng.standard_normal((1, 3, 4, 5)).astype(np.float32)
    w = (rng.standard_normal((8, 1, 1, 5)) * 0.5).astype(np.float32)
    res = rng.standard_normal((1, 12, 8)).astype(np.float32)

    def build(b, ops):
        h = b.conv2d(ops["x"], b.constant(w), input_layout="nhwc", filter_layout="ohwi")
        return {"y": b.add(b.gelu(b.reshape(h, [1, 12, 8])), ops["r"])}

    h = np.einsum("nhwc,oc->nhwo", x.astype(np.float64), w[:, 0, 0].astype(np.float64)).reshape(1, 12, 8)
    want = 0.5 * h * (1 + np.vectorize(erf)(h / np.sqrt(2))) + res
    np.testing.assert_allclose(run_graph(ctx, build, {"x": x, "r": res})["y"], want, rtol=1e-5, atol=1e-5)
    assert len(kernel_templates(ctx, build, {"x": x, "r": res})) == 1


# ---------------------------------------------------------------- merge_reshapes
def _pool_reshapes(ir, back=(1, 1, 1, C)):
    """A global pool of an NHWC conv's output as mean_to_pool leaves Keras' pooling: the pool,
    a reshape to [1, C] (the MEAN's dropped axes), then the graph's reshape to ``back``."""
    h = ir.conv(ir.input((1, 4, 5, C)), ir.filt(C, 1, C))
    flat = ir.op("reshape", [ir.pool(h)], (1, C), alias=True)
    return h, flat, ir.op("reshape", [flat], back, alias=True)


def test_a_reshape_of_a_reshape_back_to_the_shape_is_the_value_itself():
    """pool -> [1, C] -> [1, 1, 1, C] -> 1x1 conv: the conv reads the pool; both reshapes go."""
    ir = IR()
    _, _, r = _pool_reshapes(ir)
    y = ir.conv(r, ir.filt(4, 1, C))
    new = checked_rewrite(merge_reshapes, ir, {"y": y}, rtol=0, atol=0)
    assert [n.op for n in new] == ["conv2d", "average_pool2d", "conv2d"]
    assert new[2].inputs[0] is new[1].outputs[0]


def test_a_chain_of_reshapes_is_one_reshape_and_keeps_what_else_reads():
    """[1, C] -> [C] -> [C, 1] -> [1, 1, C]: one reshape from the pool; the middle one, also a
    graph output, stays for that output (nothing else reads it through the chain)."""
    ir = IR()
    h = ir.conv(ir.input((1, 4, 5, C)), ir.filt(C, 1, C))
    a = ir.op("reshape", [ir.pool(h)], (1, C), alias=True)
    b = ir.op("reshape", [a], (C,), alias=True)
    c = ir.op("reshape", [b], (C, 1), alias=True)
    d = ir.op("reshape", [c], (1, 1, C), alias=True)
    y = ir.op("relu", [d])
    new = checked_rewrite(merge_reshapes, ir, {"y": y, "b": b}, rtol=0, atol=0)
    pool = new[1].outputs[0]
    reshapes = [n for n in new if n.op == "reshape"]
    assert [tuple(n.outputs[0].shape) for n in reshapes] == [(C,), (1, 1, C)]
    assert all(n.inputs[0] is pool for n in reshapes)
    assert new[-1].inputs[0] is d


@pytest.mark.parametrize("case", ["an output", "a view a rule marked", "another op between", "a new shape",
                                  "read twice"])
def test_near_misses_keep_their_reshapes(case):
    """An identity reshape that is a graph output stays; a reshape a rule marked as an operand's
    view is not merged; an op between two reshapes keeps both; a chain to another shape is one
    reshape (still a reshape); a reshape read by two nodes is merged for both."""
    ir = IR()
    if case == "an output":
        _, _, r = _pool_reshapes(ir)
        outputs = {"r": r, "y": ir.op("relu", [r])}
        new = checked_rewrite(merge_reshapes, ir, outputs, rtol=0, atol=0)
        assert new[-2].op == "reshape" and new[-2].outputs[0] is r and new[-2].inputs[0] is new[1].outputs[0]
        assert new[-1].inputs[0] is r
        return
    if case == "a view a rule marked":
        h = ir.conv(ir.input((1, 4, 5, C)), ir.filt(C, 1, C))
        a = ir.op("reshape", [h], (1, 20, C), operand_view=True)
        y = ir.op("relu", [ir.op("reshape", [a], (1, 4, 5, C), alias=True)])
        assert merge_reshapes(list(ir.nodes), {"y": y}) == ir.nodes
        return
    if case == "another op between":
        h = ir.conv(ir.input((1, 4, 5, C)), ir.filt(C, 1, C))
        a = ir.op("relu", [ir.op("reshape", [h], (1, 20, C), alias=True)])
        y = ir.op("reshape", [a], (1, 4, 5, C), alias=True)
        assert merge_reshapes(list(ir.nodes), {"y": y}) == ir.nodes
        return
    if case == "a new shape":
        _, _, r = _pool_reshapes(ir, back=(1, C, 1, 1))
        y = ir.op("relu", [r])
        new = checked_rewrite(merge_reshapes, ir, {"y": y}, rtol=0, atol=0)
        assert [n.op for n in new] == ["conv2d", "average_pool2d", "reshape", "relu"]
        assert new[2].inputs[0] is new[1].outputs[0] and new[2].outputs[0] is r
        return
    _, _, r = _pool_reshapes(ir)
    y = ir.op("add", [ir.op("relu", [r]), ir.op("sigmoid", [r])])
    new = checked_rewrite(merge_reshapes, ir, {"y": y}, rtol=0, atol=0)
    assert [n.op for n in new] == ["conv2d", "average_pool2d", "relu", "sigmoid", "add"]


def test_on_the_gpu_keras_squeeze_excite_takes_the_depthwise_partial_sums(ctx, rng):
    """Keras' squeeze-and-excite as TFLite writes it (depthwise conv, MEAN without keeping the
    axes, RESHAPE back to a pixel, 1x1 conv + relu, 1x1 conv + sigmoid, mul): float64 NumPy's
    result, and the means come from the depthwise kernel's partial sums inside the excitation's
    kernel (no column reduction of their own)."""
    Cs, R = 16, 4
    x = rng.standard_normal((1, 12, 10, Cs)).astype(np.float32)
    wd = (rng.standard_normal((1, 3, 3, Cs)) * 0.3).astype(np.float32)
    w1 = (rng.standard_normal((R, 1, 1, Cs)) * 0.3).astype(np.float32)
    b1 = rng.standard_normal(R).astype(np.float32)
    w2 = (rng.standard_normal((Cs, 1, 1, R)) * 0.3).astype(np.float32)
    b2 = rng.standard_normal(Cs).astype(np.float32)

    def build(b, ops):
        v = b.relu(b.conv2d(ops["x"], b.constant(wd), input_layout="nhwc", filter_layout="ihwo", groups=Cs,
                            padding=[1, 1, 1, 1]))
        p = b.reshape(b.reduce_mean(v, axes=[1, 2]), [1, 1, 1, Cs])
        h = b.relu(b.conv2d(p, b.constant(w1), input_layout="nhwc", filter_layout="ohwi", bias=b.constant(b1)))
        s = b.sigmoid(b.conv2d(h, b.constant(w2), input_layout="nhwc", filter_layout="ohwi", bias=b.constant(b2)))
        return {"y": b.mul(v, s)}

    xd = np.pad(x.astype(np.float64), ((0, 0), (1, 1), (1, 1), (0, 0)))
    v = np.maximum(sum(xd[:, i:i + 12, j:j + 10] * wd[0, i, j].astype(np.float64)
                       for i in range(3) for j in range(3)), 0)
    h = np.maximum(w1[:, 0, 0].astype(np.float64) @ v.mean(axis=(1, 2))[0] + b1, 0)
    s = 1 / (1 + np.exp(-(w2[:, 0, 0].astype(np.float64) @ h + b2)))
    np.testing.assert_allclose(run_graph(ctx, build, {"x": x})["y"], v * s, rtol=1e-5, atol=1e-5)
    templates = kernel_templates(ctx, build, {"x": x})
    assert "matmul/squeeze_excite.wgsl" in templates and "reduce/columns.wgsl" not in templates
