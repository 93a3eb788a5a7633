"""Squeeze-and-excite's excitation as one fused operator, ``squeeze_excite``.

Pattern: two 1x1 conv2d on one NHWC pixel, ``fc2(fc1(pool))`` (or one on a pool of partial
sums), where ``pool`` is a global average pool, a depthwise conv's pooled second output or a
pool of partial sums. Operator: ``squeeze_excite`` (:class:`SqueezeExciteAttrs`), legality
:func:`squeeze_excite_ok`, rule :func:`fuse_squeeze_excite`, lowering
:func:`lower_squeeze_excite` onto ``shaders/matmul/squeeze_excite.wgsl`` (one workgroup: the
channel means, both layers and their epilogues).
"""

from __future__ import annotations

import dataclasses
import logging

import numpy as np

from .._env import DEBUG
from .._ir import GraphView, Node, Value
from ..compiler.rules._common import _max_bindings, distinct
from ..ops._registry import lowering
from ..ops.conv import _conv_epilogue, _conv_variant, _geometry, _pointwise_matrix
from ..ops.linalg import (B_UNIFORM_FLOATS, FLOATS, LOOP_BUDGET, constant_array, make_constant, uniform_copy,
                          wgsl_type)
from ._attrs import FusedAttrs

log = logging.getLogger("webnn_gpu")


@dataclasses.dataclass(frozen=True)
class SqueezeExciteAttrs(FusedAttrs):
    """Attributes of a ``squeeze_excite`` node; its inputs are ``[src, (src2), fc1's filter and
    epilogue operands..., fc2's ...]`` (each value once)."""

    #: the first 1x1 conv2d node (as the builder made it, epilogue fused)
    fc1: Node
    #: the second 1x1 conv2d node, or None for one layer on a pool of partial sums
    fc2: Node | None
    #: rows of partial sums in ``inputs[0]`` (1: the pooled pixel itself)
    rows: int
    #: pixels each channel sum divides by
    count: int
    #: rows of the skip operand's partial sums in ``inputs[1]`` (0: none)
    rows2: int = 0
    #: factor of the skip operand's sums (4 for a 2x upsampled operand read small)
    scale2: float = 1.0


#: largest channel / hidden widths (workgroup memory holds both).
SE_MAX_CHANNELS = 1024
SE_WORKGROUP = 64
#: most multiply-adds of both layers: the kernel runs them in one workgroup, on one core.
#: (Lavapipe, 2026-11-25, MobileNetV3-Small's Keras conversion: its classifier head, pool ->
#: 576 -> 1024 -> 10, took 3.0 ms as one kernel against 0.8 ms as a pool and two conv
#: kernels; an excitation 576 -> 144 -> 576, 166K multiply-adds, 0.75 ms against 0.48 ms; one
#: of 41K, 0.23 ms, about what three kernels take.)
SE_MAX_MACS = 1 << 16



