"""Products of the same input by different constant matrices as one fused operator, ``siblings``.

Pattern (after :func:`~webnn_gpu.compiler.rules.epilogue.fuse_epilogue`, which has made each
product's bias and activation its epilogue steps)::

    y_0 = ep_0(conv2d(x, W_0) + b_0)     NHWC, one group, constant W_0 [O_0, KH, KW, C] (any layout)
    y_1 = ep_1(conv2d(x, W_1) + b_1)     the same x (the same value, not another view of it),
    ...                                  window, strides, padding and dilations; constant W_1

or matmul / gemm of the same A by constant 2-D B (a transformer's projections of one input;
not products of a few rows that ``matmul/matvec.wgsl`` takes on the device and ``fuse_heads``
merges: :func:`heads_take`), where the epilogues are the same steps apart from per-channel
constants (a bias, PReLU slopes, a per-channel scale): a detector's classifier and box
regressor on one feature map, a block's two branches. Each product alone is a tile launch, and on lavapipe a launch costs about 45-70
us of wall time whatever it computes, most of a small head's time. As one ``siblings`` node the
filters are side by side (each padded to a multiple of 4 columns) and the node is one
``matmul/tile.wgsl`` launch whose column blocks are stored into the products' own outputs
(the tile kernel's ``split`` store: :func:`webnn_gpu.ops.linalg.tile_kernel`); each output
holds the sums its own launch would store (the same terms; where the tile shape differs from
the separate launch's, the last bit may differ).

Operator: ``siblings`` (:class:`SiblingsAttrs`), legality :func:`sibling_ok` and
:func:`sibling_group`, rule :func:`fuse_siblings`, lowering :func:`lower_siblings`.
``WEBNN_GPU_FORCE_SIBLINGS=off`` (read when the rule runs) leaves the products apart.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .. import _env
from .._ir import GraphView, Node, Value
from ..compiler.rules._common import _max_bindings, place_merged, shared_input_operands
from ..ops import _epilogue
from ..ops._registry import lowering
from ..ops.conv import _conv_epilogue, _conv_variant, _geometry, matvec_conv_plan
from ..ops.linalg import (FLOATS, LOOP_BUDGET, _sg_tile, constant_array, k_chunks, make_constant, matvec_head,
                          matvec_plan, plan_context, tile_kernel, tile_loop_iterations)
from ._attrs import FusedAttrs

#: Attributes a product may carry as a sibling (any other one, an input prologue, a pool output,
#: an in-place store, a view another rule added, keeps it out).
_SIBLING_ATTRS = {"conv2d": {"padding", "strides", "dilations", "groups", "input_layout", "filter_layout", "epilogue"},
                  "matmul": {"epilogue"}, "gemm": {"alpha", "beta", "a_transpose", "b_transpose", "epilogue"}}
#: The inputs a product's kernel reads before its epilogue's operands (conv2d: x, filter, bias).
_OWN_SLOTS = {"conv2d": 3, "matmul": 2, "gemm": 3}
#: Keys an epilogue step of a sibling may have: a unary step's options, or a binary step on a
#: per-channel constant (``axis`` the channel axis); a padded, pooled, upsampled or scaled
#: operand keeps the product out.
_STEP_KEYS_OUT = {"pad", "pool", "up2", "scale"}
#: The most columns (each product's output channels rounded up to a multiple of 4, summed) one
#: launch takes (8 x 8 x 256 -> 512 + 512 measured 0.92 of the two launches' kernel time) ...
SIBLINGS_MAX_N = 1024
#: ... and the most multiply-adds: a launch saves its fixed cost, which large products do not
#: notice (196 x 384 -> 384 + 384, 58 M, measured 1.00 of the kernel time and 1.01 of the wall;
#: 144 x 256 -> 256 + 256, 19 M, 0.93 and 0.93).
SIBLINGS_MAX_MACS = 20_000_000
#: A launch whose tile would take fewer column blocks than this gets a few padding columns
#: where they give a wider tile (:func:`_padded_width`).
SIBLINGS_PAD_BELOW = 4


@dataclasses.dataclass(frozen=True)
class SiblingsAttrs(FusedAttrs):
    """Attributes of a ``siblings`` node; its inputs are the shared input, then the products'
    other operands (each value once), its outputs the products' outputs in order."""

    #: the products (conv2d, matmul or gemm, epilogue fused), all reading ``inputs[0]``, in column order
    products: tuple


