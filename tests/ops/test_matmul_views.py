"""Matmuls reading transposed operands and storing permuted outputs in place (the compiler's
``fold_matmul_views``) against float64 NumPy, on the kernels they take (``matmul/small.wgsl``,
the tile kernel with vec4 and scalar stores), and the near misses that keep their transposes."""

from __future__ import annotations

import numpy as np
import pytest

from webnn_gpu.compiler.rules import views

from helpers import kernel_templates, run_graph


def _mha(b, x, wq, wk, wv, T, H, D, dt):
    """A Keras-style attention block: projections split into heads with reshape + transpose,
    q k^T scaled, softmax, times v, heads merged back with transpose + reshape."""
    E = H * D

    def proj(w, perm):
        p = b.matmul(x, b.constant({"data_type": dt, "shape": [E, E]}, w))
        return b.transpose(b.reshape(p, [1, T, H, D]), permutation=perm)

    q, k, v = proj(wq, [0, 2, 1, 3]), proj(wk, [0, 2, 3, 1]), proj(wv, [0, 2, 1, 3])
    s = b.mul(b.matmul(q, k), b.constant({"data_type": dt, "shape": []}, np.array(D ** -0.5, dtype=dt)))
    o = b.matmul(b.softmax(s, axis=3), v)
    return b.reshape(b.transpose(o, permutation=[0, 2, 1, 3]), [1, T, E])


def _mha_ref(x, wq, wk, wv, T, H, D):
    x, wq, wk, wv = (a.astype(np.float64) for a in (x, wq, wk, wv))
    q, k, v = ((x @ w).reshape(T, H, D).transpose(1, 0, 2) for w in (wq, wk, wv))
    s = q @ k.transpose(0, 2, 1) * D ** -0.5
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return (p @ v).transpose(1, 0, 2).reshape(1, T, H * D)


@pytest.mark.parametrize("T,H,D,dt,tol", [(6, 2, 4, "float32", 1e-5), (24, 4, 8, "float32", 1e-5),
                                          (5, 3, 3, "float32", 1e-5), (8, 2, 4, "float16", 3e-3)])
def test_attention_heads_without_transpose_kernels(ctx, rng, T, H, D, dt, tol):
    E = H * D
    x = rng.standard_normal((1, T, E)).astype(dt)
    ws = [(rng.standard_normal((E, E)) / np.sqrt(E)).astype(dt) for _ in range(3)]
    build = lambda b, o: {"y": _mha(b, o["x"], *ws, T, H, D, dt)}  # noqa: E731
    got = run_graph(ctx, build, {"x": x})["y"].astype(np.float64)
    want = _mha_ref(x, *ws, T, H, D)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())
    assert "layout/remap.wgsl" not in kernel_templates(ctx, build, {"x": x})


@pytest.mark.parametrize("batch,M,K,N", [((2,), 3, 5, 4), ((2, 3), 6, 8, 8), ((3,), 20, 16, 12)])
def test_transposed_operands_and_permuted_output(ctx, rng, batch, M, K, N):
    """A read as [..., K, M] -> perm, B as [N, ..., K], the output stored [M, ..., N]: the small
    kernel (one batch dimension), the tile kernel with vec4 and with scalar stores."""
    nb = len(batch)
    a = rng.standard_normal((*batch, K, M)).astype(np.float32)  # the product reads its last two swapped ...
    a = np.ascontiguousarray(np.moveaxis(a, -1, 0))  # ... from [M, batch..., K]
    bm = rng.standard_normal((N, *batch, K)).astype(np.float32)
    a_perm = list(range(1, nb + 1)) + [0, nb + 1]
    b_perm = list(range(1, nb + 1)) + [nb + 1, 0]
    o_perm = [nb] + list(range(nb)) + [nb + 1]

    def build(b, o):
        y = b.matmul(b.transpose(b.neg(o["a"]), permutation=a_perm), b.transpose(b.neg(o["b"]), permutation=b_perm))
        return {"y": b.transpose(y, permutation=o_perm)}

    got = run_graph(ctx, build, {"a": a, "b": bm})["y"]
    want = np.transpose(np.transpose(a, a_perm).astype(np.float64) @ np.transpose(bm, b_perm), o_perm)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    assert "layout/remap.wgsl" not in kernel_templates(ctx, build, {"a": a, "b": bm})


def test_a_large_product_keeps_its_transpose_kernel(ctx, rng, monkeypatch):
    """Past VIEW_MAX_MACS the transposed B is a transpose kernel (vec4 loads in the product); the
    output's permutation is stored in place at any size."""
    monkeypatch.setattr(views, "VIEW_MAX_MACS", 2 * 8 * 8 * 8 - 1)
    a = rng.standard_normal((2, 8, 8)).astype(np.float32)
    bt = rng.standard_normal((2, 8, 8)).astype(np.float32)

    def build(b, o):
        y = b.matmul(o["a"], b.transpose(b.neg(o["b"]), permutation=[0, 2, 1]))
        return {"y": b.transpose(y, permutation=[1, 0, 2])}

    got = run_graph(ctx, build, {"a": a, "b": bt})["y"]
    want = np.transpose(a.astype(np.float64) @ np.transpose(-bt.astype(np.float64), (0, 2, 1)), (1, 0, 2))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    assert kernel_templates(ctx, build, {"a": a, "b": bt}).count("layout/remap.wgsl") == 1


def test_a_transpose_that_is_also_an_output_is_computed(ctx, rng):
    a = rng.standard_normal((2, 4, 6)).astype(np.float32)
    bt = rng.standard_normal((2, 5, 6)).astype(np.float32)

    def build(b, o):
        t = b.transpose(o["b"], permutation=[0, 2, 1])
        return {"y": b.matmul(o["a"], t), "t": t}

    got = run_graph(ctx, build, {"a": a, "b": bt})
    np.testing.assert_allclose(got["y"], a.astype(np.float64) @ bt.transpose(0, 2, 1), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got["t"], bt.transpose(0, 2, 1))
