"""Per-kernel GPU timings with timestamp queries (``WEBNN_GPU_PROFILE=1``, ``webnn-gpu profile``).

Each kernel of the graph runs in a compute pass of its own with timestamps at its beginning
and end, so the numbers include a pass's fixed cost; they rank kernels, they do not add up to
the latency of a normal dispatch (which records all kernels into one pass).
"""

from __future__ import annotations

import argparse
import logging
from collections import defaultdict

import numpy as np
import wgpu

from . import _dtypes
from ._lower import KernelStep
from .errors import NotSupportedError

log = logging.getLogger("webnn_gpu")


def profile_graph(ctx, graph, inputs: dict, repeats: int = 10) -> list[dict]:
    """Time every kernel of ``graph`` on ``inputs`` (name -> ndarray), ``repeats`` times.

    Returns:
        list[dict]: one row per kernel in execution order: ``label``, ``template``,
        ``groups`` (workgroup counts), ``us`` (median microseconds), ``flops`` (floating-point
        operations of a product kernel, else 0) and ``note`` (its size and variant, else "").

    Raises:
        NotSupportedError: the device has no ``timestamp-query`` feature.
    """
    if "timestamp-query" not in ctx.features:
        raise NotSupportedError("profile: this device has no 'timestamp-query' feature")
    kernels = [s for s in graph._steps if isinstance(s, KernelStep)]
    n = max(1, len(kernels))
    device = ctx.device
    qs = device.create_query_set(type=wgpu.QueryType.timestamp, count=2 * n)
    usage = wgpu.BufferUsage
    resolve = device.create_buffer(size=16 * n, usage=usage.QUERY_RESOLVE | usage.COPY_SRC)
    staging = device.create_buffer(size=16 * n, usage=usage.MAP_READ | usage.COPY_DST)
    io = {}
    for name, v in graph._inputs.items():
        buf = device.create_buffer(size=_dtypes.buffer_size(v.data_type, v.shape),
                                   usage=usage.STORAGE | usage.COPY_DST | usage.COPY_SRC)
        raw = np.ascontiguousarray(inputs[name], dtype=_dtypes.info(v.data_type).numpy).tobytes()
        device.queue.write_buffer(buf, 0, raw + b"\0" * ((-len(raw)) % 4))
        io[name] = buf
    outs = {name: device.create_buffer(size=_dtypes.buffer_size(v.data_type, v.shape),
                                       usage=usage.STORAGE | usage.COPY_SRC | usage.COPY_DST)
            for name, v in graph._outputs.items()}
    samples = defaultdict(list)
    io_key = ("profile", id(qs))  # this call's buffers: its recording is dropped below
    for _ in range(repeats):
        enc = device.create_command_encoder(label="profile")
        graph._encode(enc, io, outs, io_key, query_set=qs)
        enc.resolve_query_set(qs, 0, 2 * n, resolve, 0)
        enc.copy_buffer_to_buffer(resolve, 0, staging, 0, 16 * n)
        device.queue.submit([enc.finish()])
        staging.map_sync(wgpu.MapMode.READ)
        ticks = np.frombuffer(staging.read_mapped(copy=True), dtype=np.uint64)
        staging.unmap()
        for k in range(len(kernels)):
            samples[k].append(float(ticks[2 * k + 1] - ticks[2 * k]) / 1000.0)  # ns -> us
    rows = [{"label": s.label, "template": s.template, "groups": s.groups, "us": float(np.median(samples[k])),
             "flops": s.flops, "note": s.note} for k, s in enumerate(kernels)]
    graph._recordings.pop(io_key, None)
    for b in (resolve, staging, *io.values(), *outs.values()):
        b.destroy()
    return rows


def pipeline_count(graph) -> int:
    """The distinct compute pipelines ``graph``'s kernels use (what a first build compiles; the
    kernels of layers with identical shader text share one)."""
    return len({id(s.pipeline) for s in graph._steps if isinstance(s, KernelStep)})


