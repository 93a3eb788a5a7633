"""webnn_gpu.onnx: the importer's contract on small models made with onnx.helper.

References are NumPy (float64 where it matters); each test states its tolerance.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import webnn_gpu as webnn
from webnn_gpu import onnx as wonnx


def _model(nodes, inputs, outputs, inits=(), opset=17, extra_opsets=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    imports = [helper.make_opsetid("", opset), *[helper.make_opsetid(d, v) for d, v in extra_opsets]]
    return helper.make_model(g, opset_imports=imports)


def _vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def test_shape_computation_folds_and_dims_fix_batch(ctx):
    """Shape -> Gather -> Unsqueeze -> Concat -> Reshape, with a symbolic batch fixed by dims."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "axes0"], ["n1"]),
        helper.make_node("Concat", ["n1", "minus1"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["flat"]),
        helper.make_node("Relu", ["flat"], ["y"]),
    ]
    inits = [numpy_helper.from_array(np.array(0, np.int64), "zero"),
             numpy_helper.from_array(np.array([0], np.int64), "axes0"),
             numpy_helper.from_array(np.array([-1], np.int64), "minus1")]
    m = _model(nodes, [_vi("x", TensorProto.FLOAT, ["batch", 3, 4])], [_vi("y", TensorProto.FLOAT, None)], inits)
    loaded = webnn.load(m.SerializeToString(), ctx, dims={"batch": 2})
    assert loaded.layout == "nchw"
    assert loaded.outputs["y"]["shape"] == [2, 12]
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    np.testing.assert_array_equal(loaded.compute(x)["y"], np.maximum(x, 0).reshape(2, 12))
    with pytest.raises(webnn.MLTypeError, match=r"'batch'.*input 'x'"):
        webnn.load(m.SerializeToString(), ctx)


def test_every_unsupported_node_is_listed(ctx):
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="ok"),
        helper.make_node("Acosh", ["a"], ["b"], name="first_bad"),
        helper.make_node("Resize", ["a", "", "scales"], ["c"], name="crop", mode="linear",
                         coordinate_transformation_mode="tf_crop_and_resize"),
        helper.make_node("Frobnicate", ["c"], ["d"], name="custom_one", domain="my.domain"),
        helper.make_node("Add", ["b", "d"], ["y"]),
    ]
    inits = [numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")]
    m = _model(nodes, [_vi("x", TensorProto.FLOAT, [1, 1, 2, 2])], [_vi("y", TensorProto.FLOAT, None)], inits,
               extra_opsets=[("my.domain", 1)])
    with pytest.raises(webnn.NotSupportedError) as info:
        wonnx.load(m, ctx)
    msg = str(info.value)
    assert "3 node(s)" in msg
    assert "'first_bad' (Acosh, opset 9)" in msg
    assert "'crop' (Resize, opset 13): Resize with coordinate_transformation_mode='tf_crop_and_resize'" in msg
    assert "'custom_one' (my.domain.Frobnicate, opset 1)" in msg

    def frobnicate(builder, inputs, attributes):
        return builder.mul(inputs[0], builder.constant("float32", 3.0))

    nodes[1] = helper.make_node("Neg", ["a"], ["b"])
    nodes[2] = helper.make_node("Identity", ["a"], ["c"])
    m = _model(nodes, [_vi("x", TensorProto.FLOAT, [1, 1, 2, 2])], [_vi("y", TensorProto.FLOAT, None)], inits,
               extra_opsets=[("my.domain", 1)])
    loaded = wonnx.load(m, ctx, custom_ops={"my.domain.Frobnicate": frobnicate})
    x = np.array([[[[1, -2], [3, 4]]]], np.float32)
    a = np.maximum(x, 0)
    np.testing.assert_array_equal(loaded.compute(x)["y"], -a + 3 * a)


def test_if_with_known_condition_is_inlined(ctx):
    then_g = helper.make_graph([helper.make_node("Mul", ["x", "two"], ["t"])], "then", [],
                               [_vi("t", TensorProto.FLOAT, [3])])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [],
                               [_vi("e", TensorProto.FLOAT, [3])])
    nodes = [helper.make_node("Equal", ["sr", "k16"], ["is16"]),
             helper.make_node("If", ["is16"], ["y"], then_branch=then_g, else_branch=else_g)]
    inits = [numpy_helper.from_array(np.array(16000, np.int64), "k16"),
             numpy_helper.from_array(np.array(2.0, np.float32), "two")]
    m = _model(nodes, [_vi("x", TensorProto.FLOAT, [3]), _vi("sr", TensorProto.INT64, [])],
               [_vi("y", TensorProto.FLOAT, [3])], inits)
    x = np.array([1, -2, 3], np.float32)
    for sr, want in ((16000, 2 * x), (8000, -x)):
        loaded = wonnx.load(m, ctx, known_inputs={"sr": np.array(sr, np.int64)})
        assert list(loaded.inputs) == ["x"]
        np.testing.assert_array_equal(loaded.compute(x)["y"], want)
    with pytest.raises(webnn.NotSupportedError, match="If's condition must be known at load time"):
        wonnx.load(m, ctx)


def test_int64_kept_and_bool_as_uint8(ctx):
    nodes = [helper.make_node("Add", ["i", "big"], ["j"]),
             helper.make_node("Greater", ["j", "big"], ["gt"]),
             helper.make_node("And", ["gt", "flag"], ["y"])]
    inits = [numpy_helper.from_array(np.array([2**40], np.int64), "big")]
    m = _model(nodes, [_vi("i", TensorProto.INT64, [3]), _vi("flag", TensorProto.BOOL, [3])],
               [_vi("y", TensorProto.BOOL, [3]), _vi("j", TensorProto.INT64, [3])], inits)
    loaded = wonnx.load(m, ctx)
    assert loaded.inputs == {"i": {"data_type": "int64", "shape": [3]}, "flag": {"data_type": "uint8", "shape": [3]}}
    assert loaded.outputs["y"]["data_type"] == "uint8"
    i = np.array([5, -1, 0], np.int64)
    out = loaded.compute({"i": i, "flag": np.array([True, True, False])})
    np.testing.assert_array_equal(out["j"], i + 2**40)
    np.testing.assert_array_equal(out["y"], np.array([1, 0, 0], np.uint8))


def test_opset_versions_of_attributes_that_became_inputs(ctx):
    """Slice (attributes before 10) and ReduceSum (axes input from 13) and Clip (inputs from 11)."""
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 10
    for opset in (9, 13):
        if opset < 10:
            sl = helper.make_node("Slice", ["x"], ["s"], starts=[1], ends=[3], axes=[2])
            rs = helper.make_node("ReduceSum", ["s"], ["r"], axes=[1], keepdims=0)
            cl = helper.make_node("Clip", ["r"], ["y"], min=-5.0, max=5.0)
            inits = []
        else:
            sl = helper.make_node("Slice", ["x", "st", "en", "ax"], ["s"])
            rs = helper.make_node("ReduceSum", ["s", "rax"], ["r"], keepdims=0)
            cl = helper.make_node("Clip", ["r", "lo", "hi"], ["y"])
            inits = [numpy_helper.from_array(np.array(v, dt), n) for n, v, dt in
                     (("st", [1], np.int64), ("en", [3], np.int64), ("ax", [2], np.int64), ("rax", [1], np.int64),
                      ("lo", -5.0, np.float32), ("hi", 5.0, np.float32))]
        m = _model([sl, rs, cl], [_vi("x", TensorProto.FLOAT, [2, 3, 4])], [_vi("y", TensorProto.FLOAT, None)],
                   inits, opset=opset)
        got = wonnx.load(m, ctx).compute(x)["y"]
        np.testing.assert_array_equal(got, np.clip(x[:, :, 1:3].sum(1), -5, 5))


def test_float16_graph_and_external_data(ctx, tmp_path):
    w = np.random.default_rng(1).standard_normal((4, 4)).astype(np.float32)
    m = _model([helper.make_node("MatMul", ["x", "w"], ["y"])], [_vi("x", TensorProto.FLOAT, [2, 4])],
               [_vi("y", TensorProto.FLOAT, [2, 4])], [numpy_helper.from_array(w, "w")])
    path = tmp_path / "m.onnx"
    onnx.save_model(m, str(path), save_as_external_data=True, all_tensors_to_one_file=True, location="m.data",
                    size_threshold=0)
    assert (tmp_path / "m.data").exists()
    x = np.random.default_rng(2).standard_normal((2, 4)).astype(np.float32)
    ref = x.astype(np.float64) @ w
    np.testing.assert_allclose(webnn.load(path, ctx).compute(x)["y"], ref, rtol=1e-5, atol=1e-5)
    half = webnn.load(str(path), ctx, dtype="float16")
    assert half.inputs["x"]["data_type"] == "float16"
    np.testing.assert_allclose(half.compute(x)["y"].astype(np.float64), ref, rtol=2e-2, atol=2e-2)
    with pytest.raises(webnn.DataError, match="external"):
        wonnx.load(path.read_bytes(), ctx)


def test_load_tells_formats_apart(ctx, tmp_path):
    with pytest.raises(webnn.DataError):
        webnn.load(b"\x00\x01 not a model at all", ctx)
    m = _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", TensorProto.FLOAT, [2])],
               [_vi("y", TensorProto.FLOAT, [2])])
    path = tmp_path / "model.tflite"  # the name does not matter
    path.write_bytes(m.SerializeToString())
    np.testing.assert_array_equal(webnn.load(path, ctx).compute(np.array([-1, 2], np.float32))["y"], [0, 2])


def test_supported_table_covers_onnxruntime_webnn_ops():
    """Every operator of ONNX Runtime's WebNN provider table has a mapping."""
    ort_table = """Abs Add And ArgMax ArgMin AveragePool BatchNormalization Cast Ceil Clip Concat Conv ConvTranspose
        Cos CumSum Div DequantizeLinear Dropout Einsum Elu Equal Erf Exp Expand Flatten Floor Gather GatherElements
        GatherND Gelu Gemm GlobalAveragePool GlobalMaxPool GlobalLpPool Greater GreaterOrEqual GRU HardSigmoid
        HardSwish Identity InstanceNormalization LayerNormalization LeakyRelu Less LessOrEqual Log LpPool LRN LSTM
        MatMul Max MaxPool Min Mul Neg Not Or Pad Pow PRelu QuantizeLinear Reciprocal ReduceL1 ReduceL2
        ReduceLogSum ReduceLogSumExp ReduceMax ReduceMean ReduceMin ReduceProd ReduceSum ReduceSumSquare Relu
        Reshape Resize ScatterElements ScatterND Shape Sigmoid Sign SimplifiedLayerNormalization Sin Slice Softmax
        Softplus Softsign Split Sqrt Squeeze Sub Tan Tanh Tile Transpose Trilu Unsqueeze Where Xor RotaryEmbedding""".split()
    ms = ["com.microsoft." + o for o in ("MatMulNBits", "SkipSimplifiedLayerNormalization", "FusedConv", "Gelu",
                                         "FastGelu", "BiasGelu", "QuickGelu", "SkipLayerNormalization",
                                         "RotaryEmbedding", "MultiHeadAttention", "GroupQueryAttention")]
    table = wonnx.supported_ops()
    missing = [o for o in ort_table + ms if o not in table]
    assert not missing, missing


