"""The tile kernel's subgroup variant (``sg`` in ``matmul/tile.wgsl``) against float64 NumPy at
its boundaries: padded row tiles (M not a multiple of TM x lanes, M below one subgroup's rows),
N narrower than a column tile or not a multiple of 4, K = 1 and K not a multiple of 4 (the
reduction's tail rows of B), batches, conv2d as an implicit GEMM with strides, padding and
groups, a fused bias + activation + residual epilogue, float16; and its choice rules without a GPU.

On an adapter without the variant (``MLContext._subgroup == 0``) the same cases check the
plain kernel; on lavapipe before Mesa 24 each asserts that the variant ran.

Tolerance: the float64 result of the same inputs, within the f32 accumulation bound
``4 * K * 2**-24 * (|A| @ |B|)`` plus the output's rounding (an f16 ulp for float16) and the
epilogue's f32 roundings (``check`` of test_tile.py).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from references import conv2d_nhwc
from test_tile import build_run, check, data, tile_steps

import webnn_gpu as webnn
from webnn_gpu._lower import KernelStep
from webnn_gpu.ops import linalg

LLVMPIPE = {"device": "llvmpipe (LLVM 15.0.6, 256 bits)", "description": "Mesa 22.3.6 (LLVM 15.0.6)"}


@pytest.fixture(autouse=True)
def _tile_kernel(monkeypatch):
    """The tile kernel on few rows too (products of up to 4 rows and 512 columns with a constant
    B otherwise take ``matmul/matvec.wgsl``: test_matvec.py)."""
    monkeypatch.setenv("WEBNN_GPU_FORCE_MATMUL_MATVEC", "off")


def is_sg(step) -> bool:
    return "subgroupBroadcast" in step.wgsl


def expect_sg(ctx, steps, want: bool = True):
    (step,) = tile_steps(steps)
    assert is_sg(step) == (want and ctx._subgroup > 0), "the subgroup variant where the adapter has it"
    return step


# ---------------------------------------------------------------- choice rules (no GPU)
def test_subgroup_lanes_from_the_adapter():
    assert linalg.subgroup_lanes(LLVMPIPE, {"subgroup"}) == 8
    assert linalg.subgroup_lanes(dict(LLVMPIPE, device="llvmpipe (LLVM 15.0.6, 128 bits)"), {"subgroup"}) == 4
    assert linalg.subgroup_lanes(LLVMPIPE, set()) == 0, "needs the subgroup feature"
    mesa25 = dict(LLVMPIPE, description="Mesa 25.0.7 (LLVM 19.1.7)")
    assert linalg.subgroup_lanes(mesa25, {"subgroup"}) == 8, "llvmpipe of any Mesa"
    assert linalg.subgroup_lanes({"device": "NVIDIA H100", "description": ""}, {"subgroup"}) == 0


def test_subgroup_tile_pads_the_fewest_rows():
    lanes = 8
    assert linalg.choose_tile_sg(49, 192, 1, lanes, K=1152) == (7, 12)  # 56 rows, 48 columns
    assert linalg.choose_tile_sg(36, 256, 1, lanes, K=256) == (5, 8)  # 40 rows; 12 does not divide 64
    assert linalg.choose_tile_sg(144, 256, 1, lanes, K=256)[0] == 6  # 144 rows exactly
    assert linalg.choose_tile_sg(1024, 1024, 1, lanes, K=1024) == (8, 8)  # 12 does not divide 256
    # one subgroup of rows: the column tile narrows until two subgroups share the work
    assert linalg.choose_tile_sg(16, 64, 1, lanes, K=128) == (2, 8)
    assert linalg.choose_tile_sg(4, 8, 1, lanes, K=128) == (1, 1)
    assert linalg.sg_rows_ok(4, 1, lanes) and not linalg.sg_rows_ok(3, 1, lanes) and not linalg.sg_rows_ok(1, 1, lanes)
    for M in range(1, 300, 7):
        tm, tn4 = linalg.choose_tile_sg(M, 100, 1, lanes)
        assert 1 <= tm <= linalg.SG_TILE_M and 25 % tn4 == 0
        assert -(-(-(-M // tm)) // lanes) * lanes * tm < M + lanes * tm


# ---------------------------------------------------------------- the variant on the GPU
def test_subgroup_size_is_what_the_kernel_assumes(ctx):
    """The kernel bakes the lane of each broadcast: the driver's subgroup size must be lc.subgroup."""
    if not ctx._subgroup:
        assert "subgroup" not in ctx.features or ctx._tuning != "lane-loop"
        return
    dev = ctx.device
    code = """
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) li: u32, @builtin(subgroup_size) s: u32,
        @builtin(subgroup_invocation_id) lane: u32) {
  out[li] = s * 1000u + lane;
}
"""
    import wgpu

    buf = dev.create_buffer(size=256, usage=wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC)
    pipe = dev.create_compute_pipeline(layout="auto", compute={"module": dev.create_shader_module(code=code),
                                                               "entry_point": "main"})
    bg = dev.create_bind_group(layout=pipe.get_bind_group_layout(0), entries=[{"binding": 0, "resource": {"buffer": buf}}])
    enc = dev.create_command_encoder()
    cp = enc.begin_compute_pass()
    cp.set_pipeline(pipe)
    cp.set_bind_group(0, bg)
    cp.dispatch_workgroups(1)
    cp.end()
    dev.queue.submit([enc.finish()])
    got = np.frombuffer(dev.queue.read_buffer(buf), np.uint32)
    lanes = ctx._subgroup
    np.testing.assert_array_equal(got // 1000, lanes)
    np.testing.assert_array_equal(got % 1000, np.arange(64) % lanes)  # consecutive invocations, one subgroup


MATMUL_CASES = [
    ((49, 1152), (1152, 192)),  # deep, padded rows (7 x 8 = 56)
    ((333, 36), (36, 50)),  # M, N ragged; B packed to 52 columns
    ((4, 128), (128, 64)),  # below one subgroup of rows (TM = 1, half the lanes padding); was matmul/small
    ((70, 1), (1, 12)),  # K = 1: only the tail rows of B
    ((37, 41), (41, 16)),  # K % 4 = 1 with scalar A loads, one column tile
    ((3, 21, 64), (3, 64, 20)),  # batched: bidx from the padded tile count
]


@pytest.mark.parametrize("sa, sb", MATMUL_CASES, ids=["deep", "ragged", "m4", "k1", "ktail", "batched"])
def test_subgroup_matmul(ctx, rng, sa, sb):
    a, b = data(rng, sa), data(rng, sb)
    out, steps = build_run(ctx, lambda bld, o: bld.matmul(o["a"], bld.constant(b)), {"a": a})
    expect_sg(ctx, steps)
    A, B = a.astype(np.float64), b.astype(np.float64)
    check(out, np.matmul(A, B), np.matmul(np.abs(A), np.abs(B)), sa[-1], np.float32, f"sg {sa} x {sb}")


def test_subgroup_matmul_float16_with_bias_and_relu(ctx, rng):
    if "float16" not in ctx.supported_data_types:
        pytest.fail("float16 is not supported on this adapter")
    a, b, bias = data(rng, (45, 72), np.float16), data(rng, (72, 24), np.float16), data(rng, (24,), np.float16)
    out, steps = build_run(ctx, lambda bld, o: bld.relu(bld.add(bld.matmul(o["a"], bld.constant(b)), bld.constant(bias))),
                           {"a": a})
    expect_sg(ctx, steps)
    A, B = a.astype(np.float64), b.astype(np.float64)
    check(out, np.maximum(A @ B + bias, 0), np.abs(A) @ np.abs(B) + np.abs(bias.astype(np.float64)), 73,
          np.float16, "sg f16")


def test_subgroup_pointwise_conv_with_residual_and_hard_swish(ctx, rng):
    """The parameter-buffer path, vec4 residual in the looped epilogue: 1x1 conv, bias, add, hard_swish."""
    x, res = data(rng, (1, 13, 11, 40)), data(rng, (1, 13, 11, 96))
    w, bias = data(rng, (96, 1, 1, 40)), data(rng, (96,))

    def build(bld, o):
        y = bld.conv2d(o["x"], bld.constant(w), bias=bld.constant(bias), input_layout="nhwc", filter_layout="ohwi")
        return bld.hard_swish(bld.add(y, o["r"]))

    out, steps = build_run(ctx, build, {"x": x, "r": res})
    step = expect_sg(ctx, steps)
    assert "prm" in step.wgsl and re.search(r"gres\[o / [48]u\]", step.wgsl)
    z = conv2d_nhwc(x, w, bias) + res
    X, W = np.abs(x.astype(np.float64)).reshape(-1, 40), np.abs(w.astype(np.float64)).reshape(96, 40)
    absref = (X @ W.T + np.abs(bias)).reshape(z.shape) + np.abs(res)
    ref = z * np.clip(z + 3, 0, 6) / 6
    # hard_swish multiplies the sum by at most (|z| + 3) / 6 + 1 / 6 of its error
    check(out, ref, absref * (np.abs(z) / 3 + 2), 42, np.float32, "sg residual hard_swish")


@pytest.mark.parametrize("shape, filt, stride, pad, groups", [
    ((1, 17, 15, 8), (24, 3, 3, 8), 2, 1, 1),  # im2col, strided, padded
    ((1, 9, 10, 3), (40, 3, 3, 3), 1, 1, 1),  # 3 input channels: scalar A loads, K = 27
    ((2, 8, 7, 16), (32, 3, 3, 8), 1, 0, 2),  # two groups (the batch of the product), two images
], ids=["s2p1", "c3", "groups"])
def test_subgroup_conv2d_implicit_gemm(ctx, rng, monkeypatch, shape, filt, stride, pad, groups):
    monkeypatch.setenv("WEBNN_GPU_FORCE_CONV", "gemm")  # 3 -> 40 channels, 3x3, would take conv/block.wgsl
    x, w, bias = data(rng, shape), data(rng, filt), data(rng, (filt[0],))

    def build(bld, o):
        y = bld.conv2d(o["x"], bld.constant(w), bias=bld.constant(bias), strides=[stride] * 2, padding=[pad] * 4,
                       groups=groups, input_layout="nhwc", filter_layout="ohwi")
        return bld.relu(y)

    out, steps = build_run(ctx, build, {"x": x})
    expect_sg(ctx, steps)
    ref = conv2d_nhwc(x, w, bias, pad=pad, stride=stride, groups=groups)
    absref = conv2d_nhwc(np.abs(x), np.abs(w), np.abs(bias), pad=pad, stride=stride, groups=groups)
    k = filt[1] * filt[2] * filt[3]
    check(out, np.maximum(ref, 0), absref, k + 1, np.float32, "sg conv")


def test_subgroup_variant_off_when_forced(ctx, rng, monkeypatch):
    monkeypatch.setenv("WEBNN_GPU_FORCE_MATMUL_SG", "off")
    a, b = data(rng, (49, 64)), data(rng, (64, 32))
    out, steps = build_run(ctx, lambda bld, o: bld.matmul(o["a"], bld.constant(b)), {"a": a})
    expect_sg(ctx, steps, want=False)
    A, B = a.astype(np.float64), b.astype(np.float64)
    check(out, A @ B, np.abs(A) @ np.abs(B), 64, np.float32, "forced off")


def test_profile_shows_a_product_kernels_size_and_gflops(ctx, rng):
    """``webnn-gpu profile``'s table: GFLOP/s from the launch's flops, the size and the variant."""
    from webnn_gpu.profile import format_table, profile_graph

    import webnn_gpu as webnn

    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [1, 6, 8, 16]})
    w = b.constant(data(rng, (24, 3, 3, 16)))
    g = b.build({"y": b.exp(b.conv2d(x, w, padding=[1] * 4, input_layout="nhwc", filter_layout="ohwi"))})
    rows = profile_graph(ctx, g, {"x": data(rng, (1, 6, 8, 16))}, repeats=2)
    conv = [r for r in rows if r["template"] == "matmul/tile.wgsl"]
    assert len(conv) == 1 and conv[0]["flops"] == 2 * 48 * 24 * 144
    assert conv[0]["note"].startswith("48x16 3x3->24 ") and conv[0]["note"].endswith(" sg") == (ctx._subgroup > 0)
    line = [ln for ln in format_table(rows).splitlines() if "matmul/tile.wgsl" in ln and "[" in ln][0]
    assert f"{conv[0]['flops'] / conv[0]['us'] / 1e3:.1f}" in line and "[48x16 3x3->24 " in line


