"""Replay the WebNN web-platform-tests (WPT) conformance vectors on webnn-gpu.

The vectors live in ``data/conformance/<operator>.json`` (one file per operator, see
``data/SOURCE.md``); each test is::

    {"name": ..., "graph": {"inputs": {name: {"data", "descriptor", "constant"?}},
                            "operators": [{"name", "arguments", "outputs"}],
                            "expectedOutputs": {name: {"data", "descriptor"}}},
     "computedTolerance"?: {"metric", "value"}}

Mapping onto the Python API (DESIGN.md section 1):

* operator names camelCase -> snake_case methods (``convTranspose2d`` ->
  ``conv_transpose2d``, ``gatherND`` -> ``gather_nd``);
* ``arguments`` are in the operator's positional order: every argument except
  ``options`` is passed positionally, ``options`` become keyword arguments
  with snake_case names (``inputLayout`` -> ``input_layout``);
* a string naming a graph input or an earlier output is that operand, also
  inside options and inside lists (``concat``'s inputs); ``"NaN"``,
  ``"Infinity"``, ``"-Infinity"`` are floats and ``"123n"`` (a JavaScript
  BigInt literal) is an int; other strings (``"nhwc"``, ``"int32"``) stay
  strings;
* inputs with ``"constant": true`` become ``builder.constant(desc, data)``,
  the others ``builder.input(name, desc)`` fed at run time.

Comparison, as WPT's ``webnn/resources/utils.js`` does it:

* ULP: an element passes when it equals the expected value or when the
  distance of the bit patterns is within the tolerance. float32 bits are read
  as sign-extended int32 (``getBitwise``), float16 bits as uint16 with the
  expected value rounded by WPT's ``toHalf``, integers by plain difference.
* ATOL: ``|actual - expected| <= tolerance``.
* Two deliberate choices where WPT's JavaScript is accidental: NaN matches
  NaN (any payload or sign; WPT's ``toHalf`` turns NaN into Infinity), and
  float16 -0 equals +0 (as float32 does).
* A scalar ``data`` with a shape of several elements means "filled with this
  number"; only the first 1000 elements are compared (``kMaximumIndexToValidate``).
* Tolerances: ``computedTolerance`` of the test wins; else the formulas of
  ``tolerances.json`` (conv2d, convTranspose2d, gemm, matmul, softmax, pools,
  resample2d, reductions) for float outputs; else the ``current`` tables; else
  ``legacy_PrecisionMetrics``; else 0 ULP for integers and
  ``DEFAULT_FLOAT_ULP`` for floats. A graph of several operators sums the
  operators' ULP tolerances.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

DATA_DIR = Path(__file__).parent / "data"
VECTOR_DIR = DATA_DIR / "conformance"
TOLERANCES_FILE = DATA_DIR / "tolerances.json"

#: WPT's kMaximumIndexToValidate: the elements compared for a scalar-filled output.
MAX_INDEX_TO_VALIDATE = 1000

#: ULP tolerance for a float output of an operator no table lists ("a few ULP").
DEFAULT_FLOAT_ULP = 2

NUMPY_DTYPES: dict[str, type[np.generic]] = {
    "float32": np.float32,
    "float16": np.float16,
    "int32": np.int32,
    "uint32": np.uint32,
    "int64": np.int64,
    "uint64": np.uint64,
    "int8": np.int8,
    "uint8": np.uint8,
}
FLOAT_TYPES = ("float32", "float16")

#: Every MLGraphBuilder operator of the WebNN spec (camelCase), for the mapping self-test.
SPEC_OPERATORS = (
    "abs add argMax argMin averagePool2d batchNormalization cast ceil clamp concat "
    "conv2d convTranspose2d cos cumulativeSum dequantizeLinear div elu equal erf exp "
    "expand floor gather gatherElements gatherND gelu gemm greater greaterOrEqual gru "
    "gruCell hardSigmoid hardSwish identity instanceNormalization isInfinite isNaN "
    "l2Pool2d layerNormalization leakyRelu lesser lesserOrEqual linear log logicalAnd "
    "logicalNot logicalOr logicalXor lstm lstmCell matmul max maxPool2d min mul neg "
    "notEqual pad pow prelu quantizeLinear reciprocal reduceL1 reduceL2 reduceLogSum "
    "reduceLogSumExp reduceMax reduceMean reduceMin reduceProduct reduceSum "
    "reduceSumSquare relu resample2d reshape reverse roundEven scatterElements "
    "scatterND sigmoid sign sin slice softmax softplus softsign split sqrt sub tan "
    "tanh tile transpose triangular where"
).split()

_SPECIAL_FLOATS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
_BIGINT_LITERAL = re.compile(r"^-?\d+n$")
_DIGITS = re.compile(r"^-?\d+n?$")
_SNAKE_EXCEPTIONS = {"isNaN": "is_nan"}

_REDUCTIONS = (
    "reduceL1 reduceL2 reduceLogSum reduceLogSumExp reduceMean reduceProduct "
    "reduceSum reduceSumSquare"
).split()


class VectorError(ValueError):
    """A conformance vector the harness cannot read (a malformed or unsupported JSON entry)."""


# ---------------------------------------------------------------------------------------
# Loading


@dataclass(frozen=True)
class Vector:
    """One WPT conformance test: its graph, expected outputs and optional tolerance."""

    file_op: str  # the JSON file's stem, e.g. "conv_transpose2d"
    name: str
    graph: dict[str, Any] = field(repr=False)
    computed_tolerance: dict[str, Any] | None = field(default=None, repr=False)

    @property
    def test_id(self) -> str:
        """The pytest id ``<op>/<test name>`` (op is the snake_case method name)."""
        return f"{self.file_op}/{self.name}"

    @property
    def operator_names(self) -> list[str]:
        """The WebNN (camelCase) names of the graph's operators, in order."""
        return [op["name"] for op in self.graph["operators"]]


