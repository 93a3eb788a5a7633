"""Process CPU time and wall time per inference of zoo models, two checkouts alternating.

    .venv/bin/python benchmarks/tile_ab_cpu.py OLD_CHECKOUT NEW_CHECKOUT [--models iris-landmark ...]
                                               [--rounds 3] [--runs 20]

Each round runs each checkout once in a fresh process (alternating, so that both see the same
machine load); the process loads every model, runs each 3 times, then times ``--runs``
inferences (``write_tensor``, ``dispatch``, ``read_tensor`` on one random input) with
``time.process_time()`` (all threads of the process: lavapipe's workers do the work, so this is
steadier than wall time on a machine shared with other work) and ``time.perf_counter()``.
The table shows, per model, the best round of each checkout (CPU ms and the median wall ms of
that round) and NEW / OLD of both. A checkout is a source tree imported from its own
``webnn_gpu/`` and ``shaders/`` with this environment's packages, as ``benchmarks/ab.py`` does.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

MODELS = ["iris-landmark", "selfie-segmentation", "hand-landmark-full", "pose-landmark-full",
          "face-detection-short-range"]

_RUN = r'''
import json, sys, time, types
root, models, runs = sys.argv[1], sys.argv[2].split(","), int(sys.argv[3])
sys.path.insert(0, root)
shaders = types.ModuleType("webnn_gpu.shaders")
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
    g = webnn.load(fetch(model), ctx).graph
    (iname, d), = g.inputs.items()
    x = np.random.default_rng(0).random(d["shape"]).astype(np.float32)
    ti = ctx.create_tensor({"data_type": d["data_type"], "shape": d["shape"], "writable": True})
    to = {n: ctx.create_tensor({"data_type": od["data_type"], "shape": od["shape"], "readable": True})
          for n, od in g.outputs.items()}
    def run():
        ctx.write_tensor(ti, x)
        ctx.dispatch(g, {iname: ti}, to)
        return [ctx.read_tensor(t) for t in to.values()]
    for _ in range(3):
        run()
    walls = []
    c0 = time.process_time()
    for _ in range(runs):
        t0 = time.perf_counter()
        run()
        walls.append(time.perf_counter() - t0)
    res[model] = [1e3 * (time.process_time() - c0) / runs, 1e3 * float(np.median(walls))]
print("JSON" + json.dumps(res))
'''


def main(argv=None) -> int:
    """Run the comparison (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("old")
    p.add_argument("new")
    p.add_argument("--models", nargs="+", default=MODELS)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--runs", type=int, default=20)
    args = p.parse_args(argv)
    env = dict(os.environ)
    env.setdefault("XDG_RUNTIME_DIR", "/tmp")
    roots = [os.path.abspath(args.old), os.path.abspath(args.new)]
    best: dict[str, dict[str, list[float]]] = {r: {} for r in roots}
    for rnd in range(args.rounds):
        for root in roots:
            out = subprocess.run([sys.executable, "-c", _RUN, root, ",".join(args.models), str(args.runs)],
                                 capture_output=True, text=True, env=env)
            if out.returncode:
                print(out.stderr[-2000:], file=sys.stderr)
                return 1
            res = json.loads(out.stdout.split("JSON")[-1])
            for m, v in res.items():
                if m not in best[root] or v[0] < best[root][m][0]:
                    best[root][m] = v
            print(f"round {rnd + 1} {root}: " + ", ".join(f"{m} {v[0]:.1f}/{v[1]:.1f}" for m, v in res.items()),
                  flush=True)
    print(f"{'model':32s} {'old cpu':>8s} {'new cpu':>8s} {'ratio':>6s} {'old wall':>9s} {'new wall':>9s} {'ratio':>6s}")
    for m in args.models:
        (oc, ow), (nc, nw) = best[roots[0]][m], best[roots[1]][m]
        print(f"{m:32s} {oc:8.2f} {nc:8.2f} {nc / oc:6.3f} {ow:9.2f} {nw:9.2f} {nw / ow:6.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
