"""Quantized ONNX operators, as ONNX Runtime's quantization tool writes them.

``quantize_dynamic`` writes ``DynamicQuantizeLinear`` + ``ConvInteger`` / ``MatMulInteger``
(then ``Cast`` and ``Mul`` by the scales), ``com.microsoft.DynamicQuantizeLSTM`` and, after ORT's
optimizer, ``com.microsoft.DynamicQuantizeMatMul`` / ``MatMulIntegerToFloat``;
``quantize_static`` writes ``QLinearConv`` / ``QLinearMatMul`` (QOperator format) or
``QuantizeLinear`` / ``DequantizeLinear`` around float operators (QDQ format, handled in
``ops.py``).

How they are computed (ONNX Runtime 1.32's CPU kernels are the reference):

* ``DynamicQuantizeLinear``: as ORT: ``min``/``max`` of the input widened to include 0,
  ``scale = (max - min) / 255`` (1 when both are 0), ``zero_point = round_even(clamp(-min /
  scale, 0, 255))``, ``y = saturate(round_even(x / scale) + zero_point)`` (a division, as
  ORT's MLAS kernel; WebNN's quantize_linear divides too), all in float32.
* Integer products (``ConvInteger``, ``MatMulInteger``, the QLinear and com.microsoft
  operators): each operand minus its zero point as float32 (exact: at most 255 in magnitude),
  then WebNN's float32 conv2d / matmul. A product is at most 255 * 255 < 2^16 and every
  partial sum is an integer, so the sum is exact while each partial sum stays below 2^24 in
  magnitude (e.g. K = 256 products of magnitude 65,536 or less); beyond, a partial sum is
  rounded to float32's 24 bits (a relative error of at most 2^-24 per addition), where ORT's
  int32 sum is exact. The result is cast to int32 where ONNX's output is int32.
* ``QLinearConv`` / ``QLinearMatMul``: the exact sum (+ the int32 bias) times
  ``a_scale * b_scale / y_scale`` (one float32 multiplier per output channel, computed in
  that order as ORT does), then ``saturate(round_even(.) + y_zero_point)``.
* ``DynamicQuantizeMatMul`` / ``MatMulIntegerToFloat``: the exact sum times
  ``a_scale * b_scale`` (+ bias): ORT's MLAS output processor may fuse that multiply-add (one
  rounding where this gives two).
* ``DynamicQuantizeLSTM``: written out per time step as ORT's CPU kernel computes it: X
  quantized once (DynamicQuantizeLinear's rule over the whole sequence), each step's hidden
  state quantized per direction, both products exact and scaled as above, then the bias
  ``Wb + Rb`` and the float32 gates (with several batch rows, the state quantized over the
  batch as single-threaded ORT does; multi-threaded ORT quantizes per chunk of rows). With ``sequence_lens``, peepholes, ``clip``,
  ``input_forget``, other activations or more than ``QLSTM_MAX_STEPS`` steps: WebNN's lstm on
  weights dequantized at load time and X quantized as ORT, the hidden state left in float32
  (about one 8-bit quantum of the state off ORT; docs/onnx.md has the measured sizes).
"""

from __future__ import annotations

import numpy as np

from ..errors import DataError
from .convert import Unsupported
from .ops import MS, _conv, _h, _lstm, _matmul_nd

__all__: list[str] = []

_QTYPES = {np.dtype(np.uint8): "uint8", np.dtype(np.int8): "int8"}


def _arg(x, i):
    return x[i] if len(x) > i else None


def _qtype(c, n, v, what: str) -> str:
    """The WebNN data type (uint8/int8) of quantized value ``v``; Unsupported otherwise."""
    dt = c.wdtype(v) if not c.is_known(v) else _QTYPES.get(np.asarray(v).dtype, np.asarray(v).dtype.name)
    if dt not in ("uint8", "int8"):
        raise Unsupported(f"{n.op}'s {what} of type {dt} (expected uint8 or int8)")
    return dt


def _zp_array(c, n, zp, what: str, dt: str, shapes: list[tuple]) -> np.ndarray | object:
    """Zero point ``zp`` (None: 0) checked against the allowed ``shapes``; its type must be
    ``dt``, the type of the value it belongs to (a DataError otherwise)."""
    if zp is None:
        return np.zeros((), np.float32)
    zdt = _qtype(c, n, zp, what)
    if zdt != dt:
        raise DataError(f"argument {what!r}: expected type {dt} (the type of the value it belongs to), "
                        f"got {zdt}")
    s = c.shape(zp)
    if s not in shapes:
        raise DataError(f"argument {what!r}: expected a shape of {' or '.join(str(list(t)) for t in shapes)}, "
                        f"got {list(s)}")
    return zp


