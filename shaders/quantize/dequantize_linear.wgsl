{#-
  quantize/dequantize_linear.wgsl: out = (input - zero_point) * scale.

  Context:
    k.bindings   input (int8|uint8|int32|uint32), scale (float32|float16), zero_point (the
                 input's type), out (the scale's type)
    terms        [(axis, block, stride)]: the scale/zero-point element of an output element
                 (see _param.wgsl)
    out_strides  row-major strides of the input/output shape
    qtype        the input's data type (lo, hi: its range, unused here)
  Workgroup: (k.workgroup, 1, 1); 2-D folded dispatch; guarded by idx < k.n.

  For 32-bit types input - zero_point can need 33 bits: it is formed from 16-bit halves,
  dh * 65536 + dl (both exact in f32), so it is rounded once; the product is computed in f32.
-#}
{% import "_lib/io.wgsl" as io %}
{% import "quantize/_param.wgsl" as qp %}
{{ io.prelude(k, int64) }}
{{ io.main_header(k) }}
{{ qp.param_index(terms, out_strides) }}
  let x = load_input(idx);
  let zp = load_zero_point(pi);
{% if qtype == "int32" %}
  let d = f32((x >> 16u) - (zp >> 16u)) * 65536.0 + f32((x & 0xffff) - (zp & 0xffff));
{% elif qtype == "uint32" %}
  let d = f32(i32(x >> 16u) - i32(zp >> 16u)) * 65536.0 + f32(i32(x & 0xffffu) - i32(zp & 0xffffu));
{% elif qtype == "int8" %}
  let d = f32(x - zp);
{% else %}
  let d = f32(i32(x) - i32(zp));
{% endif %}
  store_out(idx, {{ k.bindings[-1].compute }}(d * f32(load_scale(pi))));
}
