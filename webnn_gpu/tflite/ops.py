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
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import DataError, NotSupportedError

if TYPE_CHECKING:  # pragma: no cover
    from .convert import Converter
    from .reader import OperatorInfo

try:
    import tflite as _fb
except ModuleNotFoundError:  # pragma: no cover - reader.py reports the missing package
    _fb = None

__all__ = [
    "HANDLERS",
    "handles",
    "same_padding",
    "conv_padding",
    "transpose_conv_bias_padding",
    "decode_transpose_conv_bias_options",
    "TransposeConvBiasParams",
]

Handler = Callable[["Converter", "OperatorInfo"], None]

#: Op name (builtin op code name, or the custom code of a CUSTOM op) -> handler.
HANDLERS: dict[str, Handler] = {}

#: Op name -> the WebNN builder method(s) it becomes (for the docs and error hints).
MAPPED_TO: dict[str, str] = {}

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
    output_padding = []
    for axis, (size_in, k, s) in enumerate(zip(_hw(x_shape), _hw(w_shape), strides)):
        natural = (size_in - 1) * s + k - pad[2 * axis] - pad[2 * axis + 1]
        extra = out_shape[1 + axis] - natural
        if not 0 <= extra < s:
            raise cv.unsupported(op, f"output_shape {out_shape} that WebNN's output_padding cannot reach "
                                     f"(axis {axis + 1}: natural size {natural})")
        output_padding.append(extra)
    _conv_transpose(cv, op, 2, 1, 3, pad, strides, output_padding, _opt(o, "FusedActivationFunction", ACT_NONE))


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


for _name, _method in (("MAXIMUM", "max"), ("MINIMUM", "min"), ("POW", "pow")):
    handles(_name, webnn=_method)(_binary_plain(_method))


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


@handles("RESIZE_BILINEAR", webnn="resample2d(mode='linear', axes=[1, 2]) (half_pixel_centers=True only)")
def _resize_bilinear(cv: Converter, op: OperatorInfo) -> None:
    o = op.options(_fb.ResizeBilinearOptions)
    align_corners = bool(_opt(o, "AlignCorners", False))
    half_pixel = bool(_opt(o, "HalfPixelCenters", False))
    if align_corners or not half_pixel:
        raise cv.unsupported(
            op, f"align_corners={align_corners}, half_pixel_centers={half_pixel} (WebNN's linear "
                "resample2d is half-pixel-centered: only align_corners=False, half_pixel_centers=True maps)")
    _check_rank(cv, op, 0, 4)
    sizes = [int(v) for v in cv.value(op, 1).reshape(-1)]
    if len(sizes) != 2 or min(sizes) < 1:
        raise cv.malformed(op, f"size {sizes} (expected two positive integers)")
    y = cv.builder.resample2d(cv.operand(op, 0), mode="linear", sizes=sizes, axes=[1, 2], label=cv.label(op))
    cv.set_output(op, y)


@handles("DEQUANTIZE", webnn="(folded at load time into a constant)")
def _dequantize(cv: Converter, op: OperatorInfo) -> None:
    t = cv.tensor(op, 0)
    if t.data is None:
        raise cv.unsupported(op, "a run-time (non-constant) input; only constant weights can be dequantized")
    if t.type_name == "FLOAT16":
        value = t.data  # kept float16: exact in float16 graphs, widened exactly for float32 ones
    elif t.type_name in ("INT8", "UINT8", "INT16", "INT32") and t.quantization is not None:
        q = t.quantization
        data = t.data.astype(np.float64)
        if q.scale.size == 1:
            value = (data - q.zero_point.reshape(())[()] if q.zero_point.size else data) * q.scale[0]
        else:
            shape = [1] * data.ndim
            shape[q.axis] = q.scale.size
            zp = q.zero_point if q.zero_point.size == q.scale.size else np.zeros_like(q.scale)
            value = (data - zp.reshape(shape)) * q.scale.reshape(shape)
        value = value.astype(np.float32)
    else:
        raise cv.unsupported(op, f"input of type {t.type_name} without quantization parameters")
    cv.set_constant(op, value)


