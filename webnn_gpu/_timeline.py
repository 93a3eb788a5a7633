"""The context timeline: every write, dispatch and read of an MLContext, in call order.

The timeline is the wgpu queue. ``queue.write_buffer`` is ordered before the next submit,
and submits run in order, so a tensor is changed in the order of the calls that use it
without any CPU wait. ``write_buffer`` stages its data until the next submit: a write's data
goes out with the next submit of any kind (usually the dispatch that follows it), and a second
write before any submit first flushes the one before with an empty submit, so a loop of writes
never piles up more than one write's staging memory.

Staged reads: a dispatch whose output is a ``readable`` tensor that was read after the
dispatch before (a read-back loop) also copies that output into a MAP_READ staging buffer in
its own command buffer, kept on the tensor while it holds the tensor's value. The next
``read_tensor`` of it is then a map only: no copy recorded, no submit; it also starts the
maps of the other outputs that dispatch staged, so their reads find them done (a map dropped
before its read is unmapped and its buffer reused by a later dispatch). Anything that may
change the tensor drops the staged copy first (a write, a dispatch touching it, a rental, its
destruction), and a tensor whose GPUBuffer was handed out (``MLTensor.buffer``, ``record``,
``tensor_from_buffer``, importable tensors) is never staged, so a read returns exactly what a
copy made at read time would. Any other read copies and submits as it always did.

This class is the one place that touches the queue. It also keeps the rentals of tensors to
WebGPU (:mod:`webnn_gpu.interop`), in one of two modes:

* ``"export"`` (``MLContext.export_to_gpu``, the spec's exportToGPU): every WebNN write,
  dispatch or read that uses the tensor raises InvalidStateError naming the rental.
* ``"import"`` (``interop.import_external_buffer``, the MLTensor explainer): a write or
  dispatch that touches it is kept here, already recorded, and submitted in call order when
  the rental is returned; a read raises. Per-tensor order is kept: a later call that touches
  a tensor touched by held work is held too. Work on other tensors runs at once.

``webnn_gpu.interop`` talks to the runtime only through the methods in the section
"interface for webnn_gpu.interop" below and :func:`of`; it reads no private name of the
context, tensors or graphs.
"""

from __future__ import annotations

import asyncio
import weakref
from collections import deque

import numpy as np
import wgpu

from . import _dtypes
from . import _validate as V
from .errors import InvalidStateError, OperationError

_MAP_READ = wgpu.BufferUsage.MAP_READ | wgpu.BufferUsage.COPY_DST
#: seconds between checks that the device still exists while waiting for a map
_WATCH_S = 0.05

#: The map mode of a staging buffer that a copy submitted just before fills. wgpu-py 0.32's
#: ``map_async(READ)`` first submits an empty command buffer of its own on every map of a
#: ``MAP_READ`` buffer (a guard for a buffer mapped before any submit touched it,
#: gfx-rs/wgpu-native#305); its own ``queue.read_buffer`` skips that with this mode after its
#: copy, as every read of ours follows its copy (:meth:`Timeline.read_start`). Skipping it
#: takes about 70 us off a read on lavapipe.
_READ_AFTER_COPY = "READ_NOSYNC"
_IO = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST


