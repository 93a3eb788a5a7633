"""``where`` as a step of a fused element-wise kernel (the compiler's ``fuse_elementwise``): on
the GPU against float64 NumPy. The dynamo exporter's softplus ``where(x > 20, x, softplus(x))``,
an attention-style mask ``where(m, s, -inf)`` with a broadcast condition, int32 values, and a
where read by a later step. Tolerance: the softplus's own (``16 u |ref| + u``, u the type's
unit roundoff); selects are exact.
"""

from __future__ import annotations

import numpy as np
import pytest

import webnn_gpu as webnn
from webnn_gpu._lower import KernelStep


def _kernels(graph):
    return [s.template for s in graph._steps if isinstance(s, KernelStep)]


@pytest.mark.parametrize("dt", ["float32", "float16"])
def test_softplus_threshold_is_one_kernel(ctx, dt):
    if dt == "float16" and "shader-f16" not in ctx.features:
        pytest.skip("no shader-f16")
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((2, 8, 6, 10)) * 12).astype(dt)
    b = webnn.MLGraphBuilder(ctx)
    xi = b.input("x", {"data_type": dt, "shape": list(x.shape)})
    y = b.where(b.greater(xi, b.constant(dt, 20.0)), xi, b.softplus(xi))
    graph = b.build({"y": y})
    assert len(_kernels(graph)) == 1, _kernels(graph)
    got = ctx.compute(graph, {"x": x})["y"].astype(np.float64)
    x64 = x.astype(np.float64)
    ref = np.where(x64 > 20, x64, np.logaddexp(0, x64))
    u = 2.0**-24 if dt == "float32" else 2.0**-11
    assert np.all(np.abs(got - ref) <= 16 * u * np.abs(ref) + u)


def test_masked_scores_with_a_broadcast_condition(ctx):
    """scores * 0.5 masked by a [1, 1, T] condition input, then relu: one kernel, exact selects."""
    rng = np.random.default_rng(2)
    s = rng.standard_normal((2, 4, 6)).astype(np.float32)
    m = (rng.random((1, 1, 6)) < 0.5).astype(np.uint8)
    b = webnn.MLGraphBuilder(ctx)
    si = b.input("s", {"data_type": "float32", "shape": [2, 4, 6]})
    mi = b.input("m", {"data_type": "uint8", "shape": [1, 1, 6]})
    scaled = b.mul(si, b.constant("float32", 0.5))
    y = b.relu(b.where(mi, scaled, b.constant("float32", -1.0)))
    graph = b.build({"y": y})
    assert len(_kernels(graph)) == 1, _kernels(graph)
    got = ctx.compute(graph, {"s": s, "m": m})["y"]
    np.testing.assert_array_equal(got, np.maximum(np.where(m != 0, s * np.float32(0.5), np.float32(-1)), 0))


def test_int32_values_and_near_misses(ctx):
    """int32 where after a comparison (fused, exact); an int64 where stays a raw select; a where
    also read as a graph output keeps its value."""
    rng = np.random.default_rng(3)
    a = rng.integers(-50, 50, (3, 7)).astype(np.int32)
    b = webnn.MLGraphBuilder(ctx)
    ai = b.input("a", {"data_type": "int32", "shape": [3, 7]})
    w = b.where(b.lesser(ai, b.constant("int32", 0)), b.neg(ai), ai)
    y = b.add(w, b.constant("int32", 1))
    graph = b.build({"y": y, "w": w})
    got = ctx.compute(graph, {"a": a})
    np.testing.assert_array_equal(got["w"], np.abs(a))
    np.testing.assert_array_equal(got["y"], np.abs(a) + 1)
    b = webnn.MLGraphBuilder(ctx)
    xi = b.input("x", {"data_type": "int64", "shape": [5]})
    z = b.where(b.greater(xi, b.constant("int64", 2)), xi, b.constant("int64", -(2**40)))
    graph = b.build({"z": z})
    x = np.array([1, 3, 2**35, -4, 7], np.int64)
    np.testing.assert_array_equal(ctx.compute(graph, {"x": x})["z"], np.where(x > 2, x, -(2**40)))
