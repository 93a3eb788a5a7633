"""The model zoo benchmark: every model of ``webnn_gpu.models.ZOO`` against LiteRT XNNPACK.

    make zoo                                   # all 13 models, float32
    .venv/bin/python benchmarks/zoo.py --models iris-landmark hand-recrop --rounds 30
    .venv/bin/python benchmarks/zoo.py --no-cold      # skip the fresh-process builds

For each model (the 13 ``.tflite`` files of ``mediapipe==0.10.14`` that LiteRT runs,
fetched from the pinned wheel by ``models.fetch_many``), on scikit-image's astronaut
photo resized to the model's input (RGB in [0, 1]):

* **max error**: the largest difference between webnn-gpu's outputs and LiteRT's builtin
  kernels (MediaPipe's transposed convolution rewritten as the builtin one), relative to
  the output's largest magnitude;
* **latency**: median of ``--rounds`` rounds of the tensor path (``write_tensor``,
  ``dispatch``, ``read_tensor`` of every output) against LiteRT's XNNPACK delegate with 1
  and 2 threads (``set_tensor``, ``invoke``, ``get_tensor``), the three runtimes
  alternating inside each round so that the shared machine's load hits them alike; the
  ratio is webnn-gpu over XNNPACK with 2 threads;
* **kernels** per dispatch and distinct **pipelines** of the built graph;
* **first build**: ``webnn.load`` (parse + ``build()``) in a fresh process with Mesa's
  shader cache empty (a new temporary ``MESA_SHADER_CACHE_DIR``, as on a first run: every
  pipeline compiled by LLVM; ``--cold-cache disabled`` sets ``MESA_SHADER_CACHE_DISABLE=true``
  instead, where lavapipe's compile cannot be spread over several queues), and **warm
  build**: the same in a fresh process with the cache warm (this process has just built the
  model).

The timings only mean something as ratios taken in the same run on the same machine.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")

import webnn_gpu as webnn  # noqa: E402
from webnn_gpu import models  # noqa: E402
from webnn_gpu.profile import pipeline_count  # noqa: E402

BUILD_SCRIPT = """
import json, sys, time
import webnn_gpu as webnn
ctx = webnn.ml.create_context()
data = open(sys.argv[1], "rb").read()
t0 = time.perf_counter()
webnn.load(data, ctx, dtype=sys.argv[2])
print(json.dumps({"build_s": time.perf_counter() - t0}))
"""


def astronaut(hw: tuple[int, int]) -> np.ndarray:
    """The astronaut photo, RGB float32 in [0, 1], resized to ``hw``, as a batch of one."""
    from skimage import data
    from skimage.transform import resize

    img = data.astronaut().astype(np.float32) / 255.0
    return resize(img, hw, order=1, anti_aliasing=True, preserve_range=True).astype(np.float32)[None]


def _rewritten(model_bytes: bytes) -> bytes:
    """The model with MediaPipe's Convolution2DTransposeBias as builtin TRANSPOSE_CONV
    (the test suite's rewrite; stock LiteRT kernels lack the custom op)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "model"))
    from litert_reference import replace_transpose_conv_bias

    return replace_transpose_conv_bias(model_bytes)[0]


class LiteRT:
    """One LiteRT interpreter on the model's single input: ``run()`` is set, invoke, get."""

    def __init__(self, model_bytes: bytes, *, threads: int, xnnpack: bool) -> None:
        from ai_edge_litert.interpreter import Interpreter, OpResolverType

        resolver = OpResolverType.AUTO if xnnpack else OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
        self.it = Interpreter(model_content=model_bytes, num_threads=threads, experimental_op_resolver_type=resolver)
        self.it.allocate_tensors()
        self.input = self.it.get_input_details()[0]["index"]
        self.outputs = {d["name"]: d["index"] for d in self.it.get_output_details()}

    def run(self, x: np.ndarray) -> dict[str, np.ndarray]:
        self.it.set_tensor(self.input, x)
        self.it.invoke()
        return {name: self.it.get_tensor(i) for name, i in self.outputs.items()}


class WebNN:
    """The loaded model with its tensors: ``run()`` is write, dispatch, read every output."""

    def __init__(self, ctx, path, dtype: str) -> None:
        self.ctx = ctx
        self.model = webnn.load(path, ctx, dtype=dtype)
        g = self.model.graph
        ((self.input_name, desc),) = g.inputs.items()
        self.t_in = ctx.create_tensor({**desc, "writable": True})
        self.t_out = {n: ctx.create_tensor({**d, "readable": True}) for n, d in g.outputs.items()}
        self.np_dtype = np.float16 if dtype == "float16" else np.float32

    def run(self, x: np.ndarray) -> dict[str, np.ndarray]:
        self.ctx.write_tensor(self.t_in, x.astype(self.np_dtype, copy=False))
        self.ctx.dispatch(self.model.graph, {self.input_name: self.t_in}, self.t_out)
        return {n: self.ctx.read_tensor(t) for n, t in self.t_out.items()}

    @property
    def kernels(self) -> int:
        return self.model.graph.kernel_count

    @property
    def pipelines(self) -> int:
        return pipeline_count(self.model.graph)


def fresh_build(path, dtype: str, env: dict[str, str]) -> float | None:
    """Seconds of ``webnn.load`` in a new Python process with ``env`` added."""
    r = subprocess.run([sys.executable, "-c", BUILD_SCRIPT, str(path), dtype], capture_output=True, text=True,
                       env={**os.environ, **env}, timeout=1800)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    if r.returncode or not lines:
        print(f"    fresh-process build failed: {r.stderr.strip()[-300:]}", file=sys.stderr)
        return None
    return json.loads(lines[-1])["build_s"]


def alternate(runners: dict, warmup: int, rounds: int, settle: float = 0.0) -> dict[str, float]:
    """Median milliseconds of each runner, the runners alternating inside every round; with
    ``settle``, each timed run follows untimed runs of the same runner for at least that many
    seconds (ONNX Runtime's CPU threads spin for 50-100 ms after a run: the next runner shared
    the cores with them; a sleep instead left both runtimes' threads to wake from idle)."""
    times: dict[str, list[float]] = {k: [] for k in runners}
    for _ in range(warmup):
        for run in runners.values():
            run()
    for _ in range(rounds):
        for key, run in runners.items():
            start = time.perf_counter()
            while settle and time.perf_counter() - start < settle:
                run()
            t0 = time.perf_counter()
            run()
            times[key].append(time.perf_counter() - t0)
    return {k: statistics.median(v) * 1e3 for k, v in times.items()}


def run_rows(ctx, paths: dict, bench, args) -> list[dict]:
    """``bench(ctx, name, path, args)`` for every model in turn, each row printed as it comes; then the table."""
    rows = []
    for name, path in paths.items():
        print(f"{name} ...", file=sys.stderr, flush=True)
        rows.append(bench(ctx, name, path, args))
        print("  " + json.dumps(rows[-1]), file=sys.stderr, flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return rows


def bench_model(ctx, name: str, path, args) -> dict:
    data = path.read_bytes()
    engine = WebNN(ctx, path, args.dtype)  # also warms Mesa's shader cache for the warm build
    ((_, desc),) = engine.model.inputs.items()
    x = astronaut(tuple(desc["shape"][1:3]))
    ref = LiteRT(_rewritten(data), threads=1, xnnpack=False).run(x)
    got = engine.run(x)
    err = max(float(np.abs(got[n].astype(np.float64) - r).max()) / max(float(np.abs(r).max()), 1e-30)
              for n, r in ref.items())
    runners = {"webnn": lambda: engine.run(x)}
    for threads in (1, 2):
        lite = LiteRT(data, threads=threads, xnnpack=True)
        runners[f"xnnpack{threads}"] = lambda lite=lite: lite.run(x)
    med = alternate(runners, args.warmup, args.rounds, args.settle)
    row = {"model": name, "max_error": err, "webnn_ms": med["webnn"], "xnnpack1_ms": med["xnnpack1"],
           "xnnpack2_ms": med["xnnpack2"], "ratio": med["webnn"] / med["xnnpack2"],
           "kernels": engine.kernels, "pipelines": engine.pipelines}
    if args.cold:
        row["warm_build_s"] = fresh_build(path, args.dtype, {})
        row["first_build_s"] = first_build(path, args.dtype, getattr(args, "cold_cache", "empty"))
    return row


def first_build(path, dtype: str, cache: str = "empty") -> float | None:
    """Seconds of ``webnn.load`` in a new Python process with Mesa's shader cache in a new empty
    folder (``cache="empty"``) or disabled (``"disabled"``)."""
    if cache == "disabled":
        return fresh_build(path, dtype, {"MESA_SHADER_CACHE_DISABLE": "true"})
    with tempfile.TemporaryDirectory(prefix="zoo-mesa-") as folder:
        return fresh_build(path, dtype, {"MESA_SHADER_CACHE_DIR": folder, "MESA_SHADER_CACHE_DISABLE": "false"})


def format_table(rows: list[dict]) -> str:
    head = ("| model | max error / max abs ref | webnn-gpu ms | XNNPACK 1 thread ms | XNNPACK 2 threads ms | "
            "ratio (2 threads) | kernels | pipelines | first build, cache empty s | warm build s |")
    lines = [head, "| --- " + "| ---: " * 9 + "|"]
    fmt = lambda v, f: "" if v is None else format(v, f)  # noqa: E731
    for r in rows:
        lines.append(f"| {r['model']} | {r['max_error']:.1e} | {r['webnn_ms']:.1f} | {r['xnnpack1_ms']:.1f} | "
                     f"{r['xnnpack2_ms']:.1f} | {r['ratio']:.1f} | {r['kernels']} | {r['pipelines']} | "
                     f"{fmt(r.get('first_build_s'), '.1f')} | {fmt(r.get('warm_build_s'), '.2f')} |")
    ratios = [r["ratio"] for r in rows]
    lines.append("")
    lines.append(f"Geometric mean of the ratios: {math.exp(sum(map(math.log, ratios)) / len(ratios)):.1f} "
                 f"({len(ratios)} models); largest {max(ratios):.1f}.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="*", default=list(models.ZOO), choices=models.ZOO, metavar="NAME")
    parser.add_argument("--dtype", default="float32", choices=["float32", "float16"])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--settle", type=float, default=0.0,
                        help="seconds of untimed runs of each runner before its timed run (default 0: each timed right "
                             "after the runner before it, the protocol of the zoo table; 0.1: every runtime in its own "
                             "steady state, which raised the ratios by about 10%% on 2026-11-27, docs/performance.md)")
    parser.add_argument("--no-cold", dest="cold", action="store_false", help="skip the fresh-process builds")
    parser.add_argument("--cold-cache", choices=["empty", "disabled"], default="empty",
                        help="Mesa's shader cache in the first build: a new empty folder, or disabled")
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args(argv)
    paths = models.fetch_many(args.models)
    rows = run_rows(webnn.ml.create_context(), {n: paths[n] for n in args.models}, bench_model, args)
    print(format_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
