{#-
  recurrent/sequence.wgsl: every time step of a GRU (reset_after), LSTM or plain RNN in one
  launch: one workgroup per (direction, batch row) keeps its hidden (and cell) state in
  workgroup memory and steps through time with one barrier per step.

  Context:
    k.bindings  proj (f32 [D, T, B, GH], x W' + folded biases), r (recurrent weight [D, GH, H],
                or [D, H, GH] when r_t), rbias ([D, GH]; only if has_rbias: GRU's new gate
                recurrent bias), peep ([D, 3H] in i, o, f order; if has_peep), h0 and c0
                ([D, B, H]; if has_h0 / has_c0), then the outputs out_h ([D, B, H]), out_c
                (LSTM), seq ([T, D, B, H], if has_seq)
    H B T D GH I  sizes; direction: "forward" | "backward" | "both"
    cell        "gru" (reset_after), "lstm" or "rnn" (h = act(x W' + b + h R'): GH = H, no gates)
    gate        row block of each gate ({"z", "r", "n"} or {"i", "o", "f", "g"}; {"n": 0} for rnn)
    acts        the activations ([f, g] GRU, [f, g, h] LSTM, [g] rnn)
    r_t, has_rbias, has_peep, has_h0, has_c0, has_seq
  Workgroup: (k.workgroup, 1, 1); D * B workgroups (no folding: D * B <= 65535); invocation
  lid handles the hidden units j = lid, lid + k.workgroup, ... of its workgroup's row.
  State in f32 (hs: the hidden state of steps s and s + 1, ping-pong; cs: the cell state, each
  unit read and written by its own invocation only).
-#}
{% import "_lib/io.wgsl" as io %}
{% import "_lib/activations.wgsl" as actlib %}
{% import "recurrent/_rnn.wgsl" as rnn %}
{% set WG = k.workgroup %}
{#- direction d's recurrent weight, gate row G + j, column k -#}
{% macro rload(G) -%}
{% if r_t -%}
f32(load_r((d * {{ H }}u + k) * {{ GH }}u + {{ G }}u + j))
{%- else -%}
f32(load_r((rrow + {{ G }}u + j) * {{ H }}u + k))
{%- endif %}
{%- endmacro %}
{{ io.prelude(k, int64) }}
{{ actlib.defs("f32", ["sigmoid", "tanh"]) }}
var<workgroup> hs: array<f32, {{ 2 * H }}>;
{% if cell == "lstm" %}
var<workgroup> cs: array<f32, {{ H }}>;
{% endif %}

@compute @workgroup_size({{ WG }})
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
  let db = wid.x;
  let b = db % {{ B }}u;
  let d = db / {{ B }}u;
  let hrow = db * {{ H }}u;
  let rrow = d * {{ GH }}u;
  for (var j = lid.x; j < {{ H }}u; j = j + {{ WG }}u) {
{% if has_h0 %}
    hs[j] = f32(load_h0(hrow + j));
{% else %}
    hs[j] = 0.0;
{% endif %}
{% if cell == "lstm" %}
{% if has_c0 %}
    cs[j] = f32(load_c0(hrow + j));
{% else %}
    cs[j] = 0.0;
{% endif %}
{% endif %}
  }
  workgroupBarrier();
  for (var s = 0u; s < {{ T }}u; s = s + 1u) {
    let t = {{ rnn.time(direction, T) }};
    let prow = ((d * {{ T }}u + t) * {{ B }}u + b) * {{ GH }}u;
    let cur = (s & 1u) * {{ H }}u;
    let nxt = {{ H }}u - cur;
    for (var j = lid.x; j < {{ H }}u; j = j + {{ WG }}u) {
{% if cell == "lstm" %}
{% set IO, OO, FO, GO = gate.i * H, gate.o * H, gate.f * H, gate.g * H %}
      var si = 0.0;
      var so = 0.0;
      var sf = 0.0;
      var sg = 0.0;
      for (var k = 0u; k < {{ H }}u; k = k + 1u) {
        let hk = hs[cur + k];
        si = si + hk * {{ rload(IO) }};
        so = so + hk * {{ rload(OO) }};
        sf = sf + hk * {{ rload(FO) }};
        sg = sg + hk * {{ rload(GO) }};
      }
      var ai = load_proj(prow + {{ IO }}u + j) + si;
      var ao = load_proj(prow + {{ OO }}u + j) + so;
      var af = load_proj(prow + {{ FO }}u + j) + sf;
      let ag = load_proj(prow + {{ GO }}u + j) + sg;
      let c = cs[j];
{{ rnn.lstm_gates(acts, has_peep, H) }}
      cs[j] = ct;
      let hn = ht;
{% elif cell == "gru" %}
{% set ZO, RO, NO = gate.z * H, gate.r * H, gate.n * H %}
      var az = 0.0;
      var ar = 0.0;
      var an = 0.0;
      for (var k = 0u; k < {{ H }}u; k = k + 1u) {
        let hk = hs[cur + k];
        az = az + hk * {{ rload(ZO) }};
        ar = ar + hk * {{ rload(RO) }};
        an = an + hk * {{ rload(NO) }};
      }
      let z = {{ rnn.act(acts[0], "load_proj(prow + " ~ ZO ~ "u + j) + az") }};
      let r = {{ rnn.act(acts[0], "load_proj(prow + " ~ RO ~ "u + j) + ar") }};
{% if has_rbias %}
      an = an + f32(load_rbias(rrow + {{ NO }}u + j));
{% endif %}
      let n = {{ rnn.act(acts[1], "load_proj(prow + " ~ NO ~ "u + j) + r * an") }};
      let hn = z * hs[cur + j] + n * (1.0 - z);
{% else %}
      var an = 0.0;
      for (var k = 0u; k < {{ H }}u; k = k + 1u) {
        an = an + hs[cur + k] * {{ rload(0) }};
      }
      let hn = {{ rnn.act(acts[0], "load_proj(prow + j) + an") }};
{% endif %}
      hs[nxt + j] = hn;
{% if has_seq %}
      store_seq((t * {{ D }}u + d) * {{ B * H }}u + b * {{ H }}u + j, {{ b.seq.compute }}(hn));
{% endif %}
    }
    workgroupBarrier();
  }
  for (var j = lid.x; j < {{ H }}u; j = j + {{ WG }}u) {
    store_out_h(hrow + j, {{ b.out_h.compute }}(hs[{{ (T % 2) * H }}u + j]));
{% if cell == "lstm" %}
    store_out_c(hrow + j, {{ b.out_c.compute }}(cs[j]));
{% endif %}
  }
}
