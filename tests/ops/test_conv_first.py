"""First layers: conv2d with at most 4 input channels on NHWC images (``conv/block.wgsl``, a
filter and bias baked into the shader as literals) against NumPy float64 references, at the
kernel's boundaries: 1 to 4 channels, 1x1 to 7x7 windows, strides 1 and 2, same / valid /
explicit padding, odd image sizes, output channels not a multiple of 4, each epilogue kind the
compiler fuses into such a layer, a filter that is a graph input (loaded, not baked) and the
limits of the kernel choice (output channels not a multiple of 4 take the implicit GEMM). Tolerance as ``tests/ops/test_conv.py``: the f32 accumulation
bound ``4 * K * 2**-24 * conv(|x|, |w|)`` plus half an ulp of the output type, and for the
epilogues ``1e-5 * (1 + conv(|x|, |w|) + |want|)``.
"""

from __future__ import annotations

import numpy as np
import pytest

import webnn_gpu as webnn
from helpers import check_accumulated, run_graph
from references import ref_conv2d
from webnn_gpu.ops import conv

# (H, W, C, O, KH, KW, strides, padding [top, bottom, left, right], bias, dtype)
CASES = {
    "rgb-3x3-s2-same-o16": (19, 24, 3, 16, 3, 3, 2, (0, 1, 0, 1), True, np.float32),  # vec4 rows
    "rgb-3x3-s2-odd-o12": (17, 23, 3, 12, 3, 3, 2, (1, 1, 1, 1), True, np.float32),  # scalar rows
    "rgb-5x5-s2-o8": (16, 20, 3, 8, 5, 5, 2, (1, 2, 1, 2), True, np.float32),
    "rgba-3x3-s1-valid-o8": (9, 11, 4, 8, 3, 3, 1, (0, 0, 0, 0), False, np.float32),
    "rgba-5x5-s1-same-o4": (10, 8, 4, 4, 5, 5, 1, (2, 2, 2, 2), True, np.float32),
    "c1-7x7-s2-explicit-o4": (21, 18, 1, 4, 7, 7, 2, (3, 2, 1, 3), True, np.float32),
    "c2-1x1-s2-o8": (9, 7, 2, 8, 1, 1, 2, (0, 0, 0, 0), True, np.float32),
    "c2-3x3-s1-pad-o12": (8, 10, 2, 12, 3, 3, 1, (1, 1, 1, 1), True, np.float32),
    "rgb-3x3-s2-f16-o8": (11, 12, 3, 8, 3, 3, 2, (0, 1, 0, 1), True, np.float16),
    # float16 moves as u32 pairs: vec4 rows (above), scalar rows (an odd width), 5x5 on 2 channels
    "rgb-3x3-s2-f16-odd-o16": (13, 15, 3, 16, 3, 3, 2, (1, 1, 1, 1), True, np.float16),
    "c2-5x5-s1-f16-o12": (9, 10, 2, 12, 5, 5, 1, (2, 2, 1, 3), False, np.float16),
    # past BLOCK_MAX_O with a baked filter: one output column per invocation
    "rgb-3x3-s2-o64": (13, 14, 3, 64, 3, 3, 2, (0, 1, 0, 1), True, np.float32),
    # more than 27 taps x channels with a filter too large for the row loop: one row of 4
    # pixels per invocation, unrolled (BLOCK_WIDE_K), a ragged last block, vec4 and scalar rows
    "rgb-5x5-s2-o24-wide": (17, 22, 3, 24, 5, 5, 2, (1, 2, 1, 2), True, np.float32),
    "rgb-5x5-s2-f16-o32-wide": (13, 16, 3, 32, 5, 5, 2, (2, 2, 2, 2), True, np.float16),
    "c1-7x7-s2-o32-wide": (20, 19, 1, 32, 7, 7, 2, (3, 3, 3, 3), False, np.float32),
    "rgba-5x5-s2-o16-wide": (15, 18, 4, 16, 5, 5, 2, (2, 1, 2, 1), True, np.float32),
    "rgb-7x7-s2-o16-wide": (17, 16, 3, 16, 7, 7, 2, (3, 3, 3, 3), True, np.float32),
    # output channels not a multiple of 4: the implicit GEMM (the block kernel's scalar stores
    # ran 1.3-3.3x slower)
    "rgb-3x3-s2-o13": (17, 23, 3, 13, 3, 3, 2, (1, 1, 1, 1), True, np.float32),
    "c2-5x5-s1-o6": (9, 8, 2, 6, 5, 5, 1, (2, 2, 2, 2), False, np.float32),
}


