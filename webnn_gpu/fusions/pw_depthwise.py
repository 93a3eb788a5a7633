"""A pointwise conv and the depthwise conv after it, on a small image, as one fused operator,
``pw_depthwise``.

Pattern (after :func:`~webnn_gpu.compiler.rules.epilogue.fuse_epilogue`: each conv's bias,
activation and residual add are its epilogue steps)::

    h = ep1(conv2d_1x1(x, W1))           NHWC, a constant filter, one group
    y = ep2(depthwise_conv2d(h, F))      NHWC, groups == channels (multiplier 1), a constant filter

where the image holds at most :data:`PWDW_MAX_PIXELS` pixels. Operator: ``pw_depthwise``
(:class:`PwDepthwiseAttrs`), legality :func:`pw_depthwise_ok`, rule :func:`fuse_pw_depthwise`,
lowering :func:`lower_pw_depthwise` onto ``shaders/conv/pw_depthwise.wgsl`` (a workgroup per
channel block and image: the pointwise output of its channels for the whole image in workgroup
memory, then the depthwise conv from there; ``h`` stored as well where something else reads it).
"""

from __future__ import annotations

import dataclasses
import logging

import numpy as np

from .. import _env
from .._env import DEBUG
from .._ir import GraphView, Node
from .._lower import workgroup_bytes
from ..compiler.rules._common import _max_bindings, place_pair, ready_before
from ..ops import _epilogue
from ..ops._registry import lowering
from ..ops.conv import _conv_epilogue, _conv_variant, _dw_taps, _geometry, _pointwise_matrix, _relayout, _segment
from ..ops.linalg import (B_UNIFORM_FLOATS, FLOATS, LOOP_BUDGET, constant_array, make_constant, tile_words,
                          uniform_copy, wgsl_type)
from ._attrs import FusedAttrs

log = logging.getLogger("webnn_gpu")

#: Most pixels of the image (the workgroup holds them all for its channel block): 14 x 14. A
#: 16 x 16 image (pose_landmark_full's 16x16x64 -> 384, 5x5) ran 0.94 of the two kernels (65 us
#: of the model's 54 ms), for a pipeline more on the model whose warm build is at its limit.
PWDW_MAX_PIXELS = 196
#: Most input channels and weights (input x output channels) of the pointwise conv: the fused
#: kernel's pointwise part works on a workgroup's block of 32 channels where the tile kernel
#: takes 48 and more per lane, so it takes more time per multiply-add; the deeper the product,
#: the more of that against what the launch and the depthwise conv's loads save. Measured
#: (kernel timestamps, the two forms alternating in one process: benchmarks/knob_ab.py, 16
#: rounds, and benchmarks/pw_depthwise.py; docs/conv.md "A pointwise conv and its depthwise conv
#: in one launch"): K 48 and 64 (hand_landmark_lite, pose_landmark_full) 0.87 and 0.94 of the two
#: kernels; K 80 (hand_landmark_full, pose_detection) 0.97-0.98, K 192 and 384 to 48 and 96
#: channels (face_detection_full_range_sparse) 0.99, 88 x 528 ... 192 x 1152 alone 0.95-1.22.
PWDW_MAX_K = 64
PWDW_MAX_WEIGHTS = 40960
#: Data types it fires on: float16 hand_landmark_lite ran 1.065 (1.046-1.089) of the pairs' kernel
#: time (14 rounds), wall 1.017: the two kernels move float16 as words of 4 values, the fused
#: kernel unpacks its workgroup image's words at every window load.
PWDW_TYPES = ("float32",)
#: Invocations per workgroup (one SIMD row of lavapipe's: a barrier switches no coroutines).
PWDW_WORKGROUP = 8
#: Fuse where the pointwise output is read elsewhere too (the kernel then stores it as well).
#: Off: face_detection_full_range_sparse's kept pairs (12x12x48 -> 192, 6x6x96 -> 384: the
#: intermediate is also the next block's residual) ran 1.09-1.41 of the two kernels (docs/conv.md).
PWDW_KEEP = False
#: Pixels per lane in the pointwise part: the one padding the image least (every lane runs every
#: iteration), the larger on ties.
PWDW_TP = (4, 5, 6, 7)
#: Most channel vec4s per workgroup (more: fewer workgroups, no faster; measured 6-16 against 8).
PWDW_MAX_CB4 = 8
#: Output columns per depthwise item: the whole row up to this many columns ...
PWDW_TW_WHOLE = 8
#: ... else the largest divisor of the width up to this many.
PWDW_TW = 7
#: Attributes a conv of the pair may have (its own and its epilogue: no input prologue, no
#: second output, no stored-as-depth_to_space).
_ATTRS = {"padding", "strides", "dilations", "groups", "input_layout", "filter_layout", "epilogue"}


