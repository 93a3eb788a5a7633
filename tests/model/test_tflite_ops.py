"""TFLite operators on the GPU against LiteRT, one small model per group (op_models.py).

Every output of every model is compared with LiteRT's builtin kernels within float32
tolerance relative to the output's magnitude (integer and BOOL outputs exactly). Also:
the STRIDED_SLICE plan against NumPy's indexing (no GPU), sparse constants densified
exactly as LiteRT's DENSIFY, int8 weights dequantized at load, WHILE loops (a static
trip count unrolled, a run-time one refused naming the loop), and one error listing
every unmapped operator of a model.
"""

from __future__ import annotations

import numpy as np
import pytest

from litert_reference import run_litert
from op_models import OP_CASES, STRIDED, int8_weights_model, lstm_model, while_model
from tflite_maker import ModelMaker

import webnn_gpu as webnn
from webnn_gpu.errors import DataError, NotSupportedError
from webnn_gpu.tflite.ops import strided_slice_plan
from webnn_gpu.tflite.reader import read_model

#: float32 tolerance relative to max(1, the output's largest magnitude).
TOL = 1e-4


def _compare(case: str, got: dict[str, np.ndarray], refs: list[np.ndarray], names: list[str], tol: float = TOL):
    assert list(got) == names
    for name, ref in zip(names, refs):
        g = got[name]
        assert g.shape == ref.shape, f"{case} {name}: shape {g.shape} != LiteRT's {ref.shape}"
        if ref.dtype.kind in "biu":
            np.testing.assert_array_equal(g.astype(np.int64), ref.astype(np.int64), err_msg=f"{case} {name}")
            continue
        scale = max(1.0, float(np.abs(ref).max()))
        err = float(np.abs(g.astype(np.float64) - ref).max())
        assert err <= tol * scale, f"{case} output {name}: max abs error {err:.3e} > {tol * scale:.1e}"


@pytest.mark.parametrize("case", sorted(OP_CASES))
def test_operators_match_litert(case, ctx):
    data, inputs = OP_CASES[case]()
    refs = run_litert(data, inputs)
    model = webnn.load(data, ctx)
    got = model.compute({n: np.asarray(x) for n, x in zip(model.input_names, inputs)})
    _compare(case, got, refs, model.output_names)


def test_every_emitted_operator_carries_its_tflite_label(ctx):
    """Every WebNN operator the loader emits for the models of OP_CASES and KERAS_CASES (RFFT2D,
    COMPLEX_ABS, BUCKETIZE and masked recurrent loops among them) is labelled with the TFLite
    operator it comes from (``NAME#index``, maybe with a ``/part``) or the model output it passes
    through (``output NAME``), so errors and kernels name it."""
    import re

    from keras_patterns import KERAS_CASES

    from webnn_gpu.tflite.convert import convert

    pattern = re.compile(r"(output .+|[A-Za-z0-9_]+#\d+(/.*)?)")
    unlabelled = []
    for cases in (OP_CASES, KERAS_CASES):
        for case in sorted(cases):
            builder = webnn.MLGraphBuilder(ctx)
            convert(read_model(cases[case]()[0]), builder)
            unlabelled += [f"{case}: {n.op} {n.label!r}" for n in builder._nodes if not pattern.fullmatch(n.label)]
    assert not unlabelled, "\n".join(unlabelled)


def test_softmax_between_inverse_transposes_is_one_kernel(ctx):
    """TRANSPOSE + SOFTMAX + the inverse TRANSPOSE is one softmax over the untransposed axis;
    the near miss of the same model keeps its transposes."""
    from op_models import softmax_other_axis

    data, _ = softmax_other_axis()
    templates = [s.template for s in webnn.load(data, ctx).graph._steps if hasattr(s, "template")]
    # the beta multiply and the softmax; the near miss: a transpose, the softmax, a transpose
    assert templates == ["elementwise/map4.wgsl", "norm/softmax.wgsl", "layout/remap.wgsl", "norm/softmax.wgsl",
                         "layout/remap.wgsl"]


