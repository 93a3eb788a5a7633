"""A pointwise conv and the depthwise conv after it: the two kernels against the one
``pw_depthwise`` launch (the compiler's fuse_pw_depthwise), side by side in one process.

    .venv/bin/python benchmarks/pw_depthwise.py [SPEC ...] [--rounds 20] [--repeats 5]
                                                [--form NAME:VAR=VALUE,... ...]

SPEC is ``HxWxK-N:KxK/S`` (an H x W x K image, the pointwise conv to N channels with a bias and
relu6, then a K x K depthwise conv of stride S, "same" padding, bias and relu), default the zoo's
shapes. Each form is a build of the same graph with its variables set (``--form`` adds some;
always ``pair``: ``WEBNN_GPU_FORCE_PWDW=off``, and ``fused``: ``=on``). Each round times every
form in turn (the order rotated every round) with timestamp queries (the median of ``--repeats``
per kernel, summed) and the wall per inference (write, dispatch, read: ``_common.per_run_us``).
Prints per spec and form the median kernel microseconds and wall, and each form's ratio to
``pair`` (median, range over the rounds).
"""

from __future__ import annotations

import argparse
import os
import re

import numpy as np

from _common import environ, per_run_us  # benchmarks/_common.py (the script's folder is on sys.path)

#: the zoo's pairs: face_detection_full_range_sparse (12x12, 6x6), hand_landmark_lite / full
#: (14x14, 7x7), and a few between
SPECS = ["12x12x48-192:3/1", "12x12x192-48:3/1", "6x6x96-384:3/1", "6x6x384-96:3/1", "14x14x48-288:3/1",
         "14x14x64-384:5/2", "7x7x112-672:5/1", "8x8x64-256:3/1", "16x16x32-64:3/1"]


def build(ctx, spec: str):
    """The graph of ``spec`` and its input."""
    import webnn_gpu as webnn

    h, w, k, n, kk, s = map(int, re.fullmatch(r"(\d+)x(\d+)x(\d+)-(\d+):(\d+)/(\d+)", spec).groups())
    rng = np.random.default_rng(0)
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [1, h, w, k]})
    c = b.conv2d(x, b.constant(rng.uniform(-1, 1, (n, 1, 1, k)).astype(np.float32)),
                 bias=b.constant(rng.uniform(-1, 1, n).astype(np.float32)), input_layout="nhwc", filter_layout="ohwi")
    c = b.clamp(c, min_value=0.0, max_value=6.0)
    oh = -(-h // s)
    pad = max((oh - 1) * s + kk - h, 0)
    y = b.conv2d(c, b.constant(rng.uniform(-1, 1, (n, kk, kk, 1)).astype(np.float32)),
                 bias=b.constant(rng.uniform(-1, 1, n).astype(np.float32)),
                 padding=[pad // 2, pad - pad // 2, pad // 2, pad - pad // 2], strides=[s, s], groups=n,
                 input_layout="nhwc", filter_layout="ohwi")
    g = b.build({"y": b.relu(y)})
    return g, {"x": rng.uniform(-2, 2, (1, h, w, k)).astype(np.float32)}


def main(argv=None) -> int:
    """Time the specs (see the module docstring)."""
    import webnn_gpu as webnn
    from webnn_gpu.profile import profile_graph

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("specs", nargs="*", default=SPECS)
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--form", nargs="*", default=[], help="NAME:VAR=VALUE,...")
    args = p.parse_args(argv)
    os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
    os.environ["WEBNN_GPU_PLAN_CACHE"] = "0"
    forms = {"pair": {"WEBNN_GPU_FORCE_PWDW": "off"}, "fused": {"WEBNN_GPU_FORCE_PWDW": "on"}}
    for f in args.form:
        name, kvs = f.split(":", 1)
        forms[name] = {"WEBNN_GPU_FORCE_PWDW": "on", **dict(kv.split("=", 1) for kv in kvs.split(","))}
    ctx = webnn.ml.create_context()
    for spec in args.specs:
        built = {}
        for name, env in forms.items():
            with environ(env):
                built[name] = build(ctx, spec)
        names = list(built)
        us = {n: [] for n in names}
        wall = {n: [] for n in names}
        notes = {n: " ".join(getattr(s, "note", "") or s.template.split("/")[-1] for s in built[n][0]._steps
                             if hasattr(s, "template")) for n in names}
        for r in range(args.rounds):
            for n in names[r % len(names):] + names[:r % len(names)]:
                g, x = built[n]
                us[n].append(sum(row["us"] for row in profile_graph(ctx, g, x, args.repeats)))
                wall[n].append(per_run_us(ctx, g, x, args.runs))
        print(f"# {spec}: kernel us, wall us (medians over {args.rounds} rounds); ratio to pair median [range]")
        for n in names:
            rk = np.array(us[n]) / np.array(us["pair"])
            rw = np.array(wall[n]) / np.array(wall["pair"])
            print(f"  {n:>8} {np.median(us[n]):8.1f} {np.median(wall[n]):8.1f}  kernels {np.median(rk):.2f} "
                  f"[{rk.min():.2f}-{rk.max():.2f}]  wall {np.median(rw):.2f} [{rw.min():.2f}-{rw.max():.2f}]  "
                  f"{notes[n]}", flush=True)
        for g, _ in built.values():
            g.destroy()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
