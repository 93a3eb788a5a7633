"""Renting tensors to WebGPU: ordering, held work, the cross-device slow path, errors.

References are NumPy float64 of the same arithmetic (exact here: small integers in f32).
"""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
import wgpu
from _user_gpu import AFFINE_INPLACE_WGSL, AFFINE_WGSL, IO, f32_tensor, read_f32, run_user_pass, user_pass

import webnn_gpu as webnn
from webnn_gpu import interop
from webnn_gpu.interop import RentedBuffer

N = 64


def graph_ref(x):
    """The scale_graph fixture's function, in float64."""
    return np.asarray(x, np.float64) * 3.0 - 1.0


def data(k: float = 0.0) -> np.ndarray:
    return (np.arange(N) + k).astype(np.float32)


# ---------------------------------------------------------------- same device
def hold(t):
    """Rent ``t`` to its own context's device with the explainer's rule (WebNN work is held)."""
    return interop.import_external_buffer(t.context.device, t)


def test_same_device_is_zero_copy_and_a_gpubuffer(ctx):
    t = f32_tensor(ctx, importable_to_webgpu=True)
    with ctx.export_to_gpu(t) as r:
        assert isinstance(r, RentedBuffer) and isinstance(r, wgpu.GPUBuffer) and not r.copied
        assert r.mode == "export" and r.tensor is t
        assert r._internal == t.buffer._internal  # the tensor's own native buffer: no copy
        assert r.usage == IO and r.size == t.byte_length == 4 * N
        assert t._rental is r
        # usable as is in the caller's bind groups and copies
        out = ctx.device.create_buffer(size=4 * N, usage=IO)
        run_user_pass(ctx.device, AFFINE_WGSL, [r, out], N, scale=1.0, offset=0.0)
        enc = ctx.device.create_command_encoder()
        enc.copy_buffer_to_buffer(r, 0, out, 0, 4 * N)
        ctx.device.queue.submit([enc.finish()])
    assert r.returned and t._rental is None
    # The explainer's spelling, on the context's device, is the same memory.
    with interop.import_external_buffer(ctx.device, t) as r2:
        assert r2.mode == "import" and r2._internal == t.buffer._internal
    t.destroy()


def test_destroy_returns_the_rental_and_keeps_the_data(ctx):
    t = f32_tensor(ctx, readable=True, writable=True, importable_to_webgpu=True)
    ctx.write_tensor(t, data())
    buf = ctx.export_to_gpu(t)
    run_user_pass(ctx.device, AFFINE_INPLACE_WGSL, [buf], N, scale=2.0, offset=1.0)
    buf.destroy()  # the spec's way to return it: the tensor's memory survives
    buf.destroy()  # idempotent
    np.testing.assert_array_equal(ctx.read_tensor(t), data() * 2 + 1)
    del buf  # dropping the object releases only its own reference
    import gc

    gc.collect()
    ctx.write_tensor(t, data(3))
    np.testing.assert_array_equal(ctx.read_tensor(t), data(3))
    t.destroy()


def test_exported_tensor_refuses_webnn_use_naming_the_rental(ctx, scale_graph):
    """webnn #942: while exported, WebNN reads, writes and dispatches that use it fail; other
    tensors are unaffected, and nothing is held."""
    x = f32_tensor(ctx, writable=True, readable=True, importable_to_webgpu=True)
    y = f32_tensor(ctx, readable=True)
    ctx.write_tensor(x, data())
    with ctx.export_to_gpu(x) as buf:
        for call in (lambda: ctx.dispatch(scale_graph, {"x": x}, {"y": y}),
                     lambda: ctx.write_tensor(x, data(9)),
                     lambda: ctx.read_tensor(x),
                     lambda: asyncio.run(ctx.read_tensor_async(x))):
            with pytest.raises(webnn.InvalidStateError, match=r"exported to WebGPU \(<RentedBuffer of"):
                call()
        assert ctx._timeline.held_count == 0
        with pytest.raises(webnn.InvalidStateError, match="rented to WebGPU"):
            x.destroy()
        run_user_pass(ctx.device, AFFINE_INPLACE_WGSL, [buf], N, scale=1.0, offset=4.0)
    ctx.dispatch(scale_graph, {"x": x}, {"y": y})
    np.testing.assert_array_equal(ctx.read_tensor(y), graph_ref(data() + 4))
    x.destroy()
    y.destroy()


