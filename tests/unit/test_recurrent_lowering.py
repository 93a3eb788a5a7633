"""How ``ops.recurrent`` lowers a recurrent layer past the sequence kernel, without a GPU: the
projection's kernel and layout, the step kernel's form (``step4`` with 8 or 4 units, words,
subgroup loads, R in float16, or the scalar kernels) on the adapter profiles that pick them,
and the packed recurrent weight's layout against its definition. The kernels' results are
checked against float64 NumPy by ``tests/ops/test_recurrent.py``."""

from __future__ import annotations

import numpy as np
import pytest

from webnn_gpu._lower import LowerContext
from webnn_gpu.builder import Node, Value
from webnn_gpu.ops import recurrent

LIMITS = {"max-storage-buffer-binding-size": 128 << 20, "max-storage-buffers-per-shader-stage": 10,
          "max-compute-invocations-per-workgroup": 256, "max-compute-workgroup-size-x": 256,
          "max-compute-workgroup-storage-size": 16384, "max-compute-workgroups-per-dimension": 65535}
LAVAPIPE = dict(features=frozenset({"shader-int64", "shader-f16", "subgroup"}), tuning="lane-loop", subgroup=8)
OTHER = dict(features=frozenset({"shader-f16"}), tuning="default", subgroup=0)


def _const(a: np.ndarray) -> Value:
    return Value(str(a.dtype), a.shape, "constant", data=np.ascontiguousarray(a).reshape(-1))


def _lower(hidden, *, steps=3, batch=2, nd=2, isz=6, dt="float32", r=None, r_input=False, adapter=LAVAPIPE):
    """The lowering context after lowering an LSTM (ifgo, every option) of ``hidden`` units."""
    rng = np.random.default_rng(0)
    npdt = np.dtype(dt)
    if r is None:
        r = rng.uniform(-0.1, 0.1, (nd, 4 * hidden, hidden)).astype(npdt)
    x = Value(dt, (steps, batch, isz), "input")
    vr = Value(dt, r.shape, "input") if r_input else _const(r)
    ins = [x, _const(rng.uniform(-1, 1, (nd, 4 * hidden, isz)).astype(npdt)), vr,
           _const(rng.uniform(-1, 1, (nd, 4 * hidden)).astype(npdt)), None, None, None, None]
    outs = [Value(dt, (nd, batch, hidden), "op") for _ in range(2)] + [Value(dt, (steps, nd, batch, hidden), "op")]
    node = Node("lstm", ins, outs, dict(steps=steps, hidden_size=hidden, return_sequence=True,
                                        direction="both" if nd == 2 else "forward", layout="ifgo",
                                        activations=["sigmoid", "tanh", "tanh"]))
    lc = LowerContext(node, adapter["features"], LIMITS, tuning=adapter["tuning"], subgroup=adapter["subgroup"])
    recurrent.lower_recurrent(node, lc)
    return lc, r


def _steps(lc, template):
    return [s for s in lc.steps if s.template == template]


@pytest.mark.parametrize("hidden, adapter, form, units, sg", [
    (160, LAVAPIPE, "vec4<u64>", 8, False),   # hidden % 8 == 0, not a multiple of 8 x 8 lanes
    (256, LAVAPIPE, "vec4<u64>", 8, True),    # 256 = 4 x 64: the subgroup's shared loads
    (164, LAVAPIPE, "vec2<u64>", 4, False),   # hidden % 8 != 0: 4 units a vec2<u64>
    (160, OTHER, "vec4<f32>", 4, False),      # no shader-int64 / another profile: vec4s of f32
])
def test_step_form_by_adapter_and_size(hidden, adapter, form, units, sg):
    lc, _ = _lower(hidden, adapter=adapter)
    templates = [s.template for s in lc.steps]
    assert templates[0] == "matmul/tile.wgsl" and "recurrent/project.wgsl" not in templates
    steps = _steps(lc, "recurrent/step4.wgsl")
    assert len(steps) == 3 and len({s.wgsl for s in steps}) == 1  # one pipeline for every step
    text = steps[0].wgsl
    assert f"array<{form}>;" in text
    assert ("subgroupBroadcast" in text) == sg
    assert steps[0].values[1].shape == (3 * 2, 2 * 4 * hidden)  # proj: [T * B, D * GH] (proj_tbd)
    # one invocation per (direction, batch rows, U units): the batch of 2 in one invocation
    inv = 2 * hidden // units
    wg = recurrent._step_workgroup(inv)
    assert steps[0].groups[0] * wg >= inv > (steps[0].groups[0] - 1) * wg


