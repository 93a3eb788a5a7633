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
import re
import threading
import time

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
                assert isinstance(getattr(b, op)(*args), webnn.MLOperand)
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
        assert limits["max_tensor_byte_length"] == c.limits["max-buffer-size"]
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


# ---------------------------------------------------------------- constant data
def test_constant_data_wrong_length_both_ways_and_wrong_element_type(ctx):
    b = webnn.MLGraphBuilder(ctx)
    desc = {"data_type": "float32", "shape": [2, 3]}
    for data, words in [
        (np.zeros(5, np.float32), ("expected 6 elements", "got 5")),
        (np.zeros(7, np.float32), ("expected 6 elements", "got 7")),
        (b"\0" * 23, ("expected 24 bytes", "got 23")),
        (bytearray(25), ("expected 24 bytes", "got 25")),
        (np.zeros(6, np.float64), ("dtype float32", "got dtype float64")),
        (np.zeros(6, np.int32), ("dtype float32", "got dtype int32")),
        (np.zeros(6, ">f4"), ("dtype float32",)),  # big-endian: a different element type
        (array.array("i", range(6)), ("float32 elements", "format 'i'")),
        (memoryview(np.zeros(6, np.float64)).cast("B").cast("d"), ("float32 elements", "format 'd'")),
        ([0.0] * 6, ("numpy.ndarray or bytes-like", "got list")),
        ("abcdefghijklmnopqrstuvwx", ("numpy.ndarray or bytes-like", "got str")),
    ]:
        _raises(b, DataError, lambda: b.constant(desc, data, label="w"), "constant ['w']", "'data'", *words)
    _usable(ctx, b)


def test_constant_data_layouts_accepted_copied_or_refused(ctx):
    """ndarrays in any layout are copied in C order; other buffers must be contiguous."""
    base = np.arange(12, dtype=np.float32).reshape(3, 4)
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [2, 3]})
    desc = {"data_type": "float32", "shape": [2, 3]}
    sources = {
        "transposed": (base[:2, :3].T, base[:2, :3].T.reshape(-1)),   # non-contiguous ndarray
        "strided": (base[:, ::2], base[:, ::2].reshape(-1)),
        "fortran": (np.asfortranarray(base[:2, :3]), base[:2, :3].reshape(-1)),
        "bytes": (base[0, :].tobytes() + base[1, :2].tobytes(), base.reshape(-1)[:6]),
        "bytearray": (bytearray(base.reshape(-1)[:6].tobytes()), base.reshape(-1)[:6]),
        "typed_array": (array.array("f", range(6)), np.arange(6, dtype=np.float32)),
        "memoryview_2d": (memoryview(base[:2, :3].copy()), base[:2, :3].reshape(-1)),
    }
    sources = {name: (data, np.array(expected, np.float32)) for name, (data, expected) in sources.items()}
    consts = {name: b.constant(desc, data) for name, (data, _) in sources.items()}
    # the data was copied at the call: changing it afterwards changes nothing
    sources["bytearray"][0][:] = b"\xff" * 24
    base[:] = -1
    _raises(b, DataError, lambda: b.constant(desc, memoryview(np.arange(12, dtype=np.float32))[::2]),
            "constant", "contiguous", "strided")
    _raises(b, DataError, lambda: b.constant({"data_type": "uint8", "shape": [6]}, memoryview(bytes(12))[::2]),
            "constant", "contiguous")
    g = b.build({name: b.add(x, c) for name, c in consts.items()})
    out = ctx.compute(g, {"x": np.zeros((2, 3), np.float32)})
    for name, (_, expected) in sources.items():
        np.testing.assert_array_equal(out[name].reshape(-1), expected, err_msg=name)


def test_released_memoryview_is_a_data_error_everywhere(ctx):
    mv = memoryview(bytearray(16))
    mv.release()
    b = webnn.MLGraphBuilder(ctx)
    _raises(b, DataError, lambda: b.constant(F32, mv), "constant", "'data'", "released (detached)")
    _raises(None, DataError, lambda: ctx.create_constant_tensor(F32, mv), "createConstantTensor", "released")
    t = ctx.create_tensor({**F32, "writable": True, "readable": True})
    ctx.write_tensor(t, np.arange(4, dtype=np.float32))
    _raises(None, DataError, lambda: ctx.write_tensor(t, mv), "writeTensor", "'data'", "released")
    np.testing.assert_array_equal(ctx.read_tensor(t), np.arange(4))  # nothing lost
    t.destroy()


def test_scalar_constants_range_and_overflow(ctx):
    b = webnn.MLGraphBuilder(ctx)
    _raises(b, DataError, lambda: b.constant("int8", 128, label="k"), "constant ['k']", "[-128, 127]", "128")
    _raises(b, DataError, lambda: b.constant("uint32", -1), "constant", "[0, 4294967295]")
    _raises(b, DataError, lambda: b.constant("int64", 2**63), "constant", "int64")
    _raises(b, MLTypeError, lambda: b.constant("int32", 1.5), "constant", "'value'", "an integer")
    _raises(b, MLTypeError, lambda: b.constant("int32", float("nan")), "constant", "'value'")
    _raises(b, MLTypeError, lambda: b.constant("float32", True), "constant", "'value'", "a number")
    _raises(b, MLTypeError, lambda: b.constant("float32", "1"), "constant", "'value'")
    _raises(b, MLTypeError, lambda: b.constant("bool", 1), "constant", "'type'", "float32")
    _raises(b, MLTypeError, lambda: b.constant(np.float32, 1), "constant", "'descriptor'")
    # floats round to nearest; beyond the type's range they become infinities (np.seterr is "raise" here)
    x = b.input("x", {"data_type": "float16", "shape": [1]})
    vals = {"big16": ("float16", 70000.0), "neg16": ("float16", -1e300), "big32": ("float32", 1e40),
            "huge_int": ("float32", 10**400), "u64": ("uint64", 2**64 - 1), "i64": ("int64", -(2**63))}
    outs = {}
    for name, (dt, v) in vals.items():
        c = b.constant(dt, v)
        outs[name] = b.add(c, c) if dt.startswith("float") else b.identity(c)
    outs["x"] = b.neg(x)
    g = b.build(outs)
    got = ctx.compute(g, {"x": np.ones(1, np.float16)})
    assert got["big16"] == np.inf and got["neg16"] == -np.inf and got["big32"] == np.inf
    assert got["huge_int"] == np.inf
    assert got["u64"] == np.uint64(2**64 - 1) and got["i64"] == np.int64(-(2**63))


# ---------------------------------------------------------------- names and build()
def test_input_names_and_failed_input_calls_register_nothing(ctx):
    b = webnn.MLGraphBuilder(ctx)
    b.input("x", F32)
    _raises(b, MLTypeError, lambda: b.input("", F32, label="in"), "input ['in']", "'name'", "non-empty")
    _raises(b, MLTypeError, lambda: b.input(None, F32), "input", "'name'")
    _raises(b, MLTypeError, lambda: b.input("x", F32), "input", "'name'", "not used by another input", "'x'")
    # a name that fails later checks is not taken: it can be used afterwards
    _raises(b, MLTypeError, lambda: b.input("y", {"data_type": "float32", "shape": [0]}), "input", "shape")
    _raises(b, NotSupportedError, lambda: b.input("y", {"data_type": "float32", "shape": [1 << 30]}),
            "input", "maxBufferSize")
    _raises(b, MLTypeError, lambda: b.input("y", F32, lable="typo"), "input", "unknown option", "'lable'")
    y = b.input("y", {"data_type": "int32", "shape": [3]})
    assert y.shape == (3,)


