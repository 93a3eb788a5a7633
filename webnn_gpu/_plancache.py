"""Lowered models kept on disk: a warm ``webnn.load`` skips reading, converting and lowering.

With Mesa's shader cache warm, a model's load is the driver's front end making pipelines (on
the pipeline threads) and Python on the main thread: reading the flatbuffer, converting it to
the builder's graph, the compiler's rules, lowering every node (rendering its kernel). The last
part ends in a :class:`webnn_gpu.graph.BuildPlan` (steps with their WGSL, the constants'
data, the buffer aliases), which this module keeps per model in
``<cache dir>/plans/<key>.plan`` (:func:`webnn_gpu.models.cache_dir`; ``WEBNN_GPU_PLAN_CACHE_DIR``
names another folder) so that the next load of the same model builds from it: about 0.1 s less
of the main thread's CPU on the zoo's larger models (docs/performance.md, "Warm builds").

The key (:func:`key`) is a SHA-256 of everything the plan depends on: the model's bytes, the
loader and its options (``dtype``, ``input_shapes``; a load with ``custom_ops`` is never
cached), the engine's source (every ``.py`` file of the package and every shader template,
read once per process), the versions of Python, NumPy, wgpu-py (and so wgpu-native's naga),
Jinja2 and the TFLite reader's packages, the adapter (its info, the device's features and
limits, the kernel tuning profile, the subgroup lanes) and every ``WEBNN_GPU_*`` environment
variable (forced variants and switched-off rules change the plan) but the cache's own and
``WEBNN_GPU_FORCE_CONST_PACK`` and ``WEBNN_GPU_FORCE_ENCODE`` (read when the graph is made from
its plan, on a hit as on a miss). Any of these changed is a
miss, never a stale plan. The engine's source counts as its files are on disk when the process
first works out a key: a change inside a running process (a monkeypatched constant, a template
edited while it runs) is not covered.

A file holds a header (magic, its key, the body's length and CRC-32) and the body: the pickled
plan, with the constants' bytes out of band after it (:func:`dumps`), so that reading makes the
arrays on the file's bytes without copying them. The CRC-32 catches a damaged file (a flipped
bit, a torn write) as a SHA-256 would, in a third of its time (4 against 12 ms for 16.6 MB); it
is no defence against a file made to match, and needs none (a planted file that matches runs
no code, below). The file is read into an anonymous mapping populated in one call (Linux:
``MAP_POPULATE``), not into a fresh ``bytearray`` that takes a page fault per 4 KB. A file that does not match in every part,
cannot be read or does not unpickle into a plan is a miss (the model is built as without the
cache and the file written again), never an error.

The pickle names exactly four functions of this module and nothing else (no class, no builtin,
no other module, no dotted name): ``_make`` (a ``KernelStep``, ``CopyStep`` or ``BuildPlan``
from its fields, nothing else), ``_stub`` (a node from two strings), ``_value`` (a Value, or a
``linalg.TextureConstant`` with its ``texture_width``, from its fields) and ``_array`` (a constant's array of a plain numeric type on the file's bytes);
each checks its arguments, and pickle's BUILD cannot change them. Everything else in it is
pickle's plain data (strings, numbers, tuples, lists, dicts, sets); a plan holding anything
else is not written. So a file planted in a shared cache folder cannot run code when read.
Files are written atomically (a temporary file in the folder, then ``os.replace``: a reader
sees a whole file or none, and two processes writing the same key leave one whole file). The
folder is kept under ``WEBNN_GPU_PLAN_CACHE_MB`` megabytes (default 256, ``inf``: no bound):
after a write the least recently used plans go first (a hit touches its file); only a regular
file no larger than that is read (a FIFO or a huge sparse file of a plan's name is a miss).
``WEBNN_GPU_PLAN_CACHE=0`` turns the cache off (so does ``WEBNN_GPU_TEMPLATE_CACHE=0``, which
turns off every cache of derived data). The pickle is read from the user's own cache folder,
as the engine's other caches are.

Unpickling gives the plan's values new ids (:class:`webnn_gpu._ir.Value` ids are unique per
process); producers and steps' nodes are kept as stubs that carry the operator and its label
(what error messages name), not the graph they came from.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import io
import logging
import mmap
import os
import pickle
import stat
import sys
import threading
import uuid
import zlib
from pathlib import Path

from ._ir import Node, Value
from ._lower import CopyStep, KernelStep

log = logging.getLogger("webnn_gpu")

_MAGIC = b"WEBNN-GPU-PLAN-2\n"
_HEADER = len(_MAGIC) + 32 + 8 + 4  # magic, key (SHA-256), body length, body CRC-32
_ALIGN = 64  # file offset of each constant's bytes: a multiple of this

#: environment variables that change nothing of a plan: the cache's own switches, and the ones
#: read when a graph is made from its plan (how constants are uploaded, how commands are recorded)
_NOT_IN_KEY = ("WEBNN_GPU_PLAN_CACHE", "WEBNN_GPU_PLAN_CACHE_MB", "WEBNN_GPU_PLAN_CACHE_DIR",
               "WEBNN_GPU_FORCE_CONST_PACK", "WEBNN_GPU_FORCE_ENCODE")


def enabled() -> bool:
    """Whether plans are read and written (``WEBNN_GPU_PLAN_CACHE`` and
    ``WEBNN_GPU_TEMPLATE_CACHE`` not ``0``)."""
    return os.environ.get("WEBNN_GPU_PLAN_CACHE", "1") != "0" and os.environ.get("WEBNN_GPU_TEMPLATE_CACHE",
                                                                                  "1") != "0"


def max_bytes() -> int:
    """The folder's size bound in bytes (``WEBNN_GPU_PLAN_CACHE_MB``, default 256 MB; ``inf``:
    no bound; not a number: the default)."""
    try:
        mb = float(os.environ.get("WEBNN_GPU_PLAN_CACHE_MB", "256"))
    except ValueError:
        mb = 256.0
    if mb != mb:  # nan
        mb = 256.0
    if mb == float("inf"):
        return sys.maxsize
    return int(mb * (1 << 20)) if mb > 0 else 0


def folder() -> Path:
    """``WEBNN_GPU_PLAN_CACHE_DIR``, or else ``<cache dir>/plans`` (not created here)."""
    if os.environ.get("WEBNN_GPU_PLAN_CACHE_DIR"):
        return Path(os.environ["WEBNN_GPU_PLAN_CACHE_DIR"])
    from .models import cache_dir

    return cache_dir() / "plans"


@functools.lru_cache(maxsize=1)
def engine_hash() -> str:
    """A SHA-256 of the engine's source (every ``.py`` file of the package, every file under
    its ``shaders/``) and of the versions of what reading and lowering a model uses; worked
    out once per process (about 5 ms)."""
    import jinja2
    import numpy
    import wgpu

    from ._kernels import _shader_root

    h = hashlib.sha256()
    versions = [sys.version, numpy.__version__, wgpu.__version__, jinja2.__version__]
    for name in ("tflite", "flatbuffers"):  # the reader's packages, not imported for it (30-50 ms)
        versions.append(f"{name}={_installed(name)}")
    h.update(repr(versions).encode())
    for root, pattern in ((Path(__file__).parent, "*.py"), (_shader_root(), "*")):
        for f in sorted(root.rglob(pattern)):
            if f.is_file() and "__pycache__" not in f.parts:
                h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def _installed(name: str) -> str:
    """The version of the installed package ``name``, from its ``.dist-info`` folder's name
    beside it (importlib.metadata would cost 10-20 ms), or where it lies; "-" when absent. The
    same whether or not the package was imported."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.origin:
        return "-"
    site = Path(spec.origin).parent.parent
    try:
        found = sorted(n for n in os.listdir(site) if n.startswith(f"{name}-") and n.endswith(".dist-info"))
    except OSError:
        found = []
    return found[-1] if found else spec.origin


