"""Chains of layout operators (``fuse_remap_chain``) on the GPU against NumPy: slices (strided,
reversed), reverses, transposes, expands, tiles, pads and reshapes between them run as one
``layout/remap.wgsl`` kernel, composed into one index map or chained stage by stage.

Tolerance: none. The kernel moves raw bits: every result must equal the NumPy reference bit for
bit (a NaN only has to stay a NaN; ``_movement_data.assert_moved``), for float32, float16,
int32, int64, int8 and uint8 data. The references are NumPy primitives (flip, basic slicing,
transpose, broadcast_to, tile, pad, reshape), independent of the composed index maps.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from _movement_data import assert_moved, data, np_dtype
from helpers import kernel_steps, run_graph


# ---------------------------------------------------------------- GPU, against NumPy
def _chain_graph(case: str, shape):
    """(build(builder, x) -> output operand, reference(x) -> array) of each case."""
    if case == "reverse+slice":  # TFLite's STRIDED_SLICE with a negative stride
        return (lambda b, x: b.slice(b.reverse(x, axes=[1]), [0, 1, 2], [shape[0], shape[1] - 2, 5], strides=[1, 3, 2]),
                lambda x: x[:, ::-1][:, 1:shape[1] - 1:3, 2:7:2])
    if case == "reverse+slice+tile":
        return (lambda b, x: b.tile(b.slice(b.reverse(x, axes=[1, 2]), [0, 3, 0], [1, 5, shape[2]], strides=[1, 4, 1]),
                                    [2, 3, 1]),
                lambda x: np.tile(x[:, ::-1, ::-1][0:1, 3:8:4], (2, 3, 1)))
    if case == "tile+slice across periods":
        return (lambda b, x: b.slice(b.tile(x, [1, 3, 2]), [1, 2, 1], [1, 3 * shape[1] - 3, 2 * shape[2] - 2],
                                     strides=[1, 2, 3]),
                lambda x: np.tile(x, (1, 3, 2))[1:2, 2:3 * shape[1] - 1:2, 1:2 * shape[2] - 1:3])
    if case == "transpose+reshape+slice":  # a rank change between: two stages
        return (lambda b, x: b.slice(b.reshape(b.transpose(x, permutation=[2, 0, 1]), [shape[2], shape[0] * shape[1]]),
                                     [1, 2], [shape[2] - 1, shape[0] * shape[1] - 3], strides=[2, 3]),
                lambda x: x.transpose(2, 0, 1).reshape(shape[2], -1)[1::2, 2:shape[0] * shape[1] - 1:3])
    if case == "slice+transpose+expand":
        return (lambda b, x: b.expand(b.transpose(b.slice(x, [0, 0, 1], [1, shape[1], 4]), permutation=[2, 1, 0]),
                                      [2, 4, shape[1], 3]),
                lambda x: np.broadcast_to(x[0:1, :, 1:5].transpose(2, 1, 0), (2, 4, shape[1], 3)))
    if case == "pad+reverse+transpose":
        return (lambda b, x: b.transpose(b.reverse(b.pad(x, [0, 2, 1], [1, 0, 3], value=7), axes=[2]),
                                         permutation=[1, 0, 2]),
                lambda x: np.pad(x, [(0, 1), (2, 0), (1, 3)], constant_values=np.array(7, x.dtype))[:, :, ::-1]
                .transpose(1, 0, 2))
    if case == "reflect+slice+reverse":
        return (lambda b, x: b.reverse(b.slice(b.pad(x, [0, 2, 2], [0, 1, 2], mode="reflection"), [0, 1, 0],
                                               [shape[0], shape[1] + 1, shape[2] + 4], strides=[1, 1, 3]), axes=[1]),
                lambda x: np.pad(x, [(0, 0), (2, 1), (2, 2)], mode="reflect")[:, 1:shape[1] + 2, ::3][:, ::-1])
    if case == "edge pad+constant pad":  # the fill is the constant pad's, wherever it stands in the chain
        return (lambda b, x: b.pad(b.pad(x, [1, 0, 2], [0, 2, 1], mode="edge"), [0, 1, 1], [1, 0, 1], value=3),
                lambda x: np.pad(np.pad(x, [(1, 0), (0, 2), (2, 1)], mode="edge"), [(0, 1), (1, 0), (1, 1)],
                                 constant_values=np.array(3, x.dtype)))
    raise AssertionError(case)


CASES = ["reverse+slice", "reverse+slice+tile", "tile+slice across periods", "transpose+reshape+slice",
         "slice+transpose+expand", "pad+reverse+transpose", "reflect+slice+reverse", "edge pad+constant pad"]


@pytest.mark.parametrize("dt", ["float32", "float16", "int32", "int64", "int8", "uint8"])
@pytest.mark.parametrize("case", CASES)
def test_a_chain_is_one_kernel_and_moves_exactly(ctx, rng, case, dt):
    shape = (2, 9, 7)
    build, ref = _chain_graph(case, shape)
    x = data(rng, dt, shape)
    steps = kernel_steps(ctx, lambda b, o: {"y": build(b, o["x"])}, {"x": x})
    assert [s.template for s in steps] == ["layout/remap.wgsl"], case
    got = run_graph(ctx, lambda b, o: {"y": build(b, o["x"])}, {"x": x})["y"]
    assert_moved(got, ref(x).astype(np_dtype(dt)), f"{case} {dt}")


def test_a_value_read_twice_ends_the_chain(ctx, rng):
    """The slice read by the tile and by a graph output: reverse + slice is one kernel storing the
    slice, the tile another (both exact)."""
    x = data(rng, "float32", (1, 16, 24))

    def build(b, o):
        s = b.slice(b.reverse(o["x"], axes=[1]), [0, 3, 0], [1, 5, 24], strides=[1, 4, 1])
        return {"s": s, "t": b.tile(s, [1, 3, 1])}

    steps = kernel_steps(ctx, build, {"x": x})
    assert len(steps) == 2
    out = run_graph(ctx, build, {"x": x})
    s = x[:, ::-1][:, 3:8:4]
    assert_moved(out["s"], s)
    assert_moved(out["t"], np.tile(s, (1, 3, 1)))


@pytest.mark.parametrize("dt", ["float32", "int32", "float16"])
def test_a_chain_of_stages_moves_vec4s_where_every_stage_moves_runs_of_4(ctx, rng, dt):
    """tile -> reshape -> tile (Keras' UpSampling2D spelling): two stages, each moving runs of 8
    contiguous values, run a vec4 at a time for 32-bit data (one element for float16)."""
    x = data(rng, dt, (2, 5, 1, 8))

    def build(b, o):
        t = b.tile(o["x"], [1, 1, 2, 1])
        return {"y": b.tile(b.reshape(t, [2, 10, 1, 8]), [1, 1, 3, 1])}

    steps = kernel_steps(ctx, build, {"x": x})
    assert len(steps) == 1 and ("array<vec4<" in steps[0].wgsl) == (dt != "float16") and "s1c" in steps[0].wgsl
    got = run_graph(ctx, build, {"x": x})["y"]
    assert_moved(got, np.tile(np.tile(x, (1, 1, 2, 1)).reshape(2, 10, 1, 8), (1, 1, 3, 1)))


# ---------------------------------------------------------------- data-movement kernels writing into a concat
def _pieces_graph(n: int, misaligned: bool = False):
    """(build, reference) of a concat along axis 1 of [1, k] pieces of an [1, 4, n] input, each
    made by a data-movement kernel and reshaped: a slice, a gather, a remap chain (reverse,
    strided slice, tile), a concat along the last axis (a kernel: rows before its axis) and a
    transpose; ``misaligned`` puts a 7-element slice first."""
    def build(b, o):
        x = o["x"]
        ind = b.constant(np.array([3, 1], np.int32))
        parts = [
            b.slice(x, [0, 1, 0], [1, 1, 7 if misaligned else n]),
            b.gather(x, ind, axis=1),
            b.tile(b.slice(b.reverse(x, axes=[1]), [0, 0, 0], [1, 3, n], strides=[1, 2, 1]), [1, 2, 1]),
            b.concat([b.slice(x, [0, 0, 0], [1, 2, n // 2]), b.slice(x, [0, 2, n // 2], [1, 2, n // 2])], 2),
            b.transpose(b.slice(x, [0, 0, 0], [1, 4, n // 2]), permutation=[0, 2, 1]),
        ]
        return {"y": b.concat([b.reshape(p, [1, math.prod(p.shape)]) for p in parts], 1)}

    def ref(x):
        parts = [x[:, 1:2, :7 if misaligned else n], x[:, [3, 1]], np.tile(x[:, ::-1][:, 0:3:2], (1, 2, 1)),
                 np.concatenate([x[:, 0:2, :n // 2], x[:, 2:4, n // 2:]], 2), x[:, :, :n // 2].transpose(0, 2, 1)]
        return np.concatenate([p.reshape(1, -1) for p in parts], 1)

    return build, ref


@pytest.mark.parametrize("dt", ["float32", "int32", "int8", "float16"])
def test_movement_kernels_write_their_blocks_of_a_concat(ctx, rng, dt):
    """``concat_in_place`` with data-movement producers (``IN_PLACE_MOVERS``): every piece's kernel
    writes its block of the concat's output (blocks of 64 elements: 32-byte aligned for every
    type), no concat kernel; bit for bit through both run paths."""
    build, ref = _pieces_graph(64)
    x = data(rng, dt, (1, 4, 64))
    steps = kernel_steps(ctx, build, {"x": x})
    labels = [s.label for s in steps]
    assert sum(lb.startswith("concat") for lb in labels) == 1, labels  # the inner concat alone
    assert len(steps) == 7, labels  # slice, gather, chain, the inner concat's two slices and concat, transpose
    assert_moved(run_graph(ctx, build, {"x": x})["y"], ref(x))


def test_a_misaligned_block_keeps_the_concat_kernel(ctx, rng):
    """A first block of 7 floats (28 bytes): the blocks after it are not aligned; the concat
    copies (a near miss), the values still exact."""
    build, ref = _pieces_graph(64, misaligned=True)
    x = data(rng, "float32", (1, 4, 64))
    labels = [s.label for s in kernel_steps(ctx, build, {"x": x})]
    assert sum(lb.startswith("concat") for lb in labels) == 2, labels
    assert_moved(run_graph(ctx, build, {"x": x})["y"], ref(x))


@pytest.mark.parametrize("dt", ["float32", "int8", "float16"])
def test_split_outputs_each_through_a_chain(ctx, rng, dt):
    """A split into three along the last axis: the first output transposed, the second
    reversed and tiled, the third a graph output as it is. The first two are one kernel each
    (the split's slice heading the chain), the third a slice: three kernels, bit for bit."""
    x = data(rng, dt, (2, 6, 20))

    def build(b, o):
        p, q, r = b.split(o["x"], [8, 4, 8], axis=2)
        return {"p": b.transpose(p, permutation=[2, 0, 1]), "q": b.tile(b.reverse(q, axes=[1]), [1, 2, 1]), "r": r}

    steps = kernel_steps(ctx, build, {"x": x})
    assert [s.template for s in steps] == ["layout/remap.wgsl"] * 3, [s.label for s in steps]
    out = run_graph(ctx, build, {"x": x})
    assert_moved(out["p"], x[:, :, :8].transpose(2, 0, 1))
    assert_moved(out["q"], np.tile(x[:, ::-1, 8:12], (1, 2, 1)))
    assert_moved(out["r"], x[:, :, 12:])


def test_a_pad_of_zero_sizes_is_a_view_not_the_chain_s_fill(ctx):
    """transpose -> pad of zero sizes (a view) -> pad with 5 -> tile: one kernel, whose fill is
    the padding pad's 5, not the view's 0 (exact)."""
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)

    def build(b, o):
        y = b.pad(b.transpose(o["x"], permutation=[2, 1, 0]), [0, 0, 0], [0, 0, 0])
        return {"y": b.tile(b.pad(y, [1, 0, 0], [0, 0, 1], value=5), [1, 2, 1])}

    ref = np.tile(np.pad(x.transpose(2, 1, 0), [(1, 0), (0, 0), (0, 1)], constant_values=np.float32(5)), (1, 2, 1))
    assert [s.template for s in kernel_steps(ctx, build, {"x": x})] == ["layout/remap.wgsl"]
    np.testing.assert_array_equal(run_graph(ctx, build, {"x": x})["y"], ref)
