"""Products of few rows in ``matmul/matvec.wgsl`` against the forms they took before: 4 rows of a
large B, wider column groups for several rows of few columns, and conv windows of a few output
pixels gathered as rows, side by side in one process.

    .venv/bin/python benchmarks/few_rows.py [SPEC ...] [--rounds 12] [--repeats 10] [--after-concat]

A SPEC is ``M,K:N`` (a gemm by W^T with a bias on M rows of K values) or
``HxWxC:N:K[:S[:D[:P]]]`` (a K x K NHWC conv with a bias, strides S, dilations D, padding P on
every side; ``benchmarks/_common.products_graph``); without one, a set of synthetic products runs
(the Keras ResNet50's 3x3 convs on 2 x 2 pixels among them). The forms: "old"
(``WEBNN_GPU_FORCE_MATMUL_MATVEC_ROWS=3``, ``..._GROUPS=16``, ``..._WINDOW=off``: at most 3
rows, one vec4 column per group, no gathered windows) and "new" (the engine's own choice), each
round timed in turn (the order rotated every round) with timestamp queries (the median of
``--repeats`` dispatches). Printed per product: each form's kernels, the median microseconds and
the per-round ratio new / old (median, quartiles, range), and how far the outputs are apart.
With ``--after-concat`` the products read a concat written by the kernel before (as in a model;
the products' kernels timed, not the concat's): on an input the host wrote they measured faster.
"""

from __future__ import annotations

import argparse
import os

from _common import close_forms, environ, products_graph, ratio_line, rotated_kernel_us  # benchmarks/_common.py

OLD = {"WEBNN_GPU_FORCE_MATMUL_MATVEC_ROWS": "3", "WEBNN_GPU_FORCE_MATMUL_MATVEC_GROUPS": "16",
       "WEBNN_GPU_FORCE_MATMUL_MATVEC_WINDOW": "off"}
SPECS = ["4,512:213", "4,512:512", "4,1024:128", "4,1152:213", "4,4608:64", "4,4608:512", "2,512:64",
         "2,4608:64", "3,1000:77", "3,1152:40", "2x2x512:512:3", "4x4x256:256:3:2", "2x2x256:128:3",
         "4x4x128:128:3:2:1:0", "4x4x128:64:2:2:1:0", "4,288:288"]


def main(argv=None) -> int:
    """Compare the two forms of each product (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("specs", nargs="*")
    p.add_argument("--rounds", type=int, default=12)
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--after-concat", action="store_true", help="A written by a concat kernel just before")
    args = p.parse_args(argv)
    os.environ["WEBNN_GPU_PLAN_CACHE"] = "0"
    import webnn_gpu as webnn

    ctx = webnn.ml.create_context()
    print("# us (median of rounds), new / old per round: median (quartiles) [range]")
    for spec in args.specs or SPECS:
        built = {}
        for name, env in (("old", OLD), ("new", {})):
            with environ(env):
                built[name] = products_graph(ctx, spec, concat=args.after_concat)
        times = rotated_kernel_us(ctx, built, args.rounds, args.repeats, keep=lambda row: row["template"].startswith("matmul/"))
        notes = {n: [s.note for s in g._steps if hasattr(s, "template")] for n, (g, _) in built.items()}
        print(f"## {spec}  old {notes['old']}  new {notes['new']}")
        print(ratio_line("kernels", times["old"], times["new"]))
        close_forms(ctx, built)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
