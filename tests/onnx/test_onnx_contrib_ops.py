"""com.microsoft operators (and ai.onnx's RotaryEmbedding) against ONNX Runtime's CPU provider.

Each test writes a small graph with ``onnx.helper``, runs it with webnn_gpu (float32) and with
ONNX Runtime 1.32 (``CPUExecutionProvider``), and compares every output:
``max |webnn - ort| <= 1e-3 * max |ort|``.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from webnn_gpu import onnx as wonnx
from webnn_gpu.errors import NotSupportedError

ort = pytest.importorskip("onnxruntime")

F = TensorProto.FLOAT
MS = "com.microsoft"


def _model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(MS, 1)])


def _vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def _compare(ctx, model, feed, rows=None):
    """Run ``model`` on both engines; compare each output within 1e-3 of its magnitude.
    ``rows``: output name -> index expression selecting the entries ORT defines."""
    ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in model.graph.output]
    want = dict(zip(names, ref.run(None, feed)))
    loaded = wonnx.load(model, ctx)
    got = loaded.compute({k: v for k, v in feed.items() if k in loaded.inputs})  # inputs the graph uses
    for name in names:
        w, g = want[name], got[name]
        assert g.shape == w.shape, (name, g.shape, w.shape)
        if rows and name in rows:
            w, g = w[rows[name]], g[rows[name]]
        err = float(np.max(np.abs(g.astype(np.float64) - w)))
        assert err <= 1e-3 * float(np.max(np.abs(w))), (name, err, float(np.max(np.abs(w))))


def _rope_caches(rng, max_len, half):
    angles = rng.uniform(0, 2 * np.pi, (max_len, half))
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


def _gqa(inputs, attrs, shapes, inits, out_shapes):
    names = ["query", "key", "value", "past_key", "past_value", "seqlens_k", "total_sequence_length",
             "cos_cache", "sin_cache", "position_ids", "attention_bias", "head_sink"]
    ins = [nm if nm in inputs else "" for nm in names]
    while not ins[-1]:
        ins.pop()
    node = helper.make_node("GroupQueryAttention", ins, ["out", "present_key", "present_value"], domain=MS, **attrs)
    graph_inputs = [_vi(nm, TensorProto.INT32 if nm == "seqlens_k" else F, shapes[nm])
                    for nm in names if nm in inputs and nm not in {t.name for t in inits}]
    outputs = [_vi(nm, F, s) for nm, s in zip(["out", "present_key", "present_value"], out_shapes)]
    return _model([node], graph_inputs, outputs, inits)


def test_group_query_attention_prompt_with_rotary(ctx):
    """First prompt (S == total_sequence_length), no past, 4 query heads over 2 kv heads, rotary."""
    rng = np.random.default_rng(1)
    B, S, N, kvN, H = 2, 4, 4, 2, 16
    cos, sin = _rope_caches(rng, 16, H // 2)
    inits = [numpy_helper.from_array(np.array(S, np.int32), "total_sequence_length"),
             numpy_helper.from_array(cos, "cos_cache"), numpy_helper.from_array(sin, "sin_cache")]
    shapes = {"query": [B, S, N * H], "key": [B, S, kvN * H], "value": [B, S, kvN * H], "seqlens_k": [B]}
    m = _gqa(["query", "key", "value", "seqlens_k", "total_sequence_length", "cos_cache", "sin_cache"],
             dict(num_heads=N, kv_num_heads=kvN, do_rotary=1), shapes, inits,
             [[B, S, N * H], [B, kvN, S, H], [B, kvN, S, H]])
    feed = {nm: rng.standard_normal(s).astype(np.float32) for nm, s in shapes.items() if nm != "seqlens_k"}
    feed["seqlens_k"] = np.full(B, S - 1, np.int32)
    _compare(ctx, m, feed)


def test_group_query_attention_decode_with_cache_window_and_softcap(ctx):
    """One new token per batch entry with different cache fills (seqlens_k run-time), a local
    window, softcap and per-head sinks; present rows after each entry's length are zero as in ORT."""
    rng = np.random.default_rng(2)
    B, S, N, kvN, H, P, total = 2, 1, 4, 1, 16, 6, 7
    inits = [numpy_helper.from_array(np.array(total, np.int32), "total_sequence_length"),
             numpy_helper.from_array(rng.standard_normal(N).astype(np.float32), "head_sink")]
    shapes = {"query": [B, S, N * H], "key": [B, S, kvN * H], "value": [B, S, kvN * H],
              "past_key": [B, kvN, P, H], "past_value": [B, kvN, P, H], "seqlens_k": [B]}
    m = _gqa(["query", "key", "value", "past_key", "past_value", "seqlens_k", "total_sequence_length",
              "head_sink"], dict(num_heads=N, kv_num_heads=kvN, local_window_size=3, softcap=1.5), shapes, inits,
             [[B, S, N * H], [B, kvN, total, H], [B, kvN, total, H]])
    feed = {nm: rng.standard_normal(s).astype(np.float32) for nm, s in shapes.items() if nm != "seqlens_k"}
    feed["seqlens_k"] = np.array([4, 6], np.int32)
    _compare(ctx, m, feed)