def load_vectors(paths: Sequence[Path] | None = None) -> list[Vector]:
    """Load conformance vectors.

    Arguments:
        paths: JSON files to read; default every ``data/conformance/*.json``.

    Returns:
        The vectors, file by file in name order, tests in file order.

    Raises:
        VectorError: a file has no ``tests`` list or two tests share an id.
    """
    files = sorted(VECTOR_DIR.glob("*.json")) if paths is None else [Path(p) for p in paths]
    vectors: list[Vector] = []
    seen: set[str] = set()
    for path in files:
        doc = json.loads(path.read_text())
        tests = doc.get("tests")
        if not isinstance(tests, list):
            raise VectorError(f"{path.name}: no 'tests' list")
        for test in tests:
            vector = Vector(
                file_op=path.stem,
                name=test["name"],
                graph=test["graph"],
                computed_tolerance=test.get("computedTolerance"),
            )
            if vector.test_id in seen:
                raise VectorError(f"{path.name}: duplicate test id {vector.test_id!r}")
            seen.add(vector.test_id)
            vectors.append(vector)
    return vectors


def load_tolerance_tables(path: Path = TOLERANCES_FILE) -> dict[str, Any]:
    """Read ``tolerances.json`` (WPT's tolerance tables and formulas)."""
    return json.loads(path.read_text())


_TABLES: dict[str, Any] | None = None


def _tables() -> dict[str, Any]:
    global _TABLES
    if _TABLES is None:
        _TABLES = load_tolerance_tables()
    return _TABLES


# ---------------------------------------------------------------------------------------
# Names and values


def camel_to_snake(name: str) -> str:
    """Convert a WebNN camelCase name to our snake_case (``gatherND`` -> ``gather_nd``).

    A run of capitals is one word (``gatherND`` -> ``gather_nd``), a digit
    ends a word before a capital (``l2Pool2d`` -> ``l2_pool2d``).
    """
    if name in _SNAKE_EXCEPTIONS:
        return _SNAKE_EXCEPTIONS[name]
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()


def parse_number(value: Any) -> int | float:
    """Decode one JSON number as WPT writes it.

    Arguments:
        value: an int or float, ``"NaN"``, ``"Infinity"``, ``"-Infinity"``, or a
            string of digits with or without the BigInt suffix ``n``.

    Returns:
        A Python int (for digit strings and JSON integers) or float.

    Raises:
        VectorError: anything else.
    """
    if isinstance(value, bool):
        raise VectorError(f"boolean {value!r} where a number was expected")
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, str):
        if value in _SPECIAL_FLOATS:
            return _SPECIAL_FLOATS[value]
        if _DIGITS.match(value):
            return int(value.rstrip("n"))
    raise VectorError(f"{value!r} is not a number")