def _own_steps(node: Node) -> list | None:
    """The epilogue steps of ``node`` after its bias, each as ``(signature, operand)``: the
    step without its operand index and axis, and its per-channel constant (None for a unary
    step: a 1-D constant on the last axis, or one that broadcasts along it alone); None where a
    step is neither."""
    out: list[tuple[tuple, np.ndarray | None]] = []
    y = node.outputs[0]
    for step in node.attrs.get("epilogue") or []:
        if _STEP_KEYS_OUT & set(step):
            return None
        if "input" not in step:
            out.append((tuple(sorted(step.items())), None))
            continue
        if step["input"] < _OWN_SLOTS[node.op]:  # (an operand in the kernel's own slots: no sibling)
            return None
        v = node.inputs[step["input"]]
        data = constant_array(v) if v is not None else None
        shape = tuple(v.shape) if v is not None else ()
        per_channel = (shape == (y.shape[-1],) if "axis" in step else  # (without one: broadcast)
                       len(shape) <= len(y.shape) and shape[-1:] == (y.shape[-1],) and all(d == 1 for d in shape[:-1]))
        if step.get("axis", len(y.shape) - 1) != len(y.shape) - 1 or data is None or not per_channel \
                or v.data_type != y.data_type:
            return None
        out.append((tuple(sorted((k, w) for k, w in step.items() if k not in ("input", "axis"))), data))
    return out


def heads_take(node: Node, lc) -> bool:
    """Whether product ``node`` is one that ``matmul/matvec.wgsl`` takes on the device of ``lc``
    (:func:`~webnn_gpu.ops.linalg.plan_context`; the lowering's own test:
    :func:`~webnn_gpu.ops.conv.matvec_conv_plan` for a conv, :func:`~webnn_gpu.ops.linalg.matvec_plan`
    for a matmul or gemm) and that ``fuse_heads`` may merge with its siblings
    (:func:`~webnn_gpu.ops.linalg.matvec_head`: not a gathered conv window). Such products are
    left to matvec (one launch with their siblings); any other one, a windowed conv matvec would
    take alone among them, stays a sibling: one tile launch instead of one matvec launch each."""
    head = matvec_head(node)
    if head is None:
        return False
    if node.op == "conv2d":
        return matvec_conv_plan(lc, node) is not None
    return matvec_plan(lc, head[0], head[2], head[1]) is not None


def _parts(node: Node, lc=None) -> tuple[np.ndarray, np.ndarray | None] | None:
    """``(B, bias)`` of ``node`` as a sibling, or None where it cannot be one: B the constant
    filter as ``[KH, KW, C, O]`` (a matmul's or gemm's ``[1, 1, K, N]``), ``bias`` its bias
    (a gemm's ``beta * c``) as ``[O]`` or None. Conditions: see :func:`sibling_ok` (``lc``:
    :func:`~webnn_gpu.ops.linalg.plan_context` of the rule's context; None: no device's,
    as at lowering, where the products are chosen already)."""
    if node.op not in _SIBLING_ATTRS or len(node.outputs) != 1 or any(k not in _SIBLING_ATTRS[node.op]
                                                                      for k in node.attrs):
        return None
    x, f = node.inputs[0], node.inputs[1]
    c = node.inputs[2] if len(node.inputs) > 2 and _OWN_SLOTS[node.op] > 2 else None  # (a matmul has none)
    y = node.outputs[0]
    if y.data_type not in FLOATS or any(v is not None and v.data_type != y.data_type for v in (x, f, c)):
        return None
    w, bias = constant_array(f), constant_array(c) if c is not None else None
    if w is None or (c is not None and bias is None):
        return None
    lc = plan_context(None) if lc is None else lc
    if heads_take(node, lc):
        return None  # (matvec's, and fuse_heads merges those)
    if node.op == "conv2d":
        if node.attrs["input_layout"] != "nhwc" or node.attrs["groups"] != 1 or _env.force("conv"):
            return None
        g = _geometry(node)
        variant = _conv_variant(g, "nhwc", lc.tuning)
        if variant not in ("pointwise", "gemm"):
            return None
        if (k_chunks(g["C"]) if variant == "pointwise" else
                tile_loop_iterations(g["C"], g["KH"], g["KW"]) > LOOP_BUDGET):
            return None
        perm = [node.attrs["filter_layout"].index(ch) for ch in "hwio"]
        return np.transpose(w.reshape(f.shape), perm), bias
    # matmul / gemm: a row-major A of M rows by a constant 2-D B, no transposed A, alpha 1
    if len(x.shape) < 2 or len(f.shape) != 2 or tuple(y.shape[:-1]) != tuple(x.shape[:-1]):
        return None
    M, K = int(np.prod(x.shape[:-1])), x.shape[-1]
    if k_chunks(K) is not None or _env.force("matmul") not in ("", "tile"):
        return None  # (a forced variant other than the tile kernel runs each product alone)
    mat = w.reshape(f.shape)
    if node.op == "gemm":
        if node.attrs["a_transpose"] or node.attrs["alpha"] != 1.0:
            return None
        if bias is not None and node.attrs["beta"] != 1.0 and y.data_type != "float32":
            return None  # beta * c rounded to float16 on the host could overflow or round twice
        mat = mat.T if node.attrs["b_transpose"] else mat
        if bias is not None:
            if c is None or c.size not in (1, y.shape[-1]) or any(d != 1 for d in c.shape[:-1]):
                return None
            bias = (np.broadcast_to(bias.reshape(-1), (y.shape[-1],)) * np.float32(node.attrs["beta"])).astype(bias.dtype)
    if mat.shape != (K, y.shape[-1]):
        return None
    return mat.reshape(1, 1, K, -1), bias


