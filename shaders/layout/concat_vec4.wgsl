{#-
  layout/concat_vec4.wgsl: layout/concat.wgsl for 32-bit data or float16 whose every part's
  slab (its size along the axis times inner) is a multiple of 4 elements: one invocation moves four
  neighbouring output elements, which lie in one part, with a vec4 load and store.

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
  Workgroup: (k.workgroup, 1, 1); 2-D folded dispatch; guarded by idx < k.n (output vec4s).
-#}
{% import "_lib/epilogue.wgsl" as el %}
{% import "_lib/io.wgsl" as io %}
{% for e in k.enables %}
{{ e }}
{% endfor %}
{% for b in k.bindings %}
@group(0) @binding({{ loop.index0 }}) var<storage, {{ "read_write" if b.output else "read" }}> {{ b.name }}: array<{{ b.storage if b.name.startswith("sd") else "vec4<" ~ b.storage ~ ">" }}>;
{% endfor %}
{% if side %}
{{ el.defs(fns) }}
{{ side.code }}
{% endif %}

{{ io.main_header(k) }}
  let e = idx * 4u;
  let i = e % {{ inner }}u;
  let a = (e / {{ inner }}u) % {{ total }}u;
  let o = e / {{ inner * total }}u;
  var v: vec4<{{ k.bindings[-1 if not side else -2].storage }}>;
{% for p in parts %}
  {% if not loop.first %}} else {% endif %}{% if not loop.last %}if (a < {{ p.hi }}u) {% endif %}{
    v = {{ p.name }}[((o * {{ p.size }}u + a - {{ p.lo }}u) * {{ inner }}u + i) / 4u];
{% endfor %}
  }
{% if not side_only %}
  dst[idx] = v;
{% endif %}
{% if side %}
  let c = e % {{ chan }}u;
{% set q = side.chan %}
{% if k.bindings[-1].storage == "f16" %}
  let vf = vec4<f32>(v);
  {{ "dst" if side_only else "side_out" }}[idx] = vec4<f16>(vec4<f32>(side(vf.x, e, c{{ ", side_q(c)" if q }}), side(vf.y, e + 1u, c + 1u{{ ", side_q(c + 1u)" if q }}),
                            side(vf.z, e + 2u, c + 2u{{ ", side_q(c + 2u)" if q }}), side(vf.w, e + 3u, c + 3u{{ ", side_q(c + 3u)" if q }})));
{% else %}
  {{ "dst" if side_only else "side_out" }}[idx] = vec4<f32>(side(v.x, e, c{{ ", side_q(c)" if q }}), side(v.y, e + 1u, c + 1u{{ ", side_q(c + 1u)" if q }}),
                            side(v.z, e + 2u, c + 2u{{ ", side_q(c + 2u)" if q }}), side(v.w, e + 3u, c + 3u{{ ", side_q(c + 3u)" if q }}));
{% endif %}
{% endif %}
}
