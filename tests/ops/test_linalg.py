"""matmul and gemm against NumPy float64 references, every kernel variant, validation errors,
and the fused-epilogue hook.

Tolerance: the float64 product of the (exactly representable) inputs, within the f32
accumulation bound ``4 * K * 2**-24 * (|A| @ |B|)`` plus, for float16 outputs, half an f16 ulp
of the result (``2**-11 * |ref|``) and the f16 rounding of an epilogue operand.
"""

from __future__ import annotations

import numpy as np
import pytest

import webnn_gpu as webnn
from helpers import run_graph
from webnn_gpu.errors import MLTypeError, OperationError
from webnn_gpu.ops import _epilogue

MATMUL_VARIANTS = ["", "naive", "tile", "tile_scalar", "small"]


def check(got, ref, absref, k, dtype, what=""):
    """Elementwise bound: f32 accumulation error plus the output's rounding."""
    got = np.asarray(got).astype(np.float64)
    bound = 4 * max(k, 1) * 2.0**-24 * absref + 1e-30
    if np.dtype(dtype) == np.float16:
        bound = bound + 2.0**-11 * np.abs(ref) + 2.0**-24
    else:
        bound = bound + 2.0**-24 * np.abs(ref)
    err = np.abs(got - ref)
    assert got.shape == ref.shape, (got.shape, ref.shape)
    bad = ~(err <= bound)
    assert not bad.any(), (f"{what}: {bad.sum()} of {bad.size} elements off; worst err {err[bad].max():.3e} "
                           f"vs bound {bound[bad][np.argmax(err[bad])]:.3e}")


def data(rng, shape, dtype):
    return rng.uniform(-2, 2, shape).astype(dtype)


@pytest.fixture
def force(monkeypatch):
    def set_(algo, variant):
        if variant:
            monkeypatch.setenv(f"WEBNN_GPU_FORCE_{algo.upper()}", variant)
        else:
            monkeypatch.delenv(f"WEBNN_GPU_FORCE_{algo.upper()}", raising=False)
    return set_


MATMUL_SHAPES = [
    ((3, 4), (4, 5)),  # WPT-sized
    ((2, 3, 4), (1, 4, 1)),  # batch broadcast, N = 1
    ((37, 41), (41, 23)),  # nothing a multiple of 4 or 8
    ((64, 32), (32, 48)),  # aligned: vec4 loads and stores
    ((2, 1, 17, 8), (3, 8, 12)),  # rank 4 x rank 3 broadcast
    ((1, 100), (100, 36)),  # M = 1
    ((130, 20), (20, 9)),  # tile edges in M, padded N
    ((3, 5, 70), (3, 70, 6)),  # one batch dimension, small product (matmul/small.wgsl)
]


@pytest.mark.parametrize("variant", MATMUL_VARIANTS)
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_matmul(ctx, rng, force, variant, dtype):
    force("matmul", variant)
    for sa, sb in MATMUL_SHAPES:
        a, b = data(rng, sa, dtype), data(rng, sb, dtype)
        out = run_graph(ctx, lambda bld, o: {"y": bld.matmul(o["a"], o["b"])}, {"a": a, "b": b},
                        tensor_path=sa == (37, 41))["y"]
        ref = np.matmul(a.astype(np.float64), b.astype(np.float64))
        absref = np.matmul(np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64)))
        assert out.dtype == dtype
        check(out, ref, absref, sa[-1], dtype, f"matmul {sa} x {sb} [{variant or 'auto'}]")


@pytest.mark.parametrize("variant", ["", "tile_scalar"])
def test_matmul_constant_b(ctx, rng, force, variant):
    """A constant 2-D b is packed (columns padded to a multiple of 4) for vec4 loads."""
    force("matmul", variant)
    for sa, sb in [((33, 16), (16, 10)), ((5, 2, 12), (12, 7)), ((40, 8), (8, 32))]:
        a, b = data(rng, sa, np.float32), data(rng, sb, np.float32)
        out = run_graph(ctx, lambda bld, o: {"y": bld.matmul(o["a"], bld.constant(b))}, {"a": a},
                        tensor_path=False)["y"]
        ref = np.matmul(a.astype(np.float64), b)
        check(out, ref, np.matmul(np.abs(a), np.abs(b)).astype(np.float64), sa[-1], np.float32)


