"""A float64 NumPy evaluator of hand-made graph IR (the operators the layout and normalization
rules' tests use), to check that a rule's rewritten graph computes what the original did."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
from references import ref_conv2d, ref_resample

TO_NCHW, TO_NHWC = [0, 3, 1, 2], [0, 2, 3, 1]


def _conv(a, x, w, b=None, *more):
    nchw = a.get("input_layout", "nchw") == "nchw"
    w = {"oihw": w, "ohwi": w.transpose(0, 3, 1, 2), "hwio": w.transpose(3, 2, 0, 1),
         "ihwo": w.transpose(3, 0, 1, 2)}[a.get("filter_layout", "oihw")]
    pre = a.get("input_preact")
    if pre:  # fuse_conv_input_preact: steps and act of each input value (padding stays 0)
        xs = [x, w, b, *more]
        for op, i in pre["steps"]:
            x = EVAL[op](None, x, xs[i])
        act = pre["act"]
        if act is not None and act[0] == "relu":
            x = np.maximum(x, 0)
        elif act is not None:
            x = np.clip(x, -np.inf if act[1] is None else act[1], np.inf if act[2] is None else act[2])
    if a.get("input_relu"):  # fuse_conv_input_relu: relu of each input value (padding stays 0 = relu(0))
        x = np.maximum(x, 0)
    for op, vals in a.get("input_affine") or ():  # fuse_conv_input: the affine of the input (padding stays 0)
        x = EVAL[op](None, x, np.array(vals))  # one value or one per channel: the last axis
    y = ref_conv2d(x if nchw else x.transpose(TO_NCHW), w, a["padding"], a["strides"], a["dilations"], a["groups"])
    if b is not None:
        y = y + b.reshape(1, -1, 1, 1)
    return y if nchw else y.transpose(TO_NHWC)


def _pool(a, x):
    nchw = a.get("layout", "nchw") == "nchw"
    xn = x if nchw else x.transpose(TO_NCHW)
    wh, ww = a["window"]
    sh, sw = a.get("strides", [1, 1])
    assert list(a.get("padding", [0, 0, 0, 0])) == [0, 0, 0, 0]
    oh, ow = (xn.shape[2] - wh) // sh + 1, (xn.shape[3] - ww) // sw + 1
    y = np.stack([xn[:, :, i:i + (oh - 1) * sh + 1:sh, j:j + (ow - 1) * sw + 1:sw]
                  for i in range(wh) for j in range(ww)]).mean(0)
    return y if nchw else y.transpose(TO_NHWC)


def _max_pool(a, x):
    nchw = a.get("layout", "nchw") == "nchw"
    xn = x if nchw else x.transpose(TO_NCHW)
    (wh, ww), (sh, sw) = a["window"], a["strides"]
    assert a["dilations"] == [1, 1]
    t, b, l, r = a["padding"]  # left out of the windows: -inf never wins
    xn = np.pad(xn, [(0, 0), (0, 0), (t, b), (l, r)], constant_values=-np.inf)
    oh, ow = (xn.shape[2] - wh) // sh + 1, (xn.shape[3] - ww) // sw + 1
    y = np.stack([xn[:, :, i:i + (oh - 1) * sh + 1:sh, j:j + (ow - 1) * sw + 1:sw]
                  for i in range(wh) for j in range(ww)]).max(0)
    return y if nchw else y.transpose(TO_NHWC)


def _gemm(a, x, w, c=None):
    x = x.T if a.get("a_transpose") else x
    w = w.T if a.get("b_transpose") else w
    y = a.get("alpha", 1.0) * (x @ w)
    return y if c is None else y + a.get("beta", 1.0) * c


def _strided(x, view):
    """``x`` (contiguous) read as ``view`` = (shape, element strides), as a new array."""
    shape, st = view
    flat = np.ascontiguousarray(x).reshape(-1)
    return np.lib.stride_tricks.as_strided(flat, shape, [s * flat.itemsize for s in st]).copy()


def _matmul(n, x, w, *rest):
    """matmul, with the compiler's ``a_transpose``, ``a_view`` / ``b_view`` (operand read through
    strides) and ``out_view`` (the output stored permuted: strides of the natural output's
    dimensions) and an epilogue over the node's other operands."""
    a = n.attrs
    x = _strided(x, a["a_view"]) if "a_view" in a else x
    x = np.swapaxes(x, -1, -2) if a.get("a_transpose") else x
    w = _strided(w, a["b_view"]) if "b_view" in a else w
    y = x @ w
    if "out_view" in a:
        out = np.zeros(n.outputs[0].shape)
        flat = out.reshape(-1)
        np.lib.stride_tricks.as_strided(flat, y.shape, [max(s, 0) * flat.itemsize for s in a["out_view"]])[...] = y
        y = out
    return _steps(a.get("epilogue") or [], y, [x, w, *rest])


