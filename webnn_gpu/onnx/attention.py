"""Attention operators: ai.onnx Attention, com.microsoft GroupQueryAttention and MultiHeadAttention.

All are written with WebNN operators (reshape, transpose, matmul, softmax, where, concat,
scatter_nd):

* **Attention** (ai.onnx, opsets 23-25) follows ONNX's reference implementation: Q and K
  scaled by ``sqrt(scale)`` each, softcap, boolean or float ``attn_mask``, bottom-right
  ``is_causal``, windows, ``nonpad_kv_seqlen``, past/present key and value, the
  ``qk_matmul_output`` modes; a query row that attends no key gives zeros.
* **GroupQueryAttention** follows ONNX Runtime's CPU kernel: the new key/value rows are
  written into the present cache at ``past_b = seqlens_k[b] + 1 - S`` (0 for the first
  prompt, when ``S`` equals ``total_sequence_length``); cache rows before ``past_b`` come from
  ``past_key``/``past_value``, the rest are zero; query row ``s`` sees the keys
  ``j <= past_b + s`` (causal; with ``local_window_size`` only the last ``local_window_size``
  of them, as ONNX Runtime 1.32; with ``causal=0`` every key ``j < past_b + S``). Rotary
  embedding (``do_rotary``) is applied to the query and the new keys at positions
  ``past_b + s``. ``softcap``, ``smooth_softmax``, ``head_sink`` and ``attention_bias`` as
  ONNX Runtime.
* **MultiHeadAttention**: separate query, key and value (3-D, or 4-D BNSH key and value),
  bias, key_padding_mask (lengths or 0/1 of shape ``(B, T)`` or ``(B, S, T)``),
  attention_bias, past/present key and value, ``unidirectional``; masked scores get
  ``mask_filter_value`` added, as ONNX Runtime does.

``seqlens_k``, the masks and ``nonpad_kv_seqlen`` may be run-time inputs;
``total_sequence_length`` and every shape must be known when the model loads.
"""

from __future__ import annotations

import math

import numpy as np

from .convert import Unsupported
from .ops import MS, _h, _rotary

__all__: list[str] = []

_LOWEST = {"float32": float(np.finfo(np.float32).min), "float16": float(np.finfo(np.float16).min)}


def _arg(x, i):
    return x[i] if len(x) > i else None


def _used(c, n, i) -> bool:
    return len(n.outputs) > i and bool(n.outputs[i]) and n.outputs[i] in c.used


def _int32(c, values, shape):
    return c.operand(np.asarray(values, np.int32).reshape(shape))


def _heads_first(c, t, B, L, heads, size):
    """(B, L, heads * size) -> (B, heads, L, size)."""
    return c.call("transpose", c.call("reshape", t, [B, L, heads, size]), permutation=[0, 2, 1, 3])


def _repeat_heads(c, t, B, kv_heads, group, L, H):
    """(B, kv_heads, L, H) -> (B, kv_heads * group, L, H), each kv head used by ``group`` query heads."""
    if group == 1:
        return t
    t = c.call("expand", c.call("reshape", t, [B, kv_heads, 1, L, H]), [B, kv_heads, group, L, H])
    return c.call("reshape", t, [B, kv_heads * group, L, H])


def _attend(c, q, k, v, scale, dt, *, additive=None, bias=None, softcap=0.0, allowed=None, sink=None):
    """softmax(scale * q k^T [+ additive] [+ bias], softcap, masked, with a sink logit) v.

    q (B, N, S, H), k and v (B, N, T, H); ``allowed`` (uint8, broadcast to (B, N, S, T)):
    where 0 the score becomes the lowest float (weight 0); ``sink`` (B|1, N|1, S|1, 1): an
    extra logit in the softmax's denominator (smooth softmax, head sinks).
    """
    scores = c.call("matmul", q, c.call("transpose", k, permutation=[0, 1, 3, 2]))
    scores = c.call("mul", scores, c.scalar(scale, dt))
    if additive is not None:
        scores = c.call("add", scores, additive)
    if bias is not None:
        scores = c.call("add", scores, bias)
    if softcap > 0:
        scores = c.call("mul", c.call("tanh", c.call("div", scores, c.scalar(softcap, dt))), c.scalar(softcap, dt))
    if allowed is not None:
        scores = c.call("where", allowed, scores, c.scalar(_LOWEST[dt], dt))
    B, N, S, T = c.shape(scores)
    if sink is not None:
        scores = c.call("concat", [scores, c.call("expand", sink, [B, N, S, 1])], 3)
    probs = c.call("softmax", scores, 3)
    if sink is not None:
        probs = c.call("slice", probs, [0, 0, 0, 0], [B, N, S, T])
    return c.call("matmul", probs, v)


