"""Per-kernel timing with timestamp queries."""

from __future__ import annotations

import logging

import numpy as np

import webnn_gpu as webnn
from webnn_gpu import _env
from webnn_gpu.profile import format_table, profile_graph


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
    text = format_table(rows)
    assert "elementwise/map" in text and "total" in text


def test_profile_env_logs_timings(ctx, monkeypatch, caplog):
    monkeypatch.setattr(_env, "PROFILE", 1)
    g = _graph(ctx)
    with caplog.at_level(logging.INFO, logger="webnn_gpu"):
        out = ctx.compute(g, {"x": np.zeros(4096, np.float32)})
    np.testing.assert_array_equal(out["y"], np.ones(4096))
    assert "kernel timings" in caplog.text and "sigmoid ['second']" in caplog.text