def test_build_outputs_names_and_values(ctx):
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", F32)
    y = b.relu(x)
    other = webnn.MLGraphBuilder(ctx)
    oy = other.relu(other.input("x", F32))
    _raises(b, MLTypeError, lambda: b.build({}), "build", "'outputs'", "non-empty")
    _raises(b, MLTypeError, lambda: b.build([("y", y)]), "build", "'outputs'")
    _raises(b, MLTypeError, lambda: b.build(None), "build", "'outputs'")
    _raises(b, MLTypeError, lambda: b.build({"": y}), "build", "non-empty string names")
    _raises(b, MLTypeError, lambda: b.build({1: y}), "build", "non-empty string names")
    _raises(b, MLTypeError, lambda: b.build({"y": np.zeros(4, np.float32)}), "build", "outputs['y']", "an MLOperand")
    _raises(b, MLTypeError, lambda: b.build({"y": None}), "build", "outputs['y']", "an MLOperand")
    _raises(b, MLTypeError, lambda: b.build({"y": oy}), "build", "outputs['y']", "another builder")
    _raises(b, MLTypeError, lambda: b.build({"y": y, "x": x}), "build", "outputs['x']", "not an input")
    _raises(b, MLTypeError, lambda: b.build({"c": b.constant(np.ones(4, np.float32))}), "build", "constant")
    with pytest.raises(TypeError, match="bogus"):
        b.build({"y": y}, bogus=1)  # Python's own TypeError for a method without options
    # "duplicate output names" cannot happen (the names are keys); one operand under two
    # names, and an output named like an input, are allowed; any Mapping works
    import types

    g = b.build(types.MappingProxyType({"y": y, "y2": y, "x": b.neg(x)}))
    out = ctx.compute(g, {"x": np.array([-1, 2, -3, 4], np.float32)})
    np.testing.assert_array_equal(out["y"], [0, 2, 0, 4])
    np.testing.assert_array_equal(out["y2"], out["y"])
    np.testing.assert_array_equal(out["x"], [1, -2, 3, -4])
    _raises(b, InvalidStateError, lambda: b.build({"y": y}), "build", "already built")
    _raises(b, InvalidStateError, lambda: b.input("z", F32), "input", "already built")
    _raises(b, InvalidStateError, lambda: b.constant("float32", 1.0), "constant", "already built")


# ---------------------------------------------------------------- pending reads
def _busy_tensor(ctx):
    """A readable tensor that ~0.1 s of queued GPU work writes: a read of it stays pending."""
    n = 1 << 22
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [n]})
    v = x
    for _ in range(12):
        v = b.sin(b.exp(b.cos(v)))
    g = b.build({"y": v})
    ti = ctx.create_tensor({"data_type": "float32", "shape": [n], "writable": True})
    to = ctx.create_tensor({"data_type": "float32", "shape": [n], "readable": True})
    ctx.dispatch(g, {"x": ti}, {"y": to})
    return to


def _pending_read_async(ctx, then):
    """Start read_tensor_async of busy work, run ``then(tensor)`` while it is pending, await it."""

    async def main():
        t = _busy_tensor(ctx)
        task = asyncio.ensure_future(ctx.read_tensor_async(t))
        await asyncio.sleep(0)  # the read is posted and waits for its map
        then(t)
        return await asyncio.wait_for(task, 30)

    return asyncio.run(main())


def _pending_in_thread(ctx, call, then):
    """Run ``call(tensor)`` in a thread, ``then(tensor)`` meanwhile; the call's exception."""
    t = _busy_tensor(ctx)
    box = {}

    def worker():
        try:
            box["result"] = call(t)
        except Exception as exc:  # noqa: BLE001 - checked by the test
            box["error"] = exc

    th = threading.Thread(target=worker)
    th.start()
    time.sleep(0.02)
    then(t)
    th.join(30)
    assert not th.is_alive(), "the pending call hangs"
    return box.get("error")


def test_pending_read_rejects_when_the_tensor_is_destroyed(ctx):
    with pytest.raises(InvalidStateError, match="readTensor.*MLTensor (was|has been) destroyed"):
        _pending_read_async(ctx, lambda t: t.destroy())
    err = _pending_in_thread(ctx, lambda t: ctx.read_tensor(t), lambda t: t.destroy())
    # (on a loaded machine the thread may only start reading after the destroy)
    assert isinstance(err, InvalidStateError) and re.search("MLTensor (was|has been) destroyed", str(err)), err
    _usable(ctx)


@pytest.mark.parametrize("mode", ["async", "thread"])
def test_pending_read_rejects_when_the_context_is_destroyed(mode):
    c = webnn.ml.create_context()
    if mode == "async":
        with pytest.raises(InvalidStateError, match="readTensor.*MLContext (was|has been) destroyed"):
            _pending_read_async(c, lambda t: c.destroy())
    else:
        err = _pending_in_thread(c, lambda t: c.read_tensor(t), lambda t: c.destroy())
        assert isinstance(err, InvalidStateError) and re.search("MLContext (was|has been) destroyed", str(err)), err
    _raises(None, InvalidStateError, lambda: c.create_tensor(F32), "createTensor", "destroyed")


@pytest.mark.parametrize("mode", ["async", "thread", "compute"])
def test_pending_work_rejects_when_the_shared_device_is_destroyed(mode):
    device = wgpu.gpu.request_adapter_sync().request_device_sync()
    c = webnn.ml.create_context(device)
    if mode == "async":
        with pytest.raises(InvalidStateError, match="readTensor.*(lost|destroyed)"):
            _pending_read_async(c, lambda t: device.destroy())
    else:
        b = webnn.MLGraphBuilder(c)
        x = b.input("x", {"data_type": "float32", "shape": [1 << 20]})
        v = x
        for _ in range(12):
            v = b.sin(b.exp(b.cos(v)))
        g = b.build({"y": v})
        data = np.zeros(1 << 20, np.float32)
        call = (lambda t: c.read_tensor(t)) if mode == "thread" else (lambda t: c.compute(g, {"x": data}))
        err = _pending_in_thread(c, call, lambda t: device.destroy())
        assert isinstance(err, InvalidStateError) and ("lost" in str(err) or "destroyed" in str(err)), err
    assert c.lost.done() and "lost" in c.lost.result()
    _raises(None, InvalidStateError, lambda: c.create_tensor(F32), "createTensor")


# ---------------------------------------------------------------- constant tensors and destroy
def test_constant_tensor_destroyed_after_build_keeps_the_graph_working(ctx):
    c = ctx.create_constant_tensor({"data_type": "float32", "shape": [3]}, np.array([1, 2, 3], np.float32))
    graphs = []
    for _ in range(2):  # two graphs share the constant's buffer
        b = webnn.MLGraphBuilder(ctx)
        x = b.input("x", {"data_type": "float32", "shape": [3]})
        graphs.append(b.build({"y": b.mul(x, b.constant(c))}))
    c.destroy()
    c.destroy()
    ctx._drain_retired()
    _raises(None, InvalidStateError, lambda: webnn.MLGraphBuilder(ctx).constant(c), "constant", "destroyed")
    for g in graphs:
        np.testing.assert_array_equal(ctx.compute(g, {"x": np.full(3, 2, np.float32)})["y"], [2, 4, 6])
    graphs[0].destroy()
    ti = ctx.create_tensor({"data_type": "float32", "shape": [3], "writable": True})
    to = ctx.create_tensor({"data_type": "float32", "shape": [3], "readable": True})
    ctx.write_tensor(ti, np.ones(3, np.float32))
    ctx.dispatch(graphs[1], {"x": ti}, {"y": to})
    np.testing.assert_array_equal(ctx.read_tensor(to), [1, 2, 3])
    assert not c._retired
    graphs[1].destroy()  # the last user: now the buffer goes
    assert c._retired


