"""The ``fuse_pool_residual`` rule: on hand-made IR (no GPU), checked by a float64 evaluator of
the IR, near misses included; and on the GPU against float64 NumPy, where the residual max pool
of a strided block (maybe channel-padded) is read by the kernel that adds it (one kernel fewer)."""

from __future__ import annotations

import numpy as np
import pytest
from _ireval import checked_rewrite
from _irb import IR
from helpers import kernel_templates, run_graph

from webnn_gpu.compiler.rules.epilogue import fuse_epilogue
from webnn_gpu.compiler.rules.layout import fold_layout
from webnn_gpu.compiler.rules.pool import fuse_pool_residual
from webnn_gpu.ops._epilogue import pool_step_ok


def _pool(ir, x, op="max_pool2d", window=(2, 2), strides=None, padding=(0, 0, 0, 0), layout="nhwc", dil=(1, 1)):
    n, h, w, c = x.shape if layout == "nhwc" else (x.shape[0], x.shape[2], x.shape[3], x.shape[1])
    st = list(strides or window)
    oh = (h + padding[0] + padding[1] - window[0]) // st[0] + 1
    ow = (w + padding[2] + padding[3] - window[1]) // st[1] + 1
    shape = (n, oh, ow, c) if layout == "nhwc" else (n, c, oh, ow)
    return ir.op(op, [x], shape, window=list(window), padding=list(padding), strides=st, dilations=list(dil),
                 layout=layout)


def _block(ir, x, c_out, *, stride=2, pool_kw=None, pad_channels=True, layout="nhwc"):
    """A strided block's two branches: a 1x1 conv of a stride-2 depthwise conv of ``x``, plus
    the pool of ``x`` (channel-padded with zeros up to ``c_out``), then a relu. Returns the
    relu's value and the pool's."""
    c = x.shape[3]
    rng = np.random.default_rng(3)
    dw = ir.conv(x, ir.const(rng.standard_normal((c, 3, 3, 1)) * 0.3), groups=c, pad=1, stride=stride)
    y = ir.conv(dw, ir.const(rng.standard_normal((c_out, 1, 1, c)) * 0.3), bias=ir.const(rng.standard_normal(c_out)))
    p = _pool(ir, x, **(pool_kw or {"window": (2, 2)} if stride == 2 else {"window": (3, 3), "strides": (1, 1),
                                                                            "padding": (1, 1, 1, 1)}))
    r = p
    if pad_channels and c_out != c:
        r = ir.op("pad", [p], (*p.shape[:3], c_out), beginning_padding=[0, 0, 0, 0],
                  ending_padding=[0, 0, 0, c_out - c], mode="constant", value=0.0)
    return ir.op("relu", [ir.op("add", [y, r])]), p


def _fused(nodes, outputs, context=None):
    """The rules that make the pattern (the add an epilogue step, the pad read in place), then
    the rule."""
    return fuse_pool_residual(fold_layout(fuse_epilogue(nodes, outputs), outputs), outputs)


_fused.__name__ = "fuse_pool_residual"


def _reads_pool(node):
    return [s["pool"] for s in node.attrs.get("epilogue") or [] if "pool" in s]


@pytest.mark.parametrize("c_out", [8, 16])
def test_the_conv_reads_the_pool_window_of_the_block_input(c_out):
    ir = IR()
    x = ir.op("relu", [ir.input((1, 8, 8, 8))])
    out, p = _block(ir, x, c_out)
    new = checked_rewrite(_fused, ir, {"y": out}, rtol=1e-12, atol=1e-12)
    assert [n.op for n in new] == ["relu", "conv2d", "conv2d"]
    conv = new[-1]
    (pool,) = _reads_pool(conv)
    assert pool == {"op": "max", "window": [2, 2], "strides": [2, 2], "padding": [0, 0, 0, 0], "layout": "nhwc",
                    "shape": [1, 4, 4, 8]}
    assert x in conv.inputs and p not in conv.inputs
    step = next(s for s in conv.attrs["epilogue"] if "pool" in s)
    assert ("pad" in step) == (c_out != 8)


@pytest.mark.parametrize("kw", [
    {"op": "average_pool2d", "window": (2, 2)},
    {"op": "max_pool2d", "window": (3, 3), "strides": (2, 2), "padding": (1, 1, 1, 1)},
    {"op": "max_pool2d", "window": (3, 3), "strides": (2, 2), "padding": (0, 1, 0, 1)},
    {"op": "average_pool2d", "window": (3, 1), "strides": (2, 2), "padding": (0, 0, 0, 0)},
])
def test_other_windows(kw):
    ir = IR()
    x = ir.input((1, 9, 8, 4) if kw["window"] == (3, 1) else (1, 8, 8, 4))
    c = x.shape[3]
    rng = np.random.default_rng(4)
    pshape = _pool(IR(), x, **kw).shape
    h = ir.conv(ir.op("sigmoid", [ir.input(pshape)]), ir.const(rng.standard_normal((c, 1, 1, c))))
    out = ir.op("add", [_pool(ir, x, **kw), h])  # (the pool after the conv: the conv hosts the add)
    new = checked_rewrite(_fused, ir, {"y": out}, rtol=1e-12, atol=1e-12)
    assert "max_pool2d" not in [n.op for n in new] and "average_pool2d" not in [n.op for n in new]
    assert len(_reads_pool(new[-1])) == 1


