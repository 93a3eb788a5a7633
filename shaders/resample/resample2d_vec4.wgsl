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
  Bindings: src, out (as arrays of vec4).
  Workgroup: (k.workgroup, 1, 1); 2-D folded dispatch; guarded by idx < k.n (output elements / 4).
-#}
{% import "_lib/io.wgsl" as io %}
{% import "_lib/index.wgsl" as ix %}
{{ io.vec4_src_out(k) }}

{% include "resample/_coords.wgsl" %}

{{ io.main_header(k) }}
{{ ix.coords("c", "idx", out_strides) }}
{% set others = [] %}
{% for d in range(4) %}{% if d not in ax %}{% set _ = others.append("c" ~ d ~ " * " ~ in_st[d] ~ "u") %}{% endif %}{% endfor %}
  let base = {{ others | join(" + ") }};
{% if mode == "nearest-neighbor" %}
  let y = nearest(c{{ ax[0] }}, {{ sizes_in[0] }}, {{ sizes_out[0] }});
  let x = nearest(c{{ ax[1] }}, {{ sizes_in[1] }}, {{ sizes_out[1] }});
  out[idx] = src[base + y * {{ in_st[ax[0]] }}u + x * {{ in_st[ax[1]] }}u];
{% else %}
  let uy = coord(c{{ ax[0] }}, {{ sizes_in[0] }}, {{ sizes_out[0] }});
  let ux = coord(c{{ ax[1] }}, {{ sizes_in[1] }}, {{ sizes_out[1] }});
  let y0 = u32(floor(uy));
  let y1 = u32(ceil(uy));
  let x0 = u32(floor(ux));
  let x1 = u32(ceil(ux));
  let ty = uy - floor(uy);
  let tx = ux - floor(ux);
  let r0 = base + y0 * {{ in_st[ax[0]] }}u;
  let r1 = base + y1 * {{ in_st[ax[0]] }}u;
  let v00 = vec4<f32>(src[r0 + x0 * {{ in_st[ax[1]] }}u]);
  let v01 = vec4<f32>(src[r0 + x1 * {{ in_st[ax[1]] }}u]);
  let v10 = vec4<f32>(src[r1 + x0 * {{ in_st[ax[1]] }}u]);
  let v11 = vec4<f32>(src[r1 + x1 * {{ in_st[ax[1]] }}u]);
  let vy0 = v00 * (1.0 - tx) + v01 * tx;
  let vy1 = v10 * (1.0 - tx) + v11 * tx;
  out[idx] = vec4<{{ out_T }}>(vy0 * (1.0 - ty) + vy1 * ty);
{% endif %}
}
