"""average_pool2d, l2_pool2d and max_pool2d against a NumPy float64 loop reference.

The reference walks every window position explicitly (nchw), skipping positions in the
padding; the average divides by the positions inside the input (the spec excludes padding).
A window entirely in the padding gives 0 (average, L2) or -inf / the type's minimum (max),
as documented in webnn_gpu/ops/pool.py. nhwc runs are compared after a transpose.
"""

from __future__ import annotations

import numpy as np
import pytest

import webnn_gpu as webnn
from helpers import assert_close, run_graph

KINDS = {"average_pool2d": "avg", "l2_pool2d": "l2", "max_pool2d": "max"}


def out_size(size, window, dilation, p0, p1, stride, ceil):
    eff = (window - 1) * dilation + 1
    v = (size - eff + p0 + p1) / stride + 1
    return int(np.ceil(v)) if ceil else int(np.floor(v))


def ref_pool(kind, x, window=None, padding=(0, 0, 0, 0), strides=(1, 1), dilations=(1, 1), ceil=False,
             output_sizes=None):
    """nchw float64 reference."""
    n, c, h, w = x.shape
    wh, ww = window or (h, w)
    if output_sizes is not None:
        oh, ow = output_sizes
    else:
        oh = out_size(h, wh, dilations[0], padding[0], padding[1], strides[0], ceil)
        ow = out_size(w, ww, dilations[1], padding[2], padding[3], strides[1], ceil)
    is_float = np.issubdtype(x.dtype, np.floating)
    out = np.zeros((n, c, oh, ow), np.float64 if is_float else x.dtype)
    for i in range(oh):
        for j in range(ow):
            vals = []
            for kh in range(wh):
                ih = i * strides[0] - padding[0] + kh * dilations[0]
                for kw in range(ww):
                    iw = j * strides[1] - padding[2] + kw * dilations[1]
                    if 0 <= ih < h and 0 <= iw < w:
                        vals.append(x[:, :, ih, iw])
            if not vals:
                out[:, :, i, j] = (-np.inf if is_float else np.iinfo(x.dtype).min) if kind == "max" else 0
                continue
            v = np.stack(vals)
            if kind == "max":
                with np.errstate(invalid="ignore"):
                    out[:, :, i, j] = np.max(v, axis=0)  # NaN propagates
            else:
                vd = v.astype(np.float64)
                out[:, :, i, j] = vd.mean(axis=0) if kind == "avg" else np.sqrt((vd * vd).sum(axis=0))
    return out


CASES = [  # (options, reference kwargs)
    ({}, {}),
    ({"window_dimensions": [3, 3]}, {"window": (3, 3)}),
    ({"window_dimensions": [3, 2], "strides": [2, 1]}, {"window": (3, 2), "strides": (2, 1)}),
    ({"window_dimensions": [3, 3], "padding": [1, 2, 0, 1], "strides": [2, 2]},
     {"window": (3, 3), "padding": (1, 2, 0, 1), "strides": (2, 2)}),
    ({"window_dimensions": [2, 3], "dilations": [2, 2], "padding": [1, 1, 1, 1]},
     {"window": (2, 3), "dilations": (2, 2), "padding": (1, 1, 1, 1)}),
    ({"window_dimensions": [3, 3], "strides": [2, 2], "rounding_type": "ceil"},
     {"window": (3, 3), "strides": (2, 2), "ceil": True}),
    ({"window_dimensions": [2, 2], "padding": [1, 1, 1, 1], "strides": [3, 3], "rounding_type": "ceil"},
     {"window": (2, 2), "padding": (1, 1, 1, 1), "strides": (3, 3), "ceil": True}),  # all-padding windows
    ({"window_dimensions": [3, 3], "strides": [2, 2], "output_sizes": [4, 4]},
     {"window": (3, 3), "strides": (2, 2), "output_sizes": (4, 4)}),
]


@pytest.mark.parametrize("op", list(KINDS))
@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
def test_pool_every_option(ctx, rng, op, layout):
    x = rng.standard_normal((2, 3, 9, 8)).astype(np.float32)
    xin = x if layout == "nchw" else np.ascontiguousarray(x.transpose(0, 2, 3, 1))

    def build(b, o):
        return {f"y{i}": getattr(b, op)(o["x"], layout=layout, **opts) for i, (opts, _) in enumerate(CASES)}

    out = run_graph(ctx, build, {"x": xin})
    for i, (opts, kw) in enumerate(CASES):
        got = out[f"y{i}"]
        if layout == "nhwc":
            got = got.transpose(0, 3, 1, 2)
        exp = ref_pool(KINDS[op], x, **kw)
        atol = 0 if op == "max_pool2d" else 1e-5
        assert_close(got, exp, atol=atol, rtol=2e-6, err_msg=f"{op} {layout} {opts}")


