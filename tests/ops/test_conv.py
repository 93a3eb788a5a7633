"""conv2d and conv_transpose2d against NumPy float64 references, every kernel variant and
layout pair, the fused-epilogue hook, and the validation errors.

The references loop over the filter window explicitly (one einsum over the channels per tap)
on nchw / oihw (iohw) data; other layouts are transposes of the same data. Tolerance: the f32
accumulation bound ``4 * K * 2**-24 * conv(|x|, |w|)`` with ``K = KH * KW * C / groups``, plus
half an ulp of the output type (float16: ``2**-11 * |ref|``).
"""

from __future__ import annotations

import numpy as np
import pytest

import webnn_gpu as webnn
from helpers import check_accumulated, run_graph
from references import ref_conv2d
from webnn_gpu.errors import MLTypeError, OperationError
from webnn_gpu.ops import _epilogue

CONV_FILTER = {"oihw": (0, 1, 2, 3), "hwio": (2, 3, 1, 0), "ohwi": (0, 2, 3, 1), "ihwo": (1, 2, 3, 0)}
CONVT_FILTER = {"iohw": (0, 1, 2, 3), "hwoi": (2, 3, 1, 0), "ohwi": (1, 2, 3, 0)}


# ---------------------------------------------------------------- references
def ref_conv_transpose2d(x, w, out_hw, padding=(0, 0, 0, 0), strides=(1, 1), dilations=(1, 1), groups=1):
    """nchw x iohw -> nchw, float64: scatter every input pixel through every tap, then crop."""
    n, c, h, wd = x.shape
    _, opg, kh_, kw_ = w.shape
    i = c // groups
    oh, ow = out_hw
    full = np.zeros((n, opg * groups, (h - 1) * strides[0] + (kh_ - 1) * dilations[0] + 1 + oh,
                     (wd - 1) * strides[1] + (kw_ - 1) * dilations[1] + 1 + ow))
    for g in range(groups):
        for kh in range(kh_):
            for kw in range(kw_):
                contrib = np.einsum("nchw,co->nohw", x[:, g * i:(g + 1) * i], w[g * i:(g + 1) * i, :, kh, kw])
                r0, c0 = kh * dilations[0], kw * dilations[1]
                full[:, g * opg:(g + 1) * opg, r0:r0 + (h - 1) * strides[0] + 1:strides[0],
                     c0:c0 + (wd - 1) * strides[1] + 1:strides[1]] += contrib
    return full[:, :, padding[0]:padding[0] + oh, padding[2]:padding[2] + ow]


# ---------------------------------------------------------------- conv2d
def conv_case(n, c, h, w, o, kh, kw, padding=(0, 0, 0, 0), strides=(1, 1), dilations=(1, 1), groups=1,
              input_layout="nchw", filter_layout="oihw", bias=False, dtype=np.float32, constant=True):
    return dict(n=n, c=c, h=h, w=w, o=o, kh=kh, kw=kw, padding=padding, strides=strides, dilations=dilations,
                groups=groups, input_layout=input_layout, filter_layout=filter_layout, bias=bias, dtype=dtype,
                constant=constant)


