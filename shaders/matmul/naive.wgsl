{#-
  matmul/naive.wgsl: one output element per invocation, a plain loop over k with scalar loads.
  The simple reference variant (WEBNN_GPU_FORCE_MATMUL=naive) and the fallback for tiny products.

  Context:
    T            storage type of a, b, out ("f32" or "f16"); accumulation in f32
    M, N, K      per batch item
    batch_strides, a_bst, b_bst   batch coordinates and a/b element offsets per coordinate
    a_rs, a_ks   A[m, k] = a[m * a_rs + k * a_ks];  b_ks, b_ns: B[k, n] = b[k * b_ks + n * b_ns]
    ep           fused epilogue (webnn_gpu/ops/_epilogue.py), channel = column n
  Bindings: a, b, epilogue operands..., out (row-major [batch..., M, N]).
  Workgroup: (k.workgroup, 1, 1), one invocation per output element, 2-D folded dispatch.
-#}
{% import "_lib/index.wgsl" as ix %}
{% import "_lib/tile.wgsl" as tl %}
{{ tl.prologue(k, T, ["a", "b"], false, ep) }}
  let bidx = idx / {{ M * N }}u;
  let mn = idx - bidx * {{ M * N }}u;
  let m = mn / {{ N }}u;
  let n = mn - m * {{ N }}u;
{{ ix.coords("bc", "bidx", batch_strides) }}
  let ab = {{ ix.dot("bc", a_bst) }} + m * {{ a_rs }}u;
  let bb = {{ ix.dot("bc", b_bst) }} + n * {{ b_ns }}u;
  var acc = 0.0;
  for (var k = 0u; k < {{ K }}u; k = k + 1u) {
    acc = acc + f32(a[ab + k * {{ a_ks }}u]) * f32(b[bb + k * {{ b_ks }}u]);
  }
  out[idx] = {{ T }}({{ tl.apply(ep, "acc", "idx", "n") }});
}
