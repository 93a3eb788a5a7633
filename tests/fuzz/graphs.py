"""Random graphs over the motifs the compiler's rules target, a float64 NumPy evaluator of the
same description, and a runner that blames a pass when the GPU result differs.

A graph is a plain description (JSON-able), so a failure prints a reproducer::

    {"seed": 7, "decls": [["input", "x", [1, 8, 8, 12], "normal"], ["const", "c0", [12], "normal"]],
     "nodes": [{"op": "conv2d", "in": ["x", "c1"], "kw": {"bias": "c0"}, "attrs": {...}, "out": "v0"}, ...],
     "outputs": ["v5", "v2"]}

``decls`` are the graph inputs and constants in the order their data is drawn (from
``numpy.random.default_rng([seed, 1])``), ``nodes`` the builder calls in order (``in``:
positional operands, ``kw``: operand keyword arguments such as ``bias`` and ``c``, ``attrs``:
the other keyword arguments, all with the builder's names), ``outputs`` the values returned.
:func:`reference` evaluates it in float64 with NumPy (its own code: ``tests/references.py`` for
conv2d and resample2d, loops for the rest); :func:`check` builds it with
:class:`webnn_gpu.MLGraphBuilder`, runs it and compares; on a mismatch or a build error it runs
it again with every pass off (``WEBNN_GPU_PASSES=-all``) and then with each pass off in turn,
and names the passes whose absence fixes it.

``python -m fuzz.graphs SEED INDEX`` (from ``tests/``) checks one generated graph and prints
its description; ``python -m fuzz.graphs --json FILE`` checks a description.

Sizes are drawn from small sets (channels 3, 4, 5, 8, 12, 16, 24; images 1 to 16 pixels a
side) so that kernels repeat between graphs: pipelines are cached by their WGSL text.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

try:
    from references import ref_conv2d, ref_resample
except ImportError:  # run as a module from the repository root
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
    from references import ref_conv2d, ref_resample

#: a result is right when |got - ref| <= TOLERANCE * max(1, max |ref|) element-wise (float32
#: accumulation over at most a few hundred terms of unit-sized values; a rule at fault is off
#: by about the values themselves)
TOLERANCE = 2e-4
#: the same for a float16 graph (``"dtype": "float16"`` in its description), plus, per element,
#: twice what rounding every operator's result to float16 moves the reference (:func:`slack`: a
#: graph that subtracts nearly equal values magnifies the rounding): every operator's result is
#: rounded to float16 (a relative 4.9e-4) and the next one reads the rounded value (most graphs
#: measured within 2.2e-3 of the float64 reference on lavapipe, a few up to 1.1e-2, all within
#: 5e-4 of the rounded one; a rule at fault is still off by about the values themselves)
TOLERANCE_16 = 1e-2


# ---------------------------------------------------------------- float64 reference
def _to_nchw(x, layout):
    return x if layout == "nchw" else x.transpose(0, 3, 1, 2)


def _from_nchw(x, layout):
    return x if layout == "nchw" else x.transpose(0, 2, 3, 1)


def _conv2d(a, x, w, bias=None):
    oihw = np.transpose(w, [a.get("filter_layout", "oihw").index(ch) for ch in "oihw"])
    layout = a.get("input_layout", "nchw")
    y = ref_conv2d(_to_nchw(x, layout), oihw, padding=a.get("padding", (0, 0, 0, 0)),
                   strides=a.get("strides", (1, 1)), dilations=a.get("dilations", (1, 1)), groups=a.get("groups", 1))
    if bias is not None:
        y = y + bias.reshape(1, -1, 1, 1)
    return _from_nchw(y, layout)


def _conv_transpose2d(a, x, w, bias=None):
    """out[n, g*OPG + o, ih*sh + kh*dh - pt, ...] += x[n, g*IPG + i, ih, iw] * w[g*IPG + i, o, kh, kw]."""
    layout = a.get("input_layout", "nchw")
    iohw = np.transpose(w, [a.get("filter_layout", "iohw").index(ch) for ch in "iohw"])
    xn = _to_nchw(x, layout)
    n, c, h, wd = xn.shape
    _, opg, kh_, kw_ = iohw.shape
    g = a.get("groups", 1)
    ipg = c // g
    sh, sw = a.get("strides", (1, 1))
    dh, dw = a.get("dilations", (1, 1))
    pt, pb, pl, pr = a.get("padding", (0, 0, 0, 0))
    oph, opw = a.get("output_padding", (0, 0))
    oh = (h - 1) * sh + (kh_ - 1) * dh + 1 - pt - pb + oph
    ow = (wd - 1) * sw + (kw_ - 1) * dw + 1 - pl - pr + opw
    full = np.zeros((n, g * opg, max((h - 1) * sh + (kh_ - 1) * dh + 1, pt + oh),
                     max((wd - 1) * sw + (kw_ - 1) * dw + 1, pl + ow)))
    for gi in range(g):
        xs = xn[:, gi * ipg:(gi + 1) * ipg]
        ws = iohw[gi * ipg:(gi + 1) * ipg]
        for kh in range(kh_):
            for kw in range(kw_):
                contrib = np.einsum("nihw,io->nohw", xs, ws[:, :, kh, kw])
                full[:, gi * opg:(gi + 1) * opg, kh * dh:kh * dh + (h - 1) * sh + 1:sh,
                     kw * dw:kw * dw + (wd - 1) * sw + 1:sw] += contrib
    y = full[:, :, pt:pt + oh, pl:pl + ow]
    if bias is not None:
        y = y + bias.reshape(1, -1, 1, 1)
    return _from_nchw(y, layout)


def _pool(kind):
    def f(a, x):
        layout = a.get("layout", "nchw")
        xn = _to_nchw(x, layout)
        n, c, h, w = xn.shape
        wh, ww = a.get("window_dimensions") or (h, w)
        pt, pb, pl, pr = a.get("padding", (0, 0, 0, 0))
        sh, sw = a.get("strides", (1, 1))
        dh, dw = a.get("dilations", (1, 1))
        oh = (h + pt + pb - (wh - 1) * dh - 1) // sh + 1
        ow = (w + pl + pr - (ww - 1) * dw - 1) // sw + 1
        xp = np.full((n, c, h + pt + pb, w + pl + pr), np.nan)
        xp[:, :, pt:pt + h, pl:pl + w] = xn
        taps = [xp[:, :, i * dh:i * dh + (oh - 1) * sh + 1:sh, j * dw:j * dw + (ow - 1) * sw + 1:sw]
                for i in range(wh) for j in range(ww)]
        t = np.stack(taps)
        y = np.nanmean(t, axis=0) if kind == "avg" else np.nanmax(t, axis=0)
        return _from_nchw(y, layout)
    return f


def _resample(a, x):
    axes = a.get("axes", (2, 3))
    if a.get("sizes") is not None:
        sizes = a["sizes"]
    else:
        sizes = [int(math.floor(x.shape[ax] * s)) for ax, s in zip(axes, a.get("scales", (1.0, 1.0)))]
    return ref_resample(x, a.get("mode", "nearest-neighbor"), sizes, axes=axes)


def _gemm(a, x, y, c=None):
    if a.get("a_transpose"):
        x = x.T
    if a.get("b_transpose"):
        y = y.T
    out = a.get("alpha", 1.0) * (x @ y)
    return out if c is None else out + a.get("beta", 1.0) * c


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def _norm(kind):
    def f(a, x, *stats, scale=None, bias=None):
        eps = a.get("epsilon", 1e-5)
        if kind == "batch":
            mean, var = stats
            shape = [1] * x.ndim
            shape[a.get("axis", 1)] = -1
            m, v = mean.reshape(shape), var.reshape(shape)
            p_shape = shape
        else:
            if kind == "instance":
                axes = (2, 3) if a.get("layout", "nchw") == "nchw" else (1, 2)
                ch = 1 if a.get("layout", "nchw") == "nchw" else 3
                p_shape = [1] * x.ndim
                p_shape[ch] = -1
            else:
                axes = tuple(a.get("axes", range(1, x.ndim)))
                p_shape = [x.shape[d] if d in axes else 1 for d in range(x.ndim)]
            m, v = x.mean(axis=axes, keepdims=True), x.var(axis=axes, keepdims=True)
        y = (x - m) / np.sqrt(v + eps)
        if scale is not None:
            y = y * scale.reshape(p_shape)
        if bias is not None:
            y = y + bias.reshape(p_shape)
        return y
    return f


REFERENCE = {
    "add": lambda a, x, y: x + y,
    "sub": lambda a, x, y: x - y,
    "mul": lambda a, x, y: x * y,
    "div": lambda a, x, y: x / y,
    "max": lambda a, x, y: np.maximum(x, y),
    "min": lambda a, x, y: np.minimum(x, y),
    "relu": lambda a, x: np.maximum(x, 0),
    "neg": lambda a, x: -x,
    "abs": lambda a, x: np.abs(x),
    "sigmoid": lambda a, x: _sigmoid(x),
    "tanh": lambda a, x: np.tanh(x),
    "gelu": lambda a, x: 0.5 * x * (1 + _erf(x / math.sqrt(2))),
    "hard_swish": lambda a, x: x * np.clip(x + 3, 0, 6) / 6,
    "clamp": lambda a, x: np.clip(x, a.get("min_value", -np.inf), a.get("max_value", np.inf)),
    "leaky_relu": lambda a, x: np.where(x >= 0, x, a.get("alpha", 0.01) * x),
    "linear": lambda a, x: a.get("alpha", 1.0) * x + a.get("beta", 0.0),
    "hard_sigmoid": lambda a, x: np.clip(a.get("alpha", 0.2) * x + a.get("beta", 0.5), 0, 1),
    "elu": lambda a, x: np.where(x > 0, x, a.get("alpha", 1.0) * (np.exp(np.minimum(x, 0)) - 1)),
    "conv2d": _conv2d,
    "conv_transpose2d": _conv_transpose2d,
    "average_pool2d": _pool("avg"),
    "max_pool2d": _pool("max"),
    "resample2d": _resample,
    "matmul": lambda a, x, y: np.matmul(x, y),
    "gemm": _gemm,
    "reshape": lambda a, x: x.reshape(a["new_shape"]),
    "transpose": lambda a, x: np.transpose(x, a.get("permutation")),
    "cast": lambda a, x: x,  # float16 constants widened: their values are the float16 values
    "reduce_mean": lambda a, x: x.mean(axis=tuple(a["axes"]), keepdims=a.get("keep_dimensions", False)),
    "reduce_sum": lambda a, x: x.sum(axis=tuple(a["axes"]), keepdims=a.get("keep_dimensions", False)),
    "concat": lambda a, *xs: np.concatenate(xs, axis=a["axis"]),
    "prelu": lambda a, x, y: np.where(x >= 0, x, y * x),
    "batch_normalization": _norm("batch"),
    "instance_normalization": _norm("instance"),
    "layer_normalization": _norm("layer"),
    "slice": lambda a, x: x[tuple(slice(s, s + n, st) for s, n, st in
                                  zip(a["starts"], a["sizes"], a.get("strides", [1] * x.ndim)))],
    "pad": lambda a, x: np.pad(x, list(zip(a["beginning_padding"], a["ending_padding"])),
                               mode={"constant": "constant", "edge": "edge", "reflection": "reflect"}[
                                   a.get("mode", "constant")],
                               **({"constant_values": a.get("value", 0.0)} if a.get("mode", "constant") == "constant"
                                  else {})),
    "reverse": lambda a, x: np.flip(x, axis=tuple(a["axes"])),
    "tile": lambda a, x: np.tile(x, a["repetitions"]),
    "expand": lambda a, x: np.broadcast_to(x, a["new_shape"]),
    "softmax": lambda a, x: _softmax(x, a["axis"]),
    "sqrt": lambda a, x: np.sqrt(x),
    "reciprocal": lambda a, x: 1 / x,
    "pow": lambda a, x, y: x ** y,
}
#: builder methods taking a sequence of operands as their first argument
LIST_INPUT = {"concat"}


def _draw(rng, shape, dist: str) -> np.ndarray:
    """Data of a declared input or constant: ``normal``, ``positive`` (0.5 + |normal|),
    ``filter`` (normal / sqrt(fan-in)) or ``value:V`` (every element V, no draw); a ``16``
    suffix makes float16 data."""
    if dist.startswith("value:"):
        return np.full(shape, float(dist[6:]), dtype=np.float32)
    if dist.startswith("positive"):
        a = 0.5 + np.abs(rng.standard_normal(shape))
    elif dist.startswith("filter"):  # unit-variance outputs: scaled by the fan-in
        fan = max(1, int(np.prod(shape)) // max(shape)) if len(shape) else 1
        a = rng.standard_normal(shape) / math.sqrt(fan)
    else:
        a = rng.standard_normal(shape)
    return np.asarray(a, dtype=np.float16 if dist.endswith("16") else np.float32)


def declared_data(desc: dict) -> dict:
    """The arrays of a description's inputs and constants (drawn in declaration order), in
    float16 for a float16 graph (the reference then reads the same rounded values)."""
    rng = np.random.default_rng([desc["seed"], 1])
    data = {name: _draw(rng, shape, dist) for _, name, shape, dist in desc["decls"]}
    if desc.get("dtype") == "float16":
        data = {name: a.astype(np.float16) for name, a in data.items()}
    return data


def reference(desc: dict, data: dict | None = None, rounded: bool = False) -> dict:
    """float64 values of every output of the description; with ``rounded``, every operator's
    result is rounded to float16 before the next one reads it (what float16 arithmetic itself
    loses on the graph)."""
    env = {k: v.astype(np.float64) for k, v in (data or declared_data(desc)).items()}
    for node in desc["nodes"]:
        args = [env[n] for n in node["in"]]
        kws = {k: env[n] for k, n in node.get("kw", {}).items()}
        with np.errstate(all="ignore"):
            y = REFERENCE[node["op"]](node.get("attrs", {}), *args, **kws)
            env[node["out"]] = np.asarray(y).astype(np.float16).astype(np.float64) if rounded else y
    return {name: env[name] for name in desc["outputs"]}


def slack(desc: dict, ref: dict) -> dict | None:
    """For a float16 graph, the room float16 arithmetic needs per element beyond the tolerance:
    twice the distance between the float64 reference and one that rounds every operator's result
    to float16 (a graph that subtracts nearly equal values magnifies the rounding); None for
    float32."""
    if desc.get("dtype") != "float16":
        return None
    rounded = reference(desc, rounded=True)
    with np.errstate(invalid="ignore"):
        return {name: 2 * np.nan_to_num(np.abs(rounded[name] - r), nan=0.0, posinf=0.0) for name, r in ref.items()}


# ---------------------------------------------------------------- the generator
CHANNELS = (3, 4, 5, 8, 12, 16, 24)
SIZES = (1, 3, 5, 7, 8, 11, 12, 16)
UNARY = ("relu", "sigmoid", "tanh", "clamp", "leaky_relu", "linear", "hard_swish", "hard_sigmoid", "elu", "gelu",
         "neg", "abs")
BINARY = ("add", "sub", "mul", "div", "max", "min", "prelu")
FILTER_LAYOUTS = ("oihw", "hwio", "ohwi", "ihwo")


@dataclass
class Gen:
    """Builds one random description, evaluating each node as it goes (for the shapes)."""

    seed: int
    rng: np.random.Generator = field(init=False)
    drng: np.random.Generator = field(init=False)
    plan: np.random.Generator = field(init=False)
    decls: list = field(default_factory=list)
    nodes: list = field(default_factory=list)
    outputs: list = field(default_factory=list)
    env: dict = field(default_factory=dict)
    n: int = 0

    def __post_init__(self):
        self.rng = np.random.default_rng([self.seed, 0])
        self.drng = np.random.default_rng([self.seed, 1])
        self.plan = np.random.default_rng([self.seed, 3])

    # -- helpers
    def p(self, prob: float) -> bool:
        return bool(self.rng.random() < prob)

    def pick(self, seq):
        return seq[int(self.rng.integers(len(seq)))]

    def shape(self, name) -> tuple:
        return tuple(self.env[name].shape)

    def input(self, shape, dist="normal") -> str:
        return self._value("input", shape, dist)

    def const(self, shape, dist="normal") -> str:
        return self._value("const", shape, dist)

    def _value(self, kind, shape, dist) -> str:
        name = f"{'x' if kind == 'input' else 'c'}{len(self.decls)}"
        self.decls.append([kind, name, [int(s) for s in shape], dist])
        self.env[name] = _draw(self.drng, shape, dist).astype(np.float64)  # as declared_data draws
        return name

    def emit(self, op, ins, attrs=None, kw=None) -> str:
        name = f"v{self.n}"
        self.n += 1
        node = {"op": op, "in": list(ins), "attrs": dict(attrs or {}), "out": name}
        if kw:
            node["kw"] = dict(kw)
        with np.errstate(all="ignore"):
            self.env[name] = REFERENCE[op](node["attrs"], *[self.env[i] for i in ins],
                                          **{k: self.env[v] for k, v in (kw or {}).items()})
        self.nodes.append(node)
        return name

    def output(self, name):
        if name not in self.outputs and not name.startswith(("x", "c")):
            self.outputs.append(name)

    def description(self) -> dict:
        return {"seed": self.seed, "decls": self.decls, "nodes": self.nodes, "outputs": self.outputs}

    # -- constants made by other ops (fold_constants)
    def made_const(self, shape, dist="normal") -> str:
        """A constant of ``shape``, often computed from others (folded at build time)."""
        shape = tuple(int(s) for s in shape)
        r = self.rng.random()
        if r < 0.55 or not shape:
            return self.const(shape, dist)
        if r < 0.7 and len(shape) >= 2:
            perm = list(self.rng.permutation(len(shape)))
            inv = list(np.argsort(perm))
            src = self.const([shape[i] for i in inv], dist)  # transpose(src, perm) has `shape`
            return self.emit("transpose", [src], {"permutation": [int(p) for p in perm]})
        if r < 0.8:
            src = self.const([int(np.prod(shape))], dist)
            return self.emit("reshape", [src], {"new_shape": list(shape)})
        if r < 0.9:
            src = self.const(shape, dist)
            return self.emit("linear", [src], {"alpha": 1.0, "beta": 0.0})
        src = self.const(shape, dist + "16" if not dist.endswith("16") else dist)
        return self.emit("cast", [src], {"type": "float32"})

    def filt(self, o, i, kh, kw, layout) -> str:
        dims = {"o": o, "i": i, "h": kh, "w": kw}
        return self.made_const([dims[ch] for ch in layout], "filter")

    def chan_operand(self, shape, layout) -> str:
        """A per-channel operand of ``shape`` (4-D, ``layout``) in a random broadcast rank."""
        C = shape[1] if layout == "nchw" else shape[3]
        forms = ([1, C, 1, 1], [C, 1, 1]) if layout == "nchw" else ([C], [1, 1, 1, C], [1, 1, C], [1, C])
        shp = self.pick(forms)
        if self.p(0.25):
            return self.input(shp)
        return self.made_const(shp)

    # -- motifs
    def elementwise_tail(self, v, layout=None, max_ops=4) -> str:
        """0..max_ops element-wise ops after ``v`` (an epilogue): activations, binaries with
        scalar / per-channel / full-shape operands in either order, the hard-swish and swish sequences,
        a value read twice or output in the middle."""
        for _ in range(int(self.rng.integers(0, max_ops + 1))):
            shape = self.shape(v)
            r = self.rng.random()
            if r < 0.35:
                op = self.pick(UNARY)
                attrs = {}
                if op == "clamp":
                    attrs = self.pick([{"min_value": 0.0, "max_value": 6.0}, {"min_value": -1.0, "max_value": 1.5},
                                       {"min_value": -0.5}, {"max_value": 0.5}])
                elif op == "leaky_relu":
                    attrs = {"alpha": 0.1}
                elif op == "linear":
                    attrs = {"alpha": 0.5, "beta": -0.25}
                elif op == "hard_sigmoid":
                    attrs = {"alpha": 0.25, "beta": 0.5}
                elif op == "elu":
                    attrs = {"alpha": 0.7}
                v = self.emit(op, [v], attrs)
            elif r < 0.45 and self.p(0.3):
                # x * sigmoid(x) (fuse_swish); now and then the sigmoid read elsewhere (a near miss)
                sg = self.emit("sigmoid", [v])
                if self.p(0.2):
                    self.output(sg)
                v = self.emit("mul", [v, sg] if self.p(0.5) else [sg, v])
            elif r < 0.45:
                # x * clamp(x + 3, 0, 6) / 6 (fuse_hard_swish), in one of its forms
                three = self.const([], "value:3")
                a = self.emit("add", [v, three] if self.p(0.5) else [three, v])
                cl = self.emit("clamp", [a], {"min_value": 0.0, "max_value": 6.0})
                if self.p(0.5):
                    m = self.emit("mul", [v, cl] if self.p(0.5) else [cl, v])
                    v = self.emit("div", [m, self.const([], "value:6")])
                else:
                    d = self.emit("mul", [cl, self.const([], f"value:{float(np.float32(1 / 6))!r}")])
                    v = self.emit("mul", [d, v] if self.p(0.5) else [v, d])
            else:
                op = self.pick(BINARY)
                kind = self.rng.random()
                if kind < 0.3:
                    other = self.made_const([], "positive" if op == "div" else "normal")
                elif kind < 0.65 and layout is not None:
                    other = self.chan_operand(shape, layout) if op != "div" else self.made_const(
                        [shape[1] if layout == "nchw" else shape[3]] + ([1, 1] if layout == "nchw" else []),
                        "positive")
                elif kind < 0.8 or op == "div":
                    # a broadcast operand of random rank: trailing dims kept or 1
                    k = int(self.rng.integers(0, len(shape) + 1))
                    shp = [d if self.p(0.5) else 1 for d in shape[k:]]
                    other = self.made_const(shp, "positive" if op == "div" else "normal")
                else:
                    other = self.input(shape)  # a residual
                # prelu's slope broadcasts to its input: x second only when of x's shape
                first = self.p(0.5) or op == "div" or (op == "prelu" and self.shape(other) != shape)
                v = self.emit(op, [v, other] if first else [other, v])
            if self.p(0.12):
                self.output(v)  # a graph output in the middle of the chain
            elif self.p(0.08):
                self.output(self.emit("relu", [v]))  # a second consumer outside the chain
        return v

    def conv(self, v, layout, *, pointwise=False, depthwise=False, O=None) -> str:
        """conv2d with random geometry, layouts, groups, bias (maybe computed), then a tail."""
        shape = self.shape(v)
        C, H, W = (shape[1], shape[2], shape[3]) if layout == "nchw" else (shape[3], shape[1], shape[2])
        if pointwise:
            k, s, d, g = 1, 1, 1, 1
            pad = [0, 0, 0, 0]
        else:
            k = self.pick((1, 3, 3, 3, 5))
            s = self.pick((1, 1, 2))
            d = 2 if k == 3 and self.p(0.15) else 1
            eff = (k - 1) * d + 1
            if self.p(0.6):
                pad = [(eff - 1) // 2, eff // 2, (eff - 1) // 2, eff // 2]
            else:
                pad = [int(self.rng.integers(0, eff)) for _ in range(4)]
            g = 1
            if (depthwise or self.p(0.3)) and O in (None, C):
                g = C
            elif C % 2 == 0 and self.p(0.15):
                g = 2
            # the output must have at least one pixel
            for axis in (0, 1):
                size = (H, W)[axis] + pad[2 * axis] + pad[2 * axis + 1]
                if size < eff:
                    pad[2 * axis + 1] += eff - size
        if O is None:
            O = C if g == C else self.pick(CHANNELS)
        if g == 2 and O % 2:
            O += 1
        flayout = self.pick(FILTER_LAYOUTS)
        w = self.filt(O, C // g, k, k, flayout)
        kw = {}
        if self.p(0.6):
            kw["bias"] = self.made_const([O])
        attrs = {"padding": pad, "strides": [s, s], "dilations": [d, d], "groups": g, "input_layout": layout,
                 "filter_layout": flayout}
        return self.emit("conv2d", [v, w], attrs, kw)

    def motif_conv(self, v, layout):
        """A conv and its epilogue; now and then a long one (the epilogue's bounds); now and then
        a dense-block step: the conv's output concatenated to its input, that concat read by an
        element-wise chain (``fuse_concat_map``) and by a second concat."""
        if layout == "nhwc" and self.p(0.3):
            y = self.elementwise_tail(self.conv(v, layout, pointwise=True, O=self.pick((4, 8, 6))), layout, 2)
            cat = self.emit("concat", [v, y], {"axis": 3})
            t = self.emit("mul", [cat, self.chan_operand(self.shape(cat), layout)])
            t = self.elementwise_tail(t, layout, 3)
            return self.emit("concat", [cat, t], {"axis": 3}), layout
        return self.elementwise_tail(self.conv(v, layout), layout, 14 if self.p(0.1) else 4), layout

    def motif_long_filter(self, v, layout):
        """A long filter along the width (``conv_columns_to_channels``): the graph so far kept as an
        output, then an NHWC (now and then NCHW) conv2d of a new input 1-3 rows high and 300-1024
        columns wide, of 1-3 channels, with a 1 x 16..64 (or 3 x 16) window at stride 1-3, random
        padding and filter layout, one output channel, a bias or not, and a tail; near misses: 4
        input channels, 2 output channels, a dilation of 2 along the width, a 1x12 window."""
        self.output(self.emit("relu", [v]) if v.startswith("x") else v)
        near = self.rng.random()
        N, h, W = self.pick((1, 1, 2)), self.pick((1, 2, 3)), self.pick((300, 517, 1024))
        C = 4 if near < 0.1 else self.pick((1, 1, 2, 3))
        O = 2 if 0.1 <= near < 0.2 else 1
        dw = 2 if 0.2 <= near < 0.3 else 1
        kw = 12 if 0.3 <= near < 0.4 else self.pick((16, 33, 64))
        kh = 3 if h == 3 and self.p(0.5) else 1
        s = self.pick((1, 2, 3))
        pad = [kh // 2, kh // 2] + [int(self.rng.integers(0, kw)) for _ in range(2)]
        nchw = self.p(0.2)
        x = self.input((N, C, h, W) if nchw else (N, h, W, C))
        flayout = self.pick(FILTER_LAYOUTS)
        kwargs = {"bias": self.made_const([O])} if self.p(0.5) else {}
        attrs = {"padding": pad, "strides": [1, s], "dilations": [1, dw], "groups": 1,
                 "input_layout": "nchw" if nchw else "nhwc", "filter_layout": flayout}
        y = self.emit("conv2d", [x, self.filt(O, C, kh, kw, flayout)], attrs, kwargs)
        return self.elementwise_tail(y, "nchw" if nchw else "nhwc", 2), "nchw" if nchw else "nhwc"

    def motif_conv_input(self, v, layout):
        """mul(x, s) / mul(s, x) / add(x, r) / add(mul(x, s), r) in front of a pointwise conv;
        or an input affine in front of an image's first conv (:meth:`first_affine`)."""
        if self.p(0.3):
            return self.first_affine(v, layout)
        shape = self.shape(v)
        r = self.rng.random()
        if r < 0.4:
            s = self.chan_operand(shape, layout)
            y = self.emit("mul", [v, s] if self.p(0.5) else [s, v])
        elif r < 0.7:
            res = self.input(shape)
            y = self.emit("add", [v, res] if self.p(0.5) else [res, v])
        else:
            s = self.chan_operand(shape, layout)
            m = self.emit("mul", [v, s] if self.p(0.5) else [s, v])
            res = self.input(shape)
            y = self.emit("add", [m, res] if self.p(0.5) else [res, m])
        if self.p(0.1):
            self.output(y)
        return self.elementwise_tail(self.conv(y, layout, pointwise=True), layout, 2), layout

    def first_affine(self, v, layout):
        """1 to 3 of mul / add / sub / div by a scalar or per-channel operand (either order) on a
        1 to 4 channel image, then its first conv (the block kernel's input affine); near misses:
        an operand that is an input, c / x, a step also a graph output, NCHW, a grouped conv."""
        shape = self.shape(v)
        C = self.pick((3, 3, 1, 2, 4))
        y = self.input(shape[:3] + (C,) if layout == "nhwc" else (shape[0], C) + shape[2:])
        for _ in range(int(self.rng.integers(1, 4))):
            op = self.pick(("mul", "add", "sub", "div"))
            k = self.chan_operand(self.shape(y), layout) if self.p(0.6) else self.made_const([1])
            if op == "div":  # divisors away from zero: |k| + 1, or now and then c / (|x| + 1)
                if self.p(0.15):
                    y = self.emit("div", [k, self.emit("add", [self.emit("abs", [y]), self.made_const([1])])])
                else:
                    y = self.emit("div", [y, self.emit("add", [self.emit("abs", [k]), self.made_const([1])])])
            else:
                y = self.emit(op, [y, k] if self.p(0.7) else [k, y])
            if self.p(0.05):
                self.output(y)
        return self.elementwise_tail(self.conv(y, layout, O=self.pick((8, 16))), layout, 2), layout

    def pooled(self, v, layout) -> str:
        """A [1, 1, 1, C]-like pooled value: global average pool, reduce_mean, or through a reshape."""
        r = self.rng.random()
        axes = [1, 2] if layout == "nhwc" else [2, 3]
        if r < 0.6:
            return self.emit("average_pool2d", [v], {"layout": layout})
        if r < 0.85:
            return self.emit("reduce_mean", [v], {"axes": axes, "keep_dimensions": True})
        m = self.emit("reduce_mean", [v], {"axes": axes})
        shape = self.shape(v)
        keep = [1 if i in axes else d for i, d in enumerate(shape)]
        return self.emit("reshape", [m], {"new_shape": keep})

    def se_scale(self, v, layout) -> str:
        """v * sigmoid(fc2(relu(fc1(global_average_pool(v)))))."""
        C = self.shape(v)[3] if layout == "nhwc" else self.shape(v)[1]
        p = self.emit("average_pool2d", [v], {"layout": layout})
        h = self.emit("relu", [self.conv(p, layout, pointwise=True, O=self.pick((2, 4, 8)))])
        s = self.emit(self.pick(("sigmoid", "hard_sigmoid")), [self.conv(h, layout, pointwise=True, O=C)])
        return self.emit("mul", [v, s] if self.p(0.5) else [s, v])

    def motif_squeeze_excite(self, v, layout):
        """pool -> 1x1 conv (+act) -> 1x1 conv (+sigmoid) -> mul with x; sometimes a third 1x1 conv."""
        shape = self.shape(v)
        C = shape[3] if layout == "nhwc" else shape[1]
        p = self.pooled(v, layout)
        R = self.pick((2, 4, 5, 8))
        h = self.conv(p, layout, pointwise=True, O=R)
        if self.p(0.7):
            act = self.pick(("relu", "hard_swish", "clamp"))
            h = self.emit(act, [h], {"min_value": 0.0, "max_value": 6.0} if act == "clamp" else {})
        if self.p(0.2):  # three 1x1 convs in a row on the pooled pixel
            h = self.conv(h, layout, pointwise=True, O=self.pick((3, 4, 8)))
        s = self.conv(h, layout, pointwise=True, O=C)
        s = self.emit(self.pick(("sigmoid", "hard_sigmoid")), [s])
        if self.p(0.15):
            self.output(s)
            return s, layout
        y = self.emit("mul", [v, s] if self.p(0.5) else [s, v])
        if self.p(0.6):
            y = self.conv(y, layout, pointwise=True)
        return self.elementwise_tail(y, layout, 2), layout

    def motif_inverted_residual(self, v, layout):
        """expand 1x1 -> depthwise kxk -> project 1x1 (or a 2x2 stride-2 transposed conv), residual add."""
        shape = self.shape(v)
        C = shape[3] if layout == "nhwc" else shape[1]
        x = v
        if self.p(0.7):
            v = self.conv(v, layout, pointwise=True, O=self.pick((8, 12, 16, 24)))
            if self.p(0.7):
                v = self.emit("clamp", [v], {"min_value": 0.0, "max_value": 6.0})
        v = self.conv(v, layout, depthwise=True)
        v = self.elementwise_tail(v, layout, 2)
        if self.p(0.4):  # squeeze-and-excite on the depthwise output (MobileNetV3)
            v = self.se_scale(v, layout)
        if self.p(0.15) and layout == "nhwc":
            # a transposed conv whose filter equals its stride (an upsampling projection)
            Ci = self.shape(v)[3]
            O = self.pick((1, 3, 4, 8))
            fl = self.pick(("iohw", "hwoi", "ohwi"))
            dims = {"i": Ci, "o": O, "h": 2, "w": 2}
            w = self.made_const([dims[ch] for ch in fl], "filter")
            kw = {"bias": self.made_const([O])} if self.p(0.5) else {}
            v = self.emit("conv_transpose2d", [v, w], {"strides": [2, 2], "input_layout": layout, "filter_layout": fl},
                          kw)
            return self.elementwise_tail(v, layout, 2), layout
        v = self.conv(v, layout, pointwise=True, O=C if self.p(0.6) else None)
        if self.shape(v) == self.shape(x) and self.p(0.7):
            v = self.emit("add", [v, x] if self.p(0.5) else [x, v])
        return self.elementwise_tail(v, layout, 2), layout

    def motif_pool(self, v, layout):
        """Pools: a global average pool of a sum (maybe with an upsampled operand), of a conv's
        output (also read elsewhere), windowed average / max pools, a strided block's residual
        pool (:meth:`motif_pool_residual`)."""
        shape = self.shape(v)
        r = self.rng.random()
        if r < 0.35:
            if self.p(0.3) and shape[1 if layout == "nhwc" else 2] % 2 == 0 and shape[2 if layout == "nhwc" else 3] % 2 == 0:
                small = list(shape)
                axes = [1, 2] if layout == "nhwc" else [2, 3]
                for a in axes:
                    small[a] //= 2
                other = self.emit("resample2d", [self.input(small)], {"mode": "linear", "scales": [2.0, 2.0],
                                                                      "axes": axes})
            else:
                other = self.input(shape)
            y = self.emit("add", [v, other] if self.p(0.5) else [other, v])
            return self.emit("average_pool2d", [y], {"layout": layout}), layout
        if 0.41 <= r < 0.44:
            return self.motif_depth_to_space(v, layout)
        if 0.44 <= r < 0.5:
            return self.motif_heads(v, layout)
        if 0.5 <= r < 0.65:
            return self.motif_pool_residual(v, layout)
        if r < 0.65:
            c = self.conv(v, layout, depthwise=self.p(0.6))
            p = self.emit("average_pool2d", [c], {"layout": layout})
            if self.p(0.5):
                self.output(c)  # the conv's output is read elsewhere too
                return p, layout
            y = self.emit("mul", [c, p] if self.p(0.5) else [p, c])
            return y, layout
        H, W = (shape[1], shape[2]) if layout == "nhwc" else (shape[2], shape[3])
        if self.p(0.4):
            # windows that tile the input and an element-wise chain of that input (fuse_pool_map;
            # near misses: NCHW, channels not a multiple of 4, a slope that is an input, a
            # residual operand, the chain read twice or output in the middle)
            win = [2 if H % 2 == 0 else 1, 2 if W % 2 == 0 else 1]
            y = self.emit(self.pick(("average_pool2d", "max_pool2d")), [v],
                          {"window_dimensions": win, "strides": list(win), "layout": layout})
            t = self.emit("prelu", [v, self.chan_operand(shape, layout)])
            t = self.elementwise_tail(t, layout, 3)
            self.output(t)
            return self.elementwise_tail(y, layout, 2), layout
        k = min(self.pick((2, 3)), H, W)
        attrs = {"window_dimensions": [k, k], "strides": [self.pick((1, 2))] * 2, "layout": layout}
        if self.p(0.4) and k > 1:
            attrs["padding"] = [int(self.rng.integers(0, k)) for _ in range(4)]
        op = self.pick(("average_pool2d", "max_pool2d"))
        y = self.emit(op, [v], attrs)
        if self.p(0.3):  # the same pool again (merge_duplicates, then self_add_to_scale), or a near miss: other strides
            again = attrs if self.p(0.6) else {**attrs, "strides": [3 - attrs["strides"][0]] * 2}
            y2 = self.emit(op, [v], dict(again))
            if self.shape(y2) == self.shape(y):
                y = self.emit("add", [y, y2])
            else:
                self.output(y2)
        return self.elementwise_tail(y, layout, 3), layout  # a windowed pool hosts an epilogue

    def motif_upsample(self, v, layout):
        """A linear / nearest upsampling followed by a pointwise conv, or added to a skip first,
        or added to a pointwise conv of a skip."""
        shape = self.shape(v)
        axes = [1, 2] if layout == "nhwc" else [2, 3]
        if self.p(0.3):
            axes = axes[::-1]
        mode = "linear" if self.p(0.75) else "nearest-neighbor"
        attrs = {"mode": mode, "axes": axes}
        if self.p(0.7):
            attrs["scales"] = [2.0, 2.0]
        else:
            attrs["sizes"] = [shape[axes[0]] * 2 + int(self.rng.integers(0, 2)), shape[axes[1]] * 2]
        C = shape[3] if layout == "nhwc" else shape[1]
        if self.p(0.35):
            # a feature pyramid's top-down add: a pointwise conv of the skip connection, made
            # first (it hosts the add), plus the upsampling, maybe with a unary tail
            # (fuse_upsampled_residual; near misses: nearest mode, other sizes, NCHW or swapped
            # axes, channels not a multiple of 8, the upsampling read twice or output)
            if C % 8 and self.p(0.7):  # (the kernels read 8-channel words of the small image)
                v = self.conv(v, layout, pointwise=True, O=self.pick((8, 16, 24)))
                shape = self.shape(v)
                C = shape[3] if layout == "nhwc" else shape[1]
            big = list(shape)
            for a, n in zip(axes, attrs.get("sizes") or [2 * shape[axes[0]], 2 * shape[axes[1]]]):
                big[a] = n
            chan = 3 if layout == "nhwc" else 1
            big[chan] = self.pick(CHANNELS)
            s = self.conv(self.input(tuple(big)), layout, pointwise=True, O=C)
            up = self.emit("resample2d", [v], attrs)
            if self.p(0.3):
                up = (self.emit("clamp", [up], {"min_value": 0.0, "max_value": 6.0}) if self.p(0.5)
                      else self.emit("relu", [up]))
            if self.p(0.15):
                self.output(up)
            y = self.emit("add", [s, up] if self.p(0.5) else [up, s])
            return self.elementwise_tail(y, layout, 2), layout
        up = self.emit("resample2d", [v], attrs)
        if self.p(0.3):
            up = self.elementwise_tail(up, layout, 2)  # the resample hosts an epilogue
        if self.p(0.7):
            skip = self.input(self.shape(up))
            up = self.emit("add", [up, skip] if self.p(0.5) else [skip, up])
        y = self.conv(up, layout, pointwise=True, O=self.pick([c for c in CHANNELS if c <= C] or [C]))
        return self.elementwise_tail(y, layout, 2), layout

    def motif_first_layer(self, v, layout):
        """An image's first conv (3 -> 8 / 16, 3x3, stride 2) and a global pool of its output."""
        x = self.input(self.shape(v)[:3] + (3,) if layout == "nhwc" else (self.shape(v)[0], 3) + self.shape(v)[2:])
        c = self.conv(x, layout, O=self.pick((8, 16)))
        c = self.elementwise_tail(c, layout, 2)
        if self.p(0.5):
            self.output(c)
            other = self.input(self.shape(c)) if self.p(0.4) else None
            y = c if other is None else self.emit("add", [c, other])
            return self.emit("average_pool2d", [y], {"layout": layout}), layout
        return c, layout

    def motif_pad(self, v, layout):
        """Zero pads folded into their readers (``fold_layout``) and their near misses: a pad
        of the spatial axes before a conv (stride 1 or 2, maybe depthwise, the pad maybe read
        twice or an output), a channel pad of a pooled branch added to a conv's output (a
        residual, maybe followed by prelu) or a slice of a wider branch in its place; a non-zero
        or -0.0 value, the edge mode, a pad of the channels before a conv, a pad before a
        pool (folded into a max pool of a relu or sigmoid, not of a tanh), a strided slice."""
        shape = self.shape(v)
        rank_h, rank_w, rank_c = (1, 2, 3) if layout == "nhwc" else (2, 3, 1)
        value = 0.0
        r = self.rng.random()
        if r < 0.1:
            value = self.pick((0.5, -0.0))
        mode = "edge" if self.p(0.05) else "constant"
        kind = self.rng.random()
        if kind < 0.5:  # spatial pad -> conv
            beg, end = [0] * 4, [0] * 4
            for d in (rank_h, rank_w):
                beg[d], end[d] = int(self.rng.integers(0, 3)), int(self.rng.integers(0, 3))
            if self.p(0.1):
                end[rank_c] = 1  # the channels too: stays a pad
            attrs: dict = {"beginning_padding": beg, "ending_padding": end}
            if mode != "constant":
                attrs["mode"] = mode
            elif value != 0.0 or math.copysign(1.0, value) < 0:
                attrs["value"] = value
            p = self.emit("pad", [v], attrs)
            if self.p(0.1):
                self.output(p)
            if self.p(0.15):  # a pool reads it: its padding would exclude what the pad includes
                if self.p(0.5):  # ... unless it max-pools values >= 0 (not tanh's) with a window past the pad
                    p = self.emit("pad", [self.emit(self.pick(("relu", "sigmoid", "tanh")), [v])], attrs)
                    if min(self.shape(p)[rank_h], self.shape(p)[rank_w]) >= 3:
                        return self.emit("max_pool2d", [p], {"window_dimensions": [3, 3], "layout": layout}), layout
                return self.emit(self.pick(("average_pool2d", "max_pool2d")), [p],
                                 {"window_dimensions": [1, 1] if min(self.shape(p)[rank_h], self.shape(p)[rank_w]) < 2
                                  else [2, 2], "layout": layout}), layout
            y = self.conv(p, layout, depthwise=self.p(0.5))
            if self.p(0.2):  # a second conv reads the same pad
                z = self.conv(p, layout, pointwise=self.p(0.5))
                self.output(z)
            return self.elementwise_tail(y, layout, 2), layout
        # channel pad of a branch, added to a conv's output of the wider shape
        C = shape[rank_c]
        extra = self.pick((1, 3, 4, 8))
        beg, end = [0] * 4, [0] * 4
        if self.p(0.2):
            beg[rank_c] = extra
        else:
            end[rank_c] = extra
        if self.p(0.1):
            end[rank_h] = 1  # a spatial pad too: the add broadcasts nothing, the conv's output is larger
        branch = self.emit("max_pool2d", [v], {"window_dimensions": [1, 1], "layout": layout}) if self.p(0.5) else v
        attrs = {"beginning_padding": beg, "ending_padding": end}
        if mode != "constant":
            attrs["mode"] = mode
        elif value != 0.0 or math.copysign(1.0, value) < 0:
            attrs["value"] = value
        if self.p(0.3):  # a window of a wider branch (a unit-stride slice; now and then strided)
            wshape = list(shape)
            step = 2 if self.p(0.15) else 1
            wshape[rank_c] = (C + extra) * step + 2
            starts = [0, 0, 0, 0]
            starts[rank_c] = int(self.rng.integers(0, 3))
            sizes = list(shape)
            sizes[rank_c] = (C + extra - 1) * step + 1
            strides = [1, 1, 1, 1]
            strides[rank_c] = step
            padded = self.emit("slice", [self.input(wshape)], {"starts": starts, "sizes": sizes, "strides": strides})
        else:
            padded = self.emit("pad", [branch], attrs)
        pshape = self.shape(padded)
        if pshape[rank_h] != shape[rank_h]:
            return padded, layout
        c = self.conv(v, layout, O=C + extra)
        if self.shape(c) != pshape:
            return c, layout
        if self.p(0.1):
            self.output(padded)  # read twice
        y = self.emit("add", [c, padded] if self.p(0.5) else [padded, c])
        if self.p(0.5):
            y = self.emit("prelu", [y, self.chan_operand(self.shape(y), layout)])
        return self.elementwise_tail(y, layout, 2), layout

    def motif_norm(self, v, layout):
        """A batch, instance or layer normalization (scale and bias maybe) and an epilogue chain."""
        shape = self.shape(v)
        C = shape[3] if layout == "nhwc" else shape[1]
        r = self.rng.random()
        kw = {}
        if r < 0.35:
            if self.p(0.6):
                kw["scale"] = self.made_const([C])
            if self.p(0.6):
                kw["bias"] = self.made_const([C])
            mean, var = self.made_const([C]), self.const([C], "positive")
            n = self.emit("batch_normalization", [v, mean, var], {"axis": 3 if layout == "nhwc" else 1}, kw)
        elif r < 0.7:
            if self.p(0.5):
                kw["scale"] = self.made_const([C])
            if self.p(0.5):
                kw["bias"] = self.made_const([C])
            n = self.emit("instance_normalization", [v], {"layout": layout}, kw)
        else:
            n = self.emit("layer_normalization", [v], {"axes": [1, 2, 3]})
        return self.elementwise_tail(n, layout, 3), layout

    def motif_transposed_layer(self, v, layout):
        """A depthwise layer wrapped in layout transposes, as ONNX exporters (tf2onnx) write."""
        other = "nchw" if layout == "nhwc" else "nhwc"
        to, back = ([0, 3, 1, 2], [0, 2, 3, 1]) if layout == "nhwc" else ([0, 2, 3, 1], [0, 3, 1, 2])
        c = self.conv(self.emit("transpose", [v], {"permutation": to}), other, depthwise=True)
        return self.emit("transpose", [c], {"permutation": back}), layout

    def motif_layout_region(self, v, layout):
        """An NCHW region (nhwc_regions): from an NHWC value through a transpose (tf2onnx's form)
        or an NCHW one as it is, 2 to 4 layout-agnostic or layout-parametric ops (convs, pools,
        resample, reductions with kept axes, softmax, concat, slice, pad, normalizations,
        element-wise ops with broadcast operands of every rank), back through a transpose or a
        reshape equal to one; and its near misses: a reshape mixing axes (with two rank-3
        transposes inside: compose_transposes), a graph output or a second reader in the middle,
        an NHWC conv joining the region, the region's first value read at an edge too."""
        if layout == "nhwc":
            v = self.emit("transpose", [v], {"permutation": [0, 3, 1, 2]})
        if self.p(0.15):  # the region's first value read at an edge too (a reshape that mixes axes)
            n, c, h, w = self.shape(v)
            self.output(self.emit("relu", [self.emit("reshape", [v], {"new_shape": [n, c * h, w, 1]})]))
        for _ in range(int(self.rng.integers(2, 5))):
            n, c, h, w = self.shape(v)
            r = self.rng.random()
            if r < 0.22:
                v = self.conv(v, "nchw", depthwise=self.p(0.5))
            elif r < 0.38:
                k = int(self.rng.integers(0, 5))
                shp = [d if self.p(0.5) else 1 for d in (n, c, h, w)[4 - k:]]
                other = self.input(shp) if self.p(0.2) else self.made_const(shp)
                v = self.emit(self.pick(("add", "mul", "max")), [v, other] if self.p(0.5) else [other, v])
            elif r < 0.46:
                kind = self.pick(("average_pool2d", "max_pool2d"))
                v = self.emit(kind, [v], {"layout": "nchw", "window_dimensions": [min(2, h), min(2, w)],
                                          "strides": [1, 1]})
            elif r < 0.52:
                v = self.emit("resample2d", [v], {"mode": "nearest-neighbor", "axes": [2, 3], "scales": [2.0, 2.0]})
            elif r < 0.6:
                m = self.emit("reduce_mean", [v], {"axes": self.pick(([2, 3], [1], [1, 3])), "keep_dimensions": True})
                v = self.emit("sub", [v, m])
            elif r < 0.65:
                v = self.emit("softmax", [v], {"axis": self.pick((1, 2, 3))})
            elif r < 0.71:
                v = self.emit("concat", [v, self.emit("relu", [v])], {"axis": self.pick((1, 2, 3))})
            elif r < 0.76:
                v = self.emit("slice", [v], {"starts": [0, c // 2, 0, w // 3], "sizes": [n, c - c // 2, h, w - w // 3]})
            elif r < 0.81:
                v = self.emit("pad", [v], {"beginning_padding": [0, 1, 0, 1], "ending_padding": [0, 0, 1, 2]})
            elif r < 0.86:
                v = self.emit("batch_normalization", [v, self.made_const([c]), self.const([c], "positive")],
                              {"axis": 1})
            elif r < 0.9:
                v = self.emit("instance_normalization", [v], {"layout": "nchw"})
            elif r < 0.95:  # a reshape that mixes axes, two rank-3 transposes inside
                t = self.emit("reshape", [v], {"new_shape": [n, c, h * w]})
                t = self.emit("transpose", [t], {"permutation": [0, 2, 1]})
                t = self.emit("transpose", [self.emit("relu", [t])] if self.p(0.3) else [t], {"permutation": [0, 2, 1]})
                v = self.emit("reshape", [t], {"new_shape": [n, c, h, w]})
            else:  # an NHWC conv in the region
                t = self.conv(self.emit("transpose", [v], {"permutation": [0, 2, 3, 1]}), "nhwc")
                v = self.emit("transpose", [t], {"permutation": [0, 3, 1, 2]})
            if self.p(0.1):
                self.output(v)  # a graph output in the middle
            elif self.p(0.08):
                self.output(self.emit("neg", [v]))  # a second reader outside the region
        if layout == "nhwc":
            n, c, h, w = self.shape(v)
            if c == 1 or h == w == 1:
                return self.emit("reshape", [v], {"new_shape": [n, h, w, c]}), layout  # equal to a transpose
            return self.emit("transpose", [v], {"permutation": [0, 2, 3, 1]}), layout
        return v, layout
    def motif_heads(self, v, layout):
        """Detector heads: two pointwise convs (one of a downsampled ``v``) reshaped to
        ``[N, rows, k]`` and concatenated along the rows (``concat_in_place``); near misses: a
        batch of 2, a head also read elsewhere or output, blocks at misaligned offsets (their
        sizes drawn)."""
        shape = self.shape(v)
        small = self.emit("max_pool2d", [v], {"window_dimensions": [2, 2], "strides": [2, 2], "layout": layout,
                                               "padding": [0, 1, 0, 1]})
        k = self.pick((1, 2))
        rows = []
        for x in (v, small):
            c = self.conv(x, layout, pointwise=True, O=k * self.pick((1, 2, 3)))
            n = int(np.prod(self.shape(c)))
            if self.p(0.1):
                self.output(c)  # read twice
            rows.append(self.emit("reshape", [c], {"new_shape": [shape[0], n // (shape[0] * k), k]}))
        y = self.emit("concat", rows, {"axis": 1})
        self.output(self.emit("sigmoid", [y]) if self.p(0.5) else y)
        return v, layout

    def motif_depth_to_space(self, v, layout):
        """A depthwise conv's output rearranged by a depth_to_space with 2 x 2 blocks (reshape,
        transpose, reshape: TensorFlow's order), the conv storing it (``store_depth_to_space``);
        near misses: 1, 2 or 3 channels per block position, the conv's output also a graph
        output, ONNX's CRD order, NCHW."""
        C = self.pick((16, 32, 48, 4, 8, 12))
        x = self.conv(v, layout, pointwise=True, O=C)
        c = self.conv(x, layout, depthwise=True)
        if layout != "nhwc":
            return c, layout
        if self.p(0.1):
            self.output(c)  # read twice
        n, h, w, o = self.shape(c)
        if o % 4:
            return c, layout
        if self.p(0.2):  # CRD: [N, H, W, C', 2, 2] -> [N, H, 2, W, 2, C']
            r = self.emit("reshape", [c], {"new_shape": [n, h, w, o // 4, 2, 2]})
            t = self.emit("transpose", [r], {"permutation": [0, 1, 4, 2, 5, 3]})
        else:
            r = self.emit("reshape", [c], {"new_shape": [n, h, w, 2, 2, o // 4]})
            t = self.emit("transpose", [r], {"permutation": [0, 1, 3, 2, 4, 5]})
        return self.emit("reshape", [t], {"new_shape": [n, 2 * h, 2 * w, o // 4]}), layout

    def motif_pool_residual(self, v, layout):
        """A strided block's residual: a depthwise conv of ``v`` and a pointwise one, plus a
        windowed pool of ``v`` (2x2/2, 3x3/2 padded, 1x1; maybe channel-padded with zeros)
        (``fuse_pool_residual``), now and then the pool ahead of the convs (it hosts the add
        itself); near misses: the pool read twice or a graph output, an average pool whose
        windows reach the padding, a 4x4 window."""
        shape = self.shape(v)
        rank_c, rank_h = (3, 1) if layout == "nhwc" else (1, 2)
        C, H, W = shape[rank_c], shape[rank_h], shape[rank_h + 1]
        op = self.pick(("max_pool2d", "max_pool2d", "average_pool2d"))
        win, st, pad = self.pick((([2, 2], 2, [0, 0, 0, 0]), ([3, 3], 2, [1, 1, 1, 1]), ([3, 3], 2, [0, 1, 0, 1]),
                                  ([1, 1], 1, [0, 0, 0, 0]), ([4, 4], 2, [1, 1, 1, 1])))
        if H + pad[0] + pad[1] < win[0] or W + pad[2] + pad[3] < win[1]:
            return v, layout
        extra = self.pick((0, 0, 4, 8))
        OH, OW = [(n + pad[2 * k] + pad[2 * k + 1] - win[k]) // st + 1 for k, n in enumerate((H, W))]

        def pool():
            p = self.emit(op, [v], {"window_dimensions": win, "strides": [st, st], "padding": pad, "layout": layout})
            if not extra:
                return p, p
            end = [0] * 4
            end[rank_c] = extra
            return p, self.emit("pad", [p], {"beginning_padding": [0] * 4, "ending_padding": end})

        first = self.p(0.2)
        if first:
            p, r = pool()
        t = self.emit("relu", [v]) if self.p(0.5) else v
        tot = [(OH - 1) * st + 3 - H, (OW - 1) * st + 3 - W]  # the depthwise 3x3's padding to match
        if all(0 <= n <= 4 for n in tot):
            flayout = self.pick(FILTER_LAYOUTS)
            attrs = {"padding": [tot[0] // 2, tot[0] - tot[0] // 2, tot[1] // 2, tot[1] - tot[1] // 2],
                     "strides": [st, st], "dilations": [1, 1], "groups": C, "input_layout": layout,
                     "filter_layout": flayout}
            c = self.emit("conv2d", [t, self.filt(C, 1, 3, 3, flayout)], attrs)
        else:
            c = self.conv(t, layout, depthwise=True)
        c = self.conv(c, layout, pointwise=True, O=C + extra)
        if not first:
            p, r = pool()
        if self.shape(c) != self.shape(r):
            self.output(r)
            return c, layout
        if self.p(0.15):
            self.output(p)  # read twice
        y = self.emit("add", [c, r] if self.p(0.5) else [r, c])
        if self.p(0.5):
            y = self.emit("prelu", [y, self.chan_operand(self.shape(y), layout)])
        return self.elementwise_tail(y, layout, 2), layout

    def motif_pw_depthwise(self, v, layout):
        """A pointwise conv and the depthwise conv reading its output, with their tails
        (``fuse_pw_depthwise``, on images up to 14 x 14); near misses: channels not a multiple of
        4, the pointwise output also a graph output, NCHW, a dense second conv."""
        h = self.elementwise_tail(self.conv(v, layout, pointwise=True, O=self.pick((8, 12, 16, 24, 32, 6))), layout, 1)
        if self.p(0.15):
            self.output(h)
        d = self.conv(h, layout, depthwise=self.p(0.85))
        return self.elementwise_tail(d, layout, 2), layout

    def motif_depthwise_relu(self, v, layout):
        """A residual sum read by the next sum and, through a relu, by one to three depthwise
        convs, each maybe followed by a pointwise projection (a ``depthwise_project`` pair)
        (``fuse_conv_input_relu``); near misses: the relu also a graph output or read twice, a
        sigmoid or a clamp (op(0) != 0 or not an input relu op), a dense conv among the
        readers, NCHW."""
        y = self.emit("add", [v, self.input(self.shape(v))])
        act = self.pick(("relu", "relu", "relu", "relu", "sigmoid", "clamp"))
        a = self.emit(act, [y], {"min_value": 0.0, "max_value": 6.0} if act == "clamp" else None)
        near = self.pick(("", "", "", "", "output", "twice"))
        if near == "output":
            self.output(a)
        for _ in range(self.pick((0, 0, 1, 2))):  # more readers: depthwise convs, maybe paired
            e = self.conv(a, layout, depthwise=self.p(0.9))
            self.output(self.conv(e, layout, pointwise=True, O=self.pick((8, 16))) if self.p(0.5) else e)
        d = self.conv(a, layout, depthwise=self.p(0.85))
        if near == "twice":
            d = self.emit("add", [d, a]) if self.shape(d) == self.shape(a) else d
        n = self.emit("add", [y, self.input(self.shape(y))])
        self.output(n)
        return self.elementwise_tail(d, layout, 2), layout

    def motif_preact(self, v, layout):
        """A residual sum read by the next sum and, through a pre-activation, by one to three
        convs, mostly pointwise (``fuse_conv_input_preact``): a per-channel mul, add or sub (each
        maybe) then a relu, a clamp or nothing, or a batch normalization maybe then a relu; near
        misses: a value of the chain also a graph output, a sigmoid, an operand read per element
        or computed, a windowed, depthwise or grouped reader, readers that are siblings, NCHW."""
        C = self.shape(v)[3] if layout == "nhwc" else self.shape(v)[1]
        y = self.emit("add", [v, self.input(self.shape(v))])
        a = y
        if self.p(0.3):
            a = self.emit("batch_normalization", [a, self.made_const([C]), self.const([C], "positive")],
                          {"axis": 3 if layout == "nhwc" else 1},
                          {"scale": self.made_const([C]), "bias": self.made_const([C])} if self.p(0.7) else {})
        else:
            for op in ("mul", "add", "sub"):
                if self.p(0.6 if op != "sub" else 0.2):
                    c = self.chan_operand(self.shape(a), layout) if self.p(0.9) else self.const(self.shape(a))
                    a = self.emit(op, [a, c])
        act = self.pick(("relu", "relu", "clamp", "", "sigmoid"))
        if act:
            a = self.emit(act, [a], {"min_value": self.pick((0.0, 0.5)), "max_value": 6.0} if act == "clamp" else None)
        if a is y:
            a = self.emit("relu", [y])
        if self.p(0.15):
            self.output(a)
        outs = []
        for i in range(self.pick((1, 1, 1, 2, 3))):
            outs.append(self.conv(a, layout, pointwise=i == 0 or self.p(0.5), O=self.pick((8, 16, 24)))
                        if self.p(0.85) else self.conv(a, layout, depthwise=True))
        for o in outs[1:]:
            self.output(o)
        self.output(self.emit("add", [y, self.input(self.shape(y))]))
        return self.elementwise_tail(outs[0], layout, 2), layout

    def motif_project_consumer(self, v, layout):
        """A depthwise conv, its pointwise projection and the projection's element-wise tail,
        read by a 1x1 conv with a tail of its own (``fuse_project_consumer``: the channel-lane
        kernel computes that conv as a second stage); near misses: an expansion in front, NCHW,
        channels not a multiple of 4, the consumer strided, padded, with a filter that is an
        input, or reading the projection twice (as its tail's operand), the projection's output
        also a graph output."""
        if self.p(0.15):  # a three-stage block: not the rule's pair
            v = self.conv(v, layout, pointwise=True, O=self.pick((8, 16)))
        d = self.elementwise_tail(self.conv(v, layout, depthwise=True), layout, 1)
        p = self.conv(d, layout, pointwise=True, O=self.pick((8, 12, 16, 24, 24, 5)))
        p = self.elementwise_tail(p, layout, 2)
        if self.p(0.15):
            self.output(p)
        O = self.pick((4, 8, 8, 16, 24, 6))
        near = self.pick(("", "", "", "", "", "stride", "pad", "input", "twice"))
        if near in ("stride", "pad", "input"):
            C = self.shape(p)[3] if layout == "nhwc" else self.shape(p)[1]
            fl = self.pick(FILTER_LAYOUTS)
            dims = {"o": O, "i": C, "h": 1, "w": 1}
            w = (self.input([dims[ch] for ch in fl], "filter") if near == "input"
                 else self.made_const([dims[ch] for ch in fl], "filter"))
            attrs = {"padding": [1, 0, 0, 1] if near == "pad" else [0, 0, 0, 0],
                     "strides": [2, 2] if near == "stride" else [1, 1], "dilations": [1, 1], "groups": 1,
                     "input_layout": layout, "filter_layout": fl}
            y = self.emit("conv2d", [p, w], attrs)
        else:
            y = self.conv(p, layout, pointwise=True, O=O)
        if near == "twice" and self.shape(y) == self.shape(p):
            y = self.emit("add", [y, p])
        return self.elementwise_tail(y, layout, 2), layout

    # -- the graph
    def graph4d(self, motif: str | None = None):
        """A 4-D input and one or two motifs of :data:`MOTIFS_4D` (drawn from the plan stream),
        or of ``motif`` alone."""
        layout = "nhwc" if self.p(0.7) else "nchw"
        N = 1 if self.p(0.85) else 2
        C, H, W = self.pick(CHANNELS), self.pick(SIZES), self.pick(SIZES)
        v = self.input((N, H, W, C) if layout == "nhwc" else (N, C, H, W))
        for _ in range(int(self.plan.integers(1, 3))):
            if int(np.prod(self.shape(v))) > 40000:
                break
            name = motif or MOTIFS_4D[int(self.plan.integers(len(MOTIFS_4D)))]
            v, layout = getattr(self, name)(v, layout)
        self.output(v)
        if motif is None:
            self.graph_siblings()

    def graph_siblings(self, force: bool = False):
        """Sometimes after a random 4-D graph (a draw of its own stream: the graph before it is as
        it was), always as the ``graph_siblings`` kind (``force``): a detector's heads
        (fuse_siblings), 2 or 3 NHWC convs of one input by constant filters, 1x1 or 3x3 with
        padding, each with a bias and the same activation; near misses: another stride, a computed
        filter, an activation on one only; or 2 or 3 dense layers on the same rows (near misses:
        3 rows, alpha 0.5)."""
        hr = np.random.default_rng([self.seed, 5])
        if hr.random() >= 0.3 and not force:
            return
        if hr.random() < 0.3:  # dense layers on the same rows (gemms by W^T with a bias; 3 rows: fuse_heads')
            M, K = int(hr.choice((3, 5, 16))), int(hr.choice((7, 12, 32)))
            x = self.input([M, K])
            for _ in range(int(hr.choice((2, 3)))):
                N, near = int(hr.choice((1, 3, 8, 12))), hr.random()
                attrs = {"alpha": 0.5 if near < 0.1 else 1.0, "beta": 1.0, "a_transpose": False, "b_transpose": True}
                self.output(self.emit("gemm", [x, self.const([N, K], "filter")], attrs, {"c": self.const([N])}))
            return
        C, H = int(hr.choice((8, 12, 16))), int(hr.choice((4, 6, 9)))
        k = int(hr.choice((1, 1, 3)))
        x = self.input([1, H, H, C])
        act = str(hr.choice(("", "relu", "sigmoid")))
        for _ in range(int(hr.choice((2, 3)))):
            O, near = int(hr.choice((1, 2, 5, 8, 12))), hr.random()
            s = 2 if near < 0.1 else 1
            w = self.input([O, k, k, C]) if 0.1 <= near < 0.2 else self.const([O, k, k, C], "filter")
            attrs = {"padding": [k // 2] * 4, "strides": [s, s], "dilations": [1, 1], "groups": 1,
                     "input_layout": "nhwc", "filter_layout": "ohwi"}
            v = self.emit("conv2d", [x, w], attrs, {"bias": self.const([O])})
            a = "relu" if near > 0.9 and act != "relu" else act
            self.output(self.emit(a, [v]) if a else v)

    def graph_matmul(self):
        """matmul / gemm with an epilogue (bias, residual, activations)."""
        M, K, N = self.pick((1, 3, 5, 8, 16)), self.pick((4, 7, 12)), self.pick((3, 4, 8, 12))
        if self.p(0.5):
            batch = [self.pick((1, 2, 3))] if self.p(0.5) else []
            swap = list(range(len(batch))) + [len(batch) + 1, len(batch)]
            kind = self.pick(("a", "a", "shared", "b", "other")) if self.p(0.5) else ""
            if kind in ("a", "shared"):  # fold_matmul_transpose, and a transpose that is also an output
                a = self.emit("transpose", [self.input(batch + [K, M])], {"permutation": swap})
                if kind == "shared":
                    self.output(a)
            elif kind == "other" and batch:  # a permutation that moves a batch dimension
                a = self.emit("transpose", [self.input([M] + batch + [K])], {"permutation": [1, 0, 2]})
            else:
                a = self.input(batch + [M, K])
            if kind == "b":  # a transposed B is not folded
                b = self.emit("transpose", [self.input(batch + [N, K])], {"permutation": swap})
            else:
                b = self.made_const([K, N], "filter") if self.p(0.7) else self.input([K, N])
            v = self.emit("matmul", [a, b])
        elif self.p(0.25):
            r = self.rng.random()
            if r < 0.5:
                return self.graph_unrolled_dense()
            if r < 0.7:
                return self.graph_feed_forward()
            return self.graph_sequence_dense() if r < 0.85 else self.graph_dense_chain()
        else:
            at, bt = self.p(0.3), self.p(0.3)
            a = self.input([K, M] if at else [M, K])
            b = self.made_const([N, K] if bt else [K, N], "filter")
            kw = {}
            if self.p(0.6):
                kw["c"] = self.made_const(self.pick(([N], [1, N], [M, N], [])))
            attrs = {"alpha": self.pick((1.0, 0.5)), "beta": self.pick((1.0, -2.0)), "a_transpose": at,
                     "b_transpose": bt}
            v = self.emit("gemm", [a, b], attrs, kw)
            if M == 1 and self.p(0.5):  # another dense layer on the row (fuse_dense_chain)
                N2 = self.pick((3, 8))
                v = self.emit("gemm", [v, self.made_const([N2, N], "filter")],
                              {"alpha": 1.0, "beta": 1.0, "a_transpose": False, "b_transpose": True},
                              {"c": self.made_const([N2])})
                N = N2
            if self.p(0.3):  # a classifier's last dense layer (fuse_matmul_softmax)
                v = self.emit("softmax", [v], {"axis": 1})
        self.output(self.elementwise_tail(v, None, 4))
        self.graph_heads()

    def graph_heads(self, force: bool = False):
        """Sometimes (a draw of its own generator: the graph before it is as it was), or with
        ``force``, a network's heads (fuse_heads): 2 or 3 dense layers on the same few rows with a
        long reduction, each with its bias and activation; near misses: 4 rows, a computed
        weight, a residual of an input."""
        hr = np.random.default_rng([self.seed, 2])
        if hr.random() >= 0.3 and not force:
            return
        M, K = int(hr.choice((1, 2, 3, 3, 4))), int(hr.choice((256, 300, 517)))
        x = self.input([M, K])
        for _ in range(int(hr.choice((2, 3)))):
            N = int(hr.choice((1, 5, 63, 600)))
            kind = hr.random()
            if kind < 0.15:  # a computed weight
                v = self.emit("matmul", [x, self.input([K, N])])
            elif kind < 0.5:
                v = self.emit("matmul", [x, self.const([K, N], "filter")])
            else:
                kw = {"c": self.const([N])}
                if kind > 0.9:  # a residual of an input: a gemm's c of [M, N]
                    kw = {"c": self.input([M, N])}
                v = self.emit("gemm", [x, self.const([N, K], "filter")],
                              {"alpha": 1.0, "beta": 1.0, "a_transpose": False, "b_transpose": True}, kw)
            act = hr.choice(("", "sigmoid", "relu"))
            self.output(self.emit(str(act), [v]) if act else v)

    def graph_pooled_head(self, force: bool = False):
        """Sometimes (a draw of its own generator), or with ``force``, a classifier's head
        (fuse_pooled_head): an NHWC image (maybe a pointwise or depthwise conv's output, whose
        partial sums the pool then reads) pooled globally, reshaped, a dense layer with a bias
        (or a 1x1 conv on the pooled pixel), maybe a softmax; near misses: a batch of 2, a
        windowed pool, the pool also an output, a computed weight, a transpose between."""
        hr = np.random.default_rng([self.seed, 5])
        if hr.random() >= 0.3 and not force:
            return
        near = str(hr.choice(("", "", "", "", "batch", "window", "output", "weight", "transpose")))
        H, W, C = int(hr.choice((1, 2, 3, 4))), int(hr.choice((2, 3, 5))), int(hr.choice((256, 260, 300, 516)))
        x = self.input([2 if near == "batch" else 1, H, W, C])
        kind = hr.random()
        if kind < 0.25:
            x = self.emit("conv2d", [x, self.const([C, 1, 1, C], "filter")],
                          {"input_layout": "nhwc", "filter_layout": "ohwi"})
        elif kind < 0.5:
            x = self.emit("conv2d", [x, self.const([C, 3, 3, 1], "filter")],
                          {"input_layout": "nhwc", "filter_layout": "ohwi", "groups": C, "padding": [1, 1, 1, 1]})
            self.output(x)  # read by the pool and elsewhere: the conv pools it (fuse_conv_pool)
        win = [H, max(1, W - 1)] if near == "window" else [H, W]
        p = self.emit("average_pool2d", [x], {"layout": "nhwc", "window_dimensions": win})
        if near == "output":
            self.output(p)
        N = int(hr.choice((1, 10, 17, 63, 120)))
        rows = int(np.prod(self.shape(p))) // C
        if near == "transpose":
            p = self.emit("transpose", [p], {"permutation": [0, 3, 1, 2]})
        if hr.random() < 0.3 and near not in ("transpose", "weight"):  # a 1x1 conv on the pooled pixel
            v = self.emit("conv2d", [p, self.const([N, 1, 1, C], "filter")],
                          {"input_layout": "nhwc", "filter_layout": "ohwi"}, {"bias": self.const([N])})
        else:
            a = self.emit("reshape", [p], {"new_shape": [rows, C]})
            b = self.input([N, C]) if near == "weight" else self.const([N, C], "filter")
            v = self.emit("gemm", [a, b], {"alpha": 1.0, "beta": 1.0, "a_transpose": False, "b_transpose": True},
                          {"c": self.const([N])})
        act = str(hr.choice(("", "", "relu", "sigmoid", "softmax")))
        if act == "softmax":
            v = self.emit("softmax", [v], {"axis": len(self.shape(v)) - 1})
        elif act:
            v = self.emit(act, [v])
        self.output(v)

    def graph_unrolled_dense(self):
        """A dense layer applied row by row (an unrolled TimeDistributed): slice, reshape, gemm
        with one shared matrix and bias, an activation, concat (stack_shared_gemms); near
        misses: rows out of order, another matrix for one row, a row read elsewhere."""
        T, K, N = self.pick((2, 3, 4)), self.pick((4, 7)), self.pick((3, 8))
        x = self.emit("relu", [self.input([T, 1, K])])
        b, c = self.made_const([N, K], "filter"), self.made_const([N])
        act = self.pick(("relu", "sigmoid", ""))
        near = self.pick(("", "", "order", "other", "read"))
        order = list(range(T))
        if near == "order":
            order[0], order[1] = order[1], order[0]
        rows = []
        for i in order:
            r = self.emit("reshape", [self.emit("slice", [x], {"starts": [i, 0, 0], "sizes": [1, 1, K],
                                                                "strides": [1, 1, 1]})], {"new_shape": [1, K]})
            w = self.made_const([N, K], "filter") if near == "other" and i == order[-1] else b
            g = self.emit("gemm", [r, w], {"alpha": 1.0, "beta": 1.0, "a_transpose": False, "b_transpose": True},
                          {"c": c})
            if act:
                g = self.emit(act, [g])
            if near == "read" and i == order[0]:
                self.output(g)
            rows.append(self.emit("reshape", [g], {"new_shape": [1, 1, N]}))
        self.output(self.emit("concat", rows, {"axis": 0}))

    def graph_sequence_dense(self):
        """A dense layer over a sequence as TFLite's converter writes it (sink_reshapes): ``[B,
        T, K]`` reshaped to ``[B T, K]``, the product (a matmul, or a gemm with its bias),
        reshaped back, then an activation, an operand and a residual add; near misses: the
        reshape back also an output, an operand varying along the axis the reshape splits."""
        B, T, K = self.pick((1, 2)), self.pick((3, 5, 8)), self.pick((4, 8))
        N = K if self.p(0.6) else self.pick((3, 8))
        x = self.input([B, T, K])
        r = self.emit("reshape", [x], {"new_shape": [B * T, K]})
        if self.p(0.5):
            y = self.emit("matmul", [r, self.made_const([K, N], "filter")])
        else:
            y = self.emit("gemm", [r, self.made_const([N, K], "filter")],
                          {"alpha": 1.0, "beta": 1.0, "a_transpose": False, "b_transpose": True},
                          {"c": self.made_const([N])})
        y = self.emit("reshape", [y], {"new_shape": [B, T, N]})
        near = self.pick(("", "", "", "output", "split"))
        if near == "output":
            self.output(y)
        y = self.emit(self.pick(("relu", "sigmoid", "gelu", "tanh")), [y])
        shp = [B, T, 1] if near == "split" else self.pick(([N], [1, 1, N], []))
        y = self.emit(self.pick(("add", "mul")), [y, self.made_const(shp)])
        if N == K and self.p(0.7):
            y = self.emit("add", [y, x] if self.p(0.5) else [x, y])
        self.output(self.elementwise_tail(y, None, 2))

    def graph_dense_chain(self):
        """Two to four one-row dense layers in a row, each with a bias and maybe an activation
        (fuse_dense_chain); near misses: a layer's output also read elsewhere or output, a
        transposed A, a weight that is an input."""
        K = self.pick((4, 7, 12, 300))
        v = self.input([K, 1]) if self.p(0.1) else self.input([1, K])
        for i in range(int(self.rng.integers(2, 5))):
            N = self.pick((3, 8, 12, 64))
            at = len(self.shape(v)) == 2 and self.shape(v)[1] == 1
            w = self.input([K, N]) if self.p(0.05) else self.made_const([K, N], "filter")
            if self.p(0.5) or at:
                v = self.emit("gemm", [v, w], {"alpha": 1.0, "beta": 1.0, "a_transpose": at, "b_transpose": False},
                              {"c": self.made_const([N])})
            else:
                v = self.emit("add", [self.emit("matmul", [v, w]), self.made_const([N])])
            act = self.pick(("relu", "sigmoid", "tanh", ""))
            if act:
                v = self.emit(act, [v])
            if self.p(0.1):
                self.output(v)
            K = N
        self.output(v)

    def graph_feed_forward(self):
        """Two products in a row (fuse_mlp): matmul + bias + activation, then matmul + bias (+ a
        residual add of x); near misses: the hidden value also an output or read by a second
        product, too few rows for the fused kernel."""
        M, K, H, N = self.pick((64, 64, 128, 24)), self.pick((8, 12)), self.pick((8, 16)), self.pick((4, 8))
        x = self.input([M, K])
        h = self.emit("add", [self.emit("matmul", [x, self.made_const([K, H], "filter")]), self.made_const([H])])
        h = self.emit(self.pick(("relu", "gelu", "sigmoid")), [h])
        near = self.pick(("", "", "output", "second"))
        if near == "output":
            self.output(h)
        elif near == "second":
            self.output(self.emit("matmul", [h, self.made_const([H, 4], "filter")]))
        y = self.emit("add", [self.emit("matmul", [h, self.made_const([H, N], "filter")]), self.made_const([N])])
        if N == K and self.p(0.5):
            y = self.emit("add", [y, x])
        self.output(y)

    def graph_attention(self):
        """softmax(q k^T * scale + mask) v, with epilogues on both matmuls."""
        T, D = self.pick((3, 5, 8)), self.pick((4, 8))
        batch = [2] if self.p(0.3) else []
        q = self.input(batch + [T, D])
        k = self.made_const([D, T], "filter") if self.p(0.5) else self.input(batch + [D, T])
        s = self.emit("matmul", [q, k])
        s = self.emit("mul", [s, self.made_const([])] if self.p(0.5) else [self.made_const([]), s])
        if self.p(0.5):
            s = self.emit("add", [s, self.input([T, T])])
        s = self.emit("softmax", [s], {"axis": len(batch) + 1})
        v = self.made_const([T, D], "filter")
        self.output(self.elementwise_tail(self.emit("matmul", [s, v]), None, 3))

    def graph_layer_norm(self):
        """A decomposed layer normalization (the ONNX form, or tf.nn.batch_normalization's) and
        its near misses: an intermediate value read elsewhere or output, the variance's mean
        over other axes, an epsilon that is an input, a scale varying along a kept axis."""
        shape = [self.pick((1, 2)), self.pick((3, 5)), self.pick((4, 8, 12))]
        axes = self.pick(([2], [1, 2]))
        C = [shape[a] for a in axes]
        miss = self.pick((None, None, None, None, "reader", "output", "axes", "eps", "scale"))
        if self.p(0.4):  # the rows of a product (fuse_matmul_layer_norm)
            K = self.pick((4, 7))
            x = self.emit("matmul", [self.input(shape[:-1] + [K]), self.made_const([K, shape[-1]], "filter")])
        else:
            x = self.input(shape)

        def mean(v, ax):
            if self.n % 4 == 3:  # as jax2tf writes a mean: a sum scaled by 1/n or divided by n (sum_to_mean);
                # chosen by the op count, not a draw, so that the draws of the graphs stay as they were
                n = int(np.prod([shape[a] for a in ax]))
                s = self.emit("reduce_sum", [v], {"axes": ax, "keep_dimensions": True})
                if self.n % 2:
                    return self.emit("mul", [s, self.const([1], f"value:{1 / n!r}")])
                return self.emit("div", [s, self.const([1], f"value:{float(n)!r}")])
            return self.emit("reduce_mean", [v], {"axes": ax, "keep_dimensions": True})

        def param(dist):
            if miss == "scale" and dist == "positive":
                return self.const([shape[1], 1], dist)  # varies along axis 1 (kept when axes == [2])
            return self.made_const(self.pick((C, [1] * (3 - len(C)) + C)), dist)

        m = mean(x, axes)
        d = self.emit("sub", [x, m])
        sq = self.emit("mul", [d, d]) if self.p(0.6) else self.emit("pow", [d, self.const([], "value:2")])
        v = mean(sq, ([1, 2] if axes == [2] else [2]) if miss == "axes" else axes)
        eps = self.input([], "positive") if miss == "eps" else self.const([], self.pick(("value:1e-05", "value:0.001")))
        e = self.emit("add", [v, eps] if self.p(0.7) else [eps, v])
        if miss == "reader":
            self.output(self.emit("neg", [self.pick((d, v, e))]))
        elif miss == "output":
            self.output(self.pick((m, d, v)))
        if self.p(0.3):  # tf.nn.batch_normalization's form
            r = self.emit("reciprocal", [self.emit("sqrt", [e])])
            i = self.emit("mul", [r, param("positive")]) if self.p(0.7) else r
            mi = self.emit("mul", [m, i])
            c = self.emit("sub", [param("normal"), mi]) if self.p(0.7) else self.emit("neg", [mi])
            y = self.emit("add", [self.emit("mul", [x, i]), c])
        else:
            form = self.pick(("div", "rsqrt", "pow"))
            if form == "div":
                y = self.emit("div", [d, self.emit("sqrt", [e])])
            elif form == "rsqrt":
                y = self.emit("mul", [self.emit("reciprocal", [self.emit("sqrt", [e])]), d])
            else:
                y = self.emit("mul", [d, self.emit("pow", [e, self.const([], "value:-0.5")])])
            if self.p(0.7):
                y = self.emit("mul", [y, param("positive")] if self.p(0.5) else [param("positive"), y])
            if self.p(0.7):
                y = self.emit("add", [y, param("normal")] if self.p(0.5) else [param("normal"), y])
        self.output(self.elementwise_tail(y, None, 2))

    def graph_layout_chain(self):
        """A chain of 2 to 4 layout operators on a 3-D input (fuse_remap_chain): strided or
        reversing slices, reverses, transposes, expands, tiles, pads (constant, edge,
        reflection) and reshapes between them, each drawn on the shape so far; near misses:
        a value in the middle also an output or read by a relu, a reshape to 2-D between; now and
        then the chain's value concatenated after a slice of the input (both flattened: the
        kernels may write their blocks of the concat, concat_in_place)."""
        v = self.input([self.pick((1, 2, 3)), self.pick((4, 5, 8, 9)), self.pick((3, 7, 8, 16))])
        for _ in range(int(self.rng.integers(2, 5))):
            shape = self.shape(v)
            r = len(shape)
            op = self.pick(("slice", "slice", "reverse", "transpose", "expand", "tile", "pad", "reshape"))
            if op == "slice":
                starts = [int(self.rng.integers(0, d)) for d in shape]
                sizes = [int(self.rng.integers(1, d - s + 1)) for d, s in zip(shape, starts)]
                v = self.emit("slice", [v], {"starts": starts, "sizes": sizes,
                                             "strides": [self.pick((1, 1, 2, 3)) for _ in shape]})
            elif op == "reverse":
                v = self.emit("reverse", [v], {"axes": [a for a in range(r) if self.p(0.6)]})
            elif op == "transpose":
                v = self.emit("transpose", [v], {"permutation": [int(a) for a in self.rng.permutation(r)]})
            elif op == "expand":
                v = self.emit("expand", [v], {"new_shape": [2, *(self.pick((1, 3)) if d == 1 else d for d in shape)]})
            elif op == "tile":
                v = self.emit("tile", [v], {"repetitions": [self.pick((1, 2, 3)) for _ in shape]})
            elif op == "pad":
                mode = self.pick(("constant", "edge", "reflection"))
                hi = [min(2, d - 1) if mode == "reflection" else 2 for d in shape]
                attrs = {"beginning_padding": [int(self.rng.integers(0, h + 1)) for h in hi],
                         "ending_padding": [int(self.rng.integers(0, h + 1)) for h in hi], "mode": mode}
                if mode == "constant":
                    attrs["value"] = self.pick((0.0, 1.5))
                v = self.emit("pad", [v], attrs)
            else:
                v = self.emit("reshape", [v], {"new_shape": [shape[0] * shape[1], *shape[2:]] if r > 2
                                               else [shape[0], 1, shape[1]]})
            if self.p(0.1):
                self.output(self.emit("relu", [v]) if self.p(0.5) else v)
        if self.p(0.3):  # the chain's value and a slice of the input, flattened and concatenated (concat_in_place)
            x = self.decls[0][1]
            n, c, w = self.shape(x)
            s = self.emit("slice", [x], {"starts": [0, c - 1, 0], "sizes": [n, 1, w]})
            parts = [self.emit("reshape", [u], {"new_shape": [1, int(np.prod(self.shape(u)))]}) for u in (s, v)]
            v = self.emit("concat", parts, {"axis": 1})
        self.output(v)

    def graph_elementwise(self):
        shape = tuple(self.pick(SIZES[:5]) for _ in range(int(self.rng.integers(1, 5))))
        v = self.input(shape)
        self.output(self.elementwise_tail(v, None, 6))


#: the motifs :meth:`Gen.graph4d` draws from, each as likely (a 4-D value in, one out); more
#: are reached from inside them (``motif_pool``: ``motif_depth_to_space``, ``motif_heads``,
#: ``motif_pool_residual``); ``motif_pw_depthwise``, ``motif_depthwise_relu`` and ``motif_preact`` only through
#: :data:`RULE_MOTIFS`
MOTIFS_4D = ("motif_conv", "motif_conv_input", "motif_squeeze_excite", "motif_inverted_residual", "motif_pool",
             "motif_upsample", "motif_first_layer", "motif_pad", "motif_norm", "motif_transposed_layer",
             "motif_layout_region", "motif_project_consumer", "motif_long_filter")
#: the whole-graph generators and their shares of the graphs
GRAPH_KINDS = (("graph4d", 0.8), ("graph_matmul", 0.07), ("graph_attention", 0.06), ("graph_layer_norm", 0.035),
               ("graph_elementwise", 0.035))
#: what :func:`generate`'s ``motif`` may name besides the 4-D motifs (every ``motif_*`` method)
#: and :data:`GRAPH_KINDS`: matmul graphs' own forms
OTHER_KINDS = ("graph_unrolled_dense", "graph_feed_forward", "graph_sequence_dense", "graph_dense_chain", "graph_heads",
               "graph_siblings", "graph_pooled_head", "graph_layout_chain")
#: every name :func:`generate`'s ``motif`` takes
KINDS = (tuple(m for m in vars(Gen) if m.startswith("motif_")) + tuple(k for k, _ in GRAPH_KINDS if k != "graph4d")
         + OTHER_KINDS)

#: the motif (a :func:`generate` ``motif``) whose graphs exercise each rule, for
#: ``test_the_generator_reaches_every_rule``: each rule is reached by graphs made for it, so a
#: new motif cannot take another rule's coverage away
RULE_MOTIFS = {
    "fold_constants": "motif_inverted_residual", "merge_duplicates": "motif_heads", "self_add_to_scale": "motif_pool",
    "fold_matmul_transpose": "graph_matmul", "fold_matmul_views": "graph_matmul",
    "nhwc_regions": "motif_transposed_layer", "nchw_conv_to_nhwc": "motif_inverted_residual",
    "compose_transposes": "motif_layout_region", "depthwise_to_scale": "motif_transposed_layer",
    "fuse_layer_norm": "graph_layer_norm", "sum_to_mean": "graph_layer_norm", "mean_to_pool": "motif_squeeze_excite",
    "merge_reshapes": "motif_squeeze_excite",
    "swap_resample_conv": "motif_upsample", "fuse_hard_swish": "motif_conv", "fuse_swish": "motif_conv",
    "sink_reshapes": "graph_sequence_dense", "split_batch_norm": "motif_norm", "fuse_epilogue": "motif_conv",
    "fold_layout": "motif_pad", "stack_shared_gemms": "graph_unrolled_dense", "fuse_attention": "graph_attention",
    "fuse_matmul_layer_norm": "graph_layer_norm", "fuse_matmul_softmax": "graph_matmul",
    "fuse_dense_chain": "graph_dense_chain", "fuse_conv_input": "motif_conv_input", "fuse_pool_input": "motif_pool",
    "fuse_conv_upsample": "motif_upsample", "fuse_conv_pool": "motif_inverted_residual",
    "fuse_depthwise_project": "motif_inverted_residual", "fuse_pool_partials": "motif_first_layer",
    "fuse_squeeze_excite": "motif_squeeze_excite", "fuse_pool_map": "motif_pool", "fuse_concat_map": "motif_conv",
    "fuse_pool_residual": "motif_pool_residual", "fuse_upsampled_residual": "motif_upsample",
    "fuse_mlp": "graph_feed_forward", "fuse_heads": "graph_heads", "fuse_elementwise": "graph_elementwise",
    "store_depth_to_space": "motif_depth_to_space", "concat_in_place": "motif_heads",
    "fuse_project_consumer": "motif_project_consumer", "fuse_siblings": "graph_siblings",
    "fuse_pw_depthwise": "motif_pw_depthwise", "fuse_pooled_head": "graph_pooled_head",
    "fuse_conv_input_relu": "motif_depthwise_relu", "fuse_remap_chain": "graph_layout_chain",
    "fuse_conv_input_preact": "motif_preact", "conv_columns_to_channels": "motif_long_filter",
}


def generate(seed: int, index: int, motif: str | None = None, dtype: str = "float32") -> dict:
    """The description of graph ``index`` of ``seed``: a graph kind of :data:`GRAPH_KINDS`
    by its share, a 4-D graph's motifs each as likely; with ``motif`` (a name of :data:`KINDS`)
    a graph of that kind or motif alone, whose draws depend on that motif's code only. The
    kinds and motifs are drawn from a stream of their own (the plan, ``default_rng([seed,
    3])``): the values a graph's first motif draws do not depend on how many motifs there are
    to choose from. ``dtype="float16"`` makes the same graph a float16 one (its inputs,
    constants and casts; the same draws)."""
    g = Gen(seed * 100003 + index)
    if motif is None:
        r, top = g.plan.random(), 0.0
        for kind, share in GRAPH_KINDS:
            top += share
            if r < top:
                break
        getattr(g, kind)()
    elif motif not in KINDS:
        raise ValueError(f"{motif!r} is none of graphs.KINDS")
    elif motif.startswith("motif_"):
        g.graph4d(motif)
    elif motif in ("graph_heads", "graph_siblings", "graph_pooled_head"):
        getattr(g, motif)(force=True)
    else:
        getattr(g, motif)()
    if not g.outputs:  # (every op drawn was none)
        g.output(g.emit("relu", [g.decls[0][1]]))
    desc = g.description()
    if dtype != "float32":
        desc["dtype"] = dtype
    return desc


# ---------------------------------------------------------------- running and blaming
@contextmanager
def passes(spec: str | None):
    """``WEBNN_GPU_PASSES=spec`` for the duration (None: unset); no warm-up run at build, so a
    kernel reading a buffer before it is written shows on the first run."""
    saved = {k: os.environ.get(k) for k in ("WEBNN_GPU_PASSES", "WEBNN_GPU_WARMUP")}
    if spec is None:
        os.environ.pop("WEBNN_GPU_PASSES", None)
    else:
        os.environ["WEBNN_GPU_PASSES"] = spec
    os.environ["WEBNN_GPU_WARMUP"] = "0"
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _build(ctx, desc: dict, data: dict):
    """The description's builder calls: (builder, name -> operand, graph input feeds)."""
    import webnn_gpu as webnn

    b = webnn.MLGraphBuilder(ctx)
    dtype = desc.get("dtype", "float32")
    env, feeds = {}, {}
    for kind, name, shape, _ in desc["decls"]:
        if kind == "input":
            env[name] = b.input(name, {"data_type": dtype, "shape": list(shape)})
            feeds[name] = data[name]
        else:
            env[name] = b.constant(data[name])
    for node in desc["nodes"]:
        fn = getattr(b, node["op"])
        args = [env[n] for n in node["in"]]
        kws = {k: env[n] for k, n in node.get("kw", {}).items()}
        attrs = node.get("attrs", {})
        if node["op"] == "cast":  # (a float16 graph's casts of float16 constants are to float16)
            attrs = {**attrs, "type": dtype}
        env[node["out"]] = fn(args, **attrs) if node["op"] in LIST_INPUT else fn(*args, **attrs, **kws)
    return b, env, feeds


def run(ctx, desc: dict, data: dict | None = None) -> dict:
    """Build the description with MLGraphBuilder and compute it: {output: float32 array}."""
    b, env, feeds = _build(ctx, desc, data or declared_data(desc))
    graph = b.build({name: env[name] for name in desc["outputs"]})
    try:
        return ctx.compute(graph, {n: feeds[n] for n in graph.inputs})
    finally:
        graph.destroy()


def fired(ctx, desc: dict) -> set:
    """The passes that change the description's graph (run on its IR; no kernels built)."""
    from webnn_gpu.compiler import driver
    from webnn_gpu.compiler.rules.cleanup import dead_code

    b, env, _ = _build(ctx, desc, declared_data(desc))
    outputs = {name: env[name]._value for name in desc["outputs"]}
    nodes, changed = list(b._nodes), set()
    for p in (r.fn for r in driver.rules()):
        new = p(nodes, outputs, ctx)
        if p is not dead_code and (len(new) != len(nodes) or any(a is not c for a, c in zip(new, nodes))):
            changed.add(p.__name__)
        nodes = new
    return changed


def compare(got: dict, ref: dict, tolerance: float = TOLERANCE, room: dict | None = None) -> str:
    """'' when every output is within ``tolerance`` of the reference (plus ``room``, per element:
    :func:`slack`), else what differs."""
    bad = []
    for name, r in ref.items():
        g = np.asarray(got[name], np.float64)
        if g.shape != r.shape:
            bad.append(f"{name}: shape {list(g.shape)} != {list(r.shape)}")
            continue
        scale = max(1.0, float(np.max(np.abs(r))) if r.size else 1.0)
        err = np.abs(g - r)
        tol = tolerance * scale + (room[name] if room is not None else 0.0)
        if not np.all(err <= tol):  # (NaN fails too)
            k = int(np.nanargmax(np.where(np.isnan(err), np.inf, err)))
            t = np.broadcast_to(tol, err.shape).reshape(-1)[k]
            bad.append(f"{name}: {int(np.sum(~(err <= tol)))} of {r.size} elements off (worst at flat index {k}: "
                       f"got {g.reshape(-1)[k]:.6g}, reference {r.reshape(-1)[k]:.6g}; tolerance {t:.3g})")
    return "; ".join(bad)


def attempt(ctx, desc: dict, spec: str | None, ref: dict, room: dict | None = None) -> str:
    """'' when the graph builds, runs and matches under ``WEBNN_GPU_PASSES=spec``, else why not."""
    with passes(spec):
        try:
            got = run(ctx, desc)
        except Exception as exc:  # noqa: BLE001 (a build error is a finding, named in the report)
            return f"{type(exc).__name__}: {exc}"
    return compare(got, ref, TOLERANCE_16 if desc.get("dtype") == "float16" else TOLERANCE, room)


@dataclass
class Finding:
    """A graph the compiler gets wrong: what went wrong, and which passes are at fault."""

    seed: int
    index: int
    desc: dict
    problem: str
    passes_off: str  # '' when right with every pass off
    culprits: list
    motif: str = ""  # the generate() motif that made it ('' for a random graph)

    def report(self) -> str:
        if self.passes_off:
            blame = f"wrong with every pass off too ({self.passes_off}): a kernel's fault, not a rule's"
        elif self.culprits:
            blame = "right with every pass off; right with only " + " or ".join(self.culprits) + " off"
        else:
            blame = "right with every pass off; no single pass off fixes it (several rules together)"
        return (f"fuzz graph {self.index} of seed {self.seed}: {self.problem}\n  {blame}\n"
                f"  reproduce: cd tests && python -m fuzz.graphs {self.seed} {self.index}"
                f"{' --motif ' + self.motif if self.motif else ''}"
                f"{' --dtype ' + self.desc['dtype'] if 'dtype' in self.desc else ''}\n"
                f"  description: {json.dumps(self.desc)}")


def check(ctx, seed: int, index: int, desc: dict | None = None, motif: str | None = None,
          dtype: str = "float32") -> Finding | None:
    """Run one graph (``desc``, or graph ``index`` of ``seed`` made by :func:`generate` with
    ``motif`` and ``dtype``); on a problem, find the passes at fault (see the module docstring)."""
    from webnn_gpu.compiler import driver
    from webnn_gpu.compiler.rules.cleanup import dead_code

    desc = desc or generate(seed, index, motif, dtype)
    rules = [r.fn for r in driver.rules()]  # (the order now: a test may add a rule)
    ref = reference(desc)
    room = slack(desc, ref)
    problem = attempt(ctx, desc, None, ref, room)
    if not problem:
        return None
    every = ",".join("-" + p.__name__ for p in rules)  # (WEBNN_GPU_PASSES=-all)
    off = attempt(ctx, desc, every, ref, room)
    culprits = []
    if not off:
        for p in rules:
            if p is not dead_code and not attempt(ctx, desc, "-" + p.__name__, ref, room):
                culprits.append(p.__name__)
    return Finding(seed, index, desc, problem, off, culprits, motif or "")


def fuzz(ctx, seeds, count: int, deadline: float | None = None, on_graph=None,
         dtype: str = "float32") -> tuple[int, list]:
    """Check ``count`` graphs of each seed (until ``deadline``, a time.monotonic() value) in
    ``dtype``: (graphs checked, findings)."""
    done, findings = 0, []
    for seed in seeds:
        for index in range(count):
            if deadline is not None and time.monotonic() > deadline:
                return done, findings
            f = check(ctx, seed, index, dtype=dtype)
            done += 1
            if f is not None:
                findings.append(f)
            if on_graph is not None:
                on_graph(seed, index, f, done)
    return done, findings


def main(argv=None) -> int:
    import argparse

    import webnn_gpu as webnn

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("seed", type=int, nargs="?", help="seed of the generated graph")
    ap.add_argument("index", type=int, nargs="?", default=0, help="index of the graph under the seed")
    ap.add_argument("--json", help="a file holding a graph description to check instead")
    ap.add_argument("--count", type=int, default=1, help="check this many graphs from INDEX on")
    ap.add_argument("--motif", choices=KINDS, help="graphs of this motif or kind alone (generate's motif)")
    ap.add_argument("--dtype", choices=("float32", "float16"), default="float32", help="the graphs' float type")
    args = ap.parse_args(argv)
    ctx = webnn.ml.create_context()
    if args.json:
        with open(args.json) as fh:
            desc = json.load(fh)
        f = check(ctx, desc.get("seed", 0), -1, desc)
        print(f.report() if f else "right")
        return 1 if f else 0
    bad = 0
    for i in range(args.index, args.index + args.count):
        desc = generate(args.seed, i, args.motif, args.dtype)
        f = check(ctx, args.seed, i, desc, args.motif)
        print(f.report() if f else f"graph {i} of seed {args.seed}: right ({len(desc['nodes'])} nodes)")
        bad += f is not None
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
