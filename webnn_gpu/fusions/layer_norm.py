"""Layer normalization from its decomposed form, as the engine's ``layer_normalization``.

Patterns (``x`` float32 or float16; ``mean`` is ``reduce_mean`` over the same axes ``A`` with
``keep_dimensions``; ``eps`` a host constant of one non-negative value; binary ops in either
order where they commute):

* the form ONNX exporters emit for PyTorch's LayerNorm (opset < 17) and TFLite's converter
  for plain arithmetic::

      d = x - mean(x);  v = mean(d * d)  (or pow(d, 2));  e = v + eps
      n = d / sqrt(e)   (or d * reciprocal(sqrt(e)), or d * pow(e, -0.5))
      y = n * scale + bias   (scale and bias each optional)

* the form of ``tf.nn.batch_normalization`` (Keras' LayerNormalization through TFLite's
  converter: MEAN, SQUARED_DIFFERENCE, MEAN, ADD, RSQRT, MUL, MUL, MUL, SUB, ADD)::

      m = mean(x);  v = mean((x - m) * (x - m));  i = rsqrt(v + eps) * scale  (scale optional)
      y = x * i + (bias - m * i)   (or x * i - m * i without a bias)
      y = x * i + (neg(m) * i + bias)   (or x * i + neg(m) * i; TensorFlow 2.21's converter)

``scale`` and ``bias`` must vary along ``A`` alone (host constants are re-made in the
kernel's ``[x.shape[a] for a in A]`` shape, a computed one of that many elements is viewed
so); in the negated-mean form they may vary along other axes too, broadcasting into ``x``
without growing it (Keras' ``GroupNormalization``: the tensor viewed as ``[..., groups,
channels / groups]``, normalized over every axis but the batch and the groups, gamma and beta
per channel): the node then normalizes without them and a ``mul`` and an ``add`` follow, which
``fuse_epilogue`` gives the normalization kernel (one kernel for the layer's eight). Every intermediate value must feed only the pattern and be no graph output. The result
is computed by the ``layer_normalization`` node (``norm/layer_norm.wgsl`` for rows of at most
4,096 values whose scale and bias run along the normalized axes, else ``norm/moments.wgsl``
then ``norm/normalize.wgsl``), which accumulates in float32: equal to the decomposed form up to
rounding.

The root-mean-square forms (:func:`match_rms_norm`: ``x / sqrt(mean(x * x) + eps)``, Keras'
``RMSNormalization`` and ONNX exports' RMSNorm; ``x / sqrt(variance(x) + eps)``, Keras'
``LayerNormalization(rms_scaling=True)``; then a scale and a bias along the axes) become one
``rms_normalization`` node over rows of at most 4,096 values: the same ``norm/layer_norm.wgsl``
kernel without centering (mean(x^2) = variance + mean^2 from the row's two passes). So do the
L2 forms (:func:`match_l2_norm`: ``x * min(rsqrt(sum(x * x)), c)``, Keras' ``UnitNormalization``;
``x * rsqrt(max(sum(x * x), e))``, ``tf.math.l2_normalize`` and the loader's L2_NORMALIZATION).
"""

from __future__ import annotations

import dataclasses
import logging
import math

import numpy as np

from .._dtypes import FLOAT_TYPES as FLOATS
from .._env import DEBUG
from .._ir import GraphView, Node, Value
from ..compiler.rules._common import _view_label
from ._attrs import FusedAttrs

log = logging.getLogger("webnn_gpu")


