"""NumPy float64 references of the demo's WGSL passes (webnn_gpu/demo/shaders/*.wgsl).

Written from the maths in the shaders' contract headers, not from the shaders: plain
array code (gathers, loops over taps) in float64.
"""

from __future__ import annotations

import math

import numpy as np


def bilinear_resize(image: np.ndarray, out_h: int, out_w: int) -> np.ndarray:
    """Bilinear resize on half-pixel centres, clamped at the edges (no antialiasing).

    image: (H, W) or (H, W, C); returns float64 (out_h, out_w[, C]).
    """
    image = np.asarray(image, dtype=np.float64)
    h, w = image.shape[:2]
    sy = np.clip((np.arange(out_h) + 0.5) * (h / out_h) - 0.5, 0, h - 1)
    sx = np.clip((np.arange(out_w) + 0.5) * (w / out_w) - 0.5, 0, w - 1)
    return _bilinear_at(image, sy, sx)


def _bilinear_at(image: np.ndarray, sy: np.ndarray, sx: np.ndarray) -> np.ndarray:
    h, w = image.shape[:2]
    y0 = np.floor(sy).astype(int)
    x0 = np.floor(sx).astype(int)
    y1 = np.minimum(y0 + 1, h - 1)
    x1 = np.minimum(x0 + 1, w - 1)
    fy = (sy - y0)[:, None]
    fx = (sx - x0)[None, :]
    if image.ndim == 3:
        fy = fy[..., None]
        fx = fx[..., None]
    top = image[y0][:, x0] * (1 - fx) + image[y0][:, x1] * fx
    bottom = image[y1][:, x0] * (1 - fx) + image[y1][:, x1] * fx
    return top * (1 - fy) + bottom * fy


def preprocess(frame: np.ndarray, model_h: int, model_w: int) -> np.ndarray:
    """The model input: the uint8 frame (H, W, 3) resized and scaled to [0, 1], NHWC."""
    return bilinear_resize(frame.astype(np.float64) / 255.0, model_h, model_w)[None]


def upsample_mask(mask: np.ndarray, h: int, w: int) -> np.ndarray:
    """The frame-sized mask (h, w) in [0, 1] from the model's mask (MH, MW)."""
    return np.clip(bilinear_resize(mask, h, w), 0.0, 1.0)


def gaussian(sigma: float) -> np.ndarray:
    """Normalised Gaussian taps, radius max(1, ceil(3 sigma))."""
    r = max(1, math.ceil(3 * sigma))
    g = np.exp(-0.5 * (np.arange(-r, r + 1) / sigma) ** 2)
    return g / g.sum()


def weighted_blur(
    frame: np.ndarray, mask: np.ndarray, sigma: float, factor: int, eps: float = 1e-3
) -> np.ndarray:
    """The blurred grid (ceil(H/F), ceil(W/F), 3): background-weighted Gaussian blur.

    frame uint8 (H, W, 3); mask (H, W) in [0, 1]; sigma in frame pixels (the grid's
    Gaussian has sigma / factor). Taps outside the grid are left out.
    """
    c = frame.astype(np.float64) / 255.0
    w = 1.0 - np.asarray(mask, dtype=np.float64)
    h, wd = mask.shape
    lh, lw = -(-h // factor), -(-wd // factor)
    src = np.zeros((lh, lw, 4))
    plain = np.zeros((lh, lw, 3))
    for j in range(lh):
        for i in range(lw):
            blk = (slice(j * factor, min(j * factor + factor, h)),
                   slice(i * factor, min(i * factor + factor, wd)))
            n = c[blk].shape[0] * c[blk].shape[1]
            src[j, i, :3] = (w[blk][..., None] * c[blk]).sum(axis=(0, 1)) / n
            src[j, i, 3] = w[blk].sum() / n
            plain[j, i] = c[blk].sum(axis=(0, 1)) / n
    g = gaussian(sigma / factor)
    r = (len(g) - 1) // 2
    # 2-D weighted sum with the separable kernel g(dx) g(dy), taps outside left out
    padded = np.zeros((lh + 2 * r, lw + 2 * r, 4))
    padded[r:r + lh, r:r + lw] = src
    acc = np.zeros((lh, lw, 4))
    for dy in range(2 * r + 1):
        for dx in range(2 * r + 1):
            acc += g[dy] * g[dx] * padded[dy:dy + lh, dx:dx + lw]
    return (acc[..., :3] + eps * plain) / (acc[..., 3:] + eps)


def blend(frame: np.ndarray, mask: np.ndarray, blurred: np.ndarray, factor: int) -> np.ndarray:
    """The output frame uint8 (H, W, 3): mask * original + (1 - mask) * upsampled blurred."""
    h, w = mask.shape
    lh, lw = blurred.shape[:2]
    sy = np.clip((np.arange(h) + 0.5) / factor - 0.5, 0, lh - 1)
    sx = np.clip((np.arange(w) + 0.5) / factor - 0.5, 0, lw - 1)
    up = _bilinear_at(np.asarray(blurred, dtype=np.float64), sy, sx)
    m = np.asarray(mask, dtype=np.float64)[..., None]
    v = m * frame.astype(np.float64) / 255.0 + (1 - m) * up
    return np.floor(np.clip(v, 0, 1) * 255 + 0.5).astype(np.uint8)
