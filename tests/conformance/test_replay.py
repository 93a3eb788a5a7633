"""GPU-free test of wpt.replay(): both run paths, the descriptor check and the failure messages.

A tiny stand-in engine evaluates a handful of operators with NumPy float64 (the
"engine" under test here is the harness, not webnn-gpu).
"""

from __future__ import annotations

import types

import numpy as np
import pytest

from . import wpt
from .test_wpt import VECTORS


class Operand:
    def __init__(self, data_type, shape, evaluate):
        self.data_type = data_type
        self.shape = list(shape)
        self.evaluate = evaluate  # feeds -> ndarray


class Builder:
    """Evaluates relu, add and split lazily; ``bug`` perturbs results to provoke failures."""

    bug = None

    def __init__(self, ctx):
        self.ctx = ctx

    def input(self, name, desc):
        return Operand(desc["data_type"], desc["shape"], lambda feeds: feeds[name])

    def constant(self, desc, data):
        data = np.array(data)
        return Operand(desc["data_type"], desc["shape"], lambda feeds: data)

    def _unary(self, x, fn):
        def evaluate(feeds):
            a = x.evaluate(feeds)
            return fn(a.astype(np.float64)).astype(a.dtype)

        return Operand(x.data_type, x.shape, evaluate)

    def relu(self, x):
        return self._unary(x, lambda a: np.maximum(a, 0) + (1.0 if self.bug == "relu" else 0.0))

    def add(self, a, b):
        shape = np.broadcast_shapes(tuple(a.shape), tuple(b.shape))

        def evaluate(feeds):
            x, y = a.evaluate(feeds), b.evaluate(feeds)
            return (x.astype(np.float64) + y.astype(np.float64)).astype(x.dtype)

        return Operand(a.data_type, shape, evaluate)

    def split(self, x, splits, axis=0):
        sizes = [x.shape[axis] // splits] * splits if isinstance(splits, int) else list(splits)
        outs, start = [], 0
        for size in sizes:
            shape = list(x.shape)
            shape[axis] = size
            if self.bug == "split-shape":
                shape[axis] += 1

            def evaluate(feeds, start=start, size=size):
                return np.take(x.evaluate(feeds), range(start, start + size), axis=axis)

            outs.append(Operand(x.data_type, shape, evaluate))
            start += size
        return outs

    def build(self, outputs):
        return types.SimpleNamespace(outputs=outputs, destroy=lambda: None)


class Tensor:
    def __init__(self, desc):
        self.desc = desc
        self.value = None
        self.destroyed = False

    def destroy(self):
        self.destroyed = True


class Context:
    def __init__(self):
        self.tensors = []
        self.dispatch_bug = False

    def compute(self, graph, inputs):
        return {n: np.ascontiguousarray(o.evaluate(inputs)) for n, o in graph.outputs.items()}

    def create_tensor(self, desc):
        tensor = Tensor(desc)
        self.tensors.append(tensor)
        return tensor

    def write_tensor(self, tensor, array):
        assert tensor.desc["writable"] and list(array.shape) == tensor.desc["shape"]
        tensor.value = array.copy()

    def dispatch(self, graph, inputs, outputs):
        feeds = {n: t.value for n, t in inputs.items()}
        for name, tensor in outputs.items():
            value = graph.outputs[name].evaluate(feeds)
            tensor.value = value * 2 if self.dispatch_bug else value

    def read_tensor(self, tensor):
        assert tensor.desc["readable"]
        return tensor.value


@pytest.fixture
def engine():
    ctx = Context()
    module = types.SimpleNamespace(MLGraphBuilder=Builder)
    yield ctx, module
    Builder.bug = None


def pick(test_id):
    return next(v for v in VECTORS if v.test_id == test_id)


@pytest.mark.parametrize(
    "test_id",
    [
        "relu/relu float32 4D tensor",
        "relu/relu float16 1D constant tensor",
        "add/add float32 broadcast 1D to 4D",
        "split/split float16 5D tensor array splits=[2, 4] options.axis=0",
    ],
)
def test_reference_engine_passes(engine, test_id):
    ctx, module = engine
    assert wpt.replay(ctx, module, pick(test_id)) == []
    assert ctx.tensors and all(t.destroyed for t in ctx.tensors)


def test_wrong_values_are_reported_for_both_paths(engine):
    ctx, module = engine
    Builder.bug = "relu"
    problems = wpt.replay(ctx, module, pick("relu/relu float32 4D tensor"))
    assert [p.split(":")[0] for p in problems] == ["compute()", "dispatch()"]
    assert "ULP <= 0 from current operatorToleranceDict" in problems[0]
    assert "24 of 24 elements out of tolerance" in problems[0]


def test_dispatch_only_failure(engine):
    ctx, module = engine
    ctx.dispatch_bug = True
    problems = wpt.replay(ctx, module, pick("relu/relu float32 4D tensor"))
    assert len(problems) == 1 and problems[0].startswith("dispatch(): output 'reluOutput'")


def test_wrong_output_descriptor_is_reported(engine):
    ctx, module = engine
    Builder.bug = "split-shape"
    problems = wpt.replay(ctx, module, pick("split/split float16 5D tensor array splits=[2, 4] options.axis=0"))
    assert problems[0] == (
        "builder: output operand 'splitOutput1' is float16 [3, 1, 1, 2, 2], expected float16 [2, 1, 1, 2, 2]"
    )


def test_missing_operator_raises(engine):
    ctx, module = engine
    with pytest.raises(AttributeError, match="conv2d"):
        wpt.replay(ctx, module, next(v for v in VECTORS if v.file_op == "conv2d"))


def test_compute_exception_is_reported_and_tensor_path_still_runs(engine):
    ctx, module = engine

    def broken(graph, inputs):
        raise RuntimeError("device lost")

    ctx.compute = broken
    problems = wpt.replay(ctx, module, pick("relu/relu float32 4D tensor"))
    assert problems == ["compute(): raised RuntimeError: device lost"]
