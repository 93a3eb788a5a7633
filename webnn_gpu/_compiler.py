"""Compiler passes over the graph IR, run by ``MLGraphBuilder.build``.

Each pass takes and returns the node list (in a valid topological order). Passes:

* :func:`dead_code`: keep only nodes that contribute to an output.
* :func:`fold_constants`: nodes whose inputs are all host constants are evaluated with NumPy
  at build time, for the operators where NumPy gives exactly the kernel's result (data
  movement, exact widening casts, float add/sub/mul/div/max/min/neg/abs/relu/clamp).
* :func:`swap_resample_conv`: a pointwise conv2d after a linear upsampling runs before it,
  on the small image (equal up to rounding: both are linear).
* :func:`fuse_hard_swish`: the sequence ``x * clamp(x + 3, 0, 6) / 6`` becomes one
  ``hard_swish`` node.
* :func:`fuse_epilogue`: bias adds, activations and following same-shaped element-wise ops
  (a residual add) are folded into ``attrs["epilogue"]`` of conv2d, conv_transpose2d,
  matmul and gemm (format: :mod:`webnn_gpu.ops._epilogue`).
* :func:`fuse_conv_input`: a per-channel ``mul`` (the squeeze-and-excite scale), a same-shaped
  ``add`` (a skip connection) or both in front of a pointwise conv2d are applied by the conv
  as it loads its input.
* :func:`fuse_pool_input`: a same-shaped ``add`` that only a global average pool reads is
  summed by the pool's reduction as it loads.
* :func:`fuse_conv_pool`: a global average pool of a depthwise conv2d's output is computed
  by the conv (per-block sums) and a small reduction, not by re-reading the output.
* :func:`fuse_elementwise`: chains of element-wise nodes become one ``fused_elementwise``
  node (one kernel, no intermediate buffers).

A pass never mutates the nodes it receives (a failed ``build()`` leaves the builder usable):
a node it changes is replaced by a copy. ``WEBNN_GPU_PASSES=-fuse_epilogue,-fold_constants``
switches passes off by name, ``WEBNN_GPU_PASSES=-all`` every one (for benchmarks and
debugging). After each pass :func:`check_order` checks that every node's inputs are computed
before it. A rule fires only where it is sure the result does not change: the differential
fuzzer ``tests/fuzz/`` compares random graphs against float64 NumPy and names the pass at
fault (``docs/compiler.md``).

Views (reshape) cost nothing at run time: their lowering aliases the input's buffer.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

import numpy as np

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


# ---------------------------------------------------------------- constant folding
def _fold_cast(node, x: np.ndarray) -> np.ndarray | None:
    """Exact casts only: float16 -> float32, and integers into a type holding every value."""
    from . import _dtypes

    src, dst = node.inputs[0].data_type, node.attrs["to"]
    if src == dst:
        return x
    exact = {("float16", "float32")}
    exact |= {(s, d) for s in ("int8", "uint8") for d in ("float16", "float32", "int32", "int64")}
    exact |= {("uint8", "uint32"), ("uint8", "uint64"), ("uint32", "uint64"), ("uint32", "int64"),
              ("int32", "int64")}
    if (src, dst) not in exact:
        return None
    return x.astype(_dtypes.info(dst).numpy)


def _fold_clamp(x: np.ndarray, node) -> np.ndarray:
    lo, hi = node.attrs.get("min_value"), node.attrs.get("max_value")
    if lo is not None:
        x = np.maximum(x, x.dtype.type(lo))
    if hi is not None:
        x = np.minimum(x, x.dtype.type(hi))
    return x


#: op -> NumPy evaluation over the input arrays (None: not foldable for these inputs)
_FLOAT_FOLDERS: dict[str, Callable[..., Any]] = {
    "add": lambda n, a, b: a + b,
    "sub": lambda n, a, b: a - b,
    "mul": lambda n, a, b: a * b,
    "div": lambda n, a, b: a / b,
    "max": lambda n, a, b: np.maximum(a, b),
    "min": lambda n, a, b: np.minimum(a, b),
    "neg": lambda n, a: -a,
    "abs": lambda n, a: np.abs(a),
    "relu": lambda n, a: np.maximum(a, a.dtype.type(0)),
    "clamp": lambda n, a: _fold_clamp(a, n),
}
_MOVE_FOLDERS = {
    "reshape": lambda n, a: a,
    "identity": lambda n, a: a,
    "transpose": lambda n, a: np.transpose(a, n.attrs["permutation"]),
    "expand": lambda n, a: np.broadcast_to(a, n.outputs[0].shape),
    # slice: sizes are not in attrs; the output shape and the strides give the stop
    "slice": lambda n, a: a[tuple(slice(s, s + (d - 1) * t + 1, t) for s, d, t in zip(
        n.attrs["starts"], n.outputs[0].shape, n.attrs["strides"]))],
    "concat": lambda n, *xs: np.concatenate(xs, axis=n.attrs["axis"]),
    "reverse": lambda n, a: np.flip(a, axis=tuple(n.attrs["axes"])) if n.attrs["axes"] else a,
    "cast": _fold_cast,
}
#: operators :func:`fold_constants` evaluates (on float data only for the arithmetic ones)
FOLDABLE = set(_FLOAT_FOLDERS) | set(_MOVE_FOLDERS)
#: a folded constant may grow past its inputs (expand) only up to this many bytes
FOLD_GROWTH_BYTES = 1 << 20


def _fold_one(node) -> np.ndarray | None:
    from . import _dtypes

    arrays = [v.data.reshape(v.shape) for v in node.inputs]
    out = node.outputs[0]
    if node.op in _MOVE_FOLDERS:
        if out.data_type in ("int4", "uint4") or any(v.data_type in ("int4", "uint4") for v in node.inputs):
            return None
        return _MOVE_FOLDERS[node.op](node, *arrays)
    if node.op in _FLOAT_FOLDERS:
        if out.data_type not in ("float32", "float16") or any(v.data_type != out.data_type for v in node.inputs):
            return None
        if any(np.isnan(a).any() for a in arrays):  # WGSL max/min of NaN is not NumPy's
            return None
        with np.errstate(all="ignore"):
            res = _FLOAT_FOLDERS[node.op](node, *arrays)
        return np.asarray(res, dtype=_dtypes.info(out.data_type).numpy)
    return None


def fold_constants(nodes: list, outputs: dict, context=None) -> list:
    """Evaluate nodes whose inputs are all host constants with NumPy, at build time.

    Only operators of :data:`FOLDABLE`, whose NumPy evaluation is exactly what the kernel
    would compute: data movement, exact casts and IEEE float arithmetic (no NaN inputs).
    Nodes producing a graph output are kept (outputs are computed values), and a result
    may not grow past its inputs by more than :data:`FOLD_GROWTH_BYTES`.
    """
    from . import _dtypes
    from .builder import Node, Value

    out_ids = {v.id for v in outputs.values()}
    replace: dict[int, Value] = {}
    result = []
    for node in nodes:
        if any(v is not None and v.id in replace for v in node.inputs):
            node = Node(node.op, [replace.get(v.id, v) if v is not None else None for v in node.inputs],
                        node.outputs, dict(node.attrs), node.label)
        foldable = (node.op in FOLDABLE and len(node.outputs) == 1 and node.outputs[0].id not in out_ids
                    and node.inputs and all(v is not None and v.kind == "constant" and v.data is not None
                                            for v in node.inputs))
        if foldable:
            out = node.outputs[0]
            in_bytes = sum(_dtypes.buffer_size(v.data_type, v.shape) for v in node.inputs)
            if _dtypes.buffer_size(out.data_type, out.shape) > max(in_bytes, FOLD_GROWTH_BYTES):
                foldable = False
        arr = _fold_one(node) if foldable else None
        if arr is None:
            result.append(node)
            continue
        out = node.outputs[0]
        arr = np.ascontiguousarray(arr, dtype=_dtypes.info(out.data_type).numpy).reshape(out.shape)
        replace[out.id] = Value(out.data_type, tuple(out.shape), "constant", data=arr.reshape(-1).copy())
        if DEBUG >= 2:
            log.debug("fold_constants: %s [%s] evaluated at build time", node.op, node.label)
    return result


# ---------------------------------------------------------------- hard-swish sequence
def _const_all(v, value: float, rel: float = 0.0) -> bool:
    """Whether ``v`` is a host constant whose every element equals ``value`` (within ``rel``)."""
    if v is None or v.kind != "constant" or v.data is None or v.data.size == 0:
        return False
    d = v.data.astype(np.float64)
    return bool(np.all(np.abs(d - value) <= rel * abs(value)))


def fuse_hard_swish(nodes: list, outputs: dict, context=None) -> list:
    """Rewrite ``x * clamp(x + 3, 0, 6) / 6`` as one ``hard_swish(x)`` node.

    Matched forms (float data; constants may be scalars or any broadcast shape that leaves
    the shape of ``x`` unchanged): ``add(x, 3)`` (either order) -> ``clamp(0, 6)`` ->
    ``mul`` with ``x`` (either order) -> ``div(., 6)`` or ``mul(., 1/6)``; or the division
    applied to the clamp before the multiply. Every intermediate must have only its one
    consumer in the pattern and not be a graph output. ``hard_swish`` computes
    ``x * clamp(x + 3, 0, 6) / 6`` in that order, so the first form is bit-exact.
    """
    from .builder import Node

    out_ids = {v.id for v in outputs.values()}
    consumers: dict[int, list] = {}
    for node in nodes:
        for v in {id(v): v for v in node.inputs if v is not None}.values():
            consumers.setdefault(v.id, []).append(node)

    def only(v, op):
        """The single consumer of ``v`` when it has op ``op`` and ``v`` is no output."""
        cs = consumers.get(v.id, [])
        if len(cs) != 1 or v.id in out_ids or cs[0].op != op:
            return None
        return cs[0]

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
        cs = consumers.get(c_out.id, [])
        if len(cs) != 1 or c_out.id in out_ids:
            continue
        nxt = cs[0]
        if nxt.op == "mul" and other(nxt, c_out) is x and same_shape(nxt, x):
            cs2 = consumers.get(nxt.outputs[0].id, [])
            if len(cs2) != 1 or nxt.outputs[0].id in out_ids or not is_sixth(cs2[0], nxt.outputs[0]):
                continue
            chain, last = [add, clamp, nxt], cs2[0]
        elif is_sixth(nxt, c_out):
            cs2 = consumers.get(nxt.outputs[0].id, [])
            if (len(cs2) != 1 or nxt.outputs[0].id in out_ids or cs2[0].op != "mul"
                    or other(cs2[0], nxt.outputs[0]) is not x):
                continue
            chain, last = [add, clamp, nxt], cs2[0]
        else:
            continue
        if not same_shape(last, x):
            continue
        removed.update(n.id for n in chain)
        replaced[last.id] = Node("hard_swish", [x], list(last.outputs), {}, last.label or add.label)
    if not replaced:
        return nodes
    return [replaced.get(n.id, n) for n in nodes if n.id not in removed]


# ---------------------------------------------------------------- epilogue fusion
#: operators whose kernels apply ``attrs["epilogue"]``, with the number of input slots their
#: own operands take (conv bias and gemm's c are optional inputs at index 2: epilogue operands
#: go after them, the slot stays None when the option is absent)
EPILOGUE_HOSTS = {"conv2d": 3, "conv_transpose2d": 3, "matmul": 2, "gemm": 3}
#: The host kernels unroll their stores (a block of pixels, a register tile: up to a few
#: hundred calls of the epilogue in one shader), and the shader compiler inlines the epilogue
#: at each call: an epilogue may hold at most this many steps, of which at most
#: :data:`EPILOGUE_MAX_LOADS` read an operand per output element (a residual, a broadcast
#: operand); an operand read per channel is loaded once per channel, an activation is a few
#: instructions. Past them the chain stays an element-wise kernel of its own. (On lavapipe
#: each unrolled load costs compile time: a depthwise + projection kernel of 24 channels,
#: 2.3 s to build without, took 6.9 s with one residual load per store in each epilogue,
#: 11 s with one broadcast load, 39 s with two scalar loads.)
EPILOGUE_MAX_STEPS = 12
EPILOGUE_MAX_LOADS = 1
#: ... and it binds at most this many operands (each read per channel is still loaded where
#: the kernel hoists it, once per stored column: about a third of a second of compile each)
EPILOGUE_MAX_OPERANDS = 4


def _chan_axis(host) -> int | None:
    """The output axis whose coordinate ``host``'s kernels hold (``ch`` of the epilogue)."""
    if host.op in ("conv2d", "conv_transpose2d"):
        return 1 if host.attrs.get("input_layout", "nchw") == "nchw" else 3
    if host.op in ("matmul", "gemm"):
        return len(host.outputs[0].shape) - 1
    return None


