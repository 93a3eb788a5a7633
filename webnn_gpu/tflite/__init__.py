"""Load TensorFlow Lite (.tflite) models as WebNN graphs.

``load(path_or_bytes, context)`` reads the flatbuffer with the ``tflite`` package and
builds an :class:`MLGraph` through the public :class:`MLGraphBuilder` API only: one
TFLite operator becomes one (or a few) WebNN operators, the weights become
``builder.constant(...)`` operands, and the layout stays TFLite's NHWC. See
``docs/model_loading.md`` for the table of supported operators.

Example::

    import webnn_gpu as webnn
    from webnn_gpu import models, tflite

    ctx = webnn.ml.create_context()
    model = tflite.load(models.fetch("selfie-segmentation"), ctx)
    mask = model.compute({"input_1": image})["activation_10"]     # NHWC, float32
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import pathlib
import sys
import types
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import MLTypeError

if TYPE_CHECKING:  # imported at first use (_LAZY)
    from .convert import convert
    from .ops import MAPPED_TO
    from .reader import ModelInfo, OperatorInfo, TensorInfo, read_model

__all__ = [
    "load",
    "LoadedModel",
    "read_model",
    "convert",
    "supported_ops",
    "ModelInfo",
    "OperatorInfo",
    "TensorInfo",
]


#: The float data types a model can be built in.
GRAPH_DTYPES = ("float32", "float16")

#: The names this package gives from its submodules (name -> submodule), imported at their
#: first use (:func:`_import_converter`): a load built from its kept plan
#: (:mod:`webnn_gpu._plancache`) reads and converts nothing, and the reader, the converter and
#: the operator tables are 9 ms of imports (with bytecode) on the main thread of a warm load.
_LAZY = {"read_model": "reader", "ModelInfo": "reader", "OperatorInfo": "reader", "TensorInfo": "reader",
         "convert": "convert", "MAPPED_TO": "ops"}


def _import_converter() -> None:
    """Import :data:`_LAZY`'s names into this package's namespace; a name already set to
    something other than a module (a caller's wrapper, a test's stand-in) is kept."""
    names = globals()
    for name, module in _LAZY.items():
        current = names.get(name)
        if current is None or isinstance(current, types.ModuleType):
            names[name] = getattr(importlib.import_module(f"{__name__}.{module}"), name)


def __getattr__(name: str) -> Any:
    """The reader's and converter's names (:data:`_LAZY`), imported at their first use."""
    if name in _LAZY:
        _import_converter()
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    """This package's names, the ones imported at first use included."""
    return sorted(set(globals()) | set(_LAZY))


class _Package(types.ModuleType):
    """This package's module type. Importing the submodule ``convert`` sets the package's
    attribute of that name to the module; the function :func:`convert` (or what a caller set
    in its place) stays the attribute, as when the package imported it eagerly."""

    def __setattr__(self, name: str, value: Any) -> None:
        """Set ``name``; the ``convert`` submodule set as an attribute leaves the function."""
        if name == "convert" and isinstance(value, types.ModuleType):
            kept = self.__dict__.get(name)
            value = kept if kept is not None and not isinstance(kept, types.ModuleType) else value.convert
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def read_source(source: str | os.PathLike | bytes | bytearray | memoryview) -> bytes:
    """The bytes of a model given as a path or as bytes.

    Raises:
        TypeError: ``source`` is of another type.
        OSError: the file cannot be read.
    """
    if isinstance(source, (bytes, bytearray, memoryview)):
        return bytes(source)
    if isinstance(source, (str, os.PathLike)):
        return pathlib.Path(source).read_bytes()
    raise TypeError(
        f"tflite.load: source must be a path (str or os.PathLike) or bytes, got {type(source).__name__}"
    )


