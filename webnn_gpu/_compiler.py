"""Compiler passes over the graph IR, run by ``MLGraphBuilder.build``.

Each pass takes and returns the node list (in a valid topological order). Passes:

* :func:`dead_code`: keep only nodes that contribute to an output.

Views (reshape) cost nothing at run time: their lowering aliases the input's buffer.
"""

from __future__ import annotations

import logging

from ._env import DEBUG

log = logging.getLogger("webnn_gpu")


def dead_code(nodes: list, outputs: dict) -> list:
    """Drop nodes whose results no output needs."""
    needed = {v.id for v in outputs.values()}
    keep = []
    for node in reversed(nodes):
        if any(o.id in needed for o in node.outputs):
            keep.append(node)
            needed.update(v.id for v in node.inputs if v is not None)
    return keep[::-1]


PASSES = [dead_code]


def run_passes(nodes: list, outputs: dict, context=None) -> list:
    """Run every pass of :data:`PASSES` in order."""
    for p in PASSES:
        nodes = p(nodes, outputs)
    if DEBUG >= 1:
        log.info("graph after passes (%d nodes):\n%s", len(nodes), "\n".join(map(repr, nodes)))
    return nodes
