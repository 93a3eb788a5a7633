{#-
  reduce/cumsum.wgsl: cumulative sums along one axis.

  A line is the L values along the axis at one (outer, inner) position: element j of line l is
  at (l / inner) * L * inner + l % inner + j * inner. Lines are cut in NB blocks of B values.
  Context:
    phase      "line"       one invocation per line scans it (NB = 1, B = L); bindings src, out
               "block_sums" one invocation per (line, block) sums its block into out[l * NB + b]
               "offsets"    one invocation per line: out[l * NB + b] = the sum of the blocks before
                            b in scan order (src: the block sums)
               "blocks"     one invocation per (line, block) scans its block from offs[l * NB + b];
                            bindings src, offs, out
    L, inner, B, NB, A (accumulate type), out_T (output compute type)
    exclusive  each output excludes its own value; reverse: scan from the high end
  Workgroup: (k.workgroup, 1, 1); 2-D folded dispatch; guarded by idx < k.n.
-#}
{% import "_lib/io.wgsl" as io %}
{{ io.prelude(k, int64) }}

{{ io.main_header(k) }}
{% if phase == "offsets" %}
  let l = idx;
  var acc: {{ A }} = {{ A }}(0);
  for (var i = 0u; i < {{ NB }}u; i = i + 1u) {
{% if reverse %}
    let b = {{ NB - 1 }}u - i;
{% else %}
    let b = i;
{% endif %}
    store_out(l * {{ NB }}u + b, acc);
    acc = acc + load_src(l * {{ NB }}u + b);
  }
}
{% else %}
{% if phase == "line" %}
  let l = idx;
  let b = 0u;
{% else %}
  let l = idx / {{ NB }}u;
  let b = idx % {{ NB }}u;
{% endif %}
  let base = (l / {{ inner }}u) * {{ L * inner }}u + l % {{ inner }}u;
  let j0 = b * {{ B }}u;
  let n = min({{ B }}u, {{ L }}u - j0);
{% if phase == "blocks" %}
  var acc: {{ A }} = load_offs(idx);
{% else %}
  var acc: {{ A }} = {{ A }}(0);
{% endif %}
  for (var i = 0u; i < n; i = i + 1u) {
{% if reverse %}
    let j = j0 + n - 1u - i;
{% else %}
    let j = j0 + i;
{% endif %}
    let e = base + j * {{ inner }}u;
    let x = {{ A }}(load_src(e));
{% if phase == "block_sums" %}
    acc = acc + x;
{% elif exclusive %}
    store_out(e, {{ out_T }}(acc));
    acc = acc + x;
{% else %}
    acc = acc + x;
    store_out(e, {{ out_T }}(acc));
{% endif %}
  }
{% if phase == "block_sums" %}
  store_out(idx, acc);
{% endif %}
}
{% endif %}
