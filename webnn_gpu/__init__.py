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
    """Load a model file (TFLite flatbuffer) into an MLGraph built with MLGraphBuilder.

    Arguments:
        source (str | os.PathLike | bytes): the ``.tflite`` file or its bytes.
        context (MLContext): the context to build for.
        options: loader options, e.g. ``dtype="float16"``.

    Returns:
        webnn_gpu.tflite.LoadedModel: the graph with its input and output descriptors.

    Raises:
        NotSupportedError: an operator the loader cannot map (named in the message).
    """
    from .tflite import load as _load

    return _load(source, context, **options)
