"""The element-wise family (webnn_gpu/ops/elementwise.py) against float64 NumPy references.

Every binary op (both broadcast directions, rank 0 and rank 5), comparison, logical op, unary
op, activation (with options), clamp, cast (all 8 x 8 type pairs) and where, over every data
type each op supports; NaN and infinities; a tensor past 65535 * 256 elements; validation
errors.

Tolerances are WPT's (shared/wpt/tolerances.json: the ``current`` table, then the per-file
functions, then ``legacy_PrecisionMetrics``): ("ulp", n) compares bit patterns of the float64
reference rounded to the output type; ("atol", v) compares absolute differences; integer
results are exact. Integer semantics follow the operator docstrings: arithmetic wraps
(two's complement), integer division truncates with x / 0 = x, pow with a negative exponent
is 1 for base 1, +-1 for base -1 and 0 otherwise; cast float -> int truncates, saturates and
maps NaN to 0; cast int -> narrower int wraps.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import webnn_gpu as webnn
from helpers import run_graph, ulp_distance
from webnn_gpu import _dtypes
from webnn_gpu.errors import MLTypeError

ALL = list(_dtypes.DATA_TYPES)
FLOATS = ["float32", "float16"]
INTS = ["int32", "uint32", "int64", "uint64", "int8", "uint8"]
SIGNED = ["float32", "float16", "int32", "int64", "int8"]

ULP, ATOL = "ulp", "atol"
A10, A9 = 1 / 1024, 1 / 512  # WPT's ATOL for float32 / float16 where it uses ATOL
# (metric, float32 value, float16 value)
TOL = {
    "add": (ULP, 1, 1), "sub": (ULP, 1, 1), "mul": (ULP, 1, 1), "div": (ULP, 2, 2), "max": (ULP, 0, 0),
    "min": (ULP, 0, 0), "pow": (ULP, 32, 2), "abs": (ULP, 0, 0), "neg": (ULP, 0, 0), "sign": (ULP, 0, 0),
    "ceil": (ULP, 0, 0), "floor": (ULP, 0, 0), "round_even": (ULP, 0, 0), "exp": (ULP, 32, 1),
    "log": (ATOL, A10, A10), "sqrt": (ULP, 1, 1), "sin": (ATOL, A10, A9), "cos": (ATOL, A10, A9),
    "tan": (ATOL, A10, A9), "erf": (ATOL, A10, A9), "reciprocal": (ULP, 2, 2), "identity": (ULP, 0, 0),
    "relu": (ULP, 0, 0), "sigmoid": (ULP, 34, 3), "tanh": (ATOL, A10, A9), "gelu": (ULP, 18, 18),
    "softplus": (ULP, 18, 18), "softsign": (ULP, 3, 3), "hard_swish": (ULP, 4, 4), "prelu": (ULP, 1, 1),
    "elu": (ULP, 18, 18), "leaky_relu": (ULP, 1, 1), "hard_sigmoid": (ULP, 2, 2), "linear": (ULP, 2, 2),
    "clamp": (ULP, 0, 0), "cast": (ULP, 1, 1), "where": (ULP, 0, 0),
}


# ---------------------------------------------------------------- comparison helpers
def check(op: str, got: np.ndarray, want, dtype: str, what: str = "") -> None:
    """Compare an op's output with its float64 (or exact integer) reference."""
    msg = f"{op} {dtype} {what}"
    assert got.dtype == np.dtype(dtype), msg
    want = np.asarray(want)
    assert got.shape == want.shape, f"{msg}: shape {got.shape} != {want.shape}"
    if not _dtypes.info(dtype).is_float:
        np.testing.assert_array_equal(got, want.astype(dtype) if want.dtype != object else want, err_msg=msg)
        return
    metric, v32, v16 = TOL[op]
    tol = v32 if dtype == "float32" else v16
    with np.errstate(all="ignore"):
        exp = want.astype(dtype)
        nan = np.isnan(want.astype(np.float64))
    np.testing.assert_array_equal(np.isnan(got), nan, err_msg=f"{msg}: NaN positions")
    g, e, w = got[~nan], exp[~nan], want[~nan].astype(np.float64)
    inf = np.isinf(e)
    np.testing.assert_array_equal(g[inf], e[inf], err_msg=f"{msg}: infinities")
    if metric == ULP:
        d = ulp_distance(g[~inf], e[~inf])
        bad = np.flatnonzero(d > tol)
        assert bad.size == 0, f"{msg}: {bad.size} values beyond {tol} ULP, e.g. got {g[~inf][bad[:5]]} " \
                              f"want {w[~inf][bad[:5]]} ({d[bad[:5]]} ULP)"
    else:  # like WPT: against the expected value in the output's data type
        with np.errstate(all="ignore"):
            d = np.abs(g[~inf].astype(np.float64) - e[~inf].astype(np.float64))
        assert np.all(d <= tol), f"{msg}: max abs error {d.max()} > {tol}"


def _wrap(values, dtype: str) -> np.ndarray:
    """Python ints -> dtype with two's complement wrap-around."""
    ii = np.iinfo(dtype)
    bits = ii.bits
    out = []
    for v in np.asarray(values, dtype=object).ravel():
        v = int(v) % (1 << bits)
        if ii.min < 0 and v > ii.max:
            v -= 1 << bits
        out.append(v)
    return np.array(out, dtype=dtype).reshape(np.shape(values))


def _ints(a) -> np.ndarray:
    return np.asarray(a).astype(object)


def sample(dtype: str, shape, rng, lo=None, hi=None) -> np.ndarray:
    """Random data: floats uniform in [lo, hi] (default [-10, 10]), integers over the full range."""
    info = _dtypes.info(dtype)
    if info.is_float:
        lo = -10.0 if lo is None else lo
        hi = 10.0 if hi is None else hi
        with np.errstate(under="ignore"):
            return np.asarray(rng.uniform(lo, hi, shape)).astype(dtype)
    ii = np.iinfo(info.numpy)
    lo = ii.min if lo is None else lo
    hi = ii.max if hi is None else hi
    return np.asarray(rng.integers(lo, hi, size=shape, endpoint=True, dtype=info.numpy))


