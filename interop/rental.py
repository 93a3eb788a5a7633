"""Renting MLTensors to WebGPU code: ``import_external_buffer`` and ``MLContext.export_to_gpu``.

Spec: https://www.w3.org/TR/webnn/#api-mlcontext-exporttogpu (``exportToGPU``) and the
MLTensor explainer's ``GPUDevice.importExternalBuffer``
(https://github.com/webmachinelearning/webnn/blob/main/mltensor-explainer.md).

A tensor created with ``importable_to_webgpu=True`` (alias ``exportable_to_gpu``) can be
rented to a ``wgpu.GPUDevice``. While rented, the caller has exclusive read/write access to a
``GPUBuffer`` with STORAGE | COPY_SRC | COPY_DST usage holding the tensor's bytes (the
packed layout of :class:`webnn_gpu.MLTensor`), and WebNN ``write_tensor``/``dispatch`` calls
that touch the tensor are held on the context timeline; returning the rental lets them go
on in call order. The rules are in ``docs/interop.md``.

* Same device (the context's): the rented buffer *is* the tensor's buffer. Renting and
  returning cost nothing: the shared queue already orders the caller's submits after WebNN's
  earlier work and WebNN's held work after the caller's earlier submits. No CPU wait.
* Another device: the slow path. Renting waits for WebNN's work on the tensor (a mapped
  staging read is the fence), copies the bytes through the CPU into a new buffer on the
  caller's device; returning waits for the caller's submitted work on that buffer (again a
  mapped read: ``queue.on_submitted_work_done`` raises TypeError in wgpu-py 0.32), writes the
  bytes back into the tensor and destroys the copy.
"""

from __future__ import annotations

import wgpu

from webnn_gpu import _validate as V
from webnn_gpu.errors import InvalidStateError, NotSupportedError, OperationError
from webnn_gpu.tensor import MLTensor

__all__ = ["Rental", "import_external_buffer", "import_external_buffer_async", "export_to_gpu",
           "export_to_gpu_async"]

#: Usage of every rented buffer (the explainer's STORAGE | COPY_SRC | COPY_DST).
RENT_USAGE = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST
_MAP_READ = wgpu.BufferUsage.MAP_READ | wgpu.BufferUsage.COPY_DST


def same_device(a, b) -> bool:
    """Whether two ``wgpu.GPUDevice`` objects are the same device."""
    return a is b or getattr(a, "_internal", None) == getattr(b, "_internal", 0)


