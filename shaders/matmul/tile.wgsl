{#-
  matmul/tile.wgsl: register-blocked C = A x B, each invocation computing a TM x (4*TN4) tile of
  outputs in vec4 accumulators (f32), reading vec4 straight from storage where aligned. Serves
  matmul, gemm and conv2d as an implicit GEMM (A gathered from the input image, no im2col buffer).

  Context (all computed in Python; see webnn_gpu/ops/linalg.py `tile_kernel`):
    T            storage type of a, b, out: "f32" or "f16" (accumulation is always f32)
    TM, TN4      rows per invocation, vec4 column blocks per invocation
    order        "n": consecutive invocations take consecutive column tiles (A rows shared), "m": rows
    M, N         output rows and columns (per batch item); tiles_m, tiles_n = ceil(M/TM), ceil(N/4/TN4)
    batch_strides row-major strides of the batch shape (matmul broadcast dims, or [groups] for conv)
    a_bst, b_bst, o_bst   element offsets per batch coordinate for a, b and out
    KH, KW       outer reduction loops (filter window; 1, 1 for a plain matmul)
    KC           inner reduction length per (kh, kw); KC4 = KC rounded down to a multiple of 4
    a_mode       "dense": A[m, k] = a[m * a_rs + k * a_ks]
                 "im2col": A[m, (kh, kw, c)] = input[n, oh*sh - pt + kh*dh, ow*sw - pl + kw*dw, c]
                 (m = (n, oh, ow)); in_sn, in_sh, in_sw, in_sc element strides of the input,
                 H, W, OW, P = OH*OW, sh, sw, dh, dw, pt, pl
    win          [] or, with im2col, the input column offsets (from ow0 * sw - pl) that a tile's TM
                 output pixels read over the window's KW taps: the TM rows are consecutive pixels of
                 one output row (OW % TM == 0), so each k step loads those columns once per filter
                 row and every tap reads its pixels' vectors from them (len(win) loads instead of
                 TM * KW); the KW taps are unrolled
    win_fused    with win: the KW taps' B vectors are loaded first and each accumulator adds all
                 KW taps in one expression (loaded and stored once per filter row, not KW times;
                 not with bdot)
    a_ks         k stride of A (in_sc for im2col)
    a_vec        A read as vec4 along k (a_ks == 1, offsets multiples of 4)
    a_scale      A[m, k] is multiplied by asc[k] as it is loaded (dense, a_vec; a squeeze-and-excite
                 scale folded into the next pointwise conv by the fuse_conv_input pass)
    a_add        ... and ares[m, k] (A's shape) is added after the scale (a skip connection)
    pre          None, or each in-image vec4 of A (a_vec, one group) goes through steps and an
                 activation as it is loaded: {ops: the steps' WGSL operators ("-", "/", "*", "+"),
                 each with one value per input channel k, row j of `pre` ([len(ops), KC]: C4 vec4s
                 a row, with dyn KC4_ / 4 from the parameters: one pipeline for every KC); act: a
                 WGSL format of the activation, "{}" the value} (a pre-activation's normalize then
                 activate, folded into the conv by fuse_conv_input_preact); the
                 per-channel vec4s are loaded once per k step, out-of-image taps stay 0 (the
                 padding of the activated input)
    res_words    (x64, a_vec, a_add) ares is read as u64 words of 4 values too (linalg.tile_res_words)
    up           0, or a_add reads ares as the small image of an exact 2x bilinear upsampling
                 (half-pixel centers, clamped; the compiler's fuse_conv_upsample): up = (H, W, h,
                 w), the image and small image sizes; A's rows are the pixels of one NHWC image
                 row per tile (W % TM == 0, TM even), so a tile's TM rows read TM / 2 + 2 columns
                 of two small-image rows, weights 1/4 and 3/4
    b_ks, b_ns   B[k, n] = b[k * b_ks + n * b_ns]; row k = (kh * KW + kw) * KC + c
    b_vec        B read as vec4 along n (b_ns == 1, b_ks and offsets multiples of 4)
    bdot         N <= 3 columns, one column tile: b holds B transposed ([N, KH * KW * KC], a host
                 constant; b_ks = 1) and each k step loads N vec4s of it along k and adds
                 dot(A row, column) to the accumulator's component n: 4 multiply-adds per row and
                 column instead of the 16 of a vec4 column block that is 1 to 3 columns wide
                 (a one-channel head; linalg.dot_columns); with sg, lane n loads column n's vec4
                 and the subgroup shares them
    b_uniform    B is a float32 constant in a uniform buffer of b_uniform_vec4 vec4s (zero-padded)
    b_cols       columns of B that may be read (N, or N padded to a multiple of 4 for packed constants)
    b_panel      0, or B (b_vec) is stored as one [rows, 4 * TN4] panel per column tile, each after the
                 other (linalg.panel_pack; b_ks == 4 * TN4): the panel of tile tn starts at vec4
                 tn * b_panel (with dyn, at tn * prm[6]), so a column tile's B is one contiguous stream
    o_P, o_sn, o_sp, o_so  out[m, n] = out[(m / o_P) * o_sn + (m % o_P) * o_sp + n * o_so]
    out_vec      vec4 stores (o_so == 1, offsets multiples of 4, N multiple of 4)
    ep           the fused epilogue (webnn_gpu/ops/_epilogue.py), channel = n + bidx * group_cols;
                 operands read at the channel (a bias) are loaded once per column (q{j}_{c});
                 with vec4 stores (out_vec, not ep_rows) and ep.code4 (every step a vector
                 operation) each stored vec4 takes one call of `<ep.fn>_v4` instead of four of
                 the per-value epilogue (ep_vec; the same operations, less for lavapipe's front
                 end; WEBNN_GPU_FORCE_EP_V4=lanes keeps the four calls)
    ep_rows      the epilogue's channel is the row m instead (an NCHW pointwise conv, rows = output
                 channels): its channel operands are loaded once per row (r{i})
    ep.given     the epilogue's same-shaped operand (a residual add; linalg.given_operand) is bound
                 as `gres` and read by the kernel at the output's index, one vec4 per vec4 store
                 (a coalesced vec4 load costs about half of four scalar ones on Mesa 22.3); a pooled
                 or upsampled one through ep.given_g4 (with x8 and ep.given_g8, two vec4 per call
                 from gres as words)
    ep_loop      apply the epilogue and store in a loop over the tile's rows (one copy of the
                 epilogue's code, each pass storing row 0 and moving the others up), not at each
                 of the TM x TN4 unrolled stores: every tile of TM > 1 whose reduction has at
                 least linalg.TILE_EP_LOOP_MIN_K terms, and any epilogue that loads an operand
                 per output (linalg.reads_per_output); the unrolled stores dominated LLVM's
                 compile time. Not small tiles (linalg.rows_written_out): lavapipe's NIR unrolls
                 their loop itself, one iteration per two optimisation rounds, so their rows are
                 written out in the text
    group_cols   output columns per batch item when the batch is conv groups (else 0)
    x64          A (a_vec), B (b_vec, not b_uniform), the output and the given operand (out_vec)
                 are bound as u64 words, the same bits: 4 float32 values as a vec2<u64>, 4
                 float16 ones as a u64 (on Mesa 22 every storage access is a loop over the lanes
                 and its components; a u64 component moves two float32 or four float16 values;
                 linalg.tile_words); w_up / w_pk (_lib/tile.wgsl word_fns) split and join them
    x8           (x64 with out_vec, TN4 even, N and the output's offsets multiples of 8) each store
                 (and given load) moves two column blocks, 8 values: a vec4<u64> for float32,
                 a vec2<u64> for float16
    pool         also write the sums of each invocation's stored outputs over its TM rows, per
                 column, to `pool` ([pool_rows, N / 4] vec4<f32>; one batch item, out_vec): the
                 partial sums of a global average pool of a pointwise conv's NHWC output (the
                 compiler's fuse_pool_partials)
    sg           0, or the subgroup size (linalg.subgroup_lanes): a subgroup's invocations take
                 consecutive row tiles of one column tile (tiles_m is padded to a multiple of sg;
                 the padding tiles read the last row and store nothing), each lane loads its share
                 of the 4 * TN4 vectors of B a k step needs and subgroupBroadcast hands them to
                 the others (b_vec; with pool, the padding tiles write no partial sums: pool_rows is
                 ceil(M / TM)); k.n and every workgroup are multiples of sg,
                 so whole subgroups return together. The epilogue's operands read at the channel
                 (ep.chan, a bias) are shared the same way: each lane loads those of 4 * TN4 / sg
                 of the tile's channels (matmul/_lanes.wgsl, shared with matmul/mlp.wgsl)
    cols_first   (sg, not bdot, not win) each k step loads the lanes' share of B and the TM rows of A
                 first, then takes one column block at a time: its 4 vectors of B broadcast, its TM
                 accumulators updated (the same expressions; only one block's B live across the
                 rows instead of all 4 x TN4 vectors; linalg.TILE_COLS_FIRST)
    dyn          M, N, KC4, a_rs, b_ks, b_cols, o_sp and tiles_m come from the u32 parameter buffer
                 `prm` ([invocations, M, N, KC4, a_rs, b_ks, b_cols, o_sp, tiles_m]; with up also
                 [M - TM, UW, UH, uh, uw, KC]) instead of the text: dense, unbatched, aligned products (pointwise convs, matmuls) of any size
                 share one pipeline per (tile, K % 4, tiles_n == 1, epilogue); their values in the
                 context are then not used
    clamp_at     0, or (dyn) the epilogue's last clamp is applied after it from the parameter buffer:
                 prm[clamp_at], prm[clamp_at + 1] the bounds (f32 bits), prm[clamp_at + 2] whether
                 it applies (linalg.clamp_param; `select(e, min(max(e, lo), hi), on)`), so kernels
                 that differ only in a last clamp share one pipeline
    split        [] or the outputs the columns are stored into (the compiler's fuse_siblings: products
                 of one A by B side by side), each {name, first, cols, end, vec}: column block n
                 (first <= n < end, end = first + cols rounded up to 4) goes to `name` at
                 m * cols + n - first (vec4 stores where cols % 4 == 0, else a value each, those
                 past cols not stored); with split: no dyn, x8, pool or given, o_off = 0
  Written for naga's front end, whose time grows with the square of a function's expression
  count (docs/performance.md, "Build time"): the epilogue and stores of one row of the tile are
  a helper function, `tile_row(m, ..., the row's TN4 accumulators, the channel operands)`, that
  `main` calls once per row (once per pass with ep_loop; with pool it takes and returns the
  column sums, TileSums). lavapipe inlines it, so the code and the work per invocation are
  unchanged. (The k step's multiply-adds stay `c + a.x * b0 + ...`: as `mat4x4<f32> * vec4<f32>`
  they would cost naga a little less, but lavapipe would compile other operations: a matrix
  product becomes a multiply followed by multiply-adds, with the accumulator's add after them.)
  Bindings: a, b, epilogue operands..., asc (a_scale only), ares (a_add only), pre (pre.ops only),
    gres (ep.given only),
    prm (dyn only), out, pool (pool only); with split, the outputs of split in its order instead of out.
  Workgroup: (k.workgroup, 1, 1), 2-D folded dispatch over batches * tiles_m * tiles_n invocations.
-#}
{% import "_lib/index.wgsl" as ix %}
{% import "_lib/tile.wgsl" as tl %}
{% import "matmul/_lanes.wgsl" as ln %}
{% if T == "f16" or needs_f16 %}
enable f16;
{% endif %}
{% set WT = ("vec2<u64>" if T == "f32" else "u64") if x64 else "" %}
{% set WT8 = ("vec4<u64>" if T == "f32" else "vec2<u64>") if x8 else "" %}
{% set halves = [".xy", ".zw"] if T == "f32" else [".x", ".y"] %}
{% if x64 and a_vec %}
@group(0) @binding(0) var<storage, read> a: array<{{ WT }}>;
{% else %}
{{ tl.decl(0, "a", T, a_vec, false) }}
{% endif %}
{% set xb = x64 and b_vec and not b_uniform %}
{% set BL = "w_up" if xb else "vec4<f32>" %}
{% if xb %}
@group(0) @binding(1) var<storage, read> b: array<{{ WT }}>;
{% else %}
{{ tl.weights(1, "b", T, b_vec, b_uniform_vec4 if b_uniform else 0) }}
{% endif %}
{{ tl.epilogue_decls(ep, 2) }}
{% set sc_at = 2 + ep.operands | length %}
{% set res_at = sc_at + (1 if a_scale else 0) %}
{% set pre_at = res_at + (1 if a_add else 0) %}
{% set g_at = pre_at + (1 if pre and pre.ops else 0) %}
{% set prm_at = g_at + (1 if ep.given else 0) %}
{% if a_scale %}
{{ tl.decl(sc_at, "asc", T, true, false) }}
{% endif %}
{% set RL = "w_up" if res_words else "vec4<f32>" %}
{% if a_add and res_words %}
@group(0) @binding({{ res_at }}) var<storage, read> ares: array<{{ WT }}>;
{% elif a_add %}
{{ tl.decl(res_at, "ares", T, true, false) }}
{% endif %}
{% if pre and pre.ops %}
{{ tl.decl(pre_at, "pre", T, true, false) }}
{% endif %}
{% set g8 = x8 and ep.given_g8 %}
{% if ep.given and x64 and out_vec and (g8 or not ep.given_g4) %}
@group(0) @binding({{ g_at }}) var<storage, read> gres: array<{{ WT8 or WT }}>;
{{ tl.given_fns(ep, "gres", out_vec, g8) }}
{% elif ep.given %}
{{ tl.decl(g_at, "gres", T, out_vec, false) }}
{{ tl.given_fns(ep, "gres", out_vec) }}
{% endif %}
{% if dyn %}
@group(0) @binding({{ prm_at }}) var<storage, read> prm: array<u32>;
{% endif %}
{% if split %}
{% for s in split %}
{{ tl.decl(prm_at + loop.index0, s.name, T, s.vec, true) }}
{% endfor %}
{% elif x64 and out_vec %}
@group(0) @binding({{ prm_at + (1 if dyn else 0) }}) var<storage, read_write> out: array<{{ WT8 or WT }}>;
{% else %}
{{ tl.decl(prm_at + (1 if dyn else 0), "out", T, out_vec, true) }}
{% endif %}
{% if pool %}
@group(0) @binding({{ prm_at + (2 if dyn else 1) }}) var<storage, read_write> pool: array<vec4<f32>>;
{% endif %}
{{ tl.epilogue_fns(ep) }}
{% if x64 %}
{{ tl.word_fns(T) }}
{% endif %}

{# ---- the epilogue and stores of one row of the tile, a function of its own (see the header) ---- #}
{% set ep_vec = ep.code4 and out_vec and not ep_rows %}
{% if ep_vec %}
{{ ep.code4 }}
{% endif %}
{#- ep4: the epilogue of the vec4 `v` stored at o + oo .. o + oo + 3, channels ch .. ch + 3 (column block j's
   hoisted operands q<j>_0..3, g the given operand's four values): one call of the vec4 helper
   (ep_vec) or four of the per-value epilogue. -#}
{% macro ep4(v, oo, ch, j, g) -%}
{% if ep_vec %}{{ ep.fn }}_v4({{ v }}, o{{ " + " ~ oo ~ "u" if oo }}, {{ ch }}{% if ep.chan %}{% for c in range(4) %}, q{{ j }}_{{ c }}{% endfor %}{% endif %}{% if ep.given %}, {{ g }}{% endif %})
{%- else %}vec4<f32>({% for c in range(4) %}{% if ep_rows %}{{ tl.apply(ep, v ~ "." ~ "xyzw"[c], "o + " ~ (oo + c) ~ "u", "m", "r", g ~ "." ~ "xyzw"[c]) }}{% else %}{{ tl.apply(ep, v ~ "." ~ "xyzw"[c], "o + " ~ (oo + c) ~ "u", ch ~ " + " ~ c ~ "u", "q" ~ j ~ "_" ~ c, g ~ "." ~ "xyzw"[c]) }}{% endif %}{{ ", " if not loop.last }}{% endfor %})
{%- endif %}
{%- endmacro %}
{% macro clamped(u) -%}
select({{ u }}, min(max({{ u }}, vec4<f32>(ep_lo)), vec4<f32>(ep_hi)), ep_on)
{%- endmacro %}
{% if pool %}
struct TileSums { {% for j in range(TN4) %}s{{ j }}: vec4<f32>{{ ", " if not loop.last }}{% endfor %} }
{% endif %}
fn tile_row(m: u32, o_off: u32, n0: u32, bidx: u32{% if dyn %}, M_: u32, N_: u32, o_sp_: u32{% endif %}
{%- for j in range(TN4) %}, c{{ j }}: vec4<f32>{% endfor %}
{%- if ep.chan and ep_rows %}, r: {{ ep.q_struct }}{% else %}{{ ln.qparams(ep, TN4) }}{% endif %}
{%- if pool %}, ps: TileSums{% endif %}{% if clamp_at %}, ep_lo: f32, ep_hi: f32, ep_on: bool{% endif %}){% if pool %} -> TileSums{% endif %} {
{% if pool %}
  var s = ps;
{% endif %}
{% if dyn %}
  if (m < M_) {
    let orow = o_off + m * o_sp_;
{% else %}
  if (m < {{ M }}u) {
    let orow = o_off + (m / {{ o_P }}u) * {{ o_sn }}u + (m % {{ o_P }}u) * {{ o_sp }}u;
{% endif %}
{% if split %}
{% for j in range(TN4) %}
    {
      // column block {{ j }}: its values to the output whose columns it is (split)
      let n = n0 + {{ 4 * j }}u;
      let ch = n;
      let o = orow + n;
      let v = c{{ j }};
      let e = {{ ep4("v", 0, "ch", j, "g") }};
{% for s in split %}
      {% if not loop.first %}else {% endif %}if (n < {{ s.end }}u) {
        let os = m * {{ s.cols }}u + n - {{ s.first }}u;
{% if s.vec %}
        {{ s.name }}[os / 4u] = vec4<{{ T }}>(e);
{% else %}
{% for c in range(s.cols if s.end - s.first == 4 else 4) %}
{% if s.end - s.first == 4 %}
        {{ s.name }}[os + {{ c }}u] = {{ T }}(e.{{ "xyzw"[c] }});
{% else %}
        if (n + {{ c }}u < {{ s.first + s.cols }}u) { {{ s.name }}[os + {{ c }}u] = {{ T }}(e.{{ "xyzw"[c] }}); }
{% endif %}
{% endfor %}
{% endif %}
      }
{% endfor %}
    }
{% endfor %}
{% endif %}
{% for p in range(TN4 // 2 if x8 else 0) %}
    {
      // column blocks {{ 2 * p }} and {{ 2 * p + 1 }}: one store of 8 values
      let n = n0 + {{ 8 * p }}u;
      if (n < {% if dyn %}N_{% else %}{{ N }}u{% endif %}) {
        let o = orow + n;
{% if g8 %}
        let gp = {{ ep.fn }}_g8(o / 8u);
{% elif ep.given and not ep.given_g4 %}
        let gw = gres[o / 8u];
{% endif %}
{% for h in range(2) %}
{% set j = 2 * p + h %}
        let ch{{ h }} = n + {{ 4 * h }}u + bidx * {{ group_cols }}u;
        let v{{ h }} = c{{ j }};
{% if ep.given %}
        let g{{ h }} = {% if g8 %}gp[{{ h }}]{% elif ep.given_g4 %}{{ tl.given4(ep, "gres", "o / 4u + " ~ h ~ "u") }}{% else %}w_up(gw{{ halves[h] }}){% endif %};
{% endif %}
        let {{ "u" if clamp_at else "e" }}{{ h }} = {{ ep4("v" ~ h, 4 * h, "ch" ~ h, j, "g" ~ h) }};
{% if clamp_at %}
        let e{{ h }} = {{ clamped("u" ~ h) }};
{% endif %}
{% if pool %}
        s.s{{ j }} = s.s{{ j }} + e{{ h }};
{% endif %}
{% endfor %}
        out[o / 8u] = {{ WT8 }}(w_pk(e0), w_pk(e1));
      }
    }
{% endfor %}
{% for j in range(0 if x8 or split else TN4) %}
    {
      let n = n0 + {{ 4 * j }}u;
      let ch = n + bidx * {{ group_cols }}u;
{% if out_vec %}
      if (n < {% if dyn %}N_{% else %}{{ N }}u{% endif %}) {
        let o = orow + n;
        let v = c{{ j }};
{% if ep.given %}
        let g = {% if x64 and not ep.given_g4 %}w_up(gres[o / 4u]){% else %}{{ tl.given4(ep, "gres", "o / 4u") }}{% endif %};
{% endif %}
        let {{ "u" if clamp_at else "e" }} = {{ ep4("v", 0, "ch", j, "g") }};
{% if clamp_at %}
        let e = {{ clamped("u") }};
{% endif %}
        out[o / 4u] = {% if x64 %}w_pk(e){% else %}vec4<{{ T }}>(e){% endif %};
{% if pool %}
        s.s{{ j }} = s.s{{ j }} + e;
{% endif %}
      }
{% else %}
{% for c in range(4) %}
      if (n + {{ c }}u < {{ N }}u) {
        let o = orow + (n + {{ c }}u) * {{ o_so }}u;
        out[o] = {{ T }}({% if ep_rows %}{{ tl.apply(ep, "c" ~ j ~ "." ~ "xyzw"[c], "o", "m", "r", tl.given1(ep, "gres", "o")) }}{% else %}{{ tl.apply(ep, "c" ~ j ~ "." ~ "xyzw"[c], "o", "ch + " ~ c ~ "u", "q" ~ j ~ "_" ~ c, tl.given1(ep, "gres", "o")) }}{% endif %});
      }
{% endfor %}
{% endif %}
    }
{% endfor %}
  }
{% if pool %}
  return s;
{% endif %}
}
{% macro row_call(m, i, r) -%}
{{ "ps = " if pool }}tile_row({{ m }}, o_off, n0, bidx{% if dyn %}, M_, N_, o_sp_{% endif %}
{%- for j in range(TN4) %}, c{{ i }}_{{ j }}{% endfor %}
{%- if ep.chan and ep_rows %}, {{ r }}{% else %}{{ ln.qargs(ep, TN4) }}{% endif %}
{%- if pool %}, ps{% endif %}{% if clamp_at %}, ep_lo, ep_hi, ep_on{% endif %});
{%- endmacro %}

@compute @workgroup_size({{ k.workgroup }})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>{% if sg %},
        @builtin(subgroup_invocation_id) lane: u32{% endif %}) {
  let idx = gid.x + gid.y * nwg.x * {{ k.workgroup }}u;
{% if dyn %}
  if (idx >= prm[0]) { return; }
  let M_ = prm[1];
  let N_ = prm[2];
  let KC4_ = prm[3];
  let a_rs_ = prm[4];
  let b_ks_ = prm[5];
  let b_cols_ = prm[6];
  let o_sp_ = prm[7];
{% if clamp_at %}
  let ep_lo = bitcast<f32>(prm[{{ clamp_at }}]);
  let ep_hi = bitcast<f32>(prm[{{ clamp_at + 1 }}]);
  let ep_on = prm[{{ clamp_at + 2 }}] != 0u;
{% endif %}
{% else %}
  if (idx >= {{ k.n }}u) { return; }
{% endif %}
{% if dyn and not tiles_n1 %}
  let bidx = 0u;
  let tn = idx / prm[8];
  let tm = idx - tn * prm[8];
{% elif (dyn and tiles_n1) or (not dyn and batch_strides | length == 0 and tiles_n == 1) %}
  // One batch item, one column tile: B's addresses are the same in every invocation (uniform
  // loads for the driver).
  let bidx = 0u;
  let tn = 0u;
  let tm = idx;
{% else %}
  let bidx = idx / {{ tiles_m * tiles_n }}u;
  let t = idx - bidx * {{ tiles_m * tiles_n }}u;
{% if order == "n" %}
  let tm = t / {{ tiles_n }}u;
  let tn = t - tm * {{ tiles_n }}u;
{% else %}
  let tn = t / {{ tiles_m }}u;
  let tm = t - tn * {{ tiles_m }}u;
{% endif %}
{% endif %}
{{ ix.coords("bc", "bidx", batch_strides) }}
  let a_off = {{ ix.dot("bc", a_bst) }};
  let b_off = {{ ix.dot("bc", b_bst) }};
  let o_off = {{ ix.dot("bc", o_bst) }};
  let m0 = tm * {{ TM }}u;
  let n0 = tn * {{ 4 * TN4 }}u;
{% if up %}
{% set UH, UW, uh, uw = up %}
{% if dyn %}
{% set u_last, u_UW, u_UH, u_uh, u_uw, u_KC = "prm[9]", "prm[10]", "prm[11]", "prm[12]", "prm[13]", "prm[14]" %}
{% else %}
{% set u_last, u_UW, u_UH, u_uh, u_uw, u_KC = (M - TM) ~ "u", UW ~ "u", UH ~ "u", uh ~ "u", uw ~ "u", KC ~ "u" %}
{% endif %}
  // the tile's pixels: one image row y, columns x0 .. x0 + TM - 1 (x0 even; the subgroup
  // variant's padding tiles read the last one)
  let um0 = min(m0, {{ u_last }});
  let uimg = um0 / ({{ u_UH }} * {{ u_UW }});
  let uy = (um0 / {{ u_UW }}) % {{ u_UH }};
  let ux0 = um0 % {{ u_UW }};
  let ut = uy / 2u;
  let ueven = (uy & 1u) == 0u;
  let ur0 = select(ut, max(ut, 1u) - 1u, ueven);
  let ur1 = select(min(ut + 1u, {{ u_uh }} - 1u), ut, ueven);
  let uwy0 = select(0.75, 0.25, ueven);
  let uwy1 = 1.0 - uwy0;
{% for j in range(TM // 2 + 2) %}
  let ucol{{ j }} = u32(clamp(i32(ux0 / 2u) - 1 + {{ j }}, 0, i32({{ u_uw }}) - 1));
  let ua0_{{ j }} = ((uimg * {{ u_uh }} + ur0) * {{ u_uw }} + ucol{{ j }}) * {{ u_KC }};
  let ua1_{{ j }} = ((uimg * {{ u_uh }} + ur1) * {{ u_uw }} + ucol{{ j }}) * {{ u_KC }};
{% endfor %}
{% endif %}
{# ---- per-row addressing of A ---- #}
{% if win %}
  // the tile's TM pixels: one output row, columns ow0 .. ow0 + TM - 1
  let mr0 = min(m0, {{ M - TM }}u);
  let img0 = mr0 / {{ P }}u;
  let p0 = mr0 - img0 * {{ P }}u;
  let oh0 = p0 / {{ OW }}u;
  let ow0 = p0 - oh0 * {{ OW }}u;
  let ih0 = i32(oh0 * {{ sh }}u) - {{ pt }};
  let iw0 = i32(ow0 * {{ sw }}u) - {{ pl }};
  let ib0 = a_off + img0 * {{ in_sn }}u;
{% for s in win %}
  let xc{{ s }} = iw0 + {{ s }};
  let xok{{ s }} = u32(xc{{ s }}) < {{ W }}u;
  let xo{{ s }} = select(0u, u32(xc{{ s }}) * {{ in_sw }}u, xok{{ s }});
{% endfor %}
{% endif %}
{% for i in range(0 if win else TM) %}
{% if dyn %}
  let mr{{ i }} = min(m0 + {{ i }}u, M_ - 1u);
  let ar{{ i }} = a_off + mr{{ i }} * a_rs_;
{% else %}
  let mr{{ i }} = min(m0 + {{ i }}u, {{ M - 1 }}u);
{% endif %}
{% if dyn %}
{% elif a_mode == "dense" %}
  let ar{{ i }} = a_off + mr{{ i }} * {{ a_rs }}u;
{% else %}
  let img{{ i }} = mr{{ i }} / {{ P }}u;
  let p{{ i }} = mr{{ i }} - img{{ i }} * {{ P }}u;
  let oh{{ i }} = p{{ i }} / {{ OW }}u;
  let ow{{ i }} = p{{ i }} - oh{{ i }} * {{ OW }}u;
  let ih{{ i }} = i32(oh{{ i }} * {{ sh }}u) - {{ pt }};
  let iw{{ i }} = i32(ow{{ i }} * {{ sw }}u) - {{ pl }};
  let ib{{ i }} = a_off + img{{ i }} * {{ in_sn }}u;
{% endif %}
{% endfor %}
{# ---- per-column addressing of B ---- #}
{% if b_vec and b_panel %}
  // B is stored as one contiguous [rows, 4 * TN4] panel per column tile
  let bp = tn * {% if dyn %}b_cols_{% else %}{{ b_panel }}u{% endif %};
{% for j in range(TN4) %}
  let bn{{ j }} = bp + {{ j }}u;
{% endfor %}
{% elif b_vec %}
{% for j in range(TN4) %}
  let bn{{ j }} = min(n0 + {{ 4 * j }}u, {% if dyn %}b_cols_ - 4u{% else %}{{ b_cols - 4 }}u{% endif %}) / 4u;
{% endfor %}
{% else %}
{% for j in range(TN4) %}
{% for c in range(4) %}
  let bn{{ j }}_{{ c }} = min(n0 + {{ 4 * j + c }}u, {{ N - 1 }}u) * {{ b_ns }}u;
{% endfor %}
{% endfor %}
{% endif %}
{% if sg %}
{% set SGL = (4 * TN4 + sg - 1) // sg %}
{# B vector v = r * TN4 + j of a k step (row r, column block j) is loaded by lane v % sg as its
   load v / sg; the rows past the reduction's tail (tail_rows) load row 0 instead #}
{% macro sg_off(t, rows) %}
{%- set v = "min(lane + " ~ (sg * t) ~ "u, " ~ (rows * TN4 - 1) ~ "u)" -%}
{% if b_panel %}
bp + {{ v }}
{%- else %}
({{ v }} / {{ TN4 }}u) * {% if dyn %}(b_ks_ / 4u){% else %}{{ b_ks // 4 }}u{% endif %} + min(n0 + 4u * ({{ v }} % {{ TN4 }}u), {% if dyn %}b_cols_ - 4u{% else %}{{ b_cols - 4 }}u{% endif %}) / 4u
{%- endif %}
{%- endmacro %}
{% for t in range(SGL) %}
  let so{{ t }} = {{ sg_off(t, 4) }};
{% endfor %}
{% endif %}
{% for i in range(TM) %}
{% for j in range(TN4) %}
  var c{{ i }}_{{ j }} = vec4<f32>(0.0);
{% endfor %}
{% endfor %}
{% if KH > 1 %}
  for (var kh = 0u; kh < {{ KH }}u; kh = kh + 1u) {
{% else %}
  { let kh = 0u;
{% endif %}
{% if win %}
  {
    let kb0 = b_off + kh * {{ KW * KC * b_ks }}u;
    let yw = ih0 + i32(kh * {{ dh }}u);
    let yok = u32(yw) < {{ H }}u;
    let yrow = ib0 + select(0u, u32(yw), yok) * {{ in_sh }}u;
{% elif KW > 1 %}
  for (var kw = 0u; kw < {{ KW }}u; kw = kw + 1u) {
{% else %}
  { let kw = 0u;
{% endif %}
{% if dyn %}
    let kb = b_off;
{% elif not win %}
    let kb = b_off + (kh * {{ KW }}u + kw) * {{ KC * b_ks }}u;
{% endif %}
{% if a_mode == "im2col" and not win %}
{% for i in range(TM) %}
    let y{{ i }} = ih{{ i }} + i32(kh * {{ dh }}u);
    let x{{ i }} = iw{{ i }} + i32(kw * {{ dw }}u);
    let ok{{ i }} = u32(y{{ i }}) < {{ H }}u && u32(x{{ i }}) < {{ W }}u;
    let ar{{ i }} = select(0u, ib{{ i }} + u32(y{{ i }}) * {{ in_sh }}u + u32(x{{ i }}) * {{ in_sw }}u, ok{{ i }});
{% endfor %}
{% endif %}
{% macro a_load(i, kexpr, tail) %}
{% if a_vec %}
{{ "w_up" if x64 else "vec4<f32>" }}(a[(ar{{ i }} + {{ kexpr }}) / 4u])
{%- else %}
vec4<f32>({% for r in range(4) %}{% if tail and r >= KC % 4 %}0.0{% else %}f32(a[ar{{ i }} + ({{ kexpr }} + {{ r }}u) * {{ a_ks }}u]){% endif %}{{ ", " if not loop.last }}{% endfor %})
{%- endif %}
{%- endmacro %}
{% macro b_load(r, j, kexpr) %}
{% if b_vec %}
{{ BL }}(b[(kb + ({{ kexpr }} + {{ r }}u) * {% if dyn %}b_ks_{% else %}{{ b_ks }}u{% endif %}) / 4u + bn{{ j }}])
{%- else %}
vec4<f32>({% for c in range(4) %}f32(b[kb + ({{ kexpr }} + {{ r }}u) * {{ b_ks }}u + bn{{ j }}_{{ c }}]){{ ", " if not loop.last }}{% endfor %})
{%- endif %}
{%- endmacro %}
{% macro col_load(s, kexpr, tail) %}
{% if a_vec %}
{{ "w_up" if x64 else "vec4<f32>" }}(a[(yrow + xo{{ s }} + {{ kexpr }}) / 4u])
{%- else %}
vec4<f32>({% for r in range(4) %}{% if tail and r >= KC % 4 %}0.0{% else %}f32(a[yrow + xo{{ s }} + ({{ kexpr }} + {{ r }}u) * {{ a_ks }}u]){% endif %}{{ ", " if not loop.last }}{% endfor %})
{%- endif %}
{%- endmacro %}
{#- pre_step: A's vec4 `v` through the input step (pre), else `v` itself -#}
{% macro pre_step(v) -%}
{% if pre %}{% set e = namespace(x=v) %}{% for o in pre.ops %}{% set e.x = "(" ~ e.x ~ " " ~ o ~ " pq" ~ loop.index0 ~ ")" %}{% endfor %}{{ pre.act.format(e.x) }}{% else %}{{ v }}{% endif %}
{%- endmacro %}
{% macro mac(i, j, rows) %}
      c{{ i }}_{{ j }} = c{{ i }}_{{ j }}{% for r in range(rows) %} + a{{ i }}.{{ "xyzw"[r] }} * b{{ r }}_{{ j }}{% endfor %};
{% endmacro %}
{% macro fma(i, rows) %}
{% if bdot %}
      c{{ i }}_0 = c{{ i }}_0 + vec4<f32>({% for n in range(4) %}{% if n < N %}dot(a{{ i }}, bt{{ n }}){% else %}0.0{% endif %}{{ ", " if not loop.last }}{% endfor %});
{% else %}
{% for j in range(TN4) %}
{{ mac(i, j, rows) -}}
{% endfor %}
{% endif %}
{% endmacro %}
{% macro body(kexpr, tail) %}
{% set rows = (KC % 4) if tail else 4 %}
{% for o in (pre.ops if pre else []) %}
      let pq{{ loop.index0 }} = vec4<f32>(pre[{% if not loop.first %}{% if dyn %}{{ loop.index0 }}u * (KC4_ / 4u) + {% else %}{{ loop.index0 * pre.C4 }}u + {% endif %}{% endif %}({{ kexpr }}) / 4u]);
{% endfor %}
{% if win %}
{% for s in win %}
      let w{{ s }} = select(vec4<f32>(0.0), {{ pre_step(col_load(s, kexpr, tail)) }}, yok && xok{{ s }});
{% endfor %}
{% if win_fused %}
{% for kw in range(KW) %}
{% for r in range(rows) %}
{% for j in range(TN4) %}
      var bk{{ kw }}_{{ r }}_{{ j }}: vec4<f32>;
{% endfor %}
{% endfor %}
      {
      let kb = kb0 + {{ kw * KC * b_ks }}u;
{{ bpart(kexpr, tail, rows) }}
{% for r in range(rows) %}
{% for j in range(TN4) %}
      bk{{ kw }}_{{ r }}_{{ j }} = b{{ r }}_{{ j }};
{% endfor %}
{% endfor %}
      }
{% endfor %}
{% for i in range(TM) %}
{% for j in range(TN4) %}
      c{{ i }}_{{ j }} = c{{ i }}_{{ j }}{% for kw in range(KW) %}{% for r in range(rows) %} + w{{ i * sw + kw * dw }}.{{ "xyzw"[r] }} * bk{{ kw }}_{{ r }}_{{ j }}{% endfor %}{% endfor %};
{% endfor %}
{% endfor %}
{% else %}
{% for kw in range(KW) %}
      {
      let kb = kb0 + {{ kw * KC * b_ks }}u;
{{ bpart(kexpr, tail, rows) }}
{% for i in range(TM) %}
      let a{{ i }} = w{{ i * sw + kw * dw }};
{{ fma(i, rows) }}
{% endfor %}
      }
{% endfor %}
{% endif %}
{% elif cols_first %}
{# the lanes' loads of B and the TM rows of A, then one column block at a time: its B vectors
   shared and its TM accumulators updated (only that block's B is live across the rows) #}
{{ bpart(kexpr, tail, rows, false) }}
{{ apart(kexpr, tail, rows, false) }}
{% for j in range(TN4) %}
{{ ln.share_b(rows, TN4, sg, "      ", [j]) -}}
{% for i in range(TM) %}
{{ mac(i, j, rows) -}}
{% endfor %}
{% endfor %}
{% else %}
{{ bpart(kexpr, tail, rows) }}
{{ apart(kexpr, tail, rows) }}
{% endif %}
{% endmacro %}
{% macro bpart(kexpr, tail, rows, share=true) %}
{% if bdot and sg %}
      let btl = {{ BL }}(b[(kb + {{ kexpr }} + min(lane, {{ N - 1 }}u) * {{ KH * KW * KC }}u) / 4u]);
{% for n in range(N) %}
      let bt{{ n }} = subgroupBroadcast(btl, {{ n }}u);
{% endfor %}
{% elif bdot %}
{% for n in range(N) %}
      let bt{{ n }} = {{ BL }}(b[(kb + {{ kexpr }} + {{ n }}u * {{ KH * KW * KC }}u) / 4u]);
{% endfor %}
{% elif sg %}
{% for t in range((rows * TN4 + sg - 1) // sg) %}
      let bl{{ t }} = {{ BL }}(b[(kb + ({{ kexpr }}) * {% if dyn %}b_ks_{% else %}{{ b_ks }}u{% endif %}) / 4u + {{ ("so" ~ t) if not tail else sg_off(t, rows) }}]);
{% endfor %}
{% if share %}
{{ ln.share_b(rows, TN4, sg, "      ") -}}
{% endif %}
{% else %}
{% for r in range(rows) %}
{% for j in range(TN4) %}
      let b{{ r }}_{{ j }} = {{ b_load(r, j, kexpr) }};
{% endfor %}
{% endfor %}
{% endif %}
{% endmacro %}
{% macro apart(kexpr, tail, rows, fmas=true) %}
{% if a_scale %}
      let sc = vec4<f32>(asc[({{ kexpr }}) / 4u]);
{% endif %}
{% if up %}
{% for j in range(TM // 2 + 2) %}
      let us{{ j }} = uwy0 * {{ RL }}(ares[(ua0_{{ j }} + {{ kexpr }}) / 4u]) + uwy1 * {{ RL }}(ares[(ua1_{{ j }} + {{ kexpr }}) / 4u]);
{% endfor %}
{% endif %}
{% for i in range(TM) %}
{% if a_mode == "im2col" %}
      let a{{ i }} = select(vec4<f32>(0.0), {{ pre_step(a_load(i, kexpr, tail)) }}, ok{{ i }});
{% elif up %}
{% set v = i // 2 %}
      let a{{ i }} = {{ a_load(i, kexpr, tail) }}{{ " * sc" if a_scale }} + {% if i % 2 == 0 %}0.25 * us{{ v }} + 0.75 * us{{ v + 1 }}{% else %}0.75 * us{{ v + 1 }} + 0.25 * us{{ v + 2 }}{% endif %};
{% elif a_scale or a_add %}
      let a{{ i }} = {{ a_load(i, kexpr, tail) }}{{ " * sc" if a_scale }}{{ (" + " ~ RL ~ "(ares[(ar" ~ i ~ " + " ~ kexpr ~ ") / 4u])") if a_add }};
{% else %}
      let a{{ i }} = {{ pre_step(a_load(i, kexpr, tail)) }};
{% endif %}
{% if fmas %}
{{ fma(i, rows) }}
{% endif %}
{% endfor %}
{% endmacro %}
{% if dyn %}
    for (var kc = 0u; kc < KC4_; kc = kc + 4u) {
{{ body("kc", false) }}
    }
{% elif KC4 > 0 %}
    for (var kc = 0u; kc < {{ KC4 }}u; kc = kc + 4u) {
{{ body("kc", false) }}
    }
{% endif %}
{% if KC % 4 != 0 %}
    {
{{ body("KC4_" if dyn else KC4 ~ "u", true) }}
    }
{% endif %}
  }
  }
{# ---- epilogue and stores ---- #}
{% if ep.chan and ep_rows %}
{% for i in range(TM) %}
  {{ tl.hoist_q(ep, "r" ~ i, "min(m0 + " ~ i ~ "u, " ~ ("M_" if dyn else M ~ "u") ~ " - 1u)") }}
{% endfor %}
{% elif ep.chan and sg %}
  // the tile's 4 * TN4 channels: lane l loads the operands of channels l, l + {{ sg }}, ..., the
  // subgroup shares them
{% call(t) ln.share_q(ep, TN4, sg, "  ") %}min(n0 + lane + {{ sg * t }}u, {{ ("N_" if dyn else N ~ "u") }} - 1u) + bidx * {{ group_cols }}u{% endcall %}
{% elif ep.chan %}
{% for j in range(TN4) %}
{% for c in range(4) %}
  {{ tl.hoist_q(ep, "q" ~ j ~ "_" ~ c, "min(n0 + " ~ (4 * j + c) ~ "u, " ~ ("N_" if dyn else N ~ "u") ~ " - 1u) + bidx * " ~ group_cols ~ "u") }}
{% endfor %}
{% endfor %}
{% endif %}
{% if pool %}
  var ps = TileSums({% for j in range(TN4) %}vec4<f32>(0.0){{ ", " if not loop.last }}{% endfor %});
{% endif %}
{% if ep_loop %}
  // One copy of the epilogue: a loop over the tile's rows, each pass storing row 0 and
  // moving the rows below it up by one (LLVM's compile time grows with every inlined copy).
{% call ln.row_loop(TM, TN4, "  ") %}{{ row_call("m0 + ri", 0, "") }}{% endcall %}
{% else %}
{% for i in range(TM) %}
  {{ row_call("m0 + " ~ i ~ "u", i, "r" ~ i) }}
{% endfor %}
{% endif %}
{% for j in range(TN4 if pool else 0) %}
  if ({% if sg %}tm < {{ pool_rows }}u && {% endif %}n0 + {{ 4 * j }}u < {{ N }}u) {
    // this tile's column sums: row tm of the [pool_rows, N] partials
    pool[tm * {{ N // 4 }}u + n0 / 4u + {{ j }}u] = ps.s{{ j }};
  }
{% endfor %}
}
