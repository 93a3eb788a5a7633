"""fuse_heads: products of the same few rows by different constant matrices become one ``heads``
node. GPU-free IR tests (``checked_rewrite`` compares both graphs in float64) of where it fires and
the near misses; GPU checks in tests/ops/test_matvec.py."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
from _irb import IR
from _ireval import checked_rewrite

from webnn_gpu.fusions.heads import fuse_heads

TOL = dict(rtol=1e-9, atol=1e-9)
#: a lavapipe-like device: subgroups of 8 lanes, the "lane-loop" profile
LAVAPIPE = SimpleNamespace(_subgroup=8, _tuning="lane-loop", limits={"max-storage-buffers-per-shader-stage": 32,
                                                                     "max-texture-dimension-2d": 8192})


def on_lavapipe(nodes, outputs):
    return fuse_heads(nodes, outputs, LAVAPIPE)


def _gemm(ir: IR, x, N: int, *, seed: int, act: str | None = None, K: int | None = None):
    """A TFLite-style fully connected layer: gemm(x, W^T, c) with W [N, K], maybe an activation."""
    rng = np.random.default_rng(seed)
    K = K or x.shape[-1]
    ep = [{"op": act}] if act else []
    return ir.op("gemm", [x, ir.const(rng.standard_normal((N, K))), ir.const(rng.standard_normal(N))],
                 (x.shape[0], N), alpha=1.0, beta=1.0, a_transpose=False, b_transpose=True, epilogue=ep)


def test_a_landmark_models_four_heads_become_one_node():
    """hand_landmark's heads: two scores (sigmoid) and two sets of 63 coordinates on one vector."""
    ir = IR()
    x = ir.input((1, 672))
    ys = [_gemm(ir, x, 1, seed=1, act="sigmoid"), _gemm(ir, x, 1, seed=2, act="sigmoid"),
          _gemm(ir, x, 63, seed=3), _gemm(ir, x, 63, seed=4)]
    outputs = {f"y{i}": y for i, y in enumerate(ys)}
    (node,) = checked_rewrite(on_lavapipe, ir, outputs, **TOL)
    assert node.op == "heads" and node.outputs == ys and node.inputs[0] is x
    assert list(node.attrs.heads) == ir.nodes


def test_matmuls_with_a_leading_axis_and_float16_and_ops_between():
    for dt in ("float32", "float16"):
        ir = IR(dt)
        rng = np.random.default_rng(5)
        x = ir.input((1, 2, 300))
        a = ir.op("matmul", [x, ir.const(rng.standard_normal((300, 40)))], (1, 2, 40))
        b = ir.op("relu", [a])  # an op between the heads: the fused node takes the first one's place
        c = ir.op("matmul", [x, ir.const(rng.standard_normal((300, 700)))], (1, 2, 700),
                  epilogue=[{"op": "add", "input": 2, "axis": 2}])
        ir.nodes[-1].inputs.append(ir.const(rng.standard_normal(700)))
        new = checked_rewrite(on_lavapipe, ir, {"b": b, "c": c}, **TOL)
        assert [n.op for n in new] == ["heads", "relu"] and new[0].outputs == [a, c]


# ---------------------------------------------------------------- near misses
def test_products_of_different_inputs_rows_or_k_stay():
    ir = IR()
    x, z = ir.input((1, 672)), ir.input((1, 672))
    y1, y2 = _gemm(ir, x, 63, seed=1), _gemm(ir, z, 63, seed=2)
    assert on_lavapipe(ir.nodes, {"a": y1, "b": y2}) == ir.nodes, "different A"
    ir = IR()
    x = ir.input((4, 672))
    y1, y2 = _gemm(ir, x, 63, seed=1), _gemm(ir, x, 63, seed=2)
    assert on_lavapipe(ir.nodes, {"a": y1, "b": y2}) == ir.nodes, "4 rows: the tile kernel"
    ir = IR()
    x = ir.input((1, 128))
    y1, y2 = _gemm(ir, x, 63, seed=1), _gemm(ir, x, 63, seed=2)
    assert on_lavapipe(ir.nodes, {"a": y1, "b": y2}) == ir.nodes, "a short reduction"


def test_a_computed_weight_or_residual_keeps_that_product_out():
    ir = IR()
    rng = np.random.default_rng(6)
    x, w = ir.input((1, 512)), ir.input((512, 20))
    y0 = _gemm(ir, x, 30, seed=1)
    y1 = ir.op("matmul", [x, w], (1, 20))  # a computed B
    r = ir.input((1, 30))
    y2 = ir.op("gemm", [x, ir.const(rng.standard_normal((30, 512))), None, r], (1, 30), alpha=1.0, beta=1.0,
               a_transpose=False, b_transpose=True, epilogue=[{"op": "add", "input": 3}])  # residual of an input
    y3 = _gemm(ir, x, 17, seed=2, act="relu")
    new = checked_rewrite(on_lavapipe, ir, {"y0": y0, "y1": y1, "y2": y2, "y3": y3}, **TOL)
    assert [n.op for n in new] == ["heads", "matmul", "gemm"]
    assert new[0].outputs == [y0, y3]


