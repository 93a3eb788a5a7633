"""What PyTorch's ONNX exporters write for vision models, built with onnx.helper (CI has no torch),
checked against ONNX Runtime's CPU provider.

The patterns come from ``benchmarks/onnx_torch_vision.py`` (both exporters, torch 2.13): each
test writes the exporter's nodes for one construct and its near misses.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import webnn_gpu as webnn


def _model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _ort(m, feed):
    import onnxruntime as ort

    return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feed)


def _topk_model(shape, k, elem=TensorProto.FLOAT, opset=17, k_input=True, **attrs):
    """``x -> TopK(K) -> (values, indices)``: K an int64 initializer (opset >= 10) or the
    attribute ``k`` (before 10)."""
    if k_input:
        node = helper.make_node("TopK", ["x", "k"], ["values", "indices"], name="topk", **attrs)
        inits = [numpy_helper.from_array(np.array([k], np.int64), "k")]
    else:
        node = helper.make_node("TopK", ["x"], ["values", "indices"], name="topk", k=k, **attrs)
        inits = []
    return _model([node], [helper.make_tensor_value_info("x", elem, shape)],
                  [helper.make_tensor_value_info("values", elem, None),
                   helper.make_tensor_value_info("indices", TensorProto.INT64, None)], inits, opset)


@pytest.mark.parametrize("shape,k,attrs,opset", [
    ((2, 50), 5, {}, 17),                                  # score.topk(5): both exporters (TopK-11)
    ((2, 50), 1, {}, 17),                                  # K = 1: one arg_max, no selection rounds
    ((3, 7, 4), 3, {"axis": 1, "largest": 0}, 17),         # the smallest, along a middle axis
    ((2, 9), 9, {"sorted": 0}, 17),                        # all of the axis; any order allowed, sorted given
    ((4, 6), 2, {}, 9),                                    # TopK-1: K as an attribute
])
def test_topk_matches_onnxruntime(ctx, rng, shape, k, attrs, opset):
    """Values and int64 indices equal ORT's (each value is one of the input's: exact)."""
    m = _topk_model(shape, k, opset=opset, k_input=opset >= 10, **attrs)
    x = rng.standard_normal(shape).astype(np.float32)
    ref = _ort(m, {"x": x})
    got = webnn.load(m.SerializeToString(), ctx).compute({"x": x})
    assert got["indices"].dtype == np.int64
    if attrs.get("sorted") == 0:  # ORT's order is its own: the same (index, value) pairs
        axis = attrs.get("axis", -1)
        for g, r in ((got["indices"], ref[1]), (got["values"], ref[0])):
            order_g, order_r = np.argsort(got["indices"], axis), np.argsort(ref[1], axis)
            np.testing.assert_array_equal(np.take_along_axis(g, order_g, axis), np.take_along_axis(r, order_r, axis))
        return
    np.testing.assert_array_equal(got["values"], ref[0])
    np.testing.assert_array_equal(got["indices"], ref[1])


@pytest.mark.parametrize("shape,k,axis,largest", [
    ((2, 100), 80, -1, 1),    # K above the rounds' old limit of 64: still one launch
    ((2, 300), 250, -1, 0),   # K * (n + 1) past llvmpipe's loop limit: the rank kernel
    ((3, 40, 2), 40, 1, 1),   # a whole middle axis, sorted
])
def test_topk_large_k_is_one_kernel(ctx, rng, shape, k, axis, largest):
    """float32 TopK of any K runs as one custom kernel (plus the index cast and any transposes)
    and equals ORT's values and indices (ties cannot occur: a permutation of distinct values)."""
    x = (rng.permutation(int(np.prod(shape))).reshape(shape) / 8).astype(np.float32)
    m = _topk_model(shape, k, axis=axis, largest=largest)
    ref = _ort(m, {"x": x})
    model = webnn.load(m.SerializeToString(), ctx)
    got = model.compute({"x": x})
    np.testing.assert_array_equal(got["values"], ref[0])
    np.testing.assert_array_equal(got["indices"], ref[1])
    assert model.graph.kernel_count <= (2 if axis == -1 else 5)  # top-k and the cast (and the transposes)