@pytest.mark.parametrize("dyn", ["baked", "dynamic"])
@pytest.mark.parametrize("small_hw", [(3, 13), (5, 6)], ids=["26-columns", "12-columns"])
def test_subgroup_pointwise_conv_on_an_upsampled_operand(ctx, rng, monkeypatch, small_hw, dyn):
    """fuse_conv_upsample's kernel (A = x * s + the 2x bilinear upsampling of a small image) on the
    variant: its rows cut to an even divisor of the image row (26 columns: 5 -> 2, 12 columns:
    5 -> 4) and its row tiles padded to whole subgroups (78 tiles to 80, 30 to 32), the padding
    tiles interpolating the last row and storing nothing; its sizes baked into the text (the
    default, ``linalg.tile_up_dynamic``) or from the parameter buffer
    (``WEBNN_GPU_FORCE_TILE_UP_DYN=on``)."""
    from references import ref_resample

    if dyn == "dynamic":
        monkeypatch.setenv("WEBNN_GPU_FORCE_TILE_UP_DYN", "on")
    else:
        monkeypatch.delenv("WEBNN_GPU_FORCE_TILE_UP_DYN", raising=False)

    h, w = small_hw
    C, O = 8, 12
    x, small = data(rng, (1, 2 * h, 2 * w, C)), data(rng, (1, h, w, C))
    s = rng.uniform(0.5, 1.5, (1, 1, 1, C)).astype(np.float32)
    wt, bias = data(rng, (O, 1, 1, C)), data(rng, (O,))

    def build(bld, o):
        up = bld.resample2d(o["small"], mode="linear", scales=[2.0, 2.0], axes=[1, 2])
        return bld.relu(bld.conv2d(bld.add(bld.mul(o["x"], bld.constant(s)), up), bld.constant(wt),
                                   bias=bld.constant(bias), input_layout="nhwc", filter_layout="ohwi"))

    out, steps = build_run(ctx, build, {"x": x, "small": small})
    step = expect_sg(ctx, steps)
    assert "ares" in step.wgsl and "um0" in step.wgsl, "the upsampled operand is interpolated in the kernel"
    assert ("prm[" in step.wgsl) == (dyn == "dynamic")
    v = x.astype(np.float64) * s + ref_resample(small.astype(np.float64), "linear", [2 * h, 2 * w], axes=(1, 2))
    ref = np.einsum("nhwc,oc->nhwo", v, wt[:, 0, 0, :].astype(np.float64)) + bias
    absref = np.einsum("nhwc,oc->nhwo", np.abs(v), np.abs(wt[:, 0, 0, :].astype(np.float64))) + np.abs(bias)
    check(out, np.maximum(ref, 0), absref, C + 4, np.float32, "sg upsampled")