def test_usage_flags(ctx):
    """webnn #954: exact usage flags, default STORAGE | COPY_SRC | COPY_DST, validated."""
    U = wgpu.BufferUsage
    t = f32_tensor(ctx, importable_to_webgpu=True)
    with ctx.export_to_gpu(t, U.STORAGE | U.INDIRECT) as buf:
        assert buf.usage == U.STORAGE | U.INDIRECT
    with interop.import_external_buffer(ctx.device, t, usage=U.UNIFORM | U.COPY_SRC) as buf:
        assert buf.usage == U.UNIFORM | U.COPY_SRC
    for bad in (0, -1, True, 1.0, "STORAGE", 1 << 20):
        with pytest.raises(webnn.MLTypeError, match="argument 'usage'"):
            ctx.export_to_gpu(t, bad)
    with pytest.raises(webnn.NotSupportedError, match="MAP_READ"):
        ctx.export_to_gpu(t, U.MAP_READ | U.COPY_DST)
    assert t._rental is None  # nothing changed
    # a wrapped buffer of the caller has only its own flags
    own = ctx.device.create_buffer(size=4 * N, usage=IO)
    w = ctx.tensor_from_buffer(own, {"data_type": "float32", "shape": [N], "importable_to_webgpu": True})
    with pytest.raises(webnn.MLTypeError, match="flags the tensor's buffer has"):
        ctx.export_to_gpu(w, U.STORAGE | U.UNIFORM)
    ctx.export_to_gpu(w).destroy()
    w.destroy()
    t.destroy()


def test_exportable_to_gpu_alias(ctx):
    t = ctx.create_tensor({"data_type": "float32", "shape": [4], "exportable_to_gpu": True})
    assert t.importable_to_webgpu and t.exportable_to_gpu
    ctx.export_to_gpu(t).destroy()
    t.destroy()


def test_rent_orders_after_webnn_work_and_caller_sees_results(ctx, scale_graph):
    """The caller's shader sees what WebNN wrote before the rental (no CPU wait needed)."""
    x = f32_tensor(ctx, writable=True)
    y = f32_tensor(ctx, importable_to_webgpu=True)
    ctx.write_tensor(x, data())
    ctx.dispatch(scale_graph, {"x": x}, {"y": y})
    out = ctx.device.create_buffer(size=4 * N, usage=IO)
    with ctx.export_to_gpu(y) as r:
        run_user_pass(ctx.device, AFFINE_WGSL, [r, out], N, scale=2.0, offset=0.5)
    np.testing.assert_array_equal(read_f32(ctx.device, out, N), graph_ref(data()) * 2.0 + 0.5)
    x.destroy()
    y.destroy()