def _plain(x) -> bool:
    if isinstance(x, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in x.items())
    if isinstance(x, (list, tuple)):
        return all(_plain(v) for v in x)
    return x is None or isinstance(x, (str, bool, int, float))


def key(loader: str, data, options: dict, context) -> str | None:
    """The key of a model's plan: ``loader`` (``"tflite"``), the model's bytes ``data``, the
    load ``options`` and ``context`` (see the module docstring). None when the cache is off or
    an option is not plain data (then nothing is read or written)."""
    if not enabled() or not _plain(options):
        return None
    try:
        device = (
            sorted((str(k), str(v)) for k, v in dict(getattr(context, "adapter_info", None) or {}).items()),
            sorted(str(f) for f in getattr(context, "_features", ()) or ()),
            sorted((str(k), str(v)) for k, v in dict(getattr(context, "_limits", None) or {}).items()),
            str(getattr(context, "_tuning", "")), str(getattr(context, "_subgroup", "")),
        )
    except Exception:  # not a context of ours (a test double): no cache
        return None
    env = sorted((k, v) for k, v in os.environ.items() if k.startswith("WEBNN_GPU_") and k not in _NOT_IN_KEY)
    h = hashlib.sha256(repr((engine_hash(), loader, sorted(options.items()), device, env)).encode() + b"\0")
    h.update(data)
    return h.hexdigest()