@pytest.mark.parametrize("hidden, r_input", [(162, False), (160, True)])
def test_scalar_step_kernels_where_step4_does_not_apply(hidden, r_input):
    """hidden % 4 != 0, or a recurrent weight computed at run time: lstm_step, R as given."""
    lc, _ = _lower(hidden, r_input=r_input)
    assert len(_steps(lc, "recurrent/lstm_step.wgsl")) == 3 and not _steps(lc, "recurrent/step4.wgsl")


def test_float16_weight_in_words_stays_float16():
    """A float16 graph's R is packed in float16 (four values a u64 component); a float32 R
    whose values are all float16 values too; one value off (a near miss) keeps float32."""
    lc, r = _lower(160, dt="float16")
    (packed,) = {id(s.values[2]): s.values[2] for s in _steps(lc, "recurrent/step4.wgsl")}.values()
    assert packed.data_type == "float16" and "array<vec2<u64>>;" in _steps(lc, "recurrent/step4.wgsl")[0].wgsl
    assert _steps(lc, "elementwise/map4.wgsl") or _steps(lc, "elementwise/map.wgsl")  # x cast for the gemm
    r16 = r.astype(np.float32)
    lc, _ = _lower(160, r=r16)
    assert _steps(lc, "recurrent/step4.wgsl")[0].values[2].data_type == "float16"
    r16[1, 3, 5] = np.float32(0.1)  # not a float16 value
    lc, _ = _lower(160, r=r16)
    assert _steps(lc, "recurrent/step4.wgsl")[0].values[2].data_type == "float32"
    lc, _ = _lower(160, r=r.astype(np.float32), adapter=OTHER)  # no words: f32 vec4s
    assert _steps(lc, "recurrent/step4.wgsl")[0].values[2].data_type == "float32"


@pytest.mark.parametrize("hidden, units", [(160, 8), (164, 4), (256, 8), (24, 4)])
def test_packed_weight_layout(hidden, units):
    """element [d, qb, k, g, l, e] of the packed R is R[d, g H + U (qb L + l) + e, k]."""
    rng = np.random.default_rng(1)
    g, nd = 4, 2
    r = rng.standard_normal((nd, g * hidden, hidden)).astype(np.float32)
    block = recurrent._step_block(hidden, units)
    assert (hidden // units) % block == 0
    packed = recurrent._step_pack(_const(r), units, block)
    p = packed.data.reshape(nd, hidden // (units * block), hidden, g, block, units)
    for d, qb, k, gi, li, e in zip(*(rng.integers(0, n, 50) for n in p.shape)):
        assert p[d, qb, k, gi, li, e] == r[d, gi * hidden + units * (qb * block + li) + e, k]


def test_small_layers_keep_the_sequence_kernel():
    """At most SEQUENCE_MAX_MACS multiply-adds a step (64 units): the sequence kernel."""
    lc, _ = _lower(64)
    assert [s.template for s in lc.steps][-1] == "recurrent/sequence.wgsl"
    assert not _steps(lc, "recurrent/step4.wgsl")


def test_step_rows_and_workgroups():
    assert [recurrent._step_rows(b) for b in (1, 2, 3, 4, 5, 6, 8, 12)] == [1, 2, 3, 4, 1, 3, 4, 4]
    assert [recurrent._step_workgroup(n) for n in (8, 64, 128, 256, 512, 4096)] == [8, 8, 16, 32, 64, 64]


def test_subgroup_loads_take_whole_subgroups_of_16_lanes():
    """At 512 bits llvmpipe's subgroups have 16 lanes: a step of 32 invocations (256 units of one
    direction, batch 1, 8 units each) must not take workgroups of 8, whose subgroups would
    broadcast from inactive lanes (a wrong result, found in review); its workgroup is a multiple
    of 16 wherever the kernel shares its loads."""
    import re

    wide = dict(LAVAPIPE, subgroup=16)
    for hidden, nd, batch in ((256, 1, 1), (256, 2, 1), (384, 1, 1), (256, 2, 16)):
        lc, _ = _lower(hidden, nd=nd, batch=batch, adapter=wide)
        text = _steps(lc, "recurrent/step4.wgsl")[0].wgsl
        assert "subgroupBroadcast" in text
        size = int(re.search(r"@workgroup_size\((\d+)", text).group(1))
        assert size % 16 == 0, (hidden, nd, batch, size)
    assert [recurrent._step_workgroup(n, 16) for n in (8, 32, 128, 256, 4096)] == [16, 16, 16, 32, 64]
