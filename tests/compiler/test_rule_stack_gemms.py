"""The ``stack_shared_gemms`` rule: on hand-made IR (no GPU), checked by a float64 evaluator of
the IR, near misses included; and on the GPU against float64 NumPy (an unrolled
``TimeDistributed(Dense)``: one gemm instead of a slice and a gemm per row and a concat)."""

from __future__ import annotations

import numpy as np
import pytest
from _ireval import checked_rewrite
from _irb import IR
from helpers import kernel_templates, run_graph

from webnn_gpu.compiler.rules.linalg import stack_shared_gemms

T, K, N = 4, 6, 5


def _unrolled(ir, *, order=None, other_b=None, read_elsewhere=False, output_row=False):
    """x [T, 1, K] -> per row: slice, reshape [1, K], gemm(B^T, c) with a relu epilogue,
    reshape [1, 1, N] -> concat along axis 0 -> [T, 1, N]; (outputs, the gemm values)."""
    x = ir.op("relu", [ir.input((T, 1, K))])
    b = ir.const(np.linspace(-1, 1, N * K).reshape(N, K))
    c = ir.const(np.linspace(0.5, -0.5, N))
    outs, extra = [], {}
    for i in (order or range(T)):
        starts = [i, 0, 0]
        s = ir.op("slice", [x], (1, 1, K), starts=starts, strides=[1, 1, 1])
        r = ir.op("reshape", [s], (1, K))
        g = ir.op("gemm", [r, other_b if (other_b is not None and i == 2) else b, c], (1, N), b_transpose=True,
                  epilogue=[{"op": "relu"}])
        if read_elsewhere and i == 1:
            extra["z"] = ir.op("neg", [g])
        if output_row and i == 1:
            extra["g"] = g
        outs.append(ir.op("reshape", [g], (1, 1, N)))
    return {"y": ir.op("concat", outs, (T, 1, N), axis=0), **extra}



def test_rows_times_one_matrix_become_one_gemm():
    ir = IR()
    outputs = _unrolled(ir)
    for n in ir.nodes:  # (the evaluator applies no epilogue: drop it for the float64 check)
        n.attrs.pop("epilogue", None)
    new = checked_rewrite(stack_shared_gemms, ir, outputs, rtol=1e-12, atol=1e-12)
    assert [n.op for n in new] == ["relu", "reshape", "gemm", "reshape"]
    assert new[2].inputs[0].shape == (T, K) and new[2].outputs[0].shape == (T, N)


@pytest.mark.parametrize("case", ["rows out of order", "another matrix", "a row read elsewhere", "a row an output",
                                  "other epilogues"])
def test_near_misses_stay_unrolled(case):
    ir = IR()
    kw = {"rows out of order": dict(order=[0, 2, 1, 3]),
          "another matrix": dict(other_b=ir.const(np.ones((N, K)))),
          "a row read elsewhere": dict(read_elsewhere=True), "a row an output": dict(output_row=True)}.get(case, {})
    outputs = _unrolled(ir, **kw)
    if case == "other epilogues":
        next(n for n in ir.nodes if n.op == "gemm").attrs["epilogue"] = [{"op": "sigmoid"}]
    assert stack_shared_gemms(list(ir.nodes), outputs) == ir.nodes


def test_on_the_gpu_an_unrolled_dense_layer_is_one_kernel(ctx, rng):
    x = rng.standard_normal((T, 1, K)).astype(np.float32)
    b = rng.standard_normal((N, K)).astype(np.float32)
    c = rng.standard_normal(N).astype(np.float32)

    def build(bd, ops):
        bb, cc = bd.constant(b), bd.constant(c)
        rows = []
        for i in range(T):
            r = bd.reshape(bd.slice(ops["x"], [i, 0, 0], [1, 1, K]), [1, K])
            g = bd.sigmoid(bd.gemm(r, bb, c=cc, b_transpose=True))
            rows.append(bd.reshape(g, [1, 1, N]))
        return {"y": bd.concat(rows, 0)}

    want = 1 / (1 + np.exp(-(x.astype(np.float64).reshape(T, K) @ b.T.astype(np.float64) + c)))
    np.testing.assert_allclose(run_graph(ctx, build, {"x": x})["y"], want.reshape(T, 1, N), rtol=1e-5, atol=1e-6)
    assert len(kernel_templates(ctx, build, {"x": x})) == 1
