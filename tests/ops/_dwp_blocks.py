"""The depthwise + projection block the fused-kernel tests build, and its float64 reference.

Shared by ``test_depthwise_project_{tail,padded,lanes_strided,lanes_split}.py``: each sweeps the
block over the shapes, residuals and activations its kernel form takes.
"""

from __future__ import annotations

import numpy as np

from references import ref_conv2d


def same_pads(k: int, s: int, hw) -> list[int]:
    """TFLite's SAME padding of a k x k window at stride s (stride 2: bottom and right only, but
    on a one-pixel image all sides)."""
    return [k // 2 - 1, k // 2] * 2 if s == 2 and min(hw) > 1 else [k // 2] * 4


def dw_project_block(rng, hw, C, N, *, k=3, s=1, pads=None, nb=1, act="relu", out_act="relu", residual=None,
                     before=0, npdt=np.float32, filter_layout="ohwi"):
    """A depthwise k x k conv2d at stride ``s`` (bias, ``pads``: :func:`same_pads` when None),
    ``act`` on it (``"relu"``, ``"clamp"``: to [-1, 1.5], ``"prelu"``: a slope per channel), its
    pointwise projection to N channels (bias), the residual added, then ``out_act`` (``"relu"``
    or ``"prelu"``: a slope per output channel): (build, inputs, float64 reference).

    ``residual``: None; ``"x"`` the block's input, ``"max"`` / ``"average"`` its 2 x 2 stride-2
    pool, ``"rc"`` another input of the output's size and C channels, each padded to N channels
    with ``before`` zero channels ahead of it and the rest after (no pad where N == C);
    ``"r"`` another input of the output's size and N channels, ``"per-channel"`` one of
    [1, 1, 1, N], ``"per-pixel"`` one of [nb, OH, OW, 1]. ``filter_layout``: ``"ohwi"`` or
    ``"ihwo"``, the depthwise filter's layout in the graph.
    """
    h, w = hw
    pads = same_pads(k, s, hw) if pads is None else list(pads)
    oh, ow = (h + pads[0] + pads[1] - k) // s + 1, (w + pads[2] + pads[3] - k) // s + 1
    x = rng.standard_normal((nb, h, w, C)).astype(npdt)
    wd = (rng.standard_normal((C, k, k, 1)) * 0.3).astype(npdt)  # ohwi, one group per channel
    bd = rng.standard_normal(C).astype(npdt)
    slope = rng.uniform(0.05, 0.5, C).astype(npdt)
    wp = (rng.standard_normal((N, 1, 1, C)) * 0.3).astype(npdt)
    bp = rng.standard_normal(N).astype(npdt)
    slope2 = rng.uniform(0.05, 0.5, N).astype(npdt)
    shapes = {"rc": (nb, oh, ow, C), "r": (nb, oh, ow, N), "per-channel": (1, 1, 1, N), "per-pixel": (nb, oh, ow, 1)}
    inputs = {"x": x}
    if residual in shapes:
        inputs["r"] = rng.standard_normal(shapes[residual]).astype(npdt)
    after = N - C - before
    wd_graph = wd.transpose(3, 1, 2, 0) if filter_layout == "ihwo" else wd

    def build(b, o):
        d = b.conv2d(o["x"], b.constant(wd_graph), input_layout="nhwc", filter_layout=filter_layout, groups=C,
                     padding=pads, strides=[s, s], bias=b.constant(bd))
        d = {"relu": b.relu, "clamp": lambda v: b.clamp(v, min_value=-1.0, max_value=1.5),
             "prelu": lambda v: b.prelu(v, b.constant(slope.reshape(1, 1, 1, C)))}[act](d)
        p = b.conv2d(d, b.constant(wp), input_layout="nhwc", filter_layout="ohwi", bias=b.constant(bp))
        if residual in ("x", "max", "average", "rc"):
            r = {"x": lambda: o["x"], "rc": lambda: o["r"],
                 "max": lambda: b.max_pool2d(o["x"], window_dimensions=[2, 2], strides=[2, 2], layout="nhwc"),
                 "average": lambda: b.average_pool2d(o["x"], window_dimensions=[2, 2], strides=[2, 2],
                                                     layout="nhwc")}[residual]()
            p = b.add(p, b.pad(r, [0, 0, 0, before], [0, 0, 0, after]) if N > C else r)
        elif residual is not None:
            p = b.add(p, o["r"])
        return {"y": b.relu(p) if out_act == "relu" else b.prelu(p, b.constant(slope2.reshape(1, 1, 1, N)))}

    x64 = x.astype(np.float64)
    d = ref_conv2d(x64.transpose(0, 3, 1, 2), wd.astype(np.float64).transpose(0, 3, 1, 2), pads, (s, s), (1, 1),
                   groups=C).transpose(0, 2, 3, 1) + bd
    d = {"relu": lambda: np.maximum(d, 0), "clamp": lambda: np.clip(d, -1.0, 1.5),
         "prelu": lambda: np.where(d >= 0, d, d * slope.astype(np.float64))}[act]()
    ref = np.einsum("nhwc,oc->nhwo", d, wp[:, 0, 0, :].astype(np.float64)) + bp
    if residual in ("x", "max", "average", "rc"):
        if residual in ("max", "average"):
            win = x64[:, :2 * oh, :2 * ow].reshape(nb, oh, 2, ow, 2, C)
            r64 = win.max(axis=(2, 4)) if residual == "max" else win.mean(axis=(2, 4))
        else:
            r64 = x64 if residual == "x" else inputs["r"].astype(np.float64)
        ref[..., before:before + C] += r64
    elif residual is not None:
        ref = ref + inputs["r"].astype(np.float64)
    out = np.maximum(ref, 0) if out_act == "relu" else np.where(ref >= 0, ref, ref * slope2.astype(np.float64))
    return build, inputs, out
