"""Selfie segmentation on webnn-gpu (pytest-benchmark): latency, fusion, build, memory.

    make bench                    # every benchmarks/bench_*.py
    .venv/bin/python -m pytest benchmarks/bench_selfie.py --benchmark-enable

* ``test_selfie_latency``: dispatch-to-read (``write_tensor``, ``dispatch``, ``read_tensor``)
  in float32 and float16, with the compiler's fusion passes and without them
  (``WEBNN_GPU_PASSES=`` all fusion passes off, see NO_FUSION).
* ``test_litert_xnnpack``: LiteRT's XNNPACK delegate (a test dependency) in this process on
  the same input, for a same-run reference; ONNX Runtime and the Dawn runtimes run in their
  own environments through ``benchmarks/compare.py``.
* ``test_build_warm``: a second ``build()`` of the graph in the same process (pipeline cache
  hits). The cold build is measured in fresh processes by ``compare.py --only build``.
* ``test_memory``: the liveness-planned arena vs the peak and the sum of live intermediates
  (``extra_info``; the arena must stay within 1.5x the peak).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")

import webnn_gpu as webnn  # noqa: E402
from webnn_gpu import _dtypes, models  # noqa: E402
from webnn_gpu._lower import KernelStep  # noqa: E402

NO_FUSION = "-fuse_epilogue,-fuse_elementwise,-fuse_hard_swish,-fuse_conv_input,-fuse_pool_input,-fuse_conv_pool"


@pytest.fixture(scope="module")
def ctx():
    c = webnn.ml.create_context()
    yield c
    c.destroy()


@pytest.fixture(scope="module")
def model_path():
    return models.fetch("selfie-segmentation")


def _image(dtype):
    return np.random.default_rng(0).random((1, 256, 256, 3)).astype(dtype)


class Runner:
    """The loaded model with its input/output tensors: ``run()`` is one dispatch-to-read."""

    def __init__(self, ctx, path, dtype):
        self.ctx = ctx
        self.model = webnn.load(path, ctx, dtype=dtype)
        g = self.model.graph
        (self.iname, idesc), = g.inputs.items()
        (self.oname, odesc), = g.outputs.items()
        self.x = _image(np.float16 if dtype == "float16" else np.float32)
        self.t_in = ctx.create_tensor({**idesc, "writable": True})
        self.t_out = ctx.create_tensor({**odesc, "readable": True})
        self.run()

    def run(self):
        self.ctx.write_tensor(self.t_in, self.x)
        self.ctx.dispatch(self.model.graph, {self.iname: self.t_in}, {self.oname: self.t_out})
        return self.ctx.read_tensor(self.t_out)


@pytest.mark.parametrize("fusion", ["fused", "unfused"])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_selfie_latency(benchmark, ctx, model_path, dtype, fusion, monkeypatch):
    if fusion == "unfused":
        monkeypatch.setenv("WEBNN_GPU_PASSES", NO_FUSION)
    r = Runner(ctx, model_path, dtype)
    benchmark.extra_info["kernels"] = r.model.graph.kernel_count
    benchmark.pedantic(r.run, rounds=20, iterations=1, warmup_rounds=3)
    y = r.run().astype(np.float32)
    assert y.shape == (1, 256, 256, 1) and np.all((y >= 0) & (y <= 1))


def test_litert_xnnpack(benchmark, model_path):
    from ai_edge_litert.interpreter import Interpreter

    interp = Interpreter(model_path=str(model_path), num_threads=1)
    interp.allocate_tensors()
    inp, out = interp.get_input_details()[0], interp.get_output_details()[0]
    x = _image(np.float32)

    def run():
        interp.set_tensor(inp["index"], x)
        interp.invoke()
        return interp.get_tensor(out["index"]).copy()

    benchmark.pedantic(run, rounds=20, iterations=1, warmup_rounds=3)


def test_build_warm(benchmark, ctx, model_path):
    data = model_path.read_bytes()
    webnn.load(data, ctx)  # first build: compiles (and warms) every pipeline
    before = ctx._pipelines.misses
    benchmark.pedantic(lambda: webnn.load(data, ctx), rounds=5, iterations=1)
    assert ctx._pipelines.misses == before, "a warm build compiles no pipeline"


def test_memory(benchmark, ctx, model_path):
    g = benchmark.pedantic(lambda: webnn.load(model_path, ctx).graph, rounds=1, iterations=1)
    live = {}
    for s in g._steps:
        if isinstance(s, KernelStep):
            for v in s.values:
                r = g._root(v)
                if g._slot[r.id].kind == "tmp":
                    live[r.id] = _dtypes.buffer_size(r.data_type, r.shape)
    total = sum(live.values())
    benchmark.extra_info.update(sum_intermediates=total, peak_live=g._peak_bytes_live, arena=g._arena_bytes)
    assert g._peak_bytes_live <= g._arena_bytes <= 1.5 * g._peak_bytes_live < total
