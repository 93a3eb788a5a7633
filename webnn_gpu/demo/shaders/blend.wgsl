{#-
  blend.wgsl: out = mask * original + (1 - mask) * blurred, packed back to RGB8 words.

  `blurred` is blur.wgsl's grid (decimated by F); it is sampled at each frame pixel with
  bilinear filtering on cell centres (F = 1 reads it as is):
      sx = (x + 0.5) / F - 0.5, clamped to [0, LW - 1]; likewise sy.
  Each invocation handles 4 pixels = 12 bytes = 3 whole u32 words of the output frame, so
  no two invocations write the same word and no pixel is computed twice. Byte i is channel
  i % 3 of pixel i / 3; its value is floor(clamp(v, 0, 1) * 255 + 0.5) (round half up).
  Padding bytes past 3 * W * H are written as 0.

  Context (all required):
    frame_width (int): W;  low_width, low_height (int): LW, LH of the blurred grid;
    inv_factor (float literal text): 1 / F;
    n_bytes (int): 3 * W * H;  n_words (int): ceil(n_bytes / 4).
    workgroup_size (int).
  Bindings (group 0):
    0 frame: array<u32>, read               the original RGB8 frame (layout of _rgb8.wgsl)
    1 mask: array<f32>, read                H * W person mask in [0, 1]
    2 blurred: array<vec4<f32>>, read       LH * LW blurred colours (rgb in [0, 1]; blur.wgsl)
    3 out_frame: array<u32>, read_write     n_words words, the same layout as frame
  Dispatch: one invocation per 3 output words (ceil(n_words / 3)), 1-D folded into 2-D;
    workgroup (workgroup_size, 1, 1).
-#}
@group(0) @binding(0) var<storage, read> frame: array<u32>;
@group(0) @binding(1) var<storage, read> mask: array<f32>;
@group(0) @binding(2) var<storage, read> blurred: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> out_frame: array<u32>;

const W: u32 = {{ frame_width }}u;
const LW: u32 = {{ low_width }}u;
const LH: u32 = {{ low_height }}u;
const INV_F: f32 = {{ inv_factor }};
const N_BYTES: u32 = {{ n_bytes }}u;
const N_WORDS: u32 = {{ n_words }}u;

{% include "_index.wgsl" %}

const N_PIXELS: u32 = N_BYTES / 3u;

// The blurred grid's colour at frame pixel p (bilinear).
fn blurred_at(p: u32) -> vec3<f32> {
    let sx = clamp((f32(p % W) + 0.5) * INV_F - 0.5, 0.0, f32(LW - 1u));
    let sy = clamp((f32(p / W) + 0.5) * INV_F - 0.5, 0.0, f32(LH - 1u));
    let x0 = u32(floor(sx));
    let y0 = u32(floor(sy));
    let x1 = min(x0 + 1u, LW - 1u);
    let y1 = min(y0 + 1u, LH - 1u);
    let fx = sx - f32(x0);
    let fy = sy - f32(y0);
    let top = mix(blurred[y0 * LW + x0].rgb, blurred[y0 * LW + x1].rgb, fx);
    let bottom = mix(blurred[y1 * LW + x0].rgb, blurred[y1 * LW + x1].rgb, fx);
    return mix(top, bottom, fy);
}

// The output bytes (r, g, b) of frame pixel p whose original bytes are o; 0 past the frame.
fn blend_pixel(p: u32, o: vec3<u32>) -> vec3<u32> {
    if (p >= N_PIXELS) { return vec3<u32>(0u); }
    let m = mask[p];
    let v = m * (vec3<f32>(o) / 255.0) + (1.0 - m) * blurred_at(p);
    return vec3<u32>(clamp(v, vec3<f32>(0.0), vec3<f32>(1.0)) * 255.0 + 0.5);
}

fn byte_of(word: u32, j: u32) -> u32 {
    return (word >> (8u * j)) & 0xffu;
}

@compute @workgroup_size({{ workgroup_size }}, 1, 1)
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    // 4 pixels = 12 bytes = 3 words per invocation, so no pixel is computed twice.
    let g = flat_index(gid, nwg);
    let k = 3u * g;
    if (k >= N_WORDS) { return; }
    let w0 = frame[k];
    let w1 = select(0u, frame[min(k + 1u, N_WORDS - 1u)], k + 1u < N_WORDS);
    let w2 = select(0u, frame[min(k + 2u, N_WORDS - 1u)], k + 2u < N_WORDS);
    let p = 4u * g;
    let o0 = blend_pixel(p, vec3<u32>(byte_of(w0, 0u), byte_of(w0, 1u), byte_of(w0, 2u)));
    let o1 = blend_pixel(p + 1u, vec3<u32>(byte_of(w0, 3u), byte_of(w1, 0u), byte_of(w1, 1u)));
    let o2 = blend_pixel(p + 2u, vec3<u32>(byte_of(w1, 2u), byte_of(w1, 3u), byte_of(w2, 0u)));
    let o3 = blend_pixel(p + 3u, vec3<u32>(byte_of(w2, 1u), byte_of(w2, 2u), byte_of(w2, 3u)));
    out_frame[k] = o0.x | (o0.y << 8u) | (o0.z << 16u) | (o1.x << 24u);
    if (k + 1u < N_WORDS) {
        out_frame[k + 1u] = o1.y | (o1.z << 8u) | (o2.x << 16u) | (o2.y << 24u);
    }
    if (k + 2u < N_WORDS) {
        out_frame[k + 2u] = o2.z | (o3.x << 8u) | (o3.y << 16u) | (o3.z << 24u);
    }
}
