"""The ``fuse_pool_map`` rule: on hand-made IR (no GPU), checked by a float64 evaluator of the
IR, near misses included; and on the GPU against float64 NumPy, where a max pool whose windows
tile its input also stores ``prelu(x) * s + b`` of that input (one kernel instead of two)."""

from __future__ import annotations

import numpy as np
import pytest
from _ireval import checked_rewrite
from _irb import IR
from helpers import kernel_templates, run_graph

from webnn_gpu.compiler.rules.pool import fuse_pool_map

IMG = (1, 8, 6, 8)


def _max_pool(ir, x, window=(2, 2), strides=None, padding=(0, 0, 0, 0), layout="nhwc"):
    n, h, w, c = x.shape if layout == "nhwc" else (x.shape[0], x.shape[2], x.shape[3], x.shape[1])
    st = list(strides or window)
    oh = (h + padding[0] + padding[1] - window[0]) // st[0] + 1
    ow = (w + padding[2] + padding[3] - window[1]) // st[1] + 1
    shape = (n, oh, ow, c) if layout == "nhwc" else (n, c, oh, ow)
    return ir.op("max_pool2d", [x], shape, window=list(window), padding=list(padding), strides=st,
                 dilations=[1, 1], layout=layout)


def _chain(ir, x, c=None):
    """prelu(x, slope) * scale + shift, the operands per channel (the TFLite importer's shapes)."""
    c = x.shape[3] if c is None else c
    t = ir.op("prelu", [x, ir.const(np.linspace(0.1, 0.4, c), (1, 1, c))])
    t = ir.op("mul", [t, ir.const(np.linspace(-1, 2, c), (1, 1, 1, c))])
    return ir.op("add", [t, ir.const(np.linspace(0.5, -0.5, c), (1, 1, 1, c))])


def _ops(nodes):
    return [n.op for n in nodes]


@pytest.mark.parametrize("pool_first", [False, True])
def test_the_pool_stores_the_chain_of_its_input(pool_first):
    ir = IR()
    x = ir.op("relu", [ir.input(IMG)])
    if pool_first:
        p = _max_pool(ir, x)
        z = _chain(ir, x)
    else:
        z = _chain(ir, x)
        p = _max_pool(ir, x)
    outputs = {"p": ir.op("neg", [p]), "z": ir.op("transpose", [z], (1, 8, 8, 6), permutation=[0, 3, 1, 2])}
    new = checked_rewrite(fuse_pool_map, ir, outputs, rtol=1e-12, atol=1e-12)
    assert _ops(new) in (["relu", "max_pool2d", "neg", "transpose"], ["relu", "max_pool2d", "transpose", "neg"])
    pool = new[1]
    assert pool.outputs == [p, z] and [s["op"] for s in pool.attrs["side"]] == ["prelu", "mul", "add"]
    assert all(s["axis"] == 3 and pool.inputs[s["input"]].shape == (8,) for s in pool.attrs["side"])


def test_the_chain_stops_at_a_second_reader_or_an_output():
    for case in ("second reader", "output"):
        ir = IR()
        x = ir.op("relu", [ir.input(IMG)])
        p = _max_pool(ir, x)
        t = ir.op("prelu", [x, ir.const(np.linspace(0.1, 0.4, 8), (1, 1, 8))])
        m = ir.op("mul", [t, ir.const(np.linspace(-1, 2, 8), (1, 1, 1, 8))])
        z = ir.op("add", [m, ir.const(np.full(8, 0.25), (8,))])
        outputs = {"p": p, "z": z}
        if case == "second reader":
            outputs["q"] = ir.op("neg", [m])
        else:
            outputs["m"] = m
        new = checked_rewrite(fuse_pool_map, ir, outputs, rtol=1e-12, atol=1e-12)
        assert _ops(new)[:3] == ["relu", "max_pool2d", "add"], case
        assert new[1].outputs == [p, m] and [s["op"] for s in new[1].attrs["side"]] == ["prelu", "mul"], case


