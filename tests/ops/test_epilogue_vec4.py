"""The epilogue's vec4 helper (``Epilogue.code4``, ``conv/_rows.wgsl``'s ``ep_v4_def``): which
step lists it takes (without a GPU: near misses keep the per-lane helper), and the depthwise +
projection kernels with it against float64 NumPy and bit for bit against the per-lane form
(``WEBNN_GPU_FORCE_EP_V4=lanes``)."""

from __future__ import annotations

import numpy as np
import pytest

from webnn_gpu.builder import Node, Value
from webnn_gpu.ops import _epilogue

from helpers import kernel_steps, run_graph
from _dwp_blocks import dw_project_block


def _node(*operands):
    x = Value("float32", (1, 4, 4, 8), "input")
    return Node("conv2d", [x, Value("float32", (8, 3, 3, 8), "constant"), None, *operands],
                [Value("float32", (1, 4, 4, 8), "op")], {})


_BIAS = Value("float32", (8,), "input")
_SAME = Value("float32", (1, 4, 4, 8), "input")


@pytest.mark.parametrize("steps, given, vec", [
    ([{"op": "add", "input": 3, "axis": 3}, {"op": "clamp", "min_value": 0.0, "max_value": 6.0}], None, True),
    ([{"op": "add", "input": 3, "axis": 3}, {"op": "hard_swish"}], None, True),
    ([{"op": "add", "input": 3, "axis": 3}, {"op": "leaky_relu", "alpha": 0.1}], None, True),
    ([{"op": "sub", "input": 3, "axis": 3, "reverse": True}, {"op": "relu"}], None, True),
    ([{"op": "mul", "input": 3, "axis": 3, "scale": 0.5}, {"op": "hard_sigmoid"}], None, True),
    ([{"op": "add", "input": 4}, {"op": "relu"}], 4, True),  # the given operand (held by the kernel)
    ([{"op": "relu"}], None, True),
    # near misses: a helper function, a per-channel prelu, pow, an operand read at the output's index
    ([{"op": "add", "input": 3, "axis": 3}, {"op": "sigmoid"}], None, False),
    ([{"op": "prelu", "input": 3, "axis": 3}], None, False),
    ([{"op": "pow", "input": 3, "axis": 3}], None, False),
    ([{"op": "add", "input": 4}, {"op": "relu"}], None, False),
    ([{"op": "clamp", "min_value": float("-inf"), "max_value": 6.0}], None, False),  # a bitcast literal
    ([{"op": "add", "input": 3, "axis": 3, "scale": float("nan")}], None, False),
    ([], None, False),
])
def test_code4_takes_component_wise_steps_only(steps, given, vec, monkeypatch):
    node = _node(_BIAS, _SAME)
    ep = _epilogue.build(node, node.outputs[0], steps, chan_axis=3, given=given)
    assert bool(ep.code4) == vec
    if vec:
        assert ep.code4.startswith(f"fn {ep.fn}_v4(v: vec4<f32>, o: u32, ch: u32")
        assert " f32(" not in ep.code4 and "epilogue(" not in ep.code4
        assert ("q3: EpQ" in ep.code4) == ep.chan and ("g: vec4<f32>" in ep.code4) == ep.given
    monkeypatch.setenv("WEBNN_GPU_FORCE_EP_V4", "lanes")
    assert _epilogue.build(node, node.outputs[0], steps, chan_axis=3, given=given).code4 == ""


@pytest.mark.parametrize("form, kw", [
    ("blocks", dict(hw=(9, 7), C=24, N=24, s=1, act="clamp", out_act="relu", residual="x")),
    ("blocks", dict(hw=(8, 8), C=32, N=24, s=2, act="relu", out_act="relu", residual="r")),
    ("blocks", dict(hw=(6, 5), C=20, N=12, s=1, act="prelu", out_act="prelu", residual=None)),  # per-lane
    ("lanes", dict(hw=(5, 6), C=20, N=20, s=1, act="clamp", out_act="relu", residual="x")),
    (None, dict(hw=(16, 16), C=16, N=16, s=1, act="relu", out_act="relu", residual="per-pixel")),
])
def test_dw_project_vec4_epilogue_against_numpy_and_lanes(ctx, rng, monkeypatch, form, kw):
    """Depthwise + projection blocks (pixel blocks, channel lanes, the planner's pick; strides 1 and 2;
    clamp / relu / prelu; residuals: the input, another tensor, one per pixel, none) with the
    vec4 helpers: float64 NumPy, and the same bits as the per-lane helpers."""
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP", "fused")
    if form:
        monkeypatch.setenv("WEBNN_GPU_FORCE_DWP_FORM", form)
    build, inputs, ref = dw_project_block(rng, kw.pop("hw"), kw.pop("C"), kw.pop("N"), **kw)
    got = run_graph(ctx, build, inputs)["y"]
    np.testing.assert_allclose(got.astype(np.float64), ref, atol=3e-5 * max(1.0, np.abs(ref).max()), rtol=3e-5)
    wgsl = "".join(st.wgsl for st in kernel_steps(ctx, build, inputs) if "depthwise_project" in st.template)
    assert wgsl
    monkeypatch.setenv("WEBNN_GPU_FORCE_EP_V4", "lanes")
    lanes = run_graph(ctx, build, inputs)["y"]
    lanes_wgsl = "".join(st.wgsl for st in kernel_steps(ctx, build, inputs) if "depthwise_project" in st.template)
    assert np.array_equal(got, lanes)
    assert "ev = ev + vec4<f32>(" not in lanes_wgsl
    if kw["act"] != "prelu":
        assert "ev = ev + vec4<f32>(" in wgsl and wgsl != lanes_wgsl
