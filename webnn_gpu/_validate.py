"""Argument checks shared by every operator; each raises our errors with a full message.

A message names the operator (and its label), the argument, what was expected and what
was given: ``conv2d ['stem']: argument 'strides': expected 2 positive ints, got [0, 1]``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from . import _dtypes
from .errors import DataError, MLTypeError, NotSupportedError, where

#: Highest rank any operator accepts (the per-op limits in op_support_limits() may be lower).
MAX_RANK = 8
#: Largest dimension (the spec's unsigned long).
MAX_DIM = 2**32 - 1


def fail(op: str, label: str, arg: str, expected: str, given, cls=MLTypeError):
    """Raise ``cls`` with the standard message."""
    raise cls(f"{where(op, label)}: argument {arg!r}: expected {expected}, got {_show(given)}")


def _show(value) -> str:
    if isinstance(value, np.ndarray):
        return f"ndarray(dtype={value.dtype}, shape={list(value.shape)})"
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def check_kwargs(op: str, label: str, kwargs: Mapping, allowed: Sequence[str] = ()) -> None:
    """Refuse keyword arguments the operator does not know (never ignored)."""
    unknown = sorted(set(kwargs) - set(allowed))
    if unknown:
        raise MLTypeError(
            f"{where(op, label)}: unknown option(s) {', '.join(map(repr, unknown))}; "
            f"known options: {', '.join(allowed) or 'none'}"
        )


def data_type(op: str, label: str, arg: str, value) -> str:
    """A data type name of the spec (``"float32"``, ...)."""
    if not isinstance(value, str) or value not in _dtypes.DATA_TYPES:
        fail(op, label, arg, f"one of {', '.join(_dtypes.DATA_TYPES)}", value)
    return value


def is_int(value) -> bool:
    """True for Python and NumPy integers, False for bools."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def int_value(op, label, arg, value, *, lo=None, hi=None) -> int:
    """An integer (not a bool) within ``[lo, hi]``."""
    if not is_int(value) or (lo is not None and value < lo) or (hi is not None and value > hi):
        rng = ""
        if lo is not None and hi is not None:
            rng = f" in [{lo}, {hi}]"
        elif lo is not None:
            rng = f" >= {lo}"
        elif hi is not None:
            rng = f" <= {hi}"
        fail(op, label, arg, f"an integer{rng}", value)
    return int(value)


def float_value(op, label, arg, value) -> float:
    """A real number (int or float, not bool)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        fail(op, label, arg, "a number", value)
    return float(value)


def bool_value(op, label, arg, value) -> bool:
    """A bool."""
    if not isinstance(value, (bool, np.bool_)):
        fail(op, label, arg, "a bool", value)
    return bool(value)


def int_list(op, label, arg, value, *, length=None, lo=None, hi=None) -> list[int]:
    """A sequence of integers, optionally of a given length and range."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (Sequence, np.ndarray)):
        fail(op, label, arg, "a sequence of integers", value)
    items = list(value)
    want = f"{length} integers" if length is not None else "a sequence of integers"
    if lo is not None:
        want += f" >= {lo}"
    if hi is not None:
        want += f" <= {hi}"
    if length is not None and len(items) != length:
        fail(op, label, arg, want, value)
    for v in items:
        if not is_int(v) or (lo is not None and v < lo) or (hi is not None and v > hi):
            fail(op, label, arg, want, value)
    return [int(v) for v in items]


