{#-
  norm/layer_norm.wgsl: layer normalization in one kernel for short rows: the mean and
  variance of each row's K values (two passes: the mean first, then the mean of squared
  deviations), then its outputs (x - mean) / sqrt(variance + epsilon) * scale + bias, with
  the fused epilogue. Computes in f32.

  Value r of row m is x[base(m) + off(r)] as in norm/moments.wgsl; the output has x's shape,
  so it is written at the same index. scale and bias have the normalized axes' shape: value r
  uses element r.
  Context:
    mode              "thread" (one invocation per row) | "group" (one workgroup per row)
    M, K
    kept_rm, kept_st  row-major strides over the kept dims / their input strides
    red_rm, red_st    row-major strides over the reduced dims / their input strides
    has_scale, has_bias
    epsilon           WGSL f32 literal (already rounded to the input's data type)
    out_T             compute type of the output
    ep                fused epilogue (webnn_gpu/ops/_epilogue.py), applied to each stored value
  Bindings: x, [scale], [bias], epilogue operands..., out.
  Workgroup: (k.workgroup, 1, 1); 2-D folded dispatch; guards idx < M (thread) or g < M (group).
-#}
{% import "_lib/io.wgsl" as io %}
{% import "_lib/index.wgsl" as ix %}
{% import "_lib/epilogue.wgsl" as el %}
{% import "reduce/_lib.wgsl" as rl %}
{{ io.prelude(k, int64) }}
{{ rl.fns("add", "f32") }}
{{ el.fns(ep) }}

fn base_of(m: u32) -> u32 {
{{ ix.coords("p", "m", kept_rm) }}
  return {{ ix.dot("p", kept_st) }};
}

fn offset(r: u32) -> u32 {
{{ ix.coords("q", "r", red_rm) }}
  return {{ ix.dot("q", red_st) }};
}

fn store_value(e: u32, r: u32, v: f32, mean: f32, inv: f32) {
  var y = (v - mean) * inv;
{% if has_scale %}
  y = y * f32(load_scale(r));
{% endif %}
{% if has_bias %}
  y = y + f32(load_bias(r));
{% endif %}
  store_out(e, {{ out_T }}({{ el.apply(ep, "y", "e") }}));
}

{% if mode == "thread" %}
{{ io.main_header(k) }}
  let base = base_of(idx);
  var s = 0.0;
  for (var r = 0u; r < {{ K }}u; r = r + 1u) { s = s + f32(load_x(base + offset(r))); }
  let mean = s / {{ K }}.0;
  var v = 0.0;
  for (var r = 0u; r < {{ K }}u; r = r + 1u) {
    let d = f32(load_x(base + offset(r))) - mean;
    v = v + d * d;
  }
  let inv = 1.0 / sqrt(v / {{ K }}.0 + {{ epsilon }});
  for (var r = 0u; r < {{ K }}u; r = r + 1u) {
    let e = base + offset(r);
    store_value(e, r, f32(load_x(e)), mean, inv);
  }
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
  for (var r = t; r < {{ K }}u; r = r + {{ k.workgroup }}u) { s = s + f32(load_x(base + offset(r))); }
  sh_v[t] = s;
{{ rl.tree(k.workgroup, "add") }}
  let mean = sh_v[0] / {{ K }}.0;
  workgroupBarrier();
  var v = 0.0;
  for (var r = t; r < {{ K }}u; r = r + {{ k.workgroup }}u) {
    let d = f32(load_x(base + offset(r))) - mean;
    v = v + d * d;
  }
  sh_v[t] = v;
{{ rl.tree(k.workgroup, "add") }}
  let inv = 1.0 / sqrt(sh_v[0] / {{ K }}.0 + {{ epsilon }});
  for (var r = t; r < {{ K }}u; r = r + {{ k.workgroup }}u) {
    let e = base + offset(r);
    store_value(e, r, f32(load_x(e)), mean, inv);
  }
}
{% endif %}
