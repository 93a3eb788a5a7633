{#-
  Index math, unrolled over the (small, static) rank.

  coords(var, idx, strides): declares  let {var}0 .. {var}{r-1}: the row-major coordinates of
    the linear index `idx` for a shape with element strides `strides`.
  dot(var, strides): the expression sum_d {var}d * strides[d], skipping zero strides ("0u" if all zero).
-#}
{% macro coords(var, idx, strides) %}
{% if strides | length == 0 %}
{% elif strides | length == 1 %}
  let {{ var }}0 = {{ idx }};
{% else %}
  var {{ var }}_r = {{ idx }};
{% for s in strides %}
{% if not loop.last %}
  let {{ var }}{{ loop.index0 }} = {{ var }}_r / {{ s }}u;
  {{ var }}_r = {{ var }}_r - {{ var }}{{ loop.index0 }} * {{ s }}u;
{% else %}
  let {{ var }}{{ loop.index0 }} = {{ var }}_r;
{% endif %}
{% endfor %}
{% endif %}
{% endmacro %}

{% macro dot(var, strides) -%}
{% set terms = [] %}
{% for s in strides %}{% if s != 0 %}{% set _ = terms.append(var ~ loop.index0 ~ (" * " ~ s ~ "u" if s != 1 else "")) %}{% endif %}{% endfor %}
{{ terms | join(" + ") if terms else "0u" }}
{%- endmacro %}
