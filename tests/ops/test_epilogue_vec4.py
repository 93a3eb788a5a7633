"""The epilogue's vec4 helper (``Epilogue.code4``, ``conv/_rows.wgsl``'s ``ep_v4_def``): which
step lists it takes (without a GPU: near misses keep the per-lane helper), and the depthwise +
projection kernels with it against float64 NumPy and bit for bit against the per-lane form
(``WEBNN_GPU_FORCE_EP_V4=lanes``)."""

from __future__ import annotations

import numpy as np
import pytest

from webnn_gpu.builder import Node, Value
from webnn_gpu.ops import _epilogue, linalg

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


# ---------------------------------------------------------------- the tile kernel (matmul/tile.wgsl)
def _tile_forms(ctx, monkeypatch, build, inputs):
    """The default build and the per-lane one (``WEBNN_GPU_FORCE_EP_V4=lanes``): bit for bit the
    same output; (output, the default build's tile WGSL, the per-lane build's tile WGSL)."""
    from test_tile import build_run, tile_steps

    monkeypatch.setenv("WEBNN_GPU_FORCE_MATMUL_MATVEC", "off")
    runs = {}
    for form in ("lanes", "vec4"):
        monkeypatch.setenv("WEBNN_GPU_FORCE_EP_V4", form)
        out, steps = build_run(ctx, build, inputs)
        runs[form] = (np.ascontiguousarray(np.asarray(out)), "".join(s.wgsl for s in tile_steps(steps)))
    monkeypatch.delenv("WEBNN_GPU_FORCE_EP_V4")
    np.testing.assert_array_equal(runs["vec4"][0].view(np.uint8), runs["lanes"][0].view(np.uint8))
    assert runs["vec4"][1] and "epilogue_v4(" not in runs["lanes"][1]
    return runs["vec4"][0], runs["vec4"][1], runs["lanes"][1]


def _conv(bld, x, w, bias, pad=0, stride=1):
    return bld.conv2d(x, bld.constant(w), bias=bld.constant(bias), padding=[pad] * 4, strides=[stride] * 2,
                      input_layout="nhwc", filter_layout="ohwi")


@pytest.mark.parametrize("hw, C, N, kw, pad, stride", [
    ((16, 16), 144, 144, 1, 0, 1),  # pointwise: the parameter-buffer (dyn) kernel, 8-value stores
    ((9, 11), 20, 36, 1, 0, 1),  # odd sizes, N not a multiple of 8
    ((13, 10), 12, 28, 3, 1, 2),  # implicit GEMM: 3x3, padding, stride 2
])
@pytest.mark.parametrize("act", ["relu", "clamp", "hard_swish"])
def test_tile_vec4_epilogue_bias_activation(ctx, rng, monkeypatch, hw, C, N, kw, pad, stride, act):
    """A conv's bias and activation on the tile kernel through the vec4 helper (a last clamp read
    from the parameter buffer where the kernel is dyn): float64 NumPy and the per-lane bits."""
    from references import conv2d_nhwc
    from test_tile import check, data

    x, w, bias = data(rng, (1, *hw, C)), data(rng, (N, kw, kw, C)), data(rng, (N,))
    acts = {"relu": lambda b, y: b.relu(y), "clamp": lambda b, y: b.clamp(y, min_value=-1.0, max_value=6.0),
            "hard_swish": lambda b, y: b.hard_swish(y)}
    out, wgsl, _ = _tile_forms(ctx, monkeypatch, lambda b, o: acts[act](b, _conv(b, o["x"], w, bias, pad, stride)),
                               {"x": x})
    assert "epilogue_v4(" in wgsl
    if act == "clamp" and kw == 1 and ctx._subgroup and linalg.TILE_CLAMP_PARAM:
        assert "ep_on" in wgsl  # the bounds from the parameter buffer, not in the helper
    if act == "clamp" and "ep_on" in wgsl:
        assert "vec4<f32>(6.0)" not in wgsl and "f32(6.0)" not in wgsl
    z = conv2d_nhwc(x, w, bias, pad=pad, stride=stride)
    ref = {"relu": np.maximum(z, 0), "clamp": np.clip(z, -1, 6), "hard_swish": z * np.clip(z + 3, 0, 6) / 6}[act]
    absref = conv2d_nhwc(np.abs(x), np.abs(w), np.abs(bias), pad=pad, stride=stride)
    k = kw * kw * C + 1
    check(out, ref, absref * (1 + (act == "hard_swish") * (2 + np.abs(z))), k + 4, np.float32, act)