def test_matmul_large_dispatch(ctx, rng, force):
    """More than 65,535 workgroups in one dimension (folded into 2-D): 16.8M outputs."""
    force("matmul", "naive")
    a, b = data(rng, (4096, 1), np.float32), data(rng, (1, 4097), np.float32)
    out = run_graph(ctx, lambda bld, o: {"y": bld.matmul(o["a"], o["b"])}, {"a": a, "b": b}, tensor_path=False)["y"]
    np.testing.assert_array_equal(out, a * b)  # K = 1: one f32 product, exactly rounded


GEMM_CASES = [
    dict(),
    dict(c_shape=(7, 9)),
    dict(c_shape=(9,), beta=-0.5),
    dict(c_shape=(1, 9), alpha=2.5),
    dict(c_shape=(7, 1), a_transpose=True),
    dict(c_shape=(), b_transpose=True, alpha=-1.5, beta=3.0),
    dict(c_shape=(1,), a_transpose=True, b_transpose=True),
    dict(c_shape=(7, 9), a_transpose=True, b_transpose=True, alpha=0.25, beta=0.0),
]


@pytest.mark.parametrize("variant", ["", "naive", "tile_scalar"])
@pytest.mark.parametrize("const", [False, True], ids=["inputs", "constants"])
@pytest.mark.parametrize("case", GEMM_CASES, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()) or "default")
def test_gemm(ctx, rng, force, variant, const, case):
    force("matmul", variant)
    M, K, N = 7, 13, 9
    at, bt = case.get("a_transpose", False), case.get("b_transpose", False)
    a = data(rng, (K, M) if at else (M, K), np.float32)
    b = data(rng, (N, K) if bt else (K, N), np.float32)
    c = data(rng, case["c_shape"], np.float32) if "c_shape" in case else None
    opts = {k: v for k, v in case.items() if k != "c_shape"}

    def build(bld, o):
        ao = bld.constant(a) if const else o["a"]
        bo = bld.constant(b) if const else o["b"]
        co = None if c is None else (bld.constant(c) if const else o["c"])
        return {"y": bld.gemm(ao, bo, c=co, **opts)}

    if const:  # every operand constant: add a zero input so the graph has one
        out = run_graph(ctx, lambda bld, o: {"y": bld.add(build(bld, o)["y"], o["x"])},
                        {"x": np.zeros((1, 1), np.float32)}, tensor_path=False)["y"]
    else:
        inputs = {"a": a, "b": b, **({"c": c} if c is not None else {})}
        out = run_graph(ctx, build, inputs, tensor_path=False)["y"]
    A = (a.T if at else a).astype(np.float64)
    B = (b.T if bt else b).astype(np.float64)
    alpha, beta = case.get("alpha", 1.0), case.get("beta", 1.0)
    ref = alpha * (A @ B)
    absref = abs(alpha) * (np.abs(A) @ np.abs(B))
    if c is not None:
        ref = ref + beta * c.astype(np.float64)
        absref = absref + abs(beta) * np.abs(c.astype(np.float64))
    check(out, ref, absref + np.abs(ref), K, np.float32, f"gemm {case}")


def test_gemm_float16(ctx, rng):
    a, b, c = data(rng, (20, 33), np.float16), data(rng, (12, 33), np.float16), data(rng, (12,), np.float16)
    out = run_graph(ctx, lambda bld, o: {"y": bld.gemm(o["a"], o["b"], c=o["c"], b_transpose=True, alpha=0.5)},
                    {"a": a, "b": b, "c": c})["y"]
    A, B, C = a.astype(np.float64), b.astype(np.float64).T, c.astype(np.float64)
    ref = 0.5 * A @ B + C
    check(out, ref, 0.5 * np.abs(A) @ np.abs(B) + np.abs(C), 33, np.float16, "gemm f16")


# ---------------------------------------------------------------- fused epilogue
def _fused(bld, y, steps, operands=()):
    """Set an epilogue on the node producing ``y`` by hand (what the fusion pass will do)."""
    _epilogue.attach(y._value.producer, steps, [o._value for o in operands])
    return y


