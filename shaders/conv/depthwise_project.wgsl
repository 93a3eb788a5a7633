{#-
  conv/depthwise_project.wgsl: a depthwise conv2d (NHWC) and the per-pixel linear layer that
  reads its output, in one kernel (the compiler's fuse_depthwise_project pass): a pointwise
  conv2d (1x1, stride 1, one group) or a conv_transpose2d whose filter equals its stride (each
  input pixel makes its own KH2 x KW2 block of output pixels). The depthwise output never goes
  through memory: on lavapipe a kernel's cost is its per-element loads and stores, and this
  removes the depthwise kernel's stores and the projection's loads.

  Each invocation computes a TH x TW block of depthwise output pixels for every channel, four
  channels (one vec4) at a time in a loop, and accumulates their projection into N4 vec4
  accumulators per pixel. Per channel group it loads the taps, the input rows the block
  touches (as conv/depthwise.wgsl does), and the four rows of the projection matrix.

  With `expand`, the depthwise input is itself computed here: a pointwise conv2d (K -> C
  channels, its epilogue) of `x`, evaluated for every input pixel the block reads (before the
  channel loop those pixels' K values are loaded once; per channel group, four expanded
  channels are computed from them in registers). A MobileNet inverted-residual block then
  reads its input once and writes its output once.

  Context:
    T            storage type ("f32" or "f16"); accumulation in f32
    expand       x is the expansion's input ([NB, H, W, K] with K4 = K / 4 vec4s); we is its
                 weight matrix as [C4, K] vec4s of four expanded channels (we_uniform: in a
                 uniform buffer of that many vec4s); eep its epilogue (bias-like operands only)
    TH, TW       depthwise output rows and columns per invocation
    KH, KW, sh, sw, dh, dw, rows, seg   the depthwise window, as in conv/depthwise.wgsl
    NB, H, W, C, C4, OH, OW, pt, pl     depthwise sizes (C a multiple of 4) and leading padding
    ep           the depthwise epilogue (bias first; channel = the depthwise channel), read at the
                 depthwise output's index; operands at the channel are loaded once per group
    center       stride 1, same size, the window's center tap on a loaded input (pt and pl): the
                 input at each output pixel is kept (xc) for an epilogue residual add of the
                 depthwise input itself (ep.given), which then costs no load
    N, N4        projected values per pixel (N4 = ceil(N / 4) vec4 columns of `pw`)
    pep          the projection's epilogue (bias first), read at the projection output's index
                 (None in mode "store")
    mode         "store": no projection, out is the depthwise output [NB, OH, OW, C] (vec4);
                 "conv": out is [NB, OH, OW, N]; "transpose": value n = (a * KW2 + b) * O2 + o of
                 pixel (oh, ow) goes to out[NB, OH * KH2, OW * KW2, O2] at (oh * KH2 + a, ow * KW2 + b, o)
    KH2, KW2, O2 the transposed conv's block and channels (mode "transpose")
    out_vec      vec4 stores (mode "conv", N % 4 == 0)
    f_uniform    0, or the depthwise filter is in a uniform buffer of this many vec4s
    p_uniform    0, or the projection matrix is in a uniform buffer of this many vec4s
    pool         also write each invocation's per-channel sums of its outputs to `pool`, for a
                 global average pool: mode "store", [blocks, C4] vec4<f32> of the depthwise output
                 (fuse_conv_pool); mode "conv" (out_vec), [blocks, N4] of the projection's output
                 (fuse_pool_partials)
    fns          (T, names) activation helpers of the epilogues
    n_inv        invocations: NB * OHB * OWB (OHB = ceil(OH / TH), OWB = ceil(OW / TW))
  Bindings: x (NHWC, vec4), f ([KH, KW, C] vec4), ep operands..., [pw ([C, N4] vec4),
    pep operands... (not "store")], [we, eep operands... (expand)], out, [pool].
  Workgroup: (k.workgroup, 1, 1); block column fastest.
-#}
{% import "_lib/tile.wgsl" as tl %}
{% import "_lib/activations.wgsl" as act %}
{% if T == "f16" %}
enable f16;
{% endif %}
{% set nb = namespace(i=2) %}
{{ tl.decl(0, "x", T, true, false) }}
{{ tl.weights(1, "f", T, true, f_uniform) }}
{{ tl.epilogue_decls(ep, nb.i) }}
{% set nb.i = nb.i + ep.operands | length %}
{% if mode != "store" %}
{{ tl.weights(nb.i, "pw", T, true, p_uniform) }}
{{ tl.epilogue_decls(pep, nb.i + 1) }}
{% set nb.i = nb.i + 1 + pep.operands | length %}
{% endif %}
{% if expand %}
{{ tl.weights(nb.i, "we", T, true, we_uniform) }}
{{ tl.epilogue_decls(eep, nb.i + 1) }}
{% set nb.i = nb.i + 1 + eep.operands | length %}
{% endif %}
{{ tl.decl(nb.i, "out", T, out_vec, true) }}
{% if pool %}
@group(0) @binding({{ nb.i + 1 }}) var<storage, read_write> pool: array<vec4<f32>>;
{% endif %}
{% for FT, names in fns %}
{{ act.defs(FT, names) }}
{% endfor %}
{% if not ep.empty %}
{{ ep.code }}
{% endif %}
{% if mode != "store" and not pep.empty %}
{{ pep.code }}
{% endif %}
{% if expand and not eep.empty %}
{{ eep.code }}
{% endif %}

{{ tl.pixel_block(k, n_inv, OWB, OHB, TH, TW, sh, sw, pt, pl, seg, W) }}
{% if expand %}
{% for r, uses in rows %}
  let hy{{ r }} = ih0 + {{ r }};
  let hrok{{ r }} = u32(hy{{ r }}) < {{ H }}u;
  let hrow{{ r }} = (n * {{ H }}u + select(0u, u32(hy{{ r }}), hrok{{ r }})) * {{ W }}u;
{% for j in seg %}
  let hok{{ r }}_{{ j }} = hrok{{ r }} && cok{{ j }};
{% for kk in range(K4) %}
  let X{{ r }}_{{ j }}_{{ kk }} = vec4<f32>(x[(hrow{{ r }} + ci{{ j }}) * {{ K4 }}u + {{ kk }}u]);
{% endfor %}
{% endfor %}
{% endfor %}
{% endif %}
{% for t in range(TH) %}
{% for p in range(TW) %}
  let in{{ t }}_{{ p }} = oh0 + {{ t }}u < {{ OH }}u && ow0 + {{ p }}u < {{ OW }}u;
  let pix{{ t }}_{{ p }} = (n * {{ OH }}u + oh0 + {{ t }}u) * {{ OW }}u + ow0 + {{ p }}u;
{% for j in range(N4) %}
  var a{{ t }}_{{ p }}_{{ j }} = vec4<f32>(0.0);
{% endfor %}
{% endfor %}
{% endfor %}
  for (var cb = 0u; cb < {{ C4 }}u; cb = cb + 1u) {
{% if pool and mode == "store" %}
    var psum = vec4<f32>(0.0);
{% endif %}
{% for kh in range(KH) %}
{% for kw in range(KW) %}
    let w{{ kh }}_{{ kw }} = vec4<f32>(f[{{ kh * KW + kw }}u * {{ C4 }}u + cb]);
{% endfor %}
{% endfor %}
{% if expand %}
{% for kq in range(4 * K4) %}
    let u{{ kq }} = vec4<f32>(we[cb * {{ 4 * K4 }}u + {{ kq }}u]);
{% endfor %}
{% for c in range(4) %}
    {{ tl.hoist_q(eep, "eq" ~ c, "cb * 4u + " ~ c ~ "u") }}
{% endfor %}
{% endif %}
{% for t in range(TH) %}
{% for p in range(TW) %}
    var d{{ t }}_{{ p }} = vec4<f32>(0.0);
{% if center %}
    var xc{{ t }}_{{ p }} = vec4<f32>(0.0);
{% endif %}
{% endfor %}
{% endfor %}
{% for r, uses in rows %}
    {
      let y = ih0 + {{ r }};
      let rok = u32(y) < {{ H }}u;
      let row = (n * {{ H }}u + select(0u, u32(y), rok)) * {{ W }}u;
{% for j in seg %}
{% if expand %}
      let s{{ j }} = {% for kq in range(4 * K4) %}X{{ r }}_{{ j }}_{{ kq // 4 }}.{{ "xyzw"[kq % 4] }} * u{{ kq }}{{ " + " if not loop.last }}{% endfor %};
      let x{{ j }} = select(vec4<f32>(0.0), vec4<f32>({% for c in range(4) %}{{ tl.apply(eep, "s" ~ j ~ "." ~ "xyzw"[c], "0u", "cb * 4u + " ~ c ~ "u", "eq" ~ c) }}{{ ", " if not loop.last }}{% endfor %}), hok{{ r }}_{{ j }});
{% else %}
      let x{{ j }} = select(vec4<f32>(0.0), vec4<f32>(x[(row + ci{{ j }}) * {{ C4 }}u + cb]), rok && cok{{ j }});
{% endif %}
{% endfor %}
{% for t, kh in uses %}
{% for kw in range(KW) %}
{% for p in range(TW) %}
      d{{ t }}_{{ p }} = d{{ t }}_{{ p }} + x{{ p * sw + kw * dw }} * w{{ kh }}_{{ kw }};
{% endfor %}
{% endfor %}
{% if center and r == t + pt %}
{% for p in range(TW) %}
      xc{{ t }}_{{ p }} = x{{ p + pl }};
{% endfor %}
{% endif %}
{% endfor %}
    }
{% endfor %}
{% for c in range(4) %}
    {{ tl.hoist_q(ep, "q" ~ c, "cb * 4u + " ~ c ~ "u") }}
{% endfor %}
{% for t in range(TH) %}
{% for p in range(TW) %}
{% if mode != "store" %}
    var e{{ t }}_{{ p }} = vec4<f32>(0.0);
{% endif %}
    if (in{{ t }}_{{ p }}) {
      let o = pix{{ t }}_{{ p }} * {{ C }}u + cb * 4u;
      let v = d{{ t }}_{{ p }};
      {{ "let e" if mode == "store" else "e" ~ t ~ "_" ~ p }} = vec4<f32>({% for c in range(4) %}{{ tl.apply(ep, "v." ~ "xyzw"[c], "o + " ~ c ~ "u", "cb * 4u + " ~ c ~ "u", "q" ~ c, "xc" ~ t ~ "_" ~ p ~ "." ~ "xyzw"[c]) }}{{ ", " if not loop.last }}{% endfor %});
{% if mode == "store" %}
      out[pix{{ t }}_{{ p }} * {{ C4 }}u + cb] = vec4<{{ T }}>(e);
{% if pool %}
      psum = psum + e;
{% endif %}
{% endif %}
    }
{% endfor %}
{% endfor %}
{% for j in range(N4 if mode != "store" else 0) %}
    // projection columns 4j..4j+3: each row of the matrix is loaded right before its uses
{% for c in range(4) %}
    let p{{ c }}_{{ j }} = vec4<f32>(pw[(cb * 4u + {{ c }}u) * {{ N4 }}u + {{ j }}u]);
{% endfor %}
{% for t in range(TH) %}
{% for p in range(TW) %}
    a{{ t }}_{{ p }}_{{ j }} = a{{ t }}_{{ p }}_{{ j }} + e{{ t }}_{{ p }}.x * p0_{{ j }} + e{{ t }}_{{ p }}.y * p1_{{ j }} + e{{ t }}_{{ p }}.z * p2_{{ j }} + e{{ t }}_{{ p }}.w * p3_{{ j }};
{% endfor %}
{% endfor %}
{% endfor %}
{% if pool and mode == "store" %}
    // this block's channel sums: row idx (= (n * OHB + hb) * OWB + wb) of the [blocks, C4] partials
    pool[idx * {{ C4 }}u + cb] = psum;
{% endif %}
  }
{% if mode == "conv" %}
{% for j in range(N4) %}
{% for c in range(4) %}
{% if 4 * j + c < N %}
  {{ tl.hoist_q(pep, "gq" ~ j ~ "_" ~ c, (4 * j + c) ~ "u") }}
{% endif %}
{% endfor %}
{% if pool %}
  var ps{{ j }} = vec4<f32>(0.0);
{% endif %}
{% endfor %}
{% for t in range(TH) %}
{% for p in range(TW) %}
  if (in{{ t }}_{{ p }}) {
{% for j in range(N4) %}
    {
      let o = pix{{ t }}_{{ p }} * {{ N }}u + {{ 4 * j }}u;
      let v = a{{ t }}_{{ p }}_{{ j }};
{% if out_vec %}
      let e = vec4<f32>({% for c in range(4) %}{{ tl.apply(pep, "v." ~ "xyzw"[c], "o + " ~ c ~ "u", (4 * j + c) ~ "u", "gq" ~ j ~ "_" ~ c) }}{{ ", " if not loop.last }}{% endfor %});
      out[pix{{ t }}_{{ p }} * {{ N4 }}u + {{ j }}u] = vec4<{{ T }}>(e);
{% if pool %}
      ps{{ j }} = ps{{ j }} + e;
{% endif %}
{% else %}
{% for c in range(4) %}
{% if 4 * j + c < N %}
      out[o + {{ c }}u] = {{ T }}({{ tl.apply(pep, "v." ~ "xyzw"[c], "o + " ~ c ~ "u", (4 * j + c) ~ "u", "gq" ~ j ~ "_" ~ c) }});
{% endif %}
{% endfor %}
{% endif %}
    }
{% endfor %}
  }
{% endfor %}
{% endfor %}
{% for j in range(N4 if pool else 0) %}
  // this block's column sums: row idx of the [blocks, N] partials
  pool[idx * {{ N4 }}u + {{ j }}u] = ps{{ j }};
{% endfor %}
{% elif mode == "transpose" %}
{% for oc in range(O2) %}
  {{ tl.hoist_q(pep, "gq" ~ oc, oc ~ "u") }}
{% endfor %}
{% for t in range(TH) %}
{% for p in range(TW) %}
  if (in{{ t }}_{{ p }}) {
    let b0 = ((n * {{ OH }}u + oh0 + {{ t }}u) * {{ KH2 }}u * {{ OW * KW2 }}u + (ow0 + {{ p }}u) * {{ KW2 }}u) * {{ O2 }}u;
{% for nn in range(N) %}
{% set a_ = nn // (KW2 * O2) %}{% set b_ = (nn // O2) % KW2 %}{% set oc = nn % O2 %}
    {
      let o = b0 + {{ (a_ * OW * KW2 + b_) * O2 + oc }}u;
      out[o] = {{ T }}({{ tl.apply(pep, "a" ~ t ~ "_" ~ p ~ "_" ~ (nn // 4) ~ "." ~ "xyzw"[nn % 4], "o", oc ~ "u", "gq" ~ oc) }});
    }
{% endfor %}
  }
{% endfor %}
{% endfor %}
{% endif %}
}
