{#-
  Index values of gather/scatter operators, brought into range.

  norm_fn(b): declares  fn norm_index(v: RAW, dim: u32) -> u32  for the indices binding `b`
    (int32, uint32, or int64 read raw as vec2<u32> (low, high), so no shader-int64 is needed).
    The rule (the spec's): a negative index counts from the end (v + dim); the result is then
    clamped into [0, dim - 1], so no value ever addresses outside the tensor.
-#}
{% macro norm_fn(b) %}
{% if b.data_type == "int32" %}
fn norm_index(v: i32, dim: u32) -> u32 {
  if (v < 0) { return u32(max(v + i32(dim), 0)); }
  return min(u32(v), dim - 1u);
}
{% elif b.data_type == "uint32" %}
fn norm_index(v: u32, dim: u32) -> u32 { return min(v, dim - 1u); }
{% elif b.data_type == "int64" %}
fn norm_index(v: vec2<u32>, dim: u32) -> u32 {
  if ((v.y & 0x80000000u) != 0u) {
    // Negative. Only values in [-2**31, -1] can land in range after adding dim.
    if (v.y == 0xffffffffu && v.x >= 0x80000000u) { return u32(max(bitcast<i32>(v.x) + i32(dim), 0)); }
    return 0u;
  }
  if (v.y != 0u) { return dim - 1u; }
  return min(v.x, dim - 1u);
}
{% endif %}
{% endmacro %}
