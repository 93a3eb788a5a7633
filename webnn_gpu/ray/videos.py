"""Blur the background of many videos on a Ray cluster: one video per actor at a time.

Each actor (:class:`VideoBlurWorker`) holds one wgpu device on its own adapter, one WebNN
context with the segmentation model loaded, and one :class:`~webnn_gpu.demo.BlurPipeline`
per frame size, built once; it runs the same code as the single-process ``webnn-gpu blur``
(:func:`~webnn_gpu.demo.process_video` into :func:`~webnn_gpu.demo.open_output`), so an
output's frames are the same either way.

Faults are Ray's to handle: an actor that dies (killed, out of memory, a crashed driver) is
restarted by Ray (``max_restarts``) and the video it was working on is run again
(``max_task_retries``); a video that cannot be read or processed is reported with its
error, and the other videos go on. Each output is written under a temporary name in the
output folder and renamed when complete, so a file with the final name is always whole,
and a second run skips the videos whose output exists.
"""

from __future__ import annotations

import glob
import os
import sys
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from .cluster import ActorResources, actor_resources, connect, require_ray

__all__ = [
    "VIDEO_SUFFIXES",
    "find_videos",
    "plan_outputs",
    "VideoBlurWorker",
    "VideoResult",
    "BlurReport",
    "BlurPool",
    "blur_videos",
]

#: file suffixes taken as videos when the input is a folder
VIDEO_SUFFIXES = (".mp4", ".m4v", ".mov", ".mkv", ".webm", ".avi", ".mpg", ".mpeg", ".ts", ".flv",
                  ".wmv", ".y4m", ".3gp", ".ogv")
_PARTIAL = ".partial"


def find_videos(inputs: str | os.PathLike | Sequence[str | os.PathLike], *,
                suffixes: Sequence[str] = VIDEO_SUFFIXES, kind: str = "video") -> list[Path]:
    """The video files named by a folder, a glob pattern, a file, or a list of these.

    Arguments:
        inputs: a folder (its files with one of ``suffixes``, not recursive, hidden files
            and the temporary ``.*.partial.*`` outputs left out), a glob
            (``"clips/**/*.mov"``; every match), a file, or a sequence of them.
        suffixes (Sequence[str]): what a folder's files must end with; default
            :data:`VIDEO_SUFFIXES`.
        kind (str): the word for the files in messages.

    Returns:
        list[Path]: the files, sorted, each once.

    Raises:
        FileNotFoundError: an input names nothing (a missing file, a glob with no match, a
            folder with no video).
    """
    items = [inputs] if isinstance(inputs, (str, os.PathLike)) else list(inputs)
    found: dict[str, Path] = {}
    for item in items:
        text = os.fspath(item)
        path = Path(text)
        if path.is_dir():
            hits = [p for p in path.iterdir()
                    if p.is_file() and p.suffix.lower() in suffixes and not p.name.startswith(".")]
            what = f"folder {text!r} has no {kind} file ({', '.join(suffixes)})"
        elif path.is_file():
            hits, what = [path], ""
        elif glob.has_magic(text):
            hits = [Path(p) for p in glob.glob(text, recursive=True) if Path(p).is_file()]
            what = f"no file matches {text!r}"
        else:
            raise FileNotFoundError(f"{kind} file or folder not found: {text!r}")
        if not hits:
            raise FileNotFoundError(what)
        for p in hits:
            found.setdefault(str(p.resolve()), p)
    return sorted(found.values())


def plan_outputs(videos: Sequence[Path], out_dir: str | os.PathLike) -> list[tuple[Path, Path]]:
    """The output of each video: ``OUT_DIR/<name of the input>.mp4``.

    Arguments:
        videos (Sequence[Path]): the inputs.
        out_dir: the output folder.

    Returns:
        list[tuple[Path, Path]]: (input, output) pairs, in the order of ``videos``.

    Raises:
        ValueError: two inputs would write the same output (same name in two folders).
    """
    out = Path(out_dir)
    pairs: list[tuple[Path, Path]] = []
    seen: dict[Path, Path] = {}
    for video in videos:
        target = out / f"{video.stem}.mp4"
        if target in seen:
            raise ValueError(f"{str(seen[target])!r} and {str(video)!r} would both be written to "
                             f"{str(target)!r}; rename one or run them separately")
        seen[target] = video
        pairs.append((video, target))
    return pairs


def _partials(output: Path) -> list[Path]:
    return list(output.parent.glob(f".{glob.escape(output.stem)}.*{_PARTIAL}{output.suffix}"))


