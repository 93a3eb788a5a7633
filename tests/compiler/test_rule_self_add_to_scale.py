"""The ``self_add_to_scale`` rule: ``add(x, x)`` of a float value is ``mul(x, 2)`` (exact), a
product by a constant that the producing kernel takes as its epilogue. On hand-made IR (no
GPU), checked by a float64 evaluator of the IR, near misses included; and on the GPU against
float64 NumPy (NASNet's ``add(pool(p), pool(p))``, a stand-alone add of a graph input, a
float16 sum past 65504), the same bits as with the rule off and one kernel less."""

from __future__ import annotations

import numpy as np
import pytest
from _ireval import checked_rewrite
from _irb import IR
from helpers import kernel_templates, run_graph

from webnn_gpu.compiler.rules.canonical import self_add_to_scale


@pytest.mark.parametrize("dt", ["float32", "float16"])
def test_an_add_of_one_value_twice_becomes_a_product_by_two(dt):
    ir = IR(dt)
    x = ir.input((1, 6, 6, 8))
    p = ir.op("average_pool2d", [x], (1, 4, 4, 8), window=[3, 3], strides=[1, 1], padding=[0, 0, 0, 0],
              dilations=[1, 1], layout="nhwc")
    y = ir.op("add", [p, p])
    new = checked_rewrite(self_add_to_scale, ir, {"y": y}, rtol=0, atol=0)
    assert [node.op for node in new] == ["average_pool2d", "mul"]
    mul = new[1]
    assert mul.inputs[0] is p and mul.outputs == [y]
    two = mul.inputs[1]
    assert two.kind == "constant" and two.data_type == dt and two.data.tolist() == [2.0]


@pytest.mark.parametrize("case", ["two operands", "integers", "add has an epilogue", "sub(x, x)", "mul(x, x)",
                                  "broadcast to a larger shape"])
def test_near_misses_stay(case):
    ir = IR("float32")
    x = ir.input((2, 8))
    outputs = {}
    if case == "two operands":
        outputs["y"] = ir.op("add", [x, ir.op("relu", [x])])
    elif case == "integers":
        xi = ir.input((2, 8))
        xi.data_type = "int32"
        out = ir.op("add", [xi, xi])
        out.data_type = "int32"
        outputs["y"] = out
    elif case == "add has an epilogue":
        outputs["y"] = ir.op("add", [x, x], epilogue=[{"op": "relu"}])
    elif case == "broadcast to a larger shape":
        outputs["y"] = ir.op("add", [x, x], (3, 2, 8))
    else:
        outputs["y"] = ir.op(case[:3], [x, x])
    assert self_add_to_scale(list(ir.nodes), outputs) == ir.nodes


def _doubled_pool(b, ops):
    """``add(p, p)`` of an average pool (3x3, stride 1, SAME: NASNet's normal cell once
    TensorFlow's converter merged its two identical pools), and ``add(x, x)`` of the input."""
    p = b.average_pool2d(ops["x"], window_dimensions=[3, 3], padding=[1, 1, 1, 1], layout="nhwc")
    return {"y": b.add(p, p), "z": b.add(ops["x"], ops["x"])}


def _doubled_pool_ref(x):
    x64 = x.astype(np.float64)
    pad = np.pad(x64, ((0, 0), (1, 1), (1, 1), (0, 0)))
    ones = np.pad(np.ones_like(x64), ((0, 0), (1, 1), (1, 1), (0, 0)))
    h, w = x.shape[1:3]
    s = sum(pad[:, i:i + h, j:j + w] for i in range(3) for j in range(3))
    n = sum(ones[:, i:i + h, j:j + w] for i in range(3) for j in range(3))
    return 2 * s / n, 2 * x64


@pytest.mark.parametrize("dt, hw, c", [("float32", (7, 5), 12), ("float16", (6, 6), 8), ("float32", (3, 9), 3)])
def test_doubled_pool_on_the_gpu(ctx, monkeypatch, dt, hw, c):
    """Against float64 NumPy (the pool's own rounding: float32 1e-6, float16 2^-10 of the
    magnitude), the same bits as the graph with the rule off, one kernel less (the pool
    stores its doubled output; the input's double is one map kernel either way). Odd sizes
    and channels (3: no vec4 pool) included."""
    rng = np.random.default_rng(hw[0] * 10 + c)
    x = rng.standard_normal((1, *hw, c)).astype(dt)
    want_y, want_z = _doubled_pool_ref(x)
    got = run_graph(ctx, _doubled_pool, {"x": x})
    tol = 1e-6 if dt == "float32" else 2 ** -10
    np.testing.assert_allclose(got["y"].astype(np.float64), want_y, rtol=tol, atol=tol * np.abs(want_y).max())
    np.testing.assert_array_equal(got["z"].astype(np.float64), want_z)
    n_new = len(kernel_templates(ctx, _doubled_pool, {"x": x}))
    monkeypatch.setenv("WEBNN_GPU_PASSES", "-self_add_to_scale")
    old = run_graph(ctx, _doubled_pool, {"x": x})
    assert old["y"].tobytes() == got["y"].tobytes() and old["z"].tobytes() == got["z"].tobytes()
    assert n_new == len(kernel_templates(ctx, _doubled_pool, {"x": x})) - 1


def test_float16_double_past_65504_is_infinite_as_before(ctx):
    """Doubling 40000 in float16 overflows to +inf (and -inf, NaN stays NaN), as the add did."""
    x = np.array([[40000, -40000, 1.5, np.nan, np.inf, -0.0, 6e-8, 32752]], np.float16)
    got = run_graph(ctx, lambda b, ops: {"z": b.add(ops["x"], ops["x"])}, {"x": x})["z"]
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(got, x + x)
    assert np.signbit(got[0, 5])
