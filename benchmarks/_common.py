"""What several benchmarks share: environment variables set for a block (each form of a kernel is
built under its ``WEBNN_GPU_FORCE_*`` switches, which the engine reads at build time), the models
named on a command line, a model's inputs, the best kernel time of several builds profiled
alternately, the time per write / dispatch / read run of a graph, and the lines two forms'
per-round times and outputs are reported in."""

from __future__ import annotations

import contextlib
import os
import time

import numpy as np


@contextlib.contextmanager
def environ(env: dict):
    """Set ``env`` (a value of None unsets the variable) for the block, then restore what was."""
    old = {k: os.environ.get(k) for k in env}
    for k, v in env.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def ab_times(old, new, x, rounds: int, warmup: int = 3) -> dict[str, list[float]]:
    """Microseconds per ``engine.run(x)`` of two engines (``{"old": [...], "new": [...]}``),
    run in turn in each of ``rounds`` rounds after ``warmup`` rounds, the order flipped every
    round (so that neither always runs in the other's wake)."""
    times: dict[str, list[float]] = {"old": [], "new": []}
    for r in range(rounds + warmup):
        for key, engine in sorted({"old": old, "new": new}.items(), reverse=bool(r % 2)):
            t0 = time.perf_counter()
            engine.run(x)
            if r >= warmup:
                times[key].append((time.perf_counter() - t0) * 1e6)
    return times


def ab_line(name: str, make_engine, x, env: dict, rounds: int) -> str:
    """``name`` built twice in this process by ``make_engine()`` (an engine with ``run(x) ->
    {output: array}`` and ``model.graph``), with ``env`` set (old) and without it (new), the
    plan cache off, timed in turn (:func:`ab_times`): a line with the medians (us), the median
    and range of the per-round ratio new / old, the kernel counts and the outputs' gap."""
    with environ({"WEBNN_GPU_PLAN_CACHE": "0", **env}):
        old = make_engine()
    with environ({"WEBNN_GPU_PLAN_CACHE": "0", **dict.fromkeys(env)}):
        new = make_engine()
    times = ab_times(old, new, x, rounds)
    a, b = old.run(x), new.run(x)
    gap = max(float(np.abs(a[k].astype(np.float64) - b[k]).max()) for k in a)
    return (f"{ratio_line(name, times['old'], times['new'], 20)}  kernels {old.model.graph.kernel_count} -> "
            f"{new.model.graph.kernel_count}, max |new - old| {gap:.2g}")


def print_ab(spec: str, models, line) -> None:
    """The ``--ab VAR=VALUE`` report of a benchmark script: a header, then ``line(name, path,
    {VAR: VALUE})`` for each ``(name, path)`` of ``models``."""
    var, _, value = spec.partition("=")
    print(f"{'model':>20} {'old us':>9} {'new us':>9}  new/old (quartiles) [range]")
    for name, path in models:
        print(line(name, path, {var: value}), flush=True)


def model_paths(names: list[str]) -> list[str]:
    """``.tflite`` paths for ``names``: a path as given, else a model name of ``webnn-gpu fetch``
    (fetched into the cache on first use)."""
    from webnn_gpu.models import fetch

    return [m if os.path.exists(m) else str(fetch(m)) for m in names]


def best_kernel_us(ctx, built: dict, rounds: int, repeats: int, keep=None) -> dict:
    """name -> the least over ``rounds`` of the summed kernel time (timestamp queries, the median
    of ``repeats``) of each ``(graph, inputs)`` in ``built``, the builds profiled in turn within
    each round; ``keep(row)`` picks the kernels summed (default all)."""
    from webnn_gpu.profile import profile_graph

    best = dict.fromkeys(built, float("inf"))
    for _ in range(rounds):
        for n, (g, inputs) in built.items():
            rows = profile_graph(ctx, g, inputs, repeats)
            best[n] = min(best[n], sum(r["us"] for r in rows if keep is None or keep(r)))
    return best


