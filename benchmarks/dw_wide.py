"""The stand-alone depthwise kernel (``conv/depthwise.wgsl``) per layer: microseconds and GFLOP/s.

    .venv/bin/python benchmarks/dw_wide.py [--zoo MODEL ...] [--shapes HxWxCxKxS ...] [--synthetic]
                                           [--dtype float32] [--repeats 9] [--rounds 3]
                                           [--env NAME=VAR=VALUE,... ...]

Each layer is built alone as ``relu6(depthwise_conv2d(x) + b)`` (NHWC, "same" padding, a
constant filter and bias: what MobileNet-style models run on this kernel) and its kernels timed
with timestamp queries (``webnn_gpu.profile.profile_graph``, the median of ``--repeats``, the
least of ``--rounds``). The layers: the stand-alone depthwise convs of the ``--zoo`` models
(names known to ``webnn-gpu fetch`` or ``.tflite`` paths; each distinct output size, channels,
window and stride once, with how many times the model runs it), the ``--shapes`` given, and with
``--synthetic`` a fixed grid of shapes the zoo does not have (7-112 pixels, 48-1152 channels,
3x3 and 5x5, strides 1 and 2, channels not a multiple of 8).

``--env`` builds every layer once per entry (``name=VAR=VALUE,VAR=VALUE``, e.g.
``vec4=WEBNN_GPU_FORCE_DW_WORDS=vec4 u64=WEBNN_GPU_FORCE_DW_WORDS=u64``), all in one process,
and times the builds alternately in each round, so that the entries compare under the same
machine load; the last column is the last entry's time over the first's. Prints per layer and
entry its microseconds (the graph's one kernel: the depthwise conv with the bias and clamp in
its epilogue), its GFLOP/s (2 flops per tap and output value) and the plan
(``webnn_gpu.ops.conv._dw_strip`` and ``_dw_words``).
"""

from __future__ import annotations

import argparse
import os

import numpy as np
from _common import best_kernel_us, environ, model_paths  # benchmarks/_common.py (the script's folder is on sys.path)

#: Shapes the zoo does not have: (H, W, C, K, S) of the input, "same" padding.
SYNTHETIC = [(112, 112, 48, 3, 1), (56, 56, 120, 3, 2), (56, 56, 72, 5, 1), (40, 40, 200, 3, 1),
             (28, 28, 184, 3, 1), (20, 20, 336, 5, 1), (14, 14, 1000, 3, 1), (14, 14, 960, 5, 2),
             (10, 10, 520, 5, 1), (9, 9, 100, 3, 1), (7, 7, 960, 3, 1), (13, 13, 60, 5, 2)]


def zoo_layers(paths: list[str]) -> list[tuple]:
    """(H, W, C, K, S, dilation, count, model) of each distinct stand-alone depthwise conv2d of
    the models at ``paths`` (built as the compiler decides)."""
    import webnn_gpu as webnn
    from webnn_gpu._lower import KernelStep
    from webnn_gpu.ops import conv

    ctx = webnn.ml.create_context()
    seen: dict = {}
    for path in paths:
        graph = webnn.load(path, ctx).graph
        for s in graph._steps:
            if isinstance(s, KernelStep) and s.template == "conv/depthwise.wgsl":
                g = conv._geometry(s.node)
                if g["O"] != g["C"] or g["KH"] != g["KW"] or g["sh"] != g["sw"]:
                    continue
                key = (g["H"], g["W"], g["C"], g["KH"], g["sh"], g["dh"], os.path.basename(path).split(".")[0])
                seen[key] = seen.get(key, 0) + 1
        graph.destroy()
    return [(*k[:6], n, k[6]) for k, n in seen.items()]