class VideoBlurWorker:
    """One actor of a blur job: a device, the loaded segmenter, and pipelines per frame size.

    Made a Ray actor by :func:`blur_videos` (``ray.remote(VideoBlurWorker)``); usable as a
    plain object in one process as well.

    Arguments:
        model (bytes | str | Path): the segmentation model (bytes travel through Ray's
            object store, so the nodes need no copy of the file).
        model_name (str): for reports.
        dtype ("float32" | "float16"): the model's compute type.
        size (tuple[int, int] | None): scale frames to (width, height); default the input's.
        sigma (float | None): the blur's strength; default 2.5% of the longer side.
        max_frames (int | None): stop each video after this many frames.
        counter: a :class:`FrameCounter` actor handle the worker reports frames to (about
            twice a second, fire-and-forget), for the job's live frames per second.
        software_threads (int | None): ``LP_NUM_THREADS`` when the actor has no GPU.
    """

    def __init__(
        self,
        model: bytes | str | Path,
        *,
        model_name: str = "model",
        dtype: str = "float32",
        size: tuple[int, int] | None = None,
        sigma: float | None = None,
        max_frames: int | None = None,
        software_threads: int | None = None,
        counter: Any = None,
    ) -> None:
        from webnn_gpu.demo import create_device, load_segmenter

        from .adapter import describe, select_adapter, set_software_threads

        if software_threads:
            set_software_threads(software_threads)
        adapter = select_adapter()
        self.adapter = describe(adapter)
        self.device = create_device(adapter)
        self.segmenter = load_segmenter(self.device, model, dtype, name=model_name)
        self.size, self.sigma, self.max_frames = size, sigma, max_frames
        self._pipelines: dict[tuple[int, int], Any] = {}
        self._counter, self._uncounted, self._counted_at = counter, 0, time.perf_counter()

    def _pipeline(self, width: int, height: int) -> Any:
        from webnn_gpu.demo import BlurPipeline

        key = (width, height)
        if key not in self._pipelines:
            self._pipelines[key] = BlurPipeline(self.device, width, height, self.segmenter,
                                                sigma=self.sigma)
        return self._pipelines[key]

    def _frame_done(self, source: str, index: int) -> None:
        self.on_frame(source, index)
        if self._counter is None:
            return
        self._uncounted += 1
        if time.perf_counter() - self._counted_at >= 0.5:
            self._flush_count()

    def _flush_count(self) -> None:
        if self._counter is not None and self._uncounted:
            self._counter.add.remote(self._uncounted)
        self._uncounted, self._counted_at = 0, time.perf_counter()

    def ready(self) -> str:
        """The adapter this worker runs on (a call that returns once the actor has started)."""
        return self.adapter

    def on_frame(self, source: str, index: int) -> None:
        """Called after each frame of ``source`` is written (a hook for subclasses; no-op)."""

    def blur(self, source: str, output: str) -> dict[str, Any]:
        """Blur one video into ``output`` (written as a temporary file, renamed when whole).

        Arguments:
            source (str): the input video.
            output (str): the MP4 to write.

        Returns:
            dict: ``source``, ``output``, ``frames``, ``seconds``, ``adapter``, ``pid`` and
            ``error`` (None, or the message when the video could not be processed; then no
            output is written).
        """
        from webnn_gpu.demo import VideoReader, open_output, process_video

        start = time.perf_counter()
        out = Path(output)
        tmp = out.with_name(f".{out.stem}.{uuid.uuid4().hex[:12]}{_PARTIAL}{out.suffix}")
        result: dict[str, Any] = {"source": source, "output": output, "frames": 0, "seconds": 0.0,
                                  "adapter": self.adapter, "pid": os.getpid(), "error": None}
        try:
            with VideoReader(source, size=self.size) as reader:
                info = reader.info
                pipeline = self._pipeline(info.width, info.height)
                writer = open_output(tmp, info)
                try:
                    stats = process_video(reader, pipeline, writer.write, max_frames=self.max_frames,
                                          on_frame=lambda i, _a, _b: self._frame_done(source, i))
                finally:
                    writer.close()
            self._flush_count()
            if stats.frames == 0:
                raise OSError(f"{source!r} has no video frames")
            os.replace(tmp, out)
        except Exception as exc:  # reported per video; the job goes on
            tmp.unlink(missing_ok=True)
            result["error"] = f"{type(exc).__name__}: {exc}"
            result["seconds"] = time.perf_counter() - start
            return result
        for stale in _partials(out):  # what earlier, interrupted attempts left
            stale.unlink(missing_ok=True)
        result["frames"] = stats.frames
        result["seconds"] = time.perf_counter() - start
        return result


