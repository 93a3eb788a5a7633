"""The channel-lane kernel's second stage (a pointwise conv computed in the same kernel) against
the pair and the consumer's own conv kernel, inside whole models.

    .venv/bin/python benchmarks/dwpl_second.py [--models iris-landmark ...] [--rounds 20]
                                               [--repeats 5] [--runs 10] [--dtype float32]
                                               [--old-env K=V ...] [--new-env K=V ...] [--set NAME=INT ...]
    .venv/bin/python benchmarks/dwpl_second.py --shapes HWxCxNxKxS ... [--rounds 10] [--forced]

Each model (names of ``webnn_gpu.models`` or ``.tflite`` paths) is loaded twice in one process
(the plan cache off): with ``WEBNN_GPU_FORCE_DWPL_SECOND=off`` (the consumer conv a kernel of its
own) and as the context decides. Each round times the two graphs in turn (the order swapped every
round) with timestamp queries
(``webnn_gpu.profile.profile_graph``, the median of ``--repeats``) and their wall time per
inference (write, dispatch, read: the least of 3 batches of ``--runs``). Prints per merged
kernel the old pair (lanes kernel + the consumer's kernel) and the new kernel in microseconds
(medians over the rounds) and the median, quartiles and range of the per-round ratio new / old;
then the whole model's kernel sum and wall time, likewise; and whether the two graphs' outputs
agree. Both graphs run on the same inputs (``_common.model_inputs``: the photo for an image
input).
``--old-env`` / ``--new-env`` add ``WEBNN_GPU_FORCE_*`` switches to either build (e.g. the new
one with ``WEBNN_GPU_FORCE_DWPL_SPLIT=off WEBNN_GPU_FORCE_DWPL_SECOND=on``), ``--set`` sets
integer constants of ``webnn_gpu.ops.conv`` for the new build only (e.g. ``DWPL_MAX_BLOCKS=64``);
then every kernel label of one build that the other lacks is printed: a new one against the old
kernels whose nodes it covers, an old one alone.

``--shapes`` instead builds, per shape (input H = W, depthwise channels C, projected N, the
consumer's K, stride S), a 3x3 depthwise conv2d (bias), its projection (bias, a residual add of
another input, prelu) and a 1x1 conv to K (bias, prelu) reading it, both outputs graph outputs,
both ways; ``--forced`` also forces the channel-lane kernel and the second stage
(``WEBNN_GPU_FORCE_DWP_FORM=lanes``, ``WEBNN_GPU_FORCE_DWPL_SECOND=on``). Prints the least over
the rounds of the pair's kernel, the consumer's kernel, the merged kernel, the second stage's
cost (merged - pair), the terms of :func:`webnn_gpu.ops.conv._dwpl_second_terms` and the
estimates the lowering compares (:func:`webnn_gpu.ops.conv._dwpl_second_estimates`): what
``DWPL_SECOND_FIT`` was fitted on.
"""

from __future__ import annotations

import argparse
import contextlib
import os

import numpy as np
from _common import environ, model_inputs, model_paths, output_gaps, per_run_us, ratio_line  # benchmarks/_common.py (the script's folder is on sys.path)

OFF = {"WEBNN_GPU_FORCE_DWPL_SECOND": "off"}


@contextlib.contextmanager
def _constants(values: dict):
    """Set module constants of ``webnn_gpu.ops.conv`` (name -> value) for the block."""
    from webnn_gpu.ops import conv

    old = {k: getattr(conv, k) for k in values}
    for k, v in values.items():
        setattr(conv, k, v)
    try:
        yield
    finally:
        for k, v in old.items():
            setattr(conv, k, v)


def _inner(label: str) -> str:
    """The node label inside a kernel label (``op ['label']``)."""
    return label.split("['", 1)[-1].rsplit("']", 1)[0]


