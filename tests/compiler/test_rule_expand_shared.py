"""fuse_depthwise_project taking the expansion conv of any input width into the fused kernel's
workgroup memory (``expand_shared``) on hand-made IR (no GPU): where it fires (small images
on the lane-loop profile, the cost model of ``webnn_gpu.ops.conv._expand_shared_cost``), and
its near misses; and a pair that runs as two kernels taking its expansion into one kernel of
the three (``webnn_gpu.ops.conv.triple_pays``) where it measured faster, and not where it did
not. The GPU tests against float64 NumPy are in tests/perf/test_expand_shared_gpu.py and
tests/ops/test_depthwise_project_triple.py."""

from __future__ import annotations

import numpy as np
import pytest
from _irb import IR
from _ireval import evaluate, feeds

from webnn_gpu.compiler import check_order
from webnn_gpu.compiler.rules.conv import fuse_depthwise_project
from webnn_gpu.ops import conv


class _Ctx:
    """What the rule reads of a context: the tuning profile and the device's limits (lavapipe's
    storage buffers per stage)."""

    def __init__(self, tuning="lane-loop"):
        self._tuning = tuning
        self.limits = {"max-storage-buffers-per-shader-stage": 32}


def _block(ir, hw, K, C, N, *, stride=1, window=3, x=None):
    """1x1 conv K -> C (bias, PReLU) -> depthwise (bias) -> 1x1 conv C -> N (bias): the
    expansion's output, the depthwise output and the projection's."""
    x = ir.input((1, hw, hw, K)) if x is None else x
    e = ir.conv(x, ir.filt(C, 1, K), bias=ir.const(np.linspace(-0.5, 0.5, C)))
    e.producer.attrs["epilogue"] = [{"op": "prelu", "input": 3, "axis": 3}]
    e.producer.inputs.append(ir.const(np.linspace(0.1, 0.3, C), (C,)))
    d = ir.conv(e, ir.filt(C, window, 1), groups=C, pad=(window - 1) // 2, stride=stride,
                bias=ir.const(np.linspace(-1, 1, C)))
    y = ir.conv(d, ir.filt(N, 1, C), bias=ir.const(np.linspace(0, 1, N)))
    return e, d, y


def _unfused(nodes):
    """The nodes with each depthwise_project node replaced by the originals it holds."""
    out = []
    for n in nodes:
        if n.op == "depthwise_project":
            out += [p for p in (n.attrs.get("expand"), n.attrs["depthwise"], n.attrs["project"]) if p is not None]
        else:
            out.append(n)
    return out


def _fused(ir, outputs, tuning="lane-loop"):
    nodes = list(ir.nodes)
    new = fuse_depthwise_project(nodes, outputs, _Ctx(tuning))
    assert nodes == ir.nodes, "the rule does not mutate what it receives"
    check_order(new, outputs, "fuse_depthwise_project")
    data = feeds(nodes)
    want, got = evaluate(nodes, outputs, data), evaluate(_unfused(new), outputs, data)
    for k in outputs:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-12, atol=1e-12, err_msg=k)
    return new


def _shared(nodes):
    return [n for n in nodes if n.op == "depthwise_project" and n.attrs.get("expand_shared")]


@pytest.mark.parametrize("hw,K", [(1, 128), (2, 128), (4, 128), (2, 36), (4, 260)])
def test_small_images_compute_their_expansion_inside(hw, K):
    ir = IR()
    e, _, y = _block(ir, hw, K, 64, 128)
    new = _fused(ir, {"y": y})
    (node,) = _shared(new)
    assert [n.op for n in new] == ["depthwise_project"]
    assert node.attrs["expand"] is e.producer and node.inputs[0] is e.producer.inputs[0]


def test_large_images_keep_the_expansion_apart():
    """16 x 16 (iris's 128 -> 64): the halo's recompute over many workgroups costs more than the
    separate kernel (measured 2x); 32 x 32: the pair runs on the channel-lane kernel."""
    for hw, K, C, N in ((16, 128, 64, 128), (32, 64, 32, 64)):
        ir = IR()
        _, _, y = _block(ir, hw, K, C, N)
        new = _fused(ir, {"y": y})
        assert not _shared(new) and [n.op for n in new] == ["conv2d", "depthwise_project"], hw


def test_expansion_near_misses():
    for case in ("second reader", "output", "K % 4", "input prologue", "default profile", "batch 2",
                 "too wide for workgroup memory", "stride-2 5x5 at 64x64"):
        ir = IR()
        K = 130 if case == "K % 4" else 128
        hw = 64 if case.startswith("stride") else 4
        x = ir.input((2 if case == "batch 2" else 1, hw, hw, K))
        C = 1024 if case.startswith("too wide") else 64
        if case == "input prologue":  # a per-channel scale of the expansion's input (fuse_conv_input)
            e, _, y = _block(ir, hw, K, C, 128, x=x)
            e.producer.attrs["input_scale"] = len(e.producer.inputs)
            e.producer.inputs.append(ir.const(np.linspace(1, 2, K), (K,)))
        elif case.startswith("stride"):
            e, _, y = _block(ir, hw, 32 * 4, 64, 32, stride=2, window=5, x=x)
        else:
            e, _, y = _block(ir, hw, K, C, 32 if C > 128 else 128, x=x)
        outputs = {"y": y}
        if case == "second reader":
            outputs["z"] = ir.op("neg", [e])
        elif case == "output":
            outputs["e"] = e
        new = _fused(ir, outputs, "default" if case == "default profile" else "lane-loop")
        assert not _shared(new), case
        assert e.producer in new or case == "too wide for workgroup memory" and not any(
            n.op == "depthwise_project" for n in new), case


