"""Hypothesis fuzzing: random valid graphs against NumPy, random invalid calls against our errors.

CI runs a bounded number of examples; ``pytest -m soak`` runs the same properties for longer
(``WEBNN_GPU_SOAK_SECONDS``, default 600, per property), in fresh batches of 200 examples.

Properties:

* random element-wise graphs (a chain of unary/binary ops with broadcasting) against NumPy;
* invalid descriptors: a clean MLTypeError and a usable context;
* broadcasting: refused exactly when NumPy refuses;
* random data-movement and gather/scatter calls (reshape, transpose, expand, slice, split,
  tile, reverse, pad, concat, gather, gather_elements, scatter_elements, triangular) with
  arguments that are valid, just invalid (one element off, repeated, one too many or too few)
  or of the wrong kind: an independent NumPy oracle decides. Refused calls must raise an
  MLTypeError naming the operator, its label and an argument, and leave the builder unchanged;
  accepted ones must give NumPy's shape and, after build, NumPy's bytes;
* random sequences of writes (right data, bytes, wrong length or dtype, released buffers),
  reads, dispatches (tensors of wrong shape or dtype, destroyed, one tensor as input and
  output) and destroys over a few tensors with random flags, against a model of their
  contents: every misuse raises the right class and no tensor loses or changes data.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import webnn_gpu as webnn

SOAK_SECONDS = int(os.environ.get("WEBNN_GPU_SOAK_SECONDS", "600"))

BINARY = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "max": np.maximum,
    "min": np.minimum,
}
UNARY = {
    "abs": np.abs,
    "neg": np.negative,
    "relu": lambda x: np.maximum(x, 0),
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "tanh": np.tanh,
    "exp": np.exp,
    "softsign": lambda x: x / (1 + np.abs(x)),
    "floor": np.floor,
}


@st.composite
def _shapes(draw):
    rank = draw(st.integers(0, 4))
    out = draw(st.lists(st.integers(1, 5), min_size=rank, max_size=rank))
    # a broadcastable partner: drop leading dims and set some dims to 1
    k = draw(st.integers(0, rank))
    partner = [1 if draw(st.booleans()) else d for d in out[k:]]
    return tuple(out), tuple(partner)


@st.composite
def _programs(draw):
    n_ops = draw(st.integers(1, 5))
    steps = []
    for _ in range(n_ops):
        if draw(st.booleans()):
            steps.append(("binary", draw(st.sampled_from(sorted(BINARY))), draw(st.booleans())))
        else:
            steps.append(("unary", draw(st.sampled_from(sorted(UNARY))), False))
    shapes = draw(_shapes())
    swap = draw(st.booleans())
    seed = draw(st.integers(0, 2**16))
    return steps, shapes, swap, seed


def _run_program(ctx, program):
    steps, (shape_a, shape_b), swap, seed = program
    rng = np.random.default_rng(seed)
    xa = rng.uniform(-2, 2, shape_a).astype(np.float32)
    xb = rng.uniform(-2, 2, shape_b).astype(np.float32)
    b = webnn.MLGraphBuilder(ctx)
    a_op = b.input("a", {"data_type": "float32", "shape": list(shape_a)})
    b_op = b.input("b", {"data_type": "float32", "shape": list(shape_b)})
    v, ref = a_op, xa.astype(np.float64)
    for kind, name, use_b in steps:
        if kind == "unary":
            v, ref = getattr(b, name)(v), UNARY[name](ref)
        else:
            other, oref = (b_op, xb.astype(np.float64)) if use_b else (a_op, xa.astype(np.float64))
            if swap:
                v, ref = getattr(b, name)(other, v), BINARY[name](oref, ref)
            else:
                v, ref = getattr(b, name)(v, other), BINARY[name](ref, oref)
    assert v.shape == ref.shape
    # each step feeds the next, so the graph is a chain ending in v
    y = b.add(v, b.constant("float32", 0.0))
    graph = b.build({"y": y})
    feed = {n: {"a": xa, "b": xb}[n] for n in graph.inputs}
    got = ctx.compute(graph, feed)["y"]
    graph.destroy()
    return got, ref


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(program=_programs())
def test_random_elementwise_graphs_match_numpy(ctx, program):
    with np.errstate(all="ignore"):
        got, ref = _run_program(ctx, program)
        _assert_float32_close(got, ref)


def _assert_float32_close(got, ref):
    """Compare with the float64 reference rounded to float32 (so overflow to inf matches);
    chains of exp amplify float32 rounding, hence the 1e-4 relative tolerance."""
    with np.errstate(all="ignore"):
        expected = np.asarray(ref).astype(np.float32)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=2e-5)


_BAD_DESCRIPTORS = st.one_of(
    st.fixed_dictionaries({"data_type": st.sampled_from(["bool", "float64", "Float32", "", "int4x"]),
                           "shape": st.just([2])}),
    st.fixed_dictionaries({"data_type": st.just("float32"),
                           "shape": st.lists(st.one_of(st.integers(-3, 0), st.floats(0.5, 3), st.booleans(),
                                                       st.just(2**33)), min_size=1, max_size=3)}),
    st.fixed_dictionaries({"data_type": st.just("float32"), "shape": st.just([2]),
                           "extra": st.sampled_from(["dimensions", "dataType", "readible"])}).map(
        lambda d: {"data_type": d["data_type"], "shape": d["shape"], d["extra"]: True}),
    st.just({"shape": [2]}),
    st.just({"data_type": "float32"}),
    st.just(["float32", [2]]),
    st.lists(st.integers(1, 3), min_size=9, max_size=10).map(lambda s: {"data_type": "float32", "shape": s}),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(desc=_BAD_DESCRIPTORS, where=st.sampled_from(["input", "constant", "create_tensor"]))
def test_invalid_descriptors_raise_type_errors_and_leave_things_usable(ctx, desc, where):
    b = webnn.MLGraphBuilder(ctx)
    with pytest.raises(webnn.MLTypeError):
        if where == "input":
            b.input("x", desc)
        elif where == "constant":
            b.constant(desc, np.zeros(2, np.float32))
        else:
            ctx.create_tensor(desc)
    x = b.input("x", {"data_type": "float32", "shape": [2]})
    g = b.build({"y": b.neg(x)})
    np.testing.assert_array_equal(ctx.compute(g, {"x": np.array([1, -1], np.float32)})["y"], [-1, 1])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shape_a=st.lists(st.integers(2, 5), min_size=1, max_size=3),
       shape_b=st.lists(st.integers(2, 5), min_size=1, max_size=3),
       op=st.sampled_from(sorted(BINARY)))
def test_non_broadcastable_shapes_are_refused(ctx, shape_a, shape_b, op):
    try:
        np.broadcast_shapes(tuple(shape_a), tuple(shape_b))
        compatible = True
    except ValueError:
        compatible = False
    b = webnn.MLGraphBuilder(ctx)
    a = b.input("a", {"data_type": "float32", "shape": shape_a})
    c = b.input("b", {"data_type": "float32", "shape": shape_b})
    if compatible:
        assert getattr(b, op)(a, c).shape == np.broadcast_shapes(tuple(shape_a), tuple(shape_b))
    else:
        with pytest.raises(webnn.MLTypeError, match=f"{op}.*broadcastable"):
            getattr(b, op)(a, c)


# ---------------------------------------------------------------- movement / gather calls, valid or not
#: data types the movement fuzzing runs in (pure data movement: exact for every type)
_MOVE_TYPES = ("float32", "float16", "int8", "uint64", "int32")
_U32 = 2**32 - 1


class Invalid(Exception):
    """The oracle's verdict: the call must be refused (MLTypeError)."""