def _matmul_layer_norm(n, *xs, both=False):
    """fuse_matmul_layer_norm's node: the matmul of its first ``split`` inputs (with its epilogue),
    then a layer normalization over the last axis with the rest (scale, bias, epilogue operands)."""
    from types import SimpleNamespace

    k = n.attrs["split"]
    if n.attrs.get("product_op") == "gemm":
        pa = n.attrs["product"]
        y = _steps(pa.get("epilogue") or [], _gemm(pa, *xs[:min(k, 3)]), list(xs[:k]))
    else:
        y = _matmul(SimpleNamespace(attrs=n.attrs["product"], outputs=n.outputs), *xs[:k])
    prod = y
    rest = list(xs[k:])
    if n.op == "matmul_softmax":
        y = _softmax({"axis": -1}, y)
    else:
        scale, bias = (rest + [None, None])[:2]
        mean = y.mean(-1, keepdims=True)
        y = (y - mean) / np.sqrt(((y - mean) ** 2).mean(-1, keepdims=True) + n.attrs["norm"]["epsilon"])
        y = y if scale is None else y * scale
        y = y if bias is None else y + bias
    y = _steps(n.attrs["norm"].get("epilogue") or [], y, [None, *rest])
    return (y, prod) if both else y


def _dense_chain(n, x, *rest):
    """fuse_dense_chain's node: its layers (matmul / gemm with their epilogues) in turn."""
    from types import SimpleNamespace

    at = 0
    for op, attrs, count in n.attrs["layers"]:
        ins = [x, *rest[at:at + count]]
        at += count
        if op == "gemm":
            x = _steps(attrs.get("epilogue") or [], _gemm(attrs, *ins[:3]), ins)
        else:
            x = _matmul(SimpleNamespace(attrs=attrs, outputs=n.outputs), *ins)
    return x


def _layer_norm(n, x, scale=None, bias=None, *rest):
    axes = tuple(n.attrs["axes"])
    mean = x.mean(axes, keepdims=True)
    y = (x - mean) / np.sqrt(((x - mean) ** 2).mean(axes, keepdims=True) + n.attrs["epsilon"])
    shape = [x.shape[d] if d in axes else 1 for d in range(x.ndim)]
    y = y if scale is None else y * scale.reshape(shape)
    y = y if bias is None else y + bias.reshape(shape)
    return _steps(n.attrs.get("epilogue") or [], y, [x, scale, bias, *rest])


def _bn(a, x, mean, var, scale=None, bias=None):
    shape = [1] * x.ndim
    shape[a["axis"]] = -1
    y = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + a["epsilon"])
    y = y if scale is None else y * scale.reshape(shape)
    return y if bias is None else y + bias.reshape(shape)


def _softmax(a, x):
    e = np.exp(x - x.max(axis=a["axis"], keepdims=True))
    return e / e.sum(axis=a["axis"], keepdims=True)


EVAL = {
    "add": lambda n, x, y: x + y,
    "mul": lambda n, x, y: x * y,
    "sub": lambda n, x, y: x - y,
    "div": lambda n, x, y: x / y,
    "max": lambda n, x, y: np.maximum(x, y),
    "relu": lambda n, x: np.maximum(x, 0),
    "prelu": lambda n, x, slope: np.where(x >= 0, x, x * slope),
    "neg": lambda n, x: -x,
    "sigmoid": lambda n, x: 1 / (1 + np.exp(-x)),
    "swish": lambda n, x: x / (1 + np.exp(-x)),
    "transpose": lambda n, x: np.transpose(x, n.attrs["permutation"]),
    "reshape": lambda n, x: x.reshape(n.outputs[0].shape),
    "conv2d": lambda n, *xs: _conv(n.attrs, *xs),
    "gemm": lambda n, *xs: _steps(n.attrs.get("epilogue") or [], _gemm(n.attrs, *xs[:3]), list(xs)),
    "matmul": _matmul,
    "matmul_layer_norm": _matmul_layer_norm,
    "matmul_softmax": _matmul_layer_norm,
    "dense_chain": _dense_chain,
    "layer_normalization": _layer_norm,
    "average_pool2d": lambda n, x: _pool(n.attrs, x),
    "max_pool2d": lambda n, x: _max_pool(n.attrs, x),
    "reduce_mean": lambda n, x: x.mean(axis=tuple(n.attrs["axes"]), keepdims=n.attrs["keep"]),
    "reduce_sum": lambda n, x: x.sum(axis=tuple(n.attrs["axes"]), keepdims=n.attrs["keep"]),
    "softmax": lambda n, x: _softmax(n.attrs, x),
    "concat": lambda n, *xs: np.concatenate(xs, axis=n.attrs["axis"]),
    "slice": lambda n, x: x[tuple(slice(s, s + (d - 1) * t + 1, t) for s, d, t in
                                  zip(n.attrs["starts"], n.outputs[0].shape, n.attrs["strides"]))],
    "pad": lambda n, x: np.pad(x, list(zip(n.attrs["beginning_padding"], n.attrs["ending_padding"]))),
    "resample2d": lambda n, x: ref_resample(x, n.attrs.get("mode", "nearest-neighbor"),
                                            [n.outputs[0].shape[a] for a in n.attrs["axes"]], axes=n.attrs["axes"]),
    "clamp": lambda n, x: np.clip(x, n.attrs.get("min_value", -np.inf), n.attrs.get("max_value", np.inf)),
    "batch_normalization": lambda n, *xs: _bn(n.attrs, *xs),
}


