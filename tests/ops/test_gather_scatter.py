"""gather, gather_elements, gather_nd, scatter_elements, scatter_nd against plain-loop NumPy
references.

Index rule under test (documented on the builder methods): a negative index counts from the
end (``i + dim``), then it is clamped into ``[0, dim - 1]``. Scatter: when several updates
target one element, the last one in row-major order of the indices wins.
"""

from __future__ import annotations

import numpy as np
import pytest

import webnn_gpu as webnn
from _movement_data import DTYPES, assert_moved, data, np_dtype
from helpers import run_graph
from webnn_gpu.errors import MLTypeError

INDEX_TYPES = ("int32", "uint32", "int64")


def norm(i: int, dim: int) -> int:
    """The index rule, written independently of the kernels."""
    i = int(i)
    if i < 0:
        i += dim
    return min(max(i, 0), dim - 1)


def ref_gather(x, ind, axis):
    out = np.empty(x.shape[:axis] + ind.shape + x.shape[axis + 1:], x.dtype)
    for o in np.ndindex(*out.shape):
        k = norm(ind[o[axis:axis + ind.ndim]], x.shape[axis])
        out[o] = x[o[:axis] + (k,) + o[axis + ind.ndim:]]
    return out


def ref_gather_elements(x, ind, axis):
    out = np.empty(ind.shape, x.dtype)
    for o in np.ndindex(*ind.shape):
        src = list(o)
        src[axis] = norm(ind[o], x.shape[axis])
        out[o] = x[tuple(src)]
    return out


def ref_gather_nd(x, ind):
    m = ind.shape[-1]
    out = np.empty(ind.shape[:-1] + x.shape[m:], x.dtype)
    for q in np.ndindex(*ind.shape[:-1]):
        out[q] = x[tuple(norm(ind[q][j], x.shape[j]) for j in range(m))]
    return out


def ref_scatter_elements(x, ind, upd, axis):
    out = x.copy()
    for u in np.ndindex(*ind.shape):  # row-major order: later updates overwrite earlier ones
        dst = list(u)
        dst[axis] = norm(ind[u], x.shape[axis])
        out[tuple(dst)] = upd[u]
    return out


def ref_scatter_nd(x, ind, upd):
    out = x.copy()
    m = ind.shape[-1]
    for q in np.ndindex(*ind.shape[:-1]):
        out[tuple(norm(ind[q][j], x.shape[j]) for j in range(m))] = upd[q]
    return out


def indices(rng, data_type, shape, dim, *, wild=True):
    """Random indices in [-dim, dim) plus, if ``wild``, out-of-range ones of every kind."""
    dt = np_dtype(data_type)
    lo = 0 if data_type == "uint32" else -dim
    a = np.asarray(rng.integers(lo, dim, size=shape)).astype(dt)
    flat = a.reshape(-1)
    if wild and flat.size >= 4:
        extremes = {"int32": [dim, 2**31 - 1, -dim - 1, -(2**31)],
                    "uint32": [dim, 2**32 - 1, 2**31, dim + 7],
                    "int64": [2**40, 2**63 - 1, -(2**40), -(2**63)]}[data_type]
        pos = rng.choice(flat.size, size=4, replace=False)
        flat[pos] = np.array(extremes, dtype=np.int64 if data_type != "uint32" else np.uint64).astype(dt)
    return a


# ---------------------------------------------------------------- gather
@pytest.mark.parametrize("dt", DTYPES)
def test_gather_family_every_data_type(ctx, rng, dt):
    x = data(rng, dt, (3, 5, 4))
    gi = indices(rng, "int32", (2, 3), 5)
    ei = indices(rng, "int64", (3, 7, 4), 5)
    ni = np.array([[2, -1], [0, 9], [-4, 3]], np.int32)
    out = run_graph(ctx, lambda b, o: {"g": b.gather(o["x"], o["gi"], axis=1),
                                       "e": b.gather_elements(o["x"], o["ei"], axis=1),
                                       "n": b.gather_nd(o["x"], o["ni"])},
                    {"x": x, "gi": gi, "ei": ei, "ni": ni})
    assert_moved(out["g"], ref_gather(x, gi, 1), "gather")
    assert_moved(out["e"], ref_gather_elements(x, ei, 1), "gather_elements")
    assert_moved(out["n"], ref_gather_nd(x, ni), "gather_nd")


