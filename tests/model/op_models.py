"""Small TFLite models for the operators beyond the selfie models', one group per model.

Each case returns ``(model bytes, list of input arrays)``, written with
``tflite_maker.ModelMaker`` (independent of the loader). Shapes are small and shared
between cases so the GPU kernels compile once; values and options are chosen so that
each option matters (negative operands for FLOOR_MOD, every STRIDED_SLICE mask, the four
RESIZE_NEAREST_NEIGHBOR coordinate rules, ...). ``test_tflite_ops.py`` runs them through
``webnn.load`` and LiteRT.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ai_edge_litert import schema_py_generated as schema
from tflite_maker import ModelMaker

OP_CASES: dict[str, Callable[[], tuple[bytes, list[np.ndarray]]]] = {}
NONE, RELU, RELU6, TANH = 0, 1, 3, 4
INT32, INT64, FLOAT32, BOOL = (schema.TensorType.INT32, schema.TensorType.INT64, schema.TensorType.FLOAT32,
                               schema.TensorType.BOOL)


def case(fn):
    OP_CASES[fn.__name__] = fn
    return fn


def _f32(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def _i32(values):
    return np.asarray(values, np.int32)


S = [2, 3, 8]  # the shared element-wise shape


@case
def unary_math():
    rng = np.random.default_rng(20)
    m = ModelMaker()
    x, y = m.input(S), m.input(S)
    pos = m.op("ADD", [m.op("ABS", [x], S), m.const(np.float32(0.5))], S)
    outs = [m.op("RSQRT", [pos], S), m.op("SQUARE", [x], S), m.op("ELU", [x], S), m.op("ROUND", [x], S),
            m.op("SIGN", [x], S), m.op("GELU", [x], S, options=dict(approximate=False)),
            m.op("GELU", [y], S, options=dict(approximate=True)), m.op("LOG_SOFTMAX", [x], S),
            m.op("SQUARED_DIFFERENCE", [x, y], S), m.op("ADD_N", [x, y, pos], S)]
    m.output(*outs)
    return m.finish(), [_f32(rng, *S, scale=2.0), _f32(rng, *S, scale=2.0)]


@case
def comparisons_and_select():
    rng = np.random.default_rng(21)
    m = ModelMaker()
    x, y = m.input(S), m.input(S)
    c = m.const(np.float32(0.25))
    cmp = {name: m.op(name, [x, y if k % 2 else c], S, out_dtype=np.bool_)
           for k, name in enumerate(["EQUAL", "NOT_EQUAL", "GREATER", "GREATER_EQUAL", "LESS", "LESS_EQUAL"])}
    both = m.op("LOGICAL_AND", [cmp["GREATER"], cmp["LESS_EQUAL"]], S, out_dtype=np.bool_)
    either = m.op("LOGICAL_OR", [cmp["LESS"], cmp["NOT_EQUAL"]], S, out_dtype=np.bool_)
    neither = m.op("LOGICAL_NOT", [either], S, out_dtype=np.bool_)
    sel = m.op("SELECT_V2", [both, x, m.const(np.float32(-7.0))], S)
    rows = m.input([2], dtype=np.bool_)
    sel1 = m.op("SELECT", [rows, x, y], S)
    m.output(sel, sel1, neither, cmp["EQUAL"], cmp["GREATER_EQUAL"])
    xv = _f32(rng, *S)
    yv = np.where(rng.random(S) < 0.3, xv, _f32(rng, *S)).astype(np.float32)  # some equal pairs
    return m.finish(), [xv, yv, np.array([True, False])]


@case
def floor_div_and_mod():
    rng = np.random.default_rng(22)
    m = ModelMaker()
    x, y = m.input(S), m.input(S)
    i, j = m.input(S, dtype=np.int32), m.input(S, dtype=np.int32)
    outs = [m.op("FLOOR_DIV", [x, y], S), m.op("FLOOR_MOD", [x, y], S),
            m.op("FLOOR_DIV", [i, j], S, out_dtype=np.int32), m.op("FLOOR_MOD", [i, j], S, out_dtype=np.int32)]
    m.output(*outs)
    yv = (np.sign(rng.standard_normal(S)) * (rng.random(S) + 0.3)).astype(np.float32)
    jv = (np.sign(rng.standard_normal(S)) * rng.integers(1, 5, S)).astype(np.int32)
    return m.finish(), [_f32(rng, *S, scale=3.0), yv, rng.integers(-20, 20, S).astype(np.int32), jv]


@case
def cast_and_arg_minmax():
    rng = np.random.default_rng(23)
    m = ModelMaker()
    x = m.input(S)
    to_int = m.op("CAST", [x], S, out_dtype=np.int32, options=dict(inDataType=FLOAT32, outDataType=INT32))
    back = m.op("CAST", [to_int], S, options=dict(inDataType=INT32, outDataType=FLOAT32))
    nonzero = m.op("CAST", [to_int], S, out_dtype=np.bool_, options=dict(inDataType=INT32, outDataType=BOOL))
    amax = m.op("ARG_MAX", [x, m.const(_i32([2]))], [2, 3], out_dtype=np.int32, options=dict(outputType=INT32))
    amin = m.op("ARG_MIN", [x, m.const(_i32([1]))], [2, 8], out_dtype=np.int64, options=dict(outputType=INT64))
    m.output(to_int, back, nonzero, amax, amin)
    return m.finish(), [_f32(rng, *S, scale=3.0)]


@case
def cumsum_options():
    rng = np.random.default_rng(24)
    m = ModelMaker()
    x = m.input(S)
    outs = [m.op("CUMSUM", [x, m.const(_i32(axis))], S, options=dict(exclusive=ex, reverse=rev))
            for axis, ex, rev in ((2, False, False), (1, True, False), (-1, False, True), (0, True, True))]
    m.output(*outs)
    return m.finish(), [_f32(rng, *S)]


@case
def normalizations():
    rng = np.random.default_rng(25)
    m = ModelMaker()
    x = m.input([1, 3, 4, 8])
    l2 = m.op("L2_NORMALIZATION", [x], [1, 3, 4, 8])  # LiteRT refuses a fused activation here
    lrn = m.op("LOCAL_RESPONSE_NORMALIZATION", [x], [1, 3, 4, 8],
               options=dict(radius=2, bias=1.5, alpha=0.3, beta=0.75))
    m.output(l2, lrn)
    return m.finish(), [_f32(rng, 1, 3, 4, 8, scale=2.0)]


@case
def conv_3d():
    """CONV_3D (SAME with strides, VALID with a depth dilation, a fused activation) and
    CONV_3D_TRANSPOSE (strides, SAME and VALID, bias) against LiteRT's 3-D kernels."""
    rng = np.random.default_rng(40)
    m = ModelMaker()
    x = m.input([1, 5, 6, 7, 3])
    w1 = m.const(_f32(rng, 3, 3, 2, 3, 4, scale=0.5))
    same = m.op("CONV_3D", [x, w1, m.const(_f32(rng, 4))], [1, 3, 3, 3, 4],
                options=dict(padding=0, strideD=2, strideH=2, strideW=3, fusedActivationFunction=RELU))
    w2 = m.const(_f32(rng, 2, 1, 3, 3, 2, scale=0.5))
    valid = m.op("CONV_3D", [x, w2, -1], [1, 3, 6, 5, 2],
                 options=dict(padding=1, strideD=1, strideH=1, strideW=1, dilationDFactor=2))
    y = m.input([1, 3, 4, 2, 4])
    wt = m.const(_f32(rng, 3, 2, 3, 5, 4, scale=0.5))
    up = m.op("CONV_3D_TRANSPOSE", [m.const(_i32([1, 6, 8, 4, 5])), wt, y, m.const(_f32(rng, 5))], [1, 6, 8, 4, 5],
              options=dict(padding=0, strideD=2, strideH=2, strideW=2))
    wt2 = m.const(_f32(rng, 2, 3, 1, 3, 4, scale=0.5))
    up2 = m.op("CONV_3D_TRANSPOSE", [m.const(_i32([1, 4, 6, 2, 3])), wt2, y, -1], [1, 4, 6, 2, 3],
               options=dict(padding=1, strideD=1, strideH=1, strideW=1))
    m.output(same, valid, up, up2)
    return m.finish(), [_f32(rng, 1, 5, 6, 7, 3), _f32(rng, 1, 3, 4, 2, 4)]


