{#-
  matmul/small.wgsl: a small product C = A x B with every size and stride read at run time from
  a u32 parameter buffer, so one pipeline serves every shape (fewer pipelines to compile on a
  cold start; the small products of a model, e.g. the squeeze-and-excitation 1x1 convs on
  pooled 1x1 features, would otherwise each compile their own tile kernel). One output per
  invocation, a plain loop over k with scalar loads: only for products too small for the tile
  kernel's register blocking to matter (webnn_gpu/ops/linalg.py `SMALL_MAX_OUTPUTS`).

  Context:
    T            storage type of a, b, out ("f32" or "f16"); accumulation in f32
    ep           fused epilogue (webnn_gpu/ops/_epilogue.py), channel = column n + group offset
  Parameters (binding `prm`, u32, see linalg.py `small_params`):
    0 n_outputs (M * N * batches)   1 M   2 N   3 K
    4 a_rs   5 a_ks   6 b_ks   7 b_ns   8 o_P   9 o_sn   10 o_sp   11 o_so
    12 a_bst  13 b_bst  14 o_bst  15 group_cols  (one batch dimension: conv groups or a batch)
  Bindings: a, b, epilogue operands..., prm, out.
  Workgroup: (k.workgroup, 1, 1), one invocation per output element, 2-D folded dispatch.
-#}
{% import "_lib/tile.wgsl" as tl %}
{% if T == "f16" %}
enable f16;
{% endif %}
{{ tl.decl(0, "a", T, false, false) }}
{{ tl.decl(1, "b", T, false, false) }}
{{ tl.epilogue_decls(ep, 2) }}
@group(0) @binding({{ 2 + ep.operands | length }}) var<storage, read> prm: array<u32>;
{{ tl.decl(3 + ep.operands | length, "out", T, false, true) }}
{{ tl.epilogue_fns(ep) }}

@compute @workgroup_size({{ k.workgroup }})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let idx = gid.x + gid.y * nwg.x * {{ k.workgroup }}u;
  if (idx >= prm[0]) { return; }
  let M = prm[1];
  let N = prm[2];
  let K = prm[3];
  let mn = idx % (M * N);
  let bidx = idx / (M * N);
  let m = mn / N;
  let n = mn - m * N;
  let ar = bidx * prm[12] + m * prm[4];
  let bc = bidx * prm[13] + n * prm[7];
  let a_ks = prm[5];
  let b_ks = prm[6];
  var acc = 0.0;
  for (var kk = 0u; kk < K; kk = kk + 1u) {
    acc = acc + f32(a[ar + kk * a_ks]) * f32(b[bc + kk * b_ks]);
  }
  let o = bidx * prm[14] + (m / prm[8]) * prm[9] + (m % prm[8]) * prm[10] + n * prm[11];
  out[o] = {{ T }}({{ tl.apply(ep, "acc", "o", "n + bidx * prm[15]") }});
}
