"""Build time: a graph's constants of host data share a few buffers (``graph._upload_packed``),
each at an aligned offset and bound as its own range: results are those of a buffer per
constant, whatever the pack's bound (odd byte counts, an int8 and a float16 constant, a
constant read through a uniform binding, an output that is a view of a constant, a constant
MLTensor and constants bound in part)."""

from __future__ import annotations

import numpy as np
import pytest

import webnn_gpu as webnn
from webnn_gpu import graph as graph_module
from webnn_gpu.errors import OperationError


def _graph(ctx, data: dict):
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [4, 8]})
    w = b.constant(data["w"])  # 8 x 6: a matmul's B (a uniform binding on lavapipe's profile)
    bias = b.constant(data["bias"])  # 6 floats
    small = b.constant(data["small"])  # 3 int8: 3 bytes
    tensor = b.constant(ctx.create_constant_tensor({"data_type": "float32", "shape": [6]}, data["tensor"]))
    y = b.add(b.add(b.matmul(x, w), bias), tensor)
    z = b.mul(b.cast(small, "float32"), b.constant(data["scale"]))  # 3 floats
    outs = {"y": b.relu(y), "z": z, "view": b.reshape(b.constant(data["view"]), [5])}
    if "float16" in ctx.supported_data_types:
        outs["h"] = b.cast(b.add(b.constant(data["half"]), b.constant(data["half"])), "float32")
    return b.build(outs), outs.keys()


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(3)
    return {"w": rng.standard_normal((8, 6)).astype(np.float32),
            "bias": rng.standard_normal(6).astype(np.float32),
            "small": np.array([-3, 7, 127], np.int8),
            "tensor": rng.standard_normal(6).astype(np.float32),
            "scale": rng.standard_normal(3).astype(np.float32),
            "view": rng.standard_normal((1, 5)).astype(np.float32),
            "half": rng.standard_normal(3).astype(np.float16)}


def _reference(x, d: dict) -> dict:
    y = x.astype(np.float64) @ d["w"].astype(np.float64) + d["bias"] + d["tensor"]
    return {"y": np.maximum(y, 0.0), "z": d["small"].astype(np.float64) * d["scale"],
            "view": d["view"].reshape(5).astype(np.float64),
            "h": (d["half"] + d["half"]).astype(np.float64)}


@pytest.mark.parametrize("bound", [64 << 20, 256, 1], ids=["one buffer", "small packs", "one each"])
def test_packed_constants_give_the_same_results(ctx, data, monkeypatch, bound):
    monkeypatch.setattr(graph_module, "CONST_PACK_BYTES", bound)
    g, names = _graph(ctx, data)
    x = np.random.default_rng(5).standard_normal((4, 8)).astype(np.float32)
    got = ctx.compute(g, {"x": x})
    want = _reference(x, data)
    for name in names:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-5, err_msg=name)
    packed = {g._slot[k].key for k in g._const_at}
    if bound == 1:
        assert len(packed) == len(g._const_at), "a constant larger than the bound has a buffer of its own"
    elif bound == 64 << 20:
        assert len(packed) == 1 and len(g._const_at) >= 5, "every constant of host data in one buffer"
    assert all(at % graph_module.CONST_PACK_ALIGN == 0 for at in g._const_at.values())


def test_a_pack_holds_each_constants_bytes_then_zeros(ctx):
    """The bytes a kernel can read at a constant's binding are its own (zero-padded to 4)."""
    class V:
        def __init__(self, data, data_type):
            self.data, self.data_type, self.shape = data, data_type, list(data.shape)

    vals = [V(np.arange(3, dtype=np.int8), "int8"), V(np.arange(5, dtype=np.float32), "float32"),
            V(np.zeros(0, np.float32), "float32"), V(np.full(2, 7, np.int8), "int8")]
    (buf, placed), = graph_module._upload_packed(ctx.device, vals, ctx._limits)
    raw = bytes(ctx.device.queue.read_buffer(buf))
    assert [at for _, at in placed] == [0, 256, 512, 768]
    assert raw[:4] == bytes([0, 1, 2, 0]) and raw[4:256] == bytes(252)
    assert raw[256:276] == np.arange(5, dtype=np.float32).tobytes()
    assert raw[512:768] == bytes(256) and raw[768:772] == bytes([7, 7, 0, 0]) and len(raw) == 772


def test_the_knob_gives_a_buffer_per_constant(ctx, data, monkeypatch):
    """``WEBNN_GPU_FORCE_CONST_PACK=each``: every constant in a buffer of its own, as before the
    packs (the same results); a value it does not take raises."""
    monkeypatch.setenv("WEBNN_GPU_FORCE_CONST_PACK", "each")
    g, names = _graph(ctx, data)
    assert not g._const_at
    x = np.random.default_rng(5).standard_normal((4, 8)).astype(np.float32)
    got, want = ctx.compute(g, {"x": x}), _reference(x, data)
    for name in names:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-5, err_msg=name)
    monkeypatch.setenv("WEBNN_GPU_FORCE_CONST_PACK", "one")
    with pytest.raises(OperationError, match="WEBNN_GPU_FORCE_CONST_PACK='one'"):
        _graph(ctx, data)
