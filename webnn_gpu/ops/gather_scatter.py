"""Gather and scatter operators: gather, gatherElements, gatherND, scatterElements, scatterND.

Spec: https://www.w3.org/TR/webnn/#api-mlgraphbuilder-gather (and -gatherelements,
-gathernd, -scatterelements, -scatternd).

Values move as raw bits, so every data type is exact. Indices are int32, uint32 or int64;
int64 indices are read as ``vec2<u32>`` (low word, high word) with the sign taken from the
high word, so no ``shader-int64`` is needed.

**Index values** (all five operators, the rule of ``shaders/_lib/indices.wgsl``): a negative
index counts from the end of its dimension (``i + dim``); the result is then clamped into
``[0, dim - 1]``. So ``-1`` is the last element, ``dim + 5`` reads the last element and
``-dim - 5`` the first; no index value ever reads or writes outside a buffer. (The spec asks
for indices in ``[-dim, dim)`` and lets implementations clamp the others; this is that clamp.)

**Duplicate scatter targets**: when several updates land on the same output element, the
update that comes *last* in row-major order of ``indices`` wins, on every run, as if the
updates were written one after another. The lowering makes that deterministic with three
kernels (``gather_scatter/scatter.wgsl``): clear a ``u32`` "winner" per target slot, let
every update ``atomicMax`` its position + 1 into its slot, then build each output element
from the input or from the winning update.
"""

from __future__ import annotations

import math

from .. import _dtypes
from .. import _validate as V
from .._kernels import strides
from ..builder import MLGraphBuilder, MLOperand
from . import _epilogue
from ._registry import ALL, builder_method, lowering, support

MAX_RANK = V.MAX_RANK
INDEX_TYPES = ("int32", "uint32", "int64")


# ---------------------------------------------------------------- validation helpers
def _elements_axis(op: str, label: str, v, ind, axis) -> int:
    """Check gather_elements/scatter_elements indices: the input's rank and shape except along
    ``axis``; returns the axis."""
    r = len(v.shape)
    ax = V.axis(op, label, "axis", axis, r)
    expected = list(v.shape)
    if len(ind.shape) == r:
        expected[ax] = ind.shape[ax]
    if tuple(ind.shape) != tuple(expected):
        V.fail(op, label, "indices", f"a rank-{r} shape equal to the input's {list(v.shape)} except along axis {ax}",
               list(ind.shape))
    return ax


def _indices(b, op, label, indices):
    v = b._operand(op, label, "indices", indices)
    if v.data_type not in INDEX_TYPES:
        V.fail(op, label, "indices", f"an operand of data type {', '.join(INDEX_TYPES)}", v.data_type)
    return v


def _nd_operands(self, op: str, label: str, input, indices):
    """gather_nd / scatter_nd: the input and indices operands (both of rank >= 1, index tuples
    no longer than the input's rank) and the tuple length m."""
    v = self._operand(op, label, "input", input)
    ind = _indices(self, op, label, indices)
    if not v.shape:
        V.fail(op, label, "input", "an operand of rank >= 1", "a scalar (rank 0)")
    if not ind.shape:
        V.fail(op, label, "indices", "an operand of rank >= 1", "a scalar (rank 0)")
    m = ind.shape[-1]
    if m > len(v.shape):
        V.fail(op, label, "indices", f"a last dimension <= the input's rank ({len(v.shape)})", list(ind.shape))
    return v, ind, m


def _rank_limit(op, label, shape):
    if len(shape) > MAX_RANK:
        V.fail(op, label, "indices", f"an output rank <= {MAX_RANK}", f"rank {len(shape)} (shape {list(shape)})")


def _updates(b, op, label, updates, inp, expected):
    u = b._operand(op, label, "updates", updates)
    if u.data_type != inp.data_type:
        V.fail(op, label, "updates", f"data type {inp.data_type} (that of input)", u.data_type)
    if tuple(u.shape) != tuple(expected):
        V.fail(op, label, "updates", f"shape {list(expected)}", list(u.shape))
    return u


