"""Two products in a row, fused (the compiler's ``fuse_mlp``, ``matmul/mlp.wgsl``) against the two
tile launches (``WEBNN_GPU_PASSES=-fuse_mlp``), in one process, the two graphs alternating.

Each SPEC is ``M,K,H,N,ACT,RESIDUAL``: ``y = (act(x[M, K] @ W1[K, H] + b1) @ W2[H, N] + b2)``,
plus ``x`` where RESIDUAL is 1 (needs N == K); ACT is a unary builder method (``relu``,
``gelu``, ...) or ``prelu`` (random per-channel slopes). Prints, per spec, the best wall and
process CPU time per ``compute`` (write, dispatch, read) of each graph over the rounds, their
ratios and the fused graph's kernels (where the rule does not fire, both graphs are the same)::

    .venv/bin/python benchmarks/mlp_pairs.py 256,64,128,64,prelu,0 128,48,96,48,gelu,1 --rounds 10
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

import webnn_gpu as webnn


def _graph(ctx, M, K, H, N, act, residual, passes):
    rng = np.random.default_rng(1)  # the same weights in both graphs
    os.environ["WEBNN_GPU_PASSES"] = passes  # read by build()
    try:
        b = webnn.MLGraphBuilder(ctx)
        x = b.input("x", {"data_type": "float32", "shape": [M, K]})

        def c(a):
            return b.constant({"data_type": "float32", "shape": list(a.shape)}, a.astype(np.float32))

        h = b.add(b.matmul(x, c(rng.standard_normal((K, H)) / np.sqrt(K))), c(rng.standard_normal(H)))
        h = b.prelu(h, c(rng.random(H))) if act == "prelu" else getattr(b, act)(h)
        y = b.add(b.matmul(h, c(rng.standard_normal((H, N)) / np.sqrt(H))), c(rng.standard_normal(N)))
        return b.build({"y": b.add(y, x) if residual else y})
    finally:
        os.environ.pop("WEBNN_GPU_PASSES", None)


def _time(ctx, g, x, runs):
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(runs):
        ctx.compute(g, {"x": x})
    return (time.perf_counter() - t0) / runs * 1e6, (time.process_time() - c0) / runs * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("specs", nargs="+", help="M,K,H,N,ACT,RESIDUAL")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--runs", type=int, default=20, help="computes per graph and round")
    args = ap.parse_args()
    ctx = webnn.ml.create_context()
    for spec in args.specs:
        M, K, H, N, act, res = spec.split(",")
        dims = int(M), int(K), int(H), int(N)
        fused = _graph(ctx, *dims, act, res == "1", "")
        plain = _graph(ctx, *dims, act, res == "1", "-fuse_mlp")
        x = np.random.default_rng(0).standard_normal((dims[0], dims[1])).astype(np.float32)
        np.testing.assert_allclose(ctx.compute(fused, {"x": x})["y"], ctx.compute(plain, {"x": x})["y"],
                                   rtol=1e-3, atol=1e-3)
        f, p = [], []
        for _ in range(args.rounds):
            f.append(_time(ctx, fused, x, args.runs))
            p.append(_time(ctx, plain, x, args.runs))
        fw, fc = min(t[0] for t in f), min(t[1] for t in f)
        pw, pc = min(t[0] for t in p), min(t[1] for t in p)
        kernels = [s.template for s in fused._steps if hasattr(s, "template")]
        print(f"{spec:28s} fused {fw:7.0f} us wall {fc:7.0f} CPU | two launches {pw:7.0f} wall {pc:7.0f} CPU | "
              f"wall {fw / pw:.2f} CPU {fc / pc:.2f}  {kernels}")
        fused.destroy()
        plain.destroy()


if __name__ == "__main__":
    main()
