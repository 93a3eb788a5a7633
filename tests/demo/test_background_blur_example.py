"""examples/background_blur.py runs as documented (a short clip, the tiny test model)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "ray"))

import ray_helpers as H  # noqa: E402  (the tiny segmenter and synthetic clips)
from webnn_gpu.demo import VideoReader  # noqa: E402


def test_background_blur_example_runs(tmp_path):
    clip = H.write_clip(tmp_path / "in.mp4", n=4)
    model = tmp_path / "tiny.tflite"
    model.write_bytes(H.tiny_segmenter())
    out = tmp_path / "out.mp4"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "background_blur.py"), str(clip), "-o", str(out),
         "--model", str(model), "--max-frames", "3", "--no-progress"],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "3 frames" in proc.stdout and f"output: {out.resolve()}" in proc.stdout
    with VideoReader(out) as reader:
        assert reader.size == (64, 48) and len(list(reader)) == 3
