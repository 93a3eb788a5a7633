"""Reductions: reduce_l1 ... reduce_sum_square, arg_min / arg_max and cumulative_sum.

Spec: https://www.w3.org/TR/webnn/#api-mlgraphbuilder-reduce,
https://www.w3.org/TR/webnn/#api-mlgraphbuilder-argminmax,
https://www.w3.org/TR/webnn/#api-mlgraphbuilder-cumulativesum

Every reduction is one row of :data:`REDUCERS`: a map applied to each value, a combiner
(add, mul, max, min) and a finishing expression. One template, ``reduce/reduce.wgsl``, runs
them all (and argmax/argmin, and the global pools of :mod:`.pool`). :func:`plan` chooses how
the work is spread:

* many outputs (or few values each): one invocation per output;
* otherwise one workgroup per output, its invocations striding over the values and combining
  them with a shared-memory tree;
* many values and few outputs (``reduce_sum`` over 1M elements): the values of each output
  are split over up to 1024 workgroups that write partials, and a second pass combines them.

float16 accumulates in f32 and rounds once at the end; integers accumulate in their own
32- or 64-bit type (wrapping like WGSL integer arithmetic). ``reduce_log_sum_exp`` subtracts
the maximum first (one extra reduction), so large inputs do not overflow.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .. import _dtypes, _env
from .. import _validate as V
from .._kernels import strides, workgroups
from ..builder import MLGraphBuilder, MLOperand
from ..errors import NotSupportedError, where
from ._registry import ALL, builder_method, lowering, support

FLOATS = _dtypes.FLOAT_TYPES
SUM_TYPES = ("float32", "float16", "int32", "uint32", "int64", "uint64")
MAX_RANK = V.MAX_RANK

#: accumulate type of each input data type, and the data type of its partial buffers
ACC = {"float32": "f32", "float16": "f32", "int32": "i32", "int8": "i32", "uint32": "u32", "uint8": "u32",
       "int64": "i64", "uint64": "u64"}
ACC_DTYPE = {"f32": "float32", "i32": "int32", "u32": "uint32", "i64": "int64", "u64": "uint64"}

#: values per workgroup of a split pass, and the most splits of one output
CHUNK = 4096
MAX_SPLITS = 1024


@dataclass(frozen=True)
class Reducer:
    """One reduction: map each value, combine, finish; and the data types it accepts."""

    name: str
    combine: str
    types: tuple[str, ...]
    map_expr: str = ""
    final_expr: str = "a"
    doc: str = ""


def _abs_expr(acc: str) -> str:
    return {"f32": "abs(x)", "i32": "abs(x)", "u32": "x", "i64": "select(-x, x, x >= 0li)", "u64": "x"}[acc]


REDUCERS: dict[str, Reducer] = {r.name: r for r in (
    Reducer("reduce_l1", "add", SUM_TYPES, "{abs}", doc="The sum of absolute values (L1 norm)."),
    Reducer("reduce_l2", "add", FLOATS, "x * x", "sqrt(a)", doc="The square root of the sum of squares (L2 norm)."),
    Reducer("reduce_log_sum", "add", FLOATS, "", "log(a)", doc="The natural logarithm of the sum."),
    Reducer("reduce_log_sum_exp", "add", FLOATS, "exp(x - shift)", "log(a) + shift",
            doc="log(sum(exp(x))), computed stably as max + log(sum(exp(x - max)))."),
    Reducer("reduce_max", "max", ALL, doc="The maximum (NaN propagates)."),
    Reducer("reduce_mean", "add", FLOATS, "", "a / count", doc="The arithmetic mean."),
    Reducer("reduce_min", "min", ALL, doc="The minimum (NaN propagates)."),
    Reducer("reduce_product", "mul", SUM_TYPES, doc="The product."),
    Reducer("reduce_sum", "add", SUM_TYPES, doc="The sum."),
    Reducer("reduce_sum_square", "add", SUM_TYPES, "x * x", doc="The sum of squares."),
)}


# ---------------------------------------------------------------- planning
def merge_axes(shape, axes) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """Split ``shape`` into kept and reduced dimensions as (size, input stride) lists.

    Size-1 dimensions are dropped and neighbours of the same kind that are contiguous in
    memory are merged, so a reduction over axes [2, 3] of NCHW sees one reduced dimension.
    The kept list is in output (row-major) order.
    """
    st = strides(shape)
    axes = set(axes)
    merged: list[list] = []
    for i, size in enumerate(shape):
        if size == 1:
            continue
        red = i in axes
        if merged and merged[-1][2] == red and merged[-1][1] == st[i] * size:
            merged[-1][0] *= size
            merged[-1][1] = st[i]
        else:
            merged.append([size, st[i], red])
    kept = [(s, t) for s, t, r in merged if not r]
    reduced = [(s, t) for s, t, r in merged if r]
    return kept, reduced


def _rm(dims) -> list[int]:
    return strides([s for s, _ in dims])


def plan(M: int, K: int) -> tuple[str, int, int]:
    """(mode, workgroup size, splits) for M outputs of K values each.

    One invocation per output whenever there are enough outputs to fill the device: on
    lavapipe a workgroup per output costs several times more (barriers and per-workgroup
    overhead; measured 0.3 ms vs 3.7 ms for reduce_mean over [1, 1280, 7, 7] axes [2, 3], and
    8 ms vs 45 ms for reduce_sum over [4096, 1024] axis 1; for global pools of NCHW planes
    0.14 ms vs 0.78 ms over [1, 200, 2, 96], 0.30 ms vs 0.84 ms over [1, 32, 64, 64], 0.034 ms
    vs 0.042 ms over [1, 4, 32, 32]). One to three outputs of many values take a workgroup
    each, and very long ones are split over several workgroups.
    """
    if K <= 16 or (M >= 4 and K <= 4096) or (M >= 256 and K <= 512):
        return "thread", 64, 1
    wg = 64 if K <= 2048 else 256
    splits = 1
    if K > 2 * CHUNK and M < 256:
        splits = min(math.ceil(K / CHUNK), MAX_SPLITS)
    return "group", wg, splits


def reduce_kernels(lc, src, out, axes, *, combine: str, map_expr: str = "", final_expr: str = "a",
                   shift=None, arg: bool = False, src2=None, src2_scale: float = 1.0) -> None:
    """Record the kernels that reduce ``src`` over ``axes`` into ``out``.

    Arguments:
        lc: the LowerContext.
        src, out: Values; ``out`` holds ``prod(kept dims)`` elements in row-major order.
        axes: the reduced axes of ``src``.
        combine: "add", "mul", "max", "min", "argmax" or "argmin".
        map_expr, final_expr: WGSL (see ``reduce/reduce.wgsl``); ``{abs}`` in map_expr is
            replaced by the accumulate type's absolute value.
        shift: a float32 Value [M] subtracted inside map_expr (log-sum-exp), or None.
        arg: ``out`` receives indices (argmax/argmin).
        src2: a Value of ``src``'s shape added to it element by element before the reduction
            (a fused skip add), or a smaller image (same kept dims) whose sum times
            ``src2_scale`` is added; only where the column kernel runs (the caller checks).
    """
    kept, red = merge_axes(src.shape, axes)
    M = math.prod(s for s, _ in kept)
    K = math.prod(s for s, _ in red)
    A = ACC[src.data_type]
    map_expr = map_expr.replace("{abs}", _abs_expr(A))
    out_T = _dtypes.info(out.data_type).compute
    common = dict(A=A, combine=combine, M=M, count=f"{K}.0", arg=arg, out_T=out_T,
                  out_raw64=arg and out.data_type == "int64", shift=shift is not None)
    if not arg and shift is None and len(kept) == 1 and kept[0][1] == 1 and len(red) == 1 and red[0][1] == M \
            and M >= 4 and _env.force("reduce") != "group":
        _column_kernels(lc, src, out, M, K, A, combine, map_expr, final_expr, common["count"], out_T, src2,
                        src2_scale)
        return
    if src2 is not None:
        raise AssertionError(f"{lc.label}: a second source needs the column reduction")
    mode, wg, S = plan(M, K)
    shift_in = [("shift", shift)] if shift is not None else []
    geometry = dict(kept_rm=_rm(kept), kept_st=[t for _, t in kept], red_rm=_rm(red), red_st=[t for _, t in red])
    if S == 1:
        groups = None if mode == "thread" else workgroups(M, lc.limits, lc.label)
        lc.kernel("reduce/reduce.wgsl", [("src", src)] + shift_in, [("out", out)], M, groups=groups, workgroup=wg,
                  mode=mode, S=1, K=K, chunk=K, linear=False, map_expr=map_expr, final_expr=final_expr,
                  **geometry, **common)
        return
    chunk = math.ceil(K / S)
    S = math.ceil(K / chunk)
    part = lc.temp(ACC_DTYPE[A], (M, S))
    part_outs = [("out", part)]
    if arg:
        part_i = lc.temp("uint32", (M, S))
        part_outs.append(("out_i", part_i))
    lc.kernel("reduce/reduce.wgsl", [("src", src)] + shift_in, part_outs, M * S,
              groups=workgroups(M * S, lc.limits, lc.label), workgroup=wg, mode="group", S=S, K=K, chunk=chunk,
              linear=False, map_expr=map_expr, final_expr="", **geometry,
              **{**common, "out_T": A, "out_raw64": False})
    mode2, wg2, _ = plan(M, S)
    wg2 = min(wg2, 1 << max(5, (S - 1).bit_length()))
    srcs = [("src", part)] + ([("src_i", part_i)] if arg else [])
    lc.kernel("reduce/reduce.wgsl", srcs + shift_in, [("out", out)], M,
              groups=None if mode2 == "thread" else workgroups(M, lc.limits, lc.label), workgroup=wg2, mode=mode2,
              S=1, K=S, chunk=S, linear=True, map_expr="", final_expr=final_expr,
              kept_rm=[], kept_st=[], red_rm=[], red_st=[], **common)


#: invocations the column kernel aims for (enough to keep every llvmpipe thread busy)
COLUMN_INVOCATIONS = 2048
#: sources up to this many elements are reduced in one pass (a second dispatch costs more)
COLUMN_ONE_PASS = 32768


def _column_kernels(lc, src, out, M, K, A, combine, map_expr, final_expr, count, out_T, src2=None,
                    src2_scale: float = 1.0) -> None:
    """Reduce the rows of a row-major [K, M] source (``reduce/columns.wgsl``), plus ``src2``
    element by element when given: one pass, or a pass of row splits into a [S, M] partial
    buffer and a second pass over it. No barriers, neighbouring invocations read
    neighbouring columns (a global pool of an NHWC tensor)."""
    K2 = src2.size // M if src2 is not None else K
    rows = K + (K2 if K2 != K else 0)  # a second source of other rows is read in a loop of its own
    S = 1 if rows * M <= COLUMN_ONE_PASS else max(1, min(math.ceil(K / 32), math.ceil(COLUMN_INVOCATIONS / M)))
    chunk = math.ceil(K / S)
    S = math.ceil(K / chunk)
    common = dict(M=M, A=A, combine=combine, count=count)
    srcs = [("src", src)] + ([("src2", src2)] if src2 is not None else [])
    if (K2 != K or src2_scale != 1) and (map_expr or combine != "add"):
        raise AssertionError(f"{lc.label}: a smaller second source only for sums")  # fuse_pool_input checks
    two = dict(two=src2 is not None, two_rows=0 if K2 == K and src2_scale == 1 else K2,
               two_scale=f"{float(src2_scale)!r}",
               chunk2=math.ceil(K2 / S))
    if S == 1:
        lc.kernel("reduce/columns.wgsl", srcs, [("out", out)], M, K=K, S=1, chunk=K, map_expr=map_expr,
                  final_expr=final_expr, out_T=out_T, workgroup=64, **two, **common)
        return
    part = lc.temp(ACC_DTYPE[A], (S, M))
    lc.kernel("reduce/columns.wgsl", srcs, [("out", part)], M * S, K=K, S=S, chunk=chunk,
              map_expr=map_expr, final_expr="", out_T=A, workgroup=64, **two, **common)
    lc.kernel("reduce/columns.wgsl", [("src", part)], [("out", out)], M, K=S, S=1, chunk=S, map_expr="",
              final_expr=final_expr, out_T=out_T, workgroup=64, two=False, two_rows=0, two_scale="1.0",
              chunk2=1, **common)


def column_mean(lc, src, out, *, rows: int, cols: int, count: int, src2=None, src2_scale: float = 1.0) -> None:
    """``out[c] = (sum_r src[r, c] + src2_scale * sum_r src2[r, c]) / count`` for a float32
    [rows, cols] source (partial sums of a global average pool) and an optional second source
    of ``cols`` columns (a skip add the pool took in), rounded to ``out``'s data type."""
    _column_kernels(lc, src, out, cols, rows, "f32", "add", "", "a / count", f"{count}.0",
                    _dtypes.info(out.data_type).compute, src2=src2, src2_scale=src2_scale)


