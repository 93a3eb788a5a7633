{#-
  pool/pool2d_vec4.wgsl: pool/pool2d.wgsl for float32 NHWC data whose channels are a multiple of
  4: one invocation pools four neighbouring channels of one output pixel, loading vec4s (the
  window's coordinates, bounds tests and position count serve all four).

  Output element (n, oh, ow, c..c+3) reads input rows ih = oh * SH - PT + kh * DH and columns
  iw = ow * SW - PL + kw * DW for kh < WH, kw < WW; positions outside the input are skipped (the
  average divides by the positions inside; a window entirely in the padding gives 0 for the
  average and L2, -inf for max). max propagates NaN lane by lane (the first NaN wins), as
  pool2d.wgsl's comb does.
  Context:
    kind         "avg" | "l2" | "max"
    out_strides  row-major strides of [N, OH, OW, C / 4] (coordinates c0..c3)
    in_st        {"n","h","w"} -> input stride of that dimension in vec4 units
    H, W, WH, WW, SH, SW, DH, DW, PT, PL
    ep           fused epilogue (webnn_gpu/ops/_epilogue.py), applied to each stored value
  Bindings: src, epilogue operands..., out (src and out as arrays of vec4<f32>).
  Workgroup: (k.workgroup, 1, 1); 2-D folded dispatch; guards idx < k.n (output vec4s).
-#}
{% import "_lib/io.wgsl" as io %}
{% import "pool/_window.wgsl" as pw %}
{% import "_lib/index.wgsl" as ix %}
{% import "_lib/epilogue.wgsl" as el %}
{% if ep.empty %}
{{ io.vec4_src_out(k) }}
{% else %}
{{ el.vec4_bindings(k) }}
{{ el.fns(ep) }}
{{ el.fns4(ep) }}
{% endif %}

{% if kind == "max" %}
fn is_nan4(x: vec4<f32>) -> vec4<bool> {
  return (bitcast<vec4<u32>>(x) & vec4<u32>(0x7fffffffu)) > vec4<u32>(0x7f800000u);
}

fn comb4(a: vec4<f32>, b: vec4<f32>) -> vec4<f32> {
  return select(select(max(a, b), b, is_nan4(b)), a, is_nan4(a));
}
{% endif %}

{{ pw.inside_fn() }}

{{ io.main_header(k) }}
{{ ix.coords("c", "idx", out_strides) }}
  let base = c0 * {{ in_st.n }}u + c3;
  let h0 = i32(c1 * {{ SH }}u) - {{ PT }};
  let w0 = i32(c2 * {{ SW }}u) - {{ PL }};
{% if kind == "max" %}
  var acc = vec4<f32>(bitcast<f32>(0xff800000u));
{% else %}
  var acc = vec4<f32>(0.0);
{% endif %}
  for (var kh = 0u; kh < {{ WH }}u; kh = kh + 1u) {
    let ih = h0 + i32(kh * {{ DH }}u);
    if (ih < 0 || ih >= {{ H }}) { continue; }
    for (var kw = 0u; kw < {{ WW }}u; kw = kw + 1u) {
      let iw = w0 + i32(kw * {{ DW }}u);
      if (iw < 0 || iw >= {{ W }}) { continue; }
      let x = src[base + u32(ih) * {{ in_st.h }}u + u32(iw) * {{ in_st.w }}u];
{% if kind == "max" %}
      acc = comb4(acc, x);
{% elif kind == "l2" %}
      acc = acc + x * x;
{% else %}
      acc = acc + x;
{% endif %}
    }
  }
  let count = inside(h0, {{ DH }}u, {{ WH }}u, {{ H }}) * inside(w0, {{ DW }}u, {{ WW }}u, {{ W }});
{% if kind == "avg" %}
  let v = select(vec4<f32>(0.0), acc / f32(count), count > 0u);
{% elif kind == "l2" %}
  let v = sqrt(acc);
{% else %}
  let v = select(acc, vec4<f32>(bitcast<f32>(0xff800000u)), count == 0u);
{% endif %}
  out[idx] = {{ el.apply4(ep, "v", "idx * 4u") }};
}