# ---------------------------------------------------------------------------- pickling

def _stub(op: str, label: str) -> Node:
    """A node that names an operator and its label, and nothing of its graph."""
    if type(op) is not str or not (label is None or type(label) is str):
        raise pickle.UnpicklingError("a node stub takes two strings")
    return Node(op, [], [], {}, label)


@functools.lru_cache(maxsize=1)
def _texture_class() -> type:
    from .ops.linalg import TextureConstant

    return TextureConstant


@functools.lru_cache(maxsize=1)
def _classes() -> dict:
    """kind -> (class, the names of the fields a plan keeps)."""
    from .graph import BuildPlan

    return {c.__name__: (c, frozenset(f.name for f in dataclasses.fields(c)) - {"pipeline"})
            for c in (KernelStep, CopyStep, BuildPlan)}


def _make(kind: str, fields: dict):
    """A step or the plan (``kind``: ``"KernelStep"``, ``"CopyStep"`` or ``"BuildPlan"``) made
    from its dataclass fields (a step's pipeline left out); nothing else."""
    cls, names = _classes().get(kind, (None, frozenset())) if type(kind) is str else (None, frozenset())
    if cls is None or type(fields) is not dict or not names.issuperset(fields):
        raise pickle.UnpicklingError(f"not a part of a plan: {kind!r}")
    return cls(**fields)


_VALUE_FIELDS = frozenset({"data_type", "shape", "kind", "name", "data", "producer", "texture_width"})

_LOADING = threading.local()  # .ids: old value id -> the new Value, while a plan unpickles


def _value(fields: dict, old_id: int) -> Value:
    """A plan's Value (a new id) from its fields (no constant MLTensor); with a
    ``texture_width``, the constant uploaded as a texture (``linalg.TextureConstant``)."""
    if type(fields) is not dict or not _VALUE_FIELDS.issuperset(fields) or type(old_id) is not int:
        raise pickle.UnpicklingError("not a value of a plan")
    if "texture_width" in fields:
        from .ops.linalg import TextureConstant

        if type(fields["texture_width"]) is not int:
            raise pickle.UnpicklingError("not a value of a plan")
        v: Value = TextureConstant(**fields)
    else:
        v = Value(**fields)  # a new id
    _LOADING.ids[old_id] = v
    return v


def _array(buffer, dtype: str, shape: tuple):
    """A constant's array of a plain numeric ``dtype`` (a NumPy type string) and ``shape`` on
    ``buffer`` (out of band: the file's bytes), without a copy."""
    import numpy as np

    dt = np.dtype(dtype) if type(dtype) is str else None
    if (dt is None or dt.kind not in "biuf" or dt.fields is not None or dt.subdtype is not None
            or not isinstance(buffer, (bytes, bytearray, memoryview))
            or type(shape) is not tuple or not all(type(d) is int and d >= 0 for d in shape)):
        raise pickle.UnpicklingError("not a constant of a plan")
    return np.frombuffer(buffer, dtype=dt).reshape(shape)


class _Unstorable(Exception):
    """A plan holding something that cannot be kept (a constant MLTensor, the user's WGSL)."""


class _Pickler(pickle.Pickler):
    """Writes a plan with :class:`_Unpickler`'s four functions as its only globals."""

    def reducer_override(self, obj):
        import numpy as np

        t = type(obj)
        if t is Value or t is _texture_class():
            if obj.tensor is not None:
                raise _Unstorable("a constant MLTensor")
            p = obj.producer
            fields = dict(data_type=obj.data_type, shape=tuple(obj.shape), kind=obj.kind, name=obj.name,
                          data=obj.data, producer=None if p is None else Node(p.op, [], [], {}, p.label))
            if t is not Value:
                fields["texture_width"] = int(obj.texture_width)
            return _value, (fields, obj.id)
        if t is Node:
            if type(obj.op) is not str or not (obj.label is None or type(obj.label) is str):
                raise _Unstorable("a node's operator or label not a string")
            return _stub, (obj.op, obj.label)
        if t is np.ndarray:
            if obj.dtype.kind not in "biuf" or obj.dtype.fields is not None:
                raise _Unstorable(f"an array of {obj.dtype}")
            obj = np.ascontiguousarray(obj)
            return _array, (pickle.PickleBuffer(obj), obj.dtype.str, tuple(int(d) for d in obj.shape))
        if t is KernelStep or t is CopyStep:
            if getattr(obj, "user_code", False):
                raise _Unstorable("the user's own WGSL")
            fields = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj) if f.name != "pipeline"}
            return _make, (t.__name__, fields)
        if t is _classes()["BuildPlan"][0]:
            return _make, ("BuildPlan", {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)})
        if not (obj is None or t in _PLAIN or any(obj is f for f in (_make, _stub, _value, _array))):
            raise _Unstorable(f"a {t.__qualname__}")
        return NotImplemented


