"""webnn_gpu.interop: the WebGPU side of webnn-gpu.

* ``MLContext.export_to_gpu`` (the spec's exportToGPU) and :func:`import_external_buffer`
  (the MLTensor explainer's) rent a tensor to your WGSL as the ``wgpu.GPUBuffer`` itself
  (a :class:`RentedBuffer`), returned by its ``destroy()`` or the end of a ``with`` block.
* ``MLContext.record(encoder, graph, inputs, outputs)`` writes a graph into your
  ``wgpu.GPUCommandEncoder`` (one submit for your passes and the inference).
* ``MLContext.tensor_from_buffer(buffer, descriptor)`` wraps your ``GPUBuffer`` as an MLTensor.

The rules (ordering, held work, errors, the slow path across devices) are in docs/interop.md.
"""

from .recording import record, tensor_from_buffer
from .rental import (
    EXPORT_USAGES,
    RENT_USAGE,
    RentedBuffer,
    export_to_gpu,
    export_to_gpu_async,
    import_external_buffer,
    import_external_buffer_async,
)

__all__ = [
    "RentedBuffer",
    "RENT_USAGE",
    "EXPORT_USAGES",
    "import_external_buffer",
    "import_external_buffer_async",
    "export_to_gpu",
    "export_to_gpu_async",
    "record",
    "tensor_from_buffer",
]
