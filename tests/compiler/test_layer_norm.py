"""fuse_layer_norm: a decomposed layer normalization becomes one ``layer_normalization`` node.

IR tests (no GPU) for the forms it takes and the near misses it must leave; GPU tests
against float64 NumPy.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from _irb import IR

import webnn_gpu as webnn
from webnn_gpu.compiler import check_order, run_passes
from webnn_gpu.fusions.layer_norm import LayerNormAttrs, fuse_layer_norm

from helpers import run_graph

SHAPE = (2, 5, 8)


def _onnx_form(ir: IR, x, *, axes=(2,), square="mul", norm="div", eps=None, scale=True, bias=True,
               scale_first=False, axes2=None):
    """The PyTorch / ONNX form: (x - mean) / sqrt(mean((x - mean)^2) + eps) * scale + bias."""
    m = ir.mean(x, axes)
    d = ir.op("sub", [x, m])
    sq = ir.op("mul", [d, d]) if square == "mul" else ir.op("pow", [d, ir.const(2.0)])
    v = ir.mean(sq, axes if axes2 is None else axes2)
    e = ir.op("add", [v, ir.const(1e-5) if eps is None else eps])
    if norm == "div":
        n = ir.op("div", [d, ir.op("sqrt", [e])])
    elif norm == "rsqrt":
        n = ir.op("mul", [ir.op("reciprocal", [ir.op("sqrt", [e])]), d])
    else:
        n = ir.op("mul", [d, ir.op("pow", [e, ir.const(-0.5)])])
    C = [x.shape[a] for a in axes]
    if scale is True:
        scale = ir.const(np.linspace(0.5, 1.5, int(np.prod(C))).reshape(C))
    if scale is not None:
        n = ir.op("mul", [scale, n] if scale_first else [n, scale])
    if bias is True:
        bias = ir.const(np.linspace(-1, 1, int(np.prod(C))).reshape(C))
    if bias is not None:
        n = ir.op("add", [bias, n] if scale_first else [n, bias])
    return n


def _tf_form(ir: IR, x, *, scale=True, bias=True, axes=(2,)):
    """tf.nn.batch_normalization's form: x * i + (bias - mean * i), i = rsqrt(v + eps) * scale."""
    m = ir.mean(x, axes)
    d = ir.op("sub", [x, m])
    v = ir.mean(ir.op("mul", [d, d]), axes)
    i = ir.op("reciprocal", [ir.op("sqrt", [ir.op("add", [v, ir.const(1e-3)])])])
    C = x.shape[-1]
    if scale:
        i = ir.op("mul", [i, ir.const(np.linspace(0.5, 1.5, C))])
    mi = ir.op("mul", [m, i])
    c = ir.op("sub", [ir.const(np.linspace(-1, 1, C)), mi]) if bias else ir.op("neg", [mi])
    return ir.op("add", [ir.op("mul", [x, i]), c])


def _fused(ir: IR, y, outputs=None):
    outputs = outputs or {"y": y}
    out = fuse_layer_norm(ir.nodes, outputs)
    check_order(out, outputs)
    return out


@pytest.mark.parametrize("square", ["mul", "pow"])
@pytest.mark.parametrize("norm", ["div", "rsqrt", "pow"])
def test_the_onnx_form_becomes_one_node(square, norm):
    ir = IR()
    x = ir.input(SHAPE)
    y = _onnx_form(ir, x, square=square, norm=norm)
    out = _fused(ir, y)
    assert [n.op for n in out] == ["layer_normalization"]
    (ln,) = out
    assert ln.inputs[0] is x and ln.outputs[0] is y and isinstance(ln.attrs, LayerNormAttrs)
    assert ln.attrs["axes"] == (2,) and ln.attrs.epsilon == pytest.approx(1e-5)
    np.testing.assert_allclose(ln.inputs[1].data, np.linspace(0.5, 1.5, 8).astype(np.float32))


def test_scale_and_bias_are_optional_and_in_either_order():
    for scale, bias, first in ((None, None, False), (True, None, True), (None, True, True), (True, True, True)):
        ir = IR()
        y = _onnx_form(ir, ir.input(SHAPE), scale=scale, bias=bias, scale_first=first)
        (ln,) = _fused(ir, y)
        assert (ln.inputs[1] is None, ln.inputs[2] is None) == (scale is None, bias is None)


