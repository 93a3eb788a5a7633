"""Weight bandwidth of the ways a kernel can read a large constant on the adapter (raw wgpu).

    .venv/bin/python benchmarks/matvec_bw.py [--mib 9 --mib 64] [--rounds 9] [--groups 32]

Each form is one compute pipeline whose invocations read every byte of one buffer (or texture)
of ``--mib`` MiB once and fold what they read into one value they store (so that no load is
dropped): what a product of one row (``matmul/matvec.wgsl``) does with its B, without the
multiply-adds. The forms differ in the access type and in which invocation reads which word:

Every form makes 8 loads an iteration of its loop (unrolled):

* ``u64x4``, ``u64x2``, ``u64``, ``f32x4``, ``u32x4``: storage loads of ``vec4<u64>`` (8 float32
  values, matvec's ``b_words``), ``vec2<u64>``, ``u64``, ``vec4<f32>`` (matvec's "storage" form)
  and ``vec4<u32>``, invocation t of T reading words t, t + T, t + 2T, ... (the lanes of a SIMD
  row read adjacent words: an invocation owning columns, its loop over K);
* ``u64x4_chunk``: ``vec4<u64>`` loads, each invocation a run of 8 consecutive words a step,
  the runs of all T invocations side by side; ``u64x4_chunk16``: runs of 16 words (8 vec4
  columns a lane); ``u32x4_chunk``: ``vec4<u32>`` runs of 8;
* ``u64x4_sg``: ``matmul/matvec.wgsl``'s layout with 4 vec4 columns a lane (each subgroup of 8
  one contiguous part of the buffer, its lanes' runs of 8 words side by side a step: the
  template's L-th steps); ``u64x4_slab``: each invocation one contiguous run of all its words
  (the template's ``runs``);
* ``tex_f32`` / ``tex_u32``: ``textureLoad`` of an ``rgba32float`` / ``rgba32uint`` texture of
  4096 texels a row (matvec's "texture" form), the same order as ``u64x4``.

The forms are dispatched alternately (``--repeats`` dispatches in one submit) for ``--rounds``
rounds; printed per form: the least wall time of a dispatch, GB/s (bytes / that time) and the
median and range over the rounds of its time / ``--base``'s (``u64x4_sg``) in the same round.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import wgpu

WG = 64

_LOOP = """
@compute @workgroup_size({wg})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {{
  let t = gid.x;
  var acc = {zero};
  for (var j = 0u; j < {J}u; j = j + 1u) {{
{body}
  }}
  dst[t] = {fold};
}}
"""

#: form -> (declaration of src, scalar words per access, zero, body, fold to u32)
FORMS = {
    "u64x4": ("array<vec4<u64>>", 4, "vec4<u64>(0)", "    acc = acc ^ src[j * {T}u + t];", "u32(acc.x ^ acc.y ^ acc.z ^ acc.w)"),
    "u64x2": ("array<vec2<u64>>", 2, "vec2<u64>(0)", "    acc = acc ^ src[j * {T}u + t];", "u32(acc.x ^ acc.y)"),
    "u64": ("array<u64>", 1, "u64(0)", "    acc = acc ^ src[j * {T}u + t];", "u32(acc)"),
    "f32x4": ("array<vec4<f32>>", 2, "vec4<f32>(0.0)", "    acc = acc + src[j * {T}u + t];", "u32(acc.x + acc.y + acc.z + acc.w)"),
    "u32x4": ("array<vec4<u32>>", 2, "vec4<u32>(0)", "    acc = acc ^ src[j * {T}u + t];", "acc.x ^ acc.y ^ acc.z ^ acc.w"),
    "u64x4_chunk": ("array<vec4<u64>>", 4, "vec4<u64>(0)", "CHUNK", "u32(acc.x ^ acc.y ^ acc.z ^ acc.w)"),
    "u64x4_chunk16": ("array<vec4<u64>>", 4, "vec4<u64>(0)", "CHUNK16", "u32(acc.x ^ acc.y ^ acc.z ^ acc.w)"),
    "u64x4_sg": ("array<vec4<u64>>", 4, "vec4<u64>(0)", "SG", "u32(acc.x ^ acc.y ^ acc.z ^ acc.w)"),
    "u64x4_slab": ("array<vec4<u64>>", 4, "vec4<u64>(0)", "SLAB", "u32(acc.x ^ acc.y ^ acc.z ^ acc.w)"),
    "u32x4_chunk": ("array<vec4<u32>>", 2, "vec4<u32>(0)", "CHUNK", "acc.x ^ acc.y ^ acc.z ^ acc.w"),
    "tex_f32": ("texture_2d<f32>", 2, "vec4<f32>(0.0)", "    let i = j * {T}u + t;\n    acc = acc + textureLoad(src, vec2<u32>(i & 4095u, i >> 12u), 0);",
                "u32(acc.x + acc.y + acc.z + acc.w)"),
    "tex_u32": ("texture_2d<u32>", 2, "vec4<u32>(0)", "    let i = j * {T}u + t;\n    acc = acc ^ textureLoad(src, vec2<u32>(i & 4095u, i >> 12u), 0);",
                "acc.x ^ acc.y ^ acc.z ^ acc.w"),
}


def source(form: str, nbytes: int, T: int) -> str:
    """The WGSL of ``form`` reading ``nbytes`` with ``T`` invocations."""
    decl, per, zero, body, fold = FORMS[form]
    words = nbytes // (per * 8)
    J = words // T
    J //= 8
    body = body.replace("{T}", str(T))
    if body == "CHUNK16":
        J //= 2
        body = "\n".join(f"    acc = acc ^ src[(j * {T}u + t) * 16u + {c}u];" for c in range(16))
    elif body == "SG":  # matvec.wgsl's packing: subgroup t / 8 a contiguous run, its lanes' runs of 8 side by side
        body = "\n".join(f"    acc = acc ^ src[(((t / 8u) * {J}u + j) * 8u + t % 8u) * 8u + {c}u];" for c in range(8))
    elif body == "SLAB":  # invocation t: words t * 8 J ... (t + 1) * 8 J - 1, in order
        body = "\n".join(f"    acc = acc ^ src[t * {8 * J}u + j * 8u + {c}u];" for c in range(8))
    elif body == "CHUNK":
        body = "\n".join(f"    acc = acc ^ src[(j * {T}u + t) * 8u + {c}u];" for c in range(8))
    else:  # 8 loads an iteration as the chunk form, invocation t word t of every T
        body = "\n".join("    {\n    let jj = j * 8u + " + f"{c}u;\n" + body.replace(f"j * {T}u", f"jj * {T}u") + "\n    }" for c in range(8))
    head = (f"@group(0) @binding(0) var src: {decl};" if decl.startswith("texture")
            else f"@group(0) @binding(0) var<storage, read> src: {decl};")
    head += "\n@group(0) @binding(1) var<storage, read_write> dst: array<u32>;\n"
    return head + _LOOP.format(wg=WG, zero=zero, J=J, body=body, fold=fold)


def main() -> None:
    """Run the forms alternately and print their bandwidth."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, action="append")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--repeats", type=int, default=4)
    ap.add_argument("--groups", type=int, default=32, help="workgroups of 64 per dispatch")
    ap.add_argument("--forms", default=",".join(FORMS))
    ap.add_argument("--base", default="u64x4_sg", help="the form the ratios are to")
    args = ap.parse_args()
    adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
    device = adapter.request_device_sync(required_features=["shader-int64"],
                                         required_limits={"max-storage-buffer-binding-size": 1 << 27,
                                                          "max-buffer-size": 1 << 27})
    forms = args.forms.split(",")
    T = args.groups * WG
    dst = device.create_buffer(size=T * 4, usage="STORAGE|COPY_SRC")
    for mib in args.mib or [9, 64]:
        nbytes = mib << 20
        data = np.random.default_rng(0).integers(0, 2**32, nbytes // 4, dtype=np.uint32)
        buf = device.create_buffer_with_data(data=data, usage="STORAGE")
        rows = nbytes // (4096 * 16)
        tex = {}
        for fmt in ("rgba32float", "rgba32uint"):
            tex[fmt] = device.create_texture(size=(4096, rows, 1), format=fmt, usage="TEXTURE_BINDING|COPY_DST")
            device.queue.write_texture({"texture": tex[fmt]}, data, {"bytes_per_row": 4096 * 16, "rows_per_image": rows},
                                       (4096, rows, 1))
        runs = {}
        for f in forms:
            mod = device.create_shader_module(code=source(f, nbytes, T))
            pipe = device.create_compute_pipeline(layout="auto", compute={"module": mod, "entry_point": "main"})
            res = tex["rgba32float" if f == "tex_f32" else "rgba32uint"].create_view() if f.startswith("tex") else {"buffer": buf}
            bg = device.create_bind_group(layout=pipe.get_bind_group_layout(0),
                                          entries=[{"binding": 0, "resource": res}, {"binding": 1, "resource": {"buffer": dst}}])
            runs[f] = (pipe, bg)

        def run(f: str) -> float:
            pipe, bg = runs[f]
            enc = device.create_command_encoder()
            for _ in range(args.repeats):
                cp = enc.begin_compute_pass()
                cp.set_pipeline(pipe)
                cp.set_bind_group(0, bg)
                cp.dispatch_workgroups(args.groups)
                cp.end()
            t = time.perf_counter()
            device.queue.submit([enc.finish()])
            device.queue.read_buffer(dst, 0, 16)
            return (time.perf_counter() - t) / args.repeats

        for f in forms:
            run(f)
        times = {f: [] for f in forms}
        for r in range(args.rounds):
            for f in forms[r % len(forms):] + forms[:r % len(forms)]:
                times[f].append(run(f))
        base = np.array(times.get(args.base, times[forms[0]]))
        print(f"# {mib} MiB, {args.groups} workgroups of {WG}")
        for f in forms:
            t = np.array(times[f])
            ratio = t / base
            print(f"{f:>12} {t.min() * 1e6:9.0f} us {nbytes / t.min() / 1e9:6.2f} GB/s  "
                  f"/base {np.median(ratio):.2f} [{ratio.min():.2f}-{ratio.max():.2f}]", flush=True)
        buf.destroy()


if __name__ == "__main__":
    main()
