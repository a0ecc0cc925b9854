"""What ``ddpkit.lightning.Trainer`` does with each Lightning 1.x keyword of the shared table
(:mod:`ddpkit.trainer.legacy_table`: the facts — removed in, the values 1.x took, its defaults, the
Lightning 2.x spelling — which ``ddpkit.Trainer`` reads too).

A handler applies a value that asks for something onto Lightning 2.x's Trainer (a keyword, a
callback, something a stage does); a row with ``gone`` set has no handler: Lightning 2.x cannot do
what its values ask, and :class:`~ddpkit.lightning._keywords.Keyword` refuses them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytorch_lightning.callbacks import (
    DeviceStatsMonitor,
    GradientAccumulationScheduler,
    ModelCheckpoint,
    ModelSummary,
    ProgressBar,
)

from ddpkit.errors import MisconfigurationError
from ddpkit.lightning._callbacks import GradNormLogger
from ddpkit.lightning._keywords import NOTHING, Handler, Keyword, Rewrite
from ddpkit.trainer.legacy_table import ROWS

__all__ = ["KEYWORDS"]


def _resume_from_checkpoint(value: Any, rw: Rewrite) -> None:
    rw.resume_from_checkpoint = value


def _progress_bar_refresh_rate(value: Any, rw: Rewrite) -> str | None:
    if value == 0 and rw.users(ProgressBar) is not None:
        return NOTHING  # 1.x: a progress bar of the user's wins over any rate, 0 included
    # A rate asks for a bar: enable_progress_bar=False beside it is a contradiction (refused).
    rw.set("enable_progress_bar", value != 0)
    if value != 0:
        rw.progress_bar["refresh_rate"] = value
    return None


def _process_position(value: Any, rw: Rewrite) -> None:
    rw.progress_bar["process_position"] = value


def _weights_summary(value: Any, rw: Rewrite) -> str | None:
    if value is None:
        rw.set("enable_model_summary", False)
    elif rw.users(ModelSummary) is not None:
        return NOTHING  # 1.5–1.9: a ModelSummary of the user's wins ("Skipping setting a default")
    else:
        rw.callback(ModelSummary(max_depth=-1))
    return None


def _checkpoint_callback(value: Any, rw: Rewrite) -> None:
    if value is False and rw.users(ModelCheckpoint) is not None:
        # 1.x refused it in its own words ("configured with checkpoint_callback=False but found
        # ModelCheckpoint"); Lightning 2.x's message would name enable_checkpointing instead.
        raise MisconfigurationError(
            "Trainer(checkpoint_callback=False, callbacks=[..., ModelCheckpoint(...)]): "
            "checkpointing off, and a ModelCheckpoint to save with, as Lightning 1.x refused "
            "too. Fix: drop checkpoint_callback=False (your ModelCheckpoint saves), or the "
            "ModelCheckpoint."
        )
    if isinstance(value, bool):
        rw.set("enable_checkpointing", value)
    else:  # Lightning 1.0–1.2 took a ModelCheckpoint here
        rw.callback(value)


def _terminate_on_nan(value: Any, rw: Rewrite) -> None:
    rw.set("detect_anomaly", True)


def _flush_logs_every_n_steps(value: Any, rw: Rewrite) -> None:
    rw.flush_logs_every_n_steps = value


def _log_gpu_memory(value: Any, rw: Rewrite) -> str | None:
    if rw.users(DeviceStatsMonitor) is not None:
        return NOTHING  # the user's monitor logs the device's memory already (not twice)
    rw.callback(DeviceStatsMonitor())
    return None


def _prepare_data_per_node(value: Any, rw: Rewrite) -> None:
    rw.prepare_data_per_node = value


def _track_grad_norm(value: Any, rw: Rewrite) -> None:
    rw.callback(GradNormLogger(float(value)))


def _auto_select_gpus(value: Any, rw: Rewrite) -> str:
    flag = "gpus" if "gpus" in rw.kwargs else "devices"
    count = rw.kwargs.get(flag)
    on_gpu = flag == "gpus" or rw.kwargs.get("accelerator") in ("gpu", "cuda")
    if not on_gpu or isinstance(count, bool) or not isinstance(count, int) or count < 1:
        return NOTHING  # 1.x picked GPUs only for an integer count of them
    from lightning_fabric.accelerators.cuda import find_usable_cuda_devices, num_cuda_devices

    if num_cuda_devices() == 0:
        return NOTHING  # nothing to pick from: the connector says so, with the fix
    rw.kwargs[flag] = find_usable_cuda_devices(count)
    return f"devices=find_usable_cuda_devices({count})"


def _amp_level(value: Any, rw: Rewrite) -> str:
    return NOTHING  # 1.x read it only with amp_backend='apex', which is refused


def _replace_sampler_ddp(value: Any, rw: Rewrite) -> None:
    rw.set("use_distributed_sampler", value)


def _reload_dataloaders_every_epoch(value: Any, rw: Rewrite) -> None:
    rw.set("reload_dataloaders_every_n_epochs", 1)


def _distributed_backend(value: Any, rw: Rewrite) -> None:
    rw.set("accelerator", value)


def _automatic_optimization(value: Any, rw: Rewrite) -> None:
    rw.automatic_optimization = False


def _auto_lr_find(value: Any, rw: Rewrite) -> None:
    rw.tune["lr_find"] = "" if value is True else str(value)


def _auto_scale_batch_size(value: Any, rw: Rewrite) -> None:
    rw.tune["scale_batch_size"] = "power" if value is True else value


def _accumulate_grad_batches(value: Any, rw: Rewrite) -> None:
    assert isinstance(value, Mapping)  # the row's check: a schedule (None asks for nothing)
    if rw.users(GradientAccumulationScheduler) is not None:
        # Two schedules, each setting the factor at every epoch's start: 1.8 refused the two
        # together, as Lightning 2.x refuses an int beside the callback.
        raise MisconfigurationError(
            f"Trainer(accumulate_grad_batches={dict(value)!r}, callbacks=[..., "
            f"GradientAccumulationScheduler(...)]): both set the accumulation schedule. Fix: keep "
            f"one: callbacks=[GradientAccumulationScheduler(scheduling={dict(value)!r})] "
            f"without accumulate_grad_batches, or your callback alone."
        )
    rw.kwargs["accumulate_grad_batches"] = 1
    rw.callback(GradientAccumulationScheduler(scheduling=dict(value)))


def _profiler(value: Any, rw: Rewrite) -> None:
    rw.kwargs["profiler"] = "simple"  # True (False asks for nothing)


_HANDLERS: dict[str, Handler] = {
    "resume_from_checkpoint": _resume_from_checkpoint,
    "progress_bar_refresh_rate": _progress_bar_refresh_rate,
    "process_position": _process_position,
    "weights_summary": _weights_summary,
    "checkpoint_callback": _checkpoint_callback,
    "terminate_on_nan": _terminate_on_nan,
    "flush_logs_every_n_steps": _flush_logs_every_n_steps,
    "log_gpu_memory": _log_gpu_memory,
    "prepare_data_per_node": _prepare_data_per_node,
    "track_grad_norm": _track_grad_norm,
    "auto_select_gpus": _auto_select_gpus,
    "amp_level": _amp_level,
    "replace_sampler_ddp": _replace_sampler_ddp,
    "reload_dataloaders_every_epoch": _reload_dataloaders_every_epoch,
    "distributed_backend": _distributed_backend,
    "automatic_optimization": _automatic_optimization,
    "auto_lr_find": _auto_lr_find,
    "auto_scale_batch_size": _auto_scale_batch_size,
    "accumulate_grad_batches": _accumulate_grad_batches,
    "profiler": _profiler,
}

#: Every 1.x keyword of the shared table, by name, in the table's order (the order applied).
KEYWORDS: dict[str, Keyword] = {
    name: Keyword(row, _HANDLERS.get(name)) for name, row in ROWS.items()
}
