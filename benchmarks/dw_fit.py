"""Refit the two-kernel side of ``project_pays`` (``DWP_PAY_FIT``'s ``dw`` and ``tile`` weights).

    .venv/bin/python benchmarks/dw_fit.py DUMP.jsonl [DUMP.jsonl ...]

The dumps are the JSON lines of ``benchmarks/dw_shapes.py --forms --dump`` (one per depthwise +
projection pair: its fused kernel's microseconds and those of the kernels it splits into). Each
line's stand-alone depthwise kernel is fitted as ``a _dw_cost / 1000 + b`` and its projection's
tile kernel (pairs without an expansion) as ``c M C N/4 / 1e6 + d M (C + N)/4 / 1e6 + e``, each by
least relative error with non-negative weights (the method of docs/conv.md, The cost model). It
prints the fitted weights, per pair the measured fused and split times (a dispatch counted
``DWP_PAY_FIT``'s 45 us) with the decision of the current weights and of the fitted ones, and the
microseconds each set of decisions loses against the faster form of every pair.
"""

from __future__ import annotations

import argparse
import json
import os

import numpy as np


def _nnls_rel(rows: list[list[float]], y: list[float]) -> np.ndarray:
    """Non-negative weights minimising the squared relative error of ``rows @ w`` against ``y``."""
    from scipy.optimize import nnls

    a, b = np.asarray(rows, float), np.asarray(y, float)
    return nnls(a / b[:, None], np.ones_like(b))[0]


def main(argv=None) -> int:
    """Fit and print (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dumps", nargs="+")
    args = p.parse_args(argv)
    os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
    from webnn_gpu.ops import conv

    tuning = "lane-loop"
    lines = [json.loads(s) for f in args.dumps for s in open(f) if s.strip()]
    fit = conv.DWP_PAY_FIT[tuning]
    dw_rows, dw_y, tile_rows, tile_y = [], [], [], []
    for d in lines:
        g, n = d["g"], d["n"]
        dws = [q["us"] for q in d["parts"] if q["template"] == "conv/depthwise.wgsl"]
        tiles = [q["us"] for q in d["parts"] if q["template"] == "matmul/tile.wgsl"]
        if len(dws) == 1:
            dw_rows.append([conv._dw_cost(g, *conv._dw_strip(g, tuning), tuning) / 1e3, 1.0])
            dw_y.append(dws[0])
        if not d["k4"] and len(tiles) == 1 and n <= conv.PROJECT_MAX_N:
            M = g["NB"] * g["OH"] * g["OW"]
            tile_rows.append([M * g["C"] * -(-n // 4) / 1e6, M * (g["C"] + n) / 4e6, 1.0])
            tile_y.append(tiles[0])
    w_dw, w_tile = _nnls_rel(dw_rows, dw_y), _nnls_rel(tile_rows, tile_y)
    print(f"# {len(lines)} pairs; dw fitted on {len(dw_y)}, tile on {len(tile_y)}")
    print(f"dw   now {tuple(fit['dw'])}  fitted ({w_dw[0]:.3f}, {w_dw[1]:.1f})")
    print(f"tile now {tuple(fit['tile'])}  fitted ({w_tile[0]:.1f}, {w_tile[1]:.1f}, {w_tile[2]:.1f})")
    for name, w, rows, y in (("dw", w_dw, dw_rows, dw_y), ("tile", w_tile, tile_rows, tile_y)):
        old = np.asarray(fit[name], float)
        r_old = np.asarray(rows) @ old / np.asarray(y)
        r_new = np.asarray(rows) @ w / np.asarray(y)
        print(f"{name:>4} estimate / measured: now median {np.median(r_old):.2f} ({r_old.min():.2f}-{r_old.max():.2f}),"
              f" fitted {np.median(r_new):.2f} ({r_new.min():.2f}-{r_new.max():.2f})")
    new = {**fit, "dw": (float(w_dw[0]), float(w_dw[1])), "tile": tuple(float(v) for v in w_tile)}
    lost = {"now": 0.0, "fitted": 0.0}
    print(f"{'model':>22} {'out':>7} {'C':>4} {'win':>4} {'s':>1} {'N':>4} {'fused':>6} {'split':>6} {'now':>5} {'fitted':>6}")
    for d in lines:
        g, n = d["g"], d["n"]
        if d["k4"]:
            continue
        split = sum(q["us"] for q in d["parts"]) + fit["dispatch"] * (len(d["parts"]) - 1)
        picks = {}
        for name, f in (("now", fit), ("fitted", new)):
            conv.DWP_PAY_FIT[tuning] = f
            try:
                picks[name] = "fused" if conv.project_pays(g, n, tuning) else "split"
            finally:
                conv.DWP_PAY_FIT[tuning] = fit
            lost[name] += (d["fused"] if picks[name] == "fused" else split) - min(d["fused"], split)
        mark = " *" if picks["now"] != picks["fitted"] else ""
        print(f"{d['model'].split('.')[0][:22]:>22} {g['OH']:>3}x{g['OW']:<3} {g['C']:>4} {g['KH']}x{g['KW']} {g['sh']} "
              f"{n:>4} {d['fused']:>6.0f} {split:>6.0f} {picks['now']:>5} {picks['fitted']:>6}{mark}")
    print(f"# lost against the faster form: now {lost['now']:.0f} us, fitted {lost['fitted']:.0f} us")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