def test_info_lists_model_operators(tmp_path):
    from webnn_gpu import cli

    m = _model([helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Acosh", ["a"], ["y"])],
               [_vi("x", TensorProto.FLOAT, [2])], [_vi("y", TensorProto.FLOAT, [2])])
    path = tmp_path / "m.onnx"
    path.write_bytes(m.SerializeToString())
    from webnn_gpu._info import model_ops

    assert model_ops(path) == {"Acosh": (1, False), "Relu": (1, True)}
    assert cli.main(["info", str(path)]) == 0


@pytest.mark.parametrize("equation,shapes", [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("bhqd,bhkd->bhqk", [(1, 2, 3, 4), (1, 2, 5, 4)]),
    ("i,i", [(6,), (6,)]),
    ("ij->ji", [(3, 4)]),
    ("ij->", [(3, 4)]),
    ("ij,ij->ij", [(3, 4), (3, 4)]),
    ("ij,jk", [(3, 4), (4, 2)]),
])
def test_einsum_matches_numpy(ctx, equation, shapes):
    """Einsum in float32 against NumPy's float64 einsum (rtol 1e-5)."""
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    names = [f"x{i}" for i in range(len(shapes))]
    m = _model([helper.make_node("Einsum", names, ["y"], equation=equation)],
               [_vi(nm, TensorProto.FLOAT, list(s)) for nm, s in zip(names, shapes)],
               [_vi("y", TensorProto.FLOAT, None)])
    got = wonnx.load(m, ctx).compute(dict(zip(names, arrays)))["y"]
    want = np.einsum(equation, *[a.astype(np.float64) for a in arrays])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_microsoft_ops_match_onnxruntime(ctx):
    """com.microsoft MultiHeadAttention, SkipLayerNormalization, FastGelu, RotaryEmbedding against ORT CPU."""
    import onnxruntime as ort

    rng = np.random.default_rng(5)
    B, S, H, d = 2, 5, 2, 4
    D = H * d
    cos = rng.uniform(-1, 1, (16, d // 2)).astype(np.float32)
    sin = rng.uniform(-1, 1, (16, d // 2)).astype(np.float32)
    nodes = [
        helper.make_node("SkipLayerNormalization", ["q", "k", "gamma", "beta"], ["ln"], domain="com.microsoft",
                         epsilon=1e-5),
        helper.make_node("FastGelu", ["ln"], ["g"], domain="com.microsoft"),
        helper.make_node("MultiHeadAttention", ["g", "k", "v"], ["att"], domain="com.microsoft", num_heads=H),
        helper.make_node("RotaryEmbedding", ["att", "pos", "cos", "sin"], ["y"], domain="com.microsoft",
                         num_heads=H),
    ]
    inits = [numpy_helper.from_array(rng.standard_normal(D).astype(np.float32), "gamma"),
             numpy_helper.from_array(rng.standard_normal(D).astype(np.float32), "beta"),
             numpy_helper.from_array(np.array([[3, 4, 5, 6, 7], [0, 1, 2, 3, 4]], np.int64), "pos"),
             numpy_helper.from_array(cos, "cos"), numpy_helper.from_array(sin, "sin")]
    m = _model(nodes, [_vi(nm, TensorProto.FLOAT, [B, S, D]) for nm in "qkv"],
               [_vi("y", TensorProto.FLOAT, [B, S, D])], inits, extra_opsets=[("com.microsoft", 1)])
    feed = {nm: rng.standard_normal((B, S, D)).astype(np.float32) for nm in "qkv"}
    got = wonnx.load(m, ctx).compute(feed)["y"]
    ref = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feed)[0]
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


def test_docs_operator_table_is_the_supported_table():
    """docs/onnx.md's operator table lists exactly supported_ops(), with the same descriptions."""
    import pathlib

    text = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "onnx.md").read_text()
    table = text[text.index("| ONNX operator | WebNN |"):].split("\n\n")[0].splitlines()[2:]
    rows = dict(line.strip("|").split(" | ", 1) for line in table)
    assert {k.strip(): v.strip() for k, v in rows.items()} == wonnx.supported_ops()


def _templates(loaded) -> list[str]:
    return [s.template for s in loaded.graph._steps if hasattr(s, "template")]


@pytest.mark.parametrize("bias, group, const_weights", [(True, 1, False), (False, 4, True)])
def test_conv_batchnorm_folds_into_the_conv(ctx, bias, group, const_weights):
    """Conv -> BatchNormalization (inference) becomes one conv with the normalization in its
    weights, from initializers or Constant nodes; a conv read by another node keeps its BN."""
    rng = np.random.default_rng(3)
    w = rng.standard_normal((8, 8 // group, 3, 3)).astype(np.float32)
    b = rng.standard_normal(8).astype(np.float32)
    scale, offset, mean = (rng.standard_normal(8).astype(np.float32) for _ in range(3))
    var = rng.uniform(0.5, 2, 8).astype(np.float32)
    arrays = {"w": w, "scale": scale, "offset": offset, "mean": mean, "var": var, **({"b": b} if bias else {})}
    conv_in = ["x", "w", "b"] if bias else ["x", "w"]
    nodes = [helper.make_node("Conv", conv_in, ["c"], pads=[1, 1, 1, 1], group=group, name="conv"),
             helper.make_node("BatchNormalization", ["c", "scale", "offset", "mean", "var"], ["y"], epsilon=1e-3,
                              name="bn")]
    if const_weights:
        nodes = [helper.make_node("Constant", [], [k], value=numpy_helper.from_array(a, k))
                 for k, a in arrays.items()] + nodes
        inits = []
    else:
        inits = [numpy_helper.from_array(a, k) for k, a in arrays.items()]
    x = rng.standard_normal((1, 8, 6, 7)).astype(np.float32)
    # float64 reference: the conv, then the normalization as ONNX defines it
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    cin = 8 // group
    c = np.zeros((1, 8, 6, 7))
    for o in range(8):
        g0 = (o // (8 // group)) * cin
        for i in range(cin):
            for ky in range(3):
                for kx in range(3):
                    c[0, o] += w[o, i, ky, kx] * xp[0, g0 + i, ky:ky + 6, kx:kx + 7]
    if bias:
        c += b.reshape(1, 8, 1, 1)
    sh = (1, 8, 1, 1)
    want = (c - mean.reshape(sh)) / np.sqrt(var.reshape(sh) + 1e-3) * scale.reshape(sh) + offset.reshape(sh)
    m = _model(nodes, [_vi("x", TensorProto.FLOAT, [1, 8, 6, 7])], [_vi("y", TensorProto.FLOAT, None)], inits)
    before = m.SerializeToString()
    loaded = wonnx.load(m, ctx)
    assert m.SerializeToString() == before  # the caller's model is not changed
    assert not any(t.startswith("norm/") for t in _templates(loaded))
    np.testing.assert_allclose(loaded.compute(x)["y"], want, atol=1e-4 * np.abs(want).max(), rtol=0)
    # the conv's output also read elsewhere: no fold, same values
    nodes2 = nodes + [helper.make_node("Relu", ["c"], ["r"])]
    m2 = _model(nodes2, [_vi("x", TensorProto.FLOAT, [1, 8, 6, 7])],
                [_vi("y", TensorProto.FLOAT, None), _vi("r", TensorProto.FLOAT, None)], inits)
    loaded2 = wonnx.load(m2, ctx)
    assert any(t.startswith("norm/") for t in _templates(loaded2))
    out = loaded2.compute(x)
    np.testing.assert_allclose(out["y"], want, atol=1e-4 * np.abs(want).max(), rtol=0)
    np.testing.assert_allclose(out["r"], np.maximum(c, 0), atol=1e-4 * np.abs(c).max(), rtol=0)


def test_one_hot_matmul_is_a_gather(ctx):
    """Cast(Equal(index[..., 1], arange(depth))) @ W + bias (jax2tf's one_hot, as in Magika)
    becomes a gather of the rows of W + bias; indices outside [0, depth) give the bias alone,
    as the one-hot does (bit-exact: the same float32 additions)."""
    depth, n = 7, 5
    rng = np.random.default_rng(4)
    w = rng.standard_normal((depth, n)).astype(np.float32)
    nodes = [helper.make_node("Unsqueeze", ["x", "axes"], ["xu"]),
             helper.make_node("Equal", ["xu", "iota"], ["eq"]),
             helper.make_node("Cast", ["eq"], ["oh"], to=TensorProto.FLOAT),
             helper.make_node("MatMul", ["oh", "w"], ["mm"]),
             helper.make_node("Add", ["bias", "mm"], ["y"])]
    bias = rng.standard_normal(n).astype(np.float32)
    inits = [numpy_helper.from_array(np.array([2], np.int64), "axes"),
             numpy_helper.from_array(np.arange(depth, dtype=np.int32).reshape(1, 1, depth), "iota"),
             numpy_helper.from_array(w, "w"), numpy_helper.from_array(bias, "bias")]
    m = _model(nodes, [_vi("x", TensorProto.INT32, [2, 6])], [_vi("y", TensorProto.FLOAT, None)], inits)
    loaded = wonnx.load(m, ctx)
    templates = _templates(loaded)
    assert templates == ["elementwise/map.wgsl", "gather_scatter/gather.wgsl"]  # clamp, gather (bias in the table)
    x = np.array([[0, 1, 6, 3, -1, 7], [300, -2, -8, 2, 5, 4]], np.int32)
    want = ((x[..., None] == np.arange(depth)).astype(np.float64) @ w.astype(np.float64)).astype(np.float32) + bias
    np.testing.assert_array_equal(loaded.compute(x)["y"], want)


def test_elementwise_after_a_squeezed_conv_runs_in_its_kernel(ctx):
    """A 1-D Conv (run as 2-D with a unit axis), or a 2-D one squeezed back to 3-D, followed
    by an Add of a known bias and a Relu: both run in the conv's kernel (no element-wise
    kernel); a ReduceMean over unit axes is no kernel."""
    rng = np.random.default_rng(5)
    w = rng.standard_normal((6, 4, 3)).astype(np.float32)
    bias = rng.standard_normal((6, 1)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1]),
             helper.make_node("Add", ["bias", "c"], ["a"]),
             helper.make_node("Relu", ["a"], ["r"]),
             helper.make_node("Unsqueeze", ["r", "axes"], ["r4"]),
             helper.make_node("ReduceMean", ["r4", "axes"], ["y"], keepdims=0)]
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(bias, "bias"),
             numpy_helper.from_array(np.array([3], np.int64), "axes")]
    m = _model(nodes, [_vi("x", TensorProto.FLOAT, [1, 4, 9])], [_vi("y", TensorProto.FLOAT, None)], inits, opset=18)
    loaded = wonnx.load(m, ctx)
    templates = _templates(loaded)
    assert not any(t.startswith(("elementwise/", "reduce/")) for t in templates), templates
    x = rng.standard_normal((1, 4, 9)).astype(np.float32)
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1)))
    conv = np.stack([sum(w[o, i, k] * xp[0, i, k:k + 9] for i in range(4) for k in range(3)) for o in range(6)])
    want = np.maximum(conv + bias, 0)[None]
    np.testing.assert_allclose(loaded.compute(x)["y"], want, atol=1e-5 * np.abs(want).max(), rtol=0)


