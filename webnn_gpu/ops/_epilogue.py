"""Fused epilogues: element-wise steps applied to each output value of conv2d,
conv_transpose2d, matmul, gemm, resample2d, normalizations and windowed pools before the
kernel stores it.

A compiler pass (or a test) puts the steps in ``node.attrs["epilogue"]``; the kernels of
:mod:`webnn_gpu.ops.linalg` and :mod:`webnn_gpu.ops.conv` apply them. The format is a list
of dicts, applied in order to the value ``x``:

``{"op": NAME, **options}``
    A unary element-wise operator of :mod:`webnn_gpu.ops.elementwise` (``"relu"``,
    ``"sigmoid"``, ``"tanh"``, ``"hard_swish"``, ``"gelu"``, ...). Operators with options
    carry them as keys with the builder's names and defaults: ``{"op": "clamp",
    "min_value": 0.0, "max_value": 6.0}``, ``{"op": "leaky_relu", "alpha": 0.1}``,
    ``{"op": "linear", "alpha": 2.0, "beta": 1.0}``, ``elu``, ``hard_sigmoid``.
``{"op": NAME, "input": i}``
    A binary element-wise operator (``"add"``, ``"sub"``, ``"mul"``, ``"div"``, ``"max"``,
    ``"min"``, ``"pow"``, ``"prelu"``: ``x`` where ``x >= 0``, else the operand times ``x``)
    of ``x`` and ``node.inputs[i]``, whose data type is the output's.
    Without ``"axis"`` the operand's shape broadcasts to the output shape (NumPy rules; a
    same-shaped operand, e.g. a residual add, is read at the output's own index). With
    ``"axis": a`` the operand is 1-D and is read at the output coordinate along axis ``a``
    (a bias: axis 1 for NCHW outputs, 3 for NHWC). ``"reverse": True`` puts the operand
    first (``input - x``); ``"scale": s`` multiplies the operand by ``s`` first (gemm's
    ``beta * c``). With ``"pad": [b0, b1, ...]`` (one offset per output axis) the operand has
    the output's rank and the output element at coordinate ``c`` reads it at ``c - b`` where
    that is inside it, else 0: ``b >= 0`` places the operand inside a zero-filled frame (a
    zero ``pad`` folded into its reader), ``b < 0`` reads a window of a larger operand (a
    ``slice`` folded into its reader).
``{"op": NAME, "input": i, "pool": {...}}``
    The operand is the value a windowed pool makes of ``node.inputs[i]``, computed where the
    step reads it (a pool fused into its reader, ``fuse_pool_residual``): ``"pool"`` holds
    ``"op"`` (``"max"`` or ``"average"``), ``"window"``, ``"strides"``, ``"padding"``
    (``[top, bottom, left, right]``), ``"layout"`` (``"nhwc"`` / ``"nchw"``) and
    ``"shape"`` (the pooled shape, which then stands for the operand's shape: ``"pad"``
    applies to it). Taps in the padding are left out of a max (every window holds one
    inside); an average's windows lie inside the input (the divisor is the window's size).
``{"op": NAME, "input": i, "up2": {"steps": [...]}}``
    The operand is the exact 2x bilinear upsampling (half-pixel centers, clamped at the
    borders: resample2d's linear mode doubling height and width) of ``node.inputs[i]``, an
    NHWC ``[N, H, W, C]`` value, computed where the step reads it from the four pixels around
    the output's (a resample fused into its reader, ``fuse_upsampled_residual``), then
    ``"steps"``: unary steps of :data:`VEC4_UNARY` (the resample's own epilogue, e.g. a
    clamp). The output is ``[N, 2H, 2W, C]`` (the operand is read at the output's own index:
    no ``"axis"``, ``"pad"``, ``"pool"`` or ``"scale"``; :func:`up2_step_ok`).

Operands are appended to ``node.inputs`` (see :func:`attach`); the graph binds every input
of a node and the dead-code pass keeps them alive, so nothing else is needed. An operand must
be computed before the node in the node list (a fusion pass that folds ``add(conv, skip)``
into the conv must keep ``skip``'s producer ahead of it). The whole
chain is computed in f32 (float16 outputs are rounded once, at the store), reusing the
expressions and the ``shaders/_lib/activations.wgsl`` helpers of the standalone
element-wise kernels. A kernel's own options come first: conv's bias and gemm's alpha and
``beta * c`` are steps the lowering puts before the node's steps.

Kernels call the generated ``fn epilogue(ev0: f32, o: u32, ch: u32) -> f32`` with the output's
linear index ``o`` and, when they know it cheaply, the coordinate ``ch`` along
``chan_axis`` (the channel or column axis), which bias-like steps on that axis use directly.
Operands read at ``ch`` alone are loaded by ``ep_q(ch)`` into a struct passed as a fourth
argument (``Epilogue.chan``): a kernel storing a tile of outputs loads a bias once per
column instead of once per output (on lavapipe every storage load is a per-lane loop, and
those loads were a fifth of a pointwise convolution's time). ``tile.apply`` passes
``ep_q(ch)`` itself when the kernel has nothing hoisted.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
import re
from types import SimpleNamespace
from typing import Any

from .. import _env
from .._kernels import broadcast_strides, strides
from .elementwise import _OPTION_OPS, _TABLE, expression, literal

#: Binary element-wise operators allowed as epilogue steps.
BINARY = ("add", "sub", "mul", "div", "max", "min", "pow", "prelu")
#: Steps :attr:`Epilogue.code4` computes on a vec4: unary operators whose expression is one
#: WGSL expression of ``f32`` literals and component-wise built-ins (``f32(`` becomes a splat
#: ``vec4<f32>(``), binary ones on a per-channel operand (``EpQ``) or the given operand.
VEC4_UNARY = ("relu", "clamp", "hard_swish", "leaky_relu", "hard_sigmoid", "linear", "abs", "neg")
VEC4_BINARY = ("add", "sub", "mul", "div", "max", "min")


@dataclass
class Epilogue:
    """The WGSL of one kernel's epilogue.

    Attributes:
        operands: (binding name, Value) pairs the kernel binds after its main inputs.
        functions: (T, [helper names]) for ``act.defs``.
        code: WGSL declaring ``fn epilogue(x: f32, o: u32, ch: u32) -> f32`` (or, with
            ``chan``, ``fn epilogue(x: f32, o: u32, ch: u32, q: EpQ) -> f32`` and
            ``fn ep_q(ch: u32) -> EpQ``).
        empty: True when there are no steps (kernels may skip the call).
        chan: see the attribute.
    """

    operands: list = field(default_factory=list)
    functions: list = field(default_factory=list)
    code: str = ""
    empty: bool = True
    #: True when some operand is read at the channel ``ch`` alone (a bias): ``epilogue`` then
    #: takes a fourth argument, the ``EpQ`` those values, made by ``ep_q(ch)``, so a kernel
    #: whose invocations store many outputs of the same channels loads them once.
    chan: bool = False
    #: The WGSL function name (``epilogue``; a kernel with two epilogues names the second
    #: otherwise); ``q_fn`` / ``q_struct`` name the hoisting helper and its struct.
    fn: str = "epilogue"
    q_fn: str = "ep_q"
    q_struct: str = "EpQ"
    #: The fields of ``EpQ`` (``q0`` .. ``q{q_count - 1}``, f32): a kernel may build one from
    #: values other invocations loaded (the tile kernel's subgroup variant).
    q_count: int = 0
    #: True when the kernel passes the operand ``given`` to :func:`build` as a last argument
    #: ``gv: f32`` (a value it already holds in a register) instead of the epilogue loading it.
    given: bool = False
    #: For a given operand read through a ``"pool"`` step (:func:`given_pool_ok`) or placed
    #: among zero channels by a ``"pad"`` step (:func:`given_chan_pad_ok`): WGSL of
    #: ``fn <fn>_g4(i4: u32) -> vec4<f32>`` (the pooled operand's four values of the output's
    #: vec4 ``i4``, its binding an array of vec4; 0 in the zero channels) and ``fn <fn>_g1(o: u32) -> f32`` (one value,
    #: a scalar binding), the binding named ``GIVEN`` (``_lib/tile.wgsl``'s ``given_fns``
    #: names it); empty otherwise: the kernel loads the operand at the output's index.
    given_g4: str = ""
    given_g1: str = ""
    #: For a given operand read through an ``"up2"`` step whose channels are a multiple of 8: WGSL
    #: of ``fn <fn>_g8(w: u32) -> array<vec4<f32>, 2>``, the output's two vec4s ``2w, 2w + 1``
    #: from the binding ``GIVEN`` as 8-value u64 words (float32 ``vec4<u64>``, float16
    #: ``vec2<u64>``; split by the kernel's ``w_up``): half the loads of two ``given_g4`` calls.
    #: ``matmul/tile.wgsl`` calls it where it stores 8-value words (``x8``); empty otherwise.
    given_g8: str = ""
    #: The binding names of the operands ``ep_q`` loads, in ``EpQ`` field order (``q0`` ..).
    chan_operands: list = field(default_factory=list)
    #: The line of ``code`` that defines ``ep_q`` (with ``chan``).
    q_def: str = ""
    #: True when no step reads one of ``chan_operands`` other than at ``ch`` (``ep_q`` alone
    #: loads them).
    chan_only: bool = False
    #: WGSL of ``fn <fn>_v4(v: vec4<f32>, o: u32, ch: u32[, q0..q3: EpQ][, g: vec4<f32>]) -> vec4<f32>``
    #: computing the four channels ``ch .. ch + 3`` with vector operations (the signature of
    #: ``conv/_rows.wgsl``'s per-lane helper, which calls ``epilogue`` four times); empty where
    #: some step is not one of :data:`VEC4_UNARY` / :data:`VEC4_BINARY` on an ``EpQ`` or the
    #: given operand (the kernel then uses the per-lane helper). The same operations per
    #: channel, in the same order; lavapipe's front end makes pipelines with it about 12% faster
    #: (each call of the per-lane helper is four inlined functions). ``matmul/tile.wgsl`` calls it
    #: once per stored vec4 too. ``WEBNN_GPU_FORCE_EP_V4=lanes`` leaves it empty (the per-lane
    #: helper everywhere, for side-by-side runs).
    code4: str = ""
    #: The steps and the keyword arguments :func:`build` made this from: ``build(node, out,
    #: steps[:-1], **options)`` is the same epilogue without its last step
    #: (``linalg.clamp_param``, which applies a last clamp from run-time bounds).
    steps: list = field(default_factory=list)
    options: dict = field(default_factory=dict)

    def without_q(self) -> Epilogue | None:
        """This epilogue for a kernel that writes the ``EpQ`` values into its text as constants:
        ``code`` without ``ep_q`` and ``operands`` without the ones it loads; None where there
        is no ``ep_q`` or some step reads one of its operands elsewhere too (``chan_only``)."""
        if not self.chan or not self.chan_only:
            return None
        return replace(self, operands=[(n, v) for n, v in self.operands if n not in self.chan_operands],
                       code="\n".join(line for line in self.code.split("\n") if line != self.q_def), q_def="")


#: The kernels that apply ``attrs["epilogue"]`` (see :func:`hosts`), with the number of input
#: slots their own operands take (conv2d's bias and gemm's c are optional inputs at index 2:
#: epilogue operands go after them, the slot stays None when the option is absent).
HOST_SLOTS = {"conv2d": 3, "conv_transpose2d": 3, "matmul": 2, "gemm": 3, "average_pool2d": 1, "l2_pool2d": 1,
              "max_pool2d": 1, "resample2d": 1, "batch_normalization": 5, "instance_normalization": 3,
              "layer_normalization": 3, "rms_normalization": 3, "gather": 2}


def hosts(node) -> bool:
    """Whether ``node``'s kernel applies an epilogue: conv2d, conv_transpose2d, matmul, gemm,
    resample2d and batch, instance, layer and RMS normalization always; a float gather; a float pool when it runs ``pool/pool2d.wgsl`` (a windowed pool,
    not a global one, which runs as a reduction)."""
    if node.op not in HOST_SLOTS or len(node.outputs) != 1:
        return False
    if node.op == "gather":  # a float gather (an embedding); others move raw values
        return node.outputs[0].data_type in ("float32", "float16")
    if node.op.endswith("_pool2d"):
        from .pool import _is_global

        return (node.outputs[0].data_type in ("float32", "float16") and not _is_global(node)
                and not any(k in node.attrs for k in ("input_add", "input_partials")))
    return True


def attach(node, steps: list[dict], operands=()) -> None:
    """Append ``steps`` to a node's epilogue; ``operands`` (Values) become new node inputs.

    A step's ``"input"`` may name an operand by its position in ``operands`` as
    ``{"operand": k}`` instead of a node input index; it is rewritten to the index the
    operand gets in ``node.inputs``. (The helper for the fusion pass and for tests.)
    """
    base = len(node.inputs)
    node.inputs.extend(operands)
    out = []
    for step in steps:
        step = dict(step)
        if "operand" in step:
            step["input"] = base + step.pop("operand")
        out.append(step)
    node.attrs["epilogue"] = steps_of(node) + out


def merged_functions(*eps) -> list:
    """The activation helpers several epilogues of one kernel call (None and empty epilogues
    skipped), as ``[(T, [names])]`` for ``_lib/epilogue.wgsl``'s ``defs``: a helper two
    epilogues call is defined once; each epilogue's own code then comes from ``ep.code``."""
    by_type: dict[str, set] = {}
    for ep in eps:
        for T, names in ep.functions if ep is not None and not ep.empty else ():
            by_type.setdefault(T, set()).update(names)
    return sorted((T, sorted(names)) for T, names in by_type.items())