def _centred(c, v, zp, zp_shape=None):
    """``v - zp`` as float32 (exact): a NumPy array when both are known, else an operand.
    ``zp_shape`` reshapes the zero point first (a per-channel zero point broadcast)."""
    if c.is_known(v) and c.is_known(zp):
        z = np.asarray(zp, np.float64)
        if zp_shape is not None:
            z = z.reshape(zp_shape)
        return (np.asarray(v, np.float64) - z).astype(np.float32)
    f = c.call("cast", c.operand(v), "float32")
    if c.is_known(zp):
        z = np.asarray(zp, np.float32)
        if not z.any():
            return f
        z = c.operand(z.reshape(zp_shape) if zp_shape is not None else z, "float32")
    else:
        z = c.call("cast", c.operand(zp), "float32")
        if zp_shape is not None:
            z = c.call("reshape", z, list(zp_shape))
    return c.call("sub", f, z)


def _f32(c, v):
    """Float value ``v`` as a float32 operand."""
    return c.operand(np.asarray(v, np.float32), "float32") if c.is_known(v) else c.operand(v, "float32")


def _scalar(c, n, v, what: str) -> None:
    """A scale that must be per tensor here (ONNX also allows one per row of A, which ORT's CPU
    kernels refuse too): NotSupported otherwise."""
    s = c.shape(v)
    if s not in ((), (1,)):
        raise Unsupported(f"{n.op} with a {what} of shape {list(s)} (per-tensor scales only)")


def _scalar_or(c, n, v, what: str, sizes: tuple) -> None:
    """A scale's shape must be [] / [1] (per tensor) or one of the per-channel ``sizes``."""
    s = c.shape(v)
    if s not in ((), (1,)) and s not in [(k,) for k in sizes]:
        raise DataError(f"argument {what!r}: expected a scalar or a 1-D tensor of "
                        f"{' or '.join(str(k) for k in sizes)} elements, got shape {list(s)}")


# ---------------------------------------------------------------- DynamicQuantizeLinear
def dynamic_quantize(c, v):
    """ONNX Runtime's DynamicQuantizeLinear of float operand ``v``: ``(y uint8, scale float32
    [], zero point uint8 [])``, computed in float32 as ORT's CPU kernel does."""
    v = c.operand(v, "float32")
    lo = c.call("min", c.call("reduce_min", v), c.scalar(0, "float32"))
    hi = c.call("max", c.call("reduce_max", v), c.scalar(0, "float32"))
    span = c.call("sub", hi, lo)
    scale = c.call("where", c.call("equal", span, c.scalar(0, "float32")), c.scalar(1, "float32"),
                   c.call("div", span, c.scalar(255, "float32")))
    zf = c.call("round_even", c.call("clamp", c.call("neg", c.call("div", lo, scale)), min_value=0.0,
                                      max_value=255.0))
    zp = c.call("cast", zf, "uint8")
    ones = [1] * len(c.shape(v))
    # saturate(round_even(x / scale) + zero_point) as a fused element-wise chain: what WebNN's
    # quantize_linear computes, and ddddocr's common_old.onnx ran 10-11% faster this way
    q = c.call("clamp", c.call("add", c.call("round_even", c.call("div", v, c.call("reshape", scale, ones))),
                               c.call("reshape", zf, ones)), min_value=0.0, max_value=255.0)
    return c.call("cast", q, "uint8"), scale, zp


@_h("DynamicQuantizeLinear", to="reduce_min/reduce_max (range widened to 0), scale (max - min) / 255 and "
                                "zero point round_even(clamp(-min / scale)) as ONNX Runtime, then "
                                "saturate(round_even(x / scale) + zero point) element-wise, cast to uint8; in float32")
def _dynamic_quantize_linear(c, n, x):
    if c.wdtype(x[0]) not in ("float32", "float16"):
        raise Unsupported(f"DynamicQuantizeLinear of type {c.wdtype(x[0])} (expected float)")
    y, scale, zp = dynamic_quantize(c, x[0])
    return [y, c.operand(scale, c.dtype), zp]