def compare(path: str, rounds: int, repeats: int, runs: int, dtype: str, old_env: dict | None = None,
            new_env: dict | None = None, consts: dict | None = None) -> None:
    """Time one model both ways (see the module docstring)."""
    import webnn_gpu as webnn
    from webnn_gpu.profile import profile_graph

    ctx = webnn.ml.create_context()
    built = {}
    forms = (("old", {**OFF, **(old_env or {})}, {}), ("new", {**{k: None for k in OFF}, **(new_env or {})}, consts or {}))
    for name, env, values in forms:
        with environ(env), _constants(values):
            g = webnn.load(path, ctx, dtype=dtype).graph
        built[name] = (g, model_inputs(g))
    outs = {n: ctx.compute(g, x) for n, (g, x) in built.items()}
    merged = {}  # new label -> the old labels of the nodes it covers; an old label alone -> []
    old_labels = {_inner(s.label): s.label for s in built["old"][0]._steps if hasattr(s, "template")}
    new_labels = {_inner(s.label): s.label for s in built["new"][0]._steps if hasattr(s, "template")}
    for inner, label in new_labels.items():
        if inner not in old_labels:
            parts = set(inner.split("+"))
            merged[label] = [lb for i, lb in old_labels.items() if i not in new_labels and set(i.split("+")) <= parts]
    alone = [lb for i, lb in old_labels.items() if i not in new_labels and not any(lb in v for v in merged.values())]
    per = {lb: ([], []) for lb in [*merged, *alone]}
    tot, wall = ([], []), ([], [])
    for i in range(rounds):
        rows = {}
        for n, (g, x) in list(built.items())[::-1 if i % 2 else 1]:  # the order swapped every round
            rows[n] = {}
            for r in profile_graph(ctx, g, x, repeats):
                rows[n][r["label"]] = rows[n].get(r["label"], 0.0) + r["us"]
            (tot[0] if n == "old" else tot[1]).append(sum(rows[n].values()))
            (wall[0] if n == "old" else wall[1]).append(per_run_us(ctx, g, x, runs))
        for lb, parts in merged.items():
            per[lb][0].append(sum(rows["old"][p] for p in parts))
            per[lb][1].append(rows["new"][lb])
        for lb in alone:
            per[lb][0].append(rows["old"][lb])
            per[lb][1].append(0.0)
    name = os.path.basename(path).split(".")[0]
    print(f"# {name} ({dtype}): {len(merged)} new kernels, {len(alone)} old ones gone; old us, new us, new / old"
          f" median (quartiles) [range] over {rounds} rounds")
    for lb, (o, n) in per.items():
        print(ratio_line(_inner(lb), o, n, 44) + (f"  (old: {', '.join(_inner(p) for p in merged[lb])})" if lb in merged else ""))
    print(ratio_line("all kernels", *tot, 44))
    print(ratio_line("wall per inference", *wall, 44))
    print("\n".join(output_gaps(outs["old"], outs["new"])))
    for g, _ in built.values():
        g.destroy()


def _shape_graph(ctx, hw: int, C: int, N: int, K: int, s: int, env: dict, dtype: str):
    """The graph of one ``--shapes`` entry (see the module docstring) and its inputs."""
    import webnn_gpu as webnn

    rng = np.random.default_rng(0)
    npdt = np.float16 if dtype == "float16" else np.float32
    oh = (hw - 1) // s + 1
    with environ(env):
        b = webnn.MLGraphBuilder(ctx)
        x = b.input("x", {"data_type": dtype, "shape": [1, hw, hw, C]})
        r = b.input("r", {"data_type": dtype, "shape": [1, oh, oh, N]})

        def c(a):
            return b.constant(np.asarray(a).astype(npdt))

        d = b.conv2d(x, c(rng.standard_normal((1, 3, 3, C)) * .3), input_layout="nhwc", filter_layout="ihwo",
                     groups=C, padding=[1, 1, 1, 1], strides=[s, s], bias=c(rng.standard_normal(C)))
        p = b.conv2d(d, c(rng.standard_normal((N, 1, 1, C)) * .3), input_layout="nhwc", filter_layout="ohwi",
                     bias=c(rng.standard_normal(N)))
        y1 = b.prelu(b.add(p, r), c(rng.uniform(.05, .5, N)))
        q = b.conv2d(y1, c(rng.standard_normal((K, 1, 1, N)) * .3), input_layout="nhwc", filter_layout="ohwi",
                     bias=c(rng.standard_normal(K)))
        g = b.build({"y1": y1, "y2": b.prelu(q, c(rng.uniform(.05, .5, K)))})
    return g, {"x": rng.standard_normal((1, hw, hw, C)).astype(npdt), "r": rng.standard_normal((1, oh, oh, N)).astype(npdt)}


