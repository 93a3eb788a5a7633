"""Two products in one launch (the compiler's ``fuse_mlp``, ``matmul/mlp.wgsl``) against float64
NumPy: a feed-forward block (matmul, gelu, matmul with a residual add), gemm layers, NHWC pointwise
conv pairs with PReLU whose intermediate is also read elsewhere (stored as a second output),
float16, and near misses that stay two launches."""

from __future__ import annotations

import math

import numpy as np
import pytest

from helpers import kernel_templates, run_graph

TOL = {"float32": dict(rtol=2e-4, atol=2e-4), "float16": dict(rtol=2e-2, atol=2e-2)}


def _const(b, a, dtype):
    a = a.astype(dtype)
    return b.constant({"data_type": "float16" if dtype == np.float16 else "float32", "shape": list(a.shape)}, a)


def _gelu(v):
    return 0.5 * v * (1 + np.vectorize(math.erf)(v / math.sqrt(2)))


def _ffn(rng, K, H, N, dtype, residual=True, act="gelu"):
    w1 = rng.standard_normal((K, H)) / np.sqrt(K)
    b1 = rng.standard_normal(H) * 0.1
    w2 = rng.standard_normal((H, N)) / np.sqrt(H)
    b2 = rng.standard_normal(N) * 0.1

    def build(b, o):
        h = b.add(b.matmul(o["x"], _const(b, w1, dtype)), _const(b, b1, dtype))
        h = getattr(b, act)(h)
        y = b.add(b.matmul(h, _const(b, w2, dtype)), _const(b, b2, dtype))
        return {"y": b.add(y, o["x"]) if residual else y}

    def ref(x):
        x = x.astype(np.float64)
        h = x @ w1.astype(dtype).astype(np.float64) + b1.astype(dtype)
        h = {"gelu": _gelu, "relu": lambda v: np.maximum(v, 0)}[act](h)
        if dtype == np.float16:
            h = h.astype(np.float16).astype(np.float64)
        y = h @ w2.astype(dtype).astype(np.float64) + b2.astype(dtype)
        return y + x if residual else y
    return build, ref


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_feed_forward_block(ctx, rng, dtype):
    x = rng.standard_normal((1, 128, 48)).astype(dtype)
    build, ref = _ffn(rng, 48, 96, 48, dtype)
    got = run_graph(ctx, build, {"x": x})["y"]
    np.testing.assert_allclose(got.astype(np.float64), ref(x), **TOL[np.dtype(dtype).name])
    assert kernel_templates(ctx, build, {"x": x}) == ["matmul/mlp.wgsl"]


def test_gemm_layers(ctx, rng):
    # gemm layers with a transposed constant B, c and alpha
    x = rng.standard_normal((64, 64)).astype(np.float32)
    w1, c1 = rng.standard_normal((128, 64)) / 8, rng.standard_normal(128)
    w2, c2 = rng.standard_normal((128, 32)) / 16, rng.standard_normal(32)

    def build(b, o):
        h = b.relu(b.gemm(o["x"], _const(b, w1, np.float32), c=_const(b, c1, np.float32), b_transpose=True))
        return {"y": b.gemm(h, _const(b, w2, np.float32), c=_const(b, c2, np.float32), alpha=0.5)}

    got = run_graph(ctx, build, {"x": x})["y"]
    h = np.maximum(x.astype(np.float64) @ w1.T.astype(np.float32) + c1.astype(np.float32), 0)
    np.testing.assert_allclose(got, 0.5 * (h @ w2.astype(np.float32)) + c2.astype(np.float32), rtol=2e-4, atol=2e-4)
    assert kernel_templates(ctx, build, {"x": x}) == ["matmul/mlp.wgsl"]


def _prelu(v, s):
    return np.where(v >= 0, v, v * s)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_pointwise_pair_with_shared_intermediate(ctx, rng, dtype):
    # an NHWC block: 1x1 expansion + bias + residual + prelu, read by a 1x1 projection (+ prelu) and
    # by a later residual add: one launch stores both
    x = rng.standard_normal((1, 8, 8, 16)).astype(dtype)
    r = rng.standard_normal((1, 8, 8, 32)).astype(dtype)
    f1, b1, s1 = rng.standard_normal((32, 1, 1, 16)) / 4, rng.standard_normal(32) * 0.1, rng.random(32)
    f2, b2, s2 = rng.standard_normal((16, 1, 1, 32)) / 6, rng.standard_normal(16) * 0.1, rng.random(16)

    def build(b, o):
        c = lambda a: _const(b, a, dtype)  # noqa: E731
        h = b.conv2d(o["x"], c(f1), bias=c(b1), input_layout="nhwc", filter_layout="ohwi")
        h = b.prelu(b.add(h, o["r"]), c(s1))
        y = b.prelu(b.conv2d(h, c(f2), bias=c(b2), input_layout="nhwc", filter_layout="ohwi"), c(s2))
        return {"y": y, "z": b.add(h, c(np.ones(32)))}

    got = run_graph(ctx, build, {"x": x, "r": r})
    q = lambda a: a.astype(dtype).astype(np.float64)  # noqa: E731
    h = _prelu(np.einsum("nhwc,oc->nhwo", q(x), q(f1[:, 0, 0])) + q(b1) + q(r), q(s1))
    if dtype == np.float16:
        h = q(h)
    y = _prelu(np.einsum("nhwc,oc->nhwo", h, q(f2[:, 0, 0])) + q(b2), q(s2))
    tol = TOL[np.dtype(dtype).name]
    np.testing.assert_allclose(got["y"].astype(np.float64), y, **tol)
    np.testing.assert_allclose(got["z"].astype(np.float64), h + 1, **tol)
    assert kernel_templates(ctx, build, {"x": x, "r": r}).count("matmul/mlp.wgsl") == 1


