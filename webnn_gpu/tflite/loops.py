"""Map a ``WHILE`` loop that is a recurrent layer onto WebNN's ``lstm`` / ``gru``.

TensorFlow's converter writes a Keras 3 ``LSTM``, ``GRU`` (either ``reset_after``; with
``reset_after=False`` a second product of the state times the reset gate feeds the new
gate) or ``SimpleRNN`` layer as a ``WHILE`` loop whose body computes one time step from
fully connected layers, a split into gates and the gate activations, and writes the new
state into a buffer (the layer's output sequence, or its last state; no buffer for a layer
that returns its states alone).
Unrolled, that is ten or more kernels per time step; as one ``lstm`` / ``gru`` operator it
is two kernels for every step (``ops.recurrent``). A ``SimpleRNN`` becomes a ``gru`` in
plain-RNN form (:func:`plain_rnn`), its activation the ``TANH``, ``RELU`` or ``LOGISTIC``
that writes the new state. A loop over the time reversal of a sequence (``REVERSE_V2`` of
axis 0: Keras' backward layer of a ``Bidirectional``) is the operator's backward direction
over the sequence itself, and the reversal of its buffer back is a view.

:func:`map_recurrent_loop` reads the candidate's parameters from the body (the fully
connected layer fed by the sequence and the one fed by the hidden state, their biases),
and maps the loop only when its condition reads nothing but integer counters (a static
trip count, equal to the sequence's length) and running the body at load time (NumPy,
the operators' TFLite definitions) on new random values at every time step (a spread of
16 in loops over 256 steps) gives what the WebNN operator's equations give with those
parameters, for every loop variable: the states, the buffer, the counters and the
variables passed through. The cell activation (Keras' ``activation``) is tanh, or relu
where the body applies a RELU and nothing that clamps (:func:`_relu_only`). Anything else
(another cell, other activations, a loop that reads its input in another order) is left to
the unrolling in ``ops._while``: the mapping never changes a result.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ..ops.recurrent import LOOP_LIMIT
from .ops import FOLDERS
from .reader import dequantize

if TYPE_CHECKING:  # pragma: no cover
    from .convert import Converter
    from .reader import ModelInfo, OperatorInfo

__all__ = ["map_recurrent_loop"]

#: Relative tolerance of the load-time check (float32 arithmetic of the body vs float64).
_TOL = 1e-4


class _NeedsBuilder(Exception):
    """A body operator that cannot run at load time: the loop is not probed."""


class _NoBuilder:
    def __getattr__(self, name: str) -> Any:
        raise _NeedsBuilder(name)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _close(got: Any, ref: np.ndarray) -> bool:
    if not isinstance(got, np.ndarray) or got.shape != ref.shape:
        return False
    return float(np.abs(got.astype(np.float64) - ref).max(initial=0.0)) <= _TOL * max(1.0, float(np.abs(ref).max(
        initial=0.0)))


def _stored_real(body: ModelInfo, tensor: int) -> np.ndarray | None:
    """The real values of a constant of the body: stored float, int8 with quantization
    parameters (dynamic-range quantization), or either behind a DEQUANTIZE (float16
    weights); else None."""
    t = body.tensors[tensor]
    if t.data is None:
        prod = next((o for o in body.operators if tensor in o.outputs), None)
        if prod is None or prod.name != "DEQUANTIZE" or not prod.inputs:
            return None
        t = body.tensors[prod.inputs[0]]
        if t.data is None:
            return None
    if t.data.dtype.kind == "f":
        return t.data.astype(np.float64)
    if t.quantization is not None and t.type_name in ("INT8", "UINT8", "INT16"):
        return dequantize(t.data, t.quantization).astype(np.float64)
    return None


def _fc_params(body: ModelInfo) -> list[tuple[int, np.ndarray, np.ndarray | None]]:
    """(input tensor, weights, bias) of the body's FULLY_CONNECTED operators with constant
    weights (:func:`_stored_real`)."""
    out = []
    for bop in body.operators:
        if bop.name != "FULLY_CONNECTED" or len(bop.inputs) < 2:
            continue
        w = _stored_real(body, bop.inputs[1])
        if w is None or w.ndim != 2:
            continue
        bias = None
        if len(bop.inputs) > 2 and bop.inputs[2] >= 0:
            bias = _stored_real(body, bop.inputs[2])
            if bias is None:
                continue
            bias = bias.reshape(-1)
        out.append((bop.inputs[0], w, bias))
    return out


def _plan(cv: Converter, op: OperatorInfo, cond: int, body: int) -> dict[str, Any] | None:
    """The parameters of the recurrent layer that ``op`` (a WHILE) is, checked by the probe
    (the keywords of :func:`_emit` / :func:`_emit_masked`, with ``entries``, ``mask_var``,
    ``prev_var`` and ``zero_output``); None where it is none."""
    from .convert import Converter

    subs = cv.model.subgraphs
    if not (0 < cond < len(subs) and 0 < body < len(subs)):
        return None
    bsub, csub = subs[body], subs[cond]
    if any(o.name not in FOLDERS for o in (*bsub.operators, *csub.operators)):
        return None
    n = len(op.inputs)
    if len(bsub.inputs) != n or len(bsub.outputs) != n or len(op.outputs) != n:
        return None
    entries = [cv.entry(op, i) for i in range(n)]
    shapes = [tuple(int(d) for d in e.shape) for e in entries]
    ints = [k for k, e in enumerate(entries) if isinstance(e, np.ndarray) and e.dtype.kind in "iu" and e.ndim == 0]
    # A BOOL sequence passed through unchanged is a mask (Keras' masking: Embedding(mask_zero=True),
    # Masking): a masked step keeps the states and repeats (or zeroes) the output.
    bools = [k for k, e in enumerate(entries) if k not in ints and bsub.tensors[bsub.inputs[k]].type_name == "BOOL"]
    if len(bools) > 1 or any(bsub.outputs[k] != bsub.inputs[k] for k in bools):
        return None
    mask_var = bools[0] if bools else None
    for k, e in enumerate(entries):
        if k not in ints and k != mask_var and \
                not (e.dtype.kind == "f" if isinstance(e, np.ndarray) else e.data_type == cv.float_type):
            return None
    floats = [k for k in range(n) if k not in ints and k != mask_var]
    # The condition may read the counters only (then the trip count is known at load time).
    read_by_cond = {i for o in csub.operators for i in o.inputs} | set(csub.outputs)
    if len(csub.inputs) != n or any(csub.inputs[k] in read_by_cond for k in (*floats, *bools)):
        return None
    passthrough = [k for k in floats if bsub.outputs[k] == bsub.inputs[k]]
    changing = [k for k in floats if k not in passthrough]

    # The parameters: weights fed by a loop variable (recurrent) and by anything else (input).
    fcs = _fc_params(bsub)
    rec = [(bsub.inputs.index(t), w, b) for t, w, b in fcs if t in bsub.inputs and bsub.inputs.index(t) in changing]
    inp = [(t, w, b) for t, w, b in fcs if t not in bsub.inputs]
    if len(rec) == len(inp) in (3, 4) and len({k for k, _, _ in rec}) == 1:
        # One product per gate (Keras' recurrent layers with recurrent_dropout compute each gate's
        # products apart): stacked in the body's order, which the probe below checks.
        hid = rec[0][1].shape[1]
        if all(w.shape == (hid, hid) for _, w, _ in rec) and len({w.shape for _, w, _ in inp}) == 1 and \
                inp[0][1].shape[0] == hid and len({t for t, _, _ in inp}) == 1:
            def stack(parts):
                return (np.concatenate([w for _, w, _ in parts]),
                        np.concatenate([b if b is not None else np.zeros(hid) for _, _, b in parts]))

            rec = [(rec[0][0], *stack(rec))]
            inp = [(inp[0][0], *stack(inp))]
    reset_after = True
    if len(rec) == 1 and len(inp) == 2 and rec[0][1].shape[0] == 2 * rec[0][1].shape[1]:
        # A GRU with reset_after=False (Keras' GRU(reset_after=False)): the state's product
        # gives the update and reset gates, and a square one on r * h the new gate.
        hid = rec[0][1].shape[1]
        square = [k for k, (_, w, _) in enumerate(inp) if w.shape == (hid, hid)]
        if len(square) == 1:
            _, n_w, n_b = inp.pop(square[0])
            _, zr_w, zr_b = rec[0]
            zr_b = zr_b if zr_b is not None else np.zeros(2 * hid)
            rec = [(rec[0][0], np.concatenate([zr_w, n_w]),
                    np.concatenate([zr_b, n_b if n_b is not None else np.zeros(hid)]))]
            reset_after = False
    if len(rec) != 1 or len(inp) != 1:
        return None
    h_var, r_w, r_b = rec[0]
    _, w_w, w_b = inp[0]
    hidden = r_w.shape[1]
    gates = w_w.shape[0] // max(hidden, 1)
    if gates not in (1, 3, 4) or r_w.shape[0] != gates * hidden or w_w.shape[0] != gates * hidden:
        return None
    state_shape = shapes[h_var]
    if len(state_shape) != 2 or state_shape[1] != hidden:
        return None
    batch = state_shape[0]
    others = [k for k in changing if k != h_var]
    prev_var = None  # a masked loop's previous output (what a masked step writes), beside the state
    if mask_var is not None:
        # The one read by SELECT_V2 alone (the cell state is also read by the forget gate's MUL).
        prevs = [k for k in others if shapes[k] == state_shape and
                 all(o.name == "SELECT_V2" for o in bsub.operators if bsub.inputs[k] in o.inputs)]
        if len(prevs) > 1:
            return None
        if prevs:  # (none where every masked step writes zeros)
            prev_var = prevs[0]
            others.remove(prev_var)
    c_var = None
    if gates == 4:
        cells = [k for k in others if shapes[k] == state_shape]
        if len(cells) != 1:
            return None
        c_var = cells[0]
        others.remove(c_var)
    if len(others) > 1:
        return None
    buf_var = others[0] if others else None  # none: a layer returning its final state alone
    seqs = [k for k in passthrough if len(shapes[k]) == 3 and shapes[k][1] == batch and
            shapes[k][2] == w_w.shape[1]]
    if len(seqs) != 1:
        return None
    seq_var = seqs[0]
    steps = shapes[seq_var][0]
    if mask_var is not None and shapes[mask_var] not in ((steps, batch, 1), (steps, batch)):
        return None
    if mask_var is not None and 2 * steps + 2 > LOOP_LIMIT:  # the mask plan's loops (llvmpipe)
        return None
    buf_shape = shapes[buf_var] if buf_var is not None else (1, batch, hidden)
    if int(np.prod(buf_shape)) not in (batch * hidden, steps * batch * hidden) or buf_shape[0] not in (1, steps):
        return None
    whole_sequence = buf_shape[0] == steps and int(np.prod(buf_shape)) == steps * batch * hidden
    # Biases: LSTM adds every bias into one vector (the fully connected ones and constant
    # vectors added to the gates); GRU keeps the input and the recurrent bias apart.
    zeros = np.zeros(gates * hidden)
    w_bias = w_b if w_b is not None else zeros
    r_bias = r_b if r_b is not None else zeros
    if gates in (1, 4):
        stored = [_stored_real(bsub, i) for bop in bsub.operators if bop.name == "ADD" for i in bop.inputs if i >= 0]
        added = [np.asarray(a, np.float64).reshape(-1) for a in stored
                 if a is not None and a.size == gates * hidden and gates * hidden > 1]
        w_bias = w_bias + r_bias + sum(added, zeros)

    probe = Converter(cv.model, _NoBuilder(), "float32", label_prefix="probe/")

    def run(index: int, args: list[Any]) -> list[Any] | None:
        try:
            outs = probe.call_subgraph(op, index, args, "probe/")
        except Exception:  # noqa: BLE001 - the probe declines; unrolling reports real errors
            return None
        return outs if all(isinstance(v, np.ndarray) for v in outs) else None

    rng = np.random.default_rng(0)
    floats_probe: dict[int, np.ndarray] = {k: rng.standard_normal(shapes[k]).astype(np.float32) * 0.5
                                           for k in floats}

    if mask_var is not None:
        floats_probe[mask_var] = rng.integers(0, 2, shapes[mask_var]).astype(np.bool_)

    def args_at(counters: dict[int, np.ndarray]) -> list[Any]:
        return [counters[k] if k in ints else floats_probe[k] for k in range(n)]

    # Counters: each integer variable grows by a constant step; the condition must depend on them only.
    start = {k: entries[k] for k in ints}
    once = run(body, args_at(start))
    if once is None:
        return None
    increment = {k: once[k].astype(np.int64) - start[k].astype(np.int64) for k in ints}

    def counters_at(t: int) -> dict[int, np.ndarray]:
        return {k: np.asarray(start[k].astype(np.int64) + t * increment[k]).astype(start[k].dtype) for k in ints}

    trips = 0
    while trips <= steps:
        keep = run(cond, args_at(counters_at(trips)))
        if keep is None:
            return None
        if not bool(keep[0].reshape(-1)[0]):
            break
        trips += 1
    if trips != steps or steps < 1:
        return None

    def reference(t: int, act: str) -> tuple[np.ndarray, np.ndarray | None]:
        x = floats_probe[seq_var][t].astype(np.float64)
        h = floats_probe[h_var].astype(np.float64)
        if gates == 1:
            return _PLAIN_ACTS[act](x @ w_w.T + h @ r_w.T + w_bias), None
        g_act = _PLAIN_ACTS[act]  # the cell's activation (Keras' `activation`)
        if c_var is not None:
            z = x @ w_w.T + h @ r_w.T + w_bias
            i, f, g, o = np.split(z, 4, axis=1)
            c = _sigmoid(f) * floats_probe[c_var].astype(np.float64) + _sigmoid(i) * g_act(g)
            return _sigmoid(o) * g_act(c), c
        xz, hz = np.split(x @ w_w.T + w_bias, 3, axis=1), np.split(h @ r_w.T + r_bias, 3, axis=1)
        u, r = _sigmoid(xz[0] + hz[0]), _sigmoid(xz[1] + hz[1])
        if not reset_after:
            n_rows = slice(2 * hidden, 3 * hidden)
            return u * h + (1 - u) * g_act(xz[2] + (r * h) @ r_w[n_rows].T + r_bias[n_rows]), None
        return u * h + (1 - u) * g_act(xz[2] + r * hz[2]), None

    # Every step (a spread of 16 in longer loops), each with new random values.
    checked = range(steps) if steps <= 256 else sorted({int(v) for v in np.linspace(0, steps - 1, 16)})

    def matches(act: str, masked: str = "") -> bool:
        probe_rng = np.random.default_rng(1)
        for t in checked:
            floats_probe.update({k: probe_rng.standard_normal(shapes[k]).astype(np.float32) * 0.5 for k in floats})
            counters = counters_at(t)
            if mask_var is not None:
                # Random bits, the step's own alternating (both cases are checked).
                bits = probe_rng.integers(0, 2, shapes[mask_var]).astype(np.bool_)
                bits[t] = ((np.arange(batch) + t) % 2 == 0).reshape(bits[t].shape)
                floats_probe[mask_var] = bits
            outs = run(body, args_at(counters))
            if outs is None:
                return False
            h_ref, c_ref = reference(t, act)
            checks: list[tuple[Any, np.ndarray]] = []
            if mask_var is not None:
                # Keras' masked step: the states stay, the output is the previous one ("prev")
                # or zeros ("zero": a Bidirectional layer's return_sequences).
                keep = floats_probe[mask_var][t].reshape(batch, 1)
                prev = floats_probe[prev_var].astype(np.float64) if masked == "prev" and prev_var is not None \
                    else 0.0
                out_ref = np.where(keep, h_ref, prev)
                if prev_var is not None:
                    checks.append((outs[prev_var], out_ref))
                h_ref = np.where(keep, h_ref, floats_probe[h_var].astype(np.float64))
                if c_ref is not None and c_var is not None:
                    c_ref = np.where(keep, c_ref, floats_probe[c_var].astype(np.float64))
            else:
                out_ref = h_ref
            checks.append((outs[h_var], h_ref))
            if buf_var is not None:
                buf = floats_probe[buf_var].astype(np.float64)
                if whole_sequence:
                    buf = buf.copy()
                    buf[t] = out_ref.reshape(buf_shape[1:])
                else:
                    buf = out_ref.reshape(buf_shape)
                checks.append((outs[buf_var], buf))
            if c_var is not None and c_ref is not None:
                checks.append((outs[c_var], c_ref))
            checks += [(outs[k], floats_probe[k].astype(np.float64)) for k in passthrough]
            if not all(_close(g, r) for g, r in checks):
                return False
            if any(not np.array_equal(outs[k], counters_at(t + 1)[k]) for k in ints):
                return False
        return True

    # A plain RNN's activation is the operator that writes the new state (TANH, RELU or
    # LOGISTIC: random probes cannot tell RELU from RELU6 or a clamp that they do not reach).
    # An LSTM's or GRU's cell activation is tanh, or relu where the body applies a RELU (an
    # operator or a fused activation) and nothing that would clamp it (RELU6, a MINIMUM, ...).
    act = "tanh"
    if gates == 1:
        writer = next((o for o in bsub.operators if bsub.outputs[h_var] in o.outputs), None)
        if writer is not None and writer.name == "SELECT_V2" and mask_var is not None and len(writer.inputs) == 3:
            writer = next((o for o in bsub.operators if writer.inputs[1] in o.outputs), None)  # the masked step's
        act = _PLAIN_OPS.get(writer.name if writer is not None else "", "")
        if not act:
            return None
    masked = ""
    for masked in ("prev", "zero") if prev_var is not None else ("zero",) if mask_var is not None else ("",):
        if matches(act, masked):
            break
        if gates != 1 and _relu_only(bsub) and matches("relu", masked):
            act = "relu"
            break
    else:
        return None
    return dict(act=act, gates=gates, hidden=hidden, steps=steps, batch=batch, w=w_w, r=r_w, w_bias=w_bias,
                r_bias=r_bias, h_var=h_var, c_var=c_var, seq_var=seq_var, buf_var=buf_var,
                whole_sequence=whole_sequence, final_counters=counters_at(steps), passthrough=passthrough,
                reset_after=reset_after, entries=entries, mask_var=mask_var, prev_var=prev_var,
                zero_output=masked == "zero")


def map_recurrent_loop(cv: Converter, op: OperatorInfo, cond: int, body: int) -> bool:
    """Emit ``op`` (a WHILE) as one ``lstm`` or ``gru`` when it is one; says whether it did.
    With the loop over its sequence's time reversal that a Keras ``Bidirectional`` layer writes
    beside it (later in the subgraph, its inputs known by now), the two become one operator of
    ``direction="both"`` (:func:`_emit_pair`: both directions in one launch, one projection)."""
    plan = _plan(cv, op, cond, body)
    if plan is None:
        return False
    partner = _partner(cv, op, plan)
    if partner is not None:
        _emit_pair(cv, (op, plan), partner)
        cv.claimed.add(partner[0].index)
        return True
    entries, mask_var, prev_var, zero_output = (plan.pop(k) for k in ("entries", "mask_var", "prev_var", "zero_output"))
    if mask_var is not None:
        _emit_masked(cv, op, entries, mask_var=mask_var, prev_var=prev_var, zero_output=zero_output, **plan)
    else:
        _emit(cv, op, entries, **plan)
    return True


def _reverses(cv: Converter, tensor: int, of: int) -> bool:
    """Whether ``tensor`` is the REVERSE_V2 along axis 0 (time) of ``of``."""
    prod = cv.producer(tensor)
    if prod is None or prod.name != "REVERSE_V2" or prod.inputs[0] != of:
        return False
    axes = cv.static(prod, 1)
    rank = len(cv.tensor(prod, 0).shape)
    return axes is not None and sorted({int(a) % rank for a in axes.reshape(-1)}) == [0]


def _partner(cv: Converter, op: OperatorInfo, plan: dict[str, Any]) -> tuple[OperatorInfo, dict[str, Any]] | None:
    """The other direction of a Keras ``Bidirectional`` layer whose loop ``op`` is: a later
    WHILE of this subgraph, not yet converted, over the time reversal of ``op``'s sequence (or
    the sequence that ``op``'s reverses), whose inputs are all known by now and that
    :func:`_plan` maps onto the same operator (gates, sizes, activation, ``reset_after``);
    neither masked. Else None."""
    from .ops import _fb, _opt

    if plan["mask_var"] is not None:
        return None
    seq = op.inputs[plan["seq_var"]]
    # the loops that read a time reversal of seq, or the sequence seq reverses
    prod = cv.producer(seq)
    near = [o.outputs[0] for o in cv.readers(seq) if o.name == "REVERSE_V2" and o.outputs]
    near += [prod.inputs[0]] if prod is not None and prod.name == "REVERSE_V2" else []
    loops = {o.index: o for t in near for o in cv.readers(t) if o.name == "WHILE"}
    for other in (loops[k] for k in sorted(loops)):
        if other.index <= op.index or other.index in cv.claimed:
            continue
        if not any(_reverses(cv, t, seq) or _reverses(cv, seq, t) for t in other.inputs if t >= 0):
            continue
        o = other.options(_fb.WhileOptions)
        try:
            plan2 = _plan(cv, other, int(_opt(o, "CondSubgraphIndex", 0)), int(_opt(o, "BodySubgraphIndex", 0)))
        except Exception:  # noqa: BLE001 - an input not known yet: no pair
            return None
        if plan2 is None or plan2["mask_var"] is not None:
            return None
        seq2 = other.inputs[plan2["seq_var"]]
        same = ("act", "gates", "hidden", "steps", "batch", "reset_after", "whole_sequence")
        if any(plan[k] != plan2[k] for k in same) or plan["w"].shape != plan2["w"].shape or \
                (plan["buf_var"] is None) != (plan2["buf_var"] is None) or \
                not (_reverses(cv, seq2, seq) or _reverses(cv, seq, seq2)):
            return None
        return other, plan2
    return None


def _fold_biases(gates: int, hidden: int, reset_after: bool, w_bias: np.ndarray,
                 r_bias: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the input projection's bias, the operator's recurrent bias) of a loop whose projection
    is computed ahead: the projection takes every bias of an LSTM or plain RNN, and a GRU's
    input biases plus the recurrent ones of the gates that reset_after leaves outside the
    reset (all three without it); the rest stays with the operator."""
    if gates != 3:
        return w_bias, np.zeros_like(r_bias)
    folded = np.zeros_like(r_bias)
    rows = 2 * hidden if reset_after else 3 * hidden
    folded[:rows] = r_bias[:rows]
    return w_bias + folded, r_bias - folded


