"""Recording graphs into the caller's command encoder, and wrapping the caller's buffers.

* ``MLContext.record(encoder, graph, inputs, outputs)`` writes every kernel of ``graph``
  into the caller's ``wgpu.GPUCommandEncoder``, between the caller's own passes, so
  pre-processing, inference and post-processing go out in one ``queue.submit`` (DESIGN §2,
  model 4). Inputs and outputs are MLTensors or plain ``GPUBuffer``s.
* ``MLContext.tensor_from_buffer(buffer, descriptor)`` wraps the caller's ``GPUBuffer`` as
  an MLTensor without a copy.

Why a method that writes into the caller's encoder and not the ``MLCommandEncoder`` of
WebNN PR #255: that encoder produced its own ``GPUCommandBuffer`` for the caller to submit,
which WebGPU implementations do not accept from outside (the group dropped it for sharing the
device's queue); wgpu-py cannot make one either. Here WebNN and the caller share one device
and queue, so writing our compute passes into the caller's encoder gives the same single
submit with nothing new on the WebGPU side, and needs no ``initializeGraph`` step: constants
were uploaded by ``build()``.
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Mapping

import wgpu

from webnn_gpu import _dtypes, _timeline
from webnn_gpu import _validate as V
from webnn_gpu.errors import InvalidStateError, OperationError
from webnn_gpu.tensor import MLTensor

from .rental import same_device, usage_names

__all__ = ["record", "tensor_from_buffer"]

_U = wgpu.BufferUsage
#: Usage a buffer needs to become an MLTensor (what every MLTensor buffer has).
TENSOR_USAGE = _U.STORAGE | _U.COPY_SRC | _U.COPY_DST

# Bind groups are cached per (kernel, buffers); plain buffers get a serial that is never
# reused (a weak map, so a dropped buffer's entry goes away with it).
_buffer_serials: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_serial_counter = itertools.count(1)


def _buffer_key(buffer) -> tuple:
    serial = _buffer_serials.get(buffer)
    if serial is None:
        serial = _buffer_serials[buffer] = next(_serial_counter)
    return ("buffer", serial)


def _bind(op: str, tl, arg: str, name: str, value, declared, need: int):
    """The GPUBuffer and bind-cache key for one input or output."""
    where = f"{arg}[{name!r}]"
    if isinstance(value, MLTensor):
        t = tl.own_tensor(op, where, value)
        if t.data_type != declared.data_type or t.shape != declared.shape:
            V.fail(op, "", where, f"a {declared.data_type} tensor of shape {list(declared.shape)}",
                   f"a {t.data_type} tensor of shape {list(t.shape)}")
        rental = tl.rental_of(t)
        if rental is not None and getattr(rental, "copied", True):
            raise InvalidStateError(f"{op}: argument {where!r}: {t!r} is rented to another device ({rental!r}); its "
                                    f"data is in that copy until the buffer is returned")
        if tl.has_held_work(t):
            raise InvalidStateError(f"{op}: argument {where!r}: WebNN work on {t!r} is held behind a rented "
                                    f"tensor; recording now would run before it. Return the rental first")
        buffer = tl.tensor_buffer(t)
        if _timeline.owner_destroyed(buffer):
            raise InvalidStateError(f"{op}: argument {where!r}: the GPUBuffer of {t!r} (tensor_from_buffer) has "
                                    f"been destroyed")
        return buffer, tl.bind_key(t)
    if isinstance(value, wgpu.GPUBuffer):
        if getattr(value, "returned", False):  # a RentedBuffer given back: its buffer is no longer the caller's
            raise InvalidStateError(f"{op}: argument {where!r}: the rented buffer has been returned")
        if _timeline.owner_destroyed(value):
            raise InvalidStateError(f"{op}: argument {where!r}: the GPUBuffer has been destroyed")
        if not same_device(value._device, tl.device):
            V.fail(op, "", where, "a GPUBuffer of the context's device", "a buffer of another device")
        size = _dtypes.buffer_size(declared.data_type, declared.shape)
        if value.size < size:
            V.fail(op, "", where, f"a GPUBuffer of at least {size} bytes ({declared.data_type} "
                   f"{list(declared.shape)})", f"a buffer of {value.size} bytes")
        want = _U.STORAGE | need
        if value.usage & want != want:
            V.fail(op, "", where, f"a GPUBuffer with usage {usage_names(want)}",
                   f"a buffer with usage {usage_names(value.usage)}")
        return value, _buffer_key(value)
    V.fail(op, "", where, "an MLTensor or a wgpu.GPUBuffer", value)


def _named(op: str, arg: str, given, declared: dict) -> None:
    if not isinstance(given, Mapping):
        V.fail(op, "", arg, "a dict of name -> MLTensor or GPUBuffer", given)
    missing = sorted(set(declared) - set(given))
    extra = sorted(set(given) - set(declared))
    if missing or extra:
        V.fail(op, "", arg, f"exactly the names {sorted(declared)}",
               ", ".join(p for p in (f"missing {missing}" if missing else "",
                                     f"unknown {extra}" if extra else "") if p))


def record(context, encoder, graph, inputs: Mapping, outputs: Mapping) -> None:
    """``MLContext.record``: write ``graph``'s kernels into the caller's command encoder.

    See :meth:`webnn_gpu.MLContext.record`.
    """
    op = "record"
    tl = _timeline.of(context)
    tl.check_alive(op)
    if not isinstance(encoder, wgpu.GPUCommandEncoder):
        V.fail(op, "", "encoder", "a wgpu.GPUCommandEncoder", encoder)
    if not same_device(getattr(encoder, "_device", None), tl.device):
        V.fail(op, "", "encoder", "a GPUCommandEncoder of the context's device", "an encoder of another device")
    g = tl.own_graph(op, graph)
    g_inputs, g_outputs = tl.graph_io(g)
    _named(op, "inputs", inputs, g_inputs)
    _named(op, "outputs", outputs, g_outputs)
    needs = tl.copy_needs(g)
    with tl.lock:
        ins, outs, key_in, key_out = {}, {}, [], []
        for name, v in g_inputs.items():
            buf, key = _bind(op, tl, "inputs", name, inputs[name], v, needs.get(("inputs", name), 0))
            ins[name] = buf
            key_in.append(key)
        for name, v in g_outputs.items():
            buf, key = _bind(op, tl, "outputs", name, outputs[name], v, needs.get(("outputs", name), 0))
            outs[name] = buf
            key_out.append(key)
        out_bufs = list(outs.values())
        if len({id(b) for b in out_bufs}) != len(out_bufs):
            V.fail(op, "", "outputs", "distinct buffers for distinct outputs", "the same buffer twice")
        for name, buf in ins.items():
            if any(buf is b for b in out_bufs):
                V.fail(op, "", f"inputs[{name!r}]", "a buffer that is not also an output of this graph",
                       "a buffer used as both input and output")
        try:
            tl.record(g, encoder, ins, outs, ("record",) + tuple(key_in) + (None,) + tuple(key_out))
        except InvalidStateError:
            raise
        except Exception as exc:  # noqa: BLE001 - a wgpu error must not escape
            raise OperationError(f"{op}: recording the graph into the encoder failed (is it finished?): "
                                 f"{exc}") from exc


def tensor_from_buffer(context, buffer, descriptor: Mapping, **kwargs) -> MLTensor:
    """``MLContext.tensor_from_buffer``: the caller's GPUBuffer as an MLTensor, no copy.

    See :meth:`webnn_gpu.MLContext.tensor_from_buffer`.
    """
    op = "tensorFromBuffer"
    label = kwargs.pop("label", "") or ""
    V.check_kwargs(op, label, kwargs, ("label",))
    tl = _timeline.of(context)
    tl.check_alive(op)
    if not isinstance(buffer, wgpu.GPUBuffer):
        V.fail(op, label, "buffer", "a wgpu.GPUBuffer", buffer)
    if not same_device(buffer._device, tl.device):
        V.fail(op, label, "buffer", "a GPUBuffer of the context's device", "a buffer of another device")
    dt, shape, extra = V.descriptor(op, label, "descriptor", descriptor,
                                    extra_keys=("readable", "writable", "importable_to_webgpu", "exportable_to_gpu"))
    flags = {k: V.bool_value(op, label, f"descriptor.{k}", v) for k, v in extra.items()}
    tl.check_data_type(op, label, dt)
    V.size_limit(op, label, "descriptor", dt, shape, tl.max_binding_size)
    size = _dtypes.buffer_size(dt, shape)
    if buffer.size < size:
        V.fail(op, label, "buffer", f"a GPUBuffer of at least {size} bytes ({dt} {list(shape)})",
               f"a buffer of {buffer.size} bytes")
    if buffer.usage & TENSOR_USAGE != TENSOR_USAGE:
        V.fail(op, label, "buffer", f"a GPUBuffer with usage {usage_names(TENSOR_USAGE)}",
               f"a buffer with usage {usage_names(buffer.usage)}")
    if buffer.map_state != "unmapped":
        raise InvalidStateError(f"{op}: argument 'buffer': the buffer is mapped ({buffer.map_state}); unmap it first")
    if _timeline.owner_destroyed(buffer):
        raise InvalidStateError(f"{op}: argument 'buffer': the buffer has been destroyed")
    _timeline.note_owner_destroy(buffer)
    with tl.lock:
        return tl.wrap_buffer(buffer, dt, shape, label=label, readable=flags.get("readable", False),
                              writable=flags.get("writable", False),
                              importable_to_webgpu=flags.get("importable_to_webgpu", False)
                              or flags.get("exportable_to_gpu", False))