def steps_of(node) -> list[dict]:
    """The epilogue steps of a node (``attrs["epilogue"]``, a list; empty by default)."""
    steps = node.attrs.get("epilogue") or []
    if not isinstance(steps, (list, tuple)):
        raise ValueError(f"{node.op}: attrs['epilogue'] must be a list of steps, got {type(steps).__name__}")
    return list(steps)


def build(node, out, steps: list[dict], *, chan_axis: int | None = None, first_binding: str = "e",
          name: str = "epilogue", given: int | None = None, given_pad: bool = False) -> Epilogue:
    """Compile ``steps`` for a kernel writing ``out`` (a Value) of ``node``.

    Arguments:
        node: the graph node (its ``inputs`` hold the operands steps refer to).
        out: the output Value.
        steps: the steps (see the module docstring).
        chan_axis: the output axis whose coordinate the kernel passes as ``ch``.
        first_binding: prefix of the operand binding names.
        name: the WGSL function's name (a second epilogue in one kernel needs another one;
            its helpers are then ``<name>_q`` and ``<name>Q``).
        given: the index of a node input the kernel holds at each output's own index (a
            depthwise conv's input, for a residual add): steps reading it there use the
            function's last argument ``gv`` instead of a load.
        given_pad: the kernel holds the value of the ``given`` operand's step whatever its
            ``"pad"`` and ``"pool"`` (the padded, pooled value, 0 outside the operand), and
            passes it as ``gv`` (the caller checks the frame and the window: the channel-lane
            depthwise + projection kernel computes it from its held input rows).

    Returns:
        Epilogue: operands to bind, helper functions and the WGSL code.

    Raises:
        ValueError: an unknown op, a missing or misshaped operand (a bug of the caller).
    """
    ep = Epilogue(steps=list(steps), options=dict(chan_axis=chan_axis, first_binding=first_binding, name=name,
                                                  given=given, given_pad=given_pad))
    if name != "epilogue":
        ep.fn, ep.q_fn, ep.q_struct = name, f"{name}_q", f"{name}Q"
    out_shape = tuple(out.shape)
    out_strides = strides(out_shape)
    f32_value = SimpleNamespace(data_type="float32")
    funcs: set[tuple[str, str]] = set()
    lines = [f"fn {ep.fn}(ev0: f32, o: u32, ch: u32) -> f32 {{", "  var ev = ev0;"]
    vlines: list[str] | None = ["  var ev = v;"]  # code4's body (None: a step it cannot take)
    bound: dict[int, str] = {}
    chan_reads: list[str] = []  # operands read at `ch` alone, in EpQ order
    read_elsewhere: set[str] = set()  # operands some step reads at another index
    pool_fns: list[str] = []  # the helpers of "pool" steps
    for n, step in enumerate(steps):
        if not isinstance(step, dict) or not isinstance(step.get("op"), str):
            raise ValueError(f"{node.op}: epilogue step {n} must be a dict with an 'op' string, got {step!r}")
        op = step["op"]
        if "input" in step:
            if op not in BINARY:
                raise ValueError(f"{node.op}: epilogue step {n}: {op!r} is not a binary op ({', '.join(BINARY)})")
            i = step["input"]
            if not isinstance(i, int) or not 0 <= i < len(node.inputs) or node.inputs[i] is None:
                raise ValueError(f"{node.op}: epilogue step {n}: 'input' {i!r} is not an input of the node")
            v = node.inputs[i]
            if v.data_type != out.data_type:
                raise ValueError(f"{node.op}: epilogue step {n}: operand data type {v.data_type} != {out.data_type}")
            pool = step.get("pool")
            held = given_pad and i == given  # the kernel holds the (padded, maybe pooled) value
            up = step.get("up2")
            chan_pad = not held and pool is None and up is None and i == given and given_chan_pad_ok(step, v, out)
            if held:
                ep.given = True
                y = "gv"
            elif up is not None:  # the operand read is the 2x upsampling of v (helper functions)
                if not up2_step_ok(step, v, out):
                    raise ValueError(f"{node.op}: epilogue step {n}: an 'up2' step needs a float NHWC operand half "
                                     f"the output's height and width ({list(out_shape)}) with its channels, read "
                                     f"at the output's index, and unary steps of {', '.join(VEC4_UNARY)}; got "
                                     f"shape {list(v.shape)}, step {step!r}")
                if i == given and given_up2_ok(step, v, out):
                    # the kernel loads it as vec4 (or one value, or 8 as words) through the helpers
                    ep.given = True
                    ep.given_g4, ep.given_g1 = (_up2_fn(f"{ep.fn}_g4", "GIVEN", 4, v, up, out_shape),
                                                _up2_fn(f"{ep.fn}_g1", "GIVEN", 1, v, up, out_shape))
                    if v.shape[3] % 8 == 0:
                        ep.given_g8 = _up2_fn(f"{ep.fn}_g8", "GIVEN", 8, v, up, out_shape)
                    y = "gv"
                else:
                    if i not in bound:
                        bound[i] = f"{first_binding}{len(bound)}"
                        ep.operands.append((bound[i], v))
                    read_elsewhere.add(bound[i])
                    pool_fns.append(_up2_fn(f"{ep.fn}_up{n}", bound[i], 1, v, up, out_shape))
                    y = f"{ep.fn}_up{n}(o)"
            elif pool is not None and i == given and given_pool_ok(step, v, out):
                # the kernel loads the pooled operand as vec4 (or one value) through the helpers
                ep.given = True
                ep.given_g4, ep.given_g1 = _given_pool_fns(node, n, ep.fn, v, step, out_shape)
                y = "gv"
            elif chan_pad:
                # the operand placed among zero channels: the kernel loads it as vec4 through the helpers
                ep.given = True
                ep.given_g4, ep.given_g1 = _given_chan_pad_fns(ep.fn, v, step, out_shape)
                y = "gv"
            elif pool is not None:  # the operand read is the pool's window over v (a helper function)
                if step.get("axis") is not None:
                    raise ValueError(f"{node.op}: epilogue step {n}: 'pool' and 'axis' exclude each other")
                if i not in bound:
                    bound[i] = f"{first_binding}{len(bound)}"
                    ep.operands.append((bound[i], v))
                read_elsewhere.add(bound[i])
                helper = f"{ep.fn}_pool{n}"
                pool_fns.append(_pool_fn(node, n, helper, bound[i], v, pool))
                v = SimpleNamespace(shape=tuple(pool["shape"]), data_type=v.data_type)  # the pooled operand
                if step.get("pad") is not None:
                    index, inside = _padded_index(node, n, v, step["pad"], out_shape, chan_axis)
                else:
                    index, inside = _operand_index(node, n, v, None, out_shape, out_strides, None), ""
                y = (f"select(0.0, {helper}(select(0u, {index}, {inside})), {inside})" if inside
                     else f"{helper}({index})")
            elif step.get("pad") is not None:
                if step.get("axis") is not None:
                    raise ValueError(f"{node.op}: epilogue step {n}: 'pad' and 'axis' exclude each other")
                index, inside = _padded_index(node, n, v, step["pad"], out_shape, chan_axis)
            else:
                index, inside = _operand_index(node, n, v, step.get("axis"), out_shape, out_strides, chan_axis), ""
            if pool is not None or held or chan_pad or up is not None:
                pass
            elif inside or step.get("pad") is not None and index != "o":
                if i not in bound:
                    bound[i] = f"{first_binding}{len(bound)}"
                    ep.operands.append((bound[i], v))
                name = bound[i]
                read_elsewhere.add(name)
                y = (f"select(0.0, f32({name}[select(0u, {index}, {inside})]), {inside})" if inside
                     else f"f32({name}[{index}])")
            elif i == given and index == "o":
                ep.given = True
                y = "gv"
            else:
                if i not in bound:
                    bound[i] = f"{first_binding}{len(bound)}"
                    ep.operands.append((bound[i], v))
                name = bound[i]
                if index == "ch":
                    if name not in chan_reads:
                        chan_reads.append(name)
                    y = f"q.q{chan_reads.index(name)}"
                else:
                    read_elsewhere.add(name)
                    y = f"f32({name}[{index}])"
            if "scale" in step:
                y = f"({literal(step['scale'], 'float32')} * {y})"
            args = [y, "ev"] if step.get("reverse") else ["ev", y]
            fake = SimpleNamespace(op=op, inputs=[f32_value, f32_value], attrs={})
            stmts, expr, fs = expression(fake, args)
            if vlines is not None and op in VEC4_BINARY and re.fullmatch(r"q\.q\d+|gv|\(f32\([^()]*\) \* (q\.q\d+|gv)\)", y):
                vy = re.sub(r"q\.q(\d+)", lambda m: "vec4<f32>(" + ", ".join(f"q{c}.q{m[1]}" for c in range(4)) + ")",
                            y).replace("gv", "g")
                vstmts, vexpr, _ = expression(fake, [vy, "ev"] if step.get("reverse") else ["ev", vy])
                vlines += ["  {", f"    ev = {vexpr};", "  }"] if not vstmts else []
                vlines = vlines if not vstmts else None
            else:
                vlines = None
        else:
            unary = _unary(step)
            if unary is None:
                raise ValueError(f"{node.op}: epilogue step {n}: {op!r} is not a float unary element-wise op")
            stmts, expr, fs = unary
            if vlines is not None and op in VEC4_UNARY and not stmts and not fs and "bitcast" not in expr:
                vlines += ["  {", f"    ev = {expr.replace('f32(', 'vec4<f32>(')};", "  }"]
            else:
                vlines = None
        funcs |= fs
        lines.append("  {")
        lines += [f"    {s}" for s in stmts]
        lines.append(f"    ev = {expr};")
        lines.append("  }")
    lines += ["  return ev;", "}"]
    params = "ev0: f32, o: u32, ch: u32" + (f", q: {ep.q_struct}" if chan_reads else "") + (", gv: f32" if ep.given else "")
    lines[0] = f"fn {ep.fn}({params}) -> f32 {{"
    if chan_reads:
        fields = ", ".join(f"q{k}: f32" for k in range(len(chan_reads)))
        loads = ", ".join(f"f32({b}[ch])" for b in chan_reads)
        ep.q_def = f"fn {ep.q_fn}(ch: u32) -> {ep.q_struct} {{ return {ep.q_struct}({loads}); }}"
        lines = [f"struct {ep.q_struct} {{ {fields} }}", ep.q_def] + lines
        ep.chan = True
        ep.q_count = len(chan_reads)
        ep.chan_operands = list(chan_reads)
        ep.chan_only = not read_elsewhere.intersection(chan_reads)
    if vlines is not None and steps and _env.force_choice("ep_v4", ("lanes", "vec4")) != "lanes":
        vparams = ("v: vec4<f32>, o: u32, ch: u32" + "".join(f", q{c}: {ep.q_struct}" for c in range(4) if chan_reads)
                   + (", g: vec4<f32>" if ep.given else ""))
        ep.code4 = "\n".join([f"fn {ep.fn}_v4({vparams}) -> vec4<f32> {{", *vlines, "  return ev;", "}"])
    lines += pool_fns  # (after the epilogue: kernels look for its operands' loads from `fn epilogue(` on)
    by_type: dict[str, list[str]] = {}
    for T, name in sorted(funcs):
        by_type.setdefault(T, []).append(name)
    ep.functions = sorted(by_type.items())
    ep.code = "\n".join(lines)
    ep.empty = not steps
    return ep


