"""Structural fusions: patterns of several operators that become one named operator.

Each module holds one fused operator: its typed attributes (a :class:`~._attrs.FusedAttrs`
dataclass), its legality check, the rule that finds the pattern and rewrites it (entered in
:data:`webnn_gpu.compiler.driver.ORDER`), and its lowering onto kernels and templates.

* :mod:`.squeeze_excite`: two 1x1 convs on a pooled pixel (and the pool) in one workgroup.
* :mod:`.layer_norm`: layer normalization from its decomposed form, as ``layer_normalization``.
* :mod:`.attention`: ``matmul -> softmax -> matmul`` as ``attention``.
* :mod:`.mlp`: two products in a row (a feed-forward block) as ``mlp``, in one launch.
* :mod:`.heads`: products of the same few rows by different constant matrices (a network's
  heads) as ``heads``, in one launch.
* :mod:`.pooled_head`: a one-row product (or ``heads``) of a global average pool (a classifier
  head) as ``pooled_head``, one launch taking the pool's mean as it loads A.
* :mod:`.pw_depthwise`: a pointwise conv and the depthwise conv after it on a small image as
  ``pw_depthwise``, one launch (the pointwise output in workgroup memory).
* :mod:`.siblings`: convs (or matmuls) of the same input by different constant filters (a
  detector's classifier and regressor) as ``siblings``, one tile launch storing each product's
  columns.
"""

from __future__ import annotations

# The compiler's driver imports the rules of this package; importing it first (it imports
# them in turn) lets a module of this package be the first one imported.
from .. import compiler  # noqa: F401
from . import attention, heads, layer_norm, mlp, pooled_head, pw_depthwise, siblings, squeeze_excite  # noqa: F401
