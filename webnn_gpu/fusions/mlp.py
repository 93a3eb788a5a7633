"""Two products in a row as one fused operator, ``mlp``.

Pattern (after :func:`~webnn_gpu.compiler.rules.epilogue.fuse_epilogue`, which has made each
product's bias, activation and residual add its epilogue steps)::

    h = ep1(x . W1)     a matmul / gemm by a constant [K, H], or an NHWC pointwise conv2d
    y = ep2(h . W2)     the same kind of product by a constant [H, N], reading h as its A

where ``ep1`` is any epilogue the kernels host (a bias, ``relu``, ``gelu``, ``prelu`` with
per-channel slopes, ``hard_swish``, a residual add, ...), ``ep2`` any epilogue not reading
``h`` itself (a residual add of ``x`` or of another tensor, an activation). A transformer's
feed-forward block (Dense -> gelu -> Dense + residual), an MLP head of many rows, and a pointwise
expansion followed by a pointwise projection in NHWC models.

Operator: ``mlp`` (:class:`MlpAttrs`), legality :func:`mlp_ok`, rule :func:`fuse_mlp`, lowering
:func:`webnn_gpu.ops.linalg.lower_mlp` onto ``shaders/matmul/mlp.wgsl`` (each invocation
keeps its rows of ``h`` in workgroup memory and computes ``y`` from there: one launch, ``h``
stored to a buffer only where something else reads it).
"""

from __future__ import annotations

import dataclasses
import logging

from .._env import DEBUG
from .._ir import GraphView, Node
from .._lower import workgroup_bytes
from ..compiler.rules._common import _max_bindings, place_pair, ready_before
from ..ops.linalg import mlp_plan, mlp_product
from ._attrs import FusedAttrs

log = logging.getLogger("webnn_gpu")

#: The rule fires where each invocation of the fused kernel takes at least this many rows
#: (:func:`mlp_pays`) ...
MLP_MIN_TM = 4
#: ... in at least this many workgroups (lavapipe runs a workgroup on one thread) ...
MLP_MIN_WORKGROUPS = 2
#: ... with at most this many hidden columns ...
MLP_MAX_H = 128
#: ... and at most this many values in each weight matrix (64 KiB of float32: a uniform buffer).
MLP_MAX_WEIGHTS = 16384
#: Most workgroups of one launch (a 1-D dispatch).
MLP_MAX_WORKGROUPS = 65535


@dataclasses.dataclass(frozen=True)
class MlpAttrs(FusedAttrs):
    """Attributes of an ``mlp`` node; its inputs are the first product's, then the second one's
    but its A (each value once), its outputs the second product's output, then the first one's
    where ``keep``."""

    #: the first product (matmul, gemm or pointwise conv2d), epilogue fused
    first: Node
    #: the second product, reading ``first``'s output as its A
    second: Node
    #: the first product's output is read elsewhere too (or is a graph output): stored as well
    keep: bool = False


def mlp_ok(first: Node, second: Node) -> bool:
    """Whether ``second(first(x))`` can run as one ``matmul/mlp.wgsl`` kernel, consumers aside
    (:func:`fuse_mlp` checks them on the graph): both products of a kind
    :func:`~webnn_gpu.ops.linalg.mlp_product` accepts, of one data type and one row count,
    ``second`` reading ``first``'s output as its A and nowhere else (not as a bias, a residual or
    ``c``)."""
    p1, p2 = mlp_product(first), mlp_product(second)
    if p1 is None or p2 is None:
        return False
    h = first.outputs[0]
    if second.inputs[0] is not h or any(v is h for v in second.inputs[1:]):
        return False
    if second.outputs[0].data_type != h.data_type or p1[0] != p2[0] or p1[2] != p2[1]:
        return False
    return not any(st.get("input") == 0 for st in second.attrs.get("epilogue") or [])


