"""Load ONNX models as WebNN graphs.

``load(path_or_bytes, context)`` reads the protobuf with the ``onnx`` package
(``pip install 'webnn-gpu[onnx]'``) and builds an :class:`MLGraph` through the public
:class:`MLGraphBuilder` only: each ONNX node becomes one or a few WebNN operators,
initializers become ``builder.constant`` operands, and what exported graphs compute from
shapes (``Shape``, ``Gather``, ``Concat``, ``Range``, ``If`` on a known condition...) is
evaluated at load time. The layout stays ONNX's NCHW. See ``docs/onnx.md``.

Example::

    import webnn_gpu as webnn
    from webnn_gpu import models, onnx

    ctx = webnn.ml.create_context()
    model = onnx.load(models.fetch("magika"), ctx, dims={"batch": 1})
    scores = model.compute({"bytes": features})["target_label"]
"""

from __future__ import annotations

import os
from typing import Any

from ..errors import MLTypeError
from ..tflite import LoadedModel
from .convert import GRAPH_DTYPES, Converter, Unsupported
from .ops import MAPPED_TO
from .reader import is_onnx, read_onnx

__all__ = ["load", "LoadedModel", "supported_ops", "read_onnx", "is_onnx", "Unsupported"]


def supported_ops() -> dict[str, str]:
    """The ONNX operators the importer maps, with what they become.

    Returns:
        dict[str, str]: op type (``domain.OpType`` outside the default domain) -> WebNN
        description.
    """
    return dict(sorted(MAPPED_TO.items()))


def load(
    source: str | os.PathLike | bytes | Any,
    context: Any,
    *,
    dtype: str = "float32",
    dims: dict | None = None,
    custom_ops: dict | None = None,
    known_inputs: dict | None = None,
) -> LoadedModel:
    """Build a WebNN graph from an ONNX model.

    Arguments:
        source (str | os.PathLike | bytes | onnx.ModelProto): the ``.onnx`` file (external
            data is read from beside it), its bytes, or a parsed model.
        context (MLContext): the context to build the graph for.
        dtype (str): ``"float32"`` (default) or ``"float16"``: the type of every float and
            float16 tensor of the graph, its inputs, constants and outputs included.
        dims (dict | None): sizes of the model's symbolic dimensions, ``{"batch": 1}``;
            an input's name may also map to its whole shape.
        custom_ops (dict | None): ``{"domain.OpType" or "OpType": fn(builder, inputs,
            attributes) -> output operand(s)}`` for operators the importer does not map
            (or to replace a mapping). ``inputs`` are MLOperands (None for absent ones),
            ``attributes`` a dict of Python values.
        known_inputs (dict | None): graph inputs fixed to these values (NumPy arrays), which
            makes them constants of the graph (and lets shape inputs fold).

    Returns:
        LoadedModel: the graph, its input and output descriptors (``layout="nchw"``), the
        op counts. ``bool`` inputs and outputs are ``uint8`` (0 or 1).

    Raises:
        MLTypeError: ``dtype`` or ``dims`` of the wrong kind, or a symbolic dimension with
            no size in ``dims`` (the message names it and the inputs that use it).
        DataError: not an ONNX model, or a malformed one.
        NotSupportedError: every node whose operator, attribute or data type the importer
            cannot express exactly, listed at once (node name, op type, domain, opset).
        ModuleNotFoundError: the ``onnx`` package is missing (``pip install 'webnn-gpu[onnx]'``).
        The builder's errors (with the ONNX node named in the message).
    """
    if dtype not in GRAPH_DTYPES:
        raise MLTypeError(f"onnx.load: argument 'dtype': expected one of {list(GRAPH_DTYPES)}, got {dtype!r}")
    if dims is not None and not isinstance(dims, dict):
        raise MLTypeError(f"onnx.load: argument 'dims': expected a dict name -> size, got {type(dims).__name__}")
    if custom_ops is not None and not (isinstance(custom_ops, dict) and all(callable(f) for f in custom_ops.values())):
        raise MLTypeError("onnx.load: argument 'custom_ops': expected a dict op name -> callable")
    model: Any
    if hasattr(source, "graph") and hasattr(source, "opset_import"):
        model = source
    else:
        try:
            model = read_onnx(source)
        except TypeError as exc:
            raise MLTypeError(str(exc)) from None

    import webnn_gpu  # the engine's public API; imported here so reading needs no GPU

    builder = webnn_gpu.MLGraphBuilder(context)
    converted = Converter(model, builder, dtype, dims, custom_ops, known_inputs).run()
    return LoadedModel.build(builder, converted.outputs, converted.inputs, context=context, dtype=dtype,
                             layout="nchw", op_counts=converted.op_counts,
                             description=model.doc_string or model.producer_name)
