"""Small TFLite models, one per group of operators/options the loader maps.

Each case returns ``(model bytes, list of input arrays)``; shapes and options are chosen
so that the options matter (odd sizes for SAME padding, values beyond the clamp range
of fused activations, a non-integer resize factor, ...). The same cases run through the
NumPy stand-in builder (no GPU) and through the real engine, both against LiteRT.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

import numpy as np

from tflite_maker import ModelMaker

CASES: dict[str, Callable[[], tuple[bytes, list[np.ndarray]]]] = {}

# TFLite enums (schema.fbs). Fused TANH is not used: LiteRT's kernels ignore it (the
# loader refuses it, see test_tflite_mapping.py).
SAME, VALID = 0, 1
NONE, RELU, RELU_N1_TO_1, RELU6 = 0, 1, 2, 3


def case(fn):
    CASES[fn.__name__] = fn
    return fn


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _f32(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


@case
def conv_same_stride2_relu6():
    rng = _rng(1)
    m = ModelMaker()
    x = m.input([1, 9, 11, 3])
    y = m.op("CONV_2D", [x, m.const(_f32(rng, 4, 3, 3, 3)), m.const(_f32(rng, 4))], [1, 5, 6, 4],
             options=dict(padding=SAME, strideH=2, strideW=2, dilationHFactor=1, dilationWFactor=1,
                          fusedActivationFunction=RELU6))
    m.output(y)
    return m.finish(), [_f32(rng, 1, 9, 11, 3, scale=2.0)]


@case
def conv_dilated_valid_relu_n1_to_1():
    rng = _rng(2)
    m = ModelMaker()
    x = m.input([1, 10, 9, 2])
    y = m.op("CONV_2D", [x, m.const(_f32(rng, 3, 3, 2, 2)), m.const(_f32(rng, 3))], [1, 6, 8, 3],
             options=dict(padding=VALID, strideH=1, strideW=1, dilationHFactor=2, dilationWFactor=1,
                          fusedActivationFunction=RELU_N1_TO_1))
    m.output(y)
    return m.finish(), [_f32(rng, 1, 10, 9, 2)]


@case
def depthwise_multiplier2_same_stride2_relu():
    rng = _rng(3)
    m = ModelMaker()
    x = m.input([1, 8, 7, 3])
    y = m.op("DEPTHWISE_CONV_2D", [x, m.const(_f32(rng, 1, 3, 3, 6)), m.const(_f32(rng, 6))], [1, 4, 4, 6],
             options=dict(padding=SAME, strideH=2, strideW=2, depthMultiplier=2, dilationHFactor=1,
                          dilationWFactor=1, fusedActivationFunction=RELU))
    m.output(y)
    return m.finish(), [_f32(rng, 1, 8, 7, 3)]


@case
def pools_same_padding():
    rng = _rng(4)
    m = ModelMaker()
    x = m.input([1, 7, 9, 4])
    a = m.op("AVERAGE_POOL_2D", [x], [1, 4, 5, 4],
             options=dict(padding=SAME, strideH=2, strideW=2, filterHeight=3, filterWidth=3))
    b = m.op("MAX_POOL_2D", [a], [1, 4, 5, 4],
             options=dict(padding=SAME, strideH=1, strideW=1, filterHeight=2, filterWidth=3,
                          fusedActivationFunction=RELU))
    m.output(b)
    return m.finish(), [_f32(rng, 1, 7, 9, 4)]


@case
def binary_ops_broadcast_fused():
    rng = _rng(5)
    m = ModelMaker()
    x = m.input([1, 4, 5, 3])
    z = m.input([1, 1, 1, 3])
    a = m.op("SUB", [x, z], [1, 4, 5, 3], options=dict(fusedActivationFunction=RELU6))
    b = m.op("MUL", [a, m.const(_f32(rng, 3))], [1, 4, 5, 3], options=dict(fusedActivationFunction=RELU_N1_TO_1))
    c = m.op("DIV", [b, m.const((rng.random((5, 3)) + 0.5).astype(np.float32))], [1, 4, 5, 3])
    d = m.op("ADD", [c, x], [1, 4, 5, 3], options=dict(fusedActivationFunction=RELU))
    m.output(d)
    return m.finish(), [_f32(rng, 1, 4, 5, 3, scale=4.0), _f32(rng, 1, 1, 1, 3)]


@case
def activations_chain():
    rng = _rng(6)
    m = ModelMaker()
    x = m.input([2, 3, 4, 5])
    h = m.op("HARD_SWISH", [x], [2, 3, 4, 5])
    s = m.op("LOGISTIC", [x], [2, 3, 4, 5])
    t = m.op("TANH", [h], [2, 3, 4, 5])
    r = m.op("RELU", [m.op("ADD", [s, t], [2, 3, 4, 5])], [2, 3, 4, 5])
    r6 = m.op("RELU6", [m.op("MUL", [x, m.const(np.float32(3.0))], [2, 3, 4, 5])], [2, 3, 4, 5])
    lr = m.op("LEAKY_RELU", [x], [2, 3, 4, 5], options=dict(alpha=0.2))
    out = m.op("ADD", [m.op("ADD", [r, r6], [2, 3, 4, 5]), lr], [2, 3, 4, 5])
    m.output(out)
    return m.finish(), [_f32(rng, 2, 3, 4, 5, scale=4.0)]


@case
def mean_and_resize_bilinear():
    rng = _rng(7)
    m = ModelMaker()
    x = m.input([1, 5, 7, 3])
    up = m.op("RESIZE_BILINEAR", [x, m.const(np.array([9, 13], np.int32))], [1, 9, 13, 3],
              options=dict(alignCorners=False, halfPixelCenters=True))
    mean = m.op("MEAN", [up, m.const(np.array([1, 2], np.int32))], [1, 1, 1, 3], options=dict(keepDims=True))
    out = m.op("MUL", [up, mean], [1, 9, 13, 3])
    flat = m.op("MEAN", [x, m.const(np.array([-1, 1], np.int32))], [1, 7], options=dict(keepDims=False))
    m.output(out, flat)
    return m.finish(), [_f32(rng, 1, 5, 7, 3)]


@case
def shape_ops():
    rng = _rng(8)
    m = ModelMaker()
    x = m.input([1, 4, 6, 2])
    y = m.input([1, 4, 6, 3])
    c = m.op("CONCATENATION", [x, y], [1, 4, 6, 5], options=dict(axis=-1))
    t = m.op("TRANSPOSE", [c, m.const(np.array([0, 3, 1, 2], np.int32))], [1, 5, 4, 6])
    p = m.op("PAD", [t, m.const(np.array([[0, 0], [1, 0], [2, 1], [0, 3]], np.int32))], [1, 6, 7, 9])
    r = m.op("RESHAPE", [p, m.const(np.array([6, -1], np.int32))], [6, 63],
             options=dict(newShape=[6, 63]))
    s = m.op("SOFTMAX", [r], [6, 63], options=dict(beta=0.5))
    m.output(s)
    return m.finish(), [_f32(rng, 1, 4, 6, 2, scale=3.0), _f32(rng, 1, 4, 6, 3, scale=3.0)]


@case
def fully_connected():
    rng = _rng(9)
    m = ModelMaker()
    x = m.input([2, 3, 4])
    a = m.op("FULLY_CONNECTED", [x, m.const(_f32(rng, 5, 4)), m.const(_f32(rng, 5))], [2, 3, 5],
             options=dict(keepNumDims=True, fusedActivationFunction=RELU))
    b = m.op("FULLY_CONNECTED", [a, m.const(_f32(rng, 7, 15)), -1], [2, 7],
             options=dict(keepNumDims=False))
    m.output(b)
    return m.finish(), [_f32(rng, 2, 3, 4)]


@case
def transpose_conv_builtin():
    rng = _rng(10)
    m = ModelMaker()
    x = m.input([1, 5, 4, 3])
    y = m.op("TRANSPOSE_CONV", [m.const(np.array([1, 10, 8, 2], np.int32)), m.const(_f32(rng, 2, 3, 3, 3)), x,
                                m.const(_f32(rng, 2))], [1, 10, 8, 2],
             options=dict(padding=SAME, strideH=2, strideW=2), version=3)
    m.output(y)
    return m.finish(), [_f32(rng, 1, 5, 4, 3)]


def _transpose_conv_bias(padding: int, stride_w: int, stride_h: int) -> bytes:
    return struct.pack("<iii", padding, stride_w, stride_h)


@case
def mediapipe_transpose_conv_bias_same_k3():
    rng = _rng(11)
    m = ModelMaker()
    x = m.input([1, 5, 6, 4])
    # MediaPipe SAME, k=3, s=2: total padding 2 on H (5 -> 9), 1 on W (6 -> 12).
    y = m.op("Convolution2DTransposeBias", [x, m.const(_f32(rng, 3, 3, 3, 4)), m.const(_f32(rng, 3))],
             [1, 9, 12, 3], custom_options=_transpose_conv_bias(1, 2, 2))
    m.output(y)
    return m.finish(), [_f32(rng, 1, 5, 6, 4)]


@case
def mediapipe_transpose_conv_bias_valid():
    rng = _rng(12)
    m = ModelMaker()
    x = m.input([1, 4, 3, 2])
    y = m.op("Convolution2DTransposeBias", [x, m.const(_f32(rng, 2, 2, 3, 2)), m.const(_f32(rng, 2))],
             [1, 8, 7, 2], custom_options=_transpose_conv_bias(2, 2, 2))
    m.output(y)
    return m.finish(), [_f32(rng, 1, 4, 3, 2)]


@case
def dequantize_fp16_and_int8_weights():
    rng = _rng(13)
    m = ModelMaker()
    x = m.input([1, 6, 6, 3])
    w16 = m.op("DEQUANTIZE", [m.const(_f32(rng, 4, 3, 3, 3).astype(np.float16))], [4, 3, 3, 3])
    y = m.op("CONV_2D", [x, w16, m.const(_f32(rng, 4))], [1, 6, 6, 4],
             options=dict(padding=SAME, strideH=1, strideW=1, dilationHFactor=1, dilationWFactor=1))
    q = rng.integers(-128, 127, size=(4,), dtype=np.int8)
    deq = m.op("DEQUANTIZE", [m.const(q, quant=([0.05], [3], 0))], [4])
    out = m.op("ADD", [y, deq], [1, 6, 6, 4])
    m.output(out)
    return m.finish(), [_f32(rng, 1, 6, 6, 3)]


@case
def unary_and_binary_math():
    rng = _rng(14)
    m = ModelMaker()
    shape = [2, 3, 5]
    x = m.input(shape)
    y = m.input(shape)
    e = m.op("EXP", [m.op("NEG", [m.op("ABS", [x], shape)], shape)], shape)  # in (0, 1]
    lg = m.op("LOG", [m.op("ADD", [e, m.const(np.float32(1.0))], shape)], shape)
    sq = m.op("SQRT", [e], shape)
    trig = m.op("ADD", [m.op("SIN", [x], shape), m.op("COS", [y], shape)], shape)
    rounding = m.op("ADD", [m.op("FLOOR", [x], shape), m.op("CEIL", [y], shape)], shape)
    mx = m.op("MAXIMUM", [x, y], shape)
    mn = m.op("MINIMUM", [x, m.const(_f32(rng, 5))], shape)
    pw = m.op("POW", [sq, m.const(np.array([0.5, 2.0, 3.0, 1.5, -1.0], np.float32))], shape)
    total = lg
    for t in (sq, trig, rounding, mx, mn, pw):
        total = m.op("ADD", [total, t], shape)
    m.output(total)
    return m.finish(), [_f32(rng, *shape, scale=2.0), _f32(rng, *shape, scale=2.0)]


@case
def reductions_and_reshapes():
    rng = _rng(15)
    m = ModelMaker()
    x = m.input([2, 4, 3])
    axes = m.const(np.array([1], np.int32))
    s = m.op("SUM", [x, axes], [2, 1, 3], options=dict(keepDims=True))
    mx = m.op("REDUCE_MAX", [x, axes], [2, 1, 3], options=dict(keepDims=True))
    mn = m.op("REDUCE_MIN", [x, m.const(np.array([-1, 1], np.int32))], [2], options=dict(keepDims=False))
    pr = m.op("REDUCE_PROD", [x, axes], [2, 1, 3], options=dict(keepDims=True))
    sq = m.op("SQUEEZE", [m.op("ADD", [m.op("ADD", [s, mx], [2, 1, 3]), pr], [2, 1, 3])], [2, 3],
              options=dict(squeezeDims=[1]))
    ex = m.op("EXPAND_DIMS", [mn, m.const(np.array(1, np.int32))], [2, 1])
    out1 = m.op("ADD", [sq, ex], [2, 3])
    pad = m.op("MIRROR_PAD", [x, m.const(np.array([[0, 0], [1, 2], [2, 1]], np.int32))], [2, 7, 6],
               options=dict(mode=0))
    pad2 = m.op("PADV2", [pad, m.const(np.array([[1, 0], [0, 1], [0, 0]], np.int32)),
                          m.const(np.array([-2.5], np.float32))], [3, 8, 6])
    pre = m.op("PRELU", [pad2, m.const(_f32(rng, 6))], [3, 8, 6])
    r01 = m.op("RELU_0_TO_1", [pre], [3, 8, 6])
    mm = m.op("BATCH_MATMUL", [r01, m.const(_f32(rng, 3, 5, 6))], [3, 8, 5], options=dict(adjX=False, adjY=True))
    m.output(out1, mm)
    return m.finish(), [_f32(rng, 2, 4, 3, scale=1.5)]