class FrameCounter:
    """Frames the actors of a job have blurred so far (a tiny Ray actor; counts every attempt)."""

    def __init__(self) -> None:
        self.frames = 0

    def add(self, n: int) -> None:
        """Count ``n`` more frames."""
        self.frames += int(n)

    def total(self) -> int:
        """Frames counted so far."""
        return self.frames


@dataclass
class VideoResult:
    """What happened to one video of a job.

    Attributes:
        source, output (Path): the input and its output.
        status (str): ``"done"``, ``"skipped"`` (the output existed), ``"failed"`` or
            ``"not run"`` (the job was interrupted first).
        frames (int): frames written.
        seconds (float): the actor's time on the video (the last attempt).
        error (str | None): why it failed.
    """

    source: Path
    output: Path
    status: str
    frames: int = 0
    seconds: float = 0.0
    error: str | None = None


@dataclass
class BlurReport:
    """The outcome of :func:`blur_videos`.

    Attributes:
        videos (list[VideoResult]): one per input, in input order.
        seconds (float): wall time of the job, from the first video handed out to the last
            result (actor start-up included; Ray start-up not).
        resources (ActorResources): the pool.
        interrupted (bool): the job was stopped (Ctrl-C) before every video ran.
    """

    videos: list[VideoResult]
    seconds: float
    resources: ActorResources
    interrupted: bool = False
    adapters: set[str] = field(default_factory=set)

    def count(self, status: str) -> int:
        """How many videos have ``status``."""
        return sum(v.status == status for v in self.videos)

    @property
    def frames(self) -> int:
        """Frames written by this job."""
        return sum(v.frames for v in self.videos if v.status == "done")

    @property
    def fps(self) -> float:
        """Frames per second over the whole pool."""
        return self.frames / self.seconds if self.seconds > 0 else 0.0

    @property
    def ok(self) -> bool:
        """Every video has its output (done now or before)."""
        return all(v.status in ("done", "skipped") for v in self.videos)

    def summary(self) -> str:
        """Counts, throughput and one line per failure."""
        r = self.resources
        pool = f"{r.actors} actor{'s' * (r.actors != 1)}" + (f", {r.num_gpus:g} GPU each" if r.num_gpus
                                                             else f", {r.num_cpus:g} CPU each")
        lines = [f"{self.count('done')} blurred, {self.count('skipped')} skipped (output exists), "
                 f"{self.count('failed')} failed" + (f", {self.count('not run')} not run" if self.interrupted else "")
                 + f"; {self.frames} frames in {self.seconds:.2f} s = {self.fps:.1f} fps ({pool})"]
        for v in self.videos:
            if v.status == "failed":
                lines.append(f"  failed: {v.source}: {v.error}")
        return "\n".join(lines)


