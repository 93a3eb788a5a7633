"""The four-way WebNN / WebGPU buffer-sharing measurement of WebNN issue #33, plus recording
and a custom WGSL operator.

    python benchmarks/bench_interop.py [--size full|small] [--repeat R]     # the table
    .venv/bin/python -m pytest benchmarks/bench_interop.py --benchmark-enable

Workload (shared/background/003): conv2d of an input [1, 100, 100, 100] (NCHW) with a filter
[100, 100, 3, 3] (OIHW, padding 1), then add a per-channel bias and ReLU. Variants:

1. ``wgsl``:      every step in the user's own WGSL (a direct conv2d, then bias + ReLU).
2. ``readback``:  WebNN conv2d, read back to NumPy, uploaded to the user's buffer, then the
                  user's bias + ReLU WGSL.
3. ``rental``:    WebNN conv2d into a tensor rented to the user (``export_to_gpu`` returns
                  the GPUBuffer, zero copies), the user's bias + ReLU WGSL in place, returned.
4. ``webnn``:     conv2d + add + relu all in one WebNN graph.
5. ``recorded``:  WebNN conv2d recorded (``ctx.record``) into the user's encoder with the
                  user's bias + ReLU pass: one submit.
6. ``custom``:    WebNN conv2d and the user's bias + ReLU as a custom WGSL node
                  (``builder.wgsl``) inside one graph: one dispatch.

Every variant starts from the input already on the GPU and ends with the result in a NumPy
array (the original test read the result back too), so each time is end to end and
comparable. The table gives each as a ratio to variant 2, all measured in one run.
The original numbers (DirectML + D3D12, 2019): 37.93 / 27.04 / 9.18 / 7.58 ms.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np
import pytest
import wgpu

os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")

import webnn_gpu as webnn  # noqa: E402
import webnn_gpu.interop  # noqa: E402,F401

SIZES = {"full": (100, 100, 100), "small": (16, 16, 16)}  # (channels, height, width)
VARIANTS = ("wgsl", "readback", "rental", "webnn", "recorded", "custom")
_U = wgpu.BufferUsage
_IO = _U.STORAGE | _U.COPY_SRC | _U.COPY_DST

#: The user's conv2d: NCHW input, weights as [C_in*3*3][C_out/4] vec4, stride 1, padding 1.
#: One invocation computes four neighbouring pixels of a row for four output channels
#: (16 accumulators), loading each input row segment once for the three filter columns.
CONV_WGSL = """
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> w: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
override C_IN: u32;
override C_OUT4: u32;
override H: u32;
override W: u32;

