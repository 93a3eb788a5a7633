"""The compiler's rules, one module per theme; their order is :data:`webnn_gpu.compiler.driver.ORDER`.

Structural fusions that make a named operator of their own (squeeze-and-excite, layer
normalization, attention) live in :mod:`webnn_gpu.fusions`, one file each.
"""
