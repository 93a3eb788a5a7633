{#-
  upsample_mask.wgsl: the segmenter's mask [1, MH, MW, 1] -> a frame-sized float mask [H, W].

  Bilinear on half-pixel centres (the same convention as preprocess.wgsl):
      sx = (x + 0.5) * MW / W - 0.5, clamped to [0, MW - 1]; likewise sy,
  then clamped to [0, 1] (1 = person, 0 = background).

  Context (all required):
    frame_width, frame_height (int): W, H.
    mask_width, mask_height (int): MW, MH of the model output.
    scale_x, scale_y (float literal text): MW / W and MH / H.
    dtype ("float32" | "float16"): element type of the mask tensor; float16 is read as pairs
        of halves packed in u32 words (unpack2x16float; element 2k is the low half of word k).
    workgroup_size (int).
  Bindings (group 0):
    0 model_output: array<f32|u32>, read       MH * MW floats (float16: ceil(MH * MW / 2) words)
    1 mask: array<f32>, read_write             H * W floats in [0, 1], row-major
  Dispatch: one invocation per frame pixel, 1-D folded into 2-D; workgroup (workgroup_size, 1, 1).
-#}
{%- if dtype == "float16" %}
@group(0) @binding(0) var<storage, read> model_output: array<u32>;
{%- else %}
@group(0) @binding(0) var<storage, read> model_output: array<f32>;
{%- endif %}
@group(0) @binding(1) var<storage, read_write> mask: array<f32>;

const W: u32 = {{ frame_width }}u;
const H: u32 = {{ frame_height }}u;
const MW: u32 = {{ mask_width }}u;
const MH: u32 = {{ mask_height }}u;
const SCALE_X: f32 = {{ scale_x }};
const SCALE_Y: f32 = {{ scale_y }};

{% include "_index.wgsl" %}
{% include "_bilinear.wgsl" %}

fn load(i: u32) -> f32 {
{%- if dtype == "float16" %}
    let pair = unpack2x16float(model_output[i >> 1u]);
    return select(pair.x, pair.y, (i & 1u) == 1u);
{%- else %}
    return model_output[i];
{%- endif %}
}

@compute @workgroup_size({{ workgroup_size }}, 1, 1)
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    let p = flat_index(gid, nwg);
    if (p >= W * H) { return; }
    let x = p % W;
    let y = p / W;
    let t = bilinear_taps(x, y, SCALE_X, SCALE_Y, MW, MH);
    let top = mix(load(t.y0 * MW + t.x0), load(t.y0 * MW + t.x1), t.fx);
    let bottom = mix(load(t.y1 * MW + t.x0), load(t.y1 * MW + t.x1), t.fx);
    mask[p] = clamp(mix(top, bottom, t.fy), 0.0, 1.0);
}
