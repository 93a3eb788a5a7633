"""Helpers the rules share: device limits, constant tests, labels of added views, graph order."""

from __future__ import annotations

import logging

import numpy as np

from ..._env import DEBUG
from ..._ir import GraphView, Node

log = logging.getLogger("webnn_gpu")


def _max_bindings(context) -> int:
    """Storage buffers a kernel may bind on ``context``'s device (8, WebGPU's default, without one)."""
    if context is None:
        return 8
    return int(context.limits.get("max-storage-buffers-per-shader-stage", 8))


def _view_label(node) -> str:
    """The label of a view the compiler adds for an operand of ``node``."""
    return f"{node.label}:view" if node.label else ""


def _const_all(v, value: float, rel: float = 0.0) -> bool:
    """Whether ``v`` is a host constant whose every element equals ``value`` (within ``rel``)."""
    if v is None or v.kind != "constant" or v.data is None or v.data.size == 0:
        return False
    d = v.data.astype(np.float64)
    return bool(np.all(np.abs(d - value) <= rel * abs(value)))


def _is_linear_doubling(node) -> bool:
    """Whether ``node`` is a linear resample2d doubling both of its axes (half-pixel centers,
    clamped: every input pixel's weights add up to exactly 4 over the output)."""
    if node.op != "resample2d" or node.attrs.get("mode") != "linear" or node.attrs.get("epilogue"):
        return False  # (an epilogue after the interpolation is not a plain doubling)
    x, y = node.inputs[0], node.outputs[0]
    return all(y.shape[a] == 2 * x.shape[a] for a in node.attrs["axes"])


def ready_before(g: GraphView, at: dict, values, node: Node) -> bool:
    """Whether every value of ``values`` is ready before ``node`` runs (no value, a constant or
    an input, or computed by an earlier node; ``at`` maps a node id to its position)."""
    for v in values:
        p = g.producer(v) if v is not None else None
        if p is not None and at[p.id] >= at[node.id]:
            return False
    return True


def distinct(values) -> list:
    """``values`` in order without None and without repeats (by identity): the inputs of a node
    standing for several nodes that share operands (its kernel binds each value once)."""
    out: list = []
    for v in values:
        if v is not None and all(v is not u for u in out):
            out.append(v)
    return out


def place_fused(replaced: dict, dropped: set, first: Node, second: Node, fused: Node, keep: bool) -> None:
    """Record ``fused`` (``first`` and the ``second`` node reading its output, as one node) in
    a rule's ``replaced`` / ``dropped``: at ``first``'s place when it also stores ``first``'s
    output (``keep``: its other readers may come before ``second``; the caller has checked
    with :func:`ready_before` that ``second``'s other operands are ready there), else at
    ``second``'s."""
    if keep:
        replaced[first.id] = fused
        dropped.add(second.id)
    else:
        replaced[second.id] = fused
        dropped.add(first.id)


def place_pair(replaced: dict, dropped: set, op: str, first: Node, second: Node, attrs, keep: bool) -> Node:
    """Record one ``op`` node for ``first`` and the ``second`` node reading its output (its first
    input) through :func:`place_fused`: its inputs ``first``'s, then ``second``'s other ones, each
    value once (:func:`distinct`); its outputs ``second``'s, then ``first``'s where ``keep``."""
    label = "+".join(n.label for n in (first, second) if n.label)
    outs = list(second.outputs) + ([second.inputs[0]] if keep else [])
    fused = Node(op, distinct([*first.inputs, *second.inputs[1:]]), outs, attrs, label)
    place_fused(replaced, dropped, first, second, fused, keep)
    return fused


def shared_input_operands(products) -> list:
    """The inputs of one node standing for ``products``, which all read the same first input:
    that input, then each other operand of theirs once, in order (None left out)."""
    return distinct([products[0].inputs[0], *(v for n in products for v in n.inputs[1:])])


def place_merged(replaced: dict, dropped: set, op: str, products: list, inputs: list, attrs) -> Node:
    """Record one ``op`` node for ``products`` (reading the same first input; ``inputs`` from
    :func:`shared_input_operands`) in a rule's ``replaced`` / ``dropped``: in the first one's
    place (everything else they read is ready there), their outputs its outputs in order."""
    label = "+".join(n.label for n in products if n.label)
    fused = Node(op, inputs, [n.outputs[0] for n in products], attrs, label)
    replaced[products[0].id] = fused
    dropped.update(n.id for n in products[1:])
    if DEBUG >= 2:
        log.debug("%s: [%s] %d products", op, label, len(products))
    return fused
