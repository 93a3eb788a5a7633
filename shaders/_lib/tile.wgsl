{#-
  Helpers shared by the matmul and conv kernels (register-blocked tiles, fused epilogues).

  decl(index, name, T, vec, output): declares one storage binding as array<T> or, with vec,
    array<vec4<T>> (vec4 reads straight from storage; the caller guarantees 4-element alignment).
  epilogue_decls(ep, first): declares the epilogue operands ep.operands at bindings first.. as
    plain read-only arrays named by their binding names.
  epilogue_fns(ep): the activation helpers and `fn epilogue(x: f32, o: u32, ch: u32) -> f32`.
  apply(ep, v, o, ch): the expression applying the epilogue to the f32 value v (v itself when
    the epilogue is empty).
-#}
{% macro decl(index, name, T, vec, output) %}
@group(0) @binding({{ index }}) var<storage, {{ "read_write" if output else "read" }}> {{ name }}: array<{{ "vec4<" ~ T ~ ">" if vec else T }}>;
{% endmacro %}

{% macro epilogue_decls(ep, first) %}
{% for name, v in ep.operands %}
@group(0) @binding({{ first + loop.index0 }}) var<storage, read> {{ name }}: array<{{ "f16" if v.data_type == "float16" else "f32" }}>;
{% endfor %}
{% endmacro %}

{% macro epilogue_fns(ep) %}
{% import "_lib/activations.wgsl" as act %}
{% if not ep.empty %}
{% for T, names in ep.functions %}
{{ act.defs(T, names) }}
{% endfor %}
{{ ep.code }}
{% endif %}
{% endmacro %}

{% macro apply(ep, v, o, ch) -%}
{{ v if ep.empty else "epilogue(" ~ v ~ ", " ~ o ~ ", " ~ ch ~ ")" }}
{%- endmacro %}