def to_half_bits(values: Any) -> np.ndarray:
    """Round values to float16 bit patterns the way WPT's ``toHalf`` does.

    The value goes through float32 first (a JavaScript ``Float32Array``), then
    to half with round-half-away-from-zero on the first dropped bit; values
    below the smallest half denormal's range flush to signed zero. Unlike the
    JavaScript (which turns NaN into Infinity and ORs mantissa bits into an
    overflow), NaN gives a quiet NaN and overflow gives Infinity.

    Arguments:
        values: numbers or an array of them.

    Returns:
        A ``uint16`` array of the same shape.
    """
    with np.errstate(all="ignore"):
        f32 = np.asarray(values, dtype=np.float64).astype(np.float32)
    x = f32.view(np.int32).astype(np.int64)
    sign = (x >> 16) & 0x8000
    m = (x >> 12) & 0x07FF
    e = (x >> 23) & 0xFF
    out = sign.copy()
    # Denormal half: e in [103, 113).
    sub = (e >= 103) & (e < 113)
    es = np.where(sub, e, 113)
    ms = m | 0x0800
    denormal = sign | ((ms >> (114 - es)) + ((ms >> (113 - es)) & 1))
    out = np.where(sub, denormal, out)
    # Normal half: e in [113, 142]; the rounding carry may overflow into the exponent.
    normal = (e >= 113) & (e <= 142)
    out = np.where(normal, (sign | ((e - 112) << 10) | (m >> 1)) + (m & 1), out)
    # Overflow and infinities; NaN keeps a quiet NaN.
    big = e > 142
    out = np.where(big, sign | 0x7C00, out)
    is_nan = (e == 255) & ((x & 0x007FFFFF) != 0)
    out = np.where(is_nan, sign | 0x7E00, out)
    return out.astype(np.uint16)


def _shape_size(shape: Sequence[int]) -> int:
    size = 1
    for dim in shape:
        size *= int(dim)
    return size


def decode_data(data: Any, descriptor: Mapping[str, Any]) -> np.ndarray:
    """Turn a vector's ``data`` into an ndarray of its descriptor's type and shape.

    Arguments:
        data: a list of numbers (see :func:`parse_number`) or a single number;
            a single number with a shape of several elements fills the shape.
        descriptor: ``{"shape": [...], "dataType": "..."}``.

    Returns:
        A C-contiguous array; float16 data is rounded by :func:`to_half_bits`,
        float32 data by a float32 cast (as a ``Float32Array`` does).

    Raises:
        VectorError: unknown data type, wrong element count, or an integer
            type given a value it cannot hold.
    """
    data_type = descriptor["dataType"]
    shape = tuple(int(d) for d in descriptor["shape"])
    if data_type not in NUMPY_DTYPES:
        raise VectorError(f"unknown dataType {data_type!r}")
    size = _shape_size(shape)
    if not isinstance(data, list):
        # Scalar fill: decode the one value, then fill (large shapes stay cheap).
        one = decode_data([data], {"dataType": data_type, "shape": [1]})
        return np.full(shape, one[0], dtype=one.dtype)
    values = [parse_number(v) for v in data]
    if len(values) != size:
        raise VectorError(f"{len(values)} values for shape {list(shape)} ({size} elements)")
    dtype = NUMPY_DTYPES[data_type]
    if data_type == "float16":
        return to_half_bits(values).view(np.float16).reshape(shape)
    if data_type == "float32":
        with np.errstate(all="ignore"):
            return np.asarray(values, dtype=np.float64).astype(np.float32).reshape(shape)
    info = np.iinfo(dtype)
    ints = []
    for v in values:
        if isinstance(v, float) and not v.is_integer():
            raise VectorError(f"{v!r} is not an integer for {data_type}")
        iv = int(v)
        if not info.min <= iv <= info.max:
            raise VectorError(f"{iv} is out of range for {data_type}")
        ints.append(iv)
    return np.asarray(ints, dtype=dtype).reshape(shape)


def descriptor_of(entry: Mapping[str, Any]) -> dict[str, Any]:
    """Our snake_case operand descriptor for a vector's input or output entry."""
    desc = entry["descriptor"]
    return {"data_type": desc["dataType"], "shape": [int(d) for d in desc["shape"]]}


# ---------------------------------------------------------------------------------------
# Building


@dataclass
class BuiltGraph:
    """What :func:`build_graph` made: named outputs, run-time feeds and every operand."""

    outputs: dict[str, Any]
    feeds: dict[str, np.ndarray]
    operands: dict[str, Any]


