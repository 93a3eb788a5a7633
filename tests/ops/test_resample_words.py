"""The linear doubling kernel's memory words (``resample/resample2d_x2.wgsl`` with ``x64``): 8
channels moved per access as u64 words, bit-identical to the same kernel moving vec4s of the
storage type (``WEBNN_GPU_FORCE_RESAMPLE_WORDS=vec4``) and against float64 NumPy; the rule that
picks them (``webnn_gpu.ops.resample._x2_words``)."""

from __future__ import annotations

import numpy as np
import pytest

import webnn_gpu as webnn
from webnn_gpu.ops import resample

from helpers import run_graph
from references import ref_resample


def _texts(ctx, build, inputs):
    b = webnn.MLGraphBuilder(ctx)
    g = b.build(build(b, {n: b.input(n, {"data_type": webnn._dtypes.from_numpy(a.dtype), "shape": list(a.shape)})
                          for n, a in inputs.items()}))
    texts = {s.template: s.wgsl for s in g._steps if hasattr(s, "template")}
    g.destroy()
    return texts


def _words_expected(ctx, channels):
    return channels % 8 == 0 and ctx._tuning == "lane-loop" and "shader-int64" in ctx.features


@pytest.mark.parametrize("dt", ["float32", "float16"])
@pytest.mark.parametrize("shape, axes, epilogue", [
    ((1, 5, 7, 24), [1, 2], ""),              # odd sizes, 3 words of channels
    ((2, 3, 9, 8), [1, 2], "clamp"),          # batch, one word, a fused clamp
    ((1, 1, 1, 16), [1, 2], ""),              # one pixel: every coordinate clamps
    ((3, 4, 5, 16), [0, 2], "bias"),          # other axes, a per-channel constant and a clamp
    ((1, 6, 5, 12), [1, 2], "clamp"),         # channels not a multiple of 8: vec4s
    ((1, 300, 2, 8), [1, 2], ""),             # tall
])
def test_doubling_words_are_bit_identical_to_vec4s(ctx, rng, monkeypatch, dt, shape, axes, epilogue):
    npdt = np.float32 if dt == "float32" else np.float16
    with np.errstate(under="ignore"):
        x = rng.standard_normal(shape).astype(npdt)
        bias = rng.standard_normal(shape[3]).astype(npdt)
    sizes = [2 * shape[a] for a in axes]

    def build(b, o):
        y = b.resample2d(o["x"], mode="linear", sizes=sizes, axes=axes)
        if epilogue == "bias":
            y = b.add(y, b.constant(bias))
        if epilogue:
            y = b.clamp(y, min_value=-0.5, max_value=1.0)
        return {"y": y}

    outs = {}
    for force in ("vec4", ""):
        monkeypatch.setenv("WEBNN_GPU_FORCE_RESAMPLE_WORDS", force)
        texts = _texts(ctx, build, {"x": x})
        assert list(texts)[0] == "resample/resample2d_x2.wgsl"
        assert ("u64" in texts["resample/resample2d_x2.wgsl"]) == (force == "" and _words_expected(ctx, shape[3]))
        outs[force or "words"] = run_graph(ctx, build, {"x": x})["y"]
    np.testing.assert_array_equal(outs["words"].view(np.uint8), outs["vec4"].view(np.uint8))
    ref = ref_resample(x.astype(np.float64), "linear", sizes, axes)
    if epilogue == "bias":
        ref = ref + bias.astype(np.float64)
    if epilogue:
        ref = np.clip(ref, -0.5, 1.0)
    tol = 1e-5 if dt == "float32" else 3e-3
    np.testing.assert_allclose(outs["words"].astype(np.float64), ref, atol=tol, rtol=tol)


def test_words_rule(monkeypatch):
    """u64 words on the lane-loop profile with shader-int64 and channels a multiple of 8;
    WEBNN_GPU_FORCE_RESAMPLE_WORDS=vec4 keeps vec4s, an unknown value is an error."""
    f = frozenset({"shader-int64"})
    assert resample._x2_words(16, "lane-loop", f)
    assert not resample._x2_words(12, "lane-loop", f)
    assert not resample._x2_words(16, "default", f)
    assert not resample._x2_words(16, "lane-loop", frozenset())
    monkeypatch.setenv("WEBNN_GPU_FORCE_RESAMPLE_WORDS", "vec4")
    assert not resample._x2_words(16, "lane-loop", f)
    monkeypatch.setenv("WEBNN_GPU_FORCE_RESAMPLE_WORDS", "u32")
    with pytest.raises(ValueError, match="RESAMPLE_WORDS"):
        resample._x2_words(16, "lane-loop", f)
