"""KeySegmenter: a stand-in segmenter for tests and benchmarks without a model (a colour key).

It has the segmenter interface the demo uses (``name``, ``input_size``, ``mask_size``,
``dtype``, ``record(encoder, model_input, model_output)``) and marks clearly red pixels as
person (``key_mask.wgsl`` beside this file), so the whole pipeline runs without WebNN.
The demo's kernels are rendered by the engine's template environment; this one too, with
this folder searched first and the demo's shaders (for ``_index.wgsl``) after it.
"""

from __future__ import annotations

from pathlib import Path

import wgpu

from webnn_gpu._kernels import render, workgroups
from webnn_gpu.demo.blur import SHADER_DIR, WORKGROUP_SIZE
from webnn_gpu.errors import MLTypeError

HERE = Path(__file__).resolve().parent


class KeySegmenter:
    """A colour key with the segmentation model's tensor interface.

    Arguments:
        device (wgpu.GPUDevice): the device.
        width, height (int): the tensors' spatial size; default 256 x 256.
        dtype ("float32" | "float16"): the tensors' element type.

    Raises:
        MLTypeError: a bad size or dtype.
    """

    name = "colour key (stand-in for tests)"

    def __init__(self, device: wgpu.GPUDevice, width: int = 256, height: int = 256, *,
                 dtype: str = "float32") -> None:
        if dtype not in ("float32", "float16"):
            raise MLTypeError(f"KeySegmenter: dtype must be 'float32' or 'float16', given {dtype!r}")
        for what, v in (("width", width), ("height", height)):
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise MLTypeError(f"KeySegmenter: {what} must be a positive int, given {v!r}")
        self.device = device
        self.input_size = self.mask_size = (width, height)
        self.dtype = dtype
        n = width * height
        self._words = n if dtype == "float32" else -(-n // 2)
        code = render("key_mask.wgsl", folders=(HERE, SHADER_DIR), n_pixels=n, n_words=self._words,
                      dtype=dtype, workgroup_size=WORKGROUP_SIZE)
        module = device.create_shader_module(label="key-segmenter", code=code)
        self._pipeline = device.create_compute_pipeline(
            label="key-segmenter", layout="auto", compute={"module": module, "entry_point": "main"}
        )
        self._groups: dict[tuple[wgpu.GPUBuffer, wgpu.GPUBuffer], wgpu.GPUBindGroup] = {}
        self._dispatch = workgroups(-(-self._words // WORKGROUP_SIZE), device.limits, "KeySegmenter")

    def record(self, encoder: wgpu.GPUCommandEncoder, model_input: wgpu.GPUBuffer,
               model_output: wgpu.GPUBuffer) -> None:
        """Record the mask computation (one compute pass) into ``encoder``."""
        key = (model_input, model_output)
        group = self._groups.get(key)
        if group is None:
            self._groups.clear()
            group = self._groups[key] = self.device.create_bind_group(
                layout=self._pipeline.get_bind_group_layout(0),
                entries=[
                    {"binding": 0, "resource": {"buffer": model_input}},
                    {"binding": 1, "resource": {"buffer": model_output}},
                ],
            )
        pass_ = encoder.begin_compute_pass(label="key-segmenter")
        pass_.set_pipeline(self._pipeline)
        pass_.set_bind_group(0, group)
        pass_.dispatch_workgroups(*self._dispatch)
        pass_.end()
