{#-
  matmul/squeeze_excite.wgsl: the excitation of a squeeze-and-excite block in one workgroup
  (the compiler's fuse_squeeze_excite pass): the channel means of a [ROWS, C] source (a global
  pool's partial sums, or the pooled vector itself with ROWS = 1), then two fully connected
  layers, C -> R and R -> C2, each with its epilogue (bias, activation), kept in workgroup
  memory between the steps. Replaces up to three single-workgroup kernels (the means, two
  1x1 convolutions on one pixel), each dominated by its launch.

  Context:
    T            storage type of the output (and of src when not src_f32; of the weights when
                 not uniform)
    src_f32      src holds f32 partial sums
    two          a second source, src2: f32 partial sums of the pool's skip operand (ROWS2 rows,
                 their sum counted SCALE2 times: 4 for the small image of a 2x upsampling)
    CMAX, RMAX   workgroup array sizes (at least C and R; CMAX at least the workgroup size)
  Parameters (binding `prm`, u32): 0 ROWS  1 C  2 R  3 C2 (rows of src, channels, hidden width,
    output channels)  4 count (f32 bits: src rows are summed and divided by it)  5 ROWS2
    6 SCALE2 (f32 bits; two only). Read at run time,
    so blocks of every size with the same epilogues share one pipeline (and the loops stay
    loops: a driver unrolling constant-trip loops makes slow-to-compile code).
    ep1, ep2     the two layers' epilogues (functions fc1 / fc2)
    one          one layer only (no w2, ep2): out is fc1's output, C2 = R
    fns          (T, names) activation helpers of both epilogues
    w1_uniform / w2_uniform   0, or that matrix is a float32 constant in a uniform buffer of this
                 many vec4s (zero-padded); else array<T>
  Bindings: src, src2 (two only), w1 ([R, C]), ep1 operands..., w2 ([C2, R]), ep2 operands... (not
    one), prm, out ([C2]).
  Workgroup: (k.workgroup, 1, 1), one workgroup.
-#}
{% import "_lib/tile.wgsl" as tl %}
{% import "_lib/activations.wgsl" as act %}
{% if T == "f16" %}
enable f16;
{% endif %}
{% set n1 = ep1.operands | length %}
{% set n2 = -1 if one else ep2.operands | length %}
{% set b = 1 if two else 0 %}
@group(0) @binding(0) var<storage, read> src: array<{{ "f32" if src_f32 else T }}>;
{% if two %}
@group(0) @binding(1) var<storage, read> src2: array<f32>;
{% endif %}
{{ tl.weights(1 + b, "w1", T, false, w1_uniform) }}
{{ tl.epilogue_decls(ep1, 2 + b) }}
{% if not one %}
{{ tl.weights(2 + b + n1, "w2", T, false, w2_uniform) }}
{{ tl.epilogue_decls(ep2, 3 + b + n1) }}
{% endif %}
@group(0) @binding({{ 3 + b + n1 + n2 }}) var<storage, read> prm: array<u32>;
@group(0) @binding({{ 4 + b + n1 + n2 }}) var<storage, read_write> out: array<{{ T }}>;
{% for FT, names in fns %}
{{ act.defs(FT, names) }}
{% endfor %}
{% if not ep1.empty %}
{{ ep1.code }}
{% endif %}
{% if not one and not ep2.empty %}
{{ ep2.code }}
{% endif %}

var<workgroup> sums: array<f32, {{ CMAX }}>;
var<workgroup> pooled: array<f32, {{ CMAX }}>;
var<workgroup> hidden: array<f32, {{ RMAX }}>;

fn ld_w1(i: u32) -> f32 {
{% if w1_uniform %}
  return w1[i / 4u][i % 4u];
{% else %}
  return f32(w1[i]);
{% endif %}
}

{% if not one %}
fn ld_w2(i: u32) -> f32 {
{% if w2_uniform %}
  return w2[i / 4u][i % 4u];
{% else %}
  return f32(w2[i]);
{% endif %}
}
{% endif %}

@compute @workgroup_size({{ k.workgroup }})
fn main(@builtin(local_invocation_index) li: u32) {
  let ROWS = prm[0];
  let C = prm[1];
  let R = prm[2];
  let C2 = prm[3];
  let count = bitcast<f32>(prm[4]);
  // the means: P = WG / C invocations per channel (one when C >= WG) sum every P-th row,
  // neighbouring invocations reading neighbouring channels, then one adds the P sums
  let P = max(1u, {{ k.workgroup }}u / C);
  for (var i = li; i < C * P; i = i + {{ k.workgroup }}u) {
    let c = i % C;
    let q = i / C;
    var a = 0.0;
    for (var r = q; r < ROWS; r = r + P) {
      a = a + f32(src[r * C + c]);
    }
{% if two %}
    var a2 = 0.0;
    for (var r = q; r < prm[5]; r = r + P) {
      a2 = a2 + src2[r * C + c];
    }
    a = a + bitcast<f32>(prm[6]) * a2;
{% endif %}
    sums[i] = a;
  }
  workgroupBarrier();
  for (var c = li; c < C; c = c + {{ k.workgroup }}u) {
    var a = 0.0;
    for (var q = 0u; q < P; q = q + 1u) {
      a = a + sums[q * C + c];
    }
    pooled[c] = a / count;
  }
  workgroupBarrier();
  for (var j = li; j < R; j = j + {{ k.workgroup }}u) {
    var a = 0.0;
    for (var c = 0u; c < C; c = c + 1u) {
      a = a + pooled[c] * ld_w1(j * C + c);
    }
{% if one %}
    out[j] = {{ T }}({{ tl.apply(ep1, "a", "j", "j") }});
  }
{% else %}
    hidden[j] = {{ tl.apply(ep1, "a", "j", "j") }};
  }
  workgroupBarrier();
  for (var c = li; c < C2; c = c + {{ k.workgroup }}u) {
    var a = 0.0;
    for (var j = 0u; j < R; j = j + 1u) {
      a = a + hidden[j] * ld_w2(c * R + j);
    }
    out[c] = {{ T }}({{ tl.apply(ep2, "a", "c", "c") }});
  }
{% endif %}
}
