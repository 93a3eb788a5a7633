"""fuse_pooled_head: a one-row product (or a ``heads`` node) of a global average pool becomes one
``pooled_head`` node reading the pool's source. GPU-free IR tests (``checked_rewrite`` compares
both graphs in float64) of where it fires and the near misses; GPU checks in
tests/ops/test_pooled_head.py."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from _irb import IR
from _ireval import checked_rewrite

from webnn_gpu._ir import Node, Value
from webnn_gpu.fusions.heads import fuse_heads
from webnn_gpu.fusions.pooled_head import POOLED_MAX_LOADS, POOLED_MAX_LOADS_SHARED, fuse_pooled_head, mean_loops
from webnn_gpu.ops.linalg import LOOP_BUDGET

TOL = dict(rtol=1e-9, atol=1e-9)
#: a lavapipe-like device: subgroups of 8 lanes, the "lane-loop" profile, 64-bit integers
LAVAPIPE = SimpleNamespace(_subgroup=8, _tuning="lane-loop", features=frozenset({"shader-int64"}),
                           limits={"max-storage-buffers-per-shader-stage": 32, "max-texture-dimension-2d": 8192})


def on_lavapipe(nodes, outputs):
    return fuse_pooled_head(nodes, outputs, LAVAPIPE)


def _fc(ir: IR, x, N: int, *, seed: int, act: str | None = None):
    """A TFLite-style fully connected layer: gemm(x, W^T, c) with W [N, K], maybe an activation."""
    rng = np.random.default_rng(seed)
    K = x.shape[-1]
    ep = [{"op": act}] if act else []
    return ir.op("gemm", [x, ir.const(rng.standard_normal((N, K))), ir.const(rng.standard_normal(N))],
                 (x.shape[0], N), alpha=1.0, beta=1.0, a_transpose=False, b_transpose=True, epilogue=ep)


def _classifier(dt="float32", hw=(7, 7), C=1280, N=10):
    """pool -> reshape -> fully connected, as a Keras classifier's TFLite export."""
    ir = IR(dt)
    x = ir.input((1, *hw, C))
    p = ir.pool(x)
    a = ir.op("reshape", [p], (1, C))
    return ir, x, _fc(ir, a, N, seed=1)


def test_a_classifier_head_takes_the_mean_of_the_image():
    for dt in ("float32", "float16"):
        ir, x, y = _classifier(dt)
        (node,) = checked_rewrite(on_lavapipe, ir, {"y": y}, **TOL)
        assert node.op == "pooled_head" and node.inputs[0] is x and node.outputs == [y]
        assert (node.attrs.rows, node.attrs.count) == (49, 49) and node.attrs.products == (ir.nodes[-1],)


def test_a_1x1_conv_on_the_pooled_pixel():
    """MobileNetV3's head: pool -> 1x1 conv (no reshape between), its activation an epilogue."""
    ir = IR()
    rng = np.random.default_rng(3)
    x = ir.input((1, 4, 4, 576))
    p = ir.pool(x)
    y = ir.conv(p, ir.const(rng.standard_normal((40, 1, 1, 576))), bias=ir.const(rng.standard_normal(40)))
    ir.nodes[-1].attrs["epilogue"] = [{"op": "add", "input": 2, "axis": 3}, {"op": "relu"}]
    (node,) = checked_rewrite(on_lavapipe, ir, {"y": y}, **TOL)
    assert node.op == "pooled_head" and (node.attrs.rows, node.attrs.count) == (16, 16)


def test_a_heads_node_on_the_pooled_vector():
    """hand_landmark's heads (after fuse_heads) on a pooled vector."""
    ir = IR()
    x = ir.input((1, 1, 2, 672))
    a = ir.op("reshape", [ir.pool(x)], (1, 672))
    ys = [_fc(ir, a, 1, seed=1, act="sigmoid"), _fc(ir, a, 63, seed=2), _fc(ir, a, 63, seed=3)]
    outputs = {f"y{i}": y for i, y in enumerate(ys)}

    def both(nodes, outs):
        return on_lavapipe(fuse_heads(nodes, outs, LAVAPIPE), outs)

    (node,) = checked_rewrite(both, ir, outputs, **TOL)
    assert node.op == "pooled_head" and node.outputs == ys and [h.op for h in node.attrs.products] == ["gemm"] * 3


