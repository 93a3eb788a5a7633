"""First layers (convs of 1-4 input channels) on kernel variants side by side, in one process.

    .venv/bin/python benchmarks/first_layers.py [SPEC ...] [--variant NAME:SETTING[;SETTING]] [--rounds 4]
        [--dtype float16]

A SPEC is ``H,W,C,O,KH,KW,STRIDE,PAD[,PAD_END][/ACT]`` as ``benchmarks/tile_layers.py``'s
``conv:`` (one NHWC float32 image, a constant OHWI filter and bias, then ``relu6``,
``hard_swish``, ``prelu`` or ``prelu_mul_add`` with constant operands; ``--dtype float16`` makes
input, filter, bias and operands float16); ``first`` (the default)
is the zoo's first layers (``tile_layers.FIRST_LAYERS``). A variant is a name and the settings
applied while its graphs are built: ``ATTR=VALUE`` sets ``webnn_gpu.ops.conv.ATTR`` (a Python
literal) and ``WEBNN_GPU_...=VALUE`` an environment variable; the variant ``base`` (no
settings) is always there. Every graph is checked against float64 NumPy, then the variants of
each layer are timed in turns, ``--rounds`` times: process CPU time per dispatch
(``time.process_time()``, all threads; steadier than wall time on a shared machine) and the
kernels' own time from timestamp queries (``webnn_gpu.profile.profile_graph``, median). The
table shows the least of the rounds per variant and each variant's ratio to ``base``.
"""

from __future__ import annotations

import argparse
import ast
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tile_layers import FIRST_LAYERS  # noqa: E402

import webnn_gpu as webnn  # noqa: E402
from webnn_gpu._lower import KernelStep  # noqa: E402
from webnn_gpu.ops import conv as conv_mod  # noqa: E402
from webnn_gpu.profile import profile_graph  # noqa: E402


def reference(xin, wt, bias, s, p, pe):
    """The float64 conv2d (NHWC input, OHWI filter) plus bias."""
    O, KH, KW, _ = wt.shape
    H, W = xin.shape[1:3]
    xp = np.pad(xin.astype(np.float64), ((0, 0), (p, pe), (p, pe), (0, 0)))
    OH, OW = (H + p + pe - KH) // s + 1, (W + p + pe - KW) // s + 1
    ref = np.zeros((1, OH, OW, O))
    for kh in range(KH):
        for kw in range(KW):
            ref += np.einsum("nhwc,oc->nhwo", xp[:, kh:kh + s * OH:s, kw:kw + s * OW:s, :],
                             wt[:, kh, kw, :].astype(np.float64))
    return ref + bias.astype(np.float64)


def epilogue(ref, act, ops):
    """The epilogue ``act`` on the float64 ``ref`` with the constant operands ``ops``."""
    f = {k: v.astype(np.float64) for k, v in ops.items()}
    if act == "relu6":
        return np.clip(ref, 0, 6)
    if act == "hard_swish":
        return ref * np.clip(ref + 3, 0, 6) / 6
    if act in ("prelu", "prelu_mul_add"):
        ref = np.where(ref >= 0, ref, f["slope"] * ref)
        return ref * f["m"] + f["ad"] if act == "prelu_mul_add" else ref
    if act:
        raise SystemExit(f"unknown epilogue {act!r}: relu6, hard_swish, prelu or prelu_mul_add")
    return ref


