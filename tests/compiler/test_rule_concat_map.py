"""The ``fuse_concat_map`` rule: on hand-made IR (no GPU), checked by a float64 evaluator of the
IR, near misses included; and on the GPU against float64 NumPy, where a dense block's concat
also stores ``relu(v * s + b)`` of its output (one kernel instead of two)."""

from __future__ import annotations

import numpy as np
import pytest
from _ireval import checked_rewrite
from _irb import IR
from helpers import kernel_templates, run_graph

from webnn_gpu.compiler.rules.layout import fuse_concat_map


def _bn_relu(ir, v, c=None):
    """v * scale + shift, relu; the operands per channel (the last axis)."""
    c = v.shape[-1] if c is None else c
    t = ir.op("mul", [v, ir.const(np.linspace(-1, 2, c), (1, 1, 1, c))])
    t = ir.op("add", [t, ir.const(np.linspace(0.5, -0.5, c), (c,))])
    return ir.op("relu", [t])


def _dense_step(ir, a, b, chain=_bn_relu):
    """concat(a, b) read by a chain and by a second concat (a dense block's next layer)."""
    v = ir.op("concat", [a, b], (*a.shape[:3], a.shape[3] + b.shape[3]), axis=3)
    z = chain(ir, v)
    w = ir.op("concat", [v, z], (*v.shape[:3], 2 * v.shape[3]), axis=3)
    return v, z, w


def _ops(nodes):
    return [n.op for n in nodes]


def test_the_concat_stores_the_chain_of_its_output():
    ir = IR()
    a, b = ir.op("relu", [ir.input((1, 3, 5, 8))]), ir.op("relu", [ir.input((1, 3, 5, 4))])
    v, z, w = _dense_step(ir, a, b)
    new = checked_rewrite(fuse_concat_map, ir, {"w": w}, rtol=1e-12, atol=1e-12)
    assert _ops(new) == ["relu", "relu", "concat", "concat"]
    cat = new[2]
    assert cat.outputs == [v, z] and [s["op"] for s in cat.attrs["side"]] == ["mul", "add", "relu"]
    assert cat.attrs["side_parts"] == 2 and cat.inputs[:2] == [a, b]
    assert all(cat.inputs[s["input"]].shape == (12,) for s in cat.attrs["side"] if "input" in s)


def test_the_concat_output_may_be_a_graph_output():
    ir = IR()
    a, b = ir.input((2, 4, 4)), ir.input((2, 4, 8))
    v = ir.op("concat", [a, b], (2, 4, 12), axis=2)
    z = ir.op("sigmoid", [ir.op("mul", [v, ir.const([0.5], (1,))])])
    new = checked_rewrite(fuse_concat_map, ir, {"v": v, "z": z}, rtol=1e-12, atol=1e-12)
    assert _ops(new) == ["concat"] and new[0].outputs == [v, z]


@pytest.mark.parametrize("case", ["residual operand", "computed operand", "second operand read per element",
                                  "slabs not multiples of 4", "last axis not a multiple of 4", "int32"])
def test_near_misses(case):
    ir = IR("int32" if case == "int32" else "float32")
    wa = 6 if case == "slabs not multiples of 4" else 8
    a = ir.op("relu", [ir.input((1, 3, 5, wa) if case != "last axis not a multiple of 4" else (1, 3, 4, 6))])
    b = ir.op("relu", [ir.input((1, 3, 5, wa - 4 if wa == 8 else wa) if case != "last axis not a multiple of 4"
                                else (1, 3, 4, 6))])
    axis = 2 if case == "last axis not a multiple of 4" else 3
    shape = list(a.shape)
    shape[axis] += b.shape[axis]
    v = ir.op("concat", [a, b], tuple(shape), axis=axis)
    C = shape[-1]
    if case == "residual operand":
        z = ir.op("add", [v, ir.op("relu", [ir.input(tuple(shape))])])
    elif case == "computed operand":
        z = ir.op("mul", [v, ir.op("relu", [ir.input((C,))])])
    elif case == "second operand read per element":  # (the first one is a step: the chain is that one)
        z = ir.op("mul", [v, ir.const(np.linspace(0, 1, shape[2]), (1, 1, shape[2], 1))])
        z = ir.op("add", [z, ir.const(np.linspace(0, 1, shape[2] * 12), (1, 1, shape[2], 12))])
    else:
        z = _bn_relu(ir, v)
    outputs = {"z": z}
    outputs["w"] = ir.op("reshape", [v], (int(np.prod(shape)),))  # v's other reader (not element-wise)
    new = fuse_concat_map(list(ir.nodes), outputs)
    if case == "second operand read per element":
        cat = next(n for n in new if n.op == "concat")
        assert [s["op"] for s in cat.attrs["side"]] == ["mul"] and "add" in _ops(new)
        return
    assert new == ir.nodes, case


