"""An independent float64 NumPy evaluation of the conformance vectors' graphs.

Used to check the vectors themselves (their converter said "manual verification
recommended"): a vector whose expected output is not within its own WPT
tolerance of this computation is wrong, or its tolerance cannot be met by a
correctly rounded result. Floats are computed in float64 from the inputs as
the engine sees them (float16 inputs already rounded); integers in their own
NumPy type (wrapping like a 2's complement machine).

The semantics and defaults are the WebNN spec's (https://www.w3.org/TR/webnn/).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from . import wpt

FLOAT_INPUT = np.float64


def _f(x: np.ndarray) -> np.ndarray:
    if x.dtype.kind != "f":
        return x
    if x.ndim and not any(x.strides):
        # A scalar fill (a broadcast view): convert one element, keep the view.
        return np.broadcast_to(x.reshape(-1)[:1].astype(np.float64).reshape(()), x.shape)
    return x.astype(np.float64)


# ---------------------------------------------------------------------------------------
# Operators: each takes the positional arguments and keyword options of our API.


def _binary(fn: Callable) -> Callable:
    return lambda a, b: fn(_f(a), _f(b))


def _compare(fn: Callable) -> Callable:
    return lambda a, b: fn(_f(a), _f(b)).astype(np.uint8)


def _div(a, b):
    if a.dtype.kind == "f":
        return a / b
    return np.trunc(a.astype(np.float64) / b).astype(a.dtype)


def _clamp(x, min_value=None, max_value=None):
    out = _f(x)
    for bound, pick in ((min_value, np.maximum), (max_value, np.minimum)):
        if bound is None or (isinstance(bound, float) and math.isnan(bound)):
            continue  # a NaN bound is ignored, as WPT's "minValue as NaN" vectors expect
        out = pick(out, bound if out.dtype.kind == "f" else np.asarray(bound).astype(out.dtype))
    return out


def _cast(x, data_type):
    target = np.dtype(wpt.NUMPY_DTYPES[data_type])
    if target.kind == "f":
        return x.astype(np.float64)
    if x.dtype.kind == "f":
        return np.trunc(x).astype(np.int64).astype(target)
    return x.astype(target)


def _to_nchw(x, layout):
    return x.transpose(0, 3, 1, 2) if layout == "nhwc" else x


def _from_nchw(x, layout):
    return x.transpose(0, 2, 3, 1) if layout == "nhwc" else x


def _conv2d(x, w, padding=None, strides=None, dilations=None, groups=1, input_layout="nchw",
            filter_layout="oihw", bias=None):
    x = _to_nchw(_f(x), input_layout)
    w = _f(w)
    w = {"oihw": w, "hwio": w.transpose(3, 2, 0, 1), "ohwi": w.transpose(0, 3, 1, 2),
         "ihwo": w.transpose(3, 0, 1, 2)}[filter_layout]
    t, b, l, r = padding or (0, 0, 0, 0)
    sh, sw = strides or (1, 1)
    dh, dw = dilations or (1, 1)
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (t, b), (l, r)))
    oh = (h + t + b - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + l + r - dw * (kw - 1) - 1) // sw + 1
    og = o // groups
    out = np.zeros((n, o, oh, ow))
    for g in range(groups):
        xg = xp[:, g * cg:(g + 1) * cg]
        wg = w[g * og:(g + 1) * og]
        for i in range(kh):
            for j in range(kw):
                patch = xg[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh, j * dw:j * dw + sw * (ow - 1) + 1:sw]
                out[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", patch, wg[:, :, i, j])
    if bias is not None:
        out += _f(bias)[None, :, None, None]
    return _from_nchw(out, input_layout)


def _conv_transpose2d(x, w, padding=None, strides=None, dilations=None, output_padding=None,
                      output_sizes=None, groups=1, input_layout="nchw", filter_layout="iohw", bias=None):
    x = _to_nchw(_f(x), input_layout)
    w = _f(w)
    w = {"iohw": w, "hwoi": w.transpose(3, 2, 0, 1), "ohwi": w.transpose(3, 0, 1, 2)}[filter_layout]
    t, b, l, r = padding or (0, 0, 0, 0)
    sh, sw = strides or (1, 1)
    dh, dw = dilations or (1, 1)
    ph, pw = output_padding or (0, 0)
    n, c, h, wd = x.shape
    ci, og, kh, kw = w.shape
    cg = c // groups
    if output_sizes is not None:
        oh, ow = output_sizes
    else:
        oh = (h - 1) * sh + dh * (kh - 1) + 1 - t - b + ph
        ow = (wd - 1) * sw + dw * (kw - 1) + 1 - l - r + pw
    full_h = max((h - 1) * sh + dh * (kh - 1) + 1, t + oh)
    full_w = max((wd - 1) * sw + dw * (kw - 1) + 1, l + ow)
    full = np.zeros((n, og * groups, full_h, full_w))
    for g in range(groups):
        xg = x[:, g * cg:(g + 1) * cg]
        wg = w[g * cg:(g + 1) * cg]
        for i in range(kh):
            for j in range(kw):
                full[:, g * og:(g + 1) * og, i * dh:i * dh + sh * (h - 1) + 1:sh,
                     j * dw:j * dw + sw * (wd - 1) + 1:sw] += np.einsum("nchw,co->nohw", xg, wg[:, :, i, j])
    out = full[:, :, t:t + oh, l:l + ow]
    if bias is not None:
        out = out + _f(bias)[None, :, None, None]
    return _from_nchw(out, input_layout)


def _gemm(a, b, c=None, alpha=1.0, beta=1.0, a_transpose=False, b_transpose=False):
    a, b = _f(a), _f(b)
    out = alpha * ((a.T if a_transpose else a) @ (b.T if b_transpose else b))
    if c is not None:
        out = out + beta * _f(c)
    return out


def _gather(x, indices, axis=0):
    idx = indices.astype(np.int64)
    idx = np.where(idx < 0, idx + x.shape[axis], idx)
    # Out-of-range indices are clamped (the spec leaves them to the implementation; WPT's
    # out-of-bound vectors expect clamping).
    return np.take(x, np.clip(idx, 0, x.shape[axis] - 1), axis=axis)


def _channel_shape(rank, axis, size):
    shape = [1] * rank
    shape[axis] = size
    return shape


def _batch_normalization(x, mean, variance, scale=None, bias=None, axis=1, epsilon=1e-5):
    x = _f(x)
    shape = _channel_shape(x.ndim, axis, x.shape[axis])
    out = (x - _f(mean).reshape(shape)) / np.sqrt(_f(variance).reshape(shape) + epsilon)
    if scale is not None:
        out = out * _f(scale).reshape(shape)
    if bias is not None:
        out = out + _f(bias).reshape(shape)
    return out


def _instance_normalization(x, scale=None, bias=None, epsilon=1e-5, layout="nchw"):
    x = _f(x)
    axes, channel = ((2, 3), 1) if layout == "nchw" else ((1, 2), 3)
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    out = (x - mean) / np.sqrt(var + epsilon)
    shape = _channel_shape(4, channel, x.shape[channel])
    if scale is not None:
        out = out * _f(scale).reshape(shape)
    if bias is not None:
        out = out + _f(bias).reshape(shape)
    return out


def _layer_normalization(x, scale=None, bias=None, axes=None, epsilon=1e-5):
    x = _f(x)
    axes = list(range(1, x.ndim)) if axes is None else [a % x.ndim if x.ndim else a for a in axes]
    mean = x.mean(axis=tuple(axes), keepdims=True)
    var = ((x - mean) ** 2).mean(axis=tuple(axes), keepdims=True)
    out = (x - mean) / np.sqrt(var + epsilon)
    shape = [x.shape[i] if i in axes else 1 for i in range(x.ndim)]
    order = np.argsort(axes)

    def place(v):
        return _f(v).transpose(order).reshape(shape) if axes else _f(v)

    if scale is not None:
        out = out * place(scale)
    if bias is not None:
        out = out + place(bias)
    return out


def _reduce(fn: Callable) -> Callable:
    def reduce(x, axes=None, keep_dimensions=False):
        axis = None if axes is None else tuple(a % x.ndim for a in axes)
        return fn(_f(x), axis, keep_dimensions)

    return reduce


def _slice(x, starts, sizes, strides=None):
    strides = strides or [1] * x.ndim
    return x[tuple(slice(s, s + n, st) for s, n, st in zip(starts, sizes, strides))]


def _split(x, splits, axis=0):
    if isinstance(splits, int):
        return np.split(x, splits, axis=axis)
    return np.split(x, np.cumsum(splits)[:-1], axis=axis)


def _softmax(x, axis):
    x = _f(x)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _transpose(x, permutation=None):
    return x.transpose(permutation if permutation is not None else list(range(x.ndim))[::-1])


OPERATORS: dict[str, Callable[..., Any]] = {
    "add": _binary(np.add),
    "sub": _binary(np.subtract),
    "mul": _binary(np.multiply),
    "div": _div,
    "max": _binary(np.maximum),
    "min": _binary(np.minimum),
    "pow": _binary(np.power),
    "equal": _compare(np.equal),
    "greater": _compare(np.greater),
    "greater_or_equal": _compare(np.greater_equal),
    "lesser": _compare(np.less),
    "lesser_or_equal": _compare(np.less_equal),
    "logical_not": lambda a: (a == 0).astype(np.uint8),
    "abs": lambda x: np.abs(_f(x)),
    "ceil": lambda x: np.ceil(_f(x)),
    "floor": lambda x: np.floor(_f(x)),
    "exp": lambda x: np.exp(_f(x)),
    "log": lambda x: np.log(_f(x)),
    "neg": lambda x: -_f(x),
    "sqrt": lambda x: np.sqrt(_f(x)),
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-_f(x))),
    "tanh": lambda x: np.tanh(_f(x)),
    "relu": lambda x: np.where(_f(x) > 0, _f(x), np.zeros_like(_f(x))),
    "elu": lambda x, alpha=1.0: np.where(_f(x) >= 0, _f(x), alpha * (np.exp(_f(x)) - 1)),
    "hard_sigmoid": lambda x, alpha=0.2, beta=0.5: np.clip(alpha * _f(x) + beta, 0, 1),
    "hard_swish": lambda x: _f(x) * np.clip(_f(x) + 3, 0, 6) / 6,
    "leaky_relu": lambda x, alpha=0.01: np.where(_f(x) >= 0, _f(x), alpha * _f(x)),
    "linear": lambda x, alpha=1.0, beta=0.0: alpha * _f(x) + beta,
    "clamp": _clamp,
    "cast": _cast,
    "concat": lambda inputs, axis: np.concatenate([_f(i) for i in inputs], axis=axis),
    "conv2d": _conv2d,
    "conv_transpose2d": _conv_transpose2d,
    "expand": lambda x, new_shape: np.broadcast_to(x, np.broadcast_shapes(x.shape, tuple(new_shape))),
    "gather": _gather,
    "gemm": _gemm,
    "matmul": lambda a, b: np.matmul(_f(a), _f(b)),
    "batch_normalization": _batch_normalization,
    "instance_normalization": _instance_normalization,
    "layer_normalization": _layer_normalization,
    "reduce_l1": _reduce(lambda x, a, k: np.sum(np.abs(x), axis=a, keepdims=k)),
    "reduce_l2": _reduce(lambda x, a, k: np.sqrt(np.sum(x.astype(np.float64) ** 2, axis=a, keepdims=k))),
    "reduce_log_sum": _reduce(lambda x, a, k: np.log(np.sum(x, axis=a, keepdims=k))),
    "reduce_log_sum_exp": _reduce(lambda x, a, k: np.log(np.sum(np.exp(x), axis=a, keepdims=k))),
    "reduce_max": _reduce(lambda x, a, k: np.max(x, axis=a, keepdims=k)),
    "reduce_min": _reduce(lambda x, a, k: np.min(x, axis=a, keepdims=k)),
    "reduce_mean": _reduce(lambda x, a, k: np.mean(x, axis=a, keepdims=k)),
    "reduce_product": _reduce(lambda x, a, k: np.prod(x, axis=a, keepdims=k)),
    "reduce_sum": _reduce(lambda x, a, k: np.sum(x, axis=a, keepdims=k)),
    "reduce_sum_square": _reduce(lambda x, a, k: np.sum(x * x, axis=a, keepdims=k)),
    "reshape": lambda x, new_shape: x.reshape(new_shape),
    "slice": _slice,
    "softmax": _softmax,
    "split": _split,
    "transpose": _transpose,
}


class _Evaluator:
    """Stands in for an MLGraphBuilder: every method computes its result at once."""

    def input(self, name: str, descriptor: Mapping[str, Any]) -> None:
        raise AssertionError("inputs are given by evaluate()")

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name not in OPERATORS:
            raise NotImplementedError(f"no NumPy reference for {name!r}")
        return OPERATORS[name]


def evaluate(vector: wpt.Vector) -> dict[str, np.ndarray]:
    """Evaluate a vector's graph in float64 (integers in their own type).

    Arguments:
        vector: the test.

    Returns:
        The expected outputs' names mapped to unrounded results.

    Raises:
        NotImplementedError: an operator without a reference here.
    """
    operands: dict[str, Any] = {}
    for name, entry in vector.graph["inputs"].items():
        if isinstance(entry["data"], list):
            operands[name] = wpt.decode_data(entry["data"], entry["descriptor"])
        else:  # a scalar fill: a read-only broadcast view costs no memory
            one = wpt.decode_data([entry["data"]], {**entry["descriptor"], "shape": [1]})
            operands[name] = np.broadcast_to(one.reshape(()), tuple(entry["descriptor"]["shape"]))
    evaluator = _Evaluator()
    with np.errstate(all="ignore"):
        for operator in vector.graph["operators"]:
            method, args, kwargs = wpt.operator_call(operator, operands)
            result = getattr(evaluator, method)(*args, **kwargs)
            names = operator["outputs"]
            if isinstance(names, str):
                operands[names] = np.asarray(result)
            else:
                operands.update(zip(names, (np.asarray(r) for r in result)))
    return {name: operands[name] for name in vector.graph["expectedOutputs"]}


def round_to(value: np.ndarray, data_type: str) -> np.ndarray:
    """Round a float64 (or integer) result to a WebNN data type (float16 by WPT's toHalf)."""
    if data_type == "float16":
        return wpt.to_half_bits(value).view(np.float16).reshape(np.shape(value))
    with np.errstate(all="ignore"):
        return np.asarray(value).astype(wpt.NUMPY_DTYPES[data_type])


def check_vector(vector: wpt.Vector) -> list[str]:
    """Compare a vector's expected outputs with the float64 NumPy evaluation.

    Returns:
        Problems, one line each (empty when every expected output lies within the
        vector's WPT tolerance of the correctly rounded float64 result).
    """
    results = evaluate(vector)
    tolerance = wpt.tolerance_for(vector, {n: list(np.shape(v)) for n, v in results.items()}
                                  | wpt.operand_shapes(vector))
    problems = []
    for name, entry in vector.graph["expectedOutputs"].items():
        result = results[name]
        if not isinstance(entry["data"], list) and result.size > wpt.MAX_INDEX_TO_VALIDATE:
            # Scalar fill: only the first elements are compared; round only those.
            result = result.reshape(-1)[: wpt.MAX_INDEX_TO_VALIDATE]
            entry = {"data": entry["data"], "descriptor": {**entry["descriptor"], "shape": [result.size]}}
        rounded = round_to(result, entry["descriptor"]["dataType"])
        problems += wpt.compare_output(name, rounded, entry, tolerance)
    return problems
