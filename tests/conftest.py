"""Shared fixtures. Tests need a WebGPU adapter: in CI (EXPECT_GPU set) a missing one fails."""

from __future__ import annotations

import os

os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
# Lowered models are not kept on disk across the suite's loads (tests that change the engine's
# constants in the process would find plans lowered without the change); tests/pipelines/
# test_plan_cache.py turns it on. Assigned, not defaulted: a developer's exported
# WEBNN_GPU_PLAN_CACHE=1 must not make the suite use the real cache folder.
os.environ["WEBNN_GPU_PLAN_CACHE"] = "0"

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import webnn_gpu as webnn  # noqa: E402


@pytest.fixture(scope="session")
def ctx():
    """One MLContext for the session (creating a device costs ~100 ms on lavapipe)."""
    context = webnn.ml.create_context()
    yield context
    context.destroy()


@pytest.fixture
def rng():
    """A seeded generator: every test sees the same data on every run."""
    return np.random.default_rng(1234)


@pytest.fixture(autouse=True)
def _numpy_errors():
    """Make NumPy reference code raise on overflow/invalid unless a test opts out."""
    with np.errstate(all="raise", under="ignore"):
        yield