def test_scatter_and_segments_with_run_time_ids_are_refused(ctx):
    """SCATTER_ND, UNSORTED_SEGMENT_SUM and UNSORTED_SEGMENT_PROD need their indices at load time;
    run-time ones are a NotSupportedError naming the operator and the input."""
    m = ModelMaker()
    ids = m.input([3, 1], dtype=np.int32)
    m.output(m.op("SCATTER_ND", [ids, m.input([3]), m.const(np.int32([5]))], [5]))
    with pytest.raises(NotSupportedError, match=r"operator #0 SCATTER_ND: indices computed at run time \(input 0"):
        webnn.load(m.finish(), ctx)
    m = ModelMaker()
    x, seg = m.input([4, 2]), m.input([4], dtype=np.int32)
    m.output(m.op("UNSORTED_SEGMENT_SUM", [x, seg, m.const(np.int32(3))], [3, 2]))
    with pytest.raises(NotSupportedError, match=r"UNSORTED_SEGMENT_SUM: segment ids computed at run time \(input 1"):
        webnn.load(m.finish(), ctx)
    m = ModelMaker()
    x, seg = m.input([4, 2]), m.input([4], dtype=np.int32)
    m.output(m.op("UNSORTED_SEGMENT_PROD", [x, seg, m.const(np.int32(3))], [3, 2]))
    with pytest.raises(NotSupportedError, match=r"UNSORTED_SEGMENT_PROD: segment ids computed at run time"):
        webnn.load(m.finish(), ctx)


@pytest.mark.parametrize("folded", [False, True])
def test_segment_id_past_the_segment_count_is_refused_as_litert_does(folded, ctx):
    """An UNSORTED_SEGMENT_* segment id >= num_segments: LiteRT refuses the model (its prepare
    checks ``max_index < num_segments``), so does the loader, naming the operator, the id and
    the count, on run-time data and when the reduction folds at load time."""
    from op_models import segments_model

    data, inputs = segments_model([0, 1, 4, 2, -1, 0], 4, folded=folded)
    with pytest.raises(Exception, match="max_index < num_segments"):
        run_litert(data, inputs)
    with pytest.raises(DataError, match=r"operator #\d+ UNSORTED_SEGMENT_SUM.*segment id 4 for 4 segments"):
        webnn.load(data, ctx)


@pytest.mark.parametrize("folded", [False, True])
def test_float16_empty_segments_hold_the_float16_extremes(folded, ctx):
    """In a float16 graph an empty UNSORTED_SEGMENT_MAX / MIN segment is -65504 / 65504 (float16's
    lowest / highest: LiteRT's float32 model gives float32's, which float16 cannot hold); the
    other segments and SUM / PROD match LiteRT within float16 rounding, on run-time data and
    folded at load time."""
    from op_models import segments_model

    data, inputs = segments_model([0, -1, 2, 0, -3, 2], 4, folded=folded)  # segments 1 and 3 empty
    refs = run_litert(data, inputs)
    model = webnn.load(data, ctx, dtype="float16")
    got = model.compute({model.input_names[0]: inputs[0].astype(np.float16)})
    f16 = np.finfo(np.float16)
    for name, ref in zip(model.output_names, refs):
        g = got[name].astype(np.float64)
        if name.startswith(("unsorted_segment_max", "unsorted_segment_min")):
            extreme = f16.min if "max" in name else f16.max
            np.testing.assert_array_equal(g[[1, 3]], np.full((2, 2), extreme), err_msg=name)
            g, ref = g[[0, 2]], ref[[0, 2]]
        np.testing.assert_allclose(g, ref, atol=3e-3 * max(1.0, float(np.abs(ref).max())), err_msg=name)


def test_dynamic_update_slice_of_constants_folds_at_load(ctx):
    """DYNAMIC_UPDATE_SLICE of constants is computed at load time, as the loader's other
    operators on constants: the graph holds no operator of it (the values against LiteRT:
    test_operators_match_litert[update_slice_constants])."""
    from op_models import update_slice_constants

    from webnn_gpu.tflite.convert import convert

    builder = webnn.MLGraphBuilder(ctx)
    convert(read_model(update_slice_constants()[0]), builder)
    assert [n.label for n in builder._nodes] == ["ADD#2", "ADD#3"]


def test_int8_weights_are_dequantized_at_load(ctx):
    """int8 weights used directly (LiteRT's hybrid kernels) become float constants: the
    graph equals the float model with DEQUANTIZE, and is near LiteRT's hybrid result
    (which also quantizes the activations)."""
    direct, inputs = int8_weights_model(with_dequantize=False)
    float_model, _ = int8_weights_model(with_dequantize=True)
    (ref,) = run_litert(float_model, inputs)
    (hybrid,) = run_litert(direct, inputs)
    model = webnn.load(direct, ctx)
    got = model.compute(inputs[0])
    _compare("int8 weights", got, [ref], model.output_names)
    scale = float(np.abs(ref).max())
    assert float(np.abs(got[model.output_names[0]] - hybrid).max()) <= 3e-2 * scale


