"""Rules on matrix products: operand views a matmul reads in place; one product for rows
that an unrolled loop multiplied one at a time by the same matrix."""

from __future__ import annotations

import logging

from ..._env import DEBUG
from ..._ir import GraphView, Node, Value

log = logging.getLogger("webnn_gpu")


def fold_matmul_transpose(nodes: list, outputs: dict, context=None) -> list:
    """``matmul(transpose(a), b)``, where the transpose swaps only the last two dimensions,
    becomes one matmul reading ``a`` through swapped strides (``attrs["a_transpose"]``, the
    tile kernel's ``a_ks``): no transpose kernel and no intermediate buffer (a loader's
    BatchMatMul with adj_x). The transpose stays where something else reads its output; a free
    transpose (a view) is left alone. The sums and their order do not change, so the result is
    bit-for-bit the same. Fires only where the matmul is the transpose's one reader.

    B is not folded: the tile kernel reads B as vec4 along the output columns, which a
    transposed B does not give (4 scalar loads per vec4; 512^3 with B transposed was 35%
    slower folded than through the transpose kernel, A transposed 5-15% faster, Mesa 22.3).
    """
    g = GraphView(nodes, outputs)
    replaced: dict[int, Node] = {}
    dropped: set[int] = set()
    for mm in nodes:
        if mm.op != "matmul" or mm.attrs.get("a_transpose"):
            continue
        inputs, attrs = list(mm.inputs), dict(mm.attrs)
        for slot, flag in ((0, "a_transpose"),):
            t = g.producer(inputs[slot])
            if t is None or t.op != "transpose" or t.attrs.get("alias"):
                continue
            if g.sole_consumer(t.outputs[0]) is not mm:
                continue  # something else reads the transpose: it stays, and so does this read
            r = len(t.outputs[0].shape)
            if list(t.attrs["permutation"]) != list(range(r - 2)) + [r - 1, r - 2]:
                continue
            if inputs[1 - slot] is inputs[slot]:
                continue  # matmul(t, t): one operand read two ways; keep it simple
            inputs[slot] = t.inputs[0]
            attrs[flag] = True
            dropped.add(t.id)
        if inputs == list(mm.inputs):
            continue
        replaced[mm.id] = Node("matmul", inputs, list(mm.outputs), attrs, mm.label)
        if DEBUG >= 2:
            log.debug("fold_matmul_transpose: matmul [%s] reads a transposed", mm.label)
    return g.replace(replaced, dropped)


def _through_reshapes(g, v, up: bool):
    """Follow ``v`` through reshapes that are its only reader (``up``: towards producers, the
    reshapes' inputs; else towards the one reader): (the value reached, the reshape nodes)."""
    chain: list[Node] = []
    while True:
        if up:
            p = g.producer(v)
            if p is None or p.op != "reshape" or g.sole_consumer(v) is None:
                return v, chain
            chain.append(p)
            v = p.inputs[0]
        else:
            c = g.sole_consumer(v)
            if c is None or c.op != "reshape":
                return v, chain
            chain.append(c)
            v = c.outputs[0]


def stack_shared_gemms(nodes: list, outputs: dict, context=None) -> list:
    """``concat([gemm(row_0, B, c), ..., gemm(row_n-1, B, c)])``, where ``row_i`` is the
    ``i``-th slice of one tensor ``X`` along its first axis of size > 1 (through reshapes to
    ``[1, K]``), every gemm multiplies by the same ``B`` with the same ``c``, options and
    epilogue, and the concat stacks the results in that order (through reshapes, along an
    axis with only axes of size 1 before it), becomes one ``gemm(reshape(X, [n, K]), B, c)``
    reshaped to the concat's shape: the same sums row by row (the kernel variant chosen for
    ``n`` rows may add them in another order: float32 rounding), in one kernel instead of
    ``2n + 1`` (TFLite's converter unrolls a ``TimeDistributed(Dense)`` after a recurrent
    layer into a ``STRIDED_SLICE`` and a ``FULLY_CONNECTED`` per step, and a ``PACK``).

    Not stacked: gemms with different operands or options, a transposed ``a``, slices that do
    not cover ``X`` once in concat order, any intermediate value read elsewhere or a graph
    output, a concat along an axis with a larger axis before it.
    """
    g = GraphView(nodes, outputs)
    replaced: dict[int, list[Node]] = {}
    dropped: set[int] = set()
    for cat in nodes:
        if cat.op != "concat" or len(cat.inputs) < 2 or not isinstance(cat.attrs, dict):
            continue
        y = cat.outputs[0]
        axis = cat.attrs["axis"]
        if any(d != 1 for d in y.shape[:axis]) or len({v.id for v in cat.inputs}) != len(cat.inputs):
            continue
        gemms, path, rows = [], [], []
        for v in cat.inputs:
            src, chain = _through_reshapes(g, v, up=True)
            gm = g.producer(src)
            if gm is None or gm.op != "gemm" or g.sole_consumer(src) is None or len(gm.outputs) != 1:
                break
            a = gm.inputs[0]
            row, chain2 = _through_reshapes(g, a, up=True)
            sl = g.producer(row)
            if (sl is None or sl.op != "slice" or g.sole_consumer(row) is None or g.sole_consumer(a) is None
                    or tuple(a.shape) != (1, a.shape[1]) or gm.attrs.get("a_transpose")):
                break
            gemms.append(gm)
            rows.append(sl)
            path += chain + chain2 + [gm, sl]
        if len(gemms) != len(cat.inputs):
            continue
        g0, x = gemms[0], rows[0].inputs[0]
        if any(m.inputs[1:] != g0.inputs[1:] or m.attrs != g0.attrs for m in gemms[1:]):
            continue
        if any(s.inputs[0] is not x for s in rows):
            continue
        t = next((d for d, n in enumerate(x.shape) if n != 1), None)
        n = len(rows)
        if t is None or x.shape[t] != n:
            continue
        want = [[0] * len(x.shape) for _ in range(n)]
        for i in range(n):
            want[i][t] = i
        if any(list(s.attrs["starts"]) != want[i] or any(st != 1 for st in s.attrs.get("strides", [])) or
               tuple(s.outputs[0].shape) != tuple(1 if d == t else e for d, e in enumerate(x.shape))
               for i, s in enumerate(rows)):
            continue
        K, N = g0.inputs[0].shape[1], g0.outputs[0].shape[1]
        if y.size != n * N or x.size != n * K:
            continue
        a_all = Value(x.data_type, (n, K), "op")
        stacked = Value(g0.outputs[0].data_type, (n, N), "op")
        view = Node("reshape", [x], [a_all], {}, g0.label)
        gemm = Node("gemm", [a_all, *g0.inputs[1:]], [stacked], g0.attrs, cat.label or g0.label)
        a_all.producer, stacked.producer = view, gemm
        replaced[cat.id] = [view, gemm, Node("reshape", [stacked], [y], {}, cat.label)]
        dropped.update(p.id for p in path)
        if DEBUG >= 2:
            log.debug("stack_shared_gemms: %d gemms [%s ...] as one of %d rows", n, g0.label, n)
    return g.replace(replaced, dropped) if replaced else nodes
