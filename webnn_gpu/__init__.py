"""webnn-gpu: the W3C WebNN API on any GPU through WebGPU (wgpu-py).

Quick use::

    import webnn_gpu as webnn
    ctx = webnn.ml.create_context()
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [4]})
    graph = b.build({"y": b.relu(x)})
    ctx.compute(graph, {"x": np.array([-1, 0, 1, 2], np.float32)})

See README.md for the API, the execution models and WebGPU interop.
"""

from __future__ import annotations

import os as _os

_os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")  # silences a Mesa warning on headless machines

from . import errors  # noqa: E402
from .builder import MLGraphBuilder, MLOperand  # noqa: E402
from .context import ML, MLContext, ml  # noqa: E402
from .errors import (  # noqa: E402
    DataError,
    InvalidStateError,
    MLTypeError,
    NotSupportedError,
    OperationError,
    WebNNError,
)
from .graph import MLGraph  # noqa: E402
from .tensor import MLTensor  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "ml",
    "ML",
    "MLContext",
    "MLGraphBuilder",
    "MLOperand",
    "MLGraph",
    "MLTensor",
    "errors",
    "WebNNError",
    "MLTypeError",
    "DataError",
    "InvalidStateError",
    "OperationError",
    "NotSupportedError",
    "load",
]


def load(source, context: MLContext, **options):
    """Load a model file (TFLite flatbuffer or ONNX protobuf) into an MLGraph built with MLGraphBuilder.

    The format is told by content, not by file name: a TFLite flatbuffer carries the
    identifier ``TFL3`` at bytes 4-8; anything else that parses as an ONNX ModelProto is
    read as ONNX. A model loaded before with the same options starts making the pipelines of
    its last build while it is read and converted (``webnn_gpu._kernels.ModelPrefetch``); a
    TFLite model is built from its lowered plan kept on disk (``webnn_gpu._plancache``).

    Arguments:
        source (str | os.PathLike | bytes): the model file or its bytes.
        context (MLContext): the context to build for.
        options: loader options: ``dtype="float16"``; for TFLite also ``input_shapes={...}`` (sizes of
            dynamic dimensions, see :func:`webnn_gpu.tflite.load`); for ONNX also ``dims={...}`` (sizes of
            symbolic dimensions) and ``custom_ops={...}`` (see :func:`webnn_gpu.onnx.load`).

    Returns:
        webnn_gpu.tflite.LoadedModel: the graph with its input and output descriptors.

    Raises:
        DataError: neither a TFLite nor an ONNX model.
        NotSupportedError: operators the loader cannot map (all named in the message).
    """
    from ._kernels import ModelPrefetch

    prefetch = ModelPrefetch.start(context, source, options)  # the pipelines of its last load
    loaded = None
    try:
        loaded = _load(source, context, **options)
        return loaded
    finally:
        prefetch.finish(loaded)


def _load(source, context: MLContext, **options):
    if isinstance(source, (bytes, bytearray, memoryview)):
        head = bytes(source[:8])
    elif isinstance(source, (str, _os.PathLike)):
        with open(source, "rb") as f:
            head = f.read(8)
    else:
        head = b""
    if (hasattr(source, "graph") and hasattr(source, "opset_import")) or (head[4:8] != b"TFL3" and head):
        # an onnx.ModelProto, or not a TFLite flatbuffer (the ONNX loader is imported only now:
        # a TFLite load does not pay for it)
        from .onnx import is_onnx

        if head and not is_onnx(head):
            raise DataError(f"load: argument 'source': expected a TFLite or ONNX model, got data starting {head!r}")
        from .onnx import load as load_onnx

        return load_onnx(source, context, **options)
    from .tflite import load as load_tflite

    return load_tflite(source, context, **options)
