"""Kernel time of the per-step recurrent kernels (large hidden sizes) in each form.

    .venv/bin/python benchmarks/rnn_steps.py [--shapes lstm,512,1,1 ...] [--forms scalar,vec4,words,words8]
        [--rounds 5] [--repeats 5] [--steps 6]

A shape is ``CELL,H,B,D`` (CELL ``lstm``, ``gru`` or ``gru0``: a GRU with reset_after=False;
hidden size H, batch B, D directions; input size H) with constant weights, forced onto the
per-step path (``WEBNN_GPU_FORCE_RECURRENT=steps``). Each form is built under
``WEBNN_GPU_FORCE_RECURRENT_STEP=FORM`` (``scalar``: ``lstm_step`` / ``gru_step``, one
hidden unit per invocation reading R as given; ``vec4``: ``step4``, four units per invocation
and up to four batch rows, R packed at build time; ``words``: ``step4`` reading that R as
vec2<u64> words; ``words8``: eight units per invocation, R as vec4<u64> words);
a form named ``FORM:rows=N`` or ``FORM:wg=N`` also sets ``recurrent.STEP_ROWS`` or
``recurrent.STEP_WORKGROUP`` for its build, ``FORM:sg=off`` ``WEBNN_GPU_FORCE_RECURRENT_STEP_SG``
(``step4`` without its subgroup loads of the state). Every build is checked against float64 NumPy
(tests/ops/test_recurrent.py's references). The step kernels' timestamps (the median of
``--repeats`` dispatches, summed over the steps and divided by them) are taken form after form,
the order rotated every round (``--dtype float16``: float16 graphs, whose R is read as
float16 words); the line shows the median per-step time of each form and the
median ratio to the first form (quartiles in parentheses).
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np
from _common import environ, rotated_kernel_us  # benchmarks/_common.py

for _sub in ("tests", os.path.join("tests", "ops")):  # the tests' float64 references
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", _sub))

STEP_TEMPLATES = ("recurrent/lstm_step.wgsl", "recurrent/gru_step.wgsl", "recurrent/step4.wgsl")


def build(ctx, cell: str, hidden: int, batch: int, nd: int, steps: int, seed: int = 0, dtype: str = "float32"):
    """The graph of one layer and its input, and the float64 reference of its outputs."""
    import webnn_gpu as webnn
    from test_recurrent import ref_gru, ref_lstm

    rng = np.random.default_rng(seed)
    g = 4 if cell == "lstm" else 3
    f = np.dtype(dtype)
    x = rng.uniform(-1, 1, (steps, batch, hidden)).astype(f)
    w = rng.uniform(-0.1, 0.1, (nd, g * hidden, hidden)).astype(f)
    r = rng.uniform(-0.1, 0.1, (nd, g * hidden, hidden)).astype(f)
    bias = rng.uniform(-0.5, 0.5, (nd, g * hidden)).astype(f)
    b = webnn.MLGraphBuilder(ctx)
    xo = b.input("x", {"data_type": dtype, "shape": list(x.shape)})
    direction = "both" if nd == 2 else "forward"
    if cell == "lstm":
        h, _, _ = b.lstm(xo, b.constant(w), b.constant(r), steps, hidden, bias=b.constant(bias),
                         return_sequence=True, direction=direction)
        want = ref_lstm(x, w, r, steps, hidden, bias, direction=direction)[0]
    else:
        h, _ = b.gru(xo, b.constant(w), b.constant(r), steps, hidden, bias=b.constant(bias),
                     return_sequence=True, direction=direction, reset_after=cell == "gru")
        want = ref_gru(x, w, r, steps, hidden, bias, reset_after=cell == "gru", direction=direction)[0]
    return b.build({"h": h}), {"x": x}, want


def main(argv=None) -> None:
    """Parse the arguments, build every shape in every form, print the per-step times."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", nargs="+", default=["lstm,256,1,1", "lstm,256,4,1", "lstm,512,1,1", "lstm,512,4,1",
                                                    "lstm,512,1,2", "gru,256,1,1", "gru,512,4,1", "gru0,512,1,1"])
    ap.add_argument("--forms", default="scalar,vec4,words,words8")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--dtype", choices=("float32", "float16"), default="float32")
    args = ap.parse_args(argv)
    import webnn_gpu as webnn
    from webnn_gpu.ops import recurrent

    ctx = webnn.ml.create_context()
    forms = args.forms.split(",")
    print(f"# per-step us, median of {args.rounds} rounds; ratio to {forms[0]} (quartiles)")
    print(f"{'shape':>16} " + " ".join(f"{f:>14}" for f in forms))
    for spec in args.shapes:
        cell, hidden, batch, nd = spec.split(",")
        hidden, batch, nd = int(hidden), int(batch), int(nd)
        built = {}
        for form in forms:
            name, *knobs = form.split(":")
            saved = recurrent.STEP_ROWS, recurrent.STEP_WORKGROUP
            env = {"WEBNN_GPU_FORCE_RECURRENT": "steps", "WEBNN_GPU_FORCE_RECURRENT_STEP": name,
                   "WEBNN_GPU_FORCE_RECURRENT_STEP_SG": None, "WEBNN_GPU_PLAN_CACHE": "0"}
            for knob in knobs:
                key, value = knob.split("=")
                if key == "sg":
                    env["WEBNN_GPU_FORCE_RECURRENT_STEP_SG"] = value
                else:
                    setattr(recurrent, {"rows": "STEP_ROWS", "wg": "STEP_WORKGROUP"}[key], int(value))
            try:
                with environ(env):
                    g, x, want = build(ctx, cell, hidden, batch, nd, args.steps, dtype=args.dtype)
            finally:
                recurrent.STEP_ROWS, recurrent.STEP_WORKGROUP = saved
            got = ctx.compute(g, x)["h"].astype(np.float64)
            err = np.abs(got - want).max()
            if err > (1e-4 if args.dtype == "float32" else 3e-3):
                raise SystemExit(f"{spec} {form}: max |got - ref| {err:.3g}")
            built[form] = (g, x)
        times = rotated_kernel_us(ctx, built, args.rounds, args.repeats, keep=lambda r: r["template"] in STEP_TEMPLATES)
        base = np.array(times[forms[0]])
        cols = []
        for form in forms:
            t = np.array(times[form])
            q1, q3 = np.quantile(t / base, (0.25, 0.75))
            cols.append(f"{np.median(t) / args.steps:7.0f} {np.median(t / base):4.2f}"
                        + (f" ({q1:4.2f}-{q3:4.2f})" if form != forms[0] else " " * 12))
        print(f"{spec:>16} " + " ".join(cols), flush=True)
        for g, _ in built.values():
            g.destroy()


if __name__ == "__main__":
    main()