def _per_channel(host, v, operand):
    """``operand`` as a 1-D Value along the host's channel axis when it varies along no other
    axis of ``v``'s shape (the same values read at the channel coordinate): the operand itself
    when already 1-D of the channels' size, a new constant for host data (a scalar broadcast
    to every channel), ``"reshape"`` for a computed operand of the channels' size (a view),
    else None."""
    from .builder import Value

    axis = _chan_axis(host)
    if axis is None:
        return None
    rank, C = len(v.shape), v.shape[axis]
    shp = (1,) * (rank - len(operand.shape)) + tuple(operand.shape)
    if any(d != 1 for k, d in enumerate(shp) if k != axis) or shp[axis] not in (1, C):
        return None
    if tuple(operand.shape) == (C,):
        return operand
    if operand.kind == "constant" and operand.data is not None:
        data = np.broadcast_to(operand.data.reshape(-1), (C,)) if shp[axis] == 1 else operand.data.reshape(-1)
        return Value(operand.data_type, (C,), "constant", data=np.ascontiguousarray(data).copy())
    if shp[axis] == C and operand.kind in ("input", "op"):
        return "reshape"
    return None


def _epilogue_step(host, v, consumer):
    """The epilogue step (and operand to bind, or None) for ``consumer`` of ``host``'s value ``v``."""
    from .ops import _epilogue
    from .ops.elementwise import _OPTION_OPS, _TABLE

    out = consumer.outputs[0]
    if out.data_type != v.data_type or tuple(out.shape) != tuple(v.shape) or len(consumer.outputs) != 1:
        return None
    op = consumer.op
    if len(consumer.inputs) == 1:
        if op in _OPTION_OPS:
            return {"op": op, **{k: consumer.attrs[k] for k in _OPTION_OPS[op][1]}}, None
        if op == "clamp":
            return {"op": "clamp", "min_value": consumer.attrs.get("min_value"),
                    "max_value": consumer.attrs.get("max_value")}, None
        row = _TABLE.get(op)
        if row is not None and row.arity == 1 and row.out is None and "float32" in row.types and op != "identity":
            return {"op": op}, None
        return None
    if op in _epilogue.BINARY and len(consumer.inputs) == 2:
        a, b = consumer.inputs
        if a is v and b is v:
            return None
        operand = b if a is v else a
        if operand.data_type != v.data_type or len(operand.shape) > len(v.shape):
            return None
        if any(s not in (1, d) for s, d in zip(reversed(operand.shape), reversed(v.shape))):
            return None
        step = {"op": op}
        if b is v:
            step["reverse"] = True
        return step, operand
    return None


