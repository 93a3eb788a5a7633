"""Fixtures of the demo tests: one wgpu device for the module (fails, never skips, without one)."""

from __future__ import annotations

import os

import numpy as np
import pytest
import wgpu

os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")


@pytest.fixture(scope="session")
def device() -> wgpu.GPUDevice:
    """The device the demo makes (shader-f16, timestamp queries... when the adapter has them).

    Raises (fails the tests, never skips) when there is no adapter.
    """
    from webnn_gpu.demo import create_device

    return create_device()


@pytest.fixture(autouse=True)
def _strict_numpy():
    with np.errstate(all="raise"):
        yield


@pytest.fixture
def read(device):
    """``read(buffer, dtype, count=None)``: a buffer as a 1-D array (its first ``count`` items)."""

    def read_buffer(buffer: wgpu.GPUBuffer, dtype, count: int | None = None) -> np.ndarray:
        data = np.frombuffer(device.queue.read_buffer(buffer), dtype=dtype)
        return data if count is None else data[:count]

    return read_buffer