@dataclasses.dataclass(frozen=True)
class LayerNormAttrs(FusedAttrs):
    """Attributes of a fused ``layer_normalization`` node (the keys the engine's own
    ``layer_normalization`` lowering reads); inputs ``[x, scale | None, bias | None]``."""

    #: the normalized axes, ascending
    axes: tuple[int, ...]
    #: the axes the scale and bias run along (the same)
    param_axes: tuple[int, ...]
    #: added to the variance
    epsilon: float
    #: ``"layer"`` (a ``layer_normalization``), or for an ``rms_normalization`` node ``"rms"``
    #: (x / sqrt(mean(x^2) + epsilon)), ``"scaled"`` (x / sqrt(variance + epsilon)), ``"l2min"``
    #: (x * min(1 / sqrt(sum(x^2)), epsilon)) or ``"l2max"`` (x / sqrt(max(sum(x^2), epsilon)))
    form: str = "layer"


@dataclasses.dataclass
class LayerNormMatch:
    """One decomposed layer normalization found in a graph."""

    x: Value
    axes: tuple[int, ...]
    epsilon: float
    scale: Value | None
    bias: Value | None
    #: the nodes the fused node replaces; the last one's output is the result
    nodes: list[Node]
    #: scale and bias vary along other axes than the normalized ones (a group normalization's
    #: per-channel parameters): they stay a mul and an add after the node
    outer: bool = False
    #: :attr:`LayerNormAttrs.form`
    form: str = "layer"

    def lower(self) -> list[Node]:
        """The nodes that compute the match: views that give a computed scale or bias the
        kernel's shape, then the ``layer_normalization`` node (producing the last matched
        node's output); with :attr:`outer`, the node without parameters, then ``mul`` by the
        scale and ``add`` of the bias (which the normalization kernel takes as its epilogue)."""
        last = self.nodes[-1]
        labels = [n.label for n in self.nodes if n.label]
        label = labels[-1] if labels else ""
        if self.outer:
            steps = [(op, p) for op, p in (("mul", self.scale), ("add", self.bias)) if p is not None]
            n = Value(self.x.data_type, tuple(self.x.shape), "op")
            out: list[Node] = [Node("layer_normalization", [self.x, None, None], [n],
                                    LayerNormAttrs(self.axes, self.axes, self.epsilon), label)]
            n.producer = out[0]
            for k, (op, param) in enumerate(steps):
                y = last.outputs[0] if k == len(steps) - 1 else Value(self.x.data_type, tuple(self.x.shape), "op")
                out.append(Node(op, [n, param], [y], {}, label))
                if k < len(steps) - 1:
                    y.producer = out[-1]
                n = y
            return out
        want = tuple(self.x.shape[a] for a in self.axes)
        views: list[Node] = []
        params: list[Value | None] = []
        for v in (self.scale, self.bias):
            if v is None or tuple(v.shape) == want:
                params.append(v)
            elif v.kind == "constant" and v.data is not None:
                data = np.broadcast_to(v.data.reshape(_aligned(v.shape, len(self.x.shape))),
                                       _param_full(self.x.shape, self.axes))
                params.append(Value(v.data_type, want, "constant", data=np.ascontiguousarray(data).reshape(-1).copy()))
            else:  # a computed operand of the parameters' size: a view in their shape
                view = Value(v.data_type, want, "op")
                views.append(Node("reshape", [v], [view], {"alias": True}, _view_label(last)))
                params.append(view)
        fused = Node("layer_normalization" if self.form == "layer" else "rms_normalization", [self.x, *params],
                     list(last.outputs), LayerNormAttrs(self.axes, self.axes, self.epsilon, self.form), label)
        return [*views, fused]


def _aligned(shape, rank: int) -> tuple[int, ...]:
    """``shape`` right-aligned to ``rank`` (leading 1s)."""
    return (1,) * (rank - len(shape)) + tuple(shape)


def _param_full(shape, axes) -> tuple[int, ...]:
    """The shape of a parameter broadcast over ``axes`` of ``shape`` (1 elsewhere)."""
    return tuple(d if a in axes else 1 for a, d in enumerate(shape))


