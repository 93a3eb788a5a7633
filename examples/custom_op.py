"""A custom WGSL operator inside a WebNN graph, between two built-in operators.

    python examples/custom_op.py

WebNN has no "swish with a learned per-channel beta" (y = x * sigmoid(beta[c] * x)); here it
is a few lines of your own WGSL, added with ``builder.wgsl`` between a built-in conv2d and a
built-in average pool. The graph stays one dispatch in one command buffer, no readback in
between; the custom node's buffers come from the graph's arena and its pipeline from the
engine's cache. The result is checked against NumPy (float64) through ``compute``,
``dispatch`` and ``ctx.record``.

Binding convention of ``builder.wgsl``: inputs at ``@group(0) @binding(0..n-1)`` as
``var<storage, read>``, outputs after them as ``var<storage, read_write>``, entry point
``@compute fn main``. The code is a Jinja2 template: ``{{ outputs[0].size }}`` and the
``constants`` given to the builder are filled in at the call.
"""

from __future__ import annotations

import sys

import numpy as np

import webnn_gpu as webnn

N, C, H, W = 1, 8, 16, 16

#: y = x * sigmoid(beta[channel] * x), NCHW, one element per invocation.
SWISH_WGSL = """
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> beta: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

@compute @workgroup_size({{ workgroup_size }})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i >= {{ outputs[0].size }}u) { return; }
    let c = (i / {{ plane }}u) % {{ channels }}u;
    let v = x[i];
    y[i] = v / (1.0 + exp(-beta[c] * v));
}
"""


def build(ctx, weights, beta):
    """conv2d (built-in) -> swish with per-channel beta (your WGSL) -> 2x2 average pool (built-in)."""
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [N, C, H, W]})
    conv = b.conv2d(x, b.constant(weights), padding=[1, 1, 1, 1], label="conv")
    act = b.wgsl(SWISH_WGSL, [conv, b.constant(beta)], {"data_type": "float32", "shape": [N, C, H, W]},
                 constants={"plane": H * W, "channels": C}, label="swish")
    y = b.average_pool2d(act, window_dimensions=[2, 2], strides=[2, 2], label="pool")
    return b.build({"y": y})


def reference(x, weights, beta):
    """The same in NumPy float64."""
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    windows = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))
    conv = np.einsum("nchwij,ocij->nohw", windows, weights.astype(np.float64))
    act = conv / (1.0 + np.exp(-beta.astype(np.float64).reshape(1, C, 1, 1) * conv))
    return act.reshape(N, C, H // 2, 2, W // 2, 2).mean(axis=(3, 5))


def main() -> int:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((N, C, H, W)).astype(np.float32)
    weights = (rng.standard_normal((C, C, 3, 3)) / 8).astype(np.float32)
    beta = rng.uniform(0.5, 2.0, C).astype(np.float32)
    want = reference(x, weights, beta)

    ctx = webnn.ml.create_context()
    graph = build(ctx, weights, beta)
    ok = True

    def check(what, got):
        nonlocal ok
        err = float(np.max(np.abs(got - want)))
        good = bool(np.allclose(got, want, atol=1e-4, rtol=1e-4))
        ok &= good
        print(f"{what:9s} conv2d -> your WGSL swish -> average_pool2d: max |error| vs NumPy = {err:.2e}"
              f"{'' if good else '  (too large)'}")

    check("compute", ctx.compute(graph, {"x": x})["y"])

    x_t = ctx.create_tensor({"data_type": "float32", "shape": [N, C, H, W], "writable": True})
    y_t = ctx.create_tensor({"data_type": "float32", "shape": [N, C, H // 2, W // 2], "readable": True,
                             "writable": True})
    ctx.write_tensor(x_t, x)
    ctx.dispatch(graph, {"x": x_t}, {"y": y_t})
    check("dispatch", ctx.read_tensor(y_t))

    ctx.write_tensor(y_t, np.zeros(y_t.shape, np.float32))  # so that the check below sees record's result
    encoder = ctx.device.create_command_encoder()
    ctx.record(encoder, graph, {"x": x_t}, {"y": y_t})
    ctx.device.queue.submit([encoder.finish()])
    check("record", ctx.read_tensor(y_t))

    print(f"{graph.kernel_count} kernels in one command buffer")
    print("OK" if ok else "MISMATCH")
    ctx.destroy()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
