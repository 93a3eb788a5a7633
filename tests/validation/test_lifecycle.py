"""Lifecycles, threads and leaks: steady memory and object counts over many cycles."""

from __future__ import annotations

import gc
import threading

import numpy as np
import pytest
import wgpu

import webnn_gpu as webnn


def _counts() -> dict:
    d = wgpu.diagnostics.object_counts.get_dict()
    return {k: v["count"] for k, v in d.items() if k != "total"}


def _graph(ctx, n=256):
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [n]})
    return b.build({"y": b.add(b.mul(x, x), b.constant("float32", 1.0))})


def test_dispatch_read_cycles_do_not_leak(ctx):
    g = _graph(ctx)
    ti = ctx.create_tensor({"data_type": "float32", "shape": [256], "writable": True})
    to = ctx.create_tensor({"data_type": "float32", "shape": [256], "readable": True})
    data = np.linspace(-2, 2, 256).astype(np.float32)
    out = np.empty(256, np.float32)

    def cycles(n):
        for _ in range(n):
            ctx.write_tensor(ti, data)
            ctx.dispatch(g, {"x": ti}, {"y": to})
            ctx.read_tensor(to, out=out)

    cycles(200)
    gc.collect()
    before = _counts()
    cycles(10_000)
    gc.collect()
    after = _counts()
    np.testing.assert_allclose(out, data.astype(np.float64) ** 2 + 1, rtol=1e-6)
    grown = {k: (before[k], after[k]) for k in before if after[k] > before[k] + 2}
    assert not grown, f"live GPU objects grew over 10,000 cycles: {grown}"


def test_build_destroy_cycles_do_not_leak(ctx):
    for _ in range(20):
        _graph(ctx).destroy()
    gc.collect()
    before = _counts()
    for i in range(1000):
        g = _graph(ctx)
        if i % 100 == 0:
            ctx.compute(g, {"x": np.zeros(256, np.float32)})
        g.destroy()
    gc.collect()
    after = _counts()
    grown = {k: (before[k], after[k]) for k in before if after[k] > before[k] + 4}
    assert not grown, f"live GPU objects grew over 1,000 build/destroy cycles: {grown}"


def test_tensor_create_destroy_cycles_release_buffers(ctx):
    gc.collect()
    before = _counts()["Buffer"]
    for _ in range(500):
        t = ctx.create_tensor({"data_type": "float32", "shape": [1024], "readable": True, "writable": True})
        ctx.write_tensor(t, np.ones(1024, np.float32))
        t.destroy()
    ctx._drain_retired()
    gc.collect()
    assert _counts()["Buffer"] <= before + 20


def test_one_context_many_threads_same_results(ctx):
    g = _graph(ctx, 1024)
    errors = []
    results = {}

    def worker(k: int):
        try:
            ti = ctx.create_tensor({"data_type": "float32", "shape": [1024], "writable": True})
            to = ctx.create_tensor({"data_type": "float32", "shape": [1024], "readable": True})
            data = np.full(1024, k, np.float32)
            for i in range(50):
                ctx.write_tensor(ti, data + i)
                ctx.dispatch(g, {"x": ti}, {"y": to})
                got = ctx.read_tensor(to)
                if not np.array_equal(got, (data + i) ** 2 + 1):
                    raise AssertionError(f"thread {k} iteration {i}: wrong result")
                out = ctx.compute(g, {"x": data})["y"]
                if not np.array_equal(out, data ** 2 + 1):
                    raise AssertionError(f"thread {k} iteration {i}: wrong compute() result")
            results[k] = True
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "deadlock: a thread did not finish"
    assert not errors, errors
    assert len(results) == 4


def test_destroyed_tensor_pending_read_fails_not_hangs(ctx):
    t = ctx.create_tensor({"data_type": "float32", "shape": [4], "readable": True})
    t.destroy()
    with pytest.raises(webnn.InvalidStateError):
        ctx.read_tensor(t)
