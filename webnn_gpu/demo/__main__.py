"""``python -m webnn_gpu.demo [options]``: the same as ``webnn-gpu blur``."""

import sys

from .command import main

sys.exit(main())
