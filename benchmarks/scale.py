"""Throughput of the batch blur on Ray: 1 and 2 actors against the single-process pipeline.

    .venv/bin/python benchmarks/scale.py                   # 4 clips x 48 frames, 2 rounds
    .venv/bin/python benchmarks/scale.py --clips 8 --frames 120 --rounds 3 --size 640x360

Clips: the first FRAMES frames of the carphone sample clip (176x144, fetched), written CLIPS
times, lossless. Model: selfie-segmentation (fetched), float32. Three sides, alternated
round by round so that the machine's load hits them alike:

* ``single``: :class:`webnn_gpu.ray.VideoBlurWorker` used as a plain object in this process:
  the ``webnn-gpu blur`` pipeline (VideoReader -> BlurPipeline -> process_video ->
  open_output), clip after clip, warm (model loaded, pipelines built, one clip done first);
* ``ray-1``, ``ray-2``: a :class:`webnn_gpu.ray.BlurPool` of 1 or 2 actors on a local Ray
  instance (started once), warm (one clip per actor done first), then the timed job. The
  machine's cores are split among the actors (``LP_NUM_THREADS``).

It prints frames per second per side and round, the medians, the overhead of ``ray-1``
against ``single`` (goal: at most 10%) and ``ray-2`` against ``ray-1`` (goal: >= 1), and
the start-up costs (Ray itself; a pool's actors: process, device, model, pipelines).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")

from webnn_gpu import models  # noqa: E402
from webnn_gpu.demo import VideoReader, VideoWriter  # noqa: E402
from webnn_gpu.demo.video import parse_size  # noqa: E402
from webnn_gpu.ray import BlurPool, VideoBlurWorker, connect  # noqa: E402


def make_clips(folder: Path, clips: int, frames: int, size: tuple[int, int] | None) -> list[Path]:
    """CLIPS copies of the carphone clip's first FRAMES frames (lossless H.264)."""
    with VideoReader(models.fetch("carphone"), size=size) as reader:
        head = [f.copy() for _, f in zip(range(frames), reader)]
        w, h = reader.size
    first = folder / "clip00.mp4"
    with VideoWriter(first, w, h, fps=30, crf=0) as writer:
        for f in head:
            writer.write(f)
    paths = [first]
    for i in range(1, clips):
        paths.append(folder / f"clip{i:02d}.mp4")
        shutil.copy(first, paths[-1])
    return paths


def run_single(worker: VideoBlurWorker, clips: list[Path], out: Path) -> float:
    """Frames per second of the in-process pipeline over the clips."""
    out.mkdir(parents=True)
    start = time.perf_counter()
    frames = 0
    for clip in clips:
        result = worker.blur(str(clip), str(out / f"{clip.stem}.mp4"))
        assert result["error"] is None, result["error"]
        frames += result["frames"]
    return frames / (time.perf_counter() - start)


def run_pool(pool: BlurPool, clips: list[Path], out: Path) -> float:
    """Frames per second of a (warm) pool over the clips."""
    report = pool.run(clips, out)
    assert report.ok and report.count("done") == len(clips), report.summary()
    return report.fps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clips", type=int, default=4)
    parser.add_argument("--frames", type=int, default=48)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--size", type=parse_size, default=None, metavar="WxH", help="default: 176x144")
    args = parser.parse_args(argv)
    import ray

    model = Path(models.fetch("selfie-segmentation"))
    results: dict[str, list[float]] = {"single": [], "ray-1": [], "ray-2": []}
    startup: dict[str, list[float]] = {"ray.init": [], "pool ray-1": [], "pool ray-2": []}
    with tempfile.TemporaryDirectory(prefix="webnn-gpu-scale-") as tmp:
        root = Path(tmp)
        (root / "in").mkdir()
        clips = make_clips(root / "in", args.clips, args.frames, args.size)
        single = VideoBlurWorker(model.read_bytes(), model_name=model.name)
        single.blur(str(clips[0]), str(root / "warm-single.mp4"))
        t0 = time.perf_counter()
        connect()  # a local instance, workers at normal priority like this process
        startup["ray.init"].append(time.perf_counter() - t0)
        try:
            for r in range(args.rounds):
                results["single"].append(run_single(single, clips, root / f"single-{r}"))
                for n in (1, 2):
                    t0 = time.perf_counter()
                    with BlurPool(model, actors=n) as pool:
                        pool.ready()
                        pool.run(clips[:n], root / f"warm-{n}-{r}")  # a clip per actor
                        startup[f"pool ray-{n}"].append(time.perf_counter() - t0)
                        results[f"ray-{n}"].append(run_pool(pool, clips, root / f"ray{n}-{r}"))
                line = ", ".join(f"{k} {v[-1]:.1f}" for k, v in results.items())
                print(f"round {r + 1}: fps {line}", flush=True)
        finally:
            ray.shutdown()
    med = {k: statistics.median(v) for k, v in results.items()}
    frames = args.clips * args.frames
    w, h = args.size or (176, 144)
    print(f"\n{args.clips} clips x {args.frames} frames ({frames} frames) at {w}x{h}, selfie float32, "
          f"{os.cpu_count()} cores, {args.rounds} rounds (median)")
    print("| side | fps (median) | rounds |")
    print("| --- | --- | --- |")
    for k, v in results.items():
        print(f"| {k} | {med[k]:.1f} | {', '.join(f'{x:.1f}' for x in v)} |")
    overhead = med["single"] / med["ray-1"] - 1
    print(f"Ray overhead at 1 actor: {100 * overhead:+.1f}% time per frame (goal <= 10%)")
    print(f"2 actors / 1 actor: {med['ray-2'] / med['ray-1']:.2f}x (goal >= 1)")
    print("start-up (s): " + ", ".join(f"{k} {statistics.median(v):.1f}" for k, v in startup.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
