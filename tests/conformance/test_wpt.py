"""Replay every WPT WebNN conformance vector through ``compute()`` and the tensor path.

One test per vector, id ``<op>/<test name>``. Each vector's graph is built once
and run both ways on one shared context. Entries of ``tests/expected_failures.py``
run as strict xfails; nothing is skipped (an unsupported data type fails).
Run ``WPT_REPORT=1 pytest tests/conformance -q`` for a per-operator table.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from . import wpt

_EXPECTED_FAILURES_FILE = Path(__file__).resolve().parents[1] / "expected_failures.py"


def load_expected_failures() -> dict[str, str]:
    """Read ``EXPECTED_FAILURES`` from ``tests/expected_failures.py`` (by path, no package needed)."""
    spec = importlib.util.spec_from_file_location("_webnn_expected_failures", _EXPECTED_FAILURES_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return dict(module.EXPECTED_FAILURES)


VECTORS = wpt.load_vectors()
EXPECTED_FAILURES = load_expected_failures()


def _param(vector: wpt.Vector):
    reason = EXPECTED_FAILURES.get(vector.test_id)
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(vector, id=vector.test_id, marks=marks)


@pytest.mark.parametrize("vector", [_param(v) for v in VECTORS])
def test_vector(vector, wpt_context, wpt_webnn):
    problems = wpt.replay(wpt_context, wpt_webnn, vector)
    assert not problems, "\n".join(problems)