def test_a_single_product_other_profiles_and_transposed_a_stay():
    ir = IR()
    x = ir.input((1, 672))
    y = _gemm(ir, x, 63, seed=1)
    assert on_lavapipe(ir.nodes, {"y": y}) == ir.nodes
    ir = IR()
    x = ir.input((1, 672))
    y1, y2 = _gemm(ir, x, 63, seed=1), _gemm(ir, x, 63, seed=2)
    for ctx in (None, SimpleNamespace(_subgroup=0, _tuning="lane-loop", limits={}),
                SimpleNamespace(_subgroup=8, _tuning="default", limits={})):
        assert fuse_heads(ir.nodes, {"a": y1, "b": y2}, ctx) == ir.nodes
    ir = IR()
    x = ir.input((672, 1))
    rng = np.random.default_rng(2)
    ys = [ir.op("gemm", [x, ir.const(rng.standard_normal((672, 40)))], (1, 40), alpha=1.0, beta=1.0,
                a_transpose=True, b_transpose=False) for _ in range(2)]
    assert on_lavapipe(ir.nodes, {"a": ys[0], "b": ys[1]}) == ir.nodes, "a transposed A"


def test_small_products_merge_where_matvec_reads_words():
    """Two heads of 7680 multiply-adds in all (below ``MATVEC_MIN_MACS``): with ``shader-int64``
    the lowering runs such products on matvec (B as words or uniform), so they merge into one
    launch; without it they stay apart, as the lowering gives each the tile kernel."""
    ir = IR()
    x = ir.input((1, 512))
    y1, y2 = _gemm(ir, x, 7, seed=1), _gemm(ir, x, 8, seed=2)
    outputs = {"a": y1, "b": y2}
    assert on_lavapipe(ir.nodes, outputs) == ir.nodes
    words = SimpleNamespace(**vars(LAVAPIPE), features=frozenset({"shader-int64"}))

    def on_words(nodes, outputs):
        return fuse_heads(nodes, outputs, words)

    (node,) = checked_rewrite(on_words, ir, outputs, **TOL)
    assert node.op == "heads"


def test_bindings_past_the_device_limit_stay():
    ir = IR()
    x = ir.input((1, 672))
    ys = [_gemm(ir, x, 8, seed=i) for i in range(4)]  # A, B, 4 biases, 4 outputs: 10 bindings
    small = SimpleNamespace(_subgroup=8, _tuning="lane-loop", limits={"max-storage-buffers-per-shader-stage": 8,
                                                                      "max-texture-dimension-2d": 8192})
    assert fuse_heads(ir.nodes, {f"y{i}": y for i, y in enumerate(ys)}, small) == ir.nodes
    (node,) = on_lavapipe(ir.nodes, {f"y{i}": y for i, y in enumerate(ys)})
    assert node.op == "heads"


def test_the_binding_count_at_the_device_limit_counts_b():
    """A, B (the matrices side by side, one binding), 4 biases and 4 outputs: 10 bindings fit a
    limit of 10, not one of 9 (the lowering would refuse the launch)."""
    ir = IR()
    x = ir.input((1, 672))
    ys = [_gemm(ir, x, 8, seed=i) for i in range(4)]
    outputs = {f"y{i}": y for i, y in enumerate(ys)}

    def device(limit):
        return SimpleNamespace(_subgroup=8, _tuning="lane-loop", limits={"max-storage-buffers-per-shader-stage": limit,
                                                                         "max-texture-dimension-2d": 8192})

    assert fuse_heads(ir.nodes, outputs, device(9)) == ir.nodes
    (node,) = fuse_heads(ir.nodes, outputs, device(10))
    assert node.op == "heads"


def test_convs_covering_their_whole_input_become_one_node():
    """pose_landmark's two heads: 2x2 convs over the same 2x2x288 features, with biases; a 1x1
    conv of stride 2 on the same input stays."""
    ir = IR()
    rng = np.random.default_rng(8)
    x = ir.input((1, 2, 2, 288))
    y1 = ir.conv(x, ir.const(rng.standard_normal((195, 2, 2, 288))), bias=ir.const(rng.standard_normal(195)))
    y2 = ir.conv(x, ir.const(rng.standard_normal((117, 2, 2, 288))), bias=ir.const(rng.standard_normal(117)))
    y3 = ir.conv(x, ir.const(rng.standard_normal((8, 1, 1, 288))), stride=2)
    new = checked_rewrite(on_lavapipe, ir, {"a": y1, "b": y2, "c": y3}, **TOL)
    assert [n.op for n in new] == ["heads", "conv2d"] and new[0].outputs == [y1, y2]