@pytest.mark.parametrize("variant", ["naive", "tile", "tile_scalar", "small"])
def test_matmul_epilogue(ctx, rng, force, variant):
    force("matmul", variant)
    a, b = data(rng, (2, 9, 12), np.float32), data(rng, (12, 20), np.float32)
    res = data(rng, (2, 9, 20), np.float32)
    bias = data(rng, (20,), np.float32)
    row = data(rng, (9, 1), np.float32)
    steps = [{"op": "add", "operand": 1, "axis": 2}, {"op": "hard_swish"}, {"op": "add", "operand": 0},
             {"op": "sub", "operand": 2, "reverse": True}, {"op": "clamp", "min_value": -1.0, "max_value": 1.5},
             {"op": "linear", "alpha": 2.0, "beta": 0.5}]
    out = run_graph(ctx, lambda bld, o: {"y": _fused(bld, bld.matmul(o["a"], o["b"]), steps,
                                                      [o["res"], o["bias"], o["row"]])},
                    {"a": a, "b": b, "res": res, "bias": bias, "row": row})["y"]
    x = a.astype(np.float64) @ b.astype(np.float64) + bias
    x = x * np.clip(x + 3, 0, 6) / 6 + res
    x = np.clip(row - x, -1.0, 1.5) * 2.0 + 0.5
    np.testing.assert_allclose(out, x, rtol=1e-5, atol=1e-5)


def test_gemm_epilogue_after_c(ctx, rng):
    """gemm's alpha and beta * c come before the node's own steps."""
    a, b, c = data(rng, (9, 16), np.float32), data(rng, (16, 12), np.float32), data(rng, (12,), np.float32)
    out = run_graph(ctx, lambda bld, o: {"y": _fused(bld, bld.gemm(o["a"], o["b"], c=o["c"], alpha=2.0, beta=-1.0),
                                                      [{"op": "relu"}, {"op": "sigmoid"}])},
                    {"a": a, "b": b, "c": c})["y"]
    ref = 1 / (1 + np.exp(-np.maximum(2.0 * (a.astype(np.float64) @ b) - c, 0)))
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)


def test_epilogue_errors(ctx):
    bld = webnn.MLGraphBuilder(ctx)
    x = bld.input("x", {"data_type": "float32", "shape": [2, 2]})
    y = bld.matmul(x, x)
    y._value.producer.attrs["epilogue"] = [{"op": "frobnicate"}]
    with pytest.raises(OperationError, match="frobnicate"):
        bld.build({"y": y})


# ---------------------------------------------------------------- validation
def _builder(ctx, **shapes):
    bld = webnn.MLGraphBuilder(ctx)
    ops = {}
    for name, spec in shapes.items():
        dt, shape = spec if isinstance(spec, tuple) and isinstance(spec[0], str) else ("float32", spec)
        ops[name] = bld.input(name, {"data_type": dt, "shape": list(shape)})
    return bld, ops


@pytest.mark.parametrize("a, b, match", [
    ([2], [2, 2], "'a': expected an operand of rank >= 2"),
    ([2, 2], [2], "'b': expected an operand of rank >= 2"),
    ([], [2, 2], "rank >= 2"),
    ([3, 4], [5, 6], "'b': expected shape\\[-2\\] equal to a.shape\\[-1\\] \\(4\\)"),
    ([2, 3, 4], [3, 4, 5], "expected broadcastable shapes"),
    ([3, 2, 3, 4], [2, 2, 4, 5], "expected broadcastable shapes"),
    (("int32", [2, 2]), ("int32", [2, 2]), "float32 or float16, got 'int32'"),
    ([2, 2], ("float16", [2, 2]), "'b': expected the data type of 'a' \\(float32\\), got 'float16'"),
])
def test_matmul_validation(ctx, a, b, match):
    bld, o = _builder(ctx, a=a, b=b)
    with pytest.raises(MLTypeError, match=match):
        bld.matmul(o["a"], o["b"], label="mm1")
    # the builder stays usable
    assert bld.matmul(bld.input("p", {"data_type": "float32", "shape": [2, 3]}),
                      bld.input("q", {"data_type": "float32", "shape": [3, 4]})).shape == (2, 4)


def test_matmul_label_and_foreign_operand(ctx):
    bld, o = _builder(ctx, a=[2, 2])
    other, oo = _builder(ctx, b=[2, 2])
    with pytest.raises(MLTypeError,
                       match=r"matmul \['mm'\]: argument 'b': expected an MLOperand of this MLGraphBuilder"):
        bld.matmul(o["a"], oo["b"], label="mm")
    with pytest.raises(MLTypeError, match="unknown option"):
        bld.matmul(o["a"], o["a"], transpose=True)
    assert bld.matmul(o["a"], o["a"]).shape == (2, 2)