def _out_size(n, k, s, p0, p1):
    return (n + p0 + p1 - k) // s + 1


def _run(ctx, rng, case, *, act=None, constant=True, extra=None):
    """Build the conv (filter ohwi, a constant unless ``constant`` is false), then ``act(builder,
    y) -> y``, run it; (output as nchw float64, reference nchw before act, |reference|, K,
    templates of the graph's kernels)."""
    H, W, C, O, KH, KW, s, pad, bias, dt = case
    x = rng.uniform(-1, 1, (1, H, W, C)).astype(dt)
    wt = rng.uniform(-1, 1, (O, KH, KW, C)).astype(dt)
    b = rng.uniform(-1, 1, O).astype(dt)
    inputs = {"x": x} | ({} if constant else {"w": wt}) | (extra or {})
    templates = []

    def build(bld, o):
        y = bld.conv2d(o["x"], bld.constant(wt) if constant else o["w"], strides=[s, s], padding=list(pad),
                       input_layout="nhwc", filter_layout="ohwi", bias=bld.constant(b) if bias else None)
        return {"y": act(bld, y, o) if act else y}

    got = run_graph(ctx, build, inputs, tensor_path=False)["y"].astype(np.float64).transpose(0, 3, 1, 2)
    bld = webnn.MLGraphBuilder(ctx)
    ops = {n: bld.input(n, {"data_type": webnn._dtypes.from_numpy(a.dtype), "shape": list(a.shape)})
           for n, a in inputs.items()}
    templates = [st.template for st in bld.build(build(bld, ops))._steps if hasattr(st, "template")]
    x64, w64 = x.astype(np.float64).transpose(0, 3, 1, 2), wt.astype(np.float64).transpose(0, 3, 1, 2)
    ref = ref_conv2d(x64, w64, padding=pad, strides=(s, s))
    absref = ref_conv2d(np.abs(x64), np.abs(w64), padding=pad, strides=(s, s))
    if bias:
        ref = ref + b.astype(np.float64)[None, :, None, None]
        absref = absref + np.abs(b.astype(np.float64))[None, :, None, None]
    assert got.shape == (1, O, _out_size(H, KH, s, pad[0], pad[1]), _out_size(W, KW, s, pad[2], pad[3]))
    return got, ref, absref, KH * KW * C, templates


@pytest.mark.parametrize("name", list(CASES))
def test_first_layer(ctx, rng, name):
    """Each boundary case runs on the block kernel with its weights baked in (or, with O not a
    multiple of 4, on the implicit GEMM), and is exact (one input channel too: a depthwise conv
    with a channel multiplier of O, which the block kernel computes faster)."""
    case = CASES[name]
    if case[-1] == np.float16 and "float16" not in ctx.supported_data_types:
        pytest.skip("no shader-f16")
    got, ref, absref, k, templates = _run(ctx, rng, case)
    assert templates == ["conv/block.wgsl" if case[3] % 4 == 0 else "matmul/tile.wgsl"], templates
    check_accumulated(got, ref, absref, k, case[-1], name)


def _hswish(v):
    return v * np.clip(v + 3, 0, 6) / 6


# the epilogues a first layer takes: (builder chain, its float64 reference, extra inputs)
EPILOGUES = {
    "relu": (lambda b, y, o: b.relu(y), lambda r, o: np.maximum(r, 0)),
    "relu6": (lambda b, y, o: b.clamp(y, min_value=0.0, max_value=6.0), lambda r, o: np.clip(r, 0, 6)),
    "hard_swish": (lambda b, y, o: b.hard_swish(y), lambda r, o: _hswish(r)),
    "prelu": (lambda b, y, o: b.prelu(y, b.constant(o["slope"])),
              lambda r, o: np.where(r >= 0, r, o["slope"].astype(np.float64)[None, :, None, None] * r)),
    "prelu-mul-add": (lambda b, y, o: b.add(b.mul(b.prelu(y, b.constant(o["slope"])), b.constant(o["m"])),
                                            b.constant(o["a"])),
                      lambda r, o: np.where(r >= 0, r, o["slope"].astype(np.float64)[None, :, None, None] * r)
                      * o["m"].astype(np.float64)[None, :, None, None] + o["a"].astype(np.float64)[None, :, None, None]),
    "sigmoid": (lambda b, y, o: b.sigmoid(y), lambda r, o: 1 / (1 + np.exp(-r))),
}