def test_nchw_pool():
    ir = IR()
    x = ir.input((1, 4, 6, 6))
    w = ir.const(np.random.default_rng(5).standard_normal((4, 4, 1, 1)))
    h = ir.op("conv2d", [ir.input((1, 4, 3, 3)), w], (1, 4, 3, 3), padding=[0] * 4, strides=[1, 1],
              dilations=[1, 1], groups=1, input_layout="nchw", filter_layout="oihw")
    p = _pool(ir, x, layout="nchw")
    new = checked_rewrite(_fused, ir, {"y": ir.op("add", [h, p])}, rtol=1e-12, atol=1e-12)
    assert [n.op for n in new] == ["conv2d"] and _reads_pool(new[0])[0]["layout"] == "nchw"


@pytest.mark.parametrize("case", ["second reader", "output", "host image", "average padded", "taps", "dilation",
                                  "average float16", "side map", "read twice"])
def test_near_misses_leave_the_pool(case):
    ir = IR("float16" if case == "average float16" else "float32")
    x = ir.input((1, 8, 8, 4))
    kw = {"average padded": {"op": "average_pool2d", "window": (3, 3), "strides": (2, 2), "padding": (1, 1, 1, 1)},
          "taps": {"window": (4, 4), "strides": (2, 2)},
          "dilation": {"window": (2, 2), "dil": (2, 2)},
          "average float16": {"op": "average_pool2d", "window": (2, 2)}}.get(case, {"window": (2, 2)})
    w = ir.const(np.random.default_rng(6).standard_normal((4, 1, 1, 4)))
    pshape = _pool(IR(), x, **kw).shape
    h = ir.conv(ir.input(pshape), w)  # (before the pool: the conv hosts the add)
    p = _pool(ir, x, **kw)
    if case == "host image":
        out = ir.op("add", [ir.conv(p, w), h])
    elif case == "read twice":
        out = ir.op("mul", [ir.op("add", [h, p]), p])
    else:
        out = ir.op("add", [h, p])
    outputs = {"y": out}
    if case == "second reader":
        outputs["z"] = ir.op("neg", [p])
    if case == "output":
        outputs["p"] = p
    nodes = fold_layout(fuse_epilogue(list(ir.nodes), outputs), outputs)
    if case == "side map":
        pool = next(n for n in nodes if n.op == "max_pool2d")
        pool.attrs["side"] = []  # (as fuse_pool_map leaves a pool storing a map)
    pool = next(n for n in nodes if n.op.endswith("_pool2d"))
    assert "epilogue" not in pool.attrs and any(p in n.inputs for n in nodes if n is not pool)
    new = fuse_pool_residual(nodes, outputs)
    assert new == nodes, case


def test_the_near_miss_graphs_fire_when_legal():
    """(The near misses' graph with a legal pool: the rule fires there.)"""
    ir = IR()
    x = ir.input((1, 8, 8, 4))
    h = ir.conv(ir.input((1, 4, 4, 4)), ir.const(np.random.default_rng(6).standard_normal((4, 1, 1, 4))))
    new = checked_rewrite(_fused, ir, {"y": ir.op("add", [h, _pool(ir, x, window=(2, 2))])}, rtol=1e-12,
                          atol=1e-12)
    assert [n.op for n in new] == ["conv2d"]