def test_while_with_a_run_time_trip_count_is_refused_naming_it(ctx):
    data, inputs = while_model(static=False)
    run_litert(data, inputs)  # a valid model: LiteRT runs it
    with pytest.raises(NotSupportedError, match=r"operator #0 WHILE: a loop whose trip count is not static: its "
                                                r"condition \(subgraph 1 'subgraph1'\) depends on run-time values"):
        webnn.load(data, ctx)


def test_lstm_peephole_is_refused(ctx):
    data, inputs = lstm_model(peephole=True)
    run_litert(data, inputs)
    with pytest.raises(NotSupportedError, match=r"operator #0 UNIDIRECTIONAL_SEQUENCE_LSTM: peephole weights"):
        webnn.load(data, ctx)


def test_every_unmapped_operator_is_listed_at_once():
    m = ModelMaker()
    x = m.input([1, 4])
    a = m.op("MyFancyOp", [x], [1, 4], custom_options=b"\x00")
    b = m.op("RELU", [a], [1, 4])
    c = m.op("SVDF", [b], [1, 4, 4])
    m.output(m.op("OtherOp", [c], [1, 4, 4], custom_options=b"\x01"))
    from webnn_gpu.tflite.convert import convert

    with pytest.raises(NotSupportedError) as info:
        convert(read_model(m.finish()), object())
    message = str(info.value)
    assert "3 operator(s) of the model are not supported (MyFancyOp, OtherOp, SVDF)" in message
    for part in ("operator #0 MyFancyOp (custom op 'MyFancyOp')", "operator #2 SVDF (op code SVDF)",
                 "operator #3 OtherOp (custom op 'OtherOp')"):
        assert part in message


def test_sparse_constants_densify_like_litert():
    from op_models import OP_CASES as cases
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    data, inputs = cases["sparse_weights"]()
    model = read_model(data)
    it = Interpreter(model_content=data, experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
                     experimental_preserve_all_tensors=True)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], inputs[0])
    it.invoke()
    densify = [op for op in model.operators if op.name == "DENSIFY"]
    assert len(densify) == 2
    for op in densify:
        stored = model.tensors[op.inputs[0]].data
        np.testing.assert_array_equal(stored, it.get_tensor(op.outputs[0]))


@pytest.mark.parametrize("spec", STRIDED, ids=[f"spec{i}" for i in range(len(STRIDED))])
def test_strided_slice_plan_follows_numpy_indexing(spec):
    begin, end, strides, options, shape = spec
    x = np.arange(2 * 5 * 6 * 4).reshape(2, 5, 6, 4)
    plan = strided_slice_plan(x.shape, begin, end, strides, **{
        {"beginMask": "begin_mask", "endMask": "end_mask", "ellipsisMask": "ellipsis_mask",
         "newAxisMask": "new_axis_mask", "shrinkAxisMask": "shrink_axis_mask", "offset": "offset"}[k]: v
        for k, v in options.items()})
    # The same selection written as a NumPy index, independently of the plan.
    index = []
    for i, (b, e, s) in enumerate(zip(begin, end, strides)):
        if options.get("ellipsisMask", 0) >> i & 1:
            index.append(Ellipsis)
        elif options.get("newAxisMask", 0) >> i & 1:
            index.append(None)
        elif options.get("shrinkAxisMask", 0) >> i & 1:
            index.append(b)
        else:
            e = b + e if options.get("offset") else e
            index.append(slice(None if options.get("beginMask", 0) >> i & 1 else b,
                               None if options.get("endMask", 0) >> i & 1 else e, s))
    ref = x[tuple(index)]
    y = x
    for axis in plan.reverse_axes:
        y = np.flip(y, axis)
    y = y[tuple(slice(b, b + (n - 1) * s + 1, s) for b, n, s in zip(plan.starts, plan.sizes, plan.strides))]
    assert list(plan.out_shape) == list(ref.shape) == list(shape)
    np.testing.assert_array_equal(y.reshape(plan.out_shape), ref)