def se_loop_iterations(C: int, R: int, C2: int, rows: int, rows2: int = 0) -> int:
    """An upper bound of the loop iterations of one ``matmul/squeeze_excite.wgsl`` invocation
    as llvmpipe counts them (a loop of n iterations n + 1): the channel sums over ``rows`` (and
    ``rows2``) rows of partials, their P-way adds, the ``C -> R`` layer and the ``R -> C2`` one
    (``C2`` 0: none), each over the invocation's share of :data:`SE_WORKGROUP`, with a few of
    margin."""
    wg = SE_WORKGROUP
    P = max(1, wg // C)
    share = -(-C * P // wg)
    sums = share * (-(-rows // P) + 1 + (-(-rows2 // P) + 1 if rows2 else 0)) + 1
    means = -(-C // wg) * (P + 1) + 1
    layer1 = -(-R // wg) * (C + 1) + 1
    layer2 = -(-C2 // wg) * (R + 1) + 1 if C2 else 0
    return sums + means + layer1 + layer2 + 16


def squeeze_excite_ok(fc1, fc2) -> bool:
    """Whether ``fc2(fc1(v))``, two conv2d on one NHWC pixel (1x1, constant filters), can run
    as one ``matmul/squeeze_excite.wgsl`` kernel (:func:`fuse_squeeze_excite`): at most
    :data:`SE_MAX_CHANNELS` channels and :data:`SE_MAX_MACS` multiply-adds."""
    for fc in (fc1, fc2) if fc2 is not None else (fc1,):
        if fc.op != "conv2d" or len(fc.outputs) != 1 or fc.attrs.get("input_layout") != "nhwc":
            return False
        if "input_scale" in fc.attrs or "input_add" in fc.attrs or constant_array(fc.inputs[1]) is None:
            return False
        if fc.outputs[0].data_type not in FLOATS or fc.inputs[0].data_type != fc.outputs[0].data_type:
            return False
        g = _geometry(fc)
        if g["NB"] != 1 or g["H"] != 1 or g["W"] != 1 or _conv_variant(g, "nhwc") != "pointwise":
            return False
        if max(g["C"], g["O"]) > SE_MAX_CHANNELS:
            return False
    macs = sum(_geometry(fc)["C"] * _geometry(fc)["O"] for fc in ((fc1, fc2) if fc2 is not None else (fc1,)))
    if macs > SE_MAX_MACS:
        return False
    mid = fc1.outputs[0]
    return fc2 is None or (fc2.inputs[0] is mid and not any(v is mid for v in fc2.inputs[1:])
            and fc2.outputs[0].data_type == mid.data_type)


@lowering("squeeze_excite")
def lower_squeeze_excite(node, lc) -> None:
    """Channel means of ``inputs[0]`` ([rows, C] partial sums or the pooled [1, 1, 1, C]; plus
    ``attrs["scale2"]`` times ``inputs[1]``'s sums when ``attrs["rows2"]``), then
    ``attrs["fc1"]`` and ``attrs["fc2"]`` (the original 1x1 conv2d nodes; fc2 may be None),
    in one workgroup."""
    a: SqueezeExciteAttrs = node.attrs
    fc1, fc2 = a.fc1, a.fc2
    src, out = node.inputs[0], node.outputs[0]
    fcs = (fc1, fc2) if fc2 is not None else (fc1,)
    ep1 = _conv_epilogue(fc1, fc1.outputs[0], "nhwc", first_binding="a", name="fc1")
    ep2 = _conv_epilogue(fc2, out, "nhwc", first_binding="b", name="fc2") if fc2 is not None else None
    mats = []
    for fc in fcs:
        m = make_constant(_pointwise_matrix(fc), fc.inputs[1].data_type)
        mats.append((uniform_copy(lc, m), m))
    fns: dict = {}
    for e in (ep1, ep2) if ep2 is not None else (ep1,):
        for FT, names in e.functions:
            fns.setdefault(FT, set()).update(names)
    (u1, m1), (u2, m2) = mats[0], mats[-1]
    C, R, C2 = m1.shape[1], m1.shape[0], m2.shape[0]
    rows2 = a.rows2
    count, scale2 = np.array([float(a.count), a.scale2], np.float32).view(np.uint32)
    prm = make_constant(np.array([a.rows, C, R, C2, count, rows2, scale2], dtype=np.uint32), "uint32")
    srcs = [("src", src)] + ([("src2", node.inputs[1])] if rows2 else [])
    layer2 = [("w2", u2 or m2)] + ep2.operands if ep2 is not None else []
    lc.kernel("matmul/squeeze_excite.wgsl", srcs + [("w1", u1 or m1)] + ep1.operands + layer2 + [("prm", prm)],
              [("out", out)], SE_WORKGROUP, groups=(1, 1, 1),
              workgroup=SE_WORKGROUP, T=wgsl_type(out.data_type), src_f32=src.data_type == "float32", two=rows2 > 0,
              CMAX=SE_MAX_CHANNELS, RMAX=SE_MAX_CHANNELS, ep1=ep1, ep2=ep2, one=ep2 is None,
              w1_uniform=B_UNIFORM_FLOATS // 4 if u1 is not None else 0,
              w2_uniform=B_UNIFORM_FLOATS // 4 if u2 is not None else 0,
              fns=sorted((FT, sorted(names)) for FT, names in fns.items()))


def fuse_squeeze_excite(nodes: list, outputs: dict, context=None) -> list:
    """The excitation of squeeze-and-excite, two 1x1 conv2d on the pooled pixel (``fc2(fc1(
    pool))``), becomes one ``squeeze_excite`` node whose kernel runs both in one workgroup
    (``attrs["fc1"]`` / ``["fc2"]``: the original nodes). When the pool is a depthwise conv's
    second output (``fuse_conv_pool``) read by nothing else, the conv writes its per-block
    partial sums as that output (``attrs["pool_output"] = "partials"``) and the node takes
    the means too: three single-workgroup kernels, each mostly launch cost, become one. So
    does a pool of partial sums (``fuse_pool_partials``) read by nothing else, with the
    partials of its skip operand (``attrs["rows2"]`` rows, summed times ``["scale2"]``); on
    such a pool a single 1x1 conv (a channel attention without the hidden layer) runs there
    too (``attrs["fc2"]`` None).
    """
    from ..ops.conv import pool_rows

    tuning = getattr(context, "_tuning", "default")
    max_bindings = _max_bindings(context)
    g = GraphView(nodes, outputs)
    replaced: dict[int, Node] = {}
    dropped: set[int] = set()

    def pair_head(fc) -> bool:
        """Whether ``fc`` is the first layer of a two-layer excitation (found as its second)."""
        users = g.consumers(fc.outputs[0])
        return (len(fc.outputs) == 1 and not g.is_output(fc.outputs[0]) and len(users) == 1
                and squeeze_excite_ok(fc, users[0]))

    for fc2 in nodes:
        if fc2.op != "conv2d" or not fc2.inputs or fc2.inputs[0] is None or fc2.id in dropped:
            continue
        mid = fc2.inputs[0]
        fc1 = g.producer(mid)
        if fc1 is not None and fc1.op == "average_pool2d" and "input_partials" in fc1.attrs:
            # one layer on a pool of partial sums (a channel attention's sigmoid): fc2 is None
            if not squeeze_excite_ok(fc2, None) or pair_head(fc2):
                continue
            fc1, fc2 = fc2, None
        elif (fc1 is None or fc1.id in dropped or fc1.id in replaced or g.is_output(mid)
              or len(g.consumers(mid)) != 1):
            continue  # (a conv already fused as the second layer of another excitation stays there)
        elif not squeeze_excite_ok(fc1, fc2):
            continue
        last = fc2 if fc2 is not None else fc1
        src, rows, count, new_conv = fc1.inputs[0], 1, 1, None
        two: dict = {"rows2": 0, "scale2": 1.0}
        pool = None
        conv = g.producer(src)
        dw = conv.attrs["depthwise"] if conv is not None and conv.op == "depthwise_project" else conv
        only = not g.is_output(src) and len(g.consumers(src)) == 1
        if (only and conv is not None and conv.op == "average_pool2d" and "input_partials" in conv.attrs
                and ("input_add" not in conv.attrs or conv.attrs.get("input_add_partials"))):
            # a pool of partial sums (fuse_pool_partials): its means are taken here
            pool = conv
            src, rows, count = pool.inputs[0], pool.inputs[0].shape[0], pool.attrs["input_partials"]
            if "input_add" in pool.attrs:
                src2 = pool.inputs[pool.attrs["input_add"]]
                two = {"src2": src2, "rows2": src2.shape[0], "scale2": float(pool.attrs.get("input_add_scale", 1))}
            conv = None
        elif (conv is not None and dw is not None and dw.op == "conv2d" and dw.attrs.get("pool_output") is True
                and len(conv.outputs) == 2 and src is conv.outputs[1] and only and conv.id not in replaced):
            g_out = conv.outputs[0]
            rows = pool_rows(conv, tuning, getattr(context, "_subgroup", 0))
            count = g_out.shape[1] * g_out.shape[2]
            src = Value("float32", (rows, src.shape[3]), "op")
            attrs = dict(dw.attrs)
            attrs["pool_output"] = "partials"
            new_dw = Node(dw.op, list(dw.inputs), [dw.outputs[0], src], attrs, dw.label)
            if conv is dw:
                new_conv = new_dw
            else:  # the depthwise conv inside a depthwise_project node (its expansion fused)
                new_conv = Node(conv.op, list(conv.inputs), list(new_dw.outputs), {**conv.attrs, "depthwise": new_dw},
                                conv.label)
        if fc2 is None and pool is None:
            continue  # a lone 1x1 conv on a pooled vector gains nothing here
        inputs = distinct([src, two.get("src2"), *fc1.inputs[1:], *(fc2.inputs[1:] if fc2 is not None else [])])
        if len(inputs) + 1 > max_bindings:
            continue
        C2 = fc2.outputs[0].shape[-1] if fc2 is not None else 0
        if se_loop_iterations(src.shape[-1], fc1.outputs[0].shape[-1], C2, rows, two["rows2"]) > LOOP_BUDGET:
            continue  # llvmpipe would end the kernel's loops early (many rows of partials)
        if conv is not None and new_conv is not None:
            replaced[conv.id] = new_conv
        if pool is not None:
            dropped.add(pool.id)
        fused = Node("squeeze_excite", inputs, list(last.outputs),
                     SqueezeExciteAttrs(fc1, fc2, rows, count, two["rows2"], two["scale2"]), fc1.label or last.label)
        replaced[last.id] = fused
        if fc2 is not None:
            dropped.add(fc1.id)
        if DEBUG >= 2:
            log.debug("fuse_squeeze_excite: [%s] + [%s] (%d rows of partials)", fc1.label, last.label, rows)
    return g.replace(replaced, dropped)
