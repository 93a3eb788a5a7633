"""gru, gru_cell, lstm, lstm_cell against float64 NumPy references written from the spec's
equations (loops over time and directions, np.matmul per gate), plus two WPT vectors.

WPT vectors: web-platform-tests webnn/conformance_tests/gru.https.any.js and
lstm.https.any.js (3-Clause BSD License).

Tolerances: |got - ref| <= atol + rtol * |ref| with (2e-5, 2e-5) for float32 (f32 dot products
and activations over a few steps) and (1e-3, 2e-3) for float16 (the kernels keep the state in
f32, so the error is about the final rounding to float16).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import webnn_gpu as webnn
from helpers import assert_close, kernel_steps, kernel_templates, run_graph
from webnn_gpu.errors import MLTypeError

TOL = {"float32": dict(atol=2e-5, rtol=2e-5), "float16": dict(atol=1e-3, rtol=2e-3)}
ACT = {
    "relu": lambda v: np.maximum(v, 0.0),
    "sigmoid": lambda v: 1.0 / (1.0 + np.exp(-v)),
    "tanh": np.tanh,
}


def _block(m, layout: str, gate: str, hidden: int):
    """Rows of gate `gate` (a letter of `layout`) in a weight [G*H, K] or bias [G*H]."""
    i = layout.index(gate)
    return m[i * hidden:(i + 1) * hidden]


def _f64(a):
    return None if a is None else np.asarray(a, np.float64)


# ---------------------------------------------------------------- references
def ref_gru_cell(x, w, r, h, hidden, bias=None, rbias=None, reset_after=True, layout="zrn",
                 acts=("sigmoid", "tanh")):
    x, w, r, h = map(_f64, (x, w, r, h))
    bias = np.zeros(3 * hidden) if bias is None else _f64(bias)
    rbias = np.zeros(3 * hidden) if rbias is None else _f64(rbias)
    f, g = ACT[acts[0]], ACT[acts[1]]

    def gate(name):
        return (x @ _block(w, layout, name, hidden).T, h @ _block(r, layout, name, hidden).T,
                _block(bias, layout, name, hidden), _block(rbias, layout, name, hidden))

    xz, hz, bz, rbz = gate("z")
    xr, hr, br, rbr = gate("r")
    z = f(xz + hz + bz + rbz)
    rr = f(xr + hr + br + rbr)
    xn, _, bn, rbn = gate("n")
    rn = _block(r, layout, "n", hidden)
    if reset_after:
        n = g(xn + bn + rr * (h @ rn.T + rbn))
    else:
        n = g(xn + bn + (rr * h) @ rn.T + rbn)
    return z * h + (1.0 - z) * n


def ref_lstm_cell(x, w, r, h, c, hidden, bias=None, rbias=None, peep=None, layout="iofg",
                  acts=("sigmoid", "tanh", "tanh")):
    x, w, r, h, c = map(_f64, (x, w, r, h, c))
    bias = np.zeros(4 * hidden) if bias is None else _f64(bias)
    rbias = np.zeros(4 * hidden) if rbias is None else _f64(rbias)
    peep = np.zeros(3 * hidden) if peep is None else _f64(peep)
    f, g, hh = (ACT[a] for a in acts)

    def pre(name):
        return (x @ _block(w, layout, name, hidden).T + h @ _block(r, layout, name, hidden).T
                + _block(bias, layout, name, hidden) + _block(rbias, layout, name, hidden))

    i = f(pre("i") + c * _block(peep, "iof", "i", hidden))
    o = f(pre("o") + c * _block(peep, "iof", "o", hidden))
    fg = f(pre("f") + c * _block(peep, "iof", "f", hidden))
    gg = g(pre("g"))
    ct = fg * c + i * gg
    return o * hh(ct), ct


def _run_directions(x, steps, direction, step_fn, state0):
    dirs = 2 if direction == "both" else 1
    finals, seq = [], [[None] * dirs for _ in range(steps)]
    for d in range(dirs):
        state = state0(d)
        backward = direction == "backward" or d == 1
        for s in range(steps):
            t = steps - 1 - s if backward else s
            state = step_fn(d, x[t], state)
            seq[t][d] = state
        finals.append(state)
    return finals, seq


def ref_gru(x, w, r, steps, hidden, bias=None, rbias=None, h0=None, reset_after=True, direction="forward",
            layout="zrn", acts=("sigmoid", "tanh")):
    batch = x.shape[1]

    def step(d, xt, h):
        return ref_gru_cell(xt, w[d], r[d], h, hidden, None if bias is None else bias[d],
                            None if rbias is None else rbias[d], reset_after, layout, acts)

    finals, seq = _run_directions(_f64(x), steps, direction, step,
                                  lambda d: np.zeros((batch, hidden)) if h0 is None else _f64(h0[d]))
    return np.stack(finals), np.array(seq)


def ref_lstm(x, w, r, steps, hidden, bias=None, rbias=None, peep=None, h0=None, c0=None, direction="forward",
             layout="iofg", acts=("sigmoid", "tanh", "tanh")):
    batch = x.shape[1]

    def step(d, xt, hc):
        return ref_lstm_cell(xt, w[d], r[d], hc[0], hc[1], hidden, *(None if a is None else a[d]
                                                                     for a in (bias, rbias, peep)), layout, acts)

    def init(d):
        z = np.zeros((batch, hidden))
        return (z if h0 is None else _f64(h0[d]), z if c0 is None else _f64(c0[d]))

    finals, seq = _run_directions(_f64(x), steps, direction, step, init)
    return (np.stack([f[0] for f in finals]), np.stack([f[1] for f in finals]),
            np.array([[hc[0] for hc in row] for row in seq]))


# ---------------------------------------------------------------- helpers
def _rand(rng, shape, dtype, scale=0.5):
    with np.errstate(under="ignore"):
        return np.asarray(rng.uniform(-scale, scale, shape)).astype(dtype)


def _check(got, want, dtype, what=""):
    assert got.dtype == np.dtype(dtype), what
    assert_close(got, want, **TOL[dtype], err_msg=what)


# ---------------------------------------------------------------- WPT vectors
def test_wpt_gru_backward_return_sequence(ctx):
    f = np.float32
    x = np.array([1, 2, 2, 1, 1, 1, 3, 4, 1, 2, 1, 1], f).reshape(2, 3, 2)
    w = np.array([1, -1, 2, -2, 0.5, -0.5, 0, 0.1] * 3, f).reshape(1, 12, 2)
    r = np.full((1, 12, 4), 0.1, f)
    bias = np.array([1, 2, 1, 2, 1, 1, 1, 1, 0.5, 0.5, 0.5, 0.5], f).reshape(1, 12)

    def build(b, o):
        outs = b.gru(o["x"], o["w"], o["r"], 2, 4, bias=o["b"], recurrent_bias=o["b"], reset_after=False,
                     return_sequence=True, direction="backward", activations=["relu", "relu"])
        return {"h": outs[0], "seq": outs[1]}

    out = run_graph(ctx, build, {"x": x, "w": w, "r": r, "b": bias})
    want_h = [0, 0, -0.24974998831748963, -18.59588623046875, -2.0657243728637697, -10.551867485046387,
              -1.3937838077545167, -15.2454833984375, -1.1589999198913575, -9.476999282836914,
              -1.1589999198913575, -11.319169044494629]
    want_seq = want_h + [0, 0, -0.25, -4.760000228881836, 0, 0, -0.25, -3.8399999141693117, -1, -3, -1,
                         -3.4100000858306886]
    assert_close(out["h"].ravel(), want_h, atol=1e-5, rtol=1e-6)
    assert_close(out["seq"].ravel(), want_seq, atol=1e-5, rtol=1e-6)
    assert out["seq"].shape == (2, 1, 3, 4)
    # The float64 reference agrees with the vector.
    h, seq = ref_gru(x, w, r, 2, 4, bias, bias, reset_after=False, direction="backward", acts=("relu", "relu"))
    assert_close(h.ravel(), want_h, atol=1e-5, rtol=1e-6)
    assert_close(seq.ravel(), want_seq, atol=1e-5, rtol=1e-6)


def test_wpt_lstm_relu(ctx):
    f = np.float32
    x = np.array([1, 2, 2, 1], f).reshape(1, 2, 2)
    w = np.array([1, -1, 2, -2] * 4, f).reshape(1, 8, 2)
    r = np.full((1, 8, 2), 0.1, f)
    bias = np.array([1, 2, 1, 2, 1, 2, 1, 2], f).reshape(1, 8)
    peep = np.zeros((1, 6), f)

    def build(b, o):
        h, c, seq = b.lstm(o["x"], o["w"], o["r"], 1, 2, bias=o["b"], recurrent_bias=o["b"],
                           peephole_weight=o["p"], return_sequence=True, activations=["relu"] * 3)
        return {"h": h, "c": c, "seq": seq}

    out = run_graph(ctx, build, {"x": x, "w": w, "r": r, "b": bias, "p": peep})
    np.testing.assert_allclose(out["h"].ravel(), [1, 8, 27, 216], rtol=1e-6)
    np.testing.assert_allclose(out["c"].ravel(), [1, 4, 9, 36], rtol=1e-6)
    np.testing.assert_allclose(out["seq"].ravel(), [1, 8, 27, 216], rtol=1e-6)


# ---------------------------------------------------------------- gru
GRU_CASES = list(itertools.product(["forward", "backward", "both"], [True, False], ["zrn", "rzn"]))
ACT_PAIRS = [("sigmoid", "tanh"), ("tanh", "relu"), ("sigmoid", "sigmoid"), ("relu", "tanh")]


@pytest.mark.parametrize("direction, reset_after, layout", GRU_CASES)
def test_gru_options(ctx, rng, direction, reset_after, layout):
    steps, batch, isz, hidden = 3, 2, 3, 4
    nd = 2 if direction == "both" else 1
    case = GRU_CASES.index((direction, reset_after, layout))
    acts = ACT_PAIRS[case % len(ACT_PAIRS)]
    with_bias, with_rbias, with_h0, seq = case % 2 == 0, case % 3 != 1, case % 4 < 2, case % 5 != 3
    dt = "float32"
    inputs = {"x": _rand(rng, (steps, batch, isz), dt, 1.0), "w": _rand(rng, (nd, 3 * hidden, isz), dt),
              "r": _rand(rng, (nd, 3 * hidden, hidden), dt)}
    if with_bias:
        inputs["b"] = _rand(rng, (nd, 3 * hidden), dt)
    if with_rbias:
        inputs["rb"] = _rand(rng, (nd, 3 * hidden), dt)
    if with_h0:
        inputs["h0"] = _rand(rng, (nd, batch, hidden), dt)

    def build(b, o):
        outs = b.gru(o["x"], o["w"], o["r"], steps, hidden, bias=o.get("b"), recurrent_bias=o.get("rb"),
                     initial_hidden_state=o.get("h0"), reset_after=reset_after, return_sequence=seq,
                     direction=direction, layout=layout, activations=list(acts), label="g")
        assert len(outs) == (2 if seq else 1)
        return {"h": outs[0], **({"seq": outs[1]} if seq else {})}

    out = run_graph(ctx, build, inputs)
    h, s = ref_gru(inputs["x"], inputs["w"], inputs["r"], steps, hidden, inputs.get("b"), inputs.get("rb"),
                   inputs.get("h0"), reset_after, direction, layout, acts)
    _check(out["h"], h, dt, "hidden")
    if seq:
        assert out["seq"].shape == (steps, nd, batch, hidden)
        _check(out["seq"], s, dt, "sequence")


@pytest.mark.parametrize("reset_after", [True, False])
def test_gru_float16(ctx, rng, reset_after):
    steps, batch, isz, hidden = 4, 3, 5, 6
    dt = "float16"
    inputs = {"x": _rand(rng, (steps, batch, isz), dt, 1.0), "w": _rand(rng, (2, 3 * hidden, isz), dt),
              "r": _rand(rng, (2, 3 * hidden, hidden), dt), "b": _rand(rng, (2, 3 * hidden), dt),
              "rb": _rand(rng, (2, 3 * hidden), dt), "h0": _rand(rng, (2, batch, hidden), dt)}

    def build(b, o):
        h, s = b.gru(o["x"], o["w"], o["r"], steps, hidden, bias=o["b"], recurrent_bias=o["rb"],
                     initial_hidden_state=o["h0"], reset_after=reset_after, return_sequence=True, direction="both")
        return {"h": h, "seq": s}

    out = run_graph(ctx, build, inputs)
    h, s = ref_gru(inputs["x"], inputs["w"], inputs["r"], steps, hidden, inputs["b"], inputs["rb"], inputs["h0"],
                   reset_after, "both")
    _check(out["h"], h, dt)
    _check(out["seq"], s, dt)


@pytest.mark.parametrize("dt", ["float32", "float16"])
@pytest.mark.parametrize("reset_after, layout, acts", [(True, "zrn", None), (False, "rzn", ["relu", "tanh"]),
                                                       (True, "rzn", ["tanh", "sigmoid"])])
def test_gru_cell(ctx, rng, dt, reset_after, layout, acts):
    batch, isz, hidden = 3, 4, 5
    inputs = {"x": _rand(rng, (batch, isz), dt, 1.0), "w": _rand(rng, (3 * hidden, isz), dt),
              "r": _rand(rng, (3 * hidden, hidden), dt), "h": _rand(rng, (batch, hidden), dt),
              "b": _rand(rng, (3 * hidden,), dt), "rb": _rand(rng, (3 * hidden,), dt)}

    def build(b, o):
        kw = {} if acts is None else {"activations": acts}
        y = b.gru_cell(o["x"], o["w"], o["r"], o["h"], hidden, bias=o["b"], recurrent_bias=o["rb"],
                       reset_after=reset_after, layout=layout, **kw)
        assert y.shape == (batch, hidden) and y.data_type == dt
        return {"y": y, "y2": b.gru_cell(o["x"], o["w"], o["r"], o["h"], hidden)}

    out = run_graph(ctx, build, inputs)
    want = ref_gru_cell(inputs["x"], inputs["w"], inputs["r"], inputs["h"], hidden, inputs["b"], inputs["rb"],
                        reset_after, layout, acts or ("sigmoid", "tanh"))
    _check(out["y"], want, dt)
    _check(out["y2"], ref_gru_cell(inputs["x"], inputs["w"], inputs["r"], inputs["h"], hidden), dt)


# ---------------------------------------------------------------- lstm
LSTM_CASES = list(itertools.product(["forward", "backward", "both"], ["iofg", "ifgo"]))
ACT_TRIPLES = [("sigmoid", "tanh", "tanh"), ("relu", "tanh", "sigmoid"), ("tanh", "relu", "relu")]


@pytest.mark.parametrize("steps", [3, 1])  # one step: the single lstm_cell kernel
@pytest.mark.parametrize("direction, layout", LSTM_CASES)
def test_lstm_options(ctx, rng, direction, layout, steps):
    batch, isz, hidden = 2, 3, 4
    nd = 2 if direction == "both" else 1
    case = LSTM_CASES.index((direction, layout))
    acts = ACT_TRIPLES[case % 3]
    flags = [(case >> k) & 1 == 0 for k in range(5)]  # bias, rbias, peephole, h0, c0
    seq = case != 1
    dt = "float32"
    inputs = {"x": _rand(rng, (steps, batch, isz), dt, 1.0), "w": _rand(rng, (nd, 4 * hidden, isz), dt),
              "r": _rand(rng, (nd, 4 * hidden, hidden), dt)}
    for name, shape, on in [("b", (nd, 4 * hidden), flags[0]), ("rb", (nd, 4 * hidden), flags[1]),
                            ("p", (nd, 3 * hidden), flags[2]), ("h0", (nd, batch, hidden), flags[3]),
                            ("c0", (nd, batch, hidden), flags[4])]:
        if on:
            inputs[name] = _rand(rng, shape, dt)

    def build(b, o):
        outs = b.lstm(o["x"], o["w"], o["r"], steps, hidden, bias=o.get("b"), recurrent_bias=o.get("rb"),
                      peephole_weight=o.get("p"), initial_hidden_state=o.get("h0"), initial_cell_state=o.get("c0"),
                      return_sequence=seq, direction=direction, layout=layout, activations=acts)
        assert len(outs) == (3 if seq else 2)
        return dict(zip(["h", "c", "seq"], outs))

    out = run_graph(ctx, build, inputs)
    h, c, s = ref_lstm(inputs["x"], inputs["w"], inputs["r"], steps, hidden, inputs.get("b"), inputs.get("rb"),
                       inputs.get("p"), inputs.get("h0"), inputs.get("c0"), direction, layout, acts)
    _check(out["h"], h, dt, "hidden")
    _check(out["c"], c, dt, "cell")
    if seq:
        _check(out["seq"], s, dt, "sequence")


@pytest.mark.parametrize("steps", [5, 1])
def test_lstm_float16_all_options(ctx, rng, steps):
    batch, isz, hidden = 2, 4, 3
    dt = "float16"
    nd = 2
    inputs = {"x": _rand(rng, (steps, batch, isz), dt, 1.0), "w": _rand(rng, (nd, 4 * hidden, isz), dt),
              "r": _rand(rng, (nd, 4 * hidden, hidden), dt), "b": _rand(rng, (nd, 4 * hidden), dt),
              "rb": _rand(rng, (nd, 4 * hidden), dt), "p": _rand(rng, (nd, 3 * hidden), dt),
              "h0": _rand(rng, (nd, batch, hidden), dt), "c0": _rand(rng, (nd, batch, hidden), dt)}

    def build(b, o):
        h, c, s = b.lstm(o["x"], o["w"], o["r"], steps, hidden, bias=o["b"], recurrent_bias=o["rb"],
                         peephole_weight=o["p"], initial_hidden_state=o["h0"], initial_cell_state=o["c0"],
                         return_sequence=True, direction="both", layout="ifgo")
        return {"h": h, "c": c, "seq": s}

    out = run_graph(ctx, build, inputs)
    h, c, s = ref_lstm(inputs["x"], inputs["w"], inputs["r"], steps, hidden, inputs["b"], inputs["rb"], inputs["p"],
                       inputs["h0"], inputs["c0"], "both", "ifgo")
    _check(out["h"], h, dt)
    _check(out["c"], c, dt)
    _check(out["seq"], s, dt)
    templates = kernel_templates(ctx, build, inputs)
    assert templates == (["recurrent/lstm_cell.wgsl"] if steps == 1 else
                         ["recurrent/project.wgsl", "recurrent/sequence.wgsl"])


@pytest.mark.parametrize("dt", ["float32", "float16"])
@pytest.mark.parametrize("layout, acts, full", [("iofg", None, True), ("ifgo", ["tanh", "sigmoid", "relu"], True),
                                                ("iofg", None, False)])
def test_lstm_cell(ctx, rng, dt, layout, acts, full):
    batch, isz, hidden = 2, 3, 4
    inputs = {"x": _rand(rng, (batch, isz), dt, 1.0), "w": _rand(rng, (4 * hidden, isz), dt),
              "r": _rand(rng, (4 * hidden, hidden), dt), "h": _rand(rng, (batch, hidden), dt),
              "c": _rand(rng, (batch, hidden), dt)}
    if full:
        inputs.update(b=_rand(rng, (4 * hidden,), dt), rb=_rand(rng, (4 * hidden,), dt),
                      p=_rand(rng, (3 * hidden,), dt))

    def build(b, o):
        kw = {} if acts is None else {"activations": acts}
        h, c = b.lstm_cell(o["x"], o["w"], o["r"], o["h"], o["c"], hidden, bias=o.get("b"),
                           recurrent_bias=o.get("rb"), peephole_weight=o.get("p"), layout=layout, **kw)
        return {"h": h, "c": c}

    out = run_graph(ctx, build, inputs)
    h, c = ref_lstm_cell(inputs["x"], inputs["w"], inputs["r"], inputs["h"], inputs["c"], hidden, inputs.get("b"),
                         inputs.get("rb"), inputs.get("p"), layout, acts or ("sigmoid", "tanh", "tanh"))
    _check(out["h"], h, dt)
    _check(out["c"], c, dt)


@pytest.mark.parametrize("case", [0, 4, 9])
def test_per_step_kernels(ctx, rng, monkeypatch, case):
    """The per-step kernels (forced; the default for large recurrent products) on cases of
    test_gru_options and test_lstm_options (which take the sequence kernel)."""
    monkeypatch.setenv("WEBNN_GPU_FORCE_RECURRENT", "steps")
    if case < 6:
        direction, layout = LSTM_CASES[case]
        test_lstm_options(ctx, rng, direction, layout, 3)
    else:
        test_gru_options(ctx, rng, *GRU_CASES[case])


def test_longer_sequences_share_one_step_pipeline(ctx, rng, monkeypatch):
    monkeypatch.setenv("WEBNN_GPU_FORCE_RECURRENT", "steps")
    steps, batch, isz, hidden = 24, 3, 8, 16
    dt = "float32"
    inputs = {"x": _rand(rng, (steps, batch, isz), dt, 1.0), "w": _rand(rng, (2, 4 * hidden, isz), dt, 0.3),
              "r": _rand(rng, (2, 4 * hidden, hidden), dt, 0.3), "b": _rand(rng, (2, 4 * hidden), dt),
              "gw": _rand(rng, (1, 3 * hidden, isz), dt, 0.3), "gr": _rand(rng, (1, 3 * hidden, hidden), dt, 0.3)}
    b = webnn.MLGraphBuilder(ctx)
    ops = {n: b.input(n, {"data_type": dt, "shape": list(a.shape)}) for n, a in inputs.items()}
    h, c, s = b.lstm(ops["x"], ops["w"], ops["r"], steps, hidden, bias=ops["b"], return_sequence=True,
                     direction="both")
    (gh,) = b.gru(ops["x"], ops["gw"], ops["gr"], steps, hidden, reset_after=False, direction="backward")
    misses = ctx._pipelines.misses
    graph = b.build({"h": h, "c": c, "seq": s, "gh": gh})
    # project + init + steps + finish per op; the steps reuse one pipeline per kernel variant.
    assert graph.kernel_count == (steps + 3) + (2 * steps + 3)
    assert ctx._pipelines.misses - misses <= 9  # lstm: 4 kernel texts, gru (reset_after=False): 5
    out = ctx.compute(graph, inputs)
    rh, rc, rs = ref_lstm(inputs["x"], inputs["w"], inputs["r"], steps, hidden, inputs["b"], direction="both")
    _check(out["h"], rh, dt)
    _check(out["c"], rc, dt)
    _check(out["seq"], rs, dt)
    rg, _ = ref_gru(inputs["x"], inputs["gw"], inputs["gr"], steps, hidden, reset_after=False, direction="backward")
    _check(out["gh"], rg, dt)


# Large recurrent products (past SEQUENCE_MAX_MACS): the per-step path. Each case: (op, direction,
# data type, hidden, batch, weights "const" or "input", reset_after, options); on llvmpipe step4
# takes 8 units per invocation where hidden % 8 == 0 (160, 256), 4 otherwise (164), and shares
# the state's loads across a subgroup's 8 lanes where hidden is a multiple of 8 times that (256);
# 162 takes the scalar step kernels. The projection is a gemm ([T * B, D * GH]) for constant
# weights, else the project kernel ([D, T, B, GH]).
PER_STEP_CASES = [
    ("lstm", "both", "float32", 160, 2, "const", True, "h0 c0 peep seq"),
    ("lstm", "forward", "float32", 164, 3, "const", True, ""),
    ("lstm", "backward", "float32", 160, 4, "const", True, "h0 peep seq"),
    ("lstm", "both", "float16", 160, 2, "const", True, "h0 c0 peep seq"),
    ("lstm", "both", "float32", 160, 2, "input", True, "h0 c0 peep seq"),
    ("lstm", "backward", "float32", 162, 2, "const", True, "c0 seq"),
    ("gru", "both", "float32", 160, 2, "const", True, "h0 rbias seq"),
    ("gru", "forward", "float32", 164, 2, "const", False, "h0 seq"),
    ("gru", "backward", "float32", 160, 1, "const", True, ""),
    ("gru", "both", "float16", 160, 3, "const", False, "h0 rbias seq"),
    ("gru", "both", "float32", 162, 2, "const", True, "h0 rbias seq"),
    ("gru", "forward", "float32", 160, 2, "input", False, "rbias seq"),
    ("lstm", "forward", "float32", 256, 1, "const", True, "c0 seq"),
    ("gru", "both", "float32", 256, 2, "const", False, "h0 rbias seq"),
]


def _per_step_case(rng, op, direction, dt, hidden, batch, weights, reset_after, options, steps=4, isz=12):
    """A builder function, its inputs (name -> array) and the float64 reference outputs of one
    PER_STEP_CASES case."""
    nd, g = (2 if direction == "both" else 1), (4 if op == "lstm" else 3)
    opts = options.split()
    arrs = {"w": _rand(rng, (nd, g * hidden, isz), dt, 0.3), "r": _rand(rng, (nd, g * hidden, hidden), dt, 0.15),
            "b": _rand(rng, (nd, g * hidden), dt)}
    if "rbias" in opts or op == "lstm":
        arrs["rb"] = _rand(rng, (nd, g * hidden), dt)
    for name, shape in (("h0", (nd, batch, hidden)), ("c0", (nd, batch, hidden)), ("peep", (nd, 3 * hidden))):
        if name in opts:
            arrs[name] = _rand(rng, shape, dt)
    x = _rand(rng, (steps, batch, isz), dt, 1.0)
    seq = "seq" in opts

    def build(b, o):
        c = {k: (o[k] if weights == "input" else b.constant(v)) for k, v in arrs.items()}
        if op == "lstm":
            outs = b.lstm(o["x"], c["w"], c["r"], steps, hidden, bias=c["b"], recurrent_bias=c.get("rb"),
                          peephole_weight=c.get("peep"), initial_hidden_state=c.get("h0"),
                          initial_cell_state=c.get("c0"), return_sequence=seq, direction=direction, layout="ifgo")
            names = ["h", "c"]
        else:
            outs = b.gru(o["x"], c["w"], c["r"], steps, hidden, bias=c["b"], recurrent_bias=c.get("rb"),
                         initial_hidden_state=c.get("h0"), reset_after=reset_after, return_sequence=seq,
                         direction=direction, layout="rzn")
            names = ["h"]
        return dict(zip(names + (["seq"] if seq else []), outs))

    inputs = {"x": x, **(arrs if weights == "input" else {})}
    if op == "lstm":
        h, c, s = ref_lstm(x, arrs["w"], arrs["r"], steps, hidden, arrs["b"], arrs.get("rb"), arrs.get("peep"),
                           arrs.get("h0"), arrs.get("c0"), direction, "ifgo")
        want = {"h": h, "c": c}
    else:
        h, s = ref_gru(x, arrs["w"], arrs["r"], steps, hidden, arrs["b"], arrs.get("rb"), arrs.get("h0"),
                       reset_after, direction, "rzn")
        want = {"h": h}
    if seq:
        want["seq"] = s
    return build, inputs, want


@pytest.mark.parametrize("case", PER_STEP_CASES, ids=lambda c: "-".join(str(v) for v in c[:7]).replace(" ", "_"))
def test_per_step_path_large_hidden(ctx, rng, case):
    """Hidden sizes past the sequence kernel: the projection (one gemm on the tile kernel for
    constant weights, a float16 input cast to float32 first; the project kernel for weights
    given at run time), then a step kernel per time step (two for a GRU with reset_after
    False), against float64 NumPy: forward, backward and both directions, with and without
    initial states, peepholes, the sequence output, reset_after both ways, float16, weights
    given at run time. With T, B and D all above 1 a projection read in the other layout
    gives other values."""
    op, direction, dt, hidden, batch, weights, reset_after, options = case
    build, inputs, want = _per_step_case(rng, *case)
    templates = kernel_templates(ctx, build, inputs)
    steps = 4 * (1 if op == "lstm" or reset_after else 2)
    if weights == "const" and dt == "float16":  # x cast to float32, then the gemm
        assert templates[0] in ("elementwise/map.wgsl", "elementwise/map4.wgsl")
        templates = templates[1:]
    assert templates[0] == ("matmul/tile.wgsl" if weights == "const" else "recurrent/project.wgsl")
    step = "recurrent/step4.wgsl" if weights == "const" and hidden % 4 == 0 else f"recurrent/{op}_step.wgsl"
    assert templates[1:] == ["recurrent/init.wgsl"] + [step] * steps + ["recurrent/finish.wgsl"]
    out = run_graph(ctx, build, inputs)
    for name, ref in want.items():
        _check(out[name], ref, dt, name)


@pytest.mark.parametrize("form, sg", [("scalar", "on"), ("vec4", "off"), ("vec4", "on"), ("words", "on"),
                                      ("words8", "off"), ("words8", "on")])
@pytest.mark.parametrize("case", [PER_STEP_CASES[0], PER_STEP_CASES[9], PER_STEP_CASES[13]],
                         ids=["lstm", "gru0-float16", "gru0-256"])
def test_per_step_forms_agree(ctx, rng, monkeypatch, case, form, sg):
    """Every form of the step kernel (WEBNN_GPU_FORCE_RECURRENT_STEP, _SG) against float64
    NumPy: the scalar kernels on R as given, step4 reading its packed R as vec4s or words (4
    or 8 hidden units per invocation), with and without the subgroup's shared loads of the
    state."""
    monkeypatch.setenv("WEBNN_GPU_FORCE_RECURRENT_STEP", form)
    monkeypatch.setenv("WEBNN_GPU_FORCE_RECURRENT_STEP_SG", sg)
    build, inputs, want = _per_step_case(rng, *case)
    steps = kernel_steps(ctx, build, inputs)
    kernels = [st for st in steps if st.template.startswith("recurrent/") and "step" in st.template]
    assert kernels and all(st.template == ("recurrent/step4.wgsl" if form != "scalar" else
                                           f"recurrent/{case[0]}_step.wgsl") for st in kernels)
    if form != "scalar":
        words = form.startswith("words") and "shader-int64" in ctx.features and ctx._tuning == "lane-loop"
        # float32 R: 4 units a vec2<u64>, 8 a vec4<u64>; a float16 graph's R stays float16: 4 a u64, 8 a vec2<u64>
        decl = {("float32", "words"): "vec2<u64>", ("float32", "words8"): "vec4<u64>",
                ("float16", "words"): "u64", ("float16", "words8"): "vec2<u64>"}.get((case[2], form))
        assert (f"rw: array<{decl}>;" in kernels[0].wgsl) == words
        assert ("rw: array<" in kernels[0].wgsl) == words
        units = 8 if words and form == "words8" else 4  # whole subgroups: hidden % (units * lanes) == 0
        lanes = ctx._subgroup
        assert ("subgroupBroadcast" in kernels[0].wgsl) == (sg == "on" and lanes > 0 and case[3] % (units * lanes) == 0)
    out = run_graph(ctx, build, inputs)
    for name, ref in want.items():
        _check(out[name], ref, case[2], name)


def _plain_rnn_gru(rng, nd, hidden, isz, act, r_bias=1.0):
    """GRU weights (zrn) that make a plain RNN: zero update and reset rows, the reset bias
    ``r_bias`` (1: r = 1 with a relu gate activation)."""
    w = np.zeros((nd, 3 * hidden, isz), np.float32)
    r = np.zeros((nd, 3 * hidden, hidden), np.float32)
    b = np.zeros((nd, 3 * hidden), np.float32)
    w[:, 2 * hidden:] = _rand(rng, (nd, hidden, isz), np.float32)
    r[:, 2 * hidden:] = _rand(rng, (nd, hidden, hidden), np.float32)
    b[:, 2 * hidden:] = _rand(rng, (nd, hidden), np.float32)
    b[:, hidden:2 * hidden] = r_bias
    return w, r, b


def _plain_rnn_graph(ctx, rng, steps, batch, isz, hidden, act, r_bias, direction, r_scale=1.0):
    """A built gru graph (outputs h and the sequence s) of :func:`_plain_rnn_gru`'s weights (the
    recurrent one times ``r_scale``) and its input: ``(graph, x, w, r, bias)``."""
    nd = 2 if direction == "both" else 1
    w, r, bias = _plain_rnn_gru(rng, nd, hidden, isz, act, r_bias)
    r *= r_scale
    x = _rand(rng, (steps, batch, isz), np.float32, 1.0)
    b = webnn.MLGraphBuilder(ctx)
    xo = b.input("x", {"data_type": "float32", "shape": list(x.shape)})
    h, s = b.gru(xo, b.constant(w), b.constant(r), steps, hidden, bias=b.constant(bias), return_sequence=True,
                 direction=direction, activations=["relu", act])
    return b.build({"h": h, "s": s}), x, w, r, bias


def _check_plain_rnn(ctx, graph, x, w, r, bias, steps, hidden, direction, act):
    """The graph of :func:`_plain_rnn_graph` against the spec's GRU equations in float64."""
    out = ctx.compute(graph, {"x": x})
    rh, rs = ref_gru(x, w, r, steps, hidden, bias, direction=direction, acts=("relu", act))
    _check(out["h"], rh, "float32")
    _check(out["s"], rs, "float32")


