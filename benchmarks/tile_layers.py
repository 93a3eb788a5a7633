"""Process CPU time per dispatch of one-layer graphs (any conv2d window, or a matmul), two
checkouts alternating in fresh processes.

    .venv/bin/python benchmarks/tile_layers.py OLD_CHECKOUT NEW_CHECKOUT SPEC [SPEC ...] [--rounds 3] [--mesa25]

A SPEC is ``conv:H,W,C,O,KH,KW[,STRIDE,PAD[,PAD_END]][/ACT]`` (one NHWC image, an OHWI constant filter, a
bias, PAD before and PAD_END (default PAD) after the rows and columns, then ACT: ``relu6``,
``hard_swish``, ``prelu`` or ``prelu_mul_add``, a PReLU then a per-channel scale and shift, all
with constant operands), ``first`` (the first layers of the 13 zoo models, as they are there), ``mm:M,K,N`` (a float32
matmul with a constant B), ``up:H,W,C,O`` (a 1x1 conv, then relu, of ``x * scale +
resample2d(small, 2x)``: fuse_conv_upsample's kernel) or ``pool:H,W,C,O`` (a 1x1 conv and the global
mean of its output, also an output: fuse_pool_partials's kernel), optionally prefixed by
``NAME=VALUE+NAME=VALUE@`` environment variables set while that graph is built (a
``WEBNN_GPU_FORCE_*`` switch). Each process builds every graph, checks it against float64 NumPy
(the largest error relative to the largest output is printed), then times each one with
``time.process_time()`` (all threads of the process: lavapipe's workers do the work, so this is
steadier than wall time on a machine shared with other work), best of two batches; the table
shows the best of ``--rounds`` per checkout, GFLOP/s per CPU second and NEW / OLD, with the tile
kernel's size note (``M x K per tap, window -> N, tile``). A checkout is a source tree imported
from its own ``webnn_gpu/`` and ``shaders/`` with this environment's packages, as
``benchmarks/ab.py`` does. ``--mesa25`` runs on the Mesa 25 lavapipe that ``benchmarks/peers.py``
unpacks (the "default" tuning profile: no subgroup variant).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

_RUN = r'''
import json, os, sys, time, types
import numpy as np
root, specs = sys.argv[1], json.loads(sys.argv[2])
sys.path.insert(0, root)
sh = types.ModuleType("webnn_gpu.shaders"); sh.__file__ = root + "/shaders/__init__.py"; sh.__path__ = [root + "/shaders"]
sys.modules["webnn_gpu.shaders"] = sh
import webnn_gpu as webnn
from webnn_gpu._lower import KernelStep
assert webnn.__file__.startswith(root), webnn.__file__
ctx = webnn.ml.create_context()
rng = np.random.default_rng(0)


def build(spec):
    envs = {}
    if "@" in spec:
        e, spec = spec.split("@")
        envs = dict(kv.split("=") for kv in e.split("+"))
    old = {k: os.environ.get(k) for k in envs}
    os.environ.update(envs)
    kind, args = spec.split(":")
    a = [int(v) for v in args.split("/")[0].split(",")]
    b = webnn.MLGraphBuilder(ctx)
    small = None
    extra = {}
    if kind == "up":
        H, W, C, O = a
        x = b.input("x", {"data_type": "float32", "shape": [1, H, W, C]})
        sm = b.input("small", {"data_type": "float32", "shape": [1, H // 2, W // 2, C]})
        sc = rng.uniform(0.5, 1.5, (1, 1, 1, C)).astype(np.float32)
        wt = rng.standard_normal((O, 1, 1, C)).astype(np.float32)
        xin = rng.standard_normal((1, H, W, C)).astype(np.float32)
        small = rng.standard_normal((1, H // 2, W // 2, C)).astype(np.float32)
        up = b.resample2d(sm, mode="linear", scales=[2.0, 2.0], axes=[1, 2])
        y = b.relu(b.conv2d(b.add(b.mul(x, b.constant(sc)), up), b.constant(wt), input_layout="nhwc",
                            filter_layout="ohwi"))
        # the exact 2x bilinear upsampling (half-pixel centers, clamped) of the small image
        def up1(v, axis):
            n = v.shape[axis]
            i = np.arange(2 * n)
            src = np.clip((i + 0.5) / 2 - 0.5, 0, n - 1)
            lo = np.floor(src).astype(int)
            hi = np.minimum(lo + 1, n - 1)
            f = (src - lo).reshape([-1 if d == axis else 1 for d in range(v.ndim)])
            return np.take(v, lo, axis) * (1 - f) + np.take(v, hi, axis) * f
        v = xin.astype(np.float64) * sc + up1(up1(small.astype(np.float64), 1), 2)
        ref = np.maximum(np.einsum("nhwc,oc->nhwo", v, wt[:, 0, 0, :].astype(np.float64)), 0)
        macs = C
    elif kind == "pool":
        H, W, C, O = a
        x = b.input("x", {"data_type": "float32", "shape": [1, H, W, C]})
        wt = rng.standard_normal((O, 1, 1, C)).astype(np.float32)
        xin = rng.standard_normal((1, H, W, C)).astype(np.float32)
        y = b.conv2d(x, b.constant(wt), input_layout="nhwc", filter_layout="ohwi")
        pooled = b.reduce_mean(y, axes=[1, 2], keep_dimensions=True)
        extra["p"] = pooled
        ref = np.einsum("nhwc,oc->nhwo", xin.astype(np.float64), wt[:, 0, 0, :].astype(np.float64))
        macs = C
    elif kind == "mm":
        M, K, N = a
        x = b.input("x", {"data_type": "float32", "shape": [M, K]})
        wt = rng.standard_normal((K, N)).astype(np.float32)
        xin = rng.standard_normal((M, K)).astype(np.float32)
        y = b.matmul(x, b.constant(wt))
        ref = xin.astype(np.float64) @ wt
        macs = K
    else:
        act = args.split("/")[1] if "/" in args else ""
        H, W, C, O, KH, KW, s, p = (a + [1, 0])[:8]
        pe = a[8] if len(a) > 8 else p
        x = b.input("x", {"data_type": "float32", "shape": [1, H, W, C]})
        wt = rng.standard_normal((O, KH, KW, C)).astype(np.float32)
        bias = rng.standard_normal(O).astype(np.float32)
        y = b.conv2d(x, b.constant(wt), bias=b.constant(bias), strides=[s, s], padding=[p, pe, p, pe],
                     input_layout="nhwc", filter_layout="ohwi")
        xin = rng.standard_normal((1, H, W, C)).astype(np.float32)
        xp = np.pad(xin.astype(np.float64), ((0, 0), (p, pe), (p, pe), (0, 0)))
        OH, OW = (H + p + pe - KH) // s + 1, (W + p + pe - KW) // s + 1
        ref = np.zeros((1, OH, OW, O))
        for kh in range(KH):
            for kw in range(KW):
                ref += np.einsum("nhwc,oc->nhwo", xp[:, kh:kh + s * OH:s, kw:kw + s * OW:s, :],
                                 wt[:, kh, kw, :].astype(np.float64))
        ref += bias
        slope = rng.uniform(0.05, 0.5, O).astype(np.float32)
        m, ad = rng.uniform(0.5, 2, O).astype(np.float32), rng.uniform(-1, 1, O).astype(np.float32)
        if act == "relu6":
            y, ref = b.clamp(y, min_value=0.0, max_value=6.0), np.clip(ref, 0, 6)
        elif act == "hard_swish":
            y, ref = b.hard_swish(y), ref * np.clip(ref + 3, 0, 6) / 6
        elif act in ("prelu", "prelu_mul_add"):
            y, ref = b.prelu(y, b.constant(slope)), np.where(ref >= 0, ref, slope * ref)
            if act == "prelu_mul_add":
                y, ref = b.add(b.mul(y, b.constant(m)), b.constant(ad)), ref * m + ad
        elif act:
            raise SystemExit(f"unknown epilogue {act!r}: relu6, hard_swish, prelu or prelu_mul_add")
        macs = KH * KW * C
    g = b.build({"y": y, **extra})
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    notes = [st.note or st.template for st in g._steps if isinstance(st, KernelStep)]
    t = ctx.create_tensor({"data_type": "float32", "shape": list(xin.shape), "writable": True})
    ctx.write_tensor(t, xin)
    out = ctx.create_tensor({"data_type": "float32", "shape": list(y.shape), "readable": True})
    feeds = {"x": t}
    if small is not None:
        feeds["small"] = ctx.create_tensor({"data_type": "float32", "shape": list(small.shape), "writable": True})
        ctx.write_tensor(feeds["small"], small)
    outs = {"y": out} | {k: ctx.create_tensor({"data_type": "float32", "shape": list(v.shape), "readable": True})
                         for k, v in extra.items()}
    ctx.dispatch(g, feeds, outs)
    err = float(np.abs(ctx.read_tensor(out) - ref).max() / np.abs(ref).max())
    return dict(g=g, t=feeds, out=out, outs=outs, note="; ".join(notes), err=err, flops=2 * ref.size * macs)


cases = [build(s) for s in specs]
res = []
for c in cases:
    reps = max(3, min(50, int(5e7 / c["flops"])))
    best = 1e9
    for _ in range(2):
        c0 = time.process_time()
        for _ in range(reps):
            ctx.dispatch(c["g"], c["t"], c["outs"])
        ctx.read_tensor(c["out"])
        best = min(best, (time.process_time() - c0) / reps)
    res.append([best, c["flops"], c["note"], c["err"]])
print("JSON" + json.dumps(res))
'''


#: The zoo's first layers (3 x 3 or 5 x 5 stride-2 convs on the RGB image, with their epilogues):
#: face_landmark, hand_recrop, selfie_segmentation, hand_landmark_full / _lite, pose_detection,
#: pose_landmark_full, face_detection_full_range_sparse, face_detection_short_range,
#: palm_detection_full / _lite, iris_landmark.
FIRST_LAYERS = ["conv:192,192,3,16,3,3,2,0,1/prelu", "conv:256,256,3,8,3,3,2,0,1/prelu_mul_add",
                "conv:256,256,3,16,3,3,2,0,1/hard_swish", "conv:224,224,3,24,3,3,2,0,1/relu6",
                "conv:224,224,3,24,3,3,2,1/relu6", "conv:256,256,3,24,3,3,2,1/relu6", "conv:192,192,3,32,3,3,2,1/relu6",
                "conv:128,128,3,24,5,5,2,1,2/relu6", "conv:192,192,3,32,5,5,2,1,2/prelu",
                "conv:64,64,3,64,3,3,2,0,1/prelu"]


def main(argv=None) -> int:
    """Run the comparison (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("old")
    p.add_argument("new")
    p.add_argument("specs", nargs="+")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--mesa25", action="store_true", help="run on the Mesa 25 lavapipe of benchmarks/peers.py")
    args = p.parse_args(argv)
    args.specs = [f for s in args.specs for f in (FIRST_LAYERS if s == "first" else [s])]
    env = dict(os.environ)
    env.setdefault("XDG_RUNTIME_DIR", "/tmp")
    if args.mesa25:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import peers

        env.update(peers.mesa25())
    roots = [os.path.abspath(args.old), os.path.abspath(args.new)]
    best: dict[str, list] = {r: [None] * len(args.specs) for r in roots}
    for _ in range(args.rounds):
        for root in roots:
            out = subprocess.run([sys.executable, "-c", _RUN, root, json.dumps(args.specs)], capture_output=True,
                                 text=True, env=env)
            if out.returncode:
                print(out.stderr[-2000:], file=sys.stderr)
                return 1
            for i, r in enumerate(json.loads(out.stdout.split("JSON")[-1])):
                if best[root][i] is None or r[0] < best[root][i][0]:
                    best[root][i] = r
    print(f"{'spec':34s} {'old us':>9s} {'GF/s':>6s} {'new us':>9s} {'GF/s':>6s} {'new/old':>7s}  max err  new variant")
    for i, spec in enumerate(args.specs):
        (ot, fl, onote, oerr), (nt, _, nnote, nerr) = best[roots[0]][i], best[roots[1]][i]
        print(f"{spec:34s} {ot * 1e6:9.0f} {fl / ot / 1e9:6.1f} {nt * 1e6:9.0f} {fl / nt / 1e9:6.1f} {nt / ot:7.2f}"
              f"  {max(oerr, nerr):.0e}  {nnote}" + ("" if onote == nnote else f" (old: {onote})"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