@case
def top_k_and_any_all():
    """TOPK_V2 (ties keep index order, also at the lowest float; float and int32 rows; k = n: Keras'
    sort) and REDUCE_ANY / REDUCE_ALL of BOOL tensors (Keras' Masking)."""
    rng = np.random.default_rng(41)
    m = ModelMaker()
    x = m.input(S)
    vals, idx = m.op("TOPK_V2", [x, m.const(_i32(3))], [[2, 3, 3], [2, 3, 3]], out_dtype=[np.float32, np.int32],
                     outputs=2)
    i = m.input([4, 6], dtype=np.int32)
    ivals, iidx = m.op("TOPK_V2", [i, m.const(_i32(6))], [[4, 6], [4, 6]], out_dtype=np.int32, outputs=2)
    nz = m.op("NOT_EQUAL", [x, m.const(np.float32(0.0))], S, out_dtype=np.bool_)
    anys = m.op("REDUCE_ANY", [nz, m.const(_i32([-1]))], [2, 3], out_dtype=np.bool_)
    alls = m.op("REDUCE_ALL", [nz, m.const(_i32([0, 2]))], [1, 3, 1], out_dtype=np.bool_, options=dict(keepDims=True))
    m.output(vals, idx, ivals, iidx, anys, alls)
    xv = np.round(_f32(rng, *S, scale=2.0), 0)  # rounded: ties, and zeros for the masks
    xv[1, 2] = 0.0
    xv[0, 1, :6] = np.finfo(np.float32).min  # ties at the lowest float among the k largest
    return m.finish(), [xv.astype(np.float32), rng.integers(-3, 3, (4, 6)).astype(np.int32)]


@case
def one_hot_and_segments():
    """ONE_HOT (last axis and axis 0; indices outside [0, depth) give off_value),
    UNSORTED_SEGMENT_SUM (load-time ids, a segment no id names), SCATTER_ND (distinct
    indices; repeated ones, whose updates TFLite adds) and REVERSE_SEQUENCE (load-time and
    run-time lengths)."""
    rng = np.random.default_rng(43)
    m = ModelMaker()
    ids = m.input([2, 5], dtype=np.int32)
    on, off = m.const(np.float32(2.5)), m.const(np.float32(-1.0))
    last = m.op("ONE_HOT", [ids, m.const(_i32(4)), on, off], [2, 5, 4], options=dict(axis=-1))
    first = m.op("ONE_HOT", [ids, m.const(_i32(3)), on, off], [3, 2, 5], options=dict(axis=0))
    x = m.input([6, 4])
    seg = m.op("UNSORTED_SEGMENT_SUM", [x, m.const(_i32([0, 2, 0, 3, 2, 0])), m.const(_i32(5))], [5, 4])
    u = m.input([3, 4])
    distinct = m.op("SCATTER_ND", [m.const(_i32([[4], [0], [2]])), u, m.const(_i32([5, 4]))], [5, 4])
    repeated = m.op("SCATTER_ND", [m.const(_i32([[1, 2], [0, 0], [1, 2]])), m.input([3]), m.const(_i32([2, 3]))],
                    [2, 3])
    seq = m.input([3, 6, 2])
    lens = m.input([3], dtype=np.int32)
    rev_static = m.op("REVERSE_SEQUENCE", [seq, m.const(_i32([4, 6, 1]))], [3, 6, 2],
                      options=dict(seqDim=1, batchDim=0))
    rev_run = m.op("REVERSE_SEQUENCE", [seq, lens], [3, 6, 2], options=dict(seqDim=1, batchDim=0))
    m.output(last, first, seg, distinct, repeated, rev_static, rev_run)
    return m.finish(), [np.array([[0, 3, -1, 2, 4], [1, 1, 0, 5, 2]], np.int32), _f32(rng, 6, 4), _f32(rng, 3, 4),
                        _f32(rng, 3), _f32(rng, 3, 6, 2), np.array([2, 0, 6], np.int32)]


