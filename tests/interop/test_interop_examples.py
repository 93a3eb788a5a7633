"""The interop examples run and check themselves against NumPy / Python; the benchmark runs."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest


ROOT = Path(__file__).resolve().parents[2]


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("script", ["custom_shader.py", "fibonacci_interop.py"])
def test_example_runs(script):
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / script)], capture_output=True, text=True,
                          timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.rstrip().endswith("OK"), proc.stdout


def test_custom_shader_runs_conv2d_in_webnn(ctx):
    mod = _load(ROOT / "examples" / "custom_shader.py")
    rng = np.random.default_rng(0)
    w = rng.standard_normal((mod.C, mod.C, 3, 3)).astype(np.float32)
    graph, reference, what = mod.build_webnn_step(ctx, w)
    assert what == "conv2d"
    x = rng.standard_normal((mod.N, mod.C, mod.H, mod.W)).astype(np.float32)
    np.testing.assert_allclose(ctx.compute(graph, {"x": x})["y"], reference(x), rtol=1e-4, atol=1e-4)


def test_fibonacci_leaves_nothing_held(ctx):
    mod = _load(ROOT / "examples" / "fibonacci_interop.py")
    fib = mod.Fibonacci(ctx)
    want = mod.reference(12)
    np.testing.assert_array_equal(fib.run_timeline(12), want)
    np.testing.assert_array_equal(fib.run_recorded(12), want)
    assert ctx._timeline.held_count == 0
    assert all(t._rental is None for t in fib.tensors)
    for t in fib.tensors:
        t.destroy()


def test_benchmark_runs_small(ctx):
    """All five variants agree with NumPy (checked inside measure) on the small workload."""
    bench = _load(ROOT / "benchmarks" / "bench_interop.py")
    times = bench.measure("small", repeat=1, ctx=ctx)
    assert set(times) == set(bench.VARIANTS) and all(t > 0 for t in times.values())
    assert "ratio to 2" in bench.table(times)
