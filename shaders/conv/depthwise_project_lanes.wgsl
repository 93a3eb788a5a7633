{#-
  conv/depthwise_project_lanes.wgsl: a depthwise conv2d (NHWC) and the pointwise conv2d reading
  its output, in one kernel, with the channels across the lanes of a subgroup (the compiler's
  fuse_depthwise_project pass; docs/conv.md says which of the fused kernels runs where).

  One subgroup (the workgroup: sg invocations, one row of llvmpipe's SIMD lanes) owns a strip of
  TW output columns and walks down TH output rows of it, one output row per loop iteration.
  Lane l holds the depthwise channel groups l, l + sg, .. (CPL of them, four channels each) and
  computes the projection's output vec4 columns l, l + sg, .. (NPL of them). Per output row
  each lane loads only the input rows that enter its channels' window (sh rows of the strip's
  columns; the KH - sh rows the next output row shares with this one stay in registers, as in
  conv/depthwise_project_strip.wgsl), computes its TW depthwise pixels per channel group, and
  `subgroupBroadcast` (a register extract on llvmpipe) hands every lane's depthwise values to
  the others: each lane then sums its output columns' `mat4x4 * vec4` products over all the
  input channel groups. The lanes' loads are of different channels at the same pixel, so no
  input value is loaded twice within a row and only sh rows per output row; no accumulator
  lives across the loop; the held values per lane are one channel group's, not all of them
  (the strip kernel unrolls every channel in every invocation, which limits it to 16).

  The lanes past the channels (C4 not a multiple of sg) load nothing and contribute zeros;
  those past the projection's columns store nothing. The projection matrix is zero-padded to
  4 sg CPL rows of sg NPL vec4 columns, so its loads need no bounds.

  With `xres` the projection's residual add reads the depthwise input itself at the output's
  pixel (stride 1, same size, N == C): lane l's output column l + m sg is its own channel group
  m, whose input at that pixel is in the held rows (row pt, column p + pl of the window): no load.

  Context:
    T            storage type ("f32" or "f16"); accumulation in f32
    sg           lanes of a subgroup (the workgroup's size)
    CPL, NPL     channel groups and projection vec4 columns per lane (unrolled); N4 is a
                 parameter
    split        S = prm[3].x subgroups per strip, each computing the depthwise values itself
                 and projecting them to its own block of NPL sg vec4 columns (cb; the lane's
                 columns cb NPL sg + l + m sg), the matrix rows prm[3].y = S NPL sg vec4s long
    PK           pixels projected per pass (1, or 2-4 for a projection of at most sg / 2 vec4
                 columns, NPL 1): lane l projects pixel l / LPP of the pass (LPP = sg / PK lanes per
                 pixel) to column l % LPP, so that lanes past the columns do not repeat the
                 products of the lanes that store; each broadcast value is picked by its pixel
                 (selects) and a pixel takes TW / PK passes instead of TW
    CS           the channel groups whose values are broadcast (C4, or sg CPL: C4 is then a
                 parameter only, and layers with the same CPL and NPL share a pipeline)
    TW           output columns per strip
    KH, KW, sh, sw, dw   the depthwise window (vertical dilation 1); seg: the input column
                 offsets (from ow0 sw - pl) the strip reads
    hold         KH - sh: input rows kept from one output row to the next; warm: the iterations
                 before the first output row (ceil(hold / sh)), which only load
    in_relu      relu of each input value as it is loaded (the compiler's fuse_conv_input_relu, the
                 depthwise conv's attrs["input_relu"]; out-of-image taps stay 0 = relu(0))
    ep           the depthwise epilogue (bias first; channel = the depthwise channel); ep.given:
                 a residual add of the depthwise input, read from the held rows (needs pt, pl)
    pep          the projection's epilogue (bias first); pep.given: its residual operand (same
                 shape as out), bound as `pg` and loaded as vec4 (or the pool over its window:
                 pep.given_g4), or with `xres` the held input
    xres, pt, pl see above (pt, pl: the leading padding, in the text only for the held residuals)
    f_uniform    0, or the depthwise filter is in a uniform buffer of this many vec4s
    p_uniform    0, or the padded projection matrix is in a uniform buffer of this many vec4s
    fns          (T, names) activation helpers of the epilogues
    fdiv         strips < 2^20: the index is split with f32 divisions (exact there)
    xw           (CPL 2, C4 even) the input bound as words of 8 channels (vec4<u64> for float32,
                 vec2<u64> for float16; the same bits): lane l holds channel groups 2l and 2l + 1
                 and loads both as one word; on Mesa 22 every storage access is a loop over the
                 lanes and the components, and a u64 component moves two float32 or four float16
                 values (else lane l holds groups l, l + sg)
    ow           (NPL 2, N4 even, PK 1, no split) the output bound as such words: lane l's
                 projection columns are 2l and 2l + 1, stored as one word (else l, l + sg); with
                 xres, xw == ow (a lane's columns are its own channel groups)
    w4           the bindings among "x", "out" whose vec4 accesses are words of 4 values
                 (vec2<u64> for float32, one u64 for float16; the same bits): the input where
                 not xw (and not CX), the output where not ow (and not NX)
    CX           0, or the input's channel count where it is not a multiple of 4: x is bound as
                 scalars (a pixel's channels do not start on a vec4), each group's values are
                 loaded one by one, those past CX not at all; the taps f are zero-padded to C4
                 groups and the padded channels' depthwise values zeroed (cm<k>), so the
                 projection's zero rows see zeros
    NX           0, or the output's channel count where it is not a multiple of 4: out is bound
                 as scalars and each column stored value by value (om<m>: those inside NX);
                 the projection's per-channel operands are read at channels clamped to NX - 1
    xpool        with xres: the residual is a pool of the depthwise input inside its window
                 (op "max" / "average", window (WH, WW), at: its offset in the depthwise window),
                 computed from the held rows. With xres the residual may have fewer channels
                 than the output (zero-padded): a column past the lane's held groups adds 0
    p2           0, or the second stage's consumer columns per lane (NPL2): a pointwise conv of the
                 projection's output (N4S vec4 columns, baked) to K4S vec4 columns, computed in the
                 same pass: after a pixel's projection every lane broadcasts its columns' values
                 (rounded to T, as stored) and sums its consumer columns' products over them (fused
                 multiply-adds, one column of a 4 x 4 block at a time); its epilogue pep2 (bias first, per-channel operands only), its matrix
                 pw2 ([N, 4 sg NPL2] zero-padded; p2_uniform: in a uniform buffer of this many
                 vec4s), its output out2 (ow2: as words of 8 values, lane l's columns 2l, 2l + 1;
                 "out" in w4 otherwise words of 4). Only with one pixel per pass, no split, N a
                 multiple of 4: the projection's columns are computed whatever the mask and stored
                 under it. PK2: the second stage's pixels per pass (1, or 2-4 for a consumer of at
                 most sg / 2 vec4 columns, NPL2 1: lane l takes pixel l / (sg / PK2) of the pass and
                 column l % (sg / PK2), as PK does for the projection)
  Parameters (uniform `prm`, u32 vec4s): 0: invocations (NB * RB * OWB * S * sg), H, W, OH
    1: OW, OWB = ceil(OW / TW), RB = ceil(OH / TH), TH  2: pt, pl, C4, N4  3: S (split), the
    padded matrix's row in vec4s
  Bindings: x (NHWC, vec4), f ([KH, KW, C] vec4), ep operands..., pw ([4 sg CPL, sg NPL] vec4),
    pep operands..., [pg (pep.given without xres)], [pw2, pep2 operands... (p2)], prm, out, [out2 (p2)].
  Workgroup: (sg, 1, 1); strip fastest, then row chunk, then batch.
-#}
{% import "_lib/tile.wgsl" as tl %}
{% import "conv/_rows.wgsl" as rw %}
{% set RO = "max(" if in_relu else "" %}
{% set RC = ", vec4<f32>(0.0))" if in_relu else "" %}
{% from "conv/_rows.wgsl" import ep_v4 %}
{#- The input row kh of the current window, the lane's channel group k, column offset j. -#}
{% macro xin(kh, k, j) %}{{ "X" if kh < hold else "Y" }}{{ kh }}_{{ k }}_{{ j }}{% endmacro %}
{#- The residual of output column m at pixel p from the held rows (xres): the depthwise input
   at the pixel, or with xpool the pool of its window (rows at[0] + a, columns p sw + at[1] + b
   of the depthwise window); zero for a column past the lane's channel groups (padding). -#}
{% macro held(m, p) -%}
{% if m >= CPL %}vec4<f32>(0.0)
{%- elif xpool %}
{%- set ts = [] %}
{%- for a in range(xpool.window[0]) %}{% for b in range(xpool.window[1]) %}{% set _ = ts.append(xin(xpool.at[0] + a, m, p * sw + xpool.at[1] + b)) %}{% endfor %}{% endfor %}
{%- if xpool.op == "max" %}{% for t in ts[1:] %}max({% endfor %}{{ ts[0] }}{% for t in ts[1:] %}, {{ t }}){% endfor %}
{%- else %}({{ ts | join(" + ") }}) * {{ 1.0 / (ts | length) }}{% endif %}
{%- else %}{{ xin(pt, m, p + pl) }}{% endif %}
{%- endmacro %}
{#- Store the vec4 `r` of projection column og<m> at pixel index `px` (NX: value by value,
   those past NX not at all). -#}
{% macro store(m, px, r) -%}
{% set q = "(" ~ px ~ ")" if " " in px else px %}
{% if NX %}
{
          let ob = {{ q }} * {{ NX }}u + 4u * og{{ m }};
          let rv = {{ r }};
          out[ob] = {{ T }}(rv.x);
{% for c in range(1, 4) %}
          if (om{{ m }}.{{ "xyzw"[c] }}) { out[ob + {{ c }}u] = {{ T }}(rv.{{ "xyzw"[c] }}); }
{% endfor %}
        }
{%- else %}out[{{ q }} * N4 + og{{ m }}] = {{ "pk" if oh else "vec4<" ~ T ~ ">" }}({{ r }});{% endif %}
{%- endmacro %}
{#- The output index of projection column og<m>'s first value at pixel index `px`. -#}
{% macro oidx(m, px) -%}
{% set q = "(" ~ px ~ ")" if " " in px else px %}
{{ q ~ " * " ~ NX ~ "u + 4u * og" ~ m if NX else q ~ " * 4u * N4 + 4u * og" ~ m }}
{%- endmacro %}
{#- Channel group s's lane and its index k there (the broadcast's source). -#}
{% macro src(s) %}{{ "e" ~ (s % 2) if xw else "e" ~ (s // sg) }}{% endmacro %}
{% macro srcl(s) %}{{ (s // 2 if xw else s % sg) }}{% endmacro %}
{#- The lane's k-th channel group and m-th projection column (before cb0). -#}
{% macro grp(k) %}{{ ("2u * lane + " ~ k ~ "u") if xw else ("lane + " ~ (k * sg) ~ "u") }}{% endmacro %}
{% macro col2(m) %}{{ "lc2" if PK2 > 1 else ("2u * lane + " ~ m ~ "u") if ow2 else ("lane + " ~ (m * sg) ~ "u") }}{% endmacro %}
{% macro col(m) %}{{ ("2u * lc + " ~ m ~ "u") if ow else ("lc + " ~ (m * sg) ~ "u") }}{% endmacro %}
{#- Depthwise pixel p of the lane's channel group k: its KH x KW products, one expression. -#}
{% macro xsum(k, p) %}{% for kh in range(KH) %}{% for kw in range(KW) %}{{ xin(kh, k, p * sw + kw * dw) }} * w{{ k }}_{{ kh }}_{{ kw }}{{ " + " if not loop.last }}{% endfor %}{{ " + " if not loop.last }}{% endfor %}{% endmacro %}
{#- The second stage (p2) of pixel p: every projection column of the pixel (r<m>_<p> of the lanes,
   as stored), broadcast, times the lane's consumer columns (fused multiply-adds, one column of a
   4 x 4 block at a time), through pep2, stored under the mask. -#}
{% macro second(p) %}
      // the consumer conv (second stage): the pixel's N4S projection columns as stored, broadcast,
      // times this lane's consumer columns
{% for s in range(N4S) %}
{% set r = "r" ~ (s % 2 if ow else s // sg) ~ "_" ~ p %}
      let z{{ s }}_{{ p }} = subgroupBroadcast({{ "vec4<f32>(vec4<f16>(" ~ r ~ "))" if T == "f16" else r }}, {{ s // 2 if ow else s % sg }}u);
{% endfor %}
{% for m in range(p2) %}
      var a2_{{ m }}_{{ p }} = vec4<f32>(0.0);
{% for s in range(N4S) %}
      a2_{{ m }}_{{ p }} = {% for c in range(4) %}fma(Q{{ m }}_{{ s }}[{{ c }}], vec4<f32>(z{{ s }}_{{ p }}.{{ "xyzw"[c] }}), {% endfor %}a2_{{ m }}_{{ p }}))));
{% endfor %}
      let r2_{{ m }}_{{ p }} = {{ ep_v4(pep2, "a2_" ~ m ~ "_" ~ p, "(pixb + " ~ p ~ "u) * " ~ 4 * K4S ~ "u + 4u * ug" ~ m, "4u * ug" ~ m, "qq" ~ m ~ "_") }};
{% endfor %}
{% if ow2 %}
      if (rok && in{{ p }} && ul0) { out2[(pixb + {{ p }}u) * {{ K4S // 2 }}u + lane] = {{ LT }}(pk(r2_0_{{ p }}), pk(r2_1_{{ p }})); }
{% else %}
{% for m in range(p2) %}
      if (rok && in{{ p }} && ul{{ m }}) { out2[(pixb + {{ p }}u) * {{ K4S }}u + ug{{ m }}] = {{ "pk" if oh2 else "vec4<" ~ T ~ ">" }}(r2_{{ m }}_{{ p }}); }
{% endfor %}
{% endif %}
{% endmacro %}
{#- The second stage (p2) with PK2 pixels per pass (a consumer of at most sg / 2 vec4 columns,
   one per lane): lane l takes pixel t + l / (sg / PK2) of the pass, column l % (sg / PK2); each
   broadcast value is picked by its pixel (selects). -#}
{% macro second_packed() %}
{% for t in range(0, TW, PK2) %}
      // the consumer conv (second stage), pixels {{ t }} .. {{ t + PK2 - 1 }}: every projection column
      // of each, as stored, broadcast, the lane's pixel's picked, times its consumer column
      {
{% for s in range(N4S) %}
{% set ns = namespace(e="") %}
{% for j in range([PK2, TW - t] | min) %}
{% set r = "r" ~ (s % 2 if ow else s // sg) ~ "_" ~ (t + j) %}
{% set b = "subgroupBroadcast(" ~ ("vec4<f32>(vec4<f16>(" ~ r ~ "))" if T == "f16" else r) ~ ", " ~ (s // 2 if ow else s % sg) ~ "u)" %}
{% set ns.e = b if j == 0 else "select(" ~ ns.e ~ ", " ~ b ~ ", pp2 == " ~ j ~ "u)" %}
{% endfor %}
        let z{{ s }} = {{ ns.e }};
{% endfor %}
        var a2 = vec4<f32>(0.0);
{% for s in range(N4S) %}
        a2 = {% for c in range(4) %}fma(Q0_{{ s }}[{{ c }}], vec4<f32>(z{{ s }}.{{ "xyzw"[c] }}), {% endfor %}a2))));
{% endfor %}
        let px = pixb + {{ t }}u + pp2;
        let r2 = {{ ep_v4(pep2, "a2", "px * " ~ 4 * K4S ~ "u + 4u * ug0", "4u * ug0", "qq0_") }};
        if (rok && ow0 + {{ t }}u + pp2 < OW{{ (" && pp2 < " ~ (TW - t) ~ "u") if TW - t < PK2 }} && ul0) { out2[px * {{ K4S }}u + ug0] = {{ "pk" if oh2 else "vec4<" ~ T ~ ">" }}(r2); }
      }
{% endfor %}
{% endmacro %}
{% if T == "f16" %}
enable f16;
{% endif %}
{% set LT = "vec4<u64>" if T == "f32" else "vec2<u64>" %}
{% set parts = [".xy", ".zw"] if T == "f32" else [".x", ".y"] %}
{% set WT = "vec2<u64>" if T == "f32" else "u64" %}
{% set xh = "x" in w4 and not xw and not CX %}
{% set oh = "out" in w4 and not ow and not NX %}
{% set nb = namespace(i=2) %}
{% if xw or xh %}
@group(0) @binding(0) var<storage, read> x: array<{{ LT if xw else WT }}>;
{% else %}
{{ tl.decl(0, "x", T, not CX, false) }}
{% endif %}
{{ tl.weights(1, "f", T, true, f_uniform) }}
{{ tl.epilogue_decls(ep, nb.i) }}
{% set nb.i = nb.i + ep.operands | length %}
{{ tl.weights(nb.i, "pw", T, true, p_uniform) }}
{{ tl.epilogue_decls(pep, nb.i + 1) }}
{% set nb.i = nb.i + 1 + pep.operands | length %}
{% if pep.given and not xres %}
{{ tl.decl(nb.i, "pg", T, true, false) }}
{{ tl.given_fns(pep, "pg", true) }}
{% set nb.i = nb.i + 1 %}
{% endif %}
{% if p2 %}
{{ tl.weights(nb.i, "pw2", T, true, p2_uniform) }}
{{ tl.epilogue_decls(pep2, nb.i + 1) }}
{% set nb.i = nb.i + 1 + pep2.operands | length %}
{% set oh2 = "out" in w4 and not ow2 %}
{% endif %}
@group(0) @binding({{ nb.i }}) var<uniform> prm: array<vec4<u32>, 4>;
{% if ow or oh %}
@group(0) @binding({{ nb.i + 1 }}) var<storage, read_write> out: array<{{ LT if ow else WT }}>;
{% else %}
{{ tl.decl(nb.i + 1, "out", T, not NX, true) }}
{% endif %}
{% if p2 %}
@group(0) @binding({{ nb.i + 2 }}) var<storage, read_write> out2: array<{{ LT if ow2 else WT if oh2 else "vec4<" ~ T ~ ">" }}>;
{% endif %}
{{ rw.pair_fns(fns, ep, pep) }}
{% if p2 and not pep2.empty %}
{{ pep2.code }}
{{ rw.ep_v4_def(pep2) }}
{% endif %}
{{ rw.word_fns(T) if xw or ow or xh or oh or p2 and (ow2 or oh2) }}
@compute @workgroup_size({{ sg }})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(subgroup_invocation_id) lane: u32) {
  let gidx = gid.x + gid.y * nwg.x * {{ sg }}u;
  if (gidx >= prm[0].x) { return; }  // whole subgroups: prm[0].x is a multiple of sg
  let H = prm[0].y;
  let W = prm[0].z;
  let OH = prm[0].w;
  let OW = prm[1].x;
  let OWB = prm[1].y;
  let RB = prm[1].z;
  let TH = prm[1].w;
  let C4 = prm[2].z;
  let N4 = prm[2].w;
{% if split %}
  // prm[3].x subgroups per strip, one per block of NPL sg projection columns (cb)
  let q = gidx / {{ sg }}u;
  let sid = q / prm[3].x;  // the subgroup's strip
  let cb = q - sid * prm[3].x;
  let cb0 = cb * {{ NPL * sg }}u;
{% else %}
  let sid = gidx / {{ sg }}u;  // the subgroup's strip
  let cb0 = 0u;
{% endif %}
{% if PK > 1 %}
  let pp = lane / {{ sg // PK }}u;  // the lane's pixel within a pass of PK pixels
  let lc = lane - pp * {{ sg // PK }}u;  // and its projection column
{% else %}
  let lc = lane;
{% endif %}
{% if fdiv %}
  let r1 = u32((f32(sid) + 0.5) / f32(OWB));
  let n = u32((f32(r1) + 0.5) / f32(RB));
{% else %}
  let r1 = sid / OWB;
  let n = r1 / RB;
{% endif %}
  let ow0 = (sid - r1 * OWB) * {{ TW }}u;
  let oh0 = (r1 - n * RB) * TH;
  let ih0 = i32(oh0 * {{ sh }}u) - i32(prm[2].x);
  let iw0 = i32(ow0 * {{ sw }}u) - i32(prm[2].y);
{{ rw.columns(seg) -}}
{% for p in range(TW) %}
  let in{{ p }} = ow0 + {{ p }}u < OW;
{% endfor %}
  // once per invocation: the lane's channel groups, their taps and per-channel operands; its
  // projection columns, their 4 x 4 blocks of every input channel group and operands
{% for k in range(CPL) %}
  let cl{{ k }} = {{ grp(k) }} < C4;
  let cg{{ k }} = min({{ grp(k) }}, C4 - 1u);
{% if CX %}
  // the group's channels inside the input (the last group's tail is padding)
  let cm{{ k }} = vec4<bool>(cl{{ k }}{% for c in range(1, 4) %}, cl{{ k }} && 4u * cg{{ k }} + {{ c }}u < {{ CX }}u{% endfor %});
{% endif %}
{% for kh in range(KH) %}
{% for kw in range(KW) %}
  let w{{ k }}_{{ kh }}_{{ kw }} = vec4<f32>(f[{{ kh * KW + kw }}u * C4 + cg{{ k }}]);
{% endfor %}
{% endfor %}
{% for c in range(4) %}
  {{ tl.hoist_q(ep, "q" ~ k ~ "_" ~ c, ("min(4u * cg" ~ k ~ " + " ~ c ~ "u, " ~ (CX - 1) ~ "u)") if CX else ("4u * cg" ~ k ~ " + " ~ c ~ "u")) }}
{% endfor %}
{% endfor %}
{% for m in range(NPL) %}
  let ol{{ m }} = cb0 + {{ col(m) }} < N4;
  let og{{ m }} = min(cb0 + {{ col(m) }}, N4 - 1u);
{% for s in range(CS) %}
  let P{{ m }}_{{ s }} = mat4x4<f32>({% for c in range(4) %}vec4<f32>(pw[{{ ("prm[3].y * " ~ (4 * s + c) ~ "u + cb0") if split else ((4 * s + c) * sg * NPL) ~ "u" }} + {{ col(m) }}]){{ ", " if not loop.last }}{% endfor %});
{% endfor %}
{% for c in range(4) %}
  {{ tl.hoist_q(pep, "g" ~ m ~ "_" ~ c, ("min(4u * og" ~ m ~ " + " ~ c ~ "u, " ~ (NX - 1) ~ "u)") if NX else ("4u * og" ~ m ~ " + " ~ c ~ "u")) }}
{% endfor %}
{% if NX %}
  // the column's values inside the output (the last column's tail is padding)
  let om{{ m }} = vec4<bool>(true{% for c in range(1, 4) %}, 4u * og{{ m }} + {{ c }}u < {{ NX }}u{% endfor %});
{% endif %}
{% endfor %}
{% if PK2 > 1 %}
  let pp2 = lane / {{ sg // PK2 }}u;  // the lane's pixel within a pass of the second stage
  let lc2 = lane - pp2 * {{ sg // PK2 }}u;  // and its consumer column
{% endif %}
{% for m in range(p2) %}
  let ul{{ m }} = {{ col2(m) }} < {{ K4S }}u;
  let ug{{ m }} = min({{ col2(m) }}, {{ K4S - 1 }}u);
{% for s in range(N4S) %}
  let Q{{ m }}_{{ s }} = mat4x4<f32>({% for c in range(4) %}vec4<f32>(pw2[{{ (4 * s + c) * sg * p2 }}u + {{ col2(m) }}]){{ ", " if not loop.last }}{% endfor %});
{% endfor %}
{% for c in range(4) %}
  {{ tl.hoist_q(pep2, "qq" ~ m ~ "_" ~ c, "4u * ug" ~ m ~ " + " ~ c ~ "u") }}
{% endfor %}
{% endfor %}
  // the window's rows 0 .. hold - 1, held from one iteration to the next; the first warm
  // iterations only load rows (so that the text has one step of loads)
{% for kh in range(hold) %}
{% for k in range(CPL) %}
{% for j in seg %}
  var X{{ kh }}_{{ k }}_{{ j }} = vec4<f32>(0.0);
{% endfor %}
{% endfor %}
{% endfor %}
  // TH + warm iterations for every strip (a bound uniform across the subgroup, whose lanes
  // exchange values in the loop); the rows past the image store nothing
  for (var i = 0u; i < TH + {{ warm }}u; i = i + 1u) {
    // the rows entering the window: rows hold .. KH - 1 of output row oh0 + i - warm's window
    let yb = ih0 + (i32(i) - {{ warm }}) * {{ sh }} + {{ hold }};
{% for jr in range(sh) %}
    let y{{ jr }} = yb + {{ jr }};
    let rk{{ jr }} = u32(y{{ jr }}) < H;
    let rw{{ jr }} = (n * H + select(0u, u32(y{{ jr }}), rk{{ jr }})) * W;
{% if xw %}
{% for j in seg %}
    // the lane's two channel groups, one word (a load outside the image or the channels is
    // skipped: the driver's per-lane loop passes masked lanes by)
    var v{{ jr }}_{{ j }} = {{ LT }}();
    if (rk{{ jr }} && cok{{ j }} && cl0) { v{{ jr }}_{{ j }} = x[(rw{{ jr }} + ci{{ j }}) * (C4 / 2u) + lane]; }
{% for k in range(2) %}
    let Y{{ hold + jr }}_{{ k }}_{{ j }} = {{ RO }}up(v{{ jr }}_{{ j }}{{ parts[k] }}){{ RC }};
{% endfor %}
{% endfor %}
{% elif CX %}
{% for k in range(CPL) %}
{% for j in seg %}
    // the group's channels value by value (those past CX not at all)
    var Y{{ hold + jr }}_{{ k }}_{{ j }} = vec4<f32>(0.0);
    if (rk{{ jr }} && cok{{ j }} && cl{{ k }}) {
      let xo = (rw{{ jr }} + ci{{ j }}) * {{ CX }}u + 4u * cg{{ k }};
      Y{{ hold + jr }}_{{ k }}_{{ j }}.x = {{ RO }}f32(x[xo]){{ ", 0.0)" if in_relu }};
{% for c in range(1, 4) %}
      if (cm{{ k }}.{{ "xyzw"[c] }}) { Y{{ hold + jr }}_{{ k }}_{{ j }}.{{ "xyzw"[c] }} = {{ RO }}f32(x[xo + {{ c }}u]){{ ", 0.0)" if in_relu }}; }
{% endfor %}
    }
{% endfor %}
{% endfor %}
{% else %}
{% for k in range(CPL) %}
{% for j in seg %}
    var Y{{ hold + jr }}_{{ k }}_{{ j }} = vec4<f32>(0.0);
    if (rk{{ jr }} && cok{{ j }} && cl{{ k }}) {
      Y{{ hold + jr }}_{{ k }}_{{ j }} = {{ RO }}{{ "up" if xh else "vec4<f32>" }}(x[(rw{{ jr }} + ci{{ j }}) * C4 + cg{{ k }}]){{ RC }};
    }
{% endfor %}
{% endfor %}
{% endif %}
{% endfor %}
    if (i >= {{ warm }}u) {
      let oh = oh0 + i - {{ warm }}u;
      let rok = oh < OH;
      let pixb = (n * OH + min(oh, OH - 1u)) * OW + ow0;
{% for k in range(CPL) %}
{% for p in range(TW) %}
      let e{{ k }}_{{ p }} = select(vec4<f32>(0.0), {{ ep_v4(ep, "(" ~ xsum(k, p) ~ ")", "(pixb + " ~ p ~ "u) * 4u * C4 + 4u * cg" ~ k, "4u * cg" ~ k, "q" ~ k ~ "_", xin(pt, k, p + pl) if ep.given else "") }}, {{ ("cm" if CX else "cl") ~ k }});
{% endfor %}
{% endfor %}
{% if PK > 1 %}
{% for t in range(0, TW, PK) %}
      // pixels t .. t + PK - 1: every lane's depthwise values, broadcast, the lane's pixel's
      // picked, times its projection column
      {
{% for s in range(CS) %}
      let b{{ s }} = {% for j in range(1, [PK, TW - t] | min) %}select({% endfor %}subgroupBroadcast({{ src(s) }}_{{ t }}, {{ srcl(s) }}u){% for j in range(1, [PK, TW - t] | min) %}, subgroupBroadcast({{ src(s) }}_{{ t + j }}, {{ srcl(s) }}u), pp == {{ j }}u){% endfor %};
{% endfor %}
        let a = {% for s in range(CS) %}P0_{{ s }} * b{{ s }}{{ " + " if not loop.last }}{% endfor %};
        let px = pixb + {{ t }}u + pp;
        if (rok && ow0 + {{ t }}u + pp < OW{{ (" && pp < " ~ (TW - t) ~ "u") if TW - t < PK }} && ol0) {
{% if pep.given %}
          let g = {{ tl.given4(pep, "pg", "px * N4 + og0") }};
{% endif %}
          {{ store(0, "px", ep_v4(pep, "a", oidx(0, "px"), "4u * og0", "g0_", "g")) }}
        }
      }
{% endfor %}
{% elif p2 %}
{% for p in range(TW) %}
      // pixel p: every lane's depthwise values, broadcast, times this lane's projection columns,
      // whatever the mask (the second stage broadcasts them), stored under it
{% for s in range(CS) %}
      let b{{ s }}_{{ p }} = subgroupBroadcast({{ src(s) }}_{{ p }}, {{ srcl(s) }}u);
{% endfor %}
{% for m in range(NPL) %}
      let a{{ m }}_{{ p }} = {% for s in range(CS) %}P{{ m }}_{{ s }} * b{{ s }}_{{ p }}{{ " + " if not loop.last }}{% endfor %};
{% if pep.given and xres %}
      let gv{{ m }}_{{ p }} = {{ held(m, p) }};
{% elif pep.given %}
      // (a pixel past the row or the image reads pixel 0: its value reaches no store)
      let gv{{ m }}_{{ p }} = {{ tl.given4(pep, "pg", "select(0u, pixb + " ~ p ~ "u, rok && in" ~ p ~ ") * N4 + og" ~ m) }};
{% endif %}
      let r{{ m }}_{{ p }} = {{ ep_v4(pep, "a" ~ m ~ "_" ~ p, oidx(m, "pixb + " ~ p ~ "u"), "4u * og" ~ m, "g" ~ m ~ "_", "gv" ~ m ~ "_" ~ p) }};
{% endfor %}
{% if ow %}
      if (rok && in{{ p }} && ol0) { out[(pixb + {{ p }}u) * (N4 / 2u) + lc] = {{ LT }}(pk(r0_{{ p }}), pk(r1_{{ p }})); }
{% else %}
{% for m in range(NPL) %}
      if (rok && in{{ p }} && ol{{ m }}) { {{ store(m, "pixb + " ~ p ~ "u", "r" ~ m ~ "_" ~ p) }} }
{% endfor %}
{% endif %}
{% if PK2 == 1 %}
{{ second(p) -}}
{% endif %}
{% endfor %}
{% if PK2 > 1 %}
{{ second_packed() -}}
{% endif %}
{% else %}
{% for p in range(TW) %}
      // pixel p: every lane's depthwise values, broadcast, times this lane's projection columns
      {
{% for s in range(CS) %}
      let b{{ s }} = subgroupBroadcast({{ src(s) }}_{{ p }}, {{ srcl(s) }}u);
{% endfor %}
{% if ow %}
      // the lane's two columns, one word
      if (rok && in{{ p }} && ol0) {
{% for m in range(2) %}
        let a{{ m }} = {% for s in range(CS) %}P{{ m }}_{{ s }} * b{{ s }}{{ " + " if not loop.last }}{% endfor %};
{% if pep.given and xres %}
        let g{{ m }} = {{ held(m, p) }};
{% elif pep.given %}
        let g{{ m }} = {{ tl.given4(pep, "pg", "(pixb + " ~ p ~ "u) * N4 + og" ~ m) }};
{% endif %}
        let r{{ m }} = {{ ep_v4(pep, "a" ~ m, "(pixb + " ~ p ~ "u) * 4u * N4 + 4u * og" ~ m, "4u * og" ~ m, "g" ~ m ~ "_", "g" ~ m) }};
{% endfor %}
        out[(pixb + {{ p }}u) * (N4 / 2u) + lc] = {{ LT }}(pk(r0), pk(r1));
      }
{% else %}
{% for m in range(NPL) %}
      {
        let a = {% for s in range(CS) %}P{{ m }}_{{ s }} * b{{ s }}{{ " + " if not loop.last }}{% endfor %};
        if (rok && in{{ p }} && ol{{ m }}) {
{% if pep.given and xres and split %}
          let g = {% for k in range(1, CPL) %}select({% endfor %}{{ xin(pt, 0, p + pl) }}{% for k in range(1, CPL) %}, {{ xin(pt, k, p + pl) }}, cb * {{ NPL }}u + {{ m }}u == {{ k }}u){% endfor %};
{% elif pep.given and xres %}
          let g = {{ held(m, p) }};
{% elif pep.given %}
          let g = {{ tl.given4(pep, "pg", "(pixb + " ~ p ~ "u) * N4 + og" ~ m) }};
{% endif %}
          {{ store(m, "pixb + " ~ p ~ "u", ep_v4(pep, "a", oidx(m, "pixb + " ~ p ~ "u"), "4u * og" ~ m, "g" ~ m ~ "_", "g")) }}
        }
      }
{% endfor %}
{% endif %}
      }
{% endfor %}
{% endif %}
    }
{% for kh in range(hold) %}
{% for k in range(CPL) %}
{% for j in seg %}
    X{{ kh }}_{{ k }}_{{ j }} = {{ xin(kh + sh, k, j) }};
{% endfor %}
{% endfor %}
{% endfor %}
  }
}
