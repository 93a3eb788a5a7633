"""Test data shared by the data-movement and gather/scatter tests.

Movement is exact: results must equal the NumPy reference bit for bit (a NaN only has to
stay a NaN, since a driver may canonicalise NaN payloads when it moves floats).
"""

from __future__ import annotations

import numpy as np

import webnn_gpu as webnn

DTYPES = ("float32", "float16", "int32", "uint32", "int64", "uint64", "int8", "uint8")


def np_dtype(data_type: str) -> np.dtype:
    """The NumPy dtype of a WebNN data type."""
    return webnn._dtypes.info(data_type).numpy


def data(rng, data_type: str, shape) -> np.ndarray:
    """Random values over the whole range of ``data_type``; floats include NaN, +-inf and -0.0."""
    dt = np_dtype(data_type)
    shape = tuple(shape)
    if dt.kind == "f":
        a = np.asarray(rng.standard_normal(shape) * 100).astype(dt)
        flat = a.reshape(-1)
        specials = np.array([np.nan, np.inf, -np.inf, -0.0], dtype=dt)
        if flat.size >= 8:
            pos = rng.choice(flat.size, size=4, replace=False)
            flat[pos] = specials
        return a
    ii = np.iinfo(dt)
    return np.asarray(rng.integers(ii.min, ii.max, size=shape, dtype=dt, endpoint=True))


def assert_moved(got: np.ndarray, ref: np.ndarray, msg: str = "") -> None:
    """``got`` equals ``ref`` exactly: same dtype and shape, same bits (NaN only has to be NaN)."""
    ref = np.asarray(ref)
    assert got.dtype == ref.dtype, f"dtype {got.dtype} != {ref.dtype} {msg}"
    assert got.shape == ref.shape, f"shape {got.shape} != {ref.shape} {msg}"
    if ref.dtype.kind == "f":
        nan = np.isnan(ref)
        assert np.array_equal(np.isnan(got), nan), f"NaN positions differ {msg}"
        bits = {2: np.uint16, 4: np.uint32}[ref.dtype.itemsize]
        np.testing.assert_array_equal(got[~nan].view(bits), ref[~nan].view(bits), err_msg=msg)
    else:
        np.testing.assert_array_equal(got, ref, err_msg=msg)