@pytest.mark.parametrize("it", INDEX_TYPES)
@pytest.mark.parametrize("shape,ind_shape,axis", [
    ((5,), (), 0), ((5,), (7,), 0), ((1,), (3,), 0), ((4, 3), (2, 2), 0), ((4, 3), (), 1), ((2, 1, 6), (3, 1, 2), 2),
    ((2, 3, 4, 5), (6,), 3), ((3, 2), (1, 1, 1, 1), 1),
])
def test_gather(ctx, rng, it, shape, ind_shape, axis):
    x = data(rng, "float32", shape)
    ind = indices(rng, it, ind_shape, shape[axis])
    out = run_graph(ctx, lambda b, o: {"y": b.gather(o["x"], o["i"], axis=axis)}, {"x": x, "i": ind})["y"]
    assert_moved(out, ref_gather(x, ind, axis))


def test_gather_spec_examples_and_index_rule(ctx):
    x = np.array([[0, 1, 2], [10, 11, 12], [20, 21, 22], [30, 31, 32]], np.float32)
    cases = [(np.array([3, 1], np.uint32), 0, [[30, 31, 32], [10, 11, 12]]),
             (np.array([2, 1, 1], np.uint32), 1, [[2, 1, 1], [12, 11, 11], [22, 21, 21], [32, 31, 31]]),
             # -1 is the last row, 4 and 2**31-1 clamp to the last, -5 and -2**31 to the first
             (np.array([-1, 4, 2**31 - 1, -5, -(2**31), -4], np.int32), 0,
              [[30, 31, 32]] * 3 + [[0, 1, 2]] * 3),
             (np.array([2**33, -(2**33), -3, 2], np.int64), 1, [[2, 0, 0, 2], [12, 10, 10, 12], [22, 20, 20, 22],
                                                                  [32, 30, 30, 32]])]
    for ind, axis, expected in cases:
        out = run_graph(ctx, lambda b, o: {"y": b.gather(o["x"], o["i"], axis=axis)}, {"x": x, "i": ind})["y"]
        assert_moved(out, np.array(expected, np.float32), f"{ind} axis {axis}")


@pytest.mark.parametrize("it", INDEX_TYPES)
@pytest.mark.parametrize("shape,ind_shape,axis", [
    ((5,), (3,), 0), ((1,), (4,), 0), ((4, 3), (2, 3), 0), ((4, 3), (4, 1), 1), ((2, 3, 4), (2, 3, 7), 2),
    ((1, 2, 1, 3), (1, 2, 5, 3), 2),
])
def test_gather_elements(ctx, rng, it, shape, ind_shape, axis):
    x = data(rng, "int64", shape)
    ind = indices(rng, it, ind_shape, shape[axis])
    out = run_graph(ctx, lambda b, o: {"y": b.gather_elements(o["x"], o["i"], axis=axis)}, {"x": x, "i": ind})["y"]
    assert_moved(out, ref_gather_elements(x, ind, axis))


@pytest.mark.parametrize("it", INDEX_TYPES)
@pytest.mark.parametrize("shape,ind_shape", [
    ((5,), (1,)), ((5,), (3, 1)), ((2, 2), (3, 2)), ((2, 2, 2), (2, 1)), ((2, 3, 4), (2, 2, 3)),
    ((2, 3, 4), (4, 2)), ((1, 3, 1, 2), (2, 1, 1, 2)),
])
def test_gather_nd(ctx, rng, it, shape, ind_shape):
    x = data(rng, "uint8", shape)
    m = ind_shape[-1]
    ind = np.stack([indices(rng, it, ind_shape[:-1], shape[j]) for j in range(m)], axis=-1)
    out = run_graph(ctx, lambda b, o: {"y": b.gather_nd(o["x"], o["i"])}, {"x": x, "i": ind})["y"]
    assert_moved(out, ref_gather_nd(x, ind))


# ---------------------------------------------------------------- scatter
@pytest.mark.parametrize("dt", DTYPES)
def test_scatter_family_every_data_type(ctx, rng, dt):
    x = data(rng, dt, (3, 5, 4))
    ei = indices(rng, "int32", (3, 2, 4), 5)
    eu = data(rng, dt, (3, 2, 4))
    ni = np.array([[2, -1], [0, 9], [-3, 4]], np.int64)
    nu = data(rng, dt, (3, 4))
    out = run_graph(ctx, lambda b, o: {"e": b.scatter_elements(o["x"], o["ei"], o["eu"], axis=1),
                                       "n": b.scatter_nd(o["x"], o["ni"], o["nu"])},
                    {"x": x, "ei": ei, "eu": eu, "ni": ni, "nu": nu})
    assert_moved(out["e"], ref_scatter_elements(x, ei, eu, 1), "scatter_elements")
    assert_moved(out["n"], ref_scatter_nd(x, ni, nu), "scatter_nd")


