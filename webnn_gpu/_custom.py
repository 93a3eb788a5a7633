"""Custom WGSL operators: ``MLGraphBuilder.wgsl`` (an extension; WebNN issue #6).

A custom operator is a graph node like any other (op ``"wgsl"``): its outputs flow into
the rest of the graph, its buffers come from the graph's arena, it is recorded into the same
command buffer as the built-in kernels, its pipeline comes from the context's pipeline cache
(compiled once, at ``build()``), and ``webnn-gpu profile`` times it under its label. The
compiler treats it as opaque: no pass matches the op name ``"wgsl"``, so nothing is fused
into it or across it.

Binding convention (all in ``@group(0)``; every declared binding must be used, since
pipelines are made with ``layout="auto"``, which drops unused bindings):

* ``@binding(i)`` for ``i < n``: input ``i`` as ``var<storage, read> NAME: array<T>``;
* ``@binding(n + j)``: output ``j`` as ``var<storage, read_write> NAME: array<T>``;
* ``@binding(n + m)`` (optional): ``var<uniform> NAME: array<vec4<u32>, 2 * (n + m)>``,
  the shapes: operand ``k`` (inputs, then outputs) has dimensions 0-3 in entry ``2k`` and
  4-7 in entry ``2k + 1``, padded with 1.

``T`` is the WGSL type of the operand's data type (float32 ``f32``, float16 ``f16`` (with
``enable f16;``), int32 ``i32``, uint32 ``u32``), or ``vec2<T>``/``vec4<T>`` when the
element count is a multiple of 2/4, or ``atomic<T>`` for an int32/uint32 output. The entry
point is ``@compute fn main``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from types import SimpleNamespace

import jinja2
import numpy as np

from . import _kernels
from . import _validate as V
from .errors import MLTypeError, NotSupportedError, OperationError, where

OP = "wgsl"
#: WebNN data type -> WGSL scalar type of a custom operator's bindings.
WGSL_TYPES = {"float32": "f32", "float16": "f16", "int32": "i32", "uint32": "u32"}
#: Template variables the engine sets (constants may not use these names).
RESERVED = ("inputs", "outputs", "workgroup_size", "shapes_binding")

_env = jinja2.Environment(undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                          keep_trailing_newline=True, autoescape=False)


# ---------------------------------------------------------------------- at the call
def workgroup_size(label: str, value, limits: dict) -> tuple[int, int, int]:
    """``workgroup_size=`` as (x, y, z), checked against the device limits."""
    dims = [value] if V.is_int(value) else value
    if isinstance(dims, (str, bytes)) or not isinstance(dims, Sequence) or not 1 <= len(dims) <= 3 \
            or not all(V.is_int(d) and d >= 1 for d in dims):
        V.fail(OP, label, "workgroup_size", "a positive int or a sequence of 1 to 3 positive ints", value)
    padded = [int(d) for d in dims] + [1] * (3 - len(dims))
    xyz = (padded[0], padded[1], padded[2])
    for d, axis in zip(xyz, "xyz"):
        lim = int(limits.get(f"max-compute-workgroup-size-{axis}", 256))
        if d > lim:
            raise NotSupportedError(f"{where(OP, label)}: argument 'workgroup_size': {d} invocations along {axis} "
                                    f"exceed this device's maxComputeWorkgroupSize{axis.upper()} ({lim})")
    lim = int(limits.get("max-compute-invocations-per-workgroup", 256))
    if math.prod(xyz) > lim:
        raise NotSupportedError(f"{where(OP, label)}: argument 'workgroup_size': {math.prod(xyz)} invocations per "
                                f"workgroup exceed this device's maxComputeInvocationsPerWorkgroup ({lim})")
    return xyz


def dispatch_size(label: str, dispatch, input_shapes: list, out_elements: int, wg: tuple, limits: dict):
    """``dispatch=`` as (x, y, z) workgroup counts.

    None: ``ceil(elements of outputs[0] / invocations per workgroup)`` along x, folded into y
    past maxComputeWorkgroupsPerDimension. An int or 1 to 3 ints; or a function of the input
    shapes (a list of tuples) returning one of those.
    """
    if dispatch is None:
        return _kernels.workgroups(-(-out_elements // math.prod(wg)), limits, where(OP, label))
    value = dispatch
    if callable(dispatch):
        try:
            value = dispatch([tuple(s) for s in input_shapes])
        except Exception as exc:  # noqa: BLE001 - the user's function: report it as theirs
            raise MLTypeError(f"{where(OP, label)}: argument 'dispatch': the function raised "
                              f"{type(exc).__name__}: {exc}") from exc
    dims = [value] if V.is_int(value) else value
    if isinstance(dims, (str, bytes)) or not isinstance(dims, Sequence) or not 1 <= len(dims) <= 3 \
            or not all(V.is_int(d) and d >= 1 for d in dims):
        V.fail(OP, label, "dispatch", "a positive int, 1 to 3 positive ints, or a function of the input shapes "
               "returning those", value)
    xyz = tuple(int(d) for d in dims) + (1,) * (3 - len(dims))
    lim = int(limits.get("max-compute-workgroups-per-dimension", 65535))
    if max(xyz) > lim:
        raise NotSupportedError(f"{where(OP, label)}: argument 'dispatch': {list(xyz)} workgroups exceed this "
                                f"device's maxComputeWorkgroupsPerDimension ({lim})")
    return xyz


def render(label: str, code, constants, inputs: list, outputs: list, wg: tuple) -> str:
    """The WGSL text: ``code`` rendered as a Jinja2 template (StrictUndefined).

    Variables: ``inputs`` / ``outputs`` (each with ``data_type``, ``shape``, ``size``,
    ``type`` (the WGSL scalar), ``binding``), ``workgroup_size`` (``"x, y, z"``),
    ``shapes_binding`` (n + m) and every entry of ``constants``.
    """
    if not isinstance(code, str) or not code.strip():
        V.fail(OP, label, "code", "a WGSL compute shader (a non-empty str)", code)
    variables: dict = {}
    if constants is not None:
        if not isinstance(constants, Mapping):
            V.fail(OP, label, "constants", "a dict of template variables", constants)
        for k, v in constants.items():
            if not isinstance(k, str) or not k.isidentifier() or k in RESERVED:
                V.fail(OP, label, "constants", f"identifier keys other than {', '.join(RESERVED)}", k)
            variables[k] = v
    n = len(inputs)
    ctx = {
        "inputs": [SimpleNamespace(data_type=dt, shape=list(s), size=V.element_count(s), type=WGSL_TYPES[dt],
                                   binding=i) for i, (dt, s) in enumerate(inputs)],
        "outputs": [SimpleNamespace(data_type=dt, shape=list(s), size=V.element_count(s), type=WGSL_TYPES[dt],
                                    binding=n + j) for j, (dt, s) in enumerate(outputs)],
        "workgroup_size": ", ".join(map(str, wg)),
        "shapes_binding": n + len(outputs),
    }
    try:
        return _env.from_string(code).render(**variables, **ctx)
    except jinja2.TemplateSyntaxError as exc:
        raise MLTypeError(f"{where(OP, label)}: argument 'code': template syntax error at line {exc.lineno}: "
                          f"{exc.message}") from exc
    except jinja2.UndefinedError as exc:
        raise MLTypeError(f"{where(OP, label)}: argument 'code': {exc.message} (template variables: "
                          f"{', '.join(sorted([*ctx, *variables]))})") from exc
    except Exception as exc:  # noqa: BLE001 - an error inside the user's template
        raise MLTypeError(f"{where(OP, label)}: argument 'code': rendering the template failed: "
                          f"{type(exc).__name__}: {exc}") from exc


def shapes_data(inputs: list, outputs: list) -> np.ndarray:
    """The optional uniform: per operand 8 dimensions (padded with 1) as u32."""
    rows = []
    for _, shape in [*inputs, *outputs]:
        dims = [int(d) for d in shape] + [1] * (8 - len(shape))
        rows.append(dims)
    return np.asarray(rows, dtype=np.uint32).reshape(-1)


# ---------------------------------------------------------------------- at build()
_VAR = re.compile(r"((?:@\s*\w+\s*(?:\([^)]*\))?\s*)+)var\s*(<[^>]*>)?\s*(\w+)\s*:\s*([^;=]+?)\s*;")
_ATTR = re.compile(r"@\s*(group|binding)\s*\(\s*(\d+)\s*[iu]?\s*\)")
_ENTRY = re.compile(r"@\s*compute\b[^{;]*?\bfn\s+main\s*\(")
_WG = re.compile(r"@\s*workgroup_size\s*\(([^)]*)\)")


def _strip_comments(text: str) -> str:
    """``text`` with comments blanked out (newlines kept, so line numbers stay)."""
    def blank(m):
        return re.sub(r"[^\n]", " ", m.group(0))

    return re.sub(r"//[^\n]*|/\*.*?\*/", blank, text, flags=re.S)


def check_bindings(node) -> bool:
    """Check the rendered WGSL of a ``wgsl`` node against the binding convention; whether it
    declares the optional shapes uniform.

    Raises:
        MLTypeError: naming the label, the WGSL line and what was expected.
    """
    label = node.label
    text = _strip_comments(node.attrs["wgsl"])
    n, m = len(node.inputs), len(node.outputs)
    operands = [("input", i, v) for i, v in enumerate(node.inputs)] + \
               [("output", j, v) for j, v in enumerate(node.outputs)]

    def bad(line: int, what: str):
        raise MLTypeError(f"{where(OP, label)}: argument 'code': WGSL line {line}: {what}")

    seen: dict[int, tuple] = {}
    for mt in _VAR.finditer(text):
        attrs = dict(_ATTR.findall(mt.group(1)))
        if "binding" not in attrs:
            continue
        line = text.count("\n", 0, mt.start(3)) + 1
        group, binding = int(attrs.get("group", -1)), int(attrs["binding"])
        name, space, wgsl_type = mt.group(3), (mt.group(2) or "").strip("<> "), re.sub(r"\s+", "", mt.group(4))
        if group != 0:
            bad(line, f"binding {name!r} is in @group({group}); the convention puts every binding in @group(0)")
        if binding in seen:
            bad(line, f"@binding({binding}) is declared twice (also at line {seen[binding][0]})")
        seen[binding] = (line, name)
        access = [p.strip() for p in space.split(",")]
        if binding < n + m:
            kind, k, v = operands[binding]
            scalar = WGSL_TYPES[v.data_type]
            want_access = ["storage", "read"] if kind == "input" else ["storage", "read_write"]
            if access not in (want_access, ["storage"] if kind == "input" else want_access):
                bad(line, f"@binding({binding}) {name!r} is {kind} {k} ({v.data_type} {list(v.shape)}): expected "
                          f"var<{', '.join(want_access)}>, got var<{space}>")
            allowed = [f"array<{scalar}>"]
            allowed += [f"array<vec{lanes}<{scalar}>>" for lanes in (2, 4) if v.size % lanes == 0]
            if kind == "output" and scalar in ("i32", "u32"):
                allowed.append(f"array<atomic<{scalar}>>")
            if wgsl_type not in allowed:
                bad(line, f"@binding({binding}) {name!r} is {kind} {k}, a {v.data_type} {list(v.shape)} operand: "
                          f"expected type {' or '.join(allowed)}, got {mt.group(4).strip()}")
        elif binding == n + m:
            rows = 2 * (n + m)
            if access != ["uniform"] or not re.fullmatch(rf"array<vec4<u32>,{rows}u?>", wgsl_type):
                bad(line, f"@binding({binding}) {name!r} is the optional shapes uniform: expected "
                          f"var<uniform> {name}: array<vec4<u32>, {rows}>, got var<{space}> {name}: "
                          f"{mt.group(4).strip()}")
        else:
            bad(line, f"@binding({binding}) {name!r}: this node has {n} input(s) and {m} output(s), so the "
                      f"bindings are 0..{n + m - 1}, plus {n + m} for the optional shapes uniform")
        if len(re.findall(rf"\b{re.escape(name)}\b", text)) < 2:
            bad(line, f"@binding({binding}) {name!r} is declared but never used (pipelines use layout='auto', "
                      f"which drops unused bindings); use it, or leave the operand out")
    for b in range(n + m):
        if b not in seen:
            kind, k, v = operands[b]
            raise MLTypeError(f"{where(OP, label)}: argument 'code': {kind} {k} ({v.data_type} {list(v.shape)}) "
                              f"needs a declaration at @group(0) @binding({b}); none found")
    entry = _ENTRY.search(text)
    if entry is None:
        raise MLTypeError(f"{where(OP, label)}: argument 'code': expected a compute entry point "
                          f"'@compute @workgroup_size(...) fn main(...)', found none")
    attrs_before = list(_WG.finditer(text, entry.start(), entry.end()))  # main's own attribute
    wg = attrs_before[-1] if attrs_before else None
    if wg is not None:
        parts = [p.strip() for p in wg.group(1).split(",") if p.strip()]
        if all(re.fullmatch(r"\d+[iu]?", p) for p in parts):
            declared = tuple(int(p.rstrip("iu")) for p in parts) + (1,) * (3 - len(parts))
            if declared != tuple(node.attrs["workgroup_size"]):
                line = text.count("\n", 0, entry.start()) + 1
                bad(line, f"@workgroup_size{declared} differs from workgroup_size="
                          f"{tuple(node.attrs['workgroup_size'])} given to the builder (use "
                          f"@workgroup_size({{{{ workgroup_size }}}}))")
    return (n + m) in seen


def compile_pipeline(context, step) -> None:
    """Compile a custom node's shader through the context's pipeline cache.

    Raises:
        MLTypeError: the WGSL does not compile (the message has wgpu's text with the line
            and an excerpt).
        OperationError: another failure of the device.
    """
    try:
        context._pipelines.get(step.wgsl, template=step.template, label=step.label)
    except OperationError as exc:
        cause = exc.__cause__
        if cause is None or type(cause).__name__ != "GPUValidationError":
            raise
        msg = str(cause)
        m = re.search(r"wgsl:(\d+):(\d+)", msg)
        at = f"WGSL line {m.group(1)}, column {m.group(2)}" if m else "the WGSL"
        detail = "\n".join(ln for ln in msg.splitlines() if ln.strip() and "Caused by" not in ln
                           and "Validation Error" not in ln)
        raise MLTypeError(f"{step.label}: argument 'code': {at} does not compile:\n{detail}\n"
                          f"--- rendered WGSL ---\n{_kernels._excerpt(step.wgsl, msg)}") from cause


def lower(node, lc) -> None:
    """The node's one kernel launch (the shader as rendered at the call)."""
    from ._lower import KernelStep

    from ._ir import Value

    values = list(node.inputs) + list(node.outputs)
    if check_bindings(node):
        data = shapes_data([(v.data_type, v.shape) for v in node.inputs], [(v.data_type, v.shape) for v in node.outputs])
        values.append(Value("uint32", (data.size,), "constant", data=data))
    lc.steps.append(KernelStep(f"wgsl {node.label or '(unlabelled)'}", node.attrs["wgsl"], values,
                               tuple(node.attrs["groups"]), lc.label, node=node, user_code=True))


def make_node_attrs(label: str, code, inputs: list, outputs: list, wg: tuple, dispatch, constants,
                    limits: dict) -> dict:
    """Validate the call's WGSL arguments and return the node's attrs."""
    text = render(label, code, constants, inputs, outputs, wg)
    groups = dispatch_size(label, dispatch, [s for _, s in inputs], V.element_count(outputs[0][1]), wg, limits)
    return {"wgsl": text, "groups": groups, "workgroup_size": wg}


def register() -> None:
    from .ops._registry import LOWERINGS

    LOWERINGS[OP] = lower


def is_custom(step) -> bool:
    """Whether a kernel step runs a user's WGSL."""
    return bool(getattr(step, "user_code", False))


__all__ = ["WGSL_TYPES", "check_bindings", "compile_pipeline", "lower", "make_node_attrs", "is_custom",
           "shapes_data", "register"]
