"""Pooling: average_pool2d, l2_pool2d, max_pool2d.

Spec: https://www.w3.org/TR/webnn/#api-mlgraphbuilder-pool2d

One template, ``pool/pool2d.wgsl``, serves the three: one invocation per output element for
small windows or many outputs, one workgroup per output element (invocations striding over the
window, combined by a shared-memory tree) for windows of more than 256 positions and fewer
than 1024 outputs. A global pool (the
window is the whole input plane, no padding) is lowered as a reduction (``reduce_mean``,
``reduce_l2``, ``reduce_max`` over the spatial axes), which splits a large plane over many
workgroups.

Padding positions are skipped, never read: the average divides by the number of window
positions inside the input (the spec's "exclude padding"). A window that lies entirely in the
padding (possible with ``rounding_type="ceil"`` or padding larger than the window) gives 0 for
the average and L2 pools and the lowest value of the type (-inf for floats) for the max pool.

A windowed (not global) float pool applies the fused epilogue of ``node.attrs["epilogue"]``
(:mod:`webnn_gpu.ops._epilogue`) to each value it stores (:func:`webnn_gpu.ops._epilogue.hosts`).
A float32 NHWC pool may also store a map of its output, or (windows that tile its input) of its
input (:func:`side_ok`): with ``node.attrs["side"]`` (epilogue steps applied to each element of
the ``attrs["side_of"]`` value) the node has a second output, written as the window walk loads
each input element or as the pool stores each output (the compiler's ``fuse_pool_map``).
"""

from __future__ import annotations

from .. import _dtypes, _env
from .. import _validate as V
from .._kernels import strides as row_strides
from .._kernels import workgroups
from ..builder import MLGraphBuilder, MLOperand
from . import _epilogue
from ._registry import ALL, builder_method, lowering, support
from .reduce import ACC, check_int64_compute, column_mean, lower_reduction

FLOATS = _dtypes.FLOAT_TYPES
KINDS = {"average_pool2d": ("avg", FLOATS), "l2_pool2d": ("l2", FLOATS), "max_pool2d": ("max", ALL)}
#: the max pool's value for a window entirely in the padding: the lowest value of the data type
EMPTY_MAX = {"float32": "bitcast<f32>(0xff800000u)", "float16": "bitcast<f32>(0xff800000u)", "int8": "-128i",
             "uint8": "0u", "int32": "i32(-2147483647 - 1)", "uint32": "0u", "int64": "(-9223372036854775807li - 1li)",
             "uint64": "0lu"}
#: windows with more positions than this (and fewer than 1024 outputs) use one workgroup per output
GROUP_WINDOW = 256


