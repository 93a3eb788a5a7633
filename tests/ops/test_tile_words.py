"""The tile kernel's memory words (``matmul/tile.wgsl``'s ``x64`` and ``x8``; ``matmul/mlp.wgsl``'s
``x64``): A, B, the output and the given operand moved as u64 words on lavapipe. Every form (``WEBNN_GPU_FORCE_TILE_WORDS``
``vec4``: vec4s of the storage type, ``u64``: words of 4 values, default: stores of 8) must give
bit-identical outputs, each checked against float64 NumPy: odd sizes, column counts not a
multiple of 8 or 4, float16, epilogues, a residual add, pool partials, a window conv, and
reductions and images past llvmpipe's loop limit."""

from __future__ import annotations

import numpy as np
import pytest

import webnn_gpu as webnn
from webnn_gpu._lower import KernelStep
from webnn_gpu.ops import linalg

from references import ref_conv2d
from test_tile import check, data

FORMS = ("vec4", "u64", "")


def _run(ctx, monkeypatch, build, inputs: dict, form: str, template: str = "matmul/tile.wgsl"):
    """Build and run ``build(builder, operands) -> {name: MLOperand}`` with the tile words forced
    to ``form``; (outputs, the WGSL texts of ``template``'s kernels)."""
    monkeypatch.setenv("WEBNN_GPU_FORCE_TILE_WORDS", form)
    b = webnn.MLGraphBuilder(ctx)
    ops = {n: b.input(n, {"data_type": webnn._dtypes.from_numpy(a.dtype), "shape": list(a.shape)})
           for n, a in inputs.items()}
    graph = b.build(build(b, ops))
    texts = [s.wgsl for s in graph._steps if isinstance(s, KernelStep) and s.template == template]
    out = ctx.compute(graph, inputs)
    graph.destroy()
    return out, texts


def _forms(ctx, monkeypatch, build, inputs: dict, out_word: str | None, template: str = "matmul/tile.wgsl"):
    """Run every form; assert each one's declarations (``out_word``: the default form's output
    element, None: not checked) and that all outputs are bit-identical.
    Returns the default form's outputs."""
    runs = {f: _run(ctx, monkeypatch, build, inputs, f, template) for f in FORMS}
    for f, (_, texts) in runs.items():
        assert texts, f"the product runs on {template}"
        if f == "vec4":
            assert not any("u64" in t for t in texts)
        else:
            assert all("u64" in t for t in texts)
    if out_word is not None:
        assert any(f"var<storage, read_write> out: array<{out_word}>;" in t for t in runs[""][1])
    base = runs["vec4"][0]
    for f in ("u64", ""):
        for name, v in runs[f][0].items():
            a, b = np.ascontiguousarray(base[name]), np.ascontiguousarray(v)
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8), err_msg=f"{name}: form {f!r}")
    return runs[""][0]


def _words(dt, n8: bool) -> str:
    """The default form's output element: 8 values where the tile allows, else 4."""
    if dt == np.float32:
        return "vec4<u64>" if n8 else "vec2<u64>"
    return "vec2<u64>" if n8 else "u64"


def _ref_pointwise(x, w, bias):
    return np.einsum("nhwc,oc->nhwo", x.astype(np.float64), w.astype(np.float64)) + bias.astype(np.float64)


@pytest.mark.parametrize("dt", [np.float32, np.float16], ids=["float32", "float16"])
@pytest.mark.parametrize("hw, C, O, act", [((7, 9), 24, 48, "relu"), ((5, 3), 16, 36, "clamp"),
                                           ((9, 11), 40, 20, "relu"), ((17, 19), 16, 6, "clamp")])
def test_pointwise_conv_forms(ctx, rng, monkeypatch, dt, hw, C, O, act):
    """Pointwise convs (the parameter-buffer kernel) with a bias and an activation: 48 columns
    (stores of 8), 36 and 20 (4-value words), 6 (scalar stores, words for A and B)."""
    if dt == np.float16 and "float16" not in ctx.supported_data_types:
        pytest.fail("float16 is expected on lavapipe")
    x, w, bias = data(rng, (1, *hw, C), dt), data(rng, (O, 1, 1, C), dt), data(rng, (O,), dt)

    def build(b, o):
        y = b.conv2d(o["x"], b.constant(w), bias=b.constant(bias), input_layout="nhwc", filter_layout="ohwi")
        return {"y": b.relu(y) if act == "relu" else b.clamp(y, min_value=-1.0, max_value=1.5)}

    word = _words(dt, O % 8 == 0) if O % 4 == 0 else ("f32" if dt == np.float32 else "f16")
    out = _forms(ctx, monkeypatch, build, {"x": x}, word)
    ref = _ref_pointwise(x, w[:, 0, 0, :], bias)
    ref = np.maximum(ref, 0) if act == "relu" else np.clip(ref, -1.0, 1.5)
    absref = _ref_pointwise(np.abs(x), np.abs(w[:, 0, 0, :]), np.abs(bias))
    check(out["y"], ref, absref, C, dt, "pointwise")


