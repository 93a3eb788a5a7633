"""What one more kernel launch costs inside a model: a no-op dispatch recorded after each of its
kernels, the inference with and without them alternating in one process.

    .venv/bin/python benchmarks/launch_cost.py [MODEL ...] [--rounds 40] [--workgroups 1]

For each model (a ``.tflite`` path or a name of ``webnn-gpu fetch``; default iris-landmark and
face-landmark), the median wall time of write, dispatch and read with the model's kernels alone
and with a no-op kernel (one workgroup of 64 invocations writing a scratch buffer) after each,
and the difference per no-op. ``--workgroups 0`` records the no-ops with no workgroups (what
lavapipe's state changes cost without its thread pool). docs/performance.md, "What lavapipe
rewards", has the numbers and what they mean. The no-ops are recorded through wgpu-py's methods
(``WEBNN_GPU_FORCE_ENCODE=public``): this benchmark patches ``webnn_gpu.graph._encode_public``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

NOOP = """
@group(0) @binding(0) var<storage, read_write> b: array<f32>;
@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) i: vec3<u32>) {
    b[i.x % 4096u] = f32(i.x);
}"""


def noop_kernel(device):
    """A pipeline and bind group of a kernel that computes next to nothing."""
    import wgpu

    buf = device.create_buffer(size=4096 * 4, usage=wgpu.BufferUsage.STORAGE)
    pipe = device.create_compute_pipeline(
        layout="auto", compute={"module": device.create_shader_module(code=NOOP), "entry_point": "main"})
    group = device.create_bind_group(layout=pipe.get_bind_group_layout(0),
                                     entries=[{"binding": 0, "resource": {"buffer": buf}}])
    return pipe, group


def measure(ctx, path: str, rounds: int, workgroups: int) -> dict:
    """Median ms per inference of the model at ``path`` without and with the no-ops."""
    import webnn_gpu as webnn
    from webnn_gpu import graph as graph_module

    g = webnn.load(path, ctx).graph
    pipe, group = noop_kernel(ctx.device)
    extra = {"on": False}

    public = graph_module._encode_public

    def encode(cpass, kernels):  # the graph's own recording, a no-op after each kernel when on
        if not extra["on"]:
            return public(cpass, kernels)
        for kernel in kernels:
            public(cpass, (kernel,))
            cpass.set_pipeline(pipe)
            cpass.set_bind_group(0, group)
            cpass.dispatch_workgroups(workgroups)

    graph_module._encode_public = encode
    ((name, desc),) = g.inputs.items()
    t_in = ctx.create_tensor({**desc, "writable": True})
    t_out = {n: ctx.create_tensor({**d, "readable": True}) for n, d in g.outputs.items()}
    x = np.random.default_rng(0).random(desc["shape"], dtype=np.float32)

    def run() -> float:  # seconds of one write, dispatch and read
        t0 = time.perf_counter()
        ctx.write_tensor(t_in, x)
        ctx.dispatch(g, {name: t_in}, t_out)
        for t in t_out.values():
            ctx.read_tensor(t)
        return time.perf_counter() - t0

    try:
        times = {False: [], True: []}
        for r in range(rounds + 5):
            for on in (False, True):
                extra["on"] = on
                t = run()
                if r >= 5:
                    times[on].append(t)
    finally:
        graph_module._encode_public = public
    base, more = (statistics.median(times[k]) * 1e3 for k in (False, True))
    return {"kernels": g.kernel_count, "ms": base, "ms_with_noops": more,
            "us_per_noop": (more - base) * 1e3 / g.kernel_count}


def main(argv: list[str] | None = None) -> int:
    """Print each model's time per inference without and with the no-ops."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="*", default=["iris-landmark", "face-landmark"])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--workgroups", type=int, default=1)
    args = parser.parse_args(argv)
    os.environ["WEBNN_GPU_FORCE_ENCODE"] = "public"  # read when a recording is made
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import webnn_gpu as webnn
    from _common import model_paths

    ctx = webnn.ML().create_context()
    for name, path in zip(args.models, model_paths(args.models)):
        r = measure(ctx, path, args.rounds, args.workgroups)
        print(f"{name}: {r['kernels']} kernels, {r['ms']:.3f} ms; with a no-op of {args.workgroups} "
              f"workgroup(s) after each: {r['ms_with_noops']:.3f} ms, {r['us_per_noop']:.1f} us per no-op")
    return 0


if __name__ == "__main__":
    sys.exit(main())
