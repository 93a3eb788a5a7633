{#-
  pool/_window.wgsl: what pool/pool2d.wgsl and pool/pool2d_vec4.wgsl share about a window.
-#}

{#- inside(start, dil, n, size): how many of the n window positions start + i * dil lie in
    [0, size): the average's divisor and the test for a window entirely in the padding. -#}
{% macro inside_fn() %}
fn inside(start: i32, dil: u32, n: u32, size: i32) -> u32 {
  var count = 0u;
  for (var i = 0u; i < n; i = i + 1u) {
    let p = start + i32(i * dil);
    if (p >= 0 && p < size) { count = count + 1u; }
  }
  return count;
}
{% endmacro %}
