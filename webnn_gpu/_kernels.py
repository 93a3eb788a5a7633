"""The kernel system: Jinja2 WGSL templates, their typed context, and the pipeline cache.

Templates live in ``shaders/<family>/<name>.wgsl`` and open with a contract header (the
context variables they need, the binding layout, the workgroup shape). They are rendered
with ``StrictUndefined``, so a missing variable fails when the graph is built, never as
broken WGSL. ``shaders/_lib/`` holds the shared macros: binding declarations with
load/store helpers for every data type (``io.wgsl``), index math (``index.wgsl``) and the
activation snippets used by standalone and fused kernels (``activations.wgsl``).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import logging
import math
import os
import re
import threading
import time
import weakref
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import jinja2
import numpy as np

from . import _dtypes
from ._env import DEBUG, DUMP_DIR
from .errors import NotSupportedError, OperationError, where

log = logging.getLogger("webnn_gpu")

#: Invocations per workgroup of the 1-D kernels.
WORKGROUP = 256


def _shader_root() -> Path:
    try:
        import webnn_gpu.shaders as pkg

        return Path(pkg.__file__).parent
    except ImportError:  # running from a source tree that is not installed
        return Path(__file__).resolve().parent.parent / "shaders"


class _DiskTemplateCache(jinja2.FileSystemBytecodeCache):
    """Jinja's on-disk bytecode cache, except that a cache it cannot write (a read-only or
    full disk, a directory replaced by a file) costs the compile time, never an error."""

    def dump_bytecode(self, bucket) -> None:
        try:
            super().dump_bytecode(bucket)
        except OSError as exc:
            log.debug("template cache: not written (%s)", exc)

    def load_bytecode(self, bucket) -> None:
        try:
            super().load_bytecode(bucket)
        except OSError as exc:
            log.debug("template cache: not read (%s)", exc)


def _bytecode_cache() -> jinja2.BytecodeCache | None:
    """Compiled templates kept on disk (``<cache dir>/jinja-<version>``): compiling the
    templates a graph uses takes ~0.3 s per process, loading them a few ms. Jinja checks each
    entry against the template's source, so edited templates recompile. None (no disk cache)
    when the directory cannot be created or ``WEBNN_GPU_TEMPLATE_CACHE=0``."""
    if os.environ.get("WEBNN_GPU_TEMPLATE_CACHE", "1") == "0":
        return None
    from .models import cache_dir

    path = cache_dir() / f"jinja-{jinja2.__version__}"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return _DiskTemplateCache(str(path))


_env = jinja2.Environment(
    loader=jinja2.FileSystemLoader(str(_shader_root())),
    bytecode_cache=_bytecode_cache(),
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
    autoescape=False,
)


@dataclass
class Binding:
    """One storage buffer of a kernel as templates see it."""

    name: str
    data_type: str
    output: bool = False

    @property
    def info(self) -> _dtypes.DTypeInfo:
        """The data type's storage/compute description."""
        return _dtypes.info(self.data_type)

    @property
    def packing(self) -> str:
        """"plain", "byte" or "wide"."""
        return self.info.packing

    @property
    def storage(self) -> str:
        """WGSL element type of the storage array."""
        return self.info.storage

    @property
    def compute(self) -> str:
        """WGSL scalar type values are computed in."""
        return self.info.compute

    @property
    def raw(self) -> str:
        """WGSL type of one element moved as-is (for data-movement kernels)."""
        return {"plain": self.info.storage, "byte": "u32", "wide": "vec2<u32>"}[self.packing]


@dataclass
class KernelContext:
    """What every template gets: bindings, element count, workgroup size, enables.

    Op-specific variables go in ``vars``; templates only format these values.
    """

    template: str
    bindings: list[Binding]
    n: int
    workgroup: int = WORKGROUP
    features: frozenset = frozenset()
    vars: dict = field(default_factory=dict)

    @property
    def enables(self) -> list[str]:
        """WGSL ``enable`` lines the bindings' data types need."""
        lines = []
        if any(b.data_type == "float16" for b in self.bindings) or self.vars.get("needs_f16"):
            lines.append("enable f16;")
        return lines

    def render(self) -> str:
        """The WGSL text of the kernel (memoized on the context's contents, see :func:`_freeze`)."""
        for b in self.bindings:
            feat = b.info.feature
            if feat and feat not in self.features and b.packing != "wide":
                raise NotSupportedError(f"data type {b.data_type} needs the adapter feature {feat!r}")
        try:
            key = (self.template, tuple((b.name, b.data_type, b.output) for b in self.bindings), self.n,
                   self.workgroup, tuple(sorted(self.features)), _freeze(self.vars))
        except _Unfrozen:
            key = None
        if key is not None:
            text = _RENDERED.get(key)
            if text is not None:
                _RENDERED.move_to_end(key)
                try:
                    _RENDERED_FILE.move_to_end(PipelineCache.key(text))
                except KeyError:  # not kept on disk, or dropped meanwhile
                    pass
                return text
        path = _rendered_path(key) if key is not None else None
        text = _read_text(path) if path is not None else None
        if text is None:
            tpl = _env.get_template(self.template)
            text = tpl.render(k=self, b={x.name: x for x in self.bindings}, int64=("shader-int64" in self.features),
                              **self.vars)
            if path is not None:
                _write_text(path, text)
        if key is not None:
            _RENDERED[key] = text
            if len(_RENDERED) > RENDER_CACHE_SIZE:
                _RENDERED.popitem(last=False)
        if path is not None:
            k = PipelineCache.key(text)
            _RENDERED_FILE[k] = path.name
            _RENDERED_FILE.move_to_end(k)
            if len(_RENDERED_FILE) > RENDER_CACHE_SIZE:
                _RENDERED_FILE.popitem(last=False)
        return text


#: rendered WGSL by template context (templates are pure functions of their context, so a
#: second build of the same graph renders nothing)
_RENDERED: OrderedDict = OrderedDict()
RENDER_CACHE_SIZE = 4096
_RENDERED_DIR: list = []  # [Path | None], computed once
#: pipeline key (:meth:`PipelineCache.key`) of a rendered text -> its file in :func:`_rendered_dir`
#: (what a model's pipeline list names, see :class:`ModelPrefetch`), the last
#: RENDER_CACHE_SIZE texts rendered or taken from :data:`_RENDERED`
_RENDERED_FILE: OrderedDict = OrderedDict()


