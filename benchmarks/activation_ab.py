"""An activation's element-wise kernel with ``shaders/_lib/activations.wgsl`` as it is at a git
revision against the working tree's, on inputs drawn from named ranges (where the old form does
arithmetic on float32 denormals, and ordinary values).

    .venv/bin/python benchmarks/activation_ab.py [--ops softplus gelu ...] [--rev HEAD]
                                                 [--rounds 20] [--repeats 5] [--size 1048576]
    .venv/bin/python benchmarks/activation_ab.py --sweep [--ops ...] [--size 262144]

One graph per op and form (old: the template at ``--rev``, ``knob_ab.templates_at``; new: the
working tree's), built in one process; each round times every input range through the old and
the new kernel in turn (the order swapped every round) with timestamp queries
(``webnn_gpu.profile.profile_graph``, the median of ``--repeats``). Prints per op and range
the old and new microseconds (medians over the rounds) and the median, quartiles and range of
the per-round ratio new / old, and whether the two forms' outputs are the same bits.

``--sweep`` times the working tree's kernels alone, the whole input at one value, for each of
:func:`sweep_values` (the least of 3 medians of 3 runs) and prints per op the runs of values
whose time is over twice the op's median: where its arithmetic meets denormals.
"""

from __future__ import annotations

import argparse
import os

import numpy as np

from _common import ratio_line  # benchmarks/_common.py (the script's folder is on sys.path)
from knob_ab import templates_at

TEMPLATE = "shaders/_lib/activations.wgsl"


def _log_uniform(rng, n: int, lo: float, hi: float) -> np.ndarray:
    """``n`` values of either sign whose magnitudes are log-uniform in [lo, hi]."""
    mag = np.exp(rng.uniform(np.log(lo), np.log(hi), n))
    return mag * rng.choice((-1.0, 1.0), n)


#: per op, the input ranges (name -> (kind, lo, hi)): "u" uniform in [lo, hi], "log" magnitudes
#: log-uniform in [lo, hi] of either sign; every op also gets "normal" (3 x a standard normal)
RANGES = {
    "softplus": {"x < -87.3": ("u", -102.0, -87.5), "|x| in [42, 54]": ("log", 42.0, 54.0),
                 "x > 87.3": ("u", 87.5, 102.0), "|x| < 1e-35": ("log", 1e-38, 1e-35)},
    "elu": {"|x| < 3e-34": ("log", 1e-38, 3e-34)},
    "gelu": {"|x| in [1e-24, 1e-16]": ("log", 1e-24, 1e-16), "x in [13.5, 14]": ("u", 13.5, 14.0),
             "x in [-14, -13.5]": ("u", -14.0, -13.5)},
    "erf": {"|x| in [1e-24, 1e-17]": ("log", 1e-24, 1e-17), "|x| in [9.3, 10]": ("log", 9.3, 10.0),
            "|x| > 1e37": ("log", 1e37, 3e38)},
    "exp": {"|x| < 1e-35": ("log", 1e-38, 1e-35)},
    "sigmoid": {"|x| < 1e-35": ("log", 1e-38, 1e-35)},
}


def inputs(op: str, size: int, seed: int = 0) -> dict:
    """The named float32 inputs of ``size`` values for ``op`` (:data:`RANGES` and "normal")."""
    rng = np.random.default_rng(seed)
    out = {"normal": 3.0 * rng.standard_normal(size)}
    for name, (kind, lo, hi) in RANGES.get(op, {}).items():
        out[name] = rng.uniform(lo, hi, size) if kind == "u" else _log_uniform(rng, size, lo, hi)
    return {k: v.astype(np.float32).reshape(size // 4, 4) for k, v in out.items()}


def sweep_values() -> np.ndarray:
    """Every half step in [-110, 110] and +-10^k for k from -45 to 38.5 by halves (float32)."""
    mags = 10.0 ** np.arange(-45, 38.6, 0.5)
    return np.unique(np.concatenate([-mags, mags, np.arange(-110, 110.01, 0.5)]).astype(np.float32))


def sweep(ctx, graph, op: str, size: int) -> None:
    """Print the runs of :func:`sweep_values` where the kernel of ``graph`` (``op`` alone) takes
    over twice its median time."""
    from webnn_gpu.profile import profile_graph

    vals = sweep_values()
    us = np.array([min(profile_graph(ctx, graph, {"x": np.full((size // 4, 4), v, np.float32)}, 3)[0]["us"]
                       for _ in range(3)) for v in vals])
    t = us / np.median(us)
    slow = np.where(t > 2.0)[0]
    print(f"{op}: median {np.median(us):.0f} us; over twice that at {len(slow)} of {len(vals)} values")
    for run in (np.split(slow, np.where(np.diff(slow) != 1)[0] + 1) if len(slow) else []):
        print(f"    [{vals[run[0]]:.3g} .. {vals[run[-1]]:.3g}] up to {t[run].max():.1f}x", flush=True)


def main(argv=None) -> int:
    """Compare the ops' kernels (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ops", nargs="*", default=None, help="(default: RANGES' ops, and tanh with --sweep)")
    p.add_argument("--rev", default="HEAD")
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--size", type=int, default=None, help="floats (1M; 256K with --sweep)")
    p.add_argument("--sweep", action="store_true", help="the working tree's kernels over sweep_values()")
    args = p.parse_args(argv)
    args.size = args.size or (1 << 18 if args.sweep else 1 << 20)
    ops = args.ops or [*RANGES, *(["tanh"] if args.sweep else [])]
    os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
    os.environ["WEBNN_GPU_PLAN_CACHE"] = "0"
    os.environ["WEBNN_GPU_TEMPLATE_CACHE"] = "0"
    import webnn_gpu as webnn
    from webnn_gpu.profile import profile_graph

    ctx = webnn.ml.create_context()

    def build(op):
        b = webnn.MLGraphBuilder(ctx)
        x = b.input("x", {"data_type": "float32", "shape": [args.size // 4, 4]})
        return b.build({"y": getattr(b, op)(x)})

    if args.sweep:
        for op in ops:
            g = build(op)
            sweep(ctx, g, op, args.size)
            g.destroy()
        return 0

    print(f"# old: {TEMPLATE} at {args.rev}, new: the working tree's; us old, new, new / old median "
          f"(quartiles) [range] over {args.rounds} rounds")
    for op in ops:
        with templates_at([TEMPLATE], args.rev):
            old = build(op)
        new = build(op)
        xs = inputs(op, args.size)
        times = {name: ([], []) for name in xs}
        for r in range(args.rounds):
            for name, x in xs.items():
                for k in ((0, 1) if r % 2 == 0 else (1, 0)):
                    times[name][k].append(profile_graph(ctx, (old, new)[k], {"x": x}, args.repeats)[0]["us"])
        for name, x in xs.items():
            a, b = ctx.compute(old, {"x": x})["y"], ctx.compute(new, {"x": x})["y"]
            same = np.array_equal(a.view(np.uint32), b.view(np.uint32))
            print(ratio_line(f"{op} {name}", *times[name], width=34) + ("" if same else "  (outputs differ)"),
                  flush=True)
        old.destroy()
        new.destroy()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
