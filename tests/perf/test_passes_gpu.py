"""The compiler passes on the GPU: fused graphs give the unfused results (NumPy float64
references) in fewer kernels."""

from __future__ import annotations

import numpy as np
import pytest

import webnn_gpu as webnn
from webnn_gpu import compiler
from webnn_gpu.compiler import Rule, Stage, driver
from webnn_gpu.compiler.rules import epilogue as _epilogue_rule

from helpers import kernel_templates as _templates
from helpers import run_graph
from references import conv2d_nhwc, ref_conv2d, ref_resample


def _conv_nhwc(x, w_ohwi, bias, pad):
    """Plain NumPy float64 conv2d, NHWC input, OHWI filter, stride 1."""
    return conv2d_nhwc(x, w_ohwi, bias, pad)


def _hswish(x):
    return x * np.clip(x + 3, 0, 6) / 6


def _sigmoid(x):
    with np.errstate(over="ignore", under="ignore"):
        return 1 / (1 + np.exp(-x))


@pytest.mark.parametrize("dt,tol", [("float32", 2e-5), ("float16", 2e-2)])
def test_conv_with_bias_hard_swish_sequence_and_residual(ctx, rng, dt, tol):
    npdt = np.float32 if dt == "float32" else np.float16
    x = rng.standard_normal((1, 9, 7, 8)).astype(npdt)
    w16 = (rng.standard_normal((8, 3, 3, 8)) * 0.2).astype(np.float16)  # float16 weights, cast at build time
    bias = rng.standard_normal(8).astype(npdt)

    def build(b, ops):
        xin = ops["x"]
        w = b.cast(b.constant(w16), dt)
        c = b.conv2d(xin, w, padding=[1, 1, 1, 1], input_layout="nhwc", filter_layout="ohwi",
                     bias=b.constant(bias))
        three, six = b.constant(dt, 3.0), b.constant(dt, 6.0)
        hs = b.div(b.mul(c, b.clamp(b.add(c, three), min_value=0.0, max_value=6.0)), six)
        return {"y": b.sigmoid(b.add(hs, xin))}

    got = run_graph(ctx, build, {"x": x})["y"]
    ref = _sigmoid(_hswish(_conv_nhwc(x, w16.astype(np.float64), bias, 1)) + x.astype(np.float64))
    np.testing.assert_allclose(got.astype(np.float64), ref, atol=tol, rtol=tol)

    b = webnn.MLGraphBuilder(ctx)
    g = build(b, {"x": b.input("x", {"data_type": dt, "shape": list(x.shape)})})
    graph = b.build(g)
    assert graph.kernel_count == 1, "cast folded, hard-swish, residual add and sigmoid fused into the conv"
    graph.destroy()


