{#-
  matmul/ksum.wgsl: the last step of a product whose reduction is split in chunks (a product too
  deep for one invocation's loops on llvmpipe, webnn_gpu.ops.linalg.k_chunks): one output element
  per invocation, the sum of its chunks' partial products plus the few multiply-adds of the
  remainder the chunks leave, then the epilogue.

  Context:
    T            storage type of a, b, p, out ("f32" or "f16"); accumulation in f32
    M, N, K      per batch item (K the whole reduction)
    C, KC        chunks and the reduction length of each: the chunks cover k < C * KC, the
                 remainder k from C * KC to K is summed here
    batch_strides, a_bst, b_bst, o_bst   batch coordinates and a/b/out element offsets per coordinate
    a_rs, a_ks   A[m, k] = a[m * a_rs + k * a_ks];  b_ks, b_ns: B[k, n] = b[k * b_ks + n * b_ns]
    o_sp         the output's row stride (N when it is row-major)
    ep           fused epilogue (webnn_gpu/ops/_epilogue.py), channel = column n
  Bindings: a and b (only with a remainder), p (the partials, row-major [batch..., C, M, N]), epilogue operands..., out.
  Workgroup: (k.workgroup, 1, 1), one invocation per output element, 2-D folded dispatch.
-#}
{% import "_lib/index.wgsl" as ix %}
{% import "_lib/tile.wgsl" as tl %}
{{ tl.prologue(k, T, ["a", "b", "p"] if K > C * KC else ["p"], false, ep) }}
  let bidx = idx / {{ M * N }}u;
  let mn = idx - bidx * {{ M * N }}u;
  let m = mn / {{ N }}u;
  let n = mn - m * {{ N }}u;
{{ ix.coords("bc", "bidx", batch_strides) }}
  let pb = bidx * {{ C * M * N }}u + mn;
  var acc = 0.0;
  for (var c = 0u; c < {{ C }}u; c = c + 1u) {
    acc = acc + f32(p[pb + c * {{ M * N }}u]);
  }
{% if K > C * KC %}
  let ab = {{ ix.dot("bc", a_bst) }} + m * {{ a_rs }}u;
  let bb = {{ ix.dot("bc", b_bst) }} + n * {{ b_ns }}u;
  for (var k = {{ C * KC }}u; k < {{ K }}u; k = k + 1u) {
    acc = acc + f32(a[ab + k * {{ a_ks }}u]) * f32(b[bb + k * {{ b_ks }}u]);
  }
{% endif %}
  let o = {{ ix.dot("bc", o_bst) }} + m * {{ o_sp }}u + n;
  out[o] = {{ T }}({{ tl.apply(ep, "acc", "o", "n") }});
}