def test_the_chain_may_end_at_a_graph_output():
    ir = IR()
    x = ir.op("relu", [ir.input(IMG)])
    z = _chain(ir, x)
    p = _max_pool(ir, x)
    new = checked_rewrite(fuse_pool_map, ir, {"p": p, "z": z}, rtol=1e-12, atol=1e-12)
    assert _ops(new) == ["relu", "max_pool2d"] and new[1].outputs == [p, z]


@pytest.mark.parametrize("case", ["residual operand", "computed operand", "overlapping windows", "padding",
                                  "odd height", "nchw", "channels not a multiple of 4", "float16",
                                  "cycle through the pool's epilogue", "no element-wise reader"])
def test_near_misses_leave_the_graph(case):
    ir = IR("float16" if case == "float16" else "float32")
    shape = {"odd height": (1, 7, 6, 8), "channels not a multiple of 4": (1, 8, 6, 6),
             "nchw": (1, 8, 8, 6)}.get(case, IMG)
    x = ir.op("relu", [ir.input(shape)])
    c = shape[3] if case != "nchw" else shape[1]
    if case == "residual operand":
        z = ir.op("add", [x, ir.op("relu", [ir.input(shape)])])
    elif case == "computed operand":
        z = ir.op("mul", [x, ir.op("relu", [ir.input((1, 1, 1, c))])])
    elif case == "no element-wise reader":
        z = ir.op("max_pool2d", [x], (1, 7, 5, 8), window=[2, 2], padding=[0, 0, 0, 0], strides=[1, 1],
                  dilations=[1, 1], layout="nhwc")
    elif case == "nchw":
        z = ir.op("relu", [x])
    else:
        z = _chain(ir, x)
    if case == "cycle through the pool's epilogue":  # the pool adds a value computed from the chain's
        late = ir.op("neg", [_max_pool(ir, z)])
        p = ir.op("max_pool2d", [x, late], (1, 4, 3, 8), window=[2, 2], padding=[0, 0, 0, 0], strides=[2, 2],
                  dilations=[1, 1], layout="nhwc", epilogue=[{"op": "add", "input": 1}])
        outputs = {"p": p, "z": z}
    else:
        kw = {"overlapping windows": {"window": (3, 3), "strides": (2, 2)},
              "padding": {"padding": (0, 0, 1, 1)}, "nchw": {"layout": "nchw"}}.get(case, {})
        p = _max_pool(ir, x, **kw)
        outputs = {"p": p, "z": z}
    new = fuse_pool_map(list(ir.nodes), outputs)
    assert new == ir.nodes, case


def test_on_the_gpu_the_pool_writes_the_map(ctx, rng, monkeypatch):
    """NHWC max pool 2x2/2 and prelu * s + b of its input, both read by later ops: float64
    NumPy's results from one pool kernel (the rule off: a pool and an element-wise kernel)."""
    x = rng.standard_normal((1, 8, 12, 8)).astype(np.float32)
    slope = rng.uniform(0.05, 0.5, (1, 1, 8)).astype(np.float32)
    scale = rng.standard_normal((1, 1, 1, 8)).astype(np.float32)
    shift = rng.standard_normal((1, 1, 1, 8)).astype(np.float32)

    def build(b, ops):
        h = b.sub(ops["x"], b.constant(np.full((1,), 0.1, np.float32)))
        p = b.max_pool2d(h, window_dimensions=[2, 2], strides=[2, 2], layout="nhwc")
        z = b.add(b.mul(b.prelu(h, b.constant(slope)), b.constant(scale)), b.constant(shift))
        return {"p": b.abs(p), "z": z}

    h = x.astype(np.float64) - 0.1
    want_p = np.abs(h.reshape(1, 4, 2, 6, 2, 8).max(axis=(2, 4)))
    want_z = np.where(h >= 0, h, h * slope) * scale + shift
    got = run_graph(ctx, build, {"x": x})
    np.testing.assert_allclose(got["p"], want_p, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got["z"], want_z, rtol=1e-5, atol=1e-6)
    # the sub; the pool with its abs epilogue and the map
    assert kernel_templates(ctx, build, {"x": x}) == ["elementwise/map4.wgsl", "pool/pool2d_vec4.wgsl"]
    monkeypatch.setenv("WEBNN_GPU_PASSES", "-fuse_pool_map")
    assert len(kernel_templates(ctx, build, {"x": x})) == 3


