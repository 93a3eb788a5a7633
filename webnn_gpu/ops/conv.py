"""Convolutions: conv2d and conv_transpose2d.

Spec: https://www.w3.org/TR/webnn/#api-mlgraphbuilder-conv2d,
https://www.w3.org/TR/webnn/#api-mlgraphbuilder-convtranspose2d

conv2d variants, chosen by shape (``WEBNN_GPU_FORCE_CONV=<variant>`` forces one where it
applies, and falls back to the automatic choice where it does not):

* ``pointwise``: 1x1 filter, stride 1, no padding, one group: a plain matmul on the tile
  kernel (NHWC: ``[N*H*W, C] x [C, O]``; NCHW: ``[O, C] x [N, C, H*W]``).
* ``depthwise``: groups == input channels on NHWC, output channels any multiple of them, but
  not one input channel with :data:`ONE_CHANNEL_MIN_O` or more output channels, which the
  ``block`` kernel or the implicit GEMM computes faster (``shaders/conv/depthwise.wgsl``):
  vec4 of channels x a strip of output rows x 4 columns (on lavapipe the whole width of an
  output at most :data:`DW_TW_WHOLE` wide) per invocation, walked one row per
  loop iteration so that each input row is loaded once per strip (:func:`_dw_strip`); on
  lavapipe before Mesa 24 the channels move as u64 words, two vec4s per invocation for 3x3
  windows (:func:`_dw_words`). Sizes, padding and the strip height come from a parameter
  buffer: one pipeline per (window, strides, dilations, columns, epilogue), whatever the
  image's height and, past :data:`DW_TW_WHOLE` columns, its width.
* ``block``: one group, NHWC, at most 4 input and 32 output channels and a filter of at most
  :data:`BLOCK_MAX_WEIGHTS` vec4s (a first layer on an RGB image with a small window;
  ``shaders/conv/block.wgsl``): a block of output pixels with every output channel per
  invocation, each input row loaded once for every tap that reads it. A constant filter of at
  most :data:`BLOCK_BAKE_MAX` values is in the shader's text as literals, with a constant bias
  and the epilogue's constant per-channel operands (no weight loads; one pipeline per layer).
  A larger constant filter (5x5 and 7x7 windows, :func:`_block_wide`) takes it with one
  unrolled output row per invocation.
* ``gemm``: implicit GEMM on the tile kernel (``shaders/matmul/tile.wgsl``), the input patch
  gathered on the fly (no im2col buffer); any layout pair, any groups.
* ``direct``: ``shaders/conv/direct.wgsl``, the general fallback reading everything through
  strides.

The filter is wanted as ``hwio`` (``[KH * KW * C/groups, O]``, the B matrix of the implicit
GEMM) or ``[KH, KW, C]`` for depthwise: a constant filter is re-laid out on the CPU at build
time (and its columns padded to a multiple of 4 so they load as vec4); another filter goes
through a small permute kernel (``shaders/conv/permute.wgsl``).

conv_transpose2d runs ``shaders/conv/transpose.wgsl``, a direct gather over the taps that
reach each output pixel, for every layout pair and groups; when the filter size equals the
stride (an upsampling layer: each output pixel gets exactly one tap) it runs
``shaders/conv/transpose_tiled.wgsl`` instead, which reads each input pixel once and writes
its whole KH x KW footprint (``WEBNN_GPU_FORCE_CONV_TRANSPOSE=direct`` forces the gather).
A small constant filter with at most 4 output channels and one group (the segmenter's last
layer, 16 -> 1) is baked into that shader as literals, so an invocation loads only its input
pixel (2.4x faster on lavapipe; ``WEBNN_GPU_FORCE_CONV_TRANSPOSE=tiled`` keeps the loads).

Bias is the first step of the fused epilogue (:mod:`webnn_gpu.ops._epilogue`), followed by
``node.attrs["epilogue"]``. float16 computes with f32 accumulation.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import _dtypes, _env
from .. import _validate as V
from .. import _kernels
from .._ir import Node
from .._kernels import strides
from ..builder import MLGraphBuilder, MLOperand, Value
from . import _epilogue
from ._registry import builder_method, lowering, support
from .elementwise import literal
from .linalg import (B_UNIFORM_FLOATS, FLOATS, LOOP_BUDGET, MATVEC_MIN_KN_WINDOW, SMALL_MAX_OUTPUTS, Shown, check_loops,
                     choose_tile, choose_tile_sg,
                     constant_array, deep_ok, dense_tile_rows, given_operand, k_chunks, lower_split_k, make_constant,
                     matvec_kernel, matvec_plan, matvec_window, tile_kernel, tile_loop_iterations, uniform_copy,
                     wgsl_type)

INPUT_LAYOUTS = ("nchw", "nhwc")
CONV2D_FILTER_LAYOUTS = ("oihw", "hwio", "ohwi", "ihwo")
CONV_TRANSPOSE2D_FILTER_LAYOUTS = ("iohw", "hwoi", "ohwi")
CONV_VARIANTS = ("direct", "gemm", "pointwise", "depthwise", "block")
#: Invocations per workgroup of the conv kernels.
WORKGROUP = 64
#: Output rows and columns of a depthwise pixel block, per tuning profile
#: (:func:`webnn_gpu._kernels.tuning_profile`; measured on lavapipe, Mesa 22.3 and 25.0): the
#: depthwise + projection kernel's starting block, and the block whose loads
#: :data:`DW_MAX_LOADS` bounds for the depthwise variant (the stand-alone kernel walks strips:
#: :func:`_dw_strip`).
DW_BLOCK = {"lane-loop": (4, 4), "default": (8, 4)}
#: The ``block`` kernel (``conv/block.wgsl``): at most this many input channels and output
#: channels, output block per invocation (8 rows: with baked weights 0.72-0.90 of the CPU time
#: of 4 rows on the zoo's 3x3 first layers; 16 alike), and loaded input values per invocation.
BLOCK_MAX_C = 4
BLOCK_MAX_O = 32
BLOCK_TILE = (8, 2)
BLOCK_MAX_LOADS = 256
#: ... and it loads a block's input row segment as the vec4s covering it where rows and blocks
#: start at multiples of 4 values (:func:`_block_xv`): 3 channels x 5 columns are 4 vec4 loads
#: instead of 15 scalar ones.
BLOCK_VEC4 = True
#: ... and in float16 it moves its input rows and outputs as u32 pairs of float16 values
#: (``pack2x16float`` / ``unpack2x16float``, the same bits): on Mesa 22.3 every storage
#: access is a loop over the lanes with a bounds check per component, and two u32 components
#: cost less than four f16 ones (the zoo's float16 3x3 first layers: 0.85-0.98 of the kernel
#: time; vec4<u32> stores of two output vec4s measured no better).
BLOCK_HALF_PAIRS = True
#: ... and on the lane-loop profile with 64-bit integers, in float32 where the output channels
#: are a multiple of 8, it stores each pair of output vec4s as one 8-value vec4<u64> word (the
#: same bits): half the components per stored value (:func:`_block_words`). Float16 keeps its
#: u32 pairs: as vec2<u64> words the zoo's first layers ran 1.0-1.1x their time; so does a
#: layer past BLOCK_MAX_O channels (iris_landmark's 3 -> 64: 0.96-1.26x inside the model).
BLOCK_X64 = True
#: ... and in float32 it loads its input's vec4s (``xv``) as u64 words of 4 values
#: (:func:`_block_input_words`): 2 components per access instead of 4
BLOCK_INPUT_WORDS = True
#: ... and at most this many filter vec4s (KH * KW * C * O / 4), which an invocation holds in
#: registers throughout: past it the kernel spills, LLVM takes 12-20 s to compile it (5x5
#: windows to 24 or 32 channels) and the implicit GEMM runs as fast or faster (measured on
#: lavapipe, Mesa 22.3: 3x3 -> 24 channels, 162 vec4s, stays 1.3x faster as a block).
BLOCK_MAX_WEIGHTS = 256
#: The ``block`` kernel computes its TH output rows in a loop (``row_loop``), one row per
#: iteration, rather than unrolled: LLVM compiles TH times less code.
BLOCK_ROW_LOOP = True
#: ... and with a constant filter of at most this many values it has the filter, and a constant
#: bias, as WGSL literals (``bake``): an invocation loads no weights (on Mesa 22 each of its
#: uniform loads was a gather), the pipeline compiles 3-5x faster (the loaded weights were live
#: across the row loop), at the price of one pipeline per layer's weights (a network has one
#: such layer).
#: ``WEBNN_GPU_FORCE_CONV_BLOCK_WEIGHTS=loaded`` keeps the loads.
BLOCK_BAKE_MAX = 2048
#: ... so that a constant filter with at most BLOCK_BAKE_K taps x input channels takes the
#: kernel up to BLOCK_BAKE_O output channels whatever BLOCK_MAX_WEIGHTS says (its weights are
#: not held in registers): 3x3 x 3 -> 48 and -> 64 ran in 0.61-0.75 of the implicit GEMM's CPU
#: time; 5x5 x 3 -> 24 and -> 32 (75 taps x channels) stay on the implicit GEMM (0.85-1.3x, and
#: 2-3.5 s of LLVM against 1-1.5 s).
BLOCK_BAKE_K = 27
BLOCK_BAKE_O = 64
#: ... and a constant filter of more taps x channels, up to BLOCK_WIDE_K (a 7x7 window on RGB),
#: of at most BLOCK_WIDE_MAX values and BLOCK_MAX_O output channels, that the limits above
#: leave to the implicit GEMM, takes the kernel with one output row of BLOCK_WIDE_TW columns
#: per invocation, unrolled (no row loop): in a loop LLVM hoists the baked weights out of it as
#: 8-wide broadcasts (57 KB of stack for 5x5 x 3 -> 24, more than the L1 cache) and reloads
#: them, while unrolled they stay 4-byte constants the multiplies read. 5x5 x 3 -> 24 over 128 x
#: 128 (face_detection_short_range): 0.72-0.77 of the implicit GEMM's CPU and kernel time; -> 32
#: over 192 x 192 (palm_detection): 0.80-0.90; 5x5 x 4 -> 16 and -> 24: 0.66-0.77; 7x7 x 3 ->
#: 16: 0.78-0.80 (compiled in 1.3 s of CPU against 0.4); 8 columns
#: ran palm_detection's 1.2-1.3x slower and compiled for 17 s. Such a pipeline compiles in
#: 1.3-2 s of CPU (the implicit GEMM's 0.3-0.4 s); 5x5 x 4 -> 32 (3200 values, 0.69-0.75) took
#: 6 s on a loaded machine and stays on the implicit GEMM.
BLOCK_WIDE_K = 147
BLOCK_WIDE_MAX = 2400
BLOCK_WIDE_TW = 4
#: A conv2d of one input channel and one group is also a depthwise conv2d (channel multiplier
#: O); from this many output channels on it runs on the ``block`` kernel where that fits, else
#: the implicit GEMM: the depthwise kernel, one output vec4 per invocation, reloads the input
#: window for every 4 output channels (224 x 224 x 1 -> 16, 3x3: depthwise 3.2 ms, implicit GEMM
#: 1.7 ms, block 0.63 ms; -> 32, stride 2: 11.6, 1.0, 0.61 ms; lavapipe, Mesa 22.3).
ONE_CHANNEL_MIN_O = 4
#: NCHW implicit GEMM reads an NHWC copy of the input when the channels allow vec4 loads.
NCHW_TO_NHWC = True
#: The depthwise + projection kernel reads the input rows of its block in a loop (each output row's tap
#: row picked by selects) rather than unrolled: the text then has one row's loads, not every
#: row's (LLVM's compile time on lavapipe grows faster than the loads in the text).
DW_ROW_LOOP = True
#: Largest (input rows x input columns) one depthwise invocation loads (register budget).
DW_MAX_LOADS = 128
#: The stand-alone depthwise kernel (``conv/depthwise.wgsl``, :func:`_dw_strip`): this many
#: output columns per invocation (3 to 8 measured alike within 15% on the zoo's layers, 2
#: slower, 7 and 8 up to 1.2x slower on images wider than 8 (accumulator spills); one width
#: keeps one pipeline per window), and its cost model's weights per tuning profile,
#: in vec4 multiply-adds: a storage-buffer vec4 load of the input, a store, a uniform load of
#: a tap, an accumulator slot move, the fixed part of an invocation, and ``spill``: each
#: multiply-add's extra cost per vec4 accumulator held (register pressure).
DW_TW = 4
#: ... but an output at most this many columns wide is one column block of its whole width
#: (7 x 7 and 6 x 6 images: a block of 4 columns and one of 3 or 2 load 16 or 14 input columns
#: per row step where one block of 7 or 6 loads 11 or 10); ``WEBNN_GPU_FORCE_DW_WIDTH=fixed``
#: keeps DW_TW there
DW_TW_WHOLE = 7
#: ... on the lane-loop profile (lavapipe before Mesa 24, where every storage access is a loop
#: over the SIMD lanes and, inside it, over the components), with 64-bit integers, it moves
#: 4 float32 channels as a vec2<u64> and 4 float16 ones as one u64 (the same bits, half or a
#: quarter of the components; ``x64``): a copy of 4M float32 values ran 1.35-1.6x faster as
#: vec4<u64> words than as vec4<f32> (8 values per invocation either way).
DW_X64 = True
#: ... and there, with channels in whole blocks of DW_NH vec4s, each invocation computes DW_NH
#: channel vec4s (one vec4<u64> load per input pixel, ``NH``) where the window has at most
#: DW_NH_MAX_TAPS taps (the text of a 5 x 5 window with two: 0.8 s of LLVM against 0.4) and
#: at least DW_NH_MIN_GROUPS workgroups remain (one per core: a model's small 3x3 layers then
#: take the same form, and the same pipeline, as its large ones).
DW_NH = 2
DW_NH_MAX_TAPS = 9
DW_NH_MIN_GROUPS = 2
DW_COST = {"lane-loop": dict(load=12.0, store=10.0, tap=4.0, move=0.5, fixed=60.0, spill=0.008),
           "default": dict(load=4.0, store=4.0, tap=2.0, move=0.5, fixed=60.0, spill=0.008)}
#: ... its invocations per workgroup (lavapipe runs a workgroup on one thread: small ones
#: balance the threads; 16 and 64 measured alike on large launches, and one size keeps one
#: pipeline per window), the threads that run them (lavapipe: one per core), and the
#: invocations one SIMD row of a thread runs at once (llvmpipe at 256 bits: 8).
DW_WORKGROUP = 16
DW_CORES = 2
DW_LANES = 8
#: The depthwise kernel splits its invocation index with f32 divisions below this many
#: invocations (exact there), with integer divisions above.
DW_FDIV_MAX = 1 << 20
#: Largest constant filter (elements) the tiled conv_transpose2d bakes into its shader.
TRANSPOSE_BAKE_MAX = 256
#: depthwise + projection kernel (fuse_depthwise_project): a transposed-conv projection of at
#: most this many values per pixel (its stores are unrolled), and a pointwise projection wider
#: than this is split into column blocks of at most :data:`DWP_WIDE_NS` vec4 columns (each
#: invocation computes its pixel block's depthwise values itself: :func:`_dwp_plan`); at most
#: this many vec4 accumulators per invocation (pixels x N / 4).
PROJECT_MAX_N = 128
PROJECT_MAX_ACC = 96
#: ... the widest column block of a wide projection, in vec4 columns (32: 1 x 2 blocks of 32
#: columns ran 0.45-0.8x the time of one column block of 1 x 1 pixels on 8 x 8 x 256 -> 256 and
#: 16 x 16 x 128 -> 256; wider blocks hold fewer pixels, whose shared loads of the matrix then
#: serve fewer products)
DWP_WIDE_NS = 32
#: ... and at most this many vec4 accumulators per invocation there (a 2 x 4 block of 16 columns:
#: 0.8 s of CPU to compile cold on lavapipe, against 0.4 s for 1 x 2 x 32)
DWP_WIDE_MAX_ACC = 128
#: ... and with its columns split over several invocations per pixel block, the projection
#: matrix is bound as one contiguous panel per column block (as the tile kernel's B:
#: :func:`webnn_gpu.ops.linalg.panel_pack`), so that a block's rows are not N / 4 vec4s apart
DWP_PANEL = True
#: ... and its stores of the projection run in a loop over the block's NS columns (the column's
#: accumulator picked by selects) rather than unrolled: LLVM's compile time on lavapipe grows
#: faster than linearly with the loads and stores in the text (each a loop over the SIMD
#: lanes before Mesa 24), and this leaves TH x TW of them instead of TH x TW x NS.
DWP_COLUMN_LOOP = True
#: ... and with an expansion, it loads the K / 4 vec4s of each input pixel it holds in a loop
#: over them (each value put in place by selects) rather than unrolled: the text has one load
#: per pixel instead of K / 4 (the largest of these kernels compiled 2-3x faster).
DWP_EXPAND_LOOP = True
#: ... put in place by shifting each pixel's held values down one place per iteration (the new
#: one last) rather than by a select per value, when there are at least this many (K / 4): no
#: ALU for it in the loop, and lavapipe's and naga's front ends make such a pipeline 10-15%
#: faster at the same kernel time; with K / 4 = 4 the shifted kernels ran 1.5-5% slower
#: (docs/conv.md), so those keep the selects. ``WEBNN_GPU_FORCE_DWP_EXPAND_LOAD=select`` keeps
#: them everywhere, ``=shift`` shifts at any K / 4 (tests)
DWP_EXPAND_SHIFT_MIN_K4 = 6
#: ... and on the lane-loop profile with 64-bit integers (:func:`_words_ok`), K / 4 even and
#: below DWP_EXPAND_SHIFT_MIN_K4, that loop loads two of a pixel's vec4s per iteration as one
#: word of 8 values (:func:`_expand_words`)
DWP_EXPAND_WORDS = True
#: ... and this many invocations per workgroup: the kernel has one invocation per pixel block,
#: so small images give few invocations, and lavapipe runs each workgroup on one thread.
PROJECT_WORKGROUP = 16
#: ... and, with subgroup lanes on the lane-loop profile, the lanes of a subgroup share one
#: column block and split its loads of the taps and the projection matrix among them
#: (``sg``, :func:`dwp_lanes`).
DWP_SUBGROUP = True
#: The geometry the pixel-block kernels (block, depthwise_project) bake into their text.
_BLOCK_GEOMETRY = ("KH", "KW", "sh", "sw", "dh", "dw", "NB", "H", "W", "C", "OH", "OW", "pt", "pl")
#: ... with the expansion conv folded in (fuse_depthwise_project): at most this many input
#: channels, and this many vec4s of expansion input held per invocation.
EXPAND_MAX_K = 32
#: ... when the kernel computes at most this many expanded pixels per one the depthwise conv
#: reads (a block's window overlaps its neighbours'): past it, the recomputed expansion costs
#: more than the stores and loads it saves (measured on the selfie model's 5x5 blocks).
EXPAND_MAX_RECOMPUTE = 2.5
#: ... and at most this many vec4s of expansion input held per invocation (rows x columns x
#: K / 4, live through the channel loop): past it LLVM's compile time grows fast (324 of them,
#: a 4 x 4 block of a stride-2 3x3 window on 16 channels, several times a 2 x 4 block's 180,
#: which runs as fast; lavapipe, Mesa 22.3).
EXPAND_MAX_X = 256
#: ... or, for an expansion of any K (a multiple of 4) whose band of input rows fits, computed by
#: each workgroup into workgroup memory before its blocks (``xsh``, :func:`expand_shared_ok`): at
#: most this many bytes of it (WebGPU's default maxComputeWorkgroupStorageSize) ...
EXPAND_SHARED_BYTES = 16384
#: ... each pixel's expansion input loaded at most this many vec4s at a time (a divisor of K / 4,
#: unrolled; the chunks run in a loop)
EXPAND_SHARED_KC = 8
#: ... in workgroups of this many invocations (one SIMD row on llvmpipe: a small image's rows
#: then spread over more workgroups, so over the cores)
EXPAND_SHARED_WORKGROUP = 8
#: ... each invocation expanding this many pixels at a time (each weight vector it loads serves them all)
EXPAND_SHARED_PX = 2


# ---------------------------------------------------------------- shapes and validation
def input_dims(shape, layout: str) -> tuple[int, int, int, int]:
    """(N, C, H, W) of a 4-D input in ``layout``."""
    if layout == "nchw":
        n, c, h, w = shape
    else:
        n, h, w, c = shape
    return n, c, h, w


def input_strides(shape, layout: str) -> dict:
    """Element strides ``in_sn, in_sc, in_sh, in_sw`` of a 4-D input in ``layout``."""
    st = strides(shape)
    pos = {"nchw": "nchw", "nhwc": "nhwc"}[layout]
    return {f"in_s{ch}": st[pos.index(ch)] for ch in "nchw"}


def filter_dims(shape, layout: str) -> dict:
    """The filter's dimensions by letter (``o``, ``i``, ``h``, ``w``) for a layout string."""
    return {ch: shape[k] for k, ch in enumerate(layout)}


def filter_strides(shape, layout: str) -> dict:
    """The filter's element strides by letter for a layout string."""
    st = strides(shape)
    return {ch: st[k] for k, ch in enumerate(layout)}


def _enum(op, label, arg, value, allowed):
    if not isinstance(value, str) or value not in allowed:
        V.fail(op, label, arg, f"one of {', '.join(map(repr, allowed))}", value)
    return value


def _window_options(op, label, padding, strides_, dilations, groups):
    padding = V.int_list(op, label, "padding", [0, 0, 0, 0] if padding is None else padding, length=4, lo=0,
                         hi=V.MAX_DIM)
    strides_ = V.int_list(op, label, "strides", [1, 1] if strides_ is None else strides_, length=2, lo=1,
                          hi=V.MAX_DIM)
    dilations = V.int_list(op, label, "dilations", [1, 1] if dilations is None else dilations, length=2, lo=1,
                           hi=V.MAX_DIM)
    groups = V.int_value(op, label, "groups", groups, lo=1, hi=V.MAX_DIM)
    return padding, strides_, dilations, groups


def _operands(self, op, label, input, filter, bias):
    vi = self._operand(op, label, "input", input)
    vf = self._operand(op, label, "filter", filter)
    vb = self._operand(op, label, "bias", bias, optional=True)
    if vi.data_type not in FLOATS:
        V.fail(op, label, "input", "an operand of data type float32 or float16", vi.data_type)
    if len(vi.shape) != 4:
        V.fail(op, label, "input", "a 4-D operand", Shown(f"shape {list(vi.shape)}"))
    if len(vf.shape) != 4:
        V.fail(op, label, "filter", "a 4-D operand", Shown(f"shape {list(vf.shape)}"))
    if vf.data_type != vi.data_type:
        V.fail(op, label, "filter", f"the data type of 'input' ({vi.data_type})", vf.data_type)
    return vi, vf, vb


def _check_bias(op, label, vb, vi, out_channels):
    if vb is None:
        return
    if vb.data_type != vi.data_type:
        V.fail(op, label, "bias", f"the data type of 'input' ({vi.data_type})", vb.data_type)
    if tuple(vb.shape) != (out_channels,):
        V.fail(op, label, "bias", f"shape [{out_channels}] (the output channels)", Shown(f"shape {list(vb.shape)}"))


def _effective(op, label, k, d, axis):
    eff = (k - 1) * d + 1
    if eff > V.MAX_DIM:
        V.fail(op, label, "dilations", f"an effective filter {axis} ((size - 1) * dilation + 1) <= {V.MAX_DIM}",
               f"{eff} (filter {axis} {k}, dilation {d})")
    return eff


def _conv_out(op, label, size, k, pb, pe, s, d, axis):
    eff = _effective(op, label, k, d, axis)
    num = size - eff + pb + pe
    if num < 0:
        V.fail(op, label, "filter", f"an effective filter {axis} ({eff}) no larger than the padded input {axis} "
               f"({size} + {pb} + {pe})", f"an output {axis} of {(num // s) + 1 if num > -s else 0}")
    out = num // s + 1
    if out > V.MAX_DIM:
        V.fail(op, label, "padding", f"an output {axis} <= {V.MAX_DIM}", out)
    return out


