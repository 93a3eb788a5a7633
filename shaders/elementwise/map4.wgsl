{#-
  elementwise/map4.wgsl: four consecutive output elements per invocation, vec4 loads/stores.

  Used when every binding is a plain 32- or 16-bit type, the output's last dimension is a
  multiple of 4, and each input either runs along the output's last dimension (vec4 load) or
  is broadcast along it (one scalar load shared by the four lanes).
  Context:
    k.bindings  inputs in order, then the output (last); k.n = output elements / 4
    loads       [{name, var, strides, same, vec}]: as in map.wgsl; vec = vec4 load
    out_strides row-major strides of the output shape (element units)
    functions   [(T, [name, ...])] helpers from _lib/activations.wgsl
    lanes       [[statements of lane 0], ..., [lane 3]]: the body with per-lane names
    results     [result expression of lane 0, ..., lane 3]
    base        first output element of this chunk (see map.wgsl)
  Workgroup: (k.workgroup, 1, 1); 2-D folded dispatch; guarded by idx < k.n.
-#}
{% import "_lib/io.wgsl" as io %}
{% import "_lib/index.wgsl" as ix %}
{% import "_lib/activations.wgsl" as act %}
{% for e in k.enables %}
{{ e }}
{% endfor %}
{% for b in k.bindings %}
{% if b.output %}
@group(0) @binding({{ loop.index0 }}) var<storage, read_write> {{ b.name }}: array<vec4<{{ b.storage }}>>;
{% elif loads[loop.index0].vec %}
@group(0) @binding({{ loop.index0 }}) var<storage, read> {{ b.name }}: array<vec4<{{ b.storage }}>>;
{% else %}
@group(0) @binding({{ loop.index0 }}) var<storage, read> {{ b.name }}: array<{{ b.storage }}>;
{% endif %}
{% endfor %}
{% for T, names in functions %}
{{ act.defs(T, names) }}
{% endfor %}
{{ io.main_header(k) }}
  let e0 = {{ base }}u + idx * 4u;
{% if loads | rejectattr("same") | list %}
{{ ix.coords("c", "e0", out_strides) }}
{% endif %}
{% for inp in loads %}
{% if inp.vec %}
  let {{ inp.var }}_v = {{ inp.name }}[{{ "idx" if inp.same else "(" ~ ix.dot("c", inp.strides) ~ ") / 4u" }}];
{% for lane in "xyzw" %}
  let {{ inp.var }}_l{{ loop.index0 }} = {{ inp.var }}_v.{{ lane }};
{% endfor %}
{% else %}
  let {{ inp.var }}_s = {{ inp.name }}[{{ ix.dot("c", inp.strides) }}];
{% for lane in "xyzw" %}
  let {{ inp.var }}_l{{ loop.index0 }} = {{ inp.var }}_s;
{% endfor %}
{% endif %}
{% endfor %}
{% for body in lanes %}
{% for line in body %}
  {{ line }}
{% endfor %}
{% endfor %}
  {{ k.bindings[-1].name }}[idx] = vec4<{{ k.bindings[-1].storage }}>({{ results | join(", ") }});
}
