"""The Keras zoo exported to ONNX with tf2onnx, loaded with ``webnn.load``, against ONNX Runtime.

    .venv/bin/python benchmarks/onnx_keras.py                          # export (once), compare, time
    .venv/bin/python benchmarks/onnx_keras.py --models vit gru --rounds 10
    .venv/bin/python benchmarks/onnx_keras.py --dtype float16 --rounds 0   # float16 graphs, errors only
    .venv/bin/python benchmarks/onnx_keras.py --reexport              # convert again

What a user with an ONNX export does: ``benchmarks/keras_zoo.py`` builds the Keras models and
converts them to TFLite (``~/.cache/webnn-gpu/keras_zoo/<name>.tflite``; run it first for a
model that is not there); this script converts those files with tf2onnx in the TensorFlow
environment (``python -m tf2onnx.convert --tflite X.tflite --output X.onnx --opset 17``, by
default ``~/.cache/webnn-gpu/bench/venv-tf2onnx/bin/python``, or ``--tf-python``) into
``$XDG_CACHE_HOME/webnn-gpu/onnx_keras/<name>.onnx`` (never into the repository; nothing is
downloaded). Then for every model:

* ``webnn.load`` with the open batch dimension set to 1 (``dims``: each input's whole shape);
* **max error**: ONNX Runtime's CPU provider (1 thread) on one seeded input (floats: standard
  normal; integer ids: uniform in [0, 20)), the largest difference over the outputs relative
  to the output's largest magnitude (tolerances: 1e-3 in float32, 3e-2 with ``--dtype
  float16``, whose graph takes and gives float16 tensors);
* **latency**: medians over ``--rounds`` rounds of webnn-gpu's tensor path (write, dispatch,
  read every output) and ONNX Runtime with 2 threads, alternating inside each round; the ratio
  is webnn / ORT. For the models converted from their TFLite file, webnn-gpu on that file too
  (the same inputs, in the same rounds): ONNX / TFLite is what the ONNX route costs.

A model that does not convert or load is a row with the error's first line.
(Not named onnx.py: a file of that name in this folder would shadow the onnx package.)
"""

from __future__ import annotations

import argparse
import math
import os
import pathlib
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import keras_zoo  # noqa: E402 - the TFLite files and the TensorFlow environment

#: The models tried, in table order (names of ``keras_zoo.MODELS``).
MODELS = ["mobilenet_v2", "mobilenet_v3_small", "resnet50", "densenet121", "efficientnet_b0", "xception", "unet",
          "transformer", "vit", "conv1d", "lstm", "gru", "bilstm", "seq2seq", "convnext_block", "conv3d",
          "layers_2d", "layers_seq", "spectrogram"]

#: Models exported from the Keras model (``tf2onnx.convert.from_keras``, the batch left open)
#: instead of from their TFLite file, with the reason (tf2onnx 1.17, 2026-11-26).
FROM_KERAS = {
    "gru": "the TFLite route's Loop is refused by ONNX Runtime (a Gather of a scalar in its body)",
    "spectrogram": "the TFLite route fails: tf2onnx's RFFT2D takes only a ComplexAbs consumer",
}

#: max |webnn - ORT| / max |ORT| allowed per graph dtype.
TOLERANCE = keras_zoo.TOLERANCE


def cache_dir() -> pathlib.Path:
    """Where the exported models live: ``$XDG_CACHE_HOME/webnn-gpu/onnx_keras``."""
    return keras_zoo.cache_dir().parent / "onnx_keras"


