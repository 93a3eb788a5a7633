"""The fixed cost of one inference on the tensor path: ``write_tensor``, ``dispatch``, the first
``read_tensor`` and a second one (its data already computed), each timed on its own.

The graph is two element-wise kernels on 64 floats with two readable outputs, so nearly all of
the time is the runtime's (Python, wgpu-py, lavapipe's queue and poll threads), not computing.
Prints the median and the 25th/75th percentiles over the rounds, in microseconds, and the
whole inference (write, dispatch, both reads)::

    .venv/bin/python benchmarks/tensor_io.py --rounds 200

Compare two checkouts by running each tree's copy of this file with its own interpreter, in
turns (timings mean something only as ratios measured side by side).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import webnn_gpu as webnn


def _graph(ctx, n):
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [n]})
    return b.build({"a": b.relu(x), "b": b.exp(x)})


def main(argv=None) -> None:
    """Run the benchmark and print its table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--size", type=int, default=64, help="floats per tensor")
    args = ap.parse_args(argv)
    ctx = webnn.ml.create_context()
    g = _graph(ctx, args.size)
    desc = {"data_type": "float32", "shape": [args.size]}
    t_in = ctx.create_tensor({**desc, "writable": True})
    t_a = ctx.create_tensor({**desc, "readable": True})
    t_b = ctx.create_tensor({**desc, "readable": True})
    x = np.linspace(-2, 2, args.size, dtype=np.float32)
    names = ("write_tensor", "dispatch", "read_tensor (first)", "read_tensor (second)", "inference")
    times: dict[str, list[float]] = {k: [] for k in names}
    clock = time.perf_counter
    for r in range(args.rounds + 5):
        x[0] = r % 16  # a new input every round
        t0 = clock()
        ctx.write_tensor(t_in, x)
        t1 = clock()
        ctx.dispatch(g, {"x": t_in}, {"a": t_a, "b": t_b})
        t2 = clock()
        a = ctx.read_tensor(t_a)
        t3 = clock()
        b = ctx.read_tensor(t_b)
        t4 = clock()
        if a[0] != r % 16 or not np.allclose(b, np.exp(x), rtol=1e-5):
            raise SystemExit(f"round {r}: wrong result")
        if r >= 5:  # warm-up rounds left out
            for k, v in zip(names, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t4 - t0)):
                times[k].append(v * 1e6)
    print(f"{'us, ' + str(args.rounds) + ' rounds':<24}{'median':>9}{'p25':>9}{'p75':>9}")
    for k in names:
        p25, p50, p75 = np.percentile(times[k], [25, 50, 75])
        print(f"{k:<24}{p50:9.1f}{p25:9.1f}{p75:9.1f}")
    print(f"kernels: {g.kernel_count}")
    ctx.destroy()


if __name__ == "__main__":
    main()