#: The windows a ``"pool"`` step computes where it reads its operand (each tap is a load
#: in every store the kernel unrolls).
POOL_MAX_TAPS = 9


def pool_step_ok(x_shape, pool: dict) -> bool:
    """Whether an epilogue step can read the pool ``pool`` (a ``"pool"`` entry of a step:
    op, window, strides, padding, layout, shape) of a value of shape ``x_shape``: a 4-D max
    or average pool without dilation of at most :data:`POOL_MAX_TAPS` taps, every window
    holding an element of the input (a max) or lying inside it (an average: the divisor is
    the window's size), the output size what the windows give."""
    try:
        op, (WH, WW), (SH, SW) = pool["op"], pool["window"], pool["strides"]
        PT, PB, PL, PR = pool["padding"]
        layout, shape = pool["layout"], tuple(pool["shape"])
    except (KeyError, TypeError, ValueError):
        return False
    if op not in ("max", "average") or layout not in ("nhwc", "nchw") or len(x_shape) != 4 or len(shape) != 4:
        return False
    if not 1 <= WH * WW <= POOL_MAX_TAPS or min(WH, WW, SH, SW) < 1 or min(PT, PB, PL, PR) < 0:
        return False
    h, w, c = (1, 2, 3) if layout == "nhwc" else (2, 3, 1)
    if shape[0] != x_shape[0] or shape[c] != x_shape[c]:
        return False
    for size, out, win, st, p0 in ((x_shape[h], shape[h], WH, SH, PT), (x_shape[w], shape[w], WW, SW, PL)):
        for o in range(out):
            first, last = o * st - p0, o * st - p0 + win - 1
            inside = min(last, size - 1) - max(first, 0) + 1
            if inside < 1 or op == "average" and inside != win:
                return False
    return True


