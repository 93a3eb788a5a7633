"""fuse_conv_input_relu: ``conv2d(relu(y))`` on the stand-alone depthwise kernel applies the relu
as it loads ``y``. GPU-free IR tests (``checked_rewrite`` compares both graphs in float64) of
where it fires and the near misses; GPU checks in tests/ops/test_conv_input_relu.py."""

from __future__ import annotations

import numpy as np
from _irb import IR
from _ireval import checked_rewrite

from webnn_gpu.compiler.rules.conv import fuse_conv_input_relu

TOL = dict(rtol=1e-9, atol=1e-9)


def _ops(ir, outputs):
    return [n.op for n in checked_rewrite(fuse_conv_input_relu, ir, outputs, **TOL)]


def _block(ir: IR, hw=10, c=16, *, win=3, pad=1, stride=1, act="relu", groups=None):
    """x -> add(x, r) = y -> act(y) -> conv (depthwise by default); also reads y in a second add
    (the residual's next block); (y, conv output, next add)."""
    rng = np.random.default_rng(hw * 100 + c)
    x, r = ir.input((1, hw, hw, c)), ir.input((1, hw, hw, c))
    y = ir.op("add", [x, r])
    a = ir.op(act, [y]) if act else y
    g = c if groups is None else groups
    z = ir.conv(a, ir.const(rng.standard_normal((c, win, win, c // g))), groups=g, pad=pad, stride=stride,
                bias=ir.const(rng.standard_normal(c)))
    nxt = ir.op("add", [y, ir.input((1, hw, hw, c))])
    return y, z, nxt


def test_a_relu_read_only_by_a_depthwise_conv_becomes_its_prologue():
    for win, pad, stride in ((3, 1, 1), (5, 2, 2), (3, 0, 1)):
        ir = IR()
        y, z, nxt = _block(ir, win=win, pad=pad, stride=stride)
        new = checked_rewrite(fuse_conv_input_relu, ir, {"z": z, "n": nxt}, **TOL)
        assert [n.op for n in new] == ["add", "conv2d", "add"], (win, pad, stride)
        assert new[1].attrs["input_relu"] is True and new[1].inputs[0] is y


def test_float16_and_odd_channels():
    for dt, c in (("float16", 16), ("float32", 6)):
        ir = IR(dt)
        _, z, nxt = _block(ir, c=c)
        assert _ops(ir, {"z": z, "n": nxt}) == ["add", "conv2d", "add"], (dt, c)


# ---------------------------------------------------------------- near misses
def test_a_relu_with_a_second_reader_or_a_graph_output_stays():
    ir = IR()
    _, z, nxt = _block(ir)
    a = ir.nodes[1].outputs[0]
    w = ir.op("mul", [a, ir.const(np.full(16, 2.0))])
    assert _ops(ir, {"z": z, "n": nxt, "w": w}) == ["add", "relu", "conv2d", "add", "mul"]
    ir = IR()
    _, z, nxt = _block(ir)
    assert _ops(ir, {"z": z, "n": nxt, "a": ir.nodes[1].outputs[0]}) == ["add", "relu", "conv2d", "add"]


def test_an_op_that_moves_zero_stays():
    """sigmoid(0) = 0.5: the padded taps would read 0, not op(0)."""
    for act in ("sigmoid", "neg"):  # neg(0) = 0 too, but it is not in INPUT_RELU_OPS
        ir = IR()
        _, z, nxt = _block(ir, act=act)
        assert _ops(ir, {"z": z, "n": nxt}) == ["add", act, "conv2d", "add"], act


def test_a_clamp_or_no_activation_stays():
    ir = IR()
    y, z, nxt = _block(ir, act=None)
    assert _ops(ir, {"z": z, "n": nxt}) == ["add", "conv2d", "add"]
    ir = IR()
    x = ir.input((1, 8, 8, 16))
    a = ir.op("clamp", [x], min_value=0.0, max_value=6.0)
    z = ir.conv(a, ir.const(np.ones((16, 3, 3, 1))), groups=16, pad=1)
    assert _ops(ir, {"z": z}) == ["clamp", "conv2d"]


def test_a_dense_or_pointwise_conv_stays():
    for groups, win, pad in ((1, 3, 1), (1, 1, 0), (4, 3, 1)):
        ir = IR()
        _, z, nxt = _block(ir, win=win, pad=pad, groups=groups)
        assert _ops(ir, {"z": z, "n": nxt}) == ["add", "relu", "conv2d", "add"], (groups, win)


def test_a_conv_with_an_input_prologue_stays():
    ir = IR()
    _, z, nxt = _block(ir)
    ir.nodes[2].attrs["input_scale"] = 3  # another rule's prologue
    assert [n.op for n in fuse_conv_input_relu(ir.nodes, {"z": z, "n": nxt})] == ["add", "relu", "conv2d", "add"]


def test_a_conv_whose_epilogue_reads_its_input_stays():
    """add(conv(relu(y)), relu(y)) as fuse_epilogue leaves it: the step reads input 0, which
    would become y."""
    ir = IR()
    _, z, nxt = _block(ir)
    ir.nodes[2].attrs["epilogue"] = [{"op": "add", "input": 2, "axis": 3}, {"op": "add", "input": 0}]
    assert [n.op for n in fuse_conv_input_relu(ir.nodes, {"z": z, "n": nxt})] == ["add", "relu", "conv2d", "add"]
