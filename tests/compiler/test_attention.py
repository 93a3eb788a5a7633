"""fuse_attention: ``matmul -> softmax -> matmul`` becomes one ``attention`` node.

IR tests (no GPU) for where it fires and the near misses it must leave; GPU tests against
float64 NumPy.
"""

from __future__ import annotations

import numpy as np
import pytest
from _irb import IR

from webnn_gpu.compiler import check_order
from webnn_gpu.fusions.attention import AttentionAttrs, fuse_attention

from helpers import run_graph


def _block(ir: IR, *, T=4, D=8, batch=(), axis=None, reversed_context=False):
    q, k, v = ir.input((*batch, T, D)), ir.input((*batch, D, T)), ir.input((*batch, T, D))
    s = ir.op("matmul", [q, k], (*batch, T, T), epilogue=[{"op": "mul", "input": 2}])
    p = ir.op("softmax", [s], axis=len(batch) + 1 if axis is None else axis)
    o = ir.op("matmul", [v, p] if reversed_context else [p, v], (*batch, T, T) if reversed_context else (*batch, T, D))
    return (q, k, v), s, p, o


def test_the_block_becomes_one_node_in_the_second_matmuls_place():
    ir = IR()
    (q, k, v), s, p, o = _block(ir, batch=(2,))
    ir.op("neg", [v])
    nodes = [ir.nodes[0], ir.nodes[-1], *ir.nodes[1:-1]]  # a node between them stays
    out = fuse_attention(nodes, {"o": o})
    check_order(out, {"o": o})
    assert [n.op for n in out] == ["neg", "attention"]
    att = out[1]
    assert isinstance(att.attrs, AttentionAttrs) and att.outputs == [o]
    assert [n.op for n in (att.attrs.scores, att.attrs.softmax, att.attrs.context)] == ["matmul", "softmax", "matmul"]
    assert att.inputs == [q, k, v]
    assert att.attrs["scores"].attrs["epilogue"] == [{"op": "mul", "input": 2}]  # kept as it was


def test_reshapes_keeping_the_last_axis_around_the_softmax_are_taken_in():
    """ONNX's opset-11 Softmax: the scores viewed as rows ([B*T, T]) and back."""
    ir = IR()
    q, k, v = ir.input((2, 4, 8)), ir.input((2, 8, 4)), ir.input((2, 4, 8))
    s = ir.op("matmul", [q, k], (2, 4, 4))
    p = ir.op("reshape", [ir.op("softmax", [ir.op("reshape", [s], (8, 4))], axis=1)], (2, 4, 4))
    o = ir.op("matmul", [p, v], (2, 4, 8))
    (att,) = fuse_attention(ir.nodes, {"o": o})
    assert [n.op for n in att.attrs.parts()] == ["matmul", "reshape", "softmax", "reshape", "matmul"]
    # a view that moves the last axis is another softmax: not taken
    ir = IR()
    q, k, v = ir.input((2, 4, 8)), ir.input((2, 8, 4)), ir.input((2, 4, 8))
    s = ir.op("matmul", [q, k], (2, 4, 4))
    p = ir.op("reshape", [ir.op("softmax", [ir.op("reshape", [s], (4, 8))], axis=1)], (2, 4, 4))
    o = ir.op("matmul", [p, v], (2, 4, 8))
    assert "attention" not in [n.op for n in fuse_attention(ir.nodes, {"o": o})]


def test_a_second_consumer_of_the_scores_keeps_the_graph():
    ir = IR()
    _, s, _, o = _block(ir)
    z = ir.op("neg", [s])
    assert "attention" not in [n.op for n in fuse_attention(ir.nodes, {"o": o, "z": z})]


@pytest.mark.parametrize("which", ["scores", "probabilities"])
def test_a_graph_output_in_the_middle_keeps_the_graph(which):
    ir = IR()
    _, s, p, o = _block(ir)
    assert "attention" not in [n.op for n in fuse_attention(ir.nodes, {"o": o, which: s if which == "scores" else p})]


