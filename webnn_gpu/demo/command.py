"""The ``webnn-gpu blur`` command (also ``python -m webnn_gpu.demo``, ``make demo``).

One video (a file or a camera) through :class:`~webnn_gpu.demo.pipeline.BlurPipeline` into an
H.264 MP4, with a progress bar, an optional preview window and snapshot, and a table of the
time per stage at the end. See docs/demo.md.
"""

from __future__ import annotations

import argparse
import glob
import importlib
import sys
import time
from pathlib import Path

import numpy as np

from webnn_gpu.errors import WebNNError

from .pipeline import BlurPipeline, RunStats, create_device, load_segmenter, process_video
from .video import (
    PreviewUnavailable,
    PreviewWindow,
    VideoInfo,
    VideoReader,
    VideoWriter,
    parse_size,
    write_png,
)

__all__ = ["add_arguments", "run", "main", "open_output", "DEFAULT_OUTPUT"]

DEFAULT_OUTPUT = "out/blurred.mp4"
DEFAULT_RAY_OUTPUT = "out/blurred"
LOCAL_RAY = "local"


def open_output(path: str | Path, info: VideoInfo) -> VideoWriter:
    """The writer of the blurred frames of a video read as ``info`` says.

    Every way of running the demo (this command, ``webnn_gpu.ray``) writes through this
    function, so the same input gives the same output file contents.

    Arguments:
        path (str | Path): the MP4 to write.
        info (VideoInfo): the reader's description (size and frame rate).

    Returns:
        VideoWriter: H.264, CRF 18, the input's frame rate (30 when unknown).
    """
    return VideoWriter(path, info.width, info.height, fps=info.fps or 30.0)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``blur`` command's options to ``parser``."""
    parser.description = (
        "Blur the background of a video with the MediaPipe selfie segmenter on WebNN "
        "(WebGPU), writing an H.264 MP4; with --ray, of every video of a folder or glob "
        "on a Ray actor pool."
    )
    parser.add_argument(
        "input", nargs="?", default=None, metavar="INPUT",
        help="video file (any format FFmpeg reads) or camera index (0, 1, ...); "
             "default: the carphone sample clip (fetched on first use). With --ray: a folder "
             "of videos, a glob (quoted) or a file",
    )
    parser.add_argument("-o", "--output", default=None,
                        help=f"output MP4 (default: {DEFAULT_OUTPUT}); with --ray the output "
                             f"folder (default: {DEFAULT_RAY_OUTPUT})")
    parser.add_argument("--model", default=None, metavar="PATH",
                        help="segmentation model .tflite (default: selfie-segmentation, fetched)")
    parser.add_argument("--dtype", choices=("float32", "float16"), default="float32",
                        help="the model's compute type (default: float32)")
    parser.add_argument("--size", type=_size_arg, default=None, metavar="WxH",
                        help="scale frames to this size, e.g. 1280x720 (default: the input's)")
    parser.add_argument("--sigma", type=float, default=None,
                        help="blur strength in pixels (default: 2.5%% of the longer side)")
    parser.add_argument("--snapshot", default=None, metavar="PATH",
                        help="also write a PNG of one frame, before | after, side by side")
    parser.add_argument("--snapshot-frame", type=int, default=0, metavar="N",
                        help="the frame --snapshot shows (default: 0, the first)")
    parser.add_argument("--preview", action="store_true",
                        help="show the result in a window while running (needs a display)")
    parser.add_argument("--max-frames", type=int, default=None, metavar="N",
                        help="stop after N frames (a camera runs until Ctrl-C otherwise)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    ray = parser.add_argument_group("many videos on Ray (the [ray] extra; docs/scale.md)")
    ray.add_argument("--ray", nargs="?", const=LOCAL_RAY, default=None, metavar="ADDRESS",
                     help="blur every video of INPUT on a Ray actor pool: a local Ray instance, "
                          "or the cluster at ADDRESS (HOST:PORT of `ray start --head`, auto, "
                          "ray://HOST:10001); outputs already in the folder are skipped")
    ray.add_argument("--actors", type=int, default=None, metavar="N",
                     help="actors in the pool (default: one per GPU; without GPUs one per 2 CPUs)")
    ray.add_argument("--retries", type=int, default=3, metavar="N",
                     help="times Ray restarts a dead actor and reruns its video (default 3)")


def _size_arg(text: str) -> tuple[int, int]:
    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _fetch(name: str) -> Path:
    models = importlib.import_module("webnn_gpu.models")
    return Path(models.fetch(name))


def _is_address(text: str) -> bool:
    return text in (LOCAL_RAY, "auto") or ":" in text


def run(args: argparse.Namespace) -> int:
    """Run the demo with parsed arguments; returns the exit status (0 on success)."""
    say = lambda msg: print(f"webnn-gpu blur: {msg}", file=sys.stderr)  # noqa: E731
    if args.max_frames is not None and args.max_frames <= 0:
        say("error: --max-frames must be positive")
        return 2
    if getattr(args, "ray", None) is not None:
        return _run_ray(args, say)
    if args.input is not None and not str(args.input).isdigit() and (
            Path(args.input).is_dir() or (glob.has_magic(str(args.input)) and not Path(args.input).exists())):
        say(f"error: {args.input!r} names many videos; blur them with --ray (a Ray actor pool)")
        return 2
    if args.output is None:
        args.output = DEFAULT_OUTPUT
    try:
        source: str | Path = args.input if args.input is not None else _fetch("carphone")
        model_path = Path(args.model) if args.model else _fetch("selfie-segmentation")
        if not model_path.is_file():
            raise FileNotFoundError(f"model file not found: {str(model_path)!r}")
        reader = VideoReader(source, size=args.size)
    except (OSError, ValueError) as exc:
        say(f"error: {exc}")
        return 1
    except ModuleNotFoundError as exc:
        say(f"error: this build lacks {exc.name} (needed to fetch the model and clip)")
        return 1

    with reader:
        info = reader.info
        try:
            device = create_device()
        except RuntimeError as exc:
            say(f"error: {exc}")
            return 1
        try:
            segmenter = load_segmenter(device, model_path, args.dtype)
        except ModuleNotFoundError as exc:
            say(f"error: this build lacks {exc.name} (the TFLite loader)")
            return 1
        except (WebNNError, OSError, ValueError) as exc:
            say(f"error: cannot load the model {str(model_path)!r}: {exc}")
            return 1
        pipeline = BlurPipeline(device, info.width, info.height, segmenter, sigma=args.sigma)
        output = Path(args.output)
        say(f"{info.source} ({info.width}x{info.height} @ {info.fps:.2f} fps) -> {output}")
        say(f"model {segmenter.name} ({segmenter.dtype}, input {segmenter.input_size[0]}x"
            f"{segmenter.input_size[1]}) on {device.adapter_info.get('device', '?')}; "
            f"blur sigma {pipeline.blur.sigma:.1f} px (grid /{pipeline.blur.factor})")

        preview = None
        if args.preview:
            try:
                preview = PreviewWindow(f"webnn-gpu blur: {Path(str(info.source)).name}")
            except PreviewUnavailable as exc:
                say(f"--preview: {exc}; going on without a window")
        snapshot_path = Path(args.snapshot) if args.snapshot else None
        snapshot_written: list[Path] = []

        def on_frame(i: int, original: np.ndarray, blurred: np.ndarray) -> None:
            if snapshot_path is not None and i == args.snapshot_frame:
                snapshot_written.append(write_png(snapshot_path, np.concatenate([original, blurred], 1)))
            if preview is not None:
                preview.show(blurred)

        total = info.frame_count
        if args.max_frames is not None:
            total = min(total, args.max_frames) if total else args.max_frames
        from tqdm import tqdm

        stats: RunStats | None = None
        writer = open_output(output, info)
        try:
            with tqdm(total=total, unit="frame", disable=args.no_progress, file=sys.stderr) as bar:
                stats = process_video(reader, pipeline, writer.write, max_frames=args.max_frames,
                                      on_frame=on_frame, progress=bar)
        except KeyboardInterrupt:
            pass
        finally:
            t0 = time.perf_counter()
            writer.close()  # FFmpeg finishes encoding and writes the MP4 index: part of "encode"
            if stats is not None:
                stats.stages["encode"] += time.perf_counter() - t0
                stats.seconds += time.perf_counter() - t0
            if preview is not None:
                preview.close()

    if stats is None:
        say(f"interrupted; {writer.frames_written} frames written to {output.resolve()}")
        return 130
    print(stats.report())
    print(f"output: {output.resolve()}")
    if snapshot_path is not None:
        if snapshot_written:
            print(f"snapshot: {snapshot_written[0].resolve()}")
        else:
            say(f"--snapshot: the video has no frame {args.snapshot_frame}; no PNG written")
    if stats.frames == 0:
        say("warning: the input had no frames")
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m webnn_gpu.demo [options]``: the same as ``webnn-gpu blur``.

    Arguments:
        argv (list[str] | None): the options (default ``sys.argv[1:]``).

    Returns:
        int: the exit status.
    """
    parser = argparse.ArgumentParser(prog="webnn-gpu blur")
    add_arguments(parser)
    return run(parser.parse_args(argv))



def _run_ray(args: argparse.Namespace, say) -> int:
    """``blur INPUT --ray [ADDRESS]``: every video of INPUT on a Ray actor pool."""
    address, source = args.ray, args.input
    if source is None and not _is_address(address):  # `blur --ray clips/`: the folder, not an address
        address, source = LOCAL_RAY, address
    if source is None:
        say("error: --ray needs INPUT: a folder of videos, a glob or a file")
        return 2
    if args.snapshot or args.preview:
        say("error: --snapshot and --preview work on one video, without --ray")
        return 2
    if (args.actors is not None and args.actors < 1) or args.retries < 0:
        say("error: --actors must be positive and --retries not negative")
        return 2
    try:
        from webnn_gpu.ray import blur_videos

        model = Path(args.model) if args.model else _fetch("selfie-segmentation")
        if not model.is_file():
            raise FileNotFoundError(f"model file not found: {str(model)!r}")
        out_dir = Path(args.output or DEFAULT_RAY_OUTPUT)
        report = blur_videos(
            source, out_dir, model=model, dtype=args.dtype, size=args.size, sigma=args.sigma,
            max_frames=args.max_frames, address=address, actors=args.actors,
            retries=args.retries, progress=not args.no_progress,
        )
    except ModuleNotFoundError as exc:
        say(f"error: {exc}")
        return 1
    except (OSError, ValueError, RuntimeError) as exc:
        say(f"error: {exc}")
        return 1
    print(report.summary())
    if report.adapters:
        print(f"adapters: {', '.join(sorted(report.adapters))}")
    print(f"outputs: {out_dir.resolve()}")
    if report.interrupted:
        say("interrupted; finished outputs are kept, run the same command again to do the rest")
        return 130
    return 0 if report.ok else 1
