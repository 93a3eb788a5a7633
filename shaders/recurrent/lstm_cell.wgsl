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
    w_t, r_t    w / r bound transposed ([D, I, 4H] / [D, H, 4H]: constant weights)
  Workgroup: (k.workgroup, 1, 1); 2-D folded dispatch; one invocation per (d, b, j).
  Sums in f32: x W' + bias + rbias, then + h R', as the project and step kernels do.
-#}
{% import "_lib/io.wgsl" as io %}
{% import "_lib/activations.wgsl" as actlib %}
{% import "recurrent/_rnn.wgsl" as rnn %}
{% set IO, OO, FO, GO = gate.i * H, gate.o * H, gate.f * H, gate.g * H %}
{#- row G + j, column k of direction d's weight `name` ([D, GH, KK], or [D, KK, GH] when
    transposed: neighbouring invocations then read neighbouring words) -#}
{% macro wload(name, G, KK, transposed) -%}
{% if transposed -%}
f32(load_{{ name }}((d * {{ KK }}u + k) * {{ GH }}u + {{ G }}u + j))
{%- else -%}
f32(load_{{ name }}((wrow + {{ G }}u + j) * {{ KK }}u + k))
{%- endif %}
{%- endmacro %}
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
    ai = ai + xk * {{ wload("w", IO, I, w_t) }};
    ao = ao + xk * {{ wload("w", OO, I, w_t) }};
    af = af + xk * {{ wload("w", FO, I, w_t) }};
    ag = ag + xk * {{ wload("w", GO, I, w_t) }};
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
    si = si + hk * {{ wload("r", IO, H, r_t) }};
    so = so + hk * {{ wload("r", OO, H, r_t) }};
    sf = sf + hk * {{ wload("r", FO, H, r_t) }};
    sg = sg + hk * {{ wload("r", GO, H, r_t) }};
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
{{ rnn.lstm_gates(acts, has_peep, H) }}
  store_out_h(idx, {{ b.out_h.compute }}(ht));
  store_out_c(idx, {{ b.out_c.compute }}(ct));
{% if has_seq %}
  store_seq(idx, {{ b.seq.compute }}(ht));
{% endif %}
}
