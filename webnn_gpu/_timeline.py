"""The context timeline: every write, dispatch and read of an MLContext, in call order.

The timeline is the wgpu queue. ``queue.write_buffer`` is ordered before the next submit,
and submits run in order, so a tensor is changed in the order of the calls that use it
without any CPU wait. ``write_buffer`` stages its data until the next submit, so a write
not followed by work is flushed with an empty submit (otherwise a loop of writes would pile
up staging memory).

This class is the one place that touches the queue. It also holds work on tensors rented to
WebGPU (:mod:`webnn_gpu.interop`): while a tensor is rented, a write or dispatch that touches
it is kept here, already recorded, and submitted in call order when the rental is returned.
Per-tensor order is kept: a later call that touches a tensor touched by held work is held
too. Work on other tensors runs at once.
"""

from __future__ import annotations

from collections import deque

import numpy as np
import wgpu

from . import _dtypes
from . import _validate as V
from .errors import InvalidStateError, OperationError

_MAP_READ = wgpu.BufferUsage.MAP_READ | wgpu.BufferUsage.COPY_DST
_IO = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST


class Timeline:
    """Posts the context's work to its queue in call order."""

    def __init__(self, context):
        self.ctx = context
        self.device = context.device
        self.queue = context.device.queue
        self._closed = ""
        self._rented: dict = {}  # MLTensor -> rental (webnn_gpu.interop.Rental)
        self._held: deque[_Held] = deque()  # work waiting for rentals, in call order
        self._held_on: set = set()  # tensors touched by held work

    # ------------------------------------------------------------------ posting
    def _check(self, op: str) -> None:
        if self._closed:
            raise InvalidStateError(f"{op}: {self._closed}")

    def submit(self, command_buffers: list, tensors=()) -> None:
        """Submit command buffers that touch ``tensors`` (held while one of them is rented)."""
        self._post("submit", tensors, lambda: self.queue.submit(command_buffers))

    def write(self, tensor, data: bytes) -> None:
        """Queue ``data`` into ``tensor``'s buffer (held while the tensor is rented)."""
        self._check("writeTensor")

        def run():
            self.queue.write_buffer(tensor._buffer, 0, data)
            self.queue.submit([])

        self._post("writeTensor", (tensor,), run)

    def dispatch(self, graph, ins: dict, outs: dict, key) -> None:
        """Record the graph with tensors bound and submit it (held while a tensor is rented).

        The command buffer is recorded now, so held work does not depend on the graph
        staying alive until the rental is returned.
        """
        self._check("dispatch")
        enc = self.device.create_command_encoder(label="dispatch")
        graph._encode(enc, {n: t._buffer for n, t in ins.items()}, {n: t._buffer for n, t in outs.items()}, key)
        self.submit([enc.finish()], list(ins.values()) + list(outs.values()))

    def read_start(self, tensor):
        """Queue a copy of ``tensor`` into a staging buffer; the caller maps and releases it.

        Raises:
            InvalidStateError: the tensor is rented, or work on it is held behind a rental
                (waiting would never end: the rental is returned by the caller's thread).
        """
        self._check("readTensor")
        self._check_not_held("readTensor", tensor)
        staging = self.ctx._staging.acquire(tensor._size)
        enc = self.device.create_command_encoder(label="readTensor")
        enc.copy_buffer_to_buffer(tensor._buffer, 0, staging, 0, tensor._size)
        self.queue.submit([enc.finish()])
        return staging

    def retire(self, tensor) -> None:
        """Destroy a destroyed tensor's buffer after the work queued on it (held work too)."""
        buffer = tensor._buffer
        self._post("destroy", (tensor,), lambda: self.ctx._retire_buffer(buffer))

    # ------------------------------------------------------------------ rentals
    def _post(self, what: str, tensors, run) -> None:
        """Run ``run`` now, or hold it when it touches a rented tensor or one with held work."""
        if (self._rented or self._held) and any(t in self._rented or t in self._held_on for t in tensors):
            tensors = tuple(tensors)
            self._held.append(_Held(what, tensors, run))
            self._held_on.update(tensors)
            return
        run()

    def has_held_work(self, tensor) -> bool:
        """Whether WebNN work on ``tensor`` is waiting for a rental to be returned."""
        return tensor in self._held_on

    @property
    def held_count(self) -> int:
        """Number of calls waiting for rentals to be returned."""
        return len(self._held)

    def _check_not_held(self, op: str, tensor) -> None:
        if tensor in self._rented:
            raise InvalidStateError(f"{op}: the MLTensor is rented to WebGPU; release the rental before "
                                    f"using it from WebNN")
        if tensor in self._held_on:
            raise InvalidStateError(f"{op}: WebNN work on this MLTensor is held until a rented tensor it "
                                    f"depends on is released; release the rental first")

    def rent(self, tensor, rental) -> None:
        """Mark ``tensor`` rented: later WebNN work touching it is held until :meth:`unrent`.

        Renting orders after all WebNN work already submitted on the tensor (one queue);
        work still held on it would never run first, so that is refused.
        """
        self._check("exportToGPU")
        self._check_not_held("exportToGPU", tensor)
        self._rented[tensor] = rental
        tensor._rental = rental

    def restore(self, tensor, data) -> None:
        """Write a returned rental's bytes (a bytes-like) back into ``tensor``, before its held work."""
        self._check("exportToGPU")
        self.queue.write_buffer(tensor._buffer, 0, data)
        self.queue.submit([])

    def unrent(self, tensor) -> None:
        """Return ``tensor`` to WebNN and submit, in call order, the held work that can now run.

        Raises:
            OperationError: submitting held work failed (the rest was still submitted).
        """
        self._rented.pop(tensor, None)
        tensor._rental = None
        if self._held:
            self._flush()

    def _flush(self) -> None:
        blocked = set(self._rented)
        keep: deque[_Held] = deque()
        errors = []
        for h in self._held:
            if any(t in blocked for t in h.tensors):
                keep.append(h)
                blocked.update(h.tensors)
                continue
            try:
                h.run()
            except Exception as exc:  # noqa: BLE001 - report after submitting the rest
                errors.append(f"{h.what}: {exc}")
        self._held = keep
        self._held_on = {t for h in keep for t in h.tensors}
        if errors:
            raise OperationError("held WebNN work failed when the rental was returned: " + "; ".join(errors))

    def wait_idle(self) -> None:
        """Block until all submitted work is done (maps a tiny buffer after it)."""
        if self._closed:
            return
        staging = self.ctx._staging.acquire(4)
        enc = self.device.create_command_encoder(label="wait")
        self.queue.submit([enc.finish()])
        staging.map_sync(wgpu.MapMode.READ, 0, 4)
        staging.unmap()
        self.ctx._staging.release(staging)

    def close(self, reason: str) -> None:
        """Refuse all later work with InvalidStateError(reason); held work is dropped."""
        self._closed = reason
        self._held.clear()
        self._held_on.clear()
        for t in list(self._rented):
            t._rental = None
        self._rented.clear()

    # ------------------------------------------------------------------ compute()
    def compute(self, graph, arrays: dict, out_arrays: dict) -> dict:
        """Upload, dispatch and read back in one submission (``MLContext.compute``)."""
        self._check("compute")
        io = graph._compute_io
        if io is None:
            io = graph._compute_io = _ComputeIO(self.device, graph)
        for name, arr in arrays.items():
            raw = arr.tobytes()
            pad = (-len(raw)) % 4
            self.queue.write_buffer(io.ins[name], 0, raw + b"\0" * pad if pad else raw)
        enc = self.device.create_command_encoder(label="compute")
        graph._encode(enc, io.ins, io.outs, ("compute",))
        for name, (offset, size) in io.layout.items():
            enc.copy_buffer_to_buffer(io.outs[name], 0, io.staging, offset, size)
        self.queue.submit([enc.finish()])
        io.staging.map_sync(wgpu.MapMode.READ, 0, io.total)
        result = {}
        try:
            mv = io.staging.read_mapped(0, io.total, copy=False)
            for name, v in graph._outputs.items():
                offset, _ = io.layout[name]
                info = _dtypes.info(v.data_type)
                n = V.element_count(v.shape)
                flat = np.frombuffer(mv, dtype=info.numpy, count=n, offset=offset)
                if name in out_arrays:
                    out_arrays[name].reshape(-1)[...] = flat
                    result[name] = out_arrays[name]
                else:
                    result[name] = flat.copy().reshape(v.shape)
                del flat
            del mv
        finally:
            io.staging.unmap()
        return result


class _Held:
    """A call held behind a rental: what it was, the tensors it touches, how to submit it."""

    __slots__ = ("what", "tensors", "run")

    def __init__(self, what: str, tensors: tuple, run):
        self.what = what
        self.tensors = tensors
        self.run = run


class _ComputeIO:
    """The buffers ``compute()`` reuses for one graph: inputs, outputs, one staging buffer."""

    def __init__(self, device, graph):
        self.ins = {n: device.create_buffer(size=_dtypes.buffer_size(v.data_type, v.shape), usage=_IO,
                                            label=f"compute input {n}") for n, v in graph._inputs.items()}
        self.outs = {n: device.create_buffer(size=_dtypes.buffer_size(v.data_type, v.shape), usage=_IO,
                                             label=f"compute output {n}") for n, v in graph._outputs.items()}
        self.layout = {}
        offset = 0
        for n, v in graph._outputs.items():
            size = _dtypes.buffer_size(v.data_type, v.shape)
            self.layout[n] = (offset, size)
            offset += size
        self.total = max(offset, 4)
        self.staging = device.create_buffer(size=self.total, usage=_MAP_READ, label="compute staging")
