"""The operator patterns of TensorFlow-converted Keras models (keras_patterns.py) against LiteRT.

Each model is written with our own flatbuffer writer (the CI machine has no TensorFlow)
and run by ``webnn.load`` on the GPU and by LiteRT's builtin kernels; outputs agree
within float32 tolerance relative to their magnitude. ``benchmarks/keras_zoo.py`` runs
the real converter's output.
"""

from __future__ import annotations

import numpy as np
import pytest

from keras_patterns import KERAS_CASES
from litert_reference import run_litert

import webnn_gpu as webnn
from webnn_gpu.errors import MLTypeError, NotSupportedError

#: float32 tolerance relative to max(1, the output's largest magnitude).
TOL = 1e-4


def _compare(case: str, got: dict[str, np.ndarray], refs: list[np.ndarray], names: list[str]) -> None:
    assert list(got) == names
    for name, ref in zip(names, refs):
        assert got[name].shape == ref.shape, f"{case} {name}: shape {got[name].shape} != LiteRT's {ref.shape}"
        err = float(np.abs(got[name].astype(np.float64) - ref).max())
        assert err <= TOL * max(1.0, float(np.abs(ref).max())), f"{case} {name}: max abs error {err:.3e}"


def _litert_resized(data: bytes, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """LiteRT's builtin kernels with every input resized to the array's shape."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    it = Interpreter(model_content=data, num_threads=1,
                     experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    for d, x in zip(it.get_input_details(), inputs):
        it.resize_tensor_input(d["index"], list(x.shape), strict=True)
    it.allocate_tensors()
    for d, x in zip(it.get_input_details(), inputs):
        it.set_tensor(d["index"], x)
    it.invoke()
    return [it.get_tensor(d["index"]).copy() for d in it.get_output_details()]


@pytest.mark.parametrize("case", sorted(KERAS_CASES))
def test_keras_patterns_match_litert(case, ctx):
    data, inputs = KERAS_CASES[case]()
    refs = run_litert(data, inputs)
    model = webnn.load(data, ctx)
    got = model.compute({n: x for n, x in zip(model.input_names, inputs)})
    _compare(case, got, refs, model.output_names)


def test_dynamic_batch_takes_input_shapes(ctx):
    """``input_shapes`` sizes a dynamic batch (as LiteRT's resize_tensor_input); every
    dynamic tensor after it follows, placeholders in the file notwithstanding."""
    data, _ = KERAS_CASES["dynamic_batch"]()
    x = np.random.default_rng(43).standard_normal((3, 4, 6)).astype(np.float32)
    refs = _litert_resized(data, [x])
    model = webnn.load(data, ctx, input_shapes={"input_0": [3, 4, 6]})
    assert model.inputs["input_0"]["shape"] == [3, 4, 6]
    assert [o["shape"] for o in model.outputs.values()] == [[3, 4, 5], [3, 5]]
    _compare("dynamic_batch at 3", model.compute(x), refs, model.output_names)


def test_input_shapes_must_fit_the_signature(ctx):
    data, _ = KERAS_CASES["dynamic_batch"]()
    with pytest.raises(MLTypeError, match=r"input_shapes\['input_0'\] is \[3, 5, 6\]; the model's input "
                                          r"'input_0' has shape \[-1, 4, 6\]"):
        webnn.load(data, ctx, input_shapes={"input_0": [3, 5, 6]})
    with pytest.raises(MLTypeError, match=r"input_shapes names \['x'\], which are not inputs"):
        webnn.load(data, ctx, input_shapes={"x": [1, 4, 6]})


@pytest.mark.parametrize("case, mapped", [("lstm_loop", True), ("lstm_loop_split_gates", True),
                                          ("lstm_loop_state_only", True),
                                          ("lstm_loop_backward", True), ("gru_loop", True),
                                          ("gru_loop_near_miss", False), ("gru_loop_reset_before", True),
                                          ("gru_loop_float16", True), ("lstm_loop_float16", True),
                                          ("gru_loop_embedded", True), ("lstm_loop_embedded", True),
                                          ("gru_loop_relu", True), ("lstm_loop_relu", True),
                                          ("simple_rnn_loop_embedded", True),
                                          ("gru_loop_reset_before_near_miss", False),
                                          ("simple_rnn_loop", True), ("simple_rnn_loop_relu", True),
                                          ("simple_rnn_loop_near_miss", False), ("lstm_loop_masked", True),
                                          ("lstm_loop_masked_zero", True), ("gru_loop_masked", True),
                                          ("simple_rnn_loop_masked", True), ("lstm_loop_masked_backward", True), ("lstm_loop_bidirectional", True),
                                          ("gru_loop_bidirectional", True), ("gru0_loop_bidirectional", True),
                                          ("lstm_loop_bidirectional_batch", True),
                                          ("simple_rnn_loop_bidirectional", True)])
def test_recurrent_loops_become_one_operator_only_when_they_are_one(case, mapped, ctx, monkeypatch):
    """A Keras 3 LSTM / GRU loop (with a buffer, or an LSTM returning its states alone, or the
    backward half of a Bidirectional: the backward direction, the reversals views; a GRU with
    reset_after=False: one sequence kernel; a relu cell activation; masked) becomes one lstm / gru, the two loops of a
    Bidirectional layer one of direction "both", a SimpleRNN loop (tanh or relu) one
    gru in plain-RNN form (two kernels); a near miss (a RELU6 candidate in a GRU, RELU6 in a
    SimpleRNN) is unrolled; all agree with LiteRT (test_keras_patterns_match_litert)."""
    from webnn_gpu.tflite import loops

    calls = []
    original = loops.map_recurrent_loop

    def spy(*args, **kwargs):
        calls.append(original(*args, **kwargs))
        return calls[-1]

    monkeypatch.setattr(loops, "map_recurrent_loop", spy)
    data, _ = KERAS_CASES[case]()
    model = webnn.load(data, ctx)
    assert calls == [mapped]
    if case == "lstm_loop_backward":  # the backward direction, no reversal kernels
        assert not [s.label for s in model.graph._steps if "REVERSE" in s.label or "reverse" in s.label]
    if mapped and case.endswith("_embedded"):  # the projected table's gather, the transpose, the sequence
        assert [s.template for s in model.graph._steps if hasattr(s, "template")] == [
            "gather_scatter/gather.wgsl", "layout/remap.wgsl", "recurrent/sequence.wgsl"]
    if mapped and case == "gru_loop_reset_before":
        assert [s.template for s in model.graph._steps if hasattr(s, "template")][-1] == "recurrent/sequence.wgsl"
    if "_bidirectional" in case:  # both loops: one operator of direction "both", one launch
        templates = [s.template for s in model.graph._steps if hasattr(s, "template")]
        assert templates.count("recurrent/sequence.wgsl") == 1
        # the concatenation of the directions' sequences (or last states) is the operator's
        # own, reshaped (batch 1) or transposed to batch-major
        assert "CONCATENATION" not in str([s.label for s in model.graph._steps])
    if mapped and case.startswith("simple_rnn") and "masked" not in case and "bidirectional" not in case:
        assert [s.template for s in model.graph._steps if hasattr(s, "template")][-1] == "recurrent/sequence.wgsl"
        assert model.graph.kernel_count == 3  # the input's transpose, the projection, the sequence


#: float16 tolerance relative to max(1, the output's largest magnitude), against LiteRT's float32.
TOL16 = 3e-2


@pytest.mark.parametrize("cell, kw", [
    ("lstm", {}), ("gru", {}), ("gru0", {}), ("tanh", {}), ("lstm", dict(reverse=True)),
    ("lstm", dict(masked="prev")), ("lstm", dict(masked="prev", reverse=True)), ("lstm", dict(masked="zero")),
    ("gru", dict(masked="prev")), ("tanh", dict(masked="zero")), ("gru", dict(bidirectional=True)),
    ("lstm", dict(bidirectional=True, batch=1)), ("tanh", dict(bidirectional=True, batch=1))])
def test_float16_embedded_recurrent_layers_take_the_float32_kernels(cell, kw, ctx):
    """A recurrent layer reading an Embedding (one direction or both reading the one table,
    masked or not) loads in float16 to the kernels float32 gets (the projected table's gather,
    no projection kernel: the sequence kernel reads the gathered rows) and agrees with
    LiteRT's float32 within the float16 tolerance."""
    from keras_patterns import recurrent_loop

    data, inputs = recurrent_loop(cell, embedded=True, **kw)
    refs = run_litert(data, inputs)
    kernels = {}
    for dt in ("float32", "float16"):
        model = webnn.load(data, ctx, dtype=dt)
        kernels[dt] = [s.template for s in model.graph._steps if hasattr(s, "template")]
        got = model.compute({n: x for n, x in zip(model.input_names, inputs)})
        for name, ref in zip(model.output_names, refs):
            err = float(np.abs(got[name].astype(np.float64) - ref).max())
            assert err <= (TOL if dt == "float32" else TOL16) * max(1.0, float(np.abs(ref).max())), (dt, name, err)
    assert kernels["float16"] == kernels["float32"]
    assert "recurrent/project.wgsl" not in kernels["float16"]


@pytest.mark.parametrize("why", ["budget", "range", "forced"])
@pytest.mark.parametrize("masked", ["", "prev"])
def test_float16_embedded_table_that_is_not_taken(why, masked, ctx, monkeypatch):
    """Near misses: a projected table beyond the size budget (``PROJECTED_TABLE_MAX`` and four
    times the table), or (float16 alone) with a value beyond float16's range (a table of
    magnitude 6e4: its own values fit), or float16 with ``WEBNN_GPU_FORCE_FLOAT16_PROJECTION=f32``:
    the operator projects the gathered embedding itself, and the results agree with LiteRT's
    float32 all the same."""
    from keras_patterns import recurrent_loop
    from webnn_gpu.tflite import loops

    if why == "budget":
        monkeypatch.setattr(loops, "PROJECTED_TABLE_MAX", 0)  # 9 x 16 projected values > 4 x 9 x 3
    if why == "forced":
        monkeypatch.setenv("WEBNN_GPU_FORCE_FLOAT16_PROJECTION", "f32")
    data, inputs = recurrent_loop("lstm", embedded=True, masked=masked, table_max=6e4 if why == "range" else 0.0)
    refs = run_litert(data, inputs)
    for dt in ("float32", "float16"):
        model = webnn.load(data, ctx, dtype=dt)
        kernels = [s.template for s in model.graph._steps if hasattr(s, "template")]
        taken = not [t for t in kernels if t == "recurrent/project.wgsl" or t.startswith("matmul/")]  # no projection
        got = model.compute({n: x for n, x in zip(model.input_names, inputs)})
        for name, ref in zip(model.output_names, refs):
            err = float(np.abs(got[name].astype(np.float64) - ref).max())
            assert err <= (TOL if dt == "float32" else TOL16) * max(1.0, float(np.abs(ref).max())), (dt, name, err)
        assert taken == (why in ("range", "forced") and dt == "float32"), (dt, kernels)


@pytest.mark.parametrize("case", ["layer_norm_keras3", "layer_norm_keras3_no_beta"])
def test_keras3_layer_norm_is_one_kernel(case, ctx):
    """fuse_layer_norm takes the converter's negated-mean form (one layer_norm kernel)."""
    data, _ = KERAS_CASES[case]()
    assert webnn.load(data, ctx).graph.kernel_count == 1


@pytest.mark.parametrize("kind, fused", [("depthwise", True), ("conv1d", True), ("conv1d_bias_after", True),
                                         ("same", False)])
def test_dilated_convolutions_are_one_conv2d(kind, fused, ctx):
    """SPACE_TO_BATCH_ND + VALID convolution + BATCH_TO_SPACE_ND is one dilated conv2d
    (one kernel), a bias ADD after it included; with SAME padding inside it is not (the
    block operators stay)."""
    data, _ = KERAS_CASES[f"dilated_conv_{kind}"]()
    kernels = webnn.load(data, ctx).graph.kernel_count
    assert (kernels == 1) if fused else (kernels > 2), kernels


def test_a_loop_whose_condition_reads_its_state_is_not_mapped(ctx):
    from keras_patterns import recurrent_loop

    data, inputs = recurrent_loop("lstm", cond_reads_state=True)
    run_litert(data, inputs)  # a valid model
    with pytest.raises(NotSupportedError, match=r"WHILE: a loop whose trip count is not static"):
        webnn.load(data, ctx)


def test_float16_bounds_beyond_its_range_clamp_alike(ctx):
    """``minimum(x, 1e12)`` / ``maximum(x, -1e12)`` (Keras' UnitNormalization writes such a
    bound) load in float16 and agree with LiteRT's float32 within the float16 tolerance."""
    from tflite_maker import ModelMaker

    m = ModelMaker()
    x = m.input([2, 8])
    low = m.op("MINIMUM", [x, m.const(np.float32(1e12))], [2, 8])
    m.output(m.op("MAXIMUM", [m.const(np.full([2, 8], -1e12, np.float32)), low], [2, 8]))
    data = m.finish()
    xv = np.random.default_rng(48).standard_normal((2, 8)).astype(np.float32) * 100
    (ref,) = run_litert(data, [xv])
    got = webnn.load(data, ctx, dtype="float16").compute(xv)
    np.testing.assert_allclose(next(iter(got.values())).astype(np.float32), ref, rtol=3e-2, atol=3e-2 * 100)


@pytest.mark.parametrize("reader", ["SOFTMAX", "ADD"])
def test_float16_attention_mask_beyond_its_range(reader, ctx):
    """Keras' MultiHeadAttention with a causal mask: SELECT_V2(mask, scores, -1e9) then SOFTMAX
    loads in float16 (the mask value is -65504) and agrees with LiteRT's float32, a line masked
    everywhere included (uniform); read by anything else, the constant is refused by name."""
    from tflite_maker import ModelMaker

    m = ModelMaker()
    x = m.input([1, 2, 4, 4])
    keep = np.tril(np.ones((4, 4), bool))
    keep[2] = False  # a line masked everywhere
    masked = m.op("SELECT_V2", [m.const(keep), x, m.const(np.float32(-1e9))], [1, 2, 4, 4])
    if reader == "SOFTMAX":
        m.output(m.op("SOFTMAX", [masked], [1, 2, 4, 4], options=dict(beta=1.0)))
    else:
        m.output(m.op("ADD", [masked, x], [1, 2, 4, 4]))
    data = m.finish()
    if reader == "ADD":
        with pytest.raises(NotSupportedError, match=r"SELECT_V2.*exceed the float16 range"):
            webnn.load(data, ctx, dtype="float16")
        return
    xv = np.random.default_rng(51).standard_normal((1, 2, 4, 4)).astype(np.float32) * 4
    (ref,) = run_litert(data, [xv])
    got = next(iter(webnn.load(data, ctx, dtype="float16").compute(xv).values())).astype(np.float32)
    np.testing.assert_allclose(got, ref, rtol=3e-2, atol=3e-2)
    np.testing.assert_allclose(got[:, :, 2], 0.25, rtol=1e-3)


@pytest.mark.parametrize("kind, folded", [("heads", True), ("both", True), ("rows", False)])
def test_einsum_dense_bias_joins_the_gemm(kind, folded, ctx):
    """A bias added after the RESHAPE that splits a FULLY_CONNECTED's units becomes the
    gemm's own bias (one kernel); a constant varying along the rows stays an add."""
    data, _ = KERAS_CASES[f"einsum_dense_{kind}"]()
    kernels = webnn.load(data, ctx).graph.kernel_count
    assert (kernels == 1) if folded else (kernels == 2), kernels


@pytest.mark.parametrize("case, kernels", [("heads_projection", ["matmul/small.wgsl"]),
                                           ("heads_projection_key", ["matmul/small.wgsl", "layout/remap.wgsl"])])
def test_heads_projection_is_one_batched_matmul(case, kernels, ctx):
    """A query/value projection split into heads and transposed heads-first is one matmul
    writing that layout (its bias the epilogue); the key's transpose (a near miss) stays a
    kernel after the gemm (both agree with LiteRT in test_keras_patterns_match_litert)."""
    data, _ = KERAS_CASES[case]()
    graph = webnn.load(data, ctx).graph
    got = [s.template for s in graph._steps if hasattr(s, "template")]
    assert [t.replace("tile.wgsl", "small.wgsl") for t in got] == kernels, got


@pytest.mark.parametrize("kind, kernels", [("rows", 2), ("regroup", 3)])
def test_dense_on_rows_is_a_matmul_with_its_epilogue(kind, kernels, ctx):
    """A FULLY_CONNECTED between a flattening and an unflattening RESHAPE (or with
    keep_num_dims) is a matmul in the rows' shape: its bias, GELU, fused RELU and the residual
    ADD are its epilogue (two kernels for two Dense layers); reshaped to another shape, the
    first stays a gemm, its bias ADD and GELU an element-wise kernel of their own (they agree
    with LiteRT in test_keras_patterns_match_litert)."""
    data, _ = KERAS_CASES[f"dense_on_{kind}"]()
    graph = webnn.load(data, ctx).graph
    assert graph.kernel_count == kernels, [s.template for s in graph._steps if hasattr(s, "template")]


@pytest.mark.parametrize("kind, steps", [("swish", 1), ("softmax", 1), ("near_miss", 5)])
def test_unrolled_time_distributed_runs_once(kind, steps, ctx):
    """The unrolled steps of a TimeDistributed (a PACK of identical per-step chains) run as one
    matmul over every step with its activation (and a softmax); with one step's weights
    different, each step keeps its own kernels (both agree with LiteRT in
    test_keras_patterns_match_litert)."""
    data, _ = KERAS_CASES[f"time_distributed_{kind}"]()
    graph = webnn.load(data, ctx).graph
    products = [s for s in graph._steps if getattr(s, "template", "").startswith("matmul/")]
    assert len(products) == steps
    assert graph.kernel_count <= (3 if steps == 1 else 20)


def test_einsum_dense_with_a_dynamic_length_takes_input_shapes(ctx):
    """An EinsumDense over a dynamic sequence length: its RESHAPE's new shape is shape
    arithmetic written after the FULLY_CONNECTED, so the bias fold leaves the RESHAPE to its
    own turn; resized with input_shapes, the model agrees with LiteRT resized alike."""
    data, _ = KERAS_CASES["einsum_dense_dynamic"]()
    x = np.random.default_rng(52).standard_normal((2, 7, 6)).astype(np.float32)
    model = webnn.load(data, ctx, input_shapes={"input_0": [2, 7, 6]})
    got = model.compute(x)
    _compare("einsum_dense_dynamic", got, _litert_resized(data, [x]), model.output_names)


def test_recurrent_loop_with_int8_weights_is_one_operator(ctx, monkeypatch):
    """A loop whose fully connected weights are int8 with per-row scales (dynamic-range
    quantization) maps onto the operator with the dequantized weights: near LiteRT's hybrid
    kernels, which also quantize the activations (the int8 weights test's tolerance)."""
    from keras_patterns import recurrent_loop
    from webnn_gpu.tflite import loops

    calls = []
    original = loops.map_recurrent_loop
    monkeypatch.setattr(loops, "map_recurrent_loop", lambda *a, **k: calls.append(original(*a, **k)) or calls[-1])
    data, inputs = recurrent_loop("lstm", weights="int8")
    refs = run_litert(data, inputs)
    model = webnn.load(data, ctx)
    assert calls == [True]
    got = model.compute({n: x for n, x in zip(model.input_names, inputs)})
    for name, ref in zip(model.output_names, refs):
        assert float(np.abs(got[name] - ref).max()) <= 3e-2 * float(np.abs(ref).max()), name


def test_int8_gather_read_beyond_dequantize_is_refused(ctx):
    """The int8 table's gathered values stay int8 where another operator (here the model's
    output) reads them: quantized outputs are refused, naming the GATHER."""
    from keras_patterns import embedding_int8

    data, inputs = embedding_int8(second_reader=True)
    run_litert(data, inputs)  # a valid model
    with pytest.raises(NotSupportedError, match=r"operator #0 GATHER: quantized tensor"):
        webnn.load(data, ctx)


@pytest.mark.parametrize("case, alone", [("embedding", True), ("embedding_near_miss", False)])
def test_embedding_negative_ids_wrap_in_the_gather(case, alone, ctx):
    """Keras' Embedding wraps negative ids with LESS + ADD + SELECT_V2 before GATHER; WebNN's
    gather counts negative indices from the end itself, so only the gather is left."""
    data, _ = KERAS_CASES[case]()
    kernels = webnn.load(data, ctx).graph.kernel_count
    assert (kernels == 1) if alone else (kernels > 1), kernels


@pytest.mark.parametrize("case", ["group_norm", "rms_norm", "unit_norm"])
def test_group_rms_and_unit_norm_are_one_kernel_each(case, ctx):
    """Keras' GroupNormalization (keras_patterns.group_norm; gamma and beta the kernel's epilogue),
    RMSNormalization and UnitNormalization / L2_NORMALIZATION run as one norm/layer_norm.wgsl
    kernel each."""
    data, _ = KERAS_CASES[case]()
    templates = [s.template for s in webnn.load(data, ctx).graph._steps if hasattr(s, "template")]
    assert templates == ["norm/layer_norm.wgsl"] * (2 if case == "unit_norm" else 1)
