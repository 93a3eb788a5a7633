"""The tile kernel's column tiles on awkward widths: one product (a dense layer or an NHWC 1x1
conv, each with a bias) built with the planner's column tile ("old": ``WEBNN_GPU_FORCE_TILE_RAGGED=off``,
a divisor of the column blocks) and with wider column tiles whose last one is ragged (its
padding columns computed from B's zero-padded panels and not stored), side by side in one process.

    .venv/bin/python benchmarks/tile_cols.py [SPEC ...] [--tn4 4,8,12] [--env NAME=VALUE ...] [--rounds 15]
                                             [--repeats 10]

A SPEC is ``M,K:N`` (a gemm by W^T with a bias on M rows of K values) or ``HxWxC:N[:K]`` (a K x K
conv, padding K // 2, with a bias; 1 x 1 by default); without one, a set of synthetic products runs. The forms: "old", "new" (the
planner's own choice) and one per ``--tn4`` value (that many vec4 column blocks, the planner's rows),
each round timed in turn (the order rotated every round) with timestamp queries (the median of
``--repeats`` dispatches). Printed per form: its tile, the median microseconds and the per-round
ratio form / old (median, quartiles, range); and how far each form's output is from old's.
"""

from __future__ import annotations

import argparse
import os

from _common import environ, output_gaps, products_graph, ratio_line, rotated_kernel_us  # benchmarks/_common.py

SPECS = ["49,256:100", "196,128:104", "784,64:116", "3136,64:116", "196,256:148", "784,128:232",
         "49,512:244", "196,256:244", "49,512:1001", "49,256:1004", "28x28x128:244", "56x56x64:104"]


def main(argv=None) -> int:
    """Compare the forms of each product (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("specs", nargs="*")
    p.add_argument("--tn4", default="")
    p.add_argument("--env", action="append", default=[], help="NAME=VALUE set for every form")
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--repeats", type=int, default=10)
    args = p.parse_args(argv)
    os.environ["WEBNN_GPU_PLAN_CACHE"] = "0"
    os.environ.update(kv.split("=", 1) for kv in args.env)
    import webnn_gpu as webnn

    ctx = webnn.ml.create_context()
    forms = [("old", {"WEBNN_GPU_FORCE_TILE_RAGGED": "off"}), ("new", {})]
    forms += [(f"tn4={t}", {"WEBNN_GPU_FORCE_TILE_RAGGED": t}) for t in args.tn4.split(",") if t]
    print("# us (median of rounds), form / old per round: median (quartiles) [range]")
    for spec in args.specs or SPECS:
        built = {}
        for name, env in forms:
            with environ(env):
                built[name] = products_graph(ctx, spec)
        times = rotated_kernel_us(ctx, built, args.rounds, args.repeats)
        names = list(times)
        print(f"## {spec}")
        outs = {n: ctx.compute(g, x) for n, (g, x) in built.items()}
        for name in names:
            notes = [getattr(s, "note", "") for s in built[name][0]._steps if hasattr(s, "template")]
            print(ratio_line(f"{name} {notes}", times["old"], times[name], width=60))
            if name != "old":
                print("  " + " ".join(output_gaps(outs["old"], outs[name])), flush=True)
        for g, _ in built.values():
            g.destroy()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
