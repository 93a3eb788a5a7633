"""Data-movement operators against NumPy: reshape, transpose, expand, slice, concat, split,
tile, reverse, pad, triangular.

Every result must equal the NumPy reference exactly (bit for bit; see _movement_data).
The references are NumPy primitives (transpose, broadcast_to, basic slicing, concatenate,
split, tile, flip, pad, triu/tril), independent of the index maps the kernels use.
"""

from __future__ import annotations

import numpy as np
import pytest

import webnn_gpu as webnn
from _movement_data import DTYPES, assert_moved, data, np_dtype
from helpers import run_graph
from webnn_gpu.errors import MLTypeError


def _one(ctx, fn, x, **more):
    """Run ``fn(builder, x_operand, **more_operands)`` and return output "y" (compute and tensor path)."""
    inputs = {"x": x, **more}
    return run_graph(ctx, lambda b, o: {"y": fn(b, **o)}, inputs)["y"]


def _builder_with(ctx, data_type="float32", shape=(2, 3, 4)):
    b = webnn.MLGraphBuilder(ctx)
    return b, b.input("x", {"data_type": data_type, "shape": list(shape)})


# ---------------------------------------------------------------- every data type
@pytest.mark.parametrize("dt", DTYPES)
def test_every_op_moves_every_data_type_exactly(ctx, rng, dt):
    """One graph per data type runs each operator on odd shapes (sub-word offsets for bytes)."""
    x = data(rng, dt, (3, 5, 7))
    y = data(rng, dt, (3, 2, 7))
    refs = {
        "reshape": x.reshape(15, 7),
        "transpose": x.transpose(2, 0, 1),
        "expand": np.broadcast_to(x[:, :1, :], (2, 3, 5, 7)),
        "slice": x[1:3, 1:5:3, 0:7:2],
        "concat": np.concatenate([x, y, x], axis=1),
        "split0": x[:, :, :3], "split1": x[:, :, 3:4], "split2": x[:, :, 4:],
        "tile": np.tile(x, (2, 1, 3)),
        "reverse": x[::-1, :, ::-1],
        "pad_c": np.pad(x, [(1, 0), (0, 2), (3, 1)], constant_values=np.array(5, np_dtype(dt))),
        "pad_e": np.pad(x, [(2, 1), (0, 0), (1, 3)], mode="edge"),
        "pad_r": np.pad(x, [(2, 1), (4, 0), (1, 6)], mode="reflect"),
        "tri": np.triu(x, 1),
    }

    def build(b, o):
        x_, y_ = o["x"], o["y"]
        s = b.split(x_, [3, 1, 3], axis=2)
        return {
            "reshape": b.reshape(x_, [15, 7]),
            "transpose": b.transpose(x_, permutation=[2, 0, 1]),
            "expand": b.expand(b.slice(x_, [0, 0, 0], [3, 1, 7]), [2, 3, 5, 7]),
            "slice": b.slice(x_, [1, 1, 0], [2, 4, 7], strides=[1, 3, 2]),
            "concat": b.concat([x_, y_, x_], 1),
            "split0": s[0], "split1": s[1], "split2": s[2],
            "tile": b.tile(x_, [2, 1, 3]),
            "reverse": b.reverse(x_, axes=[0, 2]),
            "pad_c": b.pad(x_, [1, 0, 3], [0, 2, 1], value=5),
            "pad_e": b.pad(x_, [2, 0, 1], [1, 0, 3], mode="edge"),
            "pad_r": b.pad(x_, [2, 4, 1], [1, 0, 6], mode="reflection"),
            "tri": b.triangular(x_, diagonal=1),
        }

    out = run_graph(ctx, build, {"x": x, "y": y})
    for name, ref in refs.items():
        assert_moved(out[name], ref, f"{name} {dt}")


# ---------------------------------------------------------------- reshape
@pytest.mark.parametrize("src,dst", [((), [1, 1, 1]), ((1,), []), ((2, 3, 4), [4, 6]), ((6,), [1, 2, 1, 3, 1]),
                                     ((2, 1, 3), [3, 2])])
def test_reshape(ctx, rng, src, dst):
    x = data(rng, "float32", src)
    assert_moved(_one(ctx, lambda b, x: b.reshape(x, dst), x), x.reshape(dst))


