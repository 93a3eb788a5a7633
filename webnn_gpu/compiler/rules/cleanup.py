"""Rules that remove work: nodes no output needs."""

from __future__ import annotations


def dead_code(nodes: list, outputs: dict, context=None) -> list:
    """Drop nodes whose results no output needs."""
    needed = {v.id for v in outputs.values()}
    keep = []
    for node in reversed(nodes):
        if any(o.id in needed for o in node.outputs):
            keep.append(node)
            needed.update(v.id for v in node.inputs if v is not None)
    return keep[::-1]