def _pool_fn(node, n, helper: str, binding: str, x, pool: dict) -> str:
    """WGSL ``fn helper(i: u32) -> f32``: the pool ``pool`` of ``x`` (bound as ``binding``) at
    the linear index ``i`` of the pooled shape (the windows' taps unrolled; the bounds tested
    only along an axis where some window reaches the padding)."""
    if not pool_step_ok(tuple(x.shape), pool):
        raise ValueError(f"{node.op}: epilogue step {n}: a 'pool' step needs a 4-D max or average pool of at most "
                         f"{POOL_MAX_TAPS} taps whose every window holds (max) or lies in (average) the input, "
                         f"got {pool!r} over shape {list(x.shape)}")
    (WH, WW), (SH, SW) = pool["window"], pool["strides"]
    PT, _, PL, _ = pool["padding"]
    shape = tuple(pool["shape"])
    nhwc = pool["layout"] == "nhwc"
    N, H, W, C = x.shape if nhwc else (x.shape[0], x.shape[2], x.shape[3], x.shape[1])
    OH, OW = (shape[1], shape[2]) if nhwc else (shape[2], shape[3])
    lines = [f"fn {helper}(i: u32) -> f32 {{"]
    if nhwc:
        lines += [f"  let c = i % {C}u;", f"  let p = i / {C}u;", f"  let base = (p / {OW * OH}u) * {H * W * C}u + c;"]
        step_w = C
    else:
        lines += [f"  let p = i % {OH * OW}u;", f"  let base = (i / {OH * OW}u) * {H * W}u;"]
        step_w = 1
    lines += [f"  let oh = (p / {OW}u) % {OH}u;", f"  let ow = p % {OW}u;"]
    check_h = PT > 0 or (OH - 1) * SH - PT + WH > H
    check_w = PL > 0 or (OW - 1) * SW - PL + WW > W
    lines += [f"  let h0 = i32(oh * {SH}u) - {PT};", f"  let w0 = i32(ow * {SW}u) - {PL};"]
    scale = f" * {step_w}u" if step_w != 1 else ""
    lines += _window_taps("f32", pool["op"] == "max", (WH, WW), (H, W), (check_h, check_w),
                          lambda kh, kw: f"{binding}[base + u32((h0 + {kh}) * {W} + w0 + {kw}){scale}]")
    return "\n".join(lines)


