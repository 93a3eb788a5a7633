{#-
  norm/normalize.wgsl: out = (x - mean) / sqrt(variance + epsilon) * scale + bias, one output
  element per invocation, computed in f32 (batch, instance and layer normalization).

  Context:
    out_strides    row-major strides of the shape (coordinates c0..)
    stats          "moments": mean/variance from `stats` (float32 [M, 2]) at m = dot(c, stats_strides)
                   "tensors": from `mean` and `variance` at p = dot(c, param_strides)
    stats_strides  per axis: the row-major stride among the kept axes, 0 for reduced axes
    param_strides  per axis: the stride into scale/bias (and mean/variance), 0 where they broadcast
    has_scale, has_bias
    epsilon        WGSL f32 literal (already rounded to the input's data type)
    out_T          compute type of the output
    ep             fused epilogue (webnn_gpu/ops/_epilogue.py), applied to each stored value
  Bindings: x, (stats | mean, variance), [scale], [bias], epilogue operands..., out.
  Workgroup: (k.workgroup, 1, 1); 2-D folded dispatch; guarded by idx < k.n.
-#}
{% import "_lib/io.wgsl" as io %}
{% import "_lib/index.wgsl" as ix %}
{% import "_lib/epilogue.wgsl" as el %}
{{ io.prelude(k, int64) }}
{{ el.fns(ep) }}

{{ io.main_header(k) }}
{{ ix.coords("c", "idx", out_strides) }}
{% if stats == "moments" %}
  let m = {{ ix.dot("c", stats_strides) }};
  let mean = load_stats(2u * m);
  let variance = load_stats(2u * m + 1u);
{% endif %}
  let p = {{ ix.dot("c", param_strides) }};
{% if stats == "tensors" %}
  let mean = f32(load_mean(p));
  let variance = f32(load_variance(p));
{% endif %}
  var y = (f32(load_x(idx)) - mean) / sqrt(variance + {{ epsilon }});
{% if has_scale %}
  y = y * f32(load_scale(p));
{% endif %}
{% if has_bias %}
  y = y + f32(load_bias(p));
{% endif %}
  store_out(idx, {{ out_T }}({{ el.apply(ep, "y", "idx") }}));
}
