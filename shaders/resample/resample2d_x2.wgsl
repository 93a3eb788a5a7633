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
    x64           src and out bound as 8-value words, the same bits (float32: vec4<u64>,
                  float16: vec2<u64>): each invocation computes 8 channels (two vec4s) of
                  its 2 x 2 outputs, the strides and blk_strides then in 8-channel units; on
                  Mesa 22 every storage access is a loop over the lanes and the components,
                  and a u64 component moves two float32 or four float16 values
  Bindings: src, epilogue operands..., out (src and out as arrays of vec4, or of words).
  Workgroup: (k.workgroup, 1, 1); 2-D folded dispatch; guarded by idx < k.n (input elements / 4,
  or / 8 with x64).
-#}
{% import "_lib/io.wgsl" as io %}
{% import "_lib/index.wgsl" as ix %}
{% import "_lib/epilogue.wgsl" as el %}
{% if x64 %}
{% set T = k.bindings[0].storage %}
{% set LT = "vec4<u64>" if T == "f32" else "vec2<u64>" %}
{% for e in k.enables %}
{{ e }}
{% endfor %}
{% for b in k.bindings %}
@group(0) @binding({{ loop.index0 }}) var<storage, {{ "read_write" if b.output else "read" }}> {{ b.name }}: array<{{ LT if b.name in ("src", "out") else b.storage }}>;
{% endfor %}
{{ el.fns(ep) }}
{{ el.fns4(ep) }}
{{ io.words_fns(T) }}
{% elif ep.empty %}
{{ io.vec4_src_out(k) }}
{% else %}
{{ el.vec4_bindings(k) }}
{{ el.fns(ep) }}
{{ el.fns4(ep) }}
{% endif %}
{% set parts = ([".xy", ".zw"] if T == "f32" else [".x", ".y"]) if x64 else [""] %}

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
{% if x64 %}
  let w{{ a }}{{ b }} = src[r[{{ a }}] + q[{{ b }}]];
{% for h in range(2) %}
  let v{{ h }}{{ a }}{{ b }} = up(w{{ a }}{{ b }}{{ parts[h] }});
{% endfor %}
{% else %}
  let v0{{ a }}{{ b }} = vec4<f32>(src[r[{{ a }}] + q[{{ b }}]]);
{% endif %}
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
    let o4 = obase + (2u * i + {{ hy }}u) * {{ out_st[ax[0]] }}u + (2u * j + {{ hx }}u) * {{ out_st[ax[1]] }}u;
{% for h in range(parts | length) %}
    let vy0_{{ h }} = v{{ h }}{{ hy }}{{ hx }} * (1.0 - tx[{{ hx }}]) + v{{ h }}{{ hy }}{{ hx + 1 }} * tx[{{ hx }}];
    let vy1_{{ h }} = v{{ h }}{{ hy + 1 }}{{ hx }} * (1.0 - tx[{{ hx }}]) + v{{ h }}{{ hy + 1 }}{{ hx + 1 }} * tx[{{ hx }}];
{% if x64 %}
    let o_{{ h }} = {{ el.apply4(ep, "vy0_" ~ h ~ " * (1.0 - ty[" ~ hy ~ "]) + vy1_" ~ h ~ " * ty[" ~ hy ~ "]", "o4 * 8u + " ~ 4 * h ~ "u") }};
{% else %}
    out[o4] = vec4<{{ out_T }}>({{ el.apply4(ep, "vy0_0 * (1.0 - ty[" ~ hy ~ "]) + vy1_0 * ty[" ~ hy ~ "]", "o4 * 4u") }});
{% endif %}
{% endfor %}
{% if x64 %}
    out[o4] = {{ LT }}(pk(o_0), pk(o_1));
{% endif %}
  }
{% endfor %}
{% endfor %}
}