def test_constant_tensor_destroyed_before_build(ctx):
    c = ctx.create_constant_tensor({"data_type": "float32", "shape": [3]}, np.ones(3, np.float32))
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [3]})
    y = b.add(x, b.constant(c))
    c.destroy()
    _raises(b, InvalidStateError, lambda: b.build({"y": y}), "build", "destroyed before build")
    g = b.build({"y": b.neg(x)})  # the builder is still usable
    np.testing.assert_array_equal(ctx.compute(g, {"x": np.ones(3, np.float32)})["y"], [-1, -1, -1])


# ---------------------------------------------------------------- dispatch and tensors
@pytest.fixture
def other_ctx():
    c = webnn.ml.create_context()
    yield c
    c.destroy()


def test_dispatch_refuses_every_misuse_and_changes_nothing(ctx, other_ctx):
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [2, 2]})
    k = b.input("k", {"data_type": "float32", "shape": [2, 2]})
    g = b.build({"y": b.add(x, k), "z": b.sub(x, k)})

    def tensor(shape=(2, 2), dt="float32", c=ctx, **flags):
        return c.create_tensor({"data_type": dt, "shape": list(shape), "readable": True, "writable": True, **flags})

    tx, tk, ty, tz = tensor(), tensor(), tensor(), tensor()
    ctx.write_tensor(tx, np.full((2, 2), 3, np.float32))
    ctx.write_tensor(tk, np.full((2, 2), 1, np.float32))
    ctx.write_tensor(ty, np.full((2, 2), 7, np.float32))
    ins, outs = {"x": tx, "k": tk}, {"y": ty, "z": tz}
    const = ctx.create_constant_tensor({"data_type": "float32", "shape": [2, 2]}, np.ones((2, 2), np.float32))
    cases = [
        (lambda: ctx.dispatch(g, {}, {}), "'inputs'", "missing ['k', 'x']"),
        (lambda: ctx.dispatch(g, {"x": tx}, outs), "'inputs'", "missing ['k']"),
        (lambda: ctx.dispatch(g, {"x": tx, "K": tk}, outs), "'inputs'", "missing ['k'], unknown ['K']"),
        (lambda: ctx.dispatch(g, {**ins, "w": tk}, outs), "'inputs'", "unknown ['w']"),
        (lambda: ctx.dispatch(g, ins, {"y": ty}), "'outputs'", "missing ['z']"),
        (lambda: ctx.dispatch(g, ins, {**outs, "x": tx}), "'outputs'", "unknown ['x']"),
        (lambda: ctx.dispatch(g, [tx, tk], outs), "'inputs'", "a dict of name -> MLTensor"),
        (lambda: ctx.dispatch(g, ins, None), "'outputs'", "a dict"),
        (lambda: ctx.dispatch(g, {"x": None, "k": tk}, outs), "inputs['x']", "an MLTensor", "None"),
        (lambda: ctx.dispatch(g, ins, {"y": ty, "z": np.zeros((2, 2), np.float32)}), "outputs['z']", "an MLTensor"),
        (lambda: ctx.dispatch(g, {"x": tensor(dt="int32"), "k": tk}, outs), "inputs['x']",
         "a float32 tensor of shape [2, 2]", "int32"),
        (lambda: ctx.dispatch(g, {"x": tensor((4,)), "k": tk}, outs), "inputs['x']", "shape [2, 2]", "[4]"),
        (lambda: ctx.dispatch(g, {"x": tensor((1, 2, 2)), "k": tk}, outs), "inputs['x']", "[1, 2, 2]"),
        (lambda: ctx.dispatch(g, ins, {"y": tensor((2, 3)), "z": tz}), "outputs['y']", "[2, 3]"),
        (lambda: ctx.dispatch(g, ins, {"y": ty, "z": ty}), "'outputs'", "distinct tensors", "the same tensor twice"),
        (lambda: ctx.dispatch(g, ins, {"y": tx, "z": tz}), "inputs['x']", "both input and output"),
        (lambda: ctx.dispatch(g, ins, {"y": const, "z": tz}), "outputs['y']", "not constant"),
        (lambda: ctx.dispatch(g, {"x": tensor(c=other_ctx), "k": tk}, outs), "inputs['x']", "another context"),
        (lambda: ctx.dispatch("g", ins, outs), "'graph'", "an MLGraph"),
    ]
    for fn, *words in cases:
        _raises(None, MLTypeError, fn, "dispatch", *words)
    other_b = webnn.MLGraphBuilder(other_ctx)
    og = other_b.build({"y": other_b.relu(other_b.input("x", {"data_type": "float32", "shape": [2, 2]}))})
    _raises(None, MLTypeError, lambda: ctx.dispatch(og, {"x": tx}, {"y": ty}), "dispatch", "another context")
    # nothing was written by the failed calls
    np.testing.assert_array_equal(ctx.read_tensor(ty), np.full((2, 2), 7))
    # allowed: a constant tensor as an input, one tensor as two inputs
    ctx.dispatch(g, {"x": const, "k": const}, outs)
    np.testing.assert_array_equal(ctx.read_tensor(ty), np.full((2, 2), 2))
    np.testing.assert_array_equal(ctx.read_tensor(tz), np.zeros((2, 2)))
    ctx.dispatch(g, ins, outs)
    np.testing.assert_array_equal(ctx.read_tensor(ty), np.full((2, 2), 4))
    dead = tensor()
    dead.destroy()
    _raises(None, InvalidStateError, lambda: ctx.dispatch(g, {"x": dead, "k": tk}, outs), "dispatch", "destroyed")
    _raises(None, InvalidStateError, lambda: ctx.dispatch(g, ins, {"y": ty, "z": dead}), "dispatch", "destroyed")
    np.testing.assert_array_equal(ctx.read_tensor(ty), np.full((2, 2), 4))


def test_tensor_calls_after_their_context_is_destroyed():
    c = webnn.ml.create_context()
    t = c.create_tensor({"data_type": "float32", "shape": [2], "readable": True, "writable": True})
    b = webnn.MLGraphBuilder(c)
    x = b.input("x", {"data_type": "float32", "shape": [2]})
    y = b.relu(x)
    g = webnn.MLGraphBuilder(c)
    gx = g.input("x", {"data_type": "float32", "shape": [2]})
    graph = g.build({"y": g.neg(gx)})
    c.destroy()
    for fn, op in [
        (lambda: c.write_tensor(t, np.zeros(2, np.float32)), "writeTensor"),
        (lambda: c.read_tensor(t), "readTensor"),
        (lambda: c.dispatch(graph, {"x": t}, {"y": t}), "dispatch"),
        (lambda: c.compute(graph, {"x": np.zeros(2, np.float32)}), "compute"),
        (lambda: c.create_constant_tensor(F32, np.zeros(4, np.float32)), "createConstantTensor"),
        (lambda: b.relu(y), "relu"),  # an operand whose context is destroyed
        (lambda: b.input("z", F32), "input"),
        (lambda: b.build({"y": y}), "build"),
        (lambda: t.buffer, "buffer"),
    ]:
        _raises(None, InvalidStateError, fn, op, "destroyed")
    t.destroy()  # idempotent, also after the context is gone
    graph.destroy()
    graph.destroy()
    c.destroy()


