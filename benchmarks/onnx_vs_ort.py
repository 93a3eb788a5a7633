"""ONNX models on webnn-gpu against ONNX Runtime's CPU provider (1 and 2 threads).

    python benchmarks/onnx_vs_ort.py [--rounds 20] [--models magika,silero-vad,ppocr-cls]

For each model the three sides run in turn inside every round (webnn-gpu, ORT 1 thread,
ORT 2 threads), so a change of the machine's load hits all of them alike; the medians and
the ratio to ORT are printed. webnn-gpu runs the loaded graph with ``ctx.dispatch`` on
MLTensors written once and reads the output back (what an application does per call).

(Not named onnx.py: a file of that name in this folder would shadow the onnx package.)
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import webnn_gpu as webnn
from webnn_gpu import models

#: name -> (load options, inputs)
CASES = {
    "magika": ({"dims": {"unk__214": 1}},
               {"bytes": np.random.default_rng(0).integers(0, 257, (1, 2048)).astype(np.int32)}),
    "silero-vad": ({"dims": {"input": [1, 576], "state": [2, 1, 128]},
                    "known_inputs": {"sr": np.array(16000, np.int64)}},
                   {"input": np.random.default_rng(0).standard_normal((1, 576)).astype(np.float32) * 0.1,
                    "state": np.zeros((2, 1, 128), np.float32)}),
    "ppocr-cls": ({"dims": {"x": [1, 3, 48, 192]}},
                  {"x": np.random.default_rng(0).uniform(-1, 1, (1, 3, 48, 192)).astype(np.float32)}),
}


def _ort(path, threads):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


def bench(name: str, rounds: int, ctx) -> dict[str, float]:
    """Median seconds per call of each side for one model."""
    options, inputs = CASES[name]
    path = models.fetch(name)
    model = webnn.load(path, ctx, **options)
    tensors = {}
    for k, desc in model.inputs.items():
        t = ctx.create_tensor({**desc, "writable": True})
        ctx.write_tensor(t, inputs[k])
        tensors[k] = t
    outs = {k: ctx.create_tensor({**desc, "readable": True}) for k, desc in model.outputs.items()}
    first = next(iter(outs))

    def run_webnn():
        ctx.dispatch(model.graph, tensors, outs)
        ctx.read_tensor(outs[first])

    feed = dict(inputs)
    if "known_inputs" in options:
        feed.update(options["known_inputs"])
    sessions = {f"ort-{n}t": _ort(path, n) for n in (1, 2)}
    sides = {"webnn-gpu": run_webnn, **{k: (lambda s=s: s.run(None, feed)) for k, s in sessions.items()}}
    for fn in sides.values():  # warm up
        fn()
    times: dict[str, list[float]] = {k: [] for k in sides}
    for _ in range(rounds):
        for k, fn in sides.items():
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--models", default=",".join(CASES))
    args = p.parse_args()
    ctx = webnn.ml.create_context()
    print(f"adapter: {ctx.adapter_info.get('device')}; {args.rounds} alternating rounds; medians")
    for name in args.models.split(","):
        med = bench(name, args.rounds, ctx)
        w = med["webnn-gpu"]
        cols = "  ".join(f"{k} {v * 1e3:8.2f} ms" for k, v in med.items())
        print(f"{name:12s} {cols}  webnn/ort-1t {w / med['ort-1t']:.2f}  webnn/ort-2t {w / med['ort-2t']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
