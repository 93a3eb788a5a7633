"""ONNX operator handlers: one node -> WebNN builder calls.

Each handler ``h(c, n, x)`` gets the :class:`~.convert.Converter` ``c``, the node ``n``
(op, attributes, the operator version it follows as ``n.since``) and its input values
``x`` (NumPy arrays for values known at load time, MLOperands otherwise, None for absent
optional inputs); it returns the output values. What a handler cannot express exactly
raises :class:`~.convert.Unsupported` with the reason. ``MAPPED_TO`` describes each
mapping for ``docs/onnx.md`` and :func:`webnn_gpu.onnx.supported_ops`.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from .. import _env
from ..errors import DataError
from .convert import FAILED, Unsupported
from .rewrite import _known_consts, rewrite

__all__ = ["HANDLERS", "MAPPED_TO", "reshape_target", "resize_taps", "slice_params", "split_sizes", "reduce_axes"]

HANDLERS: dict[tuple[str, str], Callable] = {}
MAPPED_TO: dict[str, str] = {}

MS = "com.microsoft"


def _h(*names: str, to: str = "", domain: str = ""):
    def deco(fn):
        for name in names:
            HANDLERS[(domain, name)] = fn
            MAPPED_TO[name if not domain else f"{domain}.{name}"] = to
        return fn
    return deco


def ints(c, v, what: str) -> list[int]:
    return [int(i) for i in np.asarray(c.known(v, what)).reshape(-1)]


def _rank(c, v) -> int:
    return len(c.shape(v))


def _same_type(c, *vals):
    """Operands for ``vals`` in one data type (that of the first run-time operand)."""
    dt = next((v.data_type for v in vals if v is not None and not c.is_known(v)), None)
    return [c.operand(v, dt) if v is not None else None for v in vals]


# ---------------------------------------------------------------- element-wise
_BINARY = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div", "Pow": "pow", "Equal": "equal",
           "Greater": "greater", "GreaterOrEqual": "greater_or_equal", "Less": "lesser",
           "LessOrEqual": "lesser_or_equal", "And": "logical_and", "Or": "logical_or", "Xor": "logical_xor"}


def _binary(method):
    def h(c, n, x):
        a, b = x[0], x[1]
        if n.op == "Pow":
            da, db = c.wdtype(a), c.wdtype(b)
            if da != db:
                if da in ("float32", "float16"):
                    b = c.operand(b, da)
                else:
                    raise Unsupported(f"Pow of a {da} base with a {db} exponent")
        if method == "add":
            biased = _gathered_plus(c, n, a, b)
            if biased is not None:
                return biased
        if method == "mul" and c.dtype == "float16":
            a, b = _finite_mask_value(c, n, a, b)
        moved = _binary_through_view(c, method, a, b)
        if moved is not None:
            return moved
        out = c.call(method, *_same_type(c, a, b))
        _note_scaled(c, method, a, b, out)
        if n.op == "Equal":
            _note_one_hot(c, n, a, b)
        return out
    return h


def _finite_mask_value(c, n, a, b):
    """``Mul(a, b)`` in a float16 graph where one side is a known finite float constant beyond
    float16's range and the other a cast of a boolean or known to hold only 0 and 1 (tf2onnx's
    spelling of an attention mask's select, ``Cast(Not(mask)) * -3.4e38``): the constant becomes float16's
    largest finite magnitude with its sign, so that the product is 0 where the mask is 0 (an
    infinity would give NaN there) and -65504 elsewhere, which a softmax reads as exp(-65504 -
    max) = 0, as it reads the float32 value. ``a, b``, the constant clamped or as they were."""
    top = float(np.finfo(np.float16).max)
    out = [a, b]
    for j, (k, other) in enumerate(((a, b), (b, a))):
        zero_one = n.inputs[1 - j] in c.zero_one or (c.is_known(other) and np.isin(other, (0, 1)).all())
        if zero_one and c.is_known(k) and k.dtype.kind == "f" and np.all(np.isfinite(k)) and np.any(np.abs(k) > top):
            out[j] = np.asarray(np.clip(k.astype(np.float32), -top, top))
    return out[0], out[1]


#: element-wise methods that a conv or matmul kernel can apply as it stores (its epilogue)
_EPILOGUE_BINARY = ("add", "sub", "mul", "div", "max", "min", "pow")


def _view_host(c, v):
    """The operand computed by a kernel that run-time ``v`` views through reshapes that only
    add or remove unit axes (a 1-D conv's output, a squeezed conv output), or None."""
    src = c.view_source(v)
    return src if src is not None and src._value.kind == "op" else None


def _binary_through_view(c, method, a, b):
    """``method(a, b)`` computed before the reshape when one side is known and the other
    is a unit-axes view of a kernel's output (:func:`_view_host`), so that the producing
    kernel can take it as an epilogue step: the known side is re-laid out for the source's
    shape (the same elements meet), then the result is reshaped. Where both sides are such
    views of outputs of one shape, viewed alike, the op runs on the two outputs (a chain of
    element-wise ops on a conv's output stays in the conv's shape and layout). None where
    that does not apply."""
    if method not in _EPILOGUE_BINARY or (c.is_known(a) and c.is_known(b)):
        return None
    if not c.is_known(a) and not c.is_known(b):
        # two views of kernel outputs of one shape, viewed alike (a tanh-gelu's products)
        sa, sb = _view_host(c, a), _view_host(c, b)
        if sa is None or sb is None or c.shape(a) != c.shape(b) or c.shape(sa) != c.shape(sb):
            return None
        return c.call("reshape", c.call(method, *_same_type(c, sa, sb)), list(c.shape(a)))
    v, k = (b, a) if c.is_known(a) else (a, b)
    src = _view_host(c, v)
    if src is None:
        return None
    sv, ss, kk = c.shape(v), c.shape(src), np.asarray(k)
    if kk.ndim > len(sv):
        return None
    kp = (1,) * (len(sv) - kk.ndim) + kk.shape
    if any(d not in (1, e) for d, e in zip(kp, sv)):
        return None  # the known side would expand the result
    per_axis = [d for d, e in zip(kp, sv) if e != 1]
    it = iter(per_axis)
    ks = [next(it) if e != 1 else 1 for e in ss]
    k2 = kk.reshape(ks)
    args = (k2, src) if v is b else (src, k2)
    inner = c.call(method, *_same_type(c, *args))
    _note_scaled(c, method, *args, inner)
    return c.call("reshape", inner, list(sv))


def _note_scaled(c, method, a, b, out) -> None:
    """Record ``out = a * b`` or ``a / b`` where one side (the divisor, for a Div) is a known
    float scalar and the other a run-time operand made by reshapes and transposes
    (:meth:`~.convert.Converter.moved_from`): a ``MatMul`` may take ``out`` as a transposed
    view (:func:`_as_transposed_view`)."""
    if method not in ("mul", "div"):
        return
    for j in ((0, 1) if method == "mul" else (1,)):
        k, v = (a, b)[j], (b, a)[j]
        if c.is_known(k) and not c.is_known(v) and k.dtype.kind == "f" and k.size == 1 \
                and k.ndim <= len(c.shape(v)) and c.moved_from(v) is not None:
            c.scaled[id(out)] = (out, method, v, np.asarray(k).reshape(()), j)


#: the most elements of a MatMul operand whose movements are composed at load time (int32
#: indices: 16 MiB an array)
TRANSPOSED_VIEW_MAX = 1 << 22


def _as_transposed_view(c, v):
    """Run-time MatMul operand ``v`` as one transpose of a reshape of the tensor it was moved
    from, when ``v`` is made from it by reshapes and transposes (two or more, or maybe then
    scaled by a known scalar, :func:`_note_scaled`) that compose to that: the scale is applied
    to the tensor before the movements (each element gets the same product) and the movements
    become one reshape and one transpose, a view the compiler's matmul and attention kernels
    read in place (PyTorch's exporters write an attention's keys as
    ``Reshape(Transpose(Reshape(Transpose(Reshape(k))))) * scale``). ``v`` itself otherwise,
    or with ``WEBNN_GPU_FORCE_TRANSPOSED_VIEW=off``."""
    if c.is_known(v) or len(c.shape(v)) < 2 or _env.force_choice("transposed_view", ("off",)) == "off":
        return v
    src, steps = c.moved_from(v) or (v, ())
    ent = c.scaled.get(id(src))
    scaled = ent is not None and ent[0] is src
    if scaled:  # the scale moves to the chain's start: v = moves(scale * moves0(src0))
        src, before = c.moved_from(ent[2]) or (ent[2], ())
        steps = (*before, *steps)
    shape = tuple(c.shape(v))
    size = int(np.prod(shape))
    if (len(steps) < 2 and not scaled) or size > TRANSPOSED_VIEW_MAX:
        return v
    idx = np.arange(size, dtype=np.int32).reshape(c.shape(src))
    for method, perm, out_shape in steps:
        idx = idx.transpose(perm) if method == "transpose" else idx.reshape(out_shape)
    if idx.shape != shape:
        return v
    # the axes of size 1 aside: a permutation of the others, of the source or a reshape's output
    idx = idx.reshape([d for d in shape if d != 1])
    found = None
    for cand in [tuple(c.shape(src))] + [o for m, _, o in steps if m == "reshape"]:
        rows = tuple(d for d in cand if d != 1)
        perm = _permutation_of(idx, rows)
        if perm is not None:
            found = rows, perm
            break
    if found is None:
        return v
    # the output's axes of size 1 lead the reshaped source, in order: one reshape, one transpose
    rows, perm_nu = found
    units = [a for a, d in enumerate(shape) if d == 1]
    rows = (1,) * len(units) + rows
    it = iter(perm_nu)
    perm = [units.index(a) if d == 1 else len(units) + next(it) for a, d in enumerate(shape)]
    t = c.call("reshape", src, list(rows)) if tuple(c.shape(src)) != rows else src
    if scaled:
        _, method, _, k, j = ent
        t = c.call(method, *_same_type(c, *((t, k) if j == 1 else (k, t))))
    return c.call("transpose", t, permutation=perm) if perm != sorted(perm) else t


def _permutation_of(idx: np.ndarray, rows: tuple) -> list[int] | None:
    """The permutation ``p`` with ``idx == arange(idx.size).reshape(rows).transpose(p)``, or None."""
    if len(rows) != idx.ndim:
        return None
    strides = [int(np.prod(rows[i + 1:])) for i in range(len(rows))]
    perm, free = [], set(range(len(rows)))
    for a, n in enumerate(idx.shape):
        step = int(idx[(0,) * a + (1,) + (0,) * (idx.ndim - a - 1)] - idx.flat[0]) if n > 1 else None
        i = next((i for i in sorted(free) if rows[i] == n and (step is None or strides[i] == step)), None)
        if i is None:
            return None
        perm.append(i)
        free.discard(i)
    base = np.arange(idx.size, dtype=idx.dtype).reshape(rows).transpose(perm)
    return perm if np.array_equal(base, idx) else None


def _note_one_hot(c, n, a, b) -> None:
    """Record ``n``'s output as a one-hot encoding when it compares a run-time integer operand
    of last dimension 1 with ``arange(depth)`` along a new last axis (either way round): a
    ``MatMul`` of its float cast with a known matrix is then a gather of the matrix's rows
    (:func:`_one_hot_matmul`)."""
    if c.is_known(a):
        a, b = b, a
    if c.is_known(a) or not c.is_known(b) or a.data_type not in ("int32", "int64", "uint32", "uint8", "int8"):
        return
    sa, kb = c.shape(a), np.asarray(b)
    if not sa or sa[-1] != 1 or kb.ndim < 1 or kb.ndim > len(sa) or any(d != 1 for d in kb.shape[:-1]):
        return
    depth = kb.shape[-1]
    if depth < 2 or not np.array_equal(kb.reshape(-1), np.arange(depth)):
        return
    c.one_hot[n.outputs[0]] = (a, depth)


for _k, _m in _BINARY.items():
    _h(_k, to=_m)(_binary(_m))


@_h("Max", "Min", "Sum", "Mean", to="max/min/add chains (Mean: add chain, then div by the count)")
def _variadic(c, n, x):
    method = {"Max": "max", "Min": "min", "Sum": "add", "Mean": "add"}[n.op]
    vals = _same_type(c, *x)
    out = vals[0]
    for v in vals[1:]:
        out = c.call(method, out, v)
    if len(vals) == 1:
        out = c.call("identity", out)
    if n.op == "Mean" and len(vals) > 1:
        out = c.call("div", out, c.scalar(len(vals), out.data_type))
    return out


@_h("Mod", to="fmod=1: a - b * trunc(a / b); fmod=0 (integers): that, plus b where the signs differ")
def _mod(c, n, x):
    a, b = _same_type(c, x[0], x[1])
    dt = a.data_type
    is_float = dt in ("float32", "float16")
    fmod = int(n.attr("fmod", 0))
    if is_float and not fmod:
        raise Unsupported("Mod with fmod=0 on floats (ONNX requires fmod=1 for floats)")
    q = c.call("div", a, b)
    if is_float:
        zero = c.scalar(0, dt)
        q = c.call("where", c.call("lesser", q, zero), c.call("ceil", q), c.call("floor", q))
    r = c.call("sub", a, c.call("mul", b, q))
    if is_float:
        # a value of b that does not divide: keep fmod's result in (-|b|, |b|)
        return r
    if fmod:
        return r
    zero = c.scalar(0, dt)
    differ = c.call("not_equal", c.call("lesser", r, zero), c.call("lesser", b, zero))
    fix = c.call("logical_and", c.call("not_equal", r, zero), differ)
    return c.call("where", fix, c.call("add", r, b), r)


_UNARY = {"Abs": "abs", "Neg": "neg", "Ceil": "ceil", "Floor": "floor", "Round": "round_even", "Exp": "exp",
          "Log": "log", "Sqrt": "sqrt", "Sin": "sin", "Cos": "cos", "Tan": "tan", "Erf": "erf",
          "Reciprocal": "reciprocal", "Sigmoid": "sigmoid", "Tanh": "tanh", "Relu": "relu", "Softplus": "softplus",
          "Softsign": "softsign", "Sign": "sign", "Not": "logical_not", "IsNaN": "is_nan", "HardSwish": "hard_swish"}


def _act(c, v, method, **kw):
    """``method(v, **kw)``, an element-wise op of one float operand: on the kernel output that
    ``v`` is a unit-axes view of (:func:`_view_host`), where it runs in the kernel's
    epilogue, then reshaped; or before the pixel shuffle that made ``v``
    (:func:`_pixel_shuffle_conv`), in the conv's epilogue."""
    src = _view_host(c, v) if v.data_type in ("float32", "float16") else None
    if src is not None:
        return c.call("reshape", c.call(method, src, **kw), list(c.shape(v)))
    ent = c.shuffled.get(id(v))
    if ent is not None and ent[2] is v and v.data_type in ("float32", "float16"):
        y, shuffle, _ = ent  # an element-wise op commutes with the pixel shuffle
        a = c.call(method, y, **kw)
        out = shuffle(a)
        c.shuffled[id(out)] = (a, shuffle, out)
        return out
    return c.call(method, v, **kw)


def _unary(method):
    def h(c, n, x):
        v = c.operand(x[0])
        if method == "sqrt":
            mag = _magnitude(c, v)
            if mag is not None:
                return mag
        return _act(c, v, method)
    return h


def _producer(v, *skip):
    """The builder node that computes Value ``v``, looking through ``skip`` ops (identity)."""
    node = v.producer if v.kind == "op" else None
    while node is not None and node.op in skip and len(node.inputs) == 1:
        v = node.inputs[0]
        node = v.producer if v.kind == "op" else None
    return node


def _magnitude(c, v):
    """``sqrt(a^2 + b^2)`` where ``a`` and ``b`` are the two halves of one float tensor ``y``
    along an axis (an STFT's real and imaginary parts, stacked by its conv): one
    ``reduce_l2`` of ``y`` with that axis split in two, instead of two slices and an
    element-wise kernel. None where the pattern does not hold."""
    from ..builder import MLOperand

    add = _producer(v._value, "identity")
    if add is None or add.op != "add" or len(add.inputs) != 2:
        return None
    halves = []
    for sq in add.inputs:
        pw = _producer(sq, "identity")
        if pw is None or pw.op != "pow" or len(pw.inputs) != 2:
            return None
        e = pw.inputs[1]
        if e.kind != "constant" or e.data is None or e.data.size != 1 or float(e.data.reshape(-1)[0]) != 2.0:
            return None
        sl = _producer(pw.inputs[0], "identity")
        if sl is None or sl.op != "slice" or any(st != 1 for st in sl.attrs.get("strides", ())):
            return None
        halves.append(sl)
    (s1, s2) = halves
    y = s1.inputs[0]
    if s2.inputs[0] is not y or y.data_type not in ("float32", "float16"):
        return None
    shape, out = tuple(y.shape), tuple(s1.outputs[0].shape)
    diff = [k for k in range(len(shape)) if s1.attrs["starts"][k] != s2.attrs["starts"][k] or out[k] != shape[k]]
    if len(diff) != 1 or tuple(s2.outputs[0].shape) != out:
        return None
    k = diff[0]
    h = out[k]
    if shape[k] != 2 * h or sorted((s1.attrs["starts"][k], s2.attrs["starts"][k])) != [0, h] or any(
            s1.attrs["starts"][i] or s2.attrs["starts"][i] for i in range(len(shape)) if i != k):
        return None
    split = c.call("reshape", MLOperand(c.b, y), [*shape[:k], 2, h, *shape[k + 1:]])
    return c.call("reduce_l2", split, axes=[k], keep_dimensions=False)


for _k, _m in _UNARY.items():
    _h(_k, to=_m)(_unary(_m))


@_h("Identity", to="identity (or nothing: the value itself)")
def _identity(c, n, x):
    return x[0]


@_h("Dropout", to="the input (inference: no dropout); the mask output is a constant of ones")
def _dropout(c, n, x):
    if len(x) > 2 and x[2] is not None and bool(np.asarray(c.known(x[2], "training_mode")).reshape(())):
        raise Unsupported("Dropout with training_mode=true")
    if n.since < 7 and n.attr("is_test", 0) == 0:
        raise Unsupported("Dropout in training mode")
    mask = np.ones(c.shape(x[0]), np.bool_) if len(n.outputs) > 1 and n.outputs[1] else None
    return [x[0], mask]


@_h("IsInf", to="is_infinite (and greater/lesser than 0 for detect_negative/detect_positive)")
def _isinf(c, n, x):
    v = c.operand(x[0])
    out = c.call("is_infinite", v)
    neg, pos = int(n.attr("detect_negative", 1)), int(n.attr("detect_positive", 1))
    if neg and pos:
        return out
    zero = c.scalar(0, v.data_type)
    if not neg and not pos:
        return c.call("logical_and", out, c.call("lesser", zero, zero))
    side = c.call("greater", v, zero) if pos else c.call("lesser", v, zero)
    return c.call("logical_and", out, side)


@_h("Gelu", to="gelu (approximate='none'); tanh form from tanh/mul/add", domain="")
def _gelu(c, n, x):
    v = c.operand(x[0])
    if n.attr("approximate", "none") == "tanh":
        return _gelu_tanh(c, v)
    return c.call("gelu", v)


def _gelu_tanh(c, v):
    dt = v.data_type
    inner = c.call("mul", c.call("add", v, c.call("mul", c.call("mul", c.call("mul", v, v), v),
                                                     c.scalar(0.044715, dt))), c.scalar(math.sqrt(2 / math.pi), dt))
    return c.call("mul", c.call("mul", v, c.scalar(0.5, dt)), c.call("add", c.call("tanh", inner), c.scalar(1, dt)))


_h("Gelu", to="gelu", domain=MS)(_gelu)


@_h("FastGelu", to="gelu tanh form (+ bias)", domain=MS)
def _fast_gelu(c, n, x):
    v = c.operand(x[0])
    if len(x) > 1 and x[1] is not None:
        v = c.call("add", v, c.operand(x[1], v.data_type))
    return _gelu_tanh(c, v)


@_h("BiasGelu", to="add + gelu", domain=MS)
def _bias_gelu(c, n, x):
    v = c.operand(x[0])
    return c.call("gelu", c.call("add", v, c.operand(x[1], v.data_type)))


@_h("QuickGelu", to="x * sigmoid(alpha * x)", domain=MS)
def _quick_gelu(c, n, x):
    v = c.operand(x[0])
    alpha = float(n.attr("alpha", 1.702))
    return c.call("mul", v, c.call("sigmoid", c.call("mul", v, c.scalar(alpha, v.data_type))))


@_h("Elu", to="elu")
def _elu(c, n, x):
    return _act(c, c.operand(x[0]), "elu", alpha=float(n.attr("alpha", 1.0)))


@_h("Selu", to="gamma * elu(x, alpha)")
def _selu(c, n, x):
    v = c.operand(x[0])
    e = c.call("elu", v, alpha=float(n.attr("alpha", 1.67326319217681884765625)))
    return c.call("mul", e, c.scalar(float(n.attr("gamma", 1.05070102214813232421875)), v.data_type))


@_h("Celu", to="max(0, x) + min(0, alpha * (exp(x / alpha) - 1))")
def _celu(c, n, x):
    v = c.operand(x[0])
    alpha = float(n.attr("alpha", 1.0))
    dt = v.data_type
    if alpha == 1.0:
        return c.call("elu", v, alpha=1.0)
    e = c.call("elu", c.call("div", v, c.scalar(alpha, dt)), alpha=1.0)
    return c.call("mul", e, c.scalar(alpha, dt))


@_h("LeakyRelu", to="leaky_relu")
def _leaky(c, n, x):
    return _act(c, c.operand(x[0]), "leaky_relu", alpha=float(n.attr("alpha", 0.01)))


@_h("HardSigmoid", to="hard_sigmoid")
def _hard_sigmoid(c, n, x):
    return _act(c, c.operand(x[0]), "hard_sigmoid", alpha=float(n.attr("alpha", 0.2)),
                beta=float(n.attr("beta", 0.5)))


@_h("ThresholdedRelu", to="where(x > alpha, x, 0)")
def _thresholded(c, n, x):
    v = c.operand(x[0])
    dt = v.data_type
    return c.call("where", c.call("greater", v, c.scalar(float(n.attr("alpha", 1.0)), dt)), v, c.scalar(0, dt))


@_h("Mish", to="x * tanh(softplus(x))")
def _mish(c, n, x):
    v = c.operand(x[0])
    return c.call("mul", v, c.call("tanh", c.call("softplus", v)))


@_h("Shrink", to="where(x < -lambd, x + bias, where(x > lambd, x - bias, 0))")
def _shrink(c, n, x):
    v = c.operand(x[0])
    dt = v.data_type
    if dt not in ("float32", "float16"):
        raise Unsupported(f"Shrink on {dt}")
    lambd, bias = float(n.attr("lambd", 0.5)), float(n.attr("bias", 0.0))
    lo = c.call("lesser", v, c.scalar(-lambd, dt))
    hi = c.call("greater", v, c.scalar(lambd, dt))
    zero = c.scalar(0, dt)
    return c.call("where", lo, c.call("add", v, c.scalar(bias, dt)),
                  c.call("where", hi, c.call("sub", v, c.scalar(bias, dt)), zero))


@_h("PRelu", to="prelu (slope broadcast to the input's shape when it is not unidirectional)")
def _prelu(c, n, x):
    v, s = _same_type(c, x[0], x[1])
    if tuple(np.broadcast_shapes(c.shape(v), c.shape(s))) != c.shape(v):
        raise Unsupported("PRelu whose slope broadcasts the input to a larger shape")
    return c.call("prelu", v, s)


@_h("Clip", to="clamp (min/max known), else max/min with the bound operands")
def _clip(c, n, x):
    v = c.operand(x[0])
    if n.since < 11:
        lo, hi = n.attr("min"), n.attr("max")
        return _act(c, v, "clamp", min_value=lo if lo is not None else None, max_value=hi)
    lo = x[1] if len(x) > 1 else None
    hi = x[2] if len(x) > 2 else None
    kw = {}
    out = v
    for key, bound, method in (("min_value", lo, "max"), ("max_value", hi, "min")):
        if bound is None:
            continue
        if c.is_known(bound):
            val = np.asarray(bound).reshape(())
            kw[key] = int(val) if val.dtype.kind in "iu" else float(val)
        else:
            out = c.call(method, out, c.operand(bound, v.data_type))
    if kw:
        out = _act(c, out, "clamp", **kw)
    if out is v:
        out = c.call("identity", v)
    return out


@_h("Where", to="where (condition as uint8)")
def _where(c, n, x):
    cond = c.operand(x[0], "uint8")
    a, b = _same_type(c, x[1], x[2])
    return c.call("where", cond, a, b)


@_h("Cast", to="cast; to bool: not_equal(x, 0)")
def _cast(c, n, x):
    to = int(n.attr("to"))
    if n.inputs[0] in c.one_hot and to in (1, 10):  # float, float16: the one-hot stays one
        c.one_hot[n.outputs[0]] = c.one_hot[n.inputs[0]]
    if to in (1, 10) and c.producer_op.get(n.inputs[0]) in _BOOLEAN_OPS:
        c.zero_one.add(n.outputs[0])
    return _cast_to(c, x[0], to)


#: ONNX operators whose output is a boolean tensor
_BOOLEAN_OPS = {"Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual", "And", "Or", "Xor", "Not", "IsNaN",
                "IsInf"}


def _cast_to(c, v, to: int):
    if to == 9:
        v = c.operand(v)
        return c.call("not_equal", v, c.scalar(0, v.data_type))
    dt = c.onnx_type(to)
    v = c.operand(v)
    if v.data_type == dt:
        return v
    return c.call("cast", v, dt)


@_h("CastLike", to="cast")
def _cast_like(c, n, x):
    target = x[1]
    dt = c.wdtype(target)
    v = c.operand(x[0])
    if isinstance(target, np.ndarray) and target.dtype == np.bool_:
        return c.call("not_equal", v, c.scalar(0, v.data_type))
    return v if v.data_type == dt else c.call("cast", v, dt)


# ---------------------------------------------------------------- convolution and pooling
def _spatial_pads(n, in_sizes, kernel, strides, dilations):
    r = len(in_sizes)
    auto = n.attr("auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        begin, end = [], []
        for size, k, s, d in zip(in_sizes, kernel, strides, dilations):
            out = -(-size // s)
            total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
            small, big = total // 2, total - total // 2
            begin.append(small if auto == "SAME_UPPER" else big)
            end.append(big if auto == "SAME_UPPER" else small)
        return begin, end
    if auto == "VALID":
        return [0] * r, [0] * r
    pads = [int(p) for p in (n.attr("pads") or [0] * (2 * r))]
    return pads[:r], pads[r:]


def _to_2d(c, v):
    """A rank-3 NC(L) operand as NC(L)1."""
    s = c.shape(v)
    return c.call("reshape", v, [*s, 1])


def _conv_common(c, n, x, transpose=False):
    v = c.operand(x[0])
    w = c.operand(x[1], v.data_type)
    bias = c.operand(x[2], v.data_type) if len(x) > 2 and x[2] is not None else None
    r = _rank(c, v) - 2
    if r not in (1, 2):
        raise Unsupported(f"{n.op} with {r} spatial dimensions (WebNN has 2-D convolution only)")
    ws = c.shape(w)
    kernel = [int(k) for k in (n.attr("kernel_shape") or ws[2:])]
    strides = [int(s) for s in (n.attr("strides") or [1] * r)]
    dil = [int(d) for d in (n.attr("dilations") or [1] * r)]
    in_sizes = list(c.shape(v)[2:])
    one_d = r == 1
    if one_d:
        v = _to_2d(c, v)
        w = _to_2d(c, w)
    return v, w, bias, r, kernel, strides, dil, in_sizes, one_d


def _pads4(begin, end, one_d):
    if one_d:
        return [begin[0], end[0], 0, 0]
    return [begin[0], end[0], begin[1], end[1]]


def _ext(vals, one_d, fill):
    return [*vals, fill] if one_d else list(vals)


@_h("Conv", to="conv2d (nchw, oihw); 1-D through a trailing axis of size 1; 1x1 on 1x1 pixels in nhwc; "
                "3-D as one conv2d over the depth taps side by side (groups 1)")
def _conv(c, n, x):
    if n.domain != MS and _rank(c, x[0]) == 5:
        return _conv3d(c, n, x)
    v, w, bias, r, kernel, strides, dil, in_sizes, one_d = _conv_common(c, n, x)
    begin, end = _spatial_pads(n, in_sizes, kernel, strides, dil)
    if not one_d and in_sizes == [1, 1] and kernel == [1, 1] and not any(begin + end) and int(n.attr("group", 1)) == 1:
        out = _pixel_conv(c, v, w, bias)
        return _activation(c, n, out) if n.domain == MS else out
    out = c.call("conv2d", v, w, padding=_pads4(begin, end, one_d), strides=_ext(strides, one_d, 1),
                 dilations=_ext(dil, one_d, 1), groups=int(n.attr("group", 1)), bias=bias)
    return _activation(c, n, out) if n.domain == MS else (_from_2d(c, out) if one_d else out)


def _pixel_conv(c, v, w, bias):
    """A 1x1 conv of ``[N, C, 1, 1]`` pixels (squeeze-and-excite's layers) in NHWC: the same
    bytes as ``[N, 1, 1, C]`` and an ``ohwi`` filter ``[O, 1, 1, C]`` (reshapes, no copy), so
    the compiler's NHWC fusions (its squeeze-excite kernel) take it."""
    N, C = c.shape(v)[:2]
    O = c.shape(w)[0]
    out = c.call("conv2d", c.call("reshape", v, [N, 1, 1, C]), c.call("reshape", w, [O, 1, 1, C]), bias=bias,
                 input_layout="nhwc", filter_layout="ohwi")
    return c.call("reshape", out, [N, O, 1, 1])


def _from_2d(c, v):
    return c.call("reshape", v, list(c.shape(v)[:-1]))


_FUSED_ACT = {"Relu", "Tanh", "Sigmoid", "LeakyRelu", "Clip", "HardSigmoid"}


def _activation(c, n, out):
    act = n.attr("activation")
    if len(c.shape(out)) == 4 and _rank_of_input(c, n) == 3:
        out = _from_2d(c, out)
    if not act:
        return out
    params = list(n.attr("activation_params") or [])
    if act == "Relu":
        return _act(c, out, "relu")
    if act == "Tanh":
        return _act(c, out, "tanh")
    if act == "Sigmoid":
        return _act(c, out, "sigmoid")
    if act == "LeakyRelu":
        return _act(c, out, "leaky_relu", alpha=float(params[0]) if params else 0.01)
    if act == "HardSigmoid":
        return _act(c, out, "hard_sigmoid", alpha=float(params[0]) if params else 0.2,
                    beta=float(params[1]) if len(params) > 1 else 0.5)
    if act == "Clip":
        return _act(c, out, "clamp", min_value=float(params[0]), max_value=float(params[1]))
    raise Unsupported(f"FusedConv activation {act!r}")


def _rank_of_input(c, n):
    return len(c.shape(c.env[n.inputs[0]]))


_h("FusedConv", to="conv2d + its activation", domain=MS)(_conv)


@_h("ConvTranspose", to="conv_transpose2d (nchw, iohw); output_shape through the pads it implies; "
                         "kernel == stride, filter not baked: 1x1 conv2d + pixel shuffle; 3-D as conv_transpose2d "
                         "of the depth taps + a 0/1 placing matmul (groups 1)")
def _conv_transpose(c, n, x):
    if _rank(c, x[0]) == 5:
        return _conv_transpose3d(c, n, x)
    v, w, bias, r, kernel, strides, dil, in_sizes, one_d = _conv_common(c, n, x)
    begin, end, out_pad = _transpose_pads(n, in_sizes, kernel, strides, dil)
    if not one_d and kernel == strides and dil == [1, 1] and not any(begin + end + out_pad) \
            and int(n.attr("group", 1)) == 1 and c.is_known(x[1]) and not _baked_transpose(np.asarray(x[1])) \
            and (len(x) < 3 or x[2] is None or c.is_known(x[2])):
        return _pixel_shuffle_conv(c, v, np.asarray(x[1]), None if len(x) < 3 or x[2] is None else np.asarray(x[2]))
    out = c.call("conv_transpose2d", v, w, padding=_pads4(begin, end, one_d), strides=_ext(strides, one_d, 1),
                 dilations=_ext(dil, one_d, 1), output_padding=_ext(out_pad, one_d, 0),
                 groups=int(n.attr("group", 1)), bias=bias)
    return _from_2d(c, out) if one_d else out


def _transpose_pads(n, in_sizes, kernel, strides, dil):
    """A ConvTranspose's (begin pads, end pads, output padding) per spatial axis, its
    ``output_shape`` and ``auto_pad`` turned into the pads they imply."""
    r = len(in_sizes)
    out_pad = [int(p) for p in (n.attr("output_padding") or [0] * r)]
    out_shape = n.attr("output_shape")
    auto = n.attr("auto_pad", "NOTSET")
    if out_shape is not None or auto in ("SAME_UPPER", "SAME_LOWER"):
        target = [int(s) for s in out_shape][-r:] if out_shape is not None else [i * s for i, s in
                                                                                 zip(in_sizes, strides)]
        begin, end = [], []
        for i in range(r):
            total = strides[i] * (in_sizes[i] - 1) + out_pad[i] + (kernel[i] - 1) * dil[i] + 1 - target[i]
            if total < 0:
                raise Unsupported(f"ConvTranspose output_shape {target} larger than the full output")
            if auto == "SAME_UPPER":
                begin.append(total // 2)
                end.append(total - total // 2)
            else:
                begin.append(total - total // 2)
                end.append(total // 2)
        return begin, end, out_pad
    if auto == "VALID":
        return [0] * r, [0] * r, out_pad
    pads = [int(p) for p in (n.attr("pads") or [0] * (2 * r))]
    return pads[:r], pads[r:], out_pad


def _conv3d_common(c, n, x):
    """A 3-D Conv / ConvTranspose's input (transposed to ``[N, D, C, H, W]``), filter, bias,
    kernel, strides and dilations; groups other than 1 are refused."""
    v = c.operand(x[0])
    if int(n.attr("group", 1)) != 1:
        raise Unsupported(f"{n.op} with 3 spatial dimensions and groups")
    ws = c.shape(x[1])
    kernel = [int(k) for k in (n.attr("kernel_shape") or ws[2:])]
    strides = [int(s) for s in (n.attr("strides") or [1] * 3)]
    dil = [int(d) for d in (n.attr("dilations") or [1] * 3)]
    bias = c.operand(x[2], v.data_type) if len(x) > 2 and x[2] is not None else None
    return v, c.call("transpose", v, permutation=[0, 2, 1, 3, 4]), bias, kernel, strides, dil


def _filter3d(c, w, perm, shape, dt):
    """A 5-D filter transposed by ``perm`` and reshaped to the 4-D ``shape`` (in NumPy when known)."""
    if c.is_known(w):
        return c.operand(np.ascontiguousarray(np.transpose(np.asarray(w), perm)).reshape(shape), dt)
    return c.call("reshape", c.call("transpose", c.operand(w, dt), permutation=perm), shape)


def _conv3d(c, n, x):
    """``Conv`` of ``[N, C, D, H, W]``: out[:, :, od] = sum over the depth taps i of
    conv2d(x[:, :, od * sd + i * dd - pad], w[:, :, i]); the taps' input slices side by side
    along the channels are one conv2d over ``[N * OD, KD * C, H, W]`` with the filter's taps
    likewise side by side (the same products and sums)."""
    v, t, bias, kernel, strides, dil = _conv3d_common(c, n, x)
    N, C, D, H, W = c.shape(v)
    O = c.shape(x[1])[0]
    KD, sd, dd = kernel[0], strides[0], dil[0]
    begin, end = _spatial_pads(n, [D, H, W], kernel, strides, dil)
    od = (D + begin[0] + end[0] - (KD - 1) * dd - 1) // sd + 1
    if od < 1:
        raise Unsupported(f"Conv of depth {D} smaller than its filter")
    if begin[0] or end[0]:
        t = c.call("pad", t, [0, begin[0], 0, 0, 0], [0, end[0], 0, 0, 0])
    if KD > 1 or sd > 1 or od != c.shape(t)[1]:
        t = [c.call("slice", t, [0, i * dd, 0, 0, 0], [N, (od - 1) * sd + 1, C, H, W], strides=[1, sd, 1, 1, 1])
             for i in range(KD)]
        t = t[0] if KD == 1 else c.call("concat", t, 2)
    t = c.call("reshape", t, [N * od, KD * C, H, W])
    w = _filter3d(c, x[1], [0, 2, 1, 3, 4], [O, KD * C, kernel[1], kernel[2]], v.data_type)
    y = c.call("conv2d", t, w, padding=[begin[1], end[1], begin[2], end[2]], strides=strides[1:],
               dilations=dil[1:], bias=bias)
    y = c.call("reshape", y, [N, od, *c.shape(y)[1:]])
    return c.call("transpose", y, permutation=[0, 2, 1, 3, 4])


def _conv_transpose3d(c, n, x):
    """``ConvTranspose`` of ``[N, C, D, H, W]``: input depth j and tap i add
    conv_transpose2d(x[:, :, j], w[:, :, i]) to output depth j * sd + i * dd - pad; one
    conv_transpose2d of the ``N * D`` frames gives every tap (``KD * O`` channels), and the sum
    per output depth is a product with a constant 0/1 matrix; then the bias."""
    v, t, bias, kernel, strides, dil = _conv3d_common(c, n, x)
    N, C, D, H, W = c.shape(v)
    O = c.shape(x[1])[1]
    KD, sd, dd = kernel[0], strides[0], dil[0]
    begin, end, out_pad = _transpose_pads(n, [D, H, W], kernel, strides, dil)
    od = (D - 1) * sd + (KD - 1) * dd + 1 - begin[0] - end[0] + out_pad[0]
    dt = v.data_type
    t = c.call("reshape", t, [N * D, C, H, W])
    w = _filter3d(c, x[1], [0, 2, 1, 3, 4], [C, KD * O, kernel[1], kernel[2]], dt)
    y = c.call("conv_transpose2d", t, w, padding=[begin[1], end[1], begin[2], end[2]], strides=strides[1:],
               dilations=dil[1:], output_padding=out_pad[1:])
    oh, ow = c.shape(y)[2:]
    place = np.zeros((od, KD * D), np.float32)
    for i in range(KD):
        for j in range(D):
            if 0 <= (o := j * sd + i * dd - begin[0]) < od:
                place[o, i * D + j] = 1.0
    y = c.call("transpose", c.call("reshape", y, [N, D, KD, O * oh * ow]), permutation=[0, 2, 1, 3])
    y = c.call("matmul", c.operand(place[None], dt), c.call("reshape", y, [N, KD * D, O * oh * ow]))
    y = c.call("transpose", c.call("reshape", y, [N, od, O, oh, ow]), permutation=[0, 2, 1, 3, 4])
    return y if bias is None else c.call("add", y, c.call("reshape", bias, [1, O, 1, 1, 1]))


def _baked_transpose(w: np.ndarray) -> bool:
    """Whether conv_transpose2d's tiled kernel bakes this known ``[C, O, KH, KW]`` filter into
    its shader (at most 4 outputs, a small filter: ``webnn_gpu/ops/conv.py``), which beats a
    1x1 conv and a pixel shuffle."""
    from ..ops.conv import TRANSPOSE_BAKE_MAX

    return w.shape[1] <= 4 and w.size <= TRANSPOSE_BAKE_MAX


def _pixel_shuffle_conv(c, v, w: np.ndarray, bias: np.ndarray | None):
    """``ConvTranspose`` whose kernel equals its stride (no padding, dilation, output padding
    or groups: each output pixel gets exactly one tap) and a known ``[C, O, KH, KW]`` filter
    that the tiled kernel would not bake (:func:`_baked_transpose`), as a 1x1 ``conv2d`` to ``KH * KW * O``
    channels in (kh, kw, o) order, then a pixel shuffle (reshape, transpose, reshape) of its
    output: the same products and sums, on the tiled matrix kernel (PP-OCR det's 24 -> 24
    upsampling layer: 4.7 ms in place of 21 ms on Mesa 25 lavapipe). A unary activation of
    the result runs before the shuffle (:func:`_act`), in the conv's epilogue."""
    C, O, KH, KW = w.shape
    N, _, H, W = c.shape(v)
    dt = v.data_type
    w2 = np.ascontiguousarray(np.transpose(w, (2, 3, 1, 0)).reshape(KH * KW * O, C, 1, 1))
    b2 = None if bias is None else c.operand(np.tile(bias.reshape(-1), KH * KW), dt)
    y = c.call("conv2d", v, c.operand(w2, dt), bias=b2)

    def shuffle(y):
        y = c.call("reshape", y, [N, KH, KW, O, H, W])
        y = c.call("transpose", y, permutation=[0, 3, 4, 1, 5, 2])
        return c.call("reshape", y, [N, O, H * KH, W * KW])

    out = shuffle(y)
    c.shuffled[id(out)] = (y, shuffle, out)
    return out


def _pool(c, n, x, method):
    v = c.operand(x[0])
    r = _rank(c, v) - 2
    if r not in (1, 2):
        raise Unsupported(f"{n.op} with {r} spatial dimensions (WebNN pools 2-D)")
    kernel = [int(k) for k in n.attr("kernel_shape")]
    strides = [int(s) for s in (n.attr("strides") or [1] * r)]
    dil = [int(d) for d in (n.attr("dilations") or [1] * r)]
    in_sizes = list(c.shape(v)[2:])
    begin, end = _spatial_pads(n, in_sizes, kernel, strides, dil)
    one_d = r == 1
    if one_d:
        v = _to_2d(c, v)
    ceil = bool(n.attr("ceil_mode", 0))
    if method == "average_pool2d" and int(n.attr("count_include_pad", 0)) and any(begin + end):
        if ceil:
            raise Unsupported("AveragePool with count_include_pad=1, ceil_mode=1 and padding")
        zeros = [0, 0]
        v = c.call("pad", v, zeros + _ext(begin, one_d, 0), zeros + _ext(end, one_d, 0))
        begin, end = [0] * r, [0] * r
    if ceil:
        # ONNX drops a last window that would start in the end padding; then the floor size
        for size, k, st, d, b0, e0 in zip(in_sizes, kernel, strides, dil, begin, end):
            span = size + b0 + e0 - ((k - 1) * d + 1)
            out_ceil, out_floor = -(-span // st) + 1, span // st + 1
            if out_ceil != out_floor and (out_ceil - 1) * st >= size + b0:
                ceil = False
            elif out_ceil != out_floor and not ceil:
                raise Unsupported(f"{n.op} with ceil_mode where one axis rounds up and another down")
    out = c.call(method, v, window_dimensions=_ext(kernel, one_d, 1), padding=_pads4(begin, end, one_d),
                 strides=_ext(strides, one_d, 1), dilations=_ext(dil, one_d, 1),
                 rounding_type="ceil" if ceil else "floor")
    return _from_2d(c, out) if one_d else out


@_h("AveragePool", to="average_pool2d (count_include_pad=1 through pad)")
def _avg_pool(c, n, x):
    return _pool(c, n, x, "average_pool2d")


@_h("MaxPool", to="max_pool2d (the Indices output is not supported)")
def _max_pool(c, n, x):
    if len(n.outputs) > 1 and n.outputs[1] and n.outputs[1] in c.used:
        raise Unsupported("MaxPool's Indices output")
    return _pool(c, n, x, "max_pool2d")


@_h("LpPool", to="l2_pool2d (p=2)")
def _lp_pool(c, n, x):
    if int(n.attr("p", 2)) != 2:
        raise Unsupported(f"LpPool with p={n.attr('p')} (WebNN has p=2)")
    return _pool(c, n, x, "l2_pool2d")


def _global_pool(method):
    def h(c, n, x):
        v = c.operand(x[0])
        if method == "l2_pool2d" and int(n.attr("p", 2)) != 2:
            raise Unsupported(f"GlobalLpPool with p={n.attr('p')} (WebNN has p=2)")
        s = c.shape(v)
        if len(s) == 4:
            return c.call(method, v)
        if len(s) < 3:
            raise Unsupported(f"{n.op} of rank {len(s)}")
        # 1 or >= 3 spatial dimensions: the same elements as one column [N, C, D*H*W, 1]
        out = c.call(method, c.call("reshape", v, [s[0], s[1], int(np.prod(s[2:])), 1]))
        return c.call("reshape", out, [s[0], s[1], *[1] * (len(s) - 2)])
    return h


#: What :func:`_global_pool` does with the spatial dimensions other than 2
_GLOBAL_RANKS = "over the whole plane (1-D, 3-D: over one column)"
_h("GlobalAveragePool", to=f"average_pool2d {_GLOBAL_RANKS}")(_global_pool("average_pool2d"))
_h("GlobalMaxPool", to=f"max_pool2d {_GLOBAL_RANKS}")(_global_pool("max_pool2d"))
_h("GlobalLpPool", to=f"l2_pool2d (p=2) {_GLOBAL_RANKS}")(_global_pool("l2_pool2d"))


# ---------------------------------------------------------------- normalization
@_h("BatchNormalization", to="batch_normalization (inference)")
def _batch_norm(c, n, x):
    if int(n.attr("training_mode", 0)) or (n.since < 9 and int(n.attr("spatial", 1)) != 1):
        raise Unsupported("BatchNormalization in training mode or with spatial=0")
    if any(o and o in c.used for o in n.outputs[1:]):
        raise Unsupported("BatchNormalization's running statistics outputs")
    v = c.operand(x[0])
    dt = v.data_type
    scale, bias, mean, var = (c.operand(t, dt) for t in x[1:5])
    return c.call("batch_normalization", v, mean, var, scale=scale, bias=bias, axis=1,
                  epsilon=float(n.attr("epsilon", 1e-5)))


@_h("InstanceNormalization", to="instance_normalization (nchw); rank 3 through an axis of size 1")
def _instance_norm(c, n, x):
    v = c.operand(x[0])
    dt = v.data_type
    r = _rank(c, v)
    if r == 3:
        v = _to_2d(c, v)
    elif r != 4:
        raise Unsupported(f"InstanceNormalization of rank {r}")
    out = c.call("instance_normalization", v, scale=c.operand(x[1], dt), bias=c.operand(x[2], dt),
                 epsilon=float(n.attr("epsilon", 1e-5)))
    return _from_2d(c, out) if r == 3 else out


def _norm_params(c, v, p, axes):
    if p is None:
        return None
    dt = v.data_type
    p = c.operand(p, dt)
    want = [c.shape(v)[a] for a in axes]
    if list(c.shape(p)) != want:
        if c.shape(p) and len(c.shape(p)) > len(want):
            raise Unsupported("LayerNormalization scale/bias of a higher rank than the normalized axes")
        p = c.call("expand", p, want) if c.shape(p) else c.call("expand", c.call("reshape", p, [1] * len(want)), want)
    return p


@_h("LayerNormalization", to="layer_normalization over the axes from axis on (Mean, InvStdDev: reduce_mean)")
def _layer_norm(c, n, x):
    v = c.operand(x[0])
    r = _rank(c, v)
    axis = int(n.attr("axis", -1)) % r
    axes = list(range(axis, r))
    scale = _norm_params(c, v, x[1], axes)
    bias = _norm_params(c, v, x[2] if len(x) > 2 else None, axes)
    eps = float(n.attr("epsilon", 1e-5))
    out = c.call("layer_normalization", v, scale=scale, bias=bias, axes=axes, epsilon=eps)
    if not any(o and o in c.used for o in n.outputs[1:]):
        return out
    mean = c.call("reduce_mean", v, axes=axes, keep_dimensions=True)
    d = c.call("sub", v, mean)
    var = c.call("reduce_mean", c.call("mul", d, d), axes=axes, keep_dimensions=True)
    inv = c.call("reciprocal", c.call("sqrt", c.call("add", var, c.scalar(eps, v.data_type))))
    return [out, mean, inv]


def _rms_norm(c, v, scale, axes, eps):
    dt = v.data_type
    ms = c.call("reduce_mean", c.call("mul", v, v), axes=axes, keep_dimensions=True)
    out = c.call("div", v, c.call("sqrt", c.call("add", ms, c.scalar(eps, dt))))
    return c.call("mul", out, c.operand(scale, dt)) if scale is not None else out


@_h("SimplifiedLayerNormalization", to="x / sqrt(mean(x^2) + eps) * scale (reduce_mean, div, sqrt, mul)")
def _simplified_ln(c, n, x):
    v = c.operand(x[0])
    r = _rank(c, v)
    axis = int(n.attr("axis", -1)) % r
    if any(o and o in c.used for o in n.outputs[1:]):
        raise Unsupported("SimplifiedLayerNormalization's InvStdDev output")
    return _rms_norm(c, v, x[1], list(range(axis, r)), float(n.attr("epsilon", 1e-5)))


_h("SimplifiedLayerNormalization", to="RMS normalization", domain=MS)(_simplified_ln)


def _skip_sum(c, n, x):
    v = c.operand(x[0])
    dt = v.data_type
    s = c.call("add", v, c.operand(x[1], dt))
    bias_index = 4 if n.op == "SkipLayerNormalization" else 3
    if len(x) > bias_index and x[bias_index] is not None:
        s = c.call("add", s, c.operand(x[bias_index], dt))
    for i in (1, 2):
        if len(n.outputs) > i and n.outputs[i] and n.outputs[i] in c.used:
            raise Unsupported(f"{n.op}'s mean / inv_std_var outputs")
    return s


@_h("SkipSimplifiedLayerNormalization", to="add + RMS normalization", domain=MS)
def _skip_simplified(c, n, x):
    s = _skip_sum(c, n, x)
    out = _rms_norm(c, s, x[2], [_rank(c, s) - 1], float(n.attr("epsilon", 1e-5)))
    return [out, None, None, s]


@_h("SkipLayerNormalization", to="add + layer_normalization", domain=MS)
def _skip_ln(c, n, x):
    s = _skip_sum(c, n, x)
    r = _rank(c, s)
    scale = _norm_params(c, s, x[2], [r - 1])
    bias = _norm_params(c, s, x[3] if len(x) > 3 else None, [r - 1])
    out = c.call("layer_normalization", s, scale=scale, bias=bias, axes=[r - 1], epsilon=float(n.attr("epsilon", 1e-12)))
    return [out, None, None, s]


@_h("LRN", to="x / (bias + alpha * mean of squares over size channels)^beta (pad + average_pool2d)")
def _lrn(c, n, x):
    v = c.operand(x[0])
    dt = v.data_type
    s = c.shape(v)
    if len(s) != 4:
        raise Unsupported(f"LRN of rank {len(s)}")
    size = int(n.attr("size"))
    alpha, beta, bias = float(n.attr("alpha", 1e-4)), float(n.attr("beta", 0.75)), float(n.attr("bias", 1.0))
    N, C, H, W = s
    sq = c.call("reshape", c.call("mul", v, v), [N, 1, C, H * W])
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    sq = c.call("pad", sq, [0, 0, lo, 0], [0, 0, hi, 0])
    mean = c.call("average_pool2d", sq, window_dimensions=[size, 1])
    mean = c.call("reshape", mean, [N, C, H, W])
    denom = c.call("pow", c.call("add", c.call("mul", mean, c.scalar(alpha, dt)), c.scalar(bias, dt)),
                   c.scalar(beta, dt))
    return c.call("div", v, denom)


# ---------------------------------------------------------------- linear algebra
@_h("Gemm", to="gemm")
def _gemm(c, n, x):
    a, b = _same_type(c, x[0], x[1])
    cc = c.operand(x[2], a.data_type) if len(x) > 2 and x[2] is not None else None
    return c.call("gemm", a, b, c=cc, alpha=float(n.attr("alpha", 1.0)), beta=float(n.attr("beta", 1.0)),
                  a_transpose=bool(n.attr("transA", 0)), b_transpose=bool(n.attr("transB", 0)))


@_h("MatMul", to="matmul (1-D operands through reshape); a one-hot encoding times a known matrix: gather; a "
              "second operand moved by reshapes and transposes (and scaled) that compose to one reshape and one "
              "transpose: those")
def _matmul(c, n, x):
    if n.inputs[0] in c.one_hot and c.is_known(x[1]):
        index, depth = c.one_hot[n.inputs[0]]
        w = np.asarray(x[1])
        out = _one_hot_matmul(c, index, depth, w)
        if out is not None:
            c.gathered[n.outputs[0]] = (index, depth, w)
            return out
    a, b = _same_type(c, x[0], _as_transposed_view(c, x[1]))
    return _matmul_nd(c, a, b)


def _gathered_plus(c, n, a, b):
    """``one_hot(index) @ w + bias`` for a known bias along the last axis: one gather of the
    rows of ``w + bias`` (exact: the same float additions; an index that encodes no row reads
    the bias alone), else None."""
    for name, k in ((n.inputs[0], b), (n.inputs[1], a)):
        if name in c.gathered and c.is_known(k):
            index, depth, w = c.gathered[name]
            kk = np.asarray(k)
            N = w.shape[1]
            if kk.dtype.kind != "f" or kk.size not in (1, N) or any(d != 1 for d in kk.shape[:-1]) or \
                    kk.ndim > len(c.shape(index)):
                return None
            bias = np.broadcast_to(kk.reshape(-1).astype(w.dtype), (N,))
            table = np.concatenate([w + bias, bias[None, :]]).astype(w.dtype)
            return _gather_rows(c, index, depth, table)
    return None


def _gather_rows(c, index, depth: int, table: np.ndarray):
    """Rows ``clamp(index, -1, depth)`` of ``table`` (``depth + 1`` rows: the last for the
    indices outside ``[0, depth)``), ``index`` without its last axis of size 1."""
    si = c.shape(index)
    idx = index if index.data_type in ("int32", "int64") else c.call("cast", index, "int32")
    idx = c.call("clamp", idx, min_value=-1, max_value=depth)
    idx = c.call("reshape", idx, list(si[:-1]))
    return c.call("gather", c.operand(table), idx, axis=0)


def _one_hot_matmul(c, index, depth: int, w: np.ndarray):
    """``one_hot(index, depth) @ w`` for a known ``[depth, N]`` matrix ``w``, as a gather of
    its rows: exact (each output element is one weight times 1, plus zeros) for finite
    weights. An index outside ``[0, depth)`` encodes no row, so it reads an appended row of
    zeros: ``clamp(index, -1, depth)`` picks it from either side. None where this does not
    apply (the caller does the matmul)."""
    if w.ndim != 2 or w.shape[0] != depth or w.dtype.kind != "f" or not np.isfinite(w).all():
        return None
    return _gather_rows(c, index, depth, np.concatenate([w, np.zeros((1, w.shape[1]), w.dtype)]))


def _matmul_nd(c, a, b):
    sa, sb = c.shape(a), c.shape(b)
    if len(sa) == 1:
        a = c.call("reshape", a, [1, sa[0]])
    if len(sb) == 1:
        b = c.call("reshape", b, [sb[0], 1])
    out = c.call("matmul", a, b)
    if len(sa) == 1 or len(sb) == 1:
        so = list(c.shape(out))
        if len(sb) == 1:
            so.pop(-1)
        if len(sa) == 1:
            so.pop(-1 if len(sb) == 1 else -2)
        out = c.call("reshape", out, so)
    return out


@_h("MatMulNBits", to="weights (2, 4 or 8 bits) dequantized at load time (exact), then matmul (+ bias)", domain=MS)
def _matmul_nbits(c, n, x):
    a = c.operand(x[0])
    bits, K, N, block = int(n.attr("bits", 4)), int(n.attr("K")), int(n.attr("N")), int(n.attr("block_size"))
    if bits not in (2, 4, 8) or (len(x) > 4 and x[4] is not None):
        raise Unsupported(f"MatMulNBits with bits={bits} or g_idx")
    if int(n.attr("weight_prepacked", 0)):
        raise Unsupported("MatMulNBits with prepacked weights")
    per = 8 // bits  # values per byte, the lowest bits first
    mask = (1 << bits) - 1

    def unpack(p, count):
        p = np.asarray(p, np.uint8).reshape(N, -1)
        vals = np.stack([(p >> (bits * i)) & mask for i in range(per)], axis=-1).reshape(N, -1)
        return vals[:, :count].astype(np.float32)

    scales = c.known(x[2], "scales").astype(np.float32).reshape(N, -1)
    nblocks = scales.shape[1]
    q = unpack(c.known(x[1], "the quantized weight"), nblocks * block).reshape(N, nblocks, block)
    if len(x) > 3 and x[3] is not None:
        zp = c.known(x[3], "zero_points")
        z = unpack(zp, nblocks) if zp.dtype == np.uint8 else zp.astype(np.float32).reshape(N, nblocks)
    else:
        z = np.full((N, nblocks), 1 << (bits - 1), np.float32)
    w = ((q - z[:, :, None]) * scales[:, :, None]).reshape(N, -1)[:, :K]
    out = c.call("matmul", a, c.operand(np.ascontiguousarray(w.T), a.data_type))
    if len(x) > 5 and x[5] is not None:
        out = c.call("add", out, c.operand(x[5], a.data_type))
    return out


@_h("Einsum", to="transpose/reshape + matmul, or mul + reduce_sum, for one or two operands")
def _einsum(c, n, x):
    eq = n.attr("equation").replace(" ", "")
    if "..." in eq:
        raise Unsupported("Einsum with an ellipsis")
    lhs, _, rhs = eq.partition("->")
    terms = lhs.split(",")
    if not _:
        counts = {}
        for ch in lhs.replace(",", ""):
            counts[ch] = counts.get(ch, 0) + 1
        rhs = "".join(sorted(ch for ch, k in counts.items() if k == 1))
    ops = _same_type(c, *x)
    if any(len(set(t)) != len(t) for t in terms):
        raise Unsupported("Einsum with a repeated index in one operand (a diagonal)")
    letters = []
    for t in terms:
        for ch in t:
            if ch not in letters:
                letters.append(ch)
    sizes = {}
    for t, v in zip(terms, ops):
        for ch, d in zip(t, c.shape(v)):
            sizes[ch] = max(sizes.get(ch, 1), d)
    # broadcast every operand to all letters (in `letters` order), multiply, reduce the others
    full = []
    for t, v in zip(terms, ops):
        perm = sorted(range(len(t)), key=lambda i: letters.index(t[i]))
        if perm != list(range(len(t))):
            v = c.call("transpose", v, permutation=perm)
        st = "".join(t[i] for i in perm)
        v = c.call("reshape", v, [sizes[ch] if ch in st else 1 for ch in letters]) if len(st) != len(letters) else v
        full.append(v)
    if len(full) == 2 and c.shape(full[0]) and _einsum_matmul_ok(terms, rhs):
        return _einsum_matmul(c, terms, rhs, ops, sizes)
    prod = full[0]
    for v in full[1:]:
        prod = c.call("mul", prod, v)
    red = [i for i, ch in enumerate(letters) if ch not in rhs]
    if red:
        prod = c.call("reduce_sum", prod, axes=red)
    kept = [ch for ch in letters if ch in rhs]
    perm = [kept.index(ch) for ch in rhs]
    if perm != list(range(len(perm))):
        prod = c.call("transpose", prod, permutation=perm)
    if not red and len(full) == 1:
        prod = c.call("identity", prod) if perm == list(range(len(perm))) else prod
    return prod


def _einsum_matmul_ok(terms, rhs) -> bool:
    a, b = terms
    contract = [ch for ch in a if ch in b and ch not in rhs]
    return len(contract) == 1 and all(ch in rhs or ch in contract for ch in a + b)


def _einsum_matmul(c, terms, rhs, ops, sizes):
    ta, tb = terms
    k = next(ch for ch in ta if ch in tb and ch not in rhs)
    batch = [ch for ch in rhs if ch in ta and ch in tb]
    m = [ch for ch in rhs if ch in ta and ch not in tb]
    nn = [ch for ch in rhs if ch in tb and ch not in ta]

    def arrange(v, t, order):
        perm = [t.index(ch) for ch in order]
        if perm != list(range(len(perm))):
            v = c.call("transpose", v, permutation=perm)
        return v

    a = arrange(ops[0], ta, batch + m + [k])
    b = arrange(ops[1], tb, batch + [k] + nn)
    B = [sizes[ch] for ch in batch]
    M = int(np.prod([sizes[ch] for ch in m])) if m else 1
    N = int(np.prod([sizes[ch] for ch in nn])) if nn else 1
    a = c.call("reshape", a, [*B, M, sizes[k]])
    b = c.call("reshape", b, [*B, sizes[k], N])
    out = c.call("matmul", a, b)
    out = c.call("reshape", out, [*B, *[sizes[ch] for ch in m], *[sizes[ch] for ch in nn]])
    order = batch + m + nn
    perm = [order.index(ch) for ch in rhs]
    if perm != list(range(len(perm))):
        out = c.call("transpose", out, permutation=perm)
    return out


# ---------------------------------------------------------------- reductions
def reduce_axes(n, x, rank):
    """The axes of a Reduce* node (attribute or input, per its version); None for all, [] for none."""
    if len(x) > 1 and x[1] is not None:
        axes = [int(a) % max(rank, 1) for a in np.asarray(x[1]).reshape(-1)]
    else:
        a = n.attrs.get("axes")
        axes = None if a is None else [int(v) % max(rank, 1) for v in a]
    if not axes:
        return [] if int(n.attrs.get("noop_with_empty_axes", 0)) else None
    return sorted(set(axes))


_REDUCE = {"ReduceL1": "reduce_l1", "ReduceL2": "reduce_l2", "ReduceLogSum": "reduce_log_sum",
           "ReduceLogSumExp": "reduce_log_sum_exp", "ReduceMax": "reduce_max", "ReduceMean": "reduce_mean",
           "ReduceMin": "reduce_min", "ReduceProd": "reduce_product", "ReduceSum": "reduce_sum",
           "ReduceSumSquare": "reduce_sum_square"}


def _reduce(method):
    def h(c, n, x):
        v = c.operand(x[0])
        if len(x) > 1 and x[1] is not None:
            c.known(x[1], "axes")
        axes = reduce_axes(n, x, _rank(c, v))
        keep = bool(n.attr("keepdims", 1))
        if axes == []:
            return c.call("identity", v)
        shape = c.shape(v)
        red = range(len(shape)) if axes is None else axes
        if method in _REDUCE_ONE and all(shape[a] == 1 for a in red):  # each output is its one value
            return c.call("reshape", v, [d for i, d in enumerate(shape) if keep or i not in red])
        return c.call(method, v, axes=axes, keep_dimensions=keep)
    return h


#: reductions whose value over a single element is that element (no kernel: a reshape)
_REDUCE_ONE = ("reduce_max", "reduce_mean", "reduce_min", "reduce_product", "reduce_sum")


for _k, _m in _REDUCE.items():
    _h(_k, to=f"{_m} (axes as attribute or input, per opset)")(_reduce(_m))


def _arg(method):
    def h(c, n, x):
        v = c.operand(x[0])
        r = _rank(c, v)
        axis = int(n.attr("axis", 0)) % r
        keep = bool(n.attr("keepdims", 1))
        if int(n.attr("select_last_index", 0)):
            rev = c.call("reverse", v, axes=[axis])
            idx = c.call(method, rev, axis, keep_dimensions=keep, output_data_type="int64")
            return c.call("sub", c.scalar(c.shape(v)[axis] - 1, "int64"), idx)
        return c.call(method, v, axis, keep_dimensions=keep, output_data_type="int64")
    return h


_h("ArgMax", to="arg_max (int64); select_last_index through reverse")(_arg("arg_max"))
_h("ArgMin", to="arg_min (int64); select_last_index through reverse")(_arg("arg_min"))


#: the largest K a TopK of 64-bit or 8-bit integers is written out for as selection rounds
#: (each further element costs about 8 element-wise and reduction kernels); the other data
#: types take any K on one kernel (:mod:`webnn_gpu._topk`)
TOPK_MAX_K = 64


@_h("TopK", to="float32, float16, int32, uint32: one custom WGSL operator (webnn_gpu._topk: per row, K rounds "
                "each taking the best value after the previous one's); other integers: K rounds of "
                "reduce_max/min and arg_max over the values not yet taken (K at most TOPK_MAX_K = 64); "
                "K known; ties: the lower index first")
def _topk(c, n, x):
    """ONNX TopK (WebNN has no sort): the K largest (or smallest) values along ``axis`` and
    their int64 indices, best first, ties in index order (as ONNX asks), each position taken
    once (a row of infinities gives each index once). Values come out sorted, which
    ``sorted=0`` (any order) also allows. On the kernel's data types, one launch
    (:func:`webnn_gpu._topk.top_k` along the last axis, the axis moved there and back by
    transposes); on the others, K selection rounds: round ``r`` takes the best value among
    those not taken, ``m = reduce_max(where(taken, -inf, v))``, and its index, the first
    position holding ``m`` that is not taken."""
    from .. import _topk

    v = c.operand(x[0])
    shape = list(c.shape(v))
    if not shape:
        raise Unsupported("TopK of a scalar (rank >= 1 expected)")
    axis = int(n.attr("axis", -1)) % len(shape)
    k = int(n.attr("k")) if n.since < 10 else ints(c, x[1], "TopK's K")[0]
    largest = bool(n.attr("largest", 1))
    if not 1 <= k <= shape[axis]:
        raise Unsupported(f"TopK's K = {k} on an axis of size {shape[axis]} (1 to {shape[axis]} expected)")
    dt = v.data_type
    if dt in _topk.DATA_TYPES:
        reason = _topk.too_long(shape[axis])
        if reason is not None:
            raise Unsupported(f"TopK over {reason}")
        last = axis == len(shape) - 1
        perm = [i for i in range(len(shape)) if i != axis] + [axis]
        back = [perm.index(i) for i in range(len(shape))]
        src = v if last else c.call("transpose", v, permutation=perm)
        val, ind = _topk.top_k(c.b, src, [k], largest=largest, label=n.name or n.op)
        if not last:
            val, ind = c.call("transpose", val, permutation=back), c.call("transpose", ind, permutation=back)
        return [val, c.call("cast", ind, "int64")]
    if k > TOPK_MAX_K:
        raise Unsupported(f"TopK's K = {k} is above {TOPK_MAX_K} for {dt} (each of the K selection rounds costs "
                          f"kernels)")
    if dt in ("int64", "uint64", "uint8", "int8"):
        info = np.iinfo(_np_of(dt))
        far = info.min if largest else info.max
    else:
        raise Unsupported(f"TopK of {dt}")
    reduce, arg = ("reduce_max", "arg_max") if largest else ("reduce_min", "arg_min")
    iota = np.arange(shape[axis], dtype=np.int32).reshape([-1 if i == axis else 1 for i in range(len(shape))])
    values, indices, taken = [], [], None
    for r in range(k):
        key = v if taken is None else c.call("where", taken, c.scalar(far, dt), v)
        m = c.call(reduce, key, axes=[axis], keep_dimensions=True)
        if taken is None:  # the first round: the first index of the extreme
            idx = c.call(arg, v, axis, keep_dimensions=True, output_data_type="int32")
        else:
            free = c.call("logical_and", c.call("equal", key, m), c.call("logical_not", taken))
            idx = c.call("arg_max", c.call("cast", free, "int32"), axis, keep_dimensions=True,
                         output_data_type="int32")
        values.append(m)
        indices.append(idx)
        if r + 1 < k:
            hit = c.call("equal", c.operand(iota), idx)
            taken = hit if taken is None else c.call("logical_or", taken, hit)
    val = values[0] if k == 1 else c.call("concat", values, axis)
    ind = indices[0] if k == 1 else c.call("concat", indices, axis)
    return [val, c.call("cast", ind, "int64")]


@_h("GridSample", to="4-D, bilinear/linear or nearest, zeros, border or reflection padding: the sample "
                      "positions from the grid, gather_elements of the corners, weighted sum")
def _grid_sample(c, n, x):
    """ONNX GridSample on a 4-D ``X [N, C, H, W]`` and ``grid [N, Ho, Wo, 2]`` (x, y in [-1, 1]):
    each position unnormalized (``align_corners``: -1 and 1 are the corner pixels' centres, else
    their outer edges), then per output position the corner pixels (bilinear / linear: the four
    around it with their weights; nearest: the one at the position rounded half to even), read
    with ``gather_elements`` from ``X`` as ``[N, C, H * W]``; a corner outside the image reads 0
    (``padding_mode`` zeros), or the position is first clamped into the image (border) or
    reflected into it (reflection: about the corner pixels' centres with ``align_corners``,
    else about their outer edges; a triangle wave of period twice the image, as ONNX's
    reference folds it), its corners then read at the nearest pixel."""
    v, grid = c.operand(x[0]), c.operand(x[1])
    mode = n.attr("mode", "linear" if n.since >= 20 else "bilinear")
    pad = n.attr("padding_mode", "zeros")
    align = bool(n.attr("align_corners", 0))
    if len(c.shape(v)) != 4:
        raise Unsupported(f"GridSample of a {len(c.shape(v))}-D input (4-D only)")
    if mode not in ("bilinear", "linear", "nearest"):
        raise Unsupported(f"GridSample mode {mode!r} (bilinear/linear and nearest only)")
    if pad not in ("zeros", "border", "reflection"):
        raise Unsupported(f"GridSample padding_mode {pad!r}")
    N, C, H, W = c.shape(v)
    gs = list(c.shape(grid))
    if len(gs) != 4 or gs[0] != N or gs[3] != 2:  # a malformed model: ONNX Runtime refuses it too
        raise DataError(f"argument 'grid': expected the shape [N, H_out, W_out, 2] with N = {N} "
                        f"(X's batch, X of shape {[N, C, H, W]}), got {gs}")
    _, Ho, Wo, _ = gs
    dt = v.data_type
    # the positions, corners and weights in float32 in a float16 graph too: float16 positions
    # in an image of W pixels are W / 2048 pixels apart (round_even may pick a neighbour, a
    # bilinear weight is off by as much)
    pdt = "float32"
    grid = c.operand(grid, pdt)
    P = Ho * Wo
    gx, gy = (c.call("reshape", g, [N, 1, 1, P]) for g in c.call("split", grid, [1, 1], axis=3))

    def f(val):
        return c.scalar(val, pdt)

    def unnormalize(g, size):
        if align:  # (g + 1) / 2 * (size - 1)
            pos = c.call("mul", c.call("add", g, f(1)), f((size - 1) / 2))
        else:  # ((g + 1) * size - 1) / 2
            pos = c.call("sub", c.call("mul", c.call("add", g, f(1)), f(size / 2)), f(0.5))
        if pad == "border":
            return c.call("clamp", pos, min_value=0.0, max_value=float(size - 1))
        if pad == "reflection":
            lo, hi = (0.0, size - 1.0) if align else (-0.5, size - 0.5)
            if hi == lo:  # one pixel, its centre the whole range
                return c.call("mul", pos, f(0))
            period = 2 * (hi - lo)
            u = c.call("sub", pos, f(lo))
            t = c.call("sub", u, c.call("mul", c.call("floor", c.call("div", u, f(period))), f(period)))
            return c.call("add", c.call("sub", f(hi - lo), c.call("abs", c.call("sub", t, f(hi - lo)))), f(lo))
        return pos

    px, py = unnormalize(gx, W), unnormalize(gy, H)
    if mode == "nearest":
        cx, cy, w, k = c.call("round_even", px), c.call("round_even", py), None, 1
    else:  # the four corners along a new axis, [N, 1, 4, P]; a corner's weight is 1 - |p - corner|
        k = 4
        step = [1, 1, 4, 1]
        cx = c.call("add", c.call("floor", px), c.operand(np.array([0, 1, 0, 1], np.float32).reshape(step), pdt))
        cy = c.call("add", c.call("floor", py), c.operand(np.array([0, 0, 1, 1], np.float32).reshape(step), pdt))
        w = c.call("mul", c.call("sub", f(1), c.call("abs", c.call("sub", px, cx))),
                   c.call("sub", f(1), c.call("abs", c.call("sub", py, cy))))
    if pad == "zeros":
        inside = c.call("logical_and",
                        c.call("logical_and", c.call("greater_or_equal", cx, f(0)),
                               c.call("lesser_or_equal", cx, f(W - 1))),
                        c.call("logical_and", c.call("greater_or_equal", cy, f(0)),
                               c.call("lesser_or_equal", cy, f(H - 1))))
    else:  # the position is inside: a corner past the edge weighs 0 or reads the edge pixel
        inside = None
    # the pixel's row and column to int32 first, the flat index iy * W + ix in int32 (float16
    # holds whole numbers exactly only up to 2048: an image of 64 x 64 would read a neighbour)
    ix = c.call("cast", c.call("clamp", cx, min_value=0.0, max_value=float(W - 1)), "int32")
    iy = c.call("cast", c.call("clamp", cy, min_value=0.0, max_value=float(H - 1)), "int32")
    idx = c.call("reshape", c.call("add", c.call("mul", iy, c.scalar(W, "int32")), ix), [N, 1, k * P])
    flat = c.call("reshape", v, [N, C, H * W])
    got = c.call("gather_elements", flat, c.call("expand", idx, [N, C, k * P]), axis=2)
    if inside is not None:
        w = c.call("where", inside, f(1) if w is None else w, f(0))
    if w is not None and dt != pdt:
        w = c.call("cast", w, dt)
    out = got if w is None else c.call("mul", got, c.call("reshape", w, [N, 1, k * P]))
    if k > 1:
        out = c.call("reduce_sum", c.call("reshape", out, [N, C, k, P]), axes=[2], keep_dimensions=False)
    return c.call("reshape", out, [N, C, Ho, Wo])


def _coerced(c, n, v, fn):
    """Softmax-family before opset 13: the input as 2-D [prod(:axis), prod(axis:)]."""
    s = c.shape(v)
    r = len(s)
    if n.since >= 13:
        return fn(v, int(n.attr("axis", -1)) % r)
    axis = int(n.attr("axis", 1)) % max(r, 1)
    lead = int(np.prod(s[:axis])) if axis else 1
    flat = c.call("reshape", v, [lead, int(np.prod(s[axis:]))])
    return c.call("reshape", fn(flat, 1), list(s))


@_h("Softmax", to="softmax (before opset 13 on the 2-D coercion)")
def _softmax(c, n, x):
    return _coerced(c, n, c.operand(x[0]), lambda v, axis: c.call("softmax", v, axis))


@_h("LogSoftmax", to="x - reduce_max - reduce_log_sum_exp(x - reduce_max)")
def _log_softmax(c, n, x):
    def fn(v, axis):
        m = c.call("reduce_max", v, axes=[axis], keep_dimensions=True)
        d = c.call("sub", v, m)
        return c.call("sub", d, c.call("reduce_log_sum_exp", d, axes=[axis],
                                       keep_dimensions=True))
    return _coerced(c, n, c.operand(x[0]), fn)


@_h("Hardmax", to="equal(iota, arg_max) cast to the input type")
def _hardmax(c, n, x):
    def fn(v, axis):
        s = c.shape(v)
        idx = c.call("arg_max", v, axis, keep_dimensions=True, output_data_type="int32")
        shape = [1] * len(s)
        shape[axis] = s[axis]
        iota = c.operand(np.arange(s[axis], dtype=np.int32).reshape(shape))
        return c.call("cast", c.call("equal", iota, idx), v.data_type)
    return _coerced(c, n, c.operand(x[0]), fn)


@_h("STFT", to="real signal, known frame_step and window: conv2d with the windowed DFT bases (cos, -sin) as "
               "filters, strided by frame_step, then reshape and transpose to [batch, frames, bins, 2]")
def _stft(c, n, x):
    v = c.operand(x[0])
    s = c.shape(v)
    if len(s) == 3 and s[2] == 2:
        raise Unsupported("STFT of a complex signal (only real signals: [batch, length] or [batch, length, 1])")
    if not (len(s) == 2 or (len(s) == 3 and s[2] == 1)):
        raise Unsupported(f"STFT of a signal of shape {list(s)} (expected [batch, length] or [batch, length, 1])")
    batch, length = s[0], s[1]
    step = ints(c, x[1], "STFT's frame_step")[0]
    win = x[2] if len(x) > 2 else None
    win = None if win is None else np.asarray(c.known(win, "STFT's window"), np.float64).reshape(-1)
    size = ints(c, x[3], "STFT's frame_length")[0] if len(x) > 3 and x[3] is not None else (
        len(win) if win is not None else None)
    if size is None:
        raise Unsupported("STFT with neither a window nor a frame_length")
    if win is not None and len(win) != size:
        raise Unsupported(f"STFT window of {len(win)} samples with frame_length {size}")
    if step < 1 or size > length:
        raise Unsupported(f"STFT with frame_step {step} and frame_length {size} on a signal of {length} samples")
    bins = size // 2 + 1 if int(n.attr("onesided", 1)) else size
    t = np.arange(size)
    ang = 2 * np.pi * np.outer(np.arange(bins), t) / size
    w = win if win is not None else np.ones(size)
    basis = np.concatenate([np.cos(ang) * w, -np.sin(ang) * w])          # [2 bins, size], float64
    filt = c.operand(basis.reshape(2 * bins, 1, size, 1).astype(np.float32), v.data_type)
    y = c.call("conv2d", c.call("reshape", v, [batch, 1, length, 1]), filt, strides=[step, 1])
    frames = c.shape(y)[2]
    y = c.call("reshape", y, [batch, 2, bins, frames])
    return c.call("transpose", y, permutation=[0, 3, 2, 1])


@_h("CumSum", to="cumulative_sum (axis known)")
def _cumsum(c, n, x):
    v = c.operand(x[0])
    axis = ints(c, x[1], "CumSum axis")[0] % _rank(c, v)
    return c.call("cumulative_sum", v, axis, exclusive=bool(n.attr("exclusive", 0)),
                  reversed=bool(n.attr("reverse", 0)))


# ---------------------------------------------------------------- shapes and data movement
def reshape_target(shape, target, allowzero=0) -> list[int]:
    """ONNX Reshape's output shape: 0 copies the input's dimension (unless allowzero), -1 is inferred."""
    t = [int(d) for d in np.asarray(target).reshape(-1)]
    out = [shape[i] if (d == 0 and not allowzero) else d for i, d in enumerate(t)]
    if -1 in out:
        known = int(np.prod([d for d in out if d != -1]))
        total = int(np.prod(shape))
        out[out.index(-1)] = total // known if known else 0
    return out


@_h("Shape", to="folded: the static shape")
def _shape(c, n, x):
    from .fold import FOLDERS

    return FOLDERS["Shape"](n, [np.empty(c.shape(x[0]), np.uint8)])


@_h("Size", to="folded: the element count")
def _size(c, n, x):
    return np.array(int(np.prod(c.shape(x[0]))), np.int64)


@_h("Constant", to="folded: a NumPy value")
def _constant(c, n, x):
    for key in ("value", "value_float", "value_floats", "value_int", "value_ints"):
        if key in n.attrs:
            v = n.attrs[key]
            if key.startswith("value_float"):
                return np.array(v, np.float32)
            if key.startswith("value_int"):
                return np.array(v, np.int64)
            return np.asarray(v)
    raise Unsupported(f"Constant with attribute {list(n.attrs)}")


@_h("ConstantOfShape", to="folded (shape known)")
def _constant_of_shape(c, n, x):
    c.known(x[0], "ConstantOfShape's shape")
    raise Unsupported("ConstantOfShape")


@_h("Range", to="folded (start, limit, delta known)")
def _range(c, n, x):
    for v, what in zip(x, ("start", "limit", "delta")):
        c.known(v, f"Range's {what}")
    raise Unsupported("Range")


@_h("Reshape", to="reshape (shape known; 0 and -1 per ONNX)")
def _reshape(c, n, x):
    v = x[0]
    target = reshape_target(c.shape(v), c.known(x[1], "Reshape's shape"), int(n.attr("allowzero", 0)))
    return c.call("reshape", c.operand(v), target)


@_h("Flatten", to="reshape to 2-D")
def _flatten(c, n, x):
    s = c.shape(x[0])
    axis = int(n.attr("axis", 1))
    axis = axis + len(s) if axis < 0 else axis
    return c.call("reshape", c.operand(x[0]), [int(np.prod(s[:axis])), int(np.prod(s[axis:]))])


@_h("Squeeze", to="reshape (axes as attribute or input, per opset)")
def _squeeze(c, n, x):
    s = c.shape(x[0])
    if len(x) > 1 and x[1] is not None:
        axes = [a % len(s) for a in ints(c, x[1], "Squeeze's axes")]
    elif n.attr("axes") is not None:
        axes = [int(a) % len(s) for a in n.attr("axes")]
    else:
        axes = [i for i, d in enumerate(s) if d == 1]
    return c.call("reshape", c.operand(x[0]), [d for i, d in enumerate(s) if i not in axes])


@_h("Unsqueeze", to="reshape (axes as attribute or input, per opset)")
def _unsqueeze(c, n, x):
    s = list(c.shape(x[0]))
    axes = ints(c, x[1], "Unsqueeze's axes") if len(x) > 1 and x[1] is not None else [int(a) for a in n.attr("axes")]
    rank = len(s) + len(axes)
    for a in sorted(a % rank for a in axes):
        s.insert(a, 1)
    return c.call("reshape", c.operand(x[0]), s)


@_h("Transpose", to="transpose")
def _transpose(c, n, x):
    perm = n.attr("perm")
    v = c.operand(x[0])
    return c.call("transpose", v, permutation=None if perm is None else [int(p) for p in perm])


@_h("Expand", to="expand to the broadcast of the input's shape and the given one (to its own shape: the value itself)")
def _expand(c, n, x):
    v = c.operand(x[0])
    target = ints(c, x[1], "Expand's shape")
    out = list(np.broadcast_shapes(c.shape(v), tuple(target)))
    if out == list(c.shape(v)):  # to its own shape: the value itself (a kernel's epilogue may follow)
        return v
    if len(out) > _rank(c, v):
        v = c.call("reshape", v, [1] * (len(out) - _rank(c, v)) + list(c.shape(v)))
    return c.call("expand", v, out)


@_h("Concat", to="concat")
def _concat(c, n, x):
    vals = [v for v in x if v is not None and int(np.prod(c.shape(v))) != 0 or False]
    vals = _same_type(c, *vals)
    axis = int(n.attr("axis")) % _rank(c, vals[0])
    if len(vals) == 1:
        return c.call("identity", vals[0])
    return c.call("concat", vals, axis)


@_h("Split", to="split (sizes as attribute, input or num_outputs, per opset)")
def _split(c, n, x):
    v = c.operand(x[0])
    axis = int(n.attr("axis", 0)) % _rank(c, v)
    sizes = split_sizes(n, ints(c, x[1], "Split's split") if len(x) > 1 and x[1] is not None else None,
                        c.shape(v)[axis])
    parts = [k for k in sizes if k]
    outs = c.call("split", v, parts, axis=axis) if len(parts) > 1 else [c.call("identity", v)]
    # an empty part is a known empty array: Concat drops it; any other use is refused
    it = iter(outs)
    shape = list(c.shape(v))
    return [next(it) if k else np.zeros(shape[:axis] + [0] + shape[axis + 1:], _np_of(v.data_type))
            for k in sizes]


def split_sizes(n, given, dim: int) -> list[int]:
    """A Split node's part sizes along an axis of ``dim``: ``given`` (its sizes input, known),
    else its ``split`` attribute, else ``num_outputs`` (or its output count) parts of
    ``ceil(dim / parts)`` with the last one smaller."""
    if given is not None:
        return [int(v) for v in given]
    if n.attr("split") is not None:
        return [int(v) for v in n.attr("split")]
    k = int(n.attr("num_outputs", len(n.outputs)))
    each = -(-dim // k)
    return [each] * (k - 1) + [dim - each * (k - 1)]


def slice_params(n, x, rank):
    """(starts, ends, axes, steps) of a Slice node, per its version (attributes before 10)."""
    if n.since < 10:
        starts = [int(v) for v in n.attrs["starts"]]
        ends = [int(v) for v in n.attrs["ends"]]
        axes = [int(v) for v in n.attrs.get("axes", range(len(starts)))]
        steps = [1] * len(starts)
    else:
        starts = [int(v) for v in np.asarray(x[1]).reshape(-1)]
        ends = [int(v) for v in np.asarray(x[2]).reshape(-1)]
        axes = ([int(v) for v in np.asarray(x[3]).reshape(-1)] if len(x) > 3 and x[3] is not None
                else list(range(len(starts))))
        steps = ([int(v) for v in np.asarray(x[4]).reshape(-1)] if len(x) > 4 and x[4] is not None
                 else [1] * len(starts))
    return starts, ends, [a % rank for a in axes], steps


@_h("Slice", to="slice with strides (starts/ends/axes/steps known; negative steps through reverse)")
def _slice(c, n, x):
    v = c.operand(x[0])
    s = c.shape(v)
    if n.since >= 10:
        for i, what in ((1, "starts"), (2, "ends"), (3, "axes"), (4, "steps")):
            if len(x) > i and x[i] is not None:
                c.known(x[i], f"Slice's {what}")
    starts, ends, axes, steps = slice_params(n, x, len(s))
    st, sz, stp = [0] * len(s), list(s), [1] * len(s)
    rev = []
    for b, e, a, k in zip(starts, ends, axes, steps):
        idx = range(s[a])[slice(b, e, k)]
        if len(idx) == 0:
            raise Unsupported("Slice with an empty result")
        if k < 0:
            rev.append(a)
            # reversed axis: element j of the result is input[idx[j]] = rev[s-1-idx[j]]
            st[a], sz[a], stp[a] = s[a] - 1 - idx[0], (len(idx) - 1) * -k + 1, -k
        else:
            st[a], sz[a], stp[a] = idx[0], (len(idx) - 1) * k + 1, k
    if rev:
        v = c.call("reverse", v, axes=rev)
    if st == [0] * len(s) and sz == list(s) and stp == [1] * len(s):
        return v  # the whole tensor: the value itself, as Identity (a kernel's epilogue may follow)
    return c.call("slice", v, st, sz, strides=stp)


@_h("Tile", to="tile (repeats known)")
def _tile(c, n, x):
    return c.call("tile", c.operand(x[0]), ints(c, x[1], "Tile's repeats"))


@_h("Pad", to="pad (constant, edge, reflect; pads known)")
def _pad(c, n, x):
    v = c.operand(x[0])
    r = _rank(c, v)
    mode = n.attr("mode", "constant")
    if n.since < 11:
        pads = [int(p) for p in n.attr("pads", n.attr("paddings", []))]
        value = float(n.attr("value", 0.0))
        axes = list(range(r))
    else:
        pads = ints(c, x[1], "Pad's pads")
        value = 0
        if len(x) > 2 and x[2] is not None:
            cv = np.asarray(c.known(x[2], "Pad's constant_value")).reshape(-1)
            value = (int(cv[0]) if cv.dtype.kind in "iub" else float(cv[0])) if cv.size else 0
        axes = ([a % r for a in ints(c, x[3], "Pad's axes")] if len(x) > 3 and x[3] is not None
                else list(range(r)))
    k = len(axes)
    begin, end = [0] * r, [0] * r
    for i, a in enumerate(axes):
        begin[a], end[a] = pads[i], pads[k + i]
    if any(p < 0 for p in begin + end):
        raise Unsupported("Pad with negative pads")
    modes = {"constant": "constant", "edge": "edge", "reflect": "reflection"}
    if mode not in modes:
        raise Unsupported(f"Pad mode {mode!r}")
    if not any(begin + end):
        return c.call("identity", v)
    return c.call("pad", v, begin, end, mode=modes[mode], value=value)


@_h("Gather", to="gather; known indices 0, 1, ..., n - 1 of the whole axis, in order (any shape): reshape")
def _gather(c, n, x):
    """ONNX Gather; known indices that read the whole axis once in order (``arange(n)`` in any
    shape, negative ones counted from the end: the dynamo exporter's ``as_strided`` of a
    flattened tensor, an index into an axis of size 1) give the same elements in the same
    order: a reshape, no kernel."""
    v = c.operand(x[0])
    idx = x[1]
    if c.is_known(idx) and idx.dtype not in (np.int32, np.int64):
        idx = idx.astype(np.int64)
    axis = int(n.attr("axis", 0)) % _rank(c, v)
    s = c.shape(v)
    if c.is_known(idx) and np.size(idx) == s[axis] and np.all((-s[axis] <= idx) & (idx < s[axis])) \
            and np.array_equal(np.asarray(idx).reshape(-1) % s[axis], np.arange(s[axis])):
        return c.call("reshape", v, [*s[:axis], *np.shape(idx), *s[axis + 1:]])
    return c.call("gather", v, c.operand(idx), axis=axis)


@_h("GatherElements", to="gather_elements")
def _gather_elements(c, n, x):
    v = c.operand(x[0])
    return c.call("gather_elements", v, c.operand(x[1]), axis=int(n.attr("axis", 0)) % _rank(c, v))


@_h("GatherND", to="gather_nd (batch_dims=0)")
def _gather_nd(c, n, x):
    if int(n.attr("batch_dims", 0)):
        raise Unsupported("GatherND with batch_dims != 0")
    return c.call("gather_nd", c.operand(x[0]), c.operand(x[1]))


@_h("ScatterElements", "Scatter", to="scatter_elements (reduction='none')")
def _scatter_elements(c, n, x):
    if n.attr("reduction", "none") != "none":
        raise Unsupported(f"ScatterElements reduction {n.attr('reduction')!r}")
    v = c.operand(x[0])
    return c.call("scatter_elements", v, c.operand(x[1]), c.operand(x[2], v.data_type),
                  axis=int(n.attr("axis", 0)) % _rank(c, v))


@_h("ScatterND", to="scatter_nd (reduction='none')")
def _scatter_nd(c, n, x):
    if n.attr("reduction", "none") != "none":
        raise Unsupported(f"ScatterND reduction {n.attr('reduction')!r}")
    v = c.operand(x[0])
    return c.call("scatter_nd", v, c.operand(x[1]), c.operand(x[2], v.data_type))


@_h("Trilu", to="triangular (k known)")
def _trilu(c, n, x):
    k = ints(c, x[1], "Trilu's k")[0] if len(x) > 1 and x[1] is not None else 0
    return c.call("triangular", c.operand(x[0]), upper=bool(n.attr("upper", 1)), diagonal=k)


@_h("DepthToSpace", to="reshape + transpose + reshape (DCR and CRD)")
def _depth_to_space(c, n, x):
    v = c.operand(x[0])
    N, C, H, W = c.shape(v)
    b = int(n.attr("blocksize"))
    if n.attr("mode", "DCR") == "DCR":
        t = c.call("reshape", v, [N, b, b, C // (b * b), H, W])
        t = c.call("transpose", t, permutation=[0, 3, 4, 1, 5, 2])
    else:
        t = c.call("reshape", v, [N, C // (b * b), b, b, H, W])
        t = c.call("transpose", t, permutation=[0, 1, 4, 2, 5, 3])
    return c.call("reshape", t, [N, C // (b * b), H * b, W * b])


@_h("SpaceToDepth", to="reshape + transpose + reshape (DCR and CRD)")
def _space_to_depth(c, n, x):
    v = c.operand(x[0])
    N, C, H, W = c.shape(v)
    b = int(n.attr("blocksize"))
    t = c.call("reshape", v, [N, C, H // b, b, W // b, b])
    crd = n.attr("mode", "DCR") == "CRD"
    t = c.call("transpose", t, permutation=[0, 1, 3, 5, 2, 4] if crd else [0, 3, 5, 1, 2, 4])
    return c.call("reshape", t, [N, C * b * b, H // b, W // b])


@_h("EyeLike", to="folded: a constant")
def _eye_like(c, n, x):
    s = c.shape(x[0])
    dt = n.attr("dtype")
    from .reader import np_dtype_of

    npdt = np_dtype_of(int(dt)) if dt is not None else (x[0].dtype if c.is_known(x[0]) else
                                                         np.dtype(_np_of(c.wdtype(x[0]))))
    return np.eye(s[0], s[1], int(n.attr("k", 0)), dtype=npdt)


def _np_of(dt):
    from .._dtypes import info

    return info(dt).numpy


# ---------------------------------------------------------------- resampling
def _resize_common(c, n, v, scales, sizes, mode, coord, nearest_mode):
    """A Resize / Upsample: WebNN's ``resample2d`` where it computes the same (two adjacent
    axes; half-pixel nearest with round_prefer_floor or linear, integer-factor asymmetric
    nearest), else :func:`_resize_taps` (any axes; cubic, align_corners, asymmetric, ...)."""
    s = c.shape(v)
    r = len(s)
    if sizes is not None:
        out = [int(d) for d in sizes]
    else:
        out = [int(math.floor(d * float(k))) for d, k in zip(s, scales)]
    changed = [i for i in range(r) if out[i] != s[i] or (scales is not None and float(scales[i]) != 1.0)]
    if not changed:
        return c.call("identity", v)
    if mode not in ("nearest", "linear", "bilinear", "cubic"):
        raise Unsupported(f"{n.op} mode {mode!r}")
    if coord == "tf_crop_and_resize":
        raise Unsupported(f"{n.op} with coordinate_transformation_mode='tf_crop_and_resize' (a region of interest)")
    _refuse_fractional_width(n, s, out, scales, sizes, changed, coord)
    if _resample2d_fits(s, out, scales, sizes, changed, mode, coord, nearest_mode):
        axes = changed if len(changed) == 2 else [changed[0] - 1, changed[0]] if changed[0] > 0 else [0, 1]
        method = "nearest-neighbor" if mode == "nearest" else "linear"
        if r == 4:
            return c.call("resample2d", v, mode=method, sizes=[out[i] for i in axes], axes=axes)
        # other ranks (a 1-D signal [N, C, L], a volume): the axes before and after the pair as
        # one each, a 4-D resample2d of the pair, reshaped back
        a0, a1 = axes
        v4 = c.call("reshape", v, [int(np.prod(s[:a0])), s[a0], s[a1], int(np.prod(s[a1 + 1:]))])
        y = c.call("resample2d", v4, mode=method, sizes=[out[a0], out[a1]], axes=[1, 2])
        return c.call("reshape", y, [*s[:a0], out[a0], out[a1], *s[a1 + 1:]])
    return _resize_taps(c, n, v, s, out, scales, changed, mode, coord, nearest_mode)


def _refuse_fractional_width(n, s, out, scales, sizes, changed, coord) -> None:
    """Refuse ``align_corners`` and ``pytorch_half_pixel`` where a scale gives no whole size
    (``scale * n_in`` is not the output's length, nor is the scale float32's nearest value to
    ``n_out / n_in``) and the readings of such a scale disagree: ONNX Runtime and PyTorch map
    coordinates with the output's whole length, ONNX's reference (and its node test
    ``test_resize_downsample_scales_linear_align_corners``) with ``scale * n_in``.
    ``align_corners`` differs wherever the output has more than one element;
    ``pytorch_half_pixel`` only for an output of one element (one reading takes the formula,
    the other position 0); elsewhere both compute ``(x + 0.5) / scale - 0.5``."""
    if scales is None or sizes is not None or coord not in ("align_corners", "pytorch_half_pixel"):
        return
    for i in changed:
        width = s[i] * float(scales[i])
        if width == out[i] or np.float32(out[i] / s[i]) == np.float32(scales[i]):
            continue
        if (coord == "align_corners") == (out[i] > 1):
            raise Unsupported(
                f"{n.op} with coordinate_transformation_mode={coord!r} and scale {scales[i]:g} on axis {i} of "
                f"{s[i]}: {s[i]} x {scales[i]:g} = {width:g} is no whole size (ONNX Runtime and PyTorch map "
                f"coordinates with the output's length {out[i]}, ONNX's reference with {width:g}; give sizes)")


def _resample2d_fits(s, out, scales, sizes, changed, mode, coord, nearest_mode) -> bool:
    """Whether WebNN's resample2d computes this resize: at most two adjacent axes, a whole
    size from the scale, half-pixel nearest (round_prefer_floor) or linear, or asymmetric
    nearest (floor) by integer factors."""
    if len(changed) > 2 or len(s) < 2 or (len(changed) == 2 and changed[1] != changed[0] + 1):
        return False
    if mode == "cubic":
        return False
    if scales is not None and sizes is None:
        for i in changed:
            # a scale that is float32's nearest value to out / in (as exporters write a
            # resize to a size) maps coordinates as that ratio does, to float32's precision
            if s[i] * float(scales[i]) != out[i] and np.float32(out[i] / s[i]) != np.float32(scales[i]):
                return False
    if mode == "nearest":
        integer_up = all(out[i] % s[i] == 0 for i in changed)
        ok = (coord in ("half_pixel", "pytorch_half_pixel") and nearest_mode == "round_prefer_floor") or (
            coord == "asymmetric" and nearest_mode == "floor" and integer_up)
        return ok and not (coord == "pytorch_half_pixel" and any(out[i] == 1 for i in changed))
    return coord == "half_pixel" or (coord == "pytorch_half_pixel" and all(out[i] > 1 for i in changed))


def resize_taps(n_in: int, n_out: int, scale: float, mode: str, coord: str, nearest_mode: str = "round_prefer_floor",
                cubic_a: float = -0.75, exclude_outside: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """ONNX Resize along one axis as taps (its reference, ``onnx.reference``'s Resize, in
    float64): ``(index [T, n_out] int, weight [T, n_out] float64)`` with ``out[o] = sum_t
    weight[t, o] * in[index[t, o]]``; the source positions from ``coord`` and ``scale`` (the
    given scale, or ``n_out / n_in`` for a size), the neighbours past an edge reading the edge
    (or, ``exclude_outside``, weighing 0 with the others renormalized). Taps that weigh 0 for
    every output are left out (nearest: one tap)."""
    width = scale * n_in
    x = np.arange(n_out, dtype=np.float64)
    if coord == "align_corners":
        ori = np.zeros_like(x) if width == 1 else x * (n_in - 1) / (width - 1)
    elif coord == "asymmetric":
        ori = x / scale
    elif coord == "pytorch_half_pixel":
        ori = np.full_like(x, -0.5) if width == 1 else (x + 0.5) / scale - 0.5
    elif coord == "half_pixel":
        ori = (x + 0.5) / scale - 0.5
    elif coord == "half_pixel_symmetric":
        offset = n_in / 2 * (1 - n_out / width)
        ori = offset + (x + 0.5) / scale - 0.5
    else:
        raise Unsupported(f"Resize coordinate_transformation_mode {coord!r}")
    base = np.floor(ori)
    ratio = np.where(ori == base, 1.0, ori - base)  # in (0, 1]: the left neighbour preferred
    if mode == "nearest":
        if nearest_mode == "round_prefer_floor":
            right = ratio > 0.5
        elif nearest_mode == "round_prefer_ceil":
            right = ratio >= 0.5
        elif nearest_mode == "floor":
            right = np.zeros_like(ratio, bool)
        elif nearest_mode == "ceil":
            right = np.ones_like(ratio, bool)
        else:
            raise Unsupported(f"Resize nearest_mode {nearest_mode!r}")
        right = np.where(ori == base, True, right)  # a whole position reads itself
        coeffs = np.stack([~right, right]).astype(np.float64)
    elif mode in ("linear", "bilinear"):
        coeffs = np.stack([1 - ratio, ratio])
    else:
        a, t = cubic_a, ratio
        coeffs = np.stack([((a * (t + 1) - 5 * a) * (t + 1) + 8 * a) * (t + 1) - 4 * a,
                           ((a + 2) * t - (a + 3)) * t * t + 1,
                           ((a + 2) * (1 - t) - (a + 3)) * (1 - t) * (1 - t) + 1,
                           ((a * (2 - t) - 5 * a) * (2 - t) + 8 * a) * (2 - t) - 4 * a])
    taps = coeffs.shape[0]
    # the taps nearest the position, the left ones preferred: ceil(ori) - taps / 2 + k
    pos = np.ceil(ori).astype(np.int64)[None, :] - taps // 2 + np.arange(taps)[:, None]
    if exclude_outside:
        coeffs = np.where((pos < 0) | (pos >= n_in), 0.0, coeffs)
        coeffs = coeffs / coeffs.sum(axis=0, keepdims=True)
    index = np.clip(pos, 0, n_in - 1)
    keep = np.any(coeffs != 0, axis=1)
    if mode == "nearest":  # one tap: the one that weighs 1
        return np.where(coeffs[1] != 0, index[1], index[0])[None, :], np.ones((1, n_out))
    return index[keep], coeffs[keep]


def _resize_taps(c, n, v, s, out, scales, changed, mode, coord, nearest_mode):
    """A Resize written per axis as a gather of each output's source positions (known at load
    time, :func:`resize_taps`) weighted and summed: ``gather`` with ``[T, n_out]`` indices,
    ``mul`` by the known weights, ``reduce_sum`` over the T taps (nearest: the gather alone)."""
    dt = v.data_type
    if mode != "nearest" and dt not in ("float32", "float16"):
        raise Unsupported(f"{n.op} {mode} of {dt}")
    cubic_a = float(n.attr("cubic_coeff_a", -0.75))
    exclude = bool(int(n.attr("exclude_outside", 0)))
    for a in changed:
        scale = float(scales[a]) if scales is not None else out[a] / s[a]
        index, weight = resize_taps(s[a], out[a], scale, mode, coord, nearest_mode, cubic_a, exclude)
        if index.shape[0] == 1:
            v = c.call("gather", v, c.operand(index[0].astype(np.int32)), axis=a)
            if not np.all(weight == 1):
                v = c.call("mul", v, c.operand(weight[0].astype(_np_of(dt)).reshape([-1] + [1] * (len(s) - a - 1))))
        else:
            g = c.call("gather", v, c.operand(index.astype(np.int32)), axis=a)
            w = weight.astype(_np_of(dt)).reshape(list(weight.shape) + [1] * (len(s) - a - 1))
            v = c.call("reduce_sum", c.call("mul", g, c.operand(w)), axes=[a], keep_dimensions=False)
    return v


@_h("Resize", to="resample2d (two adjacent axes, other ranks through a 4-D reshape; half-pixel nearest/linear, "
                  "integer-factor asymmetric nearest); other modes and axes: per axis a gather of the known source "
                  "positions, weighted and summed")
def _resize(c, n, x):
    v = c.operand(x[0])
    if n.since < 11:
        scales, sizes, coord = c.known(x[1], "Resize's scales"), None, "asymmetric"
        nearest = "floor"
    else:
        if int(n.attr("antialias", 0)) or n.attr("keep_aspect_ratio_policy", "stretch") != "stretch":
            raise Unsupported("Resize with antialias or keep_aspect_ratio_policy")
        scales = x[2] if len(x) > 2 and x[2] is not None and np.asarray(c.known(x[2], "scales")).size else None
        sizes = c.known(x[3], "Resize's sizes") if len(x) > 3 and x[3] is not None else None
        coord = n.attr("coordinate_transformation_mode", "half_pixel")
        nearest = n.attr("nearest_mode", "round_prefer_floor")
        axes = n.attr("axes")
        r = _rank(c, v)
        if axes is not None:
            full_s = [1.0] * r
            full_z = list(c.shape(v))
            for j, a in enumerate(int(a) % r for a in axes):
                if scales is not None:
                    full_s[a] = float(np.asarray(scales).reshape(-1)[j])
                if sizes is not None:
                    full_z[a] = int(np.asarray(sizes).reshape(-1)[j])
            scales = full_s if scales is not None else None
            sizes = full_z if sizes is not None else None
        if scales is not None:
            scales = [float(k) for k in np.asarray(scales).reshape(-1)]
        if sizes is not None:
            sizes = [int(k) for k in np.asarray(sizes).reshape(-1)]
            scales = None
    if scales is not None and not isinstance(scales, list):
        scales = [float(k) for k in np.asarray(scales).reshape(-1)]
    return _resize_common(c, n, v, scales, sizes, n.attr("mode", "nearest"), coord, nearest)


@_h("Upsample", to="resample2d (integer factors, nearest); else as Resize")
def _upsample(c, n, x):
    v = c.operand(x[0])
    if n.since < 9:
        scales = [float(k) for k in n.attr("scales")]
    else:
        scales = [float(k) for k in np.asarray(c.known(x[1], "Upsample's scales")).reshape(-1)]
    return _resize_common(c, n, v, scales, None, n.attr("mode", "nearest"), "asymmetric", "floor")


# ---------------------------------------------------------------- quantization
def _q_params(c, n, v, scale, zp, zp_default):
    r = _rank(c, v)
    s = c.shape(scale)
    axis = int(n.attr("axis", 1)) % max(r, 1)
    block = int(n.attr("block_size", 0))
    if zp is None:
        zp = np.zeros(s, zp_default)
    if len(s) == 0 or (len(s) == 1 and s[0] == 1 and r != 1):
        shape = [1] * r
    elif block:
        shape = list(s)
    else:
        shape = [1] * r
        shape[axis] = s[0]
    sc = c.call("reshape", c.operand(scale, v.data_type if c.wdtype(scale) != v.data_type else None), shape) \
        if not c.is_known(scale) else c.operand(np.asarray(scale, np.float32).reshape(shape), v.data_type
                                                if v.data_type in ("float32", "float16") else None)
    z = c.operand(np.asarray(zp).reshape(shape)) if c.is_known(zp) else c.call("reshape", c.operand(zp), shape)
    return sc, z


@_h("QuantizeLinear", to="quantize_linear (per tensor, per axis, blocked)")
def _quantize(c, n, x):
    v = c.operand(x[0])
    zp = x[2] if len(x) > 2 else None
    out_t = n.attr("output_dtype", 0)
    if zp is None and out_t not in (0, 2, 3):
        raise Unsupported(f"QuantizeLinear output type {out_t}")
    default = np.int8 if out_t == 3 else np.uint8
    if int(n.attr("saturate", 1)) == 0:
        raise Unsupported("QuantizeLinear saturate=0")
    sc, z = _q_params(c, n, v, x[1], zp, default)
    return c.call("quantize_linear", v, c.operand(sc, v.data_type), z)


@_h("DequantizeLinear", to="dequantize_linear (per tensor, per axis, blocked)")
def _dequantize(c, n, x):
    v = c.operand(x[0])
    zp = x[2] if len(x) > 2 else None
    ft = c.dtype
    sc, z = _q_params(c, n, v, x[1], zp, np.dtype(_np_of(v.data_type)))
    sc = c.operand(sc, ft) if not hasattr(sc, "data_type") or sc.data_type != ft else sc
    return c.call("dequantize_linear", v, sc, z)


# ---------------------------------------------------------------- recurrent
_ACT = {"Sigmoid": "sigmoid", "Tanh": "tanh", "Relu": "relu"}
_DIR = {"forward": "forward", "reverse": "backward", "bidirectional": "both"}


def _rnn_common(c, n, x, gates):
    v = c.operand(x[0])
    batchwise = bool(int(n.attr("layout", 0)))
    if batchwise:  # [batch, seq, input] -> [seq, batch, input]
        v = c.call("transpose", v, permutation=[1, 0, 2])
    if len(x) > 4 and x[4] is not None:
        lens = np.asarray(c.known(x[4], f"{n.op}'s sequence_lens")).reshape(-1)
        if not (lens == c.shape(v)[0]).all():
            raise Unsupported(f"{n.op} with sequence_lens shorter than the sequence")
    if n.attr("clip") is not None:
        raise Unsupported(f"{n.op} with clip")
    dt = v.data_type
    w, r = c.operand(x[1], dt), c.operand(x[2], dt)
    hidden = int(n.attr("hidden_size"))
    steps = c.shape(v)[0]
    bias = rbias = None
    if len(x) > 3 and x[3] is not None:
        b = x[3]
        if c.is_known(b):
            b = np.asarray(b)
            bias, rbias = c.operand(b[:, :gates * hidden], dt), c.operand(b[:, gates * hidden:], dt)
        else:
            bias, rbias = c.call("split", b, 2, axis=1)
    acts = n.attr("activations")
    direction = _DIR[n.attr("direction", "forward")]
    return v, w, r, hidden, steps, bias, rbias, acts, direction, dt


def _acts(acts, count):
    if acts is None:
        return None
    names = []
    for a in acts[:count]:
        if a not in _ACT:
            raise Unsupported(f"recurrent activation {a!r}")
        names.append(_ACT[a])
    return names


def _wants_sequence(c, n) -> bool:
    return len(n.outputs) > 0 and bool(n.outputs[0]) and n.outputs[0] in c.used


def _state_in(c, n, v, dt):
    """An initial state, [num_dir, batch, hidden] (or [batch, num_dir, hidden] with layout=1)."""
    if v is None:
        return None
    v = c.operand(v, dt)
    return c.call("transpose", v, permutation=[1, 0, 2]) if int(n.attr("layout", 0)) else v


def _rnn_out(c, n, seq, states):
    """ONNX's outputs from WebNN's: Y [seq, num_dir, batch, hidden] and the final states,
    transposed to [batch, seq, num_dir, hidden] / [batch, num_dir, hidden] with layout=1."""
    if not int(n.attr("layout", 0)):
        return [seq, *states]
    if seq is not None:
        seq = c.call("transpose", seq, permutation=[2, 0, 1, 3])
    return [seq, *(None if h is None else c.call("transpose", h, permutation=[1, 0, 2]) for h in states)]


def _lengths(c, n, x):
    """A GRU's or LSTM's ``sequence_lens`` as an int32 operand ``[batch]`` when given and not
    known to be the whole sequence for every batch entry (a packed sequence), else None."""
    if len(x) <= 4 or x[4] is None:
        return None
    steps = c.shape(x[0])[1 if int(n.attr("layout", 0)) else 0]
    if c.is_known(x[4]):
        lens = np.asarray(x[4]).reshape(-1)
        if (lens == steps).all():
            return None
        if (lens < 1).any() or (lens > steps).any():
            raise Unsupported(f"{n.op} sequence_lens {lens.tolist()} outside 1 to the sequence's {steps} steps")
    return c.operand(x[4], "int32")


def _rnn_by_lengths(c, n, x, lens):
    """A GRU or LSTM whose ``sequence_lens`` may be shorter than the sequence: each direction
    runs forward over the whole sequence (the reverse one over each entry's first ``len``
    steps reversed in place, a gather along time), its outputs at and after ``len`` are
    zeros and its final state is its output at step ``len - 1`` (gathered), as ONNX
    specifies (zeros for a run-time length of 0, as ONNX Runtime gives). The later steps never reach the earlier outputs, so those are exact. An LSTM's
    final cell state (``Y_c``) read by the model is refused: WebNN's lstm gives the one after
    the last step only."""
    gru = n.op == "GRU"
    if not gru and len(n.outputs) > 2 and n.outputs[2] and n.outputs[2] in c.used:
        raise Unsupported("LSTM's Y_c with sequence_lens shorter than the sequence (WebNN's lstm gives the "
                          "cell state after the last step only)")
    if not gru and (int(n.attr("input_forget", 0)) or (len(x) > 7 and x[7] is not None)):
        raise Unsupported("LSTM with peepholes or input_forget and sequence_lens shorter than the sequence")
    count = 2 if gru else 3
    v, w, r, hidden, steps, bias, rbias, acts, direction, dt = _rnn_common(c, n, [*x[:4], None, *x[5:]],
                                                                        3 if gru else 4)
    batch, size = c.shape(v)[1:]
    dirs = 2 if direction == "both" else 1
    t = c.operand(np.arange(steps, dtype=np.int32).reshape(steps, 1))
    row = c.call("reshape", lens, [1, batch])
    valid = c.call("lesser", t, row)                                                      # [T, B]
    rev = c.call("where", valid, c.call("sub", c.call("sub", row, c.scalar(1, "int32")), t), t)  # [T, B]
    # a run-time length of 0 gathers step 0 and its final state is zeros, as ONNX Runtime gives
    # (known zeros are refused by _lengths)
    last = c.call("expand", c.call("reshape", c.call("max", c.call("sub", row, c.scalar(1, "int32")),
                                                     c.scalar(0, "int32")), [1, 1, batch, 1]), [1, 1, batch, hidden])
    started = c.call("reshape", c.call("greater", row, c.scalar(0, "int32")), [1, batch, 1])
    rev4 = c.call("expand", c.call("reshape", rev, [steps, 1, batch, 1]), [steps, 1, batch, hidden])
    states = [_state_in(c, n, x[5] if len(x) > 5 else None, dt)] + (
        [] if gru else [_state_in(c, n, x[6] if len(x) > 6 else None, dt)])

    def part(val, d):  # direction d of a [num_dir, ...] operand
        if val is None or dirs == 1:
            return val
        shape = list(c.shape(val))
        return c.call("slice", val, [d] + [0] * (len(shape) - 1), [1] + shape[1:])

    seqs, finals = [], []
    for d in range(dirs):
        backward = direction == "backward" or d == 1
        xs = v if not backward else c.call("gather_elements", v, c.call(
            "expand", c.call("reshape", rev, [steps, batch, 1]), [steps, batch, size]), axis=0)
        names = _acts(None if acts is None else acts[d * count:(d + 1) * count], count)
        h0 = [part(sv, d) for sv in states]
        common = dict(bias=part(bias, d), recurrent_bias=part(rbias, d), return_sequence=True,
                      direction="forward", activations=names)
        if gru:
            outs = c.call("gru", xs, part(w, d), part(r, d), steps, hidden, initial_hidden_state=h0[0],
                          reset_after=bool(n.attr("linear_before_reset", 0)), layout="zrn", **common)
        else:
            outs = c.call("lstm", xs, part(w, d), part(r, d), steps, hidden, initial_hidden_state=h0[0],
                          initial_cell_state=h0[1], layout="iofg", **common)
        y = outs[-1]                                                                      # [T, 1, B, H]
        finals.append(c.call("where", started, c.call("reshape", c.call("gather_elements", y, last, axis=0),
                                                      [1, batch, hidden]), c.scalar(0, dt)))
        if backward:
            y = c.call("gather_elements", y, rev4, axis=0)
        seqs.append(c.call("where", c.call("reshape", valid, [steps, 1, batch, 1]), y, c.scalar(0, dt)))
    seq = c.call("concat", seqs, 1) if dirs > 1 else seqs[0]
    h = c.call("concat", finals, 0) if dirs > 1 else finals[0]
    return _rnn_out(c, n, seq if _wants_sequence(c, n) else None, [h] if gru else [h, None])


@_h("GRU", to="gru (gate layout zrn, linear_before_reset as reset_after; layout=1 through transposes; "
              "sequence_lens shorter than the sequence: outputs masked, final states gathered)")
def _gru(c, n, x):
    lens = _lengths(c, n, x)
    if lens is not None:
        return _rnn_by_lengths(c, n, x, lens)
    v, w, r, hidden, steps, bias, rbias, acts, direction, dt = _rnn_common(c, n, x, 3)
    init = _state_in(c, n, x[5] if len(x) > 5 else None, dt)
    seq = _wants_sequence(c, n)
    outs = c.call("gru", v, w, r, steps, hidden, bias=bias, recurrent_bias=rbias, initial_hidden_state=init,
                  reset_after=bool(n.attr("linear_before_reset", 0)), return_sequence=seq, direction=direction,
                  layout="zrn", activations=_acts(acts, 2))
    return _rnn_out(c, n, outs[1] if seq else None, [outs[0]])


@_h("LSTM", to="lstm (gate layout iofg; input/forget peepholes; layout=1 through transposes; sequence_lens "
               "shorter than the sequence: outputs masked, final hidden state gathered)")
def _lstm(c, n, x):
    lens = _lengths(c, n, x)
    if lens is not None:
        return _rnn_by_lengths(c, n, x, lens)
    if int(n.attr("input_forget", 0)):
        raise Unsupported("LSTM with input_forget=1")
    v, w, r, hidden, steps, bias, rbias, acts, direction, dt = _rnn_common(c, n, x, 4)
    init_h = _state_in(c, n, x[5] if len(x) > 5 else None, dt)
    init_c = _state_in(c, n, x[6] if len(x) > 6 else None, dt)
    peep = None
    if len(x) > 7 and x[7] is not None:
        p = np.asarray(c.known(x[7], "LSTM's peephole weights"))
        hidden_size = int(n.attr("hidden_size"))
        if np.any(p[:, hidden_size:2 * hidden_size]):
            # ONNX's output gate looks at the new cell state, WebNN's lstm at the previous one
            raise Unsupported("LSTM with output-gate peepholes (ONNX applies them to the new cell state, "
                              "WebNN's lstm to the previous one)")
        peep = c.operand(p, dt)
    seq = _wants_sequence(c, n)
    outs = c.call("lstm", v, w, r, steps, hidden, bias=bias, recurrent_bias=rbias, peephole_weight=peep,
                  initial_hidden_state=init_h, initial_cell_state=init_c, return_sequence=seq,
                  direction=direction, layout="iofg", activations=_acts(acts, 3))
    return _rnn_out(c, n, outs[2] if seq else None, [outs[0], outs[1]])


#: The most time steps an ONNX RNN is written out for (two kernels a step).
RNN_MAX_STEPS = 512


def _rnn_as_gru(c, n, x, v, hidden: int, steps: int, direction: str, dt: str, act: str):
    """An RNN with known weights and biases and one activation for every direction as WebNN's
    ``gru`` in plain-RNN form (as TFLite's SimpleRNN loads: ``tflite.loops.plain_rnn``): update
    and reset rows of zeros, a ``relu`` gate activation and gate biases 0 (update) and 1
    (reset), so that z = 0 and r = 1 exactly and ``h = act(x W' + Wb + Rb + h R')``, the
    biases summed in the weights' type as ONNX Runtime sums them; the engine runs its new gate
    alone (``ops.recurrent._plain_rnn``), all steps in one launch or one launch a step."""
    w, r = np.asarray(x[1]), np.asarray(x[2])
    nd, isz = w.shape[0], w.shape[2]
    b = np.asarray(x[3]) if len(x) > 3 and x[3] is not None else np.zeros((nd, 2 * hidden), w.dtype)
    gw = np.concatenate([np.zeros((nd, 2 * hidden, isz), w.dtype), w], axis=1)
    gr = np.concatenate([np.zeros((nd, 2 * hidden, hidden), r.dtype), r], axis=1)
    gb = np.concatenate([np.zeros((nd, hidden), b.dtype), np.ones((nd, hidden), b.dtype),
                         b[:, :hidden] + b[:, hidden:]], axis=1)
    init = _state_in(c, n, x[5] if len(x) > 5 else None, dt)
    seq = _wants_sequence(c, n)
    outs = c.call("gru", v, c.operand(gw, dt), c.operand(gr, dt), steps, hidden, bias=c.operand(gb, dt),
                  initial_hidden_state=init, reset_after=True, return_sequence=seq, direction=direction,
                  layout="zrn", activations=["relu", act])
    return _rnn_out(c, n, outs[1] if seq else None, [outs[0]])


@_h("RNN", to="gru in plain-RNN form (known weights, one activation for every direction, at most 147 units or a "
              "multiple of 4: where the engine runs its new gate alone); otherwise "
              "written out per time step: one gemm of all steps' inputs, then per step gemm(h, R) + "
              "that step's row and the activation (Tanh, Relu, Sigmoid); layout=1 through transposes")
def _rnn(c, n, x):
    v, w, r, hidden, steps, bias, rbias, acts, direction, dt = _rnn_common(c, n, x, 1)
    dirs = 2 if direction == "both" else 1
    names = list(acts) if acts is not None else ["Tanh"] * dirs
    if len(names) != dirs or any(a not in _ACT for a in names):
        raise Unsupported(f"RNN activations {names} (one of {sorted(_ACT)} per direction)")
    b_known = len(x) <= 3 or x[3] is None or c.is_known(x[3])
    # where the engine runs the new gate alone: the sequence kernel (3 H^2 multiply-adds a step
    # at most) or the per-step step4 kernel (hidden % 4 == 0); the scalar GRU step would run
    # all three gates
    from ..ops.recurrent import SEQUENCE_MAX_MACS

    alone = hidden % 4 == 0 or 3 * hidden * hidden <= SEQUENCE_MAX_MACS
    if c.is_known(x[1]) and c.is_known(x[2]) and b_known and len(set(names)) == 1 and alone:
        return _rnn_as_gru(c, n, x, v, hidden, steps, direction, dt, _ACT[names[0]])
    if steps > RNN_MAX_STEPS:
        raise Unsupported(f"RNN of {steps} time steps (written out per step: at most {RNN_MAX_STEPS})")
    _, batch, size = c.shape(v)
    init = _state_in(c, n, x[5] if len(x) > 5 else None, dt)
    flat = c.call("reshape", v, [steps * batch, size])
    b = x[3] if len(x) > 3 else None
    if b is not None:  # Wb + Rb (known: added in the weights' type, as ONNX Runtime adds them)
        b = (np.asarray(b)[:, :hidden] + np.asarray(b)[:, hidden:] if c.is_known(b)
             else c.call("add", bias, rbias))

    def per_dir(val, shape):  # the direction's part of a [num_dir, ...] value, reshaped
        if val is None:
            return [None] * dirs
        if c.is_known(val):
            return [c.operand(np.asarray(val)[d].reshape(shape), dt) for d in range(dirs)]
        parts = c.call("split", c.operand(val, dt), dirs, axis=0) if dirs > 1 else [c.operand(val, dt)]
        return [c.call("reshape", p, shape) for p in parts]

    ws, rs, bs = per_dir(x[1], [hidden, size]), per_dir(x[2], [hidden, hidden]), per_dir(b, [hidden])
    hs0 = per_dir(init, [batch, hidden])
    seqs, finals = [], []
    for d in range(dirs):
        rd = rs[d]
        xw = c.call("reshape", c.call("gemm", flat, ws[d], c=bs[d], b_transpose=True), [steps, batch, hidden])
        rows = c.call("split", xw, steps, axis=0) if steps > 1 else [xw]
        h = hs0[d]
        out = [None] * steps
        backward = direction == "backward" or d == 1
        for t in (range(steps - 1, -1, -1) if backward else range(steps)):
            row = c.call("reshape", rows[t], [batch, hidden])
            pre = row if h is None else c.call("gemm", h, rd, c=row, b_transpose=True)
            h = c.call(_ACT[names[d]], pre)
            out[t] = h
        finals.append(c.call("reshape", h, [1, batch, hidden]))
        if _wants_sequence(c, n):
            seqs.append(c.call("reshape", c.call("concat", out, 0) if steps > 1 else out[0],
                               [steps, 1, batch, hidden]))
    seq = (c.call("concat", seqs, 1) if dirs > 1 else seqs[0]) if seqs else None
    return _rnn_out(c, n, seq, [c.call("concat", finals, 0) if dirs > 1 else finals[0]])


# ---------------------------------------------------------------- control flow
@_h("If", to="the branch its known condition picks, inlined")
def _if(c, n, x):
    cond = bool(np.asarray(c.known(x[0], "If's condition")).reshape(-1)[0])
    g = n.attrs["then_branch" if cond else "else_branch"]
    from onnx import numpy_helper

    for t in g.initializer:
        c.env[t.name] = numpy_helper.to_array(t)
    saved = c.node
    c.walk(rewrite(g.node, c.env, [o.name for o in g.output]))
    c.node = saved
    return [c.env.get(o.name) for o in g.output]


@_h("ReverseSequence", to="gather along the time axis (one per distinct known sequence length) + concat")
def _reverse_sequence(c, n, x):
    v = c.operand(x[0])
    lens = ints(c, x[1], "ReverseSequence's sequence_lens")
    s = c.shape(v)
    b_axis, t_axis = int(n.attr("batch_axis", 1)), int(n.attr("time_axis", 0))
    steps = s[t_axis]
    if any(not 0 <= k <= steps for k in lens):
        raise Unsupported(f"ReverseSequence lengths {lens} outside [0, {steps}]")

    def reversed_first(v, k):
        idx = np.concatenate([np.arange(k - 1, -1, -1), np.arange(k, steps)]).astype(np.int32)
        return v if k <= 1 else c.call("gather", v, c.operand(idx), axis=t_axis)

    if len(set(lens)) == 1:
        return reversed_first(v, lens[0])
    parts = []
    for b, k in enumerate(lens):
        start = [0] * len(s)
        start[b_axis] = b
        size = list(s)
        size[b_axis] = 1
        parts.append(reversed_first(c.call("slice", v, start, size), k))
    return c.call("concat", parts, b_axis)


#: Order-preserving movements a recurrent step's output may pass through to a Loop's outputs
_STEP_MOVES = ("Reshape", "Squeeze", "Unsqueeze", "Identity", "Flatten")


def _sequence_loop(c, n, g, trips, cond, carried):
    """A ``Loop`` whose body (after the load-time rewrites) is one recurrent step, as one
    ``LSTM``/``GRU`` node over the whole sequence, or None where the body is anything else.

    The body must be: ``Gather(S, i)`` along axis 0 of a loop-invariant ``S`` (an outer value
    or a carried value passed through unchanged) with ``i`` a counter that takes the values
    ``k0, k0 + 1, ...`` over the iterations, reshaped to ``[1, batch, input]``; one forward
    ``LSTM``/``GRU`` node of that step with known weights whose initial states are reshapes
    of carried values and whose final states (reshaped) are those carried values' next ones;
    order-preserving movements (:data:`_STEP_MOVES`) of the new states to other outputs
    (carried ones that are only overwritten: their last step's value; scan outputs: every
    step's); and nodes that fold at load time (the counters and the condition). The trip
    count is found by running the folding part; the sequence is ``S[k0 : k0 + T]``. The
    same products and sums as the step written out per iteration, in one recurrent kernel."""
    from onnx import helper, numpy_helper

    from .fold import fold

    n_carried = len(carried)
    ins = [i.name for i in g.input]
    outs = [o.name for o in g.output]
    def passes_in(producer, k):
        """The Identity of ``producer`` (value -> node) that passes carried value ``k``
        through unchanged (or True), else None."""
        v = outs[1 + k]
        p = producer.get(v)
        return True if v == ins[2 + k] else p if p is not None and p.op_type == "Identity" \
            and p.domain in ("", "ai.onnx") and p.input[0] == ins[2 + k] else None

    # the values that hold in every iteration: the outer ones, the body's initializers and the
    # carried values passed through unchanged (the iteration number, the condition and every
    # other carried value change: they count only for folding the counters and the condition)
    env = dict(c.env)
    for t in g.initializer:
        env[t.name] = numpy_helper.to_array(t)
    body_producer = {o: p for p in g.node for o in p.output if o}
    env.update((ins[2 + k], v) for k, v in enumerate(carried) if passes_in(body_producer, k) is not None)
    nodes = rewrite(g.node, env, outs)
    env = _known_consts(nodes, env)  # and what folds from them (a reshape target's Concat)
    rec = [p for p in nodes if p.op_type in ("LSTM", "GRU") and p.domain in ("", "ai.onnx")]
    if len(rec) != 1:
        return None
    rn = rec[0]
    lstm = rn.op_type == "LSTM"
    attrs = {a.name: helper.get_attribute_value(a) for a in rn.attribute}
    if len(rn.output) < 2 + lstm or not all(rn.output[1:2 + lstm]):
        return None  # a final state not produced (its carried value could not be fed)
    if set(attrs) - {"hidden_size", "linear_before_reset"} or len(rn.input) < 6 or any(
            not isinstance(env.get(i), np.ndarray) for i in rn.input[1:4]) or (len(rn.input) > 4 and rn.input[4]) \
            or (lstm and (len(rn.input) != 7 or not rn.input[6])):
        return None
    producer = {o: p for p in nodes for o in p.output if o}
    readers: dict[str, list] = {}
    for p in nodes:
        for i in p.input:
            readers.setdefault(i, []).append(p)

    def made_by(name, op):
        p = producer.get(name)
        return p if p is not None and p.op_type == op and p.domain in ("", "ai.onnx") else None

    rxs, v = [], rn.input[0]  # the step's input through reshapes (each read only there)
    while (r := made_by(v, "Reshape")) is not None and len(readers.get(v, [])) == 1:
        rxs.append(r)
        v = r.input[0]
    gx = made_by(v, "Gather") if rxs and len(readers.get(v, [])) == 1 else None
    if gx is None or int(helper.get_attribute_value(gx.attribute[0]) if gx.attribute else 0) != 0:
        return None
    def passes(k):
        """The Identity that passes carried value ``k`` through unchanged (or True), else None."""
        return passes_in(producer, k)

    seq_name, idx_name = gx.input
    if seq_name in producer or idx_name not in ins[2:] or (seq_name in ins[2:] and passes(ins.index(seq_name) - 2)
                                                          is None):
        return None
    states = [(rn.input[5], rn.output[1])] + ([(rn.input[6], rn.output[2])] if lstm else [])
    slots = []  # (carried index, the reshape back to the carried shape)
    pattern = {id(p) for p in (gx, rn, *rxs)}
    for s_in, s_out in states:
        src, r_in = s_in, made_by(s_in, "Reshape")
        while r_in is not None:  # the carried value through reshapes (only read there)
            if len(readers.get(r_in.input[0], [])) != 1 and r_in.input[0] not in ins[2:]:
                return None
            pattern.add(id(r_in))
            src = r_in.input[0]
            r_in = made_by(src, "Reshape")
        back = [p for p in readers.get(s_out, []) if p.op_type == "Reshape"]
        if src == s_in or src not in ins[2:] or len(readers.get(s_out, [])) != 1 or len(back) != 1 \
                or len(readers.get(src, [])) != 1 or not all(isinstance(env.get(i), np.ndarray)
                                                              for i in back[0].input[1:] if i):
            return None
        slots.append((ins.index(src) - 2, back[0]))
        pattern.add(id(back[0]))
    # the run-time part: everything reached from S, the states and run-time carried values
    runtime = {seq_name, *(ins[2 + k] for k, _ in slots)} | {
        ins[2 + k] for k, v in enumerate(carried) if not c.is_known(v)}
    pattern |= {id(p) for k in range(n_carried) if not isinstance(p := passes(k), (bool, type(None)))}
    moves: list = []
    step_values = {b.output[0]: j for j, (_, b) in enumerate(slots)}  # value -> the state it moves (0: h, 1: c)
    for p in nodes:
        if not any(i in runtime for i in p.input if i):
            continue
        runtime.update(o for o in p.output if o)
        if id(p) in pattern:
            continue
        if p.op_type in _STEP_MOVES and p.input[0] in step_values and all(
                isinstance(env.get(i), np.ndarray) for i in p.input[1:] if i):
            moves.append(p)
            step_values[p.output[0]] = step_values[p.input[0]]
            continue
        return None
    # carried slots: a state's next value must be its own reshape (through Identity moves)
    for k, back in slots:
        v = outs[1 + k]
        while v != back.output[0] and (p := producer.get(v)) is not None and p.op_type == "Identity":
            v = p.input[0]
        if v != back.output[0]:
            return None
    others = [k for k in range(n_carried) if k not in {k for k, _ in slots} and outs[1 + k] in step_values]
    if any(readers.get(ins[2 + k]) for k in others):
        return None  # a carried value read by the body, not only overwritten
    if any(outs[1 + k] in runtime and k not in {k for k, _ in slots} and outs[1 + k] not in step_values
           and passes(k) is None for k in range(n_carried)):
        return None
    scans = outs[1 + n_carried:]
    if any(step_values.get(v) != 0 for v in scans):
        return None  # a scan output not made from h (Y has every step's h only)
    # the iterations: run the folding part until the condition fails
    known_nodes = [p for p in nodes if not any(o in runtime for o in p.output if o)]
    values = {k: v for k, v in env.items() if isinstance(v, np.ndarray)}
    values.update((ins[2 + k], v) for k, v in enumerate(carried) if c.is_known(v))
    cond_now, order, i = cond, [], 0
    while cond_now and (trips is None or i < trips):
        if i == LOOP_MAX_UNROLL:
            return None
        values[ins[0]], values[ins[1]] = np.array(i, np.int64), np.array(cond_now)
        order.append(int(np.asarray(values.get(idx_name)).reshape(-1)[0]) if idx_name in values else None)
        for p in known_nodes:
            node = c._node(p)
            if any(a and not isinstance(values.get(a), np.ndarray) for a in p.input):
                return None  # reads a run-time value of the outer graph: the per-step form
            folded = fold(node, [values[a] if a else None for a in p.input])
            if folded is None:
                return None
            values.update((o, np.asarray(v)) for o, v in zip(p.output, folded) if o and v is not None)
        nxt = values.get(outs[0])
        if not isinstance(nxt, np.ndarray):
            return None
        cond_now = bool(nxt.reshape(-1)[0])
        for k in range(n_carried):
            if outs[1 + k] in values and ins[2 + k] not in runtime:
                values[ins[2 + k]] = values[outs[1 + k]]
        i += 1
    steps = len(order)
    seq = env[seq_name]
    if steps == 0 or None in order or order != list(range(order[0], order[0] + steps)) or order[0] < 0 \
            or order[-1] >= c.shape(seq)[0]:
        return None
    # one recurrent node over S[k0 : k0 + T]; the body's constants (and the rewrites') for its moves
    for k, v in env.items():
        if isinstance(v, np.ndarray) and k not in c.env:
            c.env[k] = v
    base = f"{n.outputs[0] or n.name}::sequence"
    sv = c.operand(seq)
    s = c.shape(sv)
    part = sv if steps == s[0] else c.call("slice", sv, [order[0]] + [0] * (len(s) - 1), [steps, *s[1:]])
    width = c.shape(env[rn.input[1]])[-1]
    if int(np.prod(s[1:])) % width:
        return None
    c.env[f"{base}/X"] = c.call("reshape", part, [steps, int(np.prod(s[1:])) // width, width])
    for t in ("W", "R", "B"):
        c.env[f"{base}/{t}"] = env[rn.input[("W", "R", "B").index(t) + 1]]
    for j, (k, _) in enumerate(slots):
        state = c.operand(carried[k])
        c.env[f"{base}/s{j}"] = c.call("reshape", state, [1, int(np.prod(c.shape(state))) // int(attrs["hidden_size"]),
                                                          int(attrs["hidden_size"])])
    want_seq = bool(scans)
    names = [f"{base}/Y" if want_seq else "", f"{base}/Y_h"] + ([f"{base}/Y_c"] if lstm else [])
    if want_seq:
        c.used.add(names[0])
    node = helper.make_node(rn.op_type, [f"{base}/X", f"{base}/W", f"{base}/R", f"{base}/B", "",
                                         *(f"{base}/s{j}" for j in range(len(slots)))], names,
                            name=n.name, **attrs)
    saved = c.node
    c.walk([node])
    c.node = saved
    # the final states through their reshapes and moves, and every step's for the scans
    for j, (k, back) in enumerate(slots):
        c.env[rn.output[1 + j]] = c.env[names[1 + j]]
    c.walk([b for _, b in slots] + moves)
    c.node = saved
    result = []
    for k in range(n_carried):
        v = outs[1 + k]
        result.append(c.env[v] if v in step_values or any(v == b.output[0] for _, b in slots) else
                      carried[k] if passes(k) is not None else values[v])
    for v in scans:
        result.append(c.call("reshape", c.env[names[0]], [steps, *c.shape(c.env[v])]))
    return result


#: The most iterations a Loop is written out for (each one is its body's operators again).
LOOP_MAX_UNROLL = 512


@_h("Loop", to="its body written out once per iteration (trip count and condition known at load time); "
               "a recurrent step's loop: one lstm / gru over the sequence")
def _loop(c, n, x):
    """Unrolls ``Loop``: the body is converted once per iteration, its loop-carried values fed
    to the next; the trip count ``M`` (or its absence) and the condition of every iteration
    must fold at load time (a counter compared with a constant, as tf2onnx writes TensorFlow's
    while loops). Scan outputs are the iterations' values stacked along a new first axis. A
    loop of one recurrent step is one recurrent node over the sequence (:func:`_sequence_loop`)."""
    from onnx import numpy_helper

    g = n.attrs["body"]
    trips = None if x[0] is None else int(np.asarray(c.known(x[0], "Loop's trip count")).reshape(-1)[0])
    cond = True if len(x) < 2 or x[1] is None else bool(
        np.asarray(c.known(x[1], "Loop's initial condition")).reshape(-1)[0])
    carried = list(x[2:])
    n_carried = len(carried)
    if len(g.input) != 2 + n_carried or len(g.output) < 1 + n_carried:
        raise Unsupported("Loop whose body does not take (iteration, condition, carried values)")
    if _env.force_choice("sequence_loop", ("off",)) != "off":
        whole = _sequence_loop(c, n, g, trips, cond, carried)
        if whole is not None:
            return whole
    scans: list[list] = [[] for _ in g.output[1 + n_carried:]]
    saved = c.node
    i = 0
    while cond and (trips is None or i < trips):
        if i == LOOP_MAX_UNROLL:
            raise Unsupported(f"Loop of more than {LOOP_MAX_UNROLL} iterations")
        for t in g.initializer:
            c.env[t.name] = numpy_helper.to_array(t)
        c.env[g.input[0].name] = np.array(i, np.int64)
        c.env[g.input[1].name] = np.array(cond)
        for vi, v in zip(g.input[2:], carried):
            c.env[vi.name] = v
        c.walk(rewrite(g.node, c.env, [o.name for o in g.output]))
        c.node = saved
        outs = [c.env.get(o.name) for o in g.output]
        if any(v is None or v is FAILED for v in outs):
            raise Unsupported("Loop whose body could not be converted (see the other messages)")
        cond = bool(np.asarray(c.known(outs[0], "Loop's condition")).reshape(-1)[0])
        carried = outs[1:1 + n_carried]
        for acc, v in zip(scans, outs[1 + n_carried:]):
            acc.append(v)
        i += 1
    stacked = []
    for acc in scans:
        if not acc:
            raise Unsupported("Loop of no iterations with scan outputs (WebNN has no empty tensors)")
        if all(c.is_known(v) for v in acc):
            stacked.append(np.stack(acc))
        else:
            parts = [c.call("reshape", c.operand(v), [1, *c.shape(v)]) for v in acc]
            stacked.append(parts[0] if len(parts) == 1 else c.call("concat", parts, 0))
    return carried + stacked


# ---------------------------------------------------------------- attention helpers
def _rotary(c, n, v, cos_cache, sin_cache, pos, interleaved: bool, num_heads: int, rotary_dim: int):
    s = c.shape(v)
    dt = v.data_type
    if len(s) == 4:  # [B, H, S, D] -> [B, S, H, D]
        x = c.call("transpose", v, permutation=[0, 2, 1, 3])
        B, H, S, D = s
    elif len(s) == 3:
        if not num_heads:
            raise Unsupported(f"{n.op} of a 3-D input needs num_heads")
        B, S, HD = s
        H, D = num_heads, HD // num_heads
        x = c.call("reshape", v, [B, S, H, D])
    else:
        raise Unsupported(f"{n.op} of rank {len(s)}")
    rd = rotary_dim or D
    half = rd // 2
    cos, sin = c.operand(cos_cache, dt), c.operand(sin_cache, dt)
    if pos is not None:
        cos, sin = c.call("gather", cos, c.operand(pos), axis=0), c.call("gather", sin, c.operand(pos), axis=0)
    if c.shape(cos)[-1] != half:
        cos = c.call("slice", cos, [0] * len(c.shape(cos)), [*c.shape(cos)[:-1], half])
        sin = c.call("slice", sin, [0] * len(c.shape(sin)), [*c.shape(sin)[:-1], half])
    cos = c.call("reshape", cos, [*c.shape(cos)[:-1][-2:], 1, half] if len(c.shape(cos)) >= 3 else
                 [1, *c.shape(cos)[:-1], 1, half])
    sin = c.call("reshape", sin, list(c.shape(cos)))
    rot = x if rd == D else c.call("slice", x, [0, 0, 0, 0], [B, S, H, rd])
    if interleaved:
        x1 = c.call("slice", rot, [0, 0, 0, 0], [B, S, H, rd - 1], strides=[1, 1, 1, 2])
        x2 = c.call("slice", rot, [0, 0, 0, 1], [B, S, H, rd - 1], strides=[1, 1, 1, 2])
    else:
        x1, x2 = c.call("split", rot, 2, axis=3)
    real = c.call("sub", c.call("mul", cos, x1), c.call("mul", sin, x2))
    imag = c.call("add", c.call("mul", sin, x1), c.call("mul", cos, x2))
    if interleaved:
        real = c.call("reshape", real, [B, S, H, half, 1])
        imag = c.call("reshape", imag, [B, S, H, half, 1])
        out = c.call("reshape", c.call("concat", [real, imag], 4), [B, S, H, rd])
    else:
        out = c.call("concat", [real, imag], 3)
    if rd != D:
        out = c.call("concat", [out, c.call("slice", x, [0, 0, 0, rd], [B, S, H, D - rd])], 3)
    if len(s) == 4:
        return c.call("transpose", out, permutation=[0, 2, 1, 3])
    return c.call("reshape", out, list(s))


@_h("RotaryEmbedding", to="slice/split, mul, sub, add, concat (cos/sin caches gathered by position_ids)")
def _rotary_embedding(c, n, x):
    pos = x[3] if len(x) > 3 else None
    return _rotary(c, n, c.operand(x[0]), x[1], x[2], pos, bool(n.attr("interleaved", 0)),
                   int(n.attr("num_heads", 0)), int(n.attr("rotary_embedding_dim", 0)))


@_h("RotaryEmbedding", to="as ai.onnx RotaryEmbedding; a 1-element position_ids is an offset", domain=MS)
def _rotary_embedding_ms(c, n, x):
    if int(n.attr("is_packed_batching", 0)) or float(n.attr("scale", 1.0)) != 1.0:
        raise Unsupported("RotaryEmbedding with is_packed_batching or scale")
    v = c.operand(x[0])
    pos = x[1]
    S = c.shape(v)[-2] if _rank(c, v) == 4 else c.shape(v)[1]
    if c.is_known(pos) and np.asarray(pos).size == 1:
        pos = (int(np.asarray(pos).reshape(-1)[0]) + np.arange(S, dtype=np.int64))[None]
    return _rotary(c, n, v, x[2], x[3], pos, bool(n.attr("interleaved", 0)),
                   int(n.attr("num_heads", 0)), int(n.attr("rotary_embedding_dim", 0)))



# ---------------------------------------------------------------- composed normalizations and activations
@_h("RMSNormalization", to="x / sqrt(mean(x^2) + eps) * scale over the axes from axis on")
def _rms_normalization(c, n, x):
    v = c.operand(x[0])
    r = _rank(c, v)
    return _rms_norm(c, v, x[1], list(range(int(n.attr("axis", -1)) % r, r)), float(n.attr("epsilon", 1e-5)))


@_h("Swish", to="x * sigmoid(alpha * x)")
def _swish(c, n, x):
    v = c.operand(x[0])
    return c.call("mul", v, c.call("sigmoid", c.call("mul", v, c.scalar(float(n.attr("alpha", 1.0)), v.data_type))))


@_h("SwiGLU", to="a * sigmoid(alpha * a) * b")
def _swiglu(c, n, x):
    a, b = _same_type(c, x[0], x[1])
    if c.shape(a) != c.shape(b):
        raise Unsupported("SwiGLU of inputs of different shapes")
    gate = c.call("mul", a, c.call("sigmoid", c.call("mul", a, c.scalar(float(n.attr("alpha", 1.0)), a.data_type))))
    return c.call("mul", gate, b)


@_h("LpNormalization", to="x / reduce_l1 or reduce_l2 (p = 1, 2) along axis; 0 where the norm is 0")
def _lp_normalization(c, n, x):
    v = c.operand(x[0])
    p = int(n.attr("p", 2))
    if p not in (1, 2):
        raise Unsupported(f"LpNormalization with p={p}")
    axis = int(n.attr("axis", -1)) % _rank(c, v)
    norm = c.call("reduce_l1" if p == 1 else "reduce_l2", v, axes=[axis], keep_dimensions=True)
    zero = c.scalar(0, v.data_type)
    return c.call("where", c.call("equal", norm, zero), zero, c.call("div", v, norm))  # a zero norm gives 0


@_h("MeanVarianceNormalization", to="(x - mean) / (sqrt(mean(x^2) - mean^2) + 1e-9), as its function body")
def _mvn(c, n, x):
    v = c.operand(x[0])
    dt = v.data_type
    axes = [int(a) % _rank(c, v) for a in (n.attr("axes") or [0, 2, 3])]
    mean = c.call("reduce_mean", v, axes=axes, keep_dimensions=True)
    ex2 = c.call("reduce_mean", c.call("mul", v, v), axes=axes, keep_dimensions=True)
    std = c.call("sqrt", c.call("sub", ex2, c.call("mul", mean, mean)))
    return c.call("div", c.call("sub", v, mean), c.call("add", std, c.scalar(1e-9, dt)))


@_h("GroupNormalization", to="reshape to groups + layer_normalization, then scale and bias (per group before "
                             "opset 21, per channel from 21)")
def _group_norm(c, n, x):
    v = c.operand(x[0])
    dt = v.data_type
    s = list(c.shape(v))
    G = int(n.attr("num_groups"))
    N, C = s[0], s[1]
    if C % G:
        raise Unsupported(f"GroupNormalization of {C} channels in {G} groups")
    out = c.call("layer_normalization", c.call("reshape", v, [N, G, int(np.prod(s[1:])) // G]),
                 axes=[2], epsilon=float(n.attr("epsilon", 1e-5)))
    ones = [1] * (len(s) - 2)
    if n.since < 21:  # scale and bias per group
        out = c.call("reshape", out, [N, G, C // G, *s[2:]])
        sc = c.call("reshape", c.operand(x[1], dt), [1, G, 1, *ones])
        bi = c.call("reshape", c.operand(x[2], dt), [1, G, 1, *ones])
        return c.call("reshape", c.call("add", c.call("mul", out, sc), bi), s)
    out = c.call("reshape", out, s)
    sc = c.call("reshape", c.operand(x[1], dt), [1, C, *ones])
    bi = c.call("reshape", c.operand(x[2], dt), [1, C, *ones])
    return c.call("add", c.call("mul", out, sc), bi)


@_h("CenterCropPad", to="slice and pad (constant 0) around the centre (shape known)")
def _center_crop_pad(c, n, x):
    v = c.operand(x[0])
    s = list(c.shape(v))
    r = len(s)
    target = ints(c, x[1], "CenterCropPad's shape")
    axes = [int(a) % r for a in (n.attr("axes") or range(r))]
    starts, sizes, begin, end = [0] * r, list(s), [0] * r, [0] * r
    for a, t in zip(axes, target):
        if t < s[a]:
            starts[a], sizes[a] = (s[a] - t) // 2, t
        elif t > s[a]:
            begin[a], end[a] = (t - s[a]) // 2, t - s[a] - (t - s[a]) // 2
    out = v
    if sizes != s:
        out = c.call("slice", out, starts, sizes)
    if any(begin) or any(end):
        out = c.call("pad", out, begin, end)
    return out if out is not v else c.call("identity", v)


@_h("OneHot", to="where(equal(indices (negative ones + depth), iota), on, off) (depth known)")
def _one_hot(c, n, x):
    idx = c.operand(x[0])
    depth = int(np.asarray(c.known(x[1], "OneHot's depth")).reshape(-1)[0])
    r = _rank(c, idx)
    axis = int(n.attr("axis", -1))
    axis = axis + r + 1 if axis < 0 else axis
    dt = idx.data_type
    if dt in ("uint8", "uint32", "uint64"):
        raise Unsupported(f"OneHot with {dt} indices")
    zero = c.scalar(0, dt)
    idx = c.call("where", c.call("lesser", idx, zero), c.call("add", idx, c.scalar(depth, dt)), idx)
    s = list(c.shape(idx))
    idx = c.call("reshape", idx, [*s[:axis], 1, *s[axis:]])
    iota = c.operand(np.arange(depth).astype(np.float32 if dt in ("float32", "float16") else _np_of(dt))
                     .reshape([1] * axis + [depth] + [1] * (r - axis)), dt)
    hit = c.call("equal", idx, iota)
    values = x[2]
    if c.is_known(values):
        vals = np.asarray(values).reshape(-1)
        off, on = c.operand(vals[:1].reshape(()), None), c.operand(vals[1:2].reshape(()), None)
    else:
        off, on = (c.call("reshape", p, []) for p in c.call("split", values, 2, axis=0))
    return c.call("where", hit, on, off)


# ---------------------------------------------------------------- window functions
def _window(kind):
    def h(c, n, x):
        from .reader import np_dtype_of

        size = int(np.asarray(c.known(x[0], f"{n.op}'s size")).reshape(-1)[0])
        dt = np_dtype_of(int(n.attr("output_datatype", 1)))
        if dt is None:
            raise Unsupported(f"{n.op} output_datatype {n.attr('output_datatype')}")
        N = size if int(n.attr("periodic", 1)) else size - 1
        k = np.arange(size, dtype=np.float64) * (2 * np.pi / N)
        if kind == "hann":
            w = np.sin(k / 2) ** 2
        elif kind == "hamming":
            w = 25 / 46 - (21 / 46) * np.cos(k)
        else:
            w = 0.42 - 0.5 * np.cos(k) + 0.08 * np.cos(2 * k)
        return w.astype(dt)
    return h


for _k, _kind in (("HannWindow", "hann"), ("HammingWindow", "hamming"), ("BlackmanWindow", "blackman")):
    _h(_k, to="folded: computed in float64 at load time (size known)")(_window(_kind))

from . import attention  # noqa: E402,F401  (registers GroupQueryAttention, MultiHeadAttention)
from . import quantized  # noqa: E402,F401  (registers the quantized operators: DynamicQuantizeLinear, ConvInteger, ...)