def test_on_the_gpu_the_map_may_be_a_graph_output(ctx, rng):
    """The chain's value itself a graph output, the pool's own epilogue kept (a relu)."""
    x = rng.standard_normal((2, 4, 4, 12)).astype(np.float32)
    slope = rng.uniform(0.05, 0.5, (12,)).astype(np.float32)

    def build(b, ops):
        h = b.sub(ops["x"], b.constant(np.full((1,), 0.1, np.float32)))
        p = b.relu(b.max_pool2d(h, window_dimensions=[2, 2], strides=[2, 2], layout="nhwc"))
        return {"p": p, "z": b.sigmoid(b.prelu(h, b.constant(slope)))}

    h = x.astype(np.float64) - 0.1
    got = run_graph(ctx, build, {"x": x})
    np.testing.assert_allclose(got["p"], np.maximum(h.reshape(2, 2, 2, 2, 2, 12).max(axis=(2, 4)), 0),
                               rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got["z"], 1 / (1 + np.exp(-np.where(h >= 0, h, h * slope))), rtol=1e-5, atol=1e-6)
    assert len(kernel_templates(ctx, build, {"x": x})) == 2


def test_a_pool_stores_a_chain_of_its_output_read_elsewhere_too():
    """Any windows (here overlapping and padded): the chain over the pool's output, which the
    pool's other reader needs as it is (a dense block's transition pool)."""
    ir = IR()
    x = ir.op("relu", [ir.input(IMG)])
    p = _max_pool(ir, x, window=(3, 3), strides=(2, 2), padding=(1, 1, 1, 1))
    z = _chain(ir, p)
    outputs = {"z": z, "w": ir.op("transpose", [p], (1, 8, 4, 3), permutation=[0, 3, 1, 2])}
    new = checked_rewrite(fuse_pool_map, ir, outputs, rtol=1e-12, atol=1e-12)
    assert _ops(new) == ["relu", "max_pool2d", "transpose"]
    assert new[1].outputs == [p, z] and new[1].attrs["side_of"] == "output"
    # near miss: the chain the output's only reader (an epilogue's place; the pool is left alone)
    ir = IR()
    p = _max_pool(ir, ir.op("relu", [ir.input(IMG)]), window=(3, 3), strides=(2, 2), padding=(1, 1, 1, 1))
    z = _chain(ir, p)
    assert fuse_pool_map(list(ir.nodes), {"z": z}) == ir.nodes


def test_on_the_gpu_the_pool_writes_the_map_of_its_output(ctx, rng):
    """A padded 3x3/2 max pool, its output also a graph output, read by a per-channel scale,
    shift and relu: float64 NumPy's results, one pool kernel (the neg before it is another)."""
    x = rng.standard_normal((1, 7, 9, 8)).astype(np.float32)
    s, b0 = rng.standard_normal((1, 1, 1, 8)).astype(np.float32), rng.standard_normal((8,)).astype(np.float32)

    def build(b, ops):
        p = b.max_pool2d(b.neg(ops["x"]), window_dimensions=[3, 3], strides=[2, 2], padding=[1, 1, 1, 1],
                         layout="nhwc")
        return {"p": p, "z": b.relu(b.add(b.mul(p, b.constant(s)), b.constant(b0)))}

    xp = np.pad(-x.astype(np.float64), [(0, 0), (1, 1), (1, 1), (0, 0)], constant_values=-np.inf)
    want_p = np.stack([xp[:, i:i + 7:2, j:j + 9:2] for i in range(3) for j in range(3)]).max(0)
    got = run_graph(ctx, build, {"x": x})
    np.testing.assert_allclose(got["p"], want_p, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got["z"], np.maximum(want_p * s + b0, 0), rtol=1e-5, atol=1e-6)
    assert kernel_templates(ctx, build, {"x": x}) == ["elementwise/map4.wgsl", "pool/pool2d_vec4.wgsl"]