def test_a_softmax_along_another_axis_keeps_the_graph():
    ir = IR()
    _, _, _, o = _block(ir, axis=0)
    assert "attention" not in [n.op for n in fuse_attention(ir.nodes, {"o": o})]


def test_probabilities_as_the_right_operand_keep_the_graph():
    ir = IR()
    _, _, _, o = _block(ir, reversed_context=True)
    assert "attention" not in [n.op for n in fuse_attention(ir.nodes, {"o": o})]


def test_an_integer_product_keeps_the_graph():
    ir = IR("int32")
    _, _, _, o = _block(ir)
    assert "attention" not in [n.op for n in fuse_attention(ir.nodes, {"o": o})]


# ---------------------------------------------------------------- on the GPU
def _softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _templates_and_ops(ctx, build, inputs):
    import webnn_gpu as webnn
    from webnn_gpu.compiler import run_passes

    b = webnn.MLGraphBuilder(ctx)
    ops = {n: b.input(n, {"data_type": "float32", "shape": list(a.shape)}) for n, a in inputs.items()}
    outs = build(b, ops)
    nodes = run_passes(list(b._nodes), {k: v._value for k, v in outs.items()}, ctx)
    g = b.build(outs)
    try:
        return [s.template for s in g._steps if hasattr(s, "template")], [n.op for n in nodes]
    finally:
        g.destroy()


@pytest.mark.parametrize("batch, T, D, mask, rows", [((), 5, 8, False, False), ((2,), 8, 4, True, False),
                                                    ((2,), 6, 4, True, True)])
def test_attention_matches_numpy(ctx, rng, batch, T, D, mask, rows):
    q = rng.standard_normal((*batch, T, D)).astype(np.float32)
    kt = rng.standard_normal((*batch, D, T)).astype(np.float32)
    v = rng.standard_normal((*batch, T, D)).astype(np.float32)
    m = np.triu(np.full((T, T), -1e4, np.float32), 1)
    scale = np.float32(1 / np.sqrt(D))

    def build(b, ops):
        s = b.mul(b.matmul(ops["q"], ops["k"]), b.constant("float32", float(scale)))
        if mask:
            s = b.add(s, b.constant(m))
        if rows:  # softmax over a [rows, T] view, as ONNX's opset-11 Softmax
            p = b.reshape(b.softmax(b.reshape(s, [int(np.prod(batch)) * T, T]), axis=1), [*batch, T, T])
        else:
            p = b.softmax(s, axis=len(batch) + 1)
        return {"y": b.relu(b.matmul(p, ops["v"]))}

    scores = np.matmul(q.astype(np.float64), kt) * np.float64(scale) + (m if mask else 0)
    ref = np.maximum(np.matmul(_softmax(scores), v.astype(np.float64)), 0)
    np.testing.assert_allclose(run_graph(ctx, build, {"q": q, "k": kt, "v": v})["y"], ref, rtol=1e-4, atol=1e-5)
    templates, ops = _templates_and_ops(ctx, build, {"q": q, "k": kt, "v": v})
    assert ops == ["attention"] and len(templates) == 3 and templates[1] == "norm/softmax.wgsl"


def test_attention_near_miss_on_the_gpu(ctx, rng):
    """The probabilities are also an output: three nodes, both outputs right."""
    q, kt, v = (rng.standard_normal(s).astype(np.float32) for s in ((4, 8), (8, 4), (4, 8)))

    def build(b, ops):
        p = b.softmax(b.matmul(ops["q"], ops["k"]), axis=1)
        return {"y": b.matmul(p, ops["v"]), "p": p}

    got = run_graph(ctx, build, {"q": q, "k": kt, "v": v})
    p = _softmax(np.matmul(q.astype(np.float64), kt))
    np.testing.assert_allclose(got["p"], p, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got["y"], p @ v, rtol=1e-4, atol=1e-5)
    assert "attention" not in _templates_and_ops(ctx, build, {"q": q, "k": kt, "v": v})[1]
