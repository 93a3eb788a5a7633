"""``webnn.load(..., custom_ops=...)``: a TFLite custom op code mapped onto a custom WGSL operator.

The model is written by the test (tflite_maker): ADD -> custom "Cube" (x**3 * scale, its
scale in the custom options bytes) -> RELU. Reference: NumPy float64.
"""

from __future__ import annotations

import struct

import numpy as np
import pytest
from tflite_maker import ModelMaker

import webnn_gpu as webnn
from webnn_gpu.errors import DataError, MLTypeError, NotSupportedError

CUBE_WGSL = """
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@compute @workgroup_size({{ workgroup_size }})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  if (i >= {{ outputs[0].size }}u) { return; }
  let v = x[i];
  y[i] = v * v * v * {{ scale }};
}
"""


def cube_model(scale: float = 0.5) -> bytes:
    m = ModelMaker()
    x = m.input([2, 3, 4])
    bias = m.const(np.linspace(-1, 1, 24, dtype=np.float32).reshape(2, 3, 4))
    h = m.op("ADD", [x, bias], [2, 3, 4])
    c = m.op("Cube", [h], [2, 3, 4], custom_options=struct.pack("<f", scale))
    m.output(m.op("RELU", [c], [2, 3, 4]))
    return m.finish()


def cube(builder, inputs, attributes):
    """The caller's mapping: the scale comes from the op's custom options."""
    (scale,) = struct.unpack("<f", attributes["custom_options"])
    return builder.wgsl(CUBE_WGSL, inputs, attributes["outputs"][0], constants={"scale": repr(scale)},
                        label=attributes["label"])


def test_custom_op_code_runs_as_custom_wgsl(ctx, rng):
    seen = {}

    def spy(builder, inputs, attributes):
        seen.update(attributes)
        return cube(builder, inputs, attributes)

    model = webnn.load(cube_model(0.5), ctx, custom_ops={"Cube": spy})
    assert seen["custom_code"] == "Cube" and seen["outputs"] == [{"data_type": "float32", "shape": [2, 3, 4]}]
    assert seen["label"].startswith("Cube")
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    (name,) = model.graph.inputs
    got = ctx.compute(model.graph, {name: x})
    h = x.astype(np.float64) + np.linspace(-1, 1, 24).reshape(2, 3, 4)
    np.testing.assert_allclose(next(iter(got.values())), np.maximum(h ** 3 * 0.5, 0), rtol=1e-5, atol=1e-6)


def test_an_unmapped_custom_op_names_the_option(ctx):
    with pytest.raises(NotSupportedError, match=r"not supported \(Cube\): .*custom op 'Cube'\); map a custom op "
                                                r"with load\(\.\.\., custom_ops=\{'Cube': fn\}\)"):
        webnn.load(cube_model(), ctx)
    with pytest.raises(NotSupportedError, match="custom_ops="):
        webnn.load(cube_model(), ctx, custom_ops={"Other": cube})


def test_bad_custom_ops_and_bad_results(ctx):
    with pytest.raises(MLTypeError, match="argument 'custom_ops'"):
        webnn.load(cube_model(), ctx, custom_ops={"Cube": "not callable"})
    with pytest.raises(MLTypeError, match="argument 'custom_ops'"):
        webnn.load(cube_model(), ctx, custom_ops=[cube])
    with pytest.raises(DataError, match=r"returned 2 operand\(s\) for 1 output\(s\)"):
        webnn.load(cube_model(), ctx, custom_ops={"Cube": lambda b, i, a: [cube(b, i, a)] * 2})
    with pytest.raises(DataError, match="the model declares output"):
        webnn.load(cube_model(), ctx, custom_ops={"Cube": lambda b, i, a: b.reshape(i[0], [6, 4])})
