"""TFLite custom op codes mapped by the caller: ``webnn.load(..., custom_ops={"Name": fn})``.

``fn(builder, inputs, attributes) -> outputs`` builds the operator with the public
``MLGraphBuilder`` (often with ``builder.wgsl``, a custom WGSL operator):

* ``inputs``: the operands of the TFLite operator's inputs in order (None for an omitted
  optional input);
* ``attributes``: ``{"custom_code": str, "custom_options": bytes (the operator's raw
  custom options, a FlexBuffer in most models), "outputs": [{"data_type", "shape"}, ...]
  (what the model declares, in the graph's data types), "label": "NAME#index"}``;
* returns an MLOperand, or a sequence with one operand per TFLite output (each checked
  against the shape the model declares).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..errors import MLTypeError
from .reader import OperatorInfo

__all__ = ["check_custom_ops", "custom_handler"]


def check_custom_ops(custom_ops) -> dict[str, Callable]:
    """``custom_ops=`` checked: a dict of custom op code -> callable (None: empty)."""
    if custom_ops is None:
        return {}
    if not isinstance(custom_ops, Mapping) or not all(isinstance(k, str) and callable(f)
                                                      for k, f in custom_ops.items()):
        raise MLTypeError(f"tflite.load: argument 'custom_ops': expected a dict of custom op code (str) -> "
                          f"function(builder, inputs, attributes), got {custom_ops!r}")
    return dict(custom_ops)


def custom_handler(fn: Callable) -> Callable:
    """A converter handler that calls the caller's ``fn`` for one custom operator."""

    def handle(cv: Any, op: OperatorInfo) -> None:
        inputs = [cv.optional_operand(op, i) for i in range(len(op.inputs))]
        outputs = []
        for j in range(len(op.outputs)):
            t = cv.out_tensor(op, j)
            dt = cv.data_type(t) or t.type_name.lower()
            outputs.append({"data_type": dt, "shape": [int(d) for d in t.shape]})
        attributes = {"custom_code": op.custom_code, "custom_options": bytes(op.custom_options or b""),
                      "outputs": outputs, "label": cv.label(op)}
        result = fn(cv.builder, inputs, attributes)
        results = list(result) if isinstance(result, Sequence) and not isinstance(result, (str, bytes)) else [result]
        if len(results) != len(op.outputs):
            raise cv.malformed(op, f"custom_ops[{op.custom_code!r}] returned {len(results)} operand(s) for "
                                   f"{len(op.outputs)} output(s)")
        for j, operand in enumerate(results):
            cv.set_output(op, operand, j)

    return handle
