{#-
  Scalar math shared by the standalone element-wise kernels and the fused epilogues of
  conv2d / matmul / gemm. defs(T, names) emits `fn NAME_T(x: T) -> T` for each NAME in
  `names` (T is f32 or f16); expressions then call e.g. `sigmoid_f32(x)`.
  Precision notes: expm1 and log1p use Kahan's tricks, erf a series near 0 and a Chebyshev
  erfc (fractional error < 1.2e-7) elsewhere, so elu, softplus and gelu stay within WPT ULPs.
-#}
{% macro defs(T, names) %}
{% set big = "60000.0" if T == "f16" else "3.0e38" %}
{% for name in names %}
{% if name == "expm1" %}
fn expm1_{{ T }}(x: {{ T }}) -> {{ T }} {
  let u = f32(exp(f32(x)));
  let xf = f32(x);
  if (u == 1.0) { return x; }
  let um1 = u - 1.0;
  if (um1 == -1.0) { return {{ T }}(-1.0); }
  if (abs(xf) > 0.5) { return {{ T }}(um1); }
  return {{ T }}(um1 * xf / log(u));
}
{% elif name == "log1p" %}
fn log1p_{{ T }}(x: {{ T }}) -> {{ T }} {
  let xf = f32(x);
  let u = 1.0 + xf;
  if (u == 1.0) { return x; }
  return {{ T }}(log(u) * xf / (u - 1.0));
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
  return {{ T }}(0.5 * xf * e);
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
  return {{ T }}(tanh(clamp(f32(x), -20.0, 20.0)));
}
{% elif name == "softplus" %}
fn softplus_{{ T }}(x: {{ T }}) -> {{ T }} {
  let xf = f32(x);
  let e = exp(-abs(xf));
  let u = 1.0 + e;
  let l = select(log(u) * e / (u - 1.0), e, u == 1.0);
  return {{ T }}(max(xf, 0.0) + l);
}
{% elif name == "is_nan" %}
fn is_nan_{{ T }}(x: {{ T }}) -> bool {
{% if T == "f16" %}
  return (bitcast<u32>(vec2<f16>(x, 0.0h)) & 0x7fffu) > 0x7c00u;
{% else %}
  return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
{% endif %}
}
{% elif name == "is_inf" %}
fn is_inf_{{ T }}(x: {{ T }}) -> bool {
{% if T == "f16" %}
  return (bitcast<u32>(vec2<f16>(x, 0.0h)) & 0x7fffu) == 0x7c00u;
{% else %}
  return (bitcast<u32>(x) & 0x7fffffffu) == 0x7f800000u;
{% endif %}
}
{% elif name == "fpow" %}
fn fpow_{{ T }}(a: {{ T }}, b: {{ T }}) -> {{ T }} {
  let af = f32(a);
  let bf = f32(b);
  if (bf == 0.0) { return {{ T }}(1.0); }
  let r = pow(abs(af), bf);
  if (af >= 0.0) { return {{ T }}(r); }
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