class Timeline:
    """Posts the context's work to its queue in call order."""

    def __init__(self, context):
        self.ctx = context
        self.device = context.device
        self.queue = context.device.queue
        self._closed = ""
        self._rented: dict = {}  # MLTensor -> its RentedBuffer (webnn_gpu.interop.rental; .mode is "export" or "import")
        self._held: deque[_Held] = deque()  # work waiting for rentals, in call order
        self._held_on: set = set()  # tensors touched by held work
        self._unflushed = False  # a write_buffer is waiting for the next submit
        self._maps: dict = {}  # staged buffer -> the promise of its map, started with a sibling's read
        self._dropped: list = []  # (buffer, promise): staged copies dropped while mapping or mapped
        self._waiting: dict = {}  # staging buffer -> the promise of its map an async read awaits

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
            if owner_destroyed(t._buffer):
                raise InvalidStateError(f"{op}: the GPUBuffer of {t!r} (tensor_from_buffer) has been destroyed")
            rental = self._rented.get(t) if self._rented else None
            if rental is not None and rental.mode == "export":
                raise InvalidStateError(exported_message(op, t, rental))

    def _submit(self, command_buffers: list) -> None:
        """``queue.submit``; it also sends the data of writes made since the last one."""
        self.queue.submit(command_buffers)
        self._unflushed = False

    def submit(self, command_buffers: list, tensors=()) -> None:
        """Submit command buffers that touch ``tensors`` (held while one of them is rented)."""
        self._post("submit", tensors, lambda: self._submit(command_buffers))

    def write(self, tensor, data) -> None:
        """Queue ``data`` (bytes, or a flat C-contiguous ndarray the caller may change once this
        returns) into ``tensor``'s buffer; held, while the tensor is rented, as a copy."""
        self._check("writeTensor", (tensor,))
        self.unstage((tensor,))
        if self._holds((tensor,)) or not _whole_words(data):
            data = padded_bytes(data)  # a snapshot: the caller's array may change before it runs

        def run():
            if self._unflushed:  # at most one write's data waits for a submit
                self._submit([])
            self.queue.write_buffer(tensor._buffer, 0, data)
            self._unflushed = True

        self._post("writeTensor", (tensor,), run)

    def dispatch(self, graph, ins: dict, outs: dict, key) -> None:
        """Record the graph with tensors bound and submit it (held while a tensor is rented).

        The command buffer is recorded now, so held work does not depend on the graph
        staying alive until the rental is returned. Outputs read after the previous dispatch
        are also copied into staging buffers for their next read (see "Staged reads" above);
        held work stages nothing.
        """
        tensors = [*ins.values(), *outs.values()]
        self._check("dispatch", tensors, graph)
        self.unstage(tensors)
        enc = self.device.create_command_encoder(label="dispatch")
        graph._encode(enc, {n: t._buffer for n, t in ins.items()}, {n: t._buffer for n, t in outs.items()}, key)
        staged: list = []
        if self._dropped:
            self._reap()
        try:
            if not self._holds(tensors):
                for t in outs.values():
                    if t._reread and _stageable(t):
                        staging = self.ctx._staging.acquire(t._size)
                        staged.append((t, staging))
                        enc.copy_buffer_to_buffer(t._buffer, 0, staging, 0, t._size)
            self.submit([enc.finish()], tensors)
        except BaseException:
            for _, staging in staged:
                self.ctx._staging.release(staging)
            raise
        for t, staging in staged:
            t._staged = staging
            t._siblings = staged
            t._reread = False

    def unstage(self, tensors) -> None:
        """Drop the staged copies of ``tensors`` (before anything that may change them)."""
        for t in tensors:
            staging = t._staged
            if staging is not None:
                t._staged = None
                t._siblings = []
                promise = self._maps.pop(staging, None)
                if promise is None:
                    self.ctx._staging.release(staging)
                else:  # unmapped and pooled once its map is done (:meth:`_reap`)
                    self._dropped.append((staging, promise))

    def _reap(self) -> None:
        """Unmap and pool the dropped staged copies whose maps are done."""
        keep = []
        for staging, promise in self._dropped:
            event = getattr(promise, "_thread_event", None)
            if event is not None and not event.is_set():
                keep.append((staging, promise))
                continue
            try:
                promise.sync_wait()  # done: returns at once (and marks the buffer mapped)
                staging.unmap()
                self.ctx._staging.release(staging)
            except Exception:  # noqa: BLE001 - a failed map or a lost device: nothing to pool
                pass
        self._dropped = keep

    def reap_closed(self) -> None:
        """On ``destroy()``: destroy the dropped staged copies whose maps are done (the staging
        pool is closed, so releasing one destroys it); the others stay until their maps end and
        go with the device or when collected."""
        if self._dropped:
            self._reap()

    def expose(self, tensor) -> None:
        """``tensor``'s GPUBuffer is handed out: others may change it, so it is never staged."""
        tensor._exposed = True
        self.unstage((tensor,))

    # ------------------------------------------------------------------ waiting for maps
    def device_stopped(self) -> bool:
        """Whether a pending map can never resolve: the context is gone, or its device was
        destroyed (wgpu-py then stops the thread that polls it, so the map would wait forever)."""
        poller = getattr(self.device, "_poller", True)
        return bool(self._closed) or self.ctx._destroyed or poller is None or getattr(poller, "_shutdown", False)

    def _stopped(self, op: str):
        if not self.ctx._destroyed:
            self.ctx._mark_lost("the device was destroyed")
        return InvalidStateError(f"{op}: the MLContext was destroyed or lost while the read was pending")

    def _map(self, staging, size: int, op: str):
        """``staging.map_async`` for reading after its copy; a device destroyed meanwhile
        (wgpu-py has stopped its poll thread, so the call fails) raises InvalidStateError."""
        try:
            return staging.map_async(_READ_AFTER_COPY, 0, size)
        except Exception:
            if self.device_stopped():
                raise self._stopped(op) from None
            raise

    def map_read(self, staging, size: int, op: str) -> None:
        """``staging.map_sync(READ)`` that raises InvalidStateError instead of hanging when the
        context is destroyed or its device lost meanwhile (from another thread).

        wgpu-py 0.32 has no public wait with a timeout; we use its promise's thread event when
        it has one, and a plain wait otherwise. (Polling the device in the calling thread
        instead would save about 20 us a read on lavapipe, but a read would then finish
        before a ``destroy()`` racing it from another thread could reject it; a single
        non-blocking poll saves more but made the shared-device destroy test abort now and
        then: docs/performance.md, "The fixed cost of one inference".)
        """
        promise = self._maps.pop(staging, None) or self._map(staging, size, op)
        event = getattr(promise, "_thread_event", None)
        if event is not None:
            while not event.wait(_WATCH_S):
                if self.device_stopped():
                    raise self._stopped(op)
        promise.sync_wait()

    async def map_read_async(self, staging, size: int, op: str) -> None:
        """Awaitable :meth:`map_read`; never blocks the event loop."""
        promise = self._maps.pop(staging, None) or self._map(staging, size, op)

        async def wait():
            await promise

        task = asyncio.ensure_future(wait())
        self._waiting[staging] = promise
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=_WATCH_S)
                if done:
                    task.result()
                    del self._waiting[staging]
                    return
                if self.device_stopped():
                    task.cancel()
                    raise self._stopped(op)
        except BaseException:  # cancelled, or the device stopped: see release_read
            if staging in self._waiting and self.device_stopped():
                del self._waiting[staging]  # no map to wait for: the buffer goes with the device
            raise

    def release_read(self, staging) -> None:
        """Give a read's staging buffer back: to the pool, or, when its map is still running
        (the awaiting read was cancelled), to the dropped copies that :meth:`_reap` unmaps and
        pools once the map is done (pooled at once, a later copy into it would fail while the
        map runs)."""
        promise = self._waiting.pop(staging, None)
        if promise is None:
            self.ctx._staging.release(staging)
        else:
            self._dropped.append((staging, promise))

    def read_start(self, tensor):
        """Queue a copy of ``tensor`` into a staging buffer; the caller maps and releases it.

        A staged copy of the tensor's current value (:meth:`dispatch`) is handed over instead,
        with nothing submitted.

        Raises:
            InvalidStateError: the tensor is rented, or work on it is held behind a rental
                (waiting would never end: the rental is returned by the caller's thread).
        """
        self._check("readTensor", (tensor,))
        self._check_not_held("readTensor", tensor)
        if self._dropped:
            self._reap()
        tensor._reread = True
        staging = tensor._staged
        if staging is not None:
            tensor._staged = None
            siblings, tensor._siblings = tensor._siblings, []
            for sibling, buffer in siblings:  # map the dispatch's other staged outputs now:
                if sibling._staged is buffer and buffer not in self._maps:  # their reads find them done
                    self._maps[buffer] = self._map(buffer, sibling._size, "readTensor")
            return staging
        staging = self.ctx._staging.acquire(tensor._size)
        enc = self.device.create_command_encoder(label="readTensor")
        enc.copy_buffer_to_buffer(tensor._buffer, 0, staging, 0, tensor._size)
        self._submit([enc.finish()])
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
        rental = self._rented.get(tensor)
        if rental is not None:
            if rental.mode == "export":
                raise InvalidStateError(exported_message(op, tensor, rental))
            raise InvalidStateError(f"{op}: {tensor!r} is rented to WebGPU ({rental!r}); return that buffer "
                                    f"(destroy() or the end of its with-block) before reading it")
        if tensor in self._held_on:
            raise InvalidStateError(f"{op}: WebNN work on this MLTensor is held until a rented tensor it "
                                    f"depends on is released; release the rental first")

    def rent(self, tensor, rental, *, replace: bool = False) -> None:
        """Mark ``tensor`` rented until :meth:`unrent`: later WebNN work touching it raises
        (``rental.mode == "export"``) or is held (``"import"``). ``replace`` swaps the rental
        object of a tensor already rented (the slow path's copy, once made).

        Renting orders after all WebNN work already submitted on the tensor (one queue);
        work still held on it would never run first, so that is refused.
        """
        if replace:
            self._rented[tensor] = rental
            tensor._rental = rental
            return
        self._check("exportToGPU")
        self._check_not_held("exportToGPU", tensor)
        self.unstage((tensor,))
        self._rented[tensor] = rental
        tensor._rental = rental

    def restore(self, tensor, data) -> None:
        """Write a returned rental's bytes (a bytes-like) back into ``tensor``, before its held work."""
        self._check("exportToGPU")
        self.unstage((tensor,))
        self.queue.write_buffer(tensor._buffer, 0, data)
        self._submit([])

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
        self._submit([enc.finish()])
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

    # ------------------------------------------------------------------ interface for webnn_gpu.interop
    # Renting and recording use only these methods (and :func:`of`), besides the posting
    # ones above (rent, unrent, restore, read_start, map_read, map_read_async,
    # has_held_work): the names of the context's, tensors' and graphs' insides stay private
    # to the runtime (tests/interop/test_layout.py checks it).
    @property
    def lock(self):
        """The context's lock: hold it around a check and the change it guards."""
        return self.ctx._lock

    @property
    def closed(self) -> bool:
        """Whether the context is destroyed or lost (its rentals and held work are dropped)."""
        return bool(self._closed) or self.ctx._destroyed

    def check_alive(self, op: str) -> None:
        """Raise InvalidStateError when the context is destroyed or lost."""
        self.ctx._check_alive(op)

    def own_tensor(self, op: str, arg: str, tensor):
        """``tensor`` checked to be a usable MLTensor of this context (MLTypeError,
        InvalidStateError otherwise)."""
        return self.ctx._own_tensor(op, arg, tensor)

    def own_graph(self, op: str, graph):
        """``graph`` checked to be a usable MLGraph of this context."""
        return self.ctx._own_graph(op, graph)

    @staticmethod
    def tensor_bytes(tensor) -> int:
        """The byte size of ``tensor``'s buffer (its byte length padded to whole words)."""
        return tensor._size

    def tensor_buffer(self, tensor):
        """``tensor``'s GPUBuffer, without the usability check of ``MLTensor.buffer`` (the
        tensor is never staged after: the caller may change it)."""
        self.expose(tensor)
        return tensor._buffer

    @staticmethod
    def bind_key(tensor):
        """A key naming ``tensor``'s buffer in a graph's bind-group cache (never reused)."""
        return tensor._serial

    def rental_of(self, tensor):
        """The live rental of ``tensor``, or None."""
        return self._rented.get(tensor)

    def check_rentable(self, op: str, tensor) -> None:
        """Refuse to rent a tensor that is rented, or whose WebNN work is held behind a rental
        (renting now could never be ordered after that work)."""
        rental = self._rented.get(tensor)
        if rental is not None:
            raise InvalidStateError(f"{op}: {tensor!r} is already rented ({rental!r}); return that buffer "
                                    f"(destroy() or the end of its with-block) before renting it again")
        if tensor in self._held_on:
            raise InvalidStateError(f"{op}: WebNN work on {tensor!r} is held behind another rented tensor; return "
                                    f"that rental first (renting now would wait for ever)")

    def staging_done(self, staging) -> None:
        """Give back a staging buffer of :meth:`read_start` (mapped or not)."""
        self.ctx._staging.release(staging)

    def graph_io(self, graph) -> tuple[dict, dict]:
        """The declared inputs and outputs of ``graph``: name -> IR value (``data_type``, ``shape``)."""
        return graph._inputs, graph._outputs

    def copy_needs(self, graph) -> dict:
        """Usage flags the graph's buffer copies need on its inputs and outputs:
        ``{("inputs" | "outputs", name): flags}``."""
        from ._lower import CopyStep
        from .graph import _OutRef

        needs: dict = {}

        def mark(v, flag):
            if isinstance(v, _OutRef):
                key = ("outputs", v.name)
            else:
                s = graph._slot.get(graph._root(v).id)
                if s is None or s.kind not in ("in", "out"):
                    return
                key = ("inputs" if s.kind == "in" else "outputs", s.key)
            needs[key] = needs.get(key, 0) | flag

        for step in graph._steps:
            if isinstance(step, CopyStep):
                mark(step.src, wgpu.BufferUsage.COPY_SRC)
                mark(step.dst, wgpu.BufferUsage.COPY_DST)
        return needs

    def record(self, graph, encoder, ins: dict, outs: dict, key) -> None:
        """Record ``graph`` into the caller's ``encoder`` with GPUBuffers bound by name
        (nothing is submitted; ``key`` names the buffers for the bind-group cache)."""
        self._check("record", (), graph)
        graph._encode(encoder, ins, outs, key)

    def wrap_buffer(self, buffer, data_type: str, shape, *, label: str = "", **flags):
        """A new MLTensor of this context over the caller's ``buffer`` (no copy, no zero fill)."""
        from .tensor import MLTensor

        t = MLTensor(self.ctx, data_type, shape, label=label, buffer=buffer, **flags)
        self.ctx._tensors.add(t)
        return t

    def check_data_type(self, op: str, label: str, data_type: str) -> None:
        """Refuse a data type this adapter cannot hold (NotSupportedError)."""
        self.ctx._check_type(op, label, data_type)

    @property
    def max_binding_size(self) -> int:
        """The device's maxStorageBufferBindingSize."""
        return self.ctx._max_binding_size

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
        self._submit([enc.finish()])
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


