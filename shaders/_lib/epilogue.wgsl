{#-
  The fused epilogue (webnn_gpu/ops/_epilogue.py) for kernels that store one output element at
  a time from a linear index (pool, resample). The operands are ordinary input bindings named
  by ep.operands (declared by io.prelude with the kernel's other bindings).

  fns(ep): the activation helpers the steps call and `fn epilogue(...)` (nothing when empty).
  apply(ep, v, o): the f32 value v through the epilogue for output element o (v when empty);
    the kernels pass no channel coordinate (`ch` 0): operands are indexed from o.
-#}
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
