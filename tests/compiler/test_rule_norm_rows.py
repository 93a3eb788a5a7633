"""fuse_matmul_layer_norm: a small product and the layer normalization of its rows become one
``matmul_layer_norm`` node. GPU-free IR tests (``checked_rewrite`` compares both graphs in
float64) of where it fires and the near misses; GPU checks in tests/ops/test_matmul_layer_norm.py."""

from __future__ import annotations

import numpy as np
from _irb import IR
from _ireval import checked_rewrite

from webnn_gpu.compiler.rules import norm_rows
from webnn_gpu.compiler.rules.norm_rows import fuse_matmul_layer_norm

TOL = dict(rtol=1e-9, atol=1e-9)


def _block(ir: IR, *, T=6, K=8, N=12, scale=True, bias=True, ln_epilogue=None, axes=None, B=None):
    rng = np.random.default_rng(3)
    x, res = ir.input((1, T, K)), ir.input((1, T, N))
    w = ir.const(rng.standard_normal((K, N)) if B is None else B)
    c = ir.const(rng.standard_normal(N))
    y = ir.op("matmul", [x, w, c, res], (1, T, N),
              epilogue=[{"op": "add", "input": 2, "axis": 2}, {"op": "add", "input": 3}])
    params = [ir.const(rng.standard_normal(N)) if on else None for on in (scale, bias)]
    ax = [2] if axes is None else axes
    extra = {} if ln_epilogue is None else {"epilogue": ln_epilogue}
    z = ir.op("layer_normalization", [y, *params], (1, T, N), axes=ax, param_axes=ax, epsilon=1e-5, **extra)
    return y, z


def test_the_product_and_its_normalization_become_one_node():
    ir = IR()
    y, z = _block(ir)
    new = checked_rewrite(fuse_matmul_layer_norm, ir, {"z": z}, **TOL)
    (node,) = new
    assert node.op == "matmul_layer_norm" and node.outputs == [z] and node.attrs["split"] == 4


def test_float16_becomes_one_node_too():
    """float16 (the kernel computes in float32 and rounds at its stores), the product stored
    too where it is read elsewhere."""
    ir = IR("float16")
    y, z = _block(ir)
    (node,) = checked_rewrite(fuse_matmul_layer_norm, ir, {"z": z}, **TOL)
    assert node.op == "matmul_layer_norm" and node.outputs == [z]
    ir = IR("float16")
    y, z = _block(ir, scale=False)
    (node,) = checked_rewrite(fuse_matmul_layer_norm, ir, {"z": z, "y": y}, **TOL)
    assert node.outputs == [z, y]


def test_without_scale_or_bias_and_with_a_tail():
    ir = IR()
    y, z = _block(ir, scale=False, bias=True, ln_epilogue=[{"op": "relu"}])
    (node,) = checked_rewrite(fuse_matmul_layer_norm, ir, {"z": z}, **TOL)
    assert node.inputs[4] is None and node.attrs["norm"]["epilogue"] == [{"op": "relu"}]


def test_the_size_limits(monkeypatch):
    ir = IR()
    y, z = _block(ir, T=6, K=8, N=12)
    monkeypatch.setattr(norm_rows, "NORM_MAX_MACS", 6 * 8 * 12 - 1)
    assert fuse_matmul_layer_norm(ir.nodes, {"z": z}) == ir.nodes
    monkeypatch.setattr(norm_rows, "NORM_MAX_MACS", 6 * 8 * 12)
    assert [n.op for n in fuse_matmul_layer_norm(ir.nodes, {"z": z})] == ["matmul_layer_norm"]
    monkeypatch.setattr(norm_rows, "NORM_MAX_N", 11)
    assert fuse_matmul_layer_norm(ir.nodes, {"z": z}) == ir.nodes


def test_a_product_read_elsewhere_is_stored_too_in_its_place():
    """A pre-norm block: the sum feeds the normalization and the next residual add (here read
    before the normalization)."""
    ir = IR()
    y, z = _block(ir)
    ln = ir.nodes.pop()
    n = ir.op("neg", [y])
    ir.nodes.append(ln)
    new = checked_rewrite(fuse_matmul_layer_norm, ir, {"z": z, "n": n}, **TOL)
    assert [x.op for x in new] == ["matmul_layer_norm", "neg"] and new[0].outputs == [z, y]
    ir = IR()
    y, z = _block(ir)
    (node,) = checked_rewrite(fuse_matmul_layer_norm, ir, {"z": z, "y": y}, **TOL)
    assert node.outputs == [z, y]