class BlurPool:
    """A pool of :class:`VideoBlurWorker` actors that blurs folders of videos, job after job.

    The actors start (device, model, pipelines) once, when the pool is made; each
    :meth:`run` hands out one video per idle actor until every video is done.
    :func:`blur_videos` is one pool for one job.

    Arguments:
        model (bytes | path | None): the segmentation model; default selfie-segmentation
            (fetched once, on this machine; its bytes go to the actors through Ray).
        dtype, size, sigma, max_frames: as the ``webnn-gpu blur`` options.
        address (str | None): the cluster to join (:func:`connect`); default a local Ray
            instance, or the one this process already initialised.
        actors, num_gpus, num_cpus: the pool (:func:`actor_resources`); ``work_items``
            caps the pool size.
        retries (int): Ray restarts a dead actor and runs its video again up to this many
            times (``max_restarts``; ``max_task_retries=-1``: while restarts are left).
        worker (type): the actor class (a subclass of :class:`VideoBlurWorker`).

    Raises:
        ValueError: bad pool options.
        ModuleNotFoundError: Ray is not installed.
    """

    def __init__(
        self,
        model: bytes | str | os.PathLike | None = None,
        *,
        dtype: str = "float32",
        size: tuple[int, int] | None = None,
        sigma: float | None = None,
        max_frames: int | None = None,
        address: str | None = None,
        actors: int | None = None,
        num_gpus: float | None = None,
        num_cpus: float | None = None,
        retries: int = 3,
        worker: type = VideoBlurWorker,
        work_items: int | None = None,
    ) -> None:
        ray = self._ray = require_ray()
        if int(retries) < 0:
            raise ValueError(f"retries must be >= 0, given {retries!r}")
        self.retries = int(retries)
        self._started_ray = connect(address)
        try:
            self.resources = actor_resources(actors, num_gpus=num_gpus, num_cpus=num_cpus,
                                             work_items=work_items)
            if model is None:
                from webnn_gpu import models

                model = models.fetch("selfie-segmentation")
            name = "model" if isinstance(model, (bytes, bytearray)) else Path(model).name
            data = bytes(model) if isinstance(model, (bytes, bytearray)) else Path(model).read_bytes()
        except BaseException:
            self.close()
            raise
        model_ref = ray.put(data)  # once in the store, whatever the number of actors
        # Ray restarts a dead actor up to `retries` times and reruns the video it was on
        # (max_task_retries=-1: for as long as the actor has restarts left)
        remote = ray.remote(worker).options(max_restarts=self.retries, max_task_retries=-1,
                                            **self.resources.options())
        self._counter = ray.remote(FrameCounter).options(num_cpus=0).remote()
        options = dict(model_name=name, dtype=dtype, size=size, sigma=sigma, max_frames=max_frames,
                       counter=self._counter,
                       software_threads=self.resources.software_threads)
        self._new_actor = lambda: remote.remote(model_ref, **options)
        self.actors: list[Any] = [self._new_actor() for _ in range(self.resources.actors)]
        self._started = False

    def ready(self) -> list[str]:
        """Wait until every actor has started; returns their adapters.

        Raises:
            ray.exceptions.RayActorError: an actor failed to start (e.g. the model did not load).
        """
        return self._ray.get([a.ready.remote() for a in self.actors])

    def run(
        self,
        inputs: str | os.PathLike | Sequence[str | os.PathLike],
        out_dir: str | os.PathLike,
        *,
        progress: bool | Any = False,
        on_submit: Callable[[Path, Any], None] | None = None,
        on_result: Callable[[VideoResult], None] | None = None,
    ) -> BlurReport:
        """Blur every video of ``inputs`` whose output is not in ``out_dir`` yet.

        Arguments:
            inputs: a folder, a glob, a file or a list of them (:func:`find_videos`).
            out_dir: the output folder (created); each output is ``<input name>.mp4``. On a
                cluster, inputs and outputs must be on storage every node sees.
            progress (bool | tqdm-like): one progress bar for the job (videos done, frames per
                second over the pool) on stderr, or an object with ``update(n)`` and
                ``set_postfix_str(s)``.
            on_submit (callable | None): ``on_submit(source, actor_handle)`` when a video is
                handed to an actor.
            on_result (callable | None): ``on_result(video_result)`` as each video ends.

        Returns:
            BlurReport: per-video outcomes and throughput. A failed video does not raise;
            after Ctrl-C the report has ``interrupted`` set (finished outputs stay; a re-run
            completes the rest).

        Raises:
            FileNotFoundError: an input names no video.
            ValueError: two inputs would write the same output.
            RuntimeError: the actors could not start (the message has the cause, e.g. a
                model that does not load).
        """
        pairs, results, todo = _plan(inputs, out_dir)
        report = BlurReport(list(results.values()), 0.0, self.resources)
        if todo:
            self._dispatch(todo, results, report, progress, on_submit, on_result)
        return report

    def _dispatch(self, todo: deque, results: dict, report: BlurReport, progress: bool | Any,
                  on_submit: Callable | None, on_result: Callable | None) -> None:
        ray = self._ray
        if not self._started:
            try:
                self.ready()
            except ray.exceptions.RayActorError as exc:  # e.g. a model that does not load
                lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
                raise RuntimeError(f"the blur actors could not start: {lines[-1] if lines else exc}") from exc
            self._started = True
        replacements = len(todo)  # an actor out of restarts is replaced, at most once per video
        idle = list(self.actors)
        pending: dict[Any, tuple[Path, Path, Any]] = {}
        bar = _progress_bar(progress, len(results), report.count("skipped"))
        start = time.perf_counter()
        counted = ray.get(self._counter.total.remote()) if bar is not None else 0

        def show() -> None:
            if bar is not None:
                frames = max(ray.get(self._counter.total.remote()) - counted, report.frames)
                fps = frames / max(time.perf_counter() - start, 1e-9)
                bar.set_postfix_str(f"{frames} frames, {fps:.1f} fps, {report.count('failed')} failed")

        try:
            while todo or pending:
                while todo and idle:
                    actor = idle.pop()
                    src, out = todo.popleft()
                    ref = actor.blur.remote(str(src), str(out))
                    pending[ref] = (src, out, actor)
                    if on_submit is not None:
                        on_submit(src, actor)
                if not pending:  # no actor left, and none may be started
                    for src, _ in todo:
                        results[src].status, results[src].error = "failed", "no actor left (all died)"
                    todo.clear()
                    break
                ready, _ = ray.wait(list(pending), num_returns=1, timeout=1.0 if bar is not None else None)
                if not ready:
                    show()
                for ref in ready:
                    src, out, actor = pending.pop(ref)
                    video = results[src]
                    try:
                        value = ray.get(ref)
                    except ray.exceptions.RayActorError as exc:  # died more than `retries` times
                        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                        video.status = "failed"
                        video.error = (f"its actor died {self.retries + 1} times "
                                       f"(max_restarts={self.retries}): {first}")
                        self.actors.remove(actor)
                        if replacements > 0 and (todo or pending):
                            replacements -= 1
                            self.actors.append(self._new_actor())
                            idle.append(self.actors[-1])
                    except ray.exceptions.RayTaskError as exc:  # a bug: an exception outside blur()
                        video.status, video.error = "failed", str(exc.cause if exc.cause is not None else exc)
                        idle.append(actor)
                    else:
                        video.frames, video.seconds = value["frames"], value["seconds"]
                        video.status = "failed" if value["error"] else "done"
                        video.error = value["error"]
                        report.adapters.add(value["adapter"])
                        idle.append(actor)
                    report.seconds = time.perf_counter() - start
                    if bar is not None:
                        bar.update(1)
                        show()
                    if on_result is not None:
                        on_result(video)
        except KeyboardInterrupt:  # the report says what is done; a re-run does the rest
            report.interrupted = True  # (close() stops the actors still on a video)
        finally:
            report.seconds = time.perf_counter() - start
            if bar is not None and bar is not progress:
                bar.close()

    def close(self) -> None:
        """Stop the actors (and the local Ray instance this pool started). Idempotent."""
        for actor in getattr(self, "actors", []) + ([self._counter] if getattr(self, "_counter", None) else []):
            self._ray.kill(actor, no_restart=True)
        self.actors, self._counter = [], None
        if self._started_ray:
            self._started_ray = False
            self._ray.shutdown()

    def __enter__(self) -> "BlurPool":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _plan(inputs: Any, out_dir: str | os.PathLike) -> tuple[list, dict, deque]:
    """(pairs, results by input, the (input, output) pairs still to do); stale partial files
    of the videos to do are removed."""
    pairs = plan_outputs(find_videos(inputs), out_dir)
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    results = {src: VideoResult(src, out, "skipped" if out.exists() else "not run") for src, out in pairs}
    todo = deque((src, out) for src, out in pairs if results[src].status == "not run")
    for _, out in todo:
        for stale in _partials(out):  # left by an interrupted earlier run
            stale.unlink(missing_ok=True)
    return pairs, results, todo


