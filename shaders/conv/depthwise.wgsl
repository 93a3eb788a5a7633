{#-
  conv/depthwise.wgsl: depthwise conv2d (groups == input channels == output channels) on NHWC.
  Each invocation computes 4 channels (one vec4) at TW consecutive output columns of one row.
  Per filter row it loads, once, the input columns the TW outputs share (offsets `seg` from
  ow0 * sw - pl) and reuses them for every tap.

  Context:
    T            storage type ("f32" or "f16"); accumulation in f32
    vec          C % 4 == 0: input, filter and output read/written as vec4 (else scalar, clamped)
    C, C4        channels, ceil(C / 4); NB, H, W input; OH, OW output; TW, OWB = ceil(OW / TW)
    KH, KW       window; sh, sw strides; dh, dw dilations; pt, pl leading padding
    seg          sorted distinct offsets p * sw + kw * dw (p < TW, kw < KW) of the loaded columns
    order        "c": consecutive invocations take consecutive channel blocks, "w": column blocks
    ep           fused epilogue (webnn_gpu/ops/_epilogue.py); channel = c
  Bindings: input (NHWC), filter ([KH, KW, C]), epilogue operands..., out (NHWC).
  Workgroup: (k.workgroup, 1, 1); invocations NB * OH * OWB * C4.
-#}
{% import "_lib/tile.wgsl" as tl %}
{% if T == "f16" %}
enable f16;
{% endif %}
{{ tl.decl(0, "x", T, vec, false) }}
{{ tl.decl(1, "f", T, vec, false) }}
{{ tl.epilogue_decls(ep, 2) }}
{{ tl.decl(2 + ep.operands | length, "out", T, vec, true) }}
{{ tl.epilogue_fns(ep) }}

{% if vec %}
fn ld_x(i: u32, cb: u32) -> vec4<f32> { return vec4<f32>(x[i * {{ C4 }}u + cb]); }
fn ld_f(i: u32, cb: u32) -> vec4<f32> { return vec4<f32>(f[i * {{ C4 }}u + cb]); }
{% else %}
fn ld_x(i: u32, cb: u32) -> vec4<f32> {
  let b = i * {{ C }}u;
  return vec4<f32>({% for c in range(4) %}f32(x[b + min(cb * 4u + {{ c }}u, {{ C - 1 }}u)]){{ ", " if not loop.last }}{% endfor %});
}
fn ld_f(i: u32, cb: u32) -> vec4<f32> {
  let b = i * {{ C }}u;
  return vec4<f32>({% for c in range(4) %}f32(f[b + min(cb * 4u + {{ c }}u, {{ C - 1 }}u)]){{ ", " if not loop.last }}{% endfor %});
}
{% endif %}

@compute @workgroup_size({{ k.workgroup }})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let idx = gid.x + gid.y * nwg.x * {{ k.workgroup }}u;
  if (idx >= {{ k.n }}u) { return; }
{% if order == "c" %}
  let cb = idx % {{ C4 }}u;
  var r = idx / {{ C4 }}u;
  let wb = r % {{ OWB }}u; r = r / {{ OWB }}u;
{% else %}
  let wb = idx % {{ OWB }}u;
  var r = idx / {{ OWB }}u;
  let cb = r % {{ C4 }}u; r = r / {{ C4 }}u;
{% endif %}
  let oh = r % {{ OH }}u;
  let n = r / {{ OH }}u;
  let ow0 = wb * {{ TW }}u;
  let iw0 = i32(ow0 * {{ sw }}u) - {{ pl }};
{% for p in range(TW) %}
  var acc{{ p }} = vec4<f32>(0.0);
{% endfor %}
  for (var kh = 0u; kh < {{ KH }}u; kh = kh + 1u) {
    let ih = i32(oh * {{ sh }}u) - {{ pt }} + i32(kh * {{ dh }}u);
    if (u32(ih) >= {{ H }}u) { continue; }
    let row = (n * {{ H }}u + u32(ih)) * {{ W }}u;
{% for j in seg %}
    let iw{{ j }} = iw0 + {{ j }};
    let x{{ j }} = select(vec4<f32>(0.0), ld_x(row + u32(max(iw{{ j }}, 0)), cb), u32(iw{{ j }}) < {{ W }}u);
{% endfor %}
{% for kw in range(KW) %}
    let w{{ kw }} = ld_f(kh * {{ KW }}u + {{ kw }}u, cb);
{% for p in range(TW) %}
    acc{{ p }} = acc{{ p }} + x{{ p * sw + kw * dw }} * w{{ kw }};
{% endfor %}
{% endfor %}
  }
{% for p in range(TW) %}
  if (ow0 + {{ p }}u < {{ OW }}u) {
    let pix = (n * {{ OH }}u + oh) * {{ OW }}u + ow0 + {{ p }}u;
    let v = acc{{ p }};
{% if vec %}
    let o = pix * {{ C }}u + cb * 4u;
    out[pix * {{ C4 }}u + cb] = vec4<{{ T }}>(vec4<f32>({% for c in range(4) %}{{ tl.apply(ep, "v." ~ "xyzw"[c], "o + " ~ c ~ "u", "cb * 4u + " ~ c ~ "u") }}{{ ", " if not loop.last }}{% endfor %}));
{% else %}
{% for c in range(4) %}
    if (cb * 4u + {{ c }}u < {{ C }}u) {
      let o = pix * {{ C }}u + cb * 4u + {{ c }}u;
      out[o] = {{ T }}({{ tl.apply(ep, "v." ~ "xyzw"[c], "o", "cb * 4u + " ~ c ~ "u") }});
    }
{% endfor %}
{% endif %}
  }
{% endfor %}
}
