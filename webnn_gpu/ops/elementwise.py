"""Element-wise operators: binary arithmetic, comparisons, logical ops, unary math,
activations, clamp, cast and where.

Spec: https://www.w3.org/TR/webnn/#api-mlgraphbuilder-binary (and -unary, -logical,
-activations, -cast, -clamp, -where).

Every operator here is one row of a table: its WGSL expression over the compute-typed
operands ``{a}``, ``{b}``, ``{c}`` (and ``{T}``, the compute type), its data types, and
the helpers of ``shaders/_lib/activations.wgsl`` it calls. One template,
``elementwise/map.wgsl``, runs them all; the fusion pass chains these expressions into one
kernel (see :func:`expression`).

Semantics where the spec is silent (covered by tests/ops/test_elementwise.py):

* Integers: add, sub, mul, neg, abs and pow wrap (two's complement); division truncates
  toward zero and ``x / 0`` is ``x``; pow with a negative exponent is 1 for base 1, +-1 for
  base -1, else 0.
* cast: float -> integer truncates toward zero, saturates to the target range and maps NaN
  to 0; integer -> integer keeps the low bits (wraps); to float rounds to nearest.
* NaN: arithmetic, comparisons (``not_equal`` is true) and transcendental functions
  propagate it like IEEE 754; max, min, clamp and relu follow WGSL's max/min, which return the
  other operand when one is NaN; sign(NaN) is 0.
* float16: single correctly rounded operations run in f16; transcendental functions and
  multi-step activations (:data:`PROMOTE_F16`) run in f32 and round once.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .. import _dtypes, _env
from .. import _validate as V
from .._kernels import broadcast_strides, strides
from ..builder import MLGraphBuilder, MLOperand
from ._registry import ALL, builder_method, lowering, support

FLOATS = _dtypes.FLOAT_TYPES
SIGNED = ("float32", "float16", "int32", "int64", "int8")
NUMERIC = ALL
MAX_RANK = V.MAX_RANK


@dataclass(frozen=True)
class EW:
    """One element-wise operator: expression, data types, output type, helpers."""

    name: str
    arity: int
    expr: str
    types: tuple[str, ...]
    out: str | None = None  # fixed output type (comparisons, logical: "uint8")
    funcs: tuple[str, ...] = ()
    int_expr: str | None = None  # expression for integer types when it differs
    int_funcs: tuple[str, ...] = ()
    doc: str = ""


_TABLE: dict[str, EW] = {}


def _ew(*rows: EW) -> None:
    for r in rows:
        _TABLE[r.name] = r


_ew(
    EW("add", 2, "{a} + {b}", NUMERIC, doc="a + b, broadcasting."),
    EW("sub", 2, "{a} - {b}", NUMERIC, doc="a - b, broadcasting."),
    EW("mul", 2, "{a} * {b}", NUMERIC, doc="a * b, broadcasting."),
    EW("div", 2, "{a} / {b}", NUMERIC, doc="a / b, broadcasting (integer division truncates; x / 0 is x for integers)."),
    EW("max", 2, "max({a}, {b})", NUMERIC, doc="Element-wise maximum, broadcasting."),
    EW("min", 2, "min({a}, {b})", NUMERIC, doc="Element-wise minimum, broadcasting."),
    EW("pow", 2, "fpow_{T}({a}, {b})", NUMERIC, funcs=("fpow",), int_expr="ipow_{T}({a}, {b})",
       int_funcs=("ipow",), doc="a raised to b, broadcasting (negative bases with integer exponents keep their sign)."),
    EW("equal", 2, "select(0u, 1u, {a} == {b})", NUMERIC, out="uint8", doc="1 where a == b, else 0 (uint8)."),
    # not (a == b): `a != b` is folded to an ordered comparison by some drivers (NaN != NaN gave 0).
    EW("not_equal", 2, "select(1u, 0u, {a} == {b})", NUMERIC, out="uint8", doc="1 where a != b, else 0 (uint8)."),
    EW("greater", 2, "select(0u, 1u, {a} > {b})", NUMERIC, out="uint8", doc="1 where a > b, else 0 (uint8)."),
    EW("greater_or_equal", 2, "select(0u, 1u, {a} >= {b})", NUMERIC, out="uint8", doc="1 where a >= b (uint8)."),
    EW("lesser", 2, "select(0u, 1u, {a} < {b})", NUMERIC, out="uint8", doc="1 where a < b, else 0 (uint8)."),
    EW("lesser_or_equal", 2, "select(0u, 1u, {a} <= {b})", NUMERIC, out="uint8", doc="1 where a <= b (uint8)."),
    EW("logical_and", 2, "select(0u, 1u, ({a} != 0u) && ({b} != 0u))", ("uint8",), out="uint8",
       doc="1 where both are non-zero (uint8)."),
    EW("logical_or", 2, "select(0u, 1u, ({a} != 0u) || ({b} != 0u))", ("uint8",), out="uint8",
       doc="1 where either is non-zero (uint8)."),
    EW("logical_xor", 2, "select(0u, 1u, ({a} != 0u) != ({b} != 0u))", ("uint8",), out="uint8",
       doc="1 where exactly one is non-zero (uint8)."),
    EW("logical_not", 1, "select(0u, 1u, {a} == 0u)", ("uint8",), out="uint8", doc="1 where x is zero (uint8)."),
    EW("abs", 1, "abs({a})", SIGNED, doc="|x|."),
    EW("neg", 1, "-{a}", SIGNED, doc="-x."),
    EW("sign", 1, "sign({a})", SIGNED, doc="-1, 0 or 1 by the sign of x."),
    EW("ceil", 1, "ceil({a})", FLOATS, doc="Round up."),
    EW("floor", 1, "floor({a})", FLOATS, doc="Round down."),
    EW("round_even", 1, "round({a})", FLOATS, doc="Round to nearest, ties to even."),
    EW("exp", 1, "exp_acc_{T}({a})", FLOATS, funcs=("exp_acc",), doc="e**x."),
    EW("log", 1, "log({a})", FLOATS, doc="Natural logarithm."),
    EW("sqrt", 1, "sqrt({a})", FLOATS, doc="Square root."),
    EW("sin", 1, "sin({a})", FLOATS, doc="Sine."),
    EW("cos", 1, "cos({a})", FLOATS, doc="Cosine."),
    EW("tan", 1, "{T}(tan(f32({a})))", FLOATS, doc="Tangent."),
    EW("erf", 1, "erf_{T}({a})", FLOATS, funcs=("erf",), doc="The error function."),
    EW("reciprocal", 1, "{T}(1) / {a}", FLOATS, doc="1 / x."),
    EW("identity", 1, "{a}", NUMERIC, doc="A copy of x."),
    EW("is_nan", 1, "select(0u, 1u, is_nan_{T}({a}))", FLOATS, out="uint8", funcs=("is_nan",),
       doc="1 where x is NaN (uint8)."),
    EW("is_infinite", 1, "select(0u, 1u, is_inf_{T}({a}))", FLOATS, out="uint8", funcs=("is_inf",),
       doc="1 where x is +-infinity (uint8)."),
    EW("relu", 1, "max({a}, {T}(0))", SIGNED, doc="max(x, 0)."),
    EW("sigmoid", 1, "sigmoid_{T}({a})", FLOATS, funcs=("sigmoid",), doc="1 / (1 + exp(-x))."),
    EW("tanh", 1, "tanh_{T}({a})", FLOATS, funcs=("tanh",), doc="Hyperbolic tangent."),
    EW("gelu", 1, "gelu_{T}({a})", FLOATS, funcs=("gelu",), doc="0.5 x (1 + erf(x / sqrt(2)))."),
    EW("softplus", 1, "softplus_{T}({a})", FLOATS, funcs=("softplus",), doc="log(1 + exp(x))."),
    EW("softsign", 1, "select({a} / ({T}(1) + abs({a})), sign({a}), is_inf_{T}({a}))", FLOATS, funcs=("is_inf",),
       doc="x / (1 + |x|)."),
    EW("hard_swish", 1, "select({a} * max({T}(0), min({T}(6), {a} + {T}(3))) / {T}(6), {T}(0), {a} <= {T}(-3))",
       FLOATS, doc="x * max(0, min(6, x + 3)) / 6."),
    EW("prelu", 2, "select({b} * {a}, {a}, {a} >= {T}(0))", SIGNED, doc="x where x >= 0 else slope * x (slope broadcasts)."),
    EW("swish", 1, "{a} * sigmoid_{T}({a})", FLOATS, funcs=("sigmoid",),
       doc="x * sigmoid(x) (SiLU): made by the compiler's fuse_swish, no builder method."),
)
#: operators the compiler makes (one node for a decomposed form) that the builder does not
#: offer (not WebNN operators): no builder method, no entry in op_support_limits()
COMPILER_ONLY = {"swish"}

# Operators with options: expression built from the node's attributes.
_OPTION_OPS = {
    "elu": (FLOATS, {"alpha": 1.0}, "Exponential linear unit: x if x > 0 else alpha * (exp(x) - 1)."),
    "leaky_relu": (SIGNED[:2], {"alpha": 0.01}, "x if x >= 0 else alpha * x."),
    "hard_sigmoid": (FLOATS, {"alpha": 0.2, "beta": 0.5}, "max(0, min(1, alpha * x + beta))."),
    "linear": (FLOATS, {"alpha": 1.0, "beta": 0.0}, "alpha * x + beta."),
}


def literal(value, data_type: str) -> str:
    """A WGSL literal of ``value`` in the compute type of ``data_type``."""
    info = _dtypes.info(data_type)
    if info.is_float:
        with np.errstate(over="ignore"):
            v = float(np.float32(value))  # beyond float32's range: the infinity f32 rounds it to
        if math.isnan(v):
            f32 = "bitcast<f32>(0x7fc00000u)"
        elif math.isinf(v):
            f32 = f"bitcast<f32>({'0xff800000u' if v < 0 else '0x7f800000u'})"
        else:
            f32 = f"f32({v!r})"
        return f32 if info.compute == "f32" else f"f16({f32})"
    lo, hi = int(np.iinfo(info.numpy).min), int(np.iinfo(info.numpy).max)
    if isinstance(value, float) and math.isnan(value):
        v = 0
    elif isinstance(value, float) and math.isinf(value):
        v = hi if value > 0 else lo
    else:
        v = min(max(int(value), lo), hi)
    if info.compute == "i64" and v == lo:
        return "(-9223372036854775807li - 1li)"  # the literal 9223372036854775808li does not parse
    return {"i32": f"i32({v})", "u32": f"{v}u", "i64": f"{v}li", "u64": f"{v}lu"}[info.compute]


#: float16 ops evaluated in f32 and rounded once: lavapipe's f16 exp/log are 3-4 ULP (float16)
#: off, and f16 intermediates of multi-step formulas (alpha * x + beta, ...) lose accuracy by
#: cancellation. Single correctly rounded operations (add, mul, ...) stay in f16.
PROMOTE_F16 = {"exp", "log", "sqrt", "sin", "cos", "tan", "erf", "reciprocal", "sigmoid", "tanh", "gelu",
               "softplus", "softsign", "hard_swish", "elu", "leaky_relu", "hard_sigmoid", "linear", "pow", "swish"}


def expression(node, args: list[str]) -> tuple[list[str], str, set[tuple[str, str]]]:
    """WGSL for one element-wise node over compute-typed ``args``.

    Returns (statements, result expression, helper functions as (T, name)). Used by the
    standalone lowering and by the fusion pass.
    """
    op = node.op
    in_type = node.inputs[0].data_type if node.op != "where" else node.inputs[1].data_type
    if in_type == "float16" and op in PROMOTE_F16:
        stmts, expr, funcs = _expression(node, [f"f32({x})" for x in args], "float32")
        return stmts, f"f16({expr})", funcs
    return _expression(node, args, in_type)


def _expression(node, args: list[str], in_type: str) -> tuple[list[str], str, set[tuple[str, str]]]:
    """:func:`expression` with ``args`` of the compute type of ``in_type``."""
    op = node.op
    T = _dtypes.info(in_type).compute
    funcs: set[tuple[str, str]] = set()
    names = dict(zip("abc", args))
    if op in _TABLE:
        row = _TABLE[op]
        is_int = not _dtypes.info(in_type).is_float
        expr = row.int_expr if (is_int and row.int_expr) else row.expr
        for f in (row.int_funcs if (is_int and row.int_expr) else row.funcs):
            funcs.add((T, f))
        return [], expr.format(T=T, **names), funcs
    a = args[0] if args else ""
    attrs = node.attrs
    if op == "where":  # a step of a fused program (:data:`WHERE_FUSIBLE` values): the condition a u32
        return [], f"select({args[2]}, {args[1]}, {a} != 0u)", funcs
    if op == "elu":
        funcs.add((T, "expm1"))
        return [], f"select({literal(attrs['alpha'], in_type)} * expm1_{T}({a}), {a}, {a} > {T}(0))", funcs
    if op == "leaky_relu":
        return [], f"select({literal(attrs['alpha'], in_type)} * {a}, {a}, {a} >= {T}(0))", funcs
    if op == "hard_sigmoid":
        al, be = literal(attrs["alpha"], in_type), literal(attrs["beta"], in_type)
        return [], f"max({T}(0), min({T}(1), {al} * {a} + {be}))", funcs
    if op == "linear":
        al, be = literal(attrs["alpha"], in_type), literal(attrs["beta"], in_type)
        return [], f"{al} * {a} + {be}", funcs
    if op == "clamp":
        expr = a
        if attrs["min_value"] is not None:
            expr = f"max({expr}, {literal(attrs['min_value'], in_type)})"
        if attrs["max_value"] is not None:
            expr = f"min({expr}, {literal(attrs['max_value'], in_type)})"
        return [], expr, funcs
    if op == "cast":
        to = _dtypes.info(attrs["to"]).compute
        src = _dtypes.info(in_type)
        if to == T:
            return [], a, funcs
        if src.is_float and not _dtypes.info(attrs["to"]).is_float:
            # Float to integer: truncate toward zero, NaN -> 0, saturate to the target range.
            # NaN is found by its bits (`x != x` can be folded away); values at or past the
            # first float beyond the range's top give its maximum exactly.
            lo, hi, limit, top = _cast_range(attrs["to"])
            conv = f"{to}(clamp(trunc(cf_{a}), {lo}, {hi}))"
            if limit is not None:
                conv = f"select({top}, {conv}, cf_{a} < {limit})"
            return [f"let cf_{a} = f32({a});"], (
                f"select({conv}, {to}(0), (bitcast<u32>(cf_{a}) & 0x7fffffffu) > 0x7f800000u)"), funcs
        if to == "u64" and src.compute == "i32":
            return [], f"u64(i64({a}))", funcs  # sign-extend before reinterpreting (int8/int32 -> uint64)
        if to == "i64" and src.compute == "u32":
            return [], f"i64(u64({a}))", funcs  # zero-extend (uint8/uint32 -> int64; i64(u32) sign-extends)
        return [], f"{to}({a})", funcs
    raise KeyError(op)


def _cast_range(data_type: str) -> tuple[str, str, str | None, str | None]:
    """(lo, hi, limit, top) of a float -> integer cast.

    lo/hi: the f32 clamp bounds (the target's range, or the largest f32 below its top where
    the top is not an f32); limit: the first f32 past the top (values >= limit give ``top``,
    the target's maximum as a WGSL literal), None where hi is the top itself.
    """
    return {
        "int8": ("-128.0", "127.0", None, None),
        "uint8": ("0.0", "255.0", None, None),
        "int32": ("-2147483648.0", "2147483520.0", "2147483648.0", "i32(2147483647)"),
        "uint32": ("0.0", "4294967040.0", "4294967296.0", "4294967295u"),
        "int64": ("-9223372036854775808.0", "9223371487098961920.0", "9223372036854775808.0",
                  "9223372036854775807li"),
        "uint64": ("0.0", "18446742974197923840.0", "18446744073709551616.0", "18446744073709551615lu"),
    }[data_type]


ELEMENTWISE_OPS = set(_TABLE) | set(_OPTION_OPS) | {"clamp", "cast"}
#: ops the fusion pass may chain into one kernel (all compute-typed, one output)
FUSIBLE = ELEMENTWISE_OPS - {"identity"}

#: The value types a ``where`` may be a step of a fused element-wise program for (the compiler's
#: ``fuse_elementwise``): their compute types select exactly; a lone ``where`` is a raw select of
#: any type (:func:`lower_where`).
WHERE_FUSIBLE = ("float32", "float16", "int32", "uint32")


# ---------------------------------------------------------------- lowering
@lowering(*sorted(ELEMENTWISE_OPS))
def lower_elementwise(node, lc) -> None:
    """One map.wgsl kernel: broadcast loads, the op's expression, one store."""
    out = node.outputs[0]
    args = [f"v{i}" for i in range(len(node.inputs))]
    stmts, expr, funcs = expression(node, args)
    _map_kernel(lc, node.inputs, out, stmts, expr, funcs)


_NAME = re.compile(r"\b(v\d+|s\d+|cf\d*_\w+)\b")
_F16 = re.compile(r"\bf16\b")  # the WGSL float16 type named in an expression


def _vec4_ok(inputs, out) -> bool:
    """Whether the four-lanes-per-invocation kernel applies (see map4.wgsl)."""
    if _env.force("elementwise") == "scalar":
        return False
    if not out.shape or out.shape[-1] % 4 or any(_dtypes.info(v.data_type).packing != "plain"
                                                 for v in [*inputs, out]):
        return False
    return all(broadcast_strides(v.shape, out.shape)[-1] in (0, 1) for v in inputs)


def _map_kernel(lc, inputs, out, stmts, expr, funcs, *, raw=False) -> None:
    """Emit the map kernel, in chunks when a tensor exceeds maxStorageBufferBindingSize.

    A chunk binds the output and every input of the output's shape at the chunk's byte
    offset; broadcast inputs are bound whole.
    """
    limit = int(lc.limits.get("max-storage-buffer-binding-size", 128 << 20))
    same = [tuple(v.shape) == tuple(out.shape) for v in inputs]
    big = max(_dtypes.buffer_size(v.data_type, v.shape) for v in [out, *[v for v, s in zip(inputs, same) if s]])
    if big <= limit:
        _map_chunk(lc, inputs, out, stmts, expr, funcs, raw, 0, out.size, None)
        return
    itemsize = max(_dtypes.info(v.data_type).itemsize for v in [out, *[v for v, s in zip(inputs, same) if s]])
    chunk = (limit // itemsize) // 4096 * 4096
    for base in range(0, out.size, chunk):
        n = min(chunk, out.size - base)
        ranges: list[tuple[int, int] | None] = []
        for v, s in [*zip(inputs, same), (out, True)]:
            if s:
                isz = _dtypes.info(v.data_type).itemsize
                ranges.append((base * isz, max(4, (n * isz + 3) // 4 * 4)))
            else:
                ranges.append(None)  # a broadcast input: bound whole
        _map_chunk(lc, inputs, out, stmts, expr, funcs, raw, base, n, ranges)


def _map_chunk(lc, inputs, out, stmts, expr, funcs, raw, base, count, ranges) -> None:
    out_shape = out.shape
    by_type: dict[str, list[str]] = {}
    for T, name in sorted(funcs):
        by_type.setdefault(T, []).append(name)
    # A float16 value inside the chain (int -> float16 -> int casts) needs the extension even when
    # no binding is float16.
    needs_f16 = any(T == "f16" for T in by_type) or any(_F16.search(line) for line in [*stmts, expr])
    if not raw and _vec4_ok(inputs, out) and count % 4 == 0:
        loads = []
        for i, v in enumerate(inputs):
            st = broadcast_strides(v.shape, out_shape)
            loads.append({"name": f"in{i}", "var": f"v{i}", "strides": st,
                          "same": tuple(v.shape) == tuple(out_shape), "vec": st[-1] == 1})
        lanes, results = [], []
        for lane in range(4):
            rename = lambda m, lane=lane: f"{m.group(1)}_l{lane}"  # noqa: E731
            lanes.append([_NAME.sub(rename, line) for line in stmts])
            results.append(_NAME.sub(rename, expr))
        lc.kernel("elementwise/map4.wgsl", [(f"in{i}", v) for i, v in enumerate(inputs)], [("out", out)],
                  count // 4, loads=loads, out_strides=strides(out_shape), functions=sorted(by_type.items()),
                  lanes=lanes, results=results, needs_f16=needs_f16, base=base, ranges=ranges)
        return
    ins = []
    for i, v in enumerate(inputs):
        st = broadcast_strides(v.shape, out_shape)
        ins.append({"name": f"in{i}", "var": f"v{i}", "strides": st, "same": tuple(v.shape) == tuple(out_shape),
                    "raw": raw})
    lc.kernel("elementwise/map.wgsl", [(f"in{i}", v) for i, v in enumerate(inputs)], [("out", out)], count,
              loads=ins, out_strides=strides(out_shape), functions=sorted(by_type.items()), body=stmts,
              result=expr, raw_out=raw, needs_f16=needs_f16, base=base, ranges=ranges)


@lowering("fused_elementwise")
def lower_fused(node, lc) -> None:
    """A chain of element-wise steps in one kernel (made by the compiler's fusion pass).

    Each step's value is kept in its compute type; an int8/uint8 intermediate is wrapped to
    8 bits exactly as storing and reloading it would.
    """
    out = node.outputs[0]
    stmts: list[str] = []
    funcs: set = set()
    program = node.attrs["program"]
    for j, (step, refs) in enumerate(program):
        args = [f"v{k}" if kind == "in" else f"s{k}" for kind, k in refs]
        pre, expr, f = expression(step, args)
        funcs |= f
        stmts += [line.replace("cf_", f"cf{j}_") for line in pre]
        expr = expr.replace("cf_", f"cf{j}_")
        dt = step.outputs[0].data_type
        if j < len(program) - 1 and dt == "int8":
            expr = f"bitcast<i32>(bitcast<u32>({expr}) << 24u) >> 24u"
        elif j < len(program) - 1 and dt == "uint8":
            expr = f"({expr}) & 0xffu"
        stmts.append(f"let s{j} = {expr};")
    _map_kernel(lc, node.inputs, out, stmts, f"s{len(program) - 1}", funcs)


@lowering("identity")
def lower_identity(node, lc) -> None:
    """identity: a buffer copy (exact for every data type)."""
    lc.copy(node.inputs[0], node.outputs[0])


@lowering("where")
def lower_where(node, lc) -> None:
    """where(condition, true_value, false_value): a raw select, exact for every data type."""
    _map_kernel(lc, node.inputs, node.outputs[0], [], "select(v2, v1, v0 != 0u)", set(), raw=True)


# ---------------------------------------------------------------- builder methods
def _types_msg(types) -> str:
    return "one of " + ", ".join(types)


def _check_type(b, op, label, arg, v, types) -> None:
    if v.data_type not in types:
        V.fail(op, label, arg, f"an operand of data type {_types_msg(types)}", v.data_type)


def _binary(self: MLGraphBuilder, row: EW, a, b, label: str, kwargs: dict, names: tuple[str, str]) -> MLOperand:
    op = row.name
    na, nb = names
    V.check_kwargs(op, label, kwargs)
    self._check_usable(op, label)
    va = self._operand(op, label, na, a)
    vb = self._operand(op, label, nb, b)
    _check_type(self, op, label, na, va, row.types)
    if vb.data_type != va.data_type:
        V.fail(op, label, nb, f"the data type of {na!r} ({va.data_type})", vb.data_type)
    if op == "prelu":
        V.unidirectional_broadcast(op, label, nb, vb.shape, va.shape)
        shape = va.shape
    else:
        shape = V.broadcast_shapes(op, label, va.shape, vb.shape, na, nb)
    return self._emit1(op, [va, vb], row.out or va.data_type, shape, label=label)


def _make_binary(row: EW) -> Callable[..., MLOperand]:
    def prelu_method(self: MLGraphBuilder, input: MLOperand, slope: MLOperand, *, label: str = "",
                     **kwargs) -> MLOperand:
        return _binary(self, row, input, slope, label, kwargs, ("input", "slope"))

    def binary_method(self: MLGraphBuilder, a: MLOperand, b: MLOperand, *, label: str = "", **kwargs) -> MLOperand:
        return _binary(self, row, a, b, label, kwargs, ("a", "b"))

    method = prelu_method if row.name == "prelu" else binary_method

    method.__name__ = row.name
    method.__qualname__ = f"MLGraphBuilder.{row.name}"
    args = "input, slope" if row.name == "prelu" else "a, b"
    method.__doc__ = (
        f"{row.doc}\n\n"
        f"Spec: https://www.w3.org/TR/webnn/#api-mlgraphbuilder-{row.name.replace('_', '')}\n\n"
        f"Arguments:\n    {args} (MLOperand): same data type, {_types_msg(row.types)}; shapes broadcast.\n"
        f"    label (str): a name for errors and GPU objects.\n\n"
        f"Returns:\n    MLOperand: {'uint8' if row.out else 'the same data type'}.\n\n"
        f"Raises:\n    MLTypeError: mismatched data types, unsupported data type, non-broadcastable shapes.\n"
    )
    return method


def _make_unary(row: EW):
    def method(self: MLGraphBuilder, input: MLOperand, *, label: str = "", **kwargs) -> MLOperand:
        op = row.name
        V.check_kwargs(op, label, kwargs)
        self._check_usable(op, label)
        v = self._operand(op, label, "input", input)
        _check_type(self, op, label, "input", v, row.types)
        return self._emit1(op, [v], row.out or v.data_type, v.shape, label=label)

    method.__name__ = row.name
    method.__qualname__ = f"MLGraphBuilder.{row.name}"
    method.__doc__ = (
        f"{row.doc}\n\n"
        f"Spec: https://www.w3.org/TR/webnn/#api-mlgraphbuilder-{row.name.replace('_', '')}\n\n"
        f"Arguments:\n    input (MLOperand): {_types_msg(row.types)}.\n"
        f"    label (str): a name for errors and GPU objects.\n\n"
        f"Returns:\n    MLOperand: same shape, {'uint8' if row.out else 'same data type'}.\n\n"
        f"Raises:\n    MLTypeError: an unsupported data type or a foreign operand.\n"
    )
    return method


def _make_option_op(name, types, defaults, doc):
    def method(self: MLGraphBuilder, input: MLOperand, *, label: str = "", **kwargs) -> MLOperand:
        op = name
        V.check_kwargs(op, label, kwargs, list(defaults))
        self._check_usable(op, label)
        v = self._operand(op, label, "input", input)
        _check_type(self, op, label, "input", v, types)
        attrs = {k: V.float_value(op, label, k, kwargs.get(k, d)) for k, d in defaults.items()}
        return self._emit1(op, [v], v.data_type, v.shape, attrs, label=label)

    method.__name__ = name
    method.__qualname__ = f"MLGraphBuilder.{name}"
    opts = ", ".join(f"{k}={d}" for k, d in defaults.items())
    method.__doc__ = (
        f"{doc}\n\nSpec: https://www.w3.org/TR/webnn/#api-mlgraphbuilder-{name.replace('_', '')}\n\n"
        f"Arguments:\n    input (MLOperand): {_types_msg(types)}.\n    {opts} (float): options.\n"
        f"    label (str): a name for errors and GPU objects.\n\nReturns:\n    MLOperand: same shape and type.\n\n"
        f"Raises:\n    MLTypeError: an unsupported data type, a non-number option, an unknown option.\n"
    )
    return method


for _row in _TABLE.values():
    if _row.name in COMPILER_ONLY:
        continue
    builder_method(_make_binary(_row) if _row.arity == 2 else _make_unary(_row))
    _operands = {"a": (_row.types, (0, MAX_RANK)), "b": (_row.types, (0, MAX_RANK))} if _row.arity == 2 else \
        {"input": (_row.types, (0, MAX_RANK))}
    if _row.name == "prelu":
        _operands = {"input": (_row.types, (0, MAX_RANK)), "slope": (_row.types, (0, MAX_RANK))}
    support(_row.name, _operands, ((_row.out,) if _row.out else _row.types, (0, MAX_RANK)),
            int64_compute=_row.name != "identity")
for _name, (_types, _defaults, _doc) in _OPTION_OPS.items():
    builder_method(_make_option_op(_name, _types, _defaults, _doc))
    support(_name, {"input": (_types, (0, MAX_RANK))}, (_types, (0, MAX_RANK)))


def _bound(op, label, arg, value) -> int | float:
    """A clamp bound: integers stay exact Python ints (int64 bounds beyond 2**53), others float."""
    V.float_value(op, label, arg, value)  # type check
    return int(value) if V.is_int(value) else float(value)


@builder_method
def clamp(self: MLGraphBuilder, input: MLOperand, *, min_value=None, max_value=None, label: str = "",
          **kwargs) -> MLOperand:
    """Clamp every element into [min_value, max_value].

    Spec: https://www.w3.org/TR/webnn/#api-mlgraphbuilder-clamp

    Arguments:
        input (MLOperand): any data type.
        min_value (float | int | None): lower bound (default: none).
        max_value (float | int | None): upper bound (default: none).
        label (str): a name for errors and GPU objects.

    Returns:
        MLOperand: same shape and type.

    Raises:
        MLTypeError: min_value > max_value, a non-number bound, an unknown option.
    """
    op = "clamp"
    V.check_kwargs(op, label, kwargs)
    self._check_usable(op, label)
    v = self._operand(op, label, "input", input)
    lo = None if min_value is None else _bound(op, label, "min_value", min_value)
    hi = None if max_value is None else _bound(op, label, "max_value", max_value)
    if lo is not None and hi is not None and lo > hi:
        V.fail(op, label, "min_value", f"a value <= max_value ({hi})", lo)
    return self._emit1(op, [v], v.data_type, v.shape, {"min_value": lo, "max_value": hi}, label=label)


support("clamp", {"input": (ALL, (0, MAX_RANK))}, (ALL, (0, MAX_RANK)))


@builder_method
def cast(self: MLGraphBuilder, input: MLOperand, type: str, *, label: str = "", **kwargs) -> MLOperand:
    """Convert every element to ``type``.

    Spec: https://www.w3.org/TR/webnn/#api-mlgraphbuilder-cast

    Float to integer truncates toward zero and saturates to the target's range (NaN
    becomes 0); integer to narrower integer keeps the low bits (wraps).

    Arguments:
        input (MLOperand): any data type.
        type (str): the target data type.
        label (str): a name for errors and GPU objects.

    Returns:
        MLOperand: same shape, of ``type``.

    Raises:
        MLTypeError: an invalid type. NotSupportedError: a type this adapter cannot hold.
    """
    op = "cast"
    V.check_kwargs(op, label, kwargs)
    self._check_usable(op, label)
    v = self._operand(op, label, "input", input)
    to = V.data_type(op, label, "type", type)
    return self._emit1(op, [v], to, v.shape, {"to": to}, label=label)


support("cast", {"input": (ALL, (0, MAX_RANK))}, (ALL, (0, MAX_RANK)))


@builder_method
def where(self: MLGraphBuilder, condition: MLOperand, true_value: MLOperand, false_value: MLOperand, *,
          label: str = "", **kwargs) -> MLOperand:
    """Select ``true_value`` where ``condition`` is non-zero, else ``false_value``.

    Spec: https://www.w3.org/TR/webnn/#api-mlgraphbuilder-where

    Arguments:
        condition (MLOperand): uint8.
        true_value, false_value (MLOperand): the same data type (any).
        label (str): a name for errors and GPU objects.

    Returns:
        MLOperand: the broadcast shape of all three, of the values' data type.

    Raises:
        MLTypeError: a non-uint8 condition, mismatched value types, non-broadcastable shapes.
    """
    op = "where"
    V.check_kwargs(op, label, kwargs)
    self._check_usable(op, label)
    c = self._operand(op, label, "condition", condition)
    t = self._operand(op, label, "true_value", true_value)
    f = self._operand(op, label, "false_value", false_value)
    if c.data_type != "uint8":
        V.fail(op, label, "condition", "a uint8 operand", c.data_type)
    if f.data_type != t.data_type:
        V.fail(op, label, "false_value", f"the data type of true_value ({t.data_type})", f.data_type)
    shape = V.broadcast_shapes(op, label, t.shape, f.shape, "true_value", "false_value")
    shape = V.broadcast_shapes(op, label, c.shape, shape, "condition", "true_value/false_value")
    return self._emit1(op, [c, t, f], t.data_type, shape, label=label)


support("where", {"condition": (("uint8",), (0, MAX_RANK)), "true_value": (ALL, (0, MAX_RANK)),
                  "false_value": (ALL, (0, MAX_RANK))}, (ALL, (0, MAX_RANK)), int64_compute=False)
