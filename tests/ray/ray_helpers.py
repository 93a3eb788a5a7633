"""What the Ray tests share with the actors they start (importable on the workers: the test
session's Ray instance puts this folder on their PYTHONPATH).

* :func:`tiny_segmenter`: a small TFLite segmentation model (3x3 convolution + logistic on
  a 32 x 32 NHWC input, marking red pixels as person), written with the model tests'
  ``tflite_maker``; it loads and compiles in a fraction of the selfie model's time and goes
  through the same path (``webnn_gpu.load``, ``ctx.record`` into the frame's encoder).
* :func:`write_clip`: a short synthetic clip (a red 'person' moving over texture).
* :class:`KillOnceWorker`: a ``VideoBlurWorker`` that kills its own actor (``ray.kill``)
  in the middle of one chosen video, once per marker file.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
for _dir in (HERE.parent / "model", HERE.parent / "demo"):
    if str(_dir) not in sys.path:
        sys.path.append(str(_dir))

from clips import scene  # noqa: E402
from webnn_gpu.ray import VideoBlurWorker  # noqa: E402

SAME, NONE = 0, 0


def tiny_segmenter(size: int = 32) -> bytes:
    """A [1, size, size, 3] -> [1, size, size, 1] float32 TFLite segmenter (conv 3x3 + logistic)."""
    from tflite_maker import ModelMaker

    w = np.zeros((1, 3, 3, 3), np.float32)  # OHWI
    w[0, :, :, 0] = 12.0 / 9  # red in
    w[0, :, :, 1] = -6.0 / 9  # green and blue out
    w[0, :, :, 2] = -6.0 / 9
    m = ModelMaker()
    x = m.input([1, size, size, 3], name="image")
    y = m.op("CONV_2D", [x, m.const(w), m.const(np.array([-2.0], np.float32))], [1, size, size, 1],
             options=dict(padding=SAME, strideH=1, strideW=1, dilationHFactor=1, dilationWFactor=1,
                          fusedActivationFunction=NONE))
    mask = m.op("LOGISTIC", [y], [1, size, size, 1], out_name="mask")
    m.output(mask)
    return m.finish()


def write_clip(path: Path, n: int = 6, h: int = 48, w: int = 64, seed: int = 0) -> Path:
    """Write a short lossless H.264 clip of :func:`scene` frames."""
    from webnn_gpu.demo import VideoWriter

    with VideoWriter(path, w, h, fps=10, crf=0) as writer:
        for f in scene(n, h, w, seed):
            writer.write(f)
    return path


class KillOnceWorker(VideoBlurWorker):
    """Kills its own actor with ``ray.kill`` at frame ``kill_at`` of the video named
    ``kill_name``, the first time only: a marker file beside the video (``.killed-once``)
    remembers it across the restart."""

    kill_name = "clip1"
    kill_at = 2

    def on_frame(self, source: str, index: int) -> None:
        marker = Path(source).parent / ".killed-once"
        if Path(source).stem != self.kill_name or index != self.kill_at:
            return
        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return
        os.close(fd)
        import time

        import ray

        ray.kill(ray.get_runtime_context().current_actor, no_restart=False)
        time.sleep(60)  # the kill lands while the video is half written
