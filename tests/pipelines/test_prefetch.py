"""Build time: pipelines made ahead of ``get_many`` (``PipelineCache.prefetch``: while
``build()`` lowers, and from a model's list of its last build at ``webnn.load``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

import webnn_gpu as webnn
from webnn_gpu import _kernels
from webnn_gpu._lower import KernelStep
from webnn_gpu.errors import OperationError

REPO = Path(__file__).resolve().parents[2]


def _kernel(n: int) -> str:
    """A small kernel text of its own (``n`` makes it distinct)."""
    return ("@group(0) @binding(0) var<storage, read_write> out: array<f32>;\n"
            f"@compute @workgroup_size(64)\nfn main(@builtin(global_invocation_id) g: vec3<u32>) {{\n"
            f"  if (g.x < arrayLength(&out)) {{ out[g.x] = out[g.x] * {n}.0; }}\n}}\n")


def _spy_prefetch(mp) -> list:
    """Patch PipelineCache.prefetch through ``mp`` (a MonkeyPatch) to record the keys it starts;
    returns the list they are appended to."""
    started: list = []
    real = _kernels.PipelineCache.prefetch

    def spy(self, requests):
        keys = real(self, requests)
        started.extend(keys)
        return keys

    mp.setattr(_kernels.PipelineCache, "prefetch", spy)
    return started


@pytest.fixture
def threads(monkeypatch):
    """Prefetching on (it is off with one pipeline thread, as on a one-CPU machine)."""
    monkeypatch.setattr(_kernels, "PIPELINE_THREADS", 2)


@pytest.fixture
def made(ctx, monkeypatch):
    """The keys of the pipelines ``ctx``'s cache makes (each call of ``_compile``)."""
    keys: list = []
    real = _kernels.PipelineCache._compile

    def counting(self, k, wgsl, template, label, entry):
        keys.append(k)
        return real(self, k, wgsl, template, label, entry)

    monkeypatch.setattr(_kernels.PipelineCache, "_compile", counting)
    return keys


def test_a_prefetched_pipeline_is_taken_not_made_again(ctx, threads, made):
    cache = ctx._pipelines
    text = _kernel(9101)
    size, misses = len(cache), cache.misses
    started = cache.prefetch([(text, "t.wgsl", "[pf]")])
    assert started == [cache.key(text)] and len(cache) == size, "started, not yet in the cache"
    assert cache.prefetch([(text, "t.wgsl", "[pf]")]) == [], "being made: not started twice"
    got = []
    pipe, = cache.get_many([(text, "t.wgsl", "[pf]")], on_ready=lambda k, p: got.append((k, p)))
    assert made == [cache.key(text)], "made once, by the prefetch"
    # a cache already at its capacity (a worker that ran many GPU tests) drops its oldest for it
    assert got == [(cache.key(text), pipe)] and len(cache) == min(size + 1, cache.capacity)
    assert cache.misses == misses + 1
    assert cache.get_many([(text, "t.wgsl", "[pf]")]) == [pipe] and not cache._pending
    assert cache.prefetch([(text, "t.wgsl", "[pf]")]) == [], "in the cache: nothing to start"


def test_get_takes_a_prefetched_pipeline_too(ctx, threads, made):
    cache = ctx._pipelines
    text = _kernel(9102)
    cache.prefetch([(text, "t.wgsl", "[pf get]")])
    pipe = cache.get(text, template="t.wgsl", label="[pf get]")
    assert made == [cache.key(text)] and cache.get(text) is pipe and not cache._pending


def test_discarded_prefetches_are_not_kept(ctx, threads, made):
    cache = ctx._pipelines
    texts = [_kernel(9103 + i) for i in range(3)]
    size = len(cache)
    started = cache.prefetch([(t, "t.wgsl", "[pf discard]") for t in texts])
    cache.discard(started)
    assert len(cache) == size and not cache._pending
    made.clear()
    pipes = cache.get_many([(texts[0], "t.wgsl", "[pf discard]")])
    assert made == [cache.key(texts[0])] and len(pipes) == 1, "made anew after the discard"