def test_near_misses_stay_two_launches(ctx, rng):
    x = rng.standard_normal((32, 16)).astype(np.float32)
    w1, w2 = rng.standard_normal((16, 24)) / 4, rng.standard_normal((24, 8)) / 5

    def two_readers(b, o):  # the intermediate feeds two products: no chain
        h = b.relu(b.matmul(o["x"], _const(b, w1, np.float32)))
        return {"y": b.matmul(h, _const(b, w2, np.float32)), "z": b.matmul(h, _const(b, w2 * 2, np.float32))}

    def weights_input(b, o):  # the second B is computed
        h = b.relu(b.matmul(o["x"], _const(b, w1, np.float32)))
        return {"y": b.matmul(h, b.relu(o["w"]))}

    def between(b, o):  # an op between the products that no epilogue takes
        h = b.matmul(o["x"], _const(b, w1, np.float32))
        h = b.reshape(b.transpose(b.reshape(h, [32, 24]), permutation=[0, 1]), [32, 24])
        return {"y": b.matmul(b.softmax(h, axis=1), _const(b, w2, np.float32))}

    def wide(b, o):  # a hidden layer past fuse_mlp's cost condition
        h = b.relu(b.matmul(o["x"], _const(b, np.ones((16, 256)), np.float32)))
        return {"y": b.matmul(h, _const(b, np.ones((256, 8)), np.float32))}

    w = w2.astype(np.float32)
    for build, ins in ((two_readers, {"x": x}), (weights_input, {"x": x, "w": w}), (between, {"x": x}),
                       (wide, {"x": x})):
        assert "matmul/mlp.wgsl" not in kernel_templates(ctx, build, ins)
    got = run_graph(ctx, two_readers, {"x": x})
    h = np.maximum(x.astype(np.float64) @ w1.astype(np.float32), 0)
    np.testing.assert_allclose(got["y"], h @ w, rtol=2e-4, atol=2e-4)
    np.testing.assert_allclose(got["z"], h @ (2 * w), rtol=2e-4, atol=2e-4)


@pytest.mark.parametrize("K, H, N", [(144, 32, 192), (48, 96, 48), (64, 32, 32)],
                         ids=["one-hidden-tile", "two-tiles", "both-one-tile"])
def test_rows_written_out_where_the_column_tile_is_one(ctx, rng, monkeypatch, K, H, N):
    """A product whose columns are one tile has its column loop as a block and, where the tile is
    small (``linalg.rows_written_out``), its rows' epilogue calls written out instead of the row
    loop: bit for bit the loop's values (``WEBNN_GPU_FORCE_TILE_ROWS_OUT=off``); products of
    several column tiles keep both loops."""
    from helpers import kernel_steps

    x = rng.standard_normal((1, 64, K)).astype(np.float32)
    build, ref = _ffn(rng, K, H, N, np.float32, residual=False, act="relu")
    got = {}
    for form in ("off", ""):
        monkeypatch.setenv("WEBNN_GPU_FORCE_TILE_ROWS_OUT", form)
        (step,) = kernel_steps(ctx, build, {"x": x})
        assert step.template == "matmul/mlp.wgsl"
        TM, TN1, TN2 = (int(v) for v in __import__("re").search(r" (\d+)x(\d+)/(\d+)", step.note).groups())
        blocks = step.wgsl.count("{ let n0 = 0u;")
        assert blocks == (H == TN1) + (N == TN2)
        out1 = "row1(m0 + 1u," in step.wgsl
        out2 = "row2(m0 + 1u," in step.wgsl
        if form == "off":
            assert not out1 and not out2
        else:
            assert out1 == (H == TN1 and TM > 1 and TM * TN1 // 4 <= 36), step.note
            assert out2 == (N == TN2 and TM > 1 and TM * TN2 // 4 <= 36), step.note
        got[form] = run_graph(ctx, build, {"x": x})["y"]
    if (K, H, N) == (144, 32, 192):
        assert out1 and not out2  # the case the rule is for: the first product's rows written out
    assert np.array_equal(got["off"], got[""])
    np.testing.assert_allclose(got[""].astype(np.float64), ref(x), **TOL["float32"])
