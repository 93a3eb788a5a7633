"""Speed of matmul and of the conv2d layers of the selfie segmenter (pytest-benchmark).

    .venv/bin/python -m pytest benchmarks/bench_linalg.py --benchmark-enable
    .venv/bin/python benchmarks/bench_linalg.py            # the same, as a table

* matmul 1024 x 1024 x 1024 float32: WebNN (the register-blocked tile kernel), NumPy (BLAS on
  the CPU), and a plain hand-written WGSL kernel (one output per invocation, 16 x 16
  workgroups) run with raw wgpu on the same device.
* conv2d layers of the shapes the segmenter runs (NHWC): a 1x1 (pointwise), depthwise 3x3
  and 5x5 with strides 1 and 2, the 3x3 stride-2 first layer on 3 channels, a dense 3x3, and
  the final conv_transpose2d 2x2 stride 2.

Each round dispatches REPS times back to back and then reads the output once (the read
waits for the GPU); the time per dispatch and the GFLOP/s (2 flops per multiply-add) go to
``extra_info``. On lavapipe the numbers move with the load of the machine: compare runs
made together.
"""

from __future__ import annotations

import os
import time

import numpy as np
import pytest
import wgpu

os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")

import webnn_gpu as webnn  # noqa: E402

REPS = 5
N = 1024

NAIVE_WGSL = """
@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> c: array<f32>;
@compute @workgroup_size(16, 16)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let row = gid.y;
  let col = gid.x;
  if (row >= NU || col >= NU) { return; }
  var acc = 0.0;
  for (var k = 0u; k < NU; k = k + 1u) {
    acc = acc + a[row * NU + k] * b[k * NU + col];
  }
  c[row * NU + col] = acc;
}
""".replace("NU", f"{N}u")


# ---------------------------------------------------------------- runners
class GraphRunner:
    """One graph with tensors bound: ``run()`` dispatches REPS times and reads the output."""

    def __init__(self, ctx, build, inputs: dict):
        b = webnn.MLGraphBuilder(ctx)
        ops = {n: b.input(n, {"data_type": "float32", "shape": list(a.shape)}) for n, a in inputs.items()}
        y = build(b, ops)
        self.graph = b.build({"y": y})
        self.ctx = ctx
        self.ins = {}
        for n, a in inputs.items():
            t = ctx.create_tensor({"data_type": "float32", "shape": list(a.shape), "writable": True})
            ctx.write_tensor(t, a)
            self.ins[n] = t
        self.out = ctx.create_tensor({"data_type": "float32", "shape": list(y.shape), "readable": True})
        self.run()

    def run(self):
        for _ in range(REPS):
            self.ctx.dispatch(self.graph, self.ins, {"y": self.out})
        return self.ctx.read_tensor(self.out)