def test_tile_vec4_epilogue_text_clamp(ctx, rng, monkeypatch):
    """``WEBNN_GPU_FORCE_TILE_CLAMP=text``: the last clamp stays in the vec4 helper."""
    from references import conv2d_nhwc
    from test_tile import check, data

    monkeypatch.setenv("WEBNN_GPU_FORCE_TILE_CLAMP", "text")
    x, w, bias = data(rng, (1, 12, 12, 48)), data(rng, (64, 1, 1, 48)), data(rng, (64,))
    out, wgsl, _ = _tile_forms(ctx, monkeypatch, lambda b, o: b.clamp(_conv(b, o["x"], w, bias), min_value=0.0,
                                                                      max_value=6.0), {"x": x})
    assert "epilogue_v4(" in wgsl and "vec4<f32>(6.0)" in wgsl and "ep_on" not in wgsl
    check(out, np.clip(conv2d_nhwc(x, w, bias), 0, 6), conv2d_nhwc(np.abs(x), np.abs(w), np.abs(bias)), 49,
          np.float32, "relu6 in the text")


@pytest.mark.parametrize("C, N", [(144, 144), (24, 40)])
def test_tile_vec4_epilogue_residual(ctx, rng, monkeypatch, C, N):
    """Bias, a residual add (the given operand, one vec4 per store) and relu."""
    from references import conv2d_nhwc
    from test_tile import check, data

    x, r = data(rng, (1, 10, 10, C)), data(rng, (1, 10, 10, N))
    w, bias = data(rng, (N, 1, 1, C)), data(rng, (N,))
    out, wgsl, _ = _tile_forms(ctx, monkeypatch, lambda b, o: b.relu(b.add(_conv(b, o["x"], w, bias), o["r"])),
                               {"x": x, "r": r})
    assert "epilogue_v4(" in wgsl and "g: vec4<f32>" in wgsl
    absref = conv2d_nhwc(np.abs(x), np.abs(w), np.abs(bias)) + np.abs(r)
    check(out, np.maximum(conv2d_nhwc(x, w, bias) + r, 0), absref, C + 2, np.float32, "residual relu")


@pytest.mark.parametrize("case", ["prelu", "scalar_stores"])
def test_tile_vec4_epilogue_near_misses(ctx, rng, monkeypatch, case):
    """Near misses keep the per-value epilogue: a per-channel PReLU slope (not a vec4 step), and
    an output of 10 channels (scalar stores, out_vec off)."""
    from references import conv2d_nhwc
    from test_tile import check, data

    N = 10 if case == "scalar_stores" else 32
    x, w, bias, slope = data(rng, (1, 9, 9, 16)), data(rng, (N, 1, 1, 16)), data(rng, (N,)), data(rng, (N,))

    def build(b, o):
        y = _conv(b, o["x"], w, bias)
        return b.prelu(y, b.constant(slope)) if case == "prelu" else b.relu(y)

    out, wgsl, lanes = _tile_forms(ctx, monkeypatch, build, {"x": x})
    assert "epilogue_v4(" not in wgsl and wgsl == lanes
    z = conv2d_nhwc(x, w, bias)
    ref = np.where(z >= 0, z, z * slope) if case == "prelu" else np.maximum(z, 0)
    check(out, ref, conv2d_nhwc(np.abs(x), np.abs(w), np.abs(bias)) * (1 + np.abs(slope)), 18, np.float32, case)


