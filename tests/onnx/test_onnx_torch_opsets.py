"""What PyTorch's TorchScript exporter writes at older opsets (``benchmarks/onnx_torch_vision.py
--variant op11`` / ``op13``), built with onnx.helper (CI has no torch), checked against ONNX
Runtime's CPU provider, near misses included."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import webnn_gpu as webnn
from webnn_gpu.onnx.rewrite import fuse_hard_sigmoid_swish

SIXTH = float(np.float32(1 / 6))  # the exporter's alpha, a float32 attribute


def _hswish_nodes(alpha=SIXTH, beta=0.5, x_first=True, other="x"):
    """``y = x * HardSigmoid(x)`` as the TorchScript exporter writes ``nn.Hardswish`` before opset
    14 (``other``: the Mul's second value, ``x`` for the pattern)."""
    hs = helper.make_node("HardSigmoid", ["x"], ["h"], alpha=alpha, beta=beta)
    mul = helper.make_node("Mul", [other, "h"] if x_first else ["h", other], ["y"], name="hswish")
    return [hs, mul]


def _ops(nodes, outputs=("y",)):
    return [(p.op_type, list(p.input), list(p.output)) for p in fuse_hard_sigmoid_swish(nodes, {}, list(outputs))]


@pytest.mark.parametrize("x_first", [True, False])
def test_hard_sigmoid_times_x_is_one_hard_swish_node(x_first):
    """GPU-free: x on either side of the Mul; alpha 1/6 as float32 or float64 writes it."""
    assert _ops(_hswish_nodes(x_first=x_first)) == [("HardSwish", ["x"], ["y"])]
    assert _ops(_hswish_nodes(alpha=1 / 6)) == [("HardSwish", ["x"], ["y"])]


def test_hard_sigmoid_swish_near_misses_are_left_alone():
    """GPU-free: another alpha (ONNX's default 0.2, or 1/6 off by a few float32 units), another
    beta, a product with another value (a squeeze-and-excite gate), the gate read twice or a
    graph output: the nodes stay."""
    base = ["HardSigmoid", "Mul"]
    for kw in ({"alpha": 0.2}, {"alpha": SIXTH * (1 + 4e-7)}, {"beta": 0.4}, {"other": "w"}):
        assert [op for op, _, _ in _ops(_hswish_nodes(**kw))] == base, kw
    assert [op for op, _, _ in _ops(_hswish_nodes(), outputs=("y", "h"))] == base
    nodes = _hswish_nodes() + [helper.make_node("Neg", ["h"], ["z"])]
    assert [op for op, _, _ in _ops(nodes, outputs=("y", "z"))] == base + ["Neg"]


def _conv_hswish_model(opset, alpha=SIXTH, beta=0.5, other="x", rng=None):
    """A pointwise Conv 4 -> 8 then ``x * HardSigmoid(x)`` on its output; ``other="gate"``
    multiplies the HardSigmoid by a second input instead (the squeeze-and-excite form)."""
    w = rng.standard_normal((8, 4, 1, 1)).astype(np.float32)
    b = rng.standard_normal(8).astype(np.float32)
    nodes = [helper.make_node("Conv", ["in", "w", "b"], ["x"], kernel_shape=[1, 1])]
    nodes += _hswish_nodes(alpha, beta, other=other)
    inputs = [helper.make_tensor_value_info("in", TensorProto.FLOAT, [1, 4, 9, 9])]
    if other != "x":
        inputs.append(helper.make_tensor_value_info(other, TensorProto.FLOAT, [1, 8, 9, 9]))
    g = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          initializer=[numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


@pytest.mark.parametrize("opset,kw,kernels", [
    (11, {}, 1), (13, {}, 1),                           # nn.Hardswish at opsets 11 and 13
    (11, {"alpha": 0.2}, 2),                            # a plain HardSigmoid times x
    (13, {"beta": 0.4}, 2),
    (13, {"other": "gate"}, 1),                         # a gate times another input: the epilogue's
])
def test_hard_sigmoid_swish_matches_onnxruntime(ctx, rng, opset, kw, kernels):
    """Within 1e-5 of the output's magnitude of ONNX Runtime (the inputs scaled so that the
    conv's outputs cross -3 and 3); fused, the hard-swish is the conv's epilogue: one kernel
    (x * HardSigmoid(x) otherwise takes the conv and an element-wise kernel)."""
    import onnxruntime as ort

    m = _conv_hswish_model(opset, rng=rng, **kw)
    feed = {"in": (3 * rng.standard_normal((1, 4, 9, 9))).astype(np.float32)}
    if "other" in kw:
        feed["gate"] = rng.standard_normal((1, 8, 9, 9)).astype(np.float32)
    ref = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feed)[0]
    assert "other" in kw or ((ref > 3).any() and (ref == 0).any())  # both clamps reached
    loaded = webnn.load(m.SerializeToString(), ctx)
    got = loaded.compute(feed)["y"]
    assert np.abs(got.astype(np.float64) - ref).max() <= 1e-5 * np.abs(ref).max()
    assert loaded.graph.kernel_count == kernels


# ------------------------------------------- do_constant_folding=False: statistics through Identity
def _conv_bn_model(rng, stats="identity"):
    """A 1-D depthwise Conv (4 channels, kernel 3, padded: a conformer's convolution module),
    then an inference BatchNormalization whose running mean and variance are ``Identity`` nodes
    of the bias and scale initializers, as ``torch.onnx.export(..., do_constant_folding=False)``
    writes equal parameters
    (``stats="init"``: initializers of their own, the folded export; ``"input"``: the variance
    a graph input, known only at run time)."""
    w = rng.standard_normal((4, 1, 3)).astype(np.float32)
    scale = rng.uniform(0.5, 1.5, 4).astype(np.float32)
    bias = rng.uniform(-0.5, 0.5, 4).astype(np.float32)
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(scale, "bn.weight"),
             numpy_helper.from_array(bias, "bn.bias")]
    nodes = [helper.make_node("Conv", ["in", "w"], ["c"], kernel_shape=[3], pads=[1, 1], group=4)]
    inputs = [helper.make_tensor_value_info("in", TensorProto.FLOAT, [1, 4, 16])]
    if stats == "init":
        inits += [numpy_helper.from_array(bias, "bn.running_mean"), numpy_helper.from_array(scale, "bn.running_var")]
    else:
        nodes.append(helper.make_node("Identity", ["bn.bias"], ["bn.running_mean"]))
        if stats == "input":
            inputs.append(helper.make_tensor_value_info("bn.running_var", TensorProto.FLOAT, [4]))
        else:
            nodes.append(helper.make_node("Identity", ["bn.weight"], ["bn.running_var"]))
    nodes.append(helper.make_node("BatchNormalization", ["c", "bn.weight", "bn.bias", "bn.running_mean",
                                                         "bn.running_var"], ["y"], epsilon=1e-5))
    g = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), scale


