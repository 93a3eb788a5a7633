"""A dynamic tile kernel's last clamp from the parameter buffer (``linalg.clamp_param``,
``linalg.TILE_CLAMP_PARAM``; ``WEBNN_GPU_FORCE_TILE_CLAMP=text`` keeps it in the epilogue's text):
two layers whose kernels differ only in whether they clamp share one pipeline. The kernel applies
``select(e, min(max(e, lo), hi), on)`` to the epilogue's result, the same operations as the clamp
step (on) or ``e`` itself (off), so every output must be bit-identical to the text form's, NaN
and infinities included; the finite cases are also checked against float64 NumPy (``check`` of
test_tile.py: the f32 accumulation bound ``4 * K * 2**-24 * (|A| @ |B|)`` plus the output's
rounding). Near misses: a clamp before a residual add (not last: stays in the text, the flag
off), a clamp of one bound, a clamp as the only step (the epilogue left empty), float16.
"""

from __future__ import annotations

import numpy as np
import pytest

from references import conv2d_nhwc
from test_tile import build_run, check, data, tile_steps

from webnn_gpu.ops import linalg


@pytest.fixture(autouse=True)
def _tile_kernel(monkeypatch):
    monkeypatch.setenv("WEBNN_GPU_FORCE_MATMUL_MATVEC", "off")
    monkeypatch.delenv("WEBNN_GPU_FORCE_TILE_CLAMP", raising=False)


def _both(ctx, monkeypatch, build, inputs):
    """The default build and the text form: (default output, its tile steps); outputs bit-identical."""
    runs = {}
    for v in ("text", ""):
        monkeypatch.setenv("WEBNN_GPU_FORCE_TILE_CLAMP", v)
        out, steps = build_run(ctx, build, inputs)
        runs[v] = (np.ascontiguousarray(np.asarray(out)), tile_steps(steps))
    monkeypatch.delenv("WEBNN_GPU_FORCE_TILE_CLAMP")
    np.testing.assert_array_equal(runs[""][0].view(np.uint8), runs["text"][0].view(np.uint8))
    return runs[""]


def _conv(bld, x, w, bias):
    return bld.conv2d(x, bld.constant(w), bias=bld.constant(bias), input_layout="nhwc", filter_layout="ohwi")


def _pair(rng, C=144):
    """Two layers' filters and biases (144 channels: too wide for ``fuse_mlp`` to join them)."""
    return [(data(rng, (C, 1, 1, C)), data(rng, (C,))) for _ in range(2)]


def test_two_convs_differing_in_relu6_share_a_pipeline(ctx, rng, monkeypatch):
    x = data(rng, (1, 16, 16, 144))
    (w1, b1), (w2, b2) = _pair(rng)

    def build(bld, o):
        return _conv(bld, bld.clamp(_conv(bld, o["x"], w1, b1), min_value=0.0, max_value=6.0), w2, b2)

    out, steps = _both(ctx, monkeypatch, build, {"x": x})
    assert len(steps) == 2
    if ctx._subgroup and linalg.TILE_CLAMP_PARAM:
        assert steps[0].wgsl == steps[1].wgsl and steps[0].pipeline is steps[1].pipeline
        assert "ep_on" in steps[0].wgsl and "f32(6.0)" not in steps[0].wgsl
    h = np.clip(conv2d_nhwc(x, w1, b1), 0, 6)
    ha = conv2d_nhwc(np.abs(x), np.abs(w1), np.abs(b1))
    ref = conv2d_nhwc(h.astype(np.float32), w2, b2)
    absref = conv2d_nhwc(ha, np.abs(w2), np.abs(b2))
    check(out, ref, absref, 2 * 145, np.float32, "relu6 then bias")


def test_special_values_pass_both_forms_alike(ctx, rng, monkeypatch):
    """NaN, +-inf and huge inputs through a clamped and an unclamped launch: bit for bit (the
    unclamped one keeps its NaN)."""
    x = data(rng, (1, 8, 8, 144))
    x[0, 0, 0, :4] = [np.nan, np.inf, -np.inf, 3e38]
    x[0, 3, 5, 7] = np.nan
    x[0, 6, 1, 2] = -np.inf
    (w, bias), _ = _pair(rng)
    out, _ = _both(ctx, monkeypatch, lambda bld, o: _conv(bld, o["x"], w, bias), {"x": x})
    assert np.isnan(out).any()
    _both(ctx, monkeypatch, lambda bld, o: bld.clamp(_conv(bld, o["x"], w, bias), min_value=-1.5, max_value=2.5),
          {"x": x})


def test_clamp_before_a_residual_stays_in_the_text(ctx, rng, monkeypatch):
    x, r = data(rng, (1, 12, 12, 144)), data(rng, (1, 12, 12, 144))
    (w1, b1), _ = _pair(rng)

    def build(bld, o):
        return bld.add(bld.clamp(_conv(bld, o["x"], w1, b1), min_value=0.0, max_value=6.0), o["r"])

    out, steps = _both(ctx, monkeypatch, build, {"x": x, "r": r})
    assert len(steps) == 1 and "f32(6.0)" in steps[0].wgsl  # not the last step: in the text
    z = conv2d_nhwc(x, w1, b1)
    absref = conv2d_nhwc(np.abs(x), np.abs(w1), np.abs(b1)) + np.abs(r)
    check(out, np.clip(z, 0, 6) + r, absref, 146, np.float32, "clamp then add")


@pytest.mark.parametrize("lo, hi", [(0.0, None), (None, 1.0), (-0.5, 0.75)], ids=["min", "max", "both"])
def test_matmul_clamp_as_the_only_step(ctx, rng, monkeypatch, lo, hi):
    """A clamp of two bounds as the matmul's only step leaves an empty epilogue and shares the
    unclamped product's pipeline; one bound stays in the text."""
    a, b1, b2 = data(rng, (96, 160)), data(rng, (160, 160)), data(rng, (160, 160))

    def build(bld, o):
        return bld.matmul(bld.clamp(bld.matmul(o["a"], bld.constant(b1)), min_value=lo, max_value=hi), bld.constant(b2))

    out, steps = _both(ctx, monkeypatch, build, {"a": a})
    assert len(steps) == 2
    if ctx._subgroup and linalg.TILE_CLAMP_PARAM:
        assert (steps[0].pipeline is steps[1].pipeline) == (lo is not None and hi is not None)
    A = a.astype(np.float64)
    h = np.clip(A @ b1, -np.inf if lo is None else lo, np.inf if hi is None else hi).astype(np.float32)
    check(out, h.astype(np.float64) @ b2, (np.abs(A) @ np.abs(b1)) @ np.abs(b2), 2 * 160, np.float32, "matmul clamp")


def test_float16(ctx, rng, monkeypatch):
    if "float16" not in ctx.supported_data_types:
        pytest.fail("float16 is not supported on this adapter")
    x = data(rng, (1, 8, 8, 32), np.float16)
    w, bias = data(rng, (48, 1, 1, 32), np.float16), data(rng, (48,), np.float16)

    def build(bld, o):
        return bld.clamp(_conv(bld, o["x"], w, bias), min_value=0.0, max_value=6.0)

    out, _ = _both(ctx, monkeypatch, build, {"x": x})
    z = conv2d_nhwc(x, w, bias)
    check(out, np.clip(z, 0, 6), conv2d_nhwc(np.abs(x), np.abs(w), np.abs(bias)), 33, np.float16, "f16 relu6")
