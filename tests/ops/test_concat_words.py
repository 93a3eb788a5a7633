"""The vec4 concat's memory words (``layout/concat_vec4.wgsl`` with ``x64``): 8 elements moved per
access as u64 words, and the side map's per-channel operands one word per operand, bit-identical
to the same kernel moving vec4s of the storage type (``WEBNN_GPU_FORCE_CONCAT_WORDS=vec4``) and
against float64 NumPy; where the rule (``webnn_gpu.ops.movement.concat_words``) must keep vec4s."""

from __future__ import annotations

import numpy as np
import pytest

from helpers import kernel_steps, run_graph


def _concat_text(ctx, build, inputs):
    """The WGSL of the graph's first ``layout/concat_vec4.wgsl`` kernel."""
    return next(s.wgsl for s in kernel_steps(ctx, build, inputs) if s.template == "layout/concat_vec4.wgsl")


def _words_device(ctx):
    return ctx._tuning == "lane-loop" and "shader-int64" in ctx.features


def _both_forms(ctx, monkeypatch, build, inputs, words: bool, force_words: str = ""):
    """The graph's outputs with words (the default, or ``force_words="words"`` where the default
    keeps vec4s) and with vec4s forced, checked bit-identical; whether the words form's kernel
    moves words is ``words`` (on a device that has them)."""
    outs = {}
    for force in ("vec4", force_words):
        monkeypatch.setenv("WEBNN_GPU_FORCE_CONCAT_WORDS", force)
        text = _concat_text(ctx, build, inputs)
        assert ("u64" in text) == (force != "vec4" and words and _words_device(ctx)), text
        outs["vec4" if force == "vec4" else "words"] = run_graph(ctx, build, inputs)
    for name, got in outs["words"].items():
        np.testing.assert_array_equal(got.view(np.uint8), outs["vec4"][name].view(np.uint8))
    return outs["words"]


def _bn_relu(b, v, s, t):
    return b.relu(b.add(b.mul(v, b.constant(s)), b.constant(t)))


@pytest.mark.parametrize("dt,tol", [("float32", 1e-6), ("float16", 2e-3)])
@pytest.mark.parametrize("c0,c1,words", [
    (16, 8, True),    # a dense block's step: both slabs and the channels multiples of 8
    (8, 32, True),
    (12, 4, False),   # slabs of 12 and 4 channels: vec4s
    (16, 4, False),   # channels 20: the map's operands are not words of 8 channels
])
def test_a_dense_step_stores_its_map_as_words(ctx, rng, monkeypatch, dt, tol, c0, c1, words):
    """concat(x, y) read by a scale, shift and relu and by a second concat: the concat stores both
    (fuse_concat_map), its per-channel scale and shift loaded as words."""
    npdt = np.dtype(dt)
    x = rng.standard_normal((1, 5, 7, c0)).astype(npdt)
    y = rng.standard_normal((1, 5, 7, c1)).astype(npdt)
    c = c0 + c1
    s, t = rng.standard_normal((c,)).astype(npdt), rng.standard_normal((1, 1, 1, c)).astype(npdt)

    def build(b, o):
        v = b.concat([o["x"], o["y"]], 3)
        h = _bn_relu(b, v, s, t)
        return {"w": b.concat([v, h], 3)}

    got = _both_forms(ctx, monkeypatch, build, {"x": x, "y": y}, words)["w"]
    v = np.concatenate([x, y], 3).astype(np.float64)
    want = np.concatenate([v, np.maximum(v * s.astype(np.float64) + t.astype(np.float64), 0)], 3)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol)


@pytest.mark.parametrize("dt,tol", [("float32", 1e-6), ("float16", 2e-3)])
def test_a_map_the_concat_alone_feeds_as_words(ctx, rng, monkeypatch, dt, tol):
    """Three parts, a batch of 3, the chain the concat's only reader (its one output)."""
    npdt = np.dtype(dt)
    parts = {f"p{i}": rng.standard_normal((3, 2, 3, c)).astype(npdt) for i, c in enumerate((8, 24, 16))}
    s = rng.standard_normal((48,)).astype(npdt)

    def build(b, o):
        return {"z": b.relu(b.mul(b.concat([o[n] for n in parts], 3), b.constant(s)))}

    got = _both_forms(ctx, monkeypatch, build, parts, True)["z"]
    want = np.maximum(np.concatenate(list(parts.values()), 3).astype(np.float64) * s.astype(np.float64), 0)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol)


