"""DDP whose ranks are started with ``torch.multiprocessing`` spawn."""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import Any, ClassVar

import torch

from ddpkit.plugins.environments._base import ClusterEnvironment
from ddpkit.plugins.training_type._base import plugin_call
from ddpkit.plugins.training_type._ddp_options import check_start_method
from ddpkit.plugins.training_type.ddp import DDPPlugin

__all__ = ["DDPSpawnPlugin"]


class DDPSpawnPlugin(DDPPlugin):
    """Like :class:`DDPPlugin`, but every rank is a fresh spawned process and the user's process
    only waits. Afterwards the user's model holds rank zero's trained weights, and the trainer
    holds rank zero's metrics and the return value of ``predict``.

    Works where there is no script to re-run (``python -c``, a module's function), at the price
    of pickling the module, the data loaders and the trainer into every rank. ``start_method``
    is ``"spawn"`` (a fresh interpreter per rank) or ``"forkserver"`` (ranks forked from a server
    process that has imported torch, ddpkit and the main module once, and outlives the launch:
    a later stage's ranks start without imports).
    """

    name: ClassVar[str] = "ddp_spawn"

    def __init__(
        self,
        parallel_devices: Sequence[torch.device | str] | None = None,
        num_nodes: int | None = None,
        cluster_environment: ClusterEnvironment | None = None,
        sync_batchnorm: bool | None = None,
        *,
        find_unused_parameters: bool = True,
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
        call = plugin_call(type(self).__name__, {"start_method": start_method})
        self.start_method = check_start_method(call, start_method)

    def __repr__(self) -> str:
        text = super().__repr__()
        if self.start_method != "spawn":
            text = f"{text[:-1]}, start_method={self.start_method!r})"
        return text
