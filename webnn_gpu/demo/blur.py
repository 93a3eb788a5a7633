"""The GPU side of the background-blur demo: WGSL passes around the segmentation model.

One :class:`BackgroundBlur` per frame size builds its pipelines and buffers once and
records, into a caller's ``wgpu.GPUCommandEncoder``:

1. ``preprocess``  the RGB8 frame -> the model input tensor (NHWC, bilinear, [0, 1]);
2. (the caller records the model between the passes, e.g. ``ctx.record(...)``);
3. ``upsample_mask``  the model's mask -> a frame-sized mask;
4. ``blur_down``, ``blur_h``, ``blur_v``  a Gaussian blur whose taps are weighted by
   (1 - mask), on a grid decimated by ``factor`` (1 = full resolution) so a strong blur
   stays cheap;
5. ``blend``  mask * original + (1 - mask) * blurred (upsampled bilinear), packed to RGB8.

The WGSL templates are in ``shaders/`` beside this file; each opens with its contract
(context variables, bindings, dispatch). Frames are the raw ``rgb24`` bytes FFmpeg reads
and writes, uploaded as u32 words, so no conversion happens on the CPU.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable, Literal, Mapping

import numpy as np
import wgpu

from webnn_gpu._kernels import render, workgroups
from webnn_gpu.errors import DataError, MLTypeError, NotSupportedError, OperationError

__all__ = [
    "BackgroundBlur",
    "gaussian_weights",
    "default_sigma",
    "default_factor",
    "render_shader",
    "SHADER_DIR",
    "BLUR_EPS",
    "WORKGROUP_SIZE",
]

ModelDType = Literal["float32", "float16"]

SHADER_DIR = Path(__file__).with_name("shaders")
WORKGROUP_SIZE = 64
#: EPS of blur.wgsl: how strongly a pixel's own colour stands in where its whole
#: neighbourhood is person (the blurred value's weight sum is in [0, 1]).
BLUR_EPS = 1e-3

_STORAGE = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST


def render_shader(name: str, **context: Any) -> str:
    """Render one WGSL template of ``shaders/`` (beside this file) with its context.

    The engine's template environment renders it (``webnn_gpu._kernels.render``).

    Arguments:
        name (str): the template file name, e.g. ``"blur.wgsl"``.
        **context: the variables the template's contract header lists.

    Returns:
        str: the WGSL source.

    Raises:
        jinja2.UndefinedError: a variable of the contract is missing.
    """
    return render(name, folders=SHADER_DIR, **context)


def _f(value: float) -> str:
    """A WGSL float literal for ``value`` (Python's repr always has a '.' or an 'e')."""
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"not a finite float literal: {value}")
    return repr(value)


def gaussian_weights(sigma: float) -> np.ndarray:
    """The normalised 1-D Gaussian the blur uses: radius ceil(3 sigma), weights summing to 1.

    Arguments:
        sigma (float): standard deviation in pixels, > 0.

    Returns:
        np.ndarray: float64 weights g(-R) .. g(R), 2R + 1 of them.

    Raises:
        MLTypeError: ``sigma`` is not a positive finite number.
    """
    if not (isinstance(sigma, (int, float)) and math.isfinite(sigma) and sigma > 0):
        raise MLTypeError(f"gaussian_weights: sigma must be a positive number, given {sigma!r}")
    radius = max(1, math.ceil(3.0 * sigma))
    k = np.arange(-radius, radius + 1, dtype=np.float64)
    g = np.exp(-0.5 * (k / sigma) ** 2)
    return g / g.sum()


def default_sigma(width: int, height: int) -> float:
    """The blur strength used when none is given: 2.5% of the frame's longer side, at least 2 px.

    Arguments:
        width, height (int): the frame size.

    Returns:
        float: sigma in pixels (32 at 1280x720, 4.4 at 176x144).
    """
    return max(2.0, 0.025 * max(width, height))


