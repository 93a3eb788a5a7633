"""resample2d: nearest-neighbor and bilinear resampling of two axes.

Spec: https://www.w3.org/TR/webnn/#api-mlgraphbuilder-resample2d-method

Coordinates use half-pixel centers, as the spec's transformation (and TFLite's
RESIZE_BILINEAR / RESIZE_NEAREST_NEIGHBOR with ``half_pixel_centers``):
``u = clamp((o + 0.5) * inputSize / outputSize - 0.5, 0, inputSize - 1)``. The scale is
always outputSize / inputSize of the final sizes (also when ``scales`` was given and the
size was rounded down). Nearest-neighbor takes ``ceil(u - 0.5)`` (ties go to the lower
index), computed in exact integer arithmetic; linear interpolates the four neighbours
``floor(u)`` / ``ceil(u)`` in f32. One kernel, ``resample/resample2d.wgsl``. Every variant
applies the fused epilogue of ``node.attrs["epilogue"]`` (:mod:`webnn_gpu.ops._epilogue`) to
each value it stores.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _dtypes, _env
from .. import _validate as V
from .._kernels import strides
from ..builder import MLGraphBuilder, MLOperand
from . import _epilogue
from ._registry import builder_method, lowering, support

#: On the lane-loop profile (lavapipe before Mesa 24: every storage access a loop over the SIMD
#: lanes and, inside it, over the components) with 64-bit integers, the doubling kernel moves
#: 8 channels per access as u64 words (float32 a vec4<u64>, float16 a vec2<u64>; the same
#: bits) where the channels are a multiple of 8 (``x64``). ``WEBNN_GPU_FORCE_RESAMPLE_WORDS=vec4``
#: keeps vec4s of the storage type.
X2_X64 = True
FLOATS = _dtypes.FLOAT_TYPES
MODES = ("nearest-neighbor", "linear")


@builder_method
def resample2d(self: MLGraphBuilder, input: MLOperand, *, mode: str = "nearest-neighbor", scales=None, sizes=None,
               axes=None, label: str = "", **kwargs) -> MLOperand:
    """Resample two axes of a 4-D tensor to new sizes.

    Spec: https://www.w3.org/TR/webnn/#api-mlgraphbuilder-resample2d-method

    Arguments:
        input (MLOperand): float32 or float16, 4-D.
        mode (str): "nearest-neighbor" (default) or "linear" (bilinear, half-pixel centers).
        scales (Sequence[float] | None): two factors > 0 for ``axes``; the new size is
            ``floor(size * scale)``. Default [1.0, 1.0]. Ignored when ``sizes`` is given.
        sizes (Sequence[int] | None): the two new sizes (>= 1) for ``axes``.
        axes (Sequence[int] | None): two distinct axes in [0, 4); default [2, 3].
        label (str): a name for errors and GPU objects.

    Returns:
        MLOperand: the resampled tensor, same data type.

    Raises:
        MLTypeError: an unsupported data type, a non-4-D input, a bad mode, scales or sizes of
            the wrong length or not positive, axes out of range or duplicated, an output size of 0.
    """
    op = "resample2d"
    V.check_kwargs(op, label, kwargs)
    self._check_usable(op, label)
    x = self._operand(op, label, "input", input)
    if x.data_type not in FLOATS:
        V.fail(op, label, "input", "an operand of data type one of float32, float16", x.data_type)
    if len(x.shape) != 4:
        V.fail(op, label, "input", "a 4-D operand", list(x.shape))
    if mode not in MODES:
        V.fail(op, label, "mode", "'nearest-neighbor' or 'linear'", mode)
    if scales is None:
        sc = [1.0, 1.0]
    else:
        if isinstance(scales, (str, bytes)) or not hasattr(scales, "__len__") or len(scales) != 2:
            V.fail(op, label, "scales", "2 numbers > 0", scales)
        sc = [V.float_value(op, label, "scales", s) for s in scales]
        sc = [float(np.float32(s)) for s in sc]  # the IDL's sequence<float>
        if not all(s > 0 and math.isfinite(s) for s in sc):
            V.fail(op, label, "scales", "2 finite numbers > 0", list(scales))
    sz = None if sizes is None else V.int_list(op, label, "sizes", sizes, length=2, lo=1, hi=V.MAX_DIM)
    ax = [2, 3] if axes is None else V.axes(op, label, "axes", axes, 4)
    if len(ax) != 2:
        V.fail(op, label, "axes", "2 distinct axes in [0, 3]", axes)
    shape = list(x.shape)
    for i, a in enumerate(ax):
        size = sz[i] if sz is not None else math.floor(x.shape[a] * sc[i])
        if not 1 <= size <= V.MAX_DIM:
            V.fail(op, label, "scales", f"scales giving output sizes in [1, {V.MAX_DIM}] for input {list(x.shape)}",
                   f"{sc} (size {size} for axis {a})")
        shape[a] = size
    return self._emit1(op, [x], x.data_type, shape, {"mode": mode, "axes": ax}, label=label)


support("resample2d", {"input": (FLOATS, (4, 4))}, (FLOATS, (4, 4)))


def _x2_words(channels: int, tuning: str, features) -> bool:
    """Whether the doubling kernel moves ``channels`` (last axis) as 8-value u64 words
    (:data:`X2_X64`; ``WEBNN_GPU_FORCE_RESAMPLE_WORDS=vec4`` keeps vec4s)."""
    forced = _env.force("resample_words")
    if forced and forced not in ("vec4", "u64"):
        raise ValueError(f"WEBNN_GPU_FORCE_RESAMPLE_WORDS={forced!r}: expected vec4 or u64")
    return (X2_X64 and channels % 8 == 0 and tuning == "lane-loop" and "shader-int64" in features
            and forced != "vec4")


@lowering("resample2d")
def lower_resample2d(node, lc) -> None:
    """resample2d: resample2d_x2.wgsl for a linear doubling of channels-last data (2 x 2 outputs
    per invocation; 8 channels moved as u64 words where :func:`_x2_words` says),
    resample2d_vec4.wgsl for other channels-last data (4 channels per invocation), else resample2d.wgsl (one invocation per output element).
    ``WEBNN_GPU_FORCE_RESAMPLE=scalar|vec4|x2`` forces one (where it applies)."""
    x, out = node.inputs[0], node.outputs[0]
    ep = _epilogue.build(node, out, _epilogue.steps_of(node))
    ins = [("src", x), *ep.operands]
    ax = node.attrs["axes"]
    sizes_in = [x.shape[a] for a in ax]
    sizes_out = [out.shape[a] for a in ax]
    exact = all((2 * o + 1) * i < 2**31 for i, o in zip(sizes_in, sizes_out))
    forced = _env.force("resample")
    if forced and forced not in ("scalar", "vec4", "x2"):
        raise ValueError(f"WEBNN_GPU_FORCE_RESAMPLE={forced!r}: expected scalar, vec4 or x2")
    vec4 = 3 not in ax and out.shape[3] % 4 == 0 and forced != "scalar"
    if (vec4 and forced != "vec4" and node.attrs["mode"] == "linear"
            and sizes_out == [2 * n for n in sizes_in] and all((2 * o + 1) * n < 2**24 for n, o in zip(sizes_in, sizes_out))):
        # Exact doubling (the segmenter's upsampling): 2 x 2 outputs per invocation.
        x64 = _x2_words(out.shape[3], lc.tuning, lc.features)
        w = 8 if x64 else 4
        blk = [*out.shape[:3], out.shape[3] // w]
        for a, n in zip(ax, sizes_in):
            blk[a] = n
        lc.kernel("resample/resample2d_x2.wgsl", ins, [("out", out)], out.size // (4 * w),
                  blk_strides=strides(blk), in_st=strides([*x.shape[:3], x.shape[3] // w]),
                  out_st=strides([*out.shape[:3], out.shape[3] // w]), ax=ax, sizes_in=sizes_in,
                  out_T=_dtypes.info(out.data_type).compute, ep=ep, x64=x64)
        return
    if vec4:
        # Four channels per invocation (NHWC): the same coordinates serve a whole vec4.
        v4 = [*out.shape[:3], out.shape[3] // 4]
        lc.kernel("resample/resample2d_vec4.wgsl", ins, [("out", out)], out.size // 4,
                  mode=node.attrs["mode"], out_strides=strides(v4), in_st=strides([*x.shape[:3], x.shape[3] // 4]),
                  ax=ax, sizes_in=sizes_in, sizes_out=sizes_out, exact=exact,
                  out_T=_dtypes.info(out.data_type).compute, ep=ep)
        return
    lc.kernel("resample/resample2d.wgsl", ins, [("out", out)], out.size, mode=node.attrs["mode"],
              out_strides=strides(out.shape), in_st=strides(x.shape), ax=ax, sizes_in=sizes_in, sizes_out=sizes_out,
              exact=exact, out_T=_dtypes.info(out.data_type).compute, ep=ep)