@pytest.mark.parametrize("dt", ["float32", "float16"])
@pytest.mark.parametrize("up", [True, False], ids=["upsampled", "same-size"])
def test_added_operand_loaded_as_words_bit_for_bit(ctx, rng, monkeypatch, up, dt):
    """The operand a pointwise conv adds to its input as it loads it (fuse_conv_input's skip
    connection, or fuse_conv_upsample's small image) is read as u64 words of 4 values where A
    is (``res_words``, ``WEBNN_GPU_FORCE_TILE_RES_WORDS=words|vec4``): right against float64
    NumPy, and bit for bit the vec4 form's; an odd image width (13 columns, 26 upsampled)
    cuts the row tiles."""
    from references import ref_resample

    h, w = 3, 13
    C, O = 8, 12
    np_dt = np.float16 if dt == "float16" else np.float32
    x = data(rng, (1, 2 * h, 2 * w, C)).astype(np_dt)
    r = data(rng, (1, h, w, C) if up else (1, 2 * h, 2 * w, C)).astype(np_dt)
    s = rng.uniform(0.5, 1.5, (1, 1, 1, C)).astype(np_dt)
    wt, bias = data(rng, (O, 1, 1, C)).astype(np_dt), data(rng, (O,)).astype(np_dt)

    def build(bld, o):
        add = bld.resample2d(o["r"], mode="linear", scales=[2.0, 2.0], axes=[1, 2]) if up else o["r"]
        return bld.relu(bld.conv2d(bld.add(bld.mul(o["x"], bld.constant(s)), add), bld.constant(wt),
                                   bias=bld.constant(bias), input_layout="nhwc", filter_layout="ohwi"))

    outs = {}
    for form in ("words", "vec4"):
        monkeypatch.setenv("WEBNN_GPU_FORCE_TILE_RES_WORDS", form)
        outs[form], steps = build_run(ctx, build, {"x": x, "r": r})
        step = tile_steps(steps)[0]
        assert "ares" in step.wgsl and ("um0" in step.wgsl) == up, "the added operand is read by the conv's kernel"
        a_words = re.search(r"var<storage, read> a: array<(vec2<u64>|u64)>;", step.wgsl) is not None
        res_words = re.search(r"var<storage, read> ares: array<(vec2<u64>|u64)>;", step.wgsl) is not None
        assert res_words == (form == "words" and a_words)
        assert a_words or not (ctx._tuning == "lane-loop" and "shader-int64" in ctx.features)
    np.testing.assert_array_equal(outs["words"], outs["vec4"])
    v = x.astype(np.float64) * s + (ref_resample(r.astype(np.float64), "linear", [2 * h, 2 * w], axes=(1, 2))
                                    if up else r.astype(np.float64))
    ref = np.einsum("nhwc,oc->nhwo", v, wt[:, 0, 0, :].astype(np.float64)) + bias
    absref = np.einsum("nhwc,oc->nhwo", np.abs(v), np.abs(wt[:, 0, 0, :].astype(np.float64))) + np.abs(bias)
    check(outs["words"], np.maximum(ref, 0), absref, C + 4, np_dt, f"{'upsampled' if up else 'added'} words")