@pytest.mark.parametrize("act, r_bias, direction", [("tanh", 1.0, "forward"), ("relu", 1.0, "both"),
                                                     ("tanh", 0.5, "backward")])
def test_gru_as_plain_rnn(ctx, rng, act, r_bias, direction):
    """A gru with constant update/reset gates (z = 0, r = 1) runs the new gate alone; with
    r = 0.5 (a near miss) all three gates: both equal the spec's equations."""
    steps, batch, isz, hidden = 6, 2, 5, 7
    nd = 2 if direction == "both" else 1
    graph, x, w, r, bias = _plain_rnn_graph(ctx, rng, steps, batch, isz, hidden, act, r_bias, direction)
    proj = graph._steps[-1].values[0]  # the sequence kernel's projections: [steps * batch, nd * gates * hidden]
    assert [st.template for st in graph._steps][1:] == ["recurrent/sequence.wgsl"]
    assert proj.shape == (steps * batch, nd * (hidden if r_bias == 1.0 else 3 * hidden))
    _check_plain_rnn(ctx, graph, x, w, r, bias, steps, hidden, direction, act)


@pytest.mark.parametrize("exact", [True, False], ids=["float16 values", "one value off"])
def test_per_step_float32_weight_of_float16_values(ctx, rng, exact):
    """A float32 recurrent weight whose values are all float16 values (weights stored in float16
    and widened) is read as float16 words on the lane-loop profile: the same products. One value
    that is not a float16 value (a near miss) keeps it in float32. Against float64 NumPy."""
    case = ("lstm", "both", "float32", 160, 2, "const", True, "h0 c0 seq")
    build, inputs, want = _per_step_case(rng, *case)
    (kernel,) = {st.wgsl for st in kernel_steps(ctx, build, inputs) if st.template == "recurrent/step4.wgsl"}
    assert "enable f16;" not in kernel  # float32 R in the float32 graph (its values are not float16 values)
    r16 = rng.uniform(-0.15, 0.15, (2, 4 * 160, 160)).astype(np.float16).astype(np.float32)
    if not exact:
        r16[1, 5, 7] = np.float32(0.1)  # not a float16 value
    x = inputs["x"]
    b = webnn.MLGraphBuilder(ctx)
    xo = b.input("x", {"data_type": "float32", "shape": list(x.shape)})
    w = _rand(rng, (2, 4 * 160, x.shape[2]), np.float32, 0.3)
    h, c, s = b.lstm(xo, b.constant(w), b.constant(r16), x.shape[0], 160, return_sequence=True, direction="both")
    graph = b.build({"h": h, "c": c, "s": s})
    (kernel,) = {st.wgsl for st in graph._steps if getattr(st, "template", "") == "recurrent/step4.wgsl"}
    words16 = "shader-int64" in ctx.features and "shader-f16" in ctx.features and ctx._tuning == "lane-loop"
    assert ("unpack2x16float" in kernel) == (exact and words16)
    out = ctx.compute(graph, {"x": x})
    rh, rc, rs = ref_lstm(x, w, r16, x.shape[0], 160, direction="both")
    for name, got, ref in (("h", out["h"], rh), ("c", out["c"], rc), ("s", out["s"], rs)):
        _check(got, ref, "float32", name)