def test_reshape_is_a_view(ctx, rng):
    """No kernel runs for reshape; an op output reshaped shares the op's buffer."""
    b, x = _builder_with(ctx)
    g = b.build({"y": b.reshape(b.reshape(x, [4, 6]), [24])})
    assert g.kernel_count == 0
    b, x = _builder_with(ctx)
    g = b.build({"y": b.reshape(b.transpose(x), [24])})
    assert g.kernel_count == 1
    a = data(rng, "float32", (2, 3, 4))
    assert_moved(ctx.compute(g, {"x": a})["y"], a.T.reshape(24))


def test_reshape_of_a_constant_as_output(ctx, rng):
    """A graph output that is a view of a constant (regression: the constant got no buffer)."""
    c = data(rng, "int64", (2, 3))
    b = webnn.MLGraphBuilder(ctx)
    k = b.constant(c)
    g = b.build({"y": b.reshape(k, [3, 2]), "z": b.transpose(b.reshape(k, [6]))})
    out = ctx.compute(g, {})
    assert_moved(out["y"], c.reshape(3, 2))
    assert_moved(out["z"], c.reshape(6))


# ---------------------------------------------------------------- transpose
@pytest.mark.parametrize("shape,perm", [
    ((), None), ((5,), None), ((3, 4), None), ((2, 3, 4), None), ((2, 3, 4), [1, 0, 2]), ((1, 3, 1, 4), [3, 0, 1, 2]),
    ((2, 1, 3, 1, 2, 2), [5, 3, 1, 0, 4, 2]), ((2, 2, 1, 2, 1, 2, 1, 2), [7, 6, 5, 4, 3, 2, 1, 0]),
])
def test_transpose(ctx, rng, shape, perm):
    x = data(rng, "float16", shape)
    ref = np.transpose(x, perm)
    assert_moved(_one(ctx, lambda b, x: b.transpose(x, permutation=perm), x), ref)


def test_transpose_of_size_one_dims_is_a_view(ctx):
    b, x = _builder_with(ctx, shape=(1, 3, 1, 4))
    assert b.build({"y": b.transpose(x, permutation=[0, 2, 1, 3])}).kernel_count == 0
    b, x = _builder_with(ctx, shape=(1, 3, 1, 4))
    assert b.build({"y": b.transpose(x, permutation=[0, 3, 2, 1])}).kernel_count == 1


# ---------------------------------------------------------------- expand
@pytest.mark.parametrize("src,dst", [((), [3]), ((), [2, 3]), ((1,), [5]), ((4,), [3, 4]), ((3, 1), [2, 3, 5]),
                                     ((2, 1, 3), [2, 4, 3]), ((2, 3), [2, 3]), ((1, 1), [1, 1, 1])])
def test_expand(ctx, rng, src, dst):
    x = data(rng, "int8", src)
    assert_moved(_one(ctx, lambda b, x: b.expand(x, dst), x), np.broadcast_to(x, dst))


# ---------------------------------------------------------------- slice
@pytest.mark.parametrize("shape,starts,sizes,strides", [
    ((), [], [], None),
    ((7,), [2], [3], None),
    ((7,), [0], [7], [3]),
    ((1, 5), [0, 4], [1, 1], None),
    ((4, 5, 6), [1, 0, 2], [3, 5, 4], [2, 1, 3]),
    ((2, 3, 4, 5), [0, 0, 0, 0], [2, 3, 4, 5], [1, 1, 1, 1]),
    ((5, 1, 9), [4, 0, 8], [1, 1, 1], [3, 1, 5]),
])
def test_slice(ctx, rng, shape, starts, sizes, strides):
    x = data(rng, "uint8", shape)
    steps = strides or [1] * len(shape)
    ref = x[tuple(np.s_[s:s + n:k] for s, n, k in zip(starts, sizes, steps))]
    assert_moved(_one(ctx, lambda b, x: b.slice(x, starts, sizes, strides=strides), x), ref)


# ---------------------------------------------------------------- concat / split
@pytest.mark.parametrize("shapes,axis", [
    ([(3,), (5,)], 0),
    ([(1,), (1,), (1,)], 0),
    ([(2, 3), (2, 1), (2, 4)], 1),
    ([(1, 3, 2), (4, 3, 2)], 0),
    ([(2, 3, 1, 5), (2, 3, 2, 5), (2, 3, 1, 5), (2, 3, 3, 5)], 2),
    ([(2, 2)], 1),
])
@pytest.mark.parametrize("dt", ["uint8", "int64"])
def test_concat(ctx, rng, shapes, axis, dt):
    arrays = {f"i{k}": data(rng, dt, s) for k, s in enumerate(shapes)}
    out = run_graph(ctx, lambda b, o: {"y": b.concat([o[k] for k in arrays], axis)}, arrays)["y"]
    assert_moved(out, np.concatenate(list(arrays.values()), axis=axis))


