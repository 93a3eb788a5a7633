"""Chained inference: the MLTensor explainer's Fibonacci graph.

    python examples/chained_inference.py [N]

One graph F_n = F_n-1 + F_n-2 is dispatched N-1 times on three rotating tensors, each
dispatch reading the tensors the previous ones wrote, with no read back until the end.
"""

from __future__ import annotations

import sys
import time

import webnn_gpu as webnn
import numpy as np


def fibonacci(ctx, n: int) -> int:
    """F_n computed on the GPU by n-1 chained dispatches and one read (int32, n <= 46)."""
    builder = webnn.MLGraphBuilder(ctx)
    fn1 = builder.input("F_n-1", {"data_type": "int32", "shape": [1]})
    fn2 = builder.input("F_n-2", {"data_type": "int32", "shape": [1]})
    graph = builder.build({"F_n": builder.add(fn1, fn2)})

    descriptors = [
        {"data_type": "int32", "shape": [1], "writable": True},  # to initialise F_0
        {"data_type": "int32", "shape": [1], "writable": True},  # to initialise F_1
        {"data_type": "int32", "shape": [1]},
    ]
    descriptors[n % 3]["readable"] = True  # to read the output
    tensors = [ctx.create_tensor(d) for d in descriptors]
    ctx.write_tensor(tensors[0], np.array([0], np.int32))  # F_0 = 0
    ctx.write_tensor(tensors[1], np.array([1], np.int32))  # F_1 = 1
    for i in range(2, n + 1):
        # Each dispatch depends on tensors written by the previous one.
        ctx.dispatch(graph, {"F_n-1": tensors[(i - 1) % 3], "F_n-2": tensors[(i - 2) % 3]},
                     {"F_n": tensors[i % 3]})
    value = int(ctx.read_tensor(tensors[n % 3])[0])
    for t in tensors:
        t.destroy()
    graph.destroy()
    return value


def main(argv: list[str]) -> int:
    n = int(argv[0]) if argv else 40
    ctx = webnn.ml.create_context()
    start = time.perf_counter()
    value = fibonacci(ctx, n)
    elapsed = time.perf_counter() - start
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    print(f"F_{n} = {value} ({n - 1} chained dispatches, one read, {elapsed * 1e3:.1f} ms); expected {a}")
    ctx.destroy()
    return 0 if value == a else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
