"""The demo pipeline end to end (video -> GPU passes -> video) with a stand-in segmenter.

KeySegmenter (a colour key in WGSL) replaces the model, so these tests need no WebNN: they
check upload, preprocess, the frames-in-flight readback, postprocess, the CLI plumbing,
the snapshot and the video files. Frame-level results are compared with the NumPy float64
reference chain (demo_reference) to within 1 byte level (99% of bytes exact).
"""

from __future__ import annotations

import argparse
import zlib

import numpy as np
import pytest

import clips
import demo_reference as ref
from key_segmenter import KeySegmenter
from webnn_gpu import demo
from webnn_gpu.demo import command
from webnn_gpu.demo.blur import BLUR_EPS
from webnn_gpu.demo.video import VideoReader, VideoWriter, write_png


def _scene(n: int, h: int, w: int, seed: int = 0) -> list[np.ndarray]:
    return clips.scene(n, h, w, seed, start=0.4, travel=0.2)


def _reference(frame: np.ndarray, mh: int, mw: int, sigma: float, factor: int) -> tuple:
    h, w = frame.shape[:2]
    x = ref.preprocess(frame, mh, mw)[0]
    key = np.clip((x[..., 0] - np.maximum(x[..., 1], x[..., 2]) - 0.2) * 5, 0, 1)
    mask = ref.upsample_mask(key, h, w)
    blurred = ref.weighted_blur(frame, mask, sigma, factor, BLUR_EPS)
    return ref.blend(frame, mask, blurred, factor), mask


@pytest.mark.parametrize("dtype, in_flight", [("float32", 2), ("float32", 1), ("float16", 3)])
def test_pipeline_matches_reference(device, dtype, in_flight):
    h, w, n = 48, 80, 5
    frames = _scene(n, h, w)
    seg = KeySegmenter(device, 40, 32, dtype=dtype)
    pipe = demo.BlurPipeline(device, w, h, seg, sigma=3.0, in_flight=in_flight)
    got: list[np.ndarray] = []
    stats = demo.process_video(frames, pipe, lambda f: got.append(f.copy()))
    assert stats.frames == n and len(got) == n
    for frame, out in zip(frames, got):
        want, mask = _reference(frame, 32, 40, 3.0, pipe.blur.factor)
        diff = np.abs(out.astype(int) - want.astype(int))
        if dtype == "float32":
            assert diff.max() <= 1 and (diff == 0).mean() >= 0.99
        else:  # the model tensors are f16: the key (x5) and the mask edge move a little
            assert np.percentile(diff, 99) <= 2 and diff.mean() < 0.1
        person, background = mask > 0.5, mask < 0.05
        change = np.abs(out.astype(int) - frame.astype(int)).mean(-1)
        # the person stays sharp (its soft edge takes a little of the blur), the textured
        # background is blurred
        assert change[mask > 0.95].mean() < 0.5
        assert change[person].mean() < 0.2 * change[background].mean()
        assert change[background].mean() > 10.0


def test_stage_times_and_report(device):
    frames = _scene(4, 32, 48)
    pipe = demo.BlurPipeline(device, 48, 32, KeySegmenter(device, 16, 16), sigma=2.0)
    stats = demo.process_video(frames, pipe, lambda f: None, max_frames=3)
    assert stats.frames == 3 and stats.seconds > 0 and stats.fps > 0
    assert set(stats.stages) == set(demo.STAGES)
    assert all(v >= 0 for v in stats.stages.values())
    if "timestamp-query" in device.features:
        assert stats.gpu_timed_frames == 3
        assert stats.stages["postprocess"] > 0 and stats.stages["preprocess"] > 0
    report = stats.report()
    for stage in demo.STAGES:
        assert stage in report
    assert "3 frames" in report and "fps" in report


def test_tickets_are_checked(device):
    pipe = demo.BlurPipeline(device, 16, 8, KeySegmenter(device, 8, 8), sigma=1.0, in_flight=2)
    frame = np.zeros((8, 16, 3), np.uint8)
    a = pipe.submit(frame)
    b = pipe.submit(frame)
    with pytest.raises(RuntimeError, match="in flight"):
        pipe.submit(frame)
    with pytest.raises(RuntimeError, match="not the oldest"):
        pipe.collect(b)
    pipe.collect(a)
    pipe.collect(b)
    assert pipe.outstanding == 0


