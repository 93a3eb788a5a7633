"""Recurrent operators: gru, gru_cell, lstm, lstm_cell.

Spec: https://www.w3.org/TR/webnn/#api-mlgraphbuilder-gru (and -grucell, -lstm, -lstmcell)

The equations are the spec's (its emulation code in terms of matmul, add, mul and the
activations), with gate row offsets from ``layout``:

* GRU (``zrn``: update z, reset r, new n; ``rzn``: r, z, n)::

      z = f(x Wz' + h Rz' + bz + rbz)        r = f(x Wr' + h Rr' + br + rbr)
      n = g(x Wn' + bn + r * (h Rn' + rbn))  if reset_after (the default)
      n = g(x Wn' + bn + (r * h) Rn' + rbn)  otherwise
      h = z * h + (1 - z) * n

* LSTM (``iofg`` or ``ifgo``; the peephole weight is always ordered i, o, f and multiplies
  the *previous* cell state, as in the spec)::

      i = f(x Wi' + h Ri' + bi + rbi + pi * c)   o = f(x Wo' + h Ro' + bo + rbo + po * c)
      f = f(x Wf' + h Rf' + bf + rbf + pf * c)   g = g(x Wg' + h Rg' + bg + rbg)
      c = f * c + i * g                          h = o * h2(c)

  with ``activations = [f, g(, h2)]`` from ``"relu"``, ``"sigmoid"``, ``"tanh"`` (defaults
  sigmoid, tanh (, tanh)).

For ``direction="backward"`` the time steps run from last to first, ``"both"`` runs a forward
(direction 0) and a backward (direction 1) network. The returned sequence holds, at time
index t, the state each direction produced from input t (the WPT vectors' order).

Kernels (``shaders/recurrent/``) rather than a decomposition into ~20 builder ops per step:
the input projection x W' + biases of every step and direction at once (one ``gemm`` on the
tile kernel where the weights and biases are constants, else the ``project`` kernel:
:func:`_projection`); then, where
one step's recurrent product is small (hidden_size * gates * hidden_size at most
:data:`SEQUENCE_MAX_MACS`), one ``sequence`` kernel runs every step: a workgroup per
direction and batch row keeps the state in workgroup memory (and the recurrent weight, where
it fits beside it), one barrier per step (two for a GRU with ``reset_after=False``, whose new
gate reads ``r * h`` of every unit), and writes the final state (two kernels for the whole
operator; one where the input weight is a constant identity with zero input biases, which
takes x itself as the projection: :func:`_identity_projection`). A ``gru`` whose
update and reset gates are constant (zero weights, ``relu`` gate activation, biases giving
z = 0 and r = 1: a plain RNN in GRU form, :func:`_plain_rnn`) runs the new gate alone there.
Otherwise (``WEBNN_GPU_FORCE_RECURRENT=steps|sequence`` forces either) ``init``
loads the initial state (or zeros) into an f32 state buffer, then one step kernel per time
step (two for a GRU with ``reset_after=False``) updates the state (both directions in one
launch, ping-ponging two state buffers; each launch reads its step index from a tiny
constant, so every step shares one pipeline), and ``finish`` writes the final state in the
operands' data type. The step kernel is ``step4`` for a constant recurrent weight with
``hidden_size % 4 == 0`` (the weight packed so that neighbouring invocations stream through
consecutive memory, 4 or 8 hidden units and up to 4 batch rows per invocation, read as u64
words where the adapter has them, the state's columns shared across a subgroup:
:func:`_step_form`, :func:`_step_pack`), else ``lstm_step`` / ``gru_step`` (one unit per
invocation, the weight as given); a plain RNN in GRU form runs its new gate alone there too.
Dot products accumulate in f32 and the state stays in f32 between steps, also for float16
operands (a float16 input is cast to float32 for the per-step path's gemm).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, overload

import numpy as np

from .. import _env
from .. import _validate as V
from .._dtypes import FLOAT_TYPES as FLOATS
from .._kernels import WORKGROUP
from .._lower import workgroup_bytes
from ..builder import MLGraphBuilder, MLOperand, Value
from ._registry import builder_method, lowering, support

ACTIVATIONS = ("relu", "sigmoid", "tanh")
DIRECTIONS = ("forward", "backward", "both")
GRU_LAYOUTS = ("zrn", "rzn")
LSTM_LAYOUTS = ("iofg", "ifgo")


# ---------------------------------------------------------------- validation helpers
def _enum(op, label, arg, value, allowed) -> str:
    if not isinstance(value, str) or value not in allowed:
        V.fail(op, label, arg, "one of " + ", ".join(repr(a) for a in allowed), value)
    return value


def _activations(op, label, value, count: int, default: Sequence[str]) -> list[str]:
    if value is None:
        return list(default)
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        V.fail(op, label, "activations", f"a sequence of {count} of {', '.join(ACTIVATIONS)}", value)
    if len(value) != count or any(not isinstance(a, str) or a not in ACTIVATIONS for a in value):
        V.fail(op, label, "activations", f"a sequence of {count} of {', '.join(ACTIVATIONS)}", value)
    return list(value)


def _size(op, label, arg, value, gates: int) -> int:
    n = V.int_value(op, label, arg, value, lo=1, hi=V.MAX_DIM)
    if arg == "hidden_size" and gates * n > V.MAX_DIM:
        V.fail(op, label, arg, f"a value with {gates} * hidden_size <= {V.MAX_DIM}", value)
    return n


class _Checker:
    """Checks the operands of one recurrent call against the first operand's data type."""

    def __init__(self, builder: MLGraphBuilder, op: str, label: str):
        self.b, self.op, self.label = builder, op, label
        self.dtype: str = ""  # set by the first (required) operand

    @overload
    def operand(self, arg: str, x, *, optional: Literal[False] = False) -> Value: ...

    @overload
    def operand(self, arg: str, x, *, optional: bool) -> Value | None: ...

    def operand(self, arg: str, x, *, optional: bool = False) -> Value | None:
        v = self.b._operand(self.op, self.label, arg, x, optional=optional)
        if v is None:
            return None
        if not self.dtype:
            if v.data_type not in FLOATS:
                V.fail(self.op, self.label, arg, "an operand of data type float32 or float16", v.data_type)
            self.dtype = v.data_type
        elif v.data_type != self.dtype:
            V.fail(self.op, self.label, arg, f"the data type of 'input' ({self.dtype})", v.data_type)
        return v

    def shape(self, arg: str, v: Value | None, want: Sequence[int], what: str) -> None:
        if v is not None and tuple(v.shape) != tuple(want):
            V.fail(self.op, self.label, arg, f"shape {list(want)} ({what})", list(v.shape))


def _gate_weights(c: _Checker, nd: int | None, gates: int, hidden: int, isz: int, vw: Value, vr: Value) -> None:
    """weight ``[(num_directions,) gates * hidden_size, input_size]`` and recurrent_weight
    ``[..., hidden_size]``; ``nd`` None for the cell operators (no direction axis)."""
    lead, pre = ((nd,), "num_directions, ") if nd else ((), "")
    c.shape("weight", vw, (*lead, gates * hidden, isz), f"[{pre}{gates} * hidden_size, input_size]")
    c.shape("recurrent_weight", vr, (*lead, gates * hidden, hidden), f"[{pre}{gates} * hidden_size, hidden_size]")