@pytest.mark.parametrize("name, case", [(e, c) for e, c in zip(EPILOGUES, ["rgb-3x3-s2-same-o16",
                                         "rgb-3x3-s2-odd-o12", "rgb-5x5-s2-o8", "rgb-3x3-s2-same-o16",
                                         "rgb-3x3-s2-odd-o12", "c2-3x3-s1-pad-o12"])])
def test_first_layer_epilogue(ctx, rng, name, case):
    """Every epilogue kind of a first layer, fused into the block kernel (one kernel)."""
    act, want_of = EPILOGUES[name]
    O = CASES[case][3]
    consts = {"slope": rng.uniform(0.05, 0.5, O).astype(np.float32), "m": rng.uniform(0.5, 2, O).astype(np.float32),
              "a": rng.uniform(-1, 1, O).astype(np.float32)}
    got, ref, absref, _, templates = _run(ctx, rng, CASES[case], act=lambda b, y, o: act(b, y, consts))
    assert templates == ["conv/block.wgsl"], templates
    want = want_of(ref, consts)
    err = np.abs(got - want)
    assert (err <= 1e-5 * (1 + absref + np.abs(want))).all(), f"{name}: worst error {err.max():.3e}"


def test_first_layer_loaded_filter(ctx, rng, monkeypatch):
    """A filter that is a graph input is loaded, and so is a baked-size filter under
    WEBNN_GPU_FORCE_CONV_BLOCK_WEIGHTS=loaded."""
    got, ref, absref, k, templates = _run(ctx, rng, CASES["rgb-3x3-s2-same-o16"], constant=False)
    assert templates == ["conv/permute.wgsl", "conv/block.wgsl"], templates  # the filter to hwio
    check_accumulated(got, ref, absref, k, np.float32, "input filter")
    # past BLOCK_MAX_O only a baked filter takes the block kernel
    assert _variant(ctx, 16, 16, 3, 64, 3, 3, constant=False) == "gemm"
    check_accumulated(got, ref, absref, k, np.float32, "input filter")
    monkeypatch.setenv("WEBNN_GPU_FORCE_CONV_BLOCK_WEIGHTS", "loaded")
    got, ref, absref, k, templates = _run(ctx, rng, CASES["rgb-3x3-s2-same-o16"])
    assert templates == ["conv/block.wgsl"], templates
    check_accumulated(got, ref, absref, k, np.float32, "loaded weights")


def _block_text(ctx, H, W, C, O, KH, KW, s=2, bias=True, slope=False) -> str | None:
    bld = webnn.MLGraphBuilder(ctx)
    x = bld.input("x", {"data_type": "float32", "shape": [1, H, W, C]})
    wt = np.full((O, KH, KW, C), 0.5, np.float32)
    y = bld.conv2d(x, bld.constant(wt), strides=[s, s], input_layout="nhwc", filter_layout="ohwi",
                   bias=bld.constant(np.full(O, 0.25, np.float32)) if bias else None)
    if slope:
        y = bld.prelu(y, bld.constant(np.arange(O, dtype=np.float32) / 8) if slope == "constant"
                      else bld.input("slope", {"data_type": "float32", "shape": [O]}))
    texts = [st.wgsl for st in bld.build({"y": y})._steps if getattr(st, "template", "") == "conv/block.wgsl"]
    return texts[0] if texts else None


def _variant(ctx, H, W, C, O, KH, KW, s=2, constant=True) -> str:
    """The conv2d variant ``_conv_variant`` picks for the node (no build)."""
    bld = webnn.MLGraphBuilder(ctx)
    x = bld.input("x", {"data_type": "float32", "shape": [1, H, W, C]})
    w = (bld.constant(np.full((O, KH, KW, C), 0.5, np.float32)) if constant
         else bld.input("w", {"data_type": "float32", "shape": [O, KH, KW, C]}))
    y = bld.conv2d(x, w, strides=[s, s], input_layout="nhwc", filter_layout="ohwi")
    return conv._conv_variant(conv._geometry(y._value.producer), "nhwc")


