"""Per-dispatch shapes and throughput of a model's depthwise and depthwise + projection kernels.

    .venv/bin/python benchmarks/dw_shapes.py MODEL [MODEL ...] [--repeats 5]

MODEL: a .tflite/.onnx path or a name known to ``webnn-gpu fetch``. For every
``conv/depthwise.wgsl``, ``conv/depthwise_project.wgsl`` (``dwp``) and
``conv/depthwise_project_strip.wgsl`` (``dwps``) dispatch it prints the depthwise
shape (output H x W, channels C, multiplier M, window, stride, dilation), the projection
width N (0: none; ``+e`` where the expansion conv is computed in the kernel), the strip of the
stand-alone kernel and of the fused strip kernel (TH x TW output rows and columns per
invocation; ``-`` for the pixel-block kernel),
the workgroups, the kernel's microseconds (timestamp queries, median of
``--repeats``), its useful GFLOP/s (2 multiply-add flops per depthwise tap and projection
weight) and GB/s (its input, weights and output, each counted once).
"""

from __future__ import annotations

import argparse
import os

import numpy as np

DW_TEMPLATES = ("conv/depthwise.wgsl", "conv/depthwise_project.wgsl", "conv/depthwise_project_strip.wgsl")


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
    else:
        strip = "-" if node.op == "depthwise_project" else "x".join(str(v) for v in conv._dw_strip(g, tuning))
    return dict(hw=f"{g['OH']}x{g['OW']}", C=g["C"], M=g["O"] // g["C"], win=f"{g['KH']}x{g['KW']}", strip=strip,
                s=g["sh"], d=g["dh"], N=f"{n}{'+e' if k else ''}", flops=flops, bytes=moved)


def main(argv=None) -> int:
    """Profile the models (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("models", nargs="+")
    p.add_argument("--repeats", type=int, default=5)
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
            print(f"{'dwps' if 'strip' in st.template else 'dwp' if 'project' in st.template else 'dw':>8} {sr['hw']:>7} {sr['C']:>4} {sr['M']:>2} "
                  f"{sr['win']:>4} {sr['s']:>1} {sr['d']:>1} {sr['N']:>6} {wgs:>5} {sr['strip']:>6} {r['us']:>8.1f} "
                  f"{sr['flops'] / r['us'] / 1e3:>8.2f} {sr['bytes'] / r['us'] / 1e3:>6.2f}  {r['label']}")
        print(f"# depthwise kernels: {dw_us:.0f} us of {total:.0f} us\n")
        model.graph.destroy()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
