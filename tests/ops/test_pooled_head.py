"""``pooled_head`` (the compiler's fuse_pooled_head): a one-row product of a global average pool as
one ``matmul/matvec.wgsl`` launch taking the pool's mean as it loads A. On the GPU against float64
NumPy: the mean of an image (float32 and float16, k steps not a multiple of the subgroup's lanes),
of a pointwise conv's partial sums (fuse_pool_partials) and of a depthwise conv's (fuse_conv_pool,
heads on the pooled vector), a 1x1 conv with an activation on the pooled pixel, and the near miss
of a pool with another reader.

Tolerance: ``check`` of test_tile.py with the reduction the pool's rows and K together (the
mean's float32 sum, then the product's): ``4 * (rows + K) * 2**-24 * (mean(|X|) @ |W| + |c|)``
plus the output's rounding (an f16 ulp for float16).
"""

from __future__ import annotations

import numpy as np
import pytest

from test_tile import check, data

import webnn_gpu as webnn
from webnn_gpu._lower import KernelStep


def _lane_loop(ctx) -> bool:
    """Whether the rule fires on this adapter (the "lane-loop" profile with subgroups)."""
    return ctx._tuning == "lane-loop" and ctx._subgroup > 0


def _run(ctx, build, x):
    """Build ``build(builder, x_operand) -> {name: operand}``, run it on ``x``: (outputs, kernel steps)."""
    b = webnn.MLGraphBuilder(ctx)
    xi = b.input("x", {"data_type": webnn._dtypes.from_numpy(x.dtype), "shape": list(x.shape)})
    graph = b.build(build(b, xi))
    steps = [s for s in graph._steps if isinstance(s, KernelStep)]
    got = ctx.compute(graph, {"x": x})
    graph.destroy()
    return got, steps


def _fc(b, v, w, c):
    """A TFLite fully connected layer: gemm by a constant [N, K] matrix, transposed, and a bias."""
    return b.gemm(v, b.constant(w), c=b.constant(c), b_transpose=True)


@pytest.mark.parametrize("dtype, hw, C, N", [(np.float32, (7, 7), 1280, 10), (np.float16, (7, 7), 1280, 10),
                                             (np.float32, (5, 5), 1028, 21)])
def test_the_mean_of_an_image_then_a_fully_connected_layer(ctx, rng, dtype, hw, C, N):
    """1028 channels: 257 vec4 k steps, not a multiple of the 8 lanes (the last ones select zeros)."""
    x = data(rng, (1, *hw, C), dtype)
    w, c = data(rng, (N, C), dtype), data(rng, (N,), dtype)
    got, steps = _run(ctx, lambda b, xi: {"y": _fc(b, b.reshape(b.average_pool2d(xi, layout="nhwc"), [1, C]), w, c)},
                      x)
    rows = hw[0] * hw[1]
    if _lane_loop(ctx):
        assert [s.template for s in steps] == ["matmul/matvec.wgsl"] and f"mean of {rows}" in steps[0].note
    X = x.astype(np.float64).reshape(rows, C)
    W, Cb = w.astype(np.float64).T, c.astype(np.float64)
    check(got["y"], X.mean(0, keepdims=True) @ W + Cb, np.abs(X).mean(0, keepdims=True) @ np.abs(W) + np.abs(Cb),
          rows + C + 1, dtype, "pooled fc")


def test_a_1x1_conv_with_an_activation_on_the_pooled_pixel(ctx, rng):
    x = data(rng, (1, 4, 4, 576))
    f, bias = data(rng, (40, 1, 1, 576)), data(rng, (40,))

    def build(b, xi):
        y = b.conv2d(b.average_pool2d(xi, layout="nhwc"), b.constant(f), bias=b.constant(bias), input_layout="nhwc",
                     filter_layout="ohwi")
        return {"y": b.relu(y)}

    got, steps = _run(ctx, build, x)
    if _lane_loop(ctx):
        assert [s.template for s in steps] == ["matmul/matvec.wgsl"] and "mean of 16" in steps[0].note
    X = x.astype(np.float64).reshape(16, 576)
    W = f.astype(np.float64).reshape(40, 576).T
    pre = X.mean(0) @ W + bias
    check(got["y"].reshape(40), np.maximum(pre, 0), np.abs(X).mean(0) @ np.abs(W) + np.abs(bias), 16 + 577,
          np.float32, "pooled conv")


