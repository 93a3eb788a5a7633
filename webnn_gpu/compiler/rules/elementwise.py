"""Element-wise rules: the hard-swish sequence as one op, chains of element-wise nodes as one
``fused_elementwise`` kernel."""

from __future__ import annotations

from ..._ir import GraphView, Node
from ._common import _const_all


def fuse_hard_swish(nodes: list, outputs: dict, context=None) -> list:
    """Rewrite ``x * clamp(x + 3, 0, 6) / 6`` as one ``hard_swish(x)`` node.

    Matched forms (float data; constants may be scalars or any broadcast shape that leaves
    the shape of ``x`` unchanged): ``add(x, 3)`` (either order) -> ``clamp(0, 6)`` ->
    ``mul`` with ``x`` (either order) -> ``div(., 6)`` or ``mul(., 1/6)``; or the division
    applied to the clamp before the multiply. Every intermediate must have only its one
    consumer in the pattern and not be a graph output. ``hard_swish`` computes
    ``x * clamp(x + 3, 0, 6) / 6`` in that order, so the first form is bit-exact.
    """
    g = GraphView(nodes, outputs)

    def only(v, op):
        """The single consumer of ``v`` when it has op ``op`` and ``v`` is no output."""
        c = g.sole_consumer(v)
        if c is None or c.op != op:
            return None
        return c

    def other(node, v):
        a, b = node.inputs
        return b if a is v else a if b is v else None

    def is_sixth(node, v):  # node is div(v, 6) or mul(v, 1/6) / mul(1/6, v)
        if node.op == "div":
            return node.inputs[0] is v and _const_all(node.inputs[1], 6.0)
        if node.op == "mul":
            c = other(node, v)
            return c is not None and c is not v and _const_all(c, 1.0 / 6.0, rel=1e-6)
        return False

    def same_shape(node, x):
        return tuple(node.outputs[0].shape) == tuple(x.shape) and node.outputs[0].data_type == x.data_type

    removed: set[int] = set()
    replaced: dict[int, Node] = {}  # id of the last node of a match -> its hard_swish node
    for add in nodes:
        if add.op != "add" or add.id in removed or add.outputs[0].data_type not in ("float32", "float16"):
            continue
        x = None
        for cand in add.inputs:
            c = other(add, cand)
            if c is not None and c is not cand and _const_all(c, 3.0) and same_shape(add, cand):
                x = cand
        if x is None:
            continue
        clamp = only(add.outputs[0], "clamp")
        if clamp is None or clamp.attrs.get("min_value") != 0.0 or clamp.attrs.get("max_value") != 6.0:
            continue
        c_out = clamp.outputs[0]
        nxt = g.sole_consumer(c_out)
        if nxt is None:
            continue
        if nxt.op == "mul" and other(nxt, c_out) is x and same_shape(nxt, x):
            c2 = g.sole_consumer(nxt.outputs[0])
            if c2 is None or not is_sixth(c2, nxt.outputs[0]):
                continue
            chain, last = [add, clamp, nxt], c2
        elif is_sixth(nxt, c_out):
            c2 = g.sole_consumer(nxt.outputs[0])
            if c2 is None or c2.op != "mul" or other(c2, nxt.outputs[0]) is not x:
                continue
            chain, last = [add, clamp, nxt], c2
        else:
            continue
        if not same_shape(last, x):
            continue
        removed.update(n.id for n in chain)
        replaced[last.id] = Node("hard_swish", [x], list(last.outputs), {}, last.label or add.label)
    return g.replace(replaced, removed)


def fuse_swish(nodes: list, outputs: dict, context=None) -> list:
    """Rewrite ``mul(x, sigmoid(x))`` (either order) as one ``swish(x)`` node (SiLU; an
    operator of the compiler, ``x * sigmoid(x)`` in float32 as the two nodes computed it:
    the same roundings). ``x`` has two readers in the decomposed form, so an epilogue chain
    stops there and the pair ran as an element-wise kernel of its own; ``swish`` is one
    epilogue step of the kernel making ``x``. The sigmoid's value must be read by the mul
    alone and be no graph output; float data of one shape. (TFLite's converter writes Keras'
    ``swish`` / ``silu`` activation, EfficientNet's, as ``LOGISTIC`` and ``MUL``.)
    """
    g = GraphView(nodes, outputs)
    replaced: dict[int, Node] = {}
    dropped: set[int] = set()
    for sig in nodes:
        if sig.op != "sigmoid" or len(sig.inputs) != 1 or sig.outputs[0].data_type not in ("float32", "float16"):
            continue
        x, s = sig.inputs[0], sig.outputs[0]
        mul = g.sole_consumer(s)
        if mul is None or mul.op != "mul" or len(mul.inputs) != 2 or mul.id in replaced:
            continue
        a, b = mul.inputs
        if {a.id, b.id} != {x.id, s.id} or a is b:
            continue
        y = mul.outputs[0]
        if tuple(y.shape) != tuple(x.shape) or y.data_type != x.data_type or tuple(s.shape) != tuple(x.shape):
            continue
        replaced[mul.id] = Node("swish", [x], [y], {}, mul.label or sig.label)
        dropped.add(sig.id)
    return g.replace(replaced, dropped) if replaced else nodes


#: element-wise inputs a fused kernel may bind (plus its output); the default WebGPU limit is 8
MAX_FUSED_INPUTS = 7


def fuse_elementwise(nodes: list, outputs: dict, context=None) -> list:
    """Merge each element-wise node into its single element-wise consumer of the same shape
    (a ``where`` of float32, float16, int32 or uint32 values counts as element-wise here).

    The result is a ``fused_elementwise`` node whose ``attrs["program"]`` is a list of steps
    ``(original node, [("in", k) | ("step", j), ...])`` over its external inputs ``inputs``.
    A producer is fused only when its only consumer is that node, its value is not a graph
    output, and it has the consumer's shape. Single-step programs stay as the original node.
    """
    from ...ops.elementwise import FUSIBLE, WHERE_FUSIBLE

    def fusible(node) -> bool:
        """An element-wise node, or a ``where`` of 32- or 16-bit values (a select of compute types)."""
        if node.op == "where":
            return node.outputs[0].data_type in WHERE_FUSIBLE and node.inputs[0].data_type == "uint8"
        return node.op in FUSIBLE

    max_inputs = MAX_FUSED_INPUTS
    if context is not None:
        max_inputs = max(1, int(context.limits.get("max-storage-buffers-per-shader-stage", 8)) - 1)
    g = GraphView(nodes, outputs)
    programs: dict[int, tuple[list, list]] = {}  # value id -> (external inputs, program)
    owner: dict[int, object] = {}  # value id -> node kept in the result for it
    result: list = []
    for node in nodes:
        if not fusible(node):
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
            if v.id in programs and g.sole_consumer(v) is not None and v.shape == out.shape:
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