@pytest.mark.parametrize("dyn", ["baked", "dynamic"])
def test_upsampled_operand_convs_of_two_sizes_share_one_kernel(ctx, rng, monkeypatch, dyn):
    """Two fuse_conv_upsample kernels of one graph on images of 8 x 16 and 16 x 16 pixels (the
    same row tile): with ``WEBNN_GPU_FORCE_TILE_UP_DYN=on`` the dynamic variant (sizes and the
    upsampling geometry from the parameter buffer) renders one WGSL text for both; by default
    each bakes its sizes (two texts, ``linalg.tile_up_dynamic``); both right against float64
    NumPy either way."""
    from references import ref_resample

    if dyn == "dynamic":
        monkeypatch.setenv("WEBNN_GPU_FORCE_TILE_UP_DYN", "on")
    else:
        monkeypatch.delenv("WEBNN_GPU_FORCE_TILE_UP_DYN", raising=False)

    C, O = 8, 12
    wt, bias = data(rng, (O, 1, 1, C)), data(rng, (O,))
    s = rng.uniform(0.5, 1.5, (1, 1, 1, C)).astype(np.float32)
    sizes = {"p": (4, 8), "q": (8, 8)}
    inputs = {}
    for k, (h, w) in sizes.items():
        inputs[k + "x"], inputs[k + "s"] = data(rng, (1, 2 * h, 2 * w, C)), data(rng, (1, h, w, C))
    b = webnn.MLGraphBuilder(ctx)
    ops = {n: b.input(n, {"data_type": "float32", "shape": list(a.shape)}) for n, a in inputs.items()}
    outs = {}
    for k in sizes:
        up = b.resample2d(ops[k + "s"], mode="linear", scales=[2.0, 2.0], axes=[1, 2])
        outs[k] = b.relu(b.conv2d(b.add(b.mul(ops[k + "x"], b.constant(s)), up), b.constant(wt),
                                  bias=b.constant(bias), input_layout="nhwc", filter_layout="ohwi"))
    graph = b.build(outs)
    steps = tile_steps([st for st in graph._steps if isinstance(st, KernelStep)])
    got = ctx.compute(graph, inputs)
    graph.destroy()
    assert len(steps) == 2 and all("um0" in st.wgsl for st in steps), [st.note for st in steps]
    if ctx._subgroup:
        assert (steps[0].wgsl == steps[1].wgsl) == (dyn == "dynamic"), [st.note for st in steps]
    w64 = wt[:, 0, 0, :].astype(np.float64)
    for k, (h, w) in sizes.items():
        v = inputs[k + "x"].astype(np.float64) * s + ref_resample(inputs[k + "s"].astype(np.float64), "linear",
                                                                  [2 * h, 2 * w], axes=(1, 2))
        ref = np.einsum("nhwc,oc->nhwo", v, w64) + bias
        absref = np.einsum("nhwc,oc->nhwo", np.abs(v), np.abs(w64)) + np.abs(bias)
        check(got[k], np.maximum(ref, 0), absref, C + 4, np.float32, f"sg upsampled {h}x{w}")