def pipeline_rows(graph, rows: list[dict] | None = None) -> list[dict]:
    """One row per distinct pipeline of ``graph``: what its first build compiled and what it costs.

    Arguments:
        graph (MLGraph): a built graph.
        rows (list[dict] | None): :func:`profile_graph`'s rows of the same graph, to add the
            pipeline's run time (the sum over the kernels that use it).

    Returns:
        list[dict]: ``template``, ``label`` (of its first kernel), ``kernels`` (how many use
        it), ``wgsl_bytes``, ``wgsl_lines``, ``compile_s`` (its first run, the driver's
        compile on lavapipe, or None when that was not timed: see
        ``PipelineCache.timed``; it ran in an earlier build or before timing was on),
        ``create_cpu_s`` (CPU seconds of making it: naga's and the driver's front end, what a
        build with Mesa's cache warm spends on it; None if this process did not make it) and
        ``us`` (None without ``rows``), slowest compile first.
    """
    cache = graph.context._pipelines
    kernels = [s for s in graph._steps if isinstance(s, KernelStep)]
    out: dict[int, dict] = {}
    for k, s in enumerate(kernels):
        row = out.get(id(s.pipeline))
        if row is None:
            row = out[id(s.pipeline)] = {
                "template": s.template, "label": s.label, "kernels": 0, "wgsl_bytes": len(s.wgsl),
                "wgsl_lines": s.wgsl.count("\n") + 1, "compile_s": cache.compile_seconds.get(id(s.pipeline)),
                "compile_cpu_s": cache.compile_cpu_seconds.get(id(s.pipeline)),
                "create_cpu_s": cache.create_cpu_seconds.get(cache.key(s.wgsl)),
                "us": None if rows is None else 0.0}
        row["kernels"] += 1
        if rows is not None:
            row["us"] += rows[k]["us"]
    return sorted(out.values(), key=lambda r: -(r["compile_s"] or 0.0))


def format_pipelines(rows: list[dict]) -> str:
    """A text table of :func:`pipeline_rows`, with the sums per template at the end."""
    lines = [f"{'compile s':>9}  {'CPU s':>7}  {'run us':>8}  {'kernels':>7}  {'WGSL B':>7}  {'make ms':>7}  "
             f"{'kernel':<28} label"]
    for r in rows:
        cs = "-" if r["compile_s"] is None else f"{r['compile_s']:.3f}"
        cpu = "-" if r.get("compile_cpu_s") is None else f"{r['compile_cpu_s']:.3f}"
        us = "-" if r["us"] is None else f"{r['us']:.1f}"
        make = "-" if r.get("create_cpu_s") is None else f"{1e3 * r['create_cpu_s']:.1f}"
        lines.append(f"{cs:>9}  {cpu:>7}  {us:>8}  {r['kernels']:>7}  {r['wgsl_bytes']:>7}  {make:>7}  "
                     f"{r['template']:<28} {r['label']}")
    by: dict[str, list] = defaultdict(lambda: [0, 0.0, 0.0, 0.0, 0.0])
    for r in rows:
        t = by[r["template"]]
        t[0] += 1
        t[1] += r["compile_s"] or 0.0
        t[2] += r.get("compile_cpu_s") or 0.0
        t[3] += r["us"] or 0.0
        t[4] += r.get("create_cpu_s") or 0.0
    total = sum(t[1] for t in by.values())
    cpu_total = sum(t[2] for t in by.values())
    make_total = sum(t[4] for t in by.values())
    lines.append(f"{len(rows)} pipelines, compile {total:.2f} s ({cpu_total:.2f} s CPU), made in {make_total:.2f} s "
                 f"of CPU; by template (pipelines, compile s, CPU s, run us, make s):")
    for name, (n, cs, cpu, us, make) in sorted(by.items(), key=lambda kv: -kv[1][1]):
        lines.append(f"  {name:<28} {n:>4}  {cs:>8.2f} s  {cpu:>8.2f} s  {us:>9.1f} us  {make:>6.2f} s")
    return "\n".join(lines)


