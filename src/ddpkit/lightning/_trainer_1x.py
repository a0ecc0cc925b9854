"""The attributes of Lightning 1.x's ``Trainer`` that Lightning 2.x removed, read from the
running 2.x Trainer and the call as written (:class:`OneXAttributes`, a base of
``ddpkit.lightning.Trainer``).

1.x code reads them in its hooks (``self.trainer.gpus``, ``trainer.lr_schedulers``,
``self.trainer.running_sanity_check``, ``trainer.progress_bar_dict``); each answers what 1.x's
answered for the same run. A 1.x attribute ddpkit does not provide (the 1.x Trainer's internals:
``accelerator_connector``, ``train_loop``, ...) raises
:class:`~ddpkit.errors.LightningRemovedAttributeError` with the fix or the reason, as the 1.x
surface table says.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import pytorch_lightning as pl
from pytorch_lightning.strategies import DDPStrategy, ParallelStrategy

from ddpkit.lightning import _surface
from ddpkit.lightning._module import one_x_precision

#: 1.x Trainer keywords whose value 1.x kept as an attribute of that name, with 1.x's default.
_KEPT = {
    "auto_lr_find": False,
    "auto_scale_batch_size": False,
    "flush_logs_every_n_steps": 100,
    "move_metrics_to_cpu": False,
    "prepare_data_per_node": True,
    "resume_from_checkpoint": None,
    "terminate_on_nan": False,
    "track_grad_norm": -1,
    "weights_summary": "top",
}


def _kept(name: str) -> property:
    def read(self: OneXAttributes) -> Any:
        return self._given_1x.get(name, _KEPT[name])

    read.__doc__ = (
        f"1.x's ``trainer.{name}``: the keyword as given (1.x's default {_KEPT[name]!r})."
    )
    return property(read)


def _constant(value: Any, doc: str) -> property:
    def read(self: OneXAttributes) -> Any:
        return value

    read.__doc__ = doc
    return property(read)


class OneXAttributes:
    """Lightning 1.x's Trainer attributes (see the module); a base of ``ddpkit.lightning.Trainer``,
    which sets ``_given_1x`` (the call as written) and ``_ddpkit_tuning``."""

    _given_1x: Mapping[str, Any] = {}
    _ddpkit_tuning = False

    auto_lr_find = _kept("auto_lr_find")
    auto_scale_batch_size = _kept("auto_scale_batch_size")
    flush_logs_every_n_steps = _kept("flush_logs_every_n_steps")
    move_metrics_to_cpu = _kept("move_metrics_to_cpu")
    prepare_data_per_node = _kept("prepare_data_per_node")
    resume_from_checkpoint = _kept("resume_from_checkpoint")
    terminate_on_nan = _kept("terminate_on_nan")
    track_grad_norm = _kept("track_grad_norm")
    weights_summary = _kept("weights_summary")

    def _trainer(self) -> pl.Trainer:
        assert isinstance(self, pl.Trainer)
        return self

    # -- devices -----------------------------------------------------------------------------

    @property
    def on_gpu(self) -> bool:
        """1.0–1.3: training on CUDA devices."""
        return self._trainer().strategy.root_device.type == "cuda"

    @property
    def on_cpu(self) -> bool:
        """1.1–1.3: training on the CPU."""
        return self._trainer().strategy.root_device.type == "cpu"

    on_tpu = _constant(False, "1.0–1.3: training on TPUs, which ddpkit.lightning leaves out.")

    @property
    def gpus(self) -> Any:
        """1.0–1.7: the ``gpus`` flag as given; without one, the CUDA devices in use."""
        if self._given_1x.get("gpus") is not None:
            return self._given_1x["gpus"]
        return self.num_gpus or None

    @property
    def num_gpus(self) -> int:
        """1.0–1.7: how many CUDA devices this process's node trains on."""
        return self._trainer().num_devices if self.on_gpu else 0

    @property
    def root_gpu(self) -> int | None:
        """1.0–1.7: the index of this rank's CUDA device."""
        return self._trainer().strategy.root_device.index if self.on_gpu else None

    @property
    def data_parallel_device_ids(self) -> list[int] | None:
        """1.0–1.7: the CUDA device ids, or None on the CPU."""
        return list(self._trainer().device_ids) if self.on_gpu else None

    @property
    def num_processes(self) -> int:
        """1.0–1.7: the processes of this node."""
        return self._trainer().num_devices

    @property
    def devices(self) -> int:
        """1.4–1.7: ``num_devices``."""
        return self._trainer().num_devices

    tpu_cores = _constant(None, "1.0–1.7: no TPUs under ddpkit.lightning.")
    ipus = _constant(0, "1.4–1.7: no IPUs under ddpkit.lightning.")

    # -- the training type ---------------------------------------------------------------------

    @property
    def use_ddp(self) -> bool:
        """1.0–1.3: DDP, spawned or not."""
        return isinstance(self._trainer().strategy, DDPStrategy)

    use_dp = use_ddp2 = use_horovod = use_tpu = _constant(
        False, "1.0–1.3: DataParallel, DDP2, Horovod or TPUs, none of which 2.x runs here."
    )

    @property
    def use_single_gpu(self) -> bool:
        """1.0–1.3: one CUDA device, one process."""
        return self.on_gpu and self._trainer().world_size == 1

    @property
    def training_type_plugin(self) -> Any:
        """1.2–1.7: the training-type plugin, which 2.x calls the strategy."""
        return self._trainer().strategy

    @property
    def data_parallel(self) -> bool:
        """1.0–1.9: the model is replicated over several processes."""
        return isinstance(self._trainer().strategy, ParallelStrategy)

    @property
    def distributed_backend(self) -> str | None:
        """1.0–1.4: the ``accelerator`` (or ``distributed_backend``) flag as given, else the
        strategy's 1.x name (``"ddp"``, ``"ddp_spawn"``) or None for one process."""
        given = self._given_1x.get("distributed_backend") or self._given_1x.get("accelerator")
        if isinstance(given, str) and given.startswith("ddp"):
            return given
        strategy = self._trainer().strategy
        if isinstance(strategy, DDPStrategy):
            return "ddp_spawn" if strategy._start_method != "popen" else "ddp"
        return None

    @property
    def use_amp(self) -> bool:
        """1.0–1.7: mixed precision on."""
        return one_x_precision(self._trainer()) in (16, "bf16")

    @property
    def amp_backend(self) -> str | None:
        """1.0–1.9: ``"native"`` with mixed precision, else None."""
        return "native" if self.use_amp else None

    # -- the loop ------------------------------------------------------------------------------

    @property
    def running_sanity_check(self) -> bool:
        """1.0–1.4: ``sanity_checking``."""
        return self._trainer().sanity_checking

    @property
    def disable_validation(self) -> bool:
        """1.0–1.5: ``not enable_validation``."""
        return not self._trainer().enable_validation

    @property
    def should_rank_save_checkpoint(self) -> bool:
        """1.4–1.7: this rank writes checkpoints (rank zero)."""
        return self._trainer().is_global_zero

    @property
    def tuning(self) -> bool:
        """1.2–1.9: ``trainer.tune()`` is running."""
        return self._ddpkit_tuning

    @property
    def tuner(self) -> Any:
        """1.0–1.9's ``trainer.tuner`` (``trainer.tuner.lr_find(model)``): 2.x's ``Tuner``."""
        from pytorch_lightning.tuner.tuning import Tuner

        return Tuner(self._trainer())

    @property
    def reload_dataloaders_every_epoch(self) -> bool:
        """1.0–1.3: the loaders are made again every epoch."""
        trainer: Any = self._trainer()
        return bool(trainer.reload_dataloaders_every_n_epochs == 1)

    @property
    def replace_sampler_ddp(self) -> bool:
        """1.0–1.2: a ``DistributedSampler`` replaces the loaders' (2.x's
        ``use_distributed_sampler``)."""
        given = self._given_1x.get("replace_sampler_ddp")
        return bool(self._given_1x.get("use_distributed_sampler", True) if given is None else given)

    @property
    def lr_schedulers(self) -> list[dict[str, Any]]:
        """1.0–1.7: the schedulers as 1.x's dicts (``scheduler``, ``interval``, ``frequency``,
        ``monitor``, ``reduce_on_plateau``, ``strict``, ``name``, and ``opt_idx`` for several
        optimizers given as dicts)."""
        trainer = self._trainer()
        optimizers = list(trainer.optimizers)
        found = []
        for config in trainer.lr_scheduler_configs:
            entry = dataclasses.asdict(config) if dataclasses.is_dataclass(config) else {}
            entry["scheduler"] = config.scheduler
            owner = getattr(config.scheduler, "optimizer", None)
            index = next((i for i, o in enumerate(optimizers) if o is owner), None)
            # 1.0–1.5 kept the optimizer's index only for several optimizers given as dicts
            entry["opt_idx"] = index if getattr(self, "_ddpkit_scheduler_opt_idx", False) else None
            found.append(entry)
        return found

    schedulers = lr_schedulers

    @property
    def optimizer_frequencies(self) -> list[int]:
        """1.0–1.9: each optimizer's ``"frequency"`` (1.x's several optimizers), else []."""
        return list(getattr(self, "_ddpkit_optimizer_frequencies", []))

    @property
    def progress_bar_dict(self) -> dict[str, Any]:
        """1.0–1.6: what the progress bar shows (the module's ``get_progress_bar_dict``)."""
        trainer = self._trainer()
        module = trainer.lightning_module
        getter = getattr(module, "get_progress_bar_dict", None)
        return dict(getter()) if getter is not None else dict(trainer.progress_bar_metrics)

    @property
    def accumulation_scheduler(self) -> Any:
        """1.0–1.9: the ``GradientAccumulationScheduler`` callback, or None."""
        from pytorch_lightning.callbacks import GradientAccumulationScheduler

        callbacks: list[Any] = self._trainer().callbacks  # type: ignore[attr-defined]
        return next((c for c in callbacks if isinstance(c, GradientAccumulationScheduler)), None)

    @property
    def prediction_writer_callbacks(self) -> list[Any]:
        """1.3–1.9: the ``BasePredictionWriter`` callbacks."""
        from pytorch_lightning.callbacks import BasePredictionWriter

        callbacks: list[Any] = self._trainer().callbacks  # type: ignore[attr-defined]
        return [c for c in callbacks if isinstance(c, BasePredictionWriter)]

    # -- paths ---------------------------------------------------------------------------------

    @property
    def weights_save_path(self) -> str:
        """1.0–1.7: where checkpoints went by default (``default_root_dir``)."""
        return str(self._trainer().default_root_dir)

    @property
    def tested_ckpt_path(self) -> str | None:
        """1.0–1.7: the checkpoint ``test`` loaded (2.x's ``ckpt_path``)."""
        path = self._trainer().ckpt_path
        return None if path is None else str(path)

    validated_ckpt_path = predicted_ckpt_path = tested_ckpt_path

    @property
    def slurm_job_id(self) -> int | None:
        """1.0–1.6: the SLURM job's id, or None outside SLURM."""
        from lightning_fabric.plugins.environments.slurm import SLURMEnvironment

        return SLURMEnvironment.job_id()

    def get_model(self) -> Any:
        """1.0–1.3: the LightningModule (``trainer.lightning_module``)."""
        return self._trainer().lightning_module

    @classmethod
    def match_env_arguments(cls) -> Any:
        """1.0–1.9: the ``PL_TRAINER_<KEYWORD>`` variables of the environment, parsed."""
        from ddpkit.lightning._arguments import parse_env_variables

        return parse_env_variables(cls)

    def __getattr__(self, name: str) -> Any:
        # Only for names found nowhere else: a 1.x member ddpkit refuses says why.
        _surface.refuse_member("Trainer", name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
