"""Sibling convs (the compiler's fuse_siblings): NHWC conv2d of one input by different constant
filters as one ``matmul/tile.wgsl`` launch whose column blocks are stored into each product's
own output (the tile kernel's ``split`` store). On the GPU against float64 NumPy: a detector's
heads (2 + 32 on 16x16x88, 6 + 96 on 8x8x96, reshaped and concatenated into the graph's
outputs), odd widths (1 + 3, 5 + 7: scalar stores of a block's first columns), three siblings
with PReLU slopes of their own and one without a bias, 3x3 windows with padding and stride 2
(the implicit GEMM), windows over a few pixels (which matvec would gather one launch each),
float16, a sibling's output that is also a graph output and read by another op; near misses
(different strides, a computed filter) run as separate launches, also right.

Tolerance: ``check`` of test_tile.py, the f32 accumulation bound ``4 * K * 2**-24 * (|A| @ |B|)``
plus the output's rounding (an f16 ulp for float16).
"""

from __future__ import annotations

import numpy as np
import pytest

from test_tile import check, data

import webnn_gpu as webnn
from webnn_gpu._lower import KernelStep
from references import conv2d_nhwc


def _ref(x, w, bias, pad, stride):
    """float64 NHWC conv2d of ``x`` by OHWI ``w`` (+ bias) and its bound's |x| * |w| (+ |bias|)."""
    y = conv2d_nhwc(x, w, bias, pad, stride)
    a = conv2d_nhwc(np.abs(x), np.abs(w), None if bias is None else np.abs(bias), pad, stride)
    return y, a


def _run(ctx, rng, shape, outs, *, k=1, pad=0, stride=1, dtype=np.float32, prelu=False, no_bias=(),
         strides=None, extra=False, concat=False):
    """Build the sibling convs (``outs`` output channels each) on one input, run them; the
    outputs, the graph's kernel steps, and the float64 references with their bounds."""
    x = data(rng, shape, dtype)
    ws = [data(rng, (o, k, k, shape[3]), dtype) for o in outs]
    bs = [None if j in no_bias else data(rng, (o,), dtype) for j, o in enumerate(outs)]
    slopes = [rng.uniform(0, 1, o).astype(dtype) for o in outs]
    b = webnn.MLGraphBuilder(ctx)
    xi = b.input("x", {"data_type": webnn._dtypes.from_numpy(x.dtype), "shape": list(shape)})
    ys, refs = {}, {}
    for j, (w, bias) in enumerate(zip(ws, bs)):
        s = strides[j] if strides else stride
        y = b.conv2d(xi, b.constant(w), bias=None if bias is None else b.constant(bias), padding=[pad] * 4,
                     strides=[s, s], input_layout="nhwc", filter_layout="ohwi")
        ref, absref = _ref(x, w, bias, pad, s)
        if prelu:
            y = b.prelu(y, b.constant(slopes[j]))
            ref = np.where(ref >= 0, ref, ref * slopes[j].astype(np.float64))
        ys[f"y{j}"], refs[f"y{j}"] = y, (ref, absref)
    if extra:  # the first sibling's output also read by another op
        ys["e"] = b.relu(ys["y0"])
        refs["e"] = (np.maximum(refs["y0"][0], 0), refs["y0"][1])
    if concat:  # a detector's outputs: [1, pixels, k] reshapes of the two maps, concatenated
        flat = {n: b.reshape(y, [1, int(np.prod(y.shape)), 1]) for n, y in ys.items()}
        ys = {"cat": b.concat(list(flat.values()), 1)}
        refs = {"cat": tuple(np.concatenate([r[i].reshape(1, -1, 1) for r in refs.values()], 1) for i in (0, 1))}
    graph = b.build(ys)
    steps = [s for s in graph._steps if isinstance(s, KernelStep)]
    got = ctx.compute(graph, {"x": x})
    graph.destroy()
    return got, steps, refs, k * k * shape[3]


def _merged(steps) -> list:
    return [s for s in steps if s.node is not None and s.node.op == "siblings"]


@pytest.mark.parametrize("shape,outs", [((1, 16, 16, 88), (2, 32)), ((1, 8, 8, 96), (6, 96)),
                                        ((1, 5, 7, 12), (1, 3)), ((1, 6, 6, 20), (5, 7))])
def test_heads_on_one_map_take_one_launch(ctx, rng, shape, outs):
    got, steps, refs, K = _run(ctx, rng, shape, outs)
    assert len(steps) == 1 and len(_merged(steps)) == 1 and steps[0].template == "matmul/tile.wgsl"
    for n, (ref, absref) in refs.items():
        check(got[n], ref, absref, K, np.float32, n)


def test_three_siblings_with_prelu_one_without_bias_and_an_extra_reader(ctx, rng):
    got, steps, refs, K = _run(ctx, rng, (1, 12, 12, 32), (6, 18, 12), prelu=True, no_bias=(1,), extra=True)
    assert len(_merged(steps)) == 1
    for n, (ref, absref) in refs.items():
        check(got[n], ref, absref, K, np.float32, n)


def test_windows_with_padding_and_stride_and_float16(ctx, rng):
    if "float16" not in ctx.supported_data_types:
        pytest.fail("float16 is not supported on this adapter")
    for dtype in (np.float32, np.float16):
        got, steps, refs, K = _run(ctx, rng, (1, 9, 11, 16), (3, 8), k=3, pad=1, stride=2, dtype=dtype)
        assert len(_merged(steps)) == 1
        for n, (ref, absref) in refs.items():
            check(got[n], ref, absref, K, dtype, f"{n} {np.dtype(dtype).name}")