def rotated_kernel_us(ctx, built: dict, rounds: int, repeats: int, keep=None) -> dict:
    """name -> per round the summed kernel time (timestamp queries, the median of ``repeats``) of
    each ``(graph, inputs)`` in ``built``, the builds profiled in turn within each round and the
    order rotated every round (the forms of a round see the same load); ``keep(row)`` picks the
    kernels summed (default all)."""
    from webnn_gpu.profile import profile_graph

    times = {name: [] for name in built}
    names = list(times)
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            g, x = built[name]
            times[name].append(sum(row["us"] for row in profile_graph(ctx, g, x, repeats) if keep is None or keep(row)))
    return times


def per_run_us(ctx, g, inputs: dict, runs: int, clock=time.perf_counter) -> float:
    """Microseconds of ``clock`` per write / dispatch / read run of ``g`` on ``inputs`` (name ->
    array of its input's data type): the least of 3 batches of ``runs`` after a warm-up batch of 3."""
    ts = {n: ctx.create_tensor({"data_type": str(a.dtype), "shape": list(a.shape), "writable": True})
          for n, a in inputs.items()}
    to = {n: ctx.create_tensor({"data_type": od["data_type"], "shape": od["shape"], "readable": True})
          for n, od in g.outputs.items()}
    best = float("inf")
    for i in range(4):
        t0 = clock()
        for _ in range(runs if i else 3):
            for n, a in inputs.items():
                ctx.write_tensor(ts[n], a)
            ctx.dispatch(g, ts, to)
            [ctx.read_tensor(t) for t in to.values()]
        if i:
            best = min(best, (clock() - t0) / runs * 1e6)
    return best


def model_inputs(g, seed: int = 0) -> dict:
    """Inputs of graph ``g`` (name -> array of its float type): an image input ([1, H, W, 3])
    gets the zoo's astronaut photo (``zoo.astronaut``: the values a model's activations take on
    a photo, not on noise, where a segmenter's logits sink into float32's denormal range and
    its last kernel runs slower), any other float input uniform noise in [0, 1), an integer one
    zeros (a valid index: token ids, positions)."""
    from zoo import astronaut

    rng = np.random.default_rng(seed)
    out = {}
    for n, v in g._inputs.items():
        shape = tuple(v.shape)
        if v.data_type not in ("float32", "float16"):
            out[n] = np.zeros(shape, np.dtype(v.data_type))
            continue
        dt = np.float16 if v.data_type == "float16" else np.float32
        photo = len(shape) == 4 and shape[0] == 1 and shape[3] == 3
        out[n] = (astronaut(shape[1:3]) if photo else rng.uniform(0, 1, shape)).astype(dt)
    return out


def ratio_line(name: str, old: list[float], new: list[float], width: int = 52) -> str:
    """``name`` (its last ``width`` characters), the medians of ``old`` and ``new`` (per-round
    times) and the median, quartiles and range of the per-round ratio new / old."""
    r = np.array(new) / np.array(old)
    q1, q3 = np.quantile(r, (0.25, 0.75))
    return (f"{name[-width:]:>{width}} {np.median(old):9.1f} {np.median(new):9.1f}  {np.median(r):5.3f}"
            f" ({q1:5.3f}-{q3:5.3f}) [{r.min():5.3f}-{r.max():5.3f}]")


def output_gaps(old: dict, new: dict) -> list[str]:
    """One line per output of two forms' results (name -> array): how far apart they are."""
    lines = []
    for k in old:
        a, b = np.asarray(old[k], np.float64), np.asarray(new[k], np.float64)
        lines.append(f"# output {k}: max |new - old| {np.abs(a - b).max():.3g} (max |old| {np.abs(a).max():.3g})")
    return lines


def close_forms(ctx, built: dict) -> None:
    """Print how far the "new" build's outputs are from the "old" one's (``built``: name ->
    ``(graph, inputs)``, run once each), then destroy every build's graph."""
    outs = {n: ctx.compute(g, x) for n, (g, x) in built.items()}
    print("\n".join(output_gaps(outs["old"], outs["new"])), flush=True)
    for g, _ in built.values():
        g.destroy()