def _window_taps(ty: str, mx: bool, window, size, check, at) -> list[str]:
    """The WGSL lines that end a pool helper: ``acc`` over the window's taps unrolled (the max,
    or the mean of the taps), read as ``ty(at(kh, kw))`` from the tap's row ``h0 + kh`` and
    column ``w0 + kw``, a tap outside the image skipped along an axis whose ``check`` is set;
    then the return and the closing brace."""
    (WH, WW), (H, W), (check_h, check_w) = window, size, check
    lines = [f"  var acc = {ty}({'-3.40282347e+38' if mx else '0.0'});"]
    for kh in range(WH):
        for kw in range(WW):
            conds = ([f"h0 + {kh} >= 0", f"h0 + {kh} < {H}"] if check_h else []) + \
                    ([f"w0 + {kw} >= 0", f"w0 + {kw} < {W}"] if check_w else [])
            load = f"{ty}({at(kh, kw)})"
            upd = f"acc = max(acc, {load});" if mx else f"acc = acc + {load};"
            lines.append(f"  if ({' && '.join(conds)}) {{ {upd} }}" if conds else f"  {upd}")
    return lines + ["  return acc;" if mx else f"  return acc / {float(WH * WW)!r};", "}"]


def given_pool_ok(step: dict, v, out) -> bool:
    """Whether a kernel holding the operand of a ``"pool"`` step as vec4s (``given``) can load
    it through :attr:`Epilogue.given_g4`: an NHWC pool whose channels are a multiple of 4, the
    pooled value of the output's shape or placed in it along the channels alone (``"pad"``
    at a multiple of 4)."""
    pool = step.get("pool")
    shp, o = tuple(pool["shape"]) if pool else (), tuple(out.shape)
    if pool is None or pool.get("layout") != "nhwc" or len(o) != 4 or len(shp) != 4 or shp[3] % 4 or o[3] % 4:
        return False
    if not pool_step_ok(tuple(v.shape), pool) or step.get("axis") is not None or "scale" in step:
        return False
    pad = step.get("pad") or [0, 0, 0, 0]
    return (shp[:3] == o[:3] and list(pad[:3]) == [0, 0, 0] and isinstance(pad[3], int)
            and pad[3] % 4 == 0 and 0 <= pad[3] and pad[3] + shp[3] <= o[3])


