"""Kernel time of network heads: products of 1 to 4 rows against a large constant B, in each form.

    .venv/bin/python benchmarks/heads.py [SPEC ...] [--rounds 6] [--repeats 20] [--forms tile,storage,texture,auto]

A SPEC is ``M,K,N`` (a float32 matmul of an M x K input by a constant K x N matrix) or
``M,K,N1+N2+...`` (several heads on the same input: float32 gemms by constant [Ni, K] matrices,
transposed as TFLite's fully connected layers store them, each with a bias, those of one column
through a sigmoid); without one, the zoo's heads, a set of synthetic shapes and sets of heads
run. A shape of one product is built once per form:

* ``tile``: the tile kernel (``WEBNN_GPU_FORCE_MATMUL_MATVEC=off``), what products past
  ``linalg.MATVEC_MAX_N`` columns or ``MATVEC_MAX_M`` rows took before;
* ``storage``: ``matmul/matvec.wgsl`` with a B past 64 KiB in a storage buffer
  (``WEBNN_GPU_FORCE_MATMUL=matvec WEBNN_GPU_FORCE_MATMUL_MATVEC_B=storage``), what heads of at most
  512 columns took before;
* ``texture``: ``matmul/matvec.wgsl`` forced, B past 64 KiB in a texture (``linalg.texture_copy``);
* ``auto``: the automatic choice of this checkout.

A set of heads is built twice: ``separate`` (``WEBNN_GPU_PASSES=-fuse_heads``: a launch per
head, as before) and ``auto`` (the compiler's ``fuse_heads``: one launch).

Every graph is checked against float64 NumPy (the largest error, relative to the largest sum of
the products' magnitudes, must be below 1e-5). The forms' kernel timestamps (``webnn_gpu.profile.profile_graph``, the median of
``--repeats`` dispatches) are taken in turn, form after form, for ``--rounds`` rounds, and the
least round is shown: on a machine shared with other work the forms see the same load.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from _common import environ  # benchmarks/_common.py (the script's folder is on sys.path)

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

#: sets of heads on one input: (M, K, [N...], where)
HEAD_SETS = [
    (1, 672, [1, 1, 63, 63], "hand_landmark_lite's four heads"),
    (1, 1152, [1, 1, 63, 63], "hand_landmark_full's four heads"),
    (1, 1152, [195, 117], "pose_landmark_full's two heads, as products"),
    (1, 1280, [1000, 10], "a classifier and a second task"),
    (3, 300, [5, 40, 700], ""),
]
SET_FORMS = {"separate": {"WEBNN_GPU_PASSES": "-fuse_heads"}, "auto": {}}

FORMS = {
    "tile": {"WEBNN_GPU_FORCE_MATMUL_MATVEC": "off"},
    "storage": {"WEBNN_GPU_FORCE_MATMUL": "matvec", "WEBNN_GPU_FORCE_MATMUL_MATVEC_B": "storage"},
    "texture": {"WEBNN_GPU_FORCE_MATMUL": "matvec", "WEBNN_GPU_FORCE_MATMUL_MATVEC_B": "texture"},
    "f32words": {"WEBNN_GPU_FORCE_MATMUL": "matvec", "WEBNN_GPU_FORCE_MATMUL_MATVEC_B": "f32"},
    "words": {"WEBNN_GPU_FORCE_MATMUL": "matvec", "WEBNN_GPU_FORCE_MATMUL_MATVEC_B": "words"},
    "auto": {},
    "steps": {"WEBNN_GPU_FORCE_MATMUL": "matvec", "WEBNN_GPU_FORCE_MATMUL_MATVEC_ORDER": "steps"},
    "runs": {"WEBNN_GPU_FORCE_MATMUL": "matvec", "WEBNN_GPU_FORCE_MATMUL_MATVEC_ORDER": "runs"},
}
#: --f16-weights: every weight a normal float16 value (as a model's float16 weights widened)
F16_WEIGHTS = False


def _weights(rng, shape) -> np.ndarray:
    w = rng.standard_normal(shape).astype(np.float32)
    if F16_WEIGHTS:
        w = w.astype(np.float16).astype(np.float32)
        w[np.abs(w) < 2.0 ** -14] = 0.0
    return w


def build(ctx, M: int, K: int, N, env: dict, rng):
    """The graph of one product (``N`` an int: a matmul) or of a set of heads (``N`` a list:
    gemms with a bias, a sigmoid on those of one column) built with ``env`` set; its weights."""
    import webnn_gpu as webnn

    with environ(env):
        b = webnn.MLGraphBuilder(ctx)
        x = b.input("x", {"data_type": "float32", "shape": [M, K]})
        if isinstance(N, int):
            w = _weights(rng, (K, N))
            g = b.build({"y": b.matmul(x, b.constant(w))})
        else:
            w, outs = [], {}
            for j, n in enumerate(N):
                wj, cj = _weights(rng, (n, K)), rng.standard_normal(n).astype(np.float32)
                y = b.gemm(x, b.constant(wj), c=b.constant(cj), b_transpose=True)
                outs[f"y{j}"] = b.sigmoid(y) if n == 1 else y
                w.append((wj, cj))
            g = b.build(outs)
    return g, w


def reference(x: np.ndarray, N, w) -> dict:
    """float64 outputs of :func:`build`'s graph, each with the largest sum of the products'
    magnitudes (what float32 rounding scales with)."""
    X = x.astype(np.float64)
    if isinstance(N, int):
        W = w.astype(np.float64)
        return {"y": (X @ W, float((np.abs(X) @ np.abs(W)).max()))}
    out = {}
    for j, (n, (wj, cj)) in enumerate(zip(N, w)):
        W = wj.astype(np.float64).T
        pre = X @ W + cj
        mag = float((np.abs(X) @ np.abs(W) + np.abs(cj)).max())
        out[f"y{j}"] = (1 / (1 + np.exp(-pre)) if n == 1 else pre, mag)
    return out


def timed(ctx, M: int, K: int, N, forms: dict, rounds: int, repeats: int, rng):
    """Build ``N`` once per form, check it, and time the forms in turn: per form the least
    round's kernel time (us) and the kernels of the last round."""
    from webnn_gpu.profile import profile_graph

    xin = rng.standard_normal((M, K)).astype(np.float32)
    graphs = {}
    for f, env in forms.items():
        g, w = build(ctx, M, K, N, env, rng)
        got, ref = ctx.compute(g, {"x": xin}), reference(xin, N, w)
        for k, (r, mag) in ref.items():
            err = float(np.abs(got[k] - r).max() / max(mag, 1e-30))
            if err > 1e-5:
                raise SystemExit(f"{M}x{K}->{N} {f} {k}: error {err:.2e} against float64 NumPy")
        graphs[f] = g
    per_round = {f: [] for f in forms}
    notes = {}
    for _ in range(rounds):
        for f in forms:
            rows = profile_graph(ctx, graphs[f], {"x": xin}, repeats=repeats)
            per_round[f].append(sum(r["us"] for r in rows))
            notes[f] = " + ".join(f"{r['template'].split('/')[-1]} [{r['note']}]" for r in rows)
    for g in graphs.values():
        g.destroy()
    timed.per_round = per_round
    return {f: min(v) for f, v in per_round.items()}, notes


