"""Compiler passes over the graph IR, run by ``MLGraphBuilder.build``.

Each pass takes and returns the node list (in a valid topological order). Passes:

* :func:`dead_code`: keep only nodes that contribute to an output.
* :func:`fuse_elementwise`: chains of element-wise nodes become one ``fused_elementwise``
  node (one kernel, no intermediate buffers).

Views (reshape) cost nothing at run time: their lowering aliases the input's buffer.
"""

from __future__ import annotations

import logging

from ._env import DEBUG

log = logging.getLogger("webnn_gpu")


def dead_code(nodes: list, outputs: dict, context=None) -> list:
    """Drop nodes whose results no output needs."""
    needed = {v.id for v in outputs.values()}
    keep = []
    for node in reversed(nodes):
        if any(o.id in needed for o in node.outputs):
            keep.append(node)
            needed.update(v.id for v in node.inputs if v is not None)
    return keep[::-1]


def _consumers(nodes: list, outputs: dict) -> dict[int, int]:
    """Value id -> number of distinct consumers (a graph output counts as one)."""
    uses: dict[int, int] = {}
    for node in nodes:
        for vid in {v.id for v in node.inputs if v is not None}:
            uses[vid] = uses.get(vid, 0) + 1
    for v in outputs.values():
        uses[v.id] = uses.get(v.id, 0) + 1
    return uses


#: element-wise inputs a fused kernel may bind (plus its output); the default WebGPU limit is 8
MAX_FUSED_INPUTS = 7


def fuse_elementwise(nodes: list, outputs: dict, context=None) -> list:
    """Merge each element-wise node into its single element-wise consumer of the same shape.

    The result is a ``fused_elementwise`` node whose ``attrs["program"]`` is a list of steps
    ``(original node, [("in", k) | ("step", j), ...])`` over its external inputs ``inputs``.
    A producer is fused only when its only consumer is that node, its value is not a graph
    output, and it has the consumer's shape. Single-step programs stay as the original node.
    """
    from .builder import Node
    from .ops.elementwise import FUSIBLE

    max_inputs = MAX_FUSED_INPUTS
    if context is not None:
        max_inputs = max(1, int(context.limits.get("max-storage-buffers-per-shader-stage", 8)) - 1)
    uses = _consumers(nodes, outputs)
    out_ids = {v.id for v in outputs.values()}
    programs: dict[int, tuple[list, list]] = {}  # value id -> (external inputs, program)
    owner: dict[int, object] = {}  # value id -> node kept in the result for it
    result: list = []
    for node in nodes:
        if node.op not in FUSIBLE:
            result.append(node)
            continue
        out = node.outputs[0]
        ext: list = []
        program: list = []
        inlined: dict[int, int] = {}  # producer value id -> its step index in `program`
        refs = []

        def ext_index(v):
            for i, e in enumerate(ext):
                if e.id == v.id:
                    return i
            ext.append(v)
            return len(ext) - 1

        for v in node.inputs:
            if v.id in inlined:
                refs.append(("step", inlined[v.id]))
                continue
            if v.id in programs and uses.get(v.id) == 1 and v.id not in out_ids and v.shape == out.shape:
                g_ext, g_prog = programs[v.id]
                offset = len(program)
                remap = [ext_index(x) for x in g_ext]
                for step_node, step_refs in g_prog:
                    program.append((step_node, [("in", remap[k]) if kind == "in" else ("step", k + offset)
                                                for kind, k in step_refs]))
                inlined[v.id] = len(program) - 1
                refs.append(("step", len(program) - 1))
            else:
                refs.append(("in", ext_index(v)))
        if len(ext) > max_inputs:  # too many bindings: keep this node on its own
            inlined = {}
            ext, program = [], []
            refs = [("in", ext_index(v)) for v in node.inputs]
        program.append((node, refs))
        programs[out.id] = (ext, program)
        for vid in inlined:
            result.remove(owner.pop(vid))
        if len(program) == 1:
            kept = node
        else:
            labels = [step.label for step, _ in program if step.label]
            kept = Node("fused_elementwise", list(ext), [out], {"program": program}, "+".join(labels))
        owner[out.id] = kept
        result.append(kept)
    return result


PASSES = [dead_code, fuse_elementwise]


def run_passes(nodes: list, outputs: dict, context=None) -> list:
    """Run every pass of :data:`PASSES` in order."""
    for p in PASSES:
        nodes = p(nodes, outputs, context)
    if DEBUG >= 1:
        log.info("graph after passes (%d nodes):\n%s", len(nodes), "\n".join(map(repr, nodes)))
    return nodes
