"""One-row dense layers in a row in one kernel (the compiler's ``fuse_dense_chain``,
``matmul/dense_chain.wgsl``) against float64 NumPy: gemm and matmul layers, widths that are not
multiples of 4, activations with helpers, a chain cut by a graph output; float16 (loaded as
float16, computed in float32 with float32 rows between layers, rounded at the store)."""

from __future__ import annotations

import numpy as np
import pytest

from helpers import kernel_templates, run_graph


def _layers(rng, sizes, dt=np.float32):
    return [((rng.standard_normal((n, k)) / np.sqrt(k)).astype(dt), rng.standard_normal(n).astype(dt))
            for k, n in zip(sizes, sizes[1:])]


def _build(layers, acts, mid_output=False):
    def build(b, o):
        v, outs = o["x"], {}
        dt = "float16" if layers[0][0].dtype == np.float16 else "float32"
        for i, ((w, c), act) in enumerate(zip(layers, acts)):
            v = b.gemm(v, b.constant({"data_type": dt, "shape": list(w.shape)}, w),
                       c=b.constant({"data_type": dt, "shape": list(c.shape)}, c), b_transpose=True)
            v = getattr(b, act)(v) if act else v
            if mid_output and i == 0:
                outs["mid"] = v
        outs["y"] = v
        return outs
    return build


def _act(name, v):
    return {"relu": lambda: np.maximum(v, 0), "sigmoid": lambda: 1 / (1 + np.exp(-v)), "tanh": lambda: np.tanh(v),
            "": lambda: v}[name]()


def _ref(x, layers, acts):
    v, outs = x.astype(np.float64), []
    for (w, c), act in zip(layers, acts):
        v = _act(act, v @ w.T.astype(np.float64) + c)
        outs.append(v)
    return outs


@pytest.mark.parametrize("sizes,acts", [([256, 64, 16, 64, 256], ["relu", "", "relu", "relu"]),
                                        ([30, 7, 13, 5], ["sigmoid", "tanh", "sigmoid"])])
def test_layers_in_one_kernel(ctx, rng, sizes, acts):
    x = rng.standard_normal((1, sizes[0])).astype(np.float32)
    layers = _layers(rng, sizes)
    build = _build(layers, acts)
    got = run_graph(ctx, build, {"x": x})["y"]
    np.testing.assert_allclose(got, _ref(x, layers, acts)[-1], rtol=1e-4, atol=1e-5)
    assert kernel_templates(ctx, build, {"x": x}) == ["matmul/dense_chain.wgsl"]


def test_a_graph_output_in_the_middle_cuts_the_chain(ctx, rng):
    sizes, acts = [24, 16, 8, 4], ["relu", "relu", ""]
    x = rng.standard_normal((1, 24)).astype(np.float32)
    layers = _layers(rng, sizes)
    build = _build(layers, acts, mid_output=True)
    got = run_graph(ctx, build, {"x": x})
    ref = _ref(x, layers, acts)
    np.testing.assert_allclose(got["mid"], ref[0], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got["y"], ref[-1], rtol=1e-4, atol=1e-5)
    templates = kernel_templates(ctx, build, {"x": x})
    assert templates.count("matmul/dense_chain.wgsl") == 1 and len(templates) == 2


@pytest.mark.parametrize("sizes,acts", [([256, 64, 16, 64, 256], ["relu", "", "relu", "relu"]),
                                        ([30, 7, 13, 5], ["sigmoid", "tanh", "sigmoid"])])
def test_float16_layers_in_one_kernel(ctx, rng, sizes, acts):
    x = rng.standard_normal((1, sizes[0])).astype(np.float16)
    layers = _layers(rng, sizes, np.float16)
    build = _build(layers, acts)
    got = run_graph(ctx, build, {"x": x})["y"].astype(np.float64)
    ref = _ref(x, layers, acts)[-1]
    np.testing.assert_allclose(got, ref, rtol=1e-2, atol=3e-2 * np.abs(ref).max())
    assert kernel_templates(ctx, build, {"x": x}) == ["matmul/dense_chain.wgsl"]
