"""fold_matmul_views: a small matmul reads transposed operands and stores a permuted output in
place. GPU-free IR tests (``checked_rewrite`` compares both graphs in float64) of where it fires
and of the near misses it must leave; the GPU checks are in tests/ops/test_matmul_views.py."""

from __future__ import annotations

from _irb import IR
from _ireval import checked_rewrite

from webnn_gpu.compiler.rules import views
from webnn_gpu.compiler.rules.views import fold_matmul_views

TOL = dict(rtol=1e-12, atol=1e-12)


def _heads(ir: IR, T=6, H=2, D=4):
    """q [1, H, T, D] and a key projection [T, H * D] split into heads as Keras does:
    reshape to [1, T, H, D], transpose to [1, H, D, T]."""
    q = ir.input((1, H, T, D))
    kp = ir.op("neg", [ir.input((T, H * D))])
    k4 = ir.op("reshape", [kp], (1, T, H, D), alias=True)
    kt = ir.op("transpose", [k4], (1, H, D, T), permutation=[0, 2, 3, 1], alias=False)
    return q, k4, kt


def test_a_transposed_key_is_read_through_strides():
    ir = IR()
    q, k4, kt = _heads(ir)
    s = ir.op("matmul", [q, kt], (1, 2, 6, 6))
    new = checked_rewrite(fold_matmul_views, ir, {"s": s}, **TOL)
    assert [n.op for n in new] == ["neg", "reshape", "matmul"]
    mm = new[-1]
    assert mm.inputs[1] is k4 and mm.attrs["b_view"] == ((1, 2, 4, 6), (48, 4, 1, 8))
    assert "a_view" not in mm.attrs and "out_view" not in mm.attrs


def test_a_transposed_first_operand_any_permutation():
    ir = IR()
    x = ir.op("neg", [ir.input((5, 2, 3))])
    xt = ir.op("transpose", [x], (2, 3, 5), permutation=[1, 2, 0], alias=False)
    y = ir.op("matmul", [xt, ir.input((2, 5, 4))], (2, 3, 4))
    new = checked_rewrite(fold_matmul_views, ir, {"y": y}, **TOL)
    assert [n.op for n in new] == ["neg", "matmul"] and new[-1].attrs["a_view"] == ((2, 3, 5), (3, 1, 6))


def test_the_context_is_stored_with_its_heads_merged():
    """[1, H, T, D] -> (an identity reshape) -> transpose [0, 2, 1, 3] -> [1, T, H, D]."""
    ir = IR()
    p, v = ir.input((1, 2, 6, 6)), ir.input((1, 2, 6, 4))
    o = ir.op("matmul", [p, v], (1, 2, 6, 4))
    r = ir.op("reshape", [o], (1, 2, 6, 4), alias=True)
    t = ir.op("transpose", [r], (1, 6, 2, 4), permutation=[0, 2, 1, 3], alias=False)
    y = ir.op("reshape", [t], (1, 6, 8), alias=True)
    new = checked_rewrite(fold_matmul_views, ir, {"y": y}, **TOL)
    assert [n.op for n in new] == ["matmul", "reshape"]
    mm = new[0]
    assert mm.outputs == [t] and mm.attrs["out_view"] == (0, 4, 8, 1)


def test_reshapes_that_drop_size_one_dimensions_are_followed_to_the_transpose():
    ir = IR()
    o = ir.op("matmul", [ir.input((3, 5, 6)), ir.input((3, 6, 4))], (3, 5, 4))
    r = ir.op("reshape", [o], (1, 3, 5, 1, 4), alias=True)
    t = ir.op("transpose", [r], (1, 5, 1, 3, 4), permutation=[0, 2, 3, 1, 4], alias=False)
    new = checked_rewrite(fold_matmul_views, ir, {"t": t}, **TOL)
    assert [n.op for n in new] == ["matmul"] and new[0].attrs["out_view"] == (4, 12, 1)


def test_one_matmul_reads_and_stores_in_place():
    ir = IR()
    q, k4, kt = _heads(ir)
    s = ir.op("matmul", [q, kt], (1, 2, 6, 6))
    t = ir.op("transpose", [s], (1, 6, 2, 6), permutation=[0, 2, 1, 3], alias=False)
    new = checked_rewrite(fold_matmul_views, ir, {"t": t}, **TOL)
    assert [n.op for n in new] == ["neg", "reshape", "matmul"]
    assert {"b_view", "out_view"} <= set(new[-1].attrs)


