{#-
  pool/pool2d.wgsl: average, L2 and max pooling over 2-D windows (nchw or nhwc).

  Output element (n, c, oh, ow) reads input rows ih = oh * SH - PT + kh * DH and columns
  iw = ow * SW - PL + kw * DW for kh < WH, kw < WW; positions outside the input (padding) are
  skipped: the average divides by the number of positions inside the input, and a window that
  lies entirely in the padding gives 0 (average, L2) or the lowest value of the type (max).
  Context:
    mode         "thread" (one invocation per output) | "group" (one workgroup per output, its
                 invocations striding over the window positions, combined by a tree)
    kind         "avg" | "l2" | "max"
    A            accumulate type; out_T output compute type
    out_strides  row-major strides of the output shape (coordinates c0..c3 in layout order)
    axes         {"n","c","h","w"} -> position of that dimension in the layout
    in_st        {"n","c","h","w"} -> input element stride of that dimension
    H, W, WH, WW, SH, SW, DH, DW, PT, PL, M (output elements)
    empty_max    the max pool's value for a window entirely in the padding (the data type's lowest)
    ep           fused epilogue (webnn_gpu/ops/_epilogue.py, float outputs), applied to each stored value
  Bindings: src, epilogue operands..., out.
  Workgroup: (k.workgroup, 1, 1); 2-D folded dispatch; guards idx < M (thread) or g < M (group).
-#}
{% import "_lib/io.wgsl" as io %}
{% import "pool/_window.wgsl" as pw %}
{% import "_lib/index.wgsl" as ix %}
{% import "reduce/_lib.wgsl" as rl %}
{% import "_lib/epilogue.wgsl" as el %}
{% set combine = "max" if kind == "max" else "add" %}
{{ io.prelude(k, int64) }}
{{ rl.fns(combine, A) }}
{{ el.fns(ep) }}

struct Win { base: u32, h0: i32, w0: i32 }

fn window(o: u32) -> Win {
{{ ix.coords("c", "o", out_strides) }}
  var w: Win;
  w.base = c{{ axes.n }} * {{ in_st.n }}u + c{{ axes.c }} * {{ in_st.c }}u;
  w.h0 = i32(c{{ axes.h }} * {{ SH }}u) - {{ PT }};
  w.w0 = i32(c{{ axes.w }} * {{ SW }}u) - {{ PL }};
  return w;
}

fn value(w: Win, kh: u32, kw: u32, ok: ptr<function, bool>) -> {{ A }} {
  let ih = w.h0 + i32(kh * {{ DH }}u);
  let iw = w.w0 + i32(kw * {{ DW }}u);
  if (ih < 0 || ih >= {{ H }} || iw < 0 || iw >= {{ W }}) {
    *ok = false;
    return {{ rl.init(combine, A) }};
  }
  *ok = true;
  let x = {{ A }}(load_src(w.base + u32(ih) * {{ in_st.h }}u + u32(iw) * {{ in_st.w }}u));
{% if kind == "l2" %}
  return x * x;
{% else %}
  return x;
{% endif %}
}

{{ pw.inside_fn() }}

fn finish(o: u32, w: Win, a: {{ A }}) {
{% if kind == "avg" %}
  let count = inside(w.h0, {{ DH }}u, {{ WH }}u, {{ H }}) * inside(w.w0, {{ DW }}u, {{ WW }}u, {{ W }});
  store_out(o, {{ out_T }}({{ el.apply(ep, "select(0.0, a / f32(count), count > 0u)", "o") }}));
{% elif kind == "l2" %}
  store_out(o, {{ out_T }}({{ el.apply(ep, "sqrt(a)", "o") }}));
{% else %}
  var m = a;
  if (inside(w.h0, {{ DH }}u, {{ WH }}u, {{ H }}) * inside(w.w0, {{ DW }}u, {{ WW }}u, {{ W }}) == 0u) {
    m = {{ empty_max }};
  }
  store_out(o, {{ out_T }}({{ el.apply(ep, "m", "o") }}));
{% endif %}
}

{% if mode == "thread" %}
{{ io.main_header(k) }}
  let w = window(idx);
  var acc: {{ A }} = {{ rl.init(combine, A) }};
  var ok = false;
  for (var kh = 0u; kh < {{ WH }}u; kh = kh + 1u) {
    for (var kw = 0u; kw < {{ WW }}u; kw = kw + 1u) {
      let v = value(w, kh, kw, &ok);
      if (ok) { acc = comb(acc, v); }
    }
  }
  finish(idx, w, acc);
}
{% else %}
var<workgroup> sh_v: array<{{ A }}, {{ k.workgroup }}>;

@compute @workgroup_size({{ k.workgroup }})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) t: u32) {
  let o = wid.x + wid.y * nwg.x;
  if (o >= {{ M }}u) { return; }
  let w = window(o);
  var acc: {{ A }} = {{ rl.init(combine, A) }};
  var ok = false;
  for (var p = t; p < {{ WH * WW }}u; p = p + {{ k.workgroup }}u) {
    let v = value(w, p / {{ WW }}u, p % {{ WW }}u, &ok);
    if (ok) { acc = comb(acc, v); }
  }
  sh_v[t] = acc;
{{ rl.tree(k.workgroup, combine) }}
  if (t == 0u) { finish(o, w, sh_v[0]); }
}
{% endif %}
