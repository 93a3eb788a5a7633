"""Two forms of the engine side by side inside whole models: a ``WEBNN_GPU_FORCE_*`` switch's, or
a template's text at a git revision against the working tree's.

    .venv/bin/python benchmarks/knob_ab.py --old WEBNN_GPU_FORCE_X=off [--new WEBNN_GPU_FORCE_X=on]
                                           [--models selfie ...] [--rounds 20] [--repeats 5]
                                           [--runs 10] [--dtype float32]
    .venv/bin/python benchmarks/knob_ab.py --template shaders/_lib/activations.wgsl [--rev main] ...

Each model (names of ``webnn_gpu.models`` or ``.tflite`` paths) is loaded twice in one process
(the plan cache and the rendered-WGSL cache off): "old" with the ``--old`` variables set (or the
``--template`` files as they are at ``--rev``, written in place for that build and put back
after it), "new" with the ``--new`` ones (by default the ``--old`` variables unset: the engine's
own choice; the working tree's templates), both on the same inputs (``_common.model_inputs``: the photo for an image input). Each round times the two graphs in turn (the order swapped every round)
with timestamp queries (``webnn_gpu.profile.profile_graph``, the median of ``--repeats``) and
their wall time per inference (write, dispatch, read: the least of 3 batches of ``--runs``).
Prints per kernel whose WGSL differs the old and new microseconds (medians over the rounds) and
the median, quartiles and range of the per-round ratio new / old (where the two forms have
different kernel counts, a form that merges launches: only the kernels of each form that the other
lacks, together), then those kernels together, all kernels
and the wall, likewise; and how far the two graphs' outputs are apart.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess

from _common import environ, model_inputs, model_paths, output_gaps, per_run_us, ratio_line  # benchmarks/_common.py (the script's folder is on sys.path)


@contextlib.contextmanager
def templates_at(files: list[str], rev: str):
    """The template ``files`` (paths from the repository root) as they are at git revision
    ``rev`` for the block, then as they were; the engine's in-memory template caches emptied
    at both ends (a private detail of ``webnn_gpu._kernels``: a benchmark's business only)."""
    import webnn_gpu._kernels as K

    def clear():
        K._env.cache.clear()
        K._RENDERED.clear()
        K._RENDERED_FILE.clear()

    texts = {f: open(f).read() for f in files}
    try:
        for f in files:
            with open(f, "w") as fh:
                fh.write(subprocess.run(["git", "show", f"{rev}:{f}"], capture_output=True, text=True, check=True).stdout)
        clear()
        yield
    finally:
        for f, t in texts.items():
            with open(f, "w") as fh:
                fh.write(t)
        clear()


def compare(path: str, rounds: int, repeats: int, runs: int, dtype: str, old: dict, new: dict,
            files: list[str], rev: str) -> None:
    """Time one model both ways (see the module docstring)."""
    import webnn_gpu as webnn
    from webnn_gpu.profile import profile_graph

    ctx = webnn.ml.create_context()
    built = {}
    for name, env in (("old", old), ("new", new)):
        with environ(env), (templates_at(files, rev) if name == "old" and files else contextlib.nullcontext()):
            g = webnn.load(path, ctx, dtype=dtype).graph
        built[name] = (g, model_inputs(g))
    ks = {n: [s for s in g._steps if hasattr(s, "template")] for n, (g, _) in built.items()}
    same = len(ks["old"]) == len(ks["new"])
    # kernels that differ: by position where both forms have as many, else those of each form
    # whose (label, WGSL) the other form lacks (a form that merges launches)
    seen = {n: {(s.label, s.wgsl) for s in ks[n]} for n in ks}
    only = {n: [i for i, s in enumerate(ks[n]) if (s.label, s.wgsl) not in seen["new" if n == "old" else "old"]]
            for n in ks}
    diff = [i for i, (a, b) in enumerate(zip(ks["old"], ks["new"])) if a.wgsl != b.wgsl] if same else []
    outs = {n: ctx.compute(g, x) for n, (g, x) in built.items()}
    per = {i: ([], []) for i in diff}
    sel, tot, wall = ([], []), ([], []), ([], [])
    for r in range(rounds):
        rows = {}
        for n, (g, x) in list(built.items())[::-1 if r % 2 else 1]:
            rows[n] = [row["us"] for row in profile_graph(ctx, g, x, repeats)]
            k = 0 if n == "old" else 1
            tot[k].append(sum(rows[n]))
            sel[k].append(sum(rows[n][i] for i in (diff if same else only[n])))
            wall[k].append(per_run_us(ctx, g, x, runs))
        for i in diff:
            per[i][0].append(rows["old"][i])
            per[i][1].append(rows["new"][i])
    name = os.path.basename(path).split(".")[0]
    if same:
        print(f"# {name} ({dtype}): {len(diff)} of {len(ks['old'])} kernels differ; old us, new us, "
              f"new / old median (quartiles) [range] over {rounds} rounds")
    else:
        print(f"# {name} ({dtype}): old kernels {[ks['old'][i].label for i in only['old']]} against new "
              f"{[ks['new'][i].label for i in only['new']]} ({len(ks['old'])} and {len(ks['new'])} kernels); "
              f"old us, new us, new / old median (quartiles) [range] over {rounds} rounds")
    for i in diff:
        print(ratio_line(f"#{i} {ks['new'][i].label} {getattr(ks['new'][i], 'note', '')}", *per[i]))
    if diff or not same:
        print(ratio_line("changed kernels", *sel))
    print(ratio_line("all kernels", *tot))
    print(ratio_line("wall per inference", *wall))
    print("\n".join(output_gaps(outs["old"], outs["new"])), flush=True)
    for g, _ in built.values():
        g.destroy()


def main(argv=None) -> int:
    """Compare the models (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", nargs="*", default=["selfie"])
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--dtype", default="float32", choices=("float32", "float16"))
    p.add_argument("--old", nargs="*", default=[], help="VAR=VALUE set for the old form")
    p.add_argument("--template", nargs="*", default=[], help="template files taken at --rev for the old form")
    p.add_argument("--rev", default="HEAD")
    p.add_argument("--new", nargs="*", default=None, help="VAR=VALUE set for the new form (default: --old's unset)")
    args = p.parse_args(argv)
    old = dict(kv.split("=", 1) for kv in args.old)
    new = dict(kv.split("=", 1) for kv in args.new) if args.new is not None else dict.fromkeys(old)
    os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
    os.environ["WEBNN_GPU_PLAN_CACHE"] = "0"
    os.environ["WEBNN_GPU_TEMPLATE_CACHE"] = "0"
    for path in model_paths(args.models):
        compare(path, args.rounds, args.repeats, args.runs, args.dtype, old, new, args.template, args.rev)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
