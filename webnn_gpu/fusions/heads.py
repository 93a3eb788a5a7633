"""Products of the same few rows by different constant matrices as one fused operator, ``heads``.

Pattern (after :func:`~webnn_gpu.compiler.rules.epilogue.fuse_epilogue`, which has made each
product's bias and activation its epilogue steps)::

    y_0 = ep_0(x . W_0)     matmul / gemm by a constant [K, N_0], 1 to 4 rows
    y_1 = ep_1(x . W_1)     the same x, another constant [K, N_1]
    ...

or NHWC conv2d of constant filters that read ``x`` as rows of a product (a window covering the
whole input: a landmark model's last convs on its 2x2 features; a 1x1 conv on a few pixels).

A network's heads on its pooled features (a landmark model's coordinates, presence score and
handedness), a multi-task classifier: each product alone is bound by its loads of W and pays a
launch (about 40 us on lavapipe); as one ``matmul/matvec.wgsl`` launch the weights are side by
side and each product keeps its own epilogue and output.

Operator: ``heads`` (:class:`HeadsAttrs`), legality :func:`head_group`, rule :func:`fuse_heads`,
lowering :func:`webnn_gpu.ops.linalg.lower_heads`.
"""

from __future__ import annotations

import dataclasses

from .._ir import GraphView, Node
from ..compiler.rules._common import _max_bindings, place_merged, shared_input_operands
from ..ops.linalg import matvec_head, matvec_plan, plan_context
from ._attrs import FusedAttrs


@dataclasses.dataclass(frozen=True)
class HeadsAttrs(FusedAttrs):
    """Attributes of a ``heads`` node; its inputs are the shared A, then the products' other
    operands (each value once), its outputs the products' outputs in order."""

    #: the products (matmul, gemm or conv2d, epilogue fused), all reading ``inputs[0]`` as their A
    heads: tuple


def head_ok(node: Node) -> bool:
    """Whether ``node`` can be one product of a ``heads`` node: a product
    :func:`~webnn_gpu.ops.linalg.matvec_head` accepts whose every operand but A is a host constant
    (the fused node takes the first product's place: nothing it reads may be computed later)."""
    return matvec_head(node) is not None and all(v is None or v.kind == "constant" for v in node.inputs[1:])


def _shape(node: Node) -> tuple[int, int, int]:
    """(M, K, N) of a product :func:`head_ok` accepted."""
    head = matvec_head(node)
    assert head is not None
    return head[0], head[1], head[2]


def head_group(nodes: list, context) -> bool:
    """Whether ``nodes``, products reading the same A, can run as one ``matmul/matvec.wgsl``
    launch: at least two, each :func:`head_ok`, of one data type, one row count and one K, and
    their columns together a matvec launch (:func:`~webnn_gpu.ops.linalg.matvec_plan`: 1 to 4
    rows, a reduction of at least ``MATVEC_MIN_K``; B as words, in a uniform buffer or a
    texture: ``context``'s subgroups, profile, limits and features decide, as at lowering:
    :func:`~webnn_gpu.ops.linalg.plan_context`)."""
    if len(nodes) < 2 or not all(head_ok(n) for n in nodes):
        return False
    shapes = [_shape(n) for n in nodes]
    if len({(m, k) for m, k, _ in shapes}) != 1 or len({n.outputs[0].data_type for n in nodes}) != 1:
        return False
    M, K = shapes[0][0], shapes[0][1]
    n_all = sum(-(-n // 4) * 4 for _, _, n in shapes)
    return matvec_plan(plan_context(context), M, n_all, K) is not None


def fuse_heads(nodes: list, outputs: dict, context=None) -> list:
    """Products reading the same A, of the pattern of :mod:`webnn_gpu.fusions.heads`, become one
    ``heads`` node (:class:`HeadsAttrs`) in the first one's place where :func:`head_group` holds
    for them and the device runs ``matmul/matvec.wgsl`` (lavapipe before Mesa 24: ``context``'s
    subgroup lanes on the ``"lane-loop"`` tuning profile).

    Left alone: a product that :func:`head_group` refuses (more rows, a short reduction, a
    computed B, a residual add of a computed tensor, another data type) stays on its own while
    the others of its A still merge; a single product; a group whose bindings (A, B, the
    epilogues' operands, the outputs) would pass the device's limit.
    """
    lanes = getattr(context, "_subgroup", 0) if context is not None else 0
    if not lanes or getattr(context, "_tuning", "default") != "lane-loop":
        return nodes
    limit = _max_bindings(context)
    g = GraphView(nodes, outputs)
    groups: dict[int, list[Node]] = {}
    for n in nodes:
        if n.op in ("matmul", "gemm", "conv2d") and n.inputs and matvec_head(n) is not None:
            groups.setdefault(n.inputs[0].id, []).append(n)
    replaced: dict[int, Node] = {}
    dropped: set[int] = set()
    for group in groups.values():
        if len(group) < 2:
            continue
        ok = [n for n in group if head_ok(n)]
        if ok:  # those of the first one's rows, K and data type
            key = (_shape(ok[0])[:2], ok[0].outputs[0].data_type)
            ok = [n for n in ok if (_shape(n)[:2], n.outputs[0].data_type) == key]
        if not head_group(ok, context):
            continue
        bound = 2 + sum(v is not None for n in ok for v in n.inputs[2:]) + len(ok)  # A, B, operands, outputs
        if bound > limit:
            continue
        place_merged(replaced, dropped, "heads", ok, shared_input_operands(ok), HeadsAttrs(tuple(ok)))
    return g.replace(replaced, dropped)