def _param_ok(v: Value | None, x: Value, axes: tuple[int, ...]) -> bool:
    """Whether ``v`` (a scale or bias operand) varies along ``axes`` of ``x`` alone and leaves
    ``x``'s shape unchanged: a host constant broadcasting so, or any value already holding
    one element per position of the axes (viewed in the kernel's shape)."""
    if v is None or v.data_type != x.data_type or len(v.shape) > len(x.shape):
        return False
    shp = _aligned(v.shape, len(x.shape))
    if any(d != 1 for a, d in enumerate(shp) if a not in axes):
        return False
    if any(d not in (1, x.shape[a]) for a, d in enumerate(shp) if a in axes):
        return False
    if v.kind == "constant" and v.data is not None:
        return True
    return all(shp[a] == x.shape[a] for a in axes)


def _param_outer(v: Value | None, x: Value) -> bool:
    """Whether ``v`` (a scale or bias) broadcasts into ``x``'s shape without growing it (any axes:
    applied after the normalization as a ``mul`` or ``add``)."""
    if v is None or v.data_type != x.data_type or len(v.shape) > len(x.shape):
        return False
    return all(d in (1, x.shape[a]) for a, d in enumerate(_aligned(v.shape, len(x.shape))))


def _epsilon(v: Value | None, like: Value, infinite: bool = False) -> float | None:
    """The one value of host constant ``v`` (added to ``like`` without growing it), or None;
    finite and non-negative (or, with ``infinite``, +inf too)."""
    if v is None or v.kind != "constant" or v.data is None or v.data.size == 0 or v.data_type != like.data_type:
        return None
    if len(v.shape) > len(like.shape) or any(d != 1 for d in v.shape):
        return None
    vals = v.data.astype(np.float64)
    if not np.all(vals == vals[0]) or not (np.isfinite(vals[0]) or infinite and vals[0] == np.inf) or vals[0] < 0:
        return None
    return float(vals[0])


def _const_is(v: Value | None, value: float) -> bool:
    """Whether ``v`` is a host constant of size-1 dimensions holding ``value``."""
    return (v is not None and v.kind == "constant" and v.data is not None and v.data.size == 1
            and float(v.data.reshape(-1)[0]) == value)


def _other(node: Node, v: Value) -> Value | None:
    """The other operand of binary ``node`` when one operand is ``v`` (not both)."""
    a, b = node.inputs
    if a is v and b is not v:
        return b
    if b is v and a is not v:
        return a
    return None


class _Matcher:
    """The legality checks of one candidate, over a graph view."""

    def __init__(self, g: GraphView):
        self.g = g

    def only(self, v: Value, *ops: str) -> Node | None:
        """``v``'s sole consumer (``v`` no graph output) when its op is one of ``ops``."""
        c = self.g.sole_consumer(v)
        return c if c is not None and c.op in ops and len(c.outputs) == 1 else None

    def mean_of(self, v: Value, node: Node | None, axes: tuple[int, ...]) -> bool:
        """Whether ``node`` is ``reduce_mean(v)`` over ``axes``, dimensions kept."""
        return (node is not None and node.op == "reduce_mean" and node.inputs[0] is v
                and tuple(sorted(node.attrs.get("axes", ()))) == axes and bool(node.attrs.get("keep")))

    def square_of(self, d: Value, node: Node | None) -> bool:
        """Whether ``node`` is ``d * d`` or ``pow(d, 2)``."""
        if node is None:
            return False
        if node.op == "mul":
            return node.inputs[0] is d and node.inputs[1] is d
        return node.op == "pow" and node.inputs[0] is d and _const_is(node.inputs[1], 2.0)

    def variance(self, d: Value, sq: Node, axes) -> tuple[list[Node], Value, float] | None:
        """From the square ``sq`` of ``d``: (nodes, the value r with n = d * r or d / r, and the
        epsilon) of ``mean(sq) + eps`` then ``sqrt`` (``r`` a divisor: the first node of the
        list after the add is ``sqrt`` alone) or ``reciprocal(sqrt)`` / ``pow(., -0.5)``."""
        if not self.square_of(d, sq):
            return None
        m2 = self.only(sq.outputs[0], "reduce_mean")
        if m2 is None or not self.mean_of(sq.outputs[0], m2, axes):
            return None
        v = m2.outputs[0]
        add = self.only(v, "add")
        if add is None:
            return None
        eps = _epsilon(_other(add, v), v)
        if eps is None or add.outputs[0].shape != v.shape:
            return None
        e = add.outputs[0]
        nxt = self.only(e, "sqrt", "pow")
        if nxt is None:
            return None
        if nxt.op == "pow":
            if nxt.inputs[0] is not e or not _const_is(nxt.inputs[1], -0.5):
                return None
            return [sq, m2, add, nxt], nxt.outputs[0], eps
        rec = self.only(nxt.outputs[0], "reciprocal", "div")
        if rec is not None and rec.op == "reciprocal":
            return [sq, m2, add, nxt, rec], rec.outputs[0], eps
        return [sq, m2, add, nxt], nxt.outputs[0], eps  # a divisor


