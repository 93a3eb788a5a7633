"""MLGraphBuilder and MLOperand: building a WebNN graph.

Spec: https://www.w3.org/TR/webnn/#api-mlgraphbuilder

The builder records a graph IR (:class:`~webnn_gpu._ir.Node` / :class:`~webnn_gpu._ir.Value`).
Operator methods are defined next to their kernels in ``webnn_gpu/ops/<family>.py`` and attached to
:class:`MLGraphBuilder` by :func:`webnn_gpu.ops._registry.builder_method`; this module holds
what every graph needs: inputs, constants and ``build``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Literal, overload

import numpy as np

from . import _dtypes
from . import _validate as V
from ._ir import Node, Value
from .errors import DataError, InvalidStateError, MLTypeError, NotSupportedError, where

if TYPE_CHECKING:
    from .context import MLContext
    from .graph import MLGraph
    from .tensor import MLTensor

__all__ = ["MLGraphBuilder", "MLOperand", "Node", "Value"]  # Node, Value: from webnn_gpu._ir


class MLOperand:
    """An operand of a graph under construction (the spec's MLOperand).

    Attributes:
        data_type (str): the spec's data type string.
        shape (tuple[int, ...]): the dimensions.
    """

    __slots__ = ("_builder", "_value")

    def __init__(self, builder: MLGraphBuilder, value: Value):
        self._builder = builder
        self._value = value

    # IDL: readonly attribute MLOperandDataType dataType;
    @property
    def data_type(self) -> str:
        """The operand's data type (``"float32"``, ...)."""
        return self._value.data_type

    # IDL: readonly attribute FrozenArray<[EnforceRange] unsigned long> shape;
    @property
    def shape(self) -> tuple[int, ...]:
        """The operand's shape."""
        return self._value.shape

    @property
    def rank(self) -> int:
        """Number of dimensions."""
        return len(self._value.shape)

    def __repr__(self) -> str:
        return f"<MLOperand {self.data_type} {list(self.shape)}>"


class MLGraphBuilder:
    """Builds a computational graph for one :class:`MLContext` (the spec's MLGraphBuilder).

    Arguments:
        context (MLContext): the context the graph will run on.

    A builder builds one graph: ``build()`` may be called once.
    """

    # IDL: constructor(MLContext context);
    def __init__(self, context: MLContext):
        from .context import MLContext

        if not isinstance(context, MLContext):
            raise MLTypeError(f"MLGraphBuilder: argument 'context': expected an MLContext, got {type(context).__name__}")
        context._check_alive("MLGraphBuilder")
        self._context = context
        self._nodes: list[Node] = []
        self._inputs: dict[str, Value] = {}
        self._built = False

    @property
    def context(self) -> MLContext:
        """The context this builder builds for."""
        return self._context

    # ----------------------------------------------------------------- plumbing for ops
    def _check_usable(self, op: str, label: str = "") -> None:
        if self._built:
            raise InvalidStateError(f"{where(op, label)}: this MLGraphBuilder has already built its graph")
        self._context._check_alive(where(op, label))

    @overload
    def _operand(self, op: str, label: str, arg: str, x, *, optional: Literal[False] = False) -> Value: ...

    @overload
    def _operand(self, op: str, label: str, arg: str, x, *, optional: bool) -> Value | None: ...

    def _operand(self, op: str, label: str, arg: str, x, *, optional: bool = False) -> Value | None:
        """The Value of an MLOperand argument, checking it belongs to this builder."""
        if x is None and optional:
            return None
        if not isinstance(x, MLOperand):
            V.fail(op, label, arg, "an MLOperand", x)
        if x._builder is not self:
            V.fail(op, label, arg, "an MLOperand of this MLGraphBuilder", "an operand of another builder")
        return x._value

    def _check_data_type(self, op: str, label: str, arg: str, data_type: str) -> None:
        """Refuse a data type this adapter cannot hold (NotSupportedError)."""
        if data_type not in self._context._supported_data_types:
            raise NotSupportedError(
                f"{where(op, label)}: argument {arg!r}: data type {data_type!r} is not supported on this "
                f"adapter (supported: {', '.join(self._context._supported_data_types)})"
            )

    def _check_int64_compute(self, op: str, label: str, inputs, outputs) -> None:
        """Refuse int64/uint64 operands of an operator that computes on them when the adapter
        lacks ``shader-int64`` (NotSupportedError), as ``op_support_limits()`` reports it.

        Outputs are checked for ``cast`` only: converting *to* int64 needs 64-bit arithmetic,
        while other operators with an int64 output and no int64 operand (arg_max, arg_min)
        store it as raw word pairs.
        """
        if "shader-int64" in self._context._features:
            return
        from .ops._registry import SUPPORT

        s = SUPPORT.get(op)
        if s is None or not s.int64_compute:
            return
        names = list(s.operands)
        args = [(names[i] if len(names) == len(inputs) else f"inputs[{i}]", v.data_type)
                for i, v in enumerate(inputs) if v is not None]
        if op == "cast":
            args += [("output", dt) for dt, _ in outputs]
        for arg, dt in args:
            if dt in ("int64", "uint64"):
                raise NotSupportedError(
                    f"{where(op, label)}: argument {arg!r}: data type {dt!r} needs the adapter feature "
                    f"'shader-int64' for this operator, and this adapter lacks it (see op_support_limits())"
                )

    def _emit(self, op: str, inputs: list, outputs: list,
              attrs: dict | None = None, label: str = "") -> list[MLOperand]:
        """Append a node and return operands for its outputs."""
        limit = self._context._max_tensor_bytes
        self._check_int64_compute(op, label, inputs, outputs)
        out_values = []
        for i, (dt, shp) in enumerate(outputs):
            self._check_data_type(op, label, "output" if len(outputs) == 1 else f"output {i}", dt)
            V.size_limit(op, label, "output", dt, shp, limit)
            out_values.append(Value(dt, tuple(shp), "op"))
        node = Node(op, list(inputs), out_values, dict(attrs or {}), label or "")
        for v in out_values:
            v.producer = node
        self._nodes.append(node)
        return [MLOperand(self, v) for v in out_values]

    def _emit1(self, op: str, inputs, data_type: str, shape, attrs=None, label: str = "") -> MLOperand:
        return self._emit(op, inputs, [(data_type, tuple(shape))], attrs, label)[0]

    # ----------------------------------------------------------------- inputs & constants
    # IDL: MLOperand input(USVString name, MLOperandDescriptor descriptor);
    def input(self, name: str, descriptor: dict, **kwargs) -> MLOperand:
        """Declare a named graph input.

        Arguments:
            name (str): the input's name, unique in this builder, not empty.
            descriptor (dict): ``{"data_type": str, "shape": list[int]}``.

        Returns:
            MLOperand: the input operand.

        Raises:
            MLTypeError: an empty or duplicate name, or an invalid descriptor.
            NotSupportedError: a data type or size this adapter cannot hold.
            InvalidStateError: the builder has built its graph, or the context is gone.
        """
        op, label = "input", kwargs.pop("label", "") or ""
        V.check_kwargs(op, label, kwargs)
        self._check_usable(op, label)
        if not isinstance(name, str) or not name:
            V.fail(op, label, "name", "a non-empty string", name)
        if name in self._inputs:
            V.fail(op, label, "name", "a name not used by another input of this builder", name)
        dt, shp, _ = V.descriptor(op, label, "descriptor", descriptor)
        self._check_data_type(op, label, "descriptor.data_type", dt)
        V.size_limit(op, label, "descriptor", dt, shp, self._context._max_tensor_bytes)
        value = Value(dt, shp, "input", name=name)
        self._inputs[name] = value
        return MLOperand(self, value)

    # IDL: MLOperand constant(MLOperandDescriptor descriptor, AllowSharedBufferSource buffer);
    # IDL: MLOperand constant(MLOperandDataType type, MLNumber value);
    # IDL: MLOperand constant(MLTensor tensor);
    def constant(self, *args, **kwargs) -> MLOperand:
        """Create a constant operand.

        Forms:
            ``constant(descriptor, data)``: the spec form; ``data`` is an ndarray of the
            descriptor's dtype (any shape with the right element count) or a bytes-like of
            the exact byte length. The data is copied now.
            ``constant(data_type, value)``: a scalar (shape ``[]``) of ``data_type``.
            ``constant(tensor)``: an MLTensor made by ``create_constant_tensor``.
            ``constant(ndarray)``: convenience; descriptor taken from the array.

        Returns:
            MLOperand: the constant operand.

        Raises:
            MLTypeError: invalid descriptor or arguments.
            DataError: data of the wrong size or element type.
            NotSupportedError: a data type this adapter cannot hold.
        """
        op = "constant"
        label = kwargs.pop("label", "") or ""
        V.check_kwargs(op, label, kwargs)
        self._check_usable(op, label)
        from .tensor import MLTensor

        if len(args) == 1 and isinstance(args[0], MLTensor):
            t = args[0]
            t._check_usable(op)
            if t._context is not self._context:
                V.fail(op, label, "tensor", "an MLTensor of this builder's context", "a tensor of another context")
            if not t.constant:
                V.fail(op, label, "tensor", "a constant MLTensor (create_constant_tensor)", t)
            value = Value(t.data_type, t.shape, "constant", tensor=t)
            return MLOperand(self, value)
        if len(args) == 1 and isinstance(args[0], np.ndarray):
            arr = args[0]
            dt = _dtypes.from_numpy(arr.dtype)
            if dt is None:
                raise DataError(f"{where(op, label)}: argument 'data': NumPy dtype {arr.dtype} has no WebNN data type "
                                f"(expected one of {', '.join(str(_dtypes.info(d).numpy) for d in _dtypes.DATA_TYPES)})")
            return self.constant({"data_type": dt, "shape": list(arr.shape)}, arr, label=label)
        if len(args) == 2 and isinstance(args[0], str):
            dt = V.data_type(op, label, "type", args[0])
            val = args[1]
            if isinstance(val, (bool, np.bool_)) or not isinstance(val, (int, float, np.number)):
                V.fail(op, label, "value", "a number", val)
            info = _dtypes.info(dt)
            if not info.is_float:
                if isinstance(val, (float, np.floating)) and not float(val).is_integer():
                    V.fail(op, label, "value", f"an integer for data type {dt}", val)
                ii = np.iinfo(info.numpy)
                if not ii.min <= int(val) <= ii.max:
                    raise DataError(f"{where(op, label)}: argument 'value': expected a value in "
                                    f"[{ii.min}, {ii.max}] for {dt}, got {val}")
                arr = np.array(int(val), dtype=info.numpy)
            else:
                # rounds to nearest; a value past the type's range becomes an infinity (WebIDL
                # "unrestricted float"), whatever np.seterr says
                try:
                    f = float(val)
                except OverflowError:  # a Python int beyond float64
                    f = float("inf") if val > 0 else float("-inf")
                with np.errstate(over="ignore"):
                    arr = np.array(f, dtype=info.numpy)
            return self.constant({"data_type": dt, "shape": []}, arr, label=label)
        if len(args) == 2:
            dt, shp, _ = V.descriptor(op, label, "descriptor", args[0])
            self._check_data_type(op, label, "descriptor.data_type", dt)
            V.size_limit(op, label, "descriptor", dt, shp, self._context._max_tensor_bytes)
            data = V.array_data(op, label, "data", args[1], dt, shp)
            return MLOperand(self, Value(dt, shp, "constant", data=data))
        raise MLTypeError(
            "constant: expected constant(descriptor, data), constant(data_type, value), constant(tensor) "
            f"or constant(ndarray), got {len(args)} positional argument(s)"
        )

    # ----------------------------------------------------------------- custom WGSL
    # An extension (WebNN issue #6 asks for custom operators; the spec has none).
    def wgsl(self, code: str, inputs: Sequence[MLOperand], outputs, *,
             workgroup_size: int | Sequence[int] = 64, dispatch=None, constants: Mapping | None = None,
             label: str = "", **kwargs):
        """A custom operator: your own WGSL compute shader as a node of the graph.

        The node runs in the graph's command buffer like the built-in kernels (one dispatch,
        no readback), its outputs flow into the rest of the graph, its buffers come from the
        graph's arena, and the compiler fuses nothing into or across it. The shader is
        compiled once, at ``build()``, through the context's pipeline cache; ``webnn-gpu
        profile`` times it under its label. The binding convention is in
        :mod:`webnn_gpu._custom` and ``docs/interop.md``: inputs at ``@group(0)
        @binding(0..n-1)`` as ``var<storage, read> x: array<T>``, outputs after them as
        ``var<storage, read_write>``, then an optional ``var<uniform>`` with the shapes;
        entry point ``@compute fn main``.

        Arguments:
            code (str): the WGSL, rendered first as a Jinja2 template (StrictUndefined) with
                ``constants``, ``inputs`` / ``outputs`` (``.data_type``, ``.shape``, ``.size``,
                ``.type``, ``.binding``), ``workgroup_size`` (``"x, y, z"``) and
                ``shapes_binding``. Plain WGSL renders to itself.
            inputs (Sequence[MLOperand]): the operands bound at 0..n-1 (float32, float16,
                int32 or uint32; may be empty).
            outputs (dict | Sequence[dict]): one descriptor ``{"data_type", "shape"}`` per
                output, or one descriptor alone (then one operand is returned).
            workgroup_size (int | Sequence[int]): the shader's ``@workgroup_size``; default 64.
            dispatch (int | Sequence[int] | Callable | None): workgroup counts (x[, y[, z]]),
                or a function of the input shapes (a list of tuples) returning them; default
                ``ceil(elements of outputs[0] / invocations per workgroup)`` along x (folded
                into y past maxComputeWorkgroupsPerDimension).
            constants (dict | None): template variables.
            label (str): names the node in errors, GPU objects and profiles.

        Returns:
            list[MLOperand] | MLOperand: the outputs (one operand when ``outputs`` is a dict).

        Raises:
            MLTypeError: a bad argument, template error or data type (at the call); at
                ``build()``: a WGSL compile error, a binding that breaks the convention or a
                type that does not match its operand, naming the label and the WGSL line.
            NotSupportedError: a workgroup size, dispatch or binding count past a device limit.
            InvalidStateError: the builder has built its graph, or the context is gone.
        """
        from . import _custom

        op = "wgsl"
        V.check_kwargs(op, label, kwargs)
        self._check_usable(op, label)
        if isinstance(inputs, (str, bytes, Mapping)) or not isinstance(inputs, Sequence):
            V.fail(op, label, "inputs", "a sequence of MLOperand", inputs)
        values = [self._operand(op, label, f"inputs[{i}]", x) for i, x in enumerate(inputs)]
        single = isinstance(outputs, Mapping)
        descs = [outputs] if single else outputs
        if isinstance(descs, (str, bytes)) or not isinstance(descs, Sequence) or not descs:
            V.fail(op, label, "outputs", "an operand descriptor or a non-empty sequence of them", outputs)
        outs = [V.descriptor(op, label, f"outputs[{j}]", d)[:2] for j, d in enumerate(descs)]
        for arg, dt in [(f"inputs[{i}]", v.data_type) for i, v in enumerate(values)] + \
                       [(f"outputs[{j}]", dt) for j, (dt, _) in enumerate(outs)]:
            if dt not in _custom.WGSL_TYPES:
                V.fail(op, label, arg, f"an operand of data type {', '.join(_custom.WGSL_TYPES)}", dt)
        limits = self._context._limits
        max_buffers = int(limits.get("max-storage-buffers-per-shader-stage", 8))
        if len(values) + len(outs) > max_buffers:
            raise NotSupportedError(f"{where(op, label)}: {len(values)} inputs and {len(outs)} outputs are "
                                    f"{len(values) + len(outs)} storage buffers, more than this device's "
                                    f"maxStorageBuffersPerShaderStage ({max_buffers})")
        wg = _custom.workgroup_size(label, workgroup_size, limits)
        attrs = _custom.make_node_attrs(label, code, [(v.data_type, v.shape) for v in values], outs, wg, dispatch,
                                        constants, limits)
        result = self._emit(op, values, outs, attrs, label)
        return result[0] if single else result

    # ----------------------------------------------------------------- build
    # IDL: Promise<MLGraph> build(MLNamedOperands outputs);
    def build(self, outputs: dict) -> MLGraph:
        """Compile the graph that computes ``outputs`` (blocking twin of the spec's promise).

        Arguments:
            outputs (Mapping[str, MLOperand]): named outputs; at least one. Names are unique
                (they are the keys); one operand may be output under several names.

        Returns:
            MLGraph: the compiled graph, ready for ``compute`` and ``dispatch``.

        Raises:
            MLTypeError: no outputs, a non-operand value, an input or constant as output, an
                operand of another builder.
            InvalidStateError: ``build`` was called before on this builder.
            OperationError: a kernel failed to compile on the device.
        """
        op = "build"
        self._check_usable(op)
        if not isinstance(outputs, Mapping) or not outputs:
            V.fail(op, "", "outputs", "a non-empty dict of name -> MLOperand", outputs)
        named: dict[str, Value] = {}
        for name, operand in outputs.items():
            if not isinstance(name, str) or not name:
                V.fail(op, "", "outputs", "non-empty string names", name)
            value = self._operand(op, "", f"outputs[{name!r}]", operand)
            if value.kind != "op":
                V.fail(op, "", f"outputs[{name!r}]", "an operand computed by an operator (not an input or constant)",
                       f"an {value.kind} operand")
            named[name] = value
        from .graph import MLGraph

        with self._context._lock, self._context._guard(op, "compiling the graph"):
            graph = MLGraph._compile(self._context, self._nodes, self._inputs, named)
        self._built = True
        return graph

    async def build_async(self, outputs: dict) -> MLGraph:
        """Awaitable twin of :meth:`build` (compiles in a worker thread)."""
        return await asyncio.get_running_loop().run_in_executor(None, self.build, outputs)


def _ensure_ops_registered() -> None:
    from . import _custom, ops  # noqa: F401  (attaches the operator methods)

    _custom.register()


_ensure_ops_registered()
