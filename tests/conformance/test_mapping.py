"""GPU-free self-test of the JSON -> builder call mapping, with a builder that records calls.

This checks how vectors are translated into our Python API (method names,
positional arguments, keyword options, operand resolution, constants versus
inputs), not any numeric result.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from . import wpt
from .test_wpt import EXPECTED_FAILURES, VECTORS

SNAKE_OPERATORS = {wpt.camel_to_snake(name) for name in wpt.SPEC_OPERATORS}


class FakeOperand:
    """Stands for an MLOperand; remembers where it came from."""

    def __init__(self, origin: str, data_type: str = "float32", shape=()):
        self.origin = origin
        self.data_type = data_type
        self.shape = list(shape)

    def __repr__(self):
        return f"FakeOperand({self.origin})"


class FakeBuilder:
    """Records every call made to it; answers only the spec's operator names."""

    def __init__(self):
        self.calls: list[tuple[str, tuple, dict]] = []

    def input(self, name, descriptor):
        self.calls.append(("input", (name, descriptor), {}))
        return FakeOperand(f"input:{name}", descriptor["data_type"], descriptor["shape"])

    def constant(self, descriptor, data):
        self.calls.append(("constant", (descriptor, data), {}))
        return FakeOperand("constant", descriptor["data_type"], descriptor["shape"])

    def __getattr__(self, name):
        if name not in SNAKE_OPERATORS:
            raise AttributeError(f"FakeBuilder has no operator {name!r}")

        def op(*args, **kwargs):
            self.calls.append((name, args, kwargs))
            if name == "split":
                count = args[1] if isinstance(args[1], int) else len(args[1])
                return [FakeOperand(f"{name}[{i}]") for i in range(count)]
            return FakeOperand(name)

        return op


def build(vector):
    builder = FakeBuilder()
    built = wpt.build_graph(builder, vector)
    return builder, built


def ops_of(builder):
    return [c for c in builder.calls if c[0] not in ("input", "constant")]


def vector(test_id):
    for v in VECTORS:
        if v.test_id == test_id:
            return v
    raise KeyError(test_id)


def first(op, predicate=lambda v: True):
    return next(v for v in VECTORS if v.file_op == op and predicate(v))


# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "camel, snake",
    [
        ("reduceLogSumExp", "reduce_log_sum_exp"),
        ("convTranspose2d", "conv_transpose2d"),
        ("averagePool2d", "average_pool2d"),
        ("gatherND", "gather_nd"),
        ("scatterND", "scatter_nd"),
        ("leakyRelu", "leaky_relu"),
        ("reduceL1", "reduce_l1"),
        ("l2Pool2d", "l2_pool2d"),
        ("isNaN", "is_nan"),
        ("inputLayout", "input_layout"),
        ("keepDimensions", "keep_dimensions"),
        ("aTranspose", "a_transpose"),
        ("outputPadding", "output_padding"),
        ("conv2d", "conv2d"),
    ],
)
def test_camel_to_snake(camel, snake):
    assert wpt.camel_to_snake(camel) == snake


def test_parse_number():
    assert wpt.parse_number("9007199254740993n") == 9007199254740993
    assert wpt.parse_number("-5n") == -5 and wpt.parse_number("12") == 12
    assert math.isnan(wpt.parse_number("NaN"))
    assert wpt.parse_number("-Infinity") == -math.inf
    with pytest.raises(wpt.VectorError):
        wpt.parse_number("nchw")


def test_vector_ids_are_unique_and_cover_every_file():
    assert len(VECTORS) == len({v.test_id for v in VECTORS}) == 1502
    assert len({v.file_op for v in VECTORS}) == 55


def test_every_vector_maps_onto_the_api():
    """Every vector builds against the recording builder: spec method names, snake_case
    keywords, no operand left as a name, inputs and constants per the vector."""
    for v in VECTORS:
        builder, built = build(v)
        names = set(v.graph["inputs"]) | set(built.operands)
        for method, args, kwargs in ops_of(builder):
            assert method in SNAKE_OPERATORS, (v.test_id, method)
            for key in kwargs:
                assert re.fullmatch(r"[a-z0-9_]+", key), (v.test_id, key)

            def no_names(value):
                if isinstance(value, str):
                    assert value not in names, (v.test_id, method, value)
                elif isinstance(value, (list, tuple)):
                    for item in value:
                        no_names(item)

            no_names(list(args) + list(kwargs.values()))
        inputs = [c for c in builder.calls if c[0] == "input"]
        constants = [c for c in builder.calls if c[0] == "constant"]
        assert len(inputs) + len(constants) == len(v.graph["inputs"])
        assert set(built.feeds) == {n for n, e in v.graph["inputs"].items() if not e.get("constant")}
        for name, (desc, data) in [(None, c[1]) for c in constants]:
            assert set(desc) == {"data_type", "shape"}
            assert data.dtype == np.dtype(wpt.NUMPY_DTYPES[desc["data_type"]])
            assert list(data.shape) == desc["shape"]
        for _, (name, desc), _ in inputs:
            assert set(desc) == {"data_type", "shape"}
            assert built.feeds[name].dtype == np.dtype(wpt.NUMPY_DTYPES[desc["data_type"]])
        assert set(built.outputs) == set(v.graph["expectedOutputs"])


def test_every_vector_has_a_tolerance_and_decodable_expectations():
    for v in VECTORS:
        tolerance = wpt.tolerance_for(v)
        assert tolerance.metric in ("ULP", "ATOL") and tolerance.value >= 0, v.test_id
        for entry in v.graph["expectedOutputs"].values():
            data = entry["data"]
            if isinstance(data, list):
                wpt.decode_data(data, entry["descriptor"])


