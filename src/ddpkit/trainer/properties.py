"""The Trainer's read-only properties (Lightning's names): the plan's objects and ranks, the
loop's configuration, and what the loop owns (counters, metrics, callbacks, loggers)."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

import torch
from torch import nn

from ddpkit.accelerators.base import Accelerator
from ddpkit.connector import AcceleratorConnector
from ddpkit.plugins.environments.base import ClusterEnvironment
from ddpkit.plugins.precision.base import PrecisionPlugin
from ddpkit.plugins.training_type.base import TrainingTypePlugin
from ddpkit.trainer.config import LoopConfig
from ddpkit.trainer.metrics import MetricStore
from ddpkit.trainer.optim import SchedulerConfig
from ddpkit.trainer.state import LoopState, TrainerState

__all__ = ["ConfigProperties", "ConnectorProperties", "LoopProperties"]


class ConnectorProperties:
    """What the accelerator connector resolved and built."""

    _accelerator_connector: AcceleratorConnector

    @property
    def accelerator_connector(self) -> AcceleratorConnector:
        return self._accelerator_connector

    @property
    def accelerator(self) -> Accelerator:
        return self._accelerator_connector.built.accelerator

    @property
    def training_type_plugin(self) -> TrainingTypePlugin:
        return self._accelerator_connector.built.training_type

    @property
    def strategy(self) -> TrainingTypePlugin:
        return self._accelerator_connector.built.training_type

    @property
    def precision_plugin(self) -> PrecisionPlugin:
        return self._accelerator_connector.built.precision_plugin

    @property
    def precision(self) -> str:
        return self.precision_plugin.precision

    @property
    def cluster_environment(self) -> ClusterEnvironment:
        return self._accelerator_connector.built.cluster_environment

    @property
    def num_nodes(self) -> int:
        return self.training_type_plugin.num_nodes

    @property
    def num_processes(self) -> int:
        """Processes per node."""
        return self.training_type_plugin.num_processes

    @property
    def num_devices(self) -> int:
        return len(self.training_type_plugin.parallel_devices)

    @property
    def device_ids(self) -> list[int]:
        return list(self._accelerator_connector.plan.devices.value)

    @property
    def world_size(self) -> int:
        return self.training_type_plugin.world_size

    @property
    def root_device(self) -> torch.device:
        return self.training_type_plugin.root_device

    @property
    def global_rank(self) -> int:
        return self.training_type_plugin.global_rank

    @property
    def local_rank(self) -> int:
        return self.training_type_plugin.local_rank

    @property
    def node_rank(self) -> int:
        return self.training_type_plugin.node_rank

    @property
    def is_global_zero(self) -> bool:
        return self.training_type_plugin.is_global_zero


class ConfigProperties:
    """The loop keywords, as resolved (``Trainer(max_epochs=None).max_epochs == 1000``)."""

    _config: LoopConfig
    _state: LoopState

    @property
    def max_epochs(self) -> int:
        return self._config.max_epochs

    @property
    def min_epochs(self) -> int:
        return self._config.min_epochs

    @property
    def max_steps(self) -> int:
        return self._config.max_steps

    @property
    def min_steps(self) -> int:
        return self._config.min_steps

    @property
    def max_time(self) -> timedelta | None:
        return self._config.max_time

    @property
    def overfit_batches(self) -> int | float:
        return self._config.overfit_batches

    @property
    def val_check_interval(self) -> int | float:
        return self._config.val_check_interval

    @property
    def check_val_every_n_epoch(self) -> int | None:
        return self._config.check_val_every_n_epoch

    @property
    def num_sanity_val_steps(self) -> int:
        return self._config.num_sanity_val_steps

    @property
    def log_every_n_steps(self) -> int:
        return self._config.log_every_n_steps

    @property
    def enable_checkpointing(self) -> bool:
        return self._config.enable_checkpointing

    @property
    def enable_progress_bar(self) -> bool:
        return self._config.enable_progress_bar

    @property
    def enable_model_summary(self) -> bool:
        return self._config.enable_model_summary

    @property
    def gradient_clip_val(self) -> float | None:
        return self._config.gradient_clip_val

    @property
    def gradient_clip_algorithm(self) -> str | None:
        return self._config.gradient_clip_algorithm

    @property
    def deterministic(self) -> bool | str:
        return self._config.deterministic

    @property
    def benchmark(self) -> bool | None:
        return self._config.benchmark

    @property
    def inference_mode(self) -> bool:
        return self._config.inference_mode

    @property
    def use_distributed_sampler(self) -> bool:
        return self._config.use_distributed_sampler

    @property
    def detect_anomaly(self) -> bool:
        return self._config.detect_anomaly

    @property
    def barebones(self) -> bool:
        return self._config.barebones

    @property
    def reload_dataloaders_every_n_epochs(self) -> int:
        return self._config.reload_dataloaders_every_n_epochs

    @property
    def default_root_dir(self) -> str:
        return self._config.default_root_dir

    @property
    def limit_train_batches(self) -> int | float:
        found = self._config.limit_train_batches
        return 1.0 if found is None else found

    @property
    def limit_val_batches(self) -> int | float:
        found = self._config.limit_val_batches
        return 1.0 if found is None else found

    @property
    def limit_test_batches(self) -> int | float:
        found = self._config.limit_test_batches
        return 1.0 if found is None else found

    @property
    def limit_predict_batches(self) -> int | float:
        found = self._config.limit_predict_batches
        return 1.0 if found is None else found

    @property
    def accumulate_grad_batches(self) -> int:
        return self._config.accumulation(self._state.current_epoch)

    @property
    def fast_dev_run(self) -> int | bool:
        n = self._config.fast_dev_run
        return True if n == 1 else n

    @property
    def val_check_batch(self) -> int | float:
        interval = self._config.val_check_interval
        if isinstance(interval, int):
            return interval
        n = self._state.num_training_batches
        return math.inf if n == math.inf else max(1, int(n * interval))


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
