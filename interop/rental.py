"""Renting MLTensors to WebGPU code: ``MLContext.export_to_gpu`` and ``import_external_buffer``.

Spec: https://www.w3.org/TR/webnn/#api-mlcontext-exporttogpu (``exportToGPU``, webnn PR #942;
usage flags per the open proposal webnn#954) and the MLTensor explainer's
``GPUDevice.importExternalBuffer``
(https://github.com/webmachinelearning/webnn/blob/main/mltensor-explainer.md).

Both calls return the ``wgpu.GPUBuffer`` itself (a :class:`RentedBuffer`, a subclass of
wgpu-py's native ``GPUBuffer``), usable directly in the caller's bind groups and copies. The
rental ends at the buffer's ``destroy()`` or at the end of a ``with`` block. They differ in
what WebNN does with the tensor meanwhile:

* ``export_to_gpu`` (the merged spec): every WebNN read, write or dispatch that uses the
  tensor raises InvalidStateError naming the rental.
* ``import_external_buffer`` (the explainer): writes and dispatches that touch it are held on
  the context timeline and go on, in call order, when the buffer is returned; reads raise.

* Same device (the context's): the rented buffer is the tensor's own memory (a second
  reference to the same native buffer). Renting and returning cost nothing: the shared queue
  orders the caller's submits after WebNN's earlier work and WebNN's later work after them.
* Another device: the slow path. Renting waits for WebNN's work on the tensor (a mapped
  staging read is the fence) and copies the bytes through the CPU into a new buffer on the
  caller's device; returning waits for the caller's submitted work on that buffer (again a
  mapped read: ``queue.on_submitted_work_done`` raises TypeError in wgpu-py 0.32), writes the
  bytes back into the tensor and destroys the copy.

Why a subclass: wgpu-py 0.32 accepts a buffer where its bind-group and copy calls check
``isinstance(x, GPUBuffer)`` (its native class) and then read ``x._internal`` (the native
handle). :class:`RentedBuffer` subclasses that class, holds its own reference to the native
buffer (``wgpuBufferAddRef``, released when the object is collected), overrides ``destroy()``
to return the rental instead of destroying the tensor's memory, and makes ``_internal`` raise
InvalidStateError once returned, so a stale use fails at the caller's line instead of racing
WebNN. The rules are in ``docs/interop.md``.
"""

from __future__ import annotations

import wgpu
from wgpu.backends.wgpu_native import _api as _native

from webnn_gpu import _timeline
from webnn_gpu import _validate as V
from webnn_gpu.errors import InvalidStateError, NotSupportedError, OperationError
from webnn_gpu.tensor import MLTensor

__all__ = ["RentedBuffer", "RENT_USAGE", "EXPORT_USAGES", "import_external_buffer", "import_external_buffer_async",
           "export_to_gpu", "export_to_gpu_async"]

_U = wgpu.BufferUsage
#: Default usage of a rented buffer (#954's default: STORAGE | COPY_SRC | COPY_DST).
RENT_USAGE = _U.STORAGE | _U.COPY_SRC | _U.COPY_DST
#: Usage flags a rented buffer may be given (``usage=``): those the tensor's own buffer has.
EXPORT_USAGES = RENT_USAGE | _U.UNIFORM | _U.INDIRECT | _U.VERTEX | _U.INDEX
_ALL_USAGES = EXPORT_USAGES | _U.MAP_READ | _U.MAP_WRITE | _U.QUERY_RESOLVE
_MAP_READ = _U.MAP_READ | _U.COPY_DST


def usage_names(usage: int) -> str:
    """``"STORAGE | COPY_SRC"`` for a usage bit mask."""
    names = [n for n in ("STORAGE", "COPY_SRC", "COPY_DST", "MAP_READ", "MAP_WRITE", "UNIFORM", "INDEX", "VERTEX",
                         "INDIRECT", "QUERY_RESOLVE") if usage & getattr(_U, n)]
    return " | ".join(names) or "none"


def same_device(a, b) -> bool:
    """Whether two ``wgpu.GPUDevice`` objects are the same device."""
    return a is b or getattr(a, "_internal", None) == getattr(b, "_internal", 0)


