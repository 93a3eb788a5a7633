"""fuse_conv_input_preact: ``conv2d(act(x * s + b))`` (a pre-activation: normalize, activate,
convolve) on the tile kernel applies the chain as it loads ``x``. GPU-free IR tests
(``checked_rewrite`` compares both graphs in float64) of where it fires and the near misses;
GPU checks in tests/ops/test_conv_input_preact.py."""

from __future__ import annotations

import numpy as np
import pytest
from _irb import IR
from _ireval import checked_rewrite

from webnn_gpu.compiler.rules.conv import fuse_conv_input_preact

TOL = dict(rtol=1e-9, atol=1e-9)


@pytest.fixture(autouse=True)
def _windowed(monkeypatch):
    """Windowed readers too (by default only pointwise convs take the chain; see
    test_the_knob)."""
    monkeypatch.setenv("WEBNN_GPU_FORCE_INPUT_PREACT", "windowed")


def _rewrite(ir, outputs):
    return checked_rewrite(fuse_conv_input_preact, ir, outputs, **TOL)


def _block(ir: IR, hw=12, c=16, o=24, *, win=1, pad=0, stride=1, scale=True, shift=True, act="relu",
           readers=1, s_shape=None, **act_attrs):
    """y = x + r; act(y * s + b) read by ``readers`` convs (win x win, ``pad``, ``stride``); n = y + q
    (the next residual add reads y too). (the conv outputs, n)."""
    rng = np.random.default_rng(hw * 100 + c)
    x, r = ir.input((1, hw, hw, c)), ir.input((1, hw, hw, c))
    y = ir.op("add", [x, r])
    v = y
    if scale:
        v = ir.op("mul", [v, ir.const(rng.uniform(0.5, 2, c).reshape(s_shape or (c,)))])
    if shift:
        v = ir.op("add", [ir.const(rng.uniform(-1, 1, (1, 1, 1, c))), v])
    if act:
        v = ir.op(act, [v], **act_attrs)
    geo = readers if isinstance(readers, list) else [(win, pad, stride)] * readers
    zs = [ir.conv(v, ir.const(rng.standard_normal((o, k, k, c))), pad=p, stride=st,
                  bias=ir.const(rng.standard_normal(o))) for k, p, st in geo]
    nxt = ir.op("add", [y, ir.input((1, hw, hw, c))])
    return zs, nxt


def _outputs(zs, nxt):
    return {**{f"z{i}": z for i, z in enumerate(zs)}, "n": nxt}


def test_the_chain_becomes_the_prologue_of_1x1_and_padded_3x3_convs():
    for win, pad, stride in ((1, 0, 1), (3, 1, 1), (3, 1, 2), (3, 0, 1)):
        ir = IR()
        zs, nxt = _block(ir, win=win, pad=pad, stride=stride)
        new = _rewrite(ir, _outputs(zs, nxt))
        assert [n.op for n in new] == ["add", "conv2d", "add"], (win, pad, stride)
        pre = new[1].attrs["input_preact"]
        assert pre["act"] == ("relu",) and new[1].inputs[0] is ir.nodes[0].outputs[0]
        (m, i), (a, j) = pre["steps"]
        assert (m, a) == ("mul", "add") and new[1].inputs[i].shape == (16,) and new[1].inputs[j].shape == (1, 1, 1, 16)


def test_scale_only_shift_only_relu_only_and_clamp():
    for kw in (dict(shift=False), dict(scale=False), dict(scale=False, shift=False), dict(act=None),
               dict(act="clamp", min_value=0.0, max_value=6.0), dict(act="clamp", min_value=-1.0, max_value=None)):
        ir = IR()
        zs, nxt = _block(ir, win=3, pad=1, **kw)
        new = _rewrite(ir, _outputs(zs, nxt))
        assert [n.op for n in new] == ["add", "conv2d", "add"], kw
        ops = [op for op, _ in new[1].attrs["input_preact"]["steps"]]
        assert ops == ["mul"] * kw.get("scale", True) + ["add"] * kw.get("shift", True), kw


def test_several_readers_each_apply_it():
    ir = IR()
    zs, nxt = _block(ir, readers=[(1, 0, 1), (3, 1, 1), (3, 1, 2)])
    new = _rewrite(ir, _outputs(zs, nxt))
    assert [n.op for n in new] == ["add", "conv2d", "conv2d", "conv2d", "add"]
    assert all("input_preact" in n.attrs for n in new[1:4])


def test_readers_that_would_be_one_siblings_launch_keep_it():
    """Two 1x1 convs of one input run as one launch (fuse_siblings) that reads it once."""
    ir = IR()
    zs, nxt = _block(ir, readers=2)
    assert [n.op for n in _rewrite(ir, _outputs(zs, nxt))] == ["add", "mul", "add", "relu", "conv2d", "conv2d", "add"]


