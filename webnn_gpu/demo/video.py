"""Read and write video through the FFmpeg binary that ``imageio-ffmpeg`` ships.

Frames are H x W x 3 ``uint8`` RGB arrays (FFmpeg's ``rgb24``), the layout the demo's
shaders read and write as u32 words. Reading accepts any file FFmpeg can decode, or a
camera index (``0`` -> ``/dev/video0`` on Linux, AVFoundation on macOS, DirectShow on
Windows); writing makes an H.264 MP4 (libx264, yuv420p, so every player can show it).

Example::

    with VideoReader("clip.mp4", size=(640, 360)) as reader, \\
         VideoWriter("out.mp4", *reader.size, fps=reader.info.fps) as writer:
        for frame in reader:
            writer.write(frame)
"""

from __future__ import annotations

import logging
import os
import re
import struct
import subprocess
import sys
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Union

import numpy as np

__all__ = [
    "VideoInfo",
    "VideoReader",
    "VideoWriter",
    "ffmpeg_exe",
    "parse_size",
    "camera_input",
    "write_png",
    "PreviewWindow",
    "PreviewUnavailable",
]

Source = Union[str, os.PathLike, int]


class _DropSizeNotice(logging.Filter):
    """imageio-ffmpeg logs a warning whenever frames are read scaled; here that is asked for."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("The frame size for reading")


logging.getLogger("imageio_ffmpeg").addFilter(_DropSizeNotice())


def _imageio_ffmpeg():
    try:
        import imageio_ffmpeg
    except ModuleNotFoundError as exc:  # pragma: no cover - the demo extra installs it
        raise ModuleNotFoundError(
            "webnn_gpu.demo.video needs imageio-ffmpeg (it ships the FFmpeg binary): "
            "pip install 'webnn-gpu[demo]'"
        ) from exc
    return imageio_ffmpeg


def _ffmpeg_error(exc: BaseException) -> str:
    """imageio-ffmpeg's message without FFmpeg's banner: its first line and FFmpeg's last."""
    text = str(exc)
    head, _, stderr = text.partition("=== stderr ===")
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    first = head.strip().splitlines()[0] if head.strip() else type(exc).__name__
    return f"{first} (FFmpeg: {lines[-1]})" if lines else first


def ffmpeg_exe() -> str:
    """The path of the FFmpeg executable from ``imageio-ffmpeg``.

    Returns:
        str: an absolute path (``IMAGEIO_FFMPEG_EXE`` overrides it, as in imageio-ffmpeg).
    """
    return _imageio_ffmpeg().get_ffmpeg_exe()


def parse_size(text: str) -> tuple[int, int]:
    """Parse ``"WxH"`` (e.g. ``"1280x720"``) into ``(width, height)``.

    Arguments:
        text (str): two positive integers joined by ``x``.

    Returns:
        tuple[int, int]: (width, height).

    Raises:
        ValueError: the text is not of that form or a number is 0.
    """
    m = re.fullmatch(r"\s*(\d+)\s*[xX]\s*(\d+)\s*", str(text))
    if not m or int(m.group(1)) == 0 or int(m.group(2)) == 0:
        raise ValueError(f"size must be WIDTHxHEIGHT with positive integers, e.g. 1280x720; given {text!r}")
    return int(m.group(1)), int(m.group(2))


def camera_input(index: int, platform: str | None = None) -> tuple[list[str], str]:
    """FFmpeg input options and input name for camera number ``index`` on this platform.

    Arguments:
        index (int): the camera number (0 is the first).
        platform (str | None): ``sys.platform`` by default.

    Returns:
        tuple[list[str], str]: (input options, the name FFmpeg's ``-i`` takes).

    Raises:
        OSError: no such camera (Windows: fewer DirectShow video devices than ``index + 1``).
    """
    platform = platform or sys.platform
    if platform.startswith("linux"):
        return ["-f", "v4l2"], f"/dev/video{index}"
    if platform == "darwin":
        return ["-f", "avfoundation", "-framerate", "30"], f"{index}:none"
    if platform.startswith("win"):
        names = _dshow_video_devices()
        if index >= len(names):
            raise OSError(f"camera {index}: DirectShow lists {len(names)} video device(s): {names}")
        return ["-f", "dshow"], f"video={names[index]}"
    raise OSError(f"camera input is not supported on {platform}; pass a video file")


def _dshow_video_devices() -> list[str]:  # pragma: no cover - Windows only
    out = subprocess.run(
        [ffmpeg_exe(), "-hide_banner", "-list_devices", "true", "-f", "dshow", "-i", "dummy"],
        capture_output=True,
        text=True,
    ).stderr
    return re.findall(r'"([^"]+)"\s+\(video\)', out)