class TooBig(Exception):
    """The oracle's verdict: valid, but the result passes the device's maxBufferSize
    (NotSupportedError)."""


def _fits(shape, dtype, limit):
    """Refuse (TooBig) a result whose buffer (padded to whole words) passes ``limit`` bytes,
    before NumPy would allocate it."""
    if (int(np.prod(shape, dtype=object)) * np.dtype(dtype).itemsize + 3) // 4 * 4 > limit:
        raise TooBig


def _ints(v, n=None, lo=None, hi=None):
    """The oracle's own argument check: a list of ints (not bools) of length n within [lo, hi]."""
    if isinstance(v, (str, bytes)) or not isinstance(v, (list, tuple)):
        raise Invalid
    if n is not None and len(v) != n:
        raise Invalid
    for e in v:
        if isinstance(e, bool) or not isinstance(e, int) or (lo is not None and e < lo) or (hi is not None and e > hi):
            raise Invalid
    return list(v)


def _shape_ok(v):
    s = _ints(v, lo=1, hi=_U32)
    if len(s) > 8:
        raise Invalid
    return s


def _norm(i, dim):
    i = int(i) + dim if i < 0 else int(i)
    return min(max(i, 0), dim - 1)


def _fill(value, dtype):
    """pad's value in the input's type: floats round, integers truncate and saturate."""
    if dtype.kind == "f":
        return dtype.type(value)
    ii = np.iinfo(dtype)
    return dtype.type(min(max(int(value), int(ii.min)), int(ii.max)))


