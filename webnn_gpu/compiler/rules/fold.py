"""Constant folding: nodes whose inputs are all host constants are evaluated with NumPy at
build time, for the operators where NumPy gives exactly the kernel's result."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import numpy as np

from ... import _dtypes
from ..._env import DEBUG
from ..._ir import Node, Value

log = logging.getLogger("webnn_gpu")


def _fold_cast(node, x: np.ndarray) -> np.ndarray | None:
    """Exact casts only: float16 -> float32, and integers into a type holding every value."""
    src, dst = node.inputs[0].data_type, node.attrs["to"]
    if src == dst:
        return x
    exact = {("float16", "float32")}
    exact |= {(s, d) for s in ("int8", "uint8") for d in ("float16", "float32", "int32", "int64")}
    exact |= {("uint8", "uint32"), ("uint8", "uint64"), ("uint32", "uint64"), ("uint32", "int64"),
              ("int32", "int64")}
    if (src, dst) not in exact:
        return None
    return x.astype(_dtypes.info(dst).numpy)


def _fold_clamp(x: np.ndarray, node) -> np.ndarray:
    lo, hi = node.attrs.get("min_value"), node.attrs.get("max_value")
    if lo is not None:
        x = np.maximum(x, x.dtype.type(lo))
    if hi is not None:
        x = np.minimum(x, x.dtype.type(hi))
    return x


#: op -> NumPy evaluation over the input arrays (None: not foldable for these inputs)
_FLOAT_FOLDERS: dict[str, Callable[..., Any]] = {
    "add": lambda n, a, b: a + b,
    "sub": lambda n, a, b: a - b,
    "mul": lambda n, a, b: a * b,
    "div": lambda n, a, b: a / b,
    "max": lambda n, a, b: np.maximum(a, b),
    "min": lambda n, a, b: np.minimum(a, b),
    "neg": lambda n, a: -a,
    "abs": lambda n, a: np.abs(a),
    "relu": lambda n, a: np.maximum(a, a.dtype.type(0)),
    "clamp": lambda n, a: _fold_clamp(a, n),
}
_MOVE_FOLDERS = {
    "reshape": lambda n, a: a,
    "identity": lambda n, a: a,
    "transpose": lambda n, a: np.transpose(a, n.attrs["permutation"]),
    "expand": lambda n, a: np.broadcast_to(a, n.outputs[0].shape),
    # slice: sizes are not in attrs; the output shape and the strides give the stop
    "slice": lambda n, a: a[tuple(slice(s, s + (d - 1) * t + 1, t) for s, d, t in zip(
        n.attrs["starts"], n.outputs[0].shape, n.attrs["strides"]))],
    "concat": lambda n, *xs: np.concatenate(xs, axis=n.attrs["axis"]),
    "reverse": lambda n, a: np.flip(a, axis=tuple(n.attrs["axes"])) if n.attrs["axes"] else a,
    "cast": _fold_cast,
}
#: operators :func:`fold_constants` evaluates (on float data only for the arithmetic ones)
FOLDABLE = set(_FLOAT_FOLDERS) | set(_MOVE_FOLDERS)
#: a folded constant may grow past its inputs (expand) only up to this many bytes
FOLD_GROWTH_BYTES = 1 << 20


def _fold_one(node) -> np.ndarray | None:
    arrays = [v.data.reshape(v.shape) for v in node.inputs]
    out = node.outputs[0]
    if node.op in _MOVE_FOLDERS:
        if out.data_type in ("int4", "uint4") or any(v.data_type in ("int4", "uint4") for v in node.inputs):
            return None
        return _MOVE_FOLDERS[node.op](node, *arrays)
    if node.op in _FLOAT_FOLDERS:
        if out.data_type not in ("float32", "float16") or any(v.data_type != out.data_type for v in node.inputs):
            return None
        if any(np.isnan(a).any() for a in arrays):  # WGSL max/min of NaN is not NumPy's
            return None
        with np.errstate(all="ignore"):
            res = _FLOAT_FOLDERS[node.op](node, *arrays)
        return np.asarray(res, dtype=_dtypes.info(out.data_type).numpy)
    return None


def fold_constants(nodes: list, outputs: dict, context=None) -> list:
    """Evaluate nodes whose inputs are all host constants with NumPy, at build time.

    Only operators of :data:`FOLDABLE`, whose NumPy evaluation is exactly what the kernel
    would compute: data movement, exact casts and IEEE float arithmetic (no NaN inputs).
    Nodes producing a graph output are kept (outputs are computed values), and a result
    may not grow past its inputs by more than :data:`FOLD_GROWTH_BYTES`.
    """
    out_ids = {v.id for v in outputs.values()}
    replace: dict[int, Value] = {}
    result = []
    for node in nodes:
        if any(v is not None and v.id in replace for v in node.inputs):
            node = Node(node.op, [replace.get(v.id, v) if v is not None else None for v in node.inputs],
                        node.outputs, dict(node.attrs), node.label)
        foldable = (node.op in FOLDABLE and len(node.outputs) == 1 and node.outputs[0].id not in out_ids
                    and node.inputs and all(v is not None and v.kind == "constant" and v.data is not None
                                            for v in node.inputs))
        if foldable:
            out = node.outputs[0]
            in_bytes = sum(_dtypes.buffer_size(v.data_type, v.shape) for v in node.inputs)
            if _dtypes.buffer_size(out.data_type, out.shape) > max(in_bytes, FOLD_GROWTH_BYTES):
                foldable = False
        arr = _fold_one(node) if foldable else None
        if arr is None:
            result.append(node)
            continue
        out = node.outputs[0]
        arr = np.ascontiguousarray(arr, dtype=_dtypes.info(out.data_type).numpy).reshape(out.shape)
        replace[out.id] = Value(out.data_type, tuple(out.shape), "constant", data=arr.reshape(-1).copy())
        if DEBUG >= 2:
            log.debug("fold_constants: %s [%s] evaluated at build time", node.op, node.label)
    return result

