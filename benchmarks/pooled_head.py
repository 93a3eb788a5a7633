"""A classifier head, a global average pool and a one-row product, as two launches and as one
(the compiler's ``fuse_pooled_head``), side by side in one process.

    .venv/bin/python benchmarks/pooled_head.py [SPEC ...] [--rounds 16] [--repeats 10] [--runs 10]

A SPEC is ``H,W,C,N`` (an NHWC image [1, H, W, C] pooled, then a float32 fully connected layer of
N columns with a bias: gemm by a constant [N, C] matrix, transposed as TFLite stores it) or
``H,W,C0>C,N`` (a 1x1 conv of C0 -> C channels before the pool: the pool then reads the conv's
partial sums, ``fuse_pool_partials``). Each is built twice: ``old``
(``WEBNN_GPU_PASSES=-fuse_pooled_head``) and ``new`` (the rule on). Each round times both in turn
(the order swapped every round): the sum of their kernel timestamps
(``webnn_gpu.profile.profile_graph``, the median of ``--repeats``) and the wall per inference
(``_common.per_run_us``); prints the medians and the per-round ratio new / old (median, quartiles,
range). Both outputs are checked against float64 NumPy.
"""

from __future__ import annotations

import argparse
import os

import numpy as np
from _common import environ, per_run_us, ratio_line  # benchmarks/_common.py (the script's folder is on sys.path)

#: the Keras zoo's heads (image, channels, columns) and wider ones
SPECS = ["4,4,160>1280,10", "7,7,1280,10", "4,4,576,1024", "3,3,960,1280", "7,7,672,128", "7,7,1024,1000",
         "7,7,2048,1000", "7,7,2048,10", "14,14,512,256"]


def build(ctx, spec: str):
    """The graph of ``spec`` and its inputs and float64 reference output."""
    import webnn_gpu as webnn

    hw, rest = spec.split(",", 2)[:2], spec.split(",", 2)[2]
    H, W = map(int, hw)
    chans, N = rest.split(",")
    N = int(N)
    C0, C = (int(c) for c in chans.split(">")) if ">" in chans else (int(chans), int(chans))
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, H, W, C0)).astype(np.float32)
    wfc = (rng.standard_normal((N, C)) / np.sqrt(C)).astype(np.float32)
    bias = rng.standard_normal(N).astype(np.float32)
    b = webnn.MLGraphBuilder(ctx)
    v = b.input("x", {"data_type": "float32", "shape": [1, H, W, C0]})
    img = x.astype(np.float64)
    if ">" in chans:
        wc = (rng.standard_normal((C, 1, 1, C0)) / np.sqrt(C0)).astype(np.float32)
        v = b.conv2d(v, b.constant({"data_type": "float32", "shape": list(wc.shape)}, wc), input_layout="nhwc",
                     filter_layout="ohwi")
        img = img @ wc.reshape(C, C0).T.astype(np.float64)
    p = b.average_pool2d(v, window_dimensions=[H, W], layout="nhwc")
    y = b.gemm(b.reshape(p, [1, C]), b.constant({"data_type": "float32", "shape": [N, C]}, wfc),
               c=b.constant({"data_type": "float32", "shape": [N]}, bias), b_transpose=True)
    g = b.build({"y": y})
    want = img.mean(axis=(1, 2)).reshape(1, C) @ wfc.T.astype(np.float64) + bias
    return g, {"x": x}, want


def main(argv=None) -> int:
    """Compare the specs (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("specs", nargs="*", default=SPECS)
    p.add_argument("--rounds", type=int, default=16)
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--runs", type=int, default=10)
    args = p.parse_args(argv)
    os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
    os.environ["WEBNN_GPU_PLAN_CACHE"] = "0"
    import webnn_gpu as webnn
    from webnn_gpu.profile import profile_graph

    ctx = webnn.ml.create_context()
    for spec in args.specs:
        built = {}
        for name, env in (("old", {"WEBNN_GPU_PASSES": "-fuse_pooled_head"}), ("new", {"WEBNN_GPU_PASSES": ""})):
            with environ(env):
                g, feeds, want = build(ctx, spec)
            got = ctx.compute(g, feeds)["y"].astype(np.float64)
            err = np.abs(got - want).max() / max(1e-30, np.abs(want).max())
            assert err < 1e-5, (spec, name, err)
            built[name] = (g, feeds)
        notes = {n: [s.note for s in g._steps if hasattr(s, "template") and "matvec" in s.template]
                 for n, (g, _) in built.items()}
        tot, wall = ([], []), ([], [])
        for r in range(args.rounds):
            for n, (g, feeds) in list(built.items())[::-1 if r % 2 else 1]:
                k = 0 if n == "old" else 1
                tot[k].append(sum(row["us"] for row in profile_graph(ctx, g, feeds, args.repeats)))
                wall[k].append(per_run_us(ctx, g, feeds, args.runs))
        print(f"# {spec}: old {notes['old']} new {notes['new']}")
        print(ratio_line("all kernels", *tot))
        print(ratio_line("wall per inference", *wall), flush=True)
        for g, _ in built.values():
            g.destroy()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
