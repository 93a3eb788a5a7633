"""Run one runtime on one model and print its timings as one JSON line.

A peer runs under its own Python (a virtual environment made by :mod:`benchmarks.peers`)
and imports only NumPy and the peer; ``webnn`` (this project) runs under the project's
Python. Each runtime runs in a process of its own, so they never share threads. Usage::

    python peer_runner.py RUNTIME MODEL --threads N --warmup W --repeats R [--dtype float32] [--input X.npy]

RUNTIME is one of ``litert-xnnpack`` (LiteRT's interpreter with its default XNNPACK
delegate), ``litert-webgpu`` (LiteRT's CompiledModel on its WebGPU accelerator, Dawn),
``ort-cpu`` (ONNX Runtime, CPU execution provider), ``ort-webgpu`` (ONNX Runtime's
WebGPU execution provider, Dawn) or ``webnn`` (webnn-gpu: ``write_tensor``, ``dispatch``,
``read_tensor``; ``--dtype float16`` builds the graph in float16). Every run is timed from
handing the input over to having the output in host memory (dispatch-to-read), on one fixed
input (``--input``, else random in [0, 1]).

Printed: ``{"runtime", "ms": [...per run...], "cpu_ms": [...per run: ort-* and webnn, the CPU
time of every thread of the process, the driver's included], "output": [every n-th value, 4096
of them], "output_size", ...runtime details}``;
on failure ``{"runtime", "error": "..."}`` and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np


INPUT: np.ndarray | None = None  # set by --input: the image every runtime gets
FEED: dict | None = None  # set by --feed: every input by name (ONNX Runtime and webnn on ONNX models)
LOAD: dict = {}  # set by --dims / --known: webnn's ONNX load options
CPU_MS: list = []  # CPU ms of this process (every thread: the driver's too) per timed run, where measured


def _input(shape, dtype):
    """The benchmark input: the --input array, or a fixed random one in [0, 1]."""
    if INPUT is not None:
        return INPUT.reshape(shape).astype(dtype)
    return np.random.default_rng(0).random(shape).astype(dtype)


def litert_xnnpack(path, threads, warmup, repeats):
    from ai_edge_litert.interpreter import Interpreter

    interp = Interpreter(model_path=path, num_threads=threads)
    interp.allocate_tensors()
    inp, out = interp.get_input_details()[0], interp.get_output_details()[0]
    x = _input(inp["shape"], inp["dtype"])
    times = []
    for i in range(warmup + repeats):
        t = time.perf_counter()
        interp.set_tensor(inp["index"], x)
        interp.invoke()
        y = interp.get_tensor(out["index"]).copy()
        if i >= warmup:
            times.append((time.perf_counter() - t) * 1e3)
    return times, y, {}


def litert_webgpu(path, threads, warmup, repeats):
    from ai_edge_litert.compiled_model import CompiledModel
    from ai_edge_litert.hardware_accelerator import HardwareAccelerator

    model = CompiledModel.from_file(path, hardware_accel=HardwareAccelerator.GPU)
    accelerated = bool(model.is_fully_accelerated())
    if not accelerated:
        raise RuntimeError("LiteRT's GPU accelerator did not take the whole model (is_fully_accelerated() "
                           "is False): timing it would time the CPU fallback")
    sig = model.get_signature_by_index(0)
    details = model.get_input_tensor_details(sig.get("key", list(model.get_signature_list())[0]))
    ins = model.create_input_buffers(0)
    outs = model.create_output_buffers(0)
    first = next(iter(details.values())) if isinstance(details, dict) else details[0]
    shape = first.get("shape") if isinstance(first, dict) else None
    x = _input(shape, np.float32)
    out_details = model.get_output_tensor_details(sig.get("key", list(model.get_signature_list())[0]))
    out_first = next(iter(out_details.values()))
    n_out = int(np.prod(out_first["shape"]))
    times = []
    for i in range(warmup + repeats):
        t = time.perf_counter()
        ins[0].write(x)
        model.run_by_index(0, ins, outs)
        y = outs[0].read(n_out, np.float32)
        if i >= warmup:
            times.append((time.perf_counter() - t) * 1e3)
    return times, np.asarray(y), {"accelerated": accelerated}


def _ort(path, providers, threads, warmup, repeats):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(path, sess_options=so, providers=providers)
    inp = sess.get_inputs()[0]
    dtype = np.float16 if "float16" in inp.type else np.float32
    feed = FEED if FEED is not None else {inp.name: _input([d if isinstance(d, int) else 1 for d in inp.shape], dtype)}
    times = []
    for i in range(warmup + repeats):
        t, c = time.perf_counter(), time.process_time()
        y = sess.run(None, feed)[0]
        if i >= warmup:
            times.append((time.perf_counter() - t) * 1e3)
            CPU_MS.append((time.process_time() - c) * 1e3)
    return times, y, {"providers": sess.get_providers(), "version": ort.__version__}


def ort_cpu(path, threads, warmup, repeats):
    return _ort(path, ["CPUExecutionProvider"], threads, warmup, repeats)


def ort_webgpu(path, threads, warmup, repeats):
    import onnxruntime as ort

    if "WebGpuExecutionProvider" not in ort.get_available_providers():
        raise RuntimeError(f"this onnxruntime has no WebGpuExecutionProvider ({ort.get_available_providers()})")
    times, y, info = _ort(path, ["WebGpuExecutionProvider"], threads, warmup, repeats)
    if info["providers"][0] != "WebGpuExecutionProvider":
        raise RuntimeError(f"the WebGPU provider was not used: {info['providers']}")
    return times, y, info


def webnn(path, threads, warmup, repeats, dtype="float32"):
    import webnn_gpu as wn

    ctx = wn.ml.create_context()
    options = dict(LOAD)
    if FEED is not None and options.get("known"):
        options["known_inputs"] = {k: FEED[k] for k in options.pop("known")}
    t = time.perf_counter()
    model = wn.load(path, ctx, dtype=dtype, **options)
    build_s = time.perf_counter() - t
    graph = model.graph
    ftype = np.float16 if dtype == "float16" else np.float32
    ins = {}
    for iname, idesc in graph.inputs.items():
        x = FEED[iname] if FEED is not None else _input(idesc["shape"], ftype)
        x = np.asarray(x).astype(ftype if np.asarray(x).dtype.kind == "f" else np.asarray(x).dtype)
        ins[iname] = (ctx.create_tensor({**idesc, "writable": True}), x)
    oname, odesc = next(iter(graph.outputs.items()))
    outs = {k: ctx.create_tensor({**d, "readable": True}) for k, d in graph.outputs.items()}
    times = []
    for i in range(warmup + repeats):
        t, c = time.perf_counter(), time.process_time()
        for tensor, x in ins.values():
            ctx.write_tensor(tensor, x)
        ctx.dispatch(graph, {k: tensor for k, (tensor, _) in ins.items()}, outs)
        y = ctx.read_tensor(outs[oname])
        if i >= warmup:
            times.append((time.perf_counter() - t) * 1e3)
            CPU_MS.append((time.process_time() - c) * 1e3)
    info = ctx.adapter_info if hasattr(ctx, "adapter_info") else {}
    return times, y, {"build_s": build_s, "kernels": graph.kernel_count, "dtype": dtype,
                      "adapter": str(info.get("description", "")) if isinstance(info, dict) else str(info)}


RUNTIMES = {"webnn": webnn, "litert-xnnpack": litert_xnnpack, "litert-webgpu": litert_webgpu, "ort-cpu": ort_cpu,
            "ort-webgpu": ort_webgpu}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runtime", choices=sorted(RUNTIMES))
    p.add_argument("model")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--repeats", type=int, default=30)
    p.add_argument("--dtype", default="float32", choices=["float32", "float16"], help="webnn only")
    p.add_argument("--input", help="a .npy file with the input (default: random in [0, 1])")
    p.add_argument("--feed", help="a .npz file with every input by name (ort-*, webnn)")
    p.add_argument("--dims", help="webnn on ONNX: the dims= of the load, as JSON")
    p.add_argument("--known", nargs="*", default=[], help="webnn on ONNX: --feed inputs fixed when loading")
    a = p.parse_args(argv)
    global INPUT, FEED
    if a.input:
        INPUT = np.load(a.input)
    if a.feed:
        FEED = dict(np.load(a.feed))
    if a.dims:
        LOAD["dims"] = json.loads(a.dims)
    if a.known:
        LOAD["known"] = list(a.known)
    try:
        kw = {"dtype": a.dtype} if a.runtime == "webnn" else {}
        times, y, info = RUNTIMES[a.runtime](a.model, a.threads, a.warmup, a.repeats, **kw)
    except Exception as exc:  # reported to the parent, which prints it as the reason
        print(json.dumps({"runtime": a.runtime, "error": f"{type(exc).__name__}: {exc}"}))
        return 2
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    step = max(1, y.size // 4096)  # 4096 values spread over the whole output, to compare runtimes
    cpu = {"cpu_ms": CPU_MS} if CPU_MS else {}
    print(json.dumps({"runtime": a.runtime, "ms": times, **cpu, "output": y[::step].tolist(),
                      "output_size": int(y.size), **info}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