def default_factor(sigma: float) -> int:
    """The blur grid's decimation used when none is given: keeps the grid's sigma near 3.

    A Gaussian of sigma s on a grid decimated by F has sigma s / F there; the tap count
    (6 s / F + 1 per pass) then stays about 20 whatever the frame size.

    Arguments:
        sigma (float): the blur's sigma in frame pixels.

    Returns:
        int: F >= 1 (1 at sigma < 6: full resolution).
    """
    return max(1, int(sigma // 3))


def _check_size(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise MLTypeError(f"BackgroundBlur: {name} must be a positive int, given {value!r}")
    return int(value)


class BackgroundBlur:
    """Pipelines and buffers that blur the background of W x H frames (built once per size).

    Arguments:
        device (wgpu.GPUDevice): the device shared with the WebNN context.
        width, height (int): the frame size in pixels.
        model_width, model_height (int): the model input's spatial size. Default 256 x 256.
        mask_width, mask_height (int | None): the model output's spatial size; default the
            input's. The mask tensor is [1, mask_height, mask_width, 1].
        dtype ("float32" | "float16"): element type of the model's input and output tensors.
        sigma (float | None): Gaussian standard deviation in frame pixels; default
            :func:`default_sigma`.
        factor (int | None): decimation of the blur grid (1 = full resolution); default
            :func:`default_factor`. The grid's Gaussian has sigma / factor.
        label (str): prefix of the GPU objects' labels.

    Raises:
        MLTypeError: a bad size, dtype or sigma.
        NotSupportedError: a buffer exceeds the device's ``max-storage-buffer-binding-size``.
        OperationError: a template failed to compile (a bug; the message has the WGSL).

    The frame buffers hold the raw ``rgb24`` bytes (``ceil(3 * W * H / 4)`` u32 words):
    :meth:`upload` writes ``frame_buffer``; the result is in ``output_buffer``, the same layout.
    """

    def __init__(
        self,
        device: wgpu.GPUDevice,
        width: int,
        height: int,
        *,
        model_width: int = 256,
        model_height: int = 256,
        mask_width: int | None = None,
        mask_height: int | None = None,
        dtype: ModelDType = "float32",
        sigma: float | None = None,
        factor: int | None = None,
        label: str = "background-blur",
    ) -> None:
        self.device = device
        self.width = _check_size("width", width)
        self.height = _check_size("height", height)
        self.model_width = _check_size("model_width", model_width)
        self.model_height = _check_size("model_height", model_height)
        self.mask_width = _check_size("mask_width", model_width if mask_width is None else mask_width)
        self.mask_height = _check_size(
            "mask_height", model_height if mask_height is None else mask_height
        )
        if dtype not in ("float32", "float16"):
            raise MLTypeError(
                f"BackgroundBlur: dtype must be 'float32' or 'float16', given {dtype!r}"
            )
        self.dtype: ModelDType = dtype
        self.sigma = float(default_sigma(self.width, self.height) if sigma is None else sigma)
        if not (math.isfinite(self.sigma) and self.sigma > 0):
            raise MLTypeError(f"BackgroundBlur: sigma must be a positive number, given {sigma!r}")
        self.factor = _check_size("factor", default_factor(self.sigma) if factor is None else factor)
        self.low_width = -(-self.width // self.factor)
        self.low_height = -(-self.height // self.factor)
        self.weights = gaussian_weights(self.sigma / self.factor)
        self.radius = (len(self.weights) - 1) // 2
        self.label = label

        n_pixels = self.width * self.height
        self.frame_nbytes = 3 * n_pixels
        self.frame_words = -(-self.frame_nbytes // 4)
        itemsize = 4 if dtype == "float32" else 2
        n_in = self.model_width * self.model_height * 3
        n_out = self.mask_width * self.mask_height
        #: byte sizes the model input and output buffers must have (at least)
        self.model_input_nbytes = -(-n_in * itemsize // 4) * 4
        self.model_output_nbytes = -(-n_out * itemsize // 4) * 4

        limits = device.limits
        max_binding = int(limits["max-storage-buffer-binding-size"])
        n_low = self.low_width * self.low_height
        largest = max(4 * n_pixels, 4 * self.frame_words, 16 * n_low)  # mask / frame / grid
        if largest > max_binding:
            raise NotSupportedError(
                f"BackgroundBlur: a {self.width}x{self.height} frame needs a {largest}-byte "
                f"buffer, more than the device's max-storage-buffer-binding-size "
                f"({max_binding}); use a smaller --size"
            )

        def buffer(name: str, size: int) -> wgpu.GPUBuffer:
            return device.create_buffer(label=f"{label}:{name}", size=size, usage=_STORAGE)

        self.frame_buffer = buffer("frame", 4 * self.frame_words)
        self.mask_buffer = buffer("mask", 4 * n_pixels)
        self.src_buffer = buffer("blur-src", 16 * n_low)
        self.plain_buffer = buffer("blur-plain", 16 * n_low)
        self.tmp_buffer = buffer("blur-tmp", 16 * n_low)
        self.blurred_buffer = buffer("blurred", 16 * n_low)
        self.output_buffer = buffer("output", 4 * self.frame_words)

        common = {"workgroup_size": WORKGROUP_SIZE, "dtype": dtype}
        self._pre = self._pipeline(
            "preprocess.wgsl",
            "main",
            frame_width=self.width,
            frame_height=self.height,
            model_width=self.model_width,
            model_height=self.model_height,
            n_elements=n_in,
            n_words=n_in if dtype == "float32" else -(-n_in // 2),
            scale_x=_f(self.width / self.model_width),
            scale_y=_f(self.height / self.model_height),
            **common,
        )
        self._pre_words = n_in if dtype == "float32" else -(-n_in // 2)
        self._up = self._pipeline(
            "upsample_mask.wgsl",
            "main",
            frame_width=self.width,
            frame_height=self.height,
            mask_width=self.mask_width,
            mask_height=self.mask_height,
            scale_x=_f(self.mask_width / self.width),
            scale_y=_f(self.mask_height / self.height),
            **common,
        )
        blur_ctx = dict(
            frame_width=self.width,
            frame_height=self.height,
            factor=self.factor,
            low_width=self.low_width,
            low_height=self.low_height,
            radius=self.radius,
            taps=len(self.weights),
            weights=[_f(w) for w in self.weights],
            eps=_f(BLUR_EPS),
            workgroup_size=WORKGROUP_SIZE,
        )
        blur_module = self._module("blur.wgsl", blur_ctx)
        self._blur_down = self._pipeline_from(blur_module, "blur.wgsl", "blur_down")
        self._blur_h = self._pipeline_from(blur_module, "blur.wgsl", "blur_h")
        self._blur_v = self._pipeline_from(blur_module, "blur.wgsl", "blur_v")
        self._blend = self._pipeline(
            "blend.wgsl",
            "main",
            frame_width=self.width,
            low_width=self.low_width,
            low_height=self.low_height,
            inv_factor=_f(1.0 / self.factor),
            n_bytes=self.frame_nbytes,
            n_words=self.frame_words,
            workgroup_size=WORKGROUP_SIZE,
        )

        # Bind groups that use only our own buffers are made once; those that use the
        # caller's model buffers are cached per buffer (the demo passes the same ones).
        self._bg_blur_down = self._bind(
            self._blur_down, self.frame_buffer, self.mask_buffer, self.src_buffer, self.plain_buffer
        )
        self._bg_blur_h = self._bind_map(self._blur_h, {2: self.src_buffer, 4: self.tmp_buffer})
        self._bg_blur_v = self._bind_map(
            self._blur_v, {3: self.plain_buffer, 4: self.tmp_buffer, 5: self.blurred_buffer}
        )
        self._bg_blend = self._bind(
            self._blend, self.frame_buffer, self.mask_buffer, self.blurred_buffer, self.output_buffer
        )
        self._bg_pre: dict[wgpu.GPUBuffer, wgpu.GPUBindGroup] = {}
        self._bg_up: dict[wgpu.GPUBuffer, wgpu.GPUBindGroup] = {}

    # -- building ---------------------------------------------------------------------------

    def _module(self, name: str, context: Mapping[str, Any]) -> tuple[wgpu.GPUShaderModule, str]:
        code = render_shader(name, **context)
        try:
            module = self.device.create_shader_module(label=f"{self.label}:{name}", code=code)
        except Exception as exc:  # a bug in our template: say which and show the WGSL
            excerpt = "\n".join(code.splitlines()[:60])
            raise OperationError(
                f"BackgroundBlur: shader {name} failed to compile: {exc}\n--- WGSL ---\n{excerpt}"
            ) from exc
        return module, code

    def _pipeline_from(
        self, module: tuple[wgpu.GPUShaderModule, str], name: str, entry: str
    ) -> wgpu.GPUComputePipeline:
        try:
            return self.device.create_compute_pipeline(
                label=f"{self.label}:{name}:{entry}",
                layout="auto",
                compute={"module": module[0], "entry_point": entry},
            )
        except Exception as exc:
            raise OperationError(
                f"BackgroundBlur: pipeline {name}:{entry} could not be created: {exc}"
            ) from exc

    def _pipeline(self, name: str, entry: str, **context: Any) -> wgpu.GPUComputePipeline:
        return self._pipeline_from(self._module(name, context), name, entry)

    def _bind_map(
        self, pipeline: wgpu.GPUComputePipeline, buffers: Mapping[int, wgpu.GPUBuffer]
    ) -> wgpu.GPUBindGroup:
        return self.device.create_bind_group(
            label=f"{pipeline.label}:bind",
            layout=pipeline.get_bind_group_layout(0),
            entries=[
                {"binding": i, "resource": {"buffer": b, "offset": 0, "size": b.size}}
                for i, b in buffers.items()
            ],
        )

    def _bind(self, pipeline: wgpu.GPUComputePipeline, *buffers: wgpu.GPUBuffer) -> wgpu.GPUBindGroup:
        return self._bind_map(pipeline, dict(enumerate(buffers)))

    def _check_model_buffer(self, what: str, buffer: Any, nbytes: int) -> wgpu.GPUBuffer:
        if not isinstance(buffer, wgpu.GPUBuffer):
            raise MLTypeError(
                f"BackgroundBlur: {what} must be a wgpu.GPUBuffer, given {type(buffer).__name__}"
            )
        if buffer.size < nbytes:
            raise MLTypeError(
                f"BackgroundBlur: {what} must hold at least {nbytes} bytes "
                f"({self.dtype}), given a buffer of {buffer.size}"
            )
        if not buffer.usage & wgpu.BufferUsage.STORAGE:
            raise MLTypeError(f"BackgroundBlur: {what} needs STORAGE usage")
        return buffer

    def _cached_bind(
        self,
        cache: dict[wgpu.GPUBuffer, wgpu.GPUBindGroup],
        pipeline: wgpu.GPUComputePipeline,
        buffers: Mapping[int, wgpu.GPUBuffer],
        key: wgpu.GPUBuffer,
    ) -> wgpu.GPUBindGroup:
        group = cache.get(key)
        if group is None:
            if len(cache) >= 8:  # a caller that rotates buffers: keep the cache small
                cache.clear()
            group = cache[key] = self._bind_map(pipeline, buffers)
        return group

    def _dispatch(
        self,
        pass_: wgpu.GPUComputePassEncoder,
        pipeline: wgpu.GPUComputePipeline,
        group: wgpu.GPUBindGroup,
        n: int,
    ) -> None:
        groups = workgroups(-(-n // WORKGROUP_SIZE), self.device.limits, "BackgroundBlur")
        pass_.set_pipeline(pipeline)
        pass_.set_bind_group(0, group)
        pass_.dispatch_workgroups(*groups)

    # -- per frame -----------------------------------------------------------------------------

    def upload(self, frame: np.ndarray | bytes | bytearray | memoryview) -> None:
        """Queue a write of one frame (``rgb24`` bytes, H x W x 3 uint8) into ``frame_buffer``.

        Arguments:
            frame: H x W x 3 ``uint8`` array, or ``3 * W * H`` bytes.

        Raises:
            DataError: the frame has the wrong size or element type.
        """
        if isinstance(frame, np.ndarray):
            if frame.dtype != np.uint8 or frame.shape != (self.height, self.width, 3):
                raise DataError(
                    f"BackgroundBlur.upload: frame must be uint8 of shape "
                    f"({self.height}, {self.width}, 3), given {frame.dtype} {frame.shape}"
                )
            data = np.ascontiguousarray(frame).reshape(-1)
        else:
            data = np.frombuffer(frame, dtype=np.uint8)
            if data.size != self.frame_nbytes:
                raise DataError(
                    f"BackgroundBlur.upload: frame must be {self.frame_nbytes} bytes "
                    f"({self.width}x{self.height} rgb24), given {data.size}"
                )
        if self.frame_nbytes % 4:
            padded = np.zeros(4 * self.frame_words, dtype=np.uint8)
            padded[: self.frame_nbytes] = data
            data = padded
        self.device.queue.write_buffer(self.frame_buffer, 0, data)

    def record_preprocess(
        self,
        encoder: wgpu.GPUCommandEncoder,
        model_input: wgpu.GPUBuffer,
        *,
        timestamp_writes: Mapping[str, Any] | None = None,
    ) -> None:
        """Record the frame -> model input pass (resize + normalise) into ``encoder``.

        Arguments:
            encoder (wgpu.GPUCommandEncoder): an encoder of ``device``.
            model_input (wgpu.GPUBuffer): the model input tensor's buffer, NHWC
                [1, model_height, model_width, 3] of ``dtype``, with STORAGE usage.
            timestamp_writes (dict | None): passed to ``begin_compute_pass``.

        Raises:
            MLTypeError: ``model_input`` is not a large enough STORAGE buffer.
        """
        model_input = self._check_model_buffer("model_input", model_input, self.model_input_nbytes)
        group = self._cached_bind(
            self._bg_pre, self._pre, {0: self.frame_buffer, 1: model_input}, model_input
        )
        kwargs = {"timestamp_writes": dict(timestamp_writes)} if timestamp_writes else {}
        pass_ = encoder.begin_compute_pass(label=f"{self.label}:preprocess", **kwargs)
        self._dispatch(pass_, self._pre, group, self._pre_words)
        pass_.end()

    def record_postprocess(
        self,
        encoder: wgpu.GPUCommandEncoder,
        model_output: wgpu.GPUBuffer,
        *,
        timestamp_writes: Mapping[str, Any] | None = None,
    ) -> None:
        """Record mask upsample, weighted blur and blend (one compute pass, 5 dispatches).

        Arguments:
            encoder (wgpu.GPUCommandEncoder): an encoder of ``device``.
            model_output (wgpu.GPUBuffer): the mask tensor's buffer,
                [1, mask_height, mask_width, 1] of ``dtype``, with STORAGE usage.
            timestamp_writes (dict | None): passed to ``begin_compute_pass``.

        Raises:
            MLTypeError: ``model_output`` is not a large enough STORAGE buffer.
        """
        model_output = self._check_model_buffer(
            "model_output", model_output, self.model_output_nbytes
        )
        up = self._cached_bind(
            self._bg_up, self._up, {0: model_output, 1: self.mask_buffer}, model_output
        )
        n_pixels = self.width * self.height
        kwargs = {"timestamp_writes": dict(timestamp_writes)} if timestamp_writes else {}
        pass_ = encoder.begin_compute_pass(label=f"{self.label}:postprocess", **kwargs)
        self._dispatch(pass_, self._up, up, n_pixels)
        n_low = self.low_width * self.low_height
        self._dispatch(pass_, self._blur_down, self._bg_blur_down, n_low)
        self._dispatch(pass_, self._blur_h, self._bg_blur_h, n_low)
        self._dispatch(pass_, self._blur_v, self._bg_blur_v, n_low)
        self._dispatch(pass_, self._blend, self._bg_blend, -(-self.frame_words // 3))
        pass_.end()

    def record(
        self,
        encoder: wgpu.GPUCommandEncoder,
        model_input: wgpu.GPUBuffer,
        model_output: wgpu.GPUBuffer,
        inference: Callable[[wgpu.GPUCommandEncoder], None] | None,
        *,
        preprocess_timestamps: Mapping[str, Any] | None = None,
        postprocess_timestamps: Mapping[str, Any] | None = None,
    ) -> None:
        """Record every pass of one frame into ``encoder``: preprocess, model, postprocess.

        Call :meth:`upload` first; after the encoder is submitted ``output_buffer`` holds
        the blurred frame.

        Arguments:
            encoder (wgpu.GPUCommandEncoder): an encoder of ``device``.
            model_input, model_output (wgpu.GPUBuffer): the model's input and mask buffers.
            inference (callable | None): ``inference(encoder)`` records the model between the
                passes (e.g. ``lambda enc: ctx.record(enc, graph, inputs=..., outputs=...)``);
                None when the caller records it some other way.
            preprocess_timestamps, postprocess_timestamps (dict | None): ``timestamp_writes``
                of the two passes.

        Raises:
            MLTypeError: a model buffer is not a large enough STORAGE buffer.
        """
        self.record_preprocess(encoder, model_input, timestamp_writes=preprocess_timestamps)
        if inference is not None:
            inference(encoder)
        self.record_postprocess(encoder, model_output, timestamp_writes=postprocess_timestamps)