def sibling_ok(node: Node, lc=None) -> bool:
    """Whether ``node`` can be one product of a ``siblings`` node on the device of ``lc``
    (:func:`~webnn_gpu.ops.linalg.plan_context` of the rule's context): an NHWC conv2d of one
    group on the tile kernel (pointwise or implicit GEMM, not the block, depthwise or direct
    kernels, nor a reduction split over launches), or a matmul or gemm of a row-major A by a
    constant 2-D B (gemm: A not transposed, alpha 1, c a constant per column, beta 1 in float16;
    no forced matmul variant but the tile kernel); not a product that matvec takes and
    ``fuse_heads`` may merge (:func:`heads_take`: a few rows, where the device runs matvec);
    with a constant filter and bias, float32 or float16 throughout, no attribute but its own and
    its epilogue, and epilogue steps that are unary or read a per-channel constant
    (:func:`_own_steps`)."""
    return _parts(node, lc) is not None and _own_steps(node) is not None


def _key(node: Node) -> tuple:
    """What siblings must share: the input, the kind of product (a conv's window, strides,
    padding, dilations), the data type and the epilogue's steps apart from their per-channel
    constants."""
    steps = _own_steps(node)
    assert steps is not None  # sibling_ok checked it
    if node.op == "conv2d":
        a, g = node.attrs, _geometry(node)
        kind: tuple = ("conv2d", g["KH"], g["KW"], tuple(a["strides"]), tuple(a["padding"]), tuple(a["dilations"]))
    else:
        kind = ("product",)
    return (node.inputs[0].id, kind, node.outputs[0].data_type, tuple(s for s, _ in steps))


