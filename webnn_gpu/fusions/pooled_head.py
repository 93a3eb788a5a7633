"""A classifier head, a one-row product of a global average pool, as one fused operator,
``pooled_head``.

Pattern::

    p = average_pool2d(x)            global, NHWC, one image [1, H, W, C] (or a pool of partial
                                     sums, fuse_pool_partials; or a depthwise conv's pooled second
                                     output, fuse_conv_pool)
    a = reshape(p)  ...              any reshapes (a one-row vector keeps its order)
    y = ep(a . W)                    matmul / gemm by a constant [C, N], one row, or a 1x1 conv2d on
                                     the pooled pixel; or a ``heads`` node of such products

A network's classifier (and a landmark model's heads) on its pooled features: the pool is a
launch of its own that writes C values for the product's launch to read back, both mostly
launch cost on lavapipe (about 45-70 us each). As one ``matmul/matvec.wgsl`` launch each lane
takes the mean of its k steps as it loads A (an input prologue: the sum over the pool's rows in
float32, in row order, divided by the pixel count), the product and its epilogue as before.

Operator: ``pooled_head`` (:class:`PooledHeadAttrs`), legality :func:`pooled_head_ok`, rule
:func:`fuse_pooled_head`, lowering :func:`lower_pooled_head` onto
:func:`~webnn_gpu.ops.linalg.matvec_heads_kernel` (its ``mean``).
"""

from __future__ import annotations

import dataclasses
import logging
import math

from .. import _env
from .._env import DEBUG
from .._ir import GraphView, Node, Value
from ..compiler.rules._common import _max_bindings, distinct
from ..ops._registry import lowering
from ..ops.linalg import (LOOP_BUDGET, MATVEC_MAX_WORKGROUP, head_products, matvec_heads_kernel, matvec_plan,
                          mean_shared, mean_spare_bytes, plan_context)
from ._attrs import FusedAttrs
from .heads import head_ok

log = logging.getLogger("webnn_gpu")


@dataclasses.dataclass(frozen=True)
class PooledHeadAttrs(FusedAttrs):
    """Attributes of a ``pooled_head`` node; its inputs are the pool's source (``[rows, C]``
    partial sums, or the ``[1, H, W, C]`` image: ``rows = H * W``), then the products' other
    operands (each value once); its outputs the products' outputs in order."""

    #: the products (matmul, gemm or conv2d, epilogue fused; a ``heads`` node's), all one row
    #: reading the pooled vector as their A
    products: tuple
    #: rows of the source the mean sums
    rows: int
    #: the pixel count the sums divide by
    count: int
    #: the one product's row goes through a softmax (its node dropped): the node's output is the
    #: softmax's, computed in the launch's one workgroup
    softmax: bool = False


#: Most values the merged launch may load of the source in all, rows x C x the subgroups, where
#: each subgroup sums the rows for its own columns: past it the sums cost more than the pool's
#: launch saves. (Lavapipe, 2026-11-26, ``benchmarks/pooled_head.py``, kernels' time and wall
#: new / old, medians of 12 rounds: 8 x 1280 x 3, 31k: 0.93 / 0.99; 49 x 1280 x 3, 188k:
#: 0.72 / 0.91; 49 x 2048 x 3, 301k: 1.03 / 1.01; 49 x 672 x 16, 527k: 2.2 / 1.7.)
POOLED_MAX_LOADS = 200_000
#: ... and rows x C x the workgroups where a workgroup of several subgroups takes the means once
#: into workgroup memory (:func:`~webnn_gpu.ops.linalg.mean_shared`; a barrier holds its
#: subgroups until they are in). Inside the Keras MobileNetV3s and EfficientNetB0 the
#: squeeze-and-excite blocks' first 1x1 convs on one row of partial sums, 1 x 480..1152 x 9..10,
#: 5k-12k: 0.61-0.79 of the two launches' kernel time; their classifiers' 8 x 576 x 8 (37k) and
#: 5 x 960 x 10 (48k) 1.03 and 0.99; alone (an image's rows) 16 x 576 x 8, 9 x 960 x 8..10:
#: 1.00-1.15.
POOLED_MAX_LOADS_SHARED = 16_384


