"""The shape of ``matmul/tile.wgsl``'s text, without a GPU: each row's epilogue and stores are
one helper function (``tile_row``) that ``main`` calls once per row (once in the looped form;
the template's header: naga's front end takes time in the square of a function's expressions).
The results of these kernels are checked against float64 NumPy by ``tests/ops/test_tile*.py``."""

from __future__ import annotations

import re

import pytest

from webnn_gpu._lower import LowerContext
from webnn_gpu.builder import Node, Value
from webnn_gpu.ops import linalg

LIMITS = {"max-storage-buffer-binding-size": 128 << 20, "max-storage-buffers-per-shader-stage": 10,
          "max-compute-invocations-per-workgroup": 256, "max-compute-workgroup-size-x": 256,
          "max-compute-workgroup-storage-size": 16384, "max-compute-workgroups-per-dimension": 65535}


def _tile_wgsl(M, K, N, *, epilogue=(), subgroup=0, residual=False):
    """The WGSL of the tile kernel of ``[M, K] x [K, N]`` (b an input, not a constant)."""
    a, b = Value("float32", (M, K), "input"), Value("float32", (K, N), "input")
    y = Value("float32", (M, N), "op")
    inputs = [a, b]
    steps = [dict(s) for s in epilogue]
    if residual:
        inputs.append(Value("float32", (M, N), "input"))
        steps.insert(0, {"op": "add", "input": 2})
    node = Node("matmul", inputs, [y], {"epilogue": steps} if steps else {})
    y.producer = node
    features = frozenset({"subgroup"}) if subgroup else frozenset()
    lc = LowerContext(node, features, LIMITS, tuning="lane-loop", subgroup=subgroup)
    linalg.lower_matmul(node, lc)
    tiles = [s for s in lc.steps if s.template == "matmul/tile.wgsl"]
    assert len(tiles) == 1, [s.template for s in lc.steps]
    return tiles[0].wgsl


def _main(wgsl: str) -> str:
    return wgsl[wgsl.index("fn main("):]


def _rows(wgsl: str) -> int:
    """TM: the accumulator rows the kernel declares (``var c{i}_0``)."""
    return len(re.findall(r"var c\d+_0 = ", wgsl))


@pytest.mark.parametrize("subgroup", [0, 8])
@pytest.mark.parametrize("epilogue", [(), ({"op": "relu"},)])
def test_rows_stored_by_one_helper(subgroup, epilogue, monkeypatch):
    monkeypatch.setattr(linalg, "TILE_EP_LOOP", False)  # each row's call unrolled
    wgsl = _tile_wgsl(256, 64, 96, epilogue=epilogue, subgroup=subgroup)
    main = _main(wgsl)
    tm = _rows(wgsl)
    assert tm > 1
    assert wgsl.count("fn tile_row(") == 1
    assert main.count("tile_row(m0 + ") == tm, "one call per row of the tile"
    assert "out[" not in main, "every store is in tile_row"
    helper = wgsl[wgsl.index("fn tile_row("):wgsl.index("fn main(")]
    assert "out[" in helper


def test_looped_epilogue_calls_the_helper_once():
    wgsl = _tile_wgsl(256, 64, 96, residual=True)
    main = _main(wgsl)
    assert "for (var ri = 0u;" in main
    assert main.count("tile_row(") == 1
    assert "out[" not in main and "gres[" not in main


@pytest.mark.parametrize("subgroup", [0, 8])
@pytest.mark.parametrize("epilogue", [(), ({"op": "relu"},), ({"op": "clamp", "min_value": 0.0, "max_value": 6.0},)])
def test_every_epilogue_stored_in_the_row_loop(subgroup, epilogue):
    """``linalg.TILE_EP_LOOP``: also an epilogue that loads nothing per output (or none) is
    stored by one call in the loop over the tile's rows, so the unrolled stores (each a loop
    over the SIMD lanes in LLVM's code) appear TN4 times, not TM x TN4 times."""
    wgsl = _tile_wgsl(256, 64, 96, epilogue=epilogue, subgroup=subgroup)
    main = _main(wgsl)
    assert _rows(wgsl) > 1
    assert "for (var ri = 0u;" in main and main.count("tile_row(") == 1
    assert "out[" not in main
    linalg.TILE_EP_LOOP = False
    try:
        unrolled = _main(_tile_wgsl(256, 64, 96, epilogue=epilogue, subgroup=subgroup))
    finally:
        linalg.TILE_EP_LOOP = True
    assert "for (var ri = 0u;" not in unrolled and unrolled.count("tile_row(m0 + ") == _rows(wgsl)


def test_short_reductions_keep_the_stores_unrolled():
    """Below ``linalg.TILE_EP_LOOP_MIN_K`` the loop's row moves would cost run time: unrolled."""
    k = linalg.TILE_EP_LOOP_MIN_K
    short = _main(_tile_wgsl(256, k - 8, 96, epilogue=({"op": "relu"},)))
    assert "for (var ri = 0u;" not in short and short.count("tile_row(m0 + ") == _rows(_tile_wgsl(256, k - 8, 96))
    assert "for (var ri = 0u;" in _main(_tile_wgsl(256, k, 96, epilogue=({"op": "relu"},)))
