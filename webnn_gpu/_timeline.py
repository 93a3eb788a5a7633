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

import asyncio
from collections import deque

import numpy as np
import wgpu

from . import _dtypes
from . import _validate as V
from .errors import InvalidStateError, OperationError

_MAP_READ = wgpu.BufferUsage.MAP_READ | wgpu.BufferUsage.COPY_DST
#: seconds between checks that the device still exists while waiting for a map
_WATCH_S = 0.05
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
    def _check(self, op: str, tensors=(), graph=None) -> None:
        """Refuse work on a closed timeline, or on a graph or tensor destroyed by another thread
        since the caller checked it (callers hold the context lock, as destroy() does)."""
        if self._closed:
            raise InvalidStateError(f"{op}: {self._closed}")
        if graph is not None and graph._destroyed:
            raise InvalidStateError(f"{op}: the MLGraph has been destroyed")
        for t in tensors:
            if t._destroyed:
                raise InvalidStateError(f"{op}: the MLTensor has been destroyed")

    def submit(self, command_buffers: list, tensors=()) -> None:
        """Submit command buffers that touch ``tensors`` (held while one of them is rented)."""
        self._post("submit", tensors, lambda: self.queue.submit(command_buffers))

    def write(self, tensor, data) -> None:
        """Queue ``data`` (bytes, or a flat C-contiguous ndarray the caller may change once this
        returns) into ``tensor``'s buffer; held, while the tensor is rented, as a copy."""
        self._check("writeTensor", (tensor,))
        if self._holds((tensor,)) or not _whole_words(data):
            data = padded_bytes(data)  # a snapshot: the caller's array may change before it runs

        def run():
            self.queue.write_buffer(tensor._buffer, 0, data)
            self.queue.submit([])

        self._post("writeTensor", (tensor,), run)

    def dispatch(self, graph, ins: dict, outs: dict, key) -> None:
        """Record the graph with tensors bound and submit it (held while a tensor is rented).

        The command buffer is recorded now, so held work does not depend on the graph
        staying alive until the rental is returned.
        """
        self._check("dispatch", [*ins.values(), *outs.values()], graph)
        enc = self.device.create_command_encoder(label="dispatch")
        graph._encode(enc, {n: t._buffer for n, t in ins.items()}, {n: t._buffer for n, t in outs.items()}, key)
        self.submit([enc.finish()], list(ins.values()) + list(outs.values()))

    # ------------------------------------------------------------------ waiting for maps
    def device_stopped(self) -> bool:
        """Whether a pending map can never resolve: the context is gone, or its device was
        destroyed (wgpu-py then stops the thread that polls it, so the map would wait forever)."""
        return bool(self._closed) or self.ctx._destroyed or getattr(self.device, "_poller", True) is None

    def _stopped(self, op: str):
        if not self.ctx._destroyed:
            self.ctx._mark_lost("the device was destroyed")
        return InvalidStateError(f"{op}: the MLContext was destroyed or lost while the read was pending")

    def map_read(self, staging, size: int, op: str) -> None:
        """``staging.map_sync(READ)`` that raises InvalidStateError instead of hanging when the
        context is destroyed or its device lost meanwhile (from another thread).

        wgpu-py 0.32 has no public wait with a timeout; we use its promise's thread event when
        it has one, and a plain wait otherwise.
        """
        promise = staging.map_async(wgpu.MapMode.READ, 0, size)
        event = getattr(promise, "_thread_event", None)
        if event is not None:
            while not event.wait(_WATCH_S):
                if self.device_stopped():
                    raise self._stopped(op)
        promise.sync_wait()

    async def map_read_async(self, staging, size: int, op: str) -> None:
        """Awaitable :meth:`map_read`; never blocks the event loop."""
        promise = staging.map_async(wgpu.MapMode.READ, 0, size)

        async def wait():
            await promise

        task = asyncio.ensure_future(wait())
        while True:
            done, _ = await asyncio.wait({task}, timeout=_WATCH_S)
            if done:
                task.result()
                return
            if self.device_stopped():
                task.cancel()
                raise self._stopped(op)

    def read_start(self, tensor):
        """Queue a copy of ``tensor`` into a staging buffer; the caller maps and releases it.

        Raises:
            InvalidStateError: the tensor is rented, or work on it is held behind a rental
                (waiting would never end: the rental is returned by the caller's thread).
        """
        self._check("readTensor", (tensor,))
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
    def _holds(self, tensors) -> bool:
        """Whether work touching ``tensors`` would be held now (see :meth:`_post`)."""
        return bool(self._rented or self._held) and any(t in self._rented or t in self._held_on for t in tensors)

    def _post(self, what: str, tensors, run) -> None:
        """Run ``run`` now, or hold it when it touches a rented tensor or one with held work."""
        if self._holds(tensors):
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
        self.map_read(staging, 4, "wait")
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
        self._check("compute", (), graph)
        io = graph._compute_io
        if io is None:
            io = graph._compute_io = _ComputeIO(self.device, graph)
        for name, arr in arrays.items():
            self.queue.write_buffer(io.ins[name], 0, arr if _whole_words(arr) else padded_bytes(arr))
        enc = self.device.create_command_encoder(label="compute")
        graph._encode(enc, io.ins, io.outs, ("compute",))
        for name, (k, offset, size) in io.layout.items():
            enc.copy_buffer_to_buffer(io.outs[name], 0, io.staging[k], offset, size)
        self.queue.submit([enc.finish()])
        result = {}
        for k, (staging, total) in enumerate(zip(io.staging, io.totals)):
            self.map_read(staging, total, "compute")
            try:
                mv = staging.read_mapped(0, total, copy=False)
                for name, v in graph._outputs.items():
                    kk, offset, _ = io.layout[name]
                    if kk != k:
                        continue
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
                staging.unmap()
        return result


