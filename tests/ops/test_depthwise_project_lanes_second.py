"""The channel-lane kernel's second stage (``conv/depthwise_project_lanes.wgsl`` with ``p2``: a
pointwise conv2d reading the projection's output, computed in the same kernel; the compiler's
``fuse_project_consumer``, ``webnn_gpu.ops.conv._dwpl_second``) against float64 NumPy, and the
near misses that keep the consumer a kernel of its own (the rule on the IR:
``tests/compiler/test_rule_project_consumer.py``)."""

from __future__ import annotations

import numpy as np
import pytest

from webnn_gpu.ops import conv

from helpers import kernel_steps, run_graph
from references import ref_conv2d

LANES = "conv/depthwise_project_lanes.wgsl"
TILE = "matmul/tile.wgsl"


def _lane_loop(ctx, monkeypatch, forced: bool = True) -> None:
    """lavapipe's tuning (subgroups are expected there: fail, not skip); ``forced``: the pair on
    the channel-lane kernel and the second stage wherever they fit, whatever the estimates."""
    if not ctx._subgroup:
        pytest.fail("subgroups are expected on lavapipe")
    monkeypatch.setattr(ctx, "_tuning", "lane-loop")
    for var in ("WEBNN_GPU_FORCE_DWP", "WEBNN_GPU_FORCE_DWP_FORM", "WEBNN_GPU_FORCE_DWPL_SECOND"):
        monkeypatch.delenv(var, raising=False)
    if forced:
        monkeypatch.setenv("WEBNN_GPU_FORCE_DWP", "fused")
        monkeypatch.setenv("WEBNN_GPU_FORCE_DWP_FORM", "lanes")
        monkeypatch.setenv("WEBNN_GPU_FORCE_DWPL_SECOND", "on")


