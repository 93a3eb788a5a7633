"""Data-movement operators: reshape, transpose, expand, slice, concat, split, tile, reverse,
pad and triangular.

Spec: https://www.w3.org/TR/webnn/#api-mlgraphbuilder-reshape-method (and -transpose, -expand,
-slice, -concat, -split, -tile, -reverse-method, -pad, -triangular).

None of these operators computes: every output element is one input element (or a fill
value) moved as raw bits, so they are exact for all eight data types and need no
``shader-int64`` (int64/uint64 move as ``vec2<u32>``).

* ``reshape`` is a view: its lowering aliases the input's buffer (zero cost).
* Every other operator is an *index map* run by one template, ``layout/remap.wgsl``: per
  iterated dimension, a term of the source (or destination) index: linear (``c * stride``,
  which covers transpose, expand, slice with strides, split and reverse through negative
  strides), modular (tile) or padded (pad's three modes), plus an optional triangular mask.
  :func:`remap` coalesces dimensions that stay contiguous, so a concat along the first axis
  is a 1-D copy loop.
* A map that leaves the bytes where they are (expand to the same shape, a full slice, a
  transpose that only moves size-1 dimensions, ...) becomes an alias, like reshape.
* concat runs one kernel per input, each placing its input into its slab of the output, and
  split one kernel per output; so no kernel binds more than two storage buffers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .. import _dtypes, _env
from .. import _validate as V
from .._kernels import strides

_strides = strides  # ``slice`` has a keyword argument named ``strides``
from ..builder import MLGraphBuilder, MLOperand
from ._registry import ALL, builder_method, lowering, support

MAX_RANK = V.MAX_RANK
PAD_MODES = ("constant", "edge", "reflection")
_U32 = 2**32


# ---------------------------------------------------------------- shared lowering helpers
def raw_literal(value, data_type: str) -> str:
    """WGSL expression of ``value`` (already representable in ``data_type``) as its raw storage type.

    float32 is written as its bit pattern and float16 as an exact decimal (or, for NaN and
    infinities, converted from float32), so NaN, infinities and -0.0 survive.
    """
    info = _dtypes.info(data_type)
    bits = np.array([value], dtype=info.numpy).view(np.uint8)
    word = int.from_bytes(bits.tobytes(), "little")
    if data_type == "float32":
        return f"bitcast<f32>({word:#x}u)"
    if data_type == "float16":
        # Naga cannot index bitcast<vec2<f16>>(u32): finite values are exact decimal
        # literals, NaN and infinities convert from their f32 twins.
        v = float(np.float16(value))
        if math.isfinite(v):
            return f"f16({v!r})"
        return f"f16(bitcast<f32>({int(np.float32(v).view(np.uint32)):#x}u))"
    if data_type == "int32":
        return f"bitcast<i32>({word:#x}u)"
    if info.packing == "wide":
        return f"vec2<u32>({word & 0xFFFFFFFF:#x}u, {word >> 32:#x}u)"
    return f"{word:#x}u"  # uint32, and the byte of int8/uint8


def lin(stride: int) -> dict:
    """A linear term ``c * stride`` of an index map (``stride`` may be negative)."""
    return {"kind": "lin", "stride": int(stride)}


def coalesce(shape: Sequence[int], dims: list[dict]) -> tuple[list[int], list[dict]]:
    """Drop size-1 linear dimensions and merge neighbours that stay contiguous.

    Two linear dimensions d, d+1 of the iterated shape merge when
    ``stride[d] == stride[d+1] * shape[d+1]``: their joint coordinate then addresses the
    source with the inner stride alone.
    """
    out_shape: list[int] = []
    out_dims: list[dict] = []
    for size, d in zip(shape, dims):
        if d["kind"] == "lin" and size == 1:
            continue
        if (out_dims and d["kind"] == "lin" and out_dims[-1]["kind"] == "lin"
                and out_dims[-1]["stride"] == d["stride"] * size):
            out_shape[-1] *= size
            out_dims[-1] = lin(d["stride"])
        else:
            out_shape.append(int(size))
            out_dims.append(dict(d))
    return out_shape, out_dims


def remap(lc, src, dst, iter_shape, dims: list[dict], *, base: int = 0, place: bool = False,
          fill=None, mask: dict | None = None, stages: Sequence[tuple] = ()) -> None:
    """Add one ``layout/remap.wgsl`` kernel (see the template's contract header).

    Arguments:
        lc: the LowerContext.
        src, dst: the input and output Values.
        iter_shape: the shape iterated (the output's, or the input's when ``place``).
        dims: one term per iterated dimension (:func:`lin`, ``{"kind": "mod", ...}``,
            ``{"kind": "pad", ...}``).
        base: constant element offset of the mapped index.
        place: write ``dst[map(idx)] = src[idx]`` instead of ``dst[idx] = src[map(idx)]``.
        fill: the value stored where padding or the mask applies (in dst's data type).
        mask: triangular mask ``{row, col, upper, diagonal}`` over iterated dimensions.
        stages: further index maps applied in turn to the one above, each ``(shape, dims,
            base)``: the index mapped so far read as a row-major index of ``shape`` (a chain
            of layout operators, :func:`lower_remap_chain`).
    """
    if mask is None:
        iter_shape, dims = coalesce(iter_shape, dims)
    maps = [(iter_shape, dims, base), *(coalesce(shape, sdims) + (sbase,) for shape, sdims, sbase in stages)]
    unit = min(remap_unit(src.data_type, *m) for m in maps) if mask is None else 1
    if unit > 1:  # every map moves runs of 4: each in vec4s
        maps = [([*shape[:-1], shape[-1] // unit], [lin(d["stride"] // unit if i < len(sdims) - 1 else 1)
                                                    for i, d in enumerate(sdims)], sbase // unit)
                for shape, sdims, sbase in maps]
    for _, sdims, _ in maps:
        for d in sdims:
            d["stride"] = d["stride"] % _U32
    (iter_shape, dims, base), *rest = maps
    later = [{"coord_strides": strides(shape), "dims": sdims, "base": sbase % _U32} for shape, sdims, sbase in rest]
    needs_valid = mask is not None or any(d["kind"] == "pad" and d["mode"] == "constant"
                                          for d in (*dims, *(d for st in later for d in st["dims"])))
    n = math.prod(iter_shape) if iter_shape else 1
    lc.kernel("layout/remap.wgsl", [("src", src)], [("dst", dst)], n,
              place=place, coord_strides=strides(iter_shape), dims=dims, base=base % _U32,
              needs_valid=needs_valid, fill=raw_literal(fill if fill is not None else 0, dst.data_type),
              mask=mask, unit=unit, stages=later)


#: 32-bit data types whose index maps :func:`remap` may run a vec4 at a time
_VEC4_TYPES = ("float32", "int32", "uint32")


def remap_unit(data_type: str, iter_shape: Sequence[int], dims: list[dict], base: int) -> int:
    """Elements one invocation of ``layout/remap.wgsl`` moves for a coalesced index map
    (:func:`coalesce`): 4 (a vec4 load and store) where the data is 32-bit, every term is linear,
    the innermost iterated dimension is contiguous (stride 1) with a size that is a multiple of
    4, and every other stride and ``base`` are multiples of 4 (so four neighbours in the
    iterated order are four neighbours in the other buffer, at a vec4 boundary in both); else 1.
    So: a transpose that keeps a last run of 4k elements (depth_to_space / space_to_depth whose
    block rows hold 4k values), a slice or split along outer axes, an expand of whole rows.
    ``WEBNN_GPU_FORCE_REMAP=scalar`` keeps one element per invocation."""
    if data_type not in _VEC4_TYPES or not dims or _env.force_choice("remap", ("scalar",)) == "scalar":
        return 1
    if any(d["kind"] != "lin" for d in dims) or dims[-1]["stride"] != 1 or iter_shape[-1] % 4:
        return 1
    if base % 4 or any(d["stride"] % 4 for d in dims[:-1]):
        return 1
    return 4


def _is_alias(node) -> bool:
    return node.attrs.get("alias", False)


# ---------------------------------------------------------------- reshape
@builder_method
def reshape(self: MLGraphBuilder, input: MLOperand, new_shape: Sequence[int], *, label: str = "",
            **kwargs) -> MLOperand:
    """Give a tensor a new shape with the same elements in the same order (a free view).

    Spec: https://www.w3.org/TR/webnn/#api-mlgraphbuilder-reshape-method

    Arguments:
        input (MLOperand): any data type, any rank.
        new_shape (Sequence[int]): the output shape (``[]`` for a scalar); its element count
            must equal the input's.
        label (str): a name for errors and GPU objects.

    Returns:
        MLOperand: ``new_shape``, the input's data type. It shares the input's buffer.

    Raises:
        MLTypeError: an invalid shape or an element count that differs from the input's.
        InvalidStateError: the builder has built its graph, or the context is gone.
    """
    # IDL: MLOperand reshape(MLOperand input, sequence<[EnforceRange] unsigned long> newShape,
    #                        optional MLOperatorOptions options = {});
    op = "reshape"
    V.check_kwargs(op, label, kwargs)
    self._check_usable(op, label)
    v = self._operand(op, label, "input", input)
    shape = V.shape(op, label, "new_shape", new_shape)
    if V.element_count(shape) != v.size:
        V.fail(op, label, "new_shape", f"a shape of {v.size} elements like the input {list(v.shape)}",
               f"{list(shape)} ({V.element_count(shape)} elements)")
    return self._emit1(op, [v], v.data_type, shape, {"alias": True}, label=label)


@lowering("reshape")
def lower_reshape(node, lc) -> None:
    """reshape: a view of the input's buffer."""
    lc.alias(node.outputs[0], node.inputs[0])


# ---------------------------------------------------------------- transpose
@builder_method
def transpose(self: MLGraphBuilder, input: MLOperand, *, permutation: Sequence[int] | None = None,
              label: str = "", **kwargs) -> MLOperand:
    """Permute the dimensions of a tensor.

    Spec: https://www.w3.org/TR/webnn/#api-mlgraphbuilder-transpose

    Output dimension ``d`` is input dimension ``permutation[d]``.

    Arguments:
        input (MLOperand): any data type, any rank.
        permutation (Sequence[int] | None): a permutation of ``range(rank)``; default
            ``[rank-1, ..., 0]`` (reverses the dimensions).
        label (str): a name for errors and GPU objects.

    Returns:
        MLOperand: the permuted tensor, the input's data type.

    Raises:
        MLTypeError: a permutation of the wrong length, out of range or with duplicates.
    """
    # IDL: MLOperand transpose(MLOperand input, optional MLTransposeOptions options = {});
    op = "transpose"
    V.check_kwargs(op, label, kwargs)
    self._check_usable(op, label)
    v = self._operand(op, label, "input", input)
    r = len(v.shape)
    if permutation is None:
        perm = list(range(r - 1, -1, -1))
    else:
        perm = V.int_list(op, label, "permutation", permutation, length=r, lo=0, hi=r - 1)
        if sorted(perm) != list(range(r)):
            V.fail(op, label, "permutation", f"a permutation of 0..{r - 1} (no duplicates)", permutation)
    shape = tuple(v.shape[p] for p in perm)
    moved = [p for p in perm if v.shape[p] != 1]
    return self._emit1(op, [v], v.data_type, shape, {"permutation": perm, "alias": moved == sorted(moved)},
                       label=label)


@lowering("transpose")
def lower_transpose(node, lc) -> None:
    """transpose: output coordinate d walks input dimension permutation[d]."""
    src, dst = node.inputs[0], node.outputs[0]
    if _is_alias(node):
        lc.alias(dst, src)
        return
    st = strides(src.shape)
    remap(lc, src, dst, dst.shape, [lin(st[p]) for p in node.attrs["permutation"]])


# ---------------------------------------------------------------- expand
@builder_method
def expand(self: MLGraphBuilder, input: MLOperand, new_shape: Sequence[int], *, label: str = "",
           **kwargs) -> MLOperand:
    """Broadcast a tensor to a new shape (NumPy's ``broadcast_to``).

    Spec: https://www.w3.org/TR/webnn/#api-mlgraphbuilder-expand

    The input must be unidirectionally broadcastable to ``new_shape``: aligned from the
    right, each input dimension is 1 or equal to the new one, and ``new_shape`` has at least
    the input's rank.

    Arguments:
        input (MLOperand): any data type, any rank.
        new_shape (Sequence[int]): the output shape.
        label (str): a name for errors and GPU objects.

    Returns:
        MLOperand: ``new_shape``, the input's data type.

    Raises:
        MLTypeError: an invalid shape, or one the input does not broadcast to.
    """
    # IDL: MLOperand expand(MLOperand input, sequence<[EnforceRange] unsigned long> newShape,
    #                       optional MLOperatorOptions options = {});
    op = "expand"
    V.check_kwargs(op, label, kwargs)
    self._check_usable(op, label)
    v = self._operand(op, label, "input", input)
    shape = V.shape(op, label, "new_shape", new_shape)
    ok = len(v.shape) <= len(shape) and all(s in (1, d) for s, d in zip(reversed(v.shape), reversed(shape)))
    if not ok:
        V.fail(op, label, "new_shape", f"a shape the input shape {list(v.shape)} broadcasts to "
               "(same or higher rank; each input dimension 1 or equal, aligned from the right)", list(new_shape))
    return self._emit1(op, [v], v.data_type, shape, {"alias": v.size == V.element_count(shape)}, label=label)


@lowering("expand")
def lower_expand(node, lc) -> None:
    """expand: stride 0 along broadcast dimensions."""
    src, dst = node.inputs[0], node.outputs[0]
    if _is_alias(node):
        lc.alias(dst, src)
        return
    r = len(dst.shape)
    padded = (1,) * (r - len(src.shape)) + tuple(src.shape)
    st = strides(padded)
    remap(lc, src, dst, dst.shape, [lin(0 if padded[d] == 1 else st[d]) for d in range(r)])


# ---------------------------------------------------------------- slice
@builder_method
def slice(self: MLGraphBuilder, input: MLOperand, starts: Sequence[int], sizes: Sequence[int], *,
          strides: Sequence[int] | None = None, label: str = "", **kwargs) -> MLOperand:
    """Take a (strided) window of a tensor.

    Spec: https://www.w3.org/TR/webnn/#api-mlgraphbuilder-slice

    Along dimension d the window covers ``starts[d] .. starts[d] + sizes[d] - 1`` and keeps
    every ``strides[d]``-th element of it, so the output has ``ceil(sizes[d] / strides[d])``
    elements there (NumPy ``x[s:s+n:k]``).

    Arguments:
        input (MLOperand): any data type, any rank (a scalar takes ``[]``, ``[]``).
        starts (Sequence[int]): one start per dimension, ``0 <= start``.
        sizes (Sequence[int]): one window length per dimension, ``>= 1`` and
            ``starts[d] + sizes[d] <= input.shape[d]``.
        strides (Sequence[int] | None): one step per dimension, ``>= 1``; default all 1.
        label (str): a name for errors and GPU objects.

    Returns:
        MLOperand: the window, the input's data type and rank.

    Raises:
        MLTypeError: lists of the wrong length, zero sizes or strides, a window past the end.
    """
    # IDL: MLOperand slice(MLOperand input, sequence<[EnforceRange] unsigned long> starts,
    #                      sequence<[EnforceRange] unsigned long> sizes, optional MLSliceOptions options = {});
    op = "slice"
    V.check_kwargs(op, label, kwargs)
    self._check_usable(op, label)
    v = self._operand(op, label, "input", input)
    r = len(v.shape)
    st = V.int_list(op, label, "starts", starts, length=r, lo=0)
    sz = V.int_list(op, label, "sizes", sizes, length=r, lo=1)
    step = [1] * r if strides is None else V.int_list(op, label, "strides", strides, length=r, lo=1)
    for d in range(r):
        if st[d] + sz[d] > v.shape[d]:
            V.fail(op, label, "sizes", f"starts[{d}] + sizes[{d}] <= input dimension {d} ({v.shape[d]})",
                   f"starts[{d}] = {st[d]}, sizes[{d}] = {sz[d]}")
    shape = tuple(-(-sz[d] // step[d]) for d in range(r))
    return self._emit1(op, [v], v.data_type, shape,
                       {"starts": st, "strides": step, "alias": shape == tuple(v.shape)}, label=label)


@lowering("slice")
def lower_slice(node, lc) -> None:
    """slice: base offset of the window's first element, strides scaled by the steps."""
    src, dst = node.inputs[0], node.outputs[0]
    if _is_alias(node):
        lc.alias(dst, src)
        return
    st = _strides(src.shape)
    base = sum(s * t for s, t in zip(node.attrs["starts"], st))
    remap(lc, src, dst, dst.shape, [lin(k * t) for k, t in zip(node.attrs["strides"], st)], base=base)


# ---------------------------------------------------------------- concat
@builder_method
def concat(self: MLGraphBuilder, inputs: Sequence[MLOperand], axis: int, *, label: str = "",
           **kwargs) -> MLOperand:
    """Join tensors along one axis.

    Spec: https://www.w3.org/TR/webnn/#api-mlgraphbuilder-concat

    Arguments:
        inputs (Sequence[MLOperand]): one or more operands of the same data type and rank,
            whose dimensions agree except along ``axis``.
        axis (int): the axis to join along, in ``[0, rank)``.
        label (str): a name for errors and GPU objects.

    Returns:
        MLOperand: the joined tensor; its ``axis`` dimension is the sum of the inputs'.

    Raises:
        MLTypeError: no inputs, a non-operand, mismatched data types, ranks or dimensions, an
            axis out of range, a joined dimension past 2**32 - 1.
    """
    # IDL: MLOperand concat(sequence<MLOperand> inputs, [EnforceRange] unsigned long axis,
    #                       optional MLOperatorOptions options = {});
    op = "concat"
    V.check_kwargs(op, label, kwargs)
    self._check_usable(op, label)
    if isinstance(inputs, (str, bytes, MLOperand)) or not isinstance(inputs, Sequence) or not inputs:
        V.fail(op, label, "inputs", "a non-empty sequence of MLOperands", inputs)
    vals = [self._operand(op, label, f"inputs[{i}]", x) for i, x in enumerate(inputs)]
    first = vals[0]
    r = len(first.shape)
    ax = V.axis(op, label, "axis", axis, r)
    total = 0
    for i, v in enumerate(vals):
        if v.data_type != first.data_type:
            V.fail(op, label, f"inputs[{i}]", f"data type {first.data_type} (that of inputs[0])", v.data_type)
        if len(v.shape) != r or any(v.shape[d] != first.shape[d] for d in range(r) if d != ax):
            V.fail(op, label, f"inputs[{i}]",
                   f"a rank-{r} shape equal to inputs[0]'s {list(first.shape)} except along axis {ax}", list(v.shape))
        total += v.shape[ax]
    if total > V.MAX_DIM:
        V.fail(op, label, "inputs", f"a joined dimension <= {V.MAX_DIM}", total)
    shape = tuple(total if d == ax else first.shape[d] for d in range(r))
    return self._emit1(op, vals, first.data_type, shape, {"axis": ax, "alias": len(vals) == 1}, label=label)


def concat_vec4_ok(node, extra: int = 0, limits=None) -> bool:
    """Whether concat ``node`` runs ``layout/concat_vec4.wgsl`` (four elements per invocation):
    32-bit data or float16, every input's slab (its size along the axis times the dimensions after it) a
    multiple of 4 elements, and its inputs, ``extra`` more bindings and the output within the
    device's storage-buffer limit (``limits``; WebGPU's default 8 without)."""
    if node.op != "concat" or _is_alias(node) or node.outputs[0].data_type not in ("float32", "float16", "int32", "uint32"):
        return False
    dst, ax = node.outputs[0], node.attrs["axis"]
    inner = math.prod(dst.shape[ax + 1:])
    max_buffers = int((limits or {}).get("max-storage-buffers-per-shader-stage", 8))
    return (all(v.shape[ax] * inner % 4 == 0 for v in node.inputs)
            and len(node.inputs) + extra + 1 <= max_buffers and _env.force("concat") != "scalar")


#: On the "lane-loop" profile with ``shader-int64``, ``layout/concat_vec4.wgsl`` moves 8 elements
#: per invocation as one u64 word load and store (the same bits; :func:`concat_words`), and its
#: side map's per-channel operands as one word each: on Mesa 22 every storage access is a loop
#: over the lanes and the access's components, and a u64 component moves two 32-bit or four
#: float16 values.
CONCAT_X64 = True


def concat_words(node, side, tuning: str, features) -> tuple[bool, list[str]]:
    """Whether ``layout/concat_vec4.wgsl`` moves concat ``node``'s elements as 8-element u64
    words (``x64``; :data:`CONCAT_X64`), and the binding names of ``side``'s per-channel operands
    it then loads as words (``q_words``): the "lane-loop" profile with ``shader-int64``, every
    input's slab a multiple of 8 elements, and a side map (``attrs["side"]``) with per-channel
    operands: its channels (the last axis) a multiple of 8 and its operands read at the channel
    (``Epilogue.chan``) read nowhere else and each C values of the output's data type (the
    words pay there, their operands' loads most: DenseNet's concat + normalization + relu 0.73
    of the vec4 form's time; plain concats, Keras U-Net's and masked_rnn's, measured 1.06-1.15,
    so they keep vec4s). ``WEBNN_GPU_FORCE_CONCAT_WORDS=vec4`` keeps vec4s; ``=words`` takes
    words wherever they apply, a plain concat too (for measurements and tests)."""
    if not (_env.force_words("concat_words", CONCAT_X64) and tuning == "lane-loop" and "shader-int64" in features):
        return False, []
    dst, ax = node.outputs[0], node.attrs["axis"]
    inner = math.prod(dst.shape[ax + 1:])
    parts = node.inputs[:node.attrs.get("side_parts", len(node.inputs))]
    if any(v.shape[ax] * inner % 8 for v in parts):
        return False, []
    if side is None or not side.chan:  # (measured slower than vec4s there: only when forced)
        plain = side is None or dst.shape[-1] % 8 == 0
        return plain and _env.force_choice("concat_words", ("vec4", "words")) == "words", []
    operands = dict(side.operands)
    if (dst.shape[-1] % 8 or not side.chan_only
            or any(operands[n].data_type != dst.data_type or operands[n].size != dst.shape[-1] for n in side.chan_operands)):
        return False, []
    return True, list(side.chan_operands)


@lowering("concat")
def lower_concat(node, lc) -> None:
    """concat: one ``layout/concat.wgsl`` kernel reading every input (32-bit data or float16 in
    slabs of multiples of 4 elements: ``layout/concat_vec4.wgsl``, which also stores the map of
    ``attrs["side"]`` as a second output, or alone as its one output), or (more inputs than a
    kernel may bind) one kernel per input placing it at its offset along the axis; with
    ``attrs["in_place"]`` (``concat_in_place``) no kernel: each input is stored in its block
    of the output (:meth:`~webnn_gpu._lower.LowerContext.place`)."""
    dst = node.outputs[0]
    if _is_alias(node):
        lc.alias(dst, node.inputs[0])
        return
    if node.attrs.get("in_place"):  # each input's producer writes its block of the output (concat_in_place)
        offset = 0
        for src in node.inputs:
            lc.place(src, dst, offset)
            offset += _dtypes.byte_length(src.data_type, src.shape)
        return
    ax = node.attrs["axis"]
    max_buffers = int(lc.limits.get("max-storage-buffers-per-shader-stage", 8))
    inner = math.prod(dst.shape[ax + 1:])
    parts, lo = [], 0
    for i, src in enumerate(node.inputs[:node.attrs.get("side_parts", len(node.inputs))]):
        parts.append({"name": f"src{i}", "lo": lo, "hi": lo + src.shape[ax], "size": src.shape[ax]})
        lo += src.shape[ax]
    srcs = [(p["name"], v) for p, v in zip(parts, node.inputs)]
    side = None
    if "side" in node.attrs:  # fuse_concat_map: the map of the output, stored beside it
        from . import _epilogue

        side = _epilogue.build(node, node.outputs[-1], node.attrs["side"], chan_axis=len(dst.shape) - 1,
                               first_binding="sd", name="side")
    if side is not None or concat_vec4_ok(node, limits=lc.limits):
        outs = [("dst", dst)]
        if side is not None and len(node.outputs) == 2:
            outs.append(("side_out", node.outputs[1]))
        x64, q_words = concat_words(node, side, lc.tuning, lc.features)
        plain = side.without_q() if side is not None and q_words else side  # q_words: no side_q loads
        side_code = plain.code if plain is not None else ""
        lc.kernel("layout/concat_vec4.wgsl", srcs + (side.operands if side else []), outs, dst.size // (8 if x64 else 4),
                  parts=parts, inner=inner, total=dst.shape[ax], side=side, chan=dst.shape[-1],
                  side_only=side is not None and len(node.outputs) == 1,
                  fns=side.functions if side else [], x64=x64, q_words=q_words, side_code=side_code)
        return
    if len(node.inputs) + 1 <= max_buffers:
        lc.kernel("layout/concat.wgsl", srcs, [("dst", dst)], dst.size, parts=parts, inner=inner,
                  total=dst.shape[ax])
        return
    ost = strides(dst.shape)
    offset = 0
    for src in node.inputs:
        remap(lc, src, dst, src.shape, [lin(s) for s in ost], base=offset * ost[ax], place=True)
        offset += src.shape[ax]


# ---------------------------------------------------------------- split
@builder_method
def split(self: MLGraphBuilder, input: MLOperand, splits: int | Sequence[int], *, axis: int = 0,
          label: str = "", **kwargs) -> list[MLOperand]:
    """Split a tensor into several along one axis.

    Spec: https://www.w3.org/TR/webnn/#api-mlgraphbuilder-split

    Arguments:
        input (MLOperand): any data type, rank >= 1.
        splits (int | Sequence[int]): a number of equal parts (it must divide the axis
            dimension), or the size of each part (positive, summing to the axis dimension).
        axis (int): the axis to split, in ``[0, rank)``; default 0.
        label (str): a name for errors and GPU objects.

    Returns:
        list[MLOperand]: the parts in order, each the input's data type and rank.

    Raises:
        MLTypeError: an axis out of range, a count that is 0 or does not divide the dimension,
            sizes that are not positive or do not sum to the dimension.
    """
    # IDL: sequence<MLOperand> split(MLOperand input,
    #     ([EnforceRange] unsigned long or sequence<[EnforceRange] unsigned long>) splits,
    #     optional MLSplitOptions options = {});
    op = "split"
    V.check_kwargs(op, label, kwargs)
    self._check_usable(op, label)
    v = self._operand(op, label, "input", input)
    r = len(v.shape)
    ax = V.axis(op, label, "axis", axis, r)
    dim = v.shape[ax]
    if V.is_int(splits):
        parts = int(splits)  # type: ignore[arg-type]  # is_int narrowed it
        if parts < 1 or dim % parts:
            V.fail(op, label, "splits", f"a positive number of parts dividing dimension {ax} ({dim})", splits)
        sizes = [dim // parts] * parts
    else:
        sizes = V.int_list(op, label, "splits", splits, lo=1)
        if not sizes or sum(sizes) != dim:
            V.fail(op, label, "splits", f"positive sizes summing to dimension {ax} ({dim})", splits)
    outs = [(v.data_type, tuple(s if d == ax else v.shape[d] for d in range(r))) for s in sizes]
    return self._emit(op, [v], outs, {"axis": ax, "sizes": sizes}, label=label)


@lowering("split")
def lower_split(node, lc) -> None:
    """split: one slice kernel per output (an alias when there is a single part)."""
    src = node.inputs[0]
    if len(node.outputs) == 1:
        lc.alias(node.outputs[0], src)
        return
    ax = node.attrs["axis"]
    st = strides(src.shape)
    offset = 0
    for dst in node.outputs:
        remap(lc, src, dst, dst.shape, [lin(s) for s in st], base=offset * st[ax])
        offset += dst.shape[ax]


# ---------------------------------------------------------------- tile
@builder_method
def tile(self: MLGraphBuilder, input: MLOperand, repetitions: Sequence[int], *, label: str = "",
         **kwargs) -> MLOperand:
    """Repeat a tensor along each dimension (NumPy ``tile`` with one count per dimension).

    Spec: https://www.w3.org/TR/webnn/#api-mlgraphbuilder-tile

    Arguments:
        input (MLOperand): any data type, any rank.
        repetitions (Sequence[int]): one count >= 1 per dimension.
        label (str): a name for errors and GPU objects.

    Returns:
        MLOperand: dimension d is ``input.shape[d] * repetitions[d]``; the input's data type.

    Raises:
        MLTypeError: a list of the wrong length, a zero count, a dimension past 2**32 - 1.
    """
    # IDL: MLOperand tile(MLOperand input, sequence<unsigned long> repetitions,
    #                     optional MLOperatorOptions options = {});
    op = "tile"
    V.check_kwargs(op, label, kwargs)
    self._check_usable(op, label)
    v = self._operand(op, label, "input", input)
    reps = V.int_list(op, label, "repetitions", repetitions, length=len(v.shape), lo=1, hi=V.MAX_DIM)
    shape = tuple(s * k for s, k in zip(v.shape, reps))
    if any(d > V.MAX_DIM for d in shape):
        V.fail(op, label, "repetitions", f"output dimensions <= {V.MAX_DIM}", f"{list(reps)} (output {list(shape)})")
    return self._emit1(op, [v], v.data_type, shape, {"alias": shape == tuple(v.shape)}, label=label)


@lowering("tile")
def lower_tile(node, lc) -> None:
    """tile: coordinate modulo the input dimension along repeated dimensions."""
    src, dst = node.inputs[0], node.outputs[0]
    if _is_alias(node):
        lc.alias(dst, src)
        return
    st = strides(src.shape)
    dims = [lin(st[d]) if src.shape[d] == dst.shape[d] else lin(0) if src.shape[d] == 1
            else {"kind": "mod", "stride": st[d], "size": src.shape[d]} for d in range(len(st))]
    remap(lc, src, dst, dst.shape, dims)


# ---------------------------------------------------------------- reverse
@builder_method
def reverse(self: MLGraphBuilder, input: MLOperand, *, axes: Sequence[int] | None = None, label: str = "",
            **kwargs) -> MLOperand:
    """Reverse the order of elements along some axes (NumPy ``flip``).

    Spec: https://www.w3.org/TR/webnn/#api-mlgraphbuilder-reverse-method

    Arguments:
        input (MLOperand): any data type, any rank.
        axes (Sequence[int] | None): distinct axes in ``[0, rank)``; default all of them;
            ``[]`` reverses nothing.
        label (str): a name for errors and GPU objects.

    Returns:
        MLOperand: the same shape and data type.

    Raises:
        MLTypeError: axes out of range or duplicated.
    """
    # IDL: MLOperand reverse(MLOperand input, optional MLReverseOptions options = {});
    op = "reverse"
    V.check_kwargs(op, label, kwargs)
    self._check_usable(op, label)
    v = self._operand(op, label, "input", input)
    r = len(v.shape)
    ax = list(range(r)) if axes is None else V.axes(op, label, "axes", axes, r)
    effective = sorted(a for a in ax if v.shape[a] > 1)
    return self._emit1(op, [v], v.data_type, v.shape, {"axes": effective, "alias": not effective}, label=label)


@lowering("reverse")
def lower_reverse(node, lc) -> None:
    """reverse: start at the far end of reversed axes and walk them with a negative stride."""
    src, dst = node.inputs[0], node.outputs[0]
    if _is_alias(node):
        lc.alias(dst, src)
        return
    st = strides(src.shape)
    base = 0
    dims = []
    for d, s in enumerate(st):
        if d in node.attrs["axes"]:
            base += (src.shape[d] - 1) * s
            dims.append(lin(-s))
        else:
            dims.append(lin(s))
    remap(lc, src, dst, dst.shape, dims, base=base)


# ---------------------------------------------------------------- pad
def cast_number(value, data_type: str):
    """``value`` as a NumPy scalar of ``data_type`` (the spec's casting of an MLNumber).

    Floats round to nearest (overflow gives an infinity). Integers: a non-integral value is
    truncated toward zero, NaN becomes 0, and the result saturates to the type's range.
    """
    info = _dtypes.info(data_type)
    if info.is_float:
        with np.errstate(over="ignore"):
            return info.numpy.type(value)
    ii = np.iinfo(info.numpy)
    if isinstance(value, (float, np.floating)):
        if math.isnan(value):
            return info.numpy.type(0)
        if math.isinf(value):
            return info.numpy.type(ii.max if value > 0 else ii.min)
        value = math.trunc(float(value))
    return info.numpy.type(min(max(int(value), int(ii.min)), int(ii.max)))


@builder_method
def pad(self: MLGraphBuilder, input: MLOperand, beginning_padding: Sequence[int], ending_padding: Sequence[int],
        *, mode: str = "constant", value=0, label: str = "", **kwargs) -> MLOperand:
    """Add values around a tensor.

    Spec: https://www.w3.org/TR/webnn/#api-mlgraphbuilder-pad

    Modes: ``"constant"`` fills with ``value``; ``"edge"`` repeats the border element;
    ``"reflection"`` mirrors without repeating the border (NumPy ``pad(mode="reflect")``),
    so its paddings must be smaller than the dimension.

    Arguments:
        input (MLOperand): any data type, rank >= 1.
        beginning_padding (Sequence[int]): elements added before, one count >= 0 per dimension.
        ending_padding (Sequence[int]): elements added after, one count >= 0 per dimension.
        mode (str): ``"constant"`` (default), ``"edge"`` or ``"reflection"``.
        value (float | int): the constant fill (default 0), cast to the input's data type:
            floats round to nearest; for integer types it is truncated toward zero and
            saturated to the type's range (NaN gives 0).
        label (str): a name for errors and GPU objects.

    Returns:
        MLOperand: dimension d grows by ``beginning_padding[d] + ending_padding[d]``.

    Raises:
        MLTypeError: a scalar input, lists of the wrong length or with negative counts, an
            unknown mode, a non-number value, reflection padding >= the dimension, a
            dimension past 2**32 - 1.
    """
    # IDL: MLOperand pad(MLOperand input, sequence<[EnforceRange] unsigned long> beginningPadding,
    #                    sequence<[EnforceRange] unsigned long> endingPadding, optional MLPadOptions options = {});
    op = "pad"
    V.check_kwargs(op, label, kwargs)
    self._check_usable(op, label)
    v = self._operand(op, label, "input", input)
    r = len(v.shape)
    if r == 0:
        V.fail(op, label, "input", "an operand of rank >= 1", "a scalar (rank 0)")
    beg = V.int_list(op, label, "beginning_padding", beginning_padding, length=r, lo=0, hi=V.MAX_DIM)
    end = V.int_list(op, label, "ending_padding", ending_padding, length=r, lo=0, hi=V.MAX_DIM)
    if not isinstance(mode, str) or mode not in PAD_MODES:
        V.fail(op, label, "mode", f"one of {', '.join(map(repr, PAD_MODES))}", mode)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        V.fail(op, label, "value", "a number", value)
    if mode == "reflection":
        for d in range(r):
            if beg[d] >= v.shape[d] or end[d] >= v.shape[d]:
                V.fail(op, label, "beginning_padding" if beg[d] >= v.shape[d] else "ending_padding",
                       f"reflection paddings smaller than input dimension {d} ({v.shape[d]})",
                       f"{beg[d]} before, {end[d]} after")
    shape = tuple(s + b + e for s, b, e in zip(v.shape, beg, end))
    if any(d > V.MAX_DIM for d in shape):
        V.fail(op, label, "ending_padding", f"output dimensions <= {V.MAX_DIM}", list(shape))
    fill = cast_number(value, v.data_type)
    return self._emit1(op, [v], v.data_type, shape,
                       {"beginning_padding": beg, "ending_padding": end, "mode": mode, "value": fill,
                        "alias": shape == tuple(v.shape)}, label=label)


@lowering("pad")
def lower_pad(node, lc) -> None:
    """pad: padded dimensions map ``c - begin`` back into the input by the mode."""
    src, dst = node.inputs[0], node.outputs[0]
    if _is_alias(node):
        lc.alias(dst, src)
        return
    remap(lc, src, dst, dst.shape, pad_dims(node.attrs, src.shape), fill=node.attrs["value"])


def pad_dims(attrs, in_shape: Sequence[int]) -> list[dict]:
    """The index map of a pad with ``attrs`` of an input of ``in_shape``, per output dimension."""
    dims = []
    for d, s in enumerate(strides(in_shape)):
        if attrs["beginning_padding"][d] == 0 and attrs["ending_padding"][d] == 0:
            dims.append(lin(s))
        else:
            last = in_shape[d] - 1
            dims.append({"kind": "pad", "stride": s, "begin": attrs["beginning_padding"][d], "last": last,
                         "reflect": 2 * last, "mode": attrs["mode"]})
    return dims


# ---------------------------------------------------------------- triangular
@builder_method
def triangular(self: MLGraphBuilder, input: MLOperand, *, upper: bool = True, diagonal: int = 0,
               label: str = "", **kwargs) -> MLOperand:
    """Keep the upper or lower triangle of the last two dimensions, zero the rest.

    Spec: https://www.w3.org/TR/webnn/#api-mlgraphbuilder-triangular

    Element (i, j) of each matrix is kept when ``j - i >= diagonal`` (upper, NumPy
    ``triu(k=diagonal)``) or ``j - i <= diagonal`` (lower, ``tril(k=diagonal)``).

    Arguments:
        input (MLOperand): any data type, rank >= 2 (leading dimensions are a batch).
        upper (bool): keep the upper triangle (default) or the lower one.
        diagonal (int): how many diagonals above (positive) or below (negative) the main
            one the boundary moves; a 32-bit signed integer.
        label (str): a name for errors and GPU objects.

    Returns:
        MLOperand: the same shape and data type.

    Raises:
        MLTypeError: a rank below 2, a non-bool ``upper``, a non-integer ``diagonal``.
    """
    # IDL: MLOperand triangular(MLOperand input, optional MLTriangularOptions options = {});
    op = "triangular"
    V.check_kwargs(op, label, kwargs)
    self._check_usable(op, label)
    v = self._operand(op, label, "input", input)
    r = len(v.shape)
    if r < 2:
        V.fail(op, label, "input", "an operand of rank >= 2", f"rank {r} (shape {list(v.shape)})")
    up = V.bool_value(op, label, "upper", upper)
    dg = V.int_value(op, label, "diagonal", diagonal, lo=-(2**31), hi=2**31 - 1)
    return self._emit1(op, [v], v.data_type, v.shape, {"upper": up, "diagonal": dg}, label=label)


@lowering("triangular")
def lower_triangular(node, lc) -> None:
    """triangular: an identity map with a mask over the last two coordinates."""
    src, dst = node.inputs[0], node.outputs[0]
    r = len(src.shape)
    rows, cols = src.shape[-2], src.shape[-1]
    dg, up = node.attrs["diagonal"], node.attrs["upper"]
    # A diagonal beyond the matrix keeps everything or nothing; clamp it so the i32 compare in
    # the kernel cannot overflow (the result is the same).
    dg = max(min(dg, cols), -rows)
    remap(lc, src, dst, dst.shape, [lin(s) for s in strides(src.shape)], fill=0,
          mask={"row": r - 2, "col": r - 1, "upper": up, "diagonal": dg})


# ---------------------------------------------------------------- remap_chain (compiler-made)
#: operators a ``remap_chain`` node may hold (:func:`webnn_gpu.compiler.rules.layout.fuse_remap_chain`)
CHAIN_OPS = ("reshape", "transpose", "expand", "slice", "reverse", "tile", "pad")


def is_view(op: str, attrs) -> bool:
    """Whether a layout operator ``op`` with ``attrs`` (a link of a chain) reads its input's
    row-major index as it is, no kernel of its own: a reshape, or an operator marked ``alias``."""
    return op == "reshape" or bool(attrs.get("alias"))


def axis_form(op: str, attrs, in_shape: Sequence[int], out_shape: Sequence[int]) -> list | None:
    """The index map of a layout operator as one term per output dimension d, each None (the
    dimension reads no input axis: expand's new leading ones) or ``(axis, scale, offset, mod)``:
    input coordinate ``axis`` is ``offset + scale * (c_d % mod if mod else c_d)``. None for an
    operator whose map is no such form (pad, reshape)."""
    r = len(out_shape)
    if op == "transpose":
        return [(p, 1, 0, 0) for p in attrs["permutation"]]
    if op == "slice":
        return [(d, attrs["strides"][d], attrs["starts"][d], 0) for d in range(r)]
    if op == "reverse":
        return [(d, -1, in_shape[d] - 1, 0) if d in attrs["axes"] else (d, 1, 0, 0) for d in range(r)]
    if op == "expand":
        k = r - len(in_shape)
        return [None if d < k else (d - k, 0 if in_shape[d - k] == 1 else 1, 0, 0) for d in range(r)]
    if op == "tile":
        return [(d, 1, 0, 0) if in_shape[d] == out_shape[d] else (d, 0, 0, 0) if in_shape[d] == 1
                else (d, 1, 0, in_shape[d]) for d in range(r)]
    return None


def compose_forms(outer: list, inner: list, outer_shape: Sequence[int]) -> list | None:
    """The :func:`axis_form` of ``inner(outer(c))`` (``outer`` maps coordinates of
    ``outer_shape`` to coordinates of the intermediate tensor, ``inner`` those to the input's),
    or None where a tile's modulus would have to wrap a term that is not the plain coordinate
    (a window across the tile's periods): the chain then keeps two stages."""
    if sorted(t[0] for t in outer if t is not None) != list(range(len(inner))):
        return None  # an intermediate axis read by no outer term, or by two
    out: list = []
    for t, size in zip(outer, outer_shape):
        it = None if t is None else inner[t[0]]
        if it is None:
            out.append(None)
            continue
        _, s1, o1, m1 = t
        j, s2, o2, m2 = it
        u = min(m1, size) if m1 else size  # values the (wrapped) coordinate takes: 0 .. u - 1
        lo, hi = min(o1, o1 + s1 * (u - 1)), max(o1, o1 + s1 * (u - 1))
        if m2 and not (0 <= lo and hi < m2):
            if m1 or o1 or s1 != 1:
                return None
            out.append((j, s2, o2, m2))
        else:
            out.append((j, s2 * s1, o2 + s2 * o1, m1))
    return out


def form_dims(form: list, in_shape: Sequence[int]) -> tuple[list[dict], int]:
    """``layout/remap.wgsl`` terms and base of an :func:`axis_form` over an input of ``in_shape``."""
    st = strides(in_shape)
    dims, base = [], 0
    for t in form:
        if t is None:
            dims.append(lin(0))
            continue
        j, scale, offset, mod = t
        base += offset * st[j]
        dims.append({"kind": "mod", "stride": scale * st[j], "size": mod} if mod else lin(scale * st[j]))
    return dims, base


def chain_stages(chain: Sequence[dict]) -> list[tuple[list[int], list[dict], int]]:
    """The index maps of a chain of layout operators (``{op, attrs, in_shape, out_shape}`` from
    the chain's input to its output), from the output's back to the input's, each
    ``(iterated shape, dims, base)``: neighbours with an :func:`axis_form` and no view between
    them composed into one map (:func:`compose_forms`); a reshape or an aliasing operator
    reads the same row-major index (no map of its own), a pad is a map of its own."""
    stages: list[tuple[list[int], list[dict], int]] = []
    form: list | None = None  # the composed form being built,
    shape: list[int] = []  # its iterated shape
    in_shape: Sequence[int] = ()  # and its input's
    for step in reversed(chain):
        if is_view(step["op"], step["attrs"]):
            if form is not None:
                stages.append((shape, *form_dims(form, in_shape)))
                form = None
            continue
        f = axis_form(step["op"], step["attrs"], step["in_shape"], step["out_shape"])
        if form is not None and f is not None:
            composed = compose_forms(form, f, shape)
            if composed is not None:
                form, in_shape = composed, step["in_shape"]
                continue
        if form is not None:
            stages.append((shape, *form_dims(form, in_shape)))
            form = None
        if f is None:  # a pad
            stages.append((list(step["out_shape"]), pad_dims(step["attrs"], step["in_shape"]), 0))
        else:
            form, shape, in_shape = f, list(step["out_shape"]), step["in_shape"]
    if form is not None:
        stages.append((shape, *form_dims(form, in_shape)))
    return stages


def chain_unit(chain: Sequence[dict], data_type: str) -> int:
    """Elements one invocation of the ``layout/remap.wgsl`` kernel of ``chain`` (as
    :func:`chain_stages` takes it) moves: 4 where every stage's map moves runs of 4
    (:func:`remap_unit`, as :func:`remap` decides), else 1; 4 for a chain of views (no kernel)."""
    maps = [coalesce(shape, dims) + (base,) for shape, dims, base in chain_stages(chain)]
    return min((remap_unit(data_type, *m) for m in maps), default=4)


#: What one launch more costs, in elements a remap kernel moves one at a time: about 45-70 us
#: against 4.7 ns an element (a 384,000-element chain of one-element stages: 1.8 ms), so
#: 10,000. :func:`chain_pays` weighs a chain's one kernel against its operators' own.
REMAP_LAUNCH_ELEMENTS = 10_000


def chain_pays(chain: Sequence[dict], data_type: str) -> bool:
    """Whether ``chain`` (``{op, attrs, in_shape, out_shape}`` from its input on) runs faster as
    one kernel than as one kernel per operator that is not a view: the elements each form's
    invocations move one at a time (an output's size over its :func:`chain_unit`), one
    :data:`REMAP_LAUNCH_ELEMENTS` per launch. A chain whose one kernel loses the vec4s of a
    large operator that moves vec4s alone (a large expand behind a small transpose) stays
    apart."""
    own = [[st] for st in chain if not is_view(st["op"], st["attrs"])]
    apart = sum(math.prod(st[0]["out_shape"]) / chain_unit(st, data_type) + REMAP_LAUNCH_ELEMENTS for st in own)
    fused = math.prod(chain[-1]["out_shape"]) / chain_unit(chain, data_type) + REMAP_LAUNCH_ELEMENTS
    return fused <= apart


@lowering("remap_chain")
def lower_remap_chain(node, lc) -> None:
    """remap_chain: a chain of layout operators as one ``layout/remap.wgsl`` kernel that maps
    each output index through the chain's maps in turn (:func:`chain_stages`); an alias where
    every operator of the chain is a view."""
    src, dst = node.inputs[0], node.outputs[0]
    stages = chain_stages(node.attrs["chain"])
    if not stages:
        lc.alias(dst, src)
        return
    fill = next((st["attrs"]["value"] for st in node.attrs["chain"]
                 if st["op"] == "pad" and st["attrs"]["mode"] == "constant" and not is_view(st["op"], st["attrs"])),
                None)  # (the rule allows one that pads)
    (shape, dims, base), *later = stages
    remap(lc, src, dst, shape, dims, base=base, fill=fill, stages=later)


# ---------------------------------------------------------------- support records
_ANY = (0, MAX_RANK)
_R1 = (1, MAX_RANK)
for _op, _ranks in (("reshape", _ANY), ("transpose", _ANY), ("expand", _ANY), ("slice", _ANY), ("tile", _ANY),
                    ("reverse", _ANY), ("pad", _R1), ("triangular", (2, MAX_RANK))):
    support(_op, {"input": (ALL, _ranks)}, (ALL, _ranks), int64_compute=False)
support("concat", {"inputs": (ALL, _R1)}, (ALL, _R1), int64_compute=False)
support("split", {"input": (ALL, _R1)}, (ALL, _R1), output_name="outputs", int64_compute=False)