def export(tf_python: str, name: str, out: pathlib.Path) -> str | None:
    """Convert ``keras_zoo/<name>.tflite`` to ``out/<name>.onnx`` with tf2onnx (opset 17), or
    for the models of :data:`FROM_KERAS` the Keras model itself; None, or the reason it did
    not convert (tf2onnx's last error line)."""
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / f".{name}.onnx.tmp"
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""}
    if name in FROM_KERAS:
        cmd = [tf_python, os.path.abspath(__file__), "--export-keras", str(tmp), "--models", name]
    else:
        src = keras_zoo.cache_dir() / f"{name}.tflite"
        if not src.exists():
            return f"no {src} (run benchmarks/keras_zoo.py --models {name} first)"
        cmd = [tf_python, "-m", "tf2onnx.convert", "--tflite", str(src), "--output", str(tmp), "--opset", "17"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode or not tmp.exists():
        lines = [ln for ln in proc.stderr.splitlines() if "Error" in ln or "error" in ln] or proc.stderr.splitlines()
        return "tf2onnx: " + (lines[-1][:300] if lines else f"exit status {proc.returncode}")
    tmp.rename(out / f"{name}.onnx")
    return None


def export_keras(path: pathlib.Path, name: str) -> None:
    """Write the Keras model ``name`` (``keras_zoo``'s seeded weights) to ``path`` with
    ``tf2onnx.convert.from_keras`` (opset 17; run in the TensorFlow environment)."""
    import tensorflow as tf
    import tf2onnx

    build, _ = keras_zoo._architectures()[name]
    model = keras_zoo.seeded_model(build)
    spec = [tf.TensorSpec(i.shape, i.dtype, name=f"input_{k}") for k, i in enumerate(model.inputs)]
    tf2onnx.convert.from_keras(model, input_signature=spec, opset=17, output_path=str(path))


#: Operators tf2onnx 1.17 leaves unconverted: Keras' exact GELU (``TFL_GELU`` from a TFLite
#: file, ``Erfc`` from a Keras model) and the magnitude of an STFT (``ComplexAbs`` of its
#: ``[2, ...]`` real and imaginary parts). ONNX Runtime refuses such a file. webnn-gpu loads it
#: with these ``custom_ops``; ONNX Runtime runs a copy with the same maths in ONNX operators
#: (:func:`standard_onnx`).
CUSTOM_OPS = {
    "TFL_GELU": lambda b, x, a: b.gelu(x[0]) if not a.get("approximate") else None,
    "Erfc": lambda b, x, a: b.sub(b.constant({"data_type": x[0].data_type, "shape": []}, _one(x[0].data_type)),
                                  b.erf(x[0])),
    "ComplexAbs": lambda b, x, a: b.reduce_l2(x[0], axes=[0], keep_dimensions=False),
}


def _one(data_type: str):
    import numpy as np

    return np.ones((), np.float16 if data_type == "float16" else np.float32)


def standard_onnx(path: pathlib.Path) -> bytes:
    """The model with :data:`CUSTOM_OPS`' operators written in ONNX operators (for ONNX Runtime):
    ``Erfc(x) = 1 - Erf(x)``, ``TFL_GELU(x) = 0.5 x (1 + Erf(x / sqrt(2)))``, ``ComplexAbs(x) =
    ReduceL2(x, axes=[0])``."""
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper

    m = onnx.load(str(path))
    nodes = []
    consts = {"onnx_keras_one": 1.0, "onnx_keras_half": 0.5, "onnx_keras_rsqrt2": 1 / math.sqrt(2)}
    for p in m.graph.node:
        if p.op_type not in ("ComplexAbs", "Erfc", "TFL_GELU"):  # a Constant has no input
            nodes.append(p)
            continue
        x, y, k = p.input[0], p.output[0], p.output[0] + "__std"
        if p.op_type == "ComplexAbs":
            nodes.append(helper.make_node("ReduceL2", [x], [y], axes=[0], keepdims=0))
        elif p.op_type == "Erfc":
            nodes += [helper.make_node("Erf", [x], [k]), helper.make_node("Sub", ["onnx_keras_one", k], [y])]
        elif p.op_type == "TFL_GELU" and not any(a.name == "approximate" and a.i for a in p.attribute):
            nodes += [helper.make_node("Mul", [x, "onnx_keras_rsqrt2"], [k + "0"]),
                      helper.make_node("Erf", [k + "0"], [k + "1"]),
                      helper.make_node("Add", [k + "1", "onnx_keras_one"], [k + "2"]),
                      helper.make_node("Mul", [x, k + "2"], [k + "3"]),
                      helper.make_node("Mul", [k + "3", "onnx_keras_half"], [y])]
        else:
            nodes.append(p)
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    m.graph.initializer.extend(numpy_helper.from_array(np.array(v, np.float32), k) for k, v in consts.items())
    return m.SerializeToString()


def seeded_inputs(session, seed: int = 0) -> dict:
    """One seeded array per ONNX Runtime input, open dimensions set to 1: integer ids in
    [0, 20), floats N(0, 1) (float16 inputs: those values rounded to float16)."""
    import numpy as np

    types = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(int32)": np.int32,
             "tensor(int64)": np.int64}
    rng = np.random.default_rng(seed)
    out = {}
    for i in session.get_inputs():
        shape = [d if isinstance(d, int) and d > 0 else 1 for d in i.shape]
        dtype = types[i.type]
        out[i.name] = (rng.integers(0, 20, shape) if np.dtype(dtype).kind == "i"
                       else rng.standard_normal(shape)).astype(dtype)
    return out


