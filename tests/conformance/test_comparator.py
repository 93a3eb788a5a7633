"""Unit tests of the WPT comparator and tolerance rules (no GPU, no engine needed)."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest

from . import wpt

F32 = np.float32
F16 = np.float16


def ulp(metric_value, metric="ULP"):
    return wpt.Tolerance(metric, metric_value, "test")


def f32(*values):
    return np.asarray(values, dtype=F32)


def f16(*values):
    return np.asarray(values, dtype=F16)


# ---------------------------------------------------------------------------------------
# float32 ULP distance


def test_float32_adjacent_values_are_one_ulp_apart():
    one = F32(1.0)
    after = np.nextafter(one, F32(2.0))
    assert wpt.ulp_distance(f32(after), f32(one), "float32").tolist() == [1]
    minus_one = F32(-1.0)
    below = np.nextafter(minus_one, F32(-2.0))
    assert wpt.ulp_distance(f32(below), f32(minus_one), "float32").tolist() == [1]


def test_float32_distance_across_zero_is_huge_like_wpt():
    # bits(+1e-45) = 1, bits(-1e-45) = int32(0x80000001) = -2147483647 (sign-extended)
    tiny = np.float32(1e-45)
    assert wpt.ulp_distance(f32(tiny), f32(-tiny), "float32").tolist() == [2**31]
    # WPT's getBitwise reads -0.0 (not < 0) as the unsigned pattern 0x80000000.
    assert wpt.float32_bits(f32(-0.0)).tolist() == [0x80000000]
    assert wpt.float32_bits(f32(-1.0)).tolist() == [np.int32(np.float32(-1.0).view(np.int32))]


def test_float32_signed_zeros_are_equal_and_pass_with_zero_tolerance():
    result = wpt.compare_values(f32(-0.0, 0.0), f32(0.0, -0.0), "float32", ulp(0))
    assert result.passed


def test_float32_tolerance_boundary():
    e = f32(1.5, -1.5)
    a = np.asarray([e[0].view(np.int32) + 3, e[1].view(np.int32) + 3], dtype=np.int32).view(F32)
    assert wpt.ulp_distance(a, e, "float32").tolist() == [3, 3]
    assert wpt.compare_values(a, e, "float32", ulp(3)).passed
    assert not wpt.compare_values(a, e, "float32", ulp(2)).passed


def test_float32_nan_matches_only_nan():
    nan = F32("nan")
    negative_nan = np.asarray([0xFFC00001], dtype=np.uint32).view(F32)[0]
    assert wpt.compare_values(f32(nan, negative_nan), f32(nan, nan), "float32", ulp(0)).passed
    result = wpt.compare_values(f32(nan, 1.0), f32(1.0, nan), "float32", ulp(10**12))
    assert result.ok.tolist() == [False, False]


def test_float32_infinities():
    assert wpt.compare_values(f32(math.inf, -math.inf), f32(math.inf, -math.inf), "float32", ulp(0)).passed
    assert not wpt.compare_values(f32(math.inf), f32(-math.inf), "float32", ulp(1000)).passed
    largest = np.finfo(F32).max
    # Like WPT: the largest finite float is 1 ULP from infinity.
    assert wpt.compare_values(f32(largest), f32(math.inf), "float32", ulp(1)).passed


# ---------------------------------------------------------------------------------------
# float16


def test_float16_distance_uses_uint16_bits():
    one = F16(1.0)
    after = np.nextafter(one, F16(2.0))
    assert wpt.ulp_distance(f16(after), f16(one), "float16").tolist() == [1]
    assert wpt.ulp_distance(f16(-1.0), f16(np.nextafter(F16(-1.0), F16(-2.0))), "float16").tolist() == [1]
    # Smallest denormals of both signs: 0x0001 and 0x8001 as unsigned patterns.
    d = np.asarray([1], dtype=np.uint16).view(F16)
    nd = np.asarray([0x8001], dtype=np.uint16).view(F16)
    assert wpt.ulp_distance(d, nd, "float16").tolist() == [0x8000]


def test_float16_signed_zero_nan_and_tolerance():
    assert wpt.compare_values(f16(-0.0), f16(0.0), "float16", ulp(0)).passed
    assert wpt.compare_values(f16(np.nan), f16(np.nan), "float16", ulp(0)).passed
    assert not wpt.compare_values(f16(np.nan), f16(np.inf), "float16", ulp(1000)).passed
    a = np.asarray([0x3C03], dtype=np.uint16).view(F16)
    assert wpt.compare_values(a, f16(1.0), "float16", ulp(3)).passed
    assert not wpt.compare_values(a, f16(1.0), "float16", ulp(2)).passed


def test_to_half_matches_numpy_away_from_ties():
    rng = np.random.default_rng(7)
    values = np.concatenate(
        [
            rng.uniform(-70000, 70000, 2000),
            rng.uniform(-1, 1, 2000) * 2.0 ** rng.integers(-26, 16, 2000),
        ]
    ).astype(F32)
    mine = wpt.to_half_bits(values)
    with np.errstate(all="ignore"):
        reference = values.astype(F16).view(np.uint16)
    # Ties (the dropped bits exactly 1000...0) round differently; there are none in random
    # data. WPT's toHalf flushes |x| < 2^-24 to zero (exponent < 103) where NumPy rounds
    # [2^-25, 2^-24) up to the smallest denormal.
    flushed = np.abs(values) < 2.0**-24
    assert flushed.sum() > 10
    assert np.array_equal(mine[~flushed], reference[~flushed])
    assert np.all(mine[flushed] & 0x7FFF == 0)


def test_to_half_special_values_and_wpt_tie_rounding():
    assert wpt.to_half_bits([0.0, -0.0, 1.0, -2.0]).tolist() == [0x0000, 0x8000, 0x3C00, 0xC000]
    assert wpt.to_half_bits([math.inf, -math.inf, 70000.0, 65520.0]).tolist() == [0x7C00, 0xFC00, 0x7C00, 0x7C00]
    assert wpt.to_half_bits([2.0**-24, 1e-10, -(2.0**-24)]).tolist() == [0x0001, 0x0000, 0x8001]
    assert wpt.to_half_bits([0.75 * 2.0**-24]).tolist() == [0x0000]  # WPT flushes below 2^-24
    assert wpt.to_half_bits([math.nan]).tolist() == [0x7E00]
    # WPT's toHalf rounds a tie away from zero (NumPy rounds it to even: 0x3C00).
    assert wpt.to_half_bits([1.0 + 2.0**-11]).tolist() == [0x3C01]
    # The value goes through float32 first: 1 + 2^-11 + 2^-40 is a tie again in float32.
    assert wpt.to_half_bits([1.0 + 2.0**-11 + 2.0**-40]).tolist() == [0x3C01]


# ---------------------------------------------------------------------------------------
# Integers and ATOL


def test_integer_distance_is_plain_difference():
    assert wpt.ulp_distance(np.int8([-128, 5]), np.int8([127, 5]), "int8").tolist() == [255, 0]
    big = np.asarray([2**64 - 1], dtype=np.uint64)
    assert wpt.ulp_distance(big, big - np.uint64(2), "uint64").tolist() == [2]
    lo = np.asarray([-(2**63)], dtype=np.int64)
    hi = np.asarray([2**63 - 1], dtype=np.int64)
    assert wpt.ulp_distance(lo, hi, "int64").tolist() == [2**64 - 1]
    assert wpt.compare_values(np.int32([3, 4]), np.int32([3, 4]), "int32", ulp(0)).passed
    assert not wpt.compare_values(np.uint32([3, 5]), np.uint32([3, 4]), "uint32", ulp(0)).passed


def test_atol_metric():
    tol = ulp(1 / 1024, "ATOL")
    expected = np.asarray([0.5, -0.25, math.inf, math.nan], dtype=np.float64)
    good = f32(0.5 + 1 / 2048, -0.25 - 1 / 1024, math.inf, math.nan)
    assert wpt.compare_values(good, expected, "float32", tol).passed
    bad = f32(0.5 + 1 / 512, -0.25, -math.inf, 0.0)
    assert wpt.compare_values(bad, expected, "float32", tol).ok.tolist() == [False, True, False, False]


# ---------------------------------------------------------------------------------------
# compare_output: dtype, shape, scalar fill, decoding


def _entry(data, shape, data_type):
    return {"data": data, "descriptor": {"shape": shape, "dataType": data_type}}


def test_compare_output_scalar_fill_checks_first_1000_elements():
    actual = np.full(2000, 1.5, dtype=F32)
    actual[1500] = 7.0
    assert wpt.compare_output("y", actual.reshape(2, 1000), _entry(1.5, [2, 1000], "float32"), ulp(0)) == []
    actual[999] = 7.0
    problems = wpt.compare_output("y", actual.reshape(2, 1000), _entry(1.5, [2, 1000], "float32"), ulp(0))
    assert len(problems) == 1 and "1 of 1000 elements" in problems[0] and "[999]" in problems[0]


def test_compare_output_reports_dtype_and_shape():
    assert "dtype float64" in wpt.compare_output("y", np.zeros(2), _entry([0, 0], [2], "float32"), ulp(0))[0]
    problems = wpt.compare_output("y", np.zeros((2, 1), F32), _entry([0, 0], [2], "float32"), ulp(0))
    assert problems == ["output 'y': shape [2, 1], expected [2]"]
    assert "got list" in wpt.compare_output("y", [0.0], _entry([0], [1], "float32"), ulp(0))[0]


def test_compare_output_float16_expected_is_rounded_and_specials_decoded():
    # 0.1 is not a float16; the expected value is rounded to the nearest half (0x2E66).
    actual = np.asarray([0x2E66, 0x7C00, 0x7E00], dtype=np.uint16).view(F16)
    assert wpt.compare_output("y", actual, _entry([0.1, "Infinity", "NaN"], [3], "float16"), ulp(0)) == []


def test_compare_output_int64_bigint_strings():
    actual = np.asarray([9007199254740993, -2], dtype=np.int64)
    assert wpt.compare_output("y", actual, _entry(["9007199254740993n", -2], [2], "int64"), ulp(0)) == []
    problems = wpt.compare_output("y", actual, _entry(["9007199254740992n", -2], [2], "int64"), ulp(0))
    assert "ULP 1" in problems[0]


def test_decode_data():
    assert wpt.decode_data(["NaN", "-Infinity", 2], {"shape": [3], "dataType": "float32"}).dtype == F32
    a = wpt.decode_data(3, {"shape": [2, 2], "dataType": "int8"})
    assert a.tolist() == [[3, 3], [3, 3]] and a.dtype == np.int8
    assert wpt.decode_data(2.5, {"shape": [], "dataType": "float32"}).shape == ()
    assert wpt.decode_data(["18446744073709551615n"], {"shape": [1], "dataType": "uint64"}).tolist() == [2**64 - 1]
    assert wpt.decode_data(["12"], {"shape": [1], "dataType": "int64"}).tolist() == [12]
    with pytest.raises(wpt.VectorError, match="out of range"):
        wpt.decode_data([300], {"shape": [1], "dataType": "uint8"})
    with pytest.raises(wpt.VectorError, match="3 values for shape"):
        wpt.decode_data([1, 2, 3], {"shape": [2], "dataType": "float32"})


# ---------------------------------------------------------------------------------------
# Tolerances


def _vector(op_name, inputs, arguments, out_type="float32", computed=None):
    graph = {
        "inputs": {name: {"data": 0, "descriptor": {"shape": shape, "dataType": out_type}} for name, shape in inputs},
        "operators": [{"name": op_name, "arguments": arguments, "outputs": "out"}],
        "expectedOutputs": {"out": {"data": 0, "descriptor": {"shape": [1], "dataType": out_type}}},
    }
    return wpt.Vector(file_op=wpt.camel_to_snake(op_name), name="t", graph=graph, computed_tolerance=computed)


def test_conv_tolerance_formula_layouts_and_groups():
    v = _vector("conv2d", [("x", [1, 4, 5, 5]), ("w", [2, 2, 3, 3])], [{"input": "x"}, {"filter": "w"},
                {"options": {"groups": 2}}])
    assert wpt.tolerance_for(v) == wpt.Tolerance("ULP", 3 * 3 * 2 * 2, "formula conv2d")
    v = _vector("conv2d", [("x", [1, 5, 5, 3]), ("w", [2, 4, 3, 1])], [{"input": "x"}, {"filter": "w"},
                {"options": {"inputLayout": "nhwc", "filterLayout": "hwio"}}])
    assert wpt.tolerance_for(v).value == 2 * 4 * 3 * 2
    v = _vector("convTranspose2d", [("x", [1, 1, 3, 3]), ("w", [1, 2, 3, 3])], [{"input": "x"}, {"filter": "w"}])
    assert wpt.tolerance_for(v).value == 18
    v = _vector("conv2d", [("x", [1, 3, 5, 5]), ("w", [3, 1, 2, 2])], [{"input": "x"}, {"filter": "w"},
                {"options": {"groups": 2}}])
    assert wpt.tolerance_for(v).value == 12.0  # 2*2*(3/2)*2, fractional channels per group as in WPT


def test_gemm_formula_agrees_with_every_computed_tolerance():
    gemm = [v for v in wpt.load_vectors([wpt.VECTOR_DIR / "gemm.json"])]
    assert len(gemm) == 23
    for vector in gemm:
        stripped = wpt.Vector(vector.file_op, vector.name, vector.graph, None)
        assert wpt.tolerance_for(stripped).value == vector.computed_tolerance["value"], vector.name
        assert wpt.tolerance_for(vector).source == "computedTolerance"


def test_matmul_softmax_and_reduction_formulas():
    v = _vector("matmul", [("a", [2, 3, 7]), ("b", [2, 7, 4])], [{"a": "a"}, {"b": "b"}])
    assert wpt.tolerance_for(v).value == 14
    v = _vector("softmax", [("x", [3, 5, 2])], [{"input": "x"}, {"axis": 1}])
    assert wpt.tolerance_for(v).value == 18
    v = _vector("reduceL2", [("x", [2, 3, 4])], [{"input": "x"}, {"options": {"axes": [0, -1]}}])
    assert wpt.tolerance_for(v).value == 2 * 8 + 1
    v = _vector("reduceLogSumExp", [("x", [2, 3])], [{"input": "x"}])
    assert wpt.tolerance_for(v).value == 2 * 6 + 18
    v = _vector("reduceMean", [("x", [2, 3])], [{"input": "x"}, {"options": {"axes": []}}])
    assert wpt.tolerance_for(v).value == 1 + 2
    v = _vector("reduceSum", [("x", [])], [{"input": "x"}])
    assert wpt.tolerance_for(v).value == 1
    # Integer outputs are exact, formulas are for floats only.
    v = _vector("reduceL1", [("x", [2, 3])], [{"input": "x"}], out_type="int32")
    assert wpt.tolerance_for(v) == wpt.Tolerance("ULP", 0, "exact for integers")


def test_table_lookups():
    def tol(op, data_type):
        return wpt.tolerance_for(_vector(op, [("x", [1])], [{"input": "x"}], out_type=data_type))

    assert (tol("relu", "float32").metric, tol("relu", "float32").value) == ("ULP", 0)
    assert tol("sigmoid", "float16").value == 3
    assert tol("tanh", "float32") == wpt.Tolerance("ATOL", 1 / 1024, "current getTanhPrecisionTolerance")
    assert tol("exp", "float32").value == 32
    assert tol("layerNormalization", "float16") == wpt.Tolerance("ATOL", 1 / 512, "legacy PrecisionMetrics")
    assert tol("cast", "int64").value == 0
    assert tol("abs", "int32") == wpt.Tolerance("ULP", 0, "exact for integers")
    assert tol("sign", "float32") == wpt.Tolerance("ULP", wpt.DEFAULT_FLOAT_ULP, "default for floats")


def test_multi_operator_graph_sums_ulp_tolerances():
    v = _vector("relu", [("x", [4, 6])], [{"input": "x"}])
    graph = copy.deepcopy(v.graph)
    graph["operators"] = [
        {"name": "matmul", "arguments": [{"a": "x"}, {"b": "x"}], "outputs": "m"},
        {"name": "add", "arguments": [{"a": "m"}, {"b": "m"}], "outputs": "s"},
        {"name": "tanh", "arguments": [{"input": "s"}], "outputs": "out"},
    ]
    multi = wpt.Vector("matmul", "chain", graph)
    tolerance = wpt.tolerance_for(multi, {"x": [4, 6], "m": [4, 4], "s": [4, 4]})
    assert (tolerance.metric, tolerance.value) == ("ULP", 12 + 1)
