"""Background blur: segment the person in every frame with WebNN and blur the rest.

    python examples/background_blur.py                    # the sample clip -> out/blurred.mp4
    python examples/background_blur.py talk.mov -o talk_blurred.mp4 --size 1280x720
    python examples/background_blur.py 0 --preview --max-frames 300   # camera 0

With no INPUT it fetches the sample clip (carphone) and the MediaPipe selfie-segmentation
model on first use. Options as `webnn-gpu blur --help`; `make demo` runs this script.
How it works: docs/demo.md.
"""

from __future__ import annotations

import sys

from webnn_gpu import demo

if __name__ == "__main__":
    sys.exit(demo.main(sys.argv[1:]))
