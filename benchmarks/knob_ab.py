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
own choice; the working tree's templates), both on the same inputs (:func:`_inputs`). Each round times the two graphs in turn (the order swapped every round)
with timestamp queries (``webnn_gpu.profile.profile_graph``, the median of ``--repeats``) and
their wall time per inference (write, dispatch, read: the least of 3 batches of ``--runs``).
Prints per kernel whose WGSL differs the old and new microseconds (medians over the rounds) and
the median, quartiles and range of the per-round ratio new / old, then those kernels together, all kernels
and the wall, likewise; and how far the two graphs' outputs are apart.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess

import numpy as np
from _common import environ, model_paths, per_run_us  # benchmarks/_common.py (the script's folder is on sys.path)


def _inputs(g) -> dict:
    """The graph's inputs: an image input ([1, H, W, 3]) gets the zoo's astronaut photo
    (benchmarks/zoo.py: the values a model's activations take on a photo, not on noise, where
    a segmenter's logits sink into float32's denormal range), any other uniform noise in [0, 1)."""
    from zoo import astronaut

    rng = np.random.default_rng(0)
    out = {}
    for n, v in g._inputs.items():
        dt = np.float16 if v.data_type == "float16" else np.float32
        shape = tuple(v.shape)
        photo = len(shape) == 4 and shape[0] == 1 and shape[3] == 3
        out[n] = (astronaut(shape[1:3]) if photo else rng.uniform(0, 1, shape)).astype(dt)
    return out


def _line(name: str, old: list[float], new: list[float]) -> str:
    r = np.array(new) / np.array(old)
    q1, q3 = np.quantile(r, (0.25, 0.75))
    return (f"{name[-52:]:>52} {np.median(old):9.1f} {np.median(new):9.1f}  {np.median(r):5.3f}"
            f" ({q1:5.3f}-{q3:5.3f}) [{r.min():5.3f}-{r.max():5.3f}]")


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
        built[name] = (g, _inputs(g))
    ks = {n: [s for s in g._steps if hasattr(s, "template")] for n, (g, _) in built.items()}
    assert len(ks["old"]) == len(ks["new"])
    diff = [i for i, (a, b) in enumerate(zip(ks["old"], ks["new"])) if a.wgsl != b.wgsl]
    outs = {n: ctx.compute(g, x) for n, (g, x) in built.items()}
    per = {i: ([], []) for i in diff}
    sel, tot, wall = ([], []), ([], []), ([], [])
    for r in range(rounds):
        rows = {}
        for n, (g, x) in list(built.items())[::-1 if r % 2 else 1]:
            rows[n] = [row["us"] for row in profile_graph(ctx, g, x, repeats)]
            k = 0 if n == "old" else 1
            tot[k].append(sum(rows[n]))
            sel[k].append(sum(rows[n][i] for i in diff))
            wall[k].append(per_run_us(ctx, g, x, runs))
        for i in diff:
            per[i][0].append(rows["old"][i])
            per[i][1].append(rows["new"][i])
    name = os.path.basename(path).split(".")[0]
    print(f"# {name} ({dtype}): {len(diff)} of {len(ks['old'])} kernels differ; old us, new us, "
          f"new / old median (quartiles) [range] over {rounds} rounds")
    for i in diff:
        print(_line(f"#{i} {ks['new'][i].label} {getattr(ks['new'][i], 'note', '')}", *per[i]))
    if diff:
        print(_line("changed kernels", *sel))
    print(_line("all kernels", *tot))
    print(_line("wall per inference", *wall))
    for k in outs["old"]:
        a, b = np.asarray(outs["old"][k], np.float64), np.asarray(outs["new"][k], np.float64)
        print(f"# output {k}: max |new - old| {np.abs(a - b).max():.3g} (max |old| {np.abs(a).max():.3g})", flush=True)
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
