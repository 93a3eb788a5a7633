"""`webnn-gpu blur IN_DIR -o OUT_DIR --ray` on a real (local) Ray instance.

The reference for every output is the single-process command (`webnn-gpu blur CLIP -o OUT`)
on the same clip and model: the decoded frames must be identical, byte for byte (both
run the same pipeline on the same adapter, and x264 encodes identical frames identically).
The model is a tiny TFLite segmenter (ray_helpers.tiny_segmenter) loaded through
webnn_gpu.load, like the selfie model; clips are 4-6 frames of 64x48.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

import ray_helpers as H
from webnn_gpu import cli
from webnn_gpu.demo import VideoReader
from webnn_gpu.ray import VideoResult, blur_videos

#: under pytest-xdist (`make test` runs two workers) every Ray test runs in one worker, so one
#: Ray instance starts
pytestmark = pytest.mark.xdist_group("ray")

CLIPS = {"clip0": dict(n=5, seed=0), "clip1": dict(n=6, seed=1), "clip2": dict(n=4, seed=2)}


def _frames(path: Path) -> list[np.ndarray]:
    with VideoReader(path) as reader:
        return [f.copy() for f in reader]


@pytest.fixture(scope="module")
def clips(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("clips")
    for name, kw in CLIPS.items():
        H.write_clip(folder / f"{name}.mp4", **kw)
    return folder


@pytest.fixture(scope="module")
def reference(clips, tiny_model, tmp_path_factory) -> dict[str, list[np.ndarray]]:
    """name -> the frames the single-process command writes."""
    out = tmp_path_factory.mktemp("single")
    frames = {}
    for name in CLIPS:
        target = out / f"{name}.mp4"
        assert cli.main(["blur", str(clips / f"{name}.mp4"), "-o", str(target), "--model", str(tiny_model),
                         "--no-progress"]) == 0
        frames[name] = _frames(target)
        assert len(frames[name]) == CLIPS[name]["n"]
    return frames


def _check_outputs(out: Path, reference: dict, names=CLIPS) -> None:
    for name in names:
        got = _frames(out / f"{name}.mp4")
        want = reference[name]
        assert len(got) == len(want), f"{name}: {len(got)} frames, want {len(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            assert np.array_equal(g, w), f"{name} frame {i}: max difference {np.abs(g.astype(int) - w).max()}"
    assert not list(out.glob(".*partial*")), f"partial files left: {list(out.glob('.*'))}"


@pytest.fixture(scope="module")
def cli_job(ray_cluster, clips, tiny_model, reference, tmp_path_factory):
    """The command over the clips plus a corrupt file, on 2 actors: (exit status, output)."""
    folder = tmp_path_factory.mktemp("with_bad")
    for clip in clips.iterdir():
        shutil.copy(clip, folder / clip.name)
    (folder / "broken.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42" + bytes(range(256)) * 8)
    (folder / "notes.txt").write_text("not a video: ignored")
    out = tmp_path_factory.mktemp("out")
    import contextlib
    import io

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        status = cli.main(["blur", str(folder), "-o", str(out), "--ray", "--model", str(tiny_model),
                           "--actors", "2", "--no-progress"])
    return status, printed.getvalue(), folder, out


def test_batch_blur_is_frame_identical_to_the_single_process_command(cli_job, reference):
    status, printed, _, out = cli_job
    _check_outputs(out, reference)
    assert "3 blurred" in printed and "(2 actors" in printed, printed


def test_a_corrupt_video_is_reported_and_the_others_complete(cli_job, reference):
    status, printed, folder, out = cli_job
    assert status == 1  # not every video has its output
    assert "1 failed" in printed
    line = next(ln for ln in printed.splitlines() if "failed:" in ln)
    assert str(folder / "broken.mp4") in line and "FFmpeg cannot read" in line, line
    assert not (out / "broken.mp4").exists() and not (out / "notes.mp4").exists()
    _check_outputs(out, reference)


def test_an_actor_killed_mid_video_loses_nothing(ray_cluster, clips, tiny_model, reference, tmp_path):
    """KillOnceWorker kills its own actor (ray.kill) at frame 2 of clip1, once: Ray restarts
    the actor and runs clip1 again; every output is whole and identical to the reference."""
    inputs = tmp_path / "in"
    shutil.copytree(clips, inputs)
    marker = inputs / ".killed-once"
    out = tmp_path / "out"
    submitted: list[tuple[str, object]] = []
    report = blur_videos(inputs, out, model=tiny_model, actors=1, worker=H.KillOnceWorker, retries=2,
                         on_submit=lambda src, actor: submitted.append((src.stem, actor)))
    assert marker.exists(), "the actor was never killed"
    assert report.ok and report.count("done") == 3, report.summary()
    assert [s for s, _ in submitted] == sorted(CLIPS)  # clip1 was handed out once: Ray redid it
    _check_outputs(out, reference)


def test_a_rerun_after_an_interrupted_job_skips_finished_outputs(ray_cluster, clips, tiny_model, reference,
                                                                 tmp_path):
    out = tmp_path / "out"

    def interrupt(video: VideoResult) -> None:
        assert video.status == "done"
        raise KeyboardInterrupt  # Ctrl-C once the first video is written

    first = blur_videos(clips, out, model=tiny_model, actors=1, on_result=interrupt)
    assert first.interrupted and first.count("done") == 1 and first.count("not run") == 2
    done = next(v.output for v in first.videos if v.status == "done")
    stamp = done.stat().st_mtime_ns
    (out / ".clip2.deadbeef.partial.mp4").write_bytes(b"half a video")  # as a killed run leaves it

    second = blur_videos(clips, out, model=tiny_model, actors=1)
    assert not second.interrupted and second.ok
    assert second.count("skipped") == 1 and second.count("done") == 2, second.summary()
    assert done.stat().st_mtime_ns == stamp  # not rewritten
    _check_outputs(out, reference)