@pytest.mark.parametrize("c_out", [8, 16])
def test_a_pool_ahead_of_the_conv_moves_into_it(c_out):
    """The pool before the convs in the node list: fuse_epilogue gives the add (and the relu)
    to the pool; the rule gives them back to the conv making the other branch."""
    ir = IR()
    x = ir.op("sigmoid", [ir.input((1, 8, 8, 8))])
    p = _pool(ir, x)
    r = p
    if c_out != 8:
        r = ir.op("pad", [p], (1, 4, 4, c_out), beginning_padding=[0, 0, 0, 0], ending_padding=[0, 0, 0, c_out - 8],
                  mode="constant", value=0.0)
    rng = np.random.default_rng(8)
    dw = ir.conv(x, ir.const(rng.standard_normal((8, 3, 3, 1)) * 0.3), groups=8, pad=1, stride=2)
    y = ir.conv(dw, ir.const(rng.standard_normal((c_out, 1, 1, 8)) * 0.3), bias=ir.const(rng.standard_normal(c_out)))
    slope = ir.const(np.linspace(0.1, 0.3, c_out), (1, 1, 1, c_out))
    out = ir.op("prelu", [ir.op("add", [r, y]), slope])
    before = fold_layout(fuse_epilogue(list(ir.nodes), {"y": out}), {"y": out})
    new = checked_rewrite(_fused, ir, {"y": out}, rtol=1e-12, atol=1e-12)
    assert not any(n.op == "max_pool2d" for n in new)
    conv = new[-1]
    assert conv.op == "conv2d" and conv.outputs == [out] and len(_reads_pool(conv)) == 1
    assert [s["op"] for s in conv.attrs["epilogue"]] == ["add", "prelu"]
    if c_out == 8:  # (channel-padded, the conv hosts the add from the start)
        assert any(n.op == "max_pool2d" and n.attrs.get("epilogue") for n in before)


@pytest.mark.parametrize("case", ["branch read elsewhere", "operand per element", "host loads already"])
def test_a_pool_ahead_of_the_conv_near_misses(case):
    ir = IR()
    x = ir.input((1, 8, 8, 8))
    p = _pool(ir, x)
    rng = np.random.default_rng(9)
    h = ir.input((1, 4, 4, 8))
    y = ir.conv(h, ir.const(rng.standard_normal((8, 1, 1, 8))))
    if case == "host loads already":
        y = ir.op("add", [y, ir.op("neg", [ir.input((1, 4, 4, 8))])])
    s = ir.op("add", [p, y])
    outputs = {}
    if case == "operand per element":
        s = ir.op("mul", [s, ir.input((1, 4, 4, 8))])
    if case == "branch read elsewhere":
        outputs["z"] = ir.op("neg", [y])
    outputs["y"] = ir.op("relu", [s])
    nodes = fold_layout(fuse_epilogue(list(ir.nodes), outputs), outputs)
    pool = next(n for n in nodes if n.op == "max_pool2d")
    if case != "branch read elsewhere":
        assert pool.attrs.get("epilogue"), "(the pool hosts the add: the pattern)"
    assert fuse_pool_residual(nodes, outputs) == nodes, case


def test_pool_step_ok_checks_every_window():
    max22 = {"op": "max", "window": [2, 2], "strides": [2, 2], "padding": [0, 0, 0, 0], "layout": "nhwc",
             "shape": [1, 4, 4, 8]}
    assert pool_step_ok((1, 8, 8, 8), max22)
    assert pool_step_ok((1, 9, 9, 8), max22)  # the last row and column are read by no window
    assert not pool_step_ok((1, 8, 8, 8), {**max22, "shape": [1, 5, 4, 8]})  # a window past the input
    assert not pool_step_ok((1, 8, 8, 8), {**max22, "shape": [1, 4, 4, 4]})  # other channels
    ceil = {**max22, "window": [3, 3], "shape": [1, 4, 4, 8]}  # ceil rounding: a window holds 2 rows of 3
    assert pool_step_ok((1, 8, 8, 8), ceil) and not pool_step_ok((1, 8, 8, 8), {**ceil, "op": "average"})
    assert not pool_step_ok((1, 8, 8, 8), {**max22, "padding": [2, 0, 0, 0], "shape": [1, 5, 4, 8]})  # all padding
    assert not pool_step_ok((1, 8, 8, 8), {**max22, "op": "l2"})


# ---------------------------------------------------------------------------------------- GPU