def error_line(exc: Exception) -> str:
    """The exception's first line, with the next one when the first ends in a colon (the first
    node a ``NotSupportedError`` lists), at most 300 characters."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()] or [""]
    text = " ".join(lines[:2]) if lines[0].endswith(":") else lines[0]
    return text[:300]


def webnn_engine(ctx, path: pathlib.Path, inputs: dict, dtype: str):
    """``keras_zoo.WebNN`` (write, dispatch, read every output) on the ONNX file, its open
    dimensions fixed by ``inputs``' shapes, GELU's leftovers as :data:`CUSTOM_OPS`."""
    return keras_zoo.WebNN(ctx, path, dtype, dims={k: list(v.shape) for k, v in inputs.items()},
                           custom_ops=CUSTOM_OPS)


def check_row(ctx, ref_rt, path: pathlib.Path, x: dict, dtype: str, row: dict):
    """Load ``path`` with webnn-gpu for inputs ``x`` and put into ``row`` its largest error
    against ONNX Runtime session ``ref_rt`` relative to each output's largest magnitude, whether
    that is within :data:`TOLERANCE` (a float16 ONNX graph, one with a float16 input or output:
    float16's, as ONNX Runtime computes in float16 too) and its kernel count; returns the engine,
    or None with ``row["error"]`` when it does not load or run."""
    import numpy as np

    half = any(v.type == "tensor(float16)" for v in [*ref_rt.get_inputs(), *ref_rt.get_outputs()])

    ref = dict(zip([o.name for o in ref_rt.get_outputs()], ref_rt.run(None, x)))
    try:
        engine = webnn_engine(ctx, path, x, dtype)
        got = engine.run(x)
    except Exception as exc:  # noqa: BLE001 - a row of the table, not a crash
        row["error"] = f"{type(exc).__name__}: {error_line(exc)}"
        return None
    row["max_error"] = max(float(np.abs(got[n].astype(np.float64) - r).max()) / max(float(np.abs(r).max()), 1e-30)
                           for n, r in ref.items())
    row["within_tolerance"] = row["max_error"] <= TOLERANCE["float16" if half else dtype]
    row["kernels"] = engine.model.graph.kernel_count
    return engine


def bench_model(ctx, name: str, path: pathlib.Path, args) -> dict:
    """One row: loads?, max error against ORT, medians of webnn-gpu and ORT 2 threads, kernels."""
    import zoo

    row: dict = {"model": name}
    try:
        ref_rt = ort_session(path, 1)
    except Exception as exc:  # noqa: BLE001 - no reference: a row
        row["error"] = f"ONNX Runtime does not load it: {str(exc).splitlines()[0][-300:]}"
        return row
    x = seeded_inputs(ref_rt)
    engine = check_row(ctx, ref_rt, path, x, args.dtype, row)
    if engine is None:
        return row
    if args.rounds:
        ort2 = ort_session(path, 2)
        runners = {"webnn": lambda: engine.run(x), "ort2": lambda: ort2.run(None, x)}
        twin = _tflite_twin(ctx, name, x, args.dtype) if name not in FROM_KERAS else None
        if twin is not None:
            runners["tflite"] = twin
        med = zoo.alternate(runners, args.warmup, args.rounds, args.settle)
        row.update(webnn_ms=med["webnn"], ort2_ms=med["ort2"], ratio=med["webnn"] / med["ort2"])
        if "tflite" in med:
            row.update(tflite_ms=med["tflite"], twin_ratio=med["webnn"] / med["tflite"])
    return row


def _tflite_twin(ctx, name: str, x: dict, dtype: str):
    """A runner of webnn-gpu on the TFLite file the ONNX model was converted from, fed the same
    arrays (inputs matched in order, when their shapes agree), or None."""
    src = keras_zoo.cache_dir() / f"{name}.tflite"
    if not src.exists():
        return None
    twin = keras_zoo.WebNN(ctx, src.read_bytes(), dtype)
    names = list(twin.t_in)
    arrays = list(x.values())
    if len(names) != len(arrays) or any(list(twin.model.inputs[n]["shape"]) != list(a.shape)
                                        for n, a in zip(names, arrays)):
        return None
    feeds = dict(zip(names, arrays))
    return lambda: twin.run(feeds)


def ort_session(path: pathlib.Path, threads: int):
    """An ONNX Runtime CPU session with ``threads`` intra-op threads."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    return ort.InferenceSession(standard_onnx(path), opts, providers=["CPUExecutionProvider"])


def knob_ab(ctx, name: str, path: pathlib.Path, old_env: dict, rounds: int) -> str:
    """``name`` built twice in this process, with ``old_env`` set and without it, timed in turn
    (write, dispatch, read; the order swapped every round): a line with the kernel counts, the
    medians (us) and the median and range of the per-round ratio new / old, and the outputs' gap."""
    from _common import ab_line

    x = seeded_inputs(ort_session(path, 1))
    return ab_line(name, lambda: webnn_engine(ctx, path, x, "float32"), x, old_env, rounds)


def format_table(rows: list[dict]) -> str:
    """The rows as a Markdown table, with the geometric mean of the ratios."""
    lines = ["| model | loads | max error / max abs ORT | webnn-gpu ms | ORT 2 threads ms | ratio | kernels | "
             "webnn-gpu on the TFLite file ms | ONNX / TFLite |", "| --- | --- " + "| ---: " * 7 + "|"]
    fmt = lambda v, f: "" if v is None else format(v, f)  # noqa: E731
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | no: {r['error']} | | | | | | | |")
            continue
        mark = "" if r["within_tolerance"] else " (above tolerance)"
        lines.append(f"| {r['model']} | yes | {r['max_error']:.1e}{mark} | {fmt(r.get('webnn_ms'), '.2f')} | "
                     f"{fmt(r.get('ort2_ms'), '.2f')} | {fmt(r.get('ratio'), '.1f')} | {r['kernels']} | "
                     f"{fmt(r.get('tflite_ms'), '.2f')} | {fmt(r.get('twin_ratio'), '.2f')} |")
    ratios = [r["ratio"] for r in rows if "ratio" in r]
    loaded = sum("error" not in r for r in rows)
    lines.append("")
    lines.append(f"{loaded} of {len(rows)} models load" + (
        f"; geometric mean of the ratios {math.exp(sum(map(math.log, ratios)) / len(ratios)):.1f}, "
        f"largest {max(ratios):.1f}." if ratios else "."))
    return "\n".join(lines)


def add_run_args(parser) -> None:
    """The options of a run that every ONNX benchmark script shares (this one and the PyTorch
    ones): ``--dtype``, ``--rounds``, ``--warmup``, ``--settle``, ``--json`` and ``--ab``."""
    parser.add_argument("--dtype", default="float32", choices=list(TOLERANCE), help="the webnn graph's float type")
    parser.add_argument("--rounds", type=int, default=20, help="timed rounds (0: errors only)")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--settle", type=float, default=0.1,
                        help="seconds of untimed runs of each side before its timed run (zoo.alternate): ONNX Runtime's "
                             "threads spin for 50-100 ms after a run, and a side timed in that window shares the cores "
                             "with them (default %(default)s; 0: the protocol of the tables before 2026-11-27)")
    parser.add_argument("--json", help="also write the rows to this file")
    parser.add_argument("--ab", metavar="VAR=VALUE", help="instead of the table: each model built with this "
                        "WEBNN_GPU_FORCE_* setting (old) and without it (new), timed in turn (--rounds rounds)")


