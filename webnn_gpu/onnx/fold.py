"""Load-time evaluation of ONNX nodes whose inputs are all known (NumPy).

Exported graphs compute shapes, axes, starts and scales from ``Shape`` of their
tensors: ``Shape -> Gather -> Unsqueeze -> Concat -> Reshape``. With static input
shapes these values are known when the model is loaded, so the nodes that compute them
are evaluated here with NumPy, and the operators that need them (``Reshape``,
``Slice``, ``Resize``, ``Expand``, ``Tile``...) get plain lists. Only the operators of
:data:`FOLDERS` are evaluated here, on integer or small values; every other operator
whose inputs are known is built as a WebNN operator on constants (the engine's compiler
folds those).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .reader import np_dtype_of

__all__ = ["FOLDERS", "fold"]

FOLDERS: dict[str, Callable] = {}


def _f(*names):
    def deco(fn):
        for n in names:
            FOLDERS[n] = fn
        return fn
    return deco


def _axes_arg(n, x, pos: int, attr: str = "axes"):
    if len(x) > pos and x[pos] is not None:
        return [int(a) for a in np.asarray(x[pos]).reshape(-1)]
    a = n.attrs.get(attr)
    return None if a is None else [int(v) for v in a]


def _int_div(a, b):
    """Integer division that truncates toward zero (ONNX / C semantics)."""
    q = np.floor_divide(a, b)
    fix = (np.mod(a, b) != 0) & ((a < 0) != (b < 0))
    return (q + fix).astype(np.result_type(a, b))


def _arith(fn):
    def run(n, x):
        a, b = x[0], x[1]
        return [np.asarray(fn(a, b)).astype(np.result_type(a, b), copy=False)]
    return run


FOLDERS["Add"] = _arith(np.add)
FOLDERS["Sub"] = _arith(np.subtract)
FOLDERS["Mul"] = _arith(np.multiply)


@_f("Div")
def _div(n, x):
    a, b = x
    if np.issubdtype(np.result_type(a, b), np.integer):
        return [_int_div(a, b)]
    return [np.asarray(a / b).astype(np.result_type(a, b))]


@_f("Mod")
def _mod(n, x):
    a, b = x
    if n.attrs.get("fmod", 0):
        return [np.fmod(a, b)]
    return [np.mod(a, b)]


@_f("Neg")
def _neg(n, x):
    return [np.negative(x[0])]


@_f("Abs")
def _abs(n, x):
    return [np.abs(x[0])]


@_f("Floor", "Ceil", "Sqrt", "Reciprocal")
def _unary_f(n, x):
    fn = {"Floor": np.floor, "Ceil": np.ceil, "Sqrt": np.sqrt, "Reciprocal": np.reciprocal}[n.op]
    return [fn(x[0]).astype(x[0].dtype)]


@_f("Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual")
def _cmp(n, x):
    fn = {"Equal": np.equal, "Less": np.less, "Greater": np.greater, "LessOrEqual": np.less_equal,
          "GreaterOrEqual": np.greater_equal}[n.op]
    return [fn(x[0], x[1])]


@_f("Not")
def _not(n, x):
    return [np.logical_not(x[0])]


@_f("And", "Or", "Xor")
def _logic(n, x):
    fn = {"And": np.logical_and, "Or": np.logical_or, "Xor": np.logical_xor}[n.op]
    return [fn(x[0], x[1])]


@_f("Min", "Max")
def _minmax(n, x):
    fn = np.minimum if n.op == "Min" else np.maximum
    out = x[0]
    for v in x[1:]:
        out = fn(out, v)
    return [out]


@_f("Where")
def _where(n, x):
    return [np.where(x[0], x[1], x[2]).astype(np.result_type(x[1], x[2]))]


@_f("Identity")
def _identity(n, x):
    return [x[0]]


@_f("Shape")
def _shape(n, x):
    shape = np.array(x[0].shape, np.int64)
    start = int(n.attrs.get("start", 0))
    end = n.attrs.get("end")
    return [shape[start:None if end is None else int(end)]]


@_f("Size")
def _size(n, x):
    return [np.array(int(np.prod(x[0].shape)), np.int64)]


@_f("ConstantOfShape")
def _constant_of_shape(n, x):
    value = n.attrs.get("value")
    fill = np.zeros(1, np.float32) if value is None else np.asarray(value).reshape(-1)
    return [np.full([int(d) for d in np.asarray(x[0]).reshape(-1)], fill[0], dtype=fill.dtype)]


@_f("Range")
def _range(n, x):
    start, limit, delta = (np.asarray(v).reshape(()) for v in x)
    dt = np.result_type(start, limit, delta)
    count = max(int(np.ceil((limit - start) / delta)), 0)
    return [(start + np.arange(count, dtype=np.float64 if dt.kind == "f" else np.int64) * delta).astype(dt)]


@_f("Gather")
def _gather(n, x):
    data, idx = x
    axis = int(n.attrs.get("axis", 0))
    idx = np.asarray(idx).astype(np.int64)
    idx = np.where(idx < 0, idx + data.shape[axis], idx)
    return [np.take(data, idx, axis=axis)]


@_f("Concat")
def _concat(n, x):
    parts = [v for v in x if v is not None]
    return [np.concatenate(parts, axis=int(n.attrs["axis"]))]


@_f("Unsqueeze")
def _unsqueeze(n, x):
    axes = _axes_arg(n, x, 1)
    out = x[0]
    rank = out.ndim + len(axes)
    for a in sorted(a % rank for a in axes):
        out = np.expand_dims(out, a)
    return [out]


@_f("Squeeze")
def _squeeze(n, x):
    axes = _axes_arg(n, x, 1)
    if axes is None:
        return [np.squeeze(x[0])]
    return [np.squeeze(x[0], axis=tuple(a % x[0].ndim for a in axes))]


@_f("Reshape")
def _reshape(n, x):
    from .ops import reshape_target

    return [x[0].reshape(reshape_target(x[0].shape, x[1], n.attrs.get("allowzero", 0)))]


@_f("Flatten")
def _flatten(n, x):
    axis = int(n.attrs.get("axis", 1))
    axis = axis + x[0].ndim if axis < 0 else axis
    lead = int(np.prod(x[0].shape[:axis]))
    return [x[0].reshape(lead, -1) if x[0].size else x[0].reshape(lead, int(np.prod(x[0].shape[axis:])))]


@_f("Transpose")
def _transpose(n, x):
    perm = n.attrs.get("perm")
    return [np.transpose(x[0], None if perm is None else [int(p) for p in perm])]


@_f("Expand")
def _expand(n, x):
    shape = [int(d) for d in np.asarray(x[1]).reshape(-1)]
    return [x[0] * np.ones(shape, dtype=x[0].dtype) if x[0].dtype != np.bool_ else
            np.broadcast_to(x[0], np.broadcast_shapes(x[0].shape, tuple(shape))).copy()]


@_f("Tile")
def _tile(n, x):
    return [np.tile(x[0], [int(r) for r in np.asarray(x[1]).reshape(-1)])]


@_f("Cast")
def _cast(n, x):
    to = int(n.attrs["to"])
    dt = np_dtype_of(to)
    if dt is None:
        raise NotImplementedError
    return [np.asarray(x[0]).astype(dt)]


@_f("CastLike")
def _cast_like(n, x):
    return [np.asarray(x[0]).astype(x[1].dtype)]


@_f("Slice")
def _slice(n, x):
    from .ops import slice_params

    data = x[0]
    starts, ends, axes, steps = slice_params(n, x, data.ndim)
    index = [slice(None)] * data.ndim
    for s, e, a, st in zip(starts, ends, axes, steps):
        index[a] = slice(s, e, st)
    return [data[tuple(index)]]


@_f("Split")
def _split(n, x):
    """Split of a known tensor (tf2onnx splits shapes into their parts)."""
    from .ops import split_sizes

    data = np.asarray(x[0])
    axis = int(n.attrs.get("axis", 0)) % data.ndim
    sizes = split_sizes(n, np.asarray(x[1]).reshape(-1) if len(x) > 1 and x[1] is not None else None,
                        data.shape[axis])
    if sum(sizes) != data.shape[axis] or any(v < 0 for v in sizes):
        raise NotImplementedError
    return np.split(data, np.cumsum(sizes)[:-1], axis=axis)


@_f("Pad")
def _pad(n, x):
    """Pad of a known tensor (tf2onnx's SpaceToBatchND pads a shape's block paddings)."""
    data = np.asarray(x[0])
    if n.since < 11:
        pads, value, axes = n.attrs.get("pads", n.attrs.get("paddings", [])), n.attrs.get("value", 0.0), None
    else:
        pads = np.asarray(x[1]).reshape(-1)
        value = np.asarray(x[2]).reshape(-1)[0] if len(x) > 2 and x[2] is not None and x[2].size else 0
        axes = _axes_arg(n, x, 3)
    axes = list(range(data.ndim)) if axes is None else [a % data.ndim for a in axes]
    k = len(axes)
    width = [(0, 0)] * data.ndim
    for i, a in enumerate(axes):
        width[a] = (int(pads[i]), int(pads[k + i]))
    mode = n.attrs.get("mode", "constant")
    if mode not in ("constant", "edge", "reflect") or any(b < 0 or e < 0 for b, e in width):
        raise NotImplementedError
    if mode == "constant":
        return [np.pad(data, width, mode="constant", constant_values=np.asarray(value).astype(data.dtype))]
    return [np.pad(data, width, mode=mode)]


@_f("ReduceProd", "ReduceSum", "ReduceMax", "ReduceMin")
def _reduce(n, x):
    from .ops import reduce_axes

    axes = reduce_axes(n, x, x[0].ndim)
    fn = {"ReduceProd": np.prod, "ReduceSum": np.sum, "ReduceMax": np.max, "ReduceMin": np.min}[n.op]
    keep = bool(n.attrs.get("keepdims", 1))
    if axes == []:
        return [x[0]]
    return [np.asarray(fn(x[0], axis=None if axes is None else tuple(axes), keepdims=keep)).astype(x[0].dtype)]


def fold(n, x) -> list | None:
    """Evaluate node ``n`` on known inputs ``x`` (NumPy arrays), or None when not foldable.

    Only integer and boolean computations, and small float ones (at most 64 elements,
    e.g. scales), are folded; float tensors of weights are left to WebNN constants so
    their rounding is the engine's.
    """
    fn = FOLDERS.get(n.op)
    if fn is None or n.domain not in ("", "ai.onnx"):
        return None
    present = [v for v in x if v is not None]
    if n.op not in ("Shape", "Size", "Identity", "Reshape", "Unsqueeze", "Squeeze", "Flatten",
                    "Transpose", "Concat", "Gather", "Slice", "Expand", "Tile", "Split") and any(
            v.dtype.kind == "f" and v.size > 64 for v in present):
        return None
    try:
        with np.errstate(all="ignore"):
            return fn(n, x)
    except NotImplementedError:
        return None
