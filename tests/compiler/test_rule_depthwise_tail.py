"""fuse_depthwise_project's condition for depthwise channels that are not a multiple of 4
(``webnn_gpu.ops.conv._lanes_tail_ok``: only the channel-lane kernel takes them) and the
padded residual the channel-lane kernel reads from its held rows (``_lanes_residual``), on the
IR, with near misses (no GPU; the kernels against NumPy: ``tests/ops/test_depthwise_project_tail.py``)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
from _irb import IR

from webnn_gpu.compiler.rules.conv import fuse_depthwise_project
from webnn_gpu.ops import conv

LANE_LOOP = SimpleNamespace(_tuning="lane-loop", _subgroup=8, limits={})


def _pair(C, N, *, hw=16, stride=1, dw_filter="constant", dw_add=None, transpose=False):
    """An IR depthwise 3x3 conv2d over a (1, hw, hw, C) input and its projection to N."""
    ir = IR()
    x = ir.input((1, hw, hw, C))
    f = ir.input((C, 3, 3, 1)) if dw_filter == "input" else ir.filt(C, 3, 1)
    d = ir.conv(x, f, groups=C, pad=1, stride=stride)
    if dw_add is not None:  # an epilogue step on the depthwise output
        d.producer.attrs["epilogue"] = [dw_add]
        d.producer.inputs.append(ir.input(d.shape) if "axis" not in dw_add else ir.const(np.ones(C)))
    if transpose:
        y = ir.op("conv_transpose2d", [d, ir.filt(N, 2, C)], (1, 2 * d.shape[1], 2 * d.shape[2], N),
                  padding=[0] * 4, strides=[2, 2], dilations=[1, 1], groups=1, output_padding=[0, 0],
                  input_layout="nhwc", filter_layout="ohwi")
    else:
        y = ir.conv(d, ir.filt(N, 1, C))
    return ir, {"y": y}


def _fused(ir, outputs, context=LANE_LOOP):
    return [n.op for n in fuse_depthwise_project(ir.nodes, outputs, context)] == ["depthwise_project"]


def test_rule_fuses_channels_not_a_multiple_of_4_on_the_lanes(monkeypatch):
    """fuse_depthwise_project takes a pair whose channels are not a multiple of 4 where the
    channel-lane kernel runs it and pays (face detection's 32 x 32 x 42 stride 2 -> 48), and not:
    without subgroup lanes or on another profile, a projection not a multiple of 4, a computed
    depthwise filter, a depthwise epilogue reading an operand per value, a transposed
    projection, a depthwise output that is a graph output or has another reader, or with the
    lanes kernel forced off; a multiple of 4 as before."""
    for var in ("WEBNN_GPU_FORCE_DWP", "WEBNN_GPU_FORCE_DWP_FORM"):
        monkeypatch.delenv(var, raising=False)
    assert _fused(*_pair(42, 48, hw=32, stride=2))
    assert _fused(*_pair(42, 48, hw=32, stride=2, dw_add={"op": "add", "input": 3, "axis": 3}))
    assert _fused(*_pair(44, 48, hw=32, stride=2))
    assert not _fused(*_pair(42, 48, hw=32, stride=2), SimpleNamespace(_tuning="lane-loop", _subgroup=0, limits={}))
    assert not _fused(*_pair(42, 48, hw=32, stride=2), SimpleNamespace(_tuning="default", _subgroup=8, limits={}))
    assert not _fused(*_pair(42, 48, hw=32, stride=2), None)
    assert not _fused(*_pair(42, 50, hw=32, stride=2))
    assert not _fused(*_pair(42, 48, hw=32, stride=2, dw_filter="input"))
    assert not _fused(*_pair(42, 48, hw=32, stride=2, dw_add={"op": "add", "input": 3}))
    assert not _fused(*_pair(42, 48, hw=16, transpose=True))
    assert not _fused(*_pair(42, 200, hw=32, stride=2))  # past the lanes' columns (and PROJECT_MAX_N)
    ir, outputs = _pair(42, 48, hw=32, stride=2)
    outputs["d"] = ir.nodes[0].outputs[0]  # the depthwise output is a graph output too
    assert not _fused(ir, outputs)
    ir, outputs = _pair(42, 48, hw=32, stride=2)
    outputs["z"] = ir.op("neg", [ir.nodes[0].outputs[0]])  # ... or has a second reader
    assert "depthwise_project" not in [n.op for n in fuse_depthwise_project(ir.nodes, outputs, LANE_LOOP)]
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP_FORM", "blocks")
    assert not _fused(*_pair(42, 48, hw=32, stride=2))
    assert _fused(*_pair(44, 48, hw=32, stride=2))


def test_rule_tail_follows_the_cost_model(monkeypatch):
    """The pair of 42 channels fuses where the channel-lane estimate (with its margin) is below
    the depthwise and the tile kernel's, and stays two kernels where it is not (here: a margin
    raised past the two kernels' estimate); forcing the fused form takes it then."""
    for var in ("WEBNN_GPU_FORCE_DWP", "WEBNN_GPU_FORCE_DWP_FORM"):
        monkeypatch.delenv(var, raising=False)
    ir, outputs = _pair(42, 48, hw=32, stride=2)
    g = conv._geometry(ir.nodes[0])
    fused = conv._dwpl_cost(g, 12, conv._dwp_lanes(g, 12, 8), 8, "lane-loop")
    two = conv._project_cost(g, 48, "lane-loop")[1]
    assert fused < two and _fused(ir, outputs)
    monkeypatch.setattr(conv, "DWPL_MARGIN", conv.DWPL_MARGIN + two - fused + 1.0)
    assert not _fused(*_pair(42, 48, hw=32, stride=2))
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP", "fused")
    assert _fused(*_pair(42, 48, hw=32, stride=2))


def test_padded_residual_near_misses():
    """_lanes_residual takes the depthwise input padded with zero channels at offset 0 (stride 1,
    same size, one pixel per pass), or a pool of it without padding inside the depthwise window
    (BlazeFace's 2 x 2 stride-2 max pool in a 3 x 3 stride-2 window), not: a pad at another
    offset, the input itself at stride 2, a projection packing pixels (N <= 16), the same
    channels unpooled (the given operand's own path), a pool with padding, a pool window
    outside the depthwise window or of another stride."""

    def residual(C, N, pad, stride=1, pool=None, dpad=1):
        ir = IR()
        x = ir.input((1, 8, 8, C))
        d = ir.conv(x, ir.filt(C, 3, 1), groups=C, pad=dpad, stride=stride)
        y = ir.conv(d, ir.filt(N, 1, C))
        proj = y.producer
        proj.inputs.append(x)
        step = {"op": "add", "input": 2, "pad": pad}
        if pool is not None:
            step["pool"] = dict({"op": "max", "window": [2, 2], "strides": [stride, stride], "padding": [0, 0, 0, 0],
                                 "layout": "nhwc", "shape": [1, d.shape[1], d.shape[2], C]}, **pool)
        proj.attrs["epilogue"] = [step]
        g = conv._geometry(d.producer)
        return conv._lanes_residual(d.producer, proj, g, y, conv._dwp_lanes(g, -(-N // 4), 8), 8)

    assert residual(24, 28, [0, 0, 0, 0]) == (2, None)
    assert residual(42, 48, [0, 0, 0, 0]) == (2, None)
    assert residual(24, 28, [0, 0, 0, 4]) is None
    assert residual(24, 28, [0, 0, 0, 0], stride=2) is None
    assert residual(8, 12, [0, 0, 0, 0]) is None
    assert residual(24, 24, [0, 0, 0, 0]) is None
    # 8 x 8 -> 3 x 3 (no padding); the pool of the whole image is 4 x 4: not the output's pixels
    assert residual(42, 48, [0, 0, 0, 0], stride=2, pool={"shape": [1, 4, 4, 42]}, dpad=0) is None
    ir_ok = residual(42, 48, [0, 0, 0, 0], stride=2, pool={"shape": [1, 3, 3, 42]}, dpad=0)
    assert ir_ok == (2, {"op": "max", "window": (2, 2), "at": (0, 0)})
    assert residual(24, 24, [0, 0, 0, 0], stride=2, pool={"shape": [1, 3, 3, 24]}, dpad=0) is not None
    assert residual(42, 48, [0, 0, 0, 0], stride=2, pool={"shape": [1, 3, 3, 42], "padding": [1, 0, 1, 0]},
                    dpad=0) is None
    assert residual(42, 48, [0, 0, 0, 0], stride=2, pool={"shape": [1, 3, 3, 42], "window": [4, 4]}, dpad=0) is None
    assert residual(42, 48, [0, 0, 0, 0], stride=2, pool={"shape": [1, 3, 3, 42], "strides": [1, 1]},
                    dpad=0) is None


def test_no_expansion_or_partials_before_a_tail():
    """The expansion before a depthwise conv of 42 channels stays its own node (only the pixel
    blocks compute an expansion; near miss of the inverted residual), and partials_ok does not
    give such a node a pool's partial sums."""
    from webnn_gpu.ops.conv import partials_ok

    def chain(C):
        ir = IR()
        x = ir.input((1, 32, 32, 16))
        e = ir.conv(x, ir.filt(C, 1, 16))
        d = ir.conv(e, ir.filt(C, 3, 1), groups=C, pad=1, stride=2)
        y = ir.conv(d, ir.filt(48, 1, C))
        return fuse_depthwise_project(ir.nodes, {"y": y}, LANE_LOOP)

    out = chain(42)
    assert [n.op for n in out] == ["conv2d", "depthwise_project"] and "expand" not in out[1].attrs
    assert not partials_ok(out[1], "lane-loop")