def _gate_biases(c: _Checker, nd: int | None, gates: int, hidden: int, vb, vrb) -> None:
    """bias and recurrent_bias ``[(num_directions,) gates * hidden_size]`` (when given)."""
    lead, pre = ((nd,), "num_directions, ") if nd else ((), "")
    for name, v in (("bias", vb), ("recurrent_bias", vrb)):
        c.shape(name, v, (*lead, gates * hidden), f"[{pre}{gates} * hidden_size]")


def _rank(c: _Checker, arg: str, v: Value, rank: int, what: str) -> None:
    if len(v.shape) != rank:
        V.fail(c.op, c.label, arg, f"a {rank}-D operand ({what})", list(v.shape))


# ---------------------------------------------------------------- gru / gru_cell
# IDL: sequence<MLOperand> gru(MLOperand input, MLOperand weight, MLOperand recurrentWeight,
#          [EnforceRange] unsigned long steps, [EnforceRange] unsigned long hiddenSize,
#          optional MLGruOptions options = {});
@builder_method
def gru(self: MLGraphBuilder, input: MLOperand, weight: MLOperand, recurrent_weight: MLOperand, steps: int,
        hidden_size: int, *, bias: MLOperand | None = None, recurrent_bias: MLOperand | None = None,
        initial_hidden_state: MLOperand | None = None, reset_after: bool = True, return_sequence: bool = False,
        direction: str = "forward", layout: str = "zrn", activations: Sequence[str] | None = None,
        label: str = "", **kwargs) -> list[MLOperand]:
    """A gated recurrent unit network over ``steps`` time steps.

    Spec: https://www.w3.org/TR/webnn/#api-mlgraphbuilder-gru

    Arguments:
        input (MLOperand): float32 or float16, ``[steps, batch_size, input_size]``.
        weight (MLOperand): ``[num_directions, 3 * hidden_size, input_size]``, gate rows in
            ``layout`` order.
        recurrent_weight (MLOperand): ``[num_directions, 3 * hidden_size, hidden_size]``.
        steps (int): the number of time steps (> 0, ``input.shape[0]``).
        hidden_size (int): the size of the hidden state (> 0).
        bias, recurrent_bias (MLOperand | None): ``[num_directions, 3 * hidden_size]``;
            default zeros.
        initial_hidden_state (MLOperand | None): ``[num_directions, batch_size, hidden_size]``;
            default zeros.
        reset_after (bool): apply the reset gate after the recurrent product (default True).
        return_sequence (bool): also return the state of every step (default False).
        direction (str): ``"forward"`` (default), ``"backward"`` or ``"both"``
            (num_directions = 2).
        layout (str): gate order ``"zrn"`` (default) or ``"rzn"``.
        activations (sequence[str] | None): two of ``"relu"``, ``"sigmoid"``, ``"tanh"``: for
            the update/reset gates and the new gate (default sigmoid, tanh).
        label (str): a name for errors and GPU objects.

    Returns:
        list[MLOperand]: the last hidden state ``[num_directions, batch_size, hidden_size]``,
        then (with ``return_sequence``) every step's ``[steps, num_directions, batch_size,
        hidden_size]``.

    Raises:
        MLTypeError: a data type other than float32/float16 or mismatched data types, a wrong
            rank or shape, steps or hidden_size of 0 or not matching, a bad option value, an
            operand of another builder, an unknown option.
        InvalidStateError: the builder has built its graph, or the context is gone.
    """
    op = "gru"
    V.check_kwargs(op, label, kwargs)
    self._check_usable(op, label)
    c = _Checker(self, op, label)
    vx = c.operand("input", input)
    vw = c.operand("weight", weight)
    vr = c.operand("recurrent_weight", recurrent_weight)
    vb = c.operand("bias", bias, optional=True)
    vrb = c.operand("recurrent_bias", recurrent_bias, optional=True)
    vh = c.operand("initial_hidden_state", initial_hidden_state, optional=True)
    steps = _size(op, label, "steps", steps, 1)
    hidden = _size(op, label, "hidden_size", hidden_size, 3)
    reset_after = V.bool_value(op, label, "reset_after", reset_after)
    return_sequence = V.bool_value(op, label, "return_sequence", return_sequence)
    direction = _enum(op, label, "direction", direction, DIRECTIONS)
    layout = _enum(op, label, "layout", layout, GRU_LAYOUTS)
    acts = _activations(op, label, activations, 2, ("sigmoid", "tanh"))
    nd = 2 if direction == "both" else 1
    _rank(c, "input", vx, 3, "[steps, batch_size, input_size]")
    if vx.shape[0] != steps:
        V.fail(op, label, "steps", f"input.shape[0] ({vx.shape[0]})", steps)
    batch, isz = vx.shape[1], vx.shape[2]
    _gate_weights(c, nd, 3, hidden, isz, vw, vr)
    _gate_biases(c, nd, 3, hidden, vb, vrb)
    c.shape("initial_hidden_state", vh, (nd, batch, hidden), "[num_directions, batch_size, hidden_size]")
    outs: list[tuple[str, tuple[int, ...]]] = [(c.dtype, (nd, batch, hidden))]
    if return_sequence:
        outs.append((c.dtype, (steps, nd, batch, hidden)))
    attrs = dict(steps=steps, hidden_size=hidden, reset_after=reset_after, return_sequence=return_sequence,
                 direction=direction, layout=layout, activations=acts)
    return self._emit(op, [vx, vw, vr, vb, vrb, vh], outs, attrs, label=label)


# IDL: MLOperand gruCell(MLOperand input, MLOperand weight, MLOperand recurrentWeight,
#          MLOperand hiddenState, [EnforceRange] unsigned long hiddenSize,
#          optional MLGruCellOptions options = {});
@builder_method
def gru_cell(self: MLGraphBuilder, input: MLOperand, weight: MLOperand, recurrent_weight: MLOperand,
             hidden_state: MLOperand, hidden_size: int, *, bias: MLOperand | None = None,
             recurrent_bias: MLOperand | None = None, reset_after: bool = True, layout: str = "zrn",
             activations: Sequence[str] | None = None, label: str = "", **kwargs) -> MLOperand:
    """One time step of a gated recurrent unit.

    Spec: https://www.w3.org/TR/webnn/#api-mlgraphbuilder-grucell

    Arguments:
        input (MLOperand): float32 or float16, ``[batch_size, input_size]``.
        weight (MLOperand): ``[3 * hidden_size, input_size]``, gate rows in ``layout`` order.
        recurrent_weight (MLOperand): ``[3 * hidden_size, hidden_size]``.
        hidden_state (MLOperand): ``[batch_size, hidden_size]``.
        hidden_size (int): the size of the hidden state (> 0).
        bias, recurrent_bias (MLOperand | None): ``[3 * hidden_size]``; default zeros.
        reset_after (bool): apply the reset gate after the recurrent product (default True).
        layout (str): gate order ``"zrn"`` (default) or ``"rzn"``.
        activations (sequence[str] | None): two of ``"relu"``, ``"sigmoid"``, ``"tanh"``
            (default sigmoid, tanh).
        label (str): a name for errors and GPU objects.

    Returns:
        MLOperand: the new hidden state ``[batch_size, hidden_size]``.

    Raises:
        MLTypeError: a data type other than float32/float16 or mismatched data types, a wrong
            rank or shape, hidden_size of 0, a bad option value, an operand of another
            builder, an unknown option.
        InvalidStateError: the builder has built its graph, or the context is gone.
    """
    op = "gru_cell"
    V.check_kwargs(op, label, kwargs)
    self._check_usable(op, label)
    c = _Checker(self, op, label)
    vx = c.operand("input", input)
    vw = c.operand("weight", weight)
    vr = c.operand("recurrent_weight", recurrent_weight)
    vh = c.operand("hidden_state", hidden_state)
    vb = c.operand("bias", bias, optional=True)
    vrb = c.operand("recurrent_bias", recurrent_bias, optional=True)
    hidden = _size(op, label, "hidden_size", hidden_size, 3)
    reset_after = V.bool_value(op, label, "reset_after", reset_after)
    layout = _enum(op, label, "layout", layout, GRU_LAYOUTS)
    acts = _activations(op, label, activations, 2, ("sigmoid", "tanh"))
    _rank(c, "input", vx, 2, "[batch_size, input_size]")
    batch, isz = vx.shape
    _gate_weights(c, None, 3, hidden, isz, vw, vr)
    c.shape("hidden_state", vh, (batch, hidden), "[batch_size, hidden_size]")
    _gate_biases(c, None, 3, hidden, vb, vrb)
    attrs = dict(steps=1, hidden_size=hidden, reset_after=reset_after, return_sequence=False,
                 direction="forward", layout=layout, activations=acts)
    return self._emit1(op, [vx, vw, vr, vb, vrb, vh], c.dtype, (batch, hidden), attrs, label=label)


