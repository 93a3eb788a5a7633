"""The ``conv_columns_to_channels`` rule: an NHWC conv2d with one output channel, at most 3 input
channels and a long window along the width computes 4 adjacent output columns as 4 output
channels of a conv over the input's columns packed ``4 * stride`` at a time. The rule is off
unless ``WEBNN_GPU_FORCE_CONV_COLUMNS=on`` (an infinity in the input would make up to 3 more
outputs NaN), which these tests set. On hand-made IR (no GPU), checked by a float64 evaluator of
the IR, near misses included; and on the GPU against float64 NumPy, the rule on and off."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from _ireval import checked_rewrite
from _irb import IR
from helpers import run_graph
from references import ref_conv2d

from webnn_gpu.compiler.rules import conv as conv_rules
from webnn_gpu.compiler.rules.conv import conv_columns_to_channels


@pytest.fixture(autouse=True)
def _rule_on(monkeypatch):
    """The rule is opt-in: every test here asks for it unless it says otherwise."""
    monkeypatch.setenv("WEBNN_GPU_FORCE_CONV_COLUMNS", "on")

#: name -> (input NHWC shape, filter (KH, KW), strides, padding [t, b, l, r], filter layout, bias)
FIRES = {
    "resampler 1x64 stride 2": ((1, 1, 2400, 1), (1, 64), (1, 2), (0, 0, 0, 0), "ohwi", False),
    "padded, bias, 2 rows, oihw": ((2, 5, 150, 2), (3, 16), (1, 1), (1, 1, 8, 7), "oihw", True),
    "output a multiple of 4": ((1, 16, 163, 1), (1, 32), (1, 1), (0, 0, 0, 0), "hwio", False),
    "input columns left unread": ((1, 2, 1010, 3), (2, 51), (2, 3), (0, 0, 0, 0), "ihwo", True),
    "height strided and padded": ((1, 9, 300, 1), (3, 24), (2, 1), (2, 0, 0, 0), "ohwi", False),
}


def _filter(layout: str, kh: int, kw: int, c: int, rng) -> np.ndarray:
    """A seeded filter of one output channel in ``layout``, and the same as OIHW."""
    oihw = rng.standard_normal((1, c, kh, kw))
    return oihw.transpose([("oihw").index(ch) for ch in layout]), oihw


def _ir_conv(ir, case, **extra):
    shape, (kh, kw), strides, pad, layout, bias = case
    n, h, w, c = shape
    x = ir.input(shape)
    f, _ = _filter(layout, kh, kw, c, np.random.default_rng(0))
    ins = [x, ir.const(f)] + ([ir.const([0.25])] if bias else [])
    oh = (h + pad[0] + pad[1] - kh) // strides[0] + 1
    ow = (w + pad[2] + pad[3] - kw) // strides[1] + 1
    return ir.op("conv2d", ins, (n, oh, ow, 1), padding=list(pad), strides=list(strides),
                 dilations=extra.pop("dilations", [1, 1]), groups=1, input_layout="nhwc", filter_layout=layout, **extra)


@pytest.mark.parametrize("case", list(FIRES))
def test_a_long_one_channel_conv_takes_four_columns_as_channels(case):
    ir = IR()
    y = _ir_conv(ir, FIRES[case])
    new = checked_rewrite(conv_columns_to_channels, ir, {"y": y}, rtol=1e-12, atol=1e-12)
    ops = [n.op for n in new]
    conv = next(n for n in new if n.op == "conv2d")
    shape, (kh, kw), strides, pad, _, bias = FIRES[case]
    P = 4 * strides[1]
    assert conv.outputs[0].shape[3] == 4 and conv.inputs[0].shape[3] == P * shape[3]
    assert conv.attrs["strides"] == [strides[0], 1] and conv.attrs["padding"] == [pad[0], pad[1], 0, 0]
    assert conv.attrs["filter_layout"] == "ohwi" and len(conv.inputs) == 2 + bias
    assert ops[ops.index("conv2d") - 1] == "reshape" and ops[ops.index("conv2d") + 1] == "reshape"
    assert new[-1].outputs == [y]
    ow = y.shape[2]
    assert (ops[-1] == "slice") == (ow % 4 != 0)
    if case == "input columns left unread":
        assert ops[0] == "slice"  # only the columns the packed conv reads
    if case == "output a multiple of 4":
        assert ow % 4 == 0 and ops == ["pad", "reshape", "conv2d", "reshape"]


def test_float16_fires_too():
    ir = IR("float16")
    y = _ir_conv(ir, FIRES["resampler 1x64 stride 2"])
    new = checked_rewrite(conv_columns_to_channels, ir, {"y": y}, rtol=2e-3, atol=1e-3)
    conv = next(n for n in new if n.op == "conv2d")
    assert conv.inputs[1].data.dtype == np.float16 and conv.outputs[0].data_type == "float16"


@pytest.mark.parametrize("miss", ["none (it fires)", "two output channels", "four input channels", "dilated along the width",
                                  "short window", "too small", "nchw", "has an epilogue", "filter computed",
                                  "bias computed"])
def test_near_misses_stay_as_they_are(miss):
    ir = IR()
    shape, (kh, kw), strides, pad = (1, 8, 2400, 1), (1, 64), (1, 2), (0, 0, 0, 0)
    c = 4 if miss == "four input channels" else 1
    if miss == "short window":
        kw = 12  # 4 outputs at stride 2 read 24 columns (3 packed pixels) for 12 taps: twice the work
    if miss == "too small":
        shape = (1, 1, 120, 1)  # 29 outputs x 64 taps
    x = ir.input((*shape[:3], c))
    o = 2 if miss == "two output channels" else 1
    f = ir.input((o, kh, kw, c)) if miss == "filter computed" else \
        ir.const(np.random.default_rng(0).standard_normal((o, kh, kw, c)))
    dil = [1, 2] if miss == "dilated along the width" else [1, 1]
    ow = (shape[2] - (kw - 1) * dil[1] - 1) // strides[1] + 1
    ins = [x, f] + ([ir.input((o,))] if miss == "bias computed" else [])
    extra = {"epilogue": [{"op": "relu"}]} if miss == "has an epilogue" else {}
    h = shape[1]
    if miss == "nchw":
        x = ir.input((1, c, h, shape[2]))
        ins[0] = x
        y = ir.op("conv2d", ins, (1, o, h, ow), padding=list(pad), strides=list(strides), dilations=dil, groups=1,
                  input_layout="nchw", filter_layout="ohwi")
    else:
        y = ir.op("conv2d", ins, (1, h, ow, o), padding=list(pad), strides=list(strides), dilations=dil, groups=1,
                  input_layout="nhwc", filter_layout="ohwi", **extra)
    new = conv_columns_to_channels(list(ir.nodes), {"y": y})
    assert (new != ir.nodes) == (miss == "none (it fires)")


def test_off_unless_asked_for(monkeypatch):
    """Without ``WEBNN_GPU_FORCE_CONV_COLUMNS=on`` (or with ``off``) the rule leaves every conv."""
    for value in (None, "off"):
        if value is None:
            monkeypatch.delenv("WEBNN_GPU_FORCE_CONV_COLUMNS")
        else:
            monkeypatch.setenv("WEBNN_GPU_FORCE_CONV_COLUMNS", value)
        ir = IR()
        y = _ir_conv(ir, FIRES["resampler 1x64 stride 2"])
        assert conv_columns_to_channels(list(ir.nodes), {"y": y}) == ir.nodes


def test_an_infinity_stays_in_its_windows_by_default(ctx, monkeypatch):
    """Why the rule is opt-in: with it, an infinity in the input makes the outputs beside its
    windows NaN (their packed windows multiply it by a zero tap); by default (rule off) exactly
    the outputs whose window holds it are non-finite, as in float64 NumPy."""
    monkeypatch.setenv("WEBNN_GPU_PLAN_CACHE", "0")
    monkeypatch.delenv("WEBNN_GPU_FORCE_CONV_COLUMNS")
    build, oihw = _build(FIRES["resampler 1x64 stride 2"], "float32")
    x = np.random.default_rng(3).standard_normal((1, 1, 2400, 1)).astype(np.float32)
    x[0, 0, 1000, 0] = np.inf
    with np.errstate(invalid="ignore"):
        want = ref_conv2d(x.astype(np.float64).transpose(0, 3, 1, 2), oihw, (0, 0, 0, 0), (1, 2)).transpose(0, 2, 3, 1)
    got = run_graph(ctx, build, {"x": x})["y"]
    np.testing.assert_array_equal(np.isfinite(got), np.isfinite(want))


def _build(case, dt):
    shape, (kh, kw), strides, pad, layout, bias = case
    f, oihw = _filter(layout, kh, kw, shape[3], np.random.default_rng(1))
    np_dt = np.float16 if dt == "float16" else np.float32

    def build(b, ops):
        w = b.constant({"data_type": dt, "shape": list(f.shape)}, f.astype(np_dt))
        kw_ = {"bias": b.constant({"data_type": dt, "shape": [1]}, np.array([0.25], np_dt))} if bias else {}
        return {"y": b.conv2d(ops["x"], w, padding=list(pad), strides=list(strides), input_layout="nhwc",
                              filter_layout=layout, **kw_)}

    return build, oihw.astype(np_dt).astype(np.float64)


@pytest.mark.parametrize("dt", ["float32", "float16"])
@pytest.mark.parametrize("case", ["resampler 1x64 stride 2", "padded, bias, 2 rows, oihw", "input columns left unread",
                                  "height strided and padded"])
def test_matches_float64_numpy_with_the_rule_on_and_off(ctx, monkeypatch, caplog, case, dt):
    """Against float64 NumPy (float32: 1e-5 of the output's magnitude; float16: 3e-3), the rule on
    and off, on the GPU (with the plan cache off, so each build runs the rules); the rule's log
    says it rewrote the conv when on and only then."""
    monkeypatch.setenv("WEBNN_GPU_PLAN_CACHE", "0")
    shape, _, strides, pad, _, bias = FIRES[case]
    build, oihw = _build(FIRES[case], dt)
    x = np.random.default_rng(2).standard_normal(shape).astype(np.float16 if dt == "float16" else np.float32)
    want = ref_conv2d(x.astype(np.float64).transpose(0, 3, 1, 2), oihw, pad, strides).transpose(0, 2, 3, 1)
    want = want + (0.25 if bias else 0.0)
    tol = (3e-3 if dt == "float16" else 1e-5) * np.abs(want).max()
    monkeypatch.setattr(conv_rules, "DEBUG", 2)  # the rule logs each conv it rewrites
    for knob in ("on", "off"):
        monkeypatch.setenv("WEBNN_GPU_FORCE_CONV_COLUMNS", knob)
        with caplog.at_level(logging.DEBUG, logger=conv_rules.log.name):
            caplog.clear()
            got = run_graph(ctx, build, {"x": x})["y"]
        fired = any("conv_columns_to_channels: conv2d" in r.getMessage() for r in caplog.records)
        assert fired == (knob == "on")
        assert got.shape == want.shape
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=0, atol=tol, err_msg=f"rule {knob}")