def _axis(ax, r):
    if r == 0 or isinstance(ax, bool) or not isinstance(ax, int) or not 0 <= ax < r:
        raise Invalid
    return ax


def _oracle(op, x, args, extra, limit):
    """What NumPy says the call gives (a list of arrays), or Invalid. Written from the spec,
    independently of webnn_gpu's checks. ``extra``: the other operands ("o" a concat partner,
    "i" indices, "u" updates)."""
    r = x.ndim
    if op == "reshape":
        s = _shape_ok(args["new_shape"])
        if int(np.prod(s, dtype=object)) != x.size:
            raise Invalid
        return [x.reshape(s)]
    if op == "transpose":
        p = args.get("permutation")
        p = list(range(r))[::-1] if p is None else _ints(p, r)
        if sorted(p) != list(range(r)):
            raise Invalid
        return [np.transpose(x, p)]
    if op == "expand":
        s = _shape_ok(args["new_shape"])
        if len(s) < r or any(a not in (1, b) for a, b in zip(x.shape[::-1], s[::-1])):
            raise Invalid
        _fits(s, x.dtype, limit)
        return [np.broadcast_to(x, s)]
    if op == "slice":
        st, sz = _ints(args["starts"], r, lo=0), _ints(args["sizes"], r, lo=1)
        k = [1] * r if args.get("strides") is None else _ints(args["strides"], r, lo=1)
        if any(a + b > d for a, b, d in zip(st, sz, x.shape)):
            raise Invalid
        return [x[tuple(slice(a, a + b, c) for a, b, c in zip(st, sz, k))]]
    if op == "split":
        ax = _axis(args.get("axis", 0), r)
        sp, dim = args["splits"], x.shape[ax]
        if isinstance(sp, int) and not isinstance(sp, bool):
            if sp < 1 or dim % sp:
                raise Invalid
            sizes = [dim // sp] * sp
        else:
            sizes = _ints(sp, lo=1)
            if not sizes or sum(sizes) != dim:
                raise Invalid
        return np.split(x, np.cumsum(sizes)[:-1], axis=ax)
    if op == "tile":
        reps = _ints(args["repetitions"], r, lo=1, hi=_U32)
        out = [d * k for d, k in zip(x.shape, reps)]
        if any(d > _U32 for d in out):
            raise Invalid
        _fits(out, x.dtype, limit)
        return [np.tile(x, reps) if r else x.copy()]
    if op == "reverse":
        axes = args.get("axes")
        axes = list(range(r)) if axes is None else _ints(axes, lo=0, hi=r - 1)
        if len(set(axes)) != len(axes):
            raise Invalid
        return [np.flip(x, axes) if axes else x.copy()]
    if op == "pad":
        if r == 0:
            raise Invalid
        beg, end = _ints(args["beginning_padding"], r, lo=0, hi=_U32), _ints(args["ending_padding"], r, lo=0, hi=_U32)
        mode = args.get("mode", "constant")
        if mode not in ("constant", "edge", "reflection"):
            raise Invalid
        if mode == "reflection" and any(b >= d or e >= d for b, e, d in zip(beg, end, x.shape)):
            raise Invalid
        out = [d + b + e for d, b, e in zip(x.shape, beg, end)]
        if any(d > _U32 for d in out):
            raise Invalid
        _fits(out, x.dtype, limit)
        pw = list(zip(beg, end))
        if mode == "constant":
            return [np.pad(x, pw, mode="constant", constant_values=_fill(args.get("value", 0), x.dtype))]
        return [np.pad(x, pw, mode="edge" if mode == "edge" else "reflect")]
    if op == "concat":
        ax, other = _axis(args["axis"], r), extra["o"]
        if other.ndim != r or any(a != b for d, (a, b) in enumerate(zip(x.shape, other.shape)) if d != ax):
            raise Invalid
        return [np.concatenate([x, other], ax)]
    if op == "gather":
        ax, ind = _axis(args.get("axis", 0), r), extra["i"]
        if r + ind.ndim - 1 > 8:
            raise Invalid
        idx = np.vectorize(lambda i: _norm(i, x.shape[ax]), otypes=[np.int64])(ind)
        return [np.take(x, idx.reshape(ind.shape), axis=ax)]
    if op in ("gather_elements", "scatter_elements"):
        ax, ind = _axis(args.get("axis", 0), r), extra["i"]
        if ind.ndim != r or any(a != b for d, (a, b) in enumerate(zip(x.shape, ind.shape)) if d != ax):
            raise Invalid
        if op == "gather_elements":
            out = np.empty(ind.shape, x.dtype)
            for c in np.ndindex(*ind.shape):
                out[c] = x[c[:ax] + (_norm(ind[c], x.shape[ax]),) + c[ax + 1:]]
            return [out]
        upd = extra["u"]
        if upd.shape != ind.shape:
            raise Invalid
        out = x.copy()
        for c in np.ndindex(*ind.shape):  # row-major: a later update of one element wins
            out[c[:ax] + (_norm(ind[c], x.shape[ax]),) + c[ax + 1:]] = upd[c]
        return [out]
    if op == "triangular":
        if r < 2:
            raise Invalid
        d = args.get("diagonal", 0)
        if isinstance(d, bool) or not isinstance(d, int) or not -(2**31) <= d < 2**31:
            raise Invalid
        up = args.get("upper", True)
        if not isinstance(up, bool):
            raise Invalid
        rows, cols = np.indices(x.shape[-2:])
        keep = (cols - rows >= d) if up else (cols - rows <= d)
        return [np.where(keep, x, np.zeros((), x.dtype))]
    raise AssertionError(op)


def _maybe_bad_ints(n, lo, hi):
    """Lists that are often valid and sometimes not: wrong length, out of range, not ints."""
    good = st.lists(st.integers(lo, hi), min_size=n, max_size=n)
    bad_len = st.lists(st.integers(lo, hi), min_size=max(0, n - 1), max_size=n + 1)
    bad_val = st.lists(st.one_of(st.integers(lo - 2, hi + 2), st.just(True), st.just(1.5), st.just(2**40)),
                       min_size=n, max_size=n)
    return st.one_of(good, good, good, good, good, bad_len, bad_val, st.sampled_from(["0", None, 2]))


def _near(valid):
    """``valid`` (a list), or one small mutation of it: an element +-1, one repeated, one
    dropped, one added. Most mutations are invalid, and only just."""
    v = list(valid)
    out = [v, v, v]
    for i in range(len(v)):
        out += [v[:i] + [v[i] + 1] + v[i + 1:], v[:i] + [v[i] - 1] + v[i + 1:]]
        if i:
            out.append(v[:i] + [v[0]] + v[i + 1:])
    out += [v[:-1], v + [1], v + [0]]
    return st.sampled_from(out)


@st.composite
def _movement_calls(draw):
    rank = draw(st.integers(0, 4))
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank)))
    dt = draw(st.sampled_from(_MOVE_TYPES))
    op = draw(st.sampled_from(["reshape", "transpose", "expand", "slice", "split", "tile", "reverse", "pad",
                               "concat", "gather", "gather_elements", "scatter_elements", "triangular"]))
    extra = {}  # name -> (data type, shape, values or None)
    args = {}
    dims = list(shape)
    if op == "reshape":
        size = int(np.prod(shape, dtype=np.int64))
        good = st.sampled_from([[size], [1, size], [size, 1], []] if size == 1 else [[size], [1, size], [size, 1]])
        args["new_shape"] = draw(st.one_of(good, good, _maybe_bad_ints(draw(st.integers(0, 3)), 0, 6),
                                           good.flatmap(_near)))
    elif op == "transpose":
        perm = draw(st.permutations(list(range(rank))))
        args["permutation"] = draw(st.one_of(st.just(None), _near(perm), _maybe_bad_ints(rank, -1, rank)))
    elif op == "expand":
        lead = draw(st.lists(st.integers(1, 3), max_size=2))
        new = lead + [draw(st.sampled_from([d, d, 3])) if d == 1 else d for d in dims]
        args["new_shape"] = draw(st.one_of(_near(new), _maybe_bad_ints(rank + 1, 0, 4)))
    elif op == "slice":
        starts = [draw(st.integers(0, d - 1)) for d in dims]
        sizes = [draw(st.integers(1, d - s)) for d, s in zip(dims, starts)]
        args["starts"] = draw(st.one_of(st.just(starts), _near(starts), _maybe_bad_ints(rank, -1, 4)))
        args["sizes"] = draw(st.one_of(st.just(sizes), _near(sizes), _maybe_bad_ints(rank, 0, 5)))
        if draw(st.booleans()):
            args["strides"] = draw(st.one_of(_maybe_bad_ints(rank, 1, 3), _maybe_bad_ints(rank, 0, 3)))
    elif op == "split":
        args["axis"] = draw(st.one_of(st.integers(0, max(rank - 1, 0)), st.integers(-1, rank + 1), st.just(True)))
        ax = args["axis"] if isinstance(args["axis"], int) and 0 <= args["axis"] < rank else 0
        dim = dims[ax] if rank else 1
        args["splits"] = draw(st.one_of(st.integers(0, dim + 1), st.sampled_from([[dim], [1, dim - 1], [dim, 1]]),
                                        _near([1] * dim), _maybe_bad_ints(2, 0, dim)))
    elif op == "tile":
        args["repetitions"] = draw(st.one_of(_maybe_bad_ints(rank, 1, 3), _near([1] * rank)))
    elif op == "reverse":
        args["axes"] = draw(st.one_of(st.just(None), st.lists(st.integers(-1, rank), max_size=rank + 1),
                                      st.permutations(list(range(rank))).flatmap(_near)))
    elif op == "pad":
        args["beginning_padding"] = draw(st.one_of(_maybe_bad_ints(rank, 0, 3), _near([d - 1 for d in dims])))
        args["ending_padding"] = draw(st.one_of(_maybe_bad_ints(rank, 0, 3), _near([0] * rank)))
        args["mode"] = draw(st.sampled_from(["constant", "edge", "reflection", "reflection", "reflect"]))
        args["value"] = draw(st.sampled_from([0, 1, -2, 0.5]))
    elif op == "concat":
        args["axis"] = draw(st.one_of(st.integers(0, max(rank - 1, 0)), st.integers(-1, rank)))
        ax = args["axis"] if 0 <= args["axis"] < rank else 0
        oshape = [draw(st.integers(1, 3)) if d == ax else dims[d] for d in range(rank)]
        if draw(st.integers(0, 3)) == 0:  # sometimes a mismatching partner
            oshape = draw(st.lists(st.integers(1, 3), min_size=max(rank - 1, 0), max_size=rank + 1))
        extra["o"] = (dt, tuple(oshape), None)
    elif op == "gather":
        args["axis"] = draw(st.one_of(st.integers(0, max(rank - 1, 0)), st.integers(-1, rank)))
        ax = args["axis"] if 0 <= args["axis"] < rank else 0
        ishape = tuple(draw(st.lists(st.integers(1, 3), max_size=draw(st.sampled_from([2, 6])))))
        extra["i"] = ("int32", ishape, _index_values(draw, ishape, dims[ax] if rank else 1))
    elif op in ("gather_elements", "scatter_elements"):
        args["axis"] = draw(st.one_of(st.integers(0, max(rank - 1, 0)), st.integers(-1, rank)))
        ax = args["axis"] if 0 <= args["axis"] < rank else 0
        ishape = [draw(st.integers(1, 3)) if d == ax else dims[d] for d in range(rank)]
        ishape = tuple(draw(st.one_of(st.just(ishape), st.just(ishape), _near(ishape))))
        if any(d < 1 for d in ishape):
            ishape = tuple(dims)
        extra["i"] = ("int32", ishape, _index_values(draw, ishape, dims[ax] if rank else 1))
        if op == "scatter_elements":
            extra["u"] = (dt, tuple(draw(st.one_of(st.just(list(ishape)), st.just(list(ishape)),
                                                   _near(list(ishape))).filter(lambda u: min(u, default=1) >= 1))),
                          None)
    elif op == "triangular":
        args["upper"] = draw(st.sampled_from([True, False, 1]))
        args["diagonal"] = draw(st.one_of(st.integers(-3, 3), st.just(2**31), st.just(0.5)))
    n_calls = draw(st.integers(1, 3))
    return op, shape, dt, args, extra, n_calls, draw(st.integers(0, 2**16))


