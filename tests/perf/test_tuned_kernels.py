"""The kernels tuned for the selfie model: column reductions (NHWC global pools) and the
four-channel resample2d, against NumPy float64 and against the general kernels."""

from __future__ import annotations

import numpy as np
import pytest

import webnn_gpu as webnn

from helpers import run_graph
from references import ref_resample


@pytest.mark.parametrize("shape", [(1, 128, 128, 16), (1, 16, 16, 96), (1, 3, 5, 8), (2, 7, 9, 12)])
@pytest.mark.parametrize("dt", ["float32", "float16"])
def test_global_average_pool_nhwc(ctx, rng, shape, dt):
    npdt = np.float32 if dt == "float32" else np.float16
    with np.errstate(under="ignore"):
        x = rng.standard_normal(shape).astype(npdt)
    got = run_graph(ctx, lambda b, o: {"y": b.average_pool2d(o["x"], layout="nhwc")}, {"x": x})["y"]
    ref = x.astype(np.float64).mean(axis=(1, 2), keepdims=True)
    tol = 1e-5 if dt == "float32" else 2e-3
    np.testing.assert_allclose(got.astype(np.float64), ref, atol=tol, rtol=tol)


@pytest.mark.parametrize("op", ["reduce_sum", "reduce_max", "reduce_min", "reduce_l2", "reduce_mean",
                                "reduce_product", "reduce_sum_square", "reduce_l1", "reduce_log_sum"])
def test_row_reductions_of_a_matrix(ctx, rng, op):
    x = rng.uniform(0.5, 1.5, (3000, 8)).astype(np.float32)  # split into partials
    small = rng.uniform(0.5, 1.5, (5, 8)).astype(np.float32)  # one pass
    x64, s64 = x.astype(np.float64), small.astype(np.float64)
    ref = {
        "reduce_sum": lambda a: a.sum(0), "reduce_max": lambda a: a.max(0), "reduce_min": lambda a: a.min(0),
        "reduce_l2": lambda a: np.sqrt((a * a).sum(0)), "reduce_mean": lambda a: a.mean(0),
        "reduce_product": lambda a: np.prod(a[:40], 0), "reduce_sum_square": lambda a: (a * a).sum(0),
        "reduce_l1": lambda a: np.abs(a).sum(0), "reduce_log_sum": lambda a: np.log(a.sum(0)),
    }[op]
    big = x[:40] if op == "reduce_product" else x  # keep the product finite

    def build(b, o):
        return {"y": getattr(b, op)(o["x"], axes=[0]), "z": getattr(b, op)(o["s"], axes=[0])}

    got = run_graph(ctx, build, {"x": big, "s": small})
    np.testing.assert_allclose(got["y"], ref(x64 if op != "reduce_product" else x64), rtol=2e-5, atol=1e-5)
    np.testing.assert_allclose(got["z"], ref(s64), rtol=2e-5, atol=1e-5)


def test_integer_column_sum_and_max_with_nan_floats(ctx, rng):
    xi = rng.integers(-1000, 1000, (700, 12)).astype(np.int32)
    xf = rng.standard_normal((700, 12)).astype(np.float32)
    xf[300, 5] = np.nan
    got = run_graph(ctx, lambda b, o: {"s": b.reduce_sum(o["i"], axes=[0]), "m": b.reduce_max(o["f"], axes=[0])},
                    {"i": xi, "f": xf})
    np.testing.assert_array_equal(got["s"], xi.sum(0, dtype=np.int64).astype(np.int32))
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(got["m"], xf.max(0))


def _resample_linear_ref(x, oh, ow):
    """Half-pixel bilinear resampling of axes 1, 2 of NHWC, in float64."""
    return ref_resample(x, "linear", (oh, ow), axes=(1, 2))


@pytest.mark.parametrize("dt", ["float32", "float16"])
@pytest.mark.parametrize("mode", ["linear", "nearest-neighbor"])
def test_resample_four_channels_matches_the_scalar_kernel(ctx, rng, monkeypatch, dt, mode):
    npdt = np.float32 if dt == "float32" else np.float16
    with np.errstate(under="ignore"):
        x = rng.standard_normal((2, 9, 7, 8)).astype(npdt)

    def build(b, o):
        return {"y": b.resample2d(o["x"], mode=mode, sizes=[18, 13], axes=[1, 2])}

    vec = run_graph(ctx, build, {"x": x})["y"]
    monkeypatch.setenv("WEBNN_GPU_FORCE_RESAMPLE", "scalar")
    scalar = run_graph(ctx, build, {"x": x})["y"]
    np.testing.assert_array_equal(vec.view(np.uint8), scalar.view(np.uint8))
    if mode == "linear":
        tol = 1e-5 if dt == "float32" else 2e-3
        np.testing.assert_allclose(vec.astype(np.float64), _resample_linear_ref(x.astype(np.float64), 18, 13),
                                   atol=tol, rtol=tol)


def test_the_tuned_kernels_are_the_ones_chosen(ctx):
    import webnn_gpu as webnn

    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [1, 128, 128, 16]})
    g = b.build({"p": b.average_pool2d(x, layout="nhwc"),
                 "r": b.resample2d(x, mode="linear", sizes=[256, 256], axes=[1, 2])})
    templates = [s.template for s in g._steps if hasattr(s, "template")]
    assert templates.count("reduce/columns.wgsl") == 2  # row splits, then their partials
    assert "resample/resample2d_x2.wgsl" in templates
    g.destroy()


@pytest.mark.parametrize("dt", ["float32", "float16"])
@pytest.mark.parametrize("shape, axes", [((2, 9, 7, 8), [1, 2]), ((1, 1, 1, 4), [1, 2]), ((3, 2, 5, 4), [0, 2]),
                                         ((1, 16, 16, 128), [1, 2])])
def test_resample_doubling_kernel_is_bit_identical_to_the_others(ctx, rng, monkeypatch, dt, shape, axes):
    """resample2d_x2.wgsl (2 x 2 outputs per invocation) against the vec4 and scalar kernels,
    borders and 1-pixel axes included; and against float64 NumPy."""
    npdt = np.float32 if dt == "float32" else np.float16
    with np.errstate(under="ignore"):
        x = rng.standard_normal(shape).astype(npdt)
    sizes = [2 * shape[a] for a in axes]

    def build(b, o):
        return {"y": b.resample2d(o["x"], mode="linear", sizes=sizes, axes=axes)}

    def templates():
        b = webnn.MLGraphBuilder(ctx)
        g = b.build(build(b, {"x": b.input("x", {"data_type": dt, "shape": list(shape)})}))
        return [s.template for s in g._steps if hasattr(s, "template")]

    outs = {}
    for force in ("", "vec4", "scalar"):
        monkeypatch.setenv("WEBNN_GPU_FORCE_RESAMPLE", force)
        outs[force or "x2"] = run_graph(ctx, build, {"x": x})["y"]
        if not force:
            assert templates() == ["resample/resample2d_x2.wgsl"]
    for k in ("vec4", "scalar"):
        np.testing.assert_array_equal(outs["x2"].view(np.uint8), outs[k].view(np.uint8), err_msg=k)
    if axes == [1, 2]:
        tol = 1e-5 if dt == "float32" else 2e-3
        np.testing.assert_allclose(outs["x2"].astype(np.float64),
                                   _resample_linear_ref(x.astype(np.float64), *sizes), atol=tol, rtol=tol)