def test_held_work_runs_after_release_and_sees_callers_writes(ctx, scale_graph):
    x = f32_tensor(ctx, writable=True, readable=True, importable_to_webgpu=True)
    y = f32_tensor(ctx, readable=True)
    z = f32_tensor(ctx, readable=True)
    other_in = f32_tensor(ctx, writable=True)
    other_out = f32_tensor(ctx, readable=True)
    ctx.write_tensor(x, data())
    r = hold(x)
    try:
        # WebNN work touching the rented tensor is held, not dropped and not run early.
        ctx.dispatch(scale_graph, {"x": x}, {"y": y})
        ctx.write_tensor(x, data(1000))  # held behind the dispatch (per-tensor order)
        ctx.dispatch(scale_graph, {"x": x}, {"y": z})  # sees the write above
        assert ctx._timeline.held_count == 3
        # Work on other tensors runs at once, even while the rental is out.
        ctx.write_tensor(other_in, data(5))
        ctx.dispatch(scale_graph, {"x": other_in}, {"y": other_out})
        np.testing.assert_array_equal(ctx.read_tensor(other_out), graph_ref(data(5)))
        # y depends on held work: reading it would wait for ever, so it raises.
        with pytest.raises(webnn.InvalidStateError, match="held"):
            ctx.read_tensor(y)
        # The caller's own shader changes the rented tensor in place: x = x * 2 + 7.
        run_user_pass(ctx.device, AFFINE_INPLACE_WGSL, [r], N, scale=2.0, offset=7.0)
    finally:
        r.destroy()
    assert ctx._timeline.held_count == 0
    np.testing.assert_array_equal(ctx.read_tensor(y), graph_ref(data() * 2 + 7))  # saw the caller's write
    np.testing.assert_array_equal(ctx.read_tensor(x), data(1000))  # the held write ran after
    np.testing.assert_array_equal(ctx.read_tensor(z), graph_ref(data(1000)))  # and in order
    for t in (x, y, z, other_in, other_out):
        t.destroy()


def test_hold_follows_dependencies_between_tensors(ctx, scale_graph):
    """A later call on a tensor that held work touches is held too, though not rented itself."""
    a = f32_tensor(ctx, writable=True, importable_to_webgpu=True)
    b = f32_tensor(ctx, readable=True)
    c = f32_tensor(ctx, readable=True)
    ctx.write_tensor(a, data())
    with hold(a) as r:
        ctx.dispatch(scale_graph, {"x": a}, {"y": b})  # held: a is rented
        ctx.dispatch(scale_graph, {"x": b}, {"y": c})  # held: b is written by held work
        assert ctx._timeline.held_count == 2
        assert ctx._timeline.has_held_work(b) and ctx._timeline.has_held_work(c)
        with pytest.raises(webnn.InvalidStateError, match="held"):
            ctx.read_tensor(c)
        run_user_pass(ctx.device, AFFINE_INPLACE_WGSL, [r], N, scale=1.0, offset=1.0)
    np.testing.assert_array_equal(ctx.read_tensor(c), graph_ref(graph_ref(data() + 1)))
    for t in (a, b, c):
        t.destroy()


def test_two_rentals_release_in_any_order(ctx, scale_graph):
    a = f32_tensor(ctx, writable=True, importable_to_webgpu=True)
    b = f32_tensor(ctx, readable=True, importable_to_webgpu=True)
    ctx.write_tensor(a, data())
    ra = hold(a)
    rb = hold(b)
    ctx.dispatch(scale_graph, {"x": a}, {"y": b})  # needs both
    run_user_pass(ctx.device, AFFINE_INPLACE_WGSL, [rb], N, scale=0.0, offset=-5.0)
    ra.destroy()
    assert ctx._timeline.held_count == 1  # b is still rented
    rb.destroy()
    np.testing.assert_array_equal(ctx.read_tensor(b), graph_ref(data()))  # WebNN's write came last
    a.destroy()
    b.destroy()


def test_read_of_rented_tensor_raises_not_hangs(ctx):
    t = f32_tensor(ctx, writable=True, readable=True, importable_to_webgpu=True)
    ctx.write_tensor(t, data())
    with hold(t):
        with pytest.raises(webnn.InvalidStateError, match="rented to WebGPU"):
            ctx.read_tensor(t)
        with pytest.raises(webnn.InvalidStateError, match="rented to WebGPU"):
            asyncio.run(ctx.read_tensor_async(t))
    np.testing.assert_array_equal(ctx.read_tensor(t), data())
    t.destroy()


