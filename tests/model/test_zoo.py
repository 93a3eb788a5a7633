"""Every model of the zoo (``webnn_gpu.models.ZOO``: the 13 ``.tflite`` files of
``mediapipe==0.10.14`` that LiteRT runs) loads and matches LiteRT on a real photo.

The input is scikit-image's astronaut photo resized to the model's input (RGB in
[0, 1]); the reference is LiteRT with its builtin kernels (MediaPipe's transposed
convolution rewritten as the builtin one, see litert_reference.py). Every output must
be within ``tolerance * max|reference|``: 1e-3 in float32, 3e-2 in float16 (the whole
graph in float16). In float16 the reference runs on the photo rounded to float16, the
input the float16 graph computes on.

One output is beyond float16's reach: pose_landmark_full's segmentation logits
``Identity_2`` (max magnitude 1.7e3). Rounding the photo alone to float16 moves it by 5.7%
of its magnitude in the float32 graph, and rounding any one of 20 of the model's
intermediate tensors alone (its first convolution's: 30%) by more than 3%; exactly rounded
float16 operators (float64 NumPy, each operator's result rounded to float16) are 45% off,
the engine 55% (``benchmarks/f16_bisect.py --local``: each of its operators is within 1
ulp of float64 on its own inputs, away from cancellation). So an output beyond the float16
tolerance is checked against float16 itself: the test computes it with
:class:`Float16Builder`; if that meets the tolerance, the engine must too; if not, the
engine's error at the 0.5, 0.9, 0.99 and 0.999 quantiles must be within the tolerance or
twice that of exactly rounded float16 operators.

Each operator of a float16 graph run alone is within 1 ulp of float64 NumPy on its own
float16 inputs (iris_landmark in ``make test``, the other models but hand_recrop ``soak``).

Both dtypes of the whole models are marked ``slow`` (``make test`` runs them). The first builds of the 13
float16 graphs with Mesa's shader cache empty (``MESA_SHADER_CACHE_DISABLE=true``, one
process) took 2 minutes of CPU time (2026-11-25, shared 2-core machine: 149 s and 262 s
of wall time at load averages 4 and 5.5).
"""

from __future__ import annotations

import importlib.util
import pathlib

import numpy as np
import pytest

from conftest import _resize
from litert_reference import replace_transpose_conv_bias
from numpy_builder import NumpyBuilder

import webnn_gpu as webnn
from webnn_gpu import models
from webnn_gpu.errors import NotSupportedError

TOLERANCE = {"float32": 1e-3, "float16": 3e-2}

#: Error quantiles compared with float16's own when an output is beyond float16's reach.
FLOAT16_QUANTILES = (0.5, 0.9, 0.99, 0.999)
#: How far the engine's error quantiles may exceed those of exactly rounded float16 operators
#: (pose_landmark_full's ``Identity_2``, 2026-11-25: 1.2x at 0.999, below it elsewhere).
FLOAT16_FACTOR = 2.0


@pytest.fixture(scope="module")
def zoo_paths():
    return models.fetch_many(models.ZOO)  # one download of the wheel at most