def test_conv_scales_and_offsets_fold_into_the_weights(ctx):
    """Per-channel Mul/Add before an unpadded Conv and Mul/Add/Sub/Div after one (PP-LCNet's
    learnable affine blocks) fold into the convs' weights: no element-wise kernel is left.
    Where folding would not be exact (an offset before a padded conv, a conv subtracted from
    a constant) the ops stay; both graphs match ONNX Runtime's CPU provider."""
    import onnxruntime as ort

    rng = np.random.default_rng(6)

    def arr(*shape):
        return rng.uniform(0.5, 1.5, shape).astype(np.float32)

    consts = {"s_in": arr(1, 4, 1, 1), "a_in": arr(4, 1, 1), "w1": arr(6, 4, 1, 1) - 1, "b1": arr(6),
              "half": np.array(0.5, np.float32), "off": arr(6, 1, 1), "w2": arr(6, 6, 3, 3) - 1,
              "k": arr(1), "d": arr(1, 6, 1, 1), "w3": arr(6, 4, 3, 3) - 1, "w4": arr(5, 6, 1, 1) - 1,
              "three": np.array(3, np.float32), "zero": np.array(0, np.float32), "six": np.array(6, np.float32)}
    inits = [numpy_helper.from_array(a, k) for k, a in consts.items()]
    x = rng.standard_normal((1, 4, 5, 7)).astype(np.float32)

    def check(nodes, folds):
        m = _model(nodes, [_vi("x", TensorProto.FLOAT, [1, 4, 5, 7])], [_vi("y", TensorProto.FLOAT, None)], inits)
        loaded = wonnx.load(m, ctx)
        assert (not any(t.startswith("elementwise/") for t in _templates(loaded))) == folds, _templates(loaded)
        ref = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
        np.testing.assert_allclose(loaded.compute(x)["y"], ref, atol=1e-5 * np.abs(ref).max(), rtol=0)

    check([helper.make_node("Mul", ["x", "s_in"], ["t0"]),
           helper.make_node("Add", ["a_in", "t0"], ["t1"]),
           helper.make_node("Conv", ["t1", "w1", "b1"], ["c1"]),
           helper.make_node("Mul", ["half", "c1"], ["t2"]),
           helper.make_node("Add", ["t2", "off"], ["t3"]),
           helper.make_node("Relu", ["t3"], ["r"]),
           helper.make_node("Conv", ["r", "w2"], ["c2"], pads=[1, 1, 1, 1]),
           helper.make_node("Sub", ["c2", "k"], ["t4"]),
           helper.make_node("Div", ["t4", "d"], ["y"])], True)
    # a hard-swish's "/ 6" before a pointwise conv stays: the compiler's hard-swish fusion takes it
    check([helper.make_node("Conv", ["x", "w3"], ["c1"], pads=[1, 1, 1, 1]),
           helper.make_node("Add", ["c1", "three"], ["t0"]),
           helper.make_node("Clip", ["t0", "zero", "six"], ["t1"]),
           helper.make_node("Mul", ["c1", "t1"], ["t2"]),
           helper.make_node("Div", ["t2", "six"], ["t3"]),
           helper.make_node("Conv", ["t3", "w4"], ["y"])], True)
    check([helper.make_node("Add", ["x", "a_in"], ["t1"]),
           helper.make_node("Conv", ["t1", "w3"], ["c2"], pads=[1, 1, 1, 1]),
           helper.make_node("Sub", ["k", "c2"], ["t4"]),
           helper.make_node("Relu", ["t4"], ["y"])], False)


def test_squeeze_excite_layers_run_as_one_kernel(ctx):
    """GlobalAveragePool -> 1x1 Conv -> Relu -> 1x1 Conv -> HardSigmoid -> Mul: the two convs
    on the pooled pixel run in NHWC (the same bytes), so the compiler's squeeze-excite kernel
    takes both with their activations; values as ONNX Runtime's CPU provider."""
    import onnxruntime as ort

    rng = np.random.default_rng(7)
    inits = [numpy_helper.from_array(rng.standard_normal((4, 16, 1, 1)).astype(np.float32), "w1"),
             numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "b1"),
             numpy_helper.from_array(rng.standard_normal((16, 4, 1, 1)).astype(np.float32), "w2"),
             numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), "b2")]
    nodes = [helper.make_node("GlobalAveragePool", ["x"], ["p"]),
             helper.make_node("Conv", ["p", "w1", "b1"], ["c1"]),
             helper.make_node("Relu", ["c1"], ["r"]),
             helper.make_node("Conv", ["r", "w2", "b2"], ["c2"]),
             helper.make_node("HardSigmoid", ["c2"], ["s"], alpha=0.2, beta=0.5),
             helper.make_node("Mul", ["x", "s"], ["y"])]
    m = _model(nodes, [_vi("x", TensorProto.FLOAT, [1, 16, 5, 6])], [_vi("y", TensorProto.FLOAT, None)], inits)
    loaded = wonnx.load(m, ctx)
    templates = _templates(loaded)
    assert "matmul/squeeze_excite.wgsl" in templates and not any(t.startswith("matmul/small") for t in templates)
    x = rng.standard_normal((1, 16, 5, 6)).astype(np.float32)
    ref = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(loaded.compute(x)["y"], ref, atol=1e-5 * np.abs(ref).max(), rtol=0)


def test_fused_conv_activation_runs_in_the_conv(ctx):
    """com.microsoft FusedConv, 1-D (a unit axis added and removed): its activation is the
    conv's epilogue; values as ONNX Runtime's CPU provider."""
    import onnxruntime as ort

    rng = np.random.default_rng(8)
    inits = [numpy_helper.from_array(rng.standard_normal((6, 4, 3)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal(6).astype(np.float32), "b")]
    nodes = [helper.make_node("FusedConv", ["x", "w", "b"], ["y"], domain="com.microsoft", activation="LeakyRelu",
                              activation_params=[0.1], pads=[1, 1])]
    m = _model(nodes, [_vi("x", TensorProto.FLOAT, [1, 4, 9])], [_vi("y", TensorProto.FLOAT, None)], inits,
               extra_opsets=[("com.microsoft", 1)])
    loaded = wonnx.load(m, ctx)
    assert not any(t.startswith("elementwise/") for t in _templates(loaded))
    x = rng.standard_normal((1, 4, 9)).astype(np.float32)
    ref = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(loaded.compute(x)["y"], ref, atol=1e-5 * np.abs(ref).max(), rtol=0)


def test_magnitude_of_stacked_halves_is_one_reduction(ctx):
    """sqrt(Slice(y, 0:H)^2 + Slice(y, H:2H)^2) along the channels (an STFT's real and
    imaginary parts stacked by its conv, as in Silero VAD): one reduce_l2, no slices and no
    element-wise kernel; values as ONNX Runtime's CPU provider."""
    import onnxruntime as ort

    rng = np.random.default_rng(9)
    H = 5
    inits = [numpy_helper.from_array(rng.standard_normal((2 * H, 1, 8)).astype(np.float32), "w"),
             numpy_helper.from_array(np.array([0], np.int64), "s0"), numpy_helper.from_array(np.array([H], np.int64), "h"),
             numpy_helper.from_array(np.array([2 * H], np.int64), "e"), numpy_helper.from_array(np.array([1], np.int64), "ax"),
             numpy_helper.from_array(np.array(2.0, np.float32), "two")]
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], strides=[4]),
             helper.make_node("Slice", ["y", "s0", "h", "ax"], ["re"]),
             helper.make_node("Slice", ["y", "h", "e", "ax"], ["im"]),
             helper.make_node("Pow", ["re", "two"], ["re2"]),
             helper.make_node("Pow", ["im", "two"], ["im2"]),
             helper.make_node("Add", ["re2", "im2"], ["s"]),
             helper.make_node("Sqrt", ["s"], ["mag"])]
    m = _model(nodes, [_vi("x", TensorProto.FLOAT, [1, 1, 40])], [_vi("mag", TensorProto.FLOAT, None)], inits)
    loaded = wonnx.load(m, ctx)
    steps = [(s.template, s.label) for s in loaded.graph._steps if hasattr(s, "template")]
    assert steps[-1][0].startswith("reduce/") and not any(
        t.startswith("elementwise/") or "Slice" in str(label) for t, label in steps), steps
    x = rng.standard_normal((1, 1, 40)).astype(np.float32)
    ref = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(loaded.compute(x)["mag"], ref, atol=1e-5 * np.abs(ref).max(), rtol=0)


