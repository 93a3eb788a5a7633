"""Two forms of the tile kernel inside whole models, per launch, in one process.

    .venv/bin/python benchmarks/tile_ab.py MODEL ... --new WEBNN_GPU_FORCE_X=y [--old WEBNN_GPU_FORCE_X=z]
                                          [--rounds 10] [--repeats 10] [--all] [--template T] [--wall RUNS]

Each model (a name known to ``webnn-gpu fetch``, a ``.tflite`` path, or ``mm:M,K,N`` for a float32
matmul of two inputs, ``pw:M,K,N`` for a float32 NHWC 1x1 conv2d of M pixels with constant
weights, a bias and relu6) is loaded twice in one
process (the plan cache off), once under the ``--old`` switches and once under the ``--new`` ones
(``WEBNN_GPU_FORCE_*`` variables, read at build time), and the two graphs are profiled in turn in
each round (the first of odd rounds first, of even rounds second) (``webnn_gpu.profile.profile_graph``: timestamp queries, the median of ``--repeats``).
Prints, for every ``matmul/tile.wgsl`` launch whose WGSL differs between the two builds (every
one with ``--all``), its size note, the least over the rounds of its time in each build, their
ratio and the range of the per-round ratios; then the sums over those launches and over all the
model's kernels. The kernels are paired by position: both builds must launch as many.
``--template`` compares the launches of another template (``conv/depthwise_project_lanes.wgsl``;
``any``: every template). ``--wall RUNS`` also times each round's write / dispatch / read runs of
both graphs in turn (``_common.per_run_us``, all kernels in one pass as in use) and prints the
least wall per inference of each and the range of the per-round ratios.
"""

from __future__ import annotations

import argparse
import os

import numpy as np
from _common import environ, model_paths  # benchmarks/_common.py (the script's folder is on sys.path)

TEMPLATE = "matmul/tile.wgsl"


def _env(pairs: list[str]) -> dict:
    return dict(p.split("=", 1) for p in pairs)


def _load(ctx, path: str):
    """The graph of a model path, ``mm:M,K,N`` (a matmul of two float32 inputs) or ``pw:M,K,N`` (a
    1x1 conv2d with bias and relu6 on a [1, M, 1, K] NHWC input)."""
    import webnn_gpu as webnn

    if path[:3] not in ("mm:", "pw:"):
        return webnn.load(path, ctx).graph
    M, K, N = (int(v) for v in path[3:].split(","))
    b = webnn.MLGraphBuilder(ctx)
    if path.startswith("mm:"):
        x = b.input("a", {"data_type": "float32", "shape": [M, K]})
        return b.build({"c": b.matmul(x, b.input("b", {"data_type": "float32", "shape": [K, N]}))})
    rng = np.random.default_rng(1)
    x = b.input("x", {"data_type": "float32", "shape": [1, M, 1, K]})
    w = b.constant({"data_type": "float32", "shape": [N, 1, 1, K]}, rng.uniform(-1, 1, (N, 1, 1, K)).astype(np.float32))
    bias = b.constant({"data_type": "float32", "shape": [N]}, rng.uniform(-1, 1, N).astype(np.float32))
    y = b.conv2d(x, w, bias=bias, input_layout="nhwc", filter_layout="ohwi")
    return b.build({"y": b.clamp(y, min_value=0.0, max_value=6.0)})


def compare(path: str, old: dict, new: dict, rounds: int, repeats: int, every: bool,
            template: str = TEMPLATE, wall: int = 0) -> None:
    """Profile ``path`` built under ``old`` and ``new`` alternately and print the tile launches."""
    import webnn_gpu as webnn
    from webnn_gpu._lower import KernelStep
    from webnn_gpu.profile import profile_graph
    from _common import per_run_us

    ctx = webnn.ml.create_context()
    keys = set(old) | set(new)
    built = {}
    for name, env in (("old", old), ("new", new)):
        with environ({**dict.fromkeys(keys), **env}):
            g = _load(ctx, path)
        rng = np.random.default_rng(0)
        built[name] = (g, {n: rng.uniform(0, 1, v.shape).astype(np.float32) for n, v in g._inputs.items()})
    steps = {n: [s for s in g._steps if isinstance(s, KernelStep)] for n, (g, _) in built.items()}
    assert len(steps["old"]) == len(steps["new"]), "the two builds launch different kernel counts"
    pick = [k for k, (a, b) in enumerate(zip(steps["old"], steps["new"]))
            if template in ("any", a.template) and (every or a.wgsl != b.wgsl)]
    times = {n: [] for n in built}  # per round: [us per kernel]
    walls = {n: [] for n in built}
    for i in range(rounds):
        order = list(built.items()) if i % 2 == 0 else list(built.items())[::-1]  # neither always first
        for n, (g, inputs) in order:
            times[n].append([r["us"] for r in profile_graph(ctx, g, inputs, repeats)])
        for n, (g, inputs) in order:
            if wall:
                walls[n].append(per_run_us(ctx, g, inputs, wall))
    old_t, new_t = np.array(times["old"]), np.array(times["new"])
    model = path if path[:3] in ("mm:", "pw:") else os.path.basename(path).split(".")[0]
    print(f"{model}: {len(pick)} {template} launches differ")
    for k in pick:
        o, w = old_t[:, k].min(), new_t[:, k].min()
        per = new_t[:, k] / old_t[:, k]
        print(f"  {steps['new'][k].note[:44]:>44} {o:8.1f} {w:8.1f} {w / o:5.2f}  rounds {per.min():.2f}-{per.max():.2f}")
    if pick:
        o, w = old_t[:, pick].sum(1), new_t[:, pick].sum(1)
        print(f"  {'changed launches':>44} {o.min():8.1f} {w.min():8.1f} {w.min() / o.min():5.2f}"
              f"  rounds {(w / o).min():.2f}-{(w / o).max():.2f}")
    o, w = old_t.sum(1), new_t.sum(1)
    print(f"  {'all kernels':>44} {o.min():8.1f} {w.min():8.1f} {w.min() / o.min():5.2f}"
          f"  rounds {(w / o).min():.2f}-{(w / o).max():.2f}", flush=True)
    if wall:
        o, w = np.array(walls["old"]), np.array(walls["new"])
        print(f"  {'wall per inference':>44} {o.min():8.1f} {w.min():8.1f} {w.min() / o.min():5.2f}"
              f"  rounds {(w / o).min():.2f}-{(w / o).max():.2f} (median {np.median(w / o):.2f})", flush=True)
    for g, _ in built.values():
        g.destroy()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("models", nargs="+")
    p.add_argument("--old", action="append", default=[], help="KEY=VALUE for the first build")
    p.add_argument("--new", action="append", default=[], help="KEY=VALUE for the second build")
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--all", action="store_true", help="every tile launch, not only those that differ")
    p.add_argument("--template", default=TEMPLATE, help="the launches compared (any: every template)")
    p.add_argument("--wall", type=int, default=0, help="also time RUNS inferences of each graph per round")
    args = p.parse_args(argv)
    os.environ["WEBNN_GPU_PLAN_CACHE"] = "0"
    for path in [m if m[:3] in ("mm:", "pw:") else model_paths([m])[0] for m in args.models]:
        compare(path, _env(args.old), _env(args.new), args.rounds, args.repeats, args.all, args.template, args.wall)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
