"""The tile kernel's tile choice, its looped epilogue and the matmul transpose fold, against
float64 NumPy at their boundaries (odd M, K not a multiple of 4, N smaller than a tile,
batches, float16, with and without an epilogue).

Tolerance: the float64 result of the same inputs, within the f32 accumulation bound
``4 * K * 2**-24 * (|A| @ |B|)`` plus the output's rounding (an f16 ulp for float16) and, for
an epilogue, the f32 rounding of its steps (``check`` of test_linalg.py, same bound).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import webnn_gpu as webnn
from webnn_gpu.compiler.rules.linalg import fold_matmul_transpose
from webnn_gpu._lower import KernelStep
from webnn_gpu.builder import Node, Value
from webnn_gpu.ops import linalg


def check(got, ref, absref, k, dtype, what=""):
    """Elementwise bound: f32 accumulation error plus the output's rounding."""
    got = np.asarray(got).astype(np.float64)
    bound = 4 * max(k, 1) * 2.0**-24 * absref + 1e-30
    bound = bound + (2.0**-11 * np.abs(ref) + 2.0**-24 if np.dtype(dtype) == np.float16 else 2.0**-23 * np.abs(ref))
    err = np.abs(got - ref)
    assert got.shape == ref.shape, (got.shape, ref.shape)
    bad = ~(err <= bound)
    assert not bad.any(), (f"{what}: {bad.sum()} of {bad.size} elements off; worst err {err[bad].max():.3e} "
                           f"vs bound {bound[bad][np.argmax(err[bad])]:.3e}")


def data(rng, shape, dtype=np.float32):
    return rng.uniform(-2, 2, shape).astype(dtype)


def build_run(ctx, build, inputs: dict):
    """Build ``build(builder, operands) -> MLOperand``, run it; (output, the graph's kernel steps)."""
    b = webnn.MLGraphBuilder(ctx)
    ops = {n: b.input(n, {"data_type": webnn._dtypes.from_numpy(a.dtype), "shape": list(a.shape)})
           for n, a in inputs.items()}
    graph = b.build({"y": build(b, ops)})
    steps = [s for s in graph._steps if isinstance(s, KernelStep)]
    out = ctx.compute(graph, inputs)["y"]
    graph.destroy()
    return out, steps


def tile_steps(steps):
    return [s for s in steps if s.template == "matmul/tile.wgsl"]


def looped(step) -> bool:
    return "for (var ri = 0u;" in step.wgsl