def _png_pixels(path) -> np.ndarray:
    """Decode our own 8-bit RGB, filter-0 PNG with zlib (checks the chunk CRCs too)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks = 8, {}
    while pos < len(data):
        n = int.from_bytes(data[pos:pos + 4], "big")
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        assert int.from_bytes(data[pos + 8 + n:pos + 12 + n], "big") == zlib.crc32(kind + body)
        chunks[kind] = chunks.get(kind, b"") + body
        pos += 12 + n
    w, h = int.from_bytes(chunks[b"IHDR"][:4], "big"), int.from_bytes(chunks[b"IHDR"][4:8], "big")
    rows = np.frombuffer(zlib.decompress(chunks[b"IDAT"]), np.uint8).reshape(h, 1 + 3 * w)
    assert not rows[:, 0].any()
    return rows[:, 1:].reshape(h, w, 3)


def test_png_writer_is_readable_by_ffmpeg(tmp_path):
    img = np.random.default_rng(0).integers(0, 256, (7, 11, 3), dtype=np.uint8)
    path = write_png(tmp_path / "a" / "x.png", img)
    np.testing.assert_array_equal(_png_pixels(path), img)
    with VideoReader(path) as reader:  # an independent decoder
        np.testing.assert_array_equal(reader.read(), img)


def test_cli_run(device, tmp_path, monkeypatch, capsys):
    """`webnn-gpu blur` on a synthetic clip, with the stand-in segmenter for the model."""
    h, w = 48, 64
    clip = tmp_path / "in.mp4"
    with VideoWriter(clip, w, h, fps=10, crf=0) as writer:
        for f in _scene(6, h, w):
            writer.write(f)
    model = tmp_path / "fake.tflite"
    model.write_bytes(b"")  # never read: load_segmenter is replaced below
    monkeypatch.setattr(command, "create_device", lambda: device)
    monkeypatch.setattr(command, "load_segmenter", lambda dev, path, dtype: KeySegmenter(dev, 32, 32, dtype=dtype))
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    parser = argparse.ArgumentParser()
    demo.add_arguments(parser)
    out = tmp_path / "out" / "blurred.mp4"
    snap = tmp_path / "snap.png"
    args = parser.parse_args([
        str(clip), "-o", str(out), "--model", str(model), "--size", "32x24", "--max-frames", "4",
        "--snapshot", str(snap), "--snapshot-frame", "2", "--preview", "--no-progress",
    ])
    assert demo.run(args) == 0
    captured = capsys.readouterr()
    assert "--preview: no display found" in captured.err
    assert "4 frames" in captured.out and f"output: {out.resolve()}" in captured.out
    assert "snapshot:" in captured.out
    for stage in demo.STAGES:
        assert stage in captured.out
    with VideoReader(out) as reader:
        assert reader.size == (32, 24)
        assert len(list(reader)) == 4
    pair = _png_pixels(snap)
    assert pair.shape == (24, 64, 3)  # before | after
    assert np.abs(pair[:, :32].astype(int) - pair[:, 32:].astype(int)).mean() > 1


def test_cli_errors(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    demo.add_arguments(parser)
    args = parser.parse_args([str(tmp_path / "missing.mp4"), "--model", str(tmp_path / "m.tflite")])
    assert demo.run(args) == 1
    assert "error:" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parser.parse_args(["--size", "12"])
    args = parser.parse_args(["--max-frames", "0"])
    assert demo.run(args) == 2


class _FakeContext:
    """An MLContext stand-in whose record() runs the colour key on the buffers it is given."""

    def __init__(self, device, key: KeySegmenter):
        self.device, self.key, self.calls = device, key, []

    def record(self, encoder, graph, inputs, outputs):
        self.calls.append((graph, dict(inputs), dict(outputs)))
        self.key.record(encoder, inputs["input_1"], outputs["activation_10"])


def _model(outputs: dict, dtype: str = "float32", input_shape=(1, 32, 32, 3)):
    from types import SimpleNamespace

    return SimpleNamespace(
        graph="the-graph",
        inputs={"input_1": {"data_type": dtype, "shape": list(input_shape)}},
        outputs={k: {"data_type": dtype, "shape": list(v)} for k, v in outputs.items()},
    )


def test_webnn_segmenter_records_the_graph_with_the_pipeline_buffers(device):
    h, w = 32, 48
    frames = _scene(3, h, w)
    ctx = _FakeContext(device, KeySegmenter(device, 32, 32))
    # a second output the demo does not use still gets a buffer of its own
    model = _model({"activation_10": (1, 32, 32, 1), "aux": (1, 8)})
    seg = demo.WebNNSegmenter(ctx, model, name="fake")
    assert (seg.input_size, seg.mask_size, seg.dtype) == ((32, 32), (32, 32), "float32")
    pipe = demo.BlurPipeline(device, w, h, seg, sigma=2.0)
    got: list[np.ndarray] = []
    demo.process_video(frames, pipe, lambda f: got.append(f.copy()))
    assert len(ctx.calls) == 3
    graph, inputs, outputs = ctx.calls[0]
    assert graph == "the-graph"
    assert inputs == {"input_1": pipe.model_input}
    assert outputs["activation_10"] is pipe.model_output and outputs["aux"].size == 32
    want, _ = _reference(frames[0], 32, 32, 2.0, pipe.blur.factor)
    assert np.abs(got[0].astype(int) - want.astype(int)).max() <= 1


@pytest.mark.parametrize(
    "outputs, input_shape, dtype, match",
    [
        ({"m": (1, 32, 32, 1)}, (1, 32, 32, 4), "float32", "NHWC"),
        ({"m": (1, 32, 32, 2)}, (1, 32, 32, 3), "float32", "one mask output"),
        ({"a": (1, 32, 32, 1), "b": (1, 16, 16, 1)}, (1, 32, 32, 3), "float32", "one mask output"),
        ({"m": (1, 32, 32, 1)}, (1, 32, 32, 3), "int32", "float32 or float16"),
    ],
)
def test_webnn_segmenter_rejects_other_models(device, outputs, input_shape, dtype, match):
    ctx = _FakeContext(device, None)
    with pytest.raises(ValueError, match=match):
        demo.WebNNSegmenter(ctx, _model(outputs, dtype, input_shape))


def test_a_failing_sink_leaves_the_pipeline_usable(device):
    frames = _scene(4, 16, 24)
    pipe = demo.BlurPipeline(device, 24, 16, KeySegmenter(device, 8, 8), sigma=1.0)

    def broken(frame):
        raise OSError("FFmpeg went away")

    with pytest.raises(OSError, match="went away"):
        demo.process_video(frames, pipe, broken)
    assert pipe.outstanding == 0
    got = []
    assert demo.process_video(frames, pipe, got.append).frames == 4  # still usable


def test_ctrl_c_still_writes_the_frames_in_flight(device):
    frames = _scene(5, 16, 24)
    pipe = demo.BlurPipeline(device, 24, 16, KeySegmenter(device, 8, 8), sigma=1.0)
    written = []

    def frames_then_ctrl_c():
        yield from frames[:3]
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        demo.process_video(frames_then_ctrl_c(), pipe, lambda f: written.append(f.copy()))
    assert len(written) == 3 and pipe.outstanding == 0


def test_cli_router_has_the_blur_command(capsys):
    from webnn_gpu import cli

    with pytest.raises(SystemExit) as exit_info:
        cli.main(["blur", "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for option in ("--snapshot", "--preview", "--max-frames", "--dtype", "--size", "--model"):
        assert option in out


def _webnn_key_model(ctx, h: int, w: int, dtype: str):
    """The colour key of KeySegmenter built as a real WebNN graph (slice, reduce_max, clamp)."""
    import webnn_gpu as webnn
    from types import SimpleNamespace

    b = webnn.MLGraphBuilder(ctx)
    desc = {"data_type": dtype, "shape": [1, h, w, 3]}
    x = b.input("input_1", desc)
    r = b.slice(x, [0, 0, 0, 0], [1, h, w, 1])
    gb = b.reduce_max(b.slice(x, [0, 0, 0, 1], [1, h, w, 2]), axes=[3], keep_dimensions=True)
    np_dtype = np.dtype(dtype)
    c = lambda v: b.constant(np.full([1, 1, 1, 1], v, np_dtype))  # noqa: E731
    mask = b.clamp(b.mul(b.sub(b.sub(r, gb), c(0.2)), c(5.0)), min_value=0.0, max_value=1.0)
    graph = b.build({"activation_10": mask})
    return SimpleNamespace(
        graph=graph, inputs={"input_1": desc},
        outputs={"activation_10": {"data_type": dtype, "shape": [1, h, w, 1]}},
    )


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_webnn_graph_recorded_into_the_frame_encoder(device, dtype):
    """The real WebNN path: a context on the demo's device, ctx.record into its encoder."""
    import webnn_gpu as webnn

    h, w = 48, 80
    frames = _scene(3, h, w)
    ctx = webnn.ml.create_context(device)
    seg = demo.WebNNSegmenter(ctx, _webnn_key_model(ctx, 32, 40, dtype), name="webnn key")
    pipe = demo.BlurPipeline(device, w, h, seg, sigma=3.0)
    got: list[np.ndarray] = []
    stats = demo.process_video(frames, pipe, lambda f: got.append(f.copy()))
    assert stats.frames == 3
    for frame, out in zip(frames, got):
        want, _ = _reference(frame, 32, 40, 3.0, pipe.blur.factor)
        diff = np.abs(out.astype(int) - want.astype(int))
        if dtype == "float32":
            assert diff.max() <= 1 and (diff == 0).mean() >= 0.99
        else:
            assert np.percentile(diff, 99) <= 2 and diff.mean() < 0.1