def _affine(mt: _Matcher, n: Value, x: Value, axes) -> tuple[list[Node], Value | None, Value | None]:
    """``n * scale + bias`` after the normalized value ``n`` (each optional)."""
    nodes: list[Node] = []
    scale = bias = None
    mul = mt.only(n, "mul")
    if mul is not None and tuple(mul.outputs[0].shape) == tuple(x.shape):
        s = _other(mul, n)
        if _param_ok(s, x, axes):
            nodes.append(mul)
            scale = s
            n = mul.outputs[0]
    add = mt.only(n, "add")
    if add is not None and tuple(add.outputs[0].shape) == tuple(x.shape):
        b = _other(add, n)
        if _param_ok(b, x, axes):
            nodes.append(add)
            bias = b
    return nodes, scale, bias


def match_layer_norm(g: GraphView, mean: Node) -> LayerNormMatch | None:
    """The decomposed layer normalization whose first ``reduce_mean`` is ``mean``, or None
    (the module docstring lists the forms and conditions)."""
    if mean.op != "reduce_mean" or len(mean.outputs) != 1 or not mean.attrs.get("keep"):
        return None
    x, m = mean.inputs[0], mean.outputs[0]
    axes = tuple(sorted(mean.attrs.get("axes", ())))
    if x.data_type not in FLOATS or not axes or m.data_type != x.data_type or g.is_output(m):
        return None
    mt = _Matcher(g)
    users = g.consumers(m)
    subs = [u for u in users if u.op == "sub" and u.inputs[0] is x and u.inputs[1] is m]
    if len(subs) != 1 or tuple(subs[0].outputs[0].shape) != tuple(x.shape):
        return None
    sub = subs[0]
    d = sub.outputs[0]
    if g.is_output(d):
        return None
    if len(users) == 1:  # the first form: d feeds its square and the normalization
        d_users = g.consumers(d)
        if len(d_users) != 2:
            return None
        sq = next((u for u in d_users if mt.square_of(d, u)), None)
        norm = next((u for u in d_users if u is not sq), None)
        if sq is None or norm is None or len(norm.outputs) != 1:
            return None
        got = mt.variance(d, sq, axes)
        if got is None:
            return None
        var_nodes, r, eps = got
        divisor = var_nodes[-1].op == "sqrt"
        if divisor:
            ok = norm.op == "div" and norm.inputs[0] is d and norm.inputs[1] is r
        else:
            ok = norm.op == "mul" and _other(norm, d) is r
        if not ok or mt.g.sole_consumer(r) is not norm or tuple(norm.outputs[0].shape) != tuple(x.shape):
            return None
        n = norm.outputs[0]
        aff, scale, bias = _affine(mt, n, x, axes) if not g.is_output(n) else ([], None, None)
        return LayerNormMatch(x, axes, eps, scale, bias, [mean, sub, *var_nodes, norm, *aff])
    # the batch-normalization form: m feeds the squared difference and m * i
    if len(users) != 2:
        return None
    sq = mt.only(d, "mul", "pow")
    got = mt.variance(d, sq, axes) if sq is not None else None
    if got is None or got[0][-1].op == "sqrt":  # (a multiplier here, not a divisor)
        return None
    var_nodes, r, eps = got
    nodes = [mean, sub, *var_nodes]
    scale = None
    i = r
    gm = mt.only(r, "mul")
    outer = False
    if gm is not None and _param_ok(_other(gm, r), x, axes):  # i = rsqrt(v + eps) * scale
        scale, i = _other(gm, r), gm.outputs[0]
        nodes.append(gm)
    elif gm is not None and _param_outer(_other(gm, r), x):  # a scale along other axes (GroupNormalization)
        scale, i, outer = _other(gm, r), gm.outputs[0], True
        nodes.append(gm)
    if g.is_output(i):
        return None
    i_users = g.consumers(i)
    mb = next((u for u in users if u is not sub), None)
    if mb is not None and mb.op == "neg":  # TFLite's converter for Keras 3: y = x * i + (neg(m) * i + bias)
        return _negated_mean_form(mt, x, axes, eps, scale, nodes, mb, i, i_users, outer)
    if outer:
        return None
    xa = next((u for u in i_users if u is not mb), None)
    if (len(i_users) != 2 or mb is None or mb not in i_users or xa is None or mb.op != "mul" or xa.op != "mul"
            or _other(mb, m) is not i or _other(xa, x) is not i or tuple(xa.outputs[0].shape) != tuple(x.shape)):
        return None
    c_node = mt.only(mb.outputs[0], "sub", "neg")
    if c_node is None:
        return None
    bias = None
    if c_node.op == "sub":
        if c_node.inputs[1] is not mb.outputs[0] or not _param_ok(c_node.inputs[0], x, axes):
            return None
        bias = c_node.inputs[0]
    y = mt.only(xa.outputs[0], "add")
    if (y is None or _other(y, xa.outputs[0]) is not c_node.outputs[0] or mt.g.sole_consumer(c_node.outputs[0]) is not y
            or tuple(y.outputs[0].shape) != tuple(x.shape)):
        return None
    # in graph order the add comes last (it reads both branches)
    nodes += [mb, c_node, xa, y]
    return LayerNormMatch(x, axes, eps, scale, bias, nodes)


