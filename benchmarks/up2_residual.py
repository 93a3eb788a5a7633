"""An upsampled skip add read by its consumer's epilogue (``fuse_upsampled_residual``) against
the stand-alone doubling kernel, on synthetic layers, both forms built in one process and run
alternately.

    .venv/bin/python benchmarks/up2_residual.py [--rounds 20] [--host tile|dwp] [--shapes 6x96,12x64,...]

Each shape ``HxC`` is a top-down step of a feature pyramid: ``low = conv1x1(z)`` on an H x H
image, then ``add(host(skip), upsample2x(low))`` on the 2H x 2H image, where the host is a
pointwise conv (``tile``: the tile kernel) or a 3x3 depthwise conv and its projection (``dwp``).
For each shape: the upsampled output's vec4s, the medians over rounds of the host kernel's time
and the resample's (timestamp queries, old form), the host's in the new form, and the median and
range of the per-round ratio new / old of the wall time of a write, dispatch and read.
docs/performance.md ("An upsampled skip add in its reader") has the numbers.
"""

from __future__ import annotations

import argparse
import statistics
import sys

import numpy as np

from _common import environ, per_run_us

OFF = {"WEBNN_GPU_FORCE_UP2_RESIDUAL": "off"}
ON = {"WEBNN_GPU_FORCE_UP2_RESIDUAL": "any"}  # (past the size limit too: the fit's shapes)


def build(ctx, h: int, c: int, host: str):
    """The graph of one shape (see the module docstring) and its inputs."""
    import webnn_gpu as webnn

    rng = np.random.default_rng(0)
    k = 32
    b = webnn.MLGraphBuilder(ctx)
    z = b.input("z", {"data_type": "float32", "shape": [1, h, h, k]})
    skip = b.input("skip", {"data_type": "float32", "shape": [1, 2 * h, 2 * h, k]})
    low = b.relu(b.conv2d(z, b.constant(rng.standard_normal((c, 1, 1, k)).astype(np.float32) * 0.2),
                          input_layout="nhwc", filter_layout="ohwi"))
    s = skip
    if host == "dwp":
        s = b.relu(b.conv2d(skip, b.constant(rng.standard_normal((1, 3, 3, k)).astype(np.float32) * 0.3),
                            padding=[1, 1, 1, 1], groups=k, input_layout="nhwc", filter_layout="ihwo"))
    y = b.conv2d(s, b.constant(rng.standard_normal((c, 1, 1, k)).astype(np.float32) * 0.2),
                 bias=b.constant(rng.standard_normal(c).astype(np.float32)), input_layout="nhwc", filter_layout="ohwi",
                 label="host")
    up = b.resample2d(low, mode="linear", scales=[2.0, 2.0], axes=[1, 2])
    g = b.build({"y": b.add(y, up)})
    feeds = {"z": rng.random((1, h, h, k), dtype=np.float32),
             "skip": rng.random((1, 2 * h, 2 * h, k), dtype=np.float32)}
    return g, feeds


def main(argv=None) -> int:
    """Time each shape's upsampled skip add in its reader against the doubling kernel (see the module
    docstring); 0 on success."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--host", choices=("tile", "dwp"), default="tile")
    ap.add_argument("--shapes", default="6x96,8x48,12x64,12x96,16x48,14x192,24x48,28x96")
    args = ap.parse_args(argv)
    import webnn_gpu as webnn
    from webnn_gpu.profile import profile_graph

    ctx = webnn.ml.create_context()
    print(f"{'shape':>8} {'vec4s':>7} {'host us':>8} {'resample':>8} {'new host':>8}  wall new/old (median, range)")
    for shape in args.shapes.split(","):
        h, c = map(int, shape.split("x"))
        with environ(OFF):
            old, feeds = build(ctx, h, c, args.host)
        with environ(ON):
            new, _ = build(ctx, h, c, args.host)
        times: dict = {"host": ([], []), "rs": [], "wall": ([], [])}
        for r in range(args.rounds):
            for k in ((0, 1) if r % 2 == 0 else (1, 0)):
                g = (old, new)[k]
                rows = profile_graph(ctx, g, feeds, 5)
                times["host"][k].append(sum(q["us"] for q in rows if "host" in str(q["label"])))
                if not k:
                    times["rs"].append(sum(q["us"] for q in rows if "resample" in q["template"]))
                times["wall"][k].append(per_run_us(ctx, g, feeds, 10))
        ratio = [n / o for o, n in zip(*times["wall"])]
        print(f"{shape:>8} {4 * h * h * c // 4:>7} {statistics.median(times['host'][0]):>8.1f} "
              f"{statistics.median(times['rs']):>8.1f} {statistics.median(times['host'][1]):>8.1f}  "
              f"{statistics.median(ratio):.3f} ({min(ratio):.3f}-{max(ratio):.3f})", flush=True)
        old.destroy()
        new.destroy()
    return 0


if __name__ == "__main__":
    sys.exit(main())
