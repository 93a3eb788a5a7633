"""An inverted-residual block's expansion inside the fused depthwise + projection kernel
(``expand_shared``, workgroup memory) against the expansion as its own kernel, per shape.

    .venv/bin/python benchmarks/dw_expand.py [--shapes 8x128x64x128,4x128x64x128 ...]
                                             [--repeats 10] [--rounds 2] [--wall]

Each shape ``HWxKxCxN`` builds ``prelu(conv1x1(depthwise3x3(prelu(conv1x1(x, K -> C))), C -> N)
+ r)`` (NHWC, float32, stride 1) twice in one process: with the expansion forced into the fused
kernel (``WEBNN_GPU_FORCE_DWP_EXPAND=shared``) and kept apart (``=off``), the two sides
alternating ``--rounds`` times (the least of each). It prints the kernels' microseconds by
timestamp queries (median of ``--repeats``; of them, the separate 1x1 conv's), the kernel
counts, and the cost model's estimates (:func:`webnn_gpu.ops.conv._expand_shared_cost`: the
fused kernel's added expansion against the separate kernel with its dispatch; it fuses where
the first is lower). ``--wall`` also times
whole write / dispatch / read runs (wall microseconds per run, the least of 3 batches), which
include each kernel's dispatch (about 40 us on lavapipe)."""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

from _common import per_run_us  # benchmarks/_common.py (the script's folder is on sys.path)


def _graph(ctx, hw, K, C, N):
    import webnn_gpu as webnn

    rng = np.random.default_rng(0)
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [1, hw, hw, K]})
    r = b.input("r", {"data_type": "float32", "shape": [1, hw, hw, N]})

    def c(*shape, s=0.3):
        return b.constant((rng.standard_normal(shape) * s).astype(np.float32))

    e = b.prelu(b.conv2d(x, c(C, 1, 1, K, s=K ** -0.5), input_layout="nhwc", filter_layout="ohwi", bias=c(C)),
                b.constant((rng.random(C) * 0.5).astype(np.float32)))
    d = b.conv2d(e, c(1, 3, 3, C), input_layout="nhwc", filter_layout="ihwo", groups=C, padding=[1] * 4, bias=c(C))
    p = b.conv2d(d, c(N, 1, 1, C, s=C ** -0.5), input_layout="nhwc", filter_layout="ohwi", bias=c(N))
    y = b.prelu(b.add(p, r), b.constant((rng.random(N) * 0.5).astype(np.float32)))
    inputs = {"x": rng.standard_normal((1, hw, hw, K)).astype(np.float32),
              "r": rng.standard_normal((1, hw, hw, N)).astype(np.float32)}
    return b.build({"y": y}), inputs


def _time(ctx, shape, shared, repeats, wall):
    from webnn_gpu.profile import profile_graph

    os.environ["WEBNN_GPU_FORCE_DWP_EXPAND"] = "shared" if shared else "off"
    g, inputs = _graph(ctx, *shape)
    rows = profile_graph(ctx, g, inputs, repeats=repeats)
    assert not shared or len(rows) == 1, f"{shape}: the expansion was not taken in (its band does not fit)"
    us = sum(r["us"] for r in rows)
    w = per_run_us(ctx, g, inputs, 4 * repeats) if wall else 0.0
    g.destroy()
    return us, len(rows), w, sum(r["us"] for r in rows if not r["template"].startswith("conv/depthwise_project"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", default="8x128x64x128,4x128x64x128,2x128x64x128,16x128x64x128,32x64x32x64")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--wall", action="store_true")
    args = ap.parse_args(argv)
    os.environ.setdefault("WEBNN_GPU_PLAN_CACHE", "0")
    import webnn_gpu as webnn
    from webnn_gpu.ops import conv

    ctx = webnn.ml.create_context()
    tuning = getattr(ctx, "_tuning", "default")
    print(f"{'shape HWxKxCxN':>18} {'shared us':>10} {'apart us':>10} {'(1x1)':>6} {'k':>4} {'ratio':>6}"
          f"{' wall sh':>9} {'wall ap':>8} {'model +exp':>11} {'model sep':>10}")
    for spec in args.shapes.split(","):
        shape = tuple(int(v) for v in spec.split("x"))
        best = {True: [float("inf"), 0, float("inf"), 0.0], False: [float("inf"), 0, float("inf"), 0.0]}
        for _ in range(args.rounds):
            for shared in (True, False):
                us, k, w, other = _time(ctx, shape, shared, args.repeats, args.wall)
                b = best[shared]
                if us < b[0]:
                    b[0], b[3] = us, other
                b[1], b[2] = k, min(b[2], w)
        hw, K, C, N = shape
        g = {"KH": 3, "KW": 3, "sh": 1, "sw": 1, "dh": 1, "dw": 1, "NB": 1, "H": hw, "W": hw, "C": C, "OH": hw,
             "OW": hw, "pt": 1, "pl": 1, "pb": 1, "pr": 1, "O": C, "G": C}
        extra, sep = (conv._expand_shared_cost(g, K // 4, -(-N // 4), tuning)
                      if tuning in conv.EXPAND_SHARED_FIT else (0.0, 0.0))
        s, a = best[True], best[False]
        print(f"{spec:>18} {s[0]:10.1f} {a[0]:10.1f} {a[3]:6.1f} {s[1]:>2}/{a[1]:<2} {s[0] / a[0]:6.2f}"
              f"{s[2] if args.wall else 0:9.0f} {a[2] if args.wall else 0:8.0f} {extra:11.1f} {sep:10.1f}")
        sys.stdout.flush()
    ctx.destroy()
    return 0


if __name__ == "__main__":
    sys.exit(main())