@dataclass(frozen=True)
class VideoInfo:
    """What is known of a video source before reading it.

    Attributes:
        source (str): the file or device name given to FFmpeg.
        width, height (int): the size of the frames the reader yields (after scaling).
        source_width, source_height (int): the encoded size.
        fps (float): frames per second (0 when FFmpeg could not tell).
        frame_count (int | None): estimated from duration x fps; None for a live camera.
    """

    source: str
    width: int
    height: int
    source_width: int
    source_height: int
    fps: float
    frame_count: int | None


class VideoReader:
    """Frames of a video file or a camera, as H x W x 3 ``uint8`` arrays, through FFmpeg.

    Arguments:
        source (str | os.PathLike | int): a file FFmpeg can decode, or a camera index
            (an int, or a string of digits).
        size (tuple[int, int] | None): scale every frame to (width, height); default the
            source's size.

    Raises:
        FileNotFoundError: the file does not exist.
        OSError: FFmpeg cannot open or decode the source (its message is included).
    """

    def __init__(self, source: Source, *, size: tuple[int, int] | None = None) -> None:
        ffmpeg = _imageio_ffmpeg()
        input_params: list[str] = []
        if isinstance(source, int) or (isinstance(source, str) and source.isdigit()):
            input_params, name = camera_input(int(source))
            live = True
        else:
            path = Path(source)
            if not path.is_file():
                raise FileNotFoundError(f"video file not found: {str(path)!r}")
            name = str(path)
            live = False
        output_params = ["-an", "-sn"]
        if size is not None:
            w, h = size
            output_params += ["-vf", f"scale={int(w)}:{int(h)}:flags=bicubic"]
        self._gen = ffmpeg.read_frames(
            name, pix_fmt="rgb24", input_params=input_params, output_params=output_params
        )
        try:
            meta = next(self._gen)
        except (IOError, OSError, RuntimeError, StopIteration) as exc:
            self._gen.close()
            raise OSError(f"FFmpeg cannot read {name!r}: {_ffmpeg_error(exc)}") from exc
        width, height = (int(v) for v in meta["size"])
        src_w, src_h = (int(v) for v in meta.get("source_size", meta["size"]))
        fps = float(meta.get("fps") or 0.0)
        duration = float(meta.get("duration") or 0.0)
        count = round(duration * fps) if (not live and fps > 0 and duration > 0) else None
        self.info = VideoInfo(name, width, height, src_w, src_h, fps, count)
        self._closed = False

    @property
    def size(self) -> tuple[int, int]:
        """(width, height) of the frames this reader yields."""
        return self.info.width, self.info.height

    def __iter__(self) -> Iterator[np.ndarray]:
        h, w = self.info.height, self.info.width
        for data in self._gen:
            yield np.frombuffer(data, dtype=np.uint8).reshape(h, w, 3)

    def read(self) -> np.ndarray | None:
        """The next frame, or None at the end of the video."""
        try:
            data = next(self._gen)
        except StopIteration:
            return None
        return np.frombuffer(data, dtype=np.uint8).reshape(self.info.height, self.info.width, 3)

    def close(self) -> None:
        """Stop FFmpeg (idempotent)."""
        if not self._closed:
            self._closed = True
            self._gen.close()

    def __enter__(self) -> "VideoReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class VideoWriter:
    """Write H x W x 3 ``uint8`` frames into an H.264 MP4 file through FFmpeg (libx264).

    Arguments:
        path (str | os.PathLike): the output file; its folder is created.
        width, height (int): the frame size. H.264 in yuv420p needs even sizes: an odd
            one is padded up by one pixel (FFmpeg scales).
        fps (float): frames per second (default 30 when 0 or None).
        crf (int): x264 constant rate factor, 0 (lossless) to 51; default 18 (visually
            lossless).
        preset (str): x264 speed preset; default ``"veryfast"``.

    Raises:
        ValueError: a bad size.
        OSError: FFmpeg failed (when writing or closing).
    """

    def __init__(
        self,
        path: str | os.PathLike,
        width: int,
        height: int,
        *,
        fps: float | None = 30.0,
        crf: int = 18,
        preset: str = "veryfast",
    ) -> None:
        if width <= 0 or height <= 0:
            raise ValueError(f"VideoWriter: size must be positive, given {width}x{height}")
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.width, self.height = int(width), int(height)
        self.frames_written = 0
        self._gen = _imageio_ffmpeg().write_frames(
            str(self.path),
            (self.width, self.height),
            pix_fmt_in="rgb24",
            pix_fmt_out="yuv420p",
            fps=fps or 30.0,
            codec="libx264",
            quality=None,
            macro_block_size=2,
            ffmpeg_log_level="error",
            output_params=["-crf", str(int(crf)), "-preset", preset, "-movflags", "+faststart"],
        )
        self._gen.send(None)
        self._closed = False

    def write(self, frame: np.ndarray | bytes | memoryview) -> None:
        """Append one frame (H x W x 3 ``uint8``, or ``3 * W * H`` bytes).

        Raises:
            ValueError: wrong size or element type.
            OSError: FFmpeg stopped.
        """
        if isinstance(frame, np.ndarray):
            if frame.dtype != np.uint8 or frame.shape != (self.height, self.width, 3):
                raise ValueError(
                    f"VideoWriter.write: frame must be uint8 ({self.height}, {self.width}, 3), "
                    f"given {frame.dtype} {frame.shape}"
                )
            data: np.ndarray | memoryview = np.ascontiguousarray(frame)
        else:
            data = memoryview(frame).cast("B")
            if data.nbytes != 3 * self.width * self.height:
                raise ValueError(
                    f"VideoWriter.write: frame must be {3 * self.width * self.height} bytes, "
                    f"given {data.nbytes}"
                )
        try:
            self._gen.send(data)
        except (OSError, RuntimeError, StopIteration) as exc:
            raise OSError(f"FFmpeg stopped while writing {str(self.path)!r}: {exc}") from exc
        self.frames_written += 1

    def close(self) -> None:
        """Finish the file: FFmpeg flushes and writes the MP4 index (idempotent)."""
        if not self._closed:
            self._closed = True
            try:
                self._gen.close()
            except (OSError, RuntimeError) as exc:
                raise OSError(f"FFmpeg failed to finish {str(self.path)!r}: {exc}") from exc

    def __enter__(self) -> "VideoWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def write_png(path: str | os.PathLike, image: np.ndarray) -> Path:
    """Write an H x W x 3 RGB or an H x W grey ``uint8`` image as a PNG file (zlib only).

    Arguments:
        path (str | os.PathLike): the file; its folder is created.
        image (np.ndarray): H x W x 3 or H x W ``uint8``.

    Returns:
        Path: the path written.

    Raises:
        ValueError: the image is not H x W x 3 or H x W ``uint8``.
    """
    image = np.asarray(image)
    if image.dtype != np.uint8 or not (image.ndim == 2 or (image.ndim == 3 and image.shape[2] == 3)):
        raise ValueError(f"write_png: image must be H x W x 3 or H x W uint8, given {image.dtype} {image.shape}")
    h, w = image.shape[:2]
    channels = 1 if image.ndim == 2 else 3

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = np.zeros((h, 1 + channels * w), np.uint8)  # filter byte 0 (None) before each row
    rows[:, 1:] = image.reshape(h, channels * w)
    colour_type = 0 if channels == 1 else 2  # 8-bit greyscale | truecolour
    png = (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, colour_type, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(rows.tobytes(), 6))
        + chunk(b"IEND", b"")
    )
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(png)
    return path


