"""The sentinel: in CI a missing (or unexpected) adapter fails the run instead of skipping tests."""

from __future__ import annotations

import os

import wgpu


def test_adapter_is_available():
    adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
    assert adapter is not None, "no WebGPU adapter: install a Vulkan driver (make test does it with apt)"
    expect = os.environ.get("EXPECT_GPU", "")
    if expect == "lavapipe":
        assert "llvmpipe" in adapter.info["device"].lower(), f"expected lavapipe, got {adapter.info['device']}"
        assert adapter.info["backend_type"] == "Vulkan"


def test_context_has_the_features_we_use(ctx):
    info = ctx.adapter_info
    assert info.get("backend_type") in ("Vulkan", "Metal", "D3D12")
    if os.environ.get("EXPECT_GPU") == "lavapipe":
        assert {"shader-f16", "shader-int64", "timestamp-query"} <= set(ctx.features)
