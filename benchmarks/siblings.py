"""Sibling convs alone: NHWC conv2d of one input by different constant filters (each with a bias),
as separate tile launches (``WEBNN_GPU_FORCE_SIBLINGS=off``) and as the compiler's ``siblings``
node (one launch), side by side in one process.

    .venv/bin/python benchmarks/siblings.py [SPEC ...] [--rounds 15] [--repeats 10] [--runs 20]

A SPEC is ``HxWxC:N1+N2+...`` or ``HxWxC:N1+N2+...:K`` (K x K filters, padding K // 2), or
``M,K:N1+N2+...`` (dense layers on M rows of K values: gemms by W^T with a bias, TFLite's fully
connected layers); without one, the zoo's sibling sets and a few synthetic ones run. Each round times the two graphs in turn
(the order swapped every round) with timestamp queries (the sum of the kernels, the median of
``--repeats`` dispatches) and their wall time per inference (write, dispatch, read: the least of
3 batches of ``--runs``); printed: the medians and the per-round ratio new / old (median,
quartiles, range), and the largest difference between the forms' outputs.
"""

from __future__ import annotations

import argparse
import os

from _common import close_forms, environ, per_run_us, products_graph, ratio_line  # benchmarks/_common.py

#: (spec, where)
SETS = [
    ("16x16x88:2+32", "face_detection_short_range"),
    ("8x8x96:6+96", "face_detection_short_range"),
    ("12x12x256:6+108+128", "palm_detection_lite / full"),
    ("24x24x128:2+36", "palm_detection_lite / full"),
    ("8x8x128:64+64", "iris_landmark"),
    ("48x48x48:4+64", "face_detection_full_range_sparse"),
    ("12x12x256:6+108", ""),
    ("32x32x64:16+16", ""),
    ("64x64x32:8+64", ""),
    ("56x56x24:24+24", ""),
    ("4x4x256:128+128", ""),
    ("8x8x64:8+16:3", "3x3 windows"),
    ("65,64:64+64+64", "a transformer's projections (ViT-like)"),
    ("16,128:32+8", "dense layers"),
]


def main(argv=None) -> int:
    """Compare the forms of each set (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("specs", nargs="*")
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--runs", type=int, default=20)
    args = p.parse_args(argv)
    os.environ["WEBNN_GPU_PLAN_CACHE"] = "0"
    import webnn_gpu as webnn
    from webnn_gpu.profile import profile_graph

    ctx = webnn.ml.create_context()
    sets = [(s, "") for s in args.specs] or SETS
    print("# old: separate launches (WEBNN_GPU_FORCE_SIBLINGS=off); new: one siblings launch; us, "
          "new / old median (quartiles) [range]")
    for spec, where in sets:
        built = {}
        for name, env in (("old", {"WEBNN_GPU_FORCE_SIBLINGS": "off"}), ("new", {})):
            with environ(env):
                built[name] = products_graph(ctx, spec)
        kern, wall = ([], []), ([], [])
        for r in range(args.rounds):
            for n in (("old", "new") if r % 2 == 0 else ("new", "old")):
                g, x = built[n]
                k = 0 if n == "old" else 1
                kern[k].append(sum(row["us"] for row in profile_graph(ctx, g, x, args.repeats)))
                wall[k].append(per_run_us(ctx, g, x, args.runs))
        notes = [getattr(s, "note", "") for s in built["new"][0]._steps if hasattr(s, "template")]
        print(f"## {spec} {where} new: {notes}")
        print(ratio_line("kernels", *kern))
        print(ratio_line("wall per inference", *wall))
        close_forms(ctx, built)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
