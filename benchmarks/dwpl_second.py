"""The channel-lane kernel's second stage (a pointwise conv computed in the same kernel) against
the pair and the consumer's own conv kernel, inside whole models.

    .venv/bin/python benchmarks/dwpl_second.py [--models iris-landmark ...] [--rounds 20]
                                               [--repeats 5] [--runs 10] [--dtype float32]

Each model (names of ``webnn_gpu.models`` or ``.tflite`` paths) is loaded twice in one process
(the plan cache off): with ``WEBNN_GPU_FORCE_DWPL_SECOND=off`` (the consumer conv a kernel of its
own) and as the context decides. Each round times the two graphs in turn with timestamp queries
(``webnn_gpu.profile.profile_graph``, the median of ``--repeats``) and their wall time per
inference (write, dispatch, read: the least of 3 batches of ``--runs``). Prints per merged
kernel the old pair (lanes kernel + the consumer's kernel) and the new kernel in microseconds
(medians over the rounds) and the range of the per-round ratio new / old; then the whole
model's kernel sum and wall time, likewise; and whether the two graphs' outputs agree.
"""

from __future__ import annotations

import argparse
import os

import numpy as np
from _common import environ, model_paths, per_run_us  # benchmarks/_common.py (the script's folder is on sys.path)

OFF = {"WEBNN_GPU_FORCE_DWPL_SECOND": "off"}


def _inner(label: str) -> str:
    """The node label inside a kernel label (``op ['label']``)."""
    return label.split("['", 1)[-1].rsplit("']", 1)[0]


def _ratio_line(name: str, old: list[float], new: list[float]) -> str:
    r = np.array(new) / np.array(old)
    return (f"{name:>44} {np.median(old):9.1f} {np.median(new):9.1f}  {np.median(r):5.3f}"
            f" [{r.min():5.3f}-{r.max():5.3f}]")


def compare(path: str, rounds: int, repeats: int, runs: int, dtype: str) -> None:
    """Time one model both ways (see the module docstring)."""
    import webnn_gpu as webnn
    from webnn_gpu.profile import profile_graph

    ctx = webnn.ml.create_context()
    built = {}
    for name, env in (("old", OFF), ("new", {k: None for k in OFF})):
        with environ(env):
            g = webnn.load(path, ctx, dtype=dtype).graph
        rng = np.random.default_rng(0)
        built[name] = (g, {n: rng.uniform(0, 1, v.shape).astype(np.float32) for n, v in g._inputs.items()})
    outs = {n: ctx.compute(g, x) for n, (g, x) in built.items()}
    merged = {}  # new label -> the old labels it replaces (the pair's and the consumer's)
    old_labels = {_inner(s.label): s.label for s in built["old"][0]._steps if hasattr(s, "template")}
    for s in built["new"][0]._steps:
        inner = _inner(s.label)
        if getattr(s, "template", "") == "conv/depthwise_project_lanes.wgsl" and inner not in old_labels:
            pair, conv = inner.rsplit("+", 1)
            merged[s.label] = [old_labels[pair], old_labels[conv]]
    per = {lb: ([], []) for lb in merged}
    tot, wall = ([], []), ([], [])
    for _ in range(rounds):
        rows = {}
        for n, (g, x) in built.items():
            rows[n] = {}
            for r in profile_graph(ctx, g, x, repeats):
                rows[n][r["label"]] = rows[n].get(r["label"], 0.0) + r["us"]
            (tot[0] if n == "old" else tot[1]).append(sum(rows[n].values()))
            (wall[0] if n == "old" else wall[1]).append(per_run_us(ctx, g, x, runs))
        for lb, parts in merged.items():
            per[lb][0].append(sum(rows["old"][p] for p in parts))
            per[lb][1].append(rows["new"][lb])
    name = os.path.basename(path).split(".")[0]
    print(f"# {name} ({dtype}): {len(merged)} merged kernels; old us, new us, new / old median [range] over {rounds} rounds")
    for lb, (o, n) in per.items():
        print(_ratio_line(_inner(lb)[-44:], o, n))
    print(_ratio_line("all kernels", *tot))
    print(_ratio_line("wall per inference", *wall))
    for k in outs["old"]:
        a, b = np.asarray(outs["old"][k], np.float64), np.asarray(outs["new"][k], np.float64)
        print(f"# output {k}: max |new - old| {np.abs(a - b).max():.3g} (max |old| {np.abs(a).max():.3g})")
    for g, _ in built.values():
        g.destroy()


def main(argv=None) -> int:
    """Compare the models (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", nargs="*", default=["iris-landmark"])
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--dtype", default="float32", choices=("float32", "float16"))
    args = p.parse_args(argv)
    os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
    os.environ["WEBNN_GPU_PLAN_CACHE"] = "0"
    for path in model_paths(args.models):
        compare(path, args.rounds, args.repeats, args.runs, args.dtype)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