# ---------------------------------------------------------------- conv2d
# IDL: MLOperand conv2d(MLOperand input, MLOperand filter, optional MLConv2dOptions options = {});
@builder_method
def conv2d(self: MLGraphBuilder, input: MLOperand, filter: MLOperand, *, padding=None, strides=None,
           dilations=None, groups: int = 1, input_layout: str = "nchw", filter_layout: str = "oihw",
           bias: MLOperand | None = None, label: str = "", **kwargs) -> MLOperand:
    """2-D convolution of a 4-D input with a 4-D filter.

    Spec: https://www.w3.org/TR/webnn/#api-mlgraphbuilder-conv2d

    Arguments:
        input (MLOperand): float32 or float16, ``[N, C, H, W]`` (nchw) or ``[N, H, W, C]`` (nhwc).
        filter (MLOperand): same data type; ``oihw``, ``hwio``, ``ohwi`` or ``ihwo`` with
            ``i = C / groups``.
        padding (list[int]): ``[begin_h, end_h, begin_w, end_w]`` (default zeros).
        strides (list[int]): ``[stride_h, stride_w]``, each >= 1 (default ones).
        dilations (list[int]): ``[dilation_h, dilation_w]``, each >= 1 (default ones).
        groups (int): >= 1, dividing the input and output channels (default 1).
        input_layout (str): ``"nchw"`` (default) or ``"nhwc"``; the output has the same layout.
        filter_layout (str): ``"oihw"`` (default), ``"hwio"``, ``"ohwi"`` or ``"ihwo"``.
        bias (MLOperand | None): ``[O]``, same data type, added to every output.
        label (str): a name for errors and GPU objects.

    Returns:
        MLOperand: ``[N, O, OH, OW]`` or ``[N, OH, OW, O]`` with
        ``OH = floor((H - (KH - 1) * dilation_h - 1 + begin_h + end_h) / stride_h) + 1``.

    Raises:
        MLTypeError: wrong ranks or data types; option lists of the wrong length; zero
            strides, dilations or groups; channels not divisible by groups; filter input
            channels != C / groups; a bias not ``[O]``; an effective filter overflow or a
            non-positive output size; unknown layouts or options.
    """
    op = "conv2d"
    V.check_kwargs(op, label, kwargs)
    self._check_usable(op, label)
    vi, vf, vb = _operands(self, op, label, input, filter, bias)
    padding, strides_, dilations, groups = _window_options(op, label, padding, strides, dilations, groups)
    input_layout = _enum(op, label, "input_layout", input_layout, INPUT_LAYOUTS)
    filter_layout = _enum(op, label, "filter_layout", filter_layout, CONV2D_FILTER_LAYOUTS)
    n, c, h, w = input_dims(vi.shape, input_layout)
    fd = filter_dims(vf.shape, filter_layout)
    o = fd["o"]
    if c % groups:
        V.fail(op, label, "groups", f"a divisor of the input channels ({c})", groups)
    if o % groups:
        V.fail(op, label, "groups", f"a divisor of the output channels ({o}, from the {filter_layout} filter)", groups)
    if fd["i"] != c // groups:
        V.fail(op, label, "filter", f"{c // groups} input channels (input channels {c} / groups {groups}) in its "
               f"{filter_layout} shape", Shown(f"shape {list(vf.shape)} with {fd['i']} input channels"))
    _check_bias(op, label, vb, vi, o)
    oh = _conv_out(op, label, h, fd["h"], padding[0], padding[1], strides_[0], dilations[0], "height")
    ow = _conv_out(op, label, w, fd["w"], padding[2], padding[3], strides_[1], dilations[1], "width")
    shape = (n, o, oh, ow) if input_layout == "nchw" else (n, oh, ow, o)
    attrs = {"padding": padding, "strides": strides_, "dilations": dilations, "groups": groups,
             "input_layout": input_layout, "filter_layout": filter_layout}
    inputs = [vi, vf] + ([vb] if vb is not None else [])
    return self._emit1(op, inputs, vi.data_type, shape, attrs, label=label)


support("conv2d", {"input": (FLOATS, (4, 4)), "filter": (FLOATS, (4, 4)), "bias": (FLOATS, (1, 1))},
        (FLOATS, (4, 4)))


def _geometry(node) -> dict:
    """Sizes, strides and options of a conv2d / conv_transpose2d node, by name."""
    a = node.attrs
    x, f = node.inputs[0], node.inputs[1]
    out = node.outputs[0]
    n, c, h, w = input_dims(x.shape, a["input_layout"])
    _, o, oh, ow = input_dims(out.shape, a["input_layout"])
    fd = filter_dims(f.shape, a["filter_layout"])
    ost = input_strides(out.shape, a["input_layout"])
    # FC: the filter is a constant (the block kernel bakes it into its text)
    return dict(NB=n, C=c, H=h, W=w, O=o, OH=oh, OW=ow, KH=fd["h"], KW=fd["w"], G=a["groups"],
                FC=constant_array(f) is not None,
                sh=a["strides"][0], sw=a["strides"][1], dh=a["dilations"][0], dw=a["dilations"][1],
                pt=a["padding"][0], pl=a["padding"][2], **input_strides(x.shape, a["input_layout"]),
                o_sn=ost["in_sn"], o_sc=ost["in_sc"], o_sh=ost["in_sh"], o_sw=ost["in_sw"])


def conv_steps(node, layout: str, bias: bool = True) -> list[dict]:
    """A conv2d node's epilogue steps as its kernels apply them: the bias (input 2, on the
    channel axis of ``layout``) first unless ``bias`` is false (the kernel adds it itself), then
    the node's own steps."""
    steps = []
    if bias and len(node.inputs) > 2 and node.inputs[2] is not None:
        steps.append({"op": "add", "input": 2, "axis": 1 if layout == "nchw" else 3})
    return steps + _epilogue.steps_of(node)


def _conv_epilogue(node, out, layout: str, chan_axis_known: bool = True, bias: bool = True, **names):
    """The epilogue of :func:`conv_steps` (``names``: ``first_binding`` / ``name`` of
    :func:`webnn_gpu.ops._epilogue.build`)."""
    axis = 1 if layout == "nchw" else 3
    return _epilogue.build(node, out, conv_steps(node, layout, bias), chan_axis=axis if chan_axis_known else None,
                           **names)


def _relayout(lc, f: Value, layout: str, target: str, pad_last_to: int | None = None) -> Value:
    """The filter ``f`` in ``target`` letter order (e.g. "hwio"): a repacked constant when the
    data is on the host (last axis zero-padded to ``pad_last_to``), else a permute kernel."""
    if layout == target and pad_last_to is None:
        return f
    perm = [layout.index(ch) for ch in target]
    data = constant_array(f)
    if data is not None:
        arr = np.transpose(data, perm)
        if pad_last_to is not None and pad_last_to != arr.shape[-1]:
            padded = np.zeros(arr.shape[:-1] + (pad_last_to,), dtype=arr.dtype)
            padded[..., :arr.shape[-1]] = arr
            arr = padded
        return make_constant(arr, f.data_type)
    if layout == target:
        return f
    shape = [f.shape[p] for p in perm]
    tmp = lc.temp(f.data_type, shape)
    fst = strides(f.shape)
    lc.kernel("conv/permute.wgsl", [("in", f)], [("out", tmp)], tmp.size, out_strides=strides(shape),
              in_strides=[fst[p] for p in perm])
    return tmp


def _to_nhwc(lc, x: Value) -> Value:
    """An NHWC copy (a temp of this node) of the NCHW activation ``x``."""
    n, c, h, w = x.shape
    tmp = lc.temp(x.data_type, (n, h, w, c))
    xs = strides(x.shape)
    lc.kernel("conv/permute.wgsl", [("in", x)], [("out", tmp)], tmp.size, out_strides=strides(tmp.shape),
              in_strides=[xs[0], xs[2], xs[3], xs[1]])
    return tmp


