"""Video read/write round trip through imageio-ffmpeg's FFmpeg, on a clip the test writes."""

from __future__ import annotations

import numpy as np
import pytest

from webnn_gpu.demo.video import VideoReader, VideoWriter, camera_input, parse_size


def _clip(n: int, h: int, w: int) -> list[np.ndarray]:
    """Smooth moving gradients (H.264 in yuv420p keeps them to within a few levels)."""
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    frames = []
    for t in range(n):
        r = 127 + 100 * np.sin(2 * np.pi * (x / w + t / n))
        g = 127 + 100 * np.cos(2 * np.pi * (y / h - t / n))
        b = 60 + 120 * (x + y) / (w + h)
        frames.append(np.stack([r, g, b], -1).round().astype(np.uint8))
    return frames


def test_round_trip(tmp_path):
    n, h, w = 12, 48, 64
    frames = _clip(n, h, w)
    path = tmp_path / "sub" / "clip.mp4"
    with VideoWriter(path, w, h, fps=24, crf=10) as writer:
        for f in frames:
            writer.write(f)
    assert writer.frames_written == n and path.stat().st_size > 0

    with VideoReader(path) as reader:
        assert reader.size == (w, h)
        assert reader.info.fps == pytest.approx(24, rel=1e-3)
        assert reader.info.frame_count == n
        got = [f.copy() for f in reader]
    assert len(got) == n
    for a, b in zip(got, frames):
        assert a.shape == (h, w, 3) and a.dtype == np.uint8
        # lossy H.264 + 4:2:0 chroma: a small mean error, no wild pixels
        err = np.abs(a.astype(int) - b.astype(int))
        assert err.mean() < 3.0 and np.percentile(err, 99) < 16


def test_read_scaled_and_bytes_frames(tmp_path):
    h, w = 40, 60
    frames = _clip(4, h, w)
    path = tmp_path / "clip.mp4"
    with VideoWriter(path, w, h, fps=10) as writer:
        for f in frames:
            writer.write(f.tobytes())  # bytes work too
    with VideoReader(str(path), size=(30, 20)) as reader:
        assert reader.size == (30, 20)
        assert (reader.info.source_width, reader.info.source_height) == (w, h)
        first = reader.read()
        rest = list(reader)
    assert first.shape == (20, 30, 3) and len(rest) == 3
    # a 2x downscale of a smooth image is close to the block mean
    want = frames[0].astype(float).reshape(20, 2, 30, 2, 3).mean(axis=(1, 3))
    assert np.abs(first.astype(float) - want).mean() < 4.0
    assert reader.read() is None


def test_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.mp4"):
        VideoReader(tmp_path / "nope.mp4")
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(b"this is not a video")
    with pytest.raises(OSError, match="FFmpeg cannot read"):
        VideoReader(bad)
    with VideoWriter(tmp_path / "x.mp4", 8, 8) as writer:
        with pytest.raises(ValueError, match=r"\(8, 8, 3\)"):
            writer.write(np.zeros((8, 9, 3), np.uint8))
        with pytest.raises(ValueError, match="192 bytes"):
            writer.write(b"\0" * 10)
        writer.write(np.zeros((8, 8, 3), np.uint8))


def test_parse_size_and_camera_names():
    assert parse_size("1280x720") == (1280, 720)
    assert parse_size(" 64X48 ") == (64, 48)
    for bad in ("1280", "0x10", "axb", "-1x5"):
        with pytest.raises(ValueError, match="WIDTHxHEIGHT"):
            parse_size(bad)
    assert camera_input(1, "linux") == (["-f", "v4l2"], "/dev/video1")
    assert camera_input(0, "darwin")[1] == "0:none"
