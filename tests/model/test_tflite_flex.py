"""Select TensorFlow ("Flex") operators: MaxPool3D, AvgPool3D, Conv2DBackpropInput,
ResizeBicubic, DenseBincount.

TensorFlow's converter emits them (with ``SELECT_TF_OPS``) for Keras' MaxPooling3D,
AveragePooling3D, Conv2DTranspose(dilation_rate > 1), Resizing / UpSampling2D
(interpolation="bicubic") and CategoryEncoding. LiteRT's Python
interpreter cannot run them, so the references are float64 NumPy (TensorFlow's definitions)
and, for the bicubic weights, matrices printed by TensorFlow 2.21's ``ResizeBicubic``. The
models are written by the test (tflite_maker) with custom options as the converter writes
them: a FlexBuffer ``[op name, serialized NodeDef]``.
"""

from __future__ import annotations

import itertools
import struct

import numpy as np
import pytest
from tflite_maker import ModelMaker

import webnn_gpu as webnn
from webnn_gpu.errors import DataError, NotSupportedError
from webnn_gpu.tflite.flex import bicubic_matrix, node_def

# --------------------------------------------------------------------------- writing Flex options


def _varint(v: int) -> bytes:
    v &= (1 << 64) - 1
    out = bytearray()
    while True:
        out.append((v & 0x7F) | (0x80 if v > 0x7F else 0))
        v >>= 7
        if not v:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _attr(value) -> bytes:
    """A tensorflow.AttrValue: list of ints 1{3}, s 2, i 3, f 4, b 5."""
    if isinstance(value, bool):
        return _varint(5 << 3) + _varint(int(value))
    if isinstance(value, int):
        return _varint(3 << 3) + _varint(value)
    if isinstance(value, float):
        return _varint(4 << 3 | 5) + struct.pack("<f", value)
    if isinstance(value, str):
        return _field(2, value.encode())
    return _field(1, _field(3, b"".join(_varint(v) for v in value)))


class _Raw(bytes):
    """Bytes that flexbuffers' String() writes as they are (it calls ``.encode()``)."""

    def encode(self, *args, **kwargs) -> bytes:
        return bytes(self)


def flex_options(op: str, **attrs) -> bytes:
    """Custom options as TensorFlow's converter writes them for a Select TF op."""
    from flatbuffers import flexbuffers

    node = _field(2, op.encode()) + b"".join(_field(5, _field(1, k.encode()) + _field(2, _attr(v)))
                                             for k, v in attrs.items())
    b = flexbuffers.Builder()
    with b.Vector():
        b.String(op)
        b.String(_Raw(node))
    return bytes(b.Finish())


#: The custom options of the FlexAvgPool3D that TensorFlow 2.21's converter wrote for
#: keras.layers.AveragePooling3D(2) (copied from the converted model).
TF_AVG_POOL_3D = (
    b"\tAvgPool3D\x00\xb3\x12\tAvgPool3D\x1a\x00*\x16\n\x0bdata_format\x12\x07\x12\x05NDHWC*\x12\n\x07padding"
    b"\x12\x07\x12\x05VALID*\x12\n\x05ksize\x12\t\n\x07\x1a\x05\x01\x02\x02\x02\x01*\x07\n\x01T\x12\x020\x01*\x14"
    b"\n\x07strides\x12\t\n\x07\x1a\x05\x01\x02\x02\x02\x012E\n*functional_1/average_pooling3d_1/AvgPool3D\x12"
    b"\x17__inference_function_15\x00\x02\xc0\xb6\x14\x14\x04(\x01")


def test_node_def_reads_what_tensorflow_writes():
    assert node_def(TF_AVG_POOL_3D) == ("AvgPool3D", {"data_format": "NDHWC", "padding": "VALID",
                                                      "ksize": [1, 2, 2, 2, 1], "T": 1, "strides": [1, 2, 2, 2, 1]})
    written = flex_options("ResizeBicubic", align_corners=False, half_pixel_centers=True, n=-3, f=0.5)
    assert node_def(written) == ("ResizeBicubic", {"align_corners": False, "half_pixel_centers": True, "n": -3,
                                                   "f": 0.5})
    with pytest.raises(ValueError, match="Flex op"):
        node_def(b"\x01\x02")