def mlp_pays(M: int, K: int, H: int, N: int, plan: tuple[int, int, int], lanes: int) -> bool:
    """The cost condition: one ``matmul/mlp.wgsl`` launch with the plan ``(TM, TN1, TN2)``
    (:func:`~webnn_gpu.ops.linalg.mlp_plan`) for ``[M, K] x [K, H] x [H, N]`` is expected to be no
    slower than the two tile launches where

    * each invocation takes at least :data:`MLP_MIN_TM` rows (each weight vector a lane loads then
      serves that many rows, as in the tile kernel's subgroup variant) and the launch has at least
      :data:`MLP_MIN_WORKGROUPS` workgroups: the fused kernel spreads its work over rows only
      (each invocation computes every column of both products for its rows), so with fewer rows
      it runs on fewer threads than the two tile launches, whose invocations also split the
      columns;
    * H is at most :data:`MLP_MAX_H` and each weight matrix holds at most
      :data:`MLP_MAX_WEIGHTS` values: with deeper products the weight loads, each shared by 4
      rows per lane where the tile kernel's subgroup variant shares them by 8, dominate, and the
      kernel reads the weights row-major, where the tile kernel reads a large B as one contiguous
      panel per column tile.

    Measured (Mesa 22.3, 2 cores shared with other work; docs/linalg.md, "Two products in one
    launch"). Graphs of the two products alone (``benchmarks/mlp_pairs.py``), process CPU time per
    ``compute``, best of 10 alternating rounds, fused / two tile launches, two runs at load average
    2.5: ``M x K -> H -> N`` 4096 x 16 -> 64 -> 16 0.73, 1024 x 64 -> 128 -> 64 0.86-0.93, 256 x 64
    -> 128 -> 64 0.80-0.96, 64 x 64 -> 128 -> 64 0.68-0.94, 64 x 192 -> 32 -> 192 0.91-0.92, 128 x 48
    -> 96 -> 48 (gelu, residual) 0.80-0.99; at load average 5-12, with fewer than 4 rows per
    invocation: 32 x 64 -> 256 -> 64 1.04-1.26 (TM 2), 65 x 48 -> 96 -> 48 0.96-1.04 (TM 3), 256 x
    256 -> 512 -> 256 1.47 (TM 2). Kernel timestamps in models (``webnn-gpu profile``, alternating
    processes, 3 rounds), past the limits: ConvNeXt's 256 x 48 -> 192 -> 48 2192-2230 us fused
    against 2000-2051 us, ResNet50's 256 x 64 -> 256 -> 64 1531-1862 against 1317-1905,
    pose_landmark_full's 64 x 864 -> 144 -> 864 (weights of 124K values) 14-29 ms against 5.2-5.5
    ms."""
    return (plan[0] >= MLP_MIN_TM and -(-M // (plan[0] * lanes)) >= MLP_MIN_WORKGROUPS and H <= MLP_MAX_H
            and max(K * H, H * N) <= MLP_MAX_WEIGHTS)


def fuse_mlp(nodes: list, outputs: dict, context=None) -> list:
    """``second(first(x))``, two products of the pattern of :mod:`webnn_gpu.fusions.mlp`, becomes
    one ``mlp`` node (:class:`MlpAttrs`) where :func:`mlp_ok` holds, the device runs the tile
    kernel's subgroup variant (lavapipe before Mesa 24: ``context``'s subgroup lanes on the
    ``"lane-loop"`` tuning profile), the kernel's plan fits (:func:`~webnn_gpu.ops.linalg.mlp_plan`:
    an invocation's hidden rows in workgroup memory, its loops within llvmpipe's budget) and
    :func:`mlp_pays`.

    Where ``first``'s output has other readers or is a graph output, the node also stores it as a
    second output and takes ``first``'s place (``second``'s other operands must be ready there);
    otherwise it takes ``second``'s place. An intermediate read by two products stays as it is (it
    is no chain), as does a hidden layer too wide for the workgroup memory, and a pair whose
    bindings would pass the device's limit.
    """
    lanes = getattr(context, "_subgroup", 0) if context is not None else 0
    if not lanes or getattr(context, "_tuning", "default") != "lane-loop":
        return nodes
    wg_bytes = workgroup_bytes(context.limits)
    limit = _max_bindings(context)
    g = GraphView(nodes, outputs)
    at = {n.id: i for i, n in enumerate(nodes)}
    replaced: dict[int, Node] = {}
    dropped: set[int] = set()
    for second in nodes:
        if second.op not in ("matmul", "gemm", "conv2d") or not second.inputs or second.id in dropped:
            continue
        h = second.inputs[0]
        first = g.producer(h)
        if first is None or first.id in dropped or first.id in replaced or second.id in replaced:
            continue
        if not mlp_ok(first, second):
            continue
        readers = g.consumers(h)
        if sum(r.op in ("matmul", "gemm", "conv2d") and r.inputs[0] is h for r in readers) != 1:
            continue  # h feeds two products: no chain
        keep = len(readers) != 1 or g.is_output(h)
        if keep and not ready_before(g, at, second.inputs[1:], first):
            continue
        p1, p2 = mlp_product(first), mlp_product(second)
        assert p1 is not None and p2 is not None  # mlp_ok checked them
        (M, K, H), N = p1, p2[2]
        plan = mlp_plan(M, K, H, N, lanes, wg_bytes)
        if plan is None or not mlp_pays(M, K, H, N, plan, lanes):
            continue
        if -(-M // plan[0]) > MLP_MAX_WORKGROUPS * lanes:
            continue
        bound = sum(v is not None for v in [*first.inputs, *second.inputs[1:]])  # as the kernel binds them
        if bound + 2 + keep > limit:  # the parameters, out, mid
            continue
        fused = place_pair(replaced, dropped, "mlp", first, second, MlpAttrs(first, second, keep), keep)
        if DEBUG >= 2:
            log.debug("fuse_mlp: [%s] %dx%d->%d->%d%s", fused.label, M, K, H, N, " keep" if keep else "")
    return g.replace(replaced, dropped)

