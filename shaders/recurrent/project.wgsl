{#-
  recurrent/project.wgsl: the input projection of every step and direction,
    proj[d, t, b, g] = sum_k x[t, b, k] * w[d, g, k] + bias[d, g] + rbias[d, g] (g < fold_limit)

  Context:
    k.bindings  x [T, B, I], w [D, GH, I], bias [D, GH] (if has_bias), rbias [D, GH]
                (if has_rbias), proj (f32 [D, T, B, GH]; output)
    H B T D GH I  sizes (GH = gates * hidden size); direction (unused)
    has_bias, has_rbias; fold_limit: gate rows below it take the recurrent bias here
  Workgroup: (k.workgroup, 1, 1); 2-D folded dispatch; one invocation per proj element.
-#}
{% import "_lib/io.wgsl" as io %}
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
