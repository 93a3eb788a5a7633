"""webnn-gpu: the W3C WebNN API on any GPU through WebGPU (wgpu-py).

(Bootstrap placeholder: the core engine lands in the next commits.)
"""

__version__ = "0.1.0"
