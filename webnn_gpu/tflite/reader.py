"""Read a .tflite flatbuffer into plain Python objects (no GPU, no builder).

The ``tflite`` package (generated from TensorFlow Lite's ``schema.fbs``) gives raw
flatbuffer accessors; this module turns the main subgraph into :class:`ModelInfo`:
tensors with their shape, element type and constant data, and operators with their
op code name, inputs, outputs and options.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import struct
import sys
import threading
from typing import Any

import numpy as np

from ..errors import DataError
from . import read_source  # noqa: F401  (defined beside load: a kept plan needs no reader)


class _Schema:
    """The classes of the ``tflite`` package (generated from TensorFlow Lite's ``schema.fbs``:
    ``_fb.Conv2DOptions``, ``_fb.TensorType``, ...), each module imported at its first use.

    Importing the package itself runs all of its ~190 modules (about 35 ms of CPU in every
    process that loads a model, more than reading the model), of which a load uses a handful:
    the option tables of its operators. Each module is run on its own from the package's folder;
    those a load uses import no other (the few generated accessors that do, such as
    ``Model.Subgraphs``, import the package itself when called, and work as before). Once the
    package has been imported (by the caller, or by a test), its own classes are used.
    """

    def __init__(self, folder: str):
        self._folder = folder
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        package = sys.modules.get("tflite")
        if package is not None and hasattr(package, name):
            return getattr(package, name)
        with self._lock:
            value = self.__dict__.get(name)
            if value is not None:
                return value
            path = os.path.join(self._folder, f"{name}.py")
            if not name.isidentifier() or not os.path.isfile(path):
                raise AttributeError(f"the tflite package has no {name!r}")
            spec = importlib.util.spec_from_file_location(f"{__name__}._schema.{name}", path)
            if spec is None or spec.loader is None:  # pragma: no cover - a file that is no module
                raise AttributeError(f"the tflite package's {name!r} cannot be imported")
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            value = getattr(module, name)
            setattr(self, name, value)  # later lookups find it without __getattr__
            return value


def _schema() -> tuple[_Schema | None, ModuleNotFoundError | None]:
    """The ``tflite`` package's classes (:class:`_Schema`), or None and the error saying that the
    package (extras "model", "demo", "test") is missing."""
    try:
        spec = importlib.util.find_spec("tflite")
    except (ImportError, ValueError) as exc:  # pragma: no cover - a broken installation
        return None, ModuleNotFoundError(str(exc))
    folders = list(spec.submodule_search_locations or ()) if spec is not None else []
    if not folders:  # pragma: no cover - depends on the environment
        return None, ModuleNotFoundError("No module named 'tflite'")
    return _Schema(folders[0]), None


_fb: Any  # the classes, looked up by name as the package's own (None: the package is missing)
_IMPORT_ERROR: ModuleNotFoundError | None
_fb, _IMPORT_ERROR = _schema()

__all__ = ["TensorInfo", "OperatorInfo", "ModelInfo", "Sparsity", "densify", "read_model", "read_source",
           "TFLITE_TYPES"]

#: TFLite TensorType name -> NumPy dtype (None: not representable here).
TFLITE_TYPES: dict[str, np.dtype | None] = {
    "FLOAT32": np.dtype(np.float32),
    "FLOAT16": np.dtype(np.float16),
    "FLOAT64": np.dtype(np.float64),
    "INT32": np.dtype(np.int32),
    "UINT32": np.dtype(np.uint32),
    "INT64": np.dtype(np.int64),
    "UINT64": np.dtype(np.uint64),
    "INT16": np.dtype(np.int16),
    "UINT16": np.dtype(np.uint16),
    "INT8": np.dtype(np.int8),
    "UINT8": np.dtype(np.uint8),
    "BOOL": np.dtype(np.bool_),
    "STRING": None,
    "COMPLEX64": None,
    "COMPLEX128": None,
    "RESOURCE": None,
    "VARIANT": None,
    "INT4": None,
    "BFLOAT16": None,
}


def _require_tflite() -> Any:
    if _fb is None:
        raise ModuleNotFoundError(
            "loading .tflite models needs the 'tflite' package: pip install 'webnn-gpu[model]'"
        ) from _IMPORT_ERROR
    return _fb


def _enum_names(enum_cls: type) -> dict[int, str]:
    return {v: k for k, v in vars(enum_cls).items() if not k.startswith("_") and isinstance(v, int)}


@dataclasses.dataclass(frozen=True)
class Quantization:
    """Affine quantization of a tensor: ``real = (q - zero_point) * scale``."""

    scale: np.ndarray
    zero_point: np.ndarray
    axis: int


def dequantize(data: np.ndarray, q: Quantization) -> np.ndarray:
    """``(q - zero_point) * scale`` (per tensor, or per channel along ``q.axis``) as float32."""
    values = data.astype(np.float64)
    if q.scale.size == 1:
        zp = q.zero_point.reshape(-1)[0] if q.zero_point.size else 0
        return ((values - zp) * q.scale[0]).astype(np.float32)
    shape = [1] * values.ndim
    shape[q.axis] = q.scale.size
    zp = q.zero_point if q.zero_point.size == q.scale.size else np.zeros_like(q.scale)
    return ((values - zp.reshape(shape)) * q.scale.reshape(shape)).astype(np.float32)


@dataclasses.dataclass
class TensorInfo:
    """One tensor of the subgraph.

    Attributes:
        index: position in the subgraph's tensor list.
        name: the tensor's name (may be empty).
        shape: static shape (``()`` for a scalar).
        shape_signature: shape with ``-1`` for dynamic dimensions, when the model has one.
        type_name: the TFLite type name, e.g. ``"FLOAT32"``.
        data: the constant contents (shaped, native dtype), or None for a run-time tensor.
        quantization: affine quantization parameters, or None.
    """

    index: int
    name: str
    shape: tuple[int, ...]
    shape_signature: tuple[int, ...] | None
    type_name: str
    data: np.ndarray | None
    quantization: Quantization | None

    @property
    def is_constant(self) -> bool:
        """True when the tensor's value is stored in the model."""
        return self.data is not None

    @property
    def is_dynamic(self) -> bool:
        """True when some dimension is only known at run time."""
        return self.shape_signature is not None and any(d < 0 for d in self.shape_signature)


