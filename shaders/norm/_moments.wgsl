{#-
  norm/_moments.wgsl: the mean and variance of one row's K values, for norm/moments.wgsl and
  norm/layer_norm.wgsl. Two passes over the values: the mean first, then the mean of squared
  deviations (no cancellation). Accumulates in f32. `rows` declares the
  row addressing (`base_of`, `offset`, `value`) the other macros read; they leave `mean` and
  `variance` defined.
-#}
{% import "_lib/index.wgsl" as ix %}
{% import "reduce/_lib.wgsl" as rl %}

{#- The row addressing both kernels share: `base_of(m)`, the first value of kept row m;
    `offset(r)`, value r's distance from it; `value(base, r)`, that value as f32 read with
    `load` (the input's load helper). -#}
{% macro rows(kept_rm, kept_st, red_rm, red_st, load) %}
fn base_of(m: u32) -> u32 {
{{ ix.coords("p", "m", kept_rm) }}
  return {{ ix.dot("p", kept_st) }};
}

fn offset(r: u32) -> u32 {
{{ ix.coords("q", "r", red_rm) }}
  return {{ ix.dot("q", red_st) }};
}

fn value(base: u32, r: u32) -> f32 {
  return f32({{ load }}(base + offset(r)));
}
{% endmacro %}

{#- One invocation per row: `base` is defined by the caller. -#}
{% macro thread(K) %}
  var s = 0.0;
  for (var r = 0u; r < {{ K }}u; r = r + 1u) { s = s + value(base, r); }
  let mean = s / {{ K }}.0;
  var v = 0.0;
  for (var r = 0u; r < {{ K }}u; r = r + 1u) {
    let d = value(base, r) - mean;
    v = v + d * d;
  }
  let variance = v / {{ K }}.0;
{% endmacro %}

{#- One workgroup per row: the entry point itself, open (the caller writes the rest of the
    body and the closing brace); row m, invocation t, `base` defined. -#}
{% macro group_main(k, M, K) %}
var<workgroup> sh_v: array<f32, {{ k.workgroup }}>;

@compute @workgroup_size({{ k.workgroup }})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) t: u32) {
  let m = wid.x + wid.y * nwg.x;
  if (m >= {{ M }}u) { return; }
  let base = base_of(m);
  var s = 0.0;
  for (var r = t; r < {{ K }}u; r = r + {{ k.workgroup }}u) { s = s + value(base, r); }
  sh_v[t] = s;
{{ rl.tree(k.workgroup, "add") }}
  let mean = sh_v[0] / {{ K }}.0;
  workgroupBarrier();
  var v = 0.0;
  for (var r = t; r < {{ K }}u; r = r + {{ k.workgroup }}u) {
    let d = value(base, r) - mean;
    v = v + d * d;
  }
  sh_v[t] = v;
{{ rl.tree(k.workgroup, "add") }}
  let variance = sh_v[0] / {{ K }}.0;
{% endmacro %}
