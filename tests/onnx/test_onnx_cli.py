"""``webnn-gpu info`` and ``webnn-gpu profile`` on ONNX models (symbolic dimensions, known inputs)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from webnn_gpu import cli
from webnn_gpu.errors import MLTypeError
from webnn_gpu.profile import parse_assignments


def _model(tmp_path):
    """y = relu(x * 2) reshaped by a shape input that must be known, batch symbolic."""
    nodes = [helper.make_node("Mul", ["x", "two"], ["m"], name="scale"),
             helper.make_node("Relu", ["m"], ["r"], name="act"),
             helper.make_node("Reshape", ["r", "shape"], ["y"], name="flat")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 4]),
                                       helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          initializer=[numpy_helper.from_array(np.array(2, np.float32), "two")])
    path = tmp_path / "m.onnx"
    path.write_bytes(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    return path


def test_info_lists_onnx_inputs_with_symbolic_dims(tmp_path, capsys):
    assert cli.main(["info", str(_model(tmp_path))]) == 0
    out = capsys.readouterr().out
    assert "input 'x': float [batch, 3, 4]" in out and "input 'shape': int64 [2]" in out
    assert "3 operator types, 0 not supported" in out


def test_profile_onnx_with_dims_and_known_inputs(ctx, tmp_path, capsys):
    path = _model(tmp_path)
    assert cli.main(["profile", str(path), "--dims", "batch=2", "--known", "shape=2,12", "--repeats", "2"]) == 0
    out = capsys.readouterr().out
    assert "act']" in out and "over 1 kernels" in out  # mul and relu: one fused kernel
    with pytest.raises(MLTypeError, match="'batch' \\(used by input 'x'\\) need a size"):
        cli.main(["profile", str(path), "--known", "shape=2,12"])


def test_parse_assignments():
    assert parse_assignments(["batch=1", "x=1,3,48,192", "s=1x2", "f=0.5"], "--dims") == {
        "batch": 1, "x": [1, 3, 48, 192], "s": [1, 2], "f": 0.5}
    with pytest.raises(MLTypeError, match="--dims.*'batch'"):
        parse_assignments(["batch"], "--dims")
