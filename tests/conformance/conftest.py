"""Fixtures and reporting of the WPT conformance replay.

* ``wpt_context``: one ``MLContext`` for the whole session, the ``ctx`` of
  ``tests/conftest.py`` (creating it fails the tests, never skips them, when
  there is no adapter).
* At the end of a run that replayed vectors, one line with the time spent per
  phase (graph building, ``compute()``, the tensor path); with ``WPT_REPORT=1``
  also a table per operator: passed, failed, expected failures, and the first
  failing test id with its message.
"""

from __future__ import annotations

import os
from collections import defaultdict

import pytest

from . import wpt

_RESULTS: dict[str, dict[str, list[tuple[str, str]]]] = defaultdict(lambda: defaultdict(list))
_NODE_MARK = "test_wpt.py::test_vector["


@pytest.fixture(scope="session")
def wpt_webnn():
    """The ``webnn_gpu`` module (imported here so the GPU-free tests do not need it)."""
    import webnn_gpu

    return webnn_gpu


@pytest.fixture(scope="session")
def wpt_context(ctx):
    """One ``MLContext`` shared by every vector: the session context of ``tests/conftest.py``."""
    return ctx


def _message(report) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        return crash.message
    return str(report.longrepr).strip().splitlines()[-1] if report.longrepr else ""


def pytest_runtest_logreport(report):
    """Collect per-operator outcomes of the vector tests for the summary."""
    if _NODE_MARK not in report.nodeid:
        return
    test_id = report.nodeid.split(_NODE_MARK, 1)[1][:-1]
    op = test_id.split("/", 1)[0]
    if report.when == "call" or report.outcome != "passed":
        if hasattr(report, "wasxfail"):
            outcome = "xpassed" if report.passed else "xfailed"
        elif report.skipped:
            outcome = "skipped"
        else:
            outcome = report.outcome
        if report.when != "teardown" or outcome != "passed":
            _RESULTS[op][outcome].append((test_id, _message(report) if outcome == "failed" else ""))


def pytest_terminal_summary(terminalreporter):
    """Print the time per phase and, with WPT_REPORT=1, the per-operator table."""
    if not _RESULTS:
        return
    write = terminalreporter.write_line
    totals: dict[str, float] = defaultdict(float)
    for phases in wpt.TIMINGS.values():
        for phase, seconds in phases.items():
            totals[phase] += seconds
    if totals:
        write(
            "WPT conformance time: "
            + ", ".join(f"{phase} {seconds:.1f}s" for phase, seconds in sorted(totals.items()))
        )
    if os.environ.get("WPT_REPORT") != "1":
        return
    write("")
    write(f"{'operator':24} {'pass':>5} {'fail':>5} {'xfail':>5}  time   first failure")
    for op in sorted(_RESULTS):
        outcomes = _RESULTS[op]
        seconds = sum(wpt.TIMINGS.get(op, {}).values())
        failed = outcomes.get("failed", [])
        first = f"{failed[0][0]}: {failed[0][1]}".replace("\n", " | ") if failed else ""
        write(
            f"{op:24} {len(outcomes.get('passed', [])):5d} {len(failed):5d} "
            f"{len(outcomes.get('xfailed', [])):5d} {seconds:5.1f}s  {first[:400]}"
        )
