"""A/B latency of a model between two checkouts of webnn-gpu, run side by side.

    .venv/bin/python benchmarks/ab.py OLD_CHECKOUT NEW_CHECKOUT [--rounds 4] [--dtype float32] [--mesa25]
                                      [--model selfie-segmentation]

Each round runs each checkout once in a fresh process (alternating, so both see the same
machine load): load the model, 5 warm-up runs, then the median of 40 dispatch-to-read runs of ``--model`` (a name of ``webnn_gpu.models``, default the
selfie model)
(``write_tensor``, ``dispatch``, ``read_tensor``) on one random input. Prints every run, the
median of each side and the ratio NEW / OLD. A checkout is a source tree (for instance a
``git worktree add --detach DIR COMMIT``); it is imported from its own ``webnn_gpu/`` and
``shaders/``, with this environment's packages. ``--mesa25`` runs on the Mesa 25 lavapipe
that ``benchmarks/peers.py`` unpacks (set up by ``compare.py`` on first use).

This is how each change in docs/performance.md ("What the second session changed") was
measured.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

_RUN = r'''
import sys, time, types
root, dtype, model = sys.argv[1], sys.argv[2], sys.argv[3]
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
g = webnn.load(fetch(model), ctx, dtype=dtype).graph
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
times = []
for _ in range(40):
    t0 = time.perf_counter()
    run()
    times.append(time.perf_counter() - t0)
print(1e3 * float(np.median(times)))
'''


def main(argv=None) -> int:
    """Run the A/B comparison (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("old")
    p.add_argument("new")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--dtype", default="float32", choices=["float32", "float16"])
    p.add_argument("--model", default="selfie-segmentation", help="a name of webnn_gpu.models (default: %(default)s)")
    p.add_argument("--mesa25", action="store_true", help="run on the Mesa 25 lavapipe of benchmarks/peers.py")
    args = p.parse_args(argv)
    env = dict(os.environ)
    env.setdefault("XDG_RUNTIME_DIR", "/tmp")
    if args.mesa25:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import peers

        env.update(peers.mesa25())
    roots = [os.path.abspath(args.old), os.path.abspath(args.new)]
    results: dict[str, list[float]] = {r: [] for r in roots}
    for _ in range(args.rounds):
        for root in roots:
            out = subprocess.run([sys.executable, "-c", _RUN, root, args.dtype, args.model], capture_output=True, text=True,
                                 env=env)
            if out.returncode:
                print(out.stderr[-2000:], file=sys.stderr)
                return 1
            results[root].append(float(out.stdout.split()[-1]))
            print(f"{root}: {results[root][-1]:.2f} ms", flush=True)
    old, new = (statistics.median(results[r]) for r in roots)
    print(f"old {old:.2f} ms, new {new:.2f} ms, new / old {new / old:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