@dataclasses.dataclass(frozen=True)
class PwDepthwiseAttrs(FusedAttrs):
    """Attributes of a ``pw_depthwise`` node; its inputs are the pointwise conv's (input, filter,
    epilogue operands), then the depthwise conv's but its input (each value once); its outputs the
    depthwise output, then the pointwise one where ``keep``."""

    #: the pointwise conv2d (epilogue fused)
    pw: Node
    #: the depthwise conv2d reading ``pw``'s output
    dw: Node
    #: ``pw``'s output is read elsewhere too (or is a graph output): stored as well
    keep: bool = False


def _plain_conv(node) -> bool:
    """An NHWC conv2d with a constant filter, one output, float, no attribute but its own."""
    return (node.op == "conv2d" and len(node.outputs) == 1 and all(k in _ATTRS for k in node.attrs)
            and node.attrs.get("input_layout") == "nhwc" and node.outputs[0].data_type in FLOATS
            and node.inputs[0].data_type == node.outputs[0].data_type and constant_array(node.inputs[1]) is not None)


def pw_depthwise_ok(pw, dw) -> bool:
    """Whether ``dw(pw(x))`` can run as one ``conv/pw_depthwise.wgsl`` kernel, consumers and cost
    aside (:func:`fuse_pw_depthwise` checks them): ``pw`` a pointwise conv2d and ``dw`` a depthwise
    one (multiplier 1) reading ``pw``'s output as its input and nowhere else, both plain
    (:func:`_plain_conv`: NHWC, constant filters), input and output channels multiples of 4, an
    image of at most :data:`PWDW_MAX_PIXELS` pixels, a pointwise conv of at most
    :data:`PWDW_MAX_K` input channels and :data:`PWDW_MAX_WEIGHTS` weights, a data type of
    :data:`PWDW_TYPES` (where the one launch measured faster; ``WEBNN_GPU_FORCE_PWDW=on``: any
    float); ``dw``'s epilogue not reading its own
    input (the kernel does not hold it at the output pixel), ``pw``'s epilogue reading no operand
    through a pool, an upsampling or padding (the pointwise part unrolls its epilogue per pixel and
    channel block: a pooled residual there measured 7-40x the two kernels' first build and a slower
    run)."""
    if not (_plain_conv(pw) and _plain_conv(dw)) or dw.inputs[0] is not pw.outputs[0]:
        return False
    h = pw.outputs[0]
    if any(v is h for v in dw.inputs[1:]) or dw.outputs[0].data_type != h.data_type:
        return False
    g1, g2 = _geometry(pw), _geometry(dw)
    if _conv_variant(g1, "nhwc") != "pointwise" or _conv_variant(g2, "nhwc") != "depthwise":
        return False
    if g2["O"] != g2["C"] or g2["C"] % 4 or g1["C"] % 4 or g1["H"] * g1["W"] > PWDW_MAX_PIXELS:
        return False
    if _env.force("pwdw") != "on" and (g1["C"] > PWDW_MAX_K or g1["C"] * g1["O"] > PWDW_MAX_WEIGHTS
                                       or h.data_type not in PWDW_TYPES):
        return False
    if any("pool" in st or "up2" in st or "pad" in st for st in _epilogue.steps_of(pw)):
        return False
    return not any(st.get("input") == 0 for st in _epilogue.steps_of(dw))


def _divisor(n: int, most: int) -> int:
    """The largest divisor of ``n`` up to ``most``."""
    return max(d for d in range(1, min(n, most) + 1) if n % d == 0)