class RentedBuffer(_native.GPUBuffer):
    """A ``wgpu.GPUBuffer`` rented from an MLTensor. Made by ``MLContext.export_to_gpu`` and
    ``webnn_gpu.interop.import_external_buffer``.

    Use it like any ``GPUBuffer`` of its device (bind groups, copies), submit the work that
    uses it, then return it: ``destroy()`` or the end of its ``with`` block. Returning never
    destroys the tensor's memory; on the slow path (another device) the copy is written back
    and destroyed. Once returned, any use raises InvalidStateError; returning again is a no-op.
    The rental lasts until returned, even if you drop every reference to the buffer.

    Attributes:
        tensor (MLTensor): the rented tensor.
        mode (str): ``"export"`` (WebNN use of the tensor raises meanwhile) or ``"import"``
            (WebNN writes and dispatches are held until it is returned).
        copied (bool): True on the slow path (a copy on another device).
        returned (bool): True once returned.
        usage (int): the usage flags asked for (``usage=``; default STORAGE | COPY_SRC |
            COPY_DST).
    """

    def __init__(self, tensor: MLTensor, mode: str, op: str, source, usage: int, *, copied: bool):
        self.tensor = tensor
        self.mode = mode
        self.copied = copied
        self.returned = False
        self._op = op
        handle = source._internal
        _native.libf.wgpuBufferAddRef(handle)  # our own reference; released by _release()
        label = f"{op} of {tensor.label or tensor!r}"
        super().__init__(label, handle, source._device, source.size, int(usage), wgpu.BufferMapState.unmapped)

    # wgpu-py reads ``_internal`` to pass the native handle to every call: refuse once returned.
    @property
    def _internal(self):
        if self.returned:
            raise InvalidStateError(f"{self!r} was returned to WebNN (destroy() or the end of its with-block); "
                                    f"rent the tensor again to use it from WebGPU")
        return self._handle

    @_internal.setter
    def _internal(self, value) -> None:
        self._handle = value

    def _release(self) -> None:  # called when the object is collected
        self._release_memoryviews()
        handle, self._handle = self._handle, None
        if handle is not None and _native.libf is not None:
            _native.libf.wgpuBufferRelease(handle)

    # IDL (webnn #942): the exported GPUBuffer's destroy() ends the rental.
    def destroy(self) -> None:
        """Return the tensor to WebNN (it keeps what your shaders wrote). Idempotent.

        Submit your work on the buffer before calling this. Held WebNN work (``import``
        mode) is submitted, in call order. On the slow path this waits for your device's
        submitted work and copies the bytes back.

        Raises:
            OperationError: the copy back failed (the device was lost) or held work failed
                to submit; the tensor is returned in either case (with its pre-rental value
                when the copy back failed).
        """
        if self.returned:
            return
        tl = _timeline.of(self.tensor)
        failure = None
        with tl.lock:
            if tl.closed:  # the context (and its held work) is gone
                self._finish(tl, unrent=False)
                return
            try:
                if self.copied:
                    try:
                        _read_back(self._device, self, _timeline.Timeline.tensor_bytes(self.tensor),
                                   lambda data: tl.restore(self.tensor, data))
                    except Exception as exc:  # noqa: BLE001 - the tensor must be returned anyway
                        failure = exc
            finally:
                self._finish(tl, unrent=True)
        if failure is not None:
            raise OperationError(f"{self._op}: copying {self.tensor!r} back from the caller's device failed "
                                 f"({failure}); the tensor keeps its value from before the rental") from failure

    def _finish(self, tl, *, unrent: bool) -> None:
        if self.copied:  # the copy on the caller's device is ours to destroy
            try:
                _native.libf.wgpuBufferDestroy(self._handle)
            except Exception:  # noqa: BLE001 - the device may be gone already
                pass
        self.returned = True
        if unrent:  # (a closed timeline dropped its rentals already)
            tl.unrent(self.tensor)

    def __enter__(self) -> RentedBuffer:
        if self.returned:
            raise InvalidStateError(f"{self!r} was returned to WebNN; rent the tensor again")
        return self

    def __exit__(self, *exc) -> None:
        self.destroy()

    def __repr__(self) -> str:
        state = "returned" if self.returned else ("copied to another device" if self.copied else "zero-copy")
        return f"<RentedBuffer of {self.tensor!r} from {self._op} ({state})>"

    __str__ = __repr__