# ---------------------------------------------------------------- lstm / lstm_cell
# IDL: sequence<MLOperand> lstm(MLOperand input, MLOperand weight, MLOperand recurrentWeight,
#          [EnforceRange] unsigned long steps, [EnforceRange] unsigned long hiddenSize,
#          optional MLLstmOptions options = {});
@builder_method
def lstm(self: MLGraphBuilder, input: MLOperand, weight: MLOperand, recurrent_weight: MLOperand, steps: int,
         hidden_size: int, *, bias: MLOperand | None = None, recurrent_bias: MLOperand | None = None,
         peephole_weight: MLOperand | None = None, initial_hidden_state: MLOperand | None = None,
         initial_cell_state: MLOperand | None = None, return_sequence: bool = False, direction: str = "forward",
         layout: str = "iofg", activations: Sequence[str] | None = None, label: str = "",
         **kwargs) -> list[MLOperand]:
    """A long short-term memory network over ``steps`` time steps.

    Spec: https://www.w3.org/TR/webnn/#api-mlgraphbuilder-lstm

    Arguments:
        input (MLOperand): float32 or float16, ``[steps, batch_size, input_size]``.
        weight (MLOperand): ``[num_directions, 4 * hidden_size, input_size]``, gate rows in
            ``layout`` order.
        recurrent_weight (MLOperand): ``[num_directions, 4 * hidden_size, hidden_size]``.
        steps (int): the number of time steps (> 0, ``input.shape[0]``).
        hidden_size (int): the size of the hidden state (> 0).
        bias, recurrent_bias (MLOperand | None): ``[num_directions, 4 * hidden_size]``;
            default zeros.
        peephole_weight (MLOperand | None): ``[num_directions, 3 * hidden_size]`` in i, o, f
            order; default zeros.
        initial_hidden_state, initial_cell_state (MLOperand | None):
            ``[num_directions, batch_size, hidden_size]``; default zeros.
        return_sequence (bool): also return the hidden state of every step (default False).
        direction (str): ``"forward"`` (default), ``"backward"`` or ``"both"``.
        layout (str): gate order ``"iofg"`` (default) or ``"ifgo"``.
        activations (sequence[str] | None): three of ``"relu"``, ``"sigmoid"``, ``"tanh"``:
            for the input/forget/output gates, the cell gate, and the cell state before the
            output gate (default sigmoid, tanh, tanh).
        label (str): a name for errors and GPU objects.

    Returns:
        list[MLOperand]: the last hidden state and the last cell state, each
        ``[num_directions, batch_size, hidden_size]``, then (with ``return_sequence``) every
        step's hidden state ``[steps, num_directions, batch_size, hidden_size]``.

    Raises:
        MLTypeError: a data type other than float32/float16 or mismatched data types, a wrong
            rank or shape, steps or hidden_size of 0 or not matching, a bad option value, an
            operand of another builder, an unknown option.
        InvalidStateError: the builder has built its graph, or the context is gone.
    """
    op = "lstm"
    V.check_kwargs(op, label, kwargs)
    self._check_usable(op, label)
    c = _Checker(self, op, label)
    vx = c.operand("input", input)
    vw = c.operand("weight", weight)
    vr = c.operand("recurrent_weight", recurrent_weight)
    vb = c.operand("bias", bias, optional=True)
    vrb = c.operand("recurrent_bias", recurrent_bias, optional=True)
    vp = c.operand("peephole_weight", peephole_weight, optional=True)
    vh = c.operand("initial_hidden_state", initial_hidden_state, optional=True)
    vc = c.operand("initial_cell_state", initial_cell_state, optional=True)
    steps = _size(op, label, "steps", steps, 1)
    hidden = _size(op, label, "hidden_size", hidden_size, 4)
    return_sequence = V.bool_value(op, label, "return_sequence", return_sequence)
    direction = _enum(op, label, "direction", direction, DIRECTIONS)
    layout = _enum(op, label, "layout", layout, LSTM_LAYOUTS)
    acts = _activations(op, label, activations, 3, ("sigmoid", "tanh", "tanh"))
    nd = 2 if direction == "both" else 1
    _rank(c, "input", vx, 3, "[steps, batch_size, input_size]")
    if vx.shape[0] != steps:
        V.fail(op, label, "steps", f"input.shape[0] ({vx.shape[0]})", steps)
    batch, isz = vx.shape[1], vx.shape[2]
    _gate_weights(c, nd, 4, hidden, isz, vw, vr)
    _gate_biases(c, nd, 4, hidden, vb, vrb)
    c.shape("peephole_weight", vp, (nd, 3 * hidden), "[num_directions, 3 * hidden_size]")
    c.shape("initial_hidden_state", vh, (nd, batch, hidden), "[num_directions, batch_size, hidden_size]")
    c.shape("initial_cell_state", vc, (nd, batch, hidden), "[num_directions, batch_size, hidden_size]")
    outs: list[tuple[str, tuple[int, ...]]] = [(c.dtype, (nd, batch, hidden)), (c.dtype, (nd, batch, hidden))]
    if return_sequence:
        outs.append((c.dtype, (steps, nd, batch, hidden)))
    attrs = dict(steps=steps, hidden_size=hidden, return_sequence=return_sequence, direction=direction,
                 layout=layout, activations=acts)
    return self._emit(op, [vx, vw, vr, vb, vrb, vp, vh, vc], outs, attrs, label=label)