@dataclasses.dataclass
class OperatorInfo:
    """One operator of the subgraph.

    Attributes:
        index: position in the subgraph's operator list (execution order).
        opcode: the builtin operator name, e.g. ``"CONV_2D"``, or ``"CUSTOM"``.
        custom_code: the custom op's name for ``CUSTOM`` (e.g. ``"Convolution2DTransposeBias"``).
        version: the operator code's version.
        inputs: tensor indices (``-1`` for an omitted optional input).
        outputs: tensor indices.
        custom_options: the raw custom options bytes, or None.
    """

    index: int
    opcode: str
    custom_code: str | None
    version: int
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    custom_options: bytes | None
    _fb_op: Any = dataclasses.field(default=None, repr=False)

    @property
    def name(self) -> str:
        """The custom op's name for custom ops, else the builtin op code name."""
        return self.custom_code if self.opcode == "CUSTOM" and self.custom_code else self.opcode

    def options(self, options_cls: type) -> Any:
        """The builtin options table read as ``options_cls`` (e.g. ``tflite.Conv2DOptions``).

        Returns None when the operator stores no options (every field then has its
        schema default, which callers apply).
        """
        if self._fb_op is None:
            return None
        table = self._fb_op.BuiltinOptions()
        if table is None:
            return None
        opts = options_cls()
        opts.Init(table.Bytes, table.Pos)
        return opts