def lower_reduction(lc, name: str, src, out, axes, src2=None, src2_scale: float = 1.0) -> None:
    """Record the kernels of reduction ``name`` (a key of REDUCERS) of ``src`` (plus ``src2``
    when given: same shape, or a smaller image whose sum times ``src2_scale`` stands for it)
    over ``axes``."""
    r = REDUCERS[name]
    shift = None
    if name == "reduce_log_sum_exp":
        kept, _ = merge_axes(src.shape, axes)
        shift = lc.temp("float32", (math.prod(s for s, _ in kept),))
        reduce_kernels(lc, src, shift, axes, combine="max")
    reduce_kernels(lc, src, out, axes, combine=r.combine, map_expr=r.map_expr, final_expr=r.final_expr,
                   shift=shift, src2=src2, src2_scale=src2_scale)


@lowering(*REDUCERS)
def lower_reduce(node, lc) -> None:
    """reduce_*: one or two reduce.wgsl passes (three for log-sum-exp)."""
    lower_reduction(lc, node.op, node.inputs[0], node.outputs[0], node.attrs["axes"])


@lowering("arg_min", "arg_max")
def lower_arg(node, lc) -> None:
    """arg_min / arg_max: an index-carrying reduction over one axis."""
    reduce_kernels(lc, node.inputs[0], node.outputs[0], [node.attrs["axis"]],
                   combine="argmin" if node.op == "arg_min" else "argmax", final_expr="a", arg=True)


