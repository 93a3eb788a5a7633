"""Build time: helper devices whose queues compile some of a graph's new pipelines while the
graph's own queue compiles the others (lavapipe compiles at a pipeline's first dispatch, on one
queue thread per device; devices share Mesa's on-disk shader cache)."""

from __future__ import annotations

import numpy as np
import pytest

import webnn_gpu as webnn
from webnn_gpu import _kernels
from webnn_gpu import graph as graph_module
from webnn_gpu._lower import KernelStep

def _kernels_of(graph) -> list:
    return [s for s in graph._steps if isinstance(s, KernelStep)]


def _graph(ctx, n: int):
    """Four element-wise kernels on an odd size (shader texts no other test makes)."""
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [n]})
    return b.build({"a": b.exp(x), "s": b.sigmoid(b.neg(x)), "t": b.tanh(b.abs(x)), "c": b.cos(x)})


def _check(ctx, graph, n: int, rng) -> None:
    x = rng.standard_normal(n).astype(np.float32)
    out = ctx.compute(graph, {"x": x})
    x64 = x.astype(np.float64)
    for name, ref in (("a", np.exp(x64)), ("s", 1 / (1 + np.exp(x64))), ("t", np.tanh(np.abs(x64))),
                      ("c", np.cos(x64))):
        np.testing.assert_allclose(out[name], ref, rtol=1e-5, atol=1e-6)


@pytest.fixture
def helpers_on(monkeypatch, tmp_path):
    """One helper device (also on adapters other than lavapipe, where it is not used: the
    helpers work the same there); every new pipeline counts as large and is worth sharing;
    markers in ``tmp_path``. ``calls["started"]`` gets the keys of each build's shared jobs,
    ``calls["compiled"]`` what the helpers compiled; ``calls["own"]`` is set to "never" (the
    graph's queue takes no shared job) or "only" (the helper takes none) by a test."""
    monkeypatch.setattr(_kernels, "COMPILE_DEVICES", 2)
    monkeypatch.setattr(_kernels, "compiles_at_dispatch", lambda info: True)  # lavapipe's, also elsewhere
    monkeypatch.setattr(graph_module, "EARLY_WARM_UP_BYTES", 0)
    monkeypatch.setattr(_kernels, "COMPILE_HELP_MIN_BYTES", 0)
    mesa = tmp_path / "mesa_shader_cache"
    mesa.mkdir()
    monkeypatch.setattr(_kernels, "mesa_cache_folder", lambda: mesa)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    calls = {"started": [], "compiled": [], "own": None}
    start, wait, take = _kernels.CompileHelpers.start, _kernels.CompileHelpers.wait, _kernels.CompileQueue.take

    def spy_start(self, jobs):
        queue = start(self, jobs)
        calls["started"].append(({j.key for j in jobs}, queue is not None))
        calls["queue"] = queue
        return queue

    def spy_wait(self, cancel=False):
        done = wait(self, cancel)
        calls["compiled"].append(set(done))
        return done

    def steered_take(self, ready=None, helper=False):
        if calls["own"] == ("only" if helper else "never"):
            return None
        return take(self, ready, helper)

    monkeypatch.setattr(_kernels.CompileHelpers, "start", spy_start)
    monkeypatch.setattr(_kernels.CompileHelpers, "wait", spy_wait)
    monkeypatch.setattr(_kernels.CompileQueue, "take", steered_take)
    return calls, tmp_path


def test_a_helper_compiles_what_it_takes_and_results_hold(helpers_on, monkeypatch, rng):
    calls, tmp_path = helpers_on
    calls["own"] = "never"  # every shared pipeline goes to the helper
    ctx = webnn.ml.create_context()
    # (pipelines run on the graph's device, the keys the helpers had compiled by then)
    runs = []

    def compiled_by_now():
        queue = calls.get("queue")
        return set(queue.done) if queue is not None else set()

    submit, run_once = _kernels.PipelineCache.submit_once, _kernels.PipelineCache.run_once
    monkeypatch.setattr(_kernels.PipelineCache, "submit_once", lambda self, device, jobs: (
        runs.append(({id(j[0]) for j in jobs}, compiled_by_now(), bool(calls["compiled"])))
        if device is ctx.device else None, submit(self, device, jobs))[1])
    monkeypatch.setattr(_kernels.PipelineCache, "run_once", lambda self, device, jobs, wait, submitted=(): (
        runs.append(({id(j[0]) for j in jobs}, compiled_by_now(), bool(calls["compiled"])))
        if device is ctx.device else None, run_once(self, device, jobs, wait, submitted))[1])
    g = _graph(ctx, 2053)
    keys = {ctx._pipelines.key(s.wgsl) for s in _kernels_of(g)}
    (shared, started), = calls["started"]
    assert shared == keys and len(keys) == 4 and started
    assert calls["compiled"][0] == keys, "the helper compiled every job it took"
    key_of = {id(s.pipeline): ctx._pipelines.key(s.wgsl) for s in _kernels_of(g)}
    assert all(key_of[p] in compiled for pipes, compiled, _ in runs for p in pipes if p in key_of), \
        "the graph's device runs a pipeline a helper took only after the helper compiled it (no second compile)"
    assert any(pipes & set(key_of) and not waited for pipes, _, waited in runs), \
        "a job the helper has finished runs here while it compiles the others (Mesa's cache has it)"
    assert {id(s.pipeline) for s in _kernels_of(g)} <= ctx._pipelines.warm
    assert all(s.pipeline is ctx._pipelines.get(s.wgsl) for s in _kernels_of(g)), "the graph's own pipelines"
    _check(ctx, g, 2053, rng)
    seen = list((tmp_path / "xdg" / "webnn-gpu" / "mesa-seen").glob("*/*"))
    assert {p.name for p in seen} - {"folder"} == keys, "each pipeline Mesa's cache now holds is marked"
    # a new device in this process (Mesa's cache has them all): nothing is shared
    calls["started"].clear()
    other = webnn.ml.create_context()
    _check(other, _graph(other, 2053), 2053, rng)
    assert calls["started"] == [(set(), False)]