def test_a_chain_after_an_element_wise_op_read_by_it_alone_stays():
    """fuse_elementwise merges the chain into that op's kernel: no launch to save."""
    ir = IR()
    x = ir.input((1, 12, 12, 16))
    e = ir.op("sigmoid", [x])
    z = ir.conv(ir.op("relu", [ir.op("mul", [e, ir.const(np.full(16, 2.0))])]), ir.filt(24, 1, 16))
    assert [n.op for n in _rewrite(ir, {"z": z})] == ["sigmoid", "mul", "relu", "conv2d"]
    n = ir.op("add", [e, x])  # e read elsewhere too: it is stored anyway
    assert [n.op for n in _rewrite(ir, {"z": z, "n": n})] == ["sigmoid", "conv2d", "add"]


def test_a_clamp_that_moves_zero_before_a_padded_conv_fires():
    """The padding is of the activated input: the step runs on in-image values only (the
    evaluator pads act(x * s + b), so clamp(0) = 0.5 inside and 0 outside)."""
    ir = IR()
    zs, nxt = _block(ir, win=3, pad=1, act="clamp", min_value=0.5, max_value=3.0)
    assert [n.op for n in _rewrite(ir, _outputs(zs, nxt))] == ["add", "conv2d", "add"]


# ---------------------------------------------------------------- near misses
def test_a_graph_output_in_the_chain_keeps_it():
    ir = IR()
    zs, nxt = _block(ir)
    mid = ir.nodes[1].outputs[0]  # the mul's value, stored anyway: the add and relu after it go
    new = _rewrite(ir, {**_outputs(zs, nxt), "m": mid})
    assert [n.op for n in new] == ["add", "mul", "conv2d", "add"] and new[2].inputs[0] is mid
    assert [op for op, _ in new[2].attrs["input_preact"]["steps"]] == ["add"]
    ir = IR()
    zs, nxt = _block(ir)
    last = ir.nodes[3].outputs[0]  # the relu's value
    assert [n.op for n in _rewrite(ir, {**_outputs(zs, nxt), "a": last})] == ["add", "mul", "add", "relu", "conv2d", "add"]


def test_a_reader_that_cannot_keeps_it_for_all():
    ir = IR()
    zs, nxt = _block(ir, readers=2)
    a = ir.nodes[3].outputs[0]
    d = ir.op("conv2d", [a, ir.const(np.ones((16, 3, 3, 1)))], (1, 12, 12, 16), padding=[1] * 4, strides=[1, 1],
              dilations=[1, 1], groups=16, input_layout="nhwc", filter_layout="ohwi")  # depthwise: not the tile kernel
    ops = [n.op for n in _rewrite(ir, {**_outputs(zs, nxt), "d": d})]
    assert ops == ["add", "mul", "add", "relu", "conv2d", "conv2d", "add", "conv2d"]


def test_a_scale_of_the_wrong_shape_or_not_constant_stays():
    ir = IR()
    zs, nxt = _block(ir, s_shape=(16, 1), c=16, hw=16, shift=False)  # broadcasts along W, not the channels
    assert [n.op for n in _rewrite(ir, _outputs(zs, nxt))] == ["add", "mul", "relu", "conv2d", "add"]
    ir = IR()
    x, s = ir.input((1, 12, 12, 16)), ir.input((16,))
    z = ir.conv(ir.op("relu", [ir.op("mul", [x, s])]), ir.filt(24, 1, 16))
    assert [n.op for n in _rewrite(ir, {"z": z})] == ["mul", "relu", "conv2d"]


def test_channels_not_a_multiple_of_4_a_grouped_conv_and_float16_stay():
    ir = IR()
    zs, nxt = _block(ir, c=6)
    assert [n.op for n in _rewrite(ir, _outputs(zs, nxt))] == ["add", "mul", "add", "relu", "conv2d", "add"]
    ir = IR()
    x = ir.input((1, 8, 8, 16))
    a = ir.op("relu", [ir.op("mul", [x, ir.const(np.full(16, 2.0))])])
    z = ir.conv(a, ir.const(np.ones((16, 3, 3, 8))), groups=2, pad=1)
    assert [n.op for n in _rewrite(ir, {"z": z})] == ["mul", "relu", "conv2d"]
    ir = IR("float16")  # x * s + b in float32 would skip the float16 rounding between the steps
    zs, nxt = _block(ir)
    assert [n.op for n in _rewrite(ir, _outputs(zs, nxt))] == ["add", "mul", "add", "relu", "conv2d", "add"]
    ir = IR("float16")  # the relu alone is exact
    zs, nxt = _block(ir, scale=False, shift=False)
    assert [n.op for n in _rewrite(ir, _outputs(zs, nxt))] == ["add", "conv2d", "add"]
    ir = IR("float16")  # a clamp with float16 bounds is exact too
    zs, nxt = _block(ir, scale=False, shift=False, act="clamp", min_value=0.0, max_value=6.0)
    assert [n.op for n in _rewrite(ir, _outputs(zs, nxt))] == ["add", "conv2d", "add"]
    ir = IR("float16")  # 0.1 is no float16: the stand-alone kernel clamps at float16(0.1), the step would not
    zs, nxt = _block(ir, scale=False, shift=False, act="clamp", min_value=0.1, max_value=0.3)
    assert [n.op for n in _rewrite(ir, _outputs(zs, nxt))] == ["add", "clamp", "conv2d", "add"]


