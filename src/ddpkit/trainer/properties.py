"""The Trainer's read-only properties (Lightning's names): the plan's objects and ranks, and the
loop's configuration (``loop_properties.py`` has what the loop owns)."""

from __future__ import annotations

import math
from datetime import timedelta

import torch

from ddpkit.accelerators._base import Accelerator
from ddpkit.connector import AcceleratorConnector
from ddpkit.errors import MisconfigurationError
from ddpkit.plugins.environments._base import ClusterEnvironment
from ddpkit.plugins.precision._base import PrecisionPlugin
from ddpkit.plugins.training_type._base import TrainingTypePlugin
from ddpkit.trainer.config import LoopConfig
from ddpkit.trainer.state import LoopState

__all__ = ["ConfigProperties", "ConnectorProperties"]


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
    def min_epochs(self) -> int | None:
        """None until a fit ran unless given (Lightning's), then the fit's minimum (0)."""
        if self._config.min_epochs_given is None and not self._state.fitted:
            return None
        return self._config.min_epochs

    @property
    def max_steps(self) -> int:
        return self._config.max_steps

    @property
    def min_steps(self) -> int | None:
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
    def num_sanity_val_steps(self) -> int | float:
        """Lightning's: ``inf`` for -1 (the whole loader)."""
        steps = self._config.num_sanity_val_steps
        return math.inf if steps == -1 else steps

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
    def enable_autolog_hparams(self) -> bool:
        return self._config.enable_autolog_hparams

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
    def estimated_stepping_batches(self) -> int | float:
        """The optimizer steps ``fit`` will take (Lightning's estimate: batches per epoch over
        ``accumulate_grad_batches``, times ``max_epochs``, at most ``max_steps``), e.g. for a
        ``OneCycleLR`` in ``configure_optimizers``; it makes the training loader if the fit has
        not yet."""
        config = self._config
        if config.max_epochs == -1:
            return math.inf if config.max_steps == -1 else config.max_steps
        estimate = self._state.training_batches
        if estimate is None and not self._state.fitted:
            raise MisconfigurationError(
                "trainer.estimated_stepping_batches before any fit: ddpkit counts the training "
                "batches of a fit. Fix: read it in configure_optimizers (or another hook of fit)."
            )
        total = estimate() if estimate is not None else self._state.num_training_batches
        if total == math.inf:
            return config.max_steps
        steps = math.ceil(total / config.accumulation(0)) * max(config.max_epochs, 1)
        return min(steps, config.max_steps) if config.max_steps != -1 else steps

    @property
    def accumulate_grad_batches(self) -> int:
        return self._config.accumulation(self._state.current_epoch)

    @property
    def fast_dev_run(self) -> int | bool:
        n = self._config.fast_dev_run
        return True if n == 1 else n

    @property
    def val_check_batch(self) -> int | float | None:
        """Validate every this many training batches: set when ``fit`` knows the epoch's length
        (None before, as in Lightning)."""
        return self._state.val_check_batch
