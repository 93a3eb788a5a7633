"""Quick start: build a small graph, run it with compute() and on the tensor timeline.

    python examples/quickstart.py

Prints the result and checks it against NumPy.
"""

from __future__ import annotations

import numpy as np

import webnn_gpu as webnn


def main() -> int:
    ctx = webnn.ml.create_context()
    print(f"adapter: {ctx.adapter_info.get('device')} ({ctx.adapter_info.get('backend_type')})")

    # y = relu(a * x + b), with x an input and a, b constants.
    builder = webnn.MLGraphBuilder(ctx)
    x = builder.input("x", {"data_type": "float32", "shape": [2, 4]})
    a = builder.constant(np.array([0.5, -1.0, 2.0, 1.5], dtype=np.float32))
    b = builder.constant("float32", 0.25)
    y = builder.relu(builder.add(builder.mul(a, x), b), label="activation")
    print(f"y: {y.data_type} {list(y.shape)}")
    graph = builder.build({"y": y})

    data = np.arange(-4, 4, dtype=np.float32).reshape(2, 4)
    expected = np.maximum(np.array([0.5, -1.0, 2.0, 1.5]) * data.astype(np.float64) + 0.25, 0)

    # 1. Immediate: compute() uploads, runs and reads back.
    out = ctx.compute(graph, {"x": data})["y"]
    print("compute():", out.tolist())

    # 2. Timeline: tensors stay on the GPU; write, dispatch and read are queued in order.
    t_in = ctx.create_tensor({"data_type": "float32", "shape": [2, 4], "writable": True})
    t_out = ctx.create_tensor({"data_type": "float32", "shape": [2, 4], "readable": True})
    ctx.write_tensor(t_in, data)
    ctx.dispatch(graph, {"x": t_in}, {"y": t_out})
    out2 = ctx.read_tensor(t_out)
    print("dispatch():", out2.tolist())

    ok = np.allclose(out, expected, rtol=1e-6) and np.array_equal(out, out2)
    print("matches NumPy:", ok)
    for obj in (t_in, t_out, graph, ctx):
        obj.destroy()
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