# ---------------------------------------------------------------- pool partials, workgroups
def test_subgroup_workgroups_leave_no_thread_idle_at_the_end(monkeypatch):
    """Below sixteen workgroups of 64 a launch takes one subgroup per workgroup (one size, so that
    launches of one kernel share its pipeline); from 1024 invocations workgroups of 64, or the
    next smaller size where that ends at least 5% sooner on two threads (an odd count of the
    larger workgroups). ``WEBNN_GPU_FORCE_TILE_SG_WORKGROUP=16`` keeps 16 below 1024 as well,
    stepping down the same way."""
    lanes = 8
    monkeypatch.delenv("WEBNN_GPU_FORCE_TILE_SG_WORKGROUP", raising=False)
    assert linalg._tile_workgroup(64, lanes) == 8  # at most eight subgroups: one per workgroup
    assert linalg._tile_workgroup(96, lanes) == 8
    assert linalg._tile_workgroup(560, lanes) == 8
    assert linalg._tile_workgroup(16 * 64 - 8, lanes) == 8
    assert linalg._tile_workgroup(16 * 64, lanes) == 64
    assert linalg._tile_workgroup(1176, lanes) == 16  # 19 of 64 (10 rounds) or 74 of 16 (37 of a quarter)
    assert linalg._tile_workgroup(3136, lanes) == 64  # 49 of 64: 25 rounds against 24.5, under 5%
    assert linalg._tile_workgroup(80, 0) == 16  # the plain kernel keeps its rule
    monkeypatch.setenv("WEBNN_GPU_FORCE_TILE_SG_WORKGROUP", "16")
    assert linalg._tile_workgroup(64, lanes) == 8
    assert linalg._tile_workgroup(80, lanes) == 8  # 5 workgroups of 16 (3 rounds) or 10 of 8 (5 of half)
    assert linalg._tile_workgroup(112, lanes) == 8  # 7 of 16 or 14 of 8
    assert linalg._tile_workgroup(96, lanes) == 16  # 6 of 16: both threads end together
    assert linalg._tile_workgroup(560, lanes) == 16  # 35 of 16: 36 rounds' worth against 35, under 5%
    assert linalg._tile_workgroup(1176, lanes) == 16
    assert linalg._tile_workgroup(80, 0) == 16
    monkeypatch.setenv("WEBNN_GPU_FORCE_TILE_SG_WORKGROUP", "8")  # not a choice: an error, not the default
    with pytest.raises(ValueError, match="WEBNN_GPU_FORCE_TILE_SG_WORKGROUP='8': expected one of 16"):
        linalg._tile_workgroup(64, lanes)


