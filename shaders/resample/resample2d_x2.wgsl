{#-
  resample/resample2d_x2.wgsl: linear resample2d doubling both resampled axes, four channels of
  the last axis (a multiple of 4) per invocation, read and written as vec4. Each invocation
  computes the 2 x 2 outputs (2i..2i+1, 2j..2j+1) of input pixel (i, j) from its 3 x 3
  neighbourhood: 9 loads for 4 outputs instead of 16. With half-pixel centers the source
  coordinates are exact quarters: output 2i reads rows (i - 1, i) with weight 0.75 on row i, and
  2i + 1 rows (i, i + 1) with 0.25 on row i + 1; at the borders, where the coordinate clamps,
  one row with weight 0. The arithmetic is resample2d_vec4.wgsl's, term for term, so the
  results are bit-identical to it.
  Context:
    blk_strides   row-major strides (vec4 units) of the invocation grid: the output's vec4
                  shape with the resampled axes at their input sizes (coordinates c0..c3)
    in_st         input strides per axis in vec4 units
    out_st        output strides per axis in vec4 units
    ax            the two resampled axes; sizes_in their input sizes
    out_T         output compute type
    ep            fused epilogue (webnn_gpu/ops/_epilogue.py), applied to each stored value
  Bindings: src, epilogue operands..., out (src and out as arrays of vec4).
  Workgroup: (k.workgroup, 1, 1); 2-D folded dispatch; guarded by idx < k.n (input elements / 4).
-#}
{% import "_lib/io.wgsl" as io %}
{% import "_lib/index.wgsl" as ix %}
{% import "_lib/epilogue.wgsl" as el %}
{% if ep.empty %}
{{ io.vec4_src_out(k) }}
{% else %}
{{ el.vec4_bindings(k) }}
{{ el.fns(ep) }}
{{ el.fns4(ep) }}
{% endif %}

{{ io.main_header(k) }}
{{ ix.coords("c", "idx", blk_strides) }}
{% set others_in = [] %}
{% set others_out = [] %}
{% for d in range(4) %}{% if d not in ax %}{% set _ = others_in.append("c" ~ d ~ " * " ~ in_st[d] ~ "u") %}{% set _ = others_out.append("c" ~ d ~ " * " ~ out_st[d] ~ "u") %}{% endif %}{% endfor %}
  let base = {{ others_in | join(" + ") }};
  let obase = {{ others_out | join(" + ") }};
  let i = c{{ ax[0] }};
  let j = c{{ ax[1] }};
  let ylo = select(i - 1u, 0u, i == 0u);
  let yhi = min(i + 1u, {{ sizes_in[0] - 1 }}u);
  let xlo = select(j - 1u, 0u, j == 0u);
  let xhi = min(j + 1u, {{ sizes_in[1] - 1 }}u);
  let r = array<u32, 3>(base + ylo * {{ in_st[ax[0]] }}u, base + i * {{ in_st[ax[0]] }}u, base + yhi * {{ in_st[ax[0]] }}u);
  let q = array<u32, 3>(xlo * {{ in_st[ax[1]] }}u, j * {{ in_st[ax[1]] }}u, xhi * {{ in_st[ax[1]] }}u);
{% for a in range(3) %}
{% for b in range(3) %}
  let v{{ a }}{{ b }} = vec4<f32>(src[r[{{ a }}] + q[{{ b }}]]);
{% endfor %}
{% endfor %}
  // Second-tap weights; 0 where the coordinate clamps at a border (both taps are then the
  // border pixel, which ylo/yhi/xlo/xhi already point at).
  let ty = array<f32, 2>(select(0.75, 0.0, i == 0u), select(0.25, 0.0, i + 1u >= {{ sizes_in[0] }}u));
  let tx = array<f32, 2>(select(0.75, 0.0, j == 0u), select(0.25, 0.0, j + 1u >= {{ sizes_in[1] }}u));
{% for hy in range(2) %}
{% for hx in range(2) %}
  {
    // rows (hy, hy + 1) and columns (hx, hx + 1) of the 3 x 3 neighbourhood
    let vy0 = v{{ hy }}{{ hx }} * (1.0 - tx[{{ hx }}]) + v{{ hy }}{{ hx + 1 }} * tx[{{ hx }}];
    let vy1 = v{{ hy + 1 }}{{ hx }} * (1.0 - tx[{{ hx }}]) + v{{ hy + 1 }}{{ hx + 1 }} * tx[{{ hx }}];
    let o4 = obase + (2u * i + {{ hy }}u) * {{ out_st[ax[0]] }}u + (2u * j + {{ hx }}u) * {{ out_st[ax[1]] }}u;
    out[o4] = vec4<{{ out_T }}>({{ el.apply4(ep, "vy0 * (1.0 - ty[" ~ hy ~ "]) + vy1 * ty[" ~ hy ~ "]", "o4 * 4u") }});
  }
{% endfor %}
{% endfor %}
}
