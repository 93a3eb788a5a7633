"""Build time: the per-device pipeline cache, per-pipeline compile times, warm-up runs that
overlap pipeline creation, and kernels whose compile cost is bounded (tile kernel epilogues of
NCHW pointwise convs)."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import webnn_gpu as webnn
from webnn_gpu import _kernels
from webnn_gpu._lower import KernelStep
from webnn_gpu.errors import OperationError
from webnn_gpu.profile import format_pipelines, pipeline_rows

REPO = Path(__file__).resolve().parents[2]


def _kernels_of(graph) -> list:
    return [s for s in graph._steps if isinstance(s, KernelStep)]


def _model(ctx, weights: dict, *, head: bool):
    """conv2d 3x3 (NHWC) + relu, a 1x1 conv, and with ``head`` a sigmoid: two "models" whose
    first layers have the same shader text."""
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [1, 9, 7, 8]})
    y = b.relu(b.conv2d(x, b.constant(weights["w1"]), input_layout="nhwc", filter_layout="ohwi",
                        padding=[1, 1, 1, 1], bias=b.constant(weights["b1"])))
    y = b.conv2d(y, b.constant(weights["w2"]), input_layout="nhwc", filter_layout="ohwi")
    return b.build({"y": b.sigmoid(y) if head else y})


def _reference(x, weights: dict, *, head: bool) -> np.ndarray:
    xp = np.pad(x.astype(np.float64), [(0, 0), (1, 1), (1, 1), (0, 0)])
    w1 = weights["w1"].astype(np.float64)  # ohwi
    y = np.zeros((1, 9, 7, w1.shape[0]))
    for kh in range(3):
        for kw in range(3):
            y += np.einsum("nhwc,oc->nhwo", xp[:, kh:kh + 9, kw:kw + 7, :], w1[:, kh, kw, :])
    y = np.einsum("nhwc,oc->nhwo", np.maximum(y + weights["b1"], 0.0), weights["w2"][:, 0, 0, :].astype(np.float64))
    return 1.0 / (1.0 + np.exp(-y)) if head else y


@pytest.fixture(scope="module")
def weights():
    rng = np.random.default_rng(7)
    return {"w1": (rng.standard_normal((12, 3, 3, 8)) / 8).astype(np.float32),
            "b1": rng.standard_normal(12).astype(np.float32),
            "w2": (rng.standard_normal((16, 1, 1, 12)) / 4).astype(np.float32)}


@pytest.fixture(scope="module")
def two_contexts():
    """Two contexts on one device (the second shares the first's)."""
    first = webnn.ml.create_context()
    second = webnn.ml.create_context(first.device)
    yield first, second
    second.destroy()
    first.destroy()


def test_contexts_on_one_device_share_one_pipeline_per_shader_text(two_contexts, weights, rng):
    first, second = two_contexts
    assert first._pipelines is second._pipelines is _kernels.PipelineCache.of(first.device)
    g1 = _model(first, weights, head=True)
    before = first._pipelines.misses
    g2 = _model(second, weights, head=False)
    k1, k2 = _kernels_of(g1), _kernels_of(g2)
    texts = {s.wgsl for s in k1 + k2}
    pipes = {id(s.pipeline) for s in k1 + k2}
    assert len(pipes) == len(texts), "one pipeline per distinct shader text across both models"
    shared = {s.wgsl for s in k1} & {s.wgsl for s in k2}
    assert shared, "the two models' first layers have the same text"
    for s2 in k2:
        for s1 in k1:
            if s1.wgsl == s2.wgsl:
                assert s1.pipeline is s2.pipeline
    assert first._pipelines.misses - before == len({s.wgsl for s in k2} - shared)
    x = rng.standard_normal((1, 9, 7, 8)).astype(np.float32)
    for ctx, g, head in ((first, g1, True), (second, g2, False)):
        np.testing.assert_allclose(ctx.compute(g, {"x": x})["y"], _reference(x, weights, head=head),
                                   rtol=1e-5, atol=1e-5)


def test_another_device_has_its_own_cache(two_contexts, ctx):
    assert ctx.device is not two_contexts[0].device
    assert ctx._pipelines is not two_contexts[0]._pipelines


def test_a_failed_compile_leaves_the_shared_cache_usable(two_contexts, weights, rng):
    first, second = two_contexts
    cache = first._pipelines
    size = len(cache)
    bad = "@compute @workgroup_size(1) fn main() { let a = not_declared; }"
    with pytest.raises(OperationError, match=r"\[bad\]: our kernel failed to compile"):
        cache.get_many([(bad, "t.wgsl", "[bad]")])
    assert len(cache) == size, "the failed call keeps nothing"
    g = _model(second, weights, head=True)  # the other context still builds and runs on the cache
    x = rng.standard_normal((1, 9, 7, 8)).astype(np.float32)
    np.testing.assert_allclose(second.compute(g, {"x": x})["y"], _reference(x, weights, head=True),
                               rtol=1e-5, atol=1e-5)


def test_threads_building_on_one_device_get_one_pipeline_per_text(two_contexts, rng):
    first, second = two_contexts
    graphs, errors = {}, []

    def build(name, ctx):
        try:
            b = webnn.MLGraphBuilder(ctx)
            x = b.input("x", {"data_type": "float32", "shape": [3, 61]})  # a shape no other test uses
            graphs[name] = b.build({"y": b.tanh(b.mul(x, x)), "z": b.exp(b.neg(x))})
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=build, args=(n, c)) for n, c in (("a", first), ("b", second))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    x = rng.standard_normal((3, 61)).astype(np.float32)
    for name, ctx in (("a", first), ("b", second)):
        out = ctx.compute(graphs[name], {"x": x})
        np.testing.assert_allclose(out["y"], np.tanh(x.astype(np.float64) ** 2), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(out["z"], np.exp(-x.astype(np.float64)), rtol=1e-5)
    by_text = {}
    for g in graphs.values():
        for s in _kernels_of(g):
            by_text.setdefault(s.wgsl, set()).add(id(s.pipeline))
    assert all(len(ids) == 1 for ids in by_text.values())


def test_timed_builds_record_each_pipeline_compile(two_contexts, rng):
    first, _ = two_contexts
    cache = first._pipelines
    cache.timed = True
    try:
        b = webnn.MLGraphBuilder(first)
        x = b.input("x", {"data_type": "float32", "shape": [5, 37]})  # new shader texts
        g = b.build({"y": b.sigmoid(b.add(x, x), label="timed")})
    finally:
        cache.timed = False
    rows = pipeline_rows(g)
    assert sum(r["kernels"] for r in rows) == g.kernel_count
    assert all(r["compile_s"] is not None and r["compile_s"] > 0 and r["compile_cpu_s"] is not None for r in rows)
    assert all(r["wgsl_bytes"] > 0 and r["us"] is None for r in rows)
    assert all(r["create_cpu_s"] is not None and r["create_cpu_s"] >= 0 for r in rows), "each made here"
    text = format_pipelines(rows)
    assert "elementwise/" in text and f"{len(rows)} pipelines, compile" in text
    x0 = rng.standard_normal((5, 37)).astype(np.float32)
    np.testing.assert_allclose(first.compute(g, {"x": x0})["y"], 1 / (1 + np.exp(-2.0 * x0.astype(np.float64))),
                               rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- bounded compile cost

@pytest.mark.parametrize("nb,c,o,h,w", [(1, 32, 48, 5, 7), (2, 16, 20, 6, 7)])
def test_nchw_pointwise_conv_loads_channel_operands_once_per_row(ctx, rng, nb, c, o, h, w):
    """An NCHW pointwise conv's rows are its output channels: the tile kernel loads the
    epilogue's per-channel operands (bias, batch-norm scale and shift) once per row, not at
    each of its stores (which made LLVM compile PP-OCR's detector kernels for minutes)."""
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [nb, c, h, w]})
    wv = (rng.standard_normal((o, c, 1, 1)) / np.sqrt(c)).astype(np.float32)
    bias = rng.standard_normal(o).astype(np.float32)
    s1, s2 = (rng.standard_normal((1, o, 1, 1)).astype(np.float32) for _ in range(2))
    y = b.conv2d(x, b.constant(wv), bias=b.constant(bias))
    y = b.mul(b.hard_swish(b.add(b.mul(y, b.constant(s1)), b.constant(s2))), b.constant(s2))
    g = b.build({"y": y})
    tiles = [s for s in _kernels_of(g) if s.template == "matmul/tile.wgsl"]
    assert len(tiles) == 1
    wgsl = tiles[0].wgsl
    hoisted = re.findall(r"let r\d+ = ep_q\(", wgsl)
    assert hoisted and wgsl.count("ep_q(") == len(hoisted) + 1, "ep_q only in its definition and once per row"
    xv = rng.standard_normal((nb, c, h, w)).astype(np.float32)
    ref = np.einsum("oc,nchw->nohw", wv[:, :, 0, 0].astype(np.float64), xv.astype(np.float64))
    ref = (ref + bias[None, :, None, None]) * s1 + s2
    ref = ref * np.clip(ref + 3, 0, 6) / 6 * s2
    np.testing.assert_allclose(ctx.compute(g, {"x": xv})["y"], ref, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- the tools

def _synthetic_model(tmp_path, name: str, stem: str):
    """``tmp_path / (stem + ".tflite")``, written with ``tests/model/synthetic_models.py``'s case ``name``."""
    sys.path.insert(0, str(REPO / "tests" / "model"))
    try:
        from synthetic_models import CASES
    finally:
        sys.path.pop(0)
    data, _ = CASES[name]()
    model = tmp_path / f"{stem}.tflite"
    model.write_bytes(data)
    return model


def test_build_time_per_pipeline_reports_every_pipeline(tmp_path):
    model = _synthetic_model(tmp_path, "conv_same_stride2_relu6", "conv")
    out = subprocess.run([sys.executable, str(REPO / "benchmarks" / "build_time.py"), "--per-pipeline",
                          "--repeats", "2", "--json", str(tmp_path / "rows.json"), str(model)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    import json

    rows = json.loads((tmp_path / "rows.json").read_text())
    assert rows and all(r["model"] == "conv" and r["compile_s"] > 0 and r["us"] > 0 for r in rows)
    assert "== conv: cold build" in out.stdout and "pipelines, compile" in out.stdout


# ---------------------------------------------------------------- warm-up overlapping creation

def _chain(ctx, n: int, label: str):
    """A graph of distinct element-wise kernels on an odd size (new shader texts)."""
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [n]})
    outs = {"a": b.exp(x, label=f"{label}-a"), "s": b.sigmoid(b.neg(x), label=f"{label}-s"),
            "t": b.tanh(x, label=f"{label}-t"), "c": b.cos(x, label=f"{label}-c")}
    return b.build(outs)


def test_new_pipelines_run_once_as_they_are_made(two_contexts, monkeypatch, rng):
    from webnn_gpu import graph as graph_module

    first, _ = two_contexts
    cache = first._pipelines
    monkeypatch.setattr(_kernels, "COMPILE_DEVICES", 1)  # every warm-up on this device (helpers: test_compile_helpers)
    calls = []
    real = _kernels.PipelineCache.submit_once
    monkeypatch.setattr(_kernels.PipelineCache, "submit_once",
                        lambda self, device, jobs: (calls.append([j[0] for j in jobs]), real(self, device, jobs)))
    small = _chain(first, 1029, "small")  # short kernels run together at the end, not early
    assert not calls and {id(s.pipeline) for s in _kernels_of(small)} <= cache.warm
    monkeypatch.setattr(graph_module, "EARLY_WARM_UP_BYTES", 0)
    g = _chain(first, 1031, "early")
    new = {id(s.pipeline) for s in _kernels_of(g)}
    assert {id(p) for c in calls for p in c} == new, "every new pipeline's warm-up went out as it was made"
    assert new <= cache.warm
    x = rng.standard_normal(1031).astype(np.float32)
    out = first.compute(g, {"x": x})
    x64 = x.astype(np.float64)
    for name, ref in (("a", np.exp(x64)), ("s", 1 / (1 + np.exp(x64))), ("t", np.tanh(x64)), ("c", np.cos(x64))):
        np.testing.assert_allclose(out[name], ref, rtol=1e-5, atol=1e-6)
    calls.clear()
    _chain(first, 1031, "early again")
    assert not calls, "a second build makes and runs nothing"


def test_a_failed_pipeline_after_early_warm_ups_keeps_nothing(two_contexts, monkeypatch, rng):
    from webnn_gpu import graph as graph_module

    monkeypatch.setattr(graph_module, "EARLY_WARM_UP_BYTES", 0)
    first, _ = two_contexts
    cache = first._pipelines
    real = _kernels.PipelineCache._compile

    def failing(self, k, wgsl, template, label, entry):
        if "fail-here-t" in label:  # one of four: the others may have been made and run already
            raise OperationError(f"{label}: our kernel failed to compile (template {template!r}): injected")
        return real(self, k, wgsl, template, label, entry)

    monkeypatch.setattr(_kernels.PipelineCache, "_compile", failing)
    size, warm = len(cache), set(cache.warm)
    with pytest.raises(OperationError, match="fail-here"):
        _chain(first, 1033, "fail-here")
    assert len(cache) == size and cache.warm == warm, "nothing of the failed build is kept"
    monkeypatch.setattr(_kernels.PipelineCache, "_compile", real)
    g = _chain(first, 1033, "after")
    x = rng.standard_normal(1033).astype(np.float32)
    np.testing.assert_allclose(first.compute(g, {"x": x})["t"], np.tanh(x.astype(np.float64)), rtol=1e-5, atol=1e-6)


def test_profile_cli_prints_compile_times(tmp_path, capsys):
    from webnn_gpu import cli

    model = _synthetic_model(tmp_path, "pools_same_padding", "pools")
    assert cli.main(["profile", "--compile-times", "--repeats", "1", str(model)]) == 0
    out = capsys.readouterr().out
    table = out.split("\n\n", 1)[1]
    assert table.startswith("compile s") and "pool/pool2d" in table  # the scalar or the vec4 kernel
    rows = [line for line in table.splitlines()[1:] if line.split() and line.split()[0][0].isdigit()]
    assert rows and all(float(r.split()[0]) > 0 for r in rows), "every pipeline of the fresh context timed"
