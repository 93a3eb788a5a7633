"""WebNN data types: their NumPy dtypes and how each is stored and computed in WGSL.

WGSL has no 8-bit or 64-bit storage types, so:

* int8 / uint8 live packed four to a ``u32`` word; kernels read a byte and sign- or
  zero-extend it to ``i32`` / ``u32``, and write bytes with two atomics on disjoint bits
  (``atomicAnd`` to clear, ``atomicOr`` to set), so neighbouring invocations never race.
* int64 / uint64 live as ``vec2<u32>`` (low word, high word); they compute in ``i64`` / ``u64``
  where the adapter has ``shader-int64``, and are only moved (never narrowed) otherwise.
* float16 lives as ``f16`` with ``shader-f16``; without it float16 is not supported.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

DataType = Literal["float32", "float16", "int32", "uint32", "int64", "uint64", "int8", "uint8"]

DATA_TYPES: tuple[str, ...] = (
    "float32",
    "float16",
    "int32",
    "uint32",
    "int64",
    "uint64",
    "int8",
    "uint8",
)

FLOAT_TYPES = ("float32", "float16")
INT_TYPES = ("int32", "uint32", "int64", "uint64", "int8", "uint8")
SIGNED_TYPES = ("float32", "float16", "int32", "int64", "int8")


@dataclass(frozen=True)
class DTypeInfo:
    """How one WebNN data type is held in NumPy and in WGSL."""

    name: str
    numpy: np.dtype
    itemsize: int
    #: WGSL element type of the storage array
    storage: str
    #: WGSL scalar type kernels compute in
    compute: str
    #: "plain" (one storage element per value), "byte" (4 per u32), "wide" (vec2<u32> per value)
    packing: str
    #: WGSL feature the compute type needs ("" for none)
    feature: str = ""

    @property
    def is_float(self) -> bool:
        """True for float32 and float16."""
        return self.name in FLOAT_TYPES


_INFO = {
    "float32": DTypeInfo("float32", np.dtype(np.float32), 4, "f32", "f32", "plain"),
    "float16": DTypeInfo("float16", np.dtype(np.float16), 2, "f16", "f16", "plain", "shader-f16"),
    "int32": DTypeInfo("int32", np.dtype(np.int32), 4, "i32", "i32", "plain"),
    "uint32": DTypeInfo("uint32", np.dtype(np.uint32), 4, "u32", "u32", "plain"),
    "int64": DTypeInfo("int64", np.dtype(np.int64), 8, "vec2<u32>", "i64", "wide", "shader-int64"),
    "uint64": DTypeInfo("uint64", np.dtype(np.uint64), 8, "vec2<u32>", "u64", "wide", "shader-int64"),
    "int8": DTypeInfo("int8", np.dtype(np.int8), 1, "u32", "i32", "byte"),
    "uint8": DTypeInfo("uint8", np.dtype(np.uint8), 1, "u32", "u32", "byte"),
}

_FROM_NUMPY = {info.numpy: name for name, info in _INFO.items()}


def info(data_type: str) -> DTypeInfo:
    """The :class:`DTypeInfo` of a (validated) WebNN data type name."""
    return _INFO[data_type]


def from_numpy(dtype: np.dtype | type) -> str | None:
    """The WebNN data type name of a NumPy dtype, or None if it has no WebNN twin."""
    return _FROM_NUMPY.get(np.dtype(dtype))


def byte_length(data_type: str, shape) -> int:
    """Bytes that ``shape`` elements of ``data_type`` take (unpadded)."""
    n = 1
    for d in shape:
        n *= int(d)
    return n * _INFO[data_type].itemsize


def buffer_size(data_type: str, shape) -> int:
    """Bytes of a GPU buffer holding the tensor: padded to a multiple of 4, at least 4."""
    n = byte_length(data_type, shape)
    return max(4, (n + 3) // 4 * 4)