@dataclasses.dataclass
class ModelInfo:
    """One subgraph of a TFLite model (by default the main one, with the model's fields).

    Attributes:
        version: the schema version (3 for every current model).
        description: the model's description string.
        tensors: every tensor, by index.
        operators: the operators in execution order.
        inputs / outputs: the subgraph's input and output tensor indices.
        subgraph_count: how many subgraphs the model has.
    """

    version: int
    description: str
    tensors: list[TensorInfo]
    operators: list[OperatorInfo]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    subgraph_count: int
    #: Every subgraph of the model, read the same way (``subgraphs[0]`` is the main one,
    #: whose tensors and operators are also this object's); ``WHILE`` refers to the others.
    subgraphs: list[ModelInfo] = dataclasses.field(default_factory=list, repr=False, compare=False)
    #: The subgraph's index and name.
    subgraph_index: int = 0
    name: str = ""

    def op_counts(self) -> dict[str, int]:
        """How many operators of each name the model has (all subgraphs), most frequent first."""
        counts: dict[str, int] = {}
        for sub in self.subgraphs or [self]:
            for op in sub.operators:
                counts[op.name] = counts.get(op.name, 0) + 1
        return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def read_model(data: bytes) -> ModelInfo:
    """Parse a .tflite flatbuffer into a :class:`ModelInfo` (first subgraph).

    Arguments:
        data (bytes): the whole .tflite file.

    Returns:
        ModelInfo: tensors (with constant data) and operators of the main subgraph.

    Raises:
        DataError: the bytes are not a TFLite flatbuffer, or it is malformed
            (a buffer outside the file, a tensor index out of range, ...).
        ModuleNotFoundError: the ``tflite`` package is not installed.
    """
    fb = _require_tflite()
    if len(data) < 8 or data[4:8] != b"TFL3":
        raise DataError(
            "tflite.load: not a TFLite model (expected the flatbuffer identifier 'TFL3' at "
            f"bytes 4..8, got {data[4:8]!r})"
        )
    try:
        return _read_model(fb, data)
    except DataError:
        raise
    except Exception as exc:  # the generated accessors raise anything on corrupt input
        raise DataError(f"tflite.load: malformed TFLite flatbuffer: {type(exc).__name__}: {exc}") from exc


def _read_model(fb: Any, data: bytes) -> ModelInfo:
    # schema.fbs field numbers: Model.version 0, operator_codes 1, subgraphs 2, description 3;
    # OperatorCode.deprecated_builtin_code 0 (int8), custom_code 1, version 2 (default 1),
    # builtin_code 3; SubGraph.inputs 1, outputs 2, name 4
    mpos = _U32.unpack_from(data, 0)[0]
    mf = _fields(data, mpos)
    subs = _tables(data, mpos, _field(mf, 2))
    if len(subs) < 1:
        raise DataError("tflite.load: the model has no subgraph")
    type_names = _enum_names(fb.TensorType)
    op_names = _enum_names(fb.BuiltinOperator)

    opcodes: list[tuple[str, str | None, int]] = []
    for opos in _tables(data, mpos, _field(mf, 1)):
        f = _fields(data, opos)
        off0, off1, off2, off3 = (_field(f, i) for i in range(4))
        deprecated = struct.unpack_from("<b", data, opos + off0)[0] if off0 else 0
        builtin = _I32.unpack_from(data, opos + off3)[0] if off3 else 0
        # Schema rule: the real code is the larger of the two fields (the int8
        # deprecated field saturates at 127, PLACEHOLDER_FOR_GREATER_OP_CODES).
        code = max(builtin, deprecated)
        name = op_names.get(code, f"BUILTIN_{code}")
        custom = _ubytes(data, opos, off1).decode("utf-8", "replace") if off1 else None
        opcodes.append((name, custom, _I32.unpack_from(data, opos + off2)[0] if off2 else 1))

    off = _field(mf, 0)
    version = _U32.unpack_from(data, mpos + off)[0] if off else 0
    off = _field(mf, 3)
    description = _ubytes(data, mpos, off).decode("utf-8", "replace") if off else ""
    subgraphs: list[ModelInfo] = []
    for si, spos in enumerate(subs):
        sf = _fields(data, spos)
        tensors, operators = _read_subgraph(fb, data, mpos, spos, type_names, opcodes)
        off = _field(sf, 4)
        subgraphs.append(ModelInfo(
            version=version,
            description=description,
            tensors=tensors,
            operators=operators,
            inputs=_ints(data, spos, _field(sf, 1)),
            outputs=_ints(data, spos, _field(sf, 2)),
            subgraph_count=len(subs),
            subgraphs=subgraphs,
            subgraph_index=si,
            name=_ubytes(data, spos, off).decode("utf-8", "replace") if off else "",
        ))
    return subgraphs[0]


# Direct reads of the tables the loader walks for every tensor and operator (Tensor, Buffer,
# Operator): the generated accessors look each field up through several Python calls, which
# made reading a zoo model's ~500 tensors most of the parse (about 3x the time).
_I32 = struct.Struct("<i")
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_VTABLES: dict[int, struct.Struct] = {}
_INTS: dict[int, struct.Struct] = {}  # int32 vectors by length


