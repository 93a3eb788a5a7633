"""Select TensorFlow ("Flex") operators: what TensorFlow's converter emits with
``target_spec.supported_ops = [TFLITE_BUILTINS, SELECT_TF_OPS]`` for a layer that has no
TFLite builtin (``MaxPooling3D``, ``AveragePooling3D``, ``Resizing(interpolation="bicubic")``,
``CategoryEncoding``, ...).

Such an operator is a custom op ``Flex<TensorFlow op>``; its custom options are a FlexBuffer
vector ``[op name, serialized tensorflow.NodeDef]``, and the NodeDef's ``attr`` map holds the
op's attributes. :func:`node_def` decodes them (a small protobuf wire-format reader: no
TensorFlow, no protobuf package); the handlers below map each op with all its attributes,
and refuse (naming it) an attribute value they do not implement.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from .ops import _resize_by_matrices, handles, same_padding, transpose_output_padding

if TYPE_CHECKING:
    from .convert import Converter
    from .reader import OperatorInfo

__all__ = ["FlexNode", "node_def", "bicubic_matrix"]


class FlexNode(NamedTuple):
    """A Flex operator's TensorFlow op name and its attributes (name -> int, float, bool, str
    or a list of them; a data type is its ``tensorflow.DataType`` number)."""

    op: str
    attrs: dict[str, Any]


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated varint")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
        if shift >= 64:  # (a varint is at most 10 bytes)
            raise ValueError("a varint longer than 10 bytes")


def _fields(buf: bytes) -> Iterator[tuple[int, int, Any]]:
    """(field number, wire type, value) of a protobuf message: an int (varint) or bytes (fixed
    64 / 32 bits, length-delimited)."""
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 1:
            value, pos = buf[pos:pos + 8], pos + 8
        elif wire == 2:
            size, pos = _varint(buf, pos)
            value, pos = buf[pos:pos + size], pos + size
        elif wire == 5:
            value, pos = buf[pos:pos + 4], pos + 4
        else:
            raise ValueError(f"protobuf wire type {wire}")
        if pos > len(buf):
            raise ValueError("truncated field")
        yield number, wire, value


#: the wire types a field may have: varint 0, length-delimited 2 (packed), fixed32 5
_VARINT, _BYTES, _FIXED32 = 0, 2, 5


def _expect(number: int, wire: int, *allowed: int) -> None:
    if wire not in allowed:
        raise ValueError(f"field {number} of wire type {wire} (expected {' or '.join(map(str, allowed))})")


def _signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def _packed_ints(wire: int, value: Any) -> list[int]:
    if wire == 0:
        return [_signed(value)]
    out, pos = [], 0
    while pos < len(value):
        v, pos = _varint(value, pos)
        out.append(_signed(v))
    return out


def _list_value(buf: bytes) -> list:
    # tensorflow.AttrValue.ListValue: s 2, i 3 (packed), f 4 (packed), b 5 (packed), type 6 (packed).
    out: list = []
    for number, wire, value in _fields(buf):
        if number == 2:
            _expect(number, wire, _BYTES)
            out.append(bytes(value).decode("utf-8", "replace"))
        elif number in (3, 5, 6):
            _expect(number, wire, _VARINT, _BYTES)
            ints = _packed_ints(wire, value)
            out.extend([bool(v) for v in ints] if number == 5 else ints)
        elif number == 4:  # packed (wire 2) or one fixed32 (wire 5)
            _expect(number, wire, _FIXED32, _BYTES)
            if len(value) % 4:
                raise ValueError(f"field 4 of {len(value)} bytes (float32 values: a multiple of 4)")
            out.extend(struct.unpack(f"<{len(value) // 4}f", value))
    return out


def _attr_value(buf: bytes) -> Any:
    # tensorflow.AttrValue: list 1, s 2, i 3, f 4, b 5, type 6 (shape 7, tensor 8, func 10: kept raw).
    for number, wire, value in _fields(buf):
        if number in (1, 2):
            _expect(number, wire, _BYTES)
            return _list_value(value) if number == 1 else bytes(value).decode("utf-8", "replace")
        if number in (3, 5, 6):
            _expect(number, wire, _VARINT)
            return bool(value) if number == 5 else _signed(value)
        if number == 4:
            _expect(number, wire, _FIXED32)
            return struct.unpack("<f", value)[0]
        return bytes(value) if isinstance(value, (bytes, memoryview)) else value
    return None


def node_def(custom_options: bytes) -> FlexNode:
    """The TensorFlow op name and attributes of a Flex operator's custom options.

    Arguments:
        custom_options (bytes): the operator's custom options: a FlexBuffer vector of the op
            name and a serialized ``tensorflow.NodeDef``.

    Returns:
        FlexNode: ``(op, attrs)``.

    Raises:
        ValueError: the options are not such a vector, or the NodeDef is malformed.
    """
    from flatbuffers import flexbuffers

    try:
        root = flexbuffers.GetRoot(bytearray(custom_options)).AsVector
        op, raw = root[0].AsString, bytes(root[1].AsStringBytes)
    except Exception as exc:  # noqa: BLE001 - any decoding failure is a malformed model
        raise ValueError(f"custom options that are not a Flex op's [name, NodeDef] ({exc})") from exc
    attrs: dict[str, Any] = {}
    for number, wire, value in _fields(raw):
        if number == 5:  # NodeDef.attr: map<string, AttrValue> entries (key 1, value 2)
            _expect(number, wire, _BYTES)
            key, item = "", b""
            for n, w, v in _fields(value):
                if n in (1, 2):
                    _expect(n, w, _BYTES)
                if n == 1:
                    key = bytes(v).decode("utf-8", "replace")
                elif n == 2:
                    item = bytes(v)
            attrs[key] = _attr_value(item)
    return FlexNode(op, attrs)


def _node(cv: Converter, op: OperatorInfo) -> FlexNode:
    try:
        return node_def(op.custom_options or b"")
    except ValueError as exc:
        raise cv.malformed(op, str(exc)) from None


def _ints(cv: Converter, op: OperatorInfo, attrs: dict, name: str, default: list) -> list[int]:
    """The list attribute ``name`` (``default`` when absent) as ints; anything else is malformed."""
    v = attrs.get(name, default)
    if not isinstance(v, list) or not all(isinstance(a, int) for a in v):
        raise cv.malformed(op, f"attribute {name!r} is {v!r} (expected a list of ints)")
    return v


def _window(cv: Converter, op: OperatorInfo, attrs: dict, name: str) -> list[int]:
    v = _ints(cv, op, attrs, name, [])
    if len(v) != 5 or v[0] != 1 or v[4] != 1:
        raise cv.unsupported(op, f"{name} {v} (expected [1, d, h, w, 1] over NDHWC)")
    cv.require_positive(op, **{name: v})
    return v[1:4]


def _pool3d(method: str):
    def handler(cv: Converter, op: OperatorInfo) -> None:
        attrs = _node(cv, op).attrs
        if attrs.get("data_format", "NDHWC") != "NDHWC":
            raise cv.unsupported(op, f"data_format {attrs['data_format']!r}")
        padding = attrs.get("padding", "VALID")
        if padding not in ("SAME", "VALID"):
            raise cv.unsupported(op, f"padding {padding!r}")
        window, strides = _window(cv, op, attrs, "ksize"), _window(cv, op, attrs, "strides")
        shape = [int(d) for d in cv.tensor(op, 0).shape]
        if len(shape) != 5:
            raise cv.malformed(op, f"input of rank {len(shape)} (expected 5: NDHWC)")
        n, d, h, w, c = shape
        pads = [same_padding(s, k, st) if padding == "SAME" else (0, 0)
                for s, k, st in zip((d, h, w), window, strides)]
        b, label = cv.builder, cv.label(op)
        pool = getattr(b, method)
        # Separable: the window over (h, w) per frame, then over d; an average of averages is the
        # average since the (h, w) cell count does not depend on d (padded cells excluded, as TF does).
        # A stage whose window, stride and padding are all 1 / 0 is left out.
        x = b.reshape(cv.operand(op, 0), [n * d, h, w, c], label=label + "/frames")
        oh, ow = h, w
        if window[1:] != [1, 1] or strides[1:] != [1, 1] or any(pads[1] + pads[2]):
            x = pool(x, window_dimensions=window[1:], strides=strides[1:], padding=[*pads[1], *pads[2]],
                     layout="nhwc", label=label + "/hw")
            oh, ow = int(x.shape[1]), int(x.shape[2])
        x = b.reshape(x, [n, d, oh * ow, c], label=label + "/depth")
        if window[0] != 1 or strides[0] != 1 or any(pads[0]):
            x = pool(x, window_dimensions=[window[0], 1], strides=[strides[0], 1], padding=[*pads[0], 0, 0],
                     layout="nhwc", label=label + "/d")
        cv.set_output(op, b.reshape(x, [n, int(x.shape[1]), oh, ow, c], label=label))

    handler.__name__ = f"_flex_{method}_3d"
    return handler


handles("FlexMaxPool3D", webnn="max_pool2d over (h, w) per frame, then over d (Select TF op MaxPool3D, NDHWC, "
                               "SAME / VALID)")(_pool3d("max_pool2d"))
handles("FlexAvgPool3D", webnn="average_pool2d over (h, w) per frame, then over d (Select TF op AvgPool3D, NDHWC, "
                               "SAME / VALID; padded cells not counted)")(_pool3d("average_pool2d"))


def _pair(cv: Converter, op: OperatorInfo, attrs: dict, name: str) -> list[int]:
    v = _ints(cv, op, attrs, name, [1, 1, 1, 1])
    if len(v) != 4 or v[0] != 1 or v[3] != 1:
        raise cv.unsupported(op, f"{name} {v} (expected [1, h, w, 1] over NHWC)")
    cv.require_positive(op, **{name: v})
    return v[1:3]


@handles("FlexConv2DBackpropInput", webnn="conv_transpose2d(input_layout='nhwc', filter_layout='ohwi', dilations=) "
                                          "with the padding of the forward conv from input_sizes (Select TF op "
                                          "Conv2DBackpropInput: Keras' Conv2DTranspose(dilation_rate > 1))")
def _conv2d_backprop_input(cv: Converter, op: OperatorInfo) -> None:
    # Inputs: input_sizes (the transposed conv's output shape), filter [kh, kw, out, in], the input.
    attrs = _node(cv, op).attrs
    if attrs.get("data_format", "NHWC") != "NHWC":
        raise cv.unsupported(op, f"data_format {attrs['data_format']!r}")
    strides, dilations = _pair(cv, op, attrs, "strides"), _pair(cv, op, attrs, "dilations")
    out_shape = [int(v) for v in np.asarray(cv.value(op, 0)).reshape(-1)]
    w_shape = [int(d) for d in cv.tensor(op, 1).shape]
    x_shape = [int(d) for d in cv.tensor(op, 2).shape]
    if len(out_shape) != 4 or len(w_shape) != 4 or len(x_shape) != 4:
        raise cv.malformed(op, f"input_sizes {out_shape}, filter {w_shape}, input {x_shape} (expected 4-D)")
    padding = attrs.get("padding", "VALID")
    if padding == "SAME":
        pads = [*same_padding(out_shape[1], w_shape[0], strides[0], dilations[0]),
                *same_padding(out_shape[2], w_shape[1], strides[1], dilations[1])]
    elif padding == "VALID":
        pads = [0, 0, 0, 0]
    elif padding == "EXPLICIT":
        explicit = _ints(cv, op, attrs, "explicit_paddings", [])
        if len(explicit) != 8 or any(explicit[:2] + explicit[6:]):
            raise cv.malformed(op, f"explicit_paddings {explicit}")
        pads = explicit[2:6]
    else:
        raise cv.unsupported(op, f"padding {padding!r}")
    output_padding = transpose_output_padding(cv, op, "input_sizes", out_shape, x_shape[1:3], w_shape[:2], strides,
                                              dilations, pads)
    b, label = cv.builder, cv.label(op)
    static = cv.static(op, 1)
    if static is not None:  # [kh, kw, out, in] -> OHWI at load time
        w = cv.constant_like(op, 1, np.ascontiguousarray(np.asarray(static).transpose(2, 0, 1, 3)))
    else:
        w = b.transpose(cv.operand(op, 1), permutation=[2, 0, 1, 3], label=label + "/filter")
    y = b.conv_transpose2d(cv.operand(op, 2), w, padding=pads, strides=strides, dilations=dilations,
                           output_padding=output_padding, input_layout="nhwc", filter_layout="ohwi", label=label)
    cv.set_output(op, y)


_TABLE = 1 << 10  # TensorFlow's bicubic coefficient table: 1024 steps of the fraction


def _cubic_table(a: float) -> np.ndarray:
    """TensorFlow's ``InitCoeffsTable(a)`` (float32): [i, 0] the weight of a tap at distance
    i / 1024, [i, 1] of one at 1 + i / 1024."""
    x = np.arange(_TABLE + 1, dtype=np.float64) / _TABLE
    t = np.empty((_TABLE + 1, 2), np.float32)
    t[:, 0] = ((a + 2) * x - (a + 3)) * x * x + 1
    x1 = x + 1.0
    t[:, 1] = ((a * x1 - 5 * a) * x1 + 8 * a) * x1 - 4 * a
    return t


def bicubic_matrix(in_size: int, out_size: int, align_corners: bool, half_pixel: bool) -> np.ndarray:
    """[out, in] weights of TensorFlow's ``ResizeBicubic`` along one axis.

    As ``resize_bicubic_op.cc``: the source position is ``(i + 0.5) * scale - 0.5``
    (half-pixel centers) or ``i * scale``; the fraction is rounded to 1/1024 and the four taps'
    weights read from the Keys cubic table with a = -0.5 (half-pixel: taps outside the image
    get weight 0 and the rest are renormalized) or a = -0.75 (legacy: taps clamped to the edge).
    """
    scale = np.float32((in_size - 1) / (out_size - 1)) if align_corners and out_size > 1 else \
        np.float32(in_size / out_size)
    table = _cubic_table(-0.5 if half_pixel else -0.75)
    m = np.zeros((out_size, in_size), np.float64)
    for i in range(out_size):
        f = (np.float32(i) + np.float32(0.5)) * scale - np.float32(0.5) if half_pixel else np.float32(i) * scale
        base = int(np.floor(f))
        off = int(np.rint(np.float32(f - np.float32(base)) * np.float32(_TABLE)))
        taps = [table[off, 1], table[off, 0], table[_TABLE - off, 0], table[_TABLE - off, 1]]
        weights = []
        for k, wt in enumerate(taps):
            j = base - 1 + k
            inside = 0 <= j < in_size
            weights.append((min(max(j, 0), in_size - 1), np.float32(wt) if inside or not half_pixel else
                            np.float32(0)))
        if half_pixel:
            total = np.float32(sum(wt for _, wt in weights))
            if abs(total) >= 1000.0 * np.finfo(np.float32).tiny:
                weights = [(j, wt * (np.float32(1) / total)) for j, wt in weights]
        for j, wt in weights:
            m[i, j] += float(wt)
    return m


@handles("FlexResizeBicubic", webnn="two matmuls with TensorFlow's bicubic weights along height and width (Select TF "
                                    "op ResizeBicubic: align_corners, half_pixel_centers)")
def _resize_bicubic(cv: Converter, op: OperatorInfo) -> None:
    attrs = _node(cv, op).attrs
    align, half = bool(attrs.get("align_corners", False)), bool(attrs.get("half_pixel_centers", False))
    if align and half:  # (TensorFlow refuses the pair too)
        raise cv.unsupported(op, "align_corners with half_pixel_centers")
    shape = [int(d) for d in cv.tensor(op, 0).shape]
    if len(shape) != 4:
        raise cv.malformed(op, f"input of rank {len(shape)} (expected 4: NHWC)")
    size = [int(v) for v in cv.value(op, 1).reshape(-1)]
    if len(size) != 2 or min(size) < 1:
        raise cv.malformed(op, f"size {size} (expected [height, width], each at least 1)")
    oh, ow = size
    mh, mw = bicubic_matrix(shape[1], oh, align, half), bicubic_matrix(shape[2], ow, align, half)
    cv.set_output(op, _resize_by_matrices(cv, op, mh, mw))


def _bincount_size(cv: Converter, op: OperatorInfo) -> int:
    """DenseBincount's size: a constant, or ``tf.math.bincount``'s run-time
    ``minimum(maximum(max(ids) + 1, minlength), maxlength)`` with minlength == maxlength (Keras'
    ``CategoryEncoding(num_tokens)``), in either order."""
    static = cv.static(op, 1)
    if static is not None:
        return int(np.asarray(static).reshape(-1)[0])
    outer = cv.producer(op.inputs[1])
    if outer is not None and outer.name in ("MINIMUM", "MAXIMUM"):
        for i in (0, 1):
            bound, inner = cv.static(outer, 1 - i), cv.producer(outer.inputs[i])
            if bound is None or inner is None or inner.name != ({"MINIMUM", "MAXIMUM"} - {outer.name}).pop():
                continue
            for k in (0, 1):
                other = cv.static(inner, k)
                if other is not None and other.size == 1 and bound.size == 1 and int(other) == int(bound):
                    return int(bound.reshape(-1)[0])
    raise cv.unsupported(op, "a run-time size (tf.math.bincount without minlength == maxlength)")


@handles("FlexDenseBincount", webnn="equal(ids with a new axis, a constant 0..size-1), then reduce_sum (counts, "
                                    "weighted by where) or reduce_max (binary_output) over the ids' last axis (Select "
                                    "TF op DenseBincount)")
def _dense_bincount(cv: Converter, op: OperatorInfo) -> None:
    attrs = _node(cv, op).attrs
    shape = [int(d) for d in cv.tensor(op, 0).shape]
    if len(shape) not in (1, 2):
        raise cv.malformed(op, f"input of rank {len(shape)} (expected 1 or 2)")
    size = _bincount_size(cv, op)
    out = cv.out_tensor(op)
    if size < 0:
        raise cv.malformed(op, f"size {size}")
    b, label = cv.builder, cv.label(op)
    ids = cv.operand(op, 0)
    if ids.data_type not in ("int32", "int64"):
        raise cv.unsupported(op, f"ids of type {ids.data_type}")
    out_type = cv.data_type(out) or cv.float_type
    iota = b.constant({"data_type": ids.data_type, "shape": [1] * len(shape) + [size]},
                      np.arange(size, dtype=np.int32 if ids.data_type == "int32" else np.int64)
                      .reshape([1] * len(shape) + [size]))
    hit = b.equal(b.reshape(ids, shape + [1], label=label + "/ids"), iota, label=label + "/hit")
    # An empty weights tensor (Keras' CategoryEncoding) counts each id once.
    has_weights = len(op.inputs) > 2 and op.inputs[2] >= 0 and int(np.prod(cv.tensor(op, 2).shape)) > 0
    axis = len(shape) - 1
    if bool(attrs.get("binary_output", False)):  # TensorFlow ignores the weights then
        y = b.reduce_max(b.cast(hit, out_type, label=label + "/one"), axes=[axis], label=label)
    elif has_weights:
        if list(cv.tensor(op, 2).shape) != shape:
            raise cv.unsupported(op, f"weights of shape {list(cv.tensor(op, 2).shape)} (expected the ids' {shape})")
        w = b.reshape(cv.operand(op, 2), shape + [1], label=label + "/weights")
        zero = b.constant({"data_type": w.data_type, "shape": [1]}, np.zeros(1, np.dtype(w.data_type)))
        y = b.reduce_sum(b.where(hit, w, zero, label=label + "/weighted"), axes=[axis], label=label)
        if y.data_type != out_type:
            y = b.cast(y, out_type, label=label + "/cast")
    else:
        y = b.reduce_sum(b.cast(hit, out_type, label=label + "/one"), axes=[axis], label=label)
    cv.set_output(op, y)

