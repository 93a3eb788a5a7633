"""The ``fuse_upsampled_residual`` rule: on hand-made IR (no GPU), checked by a float64 evaluator
of the IR, near misses included; and on the GPU against float64 NumPy, where a conv's or a
depthwise + projection kernel's skip add of a 2x bilinear upsampling reads the small image
(one kernel fewer)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from _ireval import checked_rewrite
from _irb import IR
from helpers import kernel_steps, kernel_templates, run_graph
from references import ref_resample

from webnn_gpu.compiler.rules.conv import fuse_depthwise_project
from webnn_gpu.compiler.rules.epilogue import fuse_epilogue
from webnn_gpu.compiler.rules.resample import fuse_upsampled_residual
from webnn_gpu.ops._epilogue import given_up2_ok, up2_step_ok


#: a device where the tile kernel moves 8-value words (lavapipe's profile): where the rule fires
WORDS = SimpleNamespace(_tuning="lane-loop", features=frozenset({"shader-int64"}), limits={})


def _fused(nodes, outputs, context=WORDS):
    """The rules that make the pattern (the add an epilogue step, a depthwise conv and its
    projection one node), then the rule."""
    return fuse_upsampled_residual(fuse_depthwise_project(fuse_epilogue(nodes, outputs), outputs), outputs, context)


_fused.__name__ = "fuse_upsampled_residual"


def _up2(ir, x, mode="linear", axes=(1, 2), factor=(2, 2)):
    shape = list(x.shape)
    for a, f in zip(axes, factor):
        shape[a] *= f
    return ir.op("resample2d", [x], tuple(shape), mode=mode, axes=list(axes))


def _up2_steps(node):
    return [s for s in node.attrs.get("epilogue") or [] if "up2" in s]


def _pointwise(ir, x, c_out, seed=0):
    w = np.random.default_rng(seed).standard_normal((c_out, 1, 1, x.shape[3])) * 0.3
    return ir.conv(x, ir.const(w), bias=ir.const(np.linspace(-1, 1, c_out)))


@pytest.mark.parametrize("small, c", [((1, 3, 3, 8), 8), ((1, 5, 7, 16), 16), ((2, 1, 4, 8), 8)])
def test_the_conv_reads_the_small_image(small, c):
    ir = IR()
    low = ir.op("sigmoid", [ir.input(small)])
    skip = ir.input((small[0], 2 * small[1], 2 * small[2], 6))
    out = ir.op("add", [ir.op("relu", [_pointwise(ir, skip, c)]), _up2(ir, low)])
    new = checked_rewrite(_fused, ir, {"y": out}, rtol=1e-12, atol=1e-12)
    assert [n.op for n in new] == ["sigmoid", "conv2d"]
    conv = new[-1]
    assert low in conv.inputs and [s["op"] for s in conv.attrs["epilogue"]] == ["relu", "add"]
    assert _up2_steps(conv) == [{"op": "add", "input": conv.inputs.index(low), "up2": {"steps": []}}]


def test_the_upsamplings_clamp_is_applied_to_the_interpolated_operand():
    """(A conv the compiler ran before the resample: its relu6 stays the resample's step.)"""
    ir = IR()
    low = ir.input((1, 4, 4, 8))
    h = _pointwise(ir, ir.input((1, 8, 8, 4)), 8)  # (before the resample: the conv hosts the add)
    out = ir.op("add", [h, ir.op("clamp", [_up2(ir, low)], min_value=0.0, max_value=6.0)])
    new = checked_rewrite(_fused, ir, {"y": out}, rtol=1e-12, atol=1e-12)
    assert [n.op for n in new] == ["conv2d"]
    (step,) = _up2_steps(new[0])
    assert step["up2"] == {"steps": [{"op": "clamp", "min_value": 0.0, "max_value": 6.0}]}


def test_a_depthwise_projection_keeps_the_upsampling():
    """(The depthwise + projection kernel measured slower reading the small image.)"""
    ir = IR()
    low = ir.input((1, 4, 4, 8))
    x = ir.input((1, 8, 8, 16))
    rng = np.random.default_rng(1)
    dw = ir.conv(x, ir.const(rng.standard_normal((16, 3, 3, 1)) * 0.3), groups=16, pad=1)
    out = ir.op("add", [_pointwise(ir, dw, 8), _up2(ir, low)])
    nodes = fuse_depthwise_project(fuse_epilogue(list(ir.nodes), {"y": out}), {"y": out})
    assert [n.op for n in nodes] == ["resample2d", "depthwise_project"]
    assert fuse_upsampled_residual(nodes, {"y": out}, WORDS) == nodes


def test_a_large_small_image_keeps_the_upsampling(monkeypatch):
    """Past UP2_RESIDUAL_MAX_BYTES of small image the doubling kernel measured as fast;
    WEBNN_GPU_FORCE_UP2_RESIDUAL=any lifts the limit, =off declines every one."""
    from webnn_gpu.ops.conv import UP2_RESIDUAL_MAX_BYTES

    def graph(h, c):
        ir = IR()
        h_ = _pointwise(ir, ir.input((1, 2 * h, 2 * h, 4)), c)
        return ir, {"y": ir.op("add", [h_, _up2(ir, ir.input((1, h, h, c)))])}

    ir, outputs = graph(32, 32)  # 128 KiB
    assert 32 * 32 * 32 * 4 == UP2_RESIDUAL_MAX_BYTES
    assert [n.op for n in _fused(list(ir.nodes), outputs)] == ["conv2d"]
    ir, outputs = graph(32, 40)
    nodes = fuse_epilogue(list(ir.nodes), outputs)
    assert fuse_upsampled_residual(nodes, outputs, WORDS) == nodes
    monkeypatch.setenv("WEBNN_GPU_FORCE_UP2_RESIDUAL", "any")
    assert [n.op for n in checked_rewrite(_fused, ir, outputs, rtol=1e-12, atol=1e-12)] == ["conv2d"]
    monkeypatch.setenv("WEBNN_GPU_FORCE_UP2_RESIDUAL", "off")
    ir, outputs = graph(4, 8)
    nodes = fuse_epilogue(list(ir.nodes), outputs)
    assert fuse_upsampled_residual(nodes, outputs, WORDS) == nodes
    monkeypatch.setenv("WEBNN_GPU_FORCE_UP2_RESIDUAL", "of")
    with pytest.raises(ValueError, match="WEBNN_GPU_FORCE_UP2_RESIDUAL"):
        fuse_upsampled_residual(nodes, outputs, WORDS)


@pytest.mark.parametrize("case", ["nearest", "one axis", "factor 3", "nchw axes", "second reader", "output",
                                  "host image", "read twice", "broadcast", "channels 6", "operand step",
                                  "no host", "3x3 host", "channels 12", "no words"])
def test_near_misses_leave_the_upsampling(case):
    ir = IR()
    c = {"channels 6": 6, "channels 12": 12}.get(case, 8)
    low = ir.input((1, 4, 4, 1 if case == "broadcast" else c))
    kw = {"nearest": {"mode": "nearest-neighbor"}, "one axis": {"factor": (2, 1)}, "factor 3": {"factor": (3, 3)},
          "nchw axes": {"axes": (2, 3)}}.get(case, {})
    if case == "nchw axes":
        low = ir.input((1, c, 4, 4))
    up = _up2(ir, low, **kw)
    if case == "operand step":  # (palm detection's: a prelu and an add of another value)
        up = ir.op("prelu", [up, ir.const(np.linspace(0.1, 0.2, c), (1, 1, 1, c))])
    big = tuple(up.shape) if case not in ("nchw axes", "broadcast") else (1, 8, 8, c)
    h = _pointwise(ir, ir.input((*big[:3], 4)), c)
    if case == "host image":
        out = ir.op("add", [_pointwise(ir, up, c), h])
    elif case == "read twice":
        out = ir.op("mul", [ir.op("add", [h, up]), up])
    elif case == "no host":
        out = ir.op("add", [ir.op("sigmoid", [ir.input(big)]), up])
    elif case == "3x3 host":
        out = ir.op("add", [ir.conv(ir.input((*big[:3], 4)), ir.filt(c, 3, 4), pad=1), up])
    elif case == "nchw axes":
        out = ir.op("add", [ir.op("transpose", [h], (1, c, 8, 8), permutation=[0, 3, 1, 2]), up])
    else:
        out = ir.op("add", [h, up])
    outputs = {"y": out}
    if case == "second reader":
        outputs["z"] = ir.op("neg", [up])
    if case == "output":
        outputs["u"] = up
    nodes = fuse_epilogue(list(ir.nodes), outputs)
    assert any(n.op == "resample2d" for n in nodes)
    ctx = SimpleNamespace(_tuning="default", features=frozenset(), limits={}) if case == "no words" else WORDS
    assert fuse_upsampled_residual(nodes, outputs, ctx) == nodes, case


def test_the_near_miss_graph_fires_when_legal():
    """(The near misses' graph with a legal upsampling: the rule fires there.)"""
    ir = IR()
    up = _up2(ir, ir.input((1, 4, 4, 8)))
    h = _pointwise(ir, ir.input((1, 8, 8, 4)), 8)
    new = checked_rewrite(_fused, ir, {"y": ir.op("add", [h, up])}, rtol=1e-12, atol=1e-12)
    assert [n.op for n in new] == ["conv2d"]


def test_up2_step_ok():
    from types import SimpleNamespace as V

    f32 = "float32"
    x, out = V(shape=(1, 3, 5, 8), data_type=f32), V(shape=(1, 6, 10, 8), data_type=f32)
    step = {"op": "add", "input": 3, "up2": {"steps": []}}
    assert up2_step_ok(step, x, out) and given_up2_ok(step, x, out)
    assert up2_step_ok({**step, "reverse": True}, x, out)
    assert up2_step_ok({**step, "up2": {"steps": [{"op": "relu"}]}}, x, out)
    assert not up2_step_ok({**step, "up2": {"steps": [{"op": "sigmoid"}]}}, x, out)  # not a vec4 step
    assert not up2_step_ok({**step, "up2": {"steps": [{"op": "add", "input": 1}]}}, x, out)
    assert not up2_step_ok({**step, "up2": {"steps": []}, "axis": 3}, x, out)
    assert not up2_step_ok({**step, "scale": 2.0}, x, out)
    assert not up2_step_ok({**step, "up2": True}, x, out)
    assert not up2_step_ok(step, x, V(shape=(1, 6, 11, 8), data_type=f32))
    assert not up2_step_ok(step, x, V(shape=(1, 6, 10, 4), data_type=f32))
    six = V(shape=(1, 3, 5, 6), data_type=f32)
    assert up2_step_ok(step, six, V(shape=(1, 6, 10, 6), data_type=f32))
    assert not given_up2_ok(step, six, V(shape=(1, 6, 10, 6), data_type=f32))


# ---------------------------------------------------------------------------------------- GPU


def _ref_up2(x):
    return ref_resample(x.astype(np.float64), "linear", [2 * x.shape[1], 2 * x.shape[2]], axes=(1, 2))


@pytest.mark.parametrize("n, h, w, c, dt", [(1, 6, 6, 96, "float32"), (1, 5, 7, 12, "float32"),
                                            (2, 3, 1, 8, "float32"), (1, 2, 2, 8, "float32"),
                                            (1, 5, 7, 12, "float16"), (1, 6, 6, 32, "float16")])
def test_on_the_gpu_a_pointwise_conv_adds_the_upsampling(ctx, rng, monkeypatch, n, h, w, c, dt):
    """relu(conv1x1(skip) + b) + upsample2x(low): float64 NumPy's result without the resample's
    kernel (the rule off: one more). The tile kernel loads the small image as words (channels a
    multiple of 8) or, forced (12 channels), as vec4s; 2 x 2 upsampled pixels run on the
    small-product kernel, which loads it through the epilogue (the scalar helper)."""
    if c % 8:
        monkeypatch.setenv("WEBNN_GPU_FORCE_UP2_RESIDUAL", "any")
    np_dt = np.float16 if dt == "float16" else np.float32
    k = 20
    skip = rng.standard_normal((n, 2 * h, 2 * w, k)).astype(np_dt)
    low = rng.standard_normal((n, h, w, c)).astype(np_dt)
    wt = (rng.standard_normal((c, k)) * 0.3).astype(np_dt)
    bias = rng.standard_normal(c).astype(np_dt)

    def build(b, ops):
        y = b.conv2d(ops["skip"], b.constant(wt.reshape(c, 1, 1, k)), bias=b.constant(bias), input_layout="nhwc",
                     filter_layout="ohwi")
        up = b.resample2d(ops["low"], mode="linear", sizes=[2 * h, 2 * w], axes=[1, 2])
        return {"y": b.add(b.relu(y), up)}

    want = np.maximum(skip.astype(np.float64) @ wt.T.astype(np.float64) + bias, 0) + _ref_up2(low)
    inputs = {"skip": skip, "low": low}
    got = run_graph(ctx, build, inputs)
    tol = 2e-2 if dt == "float16" else 1e-5
    np.testing.assert_allclose(got["y"].astype(np.float64), want, rtol=tol, atol=tol)
    steps = kernel_steps(ctx, build, inputs)
    templates = [s.template for s in steps]
    assert not any(t.startswith("resample/") for t in templates), templates
    if templates == ["matmul/tile.wgsl"]:  # words of 8 channels, else vec4s
        assert ("epilogue_g8(" if c % 8 == 0 else "epilogue_g4(") in steps[0].wgsl
        assert ("epilogue_g8(" in steps[0].wgsl) == (c % 8 == 0)
    monkeypatch.setenv("WEBNN_GPU_PASSES", "-fuse_upsampled_residual")
    assert len(kernel_templates(ctx, build, inputs)) == len(templates) + 1
    if c % 8:
        monkeypatch.delenv("WEBNN_GPU_FORCE_UP2_RESIDUAL")
        monkeypatch.delenv("WEBNN_GPU_PASSES")
        assert any(t.startswith("resample/") for t in kernel_templates(ctx, build, inputs))


def test_on_the_gpu_the_clamped_upsampling_of_a_swapped_conv(ctx, rng):
    """pose detection's top-down step: add(conv1x1(skip), relu6(conv1x1(upsample2x(low)))):
    swap_resample_conv runs the second conv on the small image, its relu6 stays after the
    upsampling and is applied to the interpolated operand; one kernel per conv."""
    low = rng.standard_normal((1, 7, 7, 24)).astype(np.float32)
    skip = rng.standard_normal((1, 14, 14, 12)).astype(np.float32)
    w1 = (rng.standard_normal((16, 24)) * 0.5).astype(np.float32)
    w2 = (rng.standard_normal((16, 12)) * 0.3).astype(np.float32)

    def build(b, ops):  # (the skip path first, as in the model: its conv hosts the add)
        s = b.conv2d(ops["skip"], b.constant(w2.reshape(16, 1, 1, 12)), input_layout="nhwc", filter_layout="ohwi")
        up = b.resample2d(ops["low"], mode="linear", sizes=[14, 14], axes=[1, 2])
        t = b.clamp(b.conv2d(up, b.constant(w1.reshape(16, 1, 1, 24)), input_layout="nhwc", filter_layout="ohwi"),
                    min_value=0.0, max_value=6.0)
        return {"y": b.add(s, t)}

    want = (skip.astype(np.float64) @ w2.T.astype(np.float64)
            + np.clip(_ref_up2(low) @ w1.T.astype(np.float64), 0, 6))
    inputs = {"low": low, "skip": skip}
    got = run_graph(ctx, build, inputs)
    np.testing.assert_allclose(got["y"], want, rtol=1e-4, atol=1e-4)
    assert kernel_templates(ctx, build, inputs) == ["matmul/tile.wgsl", "matmul/tile.wgsl"]


@pytest.mark.parametrize("side, c, o", [(16, 24, 8), (9, 16, 12)])
def test_on_the_gpu_a_depthwise_projection_keeps_the_upsampling(ctx, rng, side, c, o):
    """depthwise 3x3 -> relu -> 1x1 projection + upsample2x(low): float64 NumPy's result, the
    doubling kernel kept (an ``"up2"`` step on the depthwise + projection kernel measured slower)."""
    low_hw = -(-side // 2)
    x = rng.standard_normal((1, 2 * low_hw, 2 * low_hw, c)).astype(np.float32)
    low = rng.standard_normal((1, low_hw, low_hw, o)).astype(np.float32)
    wd = (rng.standard_normal((c, 3, 3)) * 0.3).astype(np.float32)
    wp = (rng.standard_normal((o, c)) * 0.3).astype(np.float32)
    bp = rng.standard_normal(o).astype(np.float32)

    def build(b, ops):
        f = b.constant(np.ascontiguousarray(wd.transpose(1, 2, 0)).reshape(1, 3, 3, c))
        dw = b.relu(b.conv2d(ops["x"], f, padding=[1, 1, 1, 1], groups=c, input_layout="nhwc", filter_layout="ihwo"))
        y = b.conv2d(dw, b.constant(wp.reshape(o, 1, 1, c)), bias=b.constant(bp), input_layout="nhwc",
                     filter_layout="ohwi")
        return {"y": b.add(y, b.resample2d(ops["low"], mode="linear", scales=[2.0, 2.0], axes=[1, 2]))}

    x64 = np.pad(x.astype(np.float64), [(0, 0), (1, 1), (1, 1), (0, 0)])
    hh = x.shape[1]
    d = sum(x64[:, i:i + hh, j:j + hh] * wd[:, i, j] for i in range(3) for j in range(3))
    want = np.maximum(d, 0) @ wp.T.astype(np.float64) + bp + _ref_up2(low)
    inputs = {"x": x, "low": low}
    got = run_graph(ctx, build, inputs)
    np.testing.assert_allclose(got["y"], want, rtol=1e-4, atol=1e-4)
    assert any(t.startswith("resample/") for t in kernel_templates(ctx, build, inputs))


@pytest.mark.parametrize("case", ["channels 6", "channels 12", "nearest", "output", "broadcast", "sizes"])
def test_on_the_gpu_the_near_misses_keep_the_resample(ctx, rng, case):
    """Near misses on the GPU: float64 NumPy's result, the resample's kernel kept (channels not a
    multiple of 8, nearest-neighbor, the upsampling also an output, a one-channel upsampling
    broadcast over the conv's channels, sizes that are not 2x)."""
    c = {"channels 6": 6, "channels 12": 12}.get(case, 8)
    cl = 1 if case == "broadcast" else c
    h, w = 5, 6
    oh, ow = (2 * h + 1, 2 * w) if case == "sizes" else (2 * h, 2 * w)
    skip = rng.standard_normal((1, oh, ow, 16)).astype(np.float32)
    low = rng.standard_normal((1, h, w, cl)).astype(np.float32)
    wt = (rng.standard_normal((c, 16)) * 0.3).astype(np.float32)
    mode = "nearest-neighbor" if case == "nearest" else "linear"

    def build(b, ops):
        y = b.conv2d(ops["skip"], b.constant(wt.reshape(c, 1, 1, 16)), input_layout="nhwc", filter_layout="ohwi")
        up = b.resample2d(ops["low"], mode=mode, sizes=[oh, ow], axes=[1, 2])
        out = {"y": b.add(y, up)}
        if case == "output":
            out["up"] = up
        return out

    up = ref_resample(low.astype(np.float64), mode, [oh, ow], axes=(1, 2))
    inputs = {"skip": skip, "low": low}
    got = run_graph(ctx, build, inputs)
    np.testing.assert_allclose(got["y"], skip.astype(np.float64) @ wt.T.astype(np.float64) + up, rtol=1e-5, atol=1e-5)
    if case == "output":
        np.testing.assert_allclose(got["up"], up, rtol=1e-6, atol=1e-6)
    assert any(t.startswith("resample/") for t in kernel_templates(ctx, build, inputs)), case