def match_rms_norm(g: GraphView, mean: Node) -> LayerNormMatch | None:
    """The root-mean-square normalization whose ``reduce_mean`` is ``mean``, or None:

    * ``"rms"``: ``n = x / sqrt(mean(x * x) + eps)`` (or ``pow(x, 2)``; ``x * reciprocal(sqrt(.))``,
      ``x * pow(., -0.5)``): Keras' ``RMSNormalization``, an ONNX export's RMSNorm;
    * ``"scaled"``: ``n = x / sqrt(mean((x - mean(x))^2) + eps)``: Keras' ``LayerNormalization(
      rms_scaling=True)``;

    then ``n * scale + bias`` (each optional, along the normalized axes), every intermediate
    value read by the pattern alone and no graph output, over rows of at most
    :data:`~webnn_gpu.ops.norm.ROW_KERNEL_MAX` values (the one kernel ``rms_normalization``
    has)."""
    from ..ops.norm import ROW_KERNEL_MAX

    if mean.op != "reduce_mean" or len(mean.outputs) != 1 or not mean.attrs.get("keep"):
        return None
    axes = tuple(sorted(mean.attrs.get("axes", ())))
    src, m = mean.inputs[0], mean.outputs[0]
    if src.data_type not in FLOATS or not axes or m.data_type != src.data_type or g.is_output(m):
        return None
    mt = _Matcher(g)
    sq = g.producer(src)
    prefix: list[Node] = []
    if sq is not None and len(sq.outputs) == 1 and sq.inputs and mt.square_of(sq.inputs[0], sq) and \
            g.sole_consumer(src) is mean and not g.is_output(src):
        form, x = "rms", sq.inputs[0]
    else:  # the mean of x itself, then of its squared deviation
        form, x = "scaled", src
        sub = mt.only(m, "sub")
        if sub is None or sub.inputs[0] is not x or sub.inputs[1] is not m or g.is_output(sub.outputs[0]):
            return None
        sq = mt.only(sub.outputs[0], "mul", "pow")
        if sq is None or not mt.square_of(sub.outputs[0], sq):
            return None
        prefix = [mean, sub]
    d = sq.inputs[0]
    got = mt.variance(d, sq, axes)
    if got is None:
        return None
    var_nodes, r, eps = got
    if form == "rms" and var_nodes[1] is not mean:
        return None
    divisor = var_nodes[-1].op == "sqrt"
    norm = mt.only(r, "div" if divisor else "mul")
    if norm is None or (norm.inputs[0] is not x or norm.inputs[1] is not r if divisor else _other(norm, r) is not x):
        return None
    if tuple(norm.outputs[0].shape) != tuple(x.shape) or math.prod(x.shape[a] for a in axes) > ROW_KERNEL_MAX:
        return None
    n = norm.outputs[0]
    aff, scale, bias = _affine(mt, n, x, axes) if not g.is_output(n) else ([], None, None)
    return LayerNormMatch(x, axes, eps, scale, bias, [*prefix, *var_nodes, norm, *aff], form=form)


