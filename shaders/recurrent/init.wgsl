{#-
  recurrent/init.wgsl: the f32 state buffer [n_state, D, B, H] from the initial hidden (and
  cell) state, zeros where none is given.

  Context:
    k.bindings  h0 [D, B, H] (if has_h0), c0 [D, B, H] (if has_c0), state (f32; output)
    H B T D GH I  sizes; n_state: 1 (GRU: h) or 2 (LSTM: h, c)
  Workgroup: (k.workgroup, 1, 1); 2-D folded dispatch; one invocation per state element.
-#}
{% import "_lib/io.wgsl" as io %}
{% set N = D * B * H %}
{{ io.prelude(k, int64) }}
{{ io.main_header(k) }}
  let part = idx / {{ N }}u;
  let i = idx % {{ N }}u;
  var v = 0.0;
{% if has_h0 %}
  if (part == 0u) { v = f32(load_h0(i)); }
{% endif %}
{% if has_c0 %}
  if (part == 1u) { v = f32(load_c0(i)); }
{% endif %}
  store_state(idx, v);
}
