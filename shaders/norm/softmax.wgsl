{#-
  norm/softmax.wgsl: softmax along one axis, stable (the line's maximum is subtracted first).

  A line is the L values along the axis: element j of line l is at
  (l / inner) * L * inner + l % inner + j * inner. Computes in f32.
  Context:
    mode        "thread" (one invocation per line) | "group" (one workgroup per line: max tree,
                sum-of-exponentials tree, then the outputs)
    M (lines), L, inner, out_T
  Bindings: src, out.
  Workgroup: (k.workgroup, 1, 1); 2-D folded dispatch; guards idx < M (thread) or g < M (group).
-#}
{% import "_lib/io.wgsl" as io %}
{% import "reduce/_lib.wgsl" as rl %}
{{ io.prelude(k, int64) }}
{{ rl.fns("max", "f32") }}

fn at(l: u32, j: u32) -> u32 {
  return (l / {{ inner }}u) * {{ L * inner }}u + l % {{ inner }}u + j * {{ inner }}u;
}

{% if mode == "thread" %}
{{ io.main_header(k) }}
  var mx = {{ rl.lowest("f32") }};
  for (var j = 0u; j < {{ L }}u; j = j + 1u) { mx = comb(mx, f32(load_src(at(idx, j)))); }
  var s = 0.0;
  for (var j = 0u; j < {{ L }}u; j = j + 1u) { s = s + exp(f32(load_src(at(idx, j))) - mx); }
  for (var j = 0u; j < {{ L }}u; j = j + 1u) {
    let e = at(idx, j);
    store_out(e, {{ out_T }}(exp(f32(load_src(e)) - mx) / s));
  }
}
{% else %}
var<workgroup> sh_v: array<f32, {{ k.workgroup }}>;

@compute @workgroup_size({{ k.workgroup }})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) t: u32) {
  let l = wid.x + wid.y * nwg.x;
  if (l >= {{ M }}u) { return; }
  var mx = {{ rl.lowest("f32") }};
  for (var j = t; j < {{ L }}u; j = j + {{ k.workgroup }}u) { mx = comb(mx, f32(load_src(at(l, j)))); }
  sh_v[t] = mx;
{{ rl.tree(k.workgroup, "max") }}
  let m = sh_v[0];
  workgroupBarrier();
  var s = 0.0;
  for (var j = t; j < {{ L }}u; j = j + {{ k.workgroup }}u) { s = s + exp(f32(load_src(at(l, j))) - m); }
  sh_v[t] = s;
  workgroupBarrier();
  for (var w = {{ k.workgroup // 2 }}u; w > 0u; w = w >> 1u) {
    if (t < w) { sh_v[t] = sh_v[t] + sh_v[t + w]; }
    workgroupBarrier();
  }
  let total = sh_v[0];
  for (var j = t; j < {{ L }}u; j = j + {{ k.workgroup }}u) {
    let e = at(l, j);
    store_out(e, {{ out_T }}(exp(f32(load_src(e)) - m) / total));
  }
}
{% endif %}