def blur_videos(
    inputs: str | os.PathLike | Sequence[str | os.PathLike],
    out_dir: str | os.PathLike,
    *,
    progress: bool | Any = False,
    on_submit: Callable[[Path, Any], None] | None = None,
    on_result: Callable[[VideoResult], None] | None = None,
    **pool_options: Any,
) -> BlurReport:
    """Blur the background of every video of ``inputs`` into ``out_dir`` on a Ray actor pool.

    One :class:`BlurPool` (no larger than the number of videos to do) for one
    :meth:`BlurPool.run`; nothing starts when every output exists already.

    Arguments:
        inputs, out_dir, progress, on_submit, on_result: as :meth:`BlurPool.run`.
        **pool_options: as :class:`BlurPool` (``model``, ``dtype``, ``size``, ``sigma``,
            ``max_frames``, ``address``, ``actors``, ``num_gpus``, ``num_cpus``,
            ``retries``, ``worker``).

    Returns:
        BlurReport

    Raises:
        FileNotFoundError: an input names no video.
        ValueError: two inputs would write the same output; bad pool options.
        ModuleNotFoundError: Ray is not installed.
    """
    _, results, todo = _plan(inputs, out_dir)
    if not todo:
        return BlurReport(list(results.values()), 0.0, ActorResources(0, 0.0, 0.0))
    with BlurPool(work_items=len(todo), **pool_options) as pool:
        return pool.run(inputs, out_dir, progress=progress, on_submit=on_submit, on_result=on_result)


def _progress_bar(progress: bool | Any, total: int, done: int) -> Any:
    if progress is False or progress is None:
        return None
    if progress is not True:
        return progress
    from tqdm import tqdm

    return tqdm(total=total, initial=done, unit="video", file=sys.stderr, desc="blur")