def _reference(path, x: np.ndarray) -> dict[str, np.ndarray]:
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    data, _ = replace_transpose_conv_bias(path.read_bytes())
    it = Interpreter(model_content=data, experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    return {d["name"]: it.get_tensor(d["index"]).copy() for d in it.get_output_details()}


class Float16Builder(NumpyBuilder):
    """The float64 NumPy builder with every float16 operator's result rounded to float16 once:
    a float16 graph as the WebNN spec defines it, computed exactly up to that rounding."""

    def _op(self, op_name, shape, data_type, fn, **record):
        if data_type == "float16" and op_name not in ("input", "constant"):
            exact = fn

            def fn(ev, inp):
                return np.asarray(exact(ev, inp), np.float64).astype(np.float16).astype(np.float64)

        return super()._op(op_name, shape, data_type, fn, **record)


def _float16_own_error(path, input_name: str, x: np.ndarray, out_name: str, ref: np.ndarray) -> np.ndarray:
    """|error| per element of ``out_name`` computed by :class:`Float16Builder` on ``x``."""
    from webnn_gpu.tflite.convert import convert
    from webnn_gpu.tflite.reader import read_model

    builder = Float16Builder()
    converted = convert(read_model(path.read_bytes()), builder, "float16")
    own = builder.build({out_name: converted.outputs[out_name]}).compute({input_name: x.astype(np.float64)})
    return np.abs(own[out_name] - ref)


def _check(name: str, dtype: str, ctx, zoo_paths, astronaut) -> None:
    path = zoo_paths[name]
    model = webnn.load(path, ctx, dtype=dtype)
    ((input_name, desc),) = model.inputs.items()
    x = _resize(astronaut, tuple(desc["shape"][1:3]))[None]
    if dtype == "float16":
        x = x.astype(np.float16).astype(np.float32)  # the input a float16 graph computes on
    refs = _reference(path, x)
    got = model.compute({input_name: x})
    assert sorted(got) == sorted(refs), f"{name}: outputs {sorted(got)}, LiteRT has {sorted(refs)}"
    for out_name, ref in refs.items():
        g = got[out_name]
        assert g.shape == ref.shape and g.dtype == np.dtype(dtype)
        scale = float(np.abs(ref).max())
        err = np.abs(g.astype(np.float64) - ref)
        tolerance = TOLERANCE[dtype] * scale
        if err.max() <= tolerance:
            continue
        message = f"{name} {dtype} output {out_name!r}: max error {err.max():.3e} > {TOLERANCE[dtype]} x {scale:.3e}"
        assert dtype == "float16", message
        # Beyond the tolerance in float16: is the output beyond float16's reach?
        try:
            own = _float16_own_error(path, input_name, x, out_name, ref)
        except NotSupportedError as exc:
            pytest.fail(f"{message} (the float64 stand-in builder cannot build the model to tell whether float16 "
                        f"reaches it: {exc})")
        assert own.max() > tolerance, (
            f"{message}, where exactly rounded float16 operators reach {own.max():.3e}")
        for q in FLOAT16_QUANTILES:
            mine, limit = np.quantile(err, q), np.quantile(own, q)
            assert mine <= max(FLOAT16_FACTOR * limit, tolerance), (
                f"{message}; exactly rounded float16 operators miss it too (max error {own.max():.3e}), but "
                f"the error's {q} quantile {mine:.3e} > {FLOAT16_FACTOR} x theirs {limit:.3e}")


def test_zoo_lists_every_model_litert_runs():
    assert len(models.ZOO) == 13
    assert all(models.MODELS[n].requirement == "mediapipe==0.10.14" for n in models.ZOO)


@pytest.mark.slow
@pytest.mark.parametrize("name", models.ZOO)
def test_zoo_model_float32_matches_litert(name, ctx, zoo_paths, astronaut):
    _check(name, "float32", ctx, zoo_paths, astronaut)


@pytest.mark.slow
@pytest.mark.parametrize("name", models.ZOO)
def test_zoo_model_float16_matches_litert(name, ctx, zoo_paths, astronaut):
    _check(name, "float16", ctx, zoo_paths, astronaut)


def test_float16_builder_rounds_each_operator_once():
    """The float16 stand-in rounds an operator's exact result once (no GPU): 1 + 2^-11 + 2^-11
    is 1 + 2^-10 computed as one operator, but 1 when the first sum is rounded (a tie to even)."""
    b = Float16Builder()
    x = b.input("x", {"data_type": "float16", "shape": [1]})
    half_ulp = b.constant({"data_type": "float16", "shape": [1]}, np.array([2.0 ** -11], np.float16))
    twice = b.add(b.add(x, half_ulp), half_ulp)
    both = b.add(x, b.add(half_ulp, half_ulp))
    got = b.build({"twice": twice, "both": both}).compute({"x": np.array([1.0])})
    assert got["twice"][0] == 1.0 and got["both"][0] == 1.0 + 2.0 ** -10


def _f16_bisect():
    """``benchmarks/f16_bisect.py``, loaded by path (benchmarks is no package)."""
    path = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "f16_bisect.py"
    spec = importlib.util.spec_from_file_location("_f16_bisect", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", [
    pytest.param(n, marks=pytest.mark.slow if n == "iris-landmark" else pytest.mark.soak)
    for n in models.ZOO if n != "hand-recrop"  # the float64 stand-in builder has no slice
])
def test_zoo_model_float16_operators_within_one_ulp(name, ctx, zoo_paths, astronaut):
    """Every operator of the model's float16 graph, run as its own kernel (each result a graph
    output), is within 1 ulp of float64 NumPy of the operator on the GPU's float16 inputs,
    rounded to float16 once (``f16_bisect.py --local``; counted where a value is at least
    1/64 of its tensor's largest)."""
    from webnn_gpu.tflite.reader import read_model

    path = zoo_paths[name]
    data = path.read_bytes()
    info = read_model(data)
    x = _resize(astronaut, tuple(info.tensors[info.inputs[0]].shape[1:3]))[None]
    rows = _f16_bisect().local_errors(data, ctx, x)
    assert len(rows) > 20
    worst = max(rows, key=lambda r: r[3])
    assert worst[3] <= 1.0, f"{name}: {worst[0]} {worst[1]!r} {worst[2]} is {worst[3]:.0f} float16 ulps off"
