"""The context timeline: every write, dispatch and read of an MLContext, in call order.

The timeline is the wgpu queue. ``queue.write_buffer`` is ordered before the next submit,
and submits run in order, so a tensor is changed in the order of the calls that use it
without any CPU wait. ``write_buffer`` stages its data until the next submit, so a write
not followed by work is flushed with an empty submit (otherwise a loop of writes would pile
up staging memory).

This class is the one place that touches the queue; the interop layer extends it to hold
work on tensors rented to WebGPU.
"""

from __future__ import annotations

import numpy as np
import wgpu

from . import _dtypes
from . import _validate as V
from .errors import InvalidStateError

_MAP_READ = wgpu.BufferUsage.MAP_READ | wgpu.BufferUsage.COPY_DST
_IO = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST


class Timeline:
    """Posts the context's work to its queue in call order."""

    def __init__(self, context):
        self.ctx = context
        self.device = context.device
        self.queue = context.device.queue
        self._closed = ""

    # ------------------------------------------------------------------ posting
    def _check(self, op: str) -> None:
        if self._closed:
            raise InvalidStateError(f"{op}: {self._closed}")

    def submit(self, command_buffers: list, tensors=()) -> None:
        """Submit command buffers that touch ``tensors``."""
        self.queue.submit(command_buffers)

    def write(self, tensor, data: bytes) -> None:
        """Queue ``data`` into ``tensor``'s buffer."""
        self._check("writeTensor")
        self.queue.write_buffer(tensor._buffer, 0, data)
        self.queue.submit([])

    def dispatch(self, graph, ins: dict, outs: dict, key) -> None:
        """Record the graph with tensors bound and submit it."""
        self._check("dispatch")
        enc = self.device.create_command_encoder(label="dispatch")
        graph._encode(enc, {n: t._buffer for n, t in ins.items()}, {n: t._buffer for n, t in outs.items()}, key)
        self.submit([enc.finish()], list(ins.values()) + list(outs.values()))

    def read_start(self, tensor):
        """Queue a copy of ``tensor`` into a staging buffer; the caller maps and releases it."""
        self._check("readTensor")
        staging = self.ctx._staging.acquire(tensor._size)
        enc = self.device.create_command_encoder(label="readTensor")
        enc.copy_buffer_to_buffer(tensor._buffer, 0, staging, 0, tensor._size)
        self.submit([enc.finish()], [tensor])
        return staging

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
        """Refuse all later work with InvalidStateError(reason)."""
        self._closed = reason

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
