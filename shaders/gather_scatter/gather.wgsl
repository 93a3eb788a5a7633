{#-
  gather_scatter/gather.wgsl: gather, gatherElements and gatherND; one output element per
  invocation, moved raw (exact for every data type).

  Context:
    k.bindings   [input, indices, output]; indices are int32, uint32 or int64 (read raw)
    out_strides  row-major strides of the output shape
    in_terms     per output dimension: its element stride into input (0 for the dimensions that
                 walk the indices)
    idx_terms    per output dimension: its element stride into indices (0 for the others); their
                 dot product with the coordinates is `ib`, the first index value of this element
    components   [{offset, size, stride}]: index value j is indices[ib + offset], brought into
                 [0, size) by norm_index (_lib/indices.wgsl) and added to the input position
                 times stride (one component for gather/gatherElements, m for gatherND)
    ep           fused epilogue (webnn_gpu/ops/_epilogue.py; gather of a float input only): each
                 value is then read as f32, the epilogue applied at its output index, stored
                 as out_T; without one the values move raw
  Bindings: input, indices, epilogue operands..., output.
  Workgroup: (k.workgroup, 1, 1); 2-D folded dispatch; guarded by idx < k.n.
-#}
{% import "_lib/io.wgsl" as io %}
{% import "_lib/index.wgsl" as ix %}
{% import "_lib/indices.wgsl" as ind %}
{% import "_lib/epilogue.wgsl" as el %}
{{ io.prelude(k, int64) }}
{{ ind.norm_fn(b.indices) }}
{{ el.fns(ep) }}
{{ io.main_header(k) }}
{{ ix.coords("c", "idx", out_strides) }}
  let ib = {{ ix.dot("c", idx_terms) }};
  var src = {{ ix.dot("c", in_terms) }};
{% for comp in components %}
  src = src + norm_index(load_raw_indices(ib + {{ comp.offset }}u), {{ comp.size }}u) * {{ comp.stride }}u;
{% endfor %}
{% if ep.empty %}
  store_raw_output(idx, load_raw_input(src));
{% else %}
  store_output(idx, {{ out_T }}({{ el.apply(ep, "f32(load_input(src))", "idx") }}));
{% endif %}
}