@case
def segment_shape_arithmetic():
    """What the converter writes for a reshape of a tensor with dynamic dimensions: SHAPE,
    UNSORTED_SEGMENT_PROD of its dimensions (folded at load time; an empty segment is 1),
    RESHAPE to the result; UNSORTED_SEGMENT_MAX / MIN / SUM of load-time data (empty segments:
    the lowest and highest int32, 0)."""
    rng = np.random.default_rng(45)
    m = ModelMaker()
    x = m.input([2, 3, 4])
    shape = m.op("SHAPE", [x], [3], out_dtype=np.int32, options=dict(outType=INT32))
    target = m.op("UNSORTED_SEGMENT_PROD", [shape, m.const(_i32([0, 0, 2])), m.const(_i32(3))], [3],
                  out_dtype=np.int32)
    flat = m.op("RESHAPE", [x, target], [6, 1, 4])
    vals = m.const(_i32([[5, -2], [7, 1], [-3, 9]]))
    seg = m.const(_i32([1, 1, 3]))
    mx = m.op("UNSORTED_SEGMENT_MAX", [vals, seg, m.const(_i32(4))], [4, 2], out_dtype=np.int32)
    mn = m.op("UNSORTED_SEGMENT_MIN", [vals, seg, m.const(_i32(4))], [4, 2], out_dtype=np.int32)
    sm = m.op("UNSORTED_SEGMENT_SUM", [vals, seg, m.const(_i32(4))], [4, 2], out_dtype=np.int32)
    m.output(flat, m.op("ADD", [mx, mn], [4, 2], out_dtype=np.int32), sm)
    return m.finish(), [_f32(rng, 2, 3, 4)]


@case
def atan2():
    """ATAN2 in every quadrant and on the axes."""
    rng = np.random.default_rng(44)
    m = ModelMaker()
    y, x = m.input(S), m.input(S)
    m.output(m.op("ATAN2", [y, x], S))
    xv, yv = _f32(rng, *S), _f32(rng, *S)
    xv[0, 0, :4], yv[0, 0, :4] = [0.0, -2.0, 1.0, -1.0], [3.0, 0.0, 0.0, 0.0]
    return m.finish(), [yv, xv]


@case
def softmax_other_axis():
    """A softmax over axis 1 as TensorFlow's converter writes it (TRANSPOSE, SOFTMAX over the
    last axis, the inverse TRANSPOSE; with beta), and a near miss whose second TRANSPOSE is
    not the inverse of the first."""
    rng = np.random.default_rng(42)
    m = ModelMaker()
    x = m.input([2, 5, 3, 4])
    perm = m.const(_i32([0, 2, 3, 1]))
    t = m.op("TRANSPOSE", [x, perm], [2, 3, 4, 5])
    sm = m.op("SOFTMAX", [t], [2, 3, 4, 5], options=dict(beta=0.7))
    back = m.op("TRANSPOSE", [sm, m.const(_i32([0, 3, 1, 2]))], [2, 5, 3, 4])
    t2 = m.op("TRANSPOSE", [x, perm], [2, 3, 4, 5])
    sm2 = m.op("SOFTMAX", [t2], [2, 3, 4, 5], options=dict(beta=1.0))
    other = m.op("TRANSPOSE", [sm2, m.const(_i32([0, 1, 3, 2]))], [2, 3, 5, 4])
    m.output(back, other)
    return m.finish(), [_f32(rng, 2, 5, 3, 4, scale=2.0)]


@case
def depth_and_space():
    rng = np.random.default_rng(26)
    m = ModelMaker()
    x = m.input([1, 4, 6, 3])
    s2d = m.op("SPACE_TO_DEPTH", [x], [1, 2, 3, 12], options=dict(blockSize=2))
    y = m.input([1, 2, 3, 8])
    d2s = m.op("DEPTH_TO_SPACE", [y], [1, 4, 6, 2], options=dict(blockSize=2))
    m.output(s2d, d2s)
    return m.finish(), [_f32(rng, 1, 4, 6, 3), _f32(rng, 1, 2, 3, 8)]


@case
def gathers():
    rng = np.random.default_rng(27)
    m = ModelMaker()
    x = m.input(S)
    ids = m.input([4], dtype=np.int32)
    g = m.op("GATHER", [x, m.const(_i32([[2, 0], [1, 1]]))], [2, 2, 2, 8], options=dict(axis=1, batchDims=0))
    gnd = m.op("GATHER_ND", [x, m.const(_i32([[1, 2], [0, 0], [1, 1]]))], [3, 8])
    table = m.const(_f32(rng, 6, 5))
    emb = m.op("EMBEDDING_LOOKUP", [ids, table], [4, 5])
    m.output(g, gnd, emb)
    return m.finish(), [_f32(rng, *S), _i32([5, 0, 3, 3])]


@case
def top_k_shared():
    """Three TOPK_V2 of one input (Keras: ``top_k`` and a sort of the same scores: one launch),
    the first's indices read by a CAST to float32 alone (written as floats), the third's by a
    CAST to float32 and a model output (kept int32); ties in the rows."""
    rng = np.random.default_rng(42)
    m = ModelMaker()
    x = m.input(S)
    v2, i2 = m.op("TOPK_V2", [x, m.const(_i32(2))], [[2, 3, 2]] * 2, out_dtype=[np.float32, np.int32], outputs=2)
    v8, i8 = m.op("TOPK_V2", [x, m.const(_i32(8))], [[2, 3, 8]] * 2, out_dtype=[np.float32, np.int32], outputs=2)
    v5, i5 = m.op("TOPK_V2", [x, m.const(_i32(5))], [[2, 3, 5]] * 2, out_dtype=[np.float32, np.int32], outputs=2)
    f2 = m.op("CAST", [i2], [2, 3, 2])
    f5 = m.op("CAST", [i5], [2, 3, 5])
    m.output(v2, f2, v8, i8, v5, f5, i5)
    return m.finish(), [np.round(_f32(rng, *S, scale=2.0), 0)]