# ---------------------------------------------------------------- builder methods
def _check_type(op, label, arg, v, types) -> None:
    if v.data_type not in types:
        V.fail(op, label, arg, f"an operand of data type one of {', '.join(types)}", v.data_type)


def check_int64_compute(builder: MLGraphBuilder, op: str, label: str, arg: str, v) -> None:
    """Refuse int64/uint64 arithmetic on an adapter without shader-int64 (NotSupportedError)."""
    if v.data_type in ("int64", "uint64") and "shader-int64" not in builder._context._features:
        raise NotSupportedError(f"{where(op, label)}: argument {arg!r}: {v.data_type} arithmetic needs the adapter "
                                f"feature 'shader-int64', which this adapter lacks")


def reduced_shape(shape, axes, keep: bool) -> tuple[int, ...]:
    """The spec's "calculate reduction output sizes"."""
    if keep:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _make_reduce(r: Reducer):
    def method(self: MLGraphBuilder, input: MLOperand, *, axes=None, keep_dimensions: bool = False,
               label: str = "", **kwargs) -> MLOperand:
        op = r.name
        V.check_kwargs(op, label, kwargs, ["axes", "keep_dimensions"])
        self._check_usable(op, label)
        v = self._operand(op, label, "input", input)
        _check_type(op, label, "input", v, r.types)
        check_int64_compute(self, op, label, "input", v)
        rank = len(v.shape)
        ax = list(range(rank)) if axes is None else V.axes(op, label, "axes", axes, rank)
        keep = V.bool_value(op, label, "keep_dimensions", keep_dimensions)
        return self._emit1(op, [v], v.data_type, reduced_shape(v.shape, ax, keep), {"axes": ax, "keep": keep},
                           label=label)

    method.__name__ = r.name
    method.__qualname__ = f"MLGraphBuilder.{r.name}"
    method.__doc__ = (
        f"{r.doc}\n\n"
        f"Spec: https://www.w3.org/TR/webnn/#api-mlgraphbuilder-reduce\n\n"
        f"Arguments:\n"
        f"    input (MLOperand): {', '.join(r.types)}; any rank.\n"
        f"    axes (Sequence[int] | None): the axes to reduce; None (default) reduces all of them, [] none\n"
        f"        (the reduction is then applied to each value on its own).\n"
        f"    keep_dimensions (bool): keep the reduced axes as size 1 (default False).\n"
        f"    label (str): a name for errors and GPU objects.\n\n"
        f"Returns:\n    MLOperand: the input's data type, the reduced shape.\n\n"
        f"Raises:\n    MLTypeError: an unsupported data type, axes out of range or duplicated, an unknown option.\n"
    )
    return method


