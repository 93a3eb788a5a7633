"""resample2d against a NumPy float64 reference of the spec's coordinate transformation.

Reference (https://www.w3.org/TR/webnn/#api-mlgraphbuilder-resample2d-method), per resampled
axis with scale = outputSize / inputSize:
    u = clamp((o + 0.5) / scale - 0.5, 0, inputSize - 1)
    nearest-neighbor: ceil(u - 0.5), evaluated here with exact fractions
    linear: interpolate floor(u) and ceil(u) with weight u - floor(u)
Some vectors are copied from the web-platform-tests (WPT, 3-Clause BSD),
webnn/conformance_tests/resample2d.https.any.js, and the spec's own 4x4 -> 8x8 example.
"""

from __future__ import annotations

import numpy as np
import pytest

import webnn_gpu as webnn
from helpers import assert_close, run_graph
from references import ref_resample, src_nearest

WPT_IN = np.array([59.92947006225586, 41.98918914794922, 66.39534759521484,
                   90.7006607055664, 86.95105743408203, 79.10005187988281], np.float32).reshape(1, 1, 2, 3)
WPT_LINEAR_2X = np.array([
    59.92947006225586, 55.444400787353516, 46.47425842285156, 48.090728759765625, 60.29380798339844, 66.39534759521484,
    67.62226867675781, 64.02411651611328, 56.82780838012695, 57.31512451171875, 65.48605346679688, 69.57152557373047,
    83.00786590576172, 81.18354797363281, 77.534912109375, 75.76390838623047, 75.87055206298828, 75.92387390136719,
    90.7006607055664, 89.76325988769531, 87.88845825195312, 84.9883041381836, 81.06280517578125, 79.10005187988281,
], np.float32).reshape(1, 1, 4, 6)


def test_resample_wpt_vectors_and_spec_example(ctx):
    spec_in = np.array([0, 1, 2, 3, 0, 1, 2, 3, 12, 13, 14, 15, 12, 13, 14, 15], np.float32).reshape(1, 1, 4, 4)
    spec_out = np.array([[0, 0.25, 0.75, 1.25, 1.75, 2.25, 2.75, 3]] * 3 + [[3, 3.25, 3.75, 4.25, 4.75, 5.25, 5.75, 6]]
                        + [[9, 9.25, 9.75, 10.25, 10.75, 11.25, 11.75, 12]]
                        + [[12, 12.25, 12.75, 13.25, 13.75, 14.25, 14.75, 15]] * 3, np.float32).reshape(1, 1, 8, 8)
    nhwc_in = WPT_IN.reshape(1, 2, 3, 1)

    def build(b, o):
        x = o["x"]
        return {"nearest_scales": b.resample2d(x, scales=[2, 2]),
                "nearest_sizes": b.resample2d(x, sizes=[4, 6], scales=[0.5, 0.5]),  # sizes win
                "nearest_axes32": b.resample2d(x, sizes=[6, 4], axes=[3, 2]),
                "linear_scales": b.resample2d(x, mode="linear", scales=[2, 2]),
                "linear_sizes": b.resample2d(x, mode="linear", sizes=[4, 6]),
                "linear_nhwc": b.resample2d(o["xh"], mode="linear", sizes=[4, 6], axes=[1, 2]),
                "spec": b.resample2d(o["s"], mode="linear", sizes=[8, 8])}

    out = run_graph(ctx, build, {"x": WPT_IN, "xh": nhwc_in, "s": spec_in})
    nearest = np.repeat(np.repeat(WPT_IN, 2, axis=2), 2, axis=3)
    for k in ("nearest_scales", "nearest_sizes", "nearest_axes32"):
        np.testing.assert_array_equal(out[k], nearest, err_msg=k)
    # WPT allows 84 ULP for float32 linear; we are within a few
    for k in ("linear_scales", "linear_sizes"):
        assert_close(out[k], WPT_LINEAR_2X, atol=0, rtol=4 * 2.0**-23, err_msg=k)
    assert_close(out["linear_nhwc"], WPT_LINEAR_2X.reshape(1, 4, 6, 1), atol=0, rtol=4 * 2.0**-23)
    np.testing.assert_array_equal(out["spec"], spec_out)


SIZES = [(5, 7), (2, 3), (7, 5), (1, 9), (12, 4), (3, 3)]


