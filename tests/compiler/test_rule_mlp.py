"""fuse_mlp: two products in a row become one ``mlp`` node. GPU-free IR tests (``checked_rewrite``
compares both graphs in float64) of where it fires and the near misses; GPU checks in
tests/ops/test_mlp.py."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
from _irb import IR
from _ireval import checked_rewrite

from webnn_gpu.fusions.mlp import fuse_mlp

TOL = dict(rtol=1e-9, atol=1e-9)
#: a lavapipe-like device: subgroups of 8 lanes, the "lane-loop" profile, 32 KiB of workgroup memory
LAVAPIPE = SimpleNamespace(_subgroup=8, _tuning="lane-loop", limits={"max-compute-workgroup-storage-size": 32768,
                                                                     "max-storage-buffers-per-shader-stage": 32})


def fuse_mlp_on_lavapipe(nodes, outputs):
    return fuse_mlp(nodes, outputs, LAVAPIPE)


def _pair(ir: IR, M=128, K=16, H=32, N=8, *, act="relu", residual=False, w2=None):
    rng = np.random.default_rng(3)
    x = ir.input((M, K))
    h = ir.op("matmul", [x, ir.const(rng.standard_normal((K, H))), ir.const(rng.standard_normal(H))], (M, H),
              epilogue=[{"op": "add", "input": 2, "axis": 1}, {"op": act}])
    ops = [h, w2 if w2 is not None else ir.const(rng.standard_normal((H, N))), ir.const(rng.standard_normal(N))]
    steps = [{"op": "add", "input": 2, "axis": 1}]
    if residual:
        ops.append(ir.input((M, N)))
        steps.append({"op": "add", "input": 3})
    return x, h, ir.op("matmul", ops, (M, N), epilogue=steps)


def test_a_feed_forward_block_becomes_one_node():
    ir = IR()
    _, h, y = _pair(ir, residual=True)
    (node,) = checked_rewrite(fuse_mlp_on_lavapipe, ir, {"y": y}, **TOL)
    assert node.op == "mlp" and node.outputs == [y] and not node.attrs.keep
    assert node.attrs.first is ir.nodes[0] and node.attrs.second is ir.nodes[1]


def test_gemm_layers_and_float16():
    for dt in ("float32", "float16"):
        ir = IR(dt)
        rng = np.random.default_rng(4)
        x = ir.input((64, 8))
        h = ir.op("gemm", [x, ir.const(rng.standard_normal((24, 8))), ir.const(rng.standard_normal(24))], (64, 24),
                  alpha=0.5, beta=1.0, a_transpose=False, b_transpose=True, epilogue=[{"op": "gelu"}])
        y = ir.op("gemm", [h, ir.const(rng.standard_normal((24, 4)))], (64, 4), alpha=1.0, beta=1.0,
                  a_transpose=False, b_transpose=False)
        (node,) = fuse_mlp(ir.nodes, {"y": y}, LAVAPIPE)
        assert node.op == "mlp" and node.outputs == [y]


def test_pointwise_convs_with_an_intermediate_read_elsewhere_store_it_too():
    # expansion (+ bias, prelu) read by the projection and by a later add: one node, two outputs,
    # in the expansion's place
    ir = IR()
    rng = np.random.default_rng(5)
    x = ir.input((1, 8, 8, 16))
    h = ir.conv(x, ir.const(rng.standard_normal((32, 1, 1, 16))), bias=ir.const(rng.standard_normal(32)))
    ir.nodes[-1].attrs["epilogue"] = [{"op": "add", "input": 2, "axis": 3}, {"op": "prelu", "input": 3, "axis": 3}]
    ir.nodes[-1].inputs.append(ir.const(rng.random(32)))
    y = ir.conv(h, ir.const(rng.standard_normal((16, 1, 1, 32))))
    z = ir.op("add", [h, ir.const(np.ones(32))])
    new = checked_rewrite(fuse_mlp_on_lavapipe, ir, {"y": y, "z": z}, **TOL)
    assert [n.op for n in new] == ["mlp", "add"]
    assert new[0].outputs == [y, h] and new[0].attrs.keep
    new = checked_rewrite(fuse_mlp_on_lavapipe, ir, {"y": y, "h": h}, **TOL)  # h a graph output
    assert new[0].op == "mlp" and new[0].outputs == [y, h]


# ---------------------------------------------------------------- near misses
def test_an_intermediate_read_by_two_products_or_through_another_op_stays():
    ir = IR()
    _, h, y = _pair(ir)
    y2 = ir.op("matmul", [h, ir.const(np.ones((32, 8)))], (128, 8))
    assert fuse_mlp(ir.nodes, {"y": y, "y2": y2}, LAVAPIPE) == ir.nodes
    ir = IR()
    x = ir.input((128, 16))
    h = ir.op("matmul", [x, ir.const(np.ones((16, 32)))], (128, 32))
    s = ir.op("softmax", [h], (128, 32), axis=1)  # no epilogue step: stays between the products
    y = ir.op("matmul", [s, ir.const(np.ones((32, 8)))], (128, 8))
    assert fuse_mlp(ir.nodes, {"y": y}, LAVAPIPE) == ir.nodes


def test_computed_weights_and_an_epilogue_reading_the_intermediate_stay():
    ir = IR()
    _, _, y = _pair(ir, w2=ir.input((32, 8)))
    assert fuse_mlp(ir.nodes, {"y": y}, LAVAPIPE) == ir.nodes
    ir = IR()
    x = ir.input((128, 16))
    h = ir.op("matmul", [x, ir.const(np.ones((16, 16)))], (128, 16))
    y = ir.op("matmul", [h, ir.const(np.ones((16, 16))), h], (128, 16), epilogue=[{"op": "add", "input": 2}])
    assert fuse_mlp(ir.nodes, {"y": y}, LAVAPIPE) == ir.nodes


def test_operands_computed_after_a_kept_intermediate_stay():
    # the second product's residual is computed after the first product, which is read elsewhere:
    # the node could stand in neither place
    ir = IR()
    rng = np.random.default_rng(6)
    x = ir.input((128, 16))
    h = ir.op("matmul", [x, ir.const(rng.standard_normal((16, 32)))], (128, 32))
    r = ir.op("neg", [ir.input((128, 8))])
    y = ir.op("matmul", [h, ir.const(rng.standard_normal((32, 8))), r], (128, 8), epilogue=[{"op": "add", "input": 2}])
    z = ir.op("neg", [h])
    assert fuse_mlp(ir.nodes, {"y": y, "z": z}, LAVAPIPE) == ir.nodes
    ir2 = IR()  # without the other reader the node takes the second product's place
    x = ir2.input((128, 16))
    h = ir2.op("matmul", [x, ir2.const(rng.standard_normal((16, 32)))], (128, 32))
    r = ir2.op("neg", [ir2.input((128, 8))])
    y = ir2.op("matmul", [h, ir2.const(rng.standard_normal((32, 8))), r], (128, 8),
               epilogue=[{"op": "add", "input": 2}])
    new = checked_rewrite(fuse_mlp_on_lavapipe, ir2, {"y": y}, **TOL)
    assert [n.op for n in new] == ["neg", "mlp"]


def test_too_wide_a_hidden_layer_too_few_rows_or_unaligned_sizes_stay():
    ir = IR()
    _, _, y = _pair(ir, M=128, H=2048)  # 8 lanes x 2048 float32 hidden values: past 32 KiB
    assert fuse_mlp(ir.nodes, {"y": y}, LAVAPIPE) == ir.nodes
    for K, H in ((16, 192), (160, 128)):  # past MLP_MAX_H, past MLP_MAX_WEIGHTS
        ir = IR()
        _, _, y = _pair(ir, M=128, K=K, H=H)
        assert fuse_mlp(ir.nodes, {"y": y}, LAVAPIPE) == ir.nodes
    ir = IR()
    _, _, y = _pair(ir, M=32, H=256)  # two rows per invocation: the two tile launches are faster
    assert fuse_mlp(ir.nodes, {"y": y}, LAVAPIPE) == ir.nodes
    ir = IR()
    _, _, y = _pair(ir, M=128, H=30)  # H not a multiple of 4
    assert fuse_mlp(ir.nodes, {"y": y}, LAVAPIPE) == ir.nodes


def test_convs_that_are_not_pointwise_nhwc_stay():
    ir = IR()
    rng = np.random.default_rng(8)
    x = ir.input((1, 10, 10, 16))
    h = ir.conv(x, ir.const(rng.standard_normal((32, 3, 3, 16))))  # 3x3
    y = ir.conv(h, ir.const(rng.standard_normal((16, 1, 1, 32))))
    assert fuse_mlp(ir.nodes, {"y": y}, LAVAPIPE) == ir.nodes


def test_devices_without_the_subgroup_variant_keep_the_products():
    ir = IR()
    _, _, y = _pair(ir)
    assert fuse_mlp(ir.nodes, {"y": y}) == ir.nodes
    other = SimpleNamespace(_subgroup=0, _tuning="default", limits={})
    assert fuse_mlp(ir.nodes, {"y": y}, other) == ir.nodes
    few = SimpleNamespace(_subgroup=8, _tuning="lane-loop", limits={"max-storage-buffers-per-shader-stage": 6})
    ir = IR()
    _, _, y = _pair(ir, residual=True)  # x, 2 + 3 operands, the parameters and out: past 6 bindings
    assert fuse_mlp(ir.nodes, {"y": y}, few) == ir.nodes
