"""Recording a graph's commands (``MLGraph._encode``): the C-function path and wgpu-py's
methods record the same commands; the fallback is taken when the C functions or an object's
handle are missing; the recordings kept per io key stay within their bound."""

from __future__ import annotations

import numpy as np
import pytest

import webnn_gpu as webnn
from webnn_gpu import graph as graph_mod
from webnn_gpu._lower import CopyStep, KernelStep


def _graph(ctx):
    """Kernels around a copy (identity), and output copies after them (one of an input)."""
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [4, 33]})
    y = b.relu(x)
    z = b.exp(b.identity(b.mul(y, b.constant(np.full((33,), 0.5, np.float32)))))
    w = b.add(z, b.sigmoid(y))
    return b.build({"y": y, "w": w, "y2": b.reshape(y, [132]), "xr": b.reshape(x, [2, 66])})


def _reference(a: np.ndarray) -> dict:
    a = a.astype(np.float64)
    y = np.maximum(a, 0)
    w = np.exp(y * 0.5) + 1 / (1 + np.exp(-y))
    return {"y": y, "w": w, "y2": y.reshape(132), "xr": a.reshape(2, 66)}


def _run(ctx, g, a):
    tin = ctx.create_tensor({"data_type": "float32", "shape": [4, 33], "writable": True})
    outs = {n: ctx.create_tensor({"data_type": d["data_type"], "shape": d["shape"], "readable": True})
            for n, d in g.outputs.items()}
    ctx.write_tensor(tin, a)
    ctx.dispatch(g, {"x": tin}, outs)
    res = {n: ctx.read_tensor(t) for n, t in outs.items()}
    key = next(reversed(g._recordings))  # this dispatch's recording
    rec = g._recordings[key]
    for t in (tin, *outs.values()):
        t.destroy()
    return res, rec


def test_native_and_public_paths_record_the_same_commands(ctx, rng, monkeypatch):
    g = _graph(ctx)
    kinds = ["k" if isinstance(s, KernelStep) else "c" for s in g._steps]
    assert "kc" in "".join(kinds) and "ck" in "".join(kinds), kinds  # a copy between kernels
    assert sum(isinstance(s, CopyStep) for s in g._steps) >= 3
    a = rng.standard_normal((4, 33)).astype(np.float32)
    fast, rec = _run(ctx, g, a)
    assert graph_mod._native() is not None, "the installed wgpu-py's wgpu-native backend has the C functions"
    assert rec.native is not None
    # the raw calls are the public ones: pipeline handle only when it changes, then group, dispatch
    for part, calls in zip(rec.parts, rec.native):
        if isinstance(part, int):
            assert calls is None and isinstance(g._steps[part], CopyStep)
            continue
        current = None
        for (pipeline, group, groups), call in zip(part, calls, strict=True):
            want = (None if pipeline is current else pipeline._internal, group._internal, *groups)
            assert call == want
            current = pipeline
    monkeypatch.setenv("WEBNN_GPU_FORCE_ENCODE", "public")
    public, rec_public = _run(ctx, g, a)
    assert rec_public.native is None
    for name, ref in _reference(a).items():
        np.testing.assert_array_equal(fast[name], public[name], err_msg=name)
        np.testing.assert_allclose(fast[name], ref, rtol=2e-6, atol=1e-6, err_msg=name)
    # compute() and a second dispatch of a kept recording give the same again
    out = ctx.compute(g, {"x": a})
    for name in fast:
        np.testing.assert_array_equal(out[name], fast[name], err_msg=name)
    g.destroy()


def test_fallback_when_the_c_functions_or_handles_are_missing(ctx, rng, monkeypatch):
    g = _graph(ctx)
    a = rng.standard_normal((4, 33)).astype(np.float32)
    fast, rec = _run(ctx, g, a)
    assert rec.native is not None
    monkeypatch.setattr(graph_mod, "_NATIVE", None)  # another wgpu-py: no wgpu_native._api.lib
    slow, rec_slow = _run(ctx, g, a)
    assert rec_slow.native is None
    for name in fast:
        np.testing.assert_array_equal(slow[name], fast[name], err_msg=name)
    monkeypatch.undo()

    class NoHandle:  # an object of another backend
        pass

    part = [(NoHandle(), NoHandle(), (1, 1, 1))]
    assert graph_mod._native_form([part]) is None
    pipeline, group, groups = rec.parts[0][0]
    assert graph_mod._native_form([[(pipeline, NoHandle(), groups)]]) is None
    assert graph_mod._native_form([[(pipeline, group, (3,))]]) == [((pipeline._internal, group._internal, 3, 1, 1),)]
    g.destroy()


def test_recordings_are_bounded_by_their_bind_groups(ctx):
    g = _graph(ctx)
    ins = {"x": ctx.create_tensor({"data_type": "float32", "shape": [4, 33], "writable": True})._buffer}
    outs = {n: ctx.create_tensor({"data_type": d["data_type"], "shape": d["shape"], "readable": True})._buffer
            for n, d in g.outputs.items()}
    made = g._recording(ins, outs, ("k", 0)).groups_made
    assert made >= 1
    for k in range(1, graph_mod.BIND_GROUPS_KEPT + 5):
        g._recording(ins, outs, ("k", k))
    kept = list(g._recordings)
    assert kept[-1] == ("k", graph_mod.BIND_GROUPS_KEPT + 4)  # the newest
    assert len(kept) * made <= graph_mod.BIND_GROUPS_KEPT < (len(kept) + 1) * made
    first = g._recording(ins, outs, kept[0])
    assert next(reversed(g._recordings)) == kept[0] and g._recording(ins, outs, kept[0]) is first
    g.destroy()
    assert not g._recordings
    with pytest.raises(webnn.InvalidStateError):
        ctx.compute(g, {"x": np.zeros((4, 33), np.float32)})
