"""Scaled dot-product attention as one named operator, ``attention``.

Pattern (after :func:`~webnn_gpu.compiler.rules.epilogue.fuse_epilogue`, which has taken the
scale, the mask add and any element-wise tail into the matmuls' epilogues)::

    s = matmul(q, k) [* scale] [+ mask] [...]   (a matmul, its epilogue)
    p = softmax(s, axis=last)                    (maybe through reshapes keeping the last axis,
    o = matmul(p, v) [...]                        as ONNX's opset-11 Softmax gives: a 2-D view)

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

from .._dtypes import FLOAT_TYPES as FLOATS
from .._env import DEBUG
from .._ir import GraphView, Node
from .._lower import LowerContext
from ..compiler.rules._common import distinct
from ..ops._registry import LOWERINGS, lowering
from ._attrs import FusedAttrs

log = logging.getLogger("webnn_gpu")


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
    #: a reshape of the scores keeping their last axis, read by the softmax (or None)
    before: Node | None = None
    #: a reshape of the probabilities keeping their last axis, read by ``context`` (or None)
    after: Node | None = None

    def parts(self) -> list[Node]:
        """The nodes in the order they run."""
        return [n for n in (self.scores, self.before, self.softmax, self.after, self.context) if n is not None]


def _keeps_rows(node: Node | None) -> bool:
    """Whether ``node`` is a reshape keeping the last axis (each row stays a row)."""
    if node is None or node.op != "reshape" or len(node.outputs) != 1:
        return False
    x, y = node.inputs[0].shape, node.outputs[0].shape
    return len(x) >= 1 and len(y) >= 1 and x[-1] == y[-1]


def attention_ok(scores: Node, softmax: Node, context: Node, before: Node | None = None,
                 after: Node | None = None) -> bool:
    """Whether the nodes form the pattern of the module docstring (consumers and outputs
    aside, which the rule checks on the graph)."""
    if scores.op != "matmul" or softmax.op != "softmax" or context.op != "matmul":
        return False
    parts = [n for n in (scores, before, softmax, after, context) if n is not None]
    if any(len(n.outputs) != 1 or n.outputs[0].data_type not in FLOATS for n in parts):
        return False
    if any(n is not None and not _keeps_rows(n) for n in (before, after)):
        return False
    s = scores.outputs[0] if before is None else before.outputs[0]
    if before is not None and before.inputs[0] is not scores.outputs[0]:
        return False
    if softmax.inputs[0] is not s or softmax.attrs.get("axis") != len(s.shape) - 1:
        return False
    p = softmax.outputs[0] if after is None else after.outputs[0]
    if after is not None and after.inputs[0] is not softmax.outputs[0]:
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
        src, before = sm.inputs[0], None
        pre = g.producer(src)
        if pre is not None and _keeps_rows(pre) and g.sole_consumer(src) is sm:
            before, src = pre, pre.inputs[0]
        scores = g.producer(src)
        if scores is None or g.sole_consumer(src) is not (before or sm):
            continue
        after, ctx_node = None, g.sole_consumer(sm.outputs[0])
        if ctx_node is not None and _keeps_rows(ctx_node):
            after, ctx_node = ctx_node, g.sole_consumer(ctx_node.outputs[0])
        if ctx_node is None or any(n.id in replaced or n.id in dropped for n in (scores, ctx_node)):
            continue
        if not attention_ok(scores, sm, ctx_node, before, after):
            continue
        attrs = AttentionAttrs(scores, sm, ctx_node, before, after)
        inputs = distinct([*scores.inputs, *ctx_node.inputs[1:]])
        label = "+".join(n.label for n in (scores, sm, ctx_node) if n.label)
        replaced[ctx_node.id] = Node("attention", inputs, list(ctx_node.outputs), attrs, label)
        dropped.update(n.id for n in attrs.parts()[:-1])
        if DEBUG >= 2:
            log.debug("fuse_attention: [%s]", label)
    return g.replace(replaced, dropped)


@lowering("attention")
def lower_attention(node, lc) -> None:
    """The scores' matmul, the softmax and the context's matmul (and the views between them),
    each by its own lowering (their kernels labelled with their own nodes); where
    :func:`~webnn_gpu.ops.linalg.attention_kernel` applies, one kernel for all three."""
    from ..ops.linalg import attention_kernel

    if attention_kernel(node, lc):
        return
    a: AttentionAttrs = node.attrs
    for part in a.parts():
        sub = LowerContext(part, lc.features, lc.limits, tuning=lc.tuning, subgroup=lc.subgroup)
        LOWERINGS[part.op](part, sub)
        lc.steps.extend(sub.steps)
        lc.aliases.update(sub.aliases)
        lc.temps.extend(sub.temps)
