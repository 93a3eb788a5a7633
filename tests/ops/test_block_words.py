"""The first-layer kernel's memory words (``conv/block.wgsl`` with ``x64``): pairs of output
vec4s stored as 8-value u64 words, bit-identical to the same kernel storing vec4s (float16: u32
pairs; ``WEBNN_GPU_FORCE_BLOCK_WORDS=vec4``; float16 takes words only when forced, ``=u64``)
and against float64 NumPy; its float32 input's vec4s loaded as 4-value u64 words (``xw``,
``WEBNN_GPU_FORCE_BLOCK_INPUT_WORDS=vec4`` keeps vec4s); the rules that pick them
(``webnn_gpu.ops.conv._block_words``, ``_block_input_words``)."""

from __future__ import annotations

import numpy as np
import pytest

import webnn_gpu as webnn
from webnn_gpu.ops import conv

from helpers import check_accumulated, run_graph
from references import ref_conv2d

# (H, W, C, O, K, stride, padding, dtype, epilogue, filter a graph input)
CASES = {
    "rgb-3x3-s2-o16": (19, 24, 3, 16, 3, 2, (0, 1, 0, 1), np.float32, "", False),
    "rgb-3x3-s2-odd-o24-relu6": (17, 23, 3, 24, 3, 2, (1, 1, 1, 1), np.float32, "relu6", False),
    "rgb-3x3-s2-f16-odd-o16-prelu": (13, 15, 3, 16, 3, 2, (1, 1, 1, 1), np.float16, "prelu", False),
    "rgb-3x3-s2-f16-o32": (14, 16, 3, 32, 3, 2, (0, 1, 0, 1), np.float16, "relu", False),
    "rgb-5x5-s2-o24-wide": (17, 22, 3, 24, 5, 2, (1, 2, 1, 2), np.float32, "", False),
    "c2-3x3-s1-o12": (8, 10, 2, 12, 3, 1, (1, 1, 1, 1), np.float32, "", False),  # 3 vec4s: vec4 stores
    "rgb-3x3-s2-o16-loaded": (11, 12, 3, 16, 3, 2, (0, 1, 0, 1), np.float32, "relu", True),
    "rgb-3x3-s1-tall-o8": (700, 5, 3, 8, 3, 1, (1, 1, 1, 1), np.float32, "", False),
    # a global average pool of the output reads the kernel's per-workgroup sums (fuse_pool_partials)
    "rgb-3x3-s2-o16-pool": (66, 50, 3, 16, 3, 2, (1, 1, 1, 1), np.float32, "pool", False),
}


@pytest.mark.parametrize("name", list(CASES))
def test_block_words_are_bit_identical_to_vec4s(ctx, rng, monkeypatch, name):
    H, W, C, O, K, s, pad, dt, epi, loaded = CASES[name]
    x = rng.uniform(-1, 1, (1, H, W, C)).astype(dt)
    wt = rng.uniform(-1, 1, (O, K, K, C)).astype(dt)
    b = rng.uniform(-1, 1, O).astype(dt)
    slope = rng.uniform(0.05, 0.5, O).astype(dt)
    inputs = {"x": x} | ({"w": wt} if loaded else {})

    def build(bld, o):
        y = bld.conv2d(o["x"], o["w"] if loaded else bld.constant(wt), strides=[s, s], padding=list(pad),
                       input_layout="nhwc", filter_layout="ohwi", bias=bld.constant(b))
        if epi == "relu":
            y = bld.relu(y)
        elif epi == "relu6":
            y = bld.clamp(y, min_value=0.0, max_value=6.0)
        elif epi == "prelu":
            y = bld.prelu(y, bld.constant(slope))
        elif epi == "pool":
            y = bld.relu(y)
            return {"y": y, "p": bld.average_pool2d(y, layout="nhwc")}
        return {"y": y}

    outs = {}
    xv = None  # whether the input's rows load as vec4s (_block_xv): read from the vec4 form's text
    for force in ("vec4", "", "u64"):  # vec4: the output's and the input's vec4s (BLOCK_INPUT_WORDS) both
        monkeypatch.setenv("WEBNN_GPU_FORCE_BLOCK_WORDS", force)
        monkeypatch.setenv("WEBNN_GPU_FORCE_BLOCK_INPUT_WORDS", "vec4" if force == "vec4" else "")
        bld = webnn.MLGraphBuilder(ctx)
        ops = {n: bld.input(n, {"data_type": webnn._dtypes.from_numpy(a.dtype), "shape": list(a.shape)})
               for n, a in inputs.items()}
        g = bld.build(build(bld, ops))
        texts = [st.wgsl for st in g._steps if getattr(st, "template", "") == "conv/block.wgsl"]
        g.destroy()
        assert len(texts) == 1 and ("wsum" in texts[0]) == (epi == "pool")
        words = (force != "vec4" and (dt == np.float32 or force == "u64") and O % 8 == 0 and O <= conv.BLOCK_MAX_O
                 and ctx._tuning == "lane-loop" and "shader-int64" in ctx.features)
        int64 = ctx._tuning == "lane-loop" and "shader-int64" in ctx.features
        assert ("out: array<vec4<u64>>" in texts[0] or "out: array<vec2<u64>>" in texts[0]) == words
        if force == "vec4":
            xv = "x: array<vec4<f32>>" in texts[0]  # the input's rows as vec4s (_block_xv)
        assert xv is not None, "the vec4 form runs first"
        assert ("x: array<vec2<u64>>" in texts[0]) == (force != "vec4" and dt == np.float32 and xv and int64)
        got = run_graph(ctx, build, inputs, tensor_path=False)
        outs[force or "words"] = got["y"]
        if epi == "pool":
            outs[force or "words", "p"] = got["p"]
    np.testing.assert_array_equal(outs["words"].view(np.uint8), outs["vec4"].view(np.uint8))
    np.testing.assert_array_equal(outs["u64"].view(np.uint8), outs["vec4"].view(np.uint8))
    x64, w64 = x.astype(np.float64).transpose(0, 3, 1, 2), wt.astype(np.float64).transpose(0, 3, 1, 2)
    ref = ref_conv2d(x64, w64, padding=pad, strides=(s, s)) + b.astype(np.float64)[None, :, None, None]
    absref = (ref_conv2d(np.abs(x64), np.abs(w64), padding=pad, strides=(s, s))
              + np.abs(b.astype(np.float64))[None, :, None, None])
    if epi == "relu":
        ref = np.maximum(ref, 0)
    elif epi == "relu6":
        ref = np.clip(ref, 0, 6)
    elif epi == "prelu":
        ref = np.where(ref >= 0, ref, slope.astype(np.float64)[None, :, None, None] * ref)
    elif epi == "pool":
        ref = np.maximum(ref, 0)
        np.testing.assert_array_equal(outs["words", "p"].view(np.uint8), outs["vec4", "p"].view(np.uint8))
        np.testing.assert_allclose(outs["words", "p"].astype(np.float64).reshape(-1), ref.mean(axis=(2, 3)).reshape(-1),
                                   atol=1e-5, rtol=1e-5)
    check_accumulated(outs["words"].transpose(0, 3, 1, 2), ref, absref, K * K * C + 1, dt, name)


