"""Every intentional difference between webnn-gpu's Python API and the WebNN spec, with why.

The spec is https://www.w3.org/TR/webnn/. Naming follows wgpu-py (camelCase -> snake_case,
spec strings for enums, keyword-only options). ``DIFFERENCES`` is also rendered into the
README's "Differences from the spec" section; keep the two in step.
"""

from __future__ import annotations

DIFFERENCES: dict[str, str] = {
    "MLContext.compute": (
        "Kept (removed from the current spec): runs a graph on NumPy arrays and returns NumPy "
        "arrays in one submission. The convenient immediate model for Python users."
    ),
    "blocking twins": (
        "Every Promise-returning method (create_context, build, read_tensor, compute, create_tensor) "
        "has a blocking plain name and an ``_async`` twin, as in wgpu-py."
    ),
    "MLGraphBuilder.constant(ndarray)": (
        "Convenience overload: the descriptor is taken from the array's dtype and shape."
    ),
    "MLTensor.buffer": (
        "An MLTensor is backed by a wgpu.GPUBuffer with STORAGE | COPY_SRC | COPY_DST usage; "
        "``tensor.buffer`` exposes it; to use it from your own WGSL, rent it (export_to_gpu returns the buffer "
        "and orders your work against WebNN's)."
    ),
    "rented tensors": (
        "Two ways to rent, each as its source text says: MLContext.export_to_gpu follows the merged spec "
        "(webnn PR #942: WebNN reads, writes and dispatches that use the tensor raise InvalidStateError until "
        "the buffer is returned); interop.import_external_buffer keeps the MLTensor explainer's rule "
        "(dispatch and write_tensor are held on the timeline until the buffer is returned; read_tensor raises)."
    ),
    "held work and reads": (
        "read_tensor of a tensor whose WebNN work is held behind a rental, renting such a tensor, "
        "and recording it raise InvalidStateError instead of waiting (the rental is returned by the "
        "caller's own thread, so waiting would never end)."
    ),
    "MLContext.export_to_gpu": (
        "Returns the GPUBuffer itself as in the spec: a webnn_gpu.interop.RentedBuffer, a subclass of wgpu-py's "
        "native GPUBuffer (its destroy() returns the rental instead of destroying the tensor's memory, and it is "
        "also a context manager). Blocking, with an _async twin. Additions: usage= per the open proposal #954 "
        "(exact flags, default STORAGE | COPY_SRC | COPY_DST; MAP_READ, MAP_WRITE and QUERY_RESOLVE raise "
        "NotSupportedError because the buffer is the tensor's own memory; the native buffer of an importable "
        "tensor carries STORAGE | COPY_SRC | COPY_DST | UNIFORM | INDIRECT | VERTEX | INDEX, so WebGPU validates "
        "against those, not against the narrower flags asked for); device= (rent to another device: copied "
        "through the CPU, the slow path) and allow_copy=."
    ),
    "interop.import_external_buffer(device, tensor)": (
        "The MLTensor explainer's GPUDevice.importExternalBuffer as a function of webnn_gpu.interop "
        "(we cannot add methods to wgpu.GPUDevice); returns the same RentedBuffer type as export_to_gpu, "
        "with the explainer's held-work rule; usage= and allow_copy= as export_to_gpu."
    ),
    "MLGraphBuilder.wgsl(code, inputs, outputs)": (
        "An extension (custom operators, WebNN issue #6): the caller's WGSL compute shader as a graph node, "
        "compiled at build(), opaque to the compiler, in the same command buffer as the built-in kernels. "
        "Loaders map model custom op codes onto it with custom_ops=."
    ),
    "MLContext.record(encoder, graph, inputs, outputs)": (
        "An addition: writes the graph's kernels into the caller's wgpu.GPUCommandEncoder (one submit "
        "for the caller's passes and the inference) instead of the withdrawn MLCommandEncoder; inputs "
        "and outputs may be MLTensors or plain GPUBuffers."
    ),
    "MLContext.tensor_from_buffer(buffer, descriptor)": (
        "An addition: wraps the caller's GPUBuffer (STORAGE | COPY_SRC | COPY_DST) as an MLTensor "
        "without a copy; the tensor does not destroy it."
    ),
    "read_tensor(out=)": "Reads into a caller's NumPy array instead of an ArrayBufferView.",
    "MLGraph.inputs / MLGraph.outputs": "Descriptors of the compiled graph's named operands (an addition).",
    "MLContext.lost": "A concurrent.futures.Future instead of a Promise.",
    "errors": (
        "DOMExceptions become Python classes that subclass the built-in a Python user catches: "
        "MLTypeError(TypeError), DataError(ValueError), InvalidStateError(RuntimeError), "
        "OperationError(RuntimeError), NotSupportedError(NotImplementedError)."
    ),
    "error classes for sizes": (
        "Data of the wrong byte length is a DataError (the spec throws TypeError) and a tensor past "
        "maxTensorByteLength a NotSupportedError naming the device limit (the spec: TypeError)."
    ),
    "graph inputs": (
        "A graph's inputs are the builder inputs its outputs depend on; dispatch/compute ask for "
        "exactly those names."
    ),
    "conv2d groups": (
        "Output channels that groups does not divide raise MLTypeError (the spec checks only the "
        "input channels; a group's output channels are then undefined)."
    ),
    "conv_transpose2d groups": (
        "Input channels that groups does not divide raise MLTypeError (the spec checks only that the "
        "filter's input channels equal the input's; the channels of a group are then undefined)."
    ),
    "gather / scatter indices": (
        "Negative indices count from the end, then every index is clamped into [0, dim - 1], so "
        "nothing is read or written outside a buffer (WPT's out-of-bound vectors expect clamping)."
    ),
    "scatter duplicates": "When several updates target one element, the last in row-major order wins.",
    "pad value": "Converted to integer input types by truncation toward zero and saturation (NaN -> 0).",
    "quantize_linear": (
        "Zero points int8, uint8, int32 and uint32; int4/uint4 are not supported. NaN quantizes to "
        "the zero point. Scales of lower rank than the input are right-aligned."
    ),
    "NaN in max/min/clamp/relu": "Follow WGSL: when one operand is NaN the other is returned; sign(NaN) is 0.",
    "float16 arithmetic": (
        "Transcendental functions on float16 compute in f32 and round once (more accurate than f16)."
    ),
    "average_pool2d windows entirely in padding": (
        "Give 0 for average and L2 pooling and the type's lowest value for max pooling (undefined in "
        "the spec; reachable with rounding_type='ceil')."
    ),
    "compiler rewrites": (
        "The graph compiler may change float rounding (never the math): fused epilogues compute "
        "float16 in f32 and round once, fused pools sum in another order, a pointwise conv2d after "
        "a linear upsampling runs before it on the small image (swap_resample_conv; exact in real "
        "arithmetic), fused kernels keep intermediate values in f32 registers instead of storing them "
        "in the graph's data type, a 2x upsampling is interpolated where its sum is read. Results stay within the WPT tolerances; WEBNN_GPU_PASSES=-name switches a "
        "pass off (docs/performance.md)."
    ),
    "cast float -> integer": (
        "Truncates toward zero, saturates to the target range and maps NaN to 0 (implementation-"
        "defined in the spec); integer narrowing keeps the low bits."
    ),
}
