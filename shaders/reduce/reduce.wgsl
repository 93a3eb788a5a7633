{#-
  reduce/reduce.wgsl: reductions (sum, product, max, min, argmax, argmin) with a map before and
  a finishing expression after, for every reduce_* operator, arg_min/arg_max and global pooling.

  Each output m reduces K values. Source value r of output m is either
    mapped:  src[base(m) + off(r)], base from the kept coordinates of m, off from the reduced
             coordinates of r (the axes merged in Python), or
    linear:  src[m * K + r] (the partials of a split pass).
  mode "thread": one invocation per output (small K); mode "group": one workgroup of
  k.workgroup invocations per (output, split) pair g = m * S + s, covering values
  [s * chunk, min((s + 1) * chunk, K)) and combining them with a shared-memory tree.

  Context:
    mode            "thread" | "group"
    M, S, K, chunk  outputs, splits per output, values per output in this pass, values per split
    linear          the source is a partial buffer (index m * K + r)
    kept_rm, kept_st  row-major strides over the kept dims / their input strides
    red_rm, red_st    row-major strides over the reduced dims / their input strides
    A               accumulate type (f32, i32, u32, i64, u64)
    combine         "add" | "mul" | "max" | "min" | "argmax" | "argmin"
    map_expr        WGSL over `x` (A) and `shift` (f32), applied to each source value, or "" for none
    final_expr      WGSL over `a` (A), `shift` and `count` giving the stored value, or "" to store
                    the partial as is (then the output is a partial buffer of type A)
    shift           bind `shift` (float32 [M]): a per-output offset (log-sum-exp's max); an
                    infinite shift counts as 0
    arg             argmax/argmin: `src_i` (uint32 partial indices) is bound when `linear`,
                    `out_i` (uint32) is written when final_expr is ""
    out_raw64       store the final index as a raw (low, high) pair (int64 output)
    out_T           compute type of the output binding
  Bindings: src, [src_i], [shift], out, [out_i].
  Workgroup: (k.workgroup, 1, 1); 2-D folded dispatch; thread mode guards idx < M, group mode
  guards g < M * S (uniform: derived from workgroup_id).
-#}
{% import "_lib/io.wgsl" as io %}
{% import "_lib/index.wgsl" as ix %}
{% import "reduce/_lib.wgsl" as rl %}
{% set is_arg = combine in ("argmax", "argmin") %}
{{ io.prelude(k, int64) }}
{{ rl.fns(combine, A) }}
{% if mode == "group" %}
var<workgroup> sh_v: array<{{ A }}, {{ k.workgroup }}>;
{% if is_arg %}
var<workgroup> sh_i: array<u32, {{ k.workgroup }}>;
{% endif %}
{% endif %}

fn source(m: u32, base: u32, r: u32, shift: f32) -> {{ A }} {
{% if linear %}
  return load_src(m * {{ K }}u + r);
{% else %}
{{ ix.coords("q", "r", red_rm) }}
  let x = {{ A }}(load_src(base + {{ ix.dot("q", red_st) }}));
{% if map_expr %}
  return {{ map_expr }};
{% else %}
  return x;
{% endif %}
{% endif %}
}

fn finish(m: u32, a: {{ A }}, ai: u32, shift: f32) {
{% if final_expr %}
  let count = f32({{ count }});
{% if is_arg %}
{% if out_raw64 %}
  store_raw_out(m, vec2<u32>(ai, 0u));
{% else %}
  store_out(m, {{ out_T }}(ai));
{% endif %}
{% else %}
  store_out(m, {{ out_T }}({{ final_expr }}));
{% endif %}
{% else %}
  store_out(m, a);
{% if is_arg %}
  store_out_i(m, ai);
{% endif %}
{% endif %}
}

fn base_of(m: u32) -> u32 {
{% if linear %}
  return 0u;
{% else %}
{{ ix.coords("p", "m", kept_rm) }}
  return {{ ix.dot("p", kept_st) }};
{% endif %}
}

fn shift_of(m: u32) -> f32 {
{% if shift %}
  let s = load_shift(m);
  if ((bitcast<u32>(s) & 0x7fffffffu) == 0x7f800000u) { return 0.0; }
  return s;
{% else %}
  return 0.0;
{% endif %}
}

{% if mode == "thread" %}
{{ io.main_header(k) }}
  let m = idx;
  let base = base_of(m);
  let shift = shift_of(m);
  var acc: {{ A }} = {{ rl.init(combine, A) }};
  var acc_i: u32 = 0xffffffffu;
  for (var r = 0u; r < {{ K }}u; r = r + 1u) {
    let v = source(m, base, r, shift);
{% if is_arg %}
    let vi = {{ "load_src_i(m * " ~ K ~ "u + r)" if linear else "r" }};
    if (arg_better(acc, acc_i, v, vi)) { acc = v; acc_i = vi; }
{% else %}
    acc = comb(acc, v);
{% endif %}
  }
  finish(m, acc, acc_i, shift);
}
{% else %}
@compute @workgroup_size({{ k.workgroup }})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) t: u32) {
  let g = wid.x + wid.y * nwg.x;
  if (g >= {{ M * S }}u) { return; }
  let m = g / {{ S }}u;
  let r0 = (g % {{ S }}u) * {{ chunk }}u;
  let r1 = min(r0 + {{ chunk }}u, {{ K }}u);
  let base = base_of(m);
  let shift = shift_of(m);
  var acc: {{ A }} = {{ rl.init(combine, A) }};
  var acc_i: u32 = 0xffffffffu;
  for (var r = r0 + t; r < r1; r = r + {{ k.workgroup }}u) {
    let v = source(m, base, r, shift);
{% if is_arg %}
    let vi = {{ "load_src_i(m * " ~ K ~ "u + r)" if linear else "r" }};
    if (arg_better(acc, acc_i, v, vi)) { acc = v; acc_i = vi; }
{% else %}
    acc = comb(acc, v);
{% endif %}
  }
  sh_v[t] = acc;
{% if is_arg %}
  sh_i[t] = acc_i;
{% endif %}
{{ rl.tree(k.workgroup, combine) }}
  if (t == 0u) {
{% if S > 1 %}
    finish(g, sh_v[0], {{ "sh_i[0]" if is_arg else "0u" }}, shift);
{% else %}
    finish(m, sh_v[0], {{ "sh_i[0]" if is_arg else "0u" }}, shift);
{% endif %}
  }
}
{% endif %}