def _pad_seq(c, t, length):
    """Pad (B, N, L, H) with zero rows to ``length`` rows (axis 2)."""
    L = c.shape(t)[2]
    if L == length:
        return t
    return c.call("pad", t, [0, 0, 0, 0], [0, 0, length - L, 0])


_GQA_REFUSED = {12: "k_scale", 13: "v_scale", 14: "q_norm_weight", 15: "k_norm_weight", 16: "query_seqlens",
                9: "position_ids"}


@_h("GroupQueryAttention", domain=MS,
    to="reshape/transpose, scatter_nd into the present cache, rotary, matmul, causal/window mask, softmax, matmul")
def _group_query_attention(c, n, x):
    for i, what in _GQA_REFUSED.items():
        if _arg(x, i) is not None:
            raise Unsupported(f"GroupQueryAttention with {what}")
    if _used(c, n, 3) or int(n.attr("qk_output", 0)):
        raise Unsupported("GroupQueryAttention's output_qk")
    if int(n.attr("sliding_window_cache", 0)) or n.attr("kv_cache_bit_width") is not None or \
            n.attr("k_quant_type", "NONE") != "NONE" or n.attr("v_quant_type", "NONE") != "NONE":
        raise Unsupported("GroupQueryAttention with a quantized or sliding-window KV cache")
    q = c.operand(x[0])
    dt = q.data_type
    N, kvN = int(n.attr("num_heads")), int(n.attr("kv_num_heads"))
    if _rank(c, q) != 3:
        raise Unsupported(f"GroupQueryAttention with a query of rank {_rank(c, q)}")
    B, S, width = c.shape(q)
    if x[1] is None:  # packed QKV
        if x[2] is not None:
            raise Unsupported("GroupQueryAttention with a key but no value")
        H = width // (N + 2 * kvN)
        q, k, v = c.call("split", q, [N * H, kvN * H, kvN * H], axis=2)
    else:
        H = width // N
        k, v = c.operand(x[1], dt), c.operand(x[2], dt)
        if c.shape(k)[1] != S or c.shape(v)[1] != S:
            raise Unsupported("GroupQueryAttention with kv_sequence_length != sequence_length")
    total = int(np.asarray(c.known(x[6], "GroupQueryAttention's total_sequence_length")).reshape(-1)[0])
    past_k, past_v = _arg(x, 3), _arg(x, 4)
    if (past_k is None) != (past_v is None):
        raise Unsupported("GroupQueryAttention with only one of past_key and past_value")
    P = c.shape(past_k)[2] if past_k is not None else 0
    Lp = max(P, total)  # ONNX Runtime's present length
    first = S == total  # the first prompt: the cache starts empty
    # past_b: (B,) int32, rows already in the cache for each batch entry
    seqlens = c.operand(x[5], "int32")
    if first:
        past_b = _int32(c, np.zeros(B), [B])
    else:
        past_b = c.call("sub", seqlens, _int32(c, S - 1, []))
    past_b4 = c.call("reshape", past_b, [B, 1, 1, 1])

    if int(n.attr("do_rotary", 0)):
        cos, sin = _arg(x, 7), _arg(x, 8)
        if cos is None or sin is None:
            raise Unsupported("GroupQueryAttention do_rotary=1 without cos_cache and sin_cache")
        pos = c.call("add", c.call("reshape", past_b, [B, 1]), _int32(c, np.arange(S), [1, S]))
        rd = 2 * c.shape(cos)[-1]
        inter = bool(n.attr("rotary_interleaved", 0))
        q = _rotary(c, n, q, cos, sin, pos, inter, N, rd)
        k = _rotary(c, n, k, cos, sin, pos, inter, kvN, rd)

    qh = _heads_first(c, q, B, S, N, H)
    new_k, new_v = _heads_first(c, k, B, S, kvN, H), _heads_first(c, v, B, S, kvN, H)
    if first and past_k is None and Lp == S:
        present_k, present_v = new_k, new_v
    else:
        grid = np.stack(np.meshgrid(np.arange(B), np.arange(kvN), np.arange(S), indexing="ij"), axis=-1)
        offset = c.call("concat", [_int32(c, np.zeros((B, 2)), [B, 2]), c.call("reshape", past_b, [B, 1])], 1)
        indices = c.call("add", _int32(c, grid, [B, kvN, S, 3]), c.call("reshape", offset, [B, 1, 1, 3]))
        keep = c.call("lesser", _int32(c, np.arange(Lp), [1, 1, Lp, 1]), past_b4)  # (B, 1, Lp, 1)
        zero = c.scalar(0, dt)

        def present(past, new):
            if past is None:
                base = c.call("expand", zero, [B, kvN, Lp, H])
            else:
                base = c.call("where", keep, _pad_seq(c, c.operand(past, dt), Lp), zero)
            return c.call("scatter_nd", base, indices, new)

        present_k, present_v = present(past_k, new_k), present(past_v, new_v)

    G = N // kvN
    kk = _repeat_heads(c, present_k, B, kvN, G, Lp, H)
    vv = _repeat_heads(c, present_v, B, kvN, G, Lp, H)
    keys = _int32(c, np.arange(Lp), [1, 1, 1, Lp])
    qpos = c.call("add", past_b4, _int32(c, np.arange(S), [1, 1, S, 1]))  # (B, 1, S, 1)
    if int(n.attr("causal", 1)):
        allowed = c.call("lesser_or_equal", keys, qpos)
        lws = int(n.attr("local_window_size", -1))
        if lws > 0:
            allowed = c.call("logical_and", allowed,
                             c.call("greater_or_equal", keys, c.call("sub", qpos, _int32(c, lws - 1, []))))
    else:
        if int(n.attr("local_window_size", -1)) > 0:
            raise Unsupported("GroupQueryAttention with causal=0 and local_window_size")
        allowed = c.call("lesser", keys, c.call("add", past_b4, _int32(c, S, [])))
    bias = _arg(x, 10)
    if bias is not None:
        bias = c.operand(bias, dt)
        if c.shape(bias)[-1] != Lp:
            bias = _pad_seq(c, c.call("transpose", bias, permutation=[0, 1, 3, 2]), Lp)
            bias = c.call("transpose", bias, permutation=[0, 1, 3, 2])
    sink = None
    if _arg(x, 11) is not None:
        sink = c.call("reshape", c.operand(x[11], dt), [1, N, 1, 1])
    elif int(n.attr("smooth_softmax", -1)) == 1:
        sink = c.call("reshape", c.scalar(0, dt), [1, 1, 1, 1])
    scale = float(n.attr("scale", 0.0)) or 1.0 / math.sqrt(H)
    out = _attend(c, qh, kk, vv, scale, dt, bias=bias, softcap=float(n.attr("softcap", 0.0)), allowed=allowed,
                  sink=sink)
    out = c.call("reshape", c.call("transpose", out, permutation=[0, 2, 1, 3]), [B, S, N * H])
    return [out, present_k, present_v, None]


