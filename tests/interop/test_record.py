"""Recording graphs into the caller's encoder, and wrapping the caller's buffers as tensors."""

from __future__ import annotations

import numpy as np
import pytest
import wgpu
from _user_gpu import AFFINE_INPLACE_WGSL, AFFINE_WGSL, IO, f32_tensor, read_f32, user_pass

import webnn_gpu as webnn
from webnn_gpu import interop

N = 64
_U = wgpu.BufferUsage


def data(k: float = 0.0) -> np.ndarray:
    return (np.arange(N) + k).astype(np.float32)


def graph_ref(x):
    return np.asarray(x, np.float64) * 3.0 - 1.0


def count_submits(monkeypatch, queue) -> list:
    calls = []
    real = queue.submit

    def submit(buffers):
        calls.append(len(buffers))
        return real(buffers)

    monkeypatch.setattr(queue, "submit", submit)
    return calls


# ---------------------------------------------------------------- record
def test_record_between_the_callers_passes_in_one_submit(ctx, scale_graph, monkeypatch):
    """pre-processing (WGSL) -> inference (WebNN) -> post-processing (WGSL): one submit."""
    dev = ctx.device
    src = dev.create_buffer_with_data(data=data().tobytes(), usage=IO)
    pre = dev.create_buffer(size=4 * N, usage=IO)  # a plain buffer as the graph's input
    y = f32_tensor(ctx, readable=True)  # an MLTensor as its output
    final = dev.create_buffer(size=4 * N, usage=IO)
    calls = count_submits(monkeypatch, dev.queue)
    enc = dev.create_command_encoder()
    user_pass(dev, enc, AFFINE_WGSL, [src, pre], N, scale=0.5, offset=1.0)
    ctx.record(enc, scale_graph, {"x": pre}, {"y": y})
    user_pass(dev, enc, AFFINE_WGSL, [y.buffer, final], N, scale=1.0, offset=-2.0)
    assert calls == []  # record() submits nothing
    dev.queue.submit([enc.finish()])
    assert calls == [1]
    monkeypatch.undo()
    want = graph_ref(data() * 0.5 + 1.0) - 2.0
    np.testing.assert_array_equal(read_f32(dev, final, N), want)
    np.testing.assert_array_equal(ctx.read_tensor(y), want + 2.0)
    y.destroy()


def test_record_again_with_other_buffers(ctx, scale_graph):
    """Cached bind groups follow the buffers (a new buffer never reuses an old one's)."""
    dev = ctx.device
    for k in range(3):
        xb = dev.create_buffer_with_data(data=data(10 * k).tobytes(), usage=_U.STORAGE)
        yb = dev.create_buffer(size=4 * N, usage=_U.STORAGE | _U.COPY_SRC)
        for _ in range(2):
            enc = dev.create_command_encoder()
            ctx.record(enc, scale_graph, {"x": xb}, {"y": yb})
            dev.queue.submit([enc.finish()])
        np.testing.assert_array_equal(read_f32(dev, yb, N), graph_ref(data(10 * k)))
        del xb, yb


def test_record_a_rented_tensor_and_larger_buffers(ctx, scale_graph):
    """A rented tensor is the caller's: recording it into the caller's encoder is allowed.
    Buffers larger than the operand are fine."""
    dev = ctx.device
    x = f32_tensor(ctx, writable=True, importable_to_webgpu=True)
    ctx.write_tensor(x, data())
    big = dev.create_buffer(size=4 * N + 256, usage=IO)
    with ctx.export_to_gpu(x) as r:
        enc = dev.create_command_encoder()
        user_pass(dev, enc, AFFINE_INPLACE_WGSL, [r], N, scale=2.0, offset=0.0)
        ctx.record(enc, scale_graph, {"x": x}, {"y": big})
        dev.queue.submit([enc.finish()])
    np.testing.assert_array_equal(read_f32(dev, big, N), graph_ref(data() * 2))
    x.destroy()


def _two_output_graph(ctx):
    """Outputs 'a' and 'b' are the same value: 'b' is filled by a buffer copy from 'a'."""
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [N]})
    y = b.add(x, x)
    return b.build({"a": y, "b": y})


def test_record_checks_copy_usages_only_where_the_graph_copies(ctx):
    g = _two_output_graph(ctx)
    dev = ctx.device
    xb = dev.create_buffer_with_data(data=data().tobytes(), usage=_U.STORAGE)
    a = dev.create_buffer(size=4 * N, usage=_U.STORAGE | _U.COPY_SRC)
    b_ok = dev.create_buffer(size=4 * N, usage=_U.STORAGE | _U.COPY_SRC | _U.COPY_DST)
    b_bad = dev.create_buffer(size=4 * N, usage=_U.STORAGE | _U.COPY_SRC)
    enc = dev.create_command_encoder()
    with pytest.raises(webnn.MLTypeError, match=r"outputs\['b'\].*usage STORAGE \| COPY_DST, got 'a buffer with usage STORAGE \| COPY_SRC'"):
        ctx.record(enc, g, {"x": xb}, {"a": a, "b": b_bad})
    ctx.record(enc, g, {"x": xb}, {"a": a, "b": b_ok})
    dev.queue.submit([enc.finish()])
    np.testing.assert_array_equal(read_f32(dev, b_ok, N), data() * 2)
    np.testing.assert_array_equal(read_f32(dev, a, N), data() * 2)


