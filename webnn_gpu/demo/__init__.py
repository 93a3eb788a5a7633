"""The background-blur demo: an application on the engine's public API and kernel helpers.

* :mod:`~webnn_gpu.demo.blur`: :class:`BackgroundBlur`, the WGSL passes around the
  segmentation model (preprocess, mask upsample, weighted blur, blend; ``shaders/``);
* :mod:`~webnn_gpu.demo.video`: video in and out through FFmpeg (imageio-ffmpeg), PNG, preview;
* :mod:`~webnn_gpu.demo.pipeline`: :class:`BlurPipeline` (frames in flight, one submit per
  frame), :class:`WebNNSegmenter`, :func:`process_video`;
* :mod:`~webnn_gpu.demo.command`: the ``webnn-gpu blur`` command.

See docs/demo.md.
"""

from __future__ import annotations

from .blur import BackgroundBlur
from .command import DEFAULT_OUTPUT, add_arguments, main, open_output, run
from .pipeline import (
    STAGES,
    BlurPipeline,
    RunStats,
    Segmenter,
    WebNNSegmenter,
    create_device,
    load_segmenter,
    process_video,
)
from .video import VideoReader, VideoWriter, write_png

__all__ = [
    "BackgroundBlur",
    "BlurPipeline",
    "RunStats",
    "Segmenter",
    "WebNNSegmenter",
    "STAGES",
    "create_device",
    "load_segmenter",
    "process_video",
    "VideoReader",
    "VideoWriter",
    "write_png",
    "open_output",
    "add_arguments",
    "run",
    "main",
    "DEFAULT_OUTPUT",
]
