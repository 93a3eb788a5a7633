"""The background-blur pipeline of the demo (``webnn-gpu blur``, ``make demo``).

Per frame, on one wgpu device shared with the WebNN context, in one ``queue.submit``:

    upload (queue.write_buffer of the rgb24 bytes)
      -> preprocess (WGSL: resize + normalise into the model's input tensor)
      -> inference (WebNN: the MediaPipe selfie segmenter, recorded with ctx.record)
      -> postprocess (WGSL: mask upsample, mask-weighted blur, blend)
      -> copy into a MAP_READ staging buffer; map_async

and ``in_flight`` (2) frames are kept in flight: frame N+1 is uploaded and submitted
before frame N is read back, so the CPU (decode, readback, encode) overlaps the GPU.
See docs/demo.md.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Protocol

import numpy as np
import wgpu

from .._timeline import _READ_AFTER_COPY
from .blur import BackgroundBlur, ModelDType

__all__ = [
    "Segmenter",
    "WebNNSegmenter",
    "BlurPipeline",
    "RunStats",
    "process_video",
    "create_device",
    "load_segmenter",
]

#: the stages timed per frame, in pipeline order ("(GPU)" ones by timestamp queries)
STAGES = ("decode", "upload", "preprocess", "inference", "postprocess", "readback", "encode")
_GPU_STAGES = ("preprocess", "inference", "postprocess")
#: features the demo and the WebNN engine can use, requested when the adapter has them
_FEATURES = ("shader-f16", "timestamp-query", "subgroup", "shader-int64")
_LIMITS = (
    "max-buffer-size",
    "max-storage-buffer-binding-size",
    "max-storage-buffers-per-shader-stage",
    "max-compute-workgroup-storage-size",
    "max-compute-invocations-per-workgroup",
    "max-compute-workgroup-size-x",
    "max-compute-workgroup-size-y",
    "max-compute-workgroup-size-z",
)


class Segmenter(Protocol):
    """What the pipeline needs of a segmentation model.

    ``input_size`` and ``mask_size`` are (width, height) of the NHWC input [1, h, w, 3] and
    of the mask [1, h, w, 1]; ``dtype`` is their element type; ``record`` records the
    model into the caller's encoder, reading ``model_input`` and writing ``model_output``.
    """

    name: str
    input_size: tuple[int, int]
    mask_size: tuple[int, int]
    dtype: ModelDType

    def record(
        self, encoder: wgpu.GPUCommandEncoder, model_input: wgpu.GPUBuffer,
        model_output: wgpu.GPUBuffer,
    ) -> None: ...


class WebNNSegmenter:
    """A segmentation model loaded into WebNN, recorded into the demo's command encoder.

    Arguments:
        ctx: the ``MLContext`` (created on the demo's device).
        model: the ``LoadedModel`` from ``webnn_gpu.tflite.load`` (``.graph``, ``.inputs``,
            ``.outputs``: name -> {"data_type", "shape"}).
        name (str): for the report.

    Raises:
        ValueError: the model is not an image segmenter: one NHWC input [1, h, w, 3] and a
            mask output [1, h, w, 1] (or [1, h, w]), both float32 or float16.
    """

    def __init__(self, ctx: Any, model: Any, name: str = "model") -> None:
        self.ctx = ctx
        self.graph = model.graph
        self.name = name
        if len(model.inputs) != 1:
            raise ValueError(f"segmenter {name}: expected 1 input, the model has {list(model.inputs)}")
        (self.input_name, desc_in), = model.inputs.items()
        shape_in = list(desc_in["shape"])
        if len(shape_in) != 4 or shape_in[0] != 1 or shape_in[3] != 3:
            raise ValueError(f"segmenter {name}: input {self.input_name!r} must be NHWC "
                             f"[1, h, w, 3], given {shape_in}")
        masks = [
            (k, d) for k, d in model.outputs.items()
            if len(d["shape"]) in (3, 4) and d["shape"][0] == 1
            and (len(d["shape"]) == 3 or d["shape"][3] == 1)
        ]
        if len(masks) != 1:
            shapes = {k: list(d["shape"]) for k, d in model.outputs.items()}
            raise ValueError(f"segmenter {name}: expected one mask output [1, h, w, 1], the "
                             f"model has {shapes}")
        self.output_name, desc_out = masks[0]
        self._other_outputs = [k for k in model.outputs if k != self.output_name]
        dtype = desc_in["data_type"]
        if dtype not in ("float32", "float16") or desc_out["data_type"] != dtype:
            raise ValueError(f"segmenter {name}: input and mask must both be float32 or float16, "
                             f"given {dtype} and {desc_out['data_type']}")
        self.dtype: ModelDType = dtype
        self.input_size = (int(shape_in[2]), int(shape_in[1]))
        self.mask_size = (int(desc_out["shape"][2]), int(desc_out["shape"][1]))
        self._extra: dict[str, wgpu.GPUBuffer] = {}
        for k in self._other_outputs:  # outputs the demo does not use still need a home
            d = model.outputs[k]
            nbytes = int(np.prod(d["shape"])) * np.dtype(d["data_type"]).itemsize
            self._extra[k] = ctx.device.create_buffer(
                label=f"{name}:{k}", size=max(4, -(-nbytes // 4) * 4),
                usage=wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC,
            )

    def record(
        self, encoder: wgpu.GPUCommandEncoder, model_input: wgpu.GPUBuffer,
        model_output: wgpu.GPUBuffer,
    ) -> None:
        """Record the model's kernels into ``encoder`` (``ctx.record``)."""
        outputs = {self.output_name: model_output, **self._extra}
        self.ctx.record(encoder, self.graph, inputs={self.input_name: model_input}, outputs=outputs)


def create_device(adapter: wgpu.GPUAdapter | None = None) -> wgpu.GPUDevice:
    """A wgpu device for the demo and the WebNN context, with the adapter's useful features.

    Requests ``shader-f16``, ``timestamp-query``, ``subgroup`` and ``shader-int64`` when the
    adapter has them, and the adapter's own buffer and workgroup limits.

    Arguments:
        adapter (wgpu.GPUAdapter | None): the adapter to use; default the high-performance
            one (``webnn_gpu.ray.select_adapter`` picks one per Ray actor).

    Raises:
        RuntimeError: no WebGPU adapter (``make gpu`` installs Mesa's lavapipe).
    """
    if adapter is None:
        adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
    if adapter is None:
        raise RuntimeError("no WebGPU adapter found; run `make gpu` to install Mesa's lavapipe")
    features = [f for f in _FEATURES if f in adapter.features]
    limits = {k: adapter.limits[k] for k in _LIMITS if k in adapter.limits}
    return adapter.request_device_sync(
        label="webnn-gpu demo", required_features=features, required_limits=limits
    )


def load_segmenter(
    device: wgpu.GPUDevice, model: str | Path | bytes, dtype: str, *, name: str | None = None
) -> WebNNSegmenter:
    """Load a segmentation model (any file ``webnn_gpu.load`` reads) into a context on ``device``.

    Arguments:
        device (wgpu.GPUDevice): the demo's device (the context shares it).
        model (str | Path | bytes): the model file (e.g. ``.tflite``), or its bytes.
        dtype ("float32" | "float16"): the model's compute type.
        name (str | None): for the report; default the file name (``"model"`` for bytes).

    Returns:
        WebNNSegmenter: ready to record.

    Raises:
        ModuleNotFoundError: this build has no loader for the model.
        ValueError: the model is not an image segmenter.
    """
    import webnn_gpu as webnn

    ctx = webnn.ml.create_context(device)
    source = bytes(model) if isinstance(model, (bytes, bytearray)) else Path(model)
    loaded = webnn.load(source, ctx, dtype=dtype)
    if name is None:
        name = "model" if isinstance(model, (bytes, bytearray)) else Path(model).name
    return WebNNSegmenter(ctx, loaded, name=name)


# -- the pipeline ---------------------------------------------------------------------------


class BlurPipeline:
    """Frames in, blurred frames out, with ``in_flight`` frames on the GPU at once.

    Arguments:
        device (wgpu.GPUDevice): the device of the segmenter.
        width, height (int): the frame size.
        segmenter (Segmenter): the model (``WebNNSegmenter`` or a stand-in).
        sigma (float | None), factor (int | None): the blur (see ``BackgroundBlur``).
        in_flight (int): frames submitted before the oldest is read back (>= 1); each has
            its own MAP_READ staging buffer.

    ``submit(frame)`` uploads and submits a frame and returns a ticket; ``collect(ticket)``
    waits for that frame and returns it blurred. Tickets must be collected in order, and at
    most ``in_flight`` may be outstanding. GPU stage times come from timestamp queries when
    the device has ``timestamp-query``.
    """

    def __init__(
        self,
        device: wgpu.GPUDevice,
        width: int,
        height: int,
        segmenter: Segmenter,
        *,
        sigma: float | None = None,
        factor: int | None = None,
        in_flight: int = 2,
    ) -> None:
        if in_flight < 1:
            raise ValueError(f"BlurPipeline: in_flight must be >= 1, given {in_flight}")
        self.device = device
        self.segmenter = segmenter
        self.width, self.height = width, height
        (mw, mh), (kw, kh) = segmenter.input_size, segmenter.mask_size
        self.blur = BackgroundBlur(
            device, width, height, model_width=mw, model_height=mh, mask_width=kw,
            mask_height=kh, dtype=segmenter.dtype, sigma=sigma, factor=factor,
        )
        usage = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST
        self.model_input = device.create_buffer(
            label="demo:model-input", size=self.blur.model_input_nbytes, usage=usage
        )
        self.model_output = device.create_buffer(
            label="demo:model-output", size=self.blur.model_output_nbytes, usage=usage
        )
        self.in_flight = in_flight
        self._frame_bytes = 4 * self.blur.frame_words
        self._ts_offset = -(-self._frame_bytes // 8) * 8
        self.timestamps = "timestamp-query" in device.features
        staging_size = self._ts_offset + (32 if self.timestamps else 0)
        self._staging = [
            device.create_buffer(
                label=f"demo:readback{i}", size=staging_size,
                usage=wgpu.BufferUsage.MAP_READ | wgpu.BufferUsage.COPY_DST,
            )
            for i in range(in_flight)
        ]
        self._pending: deque[tuple[int, Any]] = deque()
        self._next = 0
        if self.timestamps:
            self._queries = device.create_query_set(
                label="demo:timestamps", type="timestamp", count=4 * in_flight
            )
            self._resolve = device.create_buffer(
                label="demo:timestamps-resolve", size=256 * in_flight,
                usage=wgpu.BufferUsage.QUERY_RESOLVE | wgpu.BufferUsage.COPY_SRC,
            )

    def submit(self, frame: np.ndarray) -> int:
        """Upload one frame and submit all of its GPU work; returns its ticket.

        Arguments:
            frame (np.ndarray): H x W x 3 ``uint8``.

        Returns:
            int: the ticket to pass to :meth:`collect`.

        Raises:
            RuntimeError: ``in_flight`` frames are already outstanding.
            DataError: the frame has the wrong shape or type.
        """
        if len(self._pending) >= self.in_flight:
            raise RuntimeError(
                f"BlurPipeline.submit: {self.in_flight} frames are in flight; collect one first"
            )
        ticket = self._next
        slot = ticket % self.in_flight
        t0 = time.perf_counter()
        self.blur.upload(frame)
        t1 = time.perf_counter()
        encoder = self.device.create_command_encoder(label=f"demo:frame{ticket}")
        pre = post = None
        if self.timestamps:
            q = 4 * slot
            pre = {"query_set": self._queries, "beginning_of_pass_write_index": q,
                   "end_of_pass_write_index": q + 1}
            post = {"query_set": self._queries, "beginning_of_pass_write_index": q + 2,
                    "end_of_pass_write_index": q + 3}
        self.blur.record(
            encoder, self.model_input, self.model_output,
            lambda enc: self.segmenter.record(enc, self.model_input, self.model_output),
            preprocess_timestamps=pre, postprocess_timestamps=post,
        )
        staging = self._staging[slot]
        encoder.copy_buffer_to_buffer(self.blur.output_buffer, 0, staging, 0, self._frame_bytes)
        if self.timestamps:
            encoder.resolve_query_set(self._queries, 4 * slot, 4, self._resolve, 256 * slot)
            encoder.copy_buffer_to_buffer(self._resolve, 256 * slot, staging, self._ts_offset, 32)
        self.device.queue.submit([encoder.finish()])
        promise = staging.map_async(_READ_AFTER_COPY)  # the copy above fills it
        self._pending.append((ticket, promise))
        self._next += 1
        self.last_submit_times = {"upload": t1 - t0, "record": time.perf_counter() - t1}
        return ticket

    def collect(self, ticket: int, out: np.ndarray | None = None) -> tuple[np.ndarray, dict[str, float]]:
        """Wait for a submitted frame and return it blurred, with its GPU stage times.

        Arguments:
            ticket (int): from :meth:`submit`; the oldest outstanding one.
            out (np.ndarray | None): an H x W x 3 ``uint8`` array to fill; default a new one.

        Returns:
            tuple[np.ndarray, dict[str, float]]: the frame, and seconds per GPU stage
            (``preprocess``, ``inference``, ``postprocess``; empty without timestamps).

        Raises:
            RuntimeError: ``ticket`` is not the oldest outstanding frame.
        """
        if not self._pending or self._pending[0][0] != ticket:
            raise RuntimeError(
                f"BlurPipeline.collect: ticket {ticket} is not the oldest frame in flight "
                f"({[t for t, _ in self._pending]})"
            )
        _, promise = self._pending.popleft()
        promise.sync_wait()
        staging = self._staging[ticket % self.in_flight]
        if out is None:
            out = np.empty((self.height, self.width, 3), np.uint8)
        n = 3 * self.width * self.height
        data = staging.read_mapped(0, self._frame_bytes, copy=False)
        out.reshape(-1)[:] = np.frombuffer(data, np.uint8, count=n)
        times: dict[str, float] = {}
        if self.timestamps:
            ts = np.frombuffer(staging.read_mapped(self._ts_offset, 32, copy=False), np.uint64)
            t = [int(v) for v in ts]  # nanoseconds
            if t[0] <= t[1] <= t[2] <= t[3]:
                times = {"preprocess": (t[1] - t[0]) * 1e-9, "inference": (t[2] - t[1]) * 1e-9,
                         "postprocess": (t[3] - t[2]) * 1e-9}
        staging.unmap()
        return out, times

    @property
    def outstanding(self) -> int:
        """How many submitted frames are not collected yet."""
        return len(self._pending)


@dataclass
class RunStats:
    """What :func:`process_video` did: frames, wall time and seconds per stage (summed)."""

    frames: int = 0
    seconds: float = 0.0
    stages: dict[str, float] = field(default_factory=lambda: {s: 0.0 for s in STAGES})
    gpu_timed_frames: int = 0

    @property
    def fps(self) -> float:
        """Frames per second over the whole run."""
        return self.frames / self.seconds if self.seconds > 0 else 0.0

    def report(self) -> str:
        """A table of the stages: total ms and ms per frame."""
        lines = [f"{self.frames} frames in {self.seconds:.2f} s = {self.fps:.1f} fps",
                 f"  {'stage':<22}{'total ms':>10}{'ms/frame':>10}"]
        for s in STAGES:
            label = s + (" (GPU)" if s in _GPU_STAGES else "")
            if s in _GPU_STAGES and not self.gpu_timed_frames:
                lines.append(f"  {label:<22}{'n/a':>10}{'n/a':>10}   (no timestamp-query)")
                continue
            n = self.gpu_timed_frames if s in _GPU_STAGES else self.frames
            total = self.stages[s] * 1e3
            lines.append(f"  {label:<22}{total:>10.1f}{total / max(n, 1):>10.2f}")
        return "\n".join(lines)


def process_video(
    frames: Iterable[np.ndarray],
    pipeline: BlurPipeline,
    sink: Callable[[np.ndarray], None],
    *,
    max_frames: int | None = None,
    on_frame: Callable[[int, np.ndarray, np.ndarray], None] | None = None,
    progress: Any = None,
) -> RunStats:
    """Run frames through ``pipeline`` with frames in flight, passing results to ``sink``.

    Arguments:
        frames (Iterable[np.ndarray]): H x W x 3 ``uint8`` frames.
        pipeline (BlurPipeline): the GPU pipeline.
        sink (callable): ``sink(blurred)`` for each frame in order (e.g. ``writer.write``);
            timed as the "encode" stage.
        max_frames (int | None): stop after this many frames.
        on_frame (callable | None): ``on_frame(index, original, blurred)`` after the sink
            (snapshot, preview); not timed.
        progress: a tqdm-like object with ``update(n)``, or None.

    Returns:
        RunStats: frames, wall time and per-stage times.
    """
    stats = RunStats()
    in_flight: deque[tuple[int, np.ndarray]] = deque()  # (ticket, original frame)
    out = np.empty((pipeline.height, pipeline.width, 3), np.uint8)
    index = 0
    start = time.perf_counter()

    def drain_one() -> None:
        nonlocal index
        t0 = time.perf_counter()
        ticket, original = in_flight.popleft()
        blurred, gpu = pipeline.collect(ticket, out)
        t1 = time.perf_counter()
        sink(blurred)
        t2 = time.perf_counter()
        stats.stages["readback"] += t1 - t0
        stats.stages["encode"] += t2 - t1
        if gpu:
            stats.gpu_timed_frames += 1
            for k, v in gpu.items():
                stats.stages[k] += v
        stats.frames += 1
        if on_frame is not None:
            on_frame(index, original, blurred)
        if progress is not None:
            progress.update(1)
        index += 1

    iterator: Iterator[np.ndarray] = iter(frames)
    submitted = 0
    try:
        while max_frames is None or submitted < max_frames:
            t0 = time.perf_counter()
            frame = next(iterator, None)
            stats.stages["decode"] += time.perf_counter() - t0
            if frame is None:
                break
            if pipeline.outstanding >= pipeline.in_flight:
                drain_one()
            ticket = pipeline.submit(frame)
            stats.stages["upload"] += pipeline.last_submit_times["upload"]
            in_flight.append((ticket, frame))
            submitted += 1
    except KeyboardInterrupt:
        # Ctrl-C (e.g. ending a camera run): the frames in flight still go to the sink
        while in_flight:
            drain_one()
        stats.seconds = time.perf_counter() - start
        raise
    except BaseException:
        # something failed (the sink, the GPU): unmap the staging buffers, drop the frames
        while in_flight:
            ticket, _ = in_flight.popleft()
            try:
                pipeline.collect(ticket)
            except Exception:  # the original error is the one to report
                pass
        raise
    while in_flight:
        drain_one()
    stats.seconds = time.perf_counter() - start
    return stats
