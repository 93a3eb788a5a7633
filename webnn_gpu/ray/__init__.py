"""webnn_gpu.ray: WebNN inference and the blur demo over a Ray cluster (the ``[ray]`` extra).

* :class:`ModelPredictor`: the callable class for ``ray.data.Dataset.map_batches``: one
  ``MLContext`` and one loaded model per actor, built once::

      ds = webnn_gpu.ray.read_images("photos/", size=(256, 256))
      out = ds.map_batches(ModelPredictor, fn_constructor_kwargs={"model": model_bytes},
                           batch_size=16, compute=ray.data.ActorPoolStrategy(size=4),
                           **actor_resources(4, reserve_cpus=1).options())  # a CPU for the reads

* :func:`read_images`, :func:`read_video_frames`, :func:`write_results`: Datasets in and out.
* :func:`blur_videos`, :class:`BlurPool`: the background blur over many videos, one video
  per actor at a time (``webnn-gpu blur IN_DIR -o OUT_DIR --ray``).
* :func:`select_adapter`: each actor's wgpu adapter (Vulkan ignores ``CUDA_VISIBLE_DEVICES``).
* :func:`connect`, :func:`actor_resources`: join a cluster or start a local one; size a pool.

Importing this package does not import Ray; the functions that need it raise
``ModuleNotFoundError`` naming the extra. See docs/scale.md.
"""

from __future__ import annotations

from .adapter import describe, select_adapter, set_software_threads
from .cluster import ActorResources, actor_resources, connect, require_ray
from .inference import ModelPredictor, read_images, read_video_frames, run_model, write_results
from .videos import BlurPool, BlurReport, VideoBlurWorker, VideoResult, blur_videos, find_videos

__all__ = [
    "ModelPredictor",
    "read_images",
    "read_video_frames",
    "write_results",
    "run_model",
    "blur_videos",
    "BlurPool",
    "BlurReport",
    "VideoResult",
    "VideoBlurWorker",
    "find_videos",
    "select_adapter",
    "set_software_threads",
    "describe",
    "connect",
    "actor_resources",
    "ActorResources",
    "require_ray",
]
