"""Rules on small matrix products: transposes a matmul reads or writes in place.

An attention block at a short sequence (a Keras ``MultiHeadAttention``, a ViT's) is a handful of
matmuls of a few thousand multiply-adds each, and the transposes between them that split and
merge the heads: each a kernel launch of its own (about 45 us of wall time on lavapipe, more
than the product next to it). Here the product reads its operand, or stores its result,
through strides instead.
"""

from __future__ import annotations

import logging
import math

from ..._env import DEBUG
from ..._ir import GraphView, Node, Value

log = logging.getLogger("webnn_gpu")

#: A matmul reads a transposed operand through strides only up to this many multiply-adds:
#: strided operands are scalar loads (the tile kernel's vec4 loads need unit strides), which a
#: large product pays for more than it saves in the transpose's launch (512^3 with B transposed
#: was 35% slower folded, Mesa 22.3; [4, 24, 8] x [4, 8, 24] saves a launch).
VIEW_MAX_MACS = 1 << 18


def _strides(shape) -> tuple[int, ...]:
    """Row-major element strides of ``shape``."""
    out, acc = [], 1
    for d in reversed(tuple(shape)):
        out.append(acc)
        acc *= d
    return tuple(reversed(out))


def _macs(mm: Node) -> int:
    """Multiply-adds of matmul ``mm`` (its output's size times K)."""
    a = mm.inputs[0]
    k = a.shape[-2] if mm.attrs.get("a_transpose") else a.shape[-1]
    return math.prod(mm.outputs[0].shape) * k


def _operand_view(g: GraphView, mm: Node, v: Value):
    """(transpose node, its input, (shape, strides)) where ``v`` is the output of a transpose (not
    a free view) that only ``mm`` reads and that is no graph output: ``mm`` may read the
    transpose's input (contiguous) through the permuted strides; else None."""
    t = g.producer(v)
    if t is None or t.op != "transpose" or t.attrs.get("alias"):
        return None
    if g.sole_consumer(v) is not mm:
        return None
    src = t.inputs[0]
    st = _strides(src.shape)
    return t, src, (tuple(v.shape), tuple(st[p] for p in t.attrs["permutation"]))


def _output_view(g: GraphView, mm: Node):
    """(nodes read in place, the final value, strides of the natural output's dimensions) where
    the matmul's output reaches a transpose (not a free view) through reshapes that only add or
    drop dimensions of size 1, each value read by the next node alone and no graph output, and
    the output's columns stay contiguous (stride 1); else None."""
    v, chain = mm.outputs[0], []
    while True:
        c = g.sole_consumer(v)
        if c is None or c.op not in ("reshape", "transpose") or len(c.outputs) != 1:
            return None
        chain.append(c)
        if c.op == "transpose":
            if c.attrs.get("alias"):
                return None
            break
        v = c.outputs[0]
    t = chain[-1]
    natural, viewed = tuple(mm.outputs[0].shape), tuple(t.inputs[0].shape)
    if [d for d in natural if d != 1] != [d for d in viewed if d != 1]:
        return None
    perm = list(t.attrs["permutation"])
    st_final = _strides(t.outputs[0].shape)
    st_viewed = [st_final[perm.index(i)] for i in range(len(viewed))]
    big_viewed = [s for d, s in zip(viewed, st_viewed) if d != 1]
    it = iter(big_viewed)
    st_natural = tuple(next(it) if d != 1 else 0 for d in natural)
    if natural[-1] == 1 or st_natural[-1] != 1:
        return None
    return chain, t.outputs[0], st_natural


def fold_matmul_views(nodes: list, outputs: dict, context=None) -> list:
    """``matmul(transpose(x), y)`` / ``matmul(x, transpose(y))``, for any permutation, becomes one
    matmul reading ``x`` (``y``) through the permuted strides (``attrs["a_view"]`` /
    ``attrs["b_view"]``: the operand's shape and element strides), where the product has at most
    :data:`VIEW_MAX_MACS` multiply-adds; and ``transpose(matmul(x, y))`` (through reshapes that
    only add or drop dimensions of size 1) becomes one matmul storing its output permuted
    (``attrs["out_view"]``: the strides of each dimension of the product's natural
    ``[batch..., M, N]`` output), where the columns stay contiguous (any size: the stores stay
    vec4). The heads of an attention block are split and merged this way: a key matrix
    transposed for ``q x k^T``, the context's ``[batch, heads, rows, depth]`` put back to
    ``[batch, rows, heads, depth]``.

    Fires only where the matmul is the transpose's one reader (and the only reader of its output
    on the way to the transpose), no value in between is a graph output, the matmul has no
    epilogue yet and does not read the same value twice. The sums and their order do not change.
    """
    g = GraphView(nodes, outputs)
    replaced: dict[int, Node] = {}
    dropped: set[int] = set()
    for mm in nodes:
        if mm.op != "matmul" or mm.attrs.get("epilogue") or len(mm.outputs) != 1:
            continue
        if any(k in mm.attrs for k in ("a_view", "b_view", "out_view")):
            continue
        inputs, attrs, outs = list(mm.inputs), dict(mm.attrs), list(mm.outputs)
        if inputs[0] is not inputs[1] and _macs(mm) <= VIEW_MAX_MACS:
            for slot, key in ((0, "a_view"), (1, "b_view")):
                if slot == 0 and attrs.get("a_transpose"):
                    continue
                found = _operand_view(g, mm, inputs[slot])
                if found is None or found[0].id in dropped:
                    continue
                t, src, view = found
                inputs[slot], attrs[key] = src, view
                dropped.add(t.id)
        out = _output_view(g, mm)
        if out is not None and not any(n.id in dropped or n.id in replaced for n in out[0]):
            chain, final, st = out
            attrs["out_view"] = st
            outs = [final]
            dropped.update(n.id for n in chain)
        if inputs == list(mm.inputs) and outs == list(mm.outputs):
            continue
        replaced[mm.id] = Node("matmul", inputs, outs, attrs, mm.label)
        if DEBUG >= 2:
            log.debug("fold_matmul_views: matmul [%s] reads %s, stores %s", mm.label,
                      [k for k in ("a_view", "b_view") if k in attrs], "out_view" in attrs)
    return g.replace(replaced, dropped)