def _resolve(value: Any, operands: Mapping[str, Any]) -> Any:
    """Map one JSON argument value to the Python value our API takes."""
    if isinstance(value, str):
        if value in operands:
            return operands[value]
        if value in _SPECIAL_FLOATS:
            return _SPECIAL_FLOATS[value]
        if _BIGINT_LITERAL.match(value):
            return int(value[:-1])
        return value
    if isinstance(value, list):
        return [_resolve(v, operands) for v in value]
    if isinstance(value, dict):
        return {camel_to_snake(k): _resolve(v, operands) for k, v in value.items()}
    return value


def operator_call(operator: Mapping[str, Any], operands: Mapping[str, Any]) -> tuple[str, list, dict]:
    """Translate one JSON operator into ``(method_name, args, kwargs)``.

    Arguments:
        operator: ``{"name", "arguments", "outputs"}`` of a vector.
        operands: the operands built so far, by name.

    Returns:
        The builder method's snake_case name, the positional arguments and the
        keyword arguments (the ``options``).

    Raises:
        VectorError: an argument entry that is not a one-key object, or
            ``options`` that is not last.
    """
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    arguments = operator.get("arguments", [])
    for index, argument in enumerate(arguments):
        if not isinstance(argument, dict) or len(argument) != 1:
            raise VectorError(f"{operator['name']}: argument {index} is not a one-key object")
        ((key, value),) = argument.items()
        if key == "options":
            if index != len(arguments) - 1 or not isinstance(value, dict):
                raise VectorError(f"{operator['name']}: 'options' must be the last argument, a dict")
            kwargs = {camel_to_snake(k): _resolve(v, operands) for k, v in value.items()}
        else:
            args.append(_resolve(value, operands))
    return camel_to_snake(operator["name"]), args, kwargs


def build_graph(builder: Any, vector: Vector) -> BuiltGraph:
    """Build a vector's graph with the public builder API (without calling ``build()``).

    Arguments:
        builder: an ``MLGraphBuilder`` (or any object with the same methods).
        vector: the test.

    Returns:
        A :class:`BuiltGraph` whose ``outputs`` map every expected output name to
        its operand and whose ``feeds`` hold the data of the non-constant inputs.

    Raises:
        VectorError: a malformed vector. Errors of the builder propagate.
    """
    graph = vector.graph
    operands: dict[str, Any] = {}
    feeds: dict[str, np.ndarray] = {}
    for name, entry in graph["inputs"].items():
        array = decode_data(entry["data"], entry["descriptor"])
        desc = descriptor_of(entry)
        if entry.get("constant"):
            operands[name] = builder.constant(desc, array)
        else:
            operands[name] = builder.input(name, desc)
            feeds[name] = array
    for operator in graph["operators"]:
        method_name, args, kwargs = operator_call(operator, operands)
        result = getattr(builder, method_name)(*args, **kwargs)
        out_names = operator["outputs"]
        if isinstance(out_names, str):
            operands[out_names] = result
        else:
            results = list(result)
            if len(results) != len(out_names):
                raise AssertionError(
                    f"{method_name} returned {len(results)} operands, the vector names "
                    f"{len(out_names)} outputs {out_names}"
                )
            operands.update(zip(out_names, results))
    missing = [n for n in graph["expectedOutputs"] if n not in operands]
    if missing:
        raise VectorError(f"expected outputs {missing} are produced by no operator")
    outputs = {n: operands[n] for n in graph["expectedOutputs"]}
    return BuiltGraph(outputs=outputs, feeds=feeds, operands=operands)


def _attr(obj: Any, name: str) -> Any:
    value = getattr(obj, name)
    return value() if callable(value) else value


def operand_shapes(vector: Vector, built: BuiltGraph | None = None) -> dict[str, list[int]]:
    """Shapes of a vector's operands by name: inputs from their descriptors, others from the builder."""
    shapes = {n: [int(d) for d in e["descriptor"]["shape"]] for n, e in vector.graph["inputs"].items()}
    if built is not None:
        for name, operand in built.operands.items():
            if name not in shapes:
                shapes[name] = [int(d) for d in _attr(operand, "shape")]
    return shapes


# ---------------------------------------------------------------------------------------
# Tolerances


@dataclass(frozen=True)
class Tolerance:
    """How to compare one vector's outputs: ``metric`` "ULP" or "ATOL", its ``value``, and why."""

    metric: str
    value: float
    source: str


def _arg(operator: Mapping[str, Any], index: int) -> Any:
    arguments = operator.get("arguments", [])
    if index >= len(arguments):
        return None
    ((key, value),) = arguments[index].items()
    return None if key == "options" else value


def _options(operator: Mapping[str, Any]) -> dict[str, Any]:
    for argument in operator.get("arguments", []):
        if "options" in argument:
            return argument["options"]
    return {}