@pytest.mark.parametrize("act, r_bias, direction, batch", [("tanh", 1.0, "both", 2), ("relu", 1.0, "backward", 3),
                                                            ("tanh", 0.5, "both", 2)])
def test_gru_as_plain_rnn_per_step(ctx, rng, act, r_bias, direction, batch):
    """A plain RNN in GRU form past the sequence kernel (hidden 160): the projection of the new
    gate's rows alone ([T * B, D * hidden]) and step4 on them (cell "rnn"); with r = 0.5 (a
    near miss) the projection of all three gates and the GRU's step. Both equal the spec's
    equations in float64."""
    steps, isz, hidden = 4, 10, 160
    nd = 2 if direction == "both" else 1
    graph, x, w, r, bias = _plain_rnn_graph(ctx, rng, steps, batch, isz, hidden, act, r_bias, direction, r_scale=0.3)
    kernels = [st for st in graph._steps if hasattr(st, "template")]
    assert [st.template for st in kernels[-steps - 2:]] == \
        ["recurrent/init.wgsl"] + ["recurrent/step4.wgsl"] * steps + ["recurrent/finish.wgsl"]
    proj = kernels[-2].values[1]  # the last step's projections
    assert proj.shape == (steps * batch, nd * (hidden if r_bias == 1.0 else 3 * hidden))
    _check_plain_rnn(ctx, graph, x, w, r, bias, steps, hidden, direction, act)


