"""Which WebGPU adapter a Ray actor uses.

Ray gives an actor its GPUs by setting ``CUDA_VISIBLE_DEVICES`` and answering
``ray.get_gpu_ids()``, but Vulkan (and so wgpu) ignores ``CUDA_VISIBLE_DEVICES``: every
actor of a node would see every GPU and pick the same "high-performance" one. So each actor
chooses its adapter itself:

* **GPUs assigned** (``num_gpus=1``): the hardware adapters (discrete, then integrated; the
  first backend that has any, in wgpu's order Vulkan, Metal, D3D12) in the order the driver
  lists them, which for NVIDIA's and Mesa's Vulkan drivers is PCI bus order, the order of
  ``nvidia-smi`` and of Ray's GPU ids. The actor takes the one at the position of its first
  GPU id. ``WEBNN_GPU_ADAPTER=<index>`` overrides the position (for drivers that list in
  another order).
* **No GPU** (a CPU-only node): the software adapter, Mesa's lavapipe. It renders with
  ``LP_NUM_THREADS`` threads (default: every core of the machine); actors that share a node
  set it to their own ``num_cpus`` so that their threads split the cores instead of
  oversubscribing them (:func:`set_software_threads`, called before the first adapter
  request of the process, when the driver reads it).
"""

from __future__ import annotations

import os
from typing import Any, Sequence

import wgpu

__all__ = ["select_adapter", "set_software_threads", "describe"]

_HARDWARE = ("DiscreteGPU", "IntegratedGPU")
_BACKENDS = ("Vulkan", "Metal", "D3D12")


def set_software_threads(threads: int) -> None:
    """Let lavapipe use ``threads`` threads in this process (sets ``LP_NUM_THREADS``).

    Call it before the process's first adapter request; later it has no effect, as the
    driver reads the variable when it starts. A value already in the environment wins (the
    user's choice).

    Arguments:
        threads (int): >= 1.

    Raises:
        ValueError: ``threads`` < 1.
    """
    if int(threads) < 1:
        raise ValueError(f"set_software_threads: threads must be >= 1, given {threads!r}")
    os.environ.setdefault("LP_NUM_THREADS", str(int(threads)))


def _ordered(adapters: Sequence[Any], types: Sequence[str]) -> list[Any]:
    for backend in _BACKENDS:
        found = [a for a in adapters if a.info.get("backend_type") == backend]
        picked = [a for t in types for a in found if a.info.get("adapter_type") == t]
        if picked:
            return picked
    return []


def select_adapter(gpu_ids: Sequence[int | str] | None = None) -> wgpu.GPUAdapter:
    """The adapter of this actor: the GPU Ray assigned it, or the software adapter.

    Arguments:
        gpu_ids (Sequence | None): the actor's GPU ids; default ``ray.get_gpu_ids()`` inside a
            Ray worker (none elsewhere).

    Returns:
        wgpu.GPUAdapter: the hardware adapter at the position of the first GPU id (modulo
        the number of hardware adapters; ``WEBNN_GPU_ADAPTER`` overrides the position); with
        no GPU id, the software adapter (lavapipe); if neither exists, whatever
        ``request_adapter`` gives.

    Raises:
        RuntimeError: no adapter at all (``make gpu`` installs lavapipe).
    """
    if gpu_ids is None:
        gpu_ids = _ray_gpu_ids()
    adapters = list(wgpu.gpu.enumerate_adapters_sync())
    override = os.environ.get("WEBNN_GPU_ADAPTER")
    if gpu_ids:
        hardware = _ordered(adapters, _HARDWARE)
        if hardware:
            position = int(override) if override else int(str(gpu_ids[0]).split(",")[0])
            return hardware[position % len(hardware)]
    else:
        software = _ordered(adapters, ("CPU",))
        if software:
            return software[0]
    adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
    if adapter is None:
        raise RuntimeError("no WebGPU adapter found; run `make gpu` to install Mesa's lavapipe")
    return adapter


def _ray_gpu_ids() -> list:
    try:
        import ray
    except ModuleNotFoundError:
        return []
    if not ray.is_initialized():
        return []
    try:
        return list(ray.get_gpu_ids())
    except Exception:  # the driver, or a worker without an assignment
        return []


def describe(adapter: wgpu.GPUAdapter) -> str:
    """``"<device> (<backend>, <type>)"`` of an adapter, for reports."""
    info = adapter.info
    return f"{info.get('device', '?')} ({info.get('backend_type', '?')}, {info.get('adapter_type', '?')})"