#: what a plan holds besides its steps, values, nodes and arrays (pickle's own opcodes)
_PLAIN = frozenset({str, bytes, bytearray, int, float, bool, tuple, list, dict, set, frozenset, pickle.PickleBuffer})


class _Global:
    """One of the functions a plan may name, frozen: pickle's BUILD cannot change it."""

    __slots__ = ("_fn",)

    def __init__(self, fn):
        object.__setattr__(self, "_fn", fn)

    def __call__(self, *args):
        return self._fn(*args)

    def __setattr__(self, name, value):
        raise pickle.UnpicklingError("a plan cannot change the engine")

    def __setstate__(self, state):
        raise pickle.UnpicklingError("a plan cannot change the engine")


#: the only globals a plan names: exact (module, name) pairs; anything else (another function,
#: a class, a builtin, a dotted name) fails to unpickle, a miss
_GLOBALS = {(__name__, f.__name__): _Global(f) for f in (_make, _stub, _value, _array)}


class _Unpickler(pickle.Unpickler):
    def find_class(self, module, name):
        try:
            return _GLOBALS[(module, name)]
        except (KeyError, TypeError):
            raise pickle.UnpicklingError(f"{module}.{name} is not part of a plan") from None


def dumps(plan, meta: dict) -> list:
    """The pickled ``(plan, meta)`` (Values without their producers' graphs, steps without
    pipelines) as the parts of a file's body, to be written one after another: a table, the
    pickle, then the constants' bytes out of band (pickle protocol 5), each at a multiple of
    64 bytes of the file, so that :func:`loads` makes the arrays on the file's bytes without
    copying them.

    Raises:
        _Unstorable: the plan holds a constant MLTensor or the user's own WGSL.
    """
    raws: list = []
    buf = io.BytesIO()
    _Pickler(buf, protocol=5, buffer_callback=lambda b: raws.append(b.raw())).dump((plan, meta))
    payload = buf.getbuffer()
    table = len(raws).to_bytes(4, "little") + payload.nbytes.to_bytes(8, "little")
    table += b"".join(r.nbytes.to_bytes(8, "little") for r in raws)
    parts = [table, payload]
    at = _HEADER + len(table) + payload.nbytes
    for r in raws:
        pad = -at % _ALIGN
        parts += [b"\0" * pad, r]
        at += pad + r.nbytes
    return parts


def loads(body):
    """``(plan, meta)`` from a file's body (:func:`dumps`'s parts, joined; a writable buffer
    gives writable arrays, which are views of it), with new value ids (the plan's dicts keyed
    by value id renumbered with them)."""
    body = memoryview(body)
    n = int.from_bytes(body[:4], "little")
    size = int.from_bytes(body[4:12], "little")
    if 12 + 8 * n + size > len(body):  # before the table is read: a planted count costs nothing
        raise ValueError("the table does not fit the file")
    lens = [int.from_bytes(body[12 + 8 * i:20 + 8 * i], "little") for i in range(n)]
    at = 12 + 8 * n
    payload = body[at:at + size]
    at += size
    buffers = []
    for length in lens:
        at += -(_HEADER + at) % _ALIGN
        if at + length > len(body):
            raise ValueError("a buffer lies past the end of the file")
        buffers.append(body[at:at + length])
        at += length
    if len(payload) != size or at != len(body):
        raise ValueError("the table does not fit the file")
    _LOADING.ids = {}
    try:
        plan, meta = _Unpickler(io.BytesIO(payload), buffers=buffers).load()
        ids = _LOADING.ids
    finally:
        _LOADING.ids = None
    plan.aliases = {ids[k].id: v for k, v in plan.aliases.items() if k in ids}
    plan.placed = {ids[k].id: v for k, v in plan.placed.items() if k in ids}
    return plan, meta


# ---------------------------------------------------------------------------- files

def _path(k: str) -> Path:
    return folder() / f"{k[:40]}.plan"


def checksum(parts) -> bytes:
    """The 4 bytes a plan file's header holds for its body ``parts`` (bytes-like, in order):
    their CRC-32, little-endian."""
    crc = 0
    for p in parts:
        crc = zlib.crc32(p, crc)
    return crc.to_bytes(4, "little")


