"""A small product whose rows a layer normalization reads, in one kernel (the compiler's
``fuse_matmul_layer_norm``, ``matmul/layer_norm.wgsl``) against float64 NumPy, float32 and float16
(loaded as float16, computed in float32, rounded at the stores), with its near misses (rows too
long) computed by the two kernels."""

from __future__ import annotations

import numpy as np
import pytest

from helpers import kernel_templates, run_graph


def _block(b, o, w, c, g, be, relu):
    dt = "float32" if w.dtype == np.float32 else "float16"
    y = b.add(b.add(b.matmul(o["x"], b.constant({"data_type": dt, "shape": list(w.shape)}, w)),
                    b.constant({"data_type": dt, "shape": list(c.shape)}, c)), o["r"])
    z = b.layer_normalization(y, axes=[2], epsilon=1e-3,
                              scale=b.constant({"data_type": dt, "shape": list(g.shape)}, g) if g is not None else None,
                              bias=b.constant({"data_type": dt, "shape": list(be.shape)}, be) if be is not None else None)
    return {"z": b.relu(z) if relu else z}


def _ref(x, r, w, c, g, be, relu):
    y = x.astype(np.float64) @ w.astype(np.float64) + c + r
    z = (y - y.mean(-1, keepdims=True)) / np.sqrt(y.var(-1, keepdims=True) + 1e-3)
    z = z * (1 if g is None else g) + (0 if be is None else be)
    return np.maximum(z, 0) if relu else z


@pytest.mark.parametrize("T,K,N,scale,relu,dt", [(24, 32, 32, True, False, np.float32), (5, 7, 6, False, True, np.float32),
                                                 (40, 16, 64, True, True, np.float32), (1, 64, 3, True, False, np.float32),
                                                 (24, 32, 32, True, False, np.float16), (5, 7, 6, False, True, np.float16)])
def test_product_and_layer_norm_in_one_kernel(ctx, rng, T, K, N, scale, relu, dt):
    x = rng.standard_normal((1, T, K)).astype(dt)
    r = rng.standard_normal((1, T, N)).astype(dt)
    w, c = (rng.standard_normal((K, N)) / np.sqrt(K)).astype(dt), rng.standard_normal(N).astype(dt)
    g = rng.standard_normal(N).astype(dt) if scale else None
    be = rng.standard_normal(N).astype(dt)
    build = lambda b, o: _block(b, o, w, c, g, be, relu)  # noqa: E731
    got = run_graph(ctx, build, {"x": x, "r": r})["z"].astype(np.float64)
    ref = _ref(x, r, w, c, g, be, relu)
    tol = dict(rtol=1e-4, atol=1e-4) if dt == np.float32 else dict(rtol=1e-2, atol=3e-2 * np.abs(ref).max())
    np.testing.assert_allclose(got, ref, **tol)
    assert kernel_templates(ctx, build, {"x": x, "r": r}) == ["matmul/layer_norm.wgsl"]


@pytest.mark.parametrize("N,dt,tol", [(65, np.float32, 1e-4), (65, np.float16, 3e-2)])
def test_near_misses_keep_two_kernels(ctx, rng, N, dt, tol):
    T, K = 6, 8
    x = rng.standard_normal((1, T, K)).astype(dt)
    r = rng.standard_normal((1, T, N)).astype(dt)
    w, c = (rng.standard_normal((K, N)) / np.sqrt(K)).astype(dt), rng.standard_normal(N).astype(dt)
    g, be = rng.standard_normal(N).astype(dt), rng.standard_normal(N).astype(dt)
    build = lambda b, o: _block(b, o, w, c, g, be, False)  # noqa: E731
    got = run_graph(ctx, build, {"x": x, "r": r})["z"].astype(np.float64)
    np.testing.assert_allclose(got, _ref(x, r, w, c, g, be, False), rtol=tol, atol=tol)
    assert "matmul/layer_norm.wgsl" not in kernel_templates(ctx, build, {"x": x, "r": r})


