{#-
  conv/transpose.wgsl: 2-D transposed convolution as a direct gather, any layout pair and groups.
  Output pixel (oh, ow) receives input pixel (ih, iw) through filter tap (kh, kw) when
  oh + pt = ih * sh + kh * dh (same along w). Each invocation computes TO consecutive output
  channels of one group at one output pixel; input and filter are read through their strides.

  Context:
    T              storage type ("f32" or "f16"); accumulation in f32
    vec            input and filter read as vec4 along the input channels (in_sc == f_si == 1,
                   I and every offset multiples of 4)
    TO             output channels per invocation (4 when out_channels/groups % 4 == 0, else 1)
    NB, OH, OW     batches and output size; O output channels; OPG = O / groups; I = C / groups
    H, W           input size; KH, KW window; sh, sw strides; dh, dw dilations; pt, pl padding
    in_sn, in_sc, in_sh, in_sw   input element strides
    f_si, f_so, f_sh, f_sw      filter element strides (in channel, out channel within group, row, column)
    o_sn, o_sc, o_sh, o_sw      output element strides
    ep             fused epilogue (webnn_gpu/ops/_epilogue.py); channel = output channel
  Bindings: input, filter, epilogue operands..., out.
  Workgroup: (k.workgroup, 1, 1); invocations NB * (O / TO) * OH * OW, output column fastest.
-#}
{% import "_lib/tile.wgsl" as tl %}
{{ tl.prologue(k, T, ["x", "f"], vec, ep) }}
{{ tl.decode_out(OW, OH, O, TO, OPG, "ow", "oh") }}
  let xb = n * {{ in_sn }}u + g * {{ I * in_sc }}u;
  let fb = g * {{ I * f_si }}u + (o0 - g * {{ OPG }}u) * {{ f_so }}u;
{% for t in range(TO) %}
  var acc{{ t }} = 0.0;
{% endfor %}
{% if dh == 1 %}
  // Only taps with (oh + pt - kh) % sh == 0 reach this pixel: start at the first, step by sh.
  let th0 = oh + {{ pt }}u;
  for (var kh = th0 % {{ sh }}u; kh < {{ KH }}u && kh <= th0; kh = kh + {{ sh }}u) {
    let ih = (th0 - kh) / {{ sh }}u;
{% else %}
  for (var kh = 0u; kh < {{ KH }}u; kh = kh + 1u) {
    let th = i32(oh + {{ pt }}u) - i32(kh * {{ dh }}u);
    if (th < 0 || th % {{ sh }} != 0) { continue; }
    let ih = u32(th / {{ sh }});
{% endif %}
    if (ih >= {{ H }}u) { continue; }
{% if dw == 1 %}
    let tw0 = ow + {{ pl }}u;
    for (var kw = tw0 % {{ sw }}u; kw < {{ KW }}u && kw <= tw0; kw = kw + {{ sw }}u) {
      let iw = (tw0 - kw) / {{ sw }}u;
{% else %}
    for (var kw = 0u; kw < {{ KW }}u; kw = kw + 1u) {
      let tw = i32(ow + {{ pl }}u) - i32(kw * {{ dw }}u);
      if (tw < 0 || tw % {{ sw }} != 0) { continue; }
      let iw = u32(tw / {{ sw }});
{% endif %}
      if (iw >= {{ W }}u) { continue; }
      let xp = xb + ih * {{ in_sh }}u + iw * {{ in_sw }}u;
      let fp = fb + kh * {{ f_sh }}u + kw * {{ f_sw }}u;
{% if vec %}
      for (var ci = 0u; ci < {{ I }}u; ci = ci + 4u) {
        let xv = vec4<f32>(x[(xp + ci) / 4u]);
{% for t in range(TO) %}
        acc{{ t }} = acc{{ t }} + dot(xv, vec4<f32>(f[(fp + ci + {{ t * f_so }}u) / 4u]));
{% endfor %}
      }
{% else %}
      for (var ci = 0u; ci < {{ I }}u; ci = ci + 1u) {
        let xv = f32(x[xp + ci * {{ in_sc }}u]);
{% for t in range(TO) %}
        acc{{ t }} = acc{{ t }} + xv * f32(f[fp + ci * {{ f_si }}u + {{ t * f_so }}u]);
{% endfor %}
      }
{% endif %}
    }
  }
{{ tl.store_channels(ep, T, TO, o_sn, o_sh, o_sw, o_sc) }}
}
