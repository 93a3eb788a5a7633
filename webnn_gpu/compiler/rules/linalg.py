"""Rules on matrix products: operand views a matmul reads in place."""

from __future__ import annotations

import logging

from ..._env import DEBUG
from ..._ir import GraphView, Node

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
            if g.sole_consumer(t.outputs[0]) is not mm or g.is_output(t.outputs[0]):
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
