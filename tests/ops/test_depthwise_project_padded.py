"""The pixel-block depthwise + projection kernel (``conv/depthwise_project.wgsl``) with a
residual placed among zero channels (BlazeFace's ``pad(x)`` added to a block's wider output, a
``"pad"`` step): loaded as vec4s through the epilogue's ``given_g4`` helper
(``webnn_gpu.ops.conv._blocks_padded_residual``, ``_epilogue.given_chan_pad_ok``), against
float64 NumPy; the condition's near misses without a GPU."""

from __future__ import annotations

import re
from types import SimpleNamespace

import numpy as np
import pytest

from webnn_gpu.ops import _epilogue, conv

from helpers import kernel_steps, run_graph
from _dwp_blocks import dw_project_block

BLOCKS = "conv/depthwise_project.wgsl"


def _case(rng, hw, C, N, s, before, residual, npdt, act):
    """A 3x3 depthwise conv2d (bias, ``act``: relu or per-channel prelu), its pointwise
    projection to N channels (bias), plus the residual padded with ``before`` zero channels
    ahead of it and N - C - ``before`` after (``"x"``: the depthwise input, stride 1; ``"r"``:
    another input of the output's size and C channels; ``"max"``: the input's 2 x 2 stride-2
    max pool), then prelu: :func:`dw_project_block`."""
    return dw_project_block(rng, hw, C, N, s=s, act=act, out_act="prelu", before=before, npdt=npdt,
                            residual="rc" if residual == "r" else residual)


# (image, C, N, stride, zero channels before, residual, float type, depthwise activation)
_CASES = {
    "16 x 16 64 -> 72 (face detection's), the input padded with 8 zero channels after it":
        ((16, 16), 64, 72, 1, 0, "x", "float32", "relu"),
    "5 x 7 32 -> 36, 4 zero channels after, prelu":
        ((5, 7), 32, 36, 1, 0, "x", "float32", "prelu"),
    "5 x 7 32 -> 44, 4 zero channels before and 8 after":
        ((5, 7), 32, 44, 1, 4, "x", "float32", "relu"),
    "1 x 1 image, the input padded with 12 zero channels before it, prelu (the pad not folded)":
        ((1, 1), 20, 32, 1, 12, "x", "float32", "prelu"),
    "5 x 7 stride 2, another tensor padded with 12 zero channels before it, prelu":
        ((5, 7), 20, 32, 2, 12, "r", "float32", "prelu"),
    "5 x 7 stride 2, another tensor padded with 8 zero channels, float16":
        ((5, 7), 24, 32, 2, 0, "r", "float16", "relu"),
    "16 x 16 stride 2, the input's 2 x 2 max pool padded with 8 zero channels (a pooled given)":
        ((16, 16), 88, 96, 2, 0, "max", "float32", "relu"),
}


@pytest.mark.parametrize("case", list(_CASES))
def test_padded_residual_against_numpy(ctx, rng, monkeypatch, case):
    """Zero-channel-padded residuals (4, 8 and 12 channels, before and after the operand) on
    the pixel-block kernel, strides 1 and 2, images of 1 x 1 to 16 x 16, relu and prelu,
    float16: float64 NumPy; the kernel binds the operand as ``pg`` and reads it through
    ``project_g4`` (no value-by-value load with a bounds test). On a 1 x 1 image the compiler
    leaves the pad to a kernel of its own (``layout/remap.wgsl``) and the residual is read as
    an operand of the output's shape."""
    hw, C, N, s, before, residual, dt, act = _CASES[case]
    if dt == "float16" and "float16" not in ctx.supported_data_types:
        pytest.fail("float16 is expected on lavapipe")
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP", "fused")
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP_FORM", "blocks")
    npdt = np.float32 if dt == "float32" else np.float16
    build, inputs, ref = _case(rng, hw, C, N, s, before, residual, npdt, act)
    got = run_graph(ctx, build, inputs)["y"].astype(np.float64)
    tol = 3e-5 if dt == "float32" else 3e-2
    np.testing.assert_allclose(got, ref, atol=tol * max(1.0, np.abs(ref).max()), rtol=tol)
    steps = kernel_steps(ctx, build, inputs)
    assert [st.template for st in steps][-1:] == [BLOCKS]
    if hw == (1, 1):
        assert [st.template for st in steps] == ["layout/remap.wgsl", BLOCKS]
        return
    assert len(steps) == 1
    wgsl = steps[0].wgsl
    assert " pg:" in wgsl and "fn project_g4(" in wgsl
    assert not re.search(r"select\(0\.0, f32\(pe\d+\[", wgsl)  # no value-by-value load


def _v(*shape, dt="float32"):
    return SimpleNamespace(shape=tuple(shape), data_type=dt)


