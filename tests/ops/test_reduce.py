"""reduce_*, arg_min / arg_max and cumulative_sum against NumPy float64 references.

The references below are written from the spec's definitions with NumPy primitives (sums,
products, maxima over axes; explicit loops for the scans), independently of the kernels.
Float tolerances follow from the reduced element count K: a float32 sum of K values is within
about K * 2**-24 of the sum of magnitudes (WPT allows K ULP); float16 results are compared
after one rounding to float16 (the kernels accumulate in f32).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import webnn_gpu as webnn
from helpers import assert_close, run_graph

F32_EPS = 2.0**-24
F16_EPS = 2.0**-11


def _axes_tuple(axes, rank):
    return tuple(range(rank)) if axes is None else tuple(axes)


def ref_reduce(name: str, x: np.ndarray, axes, keep: bool) -> np.ndarray:
    """float64 reference of the spec's reduction types (empty axes: applied to each value)."""
    ax = _axes_tuple(axes, x.ndim)
    xd = x.astype(np.float64)
    with np.errstate(all="ignore"):
        if name == "reduce_l1":
            r = np.abs(xd).sum(axis=ax, keepdims=True)
        elif name == "reduce_l2":
            r = np.sqrt((xd * xd).sum(axis=ax, keepdims=True))
        elif name == "reduce_log_sum":
            r = np.log(xd.sum(axis=ax, keepdims=True))
        elif name == "reduce_log_sum_exp":
            r = np.log(np.exp(xd).sum(axis=ax, keepdims=True))
        elif name == "reduce_max":
            r = xd.max(axis=ax, keepdims=True) if ax else xd
        elif name == "reduce_mean":
            r = xd.mean(axis=ax, keepdims=True) if ax else xd
        elif name == "reduce_min":
            r = xd.min(axis=ax, keepdims=True) if ax else xd
        elif name == "reduce_product":
            r = xd.prod(axis=ax, keepdims=True)
        elif name == "reduce_sum":
            r = xd.sum(axis=ax, keepdims=True)
        elif name == "reduce_sum_square":
            r = (xd * xd).sum(axis=ax, keepdims=True)
        else:
            raise KeyError(name)
    if not keep:
        r = r.reshape([d for i, d in enumerate(x.shape) if i not in ax])
    return r


def tol_reduce(name: str, x: np.ndarray, axes, dtype) -> tuple[float, float]:
    """(atol, rtol) for a float reduction of x over axes (f32 accumulation, one final rounding)."""
    ax = _axes_tuple(axes, x.ndim)
    k = max(1, math.prod(x.shape[a] for a in ax))
    rtol = 2 * (F16_EPS if dtype == np.float16 else F32_EPS)
    xd = x.astype(np.float64)
    abs_sum = float(np.abs(xd).sum(axis=ax).max()) if ax else float(np.abs(xd).max())
    sq_sum = float((xd * xd).sum(axis=ax).max()) if ax else float((xd * xd).max())
    if name in ("reduce_max", "reduce_min"):
        return 0.0, 0.0
    if name in ("reduce_sum", "reduce_l1"):
        return 2 * k * F32_EPS * abs_sum, rtol
    if name in ("reduce_sum_square", "reduce_l2"):
        return 2 * k * F32_EPS * sq_sum, rtol
    if name == "reduce_mean":
        return 2 * F32_EPS * abs_sum, rtol
    if name == "reduce_product":
        return 0.0, (2 * k + 2) * F32_EPS + rtol
    if name == "reduce_log_sum":  # d(log s) = ds / s, and every value is >= 0.5
        return 2 * k * F32_EPS * abs_sum / (0.5 * k), rtol
    return (2 * k + 8) * F32_EPS, rtol  # log-sum-exp: relative error of the sum, made absolute by log


REDUCE_OPS = ["reduce_l1", "reduce_l2", "reduce_log_sum", "reduce_log_sum_exp", "reduce_max", "reduce_mean",
              "reduce_min", "reduce_product", "reduce_sum", "reduce_sum_square"]
AXES_CASES = [(None, False), (None, True), ([], False), ([1], False), ([2, 3], True), ([0, 2], False),
              ([3, 1], False), ([0, 1, 2, 3], False)]


