{#-
  reduce/_lib.wgsl: helpers shared by the reduction, pooling and normalization templates.

  init(combine, A): the identity of a combiner in accumulate type A (f32, i32, u32, i64, u64).
  fns(combine, A):  emits `fn comb(a: A, b: A) -> A` for "add" | "mul" | "max" | "min", or
                    `fn arg_better(va: A, ia: u32, vb: A, ib: u32) -> bool` for "argmax" |
                    "argmin" (true when (vb, ib) replaces (va, ia); ties keep the lower index,
                    NaN wins and the first NaN wins, an index of 0xffffffff means "empty").
                    max/min propagate NaN (tested by bit pattern, never by `x != x`).
  tree(WG, combine): the workgroup tree over sh_v (and sh_i for arg); thread t holds its partial
                    in sh_v[t] before; sh_v[0] (sh_i[0]) holds the result after. Must be called
                    in uniform control flow.
-#}
{% macro init(combine, A) -%}
{% if combine == "add" %}{{ A }}(0){% elif combine == "mul" %}{{ A }}(1)
{%- elif combine in ("max", "argmax") %}{{ lowest(A) }}{% else %}{{ highest(A) }}{% endif %}
{%- endmacro %}

{% macro lowest(A) -%}
{% if A == "f32" %}bitcast<f32>(0xff800000u){% elif A == "i32" %}i32(-2147483647 - 1){% elif A == "u32" %}0u
{%- elif A == "i64" %}(-9223372036854775807li - 1li){% else %}0lu{% endif %}
{%- endmacro %}

{% macro highest(A) -%}
{% if A == "f32" %}bitcast<f32>(0x7f800000u){% elif A == "i32" %}2147483647i{% elif A == "u32" %}4294967295u
{%- elif A == "i64" %}9223372036854775807li{% else %}18446744073709551615lu{% endif %}
{%- endmacro %}

{% macro fns(combine, A) %}
fn is_nan_acc(x: {{ A }}) -> bool {
{% if A == "f32" %}
  return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
{% else %}
  return false;
{% endif %}
}
{% if combine == "add" %}
fn comb(a: {{ A }}, b: {{ A }}) -> {{ A }} { return a + b; }
{% elif combine == "mul" %}
fn comb(a: {{ A }}, b: {{ A }}) -> {{ A }} { return a * b; }
{% elif combine in ("max", "min") %}
fn comb(a: {{ A }}, b: {{ A }}) -> {{ A }} {
  if (is_nan_acc(a)) { return a; }
  if (is_nan_acc(b)) { return b; }
  return {{ combine }}(a, b);
}
{% else %}
fn arg_better(va: {{ A }}, ia: u32, vb: {{ A }}, ib: u32) -> bool {
  if (ib == 0xffffffffu) { return false; }
  if (ia == 0xffffffffu) { return true; }
  let na = is_nan_acc(va);
  let nb = is_nan_acc(vb);
  if (na || nb) {
    if (na && nb) { return ib < ia; }
    return nb;
  }
  if (vb {{ ">" if combine == "argmax" else "<" }} va) { return true; }
  if (vb == va) { return ib < ia; }
  return false;
}
{% endif %}
{% endmacro %}

{% macro tree(WG, combine) %}
  workgroupBarrier();
  for (var w = {{ WG // 2 }}u; w > 0u; w = w >> 1u) {
    if (t < w) {
{% if combine in ("argmax", "argmin") %}
      if (arg_better(sh_v[t], sh_i[t], sh_v[t + w], sh_i[t + w])) {
        sh_v[t] = sh_v[t + w];
        sh_i[t] = sh_i[t + w];
      }
{% else %}
      sh_v[t] = comb(sh_v[t], sh_v[t + w]);
{% endif %}
    }
    workgroupBarrier();
  }
{% endmacro %}
