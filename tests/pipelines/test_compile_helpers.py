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
    helpers work the same there); every new pipeline counts as large and is worth lending;
    markers in ``tmp_path``."""
    monkeypatch.setattr(_kernels, "COMPILE_DEVICES", 2)
    monkeypatch.setattr(_kernels, "compiles_at_dispatch", lambda info: True)  # lavapipe's, also elsewhere
    monkeypatch.setattr(graph_module, "EARLY_WARM_UP_BYTES", 0)
    monkeypatch.setattr(_kernels, "COMPILE_HELP_MIN_BYTES", 0)
    mesa = tmp_path / "mesa_shader_cache"
    mesa.mkdir()
    monkeypatch.setattr(_kernels, "mesa_cache_folder", lambda: mesa)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    calls = {"lent": [], "compiled": []}
    lend, wait = _kernels.CompileHelpers.lend, _kernels.CompileHelpers.wait

    def spy_lend(self, jobs):
        keys = lend(self, jobs)
        calls["lent"].append((len(jobs), set(keys)))
        return keys

    def spy_wait(self):
        done = wait(self)
        calls["compiled"].append(set(done))
        return done

    monkeypatch.setattr(_kernels.CompileHelpers, "lend", spy_lend)
    monkeypatch.setattr(_kernels.CompileHelpers, "wait", spy_wait)
    return calls, tmp_path


def test_helpers_compile_part_of_a_new_graph_and_results_hold(helpers_on, rng):
    calls, tmp_path = helpers_on
    ctx = webnn.ml.create_context()
    g = _graph(ctx, 2053)
    keys = {ctx._pipelines.key(s.wgsl) for s in _kernels_of(g)}
    (jobs, lent), = calls["lent"]
    assert jobs == len(keys) == 4 and lent and lent < keys, "some new pipelines went to the helper, not all"
    assert calls["compiled"][0] == lent, "the helper compiled what it was lent"
    assert {id(s.pipeline) for s in _kernels_of(g)} <= ctx._pipelines.warm
    assert all(s.pipeline is ctx._pipelines.get(s.wgsl) for s in _kernels_of(g)), "the graph's own pipelines"
    _check(ctx, g, 2053, rng)
    seen = list((tmp_path / "xdg" / "webnn-gpu" / "mesa-seen").glob("*/*"))
    assert {p.name for p in seen} - {"folder"} == keys, "each pipeline Mesa's cache now holds is marked"
    # a new device in this process (Mesa's cache has them all): nothing is lent
    calls["lent"].clear()
    other = webnn.ml.create_context()
    _check(other, _graph(other, 2053), 2053, rng)
    assert calls["lent"] == [(0, set())]


def test_a_failing_helper_costs_time_not_results(helpers_on, monkeypatch, rng):
    calls, _ = helpers_on
    real = _kernels.CompileHelpers._compile

    def broken(device, share, done):  # a helper whose shaders do not compile
        real(device, [(k, w + "\nthis is not WGSL", t, label, sizes) for k, w, t, label, sizes in share], done)

    monkeypatch.setattr(_kernels.CompileHelpers, "_compile", staticmethod(broken))
    ctx = webnn.ml.create_context()
    g = _graph(ctx, 2063)
    (_, lent), = calls["lent"]
    assert lent and calls["compiled"][0] == set(), "the helper failed and compiled nothing"
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
    small = [(f"k{i}", "x" * 5000, "t.wgsl", "l", [4]) for i in range(3)]  # compiles in a moment: kept
    assert helpers is not None and helpers.lend(small) == set() and helpers.wait() == set()
    assert _kernels.CompileHelpers._DEVICES == {}, "no helper device is made before one is needed"
    monkeypatch.setattr(_kernels, "COMPILE_DEVICES", 1)
    assert _kernels.CompileHelpers.of(ctx) is None


def test_a_helper_binds_large_values_in_part(helpers_on, monkeypatch, rng):
    calls, _ = helpers_on
    monkeypatch.setattr(_kernels, "HELPER_SCRATCH_BYTES", 256)  # 64 of the 2069 floats
    ctx = webnn.ml.create_context()
    g = _graph(ctx, 2069)
    (_, lent), = calls["lent"]
    assert lent and calls["compiled"][0] == lent, "bound in part, the helper still ran (compiled) its share"
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


def test_the_graphs_queue_runs_its_short_pipelines_while_a_helper_compiles(helpers_on, monkeypatch, rng):
    calls, _ = helpers_on
    monkeypatch.setattr(graph_module, "EARLY_WARM_UP_BYTES", 2000)  # the two convs, not the two maps
    events = []
    submit, wait = _kernels.PipelineCache.submit_once, _kernels.CompileHelpers.wait
    monkeypatch.setattr(_kernels.PipelineCache, "submit_once", lambda self, device, jobs: (
        events.append(("submit", device, [j[3] for j in jobs])), submit(self, device, jobs)))
    monkeypatch.setattr(_kernels.CompileHelpers, "wait", lambda self: (events.append(("wait",)), wait(self))[1])
    ctx = webnn.ml.create_context()
    w1 = (rng.standard_normal((12, 3, 3, 8)) / 8).astype(np.float32)
    w2 = (rng.standard_normal((16, 5, 5, 8)) / 16).astype(np.float32)
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [1, 9, 7, 8]})
    g = b.build({"y1": b.conv2d(x, b.constant(w1), input_layout="nhwc", filter_layout="ohwi", padding=[1, 1, 1, 1]),
                 "y2": b.conv2d(x, b.constant(w2), input_layout="nhwc", filter_layout="ohwi", padding=[2, 2, 2, 2]),
                 "e": b.exp(x), "t": b.tanh(x)})
    steps = _kernels_of(g)
    big = sorted((s for s in steps if len(s.wgsl) >= 2000), key=lambda s: len(s.wgsl))
    assert len(big) == 2 and len(steps) == 4, [(s.template, len(s.wgsl)) for s in steps]
    (_, lent), = calls["lent"]
    assert lent == {ctx._pipelines.key(big[0].wgsl)}, "the longer one stays, the other is lent"
    own = [e for e in events if e[0] == "wait" or e[1] is ctx.device]
    first_wait = own.index(("wait",))
    before = [t for e in own[:first_wait] for t in e[2]]
    assert before.count("elementwise/map4.wgsl") == 2 and before.count("matmul/tile.wgsl") == 1, \
        "the graph's queue got its own conv and the short maps before waiting for the helper"
    assert {id(s.pipeline) for s in steps} <= ctx._pipelines.warm
    xin = rng.standard_normal((1, 9, 7, 8)).astype(np.float32)
    out = ctx.compute(g, {"x": xin})
    np.testing.assert_allclose(out["y1"], _conv_nhwc(xin, w1, 1), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(out["y2"], _conv_nhwc(xin, w2, 2), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(out["e"], np.exp(xin.astype(np.float64)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out["t"], np.tanh(xin.astype(np.float64)), rtol=1e-5, atol=1e-6)


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
