"""The core items of /work/shared/RELIABILITY.md that no other test file covers.

docs/reliability.md maps every item of the checklist to the test that proves it. Here:
descriptors and constant data, builder state after failed calls, operands of other
builders, dispatch and tensor misuse, destroy semantics, device limits, out-of-memory
paths and the consistency of the builder with ``op_support_limits()``.
"""

from __future__ import annotations

import array
import asyncio
import inspect

import numpy as np
import pytest
import wgpu

import webnn_gpu as webnn
from webnn_gpu import _dtypes, _kernels
from webnn_gpu import _validate as V
from webnn_gpu.errors import DataError, InvalidStateError, MLTypeError, NotSupportedError, OperationError

F32 = {"data_type": "float32", "shape": [4]}


@pytest.fixture(scope="module")
def bare_ctx():
    """A context on a device with no optional features (no shader-f16, no shader-int64)."""
    device = wgpu.gpu.request_adapter_sync().request_device_sync(required_features=[])
    c = webnn.ml.create_context(device)
    assert not c.features
    yield c
    c.destroy()
    device.destroy()


def _state(b) -> tuple:
    """What a failed builder call must not change."""
    return (len(b._nodes), dict(b._inputs), b._built)


def _raises(b, cls, fn, *words):
    """``fn()`` raises ``cls`` whose message has every word, and leaves ``b`` unchanged."""
    before = _state(b) if b is not None else None
    with pytest.raises(cls) as info:
        fn()
    for w in words:
        assert w in str(info.value), f"{w!r} not in {info.value}"
    if b is not None:
        assert _state(b) == before, f"the failed call changed the builder: {info.value}"
    return info.value


def _usable(ctx, b=None):
    """The builder (or a new one) still builds and the context still runs a graph."""
    b = b or webnn.MLGraphBuilder(ctx)
    x = b.input("usable_x", {"data_type": "float32", "shape": [2]})
    g = b.build({"y": b.neg(x)})
    np.testing.assert_array_equal(ctx.compute(g, {"usable_x": np.array([1, -2], np.float32)})["y"], [-1, 2])
    g.destroy()


# ---------------------------------------------------------------- op_support_limits
_ELEMENTWISE_OPERANDS = {"a", "b", "input", "slope", "condition", "true_value", "false_value"}


def _simple_ops(ctx):
    """Operators whose only required arguments are their operands (element-wise ones)."""
    from webnn_gpu.ops._registry import SUPPORT

    out = {}
    for op, s in SUPPORT.items():
        fn = getattr(webnn.MLGraphBuilder, op, None)
        if fn is None:
            continue
        required = [p.name for p in inspect.signature(fn).parameters.values()
                    if p.default is p.empty and p.kind == p.POSITIONAL_OR_KEYWORD][1:]
        if required and required == list(s.operands) and set(required) <= _ELEMENTWISE_OPERANDS:
            out[op] = required
    return out


@pytest.mark.parametrize("which", ["full", "bare"])
def test_builder_accepts_exactly_what_op_support_limits_reports(ctx, bare_ctx, which):
    c = ctx if which == "full" else bare_ctx
    limits = c.op_support_limits()
    ops = _simple_ops(c)
    assert len(ops) > 40, sorted(ops)
    for op, operands in sorted(ops.items()):
        for dt in _dtypes.DATA_TYPES:
            b = webnn.MLGraphBuilder(c)
            if dt not in c.supported_data_types:
                _raises(b, NotSupportedError, lambda: b.input("x", {"data_type": dt, "shape": [2]}),
                        "input", "descriptor.data_type", dt)
                continue
            # where's condition is uint8; every other operand takes the data type under test
            shape = [2] * max(1, *(limits[op][n]["rank_range"]["min"] for n in operands))
            args = [b.input(n, {"data_type": "uint8" if n == "condition" else dt, "shape": shape}) for n in operands]
            allowed = all(
                (("uint8" if n == "condition" else dt) in limits[op][n]["data_types"]) for n in operands)
            if allowed:
                assert getattr(b, op)(*args).shape == tuple(shape)
            elif "shader-int64" not in c.features and dt in _spec_types(op, operands):
                _raises(b, NotSupportedError, lambda: getattr(b, op)(*args), op, "shader-int64")
            else:
                _raises(b, MLTypeError, lambda: getattr(b, op)(*args), op, dt)


def _spec_types(op, operands) -> set:
    """Data types the operator accepts per the spec (before removing what the adapter lacks)."""
    from webnn_gpu.ops._registry import SUPPORT

    s = SUPPORT[op]
    return set.intersection(*(set(s.operands[n]["data_types"]) for n in operands if n != "condition"))


def test_op_support_limits_are_well_formed(ctx, bare_ctx):
    for c in (ctx, bare_ctx):
        limits = c.op_support_limits()
        assert limits["max_tensor_byte_length"] == c.limits["max-storage-buffer-binding-size"]
        for op, entry in limits.items():
            if not isinstance(entry, dict):
                continue
            parts = [entry] if "data_types" in entry else list(entry.values())
            for part in parts:
                assert set(part["data_types"]) <= set(c.supported_data_types), (op, part)
                rr = part["rank_range"]
                assert 0 <= rr["min"] <= rr["max"] <= V.MAX_RANK, (op, rr)
    bare = bare_ctx.op_support_limits()
    assert "float16" not in bare["input"]["data_types"]
    assert "int64" not in bare["add"]["a"]["data_types"] and "int64" in bare["reshape"]["input"]["data_types"]


def test_int64_data_movement_works_without_shader_int64(bare_ctx):
    b = webnn.MLGraphBuilder(bare_ctx)
    x = b.input("x", {"data_type": "int64", "shape": [2, 2]})
    c = b.input("c", {"data_type": "uint8", "shape": [2, 2]})
    _raises(b, NotSupportedError, lambda: b.mul(x, x, label="m"), "mul ['m']", "'a'", "shader-int64")
    f = b.input("f", {"data_type": "float32", "shape": [2]})
    _raises(b, NotSupportedError, lambda: b.cast(f, "int64"), "cast", "'output'", "shader-int64")
    g = b.build({"t": b.transpose(x), "w": b.where(c, x, b.reverse(x))})
    xv = np.array([[2**40, -5], [7, -(2**50)]], np.int64)
    out = bare_ctx.compute(g, {"x": xv, "c": np.array([[1, 0], [0, 1]], np.uint8)})
    np.testing.assert_array_equal(out["t"], xv.T)
    np.testing.assert_array_equal(out["w"], np.where([[1, 0], [0, 1]], xv, xv[::-1, ::-1]))
