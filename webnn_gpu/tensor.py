"""MLTensor: a tensor in GPU memory, owned by one MLContext.

Spec: https://www.w3.org/TR/webnn/#api-mltensor

An MLTensor is a ``wgpu.GPUBuffer`` with STORAGE | COPY_SRC | COPY_DST usage
(:attr:`MLTensor.buffer`), padded to a multiple of 4 bytes. 8-bit values are packed four
to a word and 64-bit values as (low, high) word pairs, which is exactly their little-endian
byte layout, so reads and writes move raw bytes.
"""

from __future__ import annotations

import itertools
import weakref
from typing import TYPE_CHECKING

import wgpu

from . import _dtypes
from .errors import InvalidStateError

if TYPE_CHECKING:
    from .context import MLContext

_serials = itertools.count(1)

USAGE = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST
#: Usage of an importable tensor's buffer: every flag a rental may ask for (``usage=``, webnn#954).
EXPORT_USAGE = USAGE | wgpu.BufferUsage.UNIFORM | wgpu.BufferUsage.INDIRECT | wgpu.BufferUsage.VERTEX \
    | wgpu.BufferUsage.INDEX


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
        #: a MAP_READ buffer holding the value the last dispatch left in this tensor, copied in that
        #: dispatch's command buffer (webnn_gpu._timeline, "staged reads"); None when not valid
        self._staged = None
        self._siblings: list = []  # (tensor, staged buffer) of every output that dispatch staged
        self._reread = False  # read since the last dispatch that staged it: stage the next one
        self._exposed = False  # its GPUBuffer was handed out: others may change it, never stage
        self._nbytes = _dtypes.byte_length(data_type, self._shape)
        self._size = _dtypes.buffer_size(data_type, self._shape)
        self._owns_buffer = buffer is None
        self._retired = False
        self._graphs: weakref.WeakSet = weakref.WeakSet()  # built graphs using it as a constant
        self._buffer = buffer if buffer is not None else context.device.create_buffer(
            size=self._size, usage=EXPORT_USAGE if self._importable else USAGE,
            label=label or f"MLTensor {data_type}{list(self._shape)}"
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
    def label(self) -> str:
        """The label given at creation (``""`` if none)."""
        return self._label

    @property
    def byte_length(self) -> int:
        """Bytes of data (unpadded)."""
        return self._nbytes

    @property
    def buffer(self):
        """The ``wgpu.GPUBuffer`` holding the data.

        Use the buffer that renting returns instead (``MLContext.export_to_gpu`` /
        ``webnn_gpu.interop.import_external_buffer``): renting orders your work against
        WebNN's.
        """
        self._check_usable("buffer")
        with self._context._lock:
            self._context._timeline.expose(self)
        return self._buffer

    @property
    def destroyed(self) -> bool:
        """True after :meth:`destroy`."""
        return self._destroyed

    # IDL: undefined destroy();
    def destroy(self) -> None:
        """Release the tensor's memory. Idempotent.

        Work already queued that uses the tensor completes; pending reads fail with
        InvalidStateError. A constant tensor that built graphs use stays in memory until the
        last of those graphs is destroyed (the graphs keep working). Raises
        InvalidStateError while the tensor is rented.
        """
        if self._destroyed:
            return
        if self._rental is not None:
            raise InvalidStateError(f"MLTensor.destroy: {self!r} is rented to WebGPU ({self._rental!r}); return that "
                                    f"buffer (destroy() or the end of its with-block) first")
        self._destroyed = True
        with self._context._lock:
            self._context._timeline.unstage((self,))
        self._context._forget_tensor(self)
        self._retire()

    def _retire(self) -> None:
        """Free the buffer after the work queued on it, unless a live graph holds it as a constant."""
        if not self._owns_buffer or self._retired or any(not g._destroyed for g in self._graphs):
            return
        self._retired = True
        # Let queued work (held work too) finish first: destroy after the queue drains.
        with self._context._lock:
            self._context._timeline.retire(self)

    def _use_in(self, graph) -> None:
        """``graph`` binds this constant tensor: its memory lives until the graph is destroyed."""
        self._graphs.add(graph)

    def _release_from(self, graph) -> None:
        """``graph`` is destroyed: free the buffer if the tensor was destroyed and no graph uses it."""
        self._graphs.discard(graph)
        if self._destroyed:
            self._retire()

    def _check_usable(self, op: str) -> None:
        if self._destroyed:
            raise InvalidStateError(f"{op}: the MLTensor has been destroyed")
        self._context._check_alive(op)

    def __repr__(self) -> str:
        state = " destroyed" if self._destroyed else ""
        return f"<MLTensor {self._data_type} {list(self._shape)}{state}>"
