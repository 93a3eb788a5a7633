"""Small TFLite models with the operator patterns TensorFlow's converter writes for Keras models.

Written with ``tflite_maker.ModelMaker`` (no TensorFlow needed); each mirrors what
``benchmarks/keras_zoo.py`` found in real conversions:

* ``dynamic_batch``: a Keras model's open batch size: ``-1`` in the shape signatures,
  placeholder sizes in ``shape`` (``[1, 1]`` for a ``[-1, -1]`` reshape), and the shape
  arithmetic ``tf.reshape`` emits (SHAPE, STRIDED_SLICE, GATHER, REDUCE_PROD, PACK) in
  front of RESHAPE, with FULLY_CONNECTED (``keep_num_dims`` both ways), EXPAND_DIMS,
  SQUEEZE, MEAN, BROADCAST_TO and UNPACK on dynamic tensors;
* ``space_batch``: SPACE_TO_BATCH_ND / BATCH_TO_SPACE_ND (a dilated Conv1D), with
  paddings and crops, in both forms LiteRT runs (rank 4 with two block
  dimensions, rank 3 with one);
* ``tensor_list_loop``: a Keras 3 recurrent layer's ``WHILE``: a buffer written one row
  per iteration by SLICE + CONCATENATION, whose first and last slices are empty.
"""

from __future__ import annotations

import numpy as np

from ai_edge_litert import schema_py_generated as schema
from tflite_maker import ModelMaker

INT32 = schema.TensorType.INT32
KERAS_CASES: dict = {}


def case(fn):
    KERAS_CASES[fn.__name__] = fn
    return fn


