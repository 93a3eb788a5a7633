"""A pointwise conv2d reading a depthwise + projection kernel's output, attached to that kernel.

On lavapipe a launch costs 45-70 us of wall time whatever it computes, and a 1x1 conv after a
depthwise + projection pair re-reads the whole output the pair has just stored. The channel-lane
kernel (``conv/depthwise_project_lanes.wgsl``) holds all of a pixel's projected channels in one
subgroup, so it can compute such a conv as a second stage and store both outputs.
"""

from __future__ import annotations

import logging

from ..._env import DEBUG
from ..._ir import GraphView, Node
from ._common import _max_bindings

log = logging.getLogger("webnn_gpu")


def fuse_project_consumer(nodes: list, outputs: dict, context=None) -> list:
    """A ``depthwise_project`` node (a depthwise conv2d and its pointwise projection, no
    expansion) and a 1x1 conv2d reading its output (stride 1, no padding, one group, a constant
    filter, an epilogue reading operands only per channel; :func:`webnn_gpu.ops.conv.consumer_ok`)
    become one ``depthwise_project`` node with ``attrs["consumer"]`` (the conv) and two outputs,
    the projection's and the conv's. The projection's output may have other readers or be a
    graph output (the kernel stores it too). The lowering computes the conv as the channel-lane
    kernel's second stage where that kernel runs the pair and the stage fits, and lowers it as
    its own conv2d otherwise (:func:`webnn_gpu.ops.conv.lower_depthwise_project`).

    The node stands in the pair's place: the conv's other operands must be constants or graph
    inputs (ready there). Near misses: a conv with other attributes (a rule's mark), a
    computed filter, a conv reading the output as another operand too, operands computed by
    other nodes, more storage bindings than the device allows, a pair with an expansion, a pool
    output or a transposed projection, channels not a multiple of 4.
    """
    from ...ops.conv import consumer_ok, dwp_lanes

    tuning = getattr(context, "_tuning", "default")
    lanes = dwp_lanes(tuning, getattr(context, "_subgroup", 0))
    if not lanes:
        return nodes
    limit = _max_bindings(context)
    g = GraphView(nodes, outputs)
    replaced: dict[int, Node] = {}
    dropped: set[int] = set()
    for node in nodes:
        if node.op != "depthwise_project" or len(node.outputs) != 1:
            continue
        for conv in g.consumers(node.outputs[0]):
            if conv.id in dropped or not consumer_ok(node, conv, tuning, lanes):
                continue
            if any(v is not None and v.kind == "op" for v in conv.inputs[1:]):
                continue
            inputs = list(node.inputs)
            for v in conv.inputs[1:]:
                if v is not None and all(v is not u for u in inputs):
                    inputs.append(v)
            # the kernel binds the pair's operands and the consumer's (an operand both epilogues
            # read is bound once for each) and both outputs
            if len(node.inputs) + sum(v is not None for v in conv.inputs[1:]) + 2 > limit:
                continue
            label = "+".join(s for s in (node.label, conv.label) if s)
            replaced[node.id] = Node(node.op, inputs, [node.outputs[0], conv.outputs[0]],
                                     {**node.attrs, "consumer": conv}, label)
            dropped.add(conv.id)
            if DEBUG >= 2:
                log.debug("fuse_project_consumer: %s", label)
            break
    return g.replace(replaced, dropped)