def build(ctx, spec: str, settings: dict, dtype: str = "float32"):
    """The graph of ``spec`` built with ``settings`` applied, its input and its float64 reference."""
    rng = np.random.default_rng(0)
    spec = spec.removeprefix("conv:")
    act = spec.split("/")[1] if "/" in spec else ""
    a = [int(v) for v in spec.split("/")[0].split(",")]
    H, W, C, O, KH, KW, s, p = (a + [1, 0])[:8]
    pe = a[8] if len(a) > 8 else p
    npt = np.float16 if dtype == "float16" else np.float32
    wt = rng.standard_normal((O, KH, KW, C)).astype(npt)
    bias = rng.standard_normal(O).astype(npt)
    xin = rng.standard_normal((1, H, W, C)).astype(npt)
    ops = dict(slope=rng.uniform(0.05, 0.5, O).astype(npt), m=rng.uniform(0.5, 2, O).astype(npt),
               ad=rng.uniform(-1, 1, O).astype(npt))
    ref = epilogue(reference(xin, wt, bias, s, p, pe), act, ops)
    old_attrs = {k: getattr(conv_mod, k) for k in settings if not k.startswith("WEBNN_GPU_")}
    old_env = {k: os.environ.get(k) for k in settings if k.startswith("WEBNN_GPU_")}
    try:
        for k, v in settings.items():
            if k.startswith("WEBNN_GPU_"):
                os.environ[k] = v
            else:
                setattr(conv_mod, k, ast.literal_eval(v))
        b = webnn.MLGraphBuilder(ctx)
        x = b.input("x", {"data_type": dtype, "shape": [1, H, W, C]})
        y = b.conv2d(x, b.constant(wt), bias=b.constant(bias), strides=[s, s], padding=[p, pe, p, pe],
                     input_layout="nhwc", filter_layout="ohwi")
        if act == "relu6":
            y = b.clamp(y, min_value=0.0, max_value=6.0)
        elif act == "hard_swish":
            y = b.hard_swish(y)
        elif act in ("prelu", "prelu_mul_add"):
            y = b.prelu(y, b.constant(ops["slope"]))
            if act == "prelu_mul_add":
                y = b.add(b.mul(y, b.constant(ops["m"])), b.constant(ops["ad"]))
        t0 = time.perf_counter()
        g = b.build({"y": y})
        built = time.perf_counter() - t0
    finally:
        for k, v in old_attrs.items():
            setattr(conv_mod, k, v)
        for k, v in old_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    note = "; ".join(st.note or st.template for st in g._steps if isinstance(st, KernelStep))
    return dict(g=g, x=xin, ref=ref, note=note, flops=2 * ref.size * KH * KW * C, build=built, shape=y.shape)


def main(argv=None) -> int:
    """Run the comparison (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("specs", nargs="*", default=["first"])
    p.add_argument("--variant", action="append", default=[], help="NAME:SETTING[;SETTING]")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--dtype", choices=("float32", "float16"), default="float32")
    args = p.parse_args(argv)
    specs = [f for s in args.specs for f in (FIRST_LAYERS if s == "first" else [s])]
    variants = {"base": {}}
    for v in args.variant:
        name, _, sets = v.partition(":")
        variants[name] = dict(kv.split("=", 1) for kv in sets.split(";") if kv)
    ctx = webnn.ml.create_context()
    cases = {}
    for spec in specs:
        for name, settings in variants.items():
            c = build(ctx, spec, settings, args.dtype)
            t = ctx.create_tensor({"data_type": args.dtype, "shape": list(c["x"].shape), "writable": True})
            ctx.write_tensor(t, c["x"])
            out = ctx.create_tensor({"data_type": args.dtype, "shape": list(c["shape"]), "readable": True})
            ctx.dispatch(c["g"], {"x": t}, {"y": out})
            c["err"] = float(np.abs(ctx.read_tensor(out).astype(np.float64) - c["ref"]).max() / np.abs(c["ref"]).max())
            c.update(t=t, out=out, cpu=1e9, us=1e9)
            cases[spec, name] = c
    for _ in range(args.rounds):
        for spec in specs:
            for name in variants:
                c = cases[spec, name]
                reps = max(3, min(40, int(4e7 / c["flops"])))
                c0 = time.process_time()
                for _ in range(reps):
                    ctx.dispatch(c["g"], {"x": c["t"]}, {"y": c["out"]})
                ctx.read_tensor(c["out"])
                c["cpu"] = min(c["cpu"], (time.process_time() - c0) / reps)
                rows = profile_graph(ctx, c["g"], {"x": c["x"]}, repeats=5)
                c["us"] = min(c["us"], sum(r["us"] for r in rows))
    print(f"{'spec':36s} {'variant':10s} {'cpu us':>8s} {'GF/s':>6s} {'kern us':>8s} {'/base':>6s} {'build s':>7s}"
          "  max err  kernels")
    for spec in specs:
        base = cases[spec, "base"]
        for name in variants:
            c = cases[spec, name]
            print(f"{spec:36s} {name:10s} {c['cpu'] * 1e6:8.0f} {c['flops'] / c['cpu'] / 1e9:6.1f} {c['us']:8.0f}"
                  f" {c['us'] / base['us']:6.2f} {c['build']:7.2f}  {c['err']:.0e}  {c['note']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