def ratios(per_round: dict, base: str) -> str:
    """Per form but ``base``: the median and range over the rounds of its time / ``base``'s
    time in the same round (the forms of a round see the same load)."""
    out = []
    for f, v in per_round.items():
        if f != base:
            r = np.array(v) / np.array(per_round[base])
            out.append(f"{f}/{base} {np.median(r):.2f} [{r.min():.2f}-{r.max():.2f}]")
    return "  ".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("specs", nargs="*", help="M,K,N or M,K,N1+N2+... (default: the zoo's heads, synthetic shapes, sets of heads)")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--forms", default="tile,storage,texture,auto")
    ap.add_argument("--f16-weights", action="store_true", help="weights of float16 values (normal ones)")
    ap.add_argument("--ratio", default="", help="also print each form's per-round time ratio to this form")
    args = ap.parse_args(argv)
    global F16_WEIGHTS
    F16_WEIGHTS = args.f16_weights
    import webnn_gpu as webnn

    if args.specs:
        shapes, sets = [], []
        for spec in args.specs:
            m, k, n = spec.split(",")
            if "+" in n:
                sets.append((int(m), int(k), [int(v) for v in n.split("+")], ""))
            else:
                shapes.append((int(m), int(k), int(n), ""))
    else:
        shapes, sets = ZOO_HEADS + SYNTHETIC, HEAD_SETS
    forms = {f: FORMS[f] for f in args.forms.split(",")}
    ctx = webnn.ml.create_context()
    rng = np.random.default_rng(0)
    if shapes:
        print(f"{'M x K -> N':>18} " + " ".join(f"{f + ' us':>11}" for f in forms) + "  auto / before  kernels (auto)  where")
    for M, K, N, where in shapes:
        best, notes = timed(ctx, M, K, N, forms, args.rounds, args.repeats, rng)
        # "before": what the product took before the texture form (tile past 512 columns or 3 rows)
        before = "tile" if (N > 512 or M > 3 or M * N * K < 16384 or K < 256) else "storage"
        ratio = f"{best['auto'] / best[before]:5.2f}" if "auto" in best and before in best else "  -  "
        print(f"{f'{M} x {K} -> {N}':>18} " + " ".join(f"{best[f]:11.1f}" for f in forms)
              + f"  {ratio} ({before:>7})  {notes.get('auto', '')}  {where}", flush=True)
        if args.ratio:
            print(f"{'':>18} {ratios(timed.per_round, args.ratio)}", flush=True)
    if sets:
        print(f"\n{'heads (M x K -> N...)':>30} {'separate us':>12} {'auto us':>9}  auto / separate  kernels (auto)  where")
    for M, K, N, where in sets:
        best, notes = timed(ctx, M, K, N, SET_FORMS, args.rounds, args.repeats, rng)
        print(f"{f'{M} x {K} -> ' + '+'.join(map(str, N)):>30} {best['separate']:12.1f} {best['auto']:9.1f}  "
              f"{best['auto'] / best['separate']:15.2f}  {notes['auto']}  {where}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
