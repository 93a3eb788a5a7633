"""Faster first use of wgpu-py in a process (the fresh-process ``build()`` time).

wgpu-py calls ``ffi.new("WGPUSomeDescriptor *")`` and cffi parses each distinct type string
the first time it sees it. cffi's parser declares *every* typedef of the library before the
string (``typedef int X;`` for wgpu.h's ~430 typedefs) and runs pycparser over the lot: about
40 ms per type, 0.7 s for the 16 struct types a graph build first uses. Only the typedef names
that occur in the string influence how it parses (the list exists so that pycparser can tell
type names from identifiers), so :func:`speed_up_cffi_types` makes the parser declare just
those. The parsed types are the same objects cffi would build (tests/unit/test_startup.py).

Before that, wgpu-py's import declares the whole header to cffi (``ffi.cdef`` of wgpu.h, about
110 KB): pycparser parses it in pure Python, about 0.11 s of CPU in every process that creates a
context. :func:`cached_cdef` keeps what that parse produces (the parser's declarations, a
pickle of cffi's own type objects) in ``<cache dir>/cffi-<hash>.pickle``, named by a hash of the
header, the cffi, pycparser and Python versions, and loads it instead (about 2 ms); the
declarations are the same (tests/unit/test_startup.py). ``WEBNN_GPU_TEMPLATE_CACHE=0`` turns it
off, as the other caches of derived data; an unreadable or unwritable cache costs the parse,
never an error.

Each type string still costs a pycparser run the first time a process asks for it (about
0.6 ms; a warm ``webnn.load`` asks for 25 of them, 16 ms of CPU). The syntax tree pycparser
makes of a type string depends only on the string and on which of its words are typedef names,
so :func:`speed_up_cffi_types` keeps the trees of plain type strings (typedef names, ``*``,
``[]``, function types; no ``struct``, ``union`` or ``enum``, no sizes in brackets) by the
string and those names, at most :data:`_TREES_MAX` of them, in memory and in
``<cache dir>/cffi-types-<hash>.pickle`` (named by the cffi, pycparser and Python versions);
cffi makes its types from the tree as before. The file is read with an unpickler that builds
pycparser's syntax-tree classes and nothing else, and each tree is checked to be a parse of its
string's shape; a file that does not load or check is ignored and written again.

Applied once, when a context is created; if cffi's internals differ from what this expects
(another cffi version), nothing is changed.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import logging
import os
import pickle
import re
import sys
import threading

log = logging.getLogger("webnn_gpu")

#: the attributes of cffi's ``Parser`` that a ``cdef`` fills (its ``_structnode2type`` maps
#: pycparser's syntax nodes of the parse, which are gone after it, and is not kept)
_PARSER_STATE = ("_declarations", "_included_declarations", "_anonymous_counter", "_int_constants",
                 "_options", "_inside_extern_python", "_partial_length", "_recomplete", "_uses_new_feature")
_CDEF_LOCK = threading.Lock()


def _known(parser, parsed: bool = True) -> bool:
    """Whether ``parser`` has the state this module keeps and no other (another cffi may add
    some): all of it once it has parsed, part of it before."""
    have, known = set(vars(parser)), {*_PARSER_STATE, "_structnode2type"}
    return have == known if parsed else have <= known

_WORD = re.compile(r"[A-Za-z_]\w*")
#: what cffi's ``Parser.parse_type_and_quals`` wraps a type string in; a plain type string
#: (names, pointers, arrays, function types) whose syntax tree is kept (:func:`_type_trees`)
#: (no sizes in brackets: ``uint8_t[4096]`` and the like would fill the table one size at a time)
_TYPE_SOURCE = re.compile(r"void __dummy\(\n(?![\s\S]*\b(?:struct|union|enum)\b)(?![\s\S]*\[\s*\d)"
                          r"[\w\s*\[\](),]*\n\);")
#: at most this many trees are kept (a process that asks for more parses the rest each time)
_TREES_MAX = 512
_TREES_LOCK = threading.Lock()
#: (type source, its typedef names) -> what the parser returned; None until read from disk
_TREES: dict | None = None
_TREES_DIRTY = False


def _trees_path():
    """``<cache dir>/cffi-types-<hash>.pickle`` (None: caching off)."""
    if os.environ.get("WEBNN_GPU_TEMPLATE_CACHE", "1") == "0":
        return None
    import cffi
    import pycparser

    from .models import cache_dir

    h = hashlib.sha256(f"{cffi.__version__}\0{pycparser.__version__}\0{sys.version}".encode())
    return cache_dir() / f"cffi-types-{h.hexdigest()[:24]}.pickle"


class _TreeUnpickler(pickle.Unpickler):
    """Builds pycparser's syntax-tree classes (and its source position) only."""

    def find_class(self, module, name):
        import pycparser.c_ast

        if module == "pycparser.c_ast" or (module in ("pycparser.c_parser", "pycparser.plyparser")
                                           and name == "Coord"):
            found = super().find_class(module, name)
            if isinstance(found, type) and (issubclass(found, pycparser.c_ast.Node) or name == "Coord"):
                return found
        raise pickle.UnpicklingError(f"{module}.{name} is not a syntax-tree class")


