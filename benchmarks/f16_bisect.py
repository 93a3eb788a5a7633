"""Find where a model's float16 graph departs from its float32 graph: per-operator errors.

    .venv/bin/python benchmarks/f16_bisect.py pose-landmark-full            # every operator tapped
    .venv/bin/python benchmarks/f16_bisect.py pose-landmark-full --bisect   # one tap at a time
    .venv/bin/python benchmarks/f16_bisect.py ~/model.tflite --taps 120 121 --top 0

The model (a name of ``webnn_gpu.models.MODELS`` or a ``.tflite`` path) is converted twice
by the TFLite loader, in float16 and in float32, through a builder that records every
operand an operator returns (the builder method, its ``label``, shape). Both graphs are
then built with some of those operands as extra outputs (the *taps*) and run on scikit-
image's astronaut photo resized to the model's input; each tap's float16 result is
compared with the float32 one: ``max |f16 - f32| / max |f32|`` (the test's measure), and
the number of non-finite float16 values (an overflow past 65504 shows up there).

* default: every operator's result is a tap at once. A graph output stops the fusions
  through it, so this shows the operators' float16 accuracy unfused: a jump in the relative
  error names the operator where the error arises.
* ``--bisect``: one tap at a time, the rest of the graph fused as in the model; a binary
  search, along the operators an output (``--output``, default the one with the largest
  error) is computed from, for the first whose result exceeds ``--threshold``.
* ``--local``: each operator's own error, in float16 ulps, against float64 NumPy of the
  operator on the GPU's float16 values of its inputs (the test suite's stand-in builder,
  ``tests/model/numpy_builder.py``); an operator more than 1 ulp off computes wrongly. When the default
  mode's errors stay small and this one's do not, a fusion is the cause (switch rules off
  with ``WEBNN_GPU_PASSES=-name`` to name it).

The float32 graph is the reference because it matches LiteRT within 1e-3 on every zoo
model (``tests/model/test_zoo.py``); its error is two orders below float16's.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
from typing import Any

import numpy as np

os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")

import webnn_gpu as webnn  # noqa: E402
from webnn_gpu import models  # noqa: E402
from webnn_gpu.tflite.convert import convert  # noqa: E402
from webnn_gpu.tflite.reader import read_model  # noqa: E402

_SOURCES = ("input", "constant")


class RecordingBuilder:
    """An ``MLGraphBuilder`` whose operator results are recorded in ``taps`` (in call order)."""

    def __init__(self, builder: Any) -> None:
        self._builder = builder
        self.taps: list[tuple[str, str, Any]] = []  # (method, label, operand)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._builder, name)
        if not callable(attr) or name.startswith("_") or name in _SOURCES or name == "build":
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            result = attr(*args, **kwargs)
            label = str(kwargs.get("label", ""))
            for operand in result if isinstance(result, (list, tuple)) else (result,):
                if hasattr(operand, "data_type") and hasattr(operand, "shape"):
                    self.taps.append((name, label, operand))
            return result

        return call


def convert_recorded(data: bytes, ctx: Any, dtype: str):
    """Convert ``data`` for ``ctx`` in ``dtype``; return (builder, converted, taps)."""
    builder = webnn.MLGraphBuilder(ctx)
    rec = RecordingBuilder(builder)
    converted = convert(read_model(data), rec, dtype)
    return builder, converted, rec.taps


def run_taps(data: bytes, ctx: Any, x: np.ndarray, taps: list[int] | None,
             dtypes: tuple[str, ...] = ("float16", "float32")) -> dict[str, Any]:
    """Outputs and taps (``None``: every float tap) of the graph in each of ``dtypes``:
    dtype -> (recorded operators, tapped indices, name -> result)."""
    result: dict[str, Any] = {}
    for dtype in dtypes:
        builder, converted, recorded = convert_recorded(data, ctx, dtype)
        picked = [i for i, (_, _, o) in enumerate(recorded) if o.data_type == dtype] if taps is None else taps
        outputs = dict(converted.outputs)
        for i in picked:
            outputs[f"tap{i}"] = recorded[i][2]
        graph = builder.build(outputs)
        ((input_name, _),) = converted.inputs.items()
        got = ctx.compute(graph, {input_name: x.astype(dtype)})
        result[dtype] = (recorded, picked, got)
    return result


def errors(result: dict[str, Any]) -> list[tuple[str, str, str, tuple, float, float, int]]:
    """(name, method, label, shape, max |f32|, relative error, non-finite count) per tap and output."""
    recorded16, picked, got16 = result["float16"]
    recorded32, _, got32 = result["float32"]
    assert [(m, tuple(o.shape)) for m, _, o in recorded16] == [(m, tuple(o.shape)) for m, _, o in recorded32], \
        "the float16 and float32 conversions differ"
    rows = []
    for name in got32:
        a16, a32 = got16[name].astype(np.float64), got32[name].astype(np.float64)
        if name.startswith("tap"):
            method, label, _ = recorded16[int(name[3:])]
        else:
            method, label = "output", name
        finite = np.isfinite(a16)
        scale = float(np.abs(a32).max()) if a32.size else 0.0
        err = float(np.abs(np.where(finite, a16, 0) - a32).max()) if a32.size else 0.0
        rows.append((name, method, label, tuple(a32.shape), scale, err / scale if scale else err,
                     int((~finite).sum())))
    return rows


def local_errors(data: bytes, ctx: Any, x: np.ndarray) -> list[tuple[str, str, tuple, float, float]]:
    """Each operator's own float16 error: its GPU result against float64 NumPy of the same
    operator on the GPU's float16 inputs, rounded to float16 once.

    Every operator's result is a tap of one float16 graph (so each runs as its own kernel,
    unfused). The reference is the test suite's float64 stand-in builder
    (``tests/model/numpy_builder.py``) fed the GPU's values of the operator's inputs.
    Returns (method, label, shape, max ulps, max |error| / max |reference|) per operator;
    the ulps are counted where ``|reference| >= max |reference| / 64`` (a result computed
    in float32 and rounded once is within 0.5 ulp there; below, cancellation in the sum
    can cost a few more).
    """
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests" / "model"))
    from numpy_builder import NumpyBuilder

    rec = RecordingBuilder(NumpyBuilder())
    converted = convert(read_model(data), rec, "float16")
    ((input_name, _),) = converted.inputs.items()
    gpu16 = run_taps(data, ctx, x, None, ("float16",))["float16"]
    recorded, picked, got = gpu16
    assert [(m, tuple(o.shape)) for m, _, o in recorded] == [(m, tuple(o.shape)) for m, _, o in rec.taps], \
        "the GPU and NumPy conversions differ"
    known = {id(rec.taps[i][2]): got[f"tap{i}"].astype(np.float64) for i in picked}
    inputs = {input_name: x.astype(np.float16).astype(np.float64)}
    rows = []
    for i in picked:
        memo: dict[int, np.ndarray] = {}

        def ev(o: Any) -> np.ndarray:
            if id(o) in known and o is not operand:
                return known[id(o)]
            if id(o) not in memo:
                memo[id(o)] = o.fn(ev, inputs)
            return memo[id(o)]

        method, label, operand = rec.taps[i]
        ref = np.asarray(ev(operand), np.float64).astype(np.float16).astype(np.float64)
        g = known[id(operand)]
        err = np.abs(g - ref)
        ulp = np.spacing(np.abs(ref).astype(np.float16)).astype(np.float64)
        scale = float(np.abs(ref).max()) if ref.size else 0.0
        big = np.abs(ref) >= scale / 64  # away from cancellation, where one rounding is within 0.5 ulp
        rows.append((method, label, tuple(ref.shape), float((err / ulp)[big].max()) if scale else 0.0,
                     float(err.max()) / scale if scale else 0.0))
    return rows


def _ancestors(operand: Any) -> set[int]:
    """The ids of the IR values ``operand`` is computed from, its own included."""
    seen: set[int] = set()
    todo = [operand._value]
    while todo:
        value = todo.pop()
        if value is None or value.id in seen:
            continue
        seen.add(value.id)
        if value.producer is not None:
            todo.extend(value.producer.inputs)
    return seen


def bisect(data: bytes, ctx: Any, x: np.ndarray, output: str | None, threshold: float) -> int:
    """Binary search, along the operators an output is computed from, for the first whose
    result (the only tap of the otherwise fused graph) is over ``threshold``."""
    _, converted, recorded = convert_recorded(data, ctx, "float16")
    outputs = {r[0]: r for r in errors(run_taps(data, ctx, x, []))}
    if output is None:
        output = max(outputs, key=lambda name: outputs[name][5])
    print(f"output {output!r}: rel {outputs[output][5]:.3e} non-finite {outputs[output][6]}")
    if outputs[output][5] <= threshold and not outputs[output][6]:
        print(f"within the threshold {threshold}")
        return 0
    ancestors = _ancestors(converted.outputs[output])
    chain = [i for i, (_, _, o) in enumerate(recorded) if o.data_type == "float16" and o._value.id in ancestors]

    def over(i: int) -> bool:
        row = next(r for r in errors(run_taps(data, ctx, x, [i])) if r[0] == f"tap{i}")
        print(f"  tap{i:<5} {row[1]:<22} {row[2][:40]:<40} {str(row[3]):<20} rel {row[5]:.3e} non-finite {row[6]}",
              flush=True)
        return row[5] > threshold or row[6] > 0

    lo, hi = 0, len(chain) - 1  # the output itself (chain[-1]) is over the threshold
    while lo < hi:
        mid = (lo + hi) // 2
        if over(chain[mid]):
            hi = mid
        else:
            lo = mid + 1
    method, label, _ = recorded[chain[hi]]
    print(f"first operator over {threshold} on the way to {output!r}: tap{chain[hi]} ({method} {label!r})")
    return 0


def _input(path: pathlib.Path) -> np.ndarray:
    from skimage import data as skdata
    from skimage.transform import resize

    model = read_model(path.read_bytes())
    shape = model.tensors[model.inputs[0]].shape
    image = skdata.astronaut().astype(np.float32) / 255.0
    return resize(image, tuple(shape[1:3]), order=1, anti_aliasing=True, preserve_range=True).astype(np.float32)[None]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model", help="a name of webnn_gpu.models.MODELS or a .tflite path")
    ap.add_argument("--taps", type=int, nargs="*", help="tap only these operator indices")
    ap.add_argument("--bisect", action="store_true", help="one tap at a time, binary search")
    ap.add_argument("--local", action="store_true",
                    help="each operator's own error (its GPU result against float64 NumPy on the same inputs)")
    ap.add_argument("--output", help="--bisect: the model output to follow (default: the one with the largest error)")
    ap.add_argument("--threshold", type=float, default=3e-2, help="relative error that counts as wrong")
    ap.add_argument("--top", type=int, default=25, help="print the taps with the largest errors (0: all, in order)")
    args = ap.parse_args(argv)

    path = pathlib.Path(args.model).expanduser()
    if not path.exists():
        path = models.fetch(args.model)
    data = path.read_bytes()
    ctx = webnn.ml.create_context()
    x = _input(path)

    if args.local:
        local = local_errors(data, ctx, x)
        order = sorted(range(len(local)), key=lambda i: -local[i][3])[:args.top] if args.top else range(len(local))
        print(f"{'op':<22} {'label':<40} {'shape':<20} {'max ulps':>9} {'rel err':>10}")
        for i in order:
            method, label, shape, ulps, rel = local[i]
            print(f"{method:<22} {label[:40]:<40} {str(shape):<20} {ulps:9.1f} {rel:10.3e}")
        return 0

    if args.bisect:
        return bisect(data, ctx, x, args.output, args.threshold)

    rows = errors(run_taps(data, ctx, x, args.taps))
    if args.top:
        rows = sorted(rows, key=lambda r: -r[5])[:args.top]
    print(f"{'tap':<8} {'op':<22} {'label':<40} {'shape':<20} {'max|f32|':>10} {'rel err':>10} non-finite")
    for name, method, label, shape, scale, rel, bad in rows:
        print(f"{name:<8} {method:<22} {label[:40]:<40} {str(shape):<20} {scale:10.3e} {rel:10.3e} {bad}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