class Rental:
    """A tensor rented to WebGPU code. Made by ``import_external_buffer`` / ``export_to_gpu``.

    Use :attr:`buffer` (a plain ``wgpu.GPUBuffer``) in your bind groups and copies, submit
    the work that uses it, then return the rental: leave the ``with`` block or call
    :meth:`release`. Work you submit after returning it is not ordered against WebNN; on the
    slow path (another device) the buffer is destroyed when it is returned.

    A Rental is not itself a ``GPUBuffer`` (wgpu-py checks buffer types); besides
    :attr:`buffer` it offers the usual read-only buffer facts (``size``, ``usage``,
    ``label``) and :meth:`binding` for a bind-group entry.

    Attributes:
        tensor (MLTensor): the rented tensor.
        device (wgpu.GPUDevice): the device it is rented to.
        copied (bool): True on the slow path (a copy on another device).
        released (bool): True once returned.
    """

    def __init__(self, tensor: MLTensor, device, buffer, *, copied: bool):
        self.tensor = tensor
        self.device = device
        self.copied = copied
        self.released = False
        self._buffer = buffer

    # ------------------------------------------------------------------ buffer facts
    def _check(self, what: str) -> None:
        if self.released:
            raise InvalidStateError(f"Rental.{what}: this rental of {self.tensor!r} was returned; rent the "
                                    f"tensor again to use it from WebGPU")

    @property
    def buffer(self):
        """The rented ``wgpu.GPUBuffer`` (STORAGE | COPY_SRC | COPY_DST), valid until returned.

        Raises:
            InvalidStateError: the rental was returned.
        """
        self._check("buffer")
        return self._buffer

    @property
    def size(self) -> int:
        """The buffer's size in bytes (the tensor's byte length padded to 4)."""
        self._check("size")
        return self._buffer.size

    @property
    def byte_length(self) -> int:
        """Bytes of tensor data (unpadded)."""
        return self.tensor.byte_length

    @property
    def usage(self) -> int:
        """The buffer's usage flags (always includes STORAGE | COPY_SRC | COPY_DST)."""
        self._check("usage")
        return self._buffer.usage

    @property
    def label(self) -> str:
        """The buffer's label."""
        self._check("label")
        return self._buffer.label

    def binding(self) -> dict:
        """A bind-group resource for the whole buffer: ``{"buffer", "offset", "size"}``.

        Raises:
            InvalidStateError: the rental was returned.
        """
        self._check("binding")
        return {"buffer": self._buffer, "offset": 0, "size": self._buffer.size}

    # ------------------------------------------------------------------ returning
    # IDL (explainer): GPUBuffer.destroy() returns an imported buffer to WebNN.
    def release(self) -> None:
        """Return the tensor to WebNN; held WebNN work on it is submitted in call order.

        Submit your work on the buffer before calling this. Idempotent. On the slow path this
        waits for your device's submitted work and copies the bytes back.

        Raises:
            OperationError: the copy back failed (the device was lost) or held work failed
                to submit; the tensor is returned in either case (with its pre-rental value
                when the copy back failed).
        """
        if self.released:
            return
        ctx = self.tensor._context
        failure = None
        with ctx._lock:
            self.released = True
            if ctx._destroyed:  # the context (and its held work) is gone
                self.tensor._rental = None
                if self.copied:
                    _destroy_quietly(self._buffer)
                return
            try:
                if self.copied:
                    try:
                        _read_back(self.device, self._buffer, self.tensor._size,
                                   lambda data: ctx._timeline.restore(self.tensor, data))
                    except Exception as exc:  # noqa: BLE001 - the tensor must be returned anyway
                        failure = exc
                    finally:
                        _destroy_quietly(self._buffer)
            finally:
                ctx._timeline.unrent(self.tensor)
        if failure is not None:
            raise OperationError(f"Rental.release: copying {self.tensor!r} back from the caller's device "
                                 f"failed ({failure}); the tensor keeps its value from before the rental") from failure

    def destroy(self) -> None:
        """The explainer's name for :meth:`release` (``GPUBuffer.destroy()`` returns it)."""
        self.release()

    def __enter__(self) -> Rental:
        self._check("__enter__")
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def __repr__(self) -> str:
        state = "returned" if self.released else ("copied to another device" if self.copied else "zero-copy")
        return f"<Rental of {self.tensor!r} ({state})>"


# ---------------------------------------------------------------------- renting
def _check_rentable(op: str, device, tensor, context=None):
    if not isinstance(tensor, MLTensor):
        V.fail(op, "", "tensor", "an MLTensor", tensor)
    if context is not None and tensor._context is not context:
        V.fail(op, "", "tensor", "an MLTensor of this MLContext", "a tensor of another context")
    tensor._check_usable(op)
    if not tensor.importable_to_webgpu:
        V.fail(op, "", "tensor", "a tensor created with importable_to_webgpu=True (alias exportable_to_gpu)",
               tensor)
    if not isinstance(device, wgpu.GPUDevice):
        V.fail(op, "", "device", "a wgpu.GPUDevice", device)
    if tensor._rental is not None:
        raise InvalidStateError(f"{op}: {tensor!r} is already rented ({tensor._rental!r}); return that rental "
                                f"(release() or leave its with-block) before renting it again")
    if tensor._context._timeline.has_held_work(tensor):
        raise InvalidStateError(f"{op}: WebNN work on {tensor!r} is held behind another rented tensor; return "
                                f"that rental first (renting now would wait for ever)")


def _rent(op: str, device, tensor, context, allow_copy: bool):
    """Check, then rent with zero copies (returns the Rental) or start the slow path's copy
    out of the tensor (returns the staging buffer to map)."""
    if not isinstance(tensor, MLTensor):
        V.fail(op, "", "tensor", "an MLTensor", tensor)
    ctx = tensor._context
    with ctx._lock:
        _check_rentable(op, device, tensor, context)
        if same_device(device, ctx.device):
            rental = Rental(tensor, device, tensor._buffer, copied=False)
            ctx._timeline.rent(tensor, rental)
            return rental, None
        if not allow_copy:
            raise NotSupportedError(f"{op}: argument 'device': {tensor!r} lives on the context's device, not the "
                                    f"given one, and allow_copy=False refuses the copy through the CPU")
        # Rent now (later WebNN work on the tensor is held) and copy what WebNN wrote so far.
        staging = ctx._timeline.read_start(tensor)
        rental = Rental(tensor, device, None, copied=True)
        ctx._timeline.rent(tensor, rental)
        return rental, staging