def _emit_pair(cv: Converter, first: tuple[OperatorInfo, dict[str, Any]],
               second: tuple[OperatorInfo, dict[str, Any]]) -> None:
    """Two loops, one over a sequence and one over its time reversal (a Keras
    ``Bidirectional`` layer), as one ``lstm`` / ``gru`` of ``direction="both"``: the
    directions' weights stacked, one input projection (the embedded table's gather projects
    both: a block identity weight), both directions in one launch. The backward loop's
    buffer is the operator's backward sequence reversed (a view for the REVERSE_V2 that
    Keras applies to it)."""
    (op_a, pa), (op_b, pb) = first, second
    fwd, bwd = (first, second) if _reverses(cv, op_b.inputs[pb["seq_var"]], op_a.inputs[pa["seq_var"]]) \
        else (second, first)
    (op_f, pf), (op_r, pr) = fwd, bwd
    b, label = cv.builder, cv.label(op_a)
    gates, hidden, steps, batch = pf["gates"], pf["hidden"], pf["steps"], pf["batch"]
    reset_after = pf["reset_after"]

    def const(a: np.ndarray) -> Any:
        a = np.ascontiguousarray(a, dtype=cv._np_float)
        return b.constant({"data_type": cv.float_type, "shape": list(a.shape)}, a)

    def operand(p: dict[str, Any], k: int) -> Any:
        e = p["entries"][k]
        return const(e) if isinstance(e, np.ndarray) else e

    (pb_f, rb_f), (pb_r, rb_r) = (_fold_biases(gates, hidden, reset_after, p["w_bias"], p["r_bias"]) for p in (pf, pr))
    gh = pf["w"].shape[0]
    w = np.stack([pf["w"], pr["w"]])
    proj_bias = np.stack([pb_f, pb_r])
    seq_tensor = op_f.inputs[pf["seq_var"]]
    x = _embedded_projection(cv, seq_tensor, w.reshape(2 * gh, -1), proj_bias.reshape(-1), label)
    if x is not None:  # both directions' projections, side by side: the weight picks its half
        w, proj_bias = np.eye(2 * gh).reshape(2, gh, 2 * gh), np.zeros_like(proj_bias)
    else:
        x = operand(pf, pf["seq_var"])
    r_bias = np.stack([rb_f, rb_r])

    def initial(name: str) -> Any:
        ks = [p[name] for p in (pf, pr)]
        if all(k is None for k in ks):
            return None
        es = [p["entries"][k] for p, k in zip((pf, pr), ks)]
        if all(isinstance(e, np.ndarray) and not e.any() for e in es):
            return None  # zeros: the operator's default
        parts = [b.reshape(operand(p, k), [1, batch, hidden], label=f"{label}/{name}{d}")
                 for d, (p, k) in enumerate(zip((pf, pr), ks))]
        return b.concat(parts, 0, label=f"{label}/{name}")

    c_t = None
    if gates == 1:
        h_t, seq = plain_rnn(cv, x, w, np.stack([pf["r"], pr["r"]]), proj_bias, steps, hidden, pf["act"],
                             initial("h_var"), label + "/rnn", direction="both")
    elif gates == 4:
        h_t, c_t, seq = b.lstm(x, const(w), const(np.stack([pf["r"], pr["r"]])), steps, hidden,
                               bias=const(proj_bias), initial_hidden_state=initial("h_var"),
                               initial_cell_state=initial("c_var"), return_sequence=True, direction="both",
                               layout="ifgo", activations=["sigmoid", pf["act"], pf["act"]], label=label + "/lstm")
    else:
        h_t, seq = b.gru(x, const(w), const(np.stack([pf["r"], pr["r"]])), steps, hidden, bias=const(proj_bias),
                         recurrent_bias=const(r_bias), initial_hidden_state=initial("h_var"),
                         reset_after=reset_after, return_sequence=True, direction="both", layout="zrn",
                         activations=["sigmoid", pf["act"]], label=label + "/gru")

    _merged_concat(cv, fwd, bwd, seq, h_t, label)
    for d, (op, p) in enumerate((fwd, bwd)):
        lab = cv.label(op)
        for k, value in p["final_counters"].items():
            cv.set_entry(op, np.asarray(value), k)
        for k in p["passthrough"]:
            cv.set_entry(op, p["entries"][k], k)
        h = b.reshape(b.slice(h_t, [d, 0, 0], [1, batch, hidden], label=f"{lab}/h"), [batch, hidden], label=f"{lab}/h")
        cv.set_output(op, h, p["h_var"])
        if p["c_var"] is not None:
            c = b.reshape(b.slice(c_t, [d, 0, 0], [1, batch, hidden], label=f"{lab}/c"), [batch, hidden],
                          label=f"{lab}/c")
            cv.set_output(op, c, p["c_var"])
        if p["buf_var"] is None:
            continue
        buf_shape = [int(v) for v in p["entries"][p["buf_var"]].shape]
        if not p["whole_sequence"]:
            cv.set_output(op, b.reshape(h, buf_shape, label=f"{lab}/buffer"), p["buf_var"])
            continue
        buf = b.reshape(b.slice(seq, [0, d, 0, 0], [steps, 1, batch, hidden], label=f"{lab}/buffer"), buf_shape,
                        label=f"{lab}/buffer")
        if d == 1:
            cv.reversed_of[op.outputs[p["buf_var"]]] = (buf, 0)
            buf = b.reverse(buf, axes=[0], label=f"{lab}/steps")
        cv.set_output(op, buf, p["buf_var"])


