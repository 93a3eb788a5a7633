"""webnn_gpu.ray.ModelPredictor on Ray Data, and `webnn-gpu run` with and without Ray.

The reference is the model run image by image in this process (`LoadedModel.compute`) on
inputs prepared with NumPy (pixels / 255, NHWC float32). Same engine, same adapter: the
outputs must agree to float32 rounding (atol 1e-6).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import ray_helpers as H
import webnn_gpu as webnn
from webnn_gpu import cli
from webnn_gpu.demo import write_png
from webnn_gpu.ray import ModelPredictor, actor_resources, read_images, read_video_frames

#: under pytest-xdist (`make test` runs two workers) every Ray test runs in one worker, so one
#: Ray instance starts
pytestmark = pytest.mark.xdist_group("ray")

N_IMAGES = 5


@pytest.fixture(scope="module")
def images(tmp_path_factory) -> tuple[Path, dict[str, np.ndarray]]:
    """N_IMAGES 32 x 32 PNGs (the model's input size) of the synthetic scene."""
    folder = tmp_path_factory.mktemp("images")
    arrays = {}
    for i, frame in enumerate(H.scene(N_IMAGES, 32, 32, seed=3)):
        write_png(folder / f"img{i}.png", frame)
        arrays[f"img{i}"] = frame
    return folder, arrays


@pytest.fixture(scope="module")
def reference(tiny_model, images) -> dict[str, np.ndarray]:
    """name -> the mask of `model.compute`, one image at a time, batch axis dropped."""
    ctx = webnn.ml.create_context()
    model = webnn.load(tiny_model, ctx)
    out = {}
    for name, img in images[1].items():
        x = (img.astype(np.float64) / 255.0).astype(np.float32)[None]
        out[name] = model.compute({"image": x})["mask"][0]
        assert out[name].shape == (32, 32, 1)
    return out


def test_map_batches_with_the_callable_class_matches_model_compute(ray_cluster, tiny_model, images, reference):
    ray = ray_cluster
    resources = actor_resources(1, reserve_cpus=1)  # a CPU for read_images' tasks
    ds = read_images(images[0]).map_batches(
        ModelPredictor,
        fn_constructor_args=(tiny_model.read_bytes(),),
        fn_constructor_kwargs={"software_threads": resources.software_threads},
        batch_size=2,
        compute=ray.data.ActorPoolStrategy(size=resources.actors),
        **resources.options(),
    )
    rows = ds.take_all()
    assert sorted(Path(r["path"]).stem for r in rows) == sorted(reference)
    for r in rows:
        want = reference[Path(r["path"]).stem]
        np.testing.assert_allclose(np.asarray(r["mask"]), want, rtol=0, atol=1e-6)
        assert want.min() < 0.1 and want.max() > 0.9  # the mask finds the red 'person'


def test_predictor_preprocess_matches_numpy(tiny_model, images):
    """Normalisation per channel and the NCHW transpose, against NumPy float64."""
    pred = ModelPredictor(tiny_model, mean=[0.5, 0.4, 0.3], std=[0.2, 0.25, 0.5], scale=1 / 255)
    imgs = list(images[1].values())[:2]
    got = pred.preprocess(imgs)
    want = (np.stack(imgs).astype(np.float64) / 255 - [0.5, 0.4, 0.3]) / [0.2, 0.25, 0.5]
    np.testing.assert_allclose(got, want.astype(np.float32), rtol=1e-6, atol=1e-6)
    pred.layout = "nchw"
    np.testing.assert_allclose(pred.preprocess(imgs), want.transpose(0, 3, 1, 2).astype(np.float32),
                               rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match="std must not be 0"):
        ModelPredictor(tiny_model, std=[1, 0, 1])
    with pytest.raises(ValueError, match="no input 'x'"):
        ModelPredictor(tiny_model, input_name="x")
    with pytest.raises(ValueError, match="H x W x 3"):
        pred.preprocess([np.zeros((4, 4, 2), np.uint8)])


def test_run_command_with_and_without_ray_writes_the_same_outputs(ray_cluster, tiny_model, images, reference,
                                                                  tmp_path, capsys):
    folder = images[0]
    local, on_ray = tmp_path / "local", tmp_path / "ray"
    assert cli.main(["run", str(tiny_model), str(folder), "-o", str(local), "--no-progress"]) == 0
    assert cli.main(["run", str(tiny_model), str(folder), "-o", str(on_ray), "--ray", "--actors", "1",
                     "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert f"{N_IMAGES} images" in printed and "in this process" in printed and "Ray actor" in printed
    for name, want in reference.items():
        a, b = np.load(local / f"{name}.npy"), np.load(on_ray / f"{name}.npy")
        np.testing.assert_allclose(a, want, rtol=0, atol=1e-6)
        np.testing.assert_array_equal(a, b)
        png = (local / f"{name}.png").read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and png == (on_ray / f"{name}.png").read_bytes()
    assert cli.main(["run", str(tiny_model), str(tmp_path / "nothing"), "-o", str(local)]) == 1
    assert "not found" in capsys.readouterr().err


def test_read_video_frames(ray_cluster, tmp_path):
    clip = H.write_clip(tmp_path / "clip.mp4", n=4)
    rows = sorted(read_video_frames(tmp_path, every=2).take_all(), key=lambda r: r["frame"])
    assert [r["frame"] for r in rows] == [0, 2]
    assert np.asarray(rows[0]["image"]).shape == (48, 64, 3) and rows[0]["path"] == str(clip)
