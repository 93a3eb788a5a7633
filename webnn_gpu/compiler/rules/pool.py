"""Pool rules: a global average pool sums its operand's add as it loads, or reduces the
per-invocation channel sums its operands' producers write; a windowed pool stores an
element-wise chain of its input or output beside its own output (a side map)."""

from __future__ import annotations

import logging

from ..._env import DEBUG
from ..._ir import GraphView, Node, Value
from ._common import _is_linear_doubling

log = logging.getLogger("webnn_gpu")


def fuse_pool_input(nodes: list, outputs: dict, context=None) -> list:
    """Fold ``add(a, b)`` (same shapes) into the global average pool that alone consumes it:
    the pool's reduction reads both and adds them (``attrs["input_add"]`` = the index of ``b``
    in its inputs). The segmenter's decoder pools a skip connection's sum that nothing else
    reads; the sum was written and read back for nothing. When ``b`` is an exact 2x bilinear
    upsampling, the pool reads its small image instead and counts it four times
    (``attrs["input_add_scale"]`` = 4): the upsampling keeps the mean, so a quarter of the
    values give the same sum up to rounding.
    """
    from ...ops.pool import input_add_ok

    g = GraphView(nodes, outputs)
    replaced: dict[int, Node] = {}
    dropped: set[int] = set()
    for pool in nodes:
        if pool.op != "average_pool2d" or "input_add" in pool.attrs:
            continue
        y = pool.inputs[0]
        add = g.producer(y)
        cs = g.consumers(y)
        if add is None or add.op != "add" or g.is_output(y) or len(cs) != 1 or cs[0] is not pool:
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
            up = g.producer(w)
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
    return g.replace(replaced, dropped)


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
    from ...ops.conv import partials_ok, pool_rows
    from ...ops.pool import _is_global

    tuning = getattr(context, "_tuning", "default")
    g = GraphView(nodes, outputs)
    replaced: dict[int, Node] = {}

    def partials(v):
        """The partial sums Value of ``v``'s producer, made its second output, or None."""
        conv = g.producer(v)
        if conv is None or conv.id in replaced or v is not conv.outputs[0] or not partials_ok(conv, tuning):
            return None
        part = Value("float32", (pool_rows(conv, tuning, getattr(context, "_subgroup", 0)), v.shape[3]), "op")
        new_conv = Node(conv.op, list(conv.inputs), [v, part], {**conv.attrs, "pool_output": "partials"}, conv.label)
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
    return g.replace(replaced, set())