def _view_chain(cv: Converter, tensor: int, steps: int, reversal: bool) -> int | None:
    """Follow ``tensor`` through the operators that keep its values in order (RESHAPE,
    SQUEEZE, EXPAND_DIMS, a STRIDED_SLICE of strides 1 that keeps every value), each its value's only
    reader, and with ``reversal`` exactly one REVERSE_V2 along the axis of ``steps``;
    return the tensor at the end (read by a non-view operator), or None."""
    reversed_once = False
    while True:
        readers = cv.readers(tensor)
        if len(readers) != 1 or tensor in cv.model.outputs:
            return None
        o = readers[0]
        size = int(np.prod(cv.model.tensors[tensor].shape))
        if o.name in ("RESHAPE", "SQUEEZE", "EXPAND_DIMS", "STRIDED_SLICE") and o.inputs[0] == tensor and \
                int(np.prod(cv.out_tensor(o).shape)) == size:
            if o.name == "STRIDED_SLICE":  # all the values with strides 1: the identity
                strides = cv.static(o, 3)
                if strides is None or (strides.reshape(-1) != 1).any():
                    return None
        elif o.name == "REVERSE_V2" and reversal and not reversed_once and o.inputs[0] == tensor:
            axes, shape = cv.static(o, 1), [int(v) for v in cv.model.tensors[tensor].shape]
            if axes is None or axes.size != 1 or shape[int(axes.reshape(-1)[0]) % len(shape)] != steps or \
                    sum(v != 1 for v in shape) > 2:
                return None
            reversed_once = True
        else:
            return tensor if reversed_once == reversal else None
        tensor = o.outputs[0]


