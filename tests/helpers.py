"""Test helpers: run a graph both ways (compute and the tensor timeline) and compare."""

from __future__ import annotations

import numpy as np

import webnn_gpu as webnn


def run_graph(ctx, build, inputs: dict, *, tensor_path: bool = True) -> dict:
    """Build a graph with ``build(builder, operands) -> {name: MLOperand}`` and run it.

    ``inputs`` maps names to arrays (their dtype/shape make the input descriptors). The
    graph runs through ``ctx.compute`` and, unless ``tensor_path`` is False, through
    ``create_tensor`` / ``write_tensor`` / ``dispatch`` / ``read_tensor``; both results must be
    bit-identical. Returns the compute() outputs.
    """
    b = webnn.MLGraphBuilder(ctx)
    ops = {
        name: b.input(name, {"data_type": webnn._dtypes.from_numpy(a.dtype), "shape": list(a.shape)})
        for name, a in inputs.items()
    }
    outs = build(b, ops)
    graph = b.build(outs)
    result = ctx.compute(graph, {n: inputs[n] for n in graph.inputs})
    if tensor_path:
        ins = {}
        for name in graph.inputs:
            a = inputs[name]
            t = ctx.create_tensor({"data_type": webnn._dtypes.from_numpy(a.dtype), "shape": list(a.shape),
                                   "writable": True})
            ctx.write_tensor(t, a)
            ins[name] = t
        outs_t = {n: ctx.create_tensor({**d, "readable": True}) for n, d in graph.outputs.items()}
        ctx.dispatch(graph, ins, outs_t)
        for name, t in outs_t.items():
            got = ctx.read_tensor(t)
            np.testing.assert_array_equal(
                got.reshape(-1).view(np.uint8), result[name].reshape(-1).view(np.uint8), err_msg=f"tensor path differs for {name!r}"
            )
            t.destroy()
        for t in ins.values():
            t.destroy()
    graph.destroy()
    return result


def assert_close(actual, expected, *, atol: float, rtol: float = 0.0, err_msg: str = "") -> None:
    """Compare to a float64 reference: NaNs must match, infinities must match exactly."""
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    assert actual.shape == expected.shape, f"shape {actual.shape} != {expected.shape} {err_msg}"
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(actual.astype(np.float64), expected.astype(np.float64), atol=atol, rtol=rtol,
                                   equal_nan=True, err_msg=err_msg)


def check_accumulated(got, ref, absref, k, dtype, what: str = "") -> None:
    """``got`` within a float32 accumulation of ``k`` products of ``ref`` (float64, with
    ``absref`` the same sum of magnitudes), plus the output's rounding (float16 included)."""
    got = np.asarray(got).astype(np.float64)
    assert got.shape == ref.shape, (what, got.shape, ref.shape)
    bound = 4 * k * 2.0**-24 * absref + 2.0**-24 * np.abs(ref) + 1e-30
    if np.dtype(dtype) == np.float16:
        bound = bound + 2.0**-11 * np.abs(ref) + 2.0**-24
    err = np.abs(got - ref)
    bad = ~(err <= bound)
    assert not bad.any(), f"{what}: {bad.sum()}/{bad.size} off, worst {err[bad].max():.3e}"


def same_padding(hw: int, win: int, stride: int = 1, dil: int = 1) -> tuple:
    """TensorFlow's "same" padding (top, bottom, left, right) of a square ``hw`` image and
    ``win`` window: the extra row or column at the end."""
    out = -(-hw // stride)
    t = max((out - 1) * stride + (win - 1) * dil + 1 - hw, 0)
    return (t // 2, t - t // 2, t // 2, t - t // 2)


def check_bounds(got: dict, refs: dict) -> None:
    """Each output ``got[name]`` within its elementwise bound: ``refs[name]`` = (float64
    reference, bound array of its shape)."""
    for name, (ref, bound) in refs.items():
        g = np.asarray(got[name]).astype(np.float64)
        assert g.shape == ref.shape, (name, g.shape, ref.shape)
        err = np.abs(g - ref)
        bad = ~(err <= bound)
        assert not bad.any(), (f"{name}: {bad.sum()} of {bad.size} off; worst {err[bad].max():.3e} vs "
                               f"{bound[bad][np.argmax(err[bad])]:.3e}")


def ulp_distance(actual, expected) -> np.ndarray:
    """ULP distance between float32 or float16 arrays (as WPT computes it)."""
    actual = np.asarray(actual)
    expected = np.asarray(expected).astype(actual.dtype)
    bits = {np.dtype(np.float32): np.int32, np.dtype(np.float16): np.int16}[actual.dtype]
    a = actual.view(bits).astype(np.int64)
    e = expected.view(bits).astype(np.int64)
    top = np.int64(np.iinfo(bits).min)
    a = np.where(a < 0, top - a, a)
    e = np.where(e < 0, top - e, e)
    return np.abs(a - e)


def kernel_steps(ctx, build, inputs: dict) -> list:
    """The kernel steps a graph compiles to, in order (each with its ``template`` and ``wgsl``):
    ``build(builder, operands)`` and ``inputs`` as for :func:`run_graph` (the inputs give only
    the descriptors)."""
    b = webnn.MLGraphBuilder(ctx)
    g = b.build(build(b, {n: b.input(n, {"data_type": webnn._dtypes.from_numpy(a.dtype), "shape": list(a.shape)})
                          for n, a in inputs.items()}))
    steps = [s for s in g._steps if hasattr(s, "template")]
    g.destroy()
    return steps


def kernel_templates(ctx, build, inputs: dict) -> list[str]:
    """The templates of the kernels a graph compiles to, in order (see :func:`kernel_steps`)."""
    return [s.template for s in kernel_steps(ctx, build, inputs)]