def _index_values(draw, shape, dim):
    """Index values in range (negative ones count from the end), sometimes past either end."""
    n = int(np.prod(shape, dtype=np.int64))
    vals = draw(st.lists(st.one_of(st.integers(-dim, dim - 1), st.integers(-dim, dim - 1),
                                   st.sampled_from([-dim - 5, dim, dim + 7])), min_size=n, max_size=n))
    return np.array(vals, np.int32).reshape(shape)


_ARG_NAMES = {"reshape": ["new_shape"], "transpose": ["permutation"], "expand": ["new_shape"],
              "slice": ["starts", "sizes", "strides"], "split": ["splits", "axis"], "tile": ["repetitions"],
              "reverse": ["axes"], "pad": ["beginning_padding", "ending_padding", "mode", "input"],
              "concat": ["axis", "inputs"], "gather": ["axis", "indices", "input"],
              "gather_elements": ["axis", "indices", "input"], "scatter_elements": ["axis", "indices", "updates"],
              "triangular": ["input", "upper", "diagonal"]}


def _random_array(rng, dt, shape):
    npdt = np.dtype(webnn._dtypes.info(dt).numpy)
    if npdt.kind == "f":
        with np.errstate(under="ignore"):
            return rng.standard_normal(shape).astype(npdt)
    ii = np.iinfo(npdt)
    return rng.integers(max(ii.min, -100), min(ii.max, 100), size=shape, endpoint=True).astype(npdt)