class PreviewUnavailable(RuntimeError):
    """No window can be opened (no display, or no Tk)."""


def _display_problem(platform: str, environ: os._Environ | dict) -> str | None:
    if platform.startswith("linux") or "bsd" in platform:
        if not (environ.get("DISPLAY") or environ.get("WAYLAND_DISPLAY")):
            return "no display found (neither DISPLAY nor WAYLAND_DISPLAY is set)"
    return None


class PreviewWindow:
    """A window that shows frames as they are produced (Tk, from Python's standard library).

    Arguments:
        title (str): the window title.

    Raises:
        PreviewUnavailable: there is no display, or Tk is missing or cannot open one; the
            message says which.

    Closing the window stops the preview (``closed`` becomes True); the caller goes on.
    """

    def __init__(self, title: str = "webnn-gpu") -> None:
        problem = _display_problem(sys.platform, os.environ)
        if problem:
            raise PreviewUnavailable(problem)
        try:
            import tkinter
        except ImportError as exc:
            raise PreviewUnavailable(
                "Python's tkinter is not installed (Debian/Ubuntu: apt install python3-tk)"
            ) from exc
        try:
            self._root = tkinter.Tk()
        except tkinter.TclError as exc:
            raise PreviewUnavailable(f"cannot open a window: {exc}") from exc
        self._tk = tkinter
        self._root.title(title)
        self._root.protocol("WM_DELETE_WINDOW", self.close)
        self._label = tkinter.Label(self._root)
        self._label.pack()
        self._photo: Any = None
        self.closed = False

    def show(self, frame: np.ndarray) -> None:
        """Show one H x W x 3 ``uint8`` frame (does nothing once the window is closed)."""
        if self.closed:
            return
        h, w = frame.shape[:2]
        ppm = b"P6 %d %d 255\n" % (w, h) + np.ascontiguousarray(frame).tobytes()
        try:
            self._photo = self._tk.PhotoImage(data=ppm, format="PPM")
            self._label.configure(image=self._photo)
            self._root.update()
        except self._tk.TclError:  # the window went away
            self.closed = True

    def close(self) -> None:
        """Close the window (idempotent)."""
        if not self.closed:
            self.closed = True
            try:
                self._root.destroy()
            except self._tk.TclError:
                pass