# ---------------------------------------------------------------------- renting
def check_usage(op: str, usage) -> int:
    """The usage flags of a rental: the #954 default, or ``usage`` validated.

    Raises:
        MLTypeError: not an int of GPUBufferUsage flags, zero, or unknown bits.
        NotSupportedError: MAP_READ, MAP_WRITE or QUERY_RESOLVE (the tensor's memory cannot be
            mapped; those would need a copy).
    """
    if usage is None:
        return int(RENT_USAGE)
    if isinstance(usage, bool) or not isinstance(usage, int) or usage <= 0 or usage & ~int(_ALL_USAGES):
        V.fail(op, "", "usage", "a non-zero int of wgpu.BufferUsage flags", usage)
    extra = usage & ~int(EXPORT_USAGES)
    if extra:
        raise NotSupportedError(
            f"{op}: argument 'usage': {usage_names(extra)} cannot be given to a rented tensor's buffer (its memory "
            f"is the tensor's: STORAGE-capable, never mappable); allowed: {usage_names(EXPORT_USAGES)}; read the "
            f"tensor with read_tensor() instead of mapping it")
    return int(usage)


def _check_rentable(op: str, device, tensor, context, usage):
    if not isinstance(tensor, MLTensor):
        V.fail(op, "", "tensor", "an MLTensor", tensor)
    tl = _timeline.of(tensor if context is None else context)
    tl.own_tensor(op, "tensor", tensor)
    if not tensor.importable_to_webgpu:
        V.fail(op, "", "tensor", "a tensor created with importable_to_webgpu=True (alias exportable_to_gpu)",
               tensor)
    if not isinstance(device, wgpu.GPUDevice):
        V.fail(op, "", "device", "a wgpu.GPUDevice", device)
    usage = check_usage(op, usage)
    tl.check_rentable(op, tensor)
    return tl, usage


def _rent(op: str, mode: str, device, tensor, context, usage, allow_copy: bool):
    """Check, then rent with zero copies (returns the RentedBuffer, None) or start the slow
    path's copy out of the tensor (returns the staging buffer to map)."""
    if not isinstance(tensor, MLTensor):
        V.fail(op, "", "tensor", "an MLTensor", tensor)
    tl = _timeline.of(tensor if context is None else context)
    with tl.lock:
        tl, usage = _check_rentable(op, device, tensor, context, usage)
        own = tl.tensor_buffer(tensor)
        if same_device(device, tl.device):
            missing = usage & ~own.usage
            if missing:
                V.fail(op, "", "usage", f"flags the tensor's buffer has ({usage_names(own.usage)})",
                       usage_names(usage))
            rented = RentedBuffer(tensor, mode, op, own, usage, copied=False)
            tl.rent(tensor, rented)
            return rented, None
        if not allow_copy:
            raise NotSupportedError(f"{op}: argument 'device': {tensor!r} lives on the context's device, not the "
                                    f"given one, and allow_copy=False refuses the copy through the CPU")
        # Rent now (later WebNN work on the tensor is refused or held) and copy what WebNN wrote so far.
        staging = tl.read_start(tensor)
        tl.rent(tensor, _Pending(tensor, mode, op))
        return (device, usage), staging


class _Pending:
    """The rental of a tensor whose copy to another device is under way."""

    def __init__(self, tensor, mode, op):
        self.tensor, self.mode, self._op = tensor, mode, op

    def __repr__(self) -> str:
        return f"<RentedBuffer of {self.tensor!r} from {self._op} (being copied to another device)>"


def _finish_copy(op: str, mode: str, tensor, target, staging) -> RentedBuffer:
    """The slow path once ``staging`` is mapped: make the copy on the caller's device."""
    device, usage = target
    tl = _timeline.of(tensor)
    try:
        try:
            mv = staging.read_mapped(0, tl.tensor_bytes(tensor), copy=False)
            copy = device.create_buffer_with_data(data=mv, usage=usage | _U.COPY_SRC,
                                                  label=f"{op} of {tensor.label or tensor!r}")
            del mv
        finally:
            staging.unmap()
            tl.staging_done(staging)
        rented = RentedBuffer(tensor, mode, op, copy, usage, copied=True)
    except Exception as exc:  # noqa: BLE001 - a wgpu error must not escape; give the tensor back
        _abort(op, tensor, exc)
    with tl.lock:
        tl.rent(tensor, rented, replace=True)
    return rented


def _abort(op: str, tensor, exc: Exception):
    tl = _timeline.of(tensor)
    with tl.lock:
        tl.unrent(tensor)
    raise OperationError(f"{op}: could not copy {tensor!r} ({tl.tensor_bytes(tensor)} bytes) to the caller's "
                         f"device: {exc}") from exc


def _rent_sync(op, mode, device, tensor, context, usage, allow_copy) -> RentedBuffer:
    rented, staging = _rent(op, mode, device, tensor, context, usage, allow_copy)
    if staging is None:
        return rented
    try:
        _timeline.of(tensor).map_read(staging, _timeline.Timeline.tensor_bytes(tensor), op)
    except Exception as exc:  # noqa: BLE001
        _abort(op, tensor, exc)
    return _finish_copy(op, mode, tensor, rented, staging)


