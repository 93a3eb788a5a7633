"""The TFLite reader and the op mapping, checked without a GPU.

* pure helpers (SAME padding, MediaPipe's custom options and padding) against their
  definitions;
* errors: not a model, malformed, unsupported op / option / fused activation;
* the emitted builder calls for the real selfie models;
* end to end through ``numpy_builder.NumpyBuilder`` (a float64 stand-in for the WebNN
  builder) against LiteRT, on real images and on one small model per op family: this
  pins the mapping itself, independently of the GPU kernels.
"""

from __future__ import annotations

import struct

import numpy as np
import pytest

from litert_reference import replace_transpose_conv_bias, run_litert
from numpy_builder import NumpyBuilder
from synthetic_models import CASES, RELU, SAME, VALID
from tflite_maker import ModelMaker

from webnn_gpu import tflite as wtflite
from webnn_gpu.errors import DataError, MLTypeError, NotSupportedError
from webnn_gpu.tflite import ops
from webnn_gpu.tflite.convert import convert
from webnn_gpu.tflite.reader import read_model

#: Operators of MediaPipe's selfie segmentation models (general / landscape), counted
#: from the files shipped in mediapipe 0.10.14.
SELFIE_OP_COUNTS = {
    "selfie-segmentation": {
        "DEQUANTIZE": 110, "CONV_2D": 43, "RELU": 22, "ADD": 14, "DEPTHWISE_CONV_2D": 11,
        "HARD_SWISH": 11, "LOGISTIC": 11, "AVERAGE_POOL_2D": 10, "MUL": 10, "RESIZE_BILINEAR": 3,
        "Convolution2DTransposeBias": 1,
    },
    "selfie-segmentation-landscape": {
        "DEQUANTIZE": 110, "CONV_2D": 43, "RELU": 22, "ADD": 14, "DEPTHWISE_CONV_2D": 11,
        "HARD_SWISH": 11, "LOGISTIC": 11, "MEAN": 10, "MUL": 10, "RESIZE_BILINEAR": 3,
        "Convolution2DTransposeBias": 1,
    },
}


def _convert(model: bytes, dtype: str = "float32"):
    b = NumpyBuilder()
    converted = convert(read_model(model), b, dtype)
    return b, converted


def _run(model: bytes, inputs: list[np.ndarray], dtype: str = "float32") -> list[np.ndarray]:
    b, converted = _convert(model, dtype)
    outs = b.build(converted.outputs).compute(dict(zip(converted.inputs, inputs)))
    return list(outs.values())


# ----------------------------------------------------------------------------- helpers


