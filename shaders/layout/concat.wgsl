{#-
  layout/concat.wgsl: concat of several inputs along one axis in one kernel, one output
  element per invocation; exact for every data type (raw loads and stores).

  The output is seen as [outer, total, inner] (total: the concat axis); output element
  (o, a, i) comes from the part whose range [lo, hi) holds a, at (o, a - lo, i) of that part.
  Context:
    k.bindings  [src0, src1, ... (the parts, in order), dst]
    parts       [{name, lo, hi, size}] per input: its range along the axis and its size there
    inner       product of the dimensions after the axis; total: the output's axis dimension
  Workgroup: (k.workgroup, 1, 1); 2-D folded dispatch; guarded by idx < k.n.
-#}
{% import "_lib/io.wgsl" as io %}
{{ io.prelude(k, int64) }}
{{ io.main_header(k) }}
  let i = idx % {{ inner }}u;
  let a = (idx / {{ inner }}u) % {{ total }}u;
  let o = idx / {{ inner * total }}u;
{% for p in parts %}
  {% if not loop.first %}} else {% endif %}{% if not loop.last %}if (a < {{ p.hi }}u) {% endif %}{
    store_raw_dst(idx, load_raw_{{ p.name }}((o * {{ p.size }}u + a - {{ p.lo }}u) * {{ inner }}u + i));
{% endfor %}
  }
}
