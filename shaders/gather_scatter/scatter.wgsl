{#-
  gather_scatter/scatter.wgsl: scatterElements and scatterND in three phases, so that when
  several updates target one element the LAST of them (in row-major order of the indices)
  wins, on every run:

    "clear"    k.bindings [win (uint32)]; one invocation per slot: win[slot] = 0
    "mark"     k.bindings [indices, win]; one invocation per update (row) u: computes the slot
               it targets and does atomicMax(win[slot], u + 1); `win` is declared here as
               array<atomic<u32>> (binding 1)
    "combine"  k.bindings [input, updates, win, output]; one invocation per output element o:
               w = win[o / inner]; output[o] = w == 0 ? input[o] : updates[(w - 1) * inner + o % inner]

  Context:
    phase        "clear", "mark" or "combine"
    it_strides   ("mark") row-major strides of the iterated shape (indices shape for
                 scatterElements; [number of index tuples] for scatterND)
    tgt_terms    ("mark") per iterated dimension: its stride into the slots
    width        ("mark") index values per update (1, or the tuple length m of scatterND)
    components   ("mark") [{offset, size, stride}] as in gather.wgsl: value j is
                 indices[idx * width + offset], brought into [0, size) by norm_index
    inner        ("combine") output elements per slot (1 for scatterElements; the product of the
                 trailing input dimensions for scatterND)
  Workgroup: (k.workgroup, 1, 1); 2-D folded dispatch; guarded by idx < k.n.
-#}
{% import "_lib/io.wgsl" as io %}
{% import "_lib/index.wgsl" as ix %}
{% import "_lib/indices.wgsl" as ind %}
{% for e in k.enables %}
{{ e }}
{% endfor %}
{% if phase == "clear" %}
{{ io.decl(k.bindings, int64) }}
{{ io.main_header(k) }}
  store_win(idx, 0u);
}
{% elif phase == "mark" %}
{{ io.decl(k.bindings[:-1], int64) }}
@group(0) @binding({{ k.bindings | length - 1 }}) var<storage, read_write> win: array<atomic<u32>>;
{{ ind.norm_fn(b.indices) }}
{{ io.main_header(k) }}
{{ ix.coords("c", "idx", it_strides) }}
  let ib = idx * {{ width }}u;
  var slot = {{ ix.dot("c", tgt_terms) }};
{% for comp in components %}
  slot = slot + norm_index(load_raw_indices(ib + {{ comp.offset }}u), {{ comp.size }}u) * {{ comp.stride }}u;
{% endfor %}
  atomicMax(&win[slot], idx + 1u);
}
{% else %}
{{ io.decl(k.bindings, int64) }}
{{ io.main_header(k) }}
{% if inner == 1 %}
  let w = load_win(idx);
  let u = select(0u, w - 1u, w != 0u);
{% else %}
  let w = load_win(idx / {{ inner }}u);
  let u = select(0u, (w - 1u) * {{ inner }}u + idx % {{ inner }}u, w != 0u);
{% endif %}
  store_raw_output(idx, select(load_raw_input(idx), load_raw_updates(u), w != 0u));
}
{% endif %}
