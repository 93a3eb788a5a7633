"""The graph IR: :class:`Value`, :class:`Node` and :class:`GraphView`.

The builder records a graph as a list of :class:`Node` (in a valid topological order) over
:class:`Value`; the compiler's rules (:mod:`webnn_gpu.compiler`) read it through a
:class:`GraphView` and return a new node list, never changing the one they receive. This
module imports nothing of the builder, the operators or the compiler (``python -c "import
webnn_gpu._ir"`` loads only NumPy and the validation helpers).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import _validate as V

_ids = itertools.count()


@dataclass(eq=False)
class Value:
    """One tensor value of the graph IR: its type, and what produces it."""

    data_type: str
    shape: tuple[int, ...]
    kind: str  # "input", "constant" or "op"
    name: str = ""  # input name
    data: np.ndarray | None = None  # constant data (flat, its NumPy dtype)
    tensor: Any = None  # constant MLTensor (create_constant_tensor)
    #: the node the builder recorded for it (error messages name it); the compiler's rules
    #: never change it: :meth:`GraphView.producer` gives the producer in a rewritten graph
    producer: Node | None = None
    id: int = field(default_factory=lambda: next(_ids))

    @property
    def size(self) -> int:
        """Element count."""
        return V.element_count(self.shape)

    def __repr__(self) -> str:
        return f"%{self.id}:{self.data_type}{list(self.shape)}"


@dataclass(eq=False)
class Node:
    """One operator application of the graph IR."""

    op: str
    #: operand values in the op's positional order; ``None`` stands for an absent optional
    #: operand (e.g. a normalization's scale). Typed ``Any`` so lowerings of ops without
    #: optional operands need no narrowing.
    inputs: list[Any]
    outputs: list[Value]
    #: the operator's attributes: a dict, or for a fused operator of :mod:`webnn_gpu.fusions`
    #: its typed attribute dataclass (a read-only mapping)
    attrs: Any
    label: str = ""
    id: int = field(default_factory=lambda: next(_ids))

    def __repr__(self) -> str:
        return f"{self.op}({', '.join(map(repr, self.inputs))}) -> {self.outputs}"


class GraphView:
    """Read-only queries over one node list and its graph outputs, built once.

    Arguments:
        nodes (Sequence[Node]): the graph's nodes in a valid order.
        outputs (Mapping[str, Value]): the graph's named outputs.

    The view does not copy the nodes and never changes them; :meth:`replace` makes the node
    list of a rewritten graph.
    """

    __slots__ = ("nodes", "outputs", "_producer", "_consumers", "_out_ids")

    def __init__(self, nodes: Sequence[Node], outputs: Mapping[str, Value]):
        self.nodes = list(nodes)
        self.outputs = outputs
        self._producer: dict[int, Node] = {}
        self._consumers: dict[int, list[Node]] = {}
        for node in self.nodes:
            for v in {v.id: v for v in node.inputs if v is not None}.values():
                self._consumers.setdefault(v.id, []).append(node)
            for v in node.outputs:
                self._producer[v.id] = node
        self._out_ids = {v.id for v in outputs.values()}

    def producer(self, v: Value | None) -> Node | None:
        """The node of this graph computing ``v`` (None for an input, a constant, or None)."""
        return None if v is None else self._producer.get(v.id)

    def consumers(self, v: Value | None) -> list[Node]:
        """The distinct nodes reading ``v``, in graph order (a graph output is not a node)."""
        return [] if v is None else list(self._consumers.get(v.id, ()))

    def is_output(self, v: Value | None) -> bool:
        """Whether ``v`` is one of the graph's outputs."""
        return v is not None and v.id in self._out_ids

    def sole_consumer(self, v: Value | None) -> Node | None:
        """The one node reading ``v`` when it is read by exactly one node and is no graph
        output (so a rule may fold ``v`` into that node), else None."""
        cs = self._consumers.get(v.id, ()) if v is not None else ()
        if len(cs) != 1 or self.is_output(v):
            return None
        return cs[0]

    def uses(self, v: Value) -> int:
        """Distinct readers of ``v``: its consumer nodes, plus one when it is a graph output."""
        return len(self._consumers.get(v.id, ())) + (v.id in self._out_ids)

    def replace(self, replaced: Mapping[int, Node | Sequence[Node]] | None = None,
                dropped: Iterable[int] = ()) -> list[Node]:
        """A new node list: each node whose id is in ``replaced`` swapped for its new node (or
        nodes, in that order), those in ``dropped`` left out, the rest in their order. The
        view's own list is not changed; with nothing to replace or drop it is returned as is.

        Arguments:
            replaced (Mapping[int, Node | Sequence[Node]] | None): node id -> new node(s).
            dropped (Iterable[int]): ids of nodes to leave out.

        Returns:
            list[Node]: the rewritten node list.
        """
        replaced = replaced or {}
        dropped = set(dropped)
        if not replaced and not dropped:
            return self.nodes
        result: list[Node] = []
        for n in self.nodes:
            if n.id in dropped:
                continue
            new = replaced.get(n.id, n)
            if isinstance(new, Node):
                result.append(new)
            else:
                result.extend(new)
        return result