@pytest.mark.parametrize("op, direction, dt, hidden, reset_after", [
    ("lstm", "both", "float32", 8, True), ("lstm", "backward", "float32", 6, True),
    ("gru", "forward", "float16", 4, True), ("gru", "both", "float32", 5, True), ("gru", "backward", "float32", 8, False),
    ("lstm", "forward", "float32", 48, True),
    ("gru", "both", "float16", 6, False)])
def test_sequence_kernel_constant_weights(ctx, rng, op, direction, dt, hidden, reset_after):
    """Constant weights (what models load): the projection as a gemm (float32) or the project
    kernel (float16), then the sequence kernel reading the transposed recurrent weight as
    vec4 (hidden_size % 4 == 0) or scalars; every option that the kernel reads (a GRU with
    reset_after=False: z and r * h of every unit, a barrier, then the new gate)."""
    steps, batch, isz = 5, 3, 6
    nd, g = (2 if direction == "both" else 1), (4 if op == "lstm" else 3)
    arrs = {"x": _rand(rng, (steps, batch, isz), dt, 1.0), "w": _rand(rng, (nd, g * hidden, isz), dt),
            "r": _rand(rng, (nd, g * hidden, hidden), dt), "b": _rand(rng, (nd, g * hidden), dt),
            "rb": _rand(rng, (nd, g * hidden), dt), "h0": _rand(rng, (nd, batch, hidden), dt),
            "p": _rand(rng, (nd, 3 * hidden), dt), "c0": _rand(rng, (nd, batch, hidden), dt)}
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": dt, "shape": list(arrs["x"].shape)})
    c = {k: b.constant(v) for k, v in arrs.items() if k != "x"}
    if op == "lstm":
        h, cc, s = b.lstm(x, c["w"], c["r"], steps, hidden, bias=c["b"], recurrent_bias=c["rb"],
                          peephole_weight=c["p"], initial_hidden_state=c["h0"], initial_cell_state=c["c0"],
                          return_sequence=True, direction=direction, layout="ifgo")
        want = ref_lstm(arrs["x"], arrs["w"], arrs["r"], steps, hidden, arrs["b"], arrs["rb"], arrs["p"],
                        arrs["h0"], arrs["c0"], direction, "ifgo")
        outs = {"h": h, "c": cc, "s": s}
    else:
        h, s = b.gru(x, c["w"], c["r"], steps, hidden, bias=c["b"], recurrent_bias=c["rb"],
                     initial_hidden_state=c["h0"], return_sequence=True, direction=direction,
                     reset_after=reset_after)
        want = ref_gru(arrs["x"], arrs["w"], arrs["r"], steps, hidden, arrs["b"], arrs["rb"], arrs["h0"],
                       reset_after=reset_after, direction=direction)
        outs = {"h": h, "s": s}
    graph = b.build(outs)
    templates = [st.template for st in graph._steps if hasattr(st, "template")]
    assert templates[-1] == "recurrent/sequence.wgsl" and len(templates) == 2
    assert templates[0] in (("recurrent/project.wgsl",) if dt == "float16" else ("matmul/tile.wgsl", "matmul/small.wgsl"))
    assert ("r4: array<vec4<f32>>" in graph._steps[-1].wgsl) == (hidden % 4 == 0)
    # the recurrent weight in workgroup memory where it fits beside the state
    fits = 4 * (g * hidden * hidden + 4 * hidden) <= int(ctx._limits.get("max-compute-workgroup-storage-size", 16384))
    assert ("var<workgroup> rw" in graph._steps[-1].wgsl) == (hidden % 4 == 0 and fits)
    out = ctx.compute(graph, {"x": arrs["x"]})
    for name, ref in zip(outs, want):
        _check(out[name], ref, dt, name)


