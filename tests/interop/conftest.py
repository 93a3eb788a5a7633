"""Fixtures for the interop tests: a second device, a fresh context, a small graph."""

from __future__ import annotations

import pytest
import wgpu

import webnn_gpu as webnn


@pytest.fixture(scope="session")
def device2():
    """A second device on the same adapter: the caller's device that is not the context's."""
    adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
    return adapter.request_device_sync(label="caller device")


@pytest.fixture
def fresh_ctx():
    """A context of its own, for tests that destroy things."""
    c = webnn.ml.create_context()
    yield c
    c.destroy()


@pytest.fixture(scope="session")
def scale_graph(ctx):
    """y = x * 3 - 1 over float32 [64] (an element-wise graph of the context)."""
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [64]})
    y = b.sub(b.mul(x, b.constant("float32", 3.0)), b.constant("float32", 1.0))
    return b.build({"y": y})