@handles("CONCATENATION", webnn="concat + fused activation")
def _concatenation(cv: Converter, op: OperatorInfo) -> None:
    o = op.options(_fb.ConcatenationOptions)
    rank = len(cv.tensor(op, 0).shape)
    axis = cv.axis(op, int(_opt(o, "Axis", 0)), rank)
    inputs = [cv.operand(op, i) for i in range(len(op.inputs))]
    y = cv.builder.concat(inputs, axis, label=cv.label(op))
    cv.set_output(op, _activation(cv, op, y, _opt(o, "FusedActivationFunction", ACT_NONE)))


@handles("RESHAPE", "SQUEEZE", "EXPAND_DIMS", webnn="reshape (to the output tensor's static shape)")
def _reshape(cv: Converter, op: OperatorInfo) -> None:
    # Shapes are static here: the output tensor's declared shape is the new shape.
    out = cv.out_tensor(op)
    in_count = int(np.prod(cv.tensor(op, 0).shape, dtype=np.int64))
    if int(np.prod(out.shape, dtype=np.int64)) != in_count:
        raise cv.malformed(op, f"output shape {list(out.shape)} holds a different element count than "
                               f"the input {list(cv.tensor(op, 0).shape)}")
    cv.set_output(op, cv.builder.reshape(cv.operand(op, 0), list(out.shape), label=cv.label(op)))


@handles("SOFTMAX", webnn="softmax(axis=last) (times beta first when beta != 1)")
def _softmax(cv: Converter, op: OperatorInfo) -> None:
    beta = float(_opt(op.options(_fb.SoftmaxOptions), "Beta", 1.0))
    x = cv.operand(op, 0)
    rank = len(cv.tensor(op, 0).shape)
    if beta != 1.0:
        x = cv.builder.mul(x, cv.scalar_constant(beta, cv.float_type), label=cv.label(op) + "/beta")
    cv.set_output(op, cv.builder.softmax(x, rank - 1, label=cv.label(op)))


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


@handles("MIRROR_PAD", webnn="pad(mode='reflection') (REFLECT only)")
def _mirror_pad(cv: Converter, op: OperatorInfo) -> None:
    mode = _opt(op.options(_fb.MirrorPadOptions), "Mode", 0)
    if mode != 0:
        raise cv.unsupported(op, "mode SYMMETRIC (WebNN pad has 'reflection', which is REFLECT)")
    begin, end = _paddings(cv, op, len(cv.tensor(op, 0).shape))
    cv.set_output(op, cv.builder.pad(cv.operand(op, 0), begin, end, mode="reflection", label=cv.label(op)))


@handles("TRANSPOSE", webnn="transpose(permutation=)")
def _transpose(cv: Converter, op: OperatorInfo) -> None:
    rank = len(cv.tensor(op, 0).shape)
    perm = [int(v) for v in cv.value(op, 1).reshape(-1)]
    if sorted(perm) != list(range(rank)):
        raise cv.malformed(op, f"permutation {perm} of a rank-{rank} tensor")
    cv.set_output(op, cv.builder.transpose(cv.operand(op, 0), permutation=perm, label=cv.label(op)))


@handles("FULLY_CONNECTED", webnn="reshape + gemm(b_transpose=True, c=bias) + reshape + fused activation")
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
    if list(x_shape) != [rows, depth]:
        x = cv.builder.reshape(x, [rows, depth], label=label + "/flatten")
    y = cv.builder.gemm(x, cv.operand(op, 1), c=cv.optional_operand(op, 2), b_transpose=True, label=label)
    out_shape = list(cv.out_tensor(op).shape)
    if out_shape != [rows, units]:
        y = cv.builder.reshape(y, out_shape, label=label + "/unflatten")
    cv.set_output(op, _activation(cv, op, y, _opt(o, "FusedActivationFunction", ACT_NONE)))


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