@pytest.mark.parametrize("opset, near_miss", [(18, ""), (13, ""), (18, "gate_read"), (18, "x_batch1")])
def test_spelled_out_lstm_cell_is_one_recurrent_kernel(ctx, opset, near_miss):
    """Gemm(x) + Gemm(h) -> Split in 4 -> sigmoid/tanh gates -> c' = f * c + i * g,
    h' = o * tanh(c') (PyTorch's exported LSTMCell, Silero VAD's op18 file), with the gates in
    any order, runs as one recurrent kernel; c' may be read elsewhere too. Values as float64
    NumPy. Near misses keep the ops as they are: a gate also read as a graph output; x of
    batch 1 broadcast against h and c of batch 2."""
    rng = np.random.default_rng(12)
    B, I, H = 2, 6, 8
    wx = rng.standard_normal((4 * H, I)).astype(np.float32) * 0.5
    wh = rng.standard_normal((H, 4 * H)).astype(np.float32) * 0.5  # transB=0: [H, 4H]
    bx = rng.standard_normal(4 * H).astype(np.float32)
    bh = rng.standard_normal((1, 4 * H)).astype(np.float32)
    order = ["o", "g", "i", "f"]  # the parts of the split, by role
    inits = [numpy_helper.from_array(a, k) for k, a in (("wx", wx), ("wh", wh), ("bx", bx), ("bh", bh))]
    split_in = ["z"]
    split_kw = {"axis": 1}
    if opset >= 18:
        split_kw["num_outputs"] = 4
    else:
        inits.append(numpy_helper.from_array(np.array([H] * 4, np.int64), "sizes"))
        split_in.append("sizes")
    nodes = [helper.make_node("Gemm", ["x", "wx", "bx"], ["gx"], transB=1),
             helper.make_node("Gemm", ["h", "wh", "bh"], ["gh"]),
             helper.make_node("Add", ["gh", "gx"], ["z"]),
             helper.make_node("Split", split_in, [f"z_{r}" for r in order], **split_kw),
             *[helper.make_node("Tanh" if r == "g" else "Sigmoid", [f"z_{r}"], [f"a_{r}"]) for r in order],
             helper.make_node("Mul", ["c", "a_f"], ["fc"]),
             helper.make_node("Mul", ["a_i", "a_g"], ["ig"]),
             helper.make_node("Add", ["ig", "fc"], ["c2"]),
             helper.make_node("Tanh", ["c2"], ["tc"]),
             helper.make_node("Mul", ["tc", "a_o"], ["h2"]),
             helper.make_node("Relu", ["c2"], ["c2r"])]
    outs = [_vi("h2", TensorProto.FLOAT, None), _vi("c2r", TensorProto.FLOAT, None)]
    if near_miss == "gate_read":
        outs.append(_vi("a_i", TensorProto.FLOAT, None))
    bx_ = 1 if near_miss == "x_batch1" else B
    m = _model(nodes, [_vi("x", TensorProto.FLOAT, [bx_, I]), _vi("h", TensorProto.FLOAT, [B, H]),
                       _vi("c", TensorProto.FLOAT, [B, H])], outs, inits, opset=opset)
    loaded = wonnx.load(m, ctx)
    templates = _templates(loaded)
    assert any(t.startswith("recurrent/") for t in templates) != bool(near_miss), templates
    x, h, c = (rng.standard_normal((b, n)).astype(np.float32) for b, n in ((bx_, I), (B, H), (B, H)))
    z = x.astype(np.float64) @ wx.T.astype(np.float64) + bx + h.astype(np.float64) @ wh.astype(np.float64) + bh
    a = {r: z[:, k * H:(k + 1) * H] for k, r in enumerate(order)}
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    c2 = sig(a["f"]) * c + sig(a["i"]) * np.tanh(a["g"])
    h2 = sig(a["o"]) * np.tanh(c2)
    got = loaded.compute({"x": x, "h": h, "c": c})
    np.testing.assert_allclose(got["h2"], h2, atol=1e-5, rtol=0)
    np.testing.assert_allclose(got["c2r"], np.maximum(c2, 0), atol=1e-5 * np.abs(c2).max(), rtol=0)
    if near_miss == "gate_read":
        np.testing.assert_allclose(got["a_i"], sig(a["i"]), atol=1e-6, rtol=0)


def test_conv_transpose_batchnorm_folds_into_its_weights(ctx):
    """ConvTranspose (2 groups) -> Add of a per-channel bias -> BatchNormalization -> Relu (PP-OCR
    det's upsampling head) is one conv_transpose2d kernel with the relu as its epilogue; values
    as float64 NumPy."""
    rng = np.random.default_rng(5)
    C, O, G, H, W = 6, 4, 2, 3, 5
    w = rng.standard_normal((C, O // G, 2, 2)).astype(np.float32)
    bias = rng.standard_normal((1, O, 1, 1)).astype(np.float32)
    scale, offset, mean = (rng.standard_normal(O).astype(np.float32) for _ in range(3))
    var = rng.uniform(0.5, 2, O).astype(np.float32)
    inits = [numpy_helper.from_array(a, k) for k, a in (("w", w), ("bias", bias), ("scale", scale),
                                                        ("offset", offset), ("mean", mean), ("var", var))]
    nodes = [helper.make_node("ConvTranspose", ["x", "w"], ["t"], kernel_shape=[2, 2], strides=[2, 2], group=G),
             helper.make_node("Add", ["t", "bias"], ["tb"]),
             helper.make_node("BatchNormalization", ["tb", "scale", "offset", "mean", "var"], ["n"], epsilon=1e-3),
             helper.make_node("Relu", ["n"], ["y"])]
    m = _model(nodes, [_vi("x", TensorProto.FLOAT, [1, C, H, W])], [_vi("y", TensorProto.FLOAT, None)], inits)
    loaded = wonnx.load(m, ctx)
    assert _templates(loaded) == ["conv/transpose_tiled.wgsl"], _templates(loaded)
    x = rng.standard_normal((1, C, H, W)).astype(np.float32)
    t = np.zeros((1, O, 2 * H, 2 * W))
    cg, og = C // G, O // G
    for o in range(O):
        gi = o // og
        for c in range(gi * cg, (gi + 1) * cg):
            for kh in range(2):
                for kw in range(2):
                    t[0, o, kh::2, kw::2] += x[0, c].astype(np.float64) * w[c, o % og, kh, kw]
    sh = (1, O, 1, 1)
    want = np.maximum((t + bias - mean.reshape(sh)) / np.sqrt(var.reshape(sh) + 1e-3) * scale.reshape(sh)
                      + offset.reshape(sh), 0)
    np.testing.assert_allclose(loaded.compute(x)["y"], want, atol=1e-5 * np.abs(want).max(), rtol=0)


def test_tanh_gelu_after_a_sliced_squeezed_conv_keeps_the_conv_layout(ctx):
    """Conv (2-D, 5x1) -> a Slice of everything -> Squeeze -> Add of a known bias -> the tanh
    form of gelu written out (products of two run-time views) -> GlobalMaxPool, as jax2tf
    writes Magika's conv block: the bias runs in the conv's kernel and the gelu is one
    element-wise kernel on the conv's output (no transposes between them); values as float64
    NumPy."""
    rng = np.random.default_rng(8)
    C, O, L = 8, 12, 20
    w = (rng.standard_normal((O, C, 5, 1)) * 0.3).astype(np.float32)
    bias = rng.standard_normal((1, O, 1)).astype(np.float32)
    k = {n: numpy_helper.from_array(np.array(v, np.float32), n) for n, v in
         (("c3", 0.044715), ("sq", 0.7978846), ("one", 1.0), ("half", 0.5))}
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(bias, "bias"), *k.values(),
             numpy_helper.from_array(np.array([0, 0, 0], np.int64), "s0"),
             numpy_helper.from_array(np.array([2 ** 31 - 1] * 3, np.int64), "e0"),
             numpy_helper.from_array(np.array([0, 1, 2], np.int64), "ax"),
             numpy_helper.from_array(np.array([3], np.int64), "a3")]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[5, 1]),
             helper.make_node("Slice", ["c", "s0", "e0", "ax"], ["cs"]),
             helper.make_node("Squeeze", ["cs", "a3"], ["c3d"]),
             helper.make_node("Add", ["c3d", "bias"], ["v"]),
             helper.make_node("Mul", ["c3", "v"], ["m0"]),
             helper.make_node("Mul", ["v", "m0"], ["m1"]),
             helper.make_node("Mul", ["v", "m1"], ["m2"]),
             helper.make_node("Add", ["v", "m2"], ["inner"]),
             helper.make_node("Mul", ["sq", "inner"], ["m3"]),
             helper.make_node("Tanh", ["m3"], ["t"]),
             helper.make_node("Add", ["one", "t"], ["t1"]),
             helper.make_node("Mul", ["half", "t1"], ["m4"]),
             helper.make_node("Mul", ["v", "m4"], ["g"]),
             helper.make_node("GlobalMaxPool", ["g"], ["y"])]
    m = _model(nodes, [_vi("x", TensorProto.FLOAT, [1, C, L + 4, 1])], [_vi("y", TensorProto.FLOAT, None)], inits,
               opset=15)
    loaded = wonnx.load(m, ctx)
    templates = _templates(loaded)
    after = templates[templates.index("matmul/tile.wgsl") + 1:]  # (the NCHW input may be re-laid out first)
    assert not any(t.startswith("layout/") for t in after), templates
    assert sum(t.startswith("elementwise/") for t in after) == 1, templates
    x = rng.standard_normal((1, C, L + 4, 1)).astype(np.float32)
    conv = np.stack([sum(w[o, i, t, 0] * x[0, i, t:t + L, 0].astype(np.float64) for i in range(C) for t in range(5))
                     for o in range(O)]) + bias[0]
    gelu = 0.5 * conv * (1 + np.tanh(0.7978846 * (conv + 0.044715 * conv ** 3)))
    want = gelu.max(axis=1).reshape(1, O, 1)
    np.testing.assert_allclose(loaded.compute(x)["y"], want, atol=1e-5 * np.abs(want).max(), rtol=0)