def test_topk_ties_and_infinities_come_out_in_index_order(ctx):
    """Equal values: the lower index first (ONNX's rule, ORT's result); a row of -inf gives each
    position once (the taken ones are not picked again though they hold the same value)."""
    x = np.array([[1, 3, 3, 2, 3, 1], [-np.inf] * 6, [np.inf, 0, np.inf, -np.inf, 5, np.inf]], np.float32)
    for largest in (1, 0):
        m = _topk_model(x.shape, 5, largest=largest)
        ref = _ort(m, {"x": x})
        got = webnn.load(m.SerializeToString(), ctx).compute({"x": x})
        np.testing.assert_array_equal(got["values"], ref[0])
        np.testing.assert_array_equal(got["indices"], ref[1])


@pytest.mark.parametrize("n, k", [(7, 5), (300, 250)], ids=["rounds", "ranks"])
@pytest.mark.parametrize("largest", [1, 0])
def test_topk_orders_nan_as_onnxruntime(ctx, rng, n, k, largest):
    """NaN comes first for the largest and last for the smallest, NaNs in index order (ONNX
    Runtime's order), with -inf, +inf and ties beside them, on the rounds and the rank kernels."""
    x = np.round(rng.standard_normal((3, n)) * 2).astype(np.float32)
    x[:, 1::5] = np.nan
    x[0, 2], x[1, 3], x[2, 0] = np.inf, -np.inf, np.nan
    m = _topk_model(x.shape, k, largest=largest)
    ref = _ort(m, {"x": x})
    got = webnn.load(m.SerializeToString(), ctx).compute({"x": x})
    np.testing.assert_array_equal(got["values"], ref[0])
    np.testing.assert_array_equal(got["indices"], ref[1])


def test_topk_of_int64(ctx, rng):
    x = rng.integers(-5, 5, (3, 10)).astype(np.int64)
    m = _topk_model(x.shape, 4, elem=TensorProto.INT64)
    ref = _ort(m, {"x": x})
    got = webnn.load(m.SerializeToString(), ctx).compute({"x": x})
    np.testing.assert_array_equal(got["values"], ref[0])
    np.testing.assert_array_equal(got["indices"], ref[1])


def test_topk_in_a_float16_graph(ctx, rng):
    """float16: the values are the input's rounded to float16; distinct values keep ORT's order."""
    x = rng.permutation(40).reshape(2, 20).astype(np.float32) / 4  # exact in float16, no ties
    m = _topk_model(x.shape, 6)
    ref = _ort(m, {"x": x})
    got = webnn.load(m.SerializeToString(), ctx, dtype="float16").compute({"x": x.astype(np.float16)})
    np.testing.assert_array_equal(got["values"].astype(np.float32), ref[0])
    np.testing.assert_array_equal(got["indices"], ref[1])


def test_topk_near_misses_are_refused_by_name(ctx):
    """K computed at run time, K above TOPK_MAX_K for int64 (selection rounds), K beyond the axis:
    NotSupportedError naming the node."""
    from webnn_gpu.onnx.ops import TOPK_MAX_K

    run_time_k = _model([helper.make_node("TopK", ["x", "k"], ["v", "i"], name="topk")],
                        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8]),
                         helper.make_tensor_value_info("k", TensorProto.INT64, [1])],
                        [helper.make_tensor_value_info("v", TensorProto.FLOAT, None),
                         helper.make_tensor_value_info("i", TensorProto.INT64, None)])
    with pytest.raises(webnn.NotSupportedError, match=r"'topk' \(TopK.*K must be known at load time"):
        webnn.load(run_time_k.SerializeToString(), ctx)
    with pytest.raises(webnn.NotSupportedError, match=rf"'topk' \(TopK.*K = {TOPK_MAX_K + 1} is above {TOPK_MAX_K} "
                                                    r"for int64"):
        webnn.load(_topk_model((1, 100), TOPK_MAX_K + 1, elem=TensorProto.INT64).SerializeToString(), ctx)
    with pytest.raises(webnn.NotSupportedError, match=r"'topk' \(TopK.*K = 9 on an axis of size 8"):
        webnn.load(_topk_model((2, 8), 9).SerializeToString(), ctx)


