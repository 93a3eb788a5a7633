"""The demo's WGSL passes (webnn_gpu/demo/shaders) against NumPy float64 references.

Tolerances: float32 results to 1e-5 (resize, upsample: a few f32 roundings of values in
[0, 1]) or 1e-4 (the blur sums up to ~40 weighted terms); float16 model tensors to 6e-4
(half an f16 ulp at 1.0 is 2.4e-4, plus the f32 error); output bytes within 1 of the
reference (a value near a rounding boundary may round either way in f32), and at least
99% of them exact.
"""

from __future__ import annotations

import numpy as np
import pytest
import wgpu

import demo_reference as ref
from webnn_gpu.errors import DataError, MLTypeError, NotSupportedError
from webnn_gpu.demo.blur import (
    BLUR_EPS,
    BackgroundBlur,
    default_factor,
    gaussian_weights,
    render_shader,
)

USAGE = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST


def _frame(h: int, w: int, seed: int = 0) -> np.ndarray:
    """A smooth gradient plus noise, so bilinear errors show."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([255 * x / max(w - 1, 1), 255 * y / max(h - 1, 1), 128 + 0 * x], -1)
    return np.clip(base + rng.normal(0, 30, (h, w, 3)), 0, 255).astype(np.uint8)


def _model_buffers(device, blur: BackgroundBlur):
    return (
        device.create_buffer(size=blur.model_input_nbytes, usage=USAGE),
        device.create_buffer(size=blur.model_output_nbytes, usage=USAGE),
    )


def _run(device, blur, model_in, model_out, pre=True, post=True):
    encoder = device.create_command_encoder()
    if pre:
        blur.record_preprocess(encoder, model_in)
    if post:
        blur.record_postprocess(encoder, model_out)
    device.queue.submit([encoder.finish()])


def _ellipse_mask(h: int, w: int, soft: float = 3.0) -> np.ndarray:
    """A synthetic person: a soft-edged ellipse in the centre (1 inside, 0 outside)."""
    y, x = np.mgrid[0:h, 0:w]
    d = np.sqrt(((x - w / 2) / (0.25 * w)) ** 2 + ((y - h / 2) / (0.35 * h)) ** 2)
    return np.clip((1.0 - d) * min(h, w) / soft + 0.5, 0.0, 1.0)


def _bytes_close(got: np.ndarray, want: np.ndarray) -> None:
    diff = np.abs(got.astype(int) - want.astype(int))
    assert diff.max() <= 1, f"max byte difference {diff.max()}"
    assert (diff == 0).mean() >= 0.99, f"only {(diff == 0).mean():.4f} of the bytes exact"


# -- preprocess (a) --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "h, w, mh, mw, dtype",
    [
        (48, 64, 16, 16, "float32"),  # downscale
        (23, 37, 32, 40, "float32"),  # upscale, odd sizes, 3 * W * H not a multiple of 4
        (48, 64, 16, 16, "float16"),
        (23, 37, 5, 7, "float16"),  # odd element count: the last word's high half is 0
    ],
)
def test_preprocess_matches_reference(device, read, h, w, mh, mw, dtype):
    frame = _frame(h, w)
    blur = BackgroundBlur(device, w, h, model_width=mw, model_height=mh, dtype=dtype)
    model_in, model_out = _model_buffers(device, blur)
    blur.upload(frame)
    _run(device, blur, model_in, model_out, post=False)
    n = mh * mw * 3
    got = read(model_in, np.float32 if dtype == "float32" else np.float16)
    want = ref.preprocess(frame, mh, mw).reshape(-1)
    atol = 1e-5 if dtype == "float32" else 6e-4
    np.testing.assert_allclose(got[:n].astype(np.float64), want, rtol=0, atol=atol)
    if dtype == "float16" and n % 2:
        assert got[n] == 0


# -- mask upsample (b) ------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_mask_upsample_matches_reference(device, read, dtype):
    h, w, mh, mw = 45, 70, 16, 20
    rng = np.random.default_rng(1)
    # values slightly outside [0, 1] check the clamp
    mask = rng.uniform(-0.1, 1.1, (mh, mw)).astype(np.float32 if dtype == "float32" else np.float16)
    blur = BackgroundBlur(device, w, h, model_width=mw, model_height=mh, dtype=dtype)
    model_in, model_out = _model_buffers(device, blur)
    blur.upload(_frame(h, w))
    device.queue.write_buffer(model_out, 0, mask.tobytes())
    _run(device, blur, model_in, model_out, pre=False)
    got = read(blur.mask_buffer, np.float32, h * w).reshape(h, w)
    want = ref.upsample_mask(mask.astype(np.float64), h, w)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)


# -- weighted blur (c) and blend (d) ----------------------------------------------------------


@pytest.mark.parametrize(
    "h, w, sigma, factor",
    [
        (40, 56, 2.0, 1),  # full resolution
        (37, 50, 6.5, 3),  # decimated grid with partial edge blocks
        (30, 44, 4.0, None),  # the default factor
    ],
)
def test_blur_and_blend_match_reference(device, read, h, w, sigma, factor):
    frame = _frame(h, w, seed=2)
    mask = _ellipse_mask(h, w).astype(np.float32)
    # mask size = frame size: the upsample is the identity, so `mask` reaches the blur as is
    blur = BackgroundBlur(
        device, w, h, model_width=8, model_height=8, mask_width=w, mask_height=h,
        sigma=sigma, factor=factor,
    )
    model_in, model_out = _model_buffers(device, blur)
    blur.upload(frame)
    device.queue.write_buffer(model_out, 0, mask.tobytes())
    _run(device, blur, model_in, model_out, pre=False)
    f = blur.factor
    assert f == (default_factor(sigma) if factor is None else factor)
    np.testing.assert_array_equal(read(blur.mask_buffer, np.float32, h * w), mask.reshape(-1))

    lh, lw = -(-h // f), -(-w // f)
    blurred = read(blur.blurred_buffer, np.float32, lh * lw * 4).reshape(lh, lw, 4)
    want_blurred = ref.weighted_blur(frame, mask.astype(np.float64), sigma, f, BLUR_EPS)
    np.testing.assert_allclose(blurred[..., :3], want_blurred, rtol=0, atol=1e-4)

    # blend, isolated: from the GPU's own blurred grid
    out = read(blur.output_buffer, np.uint8, h * w * 3).reshape(h, w, 3)
    _bytes_close(out, ref.blend(frame, mask.astype(np.float64), blurred[..., :3], f))
    # and the whole chain against the reference's blurred grid
    _bytes_close(out, ref.blend(frame, mask.astype(np.float64), want_blurred, f))
    if (3 * h * w) % 4:
        padding = read(blur.output_buffer, np.uint8)[3 * h * w :]
        assert not padding.any()


def test_person_does_not_bleed_into_background(device, read):
    """A white 'person' on a black background: its colour must not leak out by the blur."""
    h, w = 48, 64
    frame = np.zeros((h, w, 3), np.uint8)
    mask = np.zeros((h, w), np.float32)
    frame[12:36, 20:44] = 255
    mask[12:36, 20:44] = 1.0
    blur = BackgroundBlur(
        device, w, h, model_width=8, model_height=8, mask_width=w, mask_height=h, sigma=4.0,
        factor=1,
    )
    model_in, model_out = _model_buffers(device, blur)
    blur.upload(frame)
    device.queue.write_buffer(model_out, 0, mask.tobytes())
    _run(device, blur, model_in, model_out, pre=False)
    out = read(blur.output_buffer, np.uint8, h * w * 3).reshape(h, w, 3)
    assert (out[12:36, 20:44] == 255).all()  # the person is untouched
    assert out[mask == 0].max() <= 1  # the background right next to it stays black
    # whereas a plain (unweighted) blur would have spread the white out
    plain = ref.weighted_blur(frame, np.zeros((h, w)), 4.0, 1)
    assert plain[mask == 0].max() > 0.4


def test_uniform_colour_is_a_fixed_point(device, read):
    """Blurring a flat colour gives the same colour, whatever the mask."""
    h, w = 33, 45
    frame = np.empty((h, w, 3), np.uint8)
    frame[...] = (200, 30, 90)
    mask = _ellipse_mask(h, w).astype(np.float32)
    blur = BackgroundBlur(
        device, w, h, model_width=8, model_height=8, mask_width=w, mask_height=h, sigma=5.0,
    )
    model_in, model_out = _model_buffers(device, blur)
    blur.upload(frame)
    device.queue.write_buffer(model_out, 0, mask.tobytes())
    _run(device, blur, model_in, model_out, pre=False)
    out = read(blur.output_buffer, np.uint8, h * w * 3).reshape(h, w, 3)
    np.testing.assert_array_equal(out, frame)


def test_dispatch_folds_into_2d(device, read):
    """With a tiny per-dimension limit every kernel must still cover all of its elements."""
    h, w = 21, 30
    frame = _frame(h, w, seed=3)
    mask = _ellipse_mask(h, w).astype(np.float32)
    kwargs = dict(model_width=10, model_height=6, mask_width=w, mask_height=h, sigma=3.0)
    results = []
    for limit in (None, 4):
        blur = BackgroundBlur(device, w, h, **kwargs)
        if limit:
            blur._max_groups = limit
        model_in, model_out = _model_buffers(device, blur)
        blur.upload(frame)
        device.queue.write_buffer(model_out, 0, mask.tobytes())
        _run(device, blur, model_in, model_out)
        results.append(
            (read(model_in, np.float32, 180), read(blur.output_buffer, np.uint8, h * w * 3))
        )
    np.testing.assert_array_equal(results[0][0], results[1][0])
    np.testing.assert_array_equal(results[0][1], results[1][1])


# -- helpers and errors -------------------------------------------------------------------------


def test_gaussian_weights():
    g = gaussian_weights(2.0)
    assert len(g) == 13 and abs(g.sum() - 1) < 1e-12 and np.allclose(g, g[::-1])
    np.testing.assert_allclose(g, ref.gaussian(2.0), rtol=1e-12)
    with pytest.raises(MLTypeError, match="sigma"):
        gaussian_weights(0.0)


def test_templates_render_strictly():
    import jinja2

    with pytest.raises(jinja2.UndefinedError):
        render_shader("blend.wgsl", workgroup_size=64)


def test_bad_arguments(device):
    with pytest.raises(MLTypeError, match="width"):
        BackgroundBlur(device, 0, 10)
    with pytest.raises(MLTypeError, match="dtype"):
        BackgroundBlur(device, 10, 10, dtype="int8")
    with pytest.raises(MLTypeError, match="sigma"):
        BackgroundBlur(device, 10, 10, sigma=-1.0)
    blur = BackgroundBlur(device, 10, 8, model_width=4, model_height=4)
    with pytest.raises(DataError, match=r"\(8, 10, 3\)"):
        blur.upload(np.zeros((10, 8, 3), np.uint8))
    with pytest.raises(DataError, match="240 bytes"):
        blur.upload(b"\0" * 10)
    small = device.create_buffer(size=16, usage=USAGE)
    with pytest.raises(MLTypeError, match="model_input must hold at least 192 bytes"):
        blur.record_preprocess(device.create_command_encoder(), small)
    with pytest.raises(MLTypeError, match="wgpu.GPUBuffer"):
        blur.record_postprocess(device.create_command_encoder(), np.zeros(16))


def test_frame_larger_than_the_binding_limit(device):
    class SmallDevice:  # the real device, with a smaller max-storage-buffer-binding-size
        def __init__(self, dev):
            self._dev = dev
            self.limits = {**dev.limits, "max-storage-buffer-binding-size": 4096}

        def __getattr__(self, name):
            return getattr(self._dev, name)

    kw = dict(model_width=8, model_height=8, sigma=9.0, factor=3)
    BackgroundBlur(SmallDevice(device), 32, 32, **kw)  # the mask, 4 * 32 * 32 bytes, fits
    with pytest.raises(NotSupportedError, match="max-storage-buffer-binding-size"):
        BackgroundBlur(SmallDevice(device), 33, 32, **kw)
    with pytest.raises(NotSupportedError, match="16384-byte"):  # the full-resolution grid
        BackgroundBlur(SmallDevice(device), 32, 32, model_width=8, model_height=8, factor=1)
