"""Rules that once fired where they did not apply (issue 18), on hand-made IR (no GPU)."""

from __future__ import annotations

import numpy as np

from webnn_gpu.compiler import check_order
from webnn_gpu.compiler.rules.conv import fuse_conv_input, swap_resample_conv
from webnn_gpu.compiler.rules.epilogue import fuse_epilogue
from webnn_gpu.fusions.squeeze_excite import fuse_squeeze_excite
from webnn_gpu._ir import Node, Value


def _v(shape, kind="op"):
    return Value("float32", tuple(shape), kind)


def _c(shape):
    return Value("float32", tuple(shape), "constant", data=np.ones(int(np.prod(shape)), np.float32))


def _pw(x, w, out, bias=None, layout="nhwc", flayout="ohwi"):
    ins = [x, w] + ([bias] if bias is not None else [])
    n = Node("conv2d", ins, [out], {"padding": [0, 0, 0, 0], "strides": [1, 1], "dilations": [1, 1], "groups": 1,
                                    "input_layout": layout, "filter_layout": flayout})
    out.producer = n
    return n


def test_three_convs_on_a_pixel_pair_once_and_keep_the_first():
    x = _v((1, 1, 1, 16), "input")
    a, b, c = _v((1, 1, 1, 4)), _v((1, 1, 1, 8)), _v((1, 1, 1, 5))
    nodes = [_pw(x, _c((4, 1, 1, 16)), a), _pw(a, _c((8, 1, 1, 4)), b), _pw(b, _c((5, 1, 1, 8)), c)]
    out = fuse_squeeze_excite(nodes, {"y": c})
    check_order(out, {"y": c})
    assert [n.op for n in out] == ["squeeze_excite", "conv2d"]
    assert out[0].outputs == [b] and out[1].inputs[0] is b


def test_input_scale_of_a_conv_without_bias_leaves_the_bias_slot_empty():
    x, s = _v((1, 16, 16, 12), "input"), _v((12,), "input")
    y, out = _v((1, 16, 16, 12)), _v((1, 16, 16, 12))
    mul = Node("mul", [s, x], [y], {})
    res = fuse_conv_input([mul, _pw(y, _c((12, 1, 1, 12)), out)], {"out": out})
    assert len(res) == 1 and res[0].inputs[:4] == [x, res[0].inputs[1], None, s]
    assert res[0].attrs["input_scale"] == 3


def test_swapped_resample_and_conv_come_after_the_filter():
    x = _v((1, 12, 8, 8), "input")
    up, f, out = _v((1, 12, 16, 16)), _v((6, 1, 1, 12)), _v((1, 6, 16, 16))
    rs = Node("resample2d", [x], [up], {"mode": "linear", "axes": [3, 2], "scales": [2.0, 2.0]})
    lin = Node("linear", [_c((6, 1, 1, 12))], [f], {"alpha": 1.0, "beta": 0.0})
    conv = _pw(up, f, out, layout="nchw")
    res = swap_resample_conv([rs, lin, conv], {"y": out})
    assert [n.op for n in res] == ["linear", "conv2d", "resample2d"]
    check_order(res, {"y": out})


def test_per_channel_operands_of_any_rank_become_channel_reads():
    x = _v((1, 5, 5, 8), "input")
    c, y1, y2, y3 = _v((1, 5, 5, 8)), _v((1, 5, 5, 8)), _v((1, 5, 5, 8)), _v((1, 5, 5, 8))
    s_in = _v((1, 1, 8), "input")
    nodes = [_pw(x, _c((8, 1, 1, 8)), c), Node("mul", [s_in, c], [y1], {}),
             Node("add", [y1, _c((1, 1, 1, 8))], [y2], {}), Node("sub", [y2, _c(())], [y3], {})]
    res = fuse_epilogue(nodes, {"y": y3})
    assert [n.op for n in res] == ["reshape", "conv2d"]
    steps = res[1].attrs["epilogue"]
    assert [s.get("axis") for s in steps] == [3, 3, 3] and steps[0]["reverse"]
    assert all(res[1].inputs[s["input"]].shape == (8,) for s in steps)


def test_an_excitation_past_the_work_limit_stays_two_convs():
    """Two 1x1 convs on a pixel pair into one single-workgroup kernel up to SE_MAX_MACS
    multiply-adds (a 96 -> 24 -> 96 excitation); a classifier head's 576 -> 1024 -> 10 stays
    two convs (each on kernels that use both cores)."""
    from webnn_gpu.fusions.squeeze_excite import SE_MAX_MACS

    for c, r, o, fused in ((96, 24, 96, True), (576, 1024, 10, False)):
        assert (c * r + r * o <= SE_MAX_MACS) == fused
        x = _v((1, 1, 1, c), "input")
        a, b = _v((1, 1, 1, r)), _v((1, 1, 1, o))
        nodes = [_pw(x, _c((r, 1, 1, c)), a), _pw(a, _c((o, 1, 1, r)), b)]
        out = fuse_squeeze_excite(nodes, {"y": b})
        assert [n.op for n in out] == (["squeeze_excite"] if fused else ["conv2d", "conv2d"])
