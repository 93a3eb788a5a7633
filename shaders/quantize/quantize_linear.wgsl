{#-
  quantize/quantize_linear.wgsl: out = saturate(round_half_even(input / scale) + zero_point).

  Context:
    k.bindings   input (float32|float16), scale (same), zero_point (int8|uint8|int32|uint32),
                 out (the zero point's type)
    terms        [(axis, block, stride)]: the scale/zero-point element of an output element
                 (see _param.wgsl)
    out_strides  row-major strides of the input/output shape
    qtype        the zero point's data type; lo, hi: its range as WGSL literals
  Workgroup: (k.workgroup, 1, 1); 2-D folded dispatch; guarded by idx < k.n.

  The quotient is rounded in f32 (WGSL round() ties to even), NaN becomes 0, and the result
  is clamped to +-2^33 (any value beyond saturates for every zero point). The zero point is
  then added exactly in integer arithmetic on 16-bit halves: q = qh * 65536 + ql with
  ql in [0, 65536), likewise the zero point, so the sum th * 65536 + tl never overflows and
  saturation is exact even for int32 and uint32.
-#}
{% import "_lib/io.wgsl" as io %}
{% import "quantize/_param.wgsl" as qp %}
{{ io.prelude(k, int64) }}
{{ io.main_header(k) }}
{{ qp.param_index(terms, out_strides) }}
  let x = f32(load_input(idx));
  let s = f32(load_scale(pi));
  var q = round(x / s);
  if ((bitcast<u32>(q) & 0x7fffffffu) > 0x7f800000u) { q = 0.0; }
  q = clamp(q, -8589934592.0, 8589934592.0);
  let qh = floor(q * (1.0 / 65536.0));
  let qhi = i32(qh);
  let qli = i32(q - qh * 65536.0);
  let zp = load_zero_point(pi);
{% if qtype in ("int8", "int32") %}
  let zh = zp >> 16u;
  let zl = zp & 0xffff;
{% else %}
  let zh = i32(zp >> 16u);
  let zl = i32(zp & 0xffffu);
{% endif %}
  var tl = qli + zl;
  let th = qhi + zh + (tl >> 16u);
  tl = tl & 0xffff;
{% if qtype == "uint32" %}
  var r = (u32(max(th, 0)) << 16u) | u32(tl);
  if (th < 0) { r = 0u; }
  if (th > 65535) { r = 4294967295u; }
  store_out(idx, r);
{% else %}
  var v = th * 65536 + tl;
  if (th > 32767) { v = 2147483647; }
  if (th < -32768) { v = -2147483647 - 1; }
{% if qtype == "uint8" %}
  store_out(idx, u32(clamp(v, 0, 255)));
{% else %}
  store_out(idx, clamp(v, {{ lo }}, {{ hi }}));
{% endif %}
{% endif %}
}
