"""Known failures of the test suite, one entry per test with the reason.

``EXPECTED_FAILURES`` maps a test id to why it fails. The WPT conformance replay
(``tests/conformance/test_wpt.py``) uses ids ``<op>/<test name>`` (op is the
snake_case method name, e.g. ``conv_transpose2d/...``) and runs a listed test
as ``xfail(strict=True)``: if it passes, the run reports it, and the entry
must go.

Rules: nothing else is skipped. An entry that says a vector is wrong carries
the float64 NumPy computation that shows it, in the comment above it.
"""

from __future__ import annotations

EXPECTED_FAILURES: dict[str, str] = {
}
