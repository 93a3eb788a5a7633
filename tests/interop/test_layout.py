"""interop/ reaches the runtime only through the timeline's interface (webnn_gpu/_timeline.py)."""

from __future__ import annotations

import re
from pathlib import Path

INTEROP = Path(__file__).resolve().parents[2] / "interop"
#: Objects of the runtime whose private names interop must not read.
RUNTIME = r"(?:ctx|context|tensor|t|graph|g|tl|timeline|self\.tensor)"


def test_renting_and_recording_read_no_private_name_of_the_runtime():
    found = []
    for name in ("rental.py", "recording.py", "__init__.py"):
        text = (INTEROP / name).read_text()
        for m in re.finditer(rf"\b{RUNTIME}\._[a-z]\w*", text):
            found.append(f"{name}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}")
    assert not found, "\n".join(found)