# ---------------------------------------------------------------- gather family
@builder_method
def gather(self: MLGraphBuilder, input: MLOperand, indices: MLOperand, *, axis: int = 0, label: str = "",
           **kwargs) -> MLOperand:
    """Pick slices of ``input`` along ``axis`` by index (NumPy ``take(input, indices, axis)``).

    Spec: https://www.w3.org/TR/webnn/#api-mlgraphbuilder-gather

    Index values: negative ones count from the end (``i + dim``), then every value is
    clamped into ``[0, dim - 1]`` (``dim = input.shape[axis]``); nothing is read outside the
    input.

    Arguments:
        input (MLOperand): any data type, rank >= 1.
        indices (MLOperand): int32, uint32 or int64, any rank.
        axis (int): the axis indexed, in ``[0, rank)``; default 0.
        label (str): a name for errors and GPU objects.

    Returns:
        MLOperand: shape ``input.shape[:axis] + indices.shape + input.shape[axis+1:]``, the
        input's data type.

    Raises:
        MLTypeError: an indices data type other than int32/uint32/int64, an axis out of range,
            an output rank above the maximum.
    """
    # IDL: MLOperand gather(MLOperand input, MLOperand indices, optional MLGatherOptions options = {});
    op = "gather"
    V.check_kwargs(op, label, kwargs)
    self._check_usable(op, label)
    v = self._operand(op, label, "input", input)
    ind = _indices(self, op, label, indices)
    ax = V.axis(op, label, "axis", axis, len(v.shape))
    shape = tuple(v.shape[:ax]) + tuple(ind.shape) + tuple(v.shape[ax + 1:])
    _rank_limit(op, label, shape)
    return self._emit1(op, [v, ind], v.data_type, shape, {"axis": ax}, label=label)


@builder_method
def gather_elements(self: MLGraphBuilder, input: MLOperand, indices: MLOperand, *, axis: int = 0,
                    label: str = "", **kwargs) -> MLOperand:
    """Pick one element per index along ``axis`` (NumPy ``take_along_axis``).

    Spec: https://www.w3.org/TR/webnn/#api-mlgraphbuilder-gatherelements

    ``output[c] = input[c with c[axis] replaced by indices[c]]``. Index values: negative ones
    count from the end, then every value is clamped into ``[0, input.shape[axis] - 1]``.

    Arguments:
        input (MLOperand): any data type, rank >= 1.
        indices (MLOperand): int32, uint32 or int64, the input's rank and shape except along
            ``axis`` (where any size is allowed).
        axis (int): in ``[0, rank)``; default 0.
        label (str): a name for errors and GPU objects.

    Returns:
        MLOperand: the shape of ``indices``, the input's data type.

    Raises:
        MLTypeError: a wrong indices data type, rank or shape; an axis out of range.
    """
    # IDL: MLOperand gatherElements(MLOperand input, MLOperand indices, optional MLGatherOptions options = {});
    op = "gather_elements"
    V.check_kwargs(op, label, kwargs)
    self._check_usable(op, label)
    v = self._operand(op, label, "input", input)
    ind = _indices(self, op, label, indices)
    ax = _elements_axis(op, label, v, ind, axis)
    return self._emit1(op, [v, ind], v.data_type, ind.shape, {"axis": ax}, label=label)


@builder_method
def gather_nd(self: MLGraphBuilder, input: MLOperand, indices: MLOperand, *, label: str = "",
              **kwargs) -> MLOperand:
    """Pick slices of ``input`` by coordinate tuples (the last dimension of ``indices``).

    Spec: https://www.w3.org/TR/webnn/#api-mlgraphbuilder-gathernd

    With ``m = indices.shape[-1]``, each tuple ``indices[q, :]`` addresses the first ``m``
    dimensions of ``input``; the output holds ``input[tuple]`` (a slice over the remaining
    dimensions) for every tuple. Index values: component j is brought into
    ``[0, input.shape[j] - 1]`` (negative counts from the end, then clamped).

    Arguments:
        input (MLOperand): any data type, rank >= 1.
        indices (MLOperand): int32, uint32 or int64, rank >= 1, ``indices.shape[-1] <= input rank``.
        label (str): a name for errors and GPU objects.

    Returns:
        MLOperand: shape ``indices.shape[:-1] + input.shape[m:]``, the input's data type.

    Raises:
        MLTypeError: a wrong indices data type, a scalar input or indices, tuples longer than
            the input's rank, an output rank above the maximum.
    """
    # IDL: MLOperand gatherND(MLOperand input, MLOperand indices, optional MLOperatorOptions options = {});
    op = "gather_nd"
    V.check_kwargs(op, label, kwargs)
    self._check_usable(op, label)
    v, ind, m = _nd_operands(self, op, label, input, indices)
    shape = tuple(ind.shape[:-1]) + tuple(v.shape[m:])
    _rank_limit(op, label, shape)
    return self._emit1(op, [v, ind], v.data_type, shape, label=label)