def _buffer(size: int):
    """``size`` writable bytes to read a plan into: an anonymous private mapping with its pages
    made in one call (``MAP_POPULATE``, Linux), or a ``bytearray`` elsewhere. Its pages are
    the process's own (not the file's: a file changed later cannot reach the arrays on it)."""
    populate = getattr(mmap, "MAP_POPULATE", 0)
    if populate and size:
        try:
            return mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | populate)
        except (OSError, ValueError):
            pass
    return bytearray(size)


def load(k: str | None):
    """The ``(plan, meta)`` kept under key ``k``, or None (no file, or one that does not check
    out: see the module docstring). A hit marks the file as recently used."""
    if k is None:
        return None
    path = _path(k)
    try:  # not blocking on a FIFO of that name; nothing read unless a regular file within the bound
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or not _HEADER <= st.st_size <= max_bytes():
            log.debug("plan cache: %s ignored (not a regular file of a plan's size)", path)
            return None
        blob = _buffer(st.st_size)  # writable: the arrays are views of it
        with open(fd, "rb", closefd=False) as fh:
            got = fh.readinto(blob)
    except (OSError, MemoryError):
        return None
    finally:
        os.close(fd)
    try:
        view = memoryview(blob)
        head = bytes(view[:_HEADER])
        n = int.from_bytes(head[len(_MAGIC) + 32:len(_MAGIC) + 40], "little")
        body = view[_HEADER:]
        if (got != len(blob) or len(head) != _HEADER or not head.startswith(_MAGIC)
                or head[len(_MAGIC):len(_MAGIC) + 32] != bytes.fromhex(k)
                or n != len(body) or checksum([body]) != head[len(_MAGIC) + 40:]):
            raise ValueError("header or checksum does not match")
        plan, meta = loads(body)
        from .graph import BuildPlan

        if not isinstance(plan, BuildPlan) or not isinstance(meta, dict):
            raise ValueError("not a plan")
    except Exception as exc:  # a corrupt or foreign file: rebuilt (and written again)
        log.debug("plan cache: %s ignored (%s: %s)", path, type(exc).__name__, exc)
        return None
    try:
        os.utime(path)
    except OSError:
        pass
    return plan, meta


def store(k: str | None, plan, meta: dict) -> bool:
    """Keep ``(plan, meta)`` under key ``k`` (atomically), then bound the folder's size. Never
    raises: a plan not kept costs the next load its time, never an error.

    Returns:
        bool: whether the file was written (not when ``k`` is None, the plan cannot be kept, or
        the folder cannot be written).
    """
    if k is None:
        return False
    try:
        return _store(k, plan, meta)
    except Exception as exc:  # anything unforeseen: the load that lowered the plan still succeeds
        log.warning("plan cache: %s not kept (%s: %s)", _path(k).name, type(exc).__name__, exc)
        return False


def _store(k: str, plan, meta: dict) -> bool:
    try:
        parts = dumps(plan, meta)
    except Exception as exc:  # _Unstorable, or something of a plan pickle cannot keep
        log.debug("plan cache: not kept (%s: %s)", type(exc).__name__, exc)
        return False
    size = sum(memoryview(p).nbytes for p in parts)
    bound = max_bytes()
    if size + _HEADER > bound:
        return False
    path = _path(k)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as fh:
            fh.write(_MAGIC + bytes.fromhex(k) + size.to_bytes(8, "little") + checksum(parts))
            for p in parts:
                fh.write(p)
        os.replace(tmp, path)
    except OSError as exc:
        log.debug("plan cache: not written (%s)", exc)
        try:
            tmp.unlink()
        except OSError:
            pass
        return False
    prune(bound, keep=path)
    return True


def prune(bound: int, keep: Path | None = None) -> None:
    """Remove the least recently used plans (and temporary files older than an hour) until the
    folder holds at most ``bound`` bytes; ``keep`` stays."""
    import time

    files = []
    try:
        with os.scandir(folder()) as it:
            for e in it:
                try:
                    st = e.stat()
                except OSError:
                    continue
                if e.name.endswith(".tmp"):
                    if st.st_mtime < time.time() - 3600:  # left by a process that died
                        files.append((0.0, st.st_size, e.path))
                    continue
                if e.name.endswith(".plan"):
                    files.append((st.st_mtime, st.st_size, e.path))
    except OSError:
        return
    total = sum(s for t, s, _ in files if t > 0)
    for t, size, p in sorted(files):
        if t > 0 and total <= bound:
            break
        if keep is not None and p == str(keep):
            continue
        try:
            os.unlink(p)
        except OSError:
            continue
        if t > 0:
            total -= size
