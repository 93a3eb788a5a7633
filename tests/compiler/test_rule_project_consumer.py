"""fuse_project_consumer on the IR (no GPU): a pointwise conv2d reading a depthwise_project
node's output attached to it (``attrs["consumer"]``, two outputs), and its near misses (the
kernel against NumPy: ``tests/ops/test_depthwise_project_lanes_second.py``)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from _irb import IR

from webnn_gpu._ir import Node
from webnn_gpu.compiler.driver import check_order, rules
from webnn_gpu.compiler.rules.dwp_consumer import fuse_project_consumer

LANE_LOOP = SimpleNamespace(_tuning="lane-loop", _subgroup=8, limits={})


@pytest.fixture(autouse=True)
def _unforced(monkeypatch):
    for var in ("WEBNN_GPU_FORCE_DWP_FORM", "WEBNN_GPU_FORCE_DWPL_SECOND", "WEBNN_GPU_FORCE_CONV"):
        monkeypatch.delenv(var, raising=False)


def _graph(hw=32, C=32, N=64, K=32, *, ck=1, cpad=0, cs=1, cgroups=1, filt="constant", steps=None, reads="out",
           outputs=("q",), other=False, attrs=None):
    """An IR depthwise_project node (a 3x3 depthwise conv2d of a (1, hw, hw, C) input, its
    projection to N) and a ``ck`` x ``ck`` conv2d to K reading its output (``reads``: "out", or
    "in": the pair's input), with epilogue ``steps`` (default a prelu of a constant slope per
    channel) and extra ``attrs``; ``other``: a second reader of the pair's output. Returns the
    IR, the node list and the outputs (among "q": the conv's, "p": the pair's, "z": the other
    reader's)."""
    ir = IR()
    x = ir.input((1, hw, hw, C))
    d = ir.conv(x, ir.filt(C, 3, 1), groups=C, pad=1)
    p = ir.conv(d, ir.filt(N, 1, C))
    dw, proj = d.producer, p.producer
    pair = Node("depthwise_project", [x, *dw.inputs[1:], *proj.inputs[1:]], [p], {"depthwise": dw, "project": proj},
                "dw+proj")
    ir.nodes = [pair]
    src = p if reads == "out" else x
    w = ir.filt(K, ck, src.shape[3] // cgroups) if filt == "constant" else ir.input((K, ck, ck, src.shape[3] // cgroups))
    q = ir.conv(src, w, groups=cgroups, pad=cpad, stride=cs)
    conv = q.producer
    conv.label = "consumer"
    for st in [{"op": "prelu", "input": 2, "axis": 3}] if steps is None else steps:
        conv.attrs.setdefault("epilogue", []).append(st)
    if steps is None:
        conv.inputs.append(ir.const(np.full(K, 0.1)))
    conv.attrs.update(attrs or {})
    outs = {"q": q, "p": p}
    if other:
        outs["z"] = ir.op("neg", [p])
    return ir, ir.nodes, {k: outs[k] for k in outputs}


def _fused(nodes, outputs, context=LANE_LOOP):
    """The node list after the rule (its order checked) and the consumer-holding node, or None."""
    out = fuse_project_consumer(nodes, outputs, context)
    check_order(out, outputs, "fuse_project_consumer")
    held = [n for n in out if n.op == "depthwise_project" and "consumer" in n.attrs]
    return out, (held[0] if held else None)


def test_attaches_a_pointwise_consumer():
    """The iris block's shapes (32 x 32 x 32 -> 64, then 64 -> 32 with prelu): one node with the
    consumer in its attributes, both outputs (the pair's first), the consumer's operands among
    its inputs, the conv gone; the input list not changed."""
    _, nodes, outputs = _graph()
    before = list(nodes)
    out, node = _fused(nodes, outputs)
    assert node is not None and [n.op for n in out] == ["depthwise_project"]
    conv = node.attrs["consumer"]
    assert node.outputs == [nodes[0].outputs[0], conv.outputs[0]] and node.label == "dw+proj+consumer"
    assert all(any(v is u for u in node.inputs) for v in conv.inputs[1:])
    assert nodes == before and "consumer" not in nodes[0].attrs


def test_first_output_may_be_a_graph_output_or_read_elsewhere():
    """The pair's output a graph output too, or read by another node (after it in the list):
    the rule still fires; the other reader keeps reading it."""
    _, nodes, outputs = _graph(outputs=("q", "p"))
    assert _fused(nodes, outputs)[1] is not None
    _, nodes, outputs = _graph(outputs=("q", "z"), other=True)
    out, node = _fused(nodes, outputs)
    assert node is not None and [n.op for n in out] == ["depthwise_project", "neg"]
    assert out[1].inputs[0] is node.outputs[0]


@pytest.mark.parametrize("case, kw", [
    ("3x3 consumer with padding", dict(ck=3, cpad=1)),
    ("1x1 consumer at stride 2", dict(cs=2)),
    ("grouped 1x1 consumer", dict(cgroups=2)),
    ("K not a multiple of 4", dict(K=30)),
    ("K past DWPL_MAX_NPL columns per lane", dict(K=256)),
    ("a computed filter", dict(filt="input")),
    ("a consumer of the pair's input", dict(reads="in", C=64)),
    ("an epilogue reading a value per element", dict(steps=[{"op": "add", "input": 2}])),
    ("a conv another rule marked", dict(attrs={"input_add": 2})),
    ("a split projection (16 x 16 x 64 -> 128)", dict(hw=16, C=64, N=128)),
    ("a projection of 4 pixels per pass (N=8)", dict(N=8)),
    ("estimated no faster (24 x 24 x 64 -> 48)", dict(hw=24, C=32, N=64, K=48)),
])
def test_near_misses(case, kw):
    """Consumers the channel-lane kernel's second stage cannot take, or that its estimate
    keeps apart: the node list unchanged."""
    _, nodes, outputs = _graph(**kw)
    out, node = _fused(nodes, outputs)
    assert node is None and out == nodes, case


def test_operand_computed_by_a_node_keeps_the_conv():
    """A consumer whose other operand (its prelu slope) a node computes: not attached (the
    merged node stands in the pair's place, where the operand is not ready)."""
    ir, nodes, outputs = _graph(steps=[{"op": "prelu", "input": 2, "axis": 3}])
    pair, conv = list(nodes)
    slope = ir.op("neg", [ir.const(np.full(32, 0.1))])
    conv.inputs.append(slope)
    nodes = [pair, slope.producer, conv]
    out, node = _fused(nodes, outputs)
    assert node is None and out == nodes


def test_no_lanes_other_profiles_and_switched_off(monkeypatch):
    """Without subgroup lanes, on another profile (no fit) or with WEBNN_GPU_FORCE_DWPL_SECOND=off:
    nothing; =on takes a consumer the estimate would keep apart."""
    for context in (SimpleNamespace(_tuning="lane-loop", _subgroup=0, limits={}),
                    SimpleNamespace(_tuning="default", _subgroup=8, limits={}), None):
        _, nodes, outputs = _graph()
        assert _fused(nodes, outputs, context)[1] is None
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWPL_SECOND", "off")
    _, nodes, outputs = _graph()
    assert _fused(nodes, outputs)[1] is None
    monkeypatch.setenv("WEBNN_GPU_FORCE_DWPL_SECOND", "on")
    _, nodes, outputs = _graph(hw=24, C=32, N=64, K=48)
    assert _fused(nodes, outputs)[1] is not None


def test_binding_limit():
    """A merged node whose inputs and two outputs would bind more storage buffers than the
    device allows: not attached."""
    _, nodes, outputs = _graph()
    tight = SimpleNamespace(_tuning="lane-loop", _subgroup=8,
                            limits={"max-storage-buffers-per-shader-stage": len(nodes[0].inputs) + 2})
    assert _fused(nodes, outputs, tight)[1] is None
    roomy = SimpleNamespace(_tuning="lane-loop", _subgroup=8,
                            limits={"max-storage-buffers-per-shader-stage": len(nodes[0].inputs) + 4})
    assert _fused(nodes, outputs, roomy)[1] is not None


def test_rule_runs_last():
    """The rule comes after fuse_depthwise_project and every rule that changes a conv (the
    memory rules included): the last of the order but fuse_siblings (which takes the convs it
    leaves)."""
    names = [r.name for r in rules()]
    assert names[-2:] == ["fuse_project_consumer", "fuse_siblings"]
    assert names.index("fuse_depthwise_project") < names.index("concat_in_place")