def test_the_chain_as_the_concats_only_reader_is_its_one_output():
    ir = IR()
    a, b = ir.op("relu", [ir.input((1, 3, 5, 8))]), ir.op("relu", [ir.input((1, 3, 5, 4))])
    v = ir.op("concat", [a, b], (1, 3, 5, 12), axis=3)
    z = _bn_relu(ir, v)
    w = ir.op("transpose", [z], (1, 12, 3, 5), permutation=[0, 3, 1, 2])
    new = checked_rewrite(fuse_concat_map, ir, {"w": w}, rtol=1e-12, atol=1e-12)
    assert _ops(new) == ["relu", "relu", "concat", "transpose"] and new[2].outputs == [z]


def test_one_constant_of_another_shape_is_read_per_element():
    """A ViT's class token concatenated to the patch embeddings, the position embedding added."""
    ir = IR()
    cls, patches = ir.const(np.linspace(-1, 1, 8), (1, 1, 8)), ir.op("relu", [ir.input((1, 4, 8))])
    v = ir.op("concat", [cls, patches], (1, 5, 8), axis=1)
    z = ir.op("add", [v, ir.const(np.linspace(0, 2, 40), (5, 8))])
    new = checked_rewrite(fuse_concat_map, ir, {"z": z}, rtol=1e-12, atol=1e-12)
    assert _ops(new) == ["relu", "concat"] and new[1].outputs == [z] and "axis" not in new[1].attrs["side"][0]


def test_the_chain_stops_at_a_second_reader():
    ir = IR()
    a, b = ir.op("relu", [ir.input((1, 3, 5, 8))]), ir.op("relu", [ir.input((1, 3, 5, 4))])
    v, z, w = _dense_step(ir, a, b)
    mul = next(n for n in ir.nodes if n.op == "mul")
    new = checked_rewrite(fuse_concat_map, ir, {"w": w, "m": mul.outputs[0]}, rtol=1e-12, atol=1e-12)
    cat = next(n for n in new if n.op == "concat")
    assert cat.outputs == [v, mul.outputs[0]] and [s["op"] for s in cat.attrs["side"]] == ["mul"]
    assert _ops(new).count("add") == 1 and _ops(new).count("relu") == 3


@pytest.mark.parametrize("dt,tol", [("float32", 1e-5), ("float16", 2e-2)])
def test_on_the_gpu_the_concat_writes_the_map(ctx, rng, monkeypatch, dt, tol):
    """Two dense-block steps, float32 and float16: float64 NumPy's results; each concat and its
    normalization and relu one kernel (the rule off: two)."""
    npdt = np.dtype(dt)
    x = rng.standard_normal((1, 6, 5, 8)).astype(npdt)
    w1 = (rng.standard_normal((4, 1, 1, 8)) * 0.5).astype(npdt)
    s1, b1 = rng.standard_normal((1, 1, 1, 12)).astype(npdt), rng.standard_normal((12,)).astype(npdt)
    w2 = (rng.standard_normal((4, 1, 1, 12)) * 0.5).astype(npdt)

    def build(b, ops):
        f1 = b.conv2d(ops["x"], b.constant(w1), input_layout="nhwc", filter_layout="ohwi")
        v1 = b.concat([ops["x"], f1], 3)
        h1 = b.relu(b.add(b.mul(v1, b.constant(s1)), b.constant(b1)))
        f2 = b.conv2d(h1, b.constant(w2), input_layout="nhwc", filter_layout="ohwi")
        return {"v2": b.concat([v1, f2], 3)}

    x64 = x.astype(np.float64)
    f1 = np.einsum("nhwc,oc->nhwo", x64, w1[:, 0, 0].astype(np.float64))
    v1 = np.concatenate([x64, f1], 3)
    h1 = np.maximum(v1 * s1 + b1, 0)
    f2 = np.einsum("nhwc,oc->nhwo", h1, w2[:, 0, 0].astype(np.float64))
    want = np.concatenate([v1, f2], 3)
    np.testing.assert_allclose(run_graph(ctx, build, {"x": x})["v2"].astype(np.float64), want, rtol=tol, atol=tol)
    templates = kernel_templates(ctx, build, {"x": x})
    assert len(templates) == 4 and templates[1] == templates[3] == "layout/concat_vec4.wgsl", templates
    monkeypatch.setenv("WEBNN_GPU_PASSES", "-fuse_concat_map")
    assert len(kernel_templates(ctx, build, {"x": x})) == 5