def shapes(specs: list[str], rounds: int, repeats: int, dtype: str, forced: bool) -> None:
    """Time the ``--shapes`` graphs both ways (see the module docstring)."""
    import webnn_gpu as webnn
    from webnn_gpu.ops import conv
    from webnn_gpu.profile import profile_graph

    ctx = webnn.ml.create_context()
    force = {"WEBNN_GPU_FORCE_DWP_FORM": "lanes", "WEBNN_GPU_FORCE_DWPL_SECOND": "on"} if forced else {}
    print(f"{'shape':>16} {'pair':>7} {'conv':>7} {'merged':>7} {'stage2':>7} | terms (products, x blocks, 1) "
          f"| est stage2, est conv + dispatch")
    for spec in specs:
        hw, C, N, K, s = (int(t) for t in spec.lower().split("x"))
        built = {"old": _shape_graph(ctx, hw, C, N, K, s, {**force, "WEBNN_GPU_FORCE_DWPL_SECOND": "off"}, dtype),
                 "new": _shape_graph(ctx, hw, C, N, K, s, force, dtype)}
        kernels = [st for st in built["new"][0]._steps if hasattr(st, "template")]
        best: dict = {}
        for _ in range(rounds):
            for n, (g, x) in built.items():
                for i, r in enumerate(profile_graph(ctx, g, x, repeats)):
                    best[n, i] = min(best.get((n, i), float("inf")), r["us"])
        for g, _ in built.values():
            g.destroy()
        if len(kernels) != 1:
            print(f"{spec:>16} not merged ({len(kernels)} kernels)")
            continue
        g = conv._geometry(kernels[0].node.attrs["depthwise"])
        n4, k4 = N // 4, K // 4
        plan = conv._dwp_lanes(g, n4, conv.DW_LANES)
        terms = conv._dwpl_second_terms(g, n4, k4, plan, conv.DW_LANES)
        stage2, tile = conv._dwpl_second_estimates(g, N, K, plan, conv.DW_LANES, "lane-loop")
        print(f"{spec:>16} {best['old', 0]:7.1f} {best['old', 1]:7.1f} {best['new', 0]:7.1f}"
              f" {best['new', 0] - best['old', 0]:7.1f} | {', '.join(f'{t:.3f}' for t in terms)} | {stage2:.1f}, {tile:.1f}",
              flush=True)


def main(argv=None) -> int:
    """Compare the models (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", nargs="*", default=["iris-landmark"])
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--dtype", default="float32", choices=("float32", "float16"))
    p.add_argument("--shapes", nargs="*", default=[], help="HWxCxNxKxS synthetic layers instead of models")
    p.add_argument("--forced", action="store_true", help="with --shapes: force the lane kernel and the stage")
    p.add_argument("--old-env", nargs="*", default=[], help="K=V environment variables of the old build")
    p.add_argument("--new-env", nargs="*", default=[], help="K=V environment variables of the new build")
    p.add_argument("--set", nargs="*", default=[], help="NAME=INT constants of webnn_gpu.ops.conv, new build only")
    args = p.parse_args(argv)
    os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
    os.environ["WEBNN_GPU_PLAN_CACHE"] = "0"
    if args.shapes:
        shapes(args.shapes, args.rounds, args.repeats, args.dtype, args.forced)
        return 0
    pairs = [dict(kv.split("=", 1) for kv in a) for a in (args.old_env, args.new_env)]
    consts = {k: int(v) for k, v in (kv.split("=", 1) for kv in args.set)}
    for path in model_paths(args.models):
        compare(path, args.rounds, args.repeats, args.runs, args.dtype, *pairs, consts)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
