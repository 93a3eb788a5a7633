"""Per-dispatch shapes and throughput of a model's depthwise and depthwise + projection kernels.

    .venv/bin/python benchmarks/dw_shapes.py MODEL [MODEL ...] [--repeats 5]

MODEL: a .tflite/.onnx path or a name known to ``webnn-gpu fetch``. For every
``conv/depthwise.wgsl``, ``conv/depthwise_project.wgsl`` (``dwp``) and
``conv/depthwise_project_strip.wgsl`` (``dwps``) and ``conv/depthwise_project_lanes.wgsl``
(``dwpl``) dispatch it prints the depthwise
shape (output H x W, channels C, multiplier M, window, stride, dilation), the projection
width N (0: none; ``+e`` where the expansion conv is computed in the kernel), the strip of the
stand-alone kernel and of the fused strip and channel-lane kernels (TH x TW output rows and columns per
invocation, ``/PK`` where the channel-lane kernel projects PK pixels per pass; ``-`` for the
pixel-block kernel),
the workgroups, the kernel's microseconds (timestamp queries, median of
``--repeats``), its useful GFLOP/s (2 multiply-add flops per depthwise tap and projection
weight) and GB/s (its input, weights and output, each counted once).

``--forms`` instead builds each model three ways in one process, as the compiler decides, with
every depthwise + projection pair the fused kernel can take fused
(``WEBNN_GPU_FORCE_DWP=fused``) and with none fused (``WEBNN_GPU_PASSES=-fuse_depthwise_project``),
profiles the three alternately (``--rounds``, the least of the rounds' medians per kernel) and
prints per pair its shape, the fused kernel's microseconds, the two (or three, with the expansion
conv) kernels' sum, their ratio, which form the compiler picks and what
:func:`webnn_gpu.ops.conv._project_cost` estimates (below 1: it fuses).

``--lanes-forced`` builds each model with every pair that the channel-lane kernel can run on it
(``WEBNN_GPU_FORCE_DWP_FORM=lanes``) and with none (``=blocks``), profiles the two alternately
and prints per such pair both sides' microseconds (the lanes side with the kernels of its own
that a pair whose expansion the pixel blocks compute needs beside it, ``lanes+1``: each one
launch more, about 45-70 us of wall that timestamps do not show), their ratio, the channel-lane estimate
(:func:`webnn_gpu.ops.conv._dwpl_cost`, with the margin) over the pixel blocks' and the kernel
the compiler picks; ``--dump`` appends one JSON line per pair (the estimates' terms too) for
fitting ``DWPL_FIT``.
"""

from __future__ import annotations

import argparse
import json
import os
import re

import numpy as np
from _common import environ  # benchmarks/_common.py (the script's folder is on sys.path)

DW_TEMPLATES = ("conv/depthwise.wgsl", "conv/depthwise_project.wgsl", "conv/depthwise_project_strip.wgsl",
                "conv/depthwise_project_lanes.wgsl")


