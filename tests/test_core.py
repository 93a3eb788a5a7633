"""The core API: contexts, tensors, the timeline, builder basics, compute and dispatch."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import wgpu

import webnn_gpu as webnn
from webnn_gpu import _dtypes

ROOT = Path(__file__).resolve().parent.parent

ALL_TYPES = list(_dtypes.DATA_TYPES)


def _sample(data_type: str, shape, rng) -> np.ndarray:
    info = _dtypes.info(data_type)
    if info.is_float:
        return rng.standard_normal(shape).astype(info.numpy)
    ii = np.iinfo(info.numpy)
    return rng.integers(ii.min, ii.max, size=shape, dtype=info.numpy, endpoint=True)


# ---------------------------------------------------------------- contexts
def test_create_context_options():
    ctx = webnn.ml.create_context(power_preference="low-power", accelerated=True)
    assert ctx.adapter_info["backend_type"] in ("Vulkan", "Metal", "D3D12")
    ctx.destroy()
    ctx = webnn.ml.create_context(device_type="gpu")
    ctx.destroy()
    with pytest.raises(webnn.MLTypeError, match="power_preference"):
        webnn.ml.create_context(power_preference="fast")
    with pytest.raises(webnn.MLTypeError, match="device_type"):
        webnn.ml.create_context(device_type="tpu")


def test_context_from_callers_device_shares_device_and_queue():
    adapter = wgpu.gpu.request_adapter_sync()
    device = adapter.request_device_sync()
    ctx = webnn.ml.create_context(device)
    assert ctx.device is device and ctx.queue is device.queue
    t = ctx.create_tensor({"data_type": "float32", "shape": [4], "readable": True, "writable": True})
    assert t.buffer.usage & wgpu.BufferUsage.STORAGE
    ctx.write_tensor(t, np.arange(4, dtype=np.float32))
    np.testing.assert_array_equal(ctx.read_tensor(t), np.arange(4, dtype=np.float32))
    ctx.destroy()
    # The caller's device survives the context.
    device.create_buffer(size=16, usage=wgpu.BufferUsage.STORAGE)


def test_async_twins(ctx):
    async def main():
        c = await webnn.ml.create_context_async()
        b = webnn.MLGraphBuilder(c)
        x = b.input("x", {"data_type": "float32", "shape": [3]})
        g = await b.build_async({"y": b.neg(x)})
        out = await c.compute_async(g, {"x": np.array([1, 2, 3], np.float32)})
        t = c.create_tensor({"data_type": "float32", "shape": [3], "readable": True, "writable": True})
        c.write_tensor(t, np.array([4, 5, 6], np.float32))
        r = await c.read_tensor_async(t)
        c.destroy()
        return out["y"], r

    y, r = asyncio.run(main())
    np.testing.assert_array_equal(y, [-1, -2, -3])
    np.testing.assert_array_equal(r, [4, 5, 6])


# ---------------------------------------------------------------- tensors
@pytest.mark.parametrize("data_type", ALL_TYPES)
@pytest.mark.parametrize("shape", [[], [1], [3], [2, 3, 5]])
def test_tensor_round_trip_is_exact(ctx, rng, data_type, shape):
    data = _sample(data_type, shape, rng)
    t = ctx.create_tensor({"data_type": data_type, "shape": shape, "readable": True, "writable": True})
    assert (t.data_type, t.shape, t.readable, t.writable) == (data_type, tuple(shape), True, True)
    np.testing.assert_array_equal(ctx.read_tensor(t), np.zeros(shape, _dtypes.info(data_type).numpy))
    ctx.write_tensor(t, data)
    got = ctx.read_tensor(t)
    assert got.dtype == data.dtype and got.shape == tuple(shape)
    np.testing.assert_array_equal(got.reshape(-1).view(np.uint8), data.reshape(-1).view(np.uint8))
    out = np.empty(data.size, data.dtype)
    assert ctx.read_tensor(t, out=out) is out
    np.testing.assert_array_equal(out, data.reshape(-1))
    t.destroy()
    t.destroy()  # idempotent


def test_bytes_write_and_constant_tensor(ctx):
    t = ctx.create_tensor({"data_type": "int8", "shape": [5], "readable": True, "writable": True})
    ctx.write_tensor(t, bytes([1, 2, 3, 250, 5]))
    np.testing.assert_array_equal(ctx.read_tensor(t), np.array([1, 2, 3, -6, 5], np.int8))
    c = ctx.create_constant_tensor({"data_type": "float32", "shape": [3]}, np.array([1, 2, 3], np.float32))
    assert c.constant
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [3]})
    g = b.build({"y": b.mul(x, b.constant(c))})
    np.testing.assert_array_equal(ctx.compute(g, {"x": np.full(3, 2, np.float32)})["y"], [2, 4, 6])


def test_tensor_errors(ctx):
    t = ctx.create_tensor({"data_type": "float32", "shape": [4]})
    with pytest.raises(webnn.MLTypeError, match="writable=True"):
        ctx.write_tensor(t, np.zeros(4, np.float32))
    with pytest.raises(webnn.MLTypeError, match="readable=True"):
        ctx.read_tensor(t)
    w = ctx.create_tensor({"data_type": "float32", "shape": [4], "writable": True, "readable": True})
    with pytest.raises(webnn.DataError, match="16 bytes"):
        ctx.write_tensor(w, b"\0" * 12)
    with pytest.raises(webnn.DataError, match="dtype float32"):
        ctx.write_tensor(w, np.zeros(4, np.float64))
    with pytest.raises(webnn.MLTypeError, match="unknown key"):
        ctx.create_tensor({"data_type": "float32", "shape": [4], "readible": True})
    with pytest.raises(webnn.MLTypeError, match="a bool"):
        ctx.create_tensor({"data_type": "float32", "shape": [4], "readable": 1})
    with pytest.raises(webnn.MLTypeError, match="data_type"):
        ctx.create_tensor({"data_type": "bool", "shape": [4]})
    with pytest.raises(webnn.MLTypeError, match="dimensions"):
        ctx.create_tensor({"data_type": "float32", "shape": [0]})
    with pytest.raises(webnn.NotSupportedError, match="maxBufferSize"):
        ctx.create_tensor({"data_type": "float32", "shape": [1 << 30]})
    w.destroy()
    with pytest.raises(webnn.InvalidStateError, match="destroyed"):
        ctx.write_tensor(w, np.zeros(4, np.float32))
    with pytest.raises(webnn.InvalidStateError, match="destroyed"):
        ctx.read_tensor(w)
    # The context is still fine.
    ok = ctx.create_tensor({"data_type": "float32", "shape": [1], "readable": True})
    assert ctx.read_tensor(ok)[0] == 0


# ---------------------------------------------------------------- the timeline
def test_timeline_orders_writes_dispatches_and_reads(ctx):
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [4]})
    g = b.build({"y": b.add(x, b.constant("float32", 1.0))})
    t_in = ctx.create_tensor({"data_type": "float32", "shape": [4], "writable": True})
    t_out = ctx.create_tensor({"data_type": "float32", "shape": [4], "readable": True})
    ctx.write_tensor(t_in, np.full(4, 1, np.float32))
    ctx.dispatch(g, {"x": t_in}, {"y": t_out})
    ctx.write_tensor(t_in, np.full(4, 10, np.float32))  # write after the dispatch read it
    first = ctx.read_tensor(t_out)
    ctx.dispatch(g, {"x": t_in}, {"y": t_out})
    second = ctx.read_tensor(t_out)
    np.testing.assert_array_equal(first, np.full(4, 2))
    np.testing.assert_array_equal(second, np.full(4, 11))


def test_chained_inference_example_values(ctx):
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        from chained_inference import fibonacci
    finally:
        sys.path.pop(0)
    for n, f in [(2, 1), (3, 2), (10, 55), (46, 1836311903)]:
        assert fibonacci(ctx, n) == f


def test_many_writes_without_work_do_not_pile_up(ctx):
    t = ctx.create_tensor({"data_type": "float32", "shape": [1024], "readable": True, "writable": True})
    for i in range(200):
        ctx.write_tensor(t, np.full(1024, i, np.float32))
    assert ctx.read_tensor(t)[0] == 199


# ---------------------------------------------------------------- builder and graphs
def test_a_read_submits_its_copy_and_nothing_else(ctx, monkeypatch):
    """readTensor's map follows its own copy: no second (empty) submission per read, in the
    blocking and the awaitable form, and the value read is the one written."""
    data = np.arange(256, dtype=np.float32)
    t = ctx.create_tensor({"data_type": "float32", "shape": [256], "readable": True, "writable": True})
    ctx.write_tensor(t, data)
    ctx.read_tensor(t)
    queue = ctx._timeline.queue
    submit = type(queue).submit
    counts: list[int] = []

    def counted(self, command_buffers):
        counts.append(len(command_buffers))
        return submit(self, command_buffers)

    monkeypatch.setattr(type(queue), "submit", counted)
    np.testing.assert_array_equal(ctx.read_tensor(t), data)
    np.testing.assert_array_equal(asyncio.run(ctx.read_tensor_async(t)), data)
    assert counts == [1, 1]


def test_operand_attributes_and_build_once(ctx):
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float16", "shape": [2, 1, 3]})
    y = b.input("y", {"data_type": "float16", "shape": [4, 1]})
    z = b.add(x, y)
    assert z.data_type == "float16" and z.shape == (2, 4, 3)
    g = b.build({"z": z})
    assert g.inputs == {"x": {"data_type": "float16", "shape": [2, 1, 3]},
                        "y": {"data_type": "float16", "shape": [4, 1]}}
    with pytest.raises(webnn.InvalidStateError, match="already built"):
        b.build({"z": z})
    with pytest.raises(webnn.InvalidStateError, match="already built"):
        b.relu(x)


def test_builder_errors_name_op_label_argument(ctx):
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [2, 3]})
    with pytest.raises(webnn.MLTypeError, match=r"add \['sum'\].*'a' and 'b'.*\[2, 3\] and \[4\]"):
        b.add(x, b.input("y", {"data_type": "float32", "shape": [4]}), label="sum")
    with pytest.raises(webnn.MLTypeError, match=r"input.*'name'"):
        b.input("x", {"data_type": "float32", "shape": [1]})
    with pytest.raises(webnn.MLTypeError, match="unknown option"):
        b.relu(x, alpha=2)
    other = webnn.MLGraphBuilder(ctx).input("o", {"data_type": "float32", "shape": [2, 3]})
    with pytest.raises(webnn.MLTypeError, match="another builder"):
        b.add(x, other)
    with pytest.raises(webnn.MLTypeError, match="data type of 'a'"):
        b.add(x, b.input("i", {"data_type": "int32", "shape": [2, 3]}))
    with pytest.raises(webnn.MLTypeError, match="non-empty dict"):
        b.build({})
    with pytest.raises(webnn.MLTypeError, match="computed by an operator"):
        b.build({"x": x})
    with pytest.raises(webnn.DataError, match="expected 6 elements"):
        b.constant({"data_type": "float32", "shape": [2, 3]}, np.zeros(5, np.float32))
    # The builder still works after all those errors.
    g = b.build({"y": b.relu(x)})
    assert ctx.compute(g, {"x": -np.ones((2, 3), np.float32)})["y"].sum() == 0


def test_constant_data_is_copied_at_call_time(ctx):
    data = np.array([1, 2, 3], np.float32)
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [3]})
    c = b.constant({"data_type": "float32", "shape": [3]}, data)
    data[:] = 100
    g = b.build({"y": b.add(x, c)})
    np.testing.assert_array_equal(ctx.compute(g, {"x": np.zeros(3, np.float32)})["y"], [1, 2, 3])


def test_dispatch_errors(ctx):
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [4]})
    g = b.build({"y": b.relu(x)})
    t4 = ctx.create_tensor({"data_type": "float32", "shape": [4], "readable": True, "writable": True})
    t5 = ctx.create_tensor({"data_type": "float32", "shape": [5]})
    with pytest.raises(webnn.MLTypeError, match="missing"):
        ctx.dispatch(g, {}, {"y": t4})
    with pytest.raises(webnn.MLTypeError, match="unknown"):
        ctx.dispatch(g, {"x": t4, "z": t4}, {"y": t4})
    with pytest.raises(webnn.MLTypeError, match=r"shape \[4\]"):
        ctx.dispatch(g, {"x": t5}, {"y": t4})
    with pytest.raises(webnn.MLTypeError, match="both input and output"):
        ctx.dispatch(g, {"x": t4}, {"y": t4})
    g.destroy()
    g.destroy()
    with pytest.raises(webnn.InvalidStateError, match="destroyed"):
        ctx.dispatch(g, {"x": t4}, {"y": t5})


def test_graph_destroyed_after_dispatch_still_completes(ctx):
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [4]})
    g = b.build({"y": b.mul(x, b.constant(np.full(4, 3, np.float32)))})
    ti = ctx.create_tensor({"data_type": "float32", "shape": [4], "writable": True})
    to = ctx.create_tensor({"data_type": "float32", "shape": [4], "readable": True})
    ctx.write_tensor(ti, np.arange(4, dtype=np.float32))
    ctx.dispatch(g, {"x": ti}, {"y": to})
    g.destroy()
    np.testing.assert_array_equal(ctx.read_tensor(to), [0, 3, 6, 9])


def test_outputs_that_alias_or_repeat(ctx):
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "int32", "shape": [3]})
    y = b.neg(x)
    g = b.build({"a": y, "b": y, "c": b.abs(y)})
    out = ctx.compute(g, {"x": np.array([1, -2, 3], np.int32)})
    np.testing.assert_array_equal(out["a"], [-1, 2, -3])
    np.testing.assert_array_equal(out["b"], [-1, 2, -3])
    np.testing.assert_array_equal(out["c"], [1, 2, 3])


def test_dead_code_and_memory_reuse(ctx, monkeypatch):
    from webnn_gpu.compiler import Rule, Stage, driver
    from webnn_gpu.compiler.rules.cleanup import dead_code

    monkeypatch.setattr(driver, "ORDER", (Stage("test", (Rule(dead_code, "no fusion: 12 kernels"),)),))
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [1024]})
    unused = b.input("unused", {"data_type": "float32", "shape": [2]})
    b.exp(unused)
    v = x
    for _ in range(6):
        v = b.add(b.mul(v, v), x)
    g = b.build({"y": v})
    assert list(g.inputs) == ["x"]
    assert g.kernel_count == 12
    # 11 intermediates of 4 KiB, but at most two are alive at once.
    assert g._arena_bytes <= 2 * 4096
    data = np.linspace(-1, 1, 1024).astype(np.float32)
    ref = data.astype(np.float64)
    r = ref
    for _ in range(6):
        r = r * r + ref
    np.testing.assert_allclose(ctx.compute(g, {"x": data})["y"], r, rtol=1e-5)


def test_elementwise_chain_fuses_into_one_kernel(ctx):
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [64]})
    k = b.input("k", {"data_type": "int8", "shape": [64]})
    v = x
    for _ in range(3):
        v = b.add(b.mul(v, v), x)
    w = b.cast(b.add(k, k), "float32")  # the int8 intermediate wraps exactly like a stored one
    g = b.build({"y": b.sigmoid(v), "w": w})
    assert g.kernel_count == 2
    data = np.linspace(-1, 1, 64).astype(np.float32)
    kd = (np.arange(-32, 32, dtype=np.int16) * 4).astype(np.int8)
    r = data.astype(np.float64)
    for _ in range(3):
        r = r * r + data
    out = ctx.compute(g, {"x": data, "k": kd})
    np.testing.assert_allclose(out["y"], 1 / (1 + np.exp(-r)), rtol=1e-5)
    np.testing.assert_array_equal(out["w"], (kd.astype(np.int16) * 2).astype(np.int8).astype(np.float32))


def test_large_elementwise_past_65535_workgroups(ctx):
    n = 65535 * 256 + 1000
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [n]})
    g = b.build({"y": b.add(x, b.constant("float32", 1.0))})
    data = np.arange(n, dtype=np.float32)
    y = ctx.compute(g, {"x": data})["y"]
    np.testing.assert_array_equal(y[-1000:], data[-1000:] + 1)
    assert y[0] == 1


def test_op_support_limits(ctx):
    lim = ctx.op_support_limits()
    assert lim["preferred_input_layout"] in ("nchw", "nhwc")
    assert lim["max_tensor_byte_length"] > 0
    assert "float32" in lim["add"]["a"]["data_types"]
    assert lim["logical_and"]["a"]["data_types"] == ["uint8"]
    assert lim["relu"]["input"]["rank_range"]["max"] >= 4


def test_context_destroy_invalidates_everything():
    c = webnn.ml.create_context()
    b = webnn.MLGraphBuilder(c)
    x = b.input("x", {"data_type": "float32", "shape": [2]})
    g = b.build({"y": b.relu(x)})
    t = c.create_tensor({"data_type": "float32", "shape": [2], "readable": True})
    c.destroy()
    c.destroy()
    assert c.lost.done()
    with pytest.raises(webnn.InvalidStateError):
        c.create_tensor({"data_type": "float32", "shape": [2]})
    with pytest.raises(webnn.InvalidStateError):
        c.read_tensor(t)
    with pytest.raises(webnn.InvalidStateError):
        c.compute(g, {"x": np.zeros(2, np.float32)})
    with pytest.raises(webnn.InvalidStateError):
        webnn.MLGraphBuilder(c)


# ---------------------------------------------------------------- examples and CLI
@pytest.mark.parametrize("script", ["quickstart.py", "chained_inference.py"])
def test_examples_run(script):
    r = subprocess.run([sys.executable, str(ROOT / "examples" / script)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr


def test_cli_info():
    r = subprocess.run([sys.executable, "-m", "webnn_gpu", "info", "--ops"], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert "backend:" in r.stdout and "relu" in r.stdout


@pytest.mark.parametrize("variant", ["vec4", "scalar"])
@pytest.mark.parametrize("data_type", ["float32", "float16", "int32", "uint32"])
def test_elementwise_vec4_and_scalar_kernels_agree_with_numpy(ctx, rng, monkeypatch, variant, data_type):
    if variant == "scalar":
        monkeypatch.setenv("WEBNN_GPU_FORCE_ELEMENTWISE", "scalar")
    np_t = _dtypes.info(data_type).numpy
    a = (rng.integers(0, 20, (3, 5, 8)) - (0 if data_type == "uint32" else 10)).astype(np_t)
    bias = rng.integers(0, 5, (8,)).astype(np_t)  # vec4 load along the last dim
    col = rng.integers(0, 5, (5, 1)).astype(np_t)  # broadcast along the last dim: scalar load
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": data_type, "shape": [3, 5, 8]})
    g = b.build({"y": b.mul(b.add(x, b.constant(bias)), b.constant(col)), "m": b.max(x, b.constant(col))})
    out = ctx.compute(g, {"x": a})
    kernels = [s.template for s in g._steps]
    assert all(t.endswith("map4.wgsl" if variant == "vec4" else "map.wgsl") for t in kernels), kernels
    ref = (a.astype(np.float64) + bias) * col
    np.testing.assert_array_equal(out["y"], ref.astype(np_t))
    np.testing.assert_array_equal(out["m"], np.maximum(a, col))


def test_elementwise_past_the_binding_limit_is_split_into_chunks(ctx):
    limit = ctx.limits["max-storage-buffer-binding-size"]
    rows = limit // (4 * 4096) + 1  # one row past the limit
    shape = [rows, 4096]
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": shape})
    col = np.arange(rows, dtype=np.float32).reshape(rows, 1)
    g = b.build({"y": b.add(b.mul(x, b.constant("float32", 2.0)), b.constant(col))})
    assert g.kernel_count >= 2
    data = np.ones(shape, np.float32)
    data[-1, -1] = 5
    y = ctx.compute(g, {"x": data})["y"]
    np.testing.assert_array_equal(y[:, 0], col[:, 0] + 2)
    assert y[-1, -1] == 10 + col[-1, 0] and y[-1, -2] == 2 + col[-1, 0]


def test_a_kernel_that_cannot_split_refuses_at_build(ctx):
    limit = ctx.limits["max-storage-buffer-binding-size"]
    shape = [limit // (4 * 4096) + 1, 4096]
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": shape})
    y = b.transpose(x, label="big")
    with pytest.raises(webnn.NotSupportedError, match=r"transpose \['big'\].*maxStorageBufferBindingSize"):
        b.build({"y": y})
