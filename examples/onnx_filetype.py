"""Tell file types with Google's Magika model (ONNX) on webnn-gpu.

    python examples/onnx_filetype.py [FILE ...]

Fetches ``magika==1.0.3``'s model and configuration from PyPI (once, into the cache),
loads the ONNX model with ``webnn.load`` for one batch of files, and prints each file's
content type and score. Without arguments it looks at a few files of this repository.
Features follow Magika's own extraction: the first and last 1024 bytes of the first and
last 4096, whitespace stripped, padded with token 256.
"""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np

import webnn_gpu as webnn
from webnn_gpu import models

ROOT = pathlib.Path(__file__).resolve().parents[1]


def features(data: bytes, config: dict) -> np.ndarray:
    """Magika's input for one file: ``beg_size + end_size`` int32 byte values."""
    beg, end, pad, block = config["beg_size"], config["end_size"], config["padding_token"], config["block_size"]
    n = min(block, len(data))
    head, tail = data[:n], data[len(data) - n:]
    head, tail = (head.strip(), tail.strip()) if len(data) <= block else (head.lstrip(), tail.rstrip())
    b = list(head[:beg]) + [pad] * max(0, beg - len(head))
    e = [pad] * max(0, end - len(tail)) + list(tail[-end:] if len(tail) >= end else tail)
    return np.array(b + e, np.int32)


def main(argv: list[str]) -> int:
    files = [pathlib.Path(a) for a in argv] or [ROOT / "README.md", ROOT / "examples" / "quickstart.py",
                                                ROOT / "pyproject.toml", ROOT / "Makefile"]
    config = json.loads(models.fetch("magika-config").read_text())
    labels = config["target_labels_space"]
    ctx = webnn.ml.create_context()
    model = webnn.load(models.fetch("magika"), ctx, dims={"unk__214": len(files)})  # the batch dimension
    x = np.stack([features(f.read_bytes(), config) for f in files])
    scores = model.compute({"bytes": x})["target_label"]
    for f, row in zip(files, scores):
        k = int(row.argmax())
        label = labels[k]
        threshold = config["thresholds"].get(label, config["medium_confidence_threshold"])
        label = config["overwrite_map"].get(label, label)
        sure = "" if row[k] >= threshold else "  (low confidence)"
        print(f"{f.name:24s} {label:12s} {row[k]:.3f}{sure}")
    ctx.destroy()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
