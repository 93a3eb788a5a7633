"""The conv and pool rules on hand-made IR (no GPU): where each fires, and its near misses
(a value with a second consumer, a graph output in the middle, shapes or layouts the
kernel cannot take). Their GPU tests against float64 NumPy are in tests/perf/test_passes_gpu.py."""

from __future__ import annotations

from _irb import IR

from webnn_gpu.compiler import check_order
from webnn_gpu.compiler.rules.conv import fuse_conv_input, fuse_conv_pool, fuse_conv_upsample, fuse_depthwise_project
from webnn_gpu.compiler.rules.pool import fuse_pool_input, fuse_pool_partials

IMG = (1, 16, 16, 8)


def _ops(nodes):
    return [n.op for n in nodes]


def _run(rule, ir, outputs):
    out = rule(ir.nodes, outputs)
    check_order(out, outputs)
    return out


# ---------------------------------------------------------------- fuse_pool_input
def test_pool_input_sums_the_add_it_alone_reads():
    ir = IR()
    a, b = ir.input(IMG), ir.input(IMG)
    y = ir.pool(ir.op("add", [a, b]))
    out = _run(fuse_pool_input, ir, {"y": y})
    assert _ops(out) == ["average_pool2d"] and out[0].inputs == [a, b] and out[0].attrs["input_add"] == 1


def test_pool_input_reads_an_upsampled_operands_small_image():
    ir = IR()
    a, small = ir.input(IMG), ir.input((1, 8, 8, 8))
    y = ir.pool(ir.op("add", [a, ir.up2(small)]))
    out = _run(fuse_pool_input, ir, {"y": y})
    assert _ops(out) == ["resample2d", "average_pool2d"]  # (the upsampling, unread, is dead code)
    assert out[1].inputs == [a, small] and out[1].attrs["input_add_scale"] == 4


def test_pool_input_near_misses():
    for case in ("second reader", "output", "broadcast", "one pixel", "window"):
        ir = IR()
        shape = (1, 1, 1, 8) if case == "one pixel" else IMG
        a, b = ir.input(shape), ir.input((1, 1, 1, 8) if case == "broadcast" else shape)
        s = ir.op("add", [a, b])
        y = ir.pool(s, window=(3, 3) if case == "window" else None)
        outputs = {"y": y}
        if case == "second reader":
            outputs["z"] = ir.op("neg", [s])
        elif case == "output":
            outputs["s"] = s
        out = fuse_pool_input(ir.nodes, outputs)
        assert "input_add" not in out[-1 if case != "second reader" else -2].attrs, case
        assert "add" in _ops(out), case


# ---------------------------------------------------------------- fuse_conv_pool
def _depthwise(ir, x, pad=1):
    C = x.shape[3]
    return ir.conv(x, ir.filt(C, 3, 1), groups=C, pad=pad)


def test_conv_pool_makes_the_pool_a_depthwise_convs_second_output():
    ir = IR()
    d = _depthwise(ir, ir.input(IMG))
    r = ir.op("relu", [d])  # the conv's output keeps its other readers
    p = ir.pool(d)
    out = _run(fuse_conv_pool, ir, {"r": r, "p": p})
    assert _ops(out) == ["conv2d", "relu"] and out[0].outputs == [d, p] and out[0].attrs["pool_output"] is True


def test_conv_pool_near_misses():
    ir = IR()
    x = ir.input(IMG)
    p1 = ir.pool(_depthwise(ir, x), window=(3, 3))  # not global
    p2 = ir.pool(ir.conv(x, ir.filt(8, 1, 8)))  # not a depthwise conv
    x6 = ir.input((1, 16, 16, 6))
    p3 = ir.pool(_depthwise(ir, x6))  # channels not a multiple of 4
    out = fuse_conv_pool(ir.nodes, {"p1": p1, "p2": p2, "p3": p3})
    assert _ops(out) == _ops(ir.nodes) and all(len(n.outputs) == 1 for n in out)