# ---------------------------------------------------------------- ConvInteger, MatMulInteger
def _conv_centred(c, n, xv, xzp, w, wzp, what=("x", "x_zero_point", "w", "w_zero_point")):
    """``x - x_zp`` and ``w - w_zp`` (per tensor, or per output channel for the weight) as float32."""
    xt, wt = _qtype(c, n, xv, what[0]), _qtype(c, n, w, what[2])
    M = c.shape(w)[0]
    xzp = _zp_array(c, n, xzp, what[1], xt, [(), (1,)])
    wzp = _zp_array(c, n, wzp, what[3], wt, [(), (1,), (M,)])
    wshape = (M,) + (1,) * (len(c.shape(w)) - 1) if c.shape(wzp) == (M,) else None
    return _centred(c, xv, xzp), _centred(c, w, wzp, wshape)


@_h("ConvInteger", to="conv2d in float32 of (x - x_zero_point) and (w - w_zero_point) (exact integer sums "
                      "below 2^24), cast to int32; w_zero_point per tensor or per output channel")
def _conv_integer(c, n, x):
    xf, wf = _conv_centred(c, n, x[0], _arg(x, 2), x[1], _arg(x, 3))
    return c.call("cast", c.operand(_conv(c, n, [xf, wf]), "float32"), "int32")


def _matmul_centred(c, n, a, azp, b, bzp, names=("A", "a_zero_point", "B", "b_zero_point")):
    """``a - a_zp`` and ``b - b_zp`` as float32; a_zero_point per tensor or per row (``[M]``,
    ``[..., M, 1]``), b_zero_point per tensor or per column (``[N]``, ``[..., 1, N]``)."""
    at, bt = _qtype(c, n, a, names[0]), _qtype(c, n, b, names[2])
    sa, sb = c.shape(a), c.shape(b)
    if len(sa) < 1 or len(sb) < 2:
        raise Unsupported(f"{n.op} with a {len(sa)}-D A or a {len(sb)}-D B (expected 1-D or more / 2-D or more)")
    M, N = (sa[-2] if len(sa) > 1 else 1), sb[-1]
    a_rows = [(M,)] if len(sa) == 2 else ([(*sa[:-1], 1)] if len(sa) > 2 else [])
    azp = _zp_array(c, n, azp, names[1], at, [(), (1,), *a_rows])
    bzp = _zp_array(c, n, bzp, names[3], bt, [(), (1,), (N,), (*sb[:-2], 1, N)])
    ashape = (M, 1) if len(sa) == 2 and c.shape(azp) == (M,) and M != 1 else None
    return _centred(c, a, azp, ashape), _centred(c, b, bzp)


@_h("MatMulInteger", to="matmul in float32 of (A - a_zero_point) and (B - b_zero_point) (exact integer sums "
                        "below 2^24), cast to int32; zero points per tensor, per row of A, per column of B")
def _matmul_integer(c, n, x):
    af, bf = _matmul_centred(c, n, x[0], _arg(x, 2), x[1], _arg(x, 3))
    return c.call("cast", _matmul_nd(c, c.operand(af, "float32"), c.operand(bf, "float32")), "int32")


# ---------------------------------------------------------------- QLinearConv, QLinearMatMul
def _requantize(c, n, acc, multiplier, yzp, channel_shape, what="y_zero_point"):
    """``saturate(round_even(acc * multiplier) + y_zero_point)``: the multiplier float32
    (known, per tensor or per channel along ``channel_shape``), the zero point per tensor."""
    m = np.asarray(multiplier, np.float32)
    m = m.reshape(channel_shape) if m.size > 1 else m.reshape(())
    t = c.call("mul", acc, c.operand(m, "float32"))
    ones = [1] * len(c.shape(acc))
    if yzp is None:
        z = c.operand(np.zeros(ones, np.uint8))
    else:
        _qtype(c, n, yzp, what)
        if c.shape(yzp) not in ((), (1,)):
            raise Unsupported(f"{n.op} with a {what} of shape {list(c.shape(yzp))} (per-tensor only)")
        z = c.operand(np.asarray(yzp).reshape(ones)) if c.is_known(yzp) else c.call("reshape", yzp, ones)
    return c.call("quantize_linear", t, c.operand(np.ones(ones, np.float32), "float32"), z)


