"""fuse_conv_input's input affine: ``conv2d(x op c ...)`` with ``op`` mul / add / sub / div by
constants of one value or one per channel, on the first-layer block kernel, applies the affine
as it loads ``x`` (``attrs["input_affine"]``). GPU-free IR tests (``checked_rewrite`` compares
both graphs in float64, the conv's zero padding after the affine) of where it fires and the
near misses; GPU checks in tests/ops/test_conv_input_affine.py."""

from __future__ import annotations

import numpy as np
from _irb import IR
from _ireval import checked_rewrite

from webnn_gpu.compiler.rules.conv import fuse_conv_input

TOL = dict(rtol=1e-9, atol=1e-9)


def _first(ir: IR, chain, *, hw=12, c=3, o=16, win=3, pad=1, stride=2, groups=1, extra=False):
    """x -> chain (a list of (op, constant data or a Value, swapped)) -> conv (bias); ``extra``:
    the chain's last value also read by a mul (a second reader). (outputs, the chain's values)."""
    rng = np.random.default_rng(hw * 10 + c)
    x = ir.input((1, hw, hw, c))
    vals, v = [], x
    for op, k, swapped in chain:
        k = k if not isinstance(k, (int, float, list, np.ndarray)) else ir.const(np.asarray(k, np.float64))
        v = ir.op(op, [k, v] if swapped else [v, k])
        vals.append(v)
    z = ir.conv(v, ir.const(rng.standard_normal((o, win, win, c // groups))), groups=groups, pad=pad,
                stride=stride, bias=ir.const(rng.standard_normal(o)))
    outs = {"z": z}
    if extra:
        outs["w"] = ir.op("mul", [v, ir.const(np.full(c, 2.0))])
    return outs, vals


def _rewrite(ir, outs):
    return checked_rewrite(fuse_conv_input, ir, outs, **TOL)


def test_a_rescaling_becomes_the_block_conv_s_prologue():
    """x * s + b (Keras' Rescaling: scalars), SAME padding stride 2, VALID stride 1."""
    for pad, stride in ((1, 2), (0, 1), (2, 1)):
        ir = IR()
        outs, _ = _first(ir, [("mul", [1 / 127.5], False), ("add", [-1.0], False)], pad=pad, stride=stride)
        new = _rewrite(ir, outs)
        assert [n.op for n in new] == ["conv2d"], (pad, stride)
        assert new[0].attrs["input_affine"] == (("mul", (float(np.float32(1 / 127.5)),)), ("add", (-1.0,)))
        assert new[0].inputs[0] is ir.nodes[0].inputs[0]


def test_per_channel_normalization_and_single_steps():
    """(x - m) / d with m, d one per channel ([C] and [1, 1, 1, C]), x * s, x + b, and the
    constant first (s * x, b + x; c - x as x * -1 + c)."""
    m, d = [0.485, 0.456, 0.406], np.array([0.229, 0.224, 0.225]).reshape(1, 1, 1, 3)
    chains = {
        "normalize": [("sub", m, False), ("div", d, False)],
        "scale": [("mul", [2.0, -1.0, 0.5], False)],
        "shift": [("add", [1.0], False)],
        "constant first": [("mul", [0.5], True), ("add", [1.0, 2.0, 3.0], True)],
        "c - x": [("sub", [1.0, 2.0, 3.0], True)],
        "four steps": [("mul", [2.0], False), ("add", [1.0], False), ("sub", m, False), ("div", [3.0], False)],
    }
    for name, chain in chains.items():
        ir = IR()
        outs, _ = _first(ir, chain)
        new = _rewrite(ir, outs)
        assert [n.op for n in new] == ["conv2d"], name
    ir = IR()
    new = _rewrite(ir, _first(ir, chains["c - x"])[0])
    assert new[0].attrs["input_affine"] == (("mul", (-1.0,)), ("add", (1.0, 2.0, 3.0)))


def test_float16_one_channel_and_four():
    for dt, c in (("float16", 3), ("float32", 1), ("float32", 4)):
        ir = IR(dt)
        outs, _ = _first(ir, [("mul", [0.5], False), ("add", [0.25], False)], c=c)
        assert [n.op for n in _rewrite(ir, outs)] == ["conv2d"], (dt, c)


# ---------------------------------------------------------------- near misses
def test_a_step_with_a_second_reader_or_a_graph_output_stays():
    ir = IR()
    outs, _ = _first(ir, [("mul", [0.5], False), ("add", [1.0], False)], extra=True)
    assert [n.op for n in _rewrite(ir, outs)] == ["mul", "add", "conv2d", "mul"]
    ir = IR()
    outs, vals = _first(ir, [("mul", [0.5], False), ("add", [1.0], False)])
    assert [n.op for n in _rewrite(ir, {**outs, "y": vals[-1]})] == ["mul", "add", "conv2d"]
    # the mul also a graph output: the add alone goes into the conv
    ir = IR()
    outs, vals = _first(ir, [("mul", [0.5], False), ("add", [1.0], False)])
    new = _rewrite(ir, {**outs, "m": vals[0]})
    assert [n.op for n in new] == ["mul", "conv2d"] and new[1].attrs["input_affine"] == (("add", (1.0,)),)


def test_operands_that_are_not_constants_of_a_value_or_one_per_channel_stay():
    ir = IR()
    outs, _ = _first(ir, [("mul", ir.input((1, 1, 1, 3)), False)])
    assert [n.op for n in _rewrite(ir, outs)] == ["mul", "conv2d"]
    ir = IR()
    outs, _ = _first(ir, [("add", np.linspace(-1, 1, 12 * 12 * 3).reshape(1, 12, 12, 3), False)])
    assert [n.op for n in _rewrite(ir, outs)] == ["add", "conv2d"]  # of the full shape
    ir = IR()
    outs, _ = _first(ir, [("add", np.ones((1, 12, 1, 1)), False)])
    assert [n.op for n in _rewrite(ir, outs)] == ["add", "conv2d"]  # per row, not per channel
    ir = IR()
    outs, _ = _first(ir, [("div", [2.0], True)])
    assert [n.op for n in _rewrite(ir, outs)] == ["div", "conv2d"]  # c / x is no affine
    ir = IR()
    outs, _ = _first(ir, [("max", [0.0], False)])
    assert [n.op for n in _rewrite(ir, outs)] == ["max", "conv2d"]


def test_convs_off_the_block_kernel_stay():
    """A grouped conv, a pointwise conv (a scalar scale is no per-channel input_scale either),
    a conv of more input channels than the block kernel takes."""
    for kw in (dict(c=4, groups=2), dict(win=1, pad=0, stride=1), dict(c=8, o=8)):
        ir = IR()
        outs, _ = _first(ir, [("mul", [0.5], False), ("add", [1.0], False)], **kw)
        assert [n.op for n in _rewrite(ir, outs)] == ["mul", "add", "conv2d"], kw


def test_a_conv_whose_epilogue_reads_its_input_or_with_another_prologue_stays():
    ir = IR()
    outs, _ = _first(ir, [("mul", [0.5], False)])
    ir.nodes[1].attrs["epilogue"] = [{"op": "add", "input": 2, "axis": 3}, {"op": "add", "input": 0}]
    assert [n.op for n in fuse_conv_input(ir.nodes, outs)] == ["mul", "conv2d"]
    ir = IR()
    outs, _ = _first(ir, [("mul", [0.5], False)])
    ir.nodes[1].attrs["input_relu"] = True
    assert [n.op for n in fuse_conv_input(ir.nodes, outs)] == ["mul", "conv2d"]


def test_the_switch_turns_it_off(monkeypatch):
    monkeypatch.setenv("WEBNN_GPU_FORCE_INPUT_AFFINE", "off")
    ir = IR()
    outs, _ = _first(ir, [("mul", [0.5], False), ("add", [1.0], False)])
    assert [n.op for n in _rewrite(ir, outs)] == ["mul", "add", "conv2d"]
