{#-
  Scalar math shared by the standalone element-wise kernels and the fused epilogues of
  conv2d / matmul / gemm. defs(T, names) emits `fn NAME_T(x: T) -> T` for each NAME in
  `names` (T is f32 or f16); expressions then call e.g. `sigmoid_f32(x)`. Helpers a name
  needs (exp_acc, erfc_pos) are emitted once per call. defs(T, names, selects=true) writes
  exp_acc's NaN, overflow and underflow cases as selects instead of early returns: the same
  values bit for bit, for kernels that call it from a long unrolled block (the depthwise
  kernel's expansion, conv.md "Expansions with exp"), where the branches cost more on lavapipe
  than computing every case (in the tile kernel's epilogue loop the branches are cheaper).
  Precision notes: exp_acc is exp() with Cody-Waite range reduction (lavapipe's exp(x) is
  exp2(x * log2 e), off by about |x| ULPs); expm1 (|x| < 0.5), log1p (-0.2 < x < 0.25) and
  tanh (|x| < 0.25) use short series near 0, where exp(x) - 1 and log(1 + x) cancel (and
  lavapipe's log() is only accurate to about 6e-8 absolute near 1, which defeats Kahan's
  log-based tricks); erfc_pos is a Chebyshev erfc (fractional error < 1.2e-7) whose
  exp(-z^2) takes z^2 as an exact head plus a small tail, erf a series near 0, so elu,
  sigmoid, softplus, tanh, erf and gelu stay within a few ULPs.
-#}
{% macro defs(T, names, selects=false) %}
{% set big = "60000.0" if T == "f16" else "3.0e38" %}
{% if names | select("in", ["exp_acc", "expm1", "erfc", "erf", "gelu", "sigmoid", "softplus"]) | list %}
fn exp_acc_{{ T }}(x: f32) -> f32 {
  // exp(x) = 2^k exp(r), r = x - k ln2 (ln2 in two parts, k ln2_hi exact), |r| <= 0.35.
{% if selects %}
  let k = round(clamp(x, -104.0, 89.0) * 1.4426950408889634);  // the cases below select their own value
{% else %}
  if ((bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u) { return x; }
  if (x > 88.72284) { return bitcast<f32>(0x7f800000u); }
  if (x < -103.97209) { return 0.0; }
  let k = round(x * 1.4426950408889634);
{% endif %}
  let r = (x - k * 0.693145751953125) - k * 1.4286068203094172e-06;
  let p = 1.0 + r * (1.0 + r * (0.5 + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0 +
          r * (1.0 / 5040.0)))))));
{# ldexp(p, k) without arithmetic on denormals (x86 takes a microcode assist for every vector
    operation that reads or makes one: a segmenter's sigmoid of a background logit below -87):
    k >= -125 (a normal result) as two exact powers of two, 2^k1 2^(kn - k1), each in [2^-63,
    2^64], the first product exact and the second rounding once, as ldexp does; k in [-150, -126]
    as the result's bits, p 2^(k + 149) rounded to an integer (p 2^k is that many units of
    2^-149, the denormals' spacing, up to the smallest normal's 2^23 units and just past it) #}
  // ldexp(p, k), no arithmetic on denormals (see _lib/activations.wgsl)
  let ki = i32(k);
  let kn = max(ki, -125);
  let k1 = kn >> 1u;
  let big = (p * bitcast<f32>(u32(k1 + 127) << 23u)) * bitcast<f32>(u32(kn - k1 + 127) << 23u);
  let units = round(p * bitcast<f32>(u32(clamp(ki, -150, -126) + 149 + 127) << 23u));
{% if selects %}
  let v = select(big, bitcast<f32>(u32(units)), ki < -125);
  let ends = select(select(v, 0.0, x < -103.97209), bitcast<f32>(0x7f800000u), x > 88.72284);
  return select(ends, x, (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u);
{% else %}
  return select(big, bitcast<f32>(u32(units)), ki < -125);
{% endif %}
}
{% endif %}
{% if names | select("in", ["erfc", "erf", "gelu"]) | list %}
fn erfc_pos_{{ T }}(z: f32, zz_head: f32, zz_tail: f32) -> f32 {
  // erfc(z) for z >= 0 (Numerical Recipes' erfcc); z^2 = zz_head + zz_tail with zz_head
  // exact, so exp(-z^2) does not inherit the rounding error of z * z (2 z^2 ULPs).
  if (z >= 10.0) { return 0.0; }
  let t = 1.0 / (1.0 + 0.5 * z);
  let q = -1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 +
          t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 +
          t * (-0.82215223 + t * 0.17087277))))))));
  return t * exp_acc_{{ T }}(-zz_head) * exp_acc_{{ T }}(q - zz_tail);
}
fn head12_{{ T }}(x: f32) -> f32 {
  // x with its 12 leading significant bits: its square is exact in f32.
  return bitcast<f32>(bitcast<u32>(x) & 0xfffff000u);
}
{% endif %}
{% for name in names %}
{% if name == "exp_acc" %}
{% elif name == "expm1" %}
fn expm1_{{ T }}(x: {{ T }}) -> {{ T }} {
  let xf = f32(x);
  if (abs(xf) < 0.5) {
    // Taylor series to x^8 / 8!: the first omitted term is < 1.5e-8 of the result.
    return {{ T }}(xf * (1.0 + xf * (0.5 + xf * (1.0 / 6.0 + xf * (1.0 / 24.0 + xf * (1.0 / 120.0 +
           xf * (1.0 / 720.0 + xf * (1.0 / 5040.0 + xf * (1.0 / 40320.0)))))))));
  }
  return {{ T }}(exp_acc_{{ T }}(xf) - 1.0);
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
  let zh = head12_{{ T }}(z);
  let r = erfc_pos_{{ T }}(z, zh * zh, (z - zh) * (z + zh));
  return {{ T }}(select(2.0 - r, r, xf >= 0.0));
}
{% elif name == "erf" %}
fn erf_{{ T }}(x: {{ T }}) -> {{ T }} {
  let xf = f32(x);
  let z = abs(xf);
{# no arithmetic on denormals for large inputs: erf(x) rounds to +-1 past 3.9 (erfc at 5 there:
    exp(-z^2) is a denormal past 9.3); erfc's part takes z in [0.5, 5] also where the series
    gives the result (both sides may run, as selects). Tiny inputs (|x| < 1e-19, x^2 a denormal)
    still square into a denormal: a stand-in there cost every normal input 5% (docs/performance.md) #}
  if (z < 0.5) {
    let x2 = xf * xf;
    let s = xf * (1.0 + x2 * (-1.0 / 3.0 + x2 * (1.0 / 10.0 + x2 * (-1.0 / 42.0 + x2 * (1.0 / 216.0 +
            x2 * (-1.0 / 1320.0 + x2 * (1.0 / 9360.0)))))));
    return {{ T }}(1.1283791670955126 * s);
  }
  let zc = select(z, 5.0, z > 5.0);
  let zh = head12_{{ T }}(zc);
  let r = 1.0 - erfc_pos_{{ T }}(zc, zh * zh, (zc - zh) * (zc + zh));
  return {{ T }}(select(-r, r, xf >= 0.0));
}
{% elif name == "gelu" %}
fn gelu_{{ T }}(x: {{ T }}) -> {{ T }} {
  let x0 = f32(x);
{# no arithmetic on denormals for large inputs: gelu(x) rounds to x past 7 (computed at 7:
    erfc(-x / sqrt(2)) rounds to 2 there, exp(-x^2 / 2) is a denormal past 13.2). Below -13.2
    the result itself is a denormal: that arithmetic stays; so does tiny inputs' (|x| < 1e-19,
    x^2 a denormal: a stand-in there cost every normal input 9%, docs/performance.md) #}
  let xf = select(x0, 7.0, x0 > 7.0);
  let z = -xf * 0.7071067811865476;
  // gelu(x) = 0.5 x erfc(-x / sqrt(2)); erfc keeps relative precision for negative x.
  // z^2 = x^2 / 2 is formed from x (exact head), not from the rounded z.
  let a = abs(z);
  let xh = head12_{{ T }}(xf);
  let r = erfc_pos_{{ T }}(a, 0.5 * (xh * xh), 0.5 * ((xf - xh) * (xf + xh)));
  var e = select(2.0 - r, r, z >= 0.0);
  if (a < 0.5) {
    let z2 = z * z;
    let s = z * (1.0 + z2 * (-1.0 / 3.0 + z2 * (1.0 / 10.0 + z2 * (-1.0 / 42.0 + z2 * (1.0 / 216.0 +
            z2 * (-1.0 / 1320.0))))));
    e = 1.0 - 1.1283791670955126 * s;
  }
  // e underflows to 0 for x < -13: the result is -0 (not -inf * 0 = NaN at x = -inf).
  return {{ T }}(select(0.5 * x0 * e, -0.0, e == 0.0));
}
{% elif name == "sigmoid" %}
fn sigmoid_{{ T }}(x: {{ T }}) -> {{ T }} {
  let xf = f32(x);
  let e = exp_acc_{{ T }}(-abs(xf));
{# e below 2^-30 leaves 1 + e = 1 and e p = e: the arithmetic takes 2^-30 instead, so that no
    operation reads a denormal e (see exp_acc), and the result is e itself #}
  let tiny = bitcast<u32>(e) < 0x30800000u;
  let en = select(e, 9.313225746154785e-10, tiny);
  let p = 1.0 / (1.0 + en);
  return {{ T }}(select(select(en * p, e, tiny), p, xf >= 0.0));
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
  let e = exp_acc_{{ T }}(-abs(xf));
{# e below 2^-30 (|x| > 20.8): log1p(e) rounds to e, and x + e to x for x > 0; the arithmetic
    takes 2^-30 instead, so that no operation reads a denormal e (|x| > 87.3) or makes one
    (s^2 for |x| in [42, 54]), and the result is e for x < 0 #}
  let tiny = bitcast<u32>(e) < 0x30800000u;
  let en = select(e, 9.313225746154785e-10, tiny);
  var l = log(1.0 + en);
  if (en < 0.25) {
    let s = en / (2.0 + en);
    let s2 = s * s;
    l = 2.0 * s * (1.0 + s2 * (1.0 / 3.0 + s2 * (1.0 / 5.0 + s2 * (1.0 / 7.0 + s2 * (1.0 / 9.0 + s2 * (1.0 / 11.0))))));
  }
  return {{ T }}(select(max(xf, 0.0) + l, e, tiny && xf < 0.0));
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
  // NaN in, NaN out (lavapipe's pow(NaN, 2) is 0).
  if ((bitcast<u32>(af) & 0x7fffffffu) > 0x7f800000u) { return a; }
  if ((bitcast<u32>(bf) & 0x7fffffffu) > 0x7f800000u) { return b; }
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
