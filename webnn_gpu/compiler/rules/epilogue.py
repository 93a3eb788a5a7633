"""Epilogue fusion: element-wise consumers of conv2d, conv_transpose2d, matmul and gemm run in
their host's kernel as it stores (format: :mod:`webnn_gpu.ops._epilogue`)."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from ... import _env
from ..._env import DEBUG
from ..._ir import GraphView, Node, Value
from ...ops._epilogue import HOST_SLOTS
from ._common import _is_linear_doubling, _max_bindings, _view_label

log = logging.getLogger("webnn_gpu")


#: operators whose kernels apply ``attrs["epilogue"]``, with the number of input slots their
#: own operands take (conv bias and gemm's c are optional inputs at index 2: epilogue operands
#: go after them, the slot stays None when the option is absent): the kernels' own table
EPILOGUE_HOSTS = HOST_SLOTS
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
#: Kernels that store one element (or one vec4) per call site and unroll at most 16 of them
#: (``shaders/_lib/epilogue.wgsl``: windowed pools, resample2d, normalizations) may read two
#: operands per element: a per-channel operand (they pass no channel coordinate, so a
#: prelu's slope is a load) and a residual.
SCALAR_HOSTS = ("average_pool2d", "l2_pool2d", "max_pool2d", "resample2d", "batch_normalization",
                "instance_normalization", "layer_normalization", "rms_normalization", "gather")
SCALAR_HOST_MAX_LOADS = 2
#: ... and it binds at most this many operands (each read per channel is still loaded where
#: the kernel hoists it, once per stored column: about a third of a second of compile each)
EPILOGUE_MAX_OPERANDS = 4


def _chan_axis(host) -> int | None:
    """The output axis whose coordinate ``host``'s kernels hold (``ch`` of the epilogue)."""
    if host.op in ("conv2d", "conv_transpose2d"):
        return 1 if host.attrs.get("input_layout", "nchw") == "nchw" else 3
    if host.op in ("matmul", "gemm"):
        return len(host.outputs[0].shape) - 1
    if host.op.endswith("_pool2d"):
        return 1 if host.attrs.get("layout", "nchw") == "nchw" else 3
    if host.op == "batch_normalization":
        return host.attrs["axis"]
    if host.op == "instance_normalization":
        return host.attrs["param_axes"][0]
    return None


def _per_channel(host, v, operand, axis: int | None = None):
    """``operand`` as a 1-D Value along the host's channel axis (or ``axis``) when it varies
    along no other axis of ``v``'s shape (the same values read at the channel coordinate): the
    operand itself when already 1-D of the channels' size, a new constant for host data (a
    scalar broadcast to every channel), ``"reshape"`` for a computed operand of the channels'
    size (a view), else None."""
    axis = _chan_axis(host) if axis is None else axis
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
    from ...ops import _epilogue
    from ...ops.elementwise import _OPTION_OPS, _TABLE

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


def _epilogue_steps(host, v, consumer) -> list | None:
    """The epilogue steps (each with its operand to bind, or None) that ``consumer`` of
    ``host``'s value ``v`` makes: one for an element-wise operator (:func:`_epilogue_step`);
    a float16 1x1 depthwise conv2d (:func:`~webnn_gpu.compiler.rules.canonical.scale_chain`:
    ``depthwise_to_scale`` rewrites float32's before this rule) its ``mul`` and ``add``, taken
    together or not at all (the host computes them in f32 and rounds once, as the conv did;
    ``WEBNN_GPU_FORCE_SCALE_STEPS=off``: not taken); None for anything else."""
    if consumer.op in EPILOGUE_HOSTS:
        if (consumer.op != "conv2d" or consumer.outputs[0].data_type != "float16"
                or _env.force_choice("scale_steps", ("off",)) == "off"):
            return None
        from .canonical import scale_chain

        chain = scale_chain(consumer)
        if chain is None:
            return None
        made = []
        for node in chain:
            got = _epilogue_step(host, v, node)
            if got is None:
                return None
            made.append(got)
            v = node.outputs[0]
        return made
    got = _epilogue_step(host, v, consumer)
    return None if got is None else [got]


