"""Reference outputs of a .tflite model from Google's LiteRT interpreter (``ai-edge-litert``).

The hurdle: MediaPipe's selfie segmenter ends with the custom op
``Convolution2DTransposeBias``, which LiteRT's builtin op resolver does not know (the
XNNPACK delegate happens to implement it, but then the whole reference depends on one
delegate's optional code path). We therefore make an equivalent model that stock
LiteRT runs with its own builtin kernels and no delegate:

:func:`replace_transpose_conv_bias` rewrites the flatbuffer (with LiteRT's own
generated schema object API, not with our reader) so each
``Convolution2DTransposeBias(input, weights, bias)`` becomes the builtin
``TRANSPOSE_CONV(output_shape, weights, input, bias)`` (bias as 4th input needs op
version 3) with the same padding mode and strides. The two are the same computation
only when TFLite's builtin padding rule (computed from the output size) gives the same
padding as MediaPipe's rule (computed from the input size); the rewrite asserts that
for every rewritten op, so a model where they would differ fails loudly instead of
yielding a wrong reference.

The reference is independent of webnn-gpu: it never imports our loader or engine.
As a cross-check, a test also compares the rewritten model (builtin kernels) with the
original model run by LiteRT's default XNNPACK delegate, which implements MediaPipe's
op itself.
"""

from __future__ import annotations

import numpy as np

import flatbuffers
from ai_edge_litert import schema_py_generated as schema
from ai_edge_litert.interpreter import Interpreter, OpResolverType

CUSTOM_CODE = b"Convolution2DTransposeBias"


def _mediapipe_total_padding(in_size: int, kernel: int, stride: int, same: bool) -> tuple[int, int]:
    """(pad_before, output_size) as computed by MediaPipe's transpose_conv_bias.cc."""
    total = max(0, kernel - (in_size - 1) % stride - 1) if same else 0
    return total // 2, stride * (in_size - 1) + kernel - total


def _builtin_pad_before(out_size: int, kernel: int, stride: int, same: bool) -> int:
    """pad_before as TFLite's builtin TRANSPOSE_CONV computes it from the output size."""
    if same:
        conv_out = (out_size + stride - 1) // stride
    else:
        conv_out = (out_size + stride - kernel) // stride
    total = max((conv_out - 1) * stride + kernel - out_size, 0)
    return total // 2


def replace_transpose_conv_bias(model_bytes: bytes) -> tuple[bytes, int]:
    """Rewrite every ``Convolution2DTransposeBias`` as a builtin ``TRANSPOSE_CONV``.

    Returns:
        (new model bytes, number of operators rewritten).
    """
    model = schema.ModelT.InitFromPackedBuf(bytearray(model_bytes), 0)
    custom_indices = {
        i for i, oc in enumerate(model.operatorCodes)
        if oc.customCode is not None and bytes(oc.customCode) == CUSTOM_CODE
    }
    if not custom_indices:
        return model_bytes, 0
    code = schema.OperatorCodeT()
    code.builtinCode = schema.BuiltinOperator.TRANSPOSE_CONV
    code.deprecatedBuiltinCode = schema.BuiltinOperator.TRANSPOSE_CONV
    code.version = 3
    model.operatorCodes.append(code)
    new_code_index = len(model.operatorCodes) - 1

    rewritten = 0
    for sub in model.subgraphs:
        for op in sub.operators:
            if op.opcodeIndex not in custom_indices:
                continue
            raw = bytes(bytearray(op.customOptions))
            padding, stride_w, stride_h = np.frombuffer(raw[:12], "<i4").tolist()
            assert padding in (1, 2), f"unexpected TfLitePadding {padding}"
            same = padding == 1
            x_idx, w_idx, b_idx = op.inputs
            x_shape = list(sub.tensors[x_idx].shape)
            w_shape = list(sub.tensors[w_idx].shape)  # OHWI
            out_shape = [x_shape[0], 0, 0, w_shape[0]]
            for axis, stride in ((1, stride_h), (2, stride_w)):
                before, size = _mediapipe_total_padding(x_shape[axis], w_shape[axis], stride, same)
                builtin_before = _builtin_pad_before(size, w_shape[axis], stride, same)
                assert before == builtin_before, (
                    f"builtin TRANSPOSE_CONV would pad {builtin_before} where MediaPipe pads {before} "
                    f"(axis {axis}): the rewrite would not be equivalent")
                out_shape[axis] = size
            assert list(sub.tensors[op.outputs[0]].shape) == out_shape

            buf = schema.BufferT()
            buf.data = list(np.asarray(out_shape, "<i4").tobytes())
            model.buffers.append(buf)
            shape_tensor = schema.TensorT()
            shape_tensor.shape = [4]
            shape_tensor.type = schema.TensorType.INT32
            shape_tensor.buffer = len(model.buffers) - 1
            shape_tensor.name = b"transpose_conv_output_shape_%d" % rewritten
            sub.tensors.append(shape_tensor)

            options = schema.TransposeConvOptionsT()
            options.padding = schema.Padding.SAME if same else schema.Padding.VALID
            options.strideW, options.strideH = stride_w, stride_h
            op.opcodeIndex = new_code_index
            op.inputs = [len(sub.tensors) - 1, w_idx, x_idx, b_idx]
            op.builtinOptionsType = schema.BuiltinOptions.TransposeConvOptions
            op.builtinOptions = options
            op.customOptions = None
            rewritten += 1

    builder = flatbuffers.Builder(len(model_bytes) + 4096)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output()), rewritten


class LiteRTModel:
    """One LiteRT interpreter for a model, run on NHWC float32 batches."""

    def __init__(self, model_bytes: bytes, *, use_xnnpack: bool = False) -> None:
        resolver = OpResolverType.AUTO if use_xnnpack else OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
        self.interpreter = Interpreter(model_content=model_bytes, experimental_op_resolver_type=resolver,
                                       num_threads=1)
        self.interpreter.allocate_tensors()
        self.input = self.interpreter.get_input_details()[0]
        self.output = self.interpreter.get_output_details()[0]

    def __call__(self, x: np.ndarray) -> np.ndarray:
        self.interpreter.set_tensor(self.input["index"], np.ascontiguousarray(x, np.float32))
        self.interpreter.invoke()
        return self.interpreter.get_tensor(self.output["index"]).copy()


def run_litert(model_bytes: bytes, inputs: list[np.ndarray], *, use_xnnpack: bool = False) -> list[np.ndarray]:
    """Run a (small) model once in LiteRT; inputs and outputs in the subgraph's order.

    Without XNNPACK, MediaPipe's custom op is first rewritten as builtin TRANSPOSE_CONV.
    """
    if not use_xnnpack:
        model_bytes, _ = replace_transpose_conv_bias(model_bytes)
    resolver = OpResolverType.AUTO if use_xnnpack else OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    interpreter = Interpreter(model_content=model_bytes, experimental_op_resolver_type=resolver, num_threads=1)
    interpreter.allocate_tensors()
    details = interpreter.get_input_details()
    assert len(details) == len(inputs)
    for d, x in zip(details, inputs):
        interpreter.set_tensor(d["index"], np.ascontiguousarray(x, d["dtype"]).reshape(d["shape"]))
    interpreter.invoke()
    return [interpreter.get_tensor(d["index"]).copy() for d in interpreter.get_output_details()]


def reference_model(model_bytes: bytes) -> LiteRTModel:
    """A stock LiteRT interpreter (builtin kernels, no delegate) for the rewritten model."""
    rewritten, _ = replace_transpose_conv_bias(model_bytes)
    return LiteRTModel(rewritten)