def _ref_max_pool(x, k=2):
    n, h, w, c = x.shape
    return x[:, :h // k * k, :w // k * k].reshape(n, h // k, k, w // k, k, c).max(axis=(2, 4))


def _ref_dw(x, w, stride, pad):
    """Depthwise conv, NHWC, filter [C, KH, KW] (float64)."""
    n, h, wd, c = x.shape
    kh, kw = w.shape[1:]
    xp = np.pad(x, [(0, 0), (pad[0], pad[1]), (pad[2], pad[3]), (0, 0)])
    oh, ow = (xp.shape[1] - kh) // stride + 1, (xp.shape[2] - kw) // stride + 1
    out = np.zeros((n, oh, ow, c))
    for i in range(kh):
        for j in range(kw):
            out += xp[:, i:i + (oh - 1) * stride + 1:stride, j:j + (ow - 1) * stride + 1:stride] * w[:, i, j]
    return out


@pytest.mark.parametrize("c_in, c_out, side, pool_first", [(8, 16, 12, False), (16, 16, 12, False), (4, 8, 6, False),
                                                         (16, 16, 12, True)])
def test_on_the_gpu_the_block_reads_its_pooled_residual(ctx, rng, monkeypatch, c_in, c_out, side, pool_first):
    """x -> depthwise 3x3 stride 2 -> 1x1 conv -> add(channel-padded max_pool2d(x)) -> prelu,
    NHWC float32: float64 NumPy's result without the pool's kernel (the rule off: one more)."""
    x = rng.standard_normal((1, side, side, c_in)).astype(np.float32)
    wd = (rng.standard_normal((c_in, 3, 3)) * 0.3).astype(np.float32)
    wp = (rng.standard_normal((c_out, c_in)) * 0.3).astype(np.float32)
    bias = rng.standard_normal(c_out).astype(np.float32)
    slope = rng.uniform(0.05, 0.5, c_out).astype(np.float32)

    def build(b, ops):
        if pool_first:  # (the pool's node first: it takes the add, the rule hands it to the conv)
            p = b.max_pool2d(ops["x"], window_dimensions=[2, 2], strides=[2, 2], layout="nhwc")
        f = b.constant(np.ascontiguousarray(wd.transpose(1, 2, 0)).reshape(1, 3, 3, c_in))
        dw = b.conv2d(ops["x"], f, padding=[0, 1, 0, 1], strides=[2, 2],
                      groups=c_in, input_layout="nhwc", filter_layout="ihwo")
        y = b.conv2d(dw, b.constant(wp.reshape(c_out, 1, 1, c_in)), bias=b.constant(bias), input_layout="nhwc",
                     filter_layout="ohwi")
        if not pool_first:
            p = b.max_pool2d(ops["x"], window_dimensions=[2, 2], strides=[2, 2], layout="nhwc")
        if c_out != c_in:
            p = b.pad(p, [0, 0, 0, 0], [0, 0, 0, c_out - c_in])
        return {"y": b.prelu(b.add(y, p), b.constant(slope))}

    x64 = x.astype(np.float64)
    y = _ref_dw(x64, wd.astype(np.float64), 2, (0, 1, 0, 1)) @ wp.T.astype(np.float64) + bias
    p = np.pad(_ref_max_pool(x64), [(0, 0)] * 3 + [(0, c_out - c_in)])
    s = y + p
    want = np.where(s >= 0, s, s * slope)
    got = run_graph(ctx, build, {"x": x})
    np.testing.assert_allclose(got["y"], want, rtol=1e-5, atol=1e-5)
    templates = kernel_templates(ctx, build, {"x": x})
    assert not any(t.startswith("pool/") for t in templates), templates
    monkeypatch.setenv("WEBNN_GPU_PASSES", "-fuse_pool_residual")
    assert len(kernel_templates(ctx, build, {"x": x})) == len(templates) + 1


@pytest.mark.parametrize("kind, c", [("average", 16), ("max padded", 16), ("max padded", 6)])
def test_on_the_gpu_a_pool_in_a_conv_epilogue(ctx, rng, kind, c):
    """A pointwise conv (the tile kernel; 6 channels: scalar stores) adding an average pool 2x2/2
    or a max pool 3x3/2 with padding of another value: float64 NumPy's result in one kernel."""
    x = rng.standard_normal((1, 24, 24, c)).astype(np.float32)
    h = rng.standard_normal((1, 12, 12, c)).astype(np.float32)
    w = (rng.standard_normal((c, c)) * 0.3).astype(np.float32)

    def build(b, ops):
        y = b.conv2d(ops["h"], b.constant(w.reshape(c, 1, 1, c)), input_layout="nhwc", filter_layout="ohwi")
        if kind == "average":
            p = b.average_pool2d(ops["x"], window_dimensions=[2, 2], strides=[2, 2], layout="nhwc")
        else:
            p = b.max_pool2d(ops["x"], window_dimensions=[3, 3], strides=[2, 2], padding=[1, 0, 1, 0],
                             layout="nhwc")
        return {"y": b.add(y, p)}

    x64 = x.astype(np.float64)
    if kind == "average":
        p = x64.reshape(1, 12, 2, 12, 2, c).mean(axis=(2, 4))
    else:
        xp = np.pad(x64, [(0, 0), (1, 0), (1, 0), (0, 0)], constant_values=-np.inf)
        p = np.stack([xp[:, i:i + 23:2, j:j + 23:2] for i in range(3) for j in range(3)]).max(0)
    want = h.astype(np.float64) @ w.T.astype(np.float64) + p
    got = run_graph(ctx, build, {"x": x, "h": h})
    np.testing.assert_allclose(got["y"], want, rtol=1e-5, atol=1e-5)
    assert kernel_templates(ctx, build, {"x": x, "h": h}) == ["matmul/tile.wgsl"]
