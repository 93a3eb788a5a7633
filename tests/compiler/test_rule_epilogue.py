"""Epilogue fusion and the hard-swish rewrite on hand-made IR (no GPU)."""

from __future__ import annotations

import numpy as np
import pytest

from webnn_gpu.compiler import PASSES
from webnn_gpu.compiler.rules.elementwise import fuse_hard_swish
from webnn_gpu.compiler.rules.epilogue import fuse_epilogue
from webnn_gpu._ir import Node, Value


def _v(shape=(1, 4, 4, 8), dt="float32", kind="op"):
    return Value(dt, tuple(shape), kind)


def _c(value, shape=(), dt="float32"):
    arr = np.full(shape, value, np.float32 if dt == "float32" else np.float16)
    return Value(dt, tuple(shape), "constant", data=arr.reshape(-1))


def _n(op, ins, out, **attrs):
    return Node(op, ins, [out], attrs)


def _conv(x, out, bias=None):
    w = _c(0.5, (8, 3, 3, 8))
    ins = [x, w] + ([bias] if bias is not None else [])
    return _n("conv2d", ins, out, padding=[1, 1, 1, 1], strides=[1, 1], dilations=[1, 1], groups=1,
              input_layout="nhwc", filter_layout="ohwi")


def test_conv_bias_relu_residual_add_fold_into_one_node():
    x = _v(kind="input")
    c, r, y = _v(), _v(), _v()
    conv = _conv(x, c)
    nodes = [conv, _n("relu", [c], r), _n("add", [r, x], y)]
    out = fuse_epilogue(nodes, {"y": y})
    assert len(out) == 1 and out[0].op == "conv2d"
    assert out[0].outputs == [y]
    assert out[0].attrs["epilogue"] == [{"op": "relu"}, {"op": "add", "input": 0}]  # x is already input 0
    assert "epilogue" not in conv.attrs and conv.outputs == [c], "the original node is not mutated"


def test_binary_operand_is_appended_and_reverse_is_recorded():
    x, res = _v(kind="input"), _v(kind="input")
    bias = _c(0.1, (8,))
    c, s, y = _v(), _v(), _v()
    nodes = [_conv(x, c), _n("sub", [bias, c], s), _n("mul", [s, res], y)]
    out = fuse_epilogue(nodes, {"y": y})
    assert len(out) == 1
    node = out[0]
    assert node.inputs[2] is None, "index 2 is the conv's own (absent) bias"
    assert node.inputs[3] is bias and node.inputs[4] is res
    # the bias varies along the channels alone: read at the channel (axis 3 of NHWC)
    assert node.attrs["epilogue"] == [{"op": "sub", "reverse": True, "input": 3, "axis": 3}, {"op": "mul", "input": 4}]


def test_optional_operand_slots_stay_free():
    # conv2d's bias and gemm's c live at input 2: an epilogue operand of a host without them
    # goes to index 3, index 2 stays None
    x, scale = _v((1, 8, 4, 4), kind="input"), _c(2.0, (1, 8, 1, 1))
    c, y = _v((1, 8, 4, 4)), _v((1, 8, 4, 4))
    conv = _n("conv2d", [x, _c(0.5, (8, 8, 3, 3))], c, padding=[1, 1, 1, 1], strides=[1, 1], dilations=[1, 1],
              groups=1, input_layout="nchw", filter_layout="oihw")
    out = fuse_epilogue([conv, _n("mul", [c, scale], y)], {"y": y})
    # the [1, 8, 1, 1] constant scale is re-made 1-D, read at the channel (axis 1 of NCHW)
    s1 = out[0].inputs[3]
    assert out[0].inputs[2] is None and s1.kind == "constant" and s1.shape == (8,)
    np.testing.assert_array_equal(s1.data, scale.data)
    assert out[0].attrs["epilogue"] == [{"op": "mul", "input": 3, "axis": 1}]
    a, b, r = _v((4, 8), kind="input"), _v((8, 16), kind="input"), _v((4, 16), kind="input")
    g, y = _v((4, 16)), _v((4, 16))
    gemm = _n("gemm", [a, b], g, alpha=1.0, beta=1.0, a_transpose=False, b_transpose=False)
    out = fuse_epilogue([gemm, _n("add", [g, r], y)], {"y": y})
    assert out[0].inputs == [a, b, None, r]
    m, y = _v((4, 16)), _v((4, 16))
    out = fuse_epilogue([_n("matmul", [a, b], m), _n("add", [m, r], y)], {"y": y})
    assert out[0].inputs == [a, b, r]


def test_activations_with_options_and_clamp():
    x = _v(kind="input")
    c, a, b, d, y = _v(), _v(), _v(), _v(), _v()
    nodes = [_conv(x, c), _n("clamp", [c], a, min_value=0.0, max_value=6.0),
             _n("leaky_relu", [a], b, alpha=0.2), _n("hard_swish", [b], d), _n("sigmoid", [d], y)]
    out = fuse_epilogue(nodes, {"y": y})
    assert len(out) == 1
    assert out[0].attrs["epilogue"] == [{"op": "clamp", "min_value": 0.0, "max_value": 6.0},
                                        {"op": "leaky_relu", "alpha": 0.2}, {"op": "hard_swish"},
                                        {"op": "sigmoid"}]