def test_gather_from_a_unit_axis_is_a_reshape(ctx):
    """Gather of index 0 (or -1) along an axis of size 1 (Silero VAD's last encoder position)
    is a reshape: no gather kernel; values as NumPy's take."""
    rng = np.random.default_rng(4)
    inits = [numpy_helper.from_array(np.array(0, np.int64), "i0"), numpy_helper.from_array(np.array([-1], np.int64), "i1"),
             numpy_helper.from_array(np.array(1, np.int64), "i2")]
    nodes = [helper.make_node("Gather", ["x", "i0"], ["a"], axis=2),
             helper.make_node("Gather", ["x", "i1"], ["b"], axis=-1),
             helper.make_node("Gather", ["x", "i2"], ["c"], axis=1)]
    outs = [_vi(k, TensorProto.FLOAT, None) for k in "abc"]
    m = _model(nodes, [_vi("x", TensorProto.FLOAT, [2, 3, 1])], outs, inits)
    loaded = wonnx.load(m, ctx)
    assert sum(t.startswith("gather_scatter/") for t in _templates(loaded)) == 1, _templates(loaded)
    x = rng.standard_normal((2, 3, 1)).astype(np.float32)
    got = loaded.compute(x)
    for k, (i, axis) in zip("abc", ((np.array(0), 2), (np.array([-1]), 2), (np.array(1), 1))):
        np.testing.assert_array_equal(got[k], np.take(x, i, axis=axis))


