{#-
  elementwise/map.wgsl: one output element per invocation, any number of broadcast inputs.

  Context:
    k.bindings  inputs in order, then the output (last)
    loads       [{name, var, strides, same, raw}]: binding, WGSL variable, broadcast strides
                over the output shape (0 = broadcast), same = index is the output index,
                raw = load the element as stored (data movement) instead of its compute type
    out_strides row-major strides of the output shape
    functions   [(T, [name, ...])]: activation/math helpers to emit (see _lib/activations.wgsl)
    body        WGSL statements computing the result from the input variables
    result      the expression stored
    raw_out     store with store_raw_ (data movement) instead of store_
    base        first output element of this chunk (0 unless a huge tensor is split into
                chunks; "same" inputs and the output are then bound at the chunk's offset)
  Workgroup: (k.workgroup, 1, 1); 2-D folded dispatch; guarded by idx < k.n.
-#}
{% import "_lib/io.wgsl" as io %}
{% import "_lib/index.wgsl" as ix %}
{% import "_lib/activations.wgsl" as act %}
{{ io.prelude(k, int64) }}
{% for T, names in functions %}
{{ act.defs(T, names) }}
{% endfor %}
{{ io.main_header(k) }}
{% if loads | rejectattr("same") | list %}
  let gi = idx + {{ base }}u;
{{ ix.coords("c", "gi", out_strides) }}
{% endif %}
{% for inp in loads %}
  let {{ inp.var }} = load_{{ "raw_" if inp.raw else "" }}{{ inp.name }}({{ "idx" if inp.same else ix.dot("c", inp.strides) }});
{% endfor %}
{% for line in body %}
  {{ line }}
{% endfor %}
  store_{{ "raw_" if raw_out else "" }}{{ k.bindings[-1].name }}(idx, {{ result }});
}