# ---------------------------------------------------------------- near misses
def test_a_stored_product_needs_the_normalizations_operands_before_it():
    ir = IR()
    y, z = _block(ir, scale=False, bias=False)
    ln = ir.nodes.pop()
    n = ir.op("neg", [y])
    late = ir.op("neg", [ir.input((12,))])
    ir.op("layer_normalization", [y, late, None], (1, 6, 12), axes=[2], param_axes=[2], epsilon=1e-5)
    z2 = ir.nodes[-1].outputs[0]
    assert fuse_matmul_layer_norm(ir.nodes, {"z": z2, "n": n}) == ir.nodes


def test_other_axes_or_a_computed_b_keep_both():
    ir = IR()
    y, z = _block(ir, axes=[1, 2])
    assert fuse_matmul_layer_norm(ir.nodes, {"z": z}) == ir.nodes
    ir = IR()
    x, wi = ir.input((1, 6, 8)), ir.input((8, 12))
    y = ir.op("matmul", [x, wi], (1, 6, 12))
    z = ir.op("layer_normalization", [y, None, None], (1, 6, 12), axes=[2], param_axes=[2], epsilon=1e-5)
    assert fuse_matmul_layer_norm(ir.nodes, {"z": z}) == ir.nodes


def test_a_normalization_tail_reading_its_own_input_keeps_both():
    ir = IR()
    y, z = _block(ir, ln_epilogue=[{"op": "add", "input": 0}])
    assert fuse_matmul_layer_norm(ir.nodes, {"z": z}) == ir.nodes


# ---------------------------------------------------------------- softmax
def _head(ir: IR, *, M=1, K=16, N=10, bt=True, axis=None):
    rng = np.random.default_rng(5)
    x = ir.input((M, K))
    w = ir.const(rng.standard_normal((N, K) if bt else (K, N)))
    c = ir.const(rng.standard_normal(N))
    y = ir.op("gemm", [x, w, c], (M, N), alpha=0.5, beta=2.0, a_transpose=False, b_transpose=bt,
              epilogue=[{"op": "relu"}])
    return y, ir.op("softmax", [y], (M, N), axis=1 if axis is None else axis)


def test_a_dense_layer_and_its_softmax_become_one_node():
    from webnn_gpu.compiler.rules.norm_rows import fuse_matmul_softmax

    for bt in (True, False):
        ir = IR()
        y, p = _head(ir, M=3, bt=bt)
        (node,) = checked_rewrite(fuse_matmul_softmax, ir, {"p": p}, **TOL)
        assert node.op == "matmul_softmax" and node.attrs["product_op"] == "gemm" and node.outputs == [p]


def test_softmax_near_misses():
    from webnn_gpu.compiler.rules.norm_rows import fuse_matmul_softmax

    ir = IR()
    y, p = _head(ir, axis=0)  # along the rows
    assert fuse_matmul_softmax(ir.nodes, {"p": p}) == ir.nodes
    ir = IR()
    y, p = _head(ir, K=1024, N=10)  # one row's product past NORM_MAX_ROW_MACS
    assert fuse_matmul_softmax(ir.nodes, {"p": p}) == ir.nodes
    ir = IR()
    y, p = _head(ir, N=65)
    assert fuse_matmul_softmax(ir.nodes, {"p": p}) == ir.nodes
    ir = IR()  # a product read elsewhere: stored too
    y, p = _head(ir)
    (node,) = checked_rewrite(fuse_matmul_softmax, ir, {"p": p, "y": y}, **TOL)
    assert node.outputs == [p, y]


def test_a_float16_dense_layer_and_its_softmax_become_one_node():
    from webnn_gpu.compiler.rules.norm_rows import fuse_matmul_softmax

    ir = IR("float16")
    y, p = _head(ir, M=2)
    (node,) = checked_rewrite(fuse_matmul_softmax, ir, {"p": p}, **TOL)
    assert node.op == "matmul_softmax" and node.outputs == [p]
    ir = IR("float16")
    y, p = _head(ir, N=65)  # the row limits hold in float16 too
    assert fuse_matmul_softmax(ir.nodes, {"p": p}) == ir.nodes
