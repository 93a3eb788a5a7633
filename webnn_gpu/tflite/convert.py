"""Walk a :class:`~.reader.ModelInfo` and emit WebNN builder calls (the conversion state).

:func:`convert` works with any object that has the ``MLGraphBuilder`` methods, so the
mapping can be checked without a GPU; :func:`webnn_gpu.tflite.load` passes the real
builder of a context.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from .. import _dtypes
from ..errors import DataError, MLTypeError, NotSupportedError, WebNNError
from . import GRAPH_DTYPES
from .ops import COMPLEX_READERS, FOLDERS, HANDLERS, Complex, _fb
from .reader import ModelInfo, OperatorInfo, TensorInfo, dequantize

__all__ = ["Converter", "Converted", "convert", "GRAPH_DTYPES"]


_FLOAT_TYPES = {"FLOAT32", "FLOAT16", "FLOAT64"}
#: TFLite run-time tensor types -> WebNN data types (float types follow the graph dtype).
_INT_TYPES = {"INT32": "int32", "UINT32": "uint32", "INT64": "int64", "UINT64": "uint64",
              "INT8": "int8", "UINT8": "uint8", "BOOL": "uint8"}
#: Loops unrolled at load time may run at most this many iterations.
MAX_UNROLL = 4096


@dataclasses.dataclass
class Converted:
    """What :func:`convert` produced.

    Attributes:
        outputs: output name -> builder operand, in the model's output order.
        inputs: input name -> descriptor ``{"data_type", "shape"}``, in the model's order.
        input_tensors / output_tensors: name -> TFLite tensor index.
    """

    outputs: dict[str, Any]
    inputs: dict[str, dict[str, Any]]
    input_tensors: dict[str, int]
    output_tensors: dict[str, int]


def _located(exc_type: type[Exception], message: str) -> Exception:
    """An exception whose message already names the TFLite operator (not wrapped again)."""
    exc = exc_type(message)
    exc._tflite_located = True  # type: ignore[attr-defined]
    return exc


class Converter:
    """The state of one conversion: operands made so far, folded constants, the graph dtype.

    Handlers in :mod:`.ops` use these methods; they never touch the flatbuffer directly.
    """

    def __init__(self, model: ModelInfo, builder: Any, dtype: str, *, label_prefix: str = "",
                 custom_ops: dict | None = None) -> None:
        self.model = model
        self.custom_ops: dict = custom_ops or {}  # custom op code -> fn(builder, inputs, attributes)
        self.builder = builder
        self.float_type = dtype
        self.label_prefix = label_prefix
        self._np_float = np.dtype(np.float16 if dtype == "float16" else np.float32)
        self._operands: dict[int, Any] = {}
        self._folded: dict[int, np.ndarray] = {}  # values computed at load time (DEQUANTIZE, shapes, ...)
        # The shapes that tensors with dynamic dimensions (-1 in the shape signature) have in
        # this graph, known once their producer ran; the file's `shape` is a placeholder there.
        self._shapes: dict[int, tuple[int, ...]] = {}
        # Operators an earlier handler already computed as part of its pattern (their indices).
        self.claimed: set[int] = set()
        # Tensors the loader computed as the reversal along one axis of an operand it also has
        # (a backward recurrent layer's buffer): tensor -> (that operand, the axis); a
        # REVERSE_V2 of them (through reshapes) is the operand itself.
        self.reversed_of: dict[int, tuple[Any, int]] = {}
        # Quantized tensors whose operand holds their real (dequantized) values already: a
        # GATHER from an int8 table (dynamic-range quantization of an Embedding), read only
        # by DEQUANTIZE, which then passes the operand on.
        self.dequantized: set[int] = set()
        # The subgraph's writer and readers of each tensor (:meth:`producer`, :meth:`readers`),
        # made on the first question: pattern matchers ask at many operators.
        self._writer: dict[int, OperatorInfo] | None = None
        self._readers: dict[int, list[OperatorInfo]] = {}

    # -- naming and errors
    def label(self, op: OperatorInfo) -> str:
        """The WebNN ``label`` of the operator's builder calls, e.g. ``"CONV_2D#2"``
        (inside an unrolled loop, prefixed with the loop and the iteration)."""
        return f"{self.label_prefix}{op.name}#{op.index}"

    def where(self, op: OperatorInfo) -> str:
        sub = f"subgraph {self.model.subgraph_index} " if self.model.subgraph_index else ""
        loop = f" (in {self.label_prefix.rstrip('/')})" if self.label_prefix else ""
        return f"tflite.load: {sub}operator #{op.index} {op.name}{loop}"

    def unsupported(self, op: OperatorInfo, what: str) -> Exception:
        """A NotSupportedError naming the operator and what about it is not supported."""
        return _located(NotSupportedError, f"{self.where(op)}: {what} is not supported")

    def malformed(self, op: OperatorInfo, what: str) -> Exception:
        """A DataError naming the operator and what is wrong with the model."""
        return _located(DataError, f"{self.where(op)}: malformed model: {what}")

    def require_positive(self, op: OperatorInfo, **values: list[int]) -> None:
        for name, vals in values.items():
            if any(int(v) < 1 for v in vals):
                raise self.malformed(op, f"{name} {list(vals)} (expected values >= 1)")

    # -- tensors
    def _actual(self, index: int) -> TensorInfo:
        t = self.model.tensors[index]
        shape = self._shapes.get(index)
        return t if shape is None else dataclasses.replace(t, shape=shape)

    def tensor(self, op: OperatorInfo, i: int) -> TensorInfo:
        """The TFLite tensor of input ``i`` of ``op`` (with its actual shape when it is dynamic)."""
        if i >= len(op.inputs) or op.inputs[i] < 0:
            raise self.malformed(op, f"input {i} is missing (the operator has {len(op.inputs)} inputs)")
        return self._actual(op.inputs[i])

    def _index(self) -> dict[int, OperatorInfo]:
        if self._writer is None:
            self._writer = {}
            for o in self.model.operators:
                for t in o.outputs:
                    self._writer.setdefault(t, o)
                for t in dict.fromkeys(o.inputs):
                    self._readers.setdefault(t, []).append(o)
        return self._writer

    def producer(self, tensor: int) -> OperatorInfo | None:
        """The operator that writes ``tensor`` (None for an input or a constant)."""
        return self._index().get(tensor)

    def readers(self, tensor: int) -> list[OperatorInfo]:
        """The operators of the subgraph that read ``tensor``, in order."""
        self._index()
        return list(self._readers.get(tensor, ()))

    def sole_consumer(self, tensor: int) -> OperatorInfo | None:
        """The one operator that reads ``tensor``, when it is that (and no subgraph output)."""
        if tensor in self.model.outputs:
            return None
        users = self.readers(tensor)
        return users[0] if len(users) == 1 else None

    def out_tensor(self, op: OperatorInfo, j: int = 0) -> TensorInfo:
        """The TFLite tensor of output ``j`` of ``op``.

        For an output with dynamic dimensions, ``shape`` is only meaningful once the
        output is recorded; before that use :meth:`out_shape`.
        """
        if j >= len(op.outputs):
            raise self.malformed(op, f"output {j} is missing")
        return self._actual(op.outputs[j])

    def out_shape(self, op: OperatorInfo, j: int = 0, inferred: Any = None) -> list[int]:
        """The shape of output ``j``: the declared one when it is static, else ``inferred()``
        (the operator's own shape rule on its actual inputs)."""
        t = self.out_tensor(op, j)
        if not t.is_dynamic or op.outputs[j] in self._shapes:
            return [int(d) for d in t.shape]
        if inferred is None:
            raise self.unsupported(op, f"output {t.name!r} of dynamic shape {list(t.shape_signature or ())}")
        return [int(d) for d in inferred()]

    def _check_shape(self, op: OperatorInfo, t: TensorInfo, got: tuple[int, ...], what: str) -> None:
        """``got`` must be the shape the model declares for ``t`` (its static dimensions only, when
        it has dynamic ones); records it as the actual shape of a dynamic tensor."""
        if t.is_dynamic and t.shape_signature is not None:
            sig = tuple(t.shape_signature)
            if len(got) != len(sig) or any(s >= 0 and s != g for s, g in zip(sig, got)):
                raise self.malformed(op, f"the model declares {what} {t.name!r} of shape {list(sig)}, "
                                         f"the WebNN operators give {list(got)}")
            self._shapes[t.index] = got
        elif got != tuple(t.shape):
            raise self.malformed(op, f"the model declares {what} {t.name!r} of shape {list(t.shape)}, "
                                     f"the WebNN operators give {list(got)}")

    def axis(self, op: OperatorInfo, axis: int, rank: int) -> int:
        """``axis`` made non-negative for a tensor of rank ``rank``."""
        if not -rank <= axis < rank:
            raise self.malformed(op, f"axis {axis} out of range for rank {rank}")
        return axis % rank

    def value(self, op: OperatorInfo, i: int) -> np.ndarray:
        """The constant value of input ``i`` (a parameter such as a shape or axes)."""
        t = self.tensor(op, i)
        if t.index in self._folded:
            return self._folded[t.index]
        if t.data is None:
            raise self.unsupported(op, f"a run-time value for input {i} ({t.name!r}); it must be a constant")
        return t.data

    def static(self, op: OperatorInfo, i: int) -> np.ndarray | None:
        """The value of input ``i`` when it is known at load time (stored or folded), else None."""
        if i >= len(op.inputs) or op.inputs[i] < 0:
            return None
        t = self.model.tensors[op.inputs[i]]
        if t.index in self._folded:
            return self._folded[t.index]
        if t.data is not None and (t.quantization is None or t.type_name in _FLOAT_TYPES):
            return t.data  # (also when an operator already made it a constant operand)
        if t.data is not None and t.quantization is not None and t.type_name in ("INT8", "UINT8", "INT16") and \
                any(self.model.tensors[j].type_name in _FLOAT_TYPES for j in op.outputs):
            return dequantize(t.data, t.quantization)  # int8 weights of a float operator, as _constant
        return None

    def entry(self, op: OperatorInfo, i: int) -> Any:
        """Input ``i`` as a load-time value (np.ndarray) when it has one, else its operand."""
        value = self.static(op, i)
        return value if value is not None else self.operand(op, i)

    def set_entry(self, op: OperatorInfo, value: Any, j: int = 0) -> None:
        """Record output ``j``: a load-time value (np.ndarray) or an operand."""
        if isinstance(value, np.ndarray):
            self.set_constant(op, value, j)
        else:
            self.set_output(op, value, j)

    def call_subgraph(self, op: OperatorInfo, index: int, args: list[Any], prefix: str) -> list[Any]:
        """Convert subgraph ``index`` with its inputs bound to ``args`` (values or operands).

        Returns its outputs, each a load-time value (np.ndarray) when every operator on
        its path folded, else an operand.
        """
        subgraphs = self.model.subgraphs
        if not 0 < index < len(subgraphs):
            raise self.malformed(op, f"subgraph index {index} (the model has {len(subgraphs)})")
        sub = subgraphs[index]
        if len(sub.inputs) != len(args):
            raise self.malformed(op, f"subgraph {index} has {len(sub.inputs)} inputs, the operator passes {len(args)}")
        child = Converter(sub, self.builder, self.float_type, label_prefix=self.label_prefix + prefix,
                          custom_ops=self.custom_ops)
        for ti, arg in zip(sub.inputs, args):
            if isinstance(arg, np.ndarray):
                child._folded[ti] = arg
            else:
                child._operands[ti] = arg
            if sub.tensors[ti].is_dynamic:
                child._shapes[ti] = tuple(int(d) for d in arg.shape)
        run_operators(child, sub.operators)
        outs = []
        for ti in sub.outputs:
            if ti in child._folded:
                outs.append(child._folded[ti])
            elif ti in child._operands:
                outs.append(child._operands[ti])
            elif (stored := sub.tensors[ti].data) is not None:
                outs.append(stored)
            else:
                raise self.malformed(op, f"subgraph {index} output {sub.tensors[ti].name!r} is not computed")
        return outs

    def operand(self, op: OperatorInfo, i: int) -> Any:
        """The builder operand of input ``i``: an earlier result, a graph input or a constant."""
        t = self.tensor(op, i)
        if t.index in self._operands:
            return self._operands[t.index]
        if t.index in self._folded or t.data is not None:
            operand = self._constant(op, t)
            self._operands[t.index] = operand
            return operand
        raise self.malformed(op, f"input {i} ({t.name!r}) is neither a graph input, a constant "
                                 "nor the result of an earlier operator")

    def optional_operand(self, op: OperatorInfo, i: int) -> Any | None:
        """Like :meth:`operand`, or None when the optional input ``i`` is omitted."""
        if i >= len(op.inputs) or op.inputs[i] < 0:
            return None
        return self.operand(op, i)

    def _constant(self, op: OperatorInfo, t: TensorInfo) -> Any:
        value = self._folded.get(t.index)
        if value is None:
            value = t.data
            if t.quantization is not None and t.type_name not in _FLOAT_TYPES:
                float_op = any(self.model.tensors[j].type_name in _FLOAT_TYPES for j in op.outputs)
                if t.type_name not in ("INT8", "UINT8", "INT16") or not float_op or value is None:
                    raise self.unsupported(op, f"quantized tensor {t.name!r} ({t.type_name}) in an operator "
                                               "with quantized outputs (quantized models are not supported)")
                # int8 weights of a float operator (dynamic-range quantization): dequantized here.
                value = dequantize(value, t.quantization)
        assert value is not None
        data_type: str | None
        if value.dtype == np.bool_:
            value = value.astype(np.uint8)
        if value.dtype.kind == "f":
            data_type = self.float_type
            if value.dtype != self._np_float:
                with np.errstate(over="ignore"):  # checked below
                    cast = value.astype(self._np_float)
                if not np.isfinite(cast).all() and np.isfinite(value).all():
                    raise self.unsupported(op, f"constant {t.name!r} whose values exceed the {data_type} range")
                value = cast
        else:
            operand = self.int_constant(value)
            if operand is None:
                raise self.unsupported(op, f"constant {t.name!r} of type {t.type_name}")
            return operand
        value = np.array(value, order="C")  # (np.ascontiguousarray would make a scalar 1-D)
        return self.builder.constant({"data_type": data_type, "shape": list(value.shape)}, value)

    def int_constant(self, value: np.ndarray) -> Any | None:
        """A constant operand of an integer or boolean (as uint8) value known at load time, or
        None where its type has no WebNN twin (int16)."""
        if value.dtype == np.bool_:
            value = value.astype(np.uint8)
        data_type = _dtypes.from_numpy(value.dtype) if value.dtype.kind in "iu" else None
        if data_type is None:
            return None
        value = np.array(value, order="C")  # (np.ascontiguousarray would make a scalar 1-D)
        return self.builder.constant({"data_type": data_type, "shape": list(value.shape)}, value)

    def data_type(self, t: TensorInfo) -> str | None:
        """The WebNN data type of tensor ``t`` in this graph (float types follow the graph's
        float type, BOOL is uint8), or None where it has none."""
        return self.float_type if t.type_name in _FLOAT_TYPES else _INT_TYPES.get(t.type_name)

    def constant_like(self, op: OperatorInfo, i: int, value: np.ndarray) -> Any:
        """A float constant operand of ``value`` in the graph's float type (a value the loader
        computed in place of input ``i``; named after it in errors)."""
        with np.errstate(over="ignore"):  # checked below
            cast = np.asarray(value).astype(self._np_float)
        if not np.isfinite(cast).all() and np.isfinite(value).all():
            raise self.unsupported(op, f"a computed constant for input {i} whose values exceed the "
                                       f"{self.float_type} range")
        return self.builder.constant({"data_type": self.float_type, "shape": list(cast.shape)}, np.array(cast, order="C"))

    def scalar_constant(self, v: float, data_type: str) -> Any:
        """A rank-0 constant operand."""
        arr = np.asarray(v, dtype=np.float16 if data_type == "float16" else np.float32)
        return self.builder.constant({"data_type": data_type, "shape": []}, arr)

    def set_output(self, op: OperatorInfo, operand: Any, j: int = 0) -> None:
        """Record ``operand`` as output ``j`` of ``op``, checking the shape the model declares."""
        t = self.model.tensors[self.out_tensor(op, j).index]
        self._check_shape(op, t, tuple(int(d) for d in operand.shape), "output")
        self._operands[t.index] = operand

    def set_constant(self, op: OperatorInfo, value: np.ndarray, j: int = 0) -> None:
        """Record a value computed at load time as output ``j`` of ``op``."""
        t = self.model.tensors[self.out_tensor(op, j).index]
        value = np.asarray(value)
        if t.type_name in _INT_TYPES and t.type_name != "BOOL" and value.dtype.kind in "biu":
            value = value.astype(np.dtype(_INT_TYPES[t.type_name]))
        self._check_shape(op, t, tuple(value.shape), "folded output")
        self._folded[t.index] = value

    # -- graph inputs
    def declare_input(self, t: TensorInfo, name: str, shape: Any = None) -> dict[str, Any]:
        """Make the graph input of tensor ``t``: of ``shape`` when given (it must fit the
        shape signature), else of the declared shape (a dynamic dimension at the size the
        file gives it, 1 for a batch dimension: what LiteRT allocates before a resize)."""
        if shape is None:
            shape = t.shape
        else:
            shape = tuple(int(d) for d in shape)
            sig = tuple(t.shape_signature if t.shape_signature is not None else t.shape)
            if len(shape) != len(sig) or any(d < 1 or (s >= 0 and s != d) for s, d in zip(sig, shape)):
                raise _located(MLTypeError, f"tflite.load: input_shapes[{name!r}] is {list(shape)}; the model's "
                                            f"input {t.name!r} has shape {list(sig)} (-1: any size >= 1)")
        if t.quantization is not None and t.type_name not in _FLOAT_TYPES:
            raise _located(NotSupportedError, f"tflite.load: input {t.name!r} is quantized ({t.type_name}); "
                                              "quantized models are not supported")
        data_type = self.data_type(t)
        if data_type is None:
            raise _located(NotSupportedError, f"tflite.load: input {t.name!r} of type {t.type_name}")
        desc = {"data_type": data_type, "shape": [int(d) for d in shape]}
        self._operands[t.index] = self.builder.input(name, desc)
        if t.is_dynamic:
            self._shapes[t.index] = tuple(int(d) for d in shape)
        return desc


def _unique_names(model: ModelInfo, indices: tuple[int, ...], prefix: str, taken: set[str]) -> list[str]:
    names = []
    for k, ti in enumerate(indices):
        name = model.tensors[ti].name or f"{prefix}{k}"
        if name in taken:
            name = f"{prefix}{k}"
            while name in taken:
                name += "_"
        taken.add(name)
        names.append(name)
    return names


def convert(model: ModelInfo, builder: Any, dtype: str = "float32", custom_ops=None,
            input_shapes: dict | None = None) -> Converted:
    """Emit the builder calls for ``model`` and return the output operands (no ``build()``).

    Arguments:
        model (ModelInfo): a model read by :func:`~.reader.read_model`.
        builder: an ``MLGraphBuilder`` (or any object with its methods).
        dtype (str): ``"float32"`` or ``"float16"``: the type of every float tensor of
            the graph (inputs, constants, outputs). Default ``"float32"``.
        custom_ops (dict | None): custom op code -> ``fn(builder, inputs, attributes)``
            (see :mod:`.custom`).
        input_shapes (dict | None): input name -> shape, for inputs with dynamic
            dimensions (``-1`` in the shape signature, e.g. a batch size left open); by
            default such a dimension has the size the file declares (1 for a batch).

    Returns:
        Converted: outputs (name -> operand) and input descriptors.

    Raises:
        MLTypeError: ``dtype`` is not one of :data:`GRAPH_DTYPES`; an ``input_shapes``
            entry that names no input or does not fit its shape signature.
        NotSupportedError: an operator, option or tensor type the loader cannot map,
            naming the op code and the operator's index.
        DataError: the model is inconsistent (a shape that does not follow, a missing input).
        The builder's own errors, with the TFLite operator named in the message.
    """
    if dtype not in GRAPH_DTYPES:
        raise MLTypeError(f"tflite.load: dtype must be one of {list(GRAPH_DTYPES)}, got {dtype!r}")
    if not model.outputs:
        raise DataError("tflite.load: the model's main subgraph has no outputs")
    from .custom import check_custom_ops

    custom = check_custom_ops(custom_ops)
    inert = inert_state_operators(model)
    check_mapped(model, custom, inert)
    cv = Converter(model, builder, dtype, custom_ops=custom)
    cv.claimed |= inert
    taken: set[str] = set()
    input_names = _unique_names(model, model.inputs, "input_", taken)
    output_names = _unique_names(model, model.outputs, "output_", taken)
    input_shapes = dict(input_shapes or {})
    unknown = sorted(set(input_shapes) - set(input_names))
    if unknown:
        raise MLTypeError(f"tflite.load: input_shapes names {unknown}, which are not inputs of the model "
                          f"({input_names})")
    inputs = {name: cv.declare_input(model.tensors[ti], name, input_shapes.get(name))
              for name, ti in zip(input_names, model.inputs)}

    run_operators(cv, model.operators)

    outputs: dict[str, Any] = {}
    for name, ti in zip(output_names, model.outputs):
        if ti in cv._folded and ti not in cv._operands and model.operators:  # a value known at load time
            cv._operands[ti] = builder.identity(cv._constant(model.operators[-1], model.tensors[ti]),
                                                label=f"output {name}")
        if ti in model.inputs and ti in cv._operands:  # an input passed through (Keras' linear activation)
            cv._operands[ti] = builder.identity(cv._operands[ti], label=f"output {name}")
        if ti not in cv._operands:
            raise _located(NotSupportedError, f"tflite.load: model output {name!r} is not computed by any "
                                              "operator")
        if isinstance(cv._operands[ti], Complex):
            raise _located(NotSupportedError, f"tflite.load: model output {name!r} is complex (an RFFT2D's "
                                              "result); WebNN has no complex type")
        outputs[name] = cv._operands[ti]
    return Converted(
        outputs=outputs,
        inputs=inputs,
        input_tensors=dict(zip(input_names, model.inputs)),
        output_tensors=dict(zip(output_names, model.outputs)),
    )


#: Why the loader refuses some operators it knows (added to the NotSupportedError).
REFUSED_BECAUSE = {
    name: "resource variables: a stateful layer (Keras' stateful=True) keeps its state between invocations, "
          "a webnn-gpu graph keeps none" for name in ("VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE", "CALL_ONCE")
}


#: The operators of resource variables (a stateful layer's state, a seed generator's).
STATE_OPS = frozenset({"VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE", "CALL_ONCE"})


def inert_state_operators(model: ModelInfo) -> set[int]:
    """The main subgraph's operators that no model output needs, when the model has resource
    variables and no output depends on one; else the empty set.

    Keras 3's random augmentation layers (``RandomFlip``, ``RandomRotation``, ...) are the
    identity at inference, but each call still advances its seed generator: ``READ_VARIABLE``,
    ``ADD``, ``ASSIGN_VARIABLE``, set up by a ``CALL_ONCE``. That state reaches no output, so
    the loader leaves those operators out (a layer whose output reads a variable, Keras'
    ``stateful=True``, is still refused).
    """
    ops = model.operators
    if not any(op.name in STATE_OPS for op in ops):
        return set()
    producer = {t: op.index for op in ops for t in op.outputs}
    needed: set[int] = set()
    todo = [producer[t] for t in model.outputs if t in producer]
    while todo:
        i = todo.pop()
        if i in needed:
            continue
        needed.add(i)
        todo.extend(producer[t] for t in ops[i].inputs if t in producer)
    if any(ops[i].name in STATE_OPS for i in needed):
        return set()
    return {op.index for op in ops if op.index not in needed}


def check_mapped(model: ModelInfo, custom_ops: dict | None = None,
                 skip: set[int] | frozenset[int] = frozenset()) -> None:
    """Raise one NotSupportedError listing every operator (of every subgraph) with no handler.

    A custom op code that ``custom_ops`` maps has one; an unmapped one names that option.
    ``skip``: main-subgraph operators the loader leaves out (:func:`inert_state_operators`);
    the subgraphs only their ``CALL_ONCE`` runs are left out too.
    """
    custom_ops = custom_ops or {}
    missing = []
    hint = ""
    init_only = {int(o.InitSubgraphIndex()) for op in model.operators
                 if op.index in skip and op.name == "CALL_ONCE" and (o := op.options(_fb.CallOnceOptions)) is not None}
    for sub in model.subgraphs or [model]:
        where = f"subgraph {sub.subgraph_index} " if sub.subgraph_index else ""
        if sub.subgraph_index in init_only:
            continue
        for op in sub.operators:
            if op.opcode == "CUSTOM" and op.custom_code in custom_ops:
                continue
            if sub.subgraph_index == model.subgraph_index and op.index in skip:
                continue
            if op.name not in HANDLERS:
                if op.opcode == "CUSTOM":
                    hint = (f"; map a custom op with load(..., custom_ops={{{op.custom_code!r}: fn}}), "
                            "fn(builder, inputs, attributes) -> outputs")
                what = f"custom op {op.custom_code!r}" if op.opcode == "CUSTOM" else f"op code {op.opcode}"
                missing.append(f"{where}operator #{op.index} {op.name} ({what})")
    if missing:
        names = sorted({m.split(" (")[0].rsplit(" ", 1)[1] for m in missing})
        reasons = sorted({REFUSED_BECAUSE[n] for n in names if n in REFUSED_BECAUSE})
        hint += "".join(f"; {r} ({', '.join(n for n in names if REFUSED_BECAUSE.get(n) == r)})" for r in reasons)
        raise _located(NotSupportedError,
                       f"tflite.load: {len(missing)} operator(s) of the model are not supported "
                       f"({', '.join(names)}): {'; '.join(missing)}{hint} "
                       f"(supported: {', '.join(sorted(HANDLERS))})")


def run_operators(cv: Converter, operators: list[OperatorInfo]) -> None:
    """Emit the builder calls of ``operators`` in order (folding what is known at load time)."""
    builder = cv.builder
    for op in operators:
        if op.index in cv.claimed:
            continue
        handler = HANDLERS.get(op.name)
        if op.opcode == "CUSTOM" and op.custom_code in cv.custom_ops:
            from .custom import custom_handler

            handler = custom_handler(cv.custom_ops[op.custom_code])
        if handler is None:
            what = f"custom op {op.custom_code!r}" if op.opcode == "CUSTOM" else f"op code {op.opcode}"
            raise _located(NotSupportedError, f"{cv.where(op)}: {what} is not supported "
                                              f"(supported: {', '.join(sorted(HANDLERS))})")
        if op.name not in COMPLEX_READERS and \
                any(isinstance(cv._operands.get(t), Complex) for t in op.inputs if t >= 0):
            raise cv.unsupported(op, "a complex input (an RFFT2D's result; COMPLEX_ABS, REAL, IMAG and "
                                     "reshapes read one)")
        folder = FOLDERS.get(op.name)
        try:
            if folder is not None and folder(cv, op):
                continue
            handler(cv, op)
        except AttributeError as exc:
            if getattr(exc, "obj", None) is not builder:
                raise
            raise _located(NotSupportedError,
                           f"{cv.where(op)}: this MLGraphBuilder has no method {exc.name!r}, "
                           f"which {op.name} needs") from exc
        except (WebNNError, TypeError, ValueError, NotImplementedError) as exc:
            if getattr(exc, "_tflite_located", False):
                raise
            raise _located(type(exc) if isinstance(exc, WebNNError) else
                           MLTypeError if isinstance(exc, TypeError) else
                           DataError if isinstance(exc, ValueError) else NotSupportedError,
                           f"{cv.where(op)} (label {cv.label(op)!r}): {exc}") from exc