def pwdw_plan(g1: dict, g2: dict, wg_bytes: int) -> tuple[int, int, int] | None:
    """(CB4, TP, TW) of ``conv/pw_depthwise.wgsl`` for pointwise ``g1`` and depthwise ``g2``:
    channel vec4s per workgroup (the largest divisor of the channel vec4s up to
    :data:`PWDW_MAX_CB4` whose image of float32 vec4s fits ``wg_bytes``), pixels per lane in the
    pointwise part (:data:`PWDW_TP`), output columns per depthwise item (the whole row up to
    :data:`PWDW_TW_WHOLE` columns, else its largest divisor up to :data:`PWDW_TW`); None where it
    does not fit or an invocation's loops would pass llvmpipe's limit (:data:`LOOP_BUDGET`)."""
    hw, n4 = g1["H"] * g1["W"], g1["O"] // 4
    fits = [d for d in range(1, min(n4, PWDW_MAX_CB4) + 1) if n4 % d == 0 and hw * d * 16 <= wg_bytes]
    if not fits:
        return None
    cb4 = max(fits)
    tp = min(PWDW_TP, key=lambda t: (-(-hw // (t * PWDW_WORKGROUP)) * t, -t))
    tw = g2["OW"] if g2["OW"] <= PWDW_TW_WHOLE else _divisor(g2["OW"], PWDW_TW)
    items = -(-cb4 * (g2["OW"] // tw) // PWDW_WORKGROUP)
    loops = -(-hw // (tp * PWDW_WORKGROUP)) * (g1["C"] // 4 + 2) + items * (g2["OH"] + g2["KH"] * g2["dh"] + 1) + 8
    return (cb4, tp, tw) if loops <= LOOP_BUDGET else None


def fuse_pw_depthwise(nodes: list, outputs: dict, context=None) -> list:
    """``dw(pw(x))``, a pointwise conv2d and the depthwise conv2d reading its output (the pattern
    of :mod:`webnn_gpu.fusions.pw_depthwise`), becomes one ``pw_depthwise`` node where
    :func:`pw_depthwise_ok` holds and the kernel's plan fits (:func:`pwdw_plan`).

    Where ``pw``'s output has other readers or is a graph output, the node also stores it as a
    second output and takes ``pw``'s place (``dw``'s other operands must be ready there);
    otherwise it takes ``dw``'s place; only with ``WEBNN_GPU_FORCE_PWDW=on`` (:data:`PWDW_KEEP`).
    ``WEBNN_GPU_FORCE_PWDW=off`` fuses none, ``=on`` every pair that fits. Only on a device whose
    subgroups have :data:`PWDW_WORKGROUP` lanes on the ``"lane-loop"`` tuning profile (lavapipe
    before Mesa 24, where it was measured): the kernel shares the weights between a workgroup's
    lanes."""
    force = _env.force_choice("pwdw", ("off", "on"))
    if (force == "off" or context is None or getattr(context, "_subgroup", 0) != PWDW_WORKGROUP
            or getattr(context, "_tuning", "default") != "lane-loop"):
        return nodes
    wg_bytes = workgroup_bytes(context.limits)
    limit = _max_bindings(context)
    g = GraphView(nodes, outputs)
    at = {n.id: i for i, n in enumerate(nodes)}
    replaced: dict[int, Node] = {}
    dropped: set[int] = set()
    for dw in nodes:
        if dw.op != "conv2d" or not dw.inputs or dw.id in replaced or dw.id in dropped:
            continue
        h = dw.inputs[0]
        pw = g.producer(h)
        if pw is None or pw.id in replaced or pw.id in dropped or not pw_depthwise_ok(pw, dw):
            continue
        readers = g.consumers(h)
        keep = len(readers) != 1 or g.is_output(h)
        if keep and not PWDW_KEEP and force != "on":
            continue
        if keep and not ready_before(g, at, dw.inputs[1:], pw):
            continue
        if pwdw_plan(_geometry(pw), _geometry(dw), wg_bytes) is None:
            continue
        ep_ops = len(_conv_epilogue(pw, h, "nhwc", first_binding="a").operands) + len(
            _conv_epilogue(dw, dw.outputs[0], "nhwc", first_binding="b").operands)
        if 3 + ep_ops + 1 + keep > limit:  # x, w1, f, operands, out (, keep)
            continue
        fused = place_pair(replaced, dropped, "pw_depthwise", pw, dw, PwDepthwiseAttrs(pw, dw, keep), keep)
        if DEBUG >= 2:
            log.debug("fuse_pw_depthwise: [%s]%s", fused.label, " keep" if keep else "")
    return g.replace(replaced, dropped)


@lowering("pw_depthwise")
def lower_pw_depthwise(node, lc) -> None:
    """pw_depthwise (:func:`fuse_pw_depthwise`): ``conv/pw_depthwise.wgsl``, one launch for a
    pointwise conv2d and the depthwise conv2d after it (:func:`pwdw_plan`). ``node.outputs`` is
    the depthwise output, then the pointwise one where ``attrs.keep``."""
    a: PwDepthwiseAttrs = node.attrs
    pw, dw = a.pw, a.dw
    x, out, h = pw.inputs[0], node.outputs[0], pw.outputs[0]
    g1, g2 = _geometry(pw), _geometry(dw)
    wg_bytes = workgroup_bytes(lc.limits)
    plan = pwdw_plan(g1, g2, wg_bytes)
    assert plan is not None, "fuse_pw_depthwise checks the plan"
    cb4, tp, tw = plan
    hw = g1["H"] * g1["W"]
    per = tp * PWDW_WORKGROUP
    ep1 = _conv_epilogue(pw, h, "nhwc", first_binding="a", name="ep1")
    ep2 = _conv_epilogue(dw, out, "nhwc", first_binding="b", name="ep2")
    w1 = make_constant(np.ascontiguousarray(_pointwise_matrix(pw).T), out.data_type)  # [K, N]
    f = _relayout(lc, dw.inputs[1], dw.attrs["filter_layout"], "hwio")  # [KH, KW, N]
    w1u, fu = uniform_copy(lc, w1), uniform_copy(lc, f)
    n4 = g1["O"] // 4
    taps = _dw_taps(g2)
    inputs = [("x", x), ("w1", w1u or w1)] + ep1.operands + [("f", fu or f)] + ep2.operands
    outputs = [("out", out)] + ([("keep", node.outputs[1])] if a.keep else [])
    step = lc.kernel("conv/pw_depthwise.wgsl", inputs, outputs, PWDW_WORKGROUP * (n4 // cb4) * g1["NB"],
                     workgroup=PWDW_WORKGROUP, groups=(n4 // cb4, g1["NB"], 1), T=wgsl_type(out.data_type),
                     K4=g1["C"] // 4, N4=n4, CB4=cb4, TP=tp, TW=tw, HW=hw, ITERS=-(-hw // per), ptail=hw % per != 0,
                     x64=tile_words(lc, out.data_type), H=g1["H"], wloop=PWDW_WORKGROUP % cb4 != 0,
                     W=g1["W"], OH=g2["OH"], OW=g2["OW"], WG=PWDW_WORKGROUP, seg=_segment(g2, tw),
                     w1_uniform=B_UNIFORM_FLOATS // 4 if w1u is not None else 0,
                     f_uniform=B_UNIFORM_FLOATS // 4 if fu is not None else 0,
                     A=max(t[2] for t in taps) + 1, taps=taps, jrows=sorted({t[1] for t in taps}),
                     ep1=ep1, ep2=ep2, fns=_epilogue.merged_functions(ep1, ep2), keep=a.keep,
                     **{k: g2[k] for k in ("KH", "KW", "sh", "sw", "dh", "dw", "pt", "pl")})
    step.flops = 2 * g1["NB"] * (hw * g1["C"] * g1["O"] + g2["OH"] * g2["OW"] * g2["O"] * g2["KH"] * g2["KW"])
    step.note = (f"{g1['H']}x{g1['W']}x{g1['C']}->{g1['O']} dw{g2['KH']}x{g2['KW']}/{g2['sh']} "
                 f"cb{4 * cb4} tp{tp} tw{tw}" + (" keep" if a.keep else ""))