@pytest.mark.parametrize("k", [(2, 2), (3, 1)])
def test_upsampling_conv_transpose_is_a_pointwise_conv_and_a_pixel_shuffle(ctx, k):
    """ConvTranspose with kernel == stride, no padding, 8 outputs, a bias and a Relu after it
    (PP-OCR det's 24 -> 24 layer) runs as a 1x1 conv on a matrix kernel, with the relu in its
    epilogue, and a pixel shuffle: no conv_transpose2d and no element-wise kernel; values as
    float64 NumPy."""
    rng = np.random.default_rng(6)
    C, O, H, W = 5, 8, 3, 4
    kh, kw = k
    w = rng.standard_normal((C, O, kh, kw)).astype(np.float32)
    b = rng.standard_normal(O).astype(np.float32)
    nodes = [helper.make_node("ConvTranspose", ["x", "w", "b"], ["t"], kernel_shape=list(k), strides=list(k)),
             helper.make_node("Relu", ["t"], ["y"])]
    m = _model(nodes, [_vi("x", TensorProto.FLOAT, [1, C, H, W])], [_vi("y", TensorProto.FLOAT, None)],
               [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    loaded = wonnx.load(m, ctx)
    templates = _templates(loaded)
    assert any(t.startswith("matmul/") for t in templates) and not any(
        t.startswith(("conv/transpose", "elementwise/")) for t in templates), templates
    x = rng.standard_normal((1, C, H, W)).astype(np.float32)
    t = np.zeros((1, O, kh * H, kw * W))
    for i in range(kh):
        for j in range(kw):
            t[0, :, i::kh, j::kw] = np.einsum("chw,co->ohw", x[0].astype(np.float64), w[:, :, i, j].astype(np.float64))
    want = np.maximum(t + b.reshape(1, O, 1, 1), 0)
    np.testing.assert_allclose(loaded.compute(x)["y"], want, atol=1e-5 * np.abs(want).max(), rtol=0)


def _ort_run(m, feeds):
    import onnxruntime as ort

    return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def _while_loop_model(trips, cond_from_input=False):
    """tf2onnx's spelling of a TensorFlow while loop: a counter carried beside a recurrent
    state ``h' = tanh(h W + x[i])``, the condition ``i + 1 < limit`` computed in the body,
    ``h'`` also a scan output; ``trips`` is the trip count ``M`` (tf2onnx writes int64 max)."""
    body = helper.make_graph(
        [helper.make_node("Gather", ["xs", "i_in"], ["xi"], axis=0),
         helper.make_node("MatMul", ["h_in", "w"], ["hw"]),
         helper.make_node("Add", ["hw", "xi"], ["pre"]),
         helper.make_node("Tanh", ["pre"], ["h_out"]),
         helper.make_node("Identity", ["h_out"], ["scan"]),
         helper.make_node("Add", ["i_in", "one"], ["i_out"]),
         *([helper.make_node("ReduceSum", ["pre"], ["pre_sum"], keepdims=0)] if cond_from_input else []),
         (helper.make_node("Less", ["i_out", "limit"], ["cond_out"]) if not cond_from_input else
          helper.make_node("Greater", ["limit_f", "pre_sum"], ["cond_out"]))],
        "body",
        [_vi("iter", TensorProto.INT64, []), _vi("cond_in", TensorProto.BOOL, []),
         _vi("i_in", TensorProto.INT64, []), _vi("h_in", TensorProto.FLOAT, [2, 3])],
        [_vi("cond_out", TensorProto.BOOL, []), _vi("i_out", TensorProto.INT64, []),
         _vi("h_out", TensorProto.FLOAT, [2, 3]), _vi("scan", TensorProto.FLOAT, [2, 3])])
    rng = np.random.default_rng(11)
    inits = [numpy_helper.from_array(np.array(trips, np.int64), "M"),
             numpy_helper.from_array(np.array(True), "cond0"),
             numpy_helper.from_array(np.array(0, np.int64), "i0"),
             numpy_helper.from_array(np.array(1, np.int64), "one"),
             numpy_helper.from_array(np.array(4, np.int64), "limit"),
             numpy_helper.from_array(np.array(100.0, np.float32), "limit_f"),
             numpy_helper.from_array(rng.standard_normal((3, 3)).astype(np.float32), "w")]
    nodes = [helper.make_node("Loop", ["M", "cond0", "i0", "h0"], ["i_n", "h_n", "hs"], body=body)]
    return _model(nodes, [_vi("h0", TensorProto.FLOAT, [2, 3]), _vi("xs", TensorProto.FLOAT, [5, 2, 3])],
                  [_vi("h_n", TensorProto.FLOAT, [2, 3]), _vi("hs", TensorProto.FLOAT, None)], inits)


@pytest.mark.parametrize("trips", [2, 4, 9223372036854775807])
def test_loop_with_known_trip_count_and_condition_is_written_out(ctx, trips):
    """A Loop whose trip count and per-iteration condition fold at load time runs its body
    once per iteration (2 by the trip count, 4 by the condition with M = int64 max, as
    tf2onnx writes it); the final carried value and the stacked scan output match ONNX
    Runtime within 1e-5 of their magnitude. A condition computed from run-time values, or a
    trip count that is a graph input, is refused."""
    rng = np.random.default_rng(12)
    feeds = {"h0": rng.standard_normal((2, 3)).astype(np.float32),
             "xs": rng.standard_normal((5, 2, 3)).astype(np.float32)}
    m = _while_loop_model(trips)
    want = _ort_run(m, feeds)
    got = wonnx.load(m, ctx).compute(feeds)
    assert got["hs"].shape == want[1].shape == (min(trips, 4), 2, 3)
    for k, ref in zip(("h_n", "hs"), want):
        np.testing.assert_allclose(got[k], ref, atol=1e-5 * np.abs(ref).max(), rtol=0)
    with pytest.raises(webnn.NotSupportedError, match="Loop's condition must be known at load time"):
        wonnx.load(_while_loop_model(trips, cond_from_input=True), ctx)
    m.graph.initializer.remove(next(t for t in m.graph.initializer if t.name == "M"))
    m.graph.input.append(_vi("M", TensorProto.INT64, []))
    with pytest.raises(webnn.NotSupportedError, match="Loop's trip count must be known at load time"):
        wonnx.load(m, ctx)


@pytest.mark.parametrize("batch_axis, time_axis, lens", [(1, 0, [4, 4, 4]), (0, 1, [4, 1, 3]), (1, 0, [2, 2, 2])])
def test_reverse_sequence_matches_onnxruntime(ctx, batch_axis, time_axis, lens):
    """ReverseSequence reverses the first ``lens[b]`` time steps of every batch entry (equal
    lengths: one gather; different ones, 1 included: one per entry); exact against ONNX Runtime."""
    shape = [4, 3, 5] if time_axis == 0 else [3, 4, 5]
    nodes = [helper.make_node("ReverseSequence", ["x", "lens"], ["y"], batch_axis=batch_axis, time_axis=time_axis)]
    inits = [numpy_helper.from_array(np.array(lens, np.int64), "lens")]
    m = _model(nodes, [_vi("x", TensorProto.FLOAT, shape)], [_vi("y", TensorProto.FLOAT, shape)], inits)
    x = np.random.default_rng(13).standard_normal(shape).astype(np.float32)
    np.testing.assert_array_equal(wonnx.load(m, ctx).compute(x)["y"], _ort_run(m, {"x": x})[0])


def test_pads_computed_by_a_pad_of_known_values_fold(ctx):
    """tf2onnx's SpaceToBatchND computes a Pad's pads with a Pad of a known integer tensor:
    that Pad folds at load time (constant and edge modes), the data Pad matches ONNX Runtime
    exactly."""
    nodes = [helper.make_node("Pad", ["k", "kp"], ["k2"]),  # [1, 2] -> [0, 1, 2, 0]
             helper.make_node("Pad", ["k2", "kp1"], ["k3"], mode="edge"),  # -> [0, 0, 1, 2, 0, 0]
             helper.make_node("Slice", ["k3", "s0", "s4"], ["pads"]),  # [0, 1, 2, 0]
             helper.make_node("Pad", ["x", "pads", "v"], ["y"])]
    inits = [numpy_helper.from_array(np.array([1, 2], np.int64), "k"),
             numpy_helper.from_array(np.array([1, 1], np.int64), "kp"),
             numpy_helper.from_array(np.array([1, 1], np.int64), "kp1"),
             numpy_helper.from_array(np.array([1], np.int64), "s0"),
             numpy_helper.from_array(np.array([5], np.int64), "s4"),
             numpy_helper.from_array(np.array(1.5, np.float32), "v")]
    m = _model(nodes, [_vi("x", TensorProto.FLOAT, [3, 4])], [_vi("y", TensorProto.FLOAT, None)], inits)
    x = np.random.default_rng(14).standard_normal((3, 4)).astype(np.float32)
    got = wonnx.load(m, ctx).compute(x)["y"]
    assert got.shape == (5, 5)
    np.testing.assert_array_equal(got, _ort_run(m, {"x": x})[0])


@pytest.mark.parametrize("mode", ["linear", "nearest"])
def test_resize_scale_rounded_from_a_size_ratio(ctx, mode):
    """A Resize scale that is float32's nearest value to out / in (34 -> 20 written as
    0.58823532) resizes to that size, within 1e-5 of ONNX Runtime; a scale that is not
    (0.6 for 17 -> 10) maps positions by that scale (the per-axis gathers, not resample2d),
    as ONNX Runtime does."""
    def model(sh, sw):
        nodes = [helper.make_node("Resize", ["x", "", "scales"], ["y"], mode=mode,
                                  coordinate_transformation_mode="half_pixel")]
        inits = [numpy_helper.from_array(np.array([1, 1, sh, sw], np.float32), "scales")]
        return _model(nodes, [_vi("x", TensorProto.FLOAT, [1, 2, 34, 17])], [_vi("y", TensorProto.FLOAT, None)],
                      inits)

    x = np.random.default_rng(15).standard_normal((1, 2, 34, 17)).astype(np.float32)
    m = model(np.float32(20 / 34), np.float32(10 / 17))
    ref = _ort_run(m, {"x": x})[0]
    got = wonnx.load(m, ctx).compute(x)["y"]
    assert got.shape == ref.shape == (1, 2, 20, 10)
    np.testing.assert_allclose(got, ref, atol=1e-5 * np.abs(ref).max(), rtol=0)
    m = model(np.float32(20 / 34), 0.6)
    ref = _ort_run(m, {"x": x})[0]
    loaded = wonnx.load(m, ctx)
    got = loaded.compute(x)["y"]
    assert got.shape == ref.shape == (1, 2, 20, 10)
    np.testing.assert_allclose(got, ref, atol=1e-5 * np.abs(ref).max(), rtol=0)
    assert any(t.startswith("gather_scatter/") for t in _templates(loaded))


@pytest.mark.parametrize("attrs, wshape, bias", [
    ({"pads": [1, 1, 1, 1, 1, 1]}, [4, 3, 3, 3, 3], True),                    # Keras' SAME 3x3x3
    ({"strides": [1, 2, 2]}, [5, 3, 1, 3, 3], False),                          # 1x3x3, strided frames
    ({"strides": [2, 1, 2], "dilations": [2, 1, 1], "pads": [2, 0, 1, 1, 1, 0]}, [2, 3, 2, 2, 3], True),
    ({"auto_pad": "SAME_UPPER", "strides": [2, 2, 1]}, [3, 3, 2, 3, 2], False),
])
def test_conv3d_matches_onnxruntime(ctx, attrs, wshape, bias):
    """A Conv over [N, C, D, H, W] is one conv2d over the depth taps side by side; padding,
    strides and dilation in depth and in the plane, SAME auto-padding; within 1e-5 of ONNX
    Runtime's magnitude. Groups are refused."""
    rng = np.random.default_rng(16)
    x = rng.standard_normal((2, 3, 7, 6, 5)).astype(np.float32)
    inits = [numpy_helper.from_array(rng.standard_normal(wshape).astype(np.float32), "w")]
    if bias:
        inits.append(numpy_helper.from_array(rng.standard_normal(wshape[0]).astype(np.float32), "b"))
    node = helper.make_node("Conv", ["x", "w", "b"] if bias else ["x", "w"], ["y"], **attrs)
    m = _model([node], [_vi("x", TensorProto.FLOAT, list(x.shape))], [_vi("y", TensorProto.FLOAT, None)], inits)
    ref = _ort_run(m, {"x": x})[0]
    got = wonnx.load(m, ctx).compute(x)["y"]
    assert got.shape == ref.shape
    np.testing.assert_allclose(got, ref, atol=1e-5 * np.abs(ref).max(), rtol=0)
    grouped = helper.make_node("Conv", ["x", "wg"], ["y"], group=3)
    wg = numpy_helper.from_array(rng.standard_normal((3, 1, 1, 1, 1)).astype(np.float32), "wg")
    with pytest.raises(webnn.NotSupportedError, match="3 spatial dimensions and groups"):
        wonnx.load(_model([grouped], [_vi("x", TensorProto.FLOAT, list(x.shape))],
                          [_vi("y", TensorProto.FLOAT, None)], [wg]), ctx)


@pytest.mark.parametrize("attrs, bias", [
    ({"strides": [2, 2, 2], "pads": [0, 0, 0, 1, 1, 1]}, True),             # Keras' SAME stride 2
    ({"strides": [1, 1, 1]}, False),
    ({"strides": [2, 1, 2], "dilations": [2, 1, 1], "pads": [1, 1, 0, 0, 0, 1], "output_padding": [1, 0, 1]}, True),
])
def test_conv_transpose3d_matches_onnxruntime(ctx, attrs, bias):
    """A ConvTranspose over [N, C, D, H, W] (conv_transpose2d of the frames to every depth tap,
    a 0/1 matmul placing the taps, the bias): pads, strides, dilation and output padding in
    depth and in the plane; within 1e-5 of ONNX Runtime's magnitude. A GlobalAveragePool of
    the 5-D result too."""
    rng = np.random.default_rng(17)
    x = rng.standard_normal((1, 3, 4, 5, 3)).astype(np.float32)
    inits = [numpy_helper.from_array(rng.standard_normal((3, 2, 3, 2, 3)).astype(np.float32), "w")]
    if bias:
        inits.append(numpy_helper.from_array(rng.standard_normal(2).astype(np.float32), "b"))
    nodes = [helper.make_node("ConvTranspose", ["x", "w", "b"] if bias else ["x", "w"], ["y"], **attrs),
             helper.make_node("GlobalAveragePool", ["y"], ["p"])]
    m = _model(nodes, [_vi("x", TensorProto.FLOAT, list(x.shape))],
               [_vi("y", TensorProto.FLOAT, None), _vi("p", TensorProto.FLOAT, None)], inits)
    want = _ort_run(m, {"x": x})
    got = wonnx.load(m, ctx).compute(x)
    for k, ref in zip(("y", "p"), want):
        assert got[k].shape == ref.shape
        np.testing.assert_allclose(got[k], ref, atol=1e-5 * np.abs(ref).max(), rtol=0)


@pytest.mark.parametrize("variant", ["tf2onnx", "no_reshape", "bias_first", "alpha", "run_time_bias", "wide_reshape"])
def test_gemm_accumulating_a_product_splits_for_the_lstm_cell(ctx, variant):
    """tf2onnx's LSTM cell: Gemm(x, W, C = Reshape(MatMul(h, R), [4H])) + b -> Split -> gates
    becomes Gemm(x, W, b) + Gemm(h, R), then one recurrent kernel (without the Reshape, or with
    the bias first in the Add, too). Near misses keep the ops (no recurrent kernel): Gemm alpha
    != 1, a bias computed at run time, a Reshape to another layout. Values as float64 NumPy
    within 1e-5."""
    rng = np.random.default_rng(18)
    I, H = 6, 8
    w = rng.standard_normal((I, 4 * H)).astype(np.float32) * 0.5
    r = rng.standard_normal((H, 4 * H)).astype(np.float32) * 0.5
    b = rng.standard_normal(4 * H).astype(np.float32)
    shape = [2, 2 * H] if variant == "wide_reshape" else [4 * H]
    inits = [numpy_helper.from_array(a, k) for k, a in (("w", w), ("r", r), ("shape", np.array(shape, np.int64)))]
    inputs = [_vi("x", TensorProto.FLOAT, [1, I]), _vi("h", TensorProto.FLOAT, [1, H]),
              _vi("c", TensorProto.FLOAT, [1, H])]
    if variant == "run_time_bias":
        inputs.append(_vi("b", TensorProto.FLOAT, [4 * H]))
    else:
        inits.append(numpy_helper.from_array(b, "b"))
    order = ["i", "f", "g", "o"]
    product = [helper.make_node("MatMul", ["h", "r"], ["hr"])]
    if variant != "no_reshape":
        product.append(helper.make_node("Reshape", ["hr", "shape"], ["hr1"]))
    nodes = [*product,
             helper.make_node("Gemm", ["x", "w", "hr" if variant == "no_reshape" else "hr1"], ["g"],
                              alpha=0.5 if variant == "alpha" else 1.0),
             helper.make_node("Add", ["b", "g"] if variant == "bias_first" else ["g", "b"], ["z"]),
             helper.make_node("Split", ["z"], [f"z_{k}" for k in order], axis=1, num_outputs=4),
             *[helper.make_node("Tanh" if k == "g" else "Sigmoid", [f"z_{k}"], [f"a_{k}"]) for k in order],
             helper.make_node("Mul", ["a_f", "c"], ["fc"]),
             helper.make_node("Mul", ["a_i", "a_g"], ["ig"]),
             helper.make_node("Add", ["fc", "ig"], ["c2"]),
             helper.make_node("Tanh", ["c2"], ["tc"]),
             helper.make_node("Mul", ["a_o", "tc"], ["h2"])]
    if variant == "wide_reshape":  # [1, 4H] -> [2, 2H] does not broadcast as [4H]: ill-formed, use a 2-row h
        inputs[1] = _vi("h", TensorProto.FLOAT, [2, H])
        nodes[1] = helper.make_node("Reshape", ["hr", "shape"], ["hr1"])
    m = _model(nodes, inputs, [_vi("h2", TensorProto.FLOAT, None), _vi("c2", TensorProto.FLOAT, None)], inits,
               opset=18)
    fires = variant in ("tf2onnx", "no_reshape", "bias_first")
    if variant == "wide_reshape":
        # Gemm's C [2, 2H] does not broadcast to [1, 4H]: the model is malformed either way; only
        # check that the rewrite does not take it
        from webnn_gpu.onnx.rewrite import split_gemm_accumulate

        env = {t.name: numpy_helper.to_array(t) for t in inits}
        assert split_gemm_accumulate(m.graph.node, env, ["h2", "c2"]) == list(m.graph.node)
        return
    loaded = wonnx.load(m, ctx)
    assert any(t.startswith("recurrent/") for t in _templates(loaded)) == fires, _templates(loaded)
    x, h, c = (rng.standard_normal((1, n)).astype(np.float32) for n in (I, H, H))
    feeds = {"x": x, "h": h, "c": c}
    if variant == "run_time_bias":
        feeds["b"] = b
    z = (0.5 if variant == "alpha" else 1.0) * (x.astype(np.float64) @ w) + h.astype(np.float64) @ r + b
    a = dict(zip(order, np.split(z, 4, axis=1)))
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    c2 = sig(a["f"]) * c + sig(a["i"]) * np.tanh(a["g"])
    got = loaded.compute(feeds)
    np.testing.assert_allclose(got["c2"], c2, atol=1e-5 * np.abs(c2).max(), rtol=0)
    np.testing.assert_allclose(got["h2"], sig(a["o"]) * np.tanh(c2), atol=1e-5, rtol=0)


@pytest.mark.parametrize("mask_known", [True, False])
def test_float16_mask_beyond_range_times_a_boolean_stays_finite(ctx, mask_known):
    """tf2onnx's attention mask: scores + Cast(mask) * -2.4e38 -> Softmax. In a float16 graph
    the constant is -65504 (not -inf, whose product with 0 is NaN), whether the mask is known
    at load time (a causal mask) or computed at run time; the softmax within 2e-3 of float64
    NumPy. (A constant beyond float16's range elsewhere is float16's infinity, as before.)"""
    rng = np.random.default_rng(19)
    S = 9  # a known mask of more than 64 values: not multiplied out at load time (fold.py)
    causal = np.tril(np.ones((S, S), bool))
    inits = [numpy_helper.from_array(np.array(-2.3726709e38, np.float32), "big")]
    inputs = [_vi("s", TensorProto.FLOAT, [S, S])]
    if mask_known:
        first = helper.make_node("Not", ["causal"], ["future"])
        inits.append(numpy_helper.from_array(causal, "causal"))
    else:
        first = helper.make_node("Greater", ["pos_k", "pos_q"], ["future"])
        inits.append(numpy_helper.from_array(np.arange(S, dtype=np.int64).reshape(1, S), "pos_k"))
        inputs.append(_vi("pos_q", TensorProto.INT64, [S, 1]))
    nodes = [first,
             helper.make_node("Cast", ["future"], ["future_f"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["big", "future_f"], ["bias"]),
             helper.make_node("Add", ["s", "bias"], ["z"]),
             helper.make_node("Softmax", ["z"], ["y"], axis=-1)]
    m = _model(nodes, inputs, [_vi("y", TensorProto.FLOAT, None)], inits)
    s = rng.standard_normal((S, S)).astype(np.float32)
    feeds = {"s": s.astype(np.float16)}
    if not mask_known:
        feeds["pos_q"] = np.arange(S, dtype=np.int64).reshape(S, 1)
    got = wonnx.load(m, ctx, dtype="float16").compute(feeds)["y"]
    z = np.where(causal, s.astype(np.float64), -np.inf)
    want = np.exp(z - z.max(-1, keepdims=True))
    want /= want.sum(-1, keepdims=True)
    assert not np.isnan(got).any()
    np.testing.assert_allclose(got.astype(np.float64), want, atol=2e-3, rtol=0)


@pytest.mark.parametrize("opset", [13, 18])
def test_split_of_a_shape_folds(ctx, opset):
    """tf2onnx splits a shape into its parts (an STFT's frame count from the signal's length):
    Split of a known tensor folds at load time (sizes as an input, or num_outputs in opset 18),
    so the Slice end computed from it is known; exact against NumPy."""
    split = (helper.make_node("Split", ["s", "sizes"], ["n", "length"], axis=0) if opset == 13 else
             helper.make_node("Split", ["s"], ["n", "length"], axis=0, num_outputs=2))
    nodes = [helper.make_node("Shape", ["x"], ["s"]), split,
             helper.make_node("Sub", ["length", "three"], ["end"]),
             helper.make_node("Slice", ["x", "one", "end", "axis1"], ["y"])]
    inits = [numpy_helper.from_array(np.array([1, 1], np.int64), "sizes"),
             numpy_helper.from_array(np.array([3], np.int64), "three"),
             numpy_helper.from_array(np.array([1], np.int64), "one"),
             numpy_helper.from_array(np.array([1], np.int64), "axis1")]
    m = _model(nodes, [_vi("x", TensorProto.FLOAT, ["batch", 10])], [_vi("y", TensorProto.FLOAT, None)], inits,
               opset=opset)
    x = np.random.default_rng(20).standard_normal((2, 10)).astype(np.float32)
    np.testing.assert_array_equal(wonnx.load(m, ctx, dims={"batch": 2}).compute(x)["y"], x[:, 1:7])


@pytest.mark.parametrize("variant", ["tf2onnx", "biases_split", "near_miss_gate_read", "near_miss_not_one_minus",
                                     "near_miss_product_read", "near_miss_x_batch1", "near_miss_split_sizes"])
def test_spelled_out_gru_cell_is_one_recurrent_kernel(ctx, variant):
    """Keras' GRU cell (reset_after) as tf2onnx writes it: Gemm(x) -> Split in 3, Gemm(h) ->
    three Slices of its thirds (the last one to INT_MAX), z = sigmoid, r = sigmoid,
    n = tanh(x_n + r * h_n), h' = z * h + (1 - z) * n, runs as one recurrent kernel (also with
    the biases Squeezed from a Split of one known [2, 3H] tensor, as from_keras writes them).
    Values as float64 NumPy within 1e-5. Near misses keep the ops: a gate also read as an
    output, (2 - z) in place of (1 - z), (1 - z) * n also read as an output, x of batch 1
    broadcast against h of batch 2, the Split's sizes computed from a run-time shape."""
    rng = np.random.default_rng(21)
    B, I, H = 2, 5, 4
    wx = rng.standard_normal((I, 3 * H)).astype(np.float32) * 0.5
    wh = rng.standard_normal((H, 3 * H)).astype(np.float32) * 0.5
    bias = rng.standard_normal((2, 3 * H)).astype(np.float32)
    big = 2 ** 31 - 1
    inits = {"wx": wx, "wh": wh, "one": np.array(2.0 if variant == "near_miss_not_one_minus" else 1.0, np.float32),
             "ax": np.array([0, 1], np.int64), "st0": np.array([0, 0], np.int64), "en0": np.array([big, H], np.int64),
             "st1": np.array([0, H], np.int64), "en1": np.array([big, 2 * H], np.int64),
             "st2": np.array([0, 2 * H], np.int64), "en2": np.array([big, big], np.int64)}
    pre = []
    if variant == "biases_split":
        inits.update(bias=bias, sq=np.array([0], np.int64))
        pre = [helper.make_node("Split", ["bias"], ["b0", "b1"], axis=0, num_outputs=2),
               helper.make_node("Squeeze", ["b0", "sq"], ["bx"]), helper.make_node("Squeeze", ["b1", "sq"], ["bh"])]
    else:
        inits.update(bx=bias[0], bh=bias[1])
    nodes = [*pre,
             helper.make_node("Gemm", ["x", "wx", "bx"], ["gx"]),
             helper.make_node("Split", ["gx", "sizes"] if variant == "near_miss_split_sizes" else ["gx"],
                              ["x_z", "x_r", "x_n"], axis=-1, **({} if variant == "near_miss_split_sizes" else
                                                                  {"num_outputs": 3})),
             helper.make_node("Gemm", ["h", "wh", "bh"], ["gh"]),
             *[helper.make_node("Slice", ["gh", f"st{j}", f"en{j}", "ax"], [f"h_{g}"]) for j, g in enumerate("zrn")],
             helper.make_node("Add", ["x_z", "h_z"], ["pz"]), helper.make_node("Sigmoid", ["pz"], ["z"]),
             helper.make_node("Add", ["h_r", "x_r"], ["pr"]), helper.make_node("Sigmoid", ["pr"], ["r"]),
             helper.make_node("Mul", ["r", "h_n"], ["rh"]), helper.make_node("Add", ["x_n", "rh"], ["pn"]),
             helper.make_node("Tanh", ["pn"], ["n"]),
             helper.make_node("Sub", ["one", "z"], ["omz"]), helper.make_node("Mul", ["omz", "n"], ["a"]),
             helper.make_node("Mul", ["z", "h"], ["b"]), helper.make_node("Add", ["b", "a"], ["h2"])]
    if variant == "near_miss_split_sizes":  # [H, H, H] from h's shape: folds at the walk, not at the rewrite
        inits["e"] = np.array([2], np.int64)
        nodes[:0] = [helper.make_node("Shape", ["h"], ["hs"]), helper.make_node("Slice", ["hs", "one_i", "e"], ["hw"]),
                     helper.make_node("Concat", ["hw", "hw", "hw"], ["sizes"], axis=0)]
        inits["one_i"] = np.array([1], np.int64)
    outs = [_vi("h2", TensorProto.FLOAT, None)]
    if variant in ("near_miss_gate_read", "near_miss_product_read"):
        outs.append(_vi("r" if variant == "near_miss_gate_read" else "a", TensorProto.FLOAT, None))
    bx_ = 1 if variant == "near_miss_x_batch1" else B
    m = _model(nodes, [_vi("x", TensorProto.FLOAT, [bx_, I]), _vi("h", TensorProto.FLOAT, [B, H])], outs,
               [numpy_helper.from_array(a, k) for k, a in inits.items()], opset=18)
    loaded = wonnx.load(m, ctx)
    assert any(t.startswith("recurrent/") for t in _templates(loaded)) == (not variant.startswith("near")), \
        _templates(loaded)
    x, h = rng.standard_normal((bx_, I)).astype(np.float32), rng.standard_normal((B, H)).astype(np.float32)
    gx = x.astype(np.float64) @ wx + bias[0]
    gh = h.astype(np.float64) @ wh + bias[1]
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    z, r = sig(gx[:, :H] + gh[:, :H]), sig(gx[:, H:2 * H] + gh[:, H:2 * H])
    n = np.tanh(gx[:, 2 * H:] + r * gh[:, 2 * H:])
    want = z * h + (float(inits["one"]) - z) * n
    got = loaded.compute({"x": x, "h": h})
    np.testing.assert_allclose(got["h2"], want, atol=1e-5 * np.abs(want).max(), rtol=0)
    if variant == "near_miss_product_read":
        np.testing.assert_allclose(got["a"], (1 - z) * n, atol=1e-5, rtol=0)


def _recurrent_loop_model(cell, variant, T=4, I=3, H=4):
    """tf2onnx's spelling of a TensorFlow recurrent layer: a Loop (trip count int64 max) over
    ``xs [8, 1, I]`` whose body gathers step ``i`` (a carried counter), runs an LSTM cell
    (``Gemm(x, W, C = Reshape(MatMul(h, R))) + b``, TF's i, f, g, o parts) or a GRU cell
    (reset_after) and stops when ``i + 1 == T``; outputs: the final states and every step's
    ``h`` as a scan output (through a Reshape). ``cell`` "lstm_node": an ONNX LSTM node of one
    step between reshapes. ``variant``: "fires"; "relu_scan" (the scan output is a Relu of
    ``h``); "c_scan" (the LSTM's cell state as the scan output); "stride2" (the step read is
    ``xs[2 i]``); "w_carried" (``W`` a carried value halved each step); "outer_limit" (the
    limit is ``Shape(L)[1]`` of an outer run-time input ``L [1, T]``); "computed_back" (the
    LSTM node's ``Y_h`` reshaped back to a shape computed by a Concat); "no_y_c" (an LSTM
    node without ``Y_c``, the cell state passed through)."""
    rng = np.random.default_rng(22)
    G = 3 if cell == "gru" else 4
    big = 2 ** 31 - 1
    w = {"W": rng.standard_normal((I, G * H)) * 0.5, "R": rng.standard_normal((H, G * H)) * 0.5,
         "b": rng.standard_normal(G * H), "bh": rng.standard_normal(G * H)}
    inits = {**{k: v.astype(np.float32) for k, v in w.items()},
             "one": np.array(1, np.int64), "two": np.array(2, np.int64), "limit": np.array(T, np.int64),
             "M": np.array(2 ** 63 - 1, np.int64), "true": np.array(True), "i0": np.array(0, np.int64),
             "flat": np.array([G * H], np.int64), "step3": np.array([1, 1, H], np.int64), "onef": np.array(1, np.float32),
             "ax": np.array([0, 1], np.int64), **{f"st{j}": np.array([0, j * H], np.int64) for j in range(3)},
             **{f"en{j}": np.array([big, (j + 1) * H if j < 2 else big], np.int64) for j in range(3)}}
    idx = "i_in"
    body = []
    if variant == "stride2":
        body.append(helper.make_node("Mul", ["i_in", "two"], ["i2"]))
        idx = "i2"
    body += [helper.make_node("Gather", ["xs_in", idx], ["x3"], axis=0),
             helper.make_node("Reshape", ["x3", "xflat"], ["x"])]
    wn = "W_in" if variant == "w_carried" else "W"
    if variant == "w_carried":
        inits["half"] = np.array(0.5, np.float32)
        body.append(helper.make_node("Mul", ["W_in", "half"], ["W_out"]))
    if cell == "lstm_node":  # ONNX's iofc gates, W [1, 4H, I], R [1, 4H, H], B [1, 8H]
        inits.update(Wn=inits["W"].T[None].copy(), Rn=inits["R"].T[None].copy(),
                     Bn=np.concatenate([inits["b"], inits["bh"]])[None], one1=np.array([1], np.int64),
                     h1=np.array([H], np.int64), x3d=np.array([1, 1, I], np.int64))
        back = "hshape" if variant == "computed_back" else "xflat_h"
        inits["xflat_h"] = np.array([1, H], np.int64)
        body += [helper.make_node("Reshape", ["x", "x3d"], ["xn"]), helper.make_node("Reshape", ["h_in", "step3"], ["hn"]),
                 helper.make_node("Reshape", ["c_in", "step3"], ["cn"]),
                 helper.make_node("LSTM", ["xn", "Wn", "Rn", "Bn", "", "hn", "cn"],
                                  ["", "yh"] + ([] if variant == "no_y_c" else ["yc"]), hidden_size=H),
                 helper.make_node("Concat", ["one1", "h1"], ["hshape"], axis=0),
                 helper.make_node("Reshape", ["yh", back], ["h_out"]),
                 helper.make_node("Identity", ["c_in"], ["c_out"]) if variant == "no_y_c" else
                 helper.make_node("Reshape", ["yc", "xflat_h"], ["c_out"])]
    elif cell == "lstm":
        body += [helper.make_node("MatMul", ["h_in", "R"], ["hr"]), helper.make_node("Reshape", ["hr", "flat"], ["hr1"]),
                 helper.make_node("Gemm", ["x", wn, "hr1"], ["gz"]), helper.make_node("Add", ["gz", "b"], ["z"]),
                 helper.make_node("Split", ["z"], ["zi", "zf", "zg", "zo"], axis=1, num_outputs=4),
                 helper.make_node("Sigmoid", ["zi"], ["ai"]), helper.make_node("Sigmoid", ["zf"], ["af"]),
                 helper.make_node("Tanh", ["zg"], ["ag"]), helper.make_node("Sigmoid", ["zo"], ["ao"]),
                 helper.make_node("Mul", ["af", "c_in"], ["fc"]), helper.make_node("Mul", ["ai", "ag"], ["ig"]),
                 helper.make_node("Add", ["fc", "ig"], ["c_out"]), helper.make_node("Tanh", ["c_out"], ["tc"]),
                 helper.make_node("Mul", ["ao", "tc"], ["h_out"])]
    else:
        body += [helper.make_node("Gemm", ["x", wn, "b"], ["gx"]),
                 helper.make_node("Split", ["gx"], ["x_z", "x_r", "x_n"], axis=-1, num_outputs=3),
                 helper.make_node("Gemm", ["h_in", "R", "bh"], ["gh"]),
                 *[helper.make_node("Slice", ["gh", f"st{j}", f"en{j}", "ax"], [f"h_{g}"]) for j, g in enumerate("zrn")],
                 helper.make_node("Add", ["x_z", "h_z"], ["pz"]), helper.make_node("Sigmoid", ["pz"], ["zz"]),
                 helper.make_node("Add", ["x_r", "h_r"], ["pr"]), helper.make_node("Sigmoid", ["pr"], ["rr"]),
                 helper.make_node("Mul", ["rr", "h_n"], ["rh"]), helper.make_node("Add", ["x_n", "rh"], ["pn"]),
                 helper.make_node("Tanh", ["pn"], ["nn"]), helper.make_node("Sub", ["onef", "zz"], ["omz"]),
                 helper.make_node("Mul", ["omz", "nn"], ["a"]), helper.make_node("Mul", ["zz", "h_in"], ["bb"]),
                 helper.make_node("Add", ["bb", "a"], ["h_out"])]
    body += [helper.make_node("Relu" if variant == "relu_scan" else "Identity",
                              ["c_out" if variant == "c_scan" else "h_out"], ["h_s"]),
             helper.make_node("Reshape", ["h_s", "step3"], ["scan"]),
             helper.make_node("Add", ["i_in", "one"], ["i_out"]),
             helper.make_node("Less", ["i_out", "limit"], ["cond_out"]),
             helper.make_node("Identity", ["xs_in"], ["xs_out"])]
    if variant == "outer_limit":
        body[-2:-1] = [helper.make_node("Shape", ["L"], ["Ls"]), helper.make_node("Gather", ["Ls", "one"], ["lim"], axis=0),
                       helper.make_node("Less", ["i_out", "lim"], ["cond_out"])]
    inits["xflat"] = np.array([1, I], np.int64)
    state = [("h", "h_in", "h_out")] + ([] if cell == "gru" else [("c", "c_in", "c_out")])
    w_state = [_vi("W_in" if k == 0 else "W_out", TensorProto.FLOAT, [I, G * H]) for k in range(2)] \
        if variant == "w_carried" else []
    g = helper.make_graph(
        body, "body",
        [_vi("iter", TensorProto.INT64, []), _vi("cond_in", TensorProto.BOOL, []), _vi("i_in", TensorProto.INT64, []),
         *[_vi(si, TensorProto.FLOAT, [1, H]) for _, si, _ in state], _vi("xs_in", TensorProto.FLOAT, [8, 1, I]),
         *w_state[:1]],
        [_vi("cond_out", TensorProto.BOOL, []), _vi("i_out", TensorProto.INT64, []),
         *[_vi(so, TensorProto.FLOAT, [1, H]) for _, _, so in state], _vi("xs_out", TensorProto.FLOAT, [8, 1, I]),
         *w_state[1:], _vi("scan", TensorProto.FLOAT, [1, 1, H])])
    outer = [n for n, _, _ in state]
    w_loop = ["W"] if variant == "w_carried" else []
    loop = helper.make_node("Loop", ["M", "true", "i0", *[f"{s}0" for s in outer], "xs", *w_loop],
                            ["i_n", *[f"{s}_n" for s in outer], "xs_n", *[f"{w}_n" for w in w_loop], "hs"], body=g)
    limit = [_vi("L", TensorProto.FLOAT, [1, T])] if variant == "outer_limit" else []
    return _model([loop], [_vi("xs", TensorProto.FLOAT, [8, 1, I]), *[_vi(f"{s}0", TensorProto.FLOAT, [1, H])
                                                                      for s in outer], *limit],
                  [*[_vi(f"{s}_n", TensorProto.FLOAT, None) for s in outer], _vi("hs", TensorProto.FLOAT, None)],
                  [numpy_helper.from_array(a, k) for k, a in inits.items()], opset=18)


@pytest.mark.parametrize("cell, variant", [(c, v) for c in ("lstm", "gru") for v in ("fires", "relu_scan", "stride2")]
                         + [("lstm", "c_scan"), ("lstm", "w_carried"), ("gru", "w_carried"), ("lstm", "outer_limit"),
                            ("lstm_node", "fires"), ("lstm_node", "computed_back"), ("lstm_node", "no_y_c")])
def test_loop_of_one_recurrent_step_is_one_sequence_kernel(ctx, cell, variant):
    """A Loop whose body is one LSTM or GRU cell on step i of a loop-invariant sequence (i a
    counter that goes k0, k0 + 1, ...) is one recurrent node over the sequence's first T steps:
    one recurrent kernel where the written-out loop has T; final states and the stacked
    per-step output within 1e-5 of ONNX Runtime's magnitude; also an ONNX LSTM node's step, its
    state reshaped back to a shape a Concat computes. Near misses are written out per step (T
    kernels), same values: a scan output that is not a movement of h (a Relu; the cell state),
    steps read at 2 i, a carried weight that changes each step, a limit from an outer run-time
    value's shape, an LSTM node without Y_c."""
    m = _recurrent_loop_model(cell, variant)
    rng = np.random.default_rng(23)
    feeds = {"xs": rng.standard_normal((8, 1, 3)).astype(np.float32), "h0": rng.standard_normal((1, 4)).astype(np.float32)}
    if cell != "gru":
        feeds["c0"] = rng.standard_normal((1, 4)).astype(np.float32)
    if variant == "outer_limit":
        feeds["L"] = np.zeros((1, 4), np.float32)
    want = _ort_run(m, feeds)
    loaded = wonnx.load(m, ctx)
    kernels = [t for t in _templates(loaded) if t.startswith("recurrent/")]
    assert len(kernels) == (1 if variant in ("fires", "computed_back") else 4), _templates(loaded)
    got = loaded.compute({k: v for k, v in feeds.items() if k in loaded.inputs})  # L: only its shape is read
    for k, ref in zip([o.name for o in m.graph.output], want):
        assert got[k].shape == ref.shape, k
        np.testing.assert_allclose(got[k], ref, atol=1e-5 * np.abs(ref).max(), rtol=0)