def _type_trees() -> dict:
    """The kept syntax trees of type strings (read from disk on first use)."""
    global _TREES
    with _TREES_LOCK:
        if _TREES is None:
            _TREES = {}
            path = _trees_path()
            try:
                if path is not None:
                    with open(path, "rb") as f:
                        got = _TreeUnpickler(f).load()
                    if not isinstance(got, dict) or len(got) > _TREES_MAX or not all(
                            isinstance(k, tuple) and len(k) == 2 and isinstance(k[0], str)
                            and _TYPE_SOURCE.fullmatch(k[0]) and isinstance(k[1], tuple)
                            and _is_type_tree(v, k[0]) for k, v in got.items()):
                        raise ValueError("not a table of type-string trees")
                    _TREES = got
            except Exception as exc:  # absent, stale or damaged: parsed again (and written)
                log.debug("startup: cffi type cache not read (%s: %s)", type(exc).__name__, exc)
        return _TREES


def _is_type_tree(tree, csource: str) -> bool:
    """Whether ``tree`` is what cffi's parser returns for the type string ``csource``: (a file
    whose last declaration is the function ``__dummy`` of one parameter, no macros, the source)."""
    from pycparser import c_ast

    if not (isinstance(tree, tuple) and len(tree) == 3 and tree[1] == {} and tree[2] == csource
            and isinstance(tree[0], c_ast.FileAST) and tree[0].ext):
        return False
    decl = tree[0].ext[-1]
    return (isinstance(decl, c_ast.Decl) and decl.name == "__dummy" and isinstance(decl.type, c_ast.FuncDecl)
            and isinstance(decl.type.args, c_ast.ParamList) and len(decl.type.args.params) == 1)


def _keep_type_tree(key: tuple, tree: tuple) -> None:
    """Keep ``tree`` (what the parser returned for a type string) under ``key``; the table is
    written to disk when the process exits (once, however many it kept)."""
    global _TREES_DIRTY
    with _TREES_LOCK:
        if _TREES is not None and len(_TREES) < _TREES_MAX:
            _TREES[key] = tree
            if not _TREES_DIRTY:
                _TREES_DIRTY = True
                atexit.register(_write_type_trees)


def _write_type_trees() -> None:
    """Write the kept type-string trees to disk (a temporary file renamed: a reader sees a
    whole table or none)."""
    global _TREES_DIRTY
    with _TREES_LOCK:
        path = _trees_path()
        if path is None or _TREES is None or not _TREES_DIRTY:
            return
        _TREES_DIRTY = False
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(tmp, "wb") as f:
                pickle.dump(_TREES, f, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, path)
        except Exception as exc:  # unwritable: parsed again by the next process
            log.debug("startup: cffi type cache not written (%s: %s)", type(exc).__name__, exc)
            with contextlib.suppress(OSError):
                tmp.unlink()