def test_several_axes_and_broadcast_parameters():
    """Axes [1, 2]; a [1, 5, 8] constant scale and a scalar bias are re-made as [5, 8]."""
    ir = IR()
    x = ir.input(SHAPE)
    y = _onnx_form(ir, x, axes=(1, 2), scale=ir.const(np.ones((1, 5, 8))), bias=ir.const(0.25))
    (ln,) = _fused(ir, y)
    assert ln.attrs.axes == (1, 2) and ln.inputs[1].shape == (5, 8) and ln.inputs[2].shape == (5, 8)
    assert np.all(ln.inputs[2].data == np.float32(0.25))


def test_a_computed_scale_is_viewed_in_the_kernels_shape():
    ir = IR()
    x = ir.input(SHAPE)
    s = ir.input((1, 1, 8))
    y = _onnx_form(ir, x, scale=s)
    out = _fused(ir, y)
    assert [n.op for n in out] == ["reshape", "layer_normalization"]
    assert out[0].inputs[0] is s and out[1].inputs[1] is out[0].outputs[0] and out[1].inputs[1].shape == (8,)


@pytest.mark.parametrize("scale, bias", [(True, True), (False, True), (True, False), (False, False)])
def test_the_tf_form_becomes_one_node(scale, bias):
    ir = IR()
    x = ir.input(SHAPE)
    y = _tf_form(ir, x, scale=scale, bias=bias)
    out = _fused(ir, y)
    assert [n.op for n in out] == ["layer_normalization"]
    assert out[0].attrs.epsilon == pytest.approx(1e-3) and out[0].outputs[0] is y
    assert (out[0].inputs[1] is not None, out[0].inputs[2] is not None) == (scale, bias)


# ---------------------------------------------------------------- near misses
def _unchanged(ir: IR, y, outputs=None, *, rms_of_d: bool = False):
    """No layer normalization. ``rms_of_d``: the near miss keeps ``d = x - mean`` (or another
    difference) apart, and what follows, ``d / sqrt(mean(d * d) + eps)``, is an RMS normalization
    of ``d``, which the rule takes (the same values): only that part may change."""
    out = fuse_layer_norm(ir.nodes, outputs or {"y": y})
    ops = [n.op for n in out]
    assert "layer_normalization" not in ops
    if rms_of_d and "rms_normalization" in ops:
        assert ops.count("rms_normalization") == 1 and ops[0] == "reduce_mean"
        (rms,) = [n for n in out if n.op == "rms_normalization"]
        assert rms.inputs[0].producer is not None and rms.inputs[0].producer.op == "sub"
        return
    assert ops == [n.op for n in ir.nodes]


def test_a_second_consumer_of_an_intermediate_value_keeps_the_graph():
    ir = IR()
    x = ir.input(SHAPE)
    y = _onnx_form(ir, x)
    var = next(n for n in ir.nodes if n.op == "reduce_mean" and n.inputs[0] is not x).outputs[0]
    z = ir.op("neg", [var])
    _unchanged(ir, y, {"y": y, "z": z})


def test_a_graph_output_in_the_middle_keeps_the_graph():
    ir = IR()
    x = ir.input(SHAPE)
    y = _onnx_form(ir, x, scale=None, bias=None)
    d = ir.nodes[1].outputs[0]
    _unchanged(ir, y, {"y": y, "d": d}, rms_of_d=True)


def test_an_output_after_the_normalization_ends_the_match_there():
    """The normalized value is a graph output: the node stops there, the scale stays apart."""
    ir = IR()
    x = ir.input(SHAPE)
    y = _onnx_form(ir, x, bias=None)
    n = ir.nodes[-1].inputs[0]
    out = _fused(ir, y, {"y": y, "n": n})
    assert [o.op for o in out] == ["layer_normalization", "mul"] and out[0].outputs[0] is n


def test_means_over_different_axes_keep_the_graph():
    ir = IR()
    y = _onnx_form(ir, ir.input(SHAPE), axes=(2,), axes2=(1, 2))
    _unchanged(ir, y, rms_of_d=True)


def test_an_epsilon_that_is_not_a_constant_keeps_the_graph():
    ir = IR()
    y = _onnx_form(ir, ir.input(SHAPE), eps=ir.input(()))
    _unchanged(ir, y)
    ir = IR()
    y = _onnx_form(ir, ir.input(SHAPE), eps=ir.const([1e-5, 2e-5, 1e-5, 1e-5, 1e-5], (1, 5, 1)))
    _unchanged(ir, y)  # (two values: no one epsilon)