def _check_movement_call(ctx, call):
    op, shape, dt, args, extra_desc, n_calls, seed = call
    rng = np.random.default_rng(seed)
    x = _random_array(rng, dt, shape)
    extra = {n: (vals if vals is not None else _random_array(rng, edt, eshape))
             for n, (edt, eshape, vals) in extra_desc.items()}
    b = webnn.MLGraphBuilder(ctx)
    xo = b.input("x", {"data_type": dt, "shape": list(shape)})
    eo = {n: b.input(n, {"data_type": extra_desc[n][0], "shape": list(a.shape)}) for n, a in extra.items()}
    feeds = {"x": x, **extra}
    try:
        expected = _oracle(op, x, args, extra, ctx.limits["max-buffer-size"])
    except (Invalid, TooBig) as verdict:
        expected = verdict
    event(f"{op} {type(expected).__name__ if isinstance(expected, Exception) else 'valid'}")
    outputs = {}
    for k in range(n_calls):  # the same call several times on one builder: errors change nothing
        before = (len(b._nodes), dict(b._inputs))
        try:
            if op == "concat":
                got = b.concat([xo, eo["o"]], args["axis"], label=f"c{k}")
            elif op in ("gather", "gather_elements"):
                got = getattr(b, op)(xo, eo["i"], axis=args["axis"], label=f"g{k}")
            elif op == "scatter_elements":
                got = b.scatter_elements(xo, eo["i"], eo["u"], axis=args["axis"], label=f"s{k}")
            else:
                pos = _POSITIONAL.get(op, [])
                got = getattr(b, op)(xo, *[args[a] for a in pos],
                                     **{a: v for a, v in args.items() if a not in pos}, label=f"k{k}")
        except (webnn.MLTypeError, webnn.NotSupportedError) as exc:
            msg = str(exc)
            want = webnn.MLTypeError if isinstance(expected, Invalid) else webnn.NotSupportedError
            assert isinstance(expected, Exception), f"{op}{args} on {shape}: refused but NumPy accepts it: {msg}"
            assert isinstance(exc, want), f"{op}{args} on {shape}: {type(exc).__name__}, not {want.__name__}: {msg}"
            named = ["maxBufferSize"] if want is webnn.NotSupportedError else _ARG_NAMES[op]
            assert msg.startswith(f"{op} ['") and any(repr(a) in msg or f"{a}[" in msg for a in named), msg
            assert (len(b._nodes), dict(b._inputs)) == before, "a failed call changed the builder"
            continue
        assert not isinstance(expected, Exception), f"{op}{args} on {shape}: accepted but {expected!r} per the spec"
        got = got if isinstance(got, list) else [got]
        assert [g.shape for g in got] == [e.shape for e in expected]
        outputs.update({f"out{k}_{j}": g for j, g in enumerate(got)})
    # the builder is still usable; what was accepted computes what NumPy computes
    outputs["alive"] = b.identity(xo)
    g = b.build(outputs)
    res = ctx.compute(g, {n: feeds[n] for n in g.inputs})
    g.destroy()
    np.testing.assert_array_equal(res["alive"], x)
    for name, val in res.items():
        if name != "alive":
            j = int(name.split("_")[1])
            want = np.ascontiguousarray(expected[j]).reshape(-1).view(np.uint8)
            np.testing.assert_array_equal(val.reshape(-1).view(np.uint8), want, err_msg=f"{op}{args} on {shape} {dt}")


