"""The base of a fused operator's typed attributes."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any


@dataclasses.dataclass(frozen=True)
class FusedAttrs(Mapping):
    """Typed, immutable attributes of a fused operator's node (``Node.attrs``).

    A frozen dataclass that also reads as a mapping of its fields (``attrs["fc1"]``,
    ``attrs.get("rows2", 0)``, ``dict(attrs)``), so code that handles every node's attributes
    alike (debug output, the kernel cache's keys, the compiler's snapshots) needs no case for
    it. A rule makes a changed copy with :func:`dataclasses.replace`.
    """

    def __getitem__(self, key: str) -> Any:
        if not isinstance(key, str) or key not in self._names():
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())

    @classmethod
    def _names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))  # type: ignore[arg-type]