@pytest.mark.parametrize("C", [128, 126])
def test_windows_over_a_few_pixels_take_one_launch(ctx, rng, C):
    """3x3 convs with padding 1 on 2 x 2 pixels (4 rows; 9 C x 140 filter values, past MATVEC_MIN_KN_TALL): matvec would
    gather each one's windows alone where C is a multiple of 4 (fuse_heads merges no gathered
    windows), so they stay one tile launch; C = 126 (no gathered windows) likewise."""
    got, steps, refs, K = _run(ctx, rng, (1, 2, 2, C), (140, 140), k=3, pad=1)
    assert len(steps) == 1 and len(_merged(steps)) == 1 and steps[0].template == "matmul/tile.wgsl"
    for n, (ref, absref) in refs.items():
        check(got[n], ref, absref, K, np.float32, n)


def test_heads_concatenated_into_the_output(ctx, rng):
    """A detector's two heads reshaped to [1, pixels * k, 1] and concatenated (written in place)."""
    got, steps, refs, K = _run(ctx, rng, (1, 16, 16, 24), (2, 32), concat=True)
    assert len(_merged(steps)) == 1
    check(got["cat"], *refs["cat"], K, np.float32, "concat")


def test_near_misses_run_apart_and_right(ctx, rng):
    got, steps, refs, K = _run(ctx, rng, (1, 8, 8, 16), (4, 8), strides=[1, 2])
    assert not _merged(steps) and len(steps) == 2
    for n, (ref, absref) in refs.items():
        check(got[n], ref, absref, K, np.float32, n)
    x, w1, w2 = data(rng, (1, 8, 8, 16)), data(rng, (4, 1, 1, 16)), data(rng, (8, 1, 1, 16))
    b = webnn.MLGraphBuilder(ctx)
    xi = b.input("x", {"data_type": "float32", "shape": [1, 8, 8, 16]})
    wi = b.input("w", {"data_type": "float32", "shape": [4, 1, 1, 16]})
    graph = b.build({"a": b.conv2d(xi, wi, input_layout="nhwc", filter_layout="ohwi"),
                     "b": b.conv2d(xi, b.constant(w2), input_layout="nhwc", filter_layout="ohwi")})
    steps = [s for s in graph._steps if isinstance(s, KernelStep)]
    got = ctx.compute(graph, {"x": x, "w": w1})
    graph.destroy()
    assert not _merged(steps), "a computed filter"
    for n, w in (("a", w1), ("b", w2)):
        check(got[n], *_ref(x, w, None, 0, 1), 16, np.float32, n)


@pytest.mark.parametrize("rows,K,outs", [((20,), 48, (5, 7)), ((2, 17), 33, (1, 3, 24)), ((4,), 40, (5, 7))])
def test_dense_layers_on_one_input_take_one_launch(ctx, rng, rows, K, outs):
    """Dense layers on the same rows (gemm by W^T with a bias, a matmul without one, a matmul
    and a bias add), each through a relu: one launch; odd K (scalar loads of A), odd widths, a
    leading axis; 4 rows of a small B (matvec's only on a large one: linalg.matvec_plan)."""
    x = data(rng, (*rows, K))
    ws = [data(rng, (o, K)) for o in outs]
    cs = [data(rng, (o,)) for o in outs]
    b = webnn.MLGraphBuilder(ctx)
    xi = b.input("x", {"data_type": "float32", "shape": list(x.shape)})
    ys = {}
    for j, (w, c) in enumerate(zip(ws, cs)):
        wt = b.constant(np.ascontiguousarray(w.T))
        nob = j == 1 and len(rows) == 1
        if nob:  # no bias: a gemm's c and no c merge (a matmul's bias add and none do not: other steps)
            y = b.matmul(xi, wt)
        elif len(rows) == 1:
            y = b.gemm(xi, b.constant(w), c=b.constant(c), b_transpose=True)
        else:  # a bias add the compiler makes an epilogue step
            y = b.add(b.matmul(xi, wt), b.constant(c))
        ys[f"y{j}"] = b.relu(y)
    graph = b.build(ys)
    steps = [s for s in graph._steps if isinstance(s, KernelStep)]
    got = ctx.compute(graph, {"x": x})
    graph.destroy()
    assert len(steps) == 1 and len(_merged(steps)) == 1
    X = x.astype(np.float64)
    for j, (w, c) in enumerate(zip(ws, cs)):
        W = w.astype(np.float64).T
        pre = X @ W + (0 if j == 1 and len(rows) == 1 else c.astype(np.float64))
        check(got[f"y{j}"], np.maximum(pre, 0), np.abs(X) @ np.abs(W) + np.abs(c), K + 1, np.float32, f"y{j}")


def test_float16_gemms_with_beta_keep_beta_c_in_float32(ctx):
    """float16 gemms of one input with beta 2 and c = 40000: beta * c = 80000 is past float16's
    largest value, while x @ w + beta * c = 30000 is not. The products run apart (the kernel
    scales c in float32), and each result is finite and right (one float16 ulp at 30000: 16)."""
    x = np.ones((8, 16), np.float16)
    w = np.full((16, 4), -3125, np.float16)  # x @ w = -50000
    c = np.full((4,), 40000, np.float16)
    b = webnn.MLGraphBuilder(ctx)
    xi = b.input("x", {"data_type": "float16", "shape": [8, 16]})
    graph = b.build({f"y{j}": b.gemm(xi, b.constant(w), c=b.constant(c), beta=2.0) for j in range(2)})
    got = ctx.compute(graph, {"x": x})
    graph.destroy()
    for j in range(2):
        np.testing.assert_allclose(got[f"y{j}"].astype(np.float64), 30000.0, rtol=0, atol=16)
