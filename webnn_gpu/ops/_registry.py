"""The operator registry: builder methods, lowerings and support limits.

* :func:`builder_method` attaches a function to :class:`~webnn_gpu.builder.MLGraphBuilder`.
* :func:`lowering` registers how a node of an op becomes kernels (see :mod:`webnn_gpu._lower`).
* :func:`support` records the data types and ranks an op accepts, which feeds both
  validation and ``MLContext.op_support_limits()``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from .._dtypes import DATA_TYPES

LOWERINGS: dict[str, Callable] = {}
SUPPORT: dict[str, "OpSupport"] = {}


@dataclass
class OpSupport:
    """Data types and ranks one operator accepts, per operand (spec's MLOpSupportLimits)."""

    name: str
    #: operand name -> {"data_types": [...], "rank_range": (min, max)}
    operands: dict[str, dict] = field(default_factory=dict)
    #: output name -> {"data_types": [...], "rank_range": (...)}
    outputs: dict[str, dict] = field(default_factory=dict)
    #: int64/uint64 need arithmetic (shader-int64); data movement ops set False
    int64_compute: bool = True


def builder_method(fn: Callable) -> Callable:
    """Attach ``fn`` to MLGraphBuilder under its own name (decorator)."""
    from ..builder import MLGraphBuilder

    setattr(MLGraphBuilder, fn.__name__, fn)
    return fn


def lowering(*ops: str) -> Callable:
    """Register ``fn(node, lc)`` as the lowering of the named ops (decorator)."""

    def deco(fn):
        for op in ops:
            LOWERINGS[op] = fn
        return fn

    return deco


def support(op: str, operands: Mapping[str, tuple[Sequence[str], tuple[int, int]]],
            output: tuple[Sequence[str], tuple[int, int]] | None = None, output_name: str = "output", int64_compute: bool = True) -> OpSupport:
    """Record what ``op`` accepts: ``operands`` maps a name to (data types, (min rank, max rank))."""
    s = OpSupport(op, int64_compute=int64_compute)
    for name, (dts, ranks) in operands.items():
        s.operands[name] = {"data_types": list(dts), "rank_range": tuple(ranks)}
    if output is not None:
        s.outputs[output_name] = {"data_types": list(output[0]), "rank_range": tuple(output[1])}
    SUPPORT[op] = s
    return s


ALL = tuple(DATA_TYPES)
