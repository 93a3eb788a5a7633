"""The TFLite operator -> WebNN builder mapping table.

Each handler maps one TFLite operator one-to-one onto public ``MLGraphBuilder``
methods, keeping TFLite's NHWC layout (convolutions use ``input_layout="nhwc"`` and
the filter layout TFLite stores: ``"ohwi"`` for CONV_2D and transposed convolutions,
``"ihwo"`` for DEPTHWISE_CONV_2D). SAME/VALID padding is turned into explicit
WebNN padding here. A handler is entered in :data:`HANDLERS` with :func:`handles`;
the table is also what ``docs/model_loading.md`` lists.

Anything a handler cannot express exactly raises :class:`NotSupportedError` naming
the operator and its index: the loader never builds a graph that silently differs
from the model.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from .. import _dtypes, _topk
from ..errors import DataError, NotSupportedError
from .reader import _fb, dequantize  # _fb: the tflite package's classes, imported as used (None: missing)

if TYPE_CHECKING:  # pragma: no cover
    from .convert import Converter
    from .reader import OperatorInfo

__all__ = [
    "HANDLERS",
    "FOLDERS",
    "strided_slice_plan",
    "handles",
    "same_padding",
    "conv_padding",
    "transpose_conv_bias_padding",
    "transpose_output_padding",
    "decode_transpose_conv_bias_options",
    "TransposeConvBiasParams",
]

Handler = Callable[["Converter", "OperatorInfo"], None]

#: Op name (builtin op code name, or the custom code of a CUSTOM op) -> handler.
HANDLERS: dict[str, Handler] = {}

#: Op name -> the WebNN builder method(s) it becomes (for the docs and error hints).
MAPPED_TO: dict[str, str] = {}

#: Op name -> ``folder(cv, op) -> bool``: computes the outputs at load time (NumPy, the
#: op's TFLite definition) when the inputs are known then, and says whether it did.
FOLDERS: dict[str, Callable[["Converter", "OperatorInfo"], bool]] = {}

# TFLite enums (schema.fbs), spelled out so the unit tests need no GPU nor builder.
PADDING_SAME, PADDING_VALID = 0, 1
ACT_NONE, ACT_RELU, ACT_RELU_N1_TO_1, ACT_RELU6, ACT_TANH, ACT_SIGN_BIT = range(6)
_ACT_NAMES = {0: "NONE", 1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6", 4: "TANH", 5: "SIGN_BIT"}


def handles(*names: str, webnn: str) -> Callable[[Handler], Handler]:
    """Register the decorated function as the handler of the TFLite ops ``names``."""

    def register(fn: Handler) -> Handler:
        for name in names:
            if name in HANDLERS:
                raise RuntimeError(f"TFLite op {name} has two handlers")
            HANDLERS[name] = fn
            MAPPED_TO[name] = webnn
        return fn

    return register


# ----------------------------------------------------------------------------- pure helpers


def same_padding(in_size: int, kernel: int, stride: int, dilation: int = 1) -> tuple[int, int]:
    """TFLite/TensorFlow SAME padding of one spatial axis as (beginning, ending).

    The output size is ``ceil(in_size / stride)``; the total padding is what makes the
    dilated window fit, and the odd pixel goes to the end (TFLite's ``offset``).

    Arguments:
        in_size (int): input size along the axis.
        kernel (int): filter (window) size.
        stride (int): stride, >= 1.
        dilation (int): dilation, >= 1. Default 1.

    Returns:
        tuple[int, int]: padding before and after.
    """
    effective = (kernel - 1) * dilation + 1
    out = (in_size + stride - 1) // stride
    total = max((out - 1) * stride + effective - in_size, 0)
    return total // 2, total - total // 2


def conv_padding(
    padding: int,
    in_hw: Sequence[int],
    kernel_hw: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int] = (1, 1),
) -> list[int]:
    """WebNN ``padding`` ([top, bottom, left, right]) for a TFLite SAME/VALID conv or pool.

    Arguments:
        padding (int): TFLite ``Padding`` enum value (0 = SAME, 1 = VALID).
        in_hw, kernel_hw, strides, dilations: (height, width) pairs.

    Returns:
        list[int]: ``[beginning_height, ending_height, beginning_width, ending_width]``.

    Raises:
        NotSupportedError: an unknown padding value.
    """
    if padding == PADDING_VALID:
        return [0, 0, 0, 0]
    if padding != PADDING_SAME:
        raise NotSupportedError(f"unknown TFLite padding value {padding} (expected 0 = SAME or 1 = VALID)")
    top, bottom = same_padding(in_hw[0], kernel_hw[0], strides[0], dilations[0])
    left, right = same_padding(in_hw[1], kernel_hw[1], strides[1], dilations[1])
    return [top, bottom, left, right]


class TransposeConvBiasParams(tuple):
    """Decoded options of MediaPipe's ``Convolution2DTransposeBias``: (padding, stride_h, stride_w).

    ``padding`` is ``"SAME"`` or ``"VALID"``.
    """

    __slots__ = ()

    def __new__(cls, padding: str, stride_h: int, stride_w: int) -> TransposeConvBiasParams:
        return super().__new__(cls, (padding, stride_h, stride_w))

    @property
    def padding(self) -> str:
        return self[0]

    @property
    def stride_h(self) -> int:
        return self[1]

    @property
    def stride_w(self) -> int:
        return self[2]


def decode_transpose_conv_bias_options(raw: bytes | None) -> TransposeConvBiasParams:
    """Decode the custom options of MediaPipe's ``Convolution2DTransposeBias`` op.

    MediaPipe reads them as a raw C ``TfLiteTransposeConvParams`` (not FlexBuffers):
    ``{TfLitePadding padding; int stride_width; int stride_height;}``, three
    little-endian int32, where ``kTfLitePaddingSame = 1`` and ``kTfLitePaddingValid = 2``
    (``mediapipe/util/tflite/operations/transpose_conv_bias.cc``). Newer TFLite
    versions of the struct append a fused activation; MediaPipe ignores it, so a
    non-zero one is refused rather than guessed.

    Arguments:
        raw (bytes | None): the operator's custom options.

    Returns:
        TransposeConvBiasParams: (padding "SAME"/"VALID", stride_h, stride_w).

    Raises:
        DataError: the options are missing, of another size, or hold a stride < 1.
        NotSupportedError: an unknown padding value or a non-zero fused activation.
    """
    if raw is None or len(raw) not in (12, 16):
        size = "none" if raw is None else f"{len(raw)} bytes"
        raise DataError(
            "Convolution2DTransposeBias: custom options must be a 12-byte TfLiteTransposeConvParams "
            f"(padding, stride_width, stride_height as int32), got {size}"
        )
    padding, stride_w, stride_h = struct.unpack_from("<iii", raw, 0)
    if len(raw) == 16:
        (activation,) = struct.unpack_from("<i", raw, 12)
        if activation != 0:
            raise NotSupportedError(
                f"Convolution2DTransposeBias: fused activation {activation} in the custom options "
                "(MediaPipe's kernel ignores it; refusing to guess)"
            )
    names = {1: "SAME", 2: "VALID"}
    if padding not in names:
        raise NotSupportedError(
            f"Convolution2DTransposeBias: padding {padding} in the custom options "
            "(expected 1 = SAME or 2 = VALID)"
        )
    if stride_w < 1 or stride_h < 1:
        raise DataError(
            f"Convolution2DTransposeBias: strides must be >= 1, got stride_height={stride_h}, "
            f"stride_width={stride_w}"
        )
    return TransposeConvBiasParams(names[padding], stride_h, stride_w)


def transpose_conv_bias_padding(in_size: int, kernel: int, stride: int, padding: str) -> tuple[int, int]:
    """Padding (beginning, ending) of one axis of MediaPipe's ``Convolution2DTransposeBias``.

    MediaPipe's kernel computes, for SAME, ``total = max(0, kernel - (in - 1) % stride - 1)``,
    an output size ``stride * (in - 1) + kernel - total``, and places input pixel ``i``
    at output ``i * stride - total // 2``; that is WebNN's ``convTranspose2d`` with
    padding ``total // 2`` before and the rest after. VALID pads nothing.
    """
    if padding == "VALID":
        return 0, 0
    total = max(0, kernel - (in_size - 1) % stride - 1)
    return total // 2, total - total // 2


# ----------------------------------------------------------------------------- handlers


def _opt(opts: Any, field: str, default: Any) -> Any:
    return default if opts is None else getattr(opts, field)()


def _activation(cv: Converter, op: OperatorInfo, x: Any, code: int) -> Any:
    """Apply a TFLite fused activation to ``x``."""
    b, label = cv.builder, cv.label(op)
    if code == ACT_NONE:
        return x
    if code == ACT_RELU:
        return b.relu(x, label=label + "/relu")
    if code == ACT_RELU6:
        return b.clamp(x, min_value=0.0, max_value=6.0, label=label + "/relu6")
    if code == ACT_RELU_N1_TO_1:
        return b.clamp(x, min_value=-1.0, max_value=1.0, label=label + "/relu_n1_to_1")
    if code in (ACT_TANH, ACT_SIGN_BIT):
        # The schema names them, but LiteRT's float kernels of these ops silently treat
        # them as NONE (CalculateActivationRange) and XNNPACK rejects them: the model's
        # meaning is ambiguous, so refuse rather than pick one.
        raise cv.unsupported(op, f"fused activation {_ACT_NAMES[code]} (LiteRT ignores it on this op, "
                                 "XNNPACK rejects it)")
    raise cv.unsupported(op, f"fused activation {code}")


def _hw(shape: Sequence[int]) -> tuple[int, int]:
    return int(shape[1]), int(shape[2])


def _check_rank(cv: Converter, op: OperatorInfo, i: int, rank: int) -> tuple[int, ...]:
    shape = cv.tensor(op, i).shape
    if len(shape) != rank:
        raise cv.unsupported(op, f"input {i} of rank {len(shape)} (expected rank {rank})")
    return shape


@handles("CONV_2D", webnn="conv2d (input_layout='nhwc', filter_layout='ohwi') + fused activation")
def _conv_2d(cv: Converter, op: OperatorInfo) -> None:
    o = op.options(_fb.Conv2DOptions)
    x_shape = _check_rank(cv, op, 0, 4)
    w_shape = _check_rank(cv, op, 1, 4)
    strides = [_opt(o, "StrideH", 1), _opt(o, "StrideW", 1)]
    dilations = [_opt(o, "DilationHFactor", 1), _opt(o, "DilationWFactor", 1)]
    cv.require_positive(op, strides=strides, dilations=dilations)
    channels, filter_in = int(x_shape[3]), int(w_shape[3])
    if filter_in <= 0 or channels % filter_in:
        raise cv.malformed(op, f"input channels {channels} not a multiple of the filter's {filter_in}")
    padding = conv_padding(_opt(o, "Padding", PADDING_SAME), _hw(x_shape), _hw(w_shape), strides, dilations)
    y = cv.builder.conv2d(
        cv.operand(op, 0), cv.operand(op, 1),
        padding=padding, strides=strides, dilations=dilations, groups=channels // filter_in,
        input_layout="nhwc", filter_layout="ohwi", bias=cv.optional_operand(op, 2), label=cv.label(op),
    )
    cv.set_output(op, _activation(cv, op, y, _opt(o, "FusedActivationFunction", ACT_NONE)))


@handles("DEPTHWISE_CONV_2D", webnn="conv2d (groups=C, input_layout='nhwc', filter_layout='ihwo') + fused activation")
def _depthwise_conv_2d(cv: Converter, op: OperatorInfo) -> None:
    o = op.options(_fb.DepthwiseConv2DOptions)
    x_shape = _check_rank(cv, op, 0, 4)
    w_shape = _check_rank(cv, op, 1, 4)
    strides = [_opt(o, "StrideH", 1), _opt(o, "StrideW", 1)]
    dilations = [_opt(o, "DilationHFactor", 1), _opt(o, "DilationWFactor", 1)]
    cv.require_positive(op, strides=strides, dilations=dilations)
    channels, out_channels = int(x_shape[3]), int(w_shape[3])
    if w_shape[0] != 1 or channels <= 0 or out_channels % channels:
        raise cv.malformed(op, f"depthwise filter {list(w_shape)} does not fit {channels} input channels")
    multiplier = out_channels // channels
    declared = _opt(o, "DepthMultiplier", 0)
    if declared not in (0, multiplier):  # converters leave 0 when the shapes say it
        raise cv.malformed(op, f"depth_multiplier {declared} but the filter gives {multiplier}")
    padding = conv_padding(_opt(o, "Padding", PADDING_SAME), _hw(x_shape), _hw(w_shape), strides, dilations)
    y = cv.builder.conv2d(
        cv.operand(op, 0), cv.operand(op, 1),
        padding=padding, strides=strides, dilations=dilations, groups=channels,
        input_layout="nhwc", filter_layout="ihwo", bias=cv.optional_operand(op, 2), label=cv.label(op),
    )
    cv.set_output(op, _activation(cv, op, y, _opt(o, "FusedActivationFunction", ACT_NONE)))


class _Conv3D(NamedTuple):
    """The options of a CONV_3D / CONV_3D_TRANSPOSE: (depth, height, width) strides and
    dilations, the TFLite padding enum and the fused activation."""

    strides: list[int]
    dilations: list[int]
    padding: int
    activation: int


def _conv3d_options(cv: Converter, op: OperatorInfo) -> _Conv3D:
    o = op.options(_fb.Conv3DOptions)
    strides = [_opt(o, "StrideD", 1), _opt(o, "StrideH", 1), _opt(o, "StrideW", 1)]
    dilations = [_opt(o, "DilationDFactor", 1), _opt(o, "DilationHFactor", 1), _opt(o, "DilationWFactor", 1)]
    cv.require_positive(op, strides=strides, dilations=dilations)
    padding = _opt(o, "Padding", PADDING_SAME)
    if padding not in (PADDING_SAME, PADDING_VALID):
        raise cv.unsupported(op, f"padding value {padding}")
    return _Conv3D(strides, dilations, padding, _opt(o, "FusedActivationFunction", ACT_NONE))


def _filter_3d(cv: Converter, op: OperatorInfo, i: int, perm: list[int], shape: list[int]) -> Any:
    """Input ``i`` (a 5-D filter) transposed by ``perm`` and reshaped to the 4-D ``shape``: in
    NumPy when it is known at load time, else with the builder."""
    value = cv.static(op, i)
    if value is not None and value.dtype.kind == "f":
        return cv.constant_like(op, i, np.transpose(value, perm).reshape(shape))
    b, label = cv.builder, cv.label(op)
    return b.reshape(b.transpose(cv.operand(op, i), permutation=perm, label=label + "/filter"), shape,
                     label=label + "/filter2d")


@handles("CONV_3D", webnn="conv2d over the depth taps stacked along the channels (pad + strided slice per tap + "
                          "concat + reshape; filter to OHWI) + fused activation")
def _conv_3d(cv: Converter, op: OperatorInfo) -> None:
    # out[n, od] = sum over the depth taps i of conv2d(x[n, od * sd + i * dd - pad], w[i]): the
    # taps' input slices side by side along the channels (within each group) are one conv2d
    # over [N * OD, H, W, kd * C] with the filter's taps likewise side by side.
    p = _conv3d_options(cv, op)
    n, d, h, w, c = (int(v) for v in _check_rank(cv, op, 0, 5))
    kd, kh, kw, cin, out_c = (int(v) for v in _check_rank(cv, op, 1, 5))
    if cin <= 0 or c % cin:
        raise cv.malformed(op, f"input channels {c} not a multiple of the filter's {cin}")
    groups = c // cin
    sd, dd = p.strides[0], p.dilations[0]
    front, back = same_padding(d, kd, sd, dd) if p.padding == PADDING_SAME else (0, 0)
    od = (d + front + back - (kd - 1) * dd - 1) // sd + 1
    if od < 1:
        raise cv.malformed(op, f"a depth of {d} too small for a filter depth of {kd} (dilation {dd})")
    b, label = cv.builder, cv.label(op)
    x = cv.operand(op, 0)
    if front or back:
        x = b.pad(x, [0, front, 0, 0, 0], [0, back, 0, 0, 0], label=label + "/pad_depth")
    if kd == 1 and sd == 1:
        taps = x
    else:
        parts = []
        for i in range(kd):
            part = b.slice(x, [0, i * dd, 0, 0, 0], [n, (od - 1) * sd + 1, h, w, c], strides=[1, sd, 1, 1, 1],
                           label=f"{label}/tap{i}")
            parts.append(part if groups == 1 else b.reshape(part, [n, od, h, w, groups, cin], label=f"{label}/g{i}"))
        taps = parts[0] if kd == 1 else b.concat(parts, len(parts[0].shape) - 1, label=label + "/taps")
    taps = b.reshape(taps, [n * od, h, w, kd * c], label=label + "/stacked")
    weights = _filter_3d(cv, op, 1, [4, 1, 2, 0, 3], [out_c, kh, kw, kd * cin])
    padding = conv_padding(p.padding, (h, w), (kh, kw), p.strides[1:], p.dilations[1:])
    y = b.conv2d(taps, weights, padding=padding, strides=p.strides[1:], dilations=p.dilations[1:], groups=groups,
                 input_layout="nhwc", filter_layout="ohwi", bias=cv.optional_operand(op, 2), label=label)
    y = b.reshape(y, [n, od, int(y.shape[1]), int(y.shape[2]), out_c], label=label + "/out")
    cv.set_output(op, _activation(cv, op, y, p.activation))


@handles("CONV_3D_TRANSPOSE", webnn="conv_transpose2d with the depth taps as output channels, then a matmul "
                                    "with a 0/1 matrix that places each tap at its output depth (+ bias, "
                                    "fused activation)")
def _conv_3d_transpose(cv: Converter, op: OperatorInfo) -> None:
    # Inputs: output_shape, filter [kd, kh, kw, O, I], input [N, D, H, W, I], optional bias.
    # Input depth id and tap i add conv_transpose2d(x[id], w[i]) to output depth
    # id * sd + i * dd - pad: one conv_transpose2d gives every tap (kd * O channels), and the
    # sum over (i, id) per output depth is a product with a constant 0/1 matrix.
    p = _conv3d_options(cv, op)
    out_shape = [int(v) for v in cv.value(op, 0).reshape(-1)]
    kd, kh, kw, out_c, cin = (int(v) for v in _check_rank(cv, op, 1, 5))
    n, d, h, w, c = (int(v) for v in _check_rank(cv, op, 2, 5))
    if len(out_shape) != 5 or out_shape[0] != n or out_shape[4] != out_c or c != cin:
        raise cv.malformed(op, f"output_shape {out_shape} does not fit the input {[n, d, h, w, c]} and the filter "
                               f"{[kd, kh, kw, out_c, cin]}")
    od, oh, ow = out_shape[1:4]
    # TFLite pads as a forward convolution from the output to the input.
    pads = conv_padding(p.padding, (oh, ow), (kh, kw), p.strides[1:], p.dilations[1:])
    sd, dd = p.strides[0], p.dilations[0]
    front = same_padding(od, kd, sd, dd)[0] if p.padding == PADDING_SAME else 0
    output_padding = []
    for axis, (size_in, k, s, dil) in enumerate(zip((h, w), (kh, kw), p.strides[1:], p.dilations[1:])):
        natural = (size_in - 1) * s + (k - 1) * dil + 1 - pads[2 * axis] - pads[2 * axis + 1]
        extra = out_shape[2 + axis] - natural
        if not 0 <= extra < s:
            raise cv.unsupported(op, f"output_shape {out_shape} that WebNN's output_padding cannot reach "
                                     f"(axis {axis + 2}: natural size {natural})")
        output_padding.append(extra)
    b, label = cv.builder, cv.label(op)
    x = b.reshape(cv.operand(op, 2), [n * d, h, w, c], label=label + "/frames")
    weights = _filter_3d(cv, op, 1, [0, 3, 1, 2, 4], [kd * out_c, kh, kw, cin])
    y = b.conv_transpose2d(x, weights, padding=pads, strides=p.strides[1:], dilations=p.dilations[1:],
                           output_padding=output_padding, input_layout="nhwc", filter_layout="ohwi",
                           label=label)
    place = np.zeros((od, kd * d), np.float32)
    for i in range(kd):
        for j in range(d):
            o = j * sd + i * dd - front
            if 0 <= o < od:
                place[o, i * d + j] = 1.0
    if kd == 1 and d == od and np.array_equal(place, np.eye(od)):
        y = b.reshape(y, [n, od, oh, ow, out_c], label=label + "/out")
    else:
        y = b.reshape(y, [n, d, oh * ow, kd, out_c], label=label + "/taps")
        y = b.transpose(y, permutation=[0, 3, 1, 2, 4], label=label + "/taps_first")
        y = b.reshape(y, [n, kd * d, oh * ow * out_c], label=label + "/rows")
        y = b.matmul(cv.constant_like(op, 1, place[None]), y, label=label + "/depth")
        y = b.reshape(y, [n, od, oh, ow, out_c], label=label + "/out")
    bias = cv.optional_operand(op, 3)
    if bias is not None:
        y = b.add(y, bias, label=label + "/bias")
    cv.set_output(op, _activation(cv, op, y, p.activation))


def _conv_transpose(
    cv: Converter, op: OperatorInfo, x_index: int, w_index: int, bias_index: int,
    padding: list[int], strides: list[int], output_padding: list[int], activation: int,
) -> None:
    y = cv.builder.conv_transpose2d(
        cv.operand(op, x_index), cv.operand(op, w_index),
        padding=padding, strides=strides, output_padding=output_padding,
        input_layout="nhwc", filter_layout="ohwi", bias=cv.optional_operand(op, bias_index),
        label=cv.label(op),
    )
    cv.set_output(op, _activation(cv, op, y, activation))


@handles("TRANSPOSE_CONV", webnn="conv_transpose2d (input_layout='nhwc', filter_layout='ohwi')")
def _transpose_conv(cv: Converter, op: OperatorInfo) -> None:
    # Inputs: output_shape, weights (OHWI), input, optional bias (op version >= 3).
    o = op.options(_fb.TransposeConvOptions)
    out_shape = [int(v) for v in cv.value(op, 0).reshape(-1)]
    w_shape = _check_rank(cv, op, 1, 4)
    x_shape = _check_rank(cv, op, 2, 4)
    strides = [_opt(o, "StrideH", 1), _opt(o, "StrideW", 1)]
    cv.require_positive(op, strides=strides)
    if len(out_shape) != 4:
        raise cv.malformed(op, f"output_shape {out_shape} is not 4-D")
    # TFLite computes the padding as for a forward conv from the output to the input.
    pad = conv_padding(_opt(o, "Padding", PADDING_SAME), out_shape[1:3], _hw(w_shape), strides)
    output_padding = transpose_output_padding(cv, op, "output_shape", out_shape, _hw(x_shape), _hw(w_shape), strides,
                                              [1, 1], pad)
    _conv_transpose(cv, op, 2, 1, 3, pad, strides, output_padding, _opt(o, "FusedActivationFunction", ACT_NONE))


def transpose_output_padding(cv: Converter, op: OperatorInfo, name: str, out_shape: list, x_hw, k_hw, strides,
                             dilations, pads) -> list[int]:
    """The ``output_padding`` per spatial axis that makes a transposed conv of an ``x_hw``
    input, ``k_hw`` filter, ``strides``, ``dilations`` and ``pads`` (top, bottom, left, right)
    give the NHWC ``out_shape`` (the operand ``name``); unsupported where it would be negative
    or not below the stride (WebNN's range)."""
    output_padding = []
    for axis in (0, 1):
        natural = (x_hw[axis] - 1) * strides[axis] + (k_hw[axis] - 1) * dilations[axis] + 1 \
            - pads[2 * axis] - pads[2 * axis + 1]
        extra = out_shape[1 + axis] - natural
        if not 0 <= extra < strides[axis]:
            raise cv.unsupported(op, f"{name} {out_shape} that WebNN's output_padding cannot reach "
                                     f"(axis {axis + 1}: natural size {natural})")
        output_padding.append(extra)
    return output_padding


@handles("Convolution2DTransposeBias", webnn="conv_transpose2d (input_layout='nhwc', filter_layout='ohwi', bias)")
def _mediapipe_transpose_conv_bias(cv: Converter, op: OperatorInfo) -> None:
    # MediaPipe custom op: inputs input (NHWC), weights (OHWI), bias; options see decode_...().
    try:
        params = decode_transpose_conv_bias_options(op.custom_options)
    except (DataError, NotSupportedError) as exc:
        raise type(exc)(f"{cv.where(op)}: {exc}") from exc
    x_shape = _check_rank(cv, op, 0, 4)
    w_shape = _check_rank(cv, op, 1, 4)
    strides = [params.stride_h, params.stride_w]
    pad_h = transpose_conv_bias_padding(x_shape[1], w_shape[1], params.stride_h, params.padding)
    pad_w = transpose_conv_bias_padding(x_shape[2], w_shape[2], params.stride_w, params.padding)
    _conv_transpose(cv, op, 0, 1, 2, [*pad_h, *pad_w], strides, [0, 0], ACT_NONE)


def _binary(method: str) -> Handler:
    def handler(cv: Converter, op: OperatorInfo) -> None:
        o = op.options(_OPTION_CLASSES[op.opcode]) if _fb is not None else None
        y = getattr(cv.builder, method)(cv.operand(op, 0), cv.operand(op, 1), label=cv.label(op))
        cv.set_output(op, _activation(cv, op, y, _opt(o, "FusedActivationFunction", ACT_NONE)))

    handler.__name__ = f"_binary_{method}"
    return handler


_OPTION_CLASSES: dict[str, Any] = (
    {"ADD": _fb.AddOptions, "SUB": _fb.SubOptions, "MUL": _fb.MulOptions, "DIV": _fb.DivOptions}
    if _fb is not None else {}
)
for _name, _method in (("ADD", "add"), ("SUB", "sub"), ("MUL", "mul"), ("DIV", "div")):
    handles(_name, webnn=f"{_method} + fused activation")(_binary(_method))


def _binary_plain(method: str) -> Handler:
    def handler(cv: Converter, op: OperatorInfo) -> None:
        cv.set_output(op, getattr(cv.builder, method)(cv.operand(op, 0), cv.operand(op, 1), label=cv.label(op)))

    handler.__name__ = f"_binary_{method}"
    return handler


handles("POW", webnn="pow")(_binary_plain("pow"))


def _bound(cv: Converter, op: OperatorInfo, i: int) -> Any:
    """Input ``i`` of MAXIMUM / MINIMUM; a constant beyond the float16 range (a clamp such as
    ``minimum(x, 1e12)``) is ``+-inf`` in a float16 graph, which compares alike with every
    finite float16 value."""
    value = cv.static(op, i)
    if (cv.float_type != "float16" or value is None or value.dtype.kind != "f"
            or np.all(np.abs(value) <= np.finfo(np.float16).max)):
        return cv.operand(op, i)
    with np.errstate(over="ignore"):
        bound = np.asarray(value, np.float16)
    return cv.builder.constant({"data_type": "float16", "shape": list(bound.shape)}, bound)


def _min_max(method: str) -> Handler:
    def handler(cv: Converter, op: OperatorInfo) -> None:
        cv.set_output(op, getattr(cv.builder, method)(_bound(cv, op, 0), _bound(cv, op, 1), label=cv.label(op)))

    handler.__name__ = f"_binary_{method}"
    return handler


handles("MAXIMUM", webnn="max (in float16, a bound beyond its range is +-inf)")(_min_max("max"))
handles("MINIMUM", webnn="min (in float16, a bound beyond its range is +-inf)")(_min_max("min"))


def _unary(method: str, **kwargs: Any) -> Handler:
    def handler(cv: Converter, op: OperatorInfo) -> None:
        cv.set_output(op, getattr(cv.builder, method)(cv.operand(op, 0), label=cv.label(op), **kwargs))

    handler.__name__ = f"_unary_{method}"
    return handler


for _name, _method in (
    ("RELU", "relu"), ("LOGISTIC", "sigmoid"), ("TANH", "tanh"), ("HARD_SWISH", "hard_swish"),
    ("EXP", "exp"), ("LOG", "log"), ("SQRT", "sqrt"), ("ABS", "abs"), ("NEG", "neg"),
    ("FLOOR", "floor"), ("CEIL", "ceil"), ("SIN", "sin"), ("COS", "cos"),
):
    handles(_name, webnn=_method)(_unary(_method))

handles("RELU6", webnn="clamp(min_value=0, max_value=6)")(_unary("clamp", min_value=0.0, max_value=6.0))
handles("RELU_N1_TO_1", webnn="clamp(min_value=-1, max_value=1)")(_unary("clamp", min_value=-1.0, max_value=1.0))
handles("RELU_0_TO_1", webnn="clamp(min_value=0, max_value=1)")(_unary("clamp", min_value=0.0, max_value=1.0))


@handles("LEAKY_RELU", webnn="leaky_relu(alpha=)")
def _leaky_relu(cv: Converter, op: OperatorInfo) -> None:
    alpha = float(_opt(op.options(_fb.LeakyReluOptions), "Alpha", 0.0))
    cv.set_output(op, cv.builder.leaky_relu(cv.operand(op, 0), alpha=alpha, label=cv.label(op)))


@handles("PRELU", webnn="prelu")
def _prelu(cv: Converter, op: OperatorInfo) -> None:
    cv.set_output(op, cv.builder.prelu(cv.operand(op, 0), cv.operand(op, 1), label=cv.label(op)))


def _pool(method: str) -> Handler:
    def handler(cv: Converter, op: OperatorInfo) -> None:
        o = op.options(_fb.Pool2DOptions)
        x_shape = _check_rank(cv, op, 0, 4)
        window = [_opt(o, "FilterHeight", 1), _opt(o, "FilterWidth", 1)]
        strides = [_opt(o, "StrideH", 1), _opt(o, "StrideW", 1)]
        cv.require_positive(op, strides=strides, filter_size=window)
        # TFLite averages over the valid (unpadded) cells only, as WebNN's average_pool2d does.
        padding = conv_padding(_opt(o, "Padding", PADDING_SAME), _hw(x_shape), window, strides)
        y = getattr(cv.builder, method)(
            cv.operand(op, 0), window_dimensions=window, padding=padding, strides=strides,
            layout="nhwc", label=cv.label(op),
        )
        cv.set_output(op, _activation(cv, op, y, _opt(o, "FusedActivationFunction", ACT_NONE)))

    handler.__name__ = f"_pool_{method}"
    return handler


handles("AVERAGE_POOL_2D", webnn="average_pool2d (layout='nhwc') + fused activation")(_pool("average_pool2d"))
handles("MAX_POOL_2D", webnn="max_pool2d (layout='nhwc') + fused activation")(_pool("max_pool2d"))


def _reduce(method: str) -> Handler:
    def handler(cv: Converter, op: OperatorInfo) -> None:
        rank = len(cv.tensor(op, 0).shape)
        axes = sorted({cv.axis(op, int(a), rank) for a in cv.value(op, 1).reshape(-1)})
        keep = bool(_opt(op.options(_fb.ReducerOptions), "KeepDims", False))
        y = getattr(cv.builder, method)(cv.operand(op, 0), axes=axes, keep_dimensions=keep, label=cv.label(op))
        cv.set_output(op, y)

    handler.__name__ = f"_reduce_{method}"
    return handler


for _name, _method in (("MEAN", "reduce_mean"), ("SUM", "reduce_sum"), ("REDUCE_MAX", "reduce_max"),
                       ("REDUCE_MIN", "reduce_min"), ("REDUCE_PROD", "reduce_product")):
    handles(_name, webnn=f"{_method}(axes=, keep_dimensions=)")(_reduce(_method))
# BOOL tensors are uint8 0 / 1: "any" is their maximum, "all" their minimum.
handles("REDUCE_ANY", webnn="reduce_max of the BOOL (uint8 0 / 1) values")(_reduce("reduce_max"))
handles("REDUCE_ALL", webnn="reduce_min of the BOOL (uint8 0 / 1) values")(_reduce("reduce_min"))


@handles("RESIZE_BILINEAR", webnn="resample2d(mode='linear', axes=[1, 2]) (half-pixel); two matmuls (other options)")
def _resize_bilinear(cv: Converter, op: OperatorInfo) -> None:
    o = op.options(_fb.ResizeBilinearOptions)
    align_corners = bool(_opt(o, "AlignCorners", False))
    half_pixel = bool(_opt(o, "HalfPixelCenters", False))
    _, h, w, _ = _check_rank(cv, op, 0, 4)
    sizes = [int(v) for v in cv.value(op, 1).reshape(-1)]
    if len(sizes) != 2 or min(sizes) < 1:
        raise cv.malformed(op, f"size {sizes} (expected two positive integers)")
    if align_corners or not half_pixel:
        # WebNN's linear resample2d is half-pixel-centred; the other coordinate rules are
        # two matmuls with TFLite's interpolation weights.
        cv.set_output(op, _resize_by_matrices(cv, op, _interpolation_matrix(h, sizes[0], align_corners, half_pixel),
                                              _interpolation_matrix(w, sizes[1], align_corners, half_pixel)))
        return
    y = cv.builder.resample2d(cv.operand(op, 0), mode="linear", sizes=sizes, axes=[1, 2], label=cv.label(op))
    cv.set_output(op, y)


@handles("DEQUANTIZE", webnn="(folded at load time into a constant)")
def _dequantize(cv: Converter, op: OperatorInfo) -> None:
    t = cv.tensor(op, 0)
    if t.index in cv.dequantized:  # computed from the dequantized constant (a quantized table's GATHER)
        cv.set_output(op, cv.operand(op, 0))
        return
    stored = cv._folded.get(t.index, t.data)  # a DENSIFY before it has been folded
    if stored is None:
        raise cv.unsupported(op, "a run-time (non-constant) input; only constant weights can be dequantized")
    if t.type_name == "FLOAT16":
        value = stored  # kept float16: exact in float16 graphs, widened exactly for float32 ones
    elif t.type_name in ("INT8", "UINT8", "INT16", "INT32") and t.quantization is not None:
        value = dequantize(stored, t.quantization)
    else:
        raise cv.unsupported(op, f"input of type {t.type_name} without quantization parameters")
    cv.set_constant(op, value)


@handles("CONCATENATION", webnn="concat + fused activation")
def _concatenation(cv: Converter, op: OperatorInfo) -> None:
    o = op.options(_fb.ConcatenationOptions)
    rank = len(cv.tensor(op, 0).shape)
    axis = cv.axis(op, int(_opt(o, "Axis", 0)), rank)
    # Empty inputs (load-time constants without values) add nothing.
    inputs = [cv.operand(op, i) for i in range(len(op.inputs))
              if (v := cv.static(op, i)) is None or v.size]
    if not inputs:
        raise cv.malformed(op, "every input is empty")
    y = cv.builder.concat(inputs, axis, label=cv.label(op)) if len(inputs) > 1 else \
        cv.builder.identity(inputs[0], label=cv.label(op))
    cv.set_output(op, _activation(cv, op, y, _opt(o, "FusedActivationFunction", ACT_NONE)))


@handles("RESHAPE", "SQUEEZE", "EXPAND_DIMS", webnn="reshape (to the output tensor's static shape)")
def _reshape(cv: Converter, op: OperatorInfo) -> None:
    # The output tensor's declared shape is the new shape (when it has dynamic dimensions,
    # the operator's own rule on the actual input gives it).
    shape = cv.out_shape(op, 0, lambda: _reshape_rule(cv, op))
    in_count = int(np.prod(cv.tensor(op, 0).shape, dtype=np.int64))
    if int(np.prod(shape, dtype=np.int64)) != in_count:
        raise cv.malformed(op, f"output shape {shape} holds a different element count than "
                               f"the input {list(cv.tensor(op, 0).shape)}")
    x = cv.operand(op, 0)
    if isinstance(x, Complex):  # an RFFT2D's result: both parts
        cv.set_output(op, Complex(*(cv.builder.reshape(part, shape, label=cv.label(op)) for part in x)))
        return
    cv.set_output(op, cv.builder.reshape(x, shape, label=cv.label(op)))


def _reshape_rule(cv: Converter, op: OperatorInfo) -> list[int]:
    """The output shape of RESHAPE / SQUEEZE / EXPAND_DIMS from the input's actual shape."""
    in_shape = [int(d) for d in cv.tensor(op, 0).shape]
    if op.name == "SQUEEZE":
        o = op.options(_fb.SqueezeOptions)
        dims = o.SqueezeDimsAsNumpy() if o is not None and o.SqueezeDimsLength() else []
        axes = {cv.axis(op, int(a), len(in_shape)) for a in dims} or \
            {a for a, d in enumerate(in_shape) if d == 1}
        return [d for a, d in enumerate(in_shape) if a not in axes]
    if op.name == "EXPAND_DIMS":
        axis = cv.axis(op, int(cv.value(op, 1).reshape(-1)[0]), len(in_shape) + 1)
        return in_shape[:axis] + [1] + in_shape[axis:]
    value = cv.static(op, 1)
    if value is None:
        o = op.options(_fb.ReshapeOptions)
        if o is None or not o.NewShapeLength():
            raise cv.unsupported(op, "a run-time new shape")
        value = o.NewShapeAsNumpy()
    new = [int(d) for d in np.asarray(value).reshape(-1)]
    if new.count(-1) == 1:
        known = int(np.prod([d for d in new if d != -1], dtype=np.int64))
        count = int(np.prod(in_shape, dtype=np.int64))
        if known <= 0 or count % known:
            raise cv.malformed(op, f"new shape {new} for an input of shape {in_shape}")
        new[new.index(-1)] = count // known
    return new


@handles("SOFTMAX", webnn="softmax(axis=last) (times beta first when beta != 1); between a TRANSPOSE and its "
                          "inverse (a softmax over another axis, as TensorFlow's converter writes it): softmax(axis=) "
                          "of the untransposed tensor")
def _softmax(cv: Converter, op: OperatorInfo) -> None:
    beta = float(_opt(op.options(_fb.SoftmaxOptions), "Beta", 1.0))
    x = cv.operand(op, 0)
    rank = len(cv.tensor(op, 0).shape)
    axis = rank - 1
    around = _transposed_around(cv, op, rank)
    if around is not None:
        before, after, axis, perm = around
        x = cv.operand(before, 0)
    if beta != 1.0:
        x = cv.builder.mul(x, cv.scalar_constant(beta, cv.float_type), label=cv.label(op) + "/beta")
    y = cv.builder.softmax(x, axis, label=cv.label(op))
    if around is None:
        cv.set_output(op, y)
        return
    # The softmax's own output (read by the inverse transpose alone) as a view of the result.
    cv.set_output(op, cv.builder.transpose(y, permutation=perm, label=cv.label(op) + "/transposed"))
    cv.set_output(after, y)
    cv.claimed.add(after.index)


def _transposed_around(cv: Converter, op: OperatorInfo, rank: int
                       ) -> tuple[OperatorInfo, OperatorInfo, int, list[int]] | None:
    """(the TRANSPOSE before ``op``, the one after it, the axis of the untransposed tensor
    that ``op``'s last axis is, the first TRANSPOSE's permutation) when a TRANSPOSE whose only reader is ``op`` gives its input
    and ``op``'s only reader is the inverse TRANSPOSE; else None."""
    before, after = cv.producer(op.inputs[0]), cv.sole_consumer(op.outputs[0])
    if before is None or after is None or before.name != "TRANSPOSE" or after.name != "TRANSPOSE" or \
            cv.sole_consumer(op.inputs[0]) is not op or after.inputs[0] != op.outputs[0]:
        return None
    p, q = cv.static(before, 1), cv.static(after, 1)
    if p is None or q is None or p.size != rank or q.size != rank:
        return None
    perm, inv = [int(v) % rank for v in p.reshape(-1)], [int(v) % rank for v in q.reshape(-1)]
    if sorted(perm) != list(range(rank)) or [perm[i] for i in inv] != list(range(rank)):
        return None
    return before, after, perm[-1], perm


def _paddings(cv: Converter, op: OperatorInfo, rank: int) -> tuple[list[int], list[int]]:
    pads = cv.value(op, 1).astype(np.int64)
    if pads.shape != (rank, 2) or (pads < 0).any():
        raise cv.malformed(op, f"paddings {pads.tolist()} (expected a [{rank}, 2] array of non-negative values)")
    return [int(v) for v in pads[:, 0]], [int(v) for v in pads[:, 1]]


@handles("PAD", "PADV2", webnn="pad(mode='constant')")
def _pad(cv: Converter, op: OperatorInfo) -> None:
    rank = len(cv.tensor(op, 0).shape)
    begin, end = _paddings(cv, op, rank)
    value = 0.0
    if op.opcode == "PADV2" and len(op.inputs) > 2 and op.inputs[2] >= 0:
        value = float(cv.value(op, 2).reshape(-1)[0])
    y = cv.builder.pad(cv.operand(op, 0), begin, end, mode="constant", value=value, label=cv.label(op))
    cv.set_output(op, y)


@handles("MIRROR_PAD", webnn="pad(mode='reflection') (REFLECT); slice + reverse + concat (SYMMETRIC)")
def _mirror_pad(cv: Converter, op: OperatorInfo) -> None:
    mode = _opt(op.options(_fb.MirrorPadOptions), "Mode", 0)
    begin, end = _paddings(cv, op, len(cv.tensor(op, 0).shape))
    if mode == 1:  # SYMMETRIC: the edge is repeated
        cv.set_output(op, _symmetric_pad(cv, op, begin, end))
        return
    if mode != 0:
        raise cv.unsupported(op, f"mirror pad mode {mode}")
    cv.set_output(op, cv.builder.pad(cv.operand(op, 0), begin, end, mode="reflection", label=cv.label(op)))


@handles("TRANSPOSE", webnn="transpose(permutation=)")
def _transpose(cv: Converter, op: OperatorInfo) -> None:
    rank = len(cv.tensor(op, 0).shape)
    perm = [int(v) for v in cv.value(op, 1).reshape(-1)]
    if sorted(perm) != list(range(rank)):
        raise cv.malformed(op, f"permutation {perm} of a rank-{rank} tensor")
    cv.set_output(op, cv.builder.transpose(cv.operand(op, 0), permutation=perm, label=cv.label(op)))


@handles("FULLY_CONNECTED", webnn="reshape + gemm(b_transpose=True, c=bias) + reshape + fused activation (a bias "
                                  "added after a RESHAPE that splits the units joins the gemm's)")
def _fully_connected(cv: Converter, op: OperatorInfo) -> None:
    o = op.options(_fb.FullyConnectedOptions)
    if _opt(o, "WeightsFormat", 0) != 0:
        raise cv.unsupported(op, "shuffled weights format")
    x_shape = cv.tensor(op, 0).shape
    w_shape = _check_rank(cv, op, 1, 2)
    units, depth = int(w_shape[0]), int(w_shape[1])
    count = int(np.prod(x_shape, dtype=np.int64))
    if depth <= 0 or count % depth:
        raise cv.malformed(op, f"input {list(x_shape)} does not split into rows of {depth}")
    label = cv.label(op)
    x = cv.operand(op, 0)
    rows = count // depth
    activation = _opt(o, "FusedActivationFunction", ACT_NONE)
    keep = bool(_opt(o, "KeepNumDims", False))
    weights = cv.static(op, 1)
    rows_of = _rows_of(cv, op, x_shape, depth, units, keep)
    after = _bias_after_reshape(cv, op, units) if activation == ACT_NONE else None
    if rows_of is not None and weights is not None and weights.dtype.kind == "f" and \
            (after is None or after[1] is rows_of[1]):
        # Rows of a rank > 2 tensor: a matmul with the transposed weights in the rows' own
        # leading shape (no reshapes between the product and its readers, so that the bias,
        # the activation and element-wise readers such as a residual add become its epilogue).
        x3, unflatten = rows_of
        w_t = np.ascontiguousarray(weights.T).astype(cv._np_float)
        y = cv.builder.matmul(x3, cv.builder.constant({"data_type": cv.float_type, "shape": [depth, units]}, w_t),
                              label=label)
        bias = cv.constant_like(op, 2, after[0]) if after is not None else cv.optional_operand(op, 2)
        if bias is not None:
            y = cv.builder.add(y, bias, label=label + "/bias")
        if after is not None:
            add = after[2]
            y = _activation(cv, add, y, _opt(add.options(_fb.AddOptions), "FusedActivationFunction", ACT_NONE))
        else:
            y = _activation(cv, op, y, activation)
        if unflatten is None:
            cv.set_output(op, y)
            return
        # The FULLY_CONNECTED's own [rows, units] output is read by the unflattening RESHAPE
        # alone, which takes the matmul's result as it is (and an ADD of a constant after it,
        # which the bias above did).
        cv.set_output(op, cv.builder.reshape(y, [rows, units], label=label + "/rows"))
        cv.set_output(unflatten, y)
        cv.claimed.add(unflatten.index)
        if after is not None:
            cv.set_output(after[2], y)
            cv.claimed.add(after[2].index)
        return
    if after is not None and weights is not None and weights.dtype.kind == "f" and \
            _heads_first(cv, op, x, x_shape, weights, after):
        return
    if list(x_shape) != [rows, depth]:
        x = cv.builder.reshape(x, [rows, depth], label=label + "/flatten")
    if after is not None:
        bias = cv.constant_like(op, 2, after[0])
    else:
        bias = cv.optional_operand(op, 2)
    y = cv.builder.gemm(x, cv.operand(op, 1), c=bias, b_transpose=True, label=label)
    if after is not None:  # the ADD's activation (element-wise: before the reshapes alike)
        add = after[2]
        y = _activation(cv, add, y, _opt(add.options(_fb.AddOptions), "FusedActivationFunction", ACT_NONE))
    out_shape = cv.out_shape(op, 0, lambda: [*x_shape[:-1], units] if keep else [rows, units])
    if out_shape != [rows, units]:
        y = cv.builder.reshape(y, out_shape, label=label + "/unflatten")
    if after is None:
        cv.set_output(op, _activation(cv, op, y, activation))
        return
    # The bias and the ADD's activation are in y; only the RESHAPE and the ADD read it.
    _, reshape, add = after
    cv.set_output(op, y)
    HANDLERS["RESHAPE"](cv, reshape)
    cv.set_output(add, cv.operand(add, 0 if add.inputs[0] == reshape.outputs[0] else 1))
    cv.claimed.update((reshape.index, add.index))


def _heads_first(cv: Converter, op: OperatorInfo, x: Any, x_shape: Any, weights: np.ndarray,
                 after: tuple[np.ndarray, OperatorInfo, OperatorInfo]) -> bool:
    """Keras' MultiHeadAttention projection of a query or value: FULLY_CONNECTED over
    ``x`` [B, S, D], RESHAPE to [B, S, H, dh], ADD of the bias, TRANSPOSE to [B, H, S, dh],
    each the sole reader of the one before. Emitted as one batched matmul of ``x`` viewed as
    [B, 1, S, D] with the weights per head [1, H, D, dh], plus the bias [H, 1, dh]: the heads
    come out in the transposed layout, without a transpose kernel. Says whether it did."""
    bias, reshape, add = after
    transpose = cv.sole_consumer(add.outputs[0])
    if transpose is None or transpose.name != "TRANSPOSE" or transpose.inputs[0] != add.outputs[0] or \
            _opt(add.options(_fb.AddOptions), "FusedActivationFunction", ACT_NONE) != ACT_NONE:
        return False
    perm = cv.static(transpose, 1)
    units, depth = weights.shape
    target = cv.static(reshape, 1) if len(reshape.inputs) > 1 else None
    if target is None or target.dtype.kind not in "iu":
        return False
    heads_shape = [int(d) for d in target.reshape(-1)]
    known = int(np.prod([d for d in heads_shape if d != -1], dtype=np.int64))
    if heads_shape.count(-1) == 1 and known > 0:  # (the batch a Keras model leaves open)
        heads_shape[heads_shape.index(-1)] = int(np.prod([int(d) for d in x_shape[:-1]], dtype=np.int64)) * units // known
    if perm is None or [int(p) for p in perm.reshape(-1)] != [0, 2, 1, 3] or len(x_shape) != 3 or \
            len(heads_shape) != 4 or heads_shape[:2] != [int(d) for d in x_shape[:2]] or \
            heads_shape[2] * heads_shape[3] != units or int(x_shape[2]) != depth:
        return False
    b, label = cv.builder, cv.label(op)
    batch, seq = int(x_shape[0]), int(x_shape[1])
    heads, dh = heads_shape[2], heads_shape[3]
    w = np.ascontiguousarray(weights.astype(np.float64).T.reshape(depth, heads, dh).transpose(1, 0, 2)[None])
    y = b.matmul(b.reshape(x, [batch, 1, seq, depth], label=label + "/rows"),
                 b.constant({"data_type": cv.float_type, "shape": list(w.shape)}, w.astype(cv._np_float)),
                 label=label)
    y = b.add(y, cv.constant_like(op, 2, bias.reshape(heads, 1, dh)), label=label + "/bias")
    # The pattern's own tensors (read inside it alone) as views of the result (their values
    # are right; nothing reads them, so they cost nothing).
    per_row = b.transpose(y, permutation=[0, 2, 1, 3], label=label + "/rows_first")
    cv.set_output(op, b.reshape(per_row, [int(d) for d in cv.out_tensor(op, 0).shape] if
                                not cv.out_tensor(op, 0).is_dynamic else [batch, seq, units], label=label + "/fc"))
    cv.set_output(reshape, per_row)
    cv.set_output(add, per_row)
    cv.set_output(transpose, y)
    cv.claimed.update((reshape.index, add.index, transpose.index))
    return True


def _rows_of(cv: Converter, op: OperatorInfo, x_shape: Any, depth: int, units: int,
             keep: bool) -> tuple[Any, OperatorInfo | None] | None:
    """A FULLY_CONNECTED over the rows of a tensor of rank > 2, as (that tensor's operand, the
    RESHAPE that gives the result the tensor's leading shape, or None), or None:

    * ``keep_num_dims`` with a rank > 2 input (the result has the input's leading shape);
    * an input that a RESHAPE flattens from ``[*lead, depth]`` and a sole reader that is a
      RESHAPE to ``[*lead, units]`` (a static target shape; Keras' Dense on a sequence, as
      TensorFlow's converter writes it with its shape arithmetic)."""
    if keep:
        if len(x_shape) > 2 and int(x_shape[-1]) == depth:
            return cv.operand(op, 0), None
        return None
    flatten = cv.producer(op.inputs[0])
    unflatten = cv.sole_consumer(op.outputs[0])
    if flatten is None or flatten.name != "RESHAPE" or unflatten is None or unflatten.name != "RESHAPE" or \
            unflatten.inputs[0] != op.outputs[0] or len(unflatten.inputs) < 2:
        return None
    src = cv.tensor(flatten, 0).shape
    if len(src) < 3 or int(src[-1]) != depth:
        return None
    lead = [int(d) for d in src[:-1]]
    shape = cv.static(unflatten, 1)
    if shape is None or shape.dtype.kind not in "iu":
        return None
    target = [int(d) for d in shape.reshape(-1)]
    known = int(np.prod([d for d in target if d != -1], dtype=np.int64))
    if target.count(-1) == 1 and known > 0:
        target[target.index(-1)] = int(np.prod(lead, dtype=np.int64)) * units // known
    if target != [*lead, units]:
        return None
    return cv.operand(flatten, 0), unflatten


def _constant_add(cv: Converter, tensor: int) -> tuple[OperatorInfo, np.ndarray] | None:
    """(the ADD, its float constant operand) when the sole reader of ``tensor`` is an ADD of it
    and a load-time float constant, else None."""
    add = cv.sole_consumer(tensor)
    if add is None or add.name != "ADD" or len(add.inputs) != 2 or [add.inputs[0], add.inputs[1]].count(tensor) != 1:
        return None
    c = cv.static(add, 1 if add.inputs[0] == tensor else 0)
    return None if c is None or c.dtype.kind != "f" else (add, c)


def _own_bias(cv: Converter, op: OperatorInfo, size: int) -> np.ndarray | None:
    """A conv's or FULLY_CONNECTED's constant bias (input 2; zeros when it has none) as ``size``
    float values, or None when the bias is computed or does not have that size."""
    own = cv.static(op, 2) if len(op.inputs) > 2 and op.inputs[2] >= 0 else np.zeros(size, np.float32)
    return None if own is None or own.dtype.kind != "f" or own.size != size else own


def _bias_after_reshape(cv: Converter, op: OperatorInfo, units: int) -> tuple[np.ndarray, Any, Any] | None:
    """Keras' EinsumDense (MultiHeadAttention's projections): a FULLY_CONNECTED without fused
    activation whose sole reader is a RESHAPE splitting the units into trailing dimensions,
    whose sole reader is an ADD of a constant varying along those dimensions alone. Returns
    (the FULLY_CONNECTED's bias plus that constant, as a [units] vector; the RESHAPE; the ADD),
    or None. (The gemm's own bias then does the ADD's work.)"""
    reshape = cv.sole_consumer(op.outputs[0])
    if reshape is None or reshape.name != "RESHAPE" or reshape.inputs[0] != op.outputs[0]:
        return None
    if cv.model.tensors[reshape.outputs[0]].is_dynamic and (len(reshape.inputs) < 2 or cv.static(reshape, 1) is None):
        return None  # its new shape comes from shape arithmetic after this operator (a dynamic dimension)
    found, own = _constant_add(cv, reshape.outputs[0]), _own_bias(cv, op, units)
    if found is None or own is None:
        return None
    add, c = found
    out = cv.model.tensors[reshape.outputs[0]]
    sig = tuple(out.shape_signature) if out.shape_signature is not None else tuple(out.shape)
    trailing: list[int] = []
    size = 1
    for d in reversed(sig):  # the smallest static suffix holding the units
        if d < 1 or size >= units:
            break
        trailing.insert(0, int(d))
        size *= int(d)
    if size != units or c.ndim > len(sig) or any(d != 1 for d in c.shape[:max(c.ndim - len(trailing), 0)]):
        return None
    tail = c.reshape(c.shape[max(c.ndim - len(trailing), 0):])
    try:
        vector = np.broadcast_to(tail, trailing).reshape(units)
    except ValueError:
        return None
    return own.astype(np.float64) + vector.astype(np.float64), reshape, add


@handles("BATCH_MATMUL", webnn="matmul (transpose for adj_x / adj_y)")
def _batch_matmul(cv: Converter, op: OperatorInfo) -> None:
    o = op.options(_fb.BatchMatMulOptions)
    a, b = cv.operand(op, 0), cv.operand(op, 1)
    label = cv.label(op)
    for flag, index in (("AdjX", 0), ("AdjY", 1)):
        if _opt(o, flag, False):
            rank = len(cv.tensor(op, index).shape)
            perm = list(range(rank - 2)) + [rank - 1, rank - 2]
            operand = cv.builder.transpose(a if index == 0 else b, permutation=perm, label=f"{label}/{flag}")
            a, b = (operand, b) if index == 0 else (a, operand)
    cv.set_output(op, cv.builder.matmul(a, b, label=label))


# ----------------------------------------------------------------------------- load-time folding

_NP_TYPES = {"FLOAT32": np.float32, "FLOAT16": np.float16, "FLOAT64": np.float64, "INT32": np.int32,
             "INT64": np.int64, "UINT32": np.uint32, "UINT64": np.uint64, "INT8": np.int8, "UINT8": np.uint8,
             "INT16": np.int16, "BOOL": np.bool_}


def _np_type(cv: Converter, op: OperatorInfo, j: int = 0) -> Any:
    t = cv.out_tensor(op, j)
    if t.type_name not in _NP_TYPES:
        raise cv.unsupported(op, f"output of type {t.type_name}")
    return _NP_TYPES[t.type_name]


def _webnn_type(cv: Converter, op: OperatorInfo, j: int = 0) -> str:
    """The WebNN data type of output ``j`` (float outputs follow the graph's float type)."""
    t = cv.out_tensor(op, j)
    data_type = cv.data_type(t)
    if data_type is None:
        raise cv.unsupported(op, f"output of type {t.type_name}")
    return data_type


def folds(*names: str, always: bool = False) -> Callable:
    """Register ``fn(cv, op, values) -> list of arrays`` as the load-time definition of ``names``.

    It runs when every (present) input is known at load time, or, with ``always``, in
    any case (the result depends only on static shapes: SHAPE, ZEROS_LIKE).
    """

    def register(fn: Callable) -> Callable:
        def folder(cv: Converter, op: OperatorInfo) -> bool:
            values = [cv.static(op, i) if op.inputs[i] >= 0 else None for i in range(len(op.inputs))]
            if not always and any(v is None for i, v in enumerate(values) if op.inputs[i] >= 0):
                return False
            outs = fn(cv, op, values)
            for j, value in enumerate(outs):
                cv.set_constant(op, np.asarray(value).astype(_np_type(cv, op, j), copy=False), j)
            return True

        for name in names:
            FOLDERS[name] = folder
        return fn

    return register


def _np_activation(x: np.ndarray, code: int) -> np.ndarray:
    if code == ACT_RELU:
        return np.maximum(x, 0)
    if code == ACT_RELU6:
        return np.clip(x, 0, 6)
    if code == ACT_RELU_N1_TO_1:
        return np.clip(x, -1, 1)
    return x


def _np_floor_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.floor_divide(a, b) if a.dtype.kind in "iu" else np.floor(a / b)


def _np_floor_mod(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind in "iu":
        return np.mod(a, b)
    trunc = np.fmod(a, b)
    return np.where((trunc != 0) & ((b < 0) != (trunc < 0)), trunc + b, trunc)


_NP_BINARY: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "ADD": np.add, "SUB": np.subtract, "MUL": np.multiply, "MAXIMUM": np.maximum, "MINIMUM": np.minimum,
    "FLOOR_DIV": _np_floor_div, "FLOOR_MOD": _np_floor_mod, "SQUARED_DIFFERENCE": lambda a, b: (a - b) * (a - b),
    "EQUAL": np.equal, "NOT_EQUAL": np.not_equal, "GREATER": np.greater, "GREATER_EQUAL": np.greater_equal,
    "LESS": np.less, "LESS_EQUAL": np.less_equal, "LOGICAL_AND": np.logical_and, "LOGICAL_OR": np.logical_or,
}


@folds(*_NP_BINARY, "DIV")
def _fold_binary(cv: Converter, op: OperatorInfo, values: list) -> list:
    a, b = values[0], values[1]
    if op.name == "DIV":
        out = np.trunc(a / b).astype(a.dtype) if a.dtype.kind in "iu" else a / b
    else:
        out = _NP_BINARY[op.name](a, b)
    if op.name in _OPTION_CLASSES:
        out = _np_activation(out, _opt(op.options(_OPTION_CLASSES[op.name]), "FusedActivationFunction", ACT_NONE))
    return [out]


@folds("NEG", "ABS", "LOGICAL_NOT", "SQUARE", "CAST")
def _fold_unary(cv: Converter, op: OperatorInfo, values: list) -> list:
    x = values[0]
    if op.name == "CAST":
        target = _np_type(cv, op)
        if np.dtype(target).kind in "iu" and x.dtype.kind == "f":
            x = np.trunc(x)
        return [x.astype(target)]
    return [{"NEG": np.negative, "ABS": np.abs, "LOGICAL_NOT": np.logical_not,
             "SQUARE": np.square}[op.name](x)]


@folds("RESHAPE", "SQUEEZE", "EXPAND_DIMS")
def _fold_reshape(cv: Converter, op: OperatorInfo, values: list) -> list:
    return [values[0].reshape(cv.out_shape(op, 0, lambda: _reshape_rule(cv, op)))]


@folds("SHAPE", always=True)
def _fold_shape(cv: Converter, op: OperatorInfo, values: list) -> list:
    return [np.asarray(cv.tensor(op, 0).shape, np.int64)]


@handles("SHAPE", webnn="(folded at load time: shapes are static)")
def _shape(cv: Converter, op: OperatorInfo) -> None:  # pragma: no cover - always folded
    raise cv.unsupported(op, "a dynamic shape")


@folds("BROADCAST_ARGS")
def _fold_broadcast_args(cv: Converter, op: OperatorInfo, values: list) -> list:
    shapes = [tuple(int(d) for d in np.asarray(v).reshape(-1)) for v in values]
    try:
        return [np.asarray(np.broadcast_shapes(*shapes), np.int64)]
    except ValueError:
        raise cv.malformed(op, f"shapes {[list(s) for s in shapes]} that do not broadcast") from None


@handles("BROADCAST_ARGS", webnn="(folded at load time: the broadcast of two static shapes)")
def _broadcast_args(cv: Converter, op: OperatorInfo) -> None:
    raise cv.unsupported(op, "shapes known only at run time")


@folds("ZEROS_LIKE", always=True)
def _fold_zeros_like(cv: Converter, op: OperatorInfo, values: list) -> list:
    return [np.zeros(cv.tensor(op, 0).shape)]


@handles("ZEROS_LIKE", webnn="(folded at load time into a constant)")
def _zeros_like(cv: Converter, op: OperatorInfo) -> None:  # pragma: no cover - always folded
    raise cv.unsupported(op, "a dynamic shape")


@folds("FILL")
def _fold_fill(cv: Converter, op: OperatorInfo, values: list) -> list:
    return [np.broadcast_to(values[1].reshape(()), [int(d) for d in values[0].reshape(-1)])]


@handles("FILL", webnn="expand (folded at load time when the value is static)")
def _fill(cv: Converter, op: OperatorInfo) -> None:
    shape = [int(d) for d in cv.value(op, 0).reshape(-1)]
    value = cv.builder.reshape(cv.operand(op, 1), [], label=cv.label(op) + "/scalar")
    cv.set_output(op, cv.builder.expand(value, shape, label=cv.label(op)))


@folds("BROADCAST_TO")
def _fold_broadcast_to(cv: Converter, op: OperatorInfo, values: list) -> list:
    return [np.broadcast_to(values[0], [int(d) for d in values[1].reshape(-1)])]


@handles("BROADCAST_TO", webnn="expand")
def _broadcast_to(cv: Converter, op: OperatorInfo) -> None:
    shape = cv.out_shape(op, 0, lambda: np.broadcast_shapes(tuple(cv.tensor(op, 0).shape),
                                                            tuple(int(d) for d in cv.value(op, 1).reshape(-1))))
    cv.set_output(op, cv.builder.expand(cv.operand(op, 0), shape, label=cv.label(op)))


@folds("PACK")
def _fold_pack(cv: Converter, op: OperatorInfo, values: list) -> list:
    rank = len(cv.tensor(op, 0).shape)
    axis = _opt(op.options(_fb.PackOptions), "Axis", 0)
    return [np.stack(values, axis=axis % (rank + 1))]


#: Operators a per-time-step chain of an unrolled ``TimeDistributed`` may hold (see
#: :func:`_time_distributed`): row-wise, so that they apply to every step at once.
_PER_STEP_UNARY = {"LOGISTIC": "sigmoid", "TANH": "tanh", "RELU": "relu", "HARD_SWISH": "hard_swish", "ELU": "elu"}
_PER_STEP_BINARY = ({"ADD": ("add", _fb.AddOptions), "MUL": ("mul", _fb.MulOptions), "SUB": ("sub", _fb.SubOptions)}
                    if _fb is not None else {})


def _step_signature(cv: Converter, op: OperatorInfo) -> tuple | None:
    """What a per-step operator computes apart from its step input: its code, the options it
    reads and its constant inputs; None for an operator outside the per-step set."""
    consts = tuple((i, t) for i, t in enumerate(op.inputs) if t >= 0 and cv.static(op, i) is not None)
    if op.name == "FULLY_CONNECTED":
        o = op.options(_fb.FullyConnectedOptions)
        if _opt(o, "WeightsFormat", 0) != 0 or _opt(o, "KeepNumDims", False) or cv.static(op, 1) is None:
            return None
        return op.name, _opt(o, "FusedActivationFunction", ACT_NONE), consts
    if op.name in _PER_STEP_UNARY:
        return op.name, consts
    if op.name in _PER_STEP_BINARY:
        return op.name, _opt(op.options(_PER_STEP_BINARY[op.name][1]), "FusedActivationFunction", ACT_NONE), consts
    if op.name == "SOFTMAX":
        return op.name, float(_opt(op.options(_fb.SoftmaxOptions), "Beta", 1.0)), consts
    if op.name == "GELU":
        return op.name, bool(_opt(op.options(_fb.GeluOptions), "Approximate", False)), consts
    return None


def _step_cone(cv: Converter, tensor: int) -> tuple[OperatorInfo, list[OperatorInfo]] | None:
    """The STRIDED_SLICE and the per-step operators (in execution order) between it and
    ``tensor``: every operator's computed inputs come from the cone, every value inside it
    is read inside it alone. None when the operators reaching ``tensor`` are not that."""
    ops: dict[int, OperatorInfo] = {}
    slices: list[OperatorInfo] = []
    todo = [tensor]
    while todo:
        t = todo.pop()
        prod = cv.producer(t)
        if prod is None:
            return None
        if prod.index in ops or prod in slices:
            continue
        if prod.name == "STRIDED_SLICE":
            slices.append(prod)
            continue
        if _step_signature(cv, prod) is None:
            return None
        ops[prod.index] = prod
        todo += [i for k, i in enumerate(prod.inputs) if i >= 0 and cv.static(prod, k) is None]
    if len(slices) != 1 or not ops or any(len(o.outputs) != 1 for o in ops.values()):
        return None
    inside = ({o.outputs[0] for o in ops.values()} | {slices[0].outputs[0]}) - {tensor}
    if any(o.index not in ops for t in inside for o in cv.readers(t)):
        return None  # a value of the chain read outside it
    if any(t in cv.model.outputs for t in inside) or len(cv.readers(tensor)) != 1:
        return None
    return slices[0], [ops[k] for k in sorted(ops)]


def _time_distributed(cv: Converter, op: OperatorInfo) -> bool:
    """A PACK of N per-step chains, each taking step t of one tensor along the PACK's axis
    (a STRIDED_SLICE that shrinks that axis) through the same operators with the same
    constants (Keras' TimeDistributed as TensorFlow's converter unrolls it): the chain once,
    on the whole tensor (fully connected layers as a matmul over its rows). Says whether it
    emitted it."""
    rank = len(cv.tensor(op, 0).shape)
    axis = cv.axis(op, _opt(op.options(_fb.PackOptions), "Axis", 0), rank + 1)
    found = [_step_cone(cv, t) for t in op.inputs]
    cones = [c for c in found if c is not None]
    if len(cones) < 2 or len(cones) != len(found):
        return False
    (sl0, chain0), first = cones[0], cones[0][1]
    src = sl0.inputs[0]
    src_shape = [int(d) for d in cv.model.tensors[src].shape]
    if len(src_shape) != rank + 1 or axis >= rank or src_shape[axis] != len(op.inputs):
        return False
    index = np.arange(int(np.prod(src_shape)), dtype=np.int64).reshape(src_shape)
    wiring: list[dict[int, int]] = []
    for t, cone in enumerate(cones):
        sl, chain = cone
        if sl.inputs[0] != src:
            return False
        params = [cv.static(sl, k) for k in (1, 2, 3)]
        if any(p is None for p in params):
            return False
        try:
            (taken,) = _fold_movement(cv, sl, [index, *params])
        except Exception:  # noqa: BLE001 - not a step of the tensor
            return False
        if not np.array_equal(taken, np.take(index, t, axis=axis)):
            return False
        if len(chain) != len(first):
            return False
        # The same operators on positionally matching values.
        names = {sl.outputs[0]: sl0.outputs[0]}
        for mine, ref in zip(chain, first):
            if _step_signature(cv, mine) != _step_signature(cv, ref) or len(mine.inputs) != len(ref.inputs):
                return False
            for k, (a, b) in enumerate(zip(mine.inputs, ref.inputs)):
                if cv.static(mine, k) is None and names.get(a) != b:
                    return False
            names[mine.outputs[0]] = ref.outputs[0]
        if names.get(op.inputs[t]) != op.inputs[0]:
            return False
        wiring.append(names)
    # Emit the first chain on the whole tensor: its values gain the step axis at `axis`.
    b = cv.builder
    values: dict[int, Any] = {sl0.outputs[0]: cv.operand(sl0, 0)}

    def arg(o: OperatorInfo, k: int) -> Any:
        return values[o.inputs[k]] if o.inputs[k] in values else cv.operand(o, k)

    for o in chain0:
        label = cv.label(o) + "/steps"
        if o.name == "FULLY_CONNECTED":
            w = cv.static(o, 1)
            assert w is not None
            y = b.matmul(arg(o, 0), b.constant({"data_type": cv.float_type, "shape": [int(w.shape[1]), int(w.shape[0])]},
                                               np.ascontiguousarray(w.T).astype(cv._np_float)), label=label)
            if len(o.inputs) > 2 and o.inputs[2] >= 0:
                y = b.add(y, cv.operand(o, 2), label=label + "/bias")
            y = _activation(cv, o, y, _opt(o.options(_fb.FullyConnectedOptions), "FusedActivationFunction", ACT_NONE))
        elif o.name in _PER_STEP_UNARY:
            y = getattr(b, _PER_STEP_UNARY[o.name])(arg(o, 0), label=label)
        elif o.name in _PER_STEP_BINARY:
            method, opts = _PER_STEP_BINARY[o.name]
            y = getattr(b, method)(arg(o, 0), arg(o, 1), label=label)
            y = _activation(cv, o, y, _opt(o.options(opts), "FusedActivationFunction", ACT_NONE))
        elif o.name == "SOFTMAX":
            x = arg(o, 0)
            beta = float(_opt(o.options(_fb.SoftmaxOptions), "Beta", 1.0))
            if beta != 1.0:
                x = b.mul(x, cv.scalar_constant(beta, cv.float_type), label=label + "/beta")
            y = b.softmax(x, len(x.shape) - 1, label=label)
        else:  # GELU
            if _opt(o.options(_fb.GeluOptions), "Approximate", False):
                return False
            y = b.gelu(arg(o, 0), label=label)
        values[o.outputs[0]] = y
    out = values[op.inputs[0]]
    if list(out.shape) != cv.out_shape(op, 0, lambda: list(out.shape)):
        return False
    cv.set_output(op, out)
    return True


@handles("PACK", webnn="reshape + concat (folded at load time when static); a PACK of the steps of an unrolled "
                       "TimeDistributed: the step's operators once, on every step")
def _pack(cv: Converter, op: OperatorInfo) -> None:
    if _time_distributed(cv, op):
        return
    rank = len(cv.tensor(op, 0).shape)
    axis = cv.axis(op, _opt(op.options(_fb.PackOptions), "Axis", 0), rank + 1)
    shape = list(cv.tensor(op, 0).shape)
    shape.insert(axis, 1)
    parts = [cv.builder.reshape(cv.operand(op, i), shape, label=f"{cv.label(op)}/{i}") for i in range(len(op.inputs))]
    cv.set_output(op, parts[0] if len(parts) == 1 else cv.builder.concat(parts, axis, label=cv.label(op)))


@folds("UNPACK")
def _fold_unpack(cv: Converter, op: OperatorInfo, values: list) -> list:
    axis = _opt(op.options(_fb.UnpackOptions), "Axis", 0)
    return [np.take(values[0], k, axis=axis) for k in range(len(op.outputs))]


@handles("UNPACK", webnn="split + reshape")
def _unpack(cv: Converter, op: OperatorInfo) -> None:
    shape = list(cv.tensor(op, 0).shape)
    axis = cv.axis(op, _opt(op.options(_fb.UnpackOptions), "Axis", 0), len(shape))
    if shape[axis] != len(op.outputs):
        raise cv.malformed(op, f"{len(op.outputs)} outputs for a dimension of {shape[axis]}")
    label = cv.label(op)
    parts = [cv.operand(op, 0)] if shape[axis] == 1 else \
        cv.builder.split(cv.operand(op, 0), shape[axis], axis=axis, label=label)
    for j, part in enumerate(parts):
        cv.set_output(op, cv.builder.reshape(part, shape[:axis] + shape[axis + 1:], label=f"{label}/{j}"), j)


@folds("CONCATENATION")
def _fold_concat(cv: Converter, op: OperatorInfo, values: list) -> list:
    o = op.options(_fb.ConcatenationOptions)
    out = np.concatenate(values, axis=_opt(o, "Axis", 0))
    return [_np_activation(out, _opt(o, "FusedActivationFunction", ACT_NONE))]


@folds("GATHER")
def _fold_gather(cv: Converter, op: OperatorInfo, values: list) -> list:
    o = op.options(_fb.GatherOptions)
    if _opt(o, "BatchDims", 0):
        return [_np_gather_batched(values[0], values[1], _opt(o, "Axis", 0), _opt(o, "BatchDims", 0))]
    return [np.take(values[0], values[1], axis=_opt(o, "Axis", 0))]


def _np_gather_batched(x: np.ndarray, idx: np.ndarray, axis: int, batch_dims: int) -> np.ndarray:
    axis %= x.ndim
    batch_dims %= idx.ndim
    out = [_np_gather_batched(x[b], idx[b], axis - 1, batch_dims - 1) if batch_dims > 1 else
           np.take(x[b], idx[b], axis=axis - 1) for b in range(x.shape[0])]
    return np.stack(out)


@folds("STRIDED_SLICE", "SLICE", "TRANSPOSE", "TILE", "REVERSE_V2")
def _fold_movement(cv: Converter, op: OperatorInfo, values: list) -> list:
    x = values[0]
    if op.name == "STRIDED_SLICE":
        plan = _strided_plan(cv, op)
        for axis in plan.reverse_axes:
            x = np.flip(x, axis)
        x = x[tuple(slice(b, b + (n - 1) * st + 1, st) for b, n, st in zip(plan.starts, plan.sizes, plan.strides))]
        return [x.reshape(plan.out_shape)]
    if op.name == "SLICE":
        starts, sizes = _slice_window(cv, op)
        return [x[tuple(slice(b, b + n) for b, n in zip(starts, sizes))]]
    if op.name == "TRANSPOSE":
        return [np.transpose(x, [int(v) for v in values[1].reshape(-1)])]
    if op.name == "TILE":
        return [np.tile(x, [int(v) for v in values[1].reshape(-1)])]
    return [np.flip(x, tuple(int(a) for a in values[1].reshape(-1)))]


@folds("SUM", "REDUCE_PROD", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_ANY", "REDUCE_ALL")
def _fold_reduce(cv: Converter, op: OperatorInfo, values: list) -> list:
    x = values[0]
    axes = tuple(sorted({cv.axis(op, int(a), x.ndim) for a in values[1].reshape(-1)}))
    keep = bool(_opt(op.options(_fb.ReducerOptions), "KeepDims", False))
    fn = {"SUM": np.add, "REDUCE_PROD": np.multiply, "REDUCE_MAX": np.maximum, "REDUCE_MIN": np.minimum,
          "REDUCE_ANY": np.maximum, "REDUCE_ALL": np.minimum}[op.name]
    out = fn.reduce(x, axis=axes, keepdims=keep)  # type: ignore[call-overload]
    return [np.asarray(out).astype(x.dtype)]


_NP_UNARY_FLOAT: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "LOGISTIC": lambda x: 1.0 / (1.0 + np.exp(-x)), "TANH": np.tanh, "RELU": lambda x: np.maximum(x, 0),
    "RELU6": lambda x: np.clip(x, 0, 6), "EXP": np.exp,
}


@folds(*_NP_UNARY_FLOAT)
def _fold_unary_float(cv: Converter, op: OperatorInfo, values: list) -> list:
    with np.errstate(over="ignore"):
        return [_NP_UNARY_FLOAT[op.name](values[0].astype(np.float64))]


@folds("DEQUANTIZE")
def _fold_dequantize(cv: Converter, op: OperatorInfo, values: list) -> list:
    # cv.static gives an int8 input of this float operator dequantized, a float16 one as stored
    # (what the DEQUANTIZE handler records; here also inside a loop body run at load time).
    if values[0].dtype.kind != "f":
        raise cv.unsupported(op, f"input of type {cv.tensor(op, 0).type_name} without quantization parameters")
    return [values[0]]


@folds("FULLY_CONNECTED")
def _fold_fully_connected(cv: Converter, op: OperatorInfo, values: list) -> list:
    o = op.options(_fb.FullyConnectedOptions)
    if _opt(o, "WeightsFormat", 0) != 0:
        raise cv.unsupported(op, "shuffled weights format")
    x, w = values[0].astype(np.float64), values[1].astype(np.float64)
    y = x.reshape(-1, w.shape[1]) @ w.T
    if len(values) > 2 and values[2] is not None:
        y = y + values[2].astype(np.float64)
    keep = bool(_opt(o, "KeepNumDims", False))
    y = y.reshape(cv.out_shape(op, 0, lambda: [*x.shape[:-1], w.shape[0]] if keep else list(y.shape)))
    return [_np_activation(y, _opt(o, "FusedActivationFunction", ACT_NONE))]


@folds("SPLIT")
def _fold_split(cv: Converter, op: OperatorInfo, values: list) -> list:
    return np.split(values[1], len(op.outputs), axis=int(values[0].reshape(-1)[0]))


@folds("SPLIT_V")
def _fold_split_v(cv: Converter, op: OperatorInfo, values: list) -> list:
    x, axis = values[0], int(values[2].reshape(-1)[0])
    sizes = [int(v) for v in values[1].reshape(-1)]
    if sizes.count(-1) == 1:
        sizes[sizes.index(-1)] = x.shape[axis] - (sum(sizes) + 1)
    return np.split(x, np.cumsum(sizes)[:-1], axis=axis)


@folds("SELECT", "SELECT_V2")
def _fold_select(cv: Converter, op: OperatorInfo, values: list) -> list:
    cond, a, b = values
    if op.name == "SELECT" and cond.ndim == 1 and a.ndim > 1:
        cond = cond.reshape([-1] + [1] * (a.ndim - 1))
    return [np.where(cond, a, b)]


@folds("WHERE")
def _fold_where(cv: Converter, op: OperatorInfo, values: list) -> list:
    return [np.argwhere(values[0])]


@handles("WHERE", webnn="(folded at load time; the output's shape depends on the condition's values)")
def _where_coords(cv: Converter, op: OperatorInfo) -> None:
    raise cv.unsupported(op, "a run-time condition (the output's shape depends on its values)")


@folds("RANGE")
def _fold_range(cv: Converter, op: OperatorInfo, values: list) -> list:
    start, limit, delta = (v.reshape(()) for v in values)
    return [np.arange(start, limit, delta)]


@handles("RANGE", webnn="(folded at load time)")
def _range(cv: Converter, op: OperatorInfo) -> None:
    raise cv.unsupported(op, "run-time start, limit or delta (the output's shape would depend on them)")


@folds("DENSIFY")
def _fold_densify(cv: Converter, op: OperatorInfo, values: list) -> list:
    return [values[0]]


@handles("DENSIFY", webnn="(the sparse constant is densified when the model is read)")
def _densify(cv: Converter, op: OperatorInfo) -> None:
    raise cv.unsupported(op, "a run-time (non-constant) input")


# ----------------------------------------------------------------------------- more element-wise ops


for _name, _method in (("ROUND", "round_even"), ("SIGN", "sign")):
    handles(_name, webnn=_method)(_unary(_method))


@handles("RSQRT", webnn="reciprocal(sqrt)")
def _rsqrt(cv: Converter, op: OperatorInfo) -> None:
    label = cv.label(op)
    cv.set_output(op, cv.builder.reciprocal(cv.builder.sqrt(cv.operand(op, 0), label=label + "/sqrt"), label=label))


@handles("SQUARE", webnn="mul(x, x)")
def _square(cv: Converter, op: OperatorInfo) -> None:
    x = cv.operand(op, 0)
    cv.set_output(op, cv.builder.mul(x, x, label=cv.label(op)))


@handles("SQUARED_DIFFERENCE", webnn="sub + mul(d, d)")
def _squared_difference(cv: Converter, op: OperatorInfo) -> None:
    d = cv.builder.sub(cv.operand(op, 0), cv.operand(op, 1), label=cv.label(op) + "/sub")
    cv.set_output(op, cv.builder.mul(d, d, label=cv.label(op)))


@handles("ELU", webnn="elu(alpha=1)")
def _elu(cv: Converter, op: OperatorInfo) -> None:
    cv.set_output(op, cv.builder.elu(cv.operand(op, 0), alpha=1.0, label=cv.label(op)))


@handles("GELU", webnn="gelu (exact), or its tanh form from mul/add/tanh (approximate=True)")
def _gelu(cv: Converter, op: OperatorInfo) -> None:
    b, label, x = cv.builder, cv.label(op), cv.operand(op, 0)
    if not _opt(op.options(_fb.GeluOptions), "Approximate", False):
        cv.set_output(op, b.gelu(x, label=label))
        return
    # 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
    c = lambda v: cv.scalar_constant(v, cv.float_type)  # noqa: E731
    x3 = b.mul(b.mul(x, x, label=label + "/x2"), x, label=label + "/x3")
    inner = b.mul(b.add(x, b.mul(x3, c(0.044715), label=label + "/cx3"), label=label + "/sum"),
                  c(float(np.sqrt(2.0 / np.pi))), label=label + "/inner")
    t = b.add(b.tanh(inner, label=label + "/tanh"), c(1.0), label=label + "/1p")
    cv.set_output(op, b.mul(b.mul(x, c(0.5), label=label + "/half"), t, label=label))


def _self_difference(cv: Converter, op: OperatorInfo) -> OperatorInfo | None:
    """The ``SUB(x, x)`` of a float ``x`` read by ``EQUAL(SUB(x, x), 0)`` (or ``EQUAL(0, SUB(x,
    x))``): how the converter writes TensorFlow's ``IsFinite`` (``tf.math.is_finite``,
    ``keras.ops.isfinite``, ``nan_to_num``), else None."""
    for side in (0, 1):
        sub, zero = cv.producer(op.inputs[side]), cv.static(op, 1 - side)
        if sub is None or sub.name != "SUB" or sub.inputs[0] != sub.inputs[1] or zero is None or np.any(zero != 0):
            continue
        x = cv.model.tensors[sub.inputs[0]]
        if x.type_name not in ("FLOAT32", "FLOAT16"):
            continue
        if _opt(sub.options(_fb.SubOptions), "FusedActivationFunction", ACT_NONE) != ACT_NONE:
            continue
        return sub
    return None


@handles("EQUAL", webnn="equal (BOOL is uint8); EQUAL(SUB(x, x), 0) or EQUAL(0, SUB(x, x)) (TensorFlow's IsFinite) is "
                        "logical_not(logical_or(is_nan(x), is_infinite(x)))")
def _equal(cv: Converter, op: OperatorInfo) -> None:
    sub = _self_difference(cv, op)
    if sub is None:
        cv.set_output(op, cv.builder.equal(cv.operand(op, 0), cv.operand(op, 1), label=cv.label(op)))
        return
    # Computed as written, x - x == 0 is false for NaN and +-inf; but llvmpipe's shader compiler
    # folds x - x to 0 (WGSL lets it assume finite values), so the test is made on x's bits.
    b, label = cv.builder, cv.label(op)
    v = cv.operand(sub, 0)
    bad = b.logical_or(b.is_nan(v, label=label + "/nan"), b.is_infinite(v, label=label + "/inf"), label=label + "/bad")
    zero = cv.tensor(op, 1 - op.inputs.index(sub.outputs[0]))
    try:
        shape = list(np.broadcast_shapes(tuple(v.shape), tuple(int(d) for d in zero.shape)))
    except ValueError:
        raise cv.malformed(op, f"shapes {list(v.shape)} and {list(zero.shape)} that do not broadcast") from None
    if shape == list(v.shape):
        cv.set_output(op, b.logical_not(bad, label=label))
    else:  # (a zero of more dimensions broadcasts the result)
        cv.set_output(op, b.expand(b.logical_not(bad, label=label + "/finite"), shape, label=label))


for _name, _method in (("NOT_EQUAL", "not_equal"), ("GREATER", "greater"),
                       ("GREATER_EQUAL", "greater_or_equal"), ("LESS", "lesser"),
                       ("LESS_EQUAL", "lesser_or_equal"), ("LOGICAL_AND", "logical_and"),
                       ("LOGICAL_OR", "logical_or")):
    handles(_name, webnn=f"{_method} (BOOL is uint8)")(_binary_plain(_method))
handles("LOGICAL_NOT", webnn="logical_not (BOOL is uint8)")(_unary("logical_not"))


@handles("ADD_N", webnn="add, chained")
def _add_n(cv: Converter, op: OperatorInfo) -> None:
    y = cv.operand(op, 0)
    for i in range(1, len(op.inputs)):
        y = cv.builder.add(y, cv.operand(op, i), label=f"{cv.label(op)}/{i}")
    if len(op.inputs) == 1:
        y = cv.builder.identity(y, label=cv.label(op))
    cv.set_output(op, y)


def _trunc_div(cv: Converter, op: OperatorInfo, a: Any, b: Any, integer: bool) -> Any:
    """a / b rounded toward zero (integer division already truncates)."""
    bld, label = cv.builder, cv.label(op)
    q = bld.div(a, b, label=label + "/div")
    if integer:
        return q
    return bld.where(bld.lesser(q, cv.scalar_constant(0.0, cv.float_type), label=label + "/neg"),
                     bld.ceil(q, label=label + "/ceil"), bld.floor(q, label=label + "/floor"), label=label + "/trunc")


@handles("FLOOR_DIV", webnn="floor(div) for floats; div with a sign correction for integers")
def _floor_div(cv: Converter, op: OperatorInfo) -> None:
    bld, label = cv.builder, cv.label(op)
    a, b = cv.operand(op, 0), cv.operand(op, 1)
    if _webnn_type(cv, op) == cv.float_type:
        cv.set_output(op, bld.floor(bld.div(a, b, label=label + "/div"), label=label))
        return
    dt = _webnn_type(cv, op)
    q = bld.div(a, b, label=label + "/div")
    r = bld.sub(a, bld.mul(q, b, label=label + "/qb"), label=label + "/rem")
    zero = bld.constant({"data_type": dt, "shape": []}, np.zeros((), _np_type(cv, op)))
    adjust = bld.logical_and(bld.not_equal(r, zero, label=label + "/nz"),
                             bld.not_equal(bld.lesser(r, zero, label=label + "/rneg"),
                                           bld.lesser(b, zero, label=label + "/bneg"), label=label + "/sgn"),
                             label=label + "/adjust")
    cv.set_output(op, bld.sub(q, bld.cast(adjust, dt, label=label + "/cast"), label=label))


@handles("FLOOR_MOD", webnn="a - trunc(a / b) * b, plus b where the signs differ (TFLite's definition)")
def _floor_mod(cv: Converter, op: OperatorInfo) -> None:
    bld, label = cv.builder, cv.label(op)
    a, b = cv.operand(op, 0), cv.operand(op, 1)
    dt = _webnn_type(cv, op)
    integer = dt != cv.float_type
    q = _trunc_div(cv, op, a, b, integer)
    m = bld.sub(a, bld.mul(q, b, label=label + "/qb"), label=label + "/fmod")
    zero = bld.constant({"data_type": dt, "shape": []}, np.zeros((), np.float16 if dt == "float16" else
                                                                  _np_type(cv, op)))
    adjust = bld.logical_and(bld.not_equal(m, zero, label=label + "/nz"),
                             bld.not_equal(bld.lesser(m, zero, label=label + "/mneg"),
                                           bld.lesser(b, zero, label=label + "/bneg"), label=label + "/sgn"),
                             label=label + "/adjust")
    cv.set_output(op, bld.where(adjust, bld.add(m, b, label=label + "/plus"), m, label=label))


@handles("CAST", webnn="cast (to BOOL: not_equal(x, 0))")
def _cast(cv: Converter, op: OperatorInfo) -> None:
    x, label = cv.operand(op, 0), cv.label(op)
    if cv.out_tensor(op).type_name == "BOOL":
        zero = cv.builder.constant({"data_type": x.data_type, "shape": []},
                                   np.zeros((), np.dtype(x.data_type)))
        cv.set_output(op, cv.builder.not_equal(x, zero, label=label))
        return
    dt = _webnn_type(cv, op)
    cv.set_output(op, cv.builder.cast(x, dt, label=label) if dt != x.data_type else
                  cv.builder.identity(x, label=label))


@handles("SELECT", "SELECT_V2", webnn="where (SELECT's rank-1 condition picks rows; in float16 a mask value "
                                       "beyond its range read by a SOFTMAX is +-65504)")
def _select(cv: Converter, op: OperatorInfo) -> None:
    cond = cv.operand(op, 0)
    rank = len(cv.tensor(op, 1).shape)
    if op.name == "SELECT" and len(cond.shape) == 1 and rank > 1:
        cond = cv.builder.reshape(cond, [int(cond.shape[0])] + [1] * (rank - 1), label=cv.label(op) + "/rows")
    cv.set_output(op, cv.builder.where(cond, _mask_value(cv, op, 1), _mask_value(cv, op, 2), label=cv.label(op)))


def _mask_value(cv: Converter, op: OperatorInfo, i: int) -> Any:
    """Input ``i`` of SELECT / SELECT_V2. In a float16 graph, a constant beyond float16's range
    (an attention mask's -1e9, Keras' MultiHeadAttention) read by a SOFTMAX alone is float16's
    largest finite magnitude with its sign: exp of it minus the line's maximum is 0 as exp(-1e9 -
    max) is, and a line masked everywhere stays uniform (as in float32; -inf would give NaN)."""
    value = cv.static(op, i)
    reader = cv.sole_consumer(op.outputs[0])
    if (cv.float_type != "float16" or value is None or value.dtype.kind != "f" or reader is None
            or reader.name != "SOFTMAX" or _opt(reader.options(_fb.SoftmaxOptions), "Beta", 1.0) != 1.0
            or np.all(np.abs(value) <= np.finfo(np.float16).max)):
        return cv.operand(op, i)
    top = float(np.finfo(np.float16).max)
    clamped = np.clip(np.asarray(value, np.float32), -top, top).astype(np.float16)
    return cv.builder.constant({"data_type": "float16", "shape": list(clamped.shape)}, clamped)


# ----------------------------------------------------------------------------- reductions, normalizations


@handles("ARG_MAX", "ARG_MIN", webnn="arg_max / arg_min(axis, output_data_type)")
def _arg_max_min(cv: Converter, op: OperatorInfo) -> None:
    rank = len(cv.tensor(op, 0).shape)
    axis = cv.axis(op, int(cv.value(op, 1).reshape(-1)[0]), rank)
    method = "arg_max" if op.name == "ARG_MAX" else "arg_min"
    y = getattr(cv.builder, method)(cv.operand(op, 0), axis, keep_dimensions=False,
                                    output_data_type=_webnn_type(cv, op), label=cv.label(op))
    cv.set_output(op, y)


def _topk_k(cv: Converter, op: OperatorInfo, n: int) -> int:
    k = int(cv.value(op, 1).reshape(-1)[0])
    if not 0 < k <= n:
        raise cv.malformed(op, f"k = {k} for rows of {n} values")
    if _webnn_type(cv, op, 1) != "int32":
        raise cv.unsupported(op, f"indices of type {cv.out_tensor(op, 1).type_name} (int32 only)")
    return k


def _float_indices(cv: Converter, op: OperatorInfo) -> OperatorInfo | None:
    """The CAST to float32 that alone reads TOPK_V2 ``op``'s indices (not a model output), or None."""
    t = op.outputs[1]
    readers = cv.readers(t)
    if t in cv.model.outputs or len(readers) != 1 or readers[0].name != "CAST" or readers[0].index in cv.claimed:
        return None
    return readers[0] if cv.out_tensor(readers[0]).type_name == "FLOAT32" else None


@handles("TOPK_V2", webnn="one custom WGSL operator (MLGraphBuilder.wgsl): per row, k rounds over the last axis, "
                          "each taking the largest value after the previous round's in (value desc, index asc) order")
def _topk_v2(cv: Converter, op: OperatorInfo) -> None:
    # TFLite's TopK: the k largest values of each row (last axis) in descending order, ties
    # in index order, and their int32 indices.
    shape = [int(v) for v in cv.tensor(op, 0).shape]
    if not shape:
        raise cv.malformed(op, "a scalar input (TOPK_V2 needs rank >= 1)")
    n = shape[-1]
    x = cv.operand(op, 0)
    if x.data_type not in ("float32", "float16", "int32"):
        raise cv.unsupported(op, f"an input of type {x.data_type}")
    # The later TOPK_V2 of the same input (Keras: top_k and a sort of the same scores) join.
    group = [op] + [o for o in cv.readers(op.inputs[0]) if o.index > op.index and o.name == "TOPK_V2" and
                    o.inputs[0] == op.inputs[0] and o.index not in cv.claimed and cv.static(o, 1) is not None]
    ks = [_topk_k(cv, o, n) for o in group]
    casts = [_float_indices(cv, o) for o in group]
    reason = _topk.too_long(n)
    if reason is not None:
        raise cv.unsupported(op, reason)
    outs = _topk.top_k(cv.builder, x, ks, index_types=["float32" if cast is not None else "int32" for cast in casts],
                       label=cv.label(op))
    for j, (o, cast) in enumerate(zip(group, casts)):
        cv.set_output(o, outs[2 * j], 0)
        if cast is None:
            cv.set_output(o, outs[2 * j + 1], 1)
        else:  # the CAST's output, written by the kernel
            cv.set_output(cast, outs[2 * j + 1])
            cv.claimed.add(cast.index)
        if o is not op:
            cv.claimed.add(o.index)


@handles("CUMSUM", webnn="cumulative_sum(axis, exclusive=, reversed=)")
def _cumsum(cv: Converter, op: OperatorInfo) -> None:
    o = op.options(_fb.CumsumOptions)
    rank = len(cv.tensor(op, 0).shape)
    axis = cv.axis(op, int(cv.value(op, 1).reshape(-1)[0]), rank)
    cv.set_output(op, cv.builder.cumulative_sum(cv.operand(op, 0), axis, exclusive=bool(_opt(o, "Exclusive", False)),
                                                reversed=bool(_opt(o, "Reverse", False)), label=cv.label(op)))


@handles("LOG_SOFTMAX", webnn="x - max - log(reduce_sum(exp(x - max))) over the last axis")
def _log_softmax(cv: Converter, op: OperatorInfo) -> None:
    b, label, x = cv.builder, cv.label(op), cv.operand(op, 0)
    axes = [len(cv.tensor(op, 0).shape) - 1]
    shifted = b.sub(x, b.reduce_max(x, axes=axes, keep_dimensions=True, label=label + "/max"), label=label + "/shift")
    total = b.reduce_sum(b.exp(shifted, label=label + "/exp"), axes=axes, keep_dimensions=True, label=label + "/sum")
    cv.set_output(op, b.sub(shifted, b.log(total, label=label + "/log"), label=label))


@handles("L2_NORMALIZATION", webnn="x / max(reduce_l2(x, last axis), 1e-6) + fused activation; float32: "
                                   "x * reciprocal(sqrt(max(reduce_sum(x * x), 1e-12))), the same values, which "
                                   "the compiler runs as one normalization kernel")
def _l2_normalization(cv: Converter, op: OperatorInfo) -> None:
    b, label, x = cv.builder, cv.label(op), cv.operand(op, 0)
    axes = [len(cv.tensor(op, 0).shape) - 1]
    if cv.float_type == "float32":  # (1e-12 is 0 in float16)
        total = b.reduce_sum(b.mul(x, x, label=label + "/square"), axes=axes, keep_dimensions=True,
                             label=label + "/sum")
        inv = b.reciprocal(b.sqrt(b.max(total, cv.scalar_constant(1e-12, "float32"), label=label + "/eps"),
                                  label=label + "/norm"), label=label + "/inverse")
        y = b.mul(x, inv, label=label)
    else:
        norm = b.max(b.reduce_l2(x, axes=axes, keep_dimensions=True, label=label + "/norm"),
                     cv.scalar_constant(1e-6, cv.float_type), label=label + "/eps")
        y = b.div(x, norm, label=label)
    cv.set_output(op, _activation(cv, op, y, _opt(op.options(_fb.L2NormOptions), "FusedActivationFunction", ACT_NONE)))


@handles("LOCAL_RESPONSE_NORMALIZATION",
         webnn="x * pow(bias + alpha * matmul(x^2, band), -beta) over the channels")
def _local_response_normalization(cv: Converter, op: OperatorInfo) -> None:
    o = op.options(_fb.LocalResponseNormalizationOptions)
    radius = int(_opt(o, "Radius", 5))
    bias, alpha, beta = float(_opt(o, "Bias", 1.0)), float(_opt(o, "Alpha", 1.0)), float(_opt(o, "Beta", 0.5))
    shape = list(cv.tensor(op, 0).shape)
    channels = shape[-1]
    b, label, x = cv.builder, cv.label(op), cv.operand(op, 0)
    # Window sums along the channels: a band matrix (1 where |i - c| <= radius).
    idx = np.arange(channels)
    band = (np.abs(idx[:, None] - idx[None, :]) <= radius).astype(cv._np_float)
    rows = int(np.prod(shape[:-1], dtype=np.int64))
    sq = b.reshape(b.mul(x, x, label=label + "/sq"), [rows, channels], label=label + "/rows")
    acc = b.reshape(b.matmul(sq, b.constant({"data_type": cv.float_type, "shape": [channels, channels]}, band),
                             label=label + "/window"), shape, label=label + "/unrows")
    base = b.add(b.mul(acc, cv.scalar_constant(alpha, cv.float_type), label=label + "/alpha"),
                 cv.scalar_constant(bias, cv.float_type), label=label + "/bias")
    scale = b.pow(base, cv.scalar_constant(-beta, cv.float_type), label=label + "/pow")
    cv.set_output(op, b.mul(x, scale, label=label))


# ----------------------------------------------------------------------------- data movement


def _reversal_source(cv: Converter, tensor: int, axes: list[int]) -> Any | None:
    """The operand whose reversal along ``axes`` ``tensor`` is (so that reversing ``tensor``
    along them gives it back), through RESHAPEs that only add or drop dimensions of size 1;
    None when the loader knows of none (:attr:`Converter.reversed_of`)."""
    if len(axes) != 1:
        return None
    axis = axes[0]
    for _ in range(8):
        if tensor in cv.reversed_of:
            src, along = cv.reversed_of[tensor]
            return src if along == axis else None
        prod = cv.producer(tensor)
        if prod is None or prod.name != "RESHAPE":
            return None
        shape_out = [int(d) for d in cv.model.tensors[tensor].shape] if tensor not in cv._shapes else \
            list(cv._shapes[tensor])
        shape_in = [int(d) for d in cv.tensor(prod, 0).shape]
        kept_out = [i for i, d in enumerate(shape_out) if d != 1]
        kept_in = [i for i, d in enumerate(shape_in) if d != 1]
        if [shape_out[i] for i in kept_out] != [shape_in[i] for i in kept_in] or axis not in kept_out:
            return None
        axis = kept_in[kept_out.index(axis)]
        tensor = prod.inputs[0]
    return None


@handles("REVERSE_V2", webnn="reverse(axes=) (a reversal of a backward recurrent layer's reversed buffer: a view)")
def _reverse_v2(cv: Converter, op: OperatorInfo) -> None:
    rank = len(cv.tensor(op, 0).shape)
    axes = sorted({cv.axis(op, int(a), rank) for a in cv.value(op, 1).reshape(-1)})
    src = _reversal_source(cv, op.inputs[0], axes)
    if src is not None:
        cv.set_output(op, cv.builder.reshape(src, [int(d) for d in cv.tensor(op, 0).shape], label=cv.label(op)))
        return
    cv.set_output(op, cv.builder.reverse(cv.operand(op, 0), axes=axes, label=cv.label(op)))


@handles("TILE", webnn="tile(repetitions=)")
def _tile(cv: Converter, op: OperatorInfo) -> None:
    reps = [int(v) for v in cv.value(op, 1).reshape(-1)]
    cv.set_output(op, cv.builder.tile(cv.operand(op, 0), reps, label=cv.label(op)))


def _slice_window(cv: Converter, op: OperatorInfo) -> tuple[list[int], list[int]]:
    shape = cv.tensor(op, 0).shape
    begin = [int(v) for v in cv.value(op, 1).reshape(-1)]
    size = [int(v) for v in cv.value(op, 2).reshape(-1)]
    if len(begin) != len(shape) or len(size) != len(shape):
        raise cv.malformed(op, f"begin {begin} and size {size} for a rank-{len(shape)} input")
    size = [d - b if n == -1 else n for b, n, d in zip(begin, size, shape)]
    if any(b < 0 or n < 0 or b + n > d for b, n, d in zip(begin, size, shape)):
        raise cv.malformed(op, f"begin {begin}, size {size} outside the input {list(shape)}")
    return begin, size


@handles("SLICE", webnn="slice(starts, sizes)")
def _slice(cv: Converter, op: OperatorInfo) -> None:
    begin, size = _slice_window(cv, op)
    if 0 in size:  # an empty tensor has no values: a load-time constant (e.g. a loop's first TensorList slice)
        cv.set_constant(op, np.zeros(size, _np_type(cv, op)))
        return
    cv.set_output(op, cv.builder.slice(cv.operand(op, 0), begin, size, label=cv.label(op)))


class StridedSlicePlan(tuple):
    """What a STRIDED_SLICE does to its input: reverse some axes, take a positive-stride
    window, reshape (dropping shrunk axes, adding new ones)."""

    __slots__ = ()

    def __new__(cls, reverse_axes, starts, sizes, strides, out_shape):
        return super().__new__(cls, (tuple(reverse_axes), tuple(starts), tuple(sizes), tuple(strides),
                                     tuple(out_shape)))

    reverse_axes = property(lambda self: self[0])
    starts = property(lambda self: self[1])
    sizes = property(lambda self: self[2])
    strides = property(lambda self: self[3])
    out_shape = property(lambda self: self[4])


def strided_slice_plan(shape: Sequence[int], begin: Sequence[int], end: Sequence[int], strides: Sequence[int], *,
                       begin_mask: int = 0, end_mask: int = 0, ellipsis_mask: int = 0, new_axis_mask: int = 0,
                       shrink_axis_mask: int = 0, offset: bool = False) -> StridedSlicePlan:
    """TFLite's STRIDED_SLICE as reverse + positive-stride slice + reshape.

    The sparse specification (one entry per ``begin`` element, with the masks) is
    expanded to one ``(start, stop, step)`` per input dimension with NumPy's (and
    TensorFlow's) clamping rules; an axis with a negative step is reversed first so
    that the window has positive strides.

    Arguments:
        shape: the input's shape.
        begin, end, strides: the three index vectors (same length).
        begin_mask ... shrink_axis_mask (int): the bit masks of StridedSliceOptions.
        offset (bool): ``end`` is relative to ``begin``.

    Returns:
        StridedSlicePlan: reverse_axes, starts, sizes, strides (of the reversed input),
        out_shape (the final shape).

    Raises:
        ValueError: inconsistent vectors or a zero stride.
    """
    n = len(begin)
    if len(end) != n or len(strides) != n:
        raise ValueError(f"begin {list(begin)}, end {list(end)} and strides {list(strides)} differ in length")
    if any(int(s) == 0 for s in strides):
        raise ValueError(f"strides {list(strides)} hold a zero")
    rank = len(shape)
    ellipsis = [i for i in range(n) if ellipsis_mask >> i & 1]
    if len(ellipsis) > 1:
        raise ValueError("more than one ellipsis")
    specified = sum(1 for i in range(n) if not (ellipsis_mask >> i & 1) and not (new_axis_mask >> i & 1))
    dims: list[tuple[int, int, int, bool] | None] = []  # per input dim: start, stop, step, shrink
    out_shape: list[int] = []
    d = 0

    def full(size: int) -> None:
        dims.append((0, size, 1, False))
        out_shape.append(size)

    for i in range(n):
        if ellipsis_mask >> i & 1:
            for _ in range(rank - specified):
                if d >= rank:
                    raise ValueError("the specification addresses more dimensions than the input has")
                full(int(shape[d]))
                d += 1
            continue
        if new_axis_mask >> i & 1:
            out_shape.append(1)
            continue
        if d >= rank:
            raise ValueError(f"the specification addresses more than the input's {rank} dimensions")
        size = int(shape[d])
        b, e, st = int(begin[i]), int(end[i]), int(strides[i])
        if offset:
            e = b + e
        if shrink_axis_mask >> i & 1:
            k = b + size if b < 0 else b
            if not 0 <= k < size:
                raise ValueError(f"index {b} out of range for dimension {d} of size {size}")
            dims.append((k, k + 1, 1, True))
        else:
            start, stop, step = slice(None if begin_mask >> i & 1 else b, None if end_mask >> i & 1 else e,
                                      st).indices(size)
            dims.append((start, stop, step, False))
            out_shape.append(len(range(start, stop, step)))
        d += 1
    while d < rank:
        full(int(shape[d]))
        d += 1
    reverse, starts, sizes, steps = [], [], [], []
    for axis, (start, stop, step, _) in enumerate(dims):  # type: ignore[misc]
        count = len(range(start, stop, step))  # 0: an empty result
        if step < 0:
            reverse.append(axis)
            start, step = int(shape[axis]) - 1 - start, -step
        starts.append(start)
        sizes.append(count)
        steps.append(step)
    return StridedSlicePlan(reverse, starts, sizes, steps, out_shape)


def _strided_plan(cv: Converter, op: OperatorInfo) -> StridedSlicePlan:
    o = op.options(_fb.StridedSliceOptions)
    try:
        return strided_slice_plan(
            cv.tensor(op, 0).shape, [int(v) for v in cv.value(op, 1).reshape(-1)],
            [int(v) for v in cv.value(op, 2).reshape(-1)],
            [int(v) for v in cv.value(op, 3).reshape(-1)] if len(op.inputs) > 3 and op.inputs[3] >= 0 else
            [1] * cv.value(op, 1).size,
            begin_mask=_opt(o, "BeginMask", 0), end_mask=_opt(o, "EndMask", 0),
            ellipsis_mask=_opt(o, "EllipsisMask", 0), new_axis_mask=_opt(o, "NewAxisMask", 0),
            shrink_axis_mask=_opt(o, "ShrinkAxisMask", 0), offset=bool(_opt(o, "Offset", False)))
    except ValueError as exc:
        raise cv.unsupported(op, str(exc)) from None


@handles("STRIDED_SLICE", webnn="reverse (negative strides) + slice(starts, sizes, strides) + reshape (all masks)")
def _strided_slice(cv: Converter, op: OperatorInfo) -> None:
    plan = _strided_plan(cv, op)
    if 0 in plan.out_shape:  # an empty tensor has no values: a load-time constant
        cv.set_constant(op, np.zeros(plan.out_shape, _np_type(cv, op)))
        return
    b, label = cv.builder, cv.label(op)
    x = cv.operand(op, 0)
    shape = tuple(int(v) for v in cv.tensor(op, 0).shape)
    if plan.reverse_axes:
        x = b.reverse(x, axes=list(plan.reverse_axes), label=label + "/reverse")
    if tuple(plan.sizes) != shape or any(s != 1 for s in plan.strides):
        windows = [(n - 1) * st + 1 for n, st in zip(plan.sizes, plan.strides)]  # WebNN sizes span the window
        x = b.slice(x, list(plan.starts), windows, strides=list(plan.strides), label=label)
    if tuple(plan.out_shape) != tuple(int(v) for v in x.shape) or x is cv.operand(op, 0):
        x = b.reshape(x, list(plan.out_shape), label=label + "/reshape")
    cv.set_output(op, x)


@handles("SPLIT", webnn="split(count, axis)")
def _split(cv: Converter, op: OperatorInfo) -> None:
    shape = cv.tensor(op, 1).shape
    axis = cv.axis(op, int(cv.value(op, 0).reshape(-1)[0]), len(shape))
    count = len(op.outputs)
    if shape[axis] % count:
        raise cv.malformed(op, f"dimension {shape[axis]} does not split into {count}")
    parts = [cv.operand(op, 1)] if count == 1 else cv.builder.split(cv.operand(op, 1), count, axis=axis,
                                                                     label=cv.label(op))
    for j, part in enumerate(parts):
        cv.set_output(op, part if count > 1 else cv.builder.identity(part, label=cv.label(op)), j)


@handles("SPLIT_V", webnn="split(sizes, axis)")
def _split_v(cv: Converter, op: OperatorInfo) -> None:
    shape = cv.tensor(op, 0).shape
    axis = cv.axis(op, int(cv.value(op, 2).reshape(-1)[0]), len(shape))
    sizes = [int(v) for v in cv.value(op, 1).reshape(-1)]
    if sizes.count(-1) == 1:
        sizes[sizes.index(-1)] = shape[axis] - (sum(sizes) + 1)
    if sum(sizes) != shape[axis] or min(sizes) < 0:
        raise cv.malformed(op, f"size_splits {sizes} for a dimension of {shape[axis]}")
    if 0 in sizes:
        raise cv.unsupported(op, "an empty split")
    parts = [cv.operand(op, 0)] if len(sizes) == 1 else cv.builder.split(cv.operand(op, 0), sizes, axis=axis,
                                                                          label=cv.label(op))
    for j, part in enumerate(parts):
        cv.set_output(op, part if len(sizes) > 1 else cv.builder.identity(part, label=cv.label(op)), j)


def _block_params(cv: Converter, op: OperatorInfo, what: str) -> tuple[list[int], list[int], list[int], list[int]]:
    """(shape, block, before, after) of SPACE_TO_BATCH_ND (``what`` = paddings) or
    BATCH_TO_SPACE_ND (crops): inputs [batch, spatial..., rest...], block_shape [M], [M, 2]."""
    shape = [int(d) for d in cv.tensor(op, 0).shape]
    block = [int(v) for v in cv.value(op, 1).reshape(-1)]
    pairs = np.asarray(cv.value(op, 2), np.int64)
    m = len(block)
    if not 1 <= m < len(shape) or pairs.shape != (m, 2) or min(block) < 1 or (pairs < 0).any():
        raise cv.malformed(op, f"block_shape {block} and {what} {pairs.tolist()} for an input of shape {shape}")
    return shape, block, [int(v) for v in pairs[:, 0]], [int(v) for v in pairs[:, 1]]


def _dilated_conv(cv: Converter, op: OperatorInfo) -> bool:
    """TensorFlow's form of a dilated convolution, ``SPACE_TO_BATCH_ND -> [EXPAND_DIMS] ->
    CONV_2D | DEPTHWISE_CONV_2D (VALID, stride 1, no dilation) -> [RESHAPE] ->
    BATCH_TO_SPACE_ND`` with one block shape, each the sole reader of the one before, as
    one ``conv2d`` with ``dilations`` = the block and ``padding`` = paddings - crops
    (when none is negative). Emits it and says whether it did."""
    shape, block, before, after = _block_params(cv, op, "paddings")
    chain, t = [], op.outputs[0]
    nxt = cv.sole_consumer(t)
    expand_axis = None
    if len(shape) == 3 and nxt is not None and nxt.name == "EXPAND_DIMS" and nxt.inputs[0] == t:
        axis = cv.static(nxt, 1)
        expand_axis = None if axis is None or axis.size != 1 else int(axis.reshape(-1)[0]) % 4
        if expand_axis not in (1, 2):
            return False
        chain.append(nxt)
        t = nxt.outputs[0]
        nxt = cv.sole_consumer(t)
    if len(shape) + (expand_axis is not None) != 4 or len(block) != len(shape) - 2:
        return False
    if nxt is None or nxt.name not in ("CONV_2D", "DEPTHWISE_CONV_2D") or nxt.inputs[0] != t:
        return False
    conv = nxt
    o = conv.options(_fb.Conv2DOptions if conv.name == "CONV_2D" else _fb.DepthwiseConv2DOptions)
    if (_opt(o, "Padding", PADDING_SAME) != PADDING_VALID or _opt(o, "StrideH", 1) != 1 or _opt(o, "StrideW", 1) != 1
            or _opt(o, "DilationHFactor", 1) != 1 or _opt(o, "DilationWFactor", 1) != 1):
        return False
    chain.append(conv)
    t = conv.outputs[0]
    nxt = cv.sole_consumer(t)
    if expand_axis is not None:
        if nxt is None or nxt.name not in ("RESHAPE", "SQUEEZE") or nxt.inputs[0] != t:
            return False
        chain.append(nxt)
        t = nxt.outputs[0]
        nxt = cv.sole_consumer(t)
    if nxt is None or nxt.name != "BATCH_TO_SPACE_ND" or nxt.inputs[0] != t:
        return False
    b2s = nxt
    crops, b2s_block = cv.static(b2s, 2), cv.static(b2s, 1)
    if b2s_block is None or [int(v) for v in b2s_block.reshape(-1)] != block or crops is None \
            or np.asarray(crops).shape != (len(block), 2):
        return False
    crops = np.asarray(crops, np.int64)
    pads = [(lo - int(c0), hi - int(c1)) for lo, hi, (c0, c1) in zip(before, after, crops)]
    if any(p < 0 for pair in pads for p in pair):
        return False
    if expand_axis is None:
        dilations, padding = block, [*pads[0], *pads[1]]
    elif expand_axis == 1:  # [N, 1, W, C]: the block runs along the width
        dilations, padding = [1, block[0]], [0, 0, *pads[0]]
    else:  # [N, W, 1, C]: along the height
        dilations, padding = [block[0], 1], [*pads[0], 0, 0]
    b, label = cv.builder, cv.label(op)
    x = cv.operand(op, 0)
    if expand_axis is not None:
        x = b.reshape(x, shape[:expand_axis] + [1] + shape[expand_axis:], label=label + "/expand")
    channels = int(x.shape[3])
    w_shape = cv.tensor(conv, 1).shape
    if conv.name == "CONV_2D":
        if len(w_shape) != 4 or int(w_shape[3]) <= 0 or channels % int(w_shape[3]):
            return False
        groups, filter_layout = channels // int(w_shape[3]), "ohwi"
    else:
        if len(w_shape) != 4 or int(w_shape[3]) % channels:
            return False
        groups, filter_layout = channels, "ihwo"
    activation = _opt(o, "FusedActivationFunction", ACT_NONE)
    bias = cv.optional_operand(conv, 2)
    add = _bias_after(cv, conv, b2s, int(w_shape[0] if conv.name == "CONV_2D" else w_shape[3])) \
        if activation == ACT_NONE else None
    if add is not None:  # the converter's bias ADD after BATCH_TO_SPACE_ND: the conv's own bias
        bias, add_op = cv.constant_like(conv, 2, add[0]), add[1]
        activation = _opt(add_op.options(_fb.AddOptions), "FusedActivationFunction", ACT_NONE)
    y = b.conv2d(x, cv.operand(conv, 1), padding=padding, strides=[1, 1], dilations=dilations, groups=groups,
                 input_layout="nhwc", filter_layout=filter_layout, bias=bias, label=f"{cv.label(conv)}/dilated")
    y = _activation(cv, add[1] if add is not None else conv, y, activation)
    if expand_axis is not None:
        y = b.reshape(y, [int(d) for i, d in enumerate(y.shape) if i != expand_axis], label=cv.label(b2s))
    cv.set_output(b2s, y)
    cv.claimed.update(o.index for o in (*chain, b2s))
    if add is not None:  # (BATCH_TO_SPACE_ND's output, read by the ADD alone, holds its result too)
        cv.set_output(add[1], y)
        cv.claimed.add(add[1].index)
    return True


def _bias_after(cv: Converter, conv: OperatorInfo, last: OperatorInfo, channels: int
                ) -> tuple[np.ndarray, OperatorInfo] | None:
    """An ADD of a per-channel constant (a vector of ``channels``, or one value, along the last
    axis) that is the sole reader of ``last``'s output: (the conv's own constant bias, or zeros,
    plus it; the ADD), or None."""
    found, own = _constant_add(cv, last.outputs[0]), _own_bias(cv, conv, channels)
    if found is None or own is None:
        return None
    add, c = found
    if c.size not in (1, channels) or any(int(d) != 1 for d in c.shape[:-1]):
        return None
    return own.astype(np.float64).reshape(-1) + np.broadcast_to(c.astype(np.float64).reshape(-1), [channels]), add


@handles("SPACE_TO_BATCH_ND", webnn="conv2d(dilations=) with the convolution and BATCH_TO_SPACE_ND after it "
                                    "(a dilated convolution); else pad + reshape + transpose + reshape")
def _space_to_batch_nd(cv: Converter, op: OperatorInfo) -> None:
    if _dilated_conv(cv, op):
        return
    shape, block, before, after = _block_params(cv, op, "paddings")
    m, b, label = len(block), cv.builder, cv.label(op)
    batch, spatial, rest = shape[0], shape[1:1 + m], shape[1 + m:]
    padded = [s + lo + hi for s, lo, hi in zip(spatial, before, after)]
    if any(p % k for p, k in zip(padded, block)):
        raise cv.malformed(op, f"padded spatial shape {padded} not a multiple of block_shape {block}")
    x = cv.operand(op, 0)
    if any(before) or any(after):
        zeros = [0] * len(rest)
        x = b.pad(x, [0, *before, *zeros], [0, *after, *zeros], label=label + "/pad")
    depth = int(np.prod(rest, dtype=np.int64))
    blocks = [v for p, k in zip(padded, block) for v in (p // k, k)]  # [batch, s1/b1, b1, ..., depth]
    x = b.reshape(x, [batch, *blocks, depth], label=label + "/blocks")
    perm = [2 + 2 * i for i in range(m)] + [0] + [1 + 2 * i for i in range(m)] + [2 * m + 1]
    x = b.transpose(x, permutation=perm, label=label + "/transpose")
    out = [batch * int(np.prod(block)), *[p // k for p, k in zip(padded, block)], *rest]
    cv.set_output(op, b.reshape(x, out, label=label))


@handles("BATCH_TO_SPACE_ND", webnn="reshape + transpose + reshape + slice (crops)")
def _batch_to_space_nd(cv: Converter, op: OperatorInfo) -> None:
    shape, block, before, after = _block_params(cv, op, "crops")
    m, b, label = len(block), cv.builder, cv.label(op)
    count = int(np.prod(block))
    if shape[0] % count:
        raise cv.malformed(op, f"batch {shape[0]} not a multiple of the block_shape {block}'s {count} cells")
    batch, spatial, rest = shape[0] // count, shape[1:1 + m], shape[1 + m:]
    full = [s * k for s, k in zip(spatial, block)]
    if any(lo + hi >= f for lo, hi, f in zip(before, after, full)):
        raise cv.malformed(op, f"crops {list(zip(before, after))} leave nothing of the spatial shape {full}")
    depth = int(np.prod(rest, dtype=np.int64))
    x = b.reshape(cv.operand(op, 0), [*block, batch, *spatial, depth], label=label + "/blocks")
    perm = [m] + [v for i in range(m) for v in (m + 1 + i, i)] + [2 * m + 1]  # [batch, s1, b1, ..., depth]
    x = b.transpose(x, permutation=perm, label=label + "/transpose")
    x = b.reshape(x, [batch, *full, *rest], label=label + "/space")
    if any(before) or any(after):
        zeros = [0] * len(rest)
        x = b.slice(x, [0, *before, *zeros], [batch, *[f - lo - hi for f, lo, hi in zip(full, before, after)], *rest],
                    label=label + "/crop")
    cv.set_output(op, x)


@handles("DEPTH_TO_SPACE", webnn="reshape + transpose + reshape (DCR order)")
def _depth_to_space(cv: Converter, op: OperatorInfo) -> None:
    bs = int(_opt(op.options(_fb.DepthToSpaceOptions), "BlockSize", 0))
    n, h, w, c = _check_rank(cv, op, 0, 4)
    if bs < 1 or c % (bs * bs):
        raise cv.malformed(op, f"block size {bs} for {c} channels")
    b, label = cv.builder, cv.label(op)
    x = b.reshape(cv.operand(op, 0), [n * h, w, bs, bs, c // (bs * bs)], label=label + "/blocks")
    x = b.transpose(x, permutation=[0, 2, 1, 3, 4], label=label + "/transpose")
    cv.set_output(op, b.reshape(x, [n, h * bs, w * bs, c // (bs * bs)], label=label))


@handles("SPACE_TO_DEPTH", webnn="reshape + transpose + reshape")
def _space_to_depth(cv: Converter, op: OperatorInfo) -> None:
    bs = int(_opt(op.options(_fb.SpaceToDepthOptions), "BlockSize", 0))
    n, h, w, c = _check_rank(cv, op, 0, 4)
    if bs < 1 or h % bs or w % bs:
        raise cv.malformed(op, f"block size {bs} for a {h}x{w} input")
    b, label = cv.builder, cv.label(op)
    x = b.reshape(cv.operand(op, 0), [n * (h // bs), bs, w // bs, bs * c], label=label + "/blocks")
    x = b.transpose(x, permutation=[0, 2, 1, 3], label=label + "/transpose")
    cv.set_output(op, b.reshape(x, [n, h // bs, w // bs, bs * bs * c], label=label))


@handles("GATHER", webnn="gather(axis=) (negative ids wrapped by SELECT_V2 go to the gather as they are); "
                          "batch_dims > 0: gather_elements with the indices expanded")
def _gather(cv: Converter, op: OperatorInfo) -> None:
    o = op.options(_fb.GatherOptions)
    if _opt(o, "BatchDims", 0):
        _gather_batched(cv, op, int(_opt(o, "Axis", 0)), int(_opt(o, "BatchDims", 0)))
        return
    rank = len(cv.tensor(op, 0).shape)
    axis = cv.axis(op, int(_opt(o, "Axis", 0)), rank)
    ids = _wrapped_indices(cv, op, int(cv.tensor(op, 0).shape[axis]))
    indices = cv.operand(op, 1) if ids is None else cv._operands[ids]
    table = _dequantized_table(cv, op, axis)
    cv.set_output(op, cv.builder.gather(cv.operand(op, 0) if table is None else table, indices, axis=axis,
                                        label=cv.label(op)))
    if table is not None:
        cv.dequantized.add(op.outputs[0])


def _gather_batched(cv: Converter, op: OperatorInfo, axis: int, batch_dims: int) -> None:
    """GATHER with ``batch_dims`` > 0 (``tf.gather(..., batch_dims=)``, Keras'
    ``ops.take_along_axis``): ``out[b, m, i, r] = params[b, m, ids[b, i], r]`` for the batch
    dimensions b, the params' dimensions m between them and ``axis``, the indices' own i and
    the params' r after ``axis``. One ``gather_elements`` along ``axis`` with the indices (i
    flattened into one dimension) expanded over m and r, reshaped to the output."""
    b, label = cv.builder, cv.label(op)
    p_shape = [int(d) for d in cv.tensor(op, 0).shape]
    i_shape = [int(d) for d in cv.tensor(op, 1).shape]
    batch_dims %= max(len(i_shape), 1)
    axis = cv.axis(op, axis, len(p_shape))
    if not batch_dims <= axis or p_shape[:batch_dims] != i_shape[:batch_dims]:
        raise cv.malformed(op, f"batch_dims={batch_dims} with axis {axis}, params {p_shape} and indices {i_shape}")
    ids = cv.operand(op, 1)
    if ids.data_type not in ("int32", "int64"):
        raise cv.unsupported(op, f"indices of type {ids.data_type}")
    lead, mid, rest = p_shape[:batch_dims], p_shape[batch_dims:axis], p_shape[axis + 1:]
    own = int(np.prod(i_shape[batch_dims:], dtype=np.int64))
    ids = b.reshape(ids, lead + [1] * len(mid) + [own] + [1] * len(rest), label=label + "/ids")
    full = lead + mid + [own] + rest
    if list(ids.shape) != full:
        ids = b.expand(ids, full, label=label + "/expand")
    y = b.gather_elements(cv.operand(op, 0), ids, axis=axis, label=label)
    cv.set_output(op, b.reshape(y, lead + mid + i_shape[batch_dims:] + rest, label=label + "/out"))


@folds("BUCKETIZE")
def _fold_bucketize(cv: Converter, op: OperatorInfo, values: list) -> list:
    bounds = _bucket_boundaries(cv, op)
    return [np.searchsorted(bounds, values[0].astype(np.float64), side="right").astype(np.int32)]


def _bucket_boundaries(cv: Converter, op: OperatorInfo) -> np.ndarray:
    o = op.options(_fb.BucketizeOptions)
    bounds = np.zeros(0, np.float32) if o is None or o.BoundariesIsNone() else \
        np.asarray(o.BoundariesAsNumpy(), np.float32).reshape(-1)
    if bounds.size > 1 and not (np.diff(bounds) >= 0).all():
        raise cv.malformed(op, f"boundaries {bounds.tolist()} are not sorted")
    return bounds


@handles("BUCKETIZE", webnn="reduce_sum(cast(logical_not(lesser(x, boundaries))))")
def _bucketize(cv: Converter, op: OperatorInfo) -> None:
    # TFLite: the index of the first boundary above the value (upper_bound), the count of
    # the boundaries b with not(x < b): NaN counts every boundary, as there.
    bounds = _bucket_boundaries(cv, op)
    b, label = cv.builder, cv.label(op)
    shape = [int(d) for d in cv.tensor(op, 0).shape]
    x = cv.operand(op, 0)
    if bounds.size == 0:
        cv.set_output(op, b.constant({"data_type": "int32", "shape": shape}, np.zeros(shape, np.int32)))
        return
    if x.data_type != "float32":
        x = b.cast(x, "float32", label=label + "/float")
    x = b.reshape(x, shape + [1], label=label + "/values")
    above = b.logical_not(b.lesser(x, b.constant({"data_type": "float32", "shape": [bounds.size]}, bounds),
                                   label=label), label=label)
    cv.set_output(op, b.reduce_sum(b.cast(above, "int32", label=label), axes=[len(shape)], label=label))


def _dequantized_table(cv: Converter, op: OperatorInfo, axis: int) -> Any | None:
    """The real values of GATHER's table as a float constant when the table is a quantized
    integer constant (TensorFlow's dynamic-range quantization of an ``Embedding``), the
    output keeps the table's quantization and only DEQUANTIZE reads it: the gathered real
    values are what DEQUANTIZE gives. Else None (the table as it is)."""
    t, out = cv.tensor(op, 0), cv.out_tensor(op)
    q, oq = t.quantization, out.quantization
    if q is None or oq is None or t.data is None or t.type_name not in ("INT8", "UINT8", "INT16") \
            or out.type_name != t.type_name or out.index in cv.model.outputs:
        return None
    if q.scale.size != 1:  # per channel: along an axis the gather keeps in place
        ids_rank = len(cv.tensor(op, 1).shape)
        if q.axis == axis or oq.axis != (q.axis if q.axis < axis else q.axis + ids_rank - 1):
            return None
    if not (np.array_equal(q.scale, oq.scale) and np.array_equal(q.zero_point, oq.zero_point)):
        return None
    readers = cv.readers(out.index)
    if not readers or any(o.name != "DEQUANTIZE" for o in readers):
        return None
    return cv.constant_like(op, 0, dequantize(t.data, q))


def _wrapped_indices(cv: Converter, op: OperatorInfo, size: int) -> int | None:
    """The tensor ``ids`` when GATHER's indices are ``SELECT_V2(LESS(ids, 0), ADD(ids, size), ids)``
    (Keras' Embedding: negative ids count from the end), which WebNN's gather does itself;
    the three operators are then left unused. Else None."""
    select = cv.producer(op.inputs[1])
    if select is None or select.name not in ("SELECT_V2", "SELECT") or len(select.inputs) != 3:
        return None
    less, add = cv.producer(select.inputs[0]), cv.producer(select.inputs[1])
    ids = select.inputs[2]
    if less is None or add is None or less.name != "LESS" or add.name != "ADD" or ids not in cv._operands:
        return None
    zero, shift = cv.static(less, 1), cv.static(add, 1)
    if less.inputs[0] != ids or add.inputs[0] != ids or zero is None or shift is None or zero.size != 1 \
            or shift.size != 1 or int(zero.reshape(-1)[0]) != 0 or int(shift.reshape(-1)[0]) != size \
            or zero.dtype.kind not in "iu" or shift.dtype.kind not in "iu":
        return None
    if _opt(add.options(_fb.AddOptions), "FusedActivationFunction", ACT_NONE) != ACT_NONE:
        return None
    if tuple(cv.model.tensors[ids].shape) != tuple(cv.model.tensors[op.inputs[1]].shape):
        return None  # (SELECT_V2 would broadcast)
    return ids


@handles("GATHER_ND", webnn="gather_nd")
def _gather_nd(cv: Converter, op: OperatorInfo) -> None:
    cv.set_output(op, cv.builder.gather_nd(cv.operand(op, 0), cv.operand(op, 1), label=cv.label(op)))


#: ATAN2 element-wise as a custom WGSL operator (WebNN has no atan2): WGSL's atan2(y, x).
_ATAN2_WGSL = """{% if inputs[0].type == "f16" %}enable f16;
{% endif %}
@group(0) @binding(0) var<storage, read> y: array<{{ inputs[0].type }}>;
@group(0) @binding(1) var<storage, read> x: array<{{ inputs[0].type }}>;
@group(0) @binding(2) var<storage, read_write> out: array<{{ inputs[0].type }}>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = gid.x + gid.y * groups.x * 64u;
  if (i >= {{ outputs[0].size }}u) { return; }
  out[i] = atan2(y[i], x[i]);
}
"""


@handles("ATAN2", webnn="one custom WGSL operator (MLGraphBuilder.wgsl) computing WGSL's atan2(y, x) per element")
def _atan2(cv: Converter, op: OperatorInfo) -> None:
    b, label = cv.builder, cv.label(op)
    y, x = cv.operand(op, 0), cv.operand(op, 1)
    if y.data_type != cv.float_type or x.data_type != cv.float_type:
        raise cv.unsupported(op, f"inputs of types {y.data_type} and {x.data_type} (float inputs only)")
    shape = [int(d) for d in y.shape]
    if list(x.shape) != shape:  # (as LiteRT's kernel, which does not broadcast)
        raise cv.malformed(op, f"operands of shapes {shape} and {list(x.shape)}")
    cv.set_output(op, b.wgsl(_ATAN2_WGSL, [y, x], {"data_type": cv.float_type, "shape": shape}, workgroup_size=64,
                             label=label))


@handles("ONE_HOT", webnn="where(equal(indices with a new axis, a constant 0..depth-1 along it), on, off)")
def _one_hot(cv: Converter, op: OperatorInfo) -> None:
    # Inputs: indices, depth (scalar), on_value, off_value; an index outside [0, depth) gives
    # off_value everywhere along the new axis (TFLite's definition).
    shape = [int(d) for d in cv.tensor(op, 0).shape]
    depth = int(cv.value(op, 1).reshape(-1)[0])
    if depth < 1:
        raise cv.malformed(op, f"depth {depth}")
    rank = len(shape) + 1
    axis = int(_opt(op.options(_fb.OneHotOptions), "Axis", -1))
    axis = cv.axis(op, axis, rank)
    b, label = cv.builder, cv.label(op)
    ids = cv.operand(op, 0)
    if ids.data_type not in ("int32", "int64"):
        raise cv.unsupported(op, f"indices of type {ids.data_type}")
    ids = b.reshape(ids, shape[:axis] + [1] + shape[axis:], label=label + "/ids")
    iota_shape = [1] * rank
    iota_shape[axis] = depth
    iota = b.constant({"data_type": ids.data_type, "shape": iota_shape},
                      np.arange(depth, dtype=np.int32 if ids.data_type == "int32" else np.int64).reshape(iota_shape))
    hit = b.equal(ids, iota, label=label + "/hit")
    out_shape = shape[:axis] + [depth] + shape[axis:]
    on, off = cv.operand(op, 2), cv.operand(op, 3)
    y = b.where(hit, on, off, label=label)
    if list(y.shape) != out_shape:
        y = b.expand(y, out_shape, label=label + "/expand")
    cv.set_output(op, y)


def _static_ids(cv: Converter, op: OperatorInfo, i: int, what: str) -> np.ndarray:
    ids = cv.static(op, i)
    if ids is None:
        raise cv.unsupported(op, f"{what} computed at run time (input {i}; the loader needs them at load time)")
    return ids.astype(np.int64)


@handles("UNSORTED_SEGMENT_SUM", webnn="matmul of a constant 0/1 segment matrix [segments, N] with the data "
                                       "as [N, rest] (segment ids known at load time)")
def _unsorted_segment_sum(cv: Converter, op: OperatorInfo) -> None:
    ids, segments, shape = _segment_ids(cv, op)
    _segment_matmul(cv, op, ids, segments, shape)


def _segment_matmul(cv: Converter, op: OperatorInfo, ids: np.ndarray, segments: int, shape: list[int]) -> None:
    rows = int(np.prod(ids.shape, dtype=np.int64))
    rest = shape[ids.ndim:]
    place = np.zeros((segments, rows), np.float32)
    flat = ids.reshape(-1)
    keep = flat >= 0  # negative ids are dropped (_segment_ids refuses ids >= segments)
    place[flat[keep], np.arange(rows)[keep]] = 1.0
    b, label = cv.builder, cv.label(op)
    x = cv.operand(op, 0)
    if x.data_type != cv.float_type:
        raise cv.unsupported(op, f"data of type {x.data_type} (float data only)")
    inner = int(np.prod(rest, dtype=np.int64))
    y = b.matmul(cv.constant_like(op, 1, place), b.reshape(x, [rows, inner], label=label + "/rows"), label=label)
    cv.set_output(op, b.reshape(y, [segments, *rest], label=label + "/out"))


@folds("UNSORTED_SEGMENT_SUM", "UNSORTED_SEGMENT_PROD", "UNSORTED_SEGMENT_MAX", "UNSORTED_SEGMENT_MIN")
def _fold_segments(cv: Converter, op: OperatorInfo, values: list) -> list:
    # TFLite's kernels: each segment starts at the reduction's identity (0, 1, the type's
    # lowest / highest value) and negative ids are skipped.
    data, ids = values[0], values[1].astype(np.int64)
    segments = int(values[2].reshape(-1)[0])
    _check_segment_ids(cv, op, ids, tuple(data.shape), segments)
    kind = op.name.rsplit("_", 1)[1]
    info = _graph_finfo(cv) if data.dtype.kind == "f" else np.iinfo(data.dtype)
    start = {"SUM": 0, "PROD": 1, "MAX": info.min, "MIN": info.max}[kind]
    out = np.full((segments, *data.shape[ids.ndim:]), start, dtype=data.dtype)
    flat, rows = ids.reshape(-1), data.reshape(-1, *data.shape[ids.ndim:])
    keep = flat >= 0
    {"SUM": np.add, "PROD": np.multiply, "MAX": np.maximum, "MIN": np.minimum}[kind].at(out, flat[keep], rows[keep])
    return [out]


def _graph_finfo(cv: Converter) -> np.finfo:
    """The limits of the graph's float type: an empty UNSORTED_SEGMENT_MAX / MIN segment is its
    lowest / highest value (a float16 graph cannot hold float32's, which LiteRT gives a float32
    model: it gives -65504 / 65504 there, on run-time data and when the reduction folds)."""
    return np.finfo(np.float16 if cv.float_type == "float16" else np.float32)


def _sorted_segment_count(cv: Converter, op: OperatorInfo, ids: np.ndarray) -> int:
    """SEGMENT_SUM's segment count (the largest id + 1), its ids checked: one axis, sorted, >= 0."""
    if ids.ndim != 1 or ids.size and (ids.min() < 0 or (np.diff(ids) < 0).any()):
        raise cv.malformed(op, f"segment ids {ids.tolist()} (expected sorted ids >= 0 along the first axis)")
    return int(ids.max()) + 1 if ids.size else 0


def _segment_ids(cv: Converter, op: OperatorInfo) -> tuple[np.ndarray, int, list[int]]:
    """(ids, segments, data shape) of a segment reduction; SEGMENT_SUM's count is the largest id + 1."""
    shape = [int(d) for d in cv.tensor(op, 0).shape]
    ids = _static_ids(cv, op, 1, "segment ids")
    if op.name == "SEGMENT_SUM":
        segments = _sorted_segment_count(cv, op, ids)
    else:
        segments = int(cv.value(op, 2).reshape(-1)[0])
    _check_segment_ids(cv, op, ids, tuple(shape), segments)
    return ids, segments, shape


def _check_segment_ids(cv: Converter, op: OperatorInfo, ids: np.ndarray, shape: tuple, segments: int) -> None:
    """Segment ids must span the data's leading axes and stay below the segment count (LiteRT's
    prepare refuses a larger id: ``max_index < num_segments``); negative ids are dropped."""
    if tuple(ids.shape) != tuple(shape[:ids.ndim]) or segments < 1:
        raise cv.malformed(op, f"segment ids of shape {list(ids.shape)} for data {list(shape)}, {segments} segments")
    if ids.size and int(ids.max()) >= segments:
        raise cv.malformed(op, f"segment id {int(ids.max())} for {segments} segments (expected ids < "
                               f"num_segments; negative ids are dropped)")


@handles("UNSORTED_SEGMENT_PROD", "UNSORTED_SEGMENT_MAX", "UNSORTED_SEGMENT_MIN",
         webnn="gather of each segment's rows (segment ids known at load time) as [segments, most rows of one, "
               "rest], where(a constant mask, the rows, the reduction's identity) for the slots past a segment's "
               "rows, reduce_product / reduce_max / reduce_min over them (an empty segment: the identity, 1 or "
               "the graph's float type's lowest / highest, as TFLite; float16: -65504 / 65504)")
def _unsorted_segment_other(cv: Converter, op: OperatorInfo) -> None:
    ids, segments, shape = _segment_ids(cv, op)
    x = cv.operand(op, 0)
    if x.data_type != cv.float_type:
        raise cv.unsupported(op, f"data of type {x.data_type} (float data only)")
    kind = op.name.rsplit("_", 1)[1]
    flat = ids.reshape(-1)
    rest = shape[ids.ndim:]
    members = [np.flatnonzero(flat == k) for k in range(segments)]  # negative ids are skipped
    width = max(1, max(len(r) for r in members))
    index = np.zeros((segments, width), np.int32)
    keep = np.zeros((segments, width) + (1,) * len(rest), np.uint8)
    for k, rows in enumerate(members):
        index[k, :len(rows)] = rows
        keep[k, :len(rows)] = 1
    info = _graph_finfo(cv)
    identity = {"PROD": 1.0, "MAX": float(info.min), "MIN": float(info.max)}[kind]
    b, label = cv.builder, cv.label(op)
    rows = b.reshape(x, [len(flat), *rest], label=label + "/rows")
    g = b.gather(rows, b.constant({"data_type": "int32", "shape": list(index.shape)}, index), axis=0,
                 label=label + "/gather")
    if not keep.all():
        g = b.where(b.constant({"data_type": "uint8", "shape": list(keep.shape)}, keep), g,
                    cv.scalar_constant(identity, cv.float_type), label=label + "/pad")
    reduce = {"PROD": b.reduce_product, "MAX": b.reduce_max, "MIN": b.reduce_min}[kind]
    cv.set_output(op, reduce(g, axes=[1], keep_dimensions=False, label=label))


@handles("SEGMENT_SUM", webnn="as UNSORTED_SEGMENT_SUM with the largest id + 1 segments (sorted segment ids known "
                              "at load time)")
def _segment_sum(cv: Converter, op: OperatorInfo) -> None:
    ids, segments, shape = _segment_ids(cv, op)
    cv.out_shape(op, 0, lambda: [segments, *shape[1:]])
    _segment_matmul(cv, op, ids, segments, shape)


@folds("SEGMENT_SUM")
def _fold_segment_sum(cv: Converter, op: OperatorInfo, values: list) -> list:
    data, ids = values[0], values[1].astype(np.int64)
    out = np.zeros((_sorted_segment_count(cv, op, ids), *data.shape[1:]), data.dtype)
    np.add.at(out, ids, data)
    return [out]


@handles("DYNAMIC_UPDATE_SLICE", webnn="where(a constant mask of the updated block, pad(update), operand) (start "
                                       "indices known at load time, clamped so that the update fits, as TFLite)")
def _dynamic_update_slice(cv: Converter, op: OperatorInfo) -> None:
    shape = [int(d) for d in cv.tensor(op, 0).shape]
    size = [int(d) for d in cv.tensor(op, 1).shape]
    begin = _update_begin(cv, op, shape, size, _static_ids(cv, op, 2, "start indices"))
    b, label = cv.builder, cv.label(op)
    x, upd = cv.operand(op, 0), cv.operand(op, 1)
    if size == shape:
        cv.set_output(op, b.identity(upd, label=label))
        return
    mask = np.zeros(shape, np.uint8)
    mask[tuple(slice(a, a + u) for a, u in zip(begin, size))] = 1
    padded = b.pad(upd, begin, [d - a - u for d, a, u in zip(shape, begin, size)], label=label + "/pad")
    cv.set_output(op, b.where(b.constant({"data_type": "uint8", "shape": shape}, mask), padded, x, label=label))


def _update_begin(cv: Converter, op: OperatorInfo, shape: list[int], size: list[int], start: np.ndarray) -> list[int]:
    """Where DYNAMIC_UPDATE_SLICE's update of shape ``size`` goes in its operand of ``shape``: the
    start indices clamped so that the update fits (TFLite's rule)."""
    start = start.reshape(-1)
    if len(size) != len(shape) or len(start) != len(shape) or any(u > d for u, d in zip(size, shape)):
        raise cv.malformed(op, f"an update of shape {size} at {start.tolist()} in an operand of shape {shape}")
    return [int(min(max(s, 0), d - u)) for s, d, u in zip(start, shape, size)]


@folds("DYNAMIC_UPDATE_SLICE")
def _fold_dynamic_update_slice(cv: Converter, op: OperatorInfo, values: list) -> list:
    x, upd = values[0], values[1]
    begin = _update_begin(cv, op, list(x.shape), list(upd.shape), values[2].astype(np.int64))
    out = np.array(x, copy=True)
    out[tuple(slice(a, a + u) for a, u in zip(begin, upd.shape))] = upd
    return [out]


@handles("SCATTER_ND", webnn="scatter_nd into zeros (distinct indices known at load time); a matmul with a 0/1 "
                             "matrix where indices repeat (TFLite adds their updates)")
def _scatter_nd(cv: Converter, op: OperatorInfo) -> None:
    # Inputs: indices [..., m], updates [..., *shape[m:]], shape.
    ids = _static_ids(cv, op, 0, "indices")
    shape = [int(d) for d in cv.value(op, 2).reshape(-1)]
    m = int(ids.shape[-1]) if ids.ndim else 0
    if ids.ndim < 1 or m > len(shape) or ((ids < 0) | (ids >= np.asarray(shape[:m]))).any():
        raise cv.malformed(op, f"indices {ids.tolist()} for shape {shape}")
    b, label = cv.builder, cv.label(op)
    upd = cv.operand(op, 1)
    tuples = ids.reshape(-1, m)
    slots = int(np.prod(shape[:m], dtype=np.int64))
    flat = np.ravel_multi_index(tuple(tuples.T), shape[:m]) if m else np.zeros(len(tuples), np.int64)
    inner = int(np.prod(shape[m:], dtype=np.int64))
    if len(np.unique(flat)) == len(flat):
        zeros = b.constant({"data_type": upd.data_type, "shape": shape},
                           np.zeros(shape, dtype=np.float16 if upd.data_type == "float16" else
                                    np.float32 if upd.data_type == "float32" else np.int32))
        if upd.data_type not in ("float32", "float16", "int32"):
            raise cv.unsupported(op, f"updates of type {upd.data_type}")
        index_op = b.constant({"data_type": "int32", "shape": list(ids.shape)}, ids.astype(np.int32))
        cv.set_output(op, b.scatter_nd(zeros, index_op, upd, label=label))
        return
    if upd.data_type != cv.float_type:
        raise cv.unsupported(op, f"repeated indices with updates of type {upd.data_type}")
    place = np.zeros((slots, len(flat)), np.float32)
    np.add.at(place, (flat, np.arange(len(flat))), 1.0)
    y = b.matmul(cv.constant_like(op, 0, place), b.reshape(upd, [len(flat), inner], label=label + "/rows"),
                 label=label)
    cv.set_output(op, b.reshape(y, shape, label=label + "/out"))


@handles("REVERSE_SEQUENCE", webnn="gather_elements along the sequence axis with indices len - 1 - t for t < len "
                                   "(constant when the lengths are known at load time, else from lesser / sub / where)")
def _reverse_sequence(cv: Converter, op: OperatorInfo) -> None:
    o = op.options(_fb.ReverseSequenceOptions)
    shape = [int(d) for d in cv.tensor(op, 0).shape]
    rank = len(shape)
    seq_axis = cv.axis(op, int(_opt(o, "SeqDim", 0)), rank)
    batch_axis = cv.axis(op, int(_opt(o, "BatchDim", 0)), rank)
    if seq_axis == batch_axis:
        raise cv.malformed(op, f"seq_dim and batch_dim are both {seq_axis}")
    b, label = cv.builder, cv.label(op)
    t_shape = [1] * rank
    t_shape[seq_axis] = shape[seq_axis]
    b_shape = [1] * rank
    b_shape[batch_axis] = shape[batch_axis]
    t = np.arange(shape[seq_axis], dtype=np.int32).reshape(t_shape)
    lengths = cv.static(op, 1)
    if lengths is not None:
        n = np.minimum(lengths.astype(np.int64), shape[seq_axis]).reshape(b_shape)
        index = np.broadcast_to(np.where(t < n, n - 1 - t, t), shape).astype(np.int32)
        ids = b.constant({"data_type": "int32", "shape": shape}, np.ascontiguousarray(index))
    else:
        n = cv.operand(op, 1)
        if n.data_type != "int32":
            n = b.cast(n, "int32", label=label + "/lengths")
        n = b.reshape(n, b_shape, label=label + "/per_batch")
        tc = b.constant({"data_type": "int32", "shape": t_shape}, t)
        flipped = b.sub(b.sub(n, b.constant({"data_type": "int32", "shape": []}, np.array(1, np.int32)),
                              label=label + "/last"), tc, label=label + "/flipped")
        ids = b.expand(b.where(b.lesser(tc, n, label=label + "/inside"), flipped, tc, label=label + "/index"), shape,
                       label=label + "/indices")
    cv.set_output(op, b.gather_elements(cv.operand(op, 0), ids, axis=seq_axis, label=label))


@handles("EMBEDDING_LOOKUP", webnn="gather(value, ids, axis=0)")
def _embedding_lookup(cv: Converter, op: OperatorInfo) -> None:
    cv.set_output(op, cv.builder.gather(cv.operand(op, 1), cv.operand(op, 0), axis=0, label=cv.label(op)))


def _interpolation_matrix(in_size: int, out_size: int, align_corners: bool, half_pixel: bool) -> np.ndarray:
    """[out, in] weights of TFLite's bilinear resize along one axis (reference kernel's formulas)."""
    scale = np.float32((in_size - 1) / (out_size - 1)) if align_corners and out_size > 1 else \
        np.float32(in_size / out_size)
    m = np.zeros((out_size, in_size), np.float64)
    for i in range(out_size):
        v = (np.float32(i) + np.float32(0.5)) * scale - np.float32(0.5) if half_pixel else np.float32(i) * scale
        lower = max(int(np.floor(v)), 0)
        upper = min(int(np.ceil(v)), in_size - 1)
        frac = float(v) - lower
        m[i, lower] += 1.0 - frac
        m[i, upper] += frac
    return m


def _resize_by_matrices(cv: Converter, op: OperatorInfo, mh: np.ndarray, mw: np.ndarray) -> Any:
    n, h, w, c = (int(v) for v in cv.tensor(op, 0).shape)
    oh, ow = mh.shape[0], mw.shape[0]
    b, label = cv.builder, cv.label(op)
    const = lambda m: b.constant({"data_type": cv.float_type, "shape": list(m.shape)}, m.astype(cv._np_float))  # noqa: E731
    x = b.reshape(cv.operand(op, 0), [n, h, w * c], label=label + "/rows")
    x = b.matmul(const(mh), x, label=label + "/height")  # [n, oh, w * c]
    x = b.reshape(x, [n * oh, w, c], label=label + "/cols")
    x = b.matmul(const(mw), x, label=label + "/width")  # [n * oh, ow, c]
    return b.reshape(x, [n, oh, ow, c], label=label)


def _nearest_indices(in_size: int, out_size: int, align_corners: bool, half_pixel: bool) -> np.ndarray:
    scale = np.float32((in_size - 1) / (out_size - 1)) if align_corners and out_size > 1 else \
        np.float32(in_size / out_size)
    offset = np.float32(0.5 if half_pixel else 0.0)
    out = []
    for i in range(out_size):
        v = (np.float32(i) + offset) * scale
        k = int(np.sign(v) * np.floor(np.abs(v) + 0.5)) if align_corners else int(np.floor(v))
        k = min(k, in_size - 1)
        out.append(max(k, 0) if half_pixel else k)
    return np.asarray(out, np.int32)


@handles("RESIZE_NEAREST_NEIGHBOR", webnn="gather along height and width (indices by TFLite's rule, all options)")
def _resize_nearest(cv: Converter, op: OperatorInfo) -> None:
    o = op.options(_fb.ResizeNearestNeighborOptions)
    align, half = bool(_opt(o, "AlignCorners", False)), bool(_opt(o, "HalfPixelCenters", False))
    _, h, w, _ = _check_rank(cv, op, 0, 4)
    oh, ow = (int(v) for v in cv.value(op, 1).reshape(-1))
    b, label = cv.builder, cv.label(op)
    const = lambda v: b.constant({"data_type": "int32", "shape": [len(v)]}, v)  # noqa: E731
    x = b.gather(cv.operand(op, 0), const(_nearest_indices(h, oh, align, half)), axis=1, label=label + "/rows")
    cv.set_output(op, b.gather(x, const(_nearest_indices(w, ow, align, half)), axis=2, label=label))


def _symmetric_pad(cv: Converter, op: OperatorInfo, begin: list[int], end: list[int]) -> Any:
    b, label = cv.builder, cv.label(op)
    x = cv.operand(op, 0)
    for axis, (lo, hi) in enumerate(zip(begin, end)):
        if not lo and not hi:
            continue
        shape = [int(v) for v in x.shape]
        size = shape[axis]
        if lo > size or hi > size:
            raise cv.malformed(op, f"SYMMETRIC padding {lo}, {hi} larger than dimension {axis} ({size})")
        parts = []

        def edge(start: int, count: int) -> Any:
            starts, sizes = [0] * len(shape), list(shape)
            starts[axis], sizes[axis] = start, count
            return b.reverse(b.slice(x, starts, sizes, label=f"{label}/{axis}/{start}"), axes=[axis],
                             label=f"{label}/{axis}/{start}/reverse")

        if lo:
            parts.append(edge(0, lo))
        parts.append(x)
        if hi:
            parts.append(edge(size - hi, hi))
        x = b.concat(parts, axis, label=f"{label}/{axis}")
    return x


# ----------------------------------------------------------------------------- control flow


@handles("WHILE", webnn="lstm / gru when the loop is a recurrent layer; else unrolled at load time "
                        "(static trip count)")
def _while(cv: Converter, op: OperatorInfo) -> None:
    from .convert import MAX_UNROLL

    o = op.options(_fb.WhileOptions)
    cond, body = int(_opt(o, "CondSubgraphIndex", 0)), int(_opt(o, "BodySubgraphIndex", 0))
    from .loops import map_recurrent_loop

    if map_recurrent_loop(cv, op, cond, body):  # a recurrent layer's loop: one lstm / gru
        return
    values = [cv.entry(op, i) for i in range(len(op.inputs))]
    cond_name = cv.model.subgraphs[cond].name if 0 < cond < len(cv.model.subgraphs) else ""
    for iteration in range(MAX_UNROLL + 1):
        (keep_going,) = cv.call_subgraph(op, cond, values, f"{cv.label(op)}/cond{iteration}/")
        if not isinstance(keep_going, np.ndarray):
            raise cv.unsupported(
                op, f"a loop whose trip count is not static: its condition (subgraph {cond} {cond_name!r}) "
                    f"depends on run-time values at iteration {iteration}")
        if not bool(np.asarray(keep_going).reshape(-1)[0]):
            break
        if iteration == MAX_UNROLL:
            raise cv.unsupported(op, f"a loop of more than {MAX_UNROLL} iterations (unrolled at load time)")
        values = cv.call_subgraph(op, body, values, f"{cv.label(op)}/{iteration}/")
    for j, value in enumerate(values):
        out = cv.out_tensor(op, j)
        got = tuple(int(d) for d in value.shape)
        if not isinstance(value, np.ndarray) and not out.is_dynamic and got != out.shape:
            raise cv.unsupported(op, f"loop variable {j} whose shape changes ({list(out.shape)} "
                                     f"declared, {list(got)} after unrolling)")
        cv.set_entry(op, value, j)


@handles("IF", webnn="the branch a load-time condition picks; for a run-time condition both branches, their "
                     "outputs picked by where(condition) (branches of the same output shapes)")
def _if(cv: Converter, op: OperatorInfo) -> None:
    o = op.options(_fb.IfOptions)
    then_index, else_index = int(_opt(o, "ThenSubgraphIndex", 0)), int(_opt(o, "ElseSubgraphIndex", 0))
    args = [cv.entry(op, i) for i in range(1, len(op.inputs))]
    cond = cv.static(op, 0)
    if cond is not None:
        if np.asarray(cond).size != 1:
            raise cv.malformed(op, f"a condition of shape {list(np.asarray(cond).shape)} (expected one value)")
        pick = then_index if bool(np.asarray(cond).reshape(-1)[0]) else else_index
        outs = cv.call_subgraph(op, pick, args, f"{cv.label(op)}/{'then' if pick == then_index else 'else'}/")
        _check_branch_outputs(cv, op, outs)
        for j, value in enumerate(outs):
            cv.set_entry(op, value, j)
        return
    # A run-time condition: both branches run (they have no side effects: the loader maps no
    # resource variables) and where() picks each output, the condition broadcast over it.
    then_outs = cv.call_subgraph(op, then_index, args, f"{cv.label(op)}/then/")
    else_outs = cv.call_subgraph(op, else_index, args, f"{cv.label(op)}/else/")
    _check_branch_outputs(cv, op, then_outs)
    _check_branch_outputs(cv, op, else_outs)
    b, label = cv.builder, cv.label(op)
    c = cv.operand(op, 0)
    if int(np.prod(c.shape, dtype=np.int64)) != 1:
        raise cv.malformed(op, f"a condition of shape {list(c.shape)} (expected one value)")
    if c.data_type != "uint8":
        c = b.not_equal(c, b.constant({"data_type": c.data_type, "shape": []},
                                      np.zeros((), _NP_TYPES[cv.tensor(op, 0).type_name])), label=label + "/cond")
    for j, (t, e) in enumerate(zip(then_outs, else_outs)):
        if list(t.shape) != list(e.shape):
            raise cv.unsupported(op, f"branches whose output {j} differs in shape ({list(t.shape)} and "
                                     f"{list(e.shape)}) under a run-time condition")
        t_op, e_op = _branch_operand(cv, op, t), _branch_operand(cv, op, e)
        cond = b.reshape(c, [1] * len(t.shape), label=f"{label}/cond{j}") if len(c.shape) != len(t.shape) else c
        cv.set_output(op, b.where(cond, t_op, e_op, label=f"{label}/{j}"), j)


def _check_branch_outputs(cv: Converter, op: OperatorInfo, outs: list) -> None:
    """An IF branch must give one value per output of the IF."""
    if len(outs) != len(op.outputs):
        raise cv.malformed(op, f"a branch with {len(outs)} outputs for an IF of {len(op.outputs)}")


def _branch_operand(cv: Converter, op: OperatorInfo, value: Any) -> Any:
    """A branch output as an operand: a value known at load time becomes a constant."""
    if not isinstance(value, np.ndarray):
        return value
    if value.dtype.kind == "f":
        return cv.constant_like(op, 1, value)
    operand = cv.int_constant(value)
    if operand is None:
        raise cv.unsupported(op, f"a branch output of type {value.dtype} known at load time")
    return operand


# ----------------------------------------------------------------------------- recurrent layers

_RNN_ACTIVATIONS = {ACT_RELU: "relu", ACT_TANH: "tanh"}


def _lstm_direction(cv: Converter, op: OperatorInfo, base: dict[str, tuple[int, ...]]) -> dict[str, Any]:
    """Stacked weights of one direction (gate order i, f, g, o = WebNN layout 'ifgo')."""
    present = lambda i: i < len(op.inputs) and op.inputs[i] >= 0  # noqa: E731
    empty: tuple[int, ...] = ()
    for what, indices in (("projection", base["proj"]), ("layer normalization", base.get("norm", empty))):
        if any(present(i) for i in indices):
            raise cv.unsupported(op, f"{what} weights")
    if not present(base["w"][0]):
        raise cv.unsupported(op, "coupled input and forget gates (CIFG: no input gate weights)")
    w = np.concatenate([cv.value(op, i) for i in base["w"]], axis=0).astype(np.float32)
    r = np.concatenate([cv.value(op, i) for i in base["r"]], axis=0).astype(np.float32)
    b = np.concatenate([cv.value(op, i) for i in base["b"]], axis=0).astype(np.float32)
    if any(present(i) for i in base["p"]):
        raise cv.unsupported(op, "peephole weights (TFLite's output gate looks at the new cell state, "
                                 "WebNN's lstm at the previous one)")
    return {"w": w, "r": r, "b": b, "hidden": w.shape[0] // 4}


def _state(cv: Converter, op: OperatorInfo, i: int) -> Any:
    """An initial state input: its value or operand; a variable tensor (no producer) is zero."""
    if i >= len(op.inputs) or op.inputs[i] < 0:
        return None
    t = cv.tensor(op, i)
    if t.index in cv._operands or cv.static(op, i) is not None:
        return cv.operand(op, i)
    return None  # LiteRT's variable tensors start at zero


def _lstm(cv: Converter, op: OperatorInfo, dirs: list[dict[str, Any]], states: list[tuple[Any, Any]],
          options: Any) -> Any:
    """The WebNN lstm over the op's input; returns the sequence output [steps, dirs, batch, hidden]."""
    if _opt(options, "CellClip", 0.0) or _opt(options, "ProjClip", 0.0):
        raise cv.unsupported(op, "cell_clip / proj_clip")
    act = _opt(options, "FusedActivationFunction", ACT_TANH)
    if act not in _RNN_ACTIVATIONS:
        raise cv.unsupported(op, f"fused activation {_ACT_NAMES.get(act, act)} of a recurrent layer")
    time_major = bool(_opt(options, "TimeMajor", False))
    b, label = cv.builder, cv.label(op)
    x = cv.operand(op, 0)
    shape = [int(d) for d in x.shape]
    if len(shape) != 3:
        raise cv.unsupported(op, f"an input of rank {len(shape)} (expected 3)")
    if not time_major:
        x = b.transpose(x, permutation=[1, 0, 2], label=label + "/time_major")
    steps, batch = (shape[0], shape[1]) if time_major else (shape[1], shape[0])
    hidden = dirs[0]["hidden"]
    const = lambda a: b.constant({"data_type": cv.float_type, "shape": list(a.shape)}, a.astype(cv._np_float))  # noqa: E731
    stack = lambda key: np.stack([d[key] for d in dirs])  # noqa: E731
    init_h = init_c = None
    if any(s is not None for pair in states for s in pair):
        def initial(k: int) -> Any:
            parts = [s[k] if s[k] is not None else const(np.zeros((batch, hidden), np.float32)) for s in states]
            parts = [b.reshape(p, [1, batch, hidden], label=f"{label}/state{k}") for p in parts]
            return parts[0] if len(parts) == 1 else b.concat(parts, 0, label=f"{label}/state{k}")
        init_h, init_c = initial(0), initial(1)
    act_name = _RNN_ACTIVATIONS[act]
    outs = b.lstm(x, const(stack("w")), const(stack("r")), steps, hidden, bias=const(stack("b")),
                  initial_hidden_state=init_h, initial_cell_state=init_c,
                  return_sequence=True, direction="both" if len(dirs) == 2 else "forward", layout="ifgo",
                  activations=["sigmoid", act_name, act_name], label=label)
    return outs[2], time_major, steps, batch, hidden


def _batch_major(cv: Converter, op: OperatorInfo, seq: Any, time_major: bool) -> Any:
    return seq if time_major else cv.builder.transpose(seq, permutation=[1, 0, 2], label=cv.label(op) + "/batch_major")


_UNI_LSTM = {"w": (1, 2, 3, 4), "r": (5, 6, 7, 8), "p": (9, 10, 11), "b": (12, 13, 14, 15), "proj": (16, 17),
             "norm": (20, 21, 22, 23)}


@handles("UNIDIRECTIONAL_SEQUENCE_LSTM", webnn="lstm(layout='ifgo', return_sequence=True) + transposes")
def _unidirectional_lstm(cv: Converter, op: OperatorInfo) -> None:
    o = op.options(_fb.UnidirectionalSequenceLSTMOptions)
    seq, time_major, steps, batch, hidden = _lstm(cv, op, [_lstm_direction(cv, op, _UNI_LSTM)],
                                                  [(_state(cv, op, 18), _state(cv, op, 19))], o)
    y = cv.builder.reshape(seq, [steps, batch, hidden], label=cv.label(op) + "/sequence")
    cv.set_output(op, _batch_major(cv, op, y, time_major))


_BI_LSTM_FW = {"w": (1, 2, 3, 4), "r": (5, 6, 7, 8), "p": (9, 10, 11), "b": (12, 13, 14, 15), "proj": (16, 17)}
_BI_LSTM_BW = {"w": (18, 19, 20, 21), "r": (22, 23, 24, 25), "p": (26, 27, 28), "b": (29, 30, 31, 32),
               "proj": (33, 34)}


@handles("BIDIRECTIONAL_SEQUENCE_LSTM", webnn="lstm(direction='both', layout='ifgo') + split/concat + transposes")
def _bidirectional_lstm(cv: Converter, op: OperatorInfo) -> None:
    o = op.options(_fb.BidirectionalSequenceLSTMOptions)
    if any(i < len(op.inputs) and op.inputs[i] >= 0 for i in range(39, 48)):
        raise cv.unsupported(op, "an auxiliary input")
    seq, time_major, steps, batch, hidden = _lstm(
        cv, op, [_lstm_direction(cv, op, _BI_LSTM_FW), _lstm_direction(cv, op, _BI_LSTM_BW)],
        [(_state(cv, op, 35), _state(cv, op, 36)), (_state(cv, op, 37), _state(cv, op, 38))], o)
    b, label = cv.builder, cv.label(op)
    if _opt(o, "MergeOutputs", False):
        y = b.reshape(b.transpose(seq, permutation=[0, 2, 1, 3], label=label + "/merge"),
                      [steps, batch, 2 * hidden], label=label + "/merged")
        cv.set_output(op, _batch_major(cv, op, y, time_major))
        return
    for j, part in enumerate(b.split(seq, 2, axis=1, label=label + "/directions")):
        y = b.reshape(part, [steps, batch, hidden], label=f"{label}/direction{j}")
        cv.set_output(op, _batch_major(cv, op, y, time_major), j)


@handles("UNIDIRECTIONAL_SEQUENCE_RNN", webnn="gru in plain-RNN form (constant weights, tanh or relu); "
                                              "else matmul for the inputs, then per step gemm + add + activation")
def _unidirectional_rnn(cv: Converter, op: OperatorInfo) -> None:
    o = op.options(_fb.SequenceRNNOptions)
    act = _opt(o, "FusedActivationFunction", ACT_TANH)
    time_major = bool(_opt(o, "TimeMajor", False))
    b, label = cv.builder, cv.label(op)
    shape = [int(d) for d in cv.tensor(op, 0).shape]
    if len(shape) != 3:
        raise cv.unsupported(op, f"an input of rank {len(shape)} (expected 3)")
    steps, batch = (shape[0], shape[1]) if time_major else (shape[1], shape[0])
    units = int(cv.tensor(op, 1).shape[0])
    x = cv.operand(op, 0)
    if not time_major:
        x = b.transpose(x, permutation=[1, 0, 2], label=label + "/time_major")
    w, r, bias = (cv.static(op, i) for i in (1, 2, 3))
    if act in _RNN_ACTIVATIONS and w is not None and r is not None and bias is not None and \
            all(a.dtype.kind == "f" for a in (w, r, bias)):
        from .loops import plain_rnn

        h0 = _state(cv, op, 4)
        if h0 is not None:
            h0 = b.reshape(h0, [1, batch, units], label=label + "/initial")
        _, seq = plain_rnn(cv, x, w.astype(np.float64), r.astype(np.float64), bias.astype(np.float64), steps, units,
                           _RNN_ACTIVATIONS[act], h0, label + "/rnn")
        y = b.reshape(seq, [steps, batch, units], label=label + "/sequence")
        cv.set_output(op, _batch_major(cv, op, y, time_major))
        return
    # Input projections of every step at once: [steps * batch, input] x W^T + bias.
    xw = b.gemm(b.reshape(x, [steps * batch, shape[2]], label=label + "/rows"), cv.operand(op, 1),
                c=cv.operand(op, 3), b_transpose=True, label=label + "/input")
    h = _state(cv, op, 4)
    outs = []
    for t in range(steps):
        step = b.slice(xw, [t * batch, 0], [batch, units], label=f"{label}/x{t}")
        if h is not None:
            step = b.add(step, b.gemm(h, cv.operand(op, 2), b_transpose=True, label=f"{label}/h{t}"),
                         label=f"{label}/sum{t}")
        if act == ACT_TANH:
            h = b.tanh(step, label=f"{label}/tanh{t}")
        else:
            h = _activation(cv, op, step, act)
        outs.append(b.reshape(h, [1, batch, units], label=f"{label}/out{t}"))
    y = outs[0] if steps == 1 else b.concat(outs, 0, label=label + "/sequence")
    cv.set_output(op, _batch_major(cv, op, y, time_major))


# ----------------------------------------------------------------------------- complex values (RFFT2D)


class Complex(NamedTuple):
    """A COMPLEX64 tensor as two float operands of the same shape (WebNN has no complex type).

    RFFT2D makes one; RESHAPE, SQUEEZE and EXPAND_DIMS pass it on; COMPLEX_ABS, REAL and
    IMAG read it. Any other reader is refused (:data:`COMPLEX_READERS`)."""

    re: Any
    im: Any

    @property
    def shape(self) -> list[int]:
        return list(self.re.shape)


#: The operators that take a :class:`Complex` input.
COMPLEX_READERS = frozenset({"RESHAPE", "SQUEEZE", "EXPAND_DIMS", "COMPLEX_ABS", "REAL", "IMAG"})


def _dft(n_in: int, n: int, bins: int) -> tuple[np.ndarray, np.ndarray]:
    """cos and -sin of the DFT of length ``n`` as [n_in, bins] matrices (float64): row t, column
    k is the term of input sample t in bin k. Samples past ``n`` (cropped) have zero rows; an
    input shorter than ``n`` is the zero-padded one (its missing rows contribute nothing)."""
    t = np.arange(n_in)[:, None]
    k = np.arange(bins)[None, :]
    angle = 2.0 * np.pi * ((t * k) % n) / n
    keep = (t < n).astype(np.float64)
    return np.cos(angle) * keep, -np.sin(angle) * keep


@handles("RFFT2D", webnn="matmul of the last axis with the real DFT's cos and -sin matrices (and of the axis "
                         "before it with the full DFT's, for fft_length[0] > 1): a complex value as two "
                         "float operands, read by COMPLEX_ABS, REAL or IMAG (through reshapes)")
def _rfft2d(cv: Converter, op: OperatorInfo) -> None:
    fft = [int(v) for v in np.asarray(cv.value(op, 1)).reshape(-1)]
    shape = [int(d) for d in cv.tensor(op, 0).shape]
    if cv.tensor(op, 0).type_name not in ("FLOAT32", "FLOAT16") or len(fft) != 2 or len(shape) < 2:
        raise cv.unsupported(op, f"an input of type {cv.tensor(op, 0).type_name} and rank {len(shape)} with "
                                 f"fft_length {fft} (expected a float input of rank >= 2 and two lengths)")
    if min(fft) < 1:
        raise cv.malformed(op, f"fft_length {fft} (expected values >= 1)")
    m, n = fft
    rows, cols = shape[-2:]
    bins = n // 2 + 1
    out_shape = shape[:-2] + [m, bins]
    cv.out_shape(op, 0, lambda: out_shape)
    b, label = cv.builder, cv.label(op)
    x = cv.operand(op, 0)
    if rows > m:
        x = b.slice(x, [0] * len(shape), shape[:-2] + [m, cols], label=label)
        rows = m
    c, s = _dft(cols, n, bins)
    re = b.matmul(x, cv.constant_like(op, 1, c), label=label)
    im = b.matmul(x, cv.constant_like(op, 1, s), label=label)
    if m > 1:  # the full DFT along the axis before: (Cm + i Sm) (re + i im), Sm = -sin
        cm, sm = _dft(rows, m, m)
        cm_t, sm_t = cv.constant_like(op, 1, cm.T), cv.constant_like(op, 1, sm.T)
        re, im = (b.sub(b.matmul(cm_t, re, label=label), b.matmul(sm_t, im, label=label), label=label),
                  b.add(b.matmul(cm_t, im, label=label), b.matmul(sm_t, re, label=label), label=label))
    cv.set_output(op, Complex(re, im))


@handles("COMPLEX_ABS", "REAL", "IMAG", webnn="sqrt(re * re + im * im), or the part, of RFFT2D's two operands")
def _complex_part(cv: Converter, op: OperatorInfo) -> None:
    z = cv.operand(op, 0)
    if not isinstance(z, Complex):
        raise cv.unsupported(op, f"an input of type {cv.tensor(op, 0).type_name} that is not an RFFT2D's result")
    b, label = cv.builder, cv.label(op)
    if op.name == "REAL":
        y = b.identity(z.re, label=label)
    elif op.name == "IMAG":
        y = b.identity(z.im, label=label)
    else:
        y = b.sqrt(b.add(b.mul(z.re, z.re, label=label), b.mul(z.im, z.im, label=label), label=label), label=label)
    cv.set_output(op, y)


@handles("MATRIX_DIAG", webnn="where(a constant identity mask [N, N], the input as [..., 1, N], 0): exact for "
                              "every value (an infinity or NaN stays on the diagonal) and any type")
def _matrix_diag(cv: Converter, op: OperatorInfo) -> None:
    shape = [int(d) for d in cv.tensor(op, 0).shape]
    if not shape:
        raise cv.malformed(op, "a scalar input (expected rank >= 1)")
    n = shape[-1]
    b, label = cv.builder, cv.label(op)
    x = cv.operand(op, 0)
    row = b.reshape(x, shape[:-1] + [1, n], label=label + "/row")
    mask = b.constant({"data_type": "uint8", "shape": [n, n]}, np.eye(n, dtype=np.uint8))
    zero = b.constant({"data_type": x.data_type, "shape": []}, np.zeros((), _dtypes.info(x.data_type).numpy))
    cv.set_output(op, b.where(mask, row, zero, label=label))


@handles("MATRIX_SET_DIAG", webnn="where(a constant identity mask, the diagonal as [..., K, 1] (rows) or [..., 1, K] "
                                  "(columns, more rows than columns), the input)")
def _matrix_set_diag(cv: Converter, op: OperatorInfo) -> None:
    shape = [int(d) for d in cv.tensor(op, 0).shape]
    diag = [int(d) for d in cv.tensor(op, 1).shape]
    if len(shape) < 2 or diag != shape[:-2] + [min(shape[-2:])]:
        raise cv.malformed(op, f"a diagonal of shape {diag} for an input of shape {shape}")
    rows, cols = shape[-2:]
    b, label = cv.builder, cv.label(op)
    d = cv.operand(op, 1)
    k = diag[-1]
    d = b.reshape(d, shape[:-2] + ([k, 1] if rows <= cols else [1, k]), label=label + "/diagonal")
    mask = np.eye(rows, cols, dtype=np.uint8)
    cv.set_output(op, b.where(b.constant({"data_type": "uint8", "shape": [rows, cols]}, mask), d,
                              cv.operand(op, 0), label=label))


from . import flex  # noqa: E402,F401 - the Select TF ("Flex") operators' handlers register themselves