# IDL: sequence<MLOperand> lstmCell(MLOperand input, MLOperand weight, MLOperand recurrentWeight,
#          MLOperand hiddenState, MLOperand cellState, [EnforceRange] unsigned long hiddenSize,
#          optional MLLstmCellOptions options = {});
@builder_method
def lstm_cell(self: MLGraphBuilder, input: MLOperand, weight: MLOperand, recurrent_weight: MLOperand,
              hidden_state: MLOperand, cell_state: MLOperand, hidden_size: int, *, bias: MLOperand | None = None,
              recurrent_bias: MLOperand | None = None, peephole_weight: MLOperand | None = None,
              layout: str = "iofg", activations: Sequence[str] | None = None, label: str = "",
              **kwargs) -> list[MLOperand]:
    """One time step of a long short-term memory network.

    Spec: https://www.w3.org/TR/webnn/#api-mlgraphbuilder-lstmcell

    Arguments:
        input (MLOperand): float32 or float16, ``[batch_size, input_size]``.
        weight (MLOperand): ``[4 * hidden_size, input_size]``, gate rows in ``layout`` order.
        recurrent_weight (MLOperand): ``[4 * hidden_size, hidden_size]``.
        hidden_state, cell_state (MLOperand): ``[batch_size, hidden_size]``.
        hidden_size (int): the size of the hidden state (> 0).
        bias, recurrent_bias (MLOperand | None): ``[4 * hidden_size]``; default zeros.
        peephole_weight (MLOperand | None): ``[3 * hidden_size]`` in i, o, f order.
        layout (str): gate order ``"iofg"`` (default) or ``"ifgo"``.
        activations (sequence[str] | None): three of ``"relu"``, ``"sigmoid"``, ``"tanh"``
            (default sigmoid, tanh, tanh).
        label (str): a name for errors and GPU objects.

    Returns:
        list[MLOperand]: the new hidden state and the new cell state, each
        ``[batch_size, hidden_size]``.

    Raises:
        MLTypeError: a data type other than float32/float16 or mismatched data types, a wrong
            rank or shape, hidden_size of 0, a bad option value, an operand of another
            builder, an unknown option.
        InvalidStateError: the builder has built its graph, or the context is gone.
    """
    op = "lstm_cell"
    V.check_kwargs(op, label, kwargs)
    self._check_usable(op, label)
    c = _Checker(self, op, label)
    vx = c.operand("input", input)
    vw = c.operand("weight", weight)
    vr = c.operand("recurrent_weight", recurrent_weight)
    vh = c.operand("hidden_state", hidden_state)
    vc = c.operand("cell_state", cell_state)
    vb = c.operand("bias", bias, optional=True)
    vrb = c.operand("recurrent_bias", recurrent_bias, optional=True)
    vp = c.operand("peephole_weight", peephole_weight, optional=True)
    hidden = _size(op, label, "hidden_size", hidden_size, 4)
    layout = _enum(op, label, "layout", layout, LSTM_LAYOUTS)
    acts = _activations(op, label, activations, 3, ("sigmoid", "tanh", "tanh"))
    _rank(c, "input", vx, 2, "[batch_size, input_size]")
    batch, isz = vx.shape
    _gate_weights(c, None, 4, hidden, isz, vw, vr)
    c.shape("hidden_state", vh, (batch, hidden), "[batch_size, hidden_size]")
    c.shape("cell_state", vc, (batch, hidden), "[batch_size, hidden_size]")
    _gate_biases(c, None, 4, hidden, vb, vrb)
    c.shape("peephole_weight", vp, (3 * hidden,), "[3 * hidden_size]")
    attrs = dict(steps=1, hidden_size=hidden, return_sequence=False, direction="forward", layout=layout,
                 activations=acts)
    outs = [(c.dtype, (batch, hidden)), (c.dtype, (batch, hidden))]
    return self._emit(op, [vx, vw, vr, vb, vrb, vp, vh, vc], outs, attrs, label=label)


_F = FLOATS
support("gru", {"input": (_F, (3, 3)), "weight": (_F, (3, 3)), "recurrent_weight": (_F, (3, 3)),
                "bias": (_F, (2, 2)), "recurrent_bias": (_F, (2, 2)), "initial_hidden_state": (_F, (3, 3))},
        (_F, (3, 4)), output_name="outputs")
support("gru_cell", {"input": (_F, (2, 2)), "weight": (_F, (2, 2)), "recurrent_weight": (_F, (2, 2)),
                     "hidden_state": (_F, (2, 2)), "bias": (_F, (1, 1)), "recurrent_bias": (_F, (1, 1))},
        (_F, (2, 2)))
support("lstm", {"input": (_F, (3, 3)), "weight": (_F, (3, 3)), "recurrent_weight": (_F, (3, 3)),
                 "bias": (_F, (2, 2)), "recurrent_bias": (_F, (2, 2)), "peephole_weight": (_F, (2, 2)),
                 "initial_hidden_state": (_F, (3, 3)), "initial_cell_state": (_F, (3, 3))},
        (_F, (3, 4)), output_name="outputs")
support("lstm_cell", {"input": (_F, (2, 2)), "weight": (_F, (2, 2)), "recurrent_weight": (_F, (2, 2)),
                      "hidden_state": (_F, (2, 2)), "cell_state": (_F, (2, 2)), "bias": (_F, (1, 1)),
                      "recurrent_bias": (_F, (1, 1)), "peephole_weight": (_F, (1, 1))},
        (_F, (2, 2)), output_name="outputs")


# ---------------------------------------------------------------- lowering
#: gate -> row-block index in the weight, per layout
_GATE_INDEX = {
    "zrn": {"z": 0, "r": 1, "n": 2},
    "rzn": {"r": 0, "z": 1, "n": 2},
    "iofg": {"i": 0, "o": 1, "f": 2, "g": 3},
    "ifgo": {"i": 0, "f": 1, "g": 2, "o": 3},
}


def _step_constant(s: int) -> Value:
    """A one-element uint32 constant holding the step index ``s`` (bound by that step's kernel)."""
    return Value("uint32", (1,), "constant", data=np.array([s], np.uint32))


def _transposed(v: Value) -> Value | None:
    """A constant weight ``[(D,) G, K]`` as a new constant ``[D, K, G]`` (so that the
    invocations of neighbouring hidden units read neighbouring words), or None for a weight
    computed at run time."""
    if v.kind != "constant" or v.data is None:
        return None
    g, k = v.shape[-2], v.shape[-1]
    d = v.size // (g * k)
    data = np.ascontiguousarray(v.data.reshape(d, g, k).transpose(0, 2, 1)).reshape(-1)
    return Value(v.data_type, (d, k, g), "constant", data=data)


def _operands(node, is_lstm: bool) -> tuple:
    """A recurrent node's inputs as (x, W, R, B, RB, peephole, h0, c0): a GRU has no peephole
    weight or cell state (None there)."""
    if is_lstm:
        return tuple(node.inputs)
    vx, vw, vr, vb, vrb, vh = node.inputs
    return vx, vw, vr, vb, vrb, None, vh, None


