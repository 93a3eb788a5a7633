{#-
  Scalar math shared by the standalone element-wise kernels and the fused epilogues of
  conv2d / matmul / gemm. defs(T, names) emits `fn NAME_T(x: T) -> T` for each NAME in
  `names` (T is f32 or f16); expressions then call e.g. `sigmoid_f32(x)`.
  Precision notes: expm1 (|x| < 0.5), log1p (-0.2 < x < 0.25) and tanh (|x| < 0.25) use
  short series near 0, where exp(x) - 1 and log(1 + x) cancel (and lavapipe's log() is only
  accurate to about 6e-8 absolute near 1, which defeats Kahan's log-based tricks); erf uses a
  series near 0 and a Chebyshev erfc (fractional error < 1.2e-7) elsewhere, so elu, softplus,
  tanh and gelu stay within a few ULPs.
-#}
{% macro defs(T, names) %}
{% set big = "60000.0" if T == "f16" else "3.0e38" %}
{% for name in names %}
{% if name == "expm1" %}
fn expm1_{{ T }}(x: {{ T }}) -> {{ T }} {
  let xf = f32(x);
  if (abs(xf) < 0.5) {
    // Taylor series to x^8 / 8!: the first omitted term is < 1.5e-8 of the result.
    return {{ T }}(xf * (1.0 + xf * (0.5 + xf * (1.0 / 6.0 + xf * (1.0 / 24.0 + xf * (1.0 / 120.0 +
           xf * (1.0 / 720.0 + xf * (1.0 / 5040.0 + xf * (1.0 / 40320.0)))))))));
  }
  return {{ T }}(exp(xf) - 1.0);
}
{% elif name == "log1p" %}
fn log1p_{{ T }}(x: {{ T }}) -> {{ T }} {
  let xf = f32(x);
  if (xf > -0.2 && xf < 0.25) {
    // log(1 + x) = 2 atanh(s), s = x / (2 + x), |s| < 0.12: six terms of the odd series.
    let s = xf / (2.0 + xf);
    let s2 = s * s;
    return {{ T }}(2.0 * s * (1.0 + s2 * (1.0 / 3.0 + s2 * (1.0 / 5.0 + s2 * (1.0 / 7.0 + s2 * (1.0 / 9.0 +
           s2 * (1.0 / 11.0)))))));
  }
  return {{ T }}(log(1.0 + xf));
}
{% elif name == "erfc" %}
fn erfc_{{ T }}(x: {{ T }}) -> {{ T }} {
  let xf = f32(x);
  let z = abs(xf);
  let t = 1.0 / (1.0 + 0.5 * z);
  let p = -z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 +
          t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 +
          t * (-0.82215223 + t * 0.17087277))))))));
  let r = t * exp(p);
  return {{ T }}(select(2.0 - r, r, xf >= 0.0));
}
{% elif name == "erf" %}
fn erf_{{ T }}(x: {{ T }}) -> {{ T }} {
  let xf = f32(x);
  let z = abs(xf);
  if (z < 0.5) {
    let x2 = xf * xf;
    let s = xf * (1.0 + x2 * (-1.0 / 3.0 + x2 * (1.0 / 10.0 + x2 * (-1.0 / 42.0 + x2 * (1.0 / 216.0 +
            x2 * (-1.0 / 1320.0 + x2 * (1.0 / 9360.0)))))));
    return {{ T }}(1.1283791670955126 * s);
  }
  let t = 1.0 / (1.0 + 0.5 * z);
  let p = -z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 +
          t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 +
          t * (-0.82215223 + t * 0.17087277))))))));
  let r = 1.0 - t * exp(p);
  return {{ T }}(select(-r, r, xf >= 0.0));
}
{% elif name == "gelu" %}
fn gelu_{{ T }}(x: {{ T }}) -> {{ T }} {
  let xf = f32(x);
  let z = -xf * 0.7071067811865476;
  // gelu(x) = 0.5 x erfc(-x / sqrt(2)); erfc keeps relative precision for negative x.
  let a = abs(z);
  let t = 1.0 / (1.0 + 0.5 * a);
  let p = -a * a - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 +
          t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 +
          t * (-0.82215223 + t * 0.17087277))))))));
  let r = t * exp(p);
  var e = select(2.0 - r, r, z >= 0.0);
  if (a < 0.5) {
    let z2 = z * z;
    let s = z * (1.0 + z2 * (-1.0 / 3.0 + z2 * (1.0 / 10.0 + z2 * (-1.0 / 42.0 + z2 * (1.0 / 216.0 +
            z2 * (-1.0 / 1320.0))))));
    e = 1.0 - 1.1283791670955126 * s;
  }
  // e underflows to 0 for x < -13: the result is -0 (not -inf * 0 = NaN at x = -inf).
  return {{ T }}(select(0.5 * xf * e, -0.0, e == 0.0));
}
{% elif name == "sigmoid" %}
fn sigmoid_{{ T }}(x: {{ T }}) -> {{ T }} {
  let xf = f32(x);
  let e = exp(-abs(xf));
  let p = 1.0 / (1.0 + e);
  return {{ T }}(select(e * p, p, xf >= 0.0));
}
{% elif name == "tanh" %}
fn tanh_{{ T }}(x: {{ T }}) -> {{ T }} {
  let xf = f32(x);
  // clamp() would turn NaN into -20: pass NaN through.
  if ((bitcast<u32>(xf) & 0x7fffffffu) > 0x7f800000u) { return x; }
  if (abs(xf) < 0.25) {
    // tanh(x) = e / (e + 2) with e = expm1(2x) from its series (native tanh loses all
    // relative precision near 0).
    let y = 2.0 * xf;
    let e = y * (1.0 + y * (0.5 + y * (1.0 / 6.0 + y * (1.0 / 24.0 + y * (1.0 / 120.0 + y * (1.0 / 720.0 +
            y * (1.0 / 5040.0 + y * (1.0 / 40320.0))))))));
    return {{ T }}(e / (e + 2.0));
  }
  return {{ T }}(tanh(clamp(xf, -20.0, 20.0)));
}
{% elif name == "softplus" %}
fn softplus_{{ T }}(x: {{ T }}) -> {{ T }} {
  let xf = f32(x);
  // max(x, 0) + log1p(exp(-|x|)), log1p by the series of log1p_ (above) for e < 0.25.
  let e = exp(-abs(xf));
  var l = log(1.0 + e);
  if (e < 0.25) {
    let s = e / (2.0 + e);
    let s2 = s * s;
    l = 2.0 * s * (1.0 + s2 * (1.0 / 3.0 + s2 * (1.0 / 5.0 + s2 * (1.0 / 7.0 + s2 * (1.0 / 9.0 + s2 * (1.0 / 11.0))))));
  }
  return {{ T }}(max(xf, 0.0) + l);
}
{% elif name == "is_nan" %}
fn is_nan_{{ T }}(x: {{ T }}) -> bool {
  // Bit test (x != x may be folded away); f16 widens to f32 exactly, NaN and infinities included.
  return (bitcast<u32>(f32(x)) & 0x7fffffffu) > 0x7f800000u;
}
{% elif name == "is_inf" %}
fn is_inf_{{ T }}(x: {{ T }}) -> bool {
  return (bitcast<u32>(f32(x)) & 0x7fffffffu) == 0x7f800000u;
}
{% elif name == "fpow" %}
fn fpow_{{ T }}(a: {{ T }}, b: {{ T }}) -> {{ T }} {
  // C pow() semantics; WGSL pow(x, y) = exp2(y * log2(x)) is undefined for x = 0 and gives
  // NaN for pow(1, NaN) and pow(+-1, +-inf).
  let af = f32(a);
  let bf = f32(b);
  if (bf == 0.0 || af == 1.0) { return {{ T }}(1.0); }
  let ax = abs(af);
  var r = pow(ax, bf);
  if (ax == 0.0) { r = select(0.0, bitcast<f32>(0x7f800000u), bf < 0.0); }
  if (ax == 1.0 && abs(bf) == bitcast<f32>(0x7f800000u)) { r = 1.0; }
  if ((bitcast<u32>(af) & 0x80000000u) == 0u) { return {{ T }}(r); }
  if (floor(bf) != bf) { return {{ T }}(bitcast<f32>(0x7fc00000u)); }
  let odd = (abs(bf) < 16777216.0) && (abs(bf - 2.0 * floor(bf * 0.5)) == 1.0);
  return {{ T }}(select(r, -r, odd));
}
{% elif name == "ipow" %}
fn ipow_{{ T }}(a: {{ T }}, b: {{ T }}) -> {{ T }} {
{% if T in ("i32", "i64") %}
  if (b < {{ T }}(0)) {
    if (a == {{ T }}(1)) { return {{ T }}(1); }
    if (a == {{ T }}(-1)) { return select({{ T }}(1), {{ T }}(-1), (b & {{ T }}(1)) == {{ T }}(1)); }
    return {{ T }}(0);
  }
{% endif %}
  var result = {{ T }}(1);
  var base = a;
  var e = b;
  loop {
    if (e == {{ T }}(0)) { break; }
    if ((e & {{ T }}(1)) == {{ T }}(1)) { result = result * base; }
    base = base * base;
    e = e >> 1u;
  }
  return result;
}
{% endif %}
{% endfor %}
{% endmacro %}
