{#-
  conv/depthwise.wgsl: depthwise conv2d (groups == input channels, output channels a multiple
  M of them: output channel o reads input channel o / M) on NHWC.
  Each invocation computes 4 output channels (one vec4) for a TH x TW block of output pixels. The
  KH x KW filter taps are loaded once into registers; each input row the block touches is
  loaded once (only the columns `seg` that some output uses) and reused for every output row
  and tap that reads it. Out-of-image rows and columns read as zero (padding).
  The sizes and the leading padding come from a u32 parameter buffer, so layers that differ
  only in their image size, channels or padding share one pipeline (cold start); the unrolled
  structure (window, strides, dilations, block) is baked in.

  Context:
    T            storage type ("f32" or "f16"); accumulation in f32
    vec          C % 4 == 0 and M == 1: input, filter and output read/written as vec4 (else
                 scalar, clamped to the last channel)
    M            channel multiplier (output channels per input channel)
    TH, TW       output rows and columns per invocation
    fdiv         invocations < 2^20: the index is split with f32 divisions (exact there)
    KH, KW       window; sh, sw strides; dh, dw dilations
    rows         [(r, [(t, kh), ...])]: input row r (from oh0 * sh - pt) feeds output row t via tap kh
    row_loop     the rows are read in a loop, each output row's tap row picked by selects
                 (rather than unrolled: LLVM's compile time grows faster than the loads)
    seg          sorted distinct column offsets p * sw + kw * dw (p < TW, kw < KW) from ow0 * sw - pl
    ep           fused epilogue (webnn_gpu/ops/_epilogue.py); channel = c; operands read at the
                 channel (a bias) are loaded once per invocation (q0..q3)
    f_uniform    0, or the filter is a float32 constant in a uniform buffer of this many vec4s
                 (zero-padded; vec only)
    pool         (vec only) also write each invocation's per-channel sum of its outputs to
                 `pool` ([OHB * OWB * NB, C4] vec4<f32>): a following global average pool
                 (fuse_conv_pool) then reduces these partials instead of re-reading the output
  Parameters (binding `prm`, u32): 0 invocations  1 C4 = ceil(C / 4)  2 C (output channels)
    3 OWB = ceil(OW / TW)  4 OHB = ceil(OH / TH)  5 H  6 W  7 OH  8 OW  9 pt  10 pl (leading
    padding)  11 CI (input channels, C / M)  12 R (row_loop's iterations: the span of `rows`, a
    runtime value so that LLVM does not unroll the loop)
  Bindings: input (NHWC, CI channels), filter ([KH, KW, C]), epilogue operands..., prm, out (NHWC),
    pool (pool only).
  Workgroup: (k.workgroup, 1, 1); invocations NB * OHB * OWB * C4, channel block fastest.
-#}
{% import "_lib/tile.wgsl" as tl %}
{% import "conv/_rows.wgsl" as rw %}
{% if T == "f16" %}
enable f16;
{% endif %}
{{ tl.decl(0, "x", T, vec, false) }}
{{ tl.weights(1, "f", T, vec, f_uniform) }}
{{ tl.epilogue_decls(ep, 2) }}
@group(0) @binding({{ 2 + ep.operands | length }}) var<storage, read> prm: array<u32>;
{{ tl.decl(3 + ep.operands | length, "out", T, vec, true) }}
{% if pool %}
@group(0) @binding({{ 4 + ep.operands | length }}) var<storage, read_write> pool: array<vec4<f32>>;
{% endif %}
{{ tl.epilogue_fns(ep) }}

{% if vec %}
fn ld_x(i: u32, cb: u32, C4: u32, C: u32) -> vec4<f32> { return vec4<f32>(x[i * C4 + cb]); }
fn ld_f(i: u32, cb: u32, C4: u32, C: u32) -> vec4<f32> { return vec4<f32>(f[i * C4 + cb]); }
{% else %}
fn ld_x(i: u32, cb: u32, CI: u32, C: u32) -> vec4<f32> {
  let b = i * CI;
  return vec4<f32>({% for c in range(4) %}f32(x[b + min(cb * 4u + {{ c }}u, C - 1u){{ " / " ~ M ~ "u" if M > 1 }}]){{ ", " if not loop.last }}{% endfor %});
}
fn ld_f(i: u32, cb: u32, C4: u32, C: u32) -> vec4<f32> {
  let b = i * C;
  return vec4<f32>({% for c in range(4) %}f32(f[b + min(cb * 4u + {{ c }}u, C - 1u)]){{ ", " if not loop.last }}{% endfor %});
}
{% endif %}

@compute @workgroup_size({{ k.workgroup }})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let idx = gid.x + gid.y * nwg.x * {{ k.workgroup }}u;
  if (idx >= prm[0]) { return; }
  let C4 = prm[1];
  let C = prm[2];
  let H = prm[5];
  let W = prm[6];
  let OH = prm[7];
  let OW = prm[8];
  let OWB = prm[3];
  let OHB = prm[4];
{% if vec %}
  let CI = C4;
{% else %}
  let CI = prm[11];
{% endif %}
{% if fdiv %}
  // Quotients through f32, exact for dividends below 2^20 (fdiv): x86 has no vector integer
  // division, so runtime divisors would otherwise cost a scalar division per lane.
  let r0 = u32((f32(idx) + 0.5) / f32(C4));
  let r1 = u32((f32(r0) + 0.5) / f32(OWB));
  let n = u32((f32(r1) + 0.5) / f32(OHB));
{% else %}
  let r0 = idx / C4;
  let r1 = r0 / OWB;
  let n = r1 / OHB;
{% endif %}
  let cb = idx - r0 * C4;
  let wb = r0 - r1 * OWB;
  let hb = r1 - n * OHB;
  let oh0 = hb * {{ TH }}u;
  let ow0 = wb * {{ TW }}u;
  let ih0 = i32(oh0 * {{ sh }}u) - i32(prm[9]);
  let iw0 = i32(ow0 * {{ sw }}u) - i32(prm[10]);
{% for kh in range(KH) %}
{% for kw in range(KW) %}
  let w{{ kh }}_{{ kw }} = ld_f({{ kh * KW + kw }}u, cb, C4, C);
{% endfor %}
{% endfor %}
{% for j in seg %}
  let cx{{ j }} = iw0 + {{ j }};
  let cok{{ j }} = u32(cx{{ j }}) < W;
  let ci{{ j }} = select(0u, u32(cx{{ j }}), cok{{ j }});
{% endfor %}
{% for t in range(TH) %}
{% for p in range(TW) %}
  var acc{{ t }}_{{ p }} = vec4<f32>(0.0);
{% endfor %}
{% endfor %}
{% if row_loop %}
  // the block's input rows in a loop (prm[12] iterations, the rows' span): each row's columns are
  // loaded once and used by every output row t whose window reaches it, through tap row
  // (r - t sh) / dh (picked by selects), so the text has one row's loads, not every row's
  let R = prm[12];
  for (var r = 0u; r < R; r = r + 1u) {
    let y = ih0 + i32(r);
    let rok = u32(y) < H;
    let row = (n * H + select(0u, u32(y), rok)) * W;
{% for j in seg %}
    let x{{ j }} = select(vec4<f32>(0.0), ld_x(row + ci{{ j }}, cb, CI, C), rok && cok{{ j }});
{% endfor %}
{% for t in range(TH) %}
{{ rw.row_taps("acc", t, KH, KW, TW, sh, sw, dh, dw) }}
{% endfor %}
  }
{% else %}
{% for r, uses in rows %}
  {
    let y = ih0 + {{ r }};
    let rok = u32(y) < H;
    let row = (n * H + select(0u, u32(y), rok)) * W;
{% for j in seg %}
    let x{{ j }} = select(vec4<f32>(0.0), ld_x(row + ci{{ j }}, cb, CI, C), rok && cok{{ j }});
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
{% endif %}
{% for c in range(4) %}
  {{ tl.hoist_q(ep, "q" ~ c, "min(cb * 4u + " ~ c ~ "u, C - 1u)") }}
{% endfor %}
{% if pool %}
  var psum = vec4<f32>(0.0);
{% endif %}
{% for t in range(TH) %}
{% for p in range(TW) %}
  if (oh0 + {{ t }}u < OH && ow0 + {{ p }}u < OW) {
    let pix = (n * OH + oh0 + {{ t }}u) * OW + ow0 + {{ p }}u;
    let v = acc{{ t }}_{{ p }};
{% if vec %}
    let o = pix * C + cb * 4u;
    let ov = vec4<f32>({% for c in range(4) %}{{ tl.apply(ep, "v." ~ "xyzw"[c], "o + " ~ c ~ "u", "cb * 4u + " ~ c ~ "u", "q" ~ c) }}{{ ", " if not loop.last }}{% endfor %});
    out[pix * C4 + cb] = vec4<{{ T }}>(ov);
{% if pool %}
    psum = psum + ov;
{% endif %}
{% else %}
{% for c in range(4) %}
    if (cb * 4u + {{ c }}u < C) {
      let o = pix * C + cb * 4u + {{ c }}u;
      out[o] = {{ T }}({{ tl.apply(ep, "v." ~ "xyzw"[c], "o", "cb * 4u + " ~ c ~ "u", "q" ~ c) }});
    }
{% endfor %}
{% endif %}
  }
{% endfor %}
{% endfor %}
{% if pool %}
  // this block's sum per channel: row r0 = (n * OHB + hb) * OWB + wb of the [blocks, C4] partials
  pool[r0 * C4 + cb] = psum;
{% endif %}
}
