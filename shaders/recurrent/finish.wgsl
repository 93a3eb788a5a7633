{#-
  recurrent/finish.wgsl: the final f32 state into the outputs' data type.

  Context:
    k.bindings  state (f32 [n_state, D, B, H]), out_h [D, B, H], out_c (if n_state == 2)
    H B T D GH I  sizes; n_state: 1 (GRU) or 2 (LSTM)
  Workgroup: (k.workgroup, 1, 1); 2-D folded dispatch; one invocation per output element.
-#}
{% import "_lib/io.wgsl" as io %}
{{ io.prelude(k, int64) }}
{{ io.main_header(k) }}
  store_out_h(idx, {{ b.out_h.compute }}(load_state(idx)));
{% if n_state == 2 %}
  store_out_c(idx, {{ b.out_c.compute }}(load_state({{ D * B * H }}u + idx)));
{% endif %}
}