def test_matmul_epilogue_matches_unfused(ctx, rng, monkeypatch):
    a = rng.standard_normal((5, 12)).astype(np.float32)
    bm = rng.standard_normal((12, 8)).astype(np.float32)
    r = rng.standard_normal((5, 8)).astype(np.float32)

    def build(b, ops):
        m = b.matmul(ops["a"], b.constant(bm))
        return {"y": b.max(b.sub(ops["r"], b.relu(m)), b.constant("float32", -0.5))}

    fused = run_graph(ctx, build, {"a": a, "r": r})["y"]
    ref = np.maximum(r - np.maximum(a.astype(np.float64) @ bm, 0), -0.5)
    np.testing.assert_allclose(fused, ref, atol=1e-5, rtol=1e-5)
    monkeypatch.setenv("WEBNN_GPU_PASSES", "-fuse_epilogue")
    unfused = run_graph(ctx, build, {"a": a, "r": r})["y"]
    np.testing.assert_allclose(fused, unfused, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("op", ["conv2d", "conv_transpose2d", "gemm"])
def test_epilogue_operand_of_a_host_without_its_optional_input(ctx, rng, op):
    """No bias (conv) / no c (gemm): the fused operand must not be taken for one."""
    if op == "gemm":
        a = rng.standard_normal((6, 5)).astype(np.float32)
        bm = rng.standard_normal((5, 4)).astype(np.float32)
        s = rng.standard_normal((1, 4)).astype(np.float32)
        got = run_graph(ctx, lambda b, o: {"y": b.mul(b.gemm(o["a"], b.constant(bm)), b.constant(s))}, {"a": a})["y"]
        np.testing.assert_allclose(got, (a.astype(np.float64) @ bm) * s, rtol=1e-5, atol=1e-5)
        return
    x = rng.standard_normal((1, 4, 6, 6)).astype(np.float32)
    w = rng.standard_normal((4, 4, 1, 1)).astype(np.float32)  # oihw / iohw: 1x1, so both are x @ w
    s = rng.standard_normal((1, 4, 1, 1)).astype(np.float32)
    conv = getattr(webnn.MLGraphBuilder, op)
    got = run_graph(ctx, lambda b, o: {"y": b.add(conv(b, o["x"], b.constant(w)), b.constant(s))}, {"x": x})["y"]
    wm = w[:, :, 0, 0].astype(np.float64)
    mix = np.einsum("oi,nihw->nohw", wm, x) if op == "conv2d" else np.einsum("io,nihw->nohw", wm, x)
    np.testing.assert_allclose(got, mix + s, rtol=1e-5, atol=1e-5)


def test_passes_can_be_switched_off(ctx, monkeypatch):
    x = np.ones((1, 4, 4, 4), np.float32)

    def build(b, ops):
        c = b.conv2d(ops["x"], b.constant(np.ones((4, 1, 1, 4), np.float32)), input_layout="nhwc",
                     filter_layout="ohwi")
        return {"y": b.relu(c)}

    def kernels():
        b = webnn.MLGraphBuilder(ctx)
        g = b.build(build(b, {"x": b.input("x", {"data_type": "float32", "shape": [1, 4, 4, 4]})}))
        n = g.kernel_count
        g.destroy()
        return n

    assert kernels() == 1
    monkeypatch.setenv("WEBNN_GPU_PASSES", "-fuse_epilogue")
    assert kernels() == 2
    np.testing.assert_array_equal(run_graph(ctx, build, {"x": x})["y"], np.full((1, 4, 4, 4), 4, np.float32))
    assert "fuse_epilogue" in [p.__name__ for p in compiler.PASSES]


def _se_block(b, x, C, w1, w2, pw, bias, dt, *, scale_first=False):
    """MobileNetV3's squeeze-and-excite then the pointwise projection (NHWC)."""
    pooled = b.average_pool2d(x, layout="nhwc")
    h = b.relu(b.conv2d(pooled, b.constant(w1.astype(dt)), input_layout="nhwc", filter_layout="ohwi"))
    s = b.sigmoid(b.conv2d(h, b.constant(w2.astype(dt)), input_layout="nhwc", filter_layout="ohwi"))
    scaled = b.mul(s, x) if scale_first else b.mul(x, s)
    return b.conv2d(scaled, b.constant(pw.astype(dt)), input_layout="nhwc", filter_layout="ohwi",
                    bias=b.constant(bias.astype(dt)))


def _se_ref(x, w1, w2, pw, bias):
    x = x.astype(np.float64)
    pooled = x.mean(axis=(1, 2), keepdims=True)
    h = np.maximum(np.einsum("nhwc,oc->nhwo", pooled, w1[:, 0, 0, :].astype(np.float64)), 0)
    s = _sigmoid(np.einsum("nhwc,oc->nhwo", h, w2[:, 0, 0, :].astype(np.float64)))
    return np.einsum("nhwc,oc->nhwo", x * s, pw[:, 0, 0, :].astype(np.float64)) + bias


@pytest.mark.parametrize("dt,tol", [("float32", 2e-5), ("float16", 2e-2)])
@pytest.mark.parametrize("scale_first", [False, True])
def test_squeeze_and_excite_scale_folds_into_the_projection(ctx, rng, dt, tol, scale_first):
    npdt = np.float32 if dt == "float32" else np.float16
    C, O = 24, 16
    x = rng.standard_normal((1, 12, 10, C)).astype(npdt)
    w1, w2 = rng.standard_normal((8, 1, 1, C)) * 0.3, rng.standard_normal((C, 1, 1, 8)) * 0.3
    pw, bias = rng.standard_normal((O, 1, 1, C)) * 0.3, rng.standard_normal(O)
    got = run_graph(ctx, lambda b, ops: {"y": _se_block(b, ops["x"], C, w1, w2, pw, bias, npdt,
                                                        scale_first=scale_first)}, {"x": x})["y"]
    ref = _se_ref(x, w1.astype(npdt), w2.astype(npdt), pw.astype(npdt), bias.astype(npdt))
    np.testing.assert_allclose(got.astype(np.float64), ref, atol=tol, rtol=tol)

    b = webnn.MLGraphBuilder(ctx)
    y = _se_block(b, b.input("x", {"data_type": dt, "shape": list(x.shape)}), C, w1, w2, pw, bias, npdt,
                  scale_first=scale_first)
    fused = b.build({"y": y})
    assert "mul" not in {s.node.op for s in fused._steps if getattr(s, "node", None) is not None}


def test_scale_stays_a_kernel_where_the_conv_cannot_take_it(ctx, rng, monkeypatch):
    """C % 4 != 0, a scale that varies over pixels, a scaled value used twice, and the pass off."""
    x = rng.standard_normal((1, 6, 6, 8)).astype(np.float32)
    x6 = rng.standard_normal((1, 6, 6, 6)).astype(np.float32)
    pw8, pw6 = rng.standard_normal((4, 1, 1, 8)).astype(np.float32), rng.standard_normal((4, 1, 1, 6)).astype(np.float32)
    s8 = rng.standard_normal((1, 1, 1, 8)).astype(np.float32)
    s6 = rng.standard_normal((1, 1, 1, 6)).astype(np.float32)
    sp = rng.standard_normal((1, 6, 6, 1)).astype(np.float32)

    def conv(b, v, w):
        return b.conv2d(v, b.constant(w), input_layout="nhwc", filter_layout="ohwi")

    def ref_conv(v, w):
        return np.einsum("nhwc,oc->nhwo", v.astype(np.float64), w[:, 0, 0, :].astype(np.float64))

    cases = {
        "channels not a multiple of 4": (lambda b, o: {"y": conv(b, b.mul(o["x6"], b.constant(s6)), pw6)},
                                         {"y": ref_conv(x6 * s6, pw6)}),
        "per-pixel scale": (lambda b, o: {"y": conv(b, b.mul(o["x"], b.constant(sp)), pw8)},
                            {"y": ref_conv(x * sp, pw8)}),
        "scaled value also an output": (lambda b, o: (lambda m: {"y": conv(b, m, pw8), "m": m})(
                                        b.mul(o["x"], b.constant(s8))), {"y": ref_conv(x * s8, pw8), "m": x * s8}),
    }
    for name, (build, refs) in cases.items():
        got = run_graph(ctx, build, {"x": x, "x6": x6})
        for k, ref in refs.items():
            np.testing.assert_allclose(got[k], ref, atol=1e-5, rtol=1e-5, err_msg=name)
        b = webnn.MLGraphBuilder(ctx)
        g = b.build(build(b, {"x": b.input("x", {"data_type": "float32", "shape": [1, 6, 6, 8]}),
                              "x6": b.input("x6", {"data_type": "float32", "shape": [1, 6, 6, 6]})}))
        assert "mul" in {s.node.op for s in g._steps if getattr(s, "node", None) is not None}, name


@pytest.mark.parametrize("dt,tol", [("float32", 2e-5), ("float16", 2e-2)])
@pytest.mark.parametrize("form", ["x*s+r", "r+s*x", "x+r"])
def test_decoder_scale_and_skip_fold_into_the_next_pointwise_conv(ctx, rng, dt, tol, form):
    """add(mul(x, s), r) (the segmenter's decoder) and add(x, r) in front of a 1x1 conv."""
    npdt = np.float32 if dt == "float32" else np.float16
    C, O = 16, 8
    x = rng.standard_normal((1, 16, 12, C)).astype(npdt)  # past the small-product kernel
    r = rng.standard_normal((1, 16, 12, C)).astype(npdt)
    s = rng.standard_normal((1, 1, 1, C)).astype(npdt)
    pw, bias = (rng.standard_normal((O, 1, 1, C)) * 0.3).astype(npdt), rng.standard_normal(O).astype(npdt)

    def build(b, o):
        sc = b.constant(s)
        v = {"x*s+r": lambda: b.add(b.mul(o["x"], sc), o["r"]), "r+s*x": lambda: b.add(o["r"], b.mul(sc, o["x"])),
             "x+r": lambda: b.add(o["x"], o["r"])}[form]()
        return {"y": b.relu(b.conv2d(v, b.constant(pw), input_layout="nhwc", filter_layout="ohwi",
                                     bias=b.constant(bias)))}

    got = run_graph(ctx, build, {"x": x, "r": r})["y"]
    x64, r64, s64 = x.astype(np.float64), r.astype(np.float64), s.astype(np.float64)
    v = x64 + r64 if form == "x+r" else x64 * s64 + r64
    ref = np.maximum(np.einsum("nhwc,oc->nhwo", v, pw[:, 0, 0, :].astype(np.float64)) + bias, 0)
    np.testing.assert_allclose(got.astype(np.float64), ref, atol=tol, rtol=tol)

    b = webnn.MLGraphBuilder(ctx)
    g = b.build(build(b, {n: b.input(n, {"data_type": dt, "shape": list(x.shape)}) for n in ("x", "r")}))
    assert [s.template for s in g._steps if hasattr(s, "template")] == ["matmul/tile.wgsl"]


def test_skip_add_used_twice_stays_a_kernel(ctx, rng):
    x = rng.standard_normal((1, 4, 4, 8)).astype(np.float32)
    r = rng.standard_normal((1, 4, 4, 8)).astype(np.float32)
    pw = rng.standard_normal((4, 1, 1, 8)).astype(np.float32)

    def build(b, o):
        v = b.add(o["x"], o["r"])
        return {"y": b.conv2d(v, b.constant(pw), input_layout="nhwc", filter_layout="ohwi"), "v": b.relu(v)}

    got = run_graph(ctx, build, {"x": x, "r": r})
    ref = np.einsum("nhwc,oc->nhwo", x.astype(np.float64) + r, pw[:, 0, 0, :].astype(np.float64))
    np.testing.assert_allclose(got["y"], ref, atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(got["v"], np.maximum(x + r, 0), atol=1e-6)


@pytest.mark.parametrize("dt,tol", [("float32", 1e-5), ("float16", 2e-3)])
@pytest.mark.parametrize("hw", [(6, 5), (64, 64)])  # one column pass; row splits then their partials
def test_skip_add_folds_into_the_global_pool_that_reads_it(ctx, rng, dt, tol, hw):
    npdt = np.float32 if dt == "float32" else np.float16
    shape = (1, *hw, 16)
    a, c = rng.standard_normal(shape).astype(npdt), rng.standard_normal(shape).astype(npdt)

    def build(b, o):
        return {"y": b.average_pool2d(b.add(o["a"], o["c"]), layout="nhwc")}

    got = run_graph(ctx, build, {"a": a, "c": c})["y"]
    ref = (a.astype(np.float64) + c).mean(axis=(1, 2), keepdims=True)
    np.testing.assert_allclose(got.astype(np.float64), ref, atol=tol, rtol=tol)
    b = webnn.MLGraphBuilder(ctx)
    g = b.build(build(b, {n: b.input(n, {"data_type": dt, "shape": list(shape)}) for n in ("a", "c")}))
    assert {s.template for s in g._steps if hasattr(s, "template")} == {"reduce/columns.wgsl"}


def test_pool_add_stays_where_the_pool_cannot_take_it(ctx, rng):
    """The sum also an output, an NCHW pool, two images, a max pool."""
    a, c = rng.standard_normal((2, 4, 4, 8)).astype(np.float32), rng.standard_normal((2, 4, 4, 8)).astype(np.float32)
    s = a.astype(np.float64) + c

    def build(b, o):
        v = b.add(o["a"], o["c"])
        v1 = b.add(b.slice(o["a"], [0, 0, 0, 0], [1, 4, 4, 8]), b.slice(o["c"], [0, 0, 0, 0], [1, 4, 4, 8]))
        return {"two_images": b.average_pool2d(v, layout="nhwc"), "nchw": b.average_pool2d(b.add(o["a"], o["c"])),
                "max": b.max_pool2d(b.add(o["c"], o["a"]), layout="nhwc"),
                "also_output": b.average_pool2d(v1, layout="nhwc"), "v1": v1}

    got = run_graph(ctx, build, {"a": a, "c": c})
    np.testing.assert_allclose(got["two_images"], s.mean(axis=(1, 2), keepdims=True), atol=1e-5)
    np.testing.assert_allclose(got["nchw"], s.mean(axis=(2, 3), keepdims=True), atol=1e-5)
    np.testing.assert_allclose(got["max"], s.max(axis=(1, 2), keepdims=True), atol=1e-5)
    np.testing.assert_allclose(got["also_output"], s[:1].mean(axis=(1, 2), keepdims=True), atol=1e-5)
    np.testing.assert_allclose(got["v1"], s[:1], atol=1e-6)


def _dw_ref(x, w_1hwc, bias, pad, stride):
    """NumPy float64 depthwise conv2d, NHWC input, [1, KH, KW, C] filter."""
    return conv2d_nhwc(x, np.asarray(w_1hwc).transpose(3, 1, 2, 0), bias, pad, stride, groups=x.shape[3])


@pytest.mark.parametrize("tuning", ["lane-loop", "default"])
@pytest.mark.parametrize("dt,tol", [("float32", 1e-5), ("float16", 1e-2)])
@pytest.mark.parametrize("hw, k, stride", [((13, 11), 3, 1), ((32, 32), 5, 2), ((3, 2), 3, 1)])
def test_global_pool_of_a_depthwise_conv_comes_from_the_conv(ctx, rng, monkeypatch, tuning, dt, tol, hw, k, stride):
    """fuse_conv_pool: the squeeze of squeeze-and-excite from the depthwise kernel's per-block
    sums (partial blocks at the borders included), the conv output still used."""
    monkeypatch.setattr(ctx, "_tuning", tuning)
    npdt = np.float32 if dt == "float32" else np.float16
    C, pad = 24, k // 2
    x = rng.standard_normal((1, *hw, C)).astype(npdt)
    w = (rng.standard_normal((1, k, k, C)) * 0.3).astype(npdt)
    bias = rng.standard_normal(C).astype(npdt)

    def build(b, o):
        y = b.relu(b.conv2d(o["x"], b.constant(w), input_layout="nhwc", filter_layout="ihwo", groups=C,
                            bias=b.constant(bias), padding=[pad] * 4, strides=[stride] * 2))
        return {"y": y, "p": b.average_pool2d(y, layout="nhwc")}

    got = run_graph(ctx, build, {"x": x})
    y = np.maximum(_dw_ref(x, w.astype(np.float64), bias.astype(np.float64), pad, stride), 0)
    np.testing.assert_allclose(got["y"].astype(np.float64), y, atol=tol, rtol=tol)
    np.testing.assert_allclose(got["p"].astype(np.float64), y.mean(axis=(1, 2), keepdims=True), atol=tol, rtol=tol)
    b = webnn.MLGraphBuilder(ctx)
    g = b.build(build(b, {"x": b.input("x", {"data_type": dt, "shape": list(x.shape)})}))
    assert [s.template for s in g._steps if hasattr(s, "template")] == ["conv/depthwise.wgsl", "reduce/columns.wgsl"]


def test_pool_of_a_conv_stays_separate_where_the_conv_cannot_pool(ctx, rng):
    """Two images, channels not a multiple of 4, a pointwise conv: the pool runs on its own."""
    def dw(b, v, c):
        return b.conv2d(v, b.constant(np.full((1, 3, 3, c), 0.1, np.float32)), input_layout="nhwc",
                        filter_layout="ihwo", groups=c, padding=[1, 1, 1, 1])

    x2 = rng.standard_normal((2, 6, 6, 8)).astype(np.float32)
    x6 = rng.standard_normal((1, 6, 6, 6)).astype(np.float32)
    pw = rng.standard_normal((8, 1, 1, 8)).astype(np.float32)

    def build(b, o):
        return {"two": b.average_pool2d(dw(b, o["x2"], 8), layout="nhwc"),
                "c6": b.average_pool2d(dw(b, o["x6"], 6), layout="nhwc"),
                "pw": b.average_pool2d(b.conv2d(o["x2"], b.constant(pw), input_layout="nhwc", filter_layout="ohwi"),
                                       layout="nhwc")}

    got = run_graph(ctx, build, {"x2": x2, "x6": x6})
    np.testing.assert_allclose(got["two"], _dw_ref(x2, np.full((1, 3, 3, 8), 0.1), 0, 1, 1).mean(axis=(1, 2), keepdims=True),
                               atol=1e-5)
    np.testing.assert_allclose(got["c6"], _dw_ref(x6, np.full((1, 3, 3, 6), 0.1), 0, 1, 1).mean(axis=(1, 2), keepdims=True),
                               atol=1e-5)
    ref_pw = np.einsum("nhwc,oc->nhwo", x2.astype(np.float64), pw[:, 0, 0, :]).mean(axis=(1, 2), keepdims=True)
    np.testing.assert_allclose(got["pw"], ref_pw, atol=1e-5)
    b = webnn.MLGraphBuilder(ctx)
    g = b.build(build(b, {"x2": b.input("x2", {"data_type": "float32", "shape": [2, 6, 6, 8]}),
                          "x6": b.input("x6", {"data_type": "float32", "shape": [1, 6, 6, 6]})}))
    assert all(not s.node.attrs.get("pool_output") for s in g._steps if getattr(s, "node", None) is not None)


def _resample2x_ref(x, axes):
    """float64 bilinear doubling with half-pixel centers (clamped) of two axes."""
    return ref_resample(x, "linear", [2 * x.shape[a] for a in axes], axes=axes)


@pytest.mark.parametrize("dt,tol", [("float32", 2e-5), ("float16", 2e-2)])
@pytest.mark.parametrize("layout", ["nhwc", "nchw"])
def test_pointwise_conv_after_an_upsampling_runs_on_the_small_image(ctx, rng, dt, tol, layout):
    """swap_resample_conv: resample(conv(x)) instead of conv(resample(x)), same values, the
    conv on a quarter of the pixels; a relu after the conv stays after it."""
    npdt = np.float32 if dt == "float32" else np.float16
    C, O, H, W = 24, 16, 7, 5
    shape = (1, H, W, C) if layout == "nhwc" else (1, C, H, W)
    x = rng.standard_normal(shape).astype(npdt)
    w = (rng.standard_normal((O, 1, 1, C)) * 0.3).astype(npdt)
    bias = rng.standard_normal(O).astype(npdt)
    axes = [1, 2] if layout == "nhwc" else [2, 3]

    def build(b, o):
        up = b.resample2d(o["x"], mode="linear", scales=[2.0, 2.0], axes=axes)
        wt = w if layout == "nhwc" else np.ascontiguousarray(w.transpose(0, 3, 1, 2))
        y = b.conv2d(up, b.constant(wt), input_layout=layout, filter_layout="ohwi" if layout == "nhwc" else "oihw",
                     bias=b.constant(bias))
        return {"y": b.relu(y)}

    got = run_graph(ctx, build, {"x": x})["y"].astype(np.float64)
    up = _resample2x_ref(x, axes)
    eq = "nhwc,oc->nhwo" if layout == "nhwc" else "nchw,oc->nohw"
    bshape = (1, 1, 1, O) if layout == "nhwc" else (1, O, 1, 1)
    ref = np.maximum(np.einsum(eq, up, w[:, 0, 0, :].astype(np.float64)) + bias.astype(np.float64).reshape(bshape), 0)
    np.testing.assert_allclose(got, ref, atol=tol, rtol=tol)

    b = webnn.MLGraphBuilder(ctx)
    g = b.build(build(b, {"x": b.input("x", {"data_type": dt, "shape": list(shape)})}))
    ops = [s.node.op for s in g._steps if getattr(s, "node", None) is not None]
    assert ops.index("conv2d") < ops.index("resample2d"), ops
    conv = next(s.node for s in g._steps if getattr(s, "node", None) is not None and s.node.op == "conv2d")
    assert conv.inputs[0].shape == shape  # the small image


def test_resample_then_conv_stays_where_swapping_would_not_pay_or_not_hold(ctx, rng, monkeypatch):
    """A conv that widens the channels, a downsampling, nearest-neighbour, a 3x3 conv, a
    resample read twice, and the pass switched off: the order stays."""
    x = rng.standard_normal((1, 6, 6, 8)).astype(np.float32)

    def pw(b, v, o_ch, k=1):
        w = np.full((o_ch, k, k, 8), 0.05, np.float32)
        return b.conv2d(v, b.constant(w), input_layout="nhwc", filter_layout="ohwi", padding=[k // 2] * 4)

    def builds(b, x_):
        up = b.resample2d(x_, mode="linear", scales=[2.0, 2.0], axes=[1, 2])
        return {
            "widen": lambda: {"y": pw(b, up, 32)},
            "down": lambda: {"y": pw(b, b.resample2d(x_, mode="linear", sizes=[3, 3], axes=[1, 2]), 4)},
            "nearest": lambda: {"y": pw(b, b.resample2d(x_, scales=[2.0, 2.0], axes=[1, 2]), 4)},
            "3x3": lambda: {"y": pw(b, up, 4, k=3)},
            "twice": lambda: {"y": pw(b, up, 4), "up": up},
        }

    for name in ("widen", "down", "nearest", "3x3", "twice"):
        b = webnn.MLGraphBuilder(ctx)
        g = b.build(builds(b, b.input("x", {"data_type": "float32", "shape": [1, 6, 6, 8]}))[name]())
        ops = [s.node.op for s in g._steps if getattr(s, "node", None) is not None]
        assert ops.index("resample2d") < ops.index("conv2d"), (name, ops)
    monkeypatch.setenv("WEBNN_GPU_PASSES", "-swap_resample_conv")
    b = webnn.MLGraphBuilder(ctx)
    up = b.resample2d(b.input("x", {"data_type": "float32", "shape": [1, 6, 6, 8]}), mode="linear",
                      scales=[2.0, 2.0], axes=[1, 2])
    g = b.build({"y": pw(b, up, 4)})
    ops = [s.node.op for s in g._steps if getattr(s, "node", None) is not None]
    assert ops.index("resample2d") < ops.index("conv2d")
    got = ctx.compute(g, {"x": x})["y"]
    ref = np.einsum("nhwc,oc->nhwo", _resample2x_ref(x, [1, 2]), np.full((4, 8), 0.05))
    np.testing.assert_allclose(got, ref, atol=1e-5)


@pytest.mark.parametrize("dt,tol", [("float32", 1e-5), ("float16", 3e-3)])
@pytest.mark.parametrize("hw", [(5, 3), (64, 48)])  # one column pass; row splits then partials
def test_pool_of_a_skip_plus_upsampling_reads_the_small_image(ctx, rng, dt, tol, hw):
    """fuse_pool_input with an exact 2x bilinear upsampling: the pool reads the half-size image
    (the upsampling keeps the mean), the upsampled values still go to their other reader."""
    npdt = np.float32 if dt == "float32" else np.float16
    small = rng.standard_normal((1, *hw, 8)).astype(npdt)
    skip = rng.standard_normal((1, 2 * hw[0], 2 * hw[1], 8)).astype(npdt)

    def build(b, o):
        up = b.resample2d(o["small"], mode="linear", scales=[2.0, 2.0], axes=[1, 2])
        return {"p": b.average_pool2d(b.add(o["skip"], up), layout="nhwc"), "r": b.relu(up)}

    got = run_graph(ctx, build, {"small": small, "skip": skip})
    up = _resample2x_ref(small, [1, 2])
    np.testing.assert_allclose(got["p"].astype(np.float64), (skip.astype(np.float64) + up).mean(axis=(1, 2), keepdims=True),
                               atol=tol, rtol=tol)
    np.testing.assert_allclose(got["r"].astype(np.float64), np.maximum(up, 0), atol=tol, rtol=tol)
    b = webnn.MLGraphBuilder(ctx)
    g = b.build(build(b, {"small": b.input("small", {"data_type": dt, "shape": list(small.shape)}),
                          "skip": b.input("skip", {"data_type": dt, "shape": list(skip.shape)})}))
    pool = next(s.node for s in g._steps if getattr(s, "node", None) is not None and s.node.op == "average_pool2d")
    assert pool.attrs.get("input_add_scale") == 4 and tuple(pool.inputs[1].shape) == small.shape


def _transpose_tiles_ref(y, w_iohw, bias):
    """float64 conv_transpose2d whose filter equals its stride (no padding): NHWC y, IOHW filter."""
    nb, h, w, _ = y.shape
    _, o, kh, kw = w_iohw.shape
    out = np.einsum("nhwc,coab->nhawbo", y, w_iohw).reshape(nb, h * kh, w * kw, o)
    return out + bias


# (image, channels, window, stride, dilation, residual add of the depthwise input, what reads
# it, the input channels of an expansion conv before the depthwise conv or 0)
_DW_PROJECT_CASES = {
    "pointwise, self add, N=6": ((9, 7), 8, 3, 1, 1, True, ("conv", 6), 0),
    "pointwise, stride 2, N=8": ((9, 7), 12, 3, 2, 1, False, ("conv", 8), 0),
    "dilated, self add, N=4": ((6, 10), 4, 3, 1, 2, True, ("conv", 4), 0),
    "transpose 2x2 -> 1, self add": ((10, 6), 16, 3, 1, 1, True, ("transpose", 1), 0),
    "transpose 3x2 -> 3, batch 2": ((5, 4), 8, 5, 1, 1, False, ("transpose", 3), 0),
    # (images large enough for blocks whose recomputed expansion pays: EXPAND_MAX_RECOMPUTE)
    "expand 8 -> 12, stride 2, N=8": ((64, 40), 12, 3, 2, 1, False, ("conv", 8), 8),
    "expand 16 -> 24, self add, N=6": ((32, 40), 24, 3, 1, 1, True, ("conv", 6), 16),
    "expand 4 -> 8, transpose": ((36, 32), 8, 3, 1, 1, False, ("transpose", 1), 4),
}


@pytest.mark.parametrize("tuning", ["lane-loop", "default"])
@pytest.mark.parametrize("dt,tol", [("float32", 2e-5), ("float16", 2e-2)])
@pytest.mark.parametrize("case", list(_DW_PROJECT_CASES))
def test_depthwise_conv_and_its_projection_run_as_one_kernel(ctx, rng, monkeypatch, tuning, dt, tol, case):
    """fuse_depthwise_project: a depthwise conv (bias, relu, maybe a residual add of its own
    input) and the pointwise conv or tiled conv_transpose2d reading it (bias, activation, a
    residual add on the projection) in one kernel, against float64 NumPy."""
    monkeypatch.setattr(ctx, "_tuning", tuning)
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP", "fused")  # the kernel, whatever the cost model (project_pays) says
    hw, C, k, stride, dil, self_add, (kind, N), K = _DW_PROJECT_CASES[case]
    npdt = np.float32 if dt == "float32" else np.float16
    nb = 2 if "batch 2" in case else 1
    pad = (k - 1) // 2 * dil
    x = rng.standard_normal((nb, *hw, K or C)).astype(npdt)
    we = (rng.standard_normal((C, 1, 1, K)) * 0.4).astype(npdt)
    be = rng.standard_normal(C).astype(npdt)
    wd = (rng.standard_normal((1, k, k, C)) * 0.3).astype(npdt)
    bd = rng.standard_normal(C).astype(npdt)
    oh, ow = [(s + 2 * pad - dil * (k - 1) - 1) // stride + 1 for s in hw]
    if kind == "conv":
        wp = (rng.standard_normal((N, 1, 1, C)) * 0.3).astype(npdt)  # ohwi
        bp = rng.standard_normal(N).astype(npdt)
        r = rng.standard_normal((nb, oh, ow, N)).astype(npdt)
    else:
        kh, kw = (2, 2) if N == 1 else (3, 2)
        wp = (rng.standard_normal((C, N, kh, kw)) * 0.3).astype(npdt)  # iohw
        bp = rng.standard_normal(N).astype(npdt)
    inputs = {"x": x} if kind == "transpose" else {"x": x, "r": r}

    def build(b, o):
        xd = o["x"]
        if K:
            xd = b.clamp(b.conv2d(xd, b.constant(we), input_layout="nhwc", filter_layout="ohwi", bias=b.constant(be)),
                         min_value=0.0, max_value=6.0)
        d = b.conv2d(xd, b.constant(wd), input_layout="nhwc", filter_layout="ihwo", groups=C,
                     bias=b.constant(bd), padding=[pad] * 4, strides=[stride] * 2, dilations=[dil] * 2)
        d = b.relu(d)
        if self_add:
            d = b.add(d, xd)
        if kind == "conv":
            p = b.conv2d(d, b.constant(wp), input_layout="nhwc", filter_layout="ohwi", bias=b.constant(bp))
            return {"y": b.add(b.clamp(p, min_value=-1.0, max_value=2.0), o["r"])}
        p = b.conv_transpose2d(d, b.constant(wp), input_layout="nhwc", filter_layout="iohw", strides=[kh, kw],
                               bias=b.constant(bp))
        return {"y": b.sigmoid(p)}

    got = run_graph(ctx, build, inputs)["y"].astype(np.float64)
    x64 = x.astype(np.float64)
    if K:
        x64 = np.clip(np.einsum("nhwk,ck->nhwc", x64, we[:, 0, 0, :].astype(np.float64)) + be, 0, 6)
    d = np.maximum(conv2d_nhwc(x64, wd.astype(np.float64).transpose(3, 1, 2, 0), bd.astype(np.float64), pad,
                               stride, groups=C) if dil == 1 else
                   ref_conv2d(x64.transpose(0, 3, 1, 2), wd.astype(np.float64).transpose(3, 0, 1, 2), [pad] * 4,
                              [stride] * 2, [dil] * 2, groups=C).transpose(0, 2, 3, 1) + bd, 0)
    if self_add:
        d = d + x64
    if kind == "conv":
        p = np.einsum("nhwc,oc->nhwo", d, wp[:, 0, 0, :].astype(np.float64)) + bp
        ref = np.clip(p, -1, 2) + r
    else:
        ref = _sigmoid(_transpose_tiles_ref(d, wp.astype(np.float64), bp.astype(np.float64)))
    np.testing.assert_allclose(got, ref, atol=tol, rtol=tol)
    assert _templates(ctx, build, inputs) == ["conv/depthwise_project.wgsl"]


def test_depthwise_and_projection_stay_apart_where_they_cannot_fuse(ctx, rng, monkeypatch):
    """The depthwise output used twice, channels not a multiple of 4, a projection whose
    filter is an input, a 3x3 conv after the depthwise: two kernels, the same results; and
    WEBNN_GPU_PASSES=-fuse_depthwise_project switches the pass off."""
    x = rng.standard_normal((1, 6, 5, 8)).astype(np.float32)
    x6 = rng.standard_normal((1, 6, 5, 6)).astype(np.float32)
    wp = rng.standard_normal((4, 1, 1, 8)).astype(np.float32)
    w3 = (rng.standard_normal((4, 3, 3, 8)) * 0.3).astype(np.float32)

    def dw(b, v, c):
        return b.conv2d(v, b.constant(np.full((1, 3, 3, c), 0.2, np.float32)), input_layout="nhwc",
                        filter_layout="ihwo", groups=c, padding=[1, 1, 1, 1])

    def pw(b, v, w):
        return b.conv2d(v, w, input_layout="nhwc", filter_layout="ohwi")

    d_ref = conv2d_nhwc(x.astype(np.float64), np.full((8, 3, 3, 1), 0.2), None, 1, groups=8)
    d6_ref = conv2d_nhwc(x6.astype(np.float64), np.full((6, 3, 3, 1), 0.2), None, 1, groups=6)
    def used_twice(b, o):
        d = dw(b, o["x"], 8)
        return {"y": pw(b, d, b.constant(wp)), "d": d}

    cases = {
        "used twice": (used_twice, {"x": x}),
        "six channels": (lambda b, o: {"y": pw(b, dw(b, o["x6"], 6), b.constant(wp[:, :, :, :6]))}, {"x6": x6}),
        "filter input": (lambda b, o: {"y": pw(b, dw(b, o["x"], 8), o["w"])}, {"x": x, "w": wp}),
        "3x3 conv": (lambda b, o: {"y": b.conv2d(dw(b, o["x"], 8), b.constant(w3), input_layout="nhwc",
                                                 filter_layout="ohwi", padding=[1, 1, 1, 1])}, {"x": x}),
    }
    refs = {
        "used twice": np.einsum("nhwc,oc->nhwo", d_ref, wp[:, 0, 0, :]),
        "six channels": np.einsum("nhwc,oc->nhwo", d6_ref, wp[:, 0, 0, :6]),
        "filter input": np.einsum("nhwc,oc->nhwo", d_ref, wp[:, 0, 0, :]),
        "3x3 conv": conv2d_nhwc(d_ref, w3, None, 1),
    }
    for name, (build, inputs) in cases.items():
        got = run_graph(ctx, build, inputs)["y"]
        np.testing.assert_allclose(got, refs[name], atol=1e-4, rtol=1e-4, err_msg=name)
        assert "conv/depthwise_project.wgsl" not in _templates(ctx, build, inputs), name
    # an expansion whose output is also a graph output stays a kernel of its own
    we = rng.standard_normal((8, 1, 1, 4)).astype(np.float32)
    x4 = rng.standard_normal((1, 6, 5, 4)).astype(np.float32)

    def expansion_out(b, o):
        e = pw(b, o["x4"], b.constant(we))
        return {"e": e, "y": pw(b, dw(b, e, 8), b.constant(wp))}

    got = run_graph(ctx, expansion_out, {"x4": x4})
    e_ref = np.einsum("nhwk,ck->nhwc", x4.astype(np.float64), we[:, 0, 0, :])
    np.testing.assert_allclose(got["e"], e_ref, atol=1e-4, rtol=1e-4)
    d_e = conv2d_nhwc(e_ref, np.full((8, 3, 3, 1), 0.2), None, 1, groups=8)
    np.testing.assert_allclose(got["y"], np.einsum("nhwc,oc->nhwo", d_e, wp[:, 0, 0, :]), atol=1e-4, rtol=1e-4)
    assert _templates(ctx, expansion_out, {"x4": x4})[1:] == ["conv/depthwise_project.wgsl"]
    build, inputs = cases["filter input"][0], {"x": x}
    fused = lambda b, o: {"y": pw(b, dw(b, o["x"], 8), b.constant(wp))}  # noqa: E731
    assert _templates(ctx, fused, inputs) == ["conv/depthwise_project.wgsl"]
    monkeypatch.setenv("WEBNN_GPU_PASSES", "-fuse_depthwise_project")
    assert "conv/depthwise_project.wgsl" not in _templates(ctx, fused, inputs)
    np.testing.assert_allclose(run_graph(ctx, fused, inputs)["y"], refs["filter input"], atol=1e-4, rtol=1e-4)


def _hard_sigmoid(x):
    return np.clip(0.2 * x + 0.5, 0, 1)


@pytest.mark.parametrize("tuning", ["lane-loop", "default"])
@pytest.mark.parametrize("dt,tol", [("float32", 2e-5), ("float16", 2e-2)])
@pytest.mark.parametrize("source", ["depthwise partials", "pooled input", "wide, no fc1 bias", "odd widths"])
def test_squeeze_and_excite_runs_in_one_workgroup(ctx, rng, monkeypatch, tuning, dt, tol, source):
    """fuse_squeeze_excite: pool -> 1x1 conv (relu) -> 1x1 conv (sigmoid / hard-sigmoid) as one
    kernel; from a depthwise conv's per-block partial sums, the means too."""
    monkeypatch.setattr(ctx, "_tuning", tuning)
    npdt = np.float32 if dt == "float32" else np.float16
    C, R = {"wide, no fc1 bias": (96, 24), "odd widths": (10, 6)}.get(source, (16, 8))  # odd: the scalar kernel
    x = rng.standard_normal((1, 13, 11, C)).astype(npdt)
    wd = (rng.standard_normal((1, 3, 3, C)) * 0.3).astype(npdt)
    w1 = (rng.standard_normal((R, 1, 1, C)) * 0.3).astype(npdt)
    b1 = rng.standard_normal(R).astype(npdt)
    w2 = (rng.standard_normal((C, 1, 1, R)) * 0.3).astype(npdt)
    b2 = rng.standard_normal(C).astype(npdt)
    wide = source.startswith("wide")

    def build(b, o):
        v = o["x"]
        if source not in ("pooled input", "odd widths"):
            v = b.relu(b.conv2d(v, b.constant(wd), input_layout="nhwc", filter_layout="ihwo", groups=C,
                                padding=[1, 1, 1, 1]))
        p = b.average_pool2d(v, layout="nhwc")
        h = b.relu(b.conv2d(p, b.constant(w1), input_layout="nhwc", filter_layout="ohwi",
                            bias=None if wide else b.constant(b1)))
        s = b.conv2d(h, b.constant(w2), input_layout="nhwc", filter_layout="ohwi", bias=b.constant(b2))
        s = b.hard_sigmoid(s) if wide else b.sigmoid(s)
        return {"y": b.mul(v, s)}

    got = run_graph(ctx, build, {"x": x})["y"].astype(np.float64)
    v = x.astype(np.float64)
    if source not in ("pooled input", "odd widths"):
        v = np.maximum(_dw_ref(v, wd.astype(np.float64), 0, 1, 1), 0)
    p = v.mean(axis=(1, 2))[0]
    h = np.maximum(w1[:, 0, 0, :].astype(np.float64) @ p + (0 if wide else b1), 0)
    s = w2[:, 0, 0, :].astype(np.float64) @ h + b2
    s = _hard_sigmoid(s) if wide else _sigmoid(s)
    np.testing.assert_allclose(got, v * s, atol=tol, rtol=tol)
    templates = _templates(ctx, build, {"x": x})
    assert "matmul/squeeze_excite.wgsl" in templates and "matmul/small.wgsl" not in templates
    if source not in ("pooled input", "odd widths"):
        assert "reduce/columns.wgsl" not in templates, "the means come from the depthwise partials"


def test_squeeze_excite_stays_apart_where_it_cannot_fuse(ctx, rng):
    """The hidden layer also a graph output, the pooled means also an output (fused, but from
    the pooled vector), a 1x1 conv on a 2x2 image: the results stay right."""
    C, R = 8, 4
    x = rng.standard_normal((1, 6, 6, C)).astype(np.float32)
    w1 = rng.standard_normal((R, 1, 1, C)).astype(np.float32)
    w2 = rng.standard_normal((C, 1, 1, R)).astype(np.float32)

    def fcs(b, p):
        h = b.relu(b.conv2d(p, b.constant(w1), input_layout="nhwc", filter_layout="ohwi"))
        return h, b.conv2d(h, b.constant(w2), input_layout="nhwc", filter_layout="ohwi")

    def dw(b, v):
        return b.conv2d(v, b.constant(np.full((1, 3, 3, C), 0.1, np.float32)), input_layout="nhwc",
                        filter_layout="ihwo", groups=C, padding=[1, 1, 1, 1])

    def hidden_out(b, o):
        h, s = fcs(b, b.average_pool2d(o["x"], layout="nhwc"))
        return {"h": h, "s": s}

    def pooled_out(b, o):
        p = b.average_pool2d(dw(b, o["x"]), layout="nhwc")
        return {"p": p, "s": fcs(b, p)[1]}

    def two_by_two(b, o):
        return {"s": fcs(b, b.average_pool2d(o["x"], window_dimensions=[3, 3], strides=[3, 3], layout="nhwc"))[1]}

    x64 = x.astype(np.float64)
    d = _dw_ref(x64, np.full((1, 3, 3, C), 0.1), 0, 1, 1)

    def ref(p):
        return np.einsum("...c,oc->...o", np.maximum(np.einsum("...c,oc->...o", p, w1[:, 0, 0]), 0), w2[:, 0, 0])

    got = run_graph(ctx, hidden_out, {"x": x})
    np.testing.assert_allclose(got["s"][0, 0, 0], ref(x64.mean(axis=(1, 2))[0]), atol=1e-4, rtol=1e-4)
    assert "matmul/squeeze_excite.wgsl" not in _templates(ctx, hidden_out, {"x": x})
    got = run_graph(ctx, pooled_out, {"x": x})
    np.testing.assert_allclose(got["p"][0, 0, 0], d.mean(axis=(1, 2))[0], atol=1e-5)
    np.testing.assert_allclose(got["s"][0, 0, 0], ref(d.mean(axis=(1, 2))[0]), atol=1e-4, rtol=1e-4)
    assert "reduce/columns.wgsl" in _templates(ctx, pooled_out, {"x": x})
    got = run_graph(ctx, two_by_two, {"x": x})
    pooled = x64.reshape(1, 2, 3, 2, 3, C).mean(axis=(2, 4))
    np.testing.assert_allclose(got["s"], ref(pooled), atol=1e-4, rtol=1e-4)
    assert "matmul/squeeze_excite.wgsl" not in _templates(ctx, two_by_two, {"x": x})


@pytest.mark.parametrize("tuning", ["lane-loop", "default"])
@pytest.mark.parametrize("dt,tol", [("float32", 2e-5), ("float16", 2e-2)])
@pytest.mark.parametrize("pool", [False, True])
def test_expansion_and_depthwise_conv_without_a_projection(ctx, rng, monkeypatch, tuning, dt, tol, pool):
    """fuse_depthwise_project without a projection: the expansion computed in the depthwise
    kernel, which stores its output (and the pool partials the squeeze-and-excite kernel
    reduces); a 5x5 window on a small image stays two kernels (too much recomputation)."""
    monkeypatch.setattr(ctx, "_tuning", tuning)
    npdt = np.float32 if dt == "float32" else np.float16
    K, C = 8, 16
    x = rng.standard_normal((1, 64, 48, K)).astype(npdt)
    we = (rng.standard_normal((C, 1, 1, K)) * 0.4).astype(npdt)
    be = rng.standard_normal(C).astype(npdt)
    wd = (rng.standard_normal((1, 3, 3, C)) * 0.3).astype(npdt)
    w1 = (rng.standard_normal((4, 1, 1, C)) * 0.3).astype(npdt)
    w2 = (rng.standard_normal((C, 1, 1, 4)) * 0.3).astype(npdt)

    def build(b, o):
        e = b.relu(b.conv2d(o["x"], b.constant(we), input_layout="nhwc", filter_layout="ohwi", bias=b.constant(be)))
        d = b.relu(b.conv2d(e, b.constant(wd), input_layout="nhwc", filter_layout="ihwo", groups=C,
                            padding=[1, 1, 1, 1], strides=[2, 2]))
        if not pool:
            return {"y": d}
        h = b.relu(b.conv2d(b.average_pool2d(d, layout="nhwc"), b.constant(w1), input_layout="nhwc",
                            filter_layout="ohwi"))
        s = b.sigmoid(b.conv2d(h, b.constant(w2), input_layout="nhwc", filter_layout="ohwi"))
        return {"y": b.mul(d, s)}

    got = run_graph(ctx, build, {"x": x})["y"].astype(np.float64)
    e = np.maximum(np.einsum("nhwk,ck->nhwc", x.astype(np.float64), we[:, 0, 0, :].astype(np.float64)) + be, 0)
    d = np.maximum(_dw_ref(e, wd.astype(np.float64), 0, 1, 2), 0)
    ref = d
    if pool:
        h = np.maximum(w1[:, 0, 0, :].astype(np.float64) @ d.mean(axis=(1, 2))[0], 0)
        ref = d * _sigmoid(w2[:, 0, 0, :].astype(np.float64) @ h)
    np.testing.assert_allclose(got, ref, atol=tol, rtol=tol)
    templates = _templates(ctx, build, {"x": x})
    assert templates[0] == "conv/depthwise_project.wgsl" and "matmul/tile.wgsl" not in templates
    if pool:
        assert "reduce/columns.wgsl" not in templates and "matmul/squeeze_excite.wgsl" in templates

    x16 = rng.standard_normal((1, 16, 16, K)).astype(np.float32)

    def five_by_five(b, o):
        e = b.conv2d(o["x"], b.constant(we.astype(np.float32)), input_layout="nhwc", filter_layout="ohwi")
        return {"y": b.conv2d(e, b.constant(np.full((1, 5, 5, C), 0.04, np.float32)), input_layout="nhwc",
                              filter_layout="ihwo", groups=C, padding=[2, 2, 2, 2])}

    got = run_graph(ctx, five_by_five, {"x": x16})["y"]
    e16 = np.einsum("nhwk,ck->nhwc", x16.astype(np.float64), we[:, 0, 0, :].astype(np.float64))
    np.testing.assert_allclose(got, _dw_ref(e16, np.full((1, 5, 5, C), 0.04), 0, 2, 1), atol=1e-4, rtol=1e-4)
    assert "conv/depthwise_project.wgsl" not in _templates(ctx, five_by_five, {"x": x16})


@pytest.mark.parametrize("dt,tol", [("float32", 1e-5), ("float16", 3e-3)])
@pytest.mark.parametrize("skip", ["none", "same size", "upsampled"])
def test_global_pool_of_a_first_layer_reads_its_partial_sums(ctx, rng, dt, tol, skip):
    """fuse_pool_partials: the block kernel (3 input channels) writes per-invocation channel
    sums and the global pool (maybe of a skip sum, maybe of an upsampling) reduces those; the
    conv output is still used."""
    npdt = np.float32 if dt == "float32" else np.float16
    x = rng.standard_normal((1, 66, 50, 3)).astype(npdt)  # 33 x 25 outputs: partial blocks at the borders
    w = (rng.standard_normal((16, 3, 3, 3)) * 0.3).astype(npdt)
    r = rng.standard_normal((1, 33, 25, 16)).astype(npdt)
    small = rng.standard_normal((1, 17, 13, 16)).astype(npdt)

    def build(b, o):
        y = b.relu(b.conv2d(o["x"], b.constant(w), input_layout="nhwc", filter_layout="ohwi", padding=[1, 1, 1, 1],
                            strides=[2, 2]))
        v = y
        if skip == "same size":
            v = b.add(y, o["r"])
        return {"y": y, "p": b.average_pool2d(v, layout="nhwc")}

    inputs = {"x": x} | ({"r": r} if skip == "same size" else {})
    if skip == "upsampled":  # an exact 2x upsampling of a 16 x 12 image into 32 x 24 (pool of y[:32, :24])
        x = rng.standard_normal((1, 64, 48, 3)).astype(npdt)
        small = rng.standard_normal((1, 16, 12, 16)).astype(npdt)
        inputs = {"x": x, "s": small}

        def build(b, o):  # noqa: F811
            y = b.relu(b.conv2d(o["x"], b.constant(w), input_layout="nhwc", filter_layout="ohwi",
                                padding=[1, 1, 1, 1], strides=[2, 2]))
            up = b.resample2d(o["s"], mode="linear", scales=[2.0, 2.0], axes=[1, 2])
            return {"y": y, "p": b.average_pool2d(b.add(y, up), layout="nhwc")}

    got = run_graph(ctx, build, inputs)
    y = np.maximum(conv2d_nhwc(x.astype(np.float64), w.astype(np.float64), None, 1, 2), 0)
    np.testing.assert_allclose(got["y"].astype(np.float64), y, atol=tol * 4, rtol=tol * 4)
    v = y + (r.astype(np.float64) if skip == "same size" else 0)
    if skip == "upsampled":
        v = y + ref_resample(small.astype(np.float64), "linear", [32, 24], axes=(1, 2))
    np.testing.assert_allclose(got["p"].astype(np.float64), v.mean(axis=(1, 2), keepdims=True), atol=tol, rtol=tol)
    b = webnn.MLGraphBuilder(ctx)
    g = b.build(build(b, {n: b.input(n, {"data_type": dt, "shape": list(a.shape)}) for n, a in inputs.items()}))
    steps = [s for s in g._steps if hasattr(s, "template")]
    assert steps[0].template == "conv/block.wgsl" and steps[0].node.attrs.get("pool_output") == "partials"
    # the workgroup's sums are added up in the text, not in a loop of constant count (lavapipe
    # unrolls those one iteration per two rounds of its optimisation loop)
    assert "for (var i = 0u;" not in steps[0].wgsl and steps[0].wgsl.count("s = s + wsum[") == 16
    assert any(s.node.attrs.get("input_partials") for s in steps[1:])


@pytest.mark.parametrize("dt,tol", [("float32", 2e-5), ("float16", 2e-2)])
@pytest.mark.parametrize("small_hw, scaled", [((5, 6), False), ((16, 8), True), ((3, 13), True)])
def test_upsampled_skip_is_interpolated_by_the_pointwise_conv(ctx, rng, dt, tol, small_hw, scaled):
    """fuse_conv_upsample: conv1x1(x * s + resample2x(small)) reads the small image and
    interpolates it (clamped borders included); the upsampled image is never written."""
    npdt = np.float32 if dt == "float32" else np.float16
    h, w = small_hw
    C, O = 8, 12
    x = rng.standard_normal((1, 2 * h, 2 * w, C)).astype(npdt)
    small = rng.standard_normal((1, h, w, C)).astype(npdt)
    s = rng.uniform(0.5, 1.5, (1, 1, 1, C)).astype(npdt)
    wt = (rng.standard_normal((O, 1, 1, C)) * 0.3).astype(npdt)
    bias = rng.standard_normal(O).astype(npdt)
    inputs = {"x": x, "small": small} | ({"s": s} if scaled else {})

    def build(b, o):
        v = b.mul(o["x"], o["s"]) if scaled else o["x"]
        up = b.resample2d(o["small"], mode="linear", scales=[2.0, 2.0], axes=[1, 2])
        return {"y": b.relu(b.conv2d(b.add(v, up), b.constant(wt), input_layout="nhwc", filter_layout="ohwi",
                                     bias=b.constant(bias)))}

    got = run_graph(ctx, build, inputs)["y"].astype(np.float64)
    v = x.astype(np.float64) * (s.astype(np.float64) if scaled else 1)
    v = v + ref_resample(small.astype(np.float64), "linear", [2 * h, 2 * w], axes=(1, 2))
    ref = np.maximum(np.einsum("nhwc,oc->nhwo", v, wt[:, 0, 0, :].astype(np.float64)) + bias, 0)
    np.testing.assert_allclose(got, ref, atol=tol, rtol=tol)
    assert _templates(ctx, build, inputs) == ["matmul/tile.wgsl"]


def test_upsampling_used_twice_stays_a_kernel(ctx, rng):
    x = rng.standard_normal((1, 8, 8, 4)).astype(np.float32)
    small = rng.standard_normal((1, 4, 4, 4)).astype(np.float32)
    wt = rng.standard_normal((4, 1, 1, 4)).astype(np.float32)

    def build(b, o):
        up = b.resample2d(o["small"], mode="linear", scales=[2.0, 2.0], axes=[1, 2])
        y = b.conv2d(b.add(o["x"], up), b.constant(wt), input_layout="nhwc", filter_layout="ohwi")
        return {"y": y, "up": up}

    got = run_graph(ctx, build, {"x": x, "small": small})
    up = ref_resample(small.astype(np.float64), "linear", [8, 8], axes=(1, 2))
    np.testing.assert_allclose(got["up"], up, atol=1e-5)
    np.testing.assert_allclose(got["y"], np.einsum("nhwc,oc->nhwo", x + up, wt[:, 0, 0, :]), atol=1e-4, rtol=1e-4)
    assert "resample/resample2d_x2.wgsl" in _templates(ctx, build, {"x": x, "small": small})


def _nodes(ctx, build, inputs: dict) -> list:
    b = webnn.MLGraphBuilder(ctx)
    g = b.build(build(b, {n: b.input(n, {"data_type": webnn._dtypes.from_numpy(a.dtype), "shape": list(a.shape)})
                          for n, a in inputs.items()}))
    nodes = [s.node for s in g._steps if getattr(s, "node", None) is not None]
    g.destroy()
    return nodes


@pytest.mark.parametrize("tuning", ["lane-loop", "default"])
@pytest.mark.parametrize("dt,tol", [("float32", 2e-5), ("float16", 2e-2)])
@pytest.mark.parametrize("reader", ["squeeze-excite", "pool"])
@pytest.mark.parametrize("hw", [(18, 14), (32, 24)])  # partial row tiles and blocks; whole ones
def test_pool_of_a_skip_plus_upsampling_sums_its_producers_partials(ctx, rng, monkeypatch, tuning, dt, tol, reader,
                                                                    hw):
    """fuse_pool_partials on the segmenter's decoder stage: the global pool of skip +
    upsample2x(small), where the skip is a pointwise conv (tile kernel) and the small image a
    depthwise conv + projection, reads both kernels' partial sums (the small one's counted
    four times); the excitation's kernel takes the means (no pool kernel), or the pool reduces
    the partials. Both images keep their other readers."""
    monkeypatch.setattr(ctx, "_tuning", tuning)
    npdt = np.float32 if dt == "float32" else np.float16
    (h, w), C, R = hw, 16, 8
    x = rng.standard_normal((1, h, w, 12)).astype(npdt)
    z = rng.standard_normal((1, h // 2, w // 2, 8)).astype(npdt)
    wt = (rng.standard_normal((C, 1, 1, 12)) * 0.3).astype(npdt)
    bt = rng.standard_normal(C).astype(npdt)
    wd = (rng.standard_normal((1, 3, 3, 8)) * 0.3).astype(npdt)
    wp = (rng.standard_normal((C, 1, 1, 8)) * 0.3).astype(npdt)
    bp = rng.standard_normal(C).astype(npdt)
    w1 = (rng.standard_normal((R, 1, 1, C)) * 0.3).astype(npdt)
    w2 = (rng.standard_normal((C, 1, 1, R)) * 0.3).astype(npdt)
    inputs = {"x": x, "z": z}

    def build(b, o):
        skip = b.relu(b.conv2d(o["x"], b.constant(wt), input_layout="nhwc", filter_layout="ohwi",
                               bias=b.constant(bt)))
        d = b.conv2d(o["z"], b.constant(wd), input_layout="nhwc", filter_layout="ihwo", groups=8, padding=[1] * 4)
        small = b.conv2d(b.relu(d), b.constant(wp), input_layout="nhwc", filter_layout="ohwi", bias=b.constant(bp))
        up = b.resample2d(small, mode="linear", scales=[2.0, 2.0], axes=[1, 2])
        p = b.average_pool2d(b.add(skip, up), layout="nhwc")
        if reader == "pool":
            return {"p": p, "skip": skip, "small": small}
        s = b.sigmoid(b.conv2d(b.relu(b.conv2d(p, b.constant(w1), input_layout="nhwc", filter_layout="ohwi")),
                               b.constant(w2), input_layout="nhwc", filter_layout="ohwi"))
        return {"y": b.mul(skip, s), "small": small}

    got = {k: v.astype(np.float64) for k, v in run_graph(ctx, build, inputs).items()}
    skip = np.maximum(np.einsum("nhwc,oc->nhwo", x.astype(np.float64), wt[:, 0, 0, :].astype(np.float64)) + bt, 0)
    d = np.maximum(_dw_ref(z.astype(np.float64), wd.astype(np.float64), 0, 1, 1), 0)
    small = np.einsum("nhwc,oc->nhwo", d, wp[:, 0, 0, :].astype(np.float64)) + bp
    p = (skip + ref_resample(small, "linear", [h, w], axes=(1, 2))).mean(axis=(1, 2), keepdims=True)
    np.testing.assert_allclose(got["small"], small, atol=tol * 2, rtol=tol * 2)
    if reader == "pool":
        np.testing.assert_allclose(got["p"], p, atol=tol, rtol=tol)
        np.testing.assert_allclose(got["skip"], skip, atol=tol * 2, rtol=tol * 2)
    else:
        hid = np.maximum(np.einsum("nhwc,oc->nhwo", p, w1[:, 0, 0, :].astype(np.float64)), 0)
        s = _sigmoid(np.einsum("nhwc,oc->nhwo", hid, w2[:, 0, 0, :].astype(np.float64)))
        np.testing.assert_allclose(got["y"], skip * s, atol=tol * 2, rtol=tol * 2)
    nodes = _nodes(ctx, build, inputs)
    ops = [n.op for n in nodes]
    assert [n.attrs.get("pool_output") for n in nodes[:2]] == ["partials", "partials"], ops
    assert {nodes[0].op, nodes[1].op} == {"conv2d", "depthwise_project"}
    if reader == "pool":
        (pool,) = [n for n in nodes if n.op == "average_pool2d"]
        assert pool.attrs["input_partials"] == h * w and pool.attrs["input_add_partials"]
    else:
        assert "average_pool2d" not in ops and "squeeze_excite" in ops


@pytest.mark.parametrize("dt,tol", [("float32", 2e-5), ("float16", 2e-2)])
@pytest.mark.parametrize("follow", ["mul", "two layers"])
def test_one_layer_attention_on_partial_sums_runs_in_the_excitation_kernel(ctx, rng, dt, tol, follow):
    """fuse_squeeze_excite with one layer: pool (from a pointwise conv's partial sums) -> 1x1
    conv -> sigmoid is one squeeze_excite kernel (no pool kernel, no small product); a second
    1x1 conv after it makes the usual two-layer kernel instead."""
    npdt = np.float32 if dt == "float32" else np.float16
    C, O = 12, 20
    x = rng.standard_normal((1, 9, 10, C)).astype(npdt)
    wt = (rng.standard_normal((O, 1, 1, C)) * 0.3).astype(npdt)
    w1 = (rng.standard_normal((O, 1, 1, O)) * 0.3).astype(npdt)
    b1 = rng.standard_normal(O).astype(npdt)
    w2 = (rng.standard_normal((O, 1, 1, O)) * 0.3).astype(npdt)

    def build(b, o):
        y = b.conv2d(o["x"], b.constant(wt), input_layout="nhwc", filter_layout="ohwi")
        p = b.average_pool2d(y, layout="nhwc")
        s = b.conv2d(p, b.constant(w1), input_layout="nhwc", filter_layout="ohwi", bias=b.constant(b1))
        if follow == "two layers":
            s = b.conv2d(b.relu(s), b.constant(w2), input_layout="nhwc", filter_layout="ohwi")
        return {"y": b.mul(y, b.sigmoid(s))}

    got = run_graph(ctx, build, {"x": x})["y"].astype(np.float64)
    y = np.einsum("nhwc,oc->nhwo", x.astype(np.float64), wt[:, 0, 0, :].astype(np.float64))
    s = w1[:, 0, 0, :].astype(np.float64) @ y.mean(axis=(1, 2))[0] + b1
    if follow == "two layers":
        s = w2[:, 0, 0, :].astype(np.float64) @ np.maximum(s, 0)
    np.testing.assert_allclose(got, y * _sigmoid(s), atol=tol, rtol=tol)
    nodes = _nodes(ctx, build, {"x": x})
    (se,) = [n for n in nodes if n.op == "squeeze_excite"]
    assert [n.op for n in nodes if n.op in ("average_pool2d", "conv2d")] == ["conv2d"]
    assert (se.attrs["fc2"] is None) == (follow == "mul") and se.attrs["rows"] == nodes[0].outputs[1].shape[0]


# ---------------------------------------------------------------- rules that must not fire
# Each graph below was given a wrong result or a failed build by a rule that fired where it
# did not apply; every one is right with the passes off.
def _f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def _after_passes(ctx, build, shapes: dict):
    """The node list the compiler passes make of ``build``'s graph (no kernels built)."""
    b = webnn.MLGraphBuilder(ctx)
    ops = {n: b.input(n, {"data_type": "float32", "shape": list(s)}) for n, s in shapes.items()}
    outs = {k: v._value for k, v in build(b, ops).items()}
    nodes = compiler.run_passes(list(b._nodes), outs, ctx)
    return nodes


def _nchw(y):
    return y.transpose(0, 2, 3, 1)


def _conv_ref(x_nhwc, w, layout, bias=None):
    """conv2d of an NHWC input with a 1x1 filter in ``layout``, float64 (references.ref_conv2d)."""
    oihw = np.transpose(w, [layout.index(ch) for ch in "oihw"]).astype(np.float64)
    out = _nchw(ref_conv2d(x_nhwc.astype(np.float64).transpose(0, 3, 1, 2), oihw))
    return out if bias is None else out + bias


def test_three_pointwise_convs_on_a_pooled_pixel_keep_every_layer(ctx, rng):
    """fuse_squeeze_excite paired (c1, c2) and then (c2, c3): the second pair dropped the first,
    so c1's result was never computed (every output wrong). Filters in every layout."""
    x = _f32(rng, 1, 1, 1, 16)
    w1, b1 = _f32(rng, 16, 1, 1, 4), _f32(rng, 4)  # ihwo
    w2, b2 = _f32(rng, 1, 1, 4, 8), _f32(rng, 8)  # hwio
    w3, b3 = _f32(rng, 8, 1, 1, 5), _f32(rng, 5)  # ihwo

    def build(b, o):
        p = b.average_pool2d(o["x"], window_dimensions=[1, 1], layout="nhwc")
        c1 = b.conv2d(p, b.constant(w1), input_layout="nhwc", filter_layout="ihwo", bias=b.constant(b1))
        c2 = b.conv2d(c1, b.constant(w2), input_layout="nhwc", filter_layout="hwio", bias=b.constant(b2))
        return {"y": b.conv2d(c2, b.constant(w3), input_layout="nhwc", filter_layout="ihwo", bias=b.constant(b3))}

    ref = _conv_ref(_conv_ref(_conv_ref(x, w1, "ihwo", b1), w2, "hwio", b2), w3, "ihwo", b3)
    np.testing.assert_allclose(run_graph(ctx, build, {"x": x})["y"], ref, rtol=1e-5, atol=1e-5)

    # the global pool of an NCHW-sized image, a filter made by transpose, no bias on the first two
    x = _f32(rng, 1, 22, 16, 16)
    w1, w2t, w3, b3 = _f32(rng, 10, 1, 1, 16), _f32(rng, 4, 1, 1, 10), _f32(rng, 4, 1, 1, 26), _f32(rng, 26)

    def build2(b, o):
        p = b.average_pool2d(o["x"], window_dimensions=[22, 16], layout="nhwc")
        c1 = b.conv2d(p, b.constant(w1), input_layout="nhwc", filter_layout="ohwi")
        w2 = b.transpose(b.constant(w2t), permutation=[3, 1, 2, 0])  # ohwi -> ihwo
        c2 = b.conv2d(c1, w2, input_layout="nhwc", filter_layout="ihwo")
        return {"y": b.conv2d(c2, b.constant(w3), input_layout="nhwc", filter_layout="ihwo", bias=b.constant(b3))}

    pooled = x.astype(np.float64).mean(axis=(1, 2), keepdims=True)
    ref = _conv_ref(_conv_ref(_conv_ref(pooled, w1, "ohwi"), w2t, "ohwi"), w3, "ihwo", b3)
    np.testing.assert_allclose(run_graph(ctx, build2, {"x": x})["y"], ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("form", ["s*x", "x*s", "s4*x", "x+c4", "c4*x"])
def test_input_prologue_of_a_conv_without_bias(ctx, rng, form):
    """fuse_conv_input put its operand at input 2, the conv's bias slot: a [24] scale was also
    added as a bias (wrong values), a [1, 1, 1, 12] one failed the build."""
    C = 24 if form in ("s*x", "x*s") else 12
    x, s = _f32(rng, 1, 33, 33, C) if C == 24 else _f32(rng, 1, 14, 14, C), _f32(rng, C)
    c4 = _f32(rng, 1, 1, 1, C)
    w = _f32(rng, 1, 1, C, C)  # hwio

    def build(b, o):
        v = {"s*x": lambda: b.mul(o["s"], o["x"]), "x*s": lambda: b.mul(o["x"], o["s"]),
             "s4*x": lambda: b.mul(b.reshape(o["s"], [1, 1, 1, C]), o["x"]),
             "x+c4": lambda: b.add(o["x"], b.constant(c4)), "c4*x": lambda: b.mul(b.constant(c4), o["x"])}[form]()
        return {"y": b.conv2d(v, b.constant(w), input_layout="nhwc", filter_layout="hwio")}

    x64 = x.astype(np.float64)
    v = x64 + c4 if form == "x+c4" else x64 * c4 if form == "c4*x" else x64 * s
    ref = _conv_ref(v, w, "hwio")
    got = run_graph(ctx, build, {"x": x, "s": s})["y"]
    np.testing.assert_allclose(got, ref, rtol=2e-5, atol=2e-5 * np.abs(ref).max())
    nodes = _after_passes(ctx, build, {"x": x.shape, "s": s.shape})
    if form != "x+c4":  # (a per-channel add is no input prologue the conv takes)
        assert [n.op for n in nodes if n.op != "reshape"] == ["conv2d"], "the scale still folds"
        assert nodes[-1].inputs[2] is None, "the bias slot stays empty"


def test_upsampling_then_conv_with_a_computed_filter_keeps_the_order(ctx, rng, monkeypatch):
    """swap_resample_conv put the conv at the resample's place, before the node computing its
    filter: on a first run (no warm-up) the conv read an unwritten filter. NCHW, axes [3, 2]."""
    monkeypatch.setenv("WEBNN_GPU_WARMUP", "0")
    x, w, bias = _f32(rng, 1, 12, 8, 8), _f32(rng, 6, 1, 1, 12), _f32(rng, 6)

    def build(b, o):
        up = b.resample2d(o["x"], mode="linear", scales=[2, 2], axes=[3, 2])
        f = b.linear(b.constant(w), alpha=1.0, beta=0.0)
        return {"y": b.conv2d(up, f, input_layout="nchw", filter_layout="ohwi", bias=b.abs(b.constant(bias)))}

    up = ref_resample(x, "linear", [16, 16], axes=(3, 2))
    ref = ref_conv2d(up, w.transpose(0, 3, 1, 2).astype(np.float64)) + np.abs(bias).reshape(1, 6, 1, 1)
    np.testing.assert_allclose(run_graph(ctx, build, {"x": x})["y"], ref, rtol=1e-5, atol=1e-5)
    nodes = _after_passes(ctx, build, {"x": x.shape})
    assert [n.op for n in nodes][-2:] == ["conv2d", "resample2d"], "the conv still runs on the small image"


def test_a_pass_that_breaks_the_order_fails_the_build(ctx, monkeypatch):
    """check_order: a node reading a value computed later is a build error, not a wrong result."""
    def swap(nodes, outputs, context=None):
        return nodes[::-1]

    swap.__name__ = "reverse_everything"
    monkeypatch.setattr(driver, "ORDER", (*driver.ORDER, Stage("wrong", (Rule(swap, "breaks the order"),))))
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [4]})
    with pytest.raises(webnn.OperationError, match="reverse_everything: .* reads"):
        b.build({"y": b.relu(b.reduce_sum(x, axes=[0]))})


@pytest.mark.parametrize("layout", ["nhwc", "nchw"])
@pytest.mark.parametrize("op", ["add", "mul"])
def test_per_channel_operand_of_any_rank_after_a_conv(ctx, rng, layout, op):
    """A [1, 1, 1, O] / [1, O, 1, 1] / [O, 1, 1] / scalar operand after a conv: read at the channel."""
    x = _f32(rng, 1, 14, 14, 12) if layout == "nhwc" else _f32(rng, 1, 12, 14, 14)
    w = _f32(rng, 8, 3, 3, 12)  # ohwi
    shape = (1, 1, 1, 8) if layout == "nhwc" else (8, 1, 1)
    c, k = _f32(rng, *shape), _f32(rng, 1, 1)

    def build(b, o):
        y = b.conv2d(o["x"], b.constant(w), padding=[1, 0, 0, 1], input_layout=layout, filter_layout="ohwi")
        y = getattr(b, op)(b.constant(c), y) if op == "mul" else getattr(b, op)(y, o["c"])
        return {"y": b.sub(y, b.constant(k))}

    oihw = w.transpose(0, 3, 1, 2).astype(np.float64)
    x_nchw = x.transpose(0, 3, 1, 2) if layout == "nhwc" else x
    ref = ref_conv2d(x_nchw.astype(np.float64), oihw, padding=(1, 0, 0, 1))
    ref = ref.transpose(0, 2, 3, 1) if layout == "nhwc" else ref
    ref = (ref + c if op == "add" else ref * c) - k
    got = run_graph(ctx, build, {"x": x, "c": c})["y"]
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-4)
    nodes = _after_passes(ctx, build, {"x": x.shape, "c": c.shape})
    assert [n.op for n in nodes if n.op != "reshape"] == ["conv2d"]
    assert all("axis" in st for st in nodes[-1].attrs["epilogue"]), "both operands read at the channel"


def test_long_elementwise_chain_after_depthwise_and_projection_builds_fast(ctx, rng):
    """A chain of 26 element-wise ops with constants after a depthwise conv and its projection
    (both unrolled pixel-block kernels): folded whole, the kernel took minutes to compile."""
    import time

    C, H, W = 24, 40, 41
    x, r = _f32(rng, 1, H, W, C), _f32(rng, 1, H, W, C)
    wd, bd, wp, bp = _f32(rng, C, 3, 3, 1), _f32(rng, C), _f32(rng, C, 1, 1, C) * 0.2, _f32(rng, C)
    consts = [_f32(rng, C) * 0.1 if i % 3 == 0 else np.array(0.05 * i, np.float32) for i in range(26)]
    ops = ["add", "sub", "max", "min"]

    def chain(b, y, o, which):
        for i in range(13):
            k = 13 * which + i
            y = getattr(b, ops[k % 4])(y, b.constant(consts[k]))
            if i == 6:
                y = b.add(y, o["r"])
        return y

    def build(b, o):
        y = b.conv2d(o["x"], b.constant(wd), padding=[1, 1, 1, 1], groups=C, input_layout="nhwc",
                     filter_layout="ohwi", bias=b.constant(bd))
        y = chain(b, y, o, 0)
        y = b.conv2d(y, b.constant(wp), input_layout="nhwc", filter_layout="ohwi", bias=b.constant(bp))
        return {"y": chain(b, y, o, 1)}

    nodes = _after_passes(ctx, build, {"x": x.shape, "r": r.shape})
    for n in nodes:
        for host in [n, *(n.attrs.get(k) for k in ("depthwise", "project", "expand"))]:
            steps = getattr(host, "attrs", {}).get("epilogue") or []
            assert len(steps) <= _epilogue_rule.EPILOGUE_MAX_STEPS
            assert sum("input" in st and "axis" not in st for st in steps) <= _epilogue_rule.EPILOGUE_MAX_LOADS

    def ref_chain(y, which):
        for i in range(13):
            k = 13 * which + i
            y = {"add": np.add, "sub": np.subtract, "max": np.maximum, "min": np.minimum}[ops[k % 4]](y, consts[k])
            if i == 6:
                y = y + r
        return y

    y = ref_chain(conv2d_nhwc(x, wd, bd, pad=1, groups=C), 0)
    ref = ref_chain(conv2d_nhwc(y, wp, bp), 1)
    t0 = time.perf_counter()
    got = run_graph(ctx, build, {"x": x, "r": r}, tensor_path=False)["y"]
    assert time.perf_counter() - t0 < 60, "build and run stay within seconds (minutes when folded whole)"
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-4)


def test_pool_of_a_sum_on_a_single_pixel(ctx, rng):
    """fuse_pool_input on a 1x1 image: the pool is no reduction that can add the second source."""
    a, c = _f32(rng, 1, 1, 1, 20), _f32(rng, 1, 1, 1, 20)
    got = run_graph(ctx, lambda b, o: {"y": b.average_pool2d(b.add(o["a"], o["c"]), layout="nhwc")},
                    {"a": a, "c": c})["y"]
    np.testing.assert_allclose(got, a.astype(np.float64) + c, rtol=1e-6, atol=1e-6)
