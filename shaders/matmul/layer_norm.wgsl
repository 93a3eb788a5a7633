{#-
  matmul/layer_norm.wgsl: a product whose rows a layer normalization or a softmax over the last
  axis reads (the compiler's fuse_matmul_layer_norm, fuse_matmul_softmax; the product a matmul or
  a gemm): one invocation per output row computes its N values
  (an array of vec4 accumulators, A's row and B's rows in order of k; loops, not unrolled: LLVM compiles a 64-column row in a fraction of the unrolled time), applies the product's epilogue (a
  bias, a residual add), then the row's mean and variance (two passes over the registers, as
  norm/layer_norm.wgsl), and stores (x - mean) / sqrt(variance + epsilon) * scale + bias
  through the normalization's own epilogue (softmax: exp(x - max) / sum of exp(x - max), as
  norm/softmax.wgsl). One launch and no intermediate tensor instead of two
  (webnn_gpu/ops/linalg.py `lower_matmul_rows`). float16: A, the scale, bias and epilogue operands
  are loaded as f16 and widened (B is a float32 copy of the float16 weights), the row, its
  statistics and the outputs are f32 and each output is rounded to f16 once, at its store.

  Context:
    T            storage type of A, the scale, the bias, out and prod: "f32" or "f16" (f32
                 arithmetic)
    R, K, N      rows (all batches), multiply-adds per output, columns (N4 = ceil(N / 4) vec4s)
    a_vec        A's rows start at multiples of 4 values and K % 4 == 0: vec4 loads of A
    b_uniform    vec4s of B's float32 uniform buffer (zero-padded), or 0: B in a storage buffer
    B            [K, 4 * N4] row-major, zero-padded columns (linalg._pack_b)
    softmax      the row's softmax instead of its layer normalization
    has_scale, has_bias, epsilon   the normalization's (epsilon a WGSL f32 literal)
    ep, ep2      the product's epilogue (before the statistics) and the normalization's
    fns          the activation helpers both call, once (_epilogue.merged_functions)
    keep         also store the product (after its epilogue) to `prod` (its other readers)
  Bindings: a, b, ep operands..., [scale], [bias], ep2 operands..., out, [prod].
  Workgroup: (k.workgroup, 1, 1), one invocation per row, 2-D folded dispatch.
-#}
{% import "_lib/tile.wgsl" as tl %}
{% set N4 = (N + 3) // 4 %}
{% macro st(x) %}{% if T == "f16" %}f16({{ x }}){% else %}{{ x }}{% endif %}{% endmacro %}
{% macro ld(x) %}{% if T == "f16" %}f32({{ x }}){% else %}{{ x }}{% endif %}{% endmacro %}
{% if T == "f16" %}
enable f16;
{% endif %}
{{ tl.decl(0, "a", T, a_vec, false) }}
{{ tl.weights(1, "b", "f32", true, b_uniform) }}
{{ tl.epilogue_decls(ep, 2) }}
{% set at = 2 + ep.operands | length %}
{% if has_scale %}
@group(0) @binding({{ at }}) var<storage, read> scale: array<{{ T }}>;
{% endif %}
{% if has_bias %}
@group(0) @binding({{ at + (1 if has_scale else 0) }}) var<storage, read> bias: array<{{ T }}>;
{% endif %}
{% set at2 = at + (1 if has_scale else 0) + (1 if has_bias else 0) %}
{{ tl.epilogue_decls(ep2, at2) }}
{{ tl.decl(at2 + ep2.operands | length, "out", T, false, true) }}
{% if keep %}
{{ tl.decl(at2 + ep2.operands | length + 1, "prod", T, false, true) }}
{% endif %}
{% import "_lib/epilogue.wgsl" as epl %}
{{ epl.defs(fns) }}
{% if not ep.empty %}{{ ep.code }}{% endif %}
{% if not ep2.empty %}{{ ep2.code }}{% endif %}

@compute @workgroup_size({{ k.workgroup }})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let r = gid.x + gid.y * nwg.x * {{ k.workgroup }}u;
  if (r >= {{ R }}u) { return; }
  var c: array<vec4<f32>, {{ N4 }}>;
  for (var j = 0u; j < {{ N4 }}u; j = j + 1u) { c[j] = vec4<f32>(0.0); }
{% if a_vec %}
  for (var k4 = 0u; k4 < {{ K // 4 }}u; k4 = k4 + 1u) {
    let av = {{ "vec4<f32>(" if T == "f16" }}a[r * {{ K // 4 }}u + k4]{{ ")" if T == "f16" }};
    let bk = 4u * k4 * {{ N4 }}u;
    for (var j = 0u; j < {{ N4 }}u; j = j + 1u) {
      c[j] = c[j] + av.x * vec4<f32>(b[bk + j]) + av.y * vec4<f32>(b[bk + {{ N4 }}u + j])
           + av.z * vec4<f32>(b[bk + {{ 2 * N4 }}u + j]) + av.w * vec4<f32>(b[bk + {{ 3 * N4 }}u + j]);
    }
  }
{% else %}
  for (var k = 0u; k < {{ K }}u; k = k + 1u) {
    let av = f32(a[r * {{ K }}u + k]);
    let bk = k * {{ N4 }}u;
    for (var j = 0u; j < {{ N4 }}u; j = j + 1u) { c[j] = c[j] + av * vec4<f32>(b[bk + j]); }
  }
{% endif %}
  let o = r * {{ N }}u;
  var x: array<f32, {{ N }}>;
  var s = 0.0;
  for (var n = 0u; n < {{ N }}u; n = n + 1u) {
    let v = {{ tl.apply(ep, "c[n / 4u][n % 4u]", "o + n", "n") }};
    x[n] = v;
{% if keep %}
    prod[o + n] = {{ st("v") }};
{% endif %}
    s = s + v;
  }
{% if softmax %}
  var mx = x[0];
  for (var n = 1u; n < {{ N }}u; n = n + 1u) { mx = max(mx, x[n]); }
  var se = 0.0;
  for (var n = 0u; n < {{ N }}u; n = n + 1u) { se = se + exp(x[n] - mx); }
  for (var n = 0u; n < {{ N }}u; n = n + 1u) {
    out[o + n] = {{ st(tl.apply(ep2, "exp(x[n] - mx) / se", "o + n", "n")) }};
  }
{% else %}
  let mean = s / {{ N }}.0;
  var q = 0.0;
  for (var n = 0u; n < {{ N }}u; n = n + 1u) {
    let d = x[n] - mean;
    q = q + d * d;
  }
  let inv = 1.0 / sqrt(q / {{ N }}.0 + {{ epsilon }});
  for (var n = 0u; n < {{ N }}u; n = n + 1u) {
    var y = (x[n] - mean) * inv;
{% if has_scale %}
    y = y * {{ ld("scale[n]") }};
{% endif %}
{% if has_bias %}
    y = y + {{ ld("bias[n]") }};
{% endif %}
    out[o + n] = {{ st(tl.apply(ep2, "y", "o + n", "n")) }};
  }
{% endif %}
}