def test_a_scale_varying_along_another_axis_stays_apart():
    """A [5, 1] scale varies along axis 1, which is not normalized: the node ends before it."""
    ir = IR()
    x = ir.input(SHAPE)
    y = _onnx_form(ir, x, scale=ir.const(np.linspace(1, 2, 5).reshape(5, 1)), bias=None)
    out = _fused(ir, y)
    assert [n.op for n in out] == ["layer_normalization", "mul"]


def test_a_sub_of_the_wrong_operand_keeps_the_graph():
    """(mean - x) has the other sign: the div form does not match it."""
    ir = IR()
    x = ir.input(SHAPE)
    m = ir.mean(x, (2,))
    d = ir.op("sub", [m, x])
    v = ir.mean(ir.op("mul", [d, d]), (2,))
    y = ir.op("div", [d, ir.op("sqrt", [ir.op("add", [v, ir.const(1e-5)])])])
    _unchanged(ir, y, rms_of_d=True)


def test_a_mean_without_kept_dimensions_keeps_the_graph():
    ir = IR()
    x = ir.input(SHAPE)
    y = _onnx_form(ir, x)
    ir.nodes[0].attrs["keep"] = False
    _unchanged(ir, y, rms_of_d=True)


# ---------------------------------------------------------------- on the GPU
def _ref_ln(x, axes, eps, scale=None, bias=None):
    x = x.astype(np.float64)
    m = x.mean(axis=axes, keepdims=True)
    v = ((x - m) ** 2).mean(axis=axes, keepdims=True)
    y = (x - m) / np.sqrt(v + eps)
    if scale is not None:
        y = y * scale
    if bias is not None:
        y = y + bias
    return y


def _onnx_graph(b, x, axes, eps, scale, bias, norm):
    m = b.reduce_mean(x, axes=axes, keep_dimensions=True)
    d = b.sub(x, m)
    v = b.reduce_mean(b.mul(d, d), axes=axes, keep_dimensions=True)
    e = b.add(v, b.constant("float32", eps))
    n = b.div(d, b.sqrt(e)) if norm == "div" else b.mul(d, b.reciprocal(b.sqrt(e)))
    return b.add(b.mul(n, b.constant(scale)), b.constant(bias))


def _templates(ctx, build, shapes, data_type="float32"):
    b = webnn.MLGraphBuilder(ctx)
    g = b.build(build(b, {k: b.input(k, {"data_type": data_type, "shape": list(s)}) for k, s in shapes.items()}))
    try:
        return [s.template for s in g._steps if hasattr(s, "template")]
    finally:
        g.destroy()


@pytest.mark.parametrize("axes, norm", [([2], "div"), ([1, 2], "rsqrt")])
def test_fused_layer_norm_matches_numpy(ctx, rng, axes, norm):
    x = (rng.standard_normal((2, 6, 12)) * 3 + 1).astype(np.float32)
    pshape = [x.shape[a] for a in axes]
    scale = (rng.standard_normal(pshape) * 0.5 + 1).astype(np.float32)
    bias = rng.standard_normal(pshape).astype(np.float32)

    def build(b, ops):
        x = ops["x"]
        return {"y": _onnx_graph(b, x, axes, 1e-5, scale, bias, norm)}

    ref = _ref_ln(x, tuple(axes), 1e-5, scale, bias)
    np.testing.assert_allclose(run_graph(ctx, build, {"x": x})["y"], ref, rtol=1e-4, atol=1e-4)
    assert _templates(ctx, build, {"x": x.shape}) == ["norm/layer_norm.wgsl"]  # short rows: one kernel


def test_fused_tf_form_matches_numpy(ctx, rng):
    x = rng.standard_normal((3, 16)).astype(np.float32)
    gamma = (rng.standard_normal(16) * 0.5 + 1).astype(np.float32)
    beta = rng.standard_normal(16).astype(np.float32)

    def build(b, ops):
        x = ops["x"]
        m = b.reduce_mean(x, axes=[1], keep_dimensions=True)
        d = b.sub(x, m)
        v = b.reduce_mean(b.mul(d, d), axes=[1], keep_dimensions=True)
        i = b.mul(b.reciprocal(b.sqrt(b.add(v, b.constant("float32", 1e-3)))), b.constant(gamma))
        return {"y": b.add(b.mul(x, i), b.sub(b.constant(beta), b.mul(m, i)))}

    ref = _ref_ln(x, (1,), 1e-3, gamma, beta)
    np.testing.assert_allclose(run_graph(ctx, build, {"x": x})["y"], ref, rtol=1e-4, atol=1e-4)
    assert _templates(ctx, build, {"x": x.shape}) == ["norm/layer_norm.wgsl"]  # short rows: one kernel