@pytest.mark.parametrize("cell, reset_after", [("lstm", True), ("gru", True), ("gru", False), ("rnn", True)])
def test_sequence_kernel_fits_the_device_workgroup_memory(ctx, rng, monkeypatch, cell, reset_after):
    """Every form of the sequence kernel (LSTM, GRU, GRU with reset_after=False, a GRU that is a
    plain RNN; the recurrent weight in workgroup memory or not) declares the workgroup memory
    sequence_workgroup_bytes gives, and the lowering checks it against the device's
    maxComputeWorkgroupStorageSize: one byte less and it takes the next form (the weight read
    from storage, then the per-step kernels, which take none), the results unchanged against
    the equations. (A kernel past the limit would be a NotSupportedError naming the limit and
    the op: test_checklist.py::test_workgroup_memory_past_the_device_limit_is_refused.)"""
    from webnn_gpu._lower import workgroup_storage_bytes
    from webnn_gpu.ops.recurrent import sequence_workgroup_bytes

    steps, batch, isz, hidden = 4, 2, 5, 8
    g = 4 if cell == "lstm" else 3
    x = _rand(rng, (steps, batch, isz), np.float32, 1.0)
    if cell == "rnn":
        w, r, bias = _plain_rnn_gru(rng, 1, hidden, isz, "tanh", 1.0)
    else:
        w, r, bias = (_rand(rng, (1, g * hidden, isz), np.float32), _rand(rng, (1, g * hidden, hidden), np.float32),
                      _rand(rng, (1, g * hidden), np.float32))
    gh = hidden if cell == "rnn" else g * hidden
    kcell = "lstm" if cell == "lstm" else "gru"

    def build():
        b = webnn.MLGraphBuilder(ctx)
        xo = b.input("x", {"data_type": "float32", "shape": list(x.shape)})
        if cell == "lstm":
            h, _, s = b.lstm(xo, b.constant(w), b.constant(r), steps, hidden, bias=b.constant(bias),
                             return_sequence=True, label="rec")
            want = ref_lstm(x, w, r, steps, hidden, bias)
            want = (want[0], want[2])
        else:
            acts = ("relu", "tanh") if cell == "rnn" else ("sigmoid", "tanh")  # (z = 0, r = 1: a plain RNN)
            h, s = b.gru(xo, b.constant(w), b.constant(r), steps, hidden, bias=b.constant(bias), return_sequence=True,
                         reset_after=reset_after, activations=list(acts), label="rec")
            want = ref_gru(x, w, r, steps, hidden, bias, reset_after=reset_after, acts=acts)
        graph = b.build({"h": h, "s": s})
        out = ctx.compute(graph, {"x": x})
        _check(out["h"], want[0], "float32", "h")
        _check(out["s"], want[1], "float32", "s")
        seq = [st.wgsl for st in graph._steps if getattr(st, "template", "") == "recurrent/sequence.wgsl"]
        return workgroup_storage_bytes(seq[0]) if seq else None

    limit = ctx.limits["max-compute-workgroup-storage-size"]
    with_r = sequence_workgroup_bytes(hidden, gh, kcell, reset_after, True)
    without_r = sequence_workgroup_bytes(hidden, gh, kcell, reset_after, False)
    assert with_r <= limit and build() == with_r
    monkeypatch.setitem(ctx._limits, "max-compute-workgroup-storage-size", with_r - 1)
    assert build() == without_r
    monkeypatch.setitem(ctx._limits, "max-compute-workgroup-storage-size", without_r - 1)
    assert build() is None