def test_graph_and_tensors_destroyed_while_work_is_held(fresh_ctx):
    ctx = fresh_ctx
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [N]})
    g = b.build({"y": b.add(x, x)})
    a = f32_tensor(ctx, writable=True, importable_to_webgpu=True)
    tmp = f32_tensor(ctx)
    out = f32_tensor(ctx, readable=True)
    ctx.write_tensor(a, data())
    with hold(a):
        ctx.dispatch(g, {"x": a}, {"y": tmp})
        ctx.dispatch(g, {"x": tmp}, {"y": out})
        g.destroy()  # the held dispatches were recorded already
        tmp.destroy()  # its buffer lives until the held work has run
    np.testing.assert_array_equal(ctx.read_tensor(out), data() * 4)
    ctx._drain_retired()


def test_context_destroyed_with_a_live_rental(fresh_ctx):
    t = f32_tensor(fresh_ctx, importable_to_webgpu=True)
    r = fresh_ctx.export_to_gpu(t)
    fresh_ctx.destroy()
    r.destroy()  # no error: the context and its held work are gone
    assert r.returned
    with pytest.raises(webnn.InvalidStateError):
        fresh_ctx.export_to_gpu(t)


def test_export_async(ctx, device2):
    t = f32_tensor(ctx, writable=True, readable=True, importable_to_webgpu=True)
    ctx.write_tensor(t, data())

    async def main():
        r1 = await ctx.export_to_gpu_async(t)
        r1.destroy()
        r2 = await interop.import_external_buffer_async(device2, t)
        got = read_f32(device2, r2, N)
        r2.destroy()
        return got

    np.testing.assert_array_equal(asyncio.run(main()), data())
    t.destroy()


# ---------------------------------------------------------------- another device
def test_cross_device_copies_and_gives_the_same_numbers(ctx, device2, scale_graph):
    """Slow path: copy to the caller's device and back; results equal the zero-copy path's."""
    results = {}
    for name, dev in (("same", ctx.device), ("other", device2)):
        x = f32_tensor(ctx, writable=True, importable_to_webgpu=True)
        y = f32_tensor(ctx, readable=True, importable_to_webgpu=True)
        ctx.write_tensor(x, data())
        ctx.dispatch(scale_graph, {"x": x}, {"y": y})
        with interop.import_external_buffer(dev, y) as r:
            assert r.copied == (name == "other")
            assert r._device is dev and r.usage == IO
            # Renting waited for WebNN's dispatch: the copy holds its result.
            np.testing.assert_array_equal(read_f32(dev, r, N), graph_ref(data()))
            ctx.dispatch(scale_graph, {"x": x}, {"y": y})  # held until the copy is back
            enc = dev.create_command_encoder()
            user_pass(dev, enc, AFFINE_INPLACE_WGSL, [r], N, scale=-1.0, offset=2.0)
            dev.queue.submit([enc.finish()])
        results[name] = ctx.read_tensor(y)
        # The held dispatch ran after the caller's bytes were copied back; read the
        # caller's value through a fresh rental to check the copy back itself.
        ctx.write_tensor(x, data())
        with interop.import_external_buffer(dev, x) as r:
            run_user_pass(dev, AFFINE_INPLACE_WGSL, [r], N, scale=-1.0, offset=2.0)
        ctx.dispatch(scale_graph, {"x": x}, {"y": y})
        results[name + "-back"] = ctx.read_tensor(y)
        x.destroy()
        y.destroy()
    np.testing.assert_array_equal(results["same"], results["other"])
    np.testing.assert_array_equal(results["other"], graph_ref(data()))
    np.testing.assert_array_equal(results["same-back"], results["other-back"])
    np.testing.assert_array_equal(results["other-back"], graph_ref(-data() + 2.0))


def test_export_to_another_device_refuses_webnn_use_until_returned(ctx, device2, scale_graph):
    x = f32_tensor(ctx, writable=True, readable=True, importable_to_webgpu=True)
    y = f32_tensor(ctx, readable=True)
    ctx.write_tensor(x, data())
    with ctx.export_to_gpu(x, device=device2) as buf:
        assert buf.copied and buf._device is device2 and buf.mode == "export"
        with pytest.raises(webnn.InvalidStateError, match="exported to WebGPU"):
            ctx.dispatch(scale_graph, {"x": x}, {"y": y})
        run_user_pass(device2, AFFINE_INPLACE_WGSL, [buf], N, scale=1.0, offset=10.0)
    ctx.dispatch(scale_graph, {"x": x}, {"y": y})
    np.testing.assert_array_equal(ctx.read_tensor(y), graph_ref(data() + 10))
    x.destroy()
    y.destroy()