def _stageable(tensor) -> bool:
    """Whether a dispatch may stage ``tensor``'s value for its next read: readable, and only
    WebNN changes it (its own buffer, never handed out, not importable)."""
    return tensor._readable and tensor._owns_buffer and not tensor._importable and not tensor._exposed


def of(obj) -> Timeline:
    """The timeline of an MLContext, or of the context of an MLTensor or MLGraph."""
    ctx = getattr(obj, "_context", obj)
    return ctx._timeline


def exported_message(op: str, tensor, rental) -> str:
    """The InvalidStateError text for WebNN use of a tensor exported with exportToGPU."""
    return (f"{op}: {tensor!r} is exported to WebGPU ({rental!r}); WebNN may not read, write or dispatch "
            f"with it until that GPUBuffer's destroy() or the end of its with-block")


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


def note_owner_destroy(buffer) -> None:
    """Have the caller's ``buffer.destroy()`` (a buffer ``tensor_from_buffer`` wraps) mark the
    buffer first (:func:`owner_destroyed`), so that WebNN refuses work on a tensor over it with
    InvalidStateError instead of submitting a destroyed buffer, which wgpu-native treats as
    fatal. The buffer's own ``destroy`` runs as before; the wrapper holds the buffer weakly."""
    if "_webnn_gpu_destroyed" in vars(buffer):
        return
    ref, destroy = weakref.ref(buffer), type(buffer).destroy

    def noting_destroy() -> None:
        b = ref()
        if b is not None:
            b._webnn_gpu_destroyed = True
            destroy(b)

    noting_destroy.__doc__ = destroy.__doc__
    buffer._webnn_gpu_destroyed = False
    buffer.destroy = noting_destroy


def owner_destroyed(buffer) -> bool:
    """Whether ``buffer`` was wrapped by ``tensor_from_buffer`` and destroyed by its owner since
    (:func:`note_owner_destroy`)."""
    return getattr(buffer, "_webnn_gpu_destroyed", False)
