"""What the core needs to know of a trainer, without importing one (``ddpkit.trainer`` sits
above ``ddpkit.core``; the trainer satisfies these protocols structurally)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Protocol

import torch

if TYPE_CHECKING:
    from ddpkit.plugins.training_type._base import TrainingTypePlugin


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
    def metric_store(self) -> MetricSink: ...


class StageStatus(Protocol):
    """``trainer.state`` as callbacks read it: the running entry point."""

    @property
    def fn(self) -> str | None: ...


class CallbackTrainer(TrainerProtocol, Protocol):
    """The trainer ddpkit's own callbacks receive: what they read of it, and ``should_stop``,
    which they set. ``ddpkit.Trainer`` satisfies it (the loop hands it to hooks as one)."""

    should_stop: bool

    @property
    def strategy(self) -> TrainingTypePlugin: ...
    @property
    def state(self) -> StageStatus: ...
    @property
    def fast_dev_run(self) -> int | bool: ...
    @property
    def sanity_checking(self) -> bool: ...
    @property
    def default_root_dir(self) -> str: ...
    @property
    def callback_metrics(self) -> dict[str, torch.Tensor]: ...
    @property
    def check_val_every_n_epoch(self) -> int | None: ...
    @property
    def val_check_interval(self) -> int | float: ...
    @property
    def num_val_batches(self) -> list[int | float]: ...
    @property
    def log_every_n_steps(self) -> int: ...
    @property
    def accumulate_grad_batches(self) -> int: ...
    @property
    def is_last_batch(self) -> bool: ...

    def save_checkpoint(
        self,
        filepath: str | os.PathLike[str],
        weights_only: bool = False,
        storage_options: Any = None,
        *,
        barrier: bool = True,
    ) -> None: ...