@pytest.mark.parametrize("dt,tol", [(np.float32, 1e-4), (np.float16, 3e-2)])
def test_a_product_read_elsewhere_is_stored_by_the_same_kernel(ctx, rng, dt, tol):
    """A pre-norm block: the sum is normalized and also read by another op (and a graph output)."""
    T, K, N = 9, 12, 20
    name = "float32" if dt == np.float32 else "float16"
    x = rng.standard_normal((1, T, K)).astype(dt)
    r = rng.standard_normal((1, T, N)).astype(dt)
    w, c = (rng.standard_normal((K, N)) / np.sqrt(K)).astype(dt), rng.standard_normal(N).astype(dt)
    g, be = rng.standard_normal(N).astype(dt), rng.standard_normal(N).astype(dt)

    def build(b, o):
        y = b.add(b.add(b.matmul(o["x"], b.constant({"data_type": name, "shape": [K, N]}, w)),
                        b.constant({"data_type": name, "shape": [N]}, c)), o["r"])
        z = b.layer_normalization(y, axes=[2], epsilon=1e-3, scale=b.constant({"data_type": name, "shape": [N]}, g),
                                  bias=b.constant({"data_type": name, "shape": [N]}, be))
        return {"z": b.sigmoid(z), "y": y, "y2": b.mul(y, y)}

    got = {k: v.astype(np.float64) for k, v in run_graph(ctx, build, {"x": x, "r": r}).items()}
    y = x.astype(np.float64) @ w + c + r
    z = _ref(x, r, w, c, g, be, False)
    for k, want in (("y", y), ("z", 1 / (1 + np.exp(-z))), ("y2", y * y)):
        np.testing.assert_allclose(got[k], want, rtol=tol, atol=tol * np.abs(want).max(), err_msg=k)
    assert kernel_templates(ctx, build, {"x": x, "r": r})[0] == "matmul/layer_norm.wgsl"


@pytest.mark.parametrize("M,K,N,bt,dt", [(1, 64, 10, True, np.float32), (5, 12, 7, False, np.float32),
                                         (3, 128, 64, True, np.float32), (1, 64, 10, True, np.float16),
                                         (5, 12, 7, False, np.float16)])
def test_dense_layer_and_softmax_in_one_kernel(ctx, rng, M, K, N, bt, dt):
    """A classifier's last layer: gemm (alpha, beta * c, transposed or plain B) and softmax."""
    x = rng.standard_normal((M, K)).astype(dt)
    w = (rng.standard_normal((N, K) if bt else (K, N)) / np.sqrt(K)).astype(dt)
    c = rng.standard_normal(N).astype(dt)
    name = "float32" if dt == np.float32 else "float16"

    def build(b, o):
        y = b.gemm(o["x"], b.constant({"data_type": name, "shape": list(w.shape)}, w),
                   c=b.constant({"data_type": name, "shape": [N]}, c), alpha=0.5, beta=2.0, b_transpose=bt)
        return {"p": b.softmax(y, axis=1)}

    s = 0.5 * (x.astype(np.float64) @ (w.T if bt else w)) + 2.0 * c
    e = np.exp(s - s.max(1, keepdims=True))
    got = run_graph(ctx, build, {"x": x})["p"].astype(np.float64)
    tol = dict(rtol=1e-5, atol=1e-6) if dt == np.float32 else dict(rtol=1e-2, atol=3e-2 * (e / e.sum(1, keepdims=True)).max())
    np.testing.assert_allclose(got, e / e.sum(1, keepdims=True), **tol)
    assert kernel_templates(ctx, build, {"x": x}) == ["matmul/layer_norm.wgsl"]


def test_one_activation_helper_in_both_epilogues(ctx, rng):
    """gelu after the product and after the normalization: its helper is defined once."""
    from math import erf

    T, K, N = 4, 8, 12
    x = rng.standard_normal((1, T, K)).astype(np.float32)
    w = (rng.standard_normal((K, N)) / np.sqrt(K)).astype(np.float32)

    def build(b, o):
        y = b.gelu(b.matmul(o["x"], b.constant({"data_type": "float32", "shape": [K, N]}, w)))
        return {"z": b.gelu(b.layer_normalization(y, axes=[2], epsilon=1e-3))}

    gelu = np.vectorize(lambda v: 0.5 * v * (1 + erf(v / np.sqrt(2))))
    y = gelu(x.astype(np.float64) @ w)
    z = (y - y.mean(-1, keepdims=True)) / np.sqrt(y.var(-1, keepdims=True) + 1e-3)
    got = run_graph(ctx, build, {"x": x})["z"]
    np.testing.assert_allclose(got, gelu(z), rtol=1e-4, atol=1e-4)
    assert kernel_templates(ctx, build, {"x": x}) == ["matmul/layer_norm.wgsl"]
