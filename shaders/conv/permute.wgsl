{#-
  conv/permute.wgsl: out = transpose(in) for a filter that is not a build-time constant, moving
  elements as stored (exact for every type). out is row-major with strides out_strides; in is read
  at sum_d coord_d * in_strides[d].

  Context: out_strides, in_strides (same rank).
  Bindings: in, out (io.decl helpers).
  Workgroup: (k.workgroup, 1, 1); one invocation per element, 2-D folded dispatch.
-#}
{% import "_lib/io.wgsl" as io %}
{% import "_lib/index.wgsl" as ix %}
{{ io.prelude(k, int64) }}
{{ io.main_header(k) }}
{{ ix.coords("c", "idx", out_strides) }}
  store_raw_out(idx, load_raw_in({{ ix.dot("c", in_strides) }}));
}