fn xat(row: u32, iw: i32) -> f32 {
    if (iw < 0 || iw >= i32(W)) { return 0.0; }
    return x[row + u32(iw)];
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let w4 = (W + 3u) / 4u;
    let p = gid.x;
    let oc4 = gid.y;
    if (p >= H * w4 || oc4 >= C_OUT4) { return; }
    let oh = i32(p / w4);
    let ow0 = i32((p % w4) * 4u);
    var a0 = vec4<f32>(0.0);
    var a1 = vec4<f32>(0.0);
    var a2 = vec4<f32>(0.0);
    var a3 = vec4<f32>(0.0);
    for (var ic = 0u; ic < C_IN; ic++) {
        for (var kh = 0; kh < 3; kh++) {
            let ih = oh + kh - 1;
            if (ih < 0 || ih >= i32(H)) { continue; }
            let row = (ic * H + u32(ih)) * W;
            let x0 = xat(row, ow0 - 1);
            let x1 = xat(row, ow0);
            let x2 = xat(row, ow0 + 1);
            let x3 = xat(row, ow0 + 2);
            let x4 = xat(row, ow0 + 3);
            let x5 = xat(row, ow0 + 4);
            let base = (ic * 3u + u32(kh)) * 3u * C_OUT4 + oc4;
            let k0 = w[base];
            let k1 = w[base + C_OUT4];
            let k2 = w[base + 2u * C_OUT4];
            a0 += x0 * k0 + x1 * k1 + x2 * k2;
            a1 += x1 * k0 + x2 * k1 + x3 * k2;
            a2 += x2 * k0 + x3 * k1 + x4 * k2;
            a3 += x3 * k0 + x4 * k1 + x5 * k2;
        }
    }
    let plane = H * W;
    let out = u32(oh) * W + u32(ow0);
    let accs = array<vec4<f32>, 4>(a0, a1, a2, a3);
    for (var k = 0u; k < 4u; k++) {
        if (u32(ow0) + k >= W) { break; }
        for (var c = 0u; c < 4u; c++) {
            y[(oc4 * 4u + c) * plane + out + k] = accs[k][c];
        }
    }
}
"""

#: The user's post-processing, in place: v = max(v + bias[channel], 0).
BIAS_RELU_WGSL = """
@group(0) @binding(0) var<storage, read_write> v: array<f32>;
@group(0) @binding(1) var<storage, read> bias: array<f32>;
override COUNT: u32;
override PLANE: u32;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i >= COUNT) { return; }
    v[i] = max(v[i] + bias[i / PLANE], 0.0);
}
"""

#: The same bias + ReLU as a custom operator of the graph (``MLGraphBuilder.wgsl``): the
#: conv2d output and the bias are its inputs, the result its output.
BIAS_RELU_NODE_WGSL = """
@group(0) @binding(0) var<storage, read> v: array<f32>;
@group(0) @binding(1) var<storage, read> bias: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