def test_a_decomposed_normalization_and_a_batch_normalization():
    ir = IR()
    x = ir.input((1, 12, 12, 16))
    v = ir.op("sub", [x, ir.const(np.linspace(-1, 1, 16))])
    v = ir.op("div", [v, ir.const(np.linspace(0.5, 2, 16))])
    v = ir.op("add", [ir.op("mul", [v, ir.const(np.linspace(1, 2, 16))]), ir.const(np.linspace(0, 1, 16))])
    z = ir.conv(ir.op("relu", [v]), ir.filt(24, 3, 16), pad=1)
    new = _rewrite(ir, {"z": z})
    assert [n.op for n in new] == ["conv2d"]
    assert [op for op, _ in new[0].attrs["input_preact"]["steps"]] == ["sub", "div", "mul", "add"]
    for ep, act in (([{"op": "relu"}], ("relu",)), ([], None), ([{"op": "clamp", "min_value": 0.0, "max_value": 6.0}],
                                                                ("clamp", 0.0, 6.0))):
        ir = IR()
        x = ir.input((1, 12, 12, 16))
        stats = [ir.const(np.linspace(a, b, 16)) for a, b in ((-1, 1), (0.5, 2), (1, 2), (0, 1))]
        y = ir.op("batch_normalization", [x] + stats, axis=3, epsilon=1e-5, epilogue=ep)
        z = ir.conv(y, ir.filt(24, 3, 16), pad=1)
        new = fuse_conv_input_preact(list(ir.nodes), {"z": z})
        assert [n.op for n in new] == ["conv2d"], ep
        pre = new[0].attrs["input_preact"]
        assert [op for op, _ in pre["steps"]] == ["sub", "div", "mul", "add"] and pre["act"] == act
        d = new[0].inputs[pre["steps"][1][1]]
        assert np.array_equal(d.data, np.sqrt(np.linspace(0.5, 2, 16).astype(np.float32) + np.float32(1e-5)))
    ir = IR()  # statistics over another axis, or a sigmoid epilogue: the normalization stays
    x = ir.input((1, 12, 12, 16))
    stats = [ir.const(np.linspace(a, b, 16)) for a, b in ((-1, 1), (0.5, 2))]
    y = ir.op("batch_normalization", [x] + stats, axis=3, epsilon=1e-5, epilogue=[{"op": "sigmoid"}])
    z = ir.conv(y, ir.filt(24, 3, 16), pad=1)
    assert [n.op for n in fuse_conv_input_preact(list(ir.nodes), {"z": z})] == ["batch_normalization", "conv2d"]


def test_other_activations_stay_and_steps_come_in_any_order():
    ir = IR()
    zs, nxt = _block(ir, act="sigmoid")
    assert [n.op for n in _rewrite(ir, _outputs(zs, nxt))] == ["add", "mul", "add", "sigmoid", "conv2d", "add"]
    ir = IR()
    x = ir.input((1, 12, 12, 16))
    v = ir.op("mul", [ir.op("add", [x, ir.const(np.full(16, 1.0))]), ir.const(np.full(16, 2.0))])
    z = ir.conv(ir.op("relu", [v]), ir.filt(24, 1, 16))
    new = _rewrite(ir, {"z": z})  # (x + b) * s: the steps in the graph's order
    assert [n.op for n in new] == ["conv2d"] and [op for op, _ in new[0].attrs["input_preact"]["steps"]] == ["add", "mul"]
    ir = IR()  # c - x and c / x are no steps of x (and the relu after them stays with them)
    x = ir.input((1, 12, 12, 16))
    v = ir.op("sub", [ir.const(np.full(16, 1.0)), x])
    z = ir.conv(ir.op("relu", [ir.op("div", [ir.const(np.full(16, 1.0)), v])]), ir.filt(24, 1, 16))
    assert [n.op for n in _rewrite(ir, {"z": z})] == ["sub", "div", "relu", "conv2d"]


def test_the_knob(monkeypatch):
    """Default: pointwise readers only; ``off``: nothing; ``windowed``: 3x3 readers too."""
    for knob, fires in (("", (True, False)), ("off", (False, False)), ("windowed", (True, True))):
        monkeypatch.setenv("WEBNN_GPU_FORCE_INPUT_PREACT", knob)
        for win, pad, fire in ((1, 0, fires[0]), (3, 1, fires[1])):
            ir = IR()
            zs, nxt = _block(ir, win=win, pad=pad)
            ops = [n.op for n in _rewrite(ir, _outputs(zs, nxt))]
            assert ops == (["add", "conv2d", "add"] if fire else ["add", "mul", "add", "relu", "conv2d", "add"]), (knob, win)
    monkeypatch.setenv("WEBNN_GPU_FORCE_INPUT_PREACT", "of")
    with pytest.raises(ValueError, match="WEBNN_GPU_FORCE_INPUT_PREACT"):
        _rewrite(*_knob_graph())


def _knob_graph():
    ir = IR()
    zs, nxt = _block(ir)
    return ir, _outputs(zs, nxt)
