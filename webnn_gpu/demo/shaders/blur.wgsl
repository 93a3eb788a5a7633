{#-
  blur.wgsl: Gaussian blur of the background whose taps are weighted by (1 - mask).

  With w = 1 - mask (background weight), c the frame colour in [0, 1] and g the normalised
  1-D Gaussian (radius R, 2R + 1 taps, sum 1), the blur is computed on a grid decimated by
  F (F = 1: full resolution) in three passes:
    blur_down: for each F x F block B (clipped at the frame's edge, n pixels) of the frame
               src(j)   = (sum_B w c, sum_B w) / n        premultiplied background colour
               plain(j) = (sum_B c / n, 1)                 the block's plain mean colour
    blur_h:    tmp(x, y)     = sum_dx g(dx) src(x + dx, y)
    blur_v:    acc(x, y)     = sum_dy g(dy) tmp(x, y + dy)
               blurred(x, y) = ((acc.rgb + EPS plain.rgb) / (acc.a + EPS), acc.a)
  As the 2-D Gaussian factors, blur_h + blur_v is exactly the 2-D weighted blur
      sum_q g2(q - p) w(q) c(q) / sum_q g2(q - p) w(q)     (up to EPS)
  of the decimated image. Person pixels (mask ~ 1) have weight ~ 0, so they do not bleed
  into the background; taps outside the grid are left out (weight 0). EPS keeps the
  division defined where a neighbourhood is all person: the result there tends to the
  block's plain colour (the blend shows the original there anyway). blend.wgsl upsamples
  `blurred` to the frame (bilinear).

  Context (all required):
    frame_width, frame_height (int): W, H.
    factor (int): F >= 1;  low_width, low_height (int): ceil(W / F), ceil(H / F).
    radius (int): R;  taps (int): 2R + 1;
    weights (list of float literal text): g(-R) .. g(R), summing to 1.
    eps (float literal text): EPS (blur.py uses 1e-3).
    workgroup_size (int).
  Bindings (group 0); each entry point uses a subset ("auto" layouts):
    0 frame: array<u32>, read                 the RGB8 frame (_rgb8.wgsl)     blur_down
    1 mask: array<f32>, read                  H * W person mask in [0, 1]      blur_down
    2 src: array<vec4<f32>>, read_write       LH * LW                          blur_down -> blur_h
    3 plain: array<vec4<f32>>, read_write     LH * LW                          blur_down -> blur_v
    4 tmp: array<vec4<f32>>, read_write       LH * LW                          blur_h -> blur_v
    5 blurred: array<vec4<f32>>, read_write   LH * LW (rgb, a = weight sum)    blur_v
  Dispatch: each entry point one invocation per grid cell (LW * LH), 1-D folded into 2-D;
    workgroup (workgroup_size, 1, 1).
-#}
{%- set frame_var = "frame" %}
@group(0) @binding(0) var<storage, read> frame: array<u32>;
@group(0) @binding(1) var<storage, read> mask: array<f32>;
@group(0) @binding(2) var<storage, read_write> src: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> plain: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> tmp: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read_write> blurred: array<vec4<f32>>;

const W: u32 = {{ frame_width }}u;
const H: u32 = {{ frame_height }}u;
const F: u32 = {{ factor }}u;
const LW: u32 = {{ low_width }}u;
const LH: u32 = {{ low_height }}u;
const R: i32 = {{ radius }};
const TAPS: i32 = {{ taps }};
const EPS: f32 = {{ eps }};
var<private> WEIGHTS: array<f32, {{ taps }}> = array<f32, {{ taps }}>(
    {{ weights | join(", ") }}
);

{% include "_rgb8.wgsl" %}
{% include "_index.wgsl" %}

@compute @workgroup_size({{ workgroup_size }}, 1, 1)
fn blur_down(@builtin(global_invocation_id) gid: vec3<u32>,
             @builtin(num_workgroups) nwg: vec3<u32>) {
    let j = flat_index(gid, nwg);
    if (j >= LW * LH) { return; }
    let x0 = (j % LW) * F;
    let y0 = (j / LW) * F;
    let x1 = min(x0 + F, W);
    let y1 = min(y0 + F, H);
    var weighted = vec4<f32>(0.0);
    var colour = vec3<f32>(0.0);
    for (var y = y0; y < y1; y++) {
        for (var x = x0; x < x1; x++) {
            let p = y * W + x;
            let c = rgb8_pixel(p);
            let w = 1.0 - mask[p];
            weighted += vec4<f32>(w * c, w);
            colour += c;
        }
    }
    let n = f32((x1 - x0) * (y1 - y0));
    src[j] = weighted / n;
    plain[j] = vec4<f32>(colour / n, 1.0);
}

@compute @workgroup_size({{ workgroup_size }}, 1, 1)
fn blur_h(@builtin(global_invocation_id) gid: vec3<u32>,
          @builtin(num_workgroups) nwg: vec3<u32>) {
    let j = flat_index(gid, nwg);
    if (j >= LW * LH) { return; }
    let x = i32(j % LW);
    let row = j - u32(x);
    // Taps k with 0 <= x + k - R < LW.
    let k_lo = max(0, R - x);
    let k_hi = min(TAPS, i32(LW) - x + R);
    var acc = vec4<f32>(0.0);
    for (var k = k_lo; k < k_hi; k++) {
        acc += WEIGHTS[k] * src[row + u32(x + k - R)];
    }
    tmp[j] = acc;
}

@compute @workgroup_size({{ workgroup_size }}, 1, 1)
fn blur_v(@builtin(global_invocation_id) gid: vec3<u32>,
          @builtin(num_workgroups) nwg: vec3<u32>) {
    let j = flat_index(gid, nwg);
    if (j >= LW * LH) { return; }
    let x = j % LW;
    let y = i32(j / LW);
    let k_lo = max(0, R - y);
    let k_hi = min(TAPS, i32(LH) - y + R);
    var acc = vec4<f32>(0.0);
    for (var k = k_lo; k < k_hi; k++) {
        acc += WEIGHTS[k] * tmp[u32(y + k - R) * LW + x];
    }
    let colour = (acc.rgb + EPS * plain[j].rgb) / (acc.a + EPS);
    blurred[j] = vec4<f32>(colour, acc.a);
}