@lowering("gru", "gru_cell", "lstm", "lstm_cell")
def lower_recurrent(node, lc) -> None:
    """project, init, one step kernel (two for GRU with reset_after=False) per step, finish;
    an LSTM of one step (``lstm_cell``, ``lstm`` with steps = 1) is one ``lstm_cell`` kernel."""
    is_lstm = node.op.startswith("lstm")
    a = node.attrs
    vx, vw, vr, vb, vrb, vp, vh, vc = _operands(node, is_lstm)
    hidden, steps = a["hidden_size"], a["steps"]
    gates = 4 if is_lstm else 3
    gh = gates * hidden
    nd = 2 if a["direction"] == "both" else 1
    batch, isz = vx.shape[-2], vx.shape[-1]
    reset_after = a.get("reset_after", True)
    # Recurrent biases fold into the projection except GRU's new gate with reset_after.
    fold_limit = 2 * hidden if (not is_lstm and reset_after) else gh
    common = dict(H=hidden, B=batch, T=steps, D=nd, GH=gh, I=isz, direction=a["direction"])
    seq = node.outputs[-1] if a["return_sequence"] else None
    acts = a["activations"]
    gate = _GATE_INDEX[a["layout"]]
    n = nd * batch * hidden

    if is_lstm and steps == 1:  # one kernel: no projection, state or finishing buffers
        # without an initial hidden state h R' is 0: the recurrent weight is not bound
        w_in, r_in = _transposed(vw), _transposed(vr) if vh is not None else None
        ins = [("x", vx), ("w", w_in or vw)] + [
            (k, v) for k, v in (("r", (r_in or vr) if vh is not None else None), ("bias", vb), ("rbias", vrb),
                                ("peep", vp), ("h0", vh), ("c0", vc)) if v is not None]
        outs = [("out_h", node.outputs[0]), ("out_c", node.outputs[1])] + ([("seq", seq)] if seq is not None else [])
        lc.kernel("recurrent/lstm_cell.wgsl", ins, outs, n, gate=gate, acts=acts, has_bias=vb is not None,
                  has_rbias=vrb is not None, has_peep=vp is not None, has_h0=vh is not None, has_c0=vc is not None,
                  has_seq=seq is not None, w_t=w_in is not None, r_t=r_in is not None, **common)
        return

    if _lower_sequence(node, lc, is_lstm=is_lstm, common=common, seq=seq):
        return

    form = _step_form(lc, vr, hidden)
    cell = "lstm" if is_lstm else "gru"
    if cell == "gru" and form != "scalar" and _plain_rnn(node):  # the new gate alone, as the sequence kernel
        n0 = gate["n"] * hidden
        vw, vr, vb, vrb = _rows(vw, n0, hidden), _rows(vr, n0, hidden), _rows(vb, n0, hidden), _rows(vrb, n0, hidden)
        cell, acts, gate, gh, fold_limit, reset_after = "rnn", [acts[1]], {"n": 0}, hidden, hidden, True
        common = dict(common, GH=gh)
    # float16 too (cast, then the gemm): the project kernel re-reads every weight row for each
    # of the T * B rows (ddddocr's 2 x 2048 x 512 weights at T = 20: 242 ms against 4 ms)
    proj = _projection(lc, vx, vw, vb, vrb, fold_limit, common, widen=True)
    proj_tbd = proj.shape == (steps * batch, nd * gh)

    n_state = 2 if is_lstm else 1
    states = [lc.temp("float32", (n_state, nd, batch, hidden)) for _ in range(2)]
    init_ins = ([("h0", vh)] if vh is not None else []) + ([("c0", vc)] if vc is not None else [])
    lc.kernel("recurrent/init.wgsl", init_ins, [("state", states[0])], n_state * nd * batch * hidden,
              has_h0=vh is not None, has_c0=vc is not None, n_state=n_state, **common)

    r_in, n_inv, wg, extra = vr, n, WORKGROUP, {}
    if form != "scalar":
        units = 8 if form == "words8" else 4
        block = _step_block(hidden, units)
        r_in = _step_pack(vr, units, block, _step_weight_type(lc, vr, form))
        rows = _step_rows(batch)
        n_inv = nd * batch // rows * hidden // units
        lanes = _step_lanes(lc, hidden, units)
        wg = _step_workgroup(n_inv, lanes)
        extra = dict(BR=rows, U=units, L=block, words=form.startswith("words"), cell=cell, sg=lanes)
    rh = None if (is_lstm or reset_after) else lc.temp("float32", (nd, batch, hidden))
    for s in range(steps):
        src, dst = states[s % 2], states[(s + 1) % 2]
        step = _step_constant(s)
        outs = [("state_out", dst)] + ([("seq", seq)] if seq is not None else [])
        if is_lstm:
            ins = [("step", step), ("proj", proj), ("r", r_in)] + ([("peep", vp)] if vp is not None else []) + \
                [("state_in", src)]
            lc.kernel("recurrent/step4.wgsl" if extra else "recurrent/lstm_step.wgsl", ins, outs, n_inv,
                      workgroup=wg, gate=gate, acts=acts, has_peep=vp is not None, has_seq=seq is not None,
                      proj_tbd=proj_tbd, **extra, **common)
            continue
        tpl = "recurrent/step4.wgsl" if extra else "recurrent/gru_step.wgsl"
        if rh is not None:
            lc.kernel(tpl, [("step", step), ("proj", proj), ("r", r_in), ("state_in", src)],
                      [("rh", rh)], n_inv, workgroup=wg, phase="reset", gate=gate, acts=acts, reset_after=False,
                      has_rbias=False, has_seq=False, proj_tbd=proj_tbd, **extra, **common)
        ins = [("step", step), ("proj", proj), ("r", r_in)]
        if cell == "rnn":  # step4: h = act(proj + h R'), every bias in the projection
            lc.kernel(tpl, ins + [("state_in", src)], outs, n_inv, workgroup=wg, phase="update", gate=gate,
                      acts=acts, reset_after=True, has_rbias=False, has_seq=seq is not None, proj_tbd=proj_tbd,
                      **extra, **common)
            continue
        if reset_after and vrb is not None:
            ins.append(("rbias", vrb))
        ins.append(("state_in", src))
        if rh is not None:
            ins.append(("rh", rh))
        lc.kernel(tpl, ins, outs, n_inv, workgroup=wg, phase="update", gate=gate, acts=acts,
                  reset_after=reset_after, has_rbias=reset_after and vrb is not None, has_seq=seq is not None,
                  proj_tbd=proj_tbd, **extra, **common)

    final = states[steps % 2]
    outs = [("out_h", node.outputs[0])] + ([("out_c", node.outputs[1])] if is_lstm else [])
    lc.kernel("recurrent/finish.wgsl", [("state", final)], outs, n, n_state=n_state, **common)


#: Batch rows one ``step4`` invocation takes (the largest divisor of the batch up to this):
#: each vec4 of the recurrent weight it loads serves that many rows.
STEP_ROWS = 4
#: Invocations per workgroup of the ``step4`` kernel: lavapipe runs a workgroup on one
#: thread, so a step of a few hundred invocations is split into at least 8 workgroups.
STEP_WORKGROUP = 64


def _step_form(lc, vr: Value, hidden: int) -> str:
    """How the per-step kernels read the recurrent weight: ``"scalar"`` (``lstm_step`` /
    ``gru_step``: one hidden unit per invocation, R as given, also computed at run time),
    ``"vec4"`` (``step4``: a constant R packed in f32, :func:`_step_pack`, four hidden units
    per invocation, ``hidden_size % 4 == 0``), ``"words"`` (``step4`` reading that R as
    vec2<u64> words: the "lane-loop" profile with ``shader-int64``) or ``"words8"`` (eight
    units per invocation, R read as vec4<u64> words; ``hidden_size % 8 == 0``: the default
    there, 0.81-0.96 of the time of ``"words"``, which takes 0.75-0.85 of ``"vec4"``'s;
    ``benchmarks/rnn_steps.py``, Mesa 22.3). ``WEBNN_GPU_FORCE_RECURRENT_STEP=scalar|vec4|words|words8``
    forces one where it applies."""
    forced = _env.force_choice("recurrent_step", ("scalar", "vec4", "words", "words8"))
    if vr.kind != "constant" or vr.data is None or hidden % 4 or forced == "scalar":
        return "scalar"
    words = lc.tuning == "lane-loop" and "shader-int64" in lc.features
    if forced == "words8" and hidden % 8:
        forced = "words"
    if forced:
        return forced if forced.startswith("words") and words else "vec4"
    return ("words8" if hidden % 8 == 0 else "words") if words else "vec4"


