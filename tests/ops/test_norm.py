"""batch/instance/layer normalization and softmax against NumPy float64 references.

References follow the spec's formulas: ``(x - mean) / sqrt(variance + epsilon) * scale + bias``
with the population variance over the normalized axes, and ``exp(x) / sum(exp(x))`` (with the
max subtracted in float64 only to avoid overflow in the reference itself). The kernels compute
in f32, so float32 results are compared with a few-ULP relative tolerance plus an absolute
term for values near zero; float16 results within about one float16 rounding.
"""

from __future__ import annotations

import numpy as np
import pytest

import webnn_gpu as webnn
from helpers import assert_close, kernel_templates, run_graph

TOL = {np.float32: (2e-5, 2e-5), np.float16: (4e-3, 2e-3)}


def ref_normalize(x, mean, var, scale, bias, eps):
    y = (x.astype(np.float64) - mean) / np.sqrt(var + eps)
    if scale is not None:
        y = y * scale
    if bias is not None:
        y = y + bias
    return y


def _eps_as(eps, dtype):
    with np.errstate(all="ignore"):
        return float(np.asarray(eps, dtype))


# ---------------------------------------------------------------- batch_normalization
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_batch_normalization_every_option(ctx, rng, dtype):
    x = rng.standard_normal((2, 3, 4, 5)).astype(dtype)
    cases = [  # (axis, scale?, bias?, epsilon)
        (1, True, True, 1e-5), (1, False, False, 1e-5), (3, True, False, 1e-3), (0, False, True, 0.5),
        (2, True, True, 1e-5)]
    params = {}
    for i, (axis, _, _, _) in enumerate(cases):
        c = x.shape[axis]
        params[i] = {"mean": rng.standard_normal(c).astype(dtype), "var": rng.uniform(0.1, 2, c).astype(dtype),
                     "scale": rng.standard_normal(c).astype(dtype), "bias": rng.standard_normal(c).astype(dtype)}

    def build(b, o):
        outs = {}
        for i, (axis, sc, bi, eps) in enumerate(cases):
            p = params[i]
            kw = {"axis": axis, "epsilon": eps}
            if sc:
                kw["scale"] = b.constant(p["scale"])
            if bi:
                kw["bias"] = b.constant(p["bias"])
            outs[f"y{i}"] = b.batch_normalization(o["x"], b.constant(p["mean"]), b.constant(p["var"]), **kw)
        return outs

    out = run_graph(ctx, build, {"x": x})
    for i, (axis, sc, bi, eps) in enumerate(cases):
        p = params[i]
        shp = [1] * 4
        shp[axis] = -1
        f = {k: v.astype(np.float64).reshape(shp) for k, v in p.items()}
        exp = ref_normalize(x, f["mean"], f["var"], f["scale"] if sc else None, f["bias"] if bi else None,
                            _eps_as(eps, dtype))
        atol, rtol = TOL[dtype]
        assert out[f"y{i}"].dtype == dtype
        assert_close(out[f"y{i}"], exp, atol=atol, rtol=rtol, err_msg=f"case {i}")


def test_batch_normalization_rank1_and_2(ctx, rng):
    x1 = rng.standard_normal(6).astype(np.float32)
    x2 = rng.standard_normal((5, 6)).astype(np.float32)
    m, v = np.float32([0.5] * 6), np.float32([2.0] * 6)

    def build(b, o):
        mean, var = b.constant(m), b.constant(v)
        return {"a": b.batch_normalization(o["a"], mean, var, axis=0),
                "b": b.batch_normalization(o["b"], mean, var)}

    out = run_graph(ctx, build, {"a": x1, "b": x2})
    assert_close(out["a"], (x1 - 0.5) / np.sqrt(2 + 1e-5), atol=1e-6, rtol=1e-6)
    assert_close(out["b"], (x2 - 0.5) / np.sqrt(2 + 1e-5), atol=1e-6, rtol=1e-6)


