{#-
  recurrent/lstm_step.wgsl: one LSTM time step for every direction, batch row and hidden unit.

  Context:
    k.bindings  step (u32 [1]: the step index s), proj (f32 [D, T, B, 4H], or [T, B, D, 4H] when proj_tbd; x W' +
                both biases), r (recurrent weight [D, 4H, H]), peep ([D, 3H] in i, o, f order; if
                has_peep), state_in (f32 [2, D, B, H]: h then c), then the outputs state_out
                (f32 [2, D, B, H]) and seq ([T, D, B, H], if has_seq)
    H B T D GH I  sizes; direction: "forward" | "backward" | "both"
    gate        {"i": i, "o": i, "f": i, "g": i}: row block of each gate
    acts        [f, g, h] activations; has_peep, has_seq
  Workgroup: (k.workgroup, 1, 1); 2-D folded dispatch; one invocation per (d, b, j).
-#}
{% import "_lib/io.wgsl" as io %}
{% import "_lib/activations.wgsl" as actlib %}
{% import "recurrent/_rnn.wgsl" as rnn %}
{% set IO, OO, FO, GO = gate.i * H, gate.o * H, gate.f * H, gate.g * H %}
{% set N = D * B * H %}
{{ io.prelude(k, int64) }}
{{ actlib.defs("f32", ["sigmoid", "tanh"]) }}
{{ io.main_header(k) }}
{{ rnn.step(H, B, T, GH, direction, proj_tbd, D) }}
  var ai = load_proj(prow + {{ IO }}u + j);
  var ao = load_proj(prow + {{ OO }}u + j);
  var af = load_proj(prow + {{ FO }}u + j);
  var ag = load_proj(prow + {{ GO }}u + j);
  var si = 0.0;
  var so = 0.0;
  var sf = 0.0;
  var sg = 0.0;
  for (var k = 0u; k < {{ H }}u; k = k + 1u) {
    let hk = load_state_in(hrow + k);
    si = si + hk * f32(load_r((rrow + {{ IO }}u + j) * {{ H }}u + k));
    so = so + hk * f32(load_r((rrow + {{ OO }}u + j) * {{ H }}u + k));
    sf = sf + hk * f32(load_r((rrow + {{ FO }}u + j) * {{ H }}u + k));
    sg = sg + hk * f32(load_r((rrow + {{ GO }}u + j) * {{ H }}u + k));
  }
  ai = ai + si;
  ao = ao + so;
  af = af + sf;
  ag = ag + sg;
  let c = load_state_in({{ N }}u + idx);
{{ rnn.lstm_gates(acts, has_peep, H) }}
  store_state_out(idx, ht);
  store_state_out({{ N }}u + idx, ct);
{% if has_seq %}
  store_seq((t * {{ D }}u + d) * {{ B * H }}u + b * {{ H }}u + j, {{ b.seq.compute }}(ht));
{% endif %}
}