def _shape_of(ref: Any, shapes: Mapping[str, Sequence[int]]) -> list[int]:
    if not isinstance(ref, str) or ref not in shapes:
        raise VectorError(f"no shape known for operand {ref!r}")
    return [int(d) for d in shapes[ref]]


def _formula_ulp(
    operator: Mapping[str, Any], data_type: str, shapes: Mapping[str, Sequence[int]]
) -> float | None:
    """The ULP tolerance of a shape-dependent operator, or None if it has no formula."""
    name = operator["name"]
    options = _options(operator)
    if name in ("conv2d", "convTranspose2d"):
        input_shape = _shape_of(_arg(operator, 0), shapes)
        filter_shape = _shape_of(_arg(operator, 1), shapes)
        groups = options.get("groups") or 1
        channels = input_shape[3] if options.get("inputLayout") == "nhwc" else input_shape[1]
        layout = options.get("filterLayout", "oihw" if name == "conv2d" else "iohw")
        if layout in ("oihw", "iohw"):
            height, width = filter_shape[2], filter_shape[3]
        elif layout in ("hwio", "hwoi"):
            height, width = filter_shape[0], filter_shape[1]
        elif layout in ("ohwi", "ihwo"):
            height, width = filter_shape[1], filter_shape[2]
        else:
            raise VectorError(f"{name}: unknown filterLayout {layout!r}")
        ulp = height * width * (channels / groups) * 2
        return int(ulp) if float(ulp).is_integer() else ulp
    if name == "gemm":
        shape_a = _shape_of(_arg(operator, 0), shapes)
        width = shape_a[0] if options.get("aTranspose") else shape_a[1]
        ulp = width * 2
        if options.get("alpha") is not None and options["alpha"] != 1:
            ulp += 1
        if options.get("c") is not None and options.get("beta") != 0:
            if options.get("beta") is not None and options["beta"] != 1:
                ulp += 1
            ulp += 1
        return ulp
    if name == "matmul":
        return _shape_of(_arg(operator, 0), shapes)[-1] * 2
    if name == "softmax":
        input_shape = _shape_of(_arg(operator, 0), shapes)
        axis = _arg(operator, 1)
        axis = 1 if axis is None else int(axis)
        return input_shape[axis] * 3 + 3
    if name in ("averagePool2d", "l2Pool2d"):
        window = options.get("windowDimensions")
        if window is None:
            input_shape = _shape_of(_arg(operator, 0), shapes)
            window = input_shape[1:3] if options.get("layout") == "nhwc" else input_shape[2:4]
        return int(window[0]) * int(window[1]) + 2
    if name == "resample2d":
        if options.get("mode") == "linear":
            return {"float32": 84, "float16": 10}.get(data_type, 1)
        return 0
    if name in _REDUCTIONS:
        input_shape = _shape_of(_arg(operator, 0), shapes)
        axes = options.get("axes")
        rank = len(input_shape)
        sizes = input_shape if axes is None else [input_shape[a + rank if a < 0 else a] for a in axes]
        n = _shape_size(sizes)
        formula = _tables()["formulas"][name]
        return int(formula.get("factor", 1)) * n + int(formula.get("base", 0))
    return None


def _table_entry(name: str, data_type: str) -> tuple[str, float, str] | None:
    tables = _tables()
    current = tables["current"]
    dict_entry = current["getPrecisionTolerance_operatorToleranceDict"].get(name, {}).get(data_type)
    if dict_entry is not None:
        return dict_entry["metric"], dict_entry["value"], "current operatorToleranceDict"
    file_entry = current["per_file_functions"].get(name, {}).get(data_type)
    if file_entry is not None and "metric" in file_entry:
        return file_entry["metric"], file_entry["value"], f"current {current['per_file_functions'][name]['function']}"
    legacy_entry = tables["legacy_PrecisionMetrics"].get(name, {}).get(data_type)
    if legacy_entry is not None and "metric" in legacy_entry:
        return legacy_entry["metric"], legacy_entry["value"], "legacy PrecisionMetrics"
    return None