def test_sequence_kernel_more_units_than_invocations(ctx, rng, monkeypatch):
    """hidden_size 260 (> 256 invocations: each handles two units), forced onto the one-launch kernel."""
    monkeypatch.setenv("WEBNN_GPU_FORCE_RECURRENT", "sequence")
    steps, batch, isz, hidden = 3, 2, 4, 260
    inputs = {"x": _rand(rng, (steps, batch, isz), "float32", 1.0),
              "w": _rand(rng, (1, 4 * hidden, isz), "float32", 0.2),
              "r": _rand(rng, (1, 4 * hidden, hidden), "float32", 0.1),
              "c0": _rand(rng, (1, batch, hidden), "float32")}

    def build(b, o):
        h, c = b.lstm(o["x"], o["w"], o["r"], steps, hidden, initial_cell_state=o["c0"])
        return {"h": h, "c": c}

    assert kernel_templates(ctx, build, inputs) == ["recurrent/project.wgsl", "recurrent/sequence.wgsl"]
    out = run_graph(ctx, build, inputs)
    h, c, _ = ref_lstm(inputs["x"], inputs["w"], inputs["r"], steps, hidden, c0=inputs["c0"])
    _check(out["h"], h, "float32")
    _check(out["c"], c, "float32")


@pytest.mark.parametrize("op, steps, reset_after, direction", [("lstm", 800, True, "forward"),
                                                             ("lstm", 1100, True, "backward"),
                                                             ("gru", 1000, False, "forward")])
def test_long_sequences_stay_within_the_loop_limit(ctx, rng, op, steps, reset_after, direction):
    """llvmpipe leaves an invocation's loops after 65535 iterations in all: a 64-unit layer's
    sequence kernel runs about 70 per step (a GRU with reset_after=False twice that), so 800
    LSTM steps take one launch and longer sequences chunks of steps, a launch each, the states
    passed on; all agree with NumPy (1100 steps in one launch stopped after about 990)."""
    from webnn_gpu.ops.recurrent import SEQUENCE_LOOP_BUDGET, sequence_loop_iterations

    batch, isz, hidden = 2, 3, 64
    gates = 4 if op == "lstm" else 3
    inputs = {"x": _rand(rng, (steps, batch, isz), "float32", 1.0),
              "w": _rand(rng, (1, gates * hidden, isz), "float32", 0.3),
              "r": _rand(rng, (1, gates * hidden, hidden), "float32", 0.15),
              "h0": _rand(rng, (1, batch, hidden), "float32")}

    def build(b, o):
        if op == "lstm":
            h, c, seq = b.lstm(o["x"], o["w"], o["r"], steps, hidden, initial_hidden_state=o["h0"],
                               return_sequence=True, direction=direction)
            return {"h": h, "c": c, "seq": seq}
        h, seq = b.gru(o["x"], o["w"], o["r"], steps, hidden, initial_hidden_state=o["h0"], reset_after=reset_after,
                       return_sequence=True, direction=direction)
        return {"h": h, "seq": seq}

    launches = kernel_templates(ctx, build, inputs).count("recurrent/sequence.wgsl")
    one = sequence_loop_iterations(steps, hidden, gates * hidden, False, not reset_after) <= SEQUENCE_LOOP_BUDGET
    assert one == (steps == 800) and (launches == 1) == one and launches >= 1
    out = run_graph(ctx, build, inputs, tensor_path=False)
    if op == "lstm":
        h, c, seq = ref_lstm(inputs["x"], inputs["w"], inputs["r"], steps, hidden, h0=inputs["h0"],
                             direction=direction)
        _check(out["c"], c, "float32", "cell")
    else:
        h, seq = ref_gru(inputs["x"], inputs["w"], inputs["r"], steps, hidden, h0=inputs["h0"],
                         reset_after=reset_after, direction=direction)
    _check(out["h"], h, "float32", "hidden")
    _check(out["seq"], seq, "float32", "sequence")


# ---------------------------------------------------------------- validation
def _gru_operands(builder, nd=1, steps=2, batch=3, isz=4, hidden=5, dt="float32", **over):
    shapes = {"x": (steps, batch, isz), "w": (nd, 3 * hidden, isz), "r": (nd, 3 * hidden, hidden),
              "b": (nd, 3 * hidden), "rb": (nd, 3 * hidden), "h0": (nd, batch, hidden)}
    out = {}
    n = len(builder._inputs)
    for name, shape in shapes.items():
        d, s = over.get(name, (dt, shape))
        out[name] = builder.input(f"{name}{n}", {"data_type": d, "shape": list(s)})
    return out


def _lstm_operands(builder, nd=1, steps=2, batch=3, isz=4, hidden=5, dt="float32", **over):
    shapes = {"x": (steps, batch, isz), "w": (nd, 4 * hidden, isz), "r": (nd, 4 * hidden, hidden),
              "b": (nd, 4 * hidden), "rb": (nd, 4 * hidden), "p": (nd, 3 * hidden), "h0": (nd, batch, hidden),
              "c0": (nd, batch, hidden)}
    out = {}
    n = len(builder._inputs)
    for name, shape in shapes.items():
        d, s = over.get(name, (dt, shape))
        out[name] = builder.input(f"{name}{n}", {"data_type": d, "shape": list(s)})
    return out


GRU_ERRORS = [
    (dict(over=dict(x=("int32", (2, 3, 4)))), {}, "input", "float32 or float16"),
    (dict(over=dict(w=("float16", (1, 15, 4)))), {}, "weight", "the data type of 'input'"),
    (dict(over=dict(h0=("float16", (1, 3, 5)))), {}, "initial_hidden_state", "the data type of 'input'"),
    (dict(over=dict(x=("float32", (2, 3)))), {}, "input", "3-D"),
    (dict(over=dict(w=("float32", (1, 15, 3)))), {}, "weight", "shape [1, 15, 4]"),
    (dict(over=dict(w=("float32", (15, 4)))), {}, "weight", "shape [1, 15, 4]"),
    (dict(over=dict(r=("float32", (1, 15, 4)))), {}, "recurrent_weight", "shape [1, 15, 5]"),
    (dict(over=dict(b=("float32", (1, 14)))), {}, "bias", "shape [1, 15]"),
    (dict(over=dict(b=("float32", (15,)))), {}, "bias", "shape [1, 15]"),
    (dict(over=dict(rb=("float32", (2, 15)))), {}, "recurrent_bias", "shape [1, 15]"),
    (dict(over=dict(h0=("float32", (1, 3, 4)))), {}, "initial_hidden_state", "shape [1, 3, 5]"),
    (dict(over=dict(h0=("float32", (3, 5)))), {}, "initial_hidden_state", "shape [1, 3, 5]"),
    ({}, dict(steps=0), "steps", "an integer in [1,"),
    ({}, dict(steps=3), "steps", "input.shape[0] (2)"),
    ({}, dict(hidden_size=0), "hidden_size", "an integer in [1,"),
    ({}, dict(hidden_size=2**31), "hidden_size", "3 * hidden_size"),
    ({}, dict(hidden_size=4.0), "hidden_size", "an integer"),
    ({}, dict(activations=["sigmoid"]), "activations", "a sequence of 2"),
    ({}, dict(activations=["sigmoid", "gelu"]), "activations", "a sequence of 2"),
    ({}, dict(activations="tanh"), "activations", "a sequence of 2"),
    ({}, dict(direction="sideways"), "direction", "'forward', 'backward', 'both'"),
    ({}, dict(direction="both"), "weight", "shape [2, 15, 4]"),
    ({}, dict(layout="ifgo"), "layout", "'zrn', 'rzn'"),
    ({}, dict(reset_after=1), "reset_after", "a bool"),
    ({}, dict(return_sequence="yes"), "return_sequence", "a bool"),
]


