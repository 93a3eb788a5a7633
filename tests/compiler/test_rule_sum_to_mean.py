"""The ``sum_to_mean`` rule: a float16 ``reduce_sum`` scaled by exactly one over its count is a
``reduce_mean`` (n a power of two). On hand-made IR (no GPU), checked by a float64 evaluator of the IR, near misses
included; and on the GPU against float64 NumPy with a sum past float16's range (a decomposed
layer normalization's sum of squares, as Magika's jax2tf graph writes it)."""

from __future__ import annotations

import numpy as np
import pytest
from _ireval import checked_rewrite
from _irb import IR
from helpers import run_graph

from webnn_gpu.compiler.rules.canonical import sum_to_mean


def _sum(ir, x, axes, keep=True):
    shape = tuple(1 if d in axes else s for d, s in enumerate(x.shape)) if keep else \
        tuple(s for d, s in enumerate(x.shape) if d not in axes)
    return ir.op("reduce_sum", [x], shape, axes=list(axes), keep=keep)


@pytest.mark.parametrize("form", ["sum * 1/n", "1/n * sum", "sum / n", "keep no dimensions", "all axes", "float32"])
def test_a_sum_scaled_by_one_over_its_count_becomes_a_mean(form):
    ir = IR("float32" if form == "float32" else "float16")
    x = ir.input((2, 8, 64))
    sq = ir.op("mul", [x, x])
    axes = [0, 1, 2] if form == "all axes" else [2]
    n = 2 * 8 * 64 if form == "all axes" else 64
    s = _sum(ir, sq, axes, keep=form != "keep no dimensions")
    if form == "sum / n":
        y = ir.op("div", [s, ir.const(float(n))])
    elif form == "1/n * sum":
        y = ir.op("mul", [ir.const(1.0 / n), s])
    else:
        y = ir.op("mul", [s, ir.const([1.0 / n])])
    new = checked_rewrite(sum_to_mean, ir, {"y": y}, rtol=1e-12, atol=0)
    assert [node.op for node in new] == ["mul", "reduce_mean"]
    assert new[1].inputs == [sq] and new[1].outputs == [y]
    assert new[1].attrs == {"axes": axes, "keep": form != "keep no dimensions"}


@pytest.mark.parametrize("case", ["1/n rounded (n = 48)", "n / ... (n = 48)", "another scale", "scale per element",
                                  "scale an input", "sum read twice", "sum a graph output", "n / sum",
                                  "broadcast to a larger shape", "sum has an epilogue"])
def test_near_misses_stay_a_sum(case):
    ir = IR("float16")
    n = 48 if "n = 48" in case else 64
    x = ir.input((2, 8, n))
    s = ir.op("reduce_sum", [x], (2, 8, 1), axes=[2], keep=True,
              **({"epilogue": [{"op": "relu"}]} if case == "sum has an epilogue" else {}))
    c = {"another scale": ir.const([2.0 / n]), "scale per element": ir.const(np.full((2, 8, 1), 1.0 / n)),
         "scale an input": ir.input((1,))}.get(case, ir.const([1.0 / n]))
    outputs = {}
    if case == "n / ... (n = 48)":
        y = ir.op("div", [s, ir.const([float(n)])])
    elif case == "n / sum":
        y = ir.op("div", [ir.const([float(n)]), s])
    elif case == "broadcast to a larger shape":
        y = ir.op("mul", [s, ir.const(np.full((1, 1, 3), 1.0 / n))])
    else:
        y = ir.op("mul", [s, c])
    outputs["y"] = y
    if case == "sum read twice":
        outputs["z"] = ir.op("relu", [s])
    if case == "sum a graph output":
        outputs["s"] = s
    assert sum_to_mean(list(ir.nodes), outputs) == ir.nodes


def _layer_norm_variance(b, ops):
    """``sum(x * x) / 512`` over the last axis, as a decomposed layer normalization computes
    the mean of the squares (a mul by the reciprocal, which is exact)."""
    x = ops["x"]
    s = b.reduce_sum(b.mul(x, x), axes=[1], keep_dimensions=True)
    return {"y": b.mul(s, b.constant({"data_type": "float16", "shape": [1]}, np.array([1 / 512], np.float16)))}


def test_a_float16_mean_of_squares_past_65504_is_finite(ctx, monkeypatch):
    """512 squares of values about 20 sum to 2.1e5, past float16's 65504: the sum alone is +inf
    in float16, its mean 410 is not. Against float64 NumPy within float16's rounding."""
    rng = np.random.default_rng(13)
    x = (20 + rng.standard_normal((2, 512))).astype(np.float16)
    want = (x.astype(np.float64) ** 2).mean(axis=1, keepdims=True)
    assert (x.astype(np.float64) ** 2).sum(axis=1).min() > 65504
    got = run_graph(ctx, _layer_norm_variance, {"x": x})["y"]
    assert got.dtype == np.float16 and np.isfinite(got).all()
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=2 ** -10, atol=0)
    monkeypatch.setenv("WEBNN_GPU_PASSES", "-sum_to_mean")  # the two kernels: the sum rounds to +inf
    assert np.isinf(run_graph(ctx, _layer_norm_variance, {"x": x})["y"]).all()


def test_float32_results_are_bit_identical_with_the_rule_off(ctx, monkeypatch):
    """In float32 the mean is the same number as the sum scaled by 1/512: the same bits with
    ``WEBNN_GPU_PASSES=-sum_to_mean``, and the mean of the squares against float64."""
    rng = np.random.default_rng(14)
    x = (20 + rng.standard_normal((2, 512))).astype(np.float32)

    def build(b, ops):
        s = b.reduce_sum(b.mul(ops["x"], ops["x"]), axes=[1], keep_dimensions=True)
        return {"y": b.mul(s, b.constant({"data_type": "float32", "shape": [1]}, np.array([1 / 512], np.float32)))}

    got = run_graph(ctx, build, {"x": x})["y"]
    np.testing.assert_allclose(got, (x.astype(np.float64) ** 2).mean(axis=1, keepdims=True), rtol=1e-6)
    monkeypatch.setenv("WEBNN_GPU_PASSES", "-sum_to_mean")
    assert run_graph(ctx, build, {"x": x})["y"].tobytes() == got.tobytes()