_POSITIONAL = {"reshape": ["new_shape"], "expand": ["new_shape"], "slice": ["starts", "sizes"], "split": ["splits"],
               "tile": ["repetitions"], "pad": ["beginning_padding", "ending_padding"]}


@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(call=_movement_calls())
def test_random_movement_and_gather_calls_match_numpy_or_fail_cleanly(ctx, call):
    _check_movement_call(ctx, call)


# ---------------------------------------------------------------- tensors, writes, reads, dispatch, destroy
_TENSOR_KINDS = [("float32", (4,)), ("int32", (4,)), ("float32", (2, 2))]


@st.composite
def _tensor_programs(draw):
    often = st.sampled_from([True, True, True, False])
    kinds = draw(st.lists(st.tuples(st.sampled_from([0, 0, 0, 1, 2]), often, often), min_size=2, max_size=4))
    n = len(kinds)
    step = st.one_of(
        st.tuples(st.just("write"), st.integers(0, n - 1),
                  st.sampled_from(["ok", "ok", "bytes", "short", "long", "dtype", "released", "list"])),
        st.tuples(st.just("read"), st.integers(0, n - 1), st.just(None)),
        st.tuples(st.just("dispatch"), st.tuples(*[st.integers(0, n - 1)] * 3), st.just(None)),
        st.tuples(st.just("destroy"), st.integers(0, n - 1), st.just(None)),
    )
    return kinds, draw(st.lists(step, min_size=1, max_size=12)), draw(st.integers(0, 2**16))