def _shape_row(step, tuning: str) -> dict:
    from webnn_gpu.ops import conv

    node = step.node
    if node.op == "depthwise_project":
        dw, proj, e = node.attrs["depthwise"], node.attrs["project"], node.attrs.get("expand")
    else:
        dw, proj, e = node, None, None
    g = conv._geometry(dw)
    n = conv._project_width(proj) if proj is not None else 0
    k = e.inputs[0].shape[3] if e is not None else 0
    pix = g["NB"] * g["OH"] * g["OW"]
    flops = 2 * pix * g["O"] * (g["KH"] * g["KW"] + n) + 2 * g["NB"] * g["H"] * g["W"] * k * g["C"]
    size = 2 if dw.outputs[0].data_type == "float16" else 4
    moved = size * (g["NB"] * g["H"] * g["W"] * (k or g["C"]) + g["KH"] * g["KW"] * g["O"] + g["C"] * (n + k)
                    + pix * (n or g["O"]))
    if step.template == "conv/depthwise_project_strip.wgsl":  # the fused strip kernel's TH x TW
        tw, th, _ = conv._dwp_strip(g, -(-n // 4), tuning)
        strip = f"{th}x{tw}"
    elif step.template == "conv/depthwise_project_lanes.wgsl":  # the channel-lane kernel's TH x TW
        tw, th = conv._dwp_lanes(g, -(-n // 4), conv.DW_LANES)[:2]
        pk = conv._dwpl_pack(-(-n // 4), conv.DW_LANES, tw)  # pixels per pass
        strip = f"{th}x{tw}" + (f"/{pk}" if pk > 1 else "")
    else:
        strip = "-" if node.op == "depthwise_project" else "x".join(str(v) for v in conv._dw_strip(g, tuning))
    return dict(hw=f"{g['OH']}x{g['OW']}", C=g["C"], M=g["O"] // g["C"], win=f"{g['KH']}x{g['KW']}", strip=strip,
                s=g["sh"], d=g["dh"], N=f"{n}{'+e' if k else ''}", flops=flops, bytes=moved)


_TOKEN = re.compile(r"[A-Z_0-9]+#[0-9]+")


def _tokens(label) -> frozenset:
    """The source operators (``OP#index``) a kernel's label names."""
    return frozenset(_TOKEN.findall(str(label)))


def _profiled(ctx, path: str, envs: dict, rounds: int, repeats: int):
    """Model ``path`` built once per entry of ``envs`` (name -> environment variables set while
    it loads, restored after), all profiled alternately on one random input, the least of the
    ``rounds`` per kernel: (graphs, best microseconds per kernel, rows of (kernel step, its
    source operators, microseconds)), each by name."""
    import webnn_gpu as webnn
    from webnn_gpu import _dtypes
    from webnn_gpu._lower import KernelStep
    from webnn_gpu.profile import profile_graph

    graphs, inputs = {}, None
    for name, env in envs.items():
        with environ(env):
            graphs[name] = webnn.load(path, ctx).graph
        if inputs is None:
            rng = np.random.default_rng(0)
            inputs = {nm: rng.random(d["shape"]).astype(_dtypes.info(d["data_type"]).numpy)
                      for nm, d in graphs[name].inputs.items()}
    best: dict = {name: None for name in graphs}
    for _ in range(rounds):
        for name, g in graphs.items():
            us = [r["us"] for r in profile_graph(ctx, g, inputs, repeats)]
            best[name] = us if best[name] is None else [min(a, b) for a, b in zip(best[name], us)]
    rows = {name: [(s, _tokens(s.label), us) for s, us in zip([s for s in g._steps if isinstance(s, KernelStep)],
                                                               best[name])] for name, g in graphs.items()}
    return graphs, best, rows


def _forms(ctx, path: str, rounds: int, repeats: int, dump=None) -> None:
    """Print every depthwise + projection pair of model ``path`` fused and split (``--forms``)."""
    from webnn_gpu.ops import conv

    base = {"WEBNN_GPU_FORCE_DWP": "", "WEBNN_GPU_PASSES": ""}
    envs = {"model": base, "fused": {**base, "WEBNN_GPU_FORCE_DWP": "fused"},
            "split": {**base, "WEBNN_GPU_PASSES": "-fuse_depthwise_project"}}
    with environ({"WEBNN_GPU_PLAN_CACHE": "0"}):  # a cached plan's steps carry no node attributes
        graphs, best, rows = _profiled(ctx, path, envs, rounds, repeats)
    model_pairs = {t for s, t, _ in rows["model"] if s.node.op == "depthwise_project"}
    print(f"# {os.path.basename(path)}: all kernels model {sum(best['model']):.0f} us, fused "
          f"{sum(best['fused']):.0f}, split {sum(best['split']):.0f} ({len(best['model'])}, "
          f"{len(best['fused'])}, {len(best['split'])} kernels)")
    print(f"{'out':>7} {'C':>4} {'win':>4} {'s':>1} {'N':>6} {'fused':>7} {'split':>7} {'ratio':>6} {'picks':>5} "
          f"{'model':>6}  label")
    for st, toks, us in rows["fused"]:
        node = st.node
        if node.op != "depthwise_project" or node.attrs["project"] is None or node.attrs["project"].op != "conv2d":
            continue
        dw, proj, e = node.attrs["depthwise"], node.attrs["project"], node.attrs.get("expand")
        parts = [(t, u) for s, t, u in rows["split"] if t & toks]
        two = sum(u for _, u in parts)
        g = conv._geometry(dw)
        n = conv._project_width(proj)
        k4 = e.inputs[0].shape[3] // 4 if e is not None else 0
        f_cost, t_cost = conv._project_cost(g, n, ctx._tuning, k4)
        picks = "fused" if toks in model_pairs else "split"
        if dump is not None:  # one JSON line per pair, for fitting the cost model
            split = [dict(template=s.template, us=u, op=s.node.op) for s, t, u in rows["split"] if t & toks]
            dump.write(json.dumps(dict(model=os.path.basename(path), g=g, n=n, k4=k4, label="+".join(sorted(toks)),
                                       fused=us, picks=picks, parts=split)) + "\n")
        print(f"{g['OH']:>3}x{g['OW']:<3} {g['C']:>4} {g['KH']}x{g['KW']} {g['sh']} {n:>4}{'+e' if k4 else '  '} "
              f"{us:>7.0f} {two:>7.0f} {us / max(two, 1e-9):>6.2f} {picks:>5} {f_cost / t_cost:>6.2f}  "
              f"{'+'.join(sorted(toks))} ({len(parts)} split kernels)", flush=True)
    for g in graphs.values():
        g.destroy()


def _lanes_ab(ctx, path: str, rounds: int, repeats: int) -> None:
    """Print model ``path``'s kernels as the compiler decides against the same without the
    channel-lane kernel (``WEBNN_GPU_FORCE_DWP_FORM=blocks``; ``--lanes``): both built in one
    process and profiled alternately, the least of the rounds per kernel; per source pair that
    either side runs differently, both sides' microseconds."""
    envs = {"model": {"WEBNN_GPU_FORCE_DWP_FORM": ""}, "no lanes": {"WEBNN_GPU_FORCE_DWP_FORM": "blocks"}}
    graphs, best, rows = _profiled(ctx, path, envs, rounds, repeats)
    print(f"# {os.path.basename(path)}: all kernels {sum(best['model']):.0f} us ({len(best['model'])} kernels), "
          f"without the channel-lane kernel {sum(best['no lanes']):.0f} us ({len(best['no lanes'])})")
    seen: set = set()
    for st, toks, us in rows["model"] + rows["no lanes"]:
        other = [(s, u) for s, t, u in rows["model"] + rows["no lanes"] if t & toks]
        if toks & seen or all(s.template == other[0][0].template for s, _ in other) and len(other) == 2:
            continue
        toks = frozenset().union(*(t for s, t, u in rows["model"] + rows["no lanes"] if t & toks))
        seen |= toks
        sides = {name: [(s.template.split("/")[-1].replace(".wgsl", ""), u) for s, t, u in rows[name] if t & toks]
                 for name in rows}
        a, b = (sum(u for _, u in sides[n]) for n in rows)
        print(f"{'+'.join(sorted(toks)):>44} {a:>7.0f} {b:>7.0f} {a / max(b, 1e-9):>5.2f}  "
              f"{' + '.join(t for t, _ in sides['model'])} | {' + '.join(t for t, _ in sides['no lanes'])}")
    for g in graphs.values():
        g.destroy()


def _lanes_forced(ctx, path: str, rounds: int, repeats: int, dump=None) -> None:
    """Print every pair of model ``path`` that the channel-lane kernel can run, on it and on the
    pixel blocks (``--lanes-forced``)."""
    from webnn_gpu.ops import conv

    envs = {"lanes": {"WEBNN_GPU_FORCE_DWP_FORM": "lanes"}, "blocks": {"WEBNN_GPU_FORCE_DWP_FORM": "blocks"},
            "model": {"WEBNN_GPU_FORCE_DWP_FORM": ""}}
    with environ({"WEBNN_GPU_PLAN_CACHE": "0"}):  # a cached plan's steps carry no node attributes
        graphs, best, rows = _profiled(ctx, path, envs, rounds, repeats)
    print(f"# {os.path.basename(path)}: all kernels forced lanes {sum(best['lanes']):.0f} us, blocks "
          f"{sum(best['blocks']):.0f}, as the compiler decides {sum(best['model']):.0f}")
    fit, sg = conv.DWP_PAY_FIT[ctx._tuning], conv.DW_LANES
    for st, toks, us in rows["lanes"]:
        if st.template != "conv/depthwise_project_lanes.wgsl" or "depthwise" not in st.node.attrs:
            continue
        g = conv._geometry(st.node.attrs["depthwise"])
        n = conv._project_width(st.node.attrs["project"])
        plan = conv._dwp_lanes(g, -(-n // 4), sg)
        blocks = sum(u for s, t, u in rows["blocks"] if t & toks)
        # an expansion the pixel blocks compute is a kernel of its own beside the lanes kernel
        whole = frozenset().union(toks, *(t for s, t, u in rows["blocks"] if t & toks))
        apart = [(s, u) for s, t, u in rows["lanes"] if t & whole and s is not st]
        lanes_all = us + sum(u for _, u in apart)
        b_est = sum(w * t for w, t in zip(fit["fused"], conv._dwp_fused_terms(g, -(-n // 4), ctx._tuning, sg)))
        l_est = conv._dwpl_cost(g, -(-n // 4), plan, sg, ctx._tuning)
        picks = [s.template.split("/")[-1][:-5] for s, t, _ in rows["model"] if t & toks]
        if dump is not None:
            dump.write(json.dumps(dict(model=os.path.basename(path), label="+".join(sorted(toks)), g=g, n=n, plan=plan,
                                       lanes=us, lanes_all=lanes_all, blocks=blocks, picks=picks, best=b_est, lest=l_est,
                                       lterms=conv._dwpl_terms(g, -(-n // 4), plan, sg))) + "\n")
        more = f"+{len(apart)}" if apart else "  "  # kernels of its own (and their launches) on the lanes side
        print(f"{g['OH']:>3}x{g['OW']:<3} {g['C']:>4} {g['KH']}x{g['KW']} {g['sh']} {n:>4} lanes{more} {lanes_all:>6.0f} "
              f"blocks {blocks:>6.0f} {lanes_all / max(blocks, 1e-9):>5.2f} estimated {l_est / b_est:>5.2f} "
              f"{' + '.join(picks)}", flush=True)
    for g in graphs.values():
        g.destroy()


def main(argv=None) -> int:
    """Profile the models (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("models", nargs="+")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--forms", action="store_true", help="each pair fused and split (see the module docstring)")
    p.add_argument("--rounds", type=int, default=3, help="--forms: alternating rounds")
    p.add_argument("--lanes", action="store_true",
                   help="as the compiler decides against without the channel-lane kernel, alternately")
    p.add_argument("--lanes-forced", action="store_true",
                   help="each pair the channel-lane kernel can run, on it and on the pixel blocks, alternately")
    p.add_argument("--dump", default="", help="--forms, --lanes-forced: append one JSON line per pair to this file")
    args = p.parse_args(argv)
    os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
    import webnn_gpu as webnn
    from webnn_gpu import _dtypes
    from webnn_gpu._lower import KernelStep
    from webnn_gpu.profile import profile_graph

    ctx = webnn.ml.create_context()
    for path in args.models:
        if not os.path.exists(path):
            from webnn_gpu.models import fetch

            path = fetch(path)
        if args.lanes:
            _lanes_ab(ctx, path, args.rounds, args.repeats)
            continue
        if args.lanes_forced:
            with open(args.dump, "a") if args.dump else open(os.devnull, "w") as dump:
                _lanes_forced(ctx, path, args.rounds, args.repeats, dump if args.dump else None)
            continue
        if args.forms:
            with open(args.dump, "a") if args.dump else open(os.devnull, "w") as dump:
                _forms(ctx, path, args.rounds, args.repeats, dump if args.dump else None)
            continue
        with environ({"WEBNN_GPU_PLAN_CACHE": "0"}):  # a cached plan's steps carry no node attributes
            model = webnn.load(path, ctx)
        rng = np.random.default_rng(0)
        inputs = {nm: rng.random(d["shape"]).astype(_dtypes.info(d["data_type"]).numpy)
                  for nm, d in model.graph.inputs.items()}
        rows = profile_graph(ctx, model.graph, inputs, args.repeats)
        steps = [s for s in model.graph._steps if isinstance(s, KernelStep)]
        total = sum(r["us"] for r in rows)
        print(f"# {os.path.basename(path)}: {total:.0f} us over {len(rows)} kernels")
        print(f"{'kernel':>8} {'out':>7} {'C':>4} {'M':>2} {'win':>4} {'s':>1} {'d':>1} {'N':>6} {'wgs':>5} "
              f"{'strip':>6} {'us':>8} {'GFLOP/s':>8} {'GB/s':>6}  label")
        dw_us = 0.0
        for st, r in zip(steps, rows):
            if st.template not in DW_TEMPLATES:
                continue
            sr = _shape_row(st, ctx._tuning)
            dw_us += r["us"]
            wgs = int(np.prod(r["groups"]))
            print(f"{'dwps' if 'strip' in st.template else 'dwpl' if 'lanes' in st.template else 'dwp' if 'project' in st.template else 'dw':>8} {sr['hw']:>7} {sr['C']:>4} {sr['M']:>2} "
                  f"{sr['win']:>4} {sr['s']:>1} {sr['d']:>1} {sr['N']:>6} {wgs:>5} {sr['strip']:>6} {r['us']:>8.1f} "
                  f"{sr['flops'] / r['us'] / 1e3:>8.2f} {sr['bytes'] / r['us'] / 1e3:>6.2f}  {r['label']}")
        print(f"# depthwise kernels: {dw_us:.0f} us of {total:.0f} us\n")
        model.graph.destroy()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
