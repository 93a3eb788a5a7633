"""Read an ONNX model (protobuf) with the ``onnx`` package, external data included.

The data types: ONNX tensor types map one to one onto WebNN's where WebNN has them;
``bool`` is held as ``uint8`` (0 or 1) in the graph and at its edges; float and float16
tensors follow the graph's float type (``dtype=`` of :func:`webnn_gpu.onnx.load`).
Other types (double, int16, uint16, bfloat16, strings, float8, complex) are refused for
graph tensors; constants of those types may still be used by load-time folding.
"""

from __future__ import annotations

import os
import pathlib
from typing import Any

import numpy as np

from ..errors import DataError

__all__ = ["is_onnx", "read_onnx", "ONNX_TO_WEBNN", "np_dtype_of"]

#: ONNX TensorProto element type -> WebNN data type ("float" means the graph's float type).
ONNX_TO_WEBNN = {1: "float", 10: "float", 2: "uint8", 3: "int8", 6: "int32", 7: "int64",
                 12: "uint32", 13: "uint64", 9: "uint8"}
#: ONNX element type names, for messages.
TYPE_NAMES = {0: "undefined", 1: "float", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32",
              7: "int64", 8: "string", 9: "bool", 10: "float16", 11: "double", 12: "uint32", 13: "uint64",
              14: "complex64", 15: "complex128", 16: "bfloat16", 17: "float8e4m3fn", 18: "float8e4m3fnuz",
              19: "float8e5m2", 20: "float8e5m2fnuz", 21: "uint4", 22: "int4", 23: "float4e2m1"}
_NP = {1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32, 7: np.int64,
       9: np.bool_, 10: np.float16, 11: np.float64, 12: np.uint32, 13: np.uint64}


def np_dtype_of(elem_type: int):
    """The NumPy dtype of an ONNX element type, or None when NumPy has none."""
    return _NP.get(elem_type)


def is_onnx(head: bytes) -> bool:
    """Whether ``head`` (the first bytes of a file) looks like an ONNX ModelProto.

    A ModelProto starts with a protobuf field tag; exporters write ``ir_version`` (field 1,
    varint, tag byte 0x08) first. TFLite flatbuffers carry ``TFL3`` at bytes 4-8 and are
    told apart before this check.
    """
    return len(head) >= 2 and head[0] in (0x08, 0x12, 0x1a, 0x22, 0x2a, 0x32, 0x3a, 0x42, 0x4a, 0x52, 0x72)


def read_onnx(source: str | os.PathLike | bytes) -> Any:
    """Parse an ONNX model and load its external-data initializers.

    Arguments:
        source (str | os.PathLike | bytes): the ``.onnx`` file (external data files are
            looked up next to it) or its bytes (then it must hold all its data).

    Returns:
        onnx.ModelProto: the model.

    Raises:
        DataError: not an ONNX model, or its external data cannot be read.
        OSError: the file cannot be read.
        ModuleNotFoundError: the ``onnx`` package is missing (``pip install 'webnn-gpu[onnx]'``).
    """
    import onnx
    from onnx.external_data_helper import load_external_data_for_model, uses_external_data

    if isinstance(source, (bytes, bytearray, memoryview)):
        data, base = bytes(source), None
    elif isinstance(source, (str, os.PathLike)):
        path = pathlib.Path(source)
        data, base = path.read_bytes(), path.parent
    else:
        raise TypeError(f"onnx.load: argument 'source': expected a path or bytes, got {type(source).__name__}")
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except Exception as exc:  # protobuf's DecodeError
        raise DataError(f"onnx.load: not an ONNX model ({exc})") from None
    if not model.graph.node and not model.graph.output:
        raise DataError("onnx.load: not an ONNX model (no graph)")
    tensors = list(model.graph.initializer)
    if any(uses_external_data(t) for t in tensors):
        if base is None:
            raise DataError("onnx.load: the model keeps initializers in external files; pass its path, not bytes")
        try:
            load_external_data_for_model(model, str(base))
        except (OSError, ValueError) as exc:
            raise DataError(f"onnx.load: cannot read the model's external data next to {base}: {exc}") from None
    return model
