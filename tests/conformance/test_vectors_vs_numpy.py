"""Check the vectors themselves against an independent float64 NumPy evaluation (no GPU).

Every expected output must lie within its own WPT tolerance of the correctly
rounded float64 result (``reference.py``); otherwise the vector is wrong or
its tolerance cannot be met, and it belongs in ``tests/expected_failures.py``
with the NumPy computation that shows it.
"""

from __future__ import annotations

import pytest

from . import reference
from .test_wpt import EXPECTED_FAILURES, VECTORS

FILES = sorted({v.file_op for v in VECTORS})


@pytest.mark.parametrize("file_op", FILES)
def test_expected_outputs_agree_with_float64_numpy(file_op):
    wrong = {}
    for vector in VECTORS:
        if vector.file_op == file_op and vector.test_id not in EXPECTED_FAILURES:
            problems = reference.check_vector(vector)
            if problems:
                wrong[vector.test_id] = problems
    assert not wrong, "\n".join(f"{tid}: {' | '.join(p)}" for tid, p in wrong.items())


def test_reference_detects_a_wrong_vector():
    import copy

    vector = next(v for v in VECTORS if v.test_id == "relu/relu float32 4D tensor")
    graph = copy.deepcopy(vector.graph)
    data = graph["expectedOutputs"]["reluOutput"]["data"]
    data[3] = data[3] + 1e-3
    broken = type(vector)(vector.file_op, vector.name, graph)
    problems = reference.check_vector(broken)
    assert len(problems) == 1 and "1 of 24 elements" in problems[0]