def test_group_query_attention_subsequent_prompt_packed(ctx):
    """A 3-token chunk after 5 cached rows (packed QKV, interleaved rotary, attention_bias, smooth
    softmax); ONNX Runtime takes a chunk after a cache for batch 1 only."""
    rng = np.random.default_rng(3)
    B, S, N, kvN, H, P, total = 1, 3, 2, 2, 16, 5, 8
    cos, sin = _rope_caches(rng, 16, H // 2)
    inits = [numpy_helper.from_array(np.array(total, np.int32), "total_sequence_length"),
             numpy_helper.from_array(cos, "cos_cache"), numpy_helper.from_array(sin, "sin_cache")]
    shapes = {"query": [B, S, (N + 2 * kvN) * H], "past_key": [B, kvN, P, H], "past_value": [B, kvN, P, H],
              "seqlens_k": [B], "attention_bias": [1, N, S, total]}
    m = _gqa(["query", "past_key", "past_value", "seqlens_k", "total_sequence_length", "cos_cache", "sin_cache",
              "attention_bias"],
             dict(num_heads=N, kv_num_heads=kvN, do_rotary=1, rotary_interleaved=1, smooth_softmax=1), shapes, inits,
             [[B, S, N * H], [B, kvN, total, H], [B, kvN, total, H]])
    feed = {nm: rng.standard_normal(s).astype(np.float32) for nm, s in shapes.items() if nm != "seqlens_k"}
    feed["seqlens_k"] = np.array([7], np.int32)
    _compare(ctx, m, feed)


def test_multi_head_attention_masks_bias_and_past(ctx):
    """Bias, a 0/1 key_padding_mask over past + new keys, attention_bias, past key/value, causal."""
    rng = np.random.default_rng(4)
    B, S, N, H, P = 2, 3, 2, 4, 2
    D, T = N * H, P + S
    nodes = [helper.make_node("MultiHeadAttention", ["q", "k", "v", "bias", "mask", "ab", "pk", "pv"],
                              ["out", "present_key", "present_value"], domain=MS, num_heads=N, unidirectional=1)]
    inits = [numpy_helper.from_array(rng.standard_normal(3 * D).astype(np.float32), "bias")]
    shapes = {"q": [B, S, D], "k": [B, S, D], "v": [B, S, D], "ab": [B, N, S, T], "pk": [B, N, P, H],
              "pv": [B, N, P, H]}
    ins = [_vi(nm, F, s) for nm, s in shapes.items()] + [_vi("mask", TensorProto.INT32, [B, T])]
    outs = [_vi("out", F, [B, S, D]), _vi("present_key", F, [B, N, T, H]), _vi("present_value", F, [B, N, T, H])]
    m = _model(nodes, ins, outs, inits)
    feed = {nm: rng.standard_normal(s).astype(np.float32) for nm, s in shapes.items()}
    feed["mask"] = np.array([[1, 1, 1, 1, 1], [0, 1, 1, 1, 1]], np.int32)
    _compare(ctx, m, feed)


def test_multi_head_attention_cross_with_lengths(ctx):
    """Cross attention (5 keys, value width != query width, custom scale) with per-batch key
    lengths, and BNSH key/value used as they are."""
    rng = np.random.default_rng(5)
    B, S, L, N, H, Hv = 2, 3, 5, 2, 4, 3
    nodes = [helper.make_node("MultiHeadAttention", ["q", "k", "v", "", "lens"], ["o1"], domain=MS, num_heads=N,
                              scale=0.3),
             helper.make_node("MultiHeadAttention", ["q", "k4", "v4"], ["o2"], domain=MS, num_heads=N)]
    shapes = {"q": [B, S, N * H], "k": [B, L, N * H], "v": [B, L, N * Hv], "k4": [B, N, L, H], "v4": [B, N, L, H]}
    ins = [_vi(nm, F, s) for nm, s in shapes.items()] + [_vi("lens", TensorProto.INT32, [B])]
    m = _model(nodes, ins, [_vi("o1", F, [B, S, N * Hv]), _vi("o2", F, [B, S, N * H])])
    feed = {nm: rng.standard_normal(s).astype(np.float32) for nm, s in shapes.items()}
    feed["lens"] = np.array([5, 2], np.int32)
    _compare(ctx, m, feed)


def test_matmul_nbits_rotary_and_rms_norms(ctx):
    """MatMulNBits (4 and 8 bits, zero points, bias), ai.onnx RotaryEmbedding (partial, interleaved),
    SkipSimplifiedLayerNormalization (with its sum output) and SimplifiedLayerNormalization."""
    rng = np.random.default_rng(6)
    M, K, N, block = 3, 40, 6, 16
    nblocks = -(-K // block)
    inits, nodes = [], []
    for bits in (4, 8):
        q = rng.integers(0, 2 ** bits, (N, nblocks * block))
        per = 8 // bits
        packed = sum(q[:, i::per] << (bits * i) for i in range(per)).astype(np.uint8).reshape(N, nblocks, -1)
        zp = rng.integers(0, 2 ** bits, (N, nblocks))
        zp_rows = -(-nblocks // per)
        zp = np.pad(zp, ((0, 0), (0, zp_rows * per - nblocks)))
        zp_packed = sum(zp[:, i::per] << (bits * i) for i in range(per)).astype(np.uint8)
        inits += [numpy_helper.from_array(packed, f"w{bits}"),
                  numpy_helper.from_array(rng.uniform(0.01, 0.1, N * nblocks).astype(np.float32), f"s{bits}"),
                  numpy_helper.from_array(zp_packed.reshape(-1), f"z{bits}")]
        nodes.append(helper.make_node("MatMulNBits", ["a", f"w{bits}", f"s{bits}", f"z{bits}", "", "nb"],
                                      [f"y{bits}"], domain=MS, K=K, N=N, bits=bits, block_size=block))
    inits.append(numpy_helper.from_array(rng.standard_normal(N).astype(np.float32), "nb"))
    B, Hd, S, D = 2, 2, 3, 8
    cos, sin = _rope_caches(rng, 10, 2)
    inits += [numpy_helper.from_array(cos, "cos"), numpy_helper.from_array(sin, "sin"),
              numpy_helper.from_array(np.array([[1, 2, 3], [4, 5, 9]], np.int64), "pos"),
              numpy_helper.from_array(rng.standard_normal(D).astype(np.float32), "gamma"),
              numpy_helper.from_array(rng.standard_normal(D).astype(np.float32), "beta")]
    nodes += [helper.make_node("RotaryEmbedding", ["x", "cos", "sin", "pos"], ["rope"], interleaved=1,
                               rotary_embedding_dim=4),
              helper.make_node("SkipSimplifiedLayerNormalization", ["x3", "skip", "gamma", "beta"],
                               ["ssln", "", "", "sum"], domain=MS, epsilon=1e-5),
              helper.make_node("SimplifiedLayerNormalization", ["x", "gamma"], ["sln"], axis=-1, epsilon=1e-5)]
    shapes = {"a": [M, K], "x": [B, Hd, S, D], "x3": [B, S, D], "skip": [B, S, D]}
    outs = [_vi("y4", F, [M, N]), _vi("y8", F, [M, N]), _vi("rope", F, [B, Hd, S, D]),
            _vi("ssln", F, [B, S, D]), _vi("sum", F, [B, S, D]), _vi("sln", F, [B, Hd, S, D])]
    m = _model(nodes, [_vi(nm, F, s) for nm, s in shapes.items()], outs, inits, opset=23)
    feed = {nm: rng.standard_normal(s).astype(np.float32) for nm, s in shapes.items()}
    _compare(ctx, m, feed)


def test_unsupported_attention_features_listed_at_once(ctx):
    """Features the importer does not express are refused together, one line per node."""
    B, S, N, H = 1, 2, 2, 4
    nodes = [helper.make_node("GroupQueryAttention", ["q", "k", "v", "", "", "sl", "tot", "", "", "pos"], ["o1"],
                              domain=MS, num_heads=N, kv_num_heads=N, name="gqa_pos"),
             helper.make_node("MultiHeadAttention", ["q", "k", "v"], ["o2", "", "", "qk"], domain=MS, num_heads=N,
                              name="mha_qk")]
    inits = [numpy_helper.from_array(np.array(S, np.int32), "tot"),
             numpy_helper.from_array(np.zeros((B, S), np.int64), "pos")]
    ins = [_vi(nm, F, [B, S, N * H]) for nm in "qkv"] + [_vi("sl", TensorProto.INT32, [B])]
    m = _model(nodes, ins, [_vi("o1", F, None), _vi("o2", F, None), _vi("qk", F, None)], inits)
    with pytest.raises(NotSupportedError) as exc:
        wonnx.load(m, ctx)
    text = str(exc.value)
    assert "2 node(s)" in text
    assert "'gqa_pos' (com.microsoft.GroupQueryAttention, opset 1): GroupQueryAttention with position_ids" in text
    assert "'mha_qk' (com.microsoft.MultiHeadAttention, opset 1): MultiHeadAttention's qk output" in text