@pytest.mark.parametrize("op", list(KINDS))
def test_pool_float16(ctx, rng, op):
    x = (rng.standard_normal((1, 4, 12, 12)) * 4).astype(np.float16)
    out = run_graph(ctx, lambda b, o: {"a": getattr(b, op)(o["x"], window_dimensions=[4, 5], strides=[2, 2],
                                                            padding=[1, 1, 2, 2]),
                                        "g": getattr(b, op)(o["x"])}, {"x": x})
    assert out["a"].dtype == np.float16
    rtol = 0 if op == "max_pool2d" else 2.0**-10
    assert_close(out["a"], ref_pool(KINDS[op], x, (4, 5), (1, 1, 2, 2), (2, 2)), atol=1e-3 if rtol else 0, rtol=rtol)
    assert_close(out["g"], ref_pool(KINDS[op], x), atol=1e-3 if rtol else 0, rtol=rtol)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32, np.uint32, np.int64, np.uint64])
def test_max_pool_integers(ctx, rng, dtype):
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max, size=(1, 2, 7, 7), dtype=dtype, endpoint=True)
    out = run_graph(ctx, lambda b, o: {"a": b.max_pool2d(o["x"], window_dimensions=[3, 3], padding=[1, 1, 1, 1],
                                                          strides=[2, 2]),
                                        "e": b.max_pool2d(o["x"], window_dimensions=[1, 1], padding=[2, 0, 0, 0],
                                                          strides=[3, 3]),
                                        "g": b.max_pool2d(o["x"])}, {"x": x})
    np.testing.assert_array_equal(out["a"], ref_pool("max", x, (3, 3), (1, 1, 1, 1), (2, 2)))
    np.testing.assert_array_equal(out["e"], ref_pool("max", x, (1, 1), (2, 0, 0, 0), (3, 3)))
    np.testing.assert_array_equal(out["g"], x.max(axis=(2, 3), keepdims=True))
    assert out["a"].dtype == dtype


def test_global_and_large_window_pools(ctx, rng):
    """A 256x256 global pool runs as a split reduction; a 30x30 window runs one workgroup per output."""
    x = (rng.standard_normal((1, 3, 256, 256)) + 2).astype(np.float32)
    y = rng.standard_normal((1, 2, 40, 40)).astype(np.float32)

    def build(b, o):
        return {"avg": b.average_pool2d(o["x"]), "l2": b.l2_pool2d(o["x"]), "max": b.max_pool2d(o["x"]),
                "nhwc": b.average_pool2d(o["xh"], layout="nhwc"),
                "big": b.average_pool2d(o["y"], window_dimensions=[30, 30], strides=[5, 5], padding=[3, 3, 3, 3]),
                "bigmax": b.max_pool2d(o["y"], window_dimensions=[30, 30], strides=[5, 5])}

    xh = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    out = run_graph(ctx, build, {"x": x, "xh": xh, "y": y}, tensor_path=False)
    xd = x.astype(np.float64)
    assert out["avg"].shape == (1, 3, 1, 1) and out["nhwc"].shape == (1, 1, 1, 3)
    assert_close(out["avg"], xd.mean(axis=(2, 3), keepdims=True), atol=1e-6, rtol=1e-6)
    assert_close(out["nhwc"][0, 0, 0], xd.mean(axis=(2, 3))[0], atol=1e-6, rtol=1e-6)
    assert_close(out["l2"], np.sqrt((xd * xd).sum(axis=(2, 3), keepdims=True)), atol=0, rtol=1e-6)
    assert_close(out["max"], xd.max(axis=(2, 3), keepdims=True), atol=0, rtol=0)
    assert_close(out["big"], ref_pool("avg", y, (30, 30), (3, 3, 3, 3), (5, 5)), atol=1e-6, rtol=1e-6)
    assert_close(out["bigmax"], ref_pool("max", y, (30, 30), strides=(5, 5)), atol=0, rtol=0)


def test_pool_nan_propagates(ctx):
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    x[0, 0, 0, 0] = np.nan
    out = run_graph(ctx, lambda b, o: {k: getattr(b, k)(o["x"], window_dimensions=[2, 2], strides=[2, 2])
                                       for k in KINDS}, {"x": x})
    for k in KINDS:
        assert np.isnan(out[k][0, 0, 0, 0]), k
        assert not np.any(np.isnan(out[k][0, 0].reshape(-1)[1:])), k