class RawMatmul:
    """The plain WGSL kernel with raw wgpu on the context's device."""

    def __init__(self, device, a, b):
        usage = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST
        self.device = device
        self.bufs = [device.create_buffer_with_data(data=a.tobytes(), usage=usage),
                     device.create_buffer_with_data(data=b.tobytes(), usage=usage),
                     device.create_buffer(size=a.nbytes, usage=usage)]
        module = device.create_shader_module(code=NAIVE_WGSL)
        self.pipeline = device.create_compute_pipeline(layout="auto", compute={"module": module, "entry_point": "main"})
        self.group = device.create_bind_group(layout=self.pipeline.get_bind_group_layout(0), entries=[
            {"binding": i, "resource": {"buffer": buf, "offset": 0, "size": buf.size}}
            for i, buf in enumerate(self.bufs)])
        self.run()

    reps = 1  # about 5 s per dispatch on lavapipe

    def run(self):
        enc = self.device.create_command_encoder()
        for _ in range(self.reps):
            p = enc.begin_compute_pass()
            p.set_pipeline(self.pipeline)
            p.set_bind_group(0, self.group)
            p.dispatch_workgroups(N // 16, N // 16)
            p.end()
        self.device.queue.submit([enc.finish()])
        return np.frombuffer(self.device.queue.read_buffer(self.bufs[2]), np.float32).reshape(N, N)


# ---------------------------------------------------------------- cases
def _conv(rng, wshape, layout, **opts):
    w = (rng.standard_normal(wshape) * 0.1).astype(np.float32)
    return lambda b, o: b.conv2d(o["x"], b.constant(w), input_layout="nhwc", filter_layout=layout, **opts)


def _convt(rng, wshape, **opts):
    w = (rng.standard_normal(wshape) * 0.1).astype(np.float32)
    return lambda b, o: b.conv_transpose2d(o["x"], b.constant(w), input_layout="nhwc", **opts)


def conv_cases(rng):
    """name -> (input shape, build, flops)."""
    return {
        "pointwise [1,128,128,16]->32": ((1, 128, 128, 16), _conv(rng, (32, 1, 1, 16), "ohwi"),
                                         2 * 128 * 128 * 16 * 32),
        "pointwise [1,32,32,96]->32": ((1, 32, 32, 96), _conv(rng, (32, 1, 1, 96), "ohwi"), 2 * 32 * 32 * 96 * 32),
        "depthwise 3x3 s1 [1,64,64,72]": ((1, 64, 64, 72), _conv(rng, (3, 3, 1, 72), "hwio", groups=72,
                                                                 padding=[1, 1, 1, 1]), 2 * 64 * 64 * 72 * 9),
        "depthwise 3x3 s2 [1,64,64,72]": ((1, 64, 64, 72), _conv(rng, (3, 3, 1, 72), "hwio", groups=72,
                                                                 padding=[0, 1, 0, 1], strides=[2, 2]),
                                          2 * 32 * 32 * 72 * 9),
        "depthwise 5x5 s2 [1,32,32,96]": ((1, 32, 32, 96), _conv(rng, (5, 5, 1, 96), "hwio", groups=96,
                                                                 padding=[1, 2, 1, 2], strides=[2, 2]),
                                          2 * 16 * 16 * 96 * 25),
        "3x3 s2 [1,256,256,3]->16": ((1, 256, 256, 3), _conv(rng, (16, 3, 3, 3), "ohwi", padding=[0, 1, 0, 1],
                                                             strides=[2, 2]), 2 * 128 * 128 * 16 * 27),
        "3x3 s1 [1,64,64,32]->32": ((1, 64, 64, 32), _conv(rng, (32, 3, 3, 32), "ohwi", padding=[1, 1, 1, 1]),
                                    2 * 64 * 64 * 32 * 32 * 9),
        "conv_transpose 2x2 s2 [1,128,128,16]->1": ((1, 128, 128, 16), _convt(rng, (16, 1, 2, 2), strides=[2, 2]),
                                                    2 * 128 * 128 * 16 * 4),
    }


# ---------------------------------------------------------------- pytest-benchmark
@pytest.fixture(scope="module")
def ctx():
    c = webnn.ml.create_context()
    yield c
    c.destroy()


@pytest.fixture(scope="module")
def matrices():
    rng = np.random.default_rng(0)
    return rng.standard_normal((N, N)).astype(np.float32), rng.standard_normal((N, N)).astype(np.float32)


def _report(benchmark, flops, reps=REPS):
    per = benchmark.stats.stats.min / reps
    benchmark.extra_info["ms_per_dispatch"] = round(per * 1e3, 3)
    benchmark.extra_info["gflops"] = round(flops / per / 1e9, 2)


def test_matmul_webnn(benchmark, ctx, matrices):
    a, b = matrices
    r = GraphRunner(ctx, lambda bld, o: bld.matmul(o["a"], o["b"]), {"a": a, "b": b})
    out = benchmark.pedantic(r.run, rounds=3, iterations=1)
    np.testing.assert_allclose(out, a @ b, rtol=1e-3, atol=1e-3)
    _report(benchmark, 2 * N**3)


def test_matmul_numpy(benchmark, matrices):
    a, b = matrices

    def run():
        for _ in range(REPS):
            c = a @ b
        return c

    benchmark.pedantic(run, rounds=3, iterations=1)
    _report(benchmark, 2 * N**3)


def test_matmul_plain_wgsl(benchmark, ctx, matrices):
    a, b = matrices
    r = RawMatmul(ctx.device, a, b)
    out = benchmark.pedantic(r.run, rounds=1, iterations=1)
    np.testing.assert_allclose(out, a @ b, rtol=1e-3, atol=1e-3)
    _report(benchmark, 2 * N**3, r.reps)


@pytest.mark.parametrize("name", list(conv_cases(np.random.default_rng(0))))
def test_conv_layer(benchmark, ctx, name):
    rng = np.random.default_rng(1)
    shape, build, flops = conv_cases(rng)[name]
    x = rng.standard_normal(shape).astype(np.float32)
    r = GraphRunner(ctx, lambda b, o: build(b, o), {"x": x})
    benchmark.pedantic(r.run, rounds=5, iterations=1)
    _report(benchmark, flops)


# ---------------------------------------------------------------- as a script
def _best(fn, rounds=5, reps=REPS) -> float:
    best = float("inf")
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best / reps


def main() -> None:
    ctx = webnn.ml.create_context()
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((N, N)).astype(np.float32), rng.standard_normal((N, N)).astype(np.float32)
    rows = []
    r = GraphRunner(ctx, lambda bld, o: bld.matmul(o["a"], o["b"]), {"a": a, "b": b})
    rows.append(("matmul 1024^3 WebNN", _best(r.run, 3), 2 * N**3))
    rows.append(("matmul 1024^3 NumPy", _best(lambda: [a @ b for _ in range(REPS)], 3), 2 * N**3))
    raw = RawMatmul(ctx.device, a, b)
    rows.append(("matmul 1024^3 plain WGSL", _best(raw.run, 1, raw.reps), 2 * N**3))
    for name, (shape, build, flops) in conv_cases(rng).items():
        x = rng.standard_normal(shape).astype(np.float32)
        g = GraphRunner(ctx, build, {"x": x})
        rows.append((name, _best(g.run), flops))
    print(f"{'case':42s} {'ms':>9s} {'GFLOP/s':>9s}")
    for name, sec, flops in rows:
        print(f"{name:42s} {sec * 1e3:9.3f} {flops / sec / 1e9:9.2f}")


if __name__ == "__main__":
    main()