def _node_with_attr(payload: bytes) -> bytes:
    """Flex options of a MaxPool3D whose one attribute ``k`` is the raw AttrValue ``payload``."""
    from flatbuffers import flexbuffers

    node = _field(2, b"MaxPool3D") + _field(5, _field(1, b"k") + _field(2, payload))
    b = flexbuffers.Builder()
    with b.Vector():
        b.String("MaxPool3D")
        b.String(_Raw(node))
    return bytes(b.Finish())


@pytest.mark.parametrize("payload, match", [
    (_varint(4 << 3) + _varint(7), "field 4 of wire type 0"),  # f as a varint
    (_varint(4 << 3 | 5) + b"\x00\x00\x80", "truncated"),  # f of 3 bytes
    (_field(1, _field(4, b"\x00\x00\x80")), "field 4 of 3 bytes"),  # a list's floats of 3 bytes
    (_field(3, b"\x01"), "field 3 of wire type 2"),  # i length-delimited
    (_varint(1 << 3) + _varint(5), "field 1 of wire type 0"),  # a list as a varint
    (_varint(2 << 3) + _varint(1 << 40), "field 2 of wire type 0"),  # s as a huge varint
    (_varint(3 << 3) + b"\xff" * 4000 + b"\x01", "longer than 10 bytes"),  # a long varint: no quadratic time
])
def test_malformed_node_defs_are_clear_errors(payload, match):
    """Fields of the wrong wire type or size, and over-long varints, are a ValueError (the
    loader's "malformed model" naming the op), never a TypeError, struct.error or a huge
    allocation."""
    with pytest.raises(ValueError, match=match):
        node_def(_node_with_attr(payload))


def test_malformed_options_name_the_operator(ctx):
    m = ModelMaker()
    x = m.input([1, 2, 4, 4, 4])
    m.output(m.op("FlexMaxPool3D", [x], [1, 1, 2, 2, 4], custom_options=_node_with_attr(_field(3, b"\x01"))))
    with pytest.raises(DataError, match="FlexMaxPool3D.*malformed.*field 3 of wire type 2"):
        webnn.load(m.finish(), ctx)
    m = ModelMaker()
    x = m.input([1, 2, 4, 4, 4])
    opts = flex_options("MaxPool3D", padding="VALID", ksize=2, strides=[1, 2, 2, 2, 1])
    m.output(m.op("FlexMaxPool3D", [x], [1, 1, 2, 2, 4], custom_options=opts))
    with pytest.raises(DataError, match="FlexMaxPool3D.*attribute 'ksize' is 2 \\(expected a list of ints\\)"):
        webnn.load(m.finish(), ctx)


# --------------------------------------------------------------------------- pooling 3D