def _run(ctx, build, **inputs) -> dict:
    return run_graph(ctx, build, inputs)


@pytest.fixture(params=["scalar", "vec4"])
def mode(request, monkeypatch):
    """Run a test with the one-element kernel (map.wgsl) and with the four-lane kernel
    (map4.wgsl, chosen when the last dimension is a multiple of 4 and types are 16/32-bit)."""
    monkeypatch.setenv("WEBNN_GPU_FORCE_ELEMENTWISE", "scalar" if request.param == "scalar" else "")
    return request.param


def _pad4(x: np.ndarray) -> np.ndarray:
    """A 1-D array padded (with its own first elements) to a multiple of 4."""
    x = x.ravel()
    return np.concatenate([x, x[:(-x.size) % 4]]) if x.size % 4 else x


# ---------------------------------------------------------------- references
def ref_binary(op: str, a: np.ndarray, b: np.ndarray, dtype: str):
    """float64 for floats; exact integer arithmetic with wrap-around for integers."""
    if _dtypes.info(dtype).is_float:
        x, y = a.astype(np.float64), b.astype(np.float64)
        with np.errstate(all="ignore"):
            return {
                "add": lambda: x + y, "sub": lambda: x - y, "mul": lambda: x * y, "div": lambda: x / y,
                "max": lambda: np.maximum(x, y), "min": lambda: np.minimum(x, y), "pow": lambda: np.power(x, y),
            }[op]()
    x, y = np.broadcast_arrays(_ints(a), _ints(b))
    if op in ("add", "sub", "mul"):
        return _wrap({"add": x + y, "sub": x - y, "mul": x * y}[op], dtype)
    if op in ("max", "min"):
        return (np.maximum if op == "max" else np.minimum)(a, b)
    if op == "div":
        q = [xi if yi == 0 else (abs(xi) // abs(yi)) * (1 if (xi < 0) == (yi < 0) else -1)
             for xi, yi in zip(x.ravel(), y.ravel())]
        return _wrap(np.array(q, dtype=object).reshape(x.shape), dtype)
    if op == "pow":
        bits = np.iinfo(dtype).bits
        out = []
        for xi, yi in zip(x.ravel(), y.ravel()):
            if yi < 0:
                out.append(1 if xi == 1 else (-1 if yi % 2 else 1) if xi == -1 else 0)
            else:
                out.append(pow(int(xi), int(yi), 1 << bits))
        return _wrap(np.array(out, dtype=object).reshape(x.shape), dtype)
    raise KeyError(op)


COMPARE = {"equal": np.equal, "not_equal": np.not_equal, "greater": np.greater,
           "greater_or_equal": np.greater_equal, "lesser": np.less, "lesser_or_equal": np.less_equal}
ARITH = ["add", "sub", "mul", "div", "max", "min", "pow"]


def _binary_inputs(dtype, rng, shape_a, shape_b):
    if _dtypes.info(dtype).is_float:
        a = sample(dtype, shape_a, rng)
        b = sample(dtype, shape_b, rng)
        b = np.where(np.abs(b) < 0.5, np.asarray(0.5, dtype), b).astype(dtype)  # div: no tiny divisors
        return a, b
    return sample(dtype, shape_a, rng), sample(dtype, shape_b, rng)


# ---------------------------------------------------------------- binary ops
@pytest.mark.parametrize("dtype", ALL)
def test_binary_ops_every_type(ctx, rng, dtype, mode):
    a, b = _binary_inputs(dtype, rng, (3, 1, 5 if mode == "scalar" else 8), (4, 1))
    # pow: positive bases (and small exponents for integers, so results are not all 0 or wrapped)
    if _dtypes.info(dtype).is_float:
        pa, pb = np.abs(a) / 4 + np.asarray(0.5, dtype), (b / 4).astype(dtype)
        pa = pa.astype(dtype)
    else:
        pa, pb = a, np.asarray(rng.integers(0, 6, b.shape)).astype(dtype)
    b[0, 0] = a[0, 0, 0]  # some equal pairs for the comparisons

    def build(bb, o):
        out = {op: getattr(bb, op)(o["a"], o["b"]) for op in ARITH if op != "pow"}
        out["pow"] = bb.pow(o["pa"], o["pb"])
        out.update({op: getattr(bb, op)(o["a"], o["b"]) for op in COMPARE})
        return out

    out = _run(ctx, build, a=a, b=b, pa=pa, pb=pb)
    for op in ARITH:
        x, y = (pa, pb) if op == "pow" else (a, b)
        check(op, out[op], ref_binary(op, x, y, dtype), dtype)
    for op, fn in COMPARE.items():
        check(op, out[op], fn(a, b).astype(np.uint8), "uint8")


BROADCASTS = [
    ((2, 3, 4), (4,)), ((4,), (2, 3, 4)),               # lower rank, both ways round
    ((2, 1, 4), (3, 1)), ((3, 1), (2, 1, 4)),
    ((), (2, 3)), ((2, 3), ()), ((), ()),                # rank 0
    ((2, 1, 3, 1, 4), (1, 5, 1, 2, 1)), ((1, 5, 1, 2, 1), (2, 1, 3, 1, 4)),  # rank 5, every axis broadcast
    ((1, 1, 1, 1, 1), (2, 3, 1, 2, 2)), ((3, 2), (2, 1, 3, 2)),
]


@pytest.mark.parametrize("dtype", ["float32", "int8", "uint64"])
@pytest.mark.parametrize("shape_a, shape_b", BROADCASTS)
def test_binary_broadcasting(ctx, rng, dtype, shape_a, shape_b):
    a, b = _binary_inputs(dtype, rng, shape_a, shape_b)
    ops = ["sub", "div", "max", "greater"]

    def build(bb, o):
        return {op: getattr(bb, op)(o["a"], o["b"]) for op in ops}

    out = _run(ctx, build, a=a, b=b)
    want_shape = np.broadcast_shapes(shape_a, shape_b)
    for op in ops:
        assert out[op].shape == want_shape
        if op == "greater":
            check(op, out[op], np.greater(a, b).astype(np.uint8), "uint8")
        else:
            check(op, out[op], np.broadcast_to(ref_binary(op, a, b, dtype), want_shape), dtype)


def test_integer_division_and_pow_edge_cases(ctx):
    i32 = np.iinfo(np.int32)
    a = np.array([7, -7, 7, -7, 5, i32.min, 0, -1, 1, 2, -2, 3], np.int32)
    b = np.array([2, 2, -2, -2, 0, -1, 0, -3, -5, 31, 31, -1], np.int32)

    def build(bb, o):
        return {"div": bb.div(o["a"], o["b"]), "pow": bb.pow(o["a"], o["b"])}

    out = _run(ctx, build, a=a, b=b)
    np.testing.assert_array_equal(out["div"], [3, -3, -3, 3, 5, i32.min, 0, 0, 0, 0, 0, -3])
    check("pow", out["pow"], ref_binary("pow", a, b, "int32"), "int32")
    assert out["pow"][9] == i32.min and out["pow"][7] == -1 and out["pow"][8] == 1
    u8 = _run(ctx, lambda bb, o: {"y": bb.div(o["a"], o["b"])}, a=np.array([200, 7, 9], np.uint8),
              b=np.array([3, 0, 255], np.uint8))["y"]
    np.testing.assert_array_equal(u8, [66, 7, 0])


def test_float_pow_special_values(ctx):
    nan, inf = np.nan, np.inf
    a = np.array([1, 1, -1, -1, 0, 0, -0.0, -0.0, 0, -2, -2, -2, -8, 2, 0.5, -0.5, nan, nan, 4, -3], np.float32)
    b = np.array([nan, inf, inf, 3, -1, 2, -1, 3, 0, 3, 2, 0.5, 1 / 3, inf, inf, -inf, 0, 2, 0.5, -3], np.float32)
    for dtype in FLOATS:
        out = _run(ctx, lambda bb, o: {"y": bb.pow(o["a"], o["b"])}, a=a.astype(dtype), b=b.astype(dtype))["y"]
        with np.errstate(all="ignore"):
            want = np.power(a.astype(dtype).astype(np.float64), b.astype(dtype).astype(np.float64))
        check("pow", out, want, dtype)
        # the sign of zero results and of infinities counts
        np.testing.assert_array_equal(np.signbit(out[~np.isnan(out)]), np.signbit(want[~np.isnan(want)]))


def test_float_nan_and_infinity_in_arithmetic_and_comparisons(ctx):
    nan, inf = np.nan, np.inf
    a = np.array([nan, 1, nan, inf, -inf, inf, 0, -0.0, inf, 3], np.float32)
    b = np.array([nan, nan, 1, inf, inf, -inf, 0, 0, 0, -inf], np.float32)
    for dtype in FLOATS:
        x, y = a.astype(dtype), b.astype(dtype)

        def build(bb, o):
            out = {op: getattr(bb, op)(o["a"], o["b"]) for op in ("add", "sub", "mul", "div")}
            out.update({op: getattr(bb, op)(o["a"], o["b"]) for op in COMPARE})
            return out

        out = _run(ctx, build, a=x, b=y)
        for op in ("add", "sub", "mul", "div"):
            check(op, out[op], ref_binary(op, x, y, dtype), dtype)
        with np.errstate(invalid="ignore"):
            for op, fn in COMPARE.items():
                check(op, out[op], fn(x, y).astype(np.uint8), "uint8")
    # max/min of two NaNs is NaN (WGSL max/min return the other operand when only one is NaN)
    out = _run(ctx, lambda bb, o: {"y": bb.max(o["a"], o["a"]), "z": bb.min(o["a"], o["a"])},
               a=np.array([nan, inf, -inf], np.float32))
    np.testing.assert_array_equal(out["y"], [nan, inf, -inf])
    np.testing.assert_array_equal(out["z"], [nan, inf, -inf])
    # the documented WGSL max/min rule: a single NaN operand yields the other one
    x = np.array([nan, 2, nan], np.float32)
    out = _run(ctx, lambda bb, o: {"max": bb.max(o["a"], o["b"]), "relu": bb.relu(o["a"]),
                                   "clamp": bb.clamp(o["a"], min_value=-1, max_value=1)},
               a=x, b=np.array([1, nan, 3], np.float32))
    np.testing.assert_array_equal(out["max"], [1, 2, 3])
    np.testing.assert_array_equal(out["relu"], [0, 2, 0])
    np.testing.assert_array_equal(out["clamp"], [-1, 1, -1])


def test_logical_ops(ctx):
    a = np.array([0, 1, 2, 255, 0, 7], np.uint8)
    b = np.array([0, 0, 3, 1, 9, 0], np.uint8)

    def build(bb, o):
        return {"and": bb.logical_and(o["a"], o["b"]), "or": bb.logical_or(o["a"], o["b"]),
                "xor": bb.logical_xor(o["a"], o["b"]), "not": bb.logical_not(o["a"]),
                "bc": bb.logical_and(o["a"], o["s"])}

    out = _run(ctx, build, a=a, b=b, s=np.array(1, np.uint8))
    np.testing.assert_array_equal(out["and"], np.logical_and(a, b).astype(np.uint8))
    np.testing.assert_array_equal(out["or"], np.logical_or(a, b).astype(np.uint8))
    np.testing.assert_array_equal(out["xor"], np.logical_xor(a, b).astype(np.uint8))
    np.testing.assert_array_equal(out["not"], np.logical_not(a).astype(np.uint8))
    np.testing.assert_array_equal(out["bc"], (a != 0).astype(np.uint8))


# ---------------------------------------------------------------- unary ops
def _small_magnitudes(dtype, rng, n):
    """Values of every magnitude from 1e-6 to 1, both signs (where cancellation hurts)."""
    with np.errstate(under="ignore"):
        lo = -6 if dtype == "float32" else -4
        return (10.0 ** rng.uniform(lo, 0, n) * rng.choice([-1, 1], n)).astype(dtype)


# op -> (float64 reference, input range or None for [-10, 10], data types)
UNARY = {
    "abs": (np.abs, None, SIGNED), "neg": (np.negative, None, SIGNED), "sign": (np.sign, None, SIGNED),
    "ceil": (np.ceil, None, FLOATS), "floor": (np.floor, None, FLOATS), "round_even": (np.round, None, FLOATS),
    "exp": (np.exp, None, FLOATS), "log": (np.log, (0.001, 100), FLOATS), "sqrt": (np.sqrt, (0, 100), FLOATS),
    "sin": (np.sin, (-7, 7), FLOATS), "cos": (np.cos, (-7, 7), FLOATS), "tan": (np.tan, (-1.3, 1.3), FLOATS),
    "erf": (np.vectorize(math.erf, otypes=[float]), (-4, 4), FLOATS), "reciprocal": (lambda x: 1 / x, None, FLOATS),
    "identity": (lambda x: x, None, ALL), "relu": (lambda x: np.maximum(x, 0), None, SIGNED),
    "sigmoid": (lambda x: 1 / (1 + np.exp(-x)), None, FLOATS), "tanh": (np.tanh, None, FLOATS),
    # 0.5 x (1 + erf(x / sqrt 2)) = 0.5 x erfc(-x / sqrt 2): no cancellation for negative x
    "gelu": (lambda x: 0.5 * x * np.vectorize(math.erfc, otypes=[float])(-x / math.sqrt(2)), None, FLOATS),
    "softplus": (lambda x: np.logaddexp(0, x), None, FLOATS), "softsign": (lambda x: x / (1 + np.abs(x)), None, FLOATS),
    "hard_swish": (lambda x: x * np.clip(x + 3, 0, 6) / 6, None, FLOATS),
}
UNARY_CASES = [(op, dt) for op, (_, _, types) in UNARY.items() for dt in types]


@pytest.mark.parametrize("op, dtype", UNARY_CASES)
def test_unary(ctx, rng, op, dtype, mode):
    fn, rng_, types = UNARY[op]
    if _dtypes.info(dtype).is_float:
        lo, hi = rng_ or (-10, 10)
        x = sample(dtype, (4, 33), rng, lo, hi)
        if rng_ is None or rng_[0] < 0:
            x = np.concatenate([x.ravel(), _small_magnitudes(dtype, rng, 64), np.array([0, -0.0], dtype)])
        if op == "round_even":
            x = np.concatenate([x, np.arange(-5.5, 6, 0.5).astype(dtype)])
        if op == "reciprocal":
            x = x[np.abs(x) > 1e-3]
    else:
        ii = np.iinfo(dtype)
        x = np.concatenate([sample(dtype, (60,), rng), np.array([ii.min, ii.max, 0, 1, -1 if ii.min < 0 else 2],
                                                                   dtype)])
    x = _pad4(x) if mode == "vec4" else x
    out = _run(ctx, lambda b, o: {"y": getattr(b, op)(o["x"])}, x=x)["y"]
    if _dtypes.info(dtype).is_float:
        with np.errstate(all="ignore"):
            want = fn(x.astype(np.float64))
    else:
        want = fn(x)  # NumPy integer semantics wrap like the kernels (abs/neg of the minimum)
    check(op, out, want, dtype)


@pytest.mark.parametrize("dtype", FLOATS)
def test_unary_nan_and_infinity(ctx, dtype, mode):
    x = np.array([np.nan, np.inf, -np.inf] + ([np.nan] if mode == "vec4" else []), dtype)
    ops = ["abs", "neg", "ceil", "floor", "round_even", "exp", "log", "sqrt", "sin", "cos", "erf", "reciprocal",
           "identity", "sigmoid", "tanh", "gelu", "softplus", "softsign", "hard_swish", "elu", "leaky_relu", "linear"]

    def build(b, o):
        out = {op: getattr(b, op)(o["x"]) for op in ops}
        out["is_nan"], out["is_infinite"] = b.is_nan(o["x"]), b.is_infinite(o["x"])
        return out

    out = _run(ctx, build, x=x)
    ref = {
        "abs": [np.nan, np.inf, np.inf], "neg": [np.nan, -np.inf, np.inf], "ceil": x, "floor": x, "round_even": x,
        "exp": [np.nan, np.inf, 0], "log": [np.nan, np.inf, np.nan], "sqrt": [np.nan, np.inf, np.nan],
        "sin": [np.nan] * 3, "cos": [np.nan] * 3, "erf": [np.nan, 1, -1], "reciprocal": [np.nan, 0, -0.0],
        "identity": x, "sigmoid": [np.nan, 1, 0], "tanh": [np.nan, 1, -1], "gelu": [np.nan, np.inf, -0.0],
        "softplus": [np.nan, np.inf, 0], "softsign": [np.nan, 1, -1], "hard_swish": [np.nan, np.inf, 0],
        "elu": [np.nan, np.inf, -1], "leaky_relu": [np.nan, np.inf, -np.inf], "linear": [np.nan, np.inf, -np.inf],
    }
    for op, want in ref.items():
        want = np.asarray(want, np.float64)
        check(op, out[op], _pad4(want) if mode == "vec4" else want, dtype, "NaN/inf")
    np.testing.assert_array_equal(out["is_nan"][:3], [1, 0, 0])
    np.testing.assert_array_equal(out["is_infinite"][:3], [0, 1, 1])


def test_exp_family_through_float32s_denormal_range(ctx):
    """exp and the activations built on it (exp_acc in _lib/activations.wgsl) where exp's result
    is a denormal or at float32's top: exp_acc makes those results from their bits and takes no
    arithmetic on denormals; against float64 NumPy with the op's own tolerance (ULPs, so a
    denormal result is checked to its units of 2^-149)."""
    k = np.arange(-151, -123)
    x = np.concatenate([
        np.linspace(-105.0, -86.0, 3001),          # k from -151 (exp_acc's 0) to -124
        (k + 0.5) * math.log(2.0), (k - 0.5) * math.log(2.0), k * math.log(2.0),  # round(x / ln 2)'s edges
        np.linspace(86.0, 88.8, 201), [88.72283, 88.72284, 88.72285, -103.97208, -103.97209, -103.9721],
        np.linspace(-20.0, 20.0, 101)]).astype(np.float32)
    ops = {"exp": np.exp, "sigmoid": lambda v: 1 / (1 + np.exp(-v)), "softplus": lambda v: np.logaddexp(0, v),
           "elu": lambda v: np.where(v > 0, v, np.expm1(v))}
    out = _run(ctx, lambda b, o: {op: getattr(b, op)(o["x"]) for op in ops}, x=x)
    with np.errstate(all="ignore"):
        for op, fn in ops.items():
            check(op, out[op], fn(x.astype(np.float64)), "float32", "denormal range")
    tiny = (x < -87.4) & (x > -103.9)
    assert np.all((out["exp"][tiny] > 0) & (out["exp"][tiny] < np.finfo(np.float32).tiny))  # denormals, not 0
    np.testing.assert_array_equal(out["sigmoid"][x < -30], out["exp"][x < -30])  # e / (1 + e) = e there


def test_activations_past_their_denormal_edges(ctx):
    """softplus, gelu and erf where their arithmetic would read or make float32 denormals and
    _lib/activations.wgsl computes on stand-in values instead: softplus for |x| > 20.8
    (exp(-|x|) below 2^-30; the result is that exponential for x < 0, x for x > 0), gelu past 7
    (x itself; from -13.2 to -14.2 the result is a denormal), erf past 5 (+-1); the edges on
    both sides, NaN; against float64 NumPy with each op's own tolerance (ULPs, so a denormal
    result is checked to its units of 2^-149), and the stand-ins' results exactly."""
    edge = -math.log(2.0 ** -30)  # exp(-20.79...) = 2^-30
    x = np.concatenate([
        np.linspace(-110.0, -20.0, 2001), np.linspace(20.0, 110.0, 2001), edge + np.linspace(-1e-4, 1e-4, 21),
        -edge + np.linspace(-1e-4, 1e-4, 21), np.linspace(6.9, 7.1, 201), np.linspace(-15.0, -12.0, 301),
        np.linspace(12.0, 15.0, 301), np.linspace(4.9, 5.1, 201), -np.linspace(4.9, 5.1, 201),
        np.linspace(9.0, 10.5, 151), -np.linspace(9.0, 10.5, 151), [1e30, -1e30, 3e38, -3e38],
        np.linspace(-3.0, 3.0, 61), [np.nan]]).astype(np.float32)
    erf = np.vectorize(math.erf, otypes=[float])
    ops = {"softplus": lambda v: np.logaddexp(0, v), "erf": erf,
           "gelu": lambda v: 0.5 * v * np.vectorize(math.erfc, otypes=[float])(-v / math.sqrt(2))}
    out = _run(ctx, lambda b, o: {op: getattr(b, op)(o["x"]) for op in [*ops, "exp"]}, x=x)
    with np.errstate(all="ignore"):
        for op, fn in ops.items():
            check(op, out[op], fn(x.astype(np.float64)), "float32", "past the denormal edges")
    low = x < -21.0
    np.testing.assert_array_equal(out["softplus"][low], out["exp"][low])  # log1p(e) = e there
    big = x > 7.0
    np.testing.assert_array_equal(out["gelu"][big], x[big])
    np.testing.assert_array_equal(out["erf"][np.abs(x) > 5.0], np.sign(x[np.abs(x) > 5.0]))
    np.testing.assert_array_equal(out["softplus"][x > 21.0], x[x > 21.0])
    assert np.isnan(out["softplus"][-1]) and np.isnan(out["gelu"][-1]) and np.isnan(out["erf"][-1])


@pytest.mark.parametrize("dtype", FLOATS)
def test_is_nan_is_infinite(ctx, rng, dtype):
    x = np.concatenate([sample(dtype, (20,), rng), np.array([np.nan, -np.nan, np.inf, -np.inf, 0, 65504], dtype)])
    out = _run(ctx, lambda b, o: {"n": b.is_nan(o["x"]), "i": b.is_infinite(o["x"])}, x=x)
    np.testing.assert_array_equal(out["n"], np.isnan(x).astype(np.uint8))
    np.testing.assert_array_equal(out["i"], np.isinf(x).astype(np.uint8))
    assert out["n"].dtype == np.uint8


# ---------------------------------------------------------------- activations with options
ACTIVATIONS = [
    ("elu", {}, lambda x: np.where(x > 0, x, 1.0 * np.expm1(x))),
    ("elu", {"alpha": 0.3607245505146506}, lambda x: np.where(x > 0, x, 0.3607245505146506 * np.expm1(x))),
    ("elu", {"alpha": -3.468180406374035}, lambda x: np.where(x > 0, x, -3.468180406374035 * np.expm1(x))),
    ("leaky_relu", {}, lambda x: np.where(x >= 0, x, 0.01 * x)),
    ("leaky_relu", {"alpha": 0.25}, lambda x: np.where(x >= 0, x, 0.25 * x)),
    ("leaky_relu", {"alpha": -2}, lambda x: np.where(x >= 0, x, -2.0 * x)),
    ("hard_sigmoid", {}, lambda x: np.clip(0.2 * x + 0.5, 0, 1)),
    ("hard_sigmoid", {"alpha": 0.5, "beta": 0.25}, lambda x: np.clip(0.5 * x + 0.25, 0, 1)),
    ("linear", {}, lambda x: x),
    ("linear", {"alpha": 2.0, "beta": 8.5}, lambda x: 2.0 * x + 8.5),
    ("linear", {"alpha": -0.25}, lambda x: -0.25 * x),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op, opts, fn", ACTIVATIONS, ids=[f"{a[0]}-{a[1]}" for a in ACTIVATIONS])
def test_activations_with_options(ctx, rng, dtype, op, opts, fn, mode):
    x = np.concatenate([sample(dtype, (70,), rng), _small_magnitudes(dtype, rng, 30 if mode == "vec4" else 31)])
    out = _run(ctx, lambda b, o: {"y": getattr(b, op)(o["x"], **opts)}, x=x)["y"]
    with np.errstate(all="ignore"):
        want = fn(x.astype(np.float64))
    check(op, out, want, dtype)


@pytest.mark.parametrize("dtype", SIGNED)
def test_prelu(ctx, rng, dtype):
    if _dtypes.info(dtype).is_float:
        x, slope = sample(dtype, (2, 3, 4), rng), sample(dtype, (3, 1), rng, -2, 2)
    else:
        x, slope = sample(dtype, (2, 3, 4), rng, -100, 100), sample(dtype, (3, 1), rng, -3, 3)
    out = _run(ctx, lambda b, o: {"y": b.prelu(o["x"], o["s"]), "z": b.prelu(o["x"], o["t"])}, x=x, s=slope,
               t=slope[:1, :1].reshape(()))
    if _dtypes.info(dtype).is_float:
        x64 = x.astype(np.float64)
        check("prelu", out["y"], np.where(x64 >= 0, x64, slope.astype(np.float64) * x64), dtype)
        check("prelu", out["z"], np.where(x64 >= 0, x64, float(slope[0, 0]) * x64), dtype)
    else:
        check("prelu", out["y"], np.where(x >= 0, x, _wrap(_ints(x) * _ints(slope), dtype)), dtype)


# ---------------------------------------------------------------- clamp
@pytest.mark.parametrize("dtype", ALL)
def test_clamp_every_type(ctx, rng, dtype):
    info = _dtypes.info(dtype)
    if info.is_float:
        x = sample(dtype, (3, 10), rng)
        cases = [dict(), dict(min_value=-2), dict(max_value=0.0), dict(min_value=-3, max_value=4.5),
                 dict(min_value=-8, max_value=-1), dict(min_value=2, max_value=2),
                 dict(min_value=-1e39, max_value=1e39)]  # beyond float32: the infinities they round to
    else:
        ii = np.iinfo(info.numpy)
        x = np.concatenate([sample(dtype, (28,), rng), np.array([ii.min, ii.max], dtype)])
        mid = int(ii.min) // 2 + int(ii.max) // 2
        cases = [dict(), dict(min_value=mid), dict(max_value=mid), dict(min_value=5, max_value=int(ii.max) - 5),
                 dict(min_value=-2 if ii.min < 0 else 2, max_value=125), dict(min_value=float("-inf"))]
        if dtype in ("int64", "uint64"):  # bounds beyond 2**53 stay exact
            cases.append(dict(min_value=2**62 + 1, max_value=2**62 + 3))
            x = np.concatenate([x, np.array([2**62, 2**62 + 2, 2**62 + 5], dtype)])

    def build(b, o):
        return {f"y{i}": b.clamp(o["x"], **kw) for i, kw in enumerate(cases)}

    out = _run(ctx, build, x=x)
    for i, kw in enumerate(cases):
        lo, hi = kw.get("min_value"), kw.get("max_value")
        if info.is_float:
            want = np.clip(x.astype(np.float64), -np.inf if lo is None else lo, np.inf if hi is None else hi)
        else:
            vals = [int(v) for v in x]
            lo_i = None if lo is None or lo == float("-inf") else int(lo)
            want = np.array([min(max(v, lo_i) if lo_i is not None else v, int(hi)) if hi is not None
                             else (max(v, lo_i) if lo_i is not None else v) for v in vals], dtype=dtype)
        check("clamp", out[f"y{i}"], want, dtype, str(kw))


# ---------------------------------------------------------------- cast
def _cast_inputs(src: str) -> np.ndarray:
    info = _dtypes.info(src)
    if info.is_float:
        vals = [0, -0.0, 0.4, -0.6, 1.5, -2.5, 7.99, 127.9, 128, 255.5, 256, -128.5, -129, 32767.5, 65504, 70000,
                -70000, 2.1e9, -2.2e9, 4.3e9, 3e9, -3e9, 9.3e18, -9.3e18, 1e19, 1.9e19, 1e30, -1e30, 1e-8,
                np.nan, np.inf, -np.inf]
        with np.errstate(over="ignore", under="ignore"):
            return np.array(vals, np.float64).astype(info.numpy)
    ii = np.iinfo(info.numpy)
    vals = {int(ii.min), int(ii.max), 0, 1, 127, 128, 255, 256, 65504, 65505, 70000, 2**24 + 1, 2**31 - 1, 2**31,
            2**32 + 5, 2**53 + 1, 2**63 - 1, -1, -128, -129, -2**31, -2**31 - 1, -2**63}
    return np.array(sorted(v for v in vals if ii.min <= v <= ii.max), dtype=info.numpy)


def ref_cast(x: np.ndarray, to: str):
    src, dst = _dtypes.info(webnn._dtypes.from_numpy(x.dtype)), _dtypes.info(to)
    if dst.is_float:
        with np.errstate(over="ignore"):
            return x.astype(np.float64) if src.is_float else np.array([float(int(v)) for v in x])
    ii = np.iinfo(dst.numpy)
    if src.is_float:  # truncate, saturate, NaN -> 0
        out = [0 if np.isnan(v) else int(ii.max) if v >= float(ii.max) + 1 else int(ii.min) if v <= float(ii.min) - 1
               else max(int(ii.min), min(int(ii.max), int(np.trunc(float(v))))) for v in x.astype(np.float64)]
        return np.array(out, dtype=dst.numpy)
    return _wrap(_ints(x), to)  # integer -> integer: wrap


@pytest.mark.parametrize("src", ALL)
def test_cast_all_pairs(ctx, src, mode):
    x = _cast_inputs(src)
    x = _pad4(x) if mode == "vec4" else x
    out = _run(ctx, lambda b, o: {to: b.cast(o["x"], to) for to in ALL}, x=x)
    for to in ALL:
        # int -> float: the float64 reference is the exact integer; WPT allows 1 ULP
        check("cast", out[to], ref_cast(x, to), to, f"from {src}")


def test_cast_float_to_int_rule(ctx):
    # the documented rule, spelled out: truncate toward zero, saturate, NaN -> 0
    x = np.array([2.7, -2.7, 300, -300, 3e9, -3e9, 1e20, -1e20, np.nan, np.inf, -np.inf], np.float32)
    out = _run(ctx, lambda b, o: {t: b.cast(o["x"], t) for t in INTS}, x=x)
    np.testing.assert_array_equal(out["int8"], [2, -2, 127, -128, 127, -128, 127, -128, 0, 127, -128])
    np.testing.assert_array_equal(out["uint8"], [2, 0, 255, 0, 255, 0, 255, 0, 0, 255, 0])
    np.testing.assert_array_equal(out["int32"], [2, -2, 300, -300, 2**31 - 1, -2**31, 2**31 - 1, -2**31, 0,
                                                 2**31 - 1, -2**31])
    np.testing.assert_array_equal(out["uint32"], [2, 0, 300, 0, 3000000000, 0, 2**32 - 1, 0, 0, 2**32 - 1, 0])
    np.testing.assert_array_equal(out["int64"], np.array([2, -2, 300, -300, 3000000000, -3000000000, 2**63 - 1,
                                                          -2**63, 0, 2**63 - 1, -2**63], np.int64))
    np.testing.assert_array_equal(out["uint64"], np.array([2, 0, 300, 0, 3000000000, 0, 2**64 - 1, 0, 0, 2**64 - 1,
                                                           0], np.uint64))
    # integer narrowing wraps
    y = np.array([300, -129, 2**31 - 1, -1], np.int32)
    out = _run(ctx, lambda b, o: {"i8": b.cast(o["y"], "int8"), "u8": b.cast(o["y"], "uint8"),
                                  "u64": b.cast(o["y"], "uint64")}, y=y)
    np.testing.assert_array_equal(out["i8"], [44, 127, -1, -1])
    np.testing.assert_array_equal(out["u8"], [44, 127, 255, 255])
    np.testing.assert_array_equal(out["u64"], np.array([300, 2**64 - 129, 2**31 - 1, 2**64 - 1], np.uint64))


def test_fused_chain_with_cast(ctx, rng):
    # cast and 8-bit intermediates inside one fused kernel keep the standalone semantics
    x = np.array([2.7, -300, np.nan, 1e10, 100.5], np.float32)
    y = np.array([100, 100, 5, 1, 100], np.int8)

    def build(b, o):
        return {"z": b.mul(b.add(b.cast(o["x"], "int8"), o["y"]), o["y"])}

    out = _run(ctx, build, x=x, y=y)
    c = ref_cast(x, "int8")
    np.testing.assert_array_equal(out["z"], _wrap(_ints(_wrap(_ints(c) + _ints(y), "int8")) * _ints(y), "int8"))


def test_fused_float16_chain(ctx, rng):
    # float16 steps that compute in f32 keep their accuracy inside a fused kernel
    x, y = sample("float16", (4, 16), rng, -4, 4), sample("float16", (16,), rng, -4, 4)

    def build(b, o):
        return {"z": b.hard_sigmoid(b.elu(b.mul(b.sigmoid(b.add(o["x"], o["y"])), o["y"]), alpha=0.5),
                                    alpha=0.3, beta=0.4)}

    out = _run(ctx, build, x=x, y=y)
    s = (x.astype(np.float64) + y).astype(np.float16).astype(np.float64)
    s = (1 / (1 + np.exp(-s))).astype(np.float16).astype(np.float64)
    m = (s * y).astype(np.float16).astype(np.float64)
    e = np.where(m > 0, m, 0.5 * np.expm1(m)).astype(np.float16).astype(np.float64)
    check("hard_sigmoid", out["z"], np.clip(0.3 * e + 0.4, 0, 1), "float16")


# ---------------------------------------------------------------- where
@pytest.mark.parametrize("dtype", ALL)
def test_where_every_type(ctx, rng, dtype):
    cond = np.array([[0, 1, 7], [255, 0, 0]], np.uint8)  # non-zero is true
    t = sample(dtype, (2, 1, 3), rng)
    f = sample(dtype, (3,), rng)
    if _dtypes.info(dtype).is_float:
        t[0, 0, 1] = np.nan
    out = _run(ctx, lambda b, o: {"y": b.where(o["c"], o["t"], o["f"])}, c=cond, t=t, f=f)["y"]
    want = np.where(cond != 0, t, f)
    assert out.shape == (2, 2, 3)
    np.testing.assert_array_equal(out.view(f"u{out.itemsize}"), want.view(f"u{want.itemsize}"))


# ---------------------------------------------------------------- large tensor
def test_large_tensor_past_65535_workgroups(ctx, rng):
    # 65537 x 257 = 16,843,009 elements > 65535 * 256: a 2-D folded dispatch with broadcast loads
    x = rng.integers(0, 256, size=(65537, 257), dtype=np.uint8)
    y = rng.integers(0, 256, size=(257,), dtype=np.uint8)
    out = run_graph(ctx, lambda b, o: {"z": b.sub(o["x"], o["y"])}, {"x": x, "y": y}, tensor_path=False)["z"]
    np.testing.assert_array_equal(out, x - y)


# ---------------------------------------------------------------- validation
def _op(b, name, dtype="float32", shape=(2, 3)):
    return b.input(f"{name}{len(b._inputs)}", {"data_type": dtype, "shape": list(shape)})


def _raises(fn, op, label, arg, text):
    with pytest.raises(MLTypeError) as info:
        fn()
    msg = str(info.value)
    assert msg.startswith(f"{op} [{label!r}]"), msg
    assert arg is None or f"'{arg}'" in msg, msg
    assert text in msg, msg


def test_validation_binary(ctx):
    b = webnn.MLGraphBuilder(ctx)
    x = _op(b, "x")
    _raises(lambda: b.add(x, _op(b, "y", "float16"), label="l"), "add", "l", "b", "the data type of 'a'")
    _raises(lambda: b.sub(x, _op(b, "y", shape=(4, 3)), label="l"), "sub", "l", None, "broadcastable")
    _raises(lambda: b.sub(_op(b, "y", shape=(4, 3)), x, label="l"), "sub", "l", None, "broadcastable")
    _raises(lambda: b.pow(x, _op(b, "y", shape=(2, 1, 2)), label="l"), "pow", "l", None, "[2, 3] and [2, 1, 2]")
    _raises(lambda: b.greater(x, _op(b, "y", "int32"), label="l"), "greater", "l", "b", "float32")
    _raises(lambda: b.logical_and(x, x, label="l"), "logical_and", "l", "a", "uint8")
    _raises(lambda: b.logical_not(x, label="l"), "logical_not", "l", "input", "uint8")
    _raises(lambda: b.mul(x, 2.0, label="l"), "mul", "l", "b", "an MLOperand")
    _raises(lambda: b.div(x, x, label="l", alpha=1), "div", "l", None, "unknown option")
    other = webnn.MLGraphBuilder(ctx)
    _raises(lambda: b.max(x, _op(other, "z"), label="l"), "max", "l", "b", "another builder")
    _raises(lambda: b.prelu(x, _op(b, "s", shape=(3, 2, 3)), label="l"), "prelu", "l", "slope", "broadcastable")
    _raises(lambda: b.prelu(_op(b, "u", "uint32"), _op(b, "s", "uint32"), label="l"), "prelu", "l", "input", "float32")
    # a failed call leaves the builder usable
    assert b.add(x, x).shape == (2, 3)


def test_validation_unary_and_options(ctx):
    b = webnn.MLGraphBuilder(ctx)
    x, i = _op(b, "x"), _op(b, "i", "int32")
    u = _op(b, "u", "uint32")
    for name in ("sqrt", "exp", "sigmoid", "tanh", "erf", "is_nan", "gelu", "round_even"):
        _raises(lambda: getattr(b, name)(i, label="k"), name, "k", "input", "float32, float16")
    for name in ("abs", "neg", "sign", "relu"):
        _raises(lambda: getattr(b, name)(u, label="k"), name, "k", "input", "int8")
    _raises(lambda: b.elu(x, alpha="1", label="k"), "elu", "k", "alpha", "a number")
    _raises(lambda: b.leaky_relu(x, alpha=True, label="k"), "leaky_relu", "k", "alpha", "a number")
    _raises(lambda: b.hard_sigmoid(x, gamma=1.0, label="k"), "hard_sigmoid", "k", None, "unknown option")
    _raises(lambda: b.relu(x, alpha=0.1, label="k"), "relu", "k", None, "unknown option")
    _raises(lambda: b.leaky_relu(i, label="k"), "leaky_relu", "k", "input", "float32")
    _raises(lambda: b.clamp(x, min_value=2, max_value=1, label="k"), "clamp", "k", "min_value", "<= max_value")
    _raises(lambda: b.clamp(x, max_value="big", label="k"), "clamp", "k", "max_value", "a number")
    _raises(lambda: b.cast(x, "bool", label="k"), "cast", "k", "type", "one of float32")
    _raises(lambda: b.cast(x, np.float32, label="k"), "cast", "k", "type", "one of float32")
    c = _op(b, "c", "uint8")
    _raises(lambda: b.where(x, x, x, label="k"), "where", "k", "condition", "uint8")
    _raises(lambda: b.where(c, x, i, label="k"), "where", "k", "false_value", "the data type of true_value")
    _raises(lambda: b.where(c, x, _op(b, "w", shape=(3, 3)), label="k"), "where", "k", None, "broadcastable")
    assert b.where(_op(b, "c3", "uint8", (4, 1, 1)), x, x).shape == (4, 2, 3)


def test_validation_built_builder(ctx):
    b = webnn.MLGraphBuilder(ctx)
    x = _op(b, "x")
    b.build({"y": b.relu(x)})
    with pytest.raises(webnn.errors.InvalidStateError, match="relu"):
        b.relu(x)


def test_op_support_limits(ctx):
    lim = ctx.op_support_limits()
    assert lim["add"]["a"]["data_types"] == ALL
    assert lim["equal"]["output"]["data_types"] == ["uint8"]
    assert lim["logical_and"]["a"]["data_types"] == ["uint8"]
    assert lim["sqrt"]["input"]["data_types"] == FLOATS
    assert lim["abs"]["input"]["data_types"] == SIGNED
    assert lim["where"]["condition"]["data_types"] == ["uint8"]
    assert lim["cast"]["input"]["data_types"] == ALL
