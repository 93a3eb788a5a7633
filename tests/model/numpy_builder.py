"""A NumPy float64 stand-in for ``MLGraphBuilder`` (test-only), following the WebNN spec.

It lets the TFLite mapping be checked end to end against LiteRT without a GPU: if the
loader's calls run through this builder and match LiteRT, the mapping (padding, layouts,
options) is right; a mismatch on the GPU is then the engine's. Only the operators and
options the loader emits are implemented, each in the plainest NumPy, following the
WebNN spec's definitions (e.g. average_pool2d counts only unpadded cells, resample2d
"linear" is half-pixel-centred with edge clamping). It records every call so unit tests
can also assert on the exact arguments.
"""

from __future__ import annotations

from typing import Any

import numpy as np

_FILTER_TO_OHWI = {  # permutation that turns a conv2d filter into [O, H, W, I/groups]
    "ohwi": (0, 1, 2, 3), "oihw": (0, 2, 3, 1), "hwio": (3, 0, 1, 2), "ihwo": (3, 1, 2, 0),
}
_TRANSPOSE_FILTER_TO_OHWI = {"ohwi": (0, 1, 2, 3), "iohw": (1, 2, 3, 0), "hwoi": (2, 0, 1, 3)}


class Operand:
    def __init__(self, builder: NumpyBuilder, shape: tuple[int, ...], data_type: str, fn: Any, op: str) -> None:
        self.builder, self.shape, self.data_type, self.fn, self.op = builder, tuple(shape), data_type, fn, op


