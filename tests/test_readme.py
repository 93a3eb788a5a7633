"""The README's usage snippet runs as written."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_usage_snippet_runs():
    text = README.read_text()
    section = text[text.index("## Using it"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    scope: dict = {}
    exec(compile(code, "README.md (Using it)", "exec"), scope)
    out = scope["ctx"].read_tensor(scope["t_out"])
    np.testing.assert_array_equal(out, np.full((2, 4), 1.5, np.float32))