def test_forced_and_switched_off(monkeypatch):
    """WEBNN_GPU_FORCE_DWP_EXPAND=shared takes a pair the model declines where its band fits;
    =off keeps every expansion apart."""
    ir = IR()
    _, _, y = _block(ir, 16, 128, 64, 128)
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP_EXPAND", "shared")
    assert _shared(_fused(ir, {"y": y}))
    ir = IR()
    _, _, y = _block(ir, 2, 128, 64, 128)
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP_EXPAND", "off")
    assert not _shared(_fused(ir, {"y": y}))


def test_the_bands_cover_every_row_a_block_reads():
    """Each workgroup's band (conv._expand_bands, the kernel's own formula) holds every input row
    its blocks' windows reach inside the image, for both orders of the blocks."""
    for hw, stride, window in ((8, 1, 3), (9, 2, 3), (5, 1, 5), (17, 2, 5)):
        g = {"KH": window, "KW": window, "sh": stride, "sw": stride, "dh": 1, "dw": 1, "NB": 1, "H": hw, "W": hw,
             "C": 16, "OH": (hw + 2 * (window // 2) - window) // stride + 1, "pt": window // 2}
        g["OW"] = g["OH"]
        for th, tw, splits, sg in ((1, 2, 1, 8), (2, 2, 1, 0), (1, 1, 3, 0), (3, 1, 2, 0)):
            bands = conv._expand_bands(g, th, tw, splits, sg)
            ohb, owb = -(-g["OH"] // th), -(-g["OW"] // tw)
            wg = max(conv.EXPAND_SHARED_WORKGROUP, sg)
            padded = -(-ohb * owb // wg) * wg
            for i, rows in enumerate(bands):
                lanes = range(i * wg, (i + 1) * wg)
                blocks = {min(gi % padded, ohb * owb - 1) if sg else gi // splits for gi in lanes
                          if sg or gi < ohb * owb * splits}
                need = {y for b in blocks for t in range(th) for k in range(window)
                        if 0 <= (y := ((b // owb) * th + t) * stride - g["pt"] + k) < hw}
                r0 = min(need)
                assert max(need) - r0 + 1 <= rows, (hw, th, tw, splits, sg, i)


@pytest.mark.parametrize("shape", [(5, 256, 128, 32, 1), (3, 256, 128, 64, 2), (5, 512, 128, 8, 2)])
def test_expand_shared_ok_sizes_the_band_for_the_devices_lanes(monkeypatch, shape):
    """With 16 subgroup lanes (llvmpipe on AVX-512) the kernel's workgroups hold 16 blocks: the
    rule checks the band for the lanes it is given, so what it takes fits workgroup memory."""
    hw, K, C, N, s = shape
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP_EXPAND", "shared")
    ir = IR()
    e, d, y = _block(ir, hw, K, C, N, stride=s)
    en, dn, pn = e.producer, d.producer, y.producer
    g = conv._geometry(dn)
    for lanes in (8, 16):
        if conv.expand_shared_ok(en, dn, pn, "lane-loop", lanes):
            n4 = -(-N // 4)
            for plan_sg, sg in ((0, 0), (lanes, lanes), (0, lanes)):
                th, tw, splits = conv._dwp_plan(g, n4, 0, "lane-loop", True, sg=plan_sg)
                assert max(conv._expand_bands(g, th, tw, splits, sg)) * g["W"] * g["C"] * 4 <= conv.EXPAND_SHARED_BYTES


def test_expand_bands_of_blocks_below_the_image_are_empty():
    """Blocks that read only the padding rows below the image expand no rows (never a negative
    band)."""
    g = {"NB": 1, "H": 2, "W": 2, "C": 64, "OH": 18, "OW": 2, "KH": 3, "KW": 3, "sh": 1, "sw": 1, "dh": 1,
         "dw": 1, "pt": 1, "pl": 1}  # 17 rows of padding below: 18 one-row blocks, workgroups of 8
    bands = conv._expand_bands(g, 1, 2, 1, 0)
    assert bands == [2, 0, 0]


# ---------------------------------------------------------------- three kernels as one (triple_pays)
def _triples(nodes):
    return [n for n in nodes if n.op == "depthwise_project" and n.attrs.get("expand") is not None
            and not n.attrs.get("expand_shared")]


def _dw_geometry(hw, C, window, stride):
    ir = IR()
    _, d, _ = _block(ir, hw, 16, C, 8, stride=stride, window=window)
    return conv._geometry(d.producer)


def test_a_split_pair_takes_its_expansion_where_one_kernel_pays():
    """56 x 56, 16 -> 96, 5x5 stride 2, -> 24 (hand_landmark_lite's): the pair alone runs as two
    kernels; with its expansion, one kernel measured 0.89-0.95 of the three."""
    ir = IR()
    e, d, y = _block(ir, 56, 16, 96, 24, stride=2, window=5)
    assert not conv.project_pays(conv._geometry(d.producer), 24, "lane-loop")
    new = _fused(ir, {"y": y})
    (node,) = _triples(new)
    assert [n.op for n in new] == ["depthwise_project"]
    assert node.attrs["expand"] is e.producer and node.inputs[0] is e.producer.inputs[0]


@pytest.mark.parametrize("case", ["stride-2 5x5 on 24 -> 144", "stride-1 5x5", "stride-1 3x3 at 28 x 28",
                                  "wider than EXPAND_MAX_K", "second reader", "default profile", "off"])
def test_triple_near_misses_stay_three_kernels(case, monkeypatch):
    """Blocks whose pair runs as two kernels and whose one kernel measured slower (or the
    rule may not take): pose_detection's and hand_landmark_full's 56 x 56, 24 -> 144, 5x5
    stride 2, -> 40 (1.53 of the three kernels on its 1 x 2 block), hand_landmark_lite's 28 x 28,
    24 -> 144, 5x5 stride 1 (1.97), 28 x 28, 24 -> 144, 3x3 stride 1 (1.05, estimated 0.99), an
    expansion from 40 channels, an expansion with a second reader, the default profile and
    ``WEBNN_GPU_FORCE_DWP_TRIPLE=off``."""
    hw, K, C, N, window, stride = {"stride-2 5x5 on 24 -> 144": (56, 24, 144, 40, 5, 2),
                                   "stride-1 5x5": (28, 24, 144, 24, 5, 1),
                                   "stride-1 3x3 at 28 x 28": (28, 24, 144, 24, 3, 1),
                                   "wider than EXPAND_MAX_K": (56, 40, 96, 24, 5, 2)}.get(case, (56, 16, 96, 24, 5, 2))
    if case == "off":
        monkeypatch.setenv("WEBNN_GPU_FORCE_DWP_TRIPLE", "off")
    ir = IR()
    e, d, y = _block(ir, hw, K, C, N, stride=stride, window=window)
    outputs = {"y": y, "z": ir.op("neg", [e])} if case == "second reader" else {"y": y}
    new = _fused(ir, outputs, "default" if case == "default profile" else "lane-loop")
    assert not _triples(new), case
    if case != "default profile":  # the default profile's own model fuses this pair
        assert [n.op for n in new if n.op != "neg"] == ["conv2d", "conv2d", "conv2d"], case


def test_triple_forced_on_takes_a_block_the_model_declines(monkeypatch):
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWP_TRIPLE", "on")
    ir = IR()
    _, _, y = _block(ir, 28, 24, 144, 24, stride=1, window=5)
    assert [n.op for n in _fused(ir, {"y": y})] == ["depthwise_project"]


# (image, K, C, N, window, stride) and what one kernel of the three measured against the three
# (benchmarks/dw_shapes.py --triples, medians of 6-8 alternating rounds, 2026-11-26)
_TRIPLE_TAKEN = [((56, 16, 96, 24, 5, 2), 0.95), ((80, 16, 96, 24, 5, 2), 0.89), ((112, 16, 96, 24, 3, 2), 0.52),
                 ((56, 24, 144, 32, 3, 2), 0.73), ((56, 12, 72, 24, 5, 2), 0.80), ((56, 32, 160, 40, 3, 2), 0.81),
                 ((64, 16, 96, 24, 5, 2), 0.91), ((56, 16, 80, 24, 5, 2), 0.91)]
_TRIPLE_APART = [((56, 24, 144, 40, 5, 2), 1.53), ((28, 24, 144, 24, 5, 1), 1.97), ((28, 24, 144, 24, 3, 1), 1.05),
                 ((28, 24, 120, 24, 3, 1), 1.01), ((57, 16, 96, 24, 5, 2), 1.00), ((56, 20, 120, 24, 5, 2), 1.05),
                 ((40, 32, 128, 32, 3, 1), 1.12), ((28, 32, 128, 40, 5, 2), 2.49), ((56, 24, 96, 24, 5, 1), 1.96)]


@pytest.mark.parametrize("shape,measured", _TRIPLE_TAKEN + _TRIPLE_APART,
                         ids=lambda v: "x".join(map(str, v)) if isinstance(v, tuple) else f"{v}")
def test_triple_pays_where_it_measured_faster(shape, measured):
    """The decision on the measured blocks whose pair runs as two kernels: taken where one
    kernel measured faster, kept apart where it measured even or slower."""
    hw, K, C, N, window, stride = shape
    g = _dw_geometry(hw, C, window, stride)
    assert not conv.project_pays(g, N, "lane-loop")
    assert conv.triple_pays(g, N, K // 4, "lane-loop") == (measured < 1), shape
    assert not conv.triple_pays(g, N, K // 4, "default")
