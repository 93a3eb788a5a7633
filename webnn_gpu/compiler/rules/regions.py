"""Compiler rule for NCHW graphs: one layout per region, transposes at the region's edges.

An ONNX model is NCHW; one converted from TFLite (tf2onnx) is NCHW around its convolutions
and pools and NHWC around everything else, with a transpose at every change. The engine's
fastest kernels (depthwise, depthwise + projection, squeeze-and-excite, the fused epilogues)
read NHWC. :func:`nhwc_regions` stores the 4-D values of a region in NHWC:

* A *region* is a set of 4-D values joined by operators that can run in either axis order:
  element-wise operators (their broadcast operands re-laid out), conv2d / conv_transpose2d /
  pools / instance normalization through their ``layout`` attributes, batch normalization,
  resample2d, reductions with kept dimensions, softmax, concat, split, slice, pad and expand
  through their axes, and reshapes to the same shape. Transposes between NCHW and NHWC (and
  reshapes that equal one: they move only axes of size 1) join two regions.
* Each region is *kept* (its values stored as they are) or *permuted*: each of its values
  ``v`` is stored as ``transpose(v, [0, 2, 3, 1])``, and its operators are rewritten to
  compute that from their permuted operands (an NCHW conv2d becomes the same conv2d with
  ``input_layout="nhwc"``, a reduction over axes ``[2, 3]`` one over ``[1, 2]``, a constant
  ``[1, C, 1, 1]`` operand the constant ``[1, 1, 1, C]``, ...). A transpose whose two sides
  then hold the same bytes is a view; an operator outside every region, or a graph output,
  reads the value through one transpose back, made once.
* The choice is a search over the regions: starting from every region kept, a region is
  permuted when that lowers the number of kernels the graph runs (transposes, and the copy or
  the two transposes an NCHW conv2d costs), or keeps it equal and runs an NCHW conv2d or pool
  in NHWC (the fusions then see the NHWC kernels).

Transposes and re-laid-out constants move values without arithmetic, and each rewritten
operator computes the same values in another order: results are unchanged. A region holding
an NHWC conv2d or pool, or an operator the rule does not know how to rewrite, is not permuted.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from ..._env import DEBUG
from ..._ir import GraphView, Node, Value

log = logging.getLogger("webnn_gpu")

__all__ = ["nhwc_regions", "plan_regions"]

#: NCHW -> NHWC: stored axis i holds logical axis P[i]
P = (0, 2, 3, 1)
#: NHWC -> NCHW (the inverse): logical axis a is stored at axis Q[a]
Q = (0, 3, 1, 2)

#: attributes a conv2d / conv_transpose2d / pool may carry for the rule to rewrite it (a fused
#: epilogue, input prologue or second output means a rule ran already: leave it)
_CONV_KEYS = {"padding", "strides", "dilations", "groups", "input_layout", "filter_layout", "output_padding",
              "output_sizes"}
_POOL_KEYS = {"window", "padding", "strides", "dilations", "layout", "rounding_type", "output_sizes"}
_POOLS = ("average_pool2d", "l2_pool2d", "max_pool2d")
_REDUCE = ("reduce_l1", "reduce_l2", "reduce_log_sum", "reduce_log_sum_exp", "reduce_max", "reduce_mean",
           "reduce_min", "reduce_product", "reduce_sum", "reduce_sum_square")
#: operators moving values along their axes attributes (one 4-D input, 4-D outputs)
_AXES_OPS = ("softmax", "concat", "split", "slice", "pad", "expand", "resample2d", "batch_normalization",
             "instance_normalization", *_REDUCE)


def _elementwise_ops() -> set[str]:
    from ...ops.elementwise import ELEMENTWISE_OPS

    return set(ELEMENTWISE_OPS) | {"where"}


def _alias(shape, perm) -> bool:
    """Whether ``transpose(x, perm)`` of a ``shape`` tensor moves only axes of size 1 (a view)."""
    moved = [p for p in perm if shape[p] != 1]
    return moved == sorted(moved)


def _permuted(shape, perm=P) -> tuple[int, ...]:
    return tuple(shape[p] for p in perm)


def _is_4d(v) -> bool:
    return v is not None and len(v.shape) == 4


def _transpose_perm(node) -> list[int] | None:
    """The permutation of a 4-D ``transpose``, or of a 4-D ``reshape`` that equals a transpose by
    ``P`` or ``Q`` (it moves only axes of size 1); None for any other node."""
    if len(node.inputs) != 1 or len(node.outputs) != 1 or not _is_4d(node.inputs[0]) or not _is_4d(node.outputs[0]):
        return None
    x, y = node.inputs[0], node.outputs[0]
    if node.op == "transpose":
        return list(node.attrs["permutation"])
    if node.op == "reshape" and tuple(x.shape) != tuple(y.shape):
        for perm in (P, Q):
            if _permuted(x.shape, perm) == tuple(y.shape) and _alias(x.shape, perm):
                return list(perm)
    return None


def _layout_of(node) -> str | None:
    """"nchw" / "nhwc" for an operator with a layout attribute, None for one without."""
    if node.op in ("conv2d", "conv_transpose2d"):
        return node.attrs.get("input_layout", "nchw")
    if node.op in _POOLS:
        return node.attrs.get("layout", "nchw")
    return None


def _region_slots(node, elementwise: set[str]) -> list[int] | None:
    """The input slots of ``node`` holding region values when it can run in either order (its
    4-D outputs join them), or None when it cannot (it reads its operands as they are)."""
    if not node.outputs or not all(_is_4d(o) for o in node.outputs) or node.inputs[0] is None:
        return None
    if not isinstance(node.attrs, dict) or "epilogue" in node.attrs:
        return None
    op, a = node.op, node.attrs
    if op in ("conv2d", "conv_transpose2d"):
        return [0] if set(a) <= _CONV_KEYS and _is_4d(node.inputs[0]) else None
    if op in _POOLS:
        return [0] if set(a) <= _POOL_KEYS and _is_4d(node.inputs[0]) else None
    if op in elementwise:
        if len(node.outputs) != 1:
            return None
        return [i for i, v in enumerate(node.inputs) if _is_4d(v) and v.kind != "constant"]
    if op == "reshape":
        return [0] if tuple(node.inputs[0].shape) == tuple(node.outputs[0].shape) else None
    if op in _REDUCE:
        return [0] if a.get("keep") and _is_4d(node.inputs[0]) else None
    if op == "concat":
        return list(range(len(node.inputs))) if all(_is_4d(v) and v.kind != "constant" for v in node.inputs) else None
    if op == "batch_normalization":
        return [0] if _is_4d(node.inputs[0]) else None
    if op == "instance_normalization":
        return [0] if _is_4d(node.inputs[0]) and list(a.get("axes", [])) in ([2, 3], [1, 2]) else None
    if op in _AXES_OPS:
        return [0] if _is_4d(node.inputs[0]) and len(node.inputs) == 1 else None
    return None


class _Find:
    """Union-find over value ids."""

    def __init__(self):
        self.parent: dict[int, int] = {}

    def add(self, i: int) -> None:
        self.parent.setdefault(i, i)

    def find(self, i: int) -> int:
        root = i
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[i] != root:
            self.parent[i], i = root, self.parent[i]
        return root

    def union(self, i: int, j: int) -> None:
        self.add(i)
        self.add(j)
        self.parent[self.find(i)] = self.find(j)


def _conv_cost(node, context) -> int:
    """Kernels an NCHW conv2d adds over its NHWC form: the two transposes of
    :func:`~webnn_gpu.compiler.rules.nchw.nchw_conv_to_nhwc`, or the NHWC copy of its input the
    NCHW implicit GEMM makes."""
    if node.op != "conv2d":
        return 0
    from ...ops import conv as conv_ops
    from .nchw import NHWC_VARIANTS

    tuning = getattr(context, "_tuning", "default")
    try:
        g = conv_ops._geometry(node)
        nchw = conv_ops._conv_variant(g, "nchw", tuning)
        x, y = node.inputs[0], node.outputs[0]
        nhwc_node = Node("conv2d", [Value(x.data_type, _permuted(x.shape), "op"), *node.inputs[1:]],
                         [Value(y.data_type, _permuted(y.shape), "op")], {**node.attrs, "input_layout": "nhwc"})
        nhwc = conv_ops._conv_variant(conv_ops._geometry(nhwc_node), "nhwc", tuning)
    except Exception:  # noqa: BLE001 - a geometry the kernels do not describe: no saving counted
        return 0
    if nhwc in NHWC_VARIANTS and nchw != nhwc:
        return 2
    if nchw == "gemm" and conv_ops.NCHW_TO_NHWC and (g["C"] // g["G"]) % 4 == 0:
        return 1
    return 0


class _Plan:
    """The regions of a graph and what storing each permuted costs, in kernels."""

    def __init__(self, nodes: list, outputs: dict, context=None):
        self.view = GraphView(nodes, outputs)
        self.elementwise = _elementwise_ops()
        self.find = _Find()
        self.slots: dict[int, list[int]] = {}  # node id -> region slots (nodes that run in either order)
        self.flips: dict[int, list[int]] = {}  # node id -> permutation (transposes joining regions)
        self.flip_nodes: dict[int, Node] = {}
        for node in nodes:
            perm = _transpose_perm(node)
            if perm is not None:
                self.flips[node.id] = perm
                self.flip_nodes[node.id] = node
                self.find.add(node.inputs[0].id)
                self.find.add(node.outputs[0].id)
                continue
            slots = _region_slots(node, self.elementwise)
            if slots is None:
                continue
            self.slots[node.id] = slots
            vals = [node.inputs[i] for i in slots] + list(node.outputs)
            for v in vals:
                self.find.add(v.id)
            for v in vals[1:]:
                self.find.union(vals[0].id, v.id)
        self.values: dict[int, Value] = {}
        for node in nodes:
            for v in [*node.inputs, *node.outputs]:
                if v is not None and v.id in self.find.parent:
                    self.values[v.id] = v
        self.group = {i: self.find.find(i) for i in self.values}
        # which regions may be permuted, and what doing so gains by itself
        self.blocked: set[int] = set()
        self.nchw_ops: dict[int, int] = {}  # region -> NCHW convs / pools in it
        self.conv_gain: dict[int, int] = {}
        for node in nodes:
            if node.id not in self.slots:
                continue
            r = self.group[node.outputs[0].id]
            layout = _layout_of(node)
            if layout == "nhwc":
                self.blocked.add(r)
            elif layout == "nchw":
                self.nchw_ops[r] = self.nchw_ops.get(r, 0) + 1
                self.conv_gain[r] = self.conv_gain.get(r, 0) + _conv_cost(node, context)
            elif node.op == "instance_normalization":
                if list(node.attrs["axes"]) == [1, 2]:
                    self.blocked.add(r)
                else:
                    self.nchw_ops[r] = self.nchw_ops.get(r, 0) + 1
            elif node.op in self.elementwise:
                if any(v is not None and v.data_type in ("int4", "uint4") for v in node.inputs):
                    self.blocked.add(r)
        # the edges: values made outside their region, read outside it, or graph outputs
        self.made_outside: set[int] = set()
        self.read_outside: set[int] = set()
        for vid, v in self.values.items():
            p = self.view.producer(v)
            if p is None or (p.id not in self.slots and p.id not in self.flips):
                self.made_outside.add(vid)
            if self.view.is_output(v):
                self.read_outside.add(vid)
            for c in self.view.consumers(v):
                if c.id in self.flips:
                    continue
                slots = self.slots.get(c.id)
                if slots is None or any(u is v and i not in slots for i, u in enumerate(c.inputs)):
                    self.read_outside.add(vid)
        self.broadcasts: list[tuple[int, Value]] = []  # (region, operand) re-laid out per reader
        for node in nodes:
            if node.id in self.slots and node.op in self.elementwise:
                r = self.group[node.outputs[0].id]
                for i, v in enumerate(node.inputs):
                    if i not in self.slots[node.id] and v is not None and v.size > 1:
                        self.broadcasts.append((r, v))
        self.regions = sorted(set(self.group.values()))

    # ------------------------------------------------------------ cost, in kernels
    def cost(self, permuted: set[int]) -> int:
        """Kernels the graph's layout changes run with the regions ``permuted`` stored NHWC."""
        total = 0
        for node_id, perm in self.flips.items():
            node = self.flip_nodes[node_id]
            a = self.group[node.inputs[0].id] in permuted
            b = self.group[node.outputs[0].id] in permuted
            s = _stored_perm(perm, a, b)
            stored = _permuted(node.inputs[0].shape) if a else node.inputs[0].shape
            total += 0 if s == [0, 1, 2, 3] or _alias(stored, s) else 1
        for vid in self.made_outside:
            if self.group[vid] in permuted:
                v = self.values[vid]
                total += 0 if _host(v) or _alias(v.shape, P) else 1
        for vid in self.read_outside - self.made_outside:  # (a value made outside is there as it is)
            if self.group[vid] in permuted:
                v = self.values[vid]
                total += 0 if _alias(_permuted(v.shape), Q) else 1
        for r, v in self.broadcasts:
            if r in permuted and not _host(v):
                total += 0 if _alias(_padded(v.shape), P) else 1
        for r, gain in self.conv_gain.items():
            if r not in permuted:
                total += gain
        return total

    def choose(self) -> set[int]:
        """The regions to permute: from none, add one at a time while the kernel count falls
        (or stays and the region runs an NCHW conv2d or pool)."""
        permuted: set[int] = set()
        best = self.cost(permuted)
        candidates = [r for r in self.regions if r not in self.blocked]
        changed = True
        while changed:
            changed = False
            for r in candidates:
                if r in permuted:
                    continue
                c = self.cost(permuted | {r})
                if c < best or (c == best and self.nchw_ops.get(r)):
                    permuted.add(r)
                    best = c
                    changed = True
        return permuted