def test_a_prefetched_pipeline_that_fails_raises_where_it_is_taken(ctx, threads):
    cache = ctx._pipelines
    bad = "@compute @workgroup_size(1) fn main() { let a = not_declared_9104; }"
    size = len(cache)
    assert cache.prefetch([(bad, "t.wgsl", "[pf bad]")])  # no error yet: nothing waits for it
    with pytest.raises(OperationError, match=r"\[pf bad\]: our kernel failed to compile"):
        cache.get_many([(bad, "t.wgsl", "[pf bad]"), (_kernel(9105), "t.wgsl", "[pf good]")])
    assert len(cache) == size and not cache._pending, "the failed call keeps nothing"


def _chain(ctx, n: int):
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [n]})
    return b.build({"a": b.exp(x), "s": b.sigmoid(b.neg(x)), "t": b.tanh(x)})


def test_build_makes_each_kernel_while_it_lowers_and_a_failed_build_keeps_none(ctx, threads, made, monkeypatch,
                                                                                 rng):
    cache = ctx._pipelines
    started = _spy_prefetch(monkeypatch)

    def failing(self, requests, on_ready=None):
        raise OperationError("injected after lowering")

    real_get_many = _kernels.PipelineCache.get_many
    monkeypatch.setattr(_kernels.PipelineCache, "get_many", failing)
    size = len(cache)
    with pytest.raises(OperationError, match="injected"):
        _chain(ctx, 9107)
    assert started, "kernels started as their nodes were lowered"
    assert len(cache) == size and not cache._pending, "nothing of the failed build is kept"
    monkeypatch.setattr(_kernels.PipelineCache, "get_many", real_get_many)
    started.clear()
    made.clear()
    g = _chain(ctx, 9107)
    kernels = [s for s in g._steps if isinstance(s, KernelStep)]
    assert sorted(made) == sorted({cache.key(s.wgsl) for s in kernels}) == sorted(started), \
        "every pipeline made once, by the prefetch during lowering"
    x = rng.standard_normal(9107).astype(np.float32)
    out = ctx.compute(g, {"x": x})
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(out["a"], np.exp(x64), rtol=1e-5)
    np.testing.assert_allclose(out["s"], 1 / (1 + np.exp(x64)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out["t"], np.tanh(x64), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- a model's list (webnn.load)

def test_model_key_names_bytes_options_and_adapter():
    class Ctx:
        adapter_info = {"device": "llvmpipe", "description": "Mesa 22.3.6"}
        _features = frozenset({"shader-f16"})

    key = _kernels.ModelPrefetch.model_key
    base = key(b"model", {"dtype": "float32"}, Ctx())
    assert base and base == key(b"model", {"dtype": "float32"}, Ctx())
    assert base != key(b"modem", {"dtype": "float32"}, Ctx())
    assert base != key(b"model", {"dtype": "float16"}, Ctx())
    other = Ctx()
    other.adapter_info = {"device": "llvmpipe", "description": "Mesa 25.0.7"}
    assert base != key(b"model", {"dtype": "float32"}, other)
    assert key(b"model", {"custom_ops": {"X": print}}, Ctx()) is None, "options that are not data: no list"


@pytest.fixture
def synthetic(tmp_path):
    sys.path.insert(0, str(REPO / "tests" / "model"))
    try:
        from litert_reference import run_litert
        from synthetic_models import CASES
    finally:
        sys.path.pop(0)
    data, inputs = CASES["conv_same_stride2_relu6"]()
    path = tmp_path / "conv.tflite"
    path.write_bytes(data)
    return path, inputs, run_litert(data, inputs)


@pytest.fixture
def wgsl_folder(tmp_path, monkeypatch):
    """A rendered-WGSL folder of this test's own (the lists live in it)."""
    folder = tmp_path / "wgsl"
    folder.mkdir()
    monkeypatch.setattr(_kernels, "_RENDERED_DIR", [folder])
    monkeypatch.setattr(_kernels, "_RENDERED", type(_kernels._RENDERED)())  # render again, into the folder
    return folder


def test_load_starts_the_pipelines_of_the_models_last_build(synthetic, wgsl_folder, threads):
    path, inputs, ref = synthetic
    first = webnn.ml.create_context()
    second = webnn.ml.create_context()  # a device of its own: a cache that has none of them
    try:
        webnn.load(path, first)
        lists = list((wgsl_folder / "models").glob("*.json"))
        assert len(lists) == 1
        listed = json.loads(lists[0].read_text())["pipelines"]
        pf = _kernels.ModelPrefetch.start(second, path, {})
        assert pf.listed == listed and sorted(pf.started) == sorted(e[0] for e in listed)
        pf.finish(None)
        assert not second._pipelines._pending, "what no build took is dropped"
        with pytest.MonkeyPatch.context() as mp:
            started = _spy_prefetch(mp)
            third = webnn.ml.create_context()
            try:
                model = webnn.load(path, third)
                kernels = {third._pipelines.key(s.wgsl) for s in model.graph._steps if isinstance(s, KernelStep)}
                assert kernels == set(started) == {e[0] for e in listed}, "all started from the list, at the start"
                assert not third._pipelines._pending
                out = model.compute(inputs[0])
                np.testing.assert_allclose(next(iter(out.values())), ref[0], rtol=1e-5, atol=1e-5)
            finally:
                third.destroy()
        assert lists[0].read_text() == json.dumps({"pipelines": listed}), "unchanged: not rewritten"
    finally:
        second.destroy()
        first.destroy()


def test_a_stale_or_broken_list_costs_time_never_a_result(synthetic, wgsl_folder, threads, ctx):
    path, inputs, ref = synthetic
    webnn.load(path, ctx)
    listed_file, = (wgsl_folder / "models").glob("*.json")
    good = json.loads(listed_file.read_text())["pipelines"]
    other = wgsl_folder / "other.wgsl"
    other.write_text(_kernel(9109))
    stale = [[_kernels.PipelineCache.key(_kernel(9109)), "other.wgsl", "t.wgsl", "[not this model's]"],
             [good[0][0], "other.wgsl", "t.wgsl", "[text does not match its key]"],
             [good[0][0], "../escape.wgsl", "t.wgsl", "[outside the folder]"], ["junk"]]
    listed_file.write_text(json.dumps({"pipelines": stale}))
    fresh = webnn.ml.create_context()
    try:
        model = webnn.load(path, fresh)
        assert not fresh._pipelines._pending, "the pipeline no build used is dropped"
        assert json.loads(listed_file.read_text())["pipelines"] == good, "the list is written again"
        np.testing.assert_allclose(next(iter(model.compute(inputs[0]).values())), ref[0], rtol=1e-5, atol=1e-5)
        listed_file.write_text("{not json")
        model = webnn.load(path, fresh)
        assert json.loads(listed_file.read_text())["pipelines"] == good
    finally:
        fresh.destroy()


def test_a_model_file_is_named_by_path_size_and_time(tmp_path, monkeypatch, ctx, threads, wgsl_folder):
    """The file is not read for its key (the loader reads it): a rewritten file (new
    modification time) gets a list of its own."""
    import os

    path = tmp_path / "big.tflite"
    path.write_bytes(b"12345678")
    read = []
    real_open = open
    monkeypatch.setattr("builtins.open", lambda f, *a, **k: (read.append(str(f)), real_open(f, *a, **k))[1])
    one = _kernels.ModelPrefetch.start(ctx, path, {})._path
    assert str(path) not in read and one is not None
    os.utime(path, ns=(1, 1))
    two = _kernels.ModelPrefetch.start(ctx, path, {})._path
    assert two is not None and two != one


def test_a_forked_process_makes_pipelines_on_threads_of_its_own(ctx, threads):
    """The pool's threads are not forked: a child that builds must not wait on them forever."""
    import multiprocessing
    import os

    cache = ctx._pipelines
    cache.get_many([(_kernel(9110), "t.wgsl", "[parent]"), (_kernel(9111), "t.wgsl", "[parent]")])  # the pool exists
    parent_pool = _kernels._pipeline_pool()

    def child(queue):
        try:
            pool = _kernels._pipeline_pool()
            queue.put((pool is not parent_pool, pool.submit(os.getpid).result(timeout=30) == os.getpid()))
        except Exception as exc:  # noqa: BLE001 - reported to the parent
            queue.put(repr(exc))

    mp = multiprocessing.get_context("fork")
    queue = mp.Queue()
    proc = mp.Process(target=child, args=(queue,))
    proc.start()
    try:
        assert queue.get(timeout=60) == (True, True)
    finally:
        proc.join(timeout=60)
