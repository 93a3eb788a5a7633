{#-
  The fused epilogue (webnn_gpu/ops/_epilogue.py) for kernels that store one output element at
  a time from a linear index (pool, resample). The operands are ordinary input bindings named
  by ep.operands (declared by io.prelude with the kernel's other bindings).

  fns(ep): the activation helpers the steps call and `fn epilogue(...)` (nothing when empty).
  apply(ep, v, o): the f32 value v through the epilogue for output element o (v when empty);
    the kernels pass no channel coordinate (`ch` 0): operands are indexed from o.
  fns4(ep): `fn epilogue4(v: vec4<f32>, o: u32) -> vec4<f32>` (after fns(ep); nothing when empty).
  apply4(ep, v, o): the vec4<f32> v, output elements o..o+3, through the epilogue lane by lane.
  vec4_bindings(k): the kernel's enables and bindings, `src`, `out` and `side_out` as arrays of
    vec4 of their storage types and the others (epilogue operands) as plain arrays
    (io.vec4_src_out with operands between src and out).
  defs(fns): the activation helpers of several epilogues, fns as (T, [names]) merged (a helper
    two epilogues call is defined once).
-#}
{% macro defs(fns) %}
{% import "_lib/activations.wgsl" as act %}
{% for T, names in fns %}
{{ act.defs(T, names) }}
{% endfor %}
{% endmacro %}

{% macro fns(ep) %}
{% import "_lib/activations.wgsl" as act %}
{% if not ep.empty %}
{% for T, names in ep.functions %}
{{ act.defs(T, names) }}
{% endfor %}
{{ ep.code }}
{% endif %}
{% endmacro %}

{% macro apply(ep, v, o) -%}
{% if ep.empty %}{{ v }}{% else %}{{ ep.fn }}({{ v }}, {{ o }}, 0u){% endif %}
{%- endmacro %}

{% macro apply4(ep, v, o) -%}
{% if ep.empty %}{{ v }}{% else %}epilogue4({{ v }}, {{ o }}){% endif %}
{%- endmacro %}

{% macro fns4(ep) %}
{% if not ep.empty %}
fn epilogue4(v: vec4<f32>, o: u32) -> vec4<f32> {
  return vec4<f32>({{ ep.fn }}(v.x, o, 0u), {{ ep.fn }}(v.y, o + 1u, 0u), {{ ep.fn }}(v.z, o + 2u, 0u),
                   {{ ep.fn }}(v.w, o + 3u, 0u));
}
{% endif %}
{% endmacro %}

{% macro vec4_bindings(k) %}
{% for e in k.enables %}
{{ e }}
{% endfor %}
{% for b in k.bindings %}
@group(0) @binding({{ loop.index0 }}) var<storage, {{ "read_write" if b.output else "read" }}> {{ b.name }}: array<{{ "vec4<" ~ b.storage ~ ">" if b.name in ("src", "out", "side_out") else b.storage }}>;
{% endfor %}
{% endmacro %}