def shape(op, label, arg, value) -> tuple[int, ...]:
    """A tensor shape: a sequence of up to MAX_RANK ints in [1, 2**32-1]."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (Sequence, np.ndarray)):
        fail(op, label, arg, "a sequence of positive integers (a shape)", value)
    dims = list(value)
    if len(dims) > MAX_RANK:
        fail(op, label, arg, f"a shape of rank <= {MAX_RANK}", value)
    for d in dims:
        if not is_int(d) or d < 1 or d > MAX_DIM:
            fail(op, label, arg, f"dimensions that are integers in [1, {MAX_DIM}]", value)
    return tuple(int(d) for d in dims)


def descriptor(op, label, arg, desc, *, extra_keys: Sequence[str] = ()) -> tuple[str, tuple[int, ...], dict]:
    """Check an operand/tensor descriptor dict; returns (data_type, shape, extra fields)."""
    if not isinstance(desc, Mapping):
        fail(op, label, arg, "a descriptor dict with 'data_type' and 'shape'", desc)
    allowed = ("data_type", "shape", *extra_keys)
    unknown = sorted(set(desc) - set(allowed))
    if unknown:
        fail(op, label, arg, f"a descriptor with keys {', '.join(allowed)}", f"unknown key(s) {unknown}")
    if "data_type" not in desc or "shape" not in desc:
        fail(op, label, arg, "a descriptor with both 'data_type' and 'shape'", dict(desc))
    dt = data_type(op, label, f"{arg}.data_type", desc["data_type"])
    shp = shape(op, label, f"{arg}.shape", desc["shape"])
    extra = {k: desc[k] for k in extra_keys if k in desc}
    return dt, shp, extra


def element_count(shp) -> int:
    """Number of elements of a shape (1 for a scalar)."""
    return math.prod(shp) if shp else 1


def size_limit(op, label, arg, data_type_: str, shp, limit: int, limit_name: str = "maxBufferSize") -> None:
    """Refuse a tensor whose buffer would exceed a device limit (NotSupportedError naming it).

    The buffer is the byte length padded to a multiple of 4 (maxBufferSize need not be one).
    """
    n = _dtypes.byte_length(data_type_, shp)
    padded = _dtypes.buffer_size(data_type_, shp)
    if padded > limit:
        raise NotSupportedError(
            f"{where(op, label)}: argument {arg!r}: a tensor of {n} bytes"
            f"{f' ({padded} padded to whole words)' if padded != n else ''} ({data_type_} {list(shp)}) "
            f"exceeds this device's {limit_name} of {limit} bytes"
        )


def axis(op, label, arg, value, rank: int) -> int:
    """An axis in [0, rank)."""
    return int_value(op, label, arg, value, lo=0, hi=max(rank - 1, 0)) if rank else fail(
        op, label, arg, "an axis of a tensor of rank >= 1", value
    )


def axes(op, label, arg, value, rank: int) -> list[int]:
    """Distinct axes in [0, rank)."""
    items = int_list(op, label, arg, value, lo=0, hi=rank - 1 if rank else -1)
    if len(set(items)) != len(items):
        fail(op, label, arg, "distinct axes", value)
    return items


def broadcast_shapes(op, label, a, b, arg_a="a", arg_b="b") -> tuple[int, ...]:
    """The bidirectional (NumPy) broadcast of two shapes."""
    ra, rb = len(a), len(b)
    r = max(ra, rb)
    pa = (1,) * (r - ra) + tuple(a)
    pb = (1,) * (r - rb) + tuple(b)
    out = []
    for x, y in zip(pa, pb):
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            raise MLTypeError(
                f"{where(op, label)}: arguments {arg_a!r} and {arg_b!r}: expected broadcastable shapes, "
                f"got {list(a)} and {list(b)}"
            )
    return tuple(out)


def unidirectional_broadcast(op, label, arg, src, dst) -> None:
    """Check that ``src`` broadcasts to ``dst`` (src's dims are 1 or equal, right-aligned)."""
    if len(src) > len(dst):
        fail(op, label, arg, f"a shape broadcastable to {list(dst)}", list(src))
    for s, d in zip(reversed(src), reversed(dst)):
        if s != d and s != 1:
            fail(op, label, arg, f"a shape broadcastable to {list(dst)}", list(src))


def array_data(op, label, arg, data, data_type_: str, shp, *, copy: bool = True) -> np.ndarray:
    """Copy user data for a tensor of ``data_type_``/``shp`` into a new contiguous array
    (with ``copy=False``: a flat C-contiguous view of it when it already is one, for callers
    that copy it themselves before returning, as ``queue.write_buffer`` does).

    Accepts:

    * a NumPy array of exactly the dtype and element count, in any shape and memory layout
      (a non-contiguous array is copied in C order, as ``np.ascontiguousarray`` reads it);
    * any C-contiguous buffer (bytes, bytearray, memoryview, array.array, ...) of exactly the
      byte length. A buffer of raw bytes (format ``"B"``) holds any data type; a typed buffer
      (a memoryview or array.array of another format) must have the data type's element type.

    The data is copied now: changing it after the call changes nothing.

    Raises:
        DataError: the wrong dtype, element type, element count or byte length; a strided
            (non-contiguous) buffer; a released (detached) memoryview; not array data at all.
    """
    info = _dtypes.info(data_type_)
    n = element_count(shp)
    if isinstance(data, np.ndarray):
        if data.dtype != info.numpy:
            raise DataError(
                f"{where(op, label)}: argument {arg!r}: expected an array of dtype {info.numpy} "
                f"({data_type_}), got dtype {data.dtype}"
            )
        if data.size != n:
            raise DataError(
                f"{where(op, label)}: argument {arg!r}: expected {n} elements ({data_type_} {list(shp)}), "
                f"got {data.size} (shape {list(data.shape)})"
            )
        if not copy:
            return np.ascontiguousarray(data).reshape(-1)
        return np.array(data, dtype=info.numpy, order="C", copy=True).reshape(-1)
    try:
        mv = memoryview(data)
    except TypeError:
        raise DataError(
            f"{where(op, label)}: argument {arg!r}: expected a numpy.ndarray or bytes-like of "
            f"{data_type_} data, got {type(data).__name__}"
        ) from None
    except ValueError as exc:  # a released memoryview
        raise DataError(f"{where(op, label)}: argument {arg!r}: expected a live buffer, got a released "
                        f"(detached) buffer: {exc}") from None
    if mv.format not in ("B", "c"):
        try:
            elem = np.dtype(mv.format)
        except TypeError:
            elem = None
        if elem != info.numpy:
            raise DataError(
                f"{where(op, label)}: argument {arg!r}: expected raw bytes or {data_type_} elements, "
                f"got a buffer of format {mv.format!r}"
            )
    if mv.nbytes != n * info.itemsize:
        raise DataError(
            f"{where(op, label)}: argument {arg!r}: expected {n * info.itemsize} bytes "
            f"({data_type_} {list(shp)}), got {mv.nbytes}"
        )
    if not mv.c_contiguous:
        raise DataError(f"{where(op, label)}: argument {arg!r}: expected contiguous data, got a strided view")
    flat = np.frombuffer(mv.cast("B"), dtype=info.numpy)
    return flat.copy() if copy else flat
