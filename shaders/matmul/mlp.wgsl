{#-
  matmul/mlp.wgsl: two products in one launch, Y = ep2(ep1(X x W1) x W2) (the compiler's fuse_mlp;
  webnn_gpu/fusions/mlp.py, webnn_gpu/ops/linalg.py `lower_mlp`). Each invocation takes TM rows of
  X; its hidden rows (ep1 applied, rounded to T) live in workgroup memory, where only the same
  invocation reads them back (no barrier), and the second product reads them from there.

  Both products run as the tile kernel's subgroup variant does: the sg invocations of a workgroup
  (one subgroup) take consecutive row blocks and share one column tile; each lane loads 1 / sg of
  the weight vectors a k step needs and subgroupBroadcast hands them to the others, and so for the
  epilogues' operands read at the channel (a bias, PReLU slopes). The epilogue and stores of a
  row are a helper function called in a loop over the tile's rows (each pass handles row 0 and
  moves the others up: one copy of the epilogue's code, as the tile kernel's ep_loop). Those
  pieces are matmul/_lanes.wgsl's, which both kernels import.

  Context (webnn_gpu/ops/linalg.py `lower_mlp`):
    T            storage type of x, the weights' data, mid and out: "f32" or "f16" (f32 sums)
    K, H, N      X is [M, K], W1 [K, H], W2 [H, N] (all multiples of 4); M comes from prm[0]
    TM           rows per invocation
    TN1, TN2     vec4 column blocks of a column tile of the first / second product (dividing
                 H / 4, N / 4)
    sg           the subgroup size, also the workgroup size
    w1_uniform, w2_uniform   0, or the weights are f32 uniform buffers of that many vec4s
    ep1, ep2     the two products' epilogues (webnn_gpu/ops/_epilogue.py; functions ep1 / ep2), each
                 stored vec4 through one call of `ep1_v4` / `ep2_v4` (conv/_rows.wgsl's ep_v4: vector
                 operations where the steps allow, ep.code4)
    fns          the activation helpers both call (_epilogue.merged_functions)
    rows_out1, rows_out2   the product's column tiles are one (H4 == TN1, N4 == TN2: its column loop is
                 a block) and its rows' epilogue calls are written out instead of the row loop, which
                 lavapipe's NIR would unroll one iteration per two optimisation rounds
                 (linalg.rows_written_out)
    keep         also store the hidden rows to `mid` ([M, H]: the first product's output is read
                 elsewhere too)
    ep1.given, ep2.given   the epilogue's operand read at each output's own index (a residual add;
                 linalg.given_operand) is bound as g1 / g2 and loaded as one vec4 per vec4 store
    x64          x, the weights in storage, the given operands, out and mid are bound as u64 words,
                 the same bits (4 float32 values as a vec2<u64>, 4 float16 ones as a u64; as
                 matmul/tile.wgsl's x64, linalg.tile_words)
  Bindings: x, w1, ep1's operands, w2, ep2's operands, g1 (ep1.given), g2 (ep2.given), prm ([M]),
    out, mid (keep only).
  Workgroup: (sg, 1, 1), one invocation per TM rows, padded to whole workgroups (the padding
  invocations compute the last row and store nothing).
-#}
{% import "_lib/tile.wgsl" as tl %}
{% import "_lib/epilogue.wgsl" as epl %}
{% import "matmul/_lanes.wgsl" as ln %}
{% from "conv/_rows.wgsl" import ep_v4_def, ep_v4 %}
{% if T == "f16" %}
enable f16;
{% endif %}
{% set H4, N4 = H // 4, N // 4 %}
{% set WT = ("vec2<u64>" if T == "f32" else "u64") if x64 else "" %}
{% set LD = "w_up" if x64 else "vec4<f32>" %}
{% macro wdecl(index, name, output=false) %}
{% if x64 %}
@group(0) @binding({{ index }}) var<storage, {{ "read_write" if output else "read" }}> {{ name }}: array<{{ WT }}>;
{% else %}
{{ tl.decl(index, name, T, true, output) }}
{% endif %}
{% endmacro %}
{% macro wts(index, name, uniform) %}
{% if x64 and not uniform %}
{{ wdecl(index, name) }}
{% else %}
{{ tl.weights(index, name, T, true, uniform) }}
{% endif %}
{% endmacro %}
{{ wdecl(0, "x") }}
{{ wts(1, "w1", w1_uniform) }}
{{ tl.epilogue_decls(ep1, 2) }}
{% set w2_at = 2 + ep1.operands | length %}
{{ wts(w2_at, "w2", w2_uniform) }}
{{ tl.epilogue_decls(ep2, w2_at + 1) }}
{% set g_at = w2_at + 1 + ep2.operands | length %}
{% if ep1.given %}
{% if ep1.given_g4 %}
{{ tl.decl(g_at, "g1", T, true, false) }}
{% else %}
{{ wdecl(g_at, "g1") }}
{% endif %}
{{ tl.given_fns(ep1, "g1", true) }}
{% endif %}
{% if ep2.given %}
{% if ep2.given_g4 %}
{{ tl.decl(g_at + (1 if ep1.given else 0), "g2", T, true, false) }}
{% else %}
{{ wdecl(g_at + (1 if ep1.given else 0), "g2") }}
{% endif %}
{{ tl.given_fns(ep2, "g2", true) }}
{% endif %}
{% set prm_at = g_at + (1 if ep1.given else 0) + (1 if ep2.given else 0) %}
@group(0) @binding({{ prm_at }}) var<storage, read> prm: array<u32>;
{{ wdecl(prm_at + 1, "out", true) }}
{% if keep %}
{{ wdecl(prm_at + 2, "mid", true) }}
{% endif %}
{{ epl.defs(fns) }}
{% if not ep1.empty %}{{ ep1.code }}{% endif %}
{% if not ep2.empty %}{{ ep2.code }}{% endif %}
{{ ep_v4_def(ep1) }}
{{ ep_v4_def(ep2) }}
{% if x64 %}
{{ tl.word_fns(T) }}
{% endif %}

// the hidden rows of the workgroup's invocations: invocation li's row i at (li * TM + i) * H / 4
var<workgroup> hid: array<vec4<f32>, {{ sg * TM * H4 }}>;

// the first product's row m (hidden row hrow in `hid`), columns 4 * n0 .. through ep1
fn row1(m: u32, live: bool, hrow: u32, n0: u32{% for j in range(TN1) %}, c{{ j }}: vec4<f32>{% endfor %}{{ ln.qparams(ep1, TN1) }}) {
{% for j in range(TN1) %}
  {
    let n = 4u * (n0 + {{ j }}u);
    let o = m * {{ H }}u + n;
{% if ep1.given %}
    let g = {% if x64 and not ep1.given_g4 %}w_up(g1[o / 4u]){% else %}{{ tl.given4(ep1, "g1", "o / 4u") }}{% endif %};
{% endif %}
    let e = vec4<{{ T }}>({{ ep_v4(ep1, "c" ~ j, "o", "n", "q" ~ j ~ "_", "g") }});
    hid[hrow + n0 + {{ j }}u] = vec4<f32>(e);
{% if keep %}
    if (live) { mid[o / 4u] = {% if x64 %}w_pk(vec4<f32>(e)){% else %}e{% endif %}; }
{% endif %}
  }
{% endfor %}
}

// the second product's row m, columns 4 * n0 .. through ep2, stored
fn row2(m: u32, live: bool, n0: u32{% for j in range(TN2) %}, c{{ j }}: vec4<f32>{% endfor %}{{ ln.qparams(ep2, TN2) }}) {
  if (!live) { return; }
{% for j in range(TN2) %}
  {
    let n = 4u * (n0 + {{ j }}u);
    let o = m * {{ N }}u + n;
{% if ep2.given %}
    let g = {% if x64 and not ep2.given_g4 %}w_up(g2[o / 4u]){% else %}{{ tl.given4(ep2, "g2", "o / 4u") }}{% endif %};
{% endif %}
    out[o / 4u] = {% if x64 %}w_pk{% else %}vec4<{{ T }}>{% endif %}({{ ep_v4(ep2, "c" ~ j, "o", "n", "q" ~ j ~ "_", "g") }});
  }
{% endfor %}
}

{# the k step of one product: B vector v = r * TN + j (row r, column block j) is loaded by lane
   v % sg as its load v / sg and shared; rows of A (a{i}) are each lane's own #}
{% macro kstep(w, rowlen4, TN, a_expr) %}
{% for t in range((4 * TN + sg - 1) // sg) %}
      let bl{{ t }} = {{ (LD if (w == "w1" and not w1_uniform) or (w == "w2" and not w2_uniform) else "vec4<f32>") }}({{ w }}[(kc + bo{{ t }}r) * {{ rowlen4 }}u + n0 + bo{{ t }}c]);
{% endfor %}
{{ ln.share_b(4, TN, sg, "      ") -}}
{% for i in range(TM) %}
      let a{{ i }} = {{ a_expr(i) }};
{% for j in range(TN) %}
      c{{ i }}_{{ j }} = c{{ i }}_{{ j }} + a{{ i }}.x * b0_{{ j }} + a{{ i }}.y * b1_{{ j }} + a{{ i }}.z * b2_{{ j }} + a{{ i }}.w * b3_{{ j }};
{% endfor %}
{% endfor %}
{% endmacro %}
{% macro offsets(TN) %}
{% for t in range((4 * TN + sg - 1) // sg) %}
  let bv{{ t }} = min(lane + {{ sg * t }}u, {{ 4 * TN - 1 }}u);
  let bo{{ t }}r = bv{{ t }} / {{ TN }}u;
  let bo{{ t }}c = bv{{ t }} % {{ TN }}u;
{% endfor %}
{% endmacro %}
{% macro hoist(ep, TN, width) %}
{% if ep.chan %}
{% call(t) ln.share_q(ep, TN, sg, "    ") %}min(4u * n0 + lane + {{ sg * t }}u, {{ width - 1 }}u){% endcall %}
{% endif %}
{% endmacro %}
{% macro x_row(i) %}{{ LD }}(x[xr{{ i }} + kc / 4u]){% endmacro %}
{% macro h_row(i) %}hid[hb + {{ i }}u * {{ H4 }}u + kc / 4u]{% endmacro %}

@compute @workgroup_size({{ sg }})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(local_invocation_index) li: u32,
        @builtin(subgroup_invocation_id) lane: u32) {
  let M_ = prm[0];
  let m0 = gid.x * {{ TM }}u;
  let hb = li * {{ TM * H4 }}u;
{% for i in range(TM) %}
  let xr{{ i }} = min(m0 + {{ i }}u, M_ - 1u) * {{ K // 4 }}u;
{% endfor %}
  // ---- the first product, column tile by column tile, into hid (and mid)
  {
{{ offsets(TN1) }}
{% if H4 == TN1 %}
  { let n0 = 0u;
{% else %}
  for (var n0 = 0u; n0 < {{ H4 }}u; n0 = n0 + {{ TN1 }}u) {
{% endif %}
{% for i in range(TM) %}
{% for j in range(TN1) %}
    var c{{ i }}_{{ j }} = vec4<f32>(0.0);
{% endfor %}
{% endfor %}
    for (var kc = 0u; kc < {{ K }}u; kc = kc + 4u) {
{{ kstep("w1", H4, TN1, x_row) }}
    }
{{ hoist(ep1, TN1, H) }}
{% if rows_out1 %}
{% for i in range(TM) %}
    row1(m0 + {{ i }}u, m0 + {{ i }}u < M_, hb + {{ i * H4 }}u, n0{% for j in range(TN1) %}, c{{ i }}_{{ j }}{% endfor %}{{ ln.qargs(ep1, TN1) }});
{% endfor %}
{% else %}
{% call ln.row_loop(TM, TN1, "    ") %}row1(m0 + ri, m0 + ri < M_, hb + ri * {{ H4 }}u, n0{% for j in range(TN1) %}, c0_{{ j }}{% endfor %}{{ ln.qargs(ep1, TN1) }});{% endcall %}
{% endif %}
  }
  }
  // ---- the second product from hid, column tile by column tile
  {
{{ offsets(TN2) }}
{% if N4 == TN2 %}
  { let n0 = 0u;
{% else %}
  for (var n0 = 0u; n0 < {{ N4 }}u; n0 = n0 + {{ TN2 }}u) {
{% endif %}
{% for i in range(TM) %}
{% for j in range(TN2) %}
    var c{{ i }}_{{ j }} = vec4<f32>(0.0);
{% endfor %}
{% endfor %}
    for (var kc = 0u; kc < {{ H }}u; kc = kc + 4u) {
{{ kstep("w2", N4, TN2, h_row) }}
    }
{{ hoist(ep2, TN2, N) }}
{% if rows_out2 %}
{% for i in range(TM) %}
    row2(m0 + {{ i }}u, m0 + {{ i }}u < M_, n0{% for j in range(TN2) %}, c{{ i }}_{{ j }}{% endfor %}{{ ln.qargs(ep2, TN2) }});
{% endfor %}
{% else %}
{% call ln.row_loop(TM, TN2, "    ") %}row2(m0 + ri, m0 + ri < M_, n0{% for j in range(TN2) %}, c0_{{ j }}{% endfor %}{{ ln.qargs(ep2, TN2) }});{% endcall %}
{% endif %}
  }
  }
}
