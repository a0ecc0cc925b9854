"""``Trainer``: the flags in, a plan resolved, and fit / validate / test / predict."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ddpkit.__about__ import __version__
from ddpkit.accelerators.base import Accelerator
from ddpkit.connector import AcceleratorConnector, Flags
from ddpkit.errors import DDPKitDeprecationWarning, MisconfigurationError
from ddpkit.plugins.environments.base import ClusterEnvironment
from ddpkit.plugins.precision.base import PrecisionPlugin
from ddpkit.plugins.training_type.base import TrainingTypePlugin
from ddpkit.trainer.checkpoint import atomic_save, load_checkpoint
from ddpkit.trainer.csv_logger import CSVLogger
from ddpkit.trainer.loop import StageOutput, run_stage
from ddpkit.trainer.metrics import MetricStore
from ddpkit.trainer.optim import SchedulerConfig
from ddpkit.trainer.progress import ProgressBar
from ddpkit.utilities.rank_zero import rank_zero_warn

__all__ = ["Trainer"]


class Trainer:
    """Train a module on one CPU, many CPU processes, GPUs or a cluster — chosen by flags.

    Device flags (see ``docs/flags.md`` for what each combination resolves to): ``accelerator``,
    ``strategy``, ``devices``, ``num_nodes``, ``precision``, ``plugins``, ``sync_batchnorm`` and
    the legacy ``gpus`` and ``num_processes``. Building a Trainer starts no process, opens no port
    and does not initialize CUDA; ``ddpkit explain`` prints the same plan without Python.
    """

    def __init__(
        self,
        *,
        accelerator: str | Accelerator | None = None,
        strategy: str | TrainingTypePlugin | None = None,
        devices: int | str | list[int] | None = None,
        num_nodes: int = 1,
        precision: int | str = "32-true",
        plugins: Any = None,
        sync_batchnorm: bool = False,
        gpus: int | str | list[int] | None = None,
        num_processes: int | None = None,
        max_epochs: int | None = None,
        max_steps: int = -1,
        limit_train_batches: int | float | None = None,
        limit_val_batches: int | float | None = None,
        limit_test_batches: int | float | None = None,
        limit_predict_batches: int | float | None = None,
        check_val_every_n_epoch: int = 1,
        val_check_interval: int | float | None = None,
        accumulate_grad_batches: int = 1,
        gradient_clip_val: float | None = None,
        num_sanity_val_steps: int = 2,
        default_root_dir: str | os.PathLike[str] | None = None,
        enable_progress_bar: bool = True,
        enable_checkpointing: bool = True,
        logger: bool = True,
        log_every_n_steps: int = 50,
        deterministic: bool = False,
        fast_dev_run: bool | int = False,
        use_distributed_sampler: bool = True,
        replace_sampler_ddp: bool | None = None,
    ) -> None:
        self._accelerator_connector = AcceleratorConnector(
            Flags.of(
                accelerator=accelerator,
                strategy=strategy,
                devices=devices,
                gpus=gpus,
                num_processes=num_processes,
                num_nodes=num_nodes,
                plugins=plugins,
                precision=precision,
                sync_batchnorm=sync_batchnorm,
            )
        )
        if replace_sampler_ddp is not None:
            rank_zero_warn(
                f"Trainer(replace_sampler_ddp={replace_sampler_ddp}) is deprecated; "
                f"the same, spelled today: Trainer(use_distributed_sampler={replace_sampler_ddp}).",
                DDPKitDeprecationWarning,
            )
            use_distributed_sampler = replace_sampler_ddp
        if accumulate_grad_batches < 1:
            raise MisconfigurationError(
                f"Trainer(accumulate_grad_batches={accumulate_grad_batches}): must be ≥ 1."
            )
        if check_val_every_n_epoch < 1:
            raise MisconfigurationError(
                f"Trainer(check_val_every_n_epoch={check_val_every_n_epoch}): must be ≥ 1."
            )
        if fast_dev_run:
            n = 1 if fast_dev_run is True else int(fast_dev_run)
            if n < 1:
                raise MisconfigurationError(f"Trainer(fast_dev_run={fast_dev_run}): must be ≥ 1.")
            max_epochs, max_steps = 1, n
            limit_train_batches = limit_val_batches = n
            limit_test_batches = limit_predict_batches = n
            num_sanity_val_steps, enable_checkpointing, logger = 0, False, False
        self.max_epochs = max_epochs if max_epochs is not None else (1000 if max_steps < 0 else -1)
        self.max_steps = max_steps
        self.limit_train_batches = limit_train_batches
        self.limit_val_batches = limit_val_batches
        self.limit_test_batches = limit_test_batches
        self.limit_predict_batches = limit_predict_batches
        self.check_val_every_n_epoch = check_val_every_n_epoch
        self.val_check_interval = val_check_interval
        self.accumulate_grad_batches = accumulate_grad_batches
        self.gradient_clip_val = gradient_clip_val
        self.num_sanity_val_steps = num_sanity_val_steps
        self.default_root_dir = str(default_root_dir or os.getcwd())
        self.enable_progress_bar = enable_progress_bar
        self.enable_checkpointing = enable_checkpointing
        self.log_every_n_steps = max(1, log_every_n_steps)
        self.deterministic = deterministic
        self.use_distributed_sampler = use_distributed_sampler
        self.current_epoch = 0
        self.global_step = 0
        self.checkpoint_path: str | None = None
        self.should_stop = False
        self._metrics = MetricStore()
        self._csv = CSVLogger(self.default_root_dir) if logger else None
        self._progress = ProgressBar(False)
        self._current_model: nn.Module | None = None
        self._current_optim: tuple[list[torch.optim.Optimizer], list[SchedulerConfig]] = ([], [])

    # -- the public surface of the connector ---------------------------------------------------

    @property
    def accelerator_connector(self) -> AcceleratorConnector:
        return self._accelerator_connector

    @property
    def accelerator(self) -> Accelerator:
        return self._accelerator_connector.built.accelerator

    @property
    def training_type_plugin(self) -> TrainingTypePlugin:
        return self._accelerator_connector.built.training_type

    strategy = training_type_plugin

    @property
    def precision_plugin(self) -> PrecisionPlugin:
        return self._accelerator_connector.built.precision_plugin

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

    @property
    def callback_metrics(self) -> dict[str, torch.Tensor]:
        return self._metrics.callback_metrics

    @property
    def logged_metrics(self) -> dict[str, torch.Tensor]:
        return self._metrics.logged_metrics

    @property
    def progress_bar_metrics(self) -> dict[str, float]:
        return self._metrics.progress_bar_metrics

    # -- stages -------------------------------------------------------------------------------

    def fit(
        self,
        model: nn.Module,
        train_dataloaders: Any = None,
        val_dataloaders: Any = None,
        ckpt_path: str | os.PathLike[str] | None = None,
        *,
        weights_only: bool = True,
    ) -> None:
        """Train. ``ckpt_path`` resumes from a checkpoint (weights, optimizers, schedulers,
        epoch and step); it is loaded with ``torch.load(weights_only=True)``, which refuses to
        run code hidden in the file; ``weights_only=False`` loads a checkpoint you trust that
        holds other objects."""
        self._launch("fit", model, (train_dataloaders, val_dataloaders), ckpt_path, weights_only)

    def validate(
        self,
        model: nn.Module,
        dataloaders: Any = None,
        ckpt_path: str | os.PathLike[str] | None = None,
        *,
        weights_only: bool = True,
    ) -> list[dict[str, float]]:
        return self._launch(  # type: ignore[no-any-return]
            "validate", model, (dataloaders, None), ckpt_path, weights_only
        )

    def test(
        self,
        model: nn.Module,
        dataloaders: Any = None,
        ckpt_path: str | os.PathLike[str] | None = None,
        *,
        weights_only: bool = True,
    ) -> list[dict[str, float]]:
        return self._launch(  # type: ignore[no-any-return]
            "test", model, (dataloaders, None), ckpt_path, weights_only
        )

    def predict(self, model: nn.Module, dataloaders: Any = None) -> list[Any]:
        return self._launch("predict", model, (dataloaders, None), None)  # type: ignore[no-any-return]

    def _launch(
        self,
        stage: str,
        model: nn.Module,
        loaders: tuple[Any, Any],
        ckpt_path: str | os.PathLike[str] | None,
        weights_only: bool = True,
    ) -> Any:
        if not isinstance(model, nn.Module):
            raise MisconfigurationError(
                f"Trainer.{stage}(model=<{type(model).__name__}>): pass a torch.nn.Module "
                f"(ddpkit.Module or any module with the hooks)."
            )
        launcher = self._accelerator_connector.built.launcher
        spawn = launcher is not None and launcher.returns_to_parent
        ckpt = str(ckpt_path) if ckpt_path is not None else None
        args = (stage, model, loaders, ckpt, spawn, weights_only)
        if launcher is None:
            output: StageOutput = self._run_stage(*args)
        else:
            output = launcher.launch(self._run_stage, *args)
        if spawn and output is not None:
            self._adopt(model, output)
        return output.result if output is not None else None

    def _run_stage(
        self,
        stage: str,
        model: nn.Module,
        loaders: tuple[Any, Any],
        ckpt_path: str | None,
        return_state: bool,
        weights_only: bool = True,
    ) -> StageOutput:
        self.should_stop = False
        self._progress = ProgressBar(self.enable_progress_bar and self.is_global_zero)
        return run_stage(
            self, stage, model, loaders, ckpt_path, return_state, weights_only=weights_only
        )

    def _adopt(self, model: nn.Module, output: StageOutput) -> None:
        """Spawn: the parent takes rank zero's weights, metrics and counters."""
        if output.state_dict is not None:
            model.load_state_dict(output.state_dict)
        self._current_model = model
        self._metrics.callback_metrics = output.callback_metrics
        self._metrics.logged_metrics = output.logged_metrics
        self.current_epoch = output.current_epoch
        self.global_step = output.global_step
        if output.checkpoint_path is not None:
            self.checkpoint_path = output.checkpoint_path

    # -- used by the loop ---------------------------------------------------------------------

    def _should_stop(self) -> bool:
        return self.should_stop or (0 <= self.max_steps <= self.global_step)

    def _log_step_row(self) -> None:
        pending = self._metrics.pending_step_row
        if (
            pending
            and self._csv is not None
            and self.is_global_zero
            and (self.global_step % self.log_every_n_steps == 0)
        ):
            self._csv.log({"epoch": self.current_epoch, "step": self.global_step, **pending})
        pending.clear()

    def _log_row(self, values: dict[str, float]) -> None:
        if values and self._csv is not None and self.is_global_zero:
            self._csv.log({"epoch": self.current_epoch, "step": self.global_step, **values})

    def _flush_logs(self) -> None:
        if self._csv is not None and self.is_global_zero:
            self._csv.flush()

    # -- checkpoints --------------------------------------------------------------------------

    def _checkpoint(
        self,
        model: nn.Module,
        optimizers: list[torch.optim.Optimizer],
        schedulers: list[SchedulerConfig],
    ) -> dict[str, Any]:
        return {
            "ddpkit_version": __version__,
            "epoch": self.current_epoch,
            "global_step": self.global_step,
            "state_dict": model.state_dict(),
            "optimizer_states": [o.state_dict() for o in optimizers],
            "lr_schedulers": [c.scheduler.state_dict() for c in schedulers],
            "precision": self.precision_plugin.state_dict(),
        }

    def save_checkpoint(self, path: str | os.PathLike[str], model: nn.Module | None = None) -> None:
        """Write model (and, during fit, optimizer and scheduler) state on global rank zero,
        atomically; the other ranks wait for it."""
        target = model if model is not None else self._current_model
        if target is None:
            raise MisconfigurationError(
                "Trainer.save_checkpoint(path): no model yet. Call it during or after fit, or "
                "pass model=..."
            )
        optimizers, schedulers = self._current_optim
        if self.is_global_zero:
            atomic_save(self._checkpoint(target, optimizers, schedulers), path)
        self.training_type_plugin.barrier("save_checkpoint")

    def _save_default_checkpoint(
        self,
        model: nn.Module,
        optimizers: list[torch.optim.Optimizer],
        schedulers: list[SchedulerConfig],
    ) -> Path:
        path = (
            Path(self.default_root_dir)
            / "checkpoints"
            / f"epoch={max(self.current_epoch - 1, 0)}-step={self.global_step}.ckpt"
        )
        if self.is_global_zero:
            atomic_save(self._checkpoint(model, optimizers, schedulers), path)
        self.training_type_plugin.barrier("checkpoint")
        return path

    def _restore(
        self,
        path: str,
        model: nn.Module,
        optimizers: list[torch.optim.Optimizer],
        schedulers: list[SchedulerConfig],
        weights_only_model: bool = False,
        *,
        weights_only: bool = True,
    ) -> int:
        """Load a checkpoint into the model (and optimizers); return the epoch to start at.
        ``weights_only_model``: the model's weights and nothing else (validate / test);
        ``weights_only``: ``torch.load``'s safe loading (see :meth:`fit`)."""
        data = load_checkpoint(path, weights_only=weights_only)
        model.load_state_dict(data["state_dict"])
        if weights_only_model:
            return 0
        for opt, state in zip(optimizers, data.get("optimizer_states", [])):
            opt.load_state_dict(state)
        for config, state in zip(schedulers, data.get("lr_schedulers", [])):
            config.scheduler.load_state_dict(state)
        self.precision_plugin.load_state_dict(data.get("precision", {}))
        self.global_step = int(data["global_step"])
        self.current_epoch = int(data["epoch"])
        return self.current_epoch

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_progress"] = ProgressBar(False)
        state["_current_model"] = None  # the model travels as an argument of its own
        state["_current_optim"] = ([], [])
        return state