def supported_ops() -> dict[str, str]:
    """The TFLite operators the loader maps, with the WebNN builder methods they become.

    Returns:
        dict[str, str]: op name (builtin code name or custom code) -> WebNN description.
    """
    from .ops import MAPPED_TO

    return dict(sorted(MAPPED_TO.items()))


@dataclasses.dataclass
class LoadedModel:
    """A model built as a WebNN graph.

    Returned by both the TFLite loader (``tflite.load``) and the ONNX importer
    (``onnx.load``).

    Attributes:
        graph: the built ``MLGraph``.
        context: the ``MLContext`` it was built for.
        inputs: input name -> ``{"data_type", "shape"}``, in the model's order.
        outputs: output name -> ``{"data_type", "shape"}``, in the model's order.
        dtype: the float type the graph was built in (``"float32"`` or ``"float16"``).
        layout: the tensors keep the source format's layout: ``"nhwc"`` for a TFLite model
            (batch, height, width, channels), ``"nchw"`` for an ONNX model (batch,
            channels, height, width).
        op_counts: operator name -> how many the model has (TFLite: builtin code name or
            custom code; ONNX: the op type, ``"domain.OpType"`` outside the default
            domains).
        description: the model's description string (ONNX: its ``doc_string``, else its
            ``producer_name``).
    """

    graph: Any
    context: Any
    inputs: dict[str, dict[str, Any]]
    outputs: dict[str, dict[str, Any]]
    dtype: str
    layout: str
    op_counts: dict[str, int]
    description: str = ""

    @classmethod
    def build(cls, builder: Any, outputs: dict[str, Any], inputs: dict[str, dict[str, Any]], *, context: Any,
              dtype: str, layout: str, op_counts: dict[str, int], description: str = "") -> "LoadedModel":
        """Build ``builder``'s graph of ``outputs`` (name -> operand) and describe it.

        ``inputs`` are the loader's input descriptors; those the compiled graph does not
        read (an input only a folded value depended on) are left out.
        """
        graph = builder.build(outputs)
        return cls(
            graph=graph,
            context=context,
            inputs={k: v for k, v in inputs.items() if k in graph.inputs},
            outputs={name: {"data_type": operand.data_type, "shape": [int(d) for d in operand.shape]}
                     for name, operand in outputs.items()},
            dtype=dtype,
            layout=layout,
            op_counts=op_counts,
            description=description,
        )

    @classmethod
    def from_plan(cls, plan: Any, *, context: Any, **description: Any) -> "LoadedModel":
        """Build the graph of a lowered ``plan`` (``webnn_gpu.graph.BuildPlan``, as
        :mod:`webnn_gpu._plancache` keeps it) on ``context``; ``description``: the other fields
        (:meth:`describe` of the model it was lowered from)."""
        from ..graph import MLGraph

        context._check_alive("build")
        with context._lock, context._guard("build", "compiling the graph"):
            graph = MLGraph._from_plan(context, plan)
        return cls(graph=graph, context=context, **description)

    def describe(self) -> dict[str, Any]:
        """The fields other than ``graph`` and ``context`` (plain data)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in ("graph", "context")}

    @property
    def input_names(self) -> list[str]:
        """The input names, in the model's order."""
        return list(self.inputs)

    @property
    def output_names(self) -> list[str]:
        """The output names, in the model's order."""
        return list(self.outputs)

    def compute(self, inputs: dict[str, np.ndarray] | np.ndarray) -> dict[str, np.ndarray]:
        """Run the graph once with ``context.compute`` (a convenience).

        Arguments:
            inputs: name -> array, or a single array for a model with one input. Arrays
                are converted to the input's data type (e.g. float16 for a float16 graph).

        Returns:
            dict[str, np.ndarray]: output name -> array.

        Raises:
            MLTypeError: a single array for a model with several inputs, or unknown names.
            The context's own errors.
        """
        if not isinstance(inputs, dict):
            if len(self.inputs) != 1:
                raise MLTypeError(f"LoadedModel.compute: the model has inputs {self.input_names}; "
                                  "pass a dict name -> array")
            inputs = {self.input_names[0]: inputs}
        unknown = set(inputs) - set(self.inputs)
        if unknown:
            raise MLTypeError(f"LoadedModel.compute: unknown input names {sorted(unknown)}; "
                              f"expected {self.input_names}")
        arrays = {name: np.ascontiguousarray(value, dtype=np.dtype(self.inputs[name]["data_type"]))
                  for name, value in inputs.items()}
        return self.context.compute(self.graph, arrays)


