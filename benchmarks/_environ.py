"""Environment variables set for a block (the benchmarks build each form of a kernel under its
``WEBNN_GPU_FORCE_*`` switches, which the engine reads at build time)."""

from __future__ import annotations

import contextlib
import os


@contextlib.contextmanager
def environ(env: dict):
    """Set ``env`` (a value of None unsets the variable) for the block, then restore what was."""
    old = {k: os.environ.get(k) for k in env}
    for k, v in env.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
