"""fuse_siblings: convs of the same input by different constant filters become one ``siblings``
node. GPU-free IR tests (``checked_rewrite`` compares both graphs in float64, the ``siblings``
node evaluated as its merged conv split by columns) of where it fires and the near misses; GPU
checks in tests/ops/test_siblings.py."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from _irb import IR
from _ireval import checked_rewrite

from webnn_gpu._ir import Node, Value
from webnn_gpu.fusions.siblings import SIBLINGS_MAX_MACS, SIBLINGS_MAX_N, fuse_siblings
from webnn_gpu.ops import linalg

TOL = dict(rtol=1e-9, atol=1e-9)


def _conv(ir: IR, x, o: int, *, k: int = 1, pad: int = 0, stride: int = 1, seed: int = 0, bias: bool = True,
          steps=(), operands=()):
    """conv2d of NHWC ``x`` by a seeded constant OHWI filter of ``o`` outputs, maybe a bias, then
    epilogue ``steps`` reading ``operands`` (appended after the bias's slot)."""
    rng = np.random.default_rng(seed)
    f = ir.const(rng.standard_normal((o, k, k, x.shape[3])))
    b = ir.const(rng.standard_normal(o)) if bias else None
    y = ir.conv(x, f, pad=pad, stride=stride, bias=b)
    node = ir.nodes[-1]
    if steps:
        node.inputs += [None] * (3 - len(node.inputs)) + list(operands)
        node.attrs["epilogue"] = list(steps)
    return y


def _prelu(ir: IR, o: int, seed: int):
    """A PReLU epilogue step on a per-channel constant slope (operand index 3)."""
    return [{"op": "prelu", "input": 3, "axis": 3}], [ir.const(np.random.default_rng(seed).uniform(0, 1, o))]


def _merged(new) -> Node:
    (node,) = [n for n in new if n.op == "siblings"]
    return node


def test_a_detectors_classifier_and_regressor_become_one_node():
    """face_detection's heads: 2 scores and 32 box values per pixel of a 16x16x88 map, with biases."""
    ir = IR()
    x = ir.input((1, 16, 16, 88))
    ys = [_conv(ir, x, 2, seed=1), _conv(ir, x, 32, seed=2)]
    new = checked_rewrite(fuse_siblings, ir, {"a": ys[0], "b": ys[1]}, **TOL)
    (node,) = new
    assert node.op == "siblings" and node.outputs == ys and node.inputs[0] is x
    assert list(node.attrs.products) == ir.nodes


def test_three_siblings_with_per_channel_steps_and_a_window():
    """Three products with PReLU slopes of their own (concatenated per channel), one without a bias;
    3x3 windows with padding and stride 2 (the implicit GEMM); odd widths 1 + 3 + 5."""
    ir = IR()
    x = ir.input((1, 9, 9, 12))
    ys = []
    for j, o in enumerate((1, 3, 5)):
        steps, ops = _prelu(ir, o, seed=10 + j)
        ys.append(_conv(ir, x, o, k=3, pad=1, stride=2, seed=j, bias=j != 1, steps=steps, operands=ops))
    node = _merged(checked_rewrite(fuse_siblings, ir, {f"y{j}": y for j, y in enumerate(ys)}, **TOL))
    assert node.outputs == ys


def test_float16_and_unary_steps_alike_and_an_op_between():
    ir = IR("float16")
    x = ir.input((1, 6, 6, 16))
    a = _conv(ir, x, 5, seed=1, steps=[{"op": "relu"}])
    r = ir.op("sigmoid", [a])  # between the siblings: the merged node takes the first one's place
    b = _conv(ir, x, 7, seed=2, steps=[{"op": "relu"}])
    new = checked_rewrite(fuse_siblings, ir, {"r": r, "b": b}, **TOL)
    assert [n.op for n in new] == ["siblings", "sigmoid"] and new[0].outputs == [a, b]


def test_a_sibling_output_that_is_also_a_graph_output_and_read_elsewhere():
    ir = IR()
    x = ir.input((1, 8, 8, 24))
    a, b = _conv(ir, x, 6, seed=1), _conv(ir, x, 12, seed=2)
    s = ir.op("add", [a, ir.const(np.ones(6))])
    node = _merged(checked_rewrite(fuse_siblings, ir, {"a": a, "s": s, "b": b}, **TOL))
    assert node.outputs == [a, b]


def test_only_siblings_that_fit_merge_in_graph_order():
    """Width past SIBLINGS_MAX_N: the first products that fit merge, the rest stay."""
    ir = IR()
    x = ir.input((1, 8, 8, 16))
    wide = SIBLINGS_MAX_N // 2
    ys = [_conv(ir, x, wide, seed=1), _conv(ir, x, wide, seed=2), _conv(ir, x, 4, seed=3)]
    new = checked_rewrite(fuse_siblings, ir, {f"y{j}": y for j, y in enumerate(ys)}, **TOL)
    assert [n.op for n in new] == ["siblings", "conv2d"] and new[0].outputs == ys[:2]


def test_the_products_left_over_form_sets_of_their_own():
    """Four products of one input past SIBLINGS_MAX_N together: the first two that fit merge,
    then the other two (a set of one would stay a conv)."""
    ir = IR()
    x = ir.input((1, 8, 8, 16))
    wide = SIBLINGS_MAX_N // 2
    ys = [_conv(ir, x, wide, seed=1), _conv(ir, x, wide, seed=2), _conv(ir, x, wide, seed=3), _conv(ir, x, 4, seed=4)]
    new = checked_rewrite(fuse_siblings, ir, {f"y{j}": y for j, y in enumerate(ys)}, **TOL)
    assert [n.op for n in new] == ["siblings", "siblings"]
    assert new[0].outputs == ys[:2] and new[1].outputs == ys[2:]


# ---------------------------------------------------------------- near misses
def _stays(ir, outputs, context=None, why=""):
    assert fuse_siblings(ir.nodes, outputs, context) == ir.nodes, why


def test_different_inputs_or_views_of_one_input_stay():
    ir = IR()
    x, z = ir.input((1, 8, 8, 16)), ir.input((1, 8, 8, 16))
    _stays(ir, {"a": _conv(ir, x, 4, seed=1), "b": _conv(ir, z, 8, seed=2)}, why="different inputs")
    ir = IR()
    x = ir.input((1, 64, 16))
    v1 = ir.op("reshape", [x], (1, 8, 8, 16))
    v2 = ir.op("reshape", [x], (1, 8, 8, 16))
    _stays(ir, {"a": _conv(ir, v1, 4, seed=1), "b": _conv(ir, v2, 8, seed=2)}, why="one input through two views")


def test_a_sibling_reading_the_others_output_stays():
    """A product whose epilogue adds the other's output (a computed operand) depends on it."""
    ir = IR()
    x = ir.input((1, 8, 8, 16))
    a = _conv(ir, x, 8, seed=1)
    b = _conv(ir, x, 8, seed=2, steps=[{"op": "add", "input": 3}], operands=[a])
    _stays(ir, {"b": b}, why="a residual of the sibling's output")
    ir = IR()
    x = ir.input((1, 8, 8, 16))
    a = _conv(ir, x, 16, seed=1)
    b, c = _conv(ir, a, 8, seed=2), _conv(ir, x, 4, seed=3)  # b reads a: a and c merge, b follows them
    new = checked_rewrite(fuse_siblings, ir, {"b": b, "c": c}, **TOL)
    assert [n.op for n in new] == ["siblings", "conv2d"] and new[0].outputs == [a, c] and new[1].outputs == [b]


@pytest.mark.parametrize("one,other", [(dict(), dict(k=3, pad=1)), (dict(), dict(stride=2)),
                                       (dict(k=3, pad=0), dict(k=3, pad=1)), (dict(k=3), dict(k=3, stride=2))])
def test_different_windows_strides_or_padding_stay(one, other):
    ir = IR()
    x = ir.input((1, 9, 9, 16))
    _stays(ir, {"a": _conv(ir, x, 4, seed=1, **one), "b": _conv(ir, x, 8, seed=2, **other)})


def test_dilations_and_groups_differ_or_nchw_stay():
    for attr, value in (("dilations", [2, 2]), ("groups", 4), ("input_layout", "nchw")):
        ir = IR()
        x = ir.input((1, 9, 9, 16))
        a = _conv(ir, x, 4, k=3, pad=2, seed=1)
        b = _conv(ir, x, 8, k=3, pad=2, seed=2)
        ir.nodes[-1].attrs[attr] = value
        _stays(ir, {"a": a, "b": b}, why=attr)


def test_a_computed_filter_or_step_operand_keeps_that_product_out():
    ir = IR()
    x, w = ir.input((1, 8, 8, 16)), ir.input((4, 1, 1, 16))
    a = _conv(ir, x, 8, seed=1)
    b = ir.conv(x, w)
    c = _conv(ir, x, 12, seed=3)
    new = checked_rewrite(fuse_siblings, ir, {"a": a, "b": b, "c": c}, **TOL)
    assert _merged(new).outputs == [a, c] and any(n.outputs == [b] for n in new)
    ir = IR()
    x, s = ir.input((1, 8, 8, 16)), ir.input((8,))
    a = _conv(ir, x, 8, seed=1, steps=[{"op": "mul", "input": 3, "axis": 3}], operands=[s])
    _stays(ir, {"a": a, "b": _conv(ir, x, 8, seed=2, steps=[{"op": "mul", "input": 3, "axis": 3}],
                                    operands=[ir.const(np.ones(8))])}, why="a computed scale")


def test_a_dtype_mismatch_stays():
    ir = IR()
    x = ir.input((1, 8, 8, 16))
    a, b = _conv(ir, x, 4, seed=1), _conv(ir, x, 8, seed=2)
    node = ir.nodes[-1]
    node.outputs[0] = Value("float16", tuple(b.shape), "op")
    _stays(ir, {"a": a, "b": node.outputs[0]})


def test_different_epilogues_or_another_rules_marks_stay():
    ir = IR()
    x = ir.input((1, 8, 8, 16))
    _stays(ir, {"a": _conv(ir, x, 4, seed=1, steps=[{"op": "relu"}]), "b": _conv(ir, x, 8, seed=2)},
           why="an activation on one only")
    for mark in ({"input_scale": 3}, {"pool_output": "partials"}, {"store_d2s": 2}):
        ir = IR()
        x = ir.input((1, 8, 8, 16))
        a, b = _conv(ir, x, 4, seed=1), _conv(ir, x, 8, seed=2)
        ir.nodes[-1].attrs.update(mark)
        _stays(ir, {"a": a, "b": b}, why=str(mark))
    ir = IR()
    x = ir.input((1, 8, 8, 16))
    a = _conv(ir, x, 8, seed=1, steps=[{"op": "add", "input": 3, "pad": [0, 0, 0, 0]}],
              operands=[ir.const(np.ones((1, 8, 8, 8)))])
    _stays(ir, {"a": a, "b": _conv(ir, x, 8, seed=2)}, why="a same-shaped operand")


#: a lavapipe-like device (subgroups of 8 lanes, the "lane-loop" profile), where matvec.wgsl runs
LAVAPIPE = SimpleNamespace(_subgroup=8, _tuning="lane-loop", limits={"max-storage-buffers-per-shader-stage": 32,
                                                                     "max-texture-dimension-2d": 8192})
#: devices without it: the "default" profile, no subgroups
NO_MATVEC = (None, SimpleNamespace(_subgroup=8, _tuning="default", limits={}),
             SimpleNamespace(_subgroup=0, _tuning="lane-loop", limits={}))


def _merges(ir, outputs, context):
    node = _merged(checked_rewrite(lambda n, o: fuse_siblings(n, o, context), ir, outputs, **TOL))
    assert node.outputs == list(outputs.values())


def test_few_rows_stay_only_where_matvec_takes_them_and_heads_merge_them():
    """Products of a few rows are left to matvec (fuse_heads merges them) only where the device
    runs matvec.wgsl and its plan takes them (linalg.matvec_plan, conv.matvec_conv_plan); else
    they merge here (one tile launch, not one per product). 1x1 convs on 3 pixels of 256
    channels: matvec's on lavapipe only; of 16 channels (a reduction under MATVEC_MIN_K) the tile
    kernel's everywhere. 4 rows of 512 by 250 + 250: matvec's on lavapipe only."""
    ir = IR()
    x = ir.input((1, 1, 3, 256))
    outs = {"a": _conv(ir, x, 32, seed=1), "b": _conv(ir, x, 40, seed=2)}
    _stays(ir, outs, LAVAPIPE, why="3 rows of K 256: matvec's (fuse_heads)")
    for ctx in NO_MATVEC:
        _merges(ir, outs, ctx)
    ir = IR()
    x = ir.input((1, 1, 3, 16))
    outs = {"a": _conv(ir, x, 4, seed=1), "b": _conv(ir, x, 8, seed=2)}
    for ctx in (LAVAPIPE, *NO_MATVEC):
        _merges(ir, outs, ctx)
    ir = IR()
    x = ir.input((4, 1024))
    outs = {"a": _dense(ir, x, 250, seed=1), "b": _dense(ir, x, 250, seed=2)}
    assert 1024 * 250 >= linalg.MATVEC_MIN_KN_TALL
    _stays(ir, outs, LAVAPIPE, why="4 rows of a large B: matvec's (fuse_heads)")
    _merges(ir, outs, NO_MATVEC[1])
    ir = IR()
    x = ir.input((4, 512))
    _merges(ir, {"a": _dense(ir, x, 40, seed=1), "b": _dense(ir, x, 40, seed=2)}, LAVAPIPE)


@pytest.mark.parametrize("C", [128, 126])
def test_windowed_convs_of_few_pixels_stay_siblings(C):
    """3x3 convs with padding 1 on 2x2 pixels (4 rows, K x O = 9 C x 140 >= MATVEC_MIN_KN_TALL):
    with C a multiple of 4 matvec would take each one alone (its windows gathered), but
    fuse_heads does not merge gathered windows, so they are one tile launch here; with C = 126
    matvec takes none. Both on lavapipe and without matvec."""
    for ctx in (LAVAPIPE, *NO_MATVEC):
        ir = IR()
        x = ir.input((1, 2, 2, C))
        assert 9 * C * 140 >= linalg.MATVEC_MIN_KN_TALL
        _merges(ir, {"a": _conv(ir, x, 140, k=3, pad=1, seed=1), "b": _conv(ir, x, 140, k=3, pad=1, seed=2)}, ctx)


def test_the_binding_limit_and_the_switch():
    ir = IR()
    x = ir.input((1, 8, 8, 16))
    outs = {"a": _conv(ir, x, 4, seed=1), "b": _conv(ir, x, 8, seed=2)}
    _stays(ir, outs, SimpleNamespace(limits={"max-storage-buffers-per-shader-stage": 4}), why="5 bindings")
    import os

    os.environ["WEBNN_GPU_FORCE_SIBLINGS"] = "off"
    try:
        _stays(ir, outs, why="WEBNN_GPU_FORCE_SIBLINGS=off")
    finally:
        del os.environ["WEBNN_GPU_FORCE_SIBLINGS"]


# ---------------------------------------------------------------- matmul and gemm
def _dense(ir: IR, x, N: int, *, seed: int, gemm: bool = True, **attrs):
    """A TFLite-style fully connected layer on x's rows (gemm(x, W^T, c), W [N, K]) or a matmul
    by a [K, N] constant."""
    rng = np.random.default_rng(seed)
    K = x.shape[-1]
    if not gemm:
        return ir.op("matmul", [x, ir.const(rng.standard_normal((K, N)))], (*x.shape[:-1], N), **attrs)
    a = dict(alpha=1.0, beta=1.0, a_transpose=False, b_transpose=True)
    a.update(attrs)
    return ir.op("gemm", [x, ir.const(rng.standard_normal((N, K))), ir.const(rng.standard_normal(N))],
                 (*x.shape[:-1], N), **a)


def test_query_key_value_projections_become_one_node():
    """Three dense layers on the same rows (a transformer's projections; a gemm with beta 2, a
    matmul without a bias, one more gemm with a relu), and float16, where the gemm with beta 2
    stays alone (beta * c rounded to float16 on the host could overflow: 2 x 40000 is inf)."""
    for dt in ("float32", "float16"):
        ir = IR(dt)
        x = ir.input((2, 16, 24))
        ys = [_dense(ir, x, 24, seed=1, beta=2.0), _dense(ir, x, 24, seed=2, gemm=False),
              _dense(ir, x, 24, seed=3, b_transpose=False)]
        ir.nodes[2].inputs[1] = ir.const(np.random.default_rng(3).standard_normal((24, 24)))
        node = _merged(checked_rewrite(fuse_siblings, ir, {f"y{j}": y for j, y in enumerate(ys)}, **TOL))
        assert node.outputs == (ys if dt == "float32" else ys[1:])


def test_a_forced_matmul_variant_keeps_dense_layers_apart(monkeypatch):
    """``WEBNN_GPU_FORCE_MATMUL`` naming another kernel than the tile one runs each product on it."""
    for forced, merges in (("naive", False), ("tile", True)):
        monkeypatch.setenv("WEBNN_GPU_FORCE_MATMUL", forced)
        ir = IR()
        x = ir.input((16, 24))
        outs = {"a": _dense(ir, x, 8, seed=1), "b": _dense(ir, x, 12, seed=2, gemm=False)}
        if merges:
            assert _merged(checked_rewrite(fuse_siblings, ir, outs, **TOL)).outputs == list(outs.values())
        else:
            _stays(ir, outs, why=forced)


def test_dense_near_misses_stay():
    ir = IR()
    x = ir.input((196, 384))
    assert 196 * 384 * 768 > SIBLINGS_MAX_MACS
    _stays(ir, {"a": _dense(ir, x, 384, seed=1), "b": _dense(ir, x, 384, seed=2)}, why="large products")
    ir = IR()
    x = ir.input((3, 512))
    _stays(ir, {"a": _dense(ir, x, 64, seed=1), "b": _dense(ir, x, 64, seed=2)}, LAVAPIPE, why="3 rows: fuse_heads'")
    for attrs in (dict(alpha=0.5), dict(a_transpose=True)):
        ir = IR()
        x = ir.input((16, 16))
        _stays(ir, {"a": _dense(ir, x, 8, seed=1), "b": _dense(ir, x, 8, seed=2, **attrs)}, why=str(attrs))
    ir = IR()
    x = ir.input((16, 32))
    a = _dense(ir, x, 8, seed=1)
    b = ir.op("gemm", [x, ir.const(np.ones((8, 32))), ir.const(np.ones((16, 8)))], (16, 8), alpha=1.0, beta=1.0,
              a_transpose=False, b_transpose=True)
    _stays(ir, {"a": a, "b": b}, why="c of [M, N]: a residual, not a bias")
    ir = IR()
    x = ir.input((16, 32))
    _stays(ir, {"a": _dense(ir, x, 8, seed=1), "b": _conv(ir, ir.op("reshape", [x], (1, 4, 4, 32)), 8, seed=2)},
           why="a matmul and a conv of one tensor's views")


def test_matmuls_with_bias_add_steps():
    """A matmul's bias add made an epilogue step (operand 2, broadcast along the last axis, no
    axis key) is a per-channel step, not the kernel's bias: added once."""
    ir = IR()
    x = ir.input((2, 9, 20))
    ys = []
    for j, n in enumerate((3, 10)):
        ys.append(_dense(ir, x, n, seed=j, gemm=False, epilogue=[{"op": "add", "input": 2}, {"op": "relu"}]))
        ir.nodes[-1].inputs.append(ir.const(np.random.default_rng(9 + j).standard_normal((1, n))))
    node = _merged(checked_rewrite(fuse_siblings, ir, {f"y{j}": y for j, y in enumerate(ys)}, **TOL))
    assert node.outputs == ys


def test_gemms_with_c_of_one_row_or_one_value():
    """A gemm's c of [1, N] or [1, 1] (ONNX's broadcast bias) is its bias, times beta."""
    ir = IR()
    x = ir.input((6, 10))
    ys = []
    for j, shape in enumerate(((1, 8), (1, 1))):
        rng = np.random.default_rng(j)
        ys.append(ir.op("gemm", [x, ir.const(rng.standard_normal((10, 8))), ir.const(rng.standard_normal(shape))],
                        (6, 8), alpha=1.0, beta=0.5, a_transpose=False, b_transpose=False))
    node = _merged(checked_rewrite(fuse_siblings, ir, {f"y{j}": y for j, y in enumerate(ys)}, **TOL))
    assert node.outputs == ys
