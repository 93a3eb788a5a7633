"""Rules on small products whose rows a normalization (layer normalization, softmax) reads: one
kernel for both.

A transformer block normalizes the rows of its projections (``LayerNormalization(x +
Dense(y))``): a matmul with a bias and a residual add as its epilogue, then a layer
normalization over the last axis; a classifier ends with a dense layer and a softmax. At a
short sequence (or one sample) both are a few microseconds of work and a launch each (about
45 us of wall time on lavapipe).
"""

from __future__ import annotations

import logging
import math

from ..._dtypes import FLOAT_TYPES as FLOATS  # the fused kernel's (float16 widened, float32 arithmetic)
from ..._env import DEBUG
from ..._ir import GraphView, Node
from ._common import place_fused, ready_before

log = logging.getLogger("webnn_gpu")

#: Longest row (N) the fused kernel keeps in registers (N / 4 vec4 accumulators) ...
NORM_MAX_N = 64
#: ... and most multiply-adds of the product: one invocation computes a whole row, so a large
#: product would run on few invocations (the tile kernel's subgroup variant spreads it over
#: tiles and shares B's loads between rows). Timestamps on lavapipe (a loaded machine):
#: 24 x 64 -> 32 fused about 75 us against 130 us for the two kernels; 32 x 64 -> 64 149 against
#: 109-160; 65 x 48 -> 48 190-218 against 160 ...
NORM_MAX_MACS = 1 << 16
#: ... and per row (K x N: a single row's product is one invocation's work).
NORM_MAX_ROW_MACS = 1 << 13


def _norm_ok(ln: Node) -> bool:
    """A float32 or float16 layer normalization over the last axis alone, its scale and bias (if
    any) along it and of its data type, an epilogue that does not read the normalized input
    itself."""
    x = ln.inputs[0]
    r = len(x.shape)
    if ln.op != "layer_normalization" or len(ln.outputs) != 1 or x.data_type not in FLOATS or r < 2:
        return False
    if any(v is not None and v.data_type != x.data_type for v in ln.inputs[1:3]):
        return False
    if list(ln.attrs.get("axes", ())) != [r - 1] or list(ln.attrs.get("param_axes", ())) != [r - 1]:
        return False
    if any(v is not None and tuple(v.shape) != (x.shape[-1],) for v in ln.inputs[1:3]):
        return False
    return not any(st.get("input") == 0 for st in ln.attrs.get("epilogue") or [])


def _product_ok(mm: Node) -> bool:
    """A float32 or float16 matmul of a row-major A by a constant 2-D B (no operand views, no
    transposed A), or such a gemm (any alpha, beta, c; B maybe transposed), with short rows and
    few multiply-adds (:data:`NORM_MAX_N`, :data:`NORM_MAX_MACS`), A, B and the product of one
    data type."""
    dt = mm.outputs[0].data_type if len(mm.outputs) == 1 else None
    if mm.op not in ("matmul", "gemm") or dt not in FLOATS or any(v.data_type != dt for v in mm.inputs[:2]):
        return False
    if any(mm.attrs.get(k) for k in ("a_transpose", "a_view", "b_view", "out_view")):
        return False
    a, b, out = mm.inputs[0], mm.inputs[1], mm.outputs[0]
    if b.kind != "constant" or b.data is None or len(b.shape) != 2 or tuple(a.shape[:-1]) != tuple(out.shape[:-1]):
        return False
    K, N = b.shape[::-1] if mm.op == "gemm" and mm.attrs.get("b_transpose") else b.shape
    return N <= NORM_MAX_N and math.prod(out.shape) * K <= NORM_MAX_MACS and K * N <= NORM_MAX_ROW_MACS


def _softmax_ok(sm: Node) -> bool:
    """A float32 or float16 softmax over the last axis whose epilogue does not read its own
    input."""
    x = sm.inputs[0]
    return (sm.op == "softmax" and len(sm.outputs) == 1 and x.data_type in FLOATS and len(x.shape) >= 1
            and sm.attrs.get("axis") == len(x.shape) - 1
            and not any(st.get("input") == 0 for st in sm.attrs.get("epilogue") or []))


