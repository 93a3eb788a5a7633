{#-
  key_mask.wgsl: a stand-in segmenter for tests and benchmarks without a model (a colour key).

  Reads the model input tensor NHWC [1, MH, MW, 3] (values in [0, 1]) and writes a mask
  [1, MH, MW, 1]: mask = clamp((r - max(g, b) - 0.2) * 5, 0, 1), i.e. clearly red pixels are
  "person". It has exactly the segmenter's tensor interface, so the whole video pipeline
  (upload, preprocess, mask, blur, blend, readback) runs and is checked without WebNN.

  Context (all required):
    n_pixels (int): MH * MW;  n_words (int): words of the mask (n_pixels, or
        ceil(n_pixels / 2) for float16);
    dtype ("float32" | "float16"): element type of both tensors; float16 packed in pairs
        (pack2x16float / unpack2x16float, element 2k in the low half of word k).
    workgroup_size (int).
  Bindings (group 0):
    0 model_input: array<f32|u32>, read       MH * MW * 3 values
    1 model_output: array<f32|u32>, read_write  MH * MW values
  Dispatch: one invocation per output word, 1-D folded into 2-D; workgroup (workgroup_size, 1, 1).
-#}
{%- if dtype == "float16" %}
@group(0) @binding(0) var<storage, read> model_input: array<u32>;
@group(0) @binding(1) var<storage, read_write> model_output: array<u32>;
{%- else %}
@group(0) @binding(0) var<storage, read> model_input: array<f32>;
@group(0) @binding(1) var<storage, read_write> model_output: array<f32>;
{%- endif %}

const N_PIXELS: u32 = {{ n_pixels }}u;
const N_WORDS: u32 = {{ n_words }}u;

{% include "_index.wgsl" %}

fn load(i: u32) -> f32 {
{%- if dtype == "float16" %}
    let pair = unpack2x16float(model_input[i >> 1u]);
    return select(pair.x, pair.y, (i & 1u) == 1u);
{%- else %}
    return model_input[i];
{%- endif %}
}

fn key(q: u32) -> f32 {
    if (q >= N_PIXELS) { return 0.0; }
    let r = load(3u * q);
    let g = load(3u * q + 1u);
    let b = load(3u * q + 2u);
    return clamp((r - max(g, b) - 0.2) * 5.0, 0.0, 1.0);
}

@compute @workgroup_size({{ workgroup_size }}, 1, 1)
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat_index(gid, nwg);
    if (i >= N_WORDS) { return; }
{%- if dtype == "float16" %}
    model_output[i] = pack2x16float(vec2<f32>(key(2u * i), key(2u * i + 1u)));
{%- else %}
    model_output[i] = key(i);
{%- endif %}
}