def test_the_graphs_queue_takes_jobs_from_the_shared_queue(helpers_on, rng):
    calls, _ = helpers_on
    calls["own"] = "only"  # the helper takes none: the graph's queue runs them all, one by one
    ctx = webnn.ml.create_context()
    g = _graph(ctx, 2081)
    (shared, started), = calls["started"]
    assert len(shared) == 4 and started and calls["compiled"][0] == set()
    assert {id(s.pipeline) for s in _kernels_of(g)} <= ctx._pipelines.warm
    _check(ctx, g, 2081, rng)


def test_a_failing_helper_costs_time_not_results(helpers_on, monkeypatch, rng):
    calls, _ = helpers_on
    calls["own"] = "never"
    real = _kernels.PipelineCache.get

    def broken(self, wgsl, **kw):  # the helper's shaders do not compile
        return real(self, wgsl if self.device is ctx.device else wgsl + "\nthis is not WGSL", **kw)

    monkeypatch.setattr(_kernels.PipelineCache, "get", broken)
    ctx = webnn.ml.create_context()
    g = _graph(ctx, 2063)
    (shared, _), = calls["started"]
    assert shared and calls["compiled"][0] == set(), "the helper failed and compiled nothing"
    assert {id(s.pipeline) for s in _kernels_of(g)} <= ctx._pipelines.warm
    _check(ctx, g, 2063, rng)


