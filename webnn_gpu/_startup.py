"""Faster first use of wgpu-py in a process (the fresh-process ``build()`` time).

wgpu-py calls ``ffi.new("WGPUSomeDescriptor *")`` and cffi parses each distinct type string
the first time it sees it. cffi's parser declares *every* typedef of the library before the
string (``typedef int X;`` for wgpu.h's ~430 typedefs) and runs pycparser over the lot: about
40 ms per type, 0.7 s for the 16 struct types a graph build first uses. Only the typedef names
that occur in the string influence how it parses (the list exists so that pycparser can tell
type names from identifiers), so :func:`speed_up_cffi_types` makes the parser declare just
those. The parsed types are the same objects cffi would build (tests/unit/test_startup.py).

Applied once, at import of :mod:`webnn_gpu`; if cffi's internals differ from what this
expects (another cffi version), nothing is changed.
"""

from __future__ import annotations

import logging
import re

log = logging.getLogger("webnn_gpu")

_WORD = re.compile(r"[A-Za-z_]\w*")


def speed_up_cffi_types(ffi) -> bool:
    """Make ``ffi``'s type-string parsing declare only the typedefs a string mentions.

    Returns:
        bool: True when the parser was wrapped (or already was), False when ``ffi`` does not
        have the internals this relies on (then it is left as it was).
    """
    parser = getattr(ffi, "_parser", None)
    parse = getattr(parser, "_parse", None)
    if parser is None or parse is None or not isinstance(getattr(parser, "_declarations", None), dict):
        return False
    if getattr(parse, "_webnn_gpu", False):
        return True

    def parse_declaring_used_typedefs(csource):
        everything = parser._declarations
        words = set(_WORD.findall(csource))
        parser._declarations = {k: v for k, v in everything.items()
                                if not k.startswith("typedef ") or k[8:] in words}
        try:
            return parse(csource)
        finally:
            parser._declarations = everything

    parse_declaring_used_typedefs._webnn_gpu = True  # type: ignore[attr-defined]
    parser._parse = parse_declaring_used_typedefs
    return True


def apply() -> None:
    """Apply the start-up speed-ups to wgpu-py's native backend (a no-op when unavailable)."""
    try:
        from wgpu.backends.wgpu_native._ffi import ffi
    except Exception as exc:  # another backend, or wgpu-native missing: nothing to speed up
        log.debug("startup: wgpu_native ffi not available (%s)", exc)
        return
    if not speed_up_cffi_types(ffi):
        log.debug("startup: cffi parser internals not as expected; type parsing left as is")