for _r in REDUCERS.values():
    builder_method(_make_reduce(_r))
    support(_r.name, {"input": (_r.types, (0, MAX_RANK))}, (_r.types, (0, MAX_RANK)))


def _arg_method(name: str):
    def method(self: MLGraphBuilder, input: MLOperand, axis: int, *, keep_dimensions: bool = False,
               output_data_type: str = "int32", label: str = "", **kwargs) -> MLOperand:
        op = name
        V.check_kwargs(op, label, kwargs, ["keep_dimensions", "output_data_type"])
        self._check_usable(op, label)
        v = self._operand(op, label, "input", input)
        check_int64_compute(self, op, label, "input", v)
        ax = V.axis(op, label, "axis", axis, len(v.shape))
        keep = V.bool_value(op, label, "keep_dimensions", keep_dimensions)
        dt = V.data_type(op, label, "output_data_type", output_data_type)
        if dt not in ("int32", "int64"):
            V.fail(op, label, "output_data_type", "'int32' or 'int64'", dt)
        if dt == "int32" and v.shape[ax] > 2**31 - 1:
            V.fail(op, label, "input", f"dimension {ax} (the axis) at most 2147483647 for int32 indices",
                   list(v.shape))
        return self._emit1(op, [v], dt, reduced_shape(v.shape, [ax], keep), {"axis": ax, "keep": keep},
                           label=label)

    word = "smallest" if name == "arg_min" else "largest"
    method.__name__ = name
    method.__qualname__ = f"MLGraphBuilder.{name}"
    method.__doc__ = (
        f"The index of the {word} value along ``axis``.\n\n"
        f"Spec: https://www.w3.org/TR/webnn/#api-mlgraphbuilder-argminmax\n\n"
        f"Ties give the first (lowest) index; a NaN counts as the {word} value (the first NaN wins),\n"
        f"as in NumPy.\n\n"
        f"Arguments:\n"
        f"    input (MLOperand): any data type, rank >= 1.\n"
        f"    axis (int): the axis to reduce, in [0, rank).\n"
        f"    keep_dimensions (bool): keep the axis as size 1 (default False).\n"
        f"    output_data_type (str): \"int32\" (default) or \"int64\".\n"
        f"    label (str): a name for errors and GPU objects.\n\n"
        f"Returns:\n    MLOperand: indices of ``output_data_type``, the reduced shape.\n\n"
        f"Raises:\n    MLTypeError: an axis out of range, an unsupported output data type, an unknown option.\n"
    )
    return method