@pytest.mark.parametrize("it", INDEX_TYPES)
@pytest.mark.parametrize("shape,ind_shape,axis", [
    ((5,), (3,), 0), ((5,), (9,), 0), ((1,), (3,), 0), ((4, 3), (2, 3), 0), ((4, 3), (4, 5), 1),
    ((2, 3, 4), (2, 3, 6), 2), ((2, 1, 3), (2, 4, 3), 1),
])
def test_scatter_elements(ctx, rng, it, shape, ind_shape, axis):
    x = data(rng, "float32", shape)
    ind = indices(rng, it, ind_shape, shape[axis])  # more updates than slots: duplicates are certain
    upd = data(rng, "float32", ind_shape)
    out = run_graph(ctx, lambda b, o: {"y": b.scatter_elements(o["x"], o["i"], o["u"], axis=axis)},
                    {"x": x, "i": ind, "u": upd})["y"]
    assert_moved(out, ref_scatter_elements(x, ind, upd, axis))


def test_scatter_spec_examples_and_last_update_wins(ctx):
    x = np.array([[0, 1, 2], [10, 11, 12], [20, 21, 22], [30, 31, 32]], np.float32)
    ind = np.array([[3, 1, 1], [2, 0, 3]], np.uint32)
    upd = np.array([[-1, -2, -3], [-4, -5, -6]], np.float32)
    out = run_graph(ctx, lambda b, o: {"y": b.scatter_elements(o["x"], o["i"], o["u"])},
                    {"x": x, "i": ind, "u": upd})["y"]
    assert_moved(out, np.array([[0, -5, 2], [10, -2, -3], [-4, 21, 22], [-1, 31, -6]], np.float32))
    # Element 1 is updated five times (as 1 and as -3): the last update, 50, wins.
    x1 = np.zeros(4, np.int32)
    ind1 = np.array([1, -3, 1, 1, -3, 0], np.int32)
    upd1 = np.array([10, 20, 30, 40, 50, 60], np.int32)
    out = run_graph(ctx, lambda b, o: {"y": b.scatter_elements(o["x"], o["i"], o["u"])},
                    {"x": x1, "i": ind1, "u": upd1})["y"]
    assert_moved(out, np.array([60, 50, 0, 0], np.int32))
    # scatterND examples of the spec, plus a repeated tuple.
    x2 = np.arange(8, dtype=np.float32)
    out = run_graph(ctx, lambda b, o: {"y": b.scatter_nd(o["x"], o["i"], o["u"])},
                    {"x": x2, "i": np.array([[4], [3], [1], [7], [3]], np.int64),
                     "u": np.array([-1, -2, -3, -4, -9], np.float32)})["y"]
    assert_moved(out, np.array([0, -3, 2, -9, -1, 5, 6, -4], np.float32))
    x3 = np.arange(6, dtype=np.float32).reshape(3, 2)
    out = run_graph(ctx, lambda b, o: {"y": b.scatter_nd(o["x"], o["i"], o["u"])},
                    {"x": x3, "i": np.array([[2], [0]], np.uint32),
                     "u": np.array([[-1, -2], [-3, -4]], np.float32)})["y"]
    assert_moved(out, np.array([[-3, -4], [2, 3], [-1, -2]], np.float32))


@pytest.mark.parametrize("it", INDEX_TYPES)
@pytest.mark.parametrize("shape,ind_shape", [
    ((8,), (4, 1)), ((2, 2), (2,)), ((2, 2), (5, 2)), ((3, 2), (6, 1)), ((2, 3, 4), (3, 2)), ((2, 3, 4), (2, 2, 1)),
    ((1, 4, 1), (2, 3)),
])
def test_scatter_nd(ctx, rng, it, shape, ind_shape):
    x = data(rng, "int8", shape)
    m = ind_shape[-1]
    ind = np.stack([indices(rng, it, ind_shape[:-1], shape[j]) for j in range(m)], axis=-1)
    upd = data(rng, "int8", ind_shape[:-1] + shape[m:])
    out = run_graph(ctx, lambda b, o: {"y": b.scatter_nd(o["x"], o["i"], o["u"])}, {"x": x, "i": ind, "u": upd})["y"]
    assert_moved(out, ref_scatter_nd(x, ind, upd))