def fuse_pool_map(nodes: list, outputs: dict, context=None) -> list:
    """A windowed pool whose windows tile its input (each element read by exactly one window:
    ``side_ok``) stores a chain of element-wise operators over that same input as it loads
    it: the pool gets a second output, the chain's last value, and ``attrs["side"]``, the
    chain as epilogue steps over the input element (:mod:`webnn_gpu.ops._epilogue`;
    ``attrs["side_of"]`` = ``"input"``). Failing that, a pool whose output is read by a chain
    and by other readers (or is a graph output) stores the chain over its output as it
    stores it (``"output"``; any windows): DenseNet's stem and transition pools feed the next
    layer's normalization and the dense block's concat.

    Pattern: ``x`` read by the pool and by an element-wise chain (float unary operators and
    binary ones whose other operand is a constant varying along the channel axis alone: a
    prelu's slope, a per-channel scale or shift), each value of the chain but the last read
    by its next operator alone and no graph output. A chain that a producing kernel could
    take as its epilogue was taken by ``fuse_epilogue`` (``x`` then had one reader); this
    rule takes the chain next to a pool reading the same value (BlazeFace-style blocks:
    ``prelu(x) * s + b`` feeds a stride-2 conv while ``max_pool2d(x)`` feeds the residual),
    which was an element-wise kernel reading ``x`` again. The fused node stands where the
    later of the pool and the chain's last operator stood, or the earlier where the other's
    readers come before it; where neither place keeps the order, the rule does not fire.
    Near misses: a chain value read elsewhere or a graph output in the middle, an operand
    read per element (a residual) or computed, windows that overlap, skip or pad, a layout
    or data type the vec4 pool kernel does not take.
    """
    from ...ops.pool import f16_words, side_ok
    from .epilogue import side_chain

    tuning = getattr(context, "_tuning", "default")
    words = f16_words(tuning, getattr(context, "features", ()))
    g = GraphView(nodes, outputs)
    index = {n.id: i for i, n in enumerate(nodes)}
    taken: set[int] = set()
    replaced: dict[int, Node] = {}
    dropped: set[int] = set()
    for pool in nodes:
        if pool.id in taken or not side_ok(pool, "output", words):
            continue
        x = pool.inputs[0]
        n_own = len(pool.inputs)
        steps: list = []
        operands: list = []
        chain: list = []
        if side_ok(pool, "input", words):
            steps, operands, chain = side_chain(g, pool, x, [c for c in g.consumers(x) if c is not pool], 3, n_own,
                                                taken)
        at = None
        if chain:
            y = chain[-1].outputs[0]
            # where the fused node stands: after every input's producer, before every reader
            ready = max((index[p.id] for p in map(g.producer, pool.inputs) if p is not None), default=-1)
            first_reader = min((index[c.id] for c in g.consumers(pool.outputs[0]) + g.consumers(y)),
                               default=len(nodes))
            at = next((n for n in sorted((pool, chain[-1]), key=lambda n: -index[n.id])
                       if ready < index[n.id] < first_reader), None)
        side_of = "input"
        if at is None:  # the map of the output, read elsewhere too (else fuse_epilogue took the chain)
            p = pool.outputs[0]
            readers = g.consumers(p)
            if not side_ok(pool, "output", words) or (len(readers) < 2 and not g.is_output(p)):
                continue
            steps, operands, chain = side_chain(g, pool, p, readers, 3, n_own, taken)
            if not chain or p.data_type == "float16" and _left_to_conv_input(g, chain, tuning):
                continue
            at, side_of = pool, "output"
        inputs = list(pool.inputs) + operands
        y = chain[-1].outputs[0]
        attrs = {**pool.attrs, "side": steps, "side_of": side_of}
        label = "+".join(dict.fromkeys(n.label for n in (pool, *chain) if n.label))
        replaced[at.id] = Node(pool.op, inputs, [pool.outputs[0], y], attrs, label)
        dropped.update(n.id for n in (pool, *chain) if n is not at)
        taken.update(n.id for n in (pool, *chain))
        if DEBUG >= 2:
            log.debug("fuse_pool_map: %s [%s] stores %s of its %s", pool.op, pool.label, [s["op"] for s in steps],
                      side_of)
    return g.replace(replaced, dropped)


def _left_to_conv_input(g: GraphView, chain: list, tuning: str) -> bool:
    """Whether an output map's ``chain`` is one relu read only by convs that apply it as they
    load (``fuse_conv_input_relu``, later: :func:`~webnn_gpu.compiler.rules.conv.input_relu_readers`):
    the map would store a value that conv does without, and keep the pool's kernel that
    ``fuse_pool_residual`` may fold into the branch it adds (Keras Xception's residual pools
    in float16: 75 kernels without such maps, 78 with)."""
    from .conv import input_relu_readers

    return len(chain) == 1 and input_relu_readers(g, chain[0], tuning) is not None


#: attributes of a fused node holding original nodes whose epilogues its kernel applies
#: (``depthwise_project``: the expansion, the depthwise conv and the projection)
_PARTS = ("expand", "depthwise", "project")


