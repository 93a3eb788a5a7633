"""Loaded TFLite models on the GPU (lavapipe in CI) against Google's LiteRT interpreter.

* float32: every output within 1e-3 absolute of LiteRT, on the scikit-image astronaut
  photo and four frames of the carphone clip, for both selfie segmentation models;
* float16 (the whole graph in float16): the person mask (> 0.5) agrees with LiteRT's on
  at least 99% of the pixels;
* one small model per operator family (synthetic_models.py), float32 and float16.

The reference is LiteRT with its builtin kernels on the model whose MediaPipe custom op
was rewritten as builtin TRANSPOSE_CONV (see litert_reference.py): it shares no code
with webnn-gpu.
"""

from __future__ import annotations

import numpy as np
import pytest

from litert_reference import run_litert
from synthetic_models import CASES

import webnn_gpu as webnn
from webnn_gpu import tflite as wtflite

SELFIE = ["selfie-segmentation", "selfie-segmentation-landscape"]
_OUTPUT = {"selfie-segmentation": "activation_10", "selfie-segmentation-landscape": "segment_back"}


@pytest.fixture(scope="module")
def loaded(ctx, model_paths):
    """model name -> dtype -> LoadedModel (built once per module)."""
    cache: dict[str, dict[str, wtflite.LoadedModel]] = {}

    def get(name: str, dtype: str) -> wtflite.LoadedModel:
        by_dtype = cache.setdefault(name, {})
        if dtype not in by_dtype:
            by_dtype[dtype] = webnn.load(model_paths[name], ctx, dtype=dtype)
        return by_dtype[dtype]

    return get


@pytest.mark.parametrize("name", SELFIE)
def test_selfie_float32_matches_litert(name, loaded, selfie_inputs, selfie_references):
    model = loaded(name, "float32")
    assert model.input_names == ["input_1"] and model.output_names == [_OUTPUT[name]]
    assert model.layout == "nhwc" and model.dtype == "float32"
    for image_id, x in selfie_inputs[name]:
        got = model.compute(x)[_OUTPUT[name]]
        ref = selfie_references[name][image_id]
        assert got.dtype == np.float32 and got.shape == ref.shape
        err = float(np.abs(got - ref).max())
        assert err <= 1e-3, f"{name} on {image_id}: max abs error {err:.2e} > 1e-3"


@pytest.mark.parametrize("name", SELFIE)
def test_selfie_float16_mask_agrees(name, loaded, selfie_inputs, selfie_references):
    model = loaded(name, "float16")
    assert model.inputs["input_1"]["data_type"] == "float16"
    assert model.outputs[_OUTPUT[name]]["data_type"] == "float16"
    for image_id, x in selfie_inputs[name]:
        got = model.compute(x.astype(np.float16))[_OUTPUT[name]]
        ref = selfie_references[name][image_id]
        assert got.dtype == np.float16
        agree = float(np.mean((got > 0.5) == (ref > 0.5)))
        assert agree >= 0.99, f"{name} on {image_id}: masks agree on {agree:.4%} of pixels (< 99%)"


def test_load_from_bytes_and_the_loaded_model(ctx, model_bytes):
    model = webnn.load(model_bytes["selfie-segmentation"], ctx)
    assert isinstance(model, wtflite.LoadedModel)
    assert model.inputs == {"input_1": {"data_type": "float32", "shape": [1, 256, 256, 3]}}
    assert model.outputs == {"activation_10": {"data_type": "float32", "shape": [1, 256, 256, 1]}}
    assert model.op_counts["Convolution2DTransposeBias"] == 1
    with pytest.raises(webnn.MLTypeError, match="unknown input names"):
        model.compute({"image": np.zeros((1, 256, 256, 3), np.float32)})


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("case_name", sorted(CASES))
def test_small_models_match_litert(case_name, dtype, ctx):
    data, inputs = CASES[case_name]()
    refs = run_litert(data, inputs)
    model = wtflite.load(data, ctx, dtype=dtype)
    np_dtype = np.float16 if dtype == "float16" else np.float32
    outs = model.compute({n: x.astype(np_dtype) for n, x in zip(model.input_names, inputs)})
    assert list(outs) == model.output_names
    for name, ref in zip(model.output_names, refs):
        got = outs[name]
        assert got.dtype == np_dtype and got.shape == ref.shape
        scale = max(1.0, float(np.abs(ref).max()))
        # float16: inputs and weights rounded to 11 bits, accumulations of up to ~30 terms.
        tol = 1e-3 if dtype == "float32" else 2e-2 * scale
        err = float(np.abs(got.astype(np.float64) - ref).max())
        assert err <= tol, f"{case_name} {dtype} output {name}: max abs error {err:.3e} > {tol:.1e}"
