{#-
  norm/moments.wgsl: mean and variance of K values for each of M outputs (instance and layer
  normalization). Two passes over the values: the mean first, then the mean of squared
  deviations (no cancellation). Accumulates in f32.

  Value r of output m is src[base(m) + off(r)] as in reduce/reduce.wgsl.
  Context:
    mode              "thread" (one invocation per output) | "group" (one workgroup per output)
    M, K
    kept_rm, kept_st  row-major strides over the kept dims / their input strides
    red_rm, red_st    row-major strides over the reduced dims / their input strides
  Bindings: src, out (float32 [M, 2]: mean, variance).
  Workgroup: (k.workgroup, 1, 1); 2-D folded dispatch; guards idx < M (thread) or g < M (group).
-#}
{% import "_lib/io.wgsl" as io %}
{% import "_lib/index.wgsl" as ix %}
{% import "reduce/_lib.wgsl" as rl %}
{{ io.prelude(k, int64) }}
{{ rl.fns("add", "f32") }}

fn base_of(m: u32) -> u32 {
{{ ix.coords("p", "m", kept_rm) }}
  return {{ ix.dot("p", kept_st) }};
}

fn value(base: u32, r: u32) -> f32 {
{{ ix.coords("q", "r", red_rm) }}
  return f32(load_src(base + {{ ix.dot("q", red_st) }}));
}

{% if mode == "thread" %}
{{ io.main_header(k) }}
  let base = base_of(idx);
  var s = 0.0;
  for (var r = 0u; r < {{ K }}u; r = r + 1u) { s = s + value(base, r); }
  let mean = s / {{ K }}.0;
  var v = 0.0;
  for (var r = 0u; r < {{ K }}u; r = r + 1u) {
    let d = value(base, r) - mean;
    v = v + d * d;
  }
  store_out(2u * idx, mean);
  store_out(2u * idx + 1u, v / {{ K }}.0);
}
{% else %}
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
  if (t == 0u) {
    store_out(2u * m, mean);
    store_out(2u * m + 1u, sh_v[0] / {{ K }}.0);
  }
}
{% endif %}
