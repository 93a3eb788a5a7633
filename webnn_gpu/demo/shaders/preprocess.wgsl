{#-
  preprocess.wgsl: video frame (RGB8 words) -> the segmenter's input tensor, NHWC [1, MH, MW, 3].

  Resizes with bilinear filtering on half-pixel centres (the convention of OpenCV's
  INTER_LINEAR and TensorFlow's resize with half_pixel_centers=True; no antialiasing):
      sx = (x + 0.5) * W / MW - 0.5, clamped to [0, W - 1]; likewise sy.
  and normalises to float in [0, 1] (byte / 255).

  Context (all required; rendered with StrictUndefined):
    frame_width, frame_height (int): W, H of the frame.
    model_width, model_height (int): MW, MH of the model input.
    n_elements (int): MH * MW * 3;  n_words (int): words of model_input (n_elements, or
        ceil(n_elements / 2) for float16).
    scale_x, scale_y (float literal text): W / MW and H / MH.
    dtype ("float32" | "float16"): element type of the input tensor. float16 is written as
        pairs of IEEE halves packed into u32 words with pack2x16float (no shader-f16 needed;
        the byte layout is the tensor's: element 2k in the low half of word k).
    workgroup_size (int).
  Bindings (group 0):
    0 frame: array<u32>, read        the frame, ceil(3 * W * H / 4) words (_rgb8.wgsl)
    1 model_input: array<f32|u32>, read_write   MH * MW * 3 floats (float16: half as many words)
  Dispatch: one invocation per output word (float32: per element; float16: per 2 elements),
    1-D folded into 2-D (_index.wgsl); workgroup (workgroup_size, 1, 1).
-#}
{%- set frame_var = "frame" %}
@group(0) @binding(0) var<storage, read> frame: array<u32>;
{%- if dtype == "float16" %}
@group(0) @binding(1) var<storage, read_write> model_input: array<u32>;
{%- else %}
@group(0) @binding(1) var<storage, read_write> model_input: array<f32>;
{%- endif %}

const W: u32 = {{ frame_width }}u;
const H: u32 = {{ frame_height }}u;
const MW: u32 = {{ model_width }}u;
const MH: u32 = {{ model_height }}u;
const N_ELEMENTS: u32 = {{ n_elements }}u;
const N_WORDS: u32 = {{ n_words }}u;
const SCALE_X: f32 = {{ scale_x }};
const SCALE_Y: f32 = {{ scale_y }};

{% include "_rgb8.wgsl" %}
{% include "_index.wgsl" %}
{% include "_bilinear.wgsl" %}

// Element e of the NHWC tensor: channel e % 3 of model pixel e / 3, bilinear from the frame.
fn sample(e: u32) -> f32 {
    let c = e % 3u;
    let q = e / 3u;
    let x = q % MW;
    let y = q / MW;
    let t = bilinear_taps(x, y, SCALE_X, SCALE_Y, W, H);
    let v00 = f32(rgb8_byte(3u * (t.y0 * W + t.x0) + c));
    let v01 = f32(rgb8_byte(3u * (t.y0 * W + t.x1) + c));
    let v10 = f32(rgb8_byte(3u * (t.y1 * W + t.x0) + c));
    let v11 = f32(rgb8_byte(3u * (t.y1 * W + t.x1) + c));
    let top = mix(v00, v01, t.fx);
    let bottom = mix(v10, v11, t.fx);
    return mix(top, bottom, t.fy) / 255.0;
}

@compute @workgroup_size({{ workgroup_size }}, 1, 1)
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat_index(gid, nwg);
{%- if dtype == "float16" %}
    if (i >= N_WORDS) { return; }
    // An odd element count leaves the high half of the last word 0.
    let hi = select(0.0, sample(min(2u * i + 1u, N_ELEMENTS - 1u)), 2u * i + 1u < N_ELEMENTS);
    model_input[i] = pack2x16float(vec2<f32>(sample(2u * i), hi));
{%- else %}
    if (i >= N_WORDS) { return; }
    model_input[i] = sample(i);
{%- endif %}
}
