{#-
  conv/_rows.wgsl: the row loop of conv/depthwise.wgsl and conv/depthwise_project.wgsl. The
  kernels loop over the block's input rows r (a runtime bound, so LLVM keeps it a loop), load
  each row's columns once as x<j>, and add them into every output row t whose window reaches
  row r, through tap row (r - t sh) / dh picked by selects among the taps w<kh>_<kw>.
-#}

{#- Output row t's share of input row r: acc<t>_<p> += x<p sw + kw dw> * tap (kh, kw). -#}
{% macro row_taps(acc, t, KH, KW, TW, sh, sw, dh, dw) %}
      if (r >= {{ t * sh }}u && r <= {{ t * sh + (KH - 1) * dh }}u{{ " && (r - " ~ t * sh ~ "u) % " ~ dh ~ "u == 0u" if dh > 1 }}) {
        let kt = (r - {{ t * sh }}u){{ " / " ~ dh ~ "u" if dh > 1 }};
{% for kw in range(KW) %}
        let wt{{ kw }} = {% for kh in range(1, KH) %}select({% endfor %}w0_{{ kw }}{% for kh in range(1, KH) %}, w{{ kh }}_{{ kw }}, kt == {{ kh }}u){% endfor %};
{% endfor %}
{% for kw in range(KW) %}
{% for p in range(TW) %}
        {{ acc }}{{ t }}_{{ p }} = {{ acc }}{{ t }}_{{ p }} + x{{ p * sw + kw * dw }} * wt{{ kw }};
{% endfor %}
{% endfor %}
      }
{% endmacro %}