# ---------------------------------------------------------------- instance_normalization
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_instance_normalization_layouts(ctx, rng, dtype):
    x = (rng.standard_normal((2, 3, 5, 7)) * 2 + 1).astype(dtype)
    scale = rng.standard_normal(3).astype(dtype)
    bias = rng.standard_normal(3).astype(dtype)
    xh = np.ascontiguousarray(x.transpose(0, 2, 3, 1))

    def build(b, o):
        s, bb = b.constant(scale), b.constant(bias)
        return {"plain": b.instance_normalization(o["x"]),
                "full": b.instance_normalization(o["x"], scale=s, bias=bb, epsilon=1e-2),
                "nhwc": b.instance_normalization(o["xh"], scale=s, bias=bb, layout="nhwc")}

    out = run_graph(ctx, build, {"x": x, "xh": xh})
    xd = x.astype(np.float64)
    mean = xd.mean(axis=(2, 3), keepdims=True)
    var = xd.var(axis=(2, 3), keepdims=True)
    s64, b64 = scale.astype(np.float64).reshape(1, 3, 1, 1), bias.astype(np.float64).reshape(1, 3, 1, 1)
    atol, rtol = TOL[dtype]
    assert_close(out["plain"], ref_normalize(xd, mean, var, None, None, _eps_as(1e-5, dtype)), atol=atol, rtol=rtol)
    assert_close(out["full"], ref_normalize(xd, mean, var, s64, b64, _eps_as(1e-2, dtype)), atol=atol, rtol=rtol)
    exp_nhwc = ref_normalize(xd, mean, var, s64, b64, _eps_as(1e-5, dtype)).transpose(0, 2, 3, 1)
    assert_close(out["nhwc"], exp_nhwc, atol=atol, rtol=rtol)


def test_instance_normalization_large_plane(ctx, rng):
    """256x300 values per channel: one workgroup per (n, c), two passes."""
    x = (rng.standard_normal((1, 2, 256, 300)) * 3 + 100).astype(np.float32)
    out = run_graph(ctx, lambda b, o: {"y": b.instance_normalization(o["x"])}, {"x": x}, tensor_path=False)
    xd = x.astype(np.float64)
    exp = ref_normalize(xd, xd.mean(axis=(2, 3), keepdims=True), xd.var(axis=(2, 3), keepdims=True), None, None, 1e-5)
    # large mean (100) and small spread: the two-pass variance keeps full precision
    assert_close(out["y"], exp, atol=5e-5, rtol=5e-5)


# ---------------------------------------------------------------- layer_normalization
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_layer_normalization_axes(ctx, rng, dtype):
    x = (rng.standard_normal((2, 3, 4, 5)) + 0.5).astype(dtype)
    cases = [None, [3], [1, 2, 3], [3, 1], [0], []]
    params = {}
    for i, axes in enumerate(cases):
        ax = [1, 2, 3] if axes is None else axes
        shp = [x.shape[a] for a in ax]
        params[i] = (rng.standard_normal(shp).astype(dtype), rng.standard_normal(shp).astype(dtype))

    def build(b, o):
        outs = {}
        for i, axes in enumerate(cases):
            s, bb = params[i]
            kw = {} if axes is None else {"axes": axes}
            outs[f"plain{i}"] = b.layer_normalization(o["x"], **kw)
            outs[f"full{i}"] = b.layer_normalization(o["x"], scale=b.constant(s), bias=b.constant(bb), epsilon=1e-3,
                                                     **kw)
        return outs

    out = run_graph(ctx, build, {"x": x})
    xd = x.astype(np.float64)
    atol, rtol = TOL[dtype]
    for i, axes in enumerate(cases):
        ax = [1, 2, 3] if axes is None else axes
        t = tuple(ax)
        mean = xd.mean(axis=t, keepdims=True) if t else xd
        var = xd.var(axis=t, keepdims=True) if t else np.zeros_like(xd)
        s, bb = params[i]
        # scale/bias have the shape [x.shape[a] for a in axes]: move their axes into place
        order = sorted(range(len(ax)), key=lambda j: ax[j])
        full_shape = [x.shape[d] if d in ax else 1 for d in range(4)]
        s64 = s.astype(np.float64).transpose(order).reshape(full_shape)
        b64 = bb.astype(np.float64).transpose(order).reshape(full_shape)
        assert_close(out[f"plain{i}"], ref_normalize(xd, mean, var, None, None, _eps_as(1e-5, dtype)), atol=atol,
                     rtol=rtol, err_msg=f"axes={axes}")
        assert_close(out[f"full{i}"], ref_normalize(xd, mean, var, s64, b64, _eps_as(1e-3, dtype)), atol=atol,
                     rtol=rtol, err_msg=f"axes={axes} scale+bias")