def test_densify_follows_the_traversal_order_and_blocks():
    """Column-major CSR (traversal order [1, 0]) and a 2x2-blocked BSR, written by hand."""
    from webnn_gpu.tflite.reader import Sparsity, densify

    dense = np.array([[0, 1, 0, 2], [3, 0, 0, 0], [0, 4, 0, 5]], np.float32)
    # Columns first (dense), then the rows of each column that hold a value (CSR).
    cols = [np.nonzero(dense[:, c])[0] for c in range(4)]
    segments = np.cumsum([0] + [len(r) for r in cols])
    values = np.concatenate([dense[r, c] for c, r in enumerate(cols)])
    sp = Sparsity((1, 0), (), (("dense", 4), ("csr", segments, np.concatenate(cols))))
    np.testing.assert_array_equal(densify(sp, values.tobytes(), "FLOAT32", dense.shape), dense)

    blocked = np.array([[1, 2, 0, 0], [3, 4, 0, 0], [0, 0, 5, 6], [0, 0, 7, 8]], np.float32)
    # Block rows (dense, 2), block columns present per block row (CSR), then 2x2 inside.
    sp = Sparsity((0, 1, 2, 3), (0, 1), (("dense", 2), ("csr", np.array([0, 1, 2]), np.array([0, 1])),
                                         ("dense", 2), ("dense", 2)))
    values = np.array([1, 2, 3, 4, 5, 6, 7, 8], np.float32)
    np.testing.assert_array_equal(densify(sp, values.tobytes(), "FLOAT32", blocked.shape), blocked)


def test_top_k_of_one_input_is_one_launch(ctx):
    """TOPK_V2s of one input share one kernel; a CAST to float32 that alone reads indices is
    the kernel's own output; one that shares them with a model output stays (the values
    against LiteRT: test_operators_match_litert[top_k_shared])."""
    from op_models import top_k_shared

    data, _ = top_k_shared()
    labels = [s.label for s in webnn.load(data, ctx).graph._steps]
    assert labels == ["wgsl ['TOPK_V2#0']", "cast ['CAST#4']"]


@pytest.mark.parametrize("consumer", ["ADD", "output"])
def test_complex_value_elsewhere_is_refused(consumer, ctx):
    """An RFFT2D's complex result read by an operator other than COMPLEX_ABS, REAL, IMAG and
    reshapes, or a model output, is a NotSupportedError naming it (WebNN has no complex type)."""
    from op_models import rfft2d_model

    data, _ = rfft2d_model(consumer)
    with pytest.raises(NotSupportedError, match="operator #1 ADD: a complex input" if consumer == "ADD"
                       else "model output .* is complex"):
        webnn.load(data, ctx)


def test_if_run_time_condition_takes_either_branch(ctx):
    """An IF whose condition is computed at run time gives each branch's outputs as LiteRT does,
    for inputs that take the then branch and inputs that take the else branch."""
    from op_models import if_known_branches_model, if_model

    for data, (x,) in (if_model(static=False), if_known_branches_model()):
        model = webnn.load(data, ctx)
        for sign in (1.0, -1.0):
            inputs = [(np.abs(x) * sign).astype(np.float32)]
            _compare("if", model.compute({model.input_names[0]: inputs[0]}), run_litert(data, inputs),
                     model.output_names)


def test_matrix_diag_keeps_infinities_and_nan_on_the_diagonal(ctx):
    """MATRIX_DIAG writes exact zeros off the diagonal whatever the row holds (an infinity or a
    NaN times zero would be NaN), and takes integer inputs too: against NumPy's diagonals."""
    for dtype in (np.float32, np.int32):
        m = ModelMaker()
        x = m.input([2, 3], dtype=dtype)
        m.output(m.op("MATRIX_DIAG", [x], [2, 3, 3], out_dtype=dtype))
        model = webnn.load(m.finish(), ctx)
        value = (np.array([[1.0, np.inf, -2.0], [np.nan, 3.0, -np.inf]], np.float32) if dtype == np.float32
                 else np.array([[1, -7, 2], [5, 0, 9]], np.int32))
        got = model.compute({model.input_names[0]: value})[model.output_names[0]]
        np.testing.assert_array_equal(got, np.stack([np.diag(r) for r in value]))