# ---------------------------------------------------------------- near misses
def test_a_transpose_with_a_second_reader_or_a_graph_output_stays():
    ir = IR()
    q, k4, kt = _heads(ir)
    s = ir.op("matmul", [q, kt], (1, 2, 6, 6))
    other = ir.op("neg", [kt])
    assert fold_matmul_views(ir.nodes, {"s": s, "o": other}) == ir.nodes
    ir = IR()
    q, k4, kt = _heads(ir)
    s = ir.op("matmul", [q, kt], (1, 2, 6, 6))
    assert fold_matmul_views(ir.nodes, {"s": s, "kt": kt}) == ir.nodes


def test_a_large_product_keeps_its_transposed_operand(monkeypatch):
    ir = IR()
    q, k4, kt = _heads(ir)
    s = ir.op("matmul", [q, kt], (1, 2, 6, 6))
    monkeypatch.setattr(views, "VIEW_MAX_MACS", 2 * 6 * 6 * 4 - 1)
    assert fold_matmul_views(ir.nodes, {"s": s}) == ir.nodes
    monkeypatch.setattr(views, "VIEW_MAX_MACS", 2 * 6 * 6 * 4)
    assert [n.op for n in fold_matmul_views(ir.nodes, {"s": s})] == ["neg", "reshape", "matmul"]


def test_output_transposes_that_cannot_be_stored_in_place_stay():
    # the columns move: not contiguous stores
    ir = IR()
    o = ir.op("matmul", [ir.input((2, 5, 6)), ir.input((2, 6, 4))], (2, 5, 4))
    t = ir.op("transpose", [o], (2, 4, 5), permutation=[0, 2, 1], alias=False)
    assert fold_matmul_views(ir.nodes, {"t": t}) == ir.nodes
    # a reshape that splits a dimension in between
    ir = IR()
    o = ir.op("matmul", [ir.input((2, 6, 6)), ir.input((2, 6, 8))], (2, 6, 8))
    r = ir.op("reshape", [o], (2, 6, 2, 4), alias=True)
    t = ir.op("transpose", [r], (2, 2, 6, 4), permutation=[0, 2, 1, 3], alias=False)
    assert fold_matmul_views(ir.nodes, {"t": t}) == ir.nodes
    # the product (or the reshape on the way) is a graph output, or has a second reader
    ir = IR()
    o = ir.op("matmul", [ir.input((2, 5, 6)), ir.input((2, 6, 4))], (2, 5, 4))
    r = ir.op("reshape", [o], (2, 5, 4), alias=True)
    t = ir.op("transpose", [r], (5, 2, 4), permutation=[1, 0, 2], alias=False)
    assert fold_matmul_views(ir.nodes, {"t": t, "r": r}) == ir.nodes
    assert fold_matmul_views(ir.nodes, {"t": t, "o": o}) == ir.nodes
    ir2 = IR()
    o = ir2.op("matmul", [ir2.input((2, 5, 6)), ir2.input((2, 6, 4))], (2, 5, 4))
    t = ir2.op("transpose", [o], (5, 2, 4), permutation=[1, 0, 2], alias=False)
    n = ir2.op("neg", [o])
    assert fold_matmul_views(ir2.nodes, {"t": t, "n": n}) == ir2.nodes


def test_a_matmul_with_an_epilogue_or_one_operand_twice_is_left():
    ir = IR()
    x = ir.op("neg", [ir.input((4, 4))])
    xt = ir.op("transpose", [x], (4, 4), permutation=[1, 0], alias=False)
    y = ir.op("matmul", [xt, xt], (4, 4))
    assert fold_matmul_views(ir.nodes, {"y": y}) == ir.nodes
    ir = IR()
    q, k4, kt = _heads(ir)
    s = ir.op("matmul", [q, kt], (1, 2, 6, 6), epilogue=[{"op": "relu"}])
    assert fold_matmul_views(ir.nodes, {"s": s}) == ir.nodes
