{#-
  matmul/attention.wgsl: an attention node (webnn_gpu/fusions/attention.py) in one launch, one
  invocation per query row: its L scores s_j = q . k_j through the scores' epilogue (a scale, a
  mask), the softmax as norm/softmax.wgsl computes it (the max, the sum of exp(s_j - max), each
  probability exp(s_j - max) / sum), and sum_j p_j v_j through the context's epilogue, stored
  through the context's output strides. q, k and v are read as vec4 along the depth (through
  the products' views; webnn_gpu/ops/linalg.py `attention_kernel`).

  Context:
    R, M         query rows in all, per batch item
    D, L, Dv     depth of q and k, keys, depth of v (D and Dv multiples of 4)
    batch_strides           row-major strides of the batch (dimensions of size 1 dropped)
    q_bst, k_bst, v_bst     vec4 offsets per batch coordinate; o_bst: output offsets (values)
    q_rs         q's row stride (vec4s); k_ns: key j's stride in k (vec4s); v_ks: value row j's
                 stride in v (vec4s); o_sp: the output's row stride (values)
    ep, ep2      the scores' epilogue (o = the scores' flat index, ch = key) and the context's
    fns          the activation helpers both call, once (linalg.merged_functions)
  Bindings: q, k, v, ep operands..., ep2 operands..., out.
  Workgroup: (k.workgroup, 1, 1), one invocation per query row, 2-D folded dispatch.
-#}
{% import "_lib/index.wgsl" as ix %}
{% import "_lib/tile.wgsl" as tl %}
{% set D4 = D // 4 %}
{% set V4 = Dv // 4 %}
{{ tl.decl(0, "q", "f32", true, false) }}
{{ tl.decl(1, "k", "f32", true, false) }}
{{ tl.decl(2, "v", "f32", true, false) }}
{{ tl.epilogue_decls(ep, 3) }}
{{ tl.epilogue_decls(ep2, 3 + ep.operands | length) }}
{{ tl.decl(3 + ep.operands | length + ep2.operands | length, "out", "f32", true, true) }}
{% import "_lib/epilogue.wgsl" as epl %}
{{ epl.defs(fns) }}
{% if not ep.empty %}{{ ep.code }}{% endif %}
{% if not ep2.empty %}{{ ep2.code }}{% endif %}

@compute @workgroup_size({{ k.workgroup }})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let r = gid.x + gid.y * nwg.x * {{ k.workgroup }}u;
  if (r >= {{ R }}u) { return; }
  let bidx = r / {{ M }}u;
  let m = r - bidx * {{ M }}u;
{{ ix.coords("bc", "bidx", batch_strides) }}
  let qb = {{ ix.dot("bc", q_bst) }} + m * {{ q_rs }}u;
  let kb = {{ ix.dot("bc", k_bst) }};
  let vb = {{ ix.dot("bc", v_bst) }};
  var qv: array<vec4<f32>, {{ D4 }}>;
  for (var d = 0u; d < {{ D4 }}u; d = d + 1u) { qv[d] = q[qb + d]; }
  var s: array<f32, {{ L }}>;
  var mx = -3.40282347e+38;
  for (var j = 0u; j < {{ L }}u; j = j + 1u) {
    let kj = kb + j * {{ k_ns }}u;
    var acc = 0.0;
    for (var d = 0u; d < {{ D4 }}u; d = d + 1u) { acc = acc + dot(qv[d], k[kj + d]); }
    let x = {{ tl.apply(ep, "acc", "r * " ~ L ~ "u + j", "j") }};
    s[j] = x;
    mx = max(mx, x);
  }
  var sum = 0.0;
  for (var j = 0u; j < {{ L }}u; j = j + 1u) { sum = sum + exp(s[j] - mx); }
  var c: array<vec4<f32>, {{ V4 }}>;
  for (var d = 0u; d < {{ V4 }}u; d = d + 1u) { c[d] = vec4<f32>(0.0); }
  for (var j = 0u; j < {{ L }}u; j = j + 1u) {
    let p = exp(s[j] - mx) / sum;
    let vj = vb + j * {{ v_ks }}u;
    for (var d = 0u; d < {{ V4 }}u; d = d + 1u) { c[d] = c[d] + p * v[vj + d]; }
  }
  let ob = {{ ix.dot("bc", o_bst) }} + m * {{ o_sp }}u;
  for (var d = 0u; d < {{ V4 }}u; d = d + 1u) {
    let o = ob + 4u * d;
    out[o / 4u] = vec4<f32>({% for i in range(4) %}{{ tl.apply(ep2, "c[d][" ~ i ~ "u]", "o + " ~ i ~ "u", "4u * d + " ~ i ~ "u") }}{{ ", " if not loop.last }}{% endfor %});
  }
}
