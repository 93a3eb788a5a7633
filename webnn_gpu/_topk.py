"""Top-k along the last axis as one custom WGSL operator, for the model loaders.

WebNN has no sort or top-k. TFLite's ``TOPK_V2`` and ONNX's ``TopK`` are both written as one
``MLGraphBuilder.wgsl`` node here: one launch whatever k is (selection rounds written out as
WebNN operators cost a few kernels per selected element). The order is the loaders' common
one: the k largest (or smallest) values, best first, ties in index order, each position taken
once (so a row of infinities gives each index once), NaN the largest of all values (first
for the largest, last for the smallest, as ONNX Runtime orders them).
"""

from __future__ import annotations

from collections.abc import Sequence

#: The data types the kernel reads (those ``MLGraphBuilder.wgsl`` binds).
DATA_TYPES = ("float32", "float16", "int32", "uint32")

#: The bindings and entry point both kernels share: the input, then each output.
_HEAD = """{% if inputs[0].type == "f16" %}enable f16;
{% endif %}
@group(0) @binding(0) var<storage, read> x: array<{{ inputs[0].type }}>;
{% for o in outputs %}@group(0) @binding({{ o.binding }}) var<storage, read_write> out{{ loop.index0 }}: array<{{ o.type }}>;
{% endfor %}
fn is_nan(v: {{ inputs[0].type }}) -> bool {
{% if inputs[0].type in ("f32", "f16") %}  // a bit test: llvmpipe may fold v != v away
  return (bitcast<u32>(f32(v)) & 0x7fffffffu) > 0x7f800000u;
{% else %}  return false;
{% endif %}}
// a comes strictly before b: the better value, NaN before all for the largest, after all for the smallest
fn before(a: {{ inputs[0].type }}, b: {{ inputs[0].type }}) -> bool {
  if (is_nan(a)) { return {{ "!is_nan(b)" if better == ">" else "false" }}; }
  if (is_nan(b)) { return {{ "false" if better == ">" else "true" }}; }
  return a {{ better }} b;
}
fn same(a: {{ inputs[0].type }}, b: {{ inputs[0].type }}) -> bool {
  if (is_nan(a) || is_nan(b)) { return is_nan(a) && is_nan(b); }
  return a == b;
}
@compute @workgroup_size({{ workgroup_size }})
"""

#: An invocation per row of ``n`` values takes the best ``k`` in turn: round r picks the best
#: value that comes after round r - 1's (value, index) in the order (value best first, index
#: ascending among ties), so no value is taken twice and ties keep index order. ``better`` is
#: ``>`` for the largest values, ``<`` for the smallest; NaN comes before every value for the
#: largest and after every value for the smallest (ONNX Runtime's order), NaNs in index order. Several top-ks of one input share the
#: launch: round r writes the outputs of every k above r (``ks``).
_ROUNDS_WGSL = _HEAD + """fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let row = gid.x;
  if (row >= {{ rows }}u) { return; }
  let base = row * {{ n }}u;
  var pv = x[base];
  var pi = -1;
  for (var r = 0u; r < {{ ks | max }}u; r = r + 1u) {
    var bv = x[base];
    var bi = -1;
    for (var j = 0u; j < {{ n }}u; j = j + 1u) {
      let v = x[base + j];
      let ij = i32(j);
      let after = pi < 0 || before(pv, v) || (same(v, pv) && ij > pi);
      if (after && (bi < 0 || before(v, bv))) {
        bv = v;
        bi = ij;
      }
    }
{% for k in ks %}
    if (r < {{ k }}u) {
      out{{ 2 * loop.index0 }}[row * {{ k }}u + r] = bv;
      out{{ 2 * loop.index0 + 1 }}[row * {{ k }}u + r] = {{ outputs[2 * loop.index0 + 1].type }}(bi);
    }
{% endfor %}
    pv = bv;
    pi = bi;
  }
}
"""

#: By ranks, where the rounds would run past llvmpipe's loop limit (k * n iterations per
#: row): an invocation per value counts the values before it in the same order (n iterations)
#: and, where that rank is below k, writes the value and its index there.
_RANK_WGSL = _HEAD + """fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let e = gid.x + gid.y * {{ row_stride }}u;
  if (e >= {{ rows * n }}u) { return; }
  let row = e / {{ n }}u;
  let i = e % {{ n }}u;
  let base = row * {{ n }}u;
  let v = x[base + i];
  var rank = 0u;
  for (var j = 0u; j < {{ n }}u; j = j + 1u) {
    let u = x[base + j];
    if (before(u, v) || (same(u, v) && j < i)) {
      rank = rank + 1u;
    }
  }
{% for k in ks %}
  if (rank < {{ k }}u) {
    out{{ 2 * loop.index0 }}[row * {{ k }}u + rank] = v;
    out{{ 2 * loop.index0 + 1 }}[row * {{ k }}u + rank] = {{ outputs[2 * loop.index0 + 1].type }}(i32(i));
  }
{% endfor %}
}
"""


def too_long(n: int) -> str | None:
    """Why rows of ``n`` values cannot be taken (llvmpipe's loop limit), or None."""
    from .ops.recurrent import LOOP_LIMIT

    if n < LOOP_LIMIT:
        return None
    return (f"rows of {n} values (at most {LOOP_LIMIT - 1}: llvmpipe ends a shader invocation's loops after "
            f"{LOOP_LIMIT} iterations)")


def top_k(builder, x, ks: Sequence[int], *, largest: bool = True, index_types: Sequence[str] | None = None,
          label: str = "") -> list:
    """The ``k`` best values of each row of ``x`` along its last axis and their indices, for
    each ``k`` of ``ks``, as one ``builder.wgsl`` node: ``[values_0, indices_0, values_1, ...]``.

    Arguments:
        builder (MLGraphBuilder): the builder the node goes into.
        x (MLOperand): rank >= 1, a data type of :data:`DATA_TYPES`.
        ks (Sequence[int]): one or more k, each 1 to the last axis' length.
        largest (bool): the largest values first (else the smallest first).
        index_types (Sequence[str] | None): each k's index data type, ``"int32"`` (default) or
            ``"float32"`` (an index read only as a float: the loader's cast written by the kernel).
        label (str): names the node.

    Ties come out in index order; each position is taken once. Rows of 65535 values or more
    raise ``ValueError`` (:func:`too_long` says why; the loaders check it first).
    """
    shape = list(x.shape)
    n = shape[-1]
    index_types = list(index_types or ["int32"] * len(ks))
    reason = too_long(n)
    if reason is not None:
        raise ValueError(reason)
    from .ops.recurrent import LOOP_LIMIT

    rows = 1
    for d in shape[:-1]:
        rows *= int(d)
    descs = []
    for k, it in zip(ks, index_types):
        out_shape = [*shape[:-1], int(k)]
        descs += [{"data_type": x.data_type, "shape": out_shape}, {"data_type": it, "shape": out_shape}]
    constants = {"rows": rows, "n": n, "ks": [int(k) for k in ks], "better": ">" if largest else "<"}
    if max(ks) * (n + 1) <= LOOP_LIMIT:  # rounds: an invocation per row
        return builder.wgsl(_ROUNDS_WGSL, [x], descs, workgroup_size=64, dispatch=[-(-rows // 64)],
                            constants=constants, label=label)
    groups = -(-rows * n // 64)  # ranks: an invocation per value
    grid = [groups] if groups <= 65535 else [65535, -(-groups // 65535)]
    return builder.wgsl(_RANK_WGSL, [x], descs, workgroup_size=64, dispatch=grid,
                        constants={**constants, "row_stride": 65535 * 64}, label=label)
