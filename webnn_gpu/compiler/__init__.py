"""The graph compiler, run by ``MLGraphBuilder.build``: rules over the graph IR
(:mod:`webnn_gpu._ir`) applied in a stated order by :mod:`~webnn_gpu.compiler.driver`.

* :mod:`.driver`: :data:`~.driver.ORDER` (the rules in order, each with the reason for its
  place), :func:`~.driver.run_passes`, :func:`~.driver.check_order`.
* :mod:`.rules`: the rules by theme (``cleanup``, ``fold``, ``elementwise``, ``epilogue``,
  ``conv``, ``pool``, ``linalg``, ``layout``, ``nchw``, ``regions``, ``norm``).
* :mod:`webnn_gpu.fusions`: structural fusions, each a named operator in a file of its own.

A rule fires only where it is sure the result does not change, and never changes the nodes it
receives. ``docs/compiler.md`` lists the rules and says how to add one; the differential
fuzzer ``tests/fuzz/`` compares random graphs against float64 NumPy and names the rule at
fault. Views (reshape) cost nothing at run time: their lowering aliases the input's buffer.
"""

from __future__ import annotations

from .driver import ORDER, PASSES, Rule, Stage, check_order, rules, run_passes

__all__ = ["ORDER", "PASSES", "Rule", "Stage", "check_order", "rules", "run_passes"]
