{#-
  matmul/_lanes.wgsl: the pieces matmul/tile.wgsl's subgroup variant and matmul/mlp.wgsl share.
  A k step's 4 x TN vec4s of B, and a column tile's 4 x TN epilogue operands (ep.chan), are each
  loaded by one lane (vector v by lane v % sg, as its load v / sg) and handed to the others with
  subgroupBroadcast; the accumulators c<i>_<j> (row i, vec4 column block j) leave through a loop
  over the tile's rows that stores row 0 and moves the others up (one copy of the epilogue's code).

  share_b and share_q emit whole lines, each ending in a newline: call share_b as
  `{{ ln.share_b(...) -}}` on a line of its own, before a line that opens with a block tag.
-#}

{#- b<r>_<j> (k row r, column block j) from the lanes' loads bl<t>, for `rows` k rows (of the column
   blocks `cols` only, when given). -#}
{% macro share_b(rows, TN, sg, pad, cols=none) %}
{% for r in range(rows) %}
{% for j in (cols if cols is not none else range(TN)) %}
{{ pad }}let b{{ r }}_{{ j }} = subgroupBroadcast(bl{{ (r * TN + j) // sg }}, {{ (r * TN + j) % sg }}u);
{% endfor %}
{% endfor %}
{% endmacro %}

{#- The epilogue operands of the tile's 4 x TN channels as q<j>_<c>: lane l loads those of
   channels l, l + sg, ... (`caller(t)`: the channel of the lane's load t) as ql<t>. -#}
{% macro share_q(ep, TN, sg, pad) %}
{% for t in range((4 * TN + sg - 1) // sg) %}
{{ pad }}let ql{{ t }} = {{ ep.q_fn }}({{ caller(t) }});
{% endfor %}
{% for j in range(TN) %}
{% for c in range(4) %}
{% set v = 4 * j + c %}
{{ pad }}let q{{ j }}_{{ c }} = {{ ep.q_struct }}({% for f in range(ep.q_count) %}subgroupBroadcast(ql{{ v // sg }}.q{{ f }}, {{ v % sg }}u){{ ", " if not loop.last }}{% endfor %});
{% endfor %}
{% endfor %}
{% endmacro %}

{#- The parameters and the arguments q<j>_<c> of a row function (ep.chan). -#}
{% macro qparams(ep, TN) -%}
{% if ep.chan %}{% for j in range(TN) %}{% for c in range(4) %}, q{{ j }}_{{ c }}: {{ ep.q_struct }}{% endfor %}{% endfor %}{% endif %}
{%- endmacro %}
{% macro qargs(ep, TN) -%}
{% if ep.chan %}{% for j in range(TN) %}{% for c in range(4) %}, q{{ j }}_{{ c }}{% endfor %}{% endfor %}{% endif %}
{%- endmacro %}

{#- The loop over the TM rows of a tile: `caller()` stores row 0 (c0_<j>), then the rows move up. -#}
{% macro row_loop(TM, TN, pad) %}
{{ pad }}for (var ri = 0u; ri < {{ TM }}u; ri = ri + 1u) {
{{ pad }}  {{ caller() }}
{% for i in range(TM - 1) %}
{% for j in range(TN) %}
{{ pad }}  c{{ i }}_{{ j }} = c{{ i + 1 }}_{{ j }};
{% endfor %}
{% endfor %}
{{ pad }}}
{% endmacro %}
