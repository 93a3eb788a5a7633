"""Custom WGSL operators (``MLGraphBuilder.wgsl``): results, graph integration, every rule and error.

References are NumPy float64 (or exact integer arithmetic) of the same formula.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import webnn_gpu as webnn
from webnn_gpu.compiler import PASSES
from webnn_gpu.errors import InvalidStateError, MLTypeError, NotSupportedError

ROOT = Path(__file__).resolve().parents[2]
F32 = {"data_type": "float32", "shape": [4, 50]}

#: out = a * k + b, element-wise (k a template constant).
AXPY = """
@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@compute @workgroup_size({{ workgroup_size }})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  if (i >= {{ outputs[0].size }}u) { return; }
  out[i] = a[i] * {{ k }} + b[i];
}
"""

#: Copy of one f32 input to one output (the base of the rule tests, changed line by line).
COPY = """@group(0) @binding(0) var<storage, read> src: array<f32>;
@group(0) @binding(1) var<storage, read_write> dst: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  if (gid.x >= 200u) { return; }
  dst[gid.x] = src[gid.x];
}
"""


def data(rng, shape=(4, 50)):
    return rng.standard_normal(shape).astype(np.float32)


# ---------------------------------------------------------------- results
def test_between_built_in_ops_in_compute_dispatch_and_record(ctx, rng):
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", F32)
    y = b.input("y", F32)
    h = b.relu(x)
    z = b.wgsl(AXPY, [h, y], F32, constants={"k": "3.0"}, label="axpy")
    out = b.neg(b.add(z, y))
    g = b.build({"out": out})
    xv, yv = data(rng), data(rng)
    want = -(np.maximum(xv.astype(np.float64), 0) * 3 + 2 * yv.astype(np.float64))
    np.testing.assert_allclose(ctx.compute(g, {"x": xv, "y": yv})["out"], want, rtol=1e-6, atol=1e-6)
    ts = {n: ctx.create_tensor({**F32, "writable": True}) for n in ("x", "y")}
    o = ctx.create_tensor({**F32, "readable": True, "writable": True})
    ctx.write_tensor(ts["x"], xv)
    ctx.write_tensor(ts["y"], yv)
    ctx.dispatch(g, ts, {"out": o})
    np.testing.assert_allclose(ctx.read_tensor(o), want, rtol=1e-6, atol=1e-6)
    ctx.write_tensor(o, np.zeros(F32["shape"], np.float32))
    enc = ctx.device.create_command_encoder()
    ctx.record(enc, g, ts, {"out": o})
    ctx.device.queue.submit([enc.finish()])
    np.testing.assert_allclose(ctx.read_tensor(o), want, rtol=1e-6, atol=1e-6)
    for t in (*ts.values(), o):
        t.destroy()


def test_two_outputs_integers_shapes_uniform_and_dispatch_function(ctx):
    """int32 and uint32 operands, two outputs, the optional shapes uniform, a 2-D workgroup
    and a dispatch computed from the input shapes."""
    code = """