# ---------------------------------------------------------------- fuse_conv_upsample
def _skip_conv(ir, small_reader=False):
    x, small = ir.input((1, 16, 16, 16)), ir.input((1, 8, 8, 16))
    up = ir.up2(small)
    y = ir.conv(ir.op("add", [x, up]), ir.filt(16, 1, 16))
    outputs = {"y": y}
    if small_reader:
        outputs["u"] = ir.op("neg", [up])
    return small, outputs


def test_conv_upsample_interpolates_the_skip_operand_as_it_loads():
    ir = IR()
    small, outputs = _skip_conv(ir)
    out = _run(fuse_conv_upsample, ir, outputs)
    assert _ops(out) == ["resample2d", "add", "conv2d"]  # (no input_add yet: nothing to do)
    out = fuse_conv_upsample(fuse_conv_input(ir.nodes, outputs), outputs)  # the driver's order
    check_order(out, outputs)
    assert _ops(out) == ["conv2d"] and out[0].attrs["input_add_up2"] and out[0].inputs[out[0].attrs["input_add"]] is small


def test_conv_upsample_leaves_an_upsampling_read_elsewhere():
    ir = IR()
    _, outputs = _skip_conv(ir, small_reader=True)
    out = fuse_conv_upsample(fuse_conv_input(ir.nodes, outputs), outputs)
    conv = next(n for n in out if n.op == "conv2d")
    assert "resample2d" in _ops(out) and "input_add" in conv.attrs and not conv.attrs.get("input_add_up2")


# ---------------------------------------------------------------- fuse_depthwise_project
def test_depthwise_and_its_projection_become_one_node():
    ir = IR()
    x = ir.input(IMG)
    d = _depthwise(ir, x)
    y = ir.conv(d, ir.filt(12, 1, 8))
    out = _run(fuse_depthwise_project, ir, {"y": y})
    assert _ops(out) == ["depthwise_project"] and out[0].outputs == [y]
    assert out[0].attrs["depthwise"] is ir.nodes[0] and out[0].attrs["project"] is ir.nodes[1]


def test_depthwise_project_near_misses():
    for case in ("second reader", "output", "computed filter", "3x3 projection"):
        ir = IR()
        d = _depthwise(ir, ir.input(IMG))
        f = ir.input((12, 1, 1, 8)) if case == "computed filter" else ir.filt(12, 3 if case == "3x3 projection" else 1, 8)
        y = ir.conv(d, f, pad=1 if case == "3x3 projection" else 0)
        outputs = {"y": y}
        if case == "second reader":
            outputs["z"] = ir.op("neg", [d])
        elif case == "output":
            outputs["d"] = d
        assert "depthwise_project" not in _ops(fuse_depthwise_project(ir.nodes, outputs)), case


# ---------------------------------------------------------------- fuse_pool_partials
def test_pool_partials_reads_a_pointwise_convs_channel_sums():
    ir = IR()
    c = ir.conv(ir.input(IMG), ir.filt(16, 1, 8))  # the tile kernel: 16 x 16 x 16 outputs
    r = ir.op("relu", [c])
    p = ir.pool(c)
    out = _run(fuse_pool_partials, ir, {"r": r, "p": p})
    conv, _, pool = out
    assert len(conv.outputs) == 2 and conv.attrs["pool_output"] == "partials" and conv.outputs[0] is c
    assert pool.inputs[0] is conv.outputs[1] and pool.attrs["input_partials"] == 16 * 16 and pool.outputs == [p]


def test_pool_partials_near_misses():
    ir = IR()
    x = ir.input(IMG)
    p1 = ir.pool(ir.conv(x, ir.filt(16, 1, 8)), window=(4, 4))  # not global
    p2 = ir.pool(ir.conv(x, ir.filt(6, 1, 8)))  # channels not a multiple of 4
    p3 = ir.pool(ir.op("relu", [x]))  # no kernel that writes partial sums
    out = fuse_pool_partials(ir.nodes, {"p1": p1, "p2": p2, "p3": p3})
    assert all("input_partials" not in n.attrs for n in out) and all(len(n.outputs) == 1 for n in out)
