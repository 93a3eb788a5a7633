"""Detect and read a line of text with PP-OCR (ONNX models of rapidocr) on webnn-gpu.

    python examples/onnx_ocr.py ["some text"]

Renders the text with Pillow's default font, then runs PP-OCRv4's detector (a text
probability map), crops the detected line, checks its orientation with the angle
classifier, and reads it with the recogniser (CTC over the character list stored in the
model's metadata). The three models come from the ``rapidocr-onnxruntime==1.4.4`` wheel
(fetched once into the cache). Pre- and post-processing follow rapidocr's: pixels scaled to
[-1, 1], a detection threshold of 0.3, lines resized to a height of 48.

The first run compiles many kernels and takes minutes on a software rasteriser.
"""

from __future__ import annotations

import sys

import numpy as np

import webnn_gpu as webnn
from webnn_gpu import models

DET_SHAPE = (96, 640)  # multiples of 32
CLS_SHAPE = (48, 192)
REC_SHAPE = (48, 320)


def render(text: str) -> np.ndarray:
    """An RGB uint8 image (DET_SHAPE) with ``text`` in black on white."""
    from PIL import Image, ImageDraw, ImageFont

    img = Image.new("RGB", (DET_SHAPE[1], DET_SHAPE[0]), "white")
    ImageDraw.Draw(img).text((24, 28), text, fill="black", font=ImageFont.load_default(size=32))
    return np.asarray(img)


def _normalize(rgb: np.ndarray) -> np.ndarray:
    return ((rgb.astype(np.float32) / 255 - 0.5) / 0.5).transpose(2, 0, 1)[None].copy()


def _resize(rgb: np.ndarray, h: int, w: int) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.fromarray(rgb).resize((w, h), Image.BILINEAR))


def line_box(prob: np.ndarray, threshold: float = 0.3, grow: float = 0.3) -> tuple[int, int, int, int]:
    """The box (top, bottom, left, right) around the pixels above ``threshold``, grown by
    ``grow`` of its height on each side (rapidocr's unclip, for one horizontal line)."""
    ys, xs = np.nonzero(prob > threshold)
    if ys.size == 0:
        raise ValueError("no text found")
    t, b, l, r = ys.min(), ys.max() + 1, xs.min(), xs.max() + 1
    g = int(round((b - t) * grow))
    return int(max(t - g, 0)), int(min(b + g, prob.shape[0])), int(max(l - g, 0)), int(min(r + g, prob.shape[1]))


def rec_input(crop: np.ndarray) -> np.ndarray:
    """A line crop resized to height 48 (aspect kept, at most 320 wide), zero-padded."""
    h, w = crop.shape[:2]
    rw = min(REC_SHAPE[1], int(np.ceil(REC_SHAPE[0] * w / h)))
    x = np.zeros((1, 3, *REC_SHAPE), np.float32)
    x[:, :, :, :rw] = _normalize(_resize(crop, REC_SHAPE[0], rw))
    return x


def ctc_decode(probs: np.ndarray, characters: list[str]) -> str:
    """Greedy CTC: best class per step, repeats merged, blanks (class 0) dropped."""
    best = probs.argmax(-1)
    keep = np.ones(best.shape, bool)
    keep[1:] = best[1:] != best[:-1]
    return "".join(characters[i] for i in best[keep] if i != 0)


def characters_of(rec_path) -> list[str]:
    """The recogniser's classes: blank, the model's character list, then a space."""
    from webnn_gpu.onnx import read_onnx

    meta = {p.key: p.value for p in read_onnx(rec_path).metadata_props}
    return ["blank", *meta["character"].splitlines(), " "]


def read_line(image: np.ndarray, det, cls, rec, characters: list[str]) -> dict:
    """Run the three models (callables ndarray -> ndarray) on an RGB image of DET_SHAPE."""
    prob = det(_normalize(image))[0, 0]
    t, b, l, r = line_box(prob)
    crop = image[t:b, l:r]
    angle = cls(_normalize(_resize(crop, *CLS_SHAPE)))[0]
    if angle.argmax() == 1:  # 180 degrees
        crop = crop[::-1, ::-1].copy()
    probs = rec(rec_input(crop))[0]
    return {"prob": prob, "box": (t, b, l, r), "angle": angle, "rec": probs, "text": ctc_decode(probs, characters)}


def webnn_models(ctx):
    """The three models loaded on ``ctx``, as callables."""
    out = []
    for name, (h, w) in (("ppocr-det", DET_SHAPE), ("ppocr-cls", CLS_SHAPE), ("ppocr-rec", REC_SHAPE)):
        m = webnn.load(models.fetch(name), ctx, dims={"x": [1, 3, h, w]})
        out.append(lambda x, m=m: next(iter(m.compute({"x": x}).values())))
    return out


def main(argv: list[str]) -> int:
    text = argv[0] if argv else "WebNN reads ONNX 2026"
    ctx = webnn.ml.create_context()
    det, cls, rec = webnn_models(ctx)
    result = read_line(render(text), det, cls, rec, characters_of(models.fetch("ppocr-rec")))
    print(f"box (top, bottom, left, right): {result['box']}, angle scores {np.round(result['angle'], 3)}")
    print(f"text: {result['text']!r}")
    ctx.destroy()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
