"""The caller's side in the interop tests: its own WGSL passes and reads (plain wgpu-py)."""

from __future__ import annotations

import math

import numpy as np
import wgpu

_U = wgpu.BufferUsage
IO = _U.STORAGE | _U.COPY_SRC | _U.COPY_DST

#: The caller's shader: y[i] = x[i] * scale + offset (f32), as a user would write it.
AFFINE_WGSL = """
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
override scale: f32 = 1.0;
override offset: f32 = 0.0;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i >= arrayLength(&y)) { return; }
    y[i] = x[i] * scale + offset;
}
"""

#: In place: v[i] = v[i] * scale + offset.
AFFINE_INPLACE_WGSL = """
@group(0) @binding(0) var<storage, read_write> v: array<f32>;
override scale: f32 = 1.0;
override offset: f32 = 0.0;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i >= arrayLength(&v)) { return; }
    v[i] = v[i] * scale + offset;
}
"""

_pipelines: dict = {}


def user_pass(device, encoder, wgsl: str, buffers, n: int, **constants) -> None:
    """Record the caller's own compute pass over ``n`` elements into ``encoder``."""
    key = (id(device), wgsl, tuple(sorted(constants.items())))
    entry = _pipelines.get(key)
    if entry is None or entry[0] is not device:
        module = device.create_shader_module(code=wgsl)
        pipeline = device.create_compute_pipeline(
            layout="auto", compute={"module": module, "entry_point": "main", "constants": constants})
        entry = _pipelines[key] = (device, pipeline)
    pipeline = entry[1]
    group = device.create_bind_group(layout=pipeline.get_bind_group_layout(0), entries=[
        {"binding": i, "resource": {"buffer": b, "offset": 0, "size": b.size}} for i, b in enumerate(buffers)])
    cpass = encoder.begin_compute_pass()
    cpass.set_pipeline(pipeline)
    cpass.set_bind_group(0, group)
    cpass.dispatch_workgroups(math.ceil(n / 64))
    cpass.end()


def run_user_pass(device, wgsl: str, buffers, n: int, **constants) -> None:
    """The caller's pass in its own encoder, submitted at once."""
    enc = device.create_command_encoder()
    user_pass(device, enc, wgsl, buffers, n, **constants)
    device.queue.submit([enc.finish()])


def read_f32(device, buffer, n: int) -> np.ndarray:
    """The caller reads its buffer back (wgpu's own read_buffer)."""
    return np.frombuffer(device.queue.read_buffer(buffer), np.float32)[:n].copy()



def f32_tensor(ctx, **flags):
    """A float32 [64] tensor with the given flags."""
    return ctx.create_tensor({"data_type": "float32", "shape": [64], **flags})
