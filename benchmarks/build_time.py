"""First-build time of models: cold (Mesa's shader cache empty) and warm, each in a fresh process.

    .venv/bin/python benchmarks/build_time.py [MODEL ...] [--zoo DIR] [--checkout DIR ...]
                                              [--rounds 1] [--dtype float32] [--no-warm]
    .venv/bin/python benchmarks/build_time.py --per-pipeline [MODEL ...] [--zoo DIR] [--checkout DIR]
                                              [--json FILE]
    .venv/bin/python benchmarks/build_time.py --warm-profile [MODEL ...] [--zoo DIR] [--checkout DIR]

A MODEL is a ``.tflite`` path or a name ``webnn-gpu fetch`` knows (default: the selfie
segmenter); ``--zoo DIR`` adds every ``*.tflite`` of a folder. For each model and each
checkout (alternating, so that every side sees the same machine load) one fresh process times
``webnn.load`` (which converts, compiles and warms every pipeline) with Mesa's shader cache in
an empty private folder (``MESA_SHADER_CACHE_DIR``: the cache is empty, as on a first run, and
the shared per-user cache is neither read nor filled), and the engine's lowered plans
(``webnn_gpu._plancache``) in an empty folder of their own; a second fresh process then times the
same load with both folders filled (warm). ``--no-plan-cache`` measures without the plans
(``WEBNN_GPU_PLAN_CACHE=0``). Prints per model the distinct pipelines, the kernels,
and wall and CPU seconds of both builds (CPU: user + system time of the process, its compile
threads and the driver's queue thread included; on a machine shared with other work it is the
steadier number), the CPU seconds of the cold build's busiest thread (on Linux; lavapipe
compiles on one queue thread per device, so with a core per queue the cold build's wall time
on an idle machine is about this), then the totals per checkout.

Every process runs with compiled bytecode, as an installed package has it: the ``.pyc`` files of
each checkout and of the packages it imports are written first, by one untimed load per checkout
(``WEBNN_GPU_WARMUP=0``: no driver compile), into a temporary ``PYTHONPYCACHEPREFIX`` (so that a
read-only checkout gets them too, and ``PYTHONDONTWRITEBYTECODE`` in the environment does not
make every process compile the engine's modules again, about 0.1-0.3 s of a warm build);
``--no-bytecode`` measures with the environment as it is.

A checkout is a source tree of webnn-gpu (for instance ``git archive COMMIT | tar -x -C DIR``);
it is imported from its own ``webnn_gpu/`` and ``shaders/`` with this environment's packages,
as ``benchmarks/ab.py`` does; the default is this one. ``--no-template-cache`` also starts
without the rendered-template caches (``WEBNN_GPU_TEMPLATE_CACHE=0``).

``--per-pipeline`` measures, per model, each distinct pipeline instead: in one fresh process
with Mesa's cache empty, the time of its first run at ``build()`` (LLVM's compile on lavapipe;
each pipeline in a submission of its own) and the run time of the kernels that use it
(timestamp queries, median of ``--repeats``), with the size of its WGSL and the CPU time of
making it (naga's and the driver's front end: what a build with Mesa's cache warm spends on
it); then the sums per template over all models. This shows which pipelines cost the first
build and whether their specialisation pays at run time. ``--warm-profile`` shows where a warm
load's time goes instead (after a cold load in the same private folders): the main thread's
phases (the plan's key and read, or reading, converting, rules and lowering; uploads, bind
groups, waits), the pipelines made by template (CPU of naga's module and of the pipeline:
naga's SPIR-V and the driver's front end) and each thread's CPU. ``--json FILE`` also writes the rows. The same table for one
model in this process: ``webnn-gpu profile --compile-times MODEL`` (with
``MESA_SHADER_CACHE_DISABLE=true`` for cold compiles).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile

_PREAMBLE = r'''
import json, resource, sys, time, types
root = sys.argv[1]
if root:
    sys.path.insert(0, root)
    shaders = types.ModuleType("webnn_gpu.shaders")  # the checkout's templates, not the installed ones
    shaders.__file__ = root + "/shaders/__init__.py"
    shaders.__path__ = [root + "/shaders"]
    sys.modules["webnn_gpu.shaders"] = shaders
import webnn_gpu as webnn
from webnn_gpu._lower import KernelStep
assert not root or webnn.__file__.startswith(root), webnn.__file__
'''

_RUN = _PREAMBLE + r'''
path, dtype = sys.argv[2], sys.argv[3]


def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def threads():
    """CPU seconds of each thread of this process (Linux; {} elsewhere)."""
    import os
    out = {}
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return out
    tick = os.sysconf("SC_CLK_TCK")
    for t in tasks:
        try:
            with open(f"/proc/self/task/{t}/stat") as fh:
                f = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[t] = (int(f[11]) + int(f[12])) / tick
    return out


ctx = webnn.ml.create_context()
t0, c0, th0 = time.perf_counter(), cpu(), threads()
graph = webnn.load(path, ctx, dtype=dtype).graph
wall, secs, th1 = time.perf_counter() - t0, cpu() - c0, threads()
kernels = [s for s in graph._steps if isinstance(s, KernelStep)]
busiest = max((v - th0.get(k, 0.0) for k, v in th1.items()), default=float("nan"))
print(json.dumps({"wall": wall, "cpu": secs, "busiest": busiest, "kernels": len(kernels),
                  "pipelines": len({id(s.pipeline) for s in kernels})}))
'''

_PER_PIPELINE = _PREAMBLE + r'''
import numpy as np
path, dtype, repeats = sys.argv[2], sys.argv[3], int(sys.argv[4])
from webnn_gpu import _dtypes
from webnn_gpu.profile import pipeline_rows, profile_graph
ctx = webnn.ml.create_context()
ctx._pipelines.timed = True
t0 = time.perf_counter()
graph = webnn.load(path, ctx, dtype=dtype).graph
wall = time.perf_counter() - t0
rng = np.random.default_rng(0)
inputs = {n: rng.random(d["shape"]).astype(_dtypes.info(d["data_type"]).numpy) for n, d in graph.inputs.items()}
rows = profile_graph(ctx, graph, inputs, repeats) if "timestamp-query" in ctx.features else None
print(json.dumps({"wall": wall, "pipelines": pipeline_rows(graph, rows)}))
'''


_WARM_PROFILE = _PREAMBLE + r'''
import functools, os, threading
path, dtype = sys.argv[2], sys.argv[3]
from webnn_gpu import _kernels, graph as G
import webnn_gpu.tflite as T
main = threading.main_thread()
phases = {}  # name -> [wall, main-thread CPU, calls]


def timed(owner, name, label):
    f = getattr(owner, name, None)
    if f is None:  # a checkout without it
        return

    @functools.wraps(f)
    def w(*a, **k):
        if threading.current_thread() is not main:
            return f(*a, **k)
        t0, c0 = time.perf_counter(), time.thread_time()
        try:
            return f(*a, **k)
        finally:
            x = phases.setdefault(label, [0.0, 0.0, 0])
            x[0] += time.perf_counter() - t0
            x[1] += time.thread_time() - c0
            x[2] += 1
    setattr(owner, name, w)


try:
    from webnn_gpu import _plancache as P
    timed(P, "key", "plan key"); timed(P, "load", "plan read"); timed(P, "store", "plan write")
except ImportError:
    pass
timed(T, "read_model", "read flatbuffer"); timed(T, "convert", "convert")
timed(G.MLGraph, "_lower", "rules + lowering"); timed(G, "_upload", "upload constants")
timed(G, "_upload_packed", "upload constants")
timed(G.MLGraph, "_make_bind_group", "bind groups"); timed(_kernels.PipelineCache, "submit_once", "warm-up submits")
timed(_kernels.PipelineCache, "get_many", "get_many (waits)"); timed(G.MLGraph, "_warm_up", "warm-up wait")
made = []  # (template, KB, module CPU, pipeline CPU)
real = _kernels.PipelineCache._compile


def compile_(self, k, wgsl, template, label, entry):
    dev = self.device
    c0 = time.thread_time()
    module = dev.create_shader_module(code=wgsl, label=label or template)
    c1 = time.thread_time()
    pipe = dev.create_compute_pipeline(layout="auto", compute={"module": module, "entry_point": entry},
                                       label=label or template)
    made.append((template, len(wgsl) / 1024, c1 - c0, time.thread_time() - c1))
    return pipe


_kernels.PipelineCache._compile = compile_


def threads():
    out = {}
    try:
        for t in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{t}/stat") as fh:
                f = fh.read().rsplit(")", 1)[1].split()
            out[t] = (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
    except OSError:
        pass
    return out


ctx = webnn.ml.create_context()
r0 = resource.getrusage(resource.RUSAGE_SELF)
th0, t0, m0 = threads(), time.perf_counter(), time.thread_time()
webnn.load(path, ctx, dtype=dtype)
wall, mcpu, th1 = time.perf_counter() - t0, time.thread_time() - m0, threads()
r1 = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"wall": wall, "cpu": r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime, "main": mcpu,
                  "phases": phases, "made": made,
                  "threads": sorted((v - th0.get(k, 0.0) for k, v in th1.items()), reverse=True)}))
'''


def measure(model: str, *, root: str = "", dtype: str = "float32", cache_dir: str, env: dict | None = None) -> dict:
    """Time one ``webnn.load`` of ``model`` in a fresh process with Mesa's shader cache in
    ``cache_dir`` (empty: a cold build; filled by an earlier call: a warm one).

    Returns:
        dict: ``wall`` and ``cpu`` seconds, ``kernels`` and distinct ``pipelines`` of the graph.

    Raises:
        RuntimeError: the process failed (its last output in the message).
    """
    return _fresh_process(model, [_RUN, root, model, dtype], cache_dir, env)


def _fresh_process(model: str, args: list[str], cache_dir: str, env: dict | None) -> dict:
    """Run ``python -c *args`` with Mesa's shader cache in ``cache_dir``; its last line of
    output, read as JSON (RuntimeError naming ``model`` with its last error line if it fails)."""
    env = dict(os.environ if env is None else env)
    env.setdefault("XDG_RUNTIME_DIR", "/tmp")
    env.pop("MESA_SHADER_CACHE_DISABLE", None)
    env["MESA_SHADER_CACHE_DIR"] = cache_dir
    out = subprocess.run([sys.executable, "-c", *args], capture_output=True, text=True, env=env)
    if out.returncode:
        raise RuntimeError(f"{model}: {out.stderr.strip().splitlines()[-1] if out.stderr.strip() else out.returncode}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def per_pipeline(model: str, *, root: str = "", dtype: str = "float32", repeats: int = 5, cache_dir: str,
                 env: dict | None = None) -> dict:
    """Time each pipeline of ``model``'s cold build and its kernels' run time in a fresh process
    (of the checkout ``root``, default this one) with Mesa's shader cache in the empty folder
    ``cache_dir``.

    Returns:
        dict: ``wall`` (seconds of the timed load) and ``pipelines``
        (``webnn_gpu.profile.pipeline_rows``: template, label, kernels, wgsl_bytes,
        wgsl_lines, compile_s, us).

    Raises:
        RuntimeError: the process failed (its last output in the message).
    """
    return _fresh_process(model, [_PER_PIPELINE, root, model, dtype, str(repeats)], cache_dir, env)


def with_bytecode(roots: list[str], model: str, dtype: str, env: dict, folder: str) -> dict:
    """``env`` with compiled bytecode kept in ``folder`` (``PYTHONPYCACHEPREFIX``; without
    ``PYTHONDONTWRITEBYTECODE``), filled by one untimed load of ``model`` per checkout of ``roots``
    that makes its pipelines but runs none (``WEBNN_GPU_WARMUP=0``: no driver compile), so that the
    measured processes import what an installed package would: modules compiled before.

    Raises:
        RuntimeError: the load failed (as :func:`measure`).
    """
    env = dict(env)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = folder
    for root in roots:
        with tempfile.TemporaryDirectory(prefix="build-time-mesa-") as cache:
            measure(model, root=root, dtype=dtype, cache_dir=cache, env=dict(env, WEBNN_GPU_WARMUP="0"))
    return env


def _per_pipeline_main(args, models: list[str], env: dict, root: str) -> int:
    from webnn_gpu.profile import format_pipelines

    every: list[dict] = []
    failed = []
    for model in models:
        name = os.path.splitext(os.path.basename(model))[0]
        try:
            with tempfile.TemporaryDirectory(prefix="build-time-mesa-") as cache:
                res = per_pipeline(model, root=root, dtype=args.dtype, repeats=args.repeats, cache_dir=cache, env=env)
        except RuntimeError as exc:
            print(f"{name}: failed: {exc}", flush=True)
            failed.append(name)
            continue
        print(f"== {name}: cold build {res['wall']:.1f} s (each pipeline's first run timed on its own)")
        print(format_pipelines(res["pipelines"]), flush=True)
        every += [dict(r, model=name) for r in res["pipelines"]]
    if len(models) > 1 and every:
        print(f"== all {len(models) - len(failed)} models")
        by: dict[str, list] = {}
        for r in every:
            t = by.setdefault(r["template"], [0, 0.0, 0.0, 0.0, 0.0, 0, 0.0])
            t[0] += 1
            t[1] += r["compile_s"] or 0.0
            t[2] += r.get("compile_cpu_s") or 0.0
            t[3] = max(t[3], r["compile_s"] or 0.0)
            t[4] += r["us"] or 0.0
            t[5] += r["wgsl_bytes"]
            t[6] += r.get("create_cpu_s") or 0.0
        print(f"  {'template':<28} {'pipes':>5} {'compile s':>9} {'CPU s':>8} {'slowest s':>9} {'run us':>9} "
              f"{'WGSL KB':>8} {'make s':>7}")
        for name, (n, cs, cpu, worst, us, nbytes, make) in sorted(by.items(), key=lambda kv: -kv[1][1]):
            print(f"  {name:<28} {n:>5} {cs:>9.2f} {cpu:>8.2f} {worst:>9.2f} {us:>9.1f} {nbytes / 1024:>8.0f} "
                  f"{make:>7.2f}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(every, fh, indent=1)
    if failed:
        print(f"failed to load: {', '.join(failed)}")
    return 1 if failed else 0


def _warm_profile_main(args, models: list[str], env: dict, root: str) -> int:
    """Per model: a cold load fills Mesa's cache and the plans in private folders, then a fresh
    process times a warm load by phase (the main thread's), by template (making the pipelines:
    naga's module, then the pipeline, which is naga's SPIR-V and the driver's front end) and by
    thread."""
    failed = []
    for model in models:
        name = os.path.splitext(os.path.basename(model))[0]
        try:
            with tempfile.TemporaryDirectory(prefix="build-time-mesa-") as cache:
                pair = dict(env, WEBNN_GPU_PLAN_CACHE_DIR=os.path.join(cache, "plans"))
                measure(model, root=root, dtype=args.dtype, cache_dir=cache, env=pair)
                res = _fresh_process(model, [_WARM_PROFILE, root, model, args.dtype], cache, pair)
        except RuntimeError as exc:
            print(f"{name}: failed: {exc}", flush=True)
            failed.append(name)
            continue
        made = res["made"]
        print(f"== {name}: warm load {res['wall']:.3f} s wall, {res['cpu']:.3f} s CPU (main thread "
              f"{res['main']:.3f} s); threads' CPU s: {', '.join(f'{t:.2f}' for t in res['threads'] if t >= 0.01)}")
        print(f"  {'main thread':<28} {'wall ms':>8} {'CPU ms':>7} {'calls':>5}")
        for label, (w, c, n) in res["phases"].items():
            print(f"  {label:<28} {w * 1e3:>8.1f} {c * 1e3:>7.1f} {n:>5}")
        by: dict = {}
        for template, kb, mod, pipe in made:
            t = by.setdefault(template, [0, 0.0, 0.0, 0.0])
            t[0] += 1
            t[1] += kb
            t[2] += mod
            t[3] += pipe
        print(f"  {'pipelines made, by template':<34} {'pipes':>5} {'WGSL KB':>8} {'module s':>8} {'pipeline s':>10}")
        for template, (n, kb, mod, pipe) in sorted(by.items(), key=lambda kv: -(kv[1][2] + kv[1][3])):
            print(f"  {template:<34} {n:>5} {kb:>8.0f} {mod:>8.3f} {pipe:>10.3f}")
        print(f"  {'all':<34} {len(made):>5} {sum(m[1] for m in made):>8.0f} {sum(m[2] for m in made):>8.3f} "
              f"{sum(m[3] for m in made):>10.3f}", flush=True)
    return 1 if failed else 0


def _models(args) -> list[str]:
    models = list(args.models)
    for folder in args.zoo:
        models += sorted(glob.glob(os.path.join(folder, "*.tflite")))
    if not models:
        models = ["selfie-segmentation"]
    out = []
    for m in models:
        if not os.path.exists(m):
            from webnn_gpu.models import fetch

            m = fetch(m)
        out.append(m)
    return out


def main(argv=None) -> int:
    """Measure and print the table (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("models", nargs="*", help=".tflite paths or names known to 'webnn-gpu fetch'")
    p.add_argument("--zoo", action="append", default=[], help="a folder: every *.tflite in it")
    p.add_argument("--checkout", action="append", default=[], help="a source tree to measure (repeatable)")
    p.add_argument("--rounds", type=int, default=1, help="cold/warm pairs per model and checkout (median)")
    p.add_argument("--dtype", default="float32", choices=["float32", "float16"])
    p.add_argument("--no-warm", action="store_true", help="only the cold build")
    p.add_argument("--no-template-cache", action="store_true", help="WEBNN_GPU_TEMPLATE_CACHE=0 too")
    p.add_argument("--no-plan-cache", action="store_true", help="WEBNN_GPU_PLAN_CACHE=0: no lowered plans kept")
    p.add_argument("--no-bytecode", action="store_true",
                   help="do not compile the modules' bytecode first (PYTHONDONTWRITEBYTECODE as it is)")
    p.add_argument("--per-pipeline", action="store_true",
                   help="per model, each pipeline's cold compile and its kernels' run time (one checkout)")
    p.add_argument("--repeats", type=int, default=5, help="--per-pipeline: kernel timing repeats (median)")
    p.add_argument("--json", help="--per-pipeline: also write the rows (with their model) to this file")
    p.add_argument("--warm-profile", action="store_true",
                   help="per model, where a warm load's time goes: main thread by phase, pipelines by template")
    args = p.parse_args(argv)
    roots = [os.path.abspath(c) for c in args.checkout] or [""]
    env = dict(os.environ)
    if args.no_template_cache:
        env["WEBNN_GPU_TEMPLATE_CACHE"] = "0"
    if args.no_plan_cache:
        env["WEBNN_GPU_PLAN_CACHE"] = "0"
    if (args.per_pipeline or args.warm_profile) and len(roots) > 1:
        p.error("--per-pipeline and --warm-profile measure one checkout")
    models = _models(args)
    pyc = None if args.no_bytecode else tempfile.TemporaryDirectory(prefix="build-time-pyc-")
    try:
        if pyc is not None:
            env = with_bytecode(roots, models[0], args.dtype, env, pyc.name)
        if args.per_pipeline:
            return _per_pipeline_main(args, models, env, roots[0])
        if args.warm_profile:
            return _warm_profile_main(args, models, env, roots[0])
        return _table(args, models, env, roots)
    finally:
        if pyc is not None:
            pyc.cleanup()


def _table(args, models: list[str], env: dict, roots: list[str]) -> int:
    """Measure each model's cold and warm build per checkout and print the table."""
    names = {r: (os.path.basename(r) or r) if r else "this" for r in roots}
    print(f"{'model':<36} {'checkout':<12} {'pipes':>5} {'kernels':>7} {'cold wall':>9} {'cold cpu':>8} "
          f"{'busiest':>7} {'warm wall':>9} {'warm cpu':>8}", flush=True)
    totals = {r: {"cold_wall": 0.0, "cold_cpu": 0.0, "cold_busiest": 0.0, "warm_wall": 0.0, "warm_cpu": 0.0,
                  "pipelines": 0, "models": 0, "worst": 0.0} for r in roots}
    failed = []
    for model in models:
        name = os.path.splitext(os.path.basename(model))[0]
        runs: dict[str, list[dict]] = {r: [] for r in roots}
        try:
            for _ in range(args.rounds):
                for r in roots:
                    with tempfile.TemporaryDirectory(prefix="build-time-mesa-") as cache:
                        # the lowered plans (webnn_gpu._plancache) start empty too, and the warm
                        # build finds the cold one's, as it finds Mesa's cache filled
                        pair = dict(env, WEBNN_GPU_PLAN_CACHE_DIR=os.path.join(cache, "plans"))
                        cold = measure(model, root=r, dtype=args.dtype, cache_dir=cache, env=pair)
                        warm = None if args.no_warm else measure(model, root=r, dtype=args.dtype, cache_dir=cache,
                                                                 env=pair)
                    runs[r].append({"cold": cold, "warm": warm})
        except RuntimeError as exc:
            print(f"{name:<36} failed: {exc}", flush=True)
            failed.append(name)
            continue
        for r in roots:
            def med(which, key, r=r):
                vals = [x[which][key] for x in runs[r] if x[which] is not None and key in x[which]]
                return statistics.median(vals) if vals else float("nan")

            row = {k: med(w, s) for k, (w, s) in {"cold_wall": ("cold", "wall"), "cold_cpu": ("cold", "cpu"),
                                                  "cold_busiest": ("cold", "busiest"), "warm_wall": ("warm", "wall"),
                                                  "warm_cpu": ("warm", "cpu")}.items()}
            first = runs[r][0]["cold"]
            print(f"{name:<36} {names[r]:<12} {first['pipelines']:>5} {first['kernels']:>7} {row['cold_wall']:>9.1f} "
                  f"{row['cold_cpu']:>8.1f} {row['cold_busiest']:>7.1f} {row['warm_wall']:>9.2f} "
                  f"{row['warm_cpu']:>8.2f}", flush=True)
            t = totals[r]
            for k, v in row.items():
                t[k] += v
            t["pipelines"] += first["pipelines"]
            t["models"] += 1
            t["worst"] = max(t["worst"], row["cold_wall"])
    for r in roots:
        t = totals[r]
        warm = "" if args.no_warm else f"; warm {t['warm_wall']:.2f} s wall, {t['warm_cpu']:.2f} s CPU"
        print(f"total {names[r]}: {t['models']} models, {t['pipelines']} pipelines; cold {t['cold_wall']:.1f} s wall "
              f"(slowest {t['worst']:.1f} s), {t['cold_cpu']:.1f} s CPU, busiest threads {t['cold_busiest']:.1f} s{warm}")
    if len(roots) > 1:
        base = totals[roots[0]]
        for r in roots[1:]:
            t = totals[r]
            print(f"{names[r]} / {names[roots[0]]}: cold CPU {t['cold_cpu'] / max(base['cold_cpu'], 1e-9):.2f}, "
                  f"pipelines {t['pipelines']} / {base['pipelines']}")
    if failed:
        print(f"failed to load: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
