{#-
  resample/_coords.wgsl: source coordinates of resample2d's half-pixel centers, shared by
  resample2d.wgsl and resample2d_vec4.wgsl (included; uses their `mode` and `exact`; the
  bilinear body that uses coord() is resample/_linear.wgsl).
    nearest(o, in, out): ceil(u - 0.5) clamped to [0, in - 1], in exact integer arithmetic
    coord(o, in, out):   u = (o + 0.5) * in / out - 0.5 clamped to [0, in - 1], for linear
-#}
{% if mode == "nearest-neighbor" %}
fn nearest(o: u32, n_in: i32, n_out: i32) -> u32 {
{% if exact %}
  // ceil(((2o + 1) * in - 2 * out) / (2 * out)); i32 division truncates, i.e. rounds up when negative
  let num = (2 * i32(o) + 1) * n_in - 2 * n_out;
  let den = 2 * n_out;
  let q = select((num + den - 1) / den, num / den, num < 0);
{% else %}
  let u = clamp((f32(o) + 0.5) * f32(n_in) / f32(n_out) - 0.5, 0.0, f32(n_in - 1));
  let q = i32(ceil(u - 0.5));
{% endif %}
  return u32(clamp(q, 0, n_in - 1));
}
{% else %}
fn coord(o: u32, n_in: i32, n_out: i32) -> f32 {
{% if exact %}
  let u = f32((2 * i32(o) + 1) * n_in - n_out) / f32(2 * n_out);
{% else %}
  let u = (f32(o) + 0.5) * f32(n_in) / f32(n_out) - 0.5;
{% endif %}
  return clamp(u, 0.0, f32(n_in - 1));
}
{% endif %}