def test_cross_device_release_waits_for_the_callers_submitted_work(ctx, device2):
    """The copy back is fenced by a mapped read on the caller's device (not
    on_submitted_work_done, which raises TypeError in wgpu-py 0.32)."""
    t = ctx.create_tensor({"data_type": "float32", "shape": [1 << 16], "readable": True,
                           "importable_to_webgpu": True})
    n = 1 << 16
    with interop.import_external_buffer(device2, t) as r:
        for _ in range(8):  # several submits in a row, none waited for
            run_user_pass(device2, AFFINE_INPLACE_WGSL, [r], n, scale=1.0, offset=1.0)
    np.testing.assert_array_equal(ctx.read_tensor(t), np.full(n, 8.0, np.float32))
    t.destroy()


def test_cross_device_refused_without_copy(ctx, device2):
    t = f32_tensor(ctx, importable_to_webgpu=True)
    with pytest.raises(webnn.NotSupportedError, match="allow_copy=False"):
        interop.import_external_buffer(device2, t, allow_copy=False)
    assert t._rental is None  # nothing changed
    interop.import_external_buffer(ctx.device, t, allow_copy=False).destroy()
    t.destroy()


# ---------------------------------------------------------------- errors
def test_renting_a_tensor_not_importable_is_a_type_error(ctx):
    t = f32_tensor(ctx, readable=True)
    with pytest.raises(webnn.MLTypeError, match="importable_to_webgpu"):
        ctx.export_to_gpu(t)
    with pytest.raises(TypeError, match="exportToGPU: argument 'tensor'"):
        ctx.export_to_gpu(t)
    with pytest.raises(webnn.MLTypeError, match="importExternalBuffer: argument 'tensor'"):
        interop.import_external_buffer(ctx.device, t)
    with pytest.raises(webnn.MLTypeError, match="an MLTensor"):
        ctx.export_to_gpu(np.zeros(4))
    t.destroy()


def test_renting_twice_is_a_clear_error(ctx, device2):
    t = f32_tensor(ctx, importable_to_webgpu=True)
    with ctx.export_to_gpu(t) as r:
        with pytest.raises(webnn.InvalidStateError, match="already rented"):
            ctx.export_to_gpu(t)
        with pytest.raises(webnn.InvalidStateError, match="already rented"):
            interop.import_external_buffer(device2, t)
        assert t._rental is r  # the first rental is untouched
    ctx.export_to_gpu(t).destroy()  # sequential rentals are fine
    t.destroy()


def test_tensor_of_another_context_or_bad_device(ctx, fresh_ctx):
    t = f32_tensor(fresh_ctx, importable_to_webgpu=True)
    with pytest.raises(webnn.MLTypeError, match="another context"):
        ctx.export_to_gpu(t)
    with pytest.raises(webnn.MLTypeError, match="argument 'device'"):
        interop.import_external_buffer("gpu", t)
    with pytest.raises(webnn.MLTypeError, match="argument 'device'"):
        fresh_ctx.export_to_gpu(t, device=42)


def test_using_a_returned_rental_again(ctx):
    t = f32_tensor(ctx, importable_to_webgpu=True)
    r = ctx.export_to_gpu(t)
    r.destroy()
    r.destroy()  # returning twice is harmless
    out = ctx.device.create_buffer(size=4 * N, usage=IO)
    for use in (lambda: run_user_pass(ctx.device, AFFINE_INPLACE_WGSL, [r], N),
                lambda: ctx.device.queue.write_buffer(r, 0, data())):
        with pytest.raises(webnn.InvalidStateError, match="was returned"):
            use()
    enc = ctx.device.create_command_encoder()
    with pytest.raises(webnn.InvalidStateError, match="was returned"):
        enc.copy_buffer_to_buffer(r, 0, out, 0, 4 * N)
    with pytest.raises(webnn.InvalidStateError, match="was returned"):
        with r:
            pass
    t.destroy()