@group(0) @binding(0) var<storage, read> m: array<i32>;
@group(0) @binding(1) var<storage, read_write> row_sums: array<i32>;
@group(0) @binding(2) var<storage, read_write> abs_m: array<u32>;
@group(0) @binding(3) var<uniform> shapes: array<vec4<u32>, 6>;
@compute @workgroup_size({{ workgroup_size }})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let rows = shapes[0].x;
  let cols = shapes[0].y;
  let r = gid.x + gid.y * 8u * {{ groups_x }}u;
  if (r >= rows) { return; }
  var s = 0;
  for (var c = 0u; c < cols; c++) {
    let v = m[r * cols + c];
    s += v;
    abs_m[r * cols + c] = u32(abs(v));
  }
  row_sums[r] = s;
}
"""
    b = webnn.MLGraphBuilder(ctx)
    m = b.input("m", {"data_type": "int32", "shape": [37, 5]})
    sums, absm = b.wgsl(code, [m], [{"data_type": "int32", "shape": [37]}, {"data_type": "uint32", "shape": [37, 5]}],
                        workgroup_size=(8, 1), dispatch=lambda shapes: (2, -(-shapes[0][0] // 16)),
                        constants={"groups_x": 2}, label="row sums")
    g = b.build({"sums": b.add(sums, b.constant("int32", 1)), "abs": absm})
    mv = np.random.default_rng(5).integers(-1000, 1000, (37, 5)).astype(np.int32)
    out = ctx.compute(g, {"m": mv})
    np.testing.assert_array_equal(out["sums"], mv.astype(np.int64).sum(axis=1) + 1)
    np.testing.assert_array_equal(out["abs"], np.abs(mv.astype(np.int64)))


def test_no_inputs_and_a_single_output_operand(ctx):
    code = """
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  if (gid.x < 100u) { out[gid.x] = gid.x * gid.x; }
}
"""
    b = webnn.MLGraphBuilder(ctx)
    sq = b.wgsl(code, [], {"data_type": "uint32", "shape": [100]}, dispatch=2, label="squares")
    assert isinstance(sq, webnn.MLOperand) and sq.shape == (100,) and sq.data_type == "uint32"
    g = b.build({"y": b.add(sq, b.constant("uint32", 7))})
    np.testing.assert_array_equal(ctx.compute(g, {})["y"], np.arange(100) ** 2 + 7)


def test_compiled_once_through_the_pipeline_cache(ctx, rng):
    def build():
        b = webnn.MLGraphBuilder(ctx)
        x = b.input("x", F32)
        return b.build({"y": b.wgsl(AXPY, [x, x], F32, constants={"k": "0.25"}, label="cached")})

    build()
    misses = ctx._pipelines.misses
    g = build()
    assert ctx._pipelines.misses == misses  # the second build compiled nothing
    xv = data(rng)
    np.testing.assert_allclose(ctx.compute(g, {"x": xv})["y"], xv.astype(np.float64) * 1.25, rtol=1e-6)


def test_opaque_to_the_compiler_and_in_the_arena(ctx):
    """Element-wise neighbours are not fused into or across the node; every pass leaves it
    as it is; its output lives in the arena like any intermediate value."""
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", F32)
    z = b.wgsl(COPY, [b.abs(b.neg(x))], F32, label="opaque")
    y = b.relu(b.add(z, b.constant("float32", 1.0)))
    nodes = list(b._nodes)
    outputs = {"y": y._value}
    node = next(n for n in nodes if n.op == "wgsl")
    for p in PASSES:
        after = p(nodes, outputs, ctx)
        kept = [n for n in after if n.op == "wgsl"]
        assert len(kept) == 1 and kept[0].attrs is node.attrs and kept[0].outputs == node.outputs, p.__name__
        assert [v.id for v in kept[0].inputs] == [v.id for v in node.inputs], p.__name__
    g = b.build({"y": y})
    ops = [s.label for s in g._steps]
    assert len(ops) == 3 and ops[1] == "wgsl ['opaque']", ops  # abs+neg fused, then ours, then add+relu fused
    step = g._steps[1]
    assert g._slot[g._root(step.values[1]).id].kind == "tmp"  # its output is an arena buffer


def test_profiled_under_its_label(ctx, rng):
    from webnn_gpu.profile import profile_graph

    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", F32)
    g = b.build({"y": b.sigmoid(b.wgsl(AXPY, [x, x], F32, constants={"k": "1.0"}, label="my op"))})
    rows = profile_graph(ctx, g, {"x": data(rng)}, repeats=1)
    assert [r["label"] for r in rows] == ["wgsl ['my op']", "sigmoid"] and rows[0]["us"] > 0


def test_example_runs():
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / "custom_op.py")], capture_output=True, text=True,
                          timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.rstrip().endswith("OK"), proc.stdout


# ---------------------------------------------------------------- errors at build()
def _build_error(ctx, code, *, inputs=1, outputs=None, cls=MLTypeError, **kw):
    """Build a graph with ``code`` as a custom node; expect ``cls`` naming the label; then the
    builder must still build an output that does not depend on the bad node."""
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [200]})
    ok = b.neg(x)
    bad = b.wgsl(code, [x] * inputs, outputs or {"data_type": "float32", "shape": [200]}, label="mine", **kw)
    with pytest.raises(cls) as info:
        b.build({"y": bad if isinstance(bad, webnn.MLOperand) else bad[0]})
    msg = str(info.value)
    assert "wgsl ['mine']" in msg and "argument 'code'" in msg, msg
    g = b.build({"ok": ok})  # the builder stays usable
    np.testing.assert_array_equal(ctx.compute(g, {"x": np.ones(200, np.float32)})["ok"], -np.ones(200))
    return msg


def test_wgsl_compile_error_names_label_and_line(ctx):
    msg = _build_error(ctx, COPY.replace("dst[gid.x] = src[gid.x];", "dst[gid.x] = src[gid.x] + nope;"))
    assert "WGSL line 6" in msg and "nope" in msg, msg


@pytest.mark.parametrize("change, expect", [
    (("@group(0) @binding(0) var<storage, read> src", "@group(1) @binding(0) var<storage, read> src"),
     "line 1: binding 'src' is in @group(1)"),
    (("var<storage, read> src", "var<storage, read_write> src"), "line 1: @binding(0) 'src' is input 0"),
    (("var<storage, read_write> dst", "var<storage, read> dst"), "line 2: @binding(1) 'dst' is output 0"),
    (("src: array<f32>", "src: array<i32>"), "expected type array<f32> or array<vec2<f32>> or array<vec4<f32>>, "
                                             "got array<i32>"),
    (("dst: array<f32>", "dst: array<u32>"), "got array<u32>"),
    (("@binding(1) var<storage, read_write> dst", "@binding(0) var<storage, read_write> dst"),
     "@binding(0) is declared twice"),
    (("@binding(1) var<storage, read_write> dst", "@binding(3) var<storage, read_write> dst"),
     "the bindings are 0..1, plus 2 for the optional shapes uniform"),
    (("@binding(1) var<storage, read_write> dst: array<f32>;", "@binding(1) var<storage, read_write> dst: "
      "array<f32>;\n@group(0) @binding(2) var<uniform> s: array<vec4<u32>, 3>;"),
     "expected var<uniform> s: array<vec4<u32>, 4>"),
    (("  dst[gid.x] = src[gid.x];", "  dst[gid.x] = 1.0;"), "'src' is declared but never used"),
    (("fn main(", "fn other("), "expected a compute entry point"),
    (("@workgroup_size(64)", "@workgroup_size(32)"), "@workgroup_size(32, 1, 1) differs from workgroup_size=(64, 1, 1)"),
])
def test_binding_convention_and_types_are_checked_at_build(ctx, change, expect):
    assert change[0] in COPY
    msg = _build_error(ctx, COPY.replace(*change))
    assert expect in msg, msg


def test_a_missing_binding_is_named(ctx):
    code = COPY.replace("@group(0) @binding(1) var<storage, read_write> dst: array<f32>;\n", "").replace(
        "dst[gid.x] = src[gid.x];", "_ = src[gid.x];")
    msg = _build_error(ctx, code)
    assert "output 0 (float32 [200]) needs a declaration at @group(0) @binding(1)" in msg, msg


def test_vector_element_types_follow_the_element_count(ctx, rng):
    vec4 = COPY.replace("array<f32>", "array<vec4<f32>>").replace("200u", "50u")
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [200]})
    g = b.build({"y": b.wgsl(vec4, [x], {"data_type": "float32", "shape": [200]}, label="v4")})
    xv = rng.standard_normal(200).astype(np.float32)
    np.testing.assert_array_equal(ctx.compute(g, {"x": xv})["y"], xv)
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [198]})
    y = b.wgsl(vec4, [x], {"data_type": "float32", "shape": [198]}, label="v4")
    with pytest.raises(MLTypeError, match=r"float32 \[198\] operand: expected type array<f32> or array<vec2<f32>>, "
                                          r"got array<vec4<f32>>"):
        b.build({"y": y})


# ---------------------------------------------------------------- errors at the call
def _call_error(ctx, cls, match, *args, **kwargs):
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [200]})
    args = args or (COPY, [x], {"data_type": "float32", "shape": [200]})
    def sub(a):
        if isinstance(a, str) and a == "X":
            return x
        return [sub(i) for i in a] if isinstance(a, list) else a

    args = tuple(sub(a) for a in args)
    with pytest.raises(cls, match=match):
        b.wgsl(*args, label="mine", **kwargs)
    assert not [n for n in b._nodes if n.op == "wgsl"]  # nothing added
    b.build({"y": b.wgsl(COPY, [x], {"data_type": "float32", "shape": [200]})})  # still usable


@pytest.mark.parametrize("args, kwargs, cls, match", [
    ((COPY.replace("@compute", "{% if %}@compute"), ["X"], F32), {}, MLTypeError, r"template syntax error at line 3"),
    (("{{ missing }}" + COPY, ["X"], F32), {}, MLTypeError, r"'missing' is undefined"),
    ((COPY, ["X"], F32), {"constants": {"inputs": 1}}, MLTypeError, r"argument 'constants'"),
    ((COPY, ["X"], F32), {"constants": {"not a name": 1}}, MLTypeError, r"argument 'constants'"),
    ((COPY, ["X"], F32), {"constants": [1]}, MLTypeError, r"argument 'constants'"),
    (("", ["X"], F32), {}, MLTypeError, r"argument 'code'"),
    ((COPY, "X", F32), {}, MLTypeError, r"argument 'inputs'"),
    ((COPY, [np.zeros(3)], F32), {}, MLTypeError, r"argument 'inputs\[0\]'"),
    ((COPY, ["X"], []), {}, MLTypeError, r"argument 'outputs'"),
    ((COPY, ["X"], {"data_type": "float32"}), {}, MLTypeError, r"argument 'outputs\[0\]'"),
    ((COPY, ["X"], {"data_type": "int8", "shape": [4]}), {}, MLTypeError, r"'outputs\[0\]': expected an operand of "
                                                                           r"data type float32, float16, int32, uint32"),
    ((COPY, ["X"], F32), {"workgroup_size": 0}, MLTypeError, r"argument 'workgroup_size'"),
    ((COPY, ["X"], F32), {"workgroup_size": (1, 2, 3, 4)}, MLTypeError, r"argument 'workgroup_size'"),
    ((COPY, ["X"], F32), {"workgroup_size": 100000}, NotSupportedError, r"maxComputeWorkgroupSizeX"),
    ((COPY, ["X"], F32), {"workgroup_size": (32, 32, 4)}, NotSupportedError, r"maxComputeInvocationsPerWorkgroup"),
    ((COPY, ["X"], F32), {"dispatch": 0}, MLTypeError, r"argument 'dispatch'"),
    ((COPY, ["X"], F32), {"dispatch": 1.5}, MLTypeError, r"argument 'dispatch'"),
    ((COPY, ["X"], F32), {"dispatch": 1 << 20}, NotSupportedError, r"maxComputeWorkgroupsPerDimension"),
    ((COPY, ["X"], F32), {"dispatch": lambda s: 1 / 0}, MLTypeError, r"the function raised ZeroDivisionError"),
    ((COPY, ["X"], F32), {"dispatch": lambda s: "many"}, MLTypeError, r"argument 'dispatch'"),
    ((COPY, ["X"], F32), {"bogus": 1}, MLTypeError, r"unknown option\(s\) 'bogus'"),
])
def test_call_errors(ctx, args, kwargs, cls, match):
    _call_error(ctx, cls, r"wgsl \['mine'\].*" + match, *args, **kwargs)


def test_more_buffers_than_the_device_binds(ctx):
    n = int(ctx.limits["max-storage-buffers-per-shader-stage"])
    _call_error(ctx, NotSupportedError, r"wgsl \['mine'\]: %d inputs and 1 outputs .*maxStorageBuffersPerShaderStage"
                % n, COPY, ["X"] * n, F32)


def test_operand_of_another_builder_and_a_built_builder(ctx):
    other = webnn.MLGraphBuilder(ctx).input("x", F32)
    b = webnn.MLGraphBuilder(ctx)
    with pytest.raises(MLTypeError, match=r"wgsl \['mine'\]: argument 'inputs\[0\]': expected an MLOperand of this "
                                          r"MLGraphBuilder"):
        b.wgsl(AXPY, [other, other], F32, constants={"k": 1}, label="mine")
    x = b.input("x", F32)
    b.build({"y": b.neg(x)})
    with pytest.raises(InvalidStateError, match="already built"):
        b.wgsl(AXPY, [x, x], F32, constants={"k": 1}, label="mine")


def test_float16_operands(ctx):
    """float16 binds as array<f16> (with 'enable f16;') where the adapter has shader-f16, and
    is refused as an operand type where it has not (as for every operator)."""
    code = """enable f16;
@group(0) @binding(0) var<storage, read> x: array<f16>;
@group(0) @binding(1) var<storage, read_write> y: array<f16>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  if (gid.x < 64u) { y[gid.x] = x[gid.x] * 2.0h - 1.0h; }
}
"""
    b = webnn.MLGraphBuilder(ctx)
    desc = {"data_type": "float16", "shape": [64]}
    if "float16" not in ctx.supported_data_types:
        with pytest.raises(NotSupportedError):
            b.input("x", desc)
        return
    x = b.input("x", desc)
    g = b.build({"y": b.wgsl(code, [x], desc, label="half")})
    xv = np.linspace(-4, 4, 64).astype(np.float16)
    np.testing.assert_array_equal(ctx.compute(g, {"x": xv})["y"], (xv * np.float16(2) - np.float16(1)))
