"""The ``nhwc_regions`` rule on the GPU: small NCHW graphs (an exporter's transposes around NCHW
layers, natively NCHW chains, their near misses) give the float64 NumPy results with fewer
kernels, and the selfie model converted to ONNX by tf2onnx runs the kernels of its TFLite load."""

from __future__ import annotations

import os

import numpy as np
import pytest
from helpers import kernel_templates, run_graph
from references import ref_conv2d

import webnn_gpu as webnn

TO_NCHW, TO_NHWC = (0, 3, 1, 2), (0, 2, 3, 1)
REMAP = "layout/remap.wgsl"  # the transpose kernel


def _conv(x, w, pad=1, stride=1, groups=1, bias=None):
    """NCHW / OIHW conv2d in float64."""
    y = ref_conv2d(x.astype(np.float64), w.astype(np.float64), [pad] * 4, (stride, stride), (1, 1), groups)
    return y if bias is None else y + bias.reshape(1, -1, 1, 1)


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _both(ctx, build, inputs):
    """(outputs with every rule, outputs with nhwc_regions off, templates with every rule,
    templates with it off)."""
    got = run_graph(ctx, build, inputs)
    templates = kernel_templates(ctx, build, inputs)
    before = os.environ.get("WEBNN_GPU_PASSES")
    os.environ["WEBNN_GPU_PASSES"] = ",".join(filter(None, [before, "-nhwc_regions"]))
    try:
        off = run_graph(ctx, build, inputs, tensor_path=False)
        t_off = kernel_templates(ctx, build, inputs)
    finally:
        if before is None:
            os.environ.pop("WEBNN_GPU_PASSES")
        else:
            os.environ["WEBNN_GPU_PASSES"] = before
    return got, off, templates, t_off