# ---------------------------------------------------------------- exact GELU spelled with Erf
def _erf_gelu_nodes(form: str, sqrt2=np.sqrt(2), one=1.0, half=0.5, const_dtype=np.float32, const_shape=()):
    """The nodes of ``y = gelu(x)`` spelled with Erf as exporters write it, and its constants.

    ``form``: ``ts`` (PyTorch's TorchScript exporter: Div, Erf, Add, Mul(x, .), Mul(., 0.5)),
    ``mul_half_first`` ((x * 0.5) * (erf + 1), the scale 1/sqrt 2 as a Mul), ``half_of_erf``
    (x * ((1 + erf) * 0.5)). ``const_shape``: the constants' shape, ``()`` or ``(1,)``."""
    c = {"c_sqrt2": sqrt2, "c_rsqrt2": 1 / sqrt2, "c_one": one, "c_half": half}
    inits = [numpy_helper.from_array(np.array(v, const_dtype).reshape(const_shape), k) for k, v in c.items()]
    if form == "ts":
        nodes = [helper.make_node("Div", ["x", "c_sqrt2"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
                 helper.make_node("Add", ["e", "c_one"], ["a"]), helper.make_node("Mul", ["x", "a"], ["m"]),
                 helper.make_node("Mul", ["m", "c_half"], ["y"], name="gelu_out")]
    elif form == "mul_half_first":
        nodes = [helper.make_node("Mul", ["c_rsqrt2", "x"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
                 helper.make_node("Add", ["c_one", "e"], ["a"]), helper.make_node("Mul", ["c_half", "x"], ["xh"]),
                 helper.make_node("Mul", ["a", "xh"], ["y"], name="gelu_out")]
    else:
        nodes = [helper.make_node("Div", ["x", "c_sqrt2"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
                 helper.make_node("Add", ["c_one", "e"], ["a"]), helper.make_node("Mul", ["a", "c_half"], ["m"]),
                 helper.make_node("Mul", ["m", "x"], ["y"], name="gelu_out")]
    return nodes, inits


def _ops_after_rewrite(nodes, inits, outputs=("y",)):
    from webnn_gpu.onnx.rewrite import fuse_erf_gelu

    env = {t.name: numpy_helper.to_array(t) for t in inits}
    return [p.op_type for p in fuse_erf_gelu(nodes, env, list(outputs))]


@pytest.mark.parametrize("form", ["ts", "mul_half_first", "half_of_erf"])
def test_erf_gelu_is_one_gelu_node(form):
    """GPU-free: the three spellings become one Gelu reading x and writing y."""
    nodes, inits = _erf_gelu_nodes(form)
    from webnn_gpu.onnx.rewrite import fuse_erf_gelu

    env = {t.name: numpy_helper.to_array(t) for t in inits}
    out = fuse_erf_gelu(nodes, env, ["y"])
    assert [(p.op_type, list(p.input), list(p.output)) for p in out] == [("Gelu", ["x"], ["y"])]


def test_erf_gelu_near_misses_are_left_alone():
    """GPU-free: another scale, another offset, another factor, an intermediate read twice or
    a graph output: the nodes stay as they are."""
    base = ["Div", "Erf", "Add", "Mul", "Mul"]
    assert _ops_after_rewrite(*_erf_gelu_nodes("ts", sqrt2=1.41)) == base
    assert _ops_after_rewrite(*_erf_gelu_nodes("ts", one=2.0)) == base
    assert _ops_after_rewrite(*_erf_gelu_nodes("ts", half=0.25)) == base
    assert _ops_after_rewrite(*_erf_gelu_nodes("ts"), outputs=("y", "e")) == base
    nodes, inits = _erf_gelu_nodes("ts")
    nodes.append(helper.make_node("Neg", ["a"], ["z"]))
    assert _ops_after_rewrite(nodes, inits, ("y", "z")) == base + ["Neg"]
    nodes, inits = _erf_gelu_nodes("ts")
    nodes[3] = helper.make_node("Mul", ["w", "a"], ["m"])  # the product with another value than x
    assert _ops_after_rewrite(nodes, inits) == base
    # float16 constants (an exporter's float16 model): sqrt 2 rounded to float16 is taken
    assert _ops_after_rewrite(*_erf_gelu_nodes("ts", const_dtype=np.float16)) == ["Gelu"]


@pytest.mark.parametrize("form", ["ts", "mul_half_first", "half_of_erf"])
def test_erf_gelu_with_constants_of_shape_1_keeps_the_broadcast(form):
    """GPU-free: with constants of shape [1] the pattern's y is x's shape broadcast with [1] (a
    0-D x gives [1]): the Gelu is followed by Expand to [1]; with 0-D constants it is alone."""
    from webnn_gpu.onnx.rewrite import fuse_erf_gelu

    nodes, inits = _erf_gelu_nodes(form, const_shape=(1,))
    env = {t.name: numpy_helper.to_array(t) for t in inits}
    out = fuse_erf_gelu(nodes, env, ["y"])
    assert [(p.op_type, p.input[0], p.output[0]) for p in out] == [
        ("Gelu", "x", out[1].input[0]), ("Expand", out[0].output[0], "y")]
    np.testing.assert_array_equal(env[out[1].input[1]], np.array([1], np.int64))
    # one [1] constant among 0-D ones is enough to broadcast
    nodes, inits = _erf_gelu_nodes(form)
    inits = [numpy_helper.from_array(np.array([0.5], np.float32), "c_half") if t.name == "c_half" else t
             for t in inits]
    assert _ops_after_rewrite(nodes, inits) == ["Gelu", "Expand"]


@pytest.mark.parametrize("x_shape", [(), (4, 33)])
def test_erf_gelu_with_constants_of_shape_1_matches_onnxruntime(ctx, rng, x_shape):
    """Constants of shape [1] (ONNX Runtime's GeluFusion takes them and gives a 0-D x's y the
    shape [], so the reference here is ORT with its fusions off): y has the pattern's shape
    ([1] for a 0-D x) and values within 1e-5 of the output's magnitude; after a MatMul the GELU
    is still the matmul's epilogue (the Expand to its own shape is no kernel)."""
    import onnxruntime as ort

    nodes, inits = _erf_gelu_nodes("ts", const_shape=(1,))
    if x_shape:
        nodes.insert(0, helper.make_node("MatMul", ["h", "w"], ["x"]))
        inits.append(numpy_helper.from_array((rng.standard_normal((16, 33)) / 2).astype(np.float32), "w"))
        feed = {"h": rng.standard_normal((4, 16)).astype(np.float32)}
    else:
        feed = {"x": np.array(0.7, np.float32)}
    name, shape = next(iter(feed.items()))
    m = _model(nodes, [helper.make_tensor_value_info(name, TensorProto.FLOAT, list(feed[name].shape))],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    ref = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feed)[0]
    assert ref.shape == (x_shape or (1,))
    loaded = webnn.load(m.SerializeToString(), ctx)
    got = loaded.compute(feed)["y"]
    assert got.shape == ref.shape
    assert np.abs(got.astype(np.float64) - ref).max() <= 1e-5 * max(np.abs(ref).max(), 1)
    if x_shape:
        templates = [s.template for s in loaded.graph._steps if hasattr(s, "template")]
        assert not any(t.startswith("elementwise/") for t in templates), templates


@pytest.mark.parametrize("form,kw,fused", [("ts", {}, True), ("mul_half_first", {}, True),
                                           ("half_of_erf", {}, True), ("ts", {"sqrt2": 1.41}, False)])
def test_erf_gelu_matches_onnxruntime(ctx, rng, form, kw, fused):
    """A MatMul with known weights, then the GELU spelled with Erf (a transformer's MLP as the
    TorchScript exporter writes it), against ORT: within 1e-5 of the output's magnitude. Rewritten,
    the GELU is the matmul kernel's epilogue (no element-wise kernel); a near miss keeps its chain."""
    nodes, inits = _erf_gelu_nodes(form, **kw)
    nodes.insert(0, helper.make_node("MatMul", ["h", "w"], ["x"]))
    inits.append(numpy_helper.from_array((rng.standard_normal((16, 33)) / 2).astype(np.float32), "w"))
    m = _model(nodes, [helper.make_tensor_value_info("h", TensorProto.FLOAT, [4, 16])],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    h = rng.standard_normal((4, 16)).astype(np.float32)
    ref = _ort(m, {"h": h})[0]
    loaded = webnn.load(m.SerializeToString(), ctx)
    got = loaded.compute({"h": h})["y"]
    assert np.abs(got.astype(np.float64) - ref).max() <= 1e-5 * np.abs(ref).max()
    templates = [s.template for s in loaded.graph._steps if hasattr(s, "template")]
    assert (not any(t.startswith("elementwise/") for t in templates)) == fused, templates


# ---------------------------------------------------------------- GridSample (F.grid_sample)
def _grid_sample_model(opset, x_shape, grid_shape, **attrs):
    node = helper.make_node("GridSample", ["x", "grid"], ["y"], name="gs", **attrs)
    return _model([node], [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape),
                           helper.make_tensor_value_info("grid", TensorProto.FLOAT, grid_shape)],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], opset=opset)


@pytest.mark.parametrize("opset,attrs", [
    (16, {}),                                                   # TorchScript exporter: bilinear, zeros
    (20, {"mode": "linear"}),                                   # dynamo exporter's spelling
    (16, {"align_corners": 1}),
    (16, {"padding_mode": "border"}),
    (20, {"mode": "nearest", "padding_mode": "zeros"}),
    (20, {"mode": "nearest", "padding_mode": "border", "align_corners": 1}),
    (16, {"padding_mode": "reflection"}),
    (16, {"padding_mode": "reflection", "align_corners": 1}),
    (20, {"mode": "nearest", "padding_mode": "reflection"}),
])
def test_grid_sample_matches_onnxruntime(ctx, rng, opset, attrs):
    """Positions a little beyond [-1, 1] (corners outside the image; for reflection up to two
    image widths out), two batches, a grid of another size than the image: within 1e-5 of the
    output's magnitude."""
    x = rng.standard_normal((2, 3, 5, 7)).astype(np.float32)
    grid = rng.uniform(-1.2, 1.2, (2, 4, 6, 2)).astype(np.float32)
    if attrs.get("padding_mode") == "reflection":  # positions up to two image widths outside
        grid = rng.uniform(-4, 4, (2, 4, 6, 2)).astype(np.float32)
    if attrs.get("mode") == "nearest":  # no position on a half-way point (ORT and we may round apart)
        grid = np.round(grid * 8) / 8 + 1 / 64
    m = _grid_sample_model(opset, x.shape, grid.shape, **attrs)
    ref = _ort(m, {"x": x, "grid": grid})[0]
    got = webnn.load(m.SerializeToString(), ctx).compute({"x": x, "grid": grid})["y"]
    assert got.shape == ref.shape
    assert np.abs(got.astype(np.float64) - ref).max() <= 1e-5 * np.abs(ref).max()


def test_grid_sample_float16(ctx, rng):
    x = rng.standard_normal((1, 4, 8, 8)).astype(np.float32)
    grid = rng.uniform(-1, 1, (1, 5, 5, 2)).astype(np.float32)
    m = _grid_sample_model(16, x.shape, grid.shape)
    ref = _ort(m, {"x": x, "grid": grid})[0]
    got = webnn.load(m.SerializeToString(), ctx, dtype="float16").compute(
        {"x": x.astype(np.float16), "grid": grid.astype(np.float16)})["y"]
    assert np.abs(got.astype(np.float64) - ref).max() <= 3e-2 * np.abs(ref).max()


@pytest.mark.parametrize("mode", ["nearest", "bilinear"])
def test_grid_sample_float16_past_2048_pixels(ctx, rng, mode):
    """A float16 graph on a 64 x 64 image (4096 pixels, past float16's whole numbers): the
    positions and the flat pixel index are not formed in float16. Nearest with
    ``align_corners`` on pixel centres reads exactly the pixel ORT reads (each value its
    column); bilinear at random positions is within 2e-3 of the output's magnitude of ORT's
    on the float16-rounded inputs (float16 positions were 3e-2 off, a row past 32 read the
    neighbouring column)."""
    H = W = 64
    if mode == "nearest":
        x = np.tile(np.arange(W, dtype=np.float32), (2, H, 1)).reshape(1, 2, H, W)
        pix = [(10, 5), (40, 33), (50, 7), (63, 62), (33, 1)]
        grid = np.array([[2 * col / (W - 1) - 1, 2 * row / (H - 1) - 1] for row, col in pix],
                        np.float32).reshape(1, 1, len(pix), 2)
        attrs = {"mode": "nearest", "align_corners": 1}
    else:
        x = rng.standard_normal((1, 2, H, W)).astype(np.float32)
        grid = rng.uniform(-1, 1, (1, 6, 6, 2)).astype(np.float32)
        attrs = {}
    x16, g16 = x.astype(np.float16), grid.astype(np.float16)
    m = _grid_sample_model(16, x.shape, grid.shape, **attrs)
    ref = _ort(m, {"x": x16.astype(np.float32), "grid": g16.astype(np.float32)})[0]
    got = webnn.load(m.SerializeToString(), ctx, dtype="float16").compute({"x": x16, "grid": g16})["y"]
    assert got.dtype == np.float16 and got.shape == ref.shape
    if mode == "nearest":
        np.testing.assert_array_equal(got.ravel()[:len(pix)], [col for _, col in pix])
        np.testing.assert_array_equal(got, ref)
    else:
        assert np.abs(got.astype(np.float64) - ref).max() <= 2e-3 * np.abs(ref).max()


@pytest.mark.parametrize("attrs,shape,match", [
    ({"mode": "bicubic"}, (1, 2, 4, 4), "GridSample mode 'bicubic'"),
    ({}, (1, 2, 3, 4, 4), "GridSample of a 5-D input"),
])
def test_grid_sample_near_misses_are_refused_by_name(ctx, attrs, shape, match):
    grid = (1, 3, 3, 3, len(shape) - 2) if len(shape) == 5 else (1, 3, 3, 2)
    m = _grid_sample_model(20 if len(shape) == 5 else 16, shape, grid, **attrs)
    with pytest.raises(webnn.NotSupportedError, match=rf"'gs' \(GridSample.*{match}"):
        webnn.load(m.SerializeToString(), ctx)


@pytest.mark.parametrize("x_shape,grid_shape", [
    ((2, 1, 4, 4), (1, 3, 3, 2)),   # another batch than X's
    ((1, 1, 4, 4), (1, 3, 3, 3)),   # three coordinates for a 2-D image
    ((1, 1, 4, 4), (1, 3, 3)),      # rank 3
])
def test_grid_sample_malformed_grid_is_a_data_error(ctx, x_shape, grid_shape):
    """A grid that is not [N, H_out, W_out, 2] for X [N, C, H, W] (ORT refuses these models too):
    DataError naming the node, the argument, the expected and the given shape."""
    m = _grid_sample_model(16, x_shape, grid_shape)
    want = rf"'gs' \(GridSample.*argument 'grid': expected the shape \[N, H_out, W_out, 2\] with N = {x_shape[0]}"
    with pytest.raises(webnn.DataError, match=want + r".*got \[" + ", ".join(map(str, grid_shape)) + r"\]"):
        webnn.load(m.SerializeToString(), ctx)


# ---------------------------------------------------------------- Gather of the whole axis in order
@pytest.mark.parametrize("indices,view", [
    (np.arange(24).reshape(1, 24, 1, 1), True),        # dynamo's as_strided after a flatten
    (np.arange(24) - 24, True),                         # the same, counted from the end
    (np.arange(24)[::-1].copy(), False),                # reversed: a gather
    (np.r_[np.arange(23), 22], False),                  # one index twice, one missing
    (np.arange(12), False),                             # half the axis
])
def test_gather_of_the_whole_axis_in_order_is_a_reshape(ctx, rng, indices, view):
    """ReduceMean -> Reshape(-1) -> Gather(arange) -> Reshape, as the dynamo exporter writes an
    adaptive pooling of a permuted tensor; the near misses stay gathers. Values as ORT's (exact)."""
    nodes = [helper.make_node("ReduceMean", ["x"], ["m"], axes=[2, 3], keepdims=1),
             helper.make_node("Reshape", ["m", "flat"], ["f"]),
             helper.make_node("Gather", ["f", "idx"], ["g"], axis=0),
             helper.make_node("Reshape", ["g", "rows"], ["y"])]
    inits = [numpy_helper.from_array(np.array([-1], np.int64), "flat"),
             numpy_helper.from_array(indices.astype(np.int64), "idx"),
             numpy_helper.from_array(np.array([1, -1], np.int64), "rows")]
    m = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 24, 3, 3])],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    x = rng.standard_normal((1, 24, 3, 3)).astype(np.float32)
    loaded = webnn.load(m.SerializeToString(), ctx)
    np.testing.assert_allclose(loaded.compute({"x": x})["y"], _ort(m, {"x": x})[0], rtol=1e-6, atol=1e-7)
    templates = [s.template for s in loaded.graph._steps if hasattr(s, "template")]
    assert (not any("gather" in t for t in templates)) == view, templates


# ---------------------------------------------------------------- Resize beyond resample2d
@pytest.mark.parametrize("mode,coord,nearest,n_in,n_out,exclude_outside", [
    ("cubic", "half_pixel", "round_prefer_floor", 7, 13, 0),
    ("cubic", "half_pixel", "round_prefer_floor", 7, 13, 1),
    ("cubic", "pytorch_half_pixel", "round_prefer_floor", 9, 4, 0),
    ("cubic", "align_corners", "round_prefer_floor", 5, 11, 0),
    ("cubic", "asymmetric", "round_prefer_floor", 4, 9, 1),
    ("linear", "align_corners", "round_prefer_floor", 6, 17, 0),
    ("linear", "asymmetric", "round_prefer_floor", 8, 5, 0),
    ("nearest", "asymmetric", "floor", 9, 6, 0),
    ("nearest", "half_pixel", "round_prefer_ceil", 5, 12, 0),
    ("nearest", "align_corners", "ceil", 7, 3, 0),
])
def test_resize_taps_are_the_reference(mode, coord, nearest, n_in, n_out, exclude_outside):
    """GPU-free: resize_taps along one axis applied to the identity is the matrix that ONNX's
    reference Resize (onnx.reference) gives for every basis vector, within 2e-6 (the reference
    rounds some cubic steps to float32: ONNX Runtime differs from it by 1.2e-6 on these)."""
    from onnx.reference import ReferenceEvaluator

    from webnn_gpu.onnx.ops import resize_taps

    node = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode=mode, coordinate_transformation_mode=coord,
                            nearest_mode=nearest, exclude_outside=exclude_outside)
    m = _model([node], [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [n_in, n_in])],
               [helper.make_tensor_value_info("y", TensorProto.DOUBLE, None)],
               [numpy_helper.from_array(np.array([n_in, n_out], np.int64), "sizes")], opset=19)
    ref = ReferenceEvaluator(m).run(None, {"x": np.eye(n_in)})[0]        # row j: the response to e_j
    index, weight = resize_taps(n_in, n_out, n_out / n_in, mode, coord, nearest, -0.75, bool(exclude_outside))
    got = np.zeros((n_in, n_out))
    for t in range(index.shape[0]):
        np.add.at(got, (index[t], np.arange(n_out)), weight[t])
    np.testing.assert_allclose(got, ref, rtol=0, atol=2e-6)