def _rendered_dir():
    """``<cache dir>/wgsl-<hash of every template and the Jinja version>``: rendered WGSL kept
    across processes (rendering the unrolled tile and convolution kernels of a model costs
    ~0.2 s per process). Any edit of any template changes the folder, so a stale text is never
    read. None when ``WEBNN_GPU_TEMPLATE_CACHE=0`` or the folder cannot be made."""
    if not _RENDERED_DIR:
        path = None
        if os.environ.get("WEBNN_GPU_TEMPLATE_CACHE", "1") != "0":
            from .models import cache_dir

            h = hashlib.sha256(jinja2.__version__.encode())
            root = _shader_root()
            for f in sorted(root.rglob("*.wgsl")):
                h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes() + b"\0")
            path = cache_dir() / f"wgsl-{h.hexdigest()[:20]}"
            try:
                path.mkdir(parents=True, exist_ok=True)
            except OSError:
                path = None
        _RENDERED_DIR.append(path)
    return _RENDERED_DIR[0]


def _rendered_path(key):
    folder = _rendered_dir()
    return None if folder is None else folder / (hashlib.sha256(repr(key).encode()).hexdigest() + ".wgsl")


def _read_text(path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _write_text(path, text: str) -> None:
    """Write atomically (a concurrent reader sees the whole text or none); failures only log."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    except OSError as exc:
        log.debug("rendered WGSL cache: not written (%s)", exc)


class _Unfrozen(Exception):
    """A template variable with no value-based key: render without the cache."""


def _freeze(x):
    """A hashable key equal for template contexts that render the same text.

    Graph values count by data type and shape (templates never see their identity);
    dataclasses and namespaces by their fields; arrays by dtype, shape and bytes.
    """
    if x is None or isinstance(x, (str, bool, int, float)):
        return (type(x).__name__, x)
    if isinstance(x, (list, tuple)):
        return tuple(_freeze(i) for i in x)
    if isinstance(x, dict):
        return ("d",) + tuple(sorted((str(k), _freeze(v)) for k, v in x.items()))
    if isinstance(x, (set, frozenset)):
        return ("s",) + tuple(sorted((_freeze(i) for i in x), key=repr))
    if all(hasattr(x, a) for a in ("data_type", "shape", "kind", "producer")):  # a graph Value
        return ("V", x.data_type, tuple(x.shape))
    if isinstance(x, np.ndarray):
        return ("A", str(x.dtype), x.shape, x.tobytes())
    if isinstance(x, np.generic):
        return (type(x).__name__, x.item())
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return (type(x).__name__,) + tuple((f.name, _freeze(getattr(x, f.name))) for f in dataclasses.fields(x))
    if isinstance(x, SimpleNamespace):
        return ("ns", _freeze(vars(x)))
    raise _Unfrozen(type(x).__name__)


def render(template: str, *, folders=(), **variables) -> str:
    """Render a template with plain variables (for shaders outside the operator kernels).

    The engine's environment renders it (``StrictUndefined``, the on-disk template cache),
    so a missing variable raises instead of leaving broken WGSL.

    Arguments:
        template (str): the template's path under one of ``folders``, or under ``shaders/``.
        folders (str | os.PathLike | Sequence): folders searched, in order, before
            ``shaders/``: templates that ship beside the code that renders them (the demo's
            ``webnn_gpu/demo/shaders``). They may include each other and ``shaders/_lib``.
        **variables: the context variables the template's contract header lists.

    Returns:
        str: the WGSL text.

    Raises:
        jinja2.TemplateNotFound: no such template.
        jinja2.UndefinedError: a variable of the contract is missing.
    """
    if isinstance(folders, (str, os.PathLike)):
        folders = (folders,)
    env = _environment(tuple(str(f) for f in folders)) if folders else _env
    return env.get_template(template).render(**variables)


@functools.lru_cache(maxsize=None)
def _environment(folders: tuple[str, ...]) -> jinja2.Environment:
    """The engine's environment, finding templates in ``folders`` before ``shaders/``."""
    engine = jinja2.FileSystemLoader(str(_shader_root()))
    return _env.overlay(loader=jinja2.ChoiceLoader([jinja2.FileSystemLoader(list(folders)), engine]))


def workgroups(n_groups: int, limits: dict, what: str = "kernel") -> tuple[int, int, int]:
    """Fold ``n_groups`` workgroups into (x, y, 1) within maxComputeWorkgroupsPerDimension.

    Kernels recover the linear workgroup index as ``wid.x + wid.y * num_workgroups.x``
    and must guard with ``if (idx >= N) { return; }``.

    Raises:
        NotSupportedError: more work than x*y can address.
    """
    lim = int(limits.get("max-compute-workgroups-per-dimension", 65535))
    if n_groups <= lim:
        return (max(1, n_groups), 1, 1)
    y = math.ceil(n_groups / lim)
    if y > lim:
        raise NotSupportedError(
            f"{what}: {n_groups} workgroups exceed maxComputeWorkgroupsPerDimension**2 = {lim * lim}"
        )
    x = math.ceil(n_groups / y)
    return (x, y, 1)


#: Threads that compile a graph's new pipelines (``WEBNN_GPU_PIPELINE_THREADS``; 1 = in turn).
PIPELINE_THREADS = max(1, int(os.environ.get("WEBNN_GPU_PIPELINE_THREADS") or min(4, os.cpu_count() or 1)))

_POOL: dict = {}  # process id -> the ThreadPoolExecutor that makes pipelines, made on first use
_POOL_LOCK = threading.Lock()


def _pipeline_pool() -> ThreadPoolExecutor:
    """The :data:`PIPELINE_THREADS` threads that make pipelines for every cache of the process
    (one pool: concurrent builds share the cores instead of each starting threads of its own).
    A process forked from one that had made the pool gets a new one (the threads were not
    forked with it)."""
    pid = os.getpid()
    with _POOL_LOCK:
        pool = _POOL.get(pid)
        if pool is None:
            _POOL.clear()
            pool = _POOL[pid] = ThreadPoolExecutor(PIPELINE_THREADS, thread_name_prefix="webnn-gpu-pipelines")
        return pool


def _warm_up_encoder(device, jobs: list):
    """A command encoder running each of ``jobs`` ((pipeline, bind group, label, template)
    each) once, one workgroup each, in one compute pass (not finished: callers may add to it)."""
    enc = device.create_command_encoder(label="warm-up")
    cpass = enc.begin_compute_pass(label="warm-up")
    for pipeline, group, _, _ in jobs:
        cpass.set_pipeline(pipeline)
        cpass.set_bind_group(0, group)
        cpass.dispatch_workgroups(1, 1, 1)
    cpass.end()
    return enc


@functools.lru_cache(maxsize=RENDER_CACHE_SIZE)
def _text_key(wgsl: str, entry: str) -> str:
    """:meth:`PipelineCache.key`, memoized (a text's hash is kept in the str object, so a
    lookup costs an identity check, not a second SHA-1 of tens of KB)."""
    return hashlib.sha1(f"{entry}\0{wgsl}".encode()).hexdigest()


class PipelineCache:
    """Compute pipelines keyed by a hash of their WGSL text and entry point (LRU).

    One per device (:meth:`of`): identical shader text shares one pipeline across every graph
    of every context on that device, so a second model, or a second context on the caller's
    device, compiles only the kernels it does not share. Safe to use from several threads.
    """

    def __init__(self, device, capacity: int = 4096):
        self._device = weakref.ref(device)  # the device's cache must not keep it alive (see of)
        self.capacity = capacity
        self._items: OrderedDict[str, object] = OrderedDict()
        #: key -> Future of a pipeline :meth:`prefetch` started and no call has taken yet
        self._pending: dict = {}
        self._lock = threading.RLock()
        self.hits = 0
        self.misses = 0
        #: ids of pipelines that have run once (lazy drivers such as lavapipe compile the
        #: machine code at a pipeline's first dispatch; ``MLGraph`` warms new ones at build)
        self.warm: set[int] = set()
        #: time each new pipeline's first run (its driver compile on lavapipe) in a submission
        #: of its own (``WEBNN_GPU_DEBUG=2`` does too); ``webnn-gpu profile --compile-times``
        self.timed = False
        #: id of a pipeline -> seconds of its first run, for pipelines first run while timed
        self.compile_seconds: dict[int, float] = {}
        #: the same in CPU seconds of the process (the driver's compile thread; the caller
        #: waits): steadier than wall time on a loaded machine
        self.compile_cpu_seconds: dict[int, float] = {}
        #: key (:meth:`key`) -> CPU seconds of the thread that made the pipeline (naga's and the
        #: driver's front end: what a build with Mesa's shader cache warm spends per pipeline)
        self.create_cpu_seconds: dict[str, float] = {}

    @classmethod
    def of(cls, device) -> PipelineCache:
        """The cache of ``device`` (made on first use; it goes with the device).

        Arguments:
            device (wgpu.GPUDevice): the device the pipelines are made on.

        Returns:
            PipelineCache: the same object for every call with this device.
        """
        with _CACHES_LOCK:
            cache = _CACHES.get(device)
            if cache is None:
                cache = _CACHES[device] = cls(device)
            return cache

    @property
    def device(self):
        """The device the pipelines are made on."""
        device = self._device()
        if device is None:
            raise OperationError("pipeline cache: its device has been released")
        return device

    @staticmethod
    def key(wgsl: str, entry: str = "main") -> str:
        """The cache key of a shader text and entry point (a SHA-1 of both, worked out once per
        text: rendering, prefetching, the build and its pipeline list all ask for it)."""
        return _text_key(wgsl, entry)

    def get(self, wgsl: str, *, template: str = "", label: str = "", entry: str = "main"):
        """The pipeline of ``wgsl``, compiling it on a miss.

        Raises:
            OperationError: the shader or pipeline failed to compile, with the template name,
                the op label, a WGSL excerpt and the wgpu message.
        """
        k = self.key(wgsl, entry)
        with self._lock:
            pipe = self._items.get(k)
            if pipe is not None:
                self.hits += 1
                self._items.move_to_end(k)
                return pipe
            started = self._pending.pop(k, None) if entry == "main" else None
        if started is not None:  # being made by prefetch: take it (its error, if it failed)
            pipe = started.result()
        else:
            pipe = self._compile(k, wgsl, template, label, entry)
        with self._lock:
            have = self._items.get(k)  # another thread made it meanwhile: keep one
            if have is not None:
                self.hits += 1
                return have
            self.misses += 1
            self._insert(k, pipe)
        return pipe

    def has(self, key: str) -> bool:
        """Whether the pipeline of ``key`` (:meth:`key`) is in the cache."""
        with self._lock:
            return key in self._items

    def prefetch(self, requests: list) -> list[str]:
        """Start making the pipelines of ``requests`` ((wgsl, template, label) each) that the
        cache neither has nor is making, on the pipeline threads, and return at once.

        A later :meth:`get_many` or :meth:`get` of the same text takes the pipeline made here
        (with its error, if it failed) instead of making it again; until then it is not in the
        cache. ``build()`` starts each kernel's pipeline as soon as its node is lowered, and
        ``webnn.load`` those of the model's last build before it reads the model
        (:class:`ModelPrefetch`), so that the front end (naga and the driver's) runs on the
        other cores while Python converts and lowers. Nothing when :data:`PIPELINE_THREADS`
        is 1.

        Arguments:
            requests (list): (wgsl, template, label) of each pipeline.

        Returns:
            list[str]: the keys started (for :meth:`discard`).
        """
        if PIPELINE_THREADS < 2 or not requests:
            return []
        started = []
        pool = _pipeline_pool()
        with self._lock:
            for wgsl, template, label in requests:
                k = self.key(wgsl)
                if k in self._items or k in self._pending:
                    continue
                self._pending[k] = pool.submit(self._compile, k, wgsl, template, label, "main")
                started.append(k)
        return started

    def discard(self, keys) -> None:
        """Drop what :meth:`prefetch` started for ``keys`` and no call has taken (the pipelines
        of a build that failed, or of a model's stale pipeline list): nothing of it is kept,
        and what has not started yet does not run."""
        with self._lock:
            for k in keys:
                f = self._pending.pop(k, None)
                if f is not None:
                    f.cancel()

    def get_many(self, requests: list, on_ready=None) -> list:
        """The pipelines of ``requests`` ((wgsl, template, label) each), compiling the misses
        on :data:`PIPELINE_THREADS` threads: wgpu-native and the driver compile independent
        pipelines in parallel (2 threads halve a model's build on 2 cores). A miss that
        :meth:`prefetch` has started is taken from there, not made again.

        ``on_ready(key, pipeline)`` is called in the calling thread for each pipeline this call
        makes, as soon as it is made, while the others are still being made (``build()``
        submits its warm-up run there, so the driver's compile overlaps their creation).

        Raises:
            OperationError: as :meth:`get` (the first failing request's); or what ``on_ready``
                raises. Nothing of a failed call is kept.
        """
        keys = [self.key(w) for w, _, _ in requests]
        todo: dict = {}
        futures: dict = {}  # Future -> key: those prefetch started, taken here, then todo's
        with self._lock:
            for k, req in zip(keys, requests):
                if k in self._items or k in todo:
                    continue
                started = self._pending.pop(k, None)
                if started is not None:
                    futures[started] = k
                    todo[k] = None
                else:
                    todo[k] = req
            todo = {k: req for k, req in todo.items() if req is not None}
        threads = min(PIPELINE_THREADS, len(todo))
        made: dict = {}
        if threads > 1 or futures:
            # longest shaders first (the driver's time grows with the unrolled code), so that
            # no large one starts last while the other threads are idle
            pool = _pipeline_pool()
            for k in sorted(todo, key=lambda k: -len(todo[k][0])):
                futures[pool.submit(self._compile, k, todo[k][0], todo[k][1], todo[k][2], "main")] = k
            try:
                for f in as_completed(futures):
                    made[futures[f]] = f.result()
                    if on_ready is not None:
                        on_ready(futures[f], made[futures[f]])
            except BaseException:
                for f in futures:
                    f.cancel()
                raise
            with self._lock:
                for k, pipe in list(made.items()):
                    if k in self._items:  # another thread made it meanwhile: keep one
                        del made[k]
                        continue
                    self.misses += 1
                    self._insert(k, pipe)
        elif on_ready is not None:
            fresh: dict = {}
            for k, req in todo.items():
                with self._lock:
                    known = k in self._items
                pipe = self.get(req[0], template=req[1], label=req[2])
                if not known:
                    fresh[k] = pipe
                    on_ready(k, pipe)
            made = fresh  # each one's first request below is its miss (counted by get), not a hit
        # the first request of a pipeline made above is its miss; the rest count as hits
        return [made.pop(k) if k in made else self.get(req[0], template=req[1], label=req[2])
                for k, req in zip(keys, requests)]

    def submit_once(self, device, jobs: list) -> None:
        """Submit each of ``jobs`` ((pipeline, bind group, label, template) each) to run once,
        one workgroup each, without waiting: the driver compiles them on its queue thread while
        the caller goes on. :meth:`run_once` (given them as ``submitted``) waits and marks them
        warm."""
        if jobs:
            device.queue.submit([_warm_up_encoder(device, jobs).finish()])

    def run_once(self, device, jobs: list, wait, submitted: tuple = ()) -> None:
        """Run each of ``jobs`` ((pipeline, bind group, label, template) each) once, one
        workgroup each, then mark the pipelines warm. Lazy drivers (lavapipe) compile a
        pipeline's machine code here, in the submission, one pipeline after another.
        ``submitted``: pipelines already sent by :meth:`submit_once` on this queue, waited for
        too and then marked warm.

        ``wait(fence)`` waits for the submission that clears the 4-byte MAP_READ buffer
        ``fence`` and maps it. With :attr:`timed` or ``WEBNN_GPU_DEBUG=2`` (or more) every
        job runs in a submission of its own and the time each takes (its compile) is kept in
        :attr:`compile_seconds`; ``WEBNN_GPU_DEBUG=2`` logs them, slowest first.
        """
        if not jobs and not submitted:
            return
        import wgpu

        from . import _env

        timed = bool(jobs) and (self.timed or _env.DEBUG >= 2)
        fence = device.create_buffer(size=4, usage=wgpu.BufferUsage.MAP_READ | wgpu.BufferUsage.COPY_DST)
        times, cpu = [], []
        try:
            for batch in ([j] for j in jobs) if timed else [jobs]:  # [[]]: wait for what was submitted
                t0, c0 = time.perf_counter(), time.process_time()
                enc = _warm_up_encoder(device, batch)
                enc.clear_buffer(fence)
                device.queue.submit([enc.finish()])
                wait(fence)  # done when the submission is (never hangs)
                fence.unmap()
                times.append(time.perf_counter() - t0)
                cpu.append(time.process_time() - c0)
        finally:
            fence.destroy()
        with self._lock:
            self.warm.update(id(j[0]) for j in jobs)
            self.warm.update(id(p) for p in submitted)
        if timed:
            self.compile_seconds.update((id(j[0]), t) for t, j in zip(times, jobs))
            self.compile_cpu_seconds.update((id(j[0]), t) for t, j in zip(cpu, jobs))
        if timed and _env.DEBUG >= 2:
            rows = sorted(zip(times, jobs), key=lambda r: -r[0])
            log.debug("pipeline compile (first run) of %d pipelines: %.2f s; slowest first:\n%s", len(jobs),
                      sum(times), "\n".join(f"  {t:7.3f} s  {j[3]:<28} {j[2]}" for t, j in rows))

    def _compile(self, k: str, wgsl: str, template: str, label: str, entry: str):
        if DEBUG >= 3 and DUMP_DIR:
            Path(DUMP_DIR).mkdir(parents=True, exist_ok=True)
            (Path(DUMP_DIR) / f"{k[:12]}_{template.replace('/', '_')}").write_text(wgsl)
        try:
            t0 = time.thread_time()
            module = self.device.create_shader_module(code=wgsl, label=f"{label or template}")
            pipe = self.device.create_compute_pipeline(
                layout="auto", compute={"module": module, "entry_point": entry}, label=label or template
            )
            self.create_cpu_seconds[k] = time.thread_time() - t0
            return pipe
        except Exception as exc:  # wgpu raises GPUValidationError and friends
            raise OperationError(
                f"{label or template}: our kernel failed to compile (template {template!r}): {exc}\n"
                f"--- WGSL excerpt ---\n{_excerpt(wgsl, str(exc))}"
            ) from exc

    def _insert(self, k: str, pipe) -> None:
        self._items[k] = pipe
        if len(self._items) > self.capacity:
            old_key, old_pipe = self._items.popitem(last=False)
            self.create_cpu_seconds.pop(old_key, None)
            old = id(old_pipe)
            self.warm.discard(old)
            self.compile_seconds.pop(old, None)
            self.compile_cpu_seconds.pop(old, None)

    def __len__(self) -> int:
        return len(self._items)


class ModelPrefetch:
    """The pipelines of a model's last build, listed on disk per model, so that the next
    ``webnn.load`` of the same model starts making them before it reads the model.

    With Mesa's shader cache warm a build is mostly making pipelines (naga's and the driver's
    front end, on :data:`PIPELINE_THREADS` threads) and Python on one core: reading the file,
    converting it, the compiler's rules, lowering. Started from the list, the pipelines are
    made on the other cores during that Python; ``build()`` takes them
    (:meth:`PipelineCache.prefetch`). The list is kept beside the rendered WGSL
    (``<cache dir>/wgsl-<hash>/models/<model key>.json``: an edited template starts a new
    one), names each text's file there and its pipeline key, and is checked text by text
    against those keys. The model key is a hash of the model file's path, size, modification
    time and inode (the file is not read here: reading and hashing pose_landmark_full's 6 MB took
    8 ms of the main thread, before any pipeline started), or of the model's bytes when it is
    given as bytes, with the load options and the adapter (device, driver, features). A list that no longer fits (the code lowers the
    model to other kernels) costs the making of the pipelines it names that the build does
    not use, never a result: the build uses only what it lowers to, what it does not take is
    dropped, and the list is written again. Nothing is read or written with
    ``WEBNN_GPU_TEMPLATE_CACHE=0``, when the options are not plain data (``custom_ops``), or
    for a source that is not a file or bytes; an unreadable or unwritable list costs time,
    never an error.
    """

    def __init__(self, cache: PipelineCache | None, path: Path | None):
        self._cache = cache
        self._path = path
        #: the list as read: [key, file, template, label] per pipeline
        self.listed: list = []
        #: keys of the pipelines started from the list
        self.started: list[str] = []
        #: key -> file of each listed text that was read and matched its key
        self.verified: dict[str, str] = {}

    @staticmethod
    def model_key(data: bytes | bytearray | memoryview, options: dict, context) -> str | None:
        """The hash naming a model's list: ``data`` (the model's bytes, or its file's identity),
        the load options and the context's adapter and features (None when an option is not
        plain data)."""
        def plain(x):
            if isinstance(x, dict):
                return all(isinstance(k, str) and plain(v) for k, v in x.items())
            if isinstance(x, (list, tuple)):
                return all(plain(v) for v in x)
            return x is None or isinstance(x, (str, bool, int, float))

        if not plain(options):
            return None
        h = hashlib.sha1(data)
        info = getattr(context, "adapter_info", None) or {}
        extra = (sorted(options.items()), sorted((str(k), str(v)) for k, v in dict(info).items()),
                 sorted(getattr(context, "_features", ()) or ()))
        h.update(b"\0" + repr(extra).encode())
        return h.hexdigest()[:24]

    @classmethod
    def start(cls, context, source, options: dict) -> ModelPrefetch:
        """Read the list of the model ``source`` (a path or bytes) loaded with ``options`` on
        ``context`` and start making its pipelines (:meth:`PipelineCache.prefetch`).

        Returns:
            ModelPrefetch: call :meth:`finish` with the loaded model (or None) when the load
            is over. It does nothing when there is no list or no list can be kept.
        """
        cache = getattr(context, "_pipelines", None)
        folder = _rendered_dir()
        if not isinstance(cache, PipelineCache) or folder is None or PIPELINE_THREADS < 2:
            return cls(None, None)
        try:
            if isinstance(source, (bytes, bytearray, memoryview)):
                data = source
            elif isinstance(source, (str, os.PathLike)):  # named by where and when, not read twice
                st = os.stat(source)
                data = f"{os.path.realpath(source)}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ino}".encode()
            else:
                return cls(None, None)
        except OSError:  # the loader reports it
            return cls(None, None)
        key = cls.model_key(data, options, context)
        if key is None:
            return cls(None, None)
        path = folder / "models" / f"{key}.json"
        self = cls(cache, path)
        try:
            import json

            self.listed = [e for e in json.loads(path.read_text())["pipelines"]
                           if isinstance(e, list) and len(e) == 4 and all(isinstance(x, str) for x in e)]
        except (OSError, ValueError, KeyError, TypeError):
            self.listed = []
        for key_, name, template, label in self.listed:  # each started as soon as its text is read
            text = _read_text(folder / name) if "/" not in name and name.endswith(".wgsl") else None
            if text is not None and PipelineCache.key(text) == key_:
                self.verified[key_] = name
                self.started += cache.prefetch([(text, template, label)])
        return self

    def finish(self, loaded) -> None:
        """Drop what was started and the build did not take; with ``loaded`` (the loaded
        model: its ``graph``), write the model's list if it changed."""
        if self._cache is None:
            return
        self._cache.discard(self.started)
        graph = getattr(loaded, "graph", None)
        steps = getattr(graph, "_steps", None)
        if steps is None or self._path is None:
            return
        texts: dict = {}
        for step in steps:
            wgsl = getattr(step, "wgsl", None)
            if wgsl is not None and not getattr(step, "user_code", False):
                texts.setdefault(PipelineCache.key(wgsl), step)
        # a text this process did not render (a plan from webnn_gpu._plancache) keeps the file
        # the list named, checked against its key when it was read, or is written to one
        files = dict(self.verified)
        files.update((k, _RENDERED_FILE[k]) for k in texts if k in _RENDERED_FILE)
        folder = _rendered_dir()
        for k, step in texts.items():
            if k not in files and folder is not None:
                files[k] = f"text-{k}.wgsl"
                _write_text(folder / files[k], step.wgsl)
        entries = [[k, files[k], step.template, step.label]
                   for k, step in sorted(texts.items(), key=lambda kv: -len(kv[1].wgsl)) if k in files]
        if entries == self.listed:
            return
        import json

        try:
            self._path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            log.debug("model pipeline list: not written (%s)", exc)
            return
        _write_text(self._path, json.dumps({"pipelines": entries}))


#: Compile helpers (:class:`CompileHelpers`, :data:`COMPILE_DEVICES`) start where a graph's new
#: pipelines of at least 4 KB (``graph.EARLY_WARM_UP_BYTES``) have at least this much WGSL
#: together: less compiles in about a second on the graph's own queue.
COMPILE_HELP_MIN_BYTES = 32768

#: Largest scratch binding of a helper's runs (bytes): one workgroup of a kernel reads and
#: writes little, and wgpu clamps what lies past a binding, so larger values are bound in part.
HELPER_SCRATCH_BYTES = 4 << 20

#: LLVM's compile time on llvmpipe per KB of WGSL, by template (ms of CPU; Mesa 22.3, each
#: pipeline of pose_landmark_full, selfie_segmentation and hand_landmark_full alone,
#: ``benchmarks/build_time.py --per-pipeline``, 2026-11-25: depthwise + projection 14-39 ms per
#: KB over 23 pipelines, tile 8-53 over 38, ``block`` 31-73 over 3, depthwise 13-20 over 14; the
#: tile template's text has since shrunk for the same code, its rows' stores in a helper
#: function: pose_landmark_full's 13 tile pipelines, 218 KB instead of 371, 5.8 s, 27 ms per
#: KB; the depthwise + projection strips 62 on face_landmark's, everything in its text
#: unrolled; with the tile's stores in its row loop (``linalg.TILE_EP_LOOP``) its 15 pipelines
#: 4.6 s for 243 KB, 19 ms per KB): the order in which a cold build's compile queues take a graph's new pipelines
#: (longest first, so that the last one to start is short). Only the order depends on it,
#: never a result.
COMPILE_MS_PER_KB = {"conv/depthwise_project.wgsl": 28.0, "conv/block.wgsl": 55.0, "conv/depthwise.wgsl": 17.0,
                     "matmul/tile.wgsl": 19.0, "conv/depthwise_project_strip.wgsl": 60.0}

_FALSE = ("", "0", "false", "no", "n", "off")


def compile_cost(template: str, wgsl_bytes: int) -> float:
    """The predicted LLVM compile time (seconds) of a pipeline on llvmpipe, from its template
    and the length of its WGSL (:data:`COMPILE_MS_PER_KB`; 17 ms per KB for other templates)."""
    return COMPILE_MS_PER_KB.get(template, 17.0) * wgsl_bytes / 1024 / 1000


@dataclass
class CompileJob:
    """A new pipeline of a graph that a compile queue runs once: its key
    (:meth:`PipelineCache.key`), WGSL, template, label, the bytes bound at each binding and,
    per binding, the contents a helper writes into its scratch buffer first (the constant bound
    there in the graph; None: zeros).

    llvmpipe does not compile a kernel for a run whose uniform buffers hold nothing but zeros
    (it ran in 0.1 s with 0.1 s of CPU where the graph's own first run compiled for 2.9 s, and
    the graph's device then compiled it again), so a helper binds what the graph binds.
    """

    key: str
    wgsl: str
    template: str
    label: str
    sizes: list
    data: list = field(default_factory=list)

    @property
    def cost(self) -> float:
        """Predicted compile seconds (:func:`compile_cost`)."""
        return compile_cost(self.template, len(self.wgsl))


class CompileQueue:
    """The new pipelines of one build, longest predicted compile first, taken one at a time by
    the compile queues (the graph's own device and the helpers): each takes the next when it
    has compiled the last, so the queues finish at about the same time (no split fixed in
    advance, which a wrong prediction would unbalance). Safe to use from several threads."""

    def __init__(self, jobs: list):
        self._jobs = sorted(jobs, key=lambda j: -j.cost)
        self._cond = threading.Condition()
        self._busy = 0  # jobs taken by a helper and not yet done
        #: keys compiled by a helper (the graph's own device then finds them in Mesa's cache)
        self.done: list[str] = []
        #: keys a helper took but could not run (the graph's own queue compiles them)
        self.failed: set = set()

    @property
    def keys(self) -> set:
        """Keys of every job not yet taken."""
        with self._cond:
            return {j.key for j in self._jobs}

    def __len__(self) -> int:
        with self._cond:
            return len(self._jobs)

    def take(self, ready=None, helper: bool = False) -> CompileJob | None:
        """The next job (the longest predicted of those for which ``ready(key)`` is true, when
        given), removed from the queue; None when there is none."""
        with self._cond:
            for i, job in enumerate(self._jobs):
                if ready is None or ready(job.key):
                    del self._jobs[i]
                    self._busy += helper
                    return job
            return None

    def finish(self, job: CompileJob, ok: bool) -> None:
        """A helper ran ``job`` (``ok``) or failed to."""
        with self._cond:
            self._busy -= 1
            (self.done.append(job.key) if ok else self.failed.add(job.key))
            self._cond.notify_all()

    def settled(self) -> bool:
        """Whether every job has been taken and no helper is still on one."""
        with self._cond:
            return not self._jobs and not self._busy

    def wait_done(self, count: int, timeout: float | None = None) -> list[str]:
        """Wait until helpers have compiled ``count`` jobs, the queue is settled, or ``timeout``
        seconds have passed; the keys compiled so far (:attr:`done`, in the order they ended)."""
        with self._cond:
            self._cond.wait_for(lambda: len(self.done) >= count or (not self._jobs and not self._busy), timeout)
            return list(self.done)


#: Queues that compile a graph's new pipelines at ``build()`` on drivers that compile a
#: pipeline's machine code at its first dispatch on the device's one queue thread (lavapipe):
#: the graph's own device and ``COMPILE_DEVICES - 1`` helper devices on the same adapter
#: (``WEBNN_GPU_COMPILE_DEVICES``; default: the CPU count, at most 4; 1 = the graph's own queue
#: only). See :class:`CompileHelpers`.
COMPILE_DEVICES = max(1, int(os.environ.get("WEBNN_GPU_COMPILE_DEVICES") or min(4, os.cpu_count() or 1)))


def mesa_cache_folder() -> Path | None:
    """Mesa's on-disk shader cache folder of this process (which may not exist yet):
    ``<MESA_SHADER_CACHE_DIR, else XDG_CACHE_HOME, else ~/.cache>/mesa_shader_cache``; None when
    ``MESA_SHADER_CACHE_DISABLE`` (or the older ``MESA_GLSL_CACHE_DISABLE``) turns it off."""
    for var in ("MESA_SHADER_CACHE_DISABLE", "MESA_GLSL_CACHE_DISABLE"):
        if os.environ.get(var, "").strip().lower() not in _FALSE:
            return None
    base = (os.environ.get("MESA_SHADER_CACHE_DIR") or os.environ.get("MESA_GLSL_CACHE_DIR")
            or os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"))
    return Path(base) / "mesa_shader_cache"


def compiles_at_dispatch(adapter_info: dict) -> bool:
    """Whether the adapter's driver compiles a pipeline's machine code at its first dispatch,
    on the device's queue thread, and keeps it in Mesa's disk cache (llvmpipe: lavapipe)."""
    return "llvmpipe" in f"{adapter_info.get('device', '')} {adapter_info.get('description', '')}"


class CompileHelpers:
    """Helper devices whose queue threads compile some of a graph's new pipelines while the
    graph's own queue compiles the others (lavapipe).

    llvmpipe compiles a pipeline's machine code with LLVM at its first dispatch, on the queue
    thread of its device: one thread per device, so a model's cold build compiles one pipeline
    after another on one core. Devices of one process share Mesa's on-disk shader cache, so a
    pipeline first run on a helper device (same WGSL, same features, its constants bound) is
    found there when the graph's own device runs it: a helper's queue compiles in parallel with
    the graph's. The graph's queue and the helpers take the pipelines one at a time from one
    :class:`CompileQueue`, longest predicted compile first.

    Only where that pays: the adapter compiles lazily (llvmpipe), Mesa's disk cache is on
    (:func:`mesa_cache_folder`), and the pipeline is new to that cache. The last is known from a
    marker per pipeline (``<cache dir>/mesa-seen/<Mesa's cache folder's identity>/<key>``)
    written after a build ran it: with Mesa's cache warm, a helper would only add the
    pipeline's creation (naga and NIR passes) a second time. Helpers never change a result:
    the graph's own device still creates and runs every pipeline; a helper that fails costs
    time, never an error.
    """

    _LOCK = threading.Lock()
    _DEVICES: dict = {}  # (adapter, features, limits, COMPILE_DEVICES) -> [helper devices]

    def __init__(self, adapter, features: list, limits: dict, folder: Path, seen: Path):
        self._adapter = adapter
        self._features = features
        self._limits = limits
        self._folder = folder
        self._seen = seen
        self._threads: list[threading.Thread] = []
        self._queue: CompileQueue | None = None
        #: pipeline keys compiled by a helper (set by :meth:`wait`)
        self.compiled: set[str] = set()

    @classmethod
    def of(cls, context) -> CompileHelpers | None:
        """The helpers of a context's builds, or None where they do not pay (see the class).

        Arguments:
            context (MLContext): the context that builds.

        Returns:
            CompileHelpers | None: a new object (per build); the helper devices it starts are
            made at the first :meth:`start` that starts one, once per adapter and device
            features in a process.
        """
        if COMPILE_DEVICES < 2 or not compiles_at_dispatch(context.adapter_info):
            return None
        folder = mesa_cache_folder()
        seen = _seen_folder(folder) if folder is not None else None
        device = context.device
        adapter = context._adapter or getattr(device, "adapter", None)
        if folder is None or seen is None or adapter is None:
            return None
        return cls(adapter, sorted(device.features), dict(device.limits), folder, seen)

    @property
    def devices(self) -> list:
        """The helper devices (none if they cannot be made: the graph's own queue compiles all)."""
        info = getattr(self._adapter, "info", {}) or {}
        key = (info.get("description", ""), info.get("device", ""), tuple(self._features),
               tuple(sorted(self._limits.items())), COMPILE_DEVICES)
        with self._LOCK:
            devices = self._DEVICES.get(key)
            if devices is None:
                devices = []
                try:
                    for i in range(COMPILE_DEVICES - 1):
                        devices.append(self._adapter.request_device_sync(
                            required_features=self._features, required_limits=self._limits,
                            label=f"webnn-gpu compile helper {i}"))
                except Exception as exc:  # fewer helpers, or none
                    log.debug("compile helpers: %d made (%s: %s)", len(devices), type(exc).__name__, exc)
                self._DEVICES[key] = devices
            return devices

    def is_new(self, key: str) -> bool:
        """Whether Mesa's disk cache has not had the pipeline ``key`` from an earlier build."""
        return not (self._seen / key).exists()

    def mark(self, keys) -> None:
        """Record that Mesa's disk cache now holds the pipelines ``keys`` (failures only log)."""
        seen = _seen_folder(self._folder)  # Mesa's folder exists now, if it did not before
        try:
            for k in keys if seen is not None else ():
                (seen / k).touch()
        except OSError as exc:
            log.debug("compile helpers: markers not written (%s)", exc)

    def start(self, jobs: list) -> CompileQueue | None:
        """Put ``jobs`` (:class:`CompileJob`, new pipelines) in a :class:`CompileQueue` and start
        the helpers on it: each, on a thread of its own, takes the next job, creates its
        pipeline, runs it once (one workgroup, scratch buffers holding the job's constants) and
        waits for that run (its compile) before it takes another. The graph's own queue takes
        jobs from the same queue (:meth:`CompileQueue.take`).

        Returns:
            CompileQueue | None: None (nothing started) when there are no jobs, or they have less than
            :data:`COMPILE_HELP_MIN_BYTES` of WGSL together, or no helper device can be made.
        """
        if not jobs or sum(len(j.wgsl) for j in jobs) < COMPILE_HELP_MIN_BYTES:
            return None
        devices = self.devices
        if not devices:
            return None
        queue = self._queue = CompileQueue(jobs)
        for device in devices[:len(jobs)]:
            t = threading.Thread(target=self._work, args=(device, queue), daemon=True,
                                 name="webnn-gpu-compile-helper")
            t.start()
            self._threads.append(t)
        return queue

    def running(self) -> bool:
        """Whether a helper thread is still at work."""
        return any(t.is_alive() for t in self._threads)

    def wait(self, cancel: bool = False) -> set:
        """Wait until the helpers have ended (``cancel``: after the job each is on; else when
        the queue is empty); the keys they compiled."""
        if cancel and self._queue is not None:
            with self._queue._cond:  # helpers take nothing more
                self._queue._jobs = []
        for t in self._threads:
            t.join()
        self._threads = []
        if self._queue is not None:
            self.compiled |= set(self._queue.done)
        return self.compiled

    @staticmethod
    def _work(device, queue: CompileQueue) -> None:
        """A helper: take jobs from ``queue`` and run each once on ``device`` until none is left."""
        import wgpu

        cache = PipelineCache(device)  # not kept: the graph's own device runs what it made
        usage = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.UNIFORM | wgpu.BufferUsage.COPY_DST
        buffers: dict = {}  # binding -> scratch buffer, grown as jobs need
        try:
            while (job := queue.take(helper=True)) is not None:
                ok = False
                try:
                    pipe = cache.get(job.wgsl, template=job.template, label=job.label)
                    entries = []
                    for i, size in enumerate(job.sizes):
                        size = min(size, HELPER_SCRATCH_BYTES)
                        buf = buffers.get(i)
                        if buf is None or buf.size < size:
                            if buf is not None:
                                buf.destroy()
                            buf = buffers[i] = device.create_buffer(size=-(-max(size, 4) // 16) * 16, usage=usage,
                                                                    label="compile helper scratch")
                        data = job.data[i] if i < len(job.data) else None
                        if data is not None:  # the constant the graph binds here (else: any bytes)
                            raw = bytes(data[:size])
                            device.queue.write_buffer(buf, 0, raw + bytes(-(-size // 4) * 4 - len(raw)))
                        entries.append({"binding": i, "resource": {"buffer": buf, "offset": 0, "size": size}})
                    group = device.create_bind_group(layout=pipe.get_bind_group_layout(0), entries=entries,
                                                     label=job.label)
                    cache.run_once(device, [(pipe, group, job.label, job.template)],
                                   wait=lambda f: f.map_sync(wgpu.MapMode.READ))  # returns when compiled
                    ok = True
                except Exception as exc:  # this one compiles on the graph's own queue
                    log.debug("compile helper: %s: %s: %s", job.label or job.template, type(exc).__name__, exc)
                finally:
                    queue.finish(job, ok)
        except Exception as exc:  # the graph's own queue compiles what is left
            log.debug("compile helper: %s: %s", type(exc).__name__, exc)
        finally:
            for b in buffers.values():
                b.destroy()


def _seen_folder(folder: Path) -> Path | None:
    """``<cache dir>/mesa-seen/<hash of Mesa's cache folder: path, device and inode>``: markers of
    the pipelines that folder holds (a folder removed and made again normally gets a new inode,
    so its markers are not reused; where the file system hands out the same inode, the markers
    only keep builds from lending: they compile on the graph's own queue, as without helpers).
    Making one removes the marker folders of Mesa folders that are gone (benchmarks use a
    temporary Mesa folder per process). None when it cannot be made."""
    from .models import cache_dir

    try:
        st = folder.stat()
        ident = f"{folder.resolve()}\0{st.st_dev}\0{st.st_ino}"
    except OSError:  # not made yet: Mesa has nothing
        ident = f"{folder}\0absent"
    root = cache_dir() / "mesa-seen"
    path = root / hashlib.sha256(ident.encode()).hexdigest()[:20]
    if path.is_dir():
        return path
    try:
        path.mkdir(parents=True, exist_ok=True)
        (path / "folder").write_text(ident)
    except OSError:
        return None
    _prune_seen(root, keep=path)
    return path


def _prune_seen(root: Path, keep: Path) -> None:
    """Remove the marker folders under ``root`` whose Mesa folder no longer exists as it was
    (path, device and inode); failures only log."""
    import shutil

    try:
        for d in root.iterdir():
            if d == keep or not d.is_dir():
                continue
            try:
                path, dev, ino = (d / "folder").read_text().split("\0")
                st = os.stat(path)
                if (str(st.st_dev), str(st.st_ino)) == (dev, ino):
                    continue
            except (OSError, ValueError):
                pass  # gone, re-made, or never made ("absent"): its markers say nothing now
            shutil.rmtree(d, ignore_errors=True)
    except OSError as exc:
        log.debug("compile helpers: markers not pruned (%s)", exc)


#: the pipeline cache of each live device (PipelineCache.of)
_CACHES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_CACHES_LOCK = threading.Lock()


def _excerpt(wgsl: str, message: str, context: int = 4) -> str:
    import re

    lines = wgsl.splitlines()
    m = re.search(r"wgsl:(\d+):", message)
    if m:
        i = int(m.group(1)) - 1
        lo, hi = max(0, i - context), min(len(lines), i + context + 1)
    else:
        lo, hi = 0, min(len(lines), 2 * context + 1)
    return "\n".join(f"{j + 1:4d} | {lines[j]}" for j in range(lo, hi))


def op_where(node) -> str:
    """``op [label]`` of a node, for messages and GPU object labels."""
    return where(node.op, node.label)


def strides(shape) -> list[int]:
    """Row-major element strides of a shape."""
    out = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        out[i] = out[i + 1] * int(shape[i + 1])
    return out


def broadcast_strides(in_shape, out_shape) -> list[int]:
    """Strides to index an input broadcast to ``out_shape`` (0 where broadcast)."""
    r = len(out_shape)
    padded = [1] * (r - len(in_shape)) + list(in_shape)
    st = strides(padded)
    return [0 if padded[i] == 1 and out_shape[i] != 1 else st[i] for i in range(r)]




#: Kernel tuning profiles (see :func:`tuning_profile`).
LANE_LOOP, DEFAULT_TUNING = "lane-loop", "default"


def tuning_profile(adapter_info: dict) -> str:
    """The kernel-tuning profile of an adapter.

    ``"lane-loop"``: Mesa's llvmpipe/lavapipe before 24, which runs every storage-buffer load
    and store as a loop over the SIMD lanes (even when all lanes read one address), so tiles
    that load each weight once for more output rows win. ``"default"``: everything else,
    including lavapipe from Mesa 24 on (gathers, and scalar loads for uniform addresses),
    where smaller register tiles win. Measured on Mesa 22.3 and 25.0 (docs/performance.md).
    """
    desc = f"{adapter_info.get('device', '')} {adapter_info.get('description', '')}"
    m = re.search(r"Mesa (\d+)\.", desc)
    if "llvmpipe" in desc and m and int(m.group(1)) < 24:
        return LANE_LOOP
    return DEFAULT_TUNING