def match_l2_norm(g: GraphView, total: Node) -> LayerNormMatch | None:
    """The L2 normalization whose ``reduce_sum`` of squares is ``total``, or None:
    ``x * min(reciprocal(sqrt(sum(x * x))), c)`` (Keras' ``UnitNormalization``: RSQRT, MINIMUM;
    form ``"l2min"``) or ``x * reciprocal(sqrt(max(sum(x * x), e)))`` (``tf.math.l2_normalize``:
    MAXIMUM, RSQRT; ``"l2max"``), ``c`` and ``e`` host constants of one non-negative value (``c``
    maybe +inf: a float16 graph's 1e12); every intermediate value read by the pattern alone and
    no graph output; rows of at most :data:`~webnn_gpu.ops.norm.ROW_KERNEL_MAX` values."""
    from ..ops.norm import ROW_KERNEL_MAX

    if total.op != "reduce_sum" or len(total.outputs) != 1 or not total.attrs.get("keep"):
        return None
    axes = tuple(sorted(total.attrs.get("axes", ())))
    src, s = total.inputs[0], total.outputs[0]
    sq = g.producer(src)
    if (not axes or src.data_type not in FLOATS or sq is None or len(sq.outputs) != 1 or not sq.inputs
            or g.is_output(src) or g.sole_consumer(src) is not total or g.is_output(s)):
        return None
    mt = _Matcher(g)
    first = sq.inputs[0]
    if first is None or not mt.square_of(first, sq):
        return None
    x: Value = first
    nodes = [sq, total]
    nxt = mt.only(s, "sqrt", "max")
    if nxt is None:
        return None
    if nxt.op == "max":
        bound = _epsilon(_other(nxt, s), s)
        root = mt.only(nxt.outputs[0], "sqrt")
        if bound is None or root is None:
            return None
        rec = mt.only(root.outputs[0], "reciprocal")
        if rec is None:
            return None
        form, nodes, r = "l2max", [*nodes, nxt, root, rec], rec.outputs[0]
    else:
        rec = mt.only(nxt.outputs[0], "reciprocal")
        if rec is None:
            return None
        low = mt.only(rec.outputs[0], "min")
        if low is None:
            return None
        # +inf too: UnitNormalization's 1e12 (or 1 / sqrt(1e-12)) is +inf in float16, and
        # min(r, +inf) is r (the kernel's min takes the infinite literal as the graph did)
        bound = _epsilon(_other(low, rec.outputs[0]), rec.outputs[0], infinite=True)
        if bound is None:
            return None
        form, nodes, r = "l2min", [*nodes, nxt, rec, low], low.outputs[0]
    norm = mt.only(r, "mul")
    if norm is None or _other(norm, r) is not x or tuple(norm.outputs[0].shape) != tuple(x.shape) or \
            math.prod(x.shape[a] for a in axes) > ROW_KERNEL_MAX:
        return None
    n = norm.outputs[0]
    aff, scale, bias = _affine(mt, n, x, axes) if not g.is_output(n) else ([], None, None)
    return LayerNormMatch(x, axes, bound, scale, bias, [*nodes, norm, *aff], form=form)


