"""Set-up of the peer runtimes the benchmarks compare against, on first use, into a cache.

Nothing here runs at import of webnn-gpu, and nothing is fetched from anywhere but PyPI
(pip) and Debian (apt). Everything lands in :data:`CACHE`
(``$WEBNN_GPU_BENCH_CACHE``, default ``$XDG_CACHE_HOME/webnn-gpu/bench``):

* one virtual environment per peer (:data:`VENVS`): ONNX Runtime CPU (``onnxruntime``),
  ONNX Runtime with its WebGPU execution provider
  (``onnxruntime-webgpu``, Dawn; it installs the same ``onnxruntime`` module, hence its own
  environment), and the TFLite -> ONNX converter (``tf2onnx``, which needs TensorFlow);
* Mesa 25's lavapipe (:func:`mesa25`): Debian bookworm-backports' ``mesa-vulkan-drivers``
  fetched with ``apt-get download`` through a private apt state (the system's apt
  configuration is read for its Debian mirror, never changed), unpacked with ``dpkg -x``;
  selected with ``VK_ICD_FILENAMES`` + ``LD_LIBRARY_PATH``. Dawn (both WebGPU peers)
  refuses Debian 12's Mesa 22.3.6;
* the selfie model as ONNX (:func:`selfie_onnx`): MediaPipe's custom op rewritten as the
  builtin TRANSPOSE_CONV (the loader's ``tests/model/litert_reference.py``), then tf2onnx.

Each step raises :class:`PeerUnavailable` with the reason when it cannot be done; the
benchmarks print that reason.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("WEBNN_GPU_BENCH_CACHE")
             or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "webnn-gpu" / "bench")

#: peer name -> pip requirements of its virtual environment (pinned: numbers must be comparable).
#: LiteRT (``ai-edge-litert``) is a test dependency of the project and runs under its Python.
VENVS = {
    "ort-cpu": ["onnxruntime==1.31.1", "numpy"],
    "ort-webgpu": ["onnxruntime-webgpu==1.27.0", "numpy"],
    "tf2onnx": ["tf2onnx==1.17.0", "tensorflow-cpu==2.21.0"],
}

#: Debian packages unpacked from bookworm-backports for Mesa 25 (the rest comes from the system)
MESA25_PACKAGES = ["mesa-vulkan-drivers", "libdrm2", "libdrm-amdgpu1"]


class PeerUnavailable(RuntimeError):
    """A peer cannot be set up or run here; the message says why."""


def _run(cmd, *, env=None, timeout=3600, what="") -> subprocess.CompletedProcess:
    try:
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PeerUnavailable(f"{what or cmd[0]}: {exc}") from exc
    if r.returncode != 0:
        tail = "\n".join((r.stderr or r.stdout).strip().splitlines()[-6:])
        raise PeerUnavailable(f"{what or ' '.join(map(str, cmd[:3]))} failed (exit {r.returncode}):\n{tail}")
    return r


def venv_python(name: str) -> Path:
    """The Python of peer ``name``'s virtual environment, created on first use (pip)."""
    reqs = VENVS[name]
    d = CACHE / f"venv-{name}"
    py = d / "bin" / "python"
    stamp = d / ".requirements"
    if py.exists() and stamp.exists() and stamp.read_text() == "\n".join(reqs):
        return py
    CACHE.mkdir(parents=True, exist_ok=True)
    _run([sys.executable, "-m", "venv", "--clear", str(d)], what=f"python -m venv {d}")
    _run([str(py), "-m", "pip", "install", "-q", *reqs], what=f"pip install {' '.join(reqs)}")
    stamp.write_text("\n".join(reqs))
    return py


def venv_size_mb(name: str) -> float:
    """Disk size of a peer's environment (the cost of installing it), in MB."""
    total = 0
    for p in (CACHE / f"venv-{name}").rglob("*"):
        if p.is_file() and not p.is_symlink():
            total += p.stat().st_size
    return total / 1e6