def test_a_pool_of_partial_sums_and_a_pooling_depthwise_conv():
    """The pool's source as the producers' partial sums: a pool reading them (fuse_pool_partials)
    is dropped; a depthwise conv's pooled output (fuse_conv_pool) becomes its partial sums."""
    ir = IR()
    part = Value("float32", (8, 1280), "input", name="part")
    p = ir.op("average_pool2d", [part], (1, 1, 1, 1280), window=[4, 4], padding=[0, 0, 0, 0], strides=[1, 1],
              dilations=[1, 1], layout="nhwc", input_partials=16)
    y = _fc(ir, ir.op("reshape", [p], (1, 1280)), 10, seed=1)
    (node,) = on_lavapipe(ir.nodes, {"y": y})
    assert node.op == "pooled_head" and node.inputs[0] is part and (node.attrs.rows, node.attrs.count) == (8, 16)

    ir = IR()
    x = ir.input((1, 7, 7, 672))
    img = ir.conv(x, ir.filt(672, 3, 1), groups=672, pad=1)
    dw = ir.nodes[-1]
    pooled = Value("float32", (1, 1, 1, 672), "op")
    conv = Node("conv2d", list(dw.inputs), [img, pooled], {**dw.attrs, "pool_output": True}, "dw")
    ir.nodes[-1] = conv
    y = _fc(ir, ir.op("reshape", [pooled], (1, 672)), 63, seed=2)
    new = on_lavapipe(ir.nodes, {"img": img, "y": y})
    assert [n.op for n in new] == ["conv2d", "pooled_head"]
    assert new[0].attrs["pool_output"] == "partials" and new[0].outputs[0] is img
    assert new[1].inputs[0] is new[0].outputs[1] and new[1].attrs.count == 49
    assert new[0].outputs[1].shape == (new[1].attrs.rows, 672)


def test_the_softmax_after_a_classifier():
    """8 rows x 1280 in one workgroup: within POOLED_MAX_LOADS_SHARED."""
    for dt in ("float32", "float16"):
        ir, x, y = _classifier(dt, hw=(2, 4))
        s = ir.op("softmax", [y], axis=1)
        (node,) = checked_rewrite(on_lavapipe, ir, {"s": s}, **TOL)
        assert node.op == "pooled_head" and node.outputs == [s] and node.attrs.softmax
    ir, x, y = _classifier(hw=(2, 4))
    s = ir.op("softmax", [y], axis=0)  # over the batch
    new = checked_rewrite(on_lavapipe, ir, {"s": s}, **TOL)
    assert [n.op for n in new] == ["pooled_head", "softmax"] and not new[0].attrs.softmax
    ir, x, y = _classifier(hw=(2, 4))
    s = ir.op("softmax", [y], axis=1)
    new = checked_rewrite(on_lavapipe, ir, {"s": s, "y": y}, **TOL)
    assert [n.op for n in new] == ["pooled_head", "softmax"], "the logits an output too"
    ir, x, y = _classifier(hw=(2, 4), N=300)  # 75 column groups: more than one workgroup
    s = ir.op("softmax", [y], axis=1)
    new = checked_rewrite(on_lavapipe, ir, {"s": s}, **TOL)
    assert new[-1].op == "softmax" and not any(n.op == "pooled_head" and n.attrs.softmax for n in new)


# ---------------------------------------------------------------- near misses
def test_a_pool_read_twice_or_an_output_stays():
    ir, x, y = _classifier()
    p = ir.nodes[0].outputs[0]
    assert on_lavapipe(ir.nodes, {"y": y, "p": p}) == ir.nodes, "the pool a graph output"
    z = ir.op("relu", [p])
    assert on_lavapipe(ir.nodes, {"y": y, "z": z}) == ir.nodes, "the pool read by another node"
    ir, x, y = _classifier()
    a = ir.nodes[1].outputs[0]
    assert on_lavapipe(ir.nodes, {"y": y, "a": a}) == ir.nodes, "the reshape a graph output"


