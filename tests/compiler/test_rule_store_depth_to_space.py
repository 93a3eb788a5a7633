"""The ``store_depth_to_space`` rule: where it fires on hand-made IR (no GPU), near misses
included; and on the GPU against float64 NumPy, where a depthwise conv stores its output in the
order of the depth_to_space after it (no transpose kernel), for block sizes 2 and 3, 4-16
channels per block position, strides 1 and 2, padding, an epilogue, the 6-D and the 5-D
spelling of the reshape, both run paths."""

from __future__ import annotations

import numpy as np
import pytest
from _irb import IR
from helpers import assert_close, kernel_steps, run_graph

from webnn_gpu.compiler.rules.layout import store_depth_to_space


def _d2s_ref(y, b: int):
    n, h, w, c = y.shape
    return y.reshape(n, h, w, b, b, c // (b * b)).transpose(0, 1, 3, 2, 4, 5).reshape(n, h * b, w * b, -1)


# ---------------------------------------------------------------- IR (no GPU)
def _ir_d2s(ir, y, b: int, order: str = "dcr"):
    """depth_to_space of ``y`` as reshape -> transpose -> reshape (``order``: "dcr", TensorFlow's,
    "crd", ONNX's other mode, or "s2d" a space_to_depth-like transpose)."""
    n, h, w, c = y.shape
    cq = c // (b * b)
    if order == "dcr":
        r = ir.op("reshape", [y], (n, h, w, b, b, cq), alias=True)
        t = ir.op("transpose", [r], (n, h, b, w, b, cq), permutation=[0, 1, 3, 2, 4, 5])
    elif order == "crd":
        r = ir.op("reshape", [y], (n, h, w, cq, b, b), alias=True)
        t = ir.op("transpose", [r], (n, h, b, w, b, cq), permutation=[0, 1, 4, 2, 5, 3])
    else:
        r = ir.op("reshape", [y], (n, h, w, b, b, cq), alias=True)
        t = ir.op("transpose", [r], (n, w, h, b, b, cq), permutation=[0, 2, 1, 3, 4, 5])
    return ir.op("reshape", [t], (n, h * b, w * b, cq), alias=True)


def _dw(ir, c: int, hw: int = 6):
    x = ir.input((1, hw, hw, c))
    return ir.conv(x, ir.filt(c, 3, 1), groups=c, pad=1)


def test_fires_on_a_depthwise_conv():
    ir = IR()
    y = _dw(ir, 32)
    out = _ir_d2s(ir, y, 2)
    nodes = list(ir.nodes)
    new = store_depth_to_space(nodes, {"y": out})
    conv = next(n for n in new if n.op == "conv2d")
    t = next(n for n in new if n.op == "transpose")
    assert conv.attrs["store_d2s"] == 2 and t.attrs["alias"]
    assert "store_d2s" not in y.producer.attrs and not y.producer.attrs.get("alias")  # its input is not mutated


@pytest.mark.parametrize("case", ["crd order", "not a d2s", "one channel per position", "2 channels per position",
                                  "conv output read elsewhere", "conv output is an output", "reshape read elsewhere",
                                  "dense conv", "channel multiplier"])
def test_near_misses_keep_the_transpose(case):
    ir = IR()
    outputs = {}
    b, order = 2, "dcr"
    if case == "one channel per position":
        y = _dw(ir, 4)
    elif case == "2 channels per position":
        y = _dw(ir, 8)
    elif case == "dense conv":
        y = ir.conv(ir.input((1, 6, 6, 8)), ir.filt(16, 3, 8), pad=1)
    elif case == "channel multiplier":
        y = ir.conv(ir.input((1, 6, 6, 8)), ir.filt(16, 3, 1), groups=8, pad=1)
    else:
        y = _dw(ir, 16)
    if case == "crd order":
        order = "crd"
    elif case == "not a d2s":
        order = "s2d"
    out = _ir_d2s(ir, y, b, order)
    if case == "conv output read elsewhere":
        outputs["z"] = ir.op("neg", [y])
    elif case == "conv output is an output":
        outputs["z"] = y
    elif case == "reshape read elsewhere":
        outputs["z"] = ir.op("neg", [out.producer.inputs[0].producer.inputs[0]])
    outputs["y"] = out
    nodes = list(ir.nodes)
    assert store_depth_to_space(nodes, outputs) == nodes, case


# ---------------------------------------------------------------- GPU against float64 NumPy
def _conv_ref(x, w, b, stride: int, pad: int, relu: bool):
    """Depthwise conv2d (NHWC, HWC filter) in float64."""
    x = x.astype(np.float64)
    n, h, wd, c = x.shape
    k = w.shape[0]
    xp = np.pad(x, [(0, 0), (pad, pad), (pad, pad), (0, 0)])
    oh, ow = (h + 2 * pad - k) // stride + 1, (wd + 2 * pad - k) // stride + 1
    out = np.zeros((n, oh, ow, c))
    for i in range(k):
        for j in range(k):
            out += xp[:, i:i + stride * oh:stride, j:j + stride * ow:stride, :] * w[i, j]
    out += b
    return np.maximum(out, 0) if relu else out


def _build(b, x, w, bias, *, block: int, stride: int, pad: int, relu: bool, five_d: bool):
    c = x.shape[3]
    y = b.conv2d(x, w, padding=[pad] * 4, strides=[stride] * 2, groups=c, input_layout="nhwc",
                 filter_layout="ihwo", bias=bias)
    if relu:
        y = b.relu(y)
    n, h, wd, _ = y.shape
    cq = c // (block * block)
    if five_d:  # the TFLite loader's spelling for one image: [H, W, b, b, C']
        t = b.transpose(b.reshape(y, [h, wd, block, block, cq]), permutation=[0, 2, 1, 3, 4])
    else:
        t = b.transpose(b.reshape(y, [n, h, wd, block, block, cq]), permutation=[0, 1, 3, 2, 4, 5])
    return b.reshape(t, [n, h * block, wd * block, cq])


@pytest.mark.parametrize("c,block,stride,pad,hw,relu,five_d,fires", [
    (64, 2, 2, 1, (9, 11), False, True, True),     # face detection's head: 16 channels per position
    (16, 2, 1, 1, (5, 7), True, False, True),      # 4 per position, bias + relu
    (48, 2, 1, 0, (6, 5), False, False, True),     # 12 per position (one vec4 unit per pixel group)
    (72, 3, 2, 1, (7, 8), True, True, True),       # 3 x 3 blocks of 8
    (128, 2, 1, 1, (4, 6), False, True, True),     # 32 per position
    (64, 2, 2, 1, (48, 48), False, True, True),    # the model's size: two vec4s (a vec4<u64>) per invocation
    (48, 2, 1, 1, (40, 40), True, False, True),    # 12 per position: one vec4 per invocation where two would be
    (8, 2, 1, 1, (5, 5), False, False, False),     # 2 per position: the remap kernel stays
    (4, 2, 2, 1, (6, 6), False, True, False),      # 1 per position
])
def test_depthwise_stores_the_depth_to_space(ctx, rng, c, block, stride, pad, hw, relu, five_d, fires):
    x = rng.standard_normal((1, *hw, c)).astype(np.float32)
    w = rng.standard_normal((3, 3, c)).astype(np.float32)
    bias = rng.standard_normal(c).astype(np.float32)

    def build(b, o):
        return {"y": _build(b, o["x"], b.constant(w.reshape(1, 3, 3, c)), b.constant(bias), block=block,
                            stride=stride, pad=pad, relu=relu, five_d=five_d)}

    ref = _d2s_ref(_conv_ref(x, w, bias, stride, pad, relu), block)
    for tensor_path in (False, True):
        out = run_graph(ctx, build, {"x": x}, tensor_path=tensor_path)["y"]
        assert_close(out, ref, atol=1e-4, rtol=1e-5)
    templates = [s.template for s in kernel_steps(ctx, build, {"x": x})]
    assert templates[0] == "conv/depthwise.wgsl"
    assert ("layout/remap.wgsl" not in templates) == fires


def test_switched_off(ctx, rng, monkeypatch):
    """``WEBNN_GPU_PASSES=-store_depth_to_space``: the transpose kernel runs, the same result."""
    monkeypatch.setenv("WEBNN_GPU_PASSES", "-store_depth_to_space")
    x = rng.standard_normal((1, 6, 6, 64)).astype(np.float32)
    w = rng.standard_normal((3, 3, 64)).astype(np.float32)

    def build(b, o):
        return {"y": _build(b, o["x"], b.constant(w.reshape(1, 3, 3, 64)), None, block=2, stride=1, pad=1,
                            relu=False, five_d=False)}

    out = run_graph(ctx, build, {"x": x})["y"]
    assert_close(out, _d2s_ref(_conv_ref(x, w, 0.0, 1, 1, False), 2), atol=1e-4, rtol=1e-5)
    assert "layout/remap.wgsl" in [s.template for s in kernel_steps(ctx, build, {"x": x})]


@pytest.mark.parametrize("hw", [(6, 7), (48, 48)])
def test_float16(ctx, rng, hw):
    """float16 (the output as u64 words of 4 or 8 channels): within float16 rounding of float64."""
    x = rng.standard_normal((1, *hw, 64)).astype(np.float16)
    w = rng.standard_normal((3, 3, 64)).astype(np.float16)

    def build(b, o):
        return {"y": _build(b, o["x"], b.constant(w.reshape(1, 3, 3, 64)), None, block=2, stride=2, pad=1,
                            relu=False, five_d=True)}

    out = run_graph(ctx, build, {"x": x})["y"]
    assert out.dtype == np.float16
    ref = _d2s_ref(_conv_ref(x, w.astype(np.float64), 0.0, 2, 1, False), 2)
    assert_close(out.astype(np.float64), ref, atol=2e-2, rtol=1e-2)
    assert "layout/remap.wgsl" not in [s.template for s in kernel_steps(ctx, build, {"x": x})]