def _resize_model(shape, sizes, opset=17, **attrs):
    node = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], name="rs", **attrs)
    return _model([node], [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                  [numpy_helper.from_array(np.array(sizes, np.int64), "sizes")], opset)


@pytest.mark.parametrize("attrs,sizes,resample2d", [
    # F.interpolate(bilinear, align_corners=True): both exporters
    ({"mode": "linear", "coordinate_transformation_mode": "align_corners"}, [1, 3, 11, 17], False),
    # F.interpolate(bicubic): TorchScript (pytorch_half_pixel) and dynamo (half_pixel), A = -0.75
    ({"mode": "cubic", "coordinate_transformation_mode": "pytorch_half_pixel", "cubic_coeff_a": -0.75},
     [1, 3, 16, 20], False),
    ({"mode": "cubic", "coordinate_transformation_mode": "half_pixel", "cubic_coeff_a": -0.75}, [1, 3, 5, 7], False),
    # F.interpolate(nearest, size) to a size that is no multiple: asymmetric, floor
    ({"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}, [1, 3, 13, 6],
     False),
    # near misses that stay one resample2d kernel: half-pixel linear, integer-factor asymmetric nearest
    ({"mode": "linear", "coordinate_transformation_mode": "half_pixel"}, [1, 3, 16, 20], True),
    ({"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}, [1, 3, 16, 20],
     True),
])
def test_resize_modes_match_onnxruntime(ctx, rng, attrs, sizes, resample2d):
    """What resample2d does not compute runs as per-axis gathers of known taps; the rest stays
    resample2d. Within 1e-5 of the output's magnitude of ORT's."""
    x = rng.standard_normal((1, 3, 8, 10)).astype(np.float32)
    m = _resize_model(x.shape, sizes, **attrs)
    ref = _ort(m, {"x": x})[0]
    loaded = webnn.load(m.SerializeToString(), ctx)
    got = loaded.compute({"x": x})["y"]
    assert got.shape == ref.shape
    assert np.abs(got.astype(np.float64) - ref).max() <= 1e-5 * np.abs(ref).max()
    templates = [s.template for s in loaded.graph._steps if hasattr(s, "template")]
    assert any("resample2d" in t for t in templates) == resample2d, templates


def test_resize_refusals_name_the_reason(ctx):
    m = _resize_model((1, 1, 4, 4), [1, 1, 8, 8], opset=19, mode="linear", antialias=1)
    with pytest.raises(webnn.NotSupportedError, match=r"'rs' \(Resize.*antialias"):
        webnn.load(m.SerializeToString(), ctx)
    node = helper.make_node("Resize", ["x", "roi", "", "sizes"], ["y"], name="rs", mode="linear",
                            coordinate_transformation_mode="tf_crop_and_resize")
    m = _model([node], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4])],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
               [numpy_helper.from_array(np.array([0, 0, 0.1, 0.1, 1, 1, 0.9, 0.9], np.float32), "roi"),
                numpy_helper.from_array(np.array([1, 1, 8, 8], np.int64), "sizes")])
    with pytest.raises(webnn.NotSupportedError, match=r"'rs' \(Resize.*tf_crop_and_resize"):
        webnn.load(m.SerializeToString(), ctx)