@pytest.mark.parametrize("dt", [np.float32, np.float16], ids=["float32", "float16"])
def test_residual_add_and_pool_partials(ctx, rng, monkeypatch, dt):
    """A residual read at each output (the given operand, loaded as words of 8), relu after it,
    and a global average pool of the result (fuse_pool_partials) beside it."""
    if dt == np.float16 and "float16" not in ctx.supported_data_types:
        pytest.fail("float16 is expected on lavapipe")
    x, w, r = data(rng, (1, 9, 7, 32), dt), data(rng, (64, 1, 1, 32), dt), data(rng, (1, 9, 7, 64), dt)

    def build(b, o):
        y = b.relu(b.add(b.conv2d(o["x"], b.constant(w), input_layout="nhwc", filter_layout="ohwi"), o["r"]))
        return {"y": y, "m": b.reduce_mean(y, axes=[1, 2])}

    out = _forms(ctx, monkeypatch, build, {"x": x, "r": r}, _words(dt, True))
    ref = np.maximum(_ref_pointwise(x, w[:, 0, 0, :], np.zeros(64)) + r.astype(np.float64), 0)
    absref = _ref_pointwise(np.abs(x), np.abs(w[:, 0, 0, :]), np.abs(r[0, 0, 0])) + np.abs(r.astype(np.float64))
    check(out["y"], ref, absref, 33, dt, "residual")
    tol = 1e-5 if dt == np.float32 else 2e-2
    np.testing.assert_allclose(out["m"].astype(np.float64), ref.mean(axis=(1, 2)), atol=tol, rtol=tol)


@pytest.mark.parametrize("C, O, s", [(16, 24, 2), (8, 40, 1), (12, 32, 1)])
def test_window_conv_forms(ctx, rng, monkeypatch, C, O, s):
    """3x3 convs gathering A from the image (im2col, with and without the shared window
    columns), uneven padding, odd images."""
    x, w, bias = data(rng, (1, 11, 13, C)), data(rng, (O, 3, 3, C)), data(rng, (O,))
    pad = [1, 0, 1, 1]

    def build(b, o):
        return {"y": b.conv2d(o["x"], b.constant(w), bias=b.constant(bias), strides=[s, s], padding=pad,
                              input_layout="nhwc", filter_layout="ohwi")}

    out = _forms(ctx, monkeypatch, build, {"x": x}, None)

    def ref_of(x, w, bias):
        y = ref_conv2d(x.astype(np.float64).transpose(0, 3, 1, 2), w.astype(np.float64).transpose(0, 3, 1, 2),
                       padding=pad, strides=(s, s)).transpose(0, 2, 3, 1)
        return y + bias.astype(np.float64)

    ref, absref = ref_of(x, w, bias), ref_of(np.abs(x), np.abs(w), np.abs(bias))
    check(out["y"], ref, absref, 9 * C + 1, np.float32, "window")


@pytest.mark.parametrize("M, K, N", [(13, 20, 44), (45, 6, 16), (81, 16, 7), (33, 64, 64)])
def test_matmul_forms(ctx, rng, monkeypatch, M, K, N):
    """Matmuls with a constant B: K not a multiple of 4 (scalar A), N of 7 (scalar stores)."""
    a, bm = data(rng, (M, K)), data(rng, (K, N))
    out = _forms(ctx, monkeypatch, lambda b, o: {"y": b.matmul(o["a"], b.constant(bm))}, {"a": a}, None)
    A, B = a.astype(np.float64), bm.astype(np.float64)
    check(out["y"], A @ B, np.abs(A) @ np.abs(B), K, np.float32, "matmul")


