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
launch more, about ``LAUNCH_US`` of wall beyond its timestamps), their ratio, the channel-lane estimate
(:func:`webnn_gpu.ops.conv._dwpl_cost`, with the margin) over the pixel blocks' and the kernel
the compiler picks; ``--dump`` appends one JSON line per pair (the estimates' terms too) for
fitting ``DWPL_FIT``.

``--paired KIND`` builds each model two ways (:data:`PAIRED`: ``lanes``, every pair the
channel-lane kernel can run forced onto it against none; ``fused``, every pair fused against the
model as built; ``split``, none fused against the model; ``set``, the model as built against the
same with ``--set``'s Python statements run on the ``conv`` and ``linalg`` modules, whose
constants are put back after) and profiles the two in turn for ``--rounds`` rounds, the order
swapped every round; per group of kernels that differ (those sharing a source operator) it
prints both sides' median microseconds, the median and range of the per-round ratios (second
side over first) and the launches of each, then the median wall time per inference of each side
(``--wall-runs`` write / dispatch / read runs per round) and, where the launches differ, the wall
time per launch beyond the kernels' timestamps: per round (wall difference - the differing
kernels' difference) / launches. ``--paired lanes --shapes HWxCxNxKxS[f][eK],...`` does the same
on synthetic pairs (``f``: the face models' residual block; ``eK``: the expansion from K channels
before it), every pair fused; ``--dump`` appends one JSON line per group or shape (per-round
times, and for shapes the channel-lane plan's terms).

``--triples HWxKxCxNxWINxS,...`` builds synthetic inverted-residual blocks (the expansion from K
channels to C, a WIN x WIN depthwise conv of stride S, the projection to N, ``+ x`` where the
shapes allow) as three kernels and as the one kernel of the three (``WEBNN_GPU_FORCE_DWP_TRIPLE=on``),
profiles the two in turn for ``--rounds`` rounds and prints per block both sides' median
kernel microseconds, the per-round ratios one / three, the estimate of
:func:`webnn_gpu.ops.conv._triple_cost` and what the compiler picks (``--dump``: one JSON line
per block, what ``EXPAND_TRIPLE_FIT`` was fitted on).
"""

from __future__ import annotations

import argparse
import json
import os
import re

import numpy as np
from _common import environ, per_run_us  # benchmarks/_common.py (the script's folder is on sys.path)

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


#: ``--paired``: the two sides each model is built with (name -> environment), per comparison
PAIRED = {"lanes": {"blocks": {"WEBNN_GPU_FORCE_DWP_FORM": "blocks"}, "lanes": {"WEBNN_GPU_FORCE_DWP_FORM": "lanes"}},
          "fused": {"model": {"WEBNN_GPU_FORCE_DWP": ""}, "fused": {"WEBNN_GPU_FORCE_DWP": "fused"}},
          "split": {"model": {"WEBNN_GPU_PASSES": ""}, "split": {"WEBNN_GPU_PASSES": "-fuse_depthwise_project"}},
          "set": {"as-is": {}, "set": {}}}  # the second built with --set's statements run on the conv module


def paired_rounds(ctx, built: dict, rounds: int, repeats: int, wall_runs: int) -> dict:
    """Profile the builds of ``built`` (name -> (graph, inputs), two of them) in turn for ``rounds``
    rounds, the order swapped every round: name -> list per round of (per-kernel microseconds,
    the median of ``repeats`` timestamp queries; wall microseconds per inference,
    ``_common.per_run_us`` of ``wall_runs`` runs: the least of 3 batches)."""
    from webnn_gpu.profile import profile_graph

    names = list(built)
    out: dict = {n: [] for n in names}
    for r in range(rounds):
        for n in names if r % 2 == 0 else names[::-1]:
            g, inputs = built[n]
            us = [row["us"] for row in profile_graph(ctx, g, inputs, repeats)]
            out[n].append((us, per_run_us(ctx, g, inputs, wall_runs) if wall_runs else 0.0))
    return out


def _groups(steps: dict) -> list[tuple[frozenset, dict]]:
    """The kernels of two builds (name -> kernel steps) grouped by the source operators they
    share, where the two sides differ in their kernels' templates, WGSL or count: (operators,
    name -> indices of its kernels in the group)."""
    toks = {n: [_tokens(s.label) for s in ss] for n, ss in steps.items()}
    groups: list[tuple[frozenset, dict]] = []
    seen: set = set()
    a, b = steps
    for i, t in enumerate(toks[a] + toks[b]):
        if not t or t & seen:
            continue
        whole, grew = set(t), True
        while grew:  # the closure over both sides' kernels that share an operator
            grew = False
            for n in steps:
                for tt in toks[n]:
                    if tt & whole and not tt <= whole:
                        whole |= tt
                        grew = True
        seen |= whole
        idx = {n: [k for k, tt in enumerate(toks[n]) if tt & whole] for n in steps}
        if [(steps[a][k].template, steps[a][k].wgsl) for k in idx[a]] != [
                (steps[b][k].template, steps[b][k].wgsl) for k in idx[b]]:
            groups.append((frozenset(whole), idx))
    return groups


def _paired(ctx, path: str, kind: str, rounds: int, repeats: int, wall_runs: int, dump=None, setting="") -> None:
    """Print model ``path``'s pairs that the two sides of ``kind`` (:data:`PAIRED`) run
    differently, per-round ratios (``--paired``; ``setting``: Python statements run with
    ``conv`` and ``linalg`` (the ops modules) in scope before the second side of "set" is built,
    their module constants restored after)."""
    import copy

    import webnn_gpu as webnn
    from webnn_gpu import _dtypes
    from webnn_gpu._lower import KernelStep
    from webnn_gpu.ops import conv, linalg

    built, steps = {}, {}
    rng = np.random.default_rng(0)
    with environ({"WEBNN_GPU_PLAN_CACHE": "0"}):
        for name, env in PAIRED[kind].items():
            saved = {(m, k): copy.deepcopy(v) for m in (conv, linalg) for k, v in vars(m).items()
                     if k.isupper() and isinstance(v, (dict, tuple, list, int, float, bool, str))}
            if kind == "set" and name == "set":
                exec(setting, {"conv": conv, "linalg": linalg})
            try:
                with environ(env):
                    g = webnn.load(path, ctx).graph
            finally:
                for (m, k), v in saved.items():
                    setattr(m, k, v)
            inputs = {nm: rng.random(d["shape"]).astype(_dtypes.info(d["data_type"]).numpy)
                      for nm, d in g.inputs.items()}
            built[name] = (g, inputs)
            steps[name] = [s for s in g._steps if isinstance(s, KernelStep)]
    res = paired_rounds(ctx, built, rounds, repeats, wall_runs)
    _report(os.path.basename(path), steps, res, _groups(steps), dump)
    for g, _ in built.values():
        g.destroy()


def _report(title: str, steps: dict, res: dict, groups: list, dump=None) -> None:
    """Print per group of differing kernels the two sides' median microseconds, the median and
    range of the per-round ratios (second side over first) and the launches of each; then the
    whole inference's wall time and what one launch more costs beyond the kernels' timestamps:
    per round, (wall difference - differing kernels' difference) / launch difference."""
    a, b = res
    rounds = len(res[a])
    print(f"# {title}: {a} {len(steps[a])} kernels, {b} {len(steps[b])}; {rounds} rounds, per-round ratios {b}/{a}")
    diff_a = np.zeros(rounds)
    diff_b = np.zeros(rounds)
    for whole, idx in groups:
        sa = np.array([sum(us[k] for k in idx[a]) for us, _ in res[a]])
        sb = np.array([sum(us[k] for k in idx[b]) for us, _ in res[b]])
        diff_a += sa
        diff_b += sb
        ratio = sb / np.maximum(sa, 1e-9)
        fused = [steps[n][k] for n in (a, b) for k in idx[n] if steps[n][k].node.op == "depthwise_project"]
        node = (fused or [steps[n][k] for n in (a, b) for k in idx[n]])[0].node
        dw = node.attrs.get("depthwise", node) if node.op == "depthwise_project" else node
        shape, gg, n = "", None, 0
        if dw.op == "conv2d":
            from webnn_gpu.ops import conv

            gg = conv._geometry(dw)
            n = conv._project_width(node.attrs["project"]) if node.attrs.get("project") is not None else 0
            shape = f"{gg['OH']}x{gg['OW']} {gg['C']}->{n} {gg['KH']}x{gg['KW']}/{gg['sh']}"
        tmpl = {n: "+".join(steps[n][k].template.split("/")[-1][:-5] for k in idx[n]) for n in (a, b)}
        print(f"{shape:>24} {np.median(sa):>7.0f} {np.median(sb):>7.0f} {np.median(ratio):>5.2f} "
              f"({ratio.min():.2f}-{ratio.max():.2f}) {len(idx[a])}->{len(idx[b])}  {tmpl[a]} | {tmpl[b]}  "
              f"{'+'.join(sorted(whole))[:60]}", flush=True)
        if dump is not None:
            dump.write(json.dumps(dict(model=title, shape=shape, g=gg, n=n, a=sa.tolist(), b=sb.tolist(),
                                       ka=[[us[k] for k in idx[a]] for us, _ in res[a]],
                                       kb=[[us[k] for k in idx[b]] for us, _ in res[b]], ta=tmpl[a], tb=tmpl[b],
                                       label="+".join(sorted(whole)))) + "\n")
    wa = np.array([w for _, w in res[a]])
    wb = np.array([w for _, w in res[b]])
    if wa.any():
        dl = len(steps[a]) - len(steps[b])
        per = ((wa - wb) - (diff_a - diff_b)) / dl if dl else np.zeros(rounds)
        print(f"# wall per inference {a} {np.median(wa):.0f} us, {b} {np.median(wb):.0f} "
              f"({np.median(wb / wa):.3f}, {(wb / wa).min():.3f}-{(wb / wa).max():.3f}); differing kernels "
              f"{np.median(diff_a):.0f} -> {np.median(diff_b):.0f} us; launches {dl:+d} "
              + (f"-> {np.median(per):.0f} us per launch beyond the timestamps "
                 f"(quartiles {np.percentile(per, 25):.0f}-{np.percentile(per, 75):.0f})" if dl else ""), flush=True)
        if dump is not None:
            dump.write(json.dumps(dict(model=title, wall_a=wa.tolist(), wall_b=wb.tolist(), diff_a=diff_a.tolist(),
                                       diff_b=diff_b.tolist(), launches=dl)) + "\n")


def _synthetic(ctx, spec: str):
    """The graph and inputs of one ``--shapes`` entry: ``HWxCxNxKxS`` (a depthwise conv2d + bias +
    relu and its projection, ``benchmarks/dw_project.py``), with ``f`` appended the face models'
    block (``prelu(projection + x)``), with ``eK`` appended the expansion ``K -> C`` before it and
    a residual of another tensor (``benchmarks/dw_expand.py``'s block; 3x3, stride 1)."""
    import dw_expand
    import dw_project

    m = re.fullmatch(r"(\d+)x(\d+)x(\d+)x(\d+)x(\d+)(f?)(?:e(\d+))?", spec)
    if m is None:
        raise SystemExit(f"--shapes: {spec!r} is not HWxCxNxKxS[f][eK]")
    hw, C, N, k, s = (int(v) for v in m.groups()[:5])
    if m.group(7):
        assert k == 3 and s == 1, "the expansion block is 3x3 stride 1"
        return dw_expand._graph(ctx, hw, int(m.group(7)), C, N)
    return dw_project._graph(ctx, hw, C, N, k, s, face=bool(m.group(6)))


def _paired_shapes(ctx, specs: list[str], kind: str, rounds: int, repeats: int, dump=None, setting="") -> None:
    """``--paired`` on synthetic graphs (:func:`_synthetic`), every pair forced fused: per shape
    the two sides' whole-graph kernel time (per-round medians and ratios), the channel-lane plan's
    terms and the pixel blocks' estimate (``--dump``: one JSON line per shape, for fitting)."""
    from webnn_gpu._lower import KernelStep
    from webnn_gpu.ops import conv

    tuning, sg = ctx._tuning, conv.DW_LANES
    fit = conv.DWP_PAY_FIT[tuning]
    for spec in specs:
        built, steps = {}, {}
        with environ({"WEBNN_GPU_PLAN_CACHE": "0", "WEBNN_GPU_FORCE_DWP": "fused"}):
            for name, env in PAIRED[kind].items():
                with environ(env):
                    g, inputs = _synthetic(ctx, spec)
                built[name] = (g, inputs)
                steps[name] = [st for st in g._steps if isinstance(st, KernelStep)]
        res = paired_rounds(ctx, built, rounds, repeats, 0)
        a, b = res
        sa = np.array([sum(us) for us, _ in res[a]])
        sb = np.array([sum(us) for us, _ in res[b]])
        ratio = sb / sa
        pair = [st.node for st in steps[b] + steps[a] if st.node.op == "depthwise_project"][0]
        gg = conv._geometry(pair.attrs["depthwise"])
        n4 = -(-conv._project_width(pair.attrs["project"]) // 4)
        plan = conv._dwp_lanes(gg, n4, sg)
        b_est = sum(w * t for w, t in zip(fit["fused"], conv._dwp_fused_terms(gg, n4, tuning, sg)))
        l_est = conv._dwpl_cost(gg, n4, plan, sg, tuning) if plan else float("nan")
        tm = {n: "+".join(st.template.split("/")[-1][:-5] for st in steps[n]) for n in (a, b)}
        print(f"{spec:>18} {a} {np.median(sa):>6.0f} {b} {np.median(sb):>6.0f} {np.median(ratio):>5.2f} "
              f"({ratio.min():.2f}-{ratio.max():.2f}) estimated {l_est / b_est:>5.2f}  {tm[a]} | {tm[b]}", flush=True)
        if dump is not None:
            dump.write(json.dumps(dict(model="synthetic", shape=spec, g=gg, n=4 * n4, plan=plan, a=sa.tolist(),
                                       b=sb.tolist(), ta=tm[a], tb=tm[b], best=b_est, lest=l_est,
                                       lterms=conv._dwpl_terms(gg, n4, plan, sg) if plan else None)) + "\n")
        for g, _ in built.values():
            g.destroy()


def _triple_graph(ctx, hw: int, K: int, C: int, N: int, k: int, s: int):
    """The graph and input of one ``--triples`` entry ``HWxKxCxNxWINxS``: an inverted-residual
    block, ``relu(conv1x1(x, K -> C) + b)``, a WIN x WIN depthwise conv of stride S with bias and
    relu (padded as TFLite's "same"), its projection to N with bias, and ``+ x`` where the shapes
    allow (stride 1, N == K); NHWC, float32."""
    import webnn_gpu as webnn

    rng = np.random.default_rng(0)
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [1, hw, hw, K]})

    def c(*shape, sc=0.3):
        return b.constant((rng.standard_normal(shape) * sc).astype(np.float32))

    e = b.relu(b.conv2d(x, c(C, 1, 1, K, sc=K ** -0.5), input_layout="nhwc", filter_layout="ohwi", bias=c(C)))
    oh = -(-hw // s)
    pad = max(0, (oh - 1) * s + k - hw)
    d = b.relu(b.conv2d(e, c(1, k, k, C), input_layout="nhwc", filter_layout="ihwo", groups=C, strides=[s, s],
                        padding=[pad // 2, pad - pad // 2] * 2, bias=c(C)))
    y = b.conv2d(d, c(N, 1, 1, C, sc=C ** -0.5), input_layout="nhwc", filter_layout="ohwi", bias=c(N))
    if s == 1 and N == K:
        y = b.add(y, x)
    return b.build({"y": y}), {"x": rng.standard_normal((1, hw, hw, K)).astype(np.float32)}


def _triples(ctx, specs: list[str], rounds: int, repeats: int, dump=None) -> None:
    """``--triples``: per synthetic block (:func:`_triple_graph`) its three kernels
    (``WEBNN_GPU_PASSES=-fuse_depthwise_project``) against the one kernel of the three
    (``WEBNN_GPU_FORCE_DWP_TRIPLE=on``), profiled in turn ``rounds`` times: both sides' median
    kernel microseconds, the median and range of the per-round ratios one / three, what
    :func:`webnn_gpu.ops.conv._triple_cost` estimates and what the compiler picks (``--dump``:
    one JSON line per shape with the per-round times and the estimate's terms)."""
    from webnn_gpu._lower import KernelStep
    from webnn_gpu.ops import conv

    tuning = ctx._tuning
    for spec in specs:
        m = re.fullmatch(r"(\d+)x(\d+)x(\d+)x(\d+)x(\d+)x(\d+)", spec)
        if m is None:
            raise SystemExit(f"--triples: {spec!r} is not HWxKxCxNxWINxS")
        hw, K, C, N, k, s = (int(v) for v in m.groups())
        built, kernels = {}, {}
        with environ({"WEBNN_GPU_PLAN_CACHE": "0"}):
            for name, env in (("three", {"WEBNN_GPU_PASSES": "-fuse_depthwise_project"}),
                              ("one", {"WEBNN_GPU_FORCE_DWP_TRIPLE": "on"}), ("model", {})):
                with environ(env):
                    built[name] = _triple_graph(ctx, hw, K, C, N, k, s)
                kernels[name] = len([st for st in built[name][0]._steps if isinstance(st, KernelStep)])
        picked = "one" if kernels["model"] == kernels["one"] else "three" if kernels["model"] == 3 else "?"
        built["model"][0].destroy()
        del built["model"]
        res = paired_rounds(ctx, built, rounds, repeats, 0)
        a, b = (np.array([sum(us) for us, _ in res[n]]) for n in ("three", "one"))
        ratio = b / a
        oh = -(-hw // s)
        g = dict(NB=1, H=hw, W=hw, C=C, O=C, KH=k, KW=k, sh=s, sw=s, dh=1, dw=1, OH=oh, OW=oh,
                 pt=max(0, (oh - 1) * s + k - hw) // 2, pl=max(0, (oh - 1) * s + k - hw) // 2)
        fused, three = conv._triple_cost(g, N, K // 4, tuning)
        th, tw, _ = conv._dwp_plan(g, -(-N // 4), K // 4, tuning, True, sg=conv.DW_LANES)
        print(f"{spec:>20} {th}x{tw} kernels {kernels['three']}/{kernels['one']} three {np.median(a):>6.0f} "
              f"one {np.median(b):>6.0f} {np.median(ratio):>5.2f} ({ratio.min():.2f}-{ratio.max():.2f}) "
              f"estimated {fused:>6.0f} / {three:>6.0f} = {fused / three:>5.2f}  picks {picked}", flush=True)
        if dump is not None:
            terms = conv._dwp_fused_terms(g, -(-N // 4), tuning, conv.DW_LANES, K // 4)
            dump.write(json.dumps(dict(shape=spec, g=g, n=N, k4=K // 4, block=[th, tw], three=a.tolist(),
                                       one=b.tolist(), terms=terms, est_one=fused, est_three=three)) + "\n")
        for gr, _ in built.values():
            gr.destroy()


def main(argv=None) -> int:
    """Profile the models (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("models", nargs="*")
    p.add_argument("--shapes", default="", help="--paired: synthetic HWxCxNxKxS[f][eK] shapes (comma-separated)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--forms", action="store_true", help="each pair fused and split (see the module docstring)")
    p.add_argument("--rounds", type=int, default=3, help="--forms: alternating rounds")
    p.add_argument("--lanes", action="store_true",
                   help="as the compiler decides against without the channel-lane kernel, alternately")
    p.add_argument("--lanes-forced", action="store_true",
                   help="each pair the channel-lane kernel can run, on it and on the pixel blocks, alternately")
    p.add_argument("--paired", choices=sorted(PAIRED), default="",
                   help="two builds per model (PAIRED), per-round ratios of the kernels that differ and wall time")
    p.add_argument("--set", default="", help="--paired set: statements run on conv / linalg for the second side")
    p.add_argument("--wall-runs", type=int, default=5, help="--paired: runs per round for the wall time (0: none)")
    p.add_argument("--triples", default="",
                   help="synthetic expansion + depthwise + projection blocks HWxKxCxNxWINxS (comma-separated): "
                        "three kernels against one")
    p.add_argument("--dump", default="",
                   help="--forms, --lanes-forced, --triples: append one JSON line per pair to this file")
    args = p.parse_args(argv)
    os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
    import webnn_gpu as webnn
    from webnn_gpu import _dtypes
    from webnn_gpu._lower import KernelStep
    from webnn_gpu.profile import profile_graph

    ctx = webnn.ml.create_context()
    if args.triples:
        with open(args.dump, "a") if args.dump else open(os.devnull, "w") as dump:
            _triples(ctx, args.triples.split(","), args.rounds, args.repeats, dump if args.dump else None)
    if args.paired and args.shapes:
        with open(args.dump, "a") if args.dump else open(os.devnull, "w") as dump:
            _paired_shapes(ctx, args.shapes.split(","), args.paired, args.rounds, args.repeats,
                           dump if args.dump else None, args.set)
    for path in args.models:
        if not os.path.exists(path):
            from webnn_gpu.models import fetch

            path = fetch(path)
        if args.paired:
            with open(args.dump, "a") if args.dump else open(os.devnull, "w") as dump:
                _paired(ctx, path, args.paired, args.rounds, args.repeats, args.wall_runs, dump if args.dump else None,
                        args.set)
            continue
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
