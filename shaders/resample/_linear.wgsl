{#-
  resample/_linear.wgsl: the bilinear body shared by resample2d.wgsl and resample2d_vec4.wgsl.
    blend(ax, sizes_in, sizes_out, in_st, pre, post): statements ending in `let lin = ...`, the
    interpolated value at output coordinates c{ax[0]}, c{ax[1]} from the input rows at `base`
    (coord() of resample/_coords.wgsl gives the source coordinates); an input element at
    offset E is read as `pre E post` (an f32 or vec4<f32> expression).
-#}
{% macro blend(ax, sizes_in, sizes_out, in_st, pre, post) %}
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
  let v00 = {{ pre }}r0 + x0 * {{ in_st[ax[1]] }}u{{ post }};
  let v01 = {{ pre }}r0 + x1 * {{ in_st[ax[1]] }}u{{ post }};
  let v10 = {{ pre }}r1 + x0 * {{ in_st[ax[1]] }}u{{ post }};
  let v11 = {{ pre }}r1 + x1 * {{ in_st[ax[1]] }}u{{ post }};
  let vy0 = v00 * (1.0 - tx) + v01 * tx;
  let vy1 = v10 * (1.0 - tx) + v11 * tx;
  let lin = vy0 * (1.0 - ty) + vy1 * ty;
{% endmacro %}