def _geometry_of(ctx, H, W, C, O, KH, KW, s=2) -> dict:
    bld = webnn.MLGraphBuilder(ctx)
    x = bld.input("x", {"data_type": "float32", "shape": [1, H, W, C]})
    y = bld.conv2d(x, bld.constant(np.full((O, KH, KW, C), 0.5, np.float32)), strides=[s, s], input_layout="nhwc",
                   filter_layout="ohwi")
    return conv._geometry(y._value.producer)


def test_first_layer_wide_loaded_weights(ctx, monkeypatch):
    """WEBNN_GPU_FORCE_CONV_BLOCK_WEIGHTS=loaded keeps a filter past the row loop's limits off
    the one-row form (its weights would be loaded; the implicit GEMM is faster)."""
    monkeypatch.setenv("WEBNN_GPU_FORCE_CONV_BLOCK_WEIGHTS", "loaded")
    assert _variant(ctx, 16, 16, 3, 24, 5, 5) == "gemm"


def test_first_layer_bake_limits(ctx):
    """The weights are literals up to BLOCK_BAKE_MAX filter values (padded to vec4s of output
    channels), the bias with them; the kernel choice itself stops at BLOCK_MAX_O output channels
    and BLOCK_MAX_WEIGHTS filter vec4s."""
    text = _block_text(ctx, 16, 16, 3, 16, 3, 3)
    assert "const w2_2_2_3 = vec4<f32>(0.5, 0.5, 0.5, 0.5);" in text and "var<uniform> f" not in text
    assert "const b3 = vec4<f32>(0.25, 0.25, 0.25, 0.25);" in text
    assert "ev = (ev + q.q0)" not in text  # no bias step in the epilogue
    assert _variant(ctx, 16, 16, 3, 13, 3, 3) == "gemm"  # O % 4 != 0
    # 5x5 x 4 -> 12: 300 vec4s > BLOCK_MAX_WEIGHTS and 100 taps x channels > BLOCK_BAKE_K: not
    # the row loop, but the one-row form (BLOCK_WIDE_K)
    assert _variant(ctx, 16, 16, 4, 12, 5, 5) == "block"
    assert conv._block_tile(_geometry_of(ctx, 16, 16, 4, 12, 5, 5))[0] == 1
    # 5x5 x 3 -> 12: 900 values, 225 vec4s: baked
    assert _variant(ctx, 16, 16, 3, 12, 5, 5) == "block" and 5 * 5 * 3 * 12 <= conv.BLOCK_BAKE_MAX
    # past BLOCK_MAX_O output channels only a baked filter of at most BLOCK_BAKE_K taps x channels,
    # up to BLOCK_BAKE_O output channels
    assert conv.BLOCK_BAKE_K == 27 and conv.BLOCK_BAKE_O == 64 and 27 * 64 <= conv.BLOCK_BAKE_MAX
    assert "const w2_2_2_15" in _block_text(ctx, 16, 16, 3, 64, 3, 3)
    assert _variant(ctx, 16, 16, 3, 68, 3, 3) == "gemm"
    assert _variant(ctx, 16, 16, 4, 36, 3, 3) == "gemm"  # 36 taps x channels
    assert _variant(ctx, 16, 16, 4, 28, 3, 3) == "block"  # 252 vec4s: within BLOCK_MAX_WEIGHTS
    assert _variant(ctx, 16, 16, 3, 48, 5, 5) == "gemm"  # 75 taps x channels, past BLOCK_MAX_O
    # the one-row form: 28 to BLOCK_WIDE_K taps x channels, at most BLOCK_MAX_O output channels
    # and BLOCK_WIDE_MAX values, a constant filter, weights not forced to loads
    assert conv.BLOCK_WIDE_K == 147 and 75 * 32 <= conv.BLOCK_WIDE_MAX < 100 * 28
    assert _variant(ctx, 16, 16, 3, 24, 5, 5) == "block"
    assert _variant(ctx, 16, 16, 4, 24, 5, 5) == "block" and _variant(ctx, 16, 16, 4, 28, 5, 5) == "gemm"
    assert _variant(ctx, 16, 16, 3, 16, 7, 7) == "block" and _variant(ctx, 16, 16, 3, 20, 7, 7) == "gemm"
    assert _variant(ctx, 16, 16, 4, 8, 7, 7) == "gemm"  # 196 taps x channels
    assert conv._block_tile(_geometry_of(ctx, 16, 16, 3, 24, 5, 5)) == (1, conv.BLOCK_WIDE_TW)
    assert conv._block_tile(_geometry_of(ctx, 16, 16, 3, 12, 5, 5))[0] > 1  # the row loop
    assert _variant(ctx, 16, 16, 3, 36, 5, 5) == "gemm"
    assert _variant(ctx, 16, 16, 3, 24, 5, 5, constant=False) == "gemm"
    assert "const w4_4_2_5" in _block_text(ctx, 16, 16, 3, 24, 5, 5)
    assert _variant(ctx, 16, 16, 2, 40, 3, 3) == "block"
    # a constant per-channel epilogue operand (a PReLU slope) is baked per channel, zeros past O;
    # one that is a graph input is loaded
    text = _block_text(ctx, 16, 16, 3, 8, 3, 3, slope="constant")
    assert "let q1_3 = EpQ(0.875);" in text and "ep_q(" not in text
    text = _block_text(ctx, 16, 16, 3, 8, 3, 3, slope="input")
    assert "let q1_3 = ep_q(7u);" in text


