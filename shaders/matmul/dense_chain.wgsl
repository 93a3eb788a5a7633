{#-
  matmul/dense_chain.wgsl: a chain of one-row dense layers in one workgroup (the compiler's
  fuse_dense_chain): layer l's N outputs are split over the workgroup's invocations in blocks of
  4 columns (block c by invocation c % k.workgroup), each a loop over k of row[k] * B_l[k, 4c..]
  (vec4 loads of B) through the layer's
  epilogue, into workgroup memory (the next layer's row) or, for the last layer, `out`; a
  workgroup barrier between layers (webnn_gpu/ops/linalg.py `lower_dense_chain`). float16: x and
  the epilogue operands are loaded as f16 and widened, the rows in workgroup memory are f32 and
  each output is rounded to f16 once, at its store.

  Context:
    T            storage type of x and out: "f32" or "f16" (f32 arithmetic, f32 rows)
    layers       per layer: K, N, the binding name of its B (row-major [K, 4 ceil(N / 4)], f32,
                 zero-padded columns) and its
                 epilogue (ep: operands, functions named per layer)
    width        the longest row in workgroup memory (the largest N but the last)
    fns          the activation helpers the layers' epilogues call, once (_epilogue.merged_functions)
  Bindings: x (the first layer's [1, K]), per layer B then its epilogue operands, out.
  Workgroup: (k.workgroup, 1, 1), one workgroup.
-#}
{% import "_lib/tile.wgsl" as tl %}
{% if T == "f16" %}
enable f16;
{% endif %}
@group(0) @binding(0) var<storage, read> x: array<{{ T }}>;
{% set ns = namespace(at=1) %}
{% for l in layers %}
@group(0) @binding({{ ns.at }}) var<storage, read> {{ l.b }}: array<vec4<f32>>;
{{ tl.epilogue_decls(l.ep, ns.at + 1) }}
{% set ns.at = ns.at + 1 + l.ep.operands | length %}
{% endfor %}
@group(0) @binding({{ ns.at }}) var<storage, read_write> out: array<{{ T }}>;
{% import "_lib/epilogue.wgsl" as epl %}
{{ epl.defs(fns) }}
{% for l in layers %}
{% if not l.ep.empty %}{{ l.ep.code }}{% endif %}
{% endfor %}

var<workgroup> row0: array<f32, {{ width }}>;
var<workgroup> row1: array<f32, {{ width }}>;

@compute @workgroup_size({{ k.workgroup }})
fn main(@builtin(local_invocation_index) li: u32) {
{% for l in layers %}
{% set src = "x" if loop.first else ("row0" if loop.index0 % 2 == 1 else "row1") %}
{% set wide = T == "f16" and loop.first %}
{% set dst = "out" if loop.last else ("row0" if loop.index0 % 2 == 0 else "row1") %}
{% set N4 = (l.N + 3) // 4 %}
{% set narrow = T == "f16" and loop.last %}
  for (var c = li; c < {{ N4 }}u; c = c + {{ k.workgroup }}u) {
    var acc = vec4<f32>(0.0);
    for (var kk = 0u; kk < {{ l.K }}u; kk = kk + 1u) {
      acc = acc + {{ "f32(" if wide }}{{ src }}[kk]{{ ")" if wide }} * {{ l.b }}[kk * {{ N4 }}u + c];
    }
    for (var j = 0u; j < 4u; j = j + 1u) {
      let n = 4u * c + j;
{% if l.N % 4 %}
      if (n < {{ l.N }}u) {
        {{ dst }}[n] = {{ "f16(" if narrow }}{{ tl.apply(l.ep, "acc[j]", "n", "n") }}{{ ")" if narrow }};
      }
{% else %}
      {{ dst }}[n] = {{ "f16(" if narrow }}{{ tl.apply(l.ep, "acc[j]", "n", "n") }}{{ ")" if narrow }};
{% endif %}
    }
  }
{% if not loop.last %}
  workgroupBarrier();
{% endif %}
{% endfor %}
}