def _merged_concat(cv: Converter, fwd: tuple[OperatorInfo, dict[str, Any]], bwd: tuple[OperatorInfo, dict[str, Any]],
                   seq: Any, h_t: Any, label: str) -> None:
    """Keras' ``Bidirectional`` output (``merge_mode="concat"``): the CONCATENATION along the
    last axis of the forward loop's buffer and of the backward one's reversed back is the
    merged operator's sequence ``[T, 2, B, H]`` (or final state ``[2, B, H]``) brought
    batch-major: at batch 1 through views alone (a reshape), else through the converter's
    TRANSPOSE to batch-major (``[B, T, H]``, the backward one then reversed along axis 1; one
    transpose of the operator's output). The concatenation takes it, and the per-direction
    slices are left to no reader."""
    from .ops import _fb, _opt

    (op_f, pf), (op_r, pr) = fwd, bwd
    if pf["buf_var"] is None or pr["buf_var"] is None:
        return
    whole, batch, steps = pf["whole_sequence"], pf["batch"], pf["steps"]
    if batch == 1:
        ends = [_view_chain(cv, op.outputs[p["buf_var"]], steps, whole and d == 1)
                for d, (op, p) in enumerate((fwd, bwd))]
    else:
        ends = [_batch_major_chain(cv, op.outputs[p["buf_var"]], whole, whole and d == 1)
                for d, (op, p) in enumerate((fwd, bwd))]
    if ends[0] is None or ends[1] is None:
        return
    concat = next(iter(cv.readers(ends[0])), None)
    if concat is None or concat.name != "CONCATENATION" or list(concat.inputs) != ends:
        return
    o = concat.options(_fb.ConcatenationOptions)
    out_shape = [int(v) for v in cv.out_tensor(concat).shape]
    if _opt(o, "FusedActivationFunction", 0) != 0 or int(_opt(o, "Axis", 0)) % len(out_shape) != len(out_shape) - 1:
        return
    value = seq if whole else h_t
    if int(np.prod(out_shape)) != int(np.prod(value.shape)):
        return
    if batch != 1:  # [T, 2, B, H] -> [B, T, 2, H]; [2, B, H] -> [B, 2, H]
        value = cv.builder.transpose(value, permutation=[2, 0, 1, 3] if whole else [1, 0, 2],
                                     label=f"{label}/batch_major")
    cv.set_output(concat, cv.builder.reshape(value, out_shape, label=f"{label}/merged"))
    cv.claimed.add(concat.index)


