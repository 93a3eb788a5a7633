"""Process CPU time per dispatch of one-layer graphs at the zoo's tile-kernel shapes, two
checkouts alternating in fresh processes.

    .venv/bin/python benchmarks/tile_cpu.py OLD_CHECKOUT NEW_CHECKOUT [SHAPES] [ROUNDS]

SHAPES is ``M,K,N,KIND;...`` with KIND 0 (1x1 NHWC conv, bias, clamp), 1 (1x1 conv, bias,
a residual add and hard_swish) or 2 (a float32 matmul of two inputs); the default is the table
of docs/linalg.md. Each process builds every graph, then times each one with
``time.process_time()`` (all threads of the process, lavapipe's workers included: steadier
than wall time on a machine shared with other work) over several dispatches, best of three;
the table shows the best of ROUNDS (default 3) per checkout. A checkout is a source tree
(``git archive COMMIT | tar -x -C DIR``) imported from its own ``webnn_gpu/`` and ``shaders/``
with this environment's packages, as ``benchmarks/ab.py`` does.
"""

import json
import os
import subprocess
import sys

DEFAULT = ("16384,16,16,1;3136,24,144,1;1024,24,96,1;256,128,32,1;64,864,144,1;49,1152,192,1;"
           "16384,16,16,0;196,112,672,0;49,672,192,0;1024,1024,1024,2")
RUN = r'''
import sys, time, types, json
root = sys.argv[1]
sys.path.insert(0, root)
sh = types.ModuleType("webnn_gpu.shaders"); sh.__file__ = root + "/shaders/__init__.py"; sh.__path__ = [root + "/shaders"]
sys.modules["webnn_gpu.shaders"] = sh
import numpy as np
import webnn_gpu as webnn
assert webnn.__file__.startswith(root)
from webnn_gpu._lower import KernelStep
shapes = json.loads(sys.argv[2])
ctx = webnn.ml.create_context()
rng = np.random.default_rng(0)
res = []
for M, K, N, kind in shapes:
    b = webnn.MLGraphBuilder(ctx)
    feeds = {}
    if kind == 2:
        x = b.input("x", {"data_type": "float32", "shape": [M, K]}); w = b.input("w", {"data_type": "float32", "shape": [K, N]})
        feeds = {"x": rng.random((M, K), np.float32), "w": rng.random((K, N), np.float32)}
        y = b.matmul(x, w)
    else:
        H = W = int(M ** 0.5)
        if H * W != M: H, W = 1, M
        x = b.input("x", {"data_type": "float32", "shape": [1, H, W, K]})
        feeds["x"] = rng.standard_normal((1, H, W, K)).astype(np.float32)
        y = b.conv2d(x, b.constant(rng.standard_normal((N, 1, 1, K)).astype(np.float32)),
                     bias=b.constant(rng.standard_normal(N).astype(np.float32)), input_layout="nhwc", filter_layout="ohwi")
        if kind == 1:
            r = b.input("r", {"data_type": "float32", "shape": [1, H, W, N]})
            feeds["r"] = rng.standard_normal((1, H, W, N)).astype(np.float32)
            y = b.hard_swish(b.add(y, r))
        else:
            y = b.clamp(y, min_value=0.0, max_value=6.0)
    g = b.build({"y": y})
    tiles = [s.wgsl for s in g._steps if isinstance(s, KernelStep) and s.template == "matmul/tile.wgsl"]
    ins = {}
    for n, a in feeds.items():
        t = ctx.create_tensor({"data_type": "float32", "shape": list(a.shape), "writable": True}); ctx.write_tensor(t, a); ins[n] = t
    out = ctx.create_tensor({"data_type": "float32", "shape": list(y.shape), "readable": True})
    reps = max(3, min(40, int(3e8 / (M * N * K))))
    best = 1e9
    for _ in range(3):
        ctx.dispatch(g, ins, {"y": out}); ctx.read_tensor(out)
        c0 = time.process_time()
        for _ in range(reps):
            ctx.dispatch(g, ins, {"y": out})
        ctx.read_tensor(out)
        best = min(best, (time.process_time() - c0) / reps)
    res.append(best)
print("JSON" + json.dumps(res))
'''


def main() -> int:
    """Run the comparison (see the module docstring)."""
    roots = [os.path.abspath(r) for r in sys.argv[1:3]]
    shapes = [list(map(int, s.split(","))) for s in (sys.argv[3] if len(sys.argv) > 3 else DEFAULT).split(";")]
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    env = dict(os.environ)
    env.setdefault("XDG_RUNTIME_DIR", "/tmp")
    res: dict = {r: [] for r in roots}
    for _ in range(rounds):
        for r in roots:
            o = subprocess.run([sys.executable, "-c", RUN, r, json.dumps(shapes)], capture_output=True, text=True, env=env)
            if o.returncode:
                print(o.stderr[-3000:])
                return 1
            res[r].append(json.loads([ln for ln in o.stdout.splitlines() if ln.startswith("JSON")][0][4:]))
    print(f"{'M':>6} {'K':>5} {'N':>5} {'ep':>5} | {'old us':>8} {'GF/s':>5} | {'new us':>8} {'GF/s':>5} | new/old")
    kinds = ["clamp", "add", "mm"]
    for i, (M, K, N, kind) in enumerate(shapes):
        b = min(x[i] for x in res[roots[0]])
        n = min(x[i] for x in res[roots[1]])
        f = 2 * M * N * K
        print(f"{M:>6} {K:>5} {N:>5} {kinds[kind]:>5} | {b*1e6:8.0f} {f/b/1e9:5.1f} | {n*1e6:8.0f} {f/n/1e9:5.1f} | {n/b:.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