@pytest.mark.parametrize("steps, left", [
    ([{"op": "add", "input": 3, "axis": 3}, {"op": "clamp", "min_value": 0.0, "max_value": 6.0}], True),
    ([{"op": "relu"}, {"op": "clamp", "min_value": -1.0, "max_value": 1.0}], True),
    ([{"op": "clamp", "min_value": 0.0, "max_value": 6.0}], False),  # the only step: the epilogue left empty
])
def test_clamp_param_strips_the_vec4_helper_too(steps, left):
    """``linalg.clamp_param`` takes the last clamp out of ``code4`` as out of ``code`` (no GPU)."""
    node = _node(_BIAS, _SAME)
    ep = _epilogue.build(node, node.outputs[0], steps, chan_axis=3)
    assert "vec4<f32>(" in ep.code4 and ep.code4.count("min(max(ev") == 1
    stripped, bounds = linalg.clamp_param(node, node.outputs[0], ep)
    assert bounds == (steps[-1]["min_value"], steps[-1]["max_value"])
    assert "min(max(ev" not in stripped.code and "min(max(ev" not in stripped.code4
    assert bool(stripped.code4) == left and stripped.empty == (not left)
    if left:
        assert stripped.code4.startswith(f"fn {ep.fn}_v4(") and stripped.code4.endswith("  }\n  return ev;\n}")


# ------------------------------------------- the first layers' and the two-product kernels
def _two_forms(ctx, monkeypatch, build, inputs, template):
    """``build`` run by default and with ``WEBNN_GPU_FORCE_EP_V4=lanes``: the outputs bit for bit
    the same; (outputs, the default build's WGSL of ``template``, the per-lane build's)."""
    runs = {}
    for form in ("lanes", "vec4"):
        monkeypatch.setenv("WEBNN_GPU_FORCE_EP_V4", form)
        out = run_graph(ctx, build, inputs, tensor_path=False)
        runs[form] = (out, "".join(st.wgsl for st in kernel_steps(ctx, build, inputs) if st.template == template))
    monkeypatch.delenv("WEBNN_GPU_FORCE_EP_V4")
    assert runs["vec4"][1] and runs["lanes"][1], f"no {template} kernel"
    for name, got in runs["vec4"][0].items():
        assert np.asarray(got).tobytes() == np.asarray(runs["lanes"][0][name]).tobytes(), name
    assert "ev = ev + vec4<f32>(" not in runs["lanes"][1] and "min(max(ev, vec4<f32>(" not in runs["lanes"][1]
    return runs["vec4"][0], runs["vec4"][1], runs["lanes"][1]


@pytest.mark.parametrize("case, act, constant, vec", [
    ("rgb-3x3-s2-same-o16", "relu6", True, True),  # vec4 rows, a baked bias and filter
    ("rgb-3x3-s2-odd-o12", "hard_swish", True, True),  # scalar rows, a ragged block
    ("rgb-3x3-s2-same-o16", "relu", False, True),  # a loaded filter: the bias an operand (EpQ)
    ("rgb-5x5-s2-o24-wide", "relu6", True, True),  # the one-row form (BLOCK_WIDE_K)
    ("rgb-3x3-s2-f16-odd-o16", "relu6", True, True),  # float16 as u32 pairs
    ("c2-3x3-s1-pad-o12", "prelu", True, False),  # near misses: the per-lane helper
    ("rgb-3x3-s2-odd-o12", "sigmoid", True, False),
])
def test_first_layer_vec4_epilogue(ctx, rng, monkeypatch, case, act, constant, vec):
    """The block kernel (``conv/block.wgsl``) stores each vec4 through one ``epilogue_v4`` call:
    vector operations for component-wise steps, four per-lane calls otherwise; float64 NumPy
    and the same bits as the per-lane form."""
    from test_conv_first import CASES, EPILOGUES, _out_size
    from references import ref_conv2d

    H, W, C, O, KH, KW, s, pad, bias, dt = CASES[case]
    if dt == np.float16 and "float16" not in ctx.supported_data_types:
        pytest.skip("no shader-f16")
    chain, want_of = EPILOGUES[act]
    x, wt = rng.uniform(-1, 1, (1, H, W, C)).astype(dt), rng.uniform(-1, 1, (O, KH, KW, C)).astype(dt)
    b = rng.uniform(-1, 1, O).astype(dt)
    consts = {"slope": rng.uniform(0.05, 0.5, O).astype(np.float32)}
    inputs = {"x": x} | ({} if constant else {"w": wt})

    def build(bld, o):
        y = bld.conv2d(o["x"], bld.constant(wt) if constant else o["w"], strides=[s, s], padding=list(pad),
                       input_layout="nhwc", filter_layout="ohwi", bias=bld.constant(b))
        return {"y": chain(bld, y, consts)}

    out, wgsl, lanes = _two_forms(ctx, monkeypatch, build, inputs, "conv/block.wgsl")
    assert "epilogue_v4(" in wgsl and (wgsl != lanes) == vec
    assert ("return vec4<f32>(epilogue(v.x" not in wgsl) == vec  # vector operations, or four per-lane calls
    got = out["y"].astype(np.float64).transpose(0, 3, 1, 2)
    x64, w64 = x.astype(np.float64).transpose(0, 3, 1, 2), wt.astype(np.float64).transpose(0, 3, 1, 2)
    ref = ref_conv2d(x64, w64, padding=pad, strides=(s, s)) + b.astype(np.float64)[None, :, None, None]
    absref = ref_conv2d(np.abs(x64), np.abs(w64), padding=pad, strides=(s, s)) + np.abs(b.astype(np.float64))[
        None, :, None, None]
    assert got.shape == (1, O, _out_size(H, KH, s, pad[0], pad[1]), _out_size(W, KW, s, pad[2], pad[3]))
    want = want_of(ref, consts)
    half_ulp = 2.0 ** -11 if dt == np.float16 else 0.0
    err = np.abs(got - want)
    assert (err <= 1e-5 * (1 + absref + np.abs(want)) + half_ulp * np.abs(want)).all(), f"worst {err.max():.3e}"