@pytest.mark.parametrize("kw, match", [
    (dict(a=[2, 3, 4]), "'a': expected a 2-D operand"),
    (dict(b=[4]), "'b': expected a 2-D operand"),
    (dict(b=[5, 6]), "'b': expected shape\\[0\\] equal to the inner dimension of a \\(4\\)"),
    (dict(b=[6, 5], b_transpose=True), "'b': expected shape\\[1\\] equal to the inner dimension of a \\(4\\)"),
    (dict(c=[2, 6]), "'c': expected a shape broadcastable to \\[3, 6\\]"),
    (dict(c=[1, 3, 6]), "'c': expected a shape broadcastable to \\[3, 6\\]"),
    (dict(c=("float16", [6])), "'c': expected the data type of 'a'"),
    (dict(alpha="2"), "'alpha': expected a number"),
    (dict(beta=None), "'beta': expected a number"),
    (dict(a_transpose=1), "'a_transpose': expected a bool"),
    (dict(a=("uint32", [3, 4]), b=("uint32", [4, 6])), "float32 or float16"),
])
def test_gemm_validation(ctx, kw, match):
    shapes = {"a": kw.pop("a", [3, 4]), "b": kw.pop("b", [4, 6])}
    if "c" in kw:
        shapes["c"] = kw.pop("c")
    bld, o = _builder(ctx, **shapes)
    with pytest.raises(MLTypeError, match=match):
        bld.gemm(o["a"], o["b"], c=o.get("c"), label="g1", **kw)
    p = bld.input("p", {"data_type": "float32", "shape": [3, 4]})
    assert bld.gemm(p, bld.input("q", {"data_type": "float32", "shape": [4, 2]})).shape == (3, 2)


def test_support_limits(ctx):
    lim = ctx.op_support_limits()
    assert lim["matmul"]["a"]["rank_range"] == {"min": 2, "max": 8}
    assert lim["gemm"]["c"]["rank_range"] == {"min": 0, "max": 2}
    assert set(lim["gemm"]["a"]["data_types"]) == {"float32", "float16"} & set(ctx.supported_data_types)


@pytest.mark.parametrize("tile, order", [((8, 4), "n"), ((4, 2), "m"), ((16, 1), "n")])
def test_tile_shapes_and_orders(ctx, rng, force, monkeypatch, tile, order):
    """Other register tiles and invocation orders of the tile kernel (tuning knobs) stay exact."""
    from webnn_gpu.ops import linalg

    force("matmul", "tile")
    monkeypatch.setattr(linalg, "TILE_MAX", {"lane-loop": tile, "default": tile})
    monkeypatch.setattr(linalg, "TILE_ORDER", order)
    for sa, sb in [((37, 41), (41, 23)), ((3, 70, 16), (16, 36))]:
        a, b = data(rng, sa, np.float32), data(rng, sb, np.float32)
        out = run_graph(ctx, lambda bld, o: {"y": bld.matmul(o["a"], o["b"])}, {"a": a, "b": b}, tensor_path=False)["y"]
        ref = np.matmul(a.astype(np.float64), b.astype(np.float64))
        check(out, ref, np.matmul(np.abs(a), np.abs(b)).astype(np.float64), sa[-1], np.float32, f"{tile} {order}")


EPILOGUE_STEPS = [
    ({"op": "tanh"}, np.tanh),
    ({"op": "elu", "alpha": 0.5}, lambda x: np.where(x > 0, x, 0.5 * np.expm1(np.minimum(x, 0)))),
    ({"op": "leaky_relu", "alpha": 0.1}, lambda x: np.where(x >= 0, x, 0.1 * x)),
    ({"op": "hard_sigmoid"}, lambda x: np.clip(0.2 * x + 0.5, 0, 1)),
    ({"op": "softsign"}, lambda x: x / (1 + np.abs(x))),
    ({"op": "mul", "operand": 0}, lambda x, y: x * y),
    ({"op": "max", "operand": 0}, lambda x, y: np.maximum(x, y)),
    ({"op": "div", "operand": 0, "reverse": True}, lambda x, y: y / x),
    ({"op": "sub", "operand": 0, "scale": -2.0}, lambda x, y: x + 2.0 * y),
]