for _name in ("arg_min", "arg_max"):
    builder_method(_arg_method(_name))
    support(_name, {"input": (ALL, (1, MAX_RANK))}, (("int32", "int64"), (0, MAX_RANK)))


# ---------------------------------------------------------------- cumulative_sum
#: lines at least this long with few lines are scanned in blocks (three passes)
SCAN_BLOCK = 1024


@builder_method
def cumulative_sum(self: MLGraphBuilder, input: MLOperand, axis: int, *, exclusive: bool = False,
                   reversed: bool = False, label: str = "", **kwargs) -> MLOperand:
    """Running sums along ``axis``.

    Spec: https://www.w3.org/TR/webnn/#api-mlgraphbuilder-cumulativesum

    Arguments:
        input (MLOperand): float32, float16, int32, uint32, int64 or uint64; rank >= 1.
        axis (int): the axis to sum along, in [0, rank).
        exclusive (bool): each output excludes its own input (``[1,2,3] -> [0,1,3]``); default False.
        reversed (bool): sum from the high end of the axis (``[1,2,3] -> [6,5,3]``); default False.
        label (str): a name for errors and GPU objects.

    Returns:
        MLOperand: same shape and data type.

    Raises:
        MLTypeError: an unsupported data type, an axis out of range, a non-bool option.
    """
    op = "cumulative_sum"
    V.check_kwargs(op, label, kwargs)
    self._check_usable(op, label)
    v = self._operand(op, label, "input", input)
    _check_type(op, label, "input", v, SUM_TYPES)
    check_int64_compute(self, op, label, "input", v)
    ax = V.axis(op, label, "axis", axis, len(v.shape))
    ex = V.bool_value(op, label, "exclusive", exclusive)
    rev = V.bool_value(op, label, "reversed", reversed)
    return self._emit1(op, [v], v.data_type, v.shape, {"axis": ax, "exclusive": ex, "reversed": rev}, label=label)


