"""Lane-uniform storage loads on the adapter: ns per load by where the address comes from.

Raw wgpu, one process. Each form is one compute pipeline whose invocations run a loop of
vec4<f32> loads; the forms differ only in where the loaded address comes from (and whether
the loads sit in a loop of one load per iteration or in straight-line code):

* ``none``: the loop without a load (the baseline of the loop forms);
* ``lane``: a per-lane address (``local_invocation_index`` + the loop counter);
* ``counter`` / ``const`` / ``fixed``: the same address in all lanes, from the loop counter and
  constants only / from ``(i & 3) * 7`` / a constant;
* ``uniform``: loop counter + a value read from a uniform buffer (as our kernels' params);
* ``immediate``: loop counter + an immediate (a push constant; feature ``immediates``);
* ``wid``: loop counter + ``workgroup_id``;
* ``bcast_first`` / ``bcast0``: loop counter + ``subgroupBroadcastFirst(wid.x)`` /
  ``subgroupBroadcast(wid.x, 0)``;
* ``unrolled*``: an inner loop of 8 loads at constant offsets that NIR unrolls, from 0 / an
  immediate / a uniform-buffer value / ``workgroup_id`` / the lane;
* ``ubo_lane`` / ``ubo_counter``: uniform-buffer loads at a per-lane / lane-uniform address;
* ``shared``: a workgroup-memory load at the loop counter;
* ``straight_*``: 64 loads in straight-line code per iteration (``straight_none`` the
  baseline), at constant addresses (``const``; ``ubo``: in a uniform buffer), per-lane ones,
  or constants plus a uniform-buffer value, an immediate, ``workgroup_id``, the loop counter,
  ``subgroupBroadcastFirst``;
  ``straight_split``: what the tile kernel does, each lane loads an eighth of the lane-uniform
  vectors and ``subgroupBroadcast`` hands them to the others.

The forms are dispatched alternately for ``--rounds`` rounds (after one warm-up run each); for
each the least process CPU time of a dispatch (lavapipe's threads included; on this shared
host CPU time moves much less than wall) less its baseline's is printed as ns per load per
invocation: dispatch CPU / (invocations x loads). ``--sized`` binds the source as a fixed-size
array (a different bounds check).

    .venv/bin/python benchmarks/uniform_loads.py --rounds 7
    .venv/bin/python benchmarks/uniform_loads.py --forms straight_none,straight_const,straight_lane
"""

from __future__ import annotations

import argparse
import resource

import numpy as np
import wgpu

WG = 64
LOADS = 4096
WORDS = 1024
STRAIGHT = 64

_HEAD = """
@group(0) @binding(0) var<storage, read> src: array<vec4<f32>{srcn}>;
@group(0) @binding(1) var<storage, read_write> dst: array<vec4<f32>>;
struct P {{ base: u32, n: u32, _a: u32, _b: u32 }}
@group(0) @binding(2) var<uniform> p: P;
{imm}
@group(0) @binding(3) var<uniform> w: array<vec4<f32>, {words}>;
var<workgroup> sh: array<vec4<f32>, {words}>;

@compute @workgroup_size({wg})
fn main(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(subgroup_invocation_id) sl: u32) {{
    var acc = vec4<f32>(0.0);
    {pre}
    for (var i = 0u; i < {n}; i += 1u) {{
        {body}
    }}
    dst[wid.x * {wg}u + li] = acc;
}}
"""

_IMM = "struct Q { base: u32, n: u32, _a: u32, _b: u32 }\nvar<immediate> q: Q;"

def _straight(load: str) -> str:
    """STRAIGHT statements ``acc += <load>`` with ``{k}`` the statement's index."""
    return " ".join("acc += " + load.replace("{k}", str(k)) + ";" for k in range(STRAIGHT))