def _fields(data: bytes, pos: int) -> tuple[int, ...]:
    """The field offsets of the flatbuffer table at ``pos`` (0 where a field is absent)."""
    vt = pos - _I32.unpack_from(data, pos)[0]
    n = (_U16.unpack_from(data, vt)[0] - 4) // 2
    st = _VTABLES.get(n)
    if st is None:
        st = _VTABLES[n] = struct.Struct(f"<{n}H")
    return st.unpack_from(data, vt + 4)


def _field(fields: tuple[int, ...], i: int) -> int:
    return fields[i] if i < len(fields) else 0


def _vector(data: bytes, pos: int, off: int) -> tuple[int, int]:
    """(start, length) of the vector field at ``off`` of the table at ``pos``."""
    at = pos + off
    vec = at + _U32.unpack_from(data, at)[0]
    return vec + 4, _U32.unpack_from(data, vec)[0]


def _vector_length(data: bytes, pos: int, off: int) -> int:
    """The length of the vector field at ``off`` of the table at ``pos`` (0 when absent)."""
    return _vector(data, pos, off)[1] if off else 0


def _ints(data: bytes, pos: int, off: int) -> tuple[int, ...]:
    """An int32 vector field as a tuple (``()`` when absent)."""
    if not off:
        return ()
    start, n = _vector(data, pos, off)
    st = _INTS.get(n)
    if st is None:
        st = struct.Struct(f"<{n}i")
        if n <= 64:  # shapes and operators' tensor lists: a few lengths
            _INTS[n] = st
    return st.unpack_from(data, start)


def _ubytes(data, pos: int, off: int):
    """A ubyte vector field's bytes (``b""`` when absent; a slice of ``data``: bytes of bytes, a
    memoryview of a memoryview)."""
    if not off:
        return b""
    start, n = _vector(data, pos, off)
    if start + n > len(data):
        raise IndexError(f"a vector of {n} bytes at {start} lies outside the {len(data)}-byte buffer")
    return data[start:start + n]


def _tables(data: bytes, pos: int, off: int) -> list[int]:
    """The positions of the tables of a vector-of-tables field (``[]`` when absent)."""
    if not off:
        return []
    start, n = _vector(data, pos, off)
    return [start + 4 * i + _U32.unpack_from(data, start + 4 * i)[0] for i in range(n)]


def _table(data: bytes, pos: int, off: int) -> int | None:
    """The position of a table field (None when absent)."""
    return pos + off + _U32.unpack_from(data, pos + off)[0] if off else None