def fuse_epilogue(nodes: list, outputs: dict, context=None) -> list:
    """Fold the element-wise consumers of conv2d, conv_transpose2d, matmul and gemm into them.

    Following the host's value through single consumers that are not graph outputs: each
    float unary element-wise op (relu, clamp, sigmoid, hard_swish, ...) and each binary one
    (add, sub, mul, div, max, min, pow) whose other operand broadcasts to the host's output
    shape (a bias, a residual) becomes a step of ``attrs["epilogue"]``; a binary step's
    operand is appended to the host's inputs. An operand that varies along the channel axis
    alone (a ``[1, C, 1, 1]`` scale, a scalar constant) is bound as a 1-D operand read at the
    channel (``"axis"``; a computed one through a ``reshape`` view, a constant re-made), so
    kernels load it once per channel. The fused host takes the place of the last absorbed
    consumer (so a residual computed after the host is ready) and produces its value.
    Bindings stay within the device's storage-buffer limit, and the epilogue within
    :data:`EPILOGUE_MAX_STEPS`, :data:`EPILOGUE_MAX_LOADS` and :data:`EPILOGUE_MAX_OPERANDS`
    (the kernels inline it at each of their unrolled stores).
    """
    from .builder import Node, Value

    max_bindings = _max_bindings(context)
    max_bindings -= 1  # the tile kernels may bind one more buffer (e.g. a re-laid-out filter)
    out_ids = {v.id for v in outputs.values()}
    consumers: dict[int, list] = {}
    for node in nodes:
        for v in {v.id: v for v in node.inputs if v is not None}.values():
            consumers.setdefault(v.id, []).append(node)
    absorbed: set[int] = set()
    placed: dict[int, list] = {}  # id of the last absorbed consumer -> [reshape views..., fused host]
    dropped: set[int] = set()  # hosts moved to a later position
    for host in nodes:
        if host.op not in EPILOGUE_HOSTS or host.id in absorbed or len(host.outputs) != 1:
            continue
        if host.outputs[0].data_type not in ("float32", "float16"):
            continue
        inputs = list(host.inputs)
        steps = list(host.attrs.get("epilogue") or [])
        loads = sum(1 for st in steps if "input" in st and "axis" not in st)
        views: list = []
        bound: dict[int, Any] = {}  # an operand's id -> the Value bound for it (maybe re-made 1-D)
        v = host.outputs[0]
        last = None
        while len(steps) < EPILOGUE_MAX_STEPS:
            cs = consumers.get(v.id, [])
            if len(cs) != 1 or v.id in out_ids or cs[0].id in absorbed or cs[0].op in EPILOGUE_HOSTS:
                break
            got = _epilogue_step(host, v, cs[0])
            if got is None:
                break
            step, operand = got
            if operand is not None:
                per = bound.get(operand.id)
                if per is None and len(bound) >= EPILOGUE_MAX_OPERANDS:
                    break
                if per is None:
                    chan = _per_channel(host, v, operand)
                    if chan == "reshape":
                        chan = Value(operand.data_type, (v.shape[_chan_axis(host)],), "op")
                        views.append(Node("reshape", [operand], [chan], {"alias": True}, _view_label(cs[0])))
                        chan.producer = views[-1]
                    per = (chan, True) if chan is not None else (operand, False)
                chan, is_chan = per
                if is_chan:
                    step["axis"] = _chan_axis(host)
                elif loads + 1 > EPILOGUE_MAX_LOADS:
                    break
                else:
                    loads += 1
                idx = next((i for i, x in enumerate(inputs) if x is chan), None)
                if idx is None:
                    if len({x.id for x in inputs if x is not None}) + 2 > max_bindings:
                        break
                    inputs += [None] * (EPILOGUE_HOSTS[host.op] - len(inputs))
                    inputs.append(chan)
                    idx = len(inputs) - 1
                bound[operand.id] = per
                step["input"] = idx
            steps.append(step)
            last = cs[0]
            absorbed.add(last.id)
            v = last.outputs[0]
        if last is None:
            continue
        attrs = dict(host.attrs)
        attrs["epilogue"] = steps
        used = {x.id for x in inputs if x is not None}
        placed[last.id] = [n for n in views if n.outputs[0].id in used] + [Node(host.op, inputs, [v], attrs,
                                                                                    host.label)]
        dropped.add(host.id)
        if DEBUG >= 2:
            log.debug("fuse_epilogue: %s [%s] absorbs %s", host.op, host.label, [s["op"] for s in steps])
    if not placed:
        return nodes
    result = []
    for node in nodes:
        if node.id in dropped:
            continue
        if node.id in placed:
            result += placed[node.id]
        elif node.id not in absorbed:
            result.append(node)
    return result