def test_an_exported_squeeze_excite_block(ctx, rng):
    """tf2onnx's form of an NHWC block: transpose -> NCHW depthwise conv -> transpose -> hard-swish
    -> transpose -> global pool -> 1x1 convs -> reshape [1, C, 1, 1] -> [1, 1, 1, C] -> scale the
    NHWC value -> transpose -> NCHW 1x1 conv -> transpose. Same values as NumPy, no transpose
    kernel left (the pool and the two 1x1 convs become one squeeze-and-excite kernel)."""
    C, R, O = 16, 8, 12
    x = rng.standard_normal((1, 10, 12, C)).astype(np.float32)
    wd = (rng.standard_normal((C, 1, 3, 3)) * 0.4).astype(np.float32)
    w1 = (rng.standard_normal((R, C, 1, 1)) * 0.3).astype(np.float32)
    w2 = (rng.standard_normal((C, R, 1, 1)) * 0.3).astype(np.float32)
    wp = (rng.standard_normal((O, C, 1, 1)) * 0.3).astype(np.float32)
    b1 = rng.standard_normal(R).astype(np.float32)

    def build(b, ops):
        t = b.transpose(ops["x"], permutation=TO_NCHW)
        d = b.transpose(b.conv2d(t, b.constant(wd), padding=[1] * 4, groups=C), permutation=TO_NHWC)
        h = b.hard_swish(d)
        p = b.average_pool2d(b.transpose(h, permutation=TO_NCHW))
        s = b.relu(b.conv2d(p, b.constant(w1), bias=b.constant(b1)))
        s = b.sigmoid(b.conv2d(s, b.constant(w2)))
        y = b.mul(h, b.reshape(s, [1, 1, 1, C]))
        y = b.conv2d(b.transpose(y, permutation=TO_NCHW), b.constant(wp))
        return {"y": b.transpose(y, permutation=TO_NHWC)}

    got, off, templates, t_off = _both(ctx, build, {"x": x})
    d = _conv(x.transpose(TO_NCHW), wd, groups=C)
    h = d * np.clip(d + 3, 0, 6) / 6
    s = np.maximum(_conv(h.mean(axis=(2, 3), keepdims=True), w1, pad=0, bias=b1), 0)
    s = _sigmoid(_conv(s, w2, pad=0))
    want = _conv(h * s, wp, pad=0).transpose(TO_NHWC)
    np.testing.assert_allclose(got["y"], want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(off["y"], want, rtol=1e-4, atol=1e-4)
    assert REMAP not in templates and REMAP in t_off, templates
    assert len(templates) < len(t_off)


def test_a_native_nchw_chain(ctx, rng, monkeypatch):
    """An NCHW input through depthwise convs, a per-channel constant ([C, 1, 1]), a concat and a
    slice along the channels, a zero pad, a softmax over the channels and a windowed pool, to an
    NCHW output: one transpose in and one out; a graph output in the middle and a reshape that
    mixes axes read the NCHW values (through a transpose each). (fuse_remap_chain off in both
    forms: it would make the NCHW form's transpose, slice and pad one kernel too.)"""
    monkeypatch.setenv("WEBNN_GPU_PASSES", "-fuse_remap_chain")
    C = 8
    x = rng.standard_normal((1, C, 9, 11)).astype(np.float32)
    w1 = (rng.standard_normal((C, 1, 3, 3)) * 0.4).astype(np.float32)
    w2 = (rng.standard_normal((2 * C, 1, 3, 3)) * 0.4).astype(np.float32)
    scale = rng.standard_normal((C, 1, 1)).astype(np.float32)

    def build(b, ops):
        a = b.mul(b.conv2d(ops["x"], b.constant(w1), padding=[1] * 4, groups=C), b.constant(scale))
        cat = b.concat([a, b.relu(a)], 1)
        c = b.conv2d(cat, b.constant(w2), padding=[1] * 4, groups=2 * C, strides=[2, 2])
        s = b.softmax(b.pad(b.slice(c, [0, 3, 0, 0], [1, 10, 5, 6]), [0, 0, 1, 0], [0, 0, 0, 1]), 1)
        y = b.average_pool2d(s, window_dimensions=[2, 2])
        return {"y": y, "mid": cat, "flat": b.neg(b.reshape(a, [1, C * 9, 11, 1]))}

    got, off, templates, t_off = _both(ctx, build, {"x": x})
    a = _conv(x, w1, groups=C) * scale
    cat = np.concatenate([a, np.maximum(a, 0)], axis=1)
    c = _conv(cat, w2, groups=2 * C, stride=2)
    s = np.pad(c[:, 3:13, 0:5, 0:6], ((0, 0), (0, 0), (1, 0), (0, 1)))
    e = np.exp(s - s.max(axis=1, keepdims=True))
    s = e / e.sum(axis=1, keepdims=True)
    y = (s[:, :, :-1, :-1] + s[:, :, 1:, :-1] + s[:, :, :-1, 1:] + s[:, :, 1:, 1:]) / 4
    want = {"y": y, "mid": cat, "flat": -a.reshape(1, C * 9, 11, 1)}
    for k, v in want.items():
        np.testing.assert_allclose(got[k], v, rtol=1e-4, atol=1e-5, err_msg=k)
        np.testing.assert_allclose(off[k], v, rtol=1e-4, atol=1e-5, err_msg=k)
    assert "conv/direct.wgsl" not in templates
    # the transposes in and out, one each for mid and flat (NCHW values), the slice and the pad
    assert templates.count(REMAP) <= 6, templates
    assert len(templates) < len(t_off), (templates, t_off)


def test_an_nchw_pointwise_layer_is_left_alone(ctx, rng):
    """An NCHW 1x1 conv + relu between a graph input and a graph output: NHWC would add two
    transposes and save nothing; the graph compiles to the same kernels with the rule on or off."""
    x = rng.standard_normal((1, 8, 6, 7)).astype(np.float32)
    w = (rng.standard_normal((12, 8, 1, 1)) * 0.4).astype(np.float32)

    def build(b, ops):
        return {"y": b.relu(b.conv2d(ops["x"], b.constant(w)))}

    got, off, templates, t_off = _both(ctx, build, {"x": x})
    np.testing.assert_allclose(got["y"], np.maximum(_conv(x, w, pad=0), 0), rtol=1e-4, atol=1e-5)
    assert templates == t_off


def _selfie_twin(make: bool = False):
    """The selfie model converted by tf2onnx (``benchmarks/peers.py`` makes it once, with a
    TensorFlow environment of its own), or None where it is not cached and its TensorFlow
    environment is not there (with ``make``, that environment is installed: minutes)."""
    import sys
    from pathlib import Path

    bench = Path(__file__).resolve().parents[2] / "benchmarks"
    sys.path.insert(0, str(bench))
    try:
        import peers
    finally:
        sys.path.remove(str(bench))
    path = peers.CACHE / "selfie_segmentation.onnx"
    if path.exists():
        return path
    if not make and not (peers.CACHE / "venv-tf2onnx" / "bin" / "python").exists():
        return None
    try:
        return peers.selfie_onnx()
    except peers.PeerUnavailable:
        return None


class _Loaded(Exception):
    """Raised in place of building a loaded model's graph: its builder and outputs."""


def _compiled_ops(ctx, monkeypatch, path) -> list[str]:
    """The operators of ``path``'s graph after the compiler's rules (no kernels are built)."""
    from webnn_gpu import compiler
    from webnn_gpu.tflite import LoadedModel

    def capture(cls, builder, outputs, inputs, **kwargs):
        raise _Loaded(builder, {k: v._value for k, v in outputs.items()})

    with monkeypatch.context() as m:
        m.setattr(LoadedModel, "build", classmethod(capture))
        with pytest.raises(_Loaded) as info:
            webnn.load(path, ctx)
    builder, outputs = info.value.args
    return sorted(n.op for n in compiler.run_passes(list(builder._nodes), outputs, ctx) if n.op != "reshape")


def test_the_selfie_twin_compiles_to_the_nodes_of_its_tflite_load(ctx, monkeypatch):
    """The selfie model's ONNX twin (tf2onnx: NCHW convs between 29 transposes) and the TFLite
    file give the same operators after the compiler's rules (IR only, no kernels built)."""
    from webnn_gpu import models

    twin = _selfie_twin()
    if twin is None:
        pytest.skip("the tf2onnx twin is not cached and benchmarks/peers.py's TensorFlow environment "
                    "is not installed (pytest -m soak tests/compiler/test_regions_gpu.py makes both)")
    assert _compiled_ops(ctx, monkeypatch, twin) == _compiled_ops(ctx, monkeypatch, models.fetch("selfie-segmentation"))


@pytest.mark.soak
def test_the_selfie_twin_runs_the_kernels_of_its_tflite_load(ctx):
    """The selfie model's ONNX twin compiles to the kernels of the TFLite file, and its mask
    matches the TFLite load's on a random image (soak: two model builds, about 2 minutes
    with Mesa's shader cache empty)."""
    from webnn_gpu import models

    twin = _selfie_twin(make=True)
    if twin is None:
        pytest.skip("the tf2onnx twin needs benchmarks/peers.py's TensorFlow environment")
    img = np.random.default_rng(5).uniform(0, 1, (1, 256, 256, 3)).astype(np.float32)
    tfl = webnn.load(models.fetch("selfie-segmentation"), ctx)
    onx = webnn.load(twin, ctx)
    want = next(iter(tfl.compute({tfl.input_names[0]: img}).values()))
    got = next(iter(onx.compute({onx.input_names[0]: img}).values()))
    np.testing.assert_allclose(got.reshape(want.shape), want, rtol=0, atol=1e-5)
    t_tfl = [s.template for s in tfl.graph._steps if hasattr(s, "template")]
    t_onx = [s.template for s in onx.graph._steps if hasattr(s, "template")]
    assert sorted(t_onx) == sorted(t_tfl), (t_onx, t_tfl)
