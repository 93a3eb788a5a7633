{#-
  Shared by quantize_linear.wgsl and dequantize_linear.wgsl.

  param_index(terms, out_strides): statements that declare `pi`, the element of scale /
    zero_point that covers output element `idx`. `terms` lists (axis, block, stride) for the
    axes where the scale varies: pi = sum (c_axis / block) * stride. Declares the coordinates
    `c0..` of idx only when some term needs them.
-#}
{% import "_lib/index.wgsl" as ix %}
{% macro param_index(terms, out_strides) %}
{% if terms %}
{{ ix.coords("c", "idx", out_strides) }}
  let pi = {% for d, block, stride in terms %}{{ "" if loop.first else " + " }}{{ "c" ~ d if block == 1 else "(c" ~ d ~ " / " ~ block ~ "u)" }}{{ "" if stride == 1 else " * " ~ stride ~ "u" }}{% endfor %};
{% else %}
  let pi = 0u;
{% endif %}
{% endmacro %}
