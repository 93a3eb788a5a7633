"""ONNX node test cases that run (their operators are supported) but do not match, with the reason.

Cases refused with ``NotSupportedError`` (an operator, attribute or data type outside the
importer's table: double, int16, float8, empty tensors, 3-D pooling...) are *excluded*
by the suite and not listed here.
"""

KNOWN_FAILURES: dict[str, str] = {
    "test_attention_4d_causal_fp16_expanded": (
        "float16 graph: the softmax and the two matmuls round in float16 at each step, the reference "
        "rounds once; 1 ulp of float16 (about 5e-4 relative) on a few elements exceeds the case's rtol 1e-3"
    ),
    "test_attention_4d_causal_fp16": (
        "float16 graph, as the _expanded case: the matmuls and the softmax round in float16 at each step; "
        "1 to 2 ulp of float16 on 2 of 192 elements exceed the case's rtol 1e-3"
    ),
}
