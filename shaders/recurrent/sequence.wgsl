{#-
  recurrent/sequence.wgsl: every time step of a GRU, LSTM or plain RNN in one
  launch: one workgroup per (direction, batch row) keeps its hidden (and cell) state in
  workgroup memory and steps through time with one barrier per step.

  Context:
    k.bindings  proj (f32 [D, T, B, GH], or [T, B, D, GH] when proj_tbd; x W' + folded biases; f16 only
                as x itself, [T, B, D, GH]: an embedding's projected table gathered), r (recurrent weight [D, GH, H],
                or [D, H, GH] when r_t), rbias ([D, GH]; only if has_rbias: GRU's new gate
                recurrent bias), peep ([D, 3H] in i, o, f order; if has_peep), h0 and c0
                ([D, B, H]; if has_h0 / has_c0), then the outputs out_h ([D, B, H]), out_c
                (LSTM), seq ([T, D, B, H], if has_seq)
    H B T D GH I  sizes; direction: "forward" | "backward" | "both"
    cell        "gru", "lstm" or "rnn" (h = act(x W' + b + h R'): GH = H, no gates)
    reset_after GRU: the reset gate multiplies the recurrent product (True) or the state before
                it (False: each step computes z and r * h of every unit first, into workgroup
                memory, then, after a barrier, the new gate from r * h; every recurrent bias
                is then folded into proj)
    gate        row block of each gate ({"z", "r", "n"} or {"i", "o", "f", "g"}; {"n": 0} for rnn)
    acts        the activations ([f, g] GRU, [f, g, h] LSTM, [g] rnn)
    r_t, has_rbias, has_peep, has_h0, has_c0, has_seq
    vec         proj and r (then f32, transposed: r_t) read as vec4 (H % 4 == 0; computed in f32): each
                invocation computes four neighbouring hidden units of every gate
    r_local     (vec) the workgroup copies its direction's r into workgroup memory (rw) before
                the first step and reads it there
  Workgroup: (k.workgroup, 1, 1); D * B workgroups (no folding: D * B <= 65535); invocation
  lid handles the hidden units j = lid, lid + k.workgroup, ... of its workgroup's row (vec:
  the units 4 q .. 4 q + 3 for q = lid, lid + k.workgroup, ...).
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
{#- the projection (f32, or f16: x itself, an embedding's projected table) as f32: p4(offset) the
    vec4 at pq + offset (vec), LP the scalar load function -#}
{% set f16p = k.bindings[0].data_type == "float16" %}
{% macro p4(off=None) -%}
{% if k.bindings[0].data_type == "float16" %}vec4<f32>({% endif %}proj4[pq{% if off is not none %} + {{ off }}u{% endif %}]{% if k.bindings[0].data_type == "float16" %}){% endif %}
{%- endmacro %}
{% set LP = "proj_f32" if f16p else "load_proj" %}
{% if vec %}
{% for e in k.enables %}
{{ e }}
{% endfor %}
@group(0) @binding(0) var<storage, read> proj4: array<vec4<{{ k.bindings[0].storage }}>>;
@group(0) @binding(1) var<storage, read> r4: array<vec4<f32>>;
{{ io.decl(k.bindings[2:], int64, 2) }}
{% else %}
{{ io.prelude(k, int64) }}
{% if f16p %}
fn proj_f32(i: u32) -> f32 { return f32(load_proj(i)); }
{% endif %}
{% endif %}
{{ actlib.defs("f32", ["sigmoid", "tanh"]) }}
{% if vec %}
{{ rnn.act4_fns(acts) -}}
{% set load4 = rnn.load4 %}
{% set HQ, GQ = H // 4, GH // 4 %}
{% endif %}
var<workgroup> hs: array<f32, {{ 2 * H }}>;
{% set gru0 = cell == "gru" and not reset_after %}
{% if gru0 %}
var<workgroup> rhs: array<f32, {{ H }}>;
var<workgroup> zs: array<f32, {{ H }}>;
{% endif %}
{% if cell == "lstm" %}
var<workgroup> cs: array<f32, {{ H }}>;
{% endif %}

{#- the recurrent weight: r4, or (r_local) its copy for this workgroup's direction in workgroup memory -#}
{% set RW, RB = ("rw", " - rbase") if vec and r_local else ("r4", "") %}
{% if vec and r_local %}
var<workgroup> rw: array<vec4<f32>, {{ H * (GH // 4) }}>;
{% endif %}
@compute @workgroup_size({{ WG }})
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
  let db = wid.x;
  let b = db % {{ B }}u;
  let d = db / {{ B }}u;
  let hrow = db * {{ H }}u;
  let rrow = d * {{ GH }}u;
{% if vec and r_local %}
  let rbase = d * {{ H * (GH // 4) }}u;
  for (var i = lid.x; i < {{ H * (GH // 4) }}u; i = i + {{ WG }}u) {
    rw[i] = r4[rbase + i];
  }
{% endif %}
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
{% if proj_tbd %}
    let prow = ((t * {{ B }}u + b) * {{ D }}u + d) * {{ GH }}u;
{% else %}
    let prow = ((d * {{ T }}u + t) * {{ B }}u + b) * {{ GH }}u;
{% endif %}
    let cur = (s & 1u) * {{ H }}u;
    let nxt = {{ H }}u - cur;
{% if gru0 and vec %}
{% set ZQ, RQ = gate.z * HQ, gate.r * HQ %}
    for (var q = lid.x; q < {{ HQ }}u; q = q + {{ WG }}u) {
      let j = q * 4u;
      let pq = prow / 4u + q;
      var az = vec4<f32>(0.0);
      var ar = vec4<f32>(0.0);
      for (var k = 0u; k < {{ H }}u; k = k + 1u) {
        let hk = hs[cur + k];
        let rq = (d * {{ H }}u + k) * {{ GQ }}u + q;
        az = az + hk * {{ RW }}[rq + {{ ZQ }}u{{ RB }}];
        ar = ar + hk * {{ RW }}[rq + {{ RQ }}u{{ RB }}];
      }
      let z = {{ acts[0] }}4({{ p4(ZQ) }} + az);
      let rh = {{ acts[0] }}4({{ p4(RQ) }} + ar) * vec4<f32>(hs[cur + j], hs[cur + j + 1u], hs[cur + j + 2u], hs[cur + j + 3u]);
      zs[j] = z.x;
      zs[j + 1u] = z.y;
      zs[j + 2u] = z.z;
      zs[j + 3u] = z.w;
      rhs[j] = rh.x;
      rhs[j + 1u] = rh.y;
      rhs[j + 2u] = rh.z;
      rhs[j + 3u] = rh.w;
    }
{% elif gru0 %}
{% set ZO, RO = gate.z * H, gate.r * H %}
    for (var j = lid.x; j < {{ H }}u; j = j + {{ WG }}u) {
      var az = 0.0;
      var ar = 0.0;
      for (var k = 0u; k < {{ H }}u; k = k + 1u) {
        let hk = hs[cur + k];
        az = az + hk * {{ rload(ZO) }};
        ar = ar + hk * {{ rload(RO) }};
      }
      zs[j] = {{ rnn.act(acts[0], LP ~ "(prow + " ~ ZO ~ "u + j) + az") }};
      rhs[j] = {{ rnn.act(acts[0], LP ~ "(prow + " ~ RO ~ "u + j) + ar") }} * hs[cur + j];
    }
{% endif %}
{% if gru0 %}
    workgroupBarrier();
{% endif %}
{% if vec %}
    for (var q = lid.x; q < {{ HQ }}u; q = q + {{ WG }}u) {
      let j = q * 4u;
      let pq = prow / 4u + q;
{% if cell == "lstm" %}
{% set IQ, OQ, FQ, GQq = gate.i * HQ, gate.o * HQ, gate.f * HQ, gate.g * HQ %}
      var ai = {{ p4(IQ) }};
      var ao = {{ p4(OQ) }};
      var af = {{ p4(FQ) }};
      var ag = {{ p4(GQq) }};
      for (var k = 0u; k < {{ H }}u; k = k + 1u) {
        let hk = hs[cur + k];
        let rq = (d * {{ H }}u + k) * {{ GQ }}u + q;
        ai = ai + hk * {{ RW }}[rq + {{ IQ }}u{{ RB }}];
        ao = ao + hk * {{ RW }}[rq + {{ OQ }}u{{ RB }}];
        af = af + hk * {{ RW }}[rq + {{ FQ }}u{{ RB }}];
        ag = ag + hk * {{ RW }}[rq + {{ GQq }}u{{ RB }}];
      }
      let c = vec4<f32>(cs[j], cs[j + 1u], cs[j + 2u], cs[j + 3u]);
{% if has_peep %}
      let prw = d * {{ 3 * H }}u + j;
      ai = ai + c * {{ load4("peep", "prw") }};
      ao = ao + c * {{ load4("peep", "prw + " ~ H ~ "u") }};
      af = af + c * {{ load4("peep", "prw + " ~ 2 * H ~ "u") }};
{% endif %}
      let ct = {{ acts[0] }}4(af) * c + {{ acts[0] }}4(ai) * {{ acts[1] }}4(ag);
      let hn = {{ acts[0] }}4(ao) * {{ acts[2] }}4(ct);
      cs[j] = ct.x;
      cs[j + 1u] = ct.y;
      cs[j + 2u] = ct.z;
      cs[j + 3u] = ct.w;
{% elif gru0 %}
{% set NQ = gate.n * HQ %}
      var an = vec4<f32>(0.0);
      for (var k = 0u; k < {{ H }}u; k = k + 1u) {
        an = an + rhs[k] * {{ RW }}[(d * {{ H }}u + k) * {{ GQ }}u + q + {{ NQ }}u{{ RB }}];
      }
      let z = vec4<f32>(zs[j], zs[j + 1u], zs[j + 2u], zs[j + 3u]);
      let n = {{ acts[1] }}4({{ p4(NQ) }} + an);
      let h = vec4<f32>(hs[cur + j], hs[cur + j + 1u], hs[cur + j + 2u], hs[cur + j + 3u]);
      let hn = z * h + n * (1.0 - z);
{% elif cell == "gru" %}
{% set ZQ, RQ, NQ = gate.z * HQ, gate.r * HQ, gate.n * HQ %}
      var az = vec4<f32>(0.0);
      var ar = vec4<f32>(0.0);
      var an = vec4<f32>(0.0);
      for (var k = 0u; k < {{ H }}u; k = k + 1u) {
        let hk = hs[cur + k];
        let rq = (d * {{ H }}u + k) * {{ GQ }}u + q;
        az = az + hk * {{ RW }}[rq + {{ ZQ }}u{{ RB }}];
        ar = ar + hk * {{ RW }}[rq + {{ RQ }}u{{ RB }}];
        an = an + hk * {{ RW }}[rq + {{ NQ }}u{{ RB }}];
      }
      let z = {{ acts[0] }}4({{ p4(ZQ) }} + az);
      let r = {{ acts[0] }}4({{ p4(RQ) }} + ar);
{% if has_rbias %}
      an = an + {{ load4("rbias", "rrow + " ~ gate.n * H ~ "u + j") }};
{% endif %}
      let n = {{ acts[1] }}4({{ p4(NQ) }} + r * an);
      let h = vec4<f32>(hs[cur + j], hs[cur + j + 1u], hs[cur + j + 2u], hs[cur + j + 3u]);
      let hn = z * h + n * (1.0 - z);
{% else %}
      var an = {{ p4() }};
      for (var k = 0u; k < {{ H }}u; k = k + 1u) {
        an = an + hs[cur + k] * {{ RW }}[(d * {{ H }}u + k) * {{ GQ }}u + q{{ RB }}];
      }
      let hn = {{ acts[0] }}4(an);
{% endif %}
      hs[nxt + j] = hn.x;
      hs[nxt + j + 1u] = hn.y;
      hs[nxt + j + 2u] = hn.z;
      hs[nxt + j + 3u] = hn.w;
{% if has_seq %}
      let so = (t * {{ D }}u + d) * {{ B * H }}u + b * {{ H }}u + j;
      store_seq(so, {{ b.seq.compute }}(hn.x));
      store_seq(so + 1u, {{ b.seq.compute }}(hn.y));
      store_seq(so + 2u, {{ b.seq.compute }}(hn.z));
      store_seq(so + 3u, {{ b.seq.compute }}(hn.w));
{% endif %}
    }
{% else %}
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
      var ai = {{ LP }}(prow + {{ IO }}u + j) + si;
      var ao = {{ LP }}(prow + {{ OO }}u + j) + so;
      var af = {{ LP }}(prow + {{ FO }}u + j) + sf;
      let ag = {{ LP }}(prow + {{ GO }}u + j) + sg;
      let c = cs[j];
{{ rnn.lstm_gates(acts, has_peep, H) }}
      cs[j] = ct;
      let hn = ht;
{% elif gru0 %}
{% set NO = gate.n * H %}
      var an = 0.0;
      for (var k = 0u; k < {{ H }}u; k = k + 1u) {
        an = an + rhs[k] * {{ rload(NO) }};
      }
      let z = zs[j];
      let n = {{ rnn.act(acts[1], LP ~ "(prow + " ~ NO ~ "u + j) + an") }};
      let hn = z * hs[cur + j] + n * (1.0 - z);
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
      let z = {{ rnn.act(acts[0], LP ~ "(prow + " ~ ZO ~ "u + j) + az") }};
      let r = {{ rnn.act(acts[0], LP ~ "(prow + " ~ RO ~ "u + j) + ar") }};
{% if has_rbias %}
      an = an + f32(load_rbias(rrow + {{ NO }}u + j));
{% endif %}
      let n = {{ rnn.act(acts[1], LP ~ "(prow + " ~ NO ~ "u + j) + r * an") }};
      let hn = z * hs[cur + j] + n * (1.0 - z);
{% else %}
      var an = 0.0;
      for (var k = 0u; k < {{ H }}u; k = k + 1u) {
        an = an + hs[cur + k] * {{ rload(0) }};
      }
      let hn = {{ rnn.act(acts[0], LP ~ "(prow + j) + an") }};
{% endif %}
      hs[nxt + j] = hn;
{% if has_seq %}
      store_seq((t * {{ D }}u + d) * {{ B * H }}u + b * {{ H }}u + j, {{ b.seq.compute }}(hn));
{% endif %}
    }
{% endif %}
    workgroupBarrier();
  }
  for (var j = lid.x; j < {{ H }}u; j = j + {{ WG }}u) {
    store_out_h(hrow + j, {{ b.out_h.compute }}(hs[{{ (T % 2) * H }}u + j]));
{% if cell == "lstm" %}
    store_out_c(hrow + j, {{ b.out_c.compute }}(cs[j]));
{% endif %}
  }
}