FORMS = {
    "none": ("", "acc += vec4<f32>(f32(i));"),
    "lane": ("", "acc += src[(i + li) & {m}u];"),
    "counter": ("", "acc += src[i & {m}u];"),
    "const": ("", "acc += src[(i & 3u) * 7u];"),
    "fixed": ("", "acc += src[7u] * f32(i);"),
    "fixed_plain": ("", "acc += src[7u];"),
    # straight-line code, no loop around the loads (the loop runs once per STRAIGHT loads)
    "straight_none": ("", _straight("vec4<f32>(f32(i ^ {k}u))")),
    "straight_const": ("", _straight("src[3u * {k}u]")),
    "straight_ubo": ("", _straight("w[3u * {k}u]")),
    "straight_lane": ("", _straight("src[li + 3u * {k}u]")),
    "straight_uniform": ("let b = p.base;", _straight("src[b + 3u * {k}u]")),
    "straight_imm": ("let b = q.base;", _straight("src[b + 3u * {k}u]")),
    "straight_wid": ("let b = wid.x;", _straight("src[b + 3u * {k}u]")),
    "straight_counter": ("", _straight("src[(i + 3u * {k}u) & {m}u]")),
    # the subgroup split the tile kernel uses: each lane loads an eighth, subgroupBroadcast shares it
    "straight_split": ("let b = wid.x;", " ".join(
        f"let v{g} = src[b + {g * 24}u + sl * 3u];"
        + " ".join(f"acc += subgroupBroadcast(v{g}, {j}u);" for j in range(8))
        for g in range(STRAIGHT // 8))),
    "straight_bcast": ("let b = subgroupBroadcastFirst(wid.x);", _straight("src[b + 3u * {k}u]")),
    "unrolled": ("", "for (var j = 0u; j < 8u; j += 1u) {{ acc += src[j * 5u]; }}"),
    "unrolled_imm": ("let b = q.base;", "for (var j = 0u; j < 8u; j += 1u) {{ acc += src[b + j * 5u]; }}"),
    "unrolled_uni": ("let b = p.base;", "for (var j = 0u; j < 8u; j += 1u) {{ acc += src[b + j * 5u]; }}"),
    "unrolled_wid": ("let b = wid.x;", "for (var j = 0u; j < 8u; j += 1u) {{ acc += src[b + j * 5u]; }}"),
    "unrolled_lane": ("let b = li;", "for (var j = 0u; j < 8u; j += 1u) {{ acc += src[b + j * 5u]; }}"),
    "uniform": ("let b = p.base;", "acc += src[(i + b) & {m}u];"),
    "immediate": ("let b = q.base;", "acc += src[(i + b) & {m}u];"),
    "wid": ("let b = wid.x;", "acc += src[(i + b) & {m}u];"),
    "bcast_first": ("let b = subgroupBroadcastFirst(wid.x);", "acc += src[(i + b) & {m}u];"),
    "bcast0": ("let b = subgroupBroadcast(wid.x, 0u);", "acc += src[(i + b) & {m}u];"),
    "ubo_lane": ("", "acc += w[(i + li) & {m}u];"),
    "ubo_counter": ("", "acc += w[i & {m}u];"),
    "shared": ("sh[li] = vec4<f32>(f32(li)); workgroupBarrier();", "acc += sh[i & {m}u];"),
}


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _source(form: str, sized: bool) -> str:
    pre, body = FORMS[form]
    return _HEAD.format(
        srcn=f", {WORDS}" if sized else "",
        imm=_IMM if "imm" in form else "",
        words=WORDS,
        wg=WG,
        pre=pre,
        n="p.n / {}u".format(STRAIGHT) if form.startswith("straight") else "p.n",
        body=body.format(m=WORDS - 1),
    )


def main() -> None:
    """Run the forms alternately and print ns per load for each."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--groups", type=int, default=32, help="workgroups per dispatch")
    ap.add_argument("--sized", action="store_true", help="src as a fixed-size array")
    ap.add_argument("--forms", default=",".join(FORMS))
    args = ap.parse_args()
    adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
    device = adapter.request_device_sync(
        required_features=["subgroup", "immediates"],
        required_limits={"max-immediate-size": 16},
    )
    forms = args.forms.split(",")
    bgl = device.create_bind_group_layout(
        entries=[
            {"binding": 0, "visibility": wgpu.ShaderStage.COMPUTE, "buffer": {"type": "read-only-storage"}},
            {"binding": 1, "visibility": wgpu.ShaderStage.COMPUTE, "buffer": {"type": "storage"}},
            {"binding": 2, "visibility": wgpu.ShaderStage.COMPUTE, "buffer": {"type": "uniform"}},
            {"binding": 3, "visibility": wgpu.ShaderStage.COMPUTE, "buffer": {"type": "uniform"}},
        ]
    )
    layout = device.create_pipeline_layout(bind_group_layouts=[bgl], immediate_size=16)
    src = device.create_buffer_with_data(
        data=np.random.default_rng(0).standard_normal(WORDS * 4).astype(np.float32), usage="STORAGE"
    )
    dst = device.create_buffer(size=args.groups * WG * 16, usage="STORAGE|COPY_SRC")
    params = np.array([3, LOADS, 0, 0], np.uint32)
    ubuf = device.create_buffer_with_data(data=params, usage="UNIFORM")
    wbuf = device.create_buffer_with_data(data=np.ones(WORDS * 4, np.float32), usage="UNIFORM")
    bg = device.create_bind_group(
        layout=bgl,
        entries=[
            {"binding": 0, "resource": {"buffer": src}},
            {"binding": 1, "resource": {"buffer": dst}},
            {"binding": 2, "resource": {"buffer": ubuf}},
            {"binding": 3, "resource": {"buffer": wbuf}},
        ],
    )
    pipes = {}
    if args.sized:
        forms = [f + "/sized" for f in forms]
    for f in forms:
        mod = device.create_shader_module(code=_source(f.split("/")[0], f.endswith("/sized")))
        stage = {"module": mod, "entry_point": "main"}
        pipes[f] = device.create_compute_pipeline(layout=layout, compute=stage)

    def run(f: str) -> float:
        enc = device.create_command_encoder()
        cp = enc.begin_compute_pass()
        cp.set_pipeline(pipes[f])
        cp.set_bind_group(0, bg)
        cp.set_immediates(0, params, 0, 16)
        cp.dispatch_workgroups(args.groups)
        cp.end()
        t = _cpu()
        device.queue.submit([enc.finish()])
        device.queue.read_buffer(dst, 0, 16)
        return _cpu() - t

    for f in forms:  # warm-up (compiles)
        run(f)
    best = {f: float("inf") for f in forms}
    for _ in range(args.rounds):
        for f in forms:
            best[f] = min(best[f], run(f))
    for f in forms:
        n = args.groups * WG * LOADS * (8 if f.startswith("unrolled") else 1)
        base = ("straight_none" if f.startswith("straight") else "none") + ("/sized" if args.sized else "")
        over = best[f] - best.get(base, 0.0)
        print(f"{f:22s} {over * 1e9 / n:6.2f} ns/load over {base if base in best else 'nothing'}"
              f"  ({best[f] * 1e3:7.2f} ms CPU a dispatch)")


if __name__ == "__main__":
    main()