def test_write_tensor_misuse(ctx, other_ctx):
    t = ctx.create_tensor({"data_type": "int32", "shape": [2, 2], "readable": True, "writable": True})
    ctx.write_tensor(t, np.arange(4, dtype=np.int32))
    ro = ctx.create_tensor({"data_type": "int32", "shape": [4], "readable": True})
    theirs = other_ctx.create_tensor({"data_type": "int32", "shape": [2, 2], "writable": True})
    const = ctx.create_constant_tensor({"data_type": "int32", "shape": [4]}, np.ones(4, np.int32))
    for fn, cls, words in [
        (lambda: ctx.write_tensor(t, np.zeros(3, np.int32)), DataError, ("expected 4 elements",)),
        (lambda: ctx.write_tensor(t, np.zeros(5, np.int32)), DataError, ("got 5",)),
        (lambda: ctx.write_tensor(t, b"\0" * 15), DataError, ("expected 16 bytes", "got 15")),
        (lambda: ctx.write_tensor(t, b"\0" * 17), DataError, ("got 17",)),
        (lambda: ctx.write_tensor(t, np.zeros(4, np.uint32)), DataError, ("dtype int32", "uint32")),
        (lambda: ctx.write_tensor(t, array.array("f", [0] * 4)), DataError, ("format 'f'",)),
        (lambda: ctx.write_tensor(t, memoryview(bytes(32))[::2]), DataError, ("contiguous",)),
        (lambda: ctx.write_tensor(ro, np.zeros(4, np.int32)), MLTypeError, ("writable=True",)),
        (lambda: ctx.write_tensor(const, np.zeros(4, np.int32)), MLTypeError, ("writable=True",)),
        (lambda: ctx.write_tensor(theirs, np.zeros(4, np.int32)), MLTypeError, ("another context",)),
        (lambda: ctx.write_tensor(None, np.zeros(4, np.int32)), MLTypeError, ("an MLTensor",)),
        (lambda: ctx.read_tensor(theirs), MLTypeError, ("another context",)),
        (lambda: ctx.read_tensor(t, out=np.zeros(4, np.float32)), DataError, ("'out'",)),
        (lambda: ctx.read_tensor(t, out=np.zeros((4, 2), np.int32)[:, 0]), DataError, ("C-contiguous",)),
    ]:
        _raises(None, cls, fn, *words)
    np.testing.assert_array_equal(ctx.read_tensor(t), np.arange(4).reshape(2, 2))  # no data lost
    # a non-contiguous ndarray of the right dtype is copied, like for constants
    ctx.write_tensor(t, np.arange(8, dtype=np.int32).reshape(2, 4)[:, ::2])
    np.testing.assert_array_equal(ctx.read_tensor(t), [[0, 2], [4, 6]])


def test_work_queued_before_destroy_completes(ctx):
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [1024]})
    g = b.build({"y": b.mul(b.add(x, x), b.constant(np.full(1024, 3, np.float32)))})
    data = np.arange(1024, dtype=np.float32)
    ti = ctx.create_tensor({"data_type": "float32", "shape": [1024], "writable": True})
    to = ctx.create_tensor({"data_type": "float32", "shape": [1024], "readable": True})
    ctx.write_tensor(ti, data)
    ctx.dispatch(g, {"x": ti}, {"y": to})
    ti.destroy()  # the input of queued work
    g.destroy()  # the graph of queued work
    ctx._drain_retired()
    np.testing.assert_array_equal(ctx.read_tensor(to), data * 6)
    _raises(None, InvalidStateError, lambda: ctx.compute(g, {"x": data}), "compute", "MLGraph has been destroyed")
    _raises(None, InvalidStateError, lambda: ctx.write_tensor(ti, data), "writeTensor", "destroyed")


# ---------------------------------------------------------------- sizes, device limits, out of memory
def test_sizes_past_max_buffer_size_are_refused_up_front(ctx):
    limit = ctx.limits["max-buffer-size"]
    assert ctx.op_support_limits()["max_tensor_byte_length"] == limit
    b = webnn.MLGraphBuilder(ctx)
    big = [2**32 - 1] * 8  # 2**256 elements: Python ints do not overflow, the check sees it all
    for shape in (big, [limit // 4 + 1], [limit // 2, 2], [65536, 65536]):
        desc = {"data_type": "float32", "shape": shape}
        for fn, op in [(lambda: b.input("x", desc), "input"),
                       (lambda: b.constant(desc, b""), "constant"),
                       (lambda: ctx.create_tensor(desc), "createTensor"),
                       (lambda: ctx.create_constant_tensor(desc, b""), "createConstantTensor")]:
            e = _raises(b, NotSupportedError, fn, op, "maxBufferSize", str(limit))
            assert "bytes" in str(e)
    # the largest buffer that fits passes (no allocation here: input() only describes); one
    # byte more does not, as buffers are padded to whole 4-byte words (maxBufferSize need not be)
    edge = limit // 4 * 4
    assert b.input("edge", {"data_type": "int8", "shape": [edge]}).shape == (edge,)
    _raises(b, NotSupportedError, lambda: b.input("edge1", {"data_type": "int8", "shape": [edge + 1]}), "input",
            f"a tensor of {edge + 1} bytes ({edge + 4} padded to whole words)", "maxBufferSize")
    # results past the limit: broadcasting, expand, tile, pad, concat, gather
    x = b.input("x", {"data_type": "float32", "shape": [1 << 15, 1]})
    y = b.input("y", {"data_type": "float32", "shape": [1, 1 << 15]})
    _raises(b, NotSupportedError, lambda: b.add(x, y, label="outer"), "add ['outer']", "'output'", "maxBufferSize")
    _raises(b, NotSupportedError, lambda: b.expand(x, [1 << 15, 1 << 15]), "expand", "maxBufferSize")
    _raises(b, NotSupportedError, lambda: b.tile(x, [1, 1 << 15]), "tile", "maxBufferSize")
    _raises(b, NotSupportedError, lambda: b.pad(x, [0, 0], [0, 1 << 15]), "pad", "maxBufferSize")
    _raises(b, NotSupportedError, lambda: b.concat([x] * (limit // (4 << 15) + 1), 1), "concat", "maxBufferSize")
    idx = b.input("i", {"data_type": "int32", "shape": [1 << 15]})
    _raises(b, NotSupportedError, lambda: b.gather(x, idx, axis=1), "gather", "maxBufferSize")
    _usable(ctx, b)


def test_bindings_past_the_binding_limit_split_or_refuse_at_build(ctx, rng, monkeypatch):
    """Tensors may be as large as maxBufferSize; a kernel binding more than
    maxStorageBufferBindingSize at once splits its work (element-wise) or refuses at build."""
    monkeypatch.setitem(ctx._limits, "max-storage-buffer-binding-size", 1 << 16)  # 16384 float32
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [200, 200]})  # 160,000 bytes
    t = b.transpose(x, label="big")
    _raises(b, NotSupportedError, lambda: b.build({"t": t}), "transpose ['big']", "maxStorageBufferBindingSize")
    g = b.build({"y": b.add(b.mul(x, x), x)})
    assert g.kernel_count == 3  # 40,000 elements in chunks of 16,384
    data = rng.standard_normal((200, 200)).astype(np.float32)
    np.testing.assert_allclose(ctx.compute(g, {"x": data})["y"], data.astype(np.float64) ** 2 + data, rtol=1e-6,
                               atol=1e-6)


def test_rank_above_the_maximum_every_rank(ctx):
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [1] * V.MAX_RANK})
    for rank in range(V.MAX_RANK + 1, 2 * V.MAX_RANK + 2):
        shape = [1] * rank
        desc = {"data_type": "float32", "shape": shape}
        for fn, op, arg in [
            (lambda: b.input(f"r{rank}", desc), "input", "descriptor.shape"),
            (lambda: b.constant(desc, np.zeros(1, np.float32)), "constant", "descriptor.shape"),
            (lambda: ctx.create_tensor(desc), "createTensor", "descriptor.shape"),
            (lambda: b.reshape(x, shape), "reshape", "new_shape"),
            (lambda: b.expand(x, shape), "expand", "new_shape"),
        ]:
            _raises(b, MLTypeError, fn, op, arg, f"rank <= {V.MAX_RANK}")
    _raises(b, MLTypeError, lambda: b.constant(np.zeros([1] * 9, np.float32)), "constant", "rank <= 8")
    for extra in range(1, 4):  # gather's output rank is input rank + indices rank - 1
        idx = b.input(f"i{extra}", {"data_type": "int32", "shape": [1] * (extra + 1)})
        _raises(b, MLTypeError, lambda: b.gather(x, idx), "gather", "output rank <= 8")


def test_ranks_below_the_per_op_minimum_every_rank(ctx):
    limits = ctx.op_support_limits()
    b = webnn.MLGraphBuilder(ctx)
    i32 = b.input("i", {"data_type": "int32", "shape": [1]})
    calls = {  # op -> call with an input of the rank under test
        "pad": lambda x: b.pad(x, [0] * x.rank, [0] * x.rank),
        "triangular": lambda x: b.triangular(x),
        "concat": lambda x: b.concat([x, x], 0),
        "split": lambda x: b.split(x, 1),
        "gather": lambda x: b.gather(x, i32),
        "gather_elements": lambda x: b.gather_elements(x, i32),
        "gather_nd": lambda x: b.gather_nd(x, i32),
        "scatter_elements": lambda x: b.scatter_elements(x, i32, i32),
        "scatter_nd": lambda x: b.scatter_nd(x, i32, x),
    }
    for op, call in calls.items():
        low = limits[op]["input" if "input" in limits[op] else "inputs"]["rank_range"]["min"]
        assert low >= 1, op
        for rank in range(low):
            x = b.input(f"{op}{rank}", {"data_type": "float32", "shape": [1] * rank})
            _raises(b, MLTypeError, lambda: call(x), op, "rank" if op != "concat" else "axis")


def test_compute_reads_outputs_past_max_buffer_size_through_several_staging_buffers(ctx, monkeypatch):
    monkeypatch.setitem(ctx._limits, "max-buffer-size", 64)
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [8]})  # 32 bytes per output
    g = b.build({"a": b.neg(x), "b": b.abs(x), "c": b.relu(x), "d": b.cast(x, "int8")})
    data = np.array([-3, -2, -1, 0, 1, 2, 3, 4], np.float32)
    out = ctx.compute(g, {"x": data})
    assert len(g._compute_io.staging) == 2 and max(g._compute_io.totals) <= 64
    np.testing.assert_array_equal(out["a"], -data)
    np.testing.assert_array_equal(out["b"], np.abs(data))
    np.testing.assert_array_equal(out["c"], np.maximum(data, 0))
    np.testing.assert_array_equal(out["d"], data.astype(np.int8))