def test_the_partial_sums_of_a_pointwise_conv(ctx, rng):
    """conv 1x1 (160 -> 1280, the tile kernel's partial sums) -> pool -> fully connected: the pool's
    launch is gone, the product reads the partials."""
    x = data(rng, (1, 4, 4, 160))
    f = data(rng, (1280, 1, 1, 160))
    w, c = data(rng, (10, 1280)), data(rng, (10,))

    def build(b, xi):
        h = b.conv2d(xi, b.constant(f), input_layout="nhwc", filter_layout="ohwi")
        return {"y": _fc(b, b.reshape(b.average_pool2d(h, layout="nhwc"), [1, 1280]), w, c)}

    got, steps = _run(ctx, build, x)
    if _lane_loop(ctx):
        assert [s.template for s in steps] == ["matmul/tile.wgsl", "matmul/matvec.wgsl"]
        assert "mean of" in steps[1].note
    H = x.astype(np.float64).reshape(16, 160) @ f.astype(np.float64).reshape(1280, 160).T
    W = w.astype(np.float64).T
    absH = np.abs(x.astype(np.float64)).reshape(16, 160) @ np.abs(f.astype(np.float64)).reshape(1280, 160).T
    check(got["y"], H.mean(0, keepdims=True) @ W + c, absH.mean(0, keepdims=True) @ np.abs(W) + np.abs(c),
          16 + 160 + 1281, np.float32, "partials fc")


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_heads_on_a_depthwise_convs_pooled_output(ctx, rng, dtype):
    """hand_landmark's form: a depthwise conv whose output is also read (a graph output here) and
    pooled (fuse_conv_pool), heads on the pooled vector (fuse_heads): the conv writes its partial
    sums, one launch takes their mean and the heads."""
    x = data(rng, (1, 7, 7, 672), dtype)
    f = data(rng, (1, 3, 3, 672), dtype)
    ws = [data(rng, (n, 672), dtype) for n in (1, 63)]
    cs = [data(rng, (n,), dtype) for n in (1, 63)]

    def build(b, xi):
        d = b.conv2d(xi, b.constant(f), padding=[1, 1, 1, 1], groups=672, input_layout="nhwc", filter_layout="ihwo")
        v = b.reshape(b.average_pool2d(d, layout="nhwc"), [1, 672])
        return {"d": d, "y0": b.sigmoid(_fc(b, v, ws[0], cs[0])), "y1": _fc(b, v, ws[1], cs[1])}

    got, steps = _run(ctx, build, x)
    if _lane_loop(ctx):
        assert [s.template for s in steps] == ["conv/depthwise.wgsl", "matmul/matvec.wgsl"]
        assert "heads mean of" in steps[1].note
    D = got["d"].astype(np.float64).reshape(49, 672)  # the conv itself is tested elsewhere
    for j in range(2):
        W, Cb = ws[j].astype(np.float64).T, cs[j].astype(np.float64)
        pre = D.mean(0, keepdims=True) @ W + Cb
        ref = 1 / (1 + np.exp(-pre)) if j == 0 else pre
        check(got[f"y{j}"], ref, np.abs(D).mean(0, keepdims=True) @ np.abs(W) + np.abs(Cb), 49 + 673, dtype,
              f"head {j}")


def test_a_pool_read_by_another_node_stays(ctx, rng):
    x = data(rng, (1, 7, 7, 1280))
    w, c = data(rng, (10, 1280)), data(rng, (10,))

    def build(b, xi):
        p = b.average_pool2d(xi, layout="nhwc")
        return {"y": _fc(b, b.reshape(p, [1, 1280]), w, c), "p": p}

    got, steps = _run(ctx, build, x)
    assert len(steps) >= 2 and all("mean of" not in (s.note or "") for s in steps)
    X = x.astype(np.float64).reshape(49, 1280)
    check(got["y"], X.mean(0, keepdims=True) @ w.T.astype(np.float64) + c,
          np.abs(X).mean(0, keepdims=True) @ np.abs(w.T.astype(np.float64)) + np.abs(c), 49 + 1281, np.float32, "fc")