support("cumulative_sum", {"input": (SUM_TYPES, (1, MAX_RANK))}, (SUM_TYPES, (1, MAX_RANK)))


@lowering("cumulative_sum")
def lower_cumulative_sum(node, lc) -> None:
    """One invocation scans each line; long lines with few lines scan in blocks (3 passes)."""
    x, out = node.inputs[0], node.outputs[0]
    ax = node.attrs["axis"]
    L = x.shape[ax]
    inner = math.prod(x.shape[ax + 1:])
    lines = x.size // L
    A = ACC[x.data_type]
    common = dict(L=L, inner=inner, A=A, out_T=_dtypes.info(out.data_type).compute,
                  exclusive=node.attrs["exclusive"], reverse=node.attrs["reversed"])
    if L < 4 * SCAN_BLOCK or lines >= 256:
        lc.kernel("reduce/cumsum.wgsl", [("src", x)], [("out", out)], lines, phase="line", B=L, NB=1, **common)
        return
    nb = math.ceil(L / SCAN_BLOCK)
    sums = lc.temp(ACC_DTYPE[A], (lines, nb))
    offs = lc.temp(ACC_DTYPE[A], (lines, nb))
    lc.kernel("reduce/cumsum.wgsl", [("src", x)], [("out", sums)], lines * nb, phase="block_sums", B=SCAN_BLOCK,
              NB=nb, **common)
    lc.kernel("reduce/cumsum.wgsl", [("src", sums)], [("out", offs)], lines, phase="offsets", B=SCAN_BLOCK, NB=nb,
              **common)
    lc.kernel("reduce/cumsum.wgsl", [("src", x), ("offs", offs)], [("out", out)], lines * nb, phase="blocks",
              B=SCAN_BLOCK, NB=nb, **common)