def _conv_variant(g: dict, layout: str, tuning: str = "default") -> str:
    forced = _env.force("conv")
    if forced and forced not in CONV_VARIANTS:
        raise ValueError(f"WEBNN_GPU_FORCE_CONV={forced!r}: expected one of {', '.join(CONV_VARIANTS)}")
    pointwise = (g["KH"] == g["KW"] == 1 and g["sh"] == g["sw"] == 1 and g["pt"] == g["pl"] == 0
                 and g["OH"] == g["H"] and g["OW"] == g["W"] and g["G"] == 1)
    th, tw = _depthwise_block(g, tuning)
    depthwise = (layout == "nhwc" and g["G"] == g["C"] and g["O"] % g["C"] == 0 and g["KH"] * g["KW"] <= 49
                 and len(_segment(g, tw)) * len(_rows(g, th)) <= DW_MAX_LOADS
                 and not (g["C"] == 1 and g["O"] >= ONE_CHANNEL_MIN_O))
    k = g["KH"] * g["KW"] * g["C"]
    baked = g.get("FC", False) and k <= BLOCK_BAKE_K and g["O"] <= BLOCK_BAKE_O and k * g["O"] <= BLOCK_BAKE_MAX
    block = (layout == "nhwc" and g["G"] == 1 and g["C"] <= BLOCK_MAX_C and g["O"] % 4 == 0
             and (g["O"] <= BLOCK_MAX_O and k * g["O"] // 4 <= BLOCK_MAX_WEIGHTS or baked or _block_wide(g))
             and not pointwise and _block_tile(g) is not None)
    if (forced == "pointwise" and pointwise or forced == "depthwise" and depthwise or forced == "block" and block
            or forced in ("gemm", "direct")):
        return forced
    if pointwise:
        return "pointwise"
    if depthwise:
        return "depthwise"
    if block:
        return "block"
    if g["G"] == 1 or (g["C"] // g["G"] >= 4 and g["O"] // g["G"] >= 4):
        return "gemm"
    return "direct"


def _segment(g: dict, tw: int) -> list[int]:
    """Input column offsets (from ow0 * sw - pl) that TW outputs of one row read."""
    return sorted({p * g["sw"] + kw * g["dw"] for p in range(tw) for kw in range(g["KW"])})


def _rows(g: dict, th: int) -> list[tuple[int, list[tuple[int, int]]]]:
    """Input rows (from oh0 * sh - pt) that TH output rows read, each with its (output row, tap) uses."""
    uses: dict[int, list[tuple[int, int]]] = {}
    for t in range(th):
        for kh in range(g["KH"]):
            uses.setdefault(t * g["sh"] + kh * g["dh"], []).append((t, kh))
    return sorted(uses.items())


def _block_wide(g: dict) -> bool:
    """Whether the ``block`` kernel takes conv geometry ``g`` in its one-row form
    (:data:`BLOCK_WIDE_K`): a constant filter of more than :data:`BLOCK_BAKE_K` and at most
    :data:`BLOCK_WIDE_K` taps x channels that :data:`BLOCK_MAX_WEIGHTS` keeps from the row-loop
    form, at most :data:`BLOCK_MAX_O` output channels and :data:`BLOCK_WIDE_MAX` values."""
    k = g["KH"] * g["KW"] * g["C"]
    return (g.get("FC", False) and BLOCK_BAKE_K < k <= BLOCK_WIDE_K and g["O"] <= BLOCK_MAX_O
            and k * g["O"] // 4 > BLOCK_MAX_WEIGHTS and k * g["O"] <= BLOCK_WIDE_MAX
            and _env.force("conv_block_weights") != "loaded")


def _block_tile(g: dict) -> tuple[int, int] | None:
    """(TH, TW) of the ``block`` kernel: :data:`BLOCK_TILE` (one column past
    :data:`BLOCK_MAX_O` output channels: half the text to compile, and the stores outweigh the
    loads it saves; one row of :data:`BLOCK_WIDE_TW` columns in the one-row form,
    :func:`_block_wide`), halved until the input values one invocation loads fit
    :data:`BLOCK_MAX_LOADS`; None when even one pixel does not."""
    th, tw = min(BLOCK_TILE[0], g["OH"]), min(BLOCK_TILE[1] if g["O"] <= BLOCK_MAX_O else 1, g["OW"])
    if _block_wide(g):
        th, tw = 1, min(BLOCK_WIDE_TW, g["OW"])
    while len(_rows(g, th)) * len(_segment(g, tw)) * g["C"] > BLOCK_MAX_LOADS:
        if th == tw == 1:
            return None
        if th >= tw:
            th = max(1, th // 2)
        else:
            tw = max(1, tw // 2)
    return th, tw


def _block_xv(g: dict, tw: int) -> int:
    """The ``block`` kernel's vec4 count of its input when it loads its input rows as vec4s
    (:data:`BLOCK_VEC4`; every row and every block's first column start at a multiple of 4
    values: ``W * C`` and ``TW * sw * C`` multiples of 4), else 0 (scalar loads)."""
    if not BLOCK_VEC4 or (g["W"] * g["C"]) % 4 or (tw * g["sw"] * g["C"]) % 4:
        return 0
    return g["NB"] * g["H"] * g["W"] * g["C"] // 4


def _f32_literal(v) -> str:
    """A WGSL literal of the exact float32 value ``v`` (a float16 widens exactly)."""
    v = np.float32(v)
    return repr(float(v)) if np.isfinite(v) else literal(float(v), "float32")


def _vec4_literal(values) -> str:
    """``vec4<f32>(...)`` of four values (:func:`_f32_literal`)."""
    return f"vec4<f32>({', '.join(_f32_literal(v) for v in np.asarray(values, np.float32))})"


def _block_words(g: dict, T: str, tuning: str, features) -> bool:
    """Whether the block kernel with storage type ``T`` stores its outputs as 8-value u64 words
    (:data:`BLOCK_X64`: float32, at most :data:`BLOCK_MAX_O` channels, a multiple of 8;
    ``WEBNN_GPU_FORCE_BLOCK_WORDS=vec4`` keeps vec4s, ``=u64`` takes words in float16 too)."""
    forced = _env.force("block_words")
    if forced and forced not in ("vec4", "u64"):
        raise ValueError(f"WEBNN_GPU_FORCE_BLOCK_WORDS={forced!r}: expected vec4 or u64")
    return (BLOCK_X64 and g["O"] % 8 == 0 and g["O"] <= BLOCK_MAX_O and tuning == "lane-loop"
            and "shader-int64" in features and forced != "vec4" and (T == "f32" or forced == "u64"))


def _block_input_words(xv: int, T: str, tuning: str, features) -> bool:
    """Whether the block kernel loads its input's vec4s (``xv``) as u64 words of 4 float32 values
    (``xw``; :data:`BLOCK_INPUT_WORDS`) on the lane-loop profile with ``shader-int64``
    (float16 has its u32 pairs, ``h2``); ``WEBNN_GPU_FORCE_BLOCK_INPUT_WORDS=vec4|words``
    forces either form where it may run."""
    words = _env.force_words("block_input_words", BLOCK_INPUT_WORDS)
    return bool(xv) and T == "f32" and tuning == "lane-loop" and "shader-int64" in features and words


def _block_literals(node, w: Value, wide: bool = False) -> tuple[list[str] | None, list[str] | None]:
    """The ``block`` kernel's baked weights (:data:`BLOCK_BAKE_MAX` values, or
    :data:`BLOCK_WIDE_MAX` in the one-row form: ``wide``): the filter ``w`` ([KH, KW, C, O],
    hwio) as one ``vec4<f32>`` literal per filter vec4 in the order the kernel reads them, and
    the bias as one per output vec4 (None when there is none or it is not constant: the epilogue
    adds it); (None, None) when the filter is not baked."""
    data = constant_array(w)
    limit = BLOCK_WIDE_MAX if wide else BLOCK_BAKE_MAX
    if data is None or data.size > limit or _env.force("conv_block_weights") == "loaded":
        return None, None
    wconst = [_vec4_literal(v) for v in np.asarray(data, np.float32).reshape(-1, 4)]
    bias = node.inputs[2] if len(node.inputs) > 2 else None
    bdata = constant_array(bias) if bias is not None else None
    if bdata is None:
        return wconst, None
    return wconst, [_vec4_literal(v) for v in np.asarray(bdata, np.float32).reshape(-1, 4)]


def _baked_chan_operands(ep, O: int):
    """The epilogue ``ep`` of a kernel with baked weights, its per-channel operands (those
    ``ep_q`` loads: a PReLU slope, a per-channel scale) baked too when they are all constants:
    (the epilogue without those operands and ``ep_q``, one ``EpQ(...)`` literal per output
    channel); (``ep``, None) when some is not a constant or is read elsewhere."""
    baked = ep.without_q()
    if baked is None:
        return ep, None
    operands = dict(ep.operands)
    values = [constant_array(operands[name]) for name in ep.chan_operands]
    if any(v is None for v in values):
        return ep, None
    cols = [np.asarray(v, np.float32).reshape(-1) for v in values]
    return baked, [f"{ep.q_struct}({', '.join(_f32_literal(c[ch]) for c in cols)})" for ch in range(O)]


def partials_ok(node, tuning: str = "default") -> bool:
    """Whether ``node`` can also write the partial sums of a global average pool of its output
    as a second output (the compiler's ``fuse_pool_partials``): one NHWC image, a float output
    and no other output, on a kernel that writes them: a ``block`` conv2d, a pointwise conv2d
    on the tile kernel (channels a multiple of 4), or a ``depthwise_project`` node projecting
    with a pointwise conv2d from and to channels a multiple of 4."""
    if len(node.outputs) != 1 or node.outputs[0].data_type not in FLOATS:
        return False
    if node.op == "depthwise_project":
        proj = node.attrs["project"]
        return (proj is not None and proj.op == "conv2d" and proj.outputs[0].shape[3] % 4 == 0
                and proj.outputs[0].shape[0] == 1 and proj.inputs[0].shape[3] % 4 == 0)
    if node.op != "conv2d" or node.attrs.get("input_layout") != "nhwc":
        return False
    g = _geometry(node)
    variant = _conv_variant(g, "nhwc", tuning)
    if variant == "block":
        return g["NB"] == 1 and "input_scale" not in node.attrs and "input_add" not in node.attrs
    return (variant == "pointwise" and g["NB"] == 1 and g["O"] % 4 == 0
            and g["OH"] * g["OW"] * g["O"] > SMALL_MAX_OUTPUTS)


def pool_rows(node, tuning: str = "default", lanes: int = 0) -> int:
    """The rows of the [rows, C] partial sums ``node``'s kernel writes for a global average pool
    of its output (``attrs["pool_output"]``): one per pixel block of a depthwise conv2d or a
    ``depthwise_project`` node, one per workgroup of a ``block`` conv2d, one per row tile of a
    pointwise conv2d (the tile kernel). The compiler sizes the partials Value with it; the
    lowerings assert the same block."""
    if node.op == "depthwise_project":
        e, proj = node.attrs.get("expand"), node.attrs["project"]
        g = _geometry(node.attrs["depthwise"])
        n4 = -(-_project_width(proj) // 4) if proj is not None else 0
        k4 = e.inputs[0].shape[3] // 4 if e is not None and not node.attrs.get("expand_shared") else 0
        th, tw = _dwp_block(g, n4, k4, tuning, proj is not None and proj.op == "conv2d")
    else:
        g = _geometry(node)
        variant = _conv_variant(g, "nhwc", tuning)
        if variant == "pointwise":
            M = g["OH"] * g["OW"]
            deep = deep_ok(node.outputs[0].data_type, g["C"] % 4 == 0, True)  # as tile_kernel decides
            tm = dense_tile_rows(M, g["O"], g["C"], tuning, lanes, deep, g["W"] if node.attrs.get("input_add_up2") else 0)
            return -(-M // tm)
        tile = _block_tile(g) if variant == "block" else _dw_strip(g, tuning)
        assert tile is not None, "_conv_variant checks the block fits"
        th, tw = tile
        if variant == "block":  # one row per workgroup
            return -(-(-(-g["OH"] // th) * -(-g["OW"] // tw)) // PROJECT_WORKGROUP)
    return -(-g["OH"] // th) * -(-g["OW"] // tw)


def _pool_partials(lc, conv, rows: int, C: int):
    """Where a kernel writes the partial sums of conv2d ``conv``'s global pool, and what reduces
    them: (the [rows, C] float32 Value, a function adding the mean's kernel or doing nothing).
    With ``attrs["pool_output"] == "partials"`` they are the conv's second output, which a
    later kernel reduces (fuse_squeeze_excite, fuse_pool_partials); with True, a temp that a
    column mean reduces into that output."""
    pooled = conv.outputs[1]
    g = _geometry(conv)
    assert g["NB"] == 1, "the pool passes check one image"
    if conv.attrs["pool_output"] == "partials":
        assert tuple(pooled.shape) == (rows, C), "pool_rows sizes the partials"
        return pooled, lambda: None
    part = lc.temp("float32", (rows, C))

    def reduce() -> None:
        from .reduce import column_mean

        column_mean(lc, part, pooled, rows=rows, cols=C, count=g["OH"] * g["OW"])

    return part, reduce


def _depthwise_block(g: dict, tuning: str = "default") -> tuple[int, int]:
    """(TH, TW) output pixels of a depthwise pixel block (the depthwise + projection kernel's
    starting block): the profile's :data:`DW_BLOCK`, smaller for small images and for windows
    whose loaded rows x columns would not fit in registers."""
    th, tw = DW_BLOCK.get(tuning, DW_BLOCK["default"])
    th, tw = min(th, g["OH"]), min(tw, g["OW"])
    while len(_rows(g, th)) * len(_segment(g, tw)) > DW_MAX_LOADS and th * tw > 1:
        if th >= tw:
            th = max(1, th // 2)
        else:
            tw = max(1, tw // 2)
    return th, tw


def _dw_taps(g: dict) -> list[tuple[int, int, int]]:
    """(kh, j, m) per tap row of the stand-alone depthwise kernel: tap row kh reads input row j
    (< sh) of a row step into accumulator slot m (the output row m steps behind)."""
    return [(kh, kh * g["dh"] % g["sh"], kh * g["dh"] // g["sh"]) for kh in range(g["KH"])]


def _dw_strip(g: dict, tuning: str = "default") -> tuple[int, int]:
    """(TH, TW): output rows (a strip, walked in a loop) and columns (unrolled) per invocation
    of the stand-alone depthwise kernel: TW = :data:`DW_TW` (on the ``lane-loop`` profile the
    output's width where it is at most :data:`DW_TW_WHOLE`, unless
    ``WEBNN_GPU_FORCE_DW_WIDTH=fixed``) and the strip height of least :func:`_dw_cost` among
    those that split the output
    rows into strips of equal count and keep the row loop (TH + A - 1 iterations) within
    llvmpipe's loop limit (:data:`LOOP_BUDGET`)."""
    whole = (_env.force_choice("dw_width", ("fixed",)) != "fixed" and tuning == "lane-loop"
             and g["OW"] <= DW_TW_WHOLE)  # measured on lavapipe only
    tw = g["OW"] if whole else min(DW_TW, g["OW"])
    slots = max(t[2] for t in _dw_taps(g))  # A - 1
    heights = {th for th in {-(-g["OH"] // k) for k in range(1, g["OH"] + 1)} if th + slots <= LOOP_BUDGET}
    return min(heights, key=lambda th: (_dw_cost(g, th, tw, tuning), -th)), tw


def _dw_words(g: dict, tuning: str, features, n_inv: int) -> tuple[bool, int]:
    """(x64, NH) of the stand-alone depthwise kernel for geometry ``g`` with ``n_inv``
    invocations of one vec4 of channels each: whether it moves its input and output as u64
    words (:data:`DW_X64`) and how many channel vec4s one invocation computes
    (:data:`DW_NH`). ``WEBNN_GPU_FORCE_DW_WORDS=vec4`` keeps vec4s of the storage type,
    ``=u64`` one vec4 per invocation."""
    vec = g["O"] % 4 == 0 and g["O"] == g["C"]
    forced = _env.force("dw_words")
    x64 = DW_X64 and vec and tuning == "lane-loop" and "shader-int64" in features and forced != "vec4"
    nh = (DW_NH if x64 and (g["O"] // 4) % DW_NH == 0 and g["KH"] * g["KW"] <= DW_NH_MAX_TAPS
          and n_inv // DW_NH >= DW_NH_MIN_GROUPS * DW_WORKGROUP and forced != "u64" else 1)
    return x64, nh


def _dw_cost(g: dict, th: int, tw: int, tuning: str = "default") -> float:
    """Estimated time of the stand-alone depthwise kernel with TH x TW strips, in vec4
    multiply-adds of one invocation: each invocation's work (:data:`DW_COST`'s weights: a fixed
    part and the taps; per row step its input loads, multiply-adds, whose cost grows with the
    accumulators held, and slot moves; per output its store) times the invocations the busiest
    of :data:`DW_CORES` threads runs (lavapipe runs a workgroup on one thread), rounded up to
    whole SIMD rows of :data:`DW_LANES` (a partly filled row costs a full one)."""
    w = DW_COST.get(tuning, DW_COST["default"])
    taps = _dw_taps(g)
    A, jr, kk = max(t[2] for t in taps) + 1, len({t[1] for t in taps}), g["KH"] * g["KW"]
    per_step = (w["load"] * jr * len(_segment(g, tw)) + kk * tw * (1 + w["spill"] * A * tw)
                + w["move"] * (A - 1) * tw)
    strips = -(-g["OH"] // th)
    rows = g["OH"] + strips * (A - 1)  # row steps of one column of strips
    cols = -(-g["OW"] // tw)
    per_col = strips * (w["fixed"] + w["tap"] * kk) + rows * per_step + g["OH"] * tw * w["store"]
    n_inv = g["NB"] * strips * cols * -(-g["O"] // 4)
    wg = DW_WORKGROUP
    busiest = min(n_inv, -(-(-(-n_inv // wg)) // DW_CORES) * wg)  # invocations of the busiest thread
    return -(-busiest // DW_LANES) * DW_LANES * per_col / strips


def input_prologue_ok(node, scale=None, residual=None) -> bool:
    """Whether conv2d ``node`` can apply ``x * scale + residual`` (either may be None) to its
    input as it loads it (``attrs["input_scale"]`` / ``["input_add"]``, set by the compiler's
    ``fuse_conv_input`` pass): a pointwise NHWC convolution on the tile kernel, channels a
    multiple of 4, ``scale`` one value per input channel (shape [..., C], ones before), and
    ``residual`` of the input's shape, all of the output's data type."""
    x, out = node.inputs[0], node.outputs[0]
    if node.attrs.get("input_layout") != "nhwc" or out.data_type not in FLOATS:
        return False
    C = x.shape[3]
    if C % 4:
        return False
    if scale is not None and (scale.data_type != out.data_type or tuple(scale.shape)[-1:] != (C,)
                              or any(d != 1 for d in scale.shape[:-1])):
        return False
    if residual is not None and (residual.data_type != out.data_type or tuple(residual.shape) != tuple(x.shape)):
        return False
    g = _geometry(node)
    return _conv_variant(g, "nhwc") == "pointwise" and g["NB"] * g["OH"] * g["OW"] * g["O"] > SMALL_MAX_OUTPUTS


#: The attributes of a conv2d's input prologues (one per rule that sets it): a conv takes one.
INPUT_PROLOGUES = ("input_scale", "input_add", "input_relu", "input_affine", "input_preact")

#: Activations of a pre-activation input step (``attrs["input_preact"]``, the compiler's
#: ``fuse_conv_input_preact``): ``relu`` and ``clamp`` (either bound; the stand-alone kernels'
#: ``max`` / ``min``, exact in float32; in float16 only with bounds that are float16 values).
PREACT_OPS = ("relu", "clamp")


def preact_act_wgsl(act, v: str) -> str:
    """The WGSL of activation ``act`` of an ``input_preact`` step (None, ``("relu",)`` or
    ``("clamp", lo, hi)``) applied to the ``vec4<f32>`` expression ``v``."""
    if act is None:
        return v
    if act[0] == "relu":
        return f"max({v}, vec4<f32>(0.0))"
    lo, hi = act[1], act[2]
    if lo is not None and lo != float("-inf"):
        v = f"max({v}, vec4<f32>({_f32_literal(np.float32(lo))}))"
    if hi is not None and hi != float("inf"):
        v = f"min({v}, vec4<f32>({_f32_literal(np.float32(hi))}))"
    return v


#: WGSL operators of the steps of an ``input_preact`` (``attrs["input_preact"]["steps"]``).
PREACT_STEPS = {"sub": "-", "div": "/", "mul": "*", "add": "+"}


def _preact(node) -> dict | None:
    """conv2d ``node``'s ``attrs["input_preact"]`` as :func:`webnn_gpu.ops.linalg.tile_kernel`'s
    ``a_pre``: ``{"steps": [(WGSL operator, per-channel constant Value), ...], "act": WGSL
    format}``, else None."""
    p = node.attrs.get("input_preact")
    if p is None:
        return None
    return {"steps": [(PREACT_STEPS[op], node.inputs[i]) for op, i in p["steps"]],
            "act": preact_act_wgsl(p["act"], "{}")}


def input_preact_ok(node, operands=(), context=None) -> bool:
    """Whether conv2d ``node`` can apply steps by ``operands`` (constants of one value per input
    channel; :data:`PREACT_STEPS`) and an activation (one of :data:`PREACT_OPS` or none) to each
    in-image value of its input as it loads it (``attrs["input_preact"]``, set by
    the compiler's ``fuse_conv_input_preact``): an NHWC conv2d with a float output on the tile
    kernel (``matmul/tile.wgsl``) as a pointwise conv (with ``WEBNN_GPU_FORCE_INPUT_PREACT=windowed``
    also an implicit GEMM of one group: a window, strides, padding; not by default, since the
    step runs on every tap's load: an ONNX pre-activation stage of 3x3 convs at 56 x 56 x 64,
    ``knob_ab`` 1.05 of the kernels it changes), input
    channels a multiple of 4 (A's vec4 loads), a reduction one tile launch holds (no split
    over the channels) and not on ``matmul/matvec.wgsl`` or the small-product kernel, no other
    input prologue and no epilogue step reading its input. The out-of-image taps of a padded
    conv stay 0 (the padding of the activated input). ``WEBNN_GPU_FORCE_INPUT_PREACT=off`` takes
    none (the stand-alone kernel, for side-by-side runs); ``=concat`` also takes the chains a
    concat would store as a side map (``fuse_concat_map``; not by default), ``=windowed`` the
    windowed convs."""
    forced = _env.force_choice("input_preact", ("off", "concat", "windowed"))
    if forced == "off":
        return False
    from .linalg import k_chunks, plan_context, small_product

    pc = plan_context(context)
    variant = _prologue_host(node, pc.tuning)
    if variant != "pointwise" and (variant != "gemm" or forced != "windowed"):
        return False
    x, out = node.inputs[0], node.outputs[0]
    g = _geometry(node)
    C = g["C"]
    if g["G"] != 1 or C % 4 or x.data_type != out.data_type:
        return False
    for v in operands:
        if (v.data_type != out.data_type or constant_array(v) is None
                or tuple(v.shape)[-1:] != (C,) or any(d != 1 for d in v.shape[:-1])):
            return False
    if variant == "pointwise":
        M = g["NB"] * g["OH"] * g["OW"]
        if k_chunks(C) is not None or small_product(M, g["O"], 1, C):
            return False
    elif tile_loop_iterations(C, g["KH"], g["KW"]) > LOOP_BUDGET:
        return False
    return matvec_conv_plan(pc, node, g, variant) is None


def _prologue_host(node, tuning: str) -> str | None:
    """The kernel variant of ``node`` when it is an NHWC conv2d with a float output, no input
    prologue yet and no epilogue step that reads its input (that step would read the
    prologue's input, not its result); else None."""
    if node.op != "conv2d" or node.attrs.get("input_layout") != "nhwc" or node.outputs[0].data_type not in FLOATS:
        return None
    if any(k in node.attrs for k in INPUT_PROLOGUES) or any(st.get("input") == 0 for st in _epilogue.steps_of(node)):
        return None
    return _conv_variant(_geometry(node), "nhwc", tuning)


def input_affine_ok(node, tuning: str = "default") -> bool:
    """Whether conv2d ``node`` can apply an affine of constants (``attrs["input_affine"]``, set
    by the compiler's ``fuse_conv_input``: steps ``(op, values)``, ``op`` one of mul, add, sub,
    div by one value or one per input channel) to each in-image value it loads: an NHWC conv
    with a float output on the first-layer ``block`` kernel (``conv/block.wgsl``: few input
    channels, each loaded once per block and held in registers), no other input prologue and
    no epilogue step that reads its input (that step would read ``x``, not the affine of it).
    Out-of-image taps read 0, the padding of the affine's output.
    ``WEBNN_GPU_FORCE_INPUT_AFFINE=off`` takes none (the affine's own kernel, for side-by-side runs)."""
    return _env.force_choice("input_affine", ("off",)) != "off" and _prologue_host(node, tuning) == "block"


def _affine_terms(steps, C: int) -> list[list[tuple[str, str]]]:
    """``attrs["input_affine"]`` as the block kernel's per-channel terms: for each input channel
    the ``(operator, float32 literal)`` pairs applied in order to a loaded value."""
    sign = {"mul": "*", "add": "+", "sub": "-", "div": "/"}
    return [[(sign[op], _f32_literal(vals[c] if len(vals) > 1 else vals[0])) for op, vals in steps]
            for c in range(C)]


#: Unary element-wise ops a depthwise conv2d may apply to each input value it loads
#: (``attrs["input_relu"]``, the compiler's ``fuse_conv_input_relu``): only ops with op(0) == 0,
#: since the kernel's zero padding must read as op(padding) = op(0) (sigmoid(0) = 0.5: not one).
#: The expression is the stand-alone kernel's (elementwise.py's relu row), in float32 after the
#: load: max is exact, so float16 values come out the same.
INPUT_RELU_OPS = ("relu",)


def input_relu_ok(node, tuning: str = "default") -> bool:
    """Whether ``node`` can apply ``relu`` to its input as it loads it (``attrs["input_relu"]``,
    set by the compiler's ``fuse_conv_input_relu``): an NHWC conv2d on the stand-alone depthwise
    kernel (``conv/depthwise.wgsl``), or a ``depthwise_project`` node without an expansion (its
    depthwise conv's ``attrs["input_relu"]``; any of its three kernels), with a float output, no
    other input prologue and no epilogue step that reads the depthwise input (a residual add of
    the conv's own input would read ``y``, not ``relu(y)``; in a ``depthwise_project`` node
    neither the depthwise conv's epilogue nor the projection's may read it). Out-of-image taps
    read 0, which is relu(0). ``WEBNN_GPU_FORCE_INPUT_RELU=depthwise`` takes the stand-alone
    depthwise kernel only, ``=off`` nothing (for side-by-side runs)."""
    forced = _env.force_choice("input_relu", ("depthwise", "off"))
    if forced == "off":
        return False
    if node.op == "depthwise_project":
        dw, proj = node.attrs["depthwise"], node.attrs["project"]
        if forced == "depthwise" or node.attrs.get("expand") is not None:
            return False
        if not node.inputs or node.inputs[0] is not dw.inputs[0]:
            return False
        x = dw.inputs[0]
        if (dw.outputs[0].data_type not in FLOATS or any(k in dw.attrs for k in INPUT_PROLOGUES)
                or any(st.get("input") == 0 for st in _epilogue.steps_of(dw)) or any(v is x for v in dw.inputs[1:])):
            return False
        return proj is None or not any(v is x for v in proj.inputs)
    return _prologue_host(node, tuning) == "depthwise"


def upsampled_add_ok(node, small) -> bool:
    """Whether pointwise conv2d ``node``, which adds ``inputs[attrs["input_add"]]`` to its
    input as it loads it, can read that operand as ``small``, the small image of an exact 2x
    bilinear upsampling (the compiler's ``fuse_conv_upsample``, ``attrs["input_add_up2"]``):
    the tile kernel reads one image row per tile, so the image width must be even."""
    x = node.inputs[0]
    return (node.attrs.get("input_layout") == "nhwc" and "input_add" in node.attrs and x.shape[2] % 2 == 0
            and x.shape[1] % 2 == 0 and tuple(small.shape) == (x.shape[0], x.shape[1] // 2, x.shape[2] // 2, x.shape[3])
            and small.data_type == x.data_type)


#: ``fuse_upsampled_residual`` folds a 2x upsampling into a pointwise conv's epilogue where the
#: tile kernel loads the small image as 8-value words (four per two vec4s it stores: channels a
#: multiple of 8, :func:`linalg.tile_words`) and the small image has at most this many bytes:
#: benchmarks/up2_residual.py (lavapipe) measured the loads at 0.53-0.93 of the doubling
#: kernel's time and the wall at 0.92-0.99 up to 147 KiB, 0.97-1.04 at 256-300 KiB (the vec4
#: form of the loads, four per vec4, about the doubling kernel's time: not taken).
UP2_RESIDUAL_MAX_BYTES = 131072


def upsampled_residual_ok(node, small, tuning: str = "default", features=()) -> bool:
    """Whether conv2d ``node`` can read an operand of its epilogue as ``small``'s exact 2x
    bilinear upsampling (the compiler's ``fuse_upsampled_residual``, an ``"up2"`` step): a
    pointwise NHWC conv (the tile kernel, which loads the operand through the epilogue's
    helpers) on a device where it moves words (the lane-loop profile with ``shader-int64``),
    ``small`` with channels a multiple of 8 and at most :data:`UP2_RESIDUAL_MAX_BYTES`.
    ``WEBNN_GPU_FORCE_UP2_RESIDUAL=any`` takes any size, device and channels (a multiple of 4:
    the vec4 helpers), ``=off`` none (for side-by-side runs)."""
    from types import SimpleNamespace

    from .linalg import tile_words

    forced = _env.force_choice("up2_residual", ("any", "off"))
    if forced == "off" or node.op != "conv2d" or node.attrs.get("input_layout") != "nhwc" or len(node.outputs) != 1:
        return False
    if _conv_variant(_geometry(node), "nhwc", tuning) != "pointwise":
        return False
    return forced == "any" or (small.shape[3] % 8 == 0
                               and tile_words(SimpleNamespace(tuning=tuning, features=features), small.data_type)
                               and _dtypes.byte_length(small.data_type, small.shape) <= UP2_RESIDUAL_MAX_BYTES)


def pool_output_ok(node, tuning: str) -> bool:
    """Whether conv2d ``node`` can also produce the global average pool of its output (the
    compiler's ``fuse_conv_pool`` pass, ``attrs["pool_output"]``): one NHWC image on the
    depthwise kernel with channels a multiple of 4."""
    if node.attrs.get("input_layout") != "nhwc" or len(node.outputs) != 1 or node.outputs[0].data_type not in FLOATS:
        return False
    g = _geometry(node)
    return (g["NB"] == 1 and g["C"] % 4 == 0 and g["O"] == g["C"]
            and _conv_variant(g, "nhwc", tuning) == "depthwise")


def store_d2s_ok(node, block: int, tuning: str) -> bool:
    """Whether conv2d ``node`` can store its output as that output's depth_to_space with
    ``block`` x ``block`` blocks, channels-last in TensorFlow's (DCR) order (the compiler's
    ``store_depth_to_space``, ``attrs["store_d2s"]``): a float NHWC conv on the depthwise kernel
    with vec4 channels (multiplier 1, channels a multiple of 4) and no other output or input
    prologue, whose channels split into ``block * block`` groups of a multiple of 4 (each of
    its vec4s then lands whole in one output pixel)."""
    a = node.attrs
    if (node.op != "conv2d" or a.get("input_layout") != "nhwc" or len(node.outputs) != 1 or a.get("pool_output")
            or "input_scale" in a or "input_add" in a or node.outputs[0].data_type not in FLOATS or block < 2):
        return False
    g = _geometry(node)
    cq, rem = divmod(g["O"], block * block)
    return (g["O"] == g["C"] and g["O"] % 4 == 0 and rem == 0 and cq % 4 == 0
            and _conv_variant(g, "nhwc", tuning) == "depthwise")


def project_ok(dw, proj, tuning: str = "default", lanes: int = 0, k4: int = 0) -> bool:
    """Whether depthwise conv2d ``dw`` and ``proj``, the node reading its output, can run as
    one ``conv/depthwise_project.wgsl`` kernel (the compiler's ``fuse_depthwise_project``):
    ``dw`` on the depthwise kernel (NHWC, channels a multiple of 4, no other output), ``proj``
    a pointwise NHWC conv2d (where one kernel is estimated faster than the depthwise and the
    tile kernel: :func:`project_pays`; a projection wider than :data:`PROJECT_MAX_N` runs in
    column blocks, within llvmpipe's loop limit) or an NHWC conv_transpose2d whose filter equals
    its stride (no padding, one group, at most :data:`PROJECT_MAX_N` values per pixel), with a
    constant filter, reading the depthwise output only as its input. Channels that are not a
    multiple of 4 only on the channel-lane kernel (``lanes``: its subgroup lanes,
    :func:`dwp_lanes`; :func:`_lanes_tail_ok`), with at most :data:`PROJECT_MAX_N` columns.
    ``k4``: with the expansion from that many vec4s of input folded in too, a pointwise
    projection where the one kernel is estimated faster than three (:func:`triple_pays`)."""
    if dw.op != "conv2d" or len(dw.outputs) != 1 or dw.attrs.get("input_layout") != "nhwc":
        return False
    if "input_scale" in dw.attrs or "input_add" in dw.attrs or dw.attrs.get("pool_output"):
        return False
    mid, out = dw.outputs[0], proj.outputs[0]
    if mid.data_type not in FLOATS or out.data_type != mid.data_type or len(proj.outputs) != 1:
        return False
    g = _geometry(dw)
    if g["O"] != g["C"] or _conv_variant(g, "nhwc", tuning) != "depthwise" or _env.force("conv"):
        return False
    if g["C"] % 4 and (proj.op != "conv2d" or not lanes or constant_array(dw.inputs[1]) is None):
        return False
    if proj.inputs[0] is not mid or any(v is mid for v in proj.inputs[1:]):
        return False
    if proj.attrs.get("input_layout") != "nhwc" or constant_array(proj.inputs[1]) is None:
        return False
    if "input_scale" in proj.attrs or "input_add" in proj.attrs:
        return False
    p = _geometry(proj)
    if proj.op == "conv2d" and g["C"] % 4:
        n = p["O"]
        ok = _conv_variant(p, "nhwc", tuning) == "pointwise" and _lanes_tail_ok(dw, g, n, tuning, lanes)
    elif proj.op == "conv2d":
        n = p["O"]
        ok = _conv_variant(p, "nhwc", tuning) == "pointwise" and (triple_pays(g, n, k4, tuning) if k4
                                                                  else project_pays(g, n, tuning))
    elif k4:
        return False
    elif proj.op == "conv_transpose2d":
        n = p["KH"] * p["KW"] * p["O"]
        a = proj.attrs
        ok = (p["G"] == 1 and p["KH"] == p["sh"] and p["KW"] == p["sw"] and p["dh"] == p["dw"] == 1
              and not any(a["padding"]) and p["OH"] == p["H"] * p["KH"] and p["OW"] == p["W"] * p["KW"]
              and not _env.force("conv_transpose"))
    else:
        return False
    return ok and (n <= PROJECT_MAX_N or proj.op == "conv2d" and not g["C"] % 4 and tuning in DWP_WIDE_MATRIX
                   and g["C"] // 4 * (_max_rows(g) + 2) + n + 2 <= LOOP_BUDGET)


def project_wide(proj) -> bool:
    """Whether projection ``proj`` makes more than :data:`PROJECT_MAX_N` values per pixel: the
    depthwise + projection kernel then runs it in column blocks (:func:`_dwp_plan`), without an
    expansion folded in (the expansion's plan keeps one column block)."""
    return proj is not None and _project_width(proj) > PROJECT_MAX_N


def _max_rows(g: dict) -> int:
    """The most input rows a block of the depthwise + projection kernel reads (its row loop's
    iterations per channel group): the tallest block of :data:`DWP_BLOCK_SIZES`."""
    return (max(DWP_BLOCK_SIZES) - 1) * g["sh"] + (g["KH"] - 1) * g["dh"] + 1


#: The cost model of :func:`project_pays` on profiles without a fitted one (:data:`DWP_PAY_FIT`),
#: per tuning profile: what one load or store costs against one vec4 multiply-add of a SIMD
#: batch of invocations (on lavapipe before Mesa 24 every load is a loop over the lanes).
DWP_LOAD_COST = {"lane-loop": 8.0, "default": 2.0}
#: ... and the fixed cost of one more kernel in the same units (about 30 us on lavapipe).
DWP_KERNEL_COST = 1.2e5
#: ... and a factor on the fused kernel's estimate per profile (lavapipe 25 runs it about 3x
#: slower than its loads and multiply-adds say: fitted on benchmarks/dw_project.py's grid).
DWP_FUSED_FACTOR = {"lane-loop": 1.0, "default": 3.0}
#: ... the fused kernel's weights per profile (storage vec4 load or store, uniform vec4 load,
#: vec4 multiply-add): on lavapipe before Mesa 24 every storage access is a loop over the SIMD
#: lanes and each component, uniform loads are gathers and multiply-adds nearly free (fitted on
#: 10 shapes x up to 13 plans of the kernel, Mesa 22.3); elsewhere the loads-and-multiply-adds
#: model of the two-kernel side.
DWP_FUSED_WEIGHTS = {"lane-loop": (8.0, 1.75, 0.05), "default": (2.0, 2.0, 1.0)}
#: ... the block rows and columns its plan (:func:`_dwp_plan`) chooses from, and at most this
#: many vec4 accumulators per invocation there: LLVM's compile time on lavapipe grows faster
#: than linearly with the accumulators held through the channel loop (docs/conv.md, Pipelines;
#: 32 would halve it for these blocks but ran face_detection_short_range's kernels 1.27x slower)
DWP_BLOCK_SIZES = (1, 2, 3, 4, 6, 8)
DWP_PLAN_MAX_ACC = 64
#: ... the profiles whose weights were fitted (others keep one invocation per pixel block)
DWP_PLAN_PROFILES = ("lane-loop",)
#: ... and the cores a kernel's workgroups spread over (lavapipe runs a workgroup on one thread;
#: 1: idle cores are not counted).
DWP_CORES = {"lane-loop": 2, "default": 1}


#: What one more kernel launch costs on lavapipe before Mesa 24 (the lane-loop profile), in
#: microseconds of wall time beyond what the kernels' timestamp queries show: the cost models
#: below are fitted to those timestamps (each kernel profiled in a compute pass of its own), whose
#: fixed parts already hold most of the 45-70 us a launch takes in this VM (lavapipe's threads
#: woken per dispatch). Measured inside models, every depthwise + projection pair split against
#: the model as built (``benchmarks/dw_shapes.py --paired split``, 30-40 rounds alternating in one
#: process): (wall difference - the differing kernels' timestamp difference) / launches added,
#: a median of 6-7 us per launch on iris_landmark (25 launches), 8-9 on face_landmark (18) and 12
#: on face_detection_short_range (16), upper quartiles 11-32; at 10 us the model split three
#: stride-2 pairs that ran 0.81-1.16 of the fused kernel as two kernels between runs (not sure:
#: one kernel), at 20 only pairs that ran faster split (docs/conv.md, The cost model). Used for: the
#: second kernel's launch on the two-kernel side of :func:`project_pays` (``DWP_PAY_FIT``'s
#: ``dispatch``) and the separate expansion conv's launch in :func:`_expand_shared_cost`.
LAUNCH_US = 20.0


#: The fitted form of the cost model on lavapipe before Mesa 24 (the lane-loop profile), in
#: microseconds (docs/conv.md, The cost model): the fused kernel with its lane-shared plan
#: (:func:`_dwp_plan`) per 1000 of its busiest thread's input-window loads, depthwise
#: multiply-adds, projection multiply-adds and stores, and a fixed part; the stand-alone
#: depthwise kernel per 1000 units of :func:`_dw_cost` and a fixed part; the tile kernel per
#: million vec4 multiply-adds and vec4s loaded or stored (the depthwise output it reads, its
#: output) and a fixed part; and the wall time of one more dispatch beyond its kernel's timestamps
#: (:data:`LAUNCH_US`). Each side was fitted by
#: least relative error to the per-kernel times of every pair of the 13 zoo models and 30
#: synthetic shapes (timestamp queries; ``benchmarks/dw_shapes.py --forms``,
#: ``benchmarks/dw_project.py``).
DWP_PAY_FIT: dict[str, dict[str, Any]] = {"lane-loop": dict(fused=(4.5, 0.0, 0.36, 11.1, 37.8), dw=(0.295, 30.9),
                                                            tile=(158.3, 2456.6, 47.6), dispatch=LAUNCH_US)}


#: ... and for a wide projection (more than :data:`PROJECT_MAX_N` columns, split into column
#: blocks: :func:`_dwp_plan`), microseconds per 1000 of the busiest thread's vec4 loads of the
#: projection matrix, from a storage buffer and from a uniform one: the fit above was made on
#: plans whose one column block shares each matrix load between all the pixels of 8 lanes'
#: blocks, where these loads are a small part; a column block of a wide projection loads its
#: rows for one or two pixels per lane. A storage load costs what an input-window load does
#: (the fit's first weight), a uniform one (a gather) 0.22 of it (DWP_FUSED_WEIGHTS' ratio).
DWP_WIDE_MATRIX = {"lane-loop": (4.5, 1.0)}
#: ... and the tile kernel's side of a wide projection adds this many microseconds per million
#: of its products per row of its tile (``M C N / 4 / TM``, TM of
#: :func:`webnn_gpu.ops.linalg.choose_tile_sg`): per k step a lane loads its share of B's 4 TN4
#: vectors and broadcasts all of them for its TM rows, so a tile of one or two rows (the fewest
#: padded rows of 9, 16, 81 or 289 pixels) is bound by them; the fit above saw projections of at
#: most 120 columns. Fitted on benchmarks/dw_project.py --wide (15 shapes, one run): the tile
#: kernel's time over its estimate went from 1.2-3.1 to 1.0-1.75.
DWP_WIDE_TILE = {"lane-loop": 300.0}
#: ... and a wide projection fuses only where the fused estimate is at most this fraction of the
#: two kernels': on benchmarks/dw_project.py --wide (15 shapes, one run) the fused kernel took
#: a median 1.32x its estimate and the two kernels (a dispatch counted) 1.13x theirs
DWP_WIDE_MARGIN = 0.86


def _dwp_matrix_loads(g: dict, n4: int, tuning: str, sg: int) -> float:
    """Thousands of vec4 loads of the projection matrix by the fused kernel's busiest thread
    with its plan (:func:`_dwp_plan`, ``sg`` lanes sharing them): per invocation and channel
    group, a lane's share of its column block's four rows."""
    th, tw, splits = _dwp_plan(g, n4, 0, tuning, True, sg=sg)
    ns = -(-n4 // splits)
    blocks = g["NB"] * -(-g["OH"] // th) * -(-g["OW"] // tw)
    inv = (-(-blocks // sg) * sg if sg else blocks) * splits
    cores = DWP_CORES.get(tuning, DWP_CORES["default"])
    busy = -(-inv // (PROJECT_WORKGROUP * cores)) * PROJECT_WORKGROUP
    return busy * -(-g["C"] // 4) * (-(-4 * ns // sg) if sg else 4 * ns) / 1e3


def _dwp_fused_terms(g: dict, n4: int, tuning: str, sg: int, k4: int = 0) -> tuple[float, ...]:
    """What the fused kernel's busiest thread does with its plan (:func:`_dwp_plan` with ``sg``
    lanes sharing the loads; ``k4``: the vec4s of an expansion's input per pixel, whose plan
    has its own block), in thousands: input-window vec4 loads, depthwise vec4 multiply-adds,
    projection vec4 multiply-adds, vec4 stores; and 1 (the fixed part)."""
    th, tw, splits = _dwp_plan(g, n4, k4, tuning, True, sg=sg)
    kk, c4, ns = g["KH"] * g["KW"], -(-g["C"] // 4), -(-n4 // splits)
    blocks = g["NB"] * -(-g["OH"] // th) * -(-g["OW"] // tw)
    inv = (-(-blocks // sg) * sg if sg else blocks) * splits
    cores = DWP_CORES.get(tuning, DWP_CORES["default"])
    busy = -(-inv // (PROJECT_WORKGROUP * cores)) * PROJECT_WORKGROUP
    window = len(_rows(g, th)) * len(_segment(g, tw))
    return (busy * c4 * window / 1e3, busy * c4 * th * tw * kk / 1e3, busy * c4 * th * tw * 4 * ns / 1e3,
            busy * th * tw * ns / 1e3, 1.0)


def _project_cost(g: dict, n: int, tuning: str = "default", k4: int = 0) -> tuple[float, float]:
    """Estimated costs of depthwise conv2d ``g`` and a pointwise projection to ``n`` channels:
    (one ``conv/depthwise_project.wgsl`` kernel, the depthwise kernel + the tile kernel).

    On a profile of :data:`DWP_PAY_FIT` (lavapipe), microseconds: each side is a fitted linear
    function of what its kernels do, the fused kernel with the plan it runs
    (:func:`_dwp_fused_terms`, the subgroup's :data:`DW_LANES` lanes sharing its loads; or the
    channel-lane kernel's :data:`DWPL_FIT` where :func:`_dwp_form` picks it; a projection wider
    than :data:`PROJECT_MAX_N` adds its column blocks' matrix loads, :data:`DWP_WIDE_MATRIX`), the
    depthwise kernel with its strips (:func:`_dw_cost`), the tile kernel with its
    multiply-adds and the vec4s it loads and stores, plus one more dispatch.

    Elsewhere, vec4 multiply-adds of one SIMD batch, loads weighted by :data:`DWP_LOAD_COST`:
    every invocation of each kernel loads its operands, stores its outputs and does its
    multiply-adds; the fused kernel holds a block of ``TH x TW`` pixels and loads the whole
    ``C x N`` projection matrix once per block (the block of :func:`_dwp_blocks_for`, one
    invocation per block), the depthwise kernel 4 x 4 pixel blocks, the tile kernel holds
    ``TM x 4 TN4`` outputs and loads ``TM + TN4`` values per step of its ``C``-deep product."""
    kk, c4, n4 = g["KH"] * g["KW"], -(-g["C"] // 4), -(-n // 4)
    fit = DWP_PAY_FIT.get(tuning)
    if fit is not None:
        fused = sum(w * t for w, t in zip(fit["fused"], _dwp_fused_terms(g, n4, tuning, DW_LANES)))
        if n > PROJECT_MAX_N and tuning in DWP_WIDE_MATRIX:  # a wide projection's column blocks
            splits = _dwp_plan(g, n4, 0, tuning, True, sg=DW_LANES)[2]
            uniform = g["C"] * 4 * splits * -(-n4 // splits) <= B_UNIFORM_FLOATS  # uniform_copy's rule
            fused += DWP_WIDE_MATRIX[tuning][uniform] * _dwp_matrix_loads(g, n4, tuning, DW_LANES)
        sg = DW_LANES if DWP_SUBGROUP else 0
        form, plan = _dwp_form(g, n4, tuning, sg) if n % 4 == 0 and not k4 else ("blocks", _NO_PLAN)
        if form == "lanes":  # the channel-lane kernel where it runs, in the same units (DWPL_FIT)
            fused = _dwpl_cost(g, n4, plan, sg, tuning)
            if g["KH"] * g["KW"] <= DWPL_PAY_MAX_TAPS:  # its own estimate against the two kernels
                fused -= DWPL_MARGIN
        dw = fit["dw"][0] * _dw_cost(g, *_dw_strip(g, tuning), tuning) / 1e3 + fit["dw"][1]
        M = g["NB"] * g["OH"] * g["OW"]
        tile = _tile_us(M, g["C"], n, tuning)
        if n > PROJECT_MAX_N and tuning in DWP_WIDE_TILE:  # B's loads and broadcasts per row of the tile
            tile += DWP_WIDE_TILE[tuning] * M * g["C"] * n4 / choose_tile_sg(M, n, g["NB"], DW_LANES)[0] / 1e6
        return fused, dw + tile + fit["dispatch"]
    L = DWP_LOAD_COST.get(tuning, DWP_LOAD_COST["default"])
    th, tw = _dwp_blocks_for(g, n4, 1, k4, tuning)
    blocks = g["NB"] * -(-g["OH"] // th) * -(-g["OW"] // tw)
    window = len(_rows(g, th)) * len(_segment(g, tw))
    fused = blocks * c4 * (L * (kk + window + 4 * n4) + th * tw * (kk + 4 * n4)) + blocks * th * tw * n4 * L
    th, tw = _depthwise_block(g, tuning)
    blocks = g["NB"] * -(-g["OH"] // th) * -(-g["OW"] // tw)
    window = len(_rows(g, th)) * len(_segment(g, tw))
    depthwise = blocks * c4 * (L * (kk + window + th * tw) + th * tw * kk)
    M = g["NB"] * g["OH"] * g["OW"]
    tm, tn4 = choose_tile(M, n, 1, tuning)
    tile = -(-M // tm) * -(-n4 // tn4) * (g["C"] * (L * (tm + tn4) + tm * tn4) + L * tm * tn4)
    return fused * DWP_FUSED_FACTOR.get(tuning, DWP_FUSED_FACTOR["default"]), depthwise + tile + DWP_KERNEL_COST


def _tile_us(m: int, k: int, n: int, tuning: str) -> float:
    """Microseconds of an ``m`` x ``k`` -> ``n`` pointwise conv2d on the tile kernel by the tile
    side of :data:`DWP_PAY_FIT` (its vec4 multiply-adds, the vec4s it reads and writes, a fixed
    part), without its dispatch."""
    t = DWP_PAY_FIT[tuning]["tile"]
    return t[0] * m * k * -(-n // 4) / 1e6 + t[1] * m * (k + n) / 4e6 + t[2]


def project_pays(g: dict, n: int, tuning: str = "default", k4: int = 0) -> bool:
    """Whether running depthwise conv2d ``g`` and its pointwise projection to ``n`` channels as
    one kernel is estimated faster than as two (:func:`_project_cost`). A pair that the strip
    kernel takes (:func:`_dwp_strip`) is always fused: it ran 0.47-0.75x the two kernels on
    every zoo layer it takes, and the fitted fused side describes the pixel-block kernel. A
    projection wider than :data:`PROJECT_MAX_N` fuses where the fused estimate (its matrix loads
    counted: :data:`DWP_WIDE_MATRIX`) is at most :data:`DWP_WIDE_MARGIN` of the two kernels'."""
    if _env.force("dwp") == "fused":
        return True
    if n % 4 == 0 and _dwp_strip(g, n // 4, tuning) is not None:
        return True
    fused, two = _project_cost(g, n, tuning, k4)
    if n > PROJECT_MAX_N and tuning in DWP_WIDE_MATRIX:  # a wide projection's column blocks
        return fused <= DWP_WIDE_MARGIN * two
    return fused <= two


def _center(g: dict) -> bool:
    """Stride 1, same size, the window's center tap inside it: the depthwise kernels hold the
    input at each output pixel (a residual add of the depthwise input then needs no load)."""
    return (g["sh"] == g["sw"] == 1 and g["OH"] == g["H"] and g["OW"] == g["W"]
            and g["pt"] % g["dh"] == 0 and g["pt"] // g["dh"] < g["KH"]
            and g["pl"] % g["dw"] == 0 and g["pl"] // g["dw"] < g["KW"])


def expand_ok(e, dw, tuning: str = "default", max_k: int | None = EXPAND_MAX_K) -> bool:
    """Whether pointwise conv2d ``e``, whose output only ``dw`` (a depthwise conv2d that
    :func:`project_ok` takes) reads, can be computed inside the depthwise + projection kernel:
    NHWC, a constant filter, input channels a multiple of 4 (at most ``max_k``, None: any),
    no input prologue, only bias-like epilogue operands; and ``dw`` reads ``e``'s output at
    its own index (a residual add) only where the kernel holds it (:func:`_center`)."""
    if e.op != "conv2d" or len(e.outputs) != 1 or e.attrs.get("input_layout") != "nhwc":
        return False
    if "input_scale" in e.attrs or "input_add" in e.attrs or constant_array(e.inputs[1]) is None:
        return False
    if dw.inputs[0] is not e.outputs[0] or e.inputs[0].data_type != e.outputs[0].data_type:
        return False
    g = _geometry(e)
    if _conv_variant(g, "nhwc", tuning) != "pointwise" or g["C"] % 4 or max_k is not None and g["C"] > max_k:
        return False
    if any("input" in st and st.get("axis") != 3 for st in _epilogue.steps_of(e)):
        return False
    reads_input = any(st.get("input") == 0 for st in _epilogue.steps_of(dw))
    return not reads_input or _center(_geometry(dw))


def store_ok(dw, tuning: str = "default", k4: int = 0) -> bool:
    """Whether depthwise conv2d ``dw`` (and its global pool, ``fuse_conv_pool``) can run on the
    depthwise + projection kernel without a projection, its expansion computed there: NHWC
    on the depthwise kernel, channels a multiple of 4, enough pixel blocks to fill the cores
    (its channels are not split between invocations; ``k4``: the expansion's input vec4s)."""
    if dw.op != "conv2d" or dw.attrs.get("input_layout") != "nhwc" or "input_scale" in dw.attrs:
        return False
    if "input_add" in dw.attrs or dw.attrs.get("pool_output") not in (None, False, True):
        return False
    if len(dw.outputs) != (2 if dw.attrs.get("pool_output") else 1) or dw.outputs[0].data_type not in FLOATS:
        return False
    g = _geometry(dw)
    if g["C"] % 4 or g["O"] != g["C"] or _conv_variant(g, "nhwc", tuning) != "depthwise" or _env.force("conv"):
        return False
    if dw.attrs.get("pool_output") and g["NB"] != 1:
        return False
    th, tw = _dwp_block(g, 0, k4, tuning)
    return g["NB"] * -(-g["OH"] // th) * -(-g["OW"] // tw) >= 4 * PROJECT_WORKGROUP and recompute_ok(g, th, tw)


def expand_block_ok(e, dw, proj, tuning: str = "default") -> bool:
    """Whether the depthwise + projection kernel's block for ``dw`` and ``proj`` keeps the
    recomputed expansion ``e`` within :data:`EXPAND_MAX_RECOMPUTE`."""
    g = _geometry(dw)
    th, tw = _dwp_block(g, -(-_project_width(proj) // 4), e.inputs[0].shape[3] // 4, tuning,
                        proj is not None and proj.op == "conv2d")
    return recompute_ok(g, th, tw)


def recompute_ok(g: dict, th: int, tw: int) -> bool:
    """Whether a TH x TW depthwise block computes few enough expanded pixels per pixel it
    reads (:data:`EXPAND_MAX_RECOMPUTE`)."""
    reads = min(th * g["sh"], g["H"]) * min(tw * g["sw"], g["W"])
    return len(_rows(g, th)) * len(_segment(g, tw)) <= EXPAND_MAX_RECOMPUTE * reads


def _expand_chunk(k4: int) -> int:
    """The vec4s of each pixel's expansion input the ``xsh`` kernel loads at a time: the largest
    divisor of ``k4`` up to :data:`EXPAND_SHARED_KC`."""
    return max(d for d in range(1, min(k4, EXPAND_SHARED_KC) + 1) if k4 % d == 0)


def _expand_bands(g: dict, th: int, tw: int, splits: int, sg: int) -> list[int]:
    """Input rows each workgroup of the ``xsh`` kernel expands into workgroup memory (one image,
    TH x TW blocks, ``splits`` invocations per block, ``sg`` lanes sharing a column block; the
    kernel computes the same band from its first and last block)."""
    ohb, owb = -(-g["OH"] // th), -(-g["OW"] // tw)
    blocks = ohb * owb
    wg = max(EXPAND_SHARED_WORKGROUP, sg)
    if sg:
        padded = -(-blocks // wg) * wg
        n_inv = padded * splits
    else:
        n_inv = blocks * splits
    bands = []
    for g0 in range(0, n_inv, wg):
        if sg:
            sb0 = g0 // padded
            lo, hi = g0 - sb0 * padded, min(g0 + wg - 1 - sb0 * padded, blocks - 1)
        else:
            lo, hi = g0 // splits, min(g0 + wg - 1, n_inv - 1) // splits
        r0 = min(max((lo // owb) * th * g["sh"] - g["pt"], 0), g["H"])  # blocks reading only padding: none
        bottom = (hi // owb) * th * g["sh"] - g["pt"] + (th - 1) * g["sh"] + (g["KH"] - 1) * g["dh"] + 1
        r1 = min(max(bottom, r0), g["H"])
        bands.append(r1 - r0)
    return bands


#: The ``xsh`` kernel's expansion on profiles with a fitted cost (lavapipe, Mesa 22.3, with
#: subgroup lanes sharing its weight loads): microseconds per thousand vec4 x 4 x 4 products of
#: a SIMD row of invocations on its busiest core (the workgroups' pixel iterations, each
#: :data:`EXPAND_SHARED_PX` pixels, times C / 4 x K / 4), and per workgroup; least squares
#: over 14 shapes of ``benchmarks/dw_expand.py`` (images 1x1 to 16x16, K 64 to 1024, C 32 to
#: 128; the fused kernel's time less the depthwise + projection kernel's; docs/conv.md).
EXPAND_SHARED_FIT = {"lane-loop": (62.0, 0.0)}


def _expand_shared_loops(g: dict, th: int, tw: int, splits: int, sg: int, k4: int, n4: int) -> int:
    """Loop iterations one invocation of the ``xsh`` kernel runs (llvmpipe's limit counts them
    all): the band's pixel loop (:data:`EXPAND_SHARED_PX` pixels per invocation per pass), in
    each pass the chunks of K (:func:`_expand_chunk`) and in each chunk the channel groups;
    then the depthwise rows per channel group and the projection's columns."""
    wg = max(EXPAND_SHARED_WORKGROUP, sg)
    npb = -(-max(_expand_bands(g, th, tw, splits, sg)) * g["W"] // (wg * EXPAND_SHARED_PX))
    c4 = g["C"] // 4
    nkc = k4 // _expand_chunk(k4)
    return 1 + npb * (2 + nkc * (c4 + 2)) + c4 * (_rows(g, th)[-1][0] + 3) + n4 + 8


def _expand_shared_cost(g: dict, k4: int, n4: int, tuning: str, sg: int = DW_LANES) -> tuple[float, float]:
    """(microseconds the ``depthwise_project`` kernel adds computing expansion ``k4`` -> ``g``'s C
    in workgroup memory, microseconds of the separate pointwise conv2d on the tile kernel and its
    dispatch), on a profile of :data:`EXPAND_SHARED_FIT`, with ``sg`` lanes sharing a column
    block (:data:`DW_LANES` on lavapipe). Workgroups go round the :data:`DWP_CORES` cores."""
    fit, tile = EXPAND_SHARED_FIT[tuning], DWP_PAY_FIT[tuning]
    c4 = g["C"] // 4
    th, tw, splits = _dwp_plan(g, n4, 0, tuning, True, sg=sg)
    cores = DWP_CORES.get(tuning, DWP_CORES["default"])
    per_core = [0.0] * cores
    for i, rows in enumerate(_expand_bands(g, th, tw, splits, sg)):
        its = -(-rows * g["W"] // (max(EXPAND_SHARED_WORKGROUP, sg) * EXPAND_SHARED_PX))
        per_core[i % cores] += fit[0] * its * c4 * k4 / 1e3 + fit[1]
    sep = _tile_us(g["NB"] * g["H"] * g["W"], 4 * k4, g["C"], tuning) + tile["dispatch"]
    return max(per_core), sep


def expand_shared_ok(e, dw, proj, tuning: str = "default", lanes: int = DW_LANES) -> bool:
    """Whether pointwise conv2d ``e`` (any input channels that :func:`expand_ok` takes otherwise)
    is computed inside the depthwise + projection kernel of ``dw`` and ``proj`` into workgroup
    memory first (``xsh``): one image, each workgroup's band of expanded input rows within
    :data:`EXPAND_SHARED_BYTES` (with and without lanes sharing a column block, and with pool
    partials, whose plan has none), and, on a profile with a fitted cost
    (:data:`EXPAND_SHARED_FIT`), where the pair without it runs on the pixel blocks (not the
    strip or channel-lane kernels, which the expansion would give up) and the added expansion
    is estimated cheaper than the separate conv's kernel and dispatch
    (:func:`_expand_shared_cost`); ``lanes``: the subgroup lanes the kernel's workgroups will
    have (:func:`dwp_lanes`; 0 checks with :data:`DW_LANES`), and every form within llvmpipe's
    loop limit (:func:`_expand_shared_loops`). ``WEBNN_GPU_FORCE_DWP_EXPAND=shared`` takes every
    one that fits, ``=off`` none."""
    force = _env.force("dwp_expand")
    if force == "off" or proj is None or proj.op != "conv2d" or not expand_ok(e, dw, tuning, None):
        return False
    g = _geometry(dw)
    if g["NB"] != 1:
        return False
    n4 = -(-_project_width(proj) // 4)
    k4 = e.inputs[0].shape[3] // 4
    L = lanes or DW_LANES
    for plan_sg, sg in ((0, 0), (L, L), (0, L)):  # (0, lanes): with pool partials
        th, tw, splits = _dwp_plan(g, n4, 0, tuning, True, sg=plan_sg)
        if max(_expand_bands(g, th, tw, splits, sg)) * g["W"] * g["C"] * 4 > EXPAND_SHARED_BYTES:
            return False
        if _expand_shared_loops(g, th, tw, splits, sg, k4, n4) > LOOP_BUDGET:
            return False
    if force == "shared" or tuning not in EXPAND_SHARED_FIT:
        return force == "shared"
    if _project_width(proj) % 4 == 0 and _dwp_form(g, n4, tuning, L if DWP_SUBGROUP else 0)[0] != "blocks":
        return False
    extra, sep = _expand_shared_cost(g, k4, n4, tuning, L)
    return extra <= sep


#: A depthwise conv2d and its projection that run as two kernels (:func:`project_pays` says so)
#: whose input is an expansion conv that the kernel can hold in registers (:func:`expand_ok`, at
#: most :data:`EXPAND_MAX_K` input channels, the block that :func:`_dwp_plan` gives for its
#: inputs) run as one kernel of the three (:func:`triple_pays`) where its estimate is at most
#: a fraction of the three kernels' (:func:`_triple_cost`). Per profile: (microseconds per
#: thousand vec4 x 4 x 4 expansion products of the busiest thread, its invocations x C / 4 x the
#: block's window x K / 4, which replace the fused side's window loads of :data:`DWP_PAY_FIT`:
#: the kernel computes the depthwise input it would load; that fraction). Fitted on 33 synthetic
#: blocks (benchmarks/dw_shapes.py --triples: images 28-112, K 16-32, C 96-192, 3x3 and 5x5,
#: strides 1 and 2; docs/conv.md) to the measured ratio of the two forms times the three
#: kernels' estimate, and checked on 12 more. The fraction, 0.9: two 28 x 28 3x3 stride-1 blocks
#: estimated 0.95 and 0.99 ran 1.01 and 1.05 as one kernel; every block it takes ran faster.
EXPAND_TRIPLE_FIT = {"lane-loop": (1.45, 0.9)}


def _triple_cost(g: dict, n: int, k4: int, tuning: str) -> tuple[float, float]:
    """Microseconds of depthwise conv2d ``g`` with its pointwise projection to ``n`` channels and
    the expansion from ``k4`` vec4s of input before it (:data:`EXPAND_TRIPLE_FIT`): (the one
    kernel of the three, with the block :func:`_dwp_plan` gives for the expansion; the expansion
    on the tile kernel, then the depthwise and the tile kernel, two launches more)."""
    fit = DWP_PAY_FIT[tuning]
    window, *terms = _dwp_fused_terms(g, -(-n // 4), tuning, DW_LANES, k4)
    # every window pixel of a block expanded for every channel group, none loaded
    fused = sum(w * t for w, t in zip(fit["fused"][1:], terms)) + EXPAND_TRIPLE_FIT[tuning][0] * window * k4
    two = _project_cost(g, n, tuning, k4)[1]
    return fused, two + _tile_us(g["NB"] * g["H"] * g["W"], 4 * k4, g["C"], tuning) + fit["dispatch"]


def triple_pays(g: dict, n: int, k4: int, tuning: str = "default") -> bool:
    """Whether depthwise conv2d ``g``, its pointwise projection to ``n`` channels and the
    expansion conv from ``k4`` vec4s of input before it, which :func:`project_pays` would run
    as three kernels, run as one (``conv/depthwise_project.wgsl`` with the expansion): on a
    profile of :data:`EXPAND_TRIPLE_FIT` where :func:`_triple_cost` estimates it at most that
    fraction of the three kernels, elsewhere never; and only where the kernel's block holds at
    most :data:`EXPAND_MAX_X` vec4s of expansion input. ``WEBNN_GPU_FORCE_DWP_TRIPLE=on`` takes
    every such triple, ``=off`` none."""
    forced = _env.force_choice("dwp_triple", ("on", "off"))
    th, tw, _ = _dwp_plan(g, -(-n // 4), k4, tuning, True)
    if len(_rows(g, th)) * len(_segment(g, tw)) * k4 > EXPAND_MAX_X:
        return False
    if forced or tuning not in EXPAND_TRIPLE_FIT or tuning not in DWP_PAY_FIT:
        return forced == "on"
    fused, three = _triple_cost(g, n, k4, tuning)
    return fused <= EXPAND_TRIPLE_FIT[tuning][1] * three


def _pointwise_matrix(fc) -> np.ndarray:
    """A 1x1 conv2d's constant filter as an [O, C] matrix."""
    data = constant_array(fc.inputs[1])
    assert data is not None, "the fusion passes check the filter is a constant"
    ohwi = np.transpose(data, [fc.attrs["filter_layout"].index(ch) for ch in "ohwi"])
    return ohwi.reshape(ohwi.shape[0], ohwi.shape[3])


def _project_matrix(proj) -> np.ndarray:
    """The projection of ``proj`` as a [C, N] matrix (columns zero-padded to a multiple of 4):
    a pointwise conv's [C, O], or a transposed conv's [C, (a * KW + b) * O + o]."""
    if proj.op == "conv2d":
        mat = _pointwise_matrix(proj).T
    else:
        data = constant_array(proj.inputs[1])
        assert data is not None, "project_ok checks the filter is a constant"
        hwoi = np.transpose(data, [proj.attrs["filter_layout"].index(ch) for ch in "hwoi"])
        mat = hwoi.reshape(-1, hwoi.shape[3]).T
    n4 = -(-mat.shape[1] // 4) * 4
    padded = np.zeros((mat.shape[0], n4), dtype=mat.dtype)
    padded[:, :mat.shape[1]] = mat
    return padded


def _project_width(proj) -> int:
    """Values per depthwise pixel a projection makes: a pointwise conv's output channels, or a
    filter-equals-stride transposed conv's KH * KW * O."""
    p = _geometry(proj)
    return p["O"] if proj.op == "conv2d" else p["KH"] * p["KW"] * p["O"]


def _dwp_block(g: dict, n4: int, k4: int, tuning: str, split: bool = True) -> tuple[int, int]:
    """(TH, TW) of the depthwise + projection kernel (:func:`_dwp_plan`)."""
    th, tw, _ = _dwp_plan(g, n4, k4, tuning, split)
    return th, tw


def _dwp_blocks_for(g: dict, ns: int, splits: int, k4: int, tuning: str) -> tuple[int, int]:
    """(TH, TW) of the depthwise + projection kernel with ``ns`` vec4 accumulators per pixel and
    ``splits`` invocations per pixel block: the depthwise block, smaller while the accumulators,
    the held expansion inputs (``k4`` vec4s per input pixel read) or too few invocations for
    the cores call for it."""
    th, tw = _depthwise_block(g, tuning)

    def invocations(th_, tw_):
        return g["NB"] * -(-g["OH"] // th_) * -(-g["OW"] // tw_) * splits

    while th * tw > 1 and (th * tw * ns > PROJECT_MAX_ACC or invocations(th, tw) < 4 * PROJECT_WORKGROUP
                           or len(_rows(g, th)) * len(_segment(g, tw)) * k4 > EXPAND_MAX_X):
        if th >= tw:
            th = max(1, th // 2)
        else:
            tw = max(1, tw // 2)
    return th, tw


def _dwp_fused_cost(g: dict, n4: int, th: int, tw: int, splits: int, tuning: str, sg: int = 0) -> float:
    """Estimated cost of the depthwise + projection kernel with a TH x TW block and the
    projection's ``n4`` vec4 columns split over ``splits`` invocations per block, for
    :func:`_dwp_plan` to compare plans: every invocation loads, per group of 4 channels, the
    block's input window (storage), the taps and its rows of the projection (uniform where
    :func:`uniform_copy` puts it, else storage), does its multiply-adds and stores its
    outputs, each weighted by the profile's :data:`DWP_FUSED_WEIGHTS`; lavapipe runs a
    workgroup on one thread, so with fewer workgroups than :data:`DWP_CORES` the cores left
    idle count."""
    ws, wu, wf = DWP_FUSED_WEIGHTS.get(tuning, DWP_FUSED_WEIGHTS["default"])
    kk, c4, ns = g["KH"] * g["KW"], -(-g["C"] // 4), -(-n4 // splits)
    blocks = g["NB"] * -(-g["OH"] // th) * -(-g["OW"] // tw)
    inv = (-(-blocks // sg) * sg if sg else blocks) * splits
    window = len(_rows(g, th)) * len(_segment(g, tw))
    wp = wu if tuning == "lane-loop" and g["C"] * 4 * n4 <= B_UNIFORM_FLOATS else ws  # uniform_copy's rule
    taps, rows = (-(-kk // sg), -(-4 * ns // sg)) if sg else (kk, 4 * ns)  # sg: a lane's share
    per = c4 * (ws * window + wu * taps + wp * rows + wf * th * tw * (kk + 4 * ns)) + ws * th * tw * max(ns, 1)
    cores = DWP_CORES.get(tuning, DWP_CORES["default"])
    busy = -(-inv // (PROJECT_WORKGROUP * cores)) * PROJECT_WORKGROUP * cores if cores > 1 else inv
    return per * busy


def _dwp_plan(g: dict, n4: int, k4: int, tuning: str, split: bool = True, sg: int = 0) -> tuple[int, int, int]:
    """(TH, TW, S) of the depthwise + projection kernel with ``n4`` vec4 columns of projection
    per pixel (0: none) and ``k4`` vec4s of expansion input per input pixel (0: none).

    A pointwise projection without an expansion (``split``) whose matrix fits the uniform
    buffer, on a profile of :data:`DWP_PLAN_PROFILES`: S invocations per pixel block,
    each computing ``ceil(n4 / S)`` of the columns (the last block maybe fewer), and a block of
    :data:`DWP_BLOCK_SIZES` rows and columns, the cheapest by :func:`_dwp_fused_cost` among
    those whose accumulators fit :data:`DWP_PLAN_MAX_ACC` and loaded window
    :data:`DW_MAX_LOADS`. With ``sg`` lanes sharing the kernel's loads (:func:`dwp_lanes`) the
    same for any matrix, but with S = 1 (a split would only recompute the depthwise values) and
    at most max(:data:`DWP_PLAN_MAX_ACC`, min(:data:`PROJECT_MAX_ACC`, 4 n4)) accumulators;
    but a projection wider than :data:`PROJECT_MAX_N` (``wide``) in column blocks of at most
    :data:`DWP_WIDE_NS`, half or a quarter of it vec4 columns (each as even as S allows) and at
    most :data:`DWP_WIDE_MAX_ACC` accumulators: one column block would hold one pixel per lane,
    whose shared loads of the matrix rows then serve one pixel's products.
    Otherwise S = 1 and the block of :func:`_dwp_blocks_for`."""
    wide = 4 * n4 > PROJECT_MAX_N
    if (not split or k4 or not n4 or tuning not in DWP_PLAN_PROFILES
            or not sg and not wide and g["C"] * 4 * n4 > B_UNIFORM_FLOATS):  # a storage matrix: measured slower split
        th, tw = _dwp_blocks_for(g, n4, 1, k4, tuning)
        return th, tw, 1
    best = None
    max_acc = DWP_PLAN_MAX_ACC
    if sg and not wide:  # one column block (all the columns) of at least 2 x 2 pixels where PROJECT_MAX_ACC allows
        max_acc = max(max_acc, min(PROJECT_MAX_ACC, 4 * n4))
    ns_all = list(range(n4 if sg and n4 <= max_acc else 1, min(n4, max_acc) + 1))  # sg: the lanes share the loads
    if wide:  # column blocks of at most DWP_WIDE_NS (or half, a quarter of it), as even as they can be
        max_acc = DWP_WIDE_MAX_ACC
        ns_all = sorted({-(-n4 // -(-n4 // (DWP_WIDE_NS >> i))) for i in range(3)})
    for ns in ns_all:
        splits = -(-n4 // ns)
        if -(-n4 // splits) != ns:  # the same S as a narrower block
            continue
        for th in DWP_BLOCK_SIZES:
            for tw in DWP_BLOCK_SIZES:
                if (th > g["OH"] or tw > g["OW"] or th * tw * ns > max_acc
                        or len(_rows(g, th)) * len(_segment(g, tw)) > DW_MAX_LOADS):
                    continue
                cost = _dwp_fused_cost(g, n4, th, tw, splits, tuning, sg)
                if best is None or cost < best[0]:
                    best = (cost, th, tw, splits)
    if best is None:  # one pixel and one column per invocation fits any layer project_ok takes
        return 1, 1, n4
    return best[1], best[2], best[3]


#: The strip kernel (``conv/depthwise_project_strip.wgsl``, :func:`_dwp_strip`): on these profiles,
#: for at most this many channels and projected channels (both unrolled in its text) ...
DWP_STRIP_PROFILES = ("lane-loop",)
DWP_STRIP_MAX_C = 16
DWP_STRIP_MAX_N = 16
#: ... and windows of at most this many taps (a 7 x 7 window measured no faster than the blocks)
DWP_STRIP_MAX_TAPS = 25
#: ... strips of this many output columns, in workgroups of this many invocations, and at least
#: this many workgroups where the image has the rows for it (the strips are cut into chunks of
#: rows to fill the cores' threads; longer strips load fewer rows twice) ...
DWP_STRIP_TW = 4
DWP_STRIP_WORKGROUP = 8
DWP_STRIP_MIN_GROUPS = 6
#: ... and at least this many output rows per chunk (the pixel blocks are as fast below it)
DWP_STRIP_MIN_TH = 24


def _dwp_strip(g: dict, n4: int, tuning: str) -> tuple[int, int, int] | None:
    """(TW, TH, RB) of the depthwise + projection strip kernel for depthwise conv2d ``g`` and a
    pointwise projection of ``n4`` vec4 columns, or None where it does not run (the pixel-block
    kernel does): a profile of :data:`DWP_STRIP_PROFILES`, at most :data:`DWP_STRIP_MAX_C` input
    and :data:`DWP_STRIP_MAX_N` projected channels, at most :data:`DWP_STRIP_MAX_TAPS` taps,
    vertical stride and dilation 1, at least
    :data:`DWP_STRIP_MIN_TH` output rows. Strips of TW = :data:`DWP_STRIP_TW` columns, the
    output rows cut into RB chunks of TH rows (at least :data:`DWP_STRIP_MIN_TH`), as few as
    give :data:`DWP_STRIP_MIN_GROUPS` workgroups, and at least one workgroup for each of
    :data:`DWP_CORES` (lavapipe's threads run one workgroup each)."""
    if (tuning not in DWP_STRIP_PROFILES or not n4 or g["C"] > DWP_STRIP_MAX_C or 4 * n4 > DWP_STRIP_MAX_N
            or g["KH"] * g["KW"] > DWP_STRIP_MAX_TAPS or g["dh"] != 1 or g["sh"] != 1
            or g["OH"] < DWP_STRIP_MIN_TH):
        return None
    tw = min(DWP_STRIP_TW, g["OW"])
    owb = g["NB"] * -(-g["OW"] // tw)
    rb = max(1, min(g["OH"] // DWP_STRIP_MIN_TH, -(-DWP_STRIP_MIN_GROUPS * DWP_STRIP_WORKGROUP // owb)))
    rb = max(rb, _row_chunks_in_budget(g))
    if owb * rb < DWP_CORES.get(tuning, 1) * DWP_STRIP_WORKGROUP:  # fewer workgroups than threads
        return None
    th = -(-g["OH"] // rb)
    return tw, th, -(-g["OH"] // th)


def _lower_dwp_strip(lc, node, g: dict, strip: tuple[int, int, int], x, *, w_in, ep, pep, project_in: list,
                     pw_uniform: bool, xres: bool, in_relu: bool = False) -> None:
    """The kernel of :func:`lower_depthwise_project` on ``conv/depthwise_project_strip.wgsl``
    (plan ``strip`` of :func:`_dwp_strip`); ``xres``: the projection's residual operand is the
    depthwise input, read from the kernel's held rows (``pg`` is not bound); ``in_relu``: relu
    of each input value as it is loaded (``fuse_conv_input_relu``)."""
    tw, th, rb = strip
    out = node.outputs[0]
    owb = -(-g["OW"] // tw)
    n_inv = g["NB"] * rb * owb
    prm = make_constant(np.array([n_inv, g["H"], g["W"], g["OH"], g["OW"], owb, rb, th, g["pt"], g["pl"], 0, 0],
                                 dtype=np.uint32), "uint32")
    w = _relayout(lc, w_in, node.attrs["depthwise"].attrs["filter_layout"], "hwio")
    w_ubo = uniform_copy(lc, w)
    if xres:
        project_in = [v for v in project_in if v[0] != "pg"]
    fns: dict = {}
    for ee in (ep, pep):
        for FT, names in ee.functions:
            fns.setdefault(FT, set()).update(names)
    n4 = -(-out.shape[3] // 4)
    words = _words_ok(lc.tuning, lc.features)
    lc.kernel("conv/depthwise_project_strip.wgsl",
              [("x", x), ("f", w_ubo or w)] + ep.operands + project_in + [("prm", prm)], [("out", out)],
              n_inv, workgroup=DWP_STRIP_WORKGROUP, T=wgsl_type(out.data_type), TW=tw, C4=g["C"] // 4, N4=n4,
              seg=_segment(g, tw), hold=g["KH"] - 1, ep=ep, pep=pep, xres=xres, in_relu=in_relu,
              xw=words and (g["C"] // 4) % 2 == 0, ow=words and n4 % 2 == 0,
              pt=g["pt"] if ep.given or xres else 0, pl=g["pl"] if ep.given or xres else 0,
              f_uniform=B_UNIFORM_FLOATS // 4 if w_ubo is not None else 0,
              p_uniform=B_UNIFORM_FLOATS // 4 if pw_uniform else 0, fdiv=n_inv < DW_FDIV_MAX,
              fns=sorted((FT, sorted(names)) for FT, names in fns.items()),
              **{k: g[k] for k in ("KH", "KW", "sw", "dw")})


#: The channel-lane kernel (``conv/depthwise_project_lanes.wgsl``, :func:`_dwp_lanes`): at most
#: this many channel groups and projection vec4 columns per lane (each lane's held rows and
#: products grow with them; 3-4 channel groups per lane compiled in 1.5-1.9 s of CPU and ran
#: face detection's 24 x 24 x 128 -> 32 only 0.84-0.88x of the pixel blocks) ...
DWPL_MAX_CPL = 2
DWPL_MAX_NPL = 4
#: ... and at most this many 4 x 4 projection blocks held per lane (C / 4 x NPL): what LLVM's
#: compile time and the registers spilled through the row loop grow with
DWPL_MAX_BLOCKS = 32
#: ... the channel groups baked into the text (only those are broadcast and multiplied)
DWPL_EXACT_C = True
#: ... and with more than one projection column per lane, one subgroup per sg columns instead
#: (each computing the depthwise values itself): a pipeline holds one column's 4 x 4 blocks
DWPL_SPLIT = False
#: ... and where a lane's columns would be more than DWPL_MAX_NPL or hold more than
#: DWPL_MAX_BLOCKS blocks, the columns split between as few subgroups per strip as keep each
#: lane's within DWPL_MAX_NPL and this many blocks (0: no split; ``WEBNN_GPU_FORCE_DWPL_SPLIT=off``
#: likewise): iris_landmark's 16 x 16 x 64 -> 128 ran as fast with 16 blocks per lane (4
#: subgroups) as with 32 (2), and its pipelines compiled in 0.67-0.75 s of CPU instead of
#: 1.06-1.38 ...
DWPL_SPLIT_BLOCKS = 16
#: ... into at most this many subgroups
DWPL_MAX_SPLITS = 4
#: ... strips of this many output columns, and the row chunks cut so that there are at least
#: this many workgroups (one subgroup each) but chunks of at least DWPL_MIN_TH rows
DWPL_TW = 4
DWPL_MIN_GROUPS = 8
DWPL_MIN_TH = 4
#: ... and a projection of at most sg / 2 vec4 columns projects several pixels per pass, one per
#: group of lanes (:func:`_dwpl_pack`)
DWPL_PACK = True


def _row_chunks_in_budget(g: dict) -> int:
    """The fewest chunks of depthwise conv2d ``g``'s output rows for which a kernel that walks
    a chunk's rows in one loop, plus up to KH rows of its window held before the first (the
    strip and channel-lane kernels), stays within llvmpipe's loop limit (:data:`LOOP_BUDGET`)."""
    return -(-g["OH"] // (LOOP_BUDGET - g["KH"] - 1))


def _dwp_lanes(g: dict, n4: int, sg: int) -> tuple[int, int, int, int, int] | None:
    """(TW, TH, RB, CPL, NPL) of the channel-lane depthwise + projection kernel for depthwise
    conv2d ``g`` and a pointwise projection of ``n4`` vec4 columns with ``sg`` subgroup lanes, or
    None where it cannot run: lane-shared loads (``sg``), vertical dilation 1, a window at least
    as tall as its stride, at most :data:`DWPL_MAX_CPL` channel groups per lane. NPL: the
    projection columns per lane of one subgroup, at most :data:`DWPL_MAX_NPL` in all; where a
    lane's columns would be more than that or hold more than :data:`DWPL_MAX_BLOCKS` 4 x 4
    blocks, the columns are split between :func:`_dwpl_splits` subgroups per strip (each
    computes the depthwise values itself), at most :data:`DWPL_MAX_SPLITS`, as few as keep each
    lane's columns within DWPL_MAX_NPL and :data:`DWPL_SPLIT_BLOCKS` blocks, spread evenly. Strips of
    TW = :data:`DWPL_TW` columns, the output rows cut into RB chunks of TH rows, as few as give
    :data:`DWPL_MIN_GROUPS` workgroups (subgroups of all splits) but at least
    :data:`DWPL_MIN_TH` rows each."""
    if not sg or not n4 or g["dh"] != 1 or g["KH"] < g["sh"]:
        return None
    c4 = -(-g["C"] // 4)  # a channel count not a multiple of 4: its last group zero-padded
    cpl, npl = -(-c4 // sg), -(-n4 // sg)
    if cpl > DWPL_MAX_CPL:
        return None
    cs = c4 if DWPL_EXACT_C else sg * cpl
    no_split = _env.force_choice("dwpl_split", ("off",)) == "off"
    if DWPL_SPLIT and not no_split:  # one column per lane, split within the limits
        npl = 1
        if _dwpl_splits(n4, sg, npl) > DWPL_MAX_SPLITS:
            return None
    elif npl > DWPL_MAX_NPL or cs * npl > DWPL_MAX_BLOCKS:
        most = min(DWPL_MAX_NPL, DWPL_SPLIT_BLOCKS // cs)  # columns per lane of a split strip
        splits = -(-npl // most) if most else 0
        if not most or splits > DWPL_MAX_SPLITS or no_split:
            return None
        npl = -(-npl // splits)  # as few subgroups as fit, the columns spread evenly
    tw = min(DWPL_TW, g["OW"])
    owb = g["NB"] * -(-g["OW"] // tw) * _dwpl_splits(n4, sg, npl)
    rb = max(1, min(g["OH"] // DWPL_MIN_TH, -(-DWPL_MIN_GROUPS // owb)), _row_chunks_in_budget(g))
    th = -(-g["OH"] // rb)
    return tw, th, -(-g["OH"] // th), cpl, npl


def _dwpl_splits(n4: int, sg: int, npl: int) -> int:
    """Subgroups per strip of the channel-lane kernel projecting ``n4`` vec4 columns with ``sg``
    lanes and ``npl`` columns per lane (:func:`_dwp_lanes`): each takes sg NPL columns."""
    return -(-(-(-n4 // sg)) // npl)


def _lanes_tail_ok(dw, g: dict, n: int, tuning: str, sg: int) -> bool:
    """Whether depthwise conv2d ``dw`` (geometry ``g``) whose channels are not a multiple of 4
    and its pointwise projection to ``n`` channels run as one channel-lane kernel
    (``conv/depthwise_project_lanes.wgsl``, ``sg`` lanes; the other fused kernels read the
    input as vec4s): ``n`` a multiple of 4, a plan of :func:`_dwp_lanes`, a depthwise epilogue
    that reads operands only per channel (its last channel group is padded: the kernel loads
    the input's channels one by one there and zeroes the padding), and its estimate
    (:func:`_dwpl_cost`, with :data:`DWPL_MARGIN`) below the depthwise and the tile kernel's
    (:func:`_project_cost`), unless ``WEBNN_GPU_FORCE_DWP=fused`` or
    ``WEBNN_GPU_FORCE_DWP_FORM=lanes``; never with ``WEBNN_GPU_FORCE_DWP_FORM=blocks``."""
    force = _env.force("dwp_form")
    if n % 4 or not sg or force == "blocks" or DWP_PAY_FIT.get(tuning) is None or DWPL_FIT.get(tuning) is None:
        return False
    if any("input" in st and (st.get("axis") != 3 or "pool" in st or "pad" in st) for st in _epilogue.steps_of(dw)):
        return False
    plan = _dwp_lanes(g, n // 4, sg)
    if plan is None:
        return False
    if force == "lanes" or _env.force("dwp") == "fused":
        return True
    return _dwpl_cost(g, n // 4, plan, sg, tuning) <= _project_cost(g, n, tuning)[1]


def _lanes_residual(dw, proj, g: dict, out, plan, sg: int) -> tuple[int, dict | None] | None:
    """(input, pool) of ``proj`` whose epilogue step the channel-lane kernel computes from its
    held input rows, or None: the depthwise input padded with zero channels (BlazeFace's
    residual where a block widens its channels: ``pad(x)`` folded into the add as a ``"pad"``
    step at offset 0), stride 1 and same size (:func:`_center`; pool None), or a max or average
    pool of it without padding whose window lies inside the depthwise window at every output
    pixel (BlazeFace's stride-2 blocks: a 2 x 2 stride-2 max pool inside a 3 x 3 stride-2
    window, column dilation 1; pool: its ``op``, ``window`` and its offset ``at`` in the
    depthwise window), with as many channels as the output or fewer (the rest zeros), read by
    one step; one pixel per pass (:func:`_dwpl_pack`) and one subgroup per strip (:func:`_dwpl_splits`), so that
    each lane's projection columns are its own channel groups. The input itself with N == C
    at stride 1 stays :func:`given_operand`'s (the kernel reads it from its rows as well)."""
    tw, _, _, cpl, npl = plan
    n4 = -(-out.shape[3] // 4)
    if _dwpl_pack(n4, sg, tw) != 1 or _dwpl_splits(n4, sg, npl) > 1:
        return None
    steps = _epilogue.steps_of(proj)
    for st in steps:
        i = st.get("input")
        if not isinstance(i, int) or not 0 <= i < len(proj.inputs) or proj.inputs[i] is not dw.inputs[0]:
            continue
        v, pool = proj.inputs[i], st.get("pool")
        if ("axis" in st or "scale" in st or list(st.get("pad") or [0, 0, 0, 0]) != [0, 0, 0, 0]
                or v.data_type != out.data_type or sum(t.get("input") == i for t in steps) != 1
                or v.shape[3] != g["C"] or g["C"] > out.shape[3]):
            return None
        if g["C"] < out.shape[3] and st.get("pad") is None:  # a one-channel operand broadcast: not zeros
            return None
        if pool is None:
            ok = _center(g) and tuple(v.shape[:3]) == tuple(out.shape[:3]) and g["C"] < out.shape[3]
            return (i, None) if ok else None
        (wh, ww), (ph, pw) = pool["window"], pool["strides"]
        if (pool.get("op") not in ("max", "average") or pool.get("layout") != "nhwc" or any(pool["padding"])
                or (ph, pw) != (g["sh"], g["sw"]) or g["dw"] != 1 or g["dh"] != 1
                or tuple(pool["shape"]) != (g["NB"], g["OH"], g["OW"], g["C"])
                or g["pt"] + wh > g["KH"] or g["pl"] + ww > g["KW"]
                or (g["OH"] - 1) * ph + wh > g["H"] or (g["OW"] - 1) * pw + ww > g["W"]):
            return None
        return i, {"op": pool["op"], "window": (wh, ww), "at": (g["pt"], g["pl"])}
    return None


def _dwpl_pack(n4: int, sg: int, tw: int) -> int:
    """Pixels the channel-lane kernel projects per pass (PK) for a projection of ``n4`` vec4
    columns with ``sg`` lanes and strips of ``tw`` columns: with :data:`DWPL_PACK`, where the
    columns take at most half the lanes, the largest power of two of lane groups of the columns'
    width (rounded up to a power of two) that fits ``sg`` and ``tw``, so that the lanes past the
    columns project another pixel instead of repeating the products; else 1."""
    if not DWPL_PACK or not sg or n4 < 1 or 2 * n4 > sg:
        return 1
    lpp = 1 << (n4 - 1).bit_length()
    pk = 1
    while 2 * pk <= min(sg // lpp, tw):
        pk *= 2
    return pk


#: The channel-lane kernel's time on lavapipe before Mesa 24, in microseconds per 1000 of what
#: its busiest thread does (:func:`_dwpl_terms`): input loads (lanes x vec4s) of a stride-1
#: window, depthwise vec4 multiply-adds, projection ``mat4x4 * vec4`` products, stores (lanes x
#: vec4s), a fixed part, and input loads of a strided window (docs/conv.md, The channel-lane
#: kernel; fitted on benchmarks/dw_project.py --vs-lanes). A strided window's loads cost 0.65
#: of a stride-1 window's: on 29 stride-2 pairs (11 of the zoo, 18 synthetic, 3x3 and 5x5) the
#: least-squares factor was 0.72 (0.72 on the zoo's, 0.85 on the synthetic ones; stride-1
#: pairs: 0.99), and 0.65 is the largest at which the zoo's pairs lose least against the faster
#: kernel of each (benchmarks/dw_shapes.py --lanes-forced).
DWPL_FIT: dict[str, tuple[float, ...]] = {"lane-loop": (5.74, 0.69, 5.54, 5.38, 43.8, 3.73)}
#: ... and the margin, in microseconds, by which that estimate must beat the other kernels': the
#: fit's median error is 16-20%, and each of its pipelines (one per channel count, window, stride
#: and epilogue) costs 0.2-1.2 s of CPU in a first build, where the pair's other kernels often
#: share theirs with other layers
DWPL_MARGIN = 50.0
#: ... which :func:`project_pays` leaves out of the channel-lane kernel's side where its window
#: has at most this many taps: against the two kernels (one launch more, :data:`LAUNCH_US`) its
#: 3x3 pairs ran 0.75-0.99 of them (iris_landmark's five 16 x 16 x 64 -> 128 in the model, 32 x 32
#: x 64 -> 128 and 48 x 48 x 32 -> 192 stride 2 alone), where with the margin they would split; its
#: 5x5 pairs with two channel groups per lane ran 0.85 of them in one run and 1.5-1.8 in another
#: (16 x 16 x 64 -> 128, 24 x 24 x 48 -> 128, 32 x 32 x 48 -> 96): the margin stays there
DWPL_PAY_MAX_TAPS = 9


def _dwpl_terms(g: dict, n4: int, plan: tuple[int, int, int, int, int], sg: int) -> tuple[float, ...]:
    """What the channel-lane kernel's busiest thread does with ``plan`` (:func:`_dwp_lanes`), in
    thousands: input vec4 loads of all lanes with vertical stride 1, depthwise vec4 multiply-adds
    per lane, projection ``mat4x4 * vec4`` products per lane, vec4 stores of all lanes; 1 (the
    fixed part); and input vec4 loads of all lanes with a vertical stride above 1.
    lavapipe runs a workgroup (here one subgroup) on one thread: the busiest of
    :data:`DWP_CORES` runs ceil(workgroups / cores) of them."""
    tw, th, rb, cpl, npl = plan
    c4 = -(-g["C"] // 4)
    cs = c4 if DWPL_EXACT_C else sg * cpl
    splits = _dwpl_splits(n4, sg, npl)
    wgs = g["NB"] * rb * -(-g["OW"] // tw) * splits
    busy = -(-wgs // DWP_CORES.get("lane-loop", 2))
    steps = th + -(-(g["KH"] - g["sh"]) // g["sh"])
    passes = -(-tw // _dwpl_pack(n4, sg, tw))  # a pass: one product per channel group and column
    loads = busy * steps * g["sh"] * len(_segment(g, tw)) * c4 / 1e3
    strided = g["sh"] > 1
    return (0.0 if strided else loads,
            busy * th * tw * cpl * g["KH"] * g["KW"] / 1e3, busy * th * passes * cs * npl / 1e3,
            busy * th * tw * n4 / splits / 1e3, 1.0, loads if strided else 0.0)


def _dwpl_cost(g: dict, n4: int, plan: tuple[int, int, int, int, int], sg: int, tuning: str) -> float:
    """The channel-lane kernel's estimated time with ``plan`` in microseconds (:data:`DWPL_FIT`),
    plus :data:`DWPL_MARGIN`: what :func:`_dwp_form` and :func:`project_pays` compare."""
    return sum(w * t for w, t in zip(DWPL_FIT[tuning], _dwpl_terms(g, n4, plan, sg))) + DWPL_MARGIN


_NO_PLAN: Any = None  # the plan of the pixel-block form (its own, _dwp_plan, is made at lowering)
#: A pair whose projection adds its depthwise input padded with zero channels, or a pool of it
#: (:func:`_lanes_residual`), runs on the channel-lane kernel wherever that can run: it computes
#: the residual from its held rows where the pixel blocks load it value by value with a bounds
#: test (face_detection_short_range's 32 x 32 x 28 -> 32 stride 2 and 16 x 16 x 48 -> 56 and
#: 56 -> 64 pairs: 0.65-0.82x of the pixel blocks; docs/conv.md)
DWPL_HELD_RESIDUAL = True


def _dwp_form(g: dict, n4: int, tuning: str, sg: int, held: bool = False) -> tuple[str, Any]:
    """Which fused kernel runs depthwise conv2d ``g`` and a pointwise projection of ``n4`` vec4
    columns (no expansion, no pool partials), and its plan: ("strip", :func:`_dwp_strip`'s plan)
    where the strip kernel takes it; else ("lanes", :func:`_dwp_lanes`'s plan) where that kernel
    can run and either computes the projection's residual from its held rows where the pixel
    blocks load it value by value (``held``: :func:`_lanes_residual`, with
    :data:`DWPL_HELD_RESIDUAL`) or is estimated faster by :data:`DWPL_MARGIN`
    (:func:`_dwpl_cost`) than the pixel blocks (the fused side of :data:`DWP_PAY_FIT`); else
    ("blocks", None).
    ``WEBNN_GPU_FORCE_DWP_FORM``: "lanes" (wherever it can run) or "blocks" (never the
    channel-lane kernel)."""
    strip = _dwp_strip(g, n4, tuning)
    force = _env.force("dwp_form")
    lanes = _dwp_lanes(g, n4, sg) if force != "blocks" else None
    if lanes is not None and force == "lanes":
        return "lanes", lanes
    if strip is not None:
        return "strip", strip
    if lanes is not None and held and DWPL_HELD_RESIDUAL:
        return "lanes", lanes
    fit, lfit = DWP_PAY_FIT.get(tuning), DWPL_FIT.get(tuning)
    if lanes is None or fit is None or lfit is None:
        return "blocks", _NO_PLAN
    blocks = sum(w * t for w, t in zip(fit["fused"], _dwp_fused_terms(g, n4, tuning, sg)))
    if _dwpl_cost(g, n4, lanes, sg, tuning) < blocks:
        return "lanes", lanes
    return "blocks", _NO_PLAN


#: ... and on the lane-loop profile with 64-bit integers it moves its input and output as
#: words of 8 values (vec4<u64> for float32, vec2<u64> for float16; the same bits) where a lane
#: holds two channel groups or two projection columns (:func:`_dwpl_words`)
DWPL_WORDS = True


def _dwpl_words(c4: int, n4: int, cpl: int, npl: int, pk: int, split: bool, xres: bool, tuning: str,
                features) -> tuple[bool, bool]:
    """(xw, ow) of the channel-lane kernel: whether it loads its input (two channel groups per
    lane, ``cpl`` 2, ``c4`` even) and stores its output (two projection columns per lane, ``npl``
    2, ``n4`` even, one pixel per pass, no split) as words of 8 values (:data:`DWPL_WORDS`): on
    the lane-loop profile with ``shader-int64``, where every storage access is a loop over the
    lanes and the components and a u64 component moves two float32 or four float16 values. A
    lane's channel groups are then 2l, 2l + 1 (and its columns 2l, 2l + 1), so a residual read
    from the held input (``xres``) needs both or neither. ``WEBNN_GPU_FORCE_DWP_WORDS=vec4``
    keeps vec4s of the storage type."""
    on = (DWPL_WORDS and tuning == "lane-loop" and "shader-int64" in features
          and _env.force("dwp_words") != "vec4")
    xw = on and cpl == 2 and c4 % 2 == 0
    ow = on and npl == 2 and n4 % 2 == 0 and pk == 1 and not split
    if xres and xw != ow:
        return False, False
    return xw, ow


#: ... and the other vec4s of its input (a lane holding one channel group, or an odd count) and
#: output (a lane storing one column, or an odd count, or a split) as words of 4 values
#: (:func:`_dwpl_words4`; the projection's residual operand as words measured no faster)
DWPL_WORDS4: tuple[str, ...] = ("x", "out")


def _dwpl_words4(tuning: str, features) -> tuple[str, ...]:
    """The bindings of the channel-lane kernel (among "x", "out") whose vec4s that
    :func:`_dwpl_words` leaves as they are move as u64 words of 4 values (``w4``: vec2<u64> for
    float32, one u64 for float16; the same bits): :data:`DWPL_WORDS4` where :func:`_words_ok`
    allows words (the lane-loop profile with ``shader-int64``, where each storage access is a loop
    over the lanes and its components).
    ``WEBNN_GPU_FORCE_DWPL_WORDS4=vec4`` (or ``WEBNN_GPU_FORCE_DWP_WORDS=vec4``) keeps vec4s,
    ``=words`` takes both wherever 64-bit integers are, ``=x`` or ``=out`` the one."""
    forced = _env.force_choice("dwpl_words4", ("vec4", "words", "x", "out"))
    if forced:
        parts = {"vec4": (), "words": ("x", "out")}.get(forced, (forced,))
        return parts if "shader-int64" in features else ()
    return DWPL_WORDS4 if _words_ok(tuning, features) else ()


#: The fused kernels on the lane-loop profile with 64-bit integers move words of 8 values
#: (:func:`_words_ok`) ...
DWP_WORDS = True
#: ... but the pixel-block kernel (``conv/depthwise_project.wgsl``) only with DWP_BLOCK_WORDS:
#: two channel groups per iteration of its channel loop, their input one word per pixel
#: (:func:`_dwp_words`); it ran 0.85-1.09 of the vec4 form's time on the zoo's layers (median
#: about 0.95) but its pipelines took 1.36x the LLVM time, which would take pose_landmark_full's
#: first build past 10 s (docs/conv.md)
DWP_BLOCK_WORDS = False


def _words_ok(tuning: str, features) -> bool:
    """Whether the fused depthwise + projection kernels may move words of 8 values
    (:data:`DWP_WORDS`): on the lane-loop profile with ``shader-int64``, unless
    ``WEBNN_GPU_FORCE_DWP_WORDS=vec4``. The strip kernel then loads its input (C a multiple
    of 8) and stores its output and loads its residual (N a multiple of 8) as words."""
    return DWP_WORDS and tuning == "lane-loop" and "shader-int64" in features and _env.force("dwp_words") != "vec4"


def dwp_row_words(g: dict, p: dict, mode: str, tw: int, tuning: str, features) -> bool:
    """Whether the pixel-block kernel stores a transposed conv's output (``mode`` "transpose",
    its geometry ``p``) a block row's output row at a time as one word of 8 values (``orow``):
    where each such row is 8 values (``tw`` x KW x O, the block's ``tw`` pixel columns times the
    filter's width and output channels), the output width of depthwise conv2d ``g`` is a
    multiple of ``tw`` (every row whole and 8-aligned), on a device with words (:func:`_words_ok`).
    ``WEBNN_GPU_FORCE_DWP_ROW_WORDS=off`` keeps the per-value stores."""
    if _env.force_choice("dwp_row_words", ("off",)) == "off":
        return False
    return (mode == "transpose" and tw * p["KW"] * p["O"] == 8 and g["OW"] % tw == 0
            and _words_ok(tuning, features))


def _dwp_words(g: dict, mode: str, expand: bool, tuning: str, features) -> bool:
    """Whether the pixel-block kernel loads the input of depthwise conv2d ``g`` as words of 8
    channels (``xw``; :data:`DWP_BLOCK_WORDS`, off by default): a pointwise projection
    (``mode`` "conv"), no expansion, the rows in a loop (:data:`DW_ROW_LOOP`), channels a
    multiple of 8, where :func:`_words_ok` allows words (the lane-loop profile with
    ``shader-int64``, where a u64 component of a storage access moves two float32 or four
    float16 values; ``WEBNN_GPU_FORCE_DWP_WORDS=vec4`` keeps vec4s)."""
    return (DWP_BLOCK_WORDS and mode == "conv" and not expand and DW_ROW_LOOP and g["C"] % 8 == 0
            and _words_ok(tuning, features))


def _lower_dwp_lanes(lc, node, g: dict, plan: tuple[int, int, int, int, int], sg: int, x, *, w_in, ep, pep,
                     project_in: list, mat: np.ndarray, xres: bool, xpool: dict | None = None,
                     consumer=None, in_relu: bool = False) -> bool:
    """The kernel of :func:`lower_depthwise_project` on ``conv/depthwise_project_lanes.wgsl``
    (plan of :func:`_dwp_lanes`, ``sg`` lanes; ``in_relu``: relu of each input value as it is
    loaded, ``fuse_conv_input_relu``); ``mat`` the [C, N] projection matrix, bound
    zero-padded; ``xres``: the projection's residual operand is the depthwise input (maybe
    padded with zero channels, or a pool of it, ``xpool``: :func:`_lanes_residual`), read
    from the kernel's held rows (``pg`` is not bound). Channels that are not a multiple of 4
    (:func:`_lanes_tail_ok`): the input is bound as scalars and its last channel group loaded value by value, the taps
    zero-padded to whole groups, the padded channels' depthwise values zeroed. ``consumer``: a
    pointwise conv2d reading the output (:func:`consumer_ok`), computed as the kernel's second
    stage where :func:`_dwpl_second` allows. Returns whether the kernel computes the consumer."""
    tw, th, rb, cpl, npl = plan
    out = node.outputs[0]
    proj = node.attrs["project"]
    c4, n4 = -(-g["C"] // 4), mat.shape[1] // 4
    tail = g["C"] % 4 != 0
    owb = -(-g["OW"] // tw)
    splits = _dwpl_splits(n4, sg, npl)
    pk = _dwpl_pack(n4, sg, tw)
    assert xpool is None or xres and pk == 1, "_lanes_residual"
    # the split kernel reads the held rows' own channel group only: no pool, no zero channels
    assert not (xres and splits > 1 and (xpool is not None or mat.shape[0] != mat.shape[1])), "_lanes_residual"
    xres = xres and pk == 1  # a lane of a packed pass projects another lane's channels: pg is loaded
    n_inv = g["NB"] * rb * owb * splits * sg
    prm = make_constant(np.array([n_inv, g["H"], g["W"], g["OH"], g["OW"], owb, rb, th, g["pt"], g["pl"], c4, n4,
                                  splits, sg * npl * splits, 0, 0], dtype=np.uint32), "uint32")
    w = _relayout(lc, w_in, node.attrs["depthwise"].attrs["filter_layout"], "hwio", 4 * c4 if tail else None)
    w_ubo = uniform_copy(lc, w)
    padded = np.zeros((4 * sg * cpl, 4 * sg * npl * splits), mat.dtype)
    padded[:mat.shape[0], :mat.shape[1]] = mat
    pw = make_constant(padded, proj.inputs[1].data_type)
    pw_ubo = uniform_copy(lc, pw)
    project_in = [("pw", pw_ubo or pw)] + [v for v in project_in[1:] if not (xres and v[0] == "pg")]
    fns: dict = {}
    for ee in (ep, pep):
        for FT, names in ee.functions:
            fns.setdefault(FT, set()).update(names)
    hold = g["KH"] - g["sh"]
    xw, ow = _dwpl_words(c4, n4, cpl, npl, pk, splits > 1, xres, lc.tuning, lc.features)
    if tail:  # the input as scalars (vec4s of channels are not aligned to its pixels)
        xw, ow = False, ow and not xres
    nx = out.shape[3] if out.shape[3] % 4 else 0  # the output as scalars, likewise
    ow = ow and not nx
    w4 = list(_dwpl_words4(lc.tuning, lc.features))
    k4 = consumer.outputs[0].shape[3] // 4 if consumer is not None else 0
    npl2 = _dwpl_second(g, n4, k4, plan, sg, lc.tuning) if consumer is not None and not nx else 0
    second_in, outs, pep2, p2_ubo, ow2 = [], [("out", out)], None, None, False
    if npl2:  # the consumer's [N, K] matrix, zero-padded to sg NPL2 vec4 columns
        out2 = consumer.outputs[0]
        pep2 = _conv_epilogue(consumer, out2, "nhwc", first_binding="qe", name="second")
        mat2 = np.zeros((4 * n4, 4 * sg * npl2), mat.dtype)
        mat2[:, :4 * k4] = _pointwise_matrix(consumer).T
        pw2 = make_constant(mat2, consumer.inputs[1].data_type)
        p2_ubo = uniform_copy(lc, pw2)
        second_in = [("pw2", p2_ubo or pw2)] + pep2.operands
        outs.append(("out2", out2))
        ow2 = _dwpl_words(c4, k4, cpl, npl2, 1, False, False, lc.tuning, lc.features)[1]
        for FT, names in pep2.functions:
            fns.setdefault(FT, set()).update(names)
    lc.kernel("conv/depthwise_project_lanes.wgsl",
              [("x", x), ("f", w_ubo or w)] + ep.operands + project_in + second_in + [("prm", prm)], outs,
              n_inv, workgroup=sg, T=wgsl_type(out.data_type), TW=tw, CPL=cpl, NPL=npl, sg=sg,
              CS=c4 if DWPL_EXACT_C else sg * cpl, split=splits > 1, PK=pk, xw=xw, ow=ow, w4=w4,
              CX=g["C"] if tail else 0, NX=nx, xpool=xpool,
              seg=_segment(g, tw), hold=hold, warm=-(-hold // g["sh"]), ep=ep, pep=pep, xres=xres, in_relu=in_relu,
              pt=g["pt"] if ep.given or xres else 0, pl=g["pl"] if ep.given or xres else 0,
              f_uniform=B_UNIFORM_FLOATS // 4 if w_ubo is not None else 0,
              p_uniform=B_UNIFORM_FLOATS // 4 if pw_ubo is not None else 0, fdiv=n_inv < DW_FDIV_MAX,
              fns=sorted((FT, sorted(names)) for FT, names in fns.items()),
              p2=npl2, pep2=pep2, ow2=ow2, N4S=n4, K4S=k4, PK2=_dwpl_pack(k4, sg, tw) if npl2 else 1,
              p2_uniform=B_UNIFORM_FLOATS // 4 if p2_ubo is not None else 0,
              **{k: g[k] for k in ("KH", "KW", "sh", "sw", "dw")})
    return npl2 > 0


#: The channel-lane kernel computes a pointwise conv2d reading its output (``attrs["consumer"]``
#: of the compiler's ``fuse_project_consumer``) as a second stage where :func:`_dwpl_second`
#: allows: after a pixel's projection every lane holds its columns of all N output channels, so
#: a broadcast of them and each lane's products of its consumer columns give the consumer's
#: output in the same kernel, one launch and one read of the first output fewer
#: (``WEBNN_GPU_FORCE_DWPL_SECOND=off``: the consumer runs as its own conv, as without the
#: rule) ...
DWPL_SECOND = True
#: ... with at most this many 4 x 4 blocks of the consumer's matrix held per lane (N / 4 x its
#: columns per lane, within DWPL_MAX_NPL) ...
DWPL_SECOND_BLOCKS = 32
#: ... and where its estimate (:func:`_dwpl_second_terms` weighted by this fit: microseconds per
#: 1000 consumer ``mat4x4 * vec4`` products per lane of the busiest thread, per 1000 of them
#: times the 4 x 4 blocks both stages hold per lane over DWPL_MAX_BLOCKS (what LLVM spills
#: through the row loop), and a fixed part) is below the consumer's own tile kernel and one
#: more dispatch (the tile side of :data:`DWP_PAY_FIT`). Fitted by least relative error on 37
#: measurements of 24 synthetic pairs (images of 12-96 pixels, 16-64 channels, projections to
#: 24-64 and consumers of 4-128 channels, 1-4 pixels per pass; benchmarks/dwpl_second.py
#: --shapes --forced, 2026-11-26): median error 14%, at most 57% (a consumer of 8 channels after
#: 32 x 32 x 32 -> 64, 4 pixels per pass: 142-156 us against 67 estimated, as long as its own
#: kernel and dispatch)
DWPL_SECOND_FIT: dict[str, tuple[float, ...]] = {"lane-loop": (5.14, 12.32, 31.8)}
#: conv2d attributes a consumer may have (any other, a rule's mark, keeps it a conv of its own)
_CONSUMER_ATTRS = frozenset({"padding", "strides", "dilations", "groups", "input_layout", "filter_layout",
                             "epilogue"})


def _dwpl_second_terms(g: dict, n4: int, k4: int, plan: tuple[int, int, int, int, int], sg: int) -> tuple[float, ...]:
    """What the channel-lane kernel's second stage (a pointwise conv of the projection's ``n4``
    vec4 columns to ``k4``) adds to its busiest thread with ``plan`` (:func:`_dwp_lanes`, ``sg``
    lanes), in thousands: ``mat4x4 * vec4`` products per lane; those times the 4 x 4 blocks
    both stages hold per lane over :data:`DWPL_MAX_BLOCKS`; and 1 (the fixed part). lavapipe
    runs a workgroup on one thread: the busiest of :data:`DWP_CORES` runs
    ceil(workgroups / cores) of them."""
    tw, th, rb, cpl, npl = plan
    busy = -(-g["NB"] * rb * -(-g["OW"] // tw) // DWP_CORES.get("lane-loop", 2))
    npl2 = -(-k4 // sg)
    passes = -(-tw // _dwpl_pack(k4, sg, tw))  # a pass: one product per projection column per lane
    products = busy * th * passes * n4 * npl2 / 1e3
    blocks = (-(-g["C"] // 4) if DWPL_EXACT_C else sg * cpl) * npl + n4 * npl2
    return products, products * blocks / DWPL_MAX_BLOCKS, 1.0


def _dwpl_second_estimates(g: dict, n: int, k: int, plan: tuple[int, int, int, int, int], sg: int,
                           tuning: str) -> tuple[float, float]:
    """(the second stage, the consumer's tile kernel and one more dispatch) in microseconds for
    a pointwise conv of the projection's ``n`` channels to ``k`` (:data:`DWPL_SECOND_FIT`; the
    tile side of :data:`DWP_PAY_FIT`, whose tile kernel reads the ``n`` channels and stores the
    ``k``), or (inf, 0) on a profile without the fits."""
    fit, tfit = DWPL_SECOND_FIT.get(tuning), DWP_PAY_FIT.get(tuning)
    if fit is None or tfit is None:
        return float("inf"), 0.0
    stage = sum(w * t for w, t in zip(fit, _dwpl_second_terms(g, n // 4, k // 4, plan, sg)))
    M = g["NB"] * g["OH"] * g["OW"]
    t = tfit["tile"]
    tile = t[0] * M * n * (k // 4) / 1e6 + t[1] * M * (n + k) / 4e6 + t[2]
    return stage, tile + tfit["dispatch"]


def _dwpl_second(g: dict, n4: int, k4: int, plan: tuple[int, int, int, int, int], sg: int, tuning: str) -> int:
    """Columns per lane (NPL2) of the channel-lane kernel's second stage, a pointwise conv of
    the projection's ``n4`` vec4 columns to ``k4`` (depthwise conv2d ``g``, ``plan`` of
    :func:`_dwp_lanes`, ``sg`` lanes), or 0 where it does not run: the projection's columns of
    a pixel all in one subgroup (no split, :func:`_dwpl_splits`; one pixel per pass,
    :func:`_dwpl_pack`), at most :data:`DWPL_MAX_NPL` consumer columns per lane and
    :data:`DWPL_SECOND_BLOCKS` 4 x 4 blocks, and estimated faster than the consumer's own kernel
    and its dispatch (:func:`_dwpl_second_estimates`). ``WEBNN_GPU_FORCE_DWPL_SECOND=off``:
    never (nor :data:`DWPL_SECOND` False); ``=on``: wherever it fits."""
    forced = _env.force_choice("dwpl_second", ("off", "on"))
    tw, _, _, _, npl = plan
    if not DWPL_SECOND or forced == "off" or not sg or not k4:
        return 0
    if _dwpl_splits(n4, sg, npl) != 1 or _dwpl_pack(n4, sg, tw) != 1:
        return 0
    npl2 = -(-k4 // sg)
    if npl2 > DWPL_MAX_NPL or n4 * npl2 > DWPL_SECOND_BLOCKS:
        return 0
    if forced != "on":
        stage, conv = _dwpl_second_estimates(g, 4 * n4, 4 * k4, plan, sg, tuning)
        if stage >= conv:
            return 0
    return npl2


def consumer_ok(node, conv, tuning: str = "default", lanes: int = 0) -> bool:
    """Whether ``conv`` may be attached to the ``depthwise_project`` node ``node`` as the
    channel-lane kernel's second stage (the compiler's ``fuse_project_consumer``; the lowering
    decides, :func:`_dwpl_second`): ``node`` a depthwise conv and a pointwise projection (no
    expansion, one output, a multiple of 4 channels) that :func:`_dwp_lanes` can plan with
    ``lanes`` subgroup lanes and whose second stage :func:`_dwpl_second` takes on ``tuning``;
    ``conv`` a 1x1 NHWC conv2d (stride 1, no
    padding, one group, a constant filter, no attribute but the builder's and its epilogue)
    reading the projection's output as its input only, to a multiple of 4 channels of the same
    data type, with an epilogue that reads operands only per output channel."""
    if node.op != "depthwise_project" or set(node.attrs) != {"depthwise", "project"} or len(node.outputs) != 1:
        return False
    dw, proj = node.attrs["depthwise"], node.attrs["project"]
    mid = node.outputs[0]
    if proj is None or proj.op != "conv2d" or conv.op != "conv2d" or len(conv.outputs) != 1 or not lanes:
        return False
    if not set(conv.attrs) <= _CONSUMER_ATTRS or conv.attrs.get("input_layout") != "nhwc" or not conv.inputs:
        return False
    if conv.inputs[0] is not mid or any(v is mid for v in conv.inputs[1:]) or constant_array(conv.inputs[1]) is None:
        return False
    out = conv.outputs[0]
    if out.data_type != mid.data_type or mid.shape[3] % 4 or out.shape[3] % 4:
        return False
    p = _geometry(conv)
    if (p["KH"], p["KW"], p["sh"], p["sw"], p["G"]) != (1, 1, 1, 1, 1) or any(conv.attrs["padding"]):
        return False
    if any("input" in st and (st.get("axis") != 3 or "pool" in st or "pad" in st) for st in _epilogue.steps_of(conv)):
        return False
    g = _geometry(dw)
    n4 = mid.shape[3] // 4
    plan = _dwp_lanes(g, n4, lanes)
    return plan is not None and _dwpl_second(g, n4, out.shape[3] // 4, plan, lanes, tuning) > 0


def dwp_lanes(tuning: str, subgroup: int) -> int:
    """The subgroup lanes the depthwise + projection kernel shares its loads of the taps, the
    projection matrix and the expansion's weights over (``sg``; 0: none), on a device with
    ``subgroup`` lanes (:func:`webnn_gpu.ops.linalg.subgroup_lanes`, 0: none) and ``tuning``:
    with :data:`DWP_SUBGROUP`, on the lane-loop profile, where every lane would otherwise load
    them itself, each a loop over the lanes (storage) or a gather (uniform)."""
    if not DWP_SUBGROUP or tuning != "lane-loop" or not subgroup or PROJECT_WORKGROUP % subgroup:
        return 0
    return subgroup


#: The pixel-block kernel loads a residual placed among zero channels as vec4s
#: (:func:`_blocks_padded_residual`); False: its epilogue loads it value by value (for A/B runs)
DWP_PADDED_GIVEN = True


def _blocks_padded_residual(proj, out) -> int | None:
    """The input of ``proj`` (a pointwise conv2d fused after a depthwise one) that its epilogue
    adds placed among zero channels (BlazeFace's ``pad(x)`` where a block widens its channels:
    a ``"pad"`` step, :func:`_epilogue.given_chan_pad_ok`), read by one step, for the pixel-block
    kernel to load as vec4s (``pg``, through ``given_g4``; 0 in the zero channels), or None:
    the epilogue then loads it value by value, each with a bounds test. (A pool of it,
    ``fuse_pool_residual``'s, is :func:`given_operand`'s.)"""
    steps = _epilogue.steps_of(proj)
    for st in steps:
        i = st.get("input")
        if not isinstance(i, int) or not 0 <= i < len(proj.inputs) or proj.inputs[i] is None:
            continue
        v = proj.inputs[i]
        if (v.data_type == out.data_type and st.get("op") in _epilogue.BINARY
                and _epilogue.given_chan_pad_ok(st, v, out) and sum(t.get("input") == i for t in steps) == 1):
            return i
    return None


def _expand_words(k4: int, x_loop: bool, tuning: str, features) -> bool:
    """Whether the pixel-block kernel loads its expansion's input (``x_loop``, ``k4`` vec4s per
    pixel, even) as words of 8 values (``x_words``: one ``vec4<u64>`` / ``vec2<u64>`` per two
    vec4s, the same bits; :data:`DWP_EXPAND_WORDS`) where :func:`_words_ok` allows words and
    the held values are put in place by selects (:func:`_expand_shift` false: shifted, the
    words ran 0.94-1.02 of the vec4s' time for 19-26% more LLVM time);
    ``WEBNN_GPU_FORCE_DWP_EXPAND_WORDS=vec4|words`` forces either form (words: shifted too)."""
    words = _env.force_words("dwp_expand_words", DWP_EXPAND_WORDS and not _expand_shift(k4))
    return x_loop and k4 % 2 == 0 and _words_ok(tuning, features) and words


def _expand_shift(k4: int) -> bool:
    """Whether the pixel-block kernel's expansion loads (``x_loop``) put each pixel's ``k4``
    vec4s in place by shifting them down (``x_shift``) rather than by selects
    (:data:`DWP_EXPAND_SHIFT_MIN_K4`, ``WEBNN_GPU_FORCE_DWP_EXPAND_LOAD=select|shift``)."""
    forced = _env.force_choice("dwp_expand_load", ("select", "shift"))
    if forced:
        return forced == "shift"
    return k4 >= DWP_EXPAND_SHIFT_MIN_K4


@lowering("depthwise_project")
def lower_depthwise_project(node, lc) -> None:
    """:func:`_lower_dwp`; with ``attrs["consumer"]`` (a pointwise conv2d reading the output, the
    node's second output its output: the compiler's ``fuse_project_consumer``,
    :func:`consumer_ok`) the channel-lane kernel computes the consumer as its second stage where
    it runs the pair and :func:`_dwpl_second` allows, and the consumer is lowered as its own
    conv2d otherwise (the kernels of a graph without the rule)."""
    consumer = node.attrs.get("consumer")
    if consumer is None:
        _lower_dwp(node, lc)
        return
    label = node.label  # the pair's own ("+".join of the pair's and the consumer's, empty ones left out)
    if consumer.label:
        label = "" if label == consumer.label else label.removesuffix(f"+{consumer.label}")
    base = Node(node.op, list(node.inputs), node.outputs[:1],
                {k: v for k, v in node.attrs.items() if k != "consumer"}, label)
    start = len(lc.steps)
    if _lower_dwp(base, lc, consumer):
        return
    for st in lc.steps[start:]:  # the pair's kernels and the consumer's, labelled as without the rule
        st.node, st.label = base, _kernels.op_where(base)
    here, lc.node = lc.node, consumer
    try:
        lower_conv2d(consumer, lc)
    finally:
        lc.node = here


def _lower_dwp(node, lc, consumer=None) -> bool:
    """A depthwise conv2d and the pointwise conv2d / tiled conv_transpose2d reading its output,
    in one kernel (``attrs["depthwise"]`` / ``["project"]``, the original nodes; see
    :func:`project_ok`), maybe with the expansion conv making its input (``attrs["expand"]``,
    :func:`expand_ok`; with ``attrs["expand_shared"]`` each workgroup computes it into workgroup
    memory first, :func:`expand_shared_ok`). Without a projection (``project`` None) the kernel
    stores the depthwise output, and the partial sums of its global pool when the depthwise node has one. A
    pointwise projection of a layer with few channels (:func:`_dwp_strip`) runs on
    ``conv/depthwise_project_strip.wgsl`` instead of the pixel blocks. ``consumer``: a pointwise
    conv2d the channel-lane kernel may compute too (:func:`lower_depthwise_project`); returns
    whether it does."""
    dw, proj = node.attrs["depthwise"], node.attrs["project"]
    x, mid, out = dw.inputs[0], dw.outputs[0], node.outputs[0]
    g = _geometry(dw)
    center = _center(g)  # a residual add of the depthwise input from the registers
    ep = _conv_epilogue(dw, mid, "nhwc", given=0 if center else None)
    e = node.attrs.get("expand")
    xsh = e is not None and bool(node.attrs.get("expand_shared"))  # computed into workgroup memory first
    in_relu = bool(dw.attrs.get("input_relu"))  # fuse_conv_input_relu: relu of each loaded input value
    if in_relu and (e is not None or center and ep.given):
        raise AssertionError(f"{lc.label}: an input relu with an expansion or a read of the input")  # input_relu_ok
    eep, k4, expand_in = None, 0, []
    we_ubo = None
    if e is not None:  # the depthwise input is computed here from the expansion's input
        x = e.inputs[0]
        k4 = x.shape[3] // 4
        eep = _conv_epilogue(e, dw.inputs[0], "nhwc", first_binding="xe", name="expand")
        kc = _pointwise_matrix(e).T.reshape(4 * k4, g["C"] // 4, 4).transpose(1, 0, 2)  # [C4, K, 4]: vec4s of channels
        we = make_constant(np.ascontiguousarray(kc), e.inputs[1].data_type)
        we_ubo = uniform_copy(lc, we)
        expand_in = [("we", we_ubo or we)] + eep.operands
    project_in: list = []
    pw_ubo = None
    N = n4 = 0
    p = {"KH": 1, "KW": 1, "O": 1}
    sg = dwp_lanes(lc.tuning, getattr(lc, "subgroup", 0))
    partials = len(node.outputs) == 2 or proj is None and bool(dw.attrs.get("pool_output"))
    form, plan = "blocks", _NO_PLAN
    gpad, xpool = False, None
    if proj is not None:
        p = _geometry(proj)
        N = _project_width(proj)
        n4 = -(-N // 4)
        row_form = proj.op == "conv2d" and e is None and not partials
        if row_form:
            lanes = _dwp_lanes(g, n4, sg) if _env.force("dwp_form") != "blocks" else None
            from_rows = lanes is not None and _lanes_residual(dw, proj, g, out, lanes, sg) is not None
            form, plan = _dwp_form(g, n4, lc.tuning, sg, from_rows)
            if N % 4 and form != "lanes":  # the strip kernel stores vec4s; the pixel blocks take it
                form, plan = "blocks", _NO_PLAN
        if g["C"] % 4:  # project_ok takes these only for the channel-lane kernel
            form, plan = "lanes", _dwp_lanes(g, n4, sg)
            assert row_form and plan is not None, "project_ok: channels not a multiple of 4 on the lane kernel"
        # the input padded with zero channels or pooled: computed from the lane kernel's held rows
        held = _lanes_residual(dw, proj, g, out, plan, sg) if form == "lanes" else None
        gpad, xpool = held is not None, held[1] if held is not None else None
        gi = held[0] if held is not None else (
            given_operand(proj, out, _epilogue.steps_of(proj), g["NB"] * g["OH"] * g["OW"], N, g["C"])
            if proj.op == "conv2d" and N % 4 == 0 else None)  # a residual add: loaded as vec4
        if gi is None and DWP_PADDED_GIVEN and form == "blocks" and proj.op == "conv2d" and N % 4 == 0:
            gi = _blocks_padded_residual(proj, out)  # the pixel blocks load it as vec4 among zeros
        pep = _conv_epilogue(proj, out, "nhwc", first_binding="pe", name="project", given=gi, given_pad=gpad)
        mat = _project_matrix(proj)
        n4 = mat.shape[1] // 4
        pw = make_constant(mat, proj.inputs[1].data_type)
        pw_ubo = uniform_copy(lc, pw)
        project_in = [("pw", pw_ubo or pw)] + pep.operands + ([("pg", proj.inputs[gi])] if pep.given else [])
        mode = "conv" if proj.op == "conv2d" else "transpose"
    else:
        pep, mode = None, "store"
    # the projection's residual add of the depthwise input itself (or padded with zero
    # channels, on the channel-lane kernel): from the held rows
    xres = gpad or (form != "blocks" and bool(pep.given) and not pep.given_g4 and proj.inputs[gi] is dw.inputs[0]
                    and N == g["C"] and center)
    if form == "strip" and pep.given and (pep.given_g4 or tuple(proj.inputs[gi].shape) != tuple(out.shape)):
        # the strip kernel reads a given residual at the output's own index, as vec4 (not the
        # window of a pool fuse_pool_residual folded into the read: pep.given_g4)
        form = "blocks"
    if form == "lanes":
        return _lower_dwp_lanes(lc, node, g, plan, sg, x, w_in=dw.inputs[1], ep=ep, pep=pep, project_in=project_in,
                                mat=mat, xres=xres, xpool=xpool if gpad else None, consumer=consumer, in_relu=in_relu)
    if form == "strip":
        _lower_dwp_strip(lc, node, g, plan, x, w_in=dw.inputs[1], ep=ep, pep=pep, project_in=project_in,
                         pw_uniform=pw_ubo is not None, xres=xres, in_relu=in_relu)
        return False
    # a pool's partial sums have one row per block of pool_rows' plan, which the compiler sized
    th, tw, splits = _dwp_plan(g, n4, 0 if xsh else k4, lc.tuning, mode == "conv", sg=0 if partials else sg)
    ohb, owb = -(-g["OH"] // th), -(-g["OW"] // tw)
    blocks = g["NB"] * ohb * owb
    wg = max(EXPAND_SHARED_WORKGROUP, sg) if xsh else PROJECT_WORKGROUP
    unit = wg if xsh and sg else sg  # xsh: a workgroup has one column block
    padded = -(-blocks // unit) * unit if sg else blocks  # sg: a subgroup's lanes share a column block
    panel = DWP_PANEL and mode == "conv" and splits > 1 and N > PROJECT_MAX_N
    if panel:  # each column block's rows of the matrix as one contiguous panel: [S, C, NS] vec4s
        ns4 = -(-n4 // splits) * 4
        pm = np.zeros((mat.shape[0], splits * ns4), dtype=mat.dtype)
        pm[:, :mat.shape[1]] = mat
        pw = make_constant(np.ascontiguousarray(pm.reshape(-1, splits, ns4).transpose(1, 0, 2)),
                           proj.inputs[1].data_type)
        pw_ubo = uniform_copy(lc, pw)
        project_in[0] = ("pw", pw_ubo or pw)
    xs_n, xkc = 0, 0
    if xsh:
        bands = _expand_bands(g, th, tw, splits, sg)
        xs_n = max(bands) * g["W"] * (g["C"] // 4)
        xkc = _expand_chunk(k4)
        assert g["NB"] == 1 and xs_n * 16 <= EXPAND_SHARED_BYTES, "expand_shared_ok checks the band fits"
        check_loops(lc, _expand_shared_loops(g, th, tw, splits, sg, k4, n4), 4 * k4, f"an expansion of {4 * k4} channels")
    n_inv = padded * splits
    prm = make_constant(np.array([n_inv, g["C"] // 4, n4, N, g["H"], g["W"], g["OH"], g["OW"], ohb, owb, g["pt"],
                                  g["pl"], splits, -(-n4 // splits) if n4 else 0, k4, _rows(g, th)[-1][0] + 1,
                                  blocks, padded, 0, 0], dtype=np.uint32), "uint32")
    outs = [("out", out)]
    pooled = proj is None and bool(dw.attrs.get("pool_output"))
    if pooled:  # fuse_conv_pool: per-block channel sums
        part, reduce_pool = _pool_partials(lc, dw, ohb * owb, g["C"])
        outs.append(("pool", part))
    elif len(node.outputs) == 2:  # fuse_pool_partials: per-block sums of the projection's output
        assert mode == "conv" and N % 4 == 0 and tuple(node.outputs[1].shape) == (ohb * owb, N), "partials_ok, pool_rows"
        outs.append(("pool", node.outputs[1]))
    w = _relayout(lc, dw.inputs[1], dw.attrs["filter_layout"], "hwio")
    w_ubo = uniform_copy(lc, w)
    fns: dict = {}
    for ee in (ep, pep, eep):
        for FT, names in ee.functions if ee is not None else ():
            fns.setdefault(FT, set()).update(names)
    lc.kernel("conv/depthwise_project.wgsl",
              [("x", x), ("f", w_ubo or w)] + ep.operands + project_in + expand_in + [("prm", prm)], outs,
              n_inv, workgroup=wg, T=wgsl_type(out.data_type), TH=th, TW=tw,
              rows=_rows(g, th), seg=_segment(g, tw), ep=ep, pep=pep, N=N if mode == "transpose" else 0,
              NS=-(-n4 // splits), ragged=n4 % splits != 0, panel=panel, col_loop=DWP_COLUMN_LOOP,
              center=ep.given, in_relu=in_relu,
              row_loop=DW_ROW_LOOP and (e is None or xsh), x_loop=DWP_EXPAND_LOOP,
              x_shift=_expand_shift(k4),
              x_words=e is not None and not xsh and _expand_words(k4, DWP_EXPAND_LOOP, lc.tuning, lc.features),
              xsh=xsh, XS=xs_n, KC=xkc, PX=EXPAND_SHARED_PX,
              fdiv=n_inv < DW_FDIV_MAX, sg=sg, xw=_dwp_words(g, mode, e is not None, lc.tuning, lc.features),
              orow=dwp_row_words(g, p, mode, tw, lc.tuning, lc.features),
              pt=g["pt"] if ep.given else 0, pl=g["pl"] if ep.given else 0, mode=mode, KH2=p["KH"], KW2=p["KW"],
              O2=p["O"],
              out_vec=mode == "store" or mode == "conv" and N % 4 == 0, pool=len(outs) == 2,
              f_uniform=B_UNIFORM_FLOATS // 4 if w_ubo is not None else 0,
              p_uniform=B_UNIFORM_FLOATS // 4 if pw_ubo is not None else 0,
              fns=sorted((FT, sorted(names)) for FT, names in fns.items()), expand=e is not None, eep=eep,
              K4=k4, we_uniform=B_UNIFORM_FLOATS // 4 if we_ubo is not None else 0,
              **{k: g[k] for k in ("KH", "KW", "sh", "sw", "dh", "dw")})
    if pooled:
        reduce_pool()
    return False


@lowering("conv2d")
def lower_conv2d(node, lc) -> None:
    """conv2d: pointwise, depthwise, implicit-GEMM or direct kernel (see the module docstring)."""
    x, f = node.inputs[0], node.inputs[1]
    out = node.outputs[0]
    layout, flayout = node.attrs["input_layout"], node.attrs["filter_layout"]
    g = _geometry(node)
    variant = _conv_variant(g, layout, lc.tuning)
    T = wgsl_type(out.data_type)
    scale = node.inputs[node.attrs["input_scale"]] if "input_scale" in node.attrs else None
    residual = node.inputs[node.attrs["input_add"]] if "input_add" in node.attrs else None
    if (scale is not None or residual is not None) and not (variant == "pointwise" and layout == "nhwc"):
        raise AssertionError(f"{lc.label}: an input prologue on a {variant} {layout} conv2d")  # input_prologue_ok
    in_relu = bool(node.attrs.get("input_relu"))
    if in_relu and not (variant == "depthwise" and layout == "nhwc"):
        raise AssertionError(f"{lc.label}: an input relu on a {variant} {layout} conv2d")  # input_relu_ok
    affine = node.attrs.get("input_affine")
    if affine and not (variant == "block" and layout == "nhwc"):
        raise AssertionError(f"{lc.label}: an input affine on a {variant} {layout} conv2d")  # input_affine_ok
    pre = _preact(node)
    if pre is not None and not (variant in ("pointwise", "gemm") and layout == "nhwc" and g["G"] == 1):
        raise AssertionError(f"{lc.label}: an input step on a {variant} {layout} conv2d")  # input_preact_ok
    if scale is None and residual is None and not affine and pre is None and _matvec_conv(lc, node, g, variant):
        return
    if variant == "direct":
        ep = _conv_epilogue(node, out, layout)
        opg = g["O"] // g["G"]
        to = 4 if opg % 4 == 0 else 1
        fs = filter_strides(f.shape, flayout)
        I, KH, KW = g["C"] // g["G"], g["KH"], g["KW"]
        check_loops(lc, KH + 1 + KH * (KW + 1 + KW * (I + 1)) + 2, KH * KW * I, f"{KH}x{KW} taps of {I}")
        lc.kernel("conv/direct.wgsl", [("x", x), ("f", f)] + ep.operands, [("out", out)],
                  g["NB"] * (g["O"] // to) * g["OH"] * g["OW"], workgroup=WORKGROUP, T=T, TO=to, OPG=opg,
                  I=g["C"] // g["G"], f_so=fs["o"], f_si=fs["i"], f_sh=fs["h"], f_sw=fs["w"], ep=ep, **g)
        return
    if variant == "depthwise":
        ep = _conv_epilogue(node, out, layout)
        w = _relayout(lc, f, flayout, "hwio")  # [KH, KW, 1, O] == [KH, KW, O]
        th, tw = _dw_strip(g, lc.tuning)
        m = g["O"] // g["C"]  # channel multiplier: output channel o reads input channel o // m
        c4 = -(-g["O"] // 4)
        vec = g["O"] % 4 == 0 and m == 1
        ohb, owb = -(-g["OH"] // th), -(-g["OW"] // tw)
        x64, nh = _dw_words(g, lc.tuning, lc.features, g["NB"] * ohb * owb * c4)
        d2s = node.attrs.get("store_d2s")  # store_depth_to_space: each unit of 4 NH channels to its pixel
        if d2s:
            assert vec and not node.attrs.get("pool_output"), "store_d2s_ok"
            if g["O"] // (d2s * d2s) % (4 * nh):
                nh = 1
            d2s = {"bs": d2s, "uq": g["O"] // (d2s * d2s) // (4 * nh)}
        n_inv = g["NB"] * ohb * owb * (c4 // nh)
        prm = make_constant(np.array([n_inv, c4, g["O"], owb, ohb, g["H"], g["W"], g["OH"], g["OW"], g["pt"],
                                      g["pl"], g["C"], th], dtype=np.uint32), "uint32")
        outs = [("out", out)]
        pooled = bool(node.attrs.get("pool_output"))
        if pooled:  # fuse_conv_pool: per-strip channel sums
            assert vec, "fuse_conv_pool checks pool_output_ok"
            part, reduce_pool = _pool_partials(lc, node, ohb * owb, g["C"])
            outs.append(("pool", part))
        w_ubo = uniform_copy(lc, w) if vec else None
        f_uniform = w_ubo is not None
        w = w_ubo if w_ubo is not None else w
        taps = _dw_taps(g)
        lc.kernel("conv/depthwise.wgsl", [("x", x), ("f", w)] + ep.operands + [("prm", prm)], outs,
                  n_inv, workgroup=DW_WORKGROUP, T=T, vec=vec, M=m, TW=tw, fdiv=n_inv < DW_FDIV_MAX,
                  A=max(t[2] for t in taps) + 1, taps=taps, jrows=sorted({t[1] for t in taps}), pool=pooled,
                  f_uniform=B_UNIFORM_FLOATS // 4 if f_uniform else 0,
                  seg=_segment(g, tw), ep=ep, x64=x64, NH=nh, d2s=d2s or None, in_relu=in_relu,
                  **{k: g[k] for k in ("KH", "KW", "sh", "sw", "dh", "dw")})
        if pooled:
            reduce_pool()
        return
    if variant == "block":
        w = _relayout(lc, f, flayout, "hwio")  # [KH, KW, C, O]: vec4s of output channels
        wconst, bconst = _block_literals(node, w, _block_wide(g))
        ep = _conv_epilogue(node, out, layout, bias=bconst is None)
        qconst = None
        if wconst is not None:
            ep, qconst = _baked_chan_operands(ep, g["O"])
        tile = _block_tile(g)
        assert tile is not None, "_conv_variant checks the block fits"
        th, tw = tile
        ohb, owb = -(-g["OH"] // th), -(-g["OW"] // tw)
        n_inv = g["NB"] * ohb * owb
        w_ubo = uniform_copy(lc, w) if wconst is None else None
        outs = [("out", out)]
        if node.attrs.get("pool_output"):  # fuse_pool_partials: a global pool reduces these
            assert node.attrs["pool_output"] == "partials"
            outs.append(("pool", _pool_partials(lc, node, -(-n_inv // PROJECT_WORKGROUP), g["O"])[0]))
        lc.kernel("conv/block.wgsl", [("x", x)] + ([("f", w_ubo or w)] if wconst is None else []) + ep.operands,
                  outs, n_inv, pool=len(outs) == 2, row_loop=BLOCK_ROW_LOOP and th > 1, xv=_block_xv(g, tw),
                  workgroup=PROJECT_WORKGROUP, T=T, TH=th, TW=tw, OHB=ohb, OWB=owb, n_inv=n_inv, O4=g["O"] // 4,
                  rows=_rows(g, th), seg=_segment(g, tw), ep=ep, wconst=wconst, bconst=bconst, qconst=qconst,
                  h2=T == "f16" and BLOCK_HALF_PAIRS, x64=_block_words(g, T, lc.tuning, lc.features),
                  xw=_block_input_words(_block_xv(g, tw), T, lc.tuning, lc.features),
                  pro=_affine_terms(affine, g["C"]) if affine else None,
                  f_uniform=B_UNIFORM_FLOATS // 4 if w_ubo is not None else 0,
                  **{k: g[k] for k in _BLOCK_GEOMETRY})
        return
    G, C, O = g["G"], g["C"], g["O"]
    I, OPG = C // G, O // G
    P = g["OH"] * g["OW"]
    if variant == "pointwise" and layout == "nchw":
        # out[n] = W[O, C] x X[n][C, H*W]: A is the filter (hwio -> [C, O], read transposed).
        wa = _relayout(lc, f, flayout, "oihw")
        chunks = k_chunks(C)
        if chunks is not None:  # too many channels for one invocation's loops: the matmul's split
            lower_split_k(lc, node, wa, x, _conv_epilogue(node, out, layout, chan_axis_known=False), chunks, M=O,
                          N=P, K=C, batch_shape=[g["NB"]], a_bst=[0], b_bst=[C * P], o_bst=[O * P], o_sp=P, a_rs=C,
                          a_ks=1, b_ks=P, b_ns=1, b_cols=P, vec=True)
            return
        tile_kernel(lc, wa, x, out, M=O, N=P, batch_shape=[g["NB"]], a_bst=[0], b_bst=[C * P], o_bst=[O * P],
                    a_rs=C, a_ks=1, a_vec=True, b_ks=P, b_ns=1, b_vec=True, o_P=O, o_sn=0, o_sp=P, o_so=1, KC=C,
                    epilogue=_conv_epilogue(node, out, layout, chan_axis_known=False),
                    row_epilogue=_conv_epilogue(node, out, layout))
        return
    ep = _conv_epilogue(node, out, layout)
    o4 = -(-O // 4) * 4
    pad = o4 if G == 1 and o4 != O and constant_array(f) is not None else None
    w = _relayout(lc, f, flayout, "hwio", pad_last_to=pad)
    wcols = pad or O
    if layout == "nhwc":
        o_P, o_sn, o_sp, o_so = P, P * O, O, 1
    else:
        o_P, o_sn, o_sp, o_so = P, O * P, 1, P
    if variant == "pointwise":
        M = g["NB"] * P
        chunks = k_chunks(C)
        if chunks is not None and layout == "nhwc" and scale is None and residual is None and pre is None and not node.attrs.get(
                "pool_output"):  # too many channels for one invocation's loops: the matmul's split
            lower_split_k(lc, node, x, w, ep, chunks, M=M, N=O, K=C, batch_shape=[], a_bst=[], b_bst=[], o_bst=[],
                         o_sp=O, a_rs=C, a_ks=1, b_ks=wcols, b_ns=1, b_cols=wcols, vec=True)
            return
        gi = given_operand(node, out, _epilogue.steps_of(node), M, O, C) if layout == "nhwc" else None
        if gi is not None:  # the tile kernel loads the residual itself, as vec4
            ep = _conv_epilogue(node, out, layout, given=gi)
        tile_kernel(lc, x, w, out, M=M, N=O, batch_shape=[], a_bst=[], b_bst=[], o_bst=[], a_rs=C, a_ks=1,
                    a_vec=True, b_ks=wcols, b_ns=1, b_vec=True, b_cols=wcols, o_P=M, o_sn=0, o_sp=O, o_so=1, KC=C,
                    epilogue=ep, a_scale=scale, a_add=residual, given=node.inputs[gi] if gi is not None else None,
                    a_add_up=(g["H"], g["W"]) if node.attrs.get("input_add_up2") else None, a_pre=pre,
                    pool=node.outputs[1] if node.attrs.get("pool_output") else None)
        return
    ist = {k: g[k] for k in ("in_sn", "in_sc", "in_sh", "in_sw")}
    if layout == "nchw" and I % 4 == 0 and NCHW_TO_NHWC:
        # Gather the patches from an NHWC copy of the input: vec4 loads along the channels
        # beat four strided scalar loads by more than the copy costs.
        x = _to_nhwc(lc, x)
        ist = input_strides(x.shape, "nhwc")
    conv = dict(P=P, OW=g["OW"], H=g["H"], W=g["W"], sh=g["sh"], sw=g["sw"], dh=g["dh"], dw=g["dw"], pt=g["pt"],
                pl=g["pl"], in_sn=ist["in_sn"], in_sh=ist["in_sh"], in_sw=ist["in_sw"])
    # one group: no batch dimension (a group stride of OPG columns would break B's vec4 alignment
    # when O is not a multiple of 4, leaving B to scalar loads)
    grouped = G > 1
    if pre is None and _split_channels(lc, node, x, w, ep, g, conv, ist, wcols, layout):
        return
    tile_kernel(lc, x, w, out, M=g["NB"] * P, N=OPG, batch_shape=[G] if grouped else [],
                a_bst=[I * ist["in_sc"]] if grouped else [], b_bst=[OPG] if grouped else [],
                o_bst=[OPG * o_so] if grouped else [], a_mode="im2col", a_ks=ist["in_sc"], a_vec=True, b_ks=wcols,
                b_ns=1, b_vec=True, b_cols=wcols if G == 1 else OPG, o_P=o_P, o_sn=o_sn, o_sp=o_sp, o_so=o_so, KH=g["KH"], KW=g["KW"],
                KC=I, conv=conv, epilogue=ep, group_cols=OPG, a_pre=pre)



def matvec_conv_plan(lc, node, g: dict | None = None, variant: str | None = None) -> tuple | None:
    """``(plan, window, M, K, O)`` where ``matmul/matvec.wgsl`` takes NHWC conv2d ``node`` on the
    device of ``lc`` (a lowering context, or :func:`webnn_gpu.ops.linalg.plan_context` of a
    rule's one), else None: one group, a constant filter, no pool output or upsampled residual,
    and its input a few rows of a product: a window that covers the whole input (one output pixel
    per image; a network's last layer on its 1x1, 2x2 or 3x3 features) or a 1x1 conv on a few
    pixels, i.e. the input read as ``[NB * OH * OW, KH * KW * C]`` rows (``window`` None); or any
    other window (strides, dilations, padding) over a few output pixels whose input channels are a
    multiple of 4, each pixel's window gathered as its row (``window``:
    :func:`webnn_gpu.ops.linalg.matvec_window`), where the filter holds at least
    :data:`~webnn_gpu.ops.linalg.MATVEC_MIN_KN_WINDOW` values or ``WEBNN_GPU_FORCE_MATMUL=matvec``
    (not with ``WEBNN_GPU_FORCE_MATMUL_MATVEC_WINDOW=off``); ``plan`` from
    :func:`webnn_gpu.ops.linalg.matvec_plan`, which decides by size and device. The lowering
    (:func:`_matvec_conv`) and the compiler's ``fuse_siblings`` both ask this."""
    g = _geometry(node) if g is None else g
    variant = _conv_variant(g, node.attrs["input_layout"], lc.tuning) if variant is None else variant
    if (variant not in ("gemm", "pointwise") or _env.force("conv") or node.attrs["input_layout"] != "nhwc"
            or g["G"] != 1 or node.attrs.get("pool_output") or node.attrs.get("input_add_up2")
            or constant_array(node.inputs[1]) is None):
        return None
    pointwise = (g["KH"] == g["KW"] == 1 and g["sh"] == g["sw"] == 1 and g["pt"] == g["pl"] == 0
                 and (g["OH"], g["OW"]) == (g["H"], g["W"]))
    whole = (g["OH"] == g["OW"] == 1 and (g["KH"], g["KW"]) == (g["H"], g["W"]) and g["pt"] == g["pl"] == 0
             and (g["dh"] == 1 or g["KH"] == 1) and (g["dw"] == 1 or g["KW"] == 1))
    window = None
    if not (pointwise or whole) and _env.force_choice("matmul_matvec_window", ("off",)) != "off":
        window = matvec_window(g)
    if not (pointwise or whole or window):
        return None
    M, K, O = g["NB"] * g["OH"] * g["OW"], g["KH"] * g["KW"] * g["C"], g["O"]
    if window and K * O < MATVEC_MIN_KN_WINDOW and _env.force("matmul") != "matvec":
        return None  # gathered rows pay on a large B only (1 x 576 -> 96, 2 x 512 -> 96: 0.95-1.10 of the tile)
    plan = matvec_plan(lc, M, O, K)
    return None if plan is None else (plan, window, M, K, O)


def _matvec_conv(lc, node, g: dict, variant: str) -> bool:
    """Lower an NHWC conv2d as one ``matmul/matvec.wgsl`` launch
    (:func:`webnn_gpu.ops.linalg.matvec_kernel`) where :func:`matvec_conv_plan` takes it; True
    when it did."""
    taken = matvec_conv_plan(lc, node, g, variant)
    if taken is None:
        return False
    plan, window, M, K, O = taken
    data = constant_array(node.inputs[1])
    assert data is not None  # matvec_conv_plan checked it
    perm = [node.attrs["filter_layout"].index(ch) for ch in "hwio"]
    b = np.transpose(data, perm).reshape(K, O)
    out = node.outputs[0]
    matvec_kernel(lc, node.inputs[0], b, out, M=M, N=O, K=K, a_rs=K, o_rs=O,
                  epilogue=_conv_epilogue(node, out, "nhwc"), plan=plan, window=window)
    return True


def _channel_chunks(I: int, KH: int, KW: int) -> int | None:
    """The fewest chunks of an implicit GEMM's ``I`` input channels (each a multiple of 4
    channels, all alike) whose tile launches stay within llvmpipe's loop budget
    (:func:`webnn_gpu.ops.linalg.tile_loop_iterations`), or None where none does."""
    for c in range(2, I // 4 + 1):
        if I % c == 0 and I // c % 4 == 0 and tile_loop_iterations(I // c, KH, KW) <= LOOP_BUDGET:
            return c
    return None


def _split_channels(lc, node, x, w, ep, g, conv, ist, wcols: int, layout: str) -> bool:
    """Lower an implicit-GEMM conv2d whose reduction (taps x input channels) is too long for one
    invocation's loops on llvmpipe as the matmul's split (:func:`webnn_gpu.ops.linalg.k_chunks`):
    the tile kernel over chunks of the input channels (batch items; the constant filter re-laid
    out chunk by chunk), then ``matmul/ksum.wgsl`` sums them and applies the epilogue. Only
    NHWC, one group, a constant filter and channels that split into equal multiples of 4; returns
    whether it did (else the tile kernel raises NotSupportedError)."""
    KH, KW, I, O = g["KH"], g["KW"], g["C"], g["O"]
    if tile_loop_iterations(I, KH, KW) <= LOOP_BUDGET or layout != "nhwc" or g["G"] != 1:
        return False
    wdata = constant_array(w)
    c = _channel_chunks(I, KH, KW)
    if wdata is None or c is None:
        return False
    kc = I // c
    wc = make_constant(np.ascontiguousarray(wdata.reshape(KH, KW, c, kc, wcols).transpose(2, 0, 1, 3, 4)),
                       w.data_type)
    lower_split_k(lc, node, x, wc, ep, (c, kc), M=g["NB"] * g["OH"] * g["OW"], N=O, K=I, batch_shape=[], a_bst=[],
                  b_bst=[], o_bst=[], o_sp=O, a_rs=0, a_ks=ist["in_sc"], b_ks=wcols, b_ns=1, b_cols=wcols, vec=True,
                  conv=conv, KH=KH, KW=KW)
    return True

# ---------------------------------------------------------------- conv_transpose2d
# IDL: MLOperand convTranspose2d(MLOperand input, MLOperand filter,
# IDL:                           optional MLConvTranspose2dOptions options = {});
@builder_method
def conv_transpose2d(self: MLGraphBuilder, input: MLOperand, filter: MLOperand, *, padding=None, strides=None,
                     dilations=None, output_padding=None, output_sizes=None, groups: int = 1,
                     input_layout: str = "nchw", filter_layout: str = "iohw", bias: MLOperand | None = None,
                     label: str = "", **kwargs) -> MLOperand:
    """2-D transposed convolution (the gradient of conv2d with respect to its input).

    Spec: https://www.w3.org/TR/webnn/#api-mlgraphbuilder-convtranspose2d

    Arguments:
        input (MLOperand): float32 or float16, ``[N, C, H, W]`` (nchw) or ``[N, H, W, C]`` (nhwc).
        filter (MLOperand): same data type; ``iohw`` (default), ``hwoi`` or ``ohwi`` with
            ``i = C`` and ``o = output channels / groups``.
        padding (list[int]): ``[begin_h, end_h, begin_w, end_w]`` removed from the output.
        strides (list[int]): ``[stride_h, stride_w]``, each >= 1.
        dilations (list[int]): ``[dilation_h, dilation_w]``, each >= 1.
        output_padding (list[int]): ``[h, w]`` added to the output size, each < its stride
            (ignored when ``output_sizes`` is given).
        output_sizes (list[int] | None): ``[OH, OW]``, each in ``[computed, computed + stride)``.
        groups (int): >= 1, dividing the input channels.
        input_layout (str): ``"nchw"`` (default) or ``"nhwc"``.
        filter_layout (str): ``"iohw"`` (default), ``"hwoi"`` or ``"ohwi"``.
        bias (MLOperand | None): ``[O]``, same data type.
        label (str): a name for errors and GPU objects.

    Returns:
        MLOperand: ``OH = (H - 1) * stride_h + (KH - 1) * dilation_h + 1 - begin_h - end_h
        + output_padding_h`` (or ``output_sizes``), in the input layout.

    Raises:
        MLTypeError: wrong ranks or data types; option lists of the wrong length; zero
            strides, dilations or groups; ``output_padding`` >= stride; ``output_sizes``
            outside their valid range; filter input channels != C; input channels not
            divisible by groups; a bias not ``[O]``; a non-positive output size; unknown
            layouts or options.
    """
    op = "conv_transpose2d"
    V.check_kwargs(op, label, kwargs)
    self._check_usable(op, label)
    vi, vf, vb = _operands(self, op, label, input, filter, bias)
    padding, strides_, dilations, groups = _window_options(op, label, padding, strides, dilations, groups)
    output_padding = V.int_list(op, label, "output_padding", [0, 0] if output_padding is None else output_padding,
                                length=2, lo=0, hi=V.MAX_DIM)
    if output_sizes is not None:
        output_sizes = V.int_list(op, label, "output_sizes", output_sizes, length=2, lo=1, hi=V.MAX_DIM)
    else:
        for d, axis in enumerate(("height", "width")):
            if output_padding[d] >= strides_[d]:
                V.fail(op, label, "output_padding", f"values smaller than the strides {strides_} ({axis})",
                       output_padding)
    input_layout = _enum(op, label, "input_layout", input_layout, INPUT_LAYOUTS)
    filter_layout = _enum(op, label, "filter_layout", filter_layout, CONV_TRANSPOSE2D_FILTER_LAYOUTS)
    n, c, h, w = input_dims(vi.shape, input_layout)
    fd = filter_dims(vf.shape, filter_layout)
    if fd["i"] != c:
        V.fail(op, label, "filter", f"{c} input channels (the input's) in its {filter_layout} shape",
               Shown(f"shape {list(vf.shape)} with {fd['i']} input channels"))
    if c % groups:
        V.fail(op, label, "groups", f"a divisor of the input channels ({c})", groups)
    o = fd["o"] * groups
    if o > V.MAX_DIM:
        V.fail(op, label, "groups", f"output channels (filter {fd['o']} x groups) <= {V.MAX_DIM}", groups)
    _check_bias(op, label, vb, vi, o)
    sizes = []
    for d, (size, k, axis) in enumerate(((h, fd["h"], "height"), (w, fd["w"], "width"))):
        eff = _effective(op, label, k, dilations[d], axis)
        calc = (size - 1) * strides_[d] + eff - padding[2 * d] - padding[2 * d + 1]
        if output_sizes is not None:
            if not calc <= output_sizes[d] < calc + strides_[d]:
                V.fail(op, label, "output_sizes", f"an output {axis} in [{calc}, {calc + strides_[d]}) "
                       f"(computed size .. computed size + stride)", output_sizes)
            out = output_sizes[d]
        else:
            out = calc + output_padding[d]
        if not 1 <= out <= V.MAX_DIM:
            V.fail(op, label, "padding", f"a positive output {axis} ((H - 1) * stride + effective filter - "
                   f"padding + output_padding)", out)
        sizes.append(out)
    shape = (n, o, *sizes) if input_layout == "nchw" else (n, *sizes, o)
    attrs = {"padding": padding, "strides": strides_, "dilations": dilations, "groups": groups,
             "input_layout": input_layout, "filter_layout": filter_layout, "output_padding": output_padding,
             "output_sizes": output_sizes}
    inputs = [vi, vf] + ([vb] if vb is not None else [])
    return self._emit1(op, inputs, vi.data_type, shape, attrs, label=label)


support("conv_transpose2d", {"input": (FLOATS, (4, 4)), "filter": (FLOATS, (4, 4)), "bias": (FLOATS, (1, 1))},
        (FLOATS, (4, 4)))


@lowering("conv_transpose2d")
def lower_conv_transpose2d(node, lc) -> None:
    """conv_transpose2d: the tiled kernel when the taps tile the output, else the gather."""
    x, f = node.inputs[0], node.inputs[1]
    out = node.outputs[0]
    layout = node.attrs["input_layout"]
    g = _geometry(node)
    ep = _conv_epilogue(node, out, layout)
    opg = g["O"] // g["G"]
    I = g["C"] // g["G"]
    to = 4 if opg % 4 == 0 else 1
    flayout = node.attrs["filter_layout"]
    vec = layout == "nhwc" and I % 4 == 0
    if vec and constant_array(f) is not None:
        f, flayout = _relayout(lc, f, flayout, "hwoi"), "hwoi"  # input channels innermost: vec4 loads
    vec = vec and flayout == "hwoi"
    fs = filter_strides(f.shape, flayout)
    a = node.attrs
    tiled = (g["KH"] == g["sh"] and g["KW"] == g["sw"] and g["dh"] == g["dw"] == 1 and g["KH"] * g["KW"] <= 16
             and g["OH"] == g["H"] * g["sh"] - a["padding"][0] - a["padding"][1]
             and g["OW"] == g["W"] * g["sw"] - a["padding"][2] - a["padding"][3])
    forced = _env.force("conv_transpose")
    if forced and forced not in ("direct", "tiled"):
        raise ValueError(f"WEBNN_GPU_FORCE_CONV_TRANSPOSE={forced!r}: expected direct or tiled")
    ci_it = -(-I // 4) if vec else I
    if tiled and forced != "direct":
        check_loops(lc, ci_it + 8, I, f"{I} input channels")
        wconst = None
        data = constant_array(f)
        if (data is not None and g["G"] == 1 and g["O"] <= 4 and data.size <= TRANSPOSE_BAKE_MAX
                and forced != "tiled"):
            # [kh][kw][t][ci] literals: every output channel in one invocation, no filter loads.
            to = g["O"]
            hwoi = np.transpose(data, [flayout.index(ch) for ch in "hwoi"]).astype(np.float32)
            wconst = [[[[literal(v, "float32") for v in hwoi[kh, kw, t]] for t in range(to)]
                       for kw in range(g["KW"])] for kh in range(g["KH"])]
        # loaded filter: one output-channel block and batch per workgroup (uniform filter loads)
        grid = (-(-g["H"] * g["W"] // WORKGROUP), g["O"] // to, g["NB"])
        by_group = wconst is None and max(grid) <= int(lc.limits.get("max-compute-workgroups-per-dimension", 65535))
        lc.kernel("conv/transpose_tiled.wgsl", [("x", x)] + ([] if wconst else [("f", f)]) + ep.operands, [("out", out)],
                  g["NB"] * (g["O"] // to) * g["H"] * g["W"], groups=grid if by_group else None, workgroup=WORKGROUP,
                  T=wgsl_type(out.data_type), TO=to, OPG=opg, I=I, vec=vec, f_si=fs["i"], f_so=fs["o"], f_sh=fs["h"],
                  f_sw=fs["w"], ep=ep, wconst=wconst, by_group=by_group, **g)
        return
    kh_it = -(-g["KH"] // g["sh"]) if g["dh"] == 1 else g["KH"]
    kw_it = -(-g["KW"] // g["sw"]) if g["dw"] == 1 else g["KW"]
    check_loops(lc, kh_it + 1 + kh_it * (kw_it + 1 + kw_it * (ci_it + 1)) + 2, kh_it * kw_it * I,
                f"{kh_it}x{kw_it} taps of {I} input channels")
    lc.kernel("conv/transpose.wgsl", [("x", x), ("f", f)] + ep.operands, [("out", out)],
              g["NB"] * (g["O"] // to) * g["OH"] * g["OW"], workgroup=WORKGROUP, T=wgsl_type(out.data_type), TO=to,
              OPG=opg, I=I, vec=vec, f_si=fs["i"], f_so=fs["o"], f_sh=fs["h"], f_sw=fs["w"], ep=ep, **g)
