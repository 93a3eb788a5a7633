"""Your own WGSL on a WebNN tensor: conv2d in WebNN, then bias-add + ReLU in your shader.

    python examples/custom_shader.py

Two ways, both checked against NumPy:

1. Renting. WebNN runs conv2d into a tensor created with ``importable_to_webgpu``;
   ``ctx.export_to_gpu(tensor)`` rents it to you as a ``wgpu.GPUBuffer`` (zero copies: same
   device, same queue), your compute pass adds the bias and applies ReLU in place, and leaving
   the ``with`` block (or ``buffer.destroy()``) gives it back to WebNN, which then reads it.
2. Recording. One command encoder holds the inference (``ctx.record``, writing into a
   plain ``GPUBuffer`` of yours) and your pass, and goes out in one ``queue.submit``.
"""

from __future__ import annotations

import sys

import numpy as np
import wgpu

import webnn_gpu as webnn

N, C, H, W = 1, 16, 32, 32

#: The user's shader: in place, data[i] = max(data[i] + bias[channel of i], 0) for NCHW data.
BIAS_RELU_WGSL = """
@group(0) @binding(0) var<storage, read_write> data: array<f32>;
@group(0) @binding(1) var<storage, read> bias: array<f32>;
override count: u32;
override channels: u32;
override plane: u32;   // height * width

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i >= count) { return; }
    let c = (i / plane) % channels;
    data[i] = max(data[i] + bias[c], 0.0);
}
"""


def conv2d_reference(x, w):
    """NumPy float64 conv2d, NCHW input, OIHW filter, stride 1, padding 1."""
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    windows = np.lib.stride_tricks.sliding_window_view(xp, w.shape[2:], axis=(2, 3))  # N C H W kh kw
    return np.einsum("nchwij,ocij->nohw", windows, w.astype(np.float64))


def build_webnn_step(ctx, weights):
    """The WebNN graph: a 3x3 conv2d with padding 1, and its NumPy reference."""
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [N, C, H, W]})
    y = b.conv2d(x, b.constant(weights), padding=[1, 1, 1, 1], label="conv")
    return b.build({"y": y}), (lambda xv: conv2d_reference(xv, weights)), "conv2d"


class BiasRelu:
    """The user's post-processing pass (plain wgpu-py)."""

    def __init__(self, device, bias: np.ndarray):
        self.device = device
        self.count = N * C * H * W
        module = device.create_shader_module(code=BIAS_RELU_WGSL, label="bias + relu")
        self.pipeline = device.create_compute_pipeline(layout="auto", compute={
            "module": module, "entry_point": "main",
            "constants": {"count": self.count, "channels": C, "plane": H * W}})
        self.bias = device.create_buffer_with_data(data=bias.astype(np.float32).tobytes(),
                                                   usage=wgpu.BufferUsage.STORAGE)

    def encode(self, encoder, buffer) -> None:
        """Record the pass over ``buffer`` (in place) into ``encoder``."""
        group = self.device.create_bind_group(layout=self.pipeline.get_bind_group_layout(0), entries=[
            {"binding": 0, "resource": {"buffer": buffer, "offset": 0, "size": 4 * self.count}},
            {"binding": 1, "resource": {"buffer": self.bias, "offset": 0, "size": self.bias.size}}])
        cpass = encoder.begin_compute_pass(label="bias + relu")
        cpass.set_pipeline(self.pipeline)
        cpass.set_bind_group(0, group)
        cpass.dispatch_workgroups((self.count + 255) // 256)
        cpass.end()


def main() -> int:
    rng = np.random.default_rng(7)
    x = rng.standard_normal((N, C, H, W)).astype(np.float32)
    weights = (rng.standard_normal((C, C, 3, 3)) / 12).astype(np.float32)
    bias = rng.standard_normal(C).astype(np.float32)

    ctx = webnn.ml.create_context()
    device = ctx.device
    graph, reference, what = build_webnn_step(ctx, weights)
    expected = np.maximum(reference(x) + bias.reshape(1, C, 1, 1).astype(np.float64), 0.0)
    post = BiasRelu(device, bias)
    ok = True

    # 1. Renting: WebNN -> your shader on the same buffer -> back to WebNN.
    x_t = ctx.create_tensor({"data_type": "float32", "shape": [N, C, H, W], "writable": True})
    y_t = ctx.create_tensor({"data_type": "float32", "shape": [N, C, H, W], "readable": True,
                             "importable_to_webgpu": True})
    ctx.write_tensor(x_t, x)
    ctx.dispatch(graph, {"x": x_t}, {"y": y_t})
    with ctx.export_to_gpu(y_t) as buffer:  # a wgpu.GPUBuffer, ordered after the dispatch by the shared queue
        encoder = device.create_command_encoder()
        post.encode(encoder, buffer)
        device.queue.submit([encoder.finish()])
    got = ctx.read_tensor(y_t)
    err = float(np.max(np.abs(got - expected)))
    ok &= bool(np.allclose(got, expected, atol=1e-4, rtol=1e-4))
    print(f"rental:    WebNN {what} -> your bias+ReLU WGSL, max |error| vs NumPy = {err:.2e}")

    # 2. Recording: WebNN's kernels and your pass in one encoder, one submit. The output is
    #    a plain GPUBuffer of yours (an MLTensor works too).
    out = device.create_buffer(size=4 * N * C * H * W, usage=wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC)
    encoder = device.create_command_encoder()
    ctx.record(encoder, graph, {"x": x_t}, {"y": out})
    post.encode(encoder, out)
    device.queue.submit([encoder.finish()])
    got = np.frombuffer(device.queue.read_buffer(out), np.float32).reshape(N, C, H, W)
    err = float(np.max(np.abs(got - expected)))
    ok &= bool(np.allclose(got, expected, atol=1e-4, rtol=1e-4))
    print(f"recorded:  WebNN {what} + your bias+ReLU WGSL in one submit, max |error| vs NumPy = {err:.2e}")

    print("OK" if ok else "MISMATCH")
    ctx.destroy()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