def test_past_the_loop_limit(ctx, rng, monkeypatch):
    """A reduction of 270000 terms (split below llvmpipe's loop limit) and a 300 x 250 image of
    75000 pixels, both moving words."""
    K = 270_000
    assert K // 4 > linalg.LOOP_BUDGET
    a, bm = data(rng, (5, K)), data(rng, (K, 8))  # (4 rows of so large a B: matvec.wgsl)
    out = _forms(ctx, monkeypatch, lambda b, o: {"y": b.matmul(o["a"], b.constant(bm))}, {"a": a}, None)
    A, B = a.astype(np.float64), bm.astype(np.float64)
    check(out["y"], A @ B, np.abs(A) @ np.abs(B), K, np.float32, "long K")
    x, w, bias = data(rng, (1, 300, 250, 8)), data(rng, (16, 1, 1, 8)), data(rng, (16,))

    def build(b, o):
        return {"y": b.conv2d(o["x"], b.constant(w), bias=b.constant(bias), input_layout="nhwc",
                              filter_layout="ohwi")}

    out = _forms(ctx, monkeypatch, build, {"x": x}, None)
    check(out["y"], _ref_pointwise(x, w[:, 0, 0, :], bias),
          _ref_pointwise(np.abs(x), np.abs(w[:, 0, 0, :]), np.abs(bias)), 9, np.float32, "tall image")


@pytest.mark.parametrize("dt", [np.float32, np.float16], ids=["float32", "float16"])
def test_mlp_forms(ctx, rng, monkeypatch, dt):
    """matmul/mlp.wgsl's words: a 1x1 expansion + bias + residual + PReLU, kept (``mid``, read by
    a later add) and read by a 1x1 projection + bias + PReLU (float16 weights in storage
    buffers, float32 ones in uniform buffers)."""
    if dt == np.float16 and "float16" not in ctx.supported_data_types:
        pytest.fail("float16 is expected on lavapipe")
    x, r = data(rng, (1, 8, 8, 16), dt), data(rng, (1, 8, 8, 32), dt)
    f1, b1, s1 = (data(rng, (32, 1, 1, 16)) / 4).astype(dt), data(rng, (32,), dt), rng.random(32).astype(dt)
    f2, b2, s2 = (data(rng, (16, 1, 1, 32)) / 6).astype(dt), data(rng, (16,), dt), rng.random(16).astype(dt)

    def build(b, o):
        h = b.conv2d(o["x"], b.constant(f1), bias=b.constant(b1), input_layout="nhwc", filter_layout="ohwi")
        h = b.prelu(b.add(h, o["r"]), b.constant(s1))
        y = b.prelu(b.conv2d(h, b.constant(f2), bias=b.constant(b2), input_layout="nhwc", filter_layout="ohwi"),
                    b.constant(s2))
        return {"y": y, "z": b.add(h, b.constant(np.ones(32, dt)))}

    out = _forms(ctx, monkeypatch, build, {"x": x, "r": r}, _words(dt, False), "matmul/mlp.wgsl")
    q = lambda a: a.astype(np.float64)  # noqa: E731
    pre = lambda v, s: np.where(v >= 0, v, v * q(s))  # noqa: E731
    h = pre(_ref_pointwise(x, f1[:, 0, 0, :], b1) + q(r), s1)
    tol = 2e-5 if dt == np.float32 else 2e-2  # float16: the hidden rows and both outputs rounded
    np.testing.assert_allclose(q(out["z"]), h + 1, atol=tol, rtol=tol)
    if dt == np.float16:
        h = q(h.astype(dt))
    y = pre(np.einsum("nhwc,oc->nhwo", h, q(f2[:, 0, 0, :])) + q(b2), s2)
    np.testing.assert_allclose(q(out["y"]), y, atol=tol, rtol=tol)


class _LC:
    def __init__(self, tuning, features):
        self.tuning, self.features = tuning, frozenset(features)


def test_words_rule(monkeypatch):
    """Words on the lane-loop profile with 64-bit integers only; the switch keeps vec4s."""
    monkeypatch.delenv("WEBNN_GPU_FORCE_TILE_WORDS", raising=False)
    assert linalg.tile_words(_LC("lane-loop", {"shader-int64"}), "float32")
    assert linalg.tile_words(_LC("lane-loop", {"shader-int64"}), "float16")
    assert not linalg.tile_words(_LC("default", {"shader-int64"}), "float32")
    assert not linalg.tile_words(_LC("lane-loop", set()), "float32")
    assert not linalg.tile_words(_LC("lane-loop", {"shader-int64"}), "int32")
    monkeypatch.setenv("WEBNN_GPU_FORCE_TILE_WORDS", "vec4")
    assert not linalg.tile_words(_LC("lane-loop", {"shader-int64"}), "float32")