def _rank(c, v) -> int:
    return len(c.shape(v))


@_h("MultiHeadAttention", domain=MS,
    to="reshape/transpose, matmul, softmax, matmul; bias, key_padding_mask, attention_bias, past key/value")
def _multi_head_attention(c, n, x):
    if _arg(x, 8) is not None or _arg(x, 9) is not None:
        raise Unsupported("MultiHeadAttention with past_sequence_length or cache_indirection (buffer sharing)")
    if _used(c, n, 3):
        raise Unsupported("MultiHeadAttention's qk output")
    q = c.operand(x[0])
    dt = q.data_type
    N = int(n.attr("num_heads"))
    key, value, bias = _arg(x, 1), _arg(x, 2), _arg(x, 3)
    past_k, past_v = _arg(x, 6), _arg(x, 7)
    if (past_k is None) != (past_v is None):
        raise Unsupported("MultiHeadAttention with only one of past_key and past_value")
    if bias is not None:
        bias = np.asarray(c.known(bias, "MultiHeadAttention's bias")) if c.is_known(bias) else c.operand(bias, dt)
    rq = _rank(c, q)
    if rq != 3 or (key is not None and _rank(c, key) == 5):
        raise Unsupported("MultiHeadAttention with packed QKV or KV (ONNX Runtime's CPU provider refuses them too)")
    B, S, D = c.shape(q)
    if key is None or value is None:
        raise Unsupported("MultiHeadAttention without a key or a value")
    key, value = c.operand(key, dt), c.operand(value, dt)
    Dv = c.shape(value)[-1] * (N if _rank(c, value) == 4 else 1)
    H, Hv = D // N, Dv // N

    def add_bias(t, start, size):
        if bias is None:
            return t
        part = bias[start:start + size] if isinstance(bias, np.ndarray) else c.call("slice", bias, [start], [size])
        return c.call("add", t, c.operand(part, dt))

    q = add_bias(q, 0, D)
    qh = _heads_first(c, q, B, S, N, H)
    if _rank(c, key) == 4:  # BNSH key/value: used as they are (no bias, no past)
        if past_k is not None or _rank(c, value) != 4:
            raise Unsupported("MultiHeadAttention with a 4-D key and past_key, or a 3-D value")
        kh, vh = key, value
        if _used(c, n, 1) or _used(c, n, 2):
            raise Unsupported("MultiHeadAttention's present outputs with a 4-D key")
    else:
        L = c.shape(key)[1]
        kh = _heads_first(c, add_bias(key, D, D), B, L, N, H)
        vh = _heads_first(c, add_bias(value, 2 * D, Dv), B, L, N, Hv)
        if past_k is not None:
            kh = c.call("concat", [c.operand(past_k, dt), kh], 2)
            vh = c.call("concat", [c.operand(past_v, dt), vh], 2)
    T = c.shape(kh)[2]
    P = c.shape(past_k)[2] if past_k is not None else 0
    keys = _int32(c, np.arange(T), [1, 1, 1, T])
    allowed = None
    mask = _arg(x, 4)
    if mask is not None:
        ms = c.shape(mask)
        m = c.operand(mask, "int32")
        if len(ms) == 1 and ms[0] == B:  # actual key lengths
            allowed = c.call("lesser", keys, c.call("reshape", m, [B, 1, 1, 1]))
        elif len(ms) == 2 and ms == (B, T):
            allowed = c.call("not_equal", c.call("reshape", m, [B, 1, 1, T]), _int32(c, 0, []))
        elif len(ms) == 3 and ms == (B, S, T):
            allowed = c.call("not_equal", c.call("reshape", m, [B, 1, S, T]), _int32(c, 0, []))
        else:
            raise Unsupported(f"MultiHeadAttention key_padding_mask of shape {list(ms)}")
    if int(n.attr("unidirectional", 0)):
        causal = c.call("lesser_or_equal", keys, _int32(c, P + np.arange(S), [1, 1, S, 1]))
        allowed = causal if allowed is None else c.call("logical_and", allowed, causal)
    additive = None
    if allowed is not None:
        mfv = float(n.attr("mask_filter_value", -10000.0))
        additive = c.call("where", allowed, c.scalar(0, dt), c.scalar(mfv, dt))
    attn_bias = _arg(x, 5)
    scale = float(n.attr("scale", 0.0)) or 1.0 / math.sqrt(H)
    out = _attend(c, qh, kh, vh, scale, dt, additive=additive,
                  bias=c.operand(attn_bias, dt) if attn_bias is not None else None)
    out = c.call("reshape", c.call("transpose", out, permutation=[0, 2, 1, 3]), [B, S, N * Hv])
    return [out, kh, vh, None]


