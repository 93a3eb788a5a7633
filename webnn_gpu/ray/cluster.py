"""Joining a Ray cluster (or starting a local instance) and sizing a pool of actors on it."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

__all__ = ["require_ray", "connect", "ActorResources", "actor_resources"]

#: what ``--ray`` with no address means: a new Ray instance on this machine
LOCAL = "local"


def require_ray() -> Any:
    """The ``ray`` module.

    Raises:
        ModuleNotFoundError: Ray is not installed; the message names the extra to install.
    """
    try:
        import ray
        import ray.data  # noqa: F401  (the extra is ray[data])
    except ModuleNotFoundError as exc:
        raise ModuleNotFoundError(
            "webnn_gpu.ray needs Ray: pip install 'webnn-gpu[ray]'", name=exc.name
        ) from exc
    return ray


def connect(address: str | None = None, **init_options: Any) -> bool:
    """Join the Ray cluster at ``address``, or start a Ray instance on this machine.

    Nothing happens when Ray is already initialised in this process (e.g. by the caller's
    own ``ray.init``).

    Arguments:
        address (str | None): ``None`` or ``"local"``: a new local instance (no dashboard;
            its workers at normal priority, where Ray's default is nice 15);
            ``"auto"``: the cluster this machine belongs to (``ray start``); ``"HOST:PORT"``
            (the head's GCS address that ``ray start --head`` prints) or
            ``"ray://HOST:10001"`` (Ray Client).
        **init_options: passed to ``ray.init`` (e.g. ``num_cpus``, ``runtime_env``).

    Returns:
        bool: True when this call initialised Ray (the caller should ``ray.shutdown()``).

    Raises:
        ModuleNotFoundError: Ray is not installed.
        ConnectionError: no cluster answers at ``address``.
    """
    ray = require_ray()
    if ray.is_initialized():
        return False
    init_options.setdefault("logging_level", logging.WARNING)
    init_options.setdefault("configure_logging", True)
    if address in (None, "", LOCAL):
        init_options.setdefault("include_dashboard", False)
        # Ray runs workers at nice 15; here they are the job, not background work
        init_options.setdefault("_system_config", {"worker_niceness": 0})
        ray.init(**init_options)
    else:
        ray.init(address=address, **init_options)
    return True


@dataclass(frozen=True)
class ActorResources:
    """How many actors a job runs and what each asks Ray for.

    Attributes:
        actors (int): the pool size.
        num_gpus (float): GPUs per actor (1 on a cluster with GPUs, else 0).
        num_cpus (float): CPUs per actor (Ray's reservation).
        threads (int | None): ``LP_NUM_THREADS`` of an actor without a GPU: the cores of the
            cluster split among the actors (None with a GPU).
    """

    actors: int
    num_gpus: float
    num_cpus: float
    threads: int | None = None

    @property
    def software_threads(self) -> int | None:
        """``LP_NUM_THREADS`` for an actor without a GPU (None when it has one)."""
        return None if self.num_gpus else (self.threads or max(1, int(self.num_cpus)))

    def options(self) -> dict[str, float]:
        """The resource options of ``ray.remote`` / ``map_batches``."""
        out = {"num_cpus": self.num_cpus}
        if self.num_gpus:
            out["num_gpus"] = self.num_gpus
        return out


def actor_resources(
    actors: int | None = None,
    *,
    num_gpus: float | None = None,
    num_cpus: float | None = None,
    cpus_per_software_actor: int = 2,
    reserve_cpus: int = 0,
    work_items: int | None = None,
) -> ActorResources:
    """Size a pool of actors on the connected cluster.

    With GPUs in the cluster each actor takes one (``num_gpus=1``, ``num_cpus=1`` for
    decoding and encoding) and the pool has one actor per GPU. Without, each actor takes
    ``num_cpus`` cores (default ``cpus_per_software_actor``, or the cluster's cores split
    among ``actors`` when that is given), and lavapipe renders with the cluster's cores
    split among the actors.

    Arguments:
        actors (int | None): the pool size; default as above.
        num_gpus (float | None): GPUs per actor; default 1 if the cluster has GPUs, else 0.
        num_cpus (float | None): CPUs per actor; default as above.
        cpus_per_software_actor (int): CPUs per actor without a GPU when neither ``actors``
            nor ``num_cpus`` is given.
        reserve_cpus (int): CPUs the actors leave free for other tasks of the job (Ray
            Data's reading and decoding tasks need one, or the pipeline stalls).
        work_items (int | None): no more actors than this (a pool larger than the work idles).

    Returns:
        ActorResources

    Raises:
        ValueError: a non-positive ``actors`` or ``num_cpus``, or a negative ``num_gpus``.
    """
    ray = require_ray()
    total = ray.cluster_resources()
    cluster_gpus = float(total.get("GPU", 0))
    cluster_cpus = float(total.get("CPU", 1))
    if actors is not None and int(actors) < 1:
        raise ValueError(f"actors must be >= 1, given {actors!r}")
    if num_cpus is not None and not num_cpus > 0:
        raise ValueError(f"num_cpus must be > 0, given {num_cpus!r}")
    if num_gpus is None:
        num_gpus = 1.0 if cluster_gpus >= 1 else 0.0
    if num_gpus < 0:
        raise ValueError(f"num_gpus must be >= 0, given {num_gpus!r}")
    usable = max(1.0, cluster_cpus - max(0, int(reserve_cpus)))
    if num_gpus:
        if actors is None:
            actors = max(1, int(cluster_gpus // num_gpus))
        if num_cpus is None:
            num_cpus = 1.0
    else:
        if num_cpus is None:
            if actors is None:
                num_cpus = float(max(1, min(cpus_per_software_actor, int(usable))))
            else:
                num_cpus = float(max(1, int(usable // int(actors))))
        if actors is None:
            actors = max(1, int(usable // num_cpus))
    actors = int(actors)
    if work_items is not None:
        actors = max(1, min(actors, int(work_items)))
    threads = None if num_gpus else max(1, int(cluster_cpus // actors))
    return ActorResources(actors, float(num_gpus), float(num_cpus), threads)