def test_pool_output_shapes_follow_the_spec(ctx):
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [1, 3, 7, 7]})
    # WPT validation_tests/pooling.https.any.js shapes
    assert b.average_pool2d(x, window_dimensions=[4, 4], padding=[2, 1, 2, 1], strides=[2, 2]).shape == (1, 3, 4, 4)
    assert b.l2_pool2d(x, window_dimensions=[4, 4], padding=[1, 1, 1, 1], strides=[2, 2]).shape == (1, 3, 3, 3)
    assert b.max_pool2d(x, window_dimensions=[4, 4], padding=[1, 1, 1, 1], strides=[2, 2],
                        rounding_type="ceil").shape == (1, 3, 4, 4)
    assert b.max_pool2d(x, window_dimensions=[4, 4], padding=[1, 1, 1, 1], strides=[2, 2], rounding_type="ceil",
                        output_sizes=[3, 3]).shape == (1, 3, 3, 3)
    y = b.input("y", {"data_type": "float16", "shape": [1, 5, 5, 2]})
    p = b.average_pool2d(y, window_dimensions=[3, 3], layout="nhwc")
    assert p.shape == (1, 3, 3, 2) and p.data_type == "float16"


def test_pool_validation_errors(ctx):
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [1, 2, 5, 5]})
    i = b.input("i", {"data_type": "int32", "shape": [1, 2, 5, 5]})
    bad = [
        (dict(window_dimensions=[1, 1, 1, 1]), "window_dimensions"),
        (dict(window_dimensions=[0, 2]), "window_dimensions"),
        (dict(window_dimensions=[8, 2]), "window_dimensions.*output height"),
        (dict(window_dimensions=[2, 8]), "window_dimensions.*output width"),
        (dict(window_dimensions=[6, 3]), "window_dimensions"),
        (dict(padding=[2, 2]), "padding"),
        (dict(padding=[-1, 0, 0, 0]), "padding"),
        (dict(strides=[2]), "strides"),
        (dict(strides=[0, 2]), "strides"),
        (dict(dilations=[1, 1, 2]), "dilations"),
        (dict(dilations=[1, 0]), "dilations"),
        (dict(window_dimensions=[2, 2], padding=[2, 2, 2, 2], strides=[2, 2], output_sizes=[3, 3]), "output_sizes"),
        (dict(window_dimensions=[2, 2], padding=[2, 2, 2, 2], strides=[2, 2], output_sizes=[1, 2, 4, 4]),
         "output_sizes"),
        (dict(layout="nwhc"), "layout"),
        (dict(rounding_type="round"), "rounding_type"),
        (dict(padding=[2**32 - 1] * 4), "window_dimensions"),
    ]
    for op in KINDS:
        for opts, pat in bad:
            with pytest.raises(webnn.MLTypeError, match=f"{op} \\['p'\\]: argument '{pat}"):
                getattr(b, op)(x, label="p", **opts)
        with pytest.raises(webnn.MLTypeError, match="expected a 4-D operand"):
            getattr(b, op)(b.input(f"r{op}", {"data_type": "float32", "shape": [1, 5, 5]}))
        with pytest.raises(webnn.MLTypeError, match="unknown option"):
            getattr(b, op)(x, window=[2, 2])
    for op in ("average_pool2d", "l2_pool2d"):
        with pytest.raises(webnn.MLTypeError, match=f"{op}: argument 'input'.*got 'int32'"):
            getattr(b, op)(i)
    assert b.max_pool2d(i).data_type == "int32"
    g = b.build({"y": b.average_pool2d(x, window_dimensions=[5, 5])})
    np.testing.assert_allclose(ctx.compute(g, {"x": np.ones((1, 2, 5, 5), np.float32)})["y"], np.ones((1, 2, 1, 1)))


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("op,opts", [
    ("max_pool2d", dict(window_dimensions=[2, 2], strides=[2, 2])),
    ("average_pool2d", dict(window_dimensions=[3, 3], padding=[1, 0, 2, 1], strides=[2, 1])),
    ("l2_pool2d", dict(window_dimensions=[2, 3], dilations=[2, 1], padding=[0, 1, 1, 0])),
    ("max_pool2d", dict(window_dimensions=[3, 3], padding=[3, 0, 0, 0], strides=[1, 2])),
    ("average_pool2d", dict(window_dimensions=[2, 2], padding=[3, 0, 1, 1], strides=[1, 2])),
    ("l2_pool2d", dict(window_dimensions=[1, 3], dilations=[1, 2], padding=[0, 0, 2, 2])),
    ("max_pool2d", dict(window_dimensions=[2, 2], dilations=[2, 2], padding=[1, 1, 1, 1])),
])
def test_nhwc_pools_of_four_channel_groups(ctx, rng, op, opts, dtype, monkeypatch):
    """NHWC pools whose channels are a multiple of 4 run four channels per invocation
    (pool/pool2d_vec4.wgsl), with an epilogue; NaN propagates lane by lane through max. Against
    the float64 reference (of the data as given), and the same bits as the one-channel kernel
    (``WEBNN_GPU_FORCE_POOL=scalar``). float16 moves u64 words (``words``), by default only for
    a pool that stores a map (``WEBNN_GPU_FORCE_POOL=words`` here); float32 always where the
    device has them (the same bits as vec4s, ``WEBNN_GPU_FORCE_POOL_WORDS=vec4``): both kernels pool and apply
    the epilogue in f32 and round once. Windows of at most 4 positions are written out
    (``pool.window_written_out``; rows or columns entirely in the padding included): the same bits
    as the loops (``WEBNN_GPU_FORCE_POOL_WINDOW=loop``)."""
    from helpers import kernel_steps, kernel_templates
    from webnn_gpu.ops import pool

    f16 = dtype == "float16"
    x = rng.standard_normal((2, 7, 6, 12 if f16 else 8)).astype(dtype)
    x[0, 1, 1, 2] = np.nan
    slope = rng.standard_normal(x.shape[3]).astype(dtype)

    def build(b, ops):
        return {"y": b.prelu(getattr(b, op)(ops["x"], layout="nhwc", **opts), b.constant(slope))}

    if f16:
        monkeypatch.setenv("WEBNN_GPU_FORCE_POOL", "words")
    got = run_graph(ctx, build, {"x": x})["y"]
    ref_kw = {k: opts[k] for k in ("padding", "strides", "dilations") if k in opts}
    want = ref_pool(KINDS[op], x.transpose(0, 3, 1, 2).astype(np.float64), window=opts["window_dimensions"],
                    **ref_kw).transpose(0, 2, 3, 1)
    want = np.where(want >= 0, want, want * slope.astype(np.float64))
    tol = 2.0**-10 if f16 else 1e-5
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=1e-6)
    assert got.dtype == dtype and np.isnan(got).any() == np.isnan(want).any()
    (step,) = [st for st in kernel_steps(ctx, build, {"x": x}) if st.template == "pool/pool2d_vec4.wgsl"]
    WH, WW = opts["window_dimensions"]
    assert ("for (var kh" not in step.wgsl) == (WH * WW <= pool.POOL_WINDOW_OUT)
    monkeypatch.setenv("WEBNN_GPU_FORCE_POOL_WINDOW", "loop")
    looped = run_graph(ctx, build, {"x": x})["y"]
    (step,) = [st for st in kernel_steps(ctx, build, {"x": x}) if st.template == "pool/pool2d_vec4.wgsl"]
    assert "for (var kh" in step.wgsl
    monkeypatch.delenv("WEBNN_GPU_FORCE_POOL_WINDOW")
    bits = np.uint16 if f16 else np.uint32
    np.testing.assert_array_equal(got.view(bits), looped.view(bits))
    if not f16:  # float32 as u64 words of 4 values where the device has them; vec4s forced: the same bits
        assert ("vec2<u64>" in step.wgsl) == (ctx._tuning == "lane-loop" and "shader-int64" in ctx.features)
        monkeypatch.setenv("WEBNN_GPU_FORCE_POOL_WORDS", "vec4")
        (step,) = [st for st in kernel_steps(ctx, build, {"x": x}) if st.template == "pool/pool2d_vec4.wgsl"]
        assert "u64" not in step.wgsl
        np.testing.assert_array_equal(got.view(bits), run_graph(ctx, build, {"x": x})["y"].view(bits))
        monkeypatch.delenv("WEBNN_GPU_FORCE_POOL_WORDS")
    monkeypatch.setenv("WEBNN_GPU_FORCE_POOL", "scalar")
    scalar = run_graph(ctx, build, {"x": x})["y"]
    assert "pool/pool2d.wgsl" in kernel_templates(ctx, build, {"x": x})
    bits = np.uint16 if f16 else np.uint32
    np.testing.assert_array_equal(got.view(bits), scalar.view(bits))
    if f16:  # by default a plain float16 pool runs the one-channel kernel
        monkeypatch.delenv("WEBNN_GPU_FORCE_POOL")
        assert "pool/pool2d.wgsl" in kernel_templates(ctx, build, {"x": x})