def _multiplier(c, n, a_scale, b_scale, y_scale, sizes, names):
    """ORT's requantization multiplier ``a_scale * b_scale[i] / y_scale`` in float32 (known scales)."""
    _scalar(c, n, a_scale, names[0])
    _scalar_or(c, n, b_scale, names[1], sizes)
    _scalar(c, n, y_scale, names[2])
    a = np.float32(np.asarray(c.known(a_scale, f"{n.op}'s {names[0]}"), np.float32).reshape(-1)[0])
    b = np.asarray(c.known(b_scale, f"{n.op}'s {names[1]}"), np.float32).reshape(-1)
    y = np.float32(np.asarray(c.known(y_scale, f"{n.op}'s {names[2]}"), np.float32).reshape(-1)[0])
    return (a * b) / y


@_h("QLinearConv", to="ConvInteger's exact conv2d (+ the int32 bias), times x_scale * w_scale / y_scale "
                      "(float32, per tensor or per output channel), then quantize_linear with y_zero_point")
def _qlinear_conv(c, n, x):
    names = ("x", "x_zero_point", "w", "w_zero_point")
    xf, wf = _conv_centred(c, n, x[0], x[2], x[3], x[5], names)
    M = c.shape(x[3])[0]
    bias = _arg(x, 8)
    if bias is not None:
        b = np.asarray(c.known(bias, "QLinearConv's bias B"))
        if b.dtype != np.int32 or b.shape != (M,):
            raise DataError(f"argument 'B': expected int32 of shape [{M}], got {b.dtype.name} of shape "
                            f"{list(b.shape)}")
        bias = b.astype(np.float32)
    acc = c.operand(_conv(c, n, [xf, wf, bias]), "float32")
    mult = _multiplier(c, n, x[1], x[4], x[6], (M,), ("x_scale", "w_scale", "y_scale"))
    shape = [1, M] + [1] * (len(c.shape(acc)) - 2)
    return _requantize(c, n, acc, mult, _arg(x, 7), shape)


@_h("QLinearMatMul", to="MatMulInteger's exact matmul, times a_scale * b_scale / y_scale (float32, per tensor "
                        "or per column), then quantize_linear with y_zero_point")
def _qlinear_matmul(c, n, x):
    af, bf = _matmul_centred(c, n, x[0], x[2], x[3], x[5])
    acc = _matmul_nd(c, c.operand(af, "float32"), c.operand(bf, "float32"))
    N = c.shape(x[3])[-1]
    mult = _multiplier(c, n, x[1], x[4], x[6], (N,), ("a_scale", "b_scale", "y_scale"))
    return _requantize(c, n, acc, mult, _arg(x, 7), [N])


# ---------------------------------------------------------------- com.microsoft
def _to_float(c, n, acc, a_scale, b_scale, bias, N):
    """``acc * (a_scale * b_scale) + bias`` in float32, then the model's float type."""
    _scalar_or(c, n, b_scale, "b_scale", (N,))
    if c.is_known(a_scale) and c.is_known(b_scale):
        s = c.operand(np.asarray(a_scale, np.float32).reshape(()) * np.asarray(b_scale, np.float32).reshape(-1),
                      "float32")
    else:
        bs = c.call("reshape", _f32(c, b_scale), [c.shape(b_scale)[0]] if len(c.shape(b_scale)) == 1 else [])
        s = c.call("mul", c.call("reshape", _f32(c, a_scale), []), bs)
    out = c.call("mul", acc, s)
    if bias is not None:
        out = c.call("add", out, _f32(c, bias))
    return c.operand(out, c.dtype)


@_h("DynamicQuantizeMatMul", to="DynamicQuantizeLinear of A, MatMulInteger's exact matmul, times a_scale * b_scale "
                                "(+ bias)", domain=MS)
def _dynamic_quantize_matmul(c, n, x):
    if c.wdtype(x[0]) not in ("float32", "float16"):
        raise Unsupported(f"DynamicQuantizeMatMul's A of type {c.wdtype(x[0])} (expected float)")
    aq, a_scale, azp = dynamic_quantize(c, x[0])
    af, bf = _matmul_centred(c, n, aq, azp, x[1], _arg(x, 3))
    acc = _matmul_nd(c, c.operand(af, "float32"), c.operand(bf, "float32"))
    return _to_float(c, n, acc, a_scale, x[2], _arg(x, 4), c.shape(x[1])[-1])


@_h("MatMulIntegerToFloat", to="MatMulInteger's exact matmul, times a_scale * b_scale (+ bias)", domain=MS)
def _matmul_integer_to_float(c, n, x):
    af, bf = _matmul_centred(c, n, x[0], _arg(x, 4), x[1], _arg(x, 5))
    acc = _matmul_nd(c, c.operand(af, "float32"), c.operand(bf, "float32"))
    _scalar(c, n, x[2], "a_scale")
    return _to_float(c, n, acc, x[2], x[3], _arg(x, 6), c.shape(x[1])[-1])


