{#-
  Helpers shared by the matmul and conv kernels (register-blocked tiles, fused epilogues).

  decl(index, name, T, vec, output): declares one storage binding as array<T> or, with vec,
    array<vec4<T>> (vec4 reads straight from storage; the caller guarantees 4-element alignment).
  weights(index, name, T, vec, uniform): a kernel's constant weights: with uniform (a count of
    vec4s, else 0) a float32 uniform buffer array<vec4<f32>, uniform> (zero-padded; uniform
    loads are branch-free on Mesa 22), otherwise decl(index, name, T, vec, false).
  epilogue_decls(ep, first): declares the epilogue operands ep.operands at bindings first.. as
    plain read-only arrays named by their binding names.
  epilogue_fns(ep): the activation helpers and `fn epilogue(x: f32, o: u32, ch: u32) -> f32`.
  apply(ep, v, o, ch, q, gv): the expression applying the epilogue to the f32 value v (v itself
    when the epilogue is empty); q names the channel's hoisted `EpQ` (see hoist_q) or is empty;
    gv is the value of the operand the kernel holds itself (ep.given).
  given_fns(ep, name, vec, words): the helpers loading a pooled or upsampled given operand
    (ep.given_g4 / g1, its binding `name`, an array of vec4 with vec; with words ep.given_g8, the
    binding an array of 8-value words), nothing for a plain one.
  given4(ep, name, i4) / given1(ep, name, o): the given operand's vec4 i4 (as vec4<f32>) / its
    element o (as f32): the binding's value, or the pool over its window (ep.given_g4 / g1).
  hoist_q(ep, name, ch): `let name = ep_q(ch);` when the epilogue reads operands at the channel
    (ep.chan), else nothing: a kernel storing many outputs of channel ch loads them once.
  prologue(k, T, names, vec, ep): everything before a kernel's body: `enable f16;` for f16,
    the inputs `names` (bindings 0..), the epilogue operands, `out` (read_write, scalar), the
    epilogue helpers, and the entry point up to `idx` (guarded by idx < k.n).
  store_channels(ep, T, TO, o_sn, o_sh, o_sw, o_sc): stores acc0..acc{TO-1}, channels o0.. of
    output pixel (n, oh, ow), through the epilogue (the direct and gather-transposed convs).
  pixel_block(k, n_inv, OWB, OHB, TH, TW, sh, sw, pt, pl, seg, W, all_run): the entry point of
    a kernel with one invocation per TH x TW block of output pixels (block column fastest), up
    to the block's origin (n, oh0, ow0), its input origin (ih0, iw0) and, for each input column
    offset j of `seg`, the clamped column ci{j} and whether it is inside the image (cok{j}).
    `gidx` is the invocation's index and `li` its index in the workgroup; with all_run, the
    invocations past the last block do not return (`live` is false) so that the kernel can
    end with a workgroup barrier.
  decode_out(w, h, O, TO, OPG, wv, hv): splits idx into the column `wv` (of w), row `hv` (of
    h), output-channel block `ob` (TO channels each, O in all), batch `n`, first channel `o0`
    and group `g` (OPG output channels per group); column fastest.
-#}
{% macro decl(index, name, T, vec, output) %}
@group(0) @binding({{ index }}) var<storage, {{ "read_write" if output else "read" }}> {{ name }}: array<{{ "vec4<" ~ T ~ ">" if vec else T }}>;
{% endmacro %}

{% macro weights(index, name, T, vec, uniform) %}
{% if uniform %}
@group(0) @binding({{ index }}) var<uniform> {{ name }}: array<vec4<f32>, {{ uniform }}>;
{%- else %}
{{ decl(index, name, T, vec, false) -}}
{% endif %}
{% endmacro %}

{% macro epilogue_decls(ep, first) %}
{% for name, v in ep.operands %}
@group(0) @binding({{ first + loop.index0 }}) var<storage, read> {{ name }}: array<{{ "f16" if v.data_type == "float16" else "f32" }}>;
{% endfor %}
{% endmacro %}

{% macro epilogue_fns(ep) %}
{% import "_lib/epilogue.wgsl" as epl %}
{{ epl.fns(ep) }}
{% endmacro %}

{% macro apply(ep, v, o, ch, q="", gv="") -%}
{% if ep.empty %}{{ v }}{% else %}{{ ep.fn }}({{ v }}, {{ o }}, {{ ch }}{% if ep.chan %}, {{ q or ep.q_fn ~ "(" ~ ch ~ ")" }}{% endif %}{% if ep.given %}, {{ gv }}{% endif %}){% endif %}
{%- endmacro %}

