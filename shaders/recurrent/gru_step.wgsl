{#-
  recurrent/gru_step.wgsl: one GRU time step for every direction, batch row and hidden unit.

  Context:
    k.bindings  step (u32 [1]: the step index s), proj (f32 [D, T, B, 3H], or [T, B, D, 3H] when proj_tbd; x W' +
                folded biases), r (recurrent weight [D, 3H, H]), rbias ([D, 3H]; only if has_rbias:
                the new gate's recurrent bias with reset_after), state_in (f32 [1, D, B, H]),
                rh (f32 [D, B, H]: r * h; input of phase "update" when not reset_after),
                then the outputs: phase "reset": rh; phase "update": state_out (f32
                [1, D, B, H]) and seq ([T, D, B, H], if has_seq)
    H B T D GH I  sizes; direction: "forward" | "backward" | "both"
    phase       "reset" (r * h for reset_after = False) or "update" (the new state)
    gate        {"z": i, "r": i, "n": i}: row block of each gate; acts: [f, g] activations
    reset_after, has_rbias, has_seq
  Workgroup: (k.workgroup, 1, 1); 2-D folded dispatch; one invocation per (d, b, j).
-#}
{% import "_lib/io.wgsl" as io %}
{% import "_lib/activations.wgsl" as actlib %}
{% import "recurrent/_rnn.wgsl" as rnn %}
{% set ZO, RO, NO = gate.z * H, gate.r * H, gate.n * H %}
{{ io.prelude(k, int64) }}
{{ actlib.defs("f32", ["sigmoid", "tanh"]) }}
{{ io.main_header(k) }}
{{ rnn.step(H, B, T, GH, direction, proj_tbd, D) }}
{% if phase == "reset" %}
  var ar = 0.0;
  for (var k = 0u; k < {{ H }}u; k = k + 1u) {
    ar = ar + load_state_in(hrow + k) * f32(load_r((rrow + {{ RO }}u + j) * {{ H }}u + k));
  }
  let r = {{ rnn.act(acts[0], "load_proj(prow + " ~ RO ~ "u + j) + ar") }};
  store_rh(idx, r * load_state_in(idx));
{% else %}
  var az = 0.0;
  var ar = 0.0;
  var an = 0.0;
  for (var k = 0u; k < {{ H }}u; k = k + 1u) {
    let hk = load_state_in(hrow + k);
    az = az + hk * f32(load_r((rrow + {{ ZO }}u + j) * {{ H }}u + k));
{% if reset_after %}
    ar = ar + hk * f32(load_r((rrow + {{ RO }}u + j) * {{ H }}u + k));
    an = an + hk * f32(load_r((rrow + {{ NO }}u + j) * {{ H }}u + k));
{% else %}
    an = an + load_rh(hrow + k) * f32(load_r((rrow + {{ NO }}u + j) * {{ H }}u + k));
{% endif %}
  }
  let z = {{ rnn.act(acts[0], "load_proj(prow + " ~ ZO ~ "u + j) + az") }};
{% if reset_after %}
  let r = {{ rnn.act(acts[0], "load_proj(prow + " ~ RO ~ "u + j) + ar") }};
{% if has_rbias %}
  an = an + f32(load_rbias(rrow + {{ NO }}u + j));
{% endif %}
  let n = {{ rnn.act(acts[1], "load_proj(prow + " ~ NO ~ "u + j) + r * an") }};
{% else %}
  let n = {{ rnn.act(acts[1], "load_proj(prow + " ~ NO ~ "u + j) + an") }};
{% endif %}
  let h = load_state_in(idx);
  let hn = z * h + n * (1.0 - z);
  store_state_out(idx, hn);
{% if has_seq %}
  store_seq((t * {{ D }}u + d) * {{ B * H }}u + b * {{ H }}u + j, {{ b.seq.compute }}(hn));
{% endif %}
{% endif %}
}