def _view_label(node) -> str:
    """The label of a view the compiler adds for an operand of ``node``."""
    return f"{node.label}:view" if node.label else ""


def _max_bindings(context) -> int:
    """Storage buffers a kernel may bind on ``context``'s device (8, WebGPU's default, without one)."""
    if context is None:
        return 8
    return int(context.limits.get("max-storage-buffers-per-shader-stage", 8))


def _users(nodes: list) -> tuple[dict[int, list], dict[int, Any]]:
    """(value id -> the nodes that read it, value id -> the node that makes it)."""
    consumers: dict[int, list] = {}
    producer: dict[int, Any] = {}
    for node in nodes:
        for v in {v.id: v for v in node.inputs if v is not None}.values():
            consumers.setdefault(v.id, []).append(node)
        for v in node.outputs:
            producer[v.id] = node
    return consumers, producer


def _rewrite(nodes: list, replaced: dict, dropped: set) -> list:
    """``nodes`` with ``replaced`` (id -> new node) swapped in and ``dropped`` ids left out."""
    if not replaced and not dropped:
        return nodes
    return [replaced.get(n.id, n) for n in nodes if n.id not in dropped]


def swap_resample_conv(nodes: list, outputs: dict, context=None) -> list:
    """``conv1x1(resample_linear(x))`` becomes ``resample_linear(conv1x1(x))`` when the
    resample enlarges the image and the conv does not widen the channels.

    Both are linear and the bilinear weights of every output sum to one, so the two orders
    agree (bias included) up to floating-point rounding: ``resample(W x + b) = W resample(x)
    + b``. The conv then runs on the small image (a quarter of the pixels for a 2x upsampling)
    and the resample moves no more channels than before: the segmenter's decoder upsamples
    and then projects at each of its three stages. The conv must be a plain pointwise
    convolution (1x1, stride 1, no padding, one group, no epilogue yet) over the two
    resampled axes, and the resample must feed nothing else. ``WEBNN_GPU_PASSES=
    -swap_resample_conv`` keeps the graph's order (bit-for-bit the unswapped results).
    """
    from .builder import Node, Value
    from .ops.conv import _geometry as conv_geometry

    out_ids = {v.id for v in outputs.values()}
    consumers, producer = _users(nodes)
    replaced: dict[int, Any] = {}
    dropped: set[int] = set()
    for conv in nodes:
        if conv.op != "conv2d" or conv.attrs.get("epilogue") or len(conv.outputs) != 1:
            continue
        r = conv.inputs[0]
        rs = producer.get(r.id)
        if rs is None or rs.op != "resample2d" or rs.attrs.get("mode") != "linear" or r.id in out_ids:
            continue
        if len(consumers.get(r.id, [])) != 1 or any(v is r for v in conv.inputs[1:]):
            continue
        a = conv.attrs
        spatial = [1, 2] if a.get("input_layout") == "nhwc" else [2, 3]
        chan = 3 if a.get("input_layout") == "nhwc" else 1
        g = conv_geometry(conv)
        if (sorted(rs.attrs.get("axes", [])) != spatial or g["G"] != 1 or g["KH"] != 1 or g["KW"] != 1
                or g["sh"] != 1 or g["sw"] != 1 or g["pt"] != 0 or g["pl"] != 0 or g["OH"] != g["H"] or g["OW"] != g["W"]):
            continue
        x, y = rs.inputs[0], conv.outputs[0]
        if x.size >= r.size or y.shape[chan] > r.shape[chan]:
            continue  # not an enlargement, or the conv widens the channels (a costlier resample)
        low_shape = list(y.shape)
        for d in spatial:
            low_shape[d] = x.shape[d]
        low = Value(y.data_type, tuple(low_shape), "op")
        new_conv = Node("conv2d", [x] + list(conv.inputs[1:]), [low], dict(a), conv.label)
        low.producer = new_conv
        new_rs = Node("resample2d", [low], [y], dict(rs.attrs), rs.label)
        y.producer = new_rs
        # both take the conv's place in the order: the conv's filter and bias may be computed
        # after the resample (only there are all its inputs ready)
        replaced[conv.id] = [new_conv, new_rs]
        dropped.add(rs.id)
        if DEBUG >= 2:
            log.debug("swap_resample_conv: conv2d [%s] before resample2d [%s]", conv.label, rs.label)
    if not replaced:
        return nodes
    result: list = []
    for n in nodes:
        if n.id in replaced:
            result += replaced[n.id]
        elif n.id not in dropped:
            result.append(n)
    return result


