"""Memory-bound kernels moving 8-value u64 words against vec4s of the storage type, per layer.

    .venv/bin/python benchmarks/words.py [--zoo MODEL ...] [--shapes NxHxWxC ...] [--synthetic]
                                         [--dtype float32] [--repeats 9] [--rounds 4]
    .venv/bin/python benchmarks/words.py --in-models MODEL ... [--rounds 10]

The layers: the linear doublings (``resample/resample2d_x2.wgsl``) of the ``--zoo`` models (names
known to ``webnn-gpu fetch`` or ``.tflite`` paths; each distinct input shape once, with how many
times the model runs it), the ``--shapes`` given (resample inputs), and with ``--synthetic`` a
fixed grid of shapes the zoo does not have. Each layer is built alone as
``resample2d(x, linear, 2x)`` twice in one process, once with
``WEBNN_GPU_FORCE_RESAMPLE_WORDS=vec4`` (the vec4 form) and once as the context decides, and the
two builds are timed alternately in each round with timestamp queries
(``webnn_gpu.profile.profile_graph``: the median of ``--repeats``, the least of ``--rounds``).
Prints per layer the two times in microseconds, whether the second moved u64 words, and
their ratio.

``--in-models`` instead loads each model twice in one process (the plan cache off), with the
vec4 forms (``WEBNN_GPU_FORCE_RESAMPLE_WORDS=vec4``, ``WEBNN_GPU_FORCE_BLOCK_WORDS=vec4``) and
as the context decides, times the two graphs alternately and prints, per kernel template that
moves words (the doublings, the first layers), the sum of its kernels' times in each, the
least of ``--rounds``.
"""

from __future__ import annotations

import argparse
import os

import numpy as np
from _common import best_kernel_us, environ, model_paths  # benchmarks/_common.py (the script's folder is on sys.path)

#: Input shapes (N, H, W, C) the zoo does not have.
SYNTHETIC = [(1, 64, 64, 16), (1, 32, 32, 40), (1, 96, 96, 8), (1, 16, 16, 200), (1, 128, 128, 24),
             (2, 24, 24, 32), (1, 48, 48, 12)]


def zoo_layers(paths: list[str]) -> list[tuple]:
    """(N, H, W, C, count, model) of each distinct doubling of the models at ``paths``."""
    import webnn_gpu as webnn
    from webnn_gpu._lower import KernelStep

    ctx = webnn.ml.create_context()
    seen: dict = {}
    for path in paths:
        graph = webnn.load(path, ctx).graph
        for s in graph._steps:
            if isinstance(s, KernelStep) and s.template == "resample/resample2d_x2.wgsl":
                key = (*s.node.inputs[0].shape, os.path.basename(path).split(".")[0])
                seen[key] = seen.get(key, 0) + 1
        graph.destroy()
    return [(*k[:4], n, k[4]) for k, n in seen.items()]


def _graph(ctx, shape, dtype, env):
    import webnn_gpu as webnn

    with environ(env):
        rng = np.random.default_rng(0)
        np_t = np.float16 if dtype == "float16" else np.float32
        b = webnn.MLGraphBuilder(ctx)
        x = b.input("x", {"data_type": dtype, "shape": list(shape)})
        y = b.resample2d(x, mode="linear", sizes=[2 * shape[1], 2 * shape[2]], axes=[1, 2])
        return b.build({"y": y}), {"x": rng.standard_normal(shape).astype(np_t)}


TEMPLATES = ("resample/resample2d_x2.wgsl", "conv/block.wgsl")
VEC4_ENV = {"WEBNN_GPU_FORCE_RESAMPLE_WORDS": "vec4", "WEBNN_GPU_FORCE_BLOCK_WORDS": "vec4"}


def in_models(models: list[str], rounds: int, repeats: int) -> None:
    """Time the word-moving kernels inside whole models, both forms (see the module docstring)."""
    import webnn_gpu as webnn
    from webnn_gpu.profile import profile_graph

    os.environ["WEBNN_GPU_PLAN_CACHE"] = "0"
    ctx = webnn.ml.create_context()
    print(f"{'model':>34} {'kernel':>28} {'vec4 us':>9} {'words us':>9} ratio")
    for path in model_paths(models):
        built = {}
        for name, env in (("vec4", VEC4_ENV), ("words", {})):
            with environ({**{k: None for k in VEC4_ENV}, **env}):
                g = webnn.load(path, ctx).graph
            rng = np.random.default_rng(0)
            built[name] = (g, {n: rng.uniform(0, 1, v.shape).astype(np.float32) for n, v in g._inputs.items()})
        best = {(n, t): float("inf") for n in built for t in TEMPLATES}
        for _ in range(rounds):
            for n, (g, inputs) in built.items():
                rows = profile_graph(ctx, g, inputs, repeats)
                for t in TEMPLATES:
                    best[n, t] = min(best[n, t], sum(r["us"] for r in rows if r["template"] == t))
        for g, _ in built.values():
            g.destroy()
        for t in TEMPLATES:
            if best["vec4", t] > 0:
                print(f"{os.path.basename(path).split('.')[0][:34]:>34} {t[:28]:>28} {best['vec4', t]:>9.1f}"
                      f" {best['words', t]:>9.1f} {best['words', t] / best['vec4', t]:5.2f}", flush=True)


def main(argv=None) -> int:
    """Time the layers (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--zoo", nargs="*", default=[], help="models whose doublings to time")
    p.add_argument("--shapes", nargs="*", default=[], help="NxHxWxC input shapes")
    p.add_argument("--synthetic", action="store_true", help="also the fixed grid of synthetic shapes")
    p.add_argument("--dtype", default="float32", choices=("float32", "float16"))
    p.add_argument("--repeats", type=int, default=9)
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--in-models", nargs="*", default=[], help="time the kernels inside these models instead")
    args = p.parse_args(argv)
    os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
    if args.in_models:
        in_models(args.in_models, args.rounds, args.repeats)
        return 0
    import webnn_gpu as webnn

    paths = model_paths(args.zoo)
    layers = zoo_layers(paths) if paths else []
    layers += [(*[int(t) for t in s.lower().split("x")], 1, "given") for s in args.shapes]
    if args.synthetic or not layers:
        layers += [(*s, 1, "synthetic") for s in SYNTHETIC]
    ctx = webnn.ml.create_context()
    envs = {"vec4": {"WEBNN_GPU_FORCE_RESAMPLE_WORDS": "vec4"}, "words": {}}
    print(f"{'model':>26} {'input':>16} {'n':>2} {'vec4 us':>9} {'words us':>9} {'u64':>4} ratio")
    totals = dict.fromkeys(envs, 0.0)
    for *shape, count, model in layers:
        built = {n: _graph(ctx, tuple(shape), args.dtype, env) for n, env in envs.items()}
        u64 = "u64" in next(s.wgsl for s in built["words"][0]._steps if hasattr(s, "wgsl"))
        best = best_kernel_us(ctx, built, args.rounds, args.repeats)
        for g, _ in built.values():
            g.destroy()
        for n in envs:
            totals[n] += best[n] * count
        print(f"{model[:26]:>26} {'x'.join(map(str, shape)):>16} {count:>2} {best['vec4']:>9.1f} {best['words']:>9.1f}"
              f" {'yes' if u64 else 'no':>4} {best['words'] / best['vec4']:5.2f}", flush=True)
    print(f"# weighted by count: vec4 {totals['vec4']:.0f} us, words {totals['words']:.0f} us "
          f"({totals['words'] / totals['vec4']:.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
