"""``onnx.backend.base.Backend`` over webnn-gpu, for ONNX's backend test suite.

``prepare(model)`` builds the graph on a default context; ``rep.run(inputs)`` computes it.
An input that the graph needs at load time (a Reshape's shape, a Slice's starts, a
Resize's sizes, an If's condition: ONNX's node tests feed those as graph inputs) is
fixed to the value given at ``run`` and the graph is built for that value; such graphs
are kept per value. Outputs of ONNX type bool come back as NumPy bool.

Example::

    import onnx, numpy as np
    from webnn_gpu.onnx import backend

    rep = backend.prepare(onnx.load("model.onnx"))
    outputs = rep.run([np.ones((1, 3, 224, 224), np.float32)])
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
from onnx.backend.base import Backend, BackendRep

from ..errors import NotSupportedError

__all__ = ["WebNNBackend", "WebNNRep", "prepare", "run_model", "run_node", "supports_device"]

_CONTEXT = None


def _context():
    global _CONTEXT
    if _CONTEXT is None:
        import webnn_gpu

        _CONTEXT = webnn_gpu.ml.create_context()
    return _CONTEXT


_NEEDS_KNOWN = re.compile(r"must be known at load time")


class WebNNRep(BackendRep):
    """A prepared model: built once per set of load-time input values."""

    def __init__(self, model, context, dtype: str = "float32") -> None:
        self.model = model
        self.context = context
        self.dtype = dtype
        inits = {t.name for t in model.graph.initializer}
        self.input_names = [i.name for i in model.graph.input if i.name not in inits]
        self.output_names = [o.name for o in model.graph.output]
        self.bool_outputs = {o.name for o in model.graph.output if o.type.tensor_type.elem_type == 9}
        self._fixed: list[str] | None = None
        self._built: dict[Any, Any] = {}
        try:
            self._built[()] = self._load({})
            self._fixed = []
        except NotSupportedError as exc:
            if not _NEEDS_KNOWN.search(str(exc)):
                raise

    def _load(self, known: dict):
        from . import load

        return load(self.model, self.context, dtype=self.dtype, known_inputs=known)

    def run(self, inputs, **kwargs):  # noqa: D401
        """Compute the model on ``inputs`` (a list in input order, or a dict)."""
        if isinstance(inputs, dict):
            feed = dict(inputs)
        else:
            if not isinstance(inputs, (list, tuple)):
                inputs = [inputs]
            feed = dict(zip(self.input_names, inputs))
        feed = {k: np.asarray(v) for k, v in feed.items()}
        if self._fixed is None:
            # every small integer or bool input, and every tiny one, may be one the graph needs at
            # load time (shapes, axes, scales, a pad value, a condition)
            self._fixed = [k for k, v in feed.items() if (v.dtype.kind in "iub" and v.size <= 64) or v.size <= 8]
        key = tuple((k, feed[k].tobytes(), feed[k].shape) for k in self._fixed)
        loaded = self._built.get(key)
        if loaded is None:
            loaded = self._load({k: feed[k] for k in self._fixed})
            self._built[key] = loaded
        arrays = {}
        for k, v in feed.items():
            if k not in loaded.inputs:
                continue
            dt = np.dtype(loaded.inputs[k]["data_type"])
            arrays[k] = np.array(v, dtype=dt, order="C")
        out = loaded.context.compute(loaded.graph, arrays) if loaded.inputs else _compute_no_inputs(loaded)
        result = []
        for name in self.output_names:
            value = out[name]
            if name in self.bool_outputs:
                value = value.astype(np.bool_)
            result.append(value)
        return result


def _compute_no_inputs(loaded):
    return loaded.context.compute(loaded.graph, {})


class WebNNBackend(Backend):
    """ONNX backend: webnn-gpu on the default adapter."""

    @classmethod
    def prepare(cls, model, device: str = "CPU", **kwargs) -> WebNNRep:
        super().prepare(model, device, **kwargs)
        edges = list(model.graph.input) + list(model.graph.output)
        kinds = {v.type.tensor_type.elem_type for v in edges}
        half = 10 in kinds
        if half and 1 in kinds:
            raise NotSupportedError("webnn_gpu.onnx.backend: the model has float and float16 inputs or outputs; "
                                    "the importer builds every float tensor in one float type")
        return WebNNRep(model, _context(), kwargs.get("dtype", "float16" if half else "float32"))

    @classmethod
    def run_model(cls, model, inputs, device: str = "CPU", **kwargs):
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node, inputs, device: str = "CPU", outputs_info=None, **kwargs):
        raise NotImplementedError("webnn_gpu.onnx.backend runs whole models (run_model), not single nodes")

    @classmethod
    def supports_device(cls, device: str) -> bool:
        # the device strings of onnx.backend are CPU and CUDA; the adapter is WebGPU's
        return device in ("CPU", "CUDA")


prepare = WebNNBackend.prepare
run_model = WebNNBackend.run_model
run_node = WebNNBackend.run_node
supports_device = WebNNBackend.supports_device