async def _rent_async(op, mode, device, tensor, context, usage, allow_copy) -> RentedBuffer:
    rented, staging = _rent(op, mode, device, tensor, context, usage, allow_copy)
    if staging is None:
        return rented
    try:
        await _timeline.of(tensor).map_read_async(staging, _timeline.Timeline.tensor_bytes(tensor), op)
    except Exception as exc:  # noqa: BLE001
        _abort(op, tensor, exc)
    return _finish_copy(op, mode, tensor, rented, staging)


# IDL (explainer): Promise<GPUBuffer> importExternalBuffer(MLTensor tensor);  (on GPUDevice)
def import_external_buffer(device, tensor: MLTensor, *, usage: int | None = None,
                           allow_copy: bool = True) -> RentedBuffer:
    """Rent ``tensor`` to ``device`` with the MLTensor explainer's semantics (blocking twin).

    Explainer: https://github.com/webmachinelearning/webnn/blob/main/mltensor-explainer.md

    Renting orders after all WebNN work already posted on the tensor. While rented, WebNN
    ``write_tensor``/``dispatch`` calls touching it are held and run, in call order, when the
    buffer is returned; ``read_tensor`` of it raises InvalidStateError.

    Arguments:
        device (wgpu.GPUDevice): the device to use the buffer on. The context's own device
            gives zero copies; another device takes the slow path (a copy through the CPU,
            waiting for WebNN's work on the tensor).
        tensor (MLTensor): a tensor created with ``importable_to_webgpu=True``.
        usage (int | None): the buffer's ``wgpu.BufferUsage`` flags (default STORAGE |
            COPY_SRC | COPY_DST); any of :data:`EXPORT_USAGES`.
        allow_copy (bool): when False, renting to another device raises instead of copying.

    Returns:
        RentedBuffer: the ``wgpu.GPUBuffer`` itself; ``destroy()`` or the end of a ``with``
        block returns it.

    Raises:
        MLTypeError: not an MLTensor, not importable, ``device`` not a GPUDevice, a bad usage.
        InvalidStateError: the tensor is destroyed, already rented, or has WebNN work held
            behind another rental; the context is destroyed.
        NotSupportedError: another device with ``allow_copy=False``; a mappable usage.
        OperationError: the copy to the other device failed (the tensor is not rented).
    """
    return _rent_sync("importExternalBuffer", "import", device, tensor, None, usage, allow_copy)


async def import_external_buffer_async(device, tensor: MLTensor, *, usage: int | None = None,
                                       allow_copy: bool = True) -> RentedBuffer:
    """Awaitable twin of :func:`import_external_buffer` (the slow path does not block the loop)."""
    return await _rent_async("importExternalBuffer", "import", device, tensor, None, usage, allow_copy)


def export_to_gpu(context, tensor: MLTensor, usage: int | None = None, *, device=None,
                  allow_copy: bool = True) -> RentedBuffer:
    """``MLContext.export_to_gpu``: see :meth:`webnn_gpu.MLContext.export_to_gpu`."""
    _timeline.of(context).check_alive("exportToGPU")
    return _rent_sync("exportToGPU", "export", context.device if device is None else device, tensor, context, usage,
                      allow_copy)


async def export_to_gpu_async(context, tensor: MLTensor, usage: int | None = None, *, device=None,
                              allow_copy: bool = True) -> RentedBuffer:
    """Awaitable twin of :func:`export_to_gpu`."""
    _timeline.of(context).check_alive("exportToGPU")
    return await _rent_async("exportToGPU", "export", context.device if device is None else device, tensor, context,
                             usage, allow_copy)


# ---------------------------------------------------------------------- fences
def _read_back(device, buffer, size: int, consume) -> None:
    """Copy ``buffer`` into a staging buffer on its device and map it (mapping is the fence:
    it completes after every submit made on that queue before), then ``consume(memoryview)``."""
    staging = device.create_buffer(size=size, usage=_MAP_READ, label="rental read-back")
    try:
        enc = device.create_command_encoder(label="rental read-back")
        enc.copy_buffer_to_buffer(buffer, 0, staging, 0, size)
        device.queue.submit([enc.finish()])
        staging.map_sync(wgpu.MapMode.READ, 0, size)
        try:
            mv = staging.read_mapped(0, size, copy=False)
            consume(mv)
            del mv
        finally:
            staging.unmap()
    finally:
        staging.destroy()

