{#-
  conv/depthwise.wgsl: depthwise conv2d (groups == input channels, output channels a multiple
  M of them: output channel o reads input channel o / M) on NHWC.
  Each invocation computes 4 NH output channels (NH vec4s) for a strip of up to TH output rows
  (a runtime value) by TW output columns. It walks down the strip one output row per loop
  iteration, loading only the input rows that enter the window (sh of them, fewer when a tap
  row never reads some) and adding each into the A rows of accumulators still open: slot m
  holds output row i - m at iteration i, and tap row kh feeds slot floor(kh dh / sh) from input
  row kh dh mod sh of the iteration. The oldest slot is complete at the end of the iteration:
  it is stored, and the slots move down by one. So every input value is loaded once per strip
  (and the taps once per invocation), and the loop body holds one row step, whatever TH is.
  Out-of-image rows and columns read as zero (padding): their loads sit in a branch, which the
  driver's per-lane load loop passes by for masked lanes, and the loop starts past the leading
  iterations whose rows are all above the image (at most A - 1 of them, which store nothing).
  The sizes, TH and the leading padding come from a u32 parameter buffer, so layers that differ
  only in their image size (past TW columns), channels, padding or strip height share one
  pipeline (cold start);
  the unrolled structure (window, strides, dilations, TW) is baked in.

  Context:
    T            storage type ("f32" or "f16"); accumulation in f32
    vec          C % 4 == 0 and M == 1: input, filter and output read/written as vec4 (else
                 scalar, clamped to the last channel)
    x64          (vec only) the input and output bound as u64 words, the same bits: 4 float32
                 channels as a vec2<u64>, 4 float16 ones as a u64 (NH vec4s: vec4<u64> /
                 vec2<u64>); on Mesa 22 every storage access is a loop over the lanes and the
                 components, and a u64 component moves two float32 or four float16 values
    NH           (x64 only) channel vec4s per invocation (1 or 2; C4 a multiple of NH)
    M            channel multiplier (output channels per input channel)
    TW           output columns per invocation
    fdiv         invocations < 2^20: the index is split with f32 divisions (exact there)
    KH, KW       window; sh, sw strides; dh, dw dilations
    A            accumulator rows (slots): floor((KH - 1) dh / sh) + 1
    jrows        sorted input rows j (< sh) of an iteration that some tap row reads
    taps         [(kh, j, m)]: tap row kh reads iteration row j into slot m
    seg          sorted distinct column offsets p * sw + kw * dw (p < TW, kw < KW) from ow0 * sw - pl
    ep           fused epilogue (webnn_gpu/ops/_epilogue.py); channel = c; operands read at the
                 channel (a bias) are loaded once per invocation (q{h}_0..q{h}_3 of vec4 h)
    f_uniform    0, or the filter is a float32 constant in a uniform buffer of this many vec4s
                 (zero-padded; vec only)
    pool         (vec only) also write each invocation's per-channel sum of its outputs to
                 `pool` ([OHB * OWB * NB, C4] vec4<f32>): a following global average pool
                 (fuse_conv_pool) then reduces these partials instead of re-reading the output
    in_relu      apply relu to each input value as it is loaded (fuse_conv_input_relu; out-of-image
                 taps stay 0 = relu(0))
    d2s          None, or {bs, uq} (vec only): the output is stored as its depth_to_space with
                 bs x bs blocks (TensorFlow's DCR order; the compiler's store_depth_to_space):
                 channel unit cb (4 NH channels) of pixel (n, oh, ow) goes to unit cb % uq of
                 pixel (n, oh bs + by, ow bs + bx), (by, bx) = divmod(cb / uq, bs); uq = the
                 units of one output pixel
  Parameters (binding `prm`, u32): 0 invocations  1 C4 = ceil(C / 4)  2 C (output channels)
    3 OWB = ceil(OW / TW)  4 OHB = ceil(OH / TH)  5 H  6 W  7 OH  8 OW  9 pt  10 pl (leading
    padding)  11 CI (input channels, C / M)  12 TH (output rows per invocation)
  Bindings: input (NHWC, CI channels), filter ([KH, KW, C]), epilogue operands..., prm, out (NHWC),
    pool (pool only).
  Workgroup: (k.workgroup, 1, 1); invocations NB * OHB * OWB * C4 / NH, channel block fastest.
-#}
{% import "_lib/tile.wgsl" as tl %}
{% import "conv/_rows.wgsl" as rw %}
{% if T == "f16" %}
enable f16;
{% endif %}
{% set LT = {("f32", 1): "vec2<u64>", ("f32", 2): "vec4<u64>", ("f16", 1): "u64", ("f16", 2): "vec2<u64>"}[(T, NH)] if x64 else "" %}
{% set parts = ([""] if NH == 1 else ([".xy", ".zw"] if T == "f32" else [".x", ".y"])) %}
{% if x64 %}
@group(0) @binding(0) var<storage, read> x: array<{{ LT }}>;
{% else %}
{{ tl.decl(0, "x", T, vec, false) }}
{% endif %}
{{ tl.weights(1, "f", T, vec, f_uniform) }}
{{ tl.epilogue_decls(ep, 2) }}
@group(0) @binding({{ 2 + ep.operands | length }}) var<storage, read> prm: array<u32>;
{% if x64 %}
@group(0) @binding({{ 3 + ep.operands | length }}) var<storage, read_write> out: array<{{ LT }}>;
{% else %}
{{ tl.decl(3 + ep.operands | length, "out", T, vec, true) }}
{% endif %}
{% if pool %}
@group(0) @binding({{ 4 + ep.operands | length }}) var<storage, read_write> pool: array<vec4<f32>>;
{% endif %}
{{ tl.epilogue_fns(ep) }}

{% if x64 %}
{% import "_lib/io.wgsl" as io %}
{{ io.words_fns(T) }}
{% endif %}
{% if vec %}
{% if not x64 %}
fn ld_x(i: u32, cb: u32, C4: u32, C: u32) -> vec4<f32> { return vec4<f32>(x[i * C4 + cb]); }
{% endif %}
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
  let TH = prm[12];
{% if vec %}
  let CI = C4;
{% else %}
  let CI = prm[11];
{% endif %}
  // channel blocks of {{ 4 * NH }} channels (one per invocation)
  let CB = {{ "C4 / " ~ NH ~ "u" if NH > 1 else "C4" }};
{% if fdiv %}
  // Quotients through f32, exact for dividends below 2^20 (fdiv): x86 has no vector integer
  // division, so runtime divisors would otherwise cost a scalar division per lane.
  let r0 = u32((f32(idx) + 0.5) / f32(CB));
  let r1 = u32((f32(r0) + 0.5) / f32(OWB));
  let n = u32((f32(r1) + 0.5) / f32(OHB));
{% else %}
  let r0 = idx / CB;
  let r1 = r0 / OWB;
  let n = r1 / OHB;
{% endif %}
  let cb = idx - r0 * CB;
  let wb = r0 - r1 * OWB;
  let hb = r1 - n * OHB;
  let oh0 = hb * TH;
  let ow0 = wb * {{ TW }}u;
{% if d2s %}
  // depth_to_space (d2s): unit cb is unit cb % uq of block position (by, bx) = divmod(cb / uq, bs)
  let dq = cb / {{ d2s.uq }}u;
  let dby = dq / {{ d2s.bs }}u;
  let dbx = (dq % {{ d2s.bs }}u) * {{ d2s.uq }}u + cb % {{ d2s.uq }}u;
{% endif %}
  let nr = min(TH, OH - oh0);
  let ih0 = i32(oh0 * {{ sh }}u) - i32(prm[9]);
  let iw0 = i32(ow0 * {{ sw }}u) - i32(prm[10]);
{% for h in range(NH) %}
  let cb{{ h }} = cb{{ " * " ~ NH ~ "u + " ~ h ~ "u" if NH > 1 }};
{% for kh in range(KH) %}
{% for kw in range(KW) %}
  let w{{ h }}_{{ kh }}_{{ kw }} = ld_f({{ kh * KW + kw }}u, cb{{ h }}, C4, C);
{% endfor %}
{% endfor %}
{% endfor %}
{{ rw.columns(seg) -}}
{% for p in range(TW) %}
  let pok{{ p }} = ow0 + {{ p }}u < OW;
{% endfor %}
{% for h in range(NH) %}
{% for m in range(A) %}
{% for p in range(TW) %}
  var acc{{ h }}_{{ m }}_{{ p }} = vec4<f32>(0.0);
{% endfor %}
{% endfor %}
{% for c in range(4) %}
  {{ tl.hoist_q(ep, "q" ~ h ~ "_" ~ c, "min(cb" ~ h ~ " * 4u + " ~ c ~ "u, C - 1u)") }}
{% endfor %}
{% if pool %}
  var psum{{ h }} = vec4<f32>(0.0);
{% endif %}
{% endfor %}
  // iteration i: input rows (oh0 + i) sh - pt + j; output row oh0 + i - {{ A - 1 }} is complete after
  // it. Iterations whose input rows are all above the image would load nothing: the loop starts
  // past them (at most A - 1 of them, which store nothing).
  let lead = select(0u, min({{ A - 1 }}u, u32(-(ih0 + {{ jrows[-1] }}) + {{ sh - 1 }}) / {{ sh }}u), ih0 + {{ jrows[-1] }} < 0);
  for (var i = lead; i < nr + {{ A - 1 }}u; i = i + 1u) {
    let yb = ih0 + i32(i * {{ sh }}u);
{% for j in jrows %}
    let y{{ j }} = yb + {{ j }};
    let rok{{ j }} = u32(y{{ j }}) < H;
    let row{{ j }} = (n * H + select(0u, u32(y{{ j }}), rok{{ j }})) * W;
{% for s in seg %}
    // a load outside the image is skipped (the driver's per-lane loop passes masked lanes by)
{% if x64 %}
    var v{{ j }}_{{ s }} = {{ LT }}();
    if (rok{{ j }} && cok{{ s }}) { v{{ j }}_{{ s }} = x[(row{{ j }} + ci{{ s }}) * CB + cb]; }
{% for h in range(NH) %}
    let x{{ h }}_{{ j }}_{{ s }} = {{ "max(" if in_relu }}up(v{{ j }}_{{ s }}{{ parts[h] }}){{ ", vec4<f32>(0.0))" if in_relu }};
{% endfor %}
{% else %}
    var x0_{{ j }}_{{ s }} = vec4<f32>(0.0);
    if (rok{{ j }} && cok{{ s }}) { x0_{{ j }}_{{ s }} = {{ "max(" if in_relu }}ld_x(row{{ j }} + ci{{ s }}, cb, CI, C){{ ", vec4<f32>(0.0))" if in_relu }}; }
{% endif %}
{% endfor %}
{% endfor %}
{% for h in range(NH) %}
{{ rw.slot_taps("    ", "acc" ~ h ~ "_", "x" ~ h ~ "_", "w" ~ h ~ "_", taps, KW, TW, sw, dw) | trim("\n") }}
{% endfor %}
{% if A > 1 %}
    if (i >= {{ A - 1 }}u) {
{% else %}
    {
{% endif %}
      let pr = (n * OH + oh0 + i - {{ A - 1 }}u) * OW + ow0;
{% if d2s %}
      // depth_to_space: this row's first pixel's unit in the output (row (n OH + oh) bs + by,
      // column ow0 bs + bx); the next pixel's is bs uq units on
      let d2s_at = (((n * OH + oh0 + i - {{ A - 1 }}u) * {{ d2s.bs }}u + dby) * OW + ow0) * {{ d2s.bs * d2s.uq }}u + dbx;
{% endif %}
{% for p in range(TW) %}
      if (pok{{ p }}) {
        let pix = pr + {{ p }}u;
{% if vec %}
{% for h in range(NH) %}
        let v{{ h }} = acc{{ h }}_{{ A - 1 }}_{{ p }};
        let o{{ h }} = pix * C + cb{{ h }} * 4u;
        let ov{{ h }} = vec4<f32>({% for c in range(4) %}{{ tl.apply(ep, "v" ~ h ~ "." ~ "xyzw"[c], "o" ~ h ~ " + " ~ c ~ "u", "cb" ~ h ~ " * 4u + " ~ c ~ "u", "q" ~ h ~ "_" ~ c) }}{{ ", " if not loop.last }}{% endfor %});
{% if pool %}
        psum{{ h }} = psum{{ h }} + ov{{ h }};
{% endif %}
{% endfor %}
{% if x64 %}
        out[{{ "d2s_at + " ~ p ~ "u * " ~ d2s.bs * d2s.uq ~ "u" if d2s else "pix * CB + cb" }}] = {{ "pk(ov0)" if NH == 1 else LT ~ "(pk(ov0), pk(ov1))" }};
{% else %}
        out[{{ "d2s_at + " ~ p ~ "u * " ~ d2s.bs * d2s.uq ~ "u" if d2s else "pix * C4 + cb" }}] = vec4<{{ T }}>(ov0);
{% endif %}
{% else %}
        let v = acc0_{{ A - 1 }}_{{ p }};
{% for c in range(4) %}
        if (cb * 4u + {{ c }}u < C) {
          let o = pix * C + cb * 4u + {{ c }}u;
          out[o] = {{ T }}({{ tl.apply(ep, "v." ~ "xyzw"[c], "o", "cb * 4u + " ~ c ~ "u", "q0_" ~ c) }});
        }
{% endfor %}
{% endif %}
      }
{% endfor %}
    }
{% for h in range(NH) %}
{{ rw.slot_shift("    ", "acc" ~ h ~ "_", A, TW) | trim("\n") }}
{% endfor %}
  }
{% if pool %}
  // this strip's sum per channel: row r0 = (n * OHB + hb) * OWB + wb of the [blocks, C4] partials
{% for h in range(NH) %}
  pool[r0 * C4 + cb{{ h }}] = psum{{ h }};
{% endfor %}
{% endif %}
}