def test_no_helpers_where_they_cannot_pay(monkeypatch, tmp_path):
    ctx = webnn.ml.create_context()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("MESA_SHADER_CACHE_DIR", str(tmp_path / "mesa"))
    for var in ("MESA_SHADER_CACHE_DISABLE", "MESA_GLSL_CACHE_DISABLE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(_kernels, "COMPILE_DEVICES", 2)
    lavapipe = _kernels.compiles_at_dispatch(ctx.adapter_info)
    assert lavapipe == ("llvmpipe" in str(ctx.adapter_info)), "only lavapipe compiles on its queue thread"
    monkeypatch.setattr(_kernels, "compiles_at_dispatch", lambda info: True)
    assert _kernels.mesa_cache_folder() == tmp_path / "mesa" / "mesa_shader_cache"
    assert _kernels.CompileHelpers.of(ctx) is not None
    for off in ("true", "1", "yes"):  # Mesa's disk cache off: a helper's compile would be lost
        monkeypatch.setenv("MESA_SHADER_CACHE_DISABLE", off)
        assert _kernels.mesa_cache_folder() is None and _kernels.CompileHelpers.of(ctx) is None
    monkeypatch.setenv("MESA_SHADER_CACHE_DISABLE", "false")
    helpers = _kernels.CompileHelpers.of(ctx)
    monkeypatch.setattr(_kernels.CompileHelpers, "_DEVICES", {})
    small = [_kernels.CompileJob(f"k{i}", "x" * 5000, "t.wgsl", "l", [4]) for i in range(3)]  # compiles in a moment
    assert helpers is not None and helpers.start(small) is None and helpers.wait() == set()
    assert _kernels.CompileHelpers._DEVICES == {}, "no helper device is made before one is needed"
    monkeypatch.setattr(_kernels, "COMPILE_DEVICES", 1)
    assert _kernels.CompileHelpers.of(ctx) is None


def test_a_helper_binds_large_values_in_part(helpers_on, monkeypatch, rng):
    calls, _ = helpers_on
    calls["own"] = "never"
    monkeypatch.setattr(_kernels, "HELPER_SCRATCH_BYTES", 256)  # 64 of the 2069 floats
    ctx = webnn.ml.create_context()
    g = _graph(ctx, 2069)
    (shared, _), = calls["started"]
    assert shared and calls["compiled"][0] == shared, "bound in part, the helper still ran (compiled) them"
    _check(ctx, g, 2069, rng)


def _conv_nhwc(x, w_ohwi, pad: int) -> np.ndarray:
    """float64 conv2d, NHWC input, OHWI filter, stride 1, same padding ``pad``."""
    k = w_ohwi.shape[1]
    xp = np.pad(x.astype(np.float64), [(0, 0), (pad, pad), (pad, pad), (0, 0)])
    out = np.zeros(x.shape[:3] + (w_ohwi.shape[0],))
    for kh in range(k):
        for kw in range(k):
            out += np.einsum("nhwc,oc->nhwo", xp[:, kh:kh + x.shape[1], kw:kw + x.shape[2], :],
                             w_ohwi[:, kh, kw, :].astype(np.float64))
    return out


def test_a_helper_binds_the_graphs_constants(helpers_on, monkeypatch, rng):
    """llvmpipe compiles nothing for a run whose uniform buffers hold only zeros, so a helper
    writes the constants the graph binds (here the conv's weights, read back from the graph's
    own buffer) into its scratch buffers before it runs a pipeline."""
    calls, _ = helpers_on
    calls["own"] = "never"
    monkeypatch.setattr(graph_module, "EARLY_WARM_UP_BYTES", 2000)  # the conv, not the map
    written = []
    import wgpu

    queue_type = type(webnn.ml.create_context().device.queue)
    real = queue_type.write_buffer

    def spy(self, buffer, offset, data, *args, **kw):
        if buffer.label == "compile helper scratch":
            written.append(bytes(data))
        return real(self, buffer, offset, data, *args, **kw)

    monkeypatch.setattr(queue_type, "write_buffer", spy)
    ctx = webnn.ml.create_context()
    w = (rng.standard_normal((12, 3, 3, 8)) / 8).astype(np.float32)
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [1, 9, 7, 8]})
    g = b.build({"y": b.conv2d(x, b.constant(w), input_layout="nhwc", filter_layout="ohwi", padding=[1, 1, 1, 1]),
                 "e": b.exp(x)})
    conv = [s for s in _kernels_of(g) if len(s.wgsl) >= 2000]
    assert len(conv) == 1
    (shared, _), = calls["started"]
    assert shared == {ctx._pipelines.key(conv[0].wgsl)} and calls["compiled"][0] == shared
    bound = []  # what the graph's own device binds at the conv's constant bindings
    for i, v in enumerate(conv[0].values):
        if g._root(v).kind == "constant":
            offset, size = g._binding_range(conv[0], i)
            buf = g._buffers[g._slot[g._root(v).id].key]
            bound.append(bytes(ctx.device.queue.read_buffer(buf, offset, -(-size // 4) * 4)))
    assert bound and sorted(bound) == sorted(written), "the helper bound the same bytes as the graph"
    xin = rng.standard_normal((1, 9, 7, 8)).astype(np.float32)
    out = ctx.compute(g, {"x": xin})
    np.testing.assert_allclose(out["y"], _conv_nhwc(xin, w, 1), rtol=1e-4, atol=1e-5)


def test_the_compile_queue_hands_out_the_longest_predicted_first():
    """GPU-free: the order (predicted LLVM time: template and WGSL length), ``ready``, and the
    bookkeeping of what helpers did."""
    jobs = [_kernels.CompileJob("tile", "x" * 40000, "matmul/tile.wgsl", "", [4]),
            _kernels.CompileJob("dwp", "x" * 20000, "conv/depthwise_project.wgsl", "", [4]),
            _kernels.CompileJob("other", "x" * 30000, "pool/pool2d.wgsl", "", [4])]
    assert [round(j.cost, 2) for j in jobs] == [0.74, 0.55, 0.5]
    q = _kernels.CompileQueue(jobs)
    assert len(q) == 3 and q.keys == {"tile", "dwp", "other"} and not q.settled()
    assert q.take(ready=lambda k: k != "dwp").key == "tile", "the longest of those made here"
    job = q.take(helper=True)
    assert job.key == "dwp" and not q.settled()
    q.finish(job, ok=False)
    assert q.failed == {"dwp"} and q.done == []
    job = q.take(helper=True)
    assert job.key == "other" and q.take() is None and not q.settled()
    q.finish(job, ok=True)
    assert q.done == ["other"] and q.settled() and len(q) == 0
    assert q.wait_done(5) == ["other"], "settled: returns at once with what the helpers compiled"
    q2 = _kernels.CompileQueue(jobs[:1])
    assert q2.wait_done(1, timeout=0.01) == [], "a job still queued: nothing compiled yet"
    q2.finish(q2.take(helper=True), ok=True)
    assert q2.wait_done(1) == ["tile"]


def test_markers_of_mesa_folders_that_are_gone_are_removed(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    folders = {name: tmp_path / name / "mesa_shader_cache" for name in "abc"}
    for f in folders.values():
        f.mkdir(parents=True)
    seen_a, seen_b = _kernels._seen_folder(folders["a"]), _kernels._seen_folder(folders["b"])
    (seen_a / "k1").touch()
    assert seen_a != seen_b and _kernels._seen_folder(folders["a"]) == seen_a and (seen_a / "k1").exists()
    folders["a"].rmdir()  # a benchmark's temporary Mesa folder, removed
    seen_c = _kernels._seen_folder(folders["c"])
    assert not seen_a.exists() and seen_b.is_dir() and seen_c.is_dir(), "only the markers of a gone folder go"