def _step_weight_type(lc, vr: Value, form: str) -> str:
    """The data type ``step4`` reads its packed recurrent weight in: float16 where it reads
    words (four float16 values a u64 component, half the loads of float32) and every value of
    R is a float16 value (a float16 graph's R, or a float32 one whose values all are:
    ``linalg.exact_f16``, float16 subnormals only on the lane-loop profile, which keeps them),
    else float32. ``WEBNN_GPU_FORCE_RECURRENT_STEP_F16=off`` keeps a float32 R in float32."""
    if not form.startswith("words"):
        return "float32"
    if vr.data_type == "float16":
        return "float16"
    from .linalg import exact_f16

    if "shader-f16" not in lc.features or _env.force_choice("recurrent_step_f16", ("off", "on")) == "off":
        return "float32"
    return "float16" if exact_f16(_host(vr), subnormals=lc.tuning == "lane-loop") else "float32"


def _step_lanes(lc, hidden: int, units: int) -> int:
    """The subgroup lanes among which ``step4`` shares its loads of the state (each lane loads
    one column, ``subgroupBroadcast`` hands it to the others): ``lc.subgroup`` (llvmpipe) where
    ``hidden`` is a multiple of ``units`` (per invocation) times the lanes (whole subgroups),
    else 0 (every invocation loads each column). ``WEBNN_GPU_FORCE_RECURRENT_STEP_SG=off``
    gives 0."""
    lanes = int(getattr(lc, "subgroup", 0) or 0)
    if not lanes or hidden % (units * lanes) or _env.force_choice("recurrent_step_sg", ("off", "on")) == "off":
        return 0
    return lanes