def _sample_for(name: str, shape, rng, dtype=np.float32) -> np.ndarray:
    if name == "reduce_log_sum":
        x = rng.uniform(0.5, 2.0, shape)
    elif name == "reduce_product":
        x = rng.uniform(0.8, 1.25, shape) * rng.choice([-1.0, 1.0], shape)
    else:
        x = rng.standard_normal(shape) * 3
    return x.astype(dtype)


@pytest.mark.parametrize("name", REDUCE_OPS)
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_reduce_floats_every_axes_option(ctx, rng, name, dtype):
    x = _sample_for(name, (2, 3, 4, 5), rng, dtype)

    def build(b, ops):
        return {f"y{i}": getattr(b, name)(ops["x"], axes=axes, keep_dimensions=keep)
                for i, (axes, keep) in enumerate(AXES_CASES)}

    out = run_graph(ctx, build, {"x": x})
    for i, (axes, keep) in enumerate(AXES_CASES):
        got = out[f"y{i}"]
        assert got.dtype == dtype
        exp = ref_reduce(name, x, axes, keep)
        atol, rtol = tol_reduce(name, x, axes, dtype)
        assert_close(got, exp, atol=atol, rtol=rtol, err_msg=f"{name} axes={axes} keep={keep}")


@pytest.mark.parametrize("name", REDUCE_OPS)
def test_reduce_rank0_and_size1(ctx, name):
    x0 = np.array(1.75, np.float32)
    x1 = np.array([[[2.5]]], np.float32)

    def build(b, ops):
        f = getattr(b, name)
        return {"a": f(ops["s"]), "b": f(ops["s"], axes=[]), "c": f(ops["t"]),
                "d": f(ops["t"], axes=[1], keep_dimensions=True)}

    out = run_graph(ctx, build, {"s": x0, "t": x1})
    assert out["a"].shape == () and out["b"].shape == () and out["c"].shape == () and out["d"].shape == (1, 1, 1)
    for key, x, axes, keep in (("a", x0, None, False), ("b", x0, [], False), ("c", x1, None, False),
                               ("d", x1, [1], True)):
        assert_close(out[key], ref_reduce(name, x, axes, keep), atol=1e-6, rtol=1e-6, err_msg=f"{name} {key}")


INT_SUM_OPS = ["reduce_l1", "reduce_product", "reduce_sum", "reduce_sum_square"]


@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.int64, np.uint64])
def test_reduce_integer_sums_wrap_like_the_type(ctx, rng, dtype):
    info = np.iinfo(dtype)
    x = rng.integers(max(info.min, -1000), 1000, size=(3, 4, 6), dtype=dtype, endpoint=True)
    big = np.array([info.max, info.max // 2 + 3, 7], dtype)  # overflows: must wrap, not saturate

    def build(b, ops):
        outs = {}
        for name in INT_SUM_OPS:
            outs[name] = getattr(b, name)(ops["x"], axes=[0, 2])
            outs[name + "_all"] = getattr(b, name)(ops["x"])
        outs["big_sum"] = b.reduce_sum(ops["big"])
        outs["big_product"] = b.reduce_product(ops["big"])
        return outs

    out = run_graph(ctx, build, {"x": x, "big": big})

    def wrap_sum(v, axis=None):
        return np.sum(v, axis=axis, dtype=dtype)

    def wrap_prod(v, axis=None):
        return np.prod(v, axis=axis, dtype=dtype)

    absx = np.where(x < 0, -x, x) if info.min < 0 else x
    for name, f in (("reduce_l1", lambda v, a: wrap_sum(absx, a)), ("reduce_product", wrap_prod),
                    ("reduce_sum", wrap_sum), ("reduce_sum_square", lambda v, a: wrap_sum(v * v, a))):
        np.testing.assert_array_equal(out[name], f(x, (0, 2)), err_msg=name)
        np.testing.assert_array_equal(out[name + "_all"], f(x, None), err_msg=name)
    np.testing.assert_array_equal(out["big_sum"], wrap_sum(big))
    np.testing.assert_array_equal(out["big_product"], wrap_prod(big))


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32, np.uint32, np.int64, np.uint64])
def test_reduce_max_min_integers(ctx, rng, dtype):
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max, size=(5, 7, 3), dtype=dtype, endpoint=True)
    x[0, 0, 0], x[1, 1, 1] = info.min, info.max

    def build(b, ops):
        return {"max": b.reduce_max(ops["x"], axes=[1]),
                "min": b.reduce_min(ops["x"], axes=[0, 2], keep_dimensions=True),
                "gmax": b.reduce_max(ops["x"]), "gmin": b.reduce_min(ops["x"])}

    out = run_graph(ctx, build, {"x": x})
    np.testing.assert_array_equal(out["max"], x.max(axis=1))
    np.testing.assert_array_equal(out["min"], x.min(axis=(0, 2), keepdims=True))
    assert out["gmax"] == info.max and out["gmin"] == info.min and out["gmax"].dtype == dtype


