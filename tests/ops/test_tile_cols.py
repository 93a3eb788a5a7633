"""The order of the subgroup variant's k step (``cols_first`` in ``matmul/tile.wgsl``;
``WEBNN_GPU_FORCE_TILE_COLS=first|rows``): one column block at a time, or every vector of B shared
before the rows. Each accumulator adds the same terms in the same order either way, so both
orders must give bit-identical outputs; the default order is also checked against float64 NumPy
(``check`` of test_tile.py: the f32 accumulation bound ``4 * K * 2**-24 * (|A| @ |B|)`` plus the
output's rounding). Cases: deep products with padded row tiles, ragged M and N, K = 1 and K not a
multiple of 4 (the reduction's tail), batches, float16, a residual epilogue, a strided implicit
GEMM; and where the order must not change the kernel: window convs sharing input columns
(``win``), products of 1 to 3 columns (``bdot``), adapters without the variant.
"""

from __future__ import annotations

import numpy as np
import pytest

import webnn_gpu as webnn
from webnn_gpu._lower import KernelStep
from webnn_gpu.ops import linalg

from references import conv2d_nhwc
from test_tile import check, data


@pytest.fixture(autouse=True)
def _tile_kernel(monkeypatch):
    """The tile kernel on few rows too (not ``matmul/matvec.wgsl``)."""
    monkeypatch.setenv("WEBNN_GPU_FORCE_MATMUL_MATVEC", "off")


def _run(ctx, monkeypatch, build, inputs: dict, order: str):
    """``build(builder, operands) -> MLOperand`` built and run with the k step's order forced;
    (output, the WGSL texts of its tile kernels)."""
    monkeypatch.setenv("WEBNN_GPU_FORCE_TILE_COLS", order)
    b = webnn.MLGraphBuilder(ctx)
    ops = {n: b.input(n, {"data_type": webnn._dtypes.from_numpy(a.dtype), "shape": list(a.shape)})
           for n, a in inputs.items()}
    graph = b.build({"y": build(b, ops)})
    texts = [s.wgsl for s in graph._steps if isinstance(s, KernelStep) and s.template == "matmul/tile.wgsl"]
    out = ctx.compute(graph, inputs)["y"]
    graph.destroy()
    assert texts, "the product runs on the tile kernel"
    return np.asarray(out), texts


def _orders(ctx, monkeypatch, build, inputs: dict, fires: bool = True):
    """Both orders: bit-identical outputs; different kernels exactly where the variant runs and
    ``fires``. Returns the default order's output."""
    monkeypatch.delenv("WEBNN_GPU_FORCE_TILE_COLS", raising=False)
    runs = {o: _run(ctx, monkeypatch, build, inputs, o) for o in ("first", "rows")}
    monkeypatch.delenv("WEBNN_GPU_FORCE_TILE_COLS")
    default = _run(ctx, monkeypatch, build, inputs, "")
    sg = all("subgroupBroadcast" in t for t in runs["rows"][1])
    assert (runs["first"][1] != runs["rows"][1]) == (fires and sg and ctx._subgroup > 0)
    assert default[1] in (runs["first"][1], runs["rows"][1])
    a, b = np.ascontiguousarray(runs["first"][0]), np.ascontiguousarray(runs["rows"][0])
    np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))
    return default[0]


