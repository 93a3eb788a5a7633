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
    np.dtype(np.bool_): schema.TensorType.BOOL,
    np.dtype(np.complex64): schema.TensorType.COMPLEX64,
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
    "ARG_MAX": "ArgMaxOptions",
    "ARG_MIN": "ArgMinOptions",
    "CAST": "CastOptions",
    "CUMSUM": "CumsumOptions",
    "DEPTH_TO_SPACE": "DepthToSpaceOptions",
    "SPACE_TO_DEPTH": "SpaceToDepthOptions",
    "GATHER": "GatherOptions",
    "BUCKETIZE": "BucketizeOptions",
    "GATHER_ND": "GatherNdOptions",
    "GELU": "GeluOptions",
    "L2_NORMALIZATION": "L2NormOptions",
    "LOCAL_RESPONSE_NORMALIZATION": "LocalResponseNormalizationOptions",
    "PACK": "PackOptions",
    "UNPACK": "UnpackOptions",
    "SHAPE": "ShapeOptions",
    "SPLIT": "SplitOptions",
    "SPLIT_V": "SplitVOptions",
    "STRIDED_SLICE": "StridedSliceOptions",
    "SLICE": "SliceOptions",
    "RESIZE_NEAREST_NEIGHBOR": "ResizeNearestNeighborOptions",
    "UNIDIRECTIONAL_SEQUENCE_LSTM": "UnidirectionalSequenceLSTMOptions",
    "UNIDIRECTIONAL_SEQUENCE_RNN": "SequenceRNNOptions",
    "BIDIRECTIONAL_SEQUENCE_LSTM": "BidirectionalSequenceLSTMOptions",
    "WHILE": "WhileOptions",
    "IF": "IfOptions",
    "VAR_HANDLE": "VarHandleOptions",
    "CALL_ONCE": "CallOnceOptions",
    "FILL": "FillOptions",
    "TILE": "TileOptions",
    "SELECT_V2": "SelectV2Options",
    "SELECT": "SelectOptions",
    "FLOOR_DIV": "FloorDivOptions",
    "FLOOR_MOD": "FloorModOptions",
    "EQUAL": "EqualOptions",
    "NOT_EQUAL": "NotEqualOptions",
    "LESS": "LessOptions",
    "LESS_EQUAL": "LessEqualOptions",
    "GREATER": "GreaterOptions",
    "GREATER_EQUAL": "GreaterEqualOptions",
    "LOGICAL_AND": "LogicalAndOptions",
    "LOGICAL_OR": "LogicalOrOptions",
    "LOGICAL_NOT": "LogicalNotOptions",
    "ADD_N": "AddNOptions",
    "BROADCAST_TO": "BroadcastToOptions",
    "REVERSE_V2": "ReverseV2Options",
    "SQUARE": "SquareOptions",
    "ZEROS_LIKE": "ZerosLikeOptions",
    "EMBEDDING_LOOKUP": None,
    "RANGE": "RangeOptions",
    "WHERE": "WhereOptions",
    "DENSIFY": "DensifyOptions",
    "CONV_3D": "Conv3DOptions",
    "CONV_3D_TRANSPOSE": "Conv3DOptions",
    "REDUCE_ANY": "ReducerOptions",
    "REDUCE_ALL": "ReducerOptions",
    "TOPK_V2": "TopKV2Options",
    "ONE_HOT": "OneHotOptions",
    "UNSORTED_SEGMENT_SUM": "UnsortedSegmentSumOptions",
    "SCATTER_ND": "ScatterNdOptions",
    "REVERSE_SEQUENCE": "ReverseSequenceOptions",
    "ATAN2": None,
    "UNSORTED_SEGMENT_PROD": "UnsortedSegmentProdOptions",
    "UNSORTED_SEGMENT_MAX": "UnsortedSegmentMaxOptions",
    "UNSORTED_SEGMENT_MIN": "UnsortedSegmentMinOptions",
}


class _Subgraph:
    def __init__(self) -> None:
        self.tensors: list[Any] = []
        self.operators: list[Any] = []
        self.inputs: list[int] = []
        self.outputs: list[int] = []