def _finish_copy(op: str, rental: Rental, staging) -> Rental:
    """The slow path once ``staging`` is mapped: make the copy on the caller's device."""
    tensor = rental.tensor
    ctx = tensor._context
    try:
        try:
            mv = staging.read_mapped(0, tensor._size, copy=False)
            rental._buffer = rental.device.create_buffer_with_data(
                data=mv, usage=RENT_USAGE, label=f"rental of {tensor._label or tensor!r}")
            del mv
        finally:
            staging.unmap()
            ctx._staging.release(staging)
    except Exception as exc:  # noqa: BLE001 - a wgpu error must not escape; give the tensor back
        _abort(op, rental, exc)
    return rental


def _abort(op: str, rental: Rental, exc: Exception):
    rental.released = True
    with rental.tensor._context._lock:
        rental.tensor._context._timeline.unrent(rental.tensor)
    raise OperationError(f"{op}: could not copy {rental.tensor!r} ({rental.tensor._size} bytes) to the caller's "
                         f"device: {exc}") from exc


def _rent_sync(op, device, tensor, context, allow_copy) -> Rental:
    rental, staging = _rent(op, device, tensor, context, allow_copy)
    if staging is not None:
        try:
            tensor._context._timeline.map_read(staging, tensor._size, op)
        except Exception as exc:  # noqa: BLE001
            _abort(op, rental, exc)
        _finish_copy(op, rental, staging)
    return rental


async def _rent_async(op, device, tensor, context, allow_copy) -> Rental:
    rental, staging = _rent(op, device, tensor, context, allow_copy)
    if staging is not None:
        try:
            await tensor._context._timeline.map_read_async(staging, tensor._size, op)
        except Exception as exc:  # noqa: BLE001
            _abort(op, rental, exc)
        _finish_copy(op, rental, staging)
    return rental


# IDL (explainer): Promise<GPUBuffer> importExternalBuffer(MLTensor tensor);  (on GPUDevice)
def import_external_buffer(device, tensor: MLTensor, *, allow_copy: bool = True) -> Rental:
    """Rent ``tensor`` to ``device`` for exclusive read/write use in your WGSL (blocking twin).

    Explainer: https://github.com/webmachinelearning/webnn/blob/main/mltensor-explainer.md

    Renting orders after all WebNN work already posted on the tensor. While rented, WebNN
    ``write_tensor``/``dispatch`` calls touching it are held and run, in call order, when the
    rental is returned; ``read_tensor`` of it raises InvalidStateError.

    Arguments:
        device (wgpu.GPUDevice): the device to use the buffer on. The context's own device
            gives zero copies; another device takes the slow path (a copy through the CPU,
            waiting for WebNN's work on the tensor).
        tensor (MLTensor): a tensor created with ``importable_to_webgpu=True``.
        allow_copy (bool): when False, renting to another device raises instead of copying.

    Returns:
        Rental: the rented buffer (``.buffer``); a context manager that returns it on exit.

    Raises:
        MLTypeError: not an MLTensor, not importable, or ``device`` not a GPUDevice.
        InvalidStateError: the tensor is destroyed, already rented, or has WebNN work held
            behind another rental; the context is destroyed.
        NotSupportedError: another device with ``allow_copy=False``.
        OperationError: the copy to the other device failed (the tensor is not rented).
    """
    return _rent_sync("importExternalBuffer", device, tensor, None, allow_copy)


async def import_external_buffer_async(device, tensor: MLTensor, *, allow_copy: bool = True) -> Rental:
    """Awaitable twin of :func:`import_external_buffer` (the slow path does not block the loop)."""
    return await _rent_async("importExternalBuffer", device, tensor, None, allow_copy)


def export_to_gpu(context, tensor: MLTensor, device=None, *, allow_copy: bool = True) -> Rental:
    """``MLContext.export_to_gpu``: rent ``tensor`` to ``device`` (default: the context's device)."""
    context._check_alive("exportToGPU")
    return _rent_sync("exportToGPU", context.device if device is None else device, tensor, context, allow_copy)


async def export_to_gpu_async(context, tensor: MLTensor, device=None, *, allow_copy: bool = True) -> Rental:
    """Awaitable twin of :func:`export_to_gpu`."""
    context._check_alive("exportToGPU")
    return await _rent_async("exportToGPU", context.device if device is None else device, tensor, context,
                             allow_copy)


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


def _destroy_quietly(buffer) -> None:
    try:
        buffer.destroy()
    except Exception:  # noqa: BLE001 - the device may be gone already
        pass