def _window(pool, w):
    """A ``"pool"`` step's operand: ``pool`` (its attributes) of ``w``."""
    a = {"window": pool["window"], "strides": pool["strides"], "padding": pool["padding"], "dilations": [1, 1],
         "layout": pool["layout"]}
    return _max_pool(a, w) if pool["op"] == "max" else _pool(a, w)


def _framed(w, pad, shape):
    """A ``"pad"`` step's operand: ``w`` at offset ``pad`` in zeros of ``shape`` (offsets >= 0)."""
    out = np.zeros(shape)
    out[tuple(slice(b, b + d) for b, d in zip(pad, w.shape))] = w
    return out


def _steps(steps, x, operands):
    """``x`` through epilogue steps (webnn_gpu/ops/_epilogue.py's format) reading ``operands``
    (the node's input values)."""
    for st in steps:
        if "input" not in st:
            x = EVAL[st["op"]](SimpleNamespace(attrs=st), x)
            continue
        w = operands[st["input"]]
        if st.get("up2") is not None:  # the 2x bilinear upsampling of an NHWC operand, then its own steps
            w = _steps(st["up2"].get("steps") or [], ref_resample(w, "linear", [2 * w.shape[1], 2 * w.shape[2]],
                                                                   axes=(1, 2)), [])
        if st.get("pool") is not None:
            w = _window(st["pool"], w)
            assert w.shape == tuple(st["pool"]["shape"])
        if st.get("pad") is not None:
            w = _framed(w, st["pad"], x.shape)
        if st.get("axis") is not None:
            w = w.reshape([-1 if d == st["axis"] else 1 for d in range(x.ndim)])
        x = EVAL[st["op"]](None, *((w, x) if st.get("reverse") else (x, w)))
    return x


#: Ops whose evaluator above applies the node's epilogue itself.
SELF_EPILOGUE = frozenset({"matmul", "gemm", "layer_normalization", "matmul_layer_norm", "matmul_softmax",
                           "dense_chain"})


def _one(node, xs):
    """One product node's value (its epilogue applied) from its input values ``xs``."""
    if node.attrs.get("epilogue") and node.op not in SELF_EPILOGUE:
        from webnn_gpu.ops._epilogue import HOST_SLOTS

        return _steps(node.attrs["epilogue"], EVAL[node.op](node, *xs[:HOST_SLOTS[node.op]]), xs)
    return EVAL[node.op](node, *xs)