def _negated_mean_form(mt: _Matcher, x: Value, axes, eps: float, scale: Value | None, nodes: list[Node],
                       neg: Node, i: Value, i_users: list[Node], outer: bool = False) -> LayerNormMatch | None:
    """The rest of the batch-normalization form with the mean negated first:
    ``y = x * i + (neg(m) * i + bias)`` (or ``x * i + neg(m) * i`` without a bias). ``outer``:
    the scale in ``i`` varies along other axes than the normalized ones; then the bias may
    too (Keras' ``GroupNormalization``: per-channel parameters over a [..., groups, channels /
    groups] view normalized over all axes but the batch and the groups), and the match
    normalizes without them, then multiplies and adds."""
    nm = neg.outputs[0]
    mb = mt.only(nm, "mul")
    xa = next((u for u in i_users if u is not mb), None)
    if (mb is None or len(i_users) != 2 or mb not in i_users or xa is None or xa.op != "mul" or _other(mb, nm) is not i
            or _other(xa, x) is not i or tuple(xa.outputs[0].shape) != tuple(x.shape)):
        return None
    nb = mb.outputs[0]
    after = mt.only(nb, "add")
    if after is None:
        return None
    if _other(after, nb) is xa.outputs[0]:  # no bias
        y, bias, tail = after, None, []
    else:
        bias = _other(after, nb)
        if not _param_ok(bias, x, axes):
            if not _param_outer(bias, x):
                return None
            outer = True
        last = mt.only(xa.outputs[0], "add")
        if (last is None or _other(last, xa.outputs[0]) is not after.outputs[0]
                or mt.g.sole_consumer(after.outputs[0]) is not last):
            return None
        y, tail = last, [after]
    if tuple(y.outputs[0].shape) != tuple(x.shape):
        return None
    return LayerNormMatch(x, axes, eps, scale, bias, [*nodes, neg, mb, *tail, xa, y], outer)


def fuse_layer_norm(nodes: list, outputs: dict, context=None) -> list:
    """A decomposed layer normalization (the patterns of :mod:`webnn_gpu.fusions.layer_norm`)
    becomes one ``layer_normalization`` node over the same axes (an RMS or L2 normalization one
    ``rms_normalization`` node; a group normalization whose scale and bias lie along other axes
    a ``layer_normalization`` followed by its ``mul`` and ``add``), in its last node's place (its
    operands are all computed there): one or two kernels instead of four to eleven."""
    g = GraphView(nodes, outputs)
    replaced: dict[int, list[Node]] = {}
    dropped: set[int] = set()
    for mean in nodes:
        if mean.op not in ("reduce_mean", "reduce_sum") or mean.id in dropped:
            continue
        found = match_layer_norm(g, mean) or match_rms_norm(g, mean) or match_l2_norm(g, mean)
        if found is None or any(n.id in dropped or n.id in replaced for n in found.nodes):
            continue
        last = max(found.nodes, key=nodes.index)
        found.nodes.remove(last)
        found.nodes.append(last)
        replaced[last.id] = found.lower()
        dropped.update(n.id for n in found.nodes[:-1])
        if DEBUG >= 2:
            log.debug("fuse_layer_norm: %d nodes over axes %s [%s]", len(found.nodes), found.axes, last.label)
    return g.replace(replaced, dropped)