# ---------------------------------------------------------------- Mesa 25
def _debian_mirror() -> str:
    """The URI of the system's Debian archive, from its apt sources (deb822 or one-line)."""
    for f in [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]:
        if not f.is_file():
            continue
        text = f.read_text(errors="replace")
        for block in re.split(r"\n\s*\n", text):  # deb822 stanzas
            uris = re.search(r"^URIs:\s*(\S+)", block, re.M)
            suites = re.search(r"^Suites:\s*(.+)$", block, re.M)
            if uris and suites and "bookworm" in suites.group(1).split():
                return uris.group(1)
        for line in text.splitlines():
            m = re.match(r"\s*deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+bookworm\s", line)
            if m:
                return m.group(1)
    raise PeerUnavailable("no Debian bookworm source in the system's apt configuration (needed for Mesa 25)")


def mesa25() -> dict:
    """Environment variables selecting Mesa 25's lavapipe (downloaded and unpacked on first use)."""
    d = CACHE / "mesa25"
    icd = d / "lvp_icd.json"
    libdir = d / "root" / "usr" / "lib" / "x86_64-linux-gnu"
    if not icd.exists():
        for sub in ("lists/partial", "archives/partial", "debs"):
            (d / sub).mkdir(parents=True, exist_ok=True)
        mirror = _debian_mirror()
        key = "/usr/share/keyrings/debian-archive-keyring.gpg"
        (d / "sources.list").write_text(f"deb [signed-by={key}] {mirror} bookworm main\n"
                                        f"deb [signed-by={key}] {mirror} bookworm-backports main\n")
        opts = [f"-o=Dir::Etc::SourceList={d / 'sources.list'}", "-o=Dir::Etc::SourceParts=/nonexistent",
                f"-o=Dir::State::Lists={d / 'lists'}", f"-o=Dir::Cache::archives={d / 'archives'}",
                f"-o=Dir::Cache::pkgcache={d / 'pkgcache.bin'}", f"-o=Dir::Cache::srcpkgcache={d / 'srcpkgcache.bin'}",
                "-o=APT::Sandbox::User=root"]
        _run(["apt-get", *opts, "update"], what="apt-get update (private lists, bookworm-backports)")
        wanted = [f"{p}/bookworm-backports" for p in MESA25_PACKAGES]
        deps = _run(["apt-cache", *opts, "show", "mesa-vulkan-drivers/bookworm-backports"],
                    what="apt-cache show").stdout
        m = re.search(r"^Depends:\s*(.+)$", deps, re.M)
        for dep in (m.group(1).split(",") if m else []):
            name = dep.split("|")[0].strip().split()[0]
            if name in MESA25_PACKAGES:
                continue
            ok = subprocess.run(["dpkg-query", "-W", "-f=${Status}", name], capture_output=True, text=True)
            if "install ok installed" not in ok.stdout:
                wanted.append(name)  # a library the system lacks: unpack bookworm's beside Mesa
        r = subprocess.run(["apt-get", *opts, "download", *wanted], cwd=d / "debs", capture_output=True, text=True)
        if r.returncode != 0:
            raise PeerUnavailable(f"apt-get download {' '.join(wanted)} failed: {r.stderr.strip()[-400:]}")
        for deb in sorted((d / "debs").glob("*.deb")):
            _run(["dpkg", "-x", str(deb), str(d / "root")], what=f"dpkg -x {deb.name}")
        src = d / "root" / "usr" / "share" / "vulkan" / "icd.d" / "lvp_icd.json"
        if not src.exists():
            raise PeerUnavailable(f"the unpacked Mesa has no lavapipe ICD ({src})")
        manifest = json.loads(src.read_text())
        manifest["ICD"]["library_path"] = str(libdir / "libvulkan_lvp.so")
        icd.write_text(json.dumps(manifest))
    return {"VK_ICD_FILENAMES": str(icd),
            "LD_LIBRARY_PATH": ":".join(filter(None, [str(libdir), os.environ.get("LD_LIBRARY_PATH", "")]))}


