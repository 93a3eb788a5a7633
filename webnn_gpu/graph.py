"""MLGraph: a compiled graph, and the plan that runs it.

Spec: https://www.w3.org/TR/webnn/#api-mlgraph

``build()`` runs the compiler passes over the builder's IR, lowers every node to kernels
(:mod:`webnn_gpu._lower`), uploads constants, plans intermediate buffers by liveness (one
arena buffer serves many values whose lifetimes do not overlap) and creates every pipeline.
A dispatch then records all kernels into one command buffer, in as few compute passes as
the buffer copies allow.
"""

from __future__ import annotations

import logging
import os
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import wgpu

from . import _dtypes, _env, _kernels
from ._lower import CopyStep, KernelStep, LowerContext
from ._ir import Value
from .errors import InvalidStateError, NotSupportedError, OperationError, where

log = logging.getLogger("webnn_gpu")

_STORAGE = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST


@dataclass
class _Slot:
    kind: str  # "in", "out", "const", "tmp"
    key: Any  # input/output name, or index into the graph's buffer list

    def __hash__(self):
        return hash((self.kind, self.key))


@dataclass
class BuildPlan:
    """A graph lowered to its steps, before any GPU object is made: what ``build()`` turns
    into buffers and pipelines (:meth:`MLGraph._from_plan`), and what
    :mod:`webnn_gpu._plancache` keeps on disk. The steps' values carry the constants' data."""

    inputs: dict  # name -> Value, the inputs the steps read
    outputs: dict  # name -> Value
    steps: list  # KernelStep and CopyStep, in order
    aliases: dict  # value id -> the Value it is a view of
    placed: dict  # value id -> (part, whole, byte offset): LowerContext.place
    node_temps: list  # (first step, last step, [Value]) of each node's scratch values