def test_the_order_by_tile_and_the_switch(monkeypatch):
    """One column block at a time for tiles of 2 rows or more and at most COLS_FIRST_MAX_BLOCKS
    accumulators (the switch, read at lowering, forces either order for every tile)."""
    monkeypatch.delenv("WEBNN_GPU_FORCE_TILE_COLS", raising=False)
    most, on = linalg.COLS_FIRST_MAX_BLOCKS, linalg.TILE_COLS_FIRST
    assert linalg.cols_first(8, 11) == on and linalg.cols_first(7, 12) == on and linalg.cols_first(2, 1) == on
    assert not linalg.cols_first(8, 12) and not linalg.cols_first(1, 12) and not linalg.cols_first(1, 1)
    assert not linalg.cols_first(2, most // 2 + 1) and linalg.cols_first(2, most // 2) == on
    monkeypatch.setenv("WEBNN_GPU_FORCE_TILE_COLS", "first")
    assert linalg.cols_first(8, 12) and linalg.cols_first(2, 3)
    monkeypatch.setenv("WEBNN_GPU_FORCE_TILE_COLS", "rows")
    assert not linalg.cols_first(8, 12) and not linalg.cols_first(2, 3)
    monkeypatch.setenv("WEBNN_GPU_FORCE_TILE_COLS", "row")  # misspelt: an error, not the default
    with pytest.raises(ValueError, match="WEBNN_GPU_FORCE_TILE_COLS='row': expected one of first, rows"):
        linalg.cols_first(8, 12)


@pytest.mark.parametrize("sa, sb", [
    ((49, 1152), (1152, 192)),  # deep, padded rows (7 x 8 = 56), panels of B
    ((333, 36), (36, 50)),  # M, N ragged; B packed to 52 columns
    ((70, 1), (1, 12)),  # K = 1: only the tail rows of B
    ((37, 41), (41, 16)),  # K % 4 = 1, scalar A loads, one column tile
    ((3, 21, 64), (3, 64, 20)),  # batched
    ((4, 128), (128, 64)),  # below one subgroup of rows (one-row tiles)
], ids=["deep", "ragged", "k1", "ktail", "batched", "m4"])
def test_matmul_orders(ctx, rng, monkeypatch, sa, sb):
    a, b = data(rng, sa), data(rng, sb)
    out = _orders(ctx, monkeypatch, lambda bld, o: bld.matmul(o["a"], bld.constant(b)), {"a": a})
    A, B = a.astype(np.float64), b.astype(np.float64)
    check(out, np.matmul(A, B), np.matmul(np.abs(A), np.abs(B)), sa[-1], np.float32, f"{sa} x {sb}")


def test_float16_with_bias_and_relu(ctx, rng, monkeypatch):
    if "float16" not in ctx.supported_data_types:
        pytest.fail("float16 is not supported on this adapter")
    a, b, bias = data(rng, (45, 72), np.float16), data(rng, (72, 24), np.float16), data(rng, (24,), np.float16)
    out = _orders(ctx, monkeypatch, lambda bld, o: bld.relu(bld.add(bld.matmul(o["a"], bld.constant(b)),
                                                                     bld.constant(bias))), {"a": a})
    A, B = a.astype(np.float64), b.astype(np.float64)
    check(out, np.maximum(A @ B + bias, 0), np.abs(A) @ np.abs(B) + np.abs(bias.astype(np.float64)), 73,
          np.float16, "f16")


def residual_hard_swish(rng, H: int, W: int):
    """A 1x1 conv 24 -> 144 over an H x W NHWC image with a bias, a residual add and hard_swish:
    (inputs, build, check(out)) - the check against float64 NumPy (``check`` of test_tile.py)."""
    x, res = data(rng, (1, H, W, 24)), data(rng, (1, H, W, 144))
    w, bias = data(rng, (144, 1, 1, 24)), data(rng, (144,))

    def build(bld, o):
        y = bld.conv2d(o["x"], bld.constant(w), bias=bld.constant(bias), input_layout="nhwc", filter_layout="ohwi")
        return bld.hard_swish(bld.add(y, o["r"]))

    def verify(out):
        z = conv2d_nhwc(x, w, bias) + res
        X, Wt = np.abs(x.astype(np.float64)).reshape(-1, 24), np.abs(w.astype(np.float64)).reshape(144, 24)
        absref = (X @ Wt.T + np.abs(bias)).reshape(z.shape) + np.abs(res)
        check(out, z * np.clip(z + 3, 0, 6) / 6, absref * (np.abs(z) / 3 + 2), 26, np.float32, "residual hard_swish")
    return {"x": x, "r": res}, build, verify


def test_pointwise_conv_with_residual_and_hard_swish(ctx, rng, monkeypatch):
    inputs, build, verify = residual_hard_swish(rng, 13, 11)
    verify(_orders(ctx, monkeypatch, build, inputs))


@pytest.mark.parametrize("shape, filt, stride, pad, fires", [
    ((1, 17, 15, 8), (24, 3, 3, 8), 2, 1, True),  # implicit GEMM, strided, padded: rows gathered one by one
    ((1, 8, 8, 16), (16, 3, 3, 16), 1, 1, False),  # shared input columns (win): the order stays
], ids=["s2p1", "win"])
def test_implicit_gemm(ctx, rng, monkeypatch, shape, filt, stride, pad, fires):
    monkeypatch.setenv("WEBNN_GPU_FORCE_CONV", "gemm")
    x, w, bias = data(rng, shape), data(rng, filt), data(rng, (filt[0],))

    def build(bld, o):
        y = bld.conv2d(o["x"], bld.constant(w), bias=bld.constant(bias), strides=[stride] * 2, padding=[pad] * 4,
                       input_layout="nhwc", filter_layout="ohwi")
        return bld.relu(y)

    monkeypatch.setenv("WEBNN_GPU_FORCE_TILE_COLS", "first")
    b = webnn.MLGraphBuilder(ctx)
    g = b.build({"y": build(b, {"x": b.input("x", {"data_type": "float32", "shape": list(shape)})})})
    notes = [s.note for s in g._steps if isinstance(s, KernelStep) and s.template == "matmul/tile.wgsl"]
    g.destroy()
    assert all((" win" in n) != fires for n in notes) or not ctx._subgroup, notes
    out = _orders(ctx, monkeypatch, build, {"x": x}, fires=fires)
    ref = conv2d_nhwc(x, w, bias, pad=pad, stride=stride)
    absref = conv2d_nhwc(np.abs(x), np.abs(w), np.abs(bias), pad=pad, stride=stride)
    check(out, np.maximum(ref, 0), absref, filt[1] * filt[2] * filt[3] + 1, np.float32, "conv")


def test_few_columns_keep_their_dot_products(ctx, rng, monkeypatch):
    """1 to 3 columns of a constant B are dot products (``bdot``): no column blocks to order."""
    a, b = data(rng, (300, 64)), data(rng, (64, 2))
    out = _orders(ctx, monkeypatch, lambda bld, o: bld.matmul(o["a"], bld.constant(b)), {"a": a}, fires=False)
    A, B = a.astype(np.float64), b.astype(np.float64)
    check(out, A @ B, np.abs(A) @ np.abs(B), 64, np.float32, "bdot")


def test_plain_kernel_unchanged(ctx, rng, monkeypatch):
    monkeypatch.setenv("WEBNN_GPU_FORCE_MATMUL_SG", "off")
    a, b = data(rng, (96, 40)), data(rng, (40, 48))
    out = _orders(ctx, monkeypatch, lambda bld, o: bld.matmul(o["a"], bld.constant(b)), {"a": a}, fires=False)
    A, B = a.astype(np.float64), b.astype(np.float64)
    check(out, A @ B, np.abs(A) @ np.abs(B), 40, np.float32, "plain")