def test_if_branch_with_the_wrong_output_count_is_refused(ctx):
    """An IF whose branch gives fewer values than the IF has outputs is malformed, named."""
    m = ModelMaker()
    x = m.input([2])
    then = m.subgraph()
    t = m.input([2])
    m.output(t)
    els = m.subgraph()
    e = m.input([2])
    m.output(e)
    m.subgraph(0)
    two = m.op("IF", [m.const(np.bool_(True)), x], [[2], [2]], out_dtype=[np.float32, np.float32],
               options=dict(thenSubgraphIndex=then, elseSubgraphIndex=els), outputs=2)
    m.output(*two)
    with pytest.raises(Exception, match=r"IF.*a branch with 1 outputs for an IF of 2"):
        webnn.load(m.finish(), ctx)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_is_finite_as_the_converter_writes_it_sees_nan_and_infinity(dtype, ctx):
    """TensorFlow's IsFinite is EQUAL(SUB(x, x), 0); llvmpipe folds a fused x - x to 0, so the
    loader tests x's bits (is_nan, is_infinite). Near miss: SUB(x, y) of two tensors stays an
    EQUAL of the difference."""
    m = ModelMaker()
    x, y = m.input([2, 4]), m.input([2, 4])
    zero = m.const(np.array(0.0, np.float32))
    finite = m.op("EQUAL", [m.op("SUB", [x, x], [2, 4]), zero], [2, 4], out_dtype=np.bool_)
    same = m.op("EQUAL", [m.op("SUB", [x, y], [2, 4]), zero], [2, 4], out_dtype=np.bool_)
    m.output(m.op("CAST", [finite], [2, 4]), m.op("CAST", [same], [2, 4]))
    model = webnn.load(m.finish(), ctx, dtype=dtype)
    xs = np.array([[1.0, np.nan, np.inf, -np.inf], [-2.5, 0.0, 3e3, -0.0]], np.float32)
    ys = np.array([[1.0, 2.0, np.inf, 0.0], [-2.5, 1.0, 3e3, 0.0]], np.float32)
    got = list(model.compute(dict(zip(model.input_names, (xs, ys)))).values())
    np.testing.assert_array_equal(got[0], np.isfinite(xs).astype(np.float32))
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(got[1], (xs - ys == 0).astype(np.float32))


@pytest.mark.parametrize("zero_shape, swapped", [([3, 2, 4], False), ([2, 1, 1], True), ([1, 4], True)])
def test_is_finite_with_its_zero_first_or_broadcasting_the_result(zero_shape, swapped, ctx):
    """EQUAL(0, SUB(x, x)) is IsFinite too, and a zero of more dimensions broadcasts its result
    (to the EQUAL's shape, as TensorFlow's)."""
    m = ModelMaker()
    x = m.input([2, 4])
    zero = m.const(np.zeros(zero_shape, np.float32))
    out = list(np.broadcast_shapes((2, 4), tuple(zero_shape)))
    diff = m.op("SUB", [x, x], [2, 4])
    finite = m.op("EQUAL", [zero, diff] if swapped else [diff, zero], out, out_dtype=np.bool_)
    m.output(m.op("CAST", [finite], out))
    model = webnn.load(m.finish(), ctx)
    xs = np.array([[1.0, np.nan, np.inf, -np.inf], [-2.5, 0.0, 3e3, -0.0]], np.float32)
    got = next(iter(model.compute(xs).values()))
    np.testing.assert_array_equal(got, np.broadcast_to(np.isfinite(xs), out).astype(np.float32))


def test_broadcast_args_of_static_shapes_folds_at_load(ctx, rng):
    """BROADCAST_ARGS (MultiHeadAttention(attention_axes=(1, 2))) is the broadcast of two static
    shape vectors, folded at load; shapes that do not broadcast are a DataError."""

    def model(a, b):
        m = ModelMaker()
        x = m.input([1, 4])
        shape = m.op("BROADCAST_ARGS", [m.const(np.array(a, np.int32)), m.const(np.array(b, np.int32))], [3],
                     out_dtype=np.int32)
        m.output(m.op("BROADCAST_TO", [x, shape], [2, 3, 4]))
        return m.finish()

    loaded = webnn.load(model([3, 1], [2, 1, 4]), ctx)
    x = rng.standard_normal((1, 4)).astype(np.float32)
    np.testing.assert_array_equal(next(iter(loaded.compute(x).values())), np.broadcast_to(x, (2, 3, 4)))
    with pytest.raises(DataError, match="do not broadcast"):
        webnn.load(model([3, 2], [2, 1, 4]), ctx)
