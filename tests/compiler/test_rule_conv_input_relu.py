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


# ---------------------------------------------------------------- several readers
def _fanout(ir: IR, wins=((3, 1), (5, 2), (3, 1)), hw=10, c=16, act="relu", project=()):
    """x + r = y -> act(y) read by one depthwise conv per (win, pad) of ``wins`` (those whose
    index is in ``project`` followed by a pointwise conv to 8 channels); also n = y + q.
    (y, the act's value, {name: output})."""
    rng = np.random.default_rng(hw + c)
    x, r = ir.input((1, hw, hw, c)), ir.input((1, hw, hw, c))
    y = ir.op("add", [x, r])
    a = ir.op(act, [y])
    outs = {"n": ir.op("add", [y, ir.input((1, hw, hw, c))])}
    for i, (win, pad) in enumerate(wins):
        z = ir.conv(a, ir.const(rng.standard_normal((c, win, win, 1))), groups=c, pad=pad,
                    bias=ir.const(rng.standard_normal(c)))
        if i in project:
            z = ir.conv(z, ir.const(rng.standard_normal((8, 1, 1, c))), bias=ir.const(rng.standard_normal(8)))
        outs[f"z{i}"] = z
    return y, a, outs


def test_a_relu_read_by_several_depthwise_convs_is_applied_by_each():
    ir = IR()
    y, _, outs = _fanout(ir)
    new = checked_rewrite(fuse_conv_input_relu, ir, outs, **TOL)
    assert [n.op for n in new] == ["add", "add", "conv2d", "conv2d", "conv2d"]
    assert all(n.attrs["input_relu"] is True and n.inputs[0] is y for n in new[2:])


def _paired(ir, outs):
    """ir's nodes after fuse_depthwise_project (as an IR-like object for checked_rewrite)."""
    from types import SimpleNamespace

    from webnn_gpu.compiler.rules.conv import fuse_depthwise_project

    return SimpleNamespace(nodes=fuse_depthwise_project(ir.nodes, outs))


def test_depthwise_project_readers_apply_it_on_their_depthwise_conv():
    """The pairs' depthwise convs take the prologue; a plain depthwise conv beside them too."""
    ir = IR()
    y, a, outs = _fanout(ir, wins=((3, 1), (3, 1), (5, 2)), project=(0, 1))
    paired = _paired(ir, outs)
    assert [n.op for n in paired.nodes].count("depthwise_project") == 2
    new = checked_rewrite(fuse_conv_input_relu, paired, outs, **TOL)
    assert "relu" not in [n.op for n in new]
    for n in new[2:]:
        dw = n.attrs["depthwise"] if n.op == "depthwise_project" else n
        assert n.inputs[0] is y and dw.inputs[0] is y and dw.attrs["input_relu"] is True, n.op
    assert all("input_relu" not in n.attrs for n in ir.nodes + paired.nodes)  # the inputs are unchanged


def test_one_reader_that_cannot_apply_it_keeps_it_for_all():
    """A dense conv, a pool, an element-wise op or a graph output beside the depthwise readers."""
    ir = IR()
    _, a, outs = _fanout(ir)
    outs["d"] = ir.conv(a, ir.const(np.ones((16, 3, 3, 16))), pad=1)
    assert _ops(ir, outs) == ["add", "relu", "add", "conv2d", "conv2d", "conv2d", "conv2d"]
    ir = IR()
    _, a, outs = _fanout(ir)
    outs["p"] = ir.pool(a, (2, 2))
    assert _ops(ir, outs).count("relu") == 1
    ir = IR()
    _, a, outs = _fanout(ir)
    outs["m"] = ir.op("mul", [a, ir.const(np.full(16, 2.0))])
    assert _ops(ir, outs).count("relu") == 1
    ir = IR()
    _, a, outs = _fanout(ir)
    outs["a"] = a
    new = checked_rewrite(fuse_conv_input_relu, ir, outs, **TOL)
    assert [n.op for n in new].count("relu") == 1 and not any("input_relu" in n.attrs for n in new)


def test_several_readers_of_an_op_that_moves_zero_keep_it():
    for act in ("sigmoid", "neg", "clamp"):
        ir = IR()
        _, _, outs = _fanout(ir, act=act)
        assert _ops(ir, outs).count(act) == 1, act


def test_a_second_activation_in_a_chain():
    """relu(relu(y)) read by two depthwise convs: the outer one is applied by the convs, the
    inner one (read by the outer) keeps its node."""
    ir = IR()
    x = ir.input((1, 8, 8, 16))
    a1 = ir.op("relu", [x])
    a2 = ir.op("relu", [a1])
    outs = {f"z{i}": ir.conv(a2, ir.const(np.linspace(-1, 1, 16 * 9).reshape(16, 3, 3, 1)), groups=16, pad=1)
            for i in range(2)}
    new = checked_rewrite(fuse_conv_input_relu, ir, outs, **TOL)
    assert [n.op for n in new] == ["relu", "conv2d", "conv2d"]
    assert all(n.inputs[0] is a1 for n in new[1:])


def test_depthwise_project_near_misses():
    """A pair with an expansion (its input is the expansion's), a projection that adds the
    depthwise input (it would read relu(y) as y): the relu stays."""
    from webnn_gpu._ir import Node

    ir = IR()
    y, a, outs = _fanout(ir, wins=((3, 1), (3, 1)), project=(0, 1))
    paired = _paired(ir, outs)
    pairs = [n for n in paired.nodes if n.op == "depthwise_project"]
    assert len(pairs) == 2
    p = pairs[0]
    proj = p.attrs["project"]
    # the projection also adds the relu's value (an epilogue operand)
    bad_proj = Node(proj.op, list(proj.inputs) + [a], list(proj.outputs),
                    {**proj.attrs, "epilogue": [{"op": "add", "input": len(proj.inputs)}]}, proj.label)
    bad = Node(p.op, list(p.inputs) + [a], list(p.outputs), {**p.attrs, "project": bad_proj}, p.label)
    nodes = [bad if n is p else n for n in paired.nodes]
    assert [n.op for n in fuse_conv_input_relu(nodes, outs)].count("relu") == 1
    with_expand = Node(p.op, list(p.inputs), list(p.outputs), {**p.attrs, "expand": p.attrs["depthwise"]}, p.label)
    nodes = [with_expand if n is p else n for n in paired.nodes]
    assert [n.op for n in fuse_conv_input_relu(nodes, outs)].count("relu") == 1


def test_the_knob(monkeypatch):
    """WEBNN_GPU_FORCE_INPUT_RELU=depthwise: only stand-alone depthwise readers; =off: none."""
    ir = IR()
    _, _, outs = _fanout(ir, project=(0,))
    paired = _paired(ir, outs)
    monkeypatch.setenv("WEBNN_GPU_FORCE_INPUT_RELU", "depthwise")
    assert [n.op for n in fuse_conv_input_relu(paired.nodes, outs)].count("relu") == 1
    ir = IR()
    _, _, outs = _fanout(ir)
    assert [n.op for n in fuse_conv_input_relu(ir.nodes, outs)].count("relu") == 0
    monkeypatch.setenv("WEBNN_GPU_FORCE_INPUT_RELU", "off")
    assert [n.op for n in fuse_conv_input_relu(ir.nodes, outs)].count("relu") == 1
