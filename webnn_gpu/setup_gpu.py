"""Make sure a WebGPU adapter exists; install Mesa's software Vulkan driver when none does.

Run by ``make demo`` / ``make test`` (``python -m webnn_gpu.setup_gpu``). On a machine
without a GPU, wgpu finds no Vulkan adapter until Mesa's lavapipe (Debian package
``mesa-vulkan-drivers``) is installed; this module installs it with apt (as root, or
through sudo) and checks again. Exit status 0 when an adapter is usable.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

_COMPUTE_BACKENDS = ("Vulkan", "Metal", "D3D12")


def probe_adapter() -> dict | None:
    """Return the info dict of the adapter wgpu would use for compute, or None.

    Runs in a child process so that a driver installed afterwards is seen by a
    fresh wgpu instance.
    """
    code = (
        "import json, wgpu\n"
        "a = wgpu.gpu.request_adapter_sync(power_preference='high-performance')\n"
        "print(json.dumps(dict(a.info) if a else None))\n"
    )
    env = dict(os.environ)
    env.setdefault("XDG_RUNTIME_DIR", "/tmp")
    try:
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env
        )
    except subprocess.TimeoutExpired:
        return None
    if out.returncode != 0:
        return None
    import json

    line = out.stdout.strip().splitlines()[-1:] or ["null"]
    info = json.loads(line[0])
    if not info or info.get("backend_type") not in _COMPUTE_BACKENDS:
        return None
    return info


def install_lavapipe() -> None:
    """Install Debian's ``mesa-vulkan-drivers`` (lavapipe) with apt-get."""
    if shutil.which("apt-get") is None:
        raise SystemExit(
            "webnn-gpu: no WebGPU adapter found and no apt-get to install Mesa's Vulkan "
            "driver; install a Vulkan driver (e.g. mesa-vulkan-drivers) and try again."
        )
    prefix = [] if os.geteuid() == 0 else ["sudo", "-n"]
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    print("webnn-gpu: no WebGPU adapter found; installing mesa-vulkan-drivers (lavapipe)...")
    subprocess.run(prefix + ["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(
        prefix + ["apt-get", "install", "-y", "-qq", "mesa-vulkan-drivers"], check=True, env=env
    )


def main() -> int:
    """Probe for an adapter, install lavapipe if there is none, and report."""
    info = probe_adapter()
    if info is None:
        install_lavapipe()
        info = probe_adapter()
    if info is None:
        print("webnn-gpu: still no WebGPU adapter after installing lavapipe", file=sys.stderr)
        return 1
    print(f"webnn-gpu: adapter {info.get('device')} ({info.get('backend_type')})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