def _batch_major_chain(cv: Converter, tensor: int, whole: bool, reversal: bool) -> int | None:
    """TensorFlow's converter's forms beyond batch 1: a loop's sequence buffer ``[T, B, H]``
    read by a TRANSPOSE to ``[B, T, H]`` alone (then, with ``reversal``, by a REVERSE_V2 of
    axis 1 alone), or its last state ``[1, B, H]`` by a RESHAPE or a STRIDED_SLICE of strides 1
    that keeps every value (``[B, H]``) alone; the tensor at the end, or None."""
    def sole(t: int, *names: str) -> OperatorInfo | None:
        readers = cv.readers(t)
        if len(readers) != 1 or t in cv.model.outputs or readers[0].name not in names or readers[0].inputs[0] != t:
            return None
        return readers[0]

    if not whole:
        o = sole(tensor, "STRIDED_SLICE", "RESHAPE")
        if o is None or int(np.prod(cv.out_tensor(o).shape)) != int(np.prod(cv.model.tensors[tensor].shape)) or \
                len(cv.out_tensor(o).shape) != 2:
            return None
        strides = cv.static(o, 3) if o.name == "STRIDED_SLICE" else np.ones(1)
        if strides is None or (strides.reshape(-1) != 1).any():
            return None
        return o.outputs[0]
    o = sole(tensor, "TRANSPOSE")
    perm = cv.static(o, 1) if o is not None else None
    if o is None or perm is None or [int(v) for v in perm.reshape(-1)] != [1, 0, 2]:
        return None
    end = o.outputs[0]
    if reversal:
        r = sole(end, "REVERSE_V2")
        axes = cv.static(r, 1) if r is not None else None
        if r is None or axes is None or [int(a) % 3 for a in axes.reshape(-1)] != [1]:
            return None
        end = r.outputs[0]
    return end


def _relu_only(body: ModelInfo) -> bool:
    """Whether ``body`` applies a RELU (an operator, or the fused activation of an ADD, SUB,
    MUL or FULLY_CONNECTED) and no other bounded activation or MINIMUM / MAXIMUM: then its
    cell activation, if not tanh, can only be relu (random probes do not reach RELU6's 6)."""
    from .ops import _fb

    options = {"ADD": "AddOptions", "SUB": "SubOptions", "MUL": "MulOptions",
               "FULLY_CONNECTED": "FullyConnectedOptions"}
    relu = False
    for o in body.operators:
        if o.name in ("RELU6", "RELU_N1_TO_1", "RELU_0_TO_1", "MINIMUM", "MAXIMUM", "LEAKY_RELU", "PRELU"):
            return False
        code = 0
        if o.name in options:
            opts = o.options(getattr(_fb, options[o.name]))
            code = opts.FusedActivationFunction() if opts is not None else 0
        if code not in (0, 1):
            return False
        relu = relu or o.name == "RELU" or code == 1
    return relu


#: A plain RNN's activations (Keras' SimpleRNN, TFLite's fused activation), in GRU form.
_PLAIN_ACTS: dict[str, Callable[[np.ndarray], np.ndarray]] = {"tanh": np.tanh, "relu": lambda v: np.maximum(v, 0.0), "sigmoid": _sigmoid}
_PLAIN_OPS = {"TANH": "tanh", "RELU": "relu", "LOGISTIC": "sigmoid"}


