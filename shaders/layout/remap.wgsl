{#-
  layout/remap.wgsl: moves one element per invocation through an index map. Serves transpose,
  expand, slice, reverse, tile, pad, split, concat and triangular; exact for every data type
  (raw loads and stores).

  Context:
    k.bindings     [src (the input), dst (the output)]
    place          false: dst[idx] = src[map(idx)]   (iterates the output)
                   true:  dst[map(idx)] = src[idx]   (iterates the input: concat places an input
                                                      into its slab of the output)
    coord_strides  row-major strides of the iterated shape (after coalescing in Python)
    dims           one entry per iterated dimension, adding to map(idx):
                     {kind: "lin", stride}                 c * stride
                     {kind: "mod", stride, size}           (c % size) * stride          (tile)
                     {kind: "pad", stride, begin, last, reflect, mode}
                        p = c - begin, brought into [0, last] by mode: "constant" flags the
                        element as padding, "edge" clamps, "reflection" mirrors (reflect = 2*last)
                   strides and base are u32 values: a negative stride (reverse) is written modulo
                   2**32 and the sum wraps back into range
    base           u32 constant added to map(idx)
    needs_valid    emit the padding/mask flag
    fill           WGSL expression of the RAW value stored where the flag is false ("" if none)
    mask           none, or {row, col, upper, diagonal}: keep where col - row >= diagonal (upper)
                   or <= diagonal (lower); store fill elsewhere (triangular)
    stages         [] or, for a chain of index maps (ops/movement.py lower_remap_chain), the further maps
                   in turn: each {coord_strides, dims, base} takes the index map(idx) made so far as a
                   row-major index of its own iterated shape and maps those coordinates as dims do
                   (a constant pad of any stage flags the element)
    unit           1, or 4: src and dst are bound as arrays of vec4 (32-bit data; the map, the
                   strides and k.n count vec4s, ops/movement.py remap_unit)
  Workgroup: (k.workgroup, 1, 1); 2-D folded dispatch; guarded by idx < k.n.
-#}
{% import "_lib/io.wgsl" as io %}
{% import "_lib/index.wgsl" as ix %}
{% macro terms(c, dims) %}
{% for d in dims %}
{% set ci = c ~ loop.index0 %}
{% if d.kind == "lin" %}
{% if d.stride != 0 %}
  m = m + {{ ci }} * {{ d.stride }}u;
{% endif %}
{% elif d.kind == "mod" %}
  m = m + ({{ ci }} % {{ d.size }}u) * {{ d.stride }}u;
{% else %}
  {
    var p = i32({{ ci }}) - {{ d.begin }};
{% if d.mode == "reflection" %}
    p = select(p, -p, p < 0);
    p = select(p, {{ d.reflect }} - p, p > {{ d.last }});
{% elif d.mode == "constant" %}
    valid = valid && p >= 0 && p <= {{ d.last }};
{% endif %}
    m = m + u32(clamp(p, 0, {{ d.last }})) * {{ d.stride }}u;
  }
{% endif %}
{% endfor %}
{% endmacro %}
{% if unit == 4 %}
{% for e in k.enables %}
{{ e }}
{% endfor %}
{% set T = "vec4<" ~ k.bindings[0].storage ~ ">" %}
@group(0) @binding(0) var<storage, read> src: array<{{ T }}>;
@group(0) @binding(1) var<storage, read_write> dst: array<{{ T }}>;
fn load_raw_src(i: u32) -> {{ T }} { return src[i]; }
fn store_raw_dst(i: u32, v: {{ T }}) { dst[i] = v; }
{% else %}
{{ io.prelude(k, int64) }}
{% endif %}
{{ io.main_header(k) }}
{{ ix.coords("c", "idx", coord_strides) }}
{% if needs_valid %}
  var valid = true;
{% endif %}
  var m = {{ base }}u;
{{ terms("c", dims) -}}
{% for s in stages %}
{% set sc = "s" ~ loop.index ~ "c" %}
{{ ix.coords(sc, "m", s.coord_strides) }}
  m = {{ s.base }}u;
{{ terms(sc, s.dims) -}}
{% endfor %}
{% if mask %}
  let diag = i32(c{{ mask.col }}) - i32(c{{ mask.row }});
  valid = valid && (diag {{ ">=" if mask.upper else "<=" }} {{ mask.diagonal }});
{% endif %}
{% if place %}
  store_raw_dst(m, load_raw_src(idx));
{% elif needs_valid %}
  store_raw_dst(idx, select({{ fill }}, load_raw_src(m), valid));
{% else %}
  store_raw_dst(idx, load_raw_src(m));
{% endif %}
}
