{#-
  _bilinear.wgsl: the four taps and weights of a half-pixel-centred bilinear sample.

  bilinear_taps(x, y, scale_x, scale_y, src_w, src_h): for destination pixel (x, y) and
  source/destination scales, the source coordinates x0 <= x1 and y0 <= y1 (clamped to the
  src_w x src_h image) and the fractions fx, fy; the sample is
  mix(mix(v(x0,y0), v(x1,y0), fx), mix(v(x0,y1), v(x1,y1), fx), fy).
-#}
struct Taps {
    x0: u32,
    x1: u32,
    y0: u32,
    y1: u32,
    fx: f32,
    fy: f32,
}

fn bilinear_taps(x: u32, y: u32, scale_x: f32, scale_y: f32, src_w: u32, src_h: u32) -> Taps {
    let sx = clamp((f32(x) + 0.5) * scale_x - 0.5, 0.0, f32(src_w - 1u));
    let sy = clamp((f32(y) + 0.5) * scale_y - 0.5, 0.0, f32(src_h - 1u));
    let x0 = u32(floor(sx));
    let y0 = u32(floor(sy));
    return Taps(x0, min(x0 + 1u, src_w - 1u), y0, min(y0 + 1u, src_h - 1u), sx - f32(x0), sy - f32(y0));
}
