"""Quantization operators: quantize_linear and dequantize_linear.

Spec: https://www.w3.org/TR/webnn/#api-mlgraphbuilder-quantizelinear and
https://www.w3.org/TR/webnn/#api-mlgraphbuilder-dequantizelinear

* ``quantize_linear(input, scale, zero_point)``:
  ``saturate(round_half_to_even(input / scale) + zero_point)`` in the zero point's type.
* ``dequantize_linear(input, scale, zero_point)``: ``(input - zero_point) * scale`` in the
  scale's type.

``scale`` and ``zero_point`` have one shape. Aligned to the input's last dimensions (missing
leading dimensions count as 1), every input dimension must be a multiple of the scale's
dimension there: each scale element then covers one block of the input. This covers
per-tensor (shape ``[]`` or all ones), per-axis (``[1, C, 1, 1]`` or ``[C]`` on the last axis)
and blockwise quantization (``[6, 4, 5]`` input with a ``[2, 2, 1]`` scale: blocks of
``[3, 2, 5]``), and it is exactly the spec's unidirectional broadcast when the scale's
dimensions are 1 or equal to the input's.

Zero points of int8, uint8, int32 and uint32 are supported; int4/uint4 are not (webnn-gpu has
no 4-bit data type). Arithmetic is exact where it matters: the zero point is added in
integer arithmetic (saturation is exact even for int32/uint32 zero points), and the 32-bit
``input - zero_point`` of dequantize_linear is formed exactly and rounded once to f32. NaN
quantizes to the zero point; +-infinity saturates.
"""

from __future__ import annotations

from .. import _validate as V
from .._dtypes import FLOAT_TYPES as FLOATS
from .._kernels import strides
from ..builder import MLGraphBuilder, MLOperand
from ._registry import builder_method, lowering, support

#: Data types of quantized values (zero points, quantize_linear outputs, dequantize_linear inputs).
QUANT_TYPES = ("int8", "uint8", "int32", "uint32")
MAX_RANK = V.MAX_RANK

# Saturation bounds of each quantized type, as WGSL literals of its compute type.
_RANGES = {
    "int8": ("i32(-128)", "i32(127)"),
    "uint8": ("0u", "255u"),
    "int32": ("i32(-2147483648)", "i32(2147483647)"),
    "uint32": ("0u", "4294967295u"),
}