@pytest.mark.parametrize("in_size", [1, 2, 5, 8, 9, 16, 17])
@pytest.mark.parametrize("kernel", [1, 2, 3, 5])
@pytest.mark.parametrize("stride", [1, 2, 3])
@pytest.mark.parametrize("dilation", [1, 2])
def test_same_padding_matches_the_definition(in_size, kernel, stride, dilation):
    begin, end = ops.same_padding(in_size, kernel, stride, dilation)
    effective = (kernel - 1) * dilation + 1
    out = (in_size + begin + end - effective) // stride + 1
    assert out == -(-in_size // stride)  # SAME: ceil(in / stride) outputs
    assert 0 <= end - begin <= 1  # the odd pixel goes to the end
    # ... with the least padding that gives that many outputs.
    assert begin + end == max((out - 1) * stride + effective - in_size, 0)


def test_conv_padding_order_and_valid():
    assert ops.conv_padding(ops.PADDING_VALID, (7, 9), (3, 3), (2, 2)) == [0, 0, 0, 0]
    # H: in 7, k 3, s 2 -> out 4, total 2; W: in 8, k 3, s 2 -> out 4, total 1 (at the end).
    assert ops.conv_padding(ops.PADDING_SAME, (7, 8), (3, 3), (2, 2)) == [1, 1, 0, 1]
    with pytest.raises(NotSupportedError, match="padding value 7"):
        ops.conv_padding(7, (7, 8), (3, 3), (1, 1))


def test_decode_transpose_conv_bias_options():
    # The bytes stored in the selfie segmentation models.
    assert ops.decode_transpose_conv_bias_options(bytes.fromhex("010000000200000002000000")) == ("SAME", 2, 2)
    params = ops.decode_transpose_conv_bias_options(struct.pack("<iii", 2, 3, 4))
    assert (params.padding, params.stride_h, params.stride_w) == ("VALID", 4, 3)
    assert ops.decode_transpose_conv_bias_options(struct.pack("<iiii", 1, 1, 1, 0)) == ("SAME", 1, 1)
    with pytest.raises(NotSupportedError, match="padding 0"):
        ops.decode_transpose_conv_bias_options(struct.pack("<iii", 0, 2, 2))
    with pytest.raises(NotSupportedError, match="fused activation 1"):
        ops.decode_transpose_conv_bias_options(struct.pack("<iiii", 1, 2, 2, 1))
    with pytest.raises(DataError, match="got 8 bytes"):
        ops.decode_transpose_conv_bias_options(struct.pack("<ii", 1, 2))
    with pytest.raises(DataError, match="got none"):
        ops.decode_transpose_conv_bias_options(None)
    with pytest.raises(DataError, match="strides must be >= 1"):
        ops.decode_transpose_conv_bias_options(struct.pack("<iii", 1, 0, 2))


@pytest.mark.parametrize("in_size", [1, 2, 5, 6, 128])
@pytest.mark.parametrize("kernel", [1, 2, 3, 4])
@pytest.mark.parametrize("stride", [1, 2, 3])
def test_transpose_conv_bias_padding_reproduces_mediapipes_output_size(in_size, kernel, stride):
    before, after = ops.transpose_conv_bias_padding(in_size, kernel, stride, "SAME")
    total = max(0, kernel - (in_size - 1) % stride - 1)  # transpose_conv_bias.cc, Prepare()
    assert (before, after) == (total // 2, total - total // 2)
    webnn_out = (in_size - 1) * stride + kernel - before - after  # WebNN convTranspose2d
    assert webnn_out == stride * (in_size - 1) + kernel - total
    assert ops.transpose_conv_bias_padding(in_size, kernel, stride, "VALID") == (0, 0)


# ----------------------------------------------------------------------------- reading


def test_reader_on_the_selfie_models(model_bytes):
    for name, data in model_bytes.items():
        model = read_model(data)
        assert model.version == 3 and model.subgraph_count == 1
        assert model.op_counts() == SELFIE_OP_COUNTS[name]
        (inp,) = [model.tensors[i] for i in model.inputs]
        (out,) = [model.tensors[i] for i in model.outputs]
        h, w = (256, 256) if name == "selfie-segmentation" else (144, 256)
        assert (inp.name, inp.shape, inp.type_name) == ("input_1", (1, h, w, 3), "FLOAT32")
        assert out.shape == (1, h, w, 1) and out.type_name == "FLOAT32"
        fp16 = [t for t in model.tensors if t.type_name == "FLOAT16"]
        assert len(fp16) == 110 and all(t.data is not None and t.data.dtype == np.float16 for t in fp16)
        custom = [op for op in model.operators if op.opcode == "CUSTOM"]
        assert [op.name for op in custom] == ["Convolution2DTransposeBias"]
        assert custom[0].custom_options == bytes.fromhex("010000000200000002000000")


def test_not_a_model_is_a_data_error():
    with pytest.raises(DataError, match="not a TFLite model"):
        read_model(b"\x00" * 64)
    with pytest.raises(DataError, match="not a TFLite model"):
        read_model(b"TFL3")


def test_a_missing_tflite_package_is_a_module_not_found_error():
    """Without the ``tflite`` package, loading a model says which package to install (the
    converter's tables import without it)."""
    import subprocess
    import sys

    script = ("import sys\n"
              "sys.modules['tflite'] = None\n"
              "from webnn_gpu import tflite\n"
              "try:\n"
              "    tflite.read_model(b'TFL3' + bytes(60))\n"
              "except ModuleNotFoundError as e:\n"
              "    print('ModuleNotFoundError', e)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.startswith("ModuleNotFoundError") and "webnn-gpu[model]" in out.stdout


def test_truncated_model_is_a_data_error(model_bytes):
    data = model_bytes["selfie-segmentation"]
    with pytest.raises(DataError, match="tflite.load"):
        read_model(data[:5000])


def test_load_rejects_bad_arguments(model_bytes):
    with pytest.raises(MLTypeError, match="dtype"):
        wtflite.load(model_bytes["selfie-segmentation"], None, dtype="int8")
    with pytest.raises(MLTypeError, match="path .* or bytes"):
        wtflite.load(12345, None)  # type: ignore[arg-type]
    with pytest.raises(FileNotFoundError):
        wtflite.load("/nonexistent/model.tflite", None)


# ----------------------------------------------------------------------------- errors


def _single_op_model(opname: str, options: dict | None = None, custom: bytes | None = None) -> bytes:
    m = ModelMaker()
    x = m.input([1, 4, 4, 2])
    a = m.op("RELU", [x], [1, 4, 4, 2])
    y = m.op(opname, [a, m.const(np.ones((1, 4, 4, 2), np.float32))], [1, 4, 4, 2], options=options,
             custom_options=custom)
    m.output(y)
    return m.finish()


def test_unsupported_builtin_op_names_op_code_and_index():
    model = _single_op_model("SVDF")
    with pytest.raises(NotSupportedError, match=r"1 operator\(s\) of the model are not supported \(SVDF\): "
                                                r"operator #1 SVDF \(op code SVDF\)"):
        _convert(model)


def test_resource_variables_are_refused_naming_the_stateful_layer():
    """Keras' stateful=True writes VAR_HANDLE / READ_VARIABLE / ASSIGN_VARIABLE (and CALL_ONCE to
    set them up): state kept between invocations, which a webnn-gpu graph does not keep."""
    m = ModelMaker()
    x = m.input([1, 4])
    var = m.op("VAR_HANDLE", [], [])
    state = m.op("READ_VARIABLE", [var], [1, 4])
    y = m.op("ADD", [x, state], [1, 4])
    m.op("ASSIGN_VARIABLE", [var, y], [])
    m.output(y)
    with pytest.raises(NotSupportedError, match=r"\(ASSIGN_VARIABLE, READ_VARIABLE, VAR_HANDLE\): operator #0 VAR_HANDLE "
                                                r".*; resource variables: a stateful layer \(Keras' stateful=True\) "
                                                r"keeps its state between invocations, a webnn-gpu graph keeps none "
                                                r"\(ASSIGN_VARIABLE, READ_VARIABLE, VAR_HANDLE\)"):
        _convert(m.finish())


def test_unsupported_custom_op_names_the_custom_code():
    model = _single_op_model("MyFancyOp", custom=b"\x00")
    with pytest.raises(NotSupportedError, match=r"operator #1 MyFancyOp \(custom op 'MyFancyOp'\)"):
        _convert(model)


@pytest.mark.parametrize("activation", [4, 5])  # TANH, SIGN_BIT
def test_ambiguous_fused_activations_are_refused(activation):
    model = _single_op_model("ADD", options=dict(fusedActivationFunction=activation))
    with pytest.raises(NotSupportedError, match=r"operator #1 ADD: fused activation (TANH|SIGN_BIT)"):
        _convert(model)


def test_run_time_dequantize_and_dynamic_inputs_are_refused():
    m = ModelMaker()
    x = m.input([1, 4], dtype=np.float16)
    m.output(m.op("DEQUANTIZE", [x], [1, 4]))
    with pytest.raises(NotSupportedError, match=r"operator #0 DEQUANTIZE: a run-time"):
        _convert(m.finish())


def test_declared_shape_mismatch_is_a_data_error():
    # A model whose declared output shape does not follow from the op: never build it.
    m = ModelMaker()
    x = m.input([1, 8, 8, 2])
    y = m.op("AVERAGE_POOL_2D", [x], [1, 3, 3, 2],
             options=dict(padding=VALID, strideH=2, strideW=2, filterHeight=2, filterWidth=2))
    m.output(y)
    with pytest.raises(DataError, match=r"declares output .* of shape \[1, 3, 3, 2\], .* give \[1, 4, 4, 2\]"):
        _convert(m.finish())


def test_builder_errors_name_the_tflite_operator():
    class Refusing(NumpyBuilder):
        def hard_swish(self, x, *, label=""):
            raise MLTypeError("hard_swish: input must be float")

    m = ModelMaker()
    x = m.input([1, 2, 2, 1])
    m.output(m.op("HARD_SWISH", [m.op("RELU", [x], [1, 2, 2, 1])], [1, 2, 2, 1]))
    with pytest.raises(MLTypeError, match=r"operator #1 HARD_SWISH \(label 'HARD_SWISH#1'\): hard_swish: input"):
        convert(read_model(m.finish()), Refusing(), "float32")


def test_optional_bias_omitted():
    rng = np.random.default_rng(0)
    m = ModelMaker()
    x = m.input([1, 5, 5, 2])
    w = rng.standard_normal((3, 3, 3, 2)).astype(np.float32)
    m.output(m.op("CONV_2D", [x, m.const(w), -1], [1, 5, 5, 3],
                  options=dict(padding=SAME, strideH=1, strideW=1, dilationHFactor=1, dilationWFactor=1)))
    b, converted = _convert(m.finish())
    (conv,) = [kw for name, kw in b.calls if name == "conv2d"]
    assert conv["bias"] is False
    xv = rng.standard_normal((1, 5, 5, 2)).astype(np.float32)
    (got,) = b.build(converted.outputs).compute({"input_0": xv}).values()
    # float64 reference by definition: zero-padded correlation, OHWI filter.
    xp = np.pad(xv.astype(np.float64), ((0, 0), (1, 1), (1, 1), (0, 0)))
    ref = np.zeros((1, 5, 5, 3))
    for i in range(5):
        for j in range(5):
            ref[0, i, j] = np.einsum("hwc,ohwc->o", xp[0, i:i + 3, j:j + 3], w.astype(np.float64))
    np.testing.assert_allclose(got, ref, atol=1e-9)


# ----------------------------------------------------------------------------- the selfie models


def test_selfie_model_builder_calls(model_bytes):
    b, converted = _convert(model_bytes["selfie-segmentation"])
    assert converted.inputs == {"input_1": {"data_type": "float32", "shape": [1, 256, 256, 3]}}
    assert list(converted.outputs) == ["activation_10"]
    names = [name for name, _ in b.calls]
    assert names.count("conv2d") == 43 + 11 and names.count("conv_transpose2d") == 1
    assert names.count("average_pool2d") == 10 and names.count("resample2d") == 3
    convs = [kw for name, kw in b.calls if name == "conv2d"]
    assert all(kw["input_layout"] == "nhwc" for kw in convs)
    first = convs[0]  # 3x3 stride-2 SAME conv on 256x256: pad 0 before, 1 after
    assert (first["filter_layout"], first["padding"], first["strides"], first["groups"]) == \
        ("ohwi", [0, 1, 0, 1], [2, 2], 1)
    depthwise = [kw for kw in convs if kw["filter_layout"] == "ihwo"]
    assert len(depthwise) == 11 and depthwise[0]["groups"] == 16
    (tconv,) = [kw for name, kw in b.calls if name == "conv_transpose2d"]
    assert (tconv["padding"], tconv["strides"], tconv["filter_layout"], tconv["bias"]) == \
        ([0, 0, 0, 0], [2, 2], "ohwi", True)
    resample = [kw for name, kw in b.calls if name == "resample2d"]
    assert [kw["sizes"] for kw in resample] == [[32, 32], [64, 64], [128, 128]]
    assert all(kw["mode"] == "linear" and kw["axes"] == [1, 2] for kw in resample)
    # 110 float16 weights folded to float32 constants; no DEQUANTIZE left at run time.
    constants = [kw["desc"] for name, kw in b.calls if name == "constant"]
    assert all(desc["data_type"] == "float32" for desc in constants)


def test_selfie_model_float16_graph_has_only_float16_tensors(model_bytes):
    b, converted = _convert(model_bytes["selfie-segmentation-landscape"], "float16")
    assert converted.inputs["input_1"] == {"data_type": "float16", "shape": [1, 144, 256, 3]}
    constants = [kw["desc"]["data_type"] for name, kw in b.calls if name == "constant"]
    assert set(constants) == {"float16"}
    assert converted.outputs["segment_back"].data_type == "float16"


@pytest.mark.parametrize("name", ["selfie-segmentation", "selfie-segmentation-landscape"])
def test_selfie_mapping_matches_litert_without_gpu(name, model_bytes, selfie_inputs, selfie_references):
    """The mapping evaluated in float64 NumPy agrees with LiteRT on real images."""
    b, converted = _convert(model_bytes[name])
    graph = b.build(converted.outputs)
    for image_id, x in selfie_inputs[name]:
        (got,) = graph.compute({"input_1": x}).values()
        ref = selfie_references[name][image_id]
        np.testing.assert_allclose(got, ref, atol=2e-4, rtol=0, err_msg=f"{name} on {image_id}")


def test_litert_reference_rewrite_agrees_with_xnnpacks_custom_op(model_bytes, selfie_inputs, selfie_references):
    """Our reference (custom op rewritten as builtin TRANSPOSE_CONV) against the original
    model run by LiteRT's XNNPACK delegate, which implements MediaPipe's op itself."""
    from litert_reference import LiteRTModel

    rewritten, count = replace_transpose_conv_bias(model_bytes["selfie-segmentation"])
    assert count == 1
    assert read_model(rewritten).op_counts()["TRANSPOSE_CONV"] == 1
    xnnpack = LiteRTModel(model_bytes["selfie-segmentation"], use_xnnpack=True)
    for image_id, x in selfie_inputs["selfie-segmentation"][:2]:
        np.testing.assert_allclose(xnnpack(x), selfie_references["selfie-segmentation"][image_id], atol=2e-4)


@pytest.mark.parametrize("case_name", sorted(CASES))
def test_small_models_match_litert_without_gpu(case_name):
    model, inputs = CASES[case_name]()
    refs = run_litert(model, inputs)
    got = _run(model, inputs)
    assert len(got) == len(refs)
    for g, r in zip(got, refs):
        assert g.shape == r.shape
        np.testing.assert_allclose(g, r, atol=1e-5 * max(1.0, float(np.abs(r).max())), rtol=1e-5)


def test_supported_ops_table_lists_the_brief():
    table = wtflite.supported_ops()
    for name in ["CONV_2D", "DEPTHWISE_CONV_2D", "ADD", "MUL", "SUB", "DIV", "RELU", "RELU6", "HARD_SWISH",
                 "LOGISTIC", "TANH", "AVERAGE_POOL_2D", "MAX_POOL_2D", "MEAN", "RESIZE_BILINEAR", "DEQUANTIZE",
                 "CONCATENATION", "RESHAPE", "SOFTMAX", "PAD", "TRANSPOSE", "FULLY_CONNECTED",
                 "Convolution2DTransposeBias", "TRANSPOSE_CONV"]:
        assert name in table, name
    assert RELU == ops.ACT_RELU


def test_docs_table_lists_every_supported_op():
    import pathlib
    import re

    doc = (pathlib.Path(__file__).parents[2] / "docs" / "model_loading.md").read_text()
    table = doc.split("## Supported TFLite operators", 1)[1].split("###", 1)[0]
    documented = set(re.findall(r"`([A-Za-z0-9_]+)`", table.split("| --- | --- |", 1)[1]))
    missing = set(wtflite.supported_ops()) - documented
    assert not missing, f"docs/model_loading.md does not list {sorted(missing)}"


def test_state_that_reaches_an_output_is_still_refused():
    """The seed-generator pattern loads (keras_patterns.seed_state); once an output reads the
    variable's value it is a stateful layer's and refused, naming the operators."""
    from keras_patterns import seed_state

    data, _ = seed_state(output_reads_state=True)
    with pytest.raises(NotSupportedError, match=r"\(ASSIGN_VARIABLE, CALL_ONCE, READ_VARIABLE, VAR_HANDLE\)"):
        _convert(data)