@pytest.mark.parametrize("step, shape, out, ok", [
    ({"op": "add", "input": 3, "pad": [0, 0, 0, 0]}, (1, 8, 8, 64), (1, 8, 8, 72), True),
    ({"op": "add", "input": 3, "pad": [0, 0, 0, 4]}, (1, 8, 8, 64), (1, 8, 8, 72), True),
    ({"op": "add", "input": 3, "pad": [0, 0, 0, 8]}, (1, 8, 8, 64), (1, 8, 8, 72), True),
    ({"op": "add", "input": 3, "pad": [0, 0, 0, 2]}, (1, 8, 8, 64), (1, 8, 8, 72), False),  # offset not 4k
    ({"op": "add", "input": 3, "pad": [0, 0, 0, 0]}, (1, 8, 8, 62), (1, 8, 8, 72), False),  # C not 4k
    ({"op": "add", "input": 3, "pad": [0, 0, 0, 0]}, (1, 8, 8, 64), (1, 8, 8, 70), False),  # N not 4k
    ({"op": "add", "input": 3, "pad": [0, 0, 0, 12]}, (1, 8, 8, 64), (1, 8, 8, 72), False),  # past the end
    ({"op": "add", "input": 3, "pad": [0, 0, 0, -4]}, (1, 8, 8, 64), (1, 8, 8, 72), False),  # a slice
    ({"op": "add", "input": 3, "pad": [0, 0, 0, 0]}, (1, 8, 8, 72), (1, 8, 8, 72), False),  # no zero channels
    ({"op": "add", "input": 3, "pad": [0, 1, 0, 0]}, (1, 7, 8, 64), (1, 8, 8, 72), False),  # padded rows
    ({"op": "add", "input": 3, "pad": [0, 0, 0, 0]}, (1, 8, 7, 64), (1, 8, 8, 72), False),  # fewer columns
    ({"op": "add", "input": 3, "pad": [0, 0, 0, 0], "scale": 2.0}, (1, 8, 8, 64), (1, 8, 8, 72), False),
    ({"op": "add", "input": 3, "pad": [0, 0, 0, True]}, (1, 8, 8, 64), (1, 8, 8, 72), False),
    ({"op": "add", "input": 3, "pad": [0, 0, 0]}, (1, 8, 8, 64), (1, 8, 8, 72), False),
    ({"op": "add", "input": 3}, (1, 8, 8, 64), (1, 8, 8, 72), False),  # no "pad" step
    ({"op": "add", "input": 3, "pad": [0, 0, 0, 0], "pool": {"op": "max"}}, (1, 8, 8, 64), (1, 8, 8, 72), False),
])
def test_given_chan_pad_ok_near_misses(step, shape, out, ok):
    """The condition under which the pixel-block kernel loads a padded residual as vec4s:
    channels alone padded, at an offset that is a multiple of 4, both channel counts multiples
    of 4, inside the output; not a slice, a scale, a pool, or the output's whole shape."""
    assert _epilogue.given_chan_pad_ok(step, _v(*shape), _v(*out)) is ok


def test_blocks_padded_residual_picks_one_read_operand():
    """``_blocks_padded_residual`` takes an operand its epilogue reads once, of the output's
    data type; an operand read by two steps, or of another type, stays the epilogue's own
    value-by-value load."""
    x, out = _v(1, 8, 8, 64), _v(1, 8, 8, 72)
    step = {"op": "add", "input": 3, "pad": [0, 0, 0, 0]}
    node = SimpleNamespace(inputs=[None, None, None, x], attrs={"epilogue": [step]})
    assert conv._blocks_padded_residual(node, out) == 3
    node.attrs["epilogue"] = [step, {"op": "mul", "input": 3, "pad": [0, 0, 0, 0]}]
    assert conv._blocks_padded_residual(node, out) is None
    node = SimpleNamespace(inputs=[None, None, None, _v(1, 8, 8, 64, dt="float16")], attrs={"epilogue": [step]})
    assert conv._blocks_padded_residual(node, out) is None
    node = SimpleNamespace(inputs=[None, None, None, x], attrs={"epilogue": [dict(step, op="relu")]})
    assert conv._blocks_padded_residual(node, out) is None


def test_given_chan_pad_wgsl_reads_the_operand_channels():
    """The generated helpers: the output's vec4 ``i`` of a 72-channel output over a 64-channel
    operand at offset 4 reads the operand's vec4 ``p * 16 + cc - 1`` inside channels 4..67,
    and 0 outside (checked by evaluating the index arithmetic in Python)."""
    g4, g1 = _epilogue._given_chan_pad_fns("project", _v(1, 8, 8, 64), {"pad": [0, 0, 0, 4]}, (1, 8, 8, 72))
    assert "let cc = i % 18u;" in g4 and "cc >= 1u && cc < 17u" in g4 and "GIVEN[(i / 18u) * 16u + cc - 1u]" in g4
    assert "let cc = i % 72u;" in g1 and "cc >= 4u && cc < 68u" in g1 and "GIVEN[(i / 72u) * 64u + cc - 4u]" in g1