def _out_size(size: int, window: int, dilation: int, pad0: int, pad1: int, stride: int, ceil: bool) -> int:
    num = size - ((window - 1) * dilation + 1) + pad0 + pad1
    return (-(-num // stride) if ceil else num // stride) + 1


def _make_pool(name: str):
    kind, types = KINDS[name]

    def method(self: MLGraphBuilder, input: MLOperand, *, window_dimensions=None, padding=None, strides=None,
               dilations=None, layout: str = "nchw", rounding_type: str = "floor", output_sizes=None,
               label: str = "", **kwargs) -> MLOperand:
        op = name
        V.check_kwargs(op, label, kwargs)
        self._check_usable(op, label)
        x = self._operand(op, label, "input", input)
        if x.data_type not in types:
            V.fail(op, label, "input", f"an operand of data type one of {', '.join(types)}", x.data_type)
        check_int64_compute(self, op, label, "input", x)
        if len(x.shape) != 4:
            V.fail(op, label, "input", "a 4-D operand", list(x.shape))
        if layout not in ("nchw", "nhwc"):
            V.fail(op, label, "layout", "'nchw' or 'nhwc'", layout)
        if rounding_type not in ("floor", "ceil"):
            V.fail(op, label, "rounding_type", "'floor' or 'ceil'", rounding_type)
        if layout == "nchw":
            n, c, h, w = x.shape
        else:
            n, h, w, c = x.shape
        win = [h, w] if window_dimensions is None else V.int_list(op, label, "window_dimensions", window_dimensions,
                                                                  length=2, lo=1, hi=V.MAX_DIM)
        pad = [0, 0, 0, 0] if padding is None else V.int_list(op, label, "padding", padding, length=4, lo=0,
                                                              hi=V.MAX_DIM)
        st = [1, 1] if strides is None else V.int_list(op, label, "strides", strides, length=2, lo=1, hi=V.MAX_DIM)
        dil = [1, 1] if dilations is None else V.int_list(op, label, "dilations", dilations, length=2, lo=1,
                                                          hi=V.MAX_DIM)
        floor_hw = [_out_size(h, win[0], dil[0], pad[0], pad[1], st[0], False),
                    _out_size(w, win[1], dil[1], pad[2], pad[3], st[1], False)]
        ceil_hw = [_out_size(h, win[0], dil[0], pad[0], pad[1], st[0], True),
                   _out_size(w, win[1], dil[1], pad[2], pad[3], st[1], True)]
        if output_sizes is not None:
            out_hw = V.int_list(op, label, "output_sizes", output_sizes, length=2, lo=1, hi=V.MAX_DIM)
            if out_hw != floor_hw and out_hw != ceil_hw:
                V.fail(op, label, "output_sizes", f"{floor_hw} (floor) or {ceil_hw} (ceil) for these window, "
                       f"padding, strides and dilations", out_hw)
        else:
            out_hw = ceil_hw if rounding_type == "ceil" else floor_hw
        for d, size in zip("hw", out_hw):
            if not 1 <= size <= V.MAX_DIM:
                V.fail(op, label, "window_dimensions",
                       f"a window (with padding {pad}, strides {st}, dilations {dil}) giving an output "
                       f"{'height' if d == 'h' else 'width'} in [1, {V.MAX_DIM}] for input {list(x.shape)}",
                       f"{win} (output size {size})")
        out_shape = (n, c, *out_hw) if layout == "nchw" else (n, *out_hw, c)
        attrs = {"window": win, "padding": pad, "strides": st, "dilations": dil, "layout": layout}
        return self._emit1(op, [x], x.data_type, out_shape, attrs, label=label)

    what = {"avg": "average", "l2": "L2 norm (square root of the sum of squares)", "max": "maximum"}[kind]
    method.__name__ = name
    method.__qualname__ = f"MLGraphBuilder.{name}"
    method.__doc__ = (
        f"The {what} of each window of a 4-D input.\n\n"
        f"Spec: https://www.w3.org/TR/webnn/#api-mlgraphbuilder-pool2d\n\n"
        f"Arguments:\n"
        f"    input (MLOperand): {', '.join(types)}; 4-D in ``layout``.\n"
        f"    window_dimensions (Sequence[int] | None): [height, width]; default the input's spatial size\n"
        f"        (a global pool).\n"
        f"    padding (Sequence[int] | None): [top, bottom, left, right]; default zeros. Padding positions\n"
        f"        are excluded (the average divides by the positions inside the input).\n"
        f"    strides (Sequence[int] | None): [height, width]; default [1, 1].\n"
        f"    dilations (Sequence[int] | None): [height, width]; default [1, 1].\n"
        f"    layout (str): \"nchw\" (default) or \"nhwc\".\n"
        f"    rounding_type (str): \"floor\" (default) or \"ceil\" for the output size.\n"
        f"    output_sizes (Sequence[int] | None): [height, width]; must be the floor or the ceil size;\n"
        f"        overrides rounding_type.\n"
        f"    label (str): a name for errors and GPU objects.\n\n"
        f"Returns:\n    MLOperand: the pooled 4-D tensor, same data type and layout.\n\n"
        f"Raises:\n    MLTypeError: an unsupported data type, a non-4-D input, option lists of the wrong length or\n"
        f"        with zeros, output sizes that match neither rounding, a window that gives no output.\n"
    )
    return method


for _name in KINDS:
    builder_method(_make_pool(_name))
    support(_name, {"input": (KINDS[_name][1], (4, 4))}, (KINDS[_name][1], (4, 4)))


def _is_global(node) -> bool:
    x, a = node.inputs[0], node.attrs
    axes = {"n": 0, "c": 1, "h": 2, "w": 3} if a["layout"] == "nchw" else {"n": 0, "h": 1, "w": 2, "c": 3}
    (WH, WW), (DH, DW) = a["window"], a["dilations"]
    return ([WH, WW] == [x.shape[axes["h"]], x.shape[axes["w"]]] and a["padding"] == [0, 0, 0, 0]
            and (DH == 1 or WH == 1) and (DW == 1 or WW == 1))


def input_add_ok(node, other, scale: int = 1) -> bool:
    """Whether pool ``node`` can read its input as the sum of that input and ``other`` (the
    compiler's ``fuse_pool_input`` pass, ``attrs["input_add"]``): a global average pool of a
    single NHWC image with at least 4 channels, which runs the column reduction, and
    ``other`` of the input's shape and float data type; with ``scale`` 4, ``other`` is the
    half-size image whose exact 2x bilinear upsampling was to be added (the upsampling keeps
    the mean, so its sum counts four times)."""
    x = node.inputs[0]
    want = tuple(x.shape) if scale == 1 else (x.shape[0], x.shape[1] / 2, x.shape[2] / 2, x.shape[3])
    return (node.op == "average_pool2d" and node.attrs["layout"] == "nhwc" and x.shape[0] == 1 and x.shape[3] >= 4
            and x.data_type in ("float32", "float16") and other.data_type == x.data_type and scale in (1, 4)
            and tuple(other.shape) == want and _is_global(node) and _env.force("reduce") != "group")


#: Windows of at most this many positions are written out in ``pool/pool2d_vec4.wgsl`` (``win_out``)
#: instead of its loops over the window's rows and columns (and the count's): lavapipe's NIR
#: (Mesa 22.3) unrolls such loops itself, one iteration per two optimisation rounds (naga's loop
#: bound gives each loop a second exit), so the loops cost the pipeline's front end rounds and
#: LLVM compiled the written-out positions anyway (docs/performance.md, "Warm builds"; the zoo's
#: 2 x 2 max pools). Larger windows keep their loops (not measured).
POOL_WINDOW_OUT = 4


def window_written_out(WH: int, WW: int) -> bool:
    """Whether ``pool/pool2d_vec4.wgsl`` writes a WH x WW window's positions out
    (:data:`POOL_WINDOW_OUT`); ``WEBNN_GPU_FORCE_POOL_WINDOW=loop`` keeps the loops (read when a
    layer is lowered)."""
    return WH * WW <= POOL_WINDOW_OUT and _env.force_choice("pool_window", ("loop",)) != "loop"


def f16_words(tuning: str, features) -> bool:
    """Whether ``pool/pool2d_vec4.wgsl`` takes float16 data, as u64 words of four values
    (``words``): on the "lane-loop" profile (lavapipe before Mesa 24) with ``shader-int64``.
    Only for a pool that stores a map (``attrs["side"]``, the one launch in place of two): a
    plain float16 pool runs ``pool/pool2d.wgsl`` (:data:`F16_WORDS_PLAIN`)."""
    return tuning == "lane-loop" and "shader-int64" in features


#: Float32 pools on ``pool/pool2d_vec4.wgsl`` move their data as u64 words of four values
#: (``words``, a ``vec2<u64>`` per vec4: two per-lane access components instead of four) where
#: :func:`f32_words` says.
F32_WORDS = True


def f32_words(tuning: str, features) -> bool:
    """Whether ``pool/pool2d_vec4.wgsl`` moves float32 data as u64 words (:data:`F32_WORDS`):
    on the "lane-loop" profile with ``shader-int64`` (:func:`f16_words`'s condition).
    ``WEBNN_GPU_FORCE_POOL_WORDS=vec4`` keeps vec4s, ``=words`` takes words (read when a layer
    is lowered)."""
    return _env.force_words("pool_words", F32_WORDS) and f16_words(tuning, features)


#: Plain float16 pools (no map) on the words kernel too (``WEBNN_GPU_FORCE_POOL=words``: on). Off:
#: face_landmark's one such pool ran 0.988 (0.917-1.092) of the one-element kernel, 42 us either
#: way (``benchmarks/knob_ab.py``, 16 rounds), where a map saves a launch.
F16_WORDS_PLAIN = False


def side_ok(node, of: str = "input", words: bool = False) -> bool:
    """Whether pool ``node`` can store a map of its input (``of="input"``) or of its output
    (``"output"``) as a second output (``attrs["side"]``, ``attrs["side_of"]``; the compiler's
    ``fuse_pool_map``): a windowed float32 NHWC pool (float16 too where ``words``:
    :func:`f16_words`) with channels a multiple of 4 (``pool/pool2d_vec4.wgsl``) and no fused
    input; for a map of its input, windows that tile it, each element read by exactly one
    window (strides equal to the window, no padding or dilation, the input's height and width
    multiples of the window)."""
    if node.op not in KINDS or len(node.outputs) != 1 or "side" in node.attrs:
        return False
    if any(k in node.attrs for k in ("input_add", "input_partials")):
        return False
    x, out, a = node.inputs[0], node.outputs[0], node.attrs
    types = ("float32", "float16") if words else ("float32",)
    if a["layout"] != "nhwc" or x.data_type not in types or out.data_type != x.data_type or x.shape[3] % 4:
        return False
    (WH, WW), (SH, SW) = a["window"], a["strides"]
    if _is_global(node) or WH * WW > GROUP_WINDOW and out.size < 1024 or _env.force("pool") == "scalar":
        return False
    if of == "output":
        return True
    if a["padding"] != [0, 0, 0, 0] or a["dilations"] != [1, 1] or [SH, SW] != [WH, WW]:
        return False
    H, W = x.shape[1], x.shape[2]
    return not (H % WH or W % WW or out.shape[1] * WH != H or out.shape[2] * WW != W)


@lowering(*KINDS)
def lower_pool(node, lc) -> None:
    """A global pool is a reduction; other pools run pool/pool2d.wgsl (float32 NHWC with
    channels a multiple of 4: pool/pool2d_vec4.wgsl, four channels per invocation)."""
    x, out = node.inputs[0], node.outputs[0]
    other = node.inputs[node.attrs["input_add"]] if "input_add" in node.attrs else None
    if "input_partials" in node.attrs:  # fuse_pool_partials: x holds [rows, C] partial sums
        column_mean(lc, x, out, rows=x.shape[0], cols=x.shape[1], count=node.attrs["input_partials"], src2=other,
                    src2_scale=float(node.attrs.get("input_add_scale", 1)))
        return
    a = node.attrs
    kind = KINDS[node.op][0]
    layout = a["layout"]
    axes = {"n": 0, "c": 1, "h": 2, "w": 3} if layout == "nchw" else {"n": 0, "h": 1, "w": 2, "c": 3}
    H, W = x.shape[axes["h"]], x.shape[axes["w"]]
    (WH, WW), (DH, DW) = a["window"], a["dilations"]
    if _is_global(node):
        if _epilogue.steps_of(node):
            raise ValueError(f"{node.op}: a global pool runs as a reduction, which has no epilogue")
        name = {"avg": "reduce_mean", "l2": "reduce_l2", "max": "reduce_max"}[kind]
        lower_reduction(lc, name, x, out, [axes["h"], axes["w"]], src2=other,
                        src2_scale=float(node.attrs.get("input_add_scale", 1)))
        return
    assert other is None, "fuse_pool_input only targets global average pools"
    ep = _epilogue.build(node, out, _epilogue.steps_of(node))
    side = None
    if "side" in node.attrs:  # fuse_pool_map: the map of the input, stored as the windows read it
        side = _epilogue.build(node, node.outputs[1], node.attrs["side"], chan_axis=3, first_binding="s", name="side")
    ist = row_strides(x.shape)
    M = out.size
    group = WH * WW > GROUP_WINDOW and M < 1024
    forced = _env.force_choice("pool", ("scalar", "words"))
    words = (x.data_type == "float16" and out.data_type == "float16" and f16_words(lc.tuning, lc.features)
             and (side is not None or F16_WORDS_PLAIN or forced == "words")
             or x.data_type == "float32" and out.data_type == "float32" and f32_words(lc.tuning, lc.features))
    if (not group and layout == "nhwc" and x.shape[3] % 4 == 0 and forced != "scalar"
            and (x.data_type == "float32" and out.data_type == "float32" or words)):
        # Four channels per invocation: one window walk and vec4 loads serve them all (lavapipe,
        # 2026-11-25: the 2x2 max pools of face_landmark, palm_detection_lite and iris_landmark
        # in 0.6-0.8 of the one-channel kernel's time; WEBNN_GPU_FORCE_POOL=scalar for that one).
        N, OH, OW, C = out.shape
        outs = [("out", out)] + ([("side_out", node.outputs[1])] if side is not None else [])
        lc.kernel("pool/pool2d_vec4.wgsl", [("src", x), *ep.operands, *(side.operands if side else [])], outs,
                  M // 4, workgroup=64,
                  kind=kind, out_strides=row_strides((N, OH, OW, C // 4)),
                  in_st={"n": ist[0] // 4, "h": ist[1] // 4, "w": ist[2] // 4}, H=H, W=W, WH=WH, WW=WW,
                  SH=a["strides"][0], SW=a["strides"][1], DH=DH, DW=DW, PT=a["padding"][0], PL=a["padding"][2],
                  ep=ep, side=side, side_of=node.attrs.get("side_of", "input"), fns=_epilogue.merged_functions(ep, side),
                  words=words, win_out=window_written_out(WH, WW))
        return
    if side is not None:
        raise ValueError(f"{node.op}: attrs['side'] needs the vec4 pool kernel (see side_ok)")
    wg = 64 if group else 256
    lc.kernel("pool/pool2d.wgsl", [("src", x), *ep.operands], [("out", out)], M,
              groups=workgroups(M, lc.limits, lc.label) if group else None, workgroup=wg,
              mode="group" if group else "thread", kind=kind, A=ACC[x.data_type],
              out_T=_dtypes.info(out.data_type).compute,
              out_strides=row_strides(out.shape), axes=axes, in_st={d: ist[i] for d, i in axes.items()}, H=H, W=W,
              WH=WH, WW=WW, SH=a["strides"][0], SW=a["strides"][1], DH=DH, DW=DW, PT=a["padding"][0],
              PL=a["padding"][2], M=M, empty_max=EMPTY_MAX.get(x.data_type, "0u"), ep=ep)

