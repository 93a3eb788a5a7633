"""Lowering: how a graph node becomes kernel launches and buffer copies.

A lowering function (registered with :func:`webnn_gpu.ops._registry.lowering`) receives the
node and a :class:`LowerContext`, and calls ``lc.kernel(...)`` once per kernel it needs,
``lc.alias(out, src)`` for views (reshape), ``lc.copy(src, dst)`` for plain byte copies and
``lc.temp(...)`` for scratch values that live only while the node runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import _kernels
from ._kernels import Binding, KernelContext, workgroups
from ._ir import Value
from .errors import NotSupportedError

if TYPE_CHECKING:
    from ._ir import Node


_SCALAR_BYTES = {"f16": 2, "f32": 4, "i32": 4, "u32": 4, "bool": 4}
_WORKGROUP_VAR = re.compile(r"var<workgroup>\s+\w+\s*:\s*(.+?);")
_STORAGE_DECL = re.compile(r"@binding\([^)]*\)\s*var<storage\b")


def _type_bytes(t: str) -> int:
    """Bytes of a WGSL type made of scalars, vectors and fixed-size arrays (0 if unknown)."""
    t = t.strip()
    m = re.fullmatch(r"array<\s*(.+)\s*,\s*(\d+)u?\s*>", t)
    if m:
        return _type_bytes(m.group(1)) * int(m.group(2))
    m = re.fullmatch(r"vec([234])<\s*(\w+)\s*>", t)
    if m:
        lanes = int(m.group(1))
        return _SCALAR_BYTES.get(m.group(2), 0) * (4 if lanes == 3 else lanes)
    m = re.fullmatch(r"atomic<\s*(\w+)\s*>", t)
    return _SCALAR_BYTES.get(m.group(1) if m else t, 0)


def workgroup_bytes(limits) -> int:
    """The device's workgroup memory per workgroup (``max-compute-workgroup-storage-size`` of
    ``limits``; WebGPU's default 16384 without it): what a kernel's ``var<workgroup>`` arrays
    may take in all."""
    return int((limits or {}).get("max-compute-workgroup-storage-size", 16384))


def workgroup_storage_bytes(wgsl: str) -> int:
    """Bytes of ``var<workgroup>`` memory a shader declares (types we cannot size count 0)."""
    return sum(_type_bytes(t) for t in _WORKGROUP_VAR.findall(wgsl))


@dataclass
class KernelStep:
    """One compute dispatch: a pipeline, its bound values and workgroup counts."""

    template: str
    wgsl: str
    values: list[Value]
    groups: tuple[int, ...]
    label: str
    pipeline: Any = None
    node: Any = None
    #: per binding (byte offset, byte size) into its buffer, or None for the whole value
    ranges: list | None = None
    #: the user's own WGSL (``MLGraphBuilder.wgsl``): compile errors are the caller's
    user_code: bool = False
    #: floating-point operations of one dispatch (2 per multiply-add of a product kernel; 0 when
    #: not counted) and a short note of its size and variant, for ``webnn-gpu profile``
    flops: int = 0
    note: str = ""


@dataclass
class CopyStep:
    """A buffer-to-buffer copy of ``nbytes`` bytes (outside compute passes)."""

    src: Any  # a Value (or a graph output reference)
    dst: Any
    nbytes: int
    label: str = ""
    node: Any = None


@dataclass
class LowerContext:
    """What a lowering function works with. See the module docstring."""

    node: Node
    features: frozenset
    limits: dict
    #: the adapter's kernel-tuning profile (:func:`webnn_gpu._kernels.tuning_profile`)
    tuning: str = _kernels.DEFAULT_TUNING
    #: lanes of a subgroup the tile kernel may share loads across, 0 for none
    #: (:func:`webnn_gpu.ops.linalg.subgroup_lanes`)
    subgroup: int = 0
    steps: list = field(default_factory=list)
    aliases: dict = field(default_factory=dict)  # value id -> source Value
    #: value id -> (the value, the Value whose buffer holds it, byte offset): see :meth:`place`
    placed: dict = field(default_factory=dict)
    temps: list = field(default_factory=list)
    #: notes one graph's lowerings share (the same dict for every node of a build), e.g. the
    #: workgroup sizes of the tile kernels launched so far (:func:`webnn_gpu.ops.linalg._tile_workgroup`)
    shared: dict = field(default_factory=dict)

    @property
    def label(self) -> str:
        """``op [label]`` of the node."""
        return _kernels.op_where(self.node)

    def kernel(self, template: str, inputs: list[tuple[str, Value]], outputs: list[tuple[str, Value]],
               n: int, *, groups: tuple[int, int, int] | None = None, workgroup: int = _kernels.WORKGROUP,
               ranges: list | None = None, **variables) -> KernelStep:
        """Add a kernel launch.

        Arguments:
            template: path under ``shaders/``, e.g. ``"elementwise/map.wgsl"``.
            inputs / outputs: (binding name, Value) in binding order (inputs first).
            n: invocations the kernel guards against (``if (idx >= n) { return; }``).
            groups: explicit workgroup counts; by default ceil(n / workgroup), folded to 2-D.
            workgroup: invocations per workgroup.
            ranges: per binding (byte offset, byte size) to bind part of a value (chunked
                kernels); offsets must be multiples of minStorageBufferOffsetAlignment.
            variables: template-specific context.

        Raises:
            NotSupportedError: a buffer binding (not a texture) larger than maxStorageBufferBindingSize (the lowering
                must split such work itself).
        """
        from ._dtypes import buffer_size

        limit = int(self.limits.get("max-storage-buffer-binding-size", 128 << 20))
        for i, (name, v) in enumerate([*inputs, *outputs]):
            if getattr(v, "texture_width", 0):  # a texture (linalg.TextureConstant): linalg.texture_fits bounds it
                continue
            size = ranges[i][1] if ranges and ranges[i] else buffer_size(v.data_type, v.shape)
            if size > limit:
                raise NotSupportedError(
                    f"{self.label}: operand {name!r} ({v.data_type} {list(v.shape)}, {size} bytes) exceeds this "
                    f"device's maxStorageBufferBindingSize of {limit} bytes, and this kernel cannot split its work"
                )
        bindings = [Binding(name, v.data_type) for name, v in inputs]
        bindings += [Binding(name, v.data_type, output=True) for name, v in outputs]
        for key, name in (("max-compute-invocations-per-workgroup", "maxComputeInvocationsPerWorkgroup"),
                          ("max-compute-workgroup-size-x", "maxComputeWorkgroupSizeX")):
            if workgroup > int(self.limits.get(key, 256)):
                raise NotSupportedError(f"{self.label}: kernel {template!r} needs {workgroup} invocations per "
                                        f"workgroup, more than this device's {name} ({self.limits.get(key, 256)})")
        kc = KernelContext(template, bindings, int(n), workgroup, self.features, dict(variables))
        wgsl = kc.render()
        # the storage buffers the kernel declares (a parameter or constant bound as a uniform buffer
        # or a texture is none; an operand two epilogues read may be bound twice)
        storage = len(_STORAGE_DECL.findall(wgsl))
        max_buffers = int(self.limits.get("max-storage-buffers-per-shader-stage", 8))
        if storage > max_buffers:
            raise NotSupportedError(
                f"{self.label}: kernel {template!r} binds {storage} storage buffers, more than this "
                f"device's maxStorageBuffersPerShaderStage ({max_buffers})"
            )
        shared = workgroup_storage_bytes(wgsl)
        max_shared = workgroup_bytes(self.limits)
        if shared > max_shared:
            raise NotSupportedError(
                f"{self.label}: kernel {template!r} needs {shared} bytes of workgroup memory, more than this "
                f"device's maxComputeWorkgroupStorageSize ({max_shared})"
            )
        if groups is None:
            groups = workgroups(-(-int(n) // workgroup), self.limits, self.label)
        step = KernelStep(template, wgsl, [v for _, v in inputs] + [v for _, v in outputs], tuple(groups),
                          self.label, node=self.node, ranges=ranges)
        self.steps.append(step)
        return step

    def copy(self, src: Value, dst: Value) -> None:
        """Copy ``src``'s bytes into ``dst`` (same byte length)."""
        from ._dtypes import buffer_size

        self.steps.append(CopyStep(src, dst, buffer_size(src.data_type, src.shape), self.label, node=self.node))

    def alias(self, out: Value, src: Value) -> None:
        """Make ``out`` a view of ``src``'s buffer (same bytes, e.g. reshape)."""
        self.aliases[out.id] = src

    def place(self, part: Value, whole: Value, offset: int) -> None:
        """Store ``part`` (and every value it is a view of) in ``whole``'s buffer from byte
        ``offset`` on: its producer writes there (a concat read in place). The graph binds it
        at that offset, a multiple of the device's storage-buffer offset alignment."""
        self.placed[part.id] = (part, whole, offset)

    def temp(self, data_type: str, shape) -> Value:
        """A scratch value for this node's kernels."""
        v = Value(data_type, tuple(shape), "op")
        self.temps.append(v)
        return v