def _read_subgraph(fb: Any, data: bytes, mpos: int, spos: int, type_names: dict, opcodes: list) -> tuple:
    # schema.fbs field numbers: Model.buffers 4; SubGraph.tensors 0, operators 3; Tensor.shape 0,
    # type 1, buffer 2, name 3, quantization 4, sparsity 6, shape_signature 7; Buffer.data 0,
    # offset 1, size 2; Operator.opcode_index 0, inputs 1, outputs 2, custom_options 5,
    # large_custom_options_offset 9, large_custom_options_size 10
    buffers = _tables(data, mpos, _field(_fields(data, mpos), 4))
    n_buffers = len(buffers)
    sub_fields = _fields(data, spos)
    tensors: list[TensorInfo] = []
    empty: list[int] = []  # tensors with a buffer but no bytes whose static shape holds no element
    view = memoryview(data)  # constants' bytes are sliced without a copy (_decode_buffer copies once)
    for ti, tpos in enumerate(_tables(data, spos, _field(sub_fields, 0))):
        f = _fields(data, tpos)
        off = _field(f, 1)
        type_code = data[tpos + off] if off else 0
        type_name = type_names.get(type_code, f"TYPE_{type_code}")
        shape = _ints(data, tpos, _field(f, 0))
        signature = _ints(data, tpos, _field(f, 7)) if _field(f, 7) else None
        name = _ubytes(data, tpos, _field(f, 3)).decode("utf-8", "replace")  # a string: a byte vector
        off = _field(f, 2)
        buffer_index = _U32.unpack_from(data, tpos + off)[0] if off else 0
        contents: np.ndarray | None = None
        raw: memoryview | None = None
        sparse_at = _table(data, tpos, _field(f, 6))
        if buffer_index > 0:
            if buffer_index >= n_buffers:
                raise DataError(f"tflite.load: tensor {ti} ({name!r}) uses buffer {buffer_index}, "
                                f"but the model has {n_buffers} buffers")
            bpos = buffers[buffer_index]
            bf = _fields(data, bpos)
            off1, off2 = _field(bf, 1), _field(bf, 2)
            offset = _U64.unpack_from(data, bpos + off1)[0] if off1 else 0
            size = _U64.unpack_from(data, bpos + off2)[0] if off2 else 0
            if offset > 1:  # large models keep buffers after the flatbuffer
                if offset + size > len(data):
                    raise DataError(f"tflite.load: buffer {buffer_index} ({offset}+{size}) lies outside "
                                    f"the {len(data)}-byte file")
                raw = view[offset:offset + size]
            else:
                raw = _ubytes(view, bpos, _field(bf, 0)) or None
            if raw and sparse_at is None:
                contents = _decode_buffer(raw, type_name, shape, ti, name)
            elif not raw and 0 in shape and not (signature and -1 in signature):
                empty.append(ti)

        quant = None
        q_at = _table(data, tpos, _field(f, 4))
        # most float models give every tensor an empty QuantizationParameters table: its scale
        # vector (field 2) is looked at directly, the generated accessors only for a real one
        if q_at is not None and _vector_length(data, q_at, _field(_fields(data, q_at), 2)):
            q = fb.QuantizationParameters()
            q.Init(data, q_at)
            if q.ScaleLength() > 0:
                zp = q.ZeroPointAsNumpy() if q.ZeroPointLength() > 0 else np.zeros(q.ScaleLength(), np.int64)
                quant = Quantization(
                    scale=np.asarray(q.ScaleAsNumpy(), np.float64),
                    zero_point=np.asarray(zp, np.int64),
                    axis=int(q.QuantizedDimension()),
                )
        if sparse_at is not None and contents is None and raw:
            contents = densify(_sparsity_of(fb, data, sparse_at), raw, type_name, shape, ti, name)
        tensors.append(TensorInfo(ti, name, shape, signature, type_name, contents, quant))

    operators: list[OperatorInfo] = []
    n_tensors = len(tensors)
    for oi, opos in enumerate(_tables(data, spos, _field(sub_fields, 3))):
        f = _fields(data, opos)
        off = _field(f, 0)
        code_index = _U32.unpack_from(data, opos + off)[0] if off else 0
        if not 0 <= code_index < len(opcodes):
            raise DataError(f"tflite.load: operator {oi} uses op code {code_index}, "
                            f"but the model has {len(opcodes)}")
        opcode, custom_code, version = opcodes[code_index]
        inputs = _ints(data, opos, _field(f, 1))
        outputs = _ints(data, opos, _field(f, 2))
        for t_index in inputs + outputs:
            if t_index >= n_tensors or t_index < -1:
                raise DataError(f"tflite.load: operator {oi} ({opcode}) refers to tensor {t_index}, "
                                f"but the subgraph has {n_tensors}")
        custom_options = _ubytes(data, opos, _field(f, 5)) or None
        off9, off10 = _field(f, 9), _field(f, 10)
        large = _U64.unpack_from(data, opos + off9)[0] if off9 else 0
        if custom_options is None and large > 1:
            size = _U64.unpack_from(data, opos + off10)[0] if off10 else 0
            custom_options = data[large:large + size]
        op = fb.Operator()
        op.Init(data, opos)
        operators.append(OperatorInfo(oi, opcode, custom_code, version, inputs, outputs, custom_options, op))

    # A constant without elements (the converter's empty shape vector of a reshape to a scalar,
    # an empty split size) has a buffer and no bytes, as a run-time tensor has: it is the empty
    # constant when no operator writes it and the subgraph does not take it as an input.
    if empty:
        written = {t for o in operators for t in o.outputs}
        written.update(_ints(data, spos, _field(sub_fields, 1)))
        for ti in empty:
            t = tensors[ti]
            if ti not in written and t.type_name in TFLITE_TYPES:
                t.data = np.zeros(t.shape, TFLITE_TYPES[t.type_name])
    return tensors, operators


def _decode_buffer(raw: bytes | memoryview, type_name: str, shape: tuple[int, ...], index: int, name: str) -> np.ndarray:
    dtype = TFLITE_TYPES.get(type_name)
    if dtype is None:
        raise DataError(f"tflite.load: tensor {index} ({name!r}) holds constant data of type {type_name}, "
                        "which this loader cannot read")
    count = int(np.prod(shape, dtype=np.int64)) if shape else 1
    if len(raw) != count * dtype.itemsize:
        raise DataError(f"tflite.load: tensor {index} ({name!r}) of shape {list(shape)} and type {type_name} "
                        f"needs {count * dtype.itemsize} bytes, its buffer has {len(raw)}")
    return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()


