{#-
  norm/layer_norm.wgsl: layer normalization in one kernel for short rows: the mean and
  variance of each row's K values (norm/_moments.wgsl's two passes), then its outputs (x - mean) / sqrt(variance + epsilon) * scale + bias, with
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
    form              "layer": (x - mean) / sqrt(variance + epsilon); "rms": x / sqrt(mean(x^2) +
                      epsilon), mean(x^2) = variance + mean^2; "scaled": x / sqrt(variance + epsilon);
                      with s = sum(x^2) = K * mean(x^2): "l2min": x * min(1 / sqrt(s), epsilon),
                      "l2max": x / sqrt(max(s, epsilon))
    out_T             compute type of the output
    ep                fused epilogue (webnn_gpu/ops/_epilogue.py), applied to each stored value
  Bindings: x, [scale], [bias], epilogue operands..., out.
  Workgroup: (k.workgroup, 1, 1); 2-D folded dispatch; guards idx < M (thread) or g < M (group).
-#}
{% import "_lib/io.wgsl" as io %}
{% import "_lib/epilogue.wgsl" as el %}
{% import "reduce/_lib.wgsl" as rl %}
{% import "norm/_moments.wgsl" as mo %}
{{ io.prelude(k, int64) }}
{{ rl.fns("add", "f32") }}
{{ el.fns(ep) }}

{{ mo.rows(kept_rm, kept_st, red_rm, red_st, "load_x") }}

{% macro inv() -%}
{% if form == "l2min" %}
  let inv = min(1.0 / sqrt(f32({{ K }}) * (variance + mean * mean)), {{ epsilon }});
{% elif form == "l2max" %}
  let inv = 1.0 / sqrt(max(f32({{ K }}) * (variance + mean * mean), {{ epsilon }}));
{% else %}
  let inv = 1.0 / sqrt(variance{% if form == "rms" %} + mean * mean{% endif %} + {{ epsilon }});
{% endif %}
{%- endmacro %}

fn store_value(e: u32, r: u32, v: f32, mean: f32, inv: f32) {
{% if form == "layer" %}
  var y = (v - mean) * inv;
{% else %}
  var y = v * inv;
{% endif %}
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
{{ mo.thread(K) }}
{{ inv() }}
  for (var r = 0u; r < {{ K }}u; r = r + 1u) {
    let e = base + offset(r);
    store_value(e, r, f32(load_x(e)), mean, inv);
  }
}
{% else %}
{{ mo.group_main(k, M, K) }}
{{ inv() }}
  for (var r = t; r < {{ K }}u; r = r + {{ k.workgroup }}u) {
    let e = base + offset(r);
    store_value(e, r, f32(load_x(e)), mean, inv);
  }
}
{% endif %}