def test_on_the_gpu_the_concat_applies_a_chain_it_alone_feeds(ctx, rng):
    """concat -> scale, shift, relu read by nothing else: one kernel storing the chain's value."""
    x, y = rng.standard_normal((1, 3, 4, 8)).astype(np.float32), rng.standard_normal((1, 3, 4, 4)).astype(np.float32)
    s = rng.standard_normal((12,)).astype(np.float32)

    def build(b, ops):
        return {"z": b.relu(b.mul(b.concat([ops["x"], ops["y"]], 3), b.constant(s)))}

    got = run_graph(ctx, build, {"x": x, "y": y})["z"]
    np.testing.assert_allclose(got, np.maximum(np.concatenate([x, y], 3).astype(np.float64) * s, 0), rtol=1e-6,
                               atol=1e-7)
    assert kernel_templates(ctx, build, {"x": x, "y": y}) == ["layout/concat_vec4.wgsl"]


def test_on_the_gpu_the_concat_adds_a_position_embedding(ctx, rng):
    """concat([class token, patches], 1) + position embedding ([rows, width], read per element)."""
    cls = rng.standard_normal((1, 1, 8)).astype(np.float32)
    pos = rng.standard_normal((5, 8)).astype(np.float32)
    x = rng.standard_normal((1, 4, 8)).astype(np.float32)

    def build(b, ops):
        return {"z": b.add(b.concat([b.constant(cls), ops["x"]], 1), b.constant(pos))}

    got = run_graph(ctx, build, {"x": x})["z"]
    np.testing.assert_allclose(got, np.concatenate([cls, x], 1).astype(np.float64) + pos, rtol=1e-6, atol=1e-7)
    assert kernel_templates(ctx, build, {"x": x}) == ["layout/concat_vec4.wgsl"]


def test_on_the_gpu_a_vec4_concat_is_exact(ctx, rng):
    """The vec4 concat (slabs of multiples of 4 elements) along each axis: bit-exact, int32 and
    float16 too."""
    cases = ((0, [(2, 3, 4), (1, 3, 4)]), (1, [(2, 4, 2), (2, 2, 2), (2, 6, 2)]), (2, [(3, 2, 4), (3, 2, 8)]))
    for axis, shapes in cases:
        arrays = {f"x{i}": rng.standard_normal(s).astype(np.float32) for i, s in enumerate(shapes)}
        arrays["i0"] = rng.integers(-9, 9, shapes[0]).astype(np.int32)
        arrays["h0"] = rng.standard_normal(shapes[-1]).astype(np.float16)

        def build(b, ops, axis=axis, arrays=arrays):
            f = b.concat([ops[n] for n in arrays if n.startswith("x")], axis)
            i = b.concat([ops["i0"], ops["i0"]], axis)
            h = b.concat([ops["h0"], ops["h0"]], axis)
            return {"f": f, "i": i, "h": h}

        got = run_graph(ctx, build, arrays)
        want = np.concatenate([a for n, a in arrays.items() if n.startswith("x")], axis)
        np.testing.assert_array_equal(got["f"], want)
        np.testing.assert_array_equal(got["i"], np.concatenate([arrays["i0"]] * 2, axis))
        np.testing.assert_array_equal(got["h"], np.concatenate([arrays["h0"]] * 2, axis))
        assert kernel_templates(ctx, build, arrays) == ["layout/concat_vec4.wgsl"] * 3


def test_the_scalar_concat_can_be_forced(ctx, rng, monkeypatch):
    """WEBNN_GPU_FORCE_CONCAT=scalar runs the one-element kernel where the vec4 one applies."""
    arrays = {"a": rng.standard_normal((2, 4)).astype(np.float32), "b": rng.standard_normal((2, 8)).astype(np.float32)}

    def build(b, ops):
        return {"y": b.concat([ops["a"], ops["b"]], 1)}

    monkeypatch.setenv("WEBNN_GPU_FORCE_CONCAT", "scalar")
    np.testing.assert_array_equal(run_graph(ctx, build, arrays)["y"], np.concatenate([arrays["a"], arrays["b"]], 1))
    assert kernel_templates(ctx, build, arrays) == ["layout/concat.wgsl"]
