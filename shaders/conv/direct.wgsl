{#-
  conv/direct.wgsl: direct 2-D convolution for any layout pair and any groups. Each invocation
  computes TO consecutive output channels (of one group) at one output pixel, looping over the
  group's input channels and the filter window; input and filter are read through their
  element strides, so no re-layout is needed. The general fallback (WEBNN_GPU_FORCE_CONV=direct).

  Context:
    T              storage type ("f32" or "f16"); accumulation in f32
    TO             output channels per invocation (4 when out_channels/groups % 4 == 0, else 1)
    NB, OH, OW     batches and output size; O output channels; OPG = O / groups; I = C / groups
    H, W           input size; KH, KW window; sh, sw strides; dh, dw dilations; pt, pl padding
    in_sn, in_sc, in_sh, in_sw   input element strides (batch, channel, row, column)
    f_so, f_si, f_sh, f_sw      filter element strides (out channel, in channel, row, column)
    o_sn, o_sc, o_sh, o_sw      output element strides
    ep             fused epilogue (webnn_gpu/ops/_epilogue.py); channel = output channel
  Bindings: input, filter, epilogue operands..., out.
  Workgroup: (k.workgroup, 1, 1); invocations NB * (O / TO) * OH * OW, output column fastest.
-#}
{% import "_lib/tile.wgsl" as tl %}
{{ tl.prologue(k, T, ["x", "f"], false, ep) }}
{{ tl.decode_out(OW, OH, O, TO, OPG, "ow", "oh") }}
  let xb = n * {{ in_sn }}u + g * {{ I * in_sc }}u;
  let fb = o0 * {{ f_so }}u;
  let ih0 = i32(oh * {{ sh }}u) - {{ pt }};
  let iw0 = i32(ow * {{ sw }}u) - {{ pl }};
{% for t in range(TO) %}
  var acc{{ t }} = 0.0;
{% endfor %}
  for (var kh = 0u; kh < {{ KH }}u; kh = kh + 1u) {
    let ih = ih0 + i32(kh * {{ dh }}u);
    if (u32(ih) >= {{ H }}u) { continue; }
    for (var kw = 0u; kw < {{ KW }}u; kw = kw + 1u) {
      let iw = iw0 + i32(kw * {{ dw }}u);
      if (u32(iw) >= {{ W }}u) { continue; }
      let xp = xb + u32(ih) * {{ in_sh }}u + u32(iw) * {{ in_sw }}u;
      let fp = fb + kh * {{ f_sh }}u + kw * {{ f_sw }}u;
      for (var ci = 0u; ci < {{ I }}u; ci = ci + 1u) {
        let xv = f32(x[xp + ci * {{ in_sc }}u]);
{% for t in range(TO) %}
        acc{{ t }} = acc{{ t }} + xv * f32(f[fp + ci * {{ f_si }}u + {{ t * f_so }}u]);
{% endfor %}
      }
    }
  }
{{ tl.store_channels(ep, T, TO, o_sn, o_sh, o_sw, o_sc) }}
}
