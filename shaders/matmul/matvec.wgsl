{#-
  matmul/matvec.wgsl: C = A x B for a product of few rows (a matrix-vector product: a dense layer
  on one sample, a conv2d whose window covers its whole input) with a constant B, the reduction
  split across the lanes of a subgroup. Each subgroup owns CN vec4 columns of the output for all
  M rows; lane l takes the k steps (4 values of k each) l, l + L, l + 2L, ..., loads its M vec4s
  of A and the 4 x CN vec4s of B a step needs (B is packed at build time so that these are
  consecutive: a lane's loads are one stream and the subgroup's L lanes read one block of
  memory), and the subgroup adds its lanes' partial sums with subgroupAdd (registers, no
  workgroup memory or barrier). Many subgroups of short loops instead of a few invocations
  walking all of K: both cores busy on a product of 16 vec4 columns.

  Context:
    T            storage type of a, b, out ("f32" or "f16"); accumulation in f32
    L            subgroup size (linalg.subgroup_lanes); the workgroup is a multiple of it
    M, K         output rows and the reduction length; K4 = ceil(K / 4) k steps
    mean         None, or A's one row is the column means of a [rows, K] source bound as `a`
                 (a global average pool's image or partial sums; the compiler's fuse_pooled_head):
                 {rows, count: the divisor, f32: the source is float32 (else T), shared}; each
                 lane sums its vec4 of k over the rows in float32, in row order, and divides by
                 count; with shared, the workgroup's invocations do so once for all its subgroups
                 into workgroup memory (amean, K4 padded to KT * L vec4s, zero past K4), then a
                 barrier; a sum over one row is a block, not a loop of one iteration (lavapipe's NIR
                 takes optimisation rounds to unroll it)
    win          None, or A's rows are an NHWC conv's output pixels gathered from its input
                 (linalg.matvec_window): C4 vec4s of channels per tap, KW taps a filter row,
                 ky4 / kx4 vec4s between filter rows / columns, H, W, dh, dw the input's size
                 and the dilations, last its last vec4; per row base (its window's first vec4,
                 negative past a padded edge), y0, x0 (its top left input pixel), ty / tx (its
                 window passes the input's rows / columns: those taps select zeros)
    runs         lane l takes the k steps l KT .. l KT + KT - 1 (its B one contiguous run: reads
                 stream from memory), else l, l + L, l + 2L, ... (the subgroup's one block a step)
    CN           vec4 columns per subgroup; G subgroups (column groups), all heads'
    a_vec        A read as vec4 along k (K and a_rs multiples of 4; a_rs4 = a_rs / 4), else scalar
    a_rs         element stride between rows of A (row m of A starts at m * a_rs)
    heads        the products sharing A, each {G0, G: its column groups from G0 on, N: its
                 columns, o_rs: element stride between rows of its output, ep: its fused epilogue
                 (webnn_gpu/ops/_epilogue.py; function names of their own where several), out: its
                 output's binding name}; one head for a plain product (linalg.matvec_kernel),
                 several for the heads the compiler's fuse_heads made one node (linalg.lower_heads)
    fns          the activation helpers of all the heads' epilogues (_epilogue.merged_functions)
    b_uniform    0, or B (float32) is a uniform buffer of this many vec4s
    b_words      "", or B is a storage buffer of vec4<u64> words of this type's values, the same
                 bits: "f32" 8 values a word, "f16" 16 (float16 B, or float32 values that are
                 all exact float16 ones; linalg.matvec_words); on Mesa 22 a storage access is a
                 loop over the lanes and the components, and a u64 moves 2 or 4 values
    b_texture    0, or B is an rgba32float texture_2d of 2^b_texture texels a row (vec4 i at
                 (i & (2^b_texture - 1), i >> b_texture); linalg.texture_copy)
  B layout (linalg.matvec_pack): vec4 (((g * K4 + s) * 4 + i) * CN + c) holds B[4 s + i, 4 (g CN + c)
    .. + 3] (zero past K and N); the heads' matrices side by side, head h's from column group G0 on.
    softmax      the row's softmax after the (one) head's epilogue (the compiler's fuse_pooled_head:
                 one row, one workgroup of all G column groups): the sums go to workgroup memory
                 (logits), then a barrier, then each invocation stores the softmax of its columns
  Bindings: a, b, each head's epilogue operands..., each head's output (scalar).
  Workgroup: (k.workgroup, 1, 1); subgroup g = idx / L; whole subgroups return together.
-#}
{% import "_lib/tile.wgsl" as tl %}
{% if T == "f16" %}
enable f16;
{% endif %}
{{ tl.decl(0, "a", "f32" if mean and mean.f32 else T, a_vec, false) }}
{% if b_words %}
@group(0) @binding(1) var<storage, read> b: array<vec4<u64>>;
{% elif b_texture %}
@group(0) @binding(1) var b: texture_2d<f32>;
{% else %}
{{ tl.weights(1, "b", T, true, b_uniform) }}
{% endif %}
{% set ns = namespace(at=2) %}
{% for h in heads %}
{{ tl.epilogue_decls(h.ep, ns.at) }}
{% set ns.at = ns.at + h.ep.operands | length %}
{% endfor %}
{% for h in heads %}
{{ tl.decl(ns.at + loop.index0, h.out, T, false, true) }}
{% endfor %}
{% import "_lib/epilogue.wgsl" as epl %}
{{ epl.defs(fns) }}
{% if b_words %}
{{ tl.word_fns(b_words) }}
{% endif %}
{% for h in heads %}
{% if not h.ep.empty %}{{ h.ep.code }}{% endif %}
{% endfor %}

{% if mean and mean.shared %}
var<workgroup> amean: array<vec4<f32>, {{ KT * L }}>;

{% endif %}
{% if softmax %}
var<workgroup> logits: array<f32, {{ G * CN * 4 }}>;

{% endif %}
@compute @workgroup_size({{ k.workgroup }})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(subgroup_invocation_id) lane: u32{% if mean and mean.shared or softmax %}, @builtin(local_invocation_index) li: u32{% endif %}) {
  let idx = gid.x + gid.y * nwg.x * {{ k.workgroup }}u;
  let g = idx / {{ L }}u;
{% if mean and mean.shared %}
  // the means once per workgroup: invocation li sums the vec4s li, li + WG, ... over the rows
  for (var i = li; i < {{ KT * L }}u; i = i + {{ k.workgroup }}u) {
    var m = vec4<f32>(0.0);
{% if mean.rows == 1 %}
    { let p = 0u;
{% else %}
    for (var p = 0u; p < {{ mean.rows }}u; p = p + 1u) {
{% endif %}
      m = m + vec4<f32>(a[p * {{ K4 }}u + min(i, {{ K4 - 1 }}u)]);
    }
    amean[i] = select(vec4<f32>(0.0), m / {{ mean.count }}.0, i < {{ K4 }}u);
  }
  workgroupBarrier();
{% endif %}
{% if not softmax %}
  if (g >= {{ G }}u) { return; }
{% endif %}
{% for m in range(M) %}
{% for c in range(CN) %}
  var acc{{ m }}_{{ c }} = vec4<f32>(0.0);
{% endfor %}
{% endfor %}
  let bg = g * {{ KT * L * 4 * CN }}u;
  for (var t = 0u; t < {{ KT }}u; t = t + 1u) {
{% if runs %}
    let s = lane * {{ KT }}u + t;
{% else %}
    let s = t * {{ L }}u + lane;
{% endif %}
{% if win %}
    let tw = s / {{ win.C4 }}u;
    let kxw = tw % {{ win.KW }}u;
    let kyw = tw / {{ win.KW }}u;
    let aw = kyw * {{ win.ky4 }}u + kxw * {{ win.kx4 }}u + s % {{ win.C4 }}u;
{% endif %}
{% for m in range(M) %}
{% if mean and mean.shared %}
    let a{{ m }} = amean[s];
{% elif mean %}
    var a{{ m }} = vec4<f32>(0.0);
{% if mean.rows == 1 %}
    { let p = 0u;
{% else %}
    for (var p = 0u; p < {{ mean.rows }}u; p = p + 1u) {
{% endif %}
      a{{ m }} = a{{ m }} + vec4<f32>(a[p * {{ K4 }}u + {% if K4 % L %}min(s, {{ K4 - 1 }}u){% else %}s{% endif %}]);
    }
    a{{ m }} = {% if K4 % L %}select(vec4<f32>(0.0), a{{ m }} / {{ mean.count }}.0, s < {{ K4 }}u){% else %}a{{ m }} / {{ mean.count }}.0{% endif %};
{% elif win %}
{% set r = win.rows[m] %}
{% set conds = ([("s < " ~ K4 ~ "u")] if K4 % L else [])
   + ([("u32(" ~ r.y0 ~ " + i32(kyw) * " ~ win.dh ~ ") < " ~ win.H ~ "u")] if r.ty else [])
   + ([("u32(" ~ r.x0 ~ " + i32(kxw) * " ~ win.dw ~ ") < " ~ win.W ~ "u")] if r.tx else []) %}
{% if conds %}
    let a{{ m }} = select(vec4<f32>(0.0), vec4<f32>(a[u32(clamp({{ r.base }} + i32(aw), 0, {{ win.last }}))]), {{ conds | join(" && ") }});
{% else %}
    let a{{ m }} = vec4<f32>(a[{{ r.base }}u + aw]);
{% endif %}
{% elif a_vec %}
    let a{{ m }} = {% if K4 % L %}select(vec4<f32>(0.0), {% endif %}vec4<f32>(a[{% if K4 % L %}min({{ m * a_rs4 }}u + s, {{ (M - 1) * a_rs4 + K4 - 1 }}u){% else %}{{ m * a_rs4 }}u + s{% endif %}]){% if K4 % L %}, s < {{ K4 }}u){% endif %};
{% else %}
    let k{{ m }} = {{ m * a_rs }}u + 4u * s;
    let a{{ m }} = vec4<f32>({% for i in range(4) %}{% if i > 0 %}, {% endif %}{% if K % 4 == 0 and K4 % L == 0 %}f32(a[k{{ m }} + {{ i }}u]){% else %}select(0.0, f32(a[min(k{{ m }} + {{ i }}u, {{ (M - 1) * a_rs + K - 1 }}u)]), 4u * s + {{ i }}u < {{ K }}u){% endif %}{% endfor %});
{% endif %}
{% endfor %}
    let bo = bg + s * {{ 4 * CN }}u;
{% if b_words %}
{% set per = 2 if b_words == "f32" else 4 %}
{% for j in range(4 * CN // per) %}
    let bw{{ j }} = b[bo / {{ per }}u + {{ j }}u];
{% endfor %}
{% endif %}
{% for i in range(4) %}
{% for c in range(CN) %}
{% if b_words %}
{% set v = i * CN + c %}
    let b{{ i }}_{{ c }} = w_up(bw{{ v // per }}{{ ([".xy", ".zw"] if per == 2 else [".x", ".y", ".z", ".w"])[v % per] }});
{% elif b_texture %}
    let b{{ i }}_{{ c }} = textureLoad(b, vec2<u32>((bo + {{ i * CN + c }}u) & {{ 2 ** b_texture - 1 }}u, (bo + {{ i * CN + c }}u) >> {{ b_texture }}u), 0);
{% else %}
    let b{{ i }}_{{ c }} = vec4<f32>(b[bo + {{ i * CN + c }}u]);
{% endif %}
{% endfor %}
{% endfor %}
{% for m in range(M) %}
{% for c in range(CN) %}
    acc{{ m }}_{{ c }} = acc{{ m }}_{{ c }} + a{{ m }}.x * b0_{{ c }} + a{{ m }}.y * b1_{{ c }} + a{{ m }}.z * b2_{{ c }} + a{{ m }}.w * b3_{{ c }};
{% endfor %}
{% endfor %}
  }
{% for m in range(M) %}
{% for c in range(CN) %}
  let r{{ m }}_{{ c }} = subgroupAdd(acc{{ m }}_{{ c }});
{% endfor %}
{% endfor %}
  // lane j % L stores the sums of (row, column block) j = m * CN + c
{% for h in heads %}
{% if heads | length > 1 %}
  if (g >= {{ h.G0 }}u && g < {{ h.G0 + h.G }}u) {
{% endif %}
{% for m in range(M) %}
{% for c in range(CN) %}
  if (lane == {{ (m * CN + c) % L }}u) {
    let n0 = ({% if h.G0 %}(g - {{ h.G0 }}u){% else %}g{% endif %} * {{ CN }}u + {{ c }}u) * 4u;
{% for i in range(4) %}
    if (n0 + {{ i }}u < {{ h.N }}u) {
      let o = {{ m * h.o_rs }}u + n0 + {{ i }}u;
{% if softmax %}
      logits[o] = {{ tl.apply(h.ep, "r" ~ m ~ "_" ~ c ~ "." ~ "xyzw"[i], "o", "n0 + " ~ i ~ "u") }};
{% else %}
      {{ h.out }}[o] = {{ T }}({{ tl.apply(h.ep, "r" ~ m ~ "_" ~ c ~ "." ~ "xyzw"[i], "o", "n0 + " ~ i ~ "u") }});
{% endif %}
    }
{% endfor %}
  }
{% endfor %}
{% endfor %}
{% if heads | length > 1 %}
  }
{% endif %}
{% endfor %}
{% if softmax %}
  // the row's softmax (one row, one workgroup of all the column groups): stable, in f32
  workgroupBarrier();
  for (var n = li; n < {{ heads[0].N }}u; n = n + {{ k.workgroup }}u) {
    var mx = logits[0];
    for (var j = 1u; j < {{ heads[0].N }}u; j = j + 1u) { mx = max(mx, logits[j]); }
    var sm = 0.0;
    for (var j = 0u; j < {{ heads[0].N }}u; j = j + 1u) { sm = sm + exp(logits[j] - mx); }
    {{ heads[0].out }}[n] = {{ T }}(exp(logits[n] - mx) / sm);
  }
{% endif %}
}