def fuse_conv_input(nodes: list, outputs: dict, context=None) -> list:
    """Fold the element-wise op that makes a pointwise conv2d's input into the conv, which
    applies it as it loads that input: ``mul(x, s)`` with ``s`` one value per channel
    (``attrs["input_scale"]``: MobileNetV3's squeeze-and-excite), ``add(x, r)`` with ``r`` of
    the input's shape (``attrs["input_add"]``: a skip connection), or ``add(mul(x, s), r)``
    (both: the segmenter's decoder). The attributes hold the operands' indices in the conv's
    inputs. The folded values were written once and read once more, a kernel of their own,
    for arithmetic the conv does in registers. Each folded node must feed only that conv.
    """
    from .builder import Node
    from .ops.conv import input_prologue_ok

    max_bindings = _max_bindings(context)
    out_ids = {v.id for v in outputs.values()}
    consumers, producer = _users(nodes)

    def only_feeds(v, node) -> bool:
        cs = consumers.get(v.id, [])
        return v.id not in out_ids and len(cs) == 1 and cs[0] is node

    def scaled(v, consumer):
        """(x, s) when v = mul(x, s) feeds only ``consumer``, s per channel; else None."""
        m = producer.get(v.id)
        if m is None or m.op != "mul" or len(m.inputs) != 2 or not only_feeds(v, consumer):
            return None
        a, b = m.inputs
        for x, s in ((a, b), (b, a)):
            if tuple(x.shape) == tuple(v.shape) and x.data_type == v.data_type and tuple(s.shape) != tuple(v.shape):
                return m, x, s
        return None

    replaced: dict[int, Node] = {}
    dropped: set[int] = set()
    for conv in nodes:
        if conv.op != "conv2d" or conv.inputs[0] is None or "input_scale" in conv.attrs or "input_add" in conv.attrs:
            continue
        y = conv.inputs[0]
        if any(v is y for v in conv.inputs[1:]) or not only_feeds(y, conv):
            continue
        fused, x, s, r = [], None, None, None
        got = scaled(y, conv)
        if got is not None:
            m, x, s = got
            fused = [m]
        else:
            add = producer.get(y.id)
            if add is None or add.op != "add" or len(add.inputs) != 2:
                continue
            a, b = add.inputs
            same = [v.data_type == y.data_type and tuple(v.shape) == tuple(y.shape) for v in (a, b)]
            if a is b or not all(same):
                continue
            for u, w in ((a, b), (b, a)):  # a scaled operand first, wherever it is
                inner = scaled(u, add)
                if inner is not None:
                    m, x, s = inner
                    fused, r = [add, m], w
                    break
            else:
                fused, x, r = [add], a, b
        if not input_prologue_ok(conv, scale=s, residual=r):
            continue
        extra = [v for v in (s, r) if v is not None]
        inputs = [x] + list(conv.inputs[1:]) + extra
        # the conv's own bindings plus a re-laid-out filter, the parameters and the output
        if len({v.id for v in inputs if v is not None}) + 3 > max_bindings:
            continue
        attrs = dict(conv.attrs)
        # index 2 is the conv's bias: without one the slot stays None, the operands go after it
        base = max(len(conv.inputs), EPILOGUE_HOSTS["conv2d"])
        inputs = [x] + list(conv.inputs[1:]) + [None] * (base - len(conv.inputs)) + extra
        if s is not None:
            attrs["input_scale"] = base
        if r is not None:
            attrs["input_add"] = base + (1 if s is not None else 0)
        replaced[conv.id] = Node(conv.op, inputs, list(conv.outputs), attrs, conv.label)
        dropped.update(n.id for n in fused)
        if DEBUG >= 2:
            log.debug("fuse_conv_input: conv2d [%s] absorbs %s", conv.label, [n.op for n in fused])
    return _rewrite(nodes, replaced, dropped)


def _is_linear_doubling(node) -> bool:
    """Whether ``node`` is a linear resample2d doubling both of its axes (half-pixel centers,
    clamped: every input pixel's weights add up to exactly 4 over the output)."""
    if node.op != "resample2d" or node.attrs.get("mode") != "linear":
        return False
    x, y = node.inputs[0], node.outputs[0]
    return all(y.shape[a] == 2 * x.shape[a] for a in node.attrs["axes"])


def fuse_pool_input(nodes: list, outputs: dict, context=None) -> list:
    """Fold ``add(a, b)`` (same shapes) into the global average pool that alone consumes it:
    the pool's reduction reads both and adds them (``attrs["input_add"]`` = the index of ``b``
    in its inputs). The segmenter's decoder pools a skip connection's sum that nothing else
    reads; the sum was written and read back for nothing. When ``b`` is an exact 2x bilinear
    upsampling, the pool reads its small image instead and counts it four times
    (``attrs["input_add_scale"]`` = 4): the upsampling keeps the mean, so a quarter of the
    values give the same sum up to rounding.
    """
    from .builder import Node
    from .ops.pool import input_add_ok

    out_ids = {v.id for v in outputs.values()}
    consumers, producer = _users(nodes)
    replaced: dict[int, Node] = {}
    dropped: set[int] = set()
    for pool in nodes:
        if pool.op != "average_pool2d" or "input_add" in pool.attrs:
            continue
        y = pool.inputs[0]
        add = producer.get(y.id)
        cs = consumers.get(y.id, [])
        if add is None or add.op != "add" or y.id in out_ids or len(cs) != 1 or cs[0] is not pool:
            continue
        a, b = add.inputs
        if a is b or tuple(a.shape) != tuple(y.shape) or a.data_type != y.data_type:
            continue
        if tuple(b.shape) != tuple(y.shape):
            continue
        if len(y.shape) != 4 or y.shape[1] * y.shape[2] < 2:
            continue  # a 1x1 image has nothing to reduce: the pool is a copy, no reduction to host the add
        # An operand that is an exact 2x bilinear upsampling keeps its small image's mean: the
        # pool then reads that small image (a quarter of the values), counted four times.
        scale = 1
        for u, w in ((a, b), (b, a)):
            up = producer.get(w.id)
            if (up is not None and _is_linear_doubling(up)
                    and input_add_ok(Node(pool.op, [u], pool.outputs, pool.attrs), up.inputs[0], 4)):
                a, b, scale = u, up.inputs[0], 4
                break
        if not input_add_ok(Node(pool.op, [a], pool.outputs, pool.attrs), b, scale):
            continue
        attrs = dict(pool.attrs)
        attrs["input_add"] = 1
        if scale != 1:
            attrs["input_add_scale"] = scale
        replaced[pool.id] = Node(pool.op, [a, b], list(pool.outputs), attrs, pool.label)
        dropped.add(add.id)
        if DEBUG >= 2:
            log.debug("fuse_pool_input: %s [%s] absorbs add [%s]", pool.op, pool.label, add.label)
    return _rewrite(nodes, replaced, dropped)


