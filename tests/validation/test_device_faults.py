"""Device-level failures: loss, our own kernels failing to compile, wgpu errors wrapped."""

from __future__ import annotations

import numpy as np
import pytest
import wgpu

import webnn_gpu as webnn


def _shared_context():
    device = wgpu.gpu.request_adapter_sync().request_device_sync()
    return device, webnn.ml.create_context(device)


def test_callers_device_destroyed_loses_the_context():
    device, ctx = _shared_context()
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [4]})
    g = b.build({"y": b.relu(x)})
    t = ctx.create_tensor({"data_type": "float32", "shape": [4], "readable": True, "writable": True})
    device.destroy()
    with pytest.raises(webnn.InvalidStateError, match="device was lost"):
        ctx.write_tensor(t, np.zeros(4, np.float32))
    assert ctx.lost.done() and "lost" in ctx.lost.result()
    # every later call fails the same way, never as out-of-memory or a raw wgpu error
    with pytest.raises(webnn.InvalidStateError):
        ctx.read_tensor(t)
    with pytest.raises(webnn.InvalidStateError):
        ctx.compute(g, {"x": np.zeros(4, np.float32)})
    with pytest.raises(webnn.InvalidStateError):
        ctx.create_tensor({"data_type": "float32", "shape": [4]})
    with pytest.raises(webnn.InvalidStateError):
        webnn.MLGraphBuilder(ctx)


def test_device_lost_during_build_is_invalid_state():
    device, ctx = _shared_context()
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [4]})
    y = b.sigmoid(x)
    device.destroy()
    with pytest.raises(webnn.InvalidStateError, match="device was lost"):
        b.build({"y": y})
    assert ctx.lost.done()


def test_our_shader_failing_to_compile_names_template_label_and_excerpt(ctx):
    bad = "@compute @workgroup_size(1)\nfn main() {\n  let x: u32 = 1.5;\n}\n"
    with pytest.raises(webnn.OperationError) as info:
        ctx._pipelines.get(bad, template="elementwise/map.wgsl", label="relu ['act']")
    text = str(info.value)
    assert "elementwise/map.wgsl" in text and "relu ['act']" in text
    assert "let x: u32 = 1.5;" in text  # the WGSL excerpt
    # the context is still usable
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [2]})
    g = b.build({"y": b.neg(x)})
    np.testing.assert_array_equal(ctx.compute(g, {"x": np.array([1, 2], np.float32)})["y"], [-1, -2])