def test_windowed_nchw_and_two_row_pools_stay():
    ir = IR()
    x = ir.input((1, 7, 7, 1280))
    p = ir.pool(x, window=(7, 6))  # 1 x 2 pixels
    y = _fc(ir, ir.op("reshape", [p], (1, 2560)), 10, seed=1)
    assert on_lavapipe(ir.nodes, {"y": y}) == ir.nodes, "a windowed pool"
    ir = IR()
    x = ir.input((1, 1280, 7, 7))
    p = ir.op("average_pool2d", [x], (1, 1280, 1, 1), window=[7, 7], padding=[0, 0, 0, 0], strides=[1, 1],
              dilations=[1, 1], layout="nchw")
    y = _fc(ir, ir.op("reshape", [p], (1, 1280)), 10, seed=1)
    assert on_lavapipe(ir.nodes, {"y": y}) == ir.nodes, "NCHW"
    ir = IR()
    x = ir.input((2, 7, 7, 1280))
    y = _fc(ir, ir.op("reshape", [ir.pool(x)], (2, 1280)), 10, seed=1)
    assert on_lavapipe(ir.nodes, {"y": y}) == ir.nodes, "batch 2: two rows"


def test_a_computed_weight_a_transpose_or_odd_channels_stay():
    ir = IR()
    x, w = ir.input((1, 7, 7, 1280)), ir.input((1280, 10))
    y = ir.op("matmul", [ir.op("reshape", [ir.pool(x)], (1, 1280)), w], (1, 10))
    assert on_lavapipe(ir.nodes, {"y": y}) == ir.nodes, "a computed B"
    ir = IR()
    x = ir.input((1, 7, 7, 1280))
    t = ir.op("transpose", [ir.pool(x)], (1, 1, 1280, 1), permutation=[0, 1, 3, 2])
    y = _fc(ir, ir.op("reshape", [t], (1, 1280)), 10, seed=1)
    assert on_lavapipe(ir.nodes, {"y": y}) == ir.nodes, "a transpose between"
    ir, x, y = _classifier(C=1282)
    assert on_lavapipe(ir.nodes, {"y": y}) == ir.nodes, "channels not a multiple of 4"


def test_other_devices_loops_and_loads_stay():
    ir, x, y = _classifier()
    for ctx in (None, SimpleNamespace(_subgroup=0, _tuning="lane-loop", limits={}),
                SimpleNamespace(_subgroup=8, _tuning="default", limits={})):
        assert fuse_pooled_head(ir.nodes, {"y": y}, ctx) == ir.nodes
    ir, x, y = _classifier(hw=(4, 4), C=576, N=1024)  # 16 rows x 576 x 8 workgroups (of 8 subgroups)
    assert 16 * 576 * 8 > POOLED_MAX_LOADS_SHARED
    assert on_lavapipe(ir.nodes, {"y": y}) == ir.nodes, "loads, the means per workgroup"
    ir, x, y = _classifier(hw=(40, 40), C=2048)  # 1600 rows x 64 steps a lane: past the loop budget
    assert mean_loops(2048, 1600, 8) > LOOP_BUDGET
    assert fuse_pooled_head(ir.nodes, {"y": y}, LAVAPIPE) == ir.nodes, "loops"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("WEBNN_GPU_FORCE_POOLED_HEAD", "on")  # any number of loads, not past the loop budget
        assert on_lavapipe(ir.nodes, {"y": y}) == ir.nodes, "loops"
        ir2, _, y2 = _classifier(hw=(7, 7), C=2048, N=10)
        assert [n.op for n in on_lavapipe(ir2.nodes, {"y": y2})] == ["pooled_head"]
        mp.setenv("WEBNN_GPU_FORCE_POOLED_HEAD", "off")
        ir2, _, y2 = _classifier()
        assert on_lavapipe(ir2.nodes, {"y": y2}) == ir2.nodes
    ir, x, y = _classifier(hw=(7, 7), C=2048, N=10)  # 49 rows x 2048 x 3 column groups
    assert 49 * 2048 * 3 > POOLED_MAX_LOADS
    assert on_lavapipe(ir.nodes, {"y": y}) == ir.nodes, "loads"
