"""Write small .tflite models for tests, with LiteRT's generated schema object API.

Independent of the loader under test (it never imports ``webnn_gpu``). Each model is
small enough to run in milliseconds in LiteRT and on lavapipe.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import flatbuffers
from ai_edge_litert import schema_py_generated as schema

_TYPES = {
    np.dtype(np.float32): schema.TensorType.FLOAT32,
    np.dtype(np.float16): schema.TensorType.FLOAT16,
    np.dtype(np.int32): schema.TensorType.INT32,
    np.dtype(np.int64): schema.TensorType.INT64,
    np.dtype(np.int8): schema.TensorType.INT8,
    np.dtype(np.uint8): schema.TensorType.UINT8,
}

# Builtin options: op name -> (BuiltinOptions union tag, options class name).
_OPTIONS = {
    "CONV_2D": "Conv2DOptions",
    "DEPTHWISE_CONV_2D": "DepthwiseConv2DOptions",
    "TRANSPOSE_CONV": "TransposeConvOptions",
    "AVERAGE_POOL_2D": "Pool2DOptions",
    "MAX_POOL_2D": "Pool2DOptions",
    "ADD": "AddOptions",
    "SUB": "SubOptions",
    "MUL": "MulOptions",
    "DIV": "DivOptions",
    "CONCATENATION": "ConcatenationOptions",
    "RESHAPE": "ReshapeOptions",
    "SOFTMAX": "SoftmaxOptions",
    "PAD": "PadOptions",
    "TRANSPOSE": "TransposeOptions",
    "FULLY_CONNECTED": "FullyConnectedOptions",
    "MEAN": "ReducerOptions",
    "RESIZE_BILINEAR": "ResizeBilinearOptions",
    "HARD_SWISH": "HardSwishOptions",
    "DEQUANTIZE": "DequantizeOptions",
    "SQUARED_DIFFERENCE": "SquaredDifferenceOptions",
    "LEAKY_RELU": "LeakyReluOptions",
    "SUM": "ReducerOptions",
    "REDUCE_MAX": "ReducerOptions",
    "REDUCE_MIN": "ReducerOptions",
    "REDUCE_PROD": "ReducerOptions",
    "SQUEEZE": "SqueezeOptions",
    "EXPAND_DIMS": "ExpandDimsOptions",
    "MIRROR_PAD": "MirrorPadOptions",
    "PADV2": "PadV2Options",
    "BATCH_MATMUL": "BatchMatMulOptions",
    "MAXIMUM": "MaximumMinimumOptions",
    "MINIMUM": "MaximumMinimumOptions",
    "POW": "PowOptions",
    "EXP": "ExpOptions",
    "NEG": "NegOptions",
    "ABS": "AbsOptions",
    "COS": "CosOptions",
}


class ModelMaker:
    """Collects tensors and operators of one subgraph, then :meth:`finish` gives the bytes."""

    def __init__(self) -> None:
        self.tensors: list[Any] = []
        self.buffers: list[Any] = [schema.BufferT()]  # buffer 0 is the empty sentinel
        self.codes: list[Any] = []
        self._code_index: dict[tuple, int] = {}
        self.operators: list[Any] = []
        self.inputs: list[int] = []
        self.outputs: list[int] = []

    def _tensor(self, shape, dtype, name: str, data: np.ndarray | None = None, quant=None) -> int:
        t = schema.TensorT()
        t.shape = [int(d) for d in shape]
        t.type = _TYPES[np.dtype(dtype)]
        t.name = name
        t.buffer = 0
        if data is not None:
            buf = schema.BufferT()
            buf.data = list(np.ascontiguousarray(data, dtype=np.dtype(dtype).newbyteorder("<")).tobytes())
            self.buffers.append(buf)
            t.buffer = len(self.buffers) - 1
        if quant is not None:
            q = schema.QuantizationParametersT()
            q.scale, q.zeroPoint, q.quantizedDimension = list(quant[0]), list(quant[1]), quant[2]
            t.quantization = q
        self.tensors.append(t)
        return len(self.tensors) - 1

    def input(self, shape, dtype=np.float32, name: str | None = None) -> int:
        index = self._tensor(shape, dtype, name or f"input_{len(self.inputs)}")
        self.inputs.append(index)
        return index

    def const(self, value, dtype=None, name: str | None = None, quant=None) -> int:
        arr = np.asarray(value, dtype=dtype)
        return self._tensor(arr.shape, arr.dtype, name or f"const_{len(self.tensors)}", arr, quant)

    def op(self, name: str, inputs: list[int], out_shape, *, out_dtype=np.float32, options: dict | None = None,
           custom_options: bytes | None = None, version: int = 1, out_name: str | None = None) -> int:
        """Append an operator (builtin ``name``, or a custom op when ``custom_options`` is given)."""
        out = self._tensor(out_shape, out_dtype, out_name or f"{name.lower()}_{len(self.operators)}")
        key = (name, custom_options is not None, version)
        if key not in self._code_index:
            code = schema.OperatorCodeT()
            if custom_options is not None:
                code.builtinCode = code.deprecatedBuiltinCode = schema.BuiltinOperator.CUSTOM
                code.customCode = name
            else:
                value = getattr(schema.BuiltinOperator, name)
                code.builtinCode = value
                code.deprecatedBuiltinCode = min(value, 127)
            code.version = version
            self.codes.append(code)
            self._code_index[key] = len(self.codes) - 1
        o = schema.OperatorT()
        o.opcodeIndex = self._code_index[key]
        o.inputs = list(inputs)
        o.outputs = [out]
        if custom_options is not None:
            o.customOptions = list(custom_options)
        elif name in _OPTIONS:
            cls_name = _OPTIONS[name]
            opts = getattr(schema, cls_name + "T")()
            for field, v in (options or {}).items():
                if not hasattr(opts, field):
                    raise AttributeError(f"{cls_name} has no field {field}")
                setattr(opts, field, v)
            o.builtinOptionsType = getattr(schema.BuiltinOptions, cls_name)
            o.builtinOptions = opts
        self.operators.append(o)
        return out

    def output(self, *indices: int) -> None:
        self.outputs.extend(indices)

    def finish(self) -> bytes:
        sub = schema.SubGraphT()
        sub.tensors, sub.operators = self.tensors, self.operators
        sub.inputs, sub.outputs = self.inputs, self.outputs
        sub.name = "main"
        model = schema.ModelT()
        model.version = 3
        model.operatorCodes = self.codes
        model.subgraphs = [sub]
        model.buffers = self.buffers
        model.description = "webnn-gpu test model"
        builder = flatbuffers.Builder(1024)
        builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
        return bytes(builder.Output())