def speed_up_cffi_types(ffi) -> bool:
    """Make ``ffi``'s type-string parsing declare only the typedefs a string mentions, and keep
    the syntax trees of plain type strings (in memory and on disk: see the module's docstring).

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
        key = None
        if isinstance(csource, str) and _TYPE_SOURCE.fullmatch(csource):
            key = (csource, tuple(sorted(w for w in words if f"typedef {w}" in everything)))
            tree = _type_trees().get(key)
            if tree is not None:
                return tree
        parser._declarations = {k: v for k, v in everything.items()
                                if not k.startswith("typedef ") or k[8:] in words}
        try:
            tree = parse(csource)
        finally:
            parser._declarations = everything
        if key is not None and _is_type_tree(tree, csource):
            _keep_type_tree(key, tree)
        return tree

    parse_declaring_used_typedefs._webnn_gpu = True  # type: ignore[attr-defined]
    parser._parse = parse_declaring_used_typedefs
    return True


def _cdef_cache_path(csource: str, options: dict):
    """``<cache dir>/cffi-<hash>.pickle`` for a cdef of ``csource`` (None: caching off)."""
    if os.environ.get("WEBNN_GPU_TEMPLATE_CACHE", "1") == "0":
        return None
    import cffi
    import pycparser

    from .models import cache_dir

    h = hashlib.sha256(f"{cffi.__version__}\0{pycparser.__version__}\0{sys.version}\0{sorted(options.items())}\0"
                       .encode())
    h.update(csource.encode("utf-8", "surrogatepass"))
    return cache_dir() / f"cffi-{h.hexdigest()[:24]}.pickle"


def cached_cdef(cdef):
    """``cdef`` (cffi's ``FFI.cdef``) with its parse kept on disk: a declaration that was parsed
    before is loaded from the cache instead of parsed again (see the module's docstring).

    Only a plain ``cdef`` (no ``override``, nothing left to complete) of a parser that holds
    nothing yet is cached or loaded; any other call, or a cache entry that does not load, is
    ``cdef`` itself.
    """

    def cdef_from_cache(self, csource, override=False, **options):
        parser = getattr(self, "_parser", None)
        path = None
        try:
            if (isinstance(csource, str) and not override and parser is not None and _known(parser, False)
                    and not getattr(parser, "_declarations", True) and not getattr(self, "_cdefsources", True)):
                path = _cdef_cache_path(csource, options)
        except Exception as exc:  # pragma: no cover - a broken installation
            log.debug("startup: cdef cache off (%s)", exc)
        if path is None:
            return cdef(self, csource, override=override, **options)
        try:
            with open(path, "rb") as f:
                state = pickle.load(f)
            if not isinstance(state, dict) or set(state) != set(_PARSER_STATE) or state["_recomplete"]:
                raise ValueError("not a cdef state")
        except Exception as exc:  # absent, stale or damaged: parse (and keep the parse)
            log.debug("startup: cdef cache not read (%s: %s)", type(exc).__name__, exc)
        else:
            with self._lock:  # what FFI._cdef does besides the parse
                self._cdef_version = object()
                for name, value in state.items():
                    setattr(parser, name, value)
                self._cdefsources.append(csource)
            return None
        result = cdef(self, csource, override=override, **options)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        try:
            state = {name: getattr(parser, name) for name in _PARSER_STATE}
            if not state["_recomplete"] and _known(parser):
                path.parent.mkdir(parents=True, exist_ok=True)
                with open(tmp, "wb") as f:
                    pickle.dump(state, f, protocol=pickle.HIGHEST_PROTOCOL)
                os.replace(tmp, path)
        except Exception as exc:  # unwritable, or cffi's types not picklable: parsed each time
            log.debug("startup: cdef cache not written (%s: %s)", type(exc).__name__, exc)
            with contextlib.suppress(OSError):
                tmp.unlink()
        return result

    cdef_from_cache._webnn_gpu = True  # type: ignore[attr-defined]
    return cdef_from_cache


def _import_ffi():
    """wgpu-py's native ffi, imported with :func:`cached_cdef` in place of ``FFI.cdef`` (only
    while its module runs: other users of cffi see cffi as it is)."""
    if "wgpu.backends.wgpu_native._ffi" not in sys.modules:
        try:
            import cffi.api
        except Exception:  # pragma: no cover - no cffi: the import below reports it
            cffi = None
        fficls = getattr(getattr(cffi, "api", None), "FFI", None) if cffi is not None else None
        cdef = getattr(fficls, "cdef", None)
        if fficls is not None and cdef is not None and not getattr(cdef, "_webnn_gpu", False):
            with _CDEF_LOCK:
                fficls.cdef = cached_cdef(cdef)
                try:
                    from wgpu.backends.wgpu_native._ffi import ffi
                finally:
                    fficls.cdef = cdef
                return ffi
    from wgpu.backends.wgpu_native._ffi import ffi

    return ffi


def apply() -> None:
    """Apply the start-up speed-ups to wgpu-py's native backend (a no-op when unavailable)."""
    try:
        ffi = _import_ffi()
    except Exception as exc:  # another backend, or wgpu-native missing: nothing to speed up
        log.debug("startup: wgpu_native ffi not available (%s)", exc)
        return
    if not speed_up_cffi_types(ffi):
        log.debug("startup: cffi parser internals not as expected; type parsing left as is")