@case
def top_k_long_rows():
    """TOPK_V2 of rows of 300 values, k = 300 and 7 in one launch: 300 rounds of 300 would pass
    llvmpipe's 65535 loop iterations per invocation, so each value finds its rank (ties in
    index order, as in rounds)."""
    rng = np.random.default_rng(43)
    m = ModelMaker()
    x = m.input([2, 300])
    v, i = m.op("TOPK_V2", [x, m.const(_i32(300))], [[2, 300]] * 2, out_dtype=[np.float32, np.int32], outputs=2)
    v7, i7 = m.op("TOPK_V2", [x, m.const(_i32(7))], [[2, 7]] * 2, out_dtype=[np.float32, np.int32], outputs=2)
    m.output(v, i, v7, i7)
    return m.finish(), [np.round(_f32(rng, 2, 300, scale=3.0), 0)]


@case
def gathers_batched():
    """GATHER with batch_dims on run-time params and indices (Keras' ``ops.take_along_axis``,
    ``tf.gather(batch_dims=)``): the indices' axis right after the batch (with and without
    dimensions after it), one between, two index dimensions, batch_dims 2;
    and BUCKETIZE (Keras' ``Discretization``, ``ops.digitize``): values on the boundaries, below
    and above them all, an int32 input, repeated boundaries."""
    rng = np.random.default_rng(28)
    m = ModelMaker()
    x = m.input(S)
    ids = m.input([2, 5], dtype=np.int32)
    ids3 = m.input([2, 3, 4], dtype=np.int32)
    outs = [m.op("GATHER", [x, ids], [2, 5, 8], options=dict(axis=1, batchDims=1)),
            m.op("GATHER", [x, ids3], [2, 3, 4], options=dict(axis=2, batchDims=2)),
            m.op("GATHER", [x, ids3], [2, 3, 3, 4],
                 options=dict(axis=2, batchDims=1)),
            m.op("GATHER", [m.op("RESHAPE", [x, m.const(_i32([2, 3, 4, 2]))], [2, 3, 4, 2]), ids], [2, 3, 5, 2],
                 options=dict(axis=2, batchDims=1))]
    bounds = [-1.0, -0.25, 0.0, 0.0, 0.5, 1.5]
    values = m.input([3, 7])
    outs.append(m.op("BUCKETIZE", [values], [3, 7], out_dtype=np.int32, options=dict(boundaries=bounds)))
    outs.append(m.op("BUCKETIZE", [ids], [2, 5], out_dtype=np.int32, options=dict(boundaries=[-1.0, 0.0, 2.0])))
    m.output(*outs)
    vals = _f32(rng, 3, 7)
    vals[0, :6] = bounds  # on the boundaries
    vals[1, :2] = [-5.0, 5.0]
    return m.finish(), [_f32(rng, *S), _i32([[0, 2, 1, 2, 0], [1, 0, 0, 2, 2]]),
                        rng.integers(0, 3, (2, 3, 4)).astype(np.int32), vals]


#: STRIDED_SLICE specifications on a [2, 5, 6, 4] input: (begin, end, strides, options, output shape).
STRIDED = [
    ([0, 1, 0, 0], [2, 4, 6, 4], [1, 1, 2, 1], {}, [2, 3, 3, 4]),
    ([1, -1, 5, 0], [0, 0, 0, 4], [1, -2, -2, 1], dict(beginMask=0b0001, endMask=0b0001), [2, 2, 3, 4]),
    ([0, 2, 0, 1], [0, 3, 0, 3], [1, 1, 1, 1], dict(shrinkAxisMask=0b0010, beginMask=0b0101, endMask=0b0101),
     [2, 6, 2]),
    ([0, 0, 1], [0, 0, 3], [1, 1, 1], dict(ellipsisMask=0b0001, newAxisMask=0b0010), [2, 5, 6, 1, 2]),
    ([1, 0, 3], [1, 0, 0], [1, 1, -1], dict(shrinkAxisMask=0b001, ellipsisMask=0b010), [5, 6, 3]),
    ([0, 1, 2, 0], [1, 3, 3, 4], [1, 1, 1, 2], dict(offset=True), [1, 3, 3, 2]),
    ([-1, 10, 0, -3], [-3, -10, 6, 100], [-1, -3, 4, 1], {}, [2, 2, 2, 3]),
]


@case
def strided_slices():
    rng = np.random.default_rng(28)
    m = ModelMaker()
    x = m.input([2, 5, 6, 4])
    outs = []
    for begin, end, strides, options, shape in STRIDED:
        outs.append(m.op("STRIDED_SLICE", [x, m.const(_i32(begin)), m.const(_i32(end)), m.const(_i32(strides))],
                         shape, options=options, version=4 if options.get("offset") else 1))
    m.output(*outs)
    return m.finish(), [_f32(rng, 2, 5, 6, 4)]