def _chain(rng, hw, C, N, K, *, s=1, npdt=np.float32, expand=0, residual="r", ck=1, cpad=0, cs=1, cgroups=1,
           reads="y1", outputs=("y2",)):
    """An optional 1x1 expansion of an ``expand``-channel input to C (bias, prelu), a depthwise
    3x3 conv2d at stride ``s`` (bias, SAME padding), its projection to N (bias), a residual
    (``"x"``: the block's input, N channels at stride 1; ``"r"``: another input; ``"dw"``: the
    depthwise input itself, N == C; None) and prelu (``y1``), then the consumer: a ``ck`` x ``ck``
    conv2d of ``reads`` (``"y1"`` or the block's input ``"x"``) to K (padding ``cpad``, stride
    ``cs``, ``cgroups`` groups; bias, prelu: ``y2``). ``outputs`` among y1, y2 and z = -y1 (a
    second reader of y1): (build, inputs, float64 references)."""
    h = w = hw
    f64 = np.float64

    def rnd(*shape, scale=1.0):
        return (rng.standard_normal(shape) * scale).astype(npdt)

    x = rnd(1, h, w, expand or C)
    we, be, se = rnd(C, 1, 1, expand or 1, scale=expand ** -0.5 if expand else 1), rnd(C), rnd(C, scale=0.1)
    wd, bd = rnd(1, 3, 3, C, scale=0.3), rnd(C)
    wp, bp, sp = rnd(N, 1, 1, C, scale=C ** -0.5), rnd(N), rnd(N, scale=0.1)
    cin = N if reads == "y1" else (expand or C)
    wq, bq, sq = rnd(K, ck, ck, cin // cgroups, scale=(ck * ck * cin // cgroups) ** -0.5), rnd(K), rnd(K, scale=0.1)
    pads = [0, 1, 0, 1] if s == 2 else [1, 1, 1, 1]
    oh = (h + pads[0] + pads[1] - 3) // s + 1
    inputs = {"x": x}
    if residual == "r":
        inputs["r"] = rnd(1, oh, oh, N)

    def build(b, o):
        t = o["x"]
        if expand:
            t = b.prelu(b.conv2d(t, b.constant(we), input_layout="nhwc", filter_layout="ohwi", bias=b.constant(be)),
                        b.constant(se))
        d = b.conv2d(t, b.constant(wd), input_layout="nhwc", filter_layout="ihwo", groups=C, padding=pads,
                     strides=[s, s], bias=b.constant(bd))
        p = b.conv2d(d, b.constant(wp), input_layout="nhwc", filter_layout="ohwi", bias=b.constant(bp))
        if residual is not None:
            p = b.add(p, {"x": o["x"], "r": o.get("r"), "dw": t}[residual])
        y1 = b.prelu(p, b.constant(sp))
        q = b.conv2d(y1 if reads == "y1" else o["x"], b.constant(wq), input_layout="nhwc", filter_layout="ohwi",
                     padding=[cpad] * 4, strides=[cs, cs], groups=cgroups, bias=b.constant(bq))
        outs = {"y1": y1, "y2": b.prelu(q, b.constant(sq)), "z": b.neg(y1)}
        return {k: outs[k] for k in outputs}

    def prelu(v, slope):
        return np.where(v >= 0, v, v * slope.astype(f64))

    def conv(v, wt, bias, pad=(0, 0, 0, 0), stride=1, groups=1):
        return ref_conv2d(v.transpose(0, 3, 1, 2), wt.astype(f64).transpose(0, 3, 1, 2), list(pad), (stride, stride),
                          (1, 1), groups=groups).transpose(0, 2, 3, 1) + bias.astype(f64)

    x64 = x.astype(f64)
    t = prelu(conv(x64, we, be), se) if expand else x64
    d = conv(t, wd.transpose(3, 1, 2, 0), bd, pads, s, groups=C)
    p = conv(d, wp, bp)
    if residual is not None:
        p = p + {"x": x64, "r": inputs.get("r", np.zeros(1)).astype(f64), "dw": t}[residual]
    y1 = prelu(p, sp)
    y2 = prelu(conv(y1 if reads == "y1" else x64, wq, bq, [cpad] * 4, cs, cgroups), sq)
    refs = {"y1": y1, "y2": y2, "z": -y1}
    return build, inputs, {k: refs[k] for k in outputs}


def _check(ctx, build, inputs, refs, dt: str) -> list:
    """Run the graph, compare every output with its reference (float32: 1e-4, float16 3e-2,
    relative and absolute), and return its kernel steps."""
    got = run_graph(ctx, build, inputs)
    tol = 1e-4 if dt == "float32" else 3e-2
    for k, ref in refs.items():
        np.testing.assert_allclose(got[k].astype(np.float64), ref, atol=tol, rtol=tol, err_msg=k)
    return kernel_steps(ctx, build, inputs)


def _merged(steps) -> bool:
    """Whether a channel-lane kernel of ``steps`` computes a second stage."""
    return any(st.template == LANES and " out2:" in st.wgsl for st in steps)


def test_iris_block_merges_unforced(ctx, rng, monkeypatch):
    """iris_landmark's block at its size, unforced: a 1x1 conv 64 -> 32 (prelu) on the tile
    kernel, the depthwise 3x3 on 32 channels + 32 -> 64 + the block's input + prelu and the next
    block's 1x1 conv 64 -> 32 (prelu) as one channel-lane kernel; float64 NumPy."""
    _lane_loop(ctx, monkeypatch, forced=False)
    build, inputs, refs = _chain(rng, 32, 32, 64, 32, expand=64, residual="x")
    steps = _check(ctx, build, inputs, refs, "float32")
    assert [st.template for st in steps] == [TILE, LANES] and _merged(steps)


# (image H = W, C, N, K, stride, residual, float type, expansion channels, the consumer output's
# binding: words of 8 values where a lane stores two columns, else of 4): the second stage's forms
_MERGED = {
    "float16, the block's expansion and input residual":
        (12, 32, 64, 32, 1, "x", "float16", 64, "array<u64>"),
    "two consumer columns per lane stored as words (K=64), another tensor's residual":
        (9, 32, 64, 64, 1, "r", "float32", 0, "array<vec4<u64>>"),
    "first output and consumer not as 8-value words (N=36, K=36), stride 2, odd image":
        (13, 32, 36, 36, 2, "r", "float32", 0, "array<vec2<u64>>"),
    "3 lanes past the consumer's columns (K=20), the depthwise input's residual from the held rows":
        (10, 32, 32, 20, 1, "dw", "float32", 0, "array<vec2<u64>>"),
    "two channel groups per lane (C=64), three consumer columns per lane (K=80), float16":
        (7, 64, 32, 80, 1, None, "float16", 0, "array<u64>"),
    "4 pixels per pass of the second stage (K=4), float16, a ragged strip":
        (7, 32, 64, 4, 1, "r", "float16", 0, "array<u64>"),
    "2 pixels per pass (K=12, 3 of 4 lanes), a strip of 3 columns (half a pass)":
        (3, 32, 64, 12, 1, "r", "float32", 0, "array<vec2<u64>>"),
    "depthwise channels not a multiple of 4 (C=42, loaded value by value), stride 2":
        (9, 42, 48, 32, 2, None, "float32", 0, "array<vec2<u64>>"),
}


@pytest.mark.parametrize("case", list(_MERGED))
def test_second_stage_against_numpy(ctx, rng, monkeypatch, case):
    """The second stage (forced) with one to three consumer columns per lane, stored as words of
    8 or 4 values, a first output not stored as words (its columns broadcast from lanes l, l +
    sg), lanes past the consumer's columns, 2 or 4 pixels per pass, stride 2, residuals loaded
    or held, two channel groups per lane, depthwise channels not a multiple of 4, float16 (the consumer reads the first output rounded
    to float16, as stored): float64 NumPy, one kernel."""
    hw, C, N, K, s, residual, dt, expand, out2 = _MERGED[case]
    if dt == "float16" and "float16" not in ctx.supported_data_types:
        pytest.fail("float16 is expected on lavapipe")
    _lane_loop(ctx, monkeypatch)
    npdt = np.float16 if dt == "float16" else np.float32
    build, inputs, refs = _chain(rng, hw, C, N, K, s=s, npdt=npdt, expand=expand, residual=residual)
    steps = _check(ctx, build, inputs, refs, dt)
    assert [st.template for st in steps][-1:] == [LANES] and _merged(steps)
    if "shader-int64" in ctx.features:
        assert f" out2: {out2};" in steps[-1].wgsl
    ow = steps[-1].node.outputs[0].shape[2]
    assert ("pp2 ==" in steps[-1].wgsl) == (conv._dwpl_pack(K // 4, 8, min(conv.DWPL_TW, ow)) > 1) == ("per pass" in case)


def test_first_output_also_a_graph_output_and_read_elsewhere(ctx, rng, monkeypatch):
    """The projection's output is a graph output and has a second reader: the kernel stores it
    too and computes the consumer (one kernel and the reader's); float64 NumPy."""
    _lane_loop(ctx, monkeypatch)
    build, inputs, refs = _chain(rng, 9, 32, 64, 32, outputs=("y1", "y2", "z"))
    steps = _check(ctx, build, inputs, refs, "float32")
    assert steps[0].template == LANES and _merged(steps) and len(steps) == 2


# consumer options that keep it a kernel of its own
_NOT_MERGED = {
    "K=30, not a multiple of 4": dict(K=30),
    "K=256, more columns per lane than DWPL_MAX_NPL": dict(K=256),
    "a 3x3 consumer with padding": dict(ck=3, cpad=1),
    "a stride-2 1x1 consumer": dict(cs=2),
    "a grouped 1x1 consumer": dict(cgroups=2),
    "a consumer of the block's input, not the projection's output": dict(reads="x", outputs=("y1", "y2")),
}


@pytest.mark.parametrize("case", list(_NOT_MERGED))
def test_near_misses_stay_kernels_of_their_own(ctx, rng, monkeypatch, case):
    """Consumers the second stage does not take (forced): the channel-lane kernel and the
    consumer's own kernel; float64 NumPy."""
    _lane_loop(ctx, monkeypatch)
    opts = {"K": 32, **_NOT_MERGED[case]}
    build, inputs, refs = _chain(rng, 9, 32, 64, opts.pop("K"), **opts)
    steps = _check(ctx, build, inputs, refs, "float32")
    assert not _merged(steps) and len(steps) == 2 and LANES in [st.template for st in steps]


def test_fallback_is_the_graph_without_the_rule(ctx, rng, monkeypatch):
    """Where the rule attaches the consumer but the pair does not run on the channel-lane kernel
    (``WEBNN_GPU_FORCE_DWP_FORM=blocks``), the consumer is lowered as its own conv: the same
    kernels (text, labels, workgroups) and bit-identical outputs as with
    ``WEBNN_GPU_FORCE_DWPL_SECOND=off`` (the rule not firing)."""
    _lane_loop(ctx, monkeypatch)
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP_FORM", "blocks")
    build, inputs, refs = _chain(rng, 9, 32, 64, 32, outputs=("y1", "y2"))
    kernels = {}
    got = {}
    for mode in ("on", "off"):
        monkeypatch.setenv("WEBNN_GPU_FORCE_DWPL_SECOND", mode)
        kernels[mode] = [(st.template, st.wgsl, st.label, st.groups) for st in kernel_steps(ctx, build, inputs)]
        got[mode] = run_graph(ctx, build, inputs)
    assert kernels["on"] == kernels["off"] and [k[0] for k in kernels["on"]][0] == "conv/depthwise_project.wgsl"
    for k in refs:
        np.testing.assert_array_equal(got["on"][k], got["off"][k])
        np.testing.assert_allclose(got["on"][k].astype(np.float64), refs[k], atol=1e-4, rtol=1e-4)


def test_estimate_keeps_consumers_that_ran_no_faster():
    """_dwpl_second on the lane-loop profile: the iris block's consumer (32 x 32 x 64 -> 32),
    small images and face detection's 48 x 48 x 48 -> 4 (4 pixels per pass) run as the second
    stage; face detection's 24 x 24 x 64 -> 48 (0.95-1.05 of the consumer's kernel and dispatch,
    benchmarks/dwpl_second.py --shapes) stays a kernel of its own, as do a consumer after a split
    or packed projection; WEBNN_GPU_FORCE_DWPL_SECOND forces either way."""
    def geometry(hw, C):
        return dict(NB=1, H=hw, W=hw, C=C, O=C, OH=hw, OW=hw, KH=3, KW=3, G=C, sh=1, sw=1, dh=1, dw=1, pt=1, pl=1)

    def second(hw, C, N, K, tuning="lane-loop"):
        g = geometry(hw, C)
        return conv._dwpl_second(g, N // 4, K // 4, conv._dwp_lanes(g, N // 4, 8), 8, tuning)

    assert second(32, 32, 64, 32) == 1 and second(8, 48, 64, 64) == 2 and second(12, 32, 64, 32) == 1
    assert second(48, 24, 48, 4) == 1 and conv._dwpl_pack(1, 8, 4) == 4
    assert second(24, 32, 64, 48) == 0
    assert second(16, 64, 128, 64) == 0 and second(24, 32, 8, 32) == 0  # split columns; 4 pixels per pass
    assert second(32, 32, 64, 32, "default") == 0  # no fit
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("WEBNN_GPU_FORCE_DWPL_SECOND", "on")
        assert second(24, 32, 64, 48) == 2
        mp.setenv("WEBNN_GPU_FORCE_DWPL_SECOND", "off")
        assert second(32, 32, 64, 32) == 0


@pytest.mark.parametrize("form", ["lanes", "blocks"])
def test_storage_buffer_limit_counts_storage_bindings_only(ctx, rng, monkeypatch, form):
    """At WebGPU's default of 8 storage buffers per stage: a depthwise + projection pair with a
    residual and prelu binds 8 operands and the uniform parameter block (not a storage buffer),
    so it builds fused on either kernel; the pair with a consumer whose operands would pass 8
    keeps the consumer a kernel of its own (the rule counts every operand of both, an operand
    both epilogues read twice) and still matches."""
    _lane_loop(ctx, monkeypatch)
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP_FORM", form)
    monkeypatch.setitem(ctx._limits, "max-storage-buffers-per-shader-stage", 8)
    build, inputs, refs = _chain(rng, 6, 32, 32, 32, outputs=("y1",))
    steps = _check(ctx, build, inputs, refs, "float32")
    assert [st.template for st in steps] == [LANES if form == "lanes" else "conv/depthwise_project.wgsl"]
    build, inputs, refs = _chain(rng, 6, 32, 32, 32, outputs=("y1", "y2"))
    steps = _check(ctx, build, inputs, refs, "float32")
    assert not _merged(steps) and len(steps) == 2
