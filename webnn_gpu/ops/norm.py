"""Normalization: batch_normalization, instance_normalization, layer_normalization, softmax.

Spec: https://www.w3.org/TR/webnn/#api-mlgraphbuilder-batchnorm,
https://www.w3.org/TR/webnn/#api-mlgraphbuilder-instancenorm,
https://www.w3.org/TR/webnn/#api-mlgraphbuilder-layernorm,
https://www.w3.org/TR/webnn/#api-mlgraphbuilder-softmax-method

Instance and layer normalization are one algorithm: ``norm/moments.wgsl`` computes the mean
and variance of each group of reduced values (two passes: the mean, then the mean squared
deviation), then ``norm/normalize.wgsl`` writes ``(x - mean) / sqrt(variance + epsilon) *
scale + bias`` per element. A layer normalization of rows up to ``ROW_KERNEL_MAX`` values
whose scale and bias run along the normalized axes is one kernel (``norm/layer_norm.wgsl``:
the statistics and the outputs of a row by one invocation, or by one workgroup for few long
rows). Batch normalization is ``normalize.wgsl`` alone, with the given mean and variance.
Softmax is one kernel (``norm/softmax.wgsl``): per line the maximum, the sum of
exponentials, then the outputs. float16 computes in f32 and rounds once; epsilon is first
rounded to the input's data type, as the spec casts it. ``normalize.wgsl`` and
``layer_norm.wgsl`` apply the fused epilogue of ``node.attrs["epilogue"]``
(:mod:`webnn_gpu.ops._epilogue`) to each value they store.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _dtypes
from .. import _validate as V
from .._kernels import strides, workgroups
from ..builder import MLGraphBuilder, MLOperand
from . import _epilogue
from ._registry import builder_method, lowering, support
from .reduce import merge_axes, plan

FLOATS = _dtypes.FLOAT_TYPES
MAX_RANK = V.MAX_RANK


def _check_type(op, label, arg, v, types=FLOATS) -> None:
    if v.data_type not in types:
        V.fail(op, label, arg, f"an operand of data type one of {', '.join(types)}", v.data_type)


def _same_type(op, label, arg, v, x) -> None:
    if v.data_type != x.data_type:
        V.fail(op, label, arg, f"an operand of the input's data type ({x.data_type})", v.data_type)


def _shape_is(op, label, arg, v, shape, what) -> None:
    if tuple(v.shape) != tuple(shape):
        V.fail(op, label, arg, f"shape {list(shape)} ({what})", list(v.shape))


def _epsilon(op, label, value, data_type) -> float:
    eps = V.float_value(op, label, "epsilon", value)
    with np.errstate(all="ignore"):  # the spec's cast: float16 may round to a subnormal or inf
        return float(_dtypes.info(data_type).numpy.type(eps))


def _literal(x: float) -> str:
    if not math.isfinite(x):
        return "bitcast<f32>(0x7f800000u)" if x > 0 else ("bitcast<f32>(0xff800000u)" if x < 0 else
                                                          "bitcast<f32>(0x7fc00000u)")
    return f"f32({float(np.float32(x))!r})"


# ---------------------------------------------------------------- builder methods
@builder_method
def batch_normalization(self: MLGraphBuilder, input: MLOperand, mean: MLOperand, variance: MLOperand, *,
                        scale: MLOperand | None = None, bias: MLOperand | None = None, axis: int = 1,
                        epsilon: float = 1e-5, label: str = "", **kwargs) -> MLOperand:
    """Normalize with a given per-feature mean and variance (inference-time batch norm).

    Spec: https://www.w3.org/TR/webnn/#api-mlgraphbuilder-batchnorm

    ``output = (input - mean) / sqrt(variance + epsilon) * scale + bias`` along ``axis``.

    Arguments:
        input (MLOperand): float32 or float16, any rank >= 1.
        mean, variance (MLOperand): 1-D, ``[input.shape[axis]]``, the input's data type.
        scale, bias (MLOperand | None): 1-D like mean; default 1 and 0.
        axis (int): the feature axis, in [0, rank); default 1 (the "c" of nchw).
        epsilon (float): added to the variance; default 1e-5.
        label (str): a name for errors and GPU objects.

    Returns:
        MLOperand: same shape and data type as ``input``.

    Raises:
        MLTypeError: an unsupported or mismatched data type, a wrong shape, an axis out of range.
    """
    op = "batch_normalization"
    V.check_kwargs(op, label, kwargs)
    self._check_usable(op, label)
    x = self._operand(op, label, "input", input)
    mu = self._operand(op, label, "mean", mean)
    var = self._operand(op, label, "variance", variance)
    sc = self._operand(op, label, "scale", scale, optional=True)
    bi = self._operand(op, label, "bias", bias, optional=True)
    _check_type(op, label, "input", x)
    ax = V.axis(op, label, "axis", axis, len(x.shape))
    want = (x.shape[ax],)
    for arg, v in (("mean", mu), ("variance", var), ("scale", sc), ("bias", bi)):
        if v is not None:
            _same_type(op, label, arg, v, x)
            _shape_is(op, label, arg, v, want, f"[input.shape[{ax}]]")
    eps = _epsilon(op, label, epsilon, x.data_type)
    return self._emit1(op, [x, mu, var, sc, bi], x.data_type, x.shape, {"axis": ax, "epsilon": eps}, label=label)


support("batch_normalization", {"input": (FLOATS, (1, MAX_RANK)), "mean": (FLOATS, (1, 1)),
                                "variance": (FLOATS, (1, 1)), "scale": (FLOATS, (1, 1)), "bias": (FLOATS, (1, 1))},
        (FLOATS, (1, MAX_RANK)))


@builder_method
def instance_normalization(self: MLGraphBuilder, input: MLOperand, *, scale: MLOperand | None = None,
                           bias: MLOperand | None = None, epsilon: float = 1e-5, layout: str = "nchw",
                           label: str = "", **kwargs) -> MLOperand:
    """Normalize each channel of each sample over its spatial dimensions.

    Spec: https://www.w3.org/TR/webnn/#api-mlgraphbuilder-instancenorm

    Arguments:
        input (MLOperand): float32 or float16, 4-D.
        scale, bias (MLOperand | None): 1-D ``[channels]``, the input's data type; default 1 and 0.
        epsilon (float): added to the variance; default 1e-5.
        layout (str): "nchw" (default) or "nhwc".
        label (str): a name for errors and GPU objects.

    Returns:
        MLOperand: same shape and data type as ``input``.

    Raises:
        MLTypeError: an unsupported or mismatched data type, a wrong rank or shape, a bad layout.
    """
    op = "instance_normalization"
    V.check_kwargs(op, label, kwargs)
    self._check_usable(op, label)
    x = self._operand(op, label, "input", input)
    sc = self._operand(op, label, "scale", scale, optional=True)
    bi = self._operand(op, label, "bias", bias, optional=True)
    _check_type(op, label, "input", x)
    if len(x.shape) != 4:
        V.fail(op, label, "input", "a 4-D operand", list(x.shape))
    if layout not in ("nchw", "nhwc"):
        V.fail(op, label, "layout", "'nchw' or 'nhwc'", layout)
    ch = 1 if layout == "nchw" else 3
    for arg, v in (("scale", sc), ("bias", bi)):
        if v is not None:
            _same_type(op, label, arg, v, x)
            _shape_is(op, label, arg, v, (x.shape[ch],), f"[channels] for layout {layout!r}")
    eps = _epsilon(op, label, epsilon, x.data_type)
    axes = [2, 3] if layout == "nchw" else [1, 2]
    return self._emit1(op, [x, sc, bi], x.data_type, x.shape, {"axes": axes, "param_axes": [ch], "epsilon": eps},
                       label=label)


support("instance_normalization", {"input": (FLOATS, (4, 4)), "scale": (FLOATS, (1, 1)), "bias": (FLOATS, (1, 1))},
        (FLOATS, (4, 4)))


@builder_method
def layer_normalization(self: MLGraphBuilder, input: MLOperand, *, scale: MLOperand | None = None,
                        bias: MLOperand | None = None, axes=None, epsilon: float = 1e-5, label: str = "",
                        **kwargs) -> MLOperand:
    """Normalize over ``axes`` (by default all but the first) of each sample.

    Spec: https://www.w3.org/TR/webnn/#api-mlgraphbuilder-layernorm

    Arguments:
        input (MLOperand): float32 or float16, any rank.
        scale, bias (MLOperand | None): shape ``[input.shape[a] for a in axes]`` (in the order of
            ``axes``), the input's data type; default 1 and 0.
        axes (Sequence[int] | None): the axes to normalize over; default ``[1, ..., rank-1]``
            (``[]`` for rank 0 or 1). An empty list normalizes each value on its own (output: bias).
        epsilon (float): added to the variance; default 1e-5.
        label (str): a name for errors and GPU objects.

    Returns:
        MLOperand: same shape and data type as ``input``.

    Raises:
        MLTypeError: an unsupported or mismatched data type, axes out of range or duplicated,
            a scale or bias of the wrong shape.
    """
    op = "layer_normalization"
    V.check_kwargs(op, label, kwargs)
    self._check_usable(op, label)
    x = self._operand(op, label, "input", input)
    sc = self._operand(op, label, "scale", scale, optional=True)
    bi = self._operand(op, label, "bias", bias, optional=True)
    _check_type(op, label, "input", x)
    rank = len(x.shape)
    ax = list(range(1, rank)) if axes is None else V.axes(op, label, "axes", axes, rank)
    want = tuple(x.shape[a] for a in ax)
    for arg, v in (("scale", sc), ("bias", bi)):
        if v is not None:
            _same_type(op, label, arg, v, x)
            _shape_is(op, label, arg, v, want, f"the input's sizes along axes {ax}")
    eps = _epsilon(op, label, epsilon, x.data_type)
    return self._emit1(op, [x, sc, bi], x.data_type, x.shape, {"axes": ax, "param_axes": ax, "epsilon": eps},
                       label=label)


support("layer_normalization", {"input": (FLOATS, (0, MAX_RANK)), "scale": (FLOATS, (0, MAX_RANK)),
                                "bias": (FLOATS, (0, MAX_RANK))}, (FLOATS, (0, MAX_RANK)))


@builder_method
def softmax(self: MLGraphBuilder, input: MLOperand, axis: int, *, label: str = "", **kwargs) -> MLOperand:
    """``exp(x - max) / sum(exp(x - max))`` along ``axis`` (numerically stable).

    Spec: https://www.w3.org/TR/webnn/#api-mlgraphbuilder-softmax-method

    Arguments:
        input (MLOperand): float32 or float16, rank >= 1.
        axis (int): the axis to normalize along, in [0, rank).
        label (str): a name for errors and GPU objects.

    Returns:
        MLOperand: same shape and data type as ``input``.

    Raises:
        MLTypeError: an unsupported data type, an axis out of range.
    """
    op = "softmax"
    V.check_kwargs(op, label, kwargs)
    self._check_usable(op, label)
    x = self._operand(op, label, "input", input)
    _check_type(op, label, "input", x)
    ax = V.axis(op, label, "axis", axis, len(x.shape))
    return self._emit1(op, [x], x.data_type, x.shape, {"axis": ax}, label=label)


support("softmax", {"input": (FLOATS, (1, MAX_RANK))}, (FLOATS, (1, MAX_RANK)))


# ---------------------------------------------------------------- lowering
def _param_strides(shape, param_axes) -> list[int]:
    """Per axis of ``shape``: the stride into a tensor of shape [shape[a] for a in param_axes]."""
    pst = strides([shape[a] for a in param_axes])
    out = [0] * len(shape)
    for i, a in enumerate(param_axes):
        out[a] = pst[i] if shape[a] != 1 else 0
    return out


def _normalize(lc, x, out, stats_inputs, stats_kind, stats_strides, param_axes, scale, bias, eps) -> None:
    ins = [("x", x)] + stats_inputs
    if scale is not None:
        ins.append(("scale", scale))
    if bias is not None:
        ins.append(("bias", bias))
    ep = _epilogue.build(lc.node, out, _epilogue.steps_of(lc.node))
    ins += ep.operands
    lc.kernel("norm/normalize.wgsl", ins, [("out", out)], out.size, out_strides=strides(x.shape), stats=stats_kind,
              stats_strides=stats_strides, param_strides=_param_strides(x.shape, param_axes),
              has_scale=scale is not None, has_bias=bias is not None, epsilon=_literal(eps),
              out_T=_dtypes.info(out.data_type).compute, ep=ep)


@lowering("batch_normalization")
def lower_batch_normalization(node, lc) -> None:
    """batch_normalization: one normalize.wgsl kernel with the given statistics."""
    x, mu, var, sc, bi = node.inputs[:5]  # (fused epilogue operands follow)
    ax = node.attrs["axis"]
    _normalize(lc, x, node.outputs[0], [("mean", mu), ("variance", var)], "tensors", [0] * len(x.shape), [ax], sc, bi,
               node.attrs["epsilon"])


#: The longest row (normalized values) that layer normalization handles in one kernel
#: (``layer_norm.wgsl``: statistics and outputs by the same invocation or workgroup); longer
#: rows take moments.wgsl and normalize.wgsl, which spreads the outputs over every core.
ROW_KERNEL_MAX = 4096


@lowering("instance_normalization", "layer_normalization", "rms_normalization")
def lower_moments_norm(node, lc) -> None:
    """instance/layer normalization: moments.wgsl (mean, variance per group), then normalize.wgsl;
    a layer normalization of rows up to :data:`ROW_KERNEL_MAX` values whose scale and bias
    run along the normalized axes in order: one layer_norm.wgsl kernel. ``rms_normalization``
    (the compiler's fused node, :mod:`webnn_gpu.fusions.layer_norm`, only for such rows):
    the same kernel without centering (``attrs["form"]``)."""
    x, sc, bi = node.inputs[:3]  # (fused epilogue operands follow)
    axes = node.attrs["axes"]
    kept, red = merge_axes(x.shape, axes)
    M = math.prod(s for s, _ in kept)
    K = math.prod(s for s, _ in red)
    mode, wg, _ = plan(M, K)
    form = node.attrs.get("form", "layer") if node.op == "rms_normalization" else "layer"
    if node.op in ("layer_normalization", "rms_normalization") and K <= ROW_KERNEL_MAX and \
            list(axes) == sorted(axes) and (list(node.attrs["param_axes"]) == list(axes) or (sc is None and bi is None)):
        out = node.outputs[0]
        ins = [("x", x)] + [(n, v) for n, v in (("scale", sc), ("bias", bi)) if v is not None]
        ep = _epilogue.build(node, out, _epilogue.steps_of(node))
        lc.kernel("norm/layer_norm.wgsl", ins + ep.operands, [("out", out)], M,
                  groups=None if mode == "thread" else workgroups(M, lc.limits, lc.label), workgroup=wg, mode=mode,
                  M=M, K=K, kept_rm=strides([s for s, _ in kept]), kept_st=[t for _, t in kept],
                  red_rm=strides([s for s, _ in red]), red_st=[t for _, t in red], has_scale=sc is not None,
                  has_bias=bi is not None, epsilon=_literal(node.attrs["epsilon"]), form=form,
                  out_T=_dtypes.info(out.data_type).compute, ep=ep)
        return
    if node.op == "rms_normalization":  # the rule makes it only for rows the kernel above takes
        raise AssertionError(f"rms_normalization over {K} values with axes {axes}: no kernel")
    stats = lc.temp("float32", (M, 2))
    lc.kernel("norm/moments.wgsl", [("src", x)], [("out", stats)], M,
              groups=None if mode == "thread" else workgroups(M, lc.limits, lc.label), workgroup=wg, mode=mode,
              M=M, K=K, kept_rm=strides([s for s, _ in kept]), kept_st=[t for _, t in kept],
              red_rm=strides([s for s, _ in red]), red_st=[t for _, t in red])
    kept_axes = [i for i in range(len(x.shape)) if i not in axes]
    kst = strides([x.shape[i] for i in kept_axes])
    stats_strides = [0] * len(x.shape)
    for j, i in enumerate(kept_axes):
        stats_strides[i] = kst[j] if x.shape[i] != 1 else 0
    _normalize(lc, x, node.outputs[0], [("stats", stats)], "moments", stats_strides, node.attrs["param_axes"], sc, bi,
               node.attrs["epsilon"])


@lowering("softmax")
def lower_softmax(node, lc) -> None:
    """softmax: one softmax.wgsl kernel (a workgroup per line, or an invocation per short line)."""
    x = node.inputs[0]
    ax = node.attrs["axis"]
    L = x.shape[ax]
    inner = math.prod(x.shape[ax + 1:])
    M = x.size // L
    mode, wg, _ = plan(M, L)
    lc.kernel("norm/softmax.wgsl", [("src", x)], [("out", node.outputs[0])], M,
              groups=None if mode == "thread" else workgroups(M, lc.limits, lc.label), workgroup=wg, mode=mode, M=M,
              L=L, inner=inner, out_T=_dtypes.info(x.data_type).compute)