def _check_tensor_program(ctx, graph, program):
    """Run the steps against a model of the tensors: the right error class for every misuse,
    and no data changed or lost by a failed call."""
    kinds, steps, seed = program
    rng = np.random.default_rng(seed)
    model = []
    for kind, readable, writable in kinds:
        dt, shape = _TENSOR_KINDS[kind]
        t = ctx.create_tensor({"data_type": dt, "shape": list(shape), "readable": readable, "writable": writable})
        model.append({"t": t, "dt": dt, "shape": shape, "r": readable, "w": writable, "dead": False,
                      "value": np.zeros(shape, webnn._dtypes.info(dt).numpy)})
    for what, arg, how in steps:
        if what == "write":
            m = model[arg]
            npdt = webnn._dtypes.info(m["dt"]).numpy
            value = rng.integers(-50, 50, m["shape"]).astype(npdt)
            data = {"ok": value, "bytes": value.tobytes(), "short": value.reshape(-1)[:-1],
                    "long": np.concatenate([value.reshape(-1), value.reshape(-1)[:1]]),
                    "dtype": value.astype(np.float64), "list": value.tolist()}.get(how)
            if how == "released":
                data = memoryview(value.tobytes())
                data.release()
            want = (webnn.InvalidStateError if m["dead"] else webnn.MLTypeError if not m["w"]
                    else None if how in ("ok", "bytes") else webnn.DataError)
            call = lambda m=m, data=data: ctx.write_tensor(m["t"], data)  # noqa: E731
        elif what == "read":
            m = model[arg]
            want = webnn.InvalidStateError if m["dead"] else webnn.MLTypeError if not m["r"] else None
            call = lambda m=m: np.testing.assert_array_equal(ctx.read_tensor(m["t"]), m["value"])  # noqa: E731
        elif what == "dispatch":
            mx, mk, my = (model[i] for i in arg)
            want = None
            for m in (mx, mk, my):  # the order dispatch checks in: inputs x, k, then output y
                if want is None and m["dead"]:
                    want = webnn.InvalidStateError
                elif want is None and (m["dt"], m["shape"]) != ("float32", (4,)):
                    want = webnn.MLTypeError
            if want is None and (my is mx or my is mk):
                want = webnn.MLTypeError
            call = lambda mx=mx, mk=mk, my=my: ctx.dispatch(graph, {"x": mx["t"], "k": mk["t"]},  # noqa: E731
                                                             {"y": my["t"]})
        else:
            m = model[arg]
            want = None
            call = m["t"].destroy
        if want is None:
            call()
            if what == "write":
                m["value"] = value
            elif what == "dispatch":
                my["value"] = mx["value"] * 2 + mk["value"]
            elif what == "destroy":
                m["dead"] = True
        else:
            with pytest.raises(want):
                call()
    for m in model:  # nothing was lost
        if m["r"] and not m["dead"]:
            np.testing.assert_array_equal(ctx.read_tensor(m["t"]), m["value"])
        m["t"].destroy()


