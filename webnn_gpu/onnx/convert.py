"""Walk an ONNX graph and emit WebNN builder calls (the conversion state).

Each ONNX value is held either as a NumPy array (known at load time: an initializer, a
``Constant``, or something computed from shapes by :mod:`.fold`) or as an
``MLOperand``. Handlers in :mod:`.ops` turn one node into builder calls; they turn known
values into ``builder.constant`` operands only where an operator needs an operand.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ..errors import MLTypeError, NotSupportedError, WebNNError
from .fold import fold
from .reader import ONNX_TO_WEBNN, TYPE_NAMES
from .rewrite import rewrite

__all__ = ["Converter", "Converted", "Unsupported", "GRAPH_DTYPES"]

GRAPH_DTYPES = ("float32", "float16")
DEFAULT_DOMAINS = ("", "ai.onnx")


class Unsupported(Exception):
    """Raised by a handler: this node cannot be expressed exactly (collected, then reported)."""


class _Failed:
    """The value of an output of a node that could not be converted."""


FAILED = _Failed()


@dataclasses.dataclass
class Node:
    """One ONNX node as handlers see it."""

    name: str
    op: str
    domain: str
    since: int  # the operator version this node follows (its schema's since_version)
    attrs: dict
    inputs: list[str]
    outputs: list[str]
    proto: Any = None

    def attr(self, key, default=None):
        """An attribute's value, or ``default``."""
        return self.attrs.get(key, default)

    def where(self) -> str:
        return f"node {self.name!r} ({self.qualified}, opset {self.since})"

    @property
    def qualified(self) -> str:
        return self.op if self.domain in DEFAULT_DOMAINS else f"{self.domain}.{self.op}"


@dataclasses.dataclass
class Converted:
    """What :meth:`Converter.run` produced."""

    outputs: dict[str, Any]
    inputs: dict[str, dict[str, Any]]
    op_counts: dict[str, int]
    bool_inputs: list[str]
    bool_outputs: list[str]


def _attr_value(a) -> Any:
    from onnx import helper, numpy_helper

    if a.type == a.TENSOR:
        return numpy_helper.to_array(a.t)
    if a.type == a.GRAPH:
        return a.g
    v = helper.get_attribute_value(a)
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, list) and v and isinstance(v[0], bytes):
        return [s.decode() for s in v]
    return v


def _non_unit(shape) -> tuple[int, ...]:
    return tuple(int(d) for d in shape if d != 1)