def _pooled_reader(node, p, x, pool: dict, key: str = "pool"):
    """``node`` reading ``x`` through ``pool`` where one of its epilogue steps reads ``p`` (the
    pool's output; see :func:`fuse_pool_residual`), or None where it cannot. ``key`` names the
    step's entry that holds ``pool``: ``"pool"``, or ``"up2"`` (``fuse_upsampled_residual``:
    ``p`` the 2x upsampling of ``x``)."""
    from ...ops._epilogue import HOST_SLOTS, hosts

    if node.op == "depthwise_project":
        parts = {k: node.attrs.get(k) for k in _PARTS if node.attrs.get(k) is not None}
        readers = [k for k, n in parts.items() if any(v is p for v in n.inputs)]
        if len(readers) != 1:
            return None
        new = _pooled_reader(parts[readers[0]], p, x, pool, key)
        if new is None:
            return None
        inputs: list = []
        for v in node.inputs:
            v = x if v is p else v
            if all(v is not u for u in inputs):
                inputs.append(v)
        return Node(node.op, inputs, list(node.outputs), {**node.attrs, readers[0]: new}, node.label)
    if node.op not in HOST_SLOTS or not hosts(node) or node.attrs.get("side"):
        return None
    at = [i for i, v in enumerate(node.inputs) if v is p]
    steps = list(node.attrs.get("epilogue") or [])
    if len(at) != 1 or at[0] < HOST_SLOTS[node.op]:
        return None  # p is the host's own operand (its image, a bias), not only an epilogue's
    k = [n for n, st in enumerate(steps) if st.get("input") == at[0]]
    if len(k) != 1 or "pool" in steps[k[0]] or "up2" in steps[k[0]] or steps[k[0]].get("axis") is not None:
        return None
    steps[k[0]] = {**steps[k[0]], key: pool}
    inputs = list(node.inputs)
    inputs[at[0]] = x
    return Node(node.op, inputs, list(node.outputs), {**node.attrs, "epilogue": steps}, node.label)


def _adding_producer(g: GraphView, pool, x, spec: dict, max_bindings: int):
    """The producer of the value a pool's epilogue adds first (``add(pool(x), r)``, the pool
    ahead of ``r``'s producer in the graph, so ``fuse_epilogue`` gave the add to the pool),
    rewritten to add the window of ``x`` itself and apply the pool's other steps (operands read
    per channel only), making the pool's output in the pool's place; or None."""
    from ...ops._epilogue import HOST_SLOTS, hosts
    from .conv import DWP_MAX_LOADS, _epilogue_loads
    from .epilogue import EPILOGUE_MAX_LOADS, EPILOGUE_MAX_OPERANDS, EPILOGUE_MAX_STEPS, _chan_axis

    steps = list(pool.attrs.get("epilogue") or [])
    if not steps or steps[0].get("op") != "add" or set(steps[0]) - {"op", "input", "reverse"}:
        return None
    i, y = steps[0]["input"], pool.outputs[0]
    r = pool.inputs[i] if isinstance(i, int) and 0 < i < len(pool.inputs) else None
    if (r is None or r is x or tuple(r.shape) != tuple(y.shape) or r.data_type != y.data_type
            or any(st.get("input") == i for st in steps[1:])
            or any("input" in st and st.get("axis") != _chan_axis(pool) for st in steps[1:])):
        return None  # (a + r == r + a exactly: the order of the add's operands does not matter)
    host = g.producer(r)
    if host is None or g.is_output(r) or g.consumers(r) != [pool] or host.outputs != [r]:
        return None
    target = host.attrs.get("project") if host.op == "depthwise_project" else host
    if (target is None or target.op not in HOST_SLOTS or not hosts(target) or target.attrs.get("side")
            or target.outputs[0] is not r or _chan_axis(target) != _chan_axis(pool)):
        return None
    own = list(target.attrs.get("epilogue") or [])
    loads = _epilogue_loads(target) + (_epilogue_loads(host.attrs["depthwise"]) if target is not host else 0)
    inputs = list(target.inputs) + [None] * (HOST_SLOTS[target.op] - len(target.inputs)) + [x]
    new = [*own, {"op": "add", "input": len(inputs) - 1, "pool": spec}]
    for st in steps[1:]:
        st = dict(st)
        if "input" in st:
            inputs.append(pool.inputs[st["input"]])
            st["input"] = len(inputs) - 1
        new.append(st)
    operands = {id(inputs[st["input"]]) for st in new if "input" in st}
    if (len(new) > EPILOGUE_MAX_STEPS or len(operands) > EPILOGUE_MAX_OPERANDS
            or loads + 1 > (DWP_MAX_LOADS if target is not host else EPILOGUE_MAX_LOADS)):
        return None
    made = Node(target.op, inputs, [y], {**target.attrs, "epilogue": new}, target.label)
    if target is host:
        fused = made
    else:
        unique: list = []
        for v in [*host.inputs, *inputs[len(target.inputs):]]:
            if v is not None and all(v is not u for u in unique):
                unique.append(v)
        fused = Node(host.op, unique, [y], {**host.attrs, "project": made}, host.label)
    if len({v.id for v in fused.inputs if v is not None}) + 2 > max_bindings:
        return None
    return fused


