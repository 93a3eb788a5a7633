"""Operators PyTorch's ONNX exporters write for sequence and audio models (``nn.RNN`` as ONNX
``RNN``, ``Tensor.topk`` as ``TopK``, ``torch.stft`` as ``STFT``) against ONNX Runtime.

Each test writes the exporter's node with ``onnx.helper`` (no torch here), runs it with
webnn_gpu and with ONNX Runtime's CPU provider, and compares every output:
``max |webnn - ort| <= 1e-4 * max |ort|`` in float32 (integer outputs exactly), plus the
near misses each mapping refuses.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import webnn_gpu as webnn
from webnn_gpu import onnx as wonnx

ort = pytest.importorskip("onnxruntime")

F = TensorProto.FLOAT


def _model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def _check(ctx, m, feeds, tol=1e-4, dtype="float32", **load):
    """Run ``m`` with webnn_gpu and ONNX Runtime on ``feeds``; compare every output."""
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    got = wonnx.load(m, ctx, dtype=dtype, **load).compute(feeds)
    for o, w in zip(m.graph.output, want):
        g = got[o.name]
        assert g.shape == w.shape, o.name
        if w.dtype.kind in "iub" or tol == 0:
            np.testing.assert_array_equal(g, w, err_msg=o.name)
        else:
            err = np.abs(g.astype(np.float64) - w).max() / max(np.abs(w).max(), 1e-30)
            assert err <= tol, f"{o.name}: {err:.2e}"
    return got


# ---------------------------------------------------------------- RNN
@pytest.mark.parametrize("direction, layout, with_h0, acts", [
    ("forward", 0, False, None),                     # nn.RNN(tanh), the TorchScript exporter's default
    ("bidirectional", 0, True, None),
    ("reverse", 1, True, ["Relu"]),                  # nn.RNN(nonlinearity="relu"), batch-major
    ("bidirectional", 1, False, ["Sigmoid", "Tanh"]),
])
def test_rnn_matches_onnxruntime(ctx, direction, layout, with_h0, acts):
    rng = np.random.default_rng(0)
    T, B, I, H = 5, 2, 3, 4
    D = 2 if direction == "bidirectional" else 1
    xs = [T, B, I] if not layout else [B, T, I]
    hs = [D, B, H] if not layout else [B, D, H]
    inits = [numpy_helper.from_array((rng.standard_normal((D, H, I)) * 0.5).astype(np.float32), "W"),
             numpy_helper.from_array((rng.standard_normal((D, H, H)) * 0.5).astype(np.float32), "R"),
             numpy_helper.from_array(rng.standard_normal((D, 2 * H)).astype(np.float32), "B")]
    attrs = {"hidden_size": H, "direction": direction, "layout": layout}
    if acts:
        attrs["activations"] = acts
    node = helper.make_node("RNN", ["x", "W", "R", "B", "", "h0" if with_h0 else ""], ["y", "y_h"], **attrs)
    ins = [_vi("x", F, xs)] + ([_vi("h0", F, hs)] if with_h0 else [])
    m = _model([node], ins, [_vi("y", F, None), _vi("y_h", F, None)], inits, opset=14)
    feeds = {"x": rng.standard_normal(xs).astype(np.float32)}
    if with_h0:
        feeds["h0"] = rng.standard_normal(hs).astype(np.float32)
    # known weights and one activation: a gru in plain-RNN form, every step in one sequence launch;
    # an activation per direction: written out per step
    templates = [s.template for s in wonnx.load(m, ctx).graph._steps if hasattr(s, "template")]
    assert ("recurrent/sequence.wgsl" in templates) == (len(set(acts or ["Tanh"])) == 1)
    if not layout:
        _check(ctx, m, feeds)
        return
    # ONNX Runtime refuses layout=1: NumPy in float64, time-major, transposed around it
    w, r, b = (numpy_helper.to_array(t).astype(np.float64) for t in inits)
    f = {"Tanh": np.tanh, "Relu": lambda v: np.maximum(v, 0), "Sigmoid": lambda v: 1 / (1 + np.exp(-v))}
    x = feeds["x"].astype(np.float64).transpose(1, 0, 2)
    h0 = feeds["h0"].astype(np.float64).transpose(1, 0, 2) if with_h0 else np.zeros((D, B, H))
    y, y_h = np.zeros((T, D, B, H)), np.zeros((D, B, H))
    for d in range(D):
        h = h0[d]
        for t in (range(T - 1, -1, -1) if direction == "reverse" or d == 1 else range(T)):
            h = f[acts[d]](x[t] @ w[d].T + h @ r[d].T + b[d, :H] + b[d, H:])
            y[t, d] = h
        y_h[d] = h
    got = wonnx.load(m, ctx).compute(feeds)
    for name, want in (("y", y.transpose(2, 0, 1, 3)), ("y_h", y_h.transpose(1, 0, 2))):
        np.testing.assert_allclose(got[name], want, atol=1e-5 * np.abs(want).max(), rtol=0, err_msg=name)


def test_rnn_run_time_weights_and_only_the_final_state(ctx):
    """Weights as graph inputs (split per direction at run time); Y unused."""
    rng = np.random.default_rng(1)
    T, B, I, H, D = 4, 1, 3, 5, 2
    node = helper.make_node("RNN", ["x", "W", "R", "B"], ["", "y_h"], hidden_size=H, direction="bidirectional")
    m = _model([node], [_vi("x", F, [T, B, I]), _vi("W", F, [D, H, I]), _vi("R", F, [D, H, H]),
                        _vi("B", F, [D, 2 * H])], [_vi("y_h", F, None)], opset=14)
    feeds = {"x": rng.standard_normal((T, B, I)), "W": rng.standard_normal((D, H, I)) * 0.5,
             "R": rng.standard_normal((D, H, H)) * 0.5, "B": rng.standard_normal((D, 2 * H))}
    _check(ctx, m, {k: v.astype(np.float32) for k, v in feeds.items()})


@pytest.mark.parametrize("attrs, match", [
    ({"activations": ["LeakyRelu"]}, "RNN activations"),
    ({"clip": 1.0}, "clip"),
])
def test_rnn_refuses_what_it_cannot_express(ctx, attrs, match):
    rng = np.random.default_rng(2)
    inits = [numpy_helper.from_array(rng.standard_normal((1, 4, 3)).astype(np.float32), "W"),
             numpy_helper.from_array(rng.standard_normal((1, 4, 4)).astype(np.float32), "R")]
    node = helper.make_node("RNN", ["x", "W", "R"], ["y"], hidden_size=4, name="rnn", **attrs)
    m = _model([node], [_vi("x", F, [2, 1, 3])], [_vi("y", F, None)], inits, opset=14)
    with pytest.raises(webnn.NotSupportedError, match=rf"'rnn' \(RNN, opset 14\).*{match}"):
        wonnx.load(m, ctx)


# ---------------------------------------------------------------- TopK
def _topk_case(axis, k, largest, kind, seed, inf_share, span):
    """A TopK (sorted, the default) of a [3, 6, 7] tensor and its input: float32 (``ties``: whole
    numbers; ``inf``: ``inf_share`` of the values -inf) or int64 in [-span, span)."""
    rng = np.random.default_rng(seed)
    shape = [3, 6, 7]
    if kind == "int64":
        x, elem = rng.integers(-span, span, shape).astype(np.int64), TensorProto.INT64
    else:
        x, elem = rng.standard_normal(shape).astype(np.float32), F
        if kind == "ties":
            x = np.round(x).astype(np.float32)
        if kind == "inf":
            x[rng.random(shape) < inf_share] = -np.inf
    node = helper.make_node("TopK", ["x", "k"], ["values", "indices"], axis=axis, largest=largest)
    m = _model([node], [_vi("x", elem, shape)], [_vi("values", elem, None), _vi("indices", TensorProto.INT64, None)],
               [numpy_helper.from_array(np.array([k], np.int64), "k")])
    return m, {"x": x}


@pytest.mark.parametrize("axis, k, largest, kind", [
    (-1, 3, 1, "float"),       # logits.topk(3)
    (1, 4, 0, "float"),        # smallest along a middle axis
    (-1, 5, 1, "ties"),        # repeated values: indices in order, as ONNX
    (-1, 4, 1, "inf"),         # -inf entries (masked logits) tie with the taken ones' mask
    (0, 2, 0, "int64"),
    (-1, 1, 1, "float"),
])
def test_topk_matches_onnxruntime(ctx, axis, k, largest, kind):
    m, feeds = _topk_case(axis, k, largest, kind, seed=3, inf_share=0.6, span=5)
    got = _check(ctx, m, feeds, tol=0)
    assert got["indices"].dtype == np.int64


@pytest.mark.parametrize("attrs, k, match", [
    ({}, 9, "K = 9 on an axis of size 7"),
    ({}, None, "K must be known at load time"),
])
def test_topk_refuses_what_it_cannot_express(ctx, attrs, k, match):
    node = helper.make_node("TopK", ["x", "k"], ["values", "indices"], name="top", **attrs)
    inits = [numpy_helper.from_array(np.array([k], np.int64), "k")] if k is not None else []
    ins = [_vi("x", F, [2, 7])] + ([_vi("k", TensorProto.INT64, [1])] if k is None else [])
    m = _model([node], ins, [_vi("values", F, None), _vi("indices", TensorProto.INT64, None)], inits)
    with pytest.raises(webnn.NotSupportedError, match=rf"'top' \(TopK, opset 11\).*{match}"):
        wonnx.load(m, ctx)


# ---------------------------------------------------------------- STFT
@pytest.mark.parametrize("rank, window, onesided", [
    (2, "hann", 1),            # torch.stft(wav, n_fft, hop, window=hann_window(n_fft), center=False)
    (3, None, 1),              # [batch, length, 1] and only frame_length: a rectangular window
    (3, "hann", 0),
])
def test_stft_matches_onnxruntime(ctx, rank, window, onesided):
    rng = np.random.default_rng(4)
    B, L, N, step = 2, 200, 32, 12
    shape = [B, L] if rank == 2 else [B, L, 1]
    inits = [numpy_helper.from_array(np.array(step, np.int64), "step"),
             numpy_helper.from_array(np.array(N, np.int64), "size")]
    if window:
        hann = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(N) / N)
        inits.append(numpy_helper.from_array(hann.astype(np.float32), "win"))
    node = helper.make_node("STFT", ["x", "step", "win" if window else "", "size"], ["y"], onesided=onesided)
    m = _model([node], [_vi("x", F, shape)], [_vi("y", F, None)], inits)
    _check(ctx, m, {"x": rng.standard_normal(shape).astype(np.float32)}, tol=1e-5)


@pytest.mark.parametrize("shape, known_step, match", [
    ([1, 64, 2], True, "complex signal"),
    ([1, 64, 1], False, "frame_step must be known at load time"),
])
def test_stft_refuses_what_it_cannot_express(ctx, shape, known_step, match):
    inits = [numpy_helper.from_array(np.array(16, np.int64), "size")]
    ins = [_vi("x", F, shape)]
    if known_step:
        inits.append(numpy_helper.from_array(np.array(8, np.int64), "step"))
    else:
        ins.append(_vi("step", TensorProto.INT64, []))
    node = helper.make_node("STFT", ["x", "step", "", "size"], ["y"], name="stft")
    m = _model([node], ins, [_vi("y", F, None)], inits)
    with pytest.raises(webnn.NotSupportedError, match=rf"'stft' \(STFT, opset 17\).*{match}"):
        wonnx.load(m, ctx)


# ---------------------------------------------------------------- PyTorch's GRUCell
def _gru_cell_torch(variant, B=2, I=5, H=4):
    """``nn.GRUCell`` as both PyTorch exporters write it: Gemm(x, W_ih, b_ih, transB=1) and
    Gemm(h, W_hh, b_hh, transB=1), each Split in three (r, z, n), r = Sigmoid(h_r + x_r),
    z = Sigmoid(h_z + x_z), n = Tanh(x_n + h_n * r), h' = (h - n) * z + n. ``variant``:
    "run_time_h" (h a graph input), "zero_h" (the first step: h a zero constant written twice,
    one for the Gemm, one for the Sub); near misses "h_differs" (the Sub's h a different
    constant), "n_read" (n also an output), "alpha" (the recurrent Gemm scaled by alpha = 0.5)."""
    rng = np.random.default_rng(5)
    known_h = variant in ("zero_h", "h_differs")
    inits = {"w_ih": rng.standard_normal((3 * H, I)) * 0.5, "b_ih": rng.standard_normal(3 * H),
             "w_hh": rng.standard_normal((3 * H, H)) * 0.5, "b_hh": rng.standard_normal(3 * H),
             "sizes": np.array([H, H, H])}
    if known_h:
        inits["h"] = np.zeros((B, H))
        inits["h_sub"] = np.full((B, H), 0.5) if variant == "h_differs" else np.zeros((B, H))
    inits = [numpy_helper.from_array(v.astype(np.int64 if "sizes" in k else np.float32), k) for k, v in inits.items()]
    nodes = [helper.make_node("Gemm", ["x", "w_ih", "b_ih"], ["gx"], transB=1),
             helper.make_node("Split", ["gx", "sizes"], ["x_r", "x_z", "x_n"], axis=1),
             helper.make_node("Gemm", ["h", "w_hh", "b_hh"], ["gh"], transB=1,
                              alpha=0.5 if variant == "alpha" else 1.0),
             helper.make_node("Split", ["gh", "sizes"], ["h_r", "h_z", "h_n"], axis=1),
             helper.make_node("Add", ["h_r", "x_r"], ["pr"]), helper.make_node("Sigmoid", ["pr"], ["r"]),
             helper.make_node("Add", ["h_z", "x_z"], ["pz"]), helper.make_node("Sigmoid", ["pz"], ["z"]),
             helper.make_node("Mul", ["h_n", "r"], ["rh"]), helper.make_node("Add", ["x_n", "rh"], ["pn"]),
             helper.make_node("Tanh", ["pn"], ["n"]),
             helper.make_node("Sub", ["h_sub" if known_h else "h", "n"], ["d"]),
             helper.make_node("Mul", ["d", "z"], ["dz"]), helper.make_node("Add", ["dz", "n"], ["h2"])]
    ins = [_vi("x", F, [B, I])] + ([] if known_h else [_vi("h", F, [B, H])])
    outs = [_vi("h2", F, None)] + ([_vi("n", F, None)] if variant == "n_read" else [])
    feeds = {"x": rng.standard_normal((B, I)).astype(np.float32)}
    if not known_h:
        feeds["h"] = rng.standard_normal((B, H)).astype(np.float32)
    return _model(nodes, ins, outs, inits), feeds


@pytest.mark.parametrize("variant, fires", [("run_time_h", True), ("zero_h", True), ("h_differs", False),
                                            ("n_read", False), ("alpha", False)])
def test_torch_gru_cell_is_one_recurrent_kernel(ctx, variant, fires):
    m, feeds = _gru_cell_torch(variant)
    loaded = wonnx.load(m, ctx)
    templates = [s.template for s in loaded.graph._steps if hasattr(s, "template")]
    assert any(t.startswith("recurrent/") for t in templates) == fires, templates
    _check(ctx, m, feeds, tol=1e-5)


# ---------------------------------------------------------------- attention's keys as a view
def _attention_torch(variant, B=1, T=8, H=2, D=4):
    """Scaled dot-product attention as PyTorch's exporters write it: q, k, v cut from one
    ``[B, T, 3 H D]`` projection, heads split by Reshape + Transpose, the keys transposed
    through ``Reshape [B H, T, D] -> Transpose -> Reshape [B, H, D, T]``, q and k^T each
    scaled by ``1 / sqrt(sqrt(D))``, then MatMul, Softmax, MatMul. ``variant``: "sdpa" (as
    above), "div" (k^T divided by the factor), near misses "vector" (k^T scaled per key: not a
    scalar), "mixed" (a chain that is no single transpose: ``[B, T, H D] -> [B, T H, D]
    -> swap -> [B, H, D, T]`` viewed as if it were), "read_twice" (the scaled keys also an
    output)."""
    rng = np.random.default_rng(6)
    f = 1 / np.sqrt(np.sqrt(D))
    inits = {"heads": np.array([B, T, H, D]), "bh": np.array([B * H, T, D]), "bhdt": np.array([B, H, D, T]),
             "f": np.array([1 / f if variant == "div" else f], np.float32),
             "fv": (1 + rng.random(T)).astype(np.float32)}
    inits = [numpy_helper.from_array(v.astype(np.int64) if v.dtype.kind == "i" else v, k) for k, v in inits.items()]
    mul_k = (helper.make_node("Div", ["kt", "f"], ["ks"]) if variant == "div" else
             helper.make_node("Mul", ["kt", "fv" if variant == "vector" else "f"], ["ks"]))
    if variant == "mixed":
        keys = [helper.make_node("Reshape", ["k", "bh_mixed"], ["k3"]),
                helper.make_node("Transpose", ["k3"], ["k3t"], perm=[0, 2, 1]),
                helper.make_node("Reshape", ["k3t", "bhdt"], ["kt"])]
        inits.append(numpy_helper.from_array(np.array([B, T * H, D], np.int64), "bh_mixed"))
    else:
        keys = [helper.make_node("Reshape", ["k", "heads"], ["k4"]),
                helper.make_node("Transpose", ["k4"], ["kh"], perm=[0, 2, 1, 3]),
                helper.make_node("Reshape", ["kh", "bh"], ["k3"]),
                helper.make_node("Transpose", ["k3"], ["k3t"], perm=[0, 2, 1]),
                helper.make_node("Reshape", ["k3t", "bhdt"], ["kt"])]
    nodes = [helper.make_node("Split", ["qkv"], ["q", "k", "v"], axis=2, num_outputs=3),
             helper.make_node("Reshape", ["q", "heads"], ["q4"]),
             helper.make_node("Transpose", ["q4"], ["qh"], perm=[0, 2, 1, 3]),
             helper.make_node("Reshape", ["v", "heads"], ["v4"]),
             helper.make_node("Transpose", ["v4"], ["vh"], perm=[0, 2, 1, 3]),
             *keys,
             helper.make_node("Mul", ["qh", "f"], ["qs"]), mul_k,
             helper.make_node("MatMul", ["qs", "ks"], ["s"]),
             helper.make_node("Softmax", ["s"], ["p"], axis=-1),
             helper.make_node("MatMul", ["p", "vh"], ["o"])]
    outs = [_vi("o", F, None)] + ([_vi("ks", F, None)] if variant == "read_twice" else [])
    m = _model(nodes, [_vi("qkv", F, [B, T, 3 * H * D])], outs, inits, opset=18)
    return m, {"qkv": rng.standard_normal((B, T, 3 * H * D)).astype(np.float32)}


@pytest.mark.parametrize("variant, fused", [("sdpa", True), ("div", True), ("vector", False), ("mixed", False),
                                            ("read_twice", True)])
def test_attention_keys_moved_and_scaled_are_one_view(ctx, variant, fused):
    """The keys' movements and scale become one reshape, scale and transpose, which the
    compiler's attention kernel reads in place: one ``matmul/attention.wgsl`` launch. Values
    as ONNX Runtime's within 1e-5 (near misses too, the rule not firing for "vector" and
    "mixed"; "read_twice" keeps the scaled keys for their other reader)."""
    m, feeds = _attention_torch(variant)
    loaded = wonnx.load(m, ctx)
    templates = [s.template for s in loaded.graph._steps if hasattr(s, "template")]
    assert ("matmul/attention.wgsl" in templates) == fused, templates
    _check(ctx, m, feeds, tol=1e-5)


# ---------------------------------------------------------------- Resize of other ranks
@pytest.mark.parametrize("shape, scales, mode, coord", [
    ([2, 3, 10], [1, 1, 2], "nearest", "asymmetric"),            # F.interpolate(x, 2) on [N, C, L], TorchScript
    ([2, 3, 10], [1, 1, 2], "linear", "half_pixel"),              # mode="linear" (align_corners=False)
    ([2, 3, 10], [1, 1, 3], "linear", "pytorch_half_pixel"),
    ([1, 2, 3, 4, 5], [1, 1, 1, 2, 2], "nearest", "half_pixel"),  # the last two axes of a volume
    ([3, 5], [1, 2], "linear", "half_pixel"),
    ([2, 1, 10], [1, 1, 2], "linear", "pytorch_half_pixel"),     # a mono signal: the pair's partner has size 1
    ([2, 1, 10], [1, 1, 2], "nearest", "pytorch_half_pixel"),
    ([2, 4, 1, 10], [1, 1, 1, 3], "linear", "pytorch_half_pixel"),
])
def test_resize_of_other_ranks_matches_onnxruntime(ctx, shape, scales, mode, coord):
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode=mode, coordinate_transformation_mode=coord,
                            nearest_mode="floor" if coord == "asymmetric" else "round_prefer_floor")
    m = _model([node], [_vi("x", F, shape)], [_vi("y", F, None)],
               [numpy_helper.from_array(np.array(scales, np.float32), "scales")])
    x = np.random.default_rng(7).standard_normal(shape).astype(np.float32)
    _check(ctx, m, {"x": x}, tol=1e-6)


def test_resize_of_three_axes_matches_onnxruntime(ctx):
    """A volume resized along three axes (no resample2d: per-axis gathers of the known taps)."""
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="nearest", name="up3")
    m = _model([node], [_vi("x", F, [1, 2, 3, 4, 5])], [_vi("y", F, None)],
               [numpy_helper.from_array(np.array([1, 1, 2, 2, 2], np.float32), "scales")])
    x = np.random.default_rng(7).standard_normal([1, 2, 3, 4, 5]).astype(np.float32)
    _check(ctx, m, {"x": x}, tol=0)


@pytest.mark.parametrize("axis, k, largest, kind", [
    (-1, 7, 1, "float"),       # argsort(descending=True): K = n
    (1, 6, 0, "ties"),         # smallest, repeated values, a middle axis
    (-1, 5, 1, "inf"),
    (0, 3, 1, "int64"),        # 64-bit integers: selection rounds of WebNN operators
])
def test_topk_argsort_matches_onnxruntime(ctx, axis, k, largest, kind):
    m, feeds = _topk_case(axis, k, largest, kind, seed=8, inf_share=0.4, span=3)
    kernels = wonnx.load(m, ctx).graph.kernel_count
    # one top-k kernel, the index cast and, off the last axis, two transposes each way
    assert (kernels <= 5) if kind != "int64" else (kernels >= 4 * k), kernels
    _check(ctx, m, feeds, tol=0)


# ---------------------------------------------------------------- large hidden sizes
@pytest.mark.parametrize("op, direction, extra", [
    ("LSTM", "bidirectional", "peephole"),   # ddddocr's OCR model: a bidirectional LSTM of 512 units
    ("LSTM", "reverse", ""),
    ("GRU", "bidirectional", "linear_before_reset"),
    ("GRU", "forward", ""),
    ("RNN", "bidirectional", ""),            # a gru in plain-RNN form: its new gate alone
])
def test_recurrent_large_hidden_matches_onnxruntime(ctx, op, direction, extra):
    """An ONNX LSTM / GRU whose recurrent product is past the sequence kernel's limit (hidden
    160): the projection as one gemm, then a step kernel per time step (two for a GRU with
    linear_before_reset 0; an RNN as a gru in plain-RNN form, its new gate alone). T, B and, in the bidirectional cases, the directions above 1: a
    projection read in the other layout gives other values there (one direction's layouts
    are the same)."""
    rng = np.random.default_rng(3)
    T, B, I, H = 4, 2, 24, 160
    G, D = {"LSTM": 4, "GRU": 3, "RNN": 1}[op], (2 if direction == "bidirectional" else 1)
    inits = [numpy_helper.from_array((rng.standard_normal((D, G * H, I)) * 0.2).astype(np.float32), "W"),
             numpy_helper.from_array((rng.standard_normal((D, G * H, H)) * 0.08).astype(np.float32), "R"),
             numpy_helper.from_array((rng.standard_normal((D, 2 * G * H)) * 0.5).astype(np.float32), "B")]
    ins = ["x", "W", "R", "B", "", "h0"]
    if op == "LSTM":
        ins.append("c0")
    if extra == "peephole":
        peep = (rng.standard_normal((D, 3 * H)) * 0.5).astype(np.float32)
        peep[:, H:2 * H] = 0  # i, o, f: WebNN's lstm has no output-gate peephole on the new cell state
        inits.append(numpy_helper.from_array(peep, "P"))
        ins.append("P")
    attrs = {"linear_before_reset": 1} if extra == "linear_before_reset" else {}
    outs = ["y", "y_h"] + (["y_c"] if op == "LSTM" else [])
    node = helper.make_node(op, ins, outs, hidden_size=H, direction=direction, **attrs)
    graph_ins = [_vi("x", F, [T, B, I]), _vi("h0", F, [D, B, H])] + ([_vi("c0", F, [D, B, H])] if op == "LSTM" else [])
    m = _model([node], graph_ins, [_vi(o, F, None) for o in outs], inits, opset=14)
    feeds = {"x": rng.standard_normal((T, B, I)).astype(np.float32),
             "h0": (rng.standard_normal((D, B, H)) * 0.5).astype(np.float32)}
    if op == "LSTM":
        feeds["c0"] = (rng.standard_normal((D, B, H)) * 0.5).astype(np.float32)
    templates = [s.template for s in wonnx.load(m, ctx).graph._steps if hasattr(s, "template")]
    assert "matmul/tile.wgsl" in templates and "recurrent/project.wgsl" not in templates
    step4 = [s for s in wonnx.load(m, ctx).graph._steps if getattr(s, "template", "") == "recurrent/step4.wgsl"]
    assert len(step4) == T * (2 if op == "GRU" and not attrs else 1)
    if op == "RNN":  # the new gate's projection alone: [T * B, D * H]
        assert step4[0].values[1].shape == (T * B, D * H)
    _check(ctx, m, feeds, tol=1e-5)


@pytest.mark.parametrize("H", [148, 150])
def test_rnn_as_gru_only_where_its_new_gate_runs_alone(ctx, H):
    """An RNN past the sequence kernel's size is a gru only where the engine's step4 kernel
    runs its new gate alone (hidden % 4 == 0: 148); at 150 (a near miss) the scalar GRU step
    would run three gates, so it stays written out per step. Both against ONNX Runtime."""
    rng = np.random.default_rng(4)
    T, B, I = 3, 2, 8
    inits = [numpy_helper.from_array((rng.standard_normal((2, H, I)) * 0.3).astype(np.float32), "W"),
             numpy_helper.from_array((rng.standard_normal((2, H, H)) * 0.08).astype(np.float32), "R"),
             numpy_helper.from_array((rng.standard_normal((2, 2 * H)) * 0.5).astype(np.float32), "B")]
    node = helper.make_node("RNN", ["x", "W", "R", "B"], ["y", "y_h"], hidden_size=H, direction="bidirectional")
    m = _model([node], [_vi("x", F, [T, B, I])], [_vi("y", F, None), _vi("y_h", F, None)], inits, opset=14)
    templates = [s.template for s in wonnx.load(m, ctx).graph._steps if hasattr(s, "template")]
    assert templates.count("recurrent/step4.wgsl") == (T if H % 4 == 0 else 0)
    assert not any(t.startswith("recurrent/") for t in templates) or H % 4 == 0
    _check(ctx, m, {"x": rng.standard_normal((T, B, I)).astype(np.float32)}, tol=1e-5)


# ---------------------------------------------------------------- packed sequences
@pytest.mark.parametrize("op, direction, lens_known", [
    ("LSTM", "bidirectional", False),     # pack_padded_sequence around nn.LSTM(bidirectional=True)
    ("GRU", "bidirectional", False),
    ("LSTM", "reverse", True),            # lengths known at load time, shorter than the sequence
    ("GRU", "forward", True),
])
def test_recurrent_with_sequence_lengths_matches_onnxruntime(ctx, op, direction, lens_known):
    rng = np.random.default_rng(9)
    T, B, I, H = 6, 3, 4, 5
    G, D = (4 if op == "LSTM" else 3), (2 if direction == "bidirectional" else 1)
    lens = np.array([6, 2, 4], np.int32)
    inits = [numpy_helper.from_array((rng.standard_normal((D, G * H, I)) * 0.5).astype(np.float32), "W"),
             numpy_helper.from_array((rng.standard_normal((D, G * H, H)) * 0.5).astype(np.float32), "R"),
             numpy_helper.from_array(rng.standard_normal((D, 2 * G * H)).astype(np.float32), "B")]
    if lens_known:
        inits.append(numpy_helper.from_array(lens, "lens"))
    attrs = {"linear_before_reset": 1} if op == "GRU" else {}
    ins = ["x", "W", "R", "B", "lens", "h0"] + (["c0"] if op == "LSTM" else [])
    node = helper.make_node(op, ins, ["y", "y_h"], hidden_size=H, direction=direction, **attrs)
    graph_ins = [_vi("x", F, [T, B, I]), _vi("h0", F, [D, B, H])] + ([_vi("c0", F, [D, B, H])] if op == "LSTM" else [])
    if not lens_known:
        graph_ins.append(_vi("lens", TensorProto.INT32, [B]))
    m = _model([node], graph_ins, [_vi("y", F, None), _vi("y_h", F, None)], inits, opset=14)
    feeds = {"x": rng.standard_normal((T, B, I)).astype(np.float32),
             "h0": rng.standard_normal((D, B, H)).astype(np.float32)}
    if op == "LSTM":
        feeds["c0"] = rng.standard_normal((D, B, H)).astype(np.float32)
    if not lens_known:
        feeds["lens"] = lens
    _check(ctx, m, feeds, tol=1e-5)


@pytest.mark.parametrize("op, direction, lens, layout", [
    ("GRU", "bidirectional", [6, 0, 4], 0),   # a run-time length of 0: Y zeros, Y_h zeros (as ORT)
    ("LSTM", "reverse", [0, 3, 6], 0),
    ("LSTM", "forward", [6, 2, 4], 1),        # batch first with lengths (the LSTM's unread Y_c: None)
    ("LSTM", "bidirectional", [5, 2, 4], 1),
    ("GRU", "reverse", [6, 2, 4], 1),
])
def test_sequence_lengths_zero_and_batch_first(ctx, op, direction, lens, layout):
    """Run-time lengths with a 0, and layout=1 (which ORT refuses: its reference is the layout=0
    node on the transposed input, its outputs transposed back), within 1e-5 of ORT."""
    rng = np.random.default_rng(11)
    T, B, I, H = 6, 3, 4, 5
    G, D = (4 if op == "LSTM" else 3), (2 if direction == "bidirectional" else 1)
    inits = [numpy_helper.from_array((rng.standard_normal((D, G * H, I)) * 0.5).astype(np.float32), "W"),
             numpy_helper.from_array((rng.standard_normal((D, G * H, H)) * 0.5).astype(np.float32), "R")]

    def model(lay):
        node = helper.make_node(op, ["x", "W", "R", "", "lens"], ["y", "y_h"], hidden_size=H, direction=direction,
                                layout=lay)
        x_shape = [B, T, I] if lay else [T, B, I]
        return _model([node], [_vi("x", F, x_shape), _vi("lens", TensorProto.INT32, [B])],
                      [_vi("y", F, None), _vi("y_h", F, None)], inits, opset=14)

    x = rng.standard_normal((T, B, I)).astype(np.float32)
    lens = np.array(lens, np.int32)
    y, y_h = ort.InferenceSession(model(0).SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": x, "lens": lens})
    if layout:
        got = wonnx.load(model(1), ctx).compute({"x": np.ascontiguousarray(x.transpose(1, 0, 2)), "lens": lens})
        y, y_h = y.transpose(2, 0, 1, 3), y_h.transpose(1, 0, 2)
    else:
        got = wonnx.load(model(0), ctx).compute({"x": x, "lens": lens})
    for name, want in (("y", y), ("y_h", y_h)):
        assert got[name].shape == want.shape, name
        err = np.abs(got[name].astype(np.float64) - want).max() / np.abs(want).max()
        assert err <= 1e-5, f"{name}: {err:.2e}"


def test_lstm_final_cell_state_with_sequence_lengths_is_refused(ctx):
    rng = np.random.default_rng(10)
    inits = [numpy_helper.from_array(rng.standard_normal((1, 8, 3)).astype(np.float32), "W"),
             numpy_helper.from_array(rng.standard_normal((1, 8, 2)).astype(np.float32), "R")]
    node = helper.make_node("LSTM", ["x", "W", "R", "", "lens"], ["y", "y_h", "y_c"], hidden_size=2, name="lstm")
    m = _model([node], [_vi("x", F, [4, 2, 3]), _vi("lens", TensorProto.INT32, [2])],
               [_vi("y", F, None), _vi("y_c", F, None)], inits, opset=14)
    with pytest.raises(webnn.NotSupportedError, match=r"'lstm' \(LSTM, opset 14\).*Y_c with sequence_lens"):
        wonnx.load(m, ctx)


def test_permutation_of_finds_one_transpose_or_none():
    """GPU-free: the permutation composing a chain of movements, where one exists."""
    from webnn_gpu.onnx.ops import _permutation_of

    a = np.arange(2 * 3 * 4).reshape(2, 3, 4)
    assert _permutation_of(a.transpose(2, 0, 1), (2, 3, 4)) == [2, 0, 1]
    assert _permutation_of(a, (2, 3, 4)) == [0, 1, 2]
    # [B, T, H, D] -> keys transposed [B, H, D, T] through a 3-D detour
    k = np.arange(1 * 8 * 4 * 2).reshape(8, 4, 2).transpose(1, 0, 2).reshape(4, 8, 2).transpose(0, 2, 1)
    assert _permutation_of(k, (8, 4, 2)) == [1, 2, 0]
    # a merge of two axes that are not adjacent in the source: no single transpose
    mixed = a.transpose(1, 0, 2).reshape(3, 8)
    assert _permutation_of(mixed, (2, 12)) is None
    assert _permutation_of(mixed.reshape(3, 2, 4), (2, 3, 4)) == [1, 0, 2]
    assert _permutation_of(a.reshape(6, 4), (2, 3, 4)) is None  # another rank
