"""Per-kernel and per-dispatch overhead vs bare wgpu (pytest-benchmark), Fibonacci chains.

    .venv/bin/python -m pytest benchmarks/bench_dispatch.py --benchmark-enable

``test_chain``: a chain of k adds of 256 floats in one graph (element-wise fusion off, so one
kernel per add) vs the same adds recorded with bare wgpu into one compute pass (one pipeline,
bind groups made beforehand), for k = 1 and 64; each round ends by reading the result (which
waits for the GPU). (time(64) - time(1)) / 63 is the cost of one more kernel; ``compare.py
--only dispatch`` prints it and the ratio. ``test_chained``: 64 ``dispatch()`` calls of a
one-add graph, each step's output the next step's input, vs 64 bare submits.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import compare  # noqa: E402

import webnn_gpu as webnn  # noqa: E402


@pytest.fixture(scope="module")
def chains():
    ctx = webnn.ml.create_context()
    yield compare.FibChains(ctx)
    ctx.destroy()


@pytest.mark.parametrize("k", [1, 64])
@pytest.mark.parametrize("who", ["webnn", "bare"])
def test_chain(benchmark, chains, monkeypatch, who, k):
    monkeypatch.setenv("WEBNN_GPU_PASSES", "-fuse_elementwise")
    run = getattr(chains, who)(k)
    np.testing.assert_allclose(run(), chains.want(k), rtol=1e-6)
    benchmark.pedantic(run, rounds=30, iterations=1, warmup_rounds=2)


@pytest.mark.parametrize("who", ["webnn_chained", "bare_chained"])
def test_chained(benchmark, chains, who):
    run = getattr(chains, who)(64)
    np.testing.assert_allclose(run(), chains.want(64), rtol=1e-6)
    benchmark.pedantic(run, rounds=10, iterations=1, warmup_rounds=1)
