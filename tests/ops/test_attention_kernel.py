"""An attention node in one launch (``matmul/attention.wgsl``, linalg.attention_kernel) against
float64 NumPy: keys transposed as Keras and PyTorch write ``q @ k^T`` (read in place by
fold_matmul_views), a scale and a mask in the scores' epilogue, an activation and merged heads
on the context; float16 (loaded as float16, computed in float32, rounded at the store); near misses
that keep the three kernels."""

from __future__ import annotations

import numpy as np
import pytest

from webnn_gpu.ops import linalg

from helpers import kernel_templates, run_graph


def _softmax(s):
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _case(rng, B, H, T, L, D, Dv):
    q = rng.standard_normal((B, H, T, D)).astype(np.float32)
    k = rng.standard_normal((B, H, L, D)).astype(np.float32)  # keys as rows: the product reads k^T
    v = rng.standard_normal((B, H, L, Dv)).astype(np.float32)
    return q, k, v


def _build(mask, merge, H, T, Dv, scale, dt="float32"):
    def build(b, o):
        kt = b.transpose(o["k"], permutation=[0, 1, 3, 2])
        s = b.mul(b.matmul(o["q"], kt), b.constant({"data_type": dt, "shape": []}, np.array(scale, dt)))
        if mask is not None:
            s = b.add(s, b.constant({"data_type": dt, "shape": list(mask.shape)}, mask.astype(dt)))
        y = b.matmul(b.softmax(s, axis=3), o["v"])
        if merge:  # [B, H, T, Dv] -> [B, T, H * Dv]
            y = b.reshape(b.transpose(y, permutation=[0, 2, 1, 3]), [y.shape[0], T, H * Dv])
        return {"y": b.relu(y)}
    return build


def _ref(q, k, v, mask, merge, scale, dt=np.float32):
    s = q.astype(np.float64) @ np.swapaxes(k, -1, -2) * np.float64(dt(scale)) + (0 if mask is None else mask)
    y = _softmax(s) @ v
    if merge:
        B, H, T, Dv = y.shape
        y = y.transpose(0, 2, 1, 3).reshape(B, T, H * Dv)
    return np.maximum(y, 0)


@pytest.mark.parametrize("B,H,T,L,D,Dv,masked,merge", [(1, 4, 24, 24, 8, 8, True, True), (2, 3, 5, 7, 16, 4, False, False),
                                                      (1, 1, 65, 65, 16, 16, False, True), (1, 2, 9, 128, 4, 8, True, False)])
def test_attention_in_one_kernel(ctx, rng, B, H, T, L, D, Dv, masked, merge):
    q, k, v = _case(rng, B, H, T, L, D, Dv)
    mask = np.triu(np.full((T, L), -1e4, np.float32), 1) if masked else None
    scale = D ** -0.5
    build = _build(mask, merge, H, T, Dv, scale)
    got = run_graph(ctx, build, {"q": q, "k": k, "v": v})["y"]
    np.testing.assert_allclose(got, _ref(q, k, v, mask, merge, scale), rtol=1e-4, atol=1e-5)
    templates = kernel_templates(ctx, build, {"q": q, "k": k, "v": v})
    assert templates[0] == "matmul/attention.wgsl" and "norm/softmax.wgsl" not in templates


def test_matches_the_three_kernels(ctx, rng, monkeypatch):
    q, k, v = _case(rng, 1, 2, 12, 12, 8, 8)
    build = _build(None, True, 2, 12, 8, 0.35)
    one = run_graph(ctx, build, {"q": q, "k": k, "v": v})["y"]
    monkeypatch.setenv("WEBNN_GPU_FORCE_ATTENTION", "split")
    three = run_graph(ctx, build, {"q": q, "k": k, "v": v})["y"]
    assert "norm/softmax.wgsl" in kernel_templates(ctx, build, {"q": q, "k": k, "v": v})
    np.testing.assert_allclose(one, three, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("L,D", [(linalg.ATTENTION_MAX_KEYS + 1, 4), (8, 6)])
def test_near_misses_keep_three_kernels(ctx, rng, L, D):
    """Too many keys for the row's private array; a depth that is not a multiple of 4."""
    q, k, v = _case(rng, 1, 1, 4, L, D, 4)
    build = _build(None, False, 1, 4, 4, 0.5)
    got = run_graph(ctx, build, {"q": q, "k": k, "v": v})["y"]
    np.testing.assert_allclose(got, _ref(q, k, v, None, False, 0.5), rtol=1e-4, atol=1e-5)
    assert "norm/softmax.wgsl" in kernel_templates(ctx, build, {"q": q, "k": k, "v": v})


@pytest.mark.parametrize("B,H,T,L,D,Dv,masked,merge", [(1, 4, 24, 24, 8, 8, True, True), (2, 3, 5, 7, 16, 4, False, False)])
def test_float16_attention_in_one_kernel(ctx, rng, B, H, T, L, D, Dv, masked, merge):
    q, k, v = (a.astype(np.float16) for a in _case(rng, B, H, T, L, D, Dv))
    mask = np.triu(np.full((T, L), -1e4, np.float16), 1) if masked else None
    scale = D ** -0.5
    build = _build(mask, merge, H, T, Dv, scale, "float16")
    got = run_graph(ctx, build, {"q": q, "k": k, "v": v})["y"].astype(np.float64)
    ref = _ref(q, k, v, mask, merge, scale, np.float16)
    np.testing.assert_allclose(got, ref, rtol=1e-2, atol=3e-2 * np.abs(ref).max())
    templates = kernel_templates(ctx, build, {"q": q, "k": k, "v": v})
    assert templates[0] == "matmul/attention.wgsl" and "norm/softmax.wgsl" not in templates


def test_a_float16_near_miss_keeps_three_kernels(ctx, rng):
    """A depth that is not a multiple of 4, in float16."""
    q, k, v = (a.astype(np.float16) for a in _case(rng, 1, 1, 4, 8, 6, 4))
    build = _build(None, False, 1, 4, 4, 0.5, "float16")
    got = run_graph(ctx, build, {"q": q, "k": k, "v": v})["y"].astype(np.float64)
    ref = _ref(q, k, v, None, False, 0.5, np.float16)
    np.testing.assert_allclose(got, ref, rtol=1e-2, atol=3e-2 * np.abs(ref).max())
    assert "norm/softmax.wgsl" in kernel_templates(ctx, build, {"q": q, "k": k, "v": v})