@pytest.mark.parametrize("step, fn", EPILOGUE_STEPS, ids=lambda s: s["op"] if isinstance(s, dict) else "")
def test_epilogue_ops(ctx, rng, step, fn):
    a, b = data(rng, (6, 8), np.float32), data(rng, (8, 12), np.float32)
    y = rng.uniform(0.5, 2, (1, 12)).astype(np.float32)  # broadcast along rows; away from 0 for div
    binary = "operand" in step
    out = run_graph(ctx, lambda bld, o: {"z": _fused(bld, bld.matmul(o["a"], o["b"]), [step],
                                                      [o["y"]] if binary else [])},
                    {"a": a, "b": b, "y": y} if binary else {"a": a, "b": b}, tensor_path=False)["z"]
    x = a.astype(np.float64) @ b
    with np.errstate(all="ignore"):
        want = fn(x, y.astype(np.float64)) if binary else fn(x)
    np.testing.assert_allclose(out, want, rtol=2e-5, atol=2e-6)


def test_tile_choice_divides_the_columns_and_keeps_a_workgroup_busy():
    from webnn_gpu.ops.linalg import MIN_INVOCATIONS, TILE_MAX, choose_tile

    for tuning, (max_m, max_n4) in TILE_MAX.items():
        for M, N, batches in [(16384, 16, 1), (4096, 72, 1), (1024, 24, 1), (1024, 88, 1), (256, 32, 1),
                              (1 << 20, 1024, 1), (1024, 1024, 1), (64, 64, 3)]:
            tm, tn4 = choose_tile(M, N, batches, tuning)
            n4 = -(-N // 4)
            narrow = n4 <= 4  # one column tile: up to 16 rows and all of N on every profile
            assert n4 % tn4 == 0 and tn4 <= (n4 if narrow else max_n4), (tuning, M, N, tm, tn4)
            assert tm <= (max(max_m, 16) if narrow else max_m), (tuning, M, N, tm, tn4)
            assert batches * -(-M // tm) * (n4 // tn4) >= MIN_INVOCATIONS, (tuning, M, N, tm, tn4)
        assert choose_tile(1024, 1024, 1, tuning) == (max_m, max(d for d in range(1, max_n4 + 1) if 256 % d == 0))
        assert choose_tile(16384, 16, 1, tuning) == (16, 4)  # N = 16: one column tile whatever the profile
        tm, tn4 = choose_tile(3, 5, 1, tuning)  # too small for a workgroup: the smallest tile
        assert (tm, tn4) == (2, 1)


def test_tuning_profile_from_the_adapter():
    from webnn_gpu._kernels import tuning_profile

    assert tuning_profile({"device": "llvmpipe (LLVM 15.0.6, 256 bits)",
                           "description": "Mesa 22.3.6 (LLVM 15.0.6)"}) == "lane-loop"
    assert tuning_profile({"device": "llvmpipe (LLVM 15.0.6, 256 bits)",
                           "description": "Mesa 25.0.7-2~bpo12+1 (LLVM 15.0.6)"}) == "default"
    assert tuning_profile({"device": "NVIDIA GeForce RTX 4090", "description": "560.35.03"}) == "default"
    assert tuning_profile({}) == "default"


@pytest.mark.parametrize("tuning", ["lane-loop", "default"])
@pytest.mark.parametrize("k, n", [(128, 128), (64, 252), (130, 128)])  # 16384 values: the whole uniform buffer; 16128; past it
def test_constant_b_from_a_uniform_buffer(ctx, rng, monkeypatch, tuning, k, n):
    """The tile kernel reads a float32 constant B of up to 64 KiB from a uniform buffer on
    the "lane-loop" profile (zero-padded to the declared size), from storage otherwise."""
    monkeypatch.setattr(ctx, "_tuning", tuning)
    a = data(rng, (300, k), np.float32)
    b = data(rng, (k, n), np.float32)
    out = run_graph(ctx, lambda bld, o: {"y": bld.matmul(o["a"], bld.constant(b))}, {"a": a})["y"]
    check(out, a.astype(np.float64) @ b.astype(np.float64), np.abs(a).astype(np.float64) @ np.abs(b), k, np.float32,
          f"{tuning} {k}x{n}")
    bld = webnn.MLGraphBuilder(ctx)
    g = bld.build({"y": bld.matmul(bld.input("a", {"data_type": "float32", "shape": [300, k]}), bld.constant(b))})
    uniform = any("var<uniform> b" in s.wgsl for s in g._steps if getattr(s, "template", "") == "matmul/tile.wgsl")
    assert uniform == (tuning == "lane-loop" and k * n <= 16384)
