"""Depthwise conv2d + 1x1 projection: one fused kernel against two (depthwise + tile), per shape.

    .venv/bin/python benchmarks/dw_project.py [--hw 8,16,32,64] [--c 32,128,512] [--n 16,64,128]
                                              [--windows 3/1,5/1,3/2] [--repeats 5]
                                              [--shapes 96x16x16x3x1,6x384x96x3x1 ...] [--cpu]
                                              [--vs-block] [--vs-lanes] [--vs-words [--form F]]
                                              [--face] [--rounds 1] [--wide]

For every (image size, channels C, projected channels N, window/stride) it builds the graph
``conv2d(relu(depthwise(x) + b), w) + b2`` (NHWC, float32) twice in one process, with the
compiler's ``fuse_depthwise_project`` pass switched off and forced on
(``WEBNN_GPU_FORCE_DWP=fused``), and times every kernel with timestamp queries (``webnn_gpu.profile.profile_graph``, the median of ``--repeats``); the
two sides alternate, so both see the same machine load. ``--shapes`` replaces the grid by a
list of ``HWxCxNxKxS`` shapes; ``--cpu`` times each graph's write / dispatch / read runs in
process CPU time instead (what ``benchmarks/ab.py`` compares; the dw and tile columns then 0).
``--vs-block`` compares the fused kernel the plan picks (``conv/depthwise_project_strip.wgsl``
where it runs) with the pixel-block kernel instead of two kernels (the "two" column is then
the pixel-block kernel); ``--vs-lanes`` compares the channel-lane kernel
(``conv/depthwise_project_lanes.wgsl``, forced) with the fused kernel the plan picks without it;
``--vs-words`` compares the fused kernel the plan picks (``--form lanes`` or ``blocks`` forces
one) moving words of 8 values with the same kernel moving vec4s (``WEBNN_GPU_FORCE_DWP_WORDS=vec4``;
the "two" column is then the vec4 form);
``--rounds`` alternates the two sides that many times (the least of each); ``--face`` builds the face models' blocks instead,
``prelu(conv2d(depthwise(x) + b, w) + b2 + x)`` (the residual where N == C and stride 1).
``--wide`` replaces the grid by projections wider than ``PROJECT_MAX_N`` (the zoo's, Keras
MobileNet's and Xception's shapes and others: column blocks of the pixel-block kernel).
Prints one row per shape: the fused kernel's microseconds, the
two kernels' sum and each of them (depthwise, tile), their ratio, the same ratio with one more
dispatch's wall time (``DWP_PAY_FIT``'s 45 us) added to the two kernels, the ratio of the cost
model's estimates (:func:`webnn_gpu.ops.conv._project_cost`; below 1: it fuses) and whether
:func:`webnn_gpu.ops.conv.project_pays` fuses. docs/conv.md has the grid the model was fitted on.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

from _common import per_run_us  # benchmarks/_common.py (the script's folder is on sys.path)


#: ``--wide``: HWxCxNxKxS shapes with projections wider than PROJECT_MAX_N: face detection's (12 x 12
#: x 48 -> 192, 6 x 6 x 96 -> 384), Keras MobileNet's and Xception's, and a few between
WIDE = ("12x48x192x3x1,6x96x384x3x1,12x96x192x3x2,16x128x256x3x2,16x128x256x3x1,8x256x256x3x1,"
        "8x256x512x3x2,4x512x512x3x1,24x64x192x3x1,17x256x256x3x1,9x256x728x3x1,5x728x728x3x1,"
        "3x1024x1536x3x1,10x40x240x5x1,20x32x192x3x2")


def _graph(ctx, hw, C, N, k, s, face=False):
    import webnn_gpu as webnn

    rng = np.random.default_rng(0)
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [1, hw, hw, C]})
    pad = (k - 1) // 2
    d = b.conv2d(x, b.constant((rng.standard_normal((1, k, k, C)) * 0.3).astype(np.float32)), input_layout="nhwc",
                 filter_layout="ihwo", groups=C, padding=[pad] * 4, strides=[s, s],
                 bias=b.constant(rng.standard_normal(C).astype(np.float32)))
    p = b.conv2d(d if face else b.relu(d), b.constant((rng.standard_normal((N, 1, 1, C)) * 0.1).astype(np.float32)),
                 input_layout="nhwc", filter_layout="ohwi", bias=b.constant(rng.standard_normal(N).astype(np.float32)))
    if face:  # the face models' blocks: prelu(projection + x), the residual where the shapes allow
        if s == 1 and N == C:
            p = b.add(p, x)
        p = b.prelu(p, b.constant((rng.random((1, 1, 1, N)) * 0.5).astype(np.float32)))
    return b.build({"y": p}), {"x": rng.standard_normal((1, hw, hw, C)).astype(np.float32)}


def _time(ctx, hw, C, N, k, s, fused, repeats, cpu=False, vs_block=False, face=False, vs_lanes=False,
          vs_words=False, form=""):
    from webnn_gpu.ops import conv
    from webnn_gpu.profile import profile_graph

    strip_profiles = conv.DWP_STRIP_PROFILES
    os.environ["WEBNN_GPU_FORCE_DWP_FORM"] = form
    os.environ["WEBNN_GPU_FORCE_DWP_WORDS"] = ""
    if vs_words:  # both sides fused, the same kernel: words of 8 values (fused) against vec4s
        os.environ["WEBNN_GPU_FORCE_DWP_WORDS"] = "" if fused else "vec4"
        fused = True
    elif vs_lanes:  # both sides fused: the channel-lane kernel (fused) against the other fused forms
        os.environ["WEBNN_GPU_FORCE_DWP_FORM"] = "lanes" if fused else "blocks"
        fused = True
    elif vs_block:  # both sides fused: the strip kernel where it runs (fused) against the pixel blocks
        conv.DWP_STRIP_PROFILES = strip_profiles if fused else ()
        fused = True
    os.environ["WEBNN_GPU_PASSES"] = "" if fused else "-fuse_depthwise_project"
    os.environ["WEBNN_GPU_FORCE_DWP"] = "fused" if fused else ""
    try:
        g, inputs = _graph(ctx, hw, C, N, k, s, face)
    finally:
        conv.DWP_STRIP_PROFILES = strip_profiles
    if cpu:
        us = per_run_us(ctx, g, inputs, 4 * repeats, time.process_time)
        g.destroy()
        return us, 0.0
    rows = profile_graph(ctx, g, inputs, repeats=repeats)
    g.destroy()
    templates = [r["template"] for r in rows]
    assert any(t.startswith("conv/depthwise_project") for t in templates) == fused, templates
    dw = sum(r["us"] for r in rows if r["template"] == "conv/depthwise.wgsl")
    return sum(r["us"] for r in rows), dw


def main(argv=None) -> int:
    """Run the grid (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hw", default="8,16,32,64")
    p.add_argument("--c", default="32,128,512")
    p.add_argument("--n", default="16,64,128")
    p.add_argument("--windows", default="3/1,5/1,3/2", help="window/stride pairs")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--shapes", default="", help="HWxCxNxKxS shapes instead of the grid")
    p.add_argument("--cpu", action="store_true", help="process CPU time per run instead of timestamps")
    p.add_argument("--vs-block", action="store_true",
                   help="both sides fused: the kernel the plan picks (the strip kernel where it runs) against "
                        "the pixel-block kernel (conv/depthwise_project.wgsl)")
    p.add_argument("--vs-lanes", action="store_true",
                   help="both sides fused: the channel-lane kernel (conv/depthwise_project_lanes.wgsl) against the "
                        "kernel the plan picks without it")
    p.add_argument("--vs-words", action="store_true",
                   help="both sides fused, one kernel: words of 8 values against vec4s (WEBNN_GPU_FORCE_DWP_WORDS)")
    p.add_argument("--form", default="", help="with --vs-words: force the fused kernel (lanes or blocks)")
    p.add_argument("--rounds", type=int, default=1, help="alternating rounds per shape (the least of each side)")
    p.add_argument("--wide", action="store_true", help="projections wider than PROJECT_MAX_N instead of the grid")
    p.add_argument("--face", action="store_true",
                   help="the face models' blocks: no relu, prelu(projection + x) (the residual where N == C, stride 1)")
    args = p.parse_args(argv)
    os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
    import webnn_gpu as webnn
    from webnn_gpu.ops.conv import DWP_PAY_FIT, _project_cost, project_pays

    ctx = webnn.ml.create_context()
    ints = lambda s: [int(v) for v in s.split(",")]  # noqa: E731
    print(f"# {ctx.adapter_info.get('description', '')}, tuning {ctx._tuning}")
    print(f"{'hw':>4} {'C':>4} {'N':>4} {'k/s':>4} {'fused us':>9} {'two us':>9} {'dw us':>7} {'tile us':>7} "
          f"{'ratio':>6} {'+disp':>6} {'model':>6} {'fuses':>5}")
    dispatch = DWP_PAY_FIT.get(ctx._tuning, {}).get("dispatch", 0.0)
    if args.wide:
        args.shapes = args.shapes or WIDE
    if args.shapes:
        shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    else:
        shapes = [(hw, C, N, *(int(v) for v in win.split("/"))) for win in args.windows.split(",")
                  for hw in ints(args.hw) for C in ints(args.c) for N in ints(args.n)]
    for hw, C, N, k, s in shapes:
        fused = two = dw = float("inf")
        for _ in range(args.rounds):
            kw = dict(vs_words=args.vs_words, form=args.form)
            f1, _ = _time(ctx, hw, C, N, k, s, True, args.repeats, args.cpu, args.vs_block, args.face, args.vs_lanes,
                          **kw)
            t1, d1 = _time(ctx, hw, C, N, k, s, False, args.repeats, args.cpu, args.vs_block, args.face,
                           args.vs_lanes, **kw)
            fused, (two, dw) = min(fused, f1), min((two, dw), (t1, d1))
        oh = (hw - 1) // s + 1
        g = dict(NB=1, H=hw, W=hw, C=C, O=C, OH=oh, OW=oh, KH=k, KW=k, G=C, sh=s, sw=s, dh=1, dw=1,
                 pt=(k - 1) // 2, pl=(k - 1) // 2)
        f_cost, t_cost = _project_cost(g, N, ctx._tuning)
        print(f"{hw:>4} {C:>4} {N:>4} {k}/{s:<2} {fused:>9.0f} {two:>9.0f} {dw:>7.0f} {two - dw:>7.0f} "
              f"{fused / two:>6.2f} {fused / (two + dispatch):>6.2f} {f_cost / t_cost:>6.2f} "
              f"{'yes' if project_pays(g, N, ctx._tuning) else 'no':>5}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