def test_allocation_failures_name_the_bytes_and_leave_the_context_usable(monkeypatch):
    """Out of memory is simulated by allocations past maxBufferSize that our up-front check
    is told to let through: wgpu refuses them without touching host memory."""
    c = webnn.ml.create_context()
    max_buffer = c.limits["max-buffer-size"]
    monkeypatch.setattr(c, "_max_tensor_bytes", 1 << 40)
    monkeypatch.setitem(c._limits, "max-storage-buffer-binding-size", 1 << 40)
    n = max_buffer // 4 + 1
    e = _raises(None, OperationError, lambda: c.create_tensor({"data_type": "float32", "shape": [n]}, label="big"),
                "createTensor", f"allocating {(n * 4 + 3) // 4 * 4} bytes", "float32 tensor")
    assert not isinstance(e, InvalidStateError)
    b = webnn.MLGraphBuilder(c)
    x = b.input("x", {"data_type": "float32", "shape": [1]})
    huge = b.relu(b.expand(x, [n]), label="wide")  # an intermediate past maxBufferSize
    y = b.neg(b.slice(huge, [0], [4]))
    _raises(b, OperationError, lambda: b.build({"y": y}), "build", f"allocating {n * 4} bytes",
            "intermediate values", "expand")
    # nothing is left broken: the builder and the context still work
    _usable(c, b)
    t = c.create_tensor({"data_type": "float32", "shape": [4], "readable": True, "writable": True})
    c.write_tensor(t, np.arange(4, dtype=np.float32))
    np.testing.assert_array_equal(c.read_tensor(t), np.arange(4))
    c.destroy()


