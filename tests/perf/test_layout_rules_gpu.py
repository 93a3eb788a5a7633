"""prelu in fused epilogues and the ``fold_layout`` rule on the GPU: the fused graphs give the
float64 NumPy results in fewer kernels, and the near misses stay right."""

from __future__ import annotations

import numpy as np
import pytest

import webnn_gpu as webnn

from helpers import kernel_templates as _templates
from helpers import run_graph
from references import ref_conv2d, ref_resample


def _conv_nhwc(x, w_ohwi, bias=None, padding=(0, 0, 0, 0), stride=1, groups=1):
    out = ref_conv2d(x.astype(np.float64).transpose(0, 3, 1, 2), w_ohwi.astype(np.float64).transpose(0, 3, 1, 2),
                     padding=padding, strides=(stride, stride), groups=groups).transpose(0, 2, 3, 1)
    return out if bias is None else out + np.asarray(bias, np.float64)


def _prelu(x, s):
    return np.where(x >= 0, x, s * x)


@pytest.mark.parametrize("dt,tol,layout", [("float32", 2e-5, "nhwc"), ("float16", 2e-2, "nhwc"),
                                           ("float32", 2e-5, "nchw")])
def test_conv_add_prelu_is_one_kernel(ctx, rng, dt, tol, layout):
    npdt = np.float32 if dt == "float32" else np.float16
    C, O = 8, 12
    x = rng.standard_normal((1, 7, 6, C)).astype(npdt)
    r = rng.standard_normal((1, 7, 6, O)).astype(npdt)
    w = (rng.standard_normal((O, 3, 3, C)) * 0.3).astype(npdt)
    bias = rng.standard_normal(O).astype(npdt)
    slope = (rng.standard_normal(O) * 0.3).astype(npdt)
    to = (0, 3, 1, 2) if layout == "nchw" else (0, 1, 2, 3)
    inputs = {"x": x.transpose(to).copy(), "r": r.transpose(to).copy()}

    def build(b, ops):
        wl = w if layout == "nhwc" else w.transpose(0, 3, 1, 2)
        c = b.conv2d(ops["x"], b.constant(np.ascontiguousarray(wl)), padding=[1, 1, 1, 1], input_layout=layout,
                     filter_layout="ohwi" if layout == "nhwc" else "oihw", bias=b.constant(bias))
        s = slope.reshape((1, 1, O) if layout == "nhwc" else (O, 1, 1))
        return {"y": b.prelu(b.add(c, ops["r"]), b.constant(s))}

    got = run_graph(ctx, build, inputs)["y"].astype(np.float64)
    ref = _prelu(_conv_nhwc(x, w, bias, (1, 1, 1, 1)) + r.astype(np.float64), slope.astype(np.float64))
    np.testing.assert_allclose(got, ref.transpose(to), atol=tol, rtol=tol)
    templates = _templates(ctx, build, inputs)  # (an NCHW input is permuted by a kernel of its own)
    assert not any(t.startswith("elementwise/") for t in templates), f"add and prelu run in the conv: {templates}"


def test_matmul_prelu_with_a_full_slope_is_one_kernel(ctx, rng):
    a = rng.standard_normal((5, 12)).astype(np.float32)
    bm = rng.standard_normal((12, 8)).astype(np.float32)
    s = rng.standard_normal((5, 8)).astype(np.float32)

    def build(b, ops):
        return {"y": b.prelu(b.matmul(ops["a"], b.constant(bm)), ops["s"])}

    got = run_graph(ctx, build, {"a": a, "s": s})["y"]
    np.testing.assert_allclose(got, _prelu(a.astype(np.float64) @ bm, s), atol=1e-5, rtol=1e-5)
    assert len(_templates(ctx, build, {"a": a, "s": s})) == 1


@pytest.mark.parametrize("dt,tol,branch", [("float32", 2e-5, "pad"), ("float16", 2e-2, "pad"),
                                           ("float32", 2e-5, "slice")])