def _to_rank4(c, t):
    s = c.shape(t)
    return t if len(s) == 4 else c.call("reshape", t, [1] * (4 - len(s)) + list(s))


@_h("Attention", to="reshape/transpose, matmul, softcap, boolean/float/causal/padding masks, softmax, matmul "
                    "(rows with no key attended give zeros); past/present key and value through concat")
def _attention(c, n, x):
    """ai.onnx Attention (opset 23, 24): as ONNX's reference implementation."""
    q = c.operand(x[0])
    dt = q.data_type
    k, v = c.operand(x[1], dt), c.operand(x[2], dt)
    mask, past_k, past_v, nonpad = _arg(x, 3), _arg(x, 4), _arg(x, 5), _arg(x, 6)
    if (past_k is None) != (past_v is None):
        raise Unsupported("Attention with only one of past_key and past_value")
    if nonpad is not None and past_k is not None:
        raise Unsupported("Attention with nonpad_kv_seqlen and past_key")
    rank = _rank(c, q)
    B = c.shape(q)[0]
    if rank == 3:
        Nq, Nkv = int(n.attr("q_num_heads", 0)), int(n.attr("kv_num_heads", 0))
        if not Nq or not Nkv:
            raise Unsupported("Attention of 3-D inputs without q_num_heads and kv_num_heads")
        Sq, Skv = c.shape(q)[1], c.shape(k)[1]
        q = _heads_first(c, q, B, Sq, Nq, c.shape(q)[2] // Nq)
        k = _heads_first(c, k, B, Skv, Nkv, c.shape(k)[2] // Nkv)
        v = _heads_first(c, v, B, Skv, Nkv, c.shape(v)[2] // Nkv)
    elif rank != 4:
        raise Unsupported(f"Attention of rank {rank}")
    _, Nq, Sq, H = c.shape(q)
    Nkv = c.shape(k)[1]
    if past_k is not None:
        k = c.call("concat", [c.operand(past_k, dt), k], 2)
        v = c.call("concat", [c.operand(past_v, dt), v], 2)
    present_k, present_v = k, v
    T, Hv = c.shape(k)[2], c.shape(v)[3]
    if Nq != Nkv:
        if Nq % Nkv:
            raise Unsupported(f"Attention with {Nq} query heads over {Nkv} key heads")
        k = _repeat_heads(c, k, B, Nkv, Nq // Nkv, T, H)
        v = _repeat_heads(c, v, B, Nkv, Nq // Nkv, T, Hv)
    scale = n.attr("scale")
    scale = 1.0 / math.sqrt(H) if scale is None else float(scale)
    root = c.scalar(math.sqrt(scale), dt)  # Q and K each scaled by sqrt(scale), as the operator's definition
    s = c.call("matmul", c.call("mul", q, root), c.call("transpose", c.call("mul", k, root), permutation=[0, 1, 3, 2]))
    mode = int(n.attr("qk_matmul_output_mode", 0))
    qk_out = s
    softcap = float(n.attr("softcap", 0.0) or 0.0)
    if softcap > 0:
        s = c.call("mul", c.call("tanh", c.call("div", s, c.scalar(softcap, dt))), c.scalar(softcap, dt))
        if mode == 1:
            qk_out = s
    keys = _int32(c, np.arange(T), [1, 1, 1, T])
    allowed = None

    def both(a, b):
        return b if a is None else c.call("logical_and", a, b)

    if mask is not None:
        is_bool = (c.is_known(mask) and np.asarray(mask).dtype == np.bool_) or (
            not c.is_known(mask) and mask.data_type == "uint8")
        if c.is_known(mask) and not is_bool and np.isneginf(np.asarray(mask)).any():
            known = np.asarray(mask)
            allowed = both(allowed, _to_rank4(c, c.operand(~np.isneginf(known))))
            mask = np.where(np.isneginf(known), 0, known).astype(known.dtype)
        m = _to_rank4(c, c.operand(mask, "uint8" if is_bool else dt))
        width = c.shape(m)[3]
        if width < T:
            m = c.call("pad", m, [0, 0, 0, 0], [0, 0, 0, T - width])
            if not is_bool:
                allowed = both(allowed, c.operand((np.arange(T) < width).reshape(1, 1, 1, T)))
        if is_bool:
            allowed = both(allowed, m)
        else:
            s = c.call("add", s, m)
    # the query block's position: after the past cache, or nonpad_kv_seqlen - Sq per batch entry
    if nonpad is not None:
        offset = c.call("reshape", c.call("sub", c.operand(nonpad, "int32"), _int32(c, Sq, [])), [B, 1, 1, 1])
    else:
        offset = _int32(c, c.shape(past_k)[2] if past_k is not None else 0, [])
    qpos = c.call("add", _int32(c, np.arange(Sq), [1, 1, Sq, 1]), offset)
    if int(n.attr("is_causal", 0)):
        allowed = both(allowed, c.call("lesser_or_equal", keys, qpos))
    left, right = int(n.attr("left_window_size", -1)), int(n.attr("right_window_size", -1))
    if left >= 0 or right >= 0:  # opset 25: keys within [p - left, p + right] of the query's position p
        if left >= 0:
            allowed = both(allowed, c.call("greater_or_equal", keys, c.call("sub", qpos, _int32(c, left, []))))
        if right >= 0:
            allowed = both(allowed, c.call("lesser_or_equal", keys, c.call("add", qpos, _int32(c, right, []))))
    if nonpad is not None:
        allowed = both(allowed, c.call("lesser", keys, c.call("reshape", c.operand(nonpad, "int32"), [B, 1, 1, 1])))
    if mode == 2:
        qk_out = s if allowed is None else c.call("where", allowed, s, c.scalar(-np.inf, dt))
    if allowed is not None:
        s = c.call("where", allowed, s, c.scalar(_LOWEST[dt], dt))
    probs = c.call("softmax", s, 3)
    if allowed is not None:  # a row with no key attended gives zeros
        seen = c.call("reduce_max", c.call("cast", allowed, dt), axes=[3], keep_dimensions=True)
        probs = c.call("mul", probs, seen)
    if mode == 3:
        qk_out = probs
    out = c.call("matmul", probs, v)
    if rank == 3:
        out = c.call("reshape", c.call("transpose", out, permutation=[0, 2, 1, 3]), [B, Sq, Nq * Hv])
    if _used(c, n, 3) and c.shape(qk_out) != (B, Nq, Sq, T):
        qk_out = c.call("expand", qk_out, [B, Nq, Sq, T])
    return [out, present_k, present_v, qk_out if _used(c, n, 3) else None]