class Converter:
    """The state of one conversion."""

    def __init__(self, model, builder, dtype: str, dims: dict | None, custom_ops: dict | None,
                 known_inputs: dict | None = None) -> None:
        self.model = model
        self.b = builder
        self.dtype = dtype
        self.dims = dict(dims or {})
        self.custom_ops = dict(custom_ops or {})
        self.known_inputs = dict(known_inputs or {})
        self.env: dict[str, Any] = {}
        self.opsets = {}
        for imp in model.opset_import:
            self.opsets[imp.domain or ""] = imp.version
        if "ai.onnx" in self.opsets:
            self.opsets.setdefault("", self.opsets["ai.onnx"])
        self.failures: list[str] = []
        self._reported: set[tuple] = set()
        self.used: set[str] = set()
        self.node: Node | None = None
        #: id of an operand made by a pixel shuffle -> (the operand shuffled, the shuffle, the
        #: operand) (``ops._pixel_shuffle_conv``)
        self.shuffled: dict[int, tuple] = {}
        #: value name -> (index operand, depth) for values that are one-hot encodings
        #: (``ops._note_one_hot``)
        self.one_hot: dict[str, tuple[Any, int]] = {}
        #: value name -> the op type of the node that made it (every graph and subgraph walked)
        self.producer_op: dict[str, str] = {}
        #: names of float values that are casts of booleans (only 0 and 1: ``ops._cast``)
        self.zero_one: set[str] = set()
        #: value name -> (index operand, depth, matrix) of a one-hot matmul made a gather
        self.gathered: dict[str, tuple[Any, int, np.ndarray]] = {}
        #: id of a product of moved values and a known scalar -> (the product, "mul" or "div",
        #: the moved operand, the scalar, its side) (``ops._note_scaled``)
        self.scaled: dict[int, tuple] = {}
        #: id of a reshape's output -> (the run-time operand it views with only unit axes
        #: added or removed, the output): :meth:`view_source`
        self._views: dict[int, tuple[Any, Any]] = {}
        #: id of a reshape's or transpose's output -> (the run-time operand the chain of
        #: reshapes and transposes started from, the output, the steps): :meth:`moved_from`
        self._moves: dict[int, tuple[Any, Any, tuple]] = {}
        self._limits = builder.context.op_support_limits() if hasattr(builder, "context") else {}

    # ------------------------------------------------------------------ values
    def is_known(self, v) -> bool:
        return isinstance(v, np.ndarray)

    def known(self, v, what: str) -> np.ndarray:
        """The NumPy value of ``v``; Unsupported when it is only known at run time."""
        if isinstance(v, np.ndarray):
            return v
        raise Unsupported(f"{what} must be known at load time (an initializer, a Constant, or computed from "
                          "shapes); here it is computed at run time")

    def shape(self, v) -> tuple[int, ...]:
        return tuple(int(d) for d in v.shape)

    def wdtype(self, v) -> str:
        """The WebNN data type ``v`` has (or would have as a constant)."""
        if isinstance(v, np.ndarray):
            return self.np_to_webnn(v.dtype)
        return v.data_type

    def np_to_webnn(self, dt) -> str:
        dt = np.dtype(dt)
        if dt.kind == "f" and dt.itemsize <= 4:
            return self.dtype
        if dt == np.bool_:
            return "uint8"
        name = dt.name
        if name in ("int8", "uint8", "int32", "uint32", "int64", "uint64"):
            return name
        raise Unsupported(f"data type {name} has no WebNN data type")

    def onnx_type(self, elem_type: int) -> str:
        wt = ONNX_TO_WEBNN.get(elem_type)
        if wt is None:
            raise Unsupported(f"data type {TYPE_NAMES.get(elem_type, elem_type)} has no WebNN data type")
        return self.dtype if wt == "float" else wt

    def operand(self, v, data_type: str | None = None):
        """``v`` as an MLOperand: known arrays become constants in their WebNN data type."""
        if v is None:
            return None
        if not isinstance(v, np.ndarray):
            if data_type and v.data_type != data_type:
                return self.call("cast", v, data_type)
            return v
        dt = data_type or self.np_to_webnn(v.dtype)
        from .._dtypes import info

        if v.size == 0:
            raise Unsupported(f"an empty tensor (shape {list(v.shape)}): WebNN has no empty tensors")
        arr = np.array(v, dtype=info(dt).numpy, order="C")
        return self.b.constant({"data_type": dt, "shape": list(arr.shape)}, arr)

    def scalar(self, value, data_type: str):
        """A scalar constant operand."""
        from .._dtypes import info

        return self.b.constant({"data_type": data_type, "shape": []}, np.array(value, dtype=info(data_type).numpy))

    def call(self, method: str, *args, **kwargs):
        """Call a builder method with the node's label, refusing data types it does not take."""
        limits = self._limits.get(method)
        if isinstance(limits, dict):
            names = [k for k in limits if k != "output" and k != "outputs"]
            flat = []
            for i, a in enumerate(args):
                if isinstance(a, (list, tuple)) and a and hasattr(a[0], "data_type"):
                    flat += [(names[0] if names else "inputs", x) for x in a]
                elif hasattr(a, "data_type") and hasattr(a, "shape"):
                    flat.append((names[i] if i < len(names) else f"input {i}", a))
            flat += [(k, a) for k, a in kwargs.items() if hasattr(a, "data_type") and hasattr(a, "shape")]
            for name, a in flat:
                ent = limits.get(name)
                if isinstance(ent, dict) and a.data_type not in ent["data_types"]:
                    raise Unsupported(f"WebNN {method} does not take data type {a.data_type} for {name!r} "
                                      f"(it takes {', '.join(ent['data_types'])})")
        if self.node is not None:
            kwargs.setdefault("label", self.node.name or self.node.op)
        if method == "reshape" and not kwargs.keys() - {"label"}:
            src = self.view_source(args[0])
            if src is not None and tuple(src.shape) == tuple(int(d) for d in args[1]):
                return src  # reshapes that cancel: the value itself
        out = getattr(self.b, method)(*args, **kwargs)
        if method == "reshape" and _non_unit(args[0].shape) == _non_unit(out.shape):
            src = self.view_source(args[0])
            self._views[id(out)] = (args[0] if src is None else src, out)
        if method in ("reshape", "transpose") and out is not args[0]:
            prev = self.moved_from(args[0])
            src, steps = prev if prev is not None else (args[0], ())
            perm = kwargs.get("permutation", args[1] if len(args) > 1 else None)
            if method == "transpose" and perm is None:  # WebNN's default: the axes reversed
                perm = list(range(len(args[0].shape)))[::-1]
            self._moves[id(out)] = (src, out, (*steps, (method, perm, tuple(out.shape))))
        return out

    def moved_from(self, v):
        """``(source, steps)`` when run-time operand ``v`` was made from ``source`` by a chain of
        reshapes and transposes, ``steps`` their ``(method, permutation, output shape)`` in
        order; else None."""
        ent = self._moves.get(id(v)) if not isinstance(v, np.ndarray) and v is not None else None
        return (ent[0], ent[2]) if ent is not None and ent[1] is v else None

    def view_source(self, v):
        """The operand that run-time operand ``v`` is a reshape of, when the reshape(s) only
        added or removed axes of size 1 (an element-wise op on ``v`` may then run on it, in
        the producing kernel's epilogue, and be reshaped after), else None."""
        ent = self._views.get(id(v)) if not isinstance(v, np.ndarray) and v is not None else None
        return ent[0] if ent is not None and ent[1] is v else None

    # ------------------------------------------------------------------ graph walk
    def run(self) -> Converted:
        from onnx import numpy_helper

        g = self.model.graph
        init_names = set()
        for t in g.initializer:
            self.env[t.name] = numpy_helper.to_array(t)
            init_names.add(t.name)
        for t in g.sparse_initializer:
            raise NotSupportedError("onnx.load: sparse initializers are not supported")
        inputs: dict[str, dict] = {}
        bool_inputs = []
        missing: dict[str, list[str]] = {}
        for vi in g.input:
            if vi.name in init_names:
                continue
            tt = vi.type.tensor_type
            if not vi.type.HasField("tensor_type"):
                raise NotSupportedError(f"onnx.load: input {vi.name!r} is not a tensor")
            shape = self._input_shape(vi, missing)
            if vi.name in self.known_inputs:
                self.env[vi.name] = np.asarray(self.known_inputs[vi.name])
                continue
            try:
                dt = self.onnx_type(tt.elem_type)
            except Unsupported as exc:
                raise NotSupportedError(f"onnx.load: input {vi.name!r}: {exc}") from None
            if tt.elem_type == 9:
                bool_inputs.append(vi.name)
            if shape is None:
                continue
            if 0 in shape:
                raise NotSupportedError(f"onnx.load: input {vi.name!r} has shape {shape}: WebNN has no empty tensors")
            desc = {"data_type": dt, "shape": shape}
            inputs[vi.name] = desc
            self.env[vi.name] = self.b.input(vi.name, desc)
        if missing:
            parts = [f"{d!r} (used by input{'s' if len(ns) > 1 else ''} {', '.join(map(repr, ns))})"
                     for d, ns in missing.items()]
            named = [repr(d) + ": ..." for d in missing if not d.startswith("<")]
            whole = sorted({repr(i) + ": [shape]" for d, ns in missing.items() if d.startswith("<") for i in ns})
            raise MLTypeError(f"onnx.load: argument 'dims': the model's symbolic dimension(s) {', '.join(parts)} "
                              f"need a size; pass dims={{{', '.join(named + whole)}}}")
        counts: dict[str, int] = {}
        self.used = {o.name for o in g.output}
        self._collect_used(g)
        self._precheck(g, counts)
        self.walk(rewrite(g.node, self.env, [o.name for o in g.output]))
        if self.failures:
            raise NotSupportedError(
                f"onnx.load: {len(self.failures)} node(s) cannot be expressed in WebNN:\n  "
                + "\n  ".join(self.failures))
        outputs = {}
        bool_outputs = []
        for vi in g.output:
            v = self.env[vi.name]
            if vi.type.tensor_type.elem_type == 9:
                bool_outputs.append(vi.name)
            if isinstance(v, np.ndarray) or v._value.kind != "op":
                try:
                    v = self.b.identity(self.operand(v), label=vi.name)
                except Unsupported as exc:
                    raise NotSupportedError(f"onnx.load: output {vi.name!r}: {exc}") from None
            outputs[vi.name] = v
        return Converted(outputs, inputs, counts, bool_inputs, bool_outputs)

    def _collect_used(self, g) -> None:
        for p in g.node:
            self.used.update(i for i in p.input if i)
            for a in p.attribute:
                if a.type == a.GRAPH:
                    self._collect_used(a.g)
                    self.used.update(o.name for o in a.g.output)

    def _input_shape(self, vi, missing) -> list[int] | None:
        tt = vi.type.tensor_type
        if vi.name in self.dims and not isinstance(self.dims[vi.name], (int, np.integer)):
            return [int(d) for d in self.dims[vi.name]]
        shape = []
        if not tt.HasField("shape"):
            missing.setdefault(f"<shape of {vi.name}>", []).append(vi.name)
            return None
        for i, d in enumerate(tt.shape.dim):
            if d.HasField("dim_value") and d.dim_value >= 0:
                shape.append(int(d.dim_value))
            elif d.dim_param and d.dim_param in self.dims:
                shape.append(int(self.dims[d.dim_param]))
            elif vi.name in self.known_inputs:
                shape.append(int(np.asarray(self.known_inputs[vi.name]).shape[i]))
            else:
                missing.setdefault(d.dim_param or f"<dimension {i} of {vi.name}>", []).append(vi.name)
        return shape

    def _precheck(self, g, counts) -> None:
        """Count operators and record every node whose operator has no mapping."""
        from .ops import HANDLERS

        for p in g.node:
            dom = p.domain or ""
            key = p.op_type if dom in DEFAULT_DOMAINS else f"{dom}.{p.op_type}"
            counts[key] = counts.get(key, 0) + 1
            if key in self.custom_ops or p.op_type in self.custom_ops:
                continue
            if (dom if dom not in DEFAULT_DOMAINS else "", p.op_type) not in HANDLERS:
                n = self._node(p)
                self.failures.append(f"{n.where()}: operator {key!r} is not supported")
                self._reported.add(tuple(p.output))

    def _node(self, p) -> Node:
        dom = p.domain or ""
        since = self.opsets.get("" if dom in DEFAULT_DOMAINS else dom, 0)
        try:
            from onnx import defs

            since = defs.get_schema(p.op_type, since, "" if dom in DEFAULT_DOMAINS else dom).since_version
        except Exception:
            pass
        attrs = {a.name: _attr_value(a) for a in p.attribute}
        return Node(p.name, p.op_type, dom, since, attrs, list(p.input), list(p.output), p)

    def walk(self, nodes) -> None:
        from .ops import HANDLERS

        for p in nodes:
            n = self._node(p)
            x: list[Any] = []
            for name in n.inputs:
                if not name:
                    x.append(None)
                    continue
                if name not in self.env:
                    raise NotSupportedError(f"onnx.load: {n.where()}: input {name!r} is not produced by any node")
                x.append(self.env[name])
            if any(v is FAILED for v in x):
                self._set(n, [FAILED] * len(n.outputs))
                continue
            key = n.qualified
            fn = self.custom_ops.get(key) or (self.custom_ops.get(n.op) if n.domain not in DEFAULT_DOMAINS
                                               or (n.domain, n.op) not in HANDLERS else None)
            if fn is None and n.domain in DEFAULT_DOMAINS:
                fn = self.custom_ops.get(n.op) if ("", n.op) not in HANDLERS else None
            self.node = n
            try:
                if fn is not None:
                    outs = fn(self.b, [self.operand(v) for v in x], dict(n.attrs))
                    outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
                elif all(v is None or isinstance(v, np.ndarray) for v in x) and (
                        folded := fold(n, x)) is not None:
                    outs = [None if v is None else np.asarray(v) for v in folded]
                else:
                    h = HANDLERS.get(("" if n.domain in DEFAULT_DOMAINS else n.domain, n.op))
                    if h is None:
                        if tuple(p.output) not in self._reported:
                            self.failures.append(f"{n.where()}: operator {key!r} is not supported")
                        self._set(n, [FAILED] * len(n.outputs))
                        continue
                    outs = h(self, n, x)
                    outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
                    outs = [np.asarray(v) if isinstance(v, (np.generic, int, float)) else v for v in outs]
            except Unsupported as exc:
                self.failures.append(f"{n.where()}: {exc}")
                self._set(n, [FAILED] * len(n.outputs))
                continue
            except WebNNError as exc:
                if getattr(exc, "_onnx_located", False):
                    raise
                new = type(exc)(f"onnx.load: {n.where()}: {exc}")
                new._onnx_located = True  # type: ignore[attr-defined]
                raise new from exc
            finally:
                self.node = None
            self._set(n, outs)

    def _set(self, n: Node, outs: list) -> None:
        for i, name in enumerate(n.outputs):
            if not name:
                continue
            self.producer_op[name] = n.qualified
            if i >= len(outs) or outs[i] is None:
                if name not in self.used:
                    continue
                if outs and outs[0] is FAILED:
                    self.env[name] = FAILED
                    continue
                self.failures.append(f"{n.where()}: output {i} ({name!r}) is not supported")
                self.env[name] = FAILED
                continue
            self.env[name] = outs[i]