def test_recording_a_returned_rental_is_refused(ctx, scale_graph):
    """A rental recorded into the caller's encoder, then returned: recording it again raises,
    though the graph keeps the first recording's bind groups."""
    t = f32_tensor(ctx, writable=True, importable_to_webgpu=True)
    ctx.write_tensor(t, data())
    out = ctx.device.create_buffer(size=4 * N, usage=IO)
    r = ctx.export_to_gpu(t)
    enc = ctx.device.create_command_encoder()
    ctx.record(enc, scale_graph, {"x": r}, {"y": out})
    ctx.device.queue.submit([enc.finish()])
    r.destroy()
    with pytest.raises(webnn.InvalidStateError, match="returned"):
        ctx.record(ctx.device.create_command_encoder(), scale_graph, {"x": r}, {"y": out})
    t.destroy()


def test_destroying_a_rented_tensor_is_refused(ctx):
    t = f32_tensor(ctx, writable=True, readable=True, importable_to_webgpu=True)
    ctx.write_tensor(t, data())
    r = ctx.export_to_gpu(t)
    with pytest.raises(webnn.InvalidStateError, match="rented"):
        t.destroy()
    assert not t.destroyed
    r.destroy()
    np.testing.assert_array_equal(ctx.read_tensor(t), data())  # no data lost
    t.destroy()
    with pytest.raises(webnn.InvalidStateError, match="destroyed"):
        ctx.export_to_gpu(t)


def test_renting_a_tensor_with_held_work_is_refused(ctx, scale_graph):
    a = f32_tensor(ctx, importable_to_webgpu=True)
    b = f32_tensor(ctx, importable_to_webgpu=True)
    with hold(a):
        ctx.dispatch(scale_graph, {"x": a}, {"y": b})  # held; b now waits for a
        with pytest.raises(webnn.InvalidStateError, match="held behind"):
            ctx.export_to_gpu(b)
    ctx.export_to_gpu(b).destroy()
    a.destroy()
    b.destroy()


def test_callers_device_lost_before_or_during_a_rental():
    """A lost caller device: renting raises OperationError and rents nothing; losing it with a
    rental out makes release() raise OperationError, return the tensor with its value from
    before the rental, and let held work go on."""
    ctx = webnn.ml.create_context()
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [N]})
    g = b.build({"y": b.add(x, x)})
    adapter = wgpu.gpu.request_adapter_sync()
    t = f32_tensor(ctx, writable=True, readable=True, importable_to_webgpu=True)
    out = f32_tensor(ctx, readable=True)
    ctx.write_tensor(t, data())

    dead = adapter.request_device_sync(label="lost before")
    dead.destroy()
    with pytest.raises(webnn.OperationError, match="could not copy"):
        interop.import_external_buffer(dead, t)
    assert t._rental is None

    dev = adapter.request_device_sync(label="lost during")
    r = interop.import_external_buffer(dev, t)
    ctx.dispatch(g, {"x": t}, {"y": out})  # held
    dev.destroy()
    with pytest.raises(webnn.OperationError, match="keeps its value from before the rental"):
        r.destroy()
    assert t._rental is None and r.returned
    np.testing.assert_array_equal(ctx.read_tensor(t), data())
    np.testing.assert_array_equal(ctx.read_tensor(out), data() * 2)  # the held dispatch ran
    ctx.destroy()


