"""Per-kernel timing with timestamp queries."""

from __future__ import annotations

import logging

import numpy as np

import webnn_gpu as webnn
from webnn_gpu import _env
from webnn_gpu.profile import format_table, pipeline_count, profile_graph


def _graph(ctx):
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [4096]})
    y = b.exp(x, label="first")
    return b.build({"y": y, "z": b.sigmoid(y, label="second")})


def test_profile_graph_times_every_kernel(ctx):
    g = _graph(ctx)
    rows = profile_graph(ctx, g, {"x": np.zeros(4096, np.float32)}, repeats=3)
    assert [r["label"] for r in rows] == ["exp ['first']", "sigmoid ['second']"]
    assert all(r["us"] > 0 for r in rows)
    text = format_table(rows, pipeline_count(g))
    assert "elementwise/map" in text and "over 2 kernels (2 pipelines)" in text


def test_pipeline_count_counts_shared_pipelines_once(ctx):
    b = webnn.MLGraphBuilder(ctx)
    x1 = b.input("x1", {"data_type": "float32", "shape": [4096]})
    x2 = b.input("x2", {"data_type": "float32", "shape": [4096]})
    g = b.build({"y1": b.exp(x1, label="one"), "y2": b.exp(x2, label="two"), "y3": b.sigmoid(x2)})
    zeros = np.zeros(4096, np.float32)
    rows = profile_graph(ctx, g, {"x1": zeros, "x2": zeros}, repeats=1)
    assert len(rows) == 3 and pipeline_count(g) == 2  # the two exp kernels share one shader text


def test_profile_env_logs_timings(ctx, monkeypatch, caplog):
    monkeypatch.setattr(_env, "PROFILE", 1)
    g = _graph(ctx)
    with caplog.at_level(logging.INFO, logger="webnn_gpu"):
        out = ctx.compute(g, {"x": np.zeros(4096, np.float32)})
    np.testing.assert_array_equal(out["y"], np.ones(4096))
    assert "kernel timings" in caplog.text and "sigmoid ['second']" in caplog.text


def test_debug_logs_pipeline_compile_times(ctx, monkeypatch, caplog):
    monkeypatch.setattr(_env, "DEBUG", 2)
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [4093]})
    with caplog.at_level(logging.DEBUG, logger="webnn_gpu"):
        g = b.build({"y": b.cos(b.mul(x, x), label="timed")})  # a size no other test uses: a new pipeline
    assert "pipeline compile (first run) of 1 pipelines" in caplog.text and "['timed']" in caplog.text
    out = ctx.compute(g, {"x": np.full(4093, 2.0, np.float32)})
    np.testing.assert_allclose(out["y"], np.cos(np.full(4093, 4.0)), rtol=1e-5)