def test_first_layer_row_loop_sums_start_with_the_bias(ctx):
    """In the row loop each output vec4's window sum starts with the baked bias, as the unrolled
    form's accumulators do: a constant added last is moved down the multiply-add chain by NIR's
    algebraic pass one link per round of lavapipe's optimisation loop (a 3x3x3 window: 28 rounds
    instead of 5, docs/performance.md "Warm builds"). Without a bias the sum starts with the
    first tap."""
    text = _block_text(ctx, 16, 16, 3, 16, 3, 3)
    assert "for (var t = 0u;" in text  # the row loop
    assert "a0_0 = b0 + r0_0_0 * w0_0_0_0 + " in text and "a1_3 = b3 + r0_2_0 * w0_0_0_3 + " in text
    assert " + b0;" not in text and " + b3;" not in text
    text = _block_text(ctx, 16, 16, 3, 16, 3, 3, bias=False)
    assert "for (var t = 0u;" in text and "a0_0 = r0_0_0 * w0_0_0_0 + " in text and "const b0" not in text


# one input channel, one group: (H, W, O, KH, KW, stride, padding, dtype, kernel)
ONE_CHANNEL = {
    "3x3-s1-o16": ((23, 17, 1, 16, 3, 3, 1, (1, 1, 1, 1), True, np.float32), "conv/block.wgsl"),
    "5x5-s2-o32": ((20, 21, 1, 32, 5, 5, 2, (1, 2, 2, 1), True, np.float32), "conv/block.wgsl"),
    "3x3-s2-f16-o8": ((15, 16, 1, 8, 3, 3, 2, (0, 1, 0, 1), True, np.float16), "conv/block.wgsl"),
    # O not a multiple of 4: the implicit GEMM
    "3x3-s1-o6": ((9, 10, 1, 6, 3, 3, 1, (1, 1, 1, 1), False, np.float32), "matmul/tile.wgsl"),
    # fewer than ONE_CHANNEL_MIN_O output channels: still the depthwise kernel
    "3x3-s1-o2": ((9, 10, 1, 2, 3, 3, 1, (1, 1, 1, 1), True, np.float32), "conv/depthwise.wgsl"),
}


@pytest.mark.parametrize("name", list(ONE_CHANNEL))
def test_one_channel(ctx, rng, name):
    """A conv2d of one input channel and one group (a grayscale first layer) is also a depthwise
    conv2d with a channel multiplier of O; from ONE_CHANNEL_MIN_O output channels on it runs on
    the block kernel (or the implicit GEMM), exact against float64 NumPy."""
    case, kernel = ONE_CHANNEL[name]
    if case[-1] == np.float16 and "float16" not in ctx.supported_data_types:
        pytest.skip("no shader-f16")
    assert (case[3] >= conv.ONE_CHANNEL_MIN_O) == (kernel != "conv/depthwise.wgsl")
    got, ref, absref, k, templates = _run(ctx, rng, case)
    assert templates == [kernel], templates
    check_accumulated(got, ref, absref, k, case[-1], name)


