"""Hand-made graph IR for GPU-free rule tests (no context, no builder)."""

from __future__ import annotations

import numpy as np

from webnn_gpu._ir import Node, Value


class IR:
    """Records nodes like the builder does, with shapes given by the test."""

    def __init__(self, data_type: str = "float32"):
        self.dt = data_type
        self.nodes: list[Node] = []

    def input(self, shape) -> Value:
        return Value(self.dt, tuple(shape), "input", name=f"in{len(self.nodes)}")

    def const(self, data, shape=None) -> Value:
        arr = np.asarray(data, dtype=np.float16 if self.dt == "float16" else np.float32)
        shape = tuple(arr.shape if shape is None else shape)
        return Value(self.dt, shape, "constant", data=arr.reshape(-1).copy())

    def op(self, op: str, inputs, shape=None, label: str = "", **attrs) -> Value:
        """Append ``op`` over ``inputs``; its output has ``shape`` (default: the broadcast of
        the inputs' shapes)."""
        if shape is None:
            shape = np.broadcast_shapes(*[tuple(v.shape) for v in inputs])
        out = Value(self.dt, tuple(shape), "op")
        node = Node(op, list(inputs), [out], attrs, label or op)
        out.producer = node
        self.nodes.append(node)
        return out

    def mean(self, x: Value, axes) -> Value:
        shape = tuple(1 if a in axes else d for a, d in enumerate(x.shape))
        return self.op("reduce_mean", [x], shape, axes=list(axes), keep=True)