@lowering("gather")
def lower_gather(node, lc) -> None:
    """gather: output dims [axis, axis+q) walk indices; the index picks input[.., i, ..]; a
    fused epilogue (``attrs["epilogue"]``, float inputs: an embedding's position add) applies
    to each value as it is stored."""
    src, ind = node.inputs[:2]
    out = node.outputs[0]
    ax, q = node.attrs["axis"], len(ind.shape)
    ist, jst = strides(src.shape), strides(ind.shape)
    in_terms = ist[:ax] + [0] * q + ist[ax + 1:]
    idx_terms = [0] * ax + jst + [0] * (len(src.shape) - ax - 1)
    _gather_kernel(lc, src, ind, out, in_terms, idx_terms, [(0, src.shape[ax], ist[ax])],
                   _epilogue.build(node, out, _epilogue.steps_of(node)))


@lowering("gather_elements")
def lower_gather_elements(node, lc) -> None:
    """gather_elements: the output coordinate addresses input, except indices[c] on the axis."""
    src, ind = node.inputs
    out = node.outputs[0]
    ax = node.attrs["axis"]
    ist = strides(src.shape)
    in_terms = [0 if d == ax else s for d, s in enumerate(ist)]
    _gather_kernel(lc, src, ind, out, in_terms, strides(ind.shape), [(0, src.shape[ax], ist[ax])])


@lowering("gather_nd")
def lower_gather_nd(node, lc) -> None:
    """gather_nd: leading output dims pick a tuple of m indices; the rest walk input[m:]."""
    src, ind = node.inputs
    out = node.outputs[0]
    m, q = ind.shape[-1], len(ind.shape) - 1
    ist, jst = strides(src.shape), strides(ind.shape)
    in_terms = [0] * q + ist[m:]
    idx_terms = jst[:q] + [0] * (len(src.shape) - m)
    _gather_kernel(lc, src, ind, out, in_terms, idx_terms, [(j, src.shape[j], ist[j]) for j in range(m)])


def _gather_kernel(lc, src, ind, out, in_terms, idx_terms, components, ep=None) -> None:
    ep = ep or _epilogue.Epilogue()
    lc.kernel("gather_scatter/gather.wgsl", [("input", src), ("indices", ind)] + ep.operands, [("output", out)],
              out.size, out_strides=strides(out.shape), in_terms=in_terms, idx_terms=idx_terms,
              components=[{"offset": o, "size": n, "stride": s} for o, n, s in components], ep=ep,
              out_T=_dtypes.info(out.data_type).compute)


# ---------------------------------------------------------------- scatter family
@builder_method
def scatter_elements(self: MLGraphBuilder, input: MLOperand, indices: MLOperand, updates: MLOperand, *,
                     axis: int = 0, label: str = "", **kwargs) -> MLOperand:
    """Write ``updates`` into a copy of ``input`` at positions given along ``axis``.

    Spec: https://www.w3.org/TR/webnn/#api-mlgraphbuilder-scatterelements

    For every position c of ``indices``:
    ``output[c with c[axis] replaced by indices[c]] = updates[c]``; other elements keep
    the input's values. Index values: negative ones count from the end, then every value is
    clamped into ``[0, input.shape[axis] - 1]``. When several updates target the same
    element, the one last in row-major order of ``indices`` wins (deterministically).

    Arguments:
        input (MLOperand): any data type, rank >= 1.
        indices (MLOperand): int32, uint32 or int64, the input's rank and shape except along
            ``axis``.
        updates (MLOperand): the input's data type, the shape of ``indices``.
        axis (int): in ``[0, rank)``; default 0.
        label (str): a name for errors and GPU objects.

    Returns:
        MLOperand: the input's shape and data type.

    Raises:
        MLTypeError: a wrong indices data type or shape, updates of another data type or
            shape, an axis out of range.
    """
    # IDL: MLOperand scatterElements(MLOperand input, MLOperand indices, MLOperand updates,
    #                                optional MLScatterOptions options = {});
    op = "scatter_elements"
    V.check_kwargs(op, label, kwargs)
    self._check_usable(op, label)
    v = self._operand(op, label, "input", input)
    ind = _indices(self, op, label, indices)
    ax = _elements_axis(op, label, v, ind, axis)
    u = _updates(self, op, label, updates, v, ind.shape)
    return self._emit1(op, [v, ind, u], v.data_type, v.shape, {"axis": ax}, label=label)