# ---------------------------------------------------------------- randomized ordering
def test_random_sequences_follow_the_hold_rules(ctx):
    """Random writes, dispatches, rentals, caller passes, returns and reads on four tensors,
    against an event model written from the rules: a WebNN call runs as soon as none of its
    tensors is rented and no earlier pending call shares a tensor with it; the caller's pass
    runs at once. Values are small integers in float32, so every result is exact."""
    rng = np.random.default_rng(2024)
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [N]})
    inc = b.build({"y": b.add(x, b.constant("float32", 1.0))})
    ts = [f32_tensor(ctx, readable=True, writable=True, importable_to_webgpu=True) for _ in range(4)]
    model = [np.zeros(N) for _ in ts]
    pending: list = []  # (tensor indices, function on the model), in call order
    rentals: dict = {}

    def settle():
        k = 0
        while k < len(pending):
            idx, fn = pending[k]
            blocked = any(i in rentals for i in idx) or any(set(idx) & set(p[0]) for p in pending[:k])
            if blocked:
                k += 1
                continue
            fn()
            pending.pop(k)
            k = 0

    def busy(i):
        return i in rentals or any(i in p[0] for p in pending)

    for _ in range(120):
        action = rng.choice(["write", "dispatch", "rent", "caller", "release", "read"], p=[.15, .25, .15, .15, .15, .15])
        i, j = (int(v) for v in rng.choice(4, size=2, replace=False))
        if action == "write":
            v = rng.integers(-50, 50, N).astype(np.float32)
            ctx.write_tensor(ts[i], v)
            pending.append(((i,), lambda i=i, v=v: model.__setitem__(i, v.astype(np.float64))))
        elif action == "dispatch":
            ctx.dispatch(inc, {"x": ts[i]}, {"y": ts[j]})
            pending.append(((i, j), lambda i=i, j=j: model.__setitem__(j, model[i] + 1)))
        elif action == "rent":
            if i in rentals:
                with pytest.raises(webnn.InvalidStateError, match="already rented"):
                    hold(ts[i])
            elif busy(i):
                with pytest.raises(webnn.InvalidStateError, match="held"):
                    hold(ts[i])
            else:
                rentals[i] = hold(ts[i])
        elif action == "caller" and rentals:
            i = sorted(rentals)[int(rng.integers(len(rentals)))]
            run_user_pass(ctx.device, AFFINE_INPLACE_WGSL, [rentals[i]], N, scale=-1.0, offset=5.0)
            model[i] = -model[i] + 5
        elif action == "release" and rentals:
            i = sorted(rentals)[int(rng.integers(len(rentals)))]
            rentals.pop(i).destroy()
        elif action == "read":
            if busy(i):
                with pytest.raises(webnn.InvalidStateError):
                    ctx.read_tensor(ts[i])
            else:
                np.testing.assert_array_equal(ctx.read_tensor(ts[i]), model[i])
        settle()
        assert ctx._timeline.held_count == len(pending)
    for i in sorted(rentals):
        rentals.pop(i).destroy()
        settle()
    assert not pending and ctx._timeline.held_count == 0
    for t, want in zip(ts, model):
        np.testing.assert_array_equal(ctx.read_tensor(t), want)
        t.destroy()


def test_a_write_held_behind_a_rental_keeps_the_data_of_the_call(ctx):
    """write_tensor copies the caller's data at the call even when the write is held (the
    array may change, or be reused for the next frame, before the rental is returned)."""
    t = f32_tensor(ctx, importable_to_webgpu=True, readable=True, writable=True)
    frame = data(1.0)
    with interop.import_external_buffer(ctx.device, t):
        ctx.write_tensor(t, frame)
        assert ctx._timeline.held_count == 1
        frame[...] = -7.0  # the caller reuses its array before releasing the rental
    np.testing.assert_array_equal(ctx.read_tensor(t).reshape(-1), data(1.0).reshape(-1))
    ctx.write_tensor(t, frame)  # and a write that runs at once copies too
    frame[...] = 3.0
    np.testing.assert_array_equal(ctx.read_tensor(t).reshape(-1), np.full(frame.size, -7.0, np.float32))