def test_batch_norm_statistics_through_identity_fold_into_the_conv():
    """GPU-free: the normalization's statistics read through Identity nodes of initializers fold
    into the conv as initializers do; a variance known only at run time keeps the node."""
    import numpy.random as npr

    from webnn_gpu.onnx.rewrite import fold_conv_affine

    for stats, ops in (("identity", ["Identity", "Identity", "Conv"]), ("init", ["Conv"]),
                       ("input", ["Conv", "Identity", "BatchNormalization"])):
        m, _ = _conv_bn_model(npr.default_rng(0), stats)
        env = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
        assert sorted(p.op_type for p in fold_conv_affine(m.graph.node, env, ["y"])) == sorted(ops), stats


@pytest.mark.parametrize("stats", ["identity", "init", "input"])
def test_batch_norm_statistics_through_identity_match_onnxruntime(ctx, rng, stats):
    """Within 1e-5 of the output's magnitude of ONNX Runtime; the unfolded export takes as many
    kernels as the folded one (the run-time variance one more, the normalization's)."""
    import onnxruntime as ort

    m, scale = _conv_bn_model(rng, stats)
    feed = {"in": rng.standard_normal((1, 4, 16)).astype(np.float32)}
    if stats == "input":
        feed["bn.running_var"] = scale
    ref = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feed)[0]
    loaded = webnn.load(m.SerializeToString(), ctx)
    got = loaded.compute(feed)["y"]
    assert np.abs(got.astype(np.float64) - ref).max() <= 1e-5 * np.abs(ref).max()
    folded = webnn.load(_conv_bn_model(np.random.default_rng(0), "init")[0].SerializeToString(), ctx)
    assert loaded.graph.kernel_count == folded.graph.kernel_count + (stats == "input")