def _step_block(hidden: int, units: int) -> int:
    """Invocations per block of ``step4``'s packed recurrent weight (:func:`_step_pack`), each
    taking ``units`` hidden units: the largest of 8, 4, 2, 1 dividing ``hidden / units``."""
    return next(n for n in (8, 4, 2, 1) if (hidden // units) % n == 0)


def _step_pack(vr: Value, units: int, block: int, data_type: str = "float32") -> Value:
    """A constant recurrent weight ``[D, G * H, H]`` as ``step4`` reads it: a new constant of
    ``data_type`` (float32, or float16 for a float16 weight: its values unchanged)
    ``[D, H / (U L), H, G, L, U]`` (U = ``units``, L = ``block``), element ``[d, qb, k, g, l, e]``
    being ``R[d, g * H + U (qb L + l) + e, k]``: the L invocations of a block of neighbouring
    units read L consecutive runs of U values of a gate, and successive k steps the successive
    G L runs, so that every block streams through one contiguous stretch (the transposed
    ``[D, H, G * H]``, where each k step of a block jumps G H values, measured 1.6-1.8x slower
    than the scalar kernel for two directions of 512 units, 8 MiB a step, Mesa 22.3)."""
    r = _host(vr).astype(np.float16 if data_type == "float16" else np.float32)
    nd, gh, hidden = r.shape
    g = gh // hidden
    packed = r.reshape(nd, g, hidden // (units * block), block, units, hidden).transpose(0, 2, 5, 1, 3, 4)
    return Value(data_type, packed.shape, "constant", data=np.ascontiguousarray(packed).reshape(-1))


def _step_rows(batch: int) -> int:
    """Batch rows per ``step4`` invocation: the largest divisor of ``batch`` up to
    :data:`STEP_ROWS`."""
    return max(r for r in range(1, STEP_ROWS + 1) if batch % r == 0)


def _step_workgroup(invocations: int, lanes: int = 0) -> int:
    """``step4``'s workgroup size: :data:`STEP_WORKGROUP`, smaller (a multiple of 8, at least
    8) where that leaves fewer than 8 workgroups; with subgroup loads (``lanes`` > 0) rounded
    up to a multiple of the lanes, so that every subgroup is whole (16 lanes at 512 bits:
    a workgroup of 8 would broadcast from inactive lanes)."""
    wg = max(8, min(STEP_WORKGROUP, -(-invocations // 64) * 8))
    return -(-wg // lanes) * lanes if lanes else wg


#: The most multiply-adds of one step's recurrent product (hidden_size * gates * hidden_size)
#: that the one-launch ``sequence`` kernel takes: its workgroup runs on one core, so beyond
#: this the per-step kernels, spread over every core, pay for their launches.
SEQUENCE_MAX_MACS = 4 * 128 * 128


def _host(v: Value) -> np.ndarray:
    """The data of a host constant (its callers checked it is one), in its shape."""
    assert v.data is not None
    return v.data.reshape(v.shape)


def _rows(v: Value | None, start: int, size: int) -> Value | None:
    """Rows ``[start, start + size)`` of the last-but-one axis of a constant ``[D, G(, K)]``
    (the last axis for a bias ``[D, G]``) as a new constant."""
    if v is None:
        return None
    a = _host(v)
    a = a[..., start:start + size, :] if a.ndim == 3 else a[..., start:start + size]
    a = np.ascontiguousarray(a)
    return Value(v.data_type, a.shape, "constant", data=a.reshape(-1))


def _plain_rnn(node) -> bool:
    """Whether a ``gru`` is a plain RNN, ``h = g(x Wn' + bn + h Rn' + rbn)``, written in GRU
    form: constant weights whose update and reset rows are zeros, ``relu`` gate activation,
    update-gate biases summing to at most 0 and reset-gate biases to exactly 1 (in float32,
    as the kernels sum them), so that z = 0 and r = 1 at every step: ``h = z * h + (1 - z) *
    n`` is ``n``. What TensorFlow Lite's plain RNN layers load as."""
    a = node.attrs
    vx, vw, vr, vb, vrb, vh = node.inputs
    if node.op != "gru" or not a["reset_after"] or a["activations"][0] != "relu":
        return False
    if any(v is None or v.kind != "constant" or v.data is None for v in (vw, vr, vb)):
        return False
    if vrb is not None and (vrb.kind != "constant" or vrb.data is None):
        return False
    hidden = a["hidden_size"]
    gate = _GATE_INDEX[a["layout"]]
    nd = vw.shape[0]
    w = vw.data.reshape(vw.shape)
    r = vr.data.reshape(vr.shape)
    bias = vb.data.reshape(nd, 3 * hidden).astype(np.float32)
    if vrb is not None:
        bias = bias + vrb.data.reshape(nd, 3 * hidden).astype(np.float32)
    for g in ("z", "r"):
        rows = slice(gate[g] * hidden, (gate[g] + 1) * hidden)
        if w[:, rows].any() or r[:, rows].any():
            return False
    z = bias[:, gate["z"] * hidden:(gate["z"] + 1) * hidden]
    rr = bias[:, gate["r"] * hidden:(gate["r"] + 1) * hidden]
    return bool((z <= 0).all() and (rr == 1).all())


def _project_gemm(lc, vx: Value, vw: Value, vb: Value | None, vrb: Value | None, fold_limit: int,
                  common: dict, widen: bool = False) -> Value | None:
    """The input projection of every step and direction as one ``gemm`` (the tile kernel)
    into a new f32 ``[T * B, D * GH]`` (``[T, B, D, GH]``), or None where the project kernel
    keeps it: weights or biases computed at run time, or a float16 input (the projection stays
    in f32) unless ``widen``: then a ``cast`` kernel first writes x in float32 (exactly) and
    the gemm takes the float16 weights widened at build time, the same f32 products as the
    project kernel's."""
    if vx.data_type not in (("float32", "float16") if widen else ("float32",)) or any(
            v is not None and (v.kind != "constant" or v.data is None) for v in (vw, vb, vrb)):
        return None
    from .._ir import Node
    from .elementwise import lower_elementwise
    from .linalg import lower_gemm, make_constant

    if vx.data_type == "float16":
        x32 = lc.temp("float32", tuple(vx.shape))
        lower_elementwise(Node("cast", [vx], [x32], dict(to="float32"), label=lc.node.label), lc)
        vx = x32

    steps, batch, nd, gh, isz = common["T"], common["B"], common["D"], common["GH"], common["I"]
    bias = np.zeros((nd, gh), np.float32)
    if vb is not None:
        bias += _host(vb).reshape(nd, gh).astype(np.float32)
    if vrb is not None:
        bias[:, :fold_limit] += _host(vrb).reshape(nd, gh)[:, :fold_limit].astype(np.float32)
    rows = Value("float32", (steps * batch, isz), "op")
    lc.alias(rows, vx)
    proj = lc.temp("float32", (steps * batch, nd * gh))
    weight = make_constant(_host(vw).reshape(nd * gh, isz).astype(np.float32), "float32")
    node = Node("gemm", [rows, weight, make_constant(bias.reshape(-1), "float32")], [proj],
                dict(a_transpose=False, b_transpose=True, alpha=1.0, beta=1.0), label=lc.node.label)
    lower_gemm(node, lc)
    return proj


def _projection(lc, vx: Value, vw: Value, vb: Value | None, vrb: Value | None, fold_limit: int,
                common: dict, widen: bool = False) -> Value:
    """The input projection (x W' + the biases, the recurrent ones below ``fold_limit``) of
    every step and direction in f32: one gemm on the tile kernel (:func:`_project_gemm`,
    ``[T * B, D * GH]``; with ``widen`` also for a float16 input, cast first) where it applies,
    else the ``project`` kernel (``[D, T, B, GH]``; a constant weight transposed so that each
    invocation computes four gate rows, where ``GH % 4 == 0``)."""
    proj = _project_gemm(lc, vx, vw, vb, vrb, fold_limit, common, widen)
    if proj is not None:
        return proj
    nd, steps, batch, gh = common["D"], common["T"], common["B"], common["GH"]
    proj = lc.temp("float32", (nd, steps, batch, gh))
    w_t = _transposed(vw) if gh % 4 == 0 else None
    w_in = vw if w_t is None else Value("float32", w_t.shape, "constant",
                                        data=_host(w_t).reshape(-1).astype(np.float32))
    ins = [("x", vx), ("w", w_in)] + ([("bias", vb)] if vb is not None else []) + \
        ([("rbias", vrb)] if vrb is not None else [])
    lc.kernel("recurrent/project.wgsl", ins, [("proj", proj)], nd * steps * batch * gh // (4 if w_t else 1),
              has_bias=vb is not None, has_rbias=vrb is not None, fold_limit=fold_limit, vec=w_t is not None,
              **common)
    return proj


def _projects_identity(vw: Value, vb: Value | None, vrb: Value | None, fold_limit: int, common: dict) -> bool:
    """Whether ``x`` itself is the input projection of every step: a constant identity weight
    (``[D, GH, D * GH]``: direction d takes its block of x) and the biases the projection takes
    all zero (what the TFLite loader makes of a layer reading an embedding: the table projected
    at load time). The sequence kernel then reads x (float32 or float16) as its projection
    (:func:`_identity_projection`); ``WEBNN_GPU_FORCE_FLOAT16_PROJECTION=f32`` keeps float16's
    projection kernel."""
    nd, gh, isz = common["D"], common["GH"], common["I"]
    if nd * gh != isz or vw.kind != "constant" or vw.data is None:
        return False
    if vw.data_type == "float16" and _env.force_choice("float16_projection", ("f32",)):
        return False  # the project kernel's f32 projection (for side-by-side runs)
    if not np.array_equal(_host(vw).reshape(nd * gh, isz), np.eye(isz, dtype=_host(vw).dtype)):
        return False
    return not any(v is not None and (v.kind != "constant" or v.data is None or _host(v).reshape(nd, gh)[:, :rows].any())
                   for v, rows in ((vb, gh), (vrb, fold_limit)))


def _identity_projection(lc, vx: Value, common: dict) -> Value:
    """``x`` as the input projection where :func:`_projects_identity`: a view ``[T * B, D * GH]``
    of it in its own data type."""
    rows_view = Value(vx.data_type, (common["T"] * common["B"], common["D"] * common["GH"]), "op")
    lc.alias(rows_view, vx)
    return rows_view


def sequence_workgroup_bytes(hidden: int, gh: int, cell: str, reset_after: bool, r_local: bool) -> int:
    """The workgroup memory ``recurrent/sequence.wgsl`` declares, in bytes (f32): the two hidden
    states, the cell state (``cell`` "lstm") or z and r * h (a GRU with ``reset_after`` False),
    and with ``r_local`` the recurrent weight (``hidden * gh``)."""
    state = 2 + (1 if cell == "lstm" else 2 if cell == "gru" and not reset_after else 0)
    return 4 * (state * hidden + (hidden * gh if r_local else 0))


def _r_local(lc, hidden: int, gh: int, reset_after: bool, cell: str) -> bool:
    """Whether the sequence kernel copies its direction's recurrent weight (``hidden * gh`` f32)
    into workgroup memory, beside the state, once before the first step: where it fits (in
    16 KiB a GRU of 32 units, an LSTM of 16; in lavapipe's 32 KiB an LSTM of 32 too). Its
    reads in every step are then 10-15% faster than storage reads (lavapipe, Mesa 22.3:
    a GRU of 32 units 271 -> 246 us for 40 steps, with reset_after=False 358 -> 300 us)."""
    return sequence_workgroup_bytes(hidden, gh, cell, reset_after, True) <= workgroup_bytes(lc.limits)



#: The most loop iterations one shader invocation runs on llvmpipe (lavapipe, Mesa 22.3's
#: gallivm): its loop limiter, one counter per invocation for all of its loops, leaves every
#: loop once 65535 iterations have run in all, silently (a sequence kernel of 1000 steps of
#: 128 units stopped a third of the way). Kernels whose loops could run longer take another
#: form (:func:`sequence_loop_iterations`).
LOOP_LIMIT = 65535
#: What the sequence kernel's bound (:func:`sequence_loop_iterations`) may reach: the limit less
#: a sixteenth, for iterations the bound does not see (a GRU with reset_after=False over 480
#: steps of 64 units, bounded at 65484, was cut short).
SEQUENCE_LOOP_BUDGET = LOOP_LIMIT - LOOP_LIMIT // 16


def _sequence_workgroup(lanes: int) -> int:
    return min(256, -(-lanes // 8) * 8)


def sequence_loop_iterations(steps: int, hidden: int, gh: int, vec: bool, gru0: bool) -> int:
    """An upper bound of the loop iterations of one ``recurrent/sequence.wgsl`` invocation,
    as llvmpipe counts them (a loop of n iterations n + 1: its exit test too): the copy of the
    recurrent weight, the state set-up and the final store, then per step the loop over the
    invocation's units (two with ``gru0``), each over the ``hidden`` columns of the product,
    with one iteration of margin per step."""
    lanes = hidden // 4 if vec else hidden
    wg = _sequence_workgroup(lanes)
    units = -(-lanes // wg)
    setup = -(-(hidden * max(gh // 4, 1)) // wg) + 1 + 2 * (-(-hidden // wg) + 1) + 1
    unit_loop = units + 1 + units * (hidden + 1)
    return setup + steps * (2 + (2 if gru0 else 1) * unit_loop)


def _sequence_chunk(lc, steps: int, batch: int, hidden: int, gh: int, vec: bool, gru0: bool,
                    seq_itemsize: int, proj_itemsize: int = 4) -> int | None:
    """The most steps one ``sequence`` launch of a one-direction layer may take within
    :data:`SEQUENCE_LOOP_BUDGET`, a multiple of the steps whose projection and sequence rows start at a
    storage-buffer offset the device accepts; None where not even one such chunk fits."""
    align = int(lc.limits.get("min-storage-buffer-offset-alignment", 256))
    unit = 1
    for row in (batch * gh * proj_itemsize, batch * hidden * seq_itemsize):  # bytes per step: the projection, the sequence
        unit = np.lcm(unit, align // np.gcd(align, row))
    lo, hi = 0, steps
    while lo < hi:  # the most steps within the limit (the bound grows with the steps)
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if sequence_loop_iterations(mid, hidden, gh, vec, gru0) <= SEQUENCE_LOOP_BUDGET \
            else (lo, mid - 1)
    chunk = lo // int(unit) * int(unit)
    return chunk if chunk >= 1 else None


def _lower_sequence(node, lc, *, is_lstm: bool, common: dict, seq: Value | None) -> bool:
    """``project`` then one ``sequence`` kernel for every step (state in workgroup memory);
    False (nothing added) where the kernel does not apply:
    a recurrent product above :data:`SEQUENCE_MAX_MACS` (unless ``WEBNN_GPU_FORCE_RECURRENT=sequence``),
    more loop iterations per invocation than :data:`SEQUENCE_LOOP_BUDGET` (long sequences: one direction
    runs in chunks of steps, a launch each, the states passed on; both directions do not), more bindings
    or workgroup memory than the device has, or ``WEBNN_GPU_FORCE_RECURRENT=steps``."""
    a = node.attrs
    reset_after = is_lstm or a.get("reset_after", True)
    vx, vw, vr, vb, vrb, vp, vh, vc = _operands(node, is_lstm)
    forced = _env.force("recurrent")
    if forced not in ("", "steps", "sequence"):
        raise ValueError(f"WEBNN_GPU_FORCE_RECURRENT={forced!r}: expected steps or sequence")
    if forced == "steps":
        return False
    hidden, nd, batch = common["H"], common["D"], common["B"]
    gh = common["GH"]
    if (hidden * gh > SEQUENCE_MAX_MACS and forced != "sequence") or nd * batch > int(lc.limits.get("max-compute-workgroups-per-dimension",
                                                                         65535)):
        return False
    cell, acts, gate = ("lstm" if is_lstm else "gru"), a["activations"], _GATE_INDEX[a["layout"]]
    # the state in workgroup memory (the per-step kernels take none)
    if sequence_workgroup_bytes(hidden, gh, cell, reset_after, False) > workgroup_bytes(lc.limits):
        return False
    # Recurrent biases fold into the projection except GRU's new gate with reset_after.
    fold_limit = gh if is_lstm or not reset_after else 2 * hidden
    rbias = vrb
    if not is_lstm and _plain_rnn(node):
        n0 = gate["n"] * hidden
        vw, vr, vb = _rows(vw, n0, hidden), _rows(vr, n0, hidden), _rows(vb, n0, hidden)
        vrb = _rows(vrb, n0, hidden)
        cell, acts, gate, gh, fold_limit, rbias = "rnn", [acts[1]], {"n": 0}, hidden, hidden, None
        common = dict(common, GH=gh)
    r_t = _transposed(vr)
    vec = r_t is not None and hidden % 4 == 0
    identity = _projects_identity(vw, vb, vrb, fold_limit, common)
    proj_itemsize = _dtypes_itemsize(vx) if identity else 4  # x itself, or a new f32 projection
    chunk = None
    if sequence_loop_iterations(common["T"], hidden, gh, vec, cell == "gru" and not reset_after) > \
            SEQUENCE_LOOP_BUDGET:
        chunk = _sequence_chunk(lc, common["T"], batch, hidden, gh, vec, cell == "gru" and not reset_after,
                                _dtypes_itemsize(seq), proj_itemsize) if nd == 1 else None
        if chunk is None:
            return False
    if r_t is not None and vec and r_t.data_type != "float32":
        r_t = Value("float32", r_t.shape, "constant", data=_host(r_t).reshape(-1).astype(np.float32))
    seq_ins = [("proj", None), ("r", r_t or vr)] + [
        (k, v) for k, v in (("rbias", rbias if cell == "gru" and reset_after else None), ("peep", vp), ("h0", vh),
                            ("c0", vc))
        if v is not None]
    outs = [("out_h", node.outputs[0])] + ([("out_c", node.outputs[1])] if is_lstm else []) + \
        ([("seq", seq)] if seq is not None else [])
    if len(seq_ins) + len(outs) > int(lc.limits.get("max-storage-buffers-per-shader-stage", 8)):
        return False
    proj = _identity_projection(lc, vx, common) if identity else \
        _projection(lc, vx, vw, vb, vrb, fold_limit, common)
    seq_ins[0] = ("proj", proj)
    lanes = hidden // 4 if vec else hidden
    wg = _sequence_workgroup(lanes)
    variables = dict(proj_tbd=proj.shape == (common["T"] * batch, nd * gh),
                     r_local=vec and _r_local(lc, hidden, gh, reset_after, cell),
                     workgroup=wg, cell=cell, gate=gate, acts=acts, r_t=r_t is not None, vec=vec,
                     reset_after=reset_after, has_rbias=cell == "gru" and reset_after and rbias is not None,
                     has_peep=vp is not None, has_seq=seq is not None)
    if chunk is None:
        lc.kernel("recurrent/sequence.wgsl", seq_ins, outs, nd * batch * hidden, groups=(nd * batch, 1, 1),
                  has_h0=vh is not None, has_c0=vc is not None, **variables, **common)
        return True
    # One direction in chunks of steps (in its time order), each launch starting from the
    # states the one before left: the projection's and the sequence's rows of the chunk bound
    # at their offsets (the same layout for one direction, [T * B, GH] and [T, 1, B, H]).
    steps = common["T"]
    starts = list(range(0, steps, chunk))
    if a.get("direction", "forward") == "backward":
        starts.reverse()
    h_prev, c_prev = vh, vc
    for i, t0 in enumerate(starts):
        tc = min(chunk, steps - t0)
        last = i == len(starts) - 1
        out_h = node.outputs[0] if last else lc.temp(node.outputs[0].data_type, (1, batch, hidden))
        out_c = (node.outputs[1] if last else lc.temp(node.outputs[1].data_type, (1, batch, hidden))) if is_lstm \
            else None
        ins_c = [(n, v) for n, v in seq_ins if n not in ("h0", "c0")]
        ins_c += [(n, v) for n, v in (("h0", h_prev), ("c0", c_prev)) if v is not None]
        outs_c = [("out_h", out_h)] + ([("out_c", out_c)] if is_lstm else []) + \
            ([("seq", seq)] if seq is not None else [])
        ranges = [(t0 * batch * gh * proj_itemsize, tc * batch * gh * proj_itemsize) if n == "proj" else None
                  for n, _ in ins_c] + \
            [(t0 * batch * hidden * _dtypes_itemsize(seq), tc * batch * hidden * _dtypes_itemsize(seq))
             if n == "seq" else None for n, _ in outs_c]
        lc.kernel("recurrent/sequence.wgsl", ins_c, outs_c, batch * hidden, groups=(batch, 1, 1), ranges=ranges,
                  has_h0=h_prev is not None, has_c0=c_prev is not None, **variables, **dict(common, T=tc))
        h_prev, c_prev = out_h, out_c
    return True


def _dtypes_itemsize(v: Value | None) -> int:
    from .. import _dtypes

    return _dtypes.info(v.data_type).itemsize if v is not None else 4