@pytest.mark.parametrize("make, kw, arg, text", GRU_ERRORS)
def test_gru_validation(ctx, make, kw, arg, text):
    b = webnn.MLGraphBuilder(ctx)
    o = _gru_operands(b, **make.get("over", {}))
    args = dict(steps=2, hidden_size=5, bias=o["b"], recurrent_bias=o["rb"], initial_hidden_state=o["h0"])
    args.update(kw)
    with pytest.raises(MLTypeError) as info:
        b.gru(o["x"], o["w"], o["r"], args.pop("steps"), args.pop("hidden_size"), label="enc", **args)
    msg = str(info.value)
    assert msg.startswith("gru ['enc']") and f"'{arg}'" in msg and text in msg, msg
    # A failed call changes nothing: a valid call still works.
    good = _gru_operands(b)
    assert b.gru(good["x"], good["w"], good["r"], 2, 5)[0].shape == (1, 3, 5)


LSTM_ERRORS = [
    (dict(over=dict(x=("uint8", (2, 3, 4)))), {}, "input", "float32 or float16"),
    (dict(over=dict(p=("float16", (1, 15)))), {}, "peephole_weight", "the data type of 'input'"),
    (dict(over=dict(c0=("float16", (1, 3, 5)))), {}, "initial_cell_state", "the data type of 'input'"),
    (dict(over=dict(w=("float32", (1, 15, 4)))), {}, "weight", "shape [1, 20, 4]"),
    (dict(over=dict(r=("float32", (1, 20, 4)))), {}, "recurrent_weight", "shape [1, 20, 5]"),
    (dict(over=dict(b=("float32", (1, 15)))), {}, "bias", "shape [1, 20]"),
    (dict(over=dict(rb=("float32", (1, 20, 1)))), {}, "recurrent_bias", "shape [1, 20]"),
    (dict(over=dict(p=("float32", (1, 20)))), {}, "peephole_weight", "shape [1, 15]"),
    (dict(over=dict(h0=("float32", (1, 2, 5)))), {}, "initial_hidden_state", "shape [1, 3, 5]"),
    (dict(over=dict(c0=("float32", (1, 3, 6)))), {}, "initial_cell_state", "shape [1, 3, 5]"),
    (dict(over=dict(x=("float32", (2, 3, 4, 1)))), {}, "input", "3-D"),
    ({}, dict(steps=1), "steps", "input.shape[0] (2)"),
    ({}, dict(hidden_size=2**30), "hidden_size", "4 * hidden_size"),
    ({}, dict(activations=["sigmoid", "tanh"]), "activations", "a sequence of 3"),
    ({}, dict(layout="zrn"), "layout", "'iofg', 'ifgo'"),
    ({}, dict(direction="both"), "weight", "shape [2, 20, 4]"),
]


@pytest.mark.parametrize("make, kw, arg, text", LSTM_ERRORS)
def test_lstm_validation(ctx, make, kw, arg, text):
    b = webnn.MLGraphBuilder(ctx)
    o = _lstm_operands(b, **make.get("over", {}))
    args = dict(steps=2, hidden_size=5, bias=o["b"], recurrent_bias=o["rb"], peephole_weight=o["p"],
                initial_hidden_state=o["h0"], initial_cell_state=o["c0"])
    args.update(kw)
    with pytest.raises(MLTypeError) as info:
        b.lstm(o["x"], o["w"], o["r"], args.pop("steps"), args.pop("hidden_size"), label="dec", **args)
    msg = str(info.value)
    assert msg.startswith("lstm ['dec']") and f"'{arg}'" in msg and text in msg, msg


def test_cell_validation(ctx):
    b = webnn.MLGraphBuilder(ctx)
    mk = lambda n, s, d="float32": b.input(n, {"data_type": d, "shape": list(s)})  # noqa: E731
    x, w, r, h = mk("x", (3, 4)), mk("w", (15, 4)), mk("r", (15, 5)), mk("h", (3, 5))
    assert b.gru_cell(x, w, r, h, 5).shape == (3, 5)
    cases = [
        (lambda: b.gru_cell(mk("x3", (1, 3, 4)), w, r, h, 5, label="c"), "input", "2-D"),
        (lambda: b.gru_cell(x, w, r, mk("h2", (3, 4)), 5, label="c"), "hidden_state", "shape [3, 5]"),
        (lambda: b.gru_cell(x, w, r, h, 4, label="c"), "weight", "shape [12, 4]"),
        (lambda: b.gru_cell(x, w, r, h, 5, bias=mk("b", (1, 15)), label="c"), "bias", "shape [15]"),
        (lambda: b.gru_cell(x, w, r, h, 5, recurrent_bias=mk("rb", (14,)), label="c"), "recurrent_bias",
         "shape [15]"),
        (lambda: b.gru_cell(x, w, r, h, 5, activations=["relu"] * 3, label="c"), "activations", "sequence of 2"),
        (lambda: b.gru_cell(x, w, r, h, 5, direction="forward", label="c"), None, "unknown option"),
    ]
    lw, lr, c = mk("lw", (20, 4)), mk("lr", (20, 5)), mk("c", (3, 5))
    hs, cs = b.lstm_cell(x, lw, lr, h, c, 5)
    assert hs.shape == cs.shape == (3, 5)
    cases += [
        (lambda: b.lstm_cell(x, lw, lr, h, mk("c2", (3, 5), "float16"), 5, label="c"), "cell_state",
         "the data type of 'input'"),
        (lambda: b.lstm_cell(x, lw, lr, h, c, 5, peephole_weight=mk("p", (20,)), label="c"), "peephole_weight",
         "shape [15]"),
        (lambda: b.lstm_cell(x, lw, lr, h, c, 5, bias=mk("lb", (15,)), label="c"), "bias", "shape [20]"),
        (lambda: b.lstm_cell(x, w, lr, h, c, 5, label="c"), "weight", "shape [20, 4]"),
        (lambda: b.lstm_cell(x, lw, lr, h, c, 5, activations=["relu"] * 2, label="c"), "activations",
         "sequence of 3"),
    ]
    for fn, arg, text in cases:
        with pytest.raises(MLTypeError) as info:
            fn()
        msg = str(info.value)
        assert "['c']" in msg and (arg is None or f"'{arg}'" in msg) and text in msg, msg


def test_foreign_operand_in_options(ctx):
    b, other = webnn.MLGraphBuilder(ctx), webnn.MLGraphBuilder(ctx)
    o, f = _gru_operands(b), _gru_operands(other)
    with pytest.raises(MLTypeError, match=r"gru.*'initial_hidden_state'.*another builder"):
        b.gru(o["x"], o["w"], o["r"], 2, 5, initial_hidden_state=f["h0"])
    with pytest.raises(MLTypeError, match=r"gru.*'recurrent_bias'.*another builder"):
        b.gru(o["x"], o["w"], o["r"], 2, 5, recurrent_bias=f["rb"])
    lo, lf = _lstm_operands(b), _lstm_operands(other)
    with pytest.raises(MLTypeError, match=r"lstm.*'peephole_weight'.*another builder"):
        b.lstm(lo["x"], lo["w"], lo["r"], 2, 5, peephole_weight=lf["p"])


def test_op_support_limits(ctx):
    lim = ctx.op_support_limits()
    assert lim["gru"]["initial_hidden_state"]["data_types"] == ["float32", "float16"]
    assert lim["lstm"]["outputs"]["rank_range"] == {"min": 3, "max": 4}
    assert lim["lstm_cell"]["peephole_weight"]["rank_range"] == {"min": 1, "max": 1}


