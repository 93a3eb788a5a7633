{#-
  conv/block.wgsl: conv2d (one group, NHWC) with few input channels and few output channels,
  a TH x TW block of output pixels and every output channel per invocation (a network's first
  layer on an RGB image). Each input row the block touches is loaded once, only the columns
  some output reads (as conv/depthwise.wgsl), and reused by every tap and output that reads
  it: a 3x3 stride-2 window over 3 channels loads 15 values per output instead of the
  implicit GEMM's 27. The filter is loaded once per invocation as vec4s of output channels, or
  is in the text as literals (wconst).

  Context:
    T            storage type ("f32" or "f16"); accumulation in f32
    TH, TW       output rows and columns per invocation; OHB, OWB = ceil(OH / TH), ceil(OW / TW)
    NB, H, W, C, O4, OH, OW, pt, pl   sizes (O4 = O / 4 vec4 output columns) and leading padding
    KH, KW, sh, sw, dh, dw, rows, seg the window, as in conv/depthwise.wgsl
    ep           fused epilogue (bias first; channel = the output channel), hoisted per channel;
                 each stored vec4 through one call of `<ep.fn>_v4` (conv/_rows.wgsl's ep_v4: vector
                 operations where the steps allow, ep.code4)
    f_uniform    0, or the filter ([KH, KW, C, O4] vec4s) is a float32 constant in a uniform
                 buffer of this many vec4s
    wconst       None, or the filter as WGSL literals, one `vec4<f32>(...)` per filter vec4 in the
                 order [KH, KW, C, O4] (no `f` binding: the weights are constants of the pipeline)
    bconst       None, or the bias as literals, one `vec4<f32>(...)` per output vec4, added to each
                 sum (the epilogue then has no bias step)
    qconst       None, or the epilogue's per-channel operands as literals: one `EpQ(...)` per
                 output channel, used instead of `ep_q(ch)` (the epilogue then
                 has neither those operands nor `ep_q`)
    n_inv        invocations: NB * OHB * OWB
    xv           0, or x is read as vec4s (W * C and TW * sw * C multiples of 4; xv = NB * H * W * C / 4,
                 the vec4 count): a block's input row segment is (seg[-1] + 1) * C consecutive
                 values, loaded as the vec4s covering them (ceil of a quarter, plus one where the
                 padding misaligns it) instead of one scalar load per value; a value (column s,
                 channel c) is component ((s - pl) * C + c) % 4 of vec4 ((s - pl) * C + c) / 4 from
                 the block's row start (ow0 * sw * C, a multiple of 4)
    row_loop     the block's TH output rows in a loop, one row per iteration, instead of unrolled
                 (input rows shared by consecutive output rows carried over in registers)
    h2           float16 (T == "f16"): x (when read as vec4s) and out are bound as arrays of
                 vec2<u32>, each the four float16 values of a vec4<f16> packed in pairs, and
                 converted with unpack2x16float / pack2x16float: on Mesa 22.3 a load or store
                 costs a loop over the lanes with a bounds check per component, so two u32
                 components cost less than four f16 ones (the values are the same bits)
    xw           (float32, xv) x is bound as u64 words of 4 values (vec2<u64>, the same bits): each
                 vec4 load is 2 components instead of 4
    x64          (O4 even) out is bound as 8-value u64 words, the same bits: each pair of output
                 vec4s is stored as one vec4<u64> (float32) or vec2<u64> (float16), 4 or 2
                 components per access instead of 8 or 4
    pro          None, or an input affine of constants (the compiler's fuse_conv_input,
                 attrs["input_affine"]): per input channel c, pro[c] is the (operator, literal)
                 pairs applied in order to each in-image value of channel c as it is loaded
                 (`((v * s) + b)`); out-of-image taps stay 0, the padding of the affine's output
    pool         also write each workgroup's per-channel sums of its outputs to `pool`
                 ([ceil(n_inv / workgroup), O4] vec4<f32>, added up in workgroup memory): the
                 partial sums of a global average pool of the output (the compiler's
                 fuse_pool_partials), few enough rows for the one workgroup that reduces them
  Bindings: x (NHWC, scalar; vec4 with xv; vec2<u32> with xv and h2; vec2<u64> with xw), f ([KH, KW, C, O4] vec4;
    not with wconst), epilogue operands..., out (NHWC, vec4; vec2<u32> with h2; vec4<u64> /
    vec2<u64> with x64), pool (pool
    only).
  Workgroup: (k.workgroup, 1, 1); block column fastest.
-#}
{% import "_lib/tile.wgsl" as tl %}
{% import "_lib/io.wgsl" as io %}
{% from "conv/_rows.wgsl" import ep_v4_def, ep_v4 %}
{#- the value v (an f32 expression) of input channel c through the input affine (pro) #}
{% macro affine(v, c) %}{% if pro %}{% for op, lit in pro[c] %}({% endfor %}{{ v }}{% for op, lit in pro[c] %} {{ op }} {{ lit }}){% endfor %}{% else %}{{ v }}{% endif %}{% endmacro %}
{#- the loads of input row y (an i32 expression) into `{dst}{s}_{c}` for each column offset s of seg
    and channel c; decl: "let " or "" (assign to vars) #}
{% macro load_row(dst, y, decl) %}
      let y_ = {{ y }};
      let rok = u32(y_) < {{ H }}u;
{% if xv %}
{% set base = - pl * C %}
      let rv = i32(((n * {{ H }}u + select(0u, u32(y_), rok)) * {{ W }}u + ow0 * {{ sw }}u) * {{ C // 4 if C % 4 == 0 else C }}u{{ "" if C % 4 == 0 else " / 4u" }});
{% set ks = [] %}
{% for sv in seg %}{% for c in range(C) %}{% set e = (sv - pl) * C + c %}{% if (e // 4) not in ks %}{% set _ = ks.append(e // 4) %}{% endif %}{% endfor %}{% endfor %}
{% for kv in ks %}
      let v{{ loop.index0 }} = {{ "h4" if h2 else ("up" if xw else "vec4<f32>") }}(x[u32(clamp(rv + {{ kv }}, 0, {{ xv - 1 }}))]);
{% endfor %}
{% for sv in seg %}
{% for c in range(C) %}
{% set e = (sv - pl) * C + c %}
      {{ decl }}{{ dst }}{{ sv }}_{{ c }} = select(0.0, {{ affine("v" ~ ks.index(e // 4) ~ "." ~ "xyzw"[e % 4], c) }}, rok && cok{{ sv }});
{% endfor %}
{% endfor %}
{% else %}
      let row = (n * {{ H }}u + select(0u, u32(y_), rok)) * {{ W }}u;
{% for sv in seg %}
{% for c in range(C) %}
      {{ decl }}{{ dst }}{{ sv }}_{{ c }} = select(0.0, {{ affine("f32(x[(row + ci" ~ sv ~ ") * " ~ C ~ "u + " ~ c ~ "u])", c) }}, rok && cok{{ sv }});
{% endfor %}
{% endfor %}
{% endif %}
{%- endmacro %}
{#- the hoisted per-channel epilogue operands of channel ch: baked (qconst) or loaded #}
{% macro hoist_q(name, ch) -%}
{% if qconst %}let {{ name }} = {{ qconst[ch] }};{% else %}{{ tl.hoist_q(ep, name, ch ~ "u") }}{% endif %}
{%- endmacro %}
{% macro store_pixel(row, p, acc) %}
  if ({{ "live && " if pool }}oh0 + {{ row }} < {{ OH }}u && ow0 + {{ p }}u < {{ OW }}u) {
    let pix = (n * {{ OH }}u + oh0 + {{ row }}) * {{ OW }}u + ow0 + {{ p }}u;
{% for jw in range(O4 // 2 if x64 else O4) %}
    {
{% for j in ([2 * jw, 2 * jw + 1] if x64 else [jw]) %}
      let o{{ j }} = pix * {{ 4 * O4 }}u + {{ 4 * j }}u;
      let v{{ j }} = {{ acc }}{{ j }};
      let e{{ j }} = {{ ep_v4(ep, "v" ~ j, "o" ~ j, (4 * j) ~ "u", "q" ~ j ~ "_") }};
{% if pool %}
      psum{{ j }} = psum{{ j }} + e{{ j }};
{% endif %}
{% endfor %}
{% if x64 %}
      out[pix * {{ O4 // 2 }}u + {{ jw }}u] = {{ "vec4<u64>" if T == "f32" else "vec2<u64>" }}(pk(e{{ 2 * jw }}), pk(e{{ 2 * jw + 1 }}));
{% elif h2 %}
      out[pix * {{ O4 }}u + {{ jw }}u] = vec2<u32>(pack2x16float(e{{ jw }}.xy), pack2x16float(e{{ jw }}.zw));
{% else %}
      out[pix * {{ O4 }}u + {{ jw }}u] = vec4<{{ T }}>(e{{ jw }});
{% endif %}
    }
{% endfor %}
  }
{% endmacro %}
{% if T == "f16" %}
enable f16;
{% endif %}
{% if h2 and xv %}
@group(0) @binding(0) var<storage, read> x: array<vec2<u32>>;

// four float16 values packed in two u32s (the storage layout of a vec4<f16>)
fn h4(u: vec2<u32>) -> vec4<f32> {
  return vec4<f32>(unpack2x16float(u.x), unpack2x16float(u.y));
}
{% elif xw %}
@group(0) @binding(0) var<storage, read> x: array<vec2<u64>>;
{% else %}
{{ tl.decl(0, "x", T, xv > 0, false) }}
{% endif %}
{% set fb = 2 if wconst is none else 1 %}
{% if wconst is none %}
{{ tl.weights(1, "f", T, true, f_uniform) }}
{% endif %}
{{ tl.epilogue_decls(ep, fb) }}
{% if x64 %}
@group(0) @binding({{ fb + ep.operands | length }}) var<storage, read_write> out: array<{{ "vec4<u64>" if T == "f32" else "vec2<u64>" }}>;
{{ io.words_fns(T) }}
{% elif h2 %}
@group(0) @binding({{ fb + ep.operands | length }}) var<storage, read_write> out: array<vec2<u32>>;
{% else %}
{{ tl.decl(fb + ep.operands | length, "out", T, true, true) }}
{% endif %}
{% if xw and not x64 %}
{{ io.words_fns(T) }}
{% endif %}
{% if pool %}
@group(0) @binding({{ fb + 1 + ep.operands | length }}) var<storage, read_write> pool: array<vec4<f32>>;
{% endif %}
{{ tl.epilogue_fns(ep) }}
{{ ep_v4_def(ep) }}
{% if pool %}
var<workgroup> wsum: array<vec4<f32>, {{ k.workgroup * O4 }}>;
{% endif %}

{{ tl.pixel_block(k, n_inv, OWB, OHB, TH, TW, sh, sw, pt, pl, seg, W, pool) }}
{% for kh in range(KH) %}
{% for kw in range(KW) %}
{% for c in range(C) %}
{% for j in range(O4) %}
{% if wconst is none %}
  let w{{ kh }}_{{ kw }}_{{ c }}_{{ j }} = vec4<f32>(f[{{ ((kh * KW + kw) * C + c) * O4 + j }}u]);
{% else %}
  const w{{ kh }}_{{ kw }}_{{ c }}_{{ j }} = {{ wconst[((kh * KW + kw) * C + c) * O4 + j] }};
{% endif %}
{% endfor %}
{% endfor %}
{% endfor %}
{% endfor %}
{% if bconst %}
{% for j in range(O4) %}
  const b{{ j }} = {{ bconst[j] }};
{% endfor %}
{% endif %}
{% if row_loop %}
{% for j in range(O4) %}
{% for c in range(4) %}
  {{ hoist_q("q" ~ j ~ "_" ~ c, 4 * j + c) }}
{% endfor %}
{% endfor %}
{% if pool %}
{% for j in range(O4) %}
  var psum{{ j }} = vec4<f32>(0.0);
{% endfor %}
{% endif %}
  // one output row of the block per iteration (a loop, not unrolled: LLVM compiles TH times
  // less code). The window's input rows are kept in r{kh}_{col}_{c}: with dh == 1 and
  // sh < KH, the last KH - sh rows of one iteration are the first ones of the next, so each
  // input row is loaded once, as when unrolled.
{% set keep = KH - sh if (dh == 1 and sh < KH) else 0 %}
{% for kh in range(KH) %}
{% for s in seg %}
{% for c in range(C) %}
  var r{{ kh }}_{{ s }}_{{ c }} = 0.0;
{% endfor %}
{% endfor %}
{% endfor %}
{% for kh in range(keep) %}
  {
{{ load_row("r" ~ kh ~ "_", "ih0 + " ~ kh, "") }}
  }
{% endfor %}
  for (var t = 0u; t < {{ TH }}u; t = t + 1u) {
{% for kh in range(keep, KH) %}
    {
{{ load_row("r" ~ kh ~ "_", "ih0 + i32(t * " ~ sh ~ "u) + " ~ (kh * dh), "") }}
    }
{% endfor %}
{% for p in range(TW) %}
{% for j in range(O4) %}
    var a{{ p }}_{{ j }}: vec4<f32>;
{% endfor %}
{% endfor %}
    // one output vec4 at a time, its whole window in one expression: with every accumulator
    // updated tap by tap, LLVM kept them all live and spilled (3x3, 3 -> 16 channels: 0.84-0.91
    // of the CPU time this way; two partial sums per output were 1.2x slower). The bias comes
    // first: a constant added last is moved down the fused multiply-add chain by NIR's
    // algebraic pass one link per round of lavapipe's optimisation loop (a 3x3x3 window: 28
    // rounds instead of 5, the pipeline's front end 3x as long)
{% for p in range(TW) %}
{% for j in range(O4) %}
    a{{ p }}_{{ j }} = {{ "b" ~ j ~ " + " if bconst }}{% for kh in range(KH) %}{% for kw in range(KW) %}{% for c in range(C) %}{{ " + " if not (loop.first and kw == 0 and kh == 0) }}r{{ kh }}_{{ p * sw + kw * dw }}_{{ c }} * w{{ kh }}_{{ kw }}_{{ c }}_{{ j }}{% endfor %}{% endfor %}{% endfor %};
{% endfor %}
{% endfor %}
{% for kh in range(keep) %}
{% for s in seg %}
{% for c in range(C) %}
    r{{ kh }}_{{ s }}_{{ c }} = r{{ kh + sh }}_{{ s }}_{{ c }};
{% endfor %}
{% endfor %}
{% endfor %}
{% for p in range(TW) %}
{{ store_pixel("t", p, "a" ~ p ~ "_") }}
{% endfor %}
  }
{% else %}
{% for t in range(TH) %}
{% for p in range(TW) %}
{% for j in range(O4) %}
  var a{{ t }}_{{ p }}_{{ j }} = {{ "b" ~ j if bconst else "vec4<f32>(0.0)" }};
{% endfor %}
{% endfor %}
{% endfor %}
{% for r, uses in rows %}
  {
{{ load_row("x", "ih0 + " ~ r, "let ") }}
{#- one statement per accumulator and filter row: its KW x C products added in the order of
   separate statements (kw, then c), so the same arithmetic in a third of naga's statements -#}
{% for t, kh in uses %}
{% for p in range(TW) %}
{% for j in range(O4) %}
    a{{ t }}_{{ p }}_{{ j }} = a{{ t }}_{{ p }}_{{ j }}{% for kw in range(KW) %}{% for c in range(C) %} + x{{ p * sw + kw * dw }}_{{ c }} * w{{ kh }}_{{ kw }}_{{ c }}_{{ j }}{% endfor %}{% endfor %};
{% endfor %}
{% endfor %}
{% endfor %}
  }
{% endfor %}
{% for j in range(O4) %}
{% for c in range(4) %}
  {{ hoist_q("q" ~ j ~ "_" ~ c, 4 * j + c) }}
{% endfor %}
{% endfor %}
{% if pool %}
{% for j in range(O4) %}
  var psum{{ j }} = vec4<f32>(0.0);
{% endfor %}
{% endif %}
{% for t in range(TH) %}
{% for p in range(TW) %}
{{ store_pixel(t ~ "u", p, "a" ~ t ~ "_" ~ p ~ "_") }}
{% endfor %}
{% endfor %}
{% endif %}
{% if pool %}
{% for j in range(O4) %}
  wsum[li * {{ O4 }}u + {{ j }}u] = psum{{ j }};
{% endfor %}
  workgroupBarrier();
  if (li < {{ O4 }}u && gidx - li < {{ n_inv }}u) {  // invocation j adds up column block j: row gidx / workgroup
    // unrolled in the text: lavapipe unrolls a loop of constant count one iteration per two
    // rounds of its optimisation loop (naga's loop bound makes it a loop of two exits), 36
    // rounds for 16, its front end 3x as long; the code it ends with is this
    var s = vec4<f32>(0.0);
{% for i in range(k.workgroup) %}
    s = s + wsum[{{ i * O4 }}u + li];
{% endfor %}
    pool[gidx / {{ k.workgroup }}u * {{ O4 }}u + li] = s;
  }
{% endif %}
}
