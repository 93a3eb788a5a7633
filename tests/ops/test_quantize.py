"""quantize_linear and dequantize_linear against float64 NumPy references.

Reference: x / scale in float64, round half to even (np.round), + zero point, clipped to the
zero point type's range; (x - zero_point) * scale in float64. Scale and zero point are
expanded block by block with np.repeat (independent of the kernel's index arithmetic).
Tolerances are WPT's: 1 (integer difference) for quantize, 1 ULP for dequantize; the
exact-by-construction cases (ties, saturation, integer-valued quotients) are compared exactly.
"""

from __future__ import annotations

import numpy as np
import pytest

import webnn_gpu as webnn
from helpers import run_graph, ulp_distance
from webnn_gpu.errors import MLTypeError

QTYPES = ["int8", "uint8", "int32", "uint32"]
FTYPES = ["float32", "float16"]


def _expand(p: np.ndarray, shape) -> np.ndarray:
    """Scale/zero point of shape p.shape, right-aligned, repeated block-wise up to `shape`."""
    p = p.reshape((1,) * (len(shape) - p.ndim) + p.shape)
    for axis, (n, m) in enumerate(zip(shape, p.shape)):
        p = np.repeat(p, n // m, axis=axis)
    return p


def ref_quantize(x, scale, zp):
    info = np.iinfo(zp.dtype)
    q = np.round(x.astype(np.float64) / _expand(scale, x.shape).astype(np.float64))
    q = np.where(np.isnan(q), 0.0, q)
    q = q + _expand(zp, x.shape).astype(np.float64)
    return np.clip(q, info.min, info.max).astype(zp.dtype)


def ref_dequantize(x, scale, zp):
    d = x.astype(np.float64) - _expand(zp, x.shape).astype(np.float64)
    return d * _expand(scale, x.shape).astype(np.float64)


def _scales(rng, shape, dtype):
    return np.asarray(rng.uniform(0.05, 2.0, shape) * rng.choice([-1, 1], shape)).astype(dtype)


def _zero_points(rng, shape, qtype):
    ii = np.iinfo(qtype)
    lo, hi = max(ii.min, -100), min(ii.max, 100) if qtype != "uint8" else 200
    return np.asarray(rng.integers(lo, hi, size=shape, endpoint=True)).astype(qtype)


def _run_q(ctx, x, s, z):
    out = run_graph(ctx, lambda b, o: {"y": b.quantize_linear(o["x"], o["s"], o["z"])}, {"x": x, "s": s, "z": z})
    return out["y"]


def _run_dq(ctx, x, s, z):
    out = run_graph(ctx, lambda b, o: {"y": b.dequantize_linear(o["x"], o["s"], o["z"])}, {"x": x, "s": s, "z": z})
    return out["y"]


# (input shape, scale shape): per-tensor, per-axis (full rank and last-axis), blockwise, 0-D
LAYOUTS = [
    ((3, 2, 5), ()),
    ((3, 2, 5), (1, 1, 1)),
    ((2, 3, 4, 4), (1, 3, 1, 1)),
    ((3, 2, 5), (5,)),
    ((6, 4, 5), (2, 2, 1)),
    ((6, 4, 10), (3, 1, 5)),
    ((), ()),
    ((7,), (7,)),
]


@pytest.mark.parametrize("qtype", QTYPES)
@pytest.mark.parametrize("ftype", FTYPES)
def test_quantize_layouts(ctx, rng, qtype, ftype):
    for shape, sshape in LAYOUTS:
        s = _scales(rng, sshape, ftype)
        z = _zero_points(rng, sshape, qtype)
        x = np.asarray(rng.standard_normal(shape) * 200).astype(ftype)
        got = _run_q(ctx, x, s, z)
        want = ref_quantize(x, s, z)
        assert got.dtype == np.dtype(qtype) and got.shape == tuple(shape)
        diff = np.abs(got.astype(np.int64) - want.astype(np.int64))
        # WPT allows 1; the quotient is rounded in f32, so only near-ties may differ.
        assert diff.max(initial=0) <= 1, (shape, sshape, got, want)
        assert np.mean(diff) < 0.02


@pytest.mark.parametrize("qtype", QTYPES)
@pytest.mark.parametrize("ftype", FTYPES)
def test_dequantize_layouts(ctx, rng, qtype, ftype):
    ii = np.iinfo(qtype)
    for shape, sshape in LAYOUTS:
        s = _scales(rng, sshape, ftype)
        z = np.asarray(rng.integers(ii.min, ii.max, size=sshape, endpoint=True)).astype(qtype)
        x = np.asarray(rng.integers(ii.min, ii.max, size=shape, endpoint=True)).astype(qtype)
        with np.errstate(over="ignore"):
            want = ref_dequantize(x, s, z)
        got = _run_dq(ctx, x, s, z)
        assert got.dtype == np.dtype(ftype) and got.shape == tuple(shape)
        with np.errstate(over="ignore"):
            expected = want.astype(ftype)
        finite = np.isfinite(expected)
        assert np.all(ulp_distance(got[finite], expected[finite]) <= 1), (shape, sshape)
        np.testing.assert_array_equal(got[~finite], expected[~finite])


# WPT vectors: web-platform-tests webnn/conformance_tests/quantizeLinear.https.any.js
# (3-Clause BSD License): (input, input shape, scale, zero point, parameter shape, expected)
_WPT_X = [-2.549168109893799, -4.794857501983643, 8.413617134094238, 6.108623504638672]
WPT_QUANTIZE = [
    (_WPT_X, [4], [9.343092918395996, 0.2800687253475189, 4.617084980010986, 1.1202747821807861],
     [128] * 4, [4], [128, 111, 130, 133]),
    (_WPT_X, [4], [9.343092918395996, 0.2800687253475189, -4.617084980010986, 1.1202747821807861],
     [128] * 4, [4], [128, 111, 126, 133]),
    (_WPT_X, [2, 2], [9.343092918395996], [128], [1, 1], [128, 127, 129, 129]),
    (_WPT_X, [1, 1, 2, 2], [0.2800687253475189, 4.617084980010986], [128, 128], [1, 1, 2, 1], [119, 111, 130, 129]),
    (_WPT_X, [1, 4, 1], [0.2800687253475189, -4.617084980010986], [128, 189], [1, 2, 1], [119, 111, 187, 188]),
]


@pytest.mark.parametrize("x, shape, s, z, pshape, want", WPT_QUANTIZE)
def test_wpt_quantize_vectors(ctx, x, shape, s, z, pshape, want):
    x = np.array(x, np.float32).reshape(shape)
    s = np.array(s, np.float32).reshape(pshape)
    z = np.array(z, np.uint8).reshape(pshape)
    got = _run_q(ctx, x, s, z)
    np.testing.assert_array_equal(got.ravel(), want)
    np.testing.assert_array_equal(ref_quantize(x, s, z).ravel(), want)  # the reference agrees
    dq = _run_dq(ctx, got, s, z)
    np.testing.assert_allclose(dq, ref_dequantize(got, s, z), rtol=1e-7)


def test_quantize_rounds_half_to_even(ctx):
    x = np.array([0.5, 1.5, 2.5, 3.5, -0.5, -1.5, -2.5, -3.5, 0.49999997, 1.25, -1.25, 2.75], np.float32)
    for scale, zp in [(1.0, 0), (0.5, 0), (1.0, 10), (0.25, -7)]:
        s = np.array(scale, np.float32)
        z = np.array(zp, np.int32)
        got = _run_q(ctx, x, s, z)
        np.testing.assert_array_equal(got, ref_quantize(x, s, z))
    np.testing.assert_array_equal(_run_q(ctx, x, np.array(1.0, np.float32), np.array(0, np.int8)),
                                  [0, 2, 2, 4, 0, -2, -2, -4, 0, 1, -1, 3])


@pytest.mark.parametrize("qtype", QTYPES)
def test_quantize_saturates(ctx, rng, qtype):
    ii = np.iinfo(qtype)
    # Extreme zero points with quotients of every magnitude: the sum needs 34 bits.
    z = np.array([ii.min, ii.max, 0, ii.min, ii.max, ii.min // 2 + ii.max // 2, 1, ii.max - 1], qtype)
    mags = np.array([1, 100, 2.0**20, 2.0**31, 2.0**32, 3e9, 1e12, 1e38], np.float64)
    x = np.concatenate([mags, -mags, [0.0, -0.0]]).astype(np.float32)
    x = np.stack([x] * len(z))  # [8, 18]: zero point per row
    s = np.ones((len(z), 1), np.float32)
    got = _run_q(ctx, x, s, z.reshape(-1, 1))
    np.testing.assert_array_equal(got, ref_quantize(x, s, z.reshape(-1, 1)))


@pytest.mark.parametrize("qtype", QTYPES)
def test_quantize_nan_and_infinity(ctx, qtype):
    ii = np.iinfo(qtype)
    x = np.array([np.nan, np.inf, -np.inf, 1.0], np.float32)
    z = np.array(min(ii.max, 7), qtype)
    got = _run_q(ctx, x, np.array(2.0, np.float32), z)
    np.testing.assert_array_equal(got, np.array([z, ii.max, ii.min, z + 0], qtype))  # 0.5 ties to 0


def test_quantize_float16_and_random_exact(ctx, rng):
    # Quotients that are exact in f32: scale a power of two, so the result must be exact.
    x = (rng.integers(-4000, 4000, size=(4, 33)) / 8).astype(np.float16)
    s = np.array([0.25, 0.5, 2.0, 4.0], np.float16).reshape(4, 1)
    z = np.array([3, -3, 0, 100], np.int32).reshape(4, 1)
    np.testing.assert_array_equal(_run_q(ctx, x, s, z), ref_quantize(x, s, z))


def test_dequantize_extreme_32bit_differences(ctx):
    # input - zero_point spans 2**32 - 1: needs exact 33-bit arithmetic before the product.
    i32 = np.iinfo(np.int32)
    x = np.array([i32.max, i32.min, i32.max, 0, 16777217, -16777217], np.int32)
    z = np.array([i32.min, i32.max, i32.max, i32.min, 0, 0], np.int32)
    s = np.ones(6, np.float32)
    np.testing.assert_array_equal(_run_dq(ctx, x, s, z), ref_dequantize(x, s, z).astype(np.float32))
    u32 = np.iinfo(np.uint32)
    xu = np.array([u32.max, 0, 16777217, 12345], np.uint32)
    zu = np.array([0, u32.max, 1, 12345], np.uint32)
    su = np.array([1.0, 1.0, 1.0, 3.0], np.float32)
    np.testing.assert_array_equal(_run_dq(ctx, xu, su, zu), ref_dequantize(xu, su, zu).astype(np.float32))


def test_round_trip_blockwise(ctx, rng):
    # quantize then dequantize in one graph: |x - dq(q(x))| <= scale / 2 inside the range.
    x = rng.uniform(-50, 50, (8, 6, 4)).astype(np.float32)
    s = rng.uniform(0.5, 1.0, (4, 3, 1)).astype(np.float32)
    z = rng.integers(-20, 20, (4, 3, 1)).astype(np.int8)

    def build(b, o):
        q = b.quantize_linear(o["x"], o["s"], o["z"])
        return {"q": q, "dq": b.dequantize_linear(q, o["s"], o["z"])}

    out = run_graph(ctx, build, {"x": x, "s": s, "z": z})
    np.testing.assert_array_equal(out["q"], ref_quantize(x, s, z))
    np.testing.assert_allclose(out["dq"], ref_dequantize(out["q"], s, z), rtol=1e-6)
    assert np.all(np.abs(out["dq"] - x) <= _expand(s, x.shape) / 2 * (1 + 1e-6))


def test_large_blockwise_dequantize(ctx, rng):
    # More than 65535 * 256 elements: the dispatch folds into 2-D.
    shape = (65536 + 8, 257)
    x = rng.integers(0, 256, size=shape, dtype=np.uint8)
    s = rng.uniform(0.5, 2, (8, 1)).astype(np.float32)
    z = rng.integers(0, 256, size=(8, 1), dtype=np.uint8)
    got = run_graph(ctx, lambda b, o: {"y": b.dequantize_linear(o["x"], o["s"], o["z"])}, {"x": x, "s": s, "z": z},
                    tensor_path=False)["y"]
    # (x - zero_point) is exact and the product is rounded once: equal to the rounded float64 result
    np.testing.assert_array_equal(got, ref_dequantize(x, s, z).astype(np.float32))


# ---------------------------------------------------------------- validation
def _operands(b, x=("float32", [3, 2, 5]), s=("float32", [5]), z=("int8", [5])):
    n = len(b._inputs)
    mk = lambda name, d: b.input(f"{name}{n}", {"data_type": d[0], "shape": list(d[1])})  # noqa: E731
    return mk("x", x), mk("s", s), mk("z", z)


@pytest.mark.parametrize("op, args, arg, text", [
    ("quantize_linear", dict(x=("int32", [3, 2, 5])), "input", "float32 or float16"),
    ("quantize_linear", dict(s=("float16", [5])), "scale", "the data type of 'input'"),
    ("quantize_linear", dict(s=("int32", [5])), "scale", "the data type of 'input'"),
    ("quantize_linear", dict(z=("float16", [5])), "zero_point", "int8, uint8, int32, uint32"),
    ("quantize_linear", dict(z=("int64", [5])), "zero_point", "int8, uint8, int32, uint32"),
    ("quantize_linear", dict(z=("int8", [2, 5])), "zero_point", "the shape of 'scale'"),
    ("quantize_linear", dict(s=("float32", [2, 1, 5]), z=("int8", [2, 1, 5])), "scale", "not a multiple of 2"),
    ("quantize_linear", dict(s=("float32", [3]), z=("int8", [3])), "scale", "divide the input shape"),
    ("quantize_linear", dict(s=("float32", [1, 3, 2, 5]), z=("int8", [1, 3, 2, 5])), "scale", "rank <= 3"),
    ("dequantize_linear", dict(x=("float32", [3, 2, 5])), "input", "int8, uint8, int32, uint32"),
    ("dequantize_linear", dict(x=("int8", [3, 2, 5]), s=("int32", [5])), "scale", "float32 or float16"),
    ("dequantize_linear", dict(x=("int8", [3, 2, 5]), z=("uint8", [5])), "zero_point", "the data type of 'input'"),
    ("dequantize_linear", dict(x=("int8", [3, 2, 5]), z=("int8", [1, 5])), "zero_point", "the shape of 'scale'"),
    ("dequantize_linear", dict(x=("int8", [6, 4, 5]), s=("float32", [4, 2, 1]), z=("int8", [4, 2, 1])), "scale",
     "not a multiple of 4"),
])
def test_validation_errors(ctx, op, args, arg, text):
    b = webnn.MLGraphBuilder(ctx)
    ops = _operands(b, **args)
    with pytest.raises(MLTypeError) as info:
        getattr(b, op)(*ops, label="q1")
    msg = str(info.value)
    assert msg.startswith(f"{op} ['q1']") and f"'{arg}'" in msg and text in msg, msg
    # The builder stays usable after a failed call.
    assert b.relu(ops[0]).shape == ops[0].shape


def test_validation_valid_shapes_and_types(ctx):
    b = webnn.MLGraphBuilder(ctx)
    for sshape in ([3, 2, 5], [1, 1, 5], [1, 1, 1], [5], [], [3, 1, 5]):
        x, s, z = _operands(b, s=("float32", sshape), z=("uint8", sshape))
        y = b.quantize_linear(x, s, z)
        assert (y.data_type, y.shape) == ("uint8", (3, 2, 5))
        dq = b.dequantize_linear(y, s, z)
        assert (dq.data_type, dq.shape) == ("float32", (3, 2, 5))
    x, s, z = _operands(b, x=("float16", [6, 4, 5]), s=("float16", [2, 2, 1]), z=("int32", [2, 2, 1]))
    assert b.quantize_linear(x, s, z).data_type == "int32"


def test_foreign_operands_and_unknown_options(ctx):
    b, other = webnn.MLGraphBuilder(ctx), webnn.MLGraphBuilder(ctx)
    x, s, z = _operands(b)
    fx, fs, fz = _operands(other)
    for i, name in enumerate(("input", "scale", "zero_point")):
        args = [x, s, z]
        args[i] = (fx, fs, fz)[i]
        with pytest.raises(MLTypeError, match=f"'{name}'.*another builder"):
            b.quantize_linear(*args)
    with pytest.raises(MLTypeError, match="unknown option.*'axis'"):
        b.quantize_linear(x, s, z, axis=1)
    with pytest.raises(MLTypeError, match="'scale'"):
        b.dequantize_linear(z, None, z)


def test_op_support_limits(ctx):
    lim = ctx.op_support_limits()
    assert lim["quantize_linear"]["zero_point"]["data_types"] == QTYPES
    assert lim["dequantize_linear"]["output"]["data_types"] == FTYPES