def evaluate(nodes, outputs, feeds):
    """float64 values of ``outputs`` computed node by node (constants from their data, ``feeds``
    for the inputs: value id -> array)."""
    env = {}

    def val(v):
        if v is None:
            return None
        if v.kind == "constant":
            return v.data.astype(np.float64).reshape(v.shape)
        if v.kind == "input":
            return feeds[v.id]
        return env[v.id]

    for node in nodes:
        xs = [val(v) for v in node.inputs]
        if node.op.endswith("_pool2d") and ("side" in node.attrs or node.attrs.get("epilogue")):
            # a pool's epilogue and its map of the input (fuse_pool_map) read the node's operands
            y = _steps(node.attrs.get("epilogue") or [], EVAL[node.op](node, xs[0]), xs)
            if "side" in node.attrs:
                of = y if node.attrs.get("side_of") == "output" else xs[0]
                env[node.outputs[1].id] = _steps(node.attrs["side"], of, xs)
        elif node.op == "concat" and "side" in node.attrs:  # fuse_concat_map: the map of the output
            y = EVAL["concat"](node, *xs[:node.attrs["side_parts"]])
            if len(node.outputs) == 1:  # the map alone
                y = _steps(node.attrs["side"], y, xs)
            else:
                env[node.outputs[1].id] = _steps(node.attrs["side"], y, xs)
        elif node.op in ("matmul_layer_norm", "matmul_softmax") and len(node.outputs) > 1:  # the product too
            y, env[node.outputs[1].id] = _matmul_layer_norm(node, *xs, both=True)
        elif node.op in ("mlp", "pw_depthwise"):  # fuse_mlp, fuse_pw_depthwise: the first, then the second on it
            first, second = (node.attrs["first"], node.attrs["second"]) if node.op == "mlp" else (node.attrs["pw"],
                                                                                                  node.attrs["dw"])
            h = _one(first, [val(v) for v in first.inputs])
            y = _one(second, [h] + [val(v) for v in second.inputs[1:]])
            if len(node.outputs) > 1:
                env[node.outputs[1].id] = h
        elif node.op == "depthwise_project":  # fuse_depthwise_project: the depthwise conv, then its projection
            a = node.attrs
            h = val(a["expand"].inputs[0]) if a.get("expand") is not None else None
            if h is not None:
                h = _one(a["expand"], [h] + [val(v) for v in a["expand"].inputs[1:]])
            dw = a["depthwise"]
            y = _one(dw, [val(dw.inputs[0]) if h is None else h] + [val(v) for v in dw.inputs[1:]])
            if a["project"] is not None:
                y = _one(a["project"], [y] + [val(v) for v in a["project"].inputs[1:]])
        elif node.op == "siblings":  # fuse_siblings: the merged conv (filters side by side), split by columns
            from webnn_gpu.fusions.siblings import _merged

            conv, split = _merged(node)
            y = _one(conv, [val(v) for v in conv.inputs])
            for out, first, cols in split:
                env[out.id] = y[..., first:first + cols]
            continue
        elif node.op == "pooled_head":  # fuse_pooled_head: each product on the column means of the source
            a = node.attrs
            mean = xs[0].reshape(a.rows, -1).sum(0) / a.count
            for h, out in zip(a.products, node.outputs):
                y = _one(h, [mean.reshape(h.inputs[0].shape)] + [val(v) for v in h.inputs[1:]])
                env[out.id] = _softmax({"axis": y.ndim - 1}, y) if a.softmax else y
            continue
        elif node.op == "heads":  # fuse_heads: each product on the shared A
            for h, out in zip(node.attrs["heads"], node.outputs):
                env[out.id] = _one(h, [val(v) for v in h.inputs])
            continue
        elif node.attrs.get("epilogue") and node.op not in SELF_EPILOGUE:
            # an epilogue host: its own operands come first
            from webnn_gpu.ops._epilogue import HOST_SLOTS

            y = _steps(node.attrs["epilogue"], EVAL[node.op](node, *xs[:HOST_SLOTS[node.op]]), xs)
        else:
            y = EVAL[node.op](node, *xs)
        assert y.shape == tuple(node.outputs[0].shape), (node, y.shape)
        env[node.outputs[0].id] = y
    return {k: val(v) for k, v in outputs.items()}


def feeds(nodes) -> dict:
    """Seeded standard-normal data for every graph input the nodes read (value id -> array)."""
    rng = np.random.default_rng(7)
    seen = {}
    for node in nodes:
        for v in node.inputs:
            if v is not None and v.kind == "input" and v.id not in seen:
                seen[v.id] = rng.standard_normal(v.shape)
    return seen


def checked_rewrite(rule, ir, outputs: dict, *, rtol: float, atol: float) -> list:
    """``rule(nodes, outputs)`` on ``ir``'s nodes: checks that it left them as they were, that
    its nodes are in order, and that both graphs compute the same outputs (float64, within
    ``rtol``/``atol``) on seeded data; returns the new nodes."""
    from webnn_gpu.compiler import check_order

    nodes = list(ir.nodes)
    new = rule(nodes, outputs)
    assert nodes == ir.nodes
    check_order(new, outputs, rule.__name__)
    data = feeds(nodes)
    want, got = evaluate(nodes, outputs, data), evaluate(new, outputs, data)
    for k in outputs:
        np.testing.assert_allclose(got[k], want[k], rtol=rtol, atol=atol, err_msg=k)
    return new