def _lstm_weight(c, n, q, scale, zp, what: str, hidden: int):
    """A DynamicQuantizeLSTM weight ``[D, rows, 4H]`` (int8/uint8; scale and zero point per
    direction ``[D]`` or per column ``[D, 4H]``): ``(q - zp)`` as float64 ``[D, rows, 4H]`` and
    the float32 scale as ``[D, 1, 1]`` or ``[D, 1, 4H]``."""
    q = np.asarray(c.known(q, f"DynamicQuantizeLSTM's {what}"))
    if q.dtype not in (np.int8, np.uint8) or q.ndim != 3 or q.shape[2] != 4 * hidden:
        raise DataError(f"argument {what!r}: expected int8 or uint8 of shape [num_directions, rows, "
                        f"{4 * hidden}], got {q.dtype.name} of shape {list(q.shape)}")
    D = q.shape[0]
    s = np.asarray(c.known(scale, f"DynamicQuantizeLSTM's {what}_scale"), np.float32)
    z = np.zeros((D,), q.dtype) if zp is None else np.asarray(c.known(zp, f"DynamicQuantizeLSTM's {what}_zero_point"))
    for name, v in ((f"{what}_scale", s), (f"{what}_zero_point", z)):
        if v.shape not in ((D,), (D, 4 * hidden)):
            raise DataError(f"argument {name!r}: expected shape [{D}] or [{D}, {4 * hidden}], got {list(v.shape)}")
    if z.dtype != q.dtype:
        raise DataError(f"argument '{what}_zero_point': expected type {q.dtype.name} (the weight's), got "
                        f"{z.dtype.name}")
    centred = q.astype(np.float64) - z.astype(np.float64).reshape(D, 1, -1)
    return centred, s.reshape(D, 1, -1)


def _lstm_emulated(c, n, x, w, ws, r, rs, hidden):
    """ORT's quantized LSTM written out per time step, all directions at once: X quantized
    once (one scale), its exact products with W times ``x_scale * w_scale``; each step the
    hidden state quantized per direction (DynamicQuantizeLinear's rule), its exact products
    with R times ``h_scale * r_scale`` added; then the bias (``Wb + Rb``), the gates
    (sigmoid i, o, f; tanh g) and ``c = f * c + i * g``, ``h = o * tanh(c)``, as ONNX's LSTM."""
    f32 = "float32"
    v = c.operand(x[0], f32)
    T, B, I = c.shape(v)
    D, H = w.shape[0], hidden
    reverse = n.attr("direction", "forward") == "reverse"
    rev = c.operand(np.arange(T - 1, -1, -1, dtype=np.int32))
    xq, sx, zx = dynamic_quantize(c, v)
    xc = c.call("sub", c.call("cast", xq, f32), c.call("cast", zx, f32))                  # [T, B, I]
    dirs = [c.call("gather", xc, rev, axis=0) if (reverse or d == 1) else xc for d in range(D)]
    xs = c.call("reshape", c.call("concat", [c.call("reshape", t, [1, T * B, I]) for t in dirs], 0)
                if D > 1 else dirs[0], [D, T * B, I])
    proj = c.call("matmul", xs, c.operand(w.astype(np.float32), f32))                     # [D, T*B, 4H]
    proj = c.call("reshape", c.call("mul", proj, c.call("mul", c.call("reshape", sx, [1, 1, 1]), c.operand(ws, f32))),
                  [D, T, B, 4 * H])
    bias = None
    if len(x) > 3 and x[3] is not None:
        b = np.asarray(c.known(x[3], "DynamicQuantizeLSTM's B"), np.float32).reshape(D, 8 * H)
        bias = c.operand((b[:, :4 * H] + b[:, 4 * H:]).reshape(D, 1, 4 * H), f32)

    def state(i):
        if len(x) > i and x[i] is not None:
            return c.operand(x[i], f32)
        return c.operand(np.zeros((D, B, H), np.float32), f32)

    h, cell = state(5), state(6)
    rc = c.operand(r.astype(np.float32), f32)
    rsc = c.operand(rs, f32)
    zero, one, top = c.scalar(0, f32), c.scalar(1, f32), c.scalar(255, f32)
    hs = []
    for t in range(T):
        lo = c.call("min", c.call("reduce_min", h, axes=[1, 2], keep_dimensions=True), zero)    # [D, 1, 1]
        hi = c.call("max", c.call("reduce_max", h, axes=[1, 2], keep_dimensions=True), zero)
        span = c.call("sub", hi, lo)
        sh = c.call("where", c.call("equal", span, zero), one, c.call("div", span, top))
        zh = c.call("round_even", c.call("clamp", c.call("neg", c.call("div", lo, sh)), min_value=0.0, max_value=255.0))
        # q - zp with q = saturate(round_even(h / scale) + zp): integers, exact in float32
        hc = c.call("sub", c.call("clamp", c.call("add", c.call("round_even", c.call("div", h, sh)), zh),
                                  min_value=0.0, max_value=255.0), zh)                         # [D, B, H]
        rec = c.call("mul", c.call("matmul", hc, rc), c.call("mul", sh, rsc))                  # [D, B, 4H]
        g = c.call("add", c.call("reshape", c.call("slice", proj, [0, t, 0, 0], [D, 1, B, 4 * H]), [D, B, 4 * H]), rec)
        if bias is not None:
            g = c.call("add", g, bias)
        gi, go, gf, gc = (c.call("slice", g, [0, 0, k * H], [D, B, H]) for k in range(4))
        cell = c.call("add", c.call("mul", c.call("sigmoid", gf), cell),
                      c.call("mul", c.call("sigmoid", gi), c.call("tanh", gc)))
        h = c.call("mul", c.call("sigmoid", go), c.call("tanh", cell))
        hs.append(c.call("reshape", h, [1, D, B, H]))
    seq = None
    if len(n.outputs) > 0 and n.outputs[0] and n.outputs[0] in c.used:
        seq = c.call("concat", hs, 0) if T > 1 else hs[0]                                      # [T, D, B, H] by step
        if D > 1:
            seq = c.call("concat", [c.call("slice", seq, [0, 0, 0, 0], [T, 1, B, H]),
                                    c.call("gather", c.call("slice", seq, [0, 1, 0, 0], [T, 1, B, H]), rev, axis=0)], 1)
        elif reverse:
            seq = c.call("gather", seq, rev, axis=0)
    return [seq, h, cell]


