"""fuse_pw_depthwise: a pointwise conv and the depthwise conv reading its output, on a small
image, become one ``pw_depthwise`` node. GPU-free IR tests (``checked_rewrite`` compares both
graphs in float64) of where it fires and the near misses; GPU checks in
tests/ops/test_pw_depthwise.py."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from _irb import IR
from _ireval import checked_rewrite

from webnn_gpu.fusions import pw_depthwise as pwdw
from webnn_gpu.fusions.pw_depthwise import fuse_pw_depthwise

TOL = dict(rtol=1e-9, atol=1e-9)
#: a lavapipe-like device: subgroups of 8 lanes, the "lane-loop" profile, 16 KiB of workgroup memory
LAVAPIPE = SimpleNamespace(_subgroup=8, _tuning="lane-loop", limits={"max-compute-workgroup-storage-size": 16384,
                                                                     "max-storage-buffers-per-shader-stage": 8})


def fuse(nodes, outputs):
    return fuse_pw_depthwise(nodes, outputs, LAVAPIPE)


def _pair(ir: IR, hw=12, k=16, n=32, *, win=3, stride=1, pad=1, act=True):
    """x -> 1x1 conv (bias, relu6) -> depthwise conv (bias, relu); (x, h, y)."""
    rng = np.random.default_rng(3)
    x = ir.input((1, hw, hw, k))
    h = ir.conv(x, ir.const(rng.standard_normal((n, 1, 1, k))), bias=ir.const(rng.standard_normal(n)))
    ir.nodes[-1].attrs["epilogue"] = [{"op": "add", "input": 2, "axis": 3}] + (
        [{"op": "clamp", "min": 0.0, "max": 6.0}] if act else [])
    y = ir.conv(h, ir.const(rng.standard_normal((n, win, win, 1))), groups=n, pad=pad, stride=stride,
                bias=ir.const(rng.standard_normal(n)))
    ir.nodes[-1].attrs["epilogue"] = [{"op": "add", "input": 2, "axis": 3}, {"op": "relu"}]
    return x, h, y


def test_a_pointwise_conv_and_its_depthwise_conv_become_one_node():
    ir = IR()
    _, h, y = _pair(ir)
    (node,) = checked_rewrite(fuse, ir, {"y": y}, **TOL)
    assert node.op == "pw_depthwise" and node.outputs == [y] and not node.attrs.keep
    assert node.attrs.pw is ir.nodes[0] and node.attrs.dw is ir.nodes[1]


def test_strides_windows_and_float16(monkeypatch):
    for dt, win, stride, pad in (("float32", 5, 2, 2), ("float16", 3, 1, 0), ("float32", 5, 1, 2)):
        ir = IR(dt)
        _, _, y = _pair(ir, hw=14, win=win, stride=stride, pad=pad)
        new = checked_rewrite(fuse, ir, {"y": y}, **TOL)
        assert [n.op for n in new] == (["pw_depthwise"] if dt == "float32" else ["conv2d", "conv2d"])  # PWDW_TYPES
    monkeypatch.setenv("WEBNN_GPU_FORCE_PWDW", "on")
    (node,) = checked_rewrite(fuse, ir, {"y": y}, **TOL)
    assert node.op == "pw_depthwise"


def test_an_intermediate_read_elsewhere_fuses_only_where_forced(monkeypatch):
    ir = IR()
    _, h, y = _pair(ir)
    z = ir.op("add", [h, ir.const(np.ones(32))])
    new = checked_rewrite(fuse, ir, {"y": y, "z": z}, **TOL)
    assert [n.op for n in new] == ["conv2d", "conv2d", "add"]  # PWDW_KEEP: not by default
    monkeypatch.setenv("WEBNN_GPU_FORCE_PWDW", "on")
    new = checked_rewrite(fuse, ir, {"y": y, "z": z}, **TOL)
    assert [n.op for n in new] == ["pw_depthwise", "add"] and new[0].outputs == [y, h] and new[0].attrs.keep
    new = checked_rewrite(fuse, ir, {"y": y, "h": h}, **TOL)  # h a graph output
    assert new[0].op == "pw_depthwise" and new[0].outputs == [y, h]


def test_the_switch_off_fuses_none(monkeypatch):
    ir = IR()
    _, _, y = _pair(ir)
    monkeypatch.setenv("WEBNN_GPU_FORCE_PWDW", "off")
    assert [n.op for n in fuse(ir.nodes, {"y": y})] == ["conv2d", "conv2d"]
    monkeypatch.setenv("WEBNN_GPU_FORCE_PWDW", "maybe")
    with pytest.raises(ValueError, match="WEBNN_GPU_FORCE_PWDW"):
        fuse(ir.nodes, {"y": y})


# ---------------------------------------------------------------- near misses
def _ops(ir, y):
    return [n.op for n in checked_rewrite(fuse, ir, {"y": y}, **TOL)]


def test_an_image_past_the_limit_stays():
    ir = IR()
    _, _, y = _pair(ir, hw=15)  # 225 pixels
    assert _ops(ir, y) == ["conv2d", "conv2d"]


def test_channels_not_a_multiple_of_4_stay():
    for k, n in ((6, 32), (16, 30)):
        ir = IR()
        _, _, y = _pair(ir, k=k, n=n)
        assert _ops(ir, y) == ["conv2d", "conv2d"], (k, n)


def test_a_computed_filter_stays():
    ir = IR()
    rng = np.random.default_rng(5)
    x = ir.input((1, 8, 8, 16))
    w = ir.input((32, 1, 1, 16))
    h = ir.conv(x, w)
    y = ir.conv(h, ir.const(rng.standard_normal((32, 3, 3, 1))), groups=32, pad=1)
    assert _ops(ir, y) == ["conv2d", "conv2d"]
    ir = IR()
    x = ir.input((1, 8, 8, 16))
    h = ir.conv(x, ir.const(rng.standard_normal((32, 1, 1, 16))))
    y = ir.conv(h, ir.input((32, 3, 3, 1)), groups=32, pad=1)
    assert _ops(ir, y) == ["conv2d", "conv2d"]


def test_a_grouped_first_conv_or_a_dense_second_conv_stays():
    rng = np.random.default_rng(6)
    ir = IR()
    x = ir.input((1, 8, 8, 16))
    h = ir.conv(x, ir.const(rng.standard_normal((32, 1, 1, 8))), groups=2)
    y = ir.conv(h, ir.const(rng.standard_normal((32, 3, 3, 1))), groups=32, pad=1)
    assert _ops(ir, y) == ["conv2d", "conv2d"]
    ir = IR()
    x = ir.input((1, 8, 8, 16))
    h = ir.conv(x, ir.const(rng.standard_normal((32, 1, 1, 16))))
    y = ir.conv(h, ir.const(rng.standard_normal((32, 3, 3, 32))), pad=1)  # groups 1
    assert _ops(ir, y) == ["conv2d", "conv2d"]
    ir = IR()
    x = ir.input((1, 8, 8, 16))
    h = ir.conv(x, ir.const(rng.standard_normal((16, 1, 1, 16))))
    y = ir.conv(h, ir.const(rng.standard_normal((32, 3, 3, 1))), groups=16, pad=1)  # multiplier 2
    assert _ops(ir, y) == ["conv2d", "conv2d"]
    ir = IR()  # a 3x3 first conv: no pointwise one
    x = ir.input((1, 8, 8, 16))
    h = ir.conv(x, ir.const(rng.standard_normal((32, 3, 3, 16))), pad=1)
    y = ir.conv(h, ir.const(rng.standard_normal((32, 3, 3, 1))), groups=32, pad=1)
    assert _ops(ir, y) == ["conv2d", "conv2d"]


def test_a_depthwise_conv_already_fused_or_marked_stays():
    for attr in ({"pool_output": True}, {"store_d2s": 2}, {"input_add": 2}):
        ir = IR()
        _, _, y = _pair(ir)
        ir.nodes[1].attrs.update(attr)
        assert not pwdw.pw_depthwise_ok(ir.nodes[0], ir.nodes[1]), attr
    ir = IR()
    _, _, y = _pair(ir)
    ir.nodes[0].attrs["input_scale"] = 2
    assert not pwdw.pw_depthwise_ok(ir.nodes[0], ir.nodes[1])


def test_a_depthwise_epilogue_reading_its_input_or_nchw_stays():
    ir = IR()
    _, h, y = _pair(ir)
    dw = ir.nodes[1]
    dw.inputs.append(h)  # a residual add of the depthwise input: h read twice
    dw.attrs["epilogue"] = dw.attrs["epilogue"] + [{"op": "add", "input": 3}]
    assert not pwdw.pw_depthwise_ok(ir.nodes[0], dw)
    ir = IR()
    _, _, y = _pair(ir)
    ir.nodes[0].attrs["input_layout"] = "nchw"
    assert not pwdw.pw_depthwise_ok(ir.nodes[0], ir.nodes[1])


def test_a_dtype_mismatch_stays():
    ir = IR()
    _, _, y = _pair(ir)
    ir.nodes[1].outputs[0].data_type = "float16"
    assert not pwdw.pw_depthwise_ok(ir.nodes[0], ir.nodes[1])


def test_without_subgroups_of_8_nothing_fuses():
    ir = IR()
    _, _, y = _pair(ir)
    for ctx in (None, SimpleNamespace(_subgroup=0, _tuning="lane-loop", limits={}),
                SimpleNamespace(_subgroup=16, _tuning="lane-loop", limits={}),
                SimpleNamespace(**{**vars(LAVAPIPE), "_tuning": "default"})):  # measured on lavapipe 22 only
        assert [n.op for n in fuse_pw_depthwise(ir.nodes, {"y": y}, ctx)] == ["conv2d", "conv2d"]


def test_a_deep_pointwise_conv_stays_unless_forced(monkeypatch):
    ir = IR()
    _, _, y = _pair(ir, k=80)  # past PWDW_MAX_K: the tile kernel's deeper tiles win there
    assert _ops(ir, y) == ["conv2d", "conv2d"]
    monkeypatch.setenv("WEBNN_GPU_FORCE_PWDW", "on")
    assert _ops(ir, y) == ["pw_depthwise"]


@pytest.mark.parametrize("step", [{"pool": {"op": "max", "window": [3, 3]}}, {"up2": {"steps": []}},
                                  {"pad": [1, 1, 1, 1]}], ids=["pool", "up2", "pad"])
def test_a_pointwise_epilogue_reading_through_a_pool_upsampling_or_padding_stays(step):
    """The pointwise part unrolls its epilogue per pixel and channel block: an operand read through
    a pool (fuse_pool_residual), a 2x upsampling (fuse_upsampled_residual) or padding is not taken
    (a pooled residual there measured 7-40x the first build of the two kernels)."""
    ir = IR()
    _, _, y = _pair(ir)
    assert pwdw.pw_depthwise_ok(ir.nodes[0], ir.nodes[1])
    ir.nodes[0].attrs["epilogue"] = [{**ir.nodes[0].attrs["epilogue"][0], **step}]
    assert not pwdw.pw_depthwise_ok(ir.nodes[0], ir.nodes[1])