_GRAPHS: dict = {}


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(program=_tensor_programs())
def test_random_tensor_misuse_keeps_every_tensor_right(ctx, program):
    graph = _GRAPHS.get(id(ctx))
    if graph is None or graph.destroyed:
        b = webnn.MLGraphBuilder(ctx)
        x = b.input("x", {"data_type": "float32", "shape": [4]})
        k = b.input("k", {"data_type": "float32", "shape": [4]})
        graph = _GRAPHS[id(ctx)] = b.build({"y": b.add(b.mul(x, b.constant("float32", 2.0)), k)})
    _check_tensor_program(ctx, graph, program)


def _soak(prop) -> int:
    """Run a Hypothesis property in fresh batches until SOAK_SECONDS have passed."""
    import time

    batch = settings(max_examples=200, deadline=None, database=None, suppress_health_check=list(HealthCheck))(prop)
    stop = time.monotonic() + SOAK_SECONDS
    batches = 0
    while time.monotonic() < stop:
        batch()  # each call draws fresh random examples
        batches += 1
    return batches


@pytest.mark.soak
def test_soak_random_graphs(ctx):
    @given(program=_programs())
    def prop(program):
        with np.errstate(all="ignore"):
            got, ref = _run_program(ctx, program)
            _assert_float32_close(got, ref)

    assert _soak(prop) >= 1


@pytest.mark.soak
def test_soak_movement_and_gather_calls(ctx):
    @given(call=_movement_calls())
    def prop(call):
        _check_movement_call(ctx, call)

    assert _soak(prop) >= 1


@pytest.mark.soak
def test_soak_tensor_misuse(ctx):
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [4]})
    k = b.input("k", {"data_type": "float32", "shape": [4]})
    graph = b.build({"y": b.add(b.mul(x, b.constant("float32", 2.0)), k)})

    @given(program=_tensor_programs())
    def prop(program):
        _check_tensor_program(ctx, graph, program)

    assert _soak(prop) >= 1