def load(
    source: str | os.PathLike | bytes,
    context: Any,
    *,
    dtype: str = "float32",
    custom_ops: dict | None = None,
    input_shapes: dict | None = None,
) -> LoadedModel:
    """Build a WebNN graph from a .tflite model.

    A model built before with the same options on the same kind of device and engine is built
    from the lowered plan kept on disk then (:mod:`webnn_gpu._plancache`): the flatbuffer is
    neither read nor converted again; the graph is the same.

    Arguments:
        source (str | os.PathLike | bytes): the model file's path, or its bytes.
        context (MLContext): the context to build the graph for.
        dtype (str): ``"float32"`` (default) or ``"float16"``: the type of every float
            tensor of the graph, its inputs, constants and outputs included. float16
            weights stored in the model (DEQUANTIZE of float16 constants) are used as
            they are in float16 graphs and widened exactly in float32 ones.
        custom_ops (dict | None): TFLite custom op code -> ``fn(builder, inputs,
            attributes) -> outputs``, which builds the operator (e.g. with
            ``builder.wgsl``); see :mod:`webnn_gpu.tflite.custom`.
        input_shapes (dict | None): input name -> shape for inputs with dynamic
            dimensions (``-1`` in the model's shape signature, e.g. the batch size a
            Keras model leaves open), as LiteRT's ``resize_tensor_input``. By default such
            a dimension has the size the file declares (1 for a batch dimension).

    Returns:
        LoadedModel: the graph, its input and output descriptors, and the op counts.

    Raises:
        MLTypeError: ``source`` or ``dtype`` of the wrong kind; an ``input_shapes`` entry
            naming no input or not fitting its shape signature.
        DataError: not a TFLite model, or a malformed one.
        NotSupportedError: an operator (named with its index), option, data type or
            dynamic shape the loader cannot map exactly.
        OSError: the file cannot be read.
        ModuleNotFoundError: the ``tflite`` package is missing (``pip install 'webnn-gpu[model]'``).
        The builder's errors (with the TFLite operator named in the message).
    """
    if dtype not in GRAPH_DTYPES:
        raise MLTypeError(f"tflite.load: dtype must be one of {list(GRAPH_DTYPES)}, got {dtype!r}")
    try:
        data = read_source(source)
    except TypeError as exc:
        raise MLTypeError(str(exc)) from None
    import webnn_gpu  # the engine's public API; imported here so reading needs no GPU

    from .. import _plancache

    builder = webnn_gpu.MLGraphBuilder(context)  # checks the context first: a hit fails as a miss does
    plan_key = None if custom_ops else _plancache.key("tflite", data, {"dtype": dtype, "input_shapes": input_shapes},
                                                      context)
    kept = _plancache.load(plan_key)
    if kept is not None:  # this model lowered before with the same engine, options and device
        return LoadedModel.from_plan(kept[0], context=context, **kept[1])
    _import_converter()  # a miss: the reader and the converter (through this package's names)
    model = read_model(data)
    converted = convert(model, builder, dtype, custom_ops, input_shapes)
    loaded = LoadedModel.build(builder, converted.outputs, converted.inputs, context=context, dtype=dtype,
                               layout="nhwc", op_counts=model.op_counts(), description=model.description)
    if plan_key is not None:
        _plancache.store(plan_key, loaded.graph._plan, loaded.describe())
    return loaded
