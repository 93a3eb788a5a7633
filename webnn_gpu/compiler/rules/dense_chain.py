"""Rules on chains of small dense layers on one sample: one kernel for the chain.

A multilayer perceptron on one sample (an autoencoder's bottleneck layers, a classifier's
head) is a chain of one-row products, each a few thousand multiply-adds: each launch (about
45 us of wall time on lavapipe) costs more than its product.
"""

from __future__ import annotations

import logging

from ..._env import DEBUG
from ..._ir import GraphView, Node
from ._common import _max_bindings

log = logging.getLogger("webnn_gpu")

#: Most weights (K x N) of one layer of a chain: one workgroup computes every layer ...
CHAIN_MAX_WEIGHTS = 16384
#: ... and the most outputs of a layer (the workgroup-memory row the next layer reads).
CHAIN_MAX_N = 1024


def _layer_ok(node: Node) -> bool:
    """A float32 or float16 one-row matmul or gemm (``[1, K] x [K, N]``) by a constant B (a
    gemm's maybe transposed, any alpha, beta and c; no transposed A, no operand views; A, B and
    the product of one data type) within :data:`CHAIN_MAX_WEIGHTS` and :data:`CHAIN_MAX_N`."""
    dt = node.outputs[0].data_type if len(node.outputs) == 1 else None
    if node.op not in ("matmul", "gemm") or dt not in ("float32", "float16"):
        return False
    if any(node.attrs.get(k) for k in ("a_transpose", "a_view", "b_view", "out_view")):
        return False
    a, b = node.inputs[0], node.inputs[1]
    if len(a.shape) != 2 or a.shape[0] != 1 or a.data_type != dt or b.data_type != dt:
        return False
    if b.kind != "constant" or b.data is None or len(b.shape) != 2:
        return False
    K, N = b.shape[::-1] if node.op == "gemm" and node.attrs.get("b_transpose") else b.shape
    return K * N <= CHAIN_MAX_WEIGHTS and N <= CHAIN_MAX_N and K <= CHAIN_MAX_N


def _bindings(node: Node) -> int:
    """Storage buffers a layer binds: B and each other operand it reads (bias, c, epilogue)."""
    seen = {id(v) for v in node.inputs[1:] if v is not None}
    return len(seen)


def fuse_dense_chain(nodes: list, outputs: dict, context=None) -> list:
    """Two or more one-row dense layers in a row (``matmul`` / ``gemm`` of ``[1, K]`` by a
    constant B, each the next one's only input, with their epilogues: bias, activation) become
    one ``dense_chain`` node (``matmul/dense_chain.wgsl``): one workgroup computes the layers in
    turn, each row in workgroup memory for the next. float32 or float16 (float16: float32
    arithmetic and rows, each output rounded once at its store; the layers of a chain are of
    one data type, as each reads the one before).

    The node's inputs are the first layer's input, then each layer's other inputs in order
    (``attrs["layers"]``: per layer its op, attributes and how many inputs it reads after A).
    A chain ends at a layer read by anything else or that is a graph output, at a layer past
    :data:`CHAIN_MAX_WEIGHTS` or :data:`CHAIN_MAX_N`, and where the next layer's operands would
    bind more storage buffers than the device allows (``_common._max_bindings``).
    """
    limit = _max_bindings(context)
    g = GraphView(nodes, outputs)
    replaced: dict[int, Node] = {}
    dropped: set[int] = set()
    taken: set[int] = set()
    for first in nodes:
        if first.id in taken or not _layer_ok(first):
            continue
        chain, used = [first], 2 + _bindings(first)  # A, out and the first layer's operands
        while True:
            v = chain[-1].outputs[0]
            nxt = g.sole_consumer(v)
            if g.is_output(v) or nxt is None or nxt.id in taken or not _layer_ok(nxt) or nxt.inputs[0] is not v:
                break
            if any(u is v for u in nxt.inputs[1:]) or used + _bindings(nxt) > limit:
                break
            chain.append(nxt)
            used += _bindings(nxt)
        if len(chain) < 2:
            continue
        inputs = [first.inputs[0]]
        layers = []
        for n in chain:
            inputs += list(n.inputs[1:])
            layers.append((n.op, dict(n.attrs), len(n.inputs) - 1))
        label = "+".join(n.label for n in chain)
        replaced[chain[-1].id] = Node("dense_chain", inputs, list(chain[-1].outputs), {"layers": layers}, label)
        dropped.update(n.id for n in chain[:-1])
        taken.update(n.id for n in chain)
        if DEBUG >= 2:
            log.debug("fuse_dense_chain: [%s]", label)
    return g.replace(replaced, dropped)