def plain_rnn(cv: Converter, x: Any, w: np.ndarray, r: np.ndarray, bias: np.ndarray, steps: int, hidden: int,
              act: str, h0: Any, label: str, direction: str = "forward") -> tuple[Any, Any]:
    """``h = act(x W' + h R' + bias)`` over a time-major ``x`` ``[steps, batch, input]`` as
    WebNN's ``gru`` (returns its final state ``[1, batch, hidden]`` and sequence ``[steps, 1,
    batch, hidden]``): update and reset rows of zeros, a ``relu`` gate activation and gate
    biases 0 (update) and 1 (reset), so that z = relu(0) = 0 and r = relu(1) = 1 exactly and
    the GRU's ``z * h + (1 - z) * n`` is ``n = act(x W' + bias + h R')``. The engine runs
    such a gru's new gate alone (``ops.recurrent._plain_rnn``). With ``direction="both"``,
    ``w``, ``r`` and ``bias`` hold both directions (``[2, hidden, input]``, ...)."""
    b = cv.builder
    w3, r3, b2 = (w[None], r[None], bias[None]) if w.ndim == 2 else (w, r, bias)  # [D, ...] for "both"
    nd, isz = w3.shape[0], w3.shape[2]

    def const(a: np.ndarray) -> Any:
        a = np.ascontiguousarray(a, dtype=cv._np_float)
        return b.constant({"data_type": cv.float_type, "shape": list(a.shape)}, a)

    gw = np.concatenate([np.zeros((nd, 2 * hidden, isz)), w3], axis=1)
    gr = np.concatenate([np.zeros((nd, 2 * hidden, hidden)), r3], axis=1)
    gb = np.concatenate([np.zeros((nd, hidden)), np.ones((nd, hidden)), b2], axis=1)
    h_t, seq = b.gru(x, const(gw), const(gr), steps, hidden, bias=const(gb), initial_hidden_state=h0,
                     reset_after=True, return_sequence=True, direction=direction, layout="zrn",
                     activations=["relu", act], label=label)
    return h_t, seq


def _emit(cv: Converter, op: OperatorInfo, entries: list[Any], *, act: str, gates: int, hidden: int, steps: int, batch: int,
          w: np.ndarray, r: np.ndarray, w_bias: np.ndarray, r_bias: np.ndarray, h_var: int, c_var: int | None,
          seq_var: int, buf_var: int | None, whole_sequence: bool, final_counters: dict[int, np.ndarray],
          passthrough: list[int], reset_after: bool = True) -> None:
    b, label = cv.builder, cv.label(op)

    def const(a: np.ndarray) -> Any:
        a = np.ascontiguousarray(a, dtype=cv._np_float)
        return b.constant({"data_type": cv.float_type, "shape": list(a.shape)}, a)

    def operand(k: int) -> Any:
        e = entries[k]
        return const(e) if isinstance(e, np.ndarray) else e

    def initial(k: int | None) -> Any:
        if k is None:
            return None
        e = entries[k]
        if isinstance(e, np.ndarray) and not e.any():
            return None  # zeros: the operator's default
        return b.reshape(operand(k), [1, batch, hidden], label=f"{label}/initial{k}")

    x = operand(seq_var)
    seq_tensor = op.inputs[seq_var]
    # A loop over the time reversal of a sequence (Keras' backward layer of a Bidirectional)
    # is the operator's backward direction over the sequence itself: its buffer, indexed by
    # loop step, is the operator's sequence output reversed.
    unreversed = _time_reversal_of(cv, seq_tensor)
    direction = "forward"
    if unreversed is not None:
        reversal = cv.producer(seq_tensor)
        assert reversal is not None  # (the REVERSE_V2 that _time_reversal_of found)
        x, direction, seq_tensor = unreversed, "backward", reversal.inputs[0]
    proj_bias, rest_r_bias = _fold_biases(gates, hidden, reset_after, w_bias, r_bias)
    embedded = _embedded_projection(cv, seq_tensor, w, proj_bias, label)
    if embedded is not None:
        # x W' + biases of every token is a row of a constant table: the projection is the
        # gather, and the operator's input weight the identity (its lowering reads x as the
        # projection).
        x, w = embedded, np.eye(w.shape[0])
        w_bias, r_bias = np.zeros_like(w_bias), rest_r_bias
    weight, recurrent = const(w[None]), const(r[None])
    c_t = None
    if gates == 1:
        h_t, seq = plain_rnn(cv, x, w, r, w_bias, steps, hidden, act, initial(h_var), label + "/rnn",
                             direction=direction)
    elif gates == 4:
        h_t, c_t, seq = b.lstm(x, weight, recurrent, steps, hidden, bias=const(w_bias[None]),
                               initial_hidden_state=initial(h_var), initial_cell_state=initial(c_var),
                               return_sequence=True, direction=direction, layout="ifgo",
                               activations=["sigmoid", act, act], label=label + "/lstm")
    else:
        h_t, seq = b.gru(x, weight, recurrent, steps, hidden, bias=const(w_bias[None]),
                         recurrent_bias=const(r_bias[None]), initial_hidden_state=initial(h_var), reset_after=reset_after,
                         return_sequence=True, direction=direction, layout="zrn", activations=["sigmoid", act],
                         label=label + "/gru")

    for k, value in final_counters.items():
        cv.set_entry(op, np.asarray(value), k)
    for k in passthrough:
        cv.set_entry(op, entries[k], k)
    cv.set_output(op, b.reshape(h_t, [batch, hidden], label=f"{label}/h"), h_var)
    if c_var is not None:
        cv.set_output(op, b.reshape(c_t, [batch, hidden], label=f"{label}/c"), c_var)
    if buf_var is not None:
        buf_shape = [int(d) for d in entries[buf_var].shape]
        buf = b.reshape(seq if whole_sequence else h_t, buf_shape, label=f"{label}/buffer")
        if whole_sequence and direction == "backward":
            cv.reversed_of[op.outputs[buf_var]] = (buf, 0)
            buf = b.reverse(buf, axes=[0], label=f"{label}/steps")
        cv.set_output(op, buf, buf_var)


#: A masked loop's plan (one invocation per batch row b, mask [T, B] int32): ``src[k, b]`` the
#: step of the k-th unmasked one (``hold`` for the slots after them), or with ``vocab`` that
#: step's id (``ids`` [B, T] batch-major, read at ``T - 1 - t`` when ``reversed``; negative ids
#: wrapped, as Keras' Embedding does); ``done[t, b]`` the unmasked steps up to and with t (0
#: at a masked step with ``zero``), ``count[b]`` all of them.
_MASK_PLAN_WGSL = """@group(0) @binding(0) var<storage, read> mask: array<i32>;
{% if vocab %}@group(0) @binding(1) var<storage, read> ids: array<i32>;
{% endif %}
@group(0) @binding({{ outputs[0].binding }}) var<storage, read_write> src: array<i32>;
@group(0) @binding({{ outputs[1].binding }}) var<storage, read_write> done: array<i32>;
@group(0) @binding({{ outputs[2].binding }}) var<storage, read_write> count: array<i32>;
@compute @workgroup_size({{ workgroup_size }})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let b = gid.x;
  if (b >= {{ batch }}u) { return; }
  var c = 0u;
  for (var t = 0u; t < {{ steps }}u; t = t + 1u) {
    let keep = mask[t * {{ batch }}u + b] != 0;
    if (keep) {
{% if vocab %}
      var id = ids[b * {{ steps }}u + {% if reversed %}{{ steps - 1 }}u - t{% else %}t{% endif %}];
      if (id < 0) { id = id + {{ vocab }}; }
      src[c * {{ batch }}u + b] = clamp(id, 0, {{ vocab - 1 }});
{% else %}
      src[c * {{ batch }}u + b] = i32(t);
{% endif %}
      c = c + 1u;
    }
    done[t * {{ batch }}u + b] = {% if zero %}select(0, i32(c), keep){% else %}i32(c){% endif %};
  }
  count[b] = i32(c);
  for (var k = c; k < {{ steps }}u; k = k + 1u) {
    src[k * {{ batch }}u + b] = {{ hold }};
  }
}
"""