def test_reduce_nan_and_infinity(ctx):
    x = np.array([[1.0, np.nan, 3.0], [-np.inf, 2.0, 5.0], [np.inf, np.inf, 1.0], [-np.inf, -np.inf, -np.inf]],
                 np.float32)
    ops = ["reduce_max", "reduce_min", "reduce_sum", "reduce_mean", "reduce_log_sum_exp", "reduce_l2"]

    def build(b, o):
        return {name: getattr(b, name)(o["x"], axes=[1]) for name in ops}

    out = run_graph(ctx, build, {"x": x})
    for name in ops:
        assert_close(out[name], ref_reduce(name, x, [1], False), atol=1e-6, rtol=1e-6, err_msg=name)
    # NaN wins in max and min wherever it sits
    assert np.isnan(out["reduce_max"][0]) and np.isnan(out["reduce_min"][0])
    # log-sum-exp of all -inf is -inf; with a +inf it is +inf (the max shift does not make NaN)
    assert out["reduce_log_sum_exp"][3] == -np.inf and out["reduce_log_sum_exp"][2] == np.inf


def test_reduce_log_sum_exp_is_stable_for_large_values(ctx, rng):
    x = (rng.standard_normal((4, 300)) * 5 + 1000).astype(np.float32)  # exp(1000) overflows f32 and f64
    out = run_graph(ctx, lambda b, o: {"y": b.reduce_log_sum_exp(o["x"], axes=[1])}, {"x": x})
    xd = x.astype(np.float64)
    m = xd.max(axis=1, keepdims=True)
    exp = (m + np.log(np.exp(xd - m).sum(axis=1, keepdims=True)))[:, 0]
    assert np.all(np.isfinite(out["y"]))
    assert_close(out["y"], exp, atol=1e-3, rtol=0)


def test_reduce_large_extent_is_split_and_exact_enough(ctx, rng):
    """One output over 2**20 values (the split two-pass path), 300 outputs of 9,000 values (a
    workgroup each) and 4.3 million outputs of 2 values (one invocation each: more than 65,535
    workgroups of 64, folded into 2-D)."""
    n = 1 << 20
    x = rng.standard_normal(n).astype(np.float32)
    x[777_777] = 50.0
    y = (rng.standard_normal((4_300_000, 2)) + 1).astype(np.float32)
    z = rng.standard_normal((300, 9000)).astype(np.float32)

    def build(b, o):
        return {"sum": b.reduce_sum(o["x"]), "mean": b.reduce_mean(o["x"]), "max": b.reduce_max(o["x"]),
                "argmax": b.arg_max(o["x"], 0), "l2": b.reduce_l2(o["x"]), "rows": b.reduce_sum(o["y"], axes=[1]),
                "rowmax": b.arg_max(o["y"], 1), "zmean": b.reduce_mean(o["z"], axes=[1])}

    out = run_graph(ctx, build, {"x": x, "y": y, "z": z}, tensor_path=False)
    xd = x.astype(np.float64)
    # pairwise-ish accumulation: far better than K ULP
    assert_close(out["sum"], xd.sum(), atol=np.abs(xd).sum() * 1e-6)
    assert_close(out["mean"], xd.mean(), atol=np.abs(xd).mean() * 1e-6)
    assert out["max"] == 50.0 and out["argmax"] == 777_777
    assert_close(out["l2"], np.sqrt((xd * xd).sum()), atol=0, rtol=1e-6)
    np.testing.assert_array_equal(out["rows"], (y[:, 0] + y[:, 1]))  # one f32 addition: exact
    np.testing.assert_array_equal(out["rowmax"], np.argmax(y, axis=1))
    zd = z.astype(np.float64)
    assert_close(out["zmean"], zd.mean(axis=1), atol=np.abs(zd).mean(axis=1).max() * 1e-6)


