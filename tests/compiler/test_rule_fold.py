"""Constant folding on hand-made IR (no GPU): what is evaluated, what is left alone."""

from __future__ import annotations

import numpy as np

from webnn_gpu.compiler.rules import fold as _fold
from webnn_gpu._ir import Node, Value


def _c(arr, dt=None):
    arr = np.asarray(arr)
    dt = dt or {"float32": "float32", "float16": "float16", "int32": "int32", "uint8": "uint8",
                "int8": "int8", "int64": "int64"}[str(arr.dtype)]
    return Value(dt, tuple(arr.shape), "constant", data=arr.reshape(-1).copy())


def _v(shape, dt="float32", kind="op"):
    return Value(dt, tuple(shape), kind)


def _n(op, ins, out, **attrs):
    return Node(op, ins, [out], attrs)


def _const_inputs(nodes):
    return [v for n in nodes for v in n.inputs if v is not None and v.kind == "constant"]


def test_cast_of_float16_weights_becomes_a_float32_constant():
    w16 = np.array([[0.1, -2.5], [3.0, 65504.0]], np.float16)
    w = _c(w16)
    wf, x, y = _v((2, 2)), _v((2, 2), kind="input"), _v((2, 2))
    nodes = [_n("cast", [w], wf, to="float32"), _n("add", [x, wf], y)]
    out = _fold.fold_constants(nodes, {"y": y})
    assert [n.op for n in out] == ["add"]
    folded = out[0].inputs[1]
    assert folded.kind == "constant" and folded.data_type == "float32" and folded.shape == (2, 2)
    np.testing.assert_array_equal(folded.data.reshape(2, 2), w16.astype(np.float32))
    assert nodes[1].inputs[1] is wf, "the original node is not mutated"


def test_chain_of_movement_and_arithmetic_folds_through():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.float32(0.5)
    ca, cb = _c(a), _c(np.array(b))
    t, r, s, x, y = _v((3, 2)), _v((6,)), _v((6,)), _v((6,), kind="input"), _v((6,))
    nodes = [_n("transpose", [ca], t, permutation=[1, 0]), _n("reshape", [t], r, alias=True),
             _n("mul", [r, cb], s), _n("sub", [x, s], y)]
    out = _fold.fold_constants(nodes, {"y": y})
    assert [n.op for n in out] == ["sub"]
    np.testing.assert_array_equal(out[0].inputs[1].data, (a.T.reshape(-1) * b).astype(np.float32))


def test_float16_arithmetic_is_rounded_to_float16():
    a, b = np.array([1.0, 2049.0], np.float16), np.array([2.0 ** -11, 1.0], np.float16)
    s, x, y = _v((2,), "float16"), _v((2,), "float16", "input"), _v((2,), "float16")
    nodes = [_n("add", [_c(a), _c(b)], s), _n("mul", [x, s], y)]
    out = _fold.fold_constants(nodes, {"y": y})
    got = out[0].inputs[1].data
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, (a + b).astype(np.float16))


def test_slice_expand_concat_reverse_clamp():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    sl, ex, cc, rv, cl = _v((1, 2, 2)), _v((2, 2, 2)), _v((3, 2, 2)), _v((3, 2, 2)), _v((3, 2, 2))
    x, y = _v((3, 2, 2), kind="input"), _v((3, 2, 2))
    nodes = [_n("slice", [_c(a)], sl, starts=[1, 0, 1], strides=[1, 2, 2], alias=False),
             _n("expand", [sl], ex, alias=False),
             _n("concat", [sl, ex], cc, axis=0, alias=False),
             _n("reverse", [cc], rv, axes=[1]),
             _n("clamp", [rv], cl, min_value=5.0, max_value=20.0),
             _n("add", [x, cl], y)]
    out = _fold.fold_constants(nodes, {"y": y})
    assert [n.op for n in out] == ["add"]
    s = a[1:2, 0:3:2, 1:4:2]
    want = np.clip(np.flip(np.concatenate([s, np.broadcast_to(s, (2, 2, 2))], 0), 1), 5, 20)
    np.testing.assert_array_equal(out[0].inputs[1].data.reshape(3, 2, 2), want)


def test_not_folded_inexact_or_unsafe():
    x, y = _v((2,), kind="input"), _v((2,))
    cases = [
        ("exp", [_c(np.ones(2, np.float32))], {}),  # transcendental: NumPy's and the GPU's may differ
        ("cast", [_c(np.ones(2, np.float32))], {"to": "float16"}),  # a rounding cast
        ("cast", [_c(np.ones(2, np.int32))], {"to": "float32"}),  # not exact past 2**24
        ("div", [_c(np.ones(2, np.int32)), _c(np.zeros(2, np.int32))], {}),  # integer division semantics
        ("max", [_c(np.array([np.nan, 1], np.float32)), _c(np.ones(2, np.float32))], {}),  # NaN
    ]
    for op, ins, attrs in cases:
        dt = "float16" if attrs.get("to") == "float16" else ("float32" if op == "cast" else ins[0].data_type)
        v = _v((2,), dt)
        xx = _v((2,), dt, "input")
        nodes = [_n(op, ins, v, **attrs), _n("add", [xx, v], _v((2,), dt))]
        out = _fold.fold_constants(nodes, {"y": nodes[1].outputs[0]})
        assert [n.op for n in out] == [op, "add"], op
    del x, y


def test_graph_output_and_input_dependent_nodes_stay():
    c = _c(np.ones((2,), np.float32))
    x = _v((2,), kind="input")
    a, b = _v((2,)), _v((2,))
    nodes = [_n("neg", [c], a), _n("add", [x, c], b)]
    out = _fold.fold_constants(nodes, {"a": a, "b": b})
    assert [n.op for n in out] == ["neg", "add"]


def test_expand_that_would_blow_up_the_upload_is_not_folded():
    c = _c(np.ones((1,), np.float32))
    big = (_fold.FOLD_GROWTH_BYTES // 4) * 2
    e, x, y = _v((big,)), _v((big,), kind="input"), _v((big,))
    nodes = [_n("expand", [c], e, alias=False), _n("add", [x, e], y)]
    out = _fold.fold_constants(nodes, {"y": y})
    assert [n.op for n in out] == ["expand", "add"]
