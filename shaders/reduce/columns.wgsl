{#-
  reduce/columns.wgsl: reduction over the rows of a row-major [K, M] source (the kept
  dimension innermost, e.g. a global pool of an NHWC tensor: K = H * W, M = C), with no
  workgroup memory and no barriers. Invocation g = s * M + m reduces rows
  [s * chunk, min((s + 1) * chunk, K)) of column m, so neighbouring invocations read
  neighbouring addresses.

  Context:
    M, K, S, chunk  columns, rows, row splits, rows per split
    A               accumulate type (f32, i32, u32, i64, u64)
    combine         "add" | "mul" | "max" | "min"
    map_expr        WGSL over `x` (A) applied to each value, or "" for none
    final_expr      WGSL over `a` (A) and `count` giving the stored value (S == 1), or "" to
                    store the partial of split s at out[s * M + m] (type A): a [S, M] source
                    for a second pass of this kernel
    count           the number of reduced values, a WGSL float literal
    out_T           compute type of the output binding
    two             each value is src + src2 (a second source of src's shape: a skip add fused
                    into a global pool by the fuse_pool_input pass)
    two_rows        0, or src2 has this many rows (not K), reduced in a loop of its own (split s
                    takes rows [s * chunk2, (s + 1) * chunk2)) and each scaled by two_scale (an
                    f32 literal): src2 is the small image of an exact 2x bilinear upsampling, whose
                    sum is a quarter of the upsampled image's
  Bindings: src, src2 (two only), out.
  Workgroup: (k.workgroup, 1, 1); 2-D folded dispatch; guarded by idx < M * S (k.n).
-#}
{% import "_lib/io.wgsl" as io %}
{% import "reduce/_lib.wgsl" as rl %}
{{ io.prelude(k, int64) }}
{{ rl.fns(combine, A) }}

{{ io.main_header(k) }}
  let m = idx % {{ M }}u;
  let s = idx / {{ M }}u;
  let r0 = s * {{ chunk }}u;
  let r1 = min(r0 + {{ chunk }}u, {{ K }}u);
  var acc: {{ A }} = {{ rl.init(combine, A) }};
  for (var r = r0; r < r1; r = r + 1u) {
{% if two and not two_rows %}
    let x = {{ A }}(load_src(r * {{ M }}u + m)) + {{ A }}(load_src2(r * {{ M }}u + m));
{% else %}
    let x = {{ A }}(load_src(r * {{ M }}u + m));
{% endif %}
{% if map_expr %}
    acc = comb(acc, {{ map_expr }});
{% else %}
    acc = comb(acc, x);
{% endif %}
  }
{% if two and two_rows %}
  // src2 has two_rows rows whose sum is 1 / two_scale of the sum it stands for (the small
  // image of an exact 2x bilinear upsampling: the upsampling keeps the mean)
  let q0 = s * {{ chunk2 }}u;
  let q1 = min(q0 + {{ chunk2 }}u, {{ two_rows }}u);
  for (var r = q0; r < q1; r = r + 1u) {
    acc = comb(acc, {{ A }}({{ two_scale }}) * {{ A }}(load_src2(r * {{ M }}u + m)));
  }
{% endif %}
{% if final_expr %}
  let a = acc;
  let count = f32({{ count }});
  store_out(m, {{ out_T }}({{ final_expr }}));
{% else %}
  store_out(idx, acc);
{% endif %}
}
