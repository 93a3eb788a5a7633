"""The Ray tests' cluster: one local Ray instance for the test session, small and quiet.

It starts on first use (about 5-10 s), with 2 CPUs, a 100 MB object store and no dashboard;
its workers find this folder's helpers (``ray_helpers``) through ``PYTHONPATH``. The tests
fail, never skip, when Ray is missing (it is a test dependency), and a test that hangs
ends the run after HANG_SECONDS.
"""

from __future__ import annotations

import faulthandler
import logging
import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


#: a Ray test that runs longer than this hangs (e.g. a pool waiting for resources it will
#: never get): the test process prints every thread's stack and exits, failing the run
#: instead of blocking it
HANG_SECONDS = 180


@pytest.fixture(autouse=True)
def _bounded_in_time():
    faulthandler.dump_traceback_later(HANG_SECONDS, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


@pytest.fixture(scope="session")
def ray_cluster():
    """A local Ray instance for the session; shut down at its end."""
    import ray

    if ray.is_initialized():  # pragma: no cover - someone else's instance
        yield ray
        return
    path = os.pathsep.join([str(HERE)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    ray.init(
        num_cpus=2,
        num_gpus=0,
        include_dashboard=False,
        object_store_memory=100 * 2**20,
        logging_level=logging.WARNING,
        _system_config={"worker_niceness": 0},
        runtime_env={"env_vars": {"PYTHONPATH": path, "XDG_RUNTIME_DIR": os.environ.get("XDG_RUNTIME_DIR", "/tmp")}},
    )
    yield ray
    ray.shutdown()


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    """The tiny segmenter of ray_helpers as a .tflite file."""
    import ray_helpers

    path = tmp_path_factory.mktemp("model") / "tiny_segmenter.tflite"
    path.write_bytes(ray_helpers.tiny_segmenter())
    return path