def test_one_channel_nchw(ctx, rng):
    """An NCHW conv2d of one input channel stays NCHW on the implicit GEMM (its NHWC form is no
    longer a depthwise conv, so nchw_conv_to_nhwc adds no transposes), exact against float64."""
    x = rng.uniform(-1, 1, (1, 1, 19, 22)).astype(np.float32)
    wt = rng.uniform(-1, 1, (12, 1, 3, 3)).astype(np.float32)

    def build(bld, o):
        return {"y": bld.conv2d(o["x"], bld.constant(wt), strides=[2, 1], padding=[1, 1, 0, 2])}

    got = run_graph(ctx, build, {"x": x}, tensor_path=False)["y"].astype(np.float64)
    bld = webnn.MLGraphBuilder(ctx)
    g = bld.build(build(bld, {"x": bld.input("x", {"data_type": "float32", "shape": [1, 1, 19, 22]})}))
    assert [st.template for st in g._steps if hasattr(st, "template")] == ["matmul/tile.wgsl"]
    x64, w64 = x.astype(np.float64), wt.astype(np.float64)
    ref = ref_conv2d(x64, w64, padding=(1, 1, 0, 2), strides=(2, 1))
    absref = ref_conv2d(np.abs(x64), np.abs(w64), padding=(1, 1, 0, 2), strides=(2, 1))
    check_accumulated(got, ref, absref, 9, np.float32, "nchw one channel")


def test_first_layer_float16_pairs(ctx, rng):
    """A float16 block kernel binds its vec4 input rows and its output as vec2<u32> pairs of
    float16 values (BLOCK_HALF_PAIRS) and gives the same bits as reading and writing vec4<f16>,
    with a fused hard-swish and a fused PReLU; the PReLU's within the float16 bound of float64."""
    if "float16" not in ctx.supported_data_types:
        pytest.skip("no shader-f16")
    x = rng.uniform(-2, 2, (1, 14, 16, 3)).astype(np.float16)
    wt = rng.uniform(-1, 1, (16, 3, 3, 3)).astype(np.float16)
    b = rng.uniform(-1, 1, 16).astype(np.float16)
    slope = rng.uniform(0.05, 0.5, 16).astype(np.float16)
    acts = {"h": lambda bld, y: bld.hard_swish(y), "p": lambda bld, y: bld.prelu(y, bld.constant(slope))}
    outs = {}
    for name, act in acts.items():
        def build(bld, o, act=act):
            return {"y": act(bld, bld.conv2d(o["x"], bld.constant(wt), strides=[2, 2], padding=[0, 1, 0, 1],
                                             input_layout="nhwc", filter_layout="ohwi", bias=bld.constant(b)))}

        for pairs in (True, False):
            keep, conv.BLOCK_HALF_PAIRS = conv.BLOCK_HALF_PAIRS, pairs
            try:
                got = run_graph(ctx, build, {"x": x}, tensor_path=False)["y"]
                bld = webnn.MLGraphBuilder(ctx)
                g = bld.build(build(bld, {"x": bld.input("x", {"data_type": "float16", "shape": [1, 14, 16, 3]})}))
            finally:
                conv.BLOCK_HALF_PAIRS = keep
            texts = [st.wgsl for st in g._steps if hasattr(st, "template")]
            assert [st.template for st in g._steps if hasattr(st, "template")] == ["conv/block.wgsl"]
            assert ("array<vec2<u32>>" in texts[0] and "pack2x16float" in texts[0]) == pairs
            assert got.dtype == np.float16
            outs[name, pairs] = got
        np.testing.assert_array_equal(outs[name, True].view(np.uint16), outs[name, False].view(np.uint16))
    x64, w64 = x.astype(np.float64).transpose(0, 3, 1, 2), wt.astype(np.float64).transpose(0, 3, 1, 2)
    ref = ref_conv2d(x64, w64, padding=(0, 1, 0, 1), strides=(2, 2)) + b.astype(np.float64)[None, :, None, None]
    absref = (ref_conv2d(np.abs(x64), np.abs(w64), padding=(0, 1, 0, 1), strides=(2, 2))
              + np.abs(b.astype(np.float64))[None, :, None, None])
    want = np.where(ref >= 0, ref, slope.astype(np.float64)[None, :, None, None] * ref)
    got = outs["p", True].astype(np.float64).transpose(0, 3, 1, 2)
    # the f32 accumulation bound, then the rounding to float16 (half an ulp: 2**-11 relative)
    assert (np.abs(got - want) <= 4 * 27 * 2.0 ** -24 * absref + 2.0 ** -11 * np.abs(want) + 2.0 ** -25).all()