def _host(v: Value) -> bool:
    """Whether ``v`` is a constant whose data the rule can re-lay out on the host."""
    return v.kind == "constant" and v.data is not None and v.data_type not in ("int4", "uint4")


def _padded(shape) -> tuple[int, ...]:
    return (1,) * (4 - len(shape)) + tuple(shape)


def _stored_perm(perm, a: bool, b: bool) -> list[int]:
    """The permutation from a transpose's stored input to its stored output, when its input is
    stored permuted (``a``) or not and its output likewise (``b``)."""
    inv_a = Q if a else (0, 1, 2, 3)
    bb = P if b else (0, 1, 2, 3)
    return [inv_a[perm[bb[i]]] for i in range(4)]


def plan_regions(nodes: list, outputs: dict, context=None) -> tuple[_Plan, set[int]]:
    """The regions of ``nodes`` and those :func:`nhwc_regions` stores NHWC (for tests and
    debugging): ``(plan, permuted region ids)``."""
    plan = _Plan(nodes, outputs, context)
    return plan, plan.choose()


def nhwc_regions(nodes: list, outputs: dict, context=None) -> list:
    """Store the 4-D values of NCHW regions in NHWC, moving the transposes to the regions' edges.

    Pattern: the regions of values joined by operators that run in either axis order (see the
    module's docstring), between transposes by ``[0, 2, 3, 1]`` / ``[0, 3, 1, 2]`` (or the
    reshapes equal to them), graph inputs and outputs, and other operators. A region is stored
    permuted when that lowers the graph's kernel count, or keeps it and runs an NCHW conv2d or
    pool in NHWC. Its operators are rewritten for the stored order (layouts, axes, broadcast
    constants re-laid out on the host); transposes whose sides then agree become views; a value
    read outside its region (or a graph output) gets one transpose back. Not permuted: a region
    with an NHWC conv2d or pool, or an element-wise operand of rank above 4."""
    plan, permuted = plan_regions(nodes, outputs, context)
    if not permuted:
        return nodes
    return _Rewrite(plan, permuted).run(nodes, outputs)


