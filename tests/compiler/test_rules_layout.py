"""prelu as an epilogue step and the ``fold_layout`` rule on hand-made IR (no GPU)."""

from __future__ import annotations

import numpy as np
import pytest

from webnn_gpu import compiler
from webnn_gpu.compiler.rules._common import _is_linear_doubling
from webnn_gpu.compiler.rules.epilogue import fuse_epilogue
from webnn_gpu.compiler.rules.layout import fold_layout, zero_pad
from webnn_gpu.builder import Node, Value
from webnn_gpu.ops import _epilogue


def _v(shape=(1, 4, 4, 8), dt="float32", kind="op"):
    return Value(dt, tuple(shape), kind)


def _c(value, shape=(), dt="float32"):
    return Value(dt, tuple(shape), "constant", data=np.full(shape, value, np.float32).reshape(-1))


def _n(op, ins, out, **attrs):
    node = Node(op, ins, [out], attrs)
    out.producer = node
    return node


def _conv(x, out, *, k=3, padding=(1, 1, 1, 1), layout="nhwc", groups=1):
    C = x.shape[3] if layout == "nhwc" else x.shape[1]
    O = out.shape[3] if layout == "nhwc" else out.shape[1]
    w = _c(0.5, (O, k, k, C // groups) if layout == "nhwc" else (O, C // groups, k, k))
    return _n("conv2d", [x, w], out, padding=list(padding), strides=[1, 1], dilations=[1, 1], groups=groups,
              input_layout=layout, filter_layout="ohwi" if layout == "nhwc" else "oihw")


def _pad(x, out, beg, end, value=0.0, mode="constant"):
    return _n("pad", [x], out, beginning_padding=list(beg), ending_padding=list(end), mode=mode,
              value=np.float32(value))


# ---------------------------------------------------------------- prelu in the epilogue
def test_prelu_after_a_conv_is_a_step_read_per_channel():
    x = _v(kind="input")
    c, y = _v(), _v()
    slope = _c(0.25, (1, 1, 8))
    out = fuse_epilogue([_conv(x, c), _n("prelu", [c, slope], y)], {"y": y})
    assert len(out) == 1 and out[0].outputs == [y]
    assert out[0].attrs["epilogue"] == [{"op": "prelu", "input": 3, "axis": 3}]
    assert out[0].inputs[3].shape == (8,), "the [1, 1, C] slope is re-made 1-D"


def test_conv_add_prelu_chain_fuses_and_a_slope_of_the_full_shape_is_loaded():
    x, r = _v(kind="input"), _v(kind="input")
    slope = _v(kind="input")  # a full-shaped slope: one load per output element
    c, a, y = _v(), _v(), _v()
    out = fuse_epilogue([_conv(x, c), _n("add", [c, r], a), _n("prelu", [a, slope], y)], {"y": y})
    # one per-element load at most (EPILOGUE_MAX_LOADS): the residual is taken, the slope not
    assert [n.op for n in out] == ["conv2d", "prelu"]
    c, a, y = _v(), _v(), _v()
    out = fuse_epilogue([_conv(x, c), _n("add", [c, r], a), _n("prelu", [a, _c(0.1)], y)], {"y": y})
    assert len(out) == 1
    assert out[0].attrs["epilogue"] == [{"op": "add", "input": 3}, {"op": "prelu", "input": 4, "axis": 3}]


def test_prelu_whose_slope_is_the_host_value_is_reversed():
    x, other = _v(kind="input"), _v(kind="input")
    c, y = _v(), _v()
    out = fuse_epilogue([_conv(x, c), _n("prelu", [other, c], y)], {"y": y})
    assert out[0].attrs["epilogue"] == [{"op": "prelu", "reverse": True, "input": 3}]


def test_prelu_step_renders_the_elementwise_expression():
    x, slope = _v(kind="input"), _v((8,), kind="input")
    node = Node("conv2d", [x, _c(0.5, (8, 3, 3, 8)), None, slope], [_v()], {})
    ep = _epilogue.build(node, node.outputs[0], [{"op": "prelu", "input": 3, "axis": 3}], chan_axis=3)
    assert "select(q.q0 * ev, ev, ev >= f32(0))" in ep.code


# ---------------------------------------------------------------- zero pads before a conv
def test_spatial_zero_pad_becomes_the_convs_padding_and_goes():
    x = _v((1, 6, 6, 8), kind="input")
    p, y = _v((1, 8, 9, 8)), _v((1, 6, 7, 8))
    conv = _conv(p, y, padding=(0, 0, 0, 1))
    out = fold_layout([_pad(x, p, [0, 1, 2, 0], [0, 1, 1, 0]), conv], {"y": y})
    assert [n.op for n in out] == ["conv2d"]
    assert out[0].inputs[0] is x and out[0].attrs["padding"] == [1, 1, 2, 2]
    assert conv.attrs["padding"] == [0, 0, 0, 1] and conv.inputs[0] is p, "the original node is not mutated"


def test_nchw_conv_takes_the_pad_of_its_own_spatial_axes():
    x = _v((1, 8, 6, 6), kind="input")
    p, y = _v((1, 8, 8, 8)), _v((1, 8, 6, 6))
    out = fold_layout([_pad(x, p, [0, 0, 1, 1], [0, 0, 1, 1]), _conv(p, y, padding=(0, 0, 0, 0), layout="nchw")],
                      {"y": y})
    assert [n.op for n in out] == ["conv2d"] and out[0].attrs["padding"] == [1, 1, 1, 1]
    # the same pad before an NHWC conv pads its width and channels: stays
    x = _v((1, 6, 6, 8), kind="input")
    p, y = _v((1, 6, 8, 10)), _v((1, 4, 6, 8))
    conv = _n("conv2d", [p, _c(0.5, (8, 3, 3, 10))], y, padding=[0, 0, 0, 0], strides=[1, 1], dilations=[1, 1],
              groups=1, input_layout="nhwc", filter_layout="ohwi")
    assert [n.op for n in fold_layout([_pad(x, p, [0, 0, 1, 1], [0, 0, 1, 1]), conv], {"y": y})] == ["pad", "conv2d"]


@pytest.mark.parametrize("case", ["value 0.5", "value -0.0", "edge", "reflection", "channels", "batch", "pool"])
def test_pads_that_are_not_conv_zero_padding_stay(case):
    x = _v((1, 6, 6, 8), kind="input")
    beg, end, value, mode = [0, 1, 1, 0], [0, 1, 1, 0], 0.0, "constant"
    p = _v((1, 8, 8, 8))
    if case.startswith("value"):
        value = float(case.split()[1])
    elif case in ("edge", "reflection"):
        mode = case
    elif case == "channels":
        end, p = [0, 1, 1, 1], _v((1, 7, 7, 9))
    elif case == "batch":
        end, p = [1, 1, 1, 0], _v((2, 7, 7, 8))
    pad = _pad(x, p, beg, end, value, mode)
    if case == "pool":  # a pool's padding is left out of its window: not the same as zeros
        y = _v((1, 4, 4, 8))
        reader = _n("average_pool2d", [p], y, window=[3, 3], padding=[0, 0, 0, 0], strides=[2, 2],
                    dilations=[1, 1], layout="nhwc")
    else:
        C = p.shape[3]
        y = _v((p.shape[0], p.shape[1] - 2, p.shape[2] - 2, 8))
        reader = _n("conv2d", [p, _c(0.5, (8, 3, 3, C))], y, padding=[0, 0, 0, 0], strides=[1, 1],
                    dilations=[1, 1], groups=1, input_layout="nhwc", filter_layout="ohwi")
    out = fold_layout([pad, reader], {"y": y})
    assert [n.op for n in out] == ["pad", reader.op] and out[1] is reader


def test_pad_read_twice_or_output_folds_into_each_conv_and_stays_only_when_needed():
    x = _v((1, 6, 6, 8), kind="input")
    p, y1, y2 = _v((1, 8, 8, 8)), _v((1, 6, 6, 8)), _v((1, 8, 8, 8))
    pad = _pad(x, p, [0, 1, 1, 0], [0, 1, 1, 0])
    c1 = _conv(p, y1, padding=(0, 0, 0, 0))
    c2 = _conv(p, y2, padding=(1, 1, 1, 1))
    out = fold_layout([pad, c1, c2], {"y1": y1, "y2": y2})
    assert [n.op for n in out] == ["conv2d", "conv2d"]
    assert out[0].attrs["padding"] == [1, 1, 1, 1] and out[1].attrs["padding"] == [2, 2, 2, 2]
    # the pad is a graph output too: it stays, the conv reads its input
    out = fold_layout([pad, c1], {"y1": y1, "p": p})
    assert [n.op for n in out] == ["pad", "conv2d"] and out[1].inputs[0] is x
    # another (non-conv) reader keeps it
    r = _v((1, 8, 8, 8))
    out = fold_layout([pad, c1, _n("relu", [p], r)], {"y1": y1, "r": r})
    assert [n.op for n in out] == ["pad", "conv2d", "relu"] and out[1].inputs[0] is x


def test_pad_not_the_convs_input_or_under_an_input_prologue_stays():
    x = _v((1, 6, 6, 8), kind="input")
    p, y = _v((1, 8, 8, 8)), _v((1, 6, 6, 8))
    pad = _pad(x, p, [0, 1, 1, 0], [0, 1, 1, 0])
    conv = _conv(p, y, padding=(0, 0, 0, 0))
    conv.attrs["input_add"] = 3
    conv.inputs += [None, _v((1, 8, 8, 8), kind="input")]
    assert fold_layout([pad, conv], {"y": y})[1] is conv


# ---------------------------------------------------------------- zero pads read by an epilogue
def _residual(pad_beg, pad_end, branch_shape, value=0.0, out_shape=(1, 4, 4, 16)):
    x = _v(out_shape[:3] + (8,), kind="input")
    br = _v(branch_shape, kind="input")
    p = _v(tuple(s + b + e for s, b, e in zip(branch_shape, pad_beg, pad_end)))
    c, y = _v(out_shape), _v(out_shape)
    nodes = [_pad(br, p, pad_beg, pad_end, value), _conv(x, c), _n("add", [c, p], y)]
    return compiler.run_passes(nodes, {"y": y}), br


def test_channel_padded_residual_is_read_in_place():
    out, br = _residual([0, 0, 0, 0], [0, 0, 0, 8], (1, 4, 4, 8))
    assert [n.op for n in out] == ["conv2d"]
    assert out[0].inputs[3] is br
    assert out[0].attrs["epilogue"] == [{"op": "add", "input": 3, "pad": [0, 0, 0, 0]}]
    out, br = _residual([0, 1, 0, 4], [0, 0, 1, 4], (1, 3, 3, 8))
    assert out[0].attrs["epilogue"] == [{"op": "add", "input": 3, "pad": [0, 1, 0, 4]}]


def test_residual_pads_that_are_not_zeros_or_broadcast_stay():
    out, _ = _residual([0, 0, 0, 0], [0, 0, 0, 8], (1, 4, 4, 8), value=1.0)
    assert [n.op for n in out] == ["pad", "conv2d"]
    # the padded branch broadcasts over the output's batch: not the output's shape
    out, _ = _residual([0, 0, 0, 0], [0, 0, 0, 8], (1, 4, 4, 8), out_shape=(2, 4, 4, 16))
    assert "pad" in [n.op for n in out]


def test_padded_epilogue_operand_renders_a_guarded_load():
    x, br = _v(kind="input"), _v((1, 4, 4, 8), kind="input")
    out = _v((1, 4, 4, 16))
    node = Node("conv2d", [x, _c(0.5, (16, 3, 3, 8)), None, br], [out], {})
    ep = _epilogue.build(node, out, [{"op": "add", "input": 3, "pad": [0, 0, 0, 4]}], chan_axis=3)
    assert "select(0.0, f32(e0[select(0u, (o / 16u) * 8u + (ch - 4u), (ch >= 4u && ch < 12u))]), " \
           "(ch >= 4u && ch < 12u))" in ep.code
    with pytest.raises(ValueError, match="'pad' operand"):
        _epilogue.build(node, out, [{"op": "add", "input": 3, "pad": [0, 0, 0, 9]}], chan_axis=3)


def test_zero_pad_predicate():
    x, p = _v((2, 2), kind="input"), _v((3, 2))
    assert zero_pad(_pad(x, p, [1, 0], [0, 0]))
    assert not zero_pad(_pad(x, p, [1, 0], [0, 0], value=-0.0))
    assert not zero_pad(_pad(x, p, [1, 0], [0, 0], value=2.0))
    assert not zero_pad(_pad(x, p, [1, 0], [0, 0], mode="edge"))
    assert not zero_pad(_pad(_v((2, 2), "int32", "input"), _v((3, 2), "int32"), [1, 0], [0, 0]))


def test_fold_layout_runs_after_fuse_epilogue_and_before_the_kernel_fusions():
    names = [p.__name__ for p in compiler.PASSES]
    assert names.index("fuse_epilogue") < names.index("fold_layout") < names.index("fuse_conv_input") \
        < names.index("fuse_depthwise_project")


# ---------------------------------------------------------------- pools host epilogues
def _pool(op, x, out, window, layout="nhwc"):
    return _n(op, [x], out, window=list(window), padding=[0, 0, 0, 0], strides=[1, 1], dilations=[1, 1],
              layout=layout)


def test_windowed_pool_takes_an_epilogue_and_a_global_pool_does_not():
    x, r = _v((1, 6, 6, 8), kind="input"), _v((1, 4, 4, 8), kind="input")
    p, a, y = _v((1, 4, 4, 8)), _v((1, 4, 4, 8)), _v((1, 4, 4, 8))
    out = fuse_epilogue([_pool("max_pool2d", x, p, (3, 3)), _n("add", [p, r], a),
                                   _n("prelu", [a, _c(0.2, (8,))], y)], {"y": y})
    assert [n.op for n in out] == ["max_pool2d"] and out[0].outputs == [y]
    assert out[0].inputs[1] is r
    assert out[0].attrs["epilogue"] == [{"op": "add", "input": 1}, {"op": "prelu", "input": 2, "axis": 3}]
    # a global pool runs as a reduction: no epilogue
    g, y = _v((1, 1, 1, 8)), _v((1, 1, 1, 8))
    out = fuse_epilogue([_pool("average_pool2d", x, g, (6, 6)), _n("relu", [g], y)], {"y": y})
    assert [n.op for n in out] == ["average_pool2d", "relu"]
    assert not _epilogue.hosts(out[0]) and _epilogue.hosts(_pool("l2_pool2d", x, _v((1, 4, 4, 8)), (3, 3)))
    # an integer max pool stores integers: no (float) epilogue
    xi = _v((1, 6, 6, 8), "int32", "input")
    assert not _epilogue.hosts(_pool("max_pool2d", xi, _v((1, 4, 4, 8), "int32"), (3, 3)))


def _resample(x, out, mode="linear"):
    return _n("resample2d", [x], out, mode=mode, axes=[1, 2])


def test_resample_takes_an_epilogue_but_leaves_a_doublings_add_to_the_conv():
    x = _v((1, 4, 4, 8), kind="input")
    up, c, y = _v((1, 8, 8, 8)), _v((1, 8, 8, 8)), _v((1, 8, 8, 8))
    out = fuse_epilogue([_resample(x, up), _n("clamp", [up], c, min_value=0.0, max_value=6.0),
                                   _n("relu", [c], y)], {"y": y})
    assert [n.op for n in out] == ["resample2d"]
    assert out[0].attrs["epilogue"] == [{"op": "clamp", "min_value": 0.0, "max_value": 6.0}, {"op": "relu"}]
    # a 2x linear upsampling added to a skip before a pointwise conv: the conv interpolates as it
    # loads (fuse_conv_upsample), the resample does not take the add
    xs, skip = _v((1, 16, 16, 8), kind="input"), _v((1, 32, 32, 8), kind="input")
    up, s, y = _v((1, 32, 32, 8)), _v((1, 32, 32, 8)), _v((1, 32, 32, 8))
    conv = _conv(s, y, k=1, padding=(0, 0, 0, 0))
    out = compiler.run_passes([_resample(xs, up), _n("add", [skip, up], s), conv], {"y": y})
    assert [n.op for n in out] == ["conv2d"] and out[0].attrs.get("input_add_up2")
    skip = _v((1, 8, 8, 8), kind="input")
    # not a doubling (nearest): the resample takes the add
    up, s = _v((1, 8, 8, 8)), _v((1, 8, 8, 8))
    out = fuse_epilogue([_resample(x, up, "nearest-neighbor"), _n("add", [up, skip], s)], {"s": s})
    assert [n.op for n in out] == ["resample2d"] and out[0].attrs["epilogue"] == [{"op": "add", "input": 1}]
    # a doubling with an epilogue is no plain doubling for the conv's interpolation
    assert not _is_linear_doubling(Node("resample2d", [x], [up], {"mode": "linear", "axes": [1, 2],
                                                                             "epilogue": [{"op": "relu"}]}))


def test_sliced_residual_is_read_at_an_offset_and_a_strided_slice_stays():
    x, br = _v((1, 4, 4, 8), kind="input"), _v((1, 5, 4, 32), kind="input")
    s, c, y = _v((1, 4, 4, 16)), _v((1, 4, 4, 16)), _v((1, 4, 4, 16))
    sl = _n("slice", [br], s, starts=[0, 1, 0, 8], strides=[1, 1, 1, 1], alias=False)
    out = compiler.run_passes([sl, _conv(x, c), _n("add", [c, s], y)], {"y": y})
    assert [n.op for n in out] == ["conv2d"] and out[0].inputs[3] is br
    assert out[0].attrs["epilogue"] == [{"op": "add", "input": 3, "pad": [0, -1, 0, -8]}]
    s, c, y = _v((1, 4, 4, 16)), _v((1, 4, 4, 16)), _v((1, 4, 4, 16))
    sl = _n("slice", [br], s, starts=[0, 0, 0, 0], strides=[1, 1, 1, 2], alias=False)
    out = compiler.run_passes([sl, _conv(x, c), _n("add", [c, s], y)], {"y": y})
    assert [n.op for n in out] == ["slice", "conv2d"]


def test_offset_operand_renders_an_unguarded_shifted_load():
    x, br = _v(kind="input"), _v((1, 5, 4, 32), kind="input")
    out = _v((1, 4, 4, 16))
    node = Node("conv2d", [x, _c(0.5, (16, 3, 3, 8)), None, br], [out], {})
    ep = _epilogue.build(node, out, [{"op": "add", "input": 3, "pad": [0, -1, 0, -8]}], chan_axis=3)
    assert "f32(e0[(o / 256u) * 640u + (((o / 64u) % 4u) + 1u) * 128u + ((o / 16u) % 4u) * 32u + (ch + 8u)])" \
        in ep.code


def test_normalizations_take_an_epilogue_read_per_channel():
    x = _v((1, 8, 4, 4), kind="input")
    s, b, n, y = _c(1.0, (8,)), _c(0.0, (8,)), _v((1, 8, 4, 4)), _v((1, 8, 4, 4))
    norm = _n("instance_normalization", [x, s, b], n, axes=[2, 3], param_axes=[1], epsilon=1e-5)
    out = fuse_epilogue([norm, _n("prelu", [n, _c(0.2, (8, 1, 1))], y)], {"y": y})
    assert [o.op for o in out] == ["instance_normalization"] and out[0].inputs[3].shape == (8,)
    assert out[0].attrs["epilogue"] == [{"op": "prelu", "input": 3, "axis": 1}]
    # batch normalization without scale and bias: their slots stay None, the operand goes after
    mu, var, n, y = _c(0.0, (8,)), _c(1.0, (8,)), _v((1, 8, 4, 4)), _v((1, 8, 4, 4))
    bn = _n("batch_normalization", [x, mu, var, None, None], n, axis=1, epsilon=1e-5)
    r = _v((1, 8, 4, 4), kind="input")
    out = fuse_epilogue([bn, _n("add", [n, r], y)], {"y": y})
    assert out[0].inputs[3:] == [None, None, r] and out[0].attrs["epilogue"] == [{"op": "add", "input": 5}]


def _pad_pool_ir(*, producer="relu", beg=(0, 1, 1, 0), end=(0, 1, 2, 0), window=(3, 3), pool="max_pool2d"):
    """x -> producer (NHWC) -> zero pad of H and W -> 3x3 stride-2 pool."""
    from _irb import IR

    ir = IR()
    x = ir.input((1, 7, 6, 4))
    if producer == "conv+relu":
        h = ir.conv(x, ir.filt(4, 1, 4))
        h.producer.attrs["epilogue"] = [{"op": "relu"}]
    else:
        h = ir.op(producer, [x]) if producer else x
    shape = tuple(d + b + e for d, b, e in zip(h.shape, beg, end))
    p = ir.op("pad", [h], shape, beginning_padding=list(beg), ending_padding=list(end), mode="constant", value=0.0)
    oh, ow = (shape[1] - window[0]) // 2 + 1, (shape[2] - window[1]) // 2 + 1
    y = ir.op(pool, [p], (1, oh, ow, 4), window=list(window), padding=[0, 0, 0, 0], strides=[2, 2],
              dilations=[1, 1], layout="nhwc")
    return ir, {"y": y}


@pytest.mark.parametrize("producer", ["relu", "sigmoid"])
def test_zero_pad_of_non_negative_values_before_a_max_pool_is_the_pools_padding(producer):
    from _ireval import checked_rewrite

    ir, outputs = _pad_pool_ir(producer=producer)
    new = checked_rewrite(fold_layout, ir, outputs, rtol=0, atol=0)
    assert [n.op for n in new] == [producer, "max_pool2d"] and new[1].attrs["padding"] == [1, 1, 1, 2]


def test_a_relu_epilogue_makes_the_values_non_negative_too():
    ir, outputs = _pad_pool_ir(producer="conv+relu")
    assert [n.op for n in fold_layout(list(ir.nodes), outputs)] == ["conv2d", "max_pool2d"]


@pytest.mark.parametrize("case", ["maybe negative", "a window in the padding", "average pool", "a graph input"])
def test_pads_before_a_max_pool_that_stay(case):
    kw = {"maybe negative": dict(producer="tanh"), "a window in the padding": dict(beg=(0, 3, 0, 0)),
          "average pool": dict(pool="average_pool2d"), "a graph input": dict(producer="")}[case]
    ir, outputs = _pad_pool_ir(**kw)
    assert [n.op for n in fold_layout(list(ir.nodes), outputs)] == [n.op for n in ir.nodes]


def test_on_the_gpu_a_zero_pad_before_a_max_pool_of_a_relu_is_its_padding(ctx, rng):
    """NHWC conv2d + relu -> zero pad 1 -> 3x3 stride-2 max pool (Keras' ZeroPadding2D before
    MaxPooling2D): float64 NumPy's result without the pad kernel."""
    from helpers import kernel_templates, run_graph

    x = rng.standard_normal((1, 9, 8, 3)).astype(np.float32)
    w = rng.standard_normal((8, 1, 1, 3)).astype(np.float32)

    def build(b, ops):
        h = b.relu(b.conv2d(ops["x"], b.constant(w), input_layout="nhwc", filter_layout="ohwi"))
        p = b.pad(h, [0, 1, 1, 0], [0, 1, 1, 0])
        return {"y": b.max_pool2d(p, window_dimensions=[3, 3], strides=[2, 2], layout="nhwc")}

    h = np.maximum(np.einsum("nhwc,oc->nhwo", x.astype(np.float64), w[:, 0, 0].astype(np.float64)), 0)
    hp = np.pad(h, [(0, 0), (1, 1), (1, 1), (0, 0)])
    want = np.max([hp[:, i:i + 9:2, j:j + 8:2] for i in range(3) for j in range(3)], axis=0)
    np.testing.assert_allclose(run_graph(ctx, build, {"x": x})["y"], want, rtol=1e-5, atol=1e-6)
    assert not any(t.startswith("layout/") for t in kernel_templates(ctx, build, {"x": x}))