# ---------------------------------------------------------------- tile choice (no GPU)
def test_deep_products_take_wider_tiles_on_lane_loop():
    assert linalg.choose_tile(1024, 1024, 1, "lane-loop", K=1024) == (16, 8)
    assert linalg.choose_tile(1024, 1024, 1, "lane-loop", K=linalg.DEEP_K - 1) == (16, 4)
    assert linalg.choose_tile(333, 160, 1, "lane-loop", K=516) == (16, 8)
    # the profile without a deep tile is unchanged by K
    assert linalg.choose_tile(1024, 1024, 1, "default", K=1024) == linalg.choose_tile(1024, 1024, 1, "default")
    # a deep product too small for a workgroup of 16 x 32 tiles takes a smaller tile, as before
    assert not linalg.deep_ok("float16", True, True) and not linalg.deep_ok("float32", False, True)
    tm, tn4 = linalg.choose_tile(49, 192, 1, "lane-loop", K=1152)
    assert -(-49 // tm) * (48 // tn4) >= linalg.MIN_INVOCATIONS and tm * tn4 <= 16 * 6


# ---------------------------------------------------------------- the deep tile on the GPU
def test_deep_tile_with_ragged_edges(ctx, rng, monkeypatch):
    """333 x 516 x 160: 16 x 32 tiles on lane-loop (float32, vec4 loads), the last row tile 13 rows
    (the plain kernel: its subgroup variant is test_tile_subgroup.py's)."""
    monkeypatch.setenv("WEBNN_GPU_FORCE_MATMUL_SG", "off")
    dtype = np.float32
    a, b = data(rng, (333, 516), dtype), data(rng, (516, 160), dtype)
    out, steps = build_run(ctx, lambda bld, o: bld.matmul(o["a"], o["b"]), {"a": a, "b": b})
    (step,) = tile_steps(steps)
    if ctx._tuning == "lane-loop":
        assert "c15_7" in step.wgsl, "a 16 x 32 tile"
    A, B = a.astype(np.float64), b.astype(np.float64)
    check(out, A @ B, np.abs(A) @ np.abs(B), 516, dtype, f"deep {dtype.__name__}")


# ---------------------------------------------------------------- the looped epilogue
RESIDUAL_CASES = [
    ((37, 41), (41, 23), (37, 23)),  # N not a multiple of 4: scalar stores in the loop; M ragged
    ((2, 70, 16), (16, 36), (1, 70, 36)),  # batched, the residual broadcast over the batch
    ((3, 45, 64), (3, 64, 8), (3, 45, 8)),  # narrow N, one column tile
]


@pytest.mark.parametrize("sa, sb, sr", RESIDUAL_CASES, ids=["ragged", "batched", "narrow"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_residual_add_epilogue_runs_in_a_loop(ctx, rng, sa, sb, sr, dtype):
    if dtype == np.float16 and "float16" not in ctx.supported_data_types:
        pytest.fail("float16 is not supported on this adapter")
    a, b, r = data(rng, sa, dtype), data(rng, sb, dtype), data(rng, sr, dtype)
    out, steps = build_run(ctx, lambda bld, o: bld.relu(bld.add(bld.matmul(o["a"], o["b"]), o["r"])),
                           {"a": a, "b": b, "r": r})
    (step,) = tile_steps(steps)
    assert looped(step), "a residual add must be applied in the row loop"
    assert len(steps) == 1, "the add and relu are the matmul's epilogue"
    # a same-shaped residual is read by the kernel itself (vec4 with vec4 stores, N % 4 == 0),
    # a broadcast one by the epilogue
    same = tuple(sr) == out.shape
    assert ("gres[" in step.wgsl) == same and bool(re.search(r"gres\[o / [48]u\]", step.wgsl)) == (same and sr[-1] % 4 == 0)
    A, B, R = (x.astype(np.float64) for x in (a, b, r))
    prod = np.matmul(A, B)
    k = sa[-1]
    # the epilogue adds one rounding of the f32 sum (the residual is exact)
    check(out, np.maximum(prod + R, 0), np.matmul(np.abs(A), np.abs(B)) + np.abs(R), k + 1, dtype, "residual")


def test_pointwise_conv_with_residual_and_hard_swish(ctx, rng):
    """The parameter-buffer (dyn) path with a looped epilogue: 1x1 conv, bias, add, hard_swish."""
    x, res = data(rng, (1, 9, 7, 20)), data(rng, (1, 9, 7, 24))
    w, bias = data(rng, (24, 1, 1, 20)), data(rng, (24,))

    def build(bld, o):
        y = bld.conv2d(o["x"], bld.constant(w), bias=bld.constant(bias), input_layout="nhwc", filter_layout="ohwi")
        return bld.hard_swish(bld.add(y, o["r"]))

    out, steps = build_run(ctx, build, {"x": x, "r": res})
    (step,) = tile_steps(steps)
    assert looped(step) and "prm" in step.wgsl and re.search(r"gres\[o / [48]u\]", step.wgsl)
    X, W = x.astype(np.float64).reshape(63, 20), w.astype(np.float64).reshape(24, 20)
    z = (X @ W.T + bias).reshape(1, 9, 7, 24) + res
    ref = z * np.clip(z + 3, 0, 6) / 6
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


def test_residual_read_by_the_epilogue_when_forced_scalar(ctx, rng, monkeypatch):
    """WEBNN_GPU_FORCE_MATMUL_RESIDUAL=scalar: the epilogue loads the residual itself (looped)."""
    monkeypatch.setenv("WEBNN_GPU_FORCE_MATMUL_RESIDUAL", "scalar")
    a, b, r = data(rng, (70, 16)), data(rng, (16, 36)), data(rng, (70, 36))
    out, steps = build_run(ctx, lambda bld, o: bld.add(bld.matmul(o["a"], o["b"]), o["r"]), {"a": a, "b": b, "r": r})
    (step,) = tile_steps(steps)
    assert looped(step) and "gres" not in step.wgsl
    A, B = a.astype(np.float64), b.astype(np.float64)
    check(out, A @ B + r, np.abs(A) @ np.abs(B) + np.abs(r), 17, np.float32, "scalar residual")


@pytest.mark.parametrize("row_loop", [True, False])
def test_per_channel_epilogue_in_the_row_loop(ctx, rng, monkeypatch, row_loop):
    """A bias and clamp read operands only per channel: stored in the row loop
    (``linalg.TILE_EP_LOOP``), or at each unrolled store without it; the same values."""
    from webnn_gpu.ops import linalg

    monkeypatch.setattr(linalg, "TILE_EP_LOOP", row_loop)
    monkeypatch.setenv("WEBNN_GPU_FORCE_TILE_ROWS_OUT", "off")  # this small tile would write its rows out
    a, b = data(rng, (37, 41)), data(rng, (41, 24))
    bias = data(rng, (24,))
    out, steps = build_run(ctx, lambda bld, o: bld.clamp(bld.add(bld.matmul(o["a"], o["b"]), bld.constant(bias)),
                                                         min_value=-1.0, max_value=4.0), {"a": a, "b": b})
    (step,) = tile_steps(steps)
    assert looped(step) == row_loop
    A, B = a.astype(np.float64), b.astype(np.float64)
    check(out, np.clip(A @ B + bias, -1, 4), np.abs(A) @ np.abs(B) + np.abs(bias), 42, np.float32, "bias clamp")


def test_row_loop_stores_the_same_values(ctx, rng, monkeypatch):
    """A pointwise conv with bias and relu6 (the zoo's commonest tile: sizes in the parameter
    buffer, 8+ rows per invocation) gives bit-identical outputs with and without the row loop."""
    from webnn_gpu.ops import linalg

    x = data(rng, (1, 12, 10, 36))
    w, bias = data(rng, (40, 1, 1, 36)), data(rng, (40,))

    def build(bld, o):
        y = bld.conv2d(o["x"], bld.constant(w), bias=bld.constant(bias), input_layout="nhwc", filter_layout="ohwi")
        return bld.clamp(y, min_value=0.0, max_value=6.0)

    outs = {}
    for row_loop in (False, True):
        monkeypatch.setattr(linalg, "TILE_EP_LOOP", row_loop)
        outs[row_loop], steps = build_run(ctx, build, {"x": x})
        (step,) = tile_steps(steps)
        assert looped(step) == row_loop and "prm" in step.wgsl
    assert np.array_equal(outs[True], outs[False])
    X, W = x.astype(np.float64).reshape(120, 36), w.astype(np.float64).reshape(40, 36)
    np.testing.assert_allclose(outs[True], np.clip(X @ W.T + bias, 0, 6).reshape(1, 12, 10, 40), rtol=1e-5, atol=1e-5)


def _tile_units(step) -> tuple[int, bool]:
    """(TM x TN4, doubled without the vector epilogue helper; whether sizes come from ``prm``)
    of a tile step, from its note ("37x41->24 5x12 sg") and text."""
    TM, cols = map(int, re.search(r" (\d+)x(\d+)", step.note.split("->", 1)[1]).groups())
    return TM * (cols // 4) * (1 if "_v4(" in step.wgsl else 2), "prm" in step.wgsl


@pytest.mark.parametrize("sa, sb, residual", [
    ((37, 41), (41, 24), False),    # 5 x 12: written out
    ((96, 20), (20, 8), False),     # a two-column-block tile
    ((37, 41), (41, 24), True),     # near miss: a residual add (given) keeps its loop
    ((130, 64), (64, 96), False),   # near miss: wide tiles (sizes in the parameter buffer) keep it
    ((200, 33), (33, 40), False),   # odd K: static sizes, scalar tail
], ids=["small", "two-blocks", "residual", "wide", "odd-k"])
def test_small_tiles_write_their_rows_out(ctx, rng, monkeypatch, sa, sb, residual):
    """Tiles that NIR would unroll its row loop of write the rows out (``linalg.rows_written_out``):
    the same values bit for bit as the loop (``WEBNN_GPU_FORCE_TILE_ROWS_OUT=off``), within the
    float32 bound of the float64 product; epilogues with a given operand and larger tiles loop."""
    a, b = data(rng, sa), data(rng, sb)
    bias = data(rng, (sb[1],))
    res = data(rng, (sa[0], sb[1]))
    inputs = {"a": a, "b": b} | ({"r": res} if residual else {})

    def build(bld, o):
        y = bld.add(bld.matmul(o["a"], o["b"]), bld.constant(bias))
        y = bld.add(y, o["r"]) if residual else y
        return bld.clamp(y, min_value=-1.0, max_value=4.0)

    outs = {}
    for form in ("off", ""):
        monkeypatch.setenv("WEBNN_GPU_FORCE_TILE_ROWS_OUT", form)
        outs[form], steps = build_run(ctx, build, inputs)
        (step,) = tile_steps(steps)
        units, dyn = _tile_units(step)
        TM = int(re.search(r" (\d+)x", step.note.split("->", 1)[1]).group(1))
        small = units <= (linalg.TILE_ROWS_OUT_UNITS_DYN if dyn else linalg.TILE_ROWS_OUT_UNITS)
        if form == "off" or TM == 1:
            assert looped(step) == (TM > 1), step.note
        else:
            assert looped(step) == (residual or not small), (step.note, units, dyn)
    if sa == (37, 41) and not residual:
        assert not looped(step)  # the case the rule is for: it fires
    assert np.array_equal(outs["off"], outs[""])
    A, B = a.astype(np.float64), b.astype(np.float64)
    ref = A @ B + bias + (res if residual else 0)
    check(outs[""], np.clip(ref, -1, 4), np.abs(A) @ np.abs(B) + np.abs(bias) + (np.abs(res) if residual else 0), sa[1],
          np.float32, "rows written out")


def test_rows_written_out_limits():
    """The cost model alone (no GPU): units TM x TN4 (x2 with four per-value epilogue calls)
    against the static and dynamic limits; given operands and sibling splits never."""
    from webnn_gpu.ops import _epilogue

    ep = _epilogue.Epilogue()
    assert linalg.rows_written_out(8, 4, ep, True, False, None)          # 32 units
    assert linalg.rows_written_out(6, 6, ep, True, False, None)          # 36
    assert not linalg.rows_written_out(8, 6, ep, True, False, None)      # 48
    assert linalg.rows_written_out(8, 2, ep, False, False, None)         # 32 with scalar calls
    assert not linalg.rows_written_out(8, 4, ep, False, False, None)     # 64
    assert linalg.rows_written_out(2, 4, ep, False, True, None)          # 16, dyn
    assert not linalg.rows_written_out(5, 7, ep, True, True, None)       # 35, dyn
    assert not linalg.rows_written_out(2, 2, ep, True, False, [("out1", 0, 4)])
    given = _epilogue.Epilogue(given=True, empty=False)
    assert not linalg.rows_written_out(2, 2, given, True, False, None)


# ---------------------------------------------------------------- transposes
def _tr(x, r):
    return list(range(r - 2)) + [r - 1, r - 2]


@pytest.mark.parametrize("sa, sb", [((41, 37), (41, 23)), ((3, 64, 70), (3, 64, 36)), ((2, 1, 9, 17), (3, 9, 12))],
                         ids=["2d", "batched", "rank4-broadcast"])
def test_matmul_of_a_transposed_a_reads_it_in_place(ctx, rng, sa, sb):
    a, b = data(rng, sa), data(rng, sb)
    out, steps = build_run(ctx, lambda bld, o: bld.matmul(bld.transpose(o["a"], permutation=_tr(None, len(sa))), o["b"]),
                           {"a": a, "b": b})
    assert [s.template for s in steps] == ["matmul/tile.wgsl"] or [s.template for s in steps] == ["matmul/small.wgsl"]
    A = np.swapaxes(a.astype(np.float64), -1, -2)
    B = b.astype(np.float64)
    check(out, np.matmul(A, B), np.matmul(np.abs(A), np.abs(B)), sa[-2], np.float32, "a transposed")


def test_transposed_b_and_other_permutations_keep_their_transpose(ctx, rng, monkeypatch):
    """Past fold_matmul_views' size limit (tests/ops/test_matmul_views.py: small products read
    them in place) a transposed B and other permutations of A are transpose kernels."""
    from webnn_gpu.compiler.rules import views

    monkeypatch.setattr(views, "VIEW_MAX_MACS", 0)
    a, b = data(rng, (3, 20, 12)), data(rng, (3, 16, 12))
    out, steps = build_run(ctx, lambda bld, o: bld.matmul(o["a"], bld.transpose(o["b"], permutation=[0, 2, 1])),
                           {"a": a, "b": b})
    assert [s.template for s in steps][0] == "layout/remap.wgsl"
    A, B = a.astype(np.float64), np.swapaxes(b.astype(np.float64), -1, -2)
    check(out, np.matmul(A, B), np.matmul(np.abs(A), np.abs(B)), 12, np.float32, "b transposed")
    # a permutation of the batch dimensions with the matrix ones is not a matrix transpose
    a2 = data(rng, (12, 3, 20))
    out, steps = build_run(ctx, lambda bld, o: bld.matmul(bld.transpose(o["a"], permutation=[1, 2, 0]), o["b"]),
                           {"a": a2, "b": data(rng, (3, 12, 5))})
    assert "layout/remap.wgsl" in [s.template for s in steps]


def test_fold_matmul_transpose_rule():
    """The rule on hand-made IR: fires for a lone reader, not for a shared transpose or an output."""
    def v(shape, kind="op"):
        return Value("float32", tuple(shape), kind)

    x, b = v((2, 8, 5), "input"), v((2, 8, 6), "input")
    t, y = v((2, 5, 8)), v((2, 5, 6))
    tr = Node("transpose", [x], [t], {"permutation": [0, 2, 1], "alias": False})
    mm = Node("matmul", [t, b], [y], {})
    t.producer, y.producer = tr, mm
    res = fold_matmul_transpose([tr, mm], {"y": y})
    assert [n.op for n in res] == ["matmul"] and res[0].inputs[0] is x and res[0].attrs["a_transpose"]
    assert mm.inputs[0] is t and "a_transpose" not in mm.attrs, "the rule must not change its input"
    # the transpose is also an output, or read by another node: nothing changes
    assert fold_matmul_transpose([tr, mm], {"y": y, "t": t}) == [tr, mm]
    relu = Node("relu", [t], [v((2, 5, 8))], {})
    assert fold_matmul_transpose([tr, mm, relu], {"y": y}) == [tr, mm, relu]
    # a transpose of b is not folded
    tb, y2 = v((2, 5, 8)), v((2, 8, 8))
    trb = Node("transpose", [x], [tb], {"permutation": [0, 2, 1], "alias": False})
    mm2 = Node("matmul", [b.__class__("float32", (2, 8, 5), "input"), tb], [y2], {})
    assert fold_matmul_transpose([trb, mm2], {"y": y2}) == [trb, mm2]


@pytest.mark.parametrize("at, bt", [(True, False), (False, True), (True, True)])
def test_gemm_transposes_of_inputs_on_the_tile_kernel(ctx, rng, at, bt):
    """gemm's a_transpose / b_transpose on non-constant operands: strided reads, no transpose kernel."""
    M, K, N = 45, 37, 30
    a = data(rng, (K, M) if at else (M, K))
    b = data(rng, (N, K) if bt else (K, N))
    c = data(rng, (N,))
    out, steps = build_run(ctx, lambda bld, o: bld.gemm(o["a"], o["b"], c=o["c"], alpha=0.5, beta=2.0,
                                                        a_transpose=at, b_transpose=bt), {"a": a, "b": b, "c": c})
    assert [s.template for s in steps] == ["matmul/tile.wgsl"]
    A = a.astype(np.float64).T if at else a.astype(np.float64)
    B = b.astype(np.float64).T if bt else b.astype(np.float64)
    check(out, 0.5 * (A @ B) + 2.0 * c, 0.5 * (np.abs(A) @ np.abs(B)) + 2.0 * np.abs(c), K + 2, np.float32, "gemm")