def products_graph(ctx, spec: str, concat: bool = False):
    """A graph of products of one seeded input, each with a bias, and that input, from ``spec``:
    ``M,K:N1+N2+...`` (gemms by W^T on M rows of K values: TFLite's fully connected layers) or
    ``HxWxC:N1+N2+...[:K[:S[:D[:P]]]]`` (NHWC K x K conv2d, 1 x 1 by default, strides S (1),
    dilations D (1), padding P on every side (K // 2)); the outputs ``y0``, ``y1``, ... in that
    order (used by siblings.py, tile_cols.py and few_rows.py). With ``concat`` the products read
    the concatenation (last axis) of inputs ``x`` and ``x2`` (its last 4 values) instead, a
    kernel of its own: A written just before, as in a model, not by the host."""
    import webnn_gpu as webnn

    def source(b, shape):
        if not concat:
            return b.input("x", {"data_type": "float32", "shape": shape}), {"x": rng.uniform(-1, 1, shape).astype(np.float32)}
        head = [*shape[:-1], shape[-1] - 4]
        xs = {"x": rng.uniform(-1, 1, head).astype(np.float32), "x2": rng.uniform(-1, 1, [*shape[:-1], 4]).astype(np.float32)}
        ops = [b.input(n, {"data_type": "float32", "shape": list(a.shape)}) for n, a in xs.items()]
        return b.concat(ops, len(shape) - 1), xs

    shape, widths, *win = spec.split(":")
    outs, k = [int(n) for n in widths.split("+")], int(win[0]) if win else 1
    st, dil, pad = (int(v) for v in (win[1:] + [1, 1, k // 2][len(win) - 1:])[:3]) if win else (1, 1, 0)
    rng = np.random.default_rng(0)
    b = webnn.MLGraphBuilder(ctx)
    if "," in shape:
        M, K = (int(v) for v in shape.split(","))
        x, inputs = source(b, [M, K])
        ys = {f"y{j}": b.gemm(x, b.constant(rng.uniform(-1, 1, (o, K)).astype(np.float32)),
                              c=b.constant(rng.uniform(-1, 1, o).astype(np.float32)), b_transpose=True)
              for j, o in enumerate(outs)}
        return b.build(ys), inputs
    H, W, C = (int(v) for v in shape.split("x"))
    x, inputs = source(b, [1, H, W, C])
    ys = {f"y{j}": b.conv2d(x, b.constant(rng.uniform(-1, 1, (o, k, k, C)).astype(np.float32)),
                            bias=b.constant(rng.uniform(-1, 1, o).astype(np.float32)), padding=[pad] * 4,
                            strides=[st] * 2, dilations=[dil] * 2, input_layout="nhwc", filter_layout="ohwi")
          for j, o in enumerate(outs)}
    return b.build(ys), inputs


# ---------------------------------------------------------------- PyTorch exports
#: The PyTorch environment of ``onnx_torch_vision.py`` and ``onnx_torch_seq.py`` (torch CPU,
#: onnx, onnxscript, onnxruntime).
TORCH_PYTHON = os.path.join(os.path.expanduser("~"), ".cache", "webnn-gpu", "bench", "venv-torch", "bin", "python")

#: Their TorchScript export variants (``--variant``): name -> the ``torch.onnx.export`` keywords
#: (``half``: the module and its float inputs in float16 too).
TORCH_VARIANTS = {"op11": {"opset_version": 11}, "op13": {"opset_version": 13}, "half": {"opset_version": 17},
                  "nofold": {"opset_version": 17, "do_constant_folding": False}}


def torch_cache_dir():
    """Where their exported models live: ``$XDG_CACHE_HOME/webnn-gpu/onnx_torch`` (a pathlib.Path)."""
    import pathlib

    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(base) / "webnn-gpu" / "onnx_torch"