def test_record_errors(ctx, fresh_ctx, device2, scale_graph):
    dev = ctx.device
    ok_in = dev.create_buffer(size=4 * N, usage=IO)
    ok_out = dev.create_buffer(size=4 * N, usage=IO)
    enc = dev.create_command_encoder()

    def rec(inputs=None, outputs=None, graph=scale_graph, encoder=enc, context=ctx):
        context.record(encoder, graph, {"x": ok_in} if inputs is None else inputs,
                       {"y": ok_out} if outputs is None else outputs)

    err = webnn.MLTypeError
    with pytest.raises(err, match="record: argument 'encoder': expected a wgpu.GPUCommandEncoder"):
        rec(encoder="enc")
    with pytest.raises(err, match="argument 'encoder'.*another device"):
        rec(encoder=device2.create_command_encoder())
    with pytest.raises(err, match=r"argument 'inputs': expected exactly the names \['x'\], got .missing \['x'\], "
                                   r"unknown \['z'\]."):
        rec(inputs={"z": ok_in})
    with pytest.raises(err, match="argument 'outputs': expected a dict"):
        rec(outputs=[ok_out])
    small = dev.create_buffer(size=4 * N - 4, usage=IO)
    with pytest.raises(err, match=r"inputs\['x'\].*at least 256 bytes.*got 'a buffer of 252 bytes'"):
        rec(inputs={"x": small})
    no_storage = dev.create_buffer(size=4 * N, usage=_U.COPY_SRC | _U.COPY_DST)
    with pytest.raises(err, match=r"outputs\['y'\].*usage STORAGE, got 'a buffer with usage COPY_SRC \| COPY_DST'"):
        rec(outputs={"y": no_storage})
    with pytest.raises(err, match="of the context's device"):
        rec(inputs={"x": device2.create_buffer(size=4 * N, usage=IO)})
    with pytest.raises(err, match="an MLTensor or a wgpu.GPUBuffer"):
        rec(inputs={"x": np.zeros(N, np.float32)})
    wrong_shape = ctx.create_tensor({"data_type": "float32", "shape": [8, 8]})
    with pytest.raises(err, match=r"a float32 tensor of shape \[64\].*shape \[8, 8\]"):
        rec(inputs={"x": wrong_shape})
    with pytest.raises(err, match="both input and output"):
        rec(inputs={"x": ok_out})
    with pytest.raises(err, match="another context"):
        rec(inputs={"x": f32_tensor(fresh_ctx)})
    other_graph = _two_output_graph(ctx)
    with pytest.raises(err, match="distinct buffers"):
        rec(graph=other_graph, outputs={"a": ok_out, "b": ok_out})
    with pytest.raises(err, match="argument 'graph'"):
        rec(graph="g")
    # Nothing was recorded by the failed calls: the encoder still works.
    ctx.record(enc, scale_graph, {"x": ok_in}, {"y": ok_out})
    dev.queue.submit([enc.finish()])
    # A finished encoder: OperationError, not a wgpu exception.
    with pytest.raises(webnn.OperationError, match="record"):
        rec()
    other_graph.destroy()
    with pytest.raises(webnn.InvalidStateError, match="destroyed"):
        rec(graph=other_graph, encoder=dev.create_command_encoder(), outputs={"a": ok_out, "b": ok_in})
    wrong_shape.destroy()
    with pytest.raises(webnn.InvalidStateError, match="destroyed"):
        rec(inputs={"x": wrong_shape}, encoder=dev.create_command_encoder())


def test_record_refuses_tensors_held_or_rented_elsewhere(ctx, device2, scale_graph):
    a = f32_tensor(ctx, importable_to_webgpu=True)
    b = f32_tensor(ctx)
    out = ctx.device.create_buffer(size=4 * N, usage=IO)
    with interop.import_external_buffer(ctx.device, a):
        ctx.dispatch(scale_graph, {"x": a}, {"y": b})  # held
        with pytest.raises(webnn.InvalidStateError, match="held"):
            ctx.record(ctx.device.create_command_encoder(), scale_graph, {"x": b}, {"y": out})
    with interop.import_external_buffer(device2, a):
        with pytest.raises(webnn.InvalidStateError, match="rented to another device"):
            ctx.record(ctx.device.create_command_encoder(), scale_graph, {"x": a}, {"y": out})
    a.destroy()
    b.destroy()