@pytest.mark.parametrize("shape,splits,axis", [
    ((6,), 3, 0), ((6,), [1, 5], 0), ((5,), 1, 0), ((2, 9), [4, 1, 4], 1), ((4, 3, 2), 2, 0),
    ((2, 3, 7), [2, 2, 2, 1], 2), ((1, 3), [1], 0),
])
def test_split(ctx, rng, shape, splits, axis):
    x = data(rng, "int8", shape)
    sizes = [shape[axis] // splits] * splits if isinstance(splits, int) else splits
    refs = np.split(x, np.cumsum(sizes)[:-1], axis=axis)
    out = run_graph(ctx, lambda b, o: {f"y{i}": y for i, y in enumerate(b.split(o["x"], splits, axis=axis))}, {"x": x})
    assert len(out) == len(refs)
    for i, ref in enumerate(refs):
        assert_moved(out[f"y{i}"], ref, f"part {i}")


# ---------------------------------------------------------------- tile / reverse
@pytest.mark.parametrize("shape,reps", [((), []), ((3,), [4]), ((2, 3), [1, 1]), ((1, 3), [3, 2]),
                                        ((2, 1, 3), [2, 5, 1])])
def test_tile(ctx, rng, shape, reps):
    x = data(rng, "uint32", shape)
    assert_moved(_one(ctx, lambda b, x: b.tile(x, reps), x), np.tile(x, reps) if shape else x)


@pytest.mark.parametrize("shape,axes", [((), None), ((6,), None), ((6,), []), ((2, 3, 4), None), ((2, 3, 4), [1]),
                                        ((2, 1, 4), [2, 1]), ((1, 5), [0])])
def test_reverse(ctx, rng, shape, axes):
    x = data(rng, "float32", shape)
    ref = np.flip(x, axis=tuple(range(len(shape))) if axes is None else tuple(axes)) if shape else x
    assert_moved(_one(ctx, lambda b, x: b.reverse(x, axes=axes), x), ref)


# ---------------------------------------------------------------- pad
_PADS = [((1,), [0], [0]), ((4,), [3], [2]), ((1, 5), [0, 2], [0, 4]), ((2, 3, 4), [1, 2, 3], [1, 0, 2]),
         ((3, 1, 2), [0, 0, 1], [2, 0, 1]), ((5, 2, 3), [4, 1, 0], [4, 0, 2])]


@pytest.mark.parametrize("mode,shape,beg,end", [
    (mode, *case) for mode in ("constant", "edge", "reflection") for case in _PADS
    # reflection needs paddings smaller than the dimension (its error is tested below)
    if mode != "reflection" or all(p < n for p, n in zip(case[1] + case[2], case[0] + case[0]))
])
def test_pad(ctx, rng, mode, shape, beg, end):
    x = data(rng, "float32", shape)
    kw = {"constant_values": -2.5} if mode == "constant" else {}
    ref = np.pad(x, list(zip(beg, end)), mode={"reflection": "reflect"}.get(mode, mode), **kw)
    assert_moved(_one(ctx, lambda b, x: b.pad(x, beg, end, mode=mode, value=-2.5), x), ref)


@pytest.mark.parametrize("dt,value,expected", [
    ("int8", 300, 127), ("int8", -7.9, -7), ("uint8", -5, 0), ("uint8", 255, 255), ("int32", float("nan"), 0),
    ("uint32", 2**32 + 5, 2**32 - 1), ("int64", -(2**63), -(2**63)), ("uint64", 2**64 - 1, 2**64 - 1),
    ("float16", 70000.0, np.inf), ("float16", 0.1, np.float16(0.1)), ("float16", -0.0, -0.0),
    ("float16", float("nan"), np.nan), ("float16", -np.inf, -np.inf), ("float16", 6e-8, np.float16(6e-8)),
    ("float32", float("-inf"), -np.inf), ("float32", float("nan"), np.nan),
])
def test_pad_value_is_cast_to_the_data_type(ctx, rng, dt, value, expected):
    x = data(rng, dt, (2, 3))
    ref = np.pad(x, [(1, 0), (0, 2)], constant_values=np.array(expected, np_dtype(dt)))
    assert_moved(_one(ctx, lambda b, x: b.pad(x, [1, 0], [0, 2], value=value), x), ref)


# ---------------------------------------------------------------- triangular
@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("diagonal", [-9, -2, -1, 0, 1, 3, 2**31 - 1, -(2**31)])
def test_triangular(ctx, rng, upper, diagonal):
    x = data(rng, "int32", (2, 3, 4, 5))
    ref = (np.triu if upper else np.tril)(x, max(min(diagonal, 100), -100))
    assert_moved(_one(ctx, lambda b, x: b.triangular(x, upper=upper, diagonal=diagonal), x), ref)


def test_triangular_2d_defaults(ctx, rng):
    x = data(rng, "float16", (1, 1))
    assert_moved(_one(ctx, lambda b, x: b.triangular(x), x), np.triu(x))
    x = np.arange(1, 10, dtype=np.float32).reshape(3, 3)
    assert_moved(_one(ctx, lambda b, x: b.triangular(x, upper=False, diagonal=-1), x),
                 np.array([[0, 0, 0], [4, 0, 0], [7, 8, 0]], np.float32))


# ---------------------------------------------------------------- large tensors
def test_large_tensor_past_65535_workgroups(ctx, rng):
    """4097 x 4097 > 65535 * 256 elements: the dispatch folds into 2-D workgroups."""
    x = rng.integers(0, 256, size=(4097, 4097), dtype=np.uint8)
    assert x.size > 65535 * 256
    out = run_graph(ctx, lambda b, o: {"t": b.transpose(o["x"]), "p": b.pad(b.slice(o["x"], [1, 0], [4096, 4097]),
                                                                              [0, 0], [0, 1], mode="edge")},
                    {"x": x}, tensor_path=False)
    np.testing.assert_array_equal(out["t"], x.T)
    np.testing.assert_array_equal(out["p"], np.pad(x[1:], [(0, 0), (0, 1)], mode="edge"))


# ---------------------------------------------------------------- validation
def _raises(fn, *words, cls=MLTypeError):
    with pytest.raises(cls) as info:
        fn()
    for w in words:
        assert w in str(info.value), f"{w!r} not in {info.value}"
    return info.value


def test_validation_errors_name_op_label_and_argument(ctx):
    b, x = _builder_with(ctx)  # float32 [2, 3, 4]
    s, _ = _builder_with(ctx, shape=())
    xs = s.input("s", {"data_type": "float32", "shape": []})
    cases = [
        (lambda: b.reshape(x, [5, 5], label="r"), "reshape ['r']", "new_shape", "24 elements"),
        (lambda: b.reshape(x, [24, 0]), "reshape", "new_shape"),
        (lambda: b.reshape(x, [-24]), "reshape", "new_shape"),
        (lambda: b.transpose(x, permutation=[0, 1], label="t"), "transpose ['t']", "permutation"),
        (lambda: b.transpose(x, permutation=[0, 1, 1]), "transpose", "permutation", "no duplicates"),
        (lambda: b.transpose(x, permutation=[0, 1, 3]), "transpose", "permutation"),
        (lambda: b.transpose(x, permutation=[0, 1, -2]), "transpose", "permutation"),
        (lambda: b.expand(x, [2, 2, 4]), "expand", "new_shape", "broadcasts to"),
        (lambda: b.expand(x, [3, 4]), "expand", "new_shape"),
        (lambda: b.slice(x, [0, 0, 1], [2, 3, 4]), "slice", "sizes", "starts[2] + sizes[2]"),
        (lambda: b.slice(x, [0, 0], [2, 3]), "slice", "starts"),
        (lambda: b.slice(x, [0, 0, 0], [2, 0, 4]), "slice", "sizes"),
        (lambda: b.slice(x, [0, 0, 0], [2, 3, 4], strides=[1, 0, 1]), "slice", "strides"),
        (lambda: b.slice(x, [0, 3, 0], [1, 1, 1]), "slice", "sizes"),
        (lambda: b.concat([], 0), "concat", "inputs", "non-empty"),
        (lambda: b.concat(x, 0), "concat", "inputs"),
        (lambda: b.concat([x, x], 3), "concat", "axis"),
        (lambda: b.concat([x, b.input("h", {"data_type": "float16", "shape": [2, 3, 4]})], 0), "concat", "inputs[1]",
         "float32"),
        (lambda: b.concat([x, b.input("w", {"data_type": "float32", "shape": [2, 4, 4]})], 0), "concat", "inputs[1]"),
        (lambda: b.concat([x, b.input("v", {"data_type": "float32", "shape": [2, 3]})], 0), "concat", "inputs[1]"),
        (lambda: b.concat([xs], 0), "concat", "inputs[0]"),
        (lambda: b.split(x, 3, axis=2, label="sp"), "split ['sp']", "splits", "dividing dimension 2 (4)"),
        (lambda: b.split(x, 0), "split", "splits"),
        (lambda: b.split(x, [1, 1], axis=1), "split", "splits", "summing to dimension 1 (3)"),
        (lambda: b.split(x, [3, 0, 1], axis=2), "split", "splits"),
        (lambda: b.split(x, 1, axis=3), "split", "axis"),
        (lambda: s.split(xs, 1), "split", "axis"),
        (lambda: b.tile(x, [1, 2]), "tile", "repetitions"),
        (lambda: b.tile(x, [1, 0, 1]), "tile", "repetitions"),
        (lambda: b.reverse(x, axes=[0, 0]), "reverse", "axes", "distinct"),
        (lambda: b.reverse(x, axes=[3]), "reverse", "axes"),
        (lambda: b.pad(x, [0, 0], [0, 0, 0]), "pad", "beginning_padding"),
        (lambda: b.pad(x, [0, 0, 0], [0, -1, 0]), "pad", "ending_padding"),
        (lambda: b.pad(x, [0, 0, 0], [0, 0, 0], mode="symmetric"), "pad", "mode", "'reflection'"),
        (lambda: b.pad(x, [0, 3, 0], [0, 0, 0], mode="reflection"), "pad", "beginning_padding", "smaller than"),
        (lambda: b.pad(x, [0, 0, 0], [2, 0, 0], mode="reflection"), "pad", "ending_padding"),
        (lambda: b.pad(x, [0, 0, 0], [0, 0, 0], value="1"), "pad", "value", "a number"),
        (lambda: b.pad(x, [0, 0, 0], [0, 0, 0], value=True), "pad", "value"),
        (lambda: s.pad(xs, [], []), "pad", "input", "rank >= 1"),
        (lambda: b.triangular(b.input("one", {"data_type": "float32", "shape": [4]})), "triangular", "rank >= 2"),
        (lambda: b.triangular(x, diagonal=1.5), "triangular", "diagonal"),
        (lambda: b.triangular(x, diagonal=2**31), "triangular", "diagonal"),
        (lambda: b.triangular(x, upper=1), "triangular", "upper"),
        (lambda: b.transpose(x, perm=[0, 1, 2]), "transpose", "unknown option", "'perm'"),
        (lambda: b.reshape(xs, [1]), "reshape", "input", "another builder"),
    ]
    for fn, *words in cases:
        _raises(fn, *words)
    # A failed call changes nothing: the builder still builds and runs.
    g = b.build({"y": b.transpose(x)})
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    assert_moved(ctx.compute(g, {"x": a})["y"], a.T)


def test_shapes_and_support_limits(ctx):
    b, x = _builder_with(ctx)
    assert b.transpose(x).shape == (4, 3, 2)
    assert b.slice(x, [0, 1, 1], [2, 2, 3], strides=[2, 1, 2]).shape == (1, 2, 2)
    assert [p.shape for p in b.split(x, [1, 3], axis=2)] == [(2, 3, 1), (2, 3, 3)]
    assert b.pad(x, [1, 0, 2], [0, 3, 1]).shape == (3, 6, 7)
    assert b.tile(x, [3, 1, 2]).data_type == "float32"
    limits = ctx.op_support_limits()
    for op in ("reshape", "transpose", "expand", "slice", "concat", "split", "tile", "reverse", "pad", "triangular"):
        assert op in limits
    assert set(limits["concat"]["inputs"]["data_types"]) == set(DTYPES)
    assert limits["triangular"]["input"]["rank_range"]["min"] == 2
    assert set(limits["split"]["outputs"]["data_types"]) == set(DTYPES)
