{#-
  conv/depthwise_project_strip.wgsl: a depthwise conv2d (NHWC) and the pointwise conv2d reading
  its output, in one kernel, for layers with few channels (the compiler's fuse_depthwise_project
  pass; conv/depthwise_project.wgsl is the general kernel, docs/conv.md says which runs where).

  Each invocation owns a strip of TW output columns and walks down TH output rows of it (a
  chunk of the image's height), one output row per loop iteration, holding every channel:
  the channels (C4 vec4s) and the projection's columns (N4 vec4s) are unrolled, so the KH - 1
  input rows the next output row shares with this one stay in registers (X<row>_<cb>_<col>) and
  each iteration loads only the row that enters the window (the first KH - 1 iterations only
  load, so that the text has one row of loads); the taps, the projection matrix
  and the epilogues' per-channel operands are loaded once per invocation, before the loop.
  Per output row it computes the TW depthwise pixels of each group of four channels as one
  expression each and passes them through the depthwise epilogue; each output vec4 is then one
  expression, the sum of its C4 projection products (`mat4x4 * vec4`), stored through the
  projection's epilogue. Against conv/depthwise_project.wgsl's pixel blocks (which reload the
  window's overlapping rows for every block and hold TH x TW x NS accumulators across their
  channel loop) it loads about a third fewer input values and carries no accumulator through
  a loop.

  With `xres` the projection's residual add reads the depthwise input itself at the output's
  pixel (stride 1, same size, N == C: an inverted-residual block's skip): that value is in the
  held rows (row pt, column p + pl of the window), so it costs no load.

  Context:
    T            storage type ("f32" or "f16"); accumulation in f32
    C4, N4       input channels and projection width in vec4s (unrolled)
    TW           output columns per strip
    KH, KW, sw, dw   the depthwise window (vertical stride and dilation 1); seg: the input
                 column offsets (from ow0 sw - pl) the strip reads
    hold         KH - 1: input rows kept from one output row to the next
    in_relu      relu of each input value as it is loaded (the compiler's fuse_conv_input_relu, the
                 depthwise conv's attrs["input_relu"]; out-of-image taps stay 0 = relu(0))
    ep           the depthwise epilogue (bias first; channel = the depthwise channel); ep.given:
                 a residual add of the depthwise input, read from the held rows (needs pt, pl)
    pep          the projection's epilogue (bias first); pep.given: its residual operand (same
                 shape as out), bound as `pg` and loaded as vec4, or with `xres` the held input
    xres, pt, pl see above (pt, pl: the leading padding, in the text only for the held residuals)
    f_uniform    0, or the depthwise filter is in a uniform buffer of this many vec4s
    p_uniform    0, or the projection matrix is in a uniform buffer of this many vec4s
    fns          (T, names) activation helpers of the epilogues
    fdiv         invocations < 2^20: the index is split with f32 divisions (exact there)
    xw           (C4 even) the input bound as words of 8 channels (vec4<u64> for float32,
                 vec2<u64> for float16; the same bits), loaded in a branch that masked lanes
                 pass by (on Mesa 22 every storage access is a loop over the lanes and the
                 components, and a u64 component moves two float32 or four float16 values)
    ow           (N4 even) the output, and pg, as such words: two projection vec4s per store
  Parameters (uniform `prm`, u32 vec4s): 0: invocations (NB * RB * OWB), H, W, OH
    1: OW, OWB = ceil(OW / TW), RB = ceil(OH / TH), TH  2: pt, pl, 0, 0
  Bindings: x (NHWC, vec4), f ([KH, KW, C] vec4), ep operands..., pw ([C, N4] vec4), pep
    operands..., [pg (pep.given without xres)], prm, out.
  Workgroup: (k.workgroup, 1, 1); strip fastest, then row chunk, then batch.
-#}
{% import "_lib/tile.wgsl" as tl %}
{% import "conv/_rows.wgsl" as rw %}
{% set RO = "max(" if in_relu else "" %}
{% set RC = ", vec4<f32>(0.0))" if in_relu else "" %}
{% from "conv/_rows.wgsl" import ep_v4, hoist_q4 %}
{#- The input row kh of the current window, channel group cb, column offset j. -#}
{% macro xin(kh, cb, j) %}{{ "X" if kh < hold else "Y" }}{{ kh }}_{{ cb }}_{{ j }}{% endmacro %}
{#- Depthwise pixel p of channel group cb: its KH x KW products, one expression. -#}
{% macro xsum(cb, p) %}{% for kh in range(KH) %}{% for kw in range(KW) %}{{ xin(kh, cb, p * sw + kw * dw) }} * w{{ cb }}_{{ kh }}_{{ kw }}{{ " + " if not loop.last }}{% endfor %}{{ " + " if not loop.last }}{% endfor %}{% endmacro %}
{% if T == "f16" %}
enable f16;
{% endif %}
{% set LT = "vec4<u64>" if T == "f32" else "vec2<u64>" %}
{% set parts = [".xy", ".zw"] if T == "f32" else [".x", ".y"] %}
{% set nb = namespace(i=2) %}
{% if xw %}
@group(0) @binding(0) var<storage, read> x: array<{{ LT }}>;
{% else %}
{{ tl.decl(0, "x", T, true, false) }}
{% endif %}
{{ tl.weights(1, "f", T, true, f_uniform) }}
{{ tl.epilogue_decls(ep, nb.i) }}
{% set nb.i = nb.i + ep.operands | length %}
{{ tl.weights(nb.i, "pw", T, true, p_uniform) }}
{{ tl.epilogue_decls(pep, nb.i + 1) }}
{% set nb.i = nb.i + 1 + pep.operands | length %}
{% if pep.given and not xres and ow %}
@group(0) @binding({{ nb.i }}) var<storage, read> pg: array<{{ LT }}>;
{% set nb.i = nb.i + 1 %}
{% elif pep.given and not xres %}
{{ tl.decl(nb.i, "pg", T, true, false) }}
{% set nb.i = nb.i + 1 %}
{% endif %}
@group(0) @binding({{ nb.i }}) var<uniform> prm: array<vec4<u32>, 3>;
{% if ow %}
@group(0) @binding({{ nb.i + 1 }}) var<storage, read_write> out: array<{{ LT }}>;
{% else %}
{{ tl.decl(nb.i + 1, "out", T, true, true) }}
{% endif %}
{{ rw.pair_fns(fns, ep, pep) }}
{{ rw.word_fns(T) if xw or ow }}
@compute @workgroup_size({{ k.workgroup }})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let gidx = gid.x + gid.y * nwg.x * {{ k.workgroup }}u;
  if (gidx >= prm[0].x) { return; }
  let H = prm[0].y;
  let W = prm[0].z;
  let OH = prm[0].w;
  let OW = prm[1].x;
  let OWB = prm[1].y;
  let RB = prm[1].z;
  let TH = prm[1].w;
{% if fdiv %}
  let r1 = u32((f32(gidx) + 0.5) / f32(OWB));
  let n = u32((f32(r1) + 0.5) / f32(RB));
{% else %}
  let r1 = gidx / OWB;
  let n = r1 / RB;
{% endif %}
  let ow0 = (gidx - r1 * OWB) * {{ TW }}u;
  let oh0 = (r1 - n * RB) * TH;
  let rows = min(TH, OH - oh0);
  let ih0 = i32(oh0) - i32(prm[2].x);
  let iw0 = i32(ow0 * {{ sw }}u) - i32(prm[2].y);
{{ rw.columns(seg) -}}
{% for p in range(TW) %}
  let in{{ p }} = ow0 + {{ p }}u < OW;
{% endfor %}
  // once per invocation: the taps, the projection's 4 x 4 blocks and the per-channel operands
{% for cb in range(C4) %}
{% for kh in range(KH) %}
{% for kw in range(KW) %}
  let w{{ cb }}_{{ kh }}_{{ kw }} = vec4<f32>(f[{{ (kh * KW + kw) * C4 + cb }}u]);
{% endfor %}
{% endfor %}
{% for j in range(N4) %}
  let P{{ cb }}_{{ j }} = mat4x4<f32>({% for c in range(4) %}vec4<f32>(pw[{{ (4 * cb + c) * N4 + j }}u]){{ ", " if not loop.last }}{% endfor %});
{% endfor %}
{{ hoist_q4(ep, "q" ~ cb ~ "_", (4 * cb) ~ "u") }}
{% endfor %}
{% for j in range(N4) %}
{{ hoist_q4(pep, "g" ~ j ~ "_", (4 * j) ~ "u") }}
{% endfor %}
  // the window's rows 0 .. hold - 1, held from one iteration to the next; the first hold
  // iterations only load rows (so that the text has one row of loads, not hold + 1)
{% for kh in range(hold) %}
{% for cb in range(C4) %}
{% for j in seg %}
  var X{{ kh }}_{{ cb }}_{{ j }} = vec4<f32>(0.0);
{% endfor %}
{% endfor %}
{% endfor %}
  for (var i = 0u; i < rows + {{ hold }}u; i = i + 1u) {
    // the row entering the window (row KH - 1 of output row i - hold's window)
    let y = ih0 + i32(i);
    let rk = u32(y) < H;
    let rw = (n * H + select(0u, u32(y), rk)) * W;
{% if xw %}
{% for wi in range(C4 // 2) %}
{% for j in seg %}
    // channel groups {{ 2 * wi }} and {{ 2 * wi + 1 }}: one word (skipped outside the image)
    var v{{ wi }}_{{ j }} = {{ LT }}();
    if (rk && cok{{ j }}) { v{{ wi }}_{{ j }} = x[(rw + ci{{ j }}) * {{ C4 // 2 }}u + {{ wi }}u]; }
{% for h in range(2) %}
    let Y{{ KH - 1 }}_{{ 2 * wi + h }}_{{ j }} = {{ RO }}up(v{{ wi }}_{{ j }}{{ parts[h] }}){{ RC }};
{% endfor %}
{% endfor %}
{% endfor %}
{% else %}
{% for cb in range(C4) %}
{% for j in seg %}
    let Y{{ KH - 1 }}_{{ cb }}_{{ j }} = select(vec4<f32>(0.0), {{ RO }}vec4<f32>(x[(rw + ci{{ j }}) * {{ C4 }}u + {{ cb }}u]){{ RC }}, rk && cok{{ j }});
{% endfor %}
{% endfor %}
{% endif %}
    if (i >= {{ hold }}u) {
    let pixb = (n * OH + oh0 + i - {{ hold }}u) * OW + ow0;
{% for cb in range(C4) %}
    // channels 4 cb ..: the depthwise pixels, their epilogue and their projection
{% for p in range(TW) %}
    let e{{ cb }}_{{ p }} = {{ ep_v4(ep, "(" ~ xsum(cb, p) ~ ")", "(pixb + " ~ p ~ "u) * " ~ (4 * C4) ~ "u + " ~ (4 * cb) ~ "u", (4 * cb) ~ "u", "q" ~ cb ~ "_", xin(pt, cb, p + pl) if ep.given else "") }};
{% endfor %}
{% endfor %}
{% for p in range(TW) %}
    if (in{{ p }}) {
{% if ow %}
{% for jw in range(N4 // 2) %}
      {
{% if pep.given and not xres %}
        let gw = pg[(pixb + {{ p }}u) * {{ N4 // 2 }}u + {{ jw }}u];
{% endif %}
{% for j in (2 * jw, 2 * jw + 1) %}
        let a{{ j }} = {% for cb in range(C4) %}P{{ cb }}_{{ j }} * e{{ cb }}_{{ p }}{{ " + " if not loop.last }}{% endfor %};
{% if pep.given and xres %}
        let g{{ j }} = {{ xin(pt, j, p + pl) }};
{% elif pep.given %}
        let g{{ j }} = up(gw{{ parts[j % 2] }});
{% endif %}
        let r{{ j }} = {{ ep_v4(pep, "a" ~ j, "(pixb + " ~ p ~ "u) * " ~ (4 * N4) ~ "u + " ~ (4 * j) ~ "u", (4 * j) ~ "u", "g" ~ j ~ "_", "g" ~ j) }};
{% endfor %}
        out[(pixb + {{ p }}u) * {{ N4 // 2 }}u + {{ jw }}u] = {{ LT }}(pk(r{{ 2 * jw }}), pk(r{{ 2 * jw + 1 }}));
      }
{% endfor %}
{% else %}
{% for j in range(N4) %}
      {
        let a = {% for cb in range(C4) %}P{{ cb }}_{{ j }} * e{{ cb }}_{{ p }}{{ " + " if not loop.last }}{% endfor %};
{% if pep.given and xres %}
        let g = {{ xin(pt, j, p + pl) }};
{% elif pep.given %}
        let g = vec4<f32>(pg[(pixb + {{ p }}u) * {{ N4 }}u + {{ j }}u]);
{% endif %}
        out[(pixb + {{ p }}u) * {{ N4 }}u + {{ j }}u] = vec4<{{ T }}>({{ ep_v4(pep, "a", "(pixb + " ~ p ~ "u) * " ~ (4 * N4) ~ "u + " ~ (4 * j) ~ "u", (4 * j) ~ "u", "g" ~ j ~ "_", "g") }});
      }
{% endfor %}
{% endif %}
    }
{% endfor %}
    }
{% for kh in range(hold) %}
{% for cb in range(C4) %}
{% for j in seg %}
    X{{ kh }}_{{ cb }}_{{ j }} = {{ xin(kh + 1, cb, j) }};
{% endfor %}
{% endfor %}
{% endfor %}
  }
}