# ---------------------------------------------------------------- models
def selfie_tflite(builtin_transpose_conv: bool = False) -> Path:
    """The selfie model (``webnn_gpu.models.fetch``); optionally with MediaPipe's custom op
    rewritten as the builtin TRANSPOSE_CONV (what stock LiteRT kernels and tf2onnx know)."""
    from webnn_gpu import models

    path = models.fetch("selfie-segmentation")
    if not builtin_transpose_conv:
        return path
    out = CACHE / "selfie_segmentation_builtin.tflite"
    if not out.exists():
        sys.path.insert(0, str(ROOT / "tests" / "model"))
        try:
            from litert_reference import replace_transpose_conv_bias
        except ImportError as exc:
            raise PeerUnavailable(f"the loader's tests/model/litert_reference.py is needed for the rewrite: {exc}")
        data, n = replace_transpose_conv_bias(path.read_bytes())
        if n != 1:
            raise PeerUnavailable(f"expected one Convolution2DTransposeBias in the selfie model, rewrote {n}")
        CACHE.mkdir(parents=True, exist_ok=True)
        out.write_bytes(data)
    return out


def selfie_onnx() -> Path:
    """The selfie model converted once to ONNX with tf2onnx (opset 17), cached."""
    out = CACHE / "selfie_segmentation.onnx"
    if out.exists():
        return out
    src = selfie_tflite(builtin_transpose_conv=True)
    py = venv_python("tf2onnx")
    tmp = out.with_suffix(".tmp.onnx")
    _run([str(py), "-m", "tf2onnx.convert", "--tflite", str(src), "--output", str(tmp), "--opset", "17"],
         what="tf2onnx.convert --tflite", env={**os.environ, "CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "2"})
    tmp.rename(out)
    return out


def selfie_input() -> Path:
    """A real photo for the selfie model (scikit-image's astronaut, 256x256 RGB in [0, 1]) as .npy,
    so that the runtimes' masks have something to agree on (a random input gives a mask of ~0)."""
    out = CACHE / "selfie_input_astronaut.npy"
    if not out.exists():
        import numpy as np
        from skimage import data
        from skimage.transform import resize

        img = resize(data.astronaut().astype(np.float32) / 255.0, (256, 256), order=1, anti_aliasing=True)
        CACHE.mkdir(parents=True, exist_ok=True)
        np.save(out, img.astype(np.float32)[None])
    return out


# ---------------------------------------------------------------- running
RUNNER = Path(__file__).resolve().parent / "peer_runner.py"


def run_peer(runtime: str, model: Path, *, python: Path | None = None, threads: int = 1, warmup: int = 5,
             repeats: int = 30, env: dict | None = None, timeout: float = 1800, extra: list | None = None) -> dict:
    """Run ``peer_runner.py RUNTIME MODEL`` in a child process; its JSON result.

    Raises:
        PeerUnavailable: the runner failed; the message has its reason.
    """
    cmd = [str(python or sys.executable), str(RUNNER), runtime, str(model), "--threads", str(threads),
           "--warmup", str(warmup), "--repeats", str(repeats), *(extra or [])]
    full_env = {**os.environ, "XDG_RUNTIME_DIR": os.environ.get("XDG_RUNTIME_DIR", "/tmp"), **(env or {})}
    try:
        r = subprocess.run(cmd, env=full_env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise PeerUnavailable(f"{runtime}: no result within {timeout:.0f} s") from exc
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        tail = "\n".join(r.stderr.strip().splitlines()[-8:])
        raise PeerUnavailable(f"{runtime}: the runner crashed (exit {r.returncode}):\n{tail}")
    result = json.loads(lines[-1])
    if "error" in result:
        raise PeerUnavailable(f"{runtime}: {result['error']}")
    return result