def test_scatter_is_deterministic_under_contention(ctx, rng):
    """Thousands of updates race for 3 slots; the last writer must win on every run."""
    x = np.zeros(3, np.float32)
    ind = rng.integers(-3, 3, size=5000).astype(np.int32)
    upd = np.arange(5000, dtype=np.float32)
    ref = ref_scatter_elements(x, ind, upd, 0)
    b = webnn.MLGraphBuilder(ctx)
    ops = {n: b.input(n, {"data_type": str(a.dtype), "shape": list(a.shape)}) for n, a in
           (("x", x), ("i", ind), ("u", upd))}
    g = b.build({"y": b.scatter_elements(ops["x"], ops["i"], ops["u"])})
    for _ in range(3):
        assert_moved(ctx.compute(g, {"x": x, "i": ind, "u": upd})["y"], ref)


# ---------------------------------------------------------------- large tensors
def test_large_gather_and_scatter_past_65535_workgroups(ctx, rng):
    """Outputs of 4 x 4,200,000 > 65535 * 256 elements (2-D folded dispatch)."""
    x = rng.integers(0, 256, size=(4, 4_200_000), dtype=np.uint8)
    assert x.size > 65535 * 256
    gi = np.array([3, -4, 9, 1], np.int64)
    si = np.array([[2], [0], [2]], np.int32)
    su = rng.integers(0, 256, size=(3, 4_200_000), dtype=np.uint8)
    out = run_graph(ctx, lambda b, o: {"g": b.gather(o["x"], o["gi"]), "s": b.scatter_nd(o["x"], o["si"], o["su"])},
                    {"x": x, "gi": gi, "si": si, "su": su}, tensor_path=False)
    np.testing.assert_array_equal(out["g"], x[[3, 0, 3, 1]])
    ref = x.copy()
    ref[0], ref[2] = su[1], su[2]
    np.testing.assert_array_equal(out["s"], ref)


# ---------------------------------------------------------------- validation
def test_validation_errors(ctx):
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [2, 3, 4]})
    s = b.input("s", {"data_type": "float32", "shape": []})

    def idx(name, dt, shape):
        return b.input(name, {"data_type": dt, "shape": list(shape)})

    i23 = idx("i23", "int32", [2, 3])
    cases = [
        (lambda: b.gather(x, idx("f", "float32", [2])), "gather", "indices", "int32, uint32, int64", "float32"),
        (lambda: b.gather(x, idx("u64", "uint64", [2])), "gather", "indices", "uint64"),
        (lambda: b.gather(x, idx("i8", "int8", [2])), "gather", "indices", "int8"),
        (lambda: b.gather(x, i23, axis=3, label="g"), "gather ['g']", "axis"),
        (lambda: b.gather(s, i23), "gather", "axis"),
        (lambda: b.gather(x, idx("i7", "int32", [1] * 7)), "gather", "output rank <= 8"),
        (lambda: b.gather(x, x), "gather", "indices"),
        (lambda: b.gather_elements(x, idx("e1", "int32", [2, 3])), "gather_elements", "indices", "rank-3"),
        (lambda: b.gather_elements(x, idx("e2", "int32", [2, 4, 4]), axis=2), "gather_elements", "indices"),
        (lambda: b.gather_elements(x, idx("e3", "uint32", [2, 3, 4]), axis=-1), "gather_elements", "axis"),
        (lambda: b.gather_nd(x, idx("n1", "int32", [2, 4])), "gather_nd", "indices",
         "last dimension <= the input's rank"),
        (lambda: b.gather_nd(x, idx("n2", "int32", [])), "gather_nd", "indices", "rank >= 1"),
        (lambda: b.gather_nd(s, idx("n3", "int32", [1])), "gather_nd", "input", "rank >= 1"),
        (lambda: b.scatter_elements(x, idx("s1", "int64", [2, 3, 2]), idx("u1", "float16", [2, 3, 2]), axis=2),
         "scatter_elements", "updates", "float32"),
        (lambda: b.scatter_elements(x, idx("s2", "int64", [2, 3, 2]), idx("u2", "float32", [2, 3, 3]), axis=2),
         "scatter_elements", "updates", "shape [2, 3, 2]"),
        (lambda: b.scatter_elements(x, idx("s3", "int64", [2, 3, 2]), idx("u3", "float32", [2, 3, 2]), axis=1),
         "scatter_elements", "indices"),
        (lambda: b.scatter_elements(x, idx("s4", "float16", [2, 3, 2]), idx("u4", "float32", [2, 3, 2]), axis=2),
         "scatter_elements", "indices", "float16"),
        (lambda: b.scatter_nd(x, idx("t1", "int32", [2, 2]), idx("v1", "float32", [2, 3])), "scatter_nd", "updates",
         "shape [2, 4]"),
        (lambda: b.scatter_nd(x, idx("t2", "int32", [2, 5]), idx("v2", "float32", [2])), "scatter_nd", "indices"),
        (lambda: b.scatter_nd(x, idx("t3", "int32", [2, 3]), idx("v3", "int32", [2])), "scatter_nd", "updates",
         "float32"),
        (lambda: b.scatter_nd(s, idx("t4", "int32", [1]), idx("v4", "float32", [1])), "scatter_nd", "input"),
        (lambda: b.gather(x, i23, axis=0, batch_dims=1), "gather", "unknown option"),
    ]
    for fn, *words in cases:
        with pytest.raises(MLTypeError) as info:
            fn()
        for w in words:
            assert w in str(info.value), f"{w!r} not in {info.value}"
    # The builder is still usable after every failed call.
    g = b.build({"y": b.gather(x, i23, axis=1)})
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    ind = np.array([[0, 2, 1], [-1, 5, -7]], np.int32)
    assert_moved(ctx.compute(g, {"x": a, "i23": ind})["y"], ref_gather(a, ind, 1))