# ---------------------------------------------------------------- tensor_from_buffer
def test_tensor_from_buffer_is_zero_copy(ctx, scale_graph):
    dev = ctx.device
    buf = dev.create_buffer_with_data(data=data().tobytes(), usage=IO)
    out_buf = dev.create_buffer(size=4 * N, usage=IO)
    x = ctx.tensor_from_buffer(buf, {"data_type": "float32", "shape": [N], "readable": True, "writable": True})
    y = ctx.tensor_from_buffer(out_buf, {"data_type": "float32", "shape": [N], "readable": True}, label="y")
    assert x.buffer is buf and y.buffer is out_buf
    np.testing.assert_array_equal(ctx.read_tensor(x), data())  # the buffer's contents, as they were
    ctx.dispatch(scale_graph, {"x": x}, {"y": y})
    np.testing.assert_array_equal(read_f32(dev, out_buf, N), graph_ref(data()))  # written in place
    ctx.write_tensor(x, data(3))
    np.testing.assert_array_equal(read_f32(dev, buf, N), data(3))
    x.destroy()
    y.destroy()
    ctx._drain_retired()
    np.testing.assert_array_equal(read_f32(dev, buf, N), data(3))  # the caller's buffer lives on


def test_a_wrapped_buffer_destroyed_by_its_owner_is_refused(ctx, scale_graph):
    """The caller destroys a buffer wrapped by tensor_from_buffer: dispatch, write, read and
    record of a tensor over it raise InvalidStateError (wgpu-native aborts the process on a
    submit of a destroyed buffer), nothing is submitted, and the context stays usable."""
    dev = ctx.device
    buf = dev.create_buffer_with_data(data=data().tobytes(), usage=IO)
    x = ctx.tensor_from_buffer(buf, {"data_type": "float32", "shape": [N], "readable": True, "writable": True})
    y = f32_tensor(ctx, readable=True)
    ctx.dispatch(scale_graph, {"x": x}, {"y": y})
    np.testing.assert_allclose(ctx.read_tensor(y), graph_ref(data()), rtol=1e-6)
    buf.destroy()
    for call in (lambda: ctx.dispatch(scale_graph, {"x": x}, {"y": y}), lambda: ctx.write_tensor(x, data(1)),
                 lambda: ctx.read_tensor(x)):
        with pytest.raises(webnn.InvalidStateError, match="destroyed"):
            call()
    enc = dev.create_command_encoder()
    for given in (x, buf):
        with pytest.raises(webnn.InvalidStateError, match="destroyed"):
            ctx.record(enc, scale_graph, {"x": given}, {"y": y})
    with pytest.raises(webnn.InvalidStateError, match="destroyed"):
        ctx.tensor_from_buffer(buf, {"data_type": "float32", "shape": [N]})
    x2 = f32_tensor(ctx, writable=True)
    ctx.write_tensor(x2, data(2))
    ctx.dispatch(scale_graph, {"x": x2}, {"y": y})
    np.testing.assert_allclose(ctx.read_tensor(y), graph_ref(data(2)), rtol=1e-6)


def test_tensor_from_buffer_errors(ctx, device2):
    dev = ctx.device
    desc = {"data_type": "float32", "shape": [N]}
    err = webnn.MLTypeError
    with pytest.raises(err, match="tensorFromBuffer: argument 'buffer': expected a wgpu.GPUBuffer"):
        ctx.tensor_from_buffer(b"\0" * 256, desc)
    with pytest.raises(err, match="another device"):
        ctx.tensor_from_buffer(device2.create_buffer(size=4 * N, usage=IO), desc)
    with pytest.raises(err, match="at least 256 bytes.*got 'a buffer of 128 bytes'"):
        ctx.tensor_from_buffer(dev.create_buffer(size=128, usage=IO), desc)
    with pytest.raises(err, match="usage STORAGE \\| COPY_SRC \\| COPY_DST, got 'a buffer with usage STORAGE'"):
        ctx.tensor_from_buffer(dev.create_buffer(size=4 * N, usage=_U.STORAGE), desc)
    with pytest.raises(err, match="data_type"):
        ctx.tensor_from_buffer(dev.create_buffer(size=4 * N, usage=IO), {"data_type": "f32", "shape": [N]})
    with pytest.raises(err, match="unknown option"):
        ctx.tensor_from_buffer(dev.create_buffer(size=4 * N, usage=IO), desc, offset=4)
    mapped = dev.create_buffer(size=4 * N, usage=IO, mapped_at_creation=True)
    with pytest.raises(webnn.InvalidStateError, match="mapped"):
        ctx.tensor_from_buffer(mapped, desc)
    mapped.unmap()
