{#-
  resample/resample2d.wgsl: nearest-neighbor or bilinear resampling of two axes, one output
  element per invocation, half-pixel centers (the spec's coordinate transformation):
    u = (o + 0.5) * in / out - 0.5, clamped to [0, in - 1]
    nearest: x = ceil(u - 0.5), in exact integer arithmetic (ties round down)
    linear:  x0 = floor(u), x1 = ceil(u), t = u - x0 (computed in f32)
  Context:
    mode          "nearest-neighbor" | "linear"
    out_strides   row-major strides of the output (coordinates c0..c3)
    in_st         input element strides per axis
    ax            the two resampled axes; sizes_in / sizes_out their input and output sizes
    exact         integer arithmetic for the source coordinate (false only when (2 out + 1) * in
                  >= 2**31; then it is computed in f32)
    out_T         output compute type
    ep            fused epilogue (webnn_gpu/ops/_epilogue.py), applied to each stored value
  Bindings: src, epilogue operands..., out.
  Workgroup: (k.workgroup, 1, 1); 2-D folded dispatch; guarded by idx < k.n.
-#}
{% import "_lib/io.wgsl" as io %}
{% import "_lib/index.wgsl" as ix %}
{% import "resample/_linear.wgsl" as lin %}
{% import "_lib/epilogue.wgsl" as el %}
{{ io.prelude(k, int64) }}
{{ el.fns(ep) }}

{% include "resample/_coords.wgsl" %}

{{ io.main_header(k) }}
{{ ix.coords("c", "idx", out_strides) }}
{% set others = [] %}
{% for d in range(4) %}{% if d not in ax %}{% set _ = others.append("c" ~ d ~ " * " ~ in_st[d] ~ "u") %}{% endif %}{% endfor %}
  let base = {{ others | join(" + ") }};
{% if mode == "nearest-neighbor" %}
  let y = nearest(c{{ ax[0] }}, {{ sizes_in[0] }}, {{ sizes_out[0] }});
  let x = nearest(c{{ ax[1] }}, {{ sizes_in[1] }}, {{ sizes_out[1] }});
{% if ep.empty %}
  store_out(idx, load_src(base + y * {{ in_st[ax[0]] }}u + x * {{ in_st[ax[1]] }}u));
{% else %}
  store_out(idx, {{ out_T }}({{ el.apply(ep, "f32(load_src(base + y * " ~ in_st[ax[0]] ~ "u + x * " ~ in_st[ax[1]] ~ "u))", "idx") }}));
{% endif %}
{% else %}
{{ lin.blend(ax, sizes_in, sizes_out, in_st, "f32(load_src(", "))") }}
  store_out(idx, {{ out_T }}({{ el.apply(ep, "lin", "idx") }}));
{% endif %}
}
