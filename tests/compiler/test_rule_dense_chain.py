"""fuse_dense_chain: one-row dense layers in a row become one ``dense_chain`` node. GPU-free IR
tests (``checked_rewrite`` compares both graphs in float64) of where it fires and the near
misses; GPU checks in tests/ops/test_dense_chain.py."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
from _irb import IR
from _ireval import checked_rewrite

from webnn_gpu.compiler.rules import dense_chain
from webnn_gpu.compiler.rules.dense_chain import fuse_dense_chain

TOL = dict(rtol=1e-9, atol=1e-9)


def _mlp(ir: IR, sizes, *, M=1, gemm=True, act="relu"):
    rng = np.random.default_rng(11)
    v = ir.input((M, sizes[0]))
    for k, n in zip(sizes, sizes[1:]):
        if gemm:
            w, c = ir.const(rng.standard_normal((n, k))), ir.const(rng.standard_normal(n))
            v = ir.op("gemm", [v, w, c], (M, n), alpha=1.0, beta=1.0, a_transpose=False, b_transpose=True,
                      epilogue=[{"op": act}] if act else [])
        else:
            w, c = ir.const(rng.standard_normal((k, n))), ir.const(rng.standard_normal(n))
            v = ir.op("matmul", [v, w, c], (M, n), epilogue=[{"op": "add", "input": 2, "axis": 1}])
    return v


def test_layers_in_a_row_become_one_node():
    for gemm in (True, False):
        ir = IR()
        y = _mlp(ir, [32, 16, 8, 12], gemm=gemm)
        (node,) = checked_rewrite(fuse_dense_chain, ir, {"y": y}, **TOL)
        assert node.op == "dense_chain" and len(node.attrs["layers"]) == 3 and node.outputs == [y]


def test_float16_layers_become_one_node_too():
    ir = IR("float16")
    y = _mlp(ir, [32, 16, 8, 12])
    (node,) = checked_rewrite(fuse_dense_chain, ir, {"y": y}, **TOL)
    assert node.op == "dense_chain" and len(node.attrs["layers"]) == 3
    ir = IR("float16")
    y = _mlp(ir, [8, 16, 8], M=2)  # several rows: not a chain in float16 either
    assert fuse_dense_chain(ir.nodes, {"y": y}) == ir.nodes


def test_a_chain_stops_at_a_large_layer_and_at_the_buffer_limit(monkeypatch):
    ir = IR()
    y = _mlp(ir, [8, 32, 4, 12])
    monkeypatch.setattr(dense_chain, "CHAIN_MAX_WEIGHTS", 8 * 32 - 1)  # the first layer is too large
    new = checked_rewrite(fuse_dense_chain, ir, {"y": y}, **TOL)
    assert [n.op for n in new] == ["gemm", "dense_chain"]
    monkeypatch.setattr(dense_chain, "CHAIN_MAX_WEIGHTS", 16384)
    # x, out and 2 bindings per layer: 6 buffers hold two layers; the third is a chain of one
    new = fuse_dense_chain(ir.nodes, {"y": y}, SimpleNamespace(limits={"max-storage-buffers-per-shader-stage": 6}))
    assert [n.op for n in new] == ["dense_chain", "gemm"]


# ---------------------------------------------------------------- near misses
def test_an_intermediate_read_elsewhere_or_output_ends_the_chain():
    ir = IR()
    y = _mlp(ir, [8, 16, 8, 12])
    mid = ir.nodes[1].outputs[0]
    new = checked_rewrite(fuse_dense_chain, ir, {"y": y, "mid": mid}, **TOL)
    assert [n.op for n in new] == ["dense_chain", "gemm"]
    ir = IR()
    y = _mlp(ir, [8, 16, 8])
    n = ir.op("neg", [ir.nodes[0].outputs[0]])
    assert fuse_dense_chain(ir.nodes, {"y": y, "n": n}) == ir.nodes


def test_several_rows_or_a_computed_weight_keep_the_layers():
    ir = IR()
    y = _mlp(ir, [8, 16, 8], M=2)
    assert fuse_dense_chain(ir.nodes, {"y": y}) == ir.nodes
    ir = IR()
    x = ir.input((1, 8))
    h = ir.op("matmul", [x, ir.input((8, 4))], (1, 4))
    y = ir.op("matmul", [h, ir.const(np.ones((4, 4)))], (1, 4))
    assert fuse_dense_chain(ir.nodes, {"y": y}) == ir.nodes
