"""The fused depthwise + projection kernel with the channels across a subgroup's lanes
(``conv/depthwise_project_lanes.wgsl``: a subgroup walks a strip of TW columns down TH output
rows, each lane holding its channel groups' window rows, the depthwise values handed to every
lane by subgroupBroadcast for the projection) and its plan (``webnn_gpu.ops.conv._dwp_lanes``),
against float64 NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import webnn_gpu as webnn
from webnn_gpu.ops import conv

from helpers import run_graph
from test_depthwise_project_strip import _case, _geometry

LANES = "conv/depthwise_project_lanes.wgsl"


def force_lanes(ctx, monkeypatch) -> None:
    """Fuse depthwise + projection pairs onto the channel-lane kernel, with lavapipe's tuning
    (subgroups are expected there: fail, not skip)."""
    if not ctx._subgroup:
        pytest.fail("subgroups are expected on lavapipe")
    monkeypatch.setattr(ctx, "_tuning", "lane-loop")
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP", "fused")
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP_FORM", "lanes")


# ---------------------------------------------------------------- the plan (no GPU)
def test_lanes_plan_shapes_and_limits():
    """Strips of DWPL_TW columns, the rows cut into as few chunks as give DWPL_MIN_GROUPS
    workgroups but at least DWPL_MIN_TH rows each; at most DWPL_MAX_CPL channel groups and
    DWPL_MAX_NPL projection columns per lane, and DWPL_MAX_BLOCKS 4 x 4 projection blocks (C / 4
    x NPL), more columns split between at most DWPL_MAX_SPLITS subgroups; no lanes, vertical
    dilation, a window shorter than its stride or more splits: none."""
    assert conv._dwp_lanes(_geometry(64, 64, 24, 3), 6, 8) == (4, 64, 1, 1, 1)
    assert conv._dwp_lanes(_geometry(16, 16, 48, 3), 14, 8) == (4, 8, 2, 2, 2)
    assert conv._dwp_lanes(_geometry(48, 48, 16, 3, s=2), 8, 8) == (4, 12, 2, 1, 1)
    assert conv._dwp_lanes(_geometry(6, 6, 64, 5), 16, 8) == (4, 6, 1, 2, 2)
    assert conv._dwp_lanes(_geometry(24, 24, 32, 3), 32, 8) == (4, 12, 2, 1, 4)
    assert conv._dwp_lanes(_geometry(24, 24, 64, 3), 8, 8) == (4, 12, 2, 2, 1)
    # more columns per lane than DWPL_MAX_NPL or DWPL_MAX_BLOCKS allow: split between as few
    # subgroups per strip as fit (counted in the workgroups), the columns spread evenly
    assert conv._dwp_lanes(_geometry(24, 24, 16, 3), 33, 8) == (4, 24, 1, 1, 3)
    # (within DWPL_SPLIT_BLOCKS blocks per lane)
    assert conv._dwp_lanes(_geometry(24, 24, 64, 3), 24, 8) == (4, 24, 1, 2, 1)
    assert conv._dwp_lanes(_geometry(24, 24, 40, 3), 28, 8) == (4, 24, 1, 2, 1)
    assert conv._dwp_lanes(_geometry(8, 8, 64, 3), 32, 8) == (4, 8, 1, 2, 1)
    assert conv._dwp_lanes(_geometry(12, 12, 32, 3), 48, 8) == (4, 12, 1, 1, 2)
    assert conv._dwpl_splits(32, 8, 1) == 4 and conv._dwpl_splits(48, 8, 2) == 3 and conv._dwpl_splits(33, 8, 3) == 2
    # more than DWPL_MAX_SPLITS subgroups (48 -> 192: 6 of one column per lane): none
    for g, n4, sg in ((_geometry(64, 64, 24, 3), 6, 0), (_geometry(64, 64, 24, 3, d=2), 6, 8),
                      (_geometry(24, 24, 72, 3), 6, 8), (_geometry(12, 12, 48, 3), 48, 8)):
        assert conv._dwp_lanes(g, n4, sg) is None


def test_lanes_plan_split_switched_off(monkeypatch):
    """WEBNN_GPU_FORCE_DWPL_SPLIT=off: no plan where a lane's columns would exceed
    DWPL_MAX_NPL or DWPL_MAX_BLOCKS (the columns are not split); within them, the same plan."""
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWPL_SPLIT", "off")
    assert conv._dwp_lanes(_geometry(24, 24, 64, 3), 24, 8) is None
    assert conv._dwp_lanes(_geometry(24, 24, 16, 3), 33, 8) is None
    assert conv._dwp_lanes(_geometry(24, 24, 32, 3), 32, 8) == (4, 12, 2, 1, 4)


def test_form_strip_first_then_lanes_where_estimated_faster(monkeypatch):
    """_dwp_form: the strip kernel where it runs (few channels, tall images); the channel-lane
    kernel where DWPL_FIT estimates it faster than the pixel blocks (face detection's 64 x 64 x
    24 -> 24, palm detection's 96 x 96 x 32 -> 32 5x5, face detection's 96 x 96 x 32 -> 8 and
    24 x 24 x 32 -> 128); the pixel blocks on a small image with few projected channels (8 x 8 x
    28 -> 16, the lanes kernel's fixed cost) or many channels (8 x 8 x 64) and wherever the
    lanes cannot run (no subgroup lanes, 72 channels); WEBNN_GPU_FORCE_DWP_FORM forces either."""
    monkeypatch.delenv("WEBNN_GPU_FORCE_DWP_FORM", raising=False)
    form = lambda g, n4, sg=8: conv._dwp_form(g, n4, "lane-loop", sg)[0]  # noqa: E731
    assert form(_geometry(96, 96, 16, 3), 4) == "strip"
    assert form(_geometry(64, 64, 24, 3), 6) == "lanes"
    assert form(_geometry(96, 96, 32, 5), 8) == "lanes"
    assert form(_geometry(8, 8, 28, 3), 4) == "blocks"
    # 4 pixels per pass (96 x 96 x 32 -> 8), four columns per lane (24 x 24 x 32 -> 128); the
    # pixel blocks on small images with many channels
    assert form(_geometry(96, 96, 32, 3), 2) == "lanes"
    assert form(_geometry(24, 24, 32, 3), 32) == "lanes"
    assert form(_geometry(8, 8, 64, 3), 8) == "blocks"
    assert form(_geometry(64, 64, 24, 3), 6, sg=0) == "blocks"
    assert form(_geometry(24, 24, 72, 3), 6) == "blocks"
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP_FORM", "blocks")
    assert form(_geometry(64, 64, 24, 3), 6) == "blocks"
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP_FORM", "lanes")
    assert form(_geometry(8, 8, 28, 3), 4) == "lanes"
    assert form(_geometry(96, 96, 16, 3), 4) == "lanes"


def test_form_split_columns_where_estimated_faster(monkeypatch):
    """_dwp_form on pairs whose columns split between subgroups: the channel-lane kernel where
    DWPL_FIT estimates it faster (16 x 16 x 64 -> 128: 4 subgroups of one column per lane,
    iris_landmark's); the pixel blocks where a split strip's last subgroup is mostly past the
    columns (16 x 16 x 64 -> 72) or the image is small (8 x 8 x 64 -> 128), and with
    WEBNN_GPU_FORCE_DWPL_SPLIT=off."""
    for var in ("WEBNN_GPU_FORCE_DWP_FORM", "WEBNN_GPU_FORCE_DWPL_SPLIT"):
        monkeypatch.delenv(var, raising=False)
    form = lambda g, n4: conv._dwp_form(g, n4, "lane-loop", 8)  # noqa: E731
    assert form(_geometry(16, 16, 64, 3), 32) == ("lanes", (4, 16, 1, 2, 1))
    assert form(_geometry(16, 16, 64, 3), 18)[0] == "blocks"
    assert form(_geometry(8, 8, 64, 3), 32)[0] == "blocks"
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWPL_SPLIT", "off")
    assert form(_geometry(16, 16, 64, 3), 32)[0] == "blocks"


# (input H = W, C, window, stride, projected vec4 columns): small pairs that ran slower or no
# faster on the channel-lane kernel, forced, than on the pixel blocks (2026-11-26, docs/conv.md
# "Small images"): iris_landmark's 4 x 4 and 2 x 2 x 64 -> 128 (1.03-1.14, per-round medians),
# hand_recrop's 4 x 4 x 16 -> 32 (1.13-1.17), face detection's 16 x 16 x 64 -> 72 (1.16),
# pose detection's 14 x 14 x 48 stride 2 -> 24 (0.99-1.06), and synthetic pairs that a margin
# of 20% of the pixel blocks' estimate would have taken (1.07-1.27, the least of 3-4 rounds)
_SMALL_BLOCKS = [(4, 64, 3, 1, 32), (2, 64, 3, 1, 32), (4, 16, 3, 1, 8), (16, 64, 3, 1, 18), (28, 48, 3, 2, 6),
                 (14, 48, 3, 1, 12), (28, 48, 3, 2, 10), (40, 8, 3, 2, 8), (40, 16, 3, 2, 16), (12, 24, 3, 1, 16),
                 (20, 24, 3, 1, 10), (24, 64, 5, 2, 10), (40, 8, 5, 2, 8)]


@pytest.mark.parametrize("shape", _SMALL_BLOCKS)
def test_form_keeps_small_pairs_that_ran_slower_on_the_pixel_blocks(monkeypatch, shape):
    """_dwp_form leaves to the pixel blocks the small pairs that ran slower or no faster on the
    channel-lane kernel (DWPL_MARGIN holds them there: the fit's error on images of 2-40
    pixels is larger than what it estimates the kernel saves)."""
    monkeypatch.delenv("WEBNN_GPU_FORCE_DWP_FORM", raising=False)
    hw, c, k, s, n4 = shape
    assert conv._dwp_form(_geometry(hw, hw, c, k, s=s), n4, "lane-loop", 8)[0] == "blocks"


# ---------------------------------------------------------------- the kernel against NumPy
# (N, kernel) on each side of _dwp_form's boundary for 24 x 24 x 32, 3x3 (the lane-loop profile)
# and for 16 x 16 x 64 where the columns split between subgroups
_BOUNDARY = {"N=40: the pixel blocks": (32, 40, "conv/depthwise_project.wgsl"), "N=48: the lanes": (32, 48, LANES),
             "C=64 N=72 (split): the pixel blocks": (64, 72, "conv/depthwise_project.wgsl"),
             "C=64 N=128 (split): the lanes": (64, 128, LANES)}


@pytest.mark.parametrize("case", list(_BOUNDARY))
def test_form_boundary_both_sides_match_numpy(ctx, rng, monkeypatch, case):
    """The kernel _dwp_form picks unforced, on each side of its boundary (24 x 24 x 32, 3x3,
    projected to 40: the pixel blocks; to 48: the channel-lane kernel; 16 x 16 x 64 with split
    columns, projected to 72: the pixel blocks; to 128: the channel-lane kernel), with a
    residual of another tensor and prelu: float64 NumPy."""
    c, n, template = _BOUNDARY[case]
    if not ctx._subgroup:
        pytest.fail("subgroups are expected on lavapipe")
    monkeypatch.setattr(ctx, "_tuning", "lane-loop")
    for var in ("WEBNN_GPU_FORCE_DWP", "WEBNN_GPU_FORCE_DWP_FORM", "WEBNN_GPU_FORCE_DWPL_SPLIT"):
        monkeypatch.delenv(var, raising=False)
    hw = (24, 24) if c == 32 else (16, 16)
    build, inputs, ref = _case(rng, 1, hw, c, n, (3, 3), (1, 1), (1, 1), "r", np.float32)
    got = run_graph(ctx, build, inputs)["y"].astype(np.float64)
    np.testing.assert_allclose(got, ref, atol=3e-5, rtol=3e-5)
    b = webnn.MLGraphBuilder(ctx)
    g = b.build(build(b, {k: b.input(k, {"data_type": "float32", "shape": list(a.shape)}) for k, a in inputs.items()}))
    templates = [st.template for st in g._steps if hasattr(st, "template")]
    g.destroy()
    assert templates == [template]


# (batch, image H x W, channels C, projected channels N, window KH x KW, strides, dilations,
# residual: "x" (the depthwise input itself, read from the held rows), "r" (another tensor) or
# None, float type, rows per chunk)
_CASES = {
    "C=24 N=24 (6 of 8 lanes), residual of its own input, ragged strip, 3 row chunks":
        (1, (13, 10), 24, 24, (3, 3), (1, 1), (1, 1), "x", "float32", 5),
    "C=28 N=32, stride 2, odd image, no residual, one chunk":
        (1, (13, 11), 28, 32, (3, 3), (2, 2), (1, 1), None, "float32", 7),
    "C=40 N=36 (two groups per lane), 5x5, batch 2, residual of another tensor":
        (2, (9, 7), 40, 36, (5, 5), (1, 1), (1, 1), "r", "float32", 4),
    "C=32 N=64, 5x5 stride 2 (3 held rows, 2 warm-up steps), float16":
        (1, (15, 12), 32, 64, (5, 5), (2, 2), (1, 1), None, "float16", 3),
    "C=64 N=64, 3x5 window, column dilation 2, residual of its own input, last chunk of 1 row":
        (1, (7, 10), 64, 64, (3, 5), (1, 1), (1, 2), "x", "float32", 3),
    "C=24 N=8 (4 pixels per pass), residual of another tensor, ragged strip":
        (1, (13, 10), 24, 8, (3, 3), (1, 1), (1, 1), "r", "float32", 5),
    "C=40 N=12 (2 pixels per pass, 3 of 4 lanes), 5x5, batch 2, a strip of 3 columns (half a pass)":
        (2, (11, 3), 40, 12, (5, 5), (1, 1), (1, 1), None, "float32", 4),
    "C=16 N=16 (2 pixels per pass), residual of its own input (loaded: another lane's channels)":
        (1, (10, 9), 16, 16, (3, 3), (1, 1), (1, 1), "x", "float32", 4),
    "C=36 N=4 (4 pixels per pass, 1 column of 2 lanes), stride 2, float16":
        (1, (15, 13), 36, 4, (3, 3), (2, 2), (1, 1), None, "float16", 3),
    "C=28 N=100 (four columns per lane, 7 lanes past the columns), stride 2":
        (1, (11, 9), 28, 100, (3, 3), (2, 2), (1, 1), None, "float32", 3),
    "C=56 N=28 (two groups per lane, 2 lanes past the channels), 5x5, float16":
        (1, (8, 9), 56, 28, (5, 5), (1, 1), (1, 1), "r", "float16", 4),
    "C=64 N=128 (columns split between 4 subgroups of 1 column per lane), residual of another tensor":
        (1, (9, 10), 64, 128, (3, 3), (1, 1), (1, 1), "r", "float32", 4),
    "C=32 N=192 (3 subgroups of 2 columns per lane), stride 2, odd image":
        (1, (13, 11), 32, 192, (3, 3), (2, 2), (1, 1), None, "float32", 3),
    "C=64 N=72 (3 subgroups, 6 lanes of the last past the columns), float16":
        (1, (7, 9), 64, 72, (3, 3), (1, 1), (1, 1), "r", "float16", 4),
    "C=40 N=100 (4 subgroups, 7 lanes of the last past the columns), 5x5 stride 2, batch 2":
        (2, (11, 9), 40, 100, (5, 5), (2, 2), (1, 1), "r", "float32", 3),
    "C=62 N=128 (channels not a multiple of 4, 4 subgroups), stride 2, odd image":
        (1, (9, 7), 62, 128, (3, 3), (2, 2), (1, 1), None, "float32", 3),
    "C=64 N=126 (output not a multiple of 4, 4 subgroups), 5x5":
        (1, (6, 7), 64, 126, (5, 5), (1, 1), (1, 1), None, "float32", 3),
    "C=24 N=8 (4 pixels per pass), 70,000 rows of 1 column: chunks within llvmpipe's loop limit":
        (1, (70_000, 1), 24, 8, (3, 3), (1, 1), (1, 1), "r", "float32", 70_000),
}


@pytest.mark.parametrize("C", [24, 16])
def test_pooled_residual_is_not_read_as_the_input(ctx, rng, monkeypatch, C):
    """A residual that is a stride-1 pool of the depthwise input (fuse_pool_residual reads the
    pool's window in the epilogue) has the output's shape and is the held input itself, but is
    not its value (near miss): the channel-lane kernel loads the pool's window (``pg``), and the
    result is the pool's; also with 2 pixels per pass (C = N = 16, a strip of 3 columns)."""
    force_lanes(ctx, monkeypatch)
    build, inputs, ref = _case(rng, 1, (12, 9 if C == 24 else 3), C, C, (3, 3), (1, 1), (1, 1), "pool", np.float32)
    got = run_graph(ctx, build, inputs)["y"].astype(np.float64)
    np.testing.assert_allclose(got, ref, atol=3e-5, rtol=3e-5)
    b = webnn.MLGraphBuilder(ctx)
    g = b.build(build(b, {n: b.input(n, {"data_type": "float32", "shape": list(a.shape)}) for n, a in inputs.items()}))
    steps = [st for st in g._steps if hasattr(st, "template")]
    g.destroy()
    assert [st.template for st in steps] == [LANES]
    assert " pg:" in steps[0].wgsl


def test_split_columns_against_numpy(ctx, rng, monkeypatch):
    """DWPL_SPLIT: two subgroups per strip, each projecting to its own 8 columns (and taking the
    residual of its own columns' input channels from the held rows): float64 NumPy."""
    force_lanes(ctx, monkeypatch)
    monkeypatch.setattr(conv, "DWPL_SPLIT", True)
    build, inputs, ref = _case(rng, 1, (9, 10), 56, 56, (3, 3), (1, 1), (1, 1), "x", np.float32)
    got = run_graph(ctx, build, inputs)["y"].astype(np.float64)
    np.testing.assert_allclose(got, ref, atol=3e-5, rtol=3e-5)


@pytest.mark.parametrize("case", list(_CASES))
def test_lanes_kernel_against_numpy(ctx, rng, monkeypatch, case):
    """The channel-lane kernel with lanes past the channels and the projection's columns, one and
    two channel groups and columns per lane, strides 1 and 2 (held rows and warm-up steps),
    padding, strips past the image's right edge, several row chunks (the last shorter), a batch
    of 2, float16, and the projection's residual add read from the held rows (no ``pg``) or
    loaded: float64 NumPy."""
    nb, hw, C, N, k, s, d, residual, dt, th = _CASES[case]
    if dt == "float16" and "float16" not in ctx.supported_data_types:
        pytest.fail("float16 is expected on lavapipe")
    force_lanes(ctx, monkeypatch)
    monkeypatch.setattr(conv, "DWPL_MIN_TH", th)
    monkeypatch.setattr(conv, "DWPL_MIN_GROUPS", 64)  # as many chunks of th rows as the image has
    npdt = np.float32 if dt == "float32" else np.float16
    build, inputs, ref = _case(rng, nb, hw, C, N, k, s, d, residual, npdt)
    got = run_graph(ctx, build, inputs)["y"].astype(np.float64)
    tol = 3e-5 if dt == "float32" else 3e-2
    np.testing.assert_allclose(got, ref, atol=tol, rtol=tol)
    b = webnn.MLGraphBuilder(ctx)
    g = b.build(build(b, {n: b.input(n, {"data_type": dt, "shape": list(a.shape)}) for n, a in inputs.items()}))
    steps = [st for st in g._steps if hasattr(st, "template")]
    g.destroy()
    assert [st.template for st in steps] == [LANES]
    packed = conv._dwpl_pack(N // 4, 8, min(conv.DWPL_TW, steps[0].node.outputs[0].shape[2])) > 1
    assert ("pp ==" in steps[0].wgsl) == packed
    assert (" pg:" in steps[0].wgsl) == (residual == "r" or residual == "x" and packed)
    g = conv._geometry(steps[0].node.attrs["depthwise"])
    splits = conv._dwpl_splits(-(-N // 4), 8, conv._dwp_lanes(g, -(-N // 4), 8)[4])
    assert ("let cb = " in steps[0].wgsl) == (splits > 1) and (splits > 1) == ("subgroups" in case)


def test_pack_pixels_per_pass():
    """_dwpl_pack: a projection of at most half the lanes' columns projects 2-4 pixels per pass
    (its columns' lanes rounded up to a power of two, at most the strip's width); wider, or
    without lanes or DWPL_PACK: one."""
    assert [conv._dwpl_pack(n4, 8, 4) for n4 in range(1, 10)] == [4, 4, 2, 2, 1, 1, 1, 1, 1]
    assert conv._dwpl_pack(2, 8, 3) == 2 and conv._dwpl_pack(1, 8, 1) == 1 and conv._dwpl_pack(2, 0, 4) == 1


def test_tall_layers_stay_within_the_loop_limit():
    """A kernel that walks a chunk's output rows in one loop (the channel-lane and strip
    kernels) cuts a tall layer into enough chunks for llvmpipe's loop limit: 540,000 rows of
    one column took the lanes kernel with 67,500-row chunks, and every row past about 65,533 of
    each chunk came out wrong (llvmpipe ends the loop without an error)."""
    from webnn_gpu.ops.linalg import LOOP_BUDGET

    for h in (540_000, 4_000_000):
        g = _geometry(h, 1, 32, 3)
        tw, th, rb, _, _ = conv._dwp_lanes(g, 8, 8)
        assert th + g["KH"] + 1 <= LOOP_BUDGET and rb * th >= g["OH"]
        g = _geometry(h, 8, 16, 3)
        tw, th, rb = conv._dwp_strip(g, 4, "lane-loop")
        assert th + g["KH"] + 1 <= LOOP_BUDGET and rb * th >= g["OH"]
