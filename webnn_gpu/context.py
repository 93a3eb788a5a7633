"""ML and MLContext: the entry point, and the context that owns a device timeline.

Spec: https://www.w3.org/TR/webnn/#api-ml and https://www.w3.org/TR/webnn/#api-mlcontext

The context wraps a wgpu device and its queue. Its *timeline* is the queue: ``write_tensor``
and ``dispatch`` post work in call order and return at once; ``read_tensor`` waits for
the value. Reads go through reused MAP_READ staging buffers, never a fresh one per read.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import threading
from collections import defaultdict
from collections.abc import Mapping

import numpy as np
import wgpu

from . import _dtypes, _env, _startup
from . import _validate as V
from ._kernels import PipelineCache, tuning_profile
from .errors import DataError, InvalidStateError, NotSupportedError, OperationError, WebNNError, where
from .graph import MLGraph
from .tensor import MLTensor

os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")

_POWER = ("default", "high-performance", "low-power")
_DEVICE_TYPES = ("cpu", "gpu", "npu")
_WANTED_FEATURES = ("shader-f16", "shader-int64", "timestamp-query", "subgroup")
_WANTED_LIMITS = (
    "max-storage-buffer-binding-size",
    "max-buffer-size",
    "max-storage-buffers-per-shader-stage",
    "max-compute-workgroup-storage-size",
    "max-compute-invocations-per-workgroup",
    "max-compute-workgroup-size-x",
    "max-compute-workgroup-size-y",
    "max-compute-workgroups-per-dimension",
)
_MAP_READ = wgpu.BufferUsage.MAP_READ | wgpu.BufferUsage.COPY_DST
log = logging.getLogger("webnn_gpu")


def _is_device_lost(exc: BaseException) -> bool:
    text = str(exc).lower()
    return "device is lost" in text or "device lost" in text or "devicelost" in text


class ML:
    """The ``navigator.ml`` object: makes contexts. Use the module-level ``webnn_gpu.ml``."""

    # IDL: Promise<MLContext> createContext(optional MLContextOptions options = {});
    # IDL: Promise<MLContext> createContext(GPUDevice gpuDevice);
    def create_context(self, gpu_device=None, *, power_preference: str = "default", accelerated: bool = True,
                       device_type: str | None = None) -> MLContext:
        """Create a context on the default adapter, or on the caller's ``wgpu.GPUDevice``.

        Arguments:
            gpu_device (wgpu.GPUDevice | None): share this device and its queue.
            power_preference (str): "default", "high-performance" or "low-power".
            accelerated (bool): prefer a hardware adapter (a software one is used if none).
            device_type (str | None): legacy hint "cpu" / "gpu" / "npu" (only steers the adapter).

        Returns:
            MLContext

        Raises:
            MLTypeError: an invalid option.
            NotSupportedError: no WebGPU adapter is available.
        """
        op = "createContext"
        if power_preference not in _POWER:
            V.fail(op, "", "power_preference", f"one of {', '.join(_POWER)}", power_preference)
        V.bool_value(op, "", "accelerated", accelerated)
        if device_type is not None and device_type not in _DEVICE_TYPES:
            V.fail(op, "", "device_type", f"one of {', '.join(_DEVICE_TYPES)}", device_type)
        if gpu_device is not None:
            if not isinstance(gpu_device, wgpu.GPUDevice):
                V.fail(op, "", "gpu_device", "a wgpu.GPUDevice", gpu_device)
            return MLContext(gpu_device, shared=True, power_preference=power_preference)
        _startup.apply()  # before wgpu-py's first descriptors: its cffi types parse faster
        wgpu_pref = "low-power" if power_preference == "low-power" else "high-performance"
        if device_type == "cpu":
            wgpu_pref = "low-power"
        adapter = wgpu.gpu.request_adapter_sync(power_preference=wgpu_pref)
        if adapter is None:
            raise NotSupportedError("createContext: no WebGPU adapter found (install a Vulkan driver, e.g. Mesa's lavapipe)")
        features = [f for f in _WANTED_FEATURES if f in adapter.features]
        limits = {k: adapter.limits[k] for k in _WANTED_LIMITS if k in adapter.limits}
        device = adapter.request_device_sync(required_features=features, required_limits=limits,
                                             label="webnn-gpu")
        return MLContext(device, shared=False, power_preference=power_preference, adapter=adapter)

    async def create_context_async(self, gpu_device=None, **options) -> MLContext:
        """Awaitable twin of :meth:`create_context`."""
        return await asyncio.get_running_loop().run_in_executor(
            None, lambda: self.create_context(gpu_device, **options)
        )


ml = ML()


class _StagingPool:
    """Reused MAP_READ buffers, by power-of-two size class."""

    def __init__(self, device):
        self.device = device
        self._free: dict[int, list] = defaultdict(list)
        self._lock = threading.Lock()
        self._closed = False

    def acquire(self, size: int):
        cls = 1 << max(8, (size - 1).bit_length())
        with self._lock:
            if self._free[cls]:
                return self._free[cls].pop()
        return self.device.create_buffer(size=cls, usage=_MAP_READ, label=f"staging {cls}")

    def release(self, buf) -> None:
        with self._lock:
            if self._closed:  # the context is gone: nothing to pool for
                with contextlib.suppress(Exception):
                    buf.destroy()
                return
            bucket = self._free[buf.size]
            if len(bucket) < 4:
                bucket.append(buf)
                return
        buf.destroy()

    def clear(self) -> None:
        with self._lock:
            self._closed = True
            for bucket in self._free.values():
                for b in bucket:
                    b.destroy()
            self._free.clear()


class MLContext:
    """A WebNN context on one wgpu device (the spec's MLContext). Made by ``ml.create_context``.

    Attributes:
        device (wgpu.GPUDevice): the device (the caller's, when shared).
        queue (wgpu.GPUQueue): its queue: the context timeline.
        adapter_info (dict): vendor, device, backend of the adapter.
        features (frozenset[str]): the device features we use.
        limits (dict): the device limits.
    """

    def __init__(self, device, *, shared: bool, power_preference: str = "default", adapter=None):
        self.device = device
        self.queue = device.queue
        self._shared = shared
        self.power_preference = power_preference
        self._adapter = adapter if adapter is not None else getattr(device, "adapter", None)
        self._features = frozenset(device.features)
        self._limits = dict(device.limits)
        self._max_binding_size = int(self._limits.get("max-storage-buffer-binding-size", 128 << 20))
        # Tensors may be as large as a buffer; a kernel that binds more than
        # maxStorageBufferBindingSize at once splits its work or refuses at build().
        self._max_tensor_bytes = int(self._limits.get("max-buffer-size", self._max_binding_size))
        self._supported_data_types = tuple(
            dt for dt in _dtypes.DATA_TYPES if dt != "float16" or "shader-f16" in self._features
        )
        _startup.apply()  # before the first pipeline: wgpu-py's cffi types parse faster
        self._pipelines = PipelineCache.of(device)  # shared by every context on this device
        self._tuning = tuning_profile(self.adapter_info)
        from .ops.linalg import subgroup_lanes

        self._subgroup = subgroup_lanes(self.adapter_info, self._features)
        self._staging = _StagingPool(device)
        self._lock = threading.RLock()
        self._destroyed = False
        #: set as destroy() is called, before it waits for the lock: a read whose copy was
        #: being submitted meanwhile (the lock held) rejects, however the two threads race after
        self._destroying = False
        self._lost_future: concurrent.futures.Future = concurrent.futures.Future()
        self._tensors: set = set()
        self._retired: list = []
        from ._timeline import Timeline

        self._timeline = Timeline(self)

    # ------------------------------------------------------------------ info
    @property
    def adapter_info(self) -> dict:
        """The adapter's info (vendor, device, description, backend_type, ...)."""
        try:
            return dict(self.device.adapter_info)
        except Exception:  # noqa: BLE001 - older wgpu
            return dict(getattr(self._adapter, "info", {}) or {})

    @property
    def features(self) -> frozenset:
        """Device features enabled for this context."""
        return self._features

    @property
    def limits(self) -> dict:
        """Device limits."""
        return dict(self._limits)

    @property
    def supported_data_types(self) -> tuple[str, ...]:
        """Data types this adapter can hold in tensors and operands."""
        return self._supported_data_types

    @property
    def lost(self) -> concurrent.futures.Future:
        """A future resolved with a message when the context is lost or destroyed."""
        return self._lost_future

    # ------------------------------------------------------------------ lifetime
    def _check_alive(self, op: str) -> None:
        if self._destroyed:
            raise InvalidStateError(f"{op}: the MLContext has been destroyed or lost")

    @contextlib.contextmanager
    def _guard(self, op: str, what: str = ""):
        """Turn wgpu failures inside the block into our errors.

        A lost device resolves :attr:`lost`, makes every later call raise
        InvalidStateError and is reported as such (never as out-of-memory); any other
        wgpu error becomes an OperationError naming ``op`` and ``what``.
        """
        try:
            yield
        except WebNNError as exc:
            if isinstance(exc, OperationError) and _is_device_lost(exc):
                self._mark_lost(str(exc))
                raise InvalidStateError(f"{op}: the device was lost; the MLContext is no longer usable") from exc
            raise
        except Exception as exc:  # wgpu raises GPUValidationError, GPUOutOfMemoryError, ...
            if self._destroyed:  # destroyed (or lost) while the call was under way
                raise InvalidStateError(f"{op}: the MLContext was destroyed or lost while the call was "
                                        f"pending") from exc
            if _is_device_lost(exc):
                self._mark_lost(str(exc))
                raise InvalidStateError(f"{op}: the device was lost; the MLContext is no longer usable") from exc
            raise OperationError(f"{op}: {what + ': ' if what else ''}{type(exc).__name__}: {exc}") from exc

    def _mark_lost(self, message: str) -> None:
        """The device is gone: resolve ``lost`` and refuse everything from now on."""
        log.error("webnn-gpu: device lost: %s", message.splitlines()[0] if message else "")
        self._destroyed = True
        self._timeline.close("the device was lost")
        with contextlib.suppress(Exception):
            self._staging.clear()
        if not self._lost_future.done():
            self._lost_future.set_result(f"lost: {message}")

    # IDL: undefined destroy();
    def destroy(self) -> None:
        """Destroy the context: its tensors and graphs become unusable. Idempotent.

        The device is destroyed too unless it was the caller's (shared).
        """
        if self._destroyed:
            return
        self._destroying = True
        with self._lock:
            self._destroyed = True
            self._timeline.close("the MLContext was destroyed")
            tensors = list(self._tensors)
            for t in tensors:
                t._destroyed = True
            # staged copies go with the context (on a shared device they would otherwise live
            # until their tensors are collected); one whose map is running is destroyed once
            # the map is done (Timeline._reap), never while wgpu maps it
            self._timeline.unstage(tensors)
            self._tensors.clear()
            self._staging.clear()
            self._timeline.reap_closed()
            if not self._lost_future.done():
                self._lost_future.set_result("destroyed")
            if not self._shared:
                self.device.destroy()

    def _forget_tensor(self, tensor: MLTensor) -> None:
        self._tensors.discard(tensor)

    def _retire_buffer(self, buffer) -> None:
        """Destroy ``buffer`` once the queue has finished the work submitted so far."""
        self._retired.append(buffer)
        if len(self._retired) >= 16:
            self._drain_retired()

    def _drain_retired(self) -> None:
        if not self._retired:
            return
        retired, self._retired = self._retired, []
        self._timeline.wait_idle()
        for b in retired:
            b.destroy()

    # ------------------------------------------------------------------ tensors
    # IDL: Promise<MLTensor> createTensor(MLTensorDescriptor descriptor);
    def create_tensor(self, descriptor: Mapping, **kwargs) -> MLTensor:
        """Create a zero-filled tensor.

        Arguments:
            descriptor (dict): ``data_type``, ``shape`` and optional bools ``readable``,
                ``writable``, ``importable_to_webgpu`` (alias ``exportable_to_gpu``).

        Returns:
            MLTensor

        Raises:
            MLTypeError: an invalid descriptor or unknown key.
            NotSupportedError: a data type or size this adapter cannot hold.
            InvalidStateError: the context is destroyed.
        """
        op = "createTensor"
        label = kwargs.pop("label", "") or ""
        V.check_kwargs(op, label, kwargs)
        self._check_alive(op)
        dt, shape, extra = V.descriptor(op, label, "descriptor", descriptor,
                                        extra_keys=("readable", "writable", "importable_to_webgpu",
                                                    "exportable_to_gpu"))
        flags = {k: V.bool_value(op, label, f"descriptor.{k}", v) for k, v in extra.items()}
        self._check_type(op, label, dt)
        V.size_limit(op, label, "descriptor", dt, shape, self._max_tensor_bytes)
        with self._lock, self._guard(op, f"allocating {_dtypes.buffer_size(dt, shape)} bytes for a {dt} tensor {list(shape)}"):
            t = MLTensor(self, dt, shape, readable=flags.get("readable", False), writable=flags.get("writable", False),
                         importable_to_webgpu=flags.get("importable_to_webgpu", False) or flags.get("exportable_to_gpu", False),
                         label=label)
            self._tensors.add(t)
        return t

    async def create_tensor_async(self, descriptor: Mapping, **kwargs) -> MLTensor:
        """Awaitable twin of :meth:`create_tensor`."""
        return self.create_tensor(descriptor, **kwargs)

    # IDL: Promise<MLTensor> createConstantTensor(MLOperandDescriptor descriptor, AllowSharedBufferSource inputData);
    def create_constant_tensor(self, descriptor: Mapping, data, **kwargs) -> MLTensor:
        """Create an immutable tensor holding ``data``, usable as ``builder.constant(tensor)``.

        Raises:
            MLTypeError, DataError, NotSupportedError, InvalidStateError: as ``create_tensor``;
                DataError for data of the wrong size or dtype.
        """
        op = "createConstantTensor"
        label = kwargs.pop("label", "") or ""
        V.check_kwargs(op, label, kwargs)
        self._check_alive(op)
        dt, shape, _ = V.descriptor(op, label, "descriptor", descriptor)
        self._check_type(op, label, dt)
        V.size_limit(op, label, "descriptor", dt, shape, self._max_tensor_bytes)
        arr = V.array_data(op, label, "data", data, dt, shape)
        with self._lock, self._guard(op, f"allocating a {dt} constant tensor {list(shape)}"):
            t = MLTensor(self, dt, shape, constant=True, label=label)
            self._tensors.add(t)
            self._timeline.write(t, arr)
        return t

    def _check_type(self, op, label, dt) -> None:
        if dt not in self._supported_data_types:
            raise NotSupportedError(
                f"{where(op, label)}: data type {dt!r} is not supported on this adapter "
                f"(supported: {', '.join(self._supported_data_types)})"
            )

    def _own_tensor(self, op: str, arg: str, t, *, kind: str = "tensor") -> MLTensor:
        if not isinstance(t, MLTensor):
            V.fail(op, "", arg, "an MLTensor", t)
        if t._context is not self:
            V.fail(op, "", arg, "an MLTensor of this MLContext", "a tensor of another context")
        t._check_usable(op)
        return t

    # IDL: undefined writeTensor(MLTensor tensor, AllowSharedBufferSource sourceData);
    def write_tensor(self, tensor: MLTensor, data) -> None:
        """Queue a write of ``data`` into ``tensor`` on the context timeline; returns at once.

        ``data`` is an ndarray of the tensor's dtype and element count, or a bytes-like of
        exactly its byte length. The data is copied before this returns.

        Raises:
            MLTypeError: not a writable tensor of this context.
            DataError: wrong size or dtype.
            InvalidStateError: destroyed tensor or context.
        """
        op = "writeTensor"
        t = self._own_tensor(op, "tensor", tensor)
        if not t.writable:
            V.fail(op, "", "tensor", "a tensor created with writable=True", t)
        # No copy here: the timeline's write_buffer copies before this returns (and held
        # writes snapshot the data).
        arr = V.array_data(op, "", "data", data, t.data_type, t.shape, copy=False)
        with self._lock, self._guard(op):
            self._timeline.write(t, arr)

    # IDL: Promise<ArrayBuffer> readTensor(MLTensor tensor);
    # IDL: Promise<undefined> readTensor(MLTensor tensor, AllowSharedBufferSource outputData);
    def read_tensor(self, tensor: MLTensor, out: np.ndarray | None = None) -> np.ndarray:
        """Wait for the tensor's value and return it (blocking twin of the spec's promise).

        Arguments:
            tensor (MLTensor): a readable tensor of this context.
            out (np.ndarray | None): a C-contiguous array of the tensor's dtype and element
                count to fill instead of a new array.

        Returns:
            np.ndarray: the value, with the tensor's dtype and shape (or ``out``).

        Raises:
            MLTypeError: not a readable tensor of this context.
            DataError: ``out`` of the wrong size or dtype.
            InvalidStateError: destroyed tensor or context, or the tensor is rented to WebGPU.
        """
        op = "readTensor"
        t, out = self._prepare_read(op, tensor, out)
        with self._lock, self._guard(op):
            staging = self._timeline.read_start(t)
        try:
            with self._guard(op):
                self._timeline.map_read(staging, t._size, op)
                return self._finish_read(op, t, staging, out)
        finally:
            self._staging.release(staging)

    async def read_tensor_async(self, tensor: MLTensor, out: np.ndarray | None = None) -> np.ndarray:
        """Awaitable twin of :meth:`read_tensor`; does not block the event loop."""
        op = "readTensor"
        t, out = self._prepare_read(op, tensor, out)
        with self._lock, self._guard(op):
            staging = self._timeline.read_start(t)
        try:
            with self._guard(op):
                await self._timeline.map_read_async(staging, t._size, op)
                return self._finish_read(op, t, staging, out)
        finally:
            with self._lock:
                self._timeline.release_read(staging)

    def _prepare_read(self, op, tensor, out):
        t = self._own_tensor(op, "tensor", tensor)
        if not t.readable:
            V.fail(op, "", "tensor", "a tensor created with readable=True", t)
        if t._rental is not None:
            self._timeline._check_not_held(op, t)  # raises, naming the rental
        info = _dtypes.info(t.data_type)
        if out is not None:
            if not isinstance(out, np.ndarray) or out.dtype != info.numpy or out.size != V.element_count(t.shape) \
                    or not out.flags.c_contiguous or not out.flags.writeable:
                raise DataError(
                    f"{op}: argument 'out': expected a writable C-contiguous {info.numpy} array of "
                    f"{V.element_count(t.shape)} elements, got {V._show(out)}"
                )
        return t, out

    def _finish_read(self, op: str, t: MLTensor, staging, out):
        """Copy a mapped staging buffer out; a tensor or context destroyed meanwhile rejects."""
        if t._destroyed or self._destroyed or self._destroying:
            with contextlib.suppress(Exception):  # the device may be gone with the context
                staging.unmap()
            what = "MLContext" if self._destroyed or self._destroying else "MLTensor"
            raise InvalidStateError(f"{op}: the {what} was destroyed or lost while the read was pending")
        info = _dtypes.info(t.data_type)
        n = V.element_count(t.shape)
        try:
            mv = staging.read_mapped(0, t._size, copy=False)
            flat = np.frombuffer(mv, dtype=info.numpy, count=n)
            if out is None:
                result = flat.copy().reshape(t.shape)
            else:
                out.reshape(-1)[...] = flat
                result = out
            del flat, mv
        finally:
            staging.unmap()
        return result

    # ------------------------------------------------------------------ execution
    # IDL: undefined dispatch(MLGraph graph, MLNamedTensors inputs, MLNamedTensors outputs);
    def dispatch(self, graph: MLGraph, inputs: Mapping, outputs: Mapping) -> None:
        """Queue the graph on the context timeline with tensors as inputs and outputs.

        Returns at once; chained dispatches need no round trip to Python.

        Raises:
            MLTypeError: missing, extra or mismatched tensors; the same tensor used twice as
                output, or as both input and output.
            InvalidStateError: destroyed graph, tensor or context.
        """
        op = "dispatch"
        self._check_alive(op)
        g = self._own_graph(op, graph)
        ins = self._check_named(op, "inputs", inputs, g._inputs)
        outs = self._check_named(op, "outputs", outputs, g._outputs)
        out_ids = [id(t) for t in outs.values()]
        if len(set(out_ids)) != len(out_ids):
            V.fail(op, "", "outputs", "distinct tensors for distinct outputs", "the same tensor twice")
        for name, t in ins.items():
            if id(t) in out_ids:
                V.fail(op, "", f"inputs[{name!r}]", "a tensor that is not also an output of this dispatch",
                       "a tensor used as both input and output")
        key = tuple(t._serial for t in ins.values()) + (None,) + tuple(t._serial for t in outs.values())
        with self._lock, self._guard(op):
            self._timeline.dispatch(g, ins, outs, key)

    def _own_graph(self, op, graph) -> MLGraph:
        if not isinstance(graph, MLGraph):
            V.fail(op, "", "graph", "an MLGraph", graph)
        if graph._context is not self:
            V.fail(op, "", "graph", "an MLGraph built for this MLContext", "a graph of another context")
        graph._check_usable(op)
        return graph

    def _check_named(self, op, arg, given, declared: dict) -> dict:
        if not isinstance(given, Mapping):
            V.fail(op, "", arg, "a dict of name -> MLTensor", given)
        missing = sorted(set(declared) - set(given))
        extra = sorted(set(given) - set(declared))
        if missing or extra:
            V.fail(op, "", arg, f"exactly the names {sorted(declared)}",
                   f"missing {missing}, unknown {extra}" if missing and extra else
                   (f"missing {missing}" if missing else f"unknown {extra}"))
        result = {}
        for name, v in declared.items():
            t = self._own_tensor(op, f"{arg}[{name!r}]", given[name])
            if arg == "outputs" and t.constant:
                V.fail(op, "", f"{arg}[{name!r}]", "a tensor that is not constant (constant tensors are immutable)",
                       "a constant tensor")
            if t.data_type != v.data_type or t.shape != v.shape:
                V.fail(op, "", f"{arg}[{name!r}]", f"a {v.data_type} tensor of shape {list(v.shape)}",
                       f"a {t.data_type} tensor of shape {list(t.shape)}")
            result[name] = t
        return result

    def compute(self, graph: MLGraph, inputs: Mapping, outputs: Mapping | None = None) -> dict:
        """Run the graph on NumPy inputs and return NumPy outputs (blocking).

        A convenience beyond the current spec (the former ``MLContext.compute``): uploads the
        inputs, dispatches and reads every output back in one submission.

        Arguments:
            graph (MLGraph): a graph of this context.
            inputs (dict[str, np.ndarray]): one array per graph input, of its dtype and
                element count.
            outputs (dict[str, np.ndarray] | None): arrays to fill (optional, any subset): writable,
                C-contiguous, of the output's dtype and element count (any shape).

        Returns:
            dict[str, np.ndarray]: every output, shaped as the graph's output operand.

        Raises:
            MLTypeError: missing or unknown names.
            DataError: arrays of the wrong dtype or size.
            InvalidStateError: a destroyed graph or context.
        """
        op = "compute"
        self._check_alive(op)
        g = self._own_graph(op, graph)
        if not isinstance(inputs, Mapping):
            V.fail(op, "", "inputs", "a dict of name -> ndarray", inputs)
        missing = sorted(set(g._inputs) - set(inputs))
        extra = sorted(set(inputs) - set(g._inputs))
        if missing or extra:
            V.fail(op, "", "inputs", f"exactly the names {sorted(g._inputs)}", f"missing {missing}, unknown {extra}")
        # Views, not copies: the timeline uploads them before compute() returns.
        arrays = {name: V.array_data(op, "", f"inputs[{name!r}]", _as_array(inputs[name], v.data_type), v.data_type,
                                     v.shape, copy=False)
                  for name, v in g._inputs.items()}
        if outputs is not None:
            if not isinstance(outputs, Mapping) or set(outputs) - set(g._outputs):
                V.fail(op, "", "outputs", f"a dict with names among {sorted(g._outputs)}", outputs)
            for name, arr in outputs.items():
                v = g._outputs[name]
                info = _dtypes.info(v.data_type)
                if not isinstance(arr, np.ndarray) or arr.dtype != info.numpy or arr.size != V.element_count(v.shape) \
                        or not arr.flags.c_contiguous or not arr.flags.writeable:
                    raise DataError(f"{op}: argument 'outputs[{name!r}]': expected a writable C-contiguous "
                                    f"{info.numpy} array of {V.element_count(v.shape)} elements, got {V._show(arr)}"
                                    + ("" if not isinstance(arr, np.ndarray) else
                                       f" (C-contiguous: {arr.flags.c_contiguous}, writable: {arr.flags.writeable})"))
        with self._lock, self._guard(op):
            result = self._timeline.compute(g, arrays, dict(outputs or {}))
            if _env.PROFILE:
                from .profile import format_table, profile_graph

                log.info("kernel timings:\n%s", format_table(profile_graph(self, g, arrays, repeats=3)))
            return result

    async def compute_async(self, graph: MLGraph, inputs: Mapping, outputs: Mapping | None = None) -> dict:
        """Awaitable twin of :meth:`compute` (runs in a worker thread; the loop is not blocked)."""
        return await asyncio.get_running_loop().run_in_executor(None, self.compute, graph, inputs, outputs)

    # ------------------------------------------------------------------ WebGPU interop
    # (implemented in webnn_gpu.interop; see docs/interop.md)
    # IDL: Promise<GPUBuffer> exportToGPU(MLTensor tensor);  (webnn PR #942; usage per webnn#954)
    def export_to_gpu(self, tensor: MLTensor, usage: int | None = None, *, device=None, allow_copy: bool = True):
        """Rent ``tensor`` to WebGPU code as a ``wgpu.GPUBuffer`` (blocking twin), per the spec.

        Spec: https://www.w3.org/TR/webnn/#api-mlcontext-exporttogpu

        The buffer is the tensor's memory (same device: zero copies), rented until its
        ``destroy()`` or the end of a ``with`` block. Renting orders after all WebNN work
        already posted on the tensor. Meanwhile every WebNN ``read_tensor``, ``write_tensor``
        and ``dispatch`` that uses the tensor raises InvalidStateError naming the rental (for
        the explainer's rule, which holds that work instead, use
        ``webnn_gpu.interop.import_external_buffer``).

        Arguments:
            tensor (MLTensor): a tensor of this context created with ``importable_to_webgpu``
                (alias ``exportable_to_gpu``).
            usage (int | None): the buffer's ``wgpu.BufferUsage`` flags (webnn#954); default
                STORAGE | COPY_SRC | COPY_DST; any combination of those and UNIFORM, INDIRECT,
                VERTEX, INDEX.
            device (wgpu.GPUDevice | None): where to use it; default the context's device.
                Another device takes the slow path (a copy through the CPU, written back at
                return).
            allow_copy (bool): when False, another device raises instead of copying.

        Returns:
            webnn_gpu.interop.RentedBuffer: a ``wgpu.GPUBuffer`` (usable in your bind
            groups and copies) and a context manager.

        Raises:
            MLTypeError: not importable, another context's tensor, not a device, a bad usage.
            InvalidStateError: destroyed, already rented, or work on it is held behind
                another rental.
            NotSupportedError: another device with ``allow_copy=False``; MAP_READ, MAP_WRITE
                or QUERY_RESOLVE usage.
            OperationError: the slow path's copy failed.
        """
        from .interop.rental import export_to_gpu

        return export_to_gpu(self, tensor, usage, device=device, allow_copy=allow_copy)

    async def export_to_gpu_async(self, tensor: MLTensor, usage: int | None = None, *, device=None,
                                  allow_copy: bool = True):
        """Awaitable twin of :meth:`export_to_gpu`."""
        from .interop.rental import export_to_gpu_async

        return await export_to_gpu_async(self, tensor, usage, device=device, allow_copy=allow_copy)

    def record(self, encoder, graph: MLGraph, inputs: Mapping, outputs: Mapping) -> None:
        """Write the graph's kernels into the caller's ``wgpu.GPUCommandEncoder``.

        A convenience beyond the spec (DESIGN §2, model 4): your passes, the inference and
        your post-processing go out in one ``queue.submit``, which you make. Nothing is
        submitted here; ordering against WebNN's own timeline is by your submit.

        Arguments:
            encoder (wgpu.GPUCommandEncoder): an unfinished encoder of the context's device;
                end your own pass first (wgpu reports an open pass only at ``finish()``).
            graph (MLGraph): a graph of this context.
            inputs, outputs (dict[str, MLTensor | wgpu.GPUBuffer]): one per graph input and
                output; a buffer must be of the context's device, at least the operand's
                byte length (padded to 4) and have STORAGE usage (plus COPY_SRC/COPY_DST
                where the graph copies it).

        Raises:
            MLTypeError: wrong names, shapes, sizes, usages or devices; the same buffer twice.
            InvalidStateError: a destroyed graph, tensor or context; a tensor rented to
                another device or with held work.
            OperationError: the encoder refused the commands (it is finished).
        """
        from .interop.recording import record

        record(self, encoder, graph, inputs, outputs)

    def tensor_from_buffer(self, buffer, descriptor: Mapping, **kwargs) -> MLTensor:
        """Wrap the caller's ``wgpu.GPUBuffer`` as an MLTensor without a copy.

        A convenience beyond the spec. The tensor uses the buffer as it is (no zero fill);
        destroying the tensor does not destroy the buffer.

        Arguments:
            buffer (wgpu.GPUBuffer): of the context's device, unmapped, with usage
                STORAGE | COPY_SRC | COPY_DST and at least the tensor's byte length
                (padded to 4).
            descriptor (dict): as ``create_tensor``: ``data_type``, ``shape``, optional
                ``readable``, ``writable``, ``importable_to_webgpu``.

        Returns:
            MLTensor

        Raises:
            MLTypeError: not a buffer, another device, too small, missing usage, bad descriptor.
            InvalidStateError: the context is destroyed or the buffer is mapped.
        """
        from .interop.recording import tensor_from_buffer

        return tensor_from_buffer(self, buffer, descriptor, **kwargs)

    # ------------------------------------------------------------------ support
    # IDL: MLOpSupportLimits opSupportLimits();
    def op_support_limits(self) -> dict:
        """What this adapter supports: data types and ranks per operator and operand.

        Returns a dict in the shape of the spec's MLOpSupportLimits with snake_case keys:
        ``preferred_input_layout``, ``max_tensor_byte_length``, ``input``, ``constant``,
        ``output``, and one entry per operator mapping operand names to
        ``{"data_types": [...], "rank_range": {"min": int, "max": int}}``.
        """
        from .ops._registry import SUPPORT

        supported = set(self._supported_data_types)
        all_types = [d for d in _dtypes.DATA_TYPES if d in supported]
        rank = {"min": 0, "max": V.MAX_RANK}
        limits = {
            "preferred_input_layout": "nchw",
            "max_tensor_byte_length": self._max_tensor_bytes,
            "input": {"data_types": all_types, "rank_range": dict(rank)},
            "constant": {"data_types": all_types, "rank_range": dict(rank)},
            "output": {"data_types": all_types, "rank_range": dict(rank)},
        }
        for name, s in sorted(SUPPORT.items()):
            entry = {}
            for part in (s.operands, s.outputs):
                for operand, lim in part.items():
                    dts = [d for d in lim["data_types"] if d in supported
                           and (d not in ("int64", "uint64") or not s.int64_compute or "shader-int64" in self._features)]
                    entry[operand] = {"data_types": dts,
                                      "rank_range": {"min": lim["rank_range"][0], "max": lim["rank_range"][1]}}
            limits[name] = entry
        return limits


def _as_array(x, data_type):
    """Python scalars and lists become arrays of the input's dtype only when exactly representable."""
    if isinstance(x, (list, tuple, int, float)) and not isinstance(x, bool):
        arr = np.asarray(x)
        conv = arr.astype(_dtypes.info(data_type).numpy)
        if arr.dtype.kind in "iuf" and np.array_equal(conv.astype(arr.dtype), arr, equal_nan=True):
            return conv
    return x
