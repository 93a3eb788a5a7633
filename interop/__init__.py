"""webnn_gpu.interop: the WebGPU side of webnn-gpu.

* :func:`import_external_buffer` (the MLTensor explainer's name) and
  ``MLContext.export_to_gpu`` (the spec's name) rent a tensor to your WGSL as a
  :class:`Rental` (``rental.buffer`` is the ``wgpu.GPUBuffer``).
* ``MLContext.record(encoder, graph, inputs, outputs)`` writes a graph into your
  ``wgpu.GPUCommandEncoder`` (one submit for your passes and the inference).
* ``MLContext.tensor_from_buffer(buffer, descriptor)`` wraps your ``GPUBuffer`` as an MLTensor.

The rules (ordering, held work, errors, the slow path across devices) are in docs/interop.md.
"""

from .recording import record, tensor_from_buffer
from .rental import (
    RENT_USAGE,
    Rental,
    export_to_gpu,
    export_to_gpu_async,
    import_external_buffer,
    import_external_buffer_async,
)

__all__ = [
    "Rental",
    "RENT_USAGE",
    "import_external_buffer",
    "import_external_buffer_async",
    "export_to_gpu",
    "export_to_gpu_async",
    "record",
    "tensor_from_buffer",
]
