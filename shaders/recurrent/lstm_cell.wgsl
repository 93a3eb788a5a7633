{#-
  recurrent/lstm_cell.wgsl: an LSTM of one time step (lstm with steps = 1, lstm_cell) in one
  kernel: the gates from the input and the initial state, the new state in the outputs' type.

  Context:
    k.bindings  x ([1, B, I] or [B, I]), w ([D, 4H, I]), r ([D, 4H, H]; if has_h0: without
                an initial hidden state h R' is 0), bias and rbias
                ([D, 4H]; if has_bias / has_rbias), peep ([D, 3H] in i, o, f order; if
                has_peep), h0 and c0 ([D, B, H]; if has_h0 / has_c0), then the outputs out_h
                and out_c ([D, B, H]) and seq ([1, D, B, H], if has_seq)
    H B T D GH I  sizes (T = 1); direction (unused: one step reads and writes time 0)
    gate        {"i": i, "o": i, "f": i, "g": i}: row block of each gate
    acts        [f, g, h] activations; has_bias, has_rbias, has_peep, has_h0, has_c0, has_seq
  Workgroup: (k.workgroup, 1, 1); 2-D folded dispatch; one invocation per (d, b, j).
  Sums in f32: x W' + bias + rbias, then + h R', as the project and step kernels do.
-#}
{% import "_lib/io.wgsl" as io %}
{% import "_lib/activations.wgsl" as actlib %}
{% import "recurrent/_rnn.wgsl" as rnn %}
{% set IO, OO, FO, GO = gate.i * H, gate.o * H, gate.f * H, gate.g * H %}
{{ io.prelude(k, int64) }}
{{ actlib.defs("f32", ["sigmoid", "tanh"]) }}
{{ io.main_header(k) }}
{{ rnn.locate(H, B) }}
  let xo = b * {{ I }}u;
  let wrow = d * {{ GH }}u;
  var ai = 0.0;
  var ao = 0.0;
  var af = 0.0;
  var ag = 0.0;
  for (var k = 0u; k < {{ I }}u; k = k + 1u) {
    let xk = f32(load_x(xo + k));
    ai = ai + xk * f32(load_w((wrow + {{ IO }}u + j) * {{ I }}u + k));
    ao = ao + xk * f32(load_w((wrow + {{ OO }}u + j) * {{ I }}u + k));
    af = af + xk * f32(load_w((wrow + {{ FO }}u + j) * {{ I }}u + k));
    ag = ag + xk * f32(load_w((wrow + {{ GO }}u + j) * {{ I }}u + k));
  }
{% for name in ("bias", "rbias") if (has_bias if name == "bias" else has_rbias) %}
  ai = ai + f32(load_{{ name }}(wrow + {{ IO }}u + j));
  ao = ao + f32(load_{{ name }}(wrow + {{ OO }}u + j));
  af = af + f32(load_{{ name }}(wrow + {{ FO }}u + j));
  ag = ag + f32(load_{{ name }}(wrow + {{ GO }}u + j));
{% endfor %}
{% if has_h0 %}
  var si = 0.0;
  var so = 0.0;
  var sf = 0.0;
  var sg = 0.0;
  let hrow = db * {{ H }}u;
  for (var k = 0u; k < {{ H }}u; k = k + 1u) {
    let hk = f32(load_h0(hrow + k));
    si = si + hk * f32(load_r((wrow + {{ IO }}u + j) * {{ H }}u + k));
    so = so + hk * f32(load_r((wrow + {{ OO }}u + j) * {{ H }}u + k));
    sf = sf + hk * f32(load_r((wrow + {{ FO }}u + j) * {{ H }}u + k));
    sg = sg + hk * f32(load_r((wrow + {{ GO }}u + j) * {{ H }}u + k));
  }
  ai = ai + si;
  ao = ao + so;
  af = af + sf;
  ag = ag + sg;
{% endif %}
{% if has_c0 %}
  let c = f32(load_c0(idx));
{% else %}
  let c = 0.0;
{% endif %}
{% if has_peep %}
  let prw = d * {{ 3 * H }}u + j;
  ai = ai + c * f32(load_peep(prw));
  ao = ao + c * f32(load_peep(prw + {{ H }}u));
  af = af + c * f32(load_peep(prw + {{ 2 * H }}u));
{% endif %}
  let gi = {{ rnn.act(acts[0], "ai") }};
  let gf = {{ rnn.act(acts[0], "af") }};
  let gg = {{ rnn.act(acts[1], "ag") }};
  let go = {{ rnn.act(acts[0], "ao") }};
  let ct = gf * c + gi * gg;
  let ht = go * {{ rnn.act(acts[2], "ct") }};
  store_out_h(idx, {{ b.out_h.compute }}(ht));
  store_out_c(idx, {{ b.out_c.compute }}(ct));
{% if has_seq %}
  store_seq(idx, {{ b.seq.compute }}(ht));
{% endif %}
}