def test_conv2d_options_become_keywords_and_bias_an_operand():
    v = first("conv2d", lambda v: "all options" in v.name and "float32" in v.name)
    builder, _ = build(v)
    ((method, args, kwargs),) = ops_of(builder)
    assert method == "conv2d"
    assert [a.origin for a in args] == [
        "constant" if v.graph["inputs"][n].get("constant") else f"input:{n}" for n in ("conv2dInput", "conv2dFilter")
    ]
    assert kwargs["input_layout"] == "nchw" and kwargs["filter_layout"] == "hwio"
    assert isinstance(kwargs["bias"], FakeOperand)
    assert set(kwargs) >= {"padding", "strides", "dilations", "groups"}


def test_conv_transpose2d_method_and_output_sizes():
    v = first("conv_transpose2d", lambda v: "outputSizes" in str(v.graph["operators"]))
    builder, _ = build(v)
    ((method, _, kwargs),) = ops_of(builder)
    assert method == "conv_transpose2d" and "output_sizes" in kwargs


def test_concat_inputs_list_and_axis():
    v = first("concat")
    builder, _ = build(v)
    ((method, args, kwargs),) = ops_of(builder)
    assert method == "concat" and kwargs == {}
    assert all(isinstance(a, FakeOperand) for a in args[0]) and isinstance(args[1], int)


def test_split_list_outputs_and_splits_argument():
    v = first("split", lambda v: isinstance(v.graph["operators"][0]["outputs"], list))
    builder, built = build(v)
    ((method, args, kwargs),) = ops_of(builder)
    assert method == "split" and isinstance(args[0], FakeOperand)
    assert isinstance(args[1], (int, list))
    assert [o.origin for o in built.outputs.values()] == [f"split[{i}]" for i in range(len(built.outputs))]


def test_cast_type_reshape_expand_slice_softmax_transpose_positional():
    builder, _ = build(first("cast", lambda v: v.name == "cast float32 4D tensor to int32"))
    assert ops_of(builder)[0][1][1] == "int32"
    builder, _ = build(first("reshape"))
    (_, args, kwargs), = ops_of(builder)
    assert isinstance(args[1], list) and kwargs == {}
    builder, _ = build(first("expand"))
    assert isinstance(ops_of(builder)[0][1][1], list)
    builder, _ = build(first("slice", lambda v: len(v.graph["operators"][0]["arguments"]) == 4))
    (_, args, kwargs), = ops_of(builder)
    assert len(args) == 3 and set(kwargs) == {"strides"}
    builder, _ = build(first("softmax"))
    (_, args, kwargs), = ops_of(builder)
    assert isinstance(args[1], int) and kwargs == {}
    builder, _ = build(first("transpose", lambda v: len(v.graph["operators"][0]["arguments"]) == 2))
    (_, args, kwargs), = ops_of(builder)
    assert len(args) == 1 and set(kwargs) == {"permutation"}


def test_gemm_c_option_is_an_operand_and_flags_snake_case():
    v = first("gemm", lambda v: "c" in wpt._options(v.graph["operators"][0]))
    builder, _ = build(v)
    (_, args, kwargs), = ops_of(builder)
    assert isinstance(kwargs["c"], FakeOperand)
    builder, _ = build(first("gemm", lambda v: "aTranspose" in wpt._options(v.graph["operators"][0])))
    assert "a_transpose" in ops_of(builder)[0][2]


def test_clamp_special_values_and_bigints_in_options():
    (_, _, kwargs), = ops_of(build(vector("clamp/minValue as -Infinity"))[0])
    assert kwargs == {"min_value": -math.inf}
    (_, _, kwargs), = ops_of(build(vector("clamp/maxValue as NaN"))[0])
    assert math.isnan(kwargs["max_value"])
    builder, built = build(vector("clamp/clamp int64 1D tensor with bigint max"))
    (_, _, kwargs), = ops_of(builder)
    assert kwargs == {"min_value": -2, "max_value": 9007199254740992}
    assert built.feeds["clampInput"].tolist()[1] == 9007199254740995


def test_normalization_operands_in_options():
    v = first("batch_normalization", lambda v: "scale" in wpt._options(v.graph["operators"][0]))
    (_, args, kwargs), = ops_of(build(v)[0])
    assert len(args) == 3 and isinstance(kwargs["scale"], FakeOperand)
    v = first("layer_normalization", lambda v: "axes" in wpt._options(v.graph["operators"][0]))
    (method, _, kwargs), = ops_of(build(v)[0])
    assert method == "layer_normalization" and isinstance(kwargs["axes"], list)


def test_reduce_options_and_float16_constants():
    v = first("reduce_log_sum_exp", lambda v: "keepDimensions" in wpt._options(v.graph["operators"][0]))
    (method, _, kwargs), = ops_of(build(v)[0])
    assert method == "reduce_log_sum_exp" and isinstance(kwargs["keep_dimensions"], bool)
    v = first("abs", lambda v: v.name == "abs float16 1D constant tensor")
    builder, _ = build(v)
    (_, (desc, data), _), = [c for c in builder.calls if c[0] == "constant"]
    assert desc["data_type"] == "float16" and data.dtype == np.float16


def test_expected_failures_refer_to_existing_vectors():
    ids = {v.test_id for v in VECTORS}
    ops = {v.file_op for v in VECTORS}
    for test_id, reason in EXPECTED_FAILURES.items():
        assert isinstance(reason, str) and reason.strip(), test_id
        if test_id.split("/", 1)[0] in ops:
            assert test_id in ids, f"stale expected failure: {test_id}"