def _whole_words(data) -> bool:
    """Whether ``data`` can go to ``write_buffer`` as is: a non-empty whole number of 4-byte
    words (WebGPU's copy granularity)."""
    n = memoryview(data).nbytes
    return n > 0 and n % 4 == 0


def padded_bytes(data) -> bytes:
    """A copy of ``data`` (bytes-like or ndarray) padded with zeros to whole 4-byte words
    (at least one)."""
    raw = data.tobytes() if isinstance(data, np.ndarray) else bytes(data)
    pad = (-len(raw)) % 4 or (0 if raw else 4)
    return raw + b"\0" * pad if pad else raw


class _Held:
    """A call held behind a rental: what it was, the tensors it touches, how to submit it."""

    __slots__ = ("what", "tensors", "run")

    def __init__(self, what: str, tensors: tuple, run):
        self.what = what
        self.tensors = tensors
        self.run = run


class _ComputeIO:
    """The buffers ``compute()`` reuses for one graph: inputs, outputs, and staging buffers
    that the outputs are read back through (one, unless their total passes maxBufferSize)."""

    def __init__(self, device, graph):
        from .graph import allocate

        def buffer(what, size, usage):
            return allocate(what, size, lambda: device.create_buffer(size=size, usage=usage, label=what), "compute")

        self.ins = {n: buffer(f"compute input {n!r}", _dtypes.buffer_size(v.data_type, v.shape), _IO)
                    for n, v in graph._inputs.items()}
        self.outs = {n: buffer(f"compute output {n!r}", _dtypes.buffer_size(v.data_type, v.shape), _IO)
                     for n, v in graph._outputs.items()}
        limit = int(graph._context._limits.get("max-buffer-size", 1 << 28)) // 4 * 4
        self.layout = {}  # name -> (staging index, offset, size)
        self.totals = [0]
        for n, v in graph._outputs.items():
            size = _dtypes.buffer_size(v.data_type, v.shape)
            if self.totals[-1] and self.totals[-1] + size > limit:
                self.totals.append(0)
            self.layout[n] = (len(self.totals) - 1, self.totals[-1], size)
            self.totals[-1] += size
        self.totals = [max(t, 4) for t in self.totals]
        self.staging = [buffer("compute staging", t, _MAP_READ) for t in self.totals]
