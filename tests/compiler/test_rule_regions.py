"""The ``nhwc_regions`` rule on hand-made IR (no GPU): where it stores a region NHWC, what it
leaves, and that the rewritten graph computes the same values (a float64 NumPy evaluator of
the IR, run on the graph before and after the rule)."""

from __future__ import annotations

import numpy as np
import pytest
from _ireval import TO_NCHW, TO_NHWC, checked_rewrite
from _irb import IR

from webnn_gpu.compiler.rules.nchw import compose_transposes
from webnn_gpu.compiler.rules.regions import nhwc_regions, plan_regions


def rewrite(ir: IR, outputs: dict):
    """The nodes after the rule, both graphs' outputs checked equal."""
    return checked_rewrite(nhwc_regions, ir, outputs, rtol=1e-12, atol=1e-12)


def kernels(nodes, op="transpose"):
    """``op`` nodes that run a kernel (not views)."""
    return [n for n in nodes if n.op == op and not n.attrs.get("alias")]


def _conv_nchw(ir, x, o, *, k=3, groups=1, stride=1):
    n, c, h, w = x.shape
    f = ir.const(np.linspace(-1, 1, o * (c // groups) * k * k).reshape(o, c // groups, k, k))
    p = k // 2
    return ir.op("conv2d", [x, f], (n, o, (h + 2 * p - k) // stride + 1, (w + 2 * p - k) // stride + 1),
                 padding=[p] * 4, strides=[stride] * 2, dilations=[1, 1], groups=groups, input_layout="nchw",
                 filter_layout="oihw")


# ---------------------------------------------------------------- where it fires
def test_an_exporters_transposes_cancel_around_an_nchw_layer():
    """NHWC input -> transpose -> NCHW depthwise conv -> relu -> transpose back (tf2onnx):
    no transpose is left, the conv is NHWC, the relu reads the conv's NHWC output."""
    ir = IR()
    x = ir.input((1, 6, 5, 8))
    t = ir.op("transpose", [x], (1, 8, 6, 5), permutation=TO_NCHW)
    c = ir.op("relu", [_conv_nchw(ir, t, 8, groups=8)])
    y = ir.op("transpose", [c], (1, 6, 5, 8), permutation=TO_NHWC)
    new = rewrite(ir, {"y": y})
    assert [n.op for n in new] == ["conv2d", "relu", "reshape"]  # (the output is a view of the relu's)
    assert new[0].attrs["input_layout"] == "nhwc" and new[0].inputs[0] is x


def test_a_native_nchw_chain_gets_one_transpose_at_each_end():
    """NCHW input -> depthwise conv -> add a [1, C, 1, 1] constant -> depthwise conv -> output:
    one transpose in, one out, both convs NHWC, the constant re-laid out as [1, 1, 1, C]."""
    ir = IR()
    x = ir.input((1, 8, 6, 5))
    bias = ir.const(np.arange(8.0).reshape(1, 8, 1, 1))
    a = ir.op("add", [_conv_nchw(ir, x, 8, groups=8), bias])
    y = _conv_nchw(ir, a, 8, groups=8, stride=2)
    new = rewrite(ir, {"y": y})
    assert len(kernels(new)) == 2
    convs = [n for n in new if n.op == "conv2d"]
    assert [c.attrs["input_layout"] for c in convs] == ["nhwc", "nhwc"]
    add = next(n for n in new if n.op == "add")
    assert add.inputs[1].shape == (1, 1, 1, 8) and list(add.inputs[1].data) == list(range(8))


@pytest.mark.parametrize("shape", [(), (5,), (6, 5), (8, 1, 1), (8, 6, 1), (1, 8, 1, 5), (1, 8, 6, 5)])
def test_broadcast_constants_of_every_rank_are_re_laid_out(shape):
    """A constant operand of rank 0 to 4 of a binary op in a stored-NHWC region: the same values."""
    ir = IR()
    x = ir.input((1, 6, 5, 8))
    t = ir.op("transpose", [x], (1, 8, 6, 5), permutation=TO_NCHW)
    c = _conv_nchw(ir, t, 8, groups=8)
    data = np.random.default_rng(3).standard_normal(shape) if shape else np.array(0.5)
    m = ir.op("mul", [ir.const(data, shape), c])
    y = ir.op("transpose", [m], (1, 6, 5, 8), permutation=TO_NHWC)
    new = rewrite(ir, {"y": y})
    assert not kernels(new)


@pytest.mark.parametrize("shape,views", [((6, 5), 1), ((8, 6, 1), 0)])
def test_a_broadcast_input_is_viewed_or_transposed(shape, views):
    """A graph input of lower rank as a binary operand: reshaped (a view) where only one of its
    dimensions moves, else transposed (a kernel)."""
    ir = IR()
    x = ir.input((1, 6, 5, 8))
    t = ir.op("transpose", [x], (1, 8, 6, 5), permutation=TO_NCHW)
    m = ir.op("add", [_conv_nchw(ir, t, 8, groups=8), ir.input(shape)])
    y = ir.op("transpose", [m], (1, 6, 5, 8), permutation=TO_NHWC)
    new = rewrite(ir, {"y": y})
    assert len(kernels(new)) == 1 - views


def test_axes_operators_follow_the_stored_order():
    """Pools, reductions with kept axes, softmax, concat, slice, pad, resample and batch
    normalization between an exporter's transposes run on the NHWC values (new axes)."""
    ir = IR()
    x = ir.input((1, 6, 6, 8))
    t = ir.op("transpose", [x], (1, 8, 6, 6), permutation=TO_NCHW)
    c = _conv_nchw(ir, t, 8, groups=8)
    p = ir.op("average_pool2d", [c], (1, 8, 5, 5), window=[2, 2], padding=[0] * 4, strides=[1, 1],
              dilations=[1, 1], layout="nchw")
    m = ir.op("sub", [p, ir.op("reduce_mean", [p], (1, 1, 5, 5), axes=[1], keep=True)])
    s = ir.op("softmax", [m], axis=1)
    cat = ir.op("concat", [s, m], (1, 16, 5, 5), axis=1)
    sl = ir.op("slice", [cat], (1, 12, 4, 5), starts=[0, 2, 1, 0], strides=[1, 1, 1, 1])
    pd = ir.op("pad", [sl], (1, 13, 5, 6), beginning_padding=[0, 1, 0, 1], ending_padding=[0, 0, 1, 0],
               mode="constant", value=0.0)
    up = ir.op("resample2d", [pd], (1, 13, 10, 12), mode="nearest-neighbor", axes=[2, 3])
    bn = ir.op("batch_normalization", [up, ir.const(np.linspace(0, 1, 13)), ir.const(np.linspace(1, 2, 13))],
               (1, 13, 10, 12), axis=1, epsilon=1e-5)
    y = ir.op("transpose", [bn], (1, 10, 12, 13), permutation=TO_NHWC)
    new = rewrite(ir, {"y": y})
    assert not kernels(new)
    ops = {n.op: n for n in new}
    assert ops["average_pool2d"].attrs["layout"] == "nhwc"
    assert ops["reduce_mean"].attrs["axes"] == [3] and ops["softmax"].attrs["axis"] == 3
    assert ops["concat"].attrs["axis"] == 3 and ops["batch_normalization"].attrs["axis"] == 3
    assert ops["slice"].attrs["starts"] == [0, 1, 0, 2] and ops["resample2d"].attrs["axes"] == [1, 2]
    assert ops["pad"].attrs["beginning_padding"] == [0, 0, 1, 1]


def test_a_reshape_equal_to_a_transpose_joins_regions():
    """tf2onnx's squeeze-and-excite: a pooled [1, C, 1, 1] reshaped to [1, 1, 1, C] (a transpose of
    axes of size 1) scales an NHWC value: no transpose, the pooled value NHWC."""
    ir = IR()
    x = ir.input((1, 6, 5, 8))
    t = ir.op("transpose", [x], (1, 8, 6, 5), permutation=TO_NCHW)
    p = ir.op("reduce_mean", [t], (1, 8, 1, 1), axes=[2, 3], keep=True)
    s = ir.op("sigmoid", [_conv_nchw(ir, p, 8, k=1)])
    r = ir.op("reshape", [s], (1, 1, 1, 8))
    y = ir.op("mul", [x, r])
    new = rewrite(ir, {"y": y})
    assert not kernels(new)
    assert next(n for n in new if n.op == "reduce_mean").attrs["axes"] == [1, 2]


# ---------------------------------------------------------------- near misses
def test_not_when_it_adds_kernels():
    """An NCHW pointwise conv between a graph input and a graph output: NHWC would cost two
    transposes and save none; the graph is left as it is."""
    ir = IR()
    x = ir.input((1, 8, 6, 5))
    y = ir.op("relu", [_conv_nchw(ir, x, 8, k=1)])
    assert nhwc_regions(ir.nodes, {"y": y}) is ir.nodes


def test_not_a_region_with_an_nhwc_conv():
    """A region joined by an NHWC conv (through a transpose it cannot cancel) is left NCHW."""
    ir = IR()
    x = ir.input((1, 8, 6, 5))
    a = _conv_nchw(ir, x, 8, groups=8)
    f = ir.const(np.linspace(-1, 1, 25).reshape(5, 1, 1, 5))
    n = ir.op("conv2d", [x, f], (1, 8, 6, 5), padding=[0] * 4, strides=[1, 1], dilations=[1, 1], groups=1,
              input_layout="nhwc", filter_layout="ohwi")  # x read as NHWC: [1, 8, 6, 5] is N, H, W, C
    y = ir.op("add", [a, n])
    plan, permuted = plan_regions(ir.nodes, {"y": y})
    assert plan.group[x.id] not in permuted
    rewrite(ir, {"y": y})


def test_a_graph_output_in_the_middle_is_transposed_back():
    """A value of a stored-NHWC region that is also a graph output: the output keeps its
    NCHW value (one transpose back), the region stays NHWC."""
    ir = IR()
    x = ir.input((1, 6, 5, 8))
    t = ir.op("transpose", [x], (1, 8, 6, 5), permutation=TO_NCHW)
    mid = _conv_nchw(ir, t, 8, groups=8)
    y = ir.op("transpose", [ir.op("relu", [mid])], (1, 6, 5, 8), permutation=TO_NHWC)
    new = rewrite(ir, {"mid": mid, "y": y})
    assert len(kernels(new)) == 1
    back = kernels(new)[0]
    assert back.outputs[0] is mid and back.attrs["permutation"] == TO_NCHW


def test_a_second_reader_outside_the_region():
    """A region value also read by an operator the rule does not rewrite (a reshape that mixes
    axes): it reads the NCHW value through one transpose, the rest stays NHWC."""
    ir = IR()
    x = ir.input((1, 6, 5, 8))
    t = ir.op("transpose", [x], (1, 8, 6, 5), permutation=TO_NCHW)
    mid = _conv_nchw(ir, t, 8, groups=8)
    flat = ir.op("relu", [ir.op("reshape", [mid], (1, 8, 30, 1))])
    y = ir.op("transpose", [ir.op("neg", [mid])], (1, 6, 5, 8), permutation=TO_NHWC)
    new = rewrite(ir, {"flat": flat, "y": y})
    assert len(kernels(new)) == 1
    assert next(n for n in new if n.op == "reshape" and n.outputs[0].shape == (1, 8, 30, 1)).inputs[0] is mid


def test_a_reshape_that_mixes_axes_is_an_edge():
    """NCHW [1, C, H, W] -> [1, C * H, W, 1] is no transpose: the region ends there (and the
    rewritten graph computes the same)."""
    ir = IR()
    x = ir.input((1, 8, 6, 5))
    a = _conv_nchw(ir, _conv_nchw(ir, x, 8, groups=8), 8, groups=8)
    r = ir.op("reshape", [a], (1, 48, 5, 1))
    y = ir.op("relu", [r])
    new = rewrite(ir, {"y": y})
    assert next(n for n in new if n.op == "reshape" and n.outputs[0] is r).inputs[0] is a


def test_a_transpose_by_another_permutation_is_kept_or_composed():
    """A transpose swapping H and W inside an NCHW region becomes the transpose of the stored
    values that computes the same (here swapping their axes 1 and 2)."""
    ir = IR()
    x = ir.input((1, 6, 5, 8))
    t = ir.op("transpose", [x], (1, 8, 6, 5), permutation=TO_NCHW)
    c = _conv_nchw(ir, t, 8, groups=8)
    s = ir.op("transpose", [c], (1, 8, 5, 6), permutation=[0, 1, 3, 2])
    y = ir.op("transpose", [_conv_nchw(ir, s, 8, groups=8)], (1, 5, 6, 8), permutation=TO_NHWC)
    new = rewrite(ir, {"y": y})
    assert [n.attrs["permutation"] for n in kernels(new)] == [[0, 2, 1, 3]]


# ---------------------------------------------------------------- compose_transposes through views
def _compose(ir, outputs):
    return checked_rewrite(compose_transposes, ir, outputs, rtol=0, atol=0)


def test_a_squeeze_between_two_transposes_is_a_view():
    """[1, 1, 40, 12] -> transpose to [1, 12, 1, 40] -> squeeze to [1, 12, 40] -> transpose to
    [1, 40, 12] (an ONNX transformer's input): the elements never move, one view is left."""
    ir = IR()
    x = ir.op("relu", [ir.input((1, 1, 40, 12))])
    t = ir.op("transpose", [x], (1, 12, 1, 40), permutation=TO_NCHW)
    s = ir.op("reshape", [t], (1, 12, 40))
    y = ir.op("transpose", [s], (1, 40, 12), permutation=[0, 2, 1])
    new = _compose(ir, {"y": y})
    assert [n.op for n in new] == ["relu", "reshape"] and new[1].inputs[0] is x


@pytest.mark.parametrize("case", ["moves", "second reader", "mixes"])
def test_chains_that_move_elements_or_are_read_elsewhere(case):
    """Near misses: a chain whose net effect moves elements keeps a transpose kernel; an
    intermediate value read elsewhere is kept for that reader; a reshape that merges two axes
    of size above 1 ends the chain."""
    ir = IR()
    x = ir.op("relu", [ir.input((1, 2, 40, 12))])
    t = ir.op("transpose", [x], (1, 12, 2, 40), permutation=TO_NCHW)
    if case == "mixes":
        s = ir.op("reshape", [t], (1, 24, 40))
        y = ir.op("transpose", [s], (1, 40, 24), permutation=[0, 2, 1])
    else:
        s = ir.op("reshape", [t], (1, 12, 2, 40, 1))
        y = ir.op("transpose", [s], (1, 2, 40, 12, 1) if case == "second reader" else (1, 40, 2, 12, 1),
                  permutation=[0, 2, 3, 1, 4] if case == "second reader" else [0, 3, 2, 1, 4])
    outputs = {"y": y, "t": ir.op("neg", [t])} if case == "second reader" else {"y": y}
    new = _compose(ir, outputs)
    if case == "second reader":
        assert [n.op for n in new] == ["relu", "transpose", "reshape", "neg"]  # y: a view of x; t stays
    else:
        assert kernels(new), [n.op for n in new]


def test_a_graph_input_read_inside_and_outside_the_region():
    """An NCHW graph input read by a stored-NHWC region and by an edge (a reshape that mixes
    axes) and returned as an output: the edge and the output read the input itself."""
    ir = IR()
    x = ir.input((1, 8, 6, 5))
    a = _conv_nchw(ir, _conv_nchw(ir, x, 8, groups=8), 8, groups=8, stride=2)
    flat = ir.op("relu", [ir.op("reshape", [x], (1, 48, 5, 1))])
    new = rewrite(ir, {"a": a, "flat": flat, "x": x})
    assert all(v is not x for n in new for v in n.outputs)
    assert len(kernels(new)) == 2  # x in, a out