def _given_pool_fns(node, n, fn: str, x, step: dict, out_shape) -> tuple[str, str]:
    """The WGSL of :attr:`Epilogue.given_g4` and ``given_g1`` for step ``n`` (``given_pool_ok``)."""
    pool = step["pool"]
    (WH, WW), (SH, SW) = pool["window"], pool["strides"]
    PT, _, PL, _ = pool["padding"]
    _, H, W, C = x.shape
    _, OH, OW, CO = out_shape
    b = (step.get("pad") or [0, 0, 0, 0])[3]
    check_h = PT > 0 or (pool["shape"][1] - 1) * SH - PT + WH > H
    check_w = PL > 0 or (pool["shape"][2] - 1) * SW - PL + WW > W
    mx = pool["op"] == "max"

    def body(width: int, ty: str) -> list[str]:
        co, c = CO // width, C // width  # the output's and the input's channels in loads
        lines = [f"  let cc = i % {co}u;", f"  let p = i / {co}u;"]
        if b or C != CO:
            lines.append(f"  if (cc < {b // width}u || cc >= {(b + C) // width}u) {{ return {ty}(0.0); }}")
        lines += [f"  let base = (p / {OW * OH}u) * {H * W * c}u + cc - {b // width}u;",
                  f"  let h0 = i32(((p / {OW}u) % {OH}u) * {SH}u) - {PT};",
                  f"  let w0 = i32((p % {OW}u) * {SW}u) - {PL};"]
        return lines + _window_taps(ty, mx, (WH, WW), (H, W), (check_h, check_w),
                                    lambda kh, kw: f"GIVEN[base + u32((h0 + {kh}) * {W} + w0 + {kw}) * {c}u]")

    return ("\n".join([f"fn {fn}_g4(i: u32) -> vec4<f32> {{"] + body(4, "vec4<f32>")),
            "\n".join([f"fn {fn}_g1(i: u32) -> f32 {{"] + body(1, "f32")))


def _unary(step: dict, var: str = "ev"):
    """(statements, expression of ``var``, helper functions) of a unary epilogue step, or None
    where its op is not a float unary element-wise operator."""
    op = step.get("op")
    if "input" in step:
        return None
    if op in _OPTION_OPS:
        attrs: dict[str, Any] = {k: float(step.get(k, d)) for k, d in _OPTION_OPS[op][1].items()}
    elif op == "clamp":
        attrs = {"min_value": step.get("min_value"), "max_value": step.get("max_value")}
    elif op in _TABLE and _TABLE[op].arity == 1 and _TABLE[op].out is None and "float32" in _TABLE[op].types:
        attrs = {}
    else:
        return None
    return expression(SimpleNamespace(op=op, inputs=[SimpleNamespace(data_type="float32")], attrs=attrs), [var])


