{#-
  conv/_rows.wgsl: the row loop of conv/depthwise.wgsl and conv/depthwise_project.wgsl. The
  kernels loop over the block's input rows r (a runtime bound, so LLVM keeps it a loop), load
  each row's columns once as x<j>, and add them into every output row t whose window reaches
  row r, through tap row (r - t sh) / dh picked by selects among the taps w<kh>_<kw>. Also the
  accumulator slots of conv/depthwise.wgsl's row walk (slot_taps, slot_shift; conv/pw_depthwise.wgsl
  walks its rows the same way), the fused kernels' per-vec4 epilogue helpers (ep_v4_def, ep_v4,
  hoist_q4), the functions the depthwise + projection kernels define (pair_fns) and their input
  columns (columns).
-#}
{% import "_lib/tile.wgsl" as tl %}
{% import "_lib/activations.wgsl" as act %}

{#- Output row t's share of input row r: acc<t>_<p> += x<xs><p sw + kw dw> * tap (kh, kw) (w<ws><kh>_<kw>). -#}
{% macro row_taps(acc, t, KH, KW, TW, sh, sw, dh, dw, xs="", ws="") %}
      if (r >= {{ t * sh }}u && r <= {{ t * sh + (KH - 1) * dh }}u{{ " && (r - " ~ t * sh ~ "u) % " ~ dh ~ "u == 0u" if dh > 1 }}) {
        let kt = (r - {{ t * sh }}u){{ " / " ~ dh ~ "u" if dh > 1 }};
{% for kw in range(KW) %}
        let wt{{ kw }} = {% for kh in range(1, KH) %}select({% endfor %}w{{ ws }}0_{{ kw }}{% for kh in range(1, KH) %}, w{{ ws }}{{ kh }}_{{ kw }}, kt == {{ kh }}u){% endfor %};
{% endfor %}
{% for kw in range(KW) %}
{% for p in range(TW) %}
        {{ acc }}{{ t }}_{{ p }} = {{ acc }}{{ t }}_{{ p }} + x{{ xs }}{{ p * sw + kw * dw }} * wt{{ kw }};
{% endfor %}
{% endfor %}
      }
{% endmacro %}

{#- The slots of conv/depthwise.wgsl's row walk (conv/pw_depthwise.wgsl's too): input row j's
   columns <x><j>_<c> added into slot m's accumulators <acc><m>_<p> through tap (kh, kw),
   <w><kh>_<kw>, for each (kh, j, m) of `taps` (webnn_gpu/ops/conv.py `_dw_taps`); each line
   begins with `pad`. -#}
{% macro slot_taps(pad, acc, x, w, taps, KW, TW, sw, dw) %}
{% for kh, j, m in taps %}
{% for kw in range(KW) %}
{% for p in range(TW) %}
{{ pad }}{{ acc }}{{ m }}_{{ p }} = {{ acc }}{{ m }}_{{ p }} + {{ x }}{{ j }}_{{ p * sw + kw * dw }} * {{ w }}{{ kh }}_{{ kw }};
{% endfor %}
{% endfor %}
{% endfor %}
{% endmacro %}

{#- After the oldest of the A slots is stored: the slots move down one, slot 0 starts empty. -#}
{% macro slot_shift(pad, acc, A, TW) %}
{% for m in range(A - 1, 0, -1) %}
{% for p in range(TW) %}
{{ pad }}{{ acc }}{{ m }}_{{ p }} = {{ acc }}{{ m - 1 }}_{{ p }};
{% endfor %}
{% endfor %}
{% for p in range(TW) %}
{{ pad }}{{ acc }}0_{{ p }} = vec4<f32>(0.0);
{% endfor %}
{% endmacro %}

{#- ep_v4: a function applying epilogue `ep` to the four channels ch .. ch + 3 of one vec4
   (at indices o + 0..3, or o for all four without o_step; q0..q3 their hoisted operands; g the
   given operand's four values): called once per pixel, so that the unrolled body has one call
   where it had four epilogue calls and their arguments (see conv/depthwise_project.wgsl's
   header). Where the epilogue's steps allow (ep.code4, webnn_gpu/ops/_epilogue.py) the helper
   computes the four channels with vector operations instead of four inlined epilogue calls:
   the same operations, less for lavapipe's front end. -#}
{% macro ep_v4_def(ep, o_step=true) %}
{% if ep.code4 %}
{{ ep.code4 }}
{% elif not ep.empty %}
fn {{ ep.fn }}_v4(v: vec4<f32>, o: u32, ch: u32{% if ep.chan %}{% for c in range(4) %}, q{{ c }}: {{ ep.q_struct }}{% endfor %}{% endif %}{% if ep.given %}, g: vec4<f32>{% endif %}) -> vec4<f32> {
  return vec4<f32>({% for c in range(4) %}{{ tl.apply(ep, "v." ~ "xyzw"[c], "o + " ~ c ~ "u" if o_step else "o", "ch + " ~ c ~ "u", "q" ~ c, "g." ~ "xyzw"[c]) }}{{ ", " if not loop.last }}{% endfor %});
}
{% endif %}
{% endmacro %}
{% macro ep_v4(ep, v, o, ch, q, g="") -%}
{% if ep.empty %}{{ v }}{% else %}{{ ep.fn }}_v4({{ v }}, {{ o }}, {{ ch }}{% if ep.chan %}{% for c in range(4) %}, {{ q }}{{ c }}{% endfor %}{% endif %}{% if ep.given %}, {{ g }}{% endif %}){% endif %}
{%- endmacro %}
{#- The epilogue operands of channels ch0 + 0..3 as q<name>0..3 (ep.chan), clamped to `last`
   when given: with sg (the caller's `lane`), lane l < 4
   loads those of channel ch0 + l and subgroupBroadcast hands them to the others. -#}
{% macro hoist_q4(ep, name, ch0, last="", sg=false) %}
{% if ep.chan and sg %}
    let {{ name }}l = {{ ep.q_fn }}({{ "min(" if last }}{{ ch0 }} + min(lane, 3u){{ ", " ~ last ~ ")" if last }});
{% for c in range(4) %}
    let {{ name }}{{ c }} = {{ ep.q_struct }}({% for f in range(ep.q_count) %}subgroupBroadcast({{ name }}l.q{{ f }}, {{ c }}u){{ ", " if not loop.last }}{% endfor %});
{% endfor %}
{% else %}
{% for c in range(4) %}
    {{ tl.hoist_q(ep, name ~ c, ("min(" if last else "") ~ ch0 ~ " + " ~ c ~ "u" ~ (", " ~ last ~ ")" if last else "")) }}
{% endfor %}
{% endif %}
{% endmacro %}

{#- The activation functions, the depthwise epilogue `ep` and the projection's `pep` (none: no
   projection) with their per-vec4 helpers: what every depthwise + projection kernel defines
   (`selects`: exp_acc without branches, act.defs). -#}
{% macro pair_fns(fns, ep, pep, selects=false) %}
{% for FT, names in fns %}
{{ act.defs(FT, names, selects) }}
{% endfor %}
{% if not ep.empty %}
{{ ep.code }}
{{ ep_v4_def(ep) }}
{% endif %}
{% if pep is not none and not pep.empty %}
{{ pep.code }}
{{ ep_v4_def(pep) }}
{% endif %}
{% endmacro %}

{#- Input column iw0 + j of the window segment `seg`: cx<j>, whether it is inside the image
   (cok<j>) and its index clamped into it (ci<j>). -#}
{% macro columns(seg) %}
{% for j in seg %}
  let cx{{ j }} = iw0 + {{ j }};
  let cok{{ j }} = u32(cx{{ j }}) < W;
  let ci{{ j }} = select(0u, u32(cx{{ j }}), cok{{ j }});
{% endfor %}
{% endmacro %}

{#- up / pk: four values of storage type T as half a word of 8 (float32: vec2<u64>, float16:
   u64; the same bits) and back: the fused kernels' words (xw, ow). -#}
{% macro word_fns(T) %}
{% import "_lib/io.wgsl" as io %}
{{ io.words_fns(T) }}
{% endmacro %}