class Graph:
    def __init__(self, outputs: dict[str, Operand]) -> None:
        self.outputs = outputs

    def compute(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        memo: dict[int, np.ndarray] = {}

        def ev(o: Operand) -> np.ndarray:
            key = id(o)
            if key not in memo:
                memo[key] = o.fn(ev, inputs)
            return memo[key]

        return {name: ev(o) for name, o in self.outputs.items()}


def _windows(xp: np.ndarray, kh: int, kw: int, out_hw: tuple[int, int], strides, dilations):
    """Yield (i, j, view) where view = xp[:, i*dh + s*oh, j*dw + s*ow, :] (NHWC)."""
    oh, ow = out_hw
    for i in range(kh):
        for j in range(kw):
            r0, c0 = i * dilations[0], j * dilations[1]
            yield i, j, xp[:, r0:r0 + (oh - 1) * strides[0] + 1:strides[0],
                           c0:c0 + (ow - 1) * strides[1] + 1:strides[1], :]


class NumpyBuilder:
    """Records calls (``self.calls``: list of (method, kwargs)) and evaluates in float64."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def _op(self, op_name: str, shape, data_type: str, fn, **record) -> Operand:
        self.calls.append((op_name, record))
        return Operand(self, shape, data_type, fn, op_name)

    # -- sources
    def input(self, name: str, desc: dict) -> Operand:
        shape = tuple(desc["shape"])
        return self._op("input", shape, desc["data_type"],
                        lambda ev, inp: np.asarray(inp[name], np.float64).reshape(shape), name=name, desc=desc)

    def constant(self, desc: dict, value: np.ndarray) -> Operand:
        arr = np.asarray(value)
        assert list(arr.shape) == list(desc["shape"]), (arr.shape, desc)
        assert arr.dtype == np.dtype(desc["data_type"]), (arr.dtype, desc)
        data = arr.astype(np.float64) if arr.dtype.kind == "f" else arr.copy()
        return self._op("constant", arr.shape, desc["data_type"], lambda ev, inp: data, desc=desc)

    def build(self, outputs: dict[str, Operand]) -> Graph:
        return Graph(outputs)

    # -- convolutions
    def conv2d(self, x, w, *, padding=(0, 0, 0, 0), strides=(1, 1), dilations=(1, 1), groups=1,
               input_layout="nchw", filter_layout="oihw", bias=None, label=""):
        assert input_layout == "nhwc", "only nhwc is used by the loader"
        fw = np.zeros(w.shape)  # shape only
        o, kh, kw, cg = np.transpose(fw, _FILTER_TO_OHWI[filter_layout]).shape
        n, h, wd, c = x.shape
        assert cg * groups == c and o % groups == 0, (x.shape, w.shape, groups)
        t, b_, l_, r_ = padding
        oh = (h + t + b_ - ((kh - 1) * dilations[0] + 1)) // strides[0] + 1
        ow = (wd + l_ + r_ - ((kw - 1) * dilations[1] + 1)) // strides[1] + 1

        def fn(ev, inp):
            xv = ev(x)
            wv = np.transpose(ev(w), _FILTER_TO_OHWI[filter_layout])  # [O, KH, KW, Cg]
            xp = np.pad(xv, ((0, 0), (t, b_), (l_, r_), (0, 0)))
            og = o // groups
            wg = wv.reshape(groups, og, kh, kw, cg)
            out = np.zeros((n, oh, ow, groups, og))
            for i, j, view in _windows(xp, kh, kw, (oh, ow), strides, dilations):
                out += np.einsum("nhwgc,goc->nhwgo", view.reshape(n, oh, ow, groups, cg), wg[:, :, i, j, :])
            out = out.reshape(n, oh, ow, o)
            return out + ev(bias) if bias is not None else out

        return self._op("conv2d", (n, oh, ow, o), x.data_type, fn, padding=list(padding), strides=list(strides),
                        dilations=list(dilations), groups=groups, input_layout=input_layout,
                        filter_layout=filter_layout, bias=bias is not None, label=label)

    def conv_transpose2d(self, x, w, *, padding=(0, 0, 0, 0), strides=(1, 1), dilations=(1, 1),
                         output_padding=(0, 0), output_sizes=None, groups=1, input_layout="nchw",
                         filter_layout="iohw", bias=None, label=""):
        assert input_layout == "nhwc" and groups == 1 and output_sizes is None
        o, kh, kw, ci = np.transpose(np.zeros(w.shape), _TRANSPOSE_FILTER_TO_OHWI[filter_layout]).shape
        n, h, wd, c = x.shape
        assert ci == c
        t, b_, l_, r_ = padding
        full_h = (h - 1) * strides[0] + (kh - 1) * dilations[0] + 1 + output_padding[0]
        full_w = (wd - 1) * strides[1] + (kw - 1) * dilations[1] + 1 + output_padding[1]
        oh, ow = full_h - t - b_, full_w - l_ - r_

        def fn(ev, inp):
            xv = ev(x)
            wv = np.transpose(ev(w), _TRANSPOSE_FILTER_TO_OHWI[filter_layout])
            full = np.zeros((n, full_h, full_w, o))
            for i in range(kh):
                for j in range(kw):
                    r0, c0 = i * dilations[0], j * dilations[1]
                    full[:, r0:r0 + (h - 1) * strides[0] + 1:strides[0],
                         c0:c0 + (wd - 1) * strides[1] + 1:strides[1], :] += np.einsum("nhwc,oc->nhwo", xv, wv[:, i, j, :])
            out = full[:, t:full_h - b_, l_:full_w - r_, :]
            return out + ev(bias) if bias is not None else out

        return self._op("conv_transpose2d", (n, oh, ow, o), x.data_type, fn, padding=list(padding),
                        strides=list(strides), output_padding=list(output_padding),
                        filter_layout=filter_layout, bias=bias is not None, label=label)

    # -- elementwise
    def _binary(self, name, f, a, b, label):
        shape = np.broadcast_shapes(a.shape, b.shape)
        return self._op(name, shape, a.data_type, lambda ev, inp: f(ev(a), ev(b)), label=label)

    def add(self, a, b, *, label=""): return self._binary("add", np.add, a, b, label)
    def sub(self, a, b, *, label=""): return self._binary("sub", np.subtract, a, b, label)
    def mul(self, a, b, *, label=""): return self._binary("mul", np.multiply, a, b, label)
    def div(self, a, b, *, label=""): return self._binary("div", np.divide, a, b, label)
    def max(self, a, b, *, label=""): return self._binary("max", np.maximum, a, b, label)
    def min(self, a, b, *, label=""): return self._binary("min", np.minimum, a, b, label)
    def pow(self, a, b, *, label=""): return self._binary("pow", np.power, a, b, label)

    def prelu(self, x, slope, *, label=""):
        return self._binary("prelu", lambda a, s: np.where(a >= 0, a, a * s), x, slope, label)

    def _unary(self, name, f, x, **record):
        return self._op(name, x.shape, x.data_type, lambda ev, inp: f(ev(x)), **record)

    def relu(self, x, *, label=""): return self._unary("relu", lambda v: np.maximum(v, 0), x, label=label)
    def sigmoid(self, x, *, label=""): return self._unary("sigmoid", lambda v: 0.5 * (1 + np.tanh(0.5 * v)), x, label=label)
    def tanh(self, x, *, label=""): return self._unary("tanh", np.tanh, x, label=label)
    def exp(self, x, *, label=""): return self._unary("exp", np.exp, x, label=label)
    def log(self, x, *, label=""): return self._unary("log", np.log, x, label=label)
    def sqrt(self, x, *, label=""): return self._unary("sqrt", np.sqrt, x, label=label)
    def abs(self, x, *, label=""): return self._unary("abs", np.abs, x, label=label)
    def neg(self, x, *, label=""): return self._unary("neg", np.negative, x, label=label)
    def sin(self, x, *, label=""): return self._unary("sin", np.sin, x, label=label)
    def cos(self, x, *, label=""): return self._unary("cos", np.cos, x, label=label)
    def floor(self, x, *, label=""): return self._unary("floor", np.floor, x, label=label)
    def ceil(self, x, *, label=""): return self._unary("ceil", np.ceil, x, label=label)

    def hard_swish(self, x, *, label=""):
        return self._unary("hard_swish", lambda v: v * np.clip(v + 3, 0, 6) / 6, x, label=label)

    def clamp(self, x, *, min_value=-np.inf, max_value=np.inf, label=""):
        return self._unary("clamp", lambda v: np.clip(v, min_value, max_value), x,
                           min_value=min_value, max_value=max_value, label=label)

    def leaky_relu(self, x, *, alpha=0.01, label=""):
        return self._unary("leaky_relu", lambda v: np.where(v >= 0, v, alpha * v), x, alpha=alpha, label=label)

    # -- pooling and reduction
    def _pool(self, name, x, window_dimensions, padding, strides, layout, label, reduce_max):
        assert layout == "nhwc"
        n, h, wd, c = x.shape
        kh, kw = window_dimensions
        t, b_, l_, r_ = padding
        oh = (h + t + b_ - kh) // strides[0] + 1
        ow = (wd + l_ + r_ - kw) // strides[1] + 1

        def fn(ev, inp):
            xv = ev(x)
            if reduce_max:
                xp = np.pad(xv, ((0, 0), (t, b_), (l_, r_), (0, 0)), constant_values=-np.inf)
                return np.max([v for _, _, v in _windows(xp, kh, kw, (oh, ow), strides, (1, 1))], axis=0)
            xp = np.pad(xv, ((0, 0), (t, b_), (l_, r_), (0, 0)))
            ones = np.pad(np.ones((1, h, wd, 1)), ((0, 0), (t, b_), (l_, r_), (0, 0)))
            total = sum(v for _, _, v in _windows(xp, kh, kw, (oh, ow), strides, (1, 1)))
            count = sum(v for _, _, v in _windows(ones, kh, kw, (oh, ow), strides, (1, 1)))
            return total / count  # padding excluded from the average

        return self._op(name, (n, oh, ow, c), x.data_type, fn, window_dimensions=list(window_dimensions),
                        padding=list(padding), strides=list(strides), layout=layout, label=label)

    def average_pool2d(self, x, *, window_dimensions, padding=(0, 0, 0, 0), strides=(1, 1), layout="nchw", label=""):
        return self._pool("average_pool2d", x, window_dimensions, padding, strides, layout, label, False)

    def max_pool2d(self, x, *, window_dimensions, padding=(0, 0, 0, 0), strides=(1, 1), layout="nchw", label=""):
        return self._pool("max_pool2d", x, window_dimensions, padding, strides, layout, label, True)

    def _reduce(self, name, f, x, axes, keep_dimensions, label):
        shape = [1 if i in axes else d for i, d in enumerate(x.shape)]
        if not keep_dimensions:
            shape = [d for i, d in enumerate(x.shape) if i not in axes]
        return self._op(name, tuple(shape), x.data_type,
                        lambda ev, inp: f(ev(x), axis=tuple(axes), keepdims=keep_dimensions),
                        axes=list(axes), keep_dimensions=keep_dimensions, label=label)

    def reduce_mean(self, x, *, axes, keep_dimensions=False, label=""):
        return self._reduce("reduce_mean", np.mean, x, axes, keep_dimensions, label)

    def reduce_sum(self, x, *, axes, keep_dimensions=False, label=""):
        return self._reduce("reduce_sum", np.sum, x, axes, keep_dimensions, label)

    def reduce_max(self, x, *, axes, keep_dimensions=False, label=""):
        return self._reduce("reduce_max", np.max, x, axes, keep_dimensions, label)

    def reduce_min(self, x, *, axes, keep_dimensions=False, label=""):
        return self._reduce("reduce_min", np.min, x, axes, keep_dimensions, label)

    def reduce_product(self, x, *, axes, keep_dimensions=False, label=""):
        return self._reduce("reduce_product", np.prod, x, axes, keep_dimensions, label)

    # -- resampling and shapes
    def resample2d(self, x, *, mode="nearest-neighbor", sizes=None, scales=None, axes=(2, 3), label=""):
        assert mode == "linear" and sizes is not None
        shape = list(x.shape)
        for a, s in zip(axes, sizes):
            shape[a] = s

        def fn(ev, inp):
            v = ev(x)
            for a, out_size in zip(axes, sizes):
                in_size = v.shape[a]
                coord = (np.arange(out_size) + 0.5) * (in_size / out_size) - 0.5
                coord = np.clip(coord, 0, in_size - 1)
                i0 = np.floor(coord).astype(int)
                i1 = np.minimum(i0 + 1, in_size - 1)
                frac_shape = [1] * v.ndim
                frac_shape[a] = out_size
                frac = (coord - i0).reshape(frac_shape)
                v = np.take(v, i0, axis=a) * (1 - frac) + np.take(v, i1, axis=a) * frac
            return v

        return self._op("resample2d", tuple(shape), x.data_type, fn, mode=mode, sizes=list(sizes),
                        axes=list(axes), label=label)

    def concat(self, inputs, axis, *, label=""):
        shape = list(inputs[0].shape)
        shape[axis] = sum(o.shape[axis] for o in inputs)
        return self._op("concat", tuple(shape), inputs[0].data_type,
                        lambda ev, inp: np.concatenate([ev(o) for o in inputs], axis=axis), axis=axis, label=label)

    def reshape(self, x, new_shape, *, label=""):
        return self._op("reshape", tuple(new_shape), x.data_type,
                        lambda ev, inp: ev(x).reshape(new_shape), new_shape=list(new_shape), label=label)

    def transpose(self, x, *, permutation, label=""):
        shape = tuple(x.shape[p] for p in permutation)
        return self._op("transpose", shape, x.data_type, lambda ev, inp: np.transpose(ev(x), permutation),
                        permutation=list(permutation), label=label)

    def pad(self, x, beginning_padding, ending_padding, *, mode="constant", value=0.0, label=""):
        shape = tuple(d + b + e for d, b, e in zip(x.shape, beginning_padding, ending_padding))
        widths = list(zip(beginning_padding, ending_padding))

        def fn(ev, inp):
            if mode == "constant":
                return np.pad(ev(x), widths, constant_values=value)
            return np.pad(ev(x), widths, mode={"reflection": "reflect", "edge": "edge"}[mode])

        return self._op("pad", shape, x.data_type, fn, beginning_padding=list(beginning_padding),
                        ending_padding=list(ending_padding), mode=mode, value=value, label=label)

    def softmax(self, x, axis, *, label=""):
        def fn(ev, inp):
            v = ev(x)
            e = np.exp(v - v.max(axis=axis, keepdims=True))
            return e / e.sum(axis=axis, keepdims=True)

        return self._op("softmax", x.shape, x.data_type, fn, axis=axis, label=label)

    def gemm(self, a, b, *, c=None, alpha=1.0, beta=1.0, a_transpose=False, b_transpose=False, label=""):
        m = a.shape[1] if a_transpose else a.shape[0]
        n = b.shape[0] if b_transpose else b.shape[1]

        def fn(ev, inp):
            av, bv = ev(a), ev(b)
            out = alpha * ((av.T if a_transpose else av) @ (bv.T if b_transpose else bv))
            return out + beta * ev(c) if c is not None else out

        return self._op("gemm", (m, n), a.data_type, fn, a_transpose=a_transpose, b_transpose=b_transpose,
                        c=c is not None, label=label)

    def matmul(self, a, b, *, label=""):
        shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1])
        return self._op("matmul", shape, a.data_type, lambda ev, inp: np.matmul(ev(a), ev(b)), label=label)
