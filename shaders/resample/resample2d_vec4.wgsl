{#-
  resample/resample2d_vec4.wgsl: resample2d.wgsl with four neighbouring elements of the last
  axis (not resampled, a multiple of 4: the channels of NHWC) per invocation, read and
  written as vec4 (plain 32- or 16-bit data). Half-pixel centers:
    u = (o + 0.5) * in / out - 0.5, clamped to [0, in - 1]
    nearest: x = ceil(u - 0.5), in exact integer arithmetic (ties round down)
    linear:  x0 = floor(u), x1 = ceil(u), t = u - x0 (computed in f32)
  Context:
    mode          "nearest-neighbor" | "linear"
    out_strides   row-major strides of the output in vec4 units (coordinates c0..c3)
    in_st         input strides per axis in vec4 units
    ax            the two resampled axes; sizes_in / sizes_out their input and output sizes
    exact         integer arithmetic for the source coordinate (false only when (2 out + 1) * in
                  >= 2**31; then it is computed in f32)
    out_T         output compute type
    ep            fused epilogue (webnn_gpu/ops/_epilogue.py), applied to each stored value
  Bindings: src, epilogue operands..., out (src and out as arrays of vec4).
  Workgroup: (k.workgroup, 1, 1); 2-D folded dispatch; guarded by idx < k.n (output elements / 4).
-#}
{% import "_lib/io.wgsl" as io %}
{% import "_lib/index.wgsl" as ix %}
{% import "resample/_linear.wgsl" as lin %}
{% import "_lib/epilogue.wgsl" as el %}
{% if ep.empty %}
{{ io.vec4_src_out(k) }}
{% else %}
{{ el.vec4_bindings(k) }}
{{ el.fns(ep) }}
{{ el.fns4(ep) }}
{% endif %}

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
  out[idx] = src[base + y * {{ in_st[ax[0]] }}u + x * {{ in_st[ax[1]] }}u];
{% else %}
  out[idx] = vec4<{{ out_T }}>({{ el.apply4(ep, "vec4<f32>(src[base + y * " ~ in_st[ax[0]] ~ "u + x * " ~ in_st[ax[1]] ~ "u])", "idx * 4u") }});
{% endif %}
{% else %}
{{ lin.blend(ax, sizes_in, sizes_out, in_st, "vec4<f32>(src[", "])") }}
  out[idx] = vec4<{{ out_T }}>({{ el.apply4(ep, "lin", "idx * 4u") }});
{% endif %}
}
