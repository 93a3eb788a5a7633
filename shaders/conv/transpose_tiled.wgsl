{#-
  conv/transpose_tiled.wgsl: conv_transpose2d when the taps tile the output exactly
  (filter size == stride, no dilation, no output padding): every output pixel receives exactly
  one input pixel through one tap. Each invocation reads one input pixel's channels once and
  writes its KH x KW x TO outputs (an upsampling conv, like the segmenter's last layer).

  Context:
    T              storage type ("f32" or "f16"); accumulation in f32
    vec            input and filter read as vec4 along the input channels (NHWC input, hwoi filter,
                   I a multiple of 4)
    TO             output channels per invocation (4 when out_channels/groups % 4 == 0, else 1)
    NB, H, W       batches and input size; OH, OW output size; O output channels; OPG = O / groups;
                   I = C / groups; KH, KW window (== strides); pt, pl leading padding (cropped)
    in_sn, in_sc, in_sh, in_sw   input element strides
    f_si, f_so, f_sh, f_sw      filter element strides
    o_sn, o_sc, o_sh, o_sw      output element strides
    ep             fused epilogue (webnn_gpu/ops/_epilogue.py); channel = output channel
    wconst         None, or the constant filter as WGSL literals wconst[kh][kw][t][ci] (one group,
                   TO == O, a small filter): the weights are baked into the shader, so an invocation
                   only loads its input pixel (storage loads dominate on lavapipe)
    by_group       the workgroup's id names its output-channel block and batch (a 3-D dispatch of
                   (ceil(H * W / k.workgroup), O / TO, NB) workgroups) and every invocation runs to
                   the end (those past the last pixel store nothing): the filter and epilogue
                   indices are then uniform across the workgroup, and lavapipe loads each filter
                   vector once for the workgroup instead of once per invocation
  Bindings: input, filter (not with wconst), epilogue operands..., out.
  Workgroup: (k.workgroup, 1, 1); invocations NB * (O / TO) * H * W, input column fastest.
-#}
{% import "_lib/tile.wgsl" as tl %}
{% if by_group %}
{% if T == "f16" %}
enable f16;
{% endif %}
{{ tl.decl(0, "x", T, vec, false) }}
{{ tl.decl(1, "f", T, vec, false) }}
{{ tl.epilogue_decls(ep, 2) }}
{{ tl.decl(2 + ep.operands | length, "out", T, false, true) }}
{{ tl.epilogue_fns(ep) }}

@compute @workgroup_size({{ k.workgroup }})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  let pix0 = wid.x * {{ k.workgroup }}u + li;
  let live = pix0 < {{ H * W }}u;
  let pix = min(pix0, {{ H * W - 1 }}u);
  let iw = pix % {{ W }}u;
  let ih = pix / {{ W }}u;
  let ob = wid.y;
  let n = wid.z;
  let o0 = ob * {{ TO }}u;
  let g = o0 / {{ OPG }}u;
{% else %}
{{ tl.prologue(k, T, ["x"] if wconst else ["x", "f"], vec, ep) }}
{{ tl.decode_out(W, H, O, TO, OPG, "iw", "ih") }}
{% endif %}
  let xp = n * {{ in_sn }}u + g * {{ I * in_sc }}u + ih * {{ in_sh }}u + iw * {{ in_sw }}u;
  let fb = g * {{ I * f_si }}u + (o0 - g * {{ OPG }}u) * {{ f_so }}u;
{% for kh in range(KH) %}
{% for kw in range(KW) %}
{% for t in range(TO) %}
  var acc{{ kh }}_{{ kw }}_{{ t }} = 0.0;
{% endfor %}
{% endfor %}
{% endfor %}
{% if wconst %}
{% for c4 in range(0, I, 4) %}
  {
{% if vec %}
    let xv = vec4<f32>(x[(xp + {{ c4 }}u) / 4u]);
{% else %}
    let xv = vec4<f32>({% for c in range(4) %}{% if c4 + c < I %}f32(x[xp + {{ (c4 + c) * in_sc }}u]){% else %}0.0{% endif %}{{ ", " if not loop.last }}{% endfor %});
{% endif %}
{% for kh in range(KH) %}
{% for kw in range(KW) %}
{% for t in range(TO) %}
    acc{{ kh }}_{{ kw }}_{{ t }} = acc{{ kh }}_{{ kw }}_{{ t }} + dot(xv, vec4<f32>({% for c in range(4) %}{{ wconst[kh][kw][t][c4 + c] if c4 + c < I else "0.0" }}{{ ", " if not loop.last }}{% endfor %}));
{% endfor %}
{% endfor %}
{% endfor %}
  }
{% endfor %}
{% elif vec %}
  for (var ci = 0u; ci < {{ I }}u; ci = ci + 4u) {
    let xv = vec4<f32>(x[(xp + ci) / 4u]);
{% for kh in range(KH) %}
{% for kw in range(KW) %}
{% for t in range(TO) %}
    acc{{ kh }}_{{ kw }}_{{ t }} = acc{{ kh }}_{{ kw }}_{{ t }} + dot(xv, vec4<f32>(f[(fb + ci + {{ kh * f_sh + kw * f_sw + t * f_so }}u) / 4u]));
{% endfor %}
{% endfor %}
{% endfor %}
  }
{% else %}
  for (var ci = 0u; ci < {{ I }}u; ci = ci + 1u) {
    let xv = f32(x[xp + ci * {{ in_sc }}u]);
    let fc = fb + ci * {{ f_si }}u;
{% for kh in range(KH) %}
{% for kw in range(KW) %}
{% for t in range(TO) %}
    acc{{ kh }}_{{ kw }}_{{ t }} = acc{{ kh }}_{{ kw }}_{{ t }} + xv * f32(f[fc + {{ kh * f_sh + kw * f_sw + t * f_so }}u]);
{% endfor %}
{% endfor %}
{% endfor %}
  }
{% endif %}
{% for kh in range(KH) %}
  {
    let oh = i32(ih * {{ KH }}u + {{ kh }}u) - {{ pt }};
{% for kw in range(KW) %}
    {
      let ow = i32(iw * {{ KW }}u + {{ kw }}u) - {{ pl }};
      if ({% if by_group %}live && {% endif %}u32(oh) < {{ OH }}u && u32(ow) < {{ OW }}u) {
        let ob0 = n * {{ o_sn }}u + u32(oh) * {{ o_sh }}u + u32(ow) * {{ o_sw }}u;
{% for t in range(TO) %}
        {
          let o = ob0 + (o0 + {{ t }}u) * {{ o_sc }}u;
          out[o] = {{ T }}({{ tl.apply(ep, "acc" ~ kh ~ "_" ~ kw ~ "_" ~ t, "o", "o0 + " ~ t ~ "u") }});
        }
{% endfor %}
      }
    }
{% endfor %}
  }
{% endfor %}
}