def format_table(rows: list[dict], pipelines: int | None = None) -> str:
    """A text table of :func:`profile_graph` rows, slowest operators summed at the end
    (``pipelines``: the graph's :func:`pipeline_count`, shown beside the kernel count). Product
    kernels (matmul, gemm, conv2d on the tile kernels) also show GFLOP/s and their size
    ``M x K -> N`` (K per filter tap, then the window) with the tile and variant."""
    total = sum(r["us"] for r in rows) or 1.0
    lines = [f"{'#':>3}  {'us':>9}  {'%':>5}  {'GF/s':>5}  {'kernel':<28} label"]
    for i, r in enumerate(rows):
        gf = f"{r['flops'] / r['us'] / 1e3:>5.1f}" if r.get("flops") and r["us"] > 0 else f"{'':>5}"
        note = f"  [{r['note']}]" if r.get("note") else ""
        lines.append(f"{i:>3}  {r['us']:>9.1f}  {100 * r['us'] / total:>5.1f}  {gf}  {r['template']:<28} {r['label']}{note}")
    by_template: defaultdict[str, float] = defaultdict(float)
    for r in rows:
        by_template[r["template"]] += r["us"]
    shared = f" ({pipelines} pipelines)" if pipelines is not None else ""
    lines.append(f"total {total:.1f} us over {len(rows)} kernels{shared}; by template:")
    for t, us in sorted(by_template.items(), key=lambda kv: -kv[1]):
        lines.append(f"  {t:<28} {us:>9.1f} us  {100 * us / total:>5.1f}%")
    return "\n".join(lines)


def parse_assignments(items: list[str] | None, what: str) -> dict:
    """``["name=1", "x=1,3,48,192"]`` -> ``{"name": 1, "x": [1, 3, 48, 192]}`` (``--dims``,
    ``--known``); a value with a dot is a float.

    Raises:
        MLTypeError: an item without ``=`` or with a value that is not a number list.
    """
    from .errors import MLTypeError

    out: dict = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        try:
            if not sep or not name:
                raise ValueError
            nums = [float(v) if "." in v or "e" in v.lower() else int(v) for v in value.replace("x", ",").split(",")]
        except ValueError:
            raise MLTypeError(f"profile: argument '{what}': expected NAME=VALUE or NAME=V1,V2,..., "
                              f"got {item!r}") from None
        out[name] = nums if ("," in value or "x" in value) else nums[0]
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``webnn-gpu profile``."""
    parser.add_argument("model", help="a .tflite or .onnx file, or a name known to 'webnn-gpu fetch'")
    parser.add_argument("--dtype", default="float32", choices=["float32", "float16"])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--compile-times", action="store_true",
                        help="also time each new pipeline's first run at build() (the driver's compile on "
                             "lavapipe; with MESA_SHADER_CACHE_DISABLE=true for a cold compile) and print them "
                             "per pipeline beside its kernels' run time")
    parser.add_argument("--dims", nargs="+", metavar="NAME=VALUE", default=None,
                        help="ONNX: sizes of symbolic dimensions (batch=1) or an input's whole shape "
                             "(x=1,3,48,192); 'webnn-gpu info MODEL' lists the inputs")
    parser.add_argument("--known", nargs="+", metavar="NAME=VALUE", default=None,
                        help="ONNX: inputs fixed to values when the model loads (sr=16000: int64, or "
                             "float32 with a dot), as known_inputs= of webnn_gpu.onnx.load")


def run(args) -> int:
    """Load the model, time its kernels on random input, print the table."""
    import os

    import webnn_gpu as webnn

    path = args.model
    if not os.path.exists(path):
        from .models import fetch

        path = fetch(path)
    options = {}
    dims, known = parse_assignments(getattr(args, "dims", None), "--dims"), \
        parse_assignments(getattr(args, "known", None), "--known")
    if dims:
        options["dims"] = dims
    if known:
        options["known_inputs"] = {k: np.asarray(v, np.float32 if any(isinstance(x, float) for x in np.ravel(v))
                                                 else np.int64) for k, v in known.items()}
    if options:
        with open(path, "rb") as f:
            if f.read(8)[4:8] == b"TFL3":
                from .errors import MLTypeError

                raise MLTypeError("profile: --dims and --known apply to ONNX models; this is a TFLite model")
    ctx = webnn.ml.create_context()
    ctx._pipelines.timed = bool(getattr(args, "compile_times", False))
    model = webnn.load(path, ctx, dtype=args.dtype, **options)
    rng = np.random.default_rng(0)
    inputs = {n: rng.random(d["shape"]).astype(_dtypes.info(d["data_type"]).numpy)
              for n, d in model.graph.inputs.items()}
    rows = profile_graph(ctx, model.graph, inputs, args.repeats)
    print(format_table(rows, pipeline_count(model.graph)))
    if ctx._pipelines.timed:
        print()
        print(format_pipelines(pipeline_rows(model.graph, rows)))
    return 0