def _fuse_rows(nodes: list, outputs: dict, op: str, fused_op: str, ok) -> list:
    """The product feeding each ``op`` node that ``ok`` accepts, fused with it into one
    ``fused_op`` node (see :func:`fuse_matmul_layer_norm`)."""
    g = GraphView(nodes, outputs)
    at = {n.id: i for i, n in enumerate(nodes)}
    replaced: dict[int, Node] = {}
    dropped: set[int] = set()
    for ln in nodes:
        if ln.op != op or not ok(ln):
            continue
        x = ln.inputs[0]
        mm = g.producer(x)
        if mm is None or mm.id in dropped or mm.id in replaced or not _product_ok(mm):
            continue
        if any(v is x for v in ln.inputs[1:]):
            continue  # the row op's tail reads the product: the node would read what it writes
        keep = g.sole_consumer(x) is not ln
        if keep and not ready_before(g, at, ln.inputs[1:], mm):
            continue
        inputs = list(mm.inputs) + list(ln.inputs[1:])
        attrs = {"split": len(mm.inputs), "product_op": mm.op, "product": dict(mm.attrs), "norm": dict(ln.attrs)}
        fused = Node(fused_op, inputs, list(ln.outputs) + ([x] if keep else []), attrs, f"{mm.label}+{ln.label}")
        place_fused(replaced, dropped, mm, ln, fused, keep)
        if DEBUG >= 2:
            log.debug("%s: [%s] + [%s]", fused_op, mm.label, ln.label)
    return g.replace(replaced, dropped)


def fuse_matmul_layer_norm(nodes: list, outputs: dict, context=None) -> list:
    """``layer_normalization(matmul(a, B), axes=[last])`` (or of a gemm) becomes one
    ``matmul_layer_norm`` node (``matmul/layer_norm.wgsl``): one invocation per row computes the
    row, the product's epilogue, the statistics and the normalized outputs with the
    normalization's epilogue.

    The node's inputs are the product's, then the normalization's scale, bias and epilogue
    operands (``attrs["split"]``: how many are the product's); ``attrs["product_op"]`` is
    ``"matmul"`` or ``"gemm"``, ``attrs["product"]`` and ``attrs["norm"]`` are the two nodes'
    attributes (their epilogue steps index their own inputs: the normalization's input 0 is the
    product).

    Fires where the product is float32 or float16 with a constant 2-D B and at most
    :data:`NORM_MAX_N` columns, :data:`NORM_MAX_MACS` multiply-adds and
    :data:`NORM_MAX_ROW_MACS` per row, and the normalization runs over the last axis (scale and
    bias along it). Where the product has other readers or is a graph output (a pre-norm
    block's residual stream), the node also stores it as a second output and takes the matmul's
    place (the normalization's other operands must be ready there). float16: the kernel loads
    float16 values, computes in float32 and rounds each output once, at its store (the product
    is not rounded to float16 before the statistics, as the two kernels round it).
    """
    return _fuse_rows(nodes, outputs, "layer_normalization", "matmul_layer_norm", _norm_ok)


def fuse_matmul_softmax(nodes: list, outputs: dict, context=None) -> list:
    """``softmax(matmul(a, B), axis=last)`` (or of a gemm: a classifier's last dense layer)
    becomes one ``matmul_softmax`` node, computed as :func:`fuse_matmul_layer_norm`'s node with
    the row's softmax (``exp(x - max) / sum``) in place of its normalization; same conditions
    (float32 or float16, constant B, :data:`NORM_MAX_N`, :data:`NORM_MAX_MACS`, the product stored too
    where something else reads it)."""
    return _fuse_rows(nodes, outputs, "softmax", "matmul_softmax", _softmax_ok)