def test_depthwise_projection_with_a_channel_padded_residual_and_prelu(ctx, rng, dt, tol, branch):
    """x -> depthwise 3x3 -> 1x1 projection to 2C, + (max pool 1x1 of x, zero-padded to 2C
    channels; or channels 2..2C+1 of a wider branch), prelu: the pad (slice) and the prelu
    run inside the depthwise + projection kernel."""
    npdt = np.float32 if dt == "float32" else np.float16
    C = 16
    x = rng.standard_normal((1, 8, 8, C)).astype(npdt)
    wd = (rng.standard_normal((1, 3, 3, C)) * 0.3).astype(npdt)
    bd = rng.standard_normal(C).astype(npdt)
    wp = (rng.standard_normal((2 * C, 1, 1, C)) * 0.3).astype(npdt)
    bp = rng.standard_normal(2 * C).astype(npdt)
    slope = (rng.standard_normal(2 * C) * 0.3).astype(npdt)

    def build(b, ops):
        d = b.conv2d(ops["x"], b.constant(wd), padding=[1, 1, 1, 1], groups=C, input_layout="nhwc",
                     filter_layout="ihwo", bias=b.constant(bd))
        p = b.conv2d(d, b.constant(wp), input_layout="nhwc", filter_layout="ohwi", bias=b.constant(bp))
        if branch == "pad":
            r = b.pad(b.max_pool2d(ops["x"], window_dimensions=[1, 1], layout="nhwc"), [0, 0, 0, 0], [0, 0, 0, C])
        else:
            r = b.slice(b.max_pool2d(ops["w"], window_dimensions=[1, 1], layout="nhwc"), [0, 0, 0, 2],
                        [1, 8, 8, 2 * C])
        return {"y": b.prelu(b.add(p, r), b.constant(slope.reshape(1, 1, 2 * C)))}

    wide = rng.standard_normal((1, 8, 8, 2 * C + 4)).astype(npdt)
    inputs = {"x": x, "w": wide} if branch == "slice" else {"x": x}
    got = run_graph(ctx, build, inputs)["y"].astype(np.float64)
    xd = x.astype(np.float64)
    d = _conv_nhwc(xd, wd.transpose(3, 1, 2, 0), bd, (1, 1, 1, 1), groups=C)
    if branch == "pad":
        r = np.concatenate([xd, np.zeros_like(xd)], axis=3)
    else:
        r = wide.astype(np.float64)[..., 2:2 + 2 * C]
    ref = _prelu(_conv_nhwc(d, wp, bp) + r, slope.astype(np.float64))
    np.testing.assert_allclose(got, ref, atol=tol, rtol=tol)
    templates = _templates(ctx, build, inputs)
    assert "layout/remap.wgsl" not in templates and not any(t.startswith("elementwise/") for t in templates), templates


@pytest.mark.parametrize("dt,tol,case", [("float32", 2e-5, "depthwise 3x3 s2"), ("float16", 2e-2, "depthwise 3x3 s2"),
                                         ("float32", 2e-5, "conv 3x3 asymmetric"),
                                         ("float32", 2e-5, "depthwise 5x5 s2 and pointwise")])