def test_workgroups_fold_into_two_dimensions_and_never_truncate():
    for lim in (1, 2, 3, 7, 65535):
        limits = {"max-compute-workgroups-per-dimension": lim}
        ns = set(range(1, min(lim * lim, 200) + 1)) | {lim * lim, lim * lim - 1, lim + 1, max(1, lim * lim // 3)}
        for n in sorted(x for x in ns if 1 <= x <= lim * lim):
            x, y, z = _kernels.workgroups(n, limits)
            assert z == 1 and 1 <= x <= lim and 1 <= y <= lim, (lim, n, (x, y))
            assert n <= x * y < n + y, (lim, n, (x, y))  # covers every group, wastes < one row
        with pytest.raises(NotSupportedError, match=r"relu \['r'\].*maxComputeWorkgroupsPerDimension"):
            _kernels.workgroups(lim * lim + 1, limits, "relu ['r']")
    assert _kernels.workgroups(0, {}) == (1, 1, 1)


def test_kernels_run_folded_grids_and_refuse_past_the_limit(ctx, rng, monkeypatch):
    """With maxComputeWorkgroupsPerDimension lowered to 3, small tensors take the 2-D path
    that only huge ones reach on a real device: results must still be exact."""
    monkeypatch.setitem(ctx._limits, "max-compute-workgroups-per-dimension", 3)
    n = 5 * 256 + 17  # 6 workgroups of 256 -> a (3, 2) grid
    a = rng.standard_normal(n).astype(np.float32)
    v4 = rng.standard_normal((n - 17) * 4 // 4).astype(np.float32).reshape(-1, 4)  # vec4 kernel
    idx = rng.integers(-n, n, n).astype(np.int32)
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [n]})
    w = b.input("w", {"data_type": "float32", "shape": list(v4.shape)})
    i = b.input("i", {"data_type": "int32", "shape": [n]})
    g = b.build({"relu": b.relu(x), "add4": b.add(w, w), "rev": b.reverse(x),
                 "gather": b.gather(x, i), "t": b.transpose(w)})
    assert any(s.groups[1] > 1 for s in g._steps if hasattr(s, "groups"))
    out = ctx.compute(g, {"x": a, "w": v4, "i": idx})
    np.testing.assert_array_equal(out["relu"], np.maximum(a, 0))
    np.testing.assert_array_equal(out["add4"], v4 + v4)
    np.testing.assert_array_equal(out["rev"], a[::-1])
    np.testing.assert_array_equal(out["gather"], a[np.where(idx < 0, idx + n, idx)])
    np.testing.assert_array_equal(out["t"], v4.T)
    b2 = webnn.MLGraphBuilder(ctx)
    x2 = b2.input("x", {"data_type": "float32", "shape": [9 * 256 + 1]})  # 10 groups > 3 * 3
    y2 = b2.sigmoid(x2, label="act")
    _raises(b2, NotSupportedError, lambda: b2.build({"y": y2}),
            "sigmoid ['act']", "maxComputeWorkgroupsPerDimension")


def test_storage_buffers_per_stage_are_respected(ctx, rng, monkeypatch):
    monkeypatch.setitem(ctx._limits, "max-storage-buffers-per-shader-stage", 4)
    k = 12
    xs = [rng.standard_normal((3, 4)).astype(np.float32) for _ in range(k)]
    b = webnn.MLGraphBuilder(ctx)
    ins = [b.input(f"x{j}", {"data_type": "float32", "shape": [3, 4]}) for j in range(k)]
    total = ins[0]
    for op in ins[1:]:
        total = b.add(total, b.mul(op, op))  # one long fusible chain with 12 distinct inputs
    g = b.build({"sum": total, "cat": b.concat(ins, 1)})
    assert all(len(s.values) <= 4 for s in g._steps if hasattr(s, "values"))
    out = ctx.compute(g, {f"x{j}": xs[j] for j in range(k)})
    ref = xs[0].astype(np.float64) + sum(x.astype(np.float64) ** 2 for x in xs[1:])
    np.testing.assert_allclose(out["sum"], ref, rtol=1e-5)
    np.testing.assert_array_equal(out["cat"], np.concatenate(xs, 1))
    # a kernel that cannot be split refuses clearly instead of failing in wgpu
    monkeypatch.setitem(ctx._limits, "max-storage-buffers-per-shader-stage", 3)
    b = webnn.MLGraphBuilder(ctx)
    c = b.input("c", {"data_type": "uint8", "shape": [4]})
    t = b.input("t", {"data_type": "float32", "shape": [4]})
    u = b.input("u", {"data_type": "float32", "shape": [4]})
    y = b.where(c, t, u, label="sel")  # three inputs and the output: no fusion makes it fewer
    _raises(b, NotSupportedError, lambda: b.build({"y": y}), "where ['sel']", "binds 4 storage buffers",
            "maxStorageBuffersPerShaderStage (3)")


# ---------------------------------------------------------------- operands in every slot, unknown options
def _op_module(name: str) -> str:
    return getattr(getattr(webnn.MLGraphBuilder, name), "__module__", "")


NCHW = (1, 2, 4, 4)

#: op -> call(b, get); get(slot, data_type="float32", shape=(2, 2)) gives the operand for a slot
_CALLS = {
    "cast": lambda b, get: b.cast(get("input"), "int32"),
    "clamp": lambda b, get: b.clamp(get("input"), min_value=0),
    "concat": lambda b, get: b.concat([get("inputs[0]"), get("inputs[1]")], 0),
    "expand": lambda b, get: b.expand(get("input"), [3, 2, 2]),
    "gather": lambda b, get: b.gather(get("input"), get("indices", "int32", (2,))),
    "gather_elements": lambda b, get: b.gather_elements(get("input"), get("indices", "int32")),
    "gather_nd": lambda b, get: b.gather_nd(get("input"), get("indices", "int32", (1, 2))),
    "pad": lambda b, get: b.pad(get("input"), [1, 0], [0, 1]),
    "prelu": lambda b, get: b.prelu(get("a"), get("b")),  # the spec names them input and slope
    "reshape": lambda b, get: b.reshape(get("input"), [4]),
    "reverse": lambda b, get: b.reverse(get("input")),
    "scatter_elements": lambda b, get: b.scatter_elements(get("input"), get("indices", "int32"), get("updates")),
    "scatter_nd": lambda b, get: b.scatter_nd(get("input"), get("indices", "int32", (1, 2)),
                                               get("updates", "float32", (1,))),
    "slice": lambda b, get: b.slice(get("input"), [0, 1], [2, 1]),
    "split": lambda b, get: b.split(get("input"), 2),
    "tile": lambda b, get: b.tile(get("input"), [1, 2]),
    "transpose": lambda b, get: b.transpose(get("input")),
    "triangular": lambda b, get: b.triangular(get("input")),
    "where": lambda b, get: b.where(get("condition", "uint8"), get("true_value"), get("false_value")),
    # operators with operands in option slots (bias, scale, c, states, ...)
    "conv2d": lambda b, get: b.conv2d(get("input", "float32", NCHW), get("filter", "float32", (3, 2, 3, 3)),
                                      padding=[1, 1, 1, 1], bias=get("bias", "float32", (3,))),
    "conv_transpose2d": lambda b, get: b.conv_transpose2d(get("input", "float32", NCHW),
                                                          get("filter", "float32", (2, 3, 3, 3)),
                                                          bias=get("bias", "float32", (3,))),
    "average_pool2d": lambda b, get: b.average_pool2d(get("input", "float32", NCHW), window_dimensions=[2, 2]),
    "l2_pool2d": lambda b, get: b.l2_pool2d(get("input", "float32", NCHW), window_dimensions=[2, 2]),
    "max_pool2d": lambda b, get: b.max_pool2d(get("input", "float32", NCHW), window_dimensions=[2, 2]),
    "resample2d": lambda b, get: b.resample2d(get("input", "float32", NCHW), scales=[2.0, 2.0]),
    "batch_normalization": lambda b, get: b.batch_normalization(
        get("input", "float32", NCHW), get("mean", "float32", (2,)), get("variance", "float32", (2,)),
        scale=get("scale", "float32", (2,)), bias=get("bias", "float32", (2,))),
    "instance_normalization": lambda b, get: b.instance_normalization(
        get("input", "float32", NCHW), scale=get("scale", "float32", (2,)), bias=get("bias", "float32", (2,))),
    "layer_normalization": lambda b, get: b.layer_normalization(
        get("input", "float32", (2, 3)), scale=get("scale", "float32", (3,)), bias=get("bias", "float32", (3,))),
    "softmax": lambda b, get: b.softmax(get("input"), 1),
    "quantize_linear": lambda b, get: b.quantize_linear(get("input"), get("scale"), get("zero_point", "uint8")),
    "dequantize_linear": lambda b, get: b.dequantize_linear(get("input", "uint8"), get("scale"),
                                                            get("zero_point", "uint8")),
    "gemm": lambda b, get: b.gemm(get("a", "float32", (2, 3)), get("b", "float32", (3, 4)),
                                  c=get("c", "float32", (4,))),
    "matmul": lambda b, get: b.matmul(get("a", "float32", (2, 3)), get("b", "float32", (3, 4))),
    "gru": lambda b, get: b.gru(
        get("input", "float32", (1, 2, 3)), get("weight", "float32", (1, 12, 3)),
        get("recurrent_weight", "float32", (1, 12, 4)), 1, 4, bias=get("bias", "float32", (1, 12)),
        recurrent_bias=get("recurrent_bias", "float32", (1, 12)),
        initial_hidden_state=get("initial_hidden_state", "float32", (1, 2, 4))),
    "gru_cell": lambda b, get: b.gru_cell(
        get("input", "float32", (2, 3)), get("weight", "float32", (12, 3)),
        get("recurrent_weight", "float32", (12, 4)), get("hidden_state", "float32", (2, 4)), 4,
        bias=get("bias", "float32", (12,)), recurrent_bias=get("recurrent_bias", "float32", (12,))),
    "lstm": lambda b, get: b.lstm(
        get("input", "float32", (1, 2, 3)), get("weight", "float32", (1, 16, 3)),
        get("recurrent_weight", "float32", (1, 16, 4)), 1, 4, bias=get("bias", "float32", (1, 16)),
        recurrent_bias=get("recurrent_bias", "float32", (1, 16)),
        peephole_weight=get("peephole_weight", "float32", (1, 12)),
        initial_hidden_state=get("initial_hidden_state", "float32", (1, 2, 4)),
        initial_cell_state=get("initial_cell_state", "float32", (1, 2, 4))),
    "lstm_cell": lambda b, get: b.lstm_cell(
        get("input", "float32", (2, 3)), get("weight", "float32", (16, 3)),
        get("recurrent_weight", "float32", (16, 4)), get("hidden_state", "float32", (2, 4)),
        get("cell_state", "float32", (2, 4)), 4, bias=get("bias", "float32", (16,)),
        recurrent_bias=get("recurrent_bias", "float32", (16,)),
        peephole_weight=get("peephole_weight", "float32", (12,))),
    "arg_max": lambda b, get: b.arg_max(get("input"), 0),
    "arg_min": lambda b, get: b.arg_min(get("input"), 0),
    "cumulative_sum": lambda b, get: b.cumulative_sum(get("input"), 0),
}


def _all_calls(ctx):
    calls = dict(_CALLS)
    types = {"logical_and": "uint8", "logical_or": "uint8", "logical_xor": "uint8", "logical_not": "uint8"}
    for op, names in _simple_ops(ctx).items():
        if op not in calls:
            dt = types.get(op, "float32")
            calls[op] = lambda b, get, op=op, names=names, dt=dt: getattr(b, op)(*(get(n, dt) for n in names))
    return calls


def test_every_operator_is_covered_by_the_slot_table(ctx):
    """Every operator method must have a valid call in ``_CALLS`` (or be element-wise with
    operands only), so the slot, built-builder and unknown-keyword tests reach all of them."""
    ops = {n for n in dir(webnn.MLGraphBuilder) if not n.startswith("_") and _op_module(n).startswith("webnn_gpu.ops.")}
    assert len(ops) > 90
    assert ops - set(_all_calls(ctx)) == set()


def _slots(ctx, call) -> dict:
    """slot -> (data_type, shape) that a valid ``call`` asks for, in call order."""
    b = webnn.MLGraphBuilder(ctx)
    slots = {}

    def record(slot, dt="float32", shape=(2, 2)):
        slots[slot] = (dt, tuple(shape))
        return b.input(f"s{len(slots)}", {"data_type": dt, "shape": list(shape)})

    call(b, record)  # the call is valid with operands of this builder
    return slots


def test_an_operand_of_another_builder_is_refused_in_every_slot(ctx):
    calls = {op: (call, _slots(ctx, call)) for op, call in sorted(_all_calls(ctx).items())}
    kinds = sorted({t for _, slots in calls.values() for t in slots.values()})
    other = webnn.MLGraphBuilder(ctx)  # a live builder
    built = webnn.MLGraphBuilder(ctx)  # one that has built its graph
    foreign = {(src, t): s.input(f"f{src}{k}", {"data_type": t[0], "shape": list(t[1])})
               for src, s in (("other", other), ("built", built)) for k, t in enumerate(kinds)}
    built.build({"y": built.relu(foreign[("built", ("float32", (2, 2)))])})
    checked = 0
    for op, (call, slots) in calls.items():
        for bad in slots:
            for src in ("other", "built"):
                b = webnn.MLGraphBuilder(ctx)
                ops = {slot: foreign[(src, t)] if slot == bad else
                       b.input(slot, {"data_type": t[0], "shape": list(t[1])}) for slot, t in slots.items()}
                _raises(b, MLTypeError, lambda: call(b, lambda slot, *_: ops[slot]), op, bad, "another builder")
                checked += 1
    assert checked > 100


def _builder_with_every_operand(ctx):
    """A builder, an operand source ``get(slot, dt, shape)`` of its inputs, and every operator
    call (``_all_calls``), each called once so that every operand exists before the test."""
    b = webnn.MLGraphBuilder(ctx)
    pool = {}

    def get(slot, dt="float32", shape=(2, 2)):
        key = (dt, tuple(shape))
        if key not in pool:
            pool[key] = b.input(f"p{len(pool)}", {"data_type": dt, "shape": list(shape)})
        return pool[key]

    calls = _all_calls(ctx)
    for call in calls.values():
        call(b, get)
    return b, get, calls


def test_a_built_builder_refuses_every_operator(ctx):
    b, get, calls = _builder_with_every_operand(ctx)
    b.build({"y": b.relu(get("x"))})
    for op, call in sorted(calls.items()):
        _raises(b, InvalidStateError, lambda: call(b, get), op, "already built")


def test_unknown_keyword_arguments_are_refused_everywhere(ctx):
    b, get, calls = _builder_with_every_operand(ctx)
    for op, call in sorted(calls.items()):
        real = getattr(webnn.MLGraphBuilder, op)

        def with_bogus(*args, real=real, **kwargs):
            return real(b, *args, bogus_option=1, **kwargs)

        class Wrapped:
            def __getattr__(self, name, op=op, with_bogus=with_bogus):
                return with_bogus if name == op else getattr(b, name)

        _raises(b, MLTypeError, lambda: call(Wrapped(), get), op, "unknown option", "'bogus_option'")
    _raises(b, MLTypeError, lambda: b.input("z", F32, bogus=1), "input", "unknown option")
    _raises(b, MLTypeError, lambda: b.constant("float32", 1.0, bogus=1), "constant", "unknown option")
    _raises(None, MLTypeError, lambda: ctx.create_tensor(F32, bogus=1), "createTensor", "unknown option")
    _raises(None, MLTypeError, lambda: ctx.create_constant_tensor(F32, bytes(16), bogus=1), "createConstantTensor",
            "unknown option")
    t = ctx.create_tensor({**F32, "readable": True, "writable": True})
    g = b.build({"y": b.relu(get("x"))})
    for fn in (lambda: ctx.write_tensor(t, bytes(16), bogus=1), lambda: ctx.read_tensor(t, bogus=1),
               lambda: ctx.dispatch(g, {}, {}, bogus=1), lambda: ctx.compute(g, {}, bogus=1),
               lambda: webnn.ml.create_context(bogus=1), lambda: webnn.MLGraphBuilder(ctx, bogus=1),
               lambda: b.build({}, bogus=1)):
        with pytest.raises(TypeError, match="bogus"):  # Python's own TypeError names the keyword
            fn()
    # unknown descriptor keys, everywhere a descriptor is taken
    b = webnn.MLGraphBuilder(ctx)
    for fn, op in [(lambda: b.input("d", {**F32, "dimensions": [4]}), "input"),
                   (lambda: b.constant({**F32, "dataType": "float32"}, bytes(16)), "constant"),
                   (lambda: ctx.create_tensor({**F32, "exportable": True}), "createTensor"),
                   (lambda: ctx.create_constant_tensor({**F32, "readable": True}, bytes(16)), "createConstantTensor")]:
        _raises(None, MLTypeError, fn, op, "unknown key")


# ---------------------------------------------------------------- descriptors
def test_descriptor_data_types_shapes_and_flags(ctx):
    b = webnn.MLGraphBuilder(ctx)
    valid = ", ".join(_dtypes.DATA_TYPES)
    places = [(lambda d: b.input("x", d), "input"), (lambda d: b.constant(d, bytes(8)), "constant"),
              (lambda d: ctx.create_tensor(d), "createTensor"),
              (lambda d: ctx.create_constant_tensor(d, bytes(8)), "createConstantTensor")]
    for bad in (np.float32, np.dtype("float32"), "bool", "Float32", "float64", "", None, 1):
        for fn, op in places:
            _raises(b, MLTypeError, lambda: fn({"data_type": bad, "shape": [2]}), op, "descriptor.data_type", valid)
    for bad in ([0], [2, 0], [-1], [2.0], [2.5], [True], [np.bool_(True)], [2**32], [np.uint64(2**32)],
                [1, 2**40], "ab", 2, None, [[2]], [None]):
        for fn, op in places:
            _raises(b, MLTypeError, lambda: fn({"data_type": "float32", "shape": bad}), op, "shape")
    for bad in (["float32", [2]], ("float32", [2]), "float32", None):
        for fn, op in places:
            if not (op == "constant" and bad == "float32"):  # that is constant(type, value)
                _raises(b, MLTypeError, lambda: fn(bad), op, "'descriptor'")
    # accepted: tuples, NumPy integers, a NumPy array as the shape, the largest dimension
    for shape in ((2,), [np.int64(2)], np.array([2]), [np.uint8(2)]):
        assert b.input(f"ok{len(b._inputs)}", {"data_type": "float32", "shape": shape}).shape == (2,)
    # the largest dimension is a valid dimension: what refuses it here is the size
    _raises(b, NotSupportedError, lambda: b.input("wide", {"data_type": "uint8", "shape": [2**32 - 1]}), "input",
            "maxBufferSize")
    for flag in ("readable", "writable", "importable_to_webgpu", "exportable_to_gpu"):
        for bad in (1, 0, "yes", None, 1.0):
            _raises(None, MLTypeError, lambda: ctx.create_tensor({**F32, flag: bad}), "createTensor",
                    f"descriptor.{flag}", "a bool")
        assert ctx.create_tensor({**F32, flag: np.bool_(True)}).data_type == "float32"
    _usable(ctx, b)


def test_compute_misuse(ctx):
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [2, 2]})
    g = b.build({"y": b.neg(x)})
    good = np.arange(4, dtype=np.float32).reshape(2, 2)
    ro = np.zeros(4, np.float32)
    ro.flags.writeable = False
    for fn, cls, words in [
        (lambda: ctx.compute(g, {}), MLTypeError, ("'inputs'", "missing ['x']")),
        (lambda: ctx.compute(g, {"x": good, "z": good}), MLTypeError, ("unknown ['z']",)),
        (lambda: ctx.compute(g, [good]), MLTypeError, ("'inputs'",)),
        (lambda: ctx.compute(g, {"x": good[:1]}), DataError, ("inputs['x']", "expected 4 elements")),
        (lambda: ctx.compute(g, {"x": good.astype(np.float64)}), DataError, ("dtype float32",)),
        (lambda: ctx.compute(g, {"x": "abcd"}), DataError, ("inputs['x']",)),
        (lambda: ctx.compute(g, {"x": good}, {"z": good}), MLTypeError, ("'outputs'",)),
        (lambda: ctx.compute(g, {"x": good}, {"y": np.zeros(4, np.float64)}), DataError, ("outputs['y']",)),
        (lambda: ctx.compute(g, {"x": good}, {"y": np.zeros(5, np.float32)}), DataError, ("outputs['y']",)),
        (lambda: ctx.compute(g, {"x": good}, {"y": np.zeros((2, 4), np.float32)[:, ::2]}), DataError,
         ("C-contiguous: False",)),
        (lambda: ctx.compute(g, {"x": good}, {"y": ro}), DataError, ("writable: False",)),
    ]:
        _raises(None, cls, fn, "compute", *words)
    out = np.empty(4, np.float32)  # any shape with the element count
    assert ctx.compute(g, {"x": good}, {"y": out})["y"] is out
    np.testing.assert_array_equal(out, -good.reshape(-1))
    # Python numbers and lists are taken only when exactly representable
    np.testing.assert_array_equal(ctx.compute(g, {"x": [[1, 2], [3, 4]]})["y"], [[-1, -2], [-3, -4]])
    _raises(None, DataError, lambda: ctx.compute(g, {"x": [[1, 2], [3, 2**40 + 1]]}), "compute", "inputs['x']")


