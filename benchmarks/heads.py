"""Kernel time of network heads: products of 1 to 4 rows against a large constant B, in each form.

    .venv/bin/python benchmarks/heads.py [SPEC ...] [--rounds 6] [--repeats 20] [--forms tile,storage,auto]

A SPEC is ``M,K,N`` (a float32 matmul of an M x K input by a constant K x N matrix); without one,
the zoo's heads and a set of synthetic shapes run. Each shape is built once per form:

* ``tile``: the tile kernel (``WEBNN_GPU_FORCE_MATMUL_MATVEC=off``), what products past
  ``linalg.MATVEC_MAX_N`` columns or ``MATVEC_MAX_M`` rows took before;
* ``storage``: ``matmul/matvec.wgsl`` with a B past 64 KiB in a storage buffer
  (``WEBNN_GPU_FORCE_MATMUL=matvec WEBNN_GPU_FORCE_MATMUL_MATVEC_B=storage``), what heads of at most
  512 columns took before;
* ``texture``: ``matmul/matvec.wgsl`` forced, B past 64 KiB in a texture (``linalg.texture_copy``);
* ``auto``: the automatic choice of this checkout.

Every graph is checked against float64 NumPy (the largest error relative to the largest output
is printed). The forms' kernel timestamps (``webnn_gpu.profile.profile_graph``, the median of
``--repeats`` dispatches) are taken in turn, form after form, for ``--rounds`` rounds, and the
least round is shown: on a machine shared with other work the forms see the same load.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

#: (M, K, N, where): the heads of the zoo's models and of the Keras zoo, as products
ZOO_HEADS = [
    (1, 288, 1404, "face_landmark CONV_2D#209 (3x3 over 3x3x32)"),
    (1, 288, 1, "face_landmark CONV_2D#206"),
    (1, 512, 213, "iris_landmark (2x2 over 2x2x128)"),
    (1, 672, 63, "hand_landmark_lite FULLY_CONNECTED x2"),
    (1, 1152, 63, "hand_landmark_full FULLY_CONNECTED x2"),
    (1, 1152, 195, "pose_landmark_full (2x2 over 2x2x288)"),
    (1, 1152, 117, "pose_landmark_full (2x2 over 2x2x288)"),
    (1, 2048, 10, "Keras resnet50 classifier"),
    (1, 784, 256, "Keras autoencoder"),
    (1, 256, 784, "Keras autoencoder"),
    (1, 960, 1280, "Keras mobilenet_v3_large"),
    (1, 576, 1024, "Keras mobilenet_v3_small"),
    (1, 1152, 48, "Keras efficientnet_b0 SE"),
]
#: shapes no rule was tuned on
SYNTHETIC = [
    (1, 4096, 1000, "classifier"),
    (1, 1280, 1001, "classifier"),
    (2, 512, 1000, ""),
    (3, 1000, 77, ""),
    (4, 288, 1404, ""),
    (4, 1152, 195, ""),
    (1, 333, 777, "odd K and N"),
    (1, 64, 512, "short K"),
]

FORMS = {
    "tile": {"WEBNN_GPU_FORCE_MATMUL_MATVEC": "off"},
    "storage": {"WEBNN_GPU_FORCE_MATMUL": "matvec", "WEBNN_GPU_FORCE_MATMUL_MATVEC_B": "storage"},
    "texture": {"WEBNN_GPU_FORCE_MATMUL": "matvec"},
    "auto": {},
}


def build(ctx, M: int, K: int, N: int, env: dict, rng):
    import webnn_gpu as webnn

    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        b = webnn.MLGraphBuilder(ctx)
        x = b.input("x", {"data_type": "float32", "shape": [M, K]})
        w = rng.standard_normal((K, N)).astype(np.float32)
        g = b.build({"y": b.matmul(x, b.constant(w))})
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return g, w


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("specs", nargs="*", help="M,K,N (default: the zoo's heads and synthetic shapes)")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--forms", default="tile,storage,texture,auto")
    args = ap.parse_args(argv)
    import webnn_gpu as webnn
    from webnn_gpu.profile import profile_graph

    shapes = ([(*map(int, s.split(",")), "") for s in args.specs] if args.specs else ZOO_HEADS + SYNTHETIC)
    forms = args.forms.split(",")
    ctx = webnn.ml.create_context()
    rng = np.random.default_rng(0)
    print(f"{'M x K -> N':>18} " + " ".join(f"{f + ' us':>11}" for f in forms) + "  auto / before  kernels (auto)  where")
    for M, K, N, where in shapes:
        xin = rng.standard_normal((M, K)).astype(np.float32)
        graphs = {}
        for f in forms:
            g, w = build(ctx, M, K, N, FORMS[f], rng)
            ref = xin.astype(np.float64) @ w.astype(np.float64)
            y = ctx.compute(g, {"x": xin})["y"]
            err = float(np.abs(y - ref).max() / max(np.abs(ref).max(), 1e-30))
            if err > 1e-5:
                print(f"{M}x{K}->{N} {f}: error {err:.2e} against float64 NumPy", file=sys.stderr)
                return 1
            graphs[f] = g
        best = {f: float("inf") for f in forms}
        notes = {}
        for _ in range(args.rounds):
            for f in forms:
                rows = profile_graph(ctx, graphs[f], {"x": xin}, repeats=args.repeats)
                best[f] = min(best[f], sum(r["us"] for r in rows))
                notes[f] = "+".join(f"{r['template'].split('/')[-1]} [{r['note']}]" for r in rows)
        # "before": what the product took before the texture form (tile past 512 columns or 3 rows)
        before = "tile" if (N > 512 or M > 3 or M * N * K < 16384 or K < 256) else "storage"
        ratio = f"{best['auto'] / best[before]:5.2f}" if "auto" in best and before in best else "  -  "
        print(f"{f'{M} x {K} -> {N}':>18} " + " ".join(f"{best[f]:11.1f}" for f in forms)
              + f"  {ratio} ({before:>7})  {notes.get('auto', '')}  {where}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