def fuse_conv_pool(nodes: list, outputs: dict, context=None) -> list:
    """A global average pool of a depthwise conv2d's output becomes the conv's second output
    (``attrs["pool_output"]``): the conv kernel writes each invocation's per-channel sums of
    the outputs it computed, and a small reduction of those partials gives the mean, instead
    of a pass that reads the whole output again. That is the squeeze in MobileNetV3's
    squeeze-and-excite. The conv's output keeps its other consumers.
    """
    from .builder import Node
    from .ops.conv import pool_output_ok
    from .ops.pool import _is_global

    tuning = getattr(context, "_tuning", "default")
    _, producer = _users(nodes)
    replaced: dict[int, Node] = {}
    dropped: set[int] = set()
    for pool in nodes:
        if pool.op != "average_pool2d" or "input_add" in pool.attrs or pool.attrs.get("layout") != "nhwc":
            continue
        conv = producer.get(pool.inputs[0].id)
        if conv is None or conv.op != "conv2d" or conv.id in replaced or not _is_global(pool):
            continue
        if not pool_output_ok(conv, tuning):
            continue
        attrs = dict(conv.attrs)
        attrs["pool_output"] = True
        replaced[conv.id] = Node(conv.op, list(conv.inputs), [conv.outputs[0], pool.outputs[0]], attrs, conv.label)
        dropped.add(pool.id)
        if DEBUG >= 2:
            log.debug("fuse_conv_pool: conv2d [%s] also pools into [%s]", conv.label, pool.label)
    return _rewrite(nodes, replaced, dropped)


def fuse_conv_upsample(nodes: list, outputs: dict, context=None) -> list:
    """A skip add that ``fuse_conv_input`` folded into a pointwise conv, whose operand is an
    exact 2x bilinear upsampling read by nothing else, reads the small image instead: the
    conv's kernel interpolates as it loads (``attrs["input_add_up2"]``; a tile of one image
    row reads two rows of the small image), and the upsampled image is never written. The
    segmenter's decoder upsamples and adds at each of its three stages.
    """
    from .builder import Node
    from .ops.conv import upsampled_add_ok

    out_ids = {v.id for v in outputs.values()}
    consumers, producer = _users(nodes)
    replaced: dict[int, Node] = {}
    dropped: set[int] = set()
    for conv in nodes:
        if conv.op != "conv2d" or "input_add" not in conv.attrs or conv.attrs.get("input_add_up2"):
            continue
        i = conv.attrs["input_add"]
        r = conv.inputs[i]
        up = producer.get(r.id)
        if (up is None or not _is_linear_doubling(up) or sorted(up.attrs.get("axes", [])) != [1, 2]
                or r.id in out_ids or len(consumers.get(r.id, [])) != 1 or up.id in dropped
                or any(v is r for k, v in enumerate(conv.inputs) if k != i)):
            continue
        small = up.inputs[0]
        if not upsampled_add_ok(conv, small):
            continue
        inputs = list(conv.inputs)
        inputs[i] = small
        replaced[conv.id] = Node(conv.op, inputs, list(conv.outputs), {**conv.attrs, "input_add_up2": True},
                                 conv.label)
        dropped.add(up.id)
        if DEBUG >= 2:
            log.debug("fuse_conv_upsample: conv2d [%s] interpolates [%s]", conv.label, up.label)
    return _rewrite(nodes, replaced, dropped)


#: ``depthwise_project`` kernels store a block of pixels times all projected channels, each
#: through the projection's epilogue (several hundred inlined calls): the two epilogues may
#: load at most this many operands per output element between them (a residual add).
DWP_MAX_LOADS = 1


def _epilogue_loads(conv) -> int:
    """Epilogue steps of conv2d ``conv`` that load an operand per output element (not per
    channel; a depthwise conv's own input at the window's center is held, not loaded)."""
    from .ops.conv import _center, _geometry

    held = 0 if conv.op == "conv2d" and conv.attrs.get("groups", 1) > 1 and _center(_geometry(conv)) else None
    return sum(1 for st in conv.attrs.get("epilogue") or [] if "input" in st and "axis" not in st
               and st["input"] != held)