@builder_method
def scatter_nd(self: MLGraphBuilder, input: MLOperand, indices: MLOperand, updates: MLOperand, *,
               label: str = "", **kwargs) -> MLOperand:
    """Write slices of ``updates`` into a copy of ``input`` at coordinate tuples.

    Spec: https://www.w3.org/TR/webnn/#api-mlgraphbuilder-scatternd

    With ``m = indices.shape[-1]``, tuple ``indices[q, :]`` addresses the first ``m``
    dimensions of the output and ``updates[q]`` (a slice over ``input.shape[m:]``) is written
    there. Index values: component j is brought into ``[0, input.shape[j] - 1]`` (negative
    counts from the end, then clamped). When several tuples target the same slice, the one
    last in row-major order of ``indices`` wins (deterministically).

    Arguments:
        input (MLOperand): any data type, rank >= 1.
        indices (MLOperand): int32, uint32 or int64, rank >= 1, ``indices.shape[-1] <= input rank``.
        updates (MLOperand): the input's data type, shape
            ``indices.shape[:-1] + input.shape[m:]``.
        label (str): a name for errors and GPU objects.

    Returns:
        MLOperand: the input's shape and data type.

    Raises:
        MLTypeError: a wrong indices data type or rank, tuples longer than the input's rank,
            updates of another data type or shape.
    """
    # IDL: MLOperand scatterND(MLOperand input, MLOperand indices, MLOperand updates,
    #                          optional MLOperatorOptions options = {});
    op = "scatter_nd"
    V.check_kwargs(op, label, kwargs)
    self._check_usable(op, label)
    v, ind, m = _nd_operands(self, op, label, input, indices)
    u = _updates(self, op, label, updates, v, tuple(ind.shape[:-1]) + tuple(v.shape[m:]))
    return self._emit1(op, [v, ind, u], v.data_type, v.shape, label=label)


@lowering("scatter_elements")
def lower_scatter_elements(node, lc) -> None:
    """scatter_elements: one winner slot per output element."""
    src, ind, upd = node.inputs
    out = node.outputs[0]
    ax = node.attrs["axis"]
    ost = strides(src.shape)
    tgt_terms = [0 if d == ax else s for d, s in enumerate(ost)]
    _scatter_kernels(lc, src, ind, upd, out, ind.shape, tgt_terms, 1, [(0, src.shape[ax], ost[ax])], out.size, 1)


@lowering("scatter_nd")
def lower_scatter_nd(node, lc) -> None:
    """scatter_nd: one winner slot per position of the first m output dimensions."""
    src, ind, upd = node.inputs
    out = node.outputs[0]
    m = ind.shape[-1]
    tuples = math.prod(ind.shape[:-1])
    sst = strides(src.shape[:m])
    inner = math.prod(src.shape[m:])
    _scatter_kernels(lc, src, ind, upd, out, (tuples,), [0], m, [(j, src.shape[j], sst[j]) for j in range(m)],
                     math.prod(src.shape[:m]), inner)


def _scatter_kernels(lc, src, ind, upd, out, it_shape, tgt_terms, width, components, slots, inner) -> None:
    win = lc.temp("uint32", (slots,))
    lc.kernel("gather_scatter/scatter.wgsl", [], [("win", win)], slots, phase="clear")
    lc.kernel("gather_scatter/scatter.wgsl", [("indices", ind)], [("win", win)], math.prod(it_shape),
              phase="mark", it_strides=strides(it_shape), tgt_terms=list(tgt_terms), width=width,
              components=[{"offset": o, "size": n, "stride": s} for o, n, s in components])
    lc.kernel("gather_scatter/scatter.wgsl", [("input", src), ("updates", upd), ("win", win)], [("output", out)],
              out.size, phase="combine", inner=inner)


# ---------------------------------------------------------------- support records
_IDX = (INDEX_TYPES, (0, MAX_RANK))
support("gather", {"input": (ALL, (1, MAX_RANK)), "indices": _IDX}, (ALL, (0, MAX_RANK)), int64_compute=False)
support("gather_elements", {"input": (ALL, (1, MAX_RANK)), "indices": (INDEX_TYPES, (1, MAX_RANK))},
        (ALL, (1, MAX_RANK)), int64_compute=False)
support("gather_nd", {"input": (ALL, (1, MAX_RANK)), "indices": (INDEX_TYPES, (1, MAX_RANK))},
        (ALL, (0, MAX_RANK)), int64_compute=False)
support("scatter_elements", {"input": (ALL, (1, MAX_RANK)), "indices": (INDEX_TYPES, (1, MAX_RANK)),
                             "updates": (ALL, (1, MAX_RANK))}, (ALL, (1, MAX_RANK)), int64_compute=False)
support("scatter_nd", {"input": (ALL, (1, MAX_RANK)), "indices": (INDEX_TYPES, (1, MAX_RANK)),
                       "updates": (ALL, (0, MAX_RANK))}, (ALL, (1, MAX_RANK)), int64_compute=False)