CONV_CASES = {
    "wpt-like": conv_case(1, 1, 5, 5, 1, 3, 3),
    "stride-dilation-pad": conv_case(2, 3, 11, 10, 5, 3, 3, (1, 2, 0, 1), (2, 1), (1, 2)),
    "first-layer-nhwc": conv_case(1, 3, 19, 23, 16, 3, 3, (0, 1, 0, 1), (2, 2), input_layout="nhwc",
                                  filter_layout="ohwi", bias=True),
    "nhwc-3x3-c16": conv_case(1, 16, 9, 13, 12, 3, 3, (1, 1, 1, 1), input_layout="nhwc", filter_layout="ohwi",
                              bias=True),
    # conv/block.wgsl: few input and output channels, a block of pixels per invocation
    "block-c4-dilated-batch2": conv_case(2, 4, 10, 9, 8, 5, 5, (2, 2, 3, 1), (1, 2), (2, 1), input_layout="nhwc",
                                         filter_layout="hwio", bias=True),
    # past BLOCK_MAX_WEIGHTS filter vec4s (5x5 x 3 -> 24: 450) the implicit GEMM instead
    "first-layer-5x5-nhwc": conv_case(1, 3, 13, 11, 24, 5, 5, (1, 2, 1, 2), (2, 2), input_layout="nhwc",
                                      filter_layout="ohwi", bias=True),
    "block-c1-f16": conv_case(1, 1, 12, 10, 4, 3, 3, (1, 1, 1, 1), input_layout="nhwc", filter_layout="ihwo",
                              bias=True, dtype=np.float16),
    "grouped-nchw": conv_case(2, 8, 9, 11, 12, 3, 2, (2, 0, 1, 2), (2, 1), (1, 2), groups=4, filter_layout="hwio",
                              bias=True),
    "nchw-3x3-c8": conv_case(2, 8, 7, 9, 6, 3, 3, (1, 1, 1, 1), (1, 2), bias=True),
    "grouped-nchw-i4": conv_case(1, 8, 6, 6, 4, 3, 3, (1, 0, 1, 0), groups=2, filter_layout="ohwi", bias=True),
    "grouped-nhwc-vec": conv_case(1, 16, 7, 9, 8, 3, 3, (1, 1, 1, 1), groups=2, input_layout="nhwc",
                                  filter_layout="hwio", bias=True),
    "pointwise-nhwc": conv_case(2, 16, 9, 7, 24, 1, 1, input_layout="nhwc", filter_layout="ohwi", bias=True),
    # small products (matmul/small.wgsl): squeeze-and-excitation 1x1 convs on pooled features
    "pointwise-se-nhwc": conv_case(1, 24, 1, 1, 10, 1, 1, input_layout="nhwc", filter_layout="ohwi", bias=True),
    "pointwise-se-nchw": conv_case(2, 9, 2, 2, 6, 1, 1, bias=True),
    "pointwise-se-f16": conv_case(1, 16, 1, 1, 8, 1, 1, input_layout="nhwc", filter_layout="hwio", bias=True,
                                  dtype=np.float16),
    "pointwise-nhwc-o5": conv_case(1, 12, 6, 7, 5, 1, 1, input_layout="nhwc", filter_layout="hwio"),
    "pointwise-nchw": conv_case(2, 8, 6, 6, 12, 1, 1, bias=True),
    "pointwise-nchw-odd": conv_case(1, 5, 5, 3, 7, 1, 1, filter_layout="ihwo", bias=True),
    "depthwise-3x3": conv_case(1, 20, 11, 13, 20, 3, 3, (1, 1, 1, 1), groups=20, input_layout="nhwc",
                               filter_layout="ihwo", bias=True),
    "depthwise-5x5-s2": conv_case(2, 8, 12, 11, 8, 5, 5, (1, 2, 1, 2), (2, 2), groups=8, input_layout="nhwc",
                                  filter_layout="hwio", bias=True),
    "depthwise-c6-dilated": conv_case(1, 6, 10, 9, 6, 3, 3, (2, 2, 2, 2), dilations=(2, 2), groups=6,
                                      input_layout="nhwc", filter_layout="oihw"),
    "depthwise-nchw": conv_case(1, 4, 6, 6, 4, 2, 2, groups=4),
    "depthwise-7x7-s2": conv_case(1, 8, 17, 15, 8, 7, 7, (3, 3, 3, 3), (2, 2), groups=8, input_layout="nhwc",
                                  filter_layout="ihwo", bias=True),
    "input-filter": conv_case(1, 8, 7, 6, 8, 3, 3, (1, 1, 1, 1), input_layout="nhwc", filter_layout="ohwi",
                              constant=False),
    "input-filter-dw": conv_case(1, 8, 7, 6, 8, 3, 3, (1, 1, 1, 1), groups=8, input_layout="nhwc",
                                 filter_layout="oihw", constant=False, bias=True),
    "float16-nhwc": conv_case(1, 8, 9, 9, 8, 3, 3, (1, 1, 1, 1), input_layout="nhwc", filter_layout="hwio",
                              bias=True, dtype=np.float16),
    "float16-dw": conv_case(1, 12, 8, 8, 12, 3, 3, (1, 1, 1, 1), (2, 2), groups=12, input_layout="nhwc",
                            filter_layout="ihwo", bias=True, dtype=np.float16),
    "float16-pointwise": conv_case(1, 8, 4, 4, 4, 1, 1, bias=True, dtype=np.float16),
}
# every layout pair, with groups, strides, dilations, asymmetric padding and bias
for _il in ("nchw", "nhwc"):
    for _fl in CONV_FILTER:
        CONV_CASES[f"layouts-{_il}-{_fl}"] = conv_case(1, 4, 7, 8, 6, 3, 2, (1, 0, 0, 2), (2, 1), (1, 2), groups=2,
                                                       input_layout=_il, filter_layout=_fl, bias=True)


def applicable(case) -> list[str]:
    """The conv2d variants that apply to a case (forcing another one falls back)."""
    out = ["", "direct", "gemm"]
    if case["kh"] == case["kw"] == 1 and case["strides"] == (1, 1) and case["padding"] == (0, 0, 0, 0) \
            and case["groups"] == 1:
        out.append("pointwise")
    if case["input_layout"] == "nhwc" and case["groups"] == case["c"] == case["o"]:
        out.append("depthwise")
    if (case["input_layout"] == "nhwc" and case["groups"] == 1 and case["c"] <= 4 and case["o"] % 4 == 0
            and "pointwise" not in out):
        out.append("block")
    return out