def _graph(ctx, H, W, C, K, S, D, dtype):
    import webnn_gpu as webnn

    rng = np.random.default_rng(0)
    np_t = np.float16 if dtype == "float16" else np.float32
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": dtype, "shape": [1, H, W, C]})
    span = (K - 1) * D + 1
    oh, ow = -(-H // S), -(-W // S)
    ph, pw = max(0, (oh - 1) * S + span - H), max(0, (ow - 1) * S + span - W)
    y = b.conv2d(x, b.constant((rng.standard_normal((1, K, K, C)) * 0.3).astype(np_t)), input_layout="nhwc",
                 filter_layout="ihwo", groups=C, padding=[ph // 2, ph - ph // 2, pw // 2, pw - pw // 2],
                 strides=[S, S], dilations=[D, D], bias=b.constant(rng.standard_normal(C).astype(np_t)))
    y = b.clamp(y, min_value=0.0, max_value=6.0)
    return b.build({"y": y}), {"x": rng.standard_normal((1, H, W, C)).astype(np_t)}


def _plan(conv, g, tuning, features) -> str:
    """The depthwise kernel's plan for geometry ``g``, as text: the strip (TH x TW) and, where
    the kernel moves u64 words, ``u64`` and the channel vec4s per invocation."""
    th, tw = conv._dw_strip(g, tuning)
    words = getattr(conv, "_dw_words", None)  # absent in checkouts before the u64 words
    n_inv = g["NB"] * -(-g["OH"] // th) * -(-g["OW"] // tw) * -(-g["O"] // 4)
    x64, nh = words(g, tuning, features, n_inv) if words else (False, 1)
    return f"{th}x{tw}" + (f" u64x{nh}" if x64 else "")


def _with_env(env: dict, fn):
    with environ(env):
        return fn()


def main(argv=None) -> int:
    """Time the layers (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--zoo", nargs="*", default=[], help="models whose stand-alone depthwise layers to time")
    p.add_argument("--shapes", nargs="*", default=[], help="HxWxCxKxS[xD] input shapes")
    p.add_argument("--synthetic", action="store_true", help="also the fixed grid of synthetic shapes")
    p.add_argument("--dtype", default="float32", choices=("float32", "float16"))
    p.add_argument("--repeats", type=int, default=9)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--env", nargs="*", default=[], help="name=VAR=VALUE,... builds to compare")
    args = p.parse_args(argv)
    os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
    import webnn_gpu as webnn
    from webnn_gpu.ops import conv

    paths = model_paths(args.zoo)
    layers = zoo_layers(paths) if paths else []
    for s in args.shapes:
        v = [int(t) for t in s.lower().split("x")]
        layers.append((*v[:5], v[5] if len(v) > 5 else 1, 1, "given"))
    if args.synthetic or not layers:
        layers += [(*s, 1, 1, "synthetic") for s in SYNTHETIC]
    envs = {"model": {}}
    for e in args.env:
        name, _, rest = e.partition("=")
        envs[name] = dict(kv.split("=", 1) for kv in rest.split(",") if kv)
    if len(envs) > 1 and not args.env[0].startswith("model="):
        envs.pop("model")
    ctx = webnn.ml.create_context()
    names = list(envs)
    print(f"{'model':>18} {'input':>13} {'C':>5} {'win':>4} {'s':>1} {'n':>2}  " +
          "  ".join(f"{n[:14]:>14} {'GF/s':>5} {'plan':>14}" for n in names) + "  ratio")
    totals = {n: 0.0 for n in names}
    for H, W, C, K, S, D, count, model in layers:
        built = {n: _with_env(env, lambda: _graph(ctx, H, W, C, K, S, D, args.dtype)) for n, env in envs.items()}
        plans = {}
        for n, (g, _) in built.items():
            from webnn_gpu._lower import KernelStep

            steps = [s for s in g._steps if isinstance(s, KernelStep)]
            dws = [s for s in steps if s.template == "conv/depthwise.wgsl"]
            plans[n] = _with_env(envs[n], lambda: _plan(conv, conv._geometry(dws[0].node), ctx._tuning,
                                                             ctx.features)) \
                if dws else ",".join(s.template.split("/")[-1][:8] for s in steps)
        best = best_kernel_us(ctx, built, args.rounds, args.repeats)
        for g, _ in built.values():
            g.destroy()
        oh, ow = -(-H // S), -(-W // S)
        flops = 2 * oh * ow * C * K * K
        cells = "  ".join(f"{best[n]:>14.1f} {flops / best[n] / 1e3:>5.1f} {plans[n]:>14}" for n in names)
        ratio = best[names[-1]] / best[names[0]]
        print(f"{model[:18]:>18} {H:>4}x{W:<4}x{C:<4} {C:>5} {K}x{K} {S} {count:>2}  {cells}  {ratio:5.2f}", flush=True)
        for n in names:
            totals[n] += best[n] * count
    if len(names) > 1:
        print("# weighted by count: " + ", ".join(f"{n} {totals[n]:.0f} us" for n in names)
              + f" ({totals[names[-1]] / totals[names[0]]:.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