def test_an_operand_read_per_element_with_words(ctx, rng, monkeypatch):
    """concat([class token, patches], 1) + a position embedding (read per element, not per channel:
    no operand words, so words only when forced)."""
    cls = rng.standard_normal((1, 1, 8)).astype(np.float32)
    pos = rng.standard_normal((6, 8)).astype(np.float32)
    x = rng.standard_normal((1, 5, 8)).astype(np.float32)

    def build(b, o):
        return {"z": b.add(b.concat([b.constant(cls), o["x"]], 1), b.constant(pos))}

    got = _both_forms(ctx, monkeypatch, build, {"x": x}, True, force_words="words")["z"]
    np.testing.assert_allclose(got, np.concatenate([cls, x], 1).astype(np.float64) + pos, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("dt", ["float32", "int32", "float16"])
@pytest.mark.parametrize("shapes,axis,words", [
    ([(2, 3, 8), (2, 5, 8)], 1, True),           # along a middle axis: slabs of 24 and 40
    ([(3, 2, 8), (3, 2, 16)], 2, True),          # the last axis, slabs of 8 and 16 elements
    ([(3, 2, 4), (3, 2, 12)], 2, False),         # a slab of 4: vec4s
    ([(2, 2, 4), (2, 1, 4)], 1, False),          # a slab of 4 elements: vec4s
    ([(1, 4, 6), (3, 4, 6)], 0, True),           # along the first axis: slabs of 24 and 72
])
def test_plain_concat_words_are_exact(ctx, rng, monkeypatch, dt, shapes, axis, words):
    """A concat with no map (words only when forced: they measured slower than vec4s there):
    its words are the bits of 8 elements, any 32-bit type or float16."""
    arrays = {f"x{i}": (rng.integers(-99, 99, s) if dt == "int32" else rng.standard_normal(s)).astype(dt)
              for i, s in enumerate(shapes)}

    def build(b, o):
        return {"y": b.concat([o[n] for n in arrays], axis)}

    got = _both_forms(ctx, monkeypatch, build, arrays, words, force_words="words")["y"]
    np.testing.assert_array_equal(got, np.concatenate(list(arrays.values()), axis))
    monkeypatch.delenv("WEBNN_GPU_FORCE_CONCAT_WORDS")
    assert "u64" not in _concat_text(ctx, build, arrays)


def test_the_words_knob(ctx, rng, monkeypatch):
    """WEBNN_GPU_FORCE_CONCAT_WORDS takes vec4 or words; any other value is an error (raised at
    build, wrapped in the engine's error)."""
    arrays = {"a": rng.standard_normal((2, 8)).astype(np.float32), "b": rng.standard_normal((2, 8)).astype(np.float32)}
    monkeypatch.setenv("WEBNN_GPU_FORCE_CONCAT_WORDS", "u32")
    with pytest.raises(Exception, match="CONCAT_WORDS"):
        run_graph(ctx, lambda b, o: {"y": b.concat([o["a"], o["b"]], 1)}, arrays)


def test_the_words_rule_near_misses(monkeypatch):
    """movement.concat_words without a GPU: words on the lane-loop profile with shader-int64, every
    slab a multiple of 8 and, with a map, its channels a multiple of 8 and its per-channel operands
    C values of the output's type read at the channel alone; anything else keeps vec4s."""
    from types import SimpleNamespace as NS

    from webnn_gpu.ops.movement import concat_words

    def val(shape, dt="float32"):
        return NS(shape=shape, data_type=dt, size=int(np.prod(shape)))

    def cat(c0, c1, side_parts=None):
        attrs = {"axis": 3} if side_parts is None else {"axis": 3, "side_parts": side_parts}
        return NS(inputs=[val((1, 2, 3, c0)), val((1, 2, 3, c1))], outputs=[val((1, 2, 3, c0 + c1))], attrs=attrs)

    def side(c, dt="float32", chan=True, chan_only=True):
        return NS(chan=chan, chan_only=chan_only, operands=[("sd0", val((c,), dt)), ("sd1", val((1, 1, 1, c), dt))],
                  chan_operands=["sd0", "sd1"] if chan else [])

    f = frozenset({"shader-int64"})
    assert concat_words(cat(16, 8), None, "lane-loop", f) == (False, [])                 # plain: vec4s
    assert concat_words(cat(16, 8), side(24), "lane-loop", f) == (True, ["sd0", "sd1"])
    assert concat_words(cat(16, 8), side(24, chan=False), "lane-loop", f) == (False, [])  # no operand words
    assert concat_words(cat(12, 4), None, "lane-loop", f) == (False, [])                 # slabs of 12 and 4
    assert concat_words(cat(16, 4), side(20), "lane-loop", f) == (False, [])             # 20 channels
    assert concat_words(cat(16, 8), side(24, "float16"), "lane-loop", f) == (False, [])  # operands of another type
    assert concat_words(cat(16, 8), side(24, chan_only=False), "lane-loop", f) == (False, [])
    assert concat_words(cat(16, 8), side(12), "lane-loop", f) == (False, [])             # operands of 12 values
    assert concat_words(cat(16, 8), None, "default", f) == (False, [])
    assert concat_words(cat(16, 8), None, "lane-loop", frozenset()) == (False, [])
    monkeypatch.setenv("WEBNN_GPU_FORCE_CONCAT_WORDS", "words")
    assert concat_words(cat(16, 8), None, "lane-loop", f) == (True, [])
    assert concat_words(cat(16, 8), side(24, chan=False), "lane-loop", f) == (True, [])
    assert concat_words(cat(12, 4), None, "lane-loop", f) == (False, [])
    monkeypatch.setenv("WEBNN_GPU_FORCE_CONCAT_WORDS", "vec4")
    assert concat_words(cat(16, 8), None, "lane-loop", f) == (False, [])
    assert concat_words(cat(16, 8), side(24), "lane-loop", f) == (False, [])