def fuse_pool_residual(nodes: list, outputs: dict, context=None) -> list:
    """A windowed max or average pool read only by an epilogue step of one kernel (the
    residual add of a strided block, maybe through a zero pad of its channels: ``"pad"``) is
    computed where that step reads it: the step reads the pool's input over the window
    (``"pool"``, :mod:`webnn_gpu.ops._epilogue`) and the pool's kernel goes. BlazeBlock-style
    models downsample with ``depthwise(stride 2) -> 1x1 conv -> add(max_pool2d(x)) -> prelu``;
    the pool was a launch of its own and its output written and read back. The host is any
    epilogue host (conv2d, matmul, ..., a ``depthwise_project`` node's projection).

    Where the pool came first in the graph, ``fuse_epilogue`` gave it the add (a windowed pool
    hosts an epilogue): ``add(pool(x), r)`` with ``r`` read by the pool alone; then ``r``'s
    producer adds the window of ``x`` and applies the pool's other steps (operands read per
    channel only), within the epilogue's bounds, and makes the pool's output in its place.

    Conditions (:func:`webnn_gpu.ops._epilogue.pool_step_ok`): a 4-D float pool without
    dilation, fused input or side map, of at most ``POOL_MAX_TAPS`` taps, each
    window holding an element of the input (max) or lying inside it (average; float32 only:
    in float16 the pool's output was rounded before the add). Near misses: a pool read twice
    or a graph output, a pool read as a host's own operand (its image), a step reading it
    twice or per channel, a window reaching past the input where it changes the divisor.
    """
    from ...ops._epilogue import pool_step_ok
    from ._common import _max_bindings

    g = GraphView(nodes, outputs)
    replaced: dict[int, Node] = {}
    dropped: set[int] = set()
    for pool in nodes:
        if (pool.op not in ("max_pool2d", "average_pool2d") or len(pool.outputs) != 1 or not pool.inputs
                or pool.id in replaced or pool.id in dropped):
            continue
        a = pool.attrs
        p, x = pool.outputs[0], pool.inputs[0]
        if (any(k in a for k in ("side", "input_add", "input_partials"))
                or list(a.get("dilations", [1, 1])) != [1, 1] or p.data_type not in ("float32", "float16")
                or pool.op == "average_pool2d" and p.data_type != "float32"):
            continue
        spec = {"op": "max" if pool.op == "max_pool2d" else "average", "window": list(a["window"]),
                "strides": list(a["strides"]), "padding": list(a["padding"]), "layout": a.get("layout", "nchw"),
                "shape": list(p.shape)}
        if not pool_step_ok(tuple(x.shape), spec):
            continue
        if a.get("epilogue"):  # the pool adds the other branch itself: its producer adds the window
            made = _adding_producer(g, pool, x, spec, _max_bindings(context) - 1)
            host = g.producer(pool.inputs[pool.attrs["epilogue"][0]["input"]]) if made is not None else None
            if host is None or host.id in replaced or host.id in dropped:
                continue
            replaced[pool.id] = made
            dropped.add(host.id)
            continue
        host = g.sole_consumer(p)
        if host is None or host.id in replaced or host.id in dropped or len(pool.inputs) != 1:
            continue
        new = _pooled_reader(host, p, x, spec)
        if new is None:
            continue
        replaced[host.id] = new
        dropped.add(pool.id)
        if DEBUG >= 2:
            log.debug("fuse_pool_residual: %s [%s] read by %s [%s]", pool.op, pool.label, host.op, host.label)
    return g.replace(replaced, dropped)
