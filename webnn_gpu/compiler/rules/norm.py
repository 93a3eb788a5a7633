"""Compiler rule for normalizations with known statistics: a batch normalization after a kernel
that hosts epilogues becomes that kernel's epilogue steps.

Same contract as the other rules of :mod:`webnn_gpu.compiler`: ``(nodes, outputs, context=None)
-> nodes``, never mutating a node it receives, firing only where the result is the same.
"""

from __future__ import annotations

import logging

import numpy as np

from ..._env import DEBUG
from ..._ir import GraphView, Node, Value

log = logging.getLogger("webnn_gpu")

__all__ = ["split_batch_norm"]


def _host_data(v) -> bool:
    return v is not None and v.kind == "constant" and v.data is not None and v.data_type == "float32"


def split_batch_norm(nodes: list, outputs: dict, context=None) -> list:
    """``batch_normalization(x, mean, variance, scale, bias)`` with constant float32 statistics
    (and scale and bias, when given), ``x`` made by a kernel that hosts epilogues (a conv2d,
    matmul, ...) or by an element-wise operator (the end of such a kernel's epilogue chain, or
    of a chain :func:`~webnn_gpu.compiler.rules.elementwise.fuse_elementwise` merges) and read
    by nothing else, becomes ``add(mul(div(sub(x, mean), d), scale),
    bias)`` with ``d = sqrt(variance + epsilon)`` computed on the host in float32 and each
    operand a per-channel constant shaped for the normalization's axis: the steps
    ``norm/normalize.wgsl`` computes, in its order and in float32, which
    :func:`~webnn_gpu.compiler.rules.epilogue.fuse_epilogue` then gives the producing kernel
    as its epilogue, or ``fuse_elementwise`` merges into the chain's kernel (ONNX models
    normalize after each convolution: one kernel less each).

    Not split: float16 graphs (``d`` would be rounded to float16), statistics that are graph
    inputs or computed, an ``x`` read elsewhere, a graph output, or made by another kernel
    (the normalization kernel is then as cheap as the element-wise one)."""
    from ...ops import _epilogue
    from ...ops.elementwise import FUSIBLE

    view = GraphView(nodes, outputs)
    replaced: dict[int, list[Node]] = {}
    for bn in nodes:
        if bn.op != "batch_normalization" or not isinstance(bn.attrs, dict) or bn.attrs.get("epilogue"):
            continue
        x, mean, var, scale, bias = (list(bn.inputs) + [None] * 5)[:5]
        y = bn.outputs[0]
        if (len(bn.inputs) > 5 or y.data_type != "float32" or not _host_data(mean) or not _host_data(var)
                or (scale is not None and not _host_data(scale)) or (bias is not None and not _host_data(bias))):
            continue
        p = view.producer(x)
        reader = view.sole_consumer(x)
        if p is None or not (_epilogue.hosts(p) or p.op in FUSIBLE) or reader is None or reader.id != bn.id:
            continue
        axis = bn.attrs["axis"]
        shape = tuple(d if i == axis else 1 for i, d in enumerate(x.shape))

        def const(data) -> Value:
            return Value("float32", shape, "constant", data=np.ascontiguousarray(data, dtype=np.float32))

        eps = np.float32(bn.attrs["epsilon"])
        d = np.sqrt(var.data.astype(np.float32) + eps, dtype=np.float32)
        steps: list[tuple[str, Value]] = [("sub", const(mean.data)), ("div", const(d))]
        if scale is not None:
            steps.append(("mul", const(scale.data)))
        if bias is not None:
            steps.append(("add", const(bias.data)))
        chain: list[Node] = []
        v = x
        for i, (op, operand) in enumerate(steps):
            out = y if i == len(steps) - 1 else Value("float32", tuple(x.shape), "op")
            node = Node(op, [v, operand], [out], {}, bn.label)
            if out is not y:
                out.producer = node
            chain.append(node)
            v = out
        replaced[bn.id] = chain
        if DEBUG >= 2:
            log.debug("split_batch_norm: batch_normalization [%s] as %d steps after %s [%s]", bn.label,
                      len(chain), p.op, p.label)
    return view.replace(replaced) if replaced else nodes