def test_zero_pad_before_a_conv_is_the_convs_padding(ctx, rng, dt, tol, case):
    npdt = np.float32 if dt == "float32" else np.float16
    C = 8
    x = rng.standard_normal((1, 9, 10, C)).astype(npdt)
    if case == "depthwise 3x3 s2":
        k, stride, groups, beg, end, O = 3, 2, C, [0, 1, 1, 0], [0, 1, 1, 0], C
    elif case == "conv 3x3 asymmetric":
        k, stride, groups, beg, end, O = 3, 1, 1, [0, 0, 1, 0], [0, 2, 1, 0], 12
    else:
        k, stride, groups, beg, end, O = 5, 2, C, [0, 2, 2, 0], [0, 2, 2, 0], C
    w = (rng.standard_normal((O, k, k, C // groups)) * 0.3).astype(npdt)
    bias = rng.standard_normal(O).astype(npdt)
    w1 = (rng.standard_normal((5, 1, 1, C)) * 0.3).astype(npdt)

    def build(b, ops):
        p = b.pad(ops["x"], beg, end)
        y = b.clamp(b.conv2d(p, b.constant(w), strides=[stride, stride], groups=groups, input_layout="nhwc",
                             filter_layout="ohwi", bias=b.constant(bias)), min_value=0.0, max_value=6.0)
        out = {"y": y}
        if case.endswith("pointwise"):  # a second conv reads the same pad: a 1x1 conv with padding
            out["z"] = b.conv2d(p, b.constant(w1), input_layout="nhwc", filter_layout="ohwi")
        return out

    got = run_graph(ctx, build, {"x": x})
    pad = (beg[1], end[1], beg[2], end[2])
    ref = np.clip(_conv_nhwc(x, w, bias, pad, stride, groups), 0, 6)
    np.testing.assert_allclose(got["y"].astype(np.float64), ref, atol=tol, rtol=tol)
    if "z" in got:
        ref_z = _conv_nhwc(x, w1, None, pad)
        np.testing.assert_allclose(got["z"].astype(np.float64), ref_z, atol=tol, rtol=tol)
    assert "layout/remap.wgsl" not in _templates(ctx, build, {"x": x})


@pytest.mark.parametrize("case", ["value 0.5", "edge", "average pool", "max pool", "channel pad residual 1.0"])
def test_pads_that_cannot_fold_stay_right(ctx, rng, case):
    x = rng.standard_normal((1, 6, 7, 4)).astype(np.float32) - 0.8  # mostly negative: a zero pad changes a max
    w = (rng.standard_normal((4, 3, 3, 4)) * 0.3).astype(np.float32)
    xd = x.astype(np.float64)

    def build(b, ops):
        if case == "channel pad residual 1.0":
            c = b.conv2d(ops["x"], b.constant(np.concatenate([w, w])), padding=[1, 1, 1, 1], input_layout="nhwc",
                         filter_layout="ohwi")
            return {"y": b.add(c, b.pad(ops["x"], [0, 0, 0, 0], [0, 0, 0, 4], value=1.0))}
        p = b.pad(ops["x"], [0, 1, 1, 0], [0, 1, 1, 0], **({"mode": "edge"} if case == "edge" else
                                                           {"value": 0.5} if case == "value 0.5" else {}))
        if case.endswith("pool"):
            pool = b.average_pool2d if case.startswith("average") else b.max_pool2d
            return {"y": pool(p, window_dimensions=[3, 3], layout="nhwc")}
        return {"y": b.conv2d(p, b.constant(w), input_layout="nhwc", filter_layout="ohwi")}

    got = run_graph(ctx, build, {"x": x})["y"].astype(np.float64)
    if case == "channel pad residual 1.0":
        ref = _conv_nhwc(xd, np.concatenate([w, w]), None, (1, 1, 1, 1))
        ref += np.concatenate([xd, np.ones_like(xd)], axis=3)
    else:
        kw = {"mode": "edge"} if case == "edge" else {"constant_values": 0.5 if case == "value 0.5" else 0.0}
        pd = np.pad(xd, [(0, 0), (1, 1), (1, 1), (0, 0)], **kw)
        if case.endswith("pool"):
            win = np.lib.stride_tricks.sliding_window_view(pd, (3, 3), axis=(1, 2))
            ref = win.mean(axis=(-2, -1)) if case.startswith("average") else win.max(axis=(-2, -1))
        else:
            ref = _conv_nhwc(pd, w)
    np.testing.assert_allclose(got, ref, atol=2e-5, rtol=2e-5)


def _pool_ref(x, k, stride, pad, kind):
    """NHWC pool, float64, padding excluded from the window (the spec's semantics)."""
    n, h, w, c = x.shape
    xp = np.pad(x.astype(np.float64), [(0, 0), (pad, pad), (pad, pad), (0, 0)], constant_values=np.nan)
    oh, ow = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
    out = np.empty((n, oh, ow, c))
    for i in range(oh):
        for j in range(ow):
            win = xp[:, i * stride:i * stride + k, j * stride:j * stride + k, :]
            out[:, i, j, :] = np.nanmean(win, axis=(1, 2)) if kind == "avg" else np.nanmax(win, axis=(1, 2))
    return out


@pytest.mark.parametrize("dt,tol,kind", [("float32", 2e-5, "avg"), ("float16", 2e-2, "max")])
def test_windowed_pool_hosts_add_and_prelu(ctx, rng, dt, tol, kind):
    npdt = np.float32 if dt == "float32" else np.float16
    x = rng.standard_normal((1, 9, 8, 6)).astype(npdt)
    r = rng.standard_normal((1, 5, 4, 6)).astype(npdt)
    slope = (rng.standard_normal(6) * 0.3).astype(npdt)

    def build(b, ops):
        pool = b.average_pool2d if kind == "avg" else b.max_pool2d
        p = pool(ops["x"], window_dimensions=[3, 3], strides=[2, 2], padding=[1, 1, 1, 1], layout="nhwc")
        return {"y": b.prelu(b.sub(ops["r"], p), b.constant(slope))}

    got = run_graph(ctx, build, {"x": x, "r": r})["y"].astype(np.float64)
    ref = _prelu(r.astype(np.float64) - _pool_ref(x, 3, 2, 1, kind), slope.astype(np.float64))
    np.testing.assert_allclose(got, ref, atol=tol, rtol=tol)
    assert _templates(ctx, build, {"x": x, "r": r}) == ["pool/pool2d.wgsl"]


@pytest.mark.parametrize("dt,tol,case", [("float32", 2e-5, "x2"), ("float16", 2e-2, "x2"), ("float32", 2e-5, "vec4"),
                                         ("float32", 2e-5, "scalar nearest")])
def test_resample_hosts_clamp_and_a_skip_add(ctx, rng, dt, tol, case):
    """resample2d -> clamp -> add(skip): one kernel, in the 2x (x2), vec4 and scalar variants."""
    npdt = np.float32 if dt == "float32" else np.float16
    C = 3 if case.startswith("scalar") else 8
    x = (rng.standard_normal((1, 5, 4, C)) * 4).astype(npdt)
    sizes = [10, 8] if case == "x2" else [7, 9]
    mode = "nearest-neighbor" if case.endswith("nearest") else "linear"
    skip = rng.standard_normal((1, *sizes, C)).astype(npdt)

    def build(b, ops):
        up = b.resample2d(ops["x"], mode=mode, sizes=sizes, axes=[1, 2])
        return {"y": b.add(b.clamp(up, min_value=0.0, max_value=6.0), ops["s"])}

    got = run_graph(ctx, build, {"x": x, "s": skip})["y"].astype(np.float64)
    ref = np.clip(ref_resample(x, mode, sizes, axes=(1, 2)), 0, 6) + skip.astype(np.float64)
    np.testing.assert_allclose(got, ref, atol=tol, rtol=tol)
    want = {"x2": "resample/resample2d_x2.wgsl", "vec4": "resample/resample2d_vec4.wgsl"}.get(
        case, "resample/resample2d.wgsl")
    assert _templates(ctx, build, {"x": x, "s": skip}) == [want]


@pytest.mark.parametrize("count", [3, 9])
def test_concat_is_one_kernel_within_the_binding_limit(ctx, rng, count):
    """A detector head's concat (axis 1 of [1, rows, k]) reads all its inputs in one kernel; past
    the device's storage-buffer limit, one kernel per input places it."""
    arrays = {f"x{i}": rng.standard_normal((1, 5 + i, 3)).astype(np.float32) for i in range(count)}

    def build(b, ops):
        return {"y": b.concat([ops[n] for n in arrays], 1)}

    got = run_graph(ctx, build, arrays)["y"]
    np.testing.assert_array_equal(got, np.concatenate(list(arrays.values()), axis=1))
    limit = int(ctx._limits.get("max-storage-buffers-per-shader-stage", 8))
    want = ["layout/concat.wgsl"] if count + 1 <= limit else ["layout/remap.wgsl"] * count
    assert _templates(ctx, build, arrays) == want


def _erf(x):
    import math
    return np.vectorize(math.erf, otypes=[np.float64])(x)


@pytest.mark.parametrize("op", ["layer_normalization", "batch_normalization", "instance_normalization"])
def test_normalizations_host_their_epilogues(ctx, rng, op):
    """layer norm -> gelu, batch norm -> relu -> + residual, instance norm -> prelu: the
    normalize kernel applies them (no element-wise kernel)."""
    x = rng.standard_normal((2, 6, 5, 4)).astype(np.float32)
    r = rng.standard_normal((2, 6, 5, 4)).astype(np.float32)
    mean, var = rng.standard_normal(6).astype(np.float32), (rng.random(6) + 0.5).astype(np.float32)
    scale, bias = rng.standard_normal(6).astype(np.float32), rng.standard_normal(6).astype(np.float32)
    slope = (rng.standard_normal((6, 1, 1)) * 0.3).astype(np.float32)
    xd = x.astype(np.float64)

    def build(b, ops):
        if op == "layer_normalization":
            return {"y": b.gelu(b.layer_normalization(ops["x"], axes=[1, 2, 3]))}
        if op == "batch_normalization":
            n = b.batch_normalization(ops["x"], b.constant(mean), b.constant(var), scale=b.constant(scale),
                                      bias=b.constant(bias))
            return {"y": b.add(b.relu(n), ops["r"])}
        return {"y": b.prelu(b.instance_normalization(ops["x"]), b.constant(slope))}

    got = run_graph(ctx, build, {"x": x, "r": r})["y"].astype(np.float64)
    if op == "layer_normalization":
        m, v = xd.mean(axis=(1, 2, 3), keepdims=True), xd.var(axis=(1, 2, 3), keepdims=True)
        n = (xd - m) / np.sqrt(v + 1e-5)
        ref = 0.5 * n * (1 + _erf(n / np.sqrt(2)))
    elif op == "batch_normalization":
        sh = (1, 6, 1, 1)
        n = (xd - mean.reshape(sh)) / np.sqrt(var.reshape(sh) + 1e-5) * scale.reshape(sh) + bias.reshape(sh)
        ref = np.maximum(n, 0) + r
    else:
        m, v = xd.mean(axis=(2, 3), keepdims=True), xd.var(axis=(2, 3), keepdims=True)
        ref = _prelu((xd - m) / np.sqrt(v + 1e-5), slope.astype(np.float64))
    np.testing.assert_allclose(got, ref, atol=5e-5, rtol=5e-5)
    templates = _templates(ctx, build, {"x": x, "r": r})
    assert not any(t.startswith("elementwise/") for t in templates), templates
