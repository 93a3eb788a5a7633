{#-
  matmul/attention.wgsl: an attention node (webnn_gpu/fusions/attention.py) in one launch, one
  invocation per TR consecutive query rows of a batch item (each key and value vector loaded once
  for the TR rows): each row's L scores s_j = q . k_j through the scores' epilogue (a scale, a
  mask), the softmax as norm/softmax.wgsl computes it (the max, the sum of exp(s_j - max), each
  probability exp(s_j - max) / sum), and sum_j p_j v_j through the context's epilogue, stored
  through the context's output strides. q, k and v are read as vec4 along the depth (through
  the products' views; webnn_gpu/ops/linalg.py `attention_kernel`). float16: q, k, v and the
  epilogues' operands are loaded as f16 and widened, the scores, softmax and sums are f32 and each
  output is rounded to f16 once, at its store.

  Context:
    T            storage type of q, k, v and out: "f32" or "f16" (f32 arithmetic)
    M            query rows per batch item; TR rows per invocation, MT = ceil(M / TR) invocations
                 per batch item, n_inv in all
    D, L, Dv     depth of q and k, keys, depth of v (D and Dv multiples of 4)
    batch_strides           row-major strides of the batch (dimensions of size 1 dropped)
    q_bst, k_bst, v_bst     vec4 offsets per batch coordinate; o_bst: output offsets (values)
    q_rs         q's row stride (vec4s); k_ns: key j's stride in k (vec4s); v_ks: value row j's
                 stride in v (vec4s); o_sp: the output's row stride (values)
    ep, ep2      the scores' epilogue (o = the scores' flat index, ch = key) and the context's
    fns          the activation helpers both call, once (_epilogue.merged_functions)
  Bindings: q, k, v, ep operands..., ep2 operands..., out.
  Workgroup: (k.workgroup, 1, 1), one invocation per TR query rows, 2-D folded dispatch.
-#}
{% import "_lib/index.wgsl" as ix %}
{% import "_lib/tile.wgsl" as tl %}
{% set D4 = D // 4 %}
{% set V4 = Dv // 4 %}
{% macro up(x) %}{% if T == "f16" %}vec4<f32>({{ x }}){% else %}{{ x }}{% endif %}{% endmacro %}
{% if T == "f16" %}
enable f16;
{% endif %}
{{ tl.decl(0, "q", T, true, false) }}
{{ tl.decl(1, "k", T, true, false) }}
{{ tl.decl(2, "v", T, true, false) }}
{{ tl.epilogue_decls(ep, 3) }}
{{ tl.epilogue_decls(ep2, 3 + ep.operands | length) }}
{{ tl.decl(3 + ep.operands | length + ep2.operands | length, "out", T, true, true) }}
{% import "_lib/epilogue.wgsl" as epl %}
{{ epl.defs(fns) }}
{% if not ep.empty %}{{ ep.code }}{% endif %}
{% if not ep2.empty %}{{ ep2.code }}{% endif %}

@compute @workgroup_size({{ k.workgroup }})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let idx = gid.x + gid.y * nwg.x * {{ k.workgroup }}u;
  if (idx >= {{ n_inv }}u) { return; }
  let bidx = idx / {{ MT }}u;
  let mb = (idx - bidx * {{ MT }}u) * {{ TR }}u;
{{ ix.coords("bc", "bidx", batch_strides) }}
  let kb = {{ ix.dot("bc", k_bst) }};
  let vb = {{ ix.dot("bc", v_bst) }};
  let qb = {{ ix.dot("bc", q_bst) }};
{% for t in range(TR) %}
  let m{{ t }} = min(mb + {{ t }}u, {{ M - 1 }}u);  // rows past M repeat the last and store nothing
  let r{{ t }} = bidx * {{ M }}u + m{{ t }};
  var q{{ t }}: array<vec4<f32>, {{ D4 }}>;
  for (var d = 0u; d < {{ D4 }}u; d = d + 1u) { q{{ t }}[d] = {{ up("q[qb + m" ~ t ~ " * " ~ q_rs ~ "u + d]") }}; }
  var s{{ t }}: array<f32, {{ L }}>;
  var mx{{ t }} = -3.40282347e+38;
{% endfor %}
  for (var j = 0u; j < {{ L }}u; j = j + 1u) {
    let kj = kb + j * {{ k_ns }}u;
{% for t in range(TR) %}
    var a{{ t }} = 0.0;
{% endfor %}
    for (var d = 0u; d < {{ D4 }}u; d = d + 1u) {
      let kv = {{ up("k[kj + d]") }};
{% for t in range(TR) %}
      a{{ t }} = a{{ t }} + dot(q{{ t }}[d], kv);
{% endfor %}
    }
{% for t in range(TR) %}
    let x{{ t }} = {{ tl.apply(ep, "a" ~ t, "r" ~ t ~ " * " ~ L ~ "u + j", "j") }};
    s{{ t }}[j] = x{{ t }};
    mx{{ t }} = max(mx{{ t }}, x{{ t }});
{% endfor %}
  }
{% for t in range(TR) %}
  var sum{{ t }} = 0.0;
  for (var j = 0u; j < {{ L }}u; j = j + 1u) { sum{{ t }} = sum{{ t }} + exp(s{{ t }}[j] - mx{{ t }}); }
  var c{{ t }}: array<vec4<f32>, {{ V4 }}>;
  for (var d = 0u; d < {{ V4 }}u; d = d + 1u) { c{{ t }}[d] = vec4<f32>(0.0); }
{% endfor %}
  for (var j = 0u; j < {{ L }}u; j = j + 1u) {
    let vj = vb + j * {{ v_ks }}u;
{% for t in range(TR) %}
    let p{{ t }} = exp(s{{ t }}[j] - mx{{ t }}) / sum{{ t }};
{% endfor %}
    for (var d = 0u; d < {{ V4 }}u; d = d + 1u) {
      let vv = {{ up("v[vj + d]") }};
{% for t in range(TR) %}
      c{{ t }}[d] = c{{ t }}[d] + p{{ t }} * vv;
{% endfor %}
    }
  }
  let ob = {{ ix.dot("bc", o_bst) }};
{% for t in range(TR) %}
  if (mb + {{ t }}u < {{ M }}u) {
    for (var d = 0u; d < {{ V4 }}u; d = d + 1u) {
      let o = ob + m{{ t }} * {{ o_sp }}u + 4u * d;
      out[o / 4u] = {{ "vec4<f16>(" if T == "f16" }}vec4<f32>({% for i in range(4) %}{{ tl.apply(ep2, "c" ~ t ~ "[d][" ~ i ~ "u]", "o + " ~ i ~ "u", "4u * d + " ~ i ~ "u") }}{{ ", " if not loop.last }}{% endfor %}){{ ")" if T == "f16" }};
    }
  }
{% endfor %}
}