def test_reduce_float16_accumulates_in_f32(ctx):
    # 4096 ones in float16: a float16 accumulator stalls at 2048; f32 gets it exactly
    x = np.ones(4096, np.float16)
    out = run_graph(ctx, lambda b, o: {"s": b.reduce_sum(o["x"]), "m": b.reduce_mean(o["x"])}, {"x": x})
    assert out["s"] == 4096 and out["m"] == 1 and out["s"].dtype == np.float16
    # overflow of the float16 result gives inf
    big = np.full(16, 60000, np.float16)
    assert run_graph(ctx, lambda b, o: {"s": b.reduce_sum(o["x"])}, {"x": big})["s"] == np.inf


# ---------------------------------------------------------------- arg_min / arg_max
def ref_arg(x: np.ndarray, axis: int, largest: bool, keep: bool) -> np.ndarray:
    """First index of the extreme value along axis; a NaN counts as extreme (first NaN wins)."""
    moved = np.moveaxis(x, axis, -1)
    flat = moved.reshape(-1, moved.shape[-1])
    res = np.empty(flat.shape[0], np.int64)
    for i, row in enumerate(flat):
        best = None
        for j, v in enumerate(row):
            if best is None:
                best = j
                continue
            b = row[best]
            if isinstance(b, float) or np.issubdtype(row.dtype, np.floating):
                if np.isnan(b):
                    continue
                if np.isnan(v):
                    best = j
                    continue
            if (v > b) if largest else (v < b):
                best = j
        res[i] = best
    res = res.reshape(moved.shape[:-1])
    return np.expand_dims(res, axis) if keep else res


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.uint32, np.int64, np.uint64, np.int8, np.uint8])
def test_arg_min_max_every_type_and_option(ctx, rng, dtype):
    if np.issubdtype(dtype, np.floating):
        x = rng.integers(-3, 3, size=(3, 4, 5)).astype(dtype)  # many ties
        x[1, 2, 3] = np.nan
    else:
        info = np.iinfo(dtype)
        x = rng.integers(max(info.min, -3), min(info.max, 3), size=(3, 4, 5), dtype=dtype, endpoint=True)

    cases = [(0, False, "int32"), (1, True, "int64"), (2, False, "int64"), (2, True, "int32")]

    def build(b, o):
        outs = {}
        for i, (axis, keep, odt) in enumerate(cases):
            outs[f"max{i}"] = b.arg_max(o["x"], axis, keep_dimensions=keep, output_data_type=odt)
            outs[f"min{i}"] = b.arg_min(o["x"], axis, keep_dimensions=keep, output_data_type=odt)
        return outs

    out = run_graph(ctx, build, {"x": x})
    for i, (axis, keep, odt) in enumerate(cases):
        assert out[f"max{i}"].dtype == np.dtype(odt)
        np.testing.assert_array_equal(out[f"max{i}"], ref_arg(x, axis, True, keep), err_msg=f"max {axis} {keep}")
        np.testing.assert_array_equal(out[f"min{i}"], ref_arg(x, axis, False, keep), err_msg=f"min {axis} {keep}")


def test_arg_ties_pick_the_first_index(ctx):
    x = np.array([[5, 1, 5, 2], [2, 2, 2, 2]], np.float32)
    out = run_graph(ctx, lambda b, o: {"a": b.arg_max(o["x"], 1), "b": b.arg_min(o["x"], 1),
                                        "c": b.arg_max(o["x"], 0)}, {"x": x})
    np.testing.assert_array_equal(out["a"], [0, 0])
    np.testing.assert_array_equal(out["b"], [1, 0])
    np.testing.assert_array_equal(out["c"], [0, 1, 0, 0])


def test_arg_min_max_long_axis(ctx, rng):
    """Axes of 300 values run one workgroup per output; ties and NaN still follow the rules."""
    f = rng.integers(-5, 5, size=(3, 300)).astype(np.float32)
    f[1, 150] = np.nan
    f[1, 200] = np.nan
    i = rng.integers(-5, 5, size=(300, 4)).astype(np.int32)
    out = run_graph(ctx, lambda b, o: {"fmax": b.arg_max(o["f"], 1), "fmin": b.arg_min(o["f"], 1),
                                       "imax": b.arg_max(o["i"], 0), "imin": b.arg_min(o["i"], 0,
                                                                                      output_data_type="int64")},
                    {"f": f, "i": i})
    np.testing.assert_array_equal(out["fmax"], ref_arg(f, 1, True, False))
    np.testing.assert_array_equal(out["fmin"], ref_arg(f, 1, False, False))
    assert out["fmax"][1] == 150 and out["fmin"][1] == 150
    np.testing.assert_array_equal(out["imax"], np.argmax(i, axis=0))
    np.testing.assert_array_equal(out["imin"], np.argmin(i, axis=0))