#: A gate pre-activation at which the engine's sigmoid is exactly 1 (and at minus it exactly 0):
#: ``1 / (1 + exp(-x))`` rounds to 1.0 beyond x = 17 in float32 and exp(-x) underflows to 0
#: beyond 104; representable in float16.
_SATURATE = 1e4


def _emit_masked(cv: Converter, op: OperatorInfo, entries: list[Any], *, mask_var: int, prev_var: int | None,
                 zero_output: bool, act: str, gates: int, hidden: int, steps: int, batch: int, w: np.ndarray,
                 r: np.ndarray, w_bias: np.ndarray, r_bias: np.ndarray, h_var: int, c_var: int | None, seq_var: int,
                 buf_var: int | None, whole_sequence: bool, final_counters: dict[int, np.ndarray],
                 passthrough: list[int], reset_after: bool = True) -> None:
    """A masked recurrent loop (Keras' masking: a step whose mask is false keeps the states
    and writes the previous output, or zeros with ``zero_output``) as the operator over the
    unmasked steps alone, moved to the front in their order (a ``gather`` of the input
    projection by the indices one small kernel computes from the mask, :data:`_MASK_PLAN_WGSL`),
    and its sequence gathered back: step t outputs the state after the last unmasked step up
    to t.
    The slots after the unmasked steps keep an LSTM's cell state exactly (input gate
    pre-activation -:data:`_SATURATE`, forget gate +:data:`_SATURATE`), so the operator's
    final cell state is the layer's; the final hidden state is gathered from the sequence.
    Exact for any mask (every row of the batch its own)."""
    b, label = cv.builder, cv.label(op)
    ft = cv.float_type
    gh, isz = w.shape

    def const(a: np.ndarray, data_type: str | None = None) -> Any:
        a = np.ascontiguousarray(a, dtype=np.float32 if data_type == "float32" else cv._np_float)
        return b.constant({"data_type": data_type or ft, "shape": list(a.shape)}, a)

    def operand(k: int) -> Any:
        e = entries[k]
        return const(e) if isinstance(e, np.ndarray) else e

    def zero_state(k: int | None) -> bool:  # none, or a constant of zeros
        return k is None or (isinstance(entries[k], np.ndarray) and not entries[k].any())

    def state(k: int | None) -> Any:  # [B, H]
        if k is None or zero_state(k):
            return const(np.zeros((batch, hidden)))
        return b.reshape(operand(k), [batch, hidden], label=f"{label}/state{k}")

    def initial(k: int | None) -> Any:
        if k is None or zero_state(k):
            return None
        return b.reshape(operand(k), [1, batch, hidden], label=f"{label}/initial{k}")

    def along_time(v: Any, idx: Any, count: int, width: int, name: str) -> Any:
        """``v`` [T, B, width] at the int32 steps ``idx`` [count, B] of each batch row."""
        if batch == 1:
            return b.gather(v, b.reshape(idx, [count], label=f"{label}/{name}"), axis=0, label=f"{label}/{name}")
        idx = b.expand(b.reshape(idx, [count, batch, 1], label=f"{label}/{name}"), [count, batch, width],
                       label=f"{label}/{name}")
        return b.gather_elements(v, idx, axis=0, label=f"{label}/{name}")

    # The input projection of every step, biases included (as _emit folds them).
    proj_bias, rest_r_bias = _fold_biases(gates, hidden, reset_after, w_bias, r_bias)
    mask = e if not isinstance(e := entries[mask_var], np.ndarray) else \
        b.constant({"data_type": "uint8", "shape": list(e.shape)}, np.ascontiguousarray(e, np.uint8))
    mask = b.reshape(mask, [steps, batch], label=f"{label}/mask")
    # An LSTM's slots after the unmasked steps take a row that holds its cell state.
    hold = np.zeros((1, gh))
    hold[:, :hidden], hold[:, hidden:2 * hidden] = -_SATURATE, _SATURATE  # ifgo: i = 0, f = 1
    zero_in_plan = zero_output and zero_state(prev_var) and whole_sequence and buf_var is not None
    # A sequence read from an Embedding (maybe time-reversed: a Bidirectional layer's backward
    # half): the plan kernel picks the ids of the unmasked steps, and one gather of the
    # projected table (with the hold row) is the compacted projection.
    seq_tensor, reversed_ids = op.inputs[seq_var], False
    prod = cv.producer(seq_tensor)
    if prod is not None and _reverses(cv, seq_tensor, prod.inputs[0]):
        seq_tensor, reversed_ids = prod.inputs[0], True
    table = _embedded_table(cv, seq_tensor, w, proj_bias)
    plan_inputs = [b.cast(mask, "int32", label=f"{label}/mask")]
    if table is not None and table[1].data_type == "int32":
        projected, ids, _ = table
        vocab = projected.shape[0]
        if gates == 4:
            projected = np.concatenate([projected, hold])
        plan_inputs.append(ids)
        constants = {"vocab": vocab, "reversed": reversed_ids, "hold": vocab if gates == 4 else 0}
        proj = None
    else:
        proj = _embedded_projection(cv, op.inputs[seq_var], w, proj_bias, label)
        if proj is None:
            rows = b.reshape(operand(seq_var), [steps * batch, isz], label=f"{label}/rows")
            proj = b.gemm(rows, const(w), c=const(proj_bias), b_transpose=True, label=f"{label}/projection")
            proj = b.reshape(proj, [steps, batch, gh], label=f"{label}/projected")
        constants = {"vocab": 0, "reversed": False, "hold": steps if gates == 4 else steps - 1}
    # One small kernel reads the mask: the source step (or id) of every slot, the unmasked
    # steps up to and with every t, their count.
    src, done, count = b.wgsl(
        _MASK_PLAN_WGSL, plan_inputs,
        [{"data_type": "int32", "shape": [steps, batch]}] * 2 + [{"data_type": "int32", "shape": [1, batch]}],
        workgroup_size=64, dispatch=[-(-batch // 64)],
        constants={"steps": steps, "batch": batch, "zero": zero_in_plan, **constants}, label=f"{label}/mask_plan")
    if proj is None:
        x = b.gather(const(projected), src, axis=0, label=f"{label}/compact")
    else:
        if gates == 4:
            proj = b.concat([proj, const(np.broadcast_to(hold, (1, batch, gh)))], 0, label=f"{label}/hold")
        x = along_time(proj, src, steps, gh, "compact")

    eye = np.eye(gh)
    c_t = None
    if gates == 1:
        h_t, seq = plain_rnn(cv, x, eye, r, np.zeros(hidden), steps, hidden, act, initial(h_var), label + "/rnn")
    elif gates == 4:
        h_t, c_t, seq = b.lstm(x, const(eye[None]), const(r[None]), steps, hidden,
                               initial_hidden_state=initial(h_var), initial_cell_state=initial(c_var),
                               return_sequence=True, layout="ifgo", activations=["sigmoid", act, act],
                               label=label + "/lstm")
    else:
        h_t, seq = b.gru(x, const(eye[None]), const(r[None]), steps, hidden,
                         recurrent_bias=const(rest_r_bias[None]), initial_hidden_state=initial(h_var),
                         reset_after=reset_after, return_sequence=True, layout="zrn", activations=["sigmoid", act],
                         label=label + "/gru")
    # Step t's output is the state after the last unmasked step up to t: row done[t] of the
    # states behind the previous output's start (zeros, in Keras' layers) as row 0.
    states = b.reshape(seq, [steps, batch, hidden], label=f"{label}/states")

    def behind(k: int | None) -> Any:
        return b.concat([b.reshape(state(k), [1, batch, hidden], label=f"{label}/after{k}"), states], 0,
                        label=f"{label}/after{k}")

    with_prev = behind(prev_var)
    with_h = with_prev if zero_state(h_var) and zero_state(prev_var) else behind(h_var)
    h_final = b.reshape(along_time(with_h, count, 1, hidden, "h"), [batch, hidden], label=f"{label}/h")
    if whole_sequence and buf_var is not None:
        outs = along_time(with_prev, done, steps, hidden, "outputs")
        if zero_output and not zero_in_plan:
            outs = b.where(b.reshape(mask, [steps, batch, 1], label=f"{label}/masked"), outs, const(np.zeros(())),
                           label=f"{label}/masked")
        out_final = b.reshape(b.slice(outs, [steps - 1, 0, 0], [1, batch, hidden], label=f"{label}/last"),
                              [batch, hidden], label=f"{label}/last")
    else:
        outs = None
        out_final = h_final if with_h is with_prev else \
            b.reshape(along_time(with_prev, count, 1, hidden, "last"), [batch, hidden], label=f"{label}/last")
        if zero_output:
            keep = b.reshape(b.slice(mask, [steps - 1, 0], [1, batch], label=f"{label}/masked"), [batch, 1],
                             label=f"{label}/masked")
            out_final = b.where(keep, out_final, const(np.zeros(())), label=f"{label}/masked")

    for k, value in final_counters.items():
        cv.set_entry(op, np.asarray(value), k)
    for k in (*passthrough, mask_var):
        cv.set_entry(op, entries[k], k)
    cv.set_output(op, h_final, h_var)
    if prev_var is not None:
        cv.set_output(op, out_final, prev_var)
    if c_var is not None:
        cv.set_output(op, b.reshape(c_t, [batch, hidden], label=f"{label}/c"), c_var)
    if buf_var is not None:
        buf_shape = [int(d) for d in entries[buf_var].shape]
        cv.set_output(op, b.reshape(outs if outs is not None else out_final, buf_shape, label=f"{label}/buffer"),
                      buf_var)


#: The most values of an embedding's projected table (vocabulary x gates * hidden_size)
#: :func:`_embedded_projection` makes, beyond four times the embedding table itself.
PROJECTED_TABLE_MAX = 1 << 20


def _embedded_projection(cv: Converter, tensor: int, w: np.ndarray, bias: np.ndarray, label: str) -> Any | None:
    """A loop's time-major sequence ``tensor`` [T, B, E] that is the GATHER of a constant
    table [V, E] by ids [B, T] (Keras' ``Embedding``), brought time-major by a RESHAPE (B = 1)
    or a TRANSPOSE: the projection ``x W' + bias`` of every step as the gather of the
    projected table ``table W' + bias`` [V, G] by the same ids, time-major alike (computed
    in float64, stored in the graph's float type). None where the sequence is something
    else, the projected table would be larger than four times the table and
    :data:`PROJECTED_TABLE_MAX`, or (float16) a value of it is beyond float16's range."""
    found = _embedded_table(cv, tensor, w, bias)
    if found is None:
        return None
    projected, ids, ids_shape = found
    b = cv.builder
    rows = b.gather(b.constant({"data_type": cv.float_type, "shape": list(projected.shape)},
                               np.ascontiguousarray(projected, cv._np_float)), ids, axis=0, label=label + "/projected")
    if ids_shape[0] == 1:
        return b.reshape(rows, [ids_shape[1], 1, projected.shape[1]], label=label + "/steps")
    return b.transpose(rows, permutation=[1, 0, 2], label=label + "/steps")


def _embedded_table(cv: Converter, tensor: int, w: np.ndarray,
                    bias: np.ndarray) -> tuple[np.ndarray, Any, tuple[int, int]] | None:
    """For :func:`_embedded_projection`: the projected table ``table W' + bias`` (float64),
    the ids operand (batch-major ``[B, T]``; negative ones as the model gives them, for a
    gather that wraps them) and its shape; or None (also where the graph's float type cannot
    hold every value of the table: a value beyond float16's largest, 65504: the
    operator's own projection, in f32, takes that table; and in float16 graphs with
    ``WEBNN_GPU_FORCE_FLOAT16_PROJECTION=f32``)."""
    from .. import _env
    from .ops import _fb, _wrapped_indices

    if cv.float_type == "float16" and _env.force_choice("float16_projection", ("f32",)):
        return None  # WEBNN_GPU_FORCE_FLOAT16_PROJECTION=f32: the operator's own projection, in f32
    move = cv.producer(tensor)
    if move is None or move.name not in ("RESHAPE", "TRANSPOSE"):
        return None
    gather = cv.producer(move.inputs[0])
    if gather is None or gather.name != "GATHER" or len(gather.inputs) != 2:
        return None
    o = gather.options(_fb.GatherOptions)
    table = cv.static(gather, 0)
    if (o is not None and (o.Axis() != 0 or o.BatchDims() != 0)) or table is None or table.dtype.kind != "f" or \
            table.ndim != 2 or table.shape[1] != w.shape[1]:
        return None
    ids_shape = tuple(int(d) for d in cv.tensor(gather, 1).shape)
    steps_major = tuple(int(d) for d in cv.tensor(move, 0).shape)
    seq_shape = tuple(int(d) for d in cv.model.tensors[tensor].shape)
    if len(ids_shape) != 2 or steps_major != (*ids_shape, table.shape[1]) or \
            seq_shape != (ids_shape[1], ids_shape[0], table.shape[1]):
        return None
    if move.name == "TRANSPOSE":
        perm = cv.static(move, 1)
        if perm is None or [int(p) for p in perm.reshape(-1)] != [1, 0, 2]:
            return None
    elif ids_shape[0] != 1:
        return None
    projected = table.astype(np.float64) @ w.T + bias
    if projected.size > max(4 * table.size, PROJECTED_TABLE_MAX) or \
            (cv.float_type == "float16" and not (np.abs(projected) <= np.finfo(np.float16).max).all()):
        return None
    ids = _wrapped_indices(cv, gather, table.shape[0])
    return projected, cv.operand(gather, 1) if ids is None else cv._operands[ids], (ids_shape[0], ids_shape[1])


def _time_reversal_of(cv: Converter, tensor: int) -> Any | None:
    """The operand of the sequence that ``tensor`` (a loop's time-major sequence) reverses
    along time (a REVERSE_V2 of axis 0), or None."""
    prod = cv.producer(tensor)
    if prod is None or prod.name != "REVERSE_V2":
        return None
    axes = cv.static(prod, 1)
    rank = len(cv.tensor(prod, 0).shape)
    if axes is None or sorted({int(a) % rank for a in axes.reshape(-1)}) != [0]:
        return None
    return cv.operand(prod, 0)
