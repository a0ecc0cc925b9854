"""DDP whose ranks are started with ``torch.multiprocessing`` spawn."""

from __future__ import annotations

import datetime
from typing import Any, ClassVar

import torch

from ddpkit.plugins.environments.base import ClusterEnvironment
from ddpkit.plugins.training_type.ddp import DDPPlugin

__all__ = ["DDPSpawnPlugin"]


class DDPSpawnPlugin(DDPPlugin):
    """Like :class:`DDPPlugin`, but every rank is a fresh spawned process and the user's process
    only waits. Afterwards the user's model holds rank zero's trained weights, and the trainer
    holds rank zero's metrics and the return value of ``predict`` (rank-ordered).

    Works where there is no script to re-run (notebooks, ``python -c``), at the price of pickling
    the module, the data loaders and the trainer into every rank.
    """

    name: ClassVar[str] = "ddp_spawn"
    launcher_name: ClassVar[str] = "spawn"

    def __init__(
        self,
        parallel_devices: list[torch.device] | None = None,
        num_nodes: int | None = None,
        cluster_environment: ClusterEnvironment | None = None,
        sync_batchnorm: bool | None = None,
        *,
        find_unused_parameters: bool = False,
        static_graph: bool = False,
        gradient_as_bucket_view: bool = False,
        timeout: datetime.timedelta | float | None = None,
        process_group_backend: str | None = None,
        start_method: str = "spawn",
        **ddp_kwargs: Any,
    ) -> None:
        super().__init__(
            parallel_devices,
            num_nodes,
            cluster_environment,
            sync_batchnorm,
            find_unused_parameters=find_unused_parameters,
            static_graph=static_graph,
            gradient_as_bucket_view=gradient_as_bucket_view,
            timeout=timeout,
            process_group_backend=process_group_backend,
            **ddp_kwargs,
        )
        self.start_method = start_method