def test_mismatched_data_types_between_operands(ctx):
    pairs = 0
    for op, names in sorted(_simple_ops(ctx).items()):
        data = [n for n in names if n != "condition"]
        if len(data) < 2:
            continue
        dt = "uint8" if op.startswith("logical") else "float32"
        other = "int8" if dt == "uint8" else "float16"
        for bad in data[1:]:
            b = webnn.MLGraphBuilder(ctx)
            args = [b.input(n, {"data_type": other if n == bad else "uint8" if n == "condition" else dt,
                                "shape": [2]}) for n in names]
            _raises(b, MLTypeError, lambda: getattr(b, op)(*args, label="m"), f"{op} ['m']", repr(bad), dt, other)
            pairs += 1
    assert pairs >= 15


@pytest.mark.parametrize("limit", ["max-compute-invocations-per-workgroup", "max-compute-workgroup-size-x"])
def test_workgroup_size_past_the_device_limit_is_refused(ctx, monkeypatch, limit):
    monkeypatch.setitem(ctx._limits, limit, 128)
    b = webnn.MLGraphBuilder(ctx)
    y = b.relu(b.input("x", {"data_type": "float32", "shape": [1000]}), label="r")
    name = {"max-compute-invocations-per-workgroup": "maxComputeInvocationsPerWorkgroup",
            "max-compute-workgroup-size-x": "maxComputeWorkgroupSizeX"}[limit]
    _raises(b, NotSupportedError, lambda: b.build({"y": y}), "relu ['r']", "256 invocations", f"{name} (128)")