@pytest.mark.parametrize("shape, templates", [
    ((2, 3000), ["norm/layer_norm.wgsl"]),  # few long rows: a workgroup per row
    ((40, 24), ["norm/layer_norm.wgsl"]),  # many short rows: an invocation per row
    ((2, 4100), ["norm/moments.wgsl", "norm/normalize.wgsl"])])  # past ROW_KERNEL_MAX: two kernels
def test_layer_normalization_row_kernel_with_epilogue(ctx, rng, shape, templates):
    """Statistics and outputs in one kernel for rows up to ROW_KERNEL_MAX values, with a fused
    epilogue (a residual add, then relu) in either form."""
    x = (rng.standard_normal(shape) * 2 + 3).astype(np.float32)
    res = rng.standard_normal(shape).astype(np.float32)
    s, bb = rng.standard_normal(shape[1:]).astype(np.float32), rng.standard_normal(shape[1:]).astype(np.float32)

    def build(b, o):
        y = b.layer_normalization(o["x"], axes=[1], scale=b.constant(s), bias=b.constant(bb), epsilon=1e-3)
        return {"y": b.relu(b.add(y, o["r"]))}

    out = run_graph(ctx, build, {"x": x, "r": res})
    xd = x.astype(np.float64)
    ref = ref_normalize(xd, xd.mean(axis=1, keepdims=True), xd.var(axis=1, keepdims=True), s.astype(np.float64),
                        bb.astype(np.float64), _eps_as(1e-3, np.float32))
    assert_close(out["y"], np.maximum(ref + res, 0.0), atol=1e-5, rtol=1e-5)
    assert kernel_templates(ctx, build, {"x": x, "r": res}) == templates


def test_layer_normalization_rank0_rank1_and_nan(ctx):
    x0 = np.array(3.5, np.float32)
    x1 = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    xn = np.array([[1.0, np.nan, 3.0], [1.0, 2.0, 3.0]], np.float32)

    def build(b, o):
        return {"a": b.layer_normalization(o["x0"]), "b": b.layer_normalization(o["x1"]),
                "c": b.layer_normalization(o["x1"], axes=[0]), "d": b.layer_normalization(o["xn"])}

    out = run_graph(ctx, build, {"x0": x0, "x1": x1, "xn": xn})
    assert out["a"].shape == () and out["a"] == 0  # nothing reduced: (x - x) / sqrt(eps)
    np.testing.assert_array_equal(out["b"], np.zeros(4, np.float32))  # default axes of rank 1: none
    m, v = x1.mean(), x1.var()
    assert_close(out["c"], (x1 - m) / np.sqrt(v + 1e-5), atol=1e-6, rtol=1e-6)
    assert np.all(np.isnan(out["d"][0])) and not np.any(np.isnan(out["d"][1]))


