{#-
  layout/concat_vec4.wgsl: layout/concat.wgsl for 32-bit data or float16 whose every part's
  slab (its size along the axis times inner) is a multiple of 4 elements: one invocation moves four
  neighbouring output elements, which lie in one part, with a vec4 load and store (with x64:
  eight, as one u64 word load and store).

  The output is seen as [outer, total, inner] (total: the concat axis); output element e =
  (o, a, i) comes from the part whose range [lo, hi) holds a, at (o, a - lo, i) of that part.
  Context:
    k.bindings  [src0, src1, ... (the parts, in order), side operands sd0... (plain arrays),
                dst, side_out]
    parts       [{name, lo, hi, size}] per input: its range along the axis and its size there
    inner       product of the dimensions after the axis; total: the output's axis dimension
    side        None, or the epilogue (function `side`, webnn_gpu/ops/_epilogue.py; float32,
                float16 data computed in f32 and rounded once as it is stored)
                applied to each output element, stored at its index in side_out (the
                compiler's fuse_concat_map); chan: the last axis' size C, whose coordinate
                (e % C) the epilogue reads its per-channel operands at; side_only: the map is
                the one output (dst; no side_out)
    fns         (T, names) activation helpers of side
    x64         parts, dst and side_out bound as 8-element u64 words, the same bits (32-bit
                data: vec4<u64>, float16: vec2<u64>; movement.concat_words): every slab and,
                with side, C a multiple of 8; on Mesa 22 every storage access is a loop over
                the lanes and the components, and a u64 component moves two 32-bit or four
                float16 values
    q_words     with x64: side's per-channel operands (side.chan_operands, each C values of
                dst's type, read at the channel alone) bound as words too and loaded as one
                word per operand for the invocation's 8 channels (side_q's 8 x q_count
                scalar loads otherwise)
    side_code   side.code, without side_q where q_words loads its operands
  Workgroup: (k.workgroup, 1, 1); 2-D folded dispatch; guarded by idx < k.n (output vec4s, or
  8-element words with x64).
-#}
{% import "_lib/epilogue.wgsl" as el %}
{% import "_lib/io.wgsl" as io %}
{% set T = k.bindings[-1].storage %}
{% set LT = ("vec2<u64>" if T == "f16" else "vec4<u64>") if x64 else "vec4<" ~ T ~ ">" %}
{% set W = 8 if x64 else 4 %}
{% for e in k.enables %}
{{ e }}
{% endfor %}
{% for b in k.bindings %}
@group(0) @binding({{ loop.index0 }}) var<storage, {{ "read_write" if b.output else "read" }}> {{ b.name }}: array<{{ LT if not b.name.startswith("sd") or b.name in q_words else b.storage }}>;
{% endfor %}
{% if side %}
{{ el.defs(fns) }}
{{ side_code }}
{% endif %}
{% if x64 and side %}
{{ io.words_fns(T) }}
{% endif %}

{{ io.main_header(k) }}
  let e = idx * {{ W }}u;
  let i = e % {{ inner }}u;
  let a = (e / {{ inner }}u) % {{ total }}u;
  let o = e / {{ inner * total }}u;
  var v: {{ LT }};
{% for p in parts %}
  {% if not loop.first %}} else {% endif %}{% if not loop.last %}if (a < {{ p.hi }}u) {% endif %}{
    v = {{ p.name }}[((o * {{ p.size }}u + a - {{ p.lo }}u) * {{ inner }}u + i) / {{ W }}u];
{% endfor %}
  }
{% if not side_only %}
  dst[idx] = v;
{% endif %}
{% if side %}
  let c = e % {{ chan }}u;
{% set q = side.chan %}
{% set sout = "dst" if side_only else "side_out" %}
{% if x64 %}
{% set halves = [".xy", ".zw"] if T != "f16" else [".x", ".y"] %}
{% for n in q_words %}
  let qw{{ loop.index0 }} = {{ n }}[c / 8u];
{% endfor %}
{% for h in range(2) %}
  let v{{ h }} = up(v{{ halves[h] }});
{% for n in q_words %}
  let q{{ h }}_{{ loop.index0 }} = up(qw{{ loop.index0 }}{{ halves[h] }});
{% endfor %}
  let s{{ h }} = vec4<f32>({% for j in range(4) %}side(v{{ h }}[{{ j }}], e + {{ 4 * h + j }}u, c + {{ 4 * h + j }}u{% if q %}, {{ side.q_struct }}({% for f in range(q_words | length) %}q{{ h }}_{{ f }}[{{ j }}]{{ ", " if not loop.last }}{% endfor %}){% endif %}){{ ", " if not loop.last }}{% endfor %});
{% endfor %}
  {{ sout }}[idx] = {{ LT }}(pk(s0), pk(s1));
{% elif T == "f16" %}
  let vf = vec4<f32>(v);
  {{ sout }}[idx] = vec4<f16>(vec4<f32>(side(vf.x, e, c{{ ", side_q(c)" if q }}), side(vf.y, e + 1u, c + 1u{{ ", side_q(c + 1u)" if q }}),
                            side(vf.z, e + 2u, c + 2u{{ ", side_q(c + 2u)" if q }}), side(vf.w, e + 3u, c + 3u{{ ", side_q(c + 3u)" if q }})));
{% else %}
  {{ sout }}[idx] = vec4<f32>(side(v.x, e, c{{ ", side_q(c)" if q }}), side(v.y, e + 1u, c + 1u{{ ", side_q(c + 1u)" if q }}),
                            side(v.z, e + 2u, c + 2u{{ ", side_q(c + 2u)" if q }}), side(v.w, e + 3u, c + 3u{{ ", side_q(c + 3u)" if q }}));
{% endif %}
{% endif %}
}
