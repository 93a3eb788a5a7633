"""Debug knobs read from the environment once, at import.

* ``WEBNN_GPU_DEBUG=1|2|3``: 1 logs the graph after the compiler passes, 2 also the kernel
  list with dispatch sizes and each new pipeline's first-run (driver compile) time at
  ``build()``, 3 also dumps every WGSL kernel to ``WEBNN_GPU_DUMP_DIR``.
* ``WEBNN_GPU_FORCE_<ALGO>=<variant>``: force a kernel variant (see :func:`force`).
* ``WEBNN_GPU_PROFILE=1``: time each kernel with timestamp queries.
* ``WEBNN_GPU_PASSES=-name,...``: switch compiler passes off (``webnn_gpu.compiler``).
* ``WEBNN_GPU_WARMUP=0``: skip running new pipelines once at ``build()`` (``MLGraph._warm_up``).
* ``WEBNN_GPU_TEMPLATE_CACHE=0``: do not keep compiled Jinja templates, rendered WGSL and each
  model's pipeline list under the cache directory (``webnn_gpu._kernels._bytecode_cache``,
  ``_rendered_dir``, ``ModelPrefetch``).
* ``WEBNN_GPU_PLAN_CACHE=0``: do not keep each model's lowered plan on disk
  (``webnn_gpu._plancache``; ``WEBNN_GPU_PLAN_CACHE_MB`` bounds the folder, 256 MB by default,
  ``inf`` for no bound; ``WEBNN_GPU_PLAN_CACHE_DIR`` names another one).
* ``WEBNN_GPU_PIPELINE_THREADS=N``: threads that create pipelines (a graph's new ones at
  ``build()``, and ahead of it: ``PipelineCache.prefetch``; 1 = in turn, nothing ahead).
* ``WEBNN_GPU_COMPILE_DEVICES=N``: queues that compile a graph's new pipelines on lavapipe, its
  own and N - 1 helper devices (``webnn_gpu._kernels.CompileHelpers``; 1 = its own only).

Everything is logged through ``logging.getLogger("webnn_gpu")``; nothing is printed.
"""

from __future__ import annotations

import os


def _int(name: str, default: int = 0) -> int:
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


DEBUG = _int("WEBNN_GPU_DEBUG")
DUMP_DIR = os.environ.get("WEBNN_GPU_DUMP_DIR", "")
PROFILE = _int("WEBNN_GPU_PROFILE")


def force(algo: str) -> str:
    """The variant forced for ``algo`` by ``WEBNN_GPU_FORCE_<ALGO>`` ("" when not forced)."""
    return os.environ.get(f"WEBNN_GPU_FORCE_{algo.upper()}", "").strip().lower()


def force_choice(algo: str, allowed: tuple[str, ...]) -> str:
    """:func:`force` for a knob that takes one of ``allowed`` ("" when not forced).

    Raises:
        ValueError: ``WEBNN_GPU_FORCE_<ALGO>`` is set to something else (a misspelt knob would
            otherwise measure the default form without saying so).
    """
    forced = force(algo)
    if forced and forced not in allowed:
        raise ValueError(f"WEBNN_GPU_FORCE_{algo.upper()}={forced!r}: expected one of {', '.join(allowed)}")
    return forced


def force_words(algo: str, default: bool) -> bool:
    """Whether a kernel moves an operand as u64 words: ``WEBNN_GPU_FORCE_<ALGO>=words`` yes,
    ``=vec4`` no, else ``default`` (:func:`force_choice`: any other value raises)."""
    forced = force_choice(algo, ("vec4", "words"))
    return forced == "words" if forced else default