class ModelMaker:
    """Collects tensors and operators of subgraphs, then :meth:`finish` gives the bytes.

    Methods add to the current subgraph (the main one, 0, until :meth:`subgraph`).
    """

    def __init__(self) -> None:
        self.buffers: list[Any] = [schema.BufferT()]  # buffer 0 is the empty sentinel
        self.codes: list[Any] = []
        self._code_index: dict[tuple, int] = {}
        self._subgraphs = [_Subgraph()]
        self._current = 0

    def subgraph(self, index: int | None = None) -> int:
        """Make subgraph ``index`` (a new one when None) the current one; returns its index."""
        if index is None:
            self._subgraphs.append(_Subgraph())
            index = len(self._subgraphs) - 1
        self._current = index
        return index

    tensors = property(lambda self: self._subgraphs[self._current].tensors)
    operators = property(lambda self: self._subgraphs[self._current].operators)
    inputs = property(lambda self: self._subgraphs[self._current].inputs)
    outputs = property(lambda self: self._subgraphs[self._current].outputs)

    def variable(self, shape, dtype=np.float32, name: str | None = None) -> int:
        """A variable tensor (no buffer; LiteRT starts it at zero), e.g. an LSTM state."""
        index = self._tensor(shape, dtype, name or f"var_{len(self.tensors)}")
        self.tensors[index].isVariable = True
        return index

    def sparse_const(self, value, block: int | None = None, name: str | None = None) -> int:
        """A constant stored sparse: every dimension dense but the last, which is CSR
        (uint8 index vectors); with ``block``, the last dimension is also split in blocks
        of ``block`` (a dense block dimension traversed last)."""
        arr = np.asarray(value)
        t = self._tensor(arr.shape, arr.dtype, name or f"sparse_{len(self.tensors)}")
        rows = arr.reshape(-1, arr.shape[-1])
        n = arr.shape[-1]
        width = block or 1
        cols = rows.reshape(rows.shape[0], n // width, width)
        segments, indices, values = [0], [], []
        for r in range(rows.shape[0]):
            for c in range(n // width):
                if np.any(cols[r, c] != 0):
                    indices.append(c)
                    values.extend(cols[r, c].tolist())
            segments.append(len(indices))
        sp = schema.SparsityParametersT()
        rank = arr.ndim
        sp.traversalOrder = list(range(rank + (1 if block else 0)))
        sp.blockMap = [rank - 1] if block else []
        dims = []
        for d in range(rank - 1):
            dm = schema.DimensionMetadataT()
            dm.format, dm.denseSize = schema.DimensionType.DENSE, int(arr.shape[d])
            dims.append(dm)
        dm = schema.DimensionMetadataT()
        dm.format = schema.DimensionType.SPARSE_CSR
        seg, ind = schema.Uint8VectorT(), schema.Uint8VectorT()
        seg.values, ind.values = segments, indices
        dm.arraySegmentsType = dm.arrayIndicesType = schema.SparseIndexVector.Uint8Vector
        dm.arraySegments, dm.arrayIndices = seg, ind
        dims.append(dm)
        if block:
            dm = schema.DimensionMetadataT()
            dm.format, dm.denseSize = schema.DimensionType.DENSE, block
            dims.append(dm)
        sp.dimMetadata = dims
        self.tensors[t].sparsity = sp
        buf = schema.BufferT()
        buf.data = list(np.asarray(values, arr.dtype).astype(arr.dtype.newbyteorder("<")).tobytes())
        self.buffers.append(buf)
        self.tensors[t].buffer = len(self.buffers) - 1
        return t

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
           custom_options: bytes | None = None, version: int = 1, out_name: str | None = None,
           outputs: int | None = None):
        """Append an operator (builtin ``name``, or a custom op when ``custom_options`` is given).

        Returns the output tensor, or with ``outputs=k`` a list of k (``out_shape`` is then
        a list of shapes, ``out_dtype`` one type or a list of k).
        """
        shapes = list(out_shape) if outputs is not None else [out_shape]
        dtypes = out_dtype if isinstance(out_dtype, list) else [out_dtype] * len(shapes)
        outs = [self._tensor(shp, dt, f"{out_name or name.lower()}_{len(self.operators)}_{k}"
                             if outputs is not None else out_name or f"{name.lower()}_{len(self.operators)}")
                for k, (shp, dt) in enumerate(zip(shapes, dtypes))]
        out = outs[0]
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
        o.outputs = outs
        if custom_options is not None:
            o.customOptions = list(custom_options)
        elif _OPTIONS.get(name):
            cls_name = _OPTIONS[name]
            opts = getattr(schema, cls_name + "T")()
            for field, v in (options or {}).items():
                if not hasattr(opts, field):
                    raise AttributeError(f"{cls_name} has no field {field}")
                setattr(opts, field, v)
            o.builtinOptionsType = getattr(schema.BuiltinOptions, cls_name)
            o.builtinOptions = opts
        self.operators.append(o)
        return outs if outputs is not None else out

    def output(self, *indices: int) -> None:
        self.outputs.extend(indices)

    def finish(self) -> bytes:
        subs = []
        for k, part in enumerate(self._subgraphs):
            sub = schema.SubGraphT()
            sub.tensors, sub.operators = part.tensors, part.operators
            sub.inputs, sub.outputs = part.inputs, part.outputs
            sub.name = "main" if k == 0 else f"subgraph{k}"
            subs.append(sub)
        model = schema.ModelT()
        model.version = 3
        model.operatorCodes = self.codes
        model.subgraphs = subs
        model.buffers = self.buffers
        model.description = "webnn-gpu test model"
        builder = flatbuffers.Builder(1024)
        builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
        return bytes(builder.Output())