def run_conv(ctx, rng, case, *, epilogue=None, extra=None, tensor_path=False):
    """Build, run and return (output as nchw float64, reference nchw, |reference|, K)."""
    dt = case["dtype"]
    x = rng.uniform(-1, 1, (case["n"], case["c"], case["h"], case["w"])).astype(dt)
    wt = rng.uniform(-1, 1, (case["o"], case["c"] // case["groups"], case["kh"], case["kw"])).astype(dt)
    b = rng.uniform(-1, 1, case["o"]).astype(dt)
    nhwc = case["input_layout"] == "nhwc"
    xin = np.ascontiguousarray(x.transpose(0, 2, 3, 1) if nhwc else x)
    win = np.ascontiguousarray(wt.transpose(CONV_FILTER[case["filter_layout"]]))
    inputs = {"x": xin} | ({} if case["constant"] else {"w": win}) | (extra or {})
    opts = {k: list(case[k]) for k in ("padding", "strides", "dilations")}

    def build(bld, o):
        w = bld.constant(win) if case["constant"] else o["w"]
        y = bld.conv2d(o["x"], w, groups=case["groups"], input_layout=case["input_layout"],
                       filter_layout=case["filter_layout"], bias=bld.constant(b) if case["bias"] else None, **opts)
        if epilogue:
            epilogue(y, o)
        return {"y": y}

    got = run_graph(ctx, build, inputs, tensor_path=tensor_path)["y"].astype(np.float64)
    if nhwc:
        got = got.transpose(0, 3, 1, 2)
    kw = dict(padding=case["padding"], strides=case["strides"], dilations=case["dilations"], groups=case["groups"])
    ref = ref_conv2d(x.astype(np.float64), wt.astype(np.float64), **kw)
    absref = ref_conv2d(np.abs(x.astype(np.float64)), np.abs(wt.astype(np.float64)), **kw)
    if case["bias"]:
        ref = ref + b.astype(np.float64)[None, :, None, None]
        absref = absref + np.abs(b.astype(np.float64))[None, :, None, None]
    return got, ref, absref, case["kh"] * case["kw"] * case["c"] // case["groups"]


@pytest.fixture
def force(monkeypatch):
    def set_(algo, variant):
        if variant:
            monkeypatch.setenv(f"WEBNN_GPU_FORCE_{algo.upper()}", variant)
        else:
            monkeypatch.delenv(f"WEBNN_GPU_FORCE_{algo.upper()}", raising=False)
    return set_


@pytest.mark.parametrize("name, variant", [(n, v) for n, c in CONV_CASES.items() for v in applicable(c)],
                         ids=lambda p: p or "auto")
def test_conv2d(ctx, rng, force, name, variant):
    force("conv", variant)
    case = CONV_CASES[name]
    got, ref, absref, k = run_conv(ctx, rng, case, tensor_path=name == "grouped-nhwc-vec")
    check_accumulated(got, ref, absref, k, case["dtype"], f"{name} [{variant or 'auto'}]")


def _templates(ctx, case) -> set[str]:
    bld = webnn.MLGraphBuilder(ctx)
    dt = webnn._dtypes.from_numpy(np.dtype(case["dtype"]))
    shape = ([case["n"], case["h"], case["w"], case["c"]] if case["input_layout"] == "nhwc"
             else [case["n"], case["c"], case["h"], case["w"]])
    wshape = np.array([case["o"], case["c"] // case["groups"], case["kh"], case["kw"]])[
        list(CONV_FILTER[case["filter_layout"]])]
    x = bld.input("x", {"data_type": dt, "shape": shape})
    w = bld.input("w", {"data_type": dt, "shape": [int(d) for d in wshape]})
    y = bld.conv2d(x, w, groups=case["groups"], input_layout=case["input_layout"],
                   filter_layout=case["filter_layout"],
                   **{k: list(case[k]) for k in ("padding", "strides", "dilations")})
    g = bld.build({"y": y})
    return {s.template for s in g._steps if hasattr(s, "template")}


@pytest.mark.parametrize("name, variant, template", [
    ("pointwise-nhwc", "", "matmul/tile.wgsl"),
    ("pointwise-se-nhwc", "", "matmul/small.wgsl"),
    ("pointwise-se-nchw", "", "matmul/small.wgsl"),
    ("depthwise-3x3", "", "conv/depthwise.wgsl"),
    ("nhwc-3x3-c16", "", "matmul/tile.wgsl"),
    ("depthwise-nchw", "", "conv/depthwise.wgsl"),  # nchw_conv_to_nhwc: in NHWC between two transposes
    ("pointwise-nhwc", "direct", "conv/direct.wgsl"),
    ("depthwise-3x3", "gemm", "matmul/tile.wgsl"),
    ("nhwc-3x3-c16", "depthwise", "matmul/tile.wgsl"),  # not applicable: automatic choice
    ("first-layer-nhwc", "", "conv/block.wgsl"),
    ("first-layer-nhwc", "gemm", "matmul/tile.wgsl"),
    ("nhwc-3x3-c16", "block", "matmul/tile.wgsl"),  # 16 input channels: automatic choice
    ("first-layer-5x5-nhwc", "", "matmul/tile.wgsl"),  # a filter too large to hold: no block
])
def test_conv2d_variant_choice(ctx, force, name, variant, template):
    force("conv", variant)
    assert template in _templates(ctx, CONV_CASES[name])


# conv/block.wgsl reading its input rows as vec4s (W * C a multiple of 4): 3 channels, stride 2, the
# padding misaligning the row segment (pl = 1: one more vec4), reads past the right edge and the
# buffer's end (padding 2 at the end), a 5x5 window, 2 channels, float16
BLOCK_VEC4_CASES = {
    "pad-s2-batch2": conv_case(2, 3, 14, 12, 16, 3, 3, (1, 2, 1, 2), (2, 2), input_layout="nhwc",
                               filter_layout="ohwi", bias=True),
    "5x5-o4": conv_case(1, 3, 11, 20, 4, 5, 5, (2, 2, 2, 2), (2, 2), input_layout="nhwc", filter_layout="hwio",
                        bias=True),
    "c2-s1": conv_case(1, 2, 7, 6, 12, 3, 3, (1, 1, 1, 1), input_layout="nhwc", filter_layout="ohwi"),
    "f16": conv_case(1, 3, 9, 8, 12, 3, 3, (0, 1, 0, 1), (2, 2), input_layout="nhwc", filter_layout="ohwi",
                     bias=True, dtype=np.float16),
}


def _block_wgsl(ctx, case) -> str:
    """The conv/block.wgsl text of ``case`` built as run_conv builds it (the same pipeline)."""
    bld = webnn.MLGraphBuilder(ctx)
    dt = np.dtype(case["dtype"])
    x = bld.input("x", {"data_type": webnn._dtypes.from_numpy(dt), "shape": [case["n"], case["h"], case["w"], case["c"]]})
    wshape = np.array([case["o"], case["c"], case["kh"], case["kw"]])[list(CONV_FILTER[case["filter_layout"]])]
    y = bld.conv2d(x, bld.constant(np.ones([int(d) for d in wshape], dt)), input_layout="nhwc",
                   filter_layout=case["filter_layout"], bias=bld.constant(np.ones(case["o"], dt)) if case["bias"] else None,
                   **{k: list(case[k]) for k in ("padding", "strides", "dilations")})
    (text,) = [st.wgsl for st in bld.build({"y": y})._steps if getattr(st, "template", "") == "conv/block.wgsl"]
    return text


@pytest.mark.parametrize("name", list(BLOCK_VEC4_CASES))
def test_conv2d_block_vec4_rows(ctx, rng, name):
    """The block kernel with vec4 row loads is exact at its boundaries."""
    case = BLOCK_VEC4_CASES[name]
    if case["dtype"] == np.float16 and "float16" not in ctx.supported_data_types:
        pytest.skip("no shader-f16")
    # float16 rows are read as vec2<u32> pairs of halves (conv.BLOCK_HALF_PAIRS), float32 ones as
    # vec4s or, on the lane-loop profile with shader-int64, u64 words of 4 values (conv.BLOCK_INPUT_WORDS)
    words = ctx._tuning == "lane-loop" and "shader-int64" in ctx.features
    f32_rows = "x: array<vec2<u64>>" if words else "x: array<vec4<"
    assert ("x: array<vec2<u32>>" if case["dtype"] == np.float16 else f32_rows) in _block_wgsl(ctx, case)
    got, ref, absref, k = run_conv(ctx, rng, case)
    check_accumulated(got, ref, absref, k, case["dtype"], f"block vec4 {name}")


def test_conv2d_block_scalar_rows(ctx):
    """Rows whose values are not a multiple of 4 (23 x 3) keep scalar loads (the numbers:
    test_conv2d)."""
    assert "x: array<vec4<" not in _block_wgsl(ctx, CONV_CASES["first-layer-nhwc"])


def test_conv2d_block_vec4_prelu_residual(ctx, rng):
    """The block kernel's vec4 rows under a PReLU with a per-channel slope, then a residual add."""
    case = BLOCK_VEC4_CASES["pad-s2-batch2"]
    oh = (case["h"] + 3 - 3) // 2 + 1
    ow = (case["w"] + 3 - 3) // 2 + 1
    slope = rng.uniform(0.05, 0.5, case["o"]).astype(np.float32)
    res = rng.uniform(-1, 1, (case["n"], oh, ow, case["o"])).astype(np.float32)

    def epilogue(y, o):
        _attach(y, [{"op": "prelu", "operand": 0, "axis": 3}, {"op": "add", "operand": 1}], [o["slope"], o["res"]])

    got, ref, absref, k = run_conv(ctx, rng, case, epilogue=epilogue, extra={"slope": slope, "res": res})
    want = np.where(ref >= 0, ref, slope.astype(np.float64)[None, :, None, None] * ref) \
        + res.astype(np.float64).transpose(0, 3, 1, 2)
    err = np.abs(got - want)
    assert (err <= 1e-5 * (1 + absref + np.abs(want))).all(), f"worst error {err.max():.3e}"


@pytest.mark.parametrize("name", ["depthwise-3x3", "depthwise-5x5-s2", "depthwise-c6-dilated"])
def test_conv2d_depthwise_integer_division(ctx, rng, force, monkeypatch, name):
    """The depthwise kernel's integer-division index split (used past DW_FDIV_MAX invocations)."""
    from webnn_gpu.ops import conv
    monkeypatch.setattr(conv, "DW_FDIV_MAX", 0)
    force("conv", "depthwise")
    case = CONV_CASES[name]
    got, ref, absref, k = run_conv(ctx, rng, case)
    check_accumulated(got, ref, absref, k, case["dtype"], f"{name} [integer division]")


@pytest.mark.parametrize("tuning", ["lane-loop", "default"])
@pytest.mark.parametrize("name", ["depthwise-3x3", "depthwise-5x5-s2", "depthwise-7x7-s2", "float16-dw",
                                  "pointwise-nhwc", "nhwc-3x3-c16", "float16-pointwise", "first-layer-nhwc",
                                  "block-c1-f16"])
def test_conv2d_under_each_tuning_profile(ctx, rng, monkeypatch, tuning, name):
    """The tile and depthwise blocks another adapter's tuning profile picks stay exact (the
    suite's lavapipe picks one profile; this runs the other's kernels too)."""
    if name.startswith("float16") and "float16" not in ctx.supported_data_types:
        pytest.skip("no shader-f16")
    monkeypatch.setattr(ctx, "_tuning", tuning)
    case = CONV_CASES[name]
    got, ref, absref, k = run_conv(ctx, rng, case)
    check_accumulated(got, ref, absref, k, case["dtype"], f"{name} [{tuning}]")


def test_conv2d_depthwise_shares_pipelines(ctx):
    """Depthwise layers that differ only in size, channels or padding share one pipeline (outputs
    wider than DW_TW_WHOLE: a narrower one is one column block of its own width)."""
    texts = set()
    for h, w, c, pad in ((9, 9, 8, (1, 1, 1, 1)), (16, 12, 20, (1, 1, 1, 1)), (5, 10, 12, (0, 1, 1, 0))):
        bld = webnn.MLGraphBuilder(ctx)
        x = bld.input("x", {"data_type": "float32", "shape": [1, h, w, c]})
        y = bld.conv2d(x, bld.constant(np.ones((3, 3, 1, c), np.float32)), padding=list(pad), groups=c,
                       input_layout="nhwc", filter_layout="hwio")
        g = bld.build({"y": y})
        texts |= {s.wgsl for s in g._steps if getattr(s, "template", "") == "conv/depthwise.wgsl"}
    assert len(texts) == 1


def test_conv2d_pointwise_shares_pipelines(ctx, rng):
    """Pointwise layers that differ in image size and input channels share one tile pipeline
    (sizes from the parameter buffer), and each computes its own result."""
    texts = set()
    for h, w, c in ((64, 64, 16), (128, 32, 24), (80, 64, 36)):
        x = rng.uniform(-1, 1, (1, h, w, c)).astype(np.float32)
        wt = rng.uniform(-1, 1, (16, 1, 1, c)).astype(np.float32)
        bld = webnn.MLGraphBuilder(ctx)
        xi = bld.input("x", {"data_type": "float32", "shape": [1, h, w, c]})
        y = bld.conv2d(xi, bld.constant(wt), input_layout="nhwc", filter_layout="ohwi")
        g = bld.build({"y": y})
        texts |= {s.wgsl for s in g._steps if getattr(s, "template", "") == "matmul/tile.wgsl"}
        got = ctx.compute(g, {"x": x})["y"]
        ref = x.astype(np.float64) @ wt[:, 0, 0, :].T.astype(np.float64)
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
    assert len(texts) == 1


def test_conv2d_bad_forced_variant(ctx, force):
    force("conv", "winograd")
    with pytest.raises(OperationError, match="WEBNN_GPU_FORCE_CONV='winograd'"):
        _templates(ctx, CONV_CASES["wpt-like"])


def test_conv2d_large_dispatch(ctx, rng, force):
    """More than 65,535 workgroups in one dimension: 4.3M outputs on the direct kernel."""
    force("conv", "direct")
    x = rng.uniform(-1, 1, (1, 1, 2100, 2050)).astype(np.float32)
    out = run_graph(ctx, lambda bld, o: {"y": bld.conv2d(o["x"], bld.constant(np.full((1, 1, 1, 1), 0.5, np.float32)))},
                    {"x": x}, tensor_path=False)["y"]
    np.testing.assert_array_equal(out, x * np.float32(0.5))


# ---------------------------------------------------------------- conv_transpose2d
def convt_case(n, c, h, w, opg, kh, kw, padding=(0, 0, 0, 0), strides=(1, 1), dilations=(1, 1), groups=1,
               output_padding=(0, 0), output_sizes=None, input_layout="nchw", filter_layout="iohw", bias=False,
               dtype=np.float32, constant=True):
    return dict(n=n, c=c, h=h, w=w, opg=opg, kh=kh, kw=kw, padding=padding, strides=strides, dilations=dilations,
                groups=groups, output_padding=output_padding, output_sizes=output_sizes, input_layout=input_layout,
                filter_layout=filter_layout, bias=bias, dtype=dtype, constant=constant)


CONVT_CASES = {
    "wpt-like": convt_case(1, 1, 3, 3, 2, 3, 3, strides=(3, 2)),
    "pad-stride-dilation": convt_case(2, 4, 5, 4, 3, 3, 3, (1, 0, 2, 1), (2, 2), (1, 2), bias=True),
    "output-padding": convt_case(1, 3, 4, 5, 2, 3, 3, (1, 1, 1, 1), (3, 2), output_padding=(2, 1), bias=True),
    "output-sizes": convt_case(2, 6, 4, 5, 4, 3, 2, (1, 2, 0, 1), (2, 3), (2, 1), groups=3, output_sizes=(9, 14),
                               filter_layout="ohwi", bias=True),
    "segmenter-2x2-s2": convt_case(1, 16, 9, 7, 1, 2, 2, strides=(2, 2), input_layout="nhwc", bias=True),
    "nhwc-vec-o4": convt_case(1, 8, 5, 6, 4, 3, 3, (1, 1, 1, 1), (2, 2), output_padding=(1, 1),
                              input_layout="nhwc", filter_layout="hwoi", bias=True),
    "dilated-groups": convt_case(1, 8, 6, 6, 4, 4, 4, (1, 1, 1, 1), (2, 2), (2, 2), groups=2, input_layout="nhwc",
                                 bias=True),
    "input-filter": convt_case(1, 8, 5, 5, 1, 3, 3, (1, 1, 1, 1), (2, 2), output_padding=(1, 1),
                               input_layout="nhwc", constant=False, bias=True),
    "float16": convt_case(1, 8, 6, 6, 4, 3, 3, (1, 1, 1, 1), (2, 2), groups=2, input_layout="nhwc",
                          filter_layout="hwoi", bias=True, dtype=np.float16),
    # filter size == stride: the taps tile the output (conv/transpose_tiled.wgsl)
    "tiled-crop-nchw": convt_case(1, 6, 5, 4, 4, 2, 3, (1, 0, 0, 2), (2, 3), groups=2, bias=True),
    "tiled-nhwc-f16": convt_case(2, 8, 3, 4, 8, 3, 3, strides=(3, 3), input_layout="nhwc", filter_layout="ohwi",
                                 bias=True, dtype=np.float16),
    # a small constant filter with every output channel in one invocation: weights baked in
    "tiled-baked-nchw-c6": convt_case(1, 6, 5, 4, 3, 2, 2, (1, 0, 0, 1), (2, 2), bias=True),
    "tiled-baked-f16": convt_case(1, 8, 3, 3, 2, 2, 2, strides=(2, 2), input_layout="nhwc", filter_layout="iohw",
                                  bias=True, dtype=np.float16),
    "tiled-input-filter": convt_case(1, 8, 4, 5, 2, 2, 2, (0, 1, 1, 0), (2, 2), input_layout="nhwc",
                                     filter_layout="hwoi", constant=False),
}
for _il in ("nchw", "nhwc"):
    for _fl in CONVT_FILTER:
        CONVT_CASES[f"layouts-{_il}-{_fl}"] = convt_case(1, 4, 4, 5, 3, 3, 2, (1, 0, 0, 1), (2, 1), (1, 2), groups=2,
                                                         output_padding=(1, 0), input_layout=_il, filter_layout=_fl,
                                                         bias=True)


def run_convt(ctx, rng, case, *, epilogue=None, tensor_path=False):
    dt = case["dtype"]
    x = rng.uniform(-1, 1, (case["n"], case["c"], case["h"], case["w"])).astype(dt)
    wt = rng.uniform(-1, 1, (case["c"], case["opg"], case["kh"], case["kw"])).astype(dt)
    o = case["opg"] * case["groups"]
    b = rng.uniform(-1, 1, o).astype(dt)
    nhwc = case["input_layout"] == "nhwc"
    xin = np.ascontiguousarray(x.transpose(0, 2, 3, 1) if nhwc else x)
    win = np.ascontiguousarray(wt.transpose(CONVT_FILTER[case["filter_layout"]]))
    inputs = {"x": xin} | ({} if case["constant"] else {"w": win})
    opts = {k: list(case[k]) for k in ("padding", "strides", "dilations", "output_padding")}
    if case["output_sizes"] is not None:
        opts["output_sizes"] = list(case["output_sizes"])

    def build(bld, ops):
        w = bld.constant(win) if case["constant"] else ops["w"]
        y = bld.conv_transpose2d(ops["x"], w, groups=case["groups"], input_layout=case["input_layout"],
                                 filter_layout=case["filter_layout"],
                                 bias=bld.constant(b) if case["bias"] else None, **opts)
        if epilogue:
            epilogue(y, ops)
        return {"y": y}

    got = run_graph(ctx, build, inputs, tensor_path=tensor_path)["y"].astype(np.float64)
    if nhwc:
        got = got.transpose(0, 3, 1, 2)
    s, d, p = case["strides"], case["dilations"], case["padding"]
    if case["output_sizes"] is not None:
        out_hw = case["output_sizes"]
    else:
        out_hw = tuple((case[a] - 1) * s[i] + (case[k] - 1) * d[i] + 1 - p[2 * i] - p[2 * i + 1]
                       + case["output_padding"][i] for i, (a, k) in enumerate((("h", "kh"), ("w", "kw"))))
    kw = dict(padding=p, strides=s, dilations=d, groups=case["groups"])
    ref = ref_conv_transpose2d(x.astype(np.float64), wt.astype(np.float64), out_hw, **kw)
    absref = ref_conv_transpose2d(np.abs(x.astype(np.float64)), np.abs(wt.astype(np.float64)), out_hw, **kw)
    if case["bias"]:
        ref = ref + b.astype(np.float64)[None, :, None, None]
        absref = absref + np.abs(b.astype(np.float64))[None, :, None, None]
    return got, ref, absref, case["kh"] * case["kw"] * case["c"] // case["groups"]


def tiled(case) -> bool:
    """Whether conv_transpose2d runs the tiled kernel (filter size == stride, nothing dilated
    or added by output padding)."""
    return (case["kh"], case["kw"]) == tuple(case["strides"]) and case["dilations"] == (1, 1) \
        and case["output_padding"] == (0, 0) and case["output_sizes"] is None


@pytest.mark.parametrize("name, variant", [(n, v) for n, c in CONVT_CASES.items()
                                           for v in ([""] + (["direct", "tiled"] if tiled(c) else []))],
                         ids=lambda p: p or "auto")
def test_conv_transpose2d(ctx, rng, force, name, variant):
    force("conv_transpose", variant)
    case = CONVT_CASES[name]
    got, ref, absref, k = run_convt(ctx, rng, case, tensor_path=name == "nhwc-vec-o4")
    check_accumulated(got, ref, absref, k, case["dtype"], name)


# ---------------------------------------------------------------- fused epilogue
def _attach(y, steps, operands=()):
    """Set an epilogue on the node producing ``y`` by hand (what the fusion pass will do)."""
    _epilogue.attach(y._value.producer, steps, [v._value for v in operands])


def _hswish(v):
    return v * np.clip(v + 3, 0, 6) / 6


@pytest.mark.parametrize("name, variant", [("pointwise-nhwc", ""), ("pointwise-nchw", ""), ("depthwise-3x3", ""),
                                           ("pointwise-se-nhwc", ""), ("pointwise-se-nchw", ""),
                                           ("nhwc-3x3-c16", "gemm"), ("grouped-nchw", "direct"),
                                           ("grouped-nchw", "gemm"), ("nchw-3x3-c8", "gemm"), ("float16-nhwc", "")])
def test_conv2d_epilogue(ctx, rng, force, name, variant):
    """Bias, then hard-swish, then a residual add of a same-shaped tensor, then clamp."""
    force("conv", variant)
    case = CONV_CASES[name]
    nhwc = case["input_layout"] == "nhwc"
    oh = (case["h"] + case["padding"][0] + case["padding"][1] - (case["kh"] - 1) * case["dilations"][0] - 1) \
        // case["strides"][0] + 1
    ow = (case["w"] + case["padding"][2] + case["padding"][3] - (case["kw"] - 1) * case["dilations"][1] - 1) \
        // case["strides"][1] + 1
    res = rng.uniform(-1, 1, (case["n"], case["o"], oh, ow)).astype(case["dtype"])
    res_in = np.ascontiguousarray(res.transpose(0, 2, 3, 1) if nhwc else res)
    steps = [{"op": "hard_swish"}, {"op": "add", "operand": 0}, {"op": "clamp", "min_value": -0.5, "max_value": 2.0}]
    got, ref, absref, k = run_conv(ctx, rng, case, epilogue=lambda y, o: _attach(y, steps, [o["res"]]),
                                   extra={"res": res_in}, tensor_path=True)
    want = np.clip(_hswish(ref) + res.astype(np.float64), -0.5, 2.0)
    tol = 1e-5 if case["dtype"] == np.float32 else 4e-3
    err = np.abs(got - want)
    assert (err <= tol * (1 + absref + np.abs(want))).all(), f"worst error {err.max():.3e}"


def test_conv_transpose2d_epilogue(ctx, rng):
    case = CONVT_CASES["segmenter-2x2-s2"]
    got, ref, absref, _ = run_convt(ctx, rng, case, epilogue=lambda y, o: _attach(y, [{"op": "sigmoid"}]))
    np.testing.assert_allclose(got, 1 / (1 + np.exp(-ref)), atol=1e-6, rtol=1e-5)


# ---------------------------------------------------------------- validation
def _ops(ctx, **shapes):
    bld = webnn.MLGraphBuilder(ctx)
    ops = {}
    for name, spec in shapes.items():
        dt, shape = spec if isinstance(spec[0], str) else ("float32", spec)
        ops[name] = bld.input(name, {"data_type": dt, "shape": list(shape)})
    return bld, ops


CONV2D_ERRORS = [
    (dict(x=[1, 5, 5]), {}, "'input': expected a 4-D operand, got shape \\[1, 5, 5\\]"),
    (dict(w=[3, 3]), {}, "'filter': expected a 4-D operand"),
    (dict(x=("int32", [1, 1, 5, 5]), w=("int32", [1, 1, 3, 3])), {},
     "'input': expected an operand of data type float32"),
    (dict(w=("float16", [1, 1, 3, 3])), {}, "'filter': expected the data type of 'input' \\(float32\\)"),
    ({}, dict(padding=[1, 1]), "'padding': expected 4 integers >= 0"),
    ({}, dict(padding=[1, -1, 0, 0]), "'padding': expected 4 integers >= 0"),
    ({}, dict(padding=[1.0, 1, 0, 0]), "'padding'"),
    ({}, dict(strides=[1]), "'strides': expected 2 integers >= 1"),
    ({}, dict(strides=[1, 0]), "'strides': expected 2 integers >= 1"),
    ({}, dict(dilations=[1, 1, 1]), "'dilations': expected 2 integers >= 1"),
    ({}, dict(dilations=[0, 1]), "'dilations': expected 2 integers >= 1"),
    ({}, dict(groups=0), "'groups': expected an integer in \\[1, "),
    ({}, dict(groups=True), "'groups'"),
    (dict(x=[1, 4, 5, 5], w=[3, 1, 2, 2]), dict(groups=3),
     "'groups': expected a divisor of the input channels \\(4\\)"),
    (dict(x=[1, 4, 5, 5], w=[3, 2, 2, 2]), dict(groups=2), "'groups': expected a divisor of the output channels \\(3"),
    (dict(x=[1, 4, 5, 5], w=[2, 4, 2, 2]), dict(groups=2), "'filter': expected 2 input channels"),
    ({}, dict(bias=[2]), "'bias': expected shape \\[1\\]"),
    ({}, dict(bias=[1, 1]), "'bias': expected shape \\[1\\]"),
    ({}, dict(bias=("float16", [1])), "'bias': expected the data type of 'input'"),
    (dict(w=[1, 1, 434983, 2]), dict(dilations=[328443, 1]), "'dilations': expected an effective filter height"),
    (dict(w=[1, 1, 7, 7]), {}, "'filter': expected an effective filter height \\(7\\) no larger than the padded input"),
    (dict(w=[1, 1, 3, 8]), dict(padding=[0, 0, 1, 1]), "effective filter width \\(8\\)"),
    ({}, dict(input_layout="nchw4"), "'input_layout': expected one of 'nchw', 'nhwc'"),
    ({}, dict(filter_layout="iohw"), "'filter_layout': expected one of 'oihw', 'hwio', 'ohwi', 'ihwo'"),
    ({}, dict(activation="relu"), "unknown option\\(s\\) 'activation'"),
]


@pytest.mark.parametrize("shapes, opts, match", CONV2D_ERRORS)
def test_conv2d_validation(ctx, shapes, opts, match):
    shapes = {"x": [1, 1, 5, 5], "w": [1, 1, 3, 3]} | shapes
    if "bias" in opts:
        shapes["b"] = opts.pop("bias")
    bld, o = _ops(ctx, **shapes)
    with pytest.raises(MLTypeError, match=match) as info:
        bld.conv2d(o["x"], o["w"], bias=o.get("b"), label="c1", **opts)
    assert str(info.value).startswith("conv2d ['c1']: ")
    fine = bld.conv2d(bld.input("ok", {"data_type": "float32", "shape": [1, 1, 5, 5]}),
                      bld.constant(np.ones((1, 1, 3, 3), np.float32)))
    assert fine.shape == (1, 1, 3, 3)  # the builder is still usable


@pytest.mark.parametrize("input_layout", ["nchw", "nhwc"])
@pytest.mark.parametrize("filter_layout", list(CONV_FILTER))
def test_conv2d_filter_channels_every_layout(ctx, input_layout, filter_layout):
    """Filter input channels must be C / groups whatever the layouts (here 3 != 6 / 2)."""
    x = [1, 6, 5, 5] if input_layout == "nchw" else [1, 5, 5, 6]
    w = np.array([4, 3, 3, 3])[list(CONV_FILTER[filter_layout])]  # o=4, i=3, 3x3
    bld, o = _ops(ctx, x=x, w=[int(d) for d in w])
    y = bld.conv2d(o["x"], o["w"], groups=2, input_layout=input_layout, filter_layout=filter_layout)
    assert y.shape == ((1, 4, 3, 3) if input_layout == "nchw" else (1, 3, 3, 4))
    with pytest.raises(MLTypeError, match="'filter': expected 6 input channels"):
        bld.conv2d(o["x"], o["w"], groups=1, input_layout=input_layout, filter_layout=filter_layout)


def test_conv_foreign_operands(ctx):
    bld, o = _ops(ctx, x=[1, 1, 5, 5], w=[1, 1, 3, 3])
    other, oo = _ops(ctx, x=[1, 1, 5, 5], w=[1, 1, 3, 3], b=[1])
    for method in (bld.conv2d, bld.conv_transpose2d):
        with pytest.raises(MLTypeError, match="'input': expected an MLOperand of this MLGraphBuilder"):
            method(oo["x"], o["w"])
        with pytest.raises(MLTypeError, match="'filter': expected an MLOperand of this MLGraphBuilder"):
            method(o["x"], oo["w"])
        with pytest.raises(MLTypeError, match="'bias': expected an MLOperand of this MLGraphBuilder"):
            method(o["x"], o["w"], bias=oo["b"])


CONVT_ERRORS = [
    (dict(x=[1, 5, 5]), {}, "'input': expected a 4-D operand"),
    (dict(w=[2, 2]), {}, "'filter': expected a 4-D operand"),
    (dict(w=("int32", [1, 1, 2, 2])), {}, "'filter': expected the data type of 'input'"),
    ({}, dict(padding=[2, 2]), "'padding': expected 4 integers"),
    ({}, dict(strides=[2]), "'strides': expected 2 integers >= 1"),
    ({}, dict(strides=[1, 0]), "'strides'"),
    ({}, dict(dilations=[1]), "'dilations'"),
    ({}, dict(dilations=[1, 0]), "'dilations'"),
    ({}, dict(groups=0), "'groups'"),
    ({}, dict(output_padding=[1, 1, 1, 1], strides=[3, 2]), "'output_padding': expected 2 integers"),
    (dict(x=[1, 1, 2, 2], w=[1, 1, 3, 3]), dict(padding=[0, 0, 3, 3], strides=[2, 2], output_padding=[0, 2]),
     "'output_padding': expected values smaller than the strides \\[2, 2\\] \\(width\\)"),
    ({}, dict(output_sizes=[1, 2, 10, 8]), "'output_sizes': expected 2 integers >= 1"),
    ({}, dict(output_sizes=[0, 8]), "'output_sizes'"),
    (dict(x=[1, 1, 3, 3], w=[1, 1, 3, 3]), dict(padding=[1, 1, 1, 1], strides=[2, 2], output_sizes=[4, 4],
                                                output_padding=[1, 1]),
     "'output_sizes': expected an output height in \\[5, 7\\)"),
    (dict(x=[1, 1, 3, 3], w=[1, 1, 3, 3]), dict(padding=[1, 1, 1, 1], strides=[2, 2], output_sizes=[6, 8]),
     "'output_sizes': expected an output width in \\[5, 7\\)"),
    (dict(x=[1, 1, 2, 2], w=[1, 1, 3, 3]), dict(padding=[4, 4, 0, 0], strides=[2, 2], output_padding=[1, 0]),
     "'padding': expected a positive output height"),
    (dict(x=[1, 4, 5, 5], w=[1, 1, 2, 2]), dict(groups=3), "'filter': expected 4 input channels"),
    (dict(x=[1, 4, 5, 5], w=[4, 2, 2, 2]), dict(groups=3), "'groups': expected a divisor of the input channels"),
    (dict(w=[1, 1, 434983, 2]), dict(dilations=[328443, 1]), "'dilations': expected an effective filter height"),
    ({}, dict(bias=[2]), "'bias': expected shape \\[1\\]"),
    ({}, dict(bias=("float16", [1])), "'bias': expected the data type of 'input'"),
    ({}, dict(filter_layout="oihw"), "'filter_layout': expected one of 'iohw', 'hwoi', 'ohwi'"),
    ({}, dict(input_layout="NCHW"), "'input_layout'"),
    ({}, dict(output_shape=[5, 5]), "unknown option\\(s\\) 'output_shape'"),
]


@pytest.mark.parametrize("shapes, opts, match", CONVT_ERRORS)
def test_conv_transpose2d_validation(ctx, shapes, opts, match):
    shapes = {"x": [1, 1, 5, 5], "w": [1, 1, 2, 2]} | shapes
    if "bias" in opts:
        shapes["b"] = opts.pop("bias")
    bld, o = _ops(ctx, **shapes)
    with pytest.raises(MLTypeError, match=match) as info:
        bld.conv_transpose2d(o["x"], o["w"], bias=o.get("b"), label="t1", **opts)
    assert str(info.value).startswith("conv_transpose2d ['t1']: ")


@pytest.mark.parametrize("opts, shape", [
    (dict(), [1, 1, 5, 5]),
    (dict(filter_layout="hwoi", x=[1, 1, 3, 3], w=[3, 3, 2, 1]), [1, 2, 5, 5]),
    (dict(input_layout="nhwc", filter_layout="ohwi", x=[1, 3, 3, 1], w=[2, 3, 3, 1]), [1, 5, 5, 2]),
    (dict(strides=[3, 2], output_sizes=[10, 8], w=[1, 2, 3, 3]), [1, 2, 10, 8]),
    (dict(strides=[3, 2], output_padding=[1, 1], w=[1, 2, 3, 3]), [1, 2, 10, 8]),
    (dict(strides=[3, 2], output_padding=[1, 1], output_sizes=[10, 8], w=[1, 2, 3, 3]), [1, 2, 10, 8]),
    (dict(padding=[1, 1, 1, 1], strides=[2, 2], w=[1, 1, 3, 3]), [1, 1, 5, 5]),
])
def test_conv_transpose2d_output_shape(ctx, opts, shape):
    """Output shapes of the WPT validation tests (input [1, 1, 3, 3] unless given)."""
    x, w = opts.pop("x", [1, 1, 3, 3]), opts.pop("w", [1, 1, 3, 3])
    bld, o = _ops(ctx, x=x, w=w)
    assert list(bld.conv_transpose2d(o["x"], o["w"], **opts).shape) == shape


def test_support_limits(ctx):
    lim = ctx.op_support_limits()
    for op in ("conv2d", "conv_transpose2d"):
        assert lim[op]["input"]["rank_range"] == {"min": 4, "max": 4}
        assert lim[op]["bias"]["rank_range"] == {"min": 1, "max": 1}