@case
def slices_splits_and_copies():
    rng = np.random.default_rng(29)
    m = ModelMaker()
    x = m.input(S)
    y = m.input(S)
    sl = m.op("SLICE", [x, m.const(_i32([1, 1, 2])), m.const(_i32([-1, 2, 5]))], [1, 2, 5])
    parts = m.op("SPLIT", [m.const(_i32(2)), x], [[2, 3, 4]] * 2, options=dict(numSplits=2), outputs=2)
    parts_v = m.op("SPLIT_V", [y, m.const(_i32([1, -1, 3])), m.const(_i32(2))], [[2, 3, 1], [2, 3, 4], [2, 3, 3]],
                   options=dict(numSplits=3), outputs=3)
    rows = m.op("UNPACK", [x], [S[1:], S[1:]], options=dict(num=2, axis=0), outputs=2)
    packed = m.op("PACK", [rows[1], rows[0], rows[1]], [3, 3, 8], options=dict(valuesCount=3, axis=0))
    tiled = m.op("TILE", [parts[0], m.const(_i32([1, 2, 3]))], [2, 6, 12])
    rev = m.op("REVERSE_V2", [y, m.const(_i32([1, 2]))], S)  # LiteRT: contiguous axes only
    bc = m.op("BROADCAST_TO", [parts_v[0], m.const(_i32([2, 2, 3, 4]))], [2, 2, 3, 4], version=2)
    m.output(sl, parts[1], parts_v[1], parts_v[2], packed, tiled, rev, bc)
    return m.finish(), [_f32(rng, *S), _f32(rng, *S)]


@case
def static_shape_arithmetic():
    """What the converter emits for ``tf.reshape(x, [tf.shape(x)[0], -1])`` and friends."""
    rng = np.random.default_rng(30)
    m = ModelMaker()
    x = m.input(S)
    shape = m.op("SHAPE", [x], [3], out_dtype=np.int32, options=dict(outType=INT32))
    batch = m.op("STRIDED_SLICE", [shape, m.const(_i32([0])), m.const(_i32([1])), m.const(_i32([1]))], [],
                 out_dtype=np.int32, options=dict(shrinkAxisMask=1))
    new_shape = m.op("PACK", [batch, m.const(np.int32(-1))], [2], out_dtype=np.int32,
                     options=dict(valuesCount=2, axis=0))
    flat = m.op("RESHAPE", [x, new_shape], [2, 24])
    filled = m.op("FILL", [m.const(_i32([2, 24])), m.const(np.float32(0.5))], [2, 24])
    zeros = m.op("ZEROS_LIKE", [flat], [2, 24])
    ramp = m.op("CAST", [m.op("RANGE", [m.const(np.int32(0)), m.const(np.int32(24)), m.const(np.int32(1))], [24],
                              out_dtype=np.int32)], [24],
                options=dict(inDataType=INT32, outDataType=FLOAT32))
    total = m.op("ADD", [m.op("ADD", [m.op("ADD", [flat, filled], [2, 24]), zeros], [2, 24]), ramp], [2, 24])
    coords = m.op("WHERE", [m.const(np.array([[True, False, True], [False, False, True]]))], [3, 2],
                  out_dtype=np.int64)
    m.output(total, coords)  # (an output known at load time)
    return m.finish(), [_f32(rng, *S)]


@case
def resizes():
    rng = np.random.default_rng(31)
    m = ModelMaker()
    x = m.input([1, 3, 5, 2])
    outs = []
    for align, half in ((False, False), (True, False), (False, True)):
        outs.append(m.op("RESIZE_NEAREST_NEIGHBOR", [x, m.const(_i32([7, 4]))], [1, 7, 4, 2],
                         options=dict(alignCorners=align, halfPixelCenters=half), version=3 if half else 1))
    for align, half in ((True, False), (False, False)):
        outs.append(m.op("RESIZE_BILINEAR", [x, m.const(_i32([6, 9]))], [1, 6, 9, 2],
                         options=dict(alignCorners=align, halfPixelCenters=half)))
    m.output(*outs)
    return m.finish(), [_f32(rng, 1, 3, 5, 2)]


@case
def mirror_pad_symmetric():
    rng = np.random.default_rng(32)
    m = ModelMaker()
    x = m.input([1, 3, 5, 2])
    y = m.op("MIRROR_PAD", [x, m.const(_i32([[0, 0], [2, 3], [1, 0], [0, 0]]))], [1, 8, 6, 2], options=dict(mode=1))
    m.output(y)
    return m.finish(), [_f32(rng, 1, 3, 5, 2)]


