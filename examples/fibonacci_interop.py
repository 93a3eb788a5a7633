"""Fibonacci, with WebNN and your own WGSL taking turns on the same tensors.

    python examples/fibonacci_interop.py [N]

The MLTensor explainer's chained-inference example, with every other step done by the
caller's WGSL instead of WebNN. Each of 64 lanes runs its own sequence (F_0 = lane, F_1 = 1),
int32. No value is read back until the end.

* Timeline mode: even steps are ``ctx.dispatch`` calls; odd steps rent the three tensors
  (``ctx.export_to_gpu`` returns each as a ``wgpu.GPUBuffer``, zero copies), submit the
  caller's pass and return them (the end of the ``with`` block). The rentals order
  everything on the one queue: no CPU wait anywhere in the loop.
* Recorded mode: the three tensors are rented once; every step, WebNN's (``ctx.record``) and
  the caller's, goes into one command encoder and one ``queue.submit``.
"""

from __future__ import annotations

import sys
import time
from contextlib import ExitStack

import numpy as np

import webnn_gpu as webnn

LANES = 64

#: The caller's step: F_n = F_n-1 + F_n-2, element-wise on int32 (wrapping, like WebNN's add).
ADD_WGSL = """
@group(0) @binding(0) var<storage, read> fn1: array<i32>;
@group(0) @binding(1) var<storage, read> fn2: array<i32>;
@group(0) @binding(2) var<storage, read_write> fn0: array<i32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i >= arrayLength(&fn0)) { return; }
    fn0[i] = fn1[i] + fn2[i];
}
"""


def reference(n: int) -> np.ndarray:
    """F_n per lane with Python integers."""
    out = []
    for lane in range(LANES):
        a, b = lane, 1  # F_0, F_1
        for _ in range(n):
            a, b = b, a + b
        out.append(a)
    return np.array(out, dtype=np.int64)


class Fibonacci:
    """The WebNN graph, the caller's pipeline and the three rotating tensors."""

    def __init__(self, ctx):
        self.ctx = ctx
        b = webnn.MLGraphBuilder(ctx)
        desc = {"data_type": "int32", "shape": [LANES]}
        self.graph = b.build({"F_n": b.add(b.input("F_n-1", desc), b.input("F_n-2", desc))})
        self.tensors = [ctx.create_tensor({**desc, "readable": True, "writable": True, "importable_to_webgpu": True})
                        for _ in range(3)]
        device = ctx.device
        module = device.create_shader_module(code=ADD_WGSL, label="caller's fibonacci step")
        self.pipeline = device.create_compute_pipeline(layout="auto",
                                                       compute={"module": module, "entry_point": "main"})

    def reset(self) -> None:
        self.ctx.write_tensor(self.tensors[0], np.arange(LANES, dtype=np.int32))  # F_0
        self.ctx.write_tensor(self.tensors[1], np.ones(LANES, np.int32))  # F_1

    def caller_pass(self, encoder, fn1, fn2, fn0) -> None:
        """Record the caller's step over three GPUBuffers into ``encoder``."""
        group = self.ctx.device.create_bind_group(layout=self.pipeline.get_bind_group_layout(0), entries=[
            {"binding": i, "resource": {"buffer": buf, "offset": 0, "size": buf.size}}
            for i, buf in enumerate((fn1, fn2, fn0))])
        cpass = encoder.begin_compute_pass()
        cpass.set_pipeline(self.pipeline)
        cpass.set_bind_group(0, group)
        cpass.dispatch_workgroups((LANES + 63) // 64)
        cpass.end()

    def run_timeline(self, n: int) -> np.ndarray:
        """Even steps dispatched by WebNN, odd steps by the caller on rented tensors."""
        ctx, t = self.ctx, self.tensors
        self.reset()
        for i in range(2, n + 1):
            fn1, fn2, fn0 = t[(i - 1) % 3], t[(i - 2) % 3], t[i % 3]
            if i % 2 == 0:
                ctx.dispatch(self.graph, {"F_n-1": fn1, "F_n-2": fn2}, {"F_n": fn0})
            else:
                with ctx.export_to_gpu(fn1) as b1, ctx.export_to_gpu(fn2) as b2, ctx.export_to_gpu(fn0) as b0:
                    encoder = ctx.device.create_command_encoder()
                    self.caller_pass(encoder, b1, b2, b0)
                    ctx.device.queue.submit([encoder.finish()])
        return ctx.read_tensor(t[n % 3])

    def run_recorded(self, n: int) -> np.ndarray:
        """Every step in one encoder and one submit, the tensors rented for the whole loop."""
        ctx, t = self.ctx, self.tensors
        self.reset()
        with ExitStack() as stack:
            rented = [stack.enter_context(ctx.export_to_gpu(x)) for x in t]
            encoder = ctx.device.create_command_encoder()
            for i in range(2, n + 1):
                j1, j2, j0 = (i - 1) % 3, (i - 2) % 3, i % 3
                if i % 2 == 0:
                    ctx.record(encoder, self.graph, {"F_n-1": t[j1], "F_n-2": t[j2]}, {"F_n": t[j0]})
                else:
                    self.caller_pass(encoder, rented[j1], rented[j2], rented[j0])
            ctx.device.queue.submit([encoder.finish()])
        return ctx.read_tensor(t[n % 3])


def main(argv: list[str]) -> int:
    n = int(argv[0]) if argv else 30
    if not 2 <= n <= 40:
        print("N must be in [2, 40] (int32 lanes)")
        return 2
    ctx = webnn.ml.create_context()
    fib = Fibonacci(ctx)
    want = reference(n)
    ok = True
    for mode in ("timeline", "recorded"):
        getattr(fib, f"run_{mode}")(3)  # warm up: first submits and bind groups
        start = time.perf_counter()
        got = getattr(fib, f"run_{mode}")(n)
        ms = (time.perf_counter() - start) * 1e3
        good = np.array_equal(got.astype(np.int64), want)
        ok &= good
        print(f"{mode:9s} F_{n} of lane 0..3 = {got[:4].tolist()} ({n - 1} steps, one read, {ms:.1f} ms): "
              f"{'matches' if good else 'DIFFERS FROM'} Python")
    print("OK" if ok else "MISMATCH")
    ctx.destroy()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