def _f32(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def _signature(m: ModelMaker, tensor: int, signature: list[int]) -> int:
    """Give ``tensor`` a shape signature (``-1``: a dynamic dimension)."""
    m.tensors[tensor].shapeSignature = list(signature)
    return tensor


@case
def dynamic_batch():
    """Returns (model, inputs at the declared batch of 1); the model takes any batch size."""
    rng = np.random.default_rng(40)
    m = ModelMaker()
    x = _signature(m, m.input([1, 4, 6]), [-1, 4, 6])
    shape = m.op("SHAPE", [x], [3], out_dtype=np.int32, options=dict(outType=INT32))
    batch = m.op("STRIDED_SLICE", [shape, m.const(np.int32([0])), m.const(np.int32([1])), m.const(np.int32([1]))],
                 [], out_dtype=np.int32, options=dict(shrinkAxisMask=1))
    rows = m.op("REDUCE_PROD", [m.op("GATHER", [shape, m.const(np.int32([0, 1]))], [2], out_dtype=np.int32),
                                m.const(np.int32([0]))], [], out_dtype=np.int32)
    flat_shape = m.op("PACK", [rows, m.const(np.int32(6))], [2], out_dtype=np.int32,
                      options=dict(valuesCount=2, axis=0))
    # The converter's placeholder: [1, 1] for a [-1, -1] tensor whose size is [4 * batch, 6].
    flat = _signature(m, m.op("RESHAPE", [x, flat_shape], [1, 1]), [-1, -1])
    fc = _signature(m, m.op("FULLY_CONNECTED", [flat, m.const(_f32(rng, 5, 6)), m.const(_f32(rng, 5))], [1, 5]),
                    [-1, 5])
    back_shape = m.op("PACK", [batch, m.const(np.int32(4)), m.const(np.int32(5))], [3], out_dtype=np.int32,
                      options=dict(valuesCount=3, axis=0))
    back = _signature(m, m.op("RESHAPE", [fc, back_shape], [1, 4, 5]), [-1, 4, 5])
    kept = _signature(m, m.op("FULLY_CONNECTED", [x, m.const(_f32(rng, 5, 6)), -1], [1, 4, 5],
                              options=dict(keepNumDims=True)), [-1, 4, 5])
    both = _signature(m, m.op("ADD", [back, kept], [1, 4, 5]), [-1, 4, 5])
    grown = _signature(m, m.op("EXPAND_DIMS", [both, m.const(np.int32(1))],
                               [1, 1, 4, 5]), [-1, 1, 4, 5])
    squeezed = _signature(m, m.op("SQUEEZE", [grown], [1, 4, 5], options=dict(squeezeDims=[1])), [-1, 4, 5])
    mean = _signature(m, m.op("MEAN", [squeezed, m.const(np.int32([2]))], [1, 4, 1], options=dict(keepDims=True)),
                      [-1, 4, 1])
    spread = _signature(m, m.op("BROADCAST_TO", [mean, back_shape], [1, 4, 5], version=2), [-1, 4, 5])
    out = _signature(m, m.op("SUB", [squeezed, spread], [1, 4, 5]), [-1, 4, 5])
    rows_out = m.op("UNPACK", [out], [[1, 5]] * 4, options=dict(num=4, axis=1), outputs=4)
    for t in rows_out:
        _signature(m, t, [-1, 5])
    m.output(out, rows_out[2])
    return m.finish(), [_f32(rng, 1, 4, 6)]


@case
def space_batch():
    rng = np.random.default_rng(41)
    m = ModelMaker()
    x = m.input([2, 5, 7, 3])
    blocks = m.op("SPACE_TO_BATCH_ND", [x, m.const(np.int32([2, 3])), m.const(np.int32([[1, 0], [1, 1]]))],
                  [12, 3, 3, 3])
    act = m.op("TANH", [blocks], [12, 3, 3, 3])
    back = m.op("BATCH_TO_SPACE_ND", [act, m.const(np.int32([2, 3])), m.const(np.int32([[1, 0], [0, 2]]))],
                [2, 5, 7, 3])
    # The rank-3 forms (one block dimension) of a dilated Conv1D.
    y = m.input([2, 8, 3])
    y_blocks = m.op("SPACE_TO_BATCH_ND", [y, m.const(np.int32([4])), m.const(np.int32([[2, 2]]))], [8, 3, 3])
    z = m.input([4, 5, 3])
    z_space = m.op("BATCH_TO_SPACE_ND", [z, m.const(np.int32([2])), m.const(np.int32([[0, 1]]))], [2, 9, 3])
    m.output(blocks, back, y_blocks, z_space)
    return m.finish(), [_f32(rng, 2, 5, 7, 3), _f32(rng, 2, 8, 3), _f32(rng, 4, 5, 3)]


@case
def tensor_list_loop():
    """``for i in range(3): buf[i] = tanh(x[i]) + buf_row_sum`` the way the converter writes a
    TensorList: ``concat(buf[:i], row, buf[i + 1:])``; also an empty STRIDED_SLICE."""
    rng = np.random.default_rng(42)
    m = ModelMaker()
    x = m.input([3, 4])
    i0, n = m.const(np.int32(0)), m.const(np.int32(3))
    buf0 = m.const(np.zeros((3, 4), np.float32))
    cond = m.subgraph()
    ci, cn = m.input([], np.int32), m.input([], np.int32)
    m.input([3, 4]), m.input([3, 4])
    m.output(m.op("LESS", [ci, cn], [], out_dtype=np.bool_))
    body = m.subgraph()
    bi, bn, bbuf, bx = m.input([], np.int32), m.input([], np.int32), m.input([3, 4]), m.input([3, 4])
    nxt = m.op("ADD", [bi, m.const(np.int32(1))], [], out_dtype=np.int32)
    row = m.op("RESHAPE", [m.op("GATHER", [bx, bi], [4]), m.const(np.int32([1, 4]))], [1, 4])
    total = m.op("SUM", [bbuf, m.const(np.int32([0]))], [1, 4], options=dict(keepDims=True))
    row = m.op("ADD", [m.op("TANH", [row], [1, 4]), total], [1, 4])
    one = m.const(np.int32([1]))
    pre_size = m.op("CONCATENATION", [m.op("RESHAPE", [bi, one], [1], out_dtype=np.int32), m.const(np.int32([-1]))],
                    [2], out_dtype=np.int32, options=dict(axis=0))
    pre = _signature(m, m.op("SLICE", [bbuf, m.const(np.int32([0, 0])), pre_size], [1, 1]), [-1, -1])
    post_begin = m.op("CONCATENATION", [m.op("RESHAPE", [nxt, one], [1], out_dtype=np.int32),
                                        m.const(np.int32([0]))], [2], out_dtype=np.int32, options=dict(axis=0))
    post = _signature(m, m.op("SLICE", [bbuf, post_begin, m.const(np.int32([-1, -1]))], [1, 4]), [-1, 4])
    m.output(nxt, bn, m.op("CONCATENATION", [pre, row, post], [3, 4], options=dict(axis=0)), bx)
    m.subgraph(0)
    outs = m.op("WHILE", [i0, n, buf0, x], [[], [], [3, 4], [3, 4]],
                options=dict(condSubgraphIndex=cond, bodySubgraphIndex=body), outputs=4)
    m.tensors[outs[0]].type = m.tensors[outs[1]].type = INT32
    empty = m.op("STRIDED_SLICE", [x, m.const(np.int32([3, 0])), m.const(np.int32([3, 4])), m.const(np.int32([1, 1]))],
                 [0, 4])
    m.output(m.op("CONCATENATION", [empty, outs[2]], [3, 4], options=dict(axis=0)))
    return m.finish(), [_f32(rng, 3, 4)]


def recurrent_loop(cell: str, *, near_miss: bool = False, cond_reads_state: bool = False, buffer: bool = True,
                   reverse: bool = False, weights: str = "float32", embedded: bool = False,
                   relu_cell: bool = False, masked: str = "", bidirectional: bool = False,
                   batch: int = 2, split_gates: bool = False, table_max: float = 0.0) -> tuple[bytes, list[np.ndarray]]:
    """A Keras 3 LSTM or GRU layer as TensorFlow's converter writes it: a time-major
    sequence, a WHILE with two counters, a body of fully connected layers, a gate split
    and the activations, and a buffer written per step (LSTM: the whole sequence through
    SLICE + CONCATENATION; GRU: the last state). The LSTM starts from a run-time hidden
    state and a non-zero constant cell state. ``near_miss``: the GRU's candidate uses RELU6
    (no WebNN gru activation): the loop must be unrolled instead. ``cond_reads_state``: the
    condition also tests the hidden state (``sum(h) > -1e9``), so the trip count is not static.
    ``reverse`` (LSTM): the backward layer of a Keras Bidirectional: the loop reads the
    sequence reversed along time (REVERSE_V2), its buffer is reversed back (through a RESHAPE
    that adds a dimension of size 1). ``buffer=False`` (LSTM): no buffer, the loop variables are the counters, the states and
    the sequence (a Keras layer with ``return_state`` and no sequence), the model's outputs the
    final h and c. ``cell`` ``"tanh"``, ``"relu"`` or ``"relu6"``: a Keras SimpleRNN with that activation
    (a fully connected layer of the hidden state without bias, one of the step's input with
    bias, ADD, the activation; the buffer holds the last state); ``"relu6"`` is no plain RNN
    that WebNN's gru can express: the loop must be unrolled. ``"gru0"``: a Keras GRU with
    ``reset_after=False`` (the state's product gives the update and reset gates, a second
    square one of ``r * h`` the new gate, as Keras writes it; ``near_miss``: that product
    reads ``h`` instead of ``r * h``, which no WebNN gru computes).
    ``weights`` ``"float16"``: the body's weights and biases are float16 behind DEQUANTIZE
    (``Optimize.DEFAULT`` with float16); ``"int8"``: the fully connected weights are int8 with
    per-row scales, used directly (dynamic-range quantization). ``embedded``: the sequence is
    the GATHER of a constant table by int32 ids [batch, steps] (Keras' Embedding) before the
    transpose. ``relu_cell`` (LSTM, GRU): the cell activation is RELU (Keras'
    ``activation="relu"``); the GRU's ``near_miss`` uses RELU6, which no WebNN gru computes.
    ``masked`` (with ``embedded``; LSTM, GRU with ``reset_after``, SimpleRNN): Keras' masking
    (``Embedding(mask_zero=True)``): the mask ``ids != 0`` goes time-major into the loop, which
    also carries the previous output; per step ``SELECT_V2(mask_t, new, old)`` keeps the states
    where the mask is false and writes the previous output (``"prev"``) or zeros (``"zero"``,
    a Bidirectional layer's ``return_sequences``: no previous output in the loop) into the buffer. The ids hold zeros at the
    start, inside and at the end of a row, and a row of zeros alone (no unmasked step).
    ``bidirectional`` (LSTM, GRU, SimpleRNN): Keras' ``Bidirectional``: a second loop with its own
    weights over the sequence reversed along time, written first; the LSTM's sequences
    (batch-major, the backward one reversed back) or the GRU's / SimpleRNN's last states concatenated
    along the features, and each direction's final state, are the outputs.
    ``split_gates`` (LSTM): each gate has its own products, the step's input (with the gate's
    bias) and the state's (Keras' layers with ``recurrent_dropout``), added per gate.
    ``table_max`` (with ``embedded``): the embedding table scaled to that largest magnitude.
    """
    reset_after = cell != "gru0"
    cell = "gru" if cell == "gru0" else cell
    rng = np.random.default_rng({"lstm": 44, "gru": 45 if reset_after else 47}.get(cell, 46))
    steps, features, units = 5, 3, 4
    gates = {"lstm": 4, "gru": 3}.get(cell, 1)
    m = ModelMaker()
    if masked:
        batch = 3
    if embedded:
        ids = m.input([batch, steps], np.int32)
        table = _f32(rng, 9, features)
        if table_max:
            table *= np.float32(table_max / np.abs(table).max())
        x = m.op("GATHER", [m.const(table), ids], [batch, steps, features], options=dict(axis=0))
        if masked:
            nz = m.op("NOT_EQUAL", [ids, m.const(np.int32(0))], [batch, steps], out_dtype=np.bool_)
            nz = m.op("RESHAPE", [nz, m.const(np.int32([batch, steps, 1]))], [batch, steps, 1], out_dtype=np.bool_)
            mask_seq = m.op("TRANSPOSE", [nz, m.const(np.int32([1, 0, 2]))], [steps, batch, 1], out_dtype=np.bool_)
    else:
        x = m.input([batch, steps, features])
    seq = m.op("TRANSPOSE", [x, m.const(np.int32([1, 0, 2]))], [steps, batch, features])
    if reverse:
        seq = m.op("REVERSE_V2", [seq, m.const(np.int32([0]))], [steps, batch, features])
        if masked:
            mask_seq = m.op("REVERSE_V2", [mask_seq, m.const(np.int32([0]))], [steps, batch, 1], out_dtype=np.bool_)
    state = [batch, units]
    buf_shape = [steps, batch, units] if cell == "lstm" else [1, batch, units]
    if cell == "lstm":
        h0 = m.input(state)
        c0 = m.const(_f32(rng, *state, scale=0.5))
        loop_vars = [m.const(np.int32(0)), m.const(np.int32(0)), m.const(np.zeros(buf_shape, np.float32)), h0, c0, seq]
    else:
        loop_vars = [m.const(np.int32(0)), m.const(np.int32(0)), m.const(np.zeros(buf_shape, np.float32)),
                     m.const(np.zeros(state, np.float32)), seq]
    shapes = [[], [], buf_shape, state] + ([state] if cell == "lstm" else []) + [[steps, batch, features]]
    if not buffer:  # (LSTM) the buffer's slot goes: [i, t, h, c, seq]
        del loop_vars[2], shapes[2]
    dtypes = [np.int32, np.int32] + [np.float32] * (len(shapes) - 2)
    if masked == "prev":  # [i, t, buf, prev, h, (c), mask, seq]
        loop_vars[3:3] = [m.const(np.zeros(state, np.float32))]
        shapes[3:3], dtypes[3:3] = [state], [np.float32]
    if masked:
        loop_vars[-1:-1], shapes[-1:-1], dtypes[-1:-1] = [mask_seq], [[steps, batch, 1]], [np.bool_]

    cond = m.subgraph()
    ins = [m.input(s, d) for s, d in zip(shapes, dtypes)]
    limit = m.const(np.int32(steps))
    go = m.op("LOGICAL_AND", [m.op("LESS", [ins[0], limit], [], out_dtype=np.bool_),
                              m.op("LESS", [ins[1], limit], [], out_dtype=np.bool_)], [], out_dtype=np.bool_)
    if cond_reads_state:
        total = m.op("SUM", [ins[3], m.const(np.int32([0, 1]))], [])
        go = m.op("LOGICAL_AND", [go, m.op("GREATER", [total, m.const(np.float32(-1e9))], [], out_dtype=np.bool_)],
                  [], out_dtype=np.bool_)
    m.output(go)

    def weight(*shape: int, scale: float) -> int:
        v = _f32(rng, *shape, scale=scale)
        if weights == "float16":
            return m.op("DEQUANTIZE", [m.const(v.astype(np.float16))], list(shape))
        if weights == "int8" and len(shape) == 2:
            scales = np.abs(v).max(axis=1) / 127
            return m.const(np.round(v / scales[:, None]).astype(np.int8),
                           quant=(scales.tolist(), [0] * shape[0], 0))
        return m.const(v)

    def make_body() -> int:
        body = m.subgraph()
        ins = [m.input(s, d) for s, d in zip(shapes, dtypes)]
        if not buffer:
            ins.insert(2, -1)
        prev = mask_t = -1
        if masked:
            prev, mask_in = ins.pop(3) if masked == "prev" else -1, ins.pop(-2)
        i, t, buf, h = ins[:4]
        if masked:
            mask_t = m.op("GATHER", [mask_in, t], [batch, 1], out_dtype=np.bool_)

        def step(new: int, old: int) -> int:  # Keras' masked step: the old value where the mask is false
            return m.op("SELECT_V2", [mask_t, new, old], state) if masked else new

        def out(h1: int) -> int:  # what the buffer gets
            if not masked:
                return h1
            return step(h1, prev if masked == "prev" else m.const(np.zeros(state, np.float32)))

        def body_outputs(*values: int) -> None:  # i, t, buf, h, (c), seq
            values = list(values)
            if masked == "prev":
                values[3:3] = [h_out]
            if masked:
                values[-1:-1] = [mask_in]
            m.output(*values)
        one = m.const(np.int32(1))
        i1 = m.op("ADD", [i, one], [], out_dtype=np.int32)
        t1 = m.op("ADD", [t, one], [], out_dtype=np.int32)
        x_t = m.op("GATHER", [ins[-1], t], [batch, features])
        sig = lambda v: m.op("LOGISTIC", [v], state)  # noqa: E731
        tanh = (lambda v: m.op("RELU", [v], state)) if relu_cell else (lambda v: m.op("TANH", [v], state))  # noqa: E731
        if cell == "lstm":
            c = ins[4]
            if split_gates:
                gi, gf, gg, go = [m.op("ADD", [m.op("FULLY_CONNECTED", [x_t, weight(units, features, scale=0.5),
                                                                          weight(units, scale=0.3)], state),
                                                m.op("FULLY_CONNECTED", [h, weight(units, units, scale=0.5), -1], state)],
                                       state) for _ in range(4)]
            else:
                rec = m.op("FULLY_CONNECTED", [h, weight(gates * units, units, scale=0.5), -1],
                           [batch, gates * units])
                xw = m.op("FULLY_CONNECTED", [x_t, weight(gates * units, features, scale=0.5), -1],
                          [batch, gates * units])
                z = m.op("ADD", [m.op("ADD", [xw, rec], [batch, gates * units]), weight(gates * units, scale=0.3)],
                         [batch, gates * units])
                gi, gf, gg, go = m.op("SPLIT", [m.const(np.int32(1)), z], [state] * 4, options=dict(numSplits=4),
                                      outputs=4)
            c1 = m.op("ADD", [m.op("MUL", [sig(gf), c], state), m.op("MUL", [sig(gi), tanh(gg)], state)], state)
            h1 = m.op("MUL", [sig(go), tanh(c1)], state)
            h_out = out(h1)
            h1, c1 = step(h1, h), step(c1, c)
            if not buffer:
                m.output(i1, t1, h1, c1, ins[-1])
                return body
            row = m.op("RESHAPE", [h_out, m.const(np.int32([1, batch, units]))], [1, batch, units])
            vec = m.const(np.int32([1]))
            pre_size = m.op("CONCATENATION", [m.op("RESHAPE", [t, vec], [1], out_dtype=np.int32),
                                              m.const(np.int32([-1, -1]))], [3], out_dtype=np.int32, options=dict(axis=0))
            pre = _signature(m, m.op("SLICE", [buf, m.const(np.int32([0, 0, 0])), pre_size], [1, 1, 1]), [-1, -1, -1])
            post_begin = m.op("CONCATENATION", [m.op("RESHAPE", [t1, vec], [1], out_dtype=np.int32),
                                                m.const(np.int32([0, 0]))], [3], out_dtype=np.int32, options=dict(axis=0))
            post = _signature(m, m.op("SLICE", [buf, post_begin, m.const(np.int32([-1, -1, -1]))], [1, batch, units]),
                              [-1, batch, units])
            buf1 = m.op("CONCATENATION", [pre, row, post], buf_shape, options=dict(axis=0))
            body_outputs(i1, t1, buf1, h1, c1, ins[-1])
        elif gates == 1:
            rec = m.op("FULLY_CONNECTED", [h, weight(units, units, scale=0.5), -1], state)
            xw = m.op("FULLY_CONNECTED", [x_t, weight(units, features, scale=0.5),
                                          weight(units, scale=0.3)], state)
            h1 = m.op({"tanh": "TANH", "relu": "RELU", "relu6": "RELU6"}[cell], [m.op("ADD", [xw, rec], state)], state)
            h_out = out(h1)
            h1 = step(h1, h)
            buf1 = m.op("RESHAPE", [h_out, m.const(np.int32(buf_shape))], buf_shape)
            body_outputs(i1, t1, buf1, h1, ins[-1])
        elif not reset_after:
            xw = m.op("FULLY_CONNECTED", [x_t, weight(gates * units, features, scale=0.5),
                                          weight(gates * units, scale=0.3)], [batch, gates * units])
            xz, xr, xn = m.op("SPLIT", [m.const(np.int32(1)), xw], [state] * 3, options=dict(numSplits=3), outputs=3)
            rec = m.op("FULLY_CONNECTED", [h, weight(2 * units, units, scale=0.5), -1], [batch, 2 * units])
            hz, hr = m.op("SPLIT", [m.const(np.int32(1)), rec], [state] * 2, options=dict(numSplits=2), outputs=2)
            u = sig(m.op("ADD", [xz, hz], state))
            r = sig(m.op("ADD", [xr, hr], state))
            rh = h if near_miss else m.op("MUL", [r, h], state)
            hn = m.op("FULLY_CONNECTED", [rh, weight(units, units, scale=0.5), -1], state)
            n = tanh(m.op("ADD", [xn, hn], state))
            keep = m.op("SUB", [m.const(np.float32(1.0)), u], state)
            h1 = m.op("ADD", [m.op("MUL", [u, h], state), m.op("MUL", [keep, n], state)], state)
            buf1 = m.op("RESHAPE", [h1, m.const(np.int32(buf_shape))], buf_shape)
            m.output(i1, t1, buf1, h1, ins[-1])
        else:
            xw = m.op("FULLY_CONNECTED", [x_t, weight(gates * units, features, scale=0.5),
                                          weight(gates * units, scale=0.3)], [batch, gates * units])
            xz, xr, xn = m.op("SPLIT", [m.const(np.int32(1)), xw], [state] * 3, options=dict(numSplits=3), outputs=3)
            rec = m.op("FULLY_CONNECTED", [h, weight(gates * units, units, scale=0.5),
                                           weight(gates * units, scale=0.3)], [batch, gates * units])
            hz, hr, hn = (m.op("STRIDED_SLICE", [rec, m.const(np.int32([0, k * units])),
                                                 m.const(np.int32([0, (k + 1) * units])), m.const(np.int32([1, 1]))],
                               state, options=dict(beginMask=1, endMask=1)) for k in range(3))
            u = sig(m.op("ADD", [xz, hz], state))
            r = sig(m.op("ADD", [xr, hr], state))
            pre_n = m.op("ADD", [xn, m.op("MUL", [r, hn], state)], state)
            n = m.op("RELU6", [pre_n], state) if near_miss else tanh(pre_n)
            keep = m.op("SUB", [m.const(np.float32(1.0)), u], state)
            h1 = m.op("ADD", [m.op("MUL", [u, h], state), m.op("MUL", [keep, n], state)], state)
            h_out = out(h1)
            h1 = step(h1, h)
            buf1 = m.op("RESHAPE", [h_out, m.const(np.int32(buf_shape))], buf_shape)
            body_outputs(i1, t1, buf1, h1, ins[-1])

        return body

    body = make_body()
    body_back = make_body() if bidirectional else -1  # the backward layer's own weights
    m.subgraph(0)
    if not buffer:
        outs = m.op("WHILE", loop_vars, shapes, options=dict(condSubgraphIndex=cond, bodySubgraphIndex=body),
                    outputs=len(shapes))
        m.tensors[outs[0]].type = m.tensors[outs[1]].type = INT32
        m.output(outs[2], outs[3])
        return m.finish(), [_f32(rng, batch, steps, features), _f32(rng, *state)]
    if bidirectional:
        # Keras' Bidirectional as the converter writes it: the backward loop first, over the
        # sequence reversed; the outputs batch-major, the backward one reversed back, concatenated.
        rseq = m.op("REVERSE_V2", [seq, m.const(np.int32([0]))], [steps, batch, features])
        back = m.op("WHILE", loop_vars[:-1] + [rseq], shapes,
                    options=dict(condSubgraphIndex=cond, bodySubgraphIndex=body_back), outputs=len(shapes))
        fwd = m.op("WHILE", loop_vars, shapes, options=dict(condSubgraphIndex=cond, bodySubgraphIndex=body),
                   outputs=len(shapes))
        for outs in (back, fwd):
            m.tensors[outs[0]].type = m.tensors[outs[1]].type = INT32
        if cell == "lstm":  # the whole sequences, batch-major: a reshape at batch 1, else a transpose
            halves = [m.op("RESHAPE", [o[2], m.const(np.int32([batch, steps, units]))], [batch, steps, units])
                      if batch == 1 else
                      m.op("TRANSPOSE", [o[2], m.const(np.int32([1, 0, 2]))], [batch, steps, units])
                      for o in (fwd, back)]
            halves[1] = m.op("REVERSE_V2", [halves[1], m.const(np.int32([1]))], [batch, steps, units])
            merged = m.op("CONCATENATION", halves, [batch, steps, 2 * units], options=dict(axis=2))
        else:  # the last states
            halves = [m.op("RESHAPE", [o[2], m.const(np.int32(state))], state) for o in (fwd, back)]
            merged = m.op("CONCATENATION", halves, [batch, 2 * units], options=dict(axis=1))
        m.output(merged, fwd[3], back[3], *((fwd[4], back[4]) if cell == "lstm" else ()))
        first = rng.integers(0, 9, (batch, steps)).astype(np.int32) if embedded else \
            _f32(rng, batch, steps, features)
        return m.finish(), [first] + ([_f32(rng, *state)] if cell == "lstm" else [])
    outs = m.op("WHILE", loop_vars, shapes, options=dict(condSubgraphIndex=cond, bodySubgraphIndex=body),
                outputs=len(shapes))
    m.tensors[outs[0]].type = m.tensors[outs[1]].type = INT32
    if reverse:
        wide = m.op("RESHAPE", [outs[2], m.const(np.int32([1, steps, batch, units]))], [1, steps, batch, units])
        m.output(m.op("REVERSE_V2", [wide, m.const(np.int32([1]))], [1, steps, batch, units]), outs[3])
    elif masked:
        m.output(*outs[2:len(shapes) - 2])  # the buffer, the previous output, h (and c)
    else:
        m.output(outs[2], outs[3])
    first = rng.integers(0, 9, (batch, steps)).astype(np.int32) if embedded else _f32(rng, batch, steps, features)
    if masked:  # zeros at the start, inside, at the end; a row without any unmasked step
        first = np.int32([[0, 3, 0, 5, 0], [7, 2, 0, 0, 4], [0, 0, 0, 0, 0]])
    inputs = [first] + ([_f32(rng, *state)] if cell == "lstm" else [])
    return m.finish(), inputs


@case
def lstm_loop():
    return recurrent_loop("lstm")


@case
def lstm_loop_split_gates():
    return recurrent_loop("lstm", split_gates=True)


@case
def lstm_loop_backward():
    return recurrent_loop("lstm", reverse=True)


@case
def lstm_loop_state_only():
    return recurrent_loop("lstm", buffer=False)


@case
def gru_loop():
    return recurrent_loop("gru")


@case
def gru_loop_near_miss():
    return recurrent_loop("gru", near_miss=True)


@case
def gru_loop_float16():
    return recurrent_loop("gru", weights="float16")


@case
def lstm_loop_float16():
    return recurrent_loop("lstm", weights="float16")


@case
def gru_loop_embedded():
    return recurrent_loop("gru", embedded=True)


@case
def lstm_loop_embedded():
    return recurrent_loop("lstm", embedded=True)


@case
def simple_rnn_loop_embedded():
    return recurrent_loop("tanh", embedded=True)


@case
def lstm_loop_bidirectional():
    return recurrent_loop("lstm", bidirectional=True, batch=1)


@case
def lstm_loop_bidirectional_batch():
    return recurrent_loop("lstm", bidirectional=True)


@case
def simple_rnn_loop_bidirectional():
    return recurrent_loop("tanh", bidirectional=True, batch=1)


@case
def gru_loop_bidirectional():
    return recurrent_loop("gru", bidirectional=True, embedded=True)


@case
def gru0_loop_bidirectional():
    return recurrent_loop("gru0", bidirectional=True, batch=1)


@case
def lstm_loop_masked():
    return recurrent_loop("lstm", embedded=True, masked="prev")


@case
def lstm_loop_masked_backward():
    return recurrent_loop("lstm", embedded=True, masked="prev", reverse=True)


@case
def lstm_loop_masked_zero():
    return recurrent_loop("lstm", embedded=True, masked="zero")


@case
def gru_loop_masked():
    return recurrent_loop("gru", embedded=True, masked="prev")


@case
def simple_rnn_loop_masked():
    return recurrent_loop("tanh", embedded=True, masked="zero")


@case
def gru_loop_relu():
    return recurrent_loop("gru", relu_cell=True)


@case
def lstm_loop_relu():
    return recurrent_loop("lstm", relu_cell=True)


@case
def gru_loop_reset_before():
    return recurrent_loop("gru0")


@case
def gru_loop_reset_before_near_miss():
    return recurrent_loop("gru0", near_miss=True)


@case
def simple_rnn_loop():
    return recurrent_loop("tanh")


@case
def simple_rnn_loop_relu():
    return recurrent_loop("relu")


@case
def simple_rnn_loop_near_miss():
    return recurrent_loop("relu6")


def keras_layer_norm(bias: bool) -> tuple[bytes, list[np.ndarray]]:
    """Keras 3 LayerNormalization as TensorFlow 2.21's converter writes it: MEAN, NEG,
    SQUARED_DIFFERENCE, MEAN, ADD (epsilon), RSQRT, MUL (gamma), then
    ``x * i + (neg(mean) * i + beta)`` (without beta: ``x * i + neg(mean) * i``)."""
    rng = np.random.default_rng(46)
    shape, keep = [2, 6, 16], [2, 6, 1]
    m = ModelMaker()
    x = m.input(shape)
    axis = m.const(np.int32([2]))
    mean = m.op("MEAN", [x, axis], keep, options=dict(keepDims=True))
    neg = m.op("NEG", [mean], keep)
    var = m.op("MEAN", [m.op("SQUARED_DIFFERENCE", [x, mean], shape), axis], keep, options=dict(keepDims=True))
    rs = m.op("RSQRT", [m.op("ADD", [var, m.const(np.float32(1e-3))], keep)], keep)
    i = m.op("MUL", [rs, m.const(_f32(rng, 1, 1, 16))], shape)
    shift = m.op("MUL", [neg, i], shape)
    if bias:
        shift = m.op("ADD", [shift, m.const(_f32(rng, 1, 1, 16))], shape)
    m.output(m.op("ADD", [m.op("MUL", [x, i], shape), shift], shape))
    return m.finish(), [(_f32(rng, *shape) * 3 + 1).astype(np.float32)]


@case
def layer_norm_keras3():
    return keras_layer_norm(bias=True)


@case
def layer_norm_keras3_no_beta():
    return keras_layer_norm(bias=False)


_UNIT = dict(strideH=1, strideW=1, dilationHFactor=1, dilationWFactor=1)


def dilated_conv(kind: str) -> tuple[bytes, list[np.ndarray]]:
    """TensorFlow's dilated convolution: SPACE_TO_BATCH_ND, a VALID convolution, BATCH_TO_SPACE_ND.

    ``depthwise``: 2x2 blocks around a 3x3 depthwise convolution (multiplier 2, RELU6),
    paddings and crops that differ; ``conv1d``: a dilated Conv1D (block 3, EXPAND_DIMS,
    a 1x5 CONV_2D with bias, RESHAPE; ``conv1d_bias_after``: and an ADD of a per-channel
    bias with a fused RELU after BATCH_TO_SPACE_ND); ``same``: a near miss (SAME padding inside), computed
    by the operators one by one.
    """
    rng = np.random.default_rng(47)
    m = ModelMaker()
    if kind == "depthwise":
        x = m.input([1, 9, 10, 4])
        s2b = m.op("SPACE_TO_BATCH_ND", [x, m.const(np.int32([2, 2])), m.const(np.int32([[2, 3], [2, 2]]))],
                   [4, 7, 7, 4])
        conv = m.op("DEPTHWISE_CONV_2D", [s2b, m.const(_f32(rng, 1, 3, 3, 8)), m.const(_f32(rng, 8))], [4, 5, 5, 8],
                    options=dict(padding=schema.Padding.VALID, depthMultiplier=2, fusedActivationFunction=3, **_UNIT))
        out = m.op("BATCH_TO_SPACE_ND", [conv, m.const(np.int32([2, 2])), m.const(np.int32([[0, 1], [0, 0]]))],
                   [1, 9, 10, 8])
        inputs = [_f32(rng, 1, 9, 10, 4, scale=3.0)]
    elif kind in ("conv1d", "conv1d_bias_after"):
        x = m.input([1, 12, 3])
        s2b = m.op("SPACE_TO_BATCH_ND", [x, m.const(np.int32([3])), m.const(np.int32([[3, 3]]))], [3, 6, 3])
        grown = m.op("EXPAND_DIMS", [s2b, m.const(np.int32(1))], [3, 1, 6, 3])
        conv = m.op("CONV_2D", [grown, m.const(_f32(rng, 5, 1, 3, 3)), m.const(_f32(rng, 5))], [3, 1, 4, 5],
                    options=dict(padding=schema.Padding.VALID, **_UNIT))
        flat = m.op("RESHAPE", [conv, m.const(np.int32([3, 4, 5]))], [3, 4, 5])
        out = m.op("BATCH_TO_SPACE_ND", [flat, m.const(np.int32([3])), m.const(np.int32([[0, 0]]))], [1, 12, 5])
        if kind == "conv1d_bias_after":  # Keras' dilated Conv1D: the bias (and activation) after the block
            out = m.op("ADD", [out, m.const(_f32(rng, 5))], [1, 12, 5], options=dict(fusedActivationFunction=1))
        inputs = [_f32(rng, 1, 12, 3)]
    else:
        x = m.input([1, 8, 8, 2])
        s2b = m.op("SPACE_TO_BATCH_ND", [x, m.const(np.int32([2, 2])), m.const(np.int32([[0, 0], [0, 0]]))],
                   [4, 4, 4, 2])
        conv = m.op("CONV_2D", [s2b, m.const(_f32(rng, 3, 3, 3, 2)), m.const(_f32(rng, 3))], [4, 4, 4, 3],
                    options=dict(padding=schema.Padding.SAME, **_UNIT))
        out = m.op("BATCH_TO_SPACE_ND", [conv, m.const(np.int32([2, 2])), m.const(np.int32([[0, 0], [0, 0]]))],
                   [1, 8, 8, 3])
        inputs = [_f32(rng, 1, 8, 8, 2)]
    m.output(out)
    return m.finish(), inputs


for _kind in ("depthwise", "conv1d", "conv1d_bias_after", "same"):
    KERAS_CASES[f"dilated_conv_{_kind}"] = lambda kind=_kind: dilated_conv(kind)


def einsum_dense(kind: str) -> tuple[bytes, list[np.ndarray]]:
    """Keras' EinsumDense (MultiHeadAttention's projections): FULLY_CONNECTED (keep_num_dims),
    RESHAPE splitting the 12 units into 3 x 4, ADD of a bias. ``heads``: a [3, 4] bias with a
    fused RELU; ``both``: the FULLY_CONNECTED has its own bias too and the added one is
    [1, 1, 3, 4]; ``rows``: a near miss, the added constant varies along the rows ([5, 1, 1]);
    ``dynamic``: the sequence length is dynamic and the RESHAPE's new shape comes from SHAPE
    (of the input), GATHER and CONCATENATION written after the FULLY_CONNECTED (a Keras model
    over ``keras.Input((None, 6))``)."""
    rng = np.random.default_rng(49)
    m = ModelMaker()
    x = m.input([2, 5, 6])
    if kind == "dynamic":
        _signature(m, x, [2, -1, 6])
    fc_bias = m.const(_f32(rng, 12)) if kind == "both" else -1
    fc = m.op("FULLY_CONNECTED", [x, m.const(_f32(rng, 12, 6)), fc_bias], [2, 5, 12], options=dict(keepNumDims=True))
    if kind == "dynamic":
        _signature(m, fc, [2, -1, 12])
        lead = m.op("GATHER", [m.op("SHAPE", [x], [3], out_dtype=np.int32, options=dict(outType=INT32)),
                               m.const(np.int32([0, 1]))], [2], out_dtype=np.int32, options=dict(axis=0))
        target = m.op("CONCATENATION", [lead, m.const(np.int32([3, 4]))], [4], out_dtype=np.int32,
                      options=dict(axis=0))
        heads = _signature(m, m.op("RESHAPE", [fc, target], [2, 5, 3, 4]), [2, -1, 3, 4])
    else:
        heads = m.op("RESHAPE", [fc, m.const(np.int32([2, 5, 3, 4]))], [2, 5, 3, 4])
    shape = {"heads": (3, 4), "both": (1, 1, 3, 4), "rows": (5, 1, 1), "dynamic": (3, 4)}[kind]
    out = m.op("ADD", [heads, m.const(_f32(rng, *shape))], [2, 5, 3, 4],
               options=dict(fusedActivationFunction=1 if kind == "heads" else 0))
    if kind == "dynamic":
        _signature(m, out, [2, -1, 3, 4])
    m.output(out)
    return m.finish(), [_f32(rng, 2, 5, 6)]


for _kind in ("heads", "both", "rows", "dynamic"):
    KERAS_CASES[f"einsum_dense_{_kind}"] = lambda kind=_kind: einsum_dense(kind)


def heads_projection(perm: tuple[int, ...]) -> tuple[bytes, list[np.ndarray]]:
    """MultiHeadAttention's query/value projection as TensorFlow's converter writes it:
    FULLY_CONNECTED (keep_num_dims, no bias) of x [2, 5, 6] to 12 units, RESHAPE [2, 5, 3, 4],
    ADD of the [3, 4] bias, TRANSPOSE ``perm`` ([0, 2, 1, 3]: heads first; [0, 2, 3, 1], the
    key's, a near miss)."""
    rng = np.random.default_rng(53)
    m = ModelMaker()
    x = m.input([2, 5, 6])
    fc = m.op("FULLY_CONNECTED", [x, m.const(_f32(rng, 12, 6)), -1], [2, 5, 12], options=dict(keepNumDims=True))
    heads = m.op("RESHAPE", [fc, m.const(np.int32([-1, 5, 3, 4]))], [2, 5, 3, 4])
    biased = m.op("ADD", [heads, m.const(_f32(rng, 3, 4))], [2, 5, 3, 4])
    shape = [[2, 5, 3, 4][p] for p in perm]
    m.output(m.op("TRANSPOSE", [biased, m.const(np.int32(perm))], shape))
    return m.finish(), [_f32(rng, 2, 5, 6)]


KERAS_CASES["heads_projection"] = lambda: heads_projection((0, 2, 1, 3))
KERAS_CASES["heads_projection_key"] = lambda: heads_projection((0, 2, 3, 1))


def dense_on_rows(kind: str) -> tuple[bytes, list[np.ndarray]]:
    """Keras' Dense on a sequence as TensorFlow's converter writes it: RESHAPE [2, 5, 6] ->
    [10, 6], FULLY_CONNECTED without bias, RESHAPE back to [2, 5, 16], ADD of the bias, GELU;
    then a second Dense (FULLY_CONNECTED with keep_num_dims, bias and fused RELU) and a residual
    ADD of its input. ``regroup``: a near miss, the first unflattening RESHAPE gives [2, 10, 8]
    (not the rows' leading shape)."""
    rng = np.random.default_rng(50)
    m = ModelMaker()
    x = m.input([2, 5, 6])
    rows = m.op("RESHAPE", [x, m.const(np.int32([-1, 6]))], [10, 6])
    fc = m.op("FULLY_CONNECTED", [rows, m.const(_f32(rng, 16, 6)), -1], [10, 16])
    shape = [2, 10, 8] if kind == "regroup" else [2, 5, 16]
    back = m.op("RESHAPE", [fc, m.const(np.int32(shape))], shape)
    biased = m.op("ADD", [back, m.const(_f32(rng, shape[-1], scale=0.3))], shape)
    act = m.op("GELU", [biased], shape)
    y = m.op("RESHAPE", [act, m.const(np.int32([2, 5, 16]))], [2, 5, 16]) if kind == "regroup" else act
    fc2 = m.op("FULLY_CONNECTED", [y, m.const(_f32(rng, 16, 16, scale=0.25)), m.const(_f32(rng, 16, scale=0.3))],
               [2, 5, 16], options=dict(keepNumDims=True, fusedActivationFunction=1))
    m.output(m.op("ADD", [fc2, y], [2, 5, 16]))
    return m.finish(), [_f32(rng, 2, 5, 6)]


for _kind in ("rows", "regroup"):
    KERAS_CASES[f"dense_on_{_kind}"] = lambda kind=_kind: dense_on_rows(kind)


def time_distributed(kind: str) -> tuple[bytes, list[np.ndarray]]:
    """Keras' TimeDistributed as TensorFlow's converter unrolls it: for each of the 5 steps of
    x [2, 5, 6] along axis 1, STRIDED_SLICE (shrinking that axis), a Dense (FULLY_CONNECTED),
    then ``swish``: LOGISTIC and MUL (``softmax``: a fused RELU, then SOFTMAX); PACK along
    axis 1. ``near_miss``: the step 3 uses other weights (no TimeDistributed)."""
    rng = np.random.default_rng(52)
    m = ModelMaker()
    x = m.input([2, 5, 6])
    w, bias = m.const(_f32(rng, 4, 6, scale=0.5)), m.const(_f32(rng, 4, scale=0.3))
    other = m.const(_f32(rng, 4, 6, scale=0.5))
    steps = []
    for t in range(5):
        x_t = m.op("STRIDED_SLICE", [x, m.const(np.int32([0, t, 0])), m.const(np.int32([0, t + 1, 0])),
                                     m.const(np.int32([1, 1, 1]))], [2, 6],
                   options=dict(beginMask=5, endMask=5, shrinkAxisMask=2))
        weights = other if kind == "near_miss" and t == 3 else w
        if kind == "softmax":
            y = m.op("FULLY_CONNECTED", [x_t, weights, bias], [2, 4], options=dict(fusedActivationFunction=1))
            y = m.op("SOFTMAX", [y], [2, 4], options=dict(beta=1.0))
        else:
            y = m.op("FULLY_CONNECTED", [x_t, weights, bias], [2, 4])
            y = m.op("MUL", [y, m.op("LOGISTIC", [y], [2, 4])], [2, 4])
        steps.append(y)
    m.output(m.op("PACK", steps, [2, 5, 4], options=dict(valuesCount=5, axis=1)))
    return m.finish(), [_f32(rng, 2, 5, 6)]


for _kind in ("swish", "softmax", "near_miss"):
    KERAS_CASES[f"time_distributed_{_kind}"] = lambda kind=_kind: time_distributed(kind)


def embedding(shift: int = 0) -> tuple[bytes, list[np.ndarray]]:
    """Keras' Embedding: ``GATHER(table, SELECT_V2(LESS(ids, 0), ADD(ids, vocab), ids))`` on
    ids in [-vocab, vocab); ``shift`` != 0 is a near miss (``ADD(ids, vocab + shift)``)."""
    rng = np.random.default_rng(50)
    vocab = 11
    m = ModelMaker()
    ids = m.input([2, 7], np.int32)
    neg = m.op("LESS", [ids, m.const(np.int32(0))], [2, 7], out_dtype=np.bool_)
    wrapped = m.op("ADD", [ids, m.const(np.int32(vocab + shift))], [2, 7], out_dtype=np.int32)
    index = m.op("SELECT_V2", [neg, wrapped, ids], [2, 7], out_dtype=np.int32)
    m.output(m.op("GATHER", [m.const(_f32(rng, vocab, 4)), index], [2, 7, 4], options=dict(axis=0)))
    values = rng.integers(-vocab, vocab, (2, 7)).astype(np.int32)
    values[values < -vocab + 1] = 0  # (valid for the near miss too)
    return m.finish(), [values]


KERAS_CASES["embedding"] = embedding
KERAS_CASES["embedding_near_miss"] = lambda: embedding(shift=-1)


def embedding_int8(per_channel: bool = False, second_reader: bool = False) -> tuple[bytes, list[np.ndarray]]:
    """An Embedding converted with ``Optimize.DEFAULT`` (dynamic-range quantization): GATHER
    from an int8 table (per-tensor scale and zero point, or per-column scales along axis 1)
    into an int8 tensor with the table's quantization, then DEQUANTIZE. ``second_reader``: the
    int8 gather output is also a model output (it must stay int8)."""
    rng = np.random.default_rng(51)
    vocab, dim = 13, 6
    m = ModelMaker()
    ids = m.input([2, 5], np.int32)
    table = rng.integers(-128, 128, (vocab, dim)).astype(np.int8)
    quant = ([float(v) for v in rng.random(dim) * 0.05 + 0.01], [0] * dim, 1) if per_channel else ([0.037], [3], 0)
    t = m.const(table, quant=quant)
    g = m.op("GATHER", [t, ids], [2, 5, dim], out_dtype=np.int8, options=dict(axis=0))
    q = schema.QuantizationParametersT()
    q.scale, q.zeroPoint, q.quantizedDimension = list(quant[0]), list(quant[1]), 2 if per_channel else 0
    m.tensors[g].quantization = q
    real = m.op("DEQUANTIZE", [g], [2, 5, dim])
    m.output(m.op("ADD", [real, m.const(_f32(rng, dim))], [2, 5, dim]), *([g] if second_reader else []))
    return m.finish(), [rng.integers(0, vocab, (2, 5)).astype(np.int32)]


KERAS_CASES["embedding_int8"] = embedding_int8
KERAS_CASES["embedding_int8_per_channel"] = lambda: embedding_int8(per_channel=True)



@case
def signal_frame():
    """``tf.signal.frame`` on an open batch: the frame count from SHAPE, SPLIT_V (sizes 1, 1, 0:
    an empty third piece) and a RESHAPE to a scalar whose shape is an empty constant (a buffer
    without bytes, as the converter writes it), then STRIDED_SLICE to whole frames and RESHAPE."""
    rng = np.random.default_rng(48)
    m = ModelMaker()
    x = _signature(m, m.input([1, 30]), [-1, 30])
    shape = m.op("SHAPE", [x], [2], out_dtype=np.int32, options=dict(outType=INT32))
    batch, length, _ = m.op("SPLIT_V", [shape, m.const(np.int32([1, 1, 0])), m.const(np.int32(0))],
                            [[1], [1], [0]], out_dtype=np.int32, options=dict(numSplits=3), outputs=3)
    n = m.op("RESHAPE", [length, m.const(np.zeros(0, np.int32))], [], out_dtype=np.int32)
    frames = m.op("FLOOR_DIV", [n, m.const(np.int32(8))], [], out_dtype=np.int32)
    framed_shape = m.op("CONCATENATION", [batch, m.op("PACK", [frames, m.const(np.int32(8))], [2],
                                                      out_dtype=np.int32, options=dict(valuesCount=2))],
                        [3], out_dtype=np.int32)
    end = m.op("CONCATENATION", [batch, m.op("RESHAPE", [m.op("MUL", [frames, m.const(np.int32(8))], [],
                                                              out_dtype=np.int32), m.const(np.int32([1]))],
                                             [1], out_dtype=np.int32)], [2], out_dtype=np.int32)
    whole = _signature(m, m.op("STRIDED_SLICE", [x, m.const(np.int32([0, 0])), end, m.const(np.int32([1, 1]))],
                               [1, 1]), [-1, -1])
    out = _signature(m, m.op("RESHAPE", [whole, framed_shape], [1, 1, 8]), [-1, -1, 8])
    m.output(out)
    return m.finish(), [_f32(rng, 1, 30)]


def seed_state(output_reads_state: bool = False) -> tuple[bytes, list[np.ndarray]]:
    """Keras 3's random augmentation layers at inference: the identity, but every call advances a
    seed generator's state (CALL_ONCE sets it up in its own subgraph; VAR_HANDLE, READ_VARIABLE,
    ADD, ASSIGN_VARIABLE) that no output reads. ``output_reads_state``: the output also adds the
    state (a stateful layer: refused)."""
    rng = np.random.default_rng(49)
    m = ModelMaker()
    x = m.input([1, 4])
    init = m.subgraph()
    var0 = m.op("VAR_HANDLE", [], [], options=dict(sharedName="seed"))
    m.tensors[var0].type = schema.TensorType.RESOURCE
    m.op("ASSIGN_VARIABLE", [var0, m.const(np.int32([7, 0]))], [])
    m.operators[-1].outputs = []  # ASSIGN_VARIABLE and CALL_ONCE write no tensor
    m.subgraph(0)
    m.op("CALL_ONCE", [], [], options=dict(initSubgraphIndex=init))
    m.operators[-1].outputs = []
    var = m.op("VAR_HANDLE", [], [], options=dict(sharedName="seed"))
    m.tensors[var].type = schema.TensorType.RESOURCE
    state = m.op("READ_VARIABLE", [var], [2], out_dtype=np.int32)
    m.op("ASSIGN_VARIABLE", [var, m.op("ADD", [state, m.const(np.int32([0, 1]))], [2], out_dtype=np.int32)], [])
    m.operators[-1].outputs = []
    y = m.op("MUL", [x, m.const(_f32(rng, 1, 4))], [1, 4])
    if output_reads_state:
        y = m.op("MUL", [y, m.op("CAST", [m.op("SUM", [state, m.const(np.int32([0]))], [], out_dtype=np.int32)], [])],
                 [1, 4])
    m.output(y)
    return m.finish(), [_f32(rng, 1, 4)]


KERAS_CASES["seed_state"] = seed_state


@case
def group_norm():
    """Keras 3's GroupNormalization(4) on [1, 12, 16] as TensorFlow 2.21 writes it: RESHAPE to
    [1, 12, 4, 4], MEAN over (1, 3), NEG, SQUARED_DIFFERENCE, MEAN, ADD, RSQRT, MUL by gamma
    (per channel), the negated-mean form with beta, RESHAPE back (one normalization kernel)."""
    rng = np.random.default_rng(50)
    m = ModelMaker()
    x = m.input([1, 12, 16])
    g = m.op("RESHAPE", [x, m.const(np.int32([1, 12, 4, 4]))], [1, 12, 4, 4])
    axes = m.const(np.int32([1, 3]))
    mean = m.op("MEAN", [g, axes], [1, 1, 4, 1], options=dict(keepDims=True))
    neg = m.op("NEG", [mean], [1, 1, 4, 1])
    sd = m.op("SQUARED_DIFFERENCE", [g, mean], [1, 12, 4, 4])
    var = m.op("MEAN", [sd, axes], [1, 1, 4, 1], options=dict(keepDims=True))
    r = m.op("RSQRT", [m.op("ADD", [var, m.const(np.float32(1e-3))], [1, 1, 4, 1])], [1, 1, 4, 1])
    i = m.op("MUL", [r, m.const(_f32(rng, 1, 1, 4, 4) * 0.5 + 1)], [1, 1, 4, 4])
    shift = m.op("ADD", [m.op("MUL", [neg, i], [1, 1, 4, 4]), m.const(_f32(rng, 1, 1, 4, 4))], [1, 1, 4, 4])
    y = m.op("ADD", [m.op("MUL", [g, i], [1, 12, 4, 4]), shift], [1, 12, 4, 4])
    m.output(m.op("RESHAPE", [y, m.const(np.int32([1, 12, 16]))], [1, 12, 16]))
    return m.finish(), [(_f32(rng, 1, 12, 16) * 2 + 1).astype(np.float32)]


@case
def rms_norm():
    """Keras 3's RMSNormalization on [1, 10, 16] as TensorFlow 2.21 writes it: SQUARE, MEAN over
    the last axis, ADD epsilon, RSQRT, MUL by x, MUL by the scale (one normalization kernel)."""
    rng = np.random.default_rng(51)
    m = ModelMaker()
    x = m.input([1, 10, 16])
    ms = m.op("MEAN", [m.op("SQUARE", [x], [1, 10, 16]), m.const(np.int32([-1]))], [1, 10, 1],
              options=dict(keepDims=True))
    r = m.op("RSQRT", [m.op("ADD", [ms, m.const(np.float32(1e-6))], [1, 10, 1])], [1, 10, 1])
    y = m.op("MUL", [m.op("MUL", [x, r], [1, 10, 16]), m.const(_f32(rng, 16) * 0.5 + 1)], [1, 10, 16])
    m.output(y)
    return m.finish(), [(_f32(rng, 1, 10, 16) * 2 + 0.5).astype(np.float32)]


@case
def unit_norm():
    """Keras 3's UnitNormalization over the last axis (SQUARE, SUM, RSQRT, MINIMUM by 1e12, MUL) and
    TFLite's L2_NORMALIZATION, a row of zeros in each (one normalization kernel each)."""
    rng = np.random.default_rng(52)
    m = ModelMaker()
    x = m.input([1, 10, 16])
    total = m.op("SUM", [m.op("SQUARE", [x], [1, 10, 16]), m.const(np.int32([-1]))], [1, 10, 1],
                 options=dict(keepDims=True))
    r = m.op("MINIMUM", [m.op("RSQRT", [total], [1, 10, 1]), m.const(np.float32(1e12))], [1, 10, 1])
    y = m.input([1, 10, 16])  # (another input: the two squares of one would be computed once)
    m.output(m.op("MUL", [x, r], [1, 10, 16]), m.op("L2_NORMALIZATION", [y], [1, 10, 16]))
    v, w = _f32(rng, 1, 10, 16), _f32(rng, 1, 10, 16)
    v[0, 3] = w[0, 5] = 0.0
    return m.finish(), [v, w]
