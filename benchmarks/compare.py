"""webnn-gpu side by side with LiteRT, ONNX Runtime and the Dawn WebGPU runtimes, in one run.

    .venv/bin/python benchmarks/compare.py                 # everything (sets peers up on first use)
    .venv/bin/python benchmarks/compare.py --only selfie   # or: dispatch, matmul, build, memory
    .venv/bin/python benchmarks/compare.py --no-mesa25     # skip the Dawn runtimes (Mesa 25)

Sections (each prints a table and the ratios the performance targets are stated in):

* ``selfie``: MediaPipe selfie segmentation (256x256) dispatch-to-read latency: webnn-gpu in
  float32 and float16 vs LiteRT's XNNPACK delegate and ONNX Runtime's CPU provider (1 and
  2 threads) on the system's driver, and vs ONNX Runtime's WebGPU provider and LiteRT's
  WebGPU accelerator (both Dawn) on Mesa 25's lavapipe, where webnn-gpu runs again so the
  GPU ratios compare one driver. Every runtime runs in a child process of its own on the
  same input (scikit-image's astronaut photo); the masks are compared with LiteRT XNNPACK's
  (max |difference| over 4,096 values spread over the mask).
* ``dispatch``: the cost of one more kernel in a graph (a chain of Fibonacci adds, element-wise
  fusion off) and of one more ``dispatch()`` (chained inference), vs the same work recorded
  with bare wgpu (one pipeline, bind groups made beforehand).
* ``matmul``: 1024^3 float32: webnn-gpu vs NumPy and a plain hand-written WGSL kernel
  (reusing ``bench_linalg.py``).
* ``build``: ``build()`` of the selfie graph in a fresh process (cold) with Mesa's on-disk
  shader cache empty and warm, the first dispatch after it, and a second build in the same
  process (warm: the pipeline cache hits).
* ``memory``: the liveness-planned arena of the selfie graph vs the peak of live
  intermediates and their sum.

On a shared 2-core machine the absolute numbers move with the load; ratios come from runs
made one after the other in this one invocation.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")

import peers  # noqa: E402


def _median(r: dict) -> float:
    return statistics.median(r["ms"])


def _p(r: dict, q: float) -> float:
    return float(np.percentile(r["ms"], q))


# ---------------------------------------------------------------- selfie
def selfie(args) -> dict:
    """Run every runtime on the selfie model; print the latency table and the target ratios."""
    tflite = peers.selfie_tflite()
    rows: list[tuple[str, str, dict | str]] = []  # (name, driver, result or reason)
    rep = dict(warmup=args.warmup, repeats=args.repeats)
    image = ["--input", str(peers.selfie_input())]

    def run(name, driver, *a, extra=(), **kw):
        print(f"  running {name} on {driver} ...", flush=True)
        try:
            rows.append((name, driver, peers.run_peer(*a, **rep, extra=[*extra, *image], **kw)))
        except peers.PeerUnavailable as exc:
            rows.append((name, driver, str(exc)))
            print(f"    unavailable: {exc}", flush=True)

    system = "Mesa 22 (system)"
    run("litert-xnnpack 1 thread", system, "litert-xnnpack", tflite, threads=1)
    run("litert-xnnpack 2 threads", system, "litert-xnnpack", tflite, threads=2)
    try:
        onnx = peers.selfie_onnx()
        ort_py = peers.venv_python("ort-cpu")
        run("ort-cpu 1 thread", system, "ort-cpu", onnx, python=ort_py, threads=1)
        run("ort-cpu 2 threads", system, "ort-cpu", onnx, python=ort_py, threads=2)
    except peers.PeerUnavailable as exc:
        onnx = None
        rows.append(("ort-cpu", system, f"no ONNX model: {exc}"))
    run("webnn-gpu float32", system, "webnn", tflite, extra=["--dtype", "float32"])
    run("webnn-gpu float16", system, "webnn", tflite, extra=["--dtype", "float16"])
    if not args.no_mesa25:
        try:
            env25 = peers.mesa25()
        except peers.PeerUnavailable as exc:
            env25 = None
            rows.append(("Dawn runtimes", "Mesa 25", f"Mesa 25 unavailable: {exc}"))
        if env25 is not None:
            m25 = "Mesa 25 (backports)"
            run("webnn-gpu float32", m25, "webnn", tflite, env=env25, extra=["--dtype", "float32"])
            run("webnn-gpu float16", m25, "webnn", tflite, env=env25, extra=["--dtype", "float16"])
            if onnx is not None:
                try:
                    run("ort-webgpu (Dawn)", m25, "ort-webgpu", onnx, python=peers.venv_python("ort-webgpu"),
                        env=env25)
                except peers.PeerUnavailable as exc:
                    rows.append(("ort-webgpu (Dawn)", m25, str(exc)))
            run("litert-webgpu (Dawn)", m25, "litert-webgpu", tflite, env=env25)

    ref = next((r for n, _, r in rows if n == "litert-xnnpack 1 thread" and isinstance(r, dict)), None)
    print("\nSelfie segmentation 256x256, dispatch-to-read latency (ms), "
          f"{args.repeats} runs after {args.warmup} warm-up runs")
    print(f"{'runtime':28s} {'driver':21s} {'median':>8s} {'p10':>8s} {'p90':>8s}  {'max|diff| vs XNNPACK':>20s}")
    for name, driver, r in rows:
        if isinstance(r, str):
            print(f"{name:28s} {driver:21s} unavailable: {r.splitlines()[0][:120]}")
            continue
        diff = ""
        if ref is not None and len(r["output"]) == len(ref["output"]):
            diff = f"{np.abs(np.array(r['output']) - np.array(ref['output'])).max():.2e}"
        print(f"{name:28s} {driver:21s} {_median(r):8.2f} {_p(r, 10):8.2f} {_p(r, 90):8.2f}  {diff:>20s}")

    def get(name, driver_prefix):
        for n, d, r in rows:
            if n == name and d.startswith(driver_prefix) and isinstance(r, dict):
                return _median(r)
        return None

    ratios = {}
    print("\nRatios (webnn-gpu latency / peer latency; lower is better):")
    for dt in ("float32", "float16"):
        ours = get(f"webnn-gpu {dt}", "Mesa 22")
        ours25 = get(f"webnn-gpu {dt}", "Mesa 25")
        best_xnn = min(filter(None, [get("litert-xnnpack 1 thread", "Mesa"), get("litert-xnnpack 2 threads", "Mesa")]),
                       default=None)
        best_ort = min(filter(None, [get("ort-cpu 1 thread", "Mesa"), get("ort-cpu 2 threads", "Mesa")]), default=None)
        for label, a, b, target in (
            (f"{dt} vs LiteRT XNNPACK (best of 1/2 threads)", ours, best_xnn, 4.0),
            (f"{dt} vs ORT CPU (best of 1/2 threads)", ours, best_ort, None),
            (f"{dt} vs ORT WebGPU EP (Mesa 25)", ours25, get("ort-webgpu (Dawn)", "Mesa 25"), 0.2),
            (f"{dt} vs LiteRT WebGPU (Mesa 25)", ours25, get("litert-webgpu (Dawn)", "Mesa 25"), 1 / 3),
        ):
            if a is None or b is None:
                print(f"  {label:50s} n/a")
                continue
            ratios[label] = a / b
            verdict = ""
            if target is not None:
                verdict = " target <= %.2f: %s" % (target, "met" if a / b <= target else "NOT met")
            print(f"  {label:50s} {a / b:6.2f}{verdict}")
    return {"rows": [(n, d, r if isinstance(r, str) else {k: v for k, v in r.items() if k != "output"})
                     for n, d, r in rows], "ratios": ratios}


# ---------------------------------------------------------------- dispatch overhead
ADD_WGSL = """
@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> c: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  if (gid.x >= NN) { return; }
  c[gid.x] = a[gid.x] + b[gid.x];
}
"""


class FibChains:
    """Fibonacci chains of ``n``-element float32 adds, as webnn-gpu graphs and as bare wgpu.

    ``webnn(k)`` / ``bare(k)``: a function running a chain of ``k`` adds (one kernel each:
    build with ``WEBNN_GPU_PASSES=-fuse_elementwise``) in one dispatch / one compute pass and
    reading the result. ``webnn_chained(k)`` / ``bare_chained(k)``: ``k`` dispatches of a
    one-add graph (one submit each), each step's output the next step's input.
    """

    def __init__(self, ctx, n: int = 256):
        import wgpu

        self.ctx, self.n, self.dev = ctx, n, ctx.device
        self.f0, self.f1 = np.zeros(n, np.float32), np.ones(n, np.float32)
        self.usage = wgpu.BufferUsage
        self.pipe = self.dev.create_compute_pipeline(layout="auto", compute={
            "module": self.dev.create_shader_module(code=ADD_WGSL.replace("NN", f"{n}u")), "entry_point": "main"})
        self.staging = self.dev.create_buffer(size=4 * n, usage=self.usage.MAP_READ | self.usage.COPY_DST)

    def want(self, k: int) -> np.ndarray:
        fib = [np.float32(0), np.float32(1)]
        for _ in range(k):
            fib.append(np.float32(fib[-1] + fib[-2]))
        return np.full(self.n, fib[-1], np.float32)

    def _read(self, buf):
        import wgpu

        enc = self.dev.create_command_encoder()
        enc.copy_buffer_to_buffer(buf, 0, self.staging, 0, 4 * self.n)
        self.dev.queue.submit([enc.finish()])
        self.staging.map_sync(wgpu.MapMode.READ)
        out = np.frombuffer(self.staging.read_mapped(copy=True), np.float32)
        self.staging.unmap()
        return out

    def _group(self, bufs):
        return self.dev.create_bind_group(layout=self.pipe.get_bind_group_layout(0), entries=[
            {"binding": j, "resource": {"buffer": b, "offset": 0, "size": 4 * self.n}} for j, b in enumerate(bufs)])

    def _tensors(self):
        desc = {"data_type": "float32", "shape": [self.n], "writable": True, "readable": True}
        ts = [self.ctx.create_tensor(desc) for _ in range(3)]
        self.ctx.write_tensor(ts[0], self.f0)
        self.ctx.write_tensor(ts[1], self.f1)
        return ts

    def webnn(self, k: int):
        import webnn_gpu as webnn

        ctx = self.ctx
        b = webnn.MLGraphBuilder(ctx)
        a0 = b.input("a", {"data_type": "float32", "shape": [self.n]})
        a1 = b.input("b", {"data_type": "float32", "shape": [self.n]})
        for _ in range(k):
            a0, a1 = a1, b.add(a0, a1)
        g = b.build({"y": a1})
        if g.kernel_count != k:
            raise RuntimeError(f"expected {k} kernels, got {g.kernel_count} "
                               "(is WEBNN_GPU_PASSES=-fuse_elementwise set?)")
        ta, tb, ty = self._tensors()

        def run():
            ctx.dispatch(g, {"a": ta, "b": tb}, {"y": ty})
            return ctx.read_tensor(ty)
        return run

    def bare(self, k: int):
        dev, u = self.dev, self.usage
        bufs = [dev.create_buffer_with_data(data=self.f0.tobytes(), usage=u.STORAGE),
                dev.create_buffer_with_data(data=self.f1.tobytes(), usage=u.STORAGE)]
        bufs += [dev.create_buffer(size=4 * self.n, usage=u.STORAGE | u.COPY_SRC) for _ in range(k)]
        groups = [self._group(bufs[i:i + 3]) for i in range(k)]

        def run():
            enc = dev.create_command_encoder()
            cp = enc.begin_compute_pass()
            cp.set_pipeline(self.pipe)
            for g in groups:
                cp.set_bind_group(0, g)
                cp.dispatch_workgroups(-(-self.n // 64))
            cp.end()
            dev.queue.submit([enc.finish()])
            return self._read(bufs[-1])
        return run

    def webnn_chained(self, k: int):
        import webnn_gpu as webnn

        ctx = self.ctx
        b = webnn.MLGraphBuilder(ctx)
        x0 = b.input("a", {"data_type": "float32", "shape": [self.n]})
        x1 = b.input("b", {"data_type": "float32", "shape": [self.n]})
        step = b.build({"y": b.add(x0, x1)})
        ts = self._tensors()

        def run():
            ctx.write_tensor(ts[0], self.f0)
            ctx.write_tensor(ts[1], self.f1)
            a, bb, c = ts
            for _ in range(k):
                ctx.dispatch(step, {"a": a, "b": bb}, {"y": c})
                a, bb, c = bb, c, a
            return ctx.read_tensor(bb)
        return run

    def bare_chained(self, k: int):
        dev, u = self.dev, self.usage
        bufs = [dev.create_buffer(size=4 * self.n, usage=u.STORAGE | u.COPY_SRC | u.COPY_DST) for _ in range(3)]
        rot = [self._group([bufs[i % 3], bufs[(i + 1) % 3], bufs[(i + 2) % 3]]) for i in range(3)]

        def run():
            dev.queue.write_buffer(bufs[0], 0, self.f0.tobytes())
            dev.queue.write_buffer(bufs[1], 0, self.f1.tobytes())
            for i in range(k):
                enc = dev.create_command_encoder()
                cp = enc.begin_compute_pass()
                cp.set_pipeline(self.pipe)
                cp.set_bind_group(0, rot[i % 3])
                cp.dispatch_workgroups(-(-self.n // 64))
                cp.end()
                dev.queue.submit([enc.finish()])
            return self._read(bufs[(k + 1) % 3])
        return run


def dispatch_overhead(args, n: int = 256, kernels: int = 64, rounds: int = 30) -> dict:
    """Per-kernel and per-dispatch cost of webnn-gpu vs bare wgpu (Fibonacci chains)."""
    import webnn_gpu as webnn

    old = os.environ.get("WEBNN_GPU_PASSES")
    os.environ["WEBNN_GPU_PASSES"] = "-fuse_elementwise"  # one kernel per add
    ctx = webnn.ml.create_context()
    try:
        fc = FibChains(ctx, n)
        want = fc.want(kernels)
        runs = {}
        for name, chain, chained in (("webnn-gpu", fc.webnn, fc.webnn_chained),
                                     ("bare wgpu", fc.bare, fc.bare_chained)):
            run_k = chain(kernels)
            np.testing.assert_allclose(run_k(), want, rtol=1e-6)
            run_c = chained(kernels)
            np.testing.assert_allclose(run_c(), want, rtol=1e-6)
            runs[name] = (chain(1), run_k, run_c)
        # the two sides alternate round by round, so that both see the same machine load
        best = {name: [float("inf")] * 3 for name in runs}
        for r in range(rounds):
            for name, fns in runs.items():
                for i, fn in enumerate(fns):
                    if i == 2 and r % 3:  # the chained dispatches take longer: every third round
                        continue
                    t = time.perf_counter()
                    fn()
                    best[name][i] = min(best[name][i], time.perf_counter() - t)
        res = {name: {"one_kernel_us": t1 * 1e6, "per_kernel_us": (tk - t1) / (kernels - 1) * 1e6,
                      "per_dispatch_us": tc / kernels * 1e6} for name, (t1, tk, tc) in best.items()}
    finally:
        if old is None:
            os.environ.pop("WEBNN_GPU_PASSES", None)
        else:
            os.environ["WEBNN_GPU_PASSES"] = old
        ctx.destroy()

    print(f"\nDispatch overhead ({n}-element adds, chains of {kernels}; best of {rounds} rounds, the chained "
          f"dispatches of {-(-rounds // 3)}; webnn-gpu and bare wgpu alternating)")
    print(f"{'':12s} {'1-kernel graph':>16s} {'per extra kernel':>17s} {'per dispatch()':>15s}  (us)")
    for name, r in res.items():
        print(f"{name:12s} {r['one_kernel_us']:16.1f} {r['per_kernel_us']:17.1f} {r['per_dispatch_us']:15.1f}")
    k = res["webnn-gpu"]["per_kernel_us"] / res["bare wgpu"]["per_kernel_us"]
    d = res["webnn-gpu"]["per_dispatch_us"] / res["bare wgpu"]["per_dispatch_us"]
    print(f"  per-kernel cost webnn-gpu / bare wgpu: {k:.2f} (target <= 1.3: {'met' if k <= 1.3 else 'NOT met'})")
    print(f"  per-dispatch cost webnn-gpu / bare wgpu (one submit per step): {d:.2f}")
    return {"dispatch": res, "per_kernel_ratio": k, "per_dispatch_ratio": d}


# ---------------------------------------------------------------- matmul
def matmul(args) -> dict:
    """1024^3 float32: webnn-gpu, NumPy and a plain WGSL kernel (bench_linalg.py's runners)."""
    import bench_linalg as bl

    import webnn_gpu as webnn

    ctx = webnn.ml.create_context()
    rng = np.random.default_rng(0)
    n = bl.N
    a, b = rng.standard_normal((n, n)).astype(np.float32), rng.standard_normal((n, n)).astype(np.float32)
    r = bl.GraphRunner(ctx, lambda bld, o: bld.matmul(o["a"], o["b"]), {"a": a, "b": b})
    rows = {"webnn-gpu": bl._best(r.run, 3), "NumPy": bl._best(lambda: [a @ b for _ in range(bl.REPS)], 3)}
    raw = bl.RawMatmul(ctx.device, a, b)
    rows["plain WGSL (bare wgpu)"] = bl._best(raw.run, 1, raw.reps)
    print(f"\nmatmul {n}^3 float32")
    for name, sec in rows.items():
        print(f"  {name:24s} {sec * 1e3:9.2f} ms {2 * n**3 / sec / 1e9:8.1f} GFLOP/s")
    print(f"  webnn-gpu / NumPy time: {rows['webnn-gpu'] / rows['NumPy']:.1f}x; "
          f"plain WGSL / webnn-gpu time: {rows['plain WGSL (bare wgpu)'] / rows['webnn-gpu']:.1f}x")
    ctx.destroy()
    return {name: 2 * n**3 / sec / 1e9 for name, sec in rows.items()}


# ---------------------------------------------------------------- build
BUILD_SCRIPT = r"""
import json, sys, time
t0 = time.perf_counter()
import numpy as np
import webnn_gpu as webnn
t1 = time.perf_counter()
ctx = webnn.ml.create_context()
t2 = time.perf_counter()
data = open(sys.argv[1], "rb").read()
m = webnn.load(data, ctx)
t3 = time.perf_counter()
x = np.random.default_rng(0).random(m.inputs[m.input_names[0]]["shape"]).astype(np.float32)
m.compute(x)
t4 = time.perf_counter()
m.compute(x)
t5 = time.perf_counter()
m2 = webnn.load(data, ctx)
t6 = time.perf_counter()
m2.compute(x)
t7 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "context_s": t2 - t1, "build_s": t3 - t2, "first_compute_s": t4 - t3,
                  "second_compute_s": t5 - t4, "warm_build_s": t6 - t5, "warm_first_compute_s": t7 - t6}))
"""


def build(args) -> dict:
    """Cold build in fresh processes (Mesa disk cache empty / warm) and a warm build."""
    tflite = peers.selfie_tflite()
    out = {}
    with tempfile.TemporaryDirectory() as empty:
        cases = [("driver cache empty", {"MESA_SHADER_CACHE_DIR": empty}),
                 ("driver cache warm", {})]
        for name, env in cases:
            print(f"  fresh process, {name} ...", flush=True)
            r = subprocess.run([sys.executable, "-c", BUILD_SCRIPT, str(tflite)], capture_output=True, text=True,
                               env={**os.environ, **env}, timeout=3600)
            line = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
            if not line:
                print(f"    failed: {r.stderr.strip()[-400:]}")
                continue
            out[name] = json.loads(line[-1])
    print("\nbuild() of the selfie graph (load = parse the .tflite + build; s)")
    print(f"{'':22s} {'load+build':>11s} {'1st compute':>12s} {'2nd compute':>12s} {'same-process rebuild':>21s}")
    for name, r in out.items():
        print(f"{name:22s} {r['build_s']:11.3f} {r['first_compute_s']:12.3f} {r['second_compute_s']:12.3f} "
              f"{r['warm_build_s']:21.3f}")
    if "driver cache warm" in out:
        r = out["driver cache warm"]
        print(f"  cold (fresh process, driver cache warm): {r['build_s']:.2f} s (target < 1 s: "
              f"{'met' if r['build_s'] < 1 else 'NOT met'}); warm: {r['warm_build_s']:.3f} s "
              f"(target < 0.1 s: {'met' if r['warm_build_s'] < 0.1 else 'NOT met'})")
    return out


# ---------------------------------------------------------------- memory
def memory(args) -> dict:
    """Arena size of the selfie graph vs the peak and the sum of its live intermediates."""
    import webnn_gpu as webnn
    from webnn_gpu import _dtypes
    from webnn_gpu._lower import KernelStep

    ctx = webnn.ml.create_context()
    m = webnn.load(peers.selfie_tflite(), ctx)
    g = m.graph
    vals = {}
    for s in g._steps:
        if isinstance(s, KernelStep):
            for v in s.values:
                r = g._root(v)
                if g._slot[r.id].kind == "tmp":
                    vals[r.id] = _dtypes.buffer_size(r.data_type, r.shape)
    total = sum(vals.values())
    print("\nIntermediate memory of the selfie graph (float32)")
    print(f"  sum of all intermediates      {total / 1e6:8.2f} MB ({len(vals)} values)")
    print(f"  peak of live intermediates    {g._peak_bytes_live / 1e6:8.2f} MB")
    print(f"  arena allocated               {g._arena_bytes / 1e6:8.2f} MB "
          f"({g._arena_bytes / max(1, g._peak_bytes_live):.2f}x the live peak)")
    ctx.destroy()
    return {"sum": total, "peak_live": g._peak_bytes_live, "arena": g._arena_bytes}


SECTIONS = {"selfie": selfie, "dispatch": dispatch_overhead, "matmul": matmul, "build": build, "memory": memory}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="webnn-gpu vs its peers, ratios from one run")
    p.add_argument("--only", action="append", choices=sorted(SECTIONS), help="run only these sections")
    p.add_argument("--no-mesa25", action="store_true", help="skip Mesa 25 and the Dawn runtimes")
    p.add_argument("--repeats", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--json", help="also write the results to this file")
    args = p.parse_args(argv)
    results = {}
    for name in args.only or list(SECTIONS):
        print(f"== {name}", flush=True)
        results[name] = SECTIONS[name](args)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