def _sparse_weights(rng, shape, block=None):
    w = _f32(rng, *shape)
    keep = rng.random(shape[:-1] + ((shape[-1] // block,) if block else (shape[-1],))) < 0.4
    if block:
        keep = np.repeat(keep, block, axis=-1)
    return np.where(keep, w, 0).astype(np.float32)


@case
def sparse_weights():
    rng = np.random.default_rng(33)
    m = ModelMaker()
    x = m.input([1, 5, 5, 4])
    w = m.op("DENSIFY", [m.sparse_const(_sparse_weights(rng, (6, 3, 3, 4)))], [6, 3, 3, 4])
    y = m.op("CONV_2D", [x, w, m.const(_f32(rng, 6))], [1, 5, 5, 6],
             options=dict(padding=0, strideH=1, strideW=1, dilationHFactor=1, dilationWFactor=1))
    w16 = m.op("DENSIFY", [m.sparse_const(_sparse_weights(rng, (8, 6), block=2).astype(np.float16))], [8, 6],
               out_dtype=np.float16)
    fc = m.op("FULLY_CONNECTED", [y, m.op("DEQUANTIZE", [w16], [8, 6]), -1], [1, 5, 5, 8],
              options=dict(keepNumDims=True))
    m.output(fc)
    return m.finish(), [_f32(rng, 1, 5, 5, 4)]


def int8_weights_model(with_dequantize: bool) -> tuple[bytes, list[np.ndarray]]:
    """A FULLY_CONNECTED and a CONV_2D whose weights are int8 with per-channel scales,
    used directly (LiteRT's hybrid kernels) or behind DEQUANTIZE (the float reference)."""
    rng = np.random.default_rng(34)
    m = ModelMaker()
    x = m.input([1, 4, 4, 3])
    wq = rng.integers(-127, 128, (5, 3, 3, 3)).astype(np.int8)
    scales = (rng.random(5) * 0.02 + 0.005).astype(np.float32)
    w = m.const(wq, quant=(scales.tolist(), [0] * 5, 0))
    if with_dequantize:
        w = m.op("DEQUANTIZE", [w], [5, 3, 3, 3])
    y = m.op("CONV_2D", [x, w, m.const(_f32(rng, 5))], [1, 4, 4, 5],
             options=dict(padding=0, strideH=1, strideW=1, dilationHFactor=1, dilationWFactor=1))
    fq = rng.integers(-127, 128, (7, 80)).astype(np.int8)
    fscales = (rng.random(7) * 0.01 + 0.002).astype(np.float32)
    f = m.const(fq, quant=(fscales.tolist(), [0] * 7, 0))
    if with_dequantize:
        f = m.op("DEQUANTIZE", [f], [7, 80])
    m.output(m.op("FULLY_CONNECTED", [y, f, -1], [1, 7]))
    return m.finish(), [_f32(rng, 1, 4, 4, 3)]


def while_model(static: bool) -> tuple[bytes, list[np.ndarray]]:
    """``for i in range(n): x = x * 0.5 + c`` as a WHILE with cond and body subgraphs; ``n``
    is a constant (static trip count) or a model input (not static)."""
    rng = np.random.default_rng(35)
    m = ModelMaker()
    x = m.input([2, 3])
    n = m.const(np.int32(3)) if static else m.input([], dtype=np.int32)
    i0 = m.const(np.int32(0))
    cond = m.subgraph()
    ci, cn, cx = m.input([], np.int32), m.input([], np.int32), m.input([2, 3])
    m.output(m.op("LESS", [ci, cn], [], out_dtype=np.bool_))
    body = m.subgraph()
    bi, bn, bx = m.input([], np.int32), m.input([], np.int32), m.input([2, 3])
    nxt = m.op("ADD", [bi, m.const(np.int32(1))], [], out_dtype=np.int32)
    y = m.op("ADD", [m.op("MUL", [bx, m.const(np.float32(0.5))], [2, 3]), m.const(_f32(rng, 2, 3))], [2, 3])
    m.output(nxt, bn, y)
    m.subgraph(0)
    outs = m.op("WHILE", [i0, n, x], [[], [], [2, 3]], options=dict(condSubgraphIndex=cond, bodySubgraphIndex=body),
                outputs=3)
    m.tensors[outs[0]].type = m.tensors[outs[1]].type = INT32
    m.output(outs[2])
    inputs = [_f32(rng, 2, 3)] if static else [_f32(rng, 2, 3), np.array(3, np.int32)]
    return m.finish(), inputs


@case
def while_static_trip_count():
    return while_model(static=True)


def lstm_model(peephole: bool) -> tuple[bytes, list[np.ndarray]]:
    """A time-major UNIDIRECTIONAL_SEQUENCE_LSTM (and without peepholes a merged
    BIDIRECTIONAL_SEQUENCE_LSTM), with the states as variable tensors."""
    rng = np.random.default_rng(37)
    m = ModelMaker()
    x = m.input([3, 2, 4])
    m.output(m.op("UNIDIRECTIONAL_SEQUENCE_LSTM", [x] + _lstm_inputs(m, rng, 6, 4, peephole) +
                  [m.variable([2, 6]), m.variable([2, 6]), -1, -1, -1, -1], [3, 2, 6],
                  options=dict(fusedActivationFunction=TANH, timeMajor=True)))
    if not peephole:
        bi_inputs = [x] + _lstm_inputs(m, rng, 6, 4, False) + _lstm_inputs(m, rng, 6, 4, False)
        bi_inputs += [m.variable([2, 6]) for _ in range(4)] + [-1] * 9
        m.output(m.op("BIDIRECTIONAL_SEQUENCE_LSTM", bi_inputs, [3, 2, 12],
                      options=dict(fusedActivationFunction=TANH, mergeOutputs=True, timeMajor=True)))
    return m.finish(), [_f32(rng, 3, 2, 4)]


@case
def lstm_time_major():
    return lstm_model(peephole=False)


def _lstm_inputs(m: ModelMaker, rng, units: int, features: int, peephole: bool, scale: float = 1.0) -> list[int]:
    w = [m.const(_f32(rng, units, features, scale=0.4)) for _ in range(4)]
    r = [m.const(_f32(rng, units, units, scale=0.4 * scale)) for _ in range(4)]
    p = [m.const(_f32(rng, units, scale=0.3)) if peephole else -1 for _ in range(3)]
    b = [m.const(_f32(rng, units, scale=0.2)) for _ in range(4)]
    return w + r + p + b + [-1, -1]


@case
def recurrent_layers():
    return _recurrent_layers(2, 4, 3, 5)


@case
def recurrent_layers_wide():
    """The layers of recurrent_layers with 160 units: past the sequence kernel, the per-step
    path (the projection as a gemm, step4 for the LSTMs and the plain RNN's new gate alone)."""
    return _recurrent_layers(2, 3, 6, 160, scale=0.08)


def _recurrent_layers(batch: int, steps: int, features: int, units: int, scale: float = 1.0):
    """A batch-major UNIDIRECTIONAL_SEQUENCE_LSTM, BIDIRECTIONAL_SEQUENCE_LSTM (outputs not
    merged) and UNIDIRECTIONAL_SEQUENCE_RNN on one input; ``scale`` multiplies the recurrent
    weights' spread (the wide layers' sums stay in the activations' working range)."""
    rng = np.random.default_rng(36)
    m = ModelMaker()
    x = m.input([batch, steps, features])
    lstm = m.op("UNIDIRECTIONAL_SEQUENCE_LSTM",
                [x] + _lstm_inputs(m, rng, units, features, peephole=False, scale=scale) +
                [m.variable([batch, units]), m.variable([batch, units]), -1, -1, -1, -1],
                [batch, steps, units], options=dict(fusedActivationFunction=TANH, timeMajor=False))
    bi_inputs = [x] + _lstm_inputs(m, rng, units, features, False, scale) + \
        _lstm_inputs(m, rng, units, features, False, scale)
    bi_inputs += [m.variable([batch, units]) for _ in range(4)] + [-1] * 9
    # (LiteRT's merged batch-major output differs between invocations: merged is tested time-major.)
    bi = m.op("BIDIRECTIONAL_SEQUENCE_LSTM", bi_inputs, [[batch, steps, units]] * 2,
              options=dict(fusedActivationFunction=TANH, mergeOutputs=False, timeMajor=False), outputs=2)
    rnn = m.op("UNIDIRECTIONAL_SEQUENCE_RNN",
               [x, m.const(_f32(rng, units, features, scale=0.5)), m.const(_f32(rng, units, units, scale=0.5 * scale)),
                m.const(_f32(rng, units, scale=0.2)), m.variable([batch, units])],
               [batch, steps, units], options=dict(fusedActivationFunction=TANH, timeMajor=False))
    m.output(lstm, *bi, rnn)
    return m.finish(), [_f32(rng, batch, steps, features)]


@case
def plain_rnn_variants():
    """UNIDIRECTIONAL_SEQUENCE_RNN time-major with RELU (a gru in plain-RNN form, 8 units: the
    vec4 sequence kernel) and with RELU6 (per-step kernels)."""
    rng = np.random.default_rng(37)
    m = ModelMaker()
    batch, steps, features, units = 2, 6, 3, 8
    x = m.input([steps, batch, features])

    def rnn(act, state):
        return m.op("UNIDIRECTIONAL_SEQUENCE_RNN",
                    [x, m.const(_f32(rng, units, features, scale=0.5)), m.const(_f32(rng, units, units, scale=0.5)),
                     m.const(_f32(rng, units, scale=0.2)), state],
                    [steps, batch, units], options=dict(fusedActivationFunction=act, timeMajor=True))

    m.output(rnn(RELU, m.variable([batch, units])), rnn(RELU6, m.variable([batch, units])))
    return m.finish(), [_f32(rng, steps, batch, features)]


def rfft2d_model(consumer: str = "COMPLEX_ABS") -> tuple[bytes, list[np.ndarray]]:
    """RFFT2D (a spectrogram's ``tf.signal.stft`` / ``tf.signal.rfft2d``) with fft_length equal to
    the input's last two sizes, cropping them and zero-padding them; its complex result read by
    COMPLEX_ABS (through a RESHAPE), REAL and IMAG. ``consumer`` other than COMPLEX_ABS: that
    operator reads the RFFT2D's result directly and the result is also a model output."""
    rng = np.random.default_rng(36)
    m = ModelMaker()
    x = m.input([2, 4, 16])
    c64 = np.complex64
    full = m.op("RFFT2D", [x, m.const(_i32([4, 16]))], [2, 4, 9], out_dtype=c64)
    if consumer != "COMPLEX_ABS":
        m.output(m.op(consumer, [full, full], [2, 4, 9]) if consumer == "ADD" else full)
        return m.finish(), [_f32(rng, 2, 4, 16)]
    cropped = m.op("RFFT2D", [x, m.const(_i32([1, 8]))], [2, 1, 5], out_dtype=c64)
    padded = m.op("RFFT2D", [x, m.const(_i32([8, 32]))], [2, 8, 17], out_dtype=c64)
    flat = m.op("RESHAPE", [padded, m.const(_i32([2, 136]))], [2, 136], out_dtype=c64)
    m.output(m.op("COMPLEX_ABS", [full], [2, 4, 9]), m.op("REAL", [cropped], [2, 1, 5]),
             m.op("IMAG", [cropped], [2, 1, 5]), m.op("COMPLEX_ABS", [flat], [2, 136]))
    return m.finish(), [_f32(rng, 2, 4, 16)]


OP_CASES["rfft2d"] = rfft2d_model


@case
def segments_and_update():
    """UNSORTED_SEGMENT_PROD / MAX / MIN and SEGMENT_SUM on run-time data (segment ids known at load
    time; an empty segment in PROD), DYNAMIC_UPDATE_SLICE with start indices that
    TFLite clamps so that the update fits."""
    rng = np.random.default_rng(37)
    m = ModelMaker()
    x, upd = m.input([5, 3, 2]), m.input([1, 2, 3])
    ids = m.const(_i32([2, 0, 2, 3, 0]))
    outs = [m.op("UNSORTED_SEGMENT_PROD", [x, ids, m.const(_i32([5]))], [5, 3, 2]),
            m.op("UNSORTED_SEGMENT_MAX", [x, ids, m.const(_i32([4]))], [4, 3, 2]),
            m.op("UNSORTED_SEGMENT_MIN", [x, m.const(_i32([1, 0, 1, 0, 0])), m.const(_i32([2]))], [2, 3, 2]),
            m.op("SEGMENT_SUM", [x, m.const(_i32([0, 0, 1, 2, 2]))], [3, 3, 2])]
    base = m.op("RESHAPE", [x, m.const(_i32([2, 3, 5]))], [2, 3, 5])
    outs.append(m.op("DYNAMIC_UPDATE_SLICE", [base, upd, m.const(_i32([1, 2, 7]))], [2, 3, 5]))
    m.output(*outs)
    return m.finish(), [_f32(rng, 5, 3, 2), _f32(rng, 1, 2, 3)]


def segments_model(ids, segments: int, folded: bool = False) -> tuple[bytes, list[np.ndarray]]:
    """UNSORTED_SEGMENT_SUM / PROD / MAX / MIN of [6, 2] data over the segment ``ids`` (known at load
    time) into ``segments`` segments; the data a model input, or with ``folded`` a constant (the
    reductions folded at load time; the input then only passes through)."""
    rng = np.random.default_rng(41)
    m = ModelMaker()
    x = m.input([6, 2])
    data = m.const(_f32(rng, 6, 2)) if folded else x
    outs = [m.op(f"UNSORTED_SEGMENT_{kind}", [data, m.const(_i32(ids)), m.const(np.int32(segments))], [segments, 2])
            for kind in ("SUM", "PROD", "MAX", "MIN")]
    m.output(*outs, *([x] if folded else []))
    return m.finish(), [_f32(rng, 6, 2)]


# negative ids are dropped; segment 3 is empty
OP_CASES["segments_negative_ids"] = lambda: segments_model([0, -1, 2, 0, -3, 2], 4)
OP_CASES["segments_negative_ids_folded"] = lambda: segments_model([0, -1, 2, 0, -3, 2], 4, folded=True)


def update_slice_constants() -> tuple[bytes, list[np.ndarray]]:
    """DYNAMIC_UPDATE_SLICE whose operand, update and start indices are all constants (folded at
    load time, the start clamped so that the update fits), float and int32, each read by an
    operator on the model's input."""
    rng = np.random.default_rng(42)
    m = ModelMaker()
    x, n = m.input([2, 3, 4]), m.input([4], dtype=np.int32)
    f = m.op("DYNAMIC_UPDATE_SLICE", [m.const(_f32(rng, 2, 3, 4)), m.const(_f32(rng, 1, 2, 2)),
                                       m.const(_i32([1, 5, -1]))], [2, 3, 4])
    i = m.op("DYNAMIC_UPDATE_SLICE", [m.const(_i32([1, 2, 3, 4])), m.const(_i32([7, 8])), m.const(_i32([1]))], [4],
             out_dtype=np.int32)
    m.output(m.op("ADD", [x, f], [2, 3, 4]), m.op("ADD", [n, i], [4], out_dtype=np.int32))
    return m.finish(), [_f32(rng, 2, 3, 4), _i32([5, -6, 7, 0])]


OP_CASES["update_slice_constants"] = update_slice_constants


@case
def matrix_diagonals():
    """MATRIX_DIAG, MATRIX_SET_DIAG on wide and tall matrices (``tf.linalg.diag``, ``set_diag``),
    and a model output that is the input passed through (Keras' linear activation)."""
    rng = np.random.default_rng(38)
    m = ModelMaker()
    x, wide, tall = m.input([2, 3]), m.input([2, 3, 5]), m.input([2, 5, 3])
    outs = [m.op("MATRIX_DIAG", [x], [2, 3, 3]),
            m.op("MATRIX_SET_DIAG", [wide, x], [2, 3, 5]), m.op("MATRIX_SET_DIAG", [tall, x], [2, 5, 3])]
    m.output(*outs, x)
    return m.finish(), [_f32(rng, 2, 3), _f32(rng, 2, 3, 5), _f32(rng, 2, 5, 3)]


def if_model(static: bool) -> tuple[bytes, list[np.ndarray]]:
    """``keras.ops.cond``: an IF whose condition is the sign of the input's sum (run time) or a
    constant (load time); the branches ``x * 2 + c`` and ``-x``, each also returning ``x + 1`` and
    an int32 value known at load time (different in each branch)."""
    rng = np.random.default_rng(39)
    m = ModelMaker()
    x = m.input([2, 3])
    then = m.subgraph()
    tx = m.input([2, 3])
    m.output(m.op("ADD", [m.op("MUL", [tx, m.const(np.float32(2.0))], [2, 3]), m.const(_f32(rng, 2, 3))], [2, 3]),
             m.op("ADD", [tx, m.const(np.float32(1.0))], [2, 3]),
             m.op("ADD", [m.const(_i32([1, 2])), m.const(_i32([10, 10]))], [2], out_dtype=np.int32))
    other = m.subgraph()
    ex = m.input([2, 3])
    m.output(m.op("NEG", [ex], [2, 3]), m.op("ADD", [ex, m.const(np.float32(1.0))], [2, 3]),
             m.op("ADD", [m.const(_i32([3, 4])), m.const(_i32([10, 10]))], [2], out_dtype=np.int32))
    m.subgraph(0)
    if static:
        cond = m.const(np.bool_(False))
    else:
        total = m.op("SUM", [x, m.const(_i32([0, 1]))], [])
        cond = m.op("GREATER", [total, m.const(np.float32(0.0))], [], out_dtype=np.bool_)
    outs = m.op("IF", [cond, x], [[2, 3], [2, 3], [2]], out_dtype=[np.float32, np.float32, np.int32],
                options=dict(thenSubgraphIndex=then, elseSubgraphIndex=other), outputs=3)
    m.output(*outs)
    return m.finish(), [_f32(rng, 2, 3)]


OP_CASES["if_static"] = lambda: if_model(static=True)
OP_CASES["if_run_time"] = lambda: if_model(static=False)


def if_known_branches_model() -> tuple[bytes, list[np.ndarray]]:
    """An IF under a run-time condition whose branches give BOOL, int8 and uint8 values known at
    load time (each becomes a constant operand of its type, where() picks between them)."""
    rng = np.random.default_rng(40)
    m = ModelMaker()
    x = m.input([2, 3])
    branches = []
    for a, b in ((1, 2), (3, -1)):
        branches.append(m.subgraph())
        m.input([2, 3])
        m.output(m.op("LESS", [m.const(_i32([a, b])), m.const(_i32([2, 2]))], [2], out_dtype=np.bool_),
                 m.op("NEG", [m.const(np.int8([a, -b]))], [2], out_dtype=np.int8),
                 m.op("MAXIMUM", [m.const(np.uint8([a, b % 256])), m.const(np.uint8([2, 2]))], [2],
                      out_dtype=np.uint8))
    m.subgraph(0)
    total = m.op("SUM", [x, m.const(_i32([0, 1]))], [])
    cond = m.op("GREATER", [total, m.const(np.float32(0.0))], [], out_dtype=np.bool_)
    outs = m.op("IF", [cond, x], [[2], [2], [2]], out_dtype=[np.bool_, np.int8, np.uint8],
                options=dict(thenSubgraphIndex=branches[0], elseSubgraphIndex=branches[1]), outputs=3)
    m.output(*outs)
    return m.finish(), [_f32(rng, 2, 3)]


OP_CASES["if_run_time_known_branches"] = if_known_branches_model
