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
{% import "_lib/index.wgsl" as ix %}
{% import "reduce/_lib.wgsl" as rl %}
{% import "norm/_moments.wgsl" as mo %}
{{ io.prelude(k, int64) }}
{{ rl.fns("add", "f32") }}

fn base_of(m: u32) -> u32 {
{{ ix.coords("p", "m", kept_rm) }}
  return {{ ix.dot("p", kept_st) }};
}

fn value(base: u32, r: u32) -> f32 {
{{ ix.coords("q", "r", red_rm) }}
  return f32(load_src(base + {{ ix.dot("q", red_st) }}));
}

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
