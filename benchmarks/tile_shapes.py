"""GFLOP/s of the matmul tile kernel at the shapes the zoo models run, measured inside the models.

    .venv/bin/python benchmarks/tile_shapes.py [MODEL ...] [--checkout DIR ...] [--rounds 2]
                                               [--repeats 10] [--matmul 1024] [--json FILE]

A MODEL is a ``.tflite`` path or a name ``webnn-gpu fetch`` knows (default: selfie-segmentation,
selfie-segmentation-landscape, face-landmark, hand-landmark-full). For each model, each round
runs each checkout once in a fresh process (alternating, so that both see the same machine
load): the process loads the model, records the size of every ``matmul/tile.wgsl`` and
``matmul/small.wgsl`` launch (M, N, K, window, tile, epilogue), times every kernel with
timestamp queries (``webnn_gpu.profile``; each kernel in a pass of its own, so a few us of
pass overhead are included) and prints one JSON line. ``--matmul S`` also times an S^3
float32 matmul graph the same way. The table shows, per launch, the median microseconds of
each checkout and GFLOP/s (2 flops per multiply-add of the real K; padding not counted); a tile
``TMxTN`` ends in ``s`` for the subgroup variant and in ``d`` for sizes from the parameter buffer.

A checkout is a source tree of webnn-gpu imported from its own ``webnn_gpu/`` and ``shaders/``
with this environment's packages, as ``benchmarks/ab.py`` does; the default is this one.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

DEFAULT_MODELS = ["selfie-segmentation", "selfie-segmentation-landscape", "face-landmark", "hand-landmark-full"]

_RUN = r'''
import json, sys, types
root, model, repeats, mm = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
if root:
    sys.path.insert(0, root)
    shaders = types.ModuleType("webnn_gpu.shaders")
    shaders.__file__ = root + "/shaders/__init__.py"
    shaders.__path__ = [root + "/shaders"]
    sys.modules["webnn_gpu.shaders"] = shaders
import numpy as np
import webnn_gpu as webnn
from webnn_gpu import _lower, profile
assert not root or webnn.__file__.startswith(root), webnn.__file__

seen = {}
orig = _lower.LowerContext.kernel


def kernel(self, template, inputs, outputs, n, **kw):
    step = orig(self, template, inputs, outputs, n, **kw)
    if template in ("matmul/tile.wgsl", "matmul/small.wgsl"):
        v = kw
        ep = v.get("ep")
        steps = [s.get("op") for s in (self.node.attrs.get("epilogue") or [])]
        if template == "matmul/small.wgsl":
            prm = [x for name, x in inputs if name == "prm"][0].data
            M, N, K = int(prm[1]), int(prm[2]), int(prm[3])
            seen[id(step)] = dict(M=M, N=N, K=K, win=1, tile="1x1", dyn=True, op=self.node.op,
                                  batch=int(prm[0]) // max(1, M * N), ep=steps, label=self.label)
        else:
            batches = max(1, int(n) // max(1, v["tiles_m"] * v["tiles_n"]))
            seen[id(step)] = dict(M=v["M"], N=v["N"], K=v["KC"] * v["KH"] * v["KW"], win=v["KH"] * v["KW"],
                                  tile=f"{v['TM']}x{4 * v['TN4']}" + ("s" if v.get("sg") else ""), dyn=bool(v.get("dyn")), op=self.node.op,
                                  batch=batches, ep=steps, label=self.label,
                                  pro=("s" if v.get("a_scale") else "") + ("a" if v.get("a_add") else ""))
    return step


_lower.LowerContext.kernel = kernel
ctx = webnn.ml.create_context()
rows = []
rng = np.random.default_rng(0)
if model != "-":
    from webnn_gpu.models import fetch
    import os
    path = model if os.path.exists(model) else fetch(model)
    graph = webnn.load(path, ctx).graph
    inputs = {n: rng.random(d["shape"]).astype(np.float32) for n, d in graph.inputs.items()}
    prof = profile.profile_graph(ctx, graph, inputs, repeats)
    kernels = [s for s in graph._steps if isinstance(s, _lower.KernelStep)]
    total = sum(r["us"] for r in prof)
    for s, r in zip(kernels, prof):
        if id(s) in seen:
            rows.append(dict(seen[id(s)], us=r["us"]))
    pipes = profile.pipeline_count(graph)
else:
    total, pipes = 0.0, 0
if mm:
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [mm, mm]})
    w = b.input("w", {"data_type": "float32", "shape": [mm, mm]})
    g = b.build({"y": b.matmul(x, w)})
    prof = profile.profile_graph(ctx, g, {"x": rng.random((mm, mm), np.float32), "w": rng.random((mm, mm), np.float32)},
                                 max(3, repeats // 3))
    kernels = [s for s in g._steps if isinstance(s, _lower.KernelStep)]
    for s, r in zip(kernels, prof):
        if id(s) in seen:
            rows.append(dict(seen[id(s)], us=r["us"], label="matmul"))
print("JSON" + json.dumps(dict(rows=rows, total=total, pipelines=pipes)))
'''


def _run(root: str, model: str, repeats: int, mm: int, env: dict) -> dict:
    out = subprocess.run([sys.executable, "-c", _RUN, root, model, str(repeats), str(mm)], capture_output=True,
                         text=True, env=env)
    if out.returncode:
        raise RuntimeError(out.stderr[-3000:])
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("JSON")][-1]
    return json.loads(line[4:])


def main(argv=None) -> int:
    """Measure and print the table (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("models", nargs="*")
    p.add_argument("--checkout", action="append", default=[])
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--matmul", type=int, default=0, help="also time an S^3 float32 matmul")
    p.add_argument("--json", help="write the raw results to this file")
    args = p.parse_args(argv)
    env = dict(os.environ)
    env.setdefault("XDG_RUNTIME_DIR", "/tmp")
    roots = [os.path.abspath(c) for c in args.checkout] or [""]
    models = args.models or DEFAULT_MODELS
    todo = [(m, 0) for m in models] + ([("-", args.matmul)] if args.matmul else [])
    raw: dict = {}
    for model, mm in todo:
        res = {r: [] for r in roots}
        for _ in range(args.rounds):
            for r in roots:
                res[r].append(_run(r, model, args.repeats, mm, env))
        raw[model] = res
        first = res[roots[0]][0]
        names = [os.path.basename(r) or "this" for r in roots]
        print(f"\n{model}: pipelines " + ", ".join(f"{n} {res[r][0]['pipelines']}" for n, r in zip(names, roots))
              + "; all kernels (us) " + ", ".join(f"{n} {statistics.median(x['total'] for x in res[r]):.0f}"
                                                  for n, r in zip(names, roots)))
        head = f"{'M':>6} {'K':>5} {'N':>5} {'win':>3} {'ep':<18}"
        for n in names:
            head += f" {n[:10] + ' tile':>15} {'us':>7} {'GF/s':>5}"
        print(head)
        sums = {r: 0.0 for r in roots}
        for i, row in enumerate(first["rows"]):
            line = f"{row['M']:>6} {row['K']:>5} {row['N']:>5} {row['win']:>3} {','.join(row['ep'])[:18]:<18}"
            flops = 2.0 * row["M"] * row["N"] * row["K"] * row["batch"]
            for r in roots:
                rows_r = [x["rows"] for x in res[r]]
                if any(len(x) != len(first["rows"]) for x in rows_r):
                    line += f" {'(launches differ)':>29}"
                    continue
                us = statistics.median(x[i]["us"] for x in rows_r)
                sums[r] += us
                line += f" {rows_r[0][i]['tile'] + ('d' if rows_r[0][i]['dyn'] else ''):>15} {us:>7.0f} {flops / us / 1e3:>5.1f}"
            print(line)
        print("tile kernels (us): " + ", ".join(f"{n} {sums[r]:.0f}" for n, r in zip(names, roots)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(raw, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