@compute @workgroup_size({{ workgroup_size }})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i >= {{ outputs[0].size }}u) { return; }
    out[i] = max(v[i] + bias[i / {{ plane }}u], 0.0);
}
"""


def reference(x, w, bias):
    """NumPy float64: conv2d (padding 1) + bias + ReLU."""
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    win = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))
    y = np.einsum("nchwij,ocij->nohw", win, w.astype(np.float64), optimize=True)
    return np.maximum(y + bias.astype(np.float64).reshape(1, -1, 1, 1), 0.0)


class Workload:
    """Buffers, graphs and pipelines of every variant, built once before timing."""

    def __init__(self, ctx, size: str = "full", seed: int = 0):
        if not hasattr(webnn.MLGraphBuilder, "conv2d"):
            raise webnn.NotSupportedError("bench_interop: the engine has no conv2d operator yet (it lands with "
                                          "the linalg branch); this benchmark needs it")
        c, h, w = SIZES[size]
        if c % 4:
            raise ValueError("the user's conv2d kernel needs channels divisible by 4")
        rng = np.random.default_rng(seed)
        self.ctx, self.device = ctx, ctx.device
        self.shape = (1, c, h, w)
        self.count = c * h * w
        self.x = rng.standard_normal(self.shape).astype(np.float32)
        self.w = (rng.standard_normal((c, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32)
        self.bias = rng.standard_normal(c).astype(np.float32)
        dev, nbytes = self.device, 4 * self.count

        # WebNN: conv2d alone, and the whole chain.
        b = webnn.MLGraphBuilder(ctx)
        xin = b.input("x", {"data_type": "float32", "shape": list(self.shape)})
        self.conv_graph = b.build({"y": b.conv2d(xin, b.constant(self.w), padding=[1, 1, 1, 1])})
        b = webnn.MLGraphBuilder(ctx)
        xin = b.input("x", {"data_type": "float32", "shape": list(self.shape)})
        y = b.conv2d(xin, b.constant(self.w), padding=[1, 1, 1, 1])
        y = b.relu(b.add(y, b.constant(self.bias.reshape(1, c, 1, 1))))
        self.full_graph = b.build({"y": y})
        b = webnn.MLGraphBuilder(ctx)
        xin = b.input("x", {"data_type": "float32", "shape": list(self.shape)})
        y = b.conv2d(xin, b.constant(self.w), padding=[1, 1, 1, 1])
        y = b.wgsl(BIAS_RELU_NODE_WGSL, [y, b.constant(self.bias)], {"data_type": "float32", "shape": list(self.shape)},
                   workgroup_size=256, constants={"plane": h * w}, label="user bias + relu")
        self.custom_graph = b.build({"y": y})
        desc = {"data_type": "float32", "shape": list(self.shape)}
        self.x_t = ctx.create_tensor({**desc, "writable": True})
        ctx.write_tensor(self.x_t, self.x)
        self.y_t = ctx.create_tensor({**desc, "readable": True, "importable_to_webgpu": True})

        # The user's side: input, weights, bias, a work buffer and a reused staging buffer.
        self.x_buf = dev.create_buffer_with_data(data=self.x.tobytes(), usage=_IO)
        w_user = self.w.transpose(1, 2, 3, 0).reshape(c * 9, c)  # [ic*3*3 + kh*3 + kw][oc]
        self.w_buf = dev.create_buffer_with_data(data=np.ascontiguousarray(w_user).tobytes(), usage=_U.STORAGE)
        self.bias_buf = dev.create_buffer_with_data(data=self.bias.tobytes(), usage=_U.STORAGE)
        self.work = dev.create_buffer(size=nbytes, usage=_IO)
        self.staging = dev.create_buffer(size=nbytes, usage=_U.MAP_READ | _U.COPY_DST)
        self.out = np.empty(self.shape, np.float32)

        def pipeline(code, **constants):
            module = dev.create_shader_module(code=code)
            return dev.create_compute_pipeline(layout="auto", compute={
                "module": module, "entry_point": "main", "constants": constants})

        self.conv_pipe = pipeline(CONV_WGSL, C_IN=c, C_OUT4=c // 4, H=h, W=w)
        self.post_pipe = pipeline(BIAS_RELU_WGSL, COUNT=self.count, PLANE=h * w)
        self.conv_group = self._group(self.conv_pipe, self.x_buf, self.w_buf, self.work)
        self.post_groups = {}
        self.conv_groups_wg = ((h * ((w + 3) // 4) + 63) // 64, c // 4)

    def _group(self, pipe, *buffers):
        return self.device.create_bind_group(layout=pipe.get_bind_group_layout(0), entries=[
            {"binding": i, "resource": {"buffer": b, "offset": 0, "size": b.size}} for i, b in enumerate(buffers)])

    def _post(self, encoder, buffer, cache: bool = True) -> None:
        group = self.post_groups.get(id(buffer)) if cache else None
        if group is None:
            group = (buffer, self._group(self.post_pipe, buffer, self.bias_buf))
            if cache:
                self.post_groups[id(buffer)] = group
        p = encoder.begin_compute_pass()
        p.set_pipeline(self.post_pipe)
        p.set_bind_group(0, group[1])
        p.dispatch_workgroups((self.count + 255) // 256)
        p.end()

    def _read_user(self, encoder, buffer) -> np.ndarray:
        """Copy ``buffer`` into the reused staging buffer in ``encoder``, submit, map, read."""
        encoder.copy_buffer_to_buffer(buffer, 0, self.staging, 0, 4 * self.count)
        self.device.queue.submit([encoder.finish()])
        self.staging.map_sync(wgpu.MapMode.READ)
        self.out.reshape(-1)[...] = np.frombuffer(self.staging.read_mapped(copy=False), np.float32)
        self.staging.unmap()
        return self.out

    # ------------------------------------------------------------------ the variants
    def wgsl(self) -> np.ndarray:
        enc = self.device.create_command_encoder()
        p = enc.begin_compute_pass()
        p.set_pipeline(self.conv_pipe)
        p.set_bind_group(0, self.conv_group)
        p.dispatch_workgroups(*self.conv_groups_wg)
        p.end()
        self._post(enc, self.work)
        return self._read_user(enc, self.work)

    def readback(self) -> np.ndarray:
        self.ctx.dispatch(self.conv_graph, {"x": self.x_t}, {"y": self.y_t})
        conv = self.ctx.read_tensor(self.y_t, out=self.out)
        self.device.queue.write_buffer(self.work, 0, conv)
        enc = self.device.create_command_encoder()
        self._post(enc, self.work)
        return self._read_user(enc, self.work)

    def rental(self) -> np.ndarray:
        self.ctx.dispatch(self.conv_graph, {"x": self.x_t}, {"y": self.y_t})
        with self.ctx.export_to_gpu(self.y_t) as buf:  # a new GPUBuffer per rental (the spec's)
            enc = self.device.create_command_encoder()
            self._post(enc, buf, cache=False)
            self.device.queue.submit([enc.finish()])
        return self.ctx.read_tensor(self.y_t, out=self.out)

    def webnn(self) -> np.ndarray:
        self.ctx.dispatch(self.full_graph, {"x": self.x_t}, {"y": self.y_t})
        return self.ctx.read_tensor(self.y_t, out=self.out)

    def recorded(self) -> np.ndarray:
        enc = self.device.create_command_encoder()
        self.ctx.record(enc, self.conv_graph, {"x": self.x_t}, {"y": self.work})
        self._post(enc, self.work)
        return self._read_user(enc, self.work)

    def custom(self) -> np.ndarray:
        self.ctx.dispatch(self.custom_graph, {"x": self.x_t}, {"y": self.y_t})
        return self.ctx.read_tensor(self.y_t, out=self.out)

    def destroy(self) -> None:
        for t in (self.x_t, self.y_t):
            t.destroy()
        for g in (self.conv_graph, self.full_graph, self.custom_graph):
            g.destroy()


def measure(size: str = "full", repeat: int = 5, ctx=None) -> dict:
    """Run every variant (one warm-up each, checked against NumPy), then ``repeat`` rounds of
    all variants in turn; return the median ms of each."""
    own = ctx is None
    ctx = ctx or webnn.ml.create_context()
    wl = Workload(ctx, size)
    want = reference(wl.x, wl.w, wl.bias)
    times = {}
    try:
        for name in VARIANTS:
            got = getattr(wl, name)().astype(np.float64)
            if not np.allclose(got, want, atol=1e-3, rtol=1e-3):
                raise AssertionError(f"variant {name}: max |error| {np.max(np.abs(got - want)):.3g} vs NumPy")
        samples: dict = {name: [] for name in VARIANTS}
        for _ in range(repeat):  # round robin: the machine's load changes hit every variant alike
            for name in VARIANTS:
                fn = getattr(wl, name)
                start = time.perf_counter()
                fn()
                samples[name].append((time.perf_counter() - start) * 1e3)
        times = {name: statistics.median(samples[name]) for name in VARIANTS}
    finally:
        wl.destroy()
        if own:
            ctx.destroy()
    return times


def measure_rental(shape=(1, 100, 100, 100), repeat: int = 7, ctx=None) -> dict:
    """Milliseconds to rent and to return a float32 tensor: zero-copy (the context's device)
    and the slow path (another device: copy through the CPU, fenced by mapped reads), and a
    plain ``read_tensor`` of it for scale. Medians of ``repeat``."""
    own = ctx is None
    ctx = ctx or webnn.ml.create_context()
    other = wgpu.gpu.request_adapter_sync(power_preference="high-performance").request_device_sync(
        label="bench caller device")
    t = ctx.create_tensor({"data_type": "float32", "shape": list(shape), "writable": True, "readable": True,
                           "importable_to_webgpu": True})
    ctx.write_tensor(t, np.ones(shape, np.float32))
    result = {}
    try:
        for name, device in (("same device", ctx.device), ("other device", other)):
            rent, back = [], []
            for i in range(repeat + 1):
                t0 = time.perf_counter()
                buf = webnn.interop.import_external_buffer(device, t)
                t1 = time.perf_counter()
                buf.destroy()
                t2 = time.perf_counter()
                if i:  # the first round warms up
                    rent.append((t1 - t0) * 1e3)
                    back.append((t2 - t1) * 1e3)
            result[name] = (statistics.median(rent), statistics.median(back))
        reads = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            ctx.read_tensor(t)
            reads.append((time.perf_counter() - t0) * 1e3)
        result["read_tensor"] = (statistics.median(reads), 0.0)
    finally:
        t.destroy()
        other.destroy()
        if own:
            ctx.destroy()
    return result


def rental_table(result: dict, nbytes: int) -> str:
    lines = [f"{'rental of ' + format(nbytes, ',') + ' bytes':28s} {'rent ms':>9s} {'return ms':>10s}"]
    for name, (rent, back) in result.items():
        lines.append(f"{name:28s} {rent:9.3f} {back:10.3f}" if name != "read_tensor"
                     else f"{'(read_tensor, for scale)':28s} {rent:9.3f}")
    return "\n".join(lines)


def table(times: dict) -> str:
    base = times["readback"]
    names = {"wgsl": "1 all in the user's WGSL", "readback": "2 WebNN conv2d -> NumPy -> user's WGSL",
             "rental": "3 WebNN conv2d -> rental -> user's WGSL", "webnn": "4 all in WebNN",
             "recorded": "5 WebNN conv2d recorded + user's WGSL, one submit",
             "custom": "6 WebNN conv2d + user's WGSL as a custom node"}
    lines = [f"{'variant':52s} {'ms':>9s} {'ratio to 2':>11s}"]
    for k in VARIANTS:
        lines.append(f"{names[k]:52s} {times[k]:9.2f} {times[k] / base:11.2f}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", choices=sorted(SIZES), default="full")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    ctx = webnn.ml.create_context()
    info = ctx.adapter_info
    c, h, w = SIZES[args.size]
    print(f"conv2d [1,{c},{h},{w}] x [{c},{c},3,3] + bias + relu on {info.get('device', '?')} "
          f"({info.get('backend_type', '?')}); median of {args.repeat}")
    print(rental_table(measure_rental((1, c, h, w), max(args.repeat, 3), ctx), 4 * c * h * w))
    print()
    if not hasattr(webnn.MLGraphBuilder, "conv2d"):
        print("four-way comparison: needs the conv2d operator (it lands with the linalg branch)")
        ctx.destroy()
        return 1
    times = measure(args.size, args.repeat, ctx)
    print(table(times))
    ctx.destroy()
    return 0


# ---------------------------------------------------------------------- pytest-benchmark
@pytest.fixture(scope="module")
def workload():
    ctx = webnn.ml.create_context()
    wl = Workload(ctx, os.environ.get("WEBNN_BENCH_SIZE", "full"))
    yield wl
    wl.destroy()
    ctx.destroy()


@pytest.mark.parametrize("where", ["same", "other"])
def test_rental_round_trip(benchmark, where):
    """Rent and return a [1, 100, 100, 100] float32 tensor: zero-copy vs the slow path."""
    ctx = webnn.ml.create_context()
    device = ctx.device if where == "same" else wgpu.gpu.request_adapter_sync().request_device_sync()
    t = ctx.create_tensor({"data_type": "float32", "shape": [1, 100, 100, 100], "importable_to_webgpu": True})

    def round_trip():
        webnn.interop.import_external_buffer(device, t).destroy()

    benchmark.pedantic(round_trip, rounds=10, warmup_rounds=1)
    t.destroy()
    ctx.destroy()


@pytest.mark.parametrize("variant", VARIANTS)
def test_interop_fourway(benchmark, workload, variant):
    """One variant per benchmark; all must agree with NumPy."""
    fn = getattr(workload, variant)
    want = reference(workload.x, workload.w, workload.bias)
    got = benchmark.pedantic(fn, rounds=3, warmup_rounds=1)
    np.testing.assert_allclose(got, want, atol=1e-3, rtol=1e-3)


if __name__ == "__main__":
    sys.exit(main())