def test_pool_partials_rows_follow_the_tile_kernels_choice():
    """``dense_tile_rows`` (which sizes a pool's partial sums before the lowering) gives the rows
    the subgroup tile takes, the plain tile's without subgroup lanes, an image row's divisor for
    an upsampled operand."""
    assert linalg.dense_tile_rows(49, 128, 256, "lane-loop", 8, True) == linalg.choose_tile_sg(49, 128, 1, 8)[0] == 7
    assert linalg.dense_tile_rows(144, 32, 96, "lane-loop", 8, True) == 6
    assert linalg.dense_tile_rows(144, 32, 96, "lane-loop", 0, True) == linalg.choose_tile(144, 32, 1, "lane-loop", K=96)[0]
    assert linalg.dense_tile_rows(3, 32, 96, "lane-loop", 8, True) == linalg.choose_tile(3, 32, 1, "lane-loop", K=96)[0]
    assert linalg.dense_tile_rows(64 * 64, 16, 16, "lane-loop", 8, True, up_w=64) % 2 == 0


@pytest.mark.parametrize("hw, c, o, dt", [
    ((7, 7), 64, 24, np.float32),  # 49 rows: 7 row tiles of 7, one padding tile that writes no partials
    ((12, 12), 96, 32, np.float32),  # 144 rows of 6
    ((13, 11), 36, 40, np.float32),  # 143 rows, two column tiles
    ((9, 9), 40, 16, np.float16),
])
def test_subgroup_pointwise_conv_writes_its_global_pools_partial_sums(ctx, rng, hw, c, o, dt):
    """fuse_pool_partials on the subgroup variant: a pointwise conv (bias, ReLU) and the global
    mean of its output, both graph outputs; the conv's kernel writes a row of channel sums per
    row tile and the padding tiles none."""
    if dt == np.float16 and "float16" not in ctx.supported_data_types:
        pytest.fail("float16 is not supported on this adapter")
    x, w, bias = data(rng, (1, *hw, c), dt), data(rng, (o, 1, 1, c), dt), data(rng, (o,), dt)
    b = webnn.MLGraphBuilder(ctx)
    xin = b.input("x", {"data_type": webnn._dtypes.from_numpy(np.dtype(dt)), "shape": list(x.shape)})
    y = b.relu(b.conv2d(xin, b.constant(w), bias=b.constant(bias), input_layout="nhwc", filter_layout="ohwi"))
    graph = b.build({"y": y, "p": b.average_pool2d(y, layout="nhwc")})
    steps = tile_steps([s for s in graph._steps if isinstance(s, KernelStep)])
    out = ctx.compute(graph, {"x": x})
    graph.destroy()
    (step,) = steps
    assert step.node.attrs.get("pool_output") == "partials" and is_sg(step) == (ctx._subgroup > 0)
    z = conv2d_nhwc(x, w, bias)
    X, W = np.abs(x.astype(np.float64)).reshape(-1, c), np.abs(w.astype(np.float64)).reshape(o, c)
    absref = (X @ W.T + np.abs(bias.astype(np.float64))).reshape(z.shape)
    check(out["y"], np.maximum(z, 0), absref, c + 1, dt, "conv")
    # the mean of the outputs as computed: each output's accumulation error and rounding to the
    # data type, the f32 sums of the partials, the mean's own rounding
    ref_p = np.maximum(z, 0).mean(axis=(1, 2), keepdims=True)
    abs_p = absref.mean(axis=(1, 2), keepdims=True)
    ulp = 2.0**-11 if dt == np.float16 else 2.0**-24
    bound = abs_p * (4 * (c + 1 + hw[0] * hw[1]) * 2.0**-24 + ulp) + ulp * np.abs(ref_p) + 1e-30
    err = np.abs(out["p"].astype(np.float64) - ref_p)
    assert out["p"].shape == ref_p.shape and (err <= bound).all(), (err.max(), bound.min())
