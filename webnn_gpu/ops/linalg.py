"""Linear algebra: matmul and gemm, and the register-blocked tile kernel conv2d shares.

Spec: https://www.w3.org/TR/webnn/#api-mlgraphbuilder-matmul,
https://www.w3.org/TR/webnn/#api-mlgraphbuilder-gemm

Kernels (``shaders/matmul/``):

* ``tile.wgsl``: each invocation computes a TM x 4*TN4 tile of outputs in f32 vec4
  accumulators, reading vec4 straight from storage when the operand is aligned (on lavapipe
  this beats workgroup-memory tiling; DESIGN.md section 6). The same kernel runs conv2d as an
  implicit GEMM (:func:`tile_kernel`). Constant operands are re-laid out at build time
  (transposed for gemm's ``b_transpose``, columns padded to a multiple of 4) so their loads
  are vec4. Dense, unbatched, aligned products (the pointwise convs of a model, most
  matmuls) read M, N, K and their strides from a small parameter buffer (``dyn``), so they
  share one pipeline per tile shape and epilogue instead of compiling one per size (cold
  start; no measurable change in kernel time on lavapipe). On lavapipe before Mesa 24 it runs
  as its subgroup variant (``sg``, :func:`choose_tile_sg`): a subgroup's invocations share one
  column tile and split its loads of B and of the per-channel epilogue operands among their
  lanes (``subgroupBroadcast``), 1.1-2x less CPU time on conv layers. A constant B of a launch
  with several column tiles is stored as one contiguous panel per column tile
  (:func:`panel_pack`): products with few output rows are bound by B's loads, which then stream
  (ResNet50's last stage 2.2x less CPU time). An implicit GEMM with few output channels loads
  each input column once per filter row and shares it between the window's taps
  (:func:`window_rows`). A constant B of 1 to 3 columns is stored transposed and each column
  is one ``dot`` per k step (:func:`dot_columns`) instead of a 4-column vec4 block.
* ``naive.wgsl``: one output per invocation; for tiny products and as a cross-check.
* ``small.wgsl``: one output per invocation with every size and stride read from a u32
  parameter buffer, so a single pipeline serves all small products (at most
  :data:`SMALL_MAX_OUTPUTS` outputs and fewer than :data:`SMALL_MAX_MACS` multiply-adds, one
  batch dimension, dense A; :func:`small_product`) of a graph: the
  squeeze-and-excitation 1x1 convs of a MobileNet-style model no longer compile one tile
  kernel per shape (cold start); they are dispatch-bound either way.

``WEBNN_GPU_FORCE_MATMUL`` = ``naive`` | ``tile`` | ``tile_scalar`` (tile with scalar loads) |
``small`` forces a variant of matmul and gemm (tests use it to cover each one; ``small``
falls back to the tile kernel where it does not apply, ``tile`` and ``tile_scalar`` turn it off).

Both kernels apply the fused epilogue of ``node.attrs["epilogue"]``
(:mod:`webnn_gpu.ops._epilogue`): the column index is the channel passed to bias-like steps.
float16 operands are read as f16 and accumulated in f32.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

from .. import _env
from .. import _validate as V
from .._dtypes import FLOAT_TYPES as FLOATS
from .._kernels import strides
from .._lower import workgroup_bytes
from ..builder import MLGraphBuilder, MLOperand, Value
from ..errors import NotSupportedError
from . import _epilogue
from .recurrent import LOOP_LIMIT
from ._registry import builder_method, lowering, support

#: Invocations per workgroup of the tile kernels ...
TILE_WORKGROUP = 64
#: ... and of those with fewer than 4 such workgroups of invocations: lavapipe runs each
#: workgroup on one thread, so a product of one or two workgroups would leave cores idle.
TILE_SMALL_WORKGROUP = 16
#: Aim for at least this many invocations (one workgroup) before growing tiles: smaller
#: products are dispatch-bound, and bigger tiles load each input fewer times.
MIN_INVOCATIONS = 64
#: Largest register tile (rows, vec4 column blocks) per invocation, per tuning profile
#: (:func:`webnn_gpu._kernels.tuning_profile`).
TILE_MAX = {"lane-loop": (16, 6), "default": (8, 3)}
#: ... and of products with at least DEEP_K multiply-adds per output: there the loads of the
#: reduction loop are nearly all the time, and a 16 x 32 tile loads 0.094 values per
#: multiply-add against 16 x 24's 0.104 (matmul 1024^3 about 13% faster on Mesa 22.3, CPU
#: time; it compiles in twice the time of a 16 x 24 tile, which shallow layers would not repay).
TILE_MAX_DEEP = {"lane-loop": (16, 8)}
DEEP_K = 512
#: "n": consecutive invocations take consecutive column tiles; "m": consecutive row tiles.
TILE_ORDER = "m"
#: Dense, unbatched, aligned products read their sizes from a parameter buffer
#: (``dyn`` in ``matmul/tile.wgsl``): one pipeline per tile shape and epilogue, not per size.
TILE_DYNAMIC = True
#: On the "lane-loop" profile with ``shader-int64``, the tile kernel moves A's vec4s, its
#: output's and the given operand's as u64 words (the same bits; ``x64``, :func:`tile_words`):
#: every storage access on Mesa 22 is a loop over the lanes and the access's components.
TILE_X64 = True
#: ... and then the operand added to A as it is loaded (``a_add``) as well (:func:`tile_res_words`)
TILE_RES_WORDS = True
#: Every tile of more than one row whose reduction has at least :data:`TILE_EP_LOOP_MIN_K` terms
#: (and whose epilogue is not applied per row, ``ep_rows``) applies its epilogue and stores in a
#: loop over its rows (``ep_loop`` in ``matmul/tile.wgsl``), not only epilogues that load per
#: output (:func:`reads_per_output`): each inlined vec4 store is a loop over the SIMD lanes in
#: LLVM's code, so the TM x TN4 unrolled stores were about half of a tile pipeline's cold compile
#: and a third of its creation (docs/performance.md, "Build time"). False (for measurements:
#: ``WEBNN_GPU_FORCE_TILE_EP_LOOP=off``, read once at import): epilogues that load only per
#: channel are inlined.
TILE_EP_LOOP = _env.force("tile_ep_loop") != "off"
#: The subgroup variant's k step takes one column block at a time (``cols_first`` in
#: ``matmul/tile.wgsl``): the lanes' loads of B and the rows of A first, then per column block its
#: B vectors shared and its rows' accumulators updated, instead of all 4 x TN4 B vectors shared
#: before the rows (then live, and spilled, across every row). Taken for tiles of at least
#: :data:`COLS_FIRST_MIN_ROWS` rows and at most :data:`COLS_FIRST_MAX_BLOCKS` vec4 accumulators
#: (TM x TN4; one-row tiles share each vector of B for one row either way, 1.00-1.03 measured):
#: on Mesa 22.3, kernel timestamps
#: of one-layer graphs with both orders in one process, alternating, two runs with the order of
#: the builds swapped, 5 x 48, 7 x 48, 8 x 32, 8 x 44 and 5 x 28 tiles took 0.89-0.95 of the
#: time, matmul 1024^3 (8 x 32) 0.85, while 8 x 48 tiles (96) took 1.02-1.04
#: (docs/linalg.md, "The subgroup variant"). ``WEBNN_GPU_FORCE_TILE_COLS=first|rows`` (read
#: when a layer is lowered) forces one order for every tile.
TILE_COLS_FIRST = True
#: Dynamic tile kernels (``dyn``) read a last clamp of their epilogue from the parameter buffer
#: (``clamp_at`` in ``matmul/tile.wgsl``, :func:`clamp_param`): two layers whose kernels differ
#: only in whether they clamp share one pipeline. ``WEBNN_GPU_FORCE_TILE_CLAMP=text`` (read when a
#: layer is lowered) keeps the clamp in the epilogue's text.
TILE_CLAMP_PARAM = True
COLS_FIRST_MIN_ROWS = 2
COLS_FIRST_MAX_BLOCKS = 88
#: A subgroup tile of more than :data:`COLS_FIRST_MAX_BLOCKS` accumulators (8 x 48, which the
#: column-block order did not speed up) is cut to fit that order (:func:`choose_tile_sg`): to the
#: rows that fit its column blocks (7 x 48) where those pad at most :data:`SG_FIT_PAD` times the
#: rows of the taller tile, else to the widest column blocks that fit its rows (8 x 36, 8 x 44).
#: ``WEBNN_GPU_FORCE_TILE_SG_FIT=off|short|narrow`` (read when a layer is lowered): keep the
#: tile, always the fewer rows, always the fewer columns.
SG_FIT = True
SG_FIT_PAD = 1.03
#: ... for reductions of at least this length: the loop moves the tile's other rows up after each
#: row, (TM - 1) x TN4 vec4 moves, which cost a pointwise conv of K = 8 (128 x 128 x 8 -> 48,
#: bias, relu6) 4-8% of its CPU time on Mesa 22.3, and nothing measurable at K = 16, 24 and 75
#: (96 x 96 x 16 -> 64, 64 x 64 x 24 -> 144, a 5 x 5 stride 2 first layer 3 -> 32).
TILE_EP_LOOP_MIN_K = 16
#: ... but not where lavapipe's front end (Mesa 22.3) unrolls that loop itself: a loop of constant
#: count that naga bounds is unrolled one iteration per two of NIR's optimisation rounds, so a
#: small tile's row loop cost 13-16 rounds to end as the written-out rows (docs/performance.md,
#: "Warm builds"). :func:`rows_written_out` says which tiles write their rows out instead; the
#: two limits are in units of a vec4 store with the vector epilogue helper (one with four calls
#: of the per-value epilogue counts 2), fitted on the zoo's 87 looped tile pipelines (each made
#: with its loop and written out): those NIR unrolled measured 8-36 units with static shapes
#: and 16 with ``dyn`` (sibling splits aside, which the rule leaves out), those it kept 48 and
#: more, and 24 and more. The mlp kernel applies the same limits to a product of one column
#: tile (measured: pose_landmark_full's 4 x 8 tile). ``WEBNN_GPU_FORCE_TILE_ROWS_OUT=off`` (read
#: when a layer is lowered) keeps the loops.
TILE_ROWS_OUT_UNITS = 36
TILE_ROWS_OUT_UNITS_DYN = 16
#: Constant B matrices of float32 up to this many values are read from a uniform buffer
#: (the "lane-loop" tuning profile; 64 KiB, the WebGPU default maxUniformBufferBindingSize).
B_UNIFORM_FLOATS = 16384
#: ``WEBNN_GPU_FORCE_MATMUL_B=storage`` keeps B in a storage buffer (for measurements).
B_UNIFORM_OFF = _env.force("matmul_b") == "storage"
#: Implicit-GEMM tiles of at most this many vec4 column blocks share their input column loads
#: between the window's taps (:func:`window_rows`): with more, the unrolled taps' accumulators
#: and B vectors outgrow the registers (3x3 stride 1, 16 -> 32 channels over 64 x 64 pixels,
#: 8 x 32 tiles: 1.7x the CPU time; 8 x 16 tiles: 0.90; 8 x 4: 0.80, Mesa 22.3) ...
WINDOW_MAX_TN4 = 4
#: ... and at most this many unrolled KW x TM x TN4 (LLVM's compile time grows with the code).
WINDOW_MAX_UNROLL = 160
#: ... and accumulate each output vec4 over all KW taps of a filter row in one expression (the
#: taps' B vectors loaded first), not tap by tap: the accumulators are loaded and stored KW times
#: fewer (spilled on wide tiles; 3x3 and 5x5 windows to 2-16 channels: 0.78-0.94 of the CPU time).
WINDOW_FUSED = True
#: Constant B matrices of launches with more than one column tile are re-laid out as one
#: contiguous panel per column tile (:func:`panel_pack`); ``WEBNN_GPU_FORCE_MATMUL_PANEL=off``
#: (read at build time) keeps the row-major layout (for measurements).
B_PANEL = True
#: Products of at most this many columns with a constant B take the tile kernel's ``bdot`` mode
#: (:func:`dot_columns`): a dot product per column instead of a 4-column vec4 block.
DOT_COLUMNS = True
DOT_MAX_N = 3
#: Products with at most this many outputs (and one batch dimension at most) run
#: ``matmul/small.wgsl``, whose sizes come from a parameter buffer: one pipeline for every
#: such shape (cold start) instead of one tile kernel per shape; they are dispatch-bound anyway.
SMALL_MAX_OUTPUTS = 512
#: ... and at most this many multiply-adds per output.
SMALL_MAX_K = 1024
#: ... and fewer than this many multiply-adds in all: past it the tile kernel's vec4 loads and
#: register tile win even on a few outputs (1 x 512 -> 216: 557 us of CPU time in
#: ``matmul/small.wgsl``, 253 us in the tile kernel; 2 x 1024 -> 128: 817 / 290 us; Mesa 22.3).
SMALL_MAX_MACS = 16384
#: The subgroup variant of the tile kernel (``sg`` in ``matmul/tile.wgsl``; the "lane-loop"
#: profile with the ``subgroup`` feature): the invocations of a subgroup take consecutive row
#: tiles of one column tile, so they need the same vectors of B; each lane loads 1 / lanes of
#: them and the others read them with ``subgroupBroadcast`` (a register extract on llvmpipe,
#: where every storage load is a loop over the SIMD lanes). Largest tile: rows ...
SG_TILE_M = 8
#: ... and vec4 column blocks (64 columns for deep products measured the same and took twice
#: as long to compile: 11 s for 7 x 64 on a loaded machine).
SG_TILE_N4 = 12
#: What a row tile of the subgroup variant costs per k step besides its rows, in rows: B's loads
#: and broadcasts, shared by the tile's rows. :func:`choose_tile_sg` weighs a tile of TM rows as
#: ``padded rows * (TM + SG_TILE_COST) / TM``. Fitted to CPU time per dispatch on Mesa 22.3
#: (81 x 728 -> 728 at 1, 2, 4, 6 and 8 rows: 7.35, 5.58, 4.31, 4.17, 4.94 ms).
SG_TILE_COST = 1.36
#: Column tiles need not divide the column blocks (:func:`ragged_cols`): a wider tile's last one
#: is ragged where the estimate says fewer re-reads of A pay for its padding columns.
RAGGED_COLS = True
#: ... A's re-read per column tile in column blocks of work, fitted to kernel timestamps on Mesa
#: 22.3 (benchmarks/tile_cols.py, both forms alternating, 15 rounds; docs/linalg.md): the
#: subgroup variant (a lane loads its rows of A alone, B's loads are shared: 2.0) ...
RAGGED_A_COST_SG = 2.0
#: ... the plain kernel (each invocation loads its 4 x TN4 vectors of B itself: 0.7), on the tuning
#: profiles it was measured on (other adapters keep the divisor) ...
RAGGED_A_COST = 0.7
RAGGED_TUNINGS = ("lane-loop",)
#: ... an implicit GEMM's tile that keeps its window's shared input columns (:func:`window_rows`;
#: at most :data:`WINDOW_MAX_TN4` blocks: 1.0) ...
RAGGED_A_COST_WIN = 1.0
#: ... and the estimate's ratio at or below which the ragged tile is taken.
RAGGED_GAIN = 0.9
#: Subgroup-variant launches below this many workgroups of :data:`TILE_WORKGROUP` use workgroups
#: of one subgroup (finer load balance over the threads, one size for sharing pipelines).
SG_WORKGROUPS = 16
#: The threads a launch's workgroups are balanced over (lavapipe runs each workgroup on one of its
#: threads, one per core; the 2-core machine the engine is tuned on): :func:`_tile_workgroup`.
TILE_THREADS = 2
#: A tile launch takes a larger workgroup size that an earlier launch of the same kernel in its
#: graph uses (one pipeline fewer to compile) only where that still gives this many workgroups.
TWIN_WORKGROUPS = 4


# ---------------------------------------------------------------- helpers shared with conv
class Shown(str):
    """Text shown as-is (not quoted) as the 'given' part of an error message."""

    def __repr__(self) -> str:
        return str(self)


def constant_array(v: Value) -> np.ndarray | None:
    """The data of a constant Value as an ndarray of its shape (None when not a host constant)."""
    if v is None or v.kind != "constant" or v.data is None:
        return None
    return v.data.reshape(v.shape)


def make_constant(data: np.ndarray, data_type: str) -> Value:
    """A new constant Value (uploaded with the graph) holding ``data``."""
    arr = np.ascontiguousarray(data)
    return Value(data_type, tuple(arr.shape), "constant", data=arr.reshape(-1).copy())


def wgsl_type(data_type: str) -> str:
    """WGSL storage scalar of a float data type."""
    return "f16" if data_type == "float16" else "f32"


#: Texels per row of a constant stored as a texture (:func:`texture_copy`): a power of two, so a
#: kernel finds texel i at (i & (width - 1), i >> log2(width)).
TEXTURE_WIDTH = 4096


@dataclass(eq=False, repr=False)
class TextureConstant(Value):
    """A constant Value the graph uploads as a 2-D ``rgba32float`` texture of
    ``texture_width`` texels per row (4 floats each, row-major, zero past the data) instead of
    a buffer; a kernel binds it as ``texture_2d<f32>`` and reads it with ``textureLoad``."""

    texture_width: int = 0


#: The values of ``WEBNN_GPU_FORCE_MATMUL_MATVEC_B`` (:func:`matvec_words`, :func:`texture_fits`).
MATVEC_B_FORMS = ("words", "f32", "texture", "storage")


def texture_fits(lc, floats: int) -> bool:
    """Whether :func:`texture_copy` makes a texture of a constant of ``floats`` values here."""
    rows = -(-floats // (4 * TEXTURE_WIDTH))
    return (lc.tuning == "lane-loop" and not B_UNIFORM_OFF and _env.force_choice("matmul_matvec_b", MATVEC_B_FORMS) != "storage"
            and rows <= int(lc.limits.get("max-texture-dimension-2d", 8192)))


def texture_copy(lc, v: Value) -> TextureConstant | None:
    """A copy of constant ``v`` (a multiple of 4 values) for a ``texture_2d<f32>`` binding, or
    None where it cannot be one: not the "lane-loop" profile (lavapipe before Mesa 24: an
    ``rgba32float`` ``textureLoad`` at a per-lane address is a gather without the per-lane
    branches of a storage load, 0.7-0.8 of a vec4 storage load's time; measured nowhere else),
    ``WEBNN_GPU_FORCE_MATMUL_B=storage``, not a host constant, or more rows than the device's
    maxTextureDimension2D (:func:`texture_fits`; ``WEBNN_GPU_FORCE_MATMUL_MATVEC_B=storage`` for
    measurements). float16 values are stored as the float32 values they are."""
    data = constant_array(v)
    if data is None or data.size % 4 or not texture_fits(lc, data.size):
        return None
    texels = data.size // 4
    width = min(TEXTURE_WIDTH, 1 << max(0, (texels - 1).bit_length()))
    rows = -(-texels // width)
    flat = np.zeros(rows * width * 4, np.float32)
    flat[:data.size] = data.reshape(-1)
    return TextureConstant("float32", (rows, width, 4), "constant", data=flat, texture_width=width)


def uniform_copy(lc, v: Value) -> Value | None:
    """A copy of constant ``v`` for a uniform-buffer binding (``array<vec4<f32>,
    B_UNIFORM_FLOATS / 4>``, zero-padded to that declared size), or None where a storage
    buffer serves better: on the "lane-loop" profile (lavapipe before Mesa 24) uniform loads
    are gathers without the per-lane branches of storage loads, so the tile kernel's B and the
    depthwise filter use it for float32 constants of up to 64 KiB."""
    data = constant_array(v)
    if (lc.tuning != "lane-loop" or B_UNIFORM_OFF or data is None or v.data_type != "float32"
            or data.size > B_UNIFORM_FLOATS):
        return None
    padded = np.zeros(B_UNIFORM_FLOATS, np.float32)
    padded[:data.size] = data.reshape(-1)
    return make_constant(padded, "float32")


def choose_tile(M: int, N: int, batches: int, tuning: str = "default", K: int = 0,
                window: bool = False) -> tuple[int, int]:
    """(TM, TN4) for an M x N output per batch item with K multiply-adds per output.

    The column block TN4 divides ceil(N / 4) (no half-empty column tiles; when it is all of
    N, every invocation reads the same B and the driver's loads are uniform), at most the
    profile's :data:`TILE_MAX` columns (:data:`TILE_MAX_DEEP` when K >= :data:`DEEP_K`), or
    all of N (and up to 16 rows) when N <= 16; TM is at most its rows. Among those, the largest tile
    that still gives :data:`MIN_INVOCATIONS` invocations; products too small for that take
    the tile with the most invocations (down to 2 x 1). Measured on lavapipe over the selfie
    model's pointwise convolutions (docs/performance.md): on N = 24, 72 or 128-deep products
    this is up to 1.45x faster than a fixed 16 x 4 tile cut down for invocations.

    On the tuning profiles of :data:`RAGGED_TUNINGS`, a wider column tile whose last one is ragged
    replaces the divisor where it pays (:func:`ragged_cols`, :data:`RAGGED_A_COST`; with ``window``, an implicit GEMM's tile that
    keeps the window's shared input columns, :func:`window_rows`: at most
    :data:`WINDOW_MAX_TN4` blocks, :data:`RAGGED_A_COST_WIN`).
    """
    n4 = -(-N // 4)
    max_m, max_n4 = TILE_MAX.get(tuning, TILE_MAX["default"])
    if K >= DEEP_K:
        max_m, max_n4 = TILE_MAX_DEEP.get(tuning, (max_m, max_n4))

    def count(tm_, tn4_):
        return batches * -(-M // tm_) * -(-n4 // tn4_)

    # one column tile when N fits in four vec4s (every invocation reads the same B)
    widest = n4 if n4 <= 4 else min(max_n4, n4)
    divisors = [d for d in range(widest, 0, -1) if n4 % d == 0]
    if n4 <= 4:  # one column tile: B is the same for every invocation, taller tiles pay
        max_m = max(max_m, 16)
    rows = sorted({min(r, M) for r in (max_m, 12, 8) if r <= max_m}, reverse=True)
    tiles = sorted(((tm, tn4) for tn4 in divisors for tm in rows),
                   key=lambda t: (t[0] * t[1], t[0]), reverse=True)
    for tm, tn4 in tiles:
        if count(tm, tn4) >= MIN_INVOCATIONS:
            break
    else:
        tm, tn4 = tiles[-1]
        while count(tm, tn4) < MIN_INVOCATIONS and tm > 2:
            tm = max(2, tm // 2)
    if tuning not in RAGGED_TUNINGS:
        return tm, tn4
    # a wider column tile, the last one ragged, where it pays (and still gives the invocations)
    return tm, ragged_cols(n4, tn4, min(widest, WINDOW_MAX_TN4) if window else widest,
                           lambda tiles: batches * -(-M // tm) * tiles >= MIN_INVOCATIONS,
                           RAGGED_A_COST_WIN if window else RAGGED_A_COST)


def subgroup_lanes(adapter_info: dict, features) -> int:
    """The subgroup size the tile kernel may rely on (0: no subgroup variant).

    llvmpipe (lavapipe) runs a subgroup as one row of its SIMD registers: the adapter's
    ``"llvmpipe (LLVM x, 256 bits)"`` gives 8 lanes of 32 bits, on every Mesa version (the
    "lane-loop" profile of Mesa < 24, whose storage loads are a loop over the lanes that the
    subgroup's shared loads avoid, and Mesa 25, where the variant runs PP-OCR's and Magika's
    convolutions 3-5x faster than the plain tile); elsewhere the size is not known before a
    pipeline runs.
    """
    device = str(adapter_info.get("device", ""))
    if "subgroup" not in features or "llvmpipe" not in device:
        return 0
    m = re.search(r"\b(128|256|512) bits\b", device)
    return int(m.group(1)) // 32 if m else 0


def choose_tile_sg(M: int, N: int, batches: int, lanes: int, K: int = 0,
                   cost: float | None = None, ragged: bool = True, window: bool = False) -> tuple[int, int]:
    """(TM, TN4) of the subgroup variant for an M x N output per batch item, K multiply-adds each.

    The row tiles are padded to a multiple of ``lanes`` (a subgroup shares one column tile),
    so TM (at most :data:`SG_TILE_M`) is the one of the least cost ``padded * (TM + cost) / TM``,
    with ``padded = ceil(ceil(M / TM) / lanes) * lanes * TM`` rows computed (the larger on ties;
    at most 2M where any TM allows it) and ``cost`` a row tile's own cost in rows
    (:data:`SG_TILE_COST` when None; 0 gives the fewest padded rows): each row tile loads and
    broadcasts its vectors of B once per k step for all its rows, so one-row tiles cost 2.36 rows
    per row (81 rows take 6 x 16 = 96 rows, not 1 x 88; 49 take 7, 36 take 5, 144 take 6, 16
    take 2, 4 take 1). TN4 is the largest divisor of ceil(N / 4) up to :data:`SG_TILE_N4` that still
    gives two subgroups (both cores of a 2-core machine) where a narrower one would. B's loads cost a lane's share, so
    wide column blocks are cheap; A's loads are each lane's own. K does not change the choice
    (kept for the signature of :func:`choose_tile`).

    A tile of more than :data:`COLS_FIRST_MAX_BLOCKS` accumulators (8 x 48) is then cut to fit the
    column-block order (:data:`SG_FIT`, unless that order is forced off): to the most rows that
    fit its column blocks (7 x 48) where the cost above takes them and they pad at most
    :data:`SG_FIT_PAD` times the rows of the taller tile (3136, 4096 and 2304 rows), else to the
    widest divisor of the column blocks that fits its rows (256 x 384 takes 8 x 32, 256 x 528
    8 x 44, 64 x 864 8 x 36, 576 x 48 8 x 24). ``WEBNN_GPU_FORCE_TILE_SG_FIT=off|short|narrow`` (read
    when a layer is lowered) keeps the tile or always cuts its rows or its columns.

    Where ``ragged``, a wider column tile whose last one is ragged replaces a narrow divisor first
    where it pays (:func:`ragged_cols`, :data:`RAGGED_A_COST_SG`; at most the column-block
    order's accumulators; with ``window``, an implicit GEMM's tile that keeps the window's shared
    input columns, :func:`window_rows`: at most :data:`WINDOW_MAX_TN4` blocks,
    :data:`RAGGED_A_COST_WIN`).
    """
    def padded(tm):
        return -(-(-(-M // tm)) // lanes) * lanes * tm

    cost = SG_TILE_COST if cost is None else cost
    n4 = -(-N // 4)
    divisors = [d for d in range(min(SG_TILE_N4, n4), 0, -1) if n4 % d == 0]

    def pick(tm_max):
        fits = [t for t in range(1, tm_max + 1) if padded(t) <= 2 * M] or list(range(1, tm_max + 1))
        tm = min(fits, key=lambda t: (padded(t) * (t + cost) / t, -t))
        groups = batches * padded(tm) // (tm * lanes)
        for d in divisors:
            if groups * (n4 // d) >= 2:
                return tm, d
        return tm, divisors[-1]
    tm, d = pick(SG_TILE_M)
    groups = batches * padded(tm) // (tm * lanes)  # subgroups per column tile: two fill the cores
    if ragged:
        d = ragged_cols(n4, d, min(SG_TILE_N4, COLS_FIRST_MAX_BLOCKS // tm, WINDOW_MAX_TN4 if window else n4),
                        lambda tiles: groups * tiles >= 2, RAGGED_A_COST_WIN if window else RAGGED_A_COST_SG)
    if n4 % d:  # a ragged last column tile: within the column-block order's accumulators already
        return tm, d
    fit = _env.force_choice("tile_sg_fit", ("off", "short", "narrow")) or ("auto" if SG_FIT else "off")
    if tm * d <= COLS_FIRST_MAX_BLOCKS or fit == "off" or _env.force_choice("tile_cols", ("first", "rows")) == "rows":
        return tm, d
    short = pick(COLS_FIRST_MAX_BLOCKS // d)
    if fit == "short" or (fit == "auto" and short == (COLS_FIRST_MAX_BLOCKS // d, d)
                          and padded(short[0]) <= SG_FIT_PAD * padded(tm)):
        cut = short
    else:
        cut = tm, max(v for v in divisors if tm * v <= COLS_FIRST_MAX_BLOCKS)
    return cut if cols_first(*cut) else (tm, d)  # a cut pays only in the column-block order


def ragged_cols(n4: int, d: int, widest: int, enough=None, cost: float = 0.0) -> int:
    """The vec4 column blocks of a tile over ``n4`` of them whose divisor choice is ``d``: a wider
    ``t`` (at most ``widest``) whose last column tile is ragged (its padding columns computed from
    B's zero-padded panels, :func:`panel_pack`, or clamped loads, and not stored) where the
    estimate ``ceil(n4 / t) * (t + cost)`` (column blocks computed, plus the re-reads of the
    tile's rows of A, one per column tile, ``cost`` column blocks each: :data:`RAGGED_A_COST_SG`
    for the subgroup variant, :data:`RAGGED_A_COST` for the plain kernel,
    :data:`RAGGED_A_COST_WIN` for a window's shared input columns) is at most
    :data:`RAGGED_GAIN` times ``d``'s; else ``d``. ``enough(tiles)``: whether ``tiles`` column
    tiles still fill the launch (asked only where ``d``'s did).
    ``WEBNN_GPU_FORCE_TILE_RAGGED=off`` (read when a layer is lowered) keeps ``d``; a number takes
    that many blocks (at most ``n4``) wherever ``d`` is narrower (for measurements).
    """
    forced = _env.force("tile_ragged")
    if forced == "off" or not RAGGED_COLS:
        return d
    if forced.isdigit():
        return max(d, min(int(forced), n4))

    def est(t):
        return -(-n4 // t) * (t + cost)
    keep = enough is None or not enough(n4 // d)
    cands = [t for t in range(d + 1, min(widest, n4) + 1) if n4 % t and (keep or enough(-(-n4 // t)))]
    best = min(cands, key=lambda t: (est(t), t), default=d)
    return best if best != d and est(best) <= RAGGED_GAIN * est(d) else d


def sg_rows_ok(M: int, tm: int, lanes: int) -> bool:
    """Whether the subgroup variant's padding wastes at most half of its rows (M >= lanes / 2
    rows in all: a product of one or two rows is not shared by a subgroup's lanes)."""
    return -(-(-(-M // tm)) // lanes) * lanes * tm <= 2 * M


def panel_pack(b: Value, rows: int, b_ks: int, b_cols: int, width: int, panels: int) -> Value | None:
    """A constant B (``rows`` x ``b_cols`` used of a row-major ``rows`` x ``b_ks`` matrix) re-laid out
    as ``panels`` column panels of ``width`` columns each, one after the other
    (``[panels, rows, width]``, zero-padded), or None: B is not a host constant, its size does not
    match, or :data:`B_PANEL` is off.

    A launch whose column tiles are ``width`` wide then reads each tile's B as one contiguous
    stream instead of ``width`` columns of every row: with few output rows (small M) the
    kernel's time is B's loads, and B's rows a few KB apart left every k step waiting on memory
    (4 x 2048 -> 512 2.4x the CPU time of 4 x 16384 -> 64, the same B, Mesa 22.3).
    """
    data = constant_array(b)
    if (not B_PANEL or _env.force("matmul_panel") == "off" or data is None or data.size != rows * b_ks
            or b_cols > panels * width):
        return None
    mat = np.zeros((rows, panels * width), dtype=data.dtype)
    mat[:, :b_cols] = data.reshape(rows, b_ks)[:, :b_cols]
    return make_constant(mat.reshape(rows, panels, width).transpose(1, 0, 2), b.data_type)


def dot_columns(b: Value, N: int, rows: int, b_ks: int) -> Value | None:
    """B transposed (``[N, rows]``, a new constant) for the tile kernel's ``bdot`` mode, or None:
    1 to 3 columns (:data:`DOT_MAX_N`), B a host constant of ``rows`` x ``b_ks`` values, and
    :data:`DOT_COLUMNS` on (``WEBNN_GPU_FORCE_MATMUL_DOT=off`` turns it off at build time).

    A vec4 column block computes 4 columns whatever N is: 16 multiply-adds per k step and row
    where a one-channel head needs 4. In ``bdot`` mode each k step loads the N columns' vec4s
    along k and adds one ``dot`` per column (the callers check vec4 loads of A and B, no batch
    and no input prologue that needs its own tile).
    """
    data = constant_array(b)
    if (not DOT_COLUMNS or _env.force("matmul_dot") == "off" or not 1 <= N <= DOT_MAX_N or data is None
            or data.size != rows * b_ks or rows % 4):
        return None
    return make_constant(np.ascontiguousarray(data.reshape(rows, b_ks)[:, :N].T), b.data_type)


def deep_ok(data_type: str, a_vec: bool, b_vec: bool) -> bool:
    """Whether a product may take the deep tiles (:data:`TILE_MAX_DEEP`): float32 with vec4
    loads of A and B. A 16 x 32 tile with scalar loads or f16 conversions compiles for tens of
    seconds on Mesa 22.3 (10-30 s measured), which no run-time gain repays."""
    return data_type == "float32" and a_vec and b_vec


def small_product(M: int, N: int, batches: int, K: int) -> bool:
    """Whether an M x N product (``batches`` of them, K multiply-adds per output) is small enough
    for ``matmul/small.wgsl`` (:data:`SMALL_MAX_OUTPUTS`, :data:`SMALL_MAX_K`,
    :data:`SMALL_MAX_MACS`; the last not under ``WEBNN_GPU_FORCE_MATMUL=small``): dispatch-bound,
    so one shared pipeline beats a tile kernel of its own."""
    return (M * N * batches <= SMALL_MAX_OUTPUTS and K <= SMALL_MAX_K
            and (M * N * batches * K < SMALL_MAX_MACS or _env.force("matmul") == "small"))


def given_operand(node, out: Value, steps: list[dict], M: int, N: int, KC: int, batches: int = 1) -> int | None:
    """The node input a binary epilogue step reads at each output's own index (same shape as
    ``out``, same data type; a residual add; or a pool or 2x upsampling of one that the
    epilogue's helpers load: ``"pool"`` / ``"up2"`` steps), for the tile kernel to load as vec4
    itself (``_epilogue.build(..., given=i)``), or None: also for products within
    ``matmul/small.wgsl``'s output and K limits (:data:`SMALL_MAX_OUTPUTS`, :data:`SMALL_MAX_K`;
    where the tile kernel runs them, the epilogue loads the operand itself), and under
    ``WEBNN_GPU_FORCE_MATMUL_RESIDUAL=scalar`` (the epilogue's own scalar loads, for
    measurements)."""
    if _env.force("matmul_residual") == "scalar" or (M * N * batches <= SMALL_MAX_OUTPUTS and KC <= SMALL_MAX_K):
        return None
    for step in steps:
        i = step.get("input")
        if i is None or "axis" in step or not isinstance(i, int) or not 0 <= i < len(node.inputs):
            continue
        v = node.inputs[i]
        if v is None or v.data_type != out.data_type:
            continue
        if "pool" in step or "up2" in step:  # a pooled or upsampled operand: loaded through the epilogue's helpers
            if ((_epilogue.given_pool_ok(step, v, out) or _epilogue.given_up2_ok(step, v, out))
                    and sum(st.get("input") == i for st in steps) == 1):
                return i
            continue
        shp = tuple(v.shape)
        if len(shp) > len(out.shape) or (1,) * (len(out.shape) - len(shp)) + shp != tuple(out.shape):
            continue
        if sum(st.get("input") == i for st in steps) == 1:  # read once, at the output's index
            return i
    return None


def rows_written_out(TM: int, TN4: int, ep: _epilogue.Epilogue, ep_vec: bool, dyn: bool, split) -> bool:
    """Whether a tile that would apply its epilogue in a loop over its rows (``ep_loop``) writes
    the rows out instead, because lavapipe's NIR would unroll that loop anyway.

    NIR unrolls a loop of constant count whose body is small, one iteration per two optimisation
    rounds (naga's loop bound gives the loop a second exit), so the pipeline's front end paid
    those rounds and LLVM compiled the rows written out all the same: written out in the text
    the tile's pipeline takes 0.68-0.91 of the front end's CPU and LLVM gets the same rows.
    Not for epilogues that load per output or a given operand (their loop was kept for LLVM,
    and NIR kept it), nor sibling splits; the size in units of a vec4 store is TM x TN4, doubled
    where the epilogue is four per-value calls (``ep_vec`` false), at most
    :data:`TILE_ROWS_OUT_UNITS` (:data:`TILE_ROWS_OUT_UNITS_DYN` with ``dyn``, whose rows read
    their bounds from the parameter buffer). ``WEBNN_GPU_FORCE_TILE_ROWS_OUT=off`` turns it off.
    """
    if _env.force_choice("tile_rows_out", ("off",)) == "off":
        return False
    if ep.given or reads_per_output(ep) or split:
        return False
    units = TM * TN4 * (1 if ep_vec else 2)
    return units <= (TILE_ROWS_OUT_UNITS_DYN if dyn else TILE_ROWS_OUT_UNITS)


def reads_per_output(ep: _epilogue.Epilogue) -> bool:
    """Whether an epilogue loads an operand for each output (a residual add, a broadcast
    operand), not only per channel (a bias, hoisted out of the tile by ``ep_q``).

    The tile kernel then applies it in a loop over the tile's rows (``ep_loop`` in
    ``matmul/tile.wgsl``) instead of inlining it at each of the tile's TM x TN4 stores: every
    inlined load is a loop over the SIMD lanes in LLVM's code, so a 16 x 24 tile with a
    residual add and hard_swish took 14.5 s to compile on Mesa 22.3 inlined and 1.4 s in the
    loop, and ran 7-14% faster. Epilogues that read operands only per channel take the loop
    too where the reduction has at least :data:`TILE_EP_LOOP_MIN_K` terms (:data:`TILE_EP_LOOP`).
    """
    if ep.empty:
        return False
    at = ep.code.find(f"fn {ep.fn}(")
    body = ep.code[at:] if at >= 0 else ep.code
    return any(f"{name}[" in body for name, _ in ep.operands)


def clamp_param(node, out: Value, ep: _epilogue.Epilogue) -> tuple[_epilogue.Epilogue, tuple[float, float] | None]:
    """``ep`` (built for ``node`` writing ``out``) for a tile kernel that applies its last clamp
    from run-time bounds (``clamp_at``): (``ep`` built again without that step, (min, max) as
    float32) where its last step is a clamp of two finite bounds, which renders as
    ``min(max(ev, min), max)``; else (``ep``, None), the kernel's clamp off. Either way the kernel
    applies ``select(e, min(max(e, lo), hi), on)`` to the epilogue's result: the same operations
    as the step (on), or ``e`` itself (off), so results do not change.
    """
    last = ep.steps[-1] if ep.steps else None
    if not (isinstance(last, dict) and last.get("op") == "clamp" and "input" not in last):
        return ep, None
    lo, hi = last.get("min_value"), last.get("max_value")
    if lo is None or hi is None or not (math.isfinite(float(lo)) and math.isfinite(float(hi))):
        return ep, None
    return _epilogue.build(node, out, ep.steps[:-1], **ep.options), (float(np.float32(lo)), float(np.float32(hi)))


def window_rows(TM: int, TN4: int, KW: int, conv: dict) -> int:
    """The rows of an implicit-GEMM tile that loads its input columns once per filter row
    (``win`` in ``matmul/tile.wgsl``), or 0 for the per-tap loads.

    The TM rows must be consecutive pixels of one output row, so TM becomes the largest divisor
    of the output width up to TM (at least 3/4 of TM, and 2); the window must overlap between
    neighbouring pixels (KW > 1 and fewer distinct columns than TM x KW taps), the tile be
    narrow (:data:`WINDOW_MAX_TN4`: few output channels, where the loads of A are most of the
    time) and its unrolled taps stay within :data:`WINDOW_MAX_UNROLL` (KW x TM x TN4).
    ``WEBNN_GPU_FORCE_MATMUL_WINDOW=off`` (read at build time) turns it off. Every load of A is
    a loop over the SIMD lanes on lavapipe: a 3x3 stride-1 window over 8-pixel tiles loads 10
    vectors per filter row instead of 24 (8 -> 1 channel over 256 x 256 pixels: 0.64 of the CPU
    time; 5x5, 32 -> 2 channels: 0.63).
    """
    if KW < 2 or TN4 > WINDOW_MAX_TN4 or _env.force("matmul_window") == "off":
        return 0
    tm = max(d for d in range(1, TM + 1) if conv["OW"] % d == 0)
    cols = len({i * conv["sw"] + kw * conv["dw"] for i in range(tm) for kw in range(KW)})
    if tm < 2 or 4 * tm < 3 * TM or cols >= tm * KW or KW * tm * TN4 > WINDOW_MAX_UNROLL:
        return 0
    return tm


def up_rows(TM: int, W: int) -> int:
    """The rows of a tile that interpolates a 2x-upsampled operand (``a_add_up``): one image row
    of width ``W`` from an even column, so the largest even divisor of ``W`` up to ``TM``."""
    return max(t for t in range(2, max(TM, 2) + 1, 2) if W % t == 0)


def cols_first(TM: int, TN4: int) -> bool:
    """Whether the subgroup variant's k step goes one column block at a time for a TM x TN4 tile
    (:data:`TILE_COLS_FIRST`, at least :data:`COLS_FIRST_MIN_ROWS` rows and at most
    :data:`COLS_FIRST_MAX_BLOCKS` accumulators; or
    ``WEBNN_GPU_FORCE_TILE_COLS=first|rows``, read when a layer is lowered)."""
    forced = _env.force_choice("tile_cols", ("first", "rows"))
    if forced:
        return forced == "first"
    return TILE_COLS_FIRST and TM >= COLS_FIRST_MIN_ROWS and TM * TN4 <= COLS_FIRST_MAX_BLOCKS


#: A pointwise conv that reads its A through the 2x-upsampled add (``up``) bakes its sizes
#: (:func:`tile_up_dynamic`).
TILE_UP_BAKED = True


def tile_up_dynamic(up) -> bool:
    """Whether a tile launch with the upsampled operand ``up`` (None: none) may take its sizes
    from the parameter buffer (``dyn``): not where it reads one (:data:`TILE_UP_BAKED`). With
    them in the text the image's row and column of a tile, which the upsampling's addressing
    divides out per invocation (integer divisions, one per lane on x86), and the k loop's bound
    are constants: selfie_segmentation's three such launches (1024 x 24 -> 24, 4096 x 16 -> 16,
    16384 x 16 -> 16) ran 0.95, 0.95 and 0.87 of the dynamic form's time, one pipeline more
    (docs/linalg.md, "Shapes at run time"). ``WEBNN_GPU_FORCE_TILE_UP_DYN=on`` keeps them
    dynamic."""
    if up is None or _env.force_choice("tile_up_dyn", ("on",)) == "on":
        return True
    return not TILE_UP_BAKED


def tile_words(lc, data_type: str) -> bool:
    """Whether ``matmul/tile.wgsl`` moves A (vec4 loads), its output and the given operand
    (vec4 stores) as u64 words (``x64``; :data:`TILE_X64`): the "lane-loop" profile (lavapipe
    before Mesa 24) with ``shader-int64``. ``WEBNN_GPU_FORCE_TILE_WORDS=vec4`` keeps vec4s of
    the storage type, ``=u64`` words of 4 values only (no stores of 8, ``x8``)."""
    return (TILE_X64 and lc.tuning == "lane-loop" and "shader-int64" in lc.features
            and data_type in ("float32", "float16") and _env.force("tile_words") != "vec4")


def tile_res_words(x64: bool, a_vec: bool) -> bool:
    """Whether ``matmul/tile.wgsl`` also reads the operand added to A (``a_add``: a skip
    connection, or the small image of a 2x upsampling) as u64 words of 4 values
    (``res_words``; :data:`TILE_RES_WORDS`): where it moves A's vec4s as words (``x64`` and
    ``a_vec``). ``WEBNN_GPU_FORCE_TILE_RES_WORDS=vec4|words`` forces either form (words only
    where A's are words)."""
    words = _env.force_words("tile_res_words", TILE_RES_WORDS)
    return x64 and a_vec and words


def tile_kernel(lc, a: Value, b: Value, out: Value, *, M: int, N: int, batch_shape, a_bst, b_bst, o_bst,
                a_mode: str = "dense", a_rs: int = 0, a_ks: int = 1, a_vec: bool = False,
                b_ks: int, b_ns: int = 1, b_vec: bool = False, b_cols: int | None = None,
                o_P: int, o_sn: int, o_sp: int, o_so: int, KH: int = 1, KW: int = 1, KC: int,
                conv: dict | None = None, epilogue=None, tile: tuple[int, int] | None = None,
                order: str | None = None, group_cols: int = 0, small_ok: bool = True,
                a_scale: Value | None = None, a_add: Value | None = None,
                a_add_up: tuple[int, int] | None = None, pool: Value | None = None,
                given: Value | None = None, row_epilogue=None, split: list | None = None,
                a_pre: dict | None = None) -> None:
    """Add one ``matmul/tile.wgsl`` launch (see the template header for every argument), or
    a ``matmul/small.wgsl`` one for a small dense product when ``small_ok``.

    ``split``: ``[(value, first column, columns), ...]``, the launch's columns stored into
    several outputs (the compiler's ``fuse_siblings``: products of one A by B side by side):
    columns ``first .. first + columns - 1`` of row m go to ``value`` ([..., columns], dense,
    row-major) at ``m * columns + n - first``; each ``first`` a multiple of 4, the blocks in
    order from column 0 on (the padding columns of a block and those past the last block are
    computed, not stored).
    ``out`` is then only the data type's witness; the launch is the tile kernel with baked
    sizes, no pool, given operand, input prologue or word stores.

    ``row_epilogue``: the same steps as ``epilogue`` built with the channel on the axis of the
    rows m (an NCHW pointwise conv, whose rows are the output channels). The tile kernel then
    loads the operands read at the channel once per row (``ep_rows``) instead of once per
    output: inlined at each of a tile's TM x 4 TN4 stores, those loads made LLVM's compile
    grow to minutes on lavapipe for a few bias-and-batch-norm steps.

    ``a_add_up`` = (H, W): ``a_add`` is the small image ([N, H / 2, W / 2, KC]) of an exact 2x
    bilinear upsampling of A's rows, one pixel each, of NHWC images of H x W pixels.

    ``pool``: a [ceil(M / TM), N] float32 Value for the per-tile column sums of the stored
    output (one batch item, N a multiple of 4; :func:`up_rows` and :func:`choose_tile` give TM).

    ``given``: the Value of the epilogue's operand read at each output's own index when the
    epilogue was built with ``given`` (:func:`given_operand`); the kernel loads it (as vec4
    with vec4 stores) and passes it to the epilogue.

    ``a_vec`` / ``b_vec`` / vec4 stores are only used when the addressing is aligned; callers
    pass what they want and this function drops what the geometry does not allow.

    With ``lc.subgroup`` lanes (:func:`subgroup_lanes`), no forced ``tile`` and vec4 loads of
    B, the subgroup variant (``sg``; :func:`choose_tile_sg`) runs unless it would pad more
    than half of its rows (:func:`sg_rows_ok`) or the launch writes ``pool`` partials (with
    ``a_add_up``, its rows are cut to an image row's divisor, :func:`up_rows`). Products of few outputs but at least :data:`SMALL_MAX_MACS` multiply-adds
    take the tile kernel, not ``matmul/small.wgsl`` (whose scalar loads of A and B are each a
    loop over the lanes: 4 x 128 x 64 took 205 us of CPU time there, 120 us in the variant).
    ``WEBNN_GPU_FORCE_MATMUL_SG=off`` (read at build time) turns it off.

    A constant B of 1 to 3 columns with vec4 loads of A and B, no batch offsets, no ``pool``
    and no ``a_add_up`` is read transposed (``bdot``; :func:`dot_columns`), on either kernel.

    Raises:
        NotSupportedError: an invocation's loops would pass :data:`LOOP_BUDGET`
            (:func:`tile_loop_iterations`; callers that can split the reduction do so first,
            :func:`k_chunks`).
    """
    batch_shape = list(batch_shape)
    batches = math.prod(batch_shape) if batch_shape else 1
    if split is not None:  # one A, several outputs: checked by the rule (siblings.sibling_group)
        assert pool is None and given is None and a_scale is None and a_add is None and a_pre is None and not batch_shape
        ends = [first + -(-cols // 4) * 4 for _, first, cols in split]
        assert o_P == M and o_sp == N and o_so == 1 and N % 4 == 0 and ends[-1] <= N
        assert [first for _, first, _ in split] == [0] + ends[:-1]
        small_ok = False
    if (small_ok and pool is None and given is None and a_scale is None and a_add is None and a_pre is None and tile is None and a_mode == "dense" and len(batch_shape) <= 1
            and small_product(M, N, batches, KC)):
        ep = epilogue if epilogue is not None else _epilogue.build(lc.node, out, [])
        bst = (list(a_bst) or [0], list(b_bst) or [0], list(o_bst) or [0])
        params = [M * N * batches, M, N, KC, a_rs, a_ks, b_ks, b_ns, o_P, o_sn, o_sp, o_so,
                  bst[0][0], bst[1][0], bst[2][0], group_cols]
        prm = make_constant(np.array(params, dtype=np.uint32), "uint32")
        step = lc.kernel("matmul/small.wgsl", [("a", a), ("b", b)] + ep.operands + [("prm", prm)], [("out", out)],
                         M * N * batches, workgroup=TILE_WORKGROUP, T=wgsl_type(out.data_type), ep=ep)
        step.flops, step.note = 2 * M * N * KC * batches, _size_note(M, KC, N, batches, 1, 1, "small")
        return
    b_cols = N if b_cols is None else b_cols
    a_vec = a_vec and a_ks == 1 and KC % 4 == 0 and all(s % 4 == 0 for s in a_bst)
    if a_mode == "dense":
        a_vec = a_vec and a_rs % 4 == 0
    else:
        assert conv is not None  # im2col mode always comes with the conv geometry
        a_vec = a_vec and all(conv[k] % 4 == 0 for k in ("in_sn", "in_sh", "in_sw"))
    b_vec = b_vec and b_ns == 1 and b_ks % 4 == 0 and b_cols % 4 == 0 and all(s % 4 == 0 for s in b_bst)
    sg = 0
    bdot = None
    if tile is None and pool is None and a_add_up is None and a_vec and b_vec and not any(b_bst) and split is None:
        bdot = dot_columns(b, N, KH * KW * KC, b_ks)
        if bdot is not None:
            b, b_ks = bdot, 1
    if tile is None and b_vec and (order or TILE_ORDER) == "m":
        tile = _sg_tile(lc, M, N, batches, KC * KH * KW)
        if tile is not None and a_mode == "im2col" and conv is not None and not window_rows(*tile, KW, conv):
            # consecutive pixels of an image row share their input columns between the taps (`win`):
            # where the weighted rows or a wide ragged column tile lose that and the narrow column
            # tiles (or the fewest padded rows) keep it, the latter
            for cost in (None, 0.0):
                keep = _sg_tile_lanes(lc.subgroup, M, N, batches, KC * KH * KW, cost=cost, window=True)
                if keep is not None and window_rows(*keep, KW, conv):
                    tile = keep
                    break
        if tile is not None and a_add_up is not None:  # a tile's rows: one image row from an even column
            tile = (up_rows(tile[0], a_add_up[1]), tile[1])
            tile = tile if sg_rows_ok(M, tile[0], lc.subgroup) else None
        sg = lc.subgroup if tile is not None else 0
    if tile is None:
        tile = choose_tile(M, N, batches, lc.tuning, K=KC * KH * KW if deep_ok(out.data_type, a_vec, b_vec) else 0)
        if a_mode == "im2col" and conv is not None and not window_rows(*tile, KW, conv):  # as above
            keep = choose_tile(M, N, batches, lc.tuning, K=KC * KH * KW if deep_ok(out.data_type, a_vec, b_vec) else 0,
                               window=True)
            tile = keep if window_rows(*keep, KW, conv) else tile
    TM, TN4 = tile
    win: list[int] = []
    if a_mode == "im2col" and conv is not None:
        tm_win = window_rows(TM, TN4, KW, conv)
        if tm_win:
            TM = tm_win
            win = sorted({i * conv["sw"] + kw * conv["dw"] for i in range(TM) for kw in range(KW)})
    up = None
    if a_add_up is not None:  # a tile's rows must be one image row, starting at an even column
        assert a_add is not None and a_mode == "dense"
        TM = up_rows(TM, a_add_up[1])
        up = (a_add_up[0], a_add_up[1], a_add.shape[1], a_add.shape[2])
    # the matmul lowerings split their reduction (k_chunks); a conv's cannot be
    check_loops(lc, tile_loop_iterations(KC, KH, KW, TM), KH * KW * KC, f"{KH}x{KW} taps of {KC}")
    tiles_m = -(-M // TM)
    if sg:  # a subgroup's lanes take row tiles of one column tile; the padding rows store nothing
        tiles_m = -(-tiles_m // sg) * sg
    tiles_n = -(-(-(-N // 4)) // TN4)
    out_vec = (o_so == 1 and N % 4 == 0 and o_sp % 4 == 0 and (o_sn % 4 == 0 or o_P >= M)
               and all(s % 4 == 0 for s in o_bst))
    b_ubo = uniform_copy(lc, b) if b_vec and out.data_type == "float32" else None
    b_uniform = b_ubo is not None
    b = b_ubo if b_ubo is not None else b
    b_panel = 0
    if b_vec and not b_uniform and tiles_n > 1 and not any(b_bst):
        panels = panel_pack(b, KH * KW * KC, b_ks, b_cols, 4 * TN4, tiles_n)
        if panels is not None:
            b, b_ks, b_panel = panels, 4 * TN4, KH * KW * KC * TN4
    if (a_scale is not None or a_add is not None) and not (a_vec and a_mode == "dense"):
        raise AssertionError(f"{lc.label}: an input prologue needs dense vec4 loads of A")  # the pass checks this
    if a_pre is not None and not (a_vec and KC % 4 == 0 and not batch_shape and a_scale is None and a_add is None):
        raise AssertionError(f"{lc.label}: an input step needs vec4 loads of A, one group")  # input_preact_ok
    pre = None
    pre_rows = None
    if a_pre is not None:  # the steps' per-channel operands as the rows of one [steps, KC] constant
        pre = {"ops": [op for op, _ in a_pre["steps"]], "C4": KC // 4, "act": a_pre["act"]}
        if a_pre["steps"]:
            rows: list[np.ndarray] = []
            for _, v in a_pre["steps"]:
                data = constant_array(v)
                assert data is not None and data.size == KC, "input_preact_ok: constants, one per channel"
                rows.append(data.reshape(-1))
            pre_rows = make_constant(np.stack(rows), out.data_type)
    ep = epilogue if epilogue is not None else _epilogue.build(lc.node, out, [])
    ep_rows = row_epilogue is not None and row_epilogue.chan
    if ep_rows:
        ep = row_epilogue
    order = order or TILE_ORDER
    n_inv = batches * tiles_m * tiles_n
    if pool is not None and not (out_vec and batches == 1 and tuple(pool.shape) == (-(-M // TM), N)):
        raise AssertionError(f"{lc.label}: pool partials need one batch item and vec4 stores")  # pool_rows checks
    dyn = (TILE_DYNAMIC and pool is None and a_mode == "dense" and not batch_shape and a_vec and b_vec and out_vec
           and a_ks == 1 and b_ns == 1 and o_so == 1 and (o_sn == 0 or o_P >= M) and KH == KW == 1 and not group_cols
           and order == "m" and tile_up_dynamic(up) and split is None)
    clamp = None
    tile_clamp = dyn and TILE_CLAMP_PARAM and not ep_rows and _env.force_choice("tile_clamp", ("text",)) != "text"
    if tile_clamp:  # a last clamp from the parameter buffer: kernels that differ only in it share a pipeline
        ep, clamp = clamp_param(lc.node, out, ep)
    x64 = tile_words(lc, out.data_type) and (a_vec or b_vec or out_vec)
    # stores of two column blocks (8 values) where every stored vec4 pair is 8-aligned
    x8 = (x64 and _env.force("tile_words") != "u64" and out_vec and split is None and TN4 % 2 == 0 and N % 8 == 0 and o_sp % 8 == 0
          and (o_sn % 8 == 0 or o_P >= M) and all(s % 8 == 0 for s in o_bst))
    split_ctx = [{"name": f"out{j}" if j else "out", "first": first, "cols": cols, "end": first + -(-cols // 4) * 4,
                  "vec": cols % 4 == 0} for j, (_, first, cols) in enumerate(split or [])]
    variables = dict(
        T=wgsl_type(out.data_type), needs_f16=False, TM=TM, TN4=TN4, order=order, M=M, N=N, tiles_m=tiles_m,
        tiles_n=tiles_n, batch_strides=strides(batch_shape), a_bst=list(a_bst), b_bst=list(b_bst),
        o_bst=list(o_bst), KH=KH, KW=KW, KC=KC, KC4=KC // 4 * 4, a_mode=a_mode, a_rs=a_rs, a_ks=a_ks,
        a_vec=a_vec, b_ks=b_ks, b_ns=b_ns, b_vec=b_vec, b_cols=b_cols, o_P=o_P, o_sn=o_sn, o_sp=o_sp,
        o_so=o_so, out_vec=out_vec, ep=ep, ep_rows=ep_rows, group_cols=group_cols, dyn=dyn, tiles_n1=tiles_n == 1,
        pool_rows=-(-M // TM), x64=x64, split=split_ctx, x8=x8, res_words=a_add is not None and tile_res_words(x64, a_vec),
        a_scale=a_scale is not None, a_add=a_add is not None, pre=pre, up=up or 0, b_uniform=b_uniform,
        b_uniform_vec4=B_UNIFORM_FLOATS // 4, b_panel=b_panel, win=win, bdot=bdot is not None, win_fused=WINDOW_FUSED and bdot is None, pool=pool is not None, sg=sg, clamp_at=0, cols_first=bool(sg) and bdot is None and not win and cols_first(TM, TN4), ep_loop=TM > 1 and not ep_rows and (TILE_EP_LOOP and KH * KW * KC >= TILE_EP_LOOP_MIN_K or ep.given or reads_per_output(ep)),
    )
    if variables["ep_loop"] and rows_written_out(TM, TN4, ep, bool(ep.code4) and out_vec, dyn, split):
        variables["ep_loop"] = False
    inputs = [("a", a), ("b", b)] + ep.operands + ([("asc", a_scale)] if a_scale is not None else [])
    inputs += [("ares", a_add)] if a_add is not None else []
    inputs += [("pre", pre_rows)] if pre_rows is not None else []
    assert (given is not None) == ep.given, f"{lc.label}: an epilogue built with given needs its operand"
    inputs += [("gres", given)] if given is not None else []
    if dyn:
        sizes = [n_inv, M, N, KC // 4 * 4, a_rs, b_ks, b_panel or b_cols, o_sp, tiles_m]
        if up is not None:  # the upsampled operand's last tile row, image (UH x UW) and source (uh x uw)
            UH, UW, uh, uw = up
            sizes += [M - TM, UW, UH, uh, uw, KC]
        if tile_clamp:  # the clamp's bounds (float32 bits) and whether it applies
            variables["clamp_at"] = len(sizes)
            sizes += [*np.array(clamp or (0.0, 0.0), dtype=np.float32).view(np.uint32).tolist(), int(clamp is not None)]
        inputs.append(("prm", make_constant(np.array(sizes, dtype=np.uint32), "uint32")))
    if a_mode == "im2col":
        variables.update(conv or {})
    else:
        variables.update(P=1, OW=1, in_sn=0, in_sh=0, in_sw=0, H=1, W=1, sh=1, sw=1, dh=1, dw=1, pt=0, pl=0)
    outputs = [("out", out)] + ([("pool", pool)] if pool is not None else [])
    if split is not None:
        outputs = [(sc["name"], v) for sc, (v, _, _) in zip(split_ctx, split)]
    wg = _tile_workgroup(n_inv, sg)
    step = lc.kernel("matmul/tile.wgsl", inputs, outputs, n_inv, workgroup=wg, **variables)
    twins = lc.shared.setdefault("tile_workgroups", {})  # WGSL without its workgroup size -> {size: WGSL}
    key = _workgroup_free(step.wgsl, wg)
    other = _twin_workgroup(n_inv, wg, twins.get(key, {}))
    if other != wg:  # the same pipeline as an earlier launch of this graph: one compile less
        lc.steps.pop()
        twin = lc.kernel("matmul/tile.wgsl", inputs, outputs, n_inv, workgroup=other, **variables)
        if twin.wgsl == twins[key][other]:
            step, wg = twin, other
        else:  # not a twin after all: keep the launch as it was
            lc.steps[-1] = step
    twins.setdefault(key, {}).setdefault(wg, step.wgsl)
    step.flops = 2 * M * N * KC * KH * KW * batches
    step.note = _size_note(M, KC, N, batches, KH, KW, f"{TM}x{4 * TN4}" + (" sg" if sg else "") + (" dyn" if dyn else "")
                           + (" panels" if b_panel else "") + (" win" if win else ""))


#: What one invocation's loops may reach in all (llvmpipe ends them, silently, after
#: :data:`~webnn_gpu.ops.recurrent.LOOP_LIMIT` iterations): the limit less a sixteenth, for
#: iterations a bound does not see.
LOOP_BUDGET = LOOP_LIMIT - LOOP_LIMIT // 16
#: The most rows a tile may have (the deep and subgroup tiles included), for the bound of
#: :func:`tile_loop_iterations` before the tile is chosen.
TILE_ROWS_BOUND = 64


def tile_loop_iterations(KC: int, KH: int = 1, KW: int = 1, TM: int = TILE_ROWS_BOUND) -> int:
    """An upper bound of the loop iterations of one ``matmul/tile.wgsl`` invocation as llvmpipe
    counts them (a loop of n iterations n + 1): the filter rows, per row the taps, per tap the
    reduction over ``KC`` four at a time, and the epilogue's loop over the ``TM`` rows of the
    tile, with a few iterations of margin."""
    return KH * (KW * (-(-KC // 4) + 2) + 1) + TM + 8


def check_loops(lc, loops: int, macs: int, detail: str) -> None:
    """Raise NotSupportedError at build time where a kernel's invocation would run ``loops``
    loop iterations (a bound) for a reduction of ``macs`` multiply-adds per output (``detail``:
    its taps and channels), more than :data:`LOOP_BUDGET`: llvmpipe would end its loops early
    and return a wrong result without an error."""
    if loops > LOOP_BUDGET:
        raise NotSupportedError(
            f"{lc.label}: a reduction of {macs} multiply-adds per output ({detail}) needs about {loops} loop "
            f"iterations in one shader invocation, more than {LOOP_BUDGET} (llvmpipe ends an invocation's loops "
            f"after {LOOP_LIMIT} iterations)")


def k_chunks(K: int, naive: bool = False) -> tuple[int, int] | None:
    """How a product of reduction length ``K`` splits so that no invocation's loops pass
    :data:`LOOP_BUDGET`: None where one tile launch (with ``naive``, one ``matmul/naive.wgsl``
    launch) stays under it, else ``(C, KC)``: ``C`` chunks of ``KC`` (a multiple of 4) each, one
    tile launch of ``C`` batch items, whose partial products ``matmul/ksum.wgsl`` sums with the
    remainder ``K - C * KC`` (less than ``5 * C``) and the epilogue.

    Example: ``k_chunks(300000)`` is ``(2, 150000)``; ``k_chunks(786432)`` is ``(4, 196608)``."""
    if tile_loop_iterations(K) <= LOOP_BUDGET and not (naive and K + 2 > LOOP_BUDGET):
        return None
    k_max = (LOOP_BUDGET - tile_loop_iterations(0)) * 4
    C = -(-K // k_max)
    return C, K // C // 4 * 4


def lower_split_k(lc, node, a: Value, b: Value, ep, chunks: tuple[int, int], *, M, N, K, batch_shape, a_bst, b_bst,
                  o_bst, o_sp, a_rs, a_ks, b_ks, b_ns, b_cols, vec: bool, conv: dict | None = None, KH: int = 1,
                  KW: int = 1) -> None:
    """out = A x B (+ ``ep``) in two launches, for a reduction too long for one invocation's
    loops (:func:`k_chunks` gives ``chunks``): the tile kernel writes the partial products of
    the chunks as batch items of a temporary, then ``matmul/ksum.wgsl`` sums them per output,
    adds the remainder's multiply-adds and applies the epilogue once.

    With ``conv`` (the tile kernel's im2col geometry) A is gathered from an image over the
    ``KH`` x ``KW`` taps and ``K`` counts the input channels, which the chunks cover exactly;
    B holds the chunks one after the other, each ``KH * KW * KC`` rows of ``b_ks``."""
    out = node.outputs[0]
    C, KC = chunks
    assert conv is None or K == C * KC, "an im2col split leaves no remainder"
    batches = math.prod(batch_shape) if batch_shape else 1
    part = lc.temp(out.data_type, (*batch_shape, C, M, N))
    tile_kernel(lc, a, b, part, M=M, N=N, batch_shape=[*batch_shape, C], a_bst=[*a_bst, KC * a_ks],
                b_bst=[*b_bst, KH * KW * KC * b_ks], o_bst=[s * C * M * N for s in strides(batch_shape)] + [M * N],
                a_rs=a_rs, a_ks=a_ks, a_vec=vec, b_ks=b_ks, b_ns=b_ns, b_vec=vec, b_cols=b_cols,
                o_P=M, o_sn=0, o_sp=N, o_so=1, KC=KC, small_ok=False, a_mode="dense" if conv is None else "im2col",
                conv=conv, KH=KH, KW=KW)
    ab = [("a", a), ("b", b)] if K > C * KC else []
    step = lc.kernel("matmul/ksum.wgsl", ab + [("p", part)] + ep.operands, [("out", out)],
                     M * N * batches, T=wgsl_type(out.data_type), M=M, N=N, K=K, C=C, KC=KC,
                     batch_strides=strides(batch_shape), a_bst=list(a_bst), b_bst=list(b_bst), o_bst=list(o_bst),
                     a_rs=a_rs, a_ks=a_ks, b_ks=b_ks, b_ns=b_ns, o_sp=o_sp, ep=ep)
    step.flops = 2 * M * N * (K - C * KC + C) * batches
    step.note = _size_note(M, K, N, batches, KH, KW, f"ksum {C}x{KC}")


#: Products of at most this many rows with a constant B take ``matmul/matvec.wgsl``
#: (:func:`matvec_kernel`) on the "lane-loop" profile with subgroups (past 4 rows the tile
#: kernel's subgroup variant shares B's loads between rows: 8 and 16 rows took 1.0-2.1 of its
#: time in matvec; ``WEBNN_GPU_FORCE_MATMUL_MATVEC_ROWS=N`` takes at most N) ...
MATVEC_MAX_M = 4
#: ... and at most this many columns: past it the tile kernel's column tiles give every thread
#: a share already and measured as fast (1 x 288 -> 1404, 1 x 256 -> 784: 0.97-1.0) or faster
#: (1 x 4096 -> 1000: 1.1x the tile kernel's time in matvec).
MATVEC_MAX_N = 512
#: ... and a reduction of at least this length: shorter, a lane's loop is a few iterations and the
#: subgroup's sum and stores outweigh it (1 x 64 -> 512 1.27x, 1 x 128 -> 300 1.25x, 2 x 96 -> 400
#: 1.08x the tile kernel's time; 3 x 256 -> 500 0.91x, 1 x 16384 -> 8 0.48x).
MATVEC_MIN_K = 256
#: ... and from this many rows on a reduction of at least :data:`MATVEC_MIN_K_TALL` and a B of at
#: least :data:`MATVEC_MIN_KN_TALL` values (K x N): below, the tile kernel's subgroup variant,
#: which shares B between rows, is as fast (4 x 256 -> 256, 4 x 288 -> 288, 4 x 288 -> 195 and
#: 4 x 512 -> 64 took 0.96-1.07 of its time in matvec, and iris_landmark's 2x2 stride-2 convs
#: on 4 x 4 pixels, 4 x 512 -> 64, 1.05-1.26 inside the model), and so are B of 100k to 131k
#: values where the kernel before wrote A (the Keras DenseNet121's 1x1 convs on 2 x 2 pixels,
#: 4 x 800 to 992 -> 128, 1.02-1.06 inside the model; 4 x 800, 896 and 1024 -> 128 and
#: 4 x 512 -> 213 after a concat 0.93-1.02, though 0.86-0.93 on an input written by the host);
#: above it the tile kernel is slower (after a concat 4 x 1152 -> 213 0.86-0.87, 4 x 768 -> 256
#: 0.84, 4 x 1536 -> 128 0.90, 4 x 640 -> 320 0.89, 4 x 2048 -> 512 0.77, 4 x 4608 -> 64 0.78;
#: 4 x 1024 -> 192 1.00; the Keras ResNet50's last stage 0.82-0.91 inside the model).
MATVEC_TALL_M = 4
MATVEC_MIN_K_TALL = 512
MATVEC_MIN_KN_TALL = 150_000
#: A conv window over a few output pixels is gathered as matvec rows (:func:`matvec_window`) only
#: where its filter holds at least this many values (1 x 576 -> 96 dilated and 2 x 512 -> 96 took
#: 0.95-1.10 of the tile kernel's time); 4 pixels also need :data:`MATVEC_MIN_KN_TALL`.
MATVEC_MIN_KN_WINDOW = 100_000
#: ... and at least this many multiply-adds (below, the launch's ~45 us is all of it and
#: ``matmul/small.wgsl`` serves every such shape with one pipeline), except on the "lane-loop"
#: profile with ``shader-int64``, where B is read as words or from a uniform buffer
#: (:func:`matvec_words`): then any count (with B uniform 1 x 512 -> 15 0.44, 1 x 288 -> 1
#: 0.71, 1 x 1024 -> 15 0.34 of the tile kernel's time; each such shape then compiles a matvec
#: pipeline of its own instead of sharing small.wgsl's).
MATVEC_MIN_MACS = 16384
#: On the "lane-loop" profile with ``shader-int64``, ``matmul/matvec.wgsl`` reads its packed B
#: from a storage buffer as vec4<u64> words (:func:`matvec_words`) rather than from a texture,
#: and rather than from a uniform buffer where its values are float16 ones
MATVEC_WORDS = True
#: Column groups (subgroups) a matvec launch aims for: vec4 columns per subgroup CN is the
#: largest of :data:`MATVEC_CN` that still gives this many, and the workgroup holds enough
#: subgroups for :data:`MATVEC_WORKGROUPS` workgroups (lavapipe runs a workgroup on one thread).
MATVEC_MIN_GROUPS = 16
MATVEC_CN = (4, 2, 1)
#: A launch of several rows whose column groups would be single vec4 columns (fewer than
#: 2 x :data:`MATVEC_MIN_GROUPS` of them) takes fewer, wider groups, at least this many: each
#: lane loads its M vec4s of A per step for every group, so with M rows A's loads outweigh B's
#: (2 and 4 x 4608 -> 64:
#: 4 groups of 4 columns 0.72-0.76 of 16 of 1, 2 and 4 x 512 -> 64 0.88-0.90, 3 x 512 -> 64
#: 0.95-1.0; ``WEBNN_GPU_FORCE_MATMUL_MATVEC_GROUPS=16`` keeps :data:`MATVEC_MIN_GROUPS`).
MATVEC_ROWS_GROUPS = 4
#: From this many bytes of packed B (in a storage buffer) a lane's k steps are one contiguous
#: run of B (``runs``, :func:`matvec_runs`) rather than every L-th step: each lane then streams
#: its own part of B. Kernel time runs / steps alone (benchmarks/heads.py --forms steps,runs,
#: medians of 9 rounds): 1 x 4096 -> 4096 (64 MiB) 0.68, 1 x 4096 -> 1000 (16 MiB) 0.79,
#: 1 x 4608 -> 512 0.86, 4 x 4608 -> 512 0.89, 1 x 768 -> 3072 0.89 (9 MiB), 1 x 2048 -> 1000,
#: 4 x 2048 -> 512, 1 x 960 -> 1280 (4-8 MiB) 0.93-0.94; inside models (benchmarks/knob_ab.py)
#: 0.57-0.82 (Keras resnet50, vgg16, convnext_tiny; mobilenet_v3_large's 1 x 960 -> 1280 0.60).
#: Below it slower or even: 2 x 512 -> 1000 (2 MiB) 0.94, heads of 0.3-1.6 MB 0.96-1.04 alone and
#: 0.95-1.20 inside the MediaPipe models (face_landmark's 1 x 288 -> 1404 1.12).
MATVEC_RUNS_BYTES = 4 << 20
MATVEC_WORKGROUPS = 8
MATVEC_MAX_WORKGROUP = 64


def matvec_rows() -> int:
    """The most rows a ``matmul/matvec.wgsl`` launch takes: :data:`MATVEC_MAX_M`, or
    ``WEBNN_GPU_FORCE_MATMUL_MATVEC_ROWS=N`` (at most 16: the kernel unrolls its rows)."""
    forced = _env.force("matmul_matvec_rows")
    if not forced:
        return MATVEC_MAX_M
    if not forced.isdigit() or not 1 <= int(forced) <= 16:
        raise ValueError(f"WEBNN_GPU_FORCE_MATMUL_MATVEC_ROWS={forced!r}: expected 1 to 16")
    return int(forced)


def matvec_rows_ok(M: int, K: int, N: int) -> bool:
    """Whether an M x K by K x N product has rows :func:`matvec_plan` may take: at most
    :func:`matvec_rows`, and from :data:`MATVEC_TALL_M` on a large B (the device and the other
    limits aside: :func:`matvec_plan` decides)."""
    return M <= matvec_rows() and (M < MATVEC_TALL_M or K >= MATVEC_MIN_K_TALL and K * N >= MATVEC_MIN_KN_TALL)


def plan_context(context) -> SimpleNamespace:
    """What :func:`matvec_plan` (and the lowerings that ask it) read of a lowering context, from
    a compiler rule's ``context`` (an ``MLContext``, or None: no subgroups, the "default"
    profile): ``subgroup``, ``tuning``, ``limits`` and ``features``, as the build's lowering
    will see them."""
    return SimpleNamespace(subgroup=getattr(context, "_subgroup", 0), tuning=getattr(context, "_tuning", "default"),
                           limits=getattr(context, "limits", {}), features=getattr(context, "features", ()))


def matvec_plan(lc, M: int, N: int, K: int) -> tuple[int, int] | None:
    """(CN, workgroup) of a ``matmul/matvec.wgsl`` launch for an M x K by K x N product, or None
    where the tile kernel serves it: more than :func:`matvec_rows` rows or
    :data:`MATVEC_MAX_N` columns, a reduction shorter than :data:`MATVEC_MIN_K` (from
    :data:`MATVEC_TALL_M` rows on :data:`MATVEC_MIN_K_TALL`, with a B of at least
    :data:`MATVEC_MIN_KN_TALL` values), fewer than
    :data:`MATVEC_MIN_MACS` multiply-adds unless B is read as words or from a uniform buffer
    (``shader-int64`` in ``lc.features`` and no ``WEBNN_GPU_FORCE_MATMUL_MATVEC_B=texture|storage``:
    :func:`matvec_words`), no subgroup lanes (:func:`subgroup_lanes`) or
    another tuning profile than "lane-loop", an invocation's loop past :data:`LOOP_BUDGET`,
    ``WEBNN_GPU_FORCE_MATMUL_MATVEC=off`` or a forced ``WEBNN_GPU_FORCE_MATMUL`` variant other
    than ``matvec`` (which takes every product of at most :func:`matvec_rows` rows whatever its
    size, on a device with subgroup lanes and the "lane-loop" profile, within
    :data:`LOOP_BUDGET`; a conv's gathered window also needs channels that are a multiple of 4:
    :func:`webnn_gpu.ops.conv.matvec_conv_plan`).
    Column groups: :data:`MATVEC_MIN_GROUPS` of the most columns (:data:`MATVEC_CN`), or for
    several rows where those would be single vec4 columns, :data:`MATVEC_ROWS_GROUPS`
    (``WEBNN_GPU_FORCE_MATMUL_MATVEC_GROUPS=16`` keeps :data:`MATVEC_MIN_GROUPS`; any other value
    raises, as does any other ``WEBNN_GPU_FORCE_MATMUL_MATVEC`` than ``off``)."""
    forced = _env.force("matmul")
    lanes = getattr(lc, "subgroup", 0)
    if (forced and forced != "matvec" or _env.force_choice("matmul_matvec", ("off",)) == "off" or not lanes
            or lc.tuning != "lane-loop" or not 1 <= M <= matvec_rows()):
        return None
    if forced != "matvec" and (M * N * K < MATVEC_MIN_MACS and not _words_on(lc) or K < MATVEC_MIN_K
                               or not matvec_rows_ok(M, K, N)):
        return None
    k4 = -(-K // 4)
    if -(-k4 // lanes) + 8 > LOOP_BUDGET:
        return None
    n4 = -(-N // 4)
    cn = next((c for c in MATVEC_CN if -(-n4 // c) >= MATVEC_MIN_GROUPS), MATVEC_CN[-1])
    if M > 1 and cn == 1 and _env.force_choice("matmul_matvec_groups", (str(MATVEC_MIN_GROUPS),)) == "":
        cn = next((c for c in MATVEC_CN if -(-n4 // c) >= MATVEC_ROWS_GROUPS), 1)
    groups = -(-n4 // cn)
    packed = groups * cn * 4 * -(-k4 // lanes) * lanes * 4  # matvec_pack's floats
    if forced != "matvec" and N > MATVEC_MAX_N and not texture_fits(lc, packed):
        return None
    per = max(1, min(MATVEC_MAX_WORKGROUP // lanes, groups // MATVEC_WORKGROUPS))
    return cn, per * lanes


def matvec_runs(b_bytes: int, storage: bool) -> bool:
    """Whether a ``matmul/matvec.wgsl`` lane takes one contiguous run of k steps (the template's
    ``runs``) rather than every L-th step, for a packed B of ``b_bytes`` read from a storage
    buffer (``storage``: words or vec4s; never from a uniform buffer or a texture):
    ``WEBNN_GPU_FORCE_MATMUL_MATVEC_ORDER=runs|steps``, else from :data:`MATVEC_RUNS_BYTES` on."""
    forced = _env.force_choice("matmul_matvec_order", ("runs", "steps"))
    if forced:
        return forced == "runs" and storage
    return storage and b_bytes >= MATVEC_RUNS_BYTES


def matvec_pack(data: np.ndarray, K: int, N: int, cn: int, lanes: int, data_type: str) -> Value:
    """A constant B ([K, N] array) in ``matmul/matvec.wgsl``'s layout: for each group of ``cn``
    vec4 columns and each step of 4 rows, the 4 x ``cn`` vec4s one lane loads, consecutive
    (``[G, S, 4, cn, 4]`` with the ceil(K / 4) steps padded to S, a multiple of ``lanes``; zero
    past K and N)."""
    k4, n4 = -(-K // 4), -(-N // 4)
    k4 = -(-k4 // lanes) * lanes
    groups = -(-n4 // cn)
    mat = np.zeros((k4 * 4, groups * cn * 4), dtype=data.dtype)
    mat[:K, :N] = data
    packed = mat.reshape(k4, 4, groups, cn, 4).transpose(2, 0, 1, 3, 4)
    return make_constant(packed, data_type)


def matvec_words(lc, b: np.ndarray, data_type: str, floats: int) -> str:
    """The word type of ``matmul/matvec.wgsl``'s packed B (``b_words``; ``floats`` values
    packed), or "" for the other forms (a uniform buffer or a texture): "f16" (vec4<u64> words
    of 16 float16 values: a float16 B, or a float32 ``b`` whose values are all exact float16
    ones, as a model's float16 weights widened, :func:`exact_f16`) or, past the uniform
    buffer's :data:`B_UNIFORM_FLOATS` (whose branch-free gathers read a float32 B as fast or
    faster), "f32" (8 float32 values), on the "lane-loop" profile with ``shader-int64``
    (:data:`MATVEC_WORDS`): on Mesa 22 every storage access is a loop over the lanes and the
    access's components, and a u64 component moves 2 or 4 values.
    ``WEBNN_GPU_FORCE_MATMUL_MATVEC_B=words`` takes words wherever 64-bit integers are (float32
    ones at any size), ``=f32`` words of the storage type only, ``=texture`` the uniform buffer
    or texture, ``=storage`` a storage buffer of vec4s (:func:`texture_copy`)."""
    forced = _env.force_choice("matmul_matvec_b", MATVEC_B_FORMS)
    if data_type not in ("float32", "float16") or not _words_on(lc):
        return ""
    if data_type == "float16" or forced != "f32" and exact_f16(b, subnormals=lc.tuning == "lane-loop"):
        return "f16"
    uniform = lc.tuning == "lane-loop" and not B_UNIFORM_OFF and floats <= B_UNIFORM_FLOATS
    return "" if uniform and forced not in ("words", "f32") else "f32"


def _words_on(lc) -> bool:
    """Whether :func:`matvec_words` gives words on this device for a float B (any values)."""
    forced = _env.force_choice("matmul_matvec_b", MATVEC_B_FORMS)
    return ("shader-int64" in getattr(lc, "features", ()) and forced not in ("texture", "storage")
            and (forced in ("words", "f32") or MATVEC_WORDS and lc.tuning == "lane-loop"))


def exact_f16(b: np.ndarray, *, subnormals: bool = False) -> bool:
    """Whether every value of float32 array ``b`` is a float16 value (its float16 rounding gives
    it back exactly: no NaN, nothing past float16's range), so that B stored as float16 and
    widened by ``unpack2x16float`` gives the same products; float16 subnormals only with
    ``subnormals`` (WGSL lets a driver flush them; lavapipe keeps them, which
    tests/ops/test_matvec.py checks)."""
    b = np.asarray(b, dtype=np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        h = b.astype(np.float16)
    if not np.array_equal(h.astype(np.float32), b):
        return False
    a = np.abs(b)
    return subnormals or not np.any((a > 0) & (a < np.float32(2.0 ** -14)))


def matvec_kernel(lc, a: Value, b: np.ndarray, out: Value, *, M: int, N: int, K: int, a_rs: int, o_rs: int,
                  epilogue, plan: tuple[int, int], window: dict | None = None) -> None:
    """Add one ``matmul/matvec.wgsl`` launch: out[m, n] = epilogue(sum_k A[m, k] B[k, n]) for
    the M rows of A (row m at element m * ``a_rs``, k contiguous; or with ``window``
    (:func:`matvec_window`) the windows of an NHWC conv's output pixels, gathered) and the
    constant ``b`` (a [K, N] array), out's row m at element m * ``o_rs``; ``plan`` from
    :func:`matvec_plan`.

    On Mesa 22's lavapipe a one-row product is bound by its loads of B (each a loop over the
    SIMD lanes) and by how many threads share them: the tile kernel gives such a product one
    invocation per column tile (4 invocations for 63 columns), this kernel a subgroup per
    :data:`MATVEC_CN` vec4 columns with the reduction split over its lanes."""
    matvec_heads_kernel(lc, a, [(b, out, o_rs, epilogue)], M=M, K=K, a_rs=a_rs, plan=plan, window=window)


def matvec_window(g: dict) -> dict | None:
    """The rows of an NHWC conv2d (geometry ``g``: :func:`webnn_gpu.ops.conv._geometry`, one
    group) as gathers for ``matmul/matvec.wgsl`` (its ``win`` context), or None where its input
    channels are not a multiple of 4 (a vec4 of A is 4 channels of one tap): row m is output
    pixel m (``(n * OH + oy) * OW + ox``), its k step s the vec4 ``s % C4`` of channels at tap
    ``(s / C4 / KW, s / C4 % KW)``, i.e. the filter as ``[KH * KW * C, O]`` (hwio). Each row
    carries its window's first vec4 (``base``, negative where padding precedes it) and its top
    left input pixel; ``ty`` / ``tx`` where its window reaches past the input's rows / columns
    (those taps read zeros, selected: no branch)."""
    if g["C"] % 4:
        return None
    C4, H, W = g["C"] // 4, g["H"], g["W"]
    rows = []
    for n in range(g["NB"]):
        for oy in range(g["OH"]):
            for ox in range(g["OW"]):
                y0, x0 = oy * g["sh"] - g["pt"], ox * g["sw"] - g["pl"]
                rows.append({"base": ((n * H + y0) * W + x0) * C4, "y0": y0, "x0": x0,
                             "ty": y0 < 0 or y0 + (g["KH"] - 1) * g["dh"] >= H,
                             "tx": x0 < 0 or x0 + (g["KW"] - 1) * g["dw"] >= W})
    return {"C4": C4, "KW": g["KW"], "H": H, "W": W, "dh": g["dh"], "dw": g["dw"], "ky4": g["dh"] * W * C4,
            "kx4": g["dw"] * C4, "last": g["NB"] * H * W * C4 - 1, "rows": rows}


def mean_shared(workgroup: int, lanes: int, K: int, spare: int) -> bool:
    """Whether a ``matmul/matvec.wgsl`` launch with the mean prologue (:func:`matvec_heads_kernel`'s
    ``mean``) takes the means once per workgroup into workgroup memory (a barrier) instead of in
    every subgroup for its own columns: where a workgroup holds several subgroups
    (``WEBNN_GPU_FORCE_MATVEC_MEAN=lanes`` never, ``=shared`` there too) and the ``K`` means
    (:func:`mean_shared_bytes`) fit the ``spare`` bytes of the device's workgroup memory."""
    if mean_shared_bytes(K, lanes) > spare:
        return False
    forced = _env.force_choice("matvec_mean", ("shared", "lanes"))
    return forced == "shared" or forced != "lanes" and workgroup > lanes


def mean_shared_bytes(K: int, lanes: int) -> int:
    """Bytes of workgroup memory the means of :func:`mean_shared` take: a vec4 of float32 for
    every lane's k step (``amean`` of ``matmul/matvec.wgsl``, ``KT * L`` vec4s)."""
    return 16 * -(-(-(-K // 4)) // lanes) * lanes


def mean_spare_bytes(limits, groups: int, cn: int, softmax: bool) -> int:
    """Bytes of the device's workgroup memory (``limits``) a ``matmul/matvec.wgsl`` launch with
    the mean prologue leaves for :func:`mean_shared`'s means: all of it, less the logits of the
    row's softmax (``logits``: ``groups`` column groups of ``cn`` vec4 columns, float32); below
    0 where even the logits do not fit."""
    return workgroup_bytes(limits) - (16 * groups * cn if softmax else 0)



def matvec_heads_kernel(lc, a: Value, heads: list, *, M: int, K: int, a_rs: int, plan: tuple[int, int],
                        window: dict | None = None, mean: tuple[int, int] | None = None,
                        softmax: bool = False) -> None:
    """Add one ``matmul/matvec.wgsl`` launch for several products of the same rows of A (row m
    at element m * ``a_rs``): ``heads`` lists per product ``(b, out, o_rs, epilogue)``, ``b`` its
    constant [K, N] array, ``out`` its output (row m at element m * ``o_rs``) and ``epilogue``
    its own (:func:`webnn_gpu.ops._epilogue.build`, named apart where there are several). The
    products' columns are side by side in one packed B, each from a whole column group on;
    ``plan`` (:func:`matvec_plan`) for all their columns together; ``window``: A's rows
    gathered from a conv's input (:func:`matvec_window`); ``mean`` = ``(rows, count)``: A's one
    row is the column means of ``a``, ``[rows, K]`` (a global average pool's image or partial
    sums, float32 or the products' type), summed in float32 in row order and divided by
    ``count`` as the lanes load it (the compiler's ``fuse_pooled_head``; one row, K a multiple of
    4, :func:`webnn_gpu.fusions.pooled_head.mean_loops` within :data:`LOOP_BUDGET`); ``softmax``:
    the one row's softmax over the one head's columns after its epilogue, in one workgroup of all
    the column groups (``plan``'s workgroup their subgroups; ``fuse_pooled_head``)."""
    cn, workgroup = plan
    lanes = lc.subgroup
    ctx_heads, g0, parts = [], 0, []
    for j, (b, out, o_rs, ep) in enumerate(heads):
        n = b.shape[1]
        groups = -(-(-(-n // 4)) // cn)
        ctx_heads.append({"G0": g0, "G": groups, "N": n, "o_rs": o_rs, "ep": ep,
                          "out": "out" if len(heads) == 1 else f"out{j}"})
        part = np.zeros((K, groups * cn * 4), dtype=b.dtype)
        part[:, :n] = b
        parts.append(part)
        g0 += groups
    mat = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1)
    T = heads[0][1].data_type
    bp = matvec_pack(mat, K, mat.shape[1], cn, lanes, T)
    packed = bp.data
    assert packed is not None, "matvec_pack makes a host constant"
    words = matvec_words(lc, mat, T, packed.size)
    limit = int(lc.limits.get("max-storage-buffer-binding-size", 128 << 20))
    if words and packed.size * (2 if words == "f16" else 4) > limit:
        words = ""  # past the storage binding limit: the texture (bounded by its own)
    if words == "f16" and bp.data_type != "float16":
        bp = make_constant(packed.astype(np.float16), "float16")
    ubo = uniform_copy(lc, bp) if not words else None  # float32 of up to 64 KiB on lane-loop: 1 x 256 -> 63 54 -> 45 us
    tex = texture_copy(lc, bp) if ubo is None and not words else None
    bp = ubo if ubo is not None else tex if tex is not None else bp
    a_vec = K % 4 == 0 and a_rs % 4 == 0
    assert window is None or a_vec and len(window["rows"]) == M, "matvec_window: whole vec4s, a row each"
    assert mean is None or a_vec and M == 1 and window is None, "fuse_pooled_head: one row of whole vec4s"
    assert not softmax or M == 1 and len(heads) == 1 and workgroup == g0 * lanes, "softmax: one row, one workgroup"
    k4 = -(-K // 4)
    spare = mean_spare_bytes(lc.limits, g0, cn, softmax)
    operands = [op for _, _, _, ep in heads for op in ep.operands]
    outs = [(h["out"], out) for h, (_, out, _, _) in zip(ctx_heads, heads)]
    step = lc.kernel("matmul/matvec.wgsl", [("a", a), ("b", bp)] + operands, outs,
                     g0 * lanes, workgroup=workgroup, T=wgsl_type(T), L=lanes, M=M, K=K,
                     K4=k4, KT=-(-k4 // lanes), CN=cn, G=g0, a_vec=a_vec, a_rs=a_rs, a_rs4=a_rs // 4,
                     heads=ctx_heads, fns=_epilogue.merged_functions(*[ep for _, _, _, ep in heads]),
                     b_uniform=B_UNIFORM_FLOATS // 4 if ubo is not None else 0,
                     b_texture=tex.texture_width.bit_length() - 1 if tex is not None else 0, b_words=words,
                     win=window, mean={"rows": mean[0], "count": mean[1], "f32": a.data_type == "float32",
                                       "shared": mean_shared(workgroup, lanes, K, spare)} if mean is not None else None,
                     softmax=softmax,
                     runs=matvec_runs(bp.data.size * bp.data.itemsize if bp.data is not None else 0, ubo is None and tex is None))
    n_all = sum(h["N"] for h in ctx_heads)
    step.flops = 2 * M * n_all * K
    what = (("matvec" if len(heads) == 1 else f"matvec {len(heads)} heads") + (" win" if window else "")
            + (f" mean of {mean[0]}" if mean is not None else ""))
    step.note = _size_note(M, K, n_all, 1, 1, 1, f"{what} {cn}x{workgroup}")


def _size_note(M: int, K: int, N: int, batches: int, KH: int, KW: int, variant: str) -> str:
    """``M x K -> N`` (K per filter tap, the window ``KHxKW`` and ``batches`` when not 1) and the
    variant: the size column of ``webnn-gpu profile``."""
    win = f" {KH}x{KW}" if KH * KW > 1 else ""
    bat = f" b{batches}" if batches > 1 else ""
    return f"{M}x{K}{win}->{N}{bat} {variant}"


def _sg_tile(lc, M: int, N: int, batches: int, K: int, ragged: bool = True, window: bool = False
             ) -> tuple[int, int] | None:
    """The subgroup variant's tile (:func:`choose_tile_sg`; its column blocks a divisor of the
    output's unless ``ragged``; ``window`` as there) where the context has subgroup lanes,
    ``WEBNN_GPU_FORCE_MATMUL_SG`` is not ``off`` and the padding is acceptable (:func:`sg_rows_ok`);
    else None."""
    return _sg_tile_lanes(getattr(lc, "subgroup", 0), M, N, batches, K, ragged=ragged, window=window)


def _sg_tile_lanes(lanes: int, M: int, N: int, batches: int, K: int, cost: float | None = None,
                   ragged: bool = True, window: bool = False) -> tuple[int, int] | None:
    if not lanes or _env.force("matmul_sg") == "off":
        return None
    tile = choose_tile_sg(M, N, batches, lanes, K=K, cost=cost, ragged=ragged, window=window)
    return tile if sg_rows_ok(M, tile[0], lanes) else None


def dense_tile_rows(M: int, N: int, K: int, tuning: str, lanes: int, deep: bool, up_w: int = 0) -> int:
    """The rows TM of the tile that :func:`tile_kernel` takes for a dense pointwise product of one
    batch item with vec4 loads of B and no forced tile (M x K -> N; ``lanes``: the context's
    subgroup lanes, :func:`subgroup_lanes`; ``deep``: :func:`deep_ok`; ``up_w``: the image width of
    an ``a_add_up`` operand, else 0). A launch that writes a pool's partial sums writes one row of
    them per row tile, ceil(M / TM): the compiler sizes them with this before the lowering runs."""
    tile = _sg_tile_lanes(lanes, M, N, 1, K)
    if tile is not None and up_w:
        tm = up_rows(tile[0], up_w)
        tile = (tm, tile[1]) if sg_rows_ok(M, tm, lanes) else None
    tm = tile[0] if tile is not None else choose_tile(M, N, 1, tuning, K=K if deep else 0)[0]
    return up_rows(tm, up_w) if up_w else tm


def _tile_workgroup(n_inv: int, sg: int) -> int:
    """Invocations per workgroup of a tile launch: :data:`TILE_WORKGROUP`, or
    :data:`TILE_SMALL_WORKGROUP` below four such workgroups (lavapipe runs a workgroup on one
    thread). The subgroup variant (``sg`` lanes) takes one subgroup per workgroup below
    :data:`SG_WORKGROUPS` workgroups of 64 (its launches are half as many invocations as the plain
    kernel's; 49 x 1152 -> 192, four subgroups: four workgroups instead of two, hand_landmark_full
    7-10% less wall time in two runs on a loaded machine, the same CPU time). One size for all
    those launches lets two layers whose kernels differ only in the launch's size share one
    pipeline (:func:`_twin_workgroup` cannot make an earlier launch smaller): pose_landmark_full's
    64 x 864 -> 288 (6 workgroups of 8) and its ten 256 x 64 -> 384 to 64 x 144 -> 864 launches,
    one pipeline less; measured against workgroups of 16 for the launches of 9 to 127 subgroups,
    the ten ran 0.98-1.01 of their time, both forms alternating in one process.
    ``WEBNN_GPU_FORCE_TILE_SG_WORKGROUP=16`` (read at build time) keeps 16 for those, stepping
    down to 8 where 16 would leave a thread idle at the end. From :data:`SG_WORKGROUPS`
    workgroups of 64 it takes the next smaller of the sizes 16 and 8 where the larger would leave
    a thread idle at the end (an odd count of workgroups) and the smaller ends at least 5% sooner
    on :data:`TILE_THREADS` threads: 3136 x 24 -> 144 is 1176 invocations, 19 workgroups of 64 or
    74 of 16."""
    if sg:
        keep_small = _env.force_choice("tile_sg_workgroup", (str(TILE_SMALL_WORKGROUP),)) != ""
        if n_inv <= 8 * sg or (n_inv < SG_WORKGROUPS * TILE_WORKGROUP and not keep_small):
            return sg

        def span(w):  # invocations per thread, the last round whole
            return -(-(-(-n_inv // w)) // TILE_THREADS) * w
        wg = TILE_WORKGROUP if n_inv >= SG_WORKGROUPS * TILE_WORKGROUP else TILE_SMALL_WORKGROUP
        for w in sorted({w for w in (TILE_SMALL_WORKGROUP, sg) if w < wg and w % sg == 0}, reverse=True):
            if span(w) > 0.95 * span(wg):
                break
            wg = w
        return wg
    return TILE_WORKGROUP if n_inv >= 4 * TILE_WORKGROUP else TILE_SMALL_WORKGROUP


def _workgroup_free(wgsl: str, workgroup: int) -> str:
    """A tile kernel's WGSL with its workgroup size (the attribute and the 2-D index fold) left out:
    the same for two launches that differ only in their workgroup size."""
    return wgsl.replace(f"@workgroup_size({workgroup})", "@workgroup_size()").replace(
        f"nwg.x * {workgroup}u", "nwg.x * u")


def _twin_workgroup(n_inv: int, workgroup: int, used) -> int:
    """The workgroup size for a tile launch of ``n_inv`` invocations whose own choice is
    ``workgroup`` (:func:`_tile_workgroup`), where earlier launches of the same graph built the
    same kernel with the sizes ``used``: one of those (the closest to ``workgroup``, the smaller
    on a tie), so that both launches share one pipeline, where it gives at least as many
    workgroups as ``workgroup`` (a smaller size) or at least :data:`TWIN_WORKGROUPS` (lavapipe
    runs a workgroup on one thread: 2 or 3 workgroups on 2 threads leave one idle part of the
    time, and 4 of 8 instead of 2 of 16 measured 7-10% faster on a loaded machine); else
    ``workgroup``."""
    if not used or workgroup in used:
        return workgroup
    fits = [w for w in used if w < workgroup or -(-n_inv // w) >= TWIN_WORKGROUPS]
    if not fits:
        return workgroup
    return min(fits, key=lambda w: (max(w, workgroup) / min(w, workgroup), w))


def _view_offsets(shape, st, batch_shape) -> list[int]:
    """Element offsets per batch coordinate of an operand of ``shape`` (batch dimensions, then
    its two matrix dimensions) with element strides ``st``, broadcast to ``batch_shape``."""
    r = len(batch_shape)
    own = [1] * (r - (len(shape) - 2)) + list(shape[:-2])
    ost = [0] * (r - (len(shape) - 2)) + list(st[:-2])
    return [0 if own[d] == 1 and batch_shape[d] != 1 else ost[d] for d in range(r)]


def _batch_offsets(shape, batch_shape, matrix_size: int) -> list[int]:
    """Element offsets per batch coordinate of an operand broadcast to ``batch_shape``."""
    r = len(batch_shape)
    own = [1] * (r - len(shape)) + list(shape)
    st = strides(own)
    return [0 if own[d] == 1 and batch_shape[d] != 1 else st[d] * matrix_size for d in range(r)]


def _matmul_variant() -> str:
    forced = _env.force("matmul")
    if forced and forced not in ("naive", "tile", "tile_scalar", "small", "matvec"):
        raise ValueError(f"WEBNN_GPU_FORCE_MATMUL={forced!r}: expected naive, tile, tile_scalar, small or matvec")
    return forced


def _lower_product(node, lc, a: Value, b: Value, *, M, N, K, batch_shape, a_bst, b_bst, a_rs, a_ks, b_ks, b_ns,
                   steps, b_cols=None, o_bst=None, o_sp=None) -> None:
    """Lower out = A x B (+ epilogue steps) with the chosen variant. ``o_bst`` / ``o_sp``: the
    output's batch offsets and row stride where it is not stored row-major (``out_view``)."""
    out = node.outputs[0]
    ep = _epilogue.build(node, out, steps, chan_axis=len(out.shape) - 1)
    variant = _matmul_variant()
    strided_out = o_bst is not None
    o_bst = [s * M * N for s in strides(batch_shape)] if o_bst is None else list(o_bst)
    o_sp = N if o_sp is None else o_sp
    bdata = constant_array(b) if not batch_shape and not strided_out and a_ks == 1 else None
    plan = matvec_plan(lc, M, N, K) if bdata is not None else None
    if plan is not None and bdata is not None:
        idx = np.arange(K)[:, None] * b_ks + np.arange(N)[None, :] * b_ns
        matvec_kernel(lc, a, bdata.reshape(-1)[idx], out, M=M, N=N, K=K, a_rs=a_rs, o_rs=o_sp, epilogue=ep,
                      plan=plan)
        return
    chunks = k_chunks(K, naive=variant == "naive")
    if chunks is not None:
        lower_split_k(lc, node, a, b, ep, chunks, M=M, N=N, K=K, batch_shape=list(batch_shape), a_bst=list(a_bst),
                     b_bst=list(b_bst), o_bst=o_bst, o_sp=o_sp, a_rs=a_rs, a_ks=a_ks, b_ks=b_ks, b_ns=b_ns,
                     b_cols=b_cols, vec=variant != "tile_scalar")
        return
    if not strided_out and (variant == "naive" or (not variant and M * N * math.prod(batch_shape or [1]) < 64
                                                  and K <= 64)):
        lc.kernel("matmul/naive.wgsl", [("a", a), ("b", b)] + ep.operands, [("out", out)], out.size,
                  T=wgsl_type(out.data_type), M=M, N=N, K=K, batch_strides=strides(batch_shape), a_bst=a_bst,
                  b_bst=b_bst, a_rs=a_rs, a_ks=a_ks, b_ks=b_ks, b_ns=b_ns, ep=ep)
        return
    vec = variant != "tile_scalar"
    small_ok = variant in ("", None, "small")
    gi = given_operand(node, out, steps, M, N, K, math.prod(batch_shape) if batch_shape else 1)
    if gi is not None:
        ep = _epilogue.build(node, out, steps, chan_axis=len(out.shape) - 1, given=gi)
    tile_kernel(lc, a, b, out, M=M, N=N, batch_shape=batch_shape, a_bst=a_bst, b_bst=b_bst, o_bst=o_bst,
                a_rs=a_rs, a_ks=a_ks, a_vec=vec, b_ks=b_ks, b_ns=b_ns, b_vec=vec, b_cols=b_cols,
                o_P=M, o_sn=0, o_sp=o_sp, o_so=1, KC=K, epilogue=ep, small_ok=small_ok,
                given=node.inputs[gi] if gi is not None else None)


def _pack_b(b: Value, K: int, N: int, transposed: bool):
    """A constant B re-laid out as row-major [K, N4] (N padded to a multiple of 4), or None."""
    data = constant_array(b)
    if data is None:
        return None
    mat = data.T if transposed else data
    n4 = -(-N // 4) * 4
    if not transposed and n4 == N:
        return None  # already what the kernel wants
    packed = np.zeros((K, n4), dtype=data.dtype)
    packed[:, :N] = mat
    return make_constant(packed, b.data_type), n4


# ---------------------------------------------------------------- matmul
def _float_pair(self, op, label, a, b, arg_a="a", arg_b="b"):
    va = self._operand(op, label, arg_a, a)
    vb = self._operand(op, label, arg_b, b)
    if va.data_type not in FLOATS:
        V.fail(op, label, arg_a, "an operand of data type float32 or float16", va.data_type)
    if vb.data_type != va.data_type:
        V.fail(op, label, arg_b, f"the data type of {arg_a!r} ({va.data_type})", vb.data_type)
    return va, vb


# IDL: MLOperand matmul(MLOperand a, MLOperand b, optional MLOperatorOptions options = {});
@builder_method
def matmul(self: MLGraphBuilder, a: MLOperand, b: MLOperand, *, label: str = "", **kwargs) -> MLOperand:
    """Matrix product of the last two dimensions, broadcasting the leading (batch) ones.

    Spec: https://www.w3.org/TR/webnn/#api-mlgraphbuilder-matmul

    Arguments:
        a (MLOperand): float32 or float16, shape ``[..., M, K]`` (rank >= 2).
        b (MLOperand): same data type, shape ``[..., K, N]`` (rank >= 2).
        label (str): a name for errors and GPU objects.

    Returns:
        MLOperand: shape ``broadcast(a[:-2], b[:-2]) + [M, N]``, the data type of ``a``.

    Raises:
        MLTypeError: a rank below 2, mismatched data types, a non-float data type,
            ``a.shape[-1] != b.shape[-2]``, batch dimensions that do not broadcast.
    """
    op = "matmul"
    V.check_kwargs(op, label, kwargs)
    self._check_usable(op, label)
    va, vb = _float_pair(self, op, label, a, b)
    for arg, v in (("a", va), ("b", vb)):
        if len(v.shape) < 2:
            V.fail(op, label, arg, "an operand of rank >= 2", Shown(f"shape {list(v.shape)}"))
    if va.shape[-1] != vb.shape[-2]:
        V.fail(op, label, "b", f"shape[-2] equal to a.shape[-1] ({va.shape[-1]})", Shown(f"shape {list(vb.shape)}"))
    batch = V.broadcast_shapes(op, label, va.shape[:-2], vb.shape[:-2])
    shape = tuple(batch) + (va.shape[-2], vb.shape[-1])
    return self._emit1(op, [va, vb], va.data_type, shape, label=label)


support("matmul", {"a": (FLOATS, (2, V.MAX_RANK)), "b": (FLOATS, (2, V.MAX_RANK))}, (FLOATS, (2, V.MAX_RANK)))


@lowering("matmul")
def lower_matmul(node, lc) -> None:
    """matmul: the tile kernel over the broadcast batch (constant b packed when unaligned).

    ``attrs["a_transpose"]`` (set by the compiler's ``fold_matmul_transpose``, not by the
    builder): ``a`` holds the transpose of its last two dimensions and is read through swapped
    strides."""
    if any(k in node.attrs for k in ("a_view", "b_view", "out_view")):
        _lower_matmul_views(node, lc)
        return
    a, b = node.inputs[0], node.inputs[1]
    at, bt = bool(node.attrs.get("a_transpose")), False
    out = node.outputs[0]
    M, N = out.shape[-2], out.shape[-1]
    K = a.shape[-2] if at else a.shape[-1]
    batch_shape = list(out.shape[:-2])
    if len(b.shape) == 2 and batch_shape and not at:
        # One matrix b for every batch of a row-major a: the batches are more rows of a
        # single product (a taller tile grid instead of many short ones).
        M, batch_shape = M * math.prod(batch_shape), []
    a_rs, a_ks = (1, M) if at else (K, 1)
    b_ks, b_ns, b_cols = (1, K, None) if bt else (N, 1, None)
    if len(b.shape) == 2:
        packed = _pack_b(b, K, N, bt)
        if packed is not None:
            b, b_cols = packed
            b_ks, b_ns = b_cols, 1
    _lower_product(node, lc, a, b, M=M, N=N, K=K, batch_shape=batch_shape,
                   a_bst=_batch_offsets(a.shape[:-2], batch_shape, M * K),
                   b_bst=_batch_offsets(b.shape[:-2], batch_shape, K * (b_cols or N)),
                   a_rs=a_rs, a_ks=a_ks, b_ks=b_ks, b_ns=b_ns, steps=_epilogue.steps_of(node), b_cols=b_cols)


def _views(node):
    """A matmul node's operands as it reads them: (A's shape, A's element strides, B's shape, B's
    strides, the batch shape, the output's strides per dimension of ``batch + [M, N]``), with
    ``a_transpose``, ``a_view``, ``b_view`` and ``out_view`` (the compiler's) applied."""
    a, b = node.inputs[0], node.inputs[1]
    a_shape, a_st = node.attrs.get("a_view") or (tuple(a.shape), tuple(strides(a.shape)))
    if node.attrs.get("a_transpose"):  # a holds the transpose of its last two dimensions
        a_shape = tuple(a_shape[:-2]) + (a_shape[-1], a_shape[-2])
        a_st = tuple(a_st[:-2]) + (a_st[-1], a_st[-2])
    b_shape, b_st = node.attrs.get("b_view") or (tuple(b.shape), tuple(strides(b.shape)))
    r = max(len(a_shape), len(b_shape))
    batch = [max(x, y) for x, y in zip([1] * (r - len(a_shape)) + list(a_shape[:-2]),
                                       [1] * (r - len(b_shape)) + list(b_shape[:-2]))]
    out_st = node.attrs.get("out_view") or tuple(strides(batch + [a_shape[-2], b_shape[-1]]))
    return a_shape, a_st, b_shape, b_st, batch, tuple(out_st)


def _lower_matmul_views(node, lc) -> None:
    """matmul with operands read through strides or an output stored permuted (the compiler's
    ``fold_matmul_views``): ``attrs["a_view"]`` / ``attrs["b_view"]`` = (shape, element strides)
    of the operand as the product reads it from its input (a contiguous value of another shape);
    ``attrs["out_view"]`` = element strides of each dimension of the natural
    ``[batch..., M, N]`` output in the node's output (columns contiguous). Batch dimensions of
    size 1 are dropped (fewer index terms; one batch dimension left can take
    ``matmul/small.wgsl``)."""
    a_shape, a_st, b_shape, b_st, batch, out_st = _views(node)
    M, K, N = a_shape[-2], a_shape[-1], b_shape[-1]
    a_bst = _view_offsets(a_shape, a_st, batch)
    b_bst = _view_offsets(b_shape, b_st, batch)
    o_bst = list(out_st[:-2])
    keep = [d for d in range(len(batch)) if batch[d] != 1]
    _lower_product(node, lc, node.inputs[0], node.inputs[1], M=M, N=N, K=K, batch_shape=[batch[d] for d in keep],
                   a_bst=[a_bst[d] for d in keep], b_bst=[b_bst[d] for d in keep],
                   a_rs=a_st[-2], a_ks=a_st[-1], b_ks=b_st[-2], b_ns=b_st[-1], steps=_epilogue.steps_of(node),
                   o_bst=[o_bst[d] for d in keep], o_sp=out_st[-2])


#: One invocation per query row of an attention block (``matmul/attention.wgsl``) up to this
#: many keys (the row's scores are kept in a private array) ...
ATTENTION_MAX_KEYS = 128
#: ... and this depth of the queries and values (vec4 registers).
ATTENTION_MAX_DEPTH = 64
#: Query rows per invocation: each key and value vector is loaded once for them (one row per
#: invocation loaded all of K and V for every row: ViT's 65 x 16 x 65 heads took as long as the
#: three kernels).
ATTENTION_ROWS = 4


def attention_kernel(node, lc) -> bool:
    """Lower an ``attention`` node (``webnn_gpu.fusions.attention``) as one
    ``matmul/attention.wgsl`` launch where it applies, and return whether it did: float32 or
    float16 (every operand and both products of the one type), no reshapes between the products
    and the softmax other than ones keeping the shape, the two products over the same batch and
    rows, at most :data:`ATTENTION_MAX_KEYS` keys, depths that
    are multiples of 4 up to :data:`ATTENTION_MAX_DEPTH`, q, k and v readable as vec4 along the
    depth (through the products' views: a key matrix transposed by ``fold_matmul_views`` is).

    One invocation per :data:`ATTENTION_ROWS` query rows computes their scores (q . k_j with the
    scores' epilogue, a scale or a mask; each k_j and v_j loaded once for the rows), the softmax as ``norm/softmax.wgsl`` does (max, sum of exponentials, each
    probability e / sum), and the probabilities times v with the context's epilogue, stored
    through the context's output view: one launch instead of three, no scores or probabilities
    in memory. float16 values are loaded and widened, all arithmetic is float32 and each output
    is rounded to float16 once, at its store (the three kernels round the scores and the
    probabilities too). ``WEBNN_GPU_FORCE_ATTENTION=split`` keeps the three kernels (for
    measurements).
    """
    att = node.attrs
    scores, softmax, context = att.scores, att.softmax, att.context
    if _env.force("attention") == "split" or softmax.attrs.get("epilogue"):
        return False
    for v in (att.before, att.after):
        if v is not None and tuple(v.inputs[0].shape) != tuple(v.outputs[0].shape):
            return False
    dt = scores.outputs[0].data_type
    if (context.attrs.get("a_transpose") or "a_view" in context.attrs or "out_view" in scores.attrs
            or dt not in FLOATS or context.outputs[0].data_type != dt):
        return False
    if any(v is not None and v.data_type != dt for n in (scores, context) for v in n.inputs):
        return False
    q_shape, q_st, k_shape, k_st, s_batch, _ = _views(scores)
    p_shape, _, v_shape, v_st, c_batch, o_st = _views(context)
    M, D, L, Dv = q_shape[-2], q_shape[-1], k_shape[-1], v_shape[-1]
    if tuple(scores.outputs[0].shape) != tuple(s_batch) + (M, L) or list(s_batch) != list(c_batch):
        return False
    if tuple(p_shape) != tuple(s_batch) + (M, L) or v_shape[-2] != L or softmax.attrs.get("axis") != len(p_shape) - 1:
        return False
    if L > ATTENTION_MAX_KEYS or D > ATTENTION_MAX_DEPTH or Dv > ATTENTION_MAX_DEPTH or D % 4 or Dv % 4:
        return False
    q_bst = _view_offsets(q_shape, q_st, s_batch)
    k_bst = _view_offsets(k_shape, k_st, s_batch)
    v_bst = _view_offsets(v_shape, v_st, s_batch)
    o_bst = list(o_st[:-2])
    vec = (q_st[-1] == 1 and k_st[-2] == 1 and v_st[-1] == 1 and o_st[-1] == 1
           and all(x % 4 == 0 for x in [*q_bst, *k_bst, *v_bst, *o_bst, q_st[-2], k_st[-1], v_st[-2], o_st[-2]]))
    if not vec:
        return False
    keep = [d for d in range(len(s_batch)) if s_batch[d] != 1]
    batch = [s_batch[d] for d in keep]
    ep_s = _epilogue.build(scores, scores.outputs[0], _epilogue.steps_of(scores),
                           chan_axis=len(scores.outputs[0].shape) - 1)
    out = context.outputs[0]
    ep_c = _epilogue.build(context, out, _epilogue.steps_of(context), chan_axis=len(out.shape) - 1,
                           first_binding="c", name="ctx_epilogue")
    q, k, v = scores.inputs[0], scores.inputs[1], context.inputs[1]
    R = math.prod(s_batch) * M
    tr = min(ATTENTION_ROWS, M)
    mt = -(-M // tr)
    n_inv = math.prod(s_batch) * mt
    step = lc.kernel("matmul/attention.wgsl", [("q", q), ("k", k), ("v", v)] + ep_s.operands + ep_c.operands,
                     [("out", out)], n_inv, workgroup=TILE_SMALL_WORKGROUP if n_inv >= 4 * TILE_SMALL_WORKGROUP else 8,
                     T=wgsl_type(dt), n_inv=n_inv, M=M, TR=tr, MT=mt, D=D, L=L, Dv=Dv, batch_strides=strides(batch),
                     q_bst=[q_bst[d] // 4 for d in keep], k_bst=[k_bst[d] // 4 for d in keep],
                     v_bst=[v_bst[d] // 4 for d in keep], o_bst=[o_bst[d] for d in keep],
                     q_rs=q_st[-2] // 4, k_ns=k_st[-1] // 4, v_ks=v_st[-2] // 4, o_sp=o_st[-2], ep=ep_s, ep2=ep_c,
                     fns=_epilogue.merged_functions(ep_s, ep_c))
    step.flops = 2 * R * L * (D + Dv)
    step.note = f"{M}x{D}x{L}->{Dv} b{R // M}"
    return True


@lowering("matmul_layer_norm", "matmul_softmax")
def lower_matmul_rows(node, lc) -> None:
    """matmul_layer_norm / matmul_softmax (the compiler's ``fuse_matmul_layer_norm`` and
    ``fuse_matmul_softmax``): ``matmul/layer_norm.wgsl``, one invocation per row: the product
    (a matmul or a gemm) with its epilogue (also stored where the node has a second output),
    then the layer normalization or the softmax of the row with its own epilogue. B is packed
    to a multiple of 4 columns (a uniform buffer where it fits). float16: a float16 B is widened
    to float32 (exactly: the float32 kernel's B), the other values are loaded as float16 and
    widened, all arithmetic is float32 and each output is rounded to float16 once, at its store
    (the two kernels round the product too)."""
    from types import SimpleNamespace

    from .norm import _literal

    split = node.attrs["split"]
    mm_inputs, row_inputs = node.inputs[:split], node.inputs[split:]
    a, b = mm_inputs[0], mm_inputs[1]
    out = node.outputs[0]
    if b.data_type == "float16":
        data = constant_array(b)
        assert data is not None  # fuse_matmul_* take constant weights only
        b = make_constant(data.astype(np.float32), "float32")
    gemm = node.attrs.get("product_op") == "gemm"
    bt = gemm and node.attrs["product"]["b_transpose"]
    K, N = (b.shape[::-1] if bt else b.shape)
    R = out.size // N
    product = SimpleNamespace(op="gemm" if gemm else "matmul", inputs=list(mm_inputs), attrs=node.attrs["product"])
    softmax = node.op == "matmul_softmax"
    rowop = SimpleNamespace(op="softmax" if softmax else "layer_normalization", inputs=[None, *row_inputs],
                            attrs=node.attrs["norm"])
    ep = _epilogue.build(product, out, gemm_steps(product) if gemm else _epilogue.steps_of(product),
                         chan_axis=len(out.shape) - 1)
    ep2 = _epilogue.build(rowop, out, _epilogue.steps_of(rowop), chan_axis=len(out.shape) - 1, first_binding="f",
                          name="norm_epilogue")
    packed = _pack_b(b, K, N, bt)
    bm = packed[0] if packed is not None else b
    ubo = uniform_copy(lc, bm)
    sc, bi = (list(row_inputs) + [None, None])[:2] if not softmax else (None, None)
    ins = [("a", a), ("b", ubo if ubo is not None else bm)] + ep.operands
    ins += [(n, v) for n, v in (("scale", sc), ("bias", bi)) if v is not None] + ep2.operands
    wg = 8 if R <= 4 * TILE_SMALL_WORKGROUP else TILE_SMALL_WORKGROUP
    outs = [("out", out)] + ([("prod", node.outputs[1])] if len(node.outputs) > 1 else [])
    step = lc.kernel("matmul/layer_norm.wgsl", ins, outs, R, workgroup=wg, T=wgsl_type(out.data_type), R=R, K=K,
                     N=N, keep=len(outs) > 1,
                     a_vec=K % 4 == 0, b_uniform=B_UNIFORM_FLOATS // 4 if ubo is not None else 0,
                     softmax=softmax, has_scale=sc is not None, has_bias=bi is not None,
                     epsilon=_literal(node.attrs["norm"].get("epsilon", 0.0)), ep=ep, ep2=ep2,
                     fns=_epilogue.merged_functions(ep, ep2))
    step.flops = 2 * R * N * K
    step.note = _size_note(R, K, N, 1, 1, 1, ("softmax" if softmax else "layer_norm") + (" ubo" if ubo is not None else ""))


#: Invocations of the one workgroup of ``matmul/dense_chain.wgsl``.
CHAIN_WORKGROUP = 64


@lowering("dense_chain")
def lower_dense_chain(node, lc) -> None:
    """dense_chain (the compiler's ``fuse_dense_chain``): ``matmul/dense_chain.wgsl``, one
    workgroup computing one-row dense layers in turn (each B re-laid out row-major ``[K, N]``
    with columns zero-padded to a multiple of 4, each layer's epilogue with its own names).
    float16: the weights widened to float32 (exactly), the input and the epilogue operands
    loaded as float16 and widened, all arithmetic and the rows between layers float32, each
    output rounded to float16 once, at its store (the layer kernels round every layer's row)."""
    from types import SimpleNamespace

    from ..compiler.rules.dense_chain import CHAIN_MAX_N

    layers, at, widths = [], 1, []
    prev = node.inputs[0]
    for i, (op, attrs, n_in) in enumerate(node.attrs["layers"]):
        ins = [prev] + list(node.inputs[at:at + n_in])
        at += n_in
        b = ins[1]
        bt = op == "gemm" and attrs.get("b_transpose")
        K, N = b.shape[::-1] if bt else b.shape
        last = i == len(node.attrs["layers"]) - 1
        out = node.outputs[0] if last else SimpleNamespace(shape=(1, N), data_type=node.outputs[0].data_type)
        layer = SimpleNamespace(op=op, inputs=ins, attrs=attrs)
        steps = gemm_steps(layer) if op == "gemm" else _epilogue.steps_of(layer)
        ep = _epilogue.build(layer, out, steps, chan_axis=1, first_binding=f"l{i}e", name=f"layer{i}")
        data = constant_array(b)
        assert data is not None  # fuse_dense_chain takes constant weights only
        packed = np.zeros((K, -(-N // 4) * 4), np.float32)
        packed[:, :N] = data.T if bt else data
        layers.append(SimpleNamespace(K=K, N=N, b=f"w{i}", B=make_constant(packed, "float32"), ep=ep))
        if not last:
            widths.append(N)
        prev = SimpleNamespace(shape=(1, N))
    assert max(widths) <= CHAIN_MAX_N
    ins = [("x", node.inputs[0])]
    for layer in layers:
        ins += [(layer.b, layer.B)] + layer.ep.operands
    step = lc.kernel("matmul/dense_chain.wgsl", ins, [("out", node.outputs[0])], CHAIN_WORKGROUP,
                     groups=(1, 1, 1), workgroup=CHAIN_WORKGROUP, T=wgsl_type(node.outputs[0].data_type),
                     layers=layers, width=max(widths),
                     fns=_epilogue.merged_functions(*[layer.ep for layer in layers]))
    step.flops = 2 * sum(layer.K * layer.N for layer in layers)
    step.note = " -> ".join([str(layers[0].K)] + [str(layer.N) for layer in layers]) + " chain"


# ---------------------------------------------------------------- gemm
# IDL: MLOperand gemm(MLOperand a, MLOperand b, optional MLGemmOptions options = {});
@builder_method
def gemm(self: MLGraphBuilder, a: MLOperand, b: MLOperand, *, c: MLOperand | None = None, alpha: float = 1.0,
         beta: float = 1.0, a_transpose: bool = False, b_transpose: bool = False, label: str = "",
         **kwargs) -> MLOperand:
    """General matrix multiplication: ``alpha * A' x B' + beta * c``.

    Spec: https://www.w3.org/TR/webnn/#api-mlgraphbuilder-gemm

    Arguments:
        a (MLOperand): 2-D float32 or float16, ``[M, K]`` (``[K, M]`` with ``a_transpose``).
        b (MLOperand): 2-D, same data type, ``[K, N]`` (``[N, K]`` with ``b_transpose``).
        c (MLOperand | None): same data type, unidirectionally broadcastable to ``[M, N]``.
        alpha (float): multiplies the product (default 1).
        beta (float): multiplies ``c`` (default 1).
        a_transpose (bool): use the transpose of ``a``.
        b_transpose (bool): use the transpose of ``b``.
        label (str): a name for errors and GPU objects.

    Returns:
        MLOperand: ``[M, N]`` of the data type of ``a``.

    Raises:
        MLTypeError: ranks other than 2, mismatched or non-float data types, mismatched
            inner dimensions, a ``c`` that does not broadcast to ``[M, N]``, non-number
            ``alpha``/``beta``, non-bool transposes.
    """
    op = "gemm"
    V.check_kwargs(op, label, kwargs)
    self._check_usable(op, label)
    va, vb = _float_pair(self, op, label, a, b)
    vc = self._operand(op, label, "c", c, optional=True)
    alpha = V.float_value(op, label, "alpha", alpha)
    beta = V.float_value(op, label, "beta", beta)
    a_transpose = V.bool_value(op, label, "a_transpose", a_transpose)
    b_transpose = V.bool_value(op, label, "b_transpose", b_transpose)
    for arg, v in (("a", va), ("b", vb)):
        if len(v.shape) != 2:
            V.fail(op, label, arg, "a 2-D operand", Shown(f"shape {list(v.shape)}"))
    M, K = va.shape[::-1] if a_transpose else va.shape
    Kb, N = vb.shape[::-1] if b_transpose else vb.shape
    if K != Kb:
        V.fail(op, label, "b", f"{'shape[1]' if b_transpose else 'shape[0]'} equal to the inner dimension of a ({K})",
               Shown(f"shape {list(vb.shape)}{' with b_transpose' if b_transpose else ''}"))
    if vc is not None:
        if vc.data_type != va.data_type:
            V.fail(op, label, "c", f"the data type of 'a' ({va.data_type})", vc.data_type)
        V.unidirectional_broadcast(op, label, "c", vc.shape, (M, N))
    attrs = {"alpha": alpha, "beta": beta, "a_transpose": a_transpose, "b_transpose": b_transpose}
    inputs = [va, vb] + ([vc] if vc is not None else [])
    return self._emit1(op, inputs, va.data_type, (M, N), attrs, label=label)


support("gemm", {"a": (FLOATS, (2, 2)), "b": (FLOATS, (2, 2)), "c": (FLOATS, (0, 2))}, (FLOATS, (2, 2)))


def gemm_steps(node) -> list[dict]:
    """A gemm node's epilogue steps as its kernels apply them: ``alpha`` and ``beta * c`` first,
    then ``attrs["epilogue"]``."""
    steps: list[dict] = []
    if node.attrs["alpha"] != 1.0:
        steps.append({"op": "linear", "alpha": node.attrs["alpha"], "beta": 0.0})
    if len(node.inputs) > 2 and node.inputs[2] is not None:
        beta = node.attrs["beta"]
        steps.append({"op": "add", "input": 2, **({"scale": beta} if beta != 1.0 else {})})
    return steps + _epilogue.steps_of(node)


@lowering("gemm")
def lower_gemm(node, lc) -> None:
    """gemm: the tile kernel; alpha and beta * c become the first epilogue steps."""
    a, b = node.inputs[0], node.inputs[1]
    at, bt = node.attrs["a_transpose"], node.attrs["b_transpose"]
    M, N = node.outputs[0].shape
    K = a.shape[0] if at else a.shape[1]
    if at:
        packed_a = constant_array(a)
        if packed_a is not None:
            a, at = make_constant(packed_a.T, a.data_type), False
    a_rs, a_ks = (1, M) if at else (K, 1)
    b_cols = None
    packed = _pack_b(b, K, N, bt)
    if packed is not None:
        b, b_cols = packed
        b_ks, b_ns = b_cols, 1
    else:
        b_ks, b_ns = (1, K) if bt else (N, 1)
    steps = gemm_steps(node)
    _lower_product(node, lc, a, b, M=M, N=N, K=K, batch_shape=[], a_bst=[], b_bst=[], a_rs=a_rs, a_ks=a_ks,
                   b_ks=b_ks, b_ns=b_ns, steps=steps, b_cols=b_cols)


# ---------------------------------------------------------------- heads: products of the same rows
#: Attributes a product may carry as one of ``heads`` (any other one, an input prologue or a
#: second output a rule added, keeps it out).
_HEAD_ATTRS = {"matmul": {"epilogue"}, "gemm": {"alpha", "beta", "a_transpose", "b_transpose", "epilogue"},
               "conv2d": {"padding", "strides", "dilations", "groups", "input_layout", "filter_layout", "epilogue"}}


def matvec_head(node) -> tuple[int, int, int, np.ndarray, list] | None:
    """``(M, K, N, B, steps)`` of ``node`` as one product of a ``heads`` node: a float32 or
    float16 matmul or gemm of a dense row-major A (``[M, K]``, or with leading axes of size 1)
    by a constant 2-D B (``B`` the ``[K, N]`` array, a gemm's maybe transposed), or an NHWC
    conv2d of one group with a constant filter whose input is rows of a product (a window
    covering the whole input without padding: one output pixel per image; or a 1x1 conv of
    stride 1: a row per pixel), with no attribute but its own and its epilogue (``steps``: a
    gemm's alpha and beta * c, a conv's bias first), or None."""
    if node.op not in _HEAD_ATTRS or len(node.outputs) != 1 or any(k not in _HEAD_ATTRS[node.op] for k in node.attrs):
        return None
    a, b, out = node.inputs[0], node.inputs[1], node.outputs[0]
    if out.data_type not in FLOATS or a.data_type != out.data_type or b.data_type != out.data_type:
        return None
    if b.kind != "constant" or math.prod(out.shape[:-1]) > matvec_rows():  # before any copy of B
        return None
    data = constant_array(b)
    if node.op == "conv2d":
        return _conv_head(node, data)
    if data is None or len(b.shape) != 2 or node.attrs.get("a_transpose") or len(a.shape) < 2:
        return None
    if any(d != 1 for d in a.shape[:-2]) or any(d != 1 for d in out.shape[:-2]):
        return None
    M, K = a.shape[-2], a.shape[-1]
    mat = data.reshape(b.shape)
    if node.op == "gemm" and node.attrs.get("b_transpose"):
        mat = mat.T
    if mat.shape[0] != K or out.shape[-2:] != (M, mat.shape[1]):
        return None
    steps = gemm_steps(node) if node.op == "gemm" else _epilogue.steps_of(node)
    return M, K, mat.shape[1], mat, steps


def _conv_head(node, data: np.ndarray | None) -> tuple[int, int, int, np.ndarray, list] | None:
    """:func:`matvec_head` of a conv2d (its conditions there)."""
    from .conv import _geometry, conv_steps

    if data is None or node.attrs["input_layout"] != "nhwc" or _env.force("conv"):
        return None
    g = _geometry(node)
    if g["G"] != 1:
        return None
    pointwise = (g["KH"] == g["KW"] == 1 and g["sh"] == g["sw"] == 1 and g["pt"] == g["pl"] == 0
                 and (g["OH"], g["OW"]) == (g["H"], g["W"]))
    whole = (g["OH"] == g["OW"] == 1 and (g["KH"], g["KW"]) == (g["H"], g["W"]) and g["pt"] == g["pl"] == 0
             and (g["dh"] == 1 or g["KH"] == 1) and (g["dw"] == 1 or g["KW"] == 1))
    if not (pointwise or whole):
        return None
    M, K, O = g["NB"] * g["OH"] * g["OW"], g["KH"] * g["KW"] * g["C"], g["O"]
    perm = [node.attrs["filter_layout"].index(ch) for ch in "hwio"]
    mat = np.transpose(data.reshape(node.inputs[1].shape), perm).reshape(K, O)
    return M, K, O, mat, conv_steps(node, "nhwc", True)


@lowering("heads")
def lower_heads(node, lc) -> None:
    """heads (the compiler's ``fuse_heads``, :mod:`webnn_gpu.fusions.heads`): the products of
    ``attrs.heads``, all reading the same A, as one ``matmul/matvec.wgsl`` launch
    (:func:`matvec_heads_kernel`): their B side by side, each product's epilogue and output its
    own. ``node.outputs`` are the products' outputs in that order."""
    M, K, heads = head_products(node.attrs.heads)
    plan = matvec_plan(lc, M, sum(-(-N // 4) * 4 for _, _, N, _ in heads), K)
    if plan is None:  # fuse_heads checked it with this device's profile
        raise AssertionError(f"{lc.label}: heads without a matvec plan")
    matvec_heads_kernel(lc, node.inputs[0], heads, M=M, K=K, a_rs=K, plan=plan)


def head_products(products) -> tuple[int, int, list]:
    """``(M, K, heads)`` of products that :func:`matvec_head` accepts, all of the same M and K:
    ``heads`` as :func:`matvec_heads_kernel` takes them, ``(B, out, N, epilogue)`` per product,
    the epilogues named apart (``ep0``, ``ep1``, ...; bindings ``h0e...``)."""
    heads, M, K = [], 0, 0
    for j, h in enumerate(products):
        head = matvec_head(h)
        assert head is not None  # the rules checked each product
        M, K, N, mat, steps = head
        out = h.outputs[0]
        ep = _epilogue.build(h, out, steps, chan_axis=len(out.shape) - 1, first_binding=f"h{j}e", name=f"ep{j}")
        heads.append((mat, out, N, ep))
    return M, K, heads


# ---------------------------------------------------------------- two products in one launch
#: Attributes a product may carry into ``matmul/mlp.wgsl`` (any other one, an input prologue or a
#: second output a rule added, keeps it out).
_MLP_ATTRS = {"matmul": {"epilogue"}, "gemm": {"alpha", "beta", "a_transpose", "b_transpose", "epilogue"},
              "conv2d": {"padding", "strides", "dilations", "groups", "input_layout", "filter_layout", "epilogue"}}
#: ``matmul/mlp.wgsl``: most rows per invocation ...
MLP_MAX_TM = 4
#: ... and vec4 column blocks of a column tile (the tile kernel's subgroup variant takes up to 12).
MLP_MAX_TN4 = 8


def mlp_product(node) -> tuple[int, int, int] | None:
    """(M, K, N) of ``node`` as one side of ``matmul/mlp.wgsl``, or None: a float32 or float16
    product of a dense row-major A by a constant 2-D B (``[K, N]``, a gemm's maybe transposed; no
    transposed A, no operand views), or an NHWC pointwise conv2d with a constant filter (rows the
    pixels), with no attribute but its own and its epilogue, and K and N multiples of 4 (vec4
    loads and stores)."""
    if node.op not in _MLP_ATTRS or len(node.outputs) != 1 or any(k not in _MLP_ATTRS[node.op] for k in node.attrs):
        return None
    a, b, out = node.inputs[0], node.inputs[1], node.outputs[0]
    if out.data_type not in FLOATS or a.data_type != out.data_type or b.data_type != out.data_type:
        return None
    if constant_array(b) is None:
        return None
    if node.op == "conv2d":
        from .conv import _conv_variant, _geometry

        if node.attrs["input_layout"] != "nhwc":
            return None
        g = _geometry(node)
        if _conv_variant(g, "nhwc") != "pointwise":
            return None
        M, K, N = g["NB"] * g["H"] * g["W"], g["C"], g["O"]
    else:
        if node.attrs.get("a_transpose") or len(b.shape) != 2 or tuple(a.shape[:-1]) != tuple(out.shape[:-1]):
            return None
        K, N = b.shape[::-1] if node.op == "gemm" and node.attrs.get("b_transpose") else b.shape
        M = math.prod(out.shape[:-1])
    return (M, K, N) if K % 4 == 0 and N % 4 == 0 else None


def mlp_plan(M: int, K: int, H: int, N: int, lanes: int, wg_bytes: int) -> tuple[int, int, int] | None:
    """(TM, TN1, TN2) of ``matmul/mlp.wgsl`` for ``[M, K] x [K, H] x [H, N]`` on subgroups of
    ``lanes`` with ``wg_bytes`` of workgroup memory, or None where it does not fit.

    A workgroup is one subgroup; each invocation keeps its TM hidden rows (``TM x H`` float32) in
    workgroup memory, so ``lanes x TM x H x 4 <= wg_bytes``. TM (at most :data:`MLP_MAX_TM`) is the
    one computing the fewest padded rows (invocations are padded to whole subgroups), among those
    giving two workgroups (both of lavapipe's threads) where M allows, the larger on ties; TN1 /
    TN2 are the largest divisors of H / 4 and N / 4 up to :data:`MLP_MAX_TN4`. None also where an
    invocation's loops would pass :data:`LOOP_BUDGET`."""
    if lanes < 1 or K % 4 or H % 4 or N % 4:
        return None
    fits = [t for t in range(1, MLP_MAX_TM + 1) if lanes * t * H * 4 <= wg_bytes]
    if not fits:
        return None

    def padded(t):
        return -(-(-(-M // t)) // lanes) * lanes * t

    two = [t for t in fits if -(-M // (t * lanes)) >= 2] or fits
    tm = min(two, key=lambda t: (padded(t), -t))
    tn1 = max(d for d in range(1, MLP_MAX_TN4 + 1) if (H // 4) % d == 0)
    tn2 = max(d for d in range(1, MLP_MAX_TN4 + 1) if (N // 4) % d == 0)
    if mlp_loop_iterations(K, H, N, tm, tn1, tn2) > LOOP_BUDGET:
        return None
    return tm, tn1, tn2


def mlp_loop_iterations(K: int, H: int, N: int, TM: int, TN1: int, TN2: int) -> int:
    """An upper bound of the loop iterations of one ``matmul/mlp.wgsl`` invocation as llvmpipe
    counts them (a loop of n iterations n + 1): per column tile of each product its k steps and
    the loop over its TM rows, a few of margin."""
    t1, t2 = H // 4 // TN1, N // 4 // TN2
    return t1 * (K // 4 + TM + 3) + t2 * (H // 4 + TM + 3) + 8


def _mlp_side(node, out, prefix: str, M: int, K: int, N: int):
    """One product of an ``mlp`` node: its B as a ``[K, N]`` float matrix, its epilogue (bias,
    gemm's alpha and ``beta * c``, its own steps) built for ``out`` with binding names ``prefix``,
    and the operand the kernel loads itself as vec4 at each output's index (a residual add;
    :func:`given_operand`), or None."""
    from .conv import _pointwise_matrix, conv_steps

    if node.op == "conv2d":
        mat = _pointwise_matrix(node).T
        steps = conv_steps(node, "nhwc")
    else:
        data = constant_array(node.inputs[1])
        assert data is not None, "fuse_mlp takes constant weights only"
        mat = data.T if node.op == "gemm" and node.attrs.get("b_transpose") else data
        steps = gemm_steps(node) if node.op == "gemm" else _epilogue.steps_of(node)
    gi = given_operand(node, out, steps, M, N, K)
    ep = _epilogue.build(node, out, steps, chan_axis=len(out.shape) - 1, first_binding=f"{prefix}e", name=prefix,
                         given=gi)
    return np.ascontiguousarray(mat), ep, (node.inputs[gi] if gi is not None else None)


@lowering("mlp")
def lower_mlp(node, lc) -> None:
    """mlp (the compiler's ``fuse_mlp``, :mod:`webnn_gpu.fusions.mlp`): ``matmul/mlp.wgsl``, one
    launch for ``second(first(x))``; each invocation keeps its rows of the first product (its
    epilogue applied, rounded to the data type) in workgroup memory and computes the second product
    from there (:func:`mlp_plan`). ``node.outputs`` is the second product's output, then the first
    one's where it is read elsewhere too (``attrs.keep``). The weights are float32 uniform buffers
    where they fit (:func:`uniform_copy`)."""
    a = node.attrs
    first, second = a.first, a.second
    x, out = first.inputs[0], node.outputs[0]
    mid = first.outputs[0]
    p1, p2 = mlp_product(first), mlp_product(second)
    assert p1 is not None and p2 is not None, "fuse_mlp checks both products"
    (M, K, H), N = p1, p2[2]
    wg_bytes = workgroup_bytes(lc.limits)
    plan = mlp_plan(M, K, H, N, lc.subgroup, wg_bytes)
    assert plan is not None, "fuse_mlp checks the plan"
    TM, TN1, TN2 = plan
    m1, ep1, g1 = _mlp_side(first, mid, "ep1", M, K, H)
    m2, ep2, g2 = _mlp_side(second, out, "ep2", M, H, N)
    ws = []
    for mat in (m1, m2):
        w = make_constant(mat, out.data_type)
        ubo = uniform_copy(lc, w)
        ws.append((ubo if ubo is not None else w, ubo is not None))
    prm = make_constant(np.array([M], dtype=np.uint32), "uint32")
    sg = lc.subgroup
    n_inv = -(-(-(-M // TM)) // sg) * sg
    inputs = [("x", x), ("w1", ws[0][0])] + ep1.operands + [("w2", ws[1][0])] + ep2.operands
    inputs += [(n, g) for n, g in (("g1", g1), ("g2", g2)) if g is not None] + [("prm", prm)]
    outputs = [("out", out)] + ([("mid", node.outputs[1])] if a.keep else [])
    step = lc.kernel("matmul/mlp.wgsl", inputs, outputs, n_inv, workgroup=sg, groups=(n_inv // sg, 1, 1),
                     T=wgsl_type(out.data_type), K=K, H=H, N=N, TM=TM, TN1=TN1, TN2=TN2, sg=sg,
                     w1_uniform=B_UNIFORM_FLOATS // 4 if ws[0][1] else 0,
                     w2_uniform=B_UNIFORM_FLOATS // 4 if ws[1][1] else 0,
                     ep1=ep1, ep2=ep2, fns=_epilogue.merged_functions(ep1, ep2), keep=a.keep,
                     rows_out1=TM > 1 and H == 4 * TN1 and rows_written_out(TM, TN1, ep1, True, False, None),
                     rows_out2=TM > 1 and N == 4 * TN2 and rows_written_out(TM, TN2, ep2, True, False, None),
                     x64=tile_words(lc, out.data_type))
    step.flops = 2 * M * H * (K + N)
    step.note = f"{M}x{K}->{H}->{N} {TM}x{4 * TN1}/{4 * TN2}" + (" keep" if a.keep else "")