@pytest.mark.parametrize("form", ["shared", "lanes"])
def test_the_means_per_workgroup_or_per_subgroup(ctx, rng, monkeypatch, form):
    """Both forms of the prologue (``WEBNN_GPU_FORCE_MATVEC_MEAN``; any number of loads forced):
    the workgroup's invocations into workgroup memory, or each lane for its own k steps; 257 k
    steps (not a multiple of the lanes: zeros past them) and 3 column groups."""
    monkeypatch.setenv("WEBNN_GPU_FORCE_MATVEC_MEAN", form)
    monkeypatch.setenv("WEBNN_GPU_FORCE_POOLED_HEAD", "on")
    x = data(rng, (1, 5, 5, 1028))
    w, c = data(rng, (100, 1028)), data(rng, (100,))
    got, steps = _run(ctx, lambda b, xi: {"y": _fc(b, b.reshape(b.average_pool2d(xi, layout="nhwc"), [1, 1028]), w, c)},
                      x)
    if _lane_loop(ctx):
        assert [s.template for s in steps] == ["matmul/matvec.wgsl"] and "mean of 25" in steps[0].note
        assert ("var<workgroup> amean" in steps[0].wgsl) == (form == "shared")
    X = x.astype(np.float64).reshape(25, 1028)
    W = w.astype(np.float64).T
    check(got["y"], X.mean(0, keepdims=True) @ W + c, np.abs(X).mean(0, keepdims=True) @ np.abs(W) + np.abs(c),
          25 + 1029, np.float32, f"pooled fc, means {form}")


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_a_classifier_with_its_softmax_in_one_launch(ctx, rng, dtype):
    """pool -> fully connected -> softmax (a Keras classifier's end): one launch, one workgroup of
    the product's column groups, the logits in workgroup memory (not rounded to float16)."""
    x = data(rng, (1, 2, 4, 1280), dtype)
    w, c = data(rng, (10, 1280), dtype), data(rng, (10,), dtype)

    def build(b, xi):
        return {"y": b.softmax(_fc(b, b.reshape(b.average_pool2d(xi, layout="nhwc"), [1, 1280]), w, c), axis=1)}

    got, steps = _run(ctx, build, x)
    if _lane_loop(ctx):
        assert [s.template for s in steps] == ["matmul/matvec.wgsl"] and "mean of 8" in steps[0].note
        assert "var<workgroup> logits" in steps[0].wgsl
    X = x.astype(np.float64).reshape(8, 1280)
    W, Cb = w.astype(np.float64).T, c.astype(np.float64)
    z = X.mean(0, keepdims=True) @ W + Cb
    e = np.exp(z - z.max())
    ref = e / e.sum()
    # the logits' error (the f32 bound of check) moves each probability by at most 2 p max|dz|
    dz = 4 * (8 + 1281) * 2.0**-24 * (np.abs(X).mean(0, keepdims=True) @ np.abs(W) + np.abs(Cb)).max()
    tol = 2 * ref * dz + (2.0**-10 * ref if dtype == np.float16 else 2.0**-21 * ref) + 1e-7
    assert np.all(np.abs(got["y"].astype(np.float64) - ref) <= tol), np.abs(got["y"] - ref).max()


@pytest.mark.parametrize("hw, K, N, softmax, forced", [((1, 1), 8192, 24, True, None), ((1, 2), 8192, 10, True, None),
                                                       ((1, 1), 8196, 64, False, "on")])
def test_means_past_the_workgroup_memory_are_taken_per_subgroup(ctx, rng, monkeypatch, hw, K, N, softmax, forced):
    """8192 and more channels: their means as vec4s of float32 (128 KiB and more) do not fit a
    workgroup's memory (32 KiB on lavapipe), beside the softmax's logits or alone: the launch
    takes them per subgroup (or the rule keeps the pool), and the graph builds and computes the
    float64 result."""
    if forced:
        monkeypatch.setenv("WEBNN_GPU_FORCE_POOLED_HEAD", forced)
    x = data(rng, (1, *hw, K))
    w, c = data(rng, (N, K)), data(rng, (N,))

    def build(b, xi):
        y = _fc(b, b.reshape(b.average_pool2d(xi, layout="nhwc"), [1, K]), w, c)
        return {"y": b.softmax(y, axis=1) if softmax else y}

    got, steps = _run(ctx, build, x)
    assert not any("var<workgroup> amean" in s.wgsl for s in steps)
    rows = hw[0] * hw[1]
    X = x.astype(np.float64).reshape(rows, K)
    W = w.astype(np.float64).T
    z = X.mean(0, keepdims=True) @ W + c
    bound = np.abs(X).mean(0, keepdims=True) @ np.abs(W) + np.abs(c)
    if not softmax:
        check(got["y"], z, bound, rows + K + 1, np.float32, "pooled fc past the workgroup memory")
        return
    e = np.exp(z - z.max())
    ref = e / e.sum()
    dz = 4 * (rows + K + 1) * 2.0**-24 * bound.max()
    assert np.all(np.abs(got["y"].astype(np.float64) - ref) <= 2 * ref * dz + 2.0**-21 * ref + 1e-7)


def test_a_softmax_on_another_axis_or_read_twice_stays_apart(ctx, rng):
    x = data(rng, (1, 2, 4, 1280))
    w, c = data(rng, (10, 1280)), data(rng, (10,))

    def build(b, xi):
        y = _fc(b, b.reshape(b.average_pool2d(xi, layout="nhwc"), [1, 1280]), w, c)
        return {"s": b.softmax(y, axis=1), "y": y}

    got, steps = _run(ctx, build, x)
    if _lane_loop(ctx):
        assert [s.template for s in steps] == ["matmul/matvec.wgsl", "norm/softmax.wgsl"]
    X = x.astype(np.float64).reshape(8, 1280)
    z = X.mean(0, keepdims=True) @ w.T.astype(np.float64) + c
    e = np.exp(z - z.max())
    np.testing.assert_allclose(got["s"], e / e.sum(), rtol=1e-5, atol=1e-7)
