"""The pixel-block depthwise + projection kernel (``conv/depthwise_project.wgsl``) with a pointwise
projection wider than ``PROJECT_MAX_N``: column blocks of at most ``DWP_WIDE_NS`` vec4 columns,
each invocation computing its pixel block's depthwise values itself, each block's rows of the
matrix bound as one contiguous panel (``webnn_gpu.ops.conv._dwp_plan``, ``DWP_PANEL``); the rule
``fuse_depthwise_project`` on IR with its near misses (no GPU), and the kernel against float64
NumPy."""

from __future__ import annotations

import numpy as np
import pytest

from webnn_gpu.ops import conv
from webnn_gpu.ops.linalg import choose_tile_sg

from helpers import kernel_templates, run_graph
from references import ref_conv2d

BLOCKS = "conv/depthwise_project.wgsl"


def _geometry(h, w, c, k=3, s=1):
    """conv.py's geometry dict of a 'same'-padded depthwise conv2d on one NHWC image."""
    p = (k - 1) // 2
    oh, ow = [(n + 2 * p - k) // s + 1 for n in (h, w)]
    return dict(NB=1, H=h, W=w, C=c, O=c, OH=oh, OW=ow, KH=k, KW=k, G=c, sh=s, sw=s, dh=1, dw=1, pt=p, pl=p)


# ---------------------------------------------------------------- the rule on IR (no GPU)
def _pair(hw, C, N, *, k=3, s=1, second=False, output=False, prologue=False, transpose=False):
    """IR of a 'same' depthwise conv2d (bias) on [1, hw, hw, C] and the 1x1 conv2d to N channels
    (or a 2x2 stride-2 conv_transpose2d to N / 4) reading it; ``second``: the depthwise output
    also feeds a relu; ``output``: it is a graph output too; ``prologue``: the projection scales
    its input per channel (an input prologue)."""
    from types import SimpleNamespace

    from webnn_gpu._ir import Node, Value

    def const(shape):
        data = np.linspace(-1, 1, int(np.prod(shape)), dtype=np.float32)
        return Value("float32", tuple(shape), "constant", data=data)

    p = (k - 1) // 2
    oh = (hw + 2 * p - k) // s + 1
    x, mid = Value("float32", (1, hw, hw, C), "input", name="x"), Value("float32", (1, oh, oh, C), "op")
    dw = Node("conv2d", [x, const((1, k, k, C)), const((C,))], [mid],
              {"padding": [p] * 4, "strides": [s, s], "dilations": [1, 1], "groups": C, "input_layout": "nhwc",
               "filter_layout": "ihwo"}, "dw")
    if transpose:
        out = Value("float32", (1, 2 * oh, 2 * oh, N // 4), "op")
        pw = Node("conv_transpose2d", [mid, const((C, N // 4, 2, 2))], [out],
                  {"padding": [0] * 4, "strides": [2, 2], "dilations": [1, 1], "groups": 1, "output_padding": [0, 0],
                   "input_layout": "nhwc", "filter_layout": "iohw"}, "up")
    else:
        out = Value("float32", (1, oh, oh, N), "op")
        attrs = {"padding": [0] * 4, "strides": [1, 1], "dilations": [1, 1], "groups": 1, "input_layout": "nhwc",
                 "filter_layout": "ohwi"}
        if prologue:
            attrs["input_scale"] = True
        pw = Node("conv2d", [mid, const((N, 1, 1, C))] + ([const((C,))] if prologue else []), [out], attrs, "pw")
    mid.producer, out.producer = dw, pw
    nodes, outs = [dw, pw], {"y": out}
    if second:
        r = Value("float32", mid.shape, "op")
        nodes.append(Node("relu", [mid], [r], {}, "relu"))
        r.producer = nodes[-1]
        outs["r"] = r
    if output:
        outs["mid"] = mid
    return nodes, outs, SimpleNamespace(_tuning="lane-loop", limits={})


def _fused(nodes, outs, context, monkeypatch) -> list[str]:
    from webnn_gpu.compiler.rules.conv import fuse_depthwise_project

    monkeypatch.delenv("WEBNN_GPU_FORCE_DWP", raising=False)
    monkeypatch.delenv("WEBNN_GPU_FORCE_CONV", raising=False)
    new = fuse_depthwise_project(nodes, outs, context)
    assert [n.op for n in nodes][:2] == ["conv2d", nodes[1].op]  # the rule changed nothing it was given
    return [n.op for n in new]


def test_rule_fuses_a_wide_projection_where_it_pays(monkeypatch):
    """8 x 8 x 48 -> 192 (a small image: launch-bound kernels) is estimated faster as one kernel
    on lavapipe before Mesa 24 and fused; 12 x 12 x 48 -> 192 (face_detection_full_range_sparse's
    three, which ran 0.70-0.94 of the fused kernel's time as two kernels in three runs, one
    launch more counted: LAUNCH_US) and 5 x 5 x 728 -> 728 (the projection's loads dominate, and
    the fused kernel loads each column block's matrix rows for one or two pixels per lane) are
    not."""
    assert conv.project_pays(_geometry(8, 8, 48), 192, "lane-loop")
    assert _fused(*_pair(8, 48, 192), monkeypatch) == ["depthwise_project"]
    assert not conv.project_pays(_geometry(12, 12, 48), 192, "lane-loop")
    assert _fused(*_pair(12, 48, 192), monkeypatch) == ["conv2d", "conv2d"]
    assert not conv.project_pays(_geometry(5, 5, 728), 728, "lane-loop")
    assert _fused(*_pair(5, 728, 728), monkeypatch) == ["conv2d", "conv2d"]


@pytest.mark.parametrize("miss", ["second consumer", "graph output", "input prologue", "C not a multiple of 4",
                                  "transposed projection past PROJECT_MAX_N"])
def test_rule_near_misses_stay_two_kernels(miss, monkeypatch):
    """What the kernel cannot take stays two nodes, even forced (``WEBNN_GPU_FORCE_DWP=fused``):
    a depthwise output with a second consumer or that is a graph output, a projection with an
    input prologue, channels not a multiple of 4 (the pixel blocks load vec4s of channels), a
    conv_transpose2d projection of more than PROJECT_MAX_N values per pixel (its stores are
    unrolled)."""
    kw = {"second consumer": dict(second=True), "graph output": dict(output=True),
          "input prologue": dict(prologue=True), "C not a multiple of 4": {},
          "transposed projection past PROJECT_MAX_N": dict(transpose=True)}[miss]
    C = 50 if miss == "C not a multiple of 4" else 48
    nodes, outs, context = _pair(12, C, 192 if not kw.get("transpose") else 4 * 36, **kw)
    assert _fused(nodes, outs, context, monkeypatch)[:2] == [n.op for n in nodes][:2]
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP", "fused")
    from webnn_gpu.compiler.rules.conv import fuse_depthwise_project

    assert [n.op for n in fuse_depthwise_project(nodes, outs, context)] == [n.op for n in nodes]
    if kw.get("transpose"):  # the kernel's transposed mode takes it within its bound
        monkeypatch.setattr(conv, "PROJECT_MAX_N", 4 * 36)
        assert [n.op for n in fuse_depthwise_project(nodes, outs, context)] == ["depthwise_project"]
    # the same pair without the near miss (a pointwise projection of as many values) fuses when forced
    base = _pair(12, 48, 4 * 36 if kw.get("transpose") else 192)
    assert [n.op for n in fuse_depthwise_project(*base)] == ["depthwise_project"]


def test_rule_keeps_the_expansion_out_of_a_wide_projection(monkeypatch):
    """A pointwise expansion (16 -> 48) before the depthwise conv stays its own node when the
    projection is wide (its plan keeps one column block); with a projection to 96 it is folded
    into the fused kernel."""
    from webnn_gpu._ir import Node, Value
    from webnn_gpu.compiler.rules.conv import fuse_depthwise_project

    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP", "fused")
    for N, folded in ((192, False), (96, True)):
        nodes, outs, context = _pair(12, 48, N, s=2)
        x0 = Value("float32", (1, 12, 12, 16), "input", name="x0")
        data = np.linspace(-1, 1, 48 * 16, dtype=np.float32)
        e = Node("conv2d", [x0, Value("float32", (48, 1, 1, 16), "constant", data=data)], [nodes[0].inputs[0]],
                 {"padding": [0] * 4, "strides": [1, 1], "dilations": [1, 1], "groups": 1, "input_layout": "nhwc",
                  "filter_layout": "ohwi"}, "expand")
        x = nodes[0].inputs[0]
        x.kind, x.producer = "op", e
        new = fuse_depthwise_project([e, *nodes], outs, context)
        assert [n.op for n in new] == (["depthwise_project"] if folded else ["conv2d", "depthwise_project"])
        assert (new[-1].attrs.get("expand") is e) == folded


def test_rule_keeps_a_wide_projection_within_the_loop_budget(monkeypatch):
    """llvmpipe ends an invocation's loops after LOOP_BUDGET iterations in all: a wide projection
    whose channel loop (C / 4 iterations, each over the block's input rows; llvmpipe counts a
    loop of n iterations as n + 1) would pass it stays two kernels, even forced; one within it
    fuses."""
    from webnn_gpu.compiler.rules.conv import fuse_depthwise_project

    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP", "fused")
    rows = conv._max_rows(_geometry(1, 1, 4))
    big = 4 * (conv.LOOP_BUDGET // (rows + 2) + 1)
    assert [n.op for n in fuse_depthwise_project(*_pair(1, big, 132))] == ["conv2d", "conv2d"]
    assert [n.op for n in fuse_depthwise_project(*_pair(1, big - 64, 132))] == ["depthwise_project"]


def test_wide_plan_splits_columns_into_panels():
    """A wide projection's plan (lane-loop profile, 8 lanes): column blocks of at most
    DWP_WIDE_NS vec4s, as even as they can be, and at most DWP_WIDE_MAX_ACC accumulators; a
    projection of at most PROJECT_MAX_N keeps one column block."""
    for g, n4 in ((_geometry(12, 12, 48), 48), (_geometry(6, 6, 96), 96), (_geometry(1, 1, 64), 33),
                  (_geometry(3, 5, 32), 130), (_geometry(8, 8, 256), 64)):
        th, tw, splits = conv._dwp_plan(g, n4, 0, "lane-loop", sg=8)
        ns = -(-n4 // splits)
        assert splits > 1 and ns <= conv.DWP_WIDE_NS and th * tw * ns <= conv.DWP_WIDE_MAX_ACC
        assert ns * (splits - 1) < n4  # no empty column block
    assert conv._dwp_plan(_geometry(8, 8, 64), 32, 0, "lane-loop", sg=8)[2] == 1


def test_wide_estimate_counts_the_tile_kernels_rows():
    """The two kernels' side of a wide projection (lane-loop) adds the tile kernel's per-row loads
    and broadcasts of B, per product inversely to the rows of its tiles: more for 4 x 4 pixels
    (tiles of two rows) than for 8 x 8 (tiles of 8 rows), and nothing for a projection of at
    most PROJECT_MAX_N."""
    def extra(g, n):
        _, two = conv._project_cost(g, n, "lane-loop")
        saved = conv.DWP_WIDE_TILE
        conv.DWP_WIDE_TILE = {}
        try:
            return two - conv._project_cost(g, n, "lane-loop")[1]
        finally:
            conv.DWP_WIDE_TILE = saved
    rows = {hw: choose_tile_sg(hw * hw, 512, 1, conv.DW_LANES)[0] for hw in (4, 8)}
    assert rows == {4: 2, 8: 8}, rows
    per = {hw: extra(_geometry(hw, hw, 256), 512) / (hw * hw) for hw in (4, 8)}
    assert per[4] == pytest.approx(4 * per[8]) and per[8] > 0
    assert extra(_geometry(9, 9, 256), 128) == 0


def test_wide_estimate_counts_the_matrix_loads():
    """The fused side of a wide projection's estimate (lane-loop) includes its loads of the
    projection matrix, more for a storage-buffer matrix than a uniform one."""
    g = _geometry(8, 8, 256)
    assert conv._dwp_matrix_loads(g, 64, "lane-loop", 8) > 0
    f_wide, _ = conv._project_cost(g, 256, "lane-loop")
    fit = conv.DWP_PAY_FIT["lane-loop"]
    f_base = sum(w * t for w, t in zip(fit["fused"], conv._dwp_fused_terms(g, 64, "lane-loop", 8)))
    assert f_wide == pytest.approx(f_base + conv.DWP_WIDE_MATRIX["lane-loop"][0]
                                   * conv._dwp_matrix_loads(g, 64, "lane-loop", 8))


# ---------------------------------------------------------------- the kernel against float64 NumPy
# (image H x W, channels C, projected channels N, stride, epilogue after the projection: None, a
# residual add and prelu ("res"), or clamp ("relu6"), float type)
_CASES = {
    "N=132 (33 vec4s: ragged column blocks), 3x5 image, residual + prelu": ((3, 5), 32, 132, 1, "res", "float32"),
    "N=192, 12x12, stride 1, relu6": ((12, 12), 48, 192, 1, "relu6", "float32"),
    "N=384, 12x12 stride 2 (6x6 out), residual + prelu": ((12, 12), 96, 384, 2, "res", "float32"),
    "N=520 (130 vec4s), 1x1 image": ((1, 1), 64, 520, 1, None, "float32"),
    "N=192, 3x5 stride 2, float16, residual + prelu": ((3, 5), 48, 192, 2, "res", "float16"),
    "N=132, 130 x 2 (tall), relu6": ((130, 2), 16, 132, 1, "relu6", "float32"),
}


def _case(rng, hw, C, N, s, epi, npdt):
    """A 3x3 depthwise conv2d (bias, relu) and its projection (bias) to N channels, then the
    epilogue: (build, inputs, float64 reference)."""
    h, w = hw
    oh, ow = [(n - 1) // s + 1 for n in (h, w)]
    x = rng.standard_normal((1, h, w, C)).astype(npdt)
    wd = (rng.standard_normal((1, 3, 3, C)) * 0.3).astype(npdt)  # ihwo
    bd = rng.standard_normal(C).astype(npdt)
    wp = (rng.standard_normal((N, 1, 1, C)) * (0.3 if C < 64 else 0.15)).astype(npdt)  # ohwi
    bp = rng.standard_normal(N).astype(npdt)
    slope = rng.uniform(0.05, 0.5, N).astype(npdt)
    inputs = {"x": x}
    if epi == "res":
        inputs["r"] = rng.standard_normal((1, oh, ow, N)).astype(npdt)

    def build(b, o):
        d = b.conv2d(o["x"], b.constant(wd), input_layout="nhwc", filter_layout="ihwo", groups=C, padding=[1] * 4,
                     strides=[s, s], bias=b.constant(bd))
        p = b.conv2d(b.relu(d), b.constant(wp), input_layout="nhwc", filter_layout="ohwi", bias=b.constant(bp))
        if epi == "res":
            p = b.prelu(b.add(p, o["r"]), b.constant(slope))
        elif epi == "relu6":
            p = b.clamp(p, min_value=0.0, max_value=6.0)
        return {"y": p}

    d = ref_conv2d(x.astype(np.float64).transpose(0, 3, 1, 2), wd.astype(np.float64).transpose(3, 0, 1, 2),
                   [1] * 4, (s, s), groups=C).transpose(0, 2, 3, 1) + bd.astype(np.float64)
    ref = np.einsum("nhwc,oc->nhwo", np.maximum(d, 0), wp[:, 0, 0, :].astype(np.float64)) + bp.astype(np.float64)
    if epi == "res":
        ref = ref + inputs["r"].astype(np.float64)
        ref = np.where(ref >= 0, ref, ref * slope.astype(np.float64))
    elif epi == "relu6":
        ref = np.clip(ref, 0, 6)
    return build, inputs, ref


@pytest.mark.parametrize("case", list(_CASES))
def test_wide_projection_against_numpy(ctx, rng, monkeypatch, case):
    """Wide projections fused (``WEBNN_GPU_FORCE_DWP=fused``: the kernel whatever the cost model
    says) with the plan the lane-loop profile picks: ragged column blocks, 1 x 1, 3 x 5, 12 x 12
    and tall images, strides 1 and 2, residual + prelu and clamp epilogues, float16; one kernel,
    its matrix in panels, and the float64 NumPy result."""
    hw, C, N, s, epi, dt = _CASES[case]
    if dt == "float16" and "float16" not in ctx.supported_data_types:
        pytest.fail("float16 is expected on lavapipe")
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP", "fused")
    build, inputs, ref = _case(rng, hw, C, N, s, epi, np.float32 if dt == "float32" else np.float16)
    got = run_graph(ctx, build, inputs)["y"].astype(np.float64)
    tol = 3e-5 if dt == "float32" else 3e-2
    np.testing.assert_allclose(got, ref, atol=tol * max(1.0, np.abs(ref).max()), rtol=tol)
    assert kernel_templates(ctx, build, inputs) == [BLOCKS]


def test_wide_projection_without_lane_shared_loads(ctx, rng, monkeypatch):
    """The same kernel without the subgroup's shared loads (``DWP_SUBGROUP`` off: one invocation
    per pixel block and column block, forced to 2 x 2 blocks of 3 column blocks, the panels read
    per invocation): float64 NumPy."""
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP", "fused")
    monkeypatch.setattr(conv, "DWP_SUBGROUP", False)
    monkeypatch.setattr(conv, "_dwp_plan", lambda g, n4, k4, tuning, split=True, sg=0: (2, 2, 3))
    build, inputs, ref = _case(rng, (7, 5), 40, 200, 1, "res", np.float32)
    got = run_graph(ctx, build, inputs)["y"].astype(np.float64)
    np.testing.assert_allclose(got, ref, atol=3e-5 * np.abs(ref).max(), rtol=3e-5)
    assert kernel_templates(ctx, build, inputs) == [BLOCKS]


def test_cost_model_fuses_a_wide_pair_end_to_end(ctx, rng, monkeypatch):
    """Unforced, on the lane-loop profile: 8 x 8 x 48 -> 192 becomes one kernel and matches
    float64 NumPy."""
    monkeypatch.setattr(ctx, "_tuning", "lane-loop")
    monkeypatch.delenv("WEBNN_GPU_FORCE_DWP", raising=False)
    build, inputs, ref = _case(rng, (8, 8), 48, 192, 1, None, np.float32)
    got = run_graph(ctx, build, inputs)["y"].astype(np.float64)
    np.testing.assert_allclose(got, ref, atol=3e-5 * np.abs(ref).max(), rtol=3e-5)
    assert kernel_templates(ctx, build, inputs) == [BLOCKS]
