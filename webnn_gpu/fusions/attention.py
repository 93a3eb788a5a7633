"""Scaled dot-product attention as one named operator, ``attention``.

Pattern (after :func:`~webnn_gpu.compiler.rules.epilogue.fuse_epilogue`, which has taken the
scale, the mask add and any element-wise tail into the matmuls' epilogues)::

    s = matmul(q, k) [* scale] [+ mask] [...]   (a matmul, its epilogue)
    p = softmax(s, axis=last)
    o = matmul(p, v) [...]                       (a matmul, its epilogue)

``s`` and ``p`` must feed only the next op of the pattern and be no graph outputs, ``p``
must be the second matmul's left operand (``matmul(v, p)`` is another product), the softmax
must run along the scores' last axis (the keys), and every value is float32 or float16.
The node keeps the three original nodes (:class:`AttentionAttrs`); its lowering
(:func:`lower_attention`) gives each to its own lowering in turn, so the kernels are the
tile / small matmul kernels with their epilogues and ``norm/softmax.wgsl``, and the scores and
probabilities are arena values live only while the node runs.
"""

from __future__ import annotations

import dataclasses
import logging

from .._env import DEBUG
from .._ir import GraphView, Node
from .._lower import LowerContext
from ..ops._registry import LOWERINGS, lowering
from ._attrs import FusedAttrs

log = logging.getLogger("webnn_gpu")

FLOATS = ("float32", "float16")


@dataclasses.dataclass(frozen=True)
class AttentionAttrs(FusedAttrs):
    """Attributes of an ``attention`` node: the three nodes it computes, in order. Its inputs
    are theirs (each value once; the scores and probabilities aside)."""

    #: ``matmul(q, k)`` with its epilogue (scale, mask, ...)
    scores: Node
    #: ``softmax`` along the scores' last axis
    softmax: Node
    #: ``matmul(p, v)`` with its epilogue
    context: Node


def attention_ok(scores: Node, softmax: Node, context: Node) -> bool:
    """Whether the three nodes form the pattern of the module docstring (consumers and outputs
    aside, which the rule checks on the graph)."""
    if scores.op != "matmul" or softmax.op != "softmax" or context.op != "matmul":
        return False
    if any(len(n.outputs) != 1 or n.outputs[0].data_type not in FLOATS for n in (scores, softmax, context)):
        return False
    s, p = scores.outputs[0], softmax.outputs[0]
    if softmax.inputs[0] is not s or softmax.attrs.get("axis") != len(s.shape) - 1:
        return False
    return context.inputs[0] is p and not any(v is p for v in context.inputs[1:])


def fuse_attention(nodes: list, outputs: dict, context=None) -> list:
    """``matmul -> softmax(last axis) -> matmul`` (scale and mask in the first matmul's
    epilogue) becomes one ``attention`` node in the second matmul's place (every operand,
    the values and a mask included, is computed there)."""
    g = GraphView(nodes, outputs)
    replaced: dict[int, Node] = {}
    dropped: set[int] = set()
    for sm in nodes:
        if sm.op != "softmax" or sm.id in dropped:
            continue
        scores = g.producer(sm.inputs[0])
        ctx_node = g.sole_consumer(sm.outputs[0])
        if scores is None or ctx_node is None or g.sole_consumer(sm.inputs[0]) is not sm:
            continue
        if scores.id in replaced or scores.id in dropped or ctx_node.id in dropped:
            continue
        if not attention_ok(scores, sm, ctx_node):
            continue
        inputs: list = []
        for v in [*scores.inputs, *ctx_node.inputs[1:]]:
            if v is not None and all(v is not u for u in inputs):
                inputs.append(v)
        label = "+".join(n.label for n in (scores, sm, ctx_node) if n.label)
        replaced[ctx_node.id] = Node("attention", inputs, list(ctx_node.outputs),
                                     AttentionAttrs(scores, sm, ctx_node), label)
        dropped.update((scores.id, sm.id))
        if DEBUG >= 2:
            log.debug("fuse_attention: [%s]", label)
    return g.replace(replaced, dropped)


@lowering("attention")
def lower_attention(node, lc) -> None:
    """The scores' matmul, the softmax and the context's matmul, each by its own lowering
    (their kernels labelled with their own nodes)."""
    a: AttentionAttrs = node.attrs
    for part in (a.scores, a.softmax, a.context):
        sub = LowerContext(part, lc.features, lc.limits, tuning=lc.tuning)
        LOWERINGS[part.op](part, sub)
        lc.steps.extend(sub.steps)
        lc.aliases.update(sub.aliases)
        lc.temps.extend(sub.temps)