def test_near_miss_on_the_gpu_gives_the_decomposed_result(ctx, rng):
    """An intermediate value that is also an output: nothing fuses, both outputs are right."""
    x = rng.standard_normal((2, 8)).astype(np.float32)
    scale, bias = np.full(8, 2, np.float32), np.full(8, 0.5, np.float32)

    def build(b, ops):
        x = ops["x"]
        m = b.reduce_mean(x, axes=[1], keep_dimensions=True)
        d = b.sub(x, m)
        v = b.reduce_mean(b.mul(d, d), axes=[1], keep_dimensions=True)
        n = b.div(d, b.sqrt(b.add(v, b.constant("float32", 1e-5))))
        return {"y": b.add(b.mul(n, b.constant(scale)), b.constant(bias)), "v": v}

    got = run_graph(ctx, build, {"x": x})
    np.testing.assert_allclose(got["y"], _ref_ln(x, (1,), 1e-5, scale, bias), rtol=1e-4, atol=1e-4)
    xd = x.astype(np.float64)
    np.testing.assert_allclose(got["v"], xd.var(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)
    assert not {"norm/normalize.wgsl", "norm/layer_norm.wgsl"} & set(_templates(ctx, build, {"x": x.shape}))


def test_run_passes_fuses_before_the_epilogue_rules():
    """In the driver's order the decomposed form is one node (fuse_elementwise would otherwise
    merge its element-wise tail)."""
    ir = IR()
    x = ir.input(SHAPE)
    y = _onnx_form(ir, x)
    assert [n.op for n in run_passes(ir.nodes, {"y": y})] == ["layer_normalization"]


GROUPS = (2, 6, 4, 3)  # a GroupNormalization's view: [batch, steps, groups, channels / groups]


def _group_form(ir: IR, x, *, gamma=True, beta=True, axes=(1, 3)):
    """Keras 3's GroupNormalization through TensorFlow 2.21's converter: the negated-mean form
    over axes (1, 3) of the grouped view, gamma and beta per channel ([1, 1, groups, size]):
    x * i + (neg(m) * i + beta), i = rsqrt(v + eps) * gamma."""
    m = ir.mean(x, axes)
    d = ir.op("sub", [x, m])
    v = ir.mean(ir.op("mul", [d, d]), axes)
    i = ir.op("reciprocal", [ir.op("sqrt", [ir.op("add", [v, ir.const(1e-3)])])])
    per_channel = (1, 1) + tuple(x.shape[2:])
    i = ir.op("mul", [i, ir.const(np.linspace(0.5, 1.5, 12).reshape(per_channel)) if gamma is True else gamma])
    nm = ir.op("mul", [ir.op("neg", [m]), i])
    if beta is not None:
        nm = ir.op("add", [nm, ir.const(np.linspace(-1, 1, 12).reshape(per_channel)) if beta is True else beta])
    return ir.op("add", [ir.op("mul", [x, i]), nm])


@pytest.mark.parametrize("beta", [True, None])
def test_a_group_normalization_normalizes_then_scales_per_channel(beta):
    """Per-channel gamma and beta vary along axes that are not normalized: the node normalizes
    without them and a mul and an add follow (the kernel's epilogue later)."""
    ir = IR()
    x = ir.input(GROUPS)
    y = _group_form(ir, x, beta=beta)
    out = _fused(ir, y)
    assert [n.op for n in out] == ["layer_normalization", "mul"] + (["add"] if beta else [])
    ln = out[0]
    assert ln.inputs[0] is x and ln.inputs[1] is None and ln.inputs[2] is None and ln.attrs["axes"] == (1, 3)
    assert out[1].inputs[0] is ln.outputs[0] and out[1].inputs[1].shape == (1, 1, 4, 3)
    assert out[-1].outputs[0] is y


def test_a_group_scale_that_grows_the_tensor_keeps_the_graph():
    """A gamma of a larger rank than x (the product grows x): no match."""
    ir = IR()
    y = _group_form(ir, ir.input(GROUPS), gamma=ir.const(np.ones((2, 1, 1, 4, 3))))
    _unchanged(ir, y)


def test_a_group_scale_read_twice_keeps_the_graph():
    """i (rsqrt times gamma) also read by a graph output: the decomposed nodes stay."""
    ir = IR()
    x = ir.input(GROUPS)
    y = _group_form(ir, x)
    i = next(n for n in ir.nodes if n.op == "mul" and n.inputs[0].producer is not None
             and n.inputs[0].producer.op == "reciprocal").outputs[0]
    _unchanged(ir, y, {"y": y, "i": i})


def test_fused_group_norm_matches_numpy(ctx, rng):
    """GroupNormalization's form on the GPU: one layer_norm.wgsl kernel (gamma and beta its
    epilogue), against float64 NumPy."""
    x = (rng.standard_normal(GROUPS) * 2 + 1).astype(np.float32)
    gamma = (rng.standard_normal((1, 1, 4, 3)) * 0.5 + 1).astype(np.float32)
    beta = rng.standard_normal((1, 1, 4, 3)).astype(np.float32)

    def build(b, ops):
        x = ops["x"]
        m = b.reduce_mean(x, axes=[1, 3], keep_dimensions=True)
        d = b.sub(x, m)
        v = b.reduce_mean(b.mul(d, d), axes=[1, 3], keep_dimensions=True)
        i = b.mul(b.reciprocal(b.sqrt(b.add(v, b.constant("float32", 1e-3)))), b.constant(gamma))
        return {"y": b.add(b.mul(x, i), b.add(b.mul(b.neg(m), i), b.constant(beta)))}

    ref = _ref_ln(x, (1, 3), 1e-3, gamma, beta)
    np.testing.assert_allclose(run_graph(ctx, build, {"x": x})["y"], ref, rtol=1e-4, atol=1e-4)
    assert _templates(ctx, build, {"x": x.shape}) == ["norm/layer_norm.wgsl"]


def _rms_form(ir: IR, x, *, square="mul", norm="rsqrt", scale=True, axes=(2,), eps=1e-6):
    """RMSNorm: x / sqrt(mean(x^2) + eps) * scale (Keras' RMSNormalization: SQUARE, MEAN, ADD,
    RSQRT, MUL, MUL; an ONNX export: Pow, ReduceMean, Add, Sqrt, Div, Mul)."""
    sq = ir.op("mul", [x, x]) if square == "mul" else ir.op("pow", [x, ir.const(2.0)])
    e = ir.op("add", [ir.mean(sq, axes), ir.const(eps)])
    if norm == "div":
        n = ir.op("div", [x, ir.op("sqrt", [e])])
    else:
        n = ir.op("mul", [x, ir.op("reciprocal", [ir.op("sqrt", [e])])])
    if scale:
        n = ir.op("mul", [n, ir.const(np.linspace(0.5, 1.5, x.shape[-1]))])
    return n


def _scaled_form(ir: IR, x, axes=(2,)):
    """Keras' LayerNormalization(rms_scaling=True): x * rsqrt(mean((x - mean(x))^2) + eps) * gamma."""
    m = ir.mean(x, axes)
    d = ir.op("sub", [x, m])
    v = ir.mean(ir.op("mul", [d, d]), axes)
    r = ir.op("reciprocal", [ir.op("sqrt", [ir.op("add", [v, ir.const(1e-3)])])])
    return ir.op("mul", [ir.op("mul", [x, r]), ir.const(np.linspace(0.5, 1.5, x.shape[-1]))])


@pytest.mark.parametrize("square, norm", [("mul", "rsqrt"), ("pow", "div")])
def test_an_rms_normalization_becomes_one_node(square, norm):
    ir = IR()
    x = ir.input(SHAPE)
    y = _rms_form(ir, x, square=square, norm=norm)
    out = _fused(ir, y)
    assert [n.op for n in out] == ["rms_normalization"]
    (rn,) = out
    assert rn.inputs[0] is x and rn.outputs[0] is y and rn.attrs["form"] == "rms" and rn.attrs["axes"] == (2,)
    assert rn.attrs.epsilon == pytest.approx(1e-6) and rn.inputs[2] is None
    np.testing.assert_allclose(rn.inputs[1].data, np.linspace(0.5, 1.5, 8).astype(np.float32))


def test_rms_scaling_becomes_one_node():
    ir = IR()
    x = ir.input(SHAPE)
    y = _scaled_form(ir, x)
    out = _fused(ir, y)
    assert [n.op for n in out] == ["rms_normalization"] and out[0].attrs["form"] == "scaled"


def test_rms_near_misses_keep_the_graph():
    """The square read elsewhere (a graph output), a mean without the square's axes' rows in one
    kernel (rows longer than 4096 values), the normalization of another tensor than x."""
    ir = IR()
    x = ir.input(SHAPE)
    y = _rms_form(ir, x)
    sq = ir.nodes[0].outputs[0]
    _unchanged(ir, y, {"y": y, "sq": sq})
    ir = IR()
    y = _rms_form(ir, ir.input((2, 8200)), axes=(1,), scale=False)
    _unchanged(ir, y)
    ir = IR()
    x, other = ir.input(SHAPE), ir.input(SHAPE)
    sq = ir.op("mul", [x, x])
    r = ir.op("reciprocal", [ir.op("sqrt", [ir.op("add", [ir.mean(sq, (2,)), ir.const(1e-6)])])])
    _unchanged(ir, ir.op("mul", [other, r]))


@pytest.mark.parametrize("form, act", [("rms", None), ("scaled", None), ("rms", "relu"), ("scaled", "gelu")])
def test_fused_rms_norm_matches_numpy(ctx, rng, form, act):
    """Both forms on the GPU: one norm/layer_norm.wgsl kernel, against float64 NumPy; an
    activation after it is the kernel's epilogue."""
    x = (rng.standard_normal((3, 5, 24)) * 2 + 0.5).astype(np.float32)
    gamma = (rng.standard_normal(24) * 0.5 + 1).astype(np.float32)

    def build(b, ops):
        x = ops["x"]
        if form == "rms":
            ms = b.reduce_mean(b.mul(x, x), axes=[2], keep_dimensions=True)
            r = b.reciprocal(b.sqrt(b.add(ms, b.constant("float32", 1e-6))))
        else:
            d = b.sub(x, b.reduce_mean(x, axes=[2], keep_dimensions=True))
            v = b.reduce_mean(b.mul(d, d), axes=[2], keep_dimensions=True)
            r = b.reciprocal(b.sqrt(b.add(v, b.constant("float32", 1e-3))))
        y = b.mul(b.mul(x, r), b.constant(gamma))
        return {"y": getattr(b, act)(y) if act else y}

    x64 = x.astype(np.float64)
    if form == "rms":
        ref = x64 / np.sqrt((x64 ** 2).mean(axis=2, keepdims=True) + 1e-6) * gamma
    else:
        ref = x64 / np.sqrt(x64.var(axis=2, keepdims=True) + 1e-3) * gamma
    if act == "relu":
        ref = np.maximum(ref, 0)
    elif act == "gelu":
        ref = 0.5 * ref * (1 + np.vectorize(math.erf)(ref / math.sqrt(2)))
    np.testing.assert_allclose(run_graph(ctx, build, {"x": x})["y"], ref, rtol=1e-4, atol=1e-4)
    assert _templates(ctx, build, {"x": x.shape}) == ["norm/layer_norm.wgsl"]


def _l2_form(ir: IR, x, *, kind="min", axes=(2,), bound=None):
    """Keras' UnitNormalization (``kind="min"``: x * min(rsqrt(sum(x^2)), 1e12)) and
    tf.math.l2_normalize (``"max"``: x * rsqrt(max(sum(x^2), 1e-12))); ``bound`` instead of
    1e12 / 1e-12."""
    s = ir.op("reduce_sum", [ir.op("mul", [x, x])], tuple(1 if a in axes else d for a, d in enumerate(x.shape)),
              axes=list(axes), keep=True)
    if kind == "min":
        r = ir.op("min", [ir.op("reciprocal", [ir.op("sqrt", [s])]), ir.const(1e12 if bound is None else bound)])
    else:
        r = ir.op("reciprocal", [ir.op("sqrt", [ir.op("max", [s, ir.const(1e-12 if bound is None else bound)])])])
    return ir.op("mul", [x, r])


@pytest.mark.parametrize("kind", ["min", "max"])
def test_an_l2_normalization_becomes_one_node(kind):
    ir = IR()
    x = ir.input(SHAPE)
    y = _l2_form(ir, x, kind=kind, axes=(1, 2))
    out = _fused(ir, y)
    assert [n.op for n in out] == ["rms_normalization"]
    assert out[0].attrs["form"] == "l2" + kind and out[0].attrs["axes"] == (1, 2)
    assert out[0].attrs.epsilon == pytest.approx(1e12 if kind == "min" else 1e-12)


def test_a_float16_l2_normalization_with_an_infinite_bound_becomes_one_node():
    """UnitNormalization's 1e12 is +inf in float16: min(r, +inf) is r, the kernel's min takes it."""
    ir = IR("float16")
    x = ir.input(SHAPE)
    y = _l2_form(ir, x, bound=np.inf)
    out = _fused(ir, y)
    assert [n.op for n in out] == ["rms_normalization"] and out[0].attrs["form"] == "l2min"
    assert out[0].attrs.epsilon == np.inf


def test_l2_near_misses_keep_the_graph():
    """A bound that is not one constant, the sum read elsewhere, x * r of another tensor, an
    infinite bound in the max form (every output would be 0)."""
    ir = IR("float16")
    x = ir.input(SHAPE)
    y = _l2_form(ir, x, kind="max", bound=np.inf)
    _unchanged(ir, y)
    ir = IR()
    x = ir.input(SHAPE)
    s = ir.op("reduce_sum", [ir.op("mul", [x, x])], (2, 5, 1), axes=[2], keep=True)
    y = ir.op("mul", [x, ir.op("min", [ir.op("reciprocal", [ir.op("sqrt", [s])]), ir.input((2, 5, 1))])])
    _unchanged(ir, y)
    ir = IR()
    x = ir.input(SHAPE)
    y = _l2_form(ir, x)
    _unchanged(ir, y, {"y": y, "s": ir.nodes[1].outputs[0]})
    ir = IR()
    x, other = ir.input(SHAPE), ir.input(SHAPE)
    y = _l2_form(ir, x)
    ir.nodes[-1].inputs[0] = other
    _unchanged(ir, y)


@pytest.mark.parametrize("kind", ["min", "max"])
def test_fused_l2_norm_matches_numpy(ctx, rng, kind):
    """Both L2 forms on the GPU, a row of zeros included: one norm/layer_norm.wgsl kernel, against
    float64 NumPy."""
    x = rng.standard_normal((3, 5, 24)).astype(np.float32)
    x[1, 2] = 0.0

    def build(b, ops):
        x = ops["x"]
        s = b.reduce_sum(b.mul(x, x), axes=[2], keep_dimensions=True)
        if kind == "min":
            r = b.min(b.reciprocal(b.sqrt(s)), b.constant("float32", 1e12))
        else:
            r = b.reciprocal(b.sqrt(b.max(s, b.constant("float32", 1e-12))))
        return {"y": b.mul(x, r)}

    x64 = x.astype(np.float64)
    ref = x64 / np.maximum(np.sqrt((x64 ** 2).sum(axis=2, keepdims=True)), 1e-6 if kind == "max" else 1e-12)
    np.testing.assert_allclose(run_graph(ctx, build, {"x": x})["y"], ref, rtol=1e-4, atol=1e-5)
    assert _templates(ctx, build, {"x": x.shape}) == ["norm/layer_norm.wgsl"]


def test_fused_float16_unit_norm_matches_numpy(ctx, rng):
    """UnitNormalization in float16, its bound +inf (1e12 rounded): one norm/layer_norm.wgsl kernel
    (float32 sums, each output rounded once), against float64 NumPy."""
    x = rng.standard_normal((3, 5, 24)).astype(np.float16)

    def build(b, ops):
        x = ops["x"]
        s = b.reduce_sum(b.mul(x, x), axes=[2], keep_dimensions=True)
        r = b.min(b.reciprocal(b.sqrt(s)), b.constant({"data_type": "float16", "shape": []}, np.array(np.inf, np.float16)))
        return {"y": b.mul(x, r)}

    x64 = x.astype(np.float64)
    ref = x64 / np.sqrt((x64 ** 2).sum(axis=2, keepdims=True))
    got = run_graph(ctx, build, {"x": x})["y"].astype(np.float64)
    np.testing.assert_allclose(got, ref, rtol=1e-2, atol=3e-2 * np.abs(ref).max())
    assert _templates(ctx, build, {"x": x.shape}, "float16") == ["norm/layer_norm.wgsl"]