def main(argv: list[str] | None = None) -> int:
    """Export the chosen Keras models with tf2onnx where not cached (in the TensorFlow
    environment ``--tf-python``), then load each ONNX file and print a table of its largest
    error against ONNX Runtime, its kernel count and (``--rounds`` > 0) its time beside ONNX
    Runtime's; with ``--ab VAR=VALUE``, time each model with and without that setting instead.
    Returns the exit status (0; a model that does not export is a row with its reason)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="*", default=MODELS, choices=MODELS, metavar="NAME")
    parser.add_argument("--reexport", action="store_true", help="convert the models again")
    parser.add_argument("--tf-python", default=str(keras_zoo.DEFAULT_TF_PYTHON),
                        help="Python of a TensorFlow environment with tf2onnx (default: %(default)s)")
    add_run_args(parser)
    parser.add_argument("--export-keras", metavar="PATH", help=argparse.SUPPRESS)  # the TF-side half
    args = parser.parse_args(argv)
    if args.export_keras:
        export_keras(pathlib.Path(args.export_keras), args.models[0])
        return 0

    out = cache_dir()
    failed = {}
    for name in args.models:
        if args.reexport or not (out / f"{name}.onnx").exists():
            print(f"{name}: tf2onnx ...", file=sys.stderr, flush=True)
            if (reason := export(args.tf_python, name, out)) is not None:
                failed[name] = reason

    os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
    import webnn_gpu as webnn
    import zoo  # the same alternating timing and row printing as the MediaPipe zoo

    ok = {n: out / f"{n}.onnx" for n in args.models if n not in failed}
    if args.ab:
        from _common import print_ab

        ctx = webnn.ml.create_context()
        print_ab(args.ab, ok.items(), lambda n, path, env: knob_ab(ctx, n, path, env, args.rounds))
        return 0
    rows = {r["model"]: r for r in zoo.run_rows(webnn.ml.create_context(), ok, bench_model, args)}
    rows.update({n: {"model": n, "error": reason} for n, reason in failed.items()})
    print(format_table([rows[n] for n in args.models]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