def mean_loops(K: int, rows: int, lanes: int) -> int:
    """An upper bound of the loop iterations of one ``matmul/matvec.wgsl`` invocation with the
    mean prologue as llvmpipe counts them (a loop of n iterations n + 1): its k steps, in each
    the sum over ``rows`` rows (or, taken once per workgroup, at most as many vec4s, each summed
    over the rows, then the k steps), with a few of margin."""
    steps = -(-(-(-K // 4)) // lanes)
    return steps * (rows + 3) + 8


def pooled_head_ok(products, rows: int, context, softmax: bool = False) -> bool:
    """Whether ``products`` (one-row products of the same A, ``K`` values, that
    :func:`~webnn_gpu.fusions.heads.head_ok` accepts), can take the mean of a ``[rows, K]``
    source as their A's prologue in one ``matmul/matvec.wgsl`` launch: K a multiple of 4 (the
    lanes load vec4s of it), a matvec plan for their columns on ``context``'s device
    (:func:`~webnn_gpu.ops.linalg.matvec_plan`: the "lane-loop" profile with subgroups), the
    loops within :data:`~webnn_gpu.ops.linalg.LOOP_BUDGET` (:func:`mean_loops`) and at most
    :data:`POOLED_MAX_LOADS` loads of the source in all (:data:`POOLED_MAX_LOADS_SHARED` where the
    workgroups take the means) (``WEBNN_GPU_FORCE_POOLED_HEAD=on`` any number,
    for measurements; ``=off`` never). With ``softmax`` (one product, its row's softmax in the
    launch): all its column groups in one workgroup of at most
    :data:`~webnn_gpu.ops.linalg.MATVEC_MAX_WORKGROUP` invocations, its logits within the device's
    workgroup memory. The means are taken per workgroup only where they fit the workgroup memory
    left (:func:`~webnn_gpu.ops.linalg.mean_shared`), else per subgroup."""
    forced = _env.force_choice("pooled_head", ("on", "off"))
    if forced == "off":
        return False
    if not products or not all(head_ok(n) for n in products):
        return False
    M, K, heads = head_products(products)
    if M != 1 or K % 4 or len({n.outputs[0].data_type for n in products}) != 1:
        return False
    pc = plan_context(context)
    plan = matvec_plan(pc, 1, sum(-(-N // 4) * 4 for _, _, N, _ in heads), K)
    if plan is None or mean_loops(K, rows, pc.subgroup) > LOOP_BUDGET:
        return False
    cn, workgroup = plan
    groups = sum(-(-(-(-N // 4)) // cn) for _, _, N, _ in heads)
    spare = mean_spare_bytes(pc.limits, groups, cn, softmax)
    if softmax:
        if len(products) != 1 or groups * pc.subgroup > MATVEC_MAX_WORKGROUP or spare < 0:
            return False
        workgroup = groups * pc.subgroup
    if mean_shared(workgroup, pc.subgroup, K, spare):
        return forced == "on" or rows * K * -(-groups // (workgroup // pc.subgroup)) <= POOLED_MAX_LOADS_SHARED
    return forced == "on" or rows * K * groups <= POOLED_MAX_LOADS


@lowering("pooled_head")
def lower_pooled_head(node, lc) -> None:
    """The products of ``attrs.products`` on the column means of ``inputs[0]`` (``attrs.rows``
    rows, divided by ``attrs.count``) as one ``matmul/matvec.wgsl`` launch."""
    a: PooledHeadAttrs = node.attrs
    M, K, heads = head_products(a.products)
    plan = matvec_plan(lc, M, sum(-(-N // 4) * 4 for _, _, N, _ in heads), K)
    if plan is None:  # fuse_pooled_head checked it with this device's profile
        raise AssertionError(f"{lc.label}: pooled_head without a matvec plan")
    if a.softmax:  # one workgroup of all the column groups; the softmax's output stored
        (mat, _, N, ep), = heads
        heads = [(mat, node.outputs[0], N, ep)]
        plan = (plan[0], -(-(-(-N // 4)) // plan[0]) * lc.subgroup)
    matvec_heads_kernel(lc, node.inputs[0], heads, M=M, K=K, a_rs=K, plan=plan, mean=(a.rows, a.count),
                        softmax=a.softmax)


#: attributes of a global average pool the prologue reproduces (any other one, a fused skip add
#: or a side map, keeps the pool)
_POOL_ATTRS = {"window", "padding", "strides", "dilations", "layout", "rounding_type", "output_sizes",
               "input_partials", "epilogue"}


def fuse_pooled_head(nodes: list, outputs: dict, context=None) -> list:
    """A one-row product (matmul / gemm by a constant, a 1x1 conv2d on one pixel, or a ``heads``
    node of such products) whose A is, through reshapes, the global average pool of one NHWC
    image becomes one ``pooled_head`` node reading the pool's source: the image (``[H * W, C]``
    rows), the partial sums of a pool that reads them (``fuse_pool_partials``), or a depthwise
    conv's pooled second output (``fuse_conv_pool``), which the conv then writes as partial
    sums (``attrs["pool_output"] = "partials"``, as ``fuse_squeeze_excite`` makes it).

    Left alone: a pool or reshape read by another node too or a graph output, a windowed pool,
    an NCHW pool, a pool with a fused skip add or an epilogue, more than one row, a computed B or
    epilogue operand, a transpose between (not a reshape), K not a multiple of 4, and what
    :func:`pooled_head_ok` refuses (no matvec plan on the device, loops past the budget, too
    many loads of the source).
    """
    from ..ops.conv import pool_rows
    from ..ops.pool import _is_global

    tuning = getattr(context, "_tuning", "default")
    if not getattr(context, "_subgroup", 0) or tuning != "lane-loop":
        return nodes
    limit = _max_bindings(context)
    g = GraphView(nodes, outputs)
    replaced: dict[int, Node] = {}
    dropped: set[int] = set()

    def only_reader(v: Value, node: Node) -> bool:
        return not g.is_output(v) and g.consumers(v) == [node]

    for node in nodes:
        if node.op == "heads":
            products = tuple(node.attrs.heads)
        elif node.op in ("matmul", "gemm", "conv2d") and len(node.outputs) == 1:
            products = (node,)
        else:
            continue
        if not node.inputs or node.inputs[0] is None or node.id in replaced:
            continue
        # the pooled vector, through reshapes each read by the next alone
        v, reader, between = node.inputs[0], node, []
        while (p := g.producer(v)) is not None and p.op == "reshape" and only_reader(v, reader):
            between.append(p)
            v, reader = p.inputs[0], p
        p = g.producer(v)
        if p is None or p.id in replaced or not only_reader(v, reader) or math.prod(v.shape) != v.shape[-1]:
            continue
        new_conv = None
        if p.op == "average_pool2d" and len(p.outputs) == 1:
            if (p.attrs.get("layout") != "nhwc" or any(k not in _POOL_ATTRS for k in p.attrs)
                    or p.attrs.get("epilogue") or len(p.inputs) != 1):
                continue
            src = p.inputs[0]
            if "input_partials" in p.attrs:  # fuse_pool_partials: [rows, C] float32 sums
                rows, count = src.shape[0], p.attrs["input_partials"]
            elif len(src.shape) == 4 and src.shape[0] == 1 and _is_global(p):
                rows = count = src.shape[1] * src.shape[2]
            else:
                continue
            if src.shape[-1] != v.shape[-1]:
                continue
        elif p.op in ("conv2d", "depthwise_project") and len(p.outputs) == 2 and v is p.outputs[1]:
            # a depthwise conv's pooled second output (fuse_conv_pool): its partial sums instead
            dw = p.attrs["depthwise"] if p.op == "depthwise_project" else p
            if dw.op != "conv2d" or dw.attrs.get("pool_output") is not True:
                continue
            rows = pool_rows(p, tuning, getattr(context, "_subgroup", 0))
            image = p.outputs[0]
            count = image.shape[1] * image.shape[2]
            src = Value("float32", (rows, v.shape[-1]), "op")
            new_dw = Node(dw.op, list(dw.inputs), [dw.outputs[0], src], {**dw.attrs, "pool_output": "partials"},
                          dw.label)
            new_conv = new_dw if p is dw else Node(p.op, list(p.inputs), list(new_dw.outputs),
                                                   {**p.attrs, "depthwise": new_dw}, p.label)
        else:
            continue
        # a softmax over the one product's row, read by nothing else: in the launch too
        out, readers = node.outputs[0], g.consumers(node.outputs[0])
        sm = readers[0] if len(node.outputs) == 1 and len(readers) == 1 and not g.is_output(out) else None
        softmax = (sm is not None and node.op != "heads" and sm.op == "softmax" and len(sm.outputs) == 1
                   and sm.attrs.get("axis") == len(out.shape) - 1 and not sm.attrs.get("epilogue")
                   and _env.force_choice("pooled_softmax", ("on", "off")) != "off"
                   and pooled_head_ok(products, rows, context, softmax=True))
        if not softmax and not pooled_head_ok(products, rows, context):
            continue
        # bindings: A, B (one packed matrix), the epilogues' operands, the outputs
        if 2 + sum(v is not None for n in products for v in n.inputs[2:]) + len(products) > limit:
            continue
        inputs = distinct([src, *node.inputs[1:]])
        last = sm if softmax and sm is not None else node  # the node whose outputs the fused one stores
        label = "+".join(n.label for n in dict.fromkeys((p, node, last)) if n.label)
        if last is not node:
            dropped.add(last.id)
        replaced[node.id] = Node("pooled_head", inputs, list(last.outputs),
                                 PooledHeadAttrs(products, rows, count, softmax), label)
        if new_conv is not None:
            replaced[p.id] = new_conv
        else:
            dropped.add(p.id)
        dropped.update(r.id for r in between)
        if DEBUG >= 2:
            log.debug("fuse_pooled_head: [%s] takes the mean of %d rows", label, rows)
    return g.replace(replaced, dropped)
