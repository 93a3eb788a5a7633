{#-
  Shared by the recurrent step kernels.

  act(name, x): the WGSL f32 expression of activation `name` ("relu", "sigmoid", "tanh")
    applied to the expression x (sigmoid_f32 / tanh_f32 come from _lib/activations.wgsl).
  time(direction, T): the expression of the time index read and written by step `s` for
    direction `d` ("forward": s, "backward": T-1-s, "both": forward for d = 0, backward for 1).
  locate(H, B): declares j (hidden unit), b (batch), d (direction) and db = d * B + b of `idx`.
  step(H, B, T, GH, direction, proj_tbd=False, D=1): locate(), then the step s (load_step(0)), its
    time index t, and the row offsets prow (this step's projections: GH per row, in proj
    [D, T, B, GH], or [T, B, D, GH] with proj_tbd), hrow (the hidden state) and rrow
    (direction d's recurrent weights).
  lstm_gates(acts, has_peep, H): from the gates' sums ai, ao, af, ag and the cell state c,
    the peephole terms (has_peep: load_peep), the gates and the new cell (ct) and hidden (ht)
    states, with the activations acts = [gate, cell input, cell output].
-#}
{% macro act(name, x) -%}
{% if name == "relu" %}max({{ x }}, 0.0){% elif name == "sigmoid" %}sigmoid_f32({{ x }}){% else %}tanh_f32({{ x }}){% endif %}
{%- endmacro %}

{% macro time(direction, T) -%}
{% if direction == "forward" %}s{% elif direction == "backward" %}({{ T }}u - 1u - s){% else %}select(s, {{ T }}u - 1u - s, d == 1u){% endif %}
{%- endmacro %}

{% macro locate(H, B) %}
  let j = idx % {{ H }}u;
  let db = idx / {{ H }}u;
  let b = db % {{ B }}u;
  let d = db / {{ B }}u;
{% endmacro %}

{% macro step(H, B, T, GH, direction, proj_tbd=False, D=1) %}
{{ locate(H, B) }}
  let s = load_step(0u);
  let t = {{ time(direction, T) }};
{% if proj_tbd %}
  let prow = ((t * {{ B }}u + b) * {{ D }}u + d) * {{ GH }}u;
{% else %}
  let prow = ((d * {{ T }}u + t) * {{ B }}u + b) * {{ GH }}u;
{% endif %}
  let hrow = db * {{ H }}u;
  let rrow = d * {{ GH }}u;
{% endmacro %}

{% macro lstm_gates(acts, has_peep, H) %}
{% if has_peep %}
  let prw = d * {{ 3 * H }}u + j;
  ai = ai + c * f32(load_peep(prw));
  ao = ao + c * f32(load_peep(prw + {{ H }}u));
  af = af + c * f32(load_peep(prw + {{ 2 * H }}u));
{% endif %}
  let gi = {{ act(acts[0], "ai") }};
  let gf = {{ act(acts[0], "af") }};
  let gg = {{ act(acts[1], "ag") }};
  let go = {{ act(acts[0], "ao") }};
  let ct = gf * c + gi * gg;
  let ht = go * {{ act(acts[2], "ct") }};
{% endmacro %}

{#- the vec4 form of each of the activations `acts`: fn <name>4(v: vec4<f32>) -> vec4<f32> -#}
{% macro act4_fns(acts) %}
{% for name in acts | unique %}
fn {{ name }}4(v: vec4<f32>) -> vec4<f32> {
  return vec4<f32>({{ act(name, "v.x") }}, {{ act(name, "v.y") }}, {{ act(name, "v.z") }}, {{ act(name, "v.w") }});
}
{% endfor %}
{%- endmacro %}

{#- four scalars from index i of binding `name` as a vec4<f32> -#}
{% macro load4(name, i) -%}
vec4<f32>(f32(load_{{ name }}({{ i }})), f32(load_{{ name }}({{ i }} + 1u)), f32(load_{{ name }}({{ i }} + 2u)), f32(load_{{ name }}({{ i }} + 3u)))
{%- endmacro %}