def operator_tolerance(
    operator: Mapping[str, Any], data_type: str, shapes: Mapping[str, Sequence[int]]
) -> Tolerance:
    """The WPT tolerance of one operator for an output data type.

    Arguments:
        operator: the JSON operator.
        data_type: the data type of the expected output(s).
        shapes: operand shapes by name (see :func:`operand_shapes`).

    Returns:
        The :class:`Tolerance`; formulas apply to float outputs only.
    """
    name = operator["name"]
    if data_type in FLOAT_TYPES:
        ulp = _formula_ulp(operator, data_type, shapes)
        if ulp is not None:
            return Tolerance("ULP", ulp, f"formula {name}")
    entry = _table_entry(name, data_type)
    if entry is not None:
        metric, value, source = entry
        return Tolerance(metric, value, source)
    if data_type in FLOAT_TYPES:
        return Tolerance("ULP", DEFAULT_FLOAT_ULP, "default for floats")
    return Tolerance("ULP", 0, "exact for integers")


def tolerance_for(vector: Vector, shapes: Mapping[str, Sequence[int]] | None = None) -> Tolerance:
    """The tolerance WPT applies to a vector's outputs.

    Arguments:
        vector: the test.
        shapes: operand shapes by name; default the graph inputs' descriptors
            (enough for single-operator graphs).

    Returns:
        ``computedTolerance`` when the test has one; the operator's tolerance for a
        one-operator graph; for several operators the sum of their ULP
        tolerances (ATOL operators add nothing, as in WPT's getPrecisionTolerance).
    """
    if vector.computed_tolerance is not None:
        ct = vector.computed_tolerance
        return Tolerance(ct["metric"], ct["value"], "computedTolerance")
    if shapes is None:
        shapes = operand_shapes(vector)
    expected = vector.graph["expectedOutputs"]
    data_type = next(iter(expected.values()))["descriptor"]["dataType"]
    per_op = [operator_tolerance(op, data_type, shapes) for op in vector.graph["operators"]]
    if len(per_op) == 1:
        return per_op[0]
    total = sum(t.value for t in per_op if t.metric == "ULP")
    return Tolerance("ULP", total, "sum over operators: " + ", ".join(f"{t.source}={t.value}" for t in per_op))


# ---------------------------------------------------------------------------------------
# Comparison


def float32_bits(values: np.ndarray) -> np.ndarray:
    """WPT's ``getBitwise`` for float32: the bit pattern as int64, sign-extended when value < 0.

    ``-0.0`` and negative NaNs have the sign bit set but are not ``< 0``; like
    WPT they are read as unsigned 32-bit patterns.
    """
    f = np.ascontiguousarray(values, dtype=np.float32)
    signed = f.view(np.int32).astype(np.int64)
    with np.errstate(invalid="ignore"):
        negative = f < 0
    return np.where(negative, signed, signed & 0xFFFFFFFF)


def ulp_distance(actual: np.ndarray, expected: np.ndarray, data_type: str) -> np.ndarray:
    """Distance in units in the last place between two arrays of one WebNN data type.

    Arguments:
        actual: the engine's values.
        expected: the expected values, already of the data type (float16 rounded
            by :func:`to_half_bits`).
        data_type: a WebNN data type string.

    Returns:
        float32: |bits(a) - bits(e)| (int64); float16: |uint16(a) - uint16(e)|;
        integers: |a - e| as Python ints (an object array, exact for 64-bit).
        No special case for equal values or NaN here (see :func:`compare_values`).
    """
    if data_type == "float32":
        return np.abs(float32_bits(actual) - float32_bits(expected))
    if data_type == "float16":
        a = np.ascontiguousarray(actual, dtype=np.float16).view(np.uint16).astype(np.int64)
        e = np.ascontiguousarray(expected, dtype=np.float16).view(np.uint16).astype(np.int64)
        return np.abs(a - e)
    if data_type in NUMPY_DTYPES:
        a_list = np.asarray(actual).reshape(-1).tolist()
        e_list = np.asarray(expected).reshape(-1).tolist()
        return np.asarray([abs(int(x) - int(y)) for x, y in zip(a_list, e_list)], dtype=object).reshape(
            np.shape(actual)
        )
    raise VectorError(f"unknown data type {data_type!r}")


@dataclass
class Comparison:
    """Result of comparing one output: which elements fail, and how far off they are."""

    ok: np.ndarray  # bool per compared element
    distance: np.ndarray  # ULP distance or absolute error per element
    actual: np.ndarray
    expected: np.ndarray

    @property
    def passed(self) -> bool:
        """True when every compared element is within tolerance."""
        return bool(np.all(self.ok))


