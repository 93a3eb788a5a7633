"""ONNX models on webnn-gpu against ONNX Runtime's CPU provider (1 and 2 threads), and the
selfie model's ONNX twin against its TFLite load.

    python benchmarks/onnx_vs_ort.py [--rounds 20] [--models magika,silero-vad,silero-vad-ifless,ppocr-det,ppocr-cls,ppocr-rec,selfie-onnx]
    python benchmarks/onnx_vs_ort.py --webgpu [--webgpu-turns 3]   # also ORT WebGPU and webnn-gpu on Mesa 25

For each model the sides run in turn inside every round (webnn-gpu, ORT 1 thread, ORT 2
threads; for ``selfie-onnx`` also webnn-gpu on the TFLite file), so a change of the machine's
load hits all of them alike; the medians and the ratios are printed. webnn-gpu runs the loaded
graph with ``ctx.dispatch`` on MLTensors written once and reads the first output back (what an
application does per call).

``selfie-onnx`` is ``selfie_segmentation.tflite`` converted by tf2onnx (``benchmarks/peers.py``
sets it up in ``~/.cache/webnn-gpu/bench``: a TensorFlow environment from PyPI, once), fed the
same photo as the TFLite load; ``twin/tflite`` is its latency over the TFLite load's.

``--webgpu`` runs ONNX Runtime's WebGPU provider (``onnxruntime-webgpu``, Dawn) and webnn-gpu on
Mesa 25's lavapipe (``peers.mesa25()``, Debian backports) in child processes, one after the
other, ``--webgpu-turns`` times (``benchmarks/peer_runner.py``: warm-up runs, then timed runs,
input written and output read back in each); the medians are over all timed runs of a side, so
a change of the machine's load between the turns hits both sides alike. The CPU time of each run
(every thread of the child process, the driver's included) is printed too: on a machine shared
with other work it moves less than the wall time.

(Not named onnx.py: a file of that name in this folder would shadow the onnx package.)
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import tempfile

import numpy as np

import webnn_gpu as webnn
from webnn_gpu import models

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import peers  # noqa: E402


def _selfie_input():
    return {"input_1": np.load(peers.selfie_input()).astype(np.float32).reshape(1, 256, 256, 3)}


def _ocr_input(h, w):
    """A random normalized NCHW image; the shapes are ``examples/onnx_ocr.py``'s (a 96x640 page
    strip for the detector, a 48x192 crop for the classifier, a 48x320 line for the recogniser)."""
    return np.random.default_rng(0).uniform(-1, 1, (1, 3, h, w)).astype(np.float32)


#: name -> (model path getter, webnn load options, inputs getter, names of inputs known at load time)
CASES = {
    "magika": (lambda: models.fetch("magika"), {"dims": {"unk__214": 1}},
               lambda: {"bytes": np.random.default_rng(0).integers(0, 257, (1, 2048)).astype(np.int32)}, []),
    "silero-vad": (lambda: models.fetch("silero-vad"), {"dims": {"input": [1, 576], "state": [2, 1, 128]}},
                   lambda: {"input": np.random.default_rng(0).standard_normal((1, 576)).astype(np.float32) * 0.1,
                            "state": np.zeros((2, 1, 128), np.float32), "sr": np.array(16000, np.int64)}, ["sr"]),
    "silero-vad-ifless": (lambda: models.fetch("silero-vad-ifless"),
                          {"dims": {"input": [1, 576], "state": [2, 1, 128]}},
                          lambda: {"input": np.random.default_rng(0).standard_normal((1, 576)).astype(np.float32) * 0.1,
                                   "state": np.zeros((2, 1, 128), np.float32), "sr": np.array(16000, np.int64)},
                          ["sr"]),
    "ppocr-det": (lambda: models.fetch("ppocr-det"), {"dims": {"x": [1, 3, 96, 640]}},
                  lambda: {"x": _ocr_input(96, 640)}, []),
    "ppocr-cls": (lambda: models.fetch("ppocr-cls"), {"dims": {"x": [1, 3, 48, 192]}},
                  lambda: {"x": _ocr_input(48, 192)}, []),
    "ppocr-rec": (lambda: models.fetch("ppocr-rec"), {"dims": {"x": [1, 3, 48, 320]}},
                  lambda: {"x": _ocr_input(48, 320)}, []),
    "selfie-onnx": (peers.selfie_onnx, {}, _selfie_input, []),
}


def _ort(path, threads):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


def _webnn_side(ctx, path, options, inputs):
    """A callable running ``path`` on ``ctx`` (dispatch on tensors, first output read back)."""
    model = webnn.load(path, ctx, **options)
    tensors = {}
    for k, desc in model.inputs.items():
        t = ctx.create_tensor({**desc, "writable": True})
        ctx.write_tensor(t, inputs[k])
        tensors[k] = t
    outs = {k: ctx.create_tensor({**desc, "readable": True}) for k, desc in model.outputs.items()}
    first = next(iter(outs))

    def run():
        ctx.dispatch(model.graph, tensors, outs)
        return ctx.read_tensor(outs[first])

    return run


def bench(name: str, rounds: int, ctx, settle: float = 0.1) -> dict[str, float]:
    """Median seconds per call of each side for one model, the sides taking turns, each timed run
    after ``settle`` seconds of untimed runs of the same side (``zoo.alternate``)."""
    get_path, options, get_inputs, known = CASES[name]
    path, inputs = get_path(), get_inputs()
    load = dict(options)
    if known:
        load["known_inputs"] = {k: inputs[k] for k in known}
    sides = {"webnn-gpu": _webnn_side(ctx, path, load, inputs)}
    if name == "selfie-onnx":
        sides["webnn-tflite"] = _webnn_side(ctx, models.fetch("selfie-segmentation"), {}, inputs)
    sessions = {f"ort-{n}t": _ort(path, n) for n in (1, 2)}
    sides.update({k: (lambda s=s: s.run(None, inputs)) for k, s in sessions.items()})
    import zoo  # beside this script: the alternation every runtime comparison uses

    return {k: ms / 1e3 for k, ms in zoo.alternate(sides, 1, rounds, settle).items()}


def webgpu(name: str, repeats: int, turns: int = 1) -> dict[str, float | str]:
    """Median ms of ORT's WebGPU provider and of webnn-gpu on Mesa 25 (child processes, the two
    in turn ``turns`` times: the median over all their timed runs), or the reason."""
    errors: dict[str, str] = {}
    samples: dict[str, list[float]] = {}
    for _ in range(turns):
        r = _webgpu_turn(name, repeats)
        for k, v in r.items():
            if isinstance(v, str):
                errors[k] = v
            else:
                samples.setdefault(k, []).extend(v)
    out: dict[str, float | str] = dict(errors)
    for k, v in samples.items():
        if v and k.split(" ")[0] not in errors:
            out[k] = statistics.median(v)
    return out


def _webgpu_turn(name: str, repeats: int) -> dict[str, list[float] | str]:
    """One run of each side on Mesa 25: the timed runs' ms, or the reason."""
    get_path, options, get_inputs, known = CASES[name]
    path, inputs = get_path(), get_inputs()
    out: dict[str, list[float] | str] = {}
    try:
        env = peers.mesa25()
    except peers.PeerUnavailable as exc:
        return {"ort-webgpu": f"Mesa 25 unavailable: {exc}"}
    with tempfile.TemporaryDirectory() as tmp:
        feed = pathlib.Path(tmp) / "feed.npz"
        np.savez(feed, **inputs)
        common = dict(warmup=3, repeats=repeats, env=env)
        try:
            r = peers.run_peer("ort-webgpu", path, python=peers.venv_python("ort-webgpu"),
                               extra=["--feed", str(feed)], **common)
            out["ort-webgpu"] = list(r["ms"])
            out["ort-webgpu cpu"] = list(r.get("cpu_ms", []))
        except peers.PeerUnavailable as exc:
            out["ort-webgpu"] = str(exc).splitlines()[0][:160]
        extra = ["--feed", str(feed)]
        if options.get("dims"):
            extra += ["--dims", json.dumps(options["dims"])]
        if known:
            extra += ["--known", *known]
        try:
            r = peers.run_peer("webnn", path, extra=extra, **common)
            out["webnn-gpu"] = list(r["ms"])
            out["webnn-gpu cpu"] = list(r.get("cpu_ms", []))
        except peers.PeerUnavailable as exc:
            out["webnn-gpu"] = str(exc).splitlines()[0][:160]
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--settle", type=float, default=0.1,
                   help="seconds of untimed runs of each side before its timed run: ONNX Runtime's threads spin for "
                        "50-100 ms after a run (default %(default)s; 0: each timed right after the side before it)")
    p.add_argument("--models", default=",".join(CASES))
    p.add_argument("--webgpu", action="store_true", help="also ORT's WebGPU provider and webnn-gpu on Mesa 25")
    p.add_argument("--webgpu-turns", type=int, default=3,
                   help="child processes of each side on Mesa 25, in turn (default 3; medians over all runs)")
    args = p.parse_args()
    ctx = webnn.ml.create_context()
    print(f"adapter: {ctx.adapter_info.get('device')}; {args.rounds} alternating rounds; medians")
    for name in args.models.split(","):
        med = bench(name, args.rounds, ctx, args.settle)
        w = med["webnn-gpu"]
        cols = "  ".join(f"{k} {v * 1e3:8.2f} ms" for k, v in med.items())
        twin = f"  twin/tflite {w / med['webnn-tflite']:.2f}" if "webnn-tflite" in med else ""
        print(f"{name:12s} {cols}  webnn/ort-1t {w / med['ort-1t']:.2f}  webnn/ort-2t {w / med['ort-2t']:.2f}{twin}",
              flush=True)
        if args.webgpu:
            r = webgpu(name, max(args.rounds, 10), args.webgpu_turns)
            cols = "  ".join(f"{k} {v:8.2f} ms" if isinstance(v, float) else f"{k}: {v}" for k, v in r.items())
            ratio = ""
            if all(isinstance(r.get(k), float) for k in ("ort-webgpu", "webnn-gpu")):
                ratio = f"  webnn/ort-webgpu {r['webnn-gpu'] / r['ort-webgpu']:.2f}"
            if all(isinstance(r.get(k), float) for k in ("ort-webgpu cpu", "webnn-gpu cpu")):
                ratio += f" (CPU time {r['webnn-gpu cpu'] / r['ort-webgpu cpu']:.2f})"
            print(f"{'':12s} Mesa 25: {cols}{ratio}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
