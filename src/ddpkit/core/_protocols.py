"""What the core needs to know of a trainer, without importing one (``ddpkit.trainer`` sits
above ``ddpkit.core``; the trainer satisfies these protocols structurally)."""

from __future__ import annotations

from typing import Any, Protocol

import torch


class MetricSink(Protocol):
    """Where ``Module.log`` records a value (the loop's metric store)."""

    def log(
        self,
        name: str,
        value: Any,
        *,
        prog_bar: bool,
        logger: bool,
        on_step: bool | None,
        on_epoch: bool | None,
        sync_dist: bool,
        reduce_fx: str,
        batch_size: int | None,
    ) -> None: ...


class TrainerProtocol(Protocol):
    """The trainer a module is attached to, as the module sees it."""

    @property
    def global_rank(self) -> int: ...
    @property
    def local_rank(self) -> int: ...
    @property
    def world_size(self) -> int: ...
    @property
    def is_global_zero(self) -> bool: ...
    @property
    def root_device(self) -> torch.device: ...
    @property
    def current_epoch(self) -> int: ...
    @property
    def global_step(self) -> int: ...
    @property
    def logger(self) -> Any: ...
    @property
    def loggers(self) -> list[Any]: ...
    @property
    def optimizers(self) -> list[torch.optim.Optimizer]: ...
    @property
    def lr_scheduler_configs(self) -> list[Any]: ...
    @property
    def gradient_clip_val(self) -> float | None: ...
    @property
    def gradient_clip_algorithm(self) -> str | None: ...
    @property
    def metric_store(self) -> MetricSink: ...
