"""Synthetic frames for the demo and Ray tests: a red 'person' (an ellipse) moving over a
textured grey-blue background, which :class:`key_segmenter.KeySegmenter` and the Ray tests'
tiny segmenter both separate exactly."""

from __future__ import annotations

import numpy as np


def scene(n: int, h: int, w: int, seed: int = 0, start: float = 0.35, travel: float = 0.3) -> list[np.ndarray]:
    """``n`` uint8 frames of ``h`` x ``w`` x 3; the ellipse's centre moves from ``start`` to
    ``start + travel`` of the width."""
    rng = np.random.default_rng(seed)
    texture = rng.integers(40, 200, (h, w, 1)).astype(np.float64)
    y, x = np.mgrid[0:h, 0:w]
    frames = []
    for t in range(n):
        bg = np.concatenate([texture * 0.5, texture * 0.8, texture], -1)
        cx = w * (start + travel * t / max(n - 1, 1))
        inside = ((x - cx) / (0.2 * w)) ** 2 + ((y - h / 2) / (0.35 * h)) ** 2 < 1
        person = np.stack([230 + 0 * x, 40 + (x % 7) * 5, 30 + (y % 5) * 6], -1)
        frames.append(np.where(inside[..., None], person, bg).astype(np.uint8))
    return frames
