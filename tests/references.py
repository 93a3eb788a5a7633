"""float64 NumPy references shared by test files (independent of the kernels they check)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np


def ref_conv2d(x, w, padding=(0, 0, 0, 0), strides=(1, 1), dilations=(1, 1), groups=1):
    """nchw x oihw -> nchw, float64, explicit loop over the filter window."""
    n, c, h, wd = x.shape
    o, i, kh_, kw_ = w.shape
    pt, pb, pl, pr = padding
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    oh = (h + pt + pb - (kh_ - 1) * dilations[0] - 1) // strides[0] + 1
    ow = (wd + pl + pr - (kw_ - 1) * dilations[1] - 1) // strides[1] + 1
    out = np.zeros((n, o, oh, ow))
    opg = o // groups
    for g in range(groups):
        xs = xp[:, g * i:(g + 1) * i]
        ws = w[g * opg:(g + 1) * opg]
        for kh in range(kh_):
            for kw in range(kw_):
                r0, c0 = kh * dilations[0], kw * dilations[1]
                rows = slice(r0, r0 + strides[0] * (oh - 1) + 1, strides[0])
                cols = slice(c0, c0 + strides[1] * (ow - 1) + 1, strides[1])
                patch = xs[:, :, rows, cols]
                out[:, g * opg:(g + 1) * opg] += np.einsum("nihw,oi->nohw", patch, ws[:, :, kh, kw])
    return out


def conv2d_nhwc(x, w_ohwi, bias=None, pad: int = 0, stride: int = 1, groups: int = 1) -> np.ndarray:
    """conv2d of an NHWC input with an OHWI filter (symmetric padding), NHWC out, float64."""
    out = ref_conv2d(x.astype(np.float64).transpose(0, 3, 1, 2), w_ohwi.astype(np.float64).transpose(0, 3, 1, 2),
                     padding=(pad,) * 4, strides=(stride, stride), groups=groups).transpose(0, 2, 3, 1)
    return out if bias is None else out + np.asarray(bias, np.float64)


def src_nearest(n_in: int, n_out: int) -> np.ndarray:
    idx = []
    for o in range(n_out):
        u = Fraction(2 * o + 1, 2) * Fraction(n_in, n_out) - Fraction(1, 2)
        u = min(max(u, Fraction(0)), Fraction(n_in - 1))
        idx.append(math.ceil(u - Fraction(1, 2)))
    return np.array(idx)


def src_linear(n_in: int, n_out: int):
    o = np.arange(n_out, dtype=np.float64)
    u = np.clip((o + 0.5) / (n_out / n_in) - 0.5, 0, n_in - 1)
    lo = np.floor(u).astype(int)
    hi = np.ceil(u).astype(int)
    return lo, hi, u - lo


def ref_resample(x: np.ndarray, mode: str, out_sizes, axes=(2, 3)) -> np.ndarray:
    y = x.astype(np.float64)
    for a, n_out in zip(axes, out_sizes):
        n_in = y.shape[a]
        if mode == "nearest-neighbor":
            y = np.take(y, src_nearest(n_in, n_out), axis=a)
        else:
            lo, hi, t = src_linear(n_in, n_out)
            shape = [1] * y.ndim
            shape[a] = n_out
            t = t.reshape(shape)
            y = np.take(y, lo, axis=a) * (1 - t) + np.take(y, hi, axis=a) * t
    return y
