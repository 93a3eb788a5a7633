"""The ``concat_in_place`` rule: on hand-made IR (no GPU), checked by a float64 evaluator of the
IR, near misses included; and on the GPU against float64 NumPy, where the heads of a detector
write their blocks of the concat's output (no concat kernel), through both run paths."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
from _ireval import checked_rewrite
from _irb import IR
from helpers import kernel_templates, run_graph

from webnn_gpu.compiler.rules.layout import concat_in_place


def _head(ir, x, k, rows):
    """A 1x1 conv of ``x`` to ``k`` channels, reshaped to ``[1, rows, k']`` (a view)."""
    c = x.shape[3]
    y = ir.conv(x, ir.const(np.random.default_rng(k).standard_normal((k, 1, 1, c))))
    n = int(np.prod(y.shape))
    return ir.op("reshape", [y], (1, rows, n // rows), alias=True)


def _concat(ir, parts, axis=1):
    shape = list(parts[0].shape)
    shape[axis] = sum(p.shape[axis] for p in parts)
    return ir.op("concat", parts, tuple(shape), axis=axis, alias=False)


def test_the_heads_write_their_blocks():
    ir = IR()
    a = _head(ir, ir.input((1, 8, 8, 4)), 2, 128)  # 128 x 1: 512 bytes
    b = _head(ir, ir.input((1, 4, 4, 4)), 6, 96)
    out = _concat(ir, [a, b])
    new = checked_rewrite(concat_in_place, ir, {"y": out}, rtol=0, atol=0)
    assert new[-1].op == "concat" and new[-1].attrs["in_place"] and new[-1].inputs == [a, b]


@pytest.mark.parametrize("case", ["read elsewhere", "output", "graph input", "other producer", "misaligned",
                                  "leading dimension", "same twice", "side map"])
def test_near_misses_keep_the_concat(case):
    ir = IR()
    a = _head(ir, ir.input((1, 8, 8, 4)), 2, 128)
    b = _head(ir, ir.input((1, 4, 4, 4)), 6, 96)
    outputs = {}
    parts = [a, b]
    if case == "read elsewhere":
        outputs["z"] = ir.op("neg", [b.producer.inputs[0]])
    elif case == "output":
        outputs["a"] = a
    elif case == "graph input":
        parts = [a, ir.input((1, 96, 1))]
    elif case == "other producer":
        parts = [a, ir.op("relu", [b])]
    elif case == "misaligned":
        parts = [_head(ir, ir.input((1, 1, 5, 4)), 1, 5), b]  # 20 bytes: the next block at offset 20
    elif case == "same twice":
        parts = [a, a]
    if case == "leading dimension":
        x = ir.input((2, 4, 4, 4))
        y = ir.conv(x, ir.const(np.ones((2, 1, 1, 4))))
        out = _concat(ir, [ir.op("reshape", [y], (2, 16, 2), alias=True), ir.input((2, 16, 2))])
    else:
        out = _concat(ir, parts)
    if case == "side map":
        out.producer.attrs["side"] = []  # (as fuse_concat_map leaves a concat storing a map)
    outputs["y"] = out
    nodes = list(ir.nodes)
    assert concat_in_place(nodes, outputs) == nodes, case


@pytest.mark.parametrize("case", ["slice", "alias slice", "remap chain", "concat in place", "concat with a side map"])
def test_data_movement_producers(case):
    """A block made by a data-movement kernel (``IN_PLACE_MOVERS``) is written in place; a view
    (an aliasing slice), a concat read in place itself or storing a side map is not."""
    ir = IR()
    a = _head(ir, ir.input((1, 8, 8, 4)), 2, 128)
    x = ir.input((1, 4, 96))
    if case in ("slice", "alias slice"):
        full = case == "alias slice"
        b = ir.op("slice", [x], (1, 4 if full else 1, 96), starts=[0, 0 if full else 2, 0], strides=[1, 1, 1],
                  alias=full)
    elif case == "remap chain":
        b = ir.op("remap_chain", [x], (1, 1, 96), chain=[])
    else:
        b = _concat(ir, [ir.op("slice", [x], (1, 1, 96), starts=[0, k, 0], strides=[1, 1, 1], alias=False)
                         for k in (0, 1)])
        b.producer.attrs.update({"in_place": True} if case == "concat in place" else {"side": []})
    out = _concat(ir, [a, ir.op("reshape", [b], (1, math.prod(b.shape), 1), alias=True)])
    nodes = list(ir.nodes)
    new = concat_in_place(nodes, {"y": out})
    fired = new[-1].attrs.get("in_place", False)
    assert fired == (case in ("slice", "remap chain")), case


def test_the_device_alignment_decides():
    """Blocks at 512 bytes: in place with an alignment of 256 or 512, not of 1024."""
    ir = IR()
    out = _concat(ir, [_head(ir, ir.input((1, 8, 8, 4)), 2, 128), _head(ir, ir.input((1, 4, 4, 4)), 6, 96)])
    for align, fires in ((256, True), (512, True), (1024, False)):
        ctx = SimpleNamespace(limits={"min-storage-buffer-offset-alignment": align})
        new = concat_in_place(list(ir.nodes), {"y": out}, ctx)
        assert bool(new[-1].attrs.get("in_place")) == fires, align


# ---------------------------------------------------------------------------------------- GPU


def _heads_graph(rng, read_after: bool, rows2: int = 16):
    x1 = rng.standard_normal((1, 8, 8, 8)).astype(np.float32)
    x2 = rng.standard_normal((1, 4, rows2 // 4, 8)).astype(np.float32)
    w1 = rng.standard_normal((2, 8)).astype(np.float32)
    w2 = rng.standard_normal((6, 8)).astype(np.float32)
    b1 = rng.standard_normal(2).astype(np.float32)

    def build(b, ops):
        h1 = b.conv2d(ops["x1"], b.constant(w1.reshape(2, 1, 1, 8)), bias=b.constant(b1), input_layout="nhwc",
                      filter_layout="ohwi")
        h2 = b.conv2d(ops["x2"], b.constant(w2.reshape(6, 1, 1, 8)), input_layout="nhwc", filter_layout="ohwi")
        y = b.concat([b.reshape(h1, [1, 64, 2]), b.reshape(h2, [1, 3 * rows2, 2])], 1)
        return {"y": b.sigmoid(y) if read_after else y, "s": b.relu(ops["x1"])}

    h1 = x1.astype(np.float64) @ w1.T.astype(np.float64) + b1
    h2 = x2.astype(np.float64) @ w2.T.astype(np.float64)
    y = np.concatenate([h1.reshape(1, 64, 2), h2.reshape(1, 3 * rows2, 2)], axis=1)
    want = 1 / (1 + np.exp(-y)) if read_after else y
    return build, {"x1": x1, "x2": x2}, want


@pytest.mark.parametrize("read_after", [False, True])
def test_on_the_gpu_the_heads_write_into_the_concat(ctx, rng, monkeypatch, read_after):
    """Two 1x1 conv heads reshaped and concatenated (a graph output, or read by a sigmoid):
    float64 NumPy's result with no concat kernel, the same bits through compute() and the
    tensor path (run_graph); the rule off: one kernel more."""
    build, inputs, want = _heads_graph(rng, read_after)
    got = run_graph(ctx, build, inputs)
    np.testing.assert_allclose(got["y"], want, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got["s"], np.maximum(inputs["x1"], 0))
    templates = kernel_templates(ctx, build, inputs)
    assert not any(t.startswith("layout/concat") for t in templates), templates
    monkeypatch.setenv("WEBNN_GPU_PASSES", "-concat_in_place")
    assert len(kernel_templates(ctx, build, inputs)) == len(templates) + 1


def test_on_the_gpu_a_misaligned_block_keeps_the_kernel(ctx, rng):
    """The second head at 512 bytes but a third block at 512 + 3 * 2 * 4 = 536 bytes (not a
    multiple of 32 or 256): the concat kernel stays, the result is the same."""
    x = rng.standard_normal((1, 8, 8, 8)).astype(np.float32)
    x3 = rng.standard_normal((1, 1, 3, 8)).astype(np.float32)
    w = rng.standard_normal((2, 8)).astype(np.float32)

    def build(b, ops):
        f = b.constant(w.reshape(2, 1, 1, 8))
        h1 = b.conv2d(ops["x"], f, input_layout="nhwc", filter_layout="ohwi")
        h3 = b.conv2d(ops["x3"], f, input_layout="nhwc", filter_layout="ohwi")
        h4 = b.conv2d(ops["x"], f, input_layout="nhwc", filter_layout="ohwi", padding=[0, 0, 0, 0], strides=[2, 2])
        return {"y": b.concat([b.reshape(h1, [1, 64, 2]), b.reshape(h3, [1, 3, 2]), b.reshape(h4, [1, 16, 2])], 1)}

    x64, w64 = x.astype(np.float64), w.T.astype(np.float64)
    want = np.concatenate([(x64 @ w64).reshape(1, 64, 2), (x3.astype(np.float64) @ w64).reshape(1, 3, 2),
                           (x64[:, ::2, ::2] @ w64).reshape(1, 16, 2)], axis=1)
    got = run_graph(ctx, build, {"x": x, "x3": x3})
    np.testing.assert_allclose(got["y"], want, rtol=1e-5, atol=1e-5)
    assert any(t.startswith("layout/concat") for t in kernel_templates(ctx, build, {"x": x, "x3": x3}))
