"""The parts of webnn_gpu.ray around the jobs: inputs, outputs, pool sizing, adapters, errors."""

from __future__ import annotations

import pytest

from webnn_gpu import cli
from webnn_gpu.ray import actor_resources, find_videos, select_adapter, set_software_threads
from webnn_gpu.ray.videos import plan_outputs

#: under pytest-xdist (`make test` runs two workers) every Ray test runs in one worker, so one
#: Ray instance starts
pytestmark = pytest.mark.xdist_group("ray")


def test_find_videos_and_plan_outputs(tmp_path):
    (tmp_path / "a").mkdir()
    for name in ("a/x.mp4", "a/y.MOV", "a/notes.txt", "a/.x.1234.partial.mp4", "b.mkv"):
        (tmp_path / name).write_bytes(b"")
    assert [p.name for p in find_videos(tmp_path / "a")] == ["x.mp4", "y.MOV"]
    assert [p.name for p in find_videos(str(tmp_path / "**" / "*.m*"))] == ["x.mp4", "b.mkv"]  # by path
    assert len(find_videos([tmp_path / "a", tmp_path / "a" / "x.mp4"])) == 2  # each once
    with pytest.raises(FileNotFoundError, match="not found"):
        find_videos(tmp_path / "missing.mp4")
    with pytest.raises(FileNotFoundError, match="no file matches"):
        find_videos(str(tmp_path / "*.avi"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="has no video file"):
        find_videos(tmp_path / "empty")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "x.webm").write_bytes(b"")
    pairs = plan_outputs(find_videos(tmp_path / "a"), tmp_path / "out")
    assert [o.name for _, o in pairs] == ["x.mp4", "y.mp4"]
    with pytest.raises(ValueError, match="would both be written to"):
        plan_outputs(find_videos([tmp_path / "a", tmp_path / "c"]), tmp_path / "out")


def test_actor_resources(ray_cluster):
    r = actor_resources()  # the test cluster: 2 CPUs, no GPU
    assert (r.actors, r.num_gpus, r.num_cpus, r.software_threads) == (1, 0.0, 2.0, 2)
    r = actor_resources(2)
    assert (r.actors, r.num_cpus, r.software_threads) == (2, 1.0, 1) and r.options() == {"num_cpus": 1.0}
    r = actor_resources(1, reserve_cpus=1)  # Ray Data's read tasks keep a CPU
    assert (r.num_cpus, r.software_threads) == (1.0, 2)
    assert actor_resources(4, work_items=3).actors == 3
    r = actor_resources(2, num_gpus=1)
    assert r.options() == {"num_cpus": 1.0, "num_gpus": 1.0} and r.software_threads is None
    for bad in (dict(actors=0), dict(num_cpus=0), dict(num_gpus=-1)):
        with pytest.raises(ValueError):
            actor_resources(**bad)


def test_select_adapter_without_and_with_gpu_ids(monkeypatch):
    software = select_adapter([])
    assert software.info["adapter_type"] == "CPU"  # lavapipe on this machine
    # GPU ids but no hardware adapter (this machine): falls back to what request_adapter gives
    assert select_adapter([0]) is not None
    with pytest.raises(ValueError, match="threads must be >= 1"):
        set_software_threads(0)


def test_blur_command_errors_before_any_work(tmp_path, capsys):
    (tmp_path / "clips").mkdir()
    assert cli.main(["blur", str(tmp_path / "clips")]) == 2
    assert "names many videos; blur them with --ray" in capsys.readouterr().err
    assert cli.main(["blur", str(tmp_path / "clips"), "--ray", "--snapshot", "s.png"]) == 2
    assert "--snapshot and --preview work on one video" in capsys.readouterr().err
    assert cli.main(["blur", "--ray"]) == 2
    assert "--ray needs INPUT" in capsys.readouterr().err
    assert cli.main(["blur", str(tmp_path / "clips"), "--ray", "--actors", "0"]) == 2
    model = tmp_path / "m.tflite"
    model.write_bytes(b"")
    assert cli.main(["blur", str(tmp_path / "clips"), "--ray", "--model", str(model)]) == 1
    assert "has no video file" in capsys.readouterr().err
    assert cli.main(["run", str(model), str(tmp_path / "clips"), "-o", str(tmp_path / "o"), "--batch-size", "0"]) == 2


def test_a_model_that_does_not_load_stops_the_job_with_its_error(ray_cluster, tmp_path):
    import ray_helpers as H

    from webnn_gpu.ray import blur_videos

    H.write_clip(tmp_path / "in" / "a.mp4", n=2)
    with pytest.raises(RuntimeError, match="could not start: .*expected a TFLite or ONNX model"):
        blur_videos(tmp_path / "in", tmp_path / "out", model=b"not a model at all", retries=0)
    assert not list((tmp_path / "out").iterdir())
