"""The ``fuse_remap_chain`` rule on hand-made IR (no GPU): where it fires, how its chain
composes (:func:`webnn_gpu.ops.movement.chain_stages`), and its near misses. The GPU results
against NumPy are in ``tests/ops/test_remap_chain.py``."""

from __future__ import annotations

import numpy as np
import pytest
from _irb import IR

from webnn_gpu.compiler.rules.layout import fuse_remap_chain
from webnn_gpu.ops.movement import chain_stages


# ---------------------------------------------------------------- IR (no GPU)
def _rev_slice_tile(ir, x):
    r = ir.op("reverse", [x], x.shape, axes=[1])
    s = ir.op("slice", [r], (1, 2, 24), starts=[0, 3, 0], strides=[1, 4, 1])
    return r, s, ir.op("tile", [s], (1, 6, 24))


def test_fires_on_a_chain_and_composes_it_into_one_map():
    ir = IR()
    x = ir.input((1, 16, 24))
    _, _, t = _rev_slice_tile(ir, x)
    new = fuse_remap_chain(list(ir.nodes), {"y": t})
    assert [n.op for n in new] == ["remap_chain"]
    assert new[0].inputs == [x] and new[0].outputs == [t]
    assert [s["op"] for s in new[0].attrs["chain"]] == ["reverse", "slice", "tile"]
    assert len(chain_stages(new[0].attrs["chain"])) == 1  # reverse, slice and tile compose per axis
    assert t.producer.op == "tile"  # its input nodes are not changed


@pytest.mark.parametrize("case", ["middle read elsewhere", "middle is an output", "one kernel op", "two constant pads",
                                  "marked reshape", "split between"])
def test_near_misses(case):
    ir = IR()
    x = ir.input((1, 16, 24))
    outputs = {}
    s = None
    if case == "one kernel op":
        v = ir.op("reshape", [x], (16, 24), alias=True)
        y = ir.op("reshape", [ir.op("transpose", [v], (24, 16), permutation=[1, 0])], (1, 24, 16), alias=True)
    elif case == "two constant pads":
        p = ir.op("pad", [x], (1, 17, 24), beginning_padding=[0, 1, 0], ending_padding=[0, 0, 0], mode="constant",
                  value=np.float32(0))
        y = ir.op("pad", [p], (1, 17, 26), beginning_padding=[0, 0, 1], ending_padding=[0, 0, 1], mode="constant",
                  value=np.float32(1))
    elif case == "marked reshape":
        r = ir.op("reverse", [x], x.shape, axes=[1])
        v = ir.op("reshape", [r], (16, 24), alias=True, operand_view=True)
        y = ir.op("transpose", [v], (24, 16), permutation=[1, 0])
    elif case == "split between":
        r = ir.op("reverse", [x], x.shape, axes=[1])
        out = ir.op("split", [r], (1, 8, 24), axis=1, sizes=[8, 8])
        y = ir.op("transpose", [out], (24, 8, 1), permutation=[2, 1, 0])
    else:
        r, s, y = _rev_slice_tile(ir, x)
        if case == "middle read elsewhere":
            outputs["z"] = ir.op("neg", [s])
        else:
            outputs["z"] = s
    outputs["y"] = y
    nodes = list(ir.nodes)
    new = fuse_remap_chain(nodes, outputs)
    if case in ("middle read elsewhere", "middle is an output"):
        # the chain ends before the value read elsewhere: reverse + slice is one kernel, the tile its own
        assert [n.op for n in new if n.op != "neg"] == ["remap_chain", "tile"]
        assert new[0].inputs == [x] and new[0].outputs == [s]
    else:
        assert new == nodes


def test_tile_then_a_window_across_its_periods_keeps_two_stages():
    """A slice of a tile that crosses the tile's period is no per-axis map: two stages."""
    ir = IR()
    x = ir.input((4, 6))
    t = ir.op("tile", [x], (4, 18))
    s = ir.op("slice", [t], (4, 5), starts=[0, 3], strides=[1, 2])
    new = fuse_remap_chain(list(ir.nodes), {"y": s})
    assert len(chain_stages(new[0].attrs["chain"])) == 2


@pytest.mark.parametrize("case", ["each transposed", "one transposed", "through a reshape", "read by a relu"])
def test_a_split_output_heads_a_chain_as_a_slice(case):
    """A split whose output a layout operator reads alone becomes one slice per output, the
    slice heading that operator's chain; a split whose outputs no such operator reads stays."""
    ir = IR()
    x = ir.input((1, 16, 24))
    sp = ir.op("split", [x], (1, 16, 8), axis=2, sizes=[8, 8, 8])
    outs = [sp] + [type(sp)(sp.data_type, sp.shape, "op") for _ in range(2)]
    sp.producer.outputs[:] = outs
    for v in outs:
        v.producer = sp.producer
    outputs = {}
    for k, v in enumerate(outs):
        if case == "read by a relu" or (case == "one transposed" and k):
            outputs[f"y{k}"] = ir.op("relu", [v])
        elif case == "through a reshape":
            outputs[f"y{k}"] = ir.op("transpose", [ir.op("reshape", [v], (16, 8), alias=True)], (8, 16),
                                     permutation=[1, 0])
        else:
            outputs[f"y{k}"] = ir.op("transpose", [v], (1, 8, 16), permutation=[0, 2, 1])
    nodes = list(ir.nodes)
    new = fuse_remap_chain(nodes, outputs)
    ops = [n.op for n in new]
    if case == "read by a relu":
        assert new == nodes
        return
    assert "split" not in ops
    chains = [n for n in new if n.op == "remap_chain"]
    assert len(chains) == (1 if case == "one transposed" else 3) and ops.count("slice") == 3 - len(chains)
    assert all(c.inputs == [x] and c.attrs["chain"][0]["op"] == "slice" for c in chains)  # each its block's slice
    assert sorted(c.attrs["chain"][0]["attrs"]["starts"][2] for c in chains) == ([0] if case == "one transposed"
                                                                                  else [0, 8, 16])
    assert sp.producer.op == "split" and len(sp.producer.outputs) == 3  # the input nodes are not changed


@pytest.mark.parametrize("n, fused", [(20, True), (100, False), (2000, False)])
def test_a_chain_that_loses_a_large_operator_s_vec4s_stays_apart(n, fused):
    """transpose [64, 3] -> [3, 64] (one element at a time) then expand to [n, 3, 64] (vec4s
    alone): one kernel moves every output element singly (the transpose's stride-3 reads), so
    it pays only while the launch it saves outweighs the expand's lost vec4s
    (:func:`webnn_gpu.ops.movement.chain_pays`): 3,840 elements yes, 19,200 and more no."""
    ir = IR()
    x = ir.input((64, 3))
    t = ir.op("transpose", [x], (3, 64), permutation=[1, 0])
    y = ir.op("expand", [t], (n, 3, 64), new_shape=[n, 3, 64])
    new = fuse_remap_chain(list(ir.nodes), {"y": y})
    assert [nd.op for nd in new] == (["remap_chain"] if fused else ["transpose", "expand"])