def _width(node: Node) -> int:
    """The columns ``node`` takes in the launch: its output channels rounded up to 4."""
    return -(-node.outputs[0].shape[-1] // 4) * 4


def sibling_group(nodes: list, context=None) -> bool:
    """Whether ``nodes`` (products :func:`sibling_ok` accepted, of one :func:`_key`) can run as one
    tile launch that pays: at least two, their columns together at most :data:`SIBLINGS_MAX_N`,
    their multiply-adds at most :data:`SIBLINGS_MAX_MACS`, and the launch's storage buffers (the
    input, the filters, one per epilogue operand, one per output) within the device's limit."""
    if len(nodes) < 2 or len({_key(n) for n in nodes}) != 1:
        return False
    operands = 1 + sum("input" in s for s in nodes[0].attrs.get("epilogue") or [])  # the bias, then the steps'
    M, K = _rows(nodes[0])
    N = sum(_width(n) for n in nodes)
    return (N <= SIBLINGS_MAX_N and M * K * N <= SIBLINGS_MAX_MACS
            and 2 + operands + len(nodes) <= _max_bindings(context))


def fuse_siblings(nodes: list, outputs: dict, context=None) -> list:
    """Products reading the same input, of the pattern of :mod:`webnn_gpu.fusions.siblings`,
    become one ``siblings`` node (:class:`SiblingsAttrs`) in the first one's place (everything
    else they read is a host constant) where :func:`sibling_group` holds for them.

    Left alone: a product :func:`sibling_ok` refuses (a computed filter or epilogue operand, an
    input prologue or second output another rule gave it, another kernel than the tile kernel,
    another layout or group count) stays on its own while the others of its input still merge;
    products of different windows, strides, padding, dilations, data types or epilogue steps
    (each such set merges on its own); products of the same tensor read through different
    views (different values); a single product; products past the width, multiply-add or
    binding limits (those that fit merge, in graph order, and the rest form further sets the same
    way). ``WEBNN_GPU_FORCE_SIBLINGS=off`` turns it off.
    """
    if _env.force_choice("siblings", ("off",)) == "off":
        return nodes
    lc = plan_context(context)
    g = GraphView(nodes, outputs)
    groups: dict[tuple, list[Node]] = {}
    for n in nodes:
        if n.op in _SIBLING_ATTRS and sibling_ok(n, lc):
            groups.setdefault(_key(n), []).append(n)
    replaced: dict[int, Node] = {}
    dropped: set[int] = set()
    for group in groups.values():
        rest = list(group)
        while len(rest) > 1:  # sets in graph order, each taking the products that still fit
            take: list[Node] = []
            for n in rest:
                if sibling_group(take + [n], context) or len(take) < 1:
                    take.append(n)
            if not sibling_group(take, context):
                rest = rest[1:]  # (the first fits with none of the others: it stays alone)
                continue
            place_merged(replaced, dropped, "siblings", take, shared_input_operands(take), SiblingsAttrs(tuple(take)))
            taken = {id(n) for n in take}
            rest = [n for n in rest if id(n) not in taken]
    return g.replace(replaced, dropped)


def _padded_width(lc, node: Node, n: int) -> int:
    """The launch's columns for ``n`` columns of products: ``n``, or where the subgroup variant's
    tile with a divisor of the column blocks (:func:`~webnn_gpu.ops.linalg.choose_tile_sg`, not
    ragged) would be narrower than :data:`SIBLINGS_PAD_BELOW` blocks, a few more (at most an
    eighth; zero columns computed and not stored) that need the fewest column tiles, each of
    which loads the tile's rows of A again (104 columns, 26 blocks, take 13 tiles of 2 blocks;
    108 columns 3 tiles of 9). A wide enough tile stays: a wider one costs LLVM more. (The
    planner's ragged column tiles, :func:`~webnn_gpu.ops.linalg.ragged_cols`, would give 244
    columns 7 tiles of 9 blocks where this gives 264 columns, 6 tiles of 11: the ragged kernel took
    1.03 of the padded one's time in palm_detection_lite; 104 columns the same 3 tiles of 9.)"""
    M, K = _rows(node.attrs.products[0])
    tile = _sg_tile(lc, M, n, 1, K, ragged=False)
    if tile is None or tile[1] >= SIBLINGS_PAD_BELOW:
        return n
    best, best_tiles = n, None
    for n4 in range(n // 4, n // 4 + max(1, n // 32) + 1):
        tile = _sg_tile(lc, M, 4 * n4, 1, K, ragged=False)
        if tile is None:
            return n
        tiles = -(-n4 // tile[1])
        if best_tiles is None or tiles < best_tiles:
            best, best_tiles = 4 * n4, tiles
    return best


def _rows(node: Node) -> tuple[int, int]:
    """(M, K) of a sibling: the rows of its product and their length (a conv's taps x channels)."""
    if node.op == "conv2d":
        g = _geometry(node)
        return g["NB"] * g["OH"] * g["OW"], g["KH"] * g["KW"] * g["C"]
    x = node.inputs[0]
    return int(np.prod(x.shape[:-1])), x.shape[-1]


def _merged(node: Node, pad=None) -> tuple[Node, list[tuple[Value, int, int]]]:
    """One product standing for ``node``'s products: a conv2d (filter ``[KH, KW, C, N]``, "hwio")
    or a matmul (B ``[K, N]``) with their B side by side (each product's columns padded to a
    multiple of 4 with zeros, then to ``pad(columns)``), their biases (zero where a product has
    none) and per-channel operands likewise (padded with ones), and their common epilogue steps
    after the bias; and the launch's ``split``: (output, first column, columns) per product."""
    prods = node.attrs.products
    first = prods[0]
    T = first.outputs[0].data_type
    widths = [_width(p) for p in prods]
    N = sum(widths) if pad is None else pad(sum(widths))
    starts = [sum(widths[:j]) for j in range(len(prods))]
    parts, steps = [], []
    for p in prods:
        pb, st = _parts(p), _own_steps(p)
        assert pb is not None and st is not None  # sibling_ok checked each product
        parts.append(pb)
        steps.append(st)
    KH, KW, C = parts[0][0].shape[:3]
    w = np.zeros((KH, KW, C, N), dtype=np.float64)
    bias = np.zeros(N, dtype=np.float64)
    ops = [np.ones(N, dtype=np.float64) for s in steps[0] if s[1] is not None]
    for s0, (b, c), st in zip(starts, parts, steps):
        w[..., s0:s0 + b.shape[3]] = b
        if c is not None:
            bias[s0:s0 + b.shape[3]] = c
        for i, data in enumerate(d for _, d in st if d is not None):
            ops[i][s0:s0 + b.shape[3]] = data.reshape(-1)
    dt = np.float16 if T == "float16" else np.float32
    conv = first.op == "conv2d"
    mat = w if conv else w.reshape(C, N)  # conv: row (kh * KW + kw) * C + c of the product's B
    y = first.outputs[0]
    out = Value(T, tuple(y.shape[:-1]) + (N,), "op")
    ep = [{"op": "add", "input": 2, "axis": len(y.shape) - 1}] if not conv else []  # (a conv adds its bias itself)
    k = 3
    for sig, data in steps[0]:
        ep.append({**dict(sig), "input": k, "axis": len(y.shape) - 1} if data is not None else dict(sig))
        k += data is not None
    inputs = [first.inputs[0], make_constant(mat.astype(dt), T), make_constant(bias.astype(dt), T)]
    inputs += [make_constant(o.astype(dt), T) for o in ops]
    if conv:
        attrs = {**{k: v for k, v in first.attrs.items() if k != "epilogue"}, "filter_layout": "hwio", "epilogue": ep}
        merged = Node("conv2d", inputs, [out], attrs, node.label)
    else:
        merged = Node("matmul", inputs, [out], {"epilogue": ep}, node.label)
    return merged, [(p.outputs[0], s0, p.outputs[0].shape[-1]) for p, s0 in zip(prods, starts)]


@lowering("siblings")
def lower_siblings(node, lc) -> None:
    """siblings (the compiler's ``fuse_siblings``): the products of ``attrs.products``, all
    reading the same input, as one ``matmul/tile.wgsl`` launch (matmul, gemm, pointwise conv: a
    dense product of the rows by the B side by side; else the implicit GEMM) whose column blocks
    go to the products' own outputs (``node.outputs``, in that order)."""
    merged, split = _merged(node, lambda n: _padded_width(lc, node, n))
    x, w, out = merged.inputs[0], merged.inputs[1], merged.outputs[0]
    N = out.shape[-1]
    M, K = _rows(node.attrs.products[0])
    if merged.op == "conv2d":
        ep = _conv_epilogue(merged, out, "nhwc")
    else:
        ep = _epilogue.build(merged, out, _epilogue.steps_of(merged), chan_axis=len(out.shape) - 1)
    common = dict(batch_shape=[], a_bst=[], b_bst=[], o_bst=[], a_vec=True, b_ks=N, b_ns=1, b_vec=True, b_cols=N,
                  o_P=M, o_sn=0, o_sp=N, o_so=1, epilogue=ep, split=split)
    first = node.attrs.products[0]
    if first.op != "conv2d" or _conv_variant(_geometry(first), "nhwc", lc.tuning) == "pointwise":
        tile_kernel(lc, x, w, out, M=M, N=N, a_rs=K, a_ks=1, KC=K, **common)
        return
    g = _geometry(merged)
    conv_g = dict(P=g["OH"] * g["OW"], OW=g["OW"], H=g["H"], W=g["W"], sh=g["sh"], sw=g["sw"], dh=g["dh"],
                  dw=g["dw"], pt=g["pt"], pl=g["pl"], in_sn=g["in_sn"], in_sh=g["in_sh"], in_sw=g["in_sw"])
    tile_kernel(lc, x, w, out, M=M, N=N, a_mode="im2col", a_ks=g["in_sc"], KH=g["KH"], KW=g["KW"], KC=g["C"],
                conv=conv_g, **common)