@pytest.mark.parametrize("op, bias_value", [("lstm", 0.0), ("gru", 0.0), ("gru", 0.5)])
def test_identity_input_weight_reads_x_as_the_projection(ctx, rng, op, bias_value):
    """A constant identity input weight with zero input biases (what the TFLite loader makes of
    a recurrent layer reading an embedding: the table projected at load time) takes x itself
    as the projection: the sequence kernel alone. A GRU's recurrent bias of the new gate stays
    in the kernel; a non-zero input bias (a near miss) keeps the projection product."""
    steps, batch, hidden = 5, 2, 4
    g = 4 if op == "lstm" else 3
    x = _rand(rng, (steps, batch, g * hidden), "float32", 1.0)
    r = _rand(rng, (1, g * hidden, hidden), "float32")
    bias = np.full((1, g * hidden), bias_value, np.float32)
    rbias = np.zeros((1, g * hidden), np.float32)
    rbias[:, 2 * hidden:] = _rand(rng, (1, hidden), "float32") if op == "gru" else 0.0
    eye = np.eye(g * hidden, dtype=np.float32)[None]
    b = webnn.MLGraphBuilder(ctx)
    xo = b.input("x", {"data_type": "float32", "shape": list(x.shape)})
    if op == "lstm":
        h, _, s = b.lstm(xo, b.constant(eye), b.constant(r), steps, hidden, bias=b.constant(bias),
                         return_sequence=True, layout="ifgo")
        want = ref_lstm(x, eye, r, steps, hidden, bias, layout="ifgo")
        want = (want[0], want[2])
    else:
        h, s = b.gru(xo, b.constant(eye), b.constant(r), steps, hidden, bias=b.constant(bias),
                     recurrent_bias=b.constant(rbias), return_sequence=True)
        want = ref_gru(x, eye, r, steps, hidden, bias, rbias)
    graph = b.build({"h": h, "s": s})
    templates = [st.template for st in graph._steps if hasattr(st, "template")]
    if bias_value:
        assert templates[-1] == "recurrent/sequence.wgsl" and len(templates) == 2
    else:
        assert templates == ["recurrent/sequence.wgsl"]
    out = ctx.compute(graph, {"x": x})
    _check(out["h"], want[0], "float32", "hidden")
    _check(out["s"], want[1], "float32", "sequence")


@pytest.mark.parametrize("op, direction, hidden, bias_value", [
    ("lstm", "forward", 4, 0.0), ("lstm", "both", 3, 0.0), ("gru", "backward", 4, 0.0), ("gru", "both", 5, 0.0),
    ("gru0", "forward", 4, 0.0), ("gru0", "forward", 3, 0.0), ("rnn", "both", 4, 0.0), ("rnn", "forward", 5, 0.0),
    ("lstm", "forward", 4, 0.5), ("gru", "forward", 3, 0.5)])
def test_float16_identity_input_weight_reads_x_as_the_projection(ctx, rng, op, direction, hidden, bias_value):
    """float16: x itself is the projection the sequence kernel reads (f16 storage, f32
    arithmetic), as vec4 (hidden_size % 4 == 0) or scalars, for every cell form (LSTM, GRU,
    GRU with reset_after=False, a GRU that is a plain RNN) and both directions; a non-zero
    input bias (a near miss) keeps the project kernel. Against the float64 equations on the
    same float16 values."""
    dt = "float16"
    steps, batch = 5, 2
    nd = 2 if direction == "both" else 1
    g = 4 if op == "lstm" else 3
    gh = hidden if op == "rnn" else g * hidden
    x = _rand(rng, (steps, batch, nd * gh), dt, 1.0)
    eye = np.eye(nd * gh).reshape(nd * gh, nd, gh).transpose(1, 2, 0)  # direction d reads its block of x
    if op == "rnn":  # zero update and reset rows around the block of the new gate
        w = np.zeros((nd, 3 * hidden, nd * gh))
        w[:, 2 * hidden:] = eye
        r = np.zeros((nd, 3 * hidden, hidden))
        r[:, 2 * hidden:] = _rand(rng, (nd, hidden, hidden), dt)
        bias = np.zeros((nd, 3 * hidden))
        bias[:, hidden:2 * hidden] = 1.0
    else:
        w, r = eye, _rand(rng, (nd, g * hidden, hidden), dt)
        bias = np.zeros((nd, g * hidden))
    bias[:, :hidden] += bias_value
    rbias = np.zeros((nd, 3 * hidden))
    if op == "gru":
        rbias[:, 2 * hidden:] = _rand(rng, (nd, hidden), dt)
    w, r, bias, rbias = (a.astype(np.float16) for a in (w, r, bias, rbias))
    b = webnn.MLGraphBuilder(ctx)
    xo = b.input("x", {"data_type": dt, "shape": list(x.shape)})
    if op == "lstm":
        h, _, s = b.lstm(xo, b.constant(w), b.constant(r), steps, hidden, bias=b.constant(bias),
                         return_sequence=True, direction=direction, layout="ifgo")
        want = ref_lstm(x, w, r, steps, hidden, bias, direction=direction, layout="ifgo")
        want = (want[0], want[2])
    else:
        acts = ("relu", "tanh") if op == "rnn" else ("sigmoid", "tanh")
        h, s = b.gru(xo, b.constant(w), b.constant(r), steps, hidden, bias=b.constant(bias),
                     recurrent_bias=b.constant(rbias), return_sequence=True, direction=direction,
                     reset_after=op != "gru0", activations=list(acts))
        want = ref_gru(x, w, r, steps, hidden, bias, rbias, reset_after=op != "gru0", direction=direction, acts=acts)
    graph = b.build({"h": h, "s": s})
    templates = [st.template for st in graph._steps if hasattr(st, "template")]
    if bias_value:
        assert templates == ["recurrent/project.wgsl", "recurrent/sequence.wgsl"]
    else:
        assert templates == ["recurrent/sequence.wgsl"]
        wgsl = graph._steps[-1].wgsl
        assert ("proj4: array<vec4<f16>>" in wgsl) == (hidden % 4 == 0)
        assert ("fn proj_f32" in wgsl) == (hidden % 4 != 0)
    out = ctx.compute(graph, {"x": x})
    _check(out["h"], want[0], dt, "hidden")
    _check(out["s"], want[1], dt, "sequence")


def test_float16_identity_projection_in_chunks_of_steps(ctx, rng):
    """A long float16 sequence whose x is the projection runs in chunks of steps (the loop
    limit), each launch binding its rows of x at their float16 byte offsets."""
    from webnn_gpu.ops.recurrent import SEQUENCE_LOOP_BUDGET, sequence_loop_iterations

    steps, batch, hidden = 1700, 1, 36
    gh = 4 * hidden
    assert sequence_loop_iterations(steps, hidden, gh, True, False) > SEQUENCE_LOOP_BUDGET
    inputs = {"x": _rand(rng, (steps, batch, gh), "float16", 1.0),
              "h0": _rand(rng, (1, batch, hidden), "float16")}
    eye, r = np.eye(gh, dtype=np.float16)[None], _rand(rng, (1, gh, hidden), "float16", 0.2)

    def build(b, o):
        h, c, seq = b.lstm(o["x"], b.constant(eye), b.constant(r), steps, hidden, initial_hidden_state=o["h0"],
                           return_sequence=True, layout="ifgo")
        return {"h": h, "c": c, "seq": seq}

    launches = kernel_templates(ctx, build, inputs)
    assert launches.count("recurrent/sequence.wgsl") > 1 and "recurrent/project.wgsl" not in launches
    out = run_graph(ctx, build, inputs, tensor_path=False)
    h, c, seq = ref_lstm(inputs["x"], eye, r, steps, hidden, h0=inputs["h0"], layout="ifgo")
    _check(out["h"], h, "float16", "hidden")
    _check(out["c"], c, "float16", "cell")
    _check(out["seq"], seq, "float16", "sequence")


@pytest.mark.parametrize("sequence", [False, True], ids=["no sequence", "sequence"])
def test_float16_chunks_of_an_odd_count_bind_whole_words(ctx, rng, sequence):
    """A float16 GRU of hidden size 3 (the scalar form) whose x is the projection, in chunks of
    steps with an odd count of values in the last one: its ranges of x (and of the sequence
    output) are an odd number of float16 values, bound rounded up to 4 bytes (WebGPU's rule
    for a storage binding; the kernel indexes only its own values)."""
    steps, batch, hidden = 7813, 1, 3
    gh = 3 * hidden
    inputs = {"x": _rand(rng, (steps, batch, gh), "float16", 1.0)}
    eye, r = np.eye(gh, dtype=np.float16)[None], _rand(rng, (1, gh, hidden), "float16", 0.3)

    def build(b, o):
        outs = b.gru(o["x"], b.constant(eye), b.constant(r), steps, hidden, return_sequence=sequence)
        return {"h": outs[0], **({"seq": outs[1]} if sequence else {})}

    launches = kernel_templates(ctx, build, inputs)
    assert launches.count("recurrent/sequence.wgsl") > 1 and "recurrent/project.wgsl" not in launches
    out = run_graph(ctx, build, inputs, tensor_path=False)
    want = ref_gru(inputs["x"], eye, r, steps, hidden)
    _check(out["h"], want[0], "float16", "hidden")
    if sequence:
        _check(out["seq"], want[1], "float16", "sequence")