def _vec4_unary(step: dict, var: str = "ev") -> str | None:
    """The WGSL expression of ``var`` of a unary step of :data:`VEC4_UNARY` that is one
    expression of ``f32`` literals and component-wise built-ins (also right for a ``vec4<f32>``
    ``var`` with ``f32(`` made ``vec4<f32>(``), or None."""
    unary = _unary(step, var) if step.get("op") in VEC4_UNARY else None
    if unary is None or unary[0] or unary[2] or "bitcast" in unary[1]:
        return None
    return unary[1]


def up2_step_ok(step: dict, v, out) -> bool:
    """Whether an epilogue step can read the exact 2x bilinear upsampling of ``v`` (an
    ``"up2"`` step, see the module docstring): ``v`` a float NHWC ``[N, H, W, C]`` value and
    the output ``[N, 2H, 2W, C]``, read at the output's own index (no ``"axis"``, ``"pad"``,
    ``"pool"`` or ``"scale"``), the upsampling's own steps unary ones of :data:`VEC4_UNARY`."""
    up, shp, o = step.get("up2"), tuple(v.shape), tuple(out.shape)
    if (not isinstance(up, dict) or set(up) - {"steps"} or any(k in step for k in ("axis", "pad", "pool", "scale"))
            or len(shp) != 4 or len(o) != 4 or v.data_type not in ("float32", "float16")):
        return False
    steps = up.get("steps") or []
    if not isinstance(steps, (list, tuple)) or any(not isinstance(st, dict) or _vec4_unary(st) is None for st in steps):
        return False
    return o == (shp[0], 2 * shp[1], 2 * shp[2], shp[3])


def given_up2_ok(step: dict, v, out) -> bool:
    """Whether a kernel holding the operand of an ``"up2"`` step as vec4s (``given``) can load
    it through :attr:`Epilogue.given_g4`: :func:`up2_step_ok`, channels a multiple of 4."""
    return up2_step_ok(step, v, out) and v.shape[3] % 4 == 0


def _up2_fn(fn: str, binding: str, width: int, x, up: dict, out_shape) -> str:
    """WGSL ``fn <fn>(i: u32)`` returning ``f32`` (``width`` 1), ``vec4<f32>`` (4) or
    ``array<vec4<f32>, 2>`` (8: ``binding`` holds u64 words of 8 values, split by ``w_up``): the
    2x bilinear upsampling of ``x`` (bound as ``binding``, an array of ``width``-value elements)
    at the output's element ``i`` (in ``width`` units), then ``up["steps"]``. The output row
    ``2r`` reads rows ``r - 1`` and ``r`` with weight 0.75 on row ``r``, row ``2r + 1`` rows ``r``
    and ``r + 1`` with 0.25 on ``r + 1``; where the coordinate clamps at a border, one row with
    weight 0; columns alike; rows first interpolated along the columns, then combined:
    ``resample/resample2d_x2.wgsl``'s taps and arithmetic, term for term."""
    _, H, W, C = x.shape
    _, OH, OW, _ = out_shape
    cw = C // width
    ty = "f32" if width == 1 else "vec4<f32>"
    rt = "array<vec4<f32>, 2>" if width == 8 else ty
    lines = [f"fn {fn}(i: u32) -> {rt} {{", f"  let cc = i % {cw}u;", f"  let p = i / {cw}u;",
             f"  let oy = (p / {OW}u) % {OH}u;", f"  let ox = p % {OW}u;",
             f"  let base = (p / {OW * OH}u) * {H * W * cw}u + cc;"]
    for a, o, size in (("y", "oy", H), ("x", "ox", W)):
        lines += [f"  let {a}i = {o} / 2u;",
                  f"  let {a}o = ({o} & 1u) == 1u;",
                  f"  let {a}0 = select({a}i - 1u, {a}i, {a}o || {a}i == 0u);",
                  f"  let {a}1 = select({a}i, min({a}i + 1u, {size - 1}u), {a}o);",
                  f"  let t{a} = select(select(0.75, 0.0, {a}i == 0u), select(0.25, 0.0, {a}i + 1u >= {size}u), {a}o);"]
    taps = [(r, c) for r in range(2) for c in range(2)]
    halves = [""]
    if width == 8:  # the words, then each one's two vec4s
        lines += [f"  let w{r}{c} = {binding}[base + (y{r} * {W}u + x{c}) * {cw}u];" for r, c in taps]
        halves = [".xy", ".zw"] if x.data_type == "float32" else [".x", ".y"]
    for h, half in enumerate(halves):
        if width == 8:
            lines += [f"  let v{r}{c}_{h} = w_up(w{r}{c}{half});" for r, c in taps]
        else:
            lines += [f"  let v{r}{c}_{h} = {ty}({binding}[base + (y{r} * {W}u + x{c}) * {cw}u]);" for r, c in taps]
        lines += [f"  let vy0_{h} = v00_{h} * (1.0 - tx) + v01_{h} * tx;",
                  f"  let vy1_{h} = v10_{h} * (1.0 - tx) + v11_{h} * tx;",
                  f"  var ev_{h} = vy0_{h} * (1.0 - ty) + vy1_{h} * ty;"]
        for st in up.get("steps") or []:
            expr = _vec4_unary(st, f"ev_{h}")
            if expr is None:
                raise ValueError(f"{fn}: an 'up2' step's own step {st!r} is not one of {', '.join(VEC4_UNARY)}")
            lines.append(f"  ev_{h} = {expr.replace('f32(', ty + '(')};")  # (f32( stays f32( in width 1)
    ret = f"{rt}(ev_0, ev_1)" if width == 8 else "ev_0"
    return "\n".join(lines + [f"  return {ret};", "}"])


