"""Compiler passes on hand-made IR (no GPU): dead code, element-wise fusion rules."""

from __future__ import annotations

from webnn_gpu.compiler.rules import elementwise as _ew
from webnn_gpu.compiler.rules.cleanup import dead_code
from webnn_gpu._ir import Node, Value


def _v(shape=(4,), dt="float32", kind="op"):
    return Value(dt, tuple(shape), kind)


def _n(op, ins, out, **attrs):
    return Node(op, ins, [out], attrs)


def test_dead_code_keeps_only_what_outputs_need():
    x = _v(kind="input")
    a, b, c = _v(), _v(), _v()
    n1, n2, n3 = _n("relu", [x], a), _n("exp", [x], b), _n("neg", [a], c)
    assert dead_code([n1, n2, n3], {"c": c}) == [n1, n3]


def test_chain_fuses_into_one_node_in_order():
    x = _v(kind="input")
    a, b, c = _v(), _v(), _v()
    nodes = [_n("relu", [x], a), _n("exp", [a], b), _n("neg", [b], c)]
    out = _ew.fuse_elementwise(nodes, {"c": c})
    assert len(out) == 1 and out[0].op == "fused_elementwise"
    prog = out[0].attrs["program"]
    assert [s.op for s, _ in prog] == ["relu", "exp", "neg"]
    assert prog[1][1] == [("step", 0)] and prog[0][1] == [("in", 0)]
    assert out[0].inputs == [x]


def test_value_with_two_consumers_or_an_output_is_not_inlined():
    x = _v(kind="input")
    a, b, c = _v(), _v(), _v()
    nodes = [_n("relu", [x], a), _n("exp", [a], b), _n("neg", [a], c)]
    out = _ew.fuse_elementwise(nodes, {"b": b, "c": c})
    assert [n.op for n in out] == ["relu", "exp", "neg"]
    a2, b2 = _v(), _v()
    nodes = [_n("relu", [x], a2), _n("exp", [a2], b2)]
    out = _ew.fuse_elementwise(nodes, {"a": a2, "b": b2})
    assert [n.op for n in out] == ["relu", "exp"]


def test_same_value_twice_in_one_consumer_is_inlined_once():
    x = _v(kind="input")
    a, b = _v(), _v()
    nodes = [_n("relu", [x], a), _n("mul", [a, a], b)]
    out = _ew.fuse_elementwise(nodes, {"b": b})
    assert len(out) == 1
    prog = out[0].attrs["program"]
    assert len(prog) == 2 and prog[1][1] == [("step", 0), ("step", 0)]


def test_broadcast_producer_is_not_inlined():
    x = _v((1, 4), kind="input")
    y = _v((3, 4), kind="input")
    a, b = _v((1, 4)), _v((3, 4))
    nodes = [_n("relu", [x], a), _n("add", [a, y], b)]
    out = _ew.fuse_elementwise(nodes, {"b": b})
    assert [n.op for n in out] == ["relu", "add"]


def test_non_elementwise_node_breaks_the_chain():
    x = _v(kind="input")
    a, b, c = _v(), _v(), _v()
    nodes = [_n("relu", [x], a), _n("transpose", [a], b, permutation=[0]), _n("exp", [b], c)]
    out = _ew.fuse_elementwise(nodes, {"c": c})
    assert [n.op for n in out] == ["relu", "transpose", "exp"]


def test_too_many_inputs_stay_unfused():
    ins = [_v(kind="input") for _ in range(10)]
    acc = ins[0]
    nodes = []
    for v in ins[1:]:
        out = _v()
        nodes.append(_n("add", [acc, v], out))
        acc = out
    fused = _ew.fuse_elementwise(nodes, {"y": acc})
    assert all(len(n.inputs) <= _ew.MAX_FUSED_INPUTS for n in fused)
    assert len(fused) >= 2


def test_where_of_32_and_16_bit_values_is_a_step():
    """where(greater(x, c), x, softplus(x)) (the dynamo exporter's softplus): one fused node;
    a where of int64 or uint8 values (a raw select) and a where read twice stay as they are."""
    for dt, fused in (("float32", True), ("float16", True), ("int32", True), ("int64", False), ("uint8", False)):
        x, c = _v(dt=dt, kind="input"), _v(dt=dt, kind="constant")
        m, s, y = _v(dt="uint8"), _v(dt=dt), _v(dt=dt)
        nodes = [_n("greater", [x, c], m), _n("abs", [x], s), _n("where", [m, x, s], y)]
        out = _ew.fuse_elementwise(nodes, {"y": y})
        if fused:
            assert [n.op for n in out] == ["fused_elementwise"], dt
            assert [st.op for st, _ in out[0].attrs["program"]] == ["greater", "abs", "where"]
        else:
            assert [n.op for n in out] == ["greater", "abs", "where"], dt
    x = _v(kind="input")
    m, y, z = _v(dt="uint8"), _v(), _v()
    nodes = [_n("is_nan", [x], m), _n("where", [m, x, x], y), _n("relu", [y], z)]
    out = _ew.fuse_elementwise(nodes, {"y": y, "z": z})  # y is an output: relu does not inline it
    assert [n.op for n in out] == ["fused_elementwise", "relu"]