def test_block_words_rule(monkeypatch):
    """u64 words on the lane-loop profile with shader-int64, in float32, with output channels a
    multiple of 8 up to BLOCK_MAX_O; WEBNN_GPU_FORCE_BLOCK_WORDS=vec4 keeps vec4s, =u64 takes words in float16
    too, an unknown value is an error."""
    f = frozenset({"shader-int64"})
    assert conv._block_words({"O": 16}, "f32", "lane-loop", f)
    assert not conv._block_words({"O": 16}, "f16", "lane-loop", f)
    assert not conv._block_words({"O": 12}, "f32", "lane-loop", f)
    assert not conv._block_words({"O": 64}, "f32", "lane-loop", f)  # past BLOCK_MAX_O
    assert not conv._block_words({"O": 16}, "f32", "default", f)
    assert not conv._block_words({"O": 16}, "f32", "lane-loop", frozenset())
    monkeypatch.setenv("WEBNN_GPU_FORCE_BLOCK_WORDS", "vec4")
    assert not conv._block_words({"O": 16}, "f32", "lane-loop", f)
    monkeypatch.setenv("WEBNN_GPU_FORCE_BLOCK_WORDS", "u64")
    assert conv._block_words({"O": 16}, "f16", "lane-loop", f)
    monkeypatch.setenv("WEBNN_GPU_FORCE_BLOCK_WORDS", "wide")
    with pytest.raises(ValueError, match="BLOCK_WORDS"):
        conv._block_words({"O": 16}, "f32", "lane-loop", f)


def test_block_input_words_rule(monkeypatch):
    """The input's vec4s as u64 words on the lane-loop profile with shader-int64, in float32,
    where the kernel loads its rows as vec4s (xv > 0); WEBNN_GPU_FORCE_BLOCK_INPUT_WORDS=vec4
    keeps vec4s, an unknown value is an error."""
    f = frozenset({"shader-int64"})
    monkeypatch.delenv("WEBNN_GPU_FORCE_BLOCK_INPUT_WORDS", raising=False)
    assert conv._block_input_words(12, "f32", "lane-loop", f)
    assert not conv._block_input_words(0, "f32", "lane-loop", f)  # scalar loads
    assert not conv._block_input_words(12, "f16", "lane-loop", f)  # u32 pairs (h2)
    assert not conv._block_input_words(12, "f32", "default", f)
    assert not conv._block_input_words(12, "f32", "lane-loop", frozenset())
    monkeypatch.setenv("WEBNN_GPU_FORCE_BLOCK_INPUT_WORDS", "vec4")
    assert not conv._block_input_words(12, "f32", "lane-loop", f)
    monkeypatch.setenv("WEBNN_GPU_FORCE_BLOCK_INPUT_WORDS", "u64")
    with pytest.raises(ValueError, match="BLOCK_INPUT_WORDS"):
        conv._block_input_words(12, "f32", "lane-loop", f)
