{#-
  norm/moments.wgsl: mean and variance of K values for each of M outputs (instance and layer
  normalization), computed by norm/_moments.wgsl's macros. Accumulates in f32.

  Value r of output m is src[base(m) + off(r)] as in reduce/reduce.wgsl.
  Context:
    mode              "thread" (one invocation per output) | "group" (one workgroup per output)
    M, K
    kept_rm, kept_st  row-major strides over the kept dims / their input strides
    red_rm, red_st    row-major strides over the reduced dims / their input strides
  Bindings: src, out (float32 [M, 2]: mean, variance).
  Workgroup: (k.workgroup, 1, 1); 2-D folded dispatch; guards idx < M (thread) or g < M (group).
-#}
{% import "_lib/io.wgsl" as io %}
{% import "reduce/_lib.wgsl" as rl %}
{% import "norm/_moments.wgsl" as mo %}
{{ io.prelude(k, int64) }}
{{ rl.fns("add", "f32") }}

{{ mo.rows(kept_rm, kept_st, red_rm, red_st, "load_src") }}

{% if mode == "thread" %}
{{ io.main_header(k) }}
  let base = base_of(idx);
{{ mo.thread(K) }}
  store_out(2u * idx, mean);
  store_out(2u * idx + 1u, variance);
}
{% else %}
{{ mo.group_main(k, M, K) }}
  if (t == 0u) {
    store_out(2u * m, mean);
    store_out(2u * m + 1u, variance);
  }
}
{% endif %}