def fuse_epilogue(nodes: list, outputs: dict, context=None) -> list:
    """Fold the element-wise consumers of the kernels that host an epilogue into them
    (conv2d, conv_transpose2d, matmul, gemm, resample2d, normalizations, windowed pools:
    :func:`webnn_gpu.ops._epilogue.hosts`).

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
    from ...ops import _epilogue

    max_bindings = _max_bindings(context)
    max_bindings -= 1  # the tile kernels may bind one more buffer (e.g. a re-laid-out filter)
    g = GraphView(nodes, outputs)
    absorbed: set[int] = set()
    placed: dict[int, list] = {}  # id of the last absorbed consumer -> [reshape views..., fused host]
    dropped: set[int] = set()  # hosts moved to a later position
    for host in nodes:
        if host.op not in EPILOGUE_HOSTS or host.id in absorbed or not _epilogue.hosts(host):
            continue
        if host.outputs[0].data_type not in ("float32", "float16"):
            continue
        inputs = list(host.inputs)
        steps = list(host.attrs.get("epilogue") or [])
        loads = sum(1 for st in steps if "input" in st and "axis" not in st)
        max_loads = SCALAR_HOST_MAX_LOADS if host.op in SCALAR_HOSTS else EPILOGUE_MAX_LOADS
        views: list = []
        bound: dict[int, Any] = {}  # an operand's id -> the Value bound for it (maybe re-made 1-D)
        v = host.outputs[0]
        last = None
        while len(steps) < EPILOGUE_MAX_STEPS:
            cs = g.consumers(v)
            if len(cs) != 1 or g.is_output(v) or cs[0].id in absorbed:
                break
            made = _epilogue_steps(host, v, cs[0])
            if made is None or (not steps and cs[0].op == "add" and _is_linear_doubling(host)):
                break  # (a 2x upsampling's add is left to fuse_conv_upsample / fuse_pool_input)
            if len(steps) + len(made) > EPILOGUE_MAX_STEPS:
                break
            # a consumer's steps are taken together or not at all: the state before them
            before = (list(inputs), dict(bound), loads, len(views), len(steps))
            for step, operand in made:
                step = dict(step)
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
                    elif loads + 1 > max_loads:
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
            else:
                last = cs[0]
                absorbed.add(last.id)
                v = last.outputs[0]
                continue
            inputs, bound, loads = before[0], before[1], before[2]
            del views[before[3]:], steps[before[4]:]
            break
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
    # each absorbed consumer leaves, the last of a chain for its fused host (and views)
    return g.replace(placed, dropped | (absorbed - placed.keys()))


def side_chain(g: GraphView, host, v, first: list, axis: int, n_inputs: int, taken=(),
               loads: int = 0) -> tuple[list, list, list]:
    """The element-wise chain over ``v`` that ``host`` can store beside its own output (a
    "side" map: ``fuse_pool_map``, ``fuse_concat_map``), as (steps, operands, chain nodes).

    The chain starts at the first of ``first`` (readers of ``v``) that makes an epilogue step
    and follows single readers that are not graph outputs, each a float unary element-wise
    operator or a binary one whose other operand is a constant varying along ``axis`` alone
    (bound 1-D, read at that coordinate; a scalar included), or, up to ``loads`` of them, a
    constant or graph input of another broadcast shape (read per element); a step's
    ``"input"`` counts from ``n_inputs`` (the host's own inputs come first). At most
    :data:`EPILOGUE_MAX_STEPS` steps and :data:`EPILOGUE_MAX_OPERANDS` operands; nodes in
    ``taken`` are left alone.
    """
    steps: list = []
    operands: list = []
    chain: list = []
    cs = [c for c in first if c.id not in taken]
    while cs and len(steps) < EPILOGUE_MAX_STEPS:
        cur = chain[-1].outputs[0] if chain else v
        step: list | None = None
        bind: list = []
        for c in cs:  # the first reader that makes its steps (all of them) starts the chain
            made = _epilogue_steps(host, cur, c)
            if made is None or len(steps) + len(made) > EPILOGUE_MAX_STEPS:
                continue
            step, bind = [], []
            for st, operand in made:
                if operand is not None:
                    chan = _per_channel(host, cur, operand, axis)
                    whole = (not isinstance(chan, Value) and operand.kind in ("constant", "input")
                             and sum("axis" not in s for s in steps + step if "input" in s) < loads)
                    if (not (isinstance(chan, Value) and chan.kind == "constant") and not whole
                            or len(operands) + len(bind) >= EPILOGUE_MAX_OPERANDS):
                        step = None  # (read per element, or computed: not a step a side map takes)
                        break
                    bind.append(operand if whole else chan)
                    st = {**st, "input": n_inputs + len(operands) + len(bind) - 1}
                    if not whole:
                        st["axis"] = axis
                step.append(st)
            if step is not None:
                break
        if not step:
            break
        operands.extend(bind)
        steps.extend(step)
        chain.append(c)
        y = c.outputs[0]
        cs = g.consumers(y)
        if g.is_output(y) or len(cs) != 1 or cs[0].id in taken:
            break  # y ends the chain: read by several, or a graph output
    return steps, operands, chain