class MLGraph:
    """A compiled WebNN graph (the spec's MLGraph); made by ``MLGraphBuilder.build``.

    Run it with ``MLContext.compute`` or ``MLContext.dispatch``. ``inputs`` and ``outputs``
    describe its named operands.
    """

    _context: Any
    _destroyed: bool
    _inputs: dict[str, Value]
    _outputs: dict[str, Value]
    _buffers: list
    _const_at: dict[int, int]  # id of a constant stored with others -> its byte offset in their buffer
    _const_tensors: list
    _steps: list
    _slot: dict[int, _Slot]
    _root: Callable[[Any], Any]
    _offset_of: Callable[[Any], int]
    _copy_at: dict[int, tuple[int, ...]]
    _recordings: OrderedDict
    _static_groups: dict[int, Any]
    _compute_io: Any
    _arena_bytes: int
    _peak_bytes_live: int
    _plan: BuildPlan

    def __init__(self) -> None:  # use MLGraphBuilder.build
        self._destroyed = True

    # ------------------------------------------------------------------ build
    @classmethod
    def _compile(cls, context, nodes, inputs: dict, outputs: dict) -> MLGraph:
        prefetched: list = []  # keys of the pipelines this build started making while it lowered
        try:
            return cls._compile_graph(context, nodes, inputs, outputs, prefetched)
        except BaseException:
            context._pipelines.discard(prefetched)  # a failed build keeps none of them
            raise

    @classmethod
    def _compile_graph(cls, context, nodes, inputs: dict, outputs: dict, prefetched: list) -> MLGraph:
        return cls._from_plan(context, cls._lower(context, nodes, inputs, outputs, prefetched))

    @staticmethod
    def _lower(context, nodes, inputs: dict, outputs: dict, prefetched: list) -> BuildPlan:
        """Run the compiler's rules over ``nodes`` and lower every node to its steps (each new
        kernel's pipeline is started as soon as its node is lowered; their keys are added to
        ``prefetched``)."""
        from . import compiler
        from .ops._registry import LOWERINGS

        nodes = compiler.run_passes(nodes, outputs, context)
        used_inputs = {v.id for n in nodes for v in n.inputs if v is not None and v.kind == "input"}
        used_inputs |= {v.id for v in outputs.values() if v.kind == "input"}

        # Lower every node; each new kernel's pipeline starts being made at once (on the
        # pipeline threads, while the next nodes are lowered).
        cache = context._pipelines
        steps: list = []
        aliases: dict[int, Value] = {}
        placed: dict[int, tuple] = {}  # value id -> (value, the value holding it, byte offset)
        node_temps: list[tuple[int, int, list]] = []
        lower_shared: dict = {}  # LowerContext.shared: what one node leaves for the next
        for node in nodes:
            lower = LOWERINGS.get(node.op)
            if lower is None:
                raise NotSupportedError(f"{where(node.op, node.label)}: this operator has no kernel yet")
            lc = LowerContext(node, context._features, context._limits, tuning=context._tuning,
                              subgroup=context._subgroup, shared=lower_shared)
            start = len(steps)
            lower(node, lc)
            steps.extend(lc.steps)
            prefetched += cache.prefetch([(s.wgsl, s.template, s.label) for s in lc.steps
                                          if isinstance(s, KernelStep) and not s.user_code])
            aliases.update(lc.aliases)
            placed.update(lc.placed)
            if lc.temps:
                node_temps.append((start, max(len(steps) - 1, start), lc.temps))
        return BuildPlan({name: v for name, v in inputs.items() if v.id in used_inputs}, dict(outputs), steps,
                         aliases, placed, node_temps)

    @classmethod
    def _from_plan(cls, context, plan: BuildPlan) -> MLGraph:
        """The graph of a lowered ``plan``: constants uploaded, buffers planned, pipelines made
        (or taken from those :meth:`PipelineCache.prefetch` started) and warmed up. The plan
        is not changed, apart from each kernel step's ``pipeline``."""
        from . import _custom

        self = cls.__new__(cls)
        self._context = context
        self._destroyed = False
        self._plan = plan
        device = context.device
        cache = context._pipelines
        self._inputs = dict(plan.inputs)
        self._outputs = outputs = dict(plan.outputs)
        steps = list(plan.steps)
        aliases = dict(plan.aliases)
        placed = plan.placed
        node_temps = plan.node_temps

        def root(v):
            while v.id in aliases:
                v = aliases[v.id]
            return v

        # A placed part's buffer (the root of its views) is a block of the whole's, at an offset
        # that every binding of it adds.
        offsets: dict[int, int] = {}
        for part, whole, offset in placed.values():
            r = root(part)
            if r.kind != "op" or root(whole) is r or r.id in offsets:
                raise RuntimeError(f"build: {part!r} cannot be stored inside {whole!r} (a bug of concat_in_place)")
            aliases[r.id] = whole
            offsets[r.id] = offset

        const_at: dict[int, int] = {}  # constant id -> its byte offset in the buffer it shares

        def offset_of(v):
            off = 0
            while v.id in aliases:
                off += offsets.get(v.id, 0)
                v = aliases[v.id]
            return off + const_at.get(v.id, 0)

        # Slots: inputs, constants, outputs, temporaries.
        slot: dict[int, _Slot] = {}
        self._buffers = []  # constant and arena buffers, owned by the graph
        self._const_tensors = []  # constant MLTensors bound (they outlive their destroy())
        for name, v in self._inputs.items():
            slot[v.id] = _Slot("in", name)
        out_copies: list[tuple[Value, str]] = []
        for name, v in outputs.items():
            r = root(v)
            if r.kind == "op" and r.id not in slot:
                slot[r.id] = _Slot("out", name)
            else:
                out_copies.append((r, name))
        consts = {}
        for step in steps:
            for v in _step_values(step):
                r = root(v)
                if r.kind == "constant" and r.id not in slot:
                    consts[r.id] = r
        for r, _ in out_copies:  # an output that is a view (reshape, ...) of a constant
            if r.kind == "constant" and r.id not in slot:
                consts[r.id] = r
        packed = []  # constants of host data stored together, a few buffers for all (_upload_packed)
        each = _env.force_choice("const_pack", ("each",)) == "each"  # a buffer per constant, as before
        for r in consts.values():
            if r.tensor is not None:
                if r.tensor._destroyed:
                    raise InvalidStateError(f"build: the constant MLTensor {r.tensor!r} was destroyed before build()")
                slot[r.id] = _Slot("const", len(self._buffers))
                self._buffers.append(r.tensor._buffer)
                self._const_tensors.append(r.tensor)
            elif getattr(r, "texture_width", 0) or each:
                slot[r.id] = _Slot("const", len(self._buffers))
                self._buffers.append(allocate(f"constant {r}", _dtypes.buffer_size(r.data_type, r.shape),
                                              lambda r=r: _upload_constant(device, r)))
            else:
                packed.append(r)
        for buffer, placed_here in _upload_packed(device, packed, context._limits):
            for r, at in placed_here:
                slot[r.id] = _Slot("const", len(self._buffers))
                const_at[r.id] = at
            self._buffers.append(buffer)
        self._const_at = const_at

        # Liveness of op values and temps, in step order; greedy best-fit arena.
        first: dict[int, int] = {}
        last: dict[int, int] = {}
        values: dict[int, Value] = {}
        for i, step in enumerate(steps):
            for v in _step_values(step):
                r = root(v)
                if r.id in slot:
                    continue
                values[r.id] = r
                first.setdefault(r.id, i)
                last[r.id] = i
        for start, end, temps in node_temps:
            for t in temps:
                if t.id in values:
                    first[t.id] = min(first[t.id], start)
                    last[t.id] = max(last[t.id], end)
        order = sorted(values, key=lambda vid: (first[vid], -_dtypes.buffer_size(values[vid].data_type, values[vid].shape)))
        free: list[tuple[int, int]] = []  # (size, buffer index)
        live: list[tuple[int, int, int]] = []  # (last step, size, buffer index)
        self._arena_bytes = 0
        self._peak_bytes_live = 0
        for vid in order:
            v = values[vid]
            need = _dtypes.buffer_size(v.data_type, v.shape)
            still = []
            for end, size, bi in live:
                if end < first[vid]:
                    free.append((size, bi))
                else:
                    still.append((end, size, bi))
            live = still
            fit = [f for f in free if f[0] >= need]
            if fit:
                best = min(fit)
                free.remove(best)
                size, bi = best
            else:
                size, bi = need, len(self._buffers)
                what = f"intermediate values (arena {bi}, first {v!r}{_made_by(v)})"
                self._buffers.append(allocate(what, need, lambda: device.create_buffer(
                    size=need, usage=_STORAGE, label=f"arena {bi}")))
                self._arena_bytes += need
            slot[vid] = _Slot("tmp", bi)
            live.append((last[vid], size, bi))
            live_bytes = sum(s for _, s, _ in live)
            self._peak_bytes_live = max(self._peak_bytes_live, live_bytes)

        for r, name in out_copies:
            steps.append(CopyStep(r, _OutRef(name), _dtypes.buffer_size(r.data_type, r.shape), f"output {name!r}"))

        # Pipelines and bind groups.
        kernels = [step for step in steps if isinstance(step, KernelStep)]
        for step in kernels:  # the user's WGSL first: its errors are reported as the caller's
            if step.user_code:
                _custom.compile_pipeline(context, step)
        self._steps = steps
        self._slot = slot
        self._root = root
        self._offset_of = offset_of
        # each copy step's (source, destination) byte offsets in their buffers, once
        self._copy_at = {i: tuple(0 if isinstance(v, _OutRef) else offset_of(v) for v in (st.src, st.dst))
                         for i, st in enumerate(steps) if not isinstance(st, KernelStep)}
        self._recordings = OrderedDict()  # io key -> _Recording, newest last
        self._static_groups = {}
        self._compute_io = None  # lazily created buffers for compute()
        warm = os.environ.get("WEBNN_GPU_WARMUP", "1") != "0"
        # Warm-up runs of new pipelines are submitted as soon as each is made, so that the
        # driver's compile (lavapipe: LLVM, on its queue thread) overlaps the creation of the
        # others; not when each compile is timed on its own.
        early = warm and not cache.timed and _env.DEBUG < 2
        scratch: list = []  # (ins, outs) once a warm-up run needs them
        submitted: list = []
        made_for: dict = {}  # step index -> the pipeline on_ready gave it
        helpers = _kernels.CompileHelpers.of(context) if early else None
        shared = None  # the CompileQueue of new large pipelines, shared with helper devices
        ready: dict = {}  # key of a shared job -> its pipeline, made on this device
        big: list = []  # keys of new pipelines of at least EARLY_WARM_UP_BYTES

        def group_of(i):
            if not scratch:
                scratch.extend(self._warm_scratch())
            return self._static_group(i) or self._make_bind_group(steps[i], *scratch)

        def own_turn():
            # this device's queue: the next shared job whose pipeline is made here, run and
            # waited for (its compile) before the next is taken, so the helpers get the others
            while shared is not None and (job := shared.take(ready.__contains__)) is not None:
                i = first_step[job.key]
                cache.run_once(device, [(ready[job.key], group_of(i), steps[i].label, steps[i].template)],
                               lambda fence: self._context._timeline.map_read(fence, 4, "build"))

        try:
            on_ready = None
            if early:
                first_step: dict = {}  # pipeline key -> index of the first step using it
                for i, step in enumerate(steps):
                    if isinstance(step, KernelStep):
                        first_step.setdefault(cache.key(step.wgsl), i)
                big = [k for k, i in first_step.items()
                       if len(steps[i].wgsl) >= EARLY_WARM_UP_BYTES and not cache.has(k)]
                # a helper binds scratch buffers only: a pipeline binding a texture compiles here
                firsts = [(k, steps[first_step[k]]) for k in big
                          if helpers is not None and not self._binds_texture(steps[first_step[k]]) and helpers.is_new(k)]
                jobs = [_kernels.CompileJob(k, st.wgsl, st.template, st.label, self._binding_sizes(st),
                                            self._constant_bytes(st)) for k, st in firsts]
                shared = helpers.start(jobs) if helpers is not None else None
                # every shared key, also those a helper has already taken (this device must not
                # compile them too: it finds them in Mesa's cache at the end)
                lent = {j.key for j in jobs} if shared is not None else set()

                def on_ready(key, pipe):
                    i = first_step[key]
                    step = steps[i]
                    step.pipeline = made_for[i] = pipe
                    if key in lent:
                        ready[key] = pipe
                        own_turn()
                    elif len(step.wgsl) >= EARLY_WARM_UP_BYTES:  # else compiles in a moment: with the rest
                        cache.submit_once(device, [(pipe, group_of(i), step.label, step.template)])
                        submitted.append(pipe)

            pipes = cache.get_many([(s.wgsl, s.template, s.label) for s in kernels], on_ready=on_ready)
            for step, pipe in zip(kernels, pipes):
                step.pipeline = pipe
            for i, pipe in made_for.items():  # another thread made the same one meanwhile and
                if steps[i].pipeline is not pipe:  # its was kept: a bind group fits its own pipeline
                    self._static_groups.pop(i, None)
            for i in range(len(steps)):
                self._static_group(i)
            for t in self._const_tensors:
                t._use_in(self)
            if shared is not None and helpers is not None:
                for key in shared.keys:  # made by another build meanwhile (no on_ready here)
                    ready.setdefault(key, steps[first_step[key]].pipeline)
                own_turn()
                # the short new pipelines meanwhile, while the helpers finish theirs; then
                # theirs, found in Mesa's disk cache (in _warm_up)
                rest: dict = {}
                for i, step in enumerate(steps):
                    pipe = step.pipeline if isinstance(step, KernelStep) else None
                    if (pipe is not None and id(pipe) not in cache.warm and id(pipe) not in rest
                            and len(step.wgsl) < EARLY_WARM_UP_BYTES):
                        rest[id(pipe)] = i
                if rest:
                    cache.submit_once(device, [(steps[i].pipeline, group_of(i), steps[i].label, steps[i].template)
                                               for i in rest.values()])
                    submitted.extend(steps[i].pipeline for i in rest.values())
                # while a helper compiles its last jobs, this device's queue runs those it has
                # finished, which Mesa's cache holds (each once another has ended after it, so
                # that Mesa's cache writer has stored it); the last ones run in _warm_up
                handed = 0
                while True:
                    done = shared.wait_done(handed + 2, timeout=0.5)
                    fresh = [first_step[k] for k in done[handed:-1] if k in first_step]
                    handed = max(handed, len(done) - 1)
                    fresh = [i for i in fresh if id(steps[i].pipeline) not in cache.warm]
                    if fresh:
                        cache.submit_once(device, [(steps[i].pipeline, group_of(i), steps[i].label, steps[i].template)
                                                   for i in fresh])
                        submitted.extend(steps[i].pipeline for i in fresh)
                    if shared.settled() or not helpers.running():
                        break
                helpers.wait()
            if warm:
                self._warm_up(tuple(scratch) or None, submitted)
            if helpers is not None and big:
                helpers.mark(big)
        finally:
            if helpers is not None:
                helpers.wait(cancel=True)  # a failed build: the helpers' threads end before it raises
            for b in (*scratch[0].values(), *scratch[1].values()) if scratch else ():
                b.destroy()
        if log.isEnabledFor(logging.DEBUG):
            for step in steps:
                log.debug("step %s", step.label if isinstance(step, CopyStep) else f"{step.label} {step.template} {step.groups}")
        return self

    def _static_group(self, i: int):
        """The bind group of step ``i`` when all its buffers are the graph's own (constants and
        arena), made once; None for other steps."""
        group = self._static_groups.get(i)
        step = self._steps[i]
        if group is None and isinstance(step, KernelStep) and all(
                self._slot[self._root(v).id].kind in ("const", "tmp") for v in step.values):
            group = self._static_groups[i] = self._make_bind_group(step, {}, {})
        return group

    def _binding_range(self, step: KernelStep, i: int) -> tuple[int, int]:
        """(offset, bytes) of ``step``'s binding ``i`` in its buffer (a value stored in a
        block of another's, :meth:`~webnn_gpu._lower.LowerContext.place`, from its offset). A
        range's size is rounded up to 4 bytes, as WebGPU wants a storage binding's (a float16
        range of an odd count: a recurrent kernel's last chunk of steps): its end stays inside
        the value's buffer, which :func:`~webnn_gpu._dtypes.buffer_size` pads to 4, or inside
        the next range's aligned offset, and the kernel indexes only its own elements."""
        v = step.values[i]
        base = self._offset_of(v)
        if step.ranges and step.ranges[i]:
            return base + step.ranges[i][0], -(-step.ranges[i][1] // 4) * 4
        return base, _dtypes.buffer_size(v.data_type, v.shape)

    def _binding_sizes(self, step: KernelStep) -> list[int]:
        """Bytes bound at each binding of ``step`` (as :meth:`_make_bind_group` binds them)."""
        return [self._binding_range(step, i)[1] for i in range(len(step.values))]

    def _binds_texture(self, step: KernelStep) -> bool:
        """Whether ``step`` binds a constant uploaded as a texture (``linalg.TextureConstant``)."""
        return any(getattr(self._root(v), "texture_width", 0) for v in step.values)

    def _constant_bytes(self, step: KernelStep) -> list:
        """Per binding of ``step``, the bytes of the constant the graph binds there (from its
        offset), or None where a binding is not a constant uploaded from host data."""
        out: list = []
        for i, v in enumerate(step.values):
            r = self._root(v)
            if r.kind != "constant" or r.tensor is not None or r.data is None:
                out.append(None)
                continue
            offset, size = self._binding_range(step, i)
            offset -= self._const_at.get(r.id, 0)  # from the constant's first byte, not its buffer's
            out.append(np.ascontiguousarray(r.data).reshape(-1).view(np.uint8)[offset:offset + size])
        return out

    def _warm_scratch(self) -> tuple[dict, dict]:
        """Scratch buffers (zeros) standing for the graph's inputs and outputs in warm-up runs."""
        device = self._context.device

        def scratch(what, v):
            size = _dtypes.buffer_size(v.data_type, v.shape)
            return allocate(f"warm-up scratch for {what}", size,
                            lambda: device.create_buffer(size=size, usage=_STORAGE))

        return ({n: scratch(f"input {n!r}", v) for n, v in self._inputs.items()},
                {n: scratch(f"output {n!r}", v) for n, v in self._outputs.items()})

    def _warm_up(self, scratch: tuple[dict, dict] | None = None, submitted: Sequence = ()) -> None:
        """Run every pipeline not run before once, one workgroup each, and wait (for those
        ``submitted`` already too).

        Software drivers (lavapipe/llvmpipe) JIT-compile a pipeline's machine code at its first
        dispatch, not at creation; doing it here keeps that cost in ``build()`` (where a GPU
        driver compiles too) instead of the first inference. One workgroup writes a subset of
        what a full dispatch writes; inputs and outputs are scratch buffers (zeros):
        ``scratch`` (ins, outs), made and released here when not given.
        """
        cache = self._context._pipelines
        used = {id(s.pipeline) for s in self._steps if isinstance(s, KernelStep)}
        # (a pipeline another thread made at the same time is not used: not marked warm)
        submitted = [p for p in submitted if id(p) in used]
        done = {id(p) for p in submitted}
        todo = {}
        for i, step in enumerate(self._steps):
            pid = id(step.pipeline) if isinstance(step, KernelStep) else None
            if pid is not None and pid not in cache.warm and pid not in done and pid not in todo:
                todo[pid] = i
        if not todo and not submitted:
            return
        device = self._context.device
        own = scratch is None
        ins, outs = self._warm_scratch() if scratch is None else scratch
        try:
            jobs = [(s.pipeline, self._static_group(i) or self._make_bind_group(s, ins, outs), s.label, s.template)
                    for i, s in ((i, self._steps[i]) for i in todo.values())]
            cache.run_once(device, jobs, lambda fence: self._context._timeline.map_read(fence, 4, "build"),
                           submitted=tuple(submitted))
        finally:
            if own:
                for b in (*ins.values(), *outs.values()):
                    b.destroy()

    # ------------------------------------------------------------------ public
    @property
    def inputs(self) -> dict:
        """Input descriptors: name -> ``{"data_type", "shape"}``."""
        return {n: {"data_type": v.data_type, "shape": list(v.shape)} for n, v in self._inputs.items()}

    @property
    def outputs(self) -> dict:
        """Output descriptors: name -> ``{"data_type", "shape"}``."""
        return {n: {"data_type": v.data_type, "shape": list(v.shape)} for n, v in self._outputs.items()}

    @property
    def kernel_count(self) -> int:
        """Number of kernel launches per dispatch."""
        return sum(isinstance(s, KernelStep) for s in self._steps)

    @property
    def context(self):
        """The MLContext this graph was built for."""
        return self._context

    # IDL: undefined destroy();
    def destroy(self) -> None:
        """Release the graph's GPU memory. Idempotent; work already queued completes."""
        if self._destroyed:
            return
        with self._context._lock:  # not while another thread records this graph
            self._destroy()

    def _destroy(self) -> None:
        self._destroyed = True
        self._recordings.clear()
        self._static_groups.clear()
        # Buffers are released when the queued work holding them is done (wgpu refcounts).
        self._buffers = []
        self._compute_io = None
        for t in self._const_tensors:
            t._release_from(self)
        self._const_tensors = []

    @property
    def destroyed(self) -> bool:
        """True after :meth:`destroy`."""
        return self._destroyed

    def _check_usable(self, op: str) -> None:
        if self._destroyed:
            raise InvalidStateError(f"{op}: the MLGraph has been destroyed")

    # ------------------------------------------------------------------ encoding
    def _buffer_of(self, v, ins: dict, outs: dict):
        if isinstance(v, _OutRef):
            return outs[v.name]
        s = self._slot[self._root(v).id]
        if s.kind == "in":
            return ins[s.key]
        if s.kind == "out":
            return outs[s.key]
        return self._buffers[s.key]

    def _make_bind_group(self, step: KernelStep, ins: dict, outs: dict):
        entries = []
        for i, v in enumerate(step.values):
            buf = self._buffer_of(v, ins, outs)
            if isinstance(buf, wgpu.GPUTexture):  # a constant stored as a texture (linalg.texture_copy)
                entries.append({"binding": i, "resource": buf.create_view()})
                continue
            offset, size = self._binding_range(step, i)
            entries.append({"binding": i, "resource": {"buffer": buf, "offset": offset, "size": size}})
        return self._context.device.create_bind_group(
            layout=step.pipeline.get_bind_group_layout(0), entries=entries, label=step.label
        )

    def _recording(self, ins: dict, outs: dict, io_key) -> _Recording:
        """What :meth:`_encode` records for the buffers named by ``io_key``, made once per key.

        The graph keeps the recordings of its last keys while their bind groups (at least
        one each) number at most :data:`BIND_GROUPS_KEPT` (the newest is always kept); a key names buffers that
        are never reused (tensor serials), so an old key's entry only ages out.
        """
        rec = self._recordings.get(io_key)
        if rec is not None:
            self._recordings.move_to_end(io_key)
            return rec
        parts: list = []
        kernels: list | None = None
        made = 0
        for i, step in enumerate(self._steps):
            if isinstance(step, KernelStep):
                group = self._static_groups.get(i)
                if group is None:
                    group = self._make_bind_group(step, ins, outs)
                    made += 1
                if kernels is None:
                    kernels = []
                    parts.append(kernels)
                kernels.append((step.pipeline, group, step.groups))
            else:
                kernels = None
                parts.append(i)
        rec = _Recording(parts, made, None if _env.force_choice("encode", ("public",)) == "public" else _native_form(parts))
        self._recordings[io_key] = rec
        while len(self._recordings) > 1 and sum(max(1, r.groups_made) for r in self._recordings.values()) > BIND_GROUPS_KEPT:
            self._recordings.popitem(last=False)
        return rec

    def _encode(self, encoder, ins: dict, outs: dict, io_key, query_set=None) -> None:
        """Record every step into ``encoder``; ``ins``/``outs`` map names to GPUBuffers.

        The commands come from the key's :meth:`_recording`: one compute pass per run of
        kernels between buffer copies, each kernel's pipeline (when it changes), bind group
        and dispatch, through wgpu-native's C functions where :func:`_native_form` could
        take their handles, else through wgpu-py's methods (the same commands). With a
        timestamp ``query_set`` (profiling), each kernel gets a compute pass of its own whose
        beginning and end are written to queries 2k and 2k+1.
        """
        rec = self._recording(ins, outs, io_key)
        if query_set is not None:
            self._encode_timed(encoder, rec, ins, outs, query_set)
            return
        native = rec.native
        fns = None if native is None else _native()
        for n, part in enumerate(rec.parts):
            if part.__class__ is int:
                self._encode_copy(encoder, part, ins, outs)
                continue
            cpass = encoder.begin_compute_pass()
            handle = None if fns is None else getattr(cpass, "_internal", None)
            if native is None or fns is None or handle is None:
                _encode_public(cpass, part)
            else:
                set_pipeline, set_group, dispatch, null = fns
                for pipe, group, x, y, z in native[n]:
                    if pipe is not None:
                        set_pipeline(handle, pipe)
                    set_group(handle, 0, group, 0, null)
                    dispatch(handle, x, y, z)
            cpass.end()

    def _encode_timed(self, encoder, rec: _Recording, ins: dict, outs: dict, query_set) -> None:
        k = 0
        for part in rec.parts:
            if part.__class__ is int:
                self._encode_copy(encoder, part, ins, outs)
                continue
            for kernel in part:
                cpass = encoder.begin_compute_pass(timestamp_writes={
                    "query_set": query_set, "beginning_of_pass_write_index": 2 * k,
                    "end_of_pass_write_index": 2 * k + 1})
                _encode_public(cpass, (kernel,))
                cpass.end()
                k += 1

    def _encode_copy(self, encoder, i: int, ins: dict, outs: dict) -> None:
        step = self._steps[i]
        at = self._copy_at[i]
        encoder.copy_buffer_to_buffer(self._buffer_of(step.src, ins, outs), at[0],
                                      self._buffer_of(step.dst, ins, outs), at[1], step.nbytes)


#: The most bind groups made for graph inputs and outputs that one graph keeps (over all its
#: recordings, :meth:`MLGraph._recording`).
BIND_GROUPS_KEPT = 256


@dataclass
class _Recording:
    """The commands of one graph for one set of input/output buffers.

    ``parts``: in order, a list of ``(pipeline, bind group, workgroup counts)`` per compute
    pass, or the step index of a buffer copy. ``groups_made``: bind groups made for this
    recording (the others are the graph's static ones). ``native``: per part, the
    ``(pipeline handle or None when unchanged, bind group handle, x, y, z)`` tuples of a
    pass (None for a copy), or None when the C functions cannot be used; the handles belong
    to the objects in ``parts``, which this recording keeps alive.
    """

    parts: list
    groups_made: int
    native: list | None


def _encode_public(cpass, kernels) -> None:
    current = None
    for pipeline, group, groups in kernels:
        if pipeline is not current:
            cpass.set_pipeline(pipeline)
            current = pipeline
        cpass.set_bind_group(0, group)
        cpass.dispatch_workgroups(*groups)


def _native_functions():
    """wgpu-native's SetPipeline, SetBindGroup, DispatchWorkgroups of a compute pass and
    cffi's NULL, from the installed wgpu-py's backend; None when it does not have them."""
    try:
        from wgpu.backends.wgpu_native import _api

        lib = _api.lib
        return (lib.wgpuComputePassEncoderSetPipeline, lib.wgpuComputePassEncoderSetBindGroup,
                lib.wgpuComputePassEncoderDispatchWorkgroups, _api.ffi.NULL)
    except (ImportError, AttributeError):
        return None


#: :func:`_native_functions`, looked up at the first recording (:func:`_native`)
_NATIVE: tuple | None = None
_NATIVE_LOOKED_UP = False


def _native() -> tuple | None:
    """:func:`_native_functions`, looked up once, when the first recording is made: by then a
    context exists, so wgpu-py's backend was imported through ``_startup`` (its cached cdef);
    importing the backend when this module loads would parse wgpu.h again in every process."""
    global _NATIVE, _NATIVE_LOOKED_UP
    if not _NATIVE_LOOKED_UP:
        _NATIVE, _NATIVE_LOOKED_UP = _native_functions(), True
    return _NATIVE


def _native_form(parts: list) -> list | None:
    """The raw-handle form of a recording's ``parts`` (see :class:`_Recording`), or None
    when the C functions or any object's handle (``_internal``) is missing."""
    if _native() is None:
        return None
    out: list = []
    for part in parts:
        if part.__class__ is int:
            out.append(None)
            continue
        calls = []
        current = None
        for pipeline, group, groups in part:
            pipe = getattr(pipeline, "_internal", None)
            handle = getattr(group, "_internal", None)
            if pipe is None or handle is None:
                return None
            calls.append((pipe if pipeline is not current else None, handle, *groups, *(1,) * (3 - len(groups))))
            current = pipeline
        out.append(tuple(calls))
    return out


@dataclass(frozen=True)
class _OutRef:
    """A graph output buffer as the destination of a copy step."""

    name: str
    data_type: str = ""
    shape: tuple = ()


#: A new pipeline whose WGSL is at least this long has its warm-up run submitted as soon as it
#: is made (its compile then overlaps the creation of the others); shorter ones compile in
#: milliseconds and run together at the end of ``build()`` (one submission for all).
EARLY_WARM_UP_BYTES = 4096


def _step_values(step):
    if isinstance(step, KernelStep):
        return step.values
    return [v for v in (step.src, step.dst) if not isinstance(v, _OutRef)]


def allocate(what: str, nbytes: int, create, op: str = "build"):
    """``create()`` a GPU buffer; a failure (out of memory, a device limit) becomes an
    OperationError that says what the buffer was for and how many bytes it needed."""
    try:
        return create()
    except Exception as exc:  # wgpu raises GPUValidationError, GPUOutOfMemoryError, ...
        raise OperationError(f"{op}: allocating {nbytes} bytes for {what}: {type(exc).__name__}: {exc}") from exc


def _made_by(v) -> str:
    node = getattr(v, "producer", None)
    return f" made by {where(node.op, node.label)}" if node is not None else ""


def _upload_constant(device, r):
    """The GPU copy of constant ``r``: an rgba32float texture where it is a
    ``linalg.TextureConstant`` (``texture_width`` set), else a buffer."""
    if getattr(r, "texture_width", 0):
        return _upload_texture(device, r.data, r.texture_width, f"constant {r}")
    return _upload(device, r.data, f"constant {r}")


#: Bytes of constants at most in one buffer (:func:`_upload_packed`; a larger constant has a
#: buffer of its own), and the alignment of each constant in it.
CONST_PACK_BYTES = 64 << 20
CONST_PACK_ALIGN = 256


def _upload_packed(device, values: list, limits: dict) -> list:
    """The constants ``values`` (host data, no textures) uploaded into as few buffers as hold
    them, each at an offset that is a multiple of :data:`CONST_PACK_ALIGN` (and of the device's
    binding offset alignments) with the bytes :func:`_upload` gives it (its data, zero-padded
    to a multiple of 4, at least 4) and zeros up to the next one. One buffer made mapped, its
    constants copied in, then unmapped: pose_landmark_full's 256 constants (16 MB) took 19 ms
    of the main thread as a buffer each, most of it wgpu-py's three calls per buffer, and 13 ms
    so, most of it copying the bytes into the mapping. A kernel binds a constant's own range
    (``offset_of``), so what it reads is what it read from a buffer of its own.

    Returns:
        list: (buffer, [(value, byte offset), ...]) per buffer.

    Raises:
        OperationError: a buffer could not be made (its bytes and first constant named).
    """
    align = max(CONST_PACK_ALIGN, int(limits.get("min-storage-buffer-offset-alignment", 1)),
                int(limits.get("min-uniform-buffer-offset-alignment", 1)))
    cap = min(CONST_PACK_BYTES, int(limits.get("max-buffer-size", CONST_PACK_BYTES)))
    packs: list = []  # [values with their offsets, bytes]
    for r in values:
        need = max(-(-r.data.nbytes // 4) * 4, 4, _dtypes.buffer_size(r.data_type, r.shape))
        if not packs or packs[-1][1] + need > cap:
            packs.append([[], 0])
        pack = packs[-1]
        pack[0].append((r, pack[1]))
        pack[1] += -(-need // align) * align
    out = []
    for placed_here, _ in packs:
        r0, last = placed_here[0][0], placed_here[-1]
        size = last[1] + max(-(-last[0].data.nbytes // 4) * 4, 4, _dtypes.buffer_size(last[0].data_type, last[0].shape))
        what = f"constant {r0}" if len(placed_here) == 1 else f"{len(placed_here)} constants (first {r0})"
        buf = allocate(what, size, lambda size=size, what=what: device.create_buffer(
            size=size, usage=_STORAGE | wgpu.BufferUsage.UNIFORM, mapped_at_creation=True, label=what))
        for r, at in placed_here:  # the mapped buffer starts as zeros (WebGPU)
            if r.data.nbytes:
                buf.write_mapped(np.ascontiguousarray(r.data).reshape(-1).view(np.uint8), at)
        buf.unmap()
        out.append((buf, placed_here))
    return out


def _upload_texture(device, data: np.ndarray, width: int, label: str):
    """A float32 constant (``linalg.TextureConstant``: rows of ``width`` texels of 4 values) as
    an rgba32float texture that kernels bind as ``texture_2d<f32>``."""
    rows = data.size // (4 * width)
    tex = device.create_texture(size=(width, rows, 1), format=wgpu.TextureFormat.rgba32float,
                                usage=wgpu.TextureUsage.TEXTURE_BINDING | wgpu.TextureUsage.COPY_DST, label=label)
    device.queue.write_texture({"texture": tex}, np.ascontiguousarray(data, np.float32),
                               {"bytes_per_row": width * 16, "rows_per_image": rows}, (width, rows, 1))
    return tex


def _upload(device, data: np.ndarray, label: str):
    raw = np.ascontiguousarray(data).reshape(-1).view(np.uint8)  # the array's bytes, not copied
    pad = (-raw.nbytes) % 4 or (4 if not raw.nbytes else 0)
    if pad:
        raw = np.concatenate([raw, np.zeros(pad, np.uint8)])
    # constants may also be bound as uniform buffers (the tile kernel's B, see ops/linalg.py)
    return device.create_buffer_with_data(data=raw, usage=_STORAGE | wgpu.BufferUsage.UNIFORM, label=label)

