{#-
  conv/depthwise_project.wgsl: a depthwise conv2d (NHWC) and the per-pixel linear layer that
  reads its output, in one kernel (the compiler's fuse_depthwise_project pass): a pointwise
  conv2d (1x1, stride 1, one group) or a conv_transpose2d whose filter equals its stride (each
  input pixel makes its own KH2 x KW2 block of output pixels). The depthwise output never goes
  through memory: on lavapipe a kernel's cost is its per-element loads and stores, and this
  removes the depthwise kernel's stores and the projection's loads.

  Each invocation computes a TH x TW block of depthwise output pixels for every channel, four
  channels (one vec4) at a time in a loop, and accumulates their projection into NS vec4
  accumulators per pixel: one of the S column blocks of the N4 vec4 columns (S = ceil(N4 / NS)
  invocations per pixel block, column block fastest; each computes the block's depthwise
  values itself, so small images with wide projections still fill the cores). Per channel
  group it loads the taps, the input rows the block touches (as conv/depthwise.wgsl does),
  and four rows of its columns of the projection matrix.

  Written for naga's front end, whose time grows with the square of a function's expression
  count (docs/performance.md, "Build time"): each epilogue's four channels of a vec4 are one
  call of a helper (ep_v4: `<ep.fn>_v4`) and the expansion's and the projection's four-term
  multiply-adds are `mat4x4<f32> * vec4<f32>` (U, P: four weight vectors as columns), so
  `main` has one expression where it had four to fifteen; lavapipe inlines the helpers and
  lowers the products to the same arithmetic (only the products' order of addition differs).

  The sizes come from a uniform parameter buffer, so layers that differ only in image size,
  channels, padding or projection width (a multiple of NS vec4s) share one pipeline; the
  unrolled structure (window, strides, dilations, block, NS, epilogues) is baked in.

  With `expand`, the depthwise input is itself computed here: a pointwise conv2d (K -> C
  channels, its epilogue) of `x`, evaluated for every input pixel the block reads (before the
  channel loop those pixels' K values are loaded once, in a loop over their K4 vec4s with one
  load per pixel in the text; per channel group, four expanded channels are computed from them
  in registers). A MobileNet inverted-residual block then
  reads its input once and writes its output once.

  With `xsh` (an expansion of any K, on small images), the workgroup first computes the
  expanded values of the input rows its blocks read (the band, from its first and last block)
  into workgroup memory `xs` ([band pixels, C4] vec4<f32>, XS of them): each invocation takes
  band pixels lid, lid + workgroup, ..., and for each loads its K values KC vec4s at a time
  (a loop over K4 / KC chunks) and accumulates all C4 channel groups of the expansion in `xs`
  (weights at addresses uniform across the invocations: one load and a broadcast from a
  uniform buffer), the epilogue applied with the last chunk. After one barrier the blocks read
  `xs` where they would read the depthwise input (the rows in a loop as without expansion).

  Context:
    T            storage type ("f32" or "f16"); accumulation in f32
    xsh, XS, KC  (expand) the expansion computed into workgroup memory first (see above): XS
                 vec4s of it, KC vec4s of each pixel's input per chunk (KC divides K4)
    expand       x is the expansion's input ([NB, H, W, K] with K4 = K / 4 vec4s); we is its
                 weight matrix as [C4, K] vec4s of four expanded channels (we_uniform: in a
                 uniform buffer of that many vec4s); eep its epilogue (bias-like operands only)
    in_relu      relu of each input value as it is loaded (the compiler's fuse_conv_input_relu, the
                 depthwise conv's attrs["input_relu"]; out-of-image taps stay 0 = relu(0))
    TH, TW       depthwise output rows and columns per invocation
    KH, KW, sh, sw, dh, dw, rows, seg   the depthwise window, as in conv/depthwise.wgsl
    pt, pl       leading padding (used in the text only with `center`)
    ep           the depthwise epilogue (bias first; channel = the depthwise channel), read at the
                 depthwise output's index; operands at the channel are loaded once per group
    center       stride 1, same size, the window's center tap on a loaded input (pt and pl): the
                 input at each output pixel is kept (xc) for an epilogue residual add of the
                 depthwise input itself (ep.given), which then costs no load
    N            projected values per pixel (mode "transpose" only: its stores are unrolled)
    NS           vec4 columns of the projection per invocation (S = ceil(N4 / NS) invocations per
                 pixel block, N4 = ceil(N / 4))
    ragged       NS does not divide N4: the last column block loads its missing columns from
                 the last one and stores none of them
    row_loop     no expansion: the channel loop reads the block's input rows in a loop (prm[3].w
                 iterations, R = the rows' span), each output row's tap row picked by selects
    x_loop       (expand) the held expansion inputs are loaded in a loop over their K4 vec4s
                 (prm[3].z iterations, each value put in place by a select, or x_shift): one load per pixel
                 in the text instead of K4
    x_shift      (x_loop) each iteration moves a pixel's held values down one place and puts
                 the new one last (K4 copies, which SSA makes free, instead of K4 selects and
                 compares); exact only because prm[3].z is K4
    x_words      (x_loop, K4 even) x is bound as words of 8 values (vec4<u64> for float32, vec2<u64>
                 for float16; the same bits): the loop runs K4 / 2 iterations, each loading one word
                 per pixel and putting its two vec4s in place (by selects, or x_shift: two places)
    col_loop     mode "conv": the stores run in a loop over the NS columns (prm[3].y iterations,
                 the column's accumulator picked by selects), so the text has TH x TW stores, not
                 TH x TW x NS (LLVM's compile time grows faster than the loads and stores)
    pep          the projection's epilogue (bias first), read at the projection output's index
                 (None in mode "store"); pep.given: its residual operand (same shape as out) is
                 bound as `pg` and loaded as vec4 (out_vec only)
    mode         "store": no projection, out is the depthwise output [NB, OH, OW, C] (vec4);
                 "conv": out is [NB, OH, OW, N]; "transpose": value n = (a * KW2 + b) * O2 + o of
                 pixel (oh, ow) goes to out[NB, OH * KH2, OW * KW2, O2] at (oh * KH2 + a, ow * KW2 + b, o)
    KH2, KW2, O2 the transposed conv's block and channels (mode "transpose")
    orow         (mode "transpose", TW * KW2 * O2 == 8, OW a multiple of TW) each block row's
                 output row a (of KH2) is 8 consecutive values, stored as one word of 8 (vec4<u64>
                 for float32, vec2<u64> for float16; the same bits) instead of 8 scalar stores;
                 `out` is bound as those words (conv.dwp_row_words)
    out_vec      vec4 stores (mode "conv", N % 4 == 0)
    f_uniform    0, or the depthwise filter is in a uniform buffer of this many vec4s
    p_uniform    0, or the projection matrix is in a uniform buffer of this many vec4s
    panel        (mode "conv", S > 1) pw holds each column block's rows as one contiguous panel,
                 [S, C, NS] vec4s, zero-padded past N4: a block's loads of its four rows per
                 channel group are 4 NS consecutive vec4s instead of four runs N4 apart
    pool         also write each invocation's per-channel sums of its outputs to `pool`, for a
                 global average pool: mode "store", [blocks, C4] vec4<f32> of the depthwise output
                 (fuse_conv_pool); mode "conv" (out_vec), [blocks, N4] of the projection's output
                 (fuse_pool_partials)
    fns          (T, names) activation helpers of the epilogues (with expand, exp_acc written with
                 selects instead of branches: act.defs)
    fdiv         invocations < 2^20: the index is split with f32 divisions (exact there)
    xw           (mode "conv", row_loop, no expansion, C4 even) the input bound as words of 8
                 channels (vec4<u64> for float32, vec2<u64> for float16; the same bits): the
                 channel loop takes two channel groups per iteration and loads each input pixel
                 of both as one word, in a branch that masked lanes pass by (on Mesa 22 every
                 storage access is a loop over the lanes and the components, and a u64
                 component moves two float32 or four float16 values); each group's depthwise
                 sums, epilogue and projection are those of the vec4 form, in the same order
    sg           0, or the subgroup size (conv.dwp_lanes): the column block is the slowest index
                 and the pixel blocks are padded to a multiple of sg (prm[4].y), so the lanes of a
                 subgroup share one column block; per channel group each lane loads its share of
                 the KH x KW taps, of the 4 NS projection vectors, of the expansion's 4 K4
                 weight vectors and of the epilogues' per-channel operands of its four channels
                 (hoist_q4), and subgroupBroadcast hands them to the others (a register
                 extract on llvmpipe, where every lane would otherwise load each of them: a loop
                 over the lanes for a storage buffer, a gather for a uniform one). A padding lane
                 computes the last block and stores nothing; whole subgroups return together
  Parameters (uniform `prm`, u32 vec4s): 0: invocations (NB * OHB * OWB * S, the blocks padded
    to whole subgroups with sg), C4, N4, N  1: H, W, OH, OW  2: OHB = ceil(OH / TH),
    OWB = ceil(OW / TW), pt, pl  3: S, NS, K4, R (the bounds of col_loop, of the expansion's
    loads and of row_loop: runtime values, so that LLVM does not unroll those loops)
    4: NB * OHB * OWB, the same padded to a multiple of sg (sg only; xsh: of the workgroup too), 0, 0
  Bindings: x (NHWC, vec4), f ([KH, KW, C] vec4), ep operands..., [pw ([C, N4] vec4, or panel),
    pep operands..., [pg (pep.given)] (not "store")], [we, eep operands... (expand)], prm, out, [pool].
  Workgroup: (k.workgroup, 1, 1); column block fastest, then block column (sg: block column
  fastest, column block slowest).
-#}
{% import "_lib/tile.wgsl" as tl %}
{% import "conv/_rows.wgsl" as rw %}
{% set RO = "max(" if in_relu else "" %}
{% set RC = ", vec4<f32>(0.0))" if in_relu else "" %}
{% from "conv/_rows.wgsl" import ep_v4_def, ep_v4, hoist_q4 %}
{% if T == "f16" %}
enable f16;
{% endif %}
{% set LT = "vec4<u64>" if T == "f32" else "vec2<u64>" %}
{% set parts = [".xy", ".zw"] if T == "f32" else [".x", ".y"] %}
{% set nb = namespace(i=2) %}
{% if xw or x_words %}
@group(0) @binding(0) var<storage, read> x: array<{{ LT }}>;
{% else %}
{{ tl.decl(0, "x", T, true, false) }}
{% endif %}
{{ tl.weights(1, "f", T, true, f_uniform) }}
{{ tl.epilogue_decls(ep, nb.i) }}
{% set nb.i = nb.i + ep.operands | length %}
{% if mode != "store" %}
{{ tl.weights(nb.i, "pw", T, true, p_uniform) }}
{{ tl.epilogue_decls(pep, nb.i + 1) }}
{% set nb.i = nb.i + 1 + pep.operands | length %}
{% if pep.given %}
{{ tl.decl(nb.i, "pg", T, true, false) }}
{{ tl.given_fns(pep, "pg", true) }}
{% set nb.i = nb.i + 1 %}
{% endif %}
{% endif %}
{% if expand %}
{{ tl.weights(nb.i, "we", T, true, we_uniform) }}
{{ tl.epilogue_decls(eep, nb.i + 1) }}
{% set nb.i = nb.i + 1 + eep.operands | length %}
{% endif %}
@group(0) @binding({{ nb.i }}) var<uniform> prm: array<vec4<u32>, 5>;
{% if orow %}
@group(0) @binding({{ nb.i + 1 }}) var<storage, read_write> out: array<{{ LT }}>;
{% else %}
{{ tl.decl(nb.i + 1, "out", T, out_vec, true) }}
{% endif %}
{% if pool %}
@group(0) @binding({{ nb.i + 2 }}) var<storage, read_write> pool: array<vec4<f32>>;
{% endif %}
{% if xsh %}
var<workgroup> xs: array<vec4<f32>, {{ XS }}>;
{% endif %}
{{ rw.pair_fns(fns, ep, pep if mode != "store" else none, expand) -}}
{{ rw.word_fns(T) if xw or x_words or orow }}
{% if expand and not eep.empty %}
{{ eep.code }}
{{ ep_v4_def(eep, false) }}
{% endif %}

@compute @workgroup_size({{ k.workgroup }})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>{% if sg %},
        @builtin(subgroup_invocation_id) lane: u32{% endif %}{% if xsh %},
        @builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>{% endif %}) {
  let gidx = gid.x + gid.y * nwg.x * {{ k.workgroup }}u;
{% if not xsh %}
  if (gidx >= prm[0].x) { return; }
{% endif %}
  let C4 = prm[0].y;
  let N4 = prm[0].z;
  let H = prm[1].x;
  let W = prm[1].y;
  let OH = prm[1].z;
  let OW = prm[1].w;
  let OHB = prm[2].x;
  let OWB = prm[2].y;
  let S = prm[3].x;
  let R = prm[3].w;  // row_loop's iterations
{% if xsh %}
  // the expansion of the band of input rows [xr0, xr1) this workgroup's blocks read, into xs
  let g0 = (wid.x + wid.y * nwg.x) * {{ k.workgroup }}u;
{% if sg %}
  let sb0 = g0 / prm[4].y;  // the pixel blocks are padded to whole workgroups: one column block
  let i_lo = g0 - sb0 * prm[4].y;
  let i_hi = min(g0 + {{ k.workgroup - 1 }}u - sb0 * prm[4].y, prm[4].x - 1u);
{% else %}
  let i_lo = g0 / S;
  let i_hi = min(g0 + {{ k.workgroup - 1 }}u, prm[0].x - 1u) / S;
{% endif %}
  // (a workgroup whose blocks read only padding rows below the image expands none)
  let xr0 = u32(clamp(i32((i_lo / OWB) * {{ TH * sh }}u) - i32(prm[2].z), 0, i32(H)));
  let xr1 = u32(clamp(i32((i_hi / OWB) * {{ TH * sh }}u) - i32(prm[2].z) + {{ (TH - 1) * sh + (KH - 1) * dh + 1 }},
                      i32(xr0), i32(H)));
  {
    let K4 = prm[3].z;
    let P = (xr1 - xr0) * W;
    // a loop uniform across the workgroup, PX pixels per invocation per iteration (each weight
    // vector loaded serves all of them; a lane past the band computes its last pixel and stores nothing)
    for (var pb = 0u; pb < P; pb = pb + {{ PX * k.workgroup }}u) {
{% for i in range(PX) %}
      let p{{ i }} = min(pb + lid + {{ i * k.workgroup }}u, P - 1u);
      let pin{{ i }} = pb + lid + {{ i * k.workgroup }}u < P;
      let xp{{ i }} = (xr0 * W + p{{ i }}) * K4;
{% endfor %}
      for (var kc = 0u; kc < K4; kc = kc + {{ KC }}u) {
{% for i in range(PX) %}
{% for q in range(KC) %}
        let X{{ i }}_{{ q }} = vec4<f32>(x[xp{{ i }} + kc + {{ q }}u]);
{% endfor %}
{% endfor %}
        for (var cb = 0u; cb < C4; cb = cb + 1u) {
          let wo = (cb * K4 + kc) * 4u;
{% for i in range(PX) %}
          var s{{ i }} = select(xs[p{{ i }} * C4 + cb], vec4<f32>(0.0), kc == 0u);
{% endfor %}
{% if sg %}
          // lane l loads weight vectors l, l + sg, ... and subgroupBroadcast hands them to the
          // others (at loop-dependent addresses every lane's own load would be a gather)
{% for t in range((4 * KC + sg - 1) // sg) %}
          let ul{{ t }} = vec4<f32>(we[wo + min(lane + {{ t * sg }}u, {{ 4 * KC - 1 }}u)]);
{% endfor %}
{% endif %}
{% for q in range(KC) %}
{% if sg %}
          let U{{ q }} = mat4x4<f32>({% for c in range(4) %}subgroupBroadcast(ul{{ (4 * q + c) // sg }}, {{ (4 * q + c) % sg }}u){{ ", " if not loop.last }}{% endfor %});
{% else %}
          let U{{ q }} = mat4x4<f32>(vec4<f32>(we[wo + {{ 4 * q }}u]), vec4<f32>(we[wo + {{ 4 * q + 1 }}u]),
                                 vec4<f32>(we[wo + {{ 4 * q + 2 }}u]), vec4<f32>(we[wo + {{ 4 * q + 3 }}u]));
{% endif %}
{% for i in range(PX) %}
          s{{ i }} = s{{ i }} + U{{ q }} * X{{ i }}_{{ q }};
{% endfor %}
{% endfor %}
{% if not eep.empty %}
          if (kc + {{ KC }}u >= K4) {  // the last chunk: the expansion's epilogue
{{ hoist_q4(eep, "eq", "cb * 4u", sg=sg) }}
{% for i in range(PX) %}
            s{{ i }} = {{ ep_v4(eep, "s" ~ i, "0u", "cb * 4u", "eq") }};
{% endfor %}
          }
{% endif %}
{% for i in range(PX) %}
          if (pin{{ i }}) { xs[p{{ i }} * C4 + cb] = s{{ i }}; }
{% endfor %}
        }
      }
    }
  }
  workgroupBarrier();
  if (gidx >= prm[0].x) { return; }
{% endif %}
{% if sg %}
  // column block slowest, pixel blocks padded to prm[4].y (a multiple of sg): the lanes of a
  // subgroup share one column block, so they share its loads of the taps and the projection
  let PP = prm[4].y;
{% if fdiv %}
  let sb = u32((f32(gidx) + 0.5) / f32(PP));
{% else %}
  let sb = gidx / PP;
{% endif %}
  let live = gidx - sb * PP < prm[4].x;  // a padding lane computes the last block and stores nothing
  let idx = min(gidx - sb * PP, prm[4].x - 1u);
{% if fdiv %}
  let r1 = u32((f32(idx) + 0.5) / f32(OWB));
  let n = u32((f32(r1) + 0.5) / f32(OHB));
{% else %}
  let r1 = idx / OWB;
  let n = r1 / OHB;
{% endif %}
  let jb = sb * {{ NS }}u;  // this invocation's first vec4 column of the projection
{% else %}
{% if fdiv %}
  // Quotients through f32, exact for dividends below 2^20 (fdiv): x86 has no vector integer
  // division, so runtime divisors would otherwise cost a scalar division per lane.
  let idx = u32((f32(gidx) + 0.5) / f32(S));
  let r1 = u32((f32(idx) + 0.5) / f32(OWB));
  let n = u32((f32(r1) + 0.5) / f32(OHB));
{% else %}
  let idx = gidx / S;
  let r1 = idx / OWB;
  let n = r1 / OHB;
{% endif %}
  let jb = (gidx - idx * S) * {{ NS }}u;  // this invocation's first vec4 column of the projection
{% endif %}
  let wb = idx - r1 * OWB;
  let hb = r1 - n * OHB;
  let oh0 = hb * {{ TH }}u;
  let ow0 = wb * {{ TW }}u;
  let ih0 = i32(oh0 * {{ sh }}u) - i32(prm[2].z);
  let iw0 = i32(ow0 * {{ sw }}u) - i32(prm[2].w);
{{ rw.columns(seg) -}}
{% if expand and not xsh %}
{% for r, uses in rows %}
  let hy{{ r }} = ih0 + {{ r }};
  let hrok{{ r }} = u32(hy{{ r }}) < H;
  let hrow{{ r }} = (n * H + select(0u, u32(hy{{ r }}), hrok{{ r }})) * W;
{% for j in seg %}
  let hok{{ r }}_{{ j }} = hrok{{ r }} && cok{{ j }};
{% for kk in range(K4) %}
{% if x_loop %}
  var X{{ r }}_{{ j }}_{{ kk }} = vec4<f32>(0.0);
{% else %}
  let X{{ r }}_{{ j }}_{{ kk }} = vec4<f32>(x[(hrow{{ r }} + ci{{ j }}) * {{ K4 }}u + {{ kk }}u]);
{% endif %}
{% endfor %}
{% endfor %}
{% endfor %}
{% if x_loop and x_words %}
  // the expansion's inputs, one word of 8 values (two vec4s) of each pixel per iteration
  // (prm[3].z / 2 = K4 / 2 iterations: LLVM keeps the loop; half the access components of vec4 loads)
{% if x_shift %}
  // each pixel's K4 values move down two places per iteration: after K4 / 2 of them value kk is X.._kk
{% endif %}
  for (var kw = 0u; kw < prm[3].z / 2u; kw = kw + 1u) {
{% for r, uses in rows %}
{% for j in seg %}
    let v{{ r }}_{{ j }} = x[(hrow{{ r }} + ci{{ j }}) * {{ K4 // 2 }}u + kw];
{% for h in range(2) %}
    let v{{ r }}_{{ j }}_{{ h }} = up(v{{ r }}_{{ j }}{{ parts[h] }});
{% endfor %}
{% if x_shift %}
{% for kk in range(K4 - 2) %}
    X{{ r }}_{{ j }}_{{ kk }} = X{{ r }}_{{ j }}_{{ kk + 2 }};
{% endfor %}
{% for h in range(2) %}
    X{{ r }}_{{ j }}_{{ K4 - 2 + h }} = v{{ r }}_{{ j }}_{{ h }};
{% endfor %}
{% else %}
{% for kk in range(K4) %}
    X{{ r }}_{{ j }}_{{ kk }} = select(X{{ r }}_{{ j }}_{{ kk }}, v{{ r }}_{{ j }}_{{ kk % 2 }}, kw == {{ kk // 2 }}u);
{% endfor %}
{% endif %}
{% endfor %}
{% endfor %}
  }
{% elif x_loop %}
  // the expansion's inputs, one vec4 of each pixel per iteration (prm[3].z = K4 iterations:
  // LLVM keeps the loop, and the text has one load per pixel instead of K4)
{% if x_shift %}
  // each pixel's K4 values move down one place per iteration: after K4 of them value kk is X.._kk
{% endif %}
  for (var kk = 0u; kk < prm[3].z; kk = kk + 1u) {
{% for r, uses in rows %}
{% for j in seg %}
    let v{{ r }}_{{ j }} = vec4<f32>(x[(hrow{{ r }} + ci{{ j }}) * {{ K4 }}u + kk]);
{% if x_shift %}
{% for kk in range(K4 - 1) %}
    X{{ r }}_{{ j }}_{{ kk }} = X{{ r }}_{{ j }}_{{ kk + 1 }};
{% endfor %}
    X{{ r }}_{{ j }}_{{ K4 - 1 }} = v{{ r }}_{{ j }};
{% else %}
{% for kk in range(K4) %}
    X{{ r }}_{{ j }}_{{ kk }} = select(X{{ r }}_{{ j }}_{{ kk }}, v{{ r }}_{{ j }}, kk == {{ kk }}u);
{% endfor %}
{% endif %}
{% endfor %}
{% endfor %}
  }
{% endif %}
{% endif %}
{% for t in range(TH) %}
{% for p in range(TW) %}
  let in{{ t }}_{{ p }} = oh0 + {{ t }}u < OH && ow0 + {{ p }}u < OW{{ " && live" if sg }};
  let pix{{ t }}_{{ p }} = (n * OH + oh0 + {{ t }}u) * OW + ow0 + {{ p }}u;
{% for j in range(NS) %}
  var a{{ t }}_{{ p }}_{{ j }} = vec4<f32>(0.0);
{% endfor %}
{% endfor %}
{% endfor %}
{% if sg %}
  // lane-shared loads: tap v (of KH KW) and projection vector v = c NS + j (row c of the
  // group, column jb + j) are loaded by lane v % sg and handed to the others by subgroupBroadcast
{% for t in range((KH * KW + sg - 1) // sg) %}
  let fo{{ t }} = min(lane + {{ t * sg }}u, {{ KH * KW - 1 }}u) * C4;
{% endfor %}
{% for t in range((4 * NS + sg - 1) // sg if mode != "store" else 0) %}
  let pv{{ t }} = min(lane + {{ t * sg }}u, {{ 4 * NS - 1 }}u);
{% if panel %}
  let po{{ t }} = jb * 4u * C4 + pv{{ t }};  // row c, column j of the column block's panel
{% else %}
  let po{{ t }} = (pv{{ t }} / {{ NS }}u) * N4 + {{ "min(jb + pv" ~ t ~ " % " ~ NS ~ "u, N4 - 1u)" if ragged else "jb + pv" ~ t ~ " % " ~ NS ~ "u" }};
{% endif %}
{% endfor %}
{% endif %}
{% set tail %}
{{ hoist_q4(ep, "q", "cb * 4u", sg=sg) }}
{% for t in range(TH) %}
{% for p in range(TW) %}
{% if mode == "store" %}
    if (in{{ t }}_{{ p }}) {
      let o = pix{{ t }}_{{ p }} * C4 * 4u + cb * 4u;
      let v = d{{ t }}_{{ p }};
      let e = {{ ep_v4(ep, "v", "o", "cb * 4u", "q", "xc" ~ t ~ "_" ~ p) }};
      out[pix{{ t }}_{{ p }} * C4 + cb] = vec4<{{ T }}>(e);
{% if pool %}
      psum = psum + e;
{% endif %}
    }
{% else %}
    // every pixel of the block, in the image or not (only the stores check): no branch here
    let e{{ t }}_{{ p }} = {{ ep_v4(ep, "d" ~ t ~ "_" ~ p, "pix" ~ t ~ "_" ~ p ~ " * C4 * 4u + cb * 4u", "cb * 4u", "q", "xc" ~ t ~ "_" ~ p) }};
{% endif %}
{% endfor %}
{% endfor %}
{% for j in range(NS if mode != "store" else 0) %}
    // projection columns 4 (jb + j) ..: each row of the matrix is loaded right before its uses
{% for c in range(4) %}
{% if sg %}
    let p{{ c }}_{{ j }} = subgroupBroadcast(pl{{ (c * NS + j) // sg }}, {{ (c * NS + j) % sg }}u);
{% else %}
{% if panel %}
    let p{{ c }}_{{ j }} = vec4<f32>(pw[jb * 4u * C4 + (cb * 4u + {{ c }}u) * {{ NS }}u + {{ j }}u]);
{% else %}
    let p{{ c }}_{{ j }} = vec4<f32>(pw[(cb * 4u + {{ c }}u) * N4 + {{ "min(jb + " ~ j ~ "u, N4 - 1u)" if ragged else "jb + " ~ j ~ "u" }}]);
{% endif %}
{% endif %}
{% endfor %}
    let P{{ j }} = mat4x4<f32>(p0_{{ j }}, p1_{{ j }}, p2_{{ j }}, p3_{{ j }});
{% for t in range(TH) %}
{% for p in range(TW) %}
    a{{ t }}_{{ p }}_{{ j }} = a{{ t }}_{{ p }}_{{ j }} + P{{ j }} * e{{ t }}_{{ p }};
{% endfor %}
{% endfor %}
{% endfor %}
{% endset %}
{% if xw %}
  // words of 8 channels: channel groups cb0 = 2 cw and cb1 = 2 cw + 1 per iteration, their
  // input one word per pixel (a load outside the image is skipped: the driver's per-lane loop
  // passes masked lanes by); each group's depthwise values, epilogue and projection as below
  for (var cw = 0u; cw < C4 / 2u; cw = cw + 1u) {
{% for h in range(2) %}
    let cb{{ h }} = 2u * cw + {{ h }}u;
{% if sg %}
{% for t in range((KH * KW + sg - 1) // sg) %}
    let wl{{ h }}_{{ t }} = vec4<f32>(f[fo{{ t }} + cb{{ h }}]);
{% endfor %}
{% endif %}
{% for kh in range(KH) %}
{% for kw in range(KW) %}
{% if sg %}
    let wh{{ h }}_{{ kh }}_{{ kw }} = subgroupBroadcast(wl{{ h }}_{{ (kh * KW + kw) // sg }}, {{ (kh * KW + kw) % sg }}u);
{% else %}
    let wh{{ h }}_{{ kh }}_{{ kw }} = vec4<f32>(f[{{ kh * KW + kw }}u * C4 + cb{{ h }}]);
{% endif %}
{% endfor %}
{% endfor %}
{% for t in range(TH) %}
{% for p in range(TW) %}
    var dh{{ h }}_{{ t }}_{{ p }} = vec4<f32>(0.0);
{% if center %}
    var xch{{ h }}_{{ t }}_{{ p }} = vec4<f32>(0.0);
{% endif %}
{% endfor %}
{% endfor %}
{% endfor %}
    for (var r = 0u; r < R; r = r + 1u) {
      let y = ih0 + i32(r);
      let rok = u32(y) < H;
      let row = (n * H + select(0u, u32(y), rok)) * W;
{% for j in seg %}
      var v{{ j }} = {{ LT }}();
      if (rok && cok{{ j }}) { v{{ j }} = x[(row + ci{{ j }}) * (C4 / 2u) + cw]; }
{% for h in range(2) %}
      let xh{{ h }}_{{ j }} = {{ RO }}up(v{{ j }}{{ parts[h] }}){{ RC }};
{% endfor %}
{% endfor %}
{% for h in range(2) %}
{% for t in range(TH) %}
{{ rw.row_taps("dh" ~ h ~ "_", t, KH, KW, TW, sh, sw, dh, dw, "h" ~ h ~ "_", "h" ~ h ~ "_") }}
{% if center %}
      if (r == {{ t + pt }}u) {
{% for p in range(TW) %}
        xch{{ h }}_{{ t }}_{{ p }} = xh{{ h }}_{{ p + pl }};
{% endfor %}
      }
{% endif %}
{% endfor %}
{% endfor %}
    }
{% for h in range(2) %}
    {
    let cb = cb{{ h }};
{% if sg %}
{% for t in range((4 * NS + sg - 1) // sg) %}
    let pl{{ t }} = vec4<f32>(pw[cb * {{ "4u * N4" if not panel else (4 * NS) ~ "u" }} + po{{ t }}]);
{% endfor %}
{% endif %}
{% for t in range(TH) %}
{% for p in range(TW) %}
    let d{{ t }}_{{ p }} = dh{{ h }}_{{ t }}_{{ p }};
{% if center %}
    let xc{{ t }}_{{ p }} = xch{{ h }}_{{ t }}_{{ p }};
{% endif %}
{% endfor %}
{% endfor %}
{{ tail }}
    }
{% endfor %}
  }
{% else %}
  for (var cb = 0u; cb < C4; cb = cb + 1u) {
{% if pool and mode == "store" %}
    var psum = vec4<f32>(0.0);
{% endif %}
{% if sg %}
{% for t in range((KH * KW + sg - 1) // sg) %}
    let wl{{ t }} = vec4<f32>(f[fo{{ t }} + cb]);
{% endfor %}
{% for t in range((4 * NS + sg - 1) // sg if mode != "store" else 0) %}
    let pl{{ t }} = vec4<f32>(pw[cb * {{ "4u * N4" if not panel else (4 * NS) ~ "u" }} + po{{ t }}]);
{% endfor %}
{% endif %}
{% for kh in range(KH) %}
{% for kw in range(KW) %}
{% if sg %}
    let w{{ kh }}_{{ kw }} = subgroupBroadcast(wl{{ (kh * KW + kw) // sg }}, {{ (kh * KW + kw) % sg }}u);
{% else %}
    let w{{ kh }}_{{ kw }} = vec4<f32>(f[{{ kh * KW + kw }}u * C4 + cb]);
{% endif %}
{% endfor %}
{% endfor %}
{% if expand and not xsh %}
{% for t in range((4 * K4 + sg - 1) // sg if sg else 0) %}
    let ul{{ t }} = vec4<f32>(we[cb * {{ 4 * K4 }}u + min(lane + {{ t * sg }}u, {{ 4 * K4 - 1 }}u)]);
{% endfor %}
{% for kq in range(4 * K4) %}
{% if sg %}
    let u{{ kq }} = subgroupBroadcast(ul{{ kq // sg }}, {{ kq % sg }}u);
{% else %}
    let u{{ kq }} = vec4<f32>(we[cb * {{ 4 * K4 }}u + {{ kq }}u]);
{% endif %}
{% endfor %}
{% for kk in range(K4) %}
    let U{{ kk }} = mat4x4<f32>(u{{ 4 * kk }}, u{{ 4 * kk + 1 }}, u{{ 4 * kk + 2 }}, u{{ 4 * kk + 3 }});
{% endfor %}
{{ hoist_q4(eep, "eq", "cb * 4u", sg=sg) }}
{% endif %}
{% for t in range(TH) %}
{% for p in range(TW) %}
    var d{{ t }}_{{ p }} = vec4<f32>(0.0);
{% if center %}
    var xc{{ t }}_{{ p }} = vec4<f32>(0.0);
{% endif %}
{% endfor %}
{% endfor %}
{% if row_loop %}
    // the block's input rows in a loop (prm[3].w iterations): each row's columns are loaded once
    // and used by every output row t whose window reaches it, through tap row (r - t sh) / dh
    // (picked by selects), so the text has the columns of one row, not of all of them
    for (var r = 0u; r < R; r = r + 1u) {
      let y = ih0 + i32(r);
      let rok = u32(y) < H;
{% if xsh %}
      let row = select(0u, u32(y) - xr0, rok) * W;  // xs holds the band's rows
{% for j in seg %}
      let x{{ j }} = select(vec4<f32>(0.0), xs[(row + ci{{ j }}) * C4 + cb], rok && cok{{ j }});
{% endfor %}
{% else %}
      let row = (n * H + select(0u, u32(y), rok)) * W;
{% for j in seg %}
      let x{{ j }} = select(vec4<f32>(0.0), {{ RO }}vec4<f32>(x[(row + ci{{ j }}) * C4 + cb]){{ RC }}, rok && cok{{ j }});
{% endfor %}
{% endif %}
{% for t in range(TH) %}
{{ rw.row_taps("d", t, KH, KW, TW, sh, sw, dh, dw) }}
{% if center %}
      if (r == {{ t + pt }}u) {
{% for p in range(TW) %}
        xc{{ t }}_{{ p }} = x{{ p + pl }};
{% endfor %}
      }
{% endif %}
{% endfor %}
    }
{% else %}
{% for r, uses in rows %}
    {
{% if not expand or xsh %}
      let y = ih0 + {{ r }};
      let rok = u32(y) < H;
{% endif %}
{% if xsh %}
      let row = select(0u, u32(y) - xr0, rok) * W;  // xs holds the band's rows
{% elif not expand %}
      let row = (n * H + select(0u, u32(y), rok)) * W;
{% endif %}
{% for j in seg %}
{% if xsh %}
      let x{{ j }} = select(vec4<f32>(0.0), xs[(row + ci{{ j }}) * C4 + cb], rok && cok{{ j }});
{% elif expand %}
      let s{{ j }} = {% for kk in range(K4) %}U{{ kk }} * X{{ r }}_{{ j }}_{{ kk }}{{ " + " if not loop.last }}{% endfor %};
      let x{{ j }} = select(vec4<f32>(0.0), {{ ep_v4(eep, "s" ~ j, "0u", "cb * 4u", "eq") }}, hok{{ r }}_{{ j }});
{% else %}
      let x{{ j }} = select(vec4<f32>(0.0), {{ RO }}vec4<f32>(x[(row + ci{{ j }}) * C4 + cb]){{ RC }}, rok && cok{{ j }});
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
{% endif %}
{{ tail }}
{% if pool and mode == "store" %}
    // this block's channel sums: row idx (= (n * OHB + hb) * OWB + wb) of the [blocks, C4] partials
    {{ "if (live) { " if sg }}pool[idx * C4 + cb] = psum;{{ " }" if sg }}
{% endif %}
  }
{% endif %}
{% if mode == "conv" and col_loop %}
  let N = prm[0].w;
  // one column of the block per iteration (prm[3].y = NS iterations: LLVM keeps the loop, and
  // the text has TH x TW stores instead of TH x TW x NS); column j's accumulator is picked by selects
  for (var j = 0u; j < prm[3].y; j = j + 1u) {
    let col = jb + j;
{% if ragged %}
    if (col >= N4) { break; }
{% endif %}
{{ hoist_q4(pep, "gq", "4u * col", "N - 1u", sg=sg) }}
{% if pool %}
    var ps = vec4<f32>(0.0);
{% endif %}
{% for t in range(TH) %}
{% for p in range(TW) %}
    {
      let v = {% for jj in range(1, NS) %}select({% endfor %}a{{ t }}_{{ p }}_0{% for jj in range(1, NS) %}, a{{ t }}_{{ p }}_{{ jj }}, j == {{ jj }}u){% endfor %};
      if (in{{ t }}_{{ p }}) {
        let o = pix{{ t }}_{{ p }} * N + 4u * col;
{% if out_vec %}
{% if pep.given %}
        let g = {{ tl.given4(pep, "pg", "pix" ~ t ~ "_" ~ p ~ " * N4 + col") }};
{% endif %}
        let e = {{ ep_v4(pep, "v", "o", "4u * col", "gq", "g") }};
        out[pix{{ t }}_{{ p }} * N4 + col] = vec4<{{ T }}>(e);
{% if pool %}
        ps = ps + e;
{% endif %}
{% else %}
{% for c in range(4) %}
        if (4u * col + {{ c }}u < N) {
          out[o + {{ c }}u] = {{ T }}({{ tl.apply(pep, "v." ~ "xyzw"[c], "o + " ~ c ~ "u", "4u * col + " ~ c ~ "u", "gq" ~ c) }});
        }
{% endfor %}
{% endif %}
      }
    }
{% endfor %}
{% endfor %}
{% if pool %}
    // this block's column sums: row idx of the [blocks, N] partials
    {{ "if (live) { " if sg }}pool[idx * N4 + col] = ps;{{ " }" if sg }}
{% endif %}
  }
{% elif mode == "conv" %}
  let N = prm[0].w;
{% for j in range(NS) %}
{% for c in range(4) %}
  {{ tl.hoist_q(pep, "gq" ~ j ~ "_" ~ c, "min(4u * (jb + " ~ j ~ "u) + " ~ c ~ "u, N - 1u)") }}
{% endfor %}
{% if pool %}
  var ps{{ j }} = vec4<f32>(0.0);
{% endif %}
{% endfor %}
{% for t in range(TH) %}
{% for p in range(TW) %}
  if (in{{ t }}_{{ p }}) {
{% for j in range(NS) %}
    {{ "if (jb + " ~ j ~ "u < N4) " if ragged }}{
      let o = pix{{ t }}_{{ p }} * N + 4u * (jb + {{ j }}u);
      let v = a{{ t }}_{{ p }}_{{ j }};
{% if out_vec %}
{% if pep.given %}
      let g = {{ tl.given4(pep, "pg", "pix" ~ t ~ "_" ~ p ~ " * N4 + jb + " ~ j ~ "u") }};
{% endif %}
      let e = {{ ep_v4(pep, "v", "o", "4u * (jb + " ~ j ~ "u)", "gq" ~ j ~ "_", "g") }};
      out[pix{{ t }}_{{ p }} * N4 + jb + {{ j }}u] = vec4<{{ T }}>(e);
{% if pool %}
      ps{{ j }} = ps{{ j }} + e;
{% endif %}
{% else %}
{% for c in range(4) %}
      if (4u * (jb + {{ j }}u) + {{ c }}u < N) {
        out[o + {{ c }}u] = {{ T }}({{ tl.apply(pep, "v." ~ "xyzw"[c], "o + " ~ c ~ "u", "4u * (jb + " ~ j ~ "u) + " ~ c ~ "u", "gq" ~ j ~ "_" ~ c) }});
      }
{% endfor %}
{% endif %}
    }
{% endfor %}
  }
{% endfor %}
{% endfor %}
{% for j in range(NS if pool else 0) %}
  // this block's column sums: row idx of the [blocks, N] partials
  {{ "if (jb + " ~ j ~ "u < N4) " if ragged }}{ {{ "if (live) { " if sg }}pool[idx * N4 + jb + {{ j }}u] = ps{{ j }};{{ " }" if sg }} }
{% endfor %}
{% elif mode == "transpose" and orow %}
{% for oc in range(O2) %}
  {{ tl.hoist_q(pep, "gq" ~ oc, oc ~ "u") }}
{% endfor %}
{% for t in range(TH) %}
  if (in{{ t }}_0) {
{% for a_ in range(KH2) %}
    {
      // output row {{ a_ }} of block row {{ t }}: value q = (p * KW2 + b) * O2 + oc of the row is pixel p's n = ({{ a_ }} * KW2 + b) * O2 + oc
      let o = (((n * OH + oh0 + {{ t }}u) * {{ KH2 }}u + {{ a_ }}u) * OW + ow0) * {{ KW2 * O2 }}u;
{% for h in range(2) %}
      let v{{ h }} = vec4<f32>(
{%- for q in range(4 * h, 4 * h + 4) %}
{%- set p = q // (KW2 * O2) %}{% set b_ = (q // O2) % KW2 %}{% set oc = q % O2 %}{% set nn = (a_ * KW2 + b_) * O2 + oc %}
{{ tl.apply(pep, "a" ~ t ~ "_" ~ p ~ "_" ~ (nn // 4) ~ "." ~ "xyzw"[nn % 4], "o + " ~ q ~ "u", oc ~ "u", "gq" ~ oc) }}{{ ", " if not loop.last }}
{%- endfor %});
{% endfor %}
      out[o / 8u] = {{ LT }}(pk(v0), pk(v1));
    }
{% endfor %}
  }
{% endfor %}
{% elif mode == "transpose" %}
{% for oc in range(O2) %}
  {{ tl.hoist_q(pep, "gq" ~ oc, oc ~ "u") }}
{% endfor %}
{% for t in range(TH) %}
{% for p in range(TW) %}
  if (in{{ t }}_{{ p }}) {
    let b0 = ((n * OH + oh0 + {{ t }}u) * {{ KH2 }}u * OW * {{ KW2 }}u + (ow0 + {{ p }}u) * {{ KW2 }}u) * {{ O2 }}u;
{% for nn in range(N) %}
{% set a_ = nn // (KW2 * O2) %}{% set b_ = (nn // O2) % KW2 %}{% set oc = nn % O2 %}
    {
      let o = b0 + ({{ a_ }}u * OW * {{ KW2 }}u + {{ b_ }}u) * {{ O2 }}u + {{ oc }}u;
      out[o] = {{ T }}({{ tl.apply(pep, "a" ~ t ~ "_" ~ p ~ "_" ~ (nn // 4) ~ "." ~ "xyzw"[nn % 4], "o", oc ~ "u", "gq" ~ oc) }});
    }
{% endfor %}
  }
{% endfor %}
{% endfor %}
{% endif %}
}