@dataclasses.dataclass(frozen=True)
class Sparsity:
    """A tensor's sparsity parameters (schema.fbs ``SparsityParameters``).

    Attributes:
        traversal_order: the order in which the stored dimensions are walked: the
            tensor's own dimensions first (a permutation of ``range(rank)``), then the
            block dimensions (``rank + k`` for block ``k``).
        block_map: for block ``k``, the tensor dimension it subdivides.
        dims: one entry per traversed dimension: ``("dense", size)`` or
            ``("csr", array_segments, array_indices)``.
    """

    traversal_order: tuple[int, ...]
    block_map: tuple[int, ...]
    dims: tuple[tuple, ...]


def _index_vector(kind: int, table: Any) -> np.ndarray:
    fb = _require_tflite()
    cls = {int(fb.SparseIndexVector.Int32Vector): fb.Int32Vector,
           int(fb.SparseIndexVector.Uint16Vector): fb.Uint16Vector,
           int(fb.SparseIndexVector.Uint8Vector): fb.Uint8Vector}.get(int(kind))
    if cls is None or table is None:
        raise DataError(f"tflite.load: sparse dimension with index vector type {kind}")
    vec = cls()
    vec.Init(table.Bytes, table.Pos)
    if vec.ValuesLength() == 0:
        return np.zeros(0, np.int64)
    return np.asarray(vec.ValuesAsNumpy(), np.int64)


def _sparsity_of(fb: Any, data: bytes, pos: int) -> Sparsity:
    """The SparsityParameters table at ``pos`` (its DimensionMetadata tables found directly: the
    generated ``DimMetadata`` accessor imports the whole ``tflite`` package)."""
    sp = fb.SparsityParameters()
    sp.Init(data, pos)
    dims: list[tuple] = []
    for dpos in _tables(data, pos, _field(_fields(data, pos), 2)):  # SparsityParameters.dim_metadata 2
        d = fb.DimensionMetadata()
        d.Init(data, dpos)
        if int(d.Format()) == 0:  # DENSE
            dims.append(("dense", int(d.DenseSize())))
        else:  # SPARSE_CSR
            dims.append(("csr", _index_vector(d.ArraySegmentsType(), d.ArraySegments()),
                         _index_vector(d.ArrayIndicesType(), d.ArrayIndices())))
    order = tuple(int(v) for v in sp.TraversalOrderAsNumpy()) if sp.TraversalOrderLength() else ()
    block_map = tuple(int(v) for v in sp.BlockMapAsNumpy()) if sp.BlockMapLength() else ()
    return Sparsity(order, block_map, tuple(dims))


def _densify_rows(sparsity: Sparsity, values: np.ndarray, shape: tuple[int, ...]) -> np.ndarray | None:
    """:func:`densify` of the layout TFLite's converter writes for weights (the dimensions in
    order, no blocks, every one dense but the last, which is CSR: one segment per row), in a
    few array operations; None for any other layout or parameters that do not fit exactly
    (the general walk then reads them, and names what is wrong)."""
    rank = len(shape)
    dims = sparsity.dims
    if (rank < 1 or sparsity.block_map or tuple(sparsity.traversal_order or range(rank)) != tuple(range(rank))
            or len(dims) != rank or dims[-1][0] != "csr"
            or any(d[0] != "dense" or d[1] != size for d, size in zip(dims[:-1], shape[:-1]))):
        return None
    segments, indices = dims[-1][1], dims[-1][2]
    rows, width = int(np.prod(shape[:-1], dtype=np.int64)), shape[-1]
    if len(segments) != rows + 1 or segments[0] != 0 or segments[-1] != len(values) or len(indices) < len(values):
        return None
    counts = np.diff(segments)
    cols = indices[:len(values)]
    if (counts < 0).any() or (cols < 0).any() or (cols >= width).any():
        return None
    dense = np.zeros(rows * width, dtype=values.dtype)
    dense[np.repeat(np.arange(rows, dtype=np.int64) * width, counts) + cols] = values
    return dense.reshape(shape)


