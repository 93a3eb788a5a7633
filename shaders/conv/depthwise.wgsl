{#-
  conv/depthwise.wgsl: depthwise conv2d (groups == input channels == output channels) on NHWC.
  Each invocation computes 4 channels (one vec4) for a TH x TW block of output pixels. The
  KH x KW filter taps are loaded once into registers; each input row the block touches is
  loaded once (only the columns `seg` that some output uses) and reused for every output row
  and tap that reads it. Out-of-image rows and columns read as zero (padding).

  Context:
    T            storage type ("f32" or "f16"); accumulation in f32
    vec          C % 4 == 0: input, filter and output read/written as vec4 (else scalar, clamped)
    C, C4        channels, ceil(C / 4); H, W input; OH, OW output
    TH, TW       output rows and columns per invocation; OHB, OWB = ceil(OH / TH), ceil(OW / TW)
    KH, KW       window; sh, sw strides; dh, dw dilations; pt, pl leading padding
    rows         [(r, [(t, kh), ...])]: input row r (from oh0 * sh - pt) feeds output row t via tap kh
    seg          sorted distinct column offsets p * sw + kw * dw (p < TW, kw < KW) from ow0 * sw - pl
    ep           fused epilogue (webnn_gpu/ops/_epilogue.py); channel = c
  Bindings: input (NHWC), filter ([KH, KW, C]), epilogue operands..., out (NHWC).
  Workgroup: (k.workgroup, 1, 1); invocations NB * OHB * OWB * C4, channel block fastest.
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
  let cb = idx % {{ C4 }}u;
  var r = idx / {{ C4 }}u;
  let wb = r % {{ OWB }}u; r = r / {{ OWB }}u;
  let hb = r % {{ OHB }}u;
  let n = r / {{ OHB }}u;
  let oh0 = hb * {{ TH }}u;
  let ow0 = wb * {{ TW }}u;
  let ih0 = i32(oh0 * {{ sh }}u) - {{ pt }};
  let iw0 = i32(ow0 * {{ sw }}u) - {{ pl }};
{% for kh in range(KH) %}
{% for kw in range(KW) %}
  let w{{ kh }}_{{ kw }} = ld_f({{ kh * KW + kw }}u, cb);
{% endfor %}
{% endfor %}
{% for j in seg %}
  let cx{{ j }} = iw0 + {{ j }};
  let cok{{ j }} = u32(cx{{ j }}) < {{ W }}u;
  let ci{{ j }} = u32(clamp(cx{{ j }}, 0, {{ W - 1 }}));
{% endfor %}
{% for t in range(TH) %}
{% for p in range(TW) %}
  var acc{{ t }}_{{ p }} = vec4<f32>(0.0);
{% endfor %}
{% endfor %}
{% for r, uses in rows %}
  {
    let y = ih0 + {{ r }};
    let rok = u32(y) < {{ H }}u;
    let row = (n * {{ H }}u + u32(clamp(y, 0, {{ H - 1 }}))) * {{ W }}u;
{% for j in seg %}
    let x{{ j }} = select(vec4<f32>(0.0), ld_x(row + ci{{ j }}, cb), rok && cok{{ j }});
{% endfor %}
{% for t, kh in uses %}
{% for kw in range(KW) %}
{% for p in range(TW) %}
    acc{{ t }}_{{ p }} = acc{{ t }}_{{ p }} + x{{ p * sw + kw * dw }} * w{{ kh }}_{{ kw }};
{% endfor %}
{% endfor %}
{% endfor %}
  }
{% endfor %}
{% for t in range(TH) %}
{% for p in range(TW) %}
  if (oh0 + {{ t }}u < {{ OH }}u && ow0 + {{ p }}u < {{ OW }}u) {
    let pix = (n * {{ OH }}u + oh0 + {{ t }}u) * {{ OW }}u + ow0 + {{ p }}u;
    let v = acc{{ t }}_{{ p }};
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
{% endfor %}
}