#: The most time steps a DynamicQuantizeLSTM is written out for (ORT's per-step quantization).
QLSTM_MAX_STEPS = 512


@_h("DynamicQuantizeLSTM", to="ORT's computation written out per time step (X and each step's hidden state "
                              "quantized as DynamicQuantizeLinear, exact integer products, the gates in float32); "
                              "with sequence_lens, peepholes, clip, input_forget, other activations or more than "
                              "512 steps: lstm with the weights dequantized and X quantized as ORT (hidden state "
                              "float32)", domain=MS)
def _dynamic_quantize_lstm(c, n, x):
    hidden = int(n.attr("hidden_size"))
    w, ws = _lstm_weight(c, n, x[1], _arg(x, 8), _arg(x, 9), "W", hidden)
    r, rs = _lstm_weight(c, n, x[2], _arg(x, 10), _arg(x, 11), "R", hidden)
    if c.wdtype(x[0]) not in ("float32", "float16"):
        raise Unsupported(f"DynamicQuantizeLSTM's X of type {c.wdtype(x[0])} (expected float)")
    plain = (_arg(x, 4) is None and _arg(x, 7) is None and n.attr("clip") is None
             and not int(n.attr("input_forget", 0)) and int(n.attr("layout", 0)) == 0
             and (n.attr("activations") is None
                  or list(n.attr("activations")) == ["Sigmoid", "Tanh", "Tanh"] * w.shape[0])
             and c.shape(x[0])[0] <= QLSTM_MAX_STEPS)
    if plain:
        outs = _lstm_emulated(c, n, x, w, ws, r, rs, hidden)
        return [None if o is None else c.operand(o, c.dtype) for o in outs]
    # the float fallback: weights dequantized ((q - zp) * scale, rounded once), X quantized as ORT
    wf = np.ascontiguousarray((w * ws.astype(np.float64)).astype(np.float32).transpose(0, 2, 1))
    rf = np.ascontiguousarray((r * rs.astype(np.float64)).astype(np.float32).transpose(0, 2, 1))
    xq, scale, zp = dynamic_quantize(c, x[0])
    ones = [1] * len(c.shape(x[0]))
    xd = c.call("dequantize_linear", xq, c.call("reshape", scale, ones), c.call("reshape", zp, ones))
    return _lstm(c, n, [c.operand(xd, c.dtype), wf, rf, *x[3:8]])