# ---------------------------------------------------------------- cumulative_sum
def ref_cumsum(x: np.ndarray, axis: int, exclusive: bool, reverse: bool) -> np.ndarray:
    """Plain loop over the axis in float64 (or the integer type, wrapping)."""
    acc_dtype = np.float64 if np.issubdtype(x.dtype, np.floating) else x.dtype
    xs = np.moveaxis(x.astype(acc_dtype), axis, 0)
    out = np.zeros_like(xs)
    acc = np.zeros(xs.shape[1:], acc_dtype)
    order = range(xs.shape[0] - 1, -1, -1) if reverse else range(xs.shape[0])
    for j in order:
        if exclusive:
            out[j] = acc
            acc = acc + xs[j]
        else:
            acc = acc + xs[j]
            out[j] = acc
    return np.moveaxis(out, 0, axis)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.uint32, np.int64, np.uint64])
def test_cumulative_sum_every_option(ctx, rng, dtype):
    if np.issubdtype(dtype, np.floating):
        x = rng.standard_normal((3, 5, 4)).astype(dtype)
    else:
        x = rng.integers(0, 50, size=(3, 5, 4)).astype(dtype)
    cases = [(a, ex, rev) for a in (0, 1, 2) for ex in (False, True) for rev in (False, True)]

    def build(b, o):
        return {f"y{i}": b.cumulative_sum(o["x"], a, exclusive=ex, reversed=rev)
                for i, (a, ex, rev) in enumerate(cases)}

    out = run_graph(ctx, build, {"x": x})
    for i, (a, ex, rev) in enumerate(cases):
        exp = ref_cumsum(x, a, ex, rev)
        if np.issubdtype(dtype, np.floating):
            eps = F16_EPS if dtype == np.float16 else F32_EPS
            assert_close(out[f"y{i}"], exp, atol=10 * eps * np.abs(x.astype(np.float64)).sum(), rtol=eps * 2,
                         err_msg=f"axis={a} exclusive={ex} reversed={rev}")
        else:
            np.testing.assert_array_equal(out[f"y{i}"], exp, err_msg=f"axis={a} exclusive={ex} reversed={rev}")


def test_cumulative_sum_long_line_uses_blocks(ctx, rng):
    x = rng.integers(-100, 100, size=(2, 9000)).astype(np.int32)
    f = rng.standard_normal(9000).astype(np.float32)

    def build(b, o):
        return {"a": b.cumulative_sum(o["x"], 1), "b": b.cumulative_sum(o["x"], 1, exclusive=True, reversed=True),
                "c": b.cumulative_sum(o["f"], 0, reversed=True)}

    out = run_graph(ctx, build, {"x": x, "f": f})
    np.testing.assert_array_equal(out["a"], ref_cumsum(x, 1, False, False))
    np.testing.assert_array_equal(out["b"], ref_cumsum(x, 1, True, True))
    assert_close(out["c"], ref_cumsum(f, 0, False, True), atol=9000 * 4 * F32_EPS * np.abs(f).sum())


