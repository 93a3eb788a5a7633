"""A/B latency and CPU time of models between two checkouts of webnn-gpu, run side by side.

    .venv/bin/python benchmarks/ab.py OLD_CHECKOUT NEW_CHECKOUT [--rounds 4] [--dtype float32] [--mesa25]
                                      [--model selfie-segmentation [--model iris-landmark ...]] [--runs 40]

Each round runs each checkout once in a fresh process (alternating, so both see the same
machine load): the process loads every ``--model`` (names of ``webnn_gpu.models`` or ``.tflite`` paths, default the
selfie model), runs each 5 times, then times ``--runs`` dispatch-to-read runs of each
(``write_tensor``, ``dispatch``, ``read_tensor``) on one random input, with
``time.perf_counter()`` (wall, the median of the round) and ``time.process_time()`` (CPU of
every thread of the process, lavapipe's workers included: steadier than wall time on a machine
shared with other work). Prints every round; then per model the median over rounds of each
side's wall medians, the best round's CPU per inference, and NEW / OLD of both. A checkout is a
source tree (for instance a ``git worktree add --detach DIR COMMIT``); it is imported from its
own ``webnn_gpu/`` and ``shaders/``, with this environment's packages. ``--mesa25`` runs on the
Mesa 25 lavapipe that ``benchmarks/peers.py`` unpacks (set up by ``compare.py`` on first use).

This is how each change in docs/performance.md was measured.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

_RUN = r'''
import json, sys, time, types
root, dtype, models, runs = sys.argv[1], sys.argv[2], sys.argv[3].split(","), int(sys.argv[4])
sys.path.insert(0, root)
shaders = types.ModuleType("webnn_gpu.shaders")  # the checkout's templates, not the installed ones
shaders.__file__ = root + "/shaders/__init__.py"
shaders.__path__ = [root + "/shaders"]
sys.modules["webnn_gpu.shaders"] = shaders
import numpy as np
import webnn_gpu as webnn
assert webnn.__file__.startswith(root), webnn.__file__
from webnn_gpu.models import fetch
ctx = webnn.ml.create_context()
res = {}
for model in models:
    g = webnn.load(model if model.endswith('.tflite') else fetch(model), ctx, dtype=dtype).graph
    (iname, d), = g.inputs.items()
    x = np.random.default_rng(0).random(d["shape"]).astype(np.float16 if d["data_type"] == "float16" else np.float32)
    ti = ctx.create_tensor({"data_type": d["data_type"], "shape": d["shape"], "writable": True})
    to = {n: ctx.create_tensor({"data_type": od["data_type"], "shape": od["shape"], "readable": True})
          for n, od in g.outputs.items()}
    def run():
        ctx.write_tensor(ti, x)
        ctx.dispatch(g, {iname: ti}, to)
        return [ctx.read_tensor(t) for t in to.values()]
    for _ in range(5):
        run()
    walls = []
    c0 = time.process_time()
    for _ in range(runs):
        t0 = time.perf_counter()
        run()
        walls.append(time.perf_counter() - t0)
    res[model] = [1e3 * float(np.median(walls)), 1e3 * (time.process_time() - c0) / runs]
print("JSON" + json.dumps(res))
'''


def main(argv=None) -> int:
    """Run the A/B comparison (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("old")
    p.add_argument("new")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--runs", type=int, default=40, help="timed runs per model and round (default: %(default)s)")
    p.add_argument("--dtype", default="float32", choices=["float32", "float16"])
    p.add_argument("--model", action="append",
                   help="a name of webnn_gpu.models or a .tflite path, repeatable (default: selfie-segmentation)")
    p.add_argument("--mesa25", action="store_true", help="run on the Mesa 25 lavapipe of benchmarks/peers.py")
    args = p.parse_args(argv)
    models = args.model or ["selfie-segmentation"]
    env = dict(os.environ)
    env.setdefault("XDG_RUNTIME_DIR", "/tmp")
    if args.mesa25:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import peers

        env.update(peers.mesa25())
    roots = [os.path.abspath(args.old), os.path.abspath(args.new)]
    walls: dict[str, dict[str, list[float]]] = {r: {m: [] for m in models} for r in roots}
    cpus: dict[str, dict[str, list[float]]] = {r: {m: [] for m in models} for r in roots}
    for rnd in range(args.rounds):
        for root in roots:
            out = subprocess.run([sys.executable, "-c", _RUN, root, args.dtype, ",".join(models), str(args.runs)],
                                 capture_output=True, text=True, env=env)
            if out.returncode:
                print(out.stderr[-2000:], file=sys.stderr)
                return 1
            res = json.loads(out.stdout.split("JSON")[-1])
            for m, (wall, cpu) in res.items():
                walls[root][m].append(wall)
                cpus[root][m].append(cpu)
            print(f"round {rnd + 1} {root}: " + ", ".join(f"{m} {w:.2f} ms (CPU {c:.2f})" for m, (w, c) in res.items()),
                  flush=True)
    print(f"{'model':32s} {'old ms':>8s} {'new ms':>8s} {'new/old':>7s} {'old CPU':>8s} {'new CPU':>8s} {'new/old':>7s}")
    for m in models:
        ow, nw = (statistics.median(walls[r][m]) for r in roots)
        oc, nc = (min(cpus[r][m]) for r in roots)
        print(f"{m:32s} {ow:8.2f} {nw:8.2f} {nw / ow:7.3f} {oc:8.2f} {nc:8.2f} {nc / oc:7.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
