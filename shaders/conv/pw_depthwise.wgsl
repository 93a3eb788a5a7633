{#-
  conv/pw_depthwise.wgsl: a pointwise (1x1) conv2d and the depthwise conv2d reading its output as
  one launch (the compiler's fuse_pw_depthwise; webnn_gpu/fusions/pw_depthwise.py), on NHWC images
  small enough that one workgroup holds a block of the pointwise output's channels for the whole
  image in workgroup memory (no halo to recompute).

  Workgroup (wid.x, wid.y), one subgroup of WG lanes, takes channel block wid.x (CB4 vec4s of
  channels) of image wid.y:
    1. the pointwise product for every pixel of the image and the block's channels: lane li takes
       pixels (it * WG + li) * TP .. + TP - 1 (clamped to the image: every lane runs every
       iteration) and all CB4 channel vec4s; each lane loads its share of the 4 x CB4 weight
       vectors a k step needs and subgroupBroadcast hands them to the others, one channel vec4
       at a time (its 4 vectors live across the TP pixels, as matmul/tile.wgsl's cols_first);
       its epilogue (ep1) applied, rounded to T, written to `mid` in workgroup memory (and to
       `keep`, the pointwise output, where something else reads it);
    2. a barrier;
    3. the depthwise conv from `mid`: an item is TW output columns of every output row for one
       channel vec4, walked down the rows as conv/depthwise.wgsl does (each input row loaded once
       into A accumulator slots); window positions outside the image read a clamped index and
       select zero (no branch); its epilogue (ep2) applied and stored. Where CB4 divides WG, lane
       li always takes channel vec4 li % CB4 (its taps and epilogue operands loaded once), else
       (wloop) item it is channel vec4 it % CB4 and loads them per item.

  Context (webnn_gpu/fusions/pw_depthwise.py `lower_pw_depthwise`):
    T            storage type ("f32" or "f16"); sums in f32
    K4           input channels / 4 of the pointwise conv
    N4           channel vec4s of the pointwise output (= the depthwise's channels / 4)
    CB4          channel vec4s per workgroup (divides N4); wloop: CB4 does not divide WG
    HW, H, W     the image; TP pixels per lane and iteration, ITERS iterations (ptail: the last
                 one's pixels pass the image, their stores are skipped)
    OH, OW, TW   the depthwise output; TW output columns per item (divides OW)
    KH, KW, sh, sw, dh, dw, pt, pl   the depthwise window, strides, dilations, leading padding
    A, taps, jrows   as conv/depthwise.wgsl's (webnn_gpu/ops/conv.py `_dw_taps`)
    seg          sorted distinct column offsets p * sw + kw * dw (p < TW, kw < KW)
    WG           invocations per workgroup, the subgroup size
    ep1, ep2     the two convs' epilogues (webnn_gpu/ops/_epilogue.py), applied per vec4 (ep_v4)
    fns          the activation helpers both call
    w1_uniform   0, or the pointwise weights ([K, N] row-major) are a float32 uniform buffer of
                 that many vec4s; f_uniform likewise for the depthwise taps ([KH, KW, N])
    x64          x, storage weights, mid, out and keep as u64 words of T, the same bits (4 float32
                 values as a vec2<u64>, 4 float16 ones as a u64; linalg.tile_words)
    keep         also store the pointwise output (binding `keep`, NHWC)
  Bindings: x (NHWC, K channels), w1 ([K, N]), ep1's operands, f ([KH, KW, N]), ep2's operands,
    out (NHWC), keep (keep only).
  Workgroup: (WG, 1, 1); dispatch (N4 / CB4, batch, 1).
-#}
{% import "_lib/tile.wgsl" as tl %}
{% import "conv/_rows.wgsl" as rw %}
{% from "conv/_rows.wgsl" import ep_v4, hoist_q4, pair_fns %}
{% if T == "f16" %}
enable f16;
{% endif %}
{% set WT = ("vec2<u64>" if T == "f32" else "u64") if x64 else "vec4<f32>" %}
{% if x64 %}
@group(0) @binding(0) var<storage, read> x: array<{{ WT }}>;
{% else %}
{{ tl.decl(0, "x", T, true, false) }}
{% endif %}
{% if x64 and not w1_uniform %}
@group(0) @binding(1) var<storage, read> w1: array<{{ WT }}>;
{% else %}
{{ tl.weights(1, "w1", T, true, w1_uniform) }}
{% endif %}
{{ tl.epilogue_decls(ep1, 2) }}
{% set f_at = 2 + ep1.operands | length %}
{{ tl.weights(f_at, "f", T, true, f_uniform) }}
{{ tl.epilogue_decls(ep2, f_at + 1) }}
{% set o_at = f_at + 1 + ep2.operands | length %}
{% macro odecl(index, name) %}
{% if x64 %}
@group(0) @binding({{ index }}) var<storage, read_write> {{ name }}: array<{{ WT }}>;
{% else %}
{{ tl.decl(index, name, T, true, true) }}
{% endif %}
{% endmacro %}
{{ odecl(o_at, "out") }}
{% if keep %}
{{ odecl(o_at + 1, "keep") }}
{% endif %}
{{ pair_fns(fns, ep1, ep2) }}
{% if x64 %}
{{ tl.word_fns(T) }}
{% endif %}

// the pointwise output of this workgroup's channel block: pixel p's vec4 c at p * CB4 + c
// (x64: as words of T, the same bits: the values are rounded to T already)
var<workgroup> mid: array<{{ WT }}, {{ HW * CB4 }}>;

{#- stage 2: the channel vec4 gc's taps and epilogue operands #}
{% macro channel(pad) %}
{{ pad }}let gc = wid.x * {{ CB4 }}u + c4;
{% for kh in range(KH) %}
{% for kw in range(KW) %}
{{ pad }}let w{{ kh }}_{{ kw }} = vec4<f32>(f[{{ (kh * KW + kw) * N4 }}u + gc]);
{% endfor %}
{% endfor %}
{{ hoist_q4(ep2, "q", "4u * gc") }}
{% endmacro %}

@compute @workgroup_size({{ WG }})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(subgroup_invocation_id) li: u32) {
  let n = wid.y;
  // ---- 1. the pointwise conv: lane li takes pixels (it * WG + li) * TP .. + TP - 1 (clamped to
  // the image; every lane runs every iteration: the weight vectors are shared by subgroupBroadcast)
  {
    let cg = wid.x * {{ CB4 }}u;
{% for t in range((4 * CB4 + WG - 1) // WG) %}
    let bv{{ t }} = min(li + {{ WG * t }}u, {{ 4 * CB4 - 1 }}u);
    let bo{{ t }} = (bv{{ t }} / {{ CB4 }}u) * {{ N4 }}u + cg + bv{{ t }} % {{ CB4 }}u;
{% endfor %}
{% for j in range(CB4) %}
{{ hoist_q4(ep1, "q" ~ j ~ "_", "4u * (cg + " ~ j ~ "u)") }}
{% endfor %}
    for (var it = 0u; it < {{ ITERS }}u; it = it + 1u) {
      let p0 = (it * {{ WG }}u + li) * {{ TP }}u;
{% for i in range(TP) %}
      let xr{{ i }} = (n * {{ HW }}u + min(p0 + {{ i }}u, {{ HW - 1 }}u)) * {{ K4 }}u;
{% for j in range(CB4) %}
      var c{{ i }}_{{ j }} = vec4<f32>(0.0);
{% endfor %}
{% endfor %}
      for (var k = 0u; k < {{ K4 }}u; k = k + 1u) {
{% for t in range((4 * CB4 + WG - 1) // WG) %}
        let bl{{ t }} = {{ "w_up" if x64 and not w1_uniform else "vec4<f32>" }}(w1[4u * k * {{ N4 }}u + bo{{ t }}]);
{% endfor %}
{% for i in range(TP) %}
        let a{{ i }} = {{ "w_up" if x64 else "vec4<f32>" }}(x[xr{{ i }} + k]);
{% endfor %}
        // one column block at a time: its 4 weight vectors broadcast, its TP accumulators updated
        // (only one block's weights live across the pixels)
{% for j in range(CB4) %}
        {
{% for r in range(4) %}
          let b{{ r }} = subgroupBroadcast(bl{{ (r * CB4 + j) // WG }}, {{ (r * CB4 + j) % WG }}u);
{% endfor %}
{% for i in range(TP) %}
          c{{ i }}_{{ j }} = c{{ i }}_{{ j }} + a{{ i }}.x * b0 + a{{ i }}.y * b1 + a{{ i }}.z * b2 + a{{ i }}.w * b3;
{% endfor %}
        }
{% endfor %}
      }
{% for i in range(TP) %}
{% if ptail %}
      if (p0 + {{ i }}u < {{ HW }}u) {
{% else %}
      {
{% endif %}
{% for j in range(CB4) %}
        {
          let o = (n * {{ HW }}u + p0 + {{ i }}u) * {{ 4 * N4 }}u + 4u * (cg + {{ j }}u);
          let e = vec4<{{ T }}>({{ ep_v4(ep1, "c" ~ i ~ "_" ~ j, "o", "4u * (cg + " ~ j ~ "u)", "q" ~ j ~ "_") }});
{% if x64 %}
          let ew = w_pk(vec4<f32>(e));
          mid[(p0 + {{ i }}u) * {{ CB4 }}u + {{ j }}u] = ew;
{% if keep %}
          keep[o / 4u] = ew;
{% endif %}
{% else %}
          mid[(p0 + {{ i }}u) * {{ CB4 }}u + {{ j }}u] = vec4<f32>(e);
{% if keep %}
          keep[o / 4u] = e;
{% endif %}
{% endif %}
        }
{% endfor %}
      }
{% endfor %}
    }
  }
  workgroupBarrier();
  // ---- 2. the depthwise conv from mid: an item is {{ TW }} output columns of every output row for
  // channel vec4 li % CB4 (its taps and epilogue operands loaded once), walked down the rows as
  // conv/depthwise.wgsl does: iteration i adds input rows i sh - pt + j (j in jrows) into the
  // {{ A }} accumulator slots still open (slot m: output row i - m), stores the oldest, moves them down
  {
{% if wloop %}
    // CB4 does not divide the workgroup: item it is channel vec4 it % CB4 of column block it / CB4
    for (var it = li; it < {{ CB4 * (OW // TW) }}u; it = it + {{ WG }}u) {
      let c4 = it % {{ CB4 }}u;
      let ow0 = (it / {{ CB4 }}u) * {{ TW }}u;
{{ channel("      ") -}}
{% else %}
    let c4 = li % {{ CB4 }}u;
{{ channel("    ") -}}
    for (var it = li / {{ CB4 }}u; it < {{ OW // TW }}u; it = it + {{ WG // CB4 }}u) {
      let ow0 = it * {{ TW }}u;
{% endif %}
      let iw0 = i32(ow0 * {{ sw }}u) - {{ pl }};
{% for s in seg %}
      let cx{{ s }} = iw0 + {{ s }};
      let cok{{ s }} = u32(cx{{ s }}) < {{ W }}u;
      let ci{{ s }} = select(0u, u32(cx{{ s }}), cok{{ s }}) * {{ CB4 }}u + c4;
{% endfor %}
{% for m in range(A) %}
{% for p in range(TW) %}
      var acc{{ m }}_{{ p }} = vec4<f32>(0.0);
{% endfor %}
{% endfor %}
      for (var i = 0u; i < {{ OH + A - 1 }}u; i = i + 1u) {
        let yb = i32(i * {{ sh }}u) - {{ pt }};
{% for j in jrows %}
        let rok{{ j }} = u32(yb + {{ j }}) < {{ H }}u;
        let rb{{ j }} = select(0u, u32(yb + {{ j }}), rok{{ j }}) * {{ W * CB4 }}u;
{% for s in seg %}
        let v{{ j }}_{{ s }} = select(vec4<f32>(0.0), {{ "w_up" if x64 }}(mid[rb{{ j }} + ci{{ s }}]), rok{{ j }} && cok{{ s }});
{% endfor %}
{% endfor %}
{{ rw.slot_taps("        ", "acc", "v", "w", taps, KW, TW, sw, dw) | trim("\n") }}
{% if A > 1 %}
        if (i >= {{ A - 1 }}u) {
{% else %}
        {
{% endif %}
          let pr = (n * {{ OH }}u + i - {{ A - 1 }}u) * {{ OW }}u + ow0;
{% for p in range(TW) %}
          {
            let o = (pr + {{ p }}u) * {{ 4 * N4 }}u + 4u * gc;
            out[o / 4u] = {{ "w_pk(vec4<f32>(" if x64 else "((" }}vec4<{{ T }}>({{ ep_v4(ep2, "acc" ~ (A - 1) ~ "_" ~ p, "o", "4u * gc", "q") }})));
          }
{% endfor %}
        }
{{ rw.slot_shift("        ", "acc", A, TW) | trim("\n") }}
      }
    }
  }
}