def compare_values(
    actual: np.ndarray, expected: np.ndarray, data_type: str, tolerance: Tolerance
) -> Comparison:
    """Compare flat arrays element by element under a WPT tolerance.

    Arguments:
        actual: the engine's values (flat, of the data type's NumPy dtype).
        expected: for ULP, the expected values in that dtype; for ATOL, the
            expected values as float64 (not rounded to the data type).
        data_type: a WebNN data type string.
        tolerance: the :class:`Tolerance`.

    Returns:
        A :class:`Comparison`. Equal values pass; NaN passes against NaN only.
    """
    actual = np.asarray(actual).reshape(-1)
    expected = np.asarray(expected).reshape(-1)
    if actual.shape != expected.shape:
        raise ValueError(f"{actual.size} actual values against {expected.size} expected")
    if tolerance.metric == "ULP":
        distance = ulp_distance(actual, expected, data_type)
        if data_type in FLOAT_TYPES:
            a = actual.astype(np.float64)
            e = expected.astype(np.float64)
            with np.errstate(invalid="ignore"):
                equal = (a == e) | (np.isnan(a) & np.isnan(e))
            one_nan = np.isnan(a) ^ np.isnan(e)
            ok = equal | (~one_nan & (distance <= tolerance.value))
        else:
            ok = np.asarray([d <= tolerance.value for d in distance.reshape(-1)], dtype=bool)
        return Comparison(ok=ok, distance=distance, actual=actual, expected=expected)
    if tolerance.metric == "ATOL":
        a = actual.astype(np.float64)
        e = expected.astype(np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            distance = np.abs(a - e)
            equal = (a == e) | (np.isnan(a) & np.isnan(e))
            ok = equal | (distance <= tolerance.value)
        return Comparison(ok=ok, distance=distance, actual=actual, expected=expected)
    raise VectorError(f"unknown tolerance metric {tolerance.metric!r}")


def _fmt(value: Any) -> str:
    if isinstance(value, (float, np.floating)):
        return repr(float(value))
    return str(value)


def compare_output(name: str, actual: Any, entry: Mapping[str, Any], tolerance: Tolerance) -> list[str]:
    """Check one output array against a vector's expected entry.

    Arguments:
        name: the output's name (for messages).
        actual: what the engine returned.
        entry: ``expectedOutputs[name]`` of the vector.
        tolerance: the vector's :class:`Tolerance`.

    Returns:
        Problems as readable lines; empty when the output matches.
    """
    desc = entry["descriptor"]
    data_type = desc["dataType"]
    shape = tuple(int(d) for d in desc["shape"])
    dtype = np.dtype(NUMPY_DTYPES[data_type])
    if not isinstance(actual, np.ndarray):
        return [f"output {name!r}: got {type(actual).__name__}, expected a numpy.ndarray"]
    problems = []
    if actual.dtype != dtype:
        return [f"output {name!r}: dtype {actual.dtype}, expected {dtype} ({data_type})"]
    if actual.shape != shape:
        problems.append(f"output {name!r}: shape {list(actual.shape)}, expected {list(shape)}")
        if actual.size != _shape_size(shape):
            return problems
    data = entry["data"]
    flat = actual.reshape(-1)
    size = _shape_size(shape)
    if not isinstance(data, list) and size > 1:
        count = min(MAX_INDEX_TO_VALIDATE, size)
        flat = flat[:count]
        values: Any = [data] * count
    else:
        values = data if isinstance(data, list) else [data]
    if tolerance.metric == "ATOL":
        expected = np.asarray([float(parse_number(v)) for v in values], dtype=np.float64)
    else:
        expected = decode_data(values, {"dataType": data_type, "shape": [len(values)]})
    result = compare_values(flat, expected, data_type, tolerance)
    if result.passed:
        return problems
    bad = np.flatnonzero(~result.ok)
    unit = "ULP" if tolerance.metric == "ULP" else "abs error"
    details = "; ".join(
        f"[{i}] actual {_fmt(result.actual[i])} expected {_fmt(result.expected[i])} "
        f"({unit} {_fmt(result.distance[i])})"
        for i in bad[:3]
    )
    problems.append(
        f"output {name!r} ({data_type}, {tolerance.metric} <= {tolerance.value} from "
        f"{tolerance.source}): {bad.size} of {result.ok.size} elements out of tolerance; {details}"
    )
    return problems


# ---------------------------------------------------------------------------------------
# Running on the engine

#: Seconds spent per phase and per operator file: {file_op: {phase: seconds}}.
TIMINGS: dict[str, dict[str, float]] = {}


def _timed(vector: Vector, phase: str, start: float) -> float:
    now = time.perf_counter()
    per_op = TIMINGS.setdefault(vector.file_op, {})
    per_op[phase] = per_op.get(phase, 0.0) + now - start
    return now


def check_descriptors(vector: Vector, built: BuiltGraph) -> list[str]:
    """Compare each output operand's ``data_type`` and ``shape`` with the expected descriptor."""
    problems = []
    for name, entry in vector.graph["expectedOutputs"].items():
        operand = built.outputs[name]
        want_type = entry["descriptor"]["dataType"]
        want_shape = [int(d) for d in entry["descriptor"]["shape"]]
        got_type = _attr(operand, "data_type")
        got_shape = [int(d) for d in _attr(operand, "shape")]
        if got_type != want_type or got_shape != want_shape:
            problems.append(
                f"builder: output operand {name!r} is {got_type} {got_shape}, expected {want_type} {want_shape}"
            )
    return problems


def _compare_all(path: str, results: Mapping[str, Any], vector: Vector, tolerance: Tolerance) -> list[str]:
    expected = vector.graph["expectedOutputs"]
    problems = []
    if set(results) != set(expected):
        problems.append(f"{path}: returned outputs {sorted(results)}, expected {sorted(expected)}")
    for name, entry in expected.items():
        if name in results:
            problems += [f"{path}: {p}" for p in compare_output(name, results[name], entry, tolerance)]
    return problems


def run_with_tensors(ctx: Any, graph: Any, built: BuiltGraph) -> dict[str, np.ndarray]:
    """Run a graph through the tensor path: ``create_tensor``/``write_tensor``/``dispatch``/``read_tensor``.

    Arguments:
        ctx: the ``MLContext``.
        graph: the built ``MLGraph``.
        built: the :class:`BuiltGraph` it came from (feeds and output operands).

    Returns:
        The outputs read back, by name. The tensors are destroyed afterwards.
    """
    tensors = []
    try:
        inputs = {}
        for name, array in built.feeds.items():
            tensor = ctx.create_tensor(
                {"data_type": _dtype_name(array.dtype), "shape": list(array.shape), "writable": True}
            )
            tensors.append(tensor)
            ctx.write_tensor(tensor, array)
            inputs[name] = tensor
        outputs = {}
        for name, operand in built.outputs.items():
            tensor = ctx.create_tensor(
                {"data_type": _attr(operand, "data_type"), "shape": list(_attr(operand, "shape")), "readable": True}
            )
            tensors.append(tensor)
            outputs[name] = tensor
        ctx.dispatch(graph, inputs, outputs)
        return {name: ctx.read_tensor(tensor) for name, tensor in outputs.items()}
    finally:
        for tensor in tensors:
            tensor.destroy()


def _dtype_name(dtype: np.dtype) -> str:
    for name, np_type in NUMPY_DTYPES.items():
        if np.dtype(np_type) == dtype:
            return name
    raise VectorError(f"no WebNN data type for {dtype}")


def replay(ctx: Any, webnn: Any, vector: Vector) -> list[str]:
    """Build a vector's graph once and run it through ``compute()`` and the tensor path.

    Arguments:
        ctx: the shared ``MLContext``.
        webnn: the ``webnn_gpu`` module (for ``MLGraphBuilder``).
        vector: the test.

    Returns:
        Every problem found, one line each, prefixed with the path that found it;
        empty when both paths match the expected outputs.

    Raises:
        Whatever the builder or ``build()`` raises (an unsupported data type, a
        missing operator); errors of ``compute()`` and ``dispatch()`` are
        reported as problems so that both paths are always tried.
    """
    start = time.perf_counter()
    builder = webnn.MLGraphBuilder(ctx)
    built = build_graph(builder, vector)
    problems = check_descriptors(vector, built)
    graph = builder.build(built.outputs)
    start = _timed(vector, "build", start)
    try:
        tolerance = tolerance_for(vector, operand_shapes(vector, built))
        try:
            results = ctx.compute(graph, dict(built.feeds))
        except Exception as exc:  # noqa: BLE001 - reported, then the tensor path still runs
            problems.append(f"compute(): raised {type(exc).__name__}: {exc}")
        else:
            problems += _compare_all("compute()", results, vector, tolerance)
        start = _timed(vector, "compute", start)
        try:
            results = run_with_tensors(ctx, graph, built)
        except Exception as exc:  # noqa: BLE001
            problems.append(f"dispatch(): raised {type(exc).__name__}: {exc}")
        else:
            problems += _compare_all("dispatch()", results, vector, tolerance)
        _timed(vector, "tensors", start)
    finally:
        graph.destroy()
    return problems