def _block_shape(op: str, label: str, input_shape, scale_shape) -> tuple[int, ...]:
    """Check the scale shape against the input shape; return the block shape per input axis."""
    r = len(input_shape)
    if len(scale_shape) > r:
        V.fail(op, label, "scale", f"a shape of rank <= {r} (the input's rank) whose dimensions divide the "
               f"input shape {list(input_shape)}", list(scale_shape))
    padded = (1,) * (r - len(scale_shape)) + tuple(scale_shape)
    for d, (i, s) in enumerate(zip(input_shape, padded)):
        if i % s != 0:
            V.fail(op, label, "scale",
                   f"a shape whose dimensions divide the input shape {list(input_shape)} (blockwise; input "
                   f"dimension {d} = {i} is not a multiple of {s})", list(scale_shape))
    return tuple(i // s for i, s in zip(input_shape, padded))


def _check_common(self: MLGraphBuilder, op: str, label: str, input, scale, zero_point):
    vi = self._operand(op, label, "input", input)
    vs = self._operand(op, label, "scale", scale)
    vz = self._operand(op, label, "zero_point", zero_point)
    return vi, vs, vz


def _check_params(op: str, label: str, vi, vs, vz) -> None:
    if tuple(vz.shape) != tuple(vs.shape):
        V.fail(op, label, "zero_point", f"the shape of 'scale' {list(vs.shape)}", list(vz.shape))
    _block_shape(op, label, vi.shape, vs.shape)


# IDL: MLOperand quantizeLinear(MLOperand input, MLOperand scale, MLOperand zeroPoint,
#                               optional MLOperatorOptions options = {});
@builder_method
def quantize_linear(self: MLGraphBuilder, input: MLOperand, scale: MLOperand, zero_point: MLOperand, *,
                    label: str = "", **kwargs) -> MLOperand:
    """Quantize floating-point values to integers: ``saturate(round_even(input / scale) + zero_point)``.

    Spec: https://www.w3.org/TR/webnn/#api-mlgraphbuilder-quantizelinear

    Arguments:
        input (MLOperand): float32 or float16, any rank.
        scale (MLOperand): the input's data type; a shape whose dimensions divide the input's
            (aligned to its last dimensions): per-tensor, per-axis or blockwise.
        zero_point (MLOperand): int8, uint8, int32 or uint32, the shape of ``scale``.
        label (str): a name for errors and GPU objects.

    Returns:
        MLOperand: the input's shape, of the zero point's data type. Halfway cases round to
        even; results saturate to the data type's range; NaN gives the zero point.

    Raises:
        MLTypeError: a data type outside the lists above, a scale of another data type than
            the input, a zero point shape different from the scale's, a scale shape that does
            not divide the input shape, an operand of another builder, an unknown option.
        InvalidStateError: the builder has built its graph, or the context is gone.
    """
    op = "quantize_linear"
    V.check_kwargs(op, label, kwargs)
    self._check_usable(op, label)
    vi, vs, vz = _check_common(self, op, label, input, scale, zero_point)
    if vi.data_type not in FLOATS:
        V.fail(op, label, "input", "an operand of data type float32 or float16", vi.data_type)
    if vs.data_type != vi.data_type:
        V.fail(op, label, "scale", f"the data type of 'input' ({vi.data_type})", vs.data_type)
    if vz.data_type not in QUANT_TYPES:
        V.fail(op, label, "zero_point", f"an operand of data type {', '.join(QUANT_TYPES)}", vz.data_type)
    _check_params(op, label, vi, vs, vz)
    return self._emit1(op, [vi, vs, vz], vz.data_type, vi.shape, label=label)


# IDL: MLOperand dequantizeLinear(MLOperand input, MLOperand scale, MLOperand zeroPoint,
#                                 optional MLOperatorOptions options = {});
@builder_method
def dequantize_linear(self: MLGraphBuilder, input: MLOperand, scale: MLOperand, zero_point: MLOperand, *,
                      label: str = "", **kwargs) -> MLOperand:
    """Turn quantized integers back into floating point: ``(input - zero_point) * scale``.

    Spec: https://www.w3.org/TR/webnn/#api-mlgraphbuilder-dequantizelinear

    Arguments:
        input (MLOperand): int8, uint8, int32 or uint32, any rank.
        scale (MLOperand): float32 or float16; a shape whose dimensions divide the input's
            (aligned to its last dimensions): per-tensor, per-axis or blockwise.
        zero_point (MLOperand): the input's data type, the shape of ``scale``.
        label (str): a name for errors and GPU objects.

    Returns:
        MLOperand: the input's shape, of the scale's data type.

    Raises:
        MLTypeError: a data type outside the lists above, a zero point of another data type
            than the input, a zero point shape different from the scale's, a scale shape that
            does not divide the input shape, an operand of another builder, an unknown option.
        InvalidStateError: the builder has built its graph, or the context is gone.
    """
    op = "dequantize_linear"
    V.check_kwargs(op, label, kwargs)
    self._check_usable(op, label)
    vi, vs, vz = _check_common(self, op, label, input, scale, zero_point)
    if vi.data_type not in QUANT_TYPES:
        V.fail(op, label, "input", f"an operand of data type {', '.join(QUANT_TYPES)}", vi.data_type)
    if vs.data_type not in FLOATS:
        V.fail(op, label, "scale", "an operand of data type float32 or float16", vs.data_type)
    if vz.data_type != vi.data_type:
        V.fail(op, label, "zero_point", f"the data type of 'input' ({vi.data_type})", vz.data_type)
    _check_params(op, label, vi, vs, vz)
    return self._emit1(op, [vi, vs, vz], vs.data_type, vi.shape, label=label)


_R = (0, MAX_RANK)
support("quantize_linear", {"input": (FLOATS, _R), "scale": (FLOATS, _R), "zero_point": (QUANT_TYPES, _R)},
        (QUANT_TYPES, _R))
support("dequantize_linear", {"input": (QUANT_TYPES, _R), "scale": (FLOATS, _R), "zero_point": (QUANT_TYPES, _R)},
        (FLOATS, _R))


# ---------------------------------------------------------------- lowering
def _param_terms(input_shape, scale_shape) -> list[tuple[int, int, int]]:
    """(axis, block length, scale stride) for every axis where the scale varies."""
    r = len(input_shape)
    padded = (1,) * (r - len(scale_shape)) + tuple(scale_shape)
    st = strides(padded)
    return [(d, input_shape[d] // padded[d], st[d]) for d in range(r) if padded[d] != 1]


@lowering("quantize_linear", "dequantize_linear")
def lower_quantize(node, lc) -> None:
    """One kernel: an invocation per element; the scale index comes from the block coordinates."""
    vi, vs, vz = node.inputs
    out = node.outputs[0]
    qtype = vz.data_type
    lo, hi = _RANGES[qtype]
    lc.kernel(f"quantize/{node.op}.wgsl", [("input", vi), ("scale", vs), ("zero_point", vz)], [("out", out)],
              out.size, terms=_param_terms(vi.shape, vs.shape), out_strides=strides(vi.shape), qtype=qtype,
              lo=lo, hi=hi)
