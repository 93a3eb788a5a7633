{#-
  recurrent/step4.wgsl: one LSTM, GRU or plain RNN time step (the per-step path) for every
  direction, batch row and hidden unit, U neighbouring hidden units of every gate per invocation
  and BR batch rows, reading the recurrent weight packed so that each block of L invocations
  streams through consecutive memory (a k step loads U values of each gate per invocation).

  Context:
    k.bindings  step (u32 [1]: the step index s), proj (f32 [D, T, B, GH], or [T, B, D, GH]
                when proj_tbd; x W' + folded biases), r (the constant recurrent weight packed,
                recurrent._step_pack: [D, H / (U L), H, G, L, U], so that the L invocations of
                a block of neighbouring units read L consecutive runs of U values of a gate and
                each k step the next G L runs; f32 bound as vec4s, or with words as vec2<u64>s
                (U = 4) or vec4<u64>s (U = 8), the same bits; float16 (a float16 graph's R, or a
                float32 R whose values are all float16 values; with words only) as one u64 (U = 4) or a vec2<u64> (U = 8)),
                then by cell and phase:
                lstm: peep ([D, 3H] in i, o, f order; if has_peep), state_in (f32 [2, D, B, H]:
                  h then c); outputs state_out (f32 [2, D, B, H]), seq ([T, D, B, H], if has_seq)
                gru, phase "reset" (reset_after False): state_in (f32 [1, D, B, H]); output rh
                  (f32 [D, B, H]: r * h)
                rnn (h = act(proj + h R'): a GRU whose update and reset gates are constant,
                  ops.recurrent._plain_rnn; GH = H): state_in; outputs state_out, seq
                gru, phase "update": rbias ([D, 3H]; if has_rbias: the new gate's recurrent bias
                  with reset_after), state_in, rh (when not reset_after); outputs state_out,
                  seq (if has_seq)
    H B T D GH I  sizes (H % 4 == 0); direction: "forward" | "backward" | "both"
    cell        "lstm", "gru" or "rnn"; phase (gru) "reset" or "update"
    gate        row block of each gate ({"i", "o", "f", "g"}, {"z", "r", "n"} or {"n": 0})
    acts        the activations ([f, g, h] LSTM, [f, g] GRU, [g] rnn)
    U           hidden units per invocation: 4, or 8 with words (r read as vec4<u64>s)
    BR          batch rows per invocation (divides B)
    L           invocations per block of the packed weight (divides H / U)
    words       r read as u64 words (shader-int64: a per-lane access component moves two
                float32 or four float16 values instead of one on Mesa 22)
    sg          0, or the subgroup's lanes (H % (U * sg) == 0, every subgroup whole): lane l
                loads the state of column k0 + l for the sg columns from k0 on, the others take it
                with subgroupBroadcast (a register extract on llvmpipe) instead of loading it
    proj_tbd, reset_after, has_peep, has_rbias, has_seq
  Workgroup: (k.workgroup, 1, 1); 2-D folded dispatch; one invocation per (d, batch rows bg,
  units q U .. q U + U - 1): idx = (d * B / BR + bg) * H / U + q.
-#}
{% import "_lib/io.wgsl" as io %}
{% import "_lib/activations.wgsl" as actlib %}
{% import "recurrent/_rnn.wgsl" as rnn %}
{% set HU, G, NB, N, UQ = H // U, GH // H, B // BR, D * B * H, U // 4 %}
{% for e in k.enables %}
{{ e }}
{% endfor %}
{{ io.decl(k.bindings[:2], int64) }}
{% set f16r = k.bindings[2].data_type == "float16" %}
{% if words and f16r %}
@group(0) @binding(2) var<storage, read> rw: array<{{ "vec2<u64>" if U == 8 else "u64" }}>;
{{ io.words_fns("f16", "r_") }}
{% elif words %}
@group(0) @binding(2) var<storage, read> rw: array<{{ "vec4<u64>" if U == 8 else "vec2<u64>" }}>;
{{ io.words_fns("f32", "r_") }}
{% else %}
@group(0) @binding(2) var<storage, read> r4: array<vec4<f32>>;
{% endif %}
{{ io.decl(k.bindings[3:], int64, 3) }}
{{ actlib.defs("f32", ["sigmoid", "tanh"]) }}
{{ rnn.act4_fns(acts) -}}
{% set load4 = rnn.load4 %}
{#- the recurrent products this kernel runs: (accumulator, gate, state read) -#}
{% if cell == "rnn" %}
{% set prods = [("n", gate.n, "state_in")] %}
{% elif cell == "lstm" %}
{% set prods = [("i", gate.i, "state_in"), ("o", gate.o, "state_in"), ("f", gate.f, "state_in"),
                ("g", gate.g, "state_in")] %}
{% elif phase == "reset" %}
{% set prods = [("r", gate.r, "state_in")] %}
{% elif reset_after %}
{% set prods = [("z", gate.z, "state_in"), ("r", gate.r, "state_in"), ("n", gate.n, "state_in")] %}
{% else %}
{% set prods = [("z", gate.z, "state_in"), ("n", gate.n, "rh")] %}
{% endif %}
{% set srcs = prods | map(attribute=2) | unique | list %}
{% if sg %}
@compute @workgroup_size({{ k.workgroup }})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(subgroup_invocation_id) lane: u32) {
  let idx = gid.x + gid.y * nwg.x * {{ k.workgroup }}u;
  if (idx >= {{ k.n }}u) { return; }
{% else %}
{{ io.main_header(k) }}
{% endif %}
  let q = idx % {{ HU }}u;
  let dbg = idx / {{ HU }}u;
  let bg = dbg % {{ NB }}u;
  let d = dbg / {{ NB }}u;
  let j = q * {{ U }}u;
  let rbase = (d * {{ HU // L }}u + q / {{ L }}u) * {{ H * G * L }}u + q % {{ L }}u;
  let s = load_step(0u);
  let t = {{ rnn.time(direction, T) }};
{% for i in range(BR) %}
  let b{{ i }} = bg * {{ BR }}u + {{ i }}u;
  let hrow{{ i }} = (d * {{ B }}u + b{{ i }}) * {{ H }}u;
{% for p in prods %}
{% for h in range(UQ) %}
  var a{{ p[0] }}{{ i }}_{{ h }} = vec4<f32>(0.0);
{% endfor %}
{% endfor %}
{% endfor %}
{#- the products' loads and multiply-adds of column k (expression kx) given the state values of
    rows i as `<src>i` -#}
{% macro kstep(kx) %}
    let rq = rbase + ({{ kx }}) * {{ G * L }}u;
{% for p in prods %}
{% if words and U == 8 %}
    let v{{ p[0] }} = rw[rq + {{ p[1] * L }}u];
    let w{{ p[0] }}_0 = r_up(v{{ p[0] }}.{{ "x" if f16r else "xy" }});
    let w{{ p[0] }}_1 = r_up(v{{ p[0] }}.{{ "y" if f16r else "zw" }});
{% elif words %}
    let w{{ p[0] }}_0 = r_up(rw[rq + {{ p[1] * L }}u]);
{% else %}
    let w{{ p[0] }}_0 = r4[rq + {{ p[1] * L }}u];
{% endif %}
{% endfor %}
{% for i in range(BR) %}
{% for p in prods %}
{% for h in range(UQ) %}
    a{{ p[0] }}{{ i }}_{{ h }} = a{{ p[0] }}{{ i }}_{{ h }} + {{ p[2] }}{{ i }} * w{{ p[0] }}_{{ h }};
{% endfor %}
{% endfor %}
{% endfor %}
{% endmacro %}
{% if sg %}
  for (var k0 = 0u; k0 < {{ H }}u; k0 = k0 + {{ sg }}u) {
{% for i in range(BR) %}
{% for src in srcs %}
    let {{ src }}l{{ i }} = load_{{ src }}(hrow{{ i }} + k0 + lane);
{% endfor %}
{% endfor %}
{% for c in range(sg) %}
    {
{% for i in range(BR) %}
{% for src in srcs %}
    let {{ src }}{{ i }} = subgroupBroadcast({{ src }}l{{ i }}, {{ c }}u);
{% endfor %}
{% endfor %}
{{ kstep("k0 + " ~ c ~ "u") }}
    }
{% endfor %}
  }
{% else %}
  for (var k = 0u; k < {{ H }}u; k = k + 1u) {
{% for i in range(BR) %}
{% for src in srcs %}
    let {{ src }}{{ i }} = load_{{ src }}(hrow{{ i }} + k);
{% endfor %}
{% endfor %}
{{ kstep("k") }}
  }
{% endif %}
{% for i in range(BR) %}
{% for h in range(UQ) %}
  {
    let jj = j + {{ 4 * h }}u;
{% if proj_tbd %}
    let prow{{ i }} = ((t * {{ B }}u + b{{ i }}) * {{ D }}u + d) * {{ GH }}u + jj;
{% else %}
    let prow{{ i }} = ((d * {{ T }}u + t) * {{ B }}u + b{{ i }}) * {{ GH }}u + jj;
{% endif %}
    let u = hrow{{ i }} + jj;
{% if cell == "lstm" %}
    var ai = {{ load4("proj", "prow" ~ i ~ " + " ~ gate.i * H ~ "u") }} + ai{{ i }}_{{ h }};
    var ao = {{ load4("proj", "prow" ~ i ~ " + " ~ gate.o * H ~ "u") }} + ao{{ i }}_{{ h }};
    var af = {{ load4("proj", "prow" ~ i ~ " + " ~ gate.f * H ~ "u") }} + af{{ i }}_{{ h }};
    let ag = {{ load4("proj", "prow" ~ i ~ " + " ~ gate.g * H ~ "u") }} + ag{{ i }}_{{ h }};
    let c = {{ load4("state_in", N ~ "u + u") }};
{% if has_peep %}
    let prw = d * {{ 3 * H }}u + jj;
    ai = ai + c * {{ load4("peep", "prw") }};
    ao = ao + c * {{ load4("peep", "prw + " ~ H ~ "u") }};
    af = af + c * {{ load4("peep", "prw + " ~ 2 * H ~ "u") }};
{% endif %}
    let ct = {{ acts[0] }}4(af) * c + {{ acts[0] }}4(ai) * {{ acts[1] }}4(ag);
    let hn = {{ acts[0] }}4(ao) * {{ acts[2] }}4(ct);
    for (var e = 0u; e < 4u; e = e + 1u) {
      store_state_out(u + e, hn[e]);
      store_state_out({{ N }}u + u + e, ct[e]);
    }
{% elif cell == "rnn" %}
    let hn = {{ acts[0] }}4({{ load4("proj", "prow" ~ i) }} + an{{ i }}_{{ h }});
    for (var e = 0u; e < 4u; e = e + 1u) {
      store_state_out(u + e, hn[e]);
    }
{% elif phase == "reset" %}
    let r = {{ acts[0] }}4({{ load4("proj", "prow" ~ i ~ " + " ~ gate.r * H ~ "u") }} + ar{{ i }}_{{ h }});
    let rh = r * {{ load4("state_in", "u") }};
    for (var e = 0u; e < 4u; e = e + 1u) {
      store_rh(u + e, rh[e]);
    }
{% else %}
    let z = {{ acts[0] }}4({{ load4("proj", "prow" ~ i ~ " + " ~ gate.z * H ~ "u") }} + az{{ i }}_{{ h }});
{% if reset_after %}
    let r = {{ acts[0] }}4({{ load4("proj", "prow" ~ i ~ " + " ~ gate.r * H ~ "u") }} + ar{{ i }}_{{ h }});
{% if has_rbias %}
    let an = an{{ i }}_{{ h }} + {{ load4("rbias", "d * " ~ GH ~ "u + " ~ gate.n * H ~ "u + jj") }};
{% else %}
    let an = an{{ i }}_{{ h }};
{% endif %}
    let n = {{ acts[1] }}4({{ load4("proj", "prow" ~ i ~ " + " ~ gate.n * H ~ "u") }} + r * an);
{% else %}
    let n = {{ acts[1] }}4({{ load4("proj", "prow" ~ i ~ " + " ~ gate.n * H ~ "u") }} + an{{ i }}_{{ h }});
{% endif %}
    let h = {{ load4("state_in", "u") }};
    let hn = z * h + n * (1.0 - z);
    for (var e = 0u; e < 4u; e = e + 1u) {
      store_state_out(u + e, hn[e]);
    }
{% endif %}
{% if has_seq and not (cell == "gru" and phase == "reset") %}
    let so = (t * {{ D }}u + d) * {{ B * H }}u + b{{ i }} * {{ H }}u + jj;
    for (var e = 0u; e < 4u; e = e + 1u) {
      store_seq(so + e, {{ b.seq.compute }}(hn[e]));
    }
{% endif %}
  }
{% endfor %}
{% endfor %}
}
