"""The ``split_batch_norm`` rule: on hand-made IR (no GPU), checked by a float64 evaluator of the
IR, near misses included; and on the GPU against float64 NumPy, where the normalization
becomes the conv's epilogue."""

from __future__ import annotations

import numpy as np
import pytest
from _ireval import checked_rewrite
from _irb import IR
from helpers import kernel_templates, run_graph
from references import ref_conv2d

from webnn_gpu.compiler.rules.norm import split_batch_norm

C = 6


def _graph(ir: IR, *, producer="conv", stats="const", scale=True, bias=True, axis=1):
    """x -> producer -> batch_normalization(axis) -> relu; (output value, the bn's input)."""
    x = ir.input((1, C, 5, 4) if axis == 1 else (1, 5, 4, C))
    if producer == "conv":
        f = ir.const(np.linspace(-1, 1, C * C).reshape(C, C, 1, 1))
        h = ir.op("conv2d", [x, f], x.shape, padding=[0] * 4, strides=[1, 1], dilations=[1, 1], groups=1,
                  input_layout="nchw" if axis == 1 else "nhwc", filter_layout="oihw")
    elif producer == "relu":
        h = ir.op("relu", [x])
    elif producer == "softmax":
        h = ir.op("softmax", [x], axis=1)
    else:
        h = x
    rng = np.random.default_rng(2)
    mean = ir.const(rng.standard_normal(C)) if stats == "const" else ir.input((C,))
    var = ir.const(rng.uniform(0.5, 2, C))
    ins = [h, mean, var, ir.const(rng.standard_normal(C)) if scale else None,
           ir.const(rng.standard_normal(C)) if bias else None]
    y = ir.op("batch_normalization", ins, h.shape, axis=axis, epsilon=1e-3)
    return ir.op("relu", [y]), h


def _rewrite(ir, outputs):
    return checked_rewrite(split_batch_norm, ir, outputs, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("scale,bias,axis", [(True, True, 1), (False, True, 1), (True, False, 3), (False, False, 3)])
def test_a_batch_norm_after_a_conv_becomes_steps(scale, bias, axis):
    ir = IR()
    y, _ = _graph(ir, scale=scale, bias=bias, axis=axis)
    new = _rewrite(ir, {"y": y})
    ops = [n.op for n in new]
    assert ops == ["conv2d", "sub", "div"] + ["mul"] * scale + ["add"] * bias + ["relu"]
    shape = [1, 1, 1, 1]
    shape[axis] = C
    assert all(n.inputs[1].shape == tuple(shape) for n in new[1:-1])


def test_after_an_element_wise_op_too():
    """After a relu (the end of an epilogue chain, or of an element-wise kernel): split."""
    ir = IR()
    y, _ = _graph(ir, producer="relu")
    assert [n.op for n in _rewrite(ir, {"y": y})] == ["relu", "sub", "div", "mul", "add", "relu"]


@pytest.mark.parametrize("case", ["graph input", "no epilogue host", "statistics an input", "read elsewhere",
                                  "output in the middle", "float16"])
def test_near_misses_stay_a_batch_norm(case):
    ir = IR("float16" if case == "float16" else "float32")
    producer = {"graph input": "input", "no epilogue host": "softmax"}.get(case, "conv")
    y, h = _graph(ir, producer=producer, stats="input" if case == "statistics an input" else "const")
    outputs = {"y": y}
    if case == "read elsewhere":
        outputs["z"] = ir.op("neg", [h])
    elif case == "output in the middle":
        outputs["h"] = h
    assert split_batch_norm(list(ir.nodes), outputs) == ir.nodes


def test_on_the_gpu_the_normalization_is_the_convs_epilogue(ctx, rng):
    """NCHW conv2d -> batch_normalization -> relu: the float64 NumPy result, in one kernel per
    conv (the normalize kernel is gone)."""
    x = rng.standard_normal((1, C, 7, 9)).astype(np.float32)
    w = (rng.standard_normal((C, C, 3, 3)) * 0.3).astype(np.float32)
    mean, scale, bias = (rng.standard_normal(C).astype(np.float32) for _ in range(3))
    var = rng.uniform(0.2, 2, C).astype(np.float32)

    def build(b, ops):
        h = b.conv2d(ops["x"], b.constant(w), padding=[1] * 4)
        y = b.batch_normalization(h, b.constant(mean), b.constant(var), scale=b.constant(scale),
                                  bias=b.constant(bias), epsilon=1e-3)
        return {"y": b.relu(y)}

    got = run_graph(ctx, build, {"x": x})["y"]
    h = ref_conv2d(x.astype(np.float64), w.astype(np.float64), [1] * 4, (1, 1), (1, 1), 1)
    sh = (1, C, 1, 1)
    want = np.maximum((h - mean.reshape(sh)) / np.sqrt(var.reshape(sh) + 1e-3) * scale.reshape(sh)
                      + bias.reshape(sh), 0)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    templates = kernel_templates(ctx, build, {"x": x})
    assert "norm/normalize.wgsl" not in templates and not any(t.startswith("elementwise/") for t in templates)