@pytest.mark.parametrize("kind", ["relu6-residual", "hard_swish", "prelu"])
def test_mlp_vec4_epilogue(ctx, rng, monkeypatch, kind):
    """The two-product kernel (``matmul/mlp.wgsl``) stores each vec4 of both products through one
    ``ep1_v4`` / ``ep2_v4`` call: a bias and relu6 or hard_swish, a residual add of the input
    (the given operand) in vector operations, a per-channel PReLU (a near miss) per lane; float64
    NumPy and the same bits as the per-lane form."""
    K, H, N = 32, 64, 32
    x = rng.standard_normal((1, 96, K)).astype(np.float32)
    w1, b1 = rng.standard_normal((K, H)) / np.sqrt(K), rng.standard_normal(H) * 0.1
    w2, b2 = rng.standard_normal((H, N)) / np.sqrt(H), rng.standard_normal(N) * 0.1
    slope = rng.uniform(0.05, 0.5, H)
    acts = {"relu6-residual": (lambda b, h: b.clamp(h, min_value=0.0, max_value=6.0), lambda h: np.clip(h, 0, 6)),
            "hard_swish": (lambda b, h: b.hard_swish(h), lambda h: h * np.clip(h + 3, 0, 6) / 6),
            "prelu": (lambda b, h: b.prelu(h, _c(b, slope)), lambda h: np.where(h >= 0, h, h * slope.astype(np.float32)))}
    act, ref_act = acts[kind]
    residual = kind == "relu6-residual"

    def build(b, o):
        h = act(b, b.add(b.matmul(o["x"], _c(b, w1)), _c(b, b1)))
        y = b.add(b.matmul(h, _c(b, w2)), _c(b, b2))
        return {"y": b.relu(b.add(y, o["x"])) if residual else y}

    out, wgsl, lanes = _two_forms(ctx, monkeypatch, build, {"x": x}, "matmul/mlp.wgsl")
    assert "ep1_v4(" in wgsl and "ep2_v4(" in wgsl and wgsl != lanes
    assert "ev = ev + vec4<f32>(" in wgsl  # the second product's bias
    assert ("return vec4<f32>(ep1(v.x" in wgsl) == (kind == "prelu")  # a per-channel slope: per lane
    assert ("g: vec4<f32>" in wgsl) == residual
    f = lambda a: a.astype(np.float32).astype(np.float64)  # noqa: E731
    hid = ref_act(x.astype(np.float64) @ f(w1) + f(b1))
    y = hid @ f(w2) + f(b2)
    want = np.maximum(y + x, 0) if residual else y
    np.testing.assert_allclose(out["y"].astype(np.float64), want, rtol=2e-4, atol=2e-4)


def _c(b, a):
    a = np.asarray(a, np.float32)
    return b.constant({"data_type": "float32", "shape": list(a.shape)}, a)
