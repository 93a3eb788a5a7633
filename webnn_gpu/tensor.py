"""MLTensor: a tensor in GPU memory, owned by one MLContext.

Spec: https://www.w3.org/TR/webnn/#api-mltensor

An MLTensor is a ``wgpu.GPUBuffer`` with STORAGE | COPY_SRC | COPY_DST usage
(:attr:`MLTensor.buffer`), padded to a multiple of 4 bytes. 8-bit values are packed four
to a word and 64-bit values as (low, high) word pairs, which is exactly their little-endian
byte layout, so reads and writes move raw bytes.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

import wgpu

from . import _dtypes
from .errors import InvalidStateError

if TYPE_CHECKING:
    from .context import MLContext

_serials = itertools.count(1)

USAGE = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST


class MLTensor:
    """A tensor on the context's device (the spec's MLTensor). Made by ``MLContext.create_tensor``.

    Attributes:
        data_type (str): the spec's data type string.
        shape (tuple[int, ...]): the dimensions.
        readable (bool): ``read_tensor`` is allowed.
        writable (bool): ``write_tensor`` is allowed.
        importable_to_webgpu (bool): may be rented to WebGPU (``export_to_gpu``).
        constant (bool): made by ``create_constant_tensor`` (immutable).
    """

    def __init__(self, context: MLContext, data_type: str, shape, *, readable=False, writable=False,
                 importable_to_webgpu=False, constant=False, label="", buffer=None):
        self._context = context
        self._data_type = data_type
        self._shape = tuple(int(d) for d in shape)
        self._readable = bool(readable)
        self._writable = bool(writable)
        self._importable = bool(importable_to_webgpu)
        self._constant = bool(constant)
        self._label = label
        self._serial = next(_serials)
        self._destroyed = False
        self._rental = None  # set by webnn_gpu.interop while rented
        self._nbytes = _dtypes.byte_length(data_type, self._shape)
        self._size = _dtypes.buffer_size(data_type, self._shape)
        self._owns_buffer = buffer is None
        self._buffer = buffer if buffer is not None else context.device.create_buffer(
            size=self._size, usage=USAGE, label=label or f"MLTensor {data_type}{list(self._shape)}"
        )

    # IDL: readonly attribute MLOperandDataType dataType;
    @property
    def data_type(self) -> str:
        """The tensor's data type."""
        return self._data_type

    # IDL: readonly attribute FrozenArray<unsigned long> shape;
    @property
    def shape(self) -> tuple[int, ...]:
        """The tensor's shape."""
        return self._shape

    # IDL: readonly attribute boolean readable;
    @property
    def readable(self) -> bool:
        """Whether ``read_tensor`` may read it."""
        return self._readable

    # IDL: readonly attribute boolean writable;
    @property
    def writable(self) -> bool:
        """Whether ``write_tensor`` may write it."""
        return self._writable

    # IDL: readonly attribute boolean exportableToGPU;
    @property
    def importable_to_webgpu(self) -> bool:
        """Whether it may be rented to WebGPU code (alias: ``exportable_to_gpu``)."""
        return self._importable

    exportable_to_gpu = importable_to_webgpu

    # IDL: readonly attribute boolean constant;
    @property
    def constant(self) -> bool:
        """Whether it was made by ``create_constant_tensor``."""
        return self._constant

    @property
    def context(self) -> MLContext:
        """The context that owns the tensor."""
        return self._context

    @property
    def byte_length(self) -> int:
        """Bytes of data (unpadded)."""
        return self._nbytes

    @property
    def buffer(self):
        """The ``wgpu.GPUBuffer`` holding the data.

        Use it in your own WGSL only while the tensor is rented
        (``webnn_gpu.interop.import_external_buffer`` / ``MLContext.export_to_gpu``), which
        orders your work against WebNN's.
        """
        self._check_usable("buffer")
        return self._buffer

    @property
    def destroyed(self) -> bool:
        """True after :meth:`destroy`."""
        return self._destroyed

    # IDL: undefined destroy();
    def destroy(self) -> None:
        """Release the tensor's memory. Idempotent.

        Work already queued that uses the tensor completes; pending reads fail with
        InvalidStateError. Raises InvalidStateError while the tensor is rented.
        """
        if self._destroyed:
            return
        if self._rental is not None:
            raise InvalidStateError("MLTensor.destroy: the tensor is rented to WebGPU; release the rental first")
        self._destroyed = True
        self._context._forget_tensor(self)
        if self._owns_buffer:
            # Let queued work (held work too) finish first: destroy after the queue drains.
            self._context._timeline.retire(self)

    def _check_usable(self, op: str) -> None:
        if self._destroyed:
            raise InvalidStateError(f"{op}: the MLTensor has been destroyed")
        self._context._check_alive(op)

    def __repr__(self) -> str:
        state = " destroyed" if self._destroyed else ""
        return f"<MLTensor {self._data_type} {list(self._shape)}{state}>"