def test_fused_host_moves_to_where_a_later_residual_is_ready():
    x = _v(kind="input")
    c, r, p, y = _v(), _v(), _v(), _v()
    conv = _conv(x, c)
    nodes = [conv, _n("relu", [x], r), _n("neg", [r], p), _n("add", [c, p], y)]
    out = fuse_epilogue(nodes, {"y": y})
    assert [n.op for n in out] == ["relu", "neg", "conv2d"]
    assert out[2].inputs[-1] is p and out[2].outputs == [y]


def test_stops_at_two_consumers_outputs_broadcast_growth_and_type_changes():
    x = _v(kind="input")
    # two consumers of the conv output: nothing fused
    c, a, b = _v(), _v(), _v()
    nodes = [_conv(x, c), _n("relu", [c], a), _n("neg", [c], b)]
    assert [n.op for n in fuse_epilogue(nodes, {"a": a, "b": b})] == ["conv2d", "relu", "neg"]
    # the conv output is a graph output
    c, a = _v(), _v()
    nodes = [_conv(x, c), _n("relu", [c], a)]
    assert len(fuse_epilogue(nodes, {"c": c, "a": a})) == 2
    # an operand that makes the result larger than the conv output (broadcast growth)
    c, big, y = _v(), _v((2, 4, 4, 8), kind="input"), _v((2, 4, 4, 8))
    nodes = [_conv(x, c), _n("add", [c, big], y)]
    assert len(fuse_epilogue(nodes, {"y": y})) == 2
    # a comparison changes the data type
    c, y = _v(), _v(dt="uint8")
    nodes = [_conv(x, c), _n("greater", [c, x], y)]
    assert len(fuse_epilogue(nodes, {"y": y})) == 2
    # a chain stops at the next conv (it is a host of its own)
    c, r, c2 = _v(), _v(), _v()
    nodes = [_conv(x, c), _n("relu", [c], r), _conv(r, c2)]
    out = fuse_epilogue(nodes, {"y": c2})
    assert [n.op for n in out] == ["conv2d", "conv2d"] and out[0].attrs["epilogue"] == [{"op": "relu"}]


def test_binding_limit_is_respected():
    x = _v(kind="input")
    extra = [_v(kind="input") for _ in range(8)]
    nodes, acc = [], _v()
    nodes.append(_conv(x, acc))
    for e in extra:
        nxt = _v()
        nodes.append(_n("add", [acc, e], nxt))
        acc = nxt
    out = fuse_epilogue(nodes, {"y": acc})
    host = out[0]
    bindings = len({v.id for v in host.inputs if v is not None}) + 1
    assert bindings <= 7
    assert len(out) > 1


def test_matmul_and_gemm_are_hosts_too():
    a, b = _v((4, 8), kind="input"), _v((8, 16), kind="input")
    m, y = _v((4, 16)), _v((4, 16))
    nodes = [_n("matmul", [a, b], m), _n("gelu", [m], y)]
    out = fuse_epilogue(nodes, {"y": y})
    assert len(out) == 1 and out[0].attrs["epilogue"] == [{"op": "gelu"}]


# ---------------------------------------------------------------- hard swish
def _hard_swish_sequence(x, *, div_first=False, sixth_mul=False, dt="float32"):
    s = x.shape
    a, c, m, y = _v(s, dt), _v(s, dt), _v(s, dt), _v(s, dt)
    nodes = [_n("add", [_c(3.0, dt=dt), x], a), _n("clamp", [a], c, min_value=0.0, max_value=6.0)]
    if div_first:
        nodes += [_n("div", [c, _c(6.0, dt=dt)], m), _n("mul", [x, m], y)]
    else:
        six = _n("mul", [m, _c(1 / 6, dt=dt)], y) if sixth_mul else _n("div", [m, _c(6.0, dt=dt)], y)
        nodes += [_n("mul", [c, x], m), six]
    return nodes, y


@pytest.mark.parametrize("form", [{}, {"div_first": True}, {"sixth_mul": True}, {"dt": "float16"}])
def test_hard_swish_sequence_becomes_one_node(form):
    x = _v(kind="input", dt=form.get("dt", "float32"))
    nodes, y = _hard_swish_sequence(x, **form)
    out = fuse_hard_swish(nodes, {"y": y})
    assert [(n.op, n.inputs, n.outputs) for n in out] == [("hard_swish", [x], [y])]


def test_hard_swish_sequence_with_wrong_constants_or_shared_values_stays():
    x = _v(kind="input")
    nodes, y = _hard_swish_sequence(x)
    nodes[0] = _n("add", [_c(2.0), x], nodes[0].outputs[0])
    assert len(fuse_hard_swish(nodes, {"y": y})) == 4
    nodes, y = _hard_swish_sequence(x)
    clamp_out = nodes[1].outputs[0]
    assert len(fuse_hard_swish(nodes, {"y": y, "c": clamp_out})) == 4
    nodes, y = _hard_swish_sequence(x)
    nodes[1] = _n("clamp", nodes[1].inputs, nodes[1].outputs[0], min_value=0.0, max_value=5.0)
    assert len(fuse_hard_swish(nodes, {"y": y})) == 4


def test_pass_list_order():
    names = [p.__name__ for p in PASSES]
    assert names.index("fold_constants") < names.index("fuse_hard_swish") < names.index("fuse_epilogue") \
        < names.index("fuse_conv_input") < names.index("fuse_elementwise")