def fuse_depthwise_project(nodes: list, outputs: dict, context=None) -> list:
    """A depthwise conv2d and the pointwise conv2d (or the conv_transpose2d whose filter
    equals its stride) that reads its output become one ``depthwise_project`` node: one kernel
    computes the depthwise values of a pixel block, all channels, and projects them in
    registers, so the depthwise output is never written and read back (MobileNet's projection
    after a depthwise conv without squeeze-and-excite, and the segmenter's decoder stages and
    last layer). The node keeps both originals in ``attrs["depthwise"]`` / ``["project"]``;
    its inputs are theirs (the depthwise output aside). The depthwise output must feed nothing
    else; :func:`webnn_gpu.ops.conv.project_ok` says which pairs the kernel takes.
    """
    from .builder import Node
    from .ops.conv import expand_block_ok, expand_ok, project_ok, store_ok

    tuning = getattr(context, "_tuning", "default")
    max_bindings = _max_bindings(context)
    out_ids = {v.id for v in outputs.values()}
    consumers, producer = _users(nodes)
    replaced: dict[int, Node] = {}
    dropped: set[int] = set()

    def expansion(dw):
        """The pointwise conv making ``dw``'s input, when the kernel can compute it too."""
        v = dw.inputs[0]
        e = producer.get(v.id) if v is not None else None
        if (e is None or e.id in dropped or e.id in replaced or v.id in out_ids
                or len(consumers.get(v.id, [])) != 1 or not expand_ok(e, dw, tuning)):
            return None
        return e

    def fuse(attrs: dict, inputs: list, last) -> bool:
        """Put a depthwise_project node of ``attrs`` in ``last``'s place (every operand is ready
        there); False when its bindings would exceed the device's limit."""
        unique: list = []
        for v in inputs:
            if v is not None and all(v is not u for u in unique):
                unique.append(v)
        if len(unique) + len(last.outputs) > max_bindings:  # every input may be a storage binding, + outputs
            return False
        labels = [n.label for n in (attrs.get("expand"), attrs["depthwise"], attrs["project"])
                  if n is not None and n.label]
        fused = Node("depthwise_project", unique, list(last.outputs), attrs, "+".join(labels))
        for v in fused.outputs:
            v.producer = fused
        replaced[last.id] = fused
        if attrs.get("expand") is not None:
            dropped.add(attrs["expand"].id)
        if DEBUG >= 2:
            log.debug("fuse_depthwise_project: %s", fused.label)
        return True

    for proj in nodes:
        if proj.op not in ("conv2d", "conv_transpose2d") or not proj.inputs or proj.inputs[0] is None:
            continue
        mid = proj.inputs[0]
        dw = producer.get(mid.id)
        if dw is None or dw.id in dropped or mid.id in out_ids or len(consumers.get(mid.id, [])) != 1:
            continue
        if not project_ok(dw, proj, tuning) or _epilogue_loads(dw) + _epilogue_loads(proj) > DWP_MAX_LOADS:
            continue
        attrs = {"depthwise": dw, "project": proj}
        first = list(dw.inputs)
        e = expansion(dw)
        if e is not None and expand_block_ok(e, dw, proj, tuning):
            attrs["expand"] = e  # the inverted residual's expansion too: its output is never stored
            first = list(e.inputs) + list(dw.inputs[1:])
        if fuse(attrs, [*first, *proj.inputs[1:]], proj):
            dropped.add(dw.id)
    # a depthwise conv without a projection to take (squeeze-and-excite follows it): it still
    # computes its input, the expansion, in registers
    for dw in nodes:
        if dw.id in dropped or dw.id in replaced or dw.op != "conv2d" or dw.inputs[0] is None:
            continue
        e = expansion(dw)
        if e is not None and store_ok(dw, tuning, e.inputs[0].shape[3] // 4):
            fuse({"depthwise": dw, "project": None, "expand": e}, [*e.inputs, *dw.inputs[1:]], dw)
    return _rewrite(nodes, replaced, dropped)


def fuse_pool_partials(nodes: list, outputs: dict, context=None) -> list:
    """A global average pool (maybe with a fused skip add, ``fuse_pool_input``) reads the
    per-invocation channel sums of the kernels that produce its operands instead of the
    images: such a producer (a ``block`` conv2d, a pointwise conv2d on the tile kernel, a
    ``depthwise_project`` node with a pointwise projection; ``partials_ok``) gets a second
    output, [invocations, C] float32 partial sums (``attrs["pool_output"] = "partials"``, as
    ``fuse_squeeze_excite`` makes of a depthwise conv's), and the pool reduces those
    (``attrs["input_partials"]`` = the pixel count to divide by); its skip operand too when
    its producer can (``attrs["input_add_partials"]``), the upsampling's factor kept.
    The segmenter's decoder pools the sum of a skip connection and an upsampled image at each
    stage; the pools then read a tenth of the values, and ``fuse_squeeze_excite`` takes the
    means into the excitation's kernel. The producers' outputs keep their other readers.
    """
    from .builder import Node, Value
    from .ops.conv import partials_ok, pool_rows
    from .ops.pool import _is_global

    tuning = getattr(context, "_tuning", "default")
    _, producer = _users(nodes)
    replaced: dict[int, Node] = {}

    def partials(v):
        """The partial sums Value of ``v``'s producer, made its second output, or None."""
        conv = producer.get(v.id)
        if conv is None or conv.id in replaced or v is not conv.outputs[0] or not partials_ok(conv, tuning):
            return None
        part = Value("float32", (pool_rows(conv, tuning), v.shape[3]), "op")
        new_conv = Node(conv.op, list(conv.inputs), [v, part], {**conv.attrs, "pool_output": "partials"}, conv.label)
        for u in new_conv.outputs:
            u.producer = new_conv
        replaced[conv.id] = new_conv
        return part

    for pool in nodes:
        if (pool.op != "average_pool2d" or pool.attrs.get("layout") != "nhwc" or "input_partials" in pool.attrs
                or not _is_global(pool)):
            continue
        x = pool.inputs[0]
        k = pool.attrs.get("input_add")
        if k is not None and pool.inputs[k] is x:
            continue
        part = partials(x)
        if part is None:
            continue
        inputs = [part, *pool.inputs[1:]]
        attrs = {**pool.attrs, "input_partials": x.shape[1] * x.shape[2]}
        part2 = partials(pool.inputs[k]) if k is not None else None
        if part2 is not None:
            inputs[k] = part2
            attrs["input_add_partials"] = True
        replaced[pool.id] = Node(pool.op, inputs, list(pool.outputs), attrs, pool.label)
        if DEBUG >= 2:
            log.debug("fuse_pool_partials: %s [%s] from partial sums (%d operands)", pool.op, pool.label,
                      1 + (part2 is not None))
    return _rewrite(nodes, replaced, set())


def fuse_squeeze_excite(nodes: list, outputs: dict, context=None) -> list:
    """The excitation of squeeze-and-excite, two 1x1 conv2d on the pooled pixel (``fc2(fc1(
    pool))``), becomes one ``squeeze_excite`` node whose kernel runs both in one workgroup
    (``attrs["fc1"]`` / ``["fc2"]``: the original nodes). When the pool is a depthwise conv's
    second output (``fuse_conv_pool``) read by nothing else, the conv writes its per-block
    partial sums as that output (``attrs["pool_output"] = "partials"``) and the node takes
    the means too: three single-workgroup kernels, each mostly launch cost, become one. So
    does a pool of partial sums (``fuse_pool_partials``) read by nothing else, with the
    partials of its skip operand (``attrs["rows2"]`` rows, summed times ``["scale2"]``); on
    such a pool a single 1x1 conv (a channel attention without the hidden layer) runs there
    too (``attrs["fc2"]`` None).
    """
    from .builder import Node, Value
    from .ops.conv import pool_rows, squeeze_excite_ok

    tuning = getattr(context, "_tuning", "default")
    max_bindings = _max_bindings(context)
    out_ids = {v.id for v in outputs.values()}
    consumers, producer = _users(nodes)
    replaced: dict[int, Node] = {}
    dropped: set[int] = set()

    def pair_head(fc) -> bool:
        """Whether ``fc`` is the first layer of a two-layer excitation (found as its second)."""
        users = consumers.get(fc.outputs[0].id, [])
        return (len(fc.outputs) == 1 and fc.outputs[0].id not in out_ids and len(users) == 1
                and squeeze_excite_ok(fc, users[0]))

    for fc2 in nodes:
        if fc2.op != "conv2d" or not fc2.inputs or fc2.inputs[0] is None or fc2.id in dropped:
            continue
        mid = fc2.inputs[0]
        fc1 = producer.get(mid.id)
        if fc1 is not None and fc1.op == "average_pool2d" and "input_partials" in fc1.attrs:
            # one layer on a pool of partial sums (a channel attention's sigmoid): fc2 is None
            if not squeeze_excite_ok(fc2, None) or pair_head(fc2):
                continue
            fc1, fc2 = fc2, None
        elif (fc1 is None or fc1.id in dropped or fc1.id in replaced or mid.id in out_ids
              or len(consumers.get(mid.id, [])) != 1):
            continue  # (a conv already fused as the second layer of another excitation stays there)
        elif not squeeze_excite_ok(fc1, fc2):
            continue
        last = fc2 if fc2 is not None else fc1
        src, rows, count, new_conv = fc1.inputs[0], 1, 1, None
        two: dict = {"rows2": 0, "scale2": 1.0}
        pool = None
        conv = producer.get(src.id)
        dw = conv.attrs["depthwise"] if conv is not None and conv.op == "depthwise_project" else conv
        only = src.id not in out_ids and len(consumers.get(src.id, [])) == 1
        if (only and conv is not None and conv.op == "average_pool2d" and "input_partials" in conv.attrs
                and ("input_add" not in conv.attrs or conv.attrs.get("input_add_partials"))):
            # a pool of partial sums (fuse_pool_partials): its means are taken here
            pool = conv
            src, rows, count = pool.inputs[0], pool.inputs[0].shape[0], pool.attrs["input_partials"]
            if "input_add" in pool.attrs:
                src2 = pool.inputs[pool.attrs["input_add"]]
                two = {"src2": src2, "rows2": src2.shape[0], "scale2": float(pool.attrs.get("input_add_scale", 1))}
            conv = None
        elif (conv is not None and dw is not None and dw.op == "conv2d" and dw.attrs.get("pool_output") is True
                and len(conv.outputs) == 2 and src is conv.outputs[1] and only and conv.id not in replaced):
            g_out = conv.outputs[0]
            rows = pool_rows(conv, tuning)
            count = g_out.shape[1] * g_out.shape[2]
            src = Value("float32", (rows, src.shape[3]), "op")
            attrs = dict(dw.attrs)
            attrs["pool_output"] = "partials"
            new_dw = Node(dw.op, list(dw.inputs), [dw.outputs[0], src], attrs, dw.label)
            if conv is dw:
                new_conv = new_dw
            else:  # the depthwise conv inside a depthwise_project node (its expansion fused)
                new_conv = Node(conv.op, list(conv.inputs), list(new_dw.outputs), {**conv.attrs, "depthwise": new_dw},
                                conv.label)
        if fc2 is None and pool is None:
            continue  # a lone 1x1 conv on a pooled vector gains nothing here
        inputs: list = []
        for v in [src, two.get("src2"), *fc1.inputs[1:], *(fc2.inputs[1:] if fc2 is not None else [])]:
            if v is not None and all(v is not u for u in inputs):
                inputs.append(v)
        if len(inputs) + 1 > max_bindings:
            continue
        if conv is not None and new_conv is not None:
            for v in new_conv.outputs:
                v.producer = new_conv
            replaced[conv.id] = new_conv
        if pool is not None:
            dropped.add(pool.id)
        fused = Node("squeeze_excite", inputs, list(last.outputs),
                     {"fc1": fc1, "fc2": fc2, "rows": rows, "count": count, "rows2": two["rows2"],
                      "scale2": two["scale2"]}, fc1.label or last.label)
        for v in fused.outputs:
            v.producer = fused
        replaced[last.id] = fused
        if fc2 is not None:
            dropped.add(fc1.id)
        if DEBUG >= 2:
            log.debug("fuse_squeeze_excite: [%s] + [%s] (%d rows of partials)", fc1.label, last.label, rows)
    return _rewrite(nodes, replaced, dropped)


from ._rules_nchw import compose_transposes, nchw_conv_to_nhwc  # noqa: E402  (NCHW graphs, ONNX)

PASSES = [dead_code, fold_constants, nchw_conv_to_nhwc, compose_transposes, swap_resample_conv, fuse_hard_swish,
          fuse_epilogue, fuse_conv_input, fuse_pool_input, fuse_conv_upsample, fuse_conv_pool, fuse_depthwise_project, fuse_pool_partials,
          fuse_squeeze_excite, fuse_elementwise]


def _enabled(p) -> bool:
    """Whether pass ``p`` runs: ``WEBNN_GPU_PASSES`` lists passes to switch off by name
    (``-fuse_epilogue,-fold_constants``), ``-all`` switches every one off but :func:`dead_code`."""
    off = {s.strip().lstrip("-") for s in os.environ.get("WEBNN_GPU_PASSES", "").split(",") if s.strip()}
    return p is dead_code or (p.__name__ not in off and "all" not in off)


def check_order(nodes: list, outputs: dict, after: str = "") -> None:
    """Raise AssertionError unless every value a node reads (and every output) is computed by
    an earlier node of ``nodes`` (or is a graph input or constant): a pass that breaks the
    order would make a kernel read a buffer not yet written, a silent wrong result."""
    ready: set[int] = set()
    for node in nodes:
        for v in node.inputs:
            if v is not None and v.kind == "op" and v.id not in ready:
                raise AssertionError(f"compiler pass {after}: {node.op} [{node.label}] reads {v!r} before "
                                     "any node computes it")
        ready.update(v.id for v in node.outputs)
    for name, v in outputs.items():
        if v.kind == "op" and v.id not in ready:
            raise AssertionError(f"compiler pass {after}: output {name!r} ({v!r}) is computed by no node")


def run_passes(nodes: list, outputs: dict, context=None) -> list:
    """Run every pass of :data:`PASSES` in order (minus those ``WEBNN_GPU_PASSES`` switches off),
    checking after each that the node list is still in a valid order (:func:`check_order`)."""
    for p in PASSES:
        if _enabled(p):
            nodes = p(nodes, outputs, context)
            check_order(nodes, outputs, p.__name__)
    if DEBUG >= 1:
        log.info("graph after passes (%d nodes):\n%s", len(nodes), "\n".join(map(repr, nodes)))
    return nodes
