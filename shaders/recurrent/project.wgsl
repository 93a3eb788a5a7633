{#-
  recurrent/project.wgsl: the input projection of every step and direction,
    proj[d, t, b, g] = sum_k x[t, b, k] * w[d, g, k] + bias[d, g] + rbias[d, g] (g < fold_limit)

  Context:
    k.bindings  x [T, B, I], w [D, GH, I], bias [D, GH] (if has_bias), rbias [D, GH]
                (if has_rbias), proj (f32 [D, T, B, GH]; output)
    H B T D GH I  sizes (GH = gates * hidden size); direction (unused)
    has_bias, has_rbias; fold_limit: gate rows below it take the recurrent bias here
    vec         w bound as wt4 (f32 [D, I, GH / 4] of vec4: the constant weight transposed),
                each invocation computing four neighbouring gate rows (GH % 4 == 0)
  Workgroup: (k.workgroup, 1, 1); 2-D folded dispatch; one invocation per proj element (vec:
  per four).
-#}
{% import "_lib/io.wgsl" as io %}
{% if vec %}
{% for e in k.enables %}
{{ e }}
{% endfor %}
{{ io.decl(k.bindings[:1], int64) }}
@group(0) @binding(1) var<storage, read> wt4: array<vec4<f32>>;
{{ io.decl(k.bindings[2:], int64, 2) }}
{% set GQ = GH // 4 %}
{{ io.main_header(k) }}
  let q = idx % {{ GQ }}u;
  let row = idx / {{ GQ }}u;
  let b = row % {{ B }}u;
  let dt = row / {{ B }}u;
  let t = dt % {{ T }}u;
  let d = dt / {{ T }}u;
  let xo = (t * {{ B }}u + b) * {{ I }}u;
  var acc = vec4<f32>(0.0);
  for (var k = 0u; k < {{ I }}u; k = k + 1u) {
    acc = acc + f32(load_x(xo + k)) * wt4[(d * {{ I }}u + k) * {{ GQ }}u + q];
  }
  for (var c = 0u; c < 4u; c = c + 1u) {
    let g = q * 4u + c;
    var v = acc[c];
{% if has_bias %}
    v = v + f32(load_bias(d * {{ GH }}u + g));
{% endif %}
{% if has_rbias %}
{% if fold_limit < GH %}
    if (g < {{ fold_limit }}u) { v = v + f32(load_rbias(d * {{ GH }}u + g)); }
{% else %}
    v = v + f32(load_rbias(d * {{ GH }}u + g));
{% endif %}
{% endif %}
    store_proj(row * {{ GH }}u + g, v);
  }
}
{% else %}
{{ io.prelude(k, int64) }}
{{ io.main_header(k) }}
  let g = idx % {{ GH }}u;
  let row = idx / {{ GH }}u;
  let b = row % {{ B }}u;
  let dt = row / {{ B }}u;
  let t = dt % {{ T }}u;
  let d = dt / {{ T }}u;
  let xo = (t * {{ B }}u + b) * {{ I }}u;
  let wo = (d * {{ GH }}u + g) * {{ I }}u;
  var acc = 0.0;
  for (var k = 0u; k < {{ I }}u; k = k + 1u) {
    acc = acc + f32(load_x(xo + k)) * f32(load_w(wo + k));
  }
{% if has_bias %}
  acc = acc + f32(load_bias(d * {{ GH }}u + g));
{% endif %}
{% if has_rbias %}
{% if fold_limit < GH %}
  if (g < {{ fold_limit }}u) { acc = acc + f32(load_rbias(d * {{ GH }}u + g)); }
{% else %}
  acc = acc + f32(load_rbias(d * {{ GH }}u + g));
{% endif %}
{% endif %}
  store_proj(idx, acc);
}
{% endif %}