def given_chan_pad_ok(step: dict, v, out) -> bool:
    """Whether a kernel holding the operand of a ``"pad"`` step (no ``"pool"``) as vec4s
    (``given``) can load it through :attr:`Epilogue.given_g4`: a 4-D (NHWC) operand of the
    output's batch, height and width, placed among zero channels at an offset that is a
    multiple of 4, both channel counts multiples of 4 and the operand not the output's whole
    shape (BlazeFace's ``pad(x)`` added to a block's wider output)."""
    pad, shp, o = step.get("pad"), tuple(v.shape), tuple(out.shape)
    if (pad is None or "pool" in step or step.get("axis") is not None or "scale" in step
            or len(o) != 4 or len(shp) != 4 or not isinstance(pad, (list, tuple)) or len(pad) != 4):
        return False
    b = pad[3]
    return (shp[:3] == o[:3] and list(pad[:3]) == [0, 0, 0] and isinstance(b, int) and not isinstance(b, bool)
            and shp[3] % 4 == 0 and o[3] % 4 == 0 and b % 4 == 0 and 0 <= b and b + shp[3] <= o[3]
            and shp[3] < o[3])


def _given_chan_pad_fns(fn: str, x, step: dict, out_shape) -> tuple[str, str]:
    """The WGSL of :attr:`Epilogue.given_g4` and ``given_g1`` for a ``"pad"`` step that
    :func:`given_chan_pad_ok` takes: the output's vec4 ``i`` (value ``i``) reads the operand's
    vec4 (value) of its pixel at the channel minus the offset, 0 outside the operand's channels."""
    C, CO, b = x.shape[3], out_shape[3], step["pad"][3]

    def body(width: int, ty: str) -> list[str]:
        co, c, b0 = CO // width, C // width, b // width  # in loads
        inside = (f"cc >= {b0}u && " if b0 else "") + f"cc < {b0 + c}u"
        return [f"  let cc = i % {co}u;", f"  if (!({inside})) {{ return {ty}(0.0); }}",
                f"  return {ty}(GIVEN[(i / {co}u) * {c}u + cc{f' - {b0}u' if b0 else ''}]);", "}"]

    return ("\n".join([f"fn {fn}_g4(i: u32) -> vec4<f32> {{"] + body(4, "vec4<f32>")),
            "\n".join([f"fn {fn}_g1(i: u32) -> f32 {{"] + body(1, "f32")))


def _padded_index(node, n, v, pad, out_shape, chan_axis) -> tuple[str, str]:
    """(WGSL index, WGSL condition) of the operand ``v`` of a ``"pad"`` step for the output
    element ``o``: ``v`` sits at offset ``pad`` in the output's frame; the condition is false
    (the value 0) outside it. Leading axes without padding are read as one flat index."""
    rank = len(out_shape)
    shp = tuple(v.shape)
    if (not isinstance(pad, (list, tuple)) or len(pad) != rank or len(shp) != rank
            or any(not isinstance(b, int) or not ((b >= 0 and b + s <= d) or (b <= 0 and d - b <= s))
                   for b, s, d in zip(pad, shp, out_shape))):
        raise ValueError(f"{node.op}: epilogue step {n}: a 'pad' operand must have the output's rank and, along "
                         f"each axis, fit inside the output ({list(out_shape)}) at a 'pad' offset >= 0 or hold "
                         f"the output's window at an offset < 0, got shape {list(shp)}, pad {pad!r}")
    framed = [d for d in range(rank) if pad[d] or shp[d] != out_shape[d]]
    if not framed:
        return "o", ""
    k = framed[0]  # axes before k are read as one flat index
    vst = strides(shp)
    ost = strides(out_shape)
    terms, conds = [], []
    if k > 0:
        terms.append(f"(o / {ost[k - 1]}u) * {vst[k - 1]}u")
    for d in range(k, rank):
        c = "ch" if d == chan_axis else (f"((o / {ost[d]}u) % {out_shape[d]}u)" if d > 0 else f"(o / {ost[d]}u)")
        if pad[d] > 0:
            conds.append(f"{c} >= {pad[d]}u")
        if pad[d] + shp[d] < out_shape[d]:
            conds.append(f"{c} < {pad[d] + shp[d]}u")
        shifted = f"({c} - {pad[d]}u)" if pad[d] > 0 else f"({c} + {-pad[d]}u)" if pad[d] < 0 else c
        terms.append(shifted if vst[d] == 1 else f"{shifted} * {vst[d]}u")
    return " + ".join(terms), "(" + " && ".join(conds) + ")" if conds else ""


def _operand_index(node, n, v, axis, out_shape, out_strides, chan_axis) -> str:
    """WGSL index expression of an epilogue operand for the output element ``o``."""
    rank = len(out_shape)
    if axis is not None:
        if not isinstance(axis, int) or not 0 <= axis < rank or len(v.shape) != 1 or v.shape[0] != out_shape[axis]:
            raise ValueError(f"{node.op}: epilogue step {n}: an 'axis' operand must be 1-D of the output's size "
                             f"along that axis ({out_shape}, axis {axis}), got shape {list(v.shape)}")
        if axis == chan_axis:
            return "ch"
        return f"((o / {out_strides[axis]}u) % {out_shape[axis]}u)"
    shp = tuple(v.shape)
    if len(shp) > rank or any(s != d and s != 1 for s, d in zip(reversed(shp), reversed(out_shape))):
        raise ValueError(f"{node.op}: epilogue step {n}: operand shape {list(shp)} does not broadcast to "
                         f"{list(out_shape)}")
    if (1,) * (rank - len(shp)) + shp == out_shape:
        return "o"
    bst = broadcast_strides(shp, out_shape)
    terms = []
    for d in range(rank):
        if bst[d] == 0:
            continue
        coord = f"((o / {out_strides[d]}u) % {out_shape[d]}u)" if d > 0 else f"(o / {out_strides[d]}u)"
        if d == chan_axis:
            coord = "ch"
        terms.append(coord if bst[d] == 1 else f"{coord} * {bst[d]}u")
    return " + ".join(terms) if terms else "0u"
