"""Hypothesis fuzzing: random valid graphs against NumPy, random invalid calls against our errors.

CI runs a bounded number of examples; ``pytest -m soak`` runs the same properties for longer
(``WEBNN_GPU_SOAK_SECONDS``, default 600, per property).
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
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
    "exp": lambda x: np.exp(np.clip(x, -30, 30)),
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
        np.testing.assert_allclose(got, ref, rtol=2e-5, atol=2e-5)


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


@pytest.mark.soak
def test_soak_random_graphs(ctx):
    import time

    run = settings(max_examples=10**9, deadline=None, suppress_health_check=list(HealthCheck))
    stop = time.monotonic() + SOAK_SECONDS

    @run
    @given(program=_programs())
    def prop(program):
        if time.monotonic() > stop:
            return
        with np.errstate(all="ignore"):
            got, ref = _run_program(ctx, program)
            np.testing.assert_allclose(got, ref, rtol=2e-5, atol=2e-5)

    prop()
