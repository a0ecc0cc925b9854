"""The Trainer's properties for what the loop owns (Lightning's names): counters, the stage,
metrics, the module, optimizers, callbacks and loggers."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ddpkit.trainer.config import LoopConfig
from ddpkit.trainer.metrics import MetricStore
from ddpkit.trainer.optim import SchedulerConfig
from ddpkit.trainer.state import LoopState, TrainerState

__all__ = ["LoopProperties"]


class LoopProperties:
    """What the loop owns, read-only (``should_stop`` can be set)."""

    _config: LoopConfig
    _state: LoopState

    # -- state ---------------------------------------------------------------------------------

    @property
    def state(self) -> TrainerState:
        return self._state.status

    @property
    def current_epoch(self) -> int:
        return self._state.current_epoch

    @property
    def global_step(self) -> int:
        return self._state.global_step

    @property
    def should_stop(self) -> bool:
        return self._state.should_stop

    @should_stop.setter
    def should_stop(self, value: bool) -> None:
        self._state.should_stop = bool(value)

    @property
    def sanity_checking(self) -> bool:
        return self._state.status.stage == "sanity_check"

    @property
    def training(self) -> bool:
        return self._state.status.stage == "train"

    @property
    def validating(self) -> bool:
        return self._state.status.stage == "validate"

    @property
    def testing(self) -> bool:
        return self._state.status.stage == "test"

    @property
    def predicting(self) -> bool:
        return self._state.status.stage == "predict"

    @property
    def interrupted(self) -> bool:
        return self._state.status.status == "interrupted"

    @property
    def is_last_batch(self) -> bool:
        return self._state.is_last_batch

    @property
    def lightning_module(self) -> nn.Module | None:
        """The module of the latest stage (Lightning's name)."""
        return self._state.model

    model = lightning_module

    @property
    def datamodule(self) -> Any:
        return self._state.datamodule

    @property
    def ckpt_path(self) -> str | None:
        """The checkpoint the latest stage loaded."""
        return self._state.ckpt_path

    @property
    def optimizers(self) -> list[torch.optim.Optimizer]:
        return self._state.optimizers

    @property
    def lr_scheduler_configs(self) -> list[SchedulerConfig]:
        return self._state.lr_scheduler_configs

    @property
    def lr_schedulers(self) -> list[Any]:
        """The schedulers themselves (1.x's name; 2.x has ``lr_scheduler_configs``)."""
        return [config.scheduler for config in self._state.lr_scheduler_configs]

    @property
    def num_training_batches(self) -> int | float:
        return self._state.num_training_batches

    @property
    def num_val_batches(self) -> list[int | float]:
        return self._state.num_val_batches

    @property
    def num_sanity_val_batches(self) -> list[int | float]:
        return self._state.num_sanity_val_batches

    @property
    def num_test_batches(self) -> list[int | float]:
        return self._state.num_test_batches

    @property
    def num_predict_batches(self) -> list[int | float]:
        return self._state.num_predict_batches

    # -- metrics -------------------------------------------------------------------------------

    @property
    def metric_store(self) -> MetricStore:
        """Where ``Module.log`` records values."""
        return self._state.metrics

    @property
    def callback_metrics(self) -> dict[str, torch.Tensor]:
        return self._state.metrics.callback_metrics

    @property
    def logged_metrics(self) -> dict[str, torch.Tensor]:
        return self._state.metrics.logged_metrics

    @property
    def progress_bar_metrics(self) -> dict[str, float]:
        return self._state.metrics.progress_bar_metrics

    # -- callbacks and loggers -----------------------------------------------------------------

    @property
    def callbacks(self) -> list[Any]:
        return self._state.callbacks

    @property
    def checkpoint_callbacks(self) -> list[Any]:
        return [cb for cb in self._state.callbacks if _named(cb, "ModelCheckpoint")]

    @property
    def checkpoint_callback(self) -> Any:
        """The first ``ModelCheckpoint`` (None without one)."""
        found = self.checkpoint_callbacks
        return found[0] if found else None

    @property
    def early_stopping_callbacks(self) -> list[Any]:
        return [cb for cb in self._state.callbacks if _named(cb, "EarlyStopping")]

    @property
    def early_stopping_callback(self) -> Any:
        found = self.early_stopping_callbacks
        return found[0] if found else None

    @property
    def checkpoint_path(self) -> str | None:
        """ddpkit's shorthand: the latest file the first ``ModelCheckpoint`` wrote (its
        ``last_model_path`` with ``save_last``, else its ``best_model_path``), or None."""
        callback = self.checkpoint_callback
        if callback is None:
            return None
        return callback.last_model_path or callback.best_model_path or None

    @property
    def loggers(self) -> list[Any]:
        return self._state.loggers

    @property
    def logger(self) -> Any:
        """The first logger (None without one)."""
        return self._state.loggers[0] if self._state.loggers else None

    @property
    def log_dir(self) -> str:
        """The first logger's ``log_dir`` (``save_dir`` when it has none), else
        ``default_root_dir``."""
        logger = self.logger
        if logger is None:
            return self._config.default_root_dir
        return str(
            getattr(logger, "log_dir", None) or logger.save_dir or self._config.default_root_dir
        )


def _named(callback: Any, name: str) -> bool:
    return any(cls.__name__ == name for cls in type(callback).__mro__)