@pytest.mark.parametrize("victim", ["graph", "tensor"])
def test_destroy_from_another_thread_while_dispatching(ctx, victim):
    """Calls racing a destroy() see either success or InvalidStateError, nothing else."""
    for _ in range(5):
        b = webnn.MLGraphBuilder(ctx)
        x = b.input("x", {"data_type": "float32", "shape": [256]})
        g = b.build({"y": b.add(x, b.constant(np.ones(256, np.float32)))})
        ti = ctx.create_tensor({"data_type": "float32", "shape": [256], "writable": True})
        to = ctx.create_tensor({"data_type": "float32", "shape": [256], "readable": True})
        ctx.write_tensor(ti, np.arange(256, dtype=np.float32))
        errors, done = [], threading.Event()

        def worker():
            data = np.zeros(256, np.float32)
            while not done.is_set():
                for call in (lambda: ctx.dispatch(g, {"x": ti}, {"y": to}), lambda: ctx.write_tensor(ti, data),
                             lambda: ctx.compute(g, {"x": data})):
                    try:
                        call()
                    except InvalidStateError:
                        pass
                    except Exception as exc:  # noqa: BLE001 - the failure under test
                        errors.append(exc)

        th = threading.Thread(target=worker)
        th.start()
        time.sleep(0.01)
        (g if victim == "graph" else ti).destroy()
        time.sleep(0.01)
        done.set()
        th.join(30)
        assert not th.is_alive() and not errors, errors
        to.destroy()
        g.destroy()
    _usable(ctx)


def test_workgroup_memory_past_the_device_limit_is_refused(ctx, monkeypatch):
    from webnn_gpu._lower import workgroup_storage_bytes

    assert workgroup_storage_bytes("var<workgroup> a: array<f32, 256>;\nvar<workgroup> b: array<vec2<u32>, 8>;") \
        == 256 * 4 + 8 * 8
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [4, 1 << 16]})
    y = b.reduce_sum(x, axes=[1], label="sum")
    g = b.build({"y": y})  # within the real limit
    shared = max(workgroup_storage_bytes(s.wgsl) for s in g._steps if hasattr(s, "wgsl"))
    assert 0 < shared <= ctx.limits["max-compute-workgroup-storage-size"]
    monkeypatch.setitem(ctx._limits, "max-compute-workgroup-storage-size", shared - 1)
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [4, 1 << 16]})
    y = b.reduce_sum(x, axes=[1], label="sum")
    _raises(b, NotSupportedError, lambda: b.build({"y": y}), "reduce_sum ['sum']",
            f"{shared} bytes of workgroup memory",
            f"maxComputeWorkgroupStorageSize ({shared - 1})")