class _Rewrite:
    """Rewrites a node list for a choice of permuted regions."""

    def __init__(self, plan: _Plan, permuted: set[int]):
        self.plan = plan
        self.permuted = permuted
        self.stored: dict[int, Value] = {}  # value id -> its permuted twin
        self.logical: set[int] = set()  # ids of permuted values recomputed in their own order
        self.subst: dict[int, Value] = {}  # value id -> the value holding the same bytes (a dropped view)
        self.out_ids: set[int] = set()
        self.out: list[Node] = []

    def is_perm(self, v) -> bool:
        return v is not None and v.id in self.plan.group and self.plan.group[v.id] in self.permuted

    def to_stored(self, v: Value, label: str) -> Value:
        """``v``'s permuted twin, made where first needed."""
        if v.id in self.stored:
            return self.stored[v.id]
        if _host(v):
            assert v.data is not None  # (_host)
            data = np.ascontiguousarray(v.data.reshape(v.shape).transpose(P)).reshape(-1)
            t = Value(v.data_type, _permuted(v.shape), "constant", data=data)
        else:
            t = Value(v.data_type, _permuted(v.shape), "op")
            node = Node("transpose", [v], [t], {"permutation": list(P), "alias": _alias(v.shape, P)}, label)
            t.producer = node
            self.out.append(node)
        self.stored[v.id] = t
        self.logical.add(v.id)  # (made outside the region: its own value stays computed)
        return t

    def to_logical(self, v: Value, label: str) -> Value:
        """``v`` itself, recomputed from its permuted twin where first needed (the original
        value object, so every reader outside the region and the graph outputs keep it)."""
        if v.id not in self.logical:
            t = self.stored[v.id]
            self.out.append(Node("transpose", [t], [v], {"permutation": list(Q), "alias": _alias(t.shape, Q)}, label))
            self.logical.add(v.id)
        return v

    def new_out(self, v: Value) -> Value:
        t = Value(v.data_type, _permuted(v.shape), "op")
        self.stored[v.id] = t
        return t

    def broadcast(self, v: Value, label: str) -> Value:
        """A broadcast operand (a constant, or of lower rank) laid out for a permuted reader."""
        if v.size == 1:
            return v
        shape = _padded(v.shape)
        if _host(v):
            assert v.data is not None  # (_host)
            data = np.ascontiguousarray(v.data.reshape(shape).transpose(P)).reshape(-1)
            return Value(v.data_type, _permuted(shape), "constant", data=data)
        x = v
        if len(v.shape) != 4:
            x = Value(v.data_type, shape, "op")
            self.out.append(Node("reshape", [v], [x], {"alias": True}, label))
        t = Value(v.data_type, _permuted(shape), "op")
        self.out.append(Node("transpose", [x], [t], {"permutation": list(P), "alias": _alias(shape, P)}, label))
        return t

    def run(self, nodes: list, outputs: dict) -> list:
        plan = self.plan
        self.out_ids = {v.id for v in outputs.values()}
        for node in nodes:
            if node.id in plan.flips:
                self._flip(node)
            elif node.id in plan.slots and self.is_perm(node.outputs[0]):
                self._permute(node)
            else:
                inputs = [self.to_logical(v, node.label) if self.is_perm(v) and v.id not in self.logical
                          and v.id in self.stored else self.subst.get(v.id, v) if v is not None else v
                          for v in node.inputs]
                self.out.append(node if all(a is b for a, b in zip(inputs, node.inputs)) else
                                Node(node.op, inputs, list(node.outputs), node.attrs, node.label))
        for v in outputs.values():
            if self.is_perm(v) and v.id not in self.logical and v.id in self.stored:
                self.to_logical(v, "")
        if DEBUG >= 2:
            log.debug("nhwc_regions: %d regions stored NHWC", len(self.permuted))
        return self.out

    def _flip(self, node) -> None:
        x, y = node.inputs[0], node.outputs[0]
        a, b = self.is_perm(x), self.is_perm(y)
        if not a and not b:
            self.out.append(node if x.id not in self.subst else
                            Node(node.op, [self.subst[x.id]], [y], node.attrs, node.label))
            return
        src = self.to_stored(x, node.label) if a else self.subst.get(x.id, x)
        dst = self.new_out(y) if b else y
        s = _stored_perm(self.plan.flips[node.id], a, b)
        if s == [0, 1, 2, 3] and (b or y.id not in self.out_ids):
            # the two sides hold the same bytes: a view, dropped (readers take ``src``)
            if b:
                self.stored[y.id] = src
            else:
                self.subst[y.id] = src
            return
        if s == [0, 1, 2, 3]:
            new = Node("reshape", [src], [dst], {"alias": True}, node.label)
        else:
            new = Node("transpose", [src], [dst], {"permutation": s, "alias": _alias(src.shape, s)}, node.label)
        if b:
            dst.producer = new  # (a value of its own: the graph's keep theirs)
        self.out.append(new)

    def _permute(self, node) -> None:
        slots = self.plan.slots[node.id]
        inputs: list[Any] = []
        if node.op == "reshape":  # to the same shape: a view, dropped (readers take its input's twin)
            self.stored[node.outputs[0].id] = self.to_stored(node.inputs[0], node.label)
            return
        for i, v in enumerate(node.inputs):
            if i in slots:
                inputs.append(self.to_stored(v, node.label))
            elif v is not None and node.op in self.plan.elementwise:
                inputs.append(self.broadcast(self.subst.get(v.id, v), node.label))
            else:
                inputs.append(self.subst.get(v.id, v) if v is not None else v)
        outs = [self.new_out(o) for o in node.outputs]
        new = Node(node.op, inputs, outs, _attrs(node), node.label)
        for o in outs:
            o.producer = new
        self.out.append(new)


def _attrs(node) -> dict[str, Any]:
    """``node``'s attributes for its operands and outputs stored permuted by ``P``."""
    a = dict(node.attrs)
    op = node.op
    if op in ("conv2d", "conv_transpose2d"):
        a["input_layout"] = "nhwc"
    elif op in _POOLS:
        a["layout"] = "nhwc"
    elif op in _REDUCE:
        a["axes"] = sorted(Q[d] for d in a["axes"])
    elif op == "resample2d":
        a["axes"] = [Q[d] for d in a["axes"]]
    elif op in ("softmax", "concat", "split", "batch_normalization"):
        a["axis"] = Q[a["axis"]]
    elif op == "instance_normalization":
        a["axes"] = sorted(Q[d] for d in a["axes"])
        a["param_axes"] = [Q[d] for d in a["param_axes"]]
    elif op == "slice":
        a["starts"] = [a["starts"][p] for p in P]
        a["strides"] = [a["strides"][p] for p in P]
    elif op == "pad":
        a["beginning_padding"] = [a["beginning_padding"][p] for p in P]
        a["ending_padding"] = [a["ending_padding"][p] for p in P]
    return a
