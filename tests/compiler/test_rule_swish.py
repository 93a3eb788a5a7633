"""The ``fuse_swish`` rule: on hand-made IR (no GPU), checked by a float64 evaluator of the IR,
near misses included; and on the GPU against float64 NumPy, where x * sigmoid(x) becomes an
epilogue step of the conv making x."""

from __future__ import annotations

import numpy as np
import pytest
from _ireval import checked_rewrite
from _irb import IR
from helpers import kernel_templates, run_graph

from webnn_gpu.compiler.rules.elementwise import fuse_swish


@pytest.mark.parametrize("sigmoid_first", [False, True])
def test_x_times_its_sigmoid_becomes_one_swish(sigmoid_first):
    ir = IR()
    x = ir.op("relu", [ir.input((2, 3, 5))])
    s = ir.op("sigmoid", [x])
    y = ir.op("neg", [ir.op("mul", [s, x] if sigmoid_first else [x, s])])
    new = checked_rewrite(fuse_swish, ir, {"y": y}, rtol=1e-12, atol=1e-12)
    assert [n.op for n in new] == ["relu", "swish", "neg"]
    assert new[1].inputs == [x]


@pytest.mark.parametrize("case", ["sigmoid read elsewhere", "sigmoid an output", "another value", "broadcast",
                                  "int32"])
def test_near_misses_stay_two_nodes(case):
    ir = IR("int32" if case == "int32" else "float32")
    x = ir.op("relu", [ir.input((2, 3, 5))])
    if case == "broadcast":
        small = ir.op("relu", [ir.input((1, 5))])
        s = ir.op("sigmoid", [small])
        y = ir.op("mul", [small, s])
        y = ir.op("mul", [x, y])
    else:
        s = ir.op("sigmoid", [x])
        other = ir.op("neg", [x]) if case == "another value" else x
        y = ir.op("mul", [other, s])
    outputs = {"y": y}
    if case == "sigmoid read elsewhere":
        outputs["z"] = ir.op("exp", [s])
    elif case == "sigmoid an output":
        outputs["s"] = s
    new = fuse_swish(list(ir.nodes), outputs)
    assert new == ir.nodes if case != "broadcast" else [n.op for n in new].count("swish") == 1


def test_on_the_gpu_swish_is_the_convs_epilogue(ctx, rng):
    """NHWC conv2d -> x * sigmoid(x) (both orders): float64 NumPy's result in one kernel; the
    near miss (the sigmoid also a graph output) stays: the sigmoid and the mul run as element-wise kernels."""
    x = rng.standard_normal((1, 6, 5, 3)).astype(np.float32)
    w = (rng.standard_normal((8, 1, 1, 3)) * 0.8).astype(np.float32)

    def build(b, ops, miss=False):
        h = b.conv2d(ops["x"], b.constant(w), input_layout="nhwc", filter_layout="ohwi")
        s = b.sigmoid(h)
        out = {"y": b.add(b.mul(s, h), b.constant(np.full((1,), 0.5, np.float32)))}
        if miss:
            out["s"] = s
        return out

    h = np.einsum("nhwc,oc->nhwo", x.astype(np.float64), w[:, 0, 0].astype(np.float64))
    want = h / (1 + np.exp(-h)) + 0.5
    np.testing.assert_allclose(run_graph(ctx, build, {"x": x})["y"], want, rtol=1e-5, atol=1e-6)
    assert len(kernel_templates(ctx, build, {"x": x})) == 1
    got = run_graph(ctx, lambda b, o: build(b, o, True), {"x": x})
    np.testing.assert_allclose(got["y"], want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got["s"], 1 / (1 + np.exp(-h)), rtol=1e-5, atol=1e-6)
    assert len(kernel_templates(ctx, lambda b, o: build(b, o, True), {"x": x})) == 3  # conv, sigmoid, mul + add
