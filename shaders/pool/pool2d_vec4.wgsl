{#-
  pool/pool2d_vec4.wgsl: pool/pool2d.wgsl for float32 NHWC data whose channels are a multiple of
  4: one invocation pools four neighbouring channels of one output pixel, loading vec4s (the
  window's coordinates, bounds tests and position count serve all four).

  Output element (n, oh, ow, c..c+3) reads input rows ih = oh * SH - PT + kh * DH and columns
  iw = ow * SW - PL + kw * DW for kh < WH, kw < WW; positions outside the input are skipped (the
  average divides by the positions inside; a window entirely in the padding gives 0 for the
  average and L2, -inf for max). max propagates NaN lane by lane (the first NaN wins), as
  pool2d.wgsl's comb does.
  Context:
    kind         "avg" | "l2" | "max"
    out_strides  row-major strides of [N, OH, OW, C / 4] (coordinates c0..c3)
    in_st        {"n","h","w"} -> input stride of that dimension in vec4 units
    H, W, WH, WW, SH, SW, DH, DW, PT, PL
    ep           fused epilogue (webnn_gpu/ops/_epilogue.py), applied to each stored value
    side         None, or the epilogue (function `side`, channel axis 3) applied to each element
                 of the input as it is loaded (side_of "input": the windows tile the input, each
                 element is loaded, and stored, once) or of the output as it is stored
                 ("output"), stored at the element's own index in side_out
    side_of      "input" | "output" (with side)
    fns          (T, names) activation helpers of ep and side
    win_out      the window's WH x WW positions and their count written out instead of loops
                 (pool.window_written_out: small windows, which lavapipe's NIR unrolls anyway)
    words        src, out and side_out as arrays of u64 words, the same bits: float16 data as
                 one u64 of 4 values (one per-lane access component where vec4<f16> takes four;
                 io.words_fns), the window's values pooled and the maps computed in f32, each
                 stored value rounded once; float32 data as a vec2<u64> of 4 values (two
                 components where vec4<f32> takes four; pool.f32_words); without it, float32
                 data as vec4<f32>
  Bindings: src, epilogue operands..., side operands..., out, side_out (src, out and side_out as
  arrays of vec4<f32>, or of u64 words with `words`).
  Workgroup: (k.workgroup, 1, 1); 2-D folded dispatch; guards idx < k.n (output vec4s).
-#}
{% import "_lib/io.wgsl" as io %}
{% import "pool/_window.wgsl" as pw %}
{% import "_lib/index.wgsl" as ix %}
{% import "_lib/epilogue.wgsl" as el %}
{% set T = k.bindings[0].storage %}
{% if words %}
{% for e in k.enables %}
{{ e }}
{% endfor %}
{% for b in k.bindings %}
@group(0) @binding({{ loop.index0 }}) var<storage, {{ "read_write" if b.output else "read" }}> {{ b.name }}: array<{{ ("u64" if T == "f16" else "vec2<u64>") if b.name in ("src", "out", "side_out") else b.storage }}>;
{% endfor %}
{{ io.words_fns(T, "w_") }}
{% elif ep.empty and not side %}
{{ io.vec4_src_out(k) }}
{% else %}
{{ el.vec4_bindings(k) }}
{% endif %}
{% if not ep.empty or side %}
{{ el.defs(fns) }}
{% if not ep.empty %}
{{ ep.code }}
{{ el.fns4(ep) }}
{% endif %}
{% if side %}
{{ side.code }}
{% endif %}
{% endif %}

{% if kind == "max" %}
fn is_nan4(x: vec4<f32>) -> vec4<bool> {
  return (bitcast<vec4<u32>>(x) & vec4<u32>(0x7fffffffu)) > vec4<u32>(0x7f800000u);
}

fn comb4(a: vec4<f32>, b: vec4<f32>) -> vec4<f32> {
  return select(select(max(a, b), b, is_nan4(b)), a, is_nan4(a));
}
{% endif %}

{% if not win_out %}
{{ pw.inside_fn() }}
{% endif %}

{{ io.main_header(k) }}
{{ ix.coords("c", "idx", out_strides) }}
  let base = c0 * {{ in_st.n }}u + c3;
  let h0 = i32(c1 * {{ SH }}u) - {{ PT }};
  let w0 = i32(c2 * {{ SW }}u) - {{ PL }};
{% set in_side = side and side_of == "input" %}
{# the map of v, a vec4 of four channels at vec4 index i (an expression), as a vec4<f32> #}
{% macro side4(v, i) %}{% set q = side.chan %}vec4<f32>(side({{ v }}.x, {{ i }} * 4u, c3 * 4u{{ ", sq0" if q }}), side({{ v }}.y, {{ i }} * 4u + 1u, c3 * 4u + 1u{{ ", sq1" if q }}),
      side({{ v }}.z, {{ i }} * 4u + 2u, c3 * 4u + 2u{{ ", sq2" if q }}), side({{ v }}.w, {{ i }} * 4u + 3u, c3 * 4u + 3u{{ ", sq3" if q }})){% endmacro %}
{#- a vec4<f32> expression e as stored: packed into a u64 word with `words` #}
{% macro pk(e) %}{{ "w_pk(" ~ e ~ ")" if words else e }}{% endmacro %}
{# one window position's load (its bounds already tested), side store and pooling step #}
{% macro tap() %}
      let xi = base + u32(ih) * {{ in_st.h }}u + u32(iw) * {{ in_st.w }}u;
      let x = {{ "w_up(src[xi])" if words else "src[xi]" }};
{% if in_side %}
      side_out[xi] = {{ pk(side4("x", "xi")) }};
{% endif %}
{% if kind == "max" %}
      acc = comb4(acc, x);
{% elif kind == "l2" %}
      acc = acc + x * x;
{% else %}
      acc = acc + x;
{% endif %}
{%- endmacro %}
{% if side and side.chan %}
  let sq0 = side_q(c3 * 4u);
  let sq1 = side_q(c3 * 4u + 1u);
  let sq2 = side_q(c3 * 4u + 2u);
  let sq3 = side_q(c3 * 4u + 3u);
{% endif %}
{% if kind == "max" %}
  var acc = vec4<f32>(bitcast<f32>(0xff800000u));
{% else %}
  var acc = vec4<f32>(0.0);
{% endif %}
{% if win_out %}
  // the window's positions written out (what lavapipe's NIR made of the loops, round by round)
{% for kh in range(WH) %}
  {
    let ih = h0 + {{ kh * DH }};
    if (ih >= 0 && ih < {{ H }}) {
{% for kw in range(WW) %}
    {
      let iw = w0 + {{ kw * DW }};
      if (iw >= 0 && iw < {{ W }}) {
{{ tap() }}      }
    }
{% endfor %}
    }
  }
{% endfor %}
{% set rows_in %}{% for kh in range(WH) %}{{ " + " if not loop.first }}select(0u, 1u, h0 + {{ kh * DH }} >= 0 && h0 + {{ kh * DH }} < {{ H }}){% endfor %}{% endset %}
{% set cols_in %}{% for kw in range(WW) %}{{ " + " if not loop.first }}select(0u, 1u, w0 + {{ kw * DW }} >= 0 && w0 + {{ kw * DW }} < {{ W }}){% endfor %}{% endset %}
  let count = ({{ rows_in }}) * ({{ cols_in }});
{% else %}
  for (var kh = 0u; kh < {{ WH }}u; kh = kh + 1u) {
    let ih = h0 + i32(kh * {{ DH }}u);
    if (ih < 0 || ih >= {{ H }}) { continue; }
    for (var kw = 0u; kw < {{ WW }}u; kw = kw + 1u) {
      let iw = w0 + i32(kw * {{ DW }}u);
      if (iw < 0 || iw >= {{ W }}) { continue; }
{{ tap() }}    }
  }
  let count = inside(h0, {{ DH }}u, {{ WH }}u, {{ H }}) * inside(w0, {{ DW }}u, {{ WW }}u, {{ W }});
{% endif %}
{% if kind == "avg" %}
  let v = select(vec4<f32>(0.0), acc / f32(count), count > 0u);
{% elif kind == "l2" %}
  let v = sqrt(acc);
{% else %}
  let v = select(acc, vec4<f32>(bitcast<f32>(0xff800000u)), count == 0u);
{% endif %}
{% if side and not in_side %}
{% if words and T == "f16" %}
  // the output rounded to float16 once, and the map computed from that rounded value
  let r = vec4<f32>(vec4<f16>({{ el.apply4(ep, "v", "idx * 4u") }}));
{% else %}
  let r = {{ el.apply4(ep, "v", "idx * 4u") }};
{% endif %}
  out[idx] = {{ pk("r") }};
  side_out[idx] = {{ pk(side4("r", "idx")) }};
{% else %}
  out[idx] = {{ pk(el.apply4(ep, "v", "idx * 4u")) }};
{% endif %}
}