def _resize_scales_model(shape, scales, opset=17, **attrs):
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], name="rs", **attrs)
    return _model([node], [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                  [numpy_helper.from_array(np.array(scales, np.float32), "scales")], opset)


@pytest.mark.parametrize("mode,coord,n_in,scale", [
    ("linear", "align_corners", 5, 1.5),           # F.interpolate(scale_factor=1.5, align_corners=True): 7.5
    ("cubic", "align_corners", 4, 0.8),            # ONNX's test_resize_downsample_scales_cubic_align_corners
    ("nearest", "pytorch_half_pixel", 7, 0.25),    # 1.75: one output, at position 0 or 1.5
])
def test_resize_scale_of_no_whole_size_is_refused(ctx, mode, coord, n_in, scale):
    """align_corners / pytorch_half_pixel with a scale whose ``scale * n_in`` is not the output's
    length: ONNX Runtime and PyTorch read the whole length, ONNX's reference the fractional one;
    refused by name (as the model's readers disagree), not computed one way."""
    m = _resize_scales_model((1, 1, 3, n_in), [1, 1, 1, scale], mode=mode, coordinate_transformation_mode=coord)
    with pytest.raises(webnn.NotSupportedError,
                       match=rf"'rs' \(Resize.*{coord}' and scale {scale:g} on axis 3 of {n_in}: .* is no whole size"):
        webnn.load(m.SerializeToString(), ctx)


@pytest.mark.parametrize("mode,coord,n_in,scale", [
    ("linear", "align_corners", 4, 2.0),                            # a whole size
    ("linear", "align_corners", 3, float(np.float32(4 / 3))),       # float32's nearest to 4 / 3: size 4
    ("cubic", "align_corners", 6, 0.5),
    ("linear", "pytorch_half_pixel", 7, 0.45),   # 3.15 -> 3: more than one output, both read (x + .5) / s - .5
    ("nearest", "pytorch_half_pixel", 5, 1.5),
])
def test_resize_scales_near_misses_match_onnxruntime(ctx, rng, mode, coord, n_in, scale):
    """A ``scales`` input that gives a whole size (or a fractional one where the readings
    agree) loads and matches ORT within 1e-5 of the output's magnitude."""
    x = rng.standard_normal((1, 2, 3, n_in)).astype(np.float32)
    m = _resize_scales_model(x.shape, [1, 1, 1, scale], mode=mode, coordinate_transformation_mode=coord)
    ref = _ort(m, {"x": x})[0]
    got = webnn.load(m.SerializeToString(), ctx).compute({"x": x})["y"]
    assert got.shape == ref.shape
    assert np.abs(got.astype(np.float64) - ref).max() <= 1e-5 * np.abs(ref).max()


@pytest.mark.parametrize("shape,sizes,mode", [
    ((2, 6, 5), [2, 4, 11], "linear"),    # the two last axes of a 3-D tensor
    ((6, 5), [4, 11], "linear"),          # both axes of a 2-D tensor
    ((6, 5), [12, 10], "nearest"),
])
def test_resize_of_two_axes_of_a_2d_or_3d_tensor_matches_onnxruntime(ctx, rng, shape, sizes, mode):
    """Two adjacent axes of a tensor of rank 2 or 3 (resample2d wants 4-D; it crashed): one
    resample2d kernel on the tensor reshaped to 4-D around the pair, within 1e-6 of the
    output's magnitude of ORT's."""
    x = rng.standard_normal(shape).astype(np.float32)
    m = _resize_model(shape, sizes, opset=13, mode=mode)
    ref = _ort(m, {"x": x})[0]
    loaded = webnn.load(m.SerializeToString(), ctx)
    got = loaded.compute({"x": x})["y"]
    assert got.shape == ref.shape == tuple(sizes)
    assert np.abs(got.astype(np.float64) - ref).max() <= 1e-6 * np.abs(ref).max()
    templates = [s.template for s in loaded.graph._steps if hasattr(s, "template")]
    assert any("resample2d" in t for t in templates), templates