@pytest.mark.parametrize("mode", ["nearest-neighbor", "linear"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_resample_up_down_and_odd_sizes(ctx, rng, mode, dtype):
    x = rng.standard_normal((2, 3, 6, 5)).astype(dtype)

    def build(b, o):
        outs = {f"s{i}": b.resample2d(o["x"], mode=mode, sizes=list(s)) for i, s in enumerate(SIZES)}
        outs["scales"] = b.resample2d(o["x"], mode=mode, scales=[1.5, 0.7])  # sizes floor(9.0), floor(3.5)
        outs["axes01"] = b.resample2d(o["x"], mode=mode, sizes=[3, 4], axes=[0, 1])
        outs["axes31"] = b.resample2d(o["x"], mode=mode, sizes=[8, 2], axes=[3, 1])
        return outs

    out = run_graph(ctx, build, {"x": x})
    atol, rtol = (0, 0) if mode == "nearest-neighbor" else ((1e-6, 1e-6) if dtype == np.float32 else (1e-3, 2.0**-10))
    for i, s in enumerate(SIZES):
        assert out[f"s{i}"].dtype == dtype
        assert_close(out[f"s{i}"], ref_resample(x, mode, s), atol=atol, rtol=rtol, err_msg=f"sizes {s}")
    assert out["scales"].shape == (2, 3, 9, 3)
    assert_close(out["scales"], ref_resample(x, mode, (9, 3)), atol=atol, rtol=rtol)
    assert_close(out["axes01"], ref_resample(x, mode, (3, 4), axes=(0, 1)), atol=atol, rtol=rtol)
    assert_close(out["axes31"], ref_resample(x, mode, (8, 2), axes=(3, 1)), atol=atol, rtol=rtol)


def test_resample_nearest_ties_round_down(ctx):
    # 4 -> 2: u = 0.5 and 2.5, so ceil(u - 0.5) picks 0 and 2 (not 1 and 3)
    x = np.arange(4, dtype=np.float32).reshape(1, 1, 1, 4)
    out = run_graph(ctx, lambda b, o: {"y": b.resample2d(o["x"], sizes=[1, 2])}, {"x": x})
    np.testing.assert_array_equal(out["y"].reshape(-1), [0, 2])


def test_resample_large_output(ctx, rng):
    """17 million outputs: more than 65,535 * 256 invocations, a 2-D folded dispatch."""
    x = rng.standard_normal((1, 1, 64, 65)).astype(np.float32)
    out = run_graph(ctx, lambda b, o: {"n": b.resample2d(o["x"], sizes=[4100, 4160])}, {"x": x}, tensor_path=False)
    rows, cols = src_nearest(64, 4100), src_nearest(65, 4160)
    np.testing.assert_array_equal(out["n"][0, 0], x[0, 0][rows[:, None], cols[None, :]])


def test_resample_nan_propagates(ctx):
    x = np.array([[1.0, np.nan], [3.0, 4.0]], np.float32).reshape(1, 1, 2, 2)
    out = run_graph(ctx, lambda b, o: {"l": b.resample2d(o["x"], mode="linear", sizes=[4, 4]),
                                       "n": b.resample2d(o["x"], sizes=[4, 4])}, {"x": x})
    assert_close(out["l"], ref_resample(x, "linear", (4, 4)), atol=1e-6, rtol=1e-6)
    assert_close(out["n"], ref_resample(x, "nearest-neighbor", (4, 4)), atol=0, rtol=0)
    assert np.isnan(out["l"][0, 0, 0, 3]) and not np.isnan(out["l"][0, 0, 3, 0])


def test_resample_validation_errors(ctx):
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [1, 1, 4, 4]})
    bad = [
        (dict(mode="cubic"), "mode"),
        (dict(scales=[2.0]), "scales"),
        (dict(scales=[2.0, 0.0]), "scales"),
        (dict(scales=[2.0, -1.0]), "scales"),
        (dict(scales=[0.1, 1.0]), "scales"),  # floor(4 * 0.1) = 0
        (dict(scales="2"), "scales"),
        (dict(sizes=[4]), "sizes"),
        (dict(sizes=[0, 4]), "sizes"),
        (dict(sizes=[4, 4], axes=[1]), "axes"),
        (dict(sizes=[4, 4], axes=[2, 2]), "axes"),
        (dict(sizes=[4, 4], axes=[3, 4]), "axes"),
    ]
    for opts, arg in bad:
        with pytest.raises(webnn.MLTypeError, match=f"resample2d \\['r'\\]: argument '{arg}'"):
            b.resample2d(x, label="r", **opts)
    with pytest.raises(webnn.MLTypeError, match="expected a 4-D operand"):
        b.resample2d(b.input("y", {"data_type": "float32", "shape": [1, 4, 4]}))
    with pytest.raises(webnn.MLTypeError, match="argument 'input'.*got 'int32'"):
        b.resample2d(b.input("i", {"data_type": "int32", "shape": [1, 1, 4, 4]}))
    with pytest.raises(webnn.MLTypeError, match="unknown option"):
        b.resample2d(x, size=[2, 2])
    assert b.resample2d(x, scales=[0.5, 2.5]).shape == (1, 1, 2, 10)
