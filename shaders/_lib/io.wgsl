{#-
  Binding declarations with load/store helpers for every WebNN data type.

  decl(bindings, int64, first=0): declares bindings[i] at @group(0) @binding(first + i) and, per
    binding NAME,
    inputs:  fn load_raw_NAME(i: u32) -> RAW      (the element as stored: f32, f16, i32, u32,
                                                    the byte as u32, or vec2<u32> for 64-bit)
             fn load_NAME(i: u32) -> COMPUTE       (f32, f16, i32, u32, i64, u64)
    outputs: fn store_raw_NAME(i: u32, v: RAW)
             fn store_NAME(i: u32, v: COMPUTE)
  Bytes (int8/uint8) are packed four to a u32 word; outputs write them with atomicAnd/atomicOr
  on disjoint bits, so neighbouring invocations never race. 64-bit values are (low, high)
  word pairs; their COMPUTE helpers exist only when the adapter has shader-int64.

  vec4_src_out(k): the kernel's enables, then `src` (binding 0) and `out` (binding 1) as
    arrays of vec4 of their storage types (plain 32- or 16-bit data read four at a time).
  prelude(k, int64): the kernel's enables, then decl(k.bindings, int64): the opening of most
    kernels.
-#}
{% macro prelude(k, int64) %}
{% for e in k.enables %}
{{ e }}
{% endfor %}
{{ decl(k.bindings, int64) }}
{% endmacro %}
{% macro vec4_src_out(k) %}
{% for e in k.enables %}
{{ e }}
{% endfor %}
@group(0) @binding(0) var<storage, read> src: array<vec4<{{ k.bindings[0].storage }}>>;
@group(0) @binding(1) var<storage, read_write> out: array<vec4<{{ k.bindings[1].storage }}>>;
{% endmacro %}
{% macro decl(bindings, int64, first=0) %}
{% for b in bindings %}
{% set i = first + loop.index0 %}
{% if b.packing == "plain" %}
@group(0) @binding({{ i }}) var<storage, {{ "read_write" if b.output else "read" }}> {{ b.name }}: array<{{ b.storage }}>;
{% if b.output %}
fn store_raw_{{ b.name }}(i: u32, v: {{ b.storage }}) { {{ b.name }}[i] = v; }
fn store_{{ b.name }}(i: u32, v: {{ b.compute }}) { {{ b.name }}[i] = v; }
{% else %}
fn load_raw_{{ b.name }}(i: u32) -> {{ b.storage }} { return {{ b.name }}[i]; }
fn load_{{ b.name }}(i: u32) -> {{ b.compute }} { return {{ b.name }}[i]; }
{% endif %}
{% elif b.packing == "byte" %}
{% if b.output %}
@group(0) @binding({{ i }}) var<storage, read_write> {{ b.name }}: array<atomic<u32>>;
fn store_raw_{{ b.name }}(i: u32, v: u32) {
  let sh = (i & 3u) * 8u;
  atomicAnd(&{{ b.name }}[i >> 2u], ~(0xffu << sh));
  atomicOr(&{{ b.name }}[i >> 2u], (v & 0xffu) << sh);
}
fn store_{{ b.name }}(i: u32, v: {{ b.compute }}) { store_raw_{{ b.name }}(i, bitcast<u32>(v)); }
{% else %}
@group(0) @binding({{ i }}) var<storage, read> {{ b.name }}: array<u32>;
fn load_raw_{{ b.name }}(i: u32) -> u32 { return ({{ b.name }}[i >> 2u] >> ((i & 3u) * 8u)) & 0xffu; }
{% if b.data_type == "int8" %}
fn load_{{ b.name }}(i: u32) -> i32 { return bitcast<i32>(load_raw_{{ b.name }}(i) << 24u) >> 24u; }
{% else %}
fn load_{{ b.name }}(i: u32) -> u32 { return load_raw_{{ b.name }}(i); }
{% endif %}
{% endif %}
{% else %}{# wide: 64-bit as vec2<u32> #}
@group(0) @binding({{ i }}) var<storage, {{ "read_write" if b.output else "read" }}> {{ b.name }}: array<vec2<u32>>;
{% if b.output %}
fn store_raw_{{ b.name }}(i: u32, v: vec2<u32>) { {{ b.name }}[i] = v; }
{% if int64 %}
fn store_{{ b.name }}(i: u32, v: {{ b.compute }}) {
  let u = bitcast<u64>(v);
  {{ b.name }}[i] = vec2<u32>(u32(u & 0xfffffffflu), u32(u >> 32u));
}
{% endif %}
{% else %}
fn load_raw_{{ b.name }}(i: u32) -> vec2<u32> { return {{ b.name }}[i]; }
{% if int64 %}
fn load_{{ b.name }}(i: u32) -> {{ b.compute }} {
  let v = {{ b.name }}[i];
  return bitcast<{{ b.compute }}>((u64(v.y) << 32u) | u64(v.x));
}
{% endif %}
{% endif %}
{% endif %}
{% endfor %}
{% endmacro %}

{#- The linear invocation index of a 1-D kernel folded into 2-D workgroups. -#}
{% macro main_header(k) %}
@compute @workgroup_size({{ k.workgroup }})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let idx = gid.x + gid.y * nwg.x * {{ k.workgroup }}u;
  if (idx >= {{ k.n }}u) { return; }
{% endmacro %}
{#- words_fns(T, prefix): `<prefix>up` and `<prefix>pk`, four values of storage type T ("f32"
    or "f16") to and from u64 words, the same bits (float32: a vec2<u64>, float16: one u64 via
    pack2x16float / unpack2x16float): on Mesa 22 every storage access is a loop over the lanes
    and the components, and a u64 component moves two float32 or four float16 values. Every
    kernel moving words defines them with this macro; needs the shader-int64 feature. #}
{% macro words_fns(T, prefix="") %}
{% if T == "f16" %}
// four float16 values as one u64 (one per-lane access component instead of four)
fn {{ prefix }}up(v: u64) -> vec4<f32> {
  return vec4<f32>(unpack2x16float(u32(v & 0xfffffffflu)), unpack2x16float(u32(v >> 32u)));
}
fn {{ prefix }}pk(f: vec4<f32>) -> u64 {
  return u64(pack2x16float(f.xy)) | (u64(pack2x16float(f.zw)) << 32u);
}
{% else %}
// four float32 values as two u64s (two per-lane access components instead of four)
fn {{ prefix }}up(v: vec2<u64>) -> vec4<f32> {
  return vec4<f32>(bitcast<f32>(u32(v.x & 0xfffffffflu)), bitcast<f32>(u32(v.x >> 32u)),
                   bitcast<f32>(u32(v.y & 0xfffffffflu)), bitcast<f32>(u32(v.y >> 32u)));
}
fn {{ prefix }}pk(f: vec4<f32>) -> vec2<u64> {
  let u = bitcast<vec4<u32>>(f);
  return vec2<u64>(u64(u.x) | (u64(u.y) << 32u), u64(u.z) | (u64(u.w) << 32u));
}
{% endif %}
{% endmacro %}