# ---------------------------------------------------------------- softmax
def ref_softmax(x, axis):
    xd = x.astype(np.float64)
    with np.errstate(all="ignore"):
        e = np.exp(xd - xd.max(axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_softmax_every_axis(ctx, rng, dtype):
    x = (rng.standard_normal((3, 4, 70)) * 4).astype(dtype)  # axis 2 (70) runs one workgroup per line
    big = np.full((2, 100), 3000, np.float32)  # exp would overflow without the max shift
    big[:, 0] = 3001

    def build(b, o):
        outs = {f"y{a}": b.softmax(o["x"], a) for a in range(3)}
        if dtype == np.float32:
            outs["big"] = b.softmax(o["big"], 1)
        return outs

    inputs = {"x": x}
    if dtype == np.float32:
        inputs["big"] = big
    out = run_graph(ctx, build, inputs)
    atol, rtol = (1e-6, 1e-5) if dtype == np.float32 else (1e-4, 2e-3)
    for a in range(3):
        assert out[f"y{a}"].dtype == dtype
        assert_close(out[f"y{a}"], ref_softmax(x, a), atol=atol, rtol=rtol, err_msg=f"axis {a}")
    if dtype == np.float32:
        assert np.all(np.isfinite(out["big"]))
        assert_close(out["big"], ref_softmax(big, 1), atol=1e-7, rtol=1e-5)


def test_softmax_many_short_lines_and_special_values(ctx, rng):
    x = rng.standard_normal((70_000, 2)).astype(np.float32)  # 70,000 lines of 2: one invocation per line
    s = np.array([[0.0, -np.inf, 1.0], [np.nan, 1.0, 2.0], [5.0, 5.0, 5.0]], np.float32)
    out = run_graph(ctx, lambda b, o: {"a": b.softmax(o["x"], 1), "b": b.softmax(o["s"], 1)}, {"x": x, "s": s})
    assert_close(out["a"], ref_softmax(x, 1), atol=1e-7, rtol=1e-5)
    assert_close(out["b"], ref_softmax(s, 1), atol=1e-7, rtol=1e-6)
    assert out["b"][0, 1] == 0 and np.all(np.isnan(out["b"][1]))


# ---------------------------------------------------------------- validation
def test_normalization_validation_errors(ctx):
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [2, 3, 4, 5]})
    h = b.input("h", {"data_type": "float16", "shape": [3]})
    c3 = b.input("c3", {"data_type": "float32", "shape": [3]})
    c4 = b.input("c4", {"data_type": "float32", "shape": [4]})
    i = b.input("i", {"data_type": "int32", "shape": [2, 3]})
    with pytest.raises(webnn.MLTypeError, match=r"batch_normalization \['bn'\]: argument 'mean': expected shape \[3\]"):
        b.batch_normalization(x, c4, c3, label="bn")
    with pytest.raises(webnn.MLTypeError, match="argument 'variance': expected an operand of the input's data type"):
        b.batch_normalization(x, c3, h)
    with pytest.raises(webnn.MLTypeError, match="argument 'scale': expected shape \\[4\\]"):
        b.batch_normalization(x, c4, c4, axis=2, scale=c3)
    with pytest.raises(webnn.MLTypeError, match="argument 'axis'"):
        b.batch_normalization(x, c3, c3, axis=4)
    with pytest.raises(webnn.MLTypeError, match="argument 'input'.*got 'int32'"):
        b.batch_normalization(i, c3, c3)
    with pytest.raises(webnn.MLTypeError, match="argument 'epsilon': expected a number"):
        b.batch_normalization(x, c3, c3, epsilon="small")
    with pytest.raises(webnn.MLTypeError, match="instance_normalization: argument 'input': expected a 4-D operand"):
        b.instance_normalization(c3)
    with pytest.raises(webnn.MLTypeError, match="argument 'layout'"):
        b.instance_normalization(x, layout="nwhc")
    with pytest.raises(webnn.MLTypeError, match="argument 'bias': expected shape \\[5\\]"):
        b.instance_normalization(x, bias=c3, layout="nhwc")
    with pytest.raises(webnn.MLTypeError, match="layer_normalization: argument 'axes'"):
        b.layer_normalization(x, axes=[1, 1])
    with pytest.raises(webnn.MLTypeError, match="layer_normalization: argument 'axes'"):
        b.layer_normalization(x, axes=[4])
    with pytest.raises(webnn.MLTypeError, match=r"argument 'scale': expected shape \[5, 3\]"):
        b.layer_normalization(x, axes=[3, 1], scale=c3)
    with pytest.raises(webnn.MLTypeError, match="unknown option"):
        b.layer_normalization(x, axis=1)
    with pytest.raises(webnn.MLTypeError, match="softmax: argument 'axis'"):
        b.softmax(x, 4)
    with pytest.raises(webnn.MLTypeError, match="softmax: argument 'axis'"):
        b.softmax(b.input("s", {"data_type": "float32", "shape": []}), 0)
    with pytest.raises(webnn.MLTypeError, match="softmax: argument 'input'.*got 'int32'"):
        b.softmax(i, 1)
    other = webnn.MLGraphBuilder(ctx).input("o", {"data_type": "float32", "shape": [3]})
    with pytest.raises(webnn.MLTypeError, match="argument 'scale'.*another builder"):
        b.instance_normalization(x, scale=other)
    g = b.build({"y": b.softmax(x, 3)})
    out = ctx.compute(g, {"x": np.zeros((2, 3, 4, 5), np.float32)})
    np.testing.assert_allclose(out["y"], np.full((2, 3, 4, 5), 0.2), rtol=1e-6)