{% macro given_fns(ep, name, vec, words=false) %}
{% if words %}
{{ ep.given_g8 | replace("GIVEN", name) }}
{% elif ep.given_g4 %}
{{ (ep.given_g4 if vec else ep.given_g1) | replace("GIVEN", name) }}
{% endif %}
{% endmacro %}

{% macro given4(ep, name, i4) -%}
{% if ep.given_g4 %}{{ ep.fn }}_g4({{ i4 }}){% else %}vec4<f32>({{ name }}[{{ i4 }}]){% endif %}
{%- endmacro %}

{% macro given1(ep, name, o) -%}
{% if ep.given_g4 %}{{ ep.fn }}_g1({{ o }}){% else %}f32({{ name }}[{{ o }}]){% endif %}
{%- endmacro %}

{% macro hoist_q(ep, name, ch) -%}
{% if ep.chan %}let {{ name }} = {{ ep.q_fn }}({{ ch }});{% endif %}
{%- endmacro %}

{% macro prologue(k, T, names, vec, ep) %}
{% if T == "f16" %}
enable f16;
{% endif %}
{% for name in names %}
{{ decl(loop.index0, name, T, vec, false) }}
{% endfor %}
{{ epilogue_decls(ep, names | length) }}
{{ decl(names | length + ep.operands | length, "out", T, false, true) }}
{{ epilogue_fns(ep) }}

@compute @workgroup_size({{ k.workgroup }})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let idx = gid.x + gid.y * nwg.x * {{ k.workgroup }}u;
  if (idx >= {{ k.n }}u) { return; }
{% endmacro %}

{% macro decode_out(w, h, O, TO, OPG, wv, hv) %}
  var r = idx;
  let {{ wv }} = r % {{ w }}u; r = r / {{ w }}u;
  let {{ hv }} = r % {{ h }}u; r = r / {{ h }}u;
  let ob = r % {{ O // TO }}u;
  let n = r / {{ O // TO }}u;
  let o0 = ob * {{ TO }}u;
  let g = o0 / {{ OPG }}u;
{% endmacro %}

{% macro store_channels(ep, T, TO, o_sn, o_sh, o_sw, o_sc) %}
  let ob0 = n * {{ o_sn }}u + oh * {{ o_sh }}u + ow * {{ o_sw }}u;
{% for t in range(TO) %}
  {
    let o = ob0 + (o0 + {{ t }}u) * {{ o_sc }}u;
    out[o] = {{ T }}({{ apply(ep, "acc" ~ t, "o", "o0 + " ~ t ~ "u") }});
  }
{% endfor %}
{% endmacro %}

{% macro pixel_block(k, n_inv, OWB, OHB, TH, TW, sh, sw, pt, pl, seg, W, all_run=false) %}
@compute @workgroup_size({{ k.workgroup }})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
  let gidx = gid.x + gid.y * nwg.x * {{ k.workgroup }}u;
{% if all_run %}
  // every invocation runs to the end (a workgroup barrier follows); those past the last
  // block compute the last one again and store nothing (live)
  let live = gidx < {{ n_inv }}u;
  let idx = min(gidx, {{ n_inv - 1 }}u);
{% else %}
  let idx = gidx;
  if (idx >= {{ n_inv }}u) { return; }
{% endif %}
  let r1 = idx / {{ OWB }}u;
  let wb = idx - r1 * {{ OWB }}u;
  let n = r1 / {{ OHB }}u;
  let hb = r1 - n * {{ OHB }}u;
  let oh0 = hb * {{ TH }}u;
  let ow0 = wb * {{ TW }}u;
  let ih0 = i32(oh0 * {{ sh }}u) - {{ pt }};
  let iw0 = i32(ow0 * {{ sw }}u) - {{ pl }};
{% for j in seg %}
  let cx{{ j }} = iw0 + {{ j }};
  let cok{{ j }} = u32(cx{{ j }}) < {{ W }}u;
  let ci{{ j }} = select(0u, u32(cx{{ j }}), cok{{ j }});
{% endfor %}
{% endmacro %}

{#- word_fns(T): `w_up(v) -> vec4<f32>` and `w_pk(f: vec4<f32>)`, four values of storage type T
  moved as u64 words, the same bits: float32 as a vec2<u64>, float16 as one u64 (on Mesa 22 a
  storage access is a loop over the lanes and its components, so a u64 moves two float32 or
  four float16 values per component). Needs the shader-int64 feature. -#}
{% macro word_fns(T) %}
{% import "_lib/io.wgsl" as io %}
{{ io.words_fns(T, "w_") }}
{% endmacro %}
