"""A deep snapshot of a node list: every node, value and attribute a rule could change."""

from __future__ import annotations

import dataclasses

import numpy as np

from webnn_gpu._ir import Node, Value


def snapshot(nodes: list, outputs: dict) -> tuple:
    """Everything reachable from ``nodes`` and ``outputs`` as nested tuples: the node list (ids in
    order), each node's op, label, inputs, outputs and attributes (nodes held in attributes
    too), each value's type, kind, data and recorded producer."""
    seen_nodes: dict[int, tuple] = {}
    seen_values: dict[int, tuple] = {}

    def value(v: Value) -> tuple:
        if v.id not in seen_values:
            seen_values[v.id] = ()  # (a cycle through producer stops here)
            data = None if v.data is None else (str(v.data.dtype), v.data.shape, v.data.tobytes())
            seen_values[v.id] = (v.data_type, tuple(v.shape), v.kind, v.name, data, id(v.tensor),
                                 None if v.producer is None else node(v.producer))
        return ("V", v.id)

    def node(n: Node) -> tuple:
        if n.id not in seen_nodes:
            seen_nodes[n.id] = ()
            seen_nodes[n.id] = (n.op, n.label, id(n.inputs), tuple(freeze(v) for v in n.inputs),
                                id(n.outputs), tuple(value(v) for v in n.outputs), id(n.attrs), freeze(n.attrs))
        return ("N", n.id)

    def freeze(x):
        if x is None or isinstance(x, (str, bool, int, float)):
            return x
        if isinstance(x, Value):
            return value(x)
        if isinstance(x, Node):
            return node(x)
        if isinstance(x, np.ndarray):
            return ("A", str(x.dtype), x.shape, x.tobytes())
        if isinstance(x, np.generic):
            return x.item()
        if isinstance(x, dict):
            return ("d", id(x), tuple((k, freeze(v)) for k, v in x.items()))
        if isinstance(x, (list, tuple)):
            return (type(x).__name__, id(x) if isinstance(x, list) else 0, tuple(freeze(i) for i in x))
        if dataclasses.is_dataclass(x) and not isinstance(x, type):
            return (type(x).__name__, tuple((f.name, freeze(getattr(x, f.name))) for f in dataclasses.fields(x)))
        return ("?", repr(x))

    order = tuple(node(n) for n in nodes)
    outs = tuple((k, value(v)) for k, v in outputs.items())
    return order, outs, dict(seen_nodes), dict(seen_values)