def densify(sparsity: Sparsity, raw: bytes | memoryview, type_name: str, shape: tuple[int, ...], index: int = 0,
            name: str = "") -> np.ndarray:
    """The dense array of a sparse constant tensor (what TFLite's ``DENSIFY`` computes).

    Follows TFLite's ``FormatConverter::SparseToDense``: the stored values are visited
    in traversal order, a dense dimension enumerating ``0..size-1`` and a CSR dimension
    the indices ``array_indices[array_segments[p]:array_segments[p + 1]]`` of its parent
    position ``p``; block dimensions add their offset to the dimension they subdivide.
    Every position not stored is zero.

    Arguments:
        sparsity (Sparsity): the tensor's sparsity parameters.
        raw (bytes | memoryview): the stored (non-zero) values.
        type_name (str): the TFLite element type.
        shape: the dense shape.
        index, name: the tensor, for error messages.

    Returns:
        np.ndarray: the dense tensor, of ``shape``.

    Raises:
        DataError: parameters that do not describe ``shape`` or the stored values.
    """
    def bad(what: str) -> DataError:
        return DataError(f"tflite.load: sparse tensor {index} ({name!r}) of shape {list(shape)}: {what}")

    dtype = TFLITE_TYPES.get(type_name)
    if dtype is None:
        raise bad(f"values of type {type_name}, which this loader cannot read")
    rank = len(shape)
    order = sparsity.traversal_order or tuple(range(rank))
    n_levels = len(order)
    if len(sparsity.dims) != n_levels or sorted(order) != list(range(n_levels)) or \
            sorted(order[:rank]) != list(range(rank)) or len(sparsity.block_map) != n_levels - rank:
        raise bad(f"traversal order {list(order)}, block map {list(sparsity.block_map)} and "
                  f"{len(sparsity.dims)} dimension records do not fit")
    if len(raw) % dtype.itemsize:
        raise bad(f"{len(raw)} bytes of values is not a whole number of {type_name}")
    values = np.frombuffer(raw, dtype=dtype)
    fast = _densify_rows(sparsity, values, shape)
    if fast is not None:
        return fast
    block_size = [0] * len(sparsity.block_map)
    for level, dim in enumerate(sparsity.dims):
        if order[level] >= rank:
            if dim[0] != "dense":
                raise bad("a sparse block dimension")
            block_size[order[level] - rank] = dim[1]

    # Walk the levels breadth first; the positions stay in depth-first (storage) order.
    parents = np.zeros(1, np.int64)  # position within the level, per stored prefix
    coords = np.zeros((1, 0), np.int64)
    for level, dim in enumerate(sparsity.dims):
        if dim[0] == "dense":
            size = dim[1]
            idx = np.tile(np.arange(size, dtype=np.int64), len(parents))
            coords = np.concatenate([np.repeat(coords, size, axis=0), idx[:, None]], axis=1)
            parents = (np.repeat(parents, size) * size + idx)
        else:
            segments, indices = dim[1], dim[2]
            if len(segments) < 1 or parents.size and parents.max() + 1 >= len(segments):
                raise bad(f"level {level}: array_segments of length {len(segments)} for "
                          f"{int(parents.max()) + 1 if parents.size else 0} parents")
            starts, ends = segments[parents], segments[parents + 1]
            counts = ends - starts
            if (counts < 0).any() or (ends > len(indices)).any():
                raise bad(f"level {level}: array_segments out of order or beyond array_indices")
            take = np.repeat(starts - np.cumsum(counts) + counts, counts) + np.arange(int(counts.sum()))
            coords = np.concatenate([np.repeat(coords, counts, axis=0), indices[take][:, None]], axis=1)
            parents = take
    if len(coords) != len(values):
        raise bad(f"the sparsity parameters address {len(coords)} values, the buffer holds {len(values)}")
    full: Any = np.zeros(len(coords), np.int64)
    orig = np.zeros((len(coords), rank), np.int64)
    for level in range(rank):
        orig[:, order[level]] = coords[:, level]
    for level in range(rank, n_levels):
        k = order[level] - rank
        axis = sparsity.block_map[k]
        orig[:, axis] = orig[:, axis] * block_size[k] + coords[:, level]
    if rank and ((orig < 0).any() or (orig >= np.asarray(shape)).any()):
        raise bad("an index outside the dense shape")
    if rank:
        full = np.ravel_multi_index(orig.T, shape)
    dense = np.zeros(int(np.prod(shape, dtype=np.int64)), dtype=dtype)
    dense[full] = values
    return dense.reshape(shape)
