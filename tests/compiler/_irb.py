"""Hand-made graph IR for GPU-free rule tests (no context, no builder)."""

from __future__ import annotations

import numpy as np

from webnn_gpu._ir import Node, Value


class IR:
    """Records nodes like the builder does, with shapes given by the test."""

    def __init__(self, data_type: str = "float32"):
        self.dt = data_type
        self.nodes: list[Node] = []

    def input(self, shape) -> Value:
        return Value(self.dt, tuple(shape), "input", name=f"in{len(self.nodes)}")

    def const(self, data, shape=None) -> Value:
        arr = np.asarray(data, dtype=np.float16 if self.dt == "float16" else np.float32)
        shape = tuple(arr.shape if shape is None else shape)
        return Value(self.dt, shape, "constant", data=arr.reshape(-1).copy())

    def op(self, op: str, inputs, shape=None, label: str = "", **attrs) -> Value:
        """Append ``op`` over ``inputs``; its output has ``shape`` (default: the broadcast of
        the inputs' shapes)."""
        if shape is None:
            shape = np.broadcast_shapes(*[tuple(v.shape) for v in inputs])
        out = Value(self.dt, tuple(shape), "op")
        node = Node(op, list(inputs), [out], attrs, label or op)
        out.producer = node
        self.nodes.append(node)
        return out

    def mean(self, x: Value, axes) -> Value:
        shape = tuple(1 if a in axes else d for a, d in enumerate(x.shape))
        return self.op("reduce_mean", [x], shape, axes=list(axes), keep=True)

    # ------------------------------------------------------------ shapes as the builder makes them
    def conv(self, x: Value, filt: Value, *, groups: int = 1, pad: int = 0, stride: int = 1, bias=None) -> Value:
        """conv2d of an NHWC ``x`` with an OHWI ``filt`` (the builder's attributes)."""
        n, h, w, _ = x.shape
        o, kh, kw, _ = filt.shape
        oh, ow = (h + 2 * pad - kh) // stride + 1, (w + 2 * pad - kw) // stride + 1
        return self.op("conv2d", [x, filt] + ([bias] if bias is not None else []), (n, oh, ow, o),
                       padding=[pad] * 4, strides=[stride] * 2, dilations=[1, 1], groups=groups,
                       input_layout="nhwc", filter_layout="ohwi")

    def pool(self, x: Value, window=None) -> Value:
        """average_pool2d of an NHWC ``x`` (global without ``window``)."""
        n, h, w, c = x.shape
        win = [h, w] if window is None else list(window)
        return self.op("average_pool2d", [x], (n, h - win[0] + 1, w - win[1] + 1, c), window=win,
                       padding=[0, 0, 0, 0], strides=[1, 1], dilations=[1, 1], layout="nhwc")

    def up2(self, x: Value) -> Value:
        """An exact 2x bilinear upsampling of an NHWC ``x``."""
        n, h, w, c = x.shape
        return self.op("resample2d", [x], (n, 2 * h, 2 * w, c), mode="linear", axes=[1, 2], scales=[2.0, 2.0])

    def filt(self, o: int, k: int, i: int) -> Value:
        """A constant OHWI filter."""
        return self.const(np.linspace(-1, 1, o * k * k * i).reshape(o, k, k, i))