# ---------------------------------------------------------------- validation
def test_reduce_validation_errors(ctx):
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [2, 3, 4]})
    i = b.input("i", {"data_type": "int32", "shape": [2, 3]})
    s = b.input("s", {"data_type": "float32", "shape": []})
    with pytest.raises(webnn.MLTypeError,
                       match=r"reduce_mean \['m'\]: argument 'input': expected .*float32.*got 'int32'"):
        b.reduce_mean(i, label="m")
    for bad in ([3], [-1], [0, 0], [1.0], "0", 1):
        with pytest.raises(webnn.MLTypeError, match="reduce_sum: argument 'axes'"):
            b.reduce_sum(x, axes=bad)
    with pytest.raises(webnn.MLTypeError, match="argument 'keep_dimensions': expected a bool"):
        b.reduce_max(x, keep_dimensions=1)
    with pytest.raises(webnn.MLTypeError, match="unknown option.*'axis'"):
        b.reduce_l1(x, axis=[0])
    with pytest.raises(webnn.MLTypeError, match="reduce_sum: argument 'axes'"):
        b.reduce_sum(s, axes=[0])
    with pytest.raises(webnn.MLTypeError, match="reduce_l2: argument 'input'.*got 'uint8'"):
        b.reduce_l2(b.input("u", {"data_type": "uint8", "shape": [2]}))
    with pytest.raises(webnn.MLTypeError, match="argument 'input'"):
        b.reduce_sum(np.zeros(3, np.float32))
    other = webnn.MLGraphBuilder(ctx).input("y", {"data_type": "float32", "shape": [2]})
    with pytest.raises(webnn.MLTypeError, match="another builder"):
        b.reduce_sum(other)
    # arg_min / arg_max
    with pytest.raises(webnn.MLTypeError, match="arg_max: argument 'axis'"):
        b.arg_max(x, 3)
    with pytest.raises(webnn.MLTypeError, match="arg_max: argument 'axis'"):
        b.arg_max(s, 0)
    with pytest.raises(webnn.MLTypeError, match="argument 'output_data_type': expected 'int32' or 'int64'"):
        b.arg_min(x, 0, output_data_type="uint32")
    with pytest.raises(webnn.MLTypeError, match="argument 'output_data_type'"):
        b.arg_min(x, 0, output_data_type="int")
    # cumulative_sum
    with pytest.raises(webnn.MLTypeError, match="cumulative_sum: argument 'input'.*got 'int8'"):
        b.cumulative_sum(b.input("q", {"data_type": "int8", "shape": [2]}), 0)
    with pytest.raises(webnn.MLTypeError, match="cumulative_sum: argument 'axis'"):
        b.cumulative_sum(x, 3)
    with pytest.raises(webnn.MLTypeError, match="argument 'exclusive': expected a bool"):
        b.cumulative_sum(x, 0, exclusive="yes")
    # the builder is still usable after every failure
    g = b.build({"y": b.reduce_sum(x, axes=[2])})
    out = ctx.compute(g, {"x": np.ones((2, 3, 4), np.float32)})
    np.testing.assert_array_equal(out["y"], np.full((2, 3), 4.0))


def test_reduce_support_limits(ctx):
    lim = ctx.op_support_limits()
    assert lim["reduce_sum"]["input"]["data_types"] == ["float32", "float16", "int32", "uint32", "int64", "uint64"]
    assert lim["reduce_mean"]["input"]["data_types"] == ["float32", "float16"]
    assert "int8" in lim["reduce_max"]["input"]["data_types"]
    assert lim["arg_max"]["output"]["data_types"] == ["int32", "int64"]
    assert lim["cumulative_sum"]["input"]["rank_range"] == {"min": 1, "max": 8}


def test_int64_arithmetic_needs_shader_int64():
    """Without shader-int64, int64 reductions are refused at build time (NotSupportedError); an
    int64 arg_max output needs no int64 arithmetic (indices are stored as raw word pairs)."""
    c = webnn.ml.create_context()
    try:
        c._features = frozenset(c._features - {"shader-int64"})  # simulate an adapter without it
        b = webnn.MLGraphBuilder(c)
        i64 = b.input("i64", {"data_type": "int64", "shape": [1, 1, 4, 4]})
        u64 = b.input("u64", {"data_type": "uint64", "shape": [4]})
        for call in (lambda: b.reduce_sum(i64), lambda: b.reduce_max(u64), lambda: b.arg_min(i64, 3),
                     lambda: b.cumulative_sum(u64, 0), lambda: b.max_pool2d(i64)):
            with pytest.raises(webnn.NotSupportedError, match="shader-int64"):
                call()
        x = b.input("x", {"data_type": "float32", "shape": [3, 5]})
        g = b.build({"y": b.arg_max(x, 1, output_data_type="int64")})
        data = np.array([[0, 3, 1, 3, 2], [9, 8, 7, 6, 5], [1, 1, 1, 1, 4]], np.float32)
        np.testing.assert_array_equal(c.compute(g, {"x": data})["y"], np.array([1, 0, 4], np.int64))
    finally:
        c.destroy()
