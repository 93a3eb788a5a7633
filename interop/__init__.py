"""webnn_gpu.interop: the WebGPU side of webnn-gpu (renting tensors, recording graphs, demo shaders)."""