def test_shapes_and_support_limits(ctx):
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float16", "shape": [1, 2, 3, 4]})
    i = b.input("i", {"data_type": "int64", "shape": [5, 6]})
    assert b.gather(x, i, axis=2).shape == (1, 2, 5, 6, 4)
    n = b.input("n", {"data_type": "uint32", "shape": [5, 3]})
    assert b.gather_nd(x, n).shape == (5, 4)
    limits = ctx.op_support_limits()
    for op in ("gather", "gather_elements", "gather_nd", "scatter_elements", "scatter_nd"):
        assert set(limits[op]["indices"]["data_types"]) == set(INDEX_TYPES)
        assert set(limits[op]["input"]["data_types"]) == set(DTYPES)
    assert limits["scatter_nd"]["updates"]["rank_range"] == {"min": 0, "max": 8}


@pytest.mark.parametrize("dt", ["float32", "float16"])
def test_gather_hosts_an_epilogue(ctx, rng, dt):
    """An embedding's lookup then a position add (a broadcast constant) and a scale: one gather
    kernel that applies them as it stores. Near misses keep their own kernels: an int32 gather
    (its values move raw) and a float gather whose output is also read elsewhere."""
    from helpers import kernel_templates

    table = rng.standard_normal((11, 8)).astype(dt)
    pos = rng.standard_normal((5, 8)).astype(dt)
    ids = np.array([[3, 0, 10, -1, 7], [1, 1, 2, 9, 4]], np.int32)
    itable = rng.integers(-50, 50, (11, 8)).astype(np.int32)

    def build(b, o):
        e = b.gather(b.constant(table), o["ids"], axis=0)
        fused = b.mul(b.add(e, b.constant(pos)), b.constant(np.array(1.5, dt)))
        return {"fused": fused}

    def build_near(b, o):
        e = b.gather(b.constant(table), o["ids"], axis=0)
        i = b.gather(b.constant(itable), o["ids"], axis=0)
        return {"both": b.add(e, b.constant(pos)), "raw": e, "int": b.add(i, b.constant(np.array(3, np.int32)))}

    out = run_graph(ctx, build, {"ids": ids})
    emb = table.astype(np.float64)[ids % 11]
    tol = 1e-6 if dt == "float32" else 2e-3
    np.testing.assert_allclose(out["fused"].astype(np.float64), (emb + pos) * 1.5, rtol=tol, atol=tol * 4)
    assert kernel_templates(ctx, build, {"ids": ids}) == ["gather_scatter/gather.wgsl"]
    near = run_graph(ctx, build_near, {"ids": ids})
    np.testing.assert_allclose(near["both"].astype(np.float64), emb + pos, rtol=tol, atol=tol * 4)
    np.testing.assert_array_equal(near["int"], itable[ids % 11] + 3)
    assert len(kernel_templates(ctx, build_near, {"ids": ids})) == 4