def _pool3d_reference(x, window, strides, padding, kind):
    """TensorFlow's MaxPool3D / AvgPool3D in float64 (padded cells ignored / not counted)."""
    n, *spatial, c = x.shape
    pads = []
    for size, k, s in zip(spatial, window, strides):
        if padding == "VALID":
            pads.append((0, (size - k) // s + 1))
        else:
            out = -(-size // s)
            total = max((out - 1) * s + k - size, 0)
            pads.append((total // 2, out))
    out = np.zeros((n, *[p[1] for p in pads], c))
    for idx in itertools.product(*[range(p[1]) for p in pads]):
        lo = [i * s - p[0] for i, s, p in zip(idx, strides, pads)]
        sl = tuple(slice(max(a, 0), min(a + k, size)) for a, k, size in zip(lo, window, spatial))
        cells = x[(slice(None), *sl, slice(None))].astype(np.float64)
        out[(slice(None), *idx, slice(None))] = cells.max(axis=(1, 2, 3)) if kind == "max" else \
            cells.mean(axis=(1, 2, 3))
    return out


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("shape, window, strides, padding", [
    ((1, 4, 8, 8, 3), (2, 2, 2), (2, 2, 2), "VALID"),
    ((2, 5, 7, 6, 4), (2, 3, 3), (2, 2, 2), "SAME"),   # odd sizes, padding at both ends
    ((1, 3, 6, 5, 2), (1, 2, 2), (1, 2, 2), "VALID"),  # MaxPooling3D((1, 2, 2)): no depth stage
    ((1, 6, 4, 4, 3), (3, 1, 1), (2, 1, 1), "SAME"),   # depth only: no (h, w) stage
])
def test_pool3d_matches_tensorflow(kind, shape, window, strides, padding, ctx, rng):
    ref = _pool3d_reference(np.zeros(shape), window, strides, padding, kind)
    m = ModelMaker()
    x = m.input(list(shape))
    opts = flex_options(f"{kind.capitalize()}Pool3D", T=1, data_format="NDHWC", padding=padding,
                        ksize=[1, *window, 1], strides=[1, *strides, 1])
    m.output(m.op(f"Flex{kind.capitalize()}Pool3D", [x], list(ref.shape), custom_options=opts))
    model = webnn.load(m.finish(), ctx)
    data = rng.standard_normal(shape).astype(np.float32)
    got = next(iter(model.compute(data).values()))
    np.testing.assert_allclose(got, _pool3d_reference(data, window, strides, padding, kind), rtol=1e-5, atol=1e-6)


def test_pool3d_other_layouts_are_refused_naming_them(ctx):
    m = ModelMaker()
    x = m.input([1, 3, 4, 4, 4])
    opts = flex_options("MaxPool3D", data_format="NCDHW", padding="VALID", ksize=[1, 1, 1, 2, 2],
                        strides=[1, 1, 1, 2, 2])
    m.output(m.op("FlexMaxPool3D", [x], [1, 3, 4, 2, 2], custom_options=opts))
    with pytest.raises(NotSupportedError, match="FlexMaxPool3D: data_format 'NCDHW' is not supported"):
        webnn.load(m.finish(), ctx)


# --------------------------------------------------------------------------- transposed conv


def _conv_transpose_reference(x, w, out_hw, strides, dilations, pads):
    """Conv2DBackpropInput in float64: input pixel (i, j) adds x[i, j] @ w[p, q].T at output
    (i * s - pad + p * d, j * s - pad + q * d); w is [kh, kw, out, in]."""
    n, h, wd, _ = x.shape
    kh, kw, co, _ = w.shape
    out = np.zeros((n, out_hw[0] + kh * dilations[0] + h * strides[0], out_hw[1] + kw * dilations[1] +
                    wd * strides[1], co))
    x, w = x.astype(np.float64), w.astype(np.float64)
    for i, j, p, q in itertools.product(range(h), range(wd), range(kh), range(kw)):
        oi, oj = i * strides[0] - pads[0] + p * dilations[0], j * strides[1] - pads[2] + q * dilations[1]
        if 0 <= oi < out_hw[0] and 0 <= oj < out_hw[1]:
            out[:, oi, oj] += x[:, i, j] @ w[p, q].T
    return out[:, :out_hw[0], :out_hw[1]]


@pytest.mark.parametrize("x_shape, w_shape, out_hw, strides, dilations, padding, pads", [
    ((1, 8, 8, 4), (3, 3, 5, 4), (8, 8), (1, 1), (2, 2), "SAME", (2, 2, 2, 2)),  # Conv2DTranspose(dilation_rate=2)
    ((2, 7, 9, 3), (3, 2, 6, 3), (11, 12), (1, 1), (2, 3), "VALID", (0, 0, 0, 0)),
    ((1, 5, 6, 4), (3, 3, 2, 4), (10, 12), (2, 2), (1, 1), "SAME", (0, 1, 0, 1)),  # output_padding 1
    ((1, 4, 5, 2), (2, 3, 3, 2), (5, 9), (1, 2), (2, 1), "EXPLICIT", (1, 0, 2, 1)),  # output_padding 0, 1
])
def test_conv2d_backprop_input_matches_numpy(x_shape, w_shape, out_hw, strides, dilations, padding, pads, ctx, rng):
    weights = rng.standard_normal(w_shape).astype(np.float32)
    m = ModelMaker()
    x = m.input(list(x_shape))
    explicit = [0, 0, *pads, 0, 0] if padding == "EXPLICIT" else []
    opts = flex_options("Conv2DBackpropInput", T=1, data_format="NHWC", padding=padding, strides=[1, *strides, 1],
                        dilations=[1, *dilations, 1], explicit_paddings=explicit)
    sizes = m.const(np.array([x_shape[0], *out_hw, w_shape[2]], np.int32))
    m.output(m.op("FlexConv2DBackpropInput", [sizes, m.const(weights), x], [x_shape[0], *out_hw, w_shape[2]],
                  custom_options=opts))
    model = webnn.load(m.finish(), ctx)
    data = rng.standard_normal(x_shape).astype(np.float32)
    got = next(iter(model.compute(data).values()))
    ref = _conv_transpose_reference(data, weights, out_hw, strides, dilations, pads)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())


# --------------------------------------------------------------------------- bicubic resize

#: TensorFlow 2.21 ResizeBicubic of one-hot rows: (in, out, align_corners, half_pixel) -> [out, in].
TF_BICUBIC = {
    (5, 3, False, True): [[0.7244914770, 0.3099407852, -0.0344321989, 0, 0], [0, 0, 1, 0, 0],
                          [0, 0, -0.0344321989, 0.3099407852, 0.7244914770]],
    (4, 7, False, False): [[1, 0, 0, 0], [0.4199810028, 0.6849582195, -0.1049392000, 0],
                           [-0.0786146000, 0.9578837753, 0.1338033974, -0.0130725997],
                           [-0.0438342988, 0.3081248104, 0.8450707793, -0.1093612984],
                           [0, -0.1093612984, 0.8450707793, 0.2642903924], [0, -0.0130725997, 0.1338033974, 0.8792691827],
                           [0, 0, -0.1049392000, 1.1049392223]],
    (4, 7, True, False): [[1, 0, 0, 0], [0.5, 0.59375, -0.09375, 0], [0, 1, 0, 0], [-0.09375, 0.59375, 0.59375, -0.09375],
                          [0, 0, 1, 0], [0, -0.09375, 0.59375, 0.5], [0, 0, 0, 1]],
    (6, 4, False, False): [[1, 0, 0, 0, 0, 0], [-0.09375, 0.59375, 0.59375, -0.09375, 0, 0], [0, 0, 0, 1, 0, 0],
                           [0, 0, 0, -0.09375, 0.59375, 0.5]],
}


@pytest.mark.parametrize("key", sorted(TF_BICUBIC))
def test_bicubic_weights_are_tensorflows(key):
    np.testing.assert_allclose(bicubic_matrix(*key), np.array(TF_BICUBIC[key]), atol=1e-6)


@pytest.mark.parametrize("align, half", [(False, True), (False, False), (True, False)])
@pytest.mark.parametrize("dtype, tol", [("float32", 1e-5), ("float16", 3e-3)])
def test_resize_bicubic_runs_the_weights(align, half, dtype, tol, ctx, rng):
    shape, size = (2, 5, 7, 3), (9, 4)  # up along the height, down along the width
    m = ModelMaker()
    x = m.input(list(shape))
    opts = flex_options("ResizeBicubic", T=1, align_corners=align, half_pixel_centers=half)
    m.output(m.op("FlexResizeBicubic", [x, m.const(np.array(size, np.int32))], [2, *size, 3], custom_options=opts))
    model = webnn.load(m.finish(), ctx, dtype=dtype)
    data = rng.standard_normal(shape).astype(np.float32)
    got = next(iter(model.compute(data).values())).astype(np.float64)
    mh, mw = bicubic_matrix(5, 9, align, half), bicubic_matrix(7, 4, align, half)
    ref = np.einsum("oh,nhwc,pw->nopc", mh, data.astype(np.float64), mw)
    np.testing.assert_allclose(got, ref, atol=tol * np.abs(ref).max())


@pytest.mark.parametrize("align, half, size, err, match", [
    (True, True, (9, 4), NotSupportedError, "align_corners with half_pixel_centers"),
    (False, True, (0, 4), DataError, r"size \[0, 4\]"),
    (False, True, (9, 4, 1), DataError, r"size \[9, 4, 1\]"),
])
def test_resize_bicubic_refuses_what_tensorflow_refuses(align, half, size, err, match, ctx):
    m = ModelMaker()
    x = m.input([1, 5, 7, 3])
    opts = flex_options("ResizeBicubic", T=1, align_corners=align, half_pixel_centers=half)
    m.output(m.op("FlexResizeBicubic", [x, m.const(np.array(size, np.int32))], [1, 9, 4, 3], custom_options=opts))
    with pytest.raises(err, match="FlexResizeBicubic.*" + match):
        webnn.load(m.finish(), ctx)


# --------------------------------------------------------------------------- bincount


def _bincount_model(ids_shape, size, *, binary, weights=None, clamp=False):
    m = ModelMaker()
    ids = m.input(list(ids_shape), np.int32)
    if clamp:  # tf.math.bincount(minlength=maxlength=size): the size clipped at run time
        top = m.op("REDUCE_MAX", [ids, m.const(np.arange(len(ids_shape), dtype=np.int32))], [], out_dtype=np.int32,
                   options={"keepDims": False})
        grown = m.op("ADD", [top, m.const(np.array(1, np.int32))], [], out_dtype=np.int32)
        low = m.op("MAXIMUM", [grown, m.const(np.array(size, np.int32))], [], out_dtype=np.int32)
        size_t = m.op("MINIMUM", [low, m.const(np.array(size, np.int32))], [], out_dtype=np.int32)
    else:
        size_t = m.const(np.array(size, np.int32))
    w = m.const(np.zeros(0, np.float32) if weights is None else weights)
    opts = flex_options("DenseBincount", Tidx=3, T=1, binary_output=binary)
    out_shape = [ids_shape[0], size] if len(ids_shape) == 2 else [size]
    m.output(m.op("FlexDenseBincount", [ids, size_t, w], out_shape, custom_options=opts))
    return m.finish()


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("ids_shape, binary, weighted, clamp", [
    ((3, 6), True, False, True),    # CategoryEncoding(output_mode="multi_hot")
    ((3, 6), False, False, True),   # CategoryEncoding(output_mode="count")
    ((3, 6), False, True, False),   # count_weights
    ((7,), False, False, False),    # 1-D ids
    ((2, 5), True, True, False),    # binary_output ignores the weights
])
def test_dense_bincount_counts_like_tensorflow(ids_shape, binary, weighted, clamp, dtype, ctx, rng):
    size = 8
    weights = rng.standard_normal(ids_shape).astype(np.float32) if weighted else None
    model = webnn.load(_bincount_model(ids_shape, size, binary=binary, weights=weights, clamp=clamp), ctx, dtype=dtype)
    ids = rng.integers(0, size + 3, ids_shape).astype(np.int32)  # ids >= size are not counted
    got = next(iter(model.compute(ids).values())).astype(np.float64)
    rows = ids.reshape(-1, ids_shape[-1])
    w = np.ones(rows.shape) if weights is None or binary else weights.reshape(rows.shape).astype(np.float64)
    ref = np.zeros((rows.shape[0], size))
    for r, (row, wr) in enumerate(zip(rows, w)):
        for i, wi in zip(row, wr):
            if i < size:
                ref[r, i] = 1.0 if binary else ref[r, i] + wi
    np.testing.assert_allclose(got.reshape(ref.shape), ref, atol=1e-5 if dtype == "float32" else 2e-2)


def test_dense_bincount_of_a_run_time_size_is_refused(ctx):
    m = ModelMaker()
    ids = m.input([2, 4], np.int32)
    top = m.op("REDUCE_MAX", [ids, m.const(np.arange(2, dtype=np.int32))], [], out_dtype=np.int32,
               options={"keepDims": False})
    opts = flex_options("DenseBincount", Tidx=3, T=1, binary_output=False)
    m.output(m.op("FlexDenseBincount", [ids, top, m.const(np.zeros(0, np.float32))], [2, 8], custom_options=opts))
    with pytest.raises(NotSupportedError, match="a run-time size"):
        webnn.load(m.finish(), ctx)


def test_float16_graph_with_a_float_between_integer_casts_compiles(ctx):
    """int32 -> float -> int32 casts fuse into one map kernel whose bindings are all int32; in a
    float16 graph its body still names f16 (Keras' CategoryEncoding and Discretization casts)."""
    m = ModelMaker()
    ids = m.input([2, 8], np.int32)
    f = m.op("CAST", [ids], [2, 8], out_dtype=np.float32)
    m.output(m.op("CAST", [f], [2, 8], out_dtype=np.int32))
    model = webnn.load(m.finish(), ctx, dtype="float16")
    ids = np.arange(-8, 8, dtype=np.int32).reshape(2, 8) * 37
    np.testing.assert_array_equal(next(iter(model.compute(ids).values())), ids)
