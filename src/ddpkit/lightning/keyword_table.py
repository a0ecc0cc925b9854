"""The table: every Trainer keyword of Lightning 1.0–1.9 that Lightning 2.x removed, and every
1.x value of a keyword it kept but no longer takes, each with what ddpkit does with it.

Sources: the Trainer signatures of Lightning 1.0 to 1.9 and Lightning's own CHANGELOG (the version
in each row is the release that removed it). Where Lightning's deprecation notice named the
replacement, that is the spelling used here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytorch_lightning.callbacks import (
    Callback,
    DeviceStatsMonitor,
    GradientAccumulationScheduler,
    ModelSummary,
)

from ddpkit.lightning.callbacks import GradNormLogger
from ddpkit.lightning.keywords import BadValue, Keyword, Refusal, Rewrite

__all__ = ["KEYWORDS"]


def _count(value: Any, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise BadValue(f"an int ≥ {least}")
    return value


def _resume_from_checkpoint(value: Any, rw: Rewrite) -> str | None:
    if value is None:
        return None
    rw.resume_from_checkpoint = value
    return f"trainer.fit(model, ckpt_path={str(value)!r})"


def _progress_bar_refresh_rate(value: Any, rw: Rewrite) -> str | None:
    if value is None:
        return None
    if _count(value, 0) == 0:
        rw.set("enable_progress_bar", False)
        return "enable_progress_bar=False"
    rw.progress_bar["refresh_rate"] = value
    return f"callbacks=[TQDMProgressBar(refresh_rate={value})]"


def _process_position(value: Any, rw: Rewrite) -> str | None:
    if _count(value, 0) == 0:
        return None
    rw.progress_bar["process_position"] = value
    return f"callbacks=[TQDMProgressBar(process_position={value})]"


def _weights_summary(value: Any, rw: Rewrite) -> str | None:
    if value == "top":
        return None
    if value == "full":
        rw.callback(ModelSummary(max_depth=-1))
        return "callbacks=[ModelSummary(max_depth=-1)]"
    if value is None:
        rw.set("enable_model_summary", False)
        return "enable_model_summary=False"
    raise BadValue("'top', 'full' or None")


def _checkpoint_callback(value: Any, rw: Rewrite) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        rw.set("enable_checkpointing", value)
        return f"enable_checkpointing={value}"
    if isinstance(value, Callback):  # Lightning 1.0–1.2 took a ModelCheckpoint here
        rw.callback(value)
        return f"callbacks=[{type(value).__name__}(...)]"
    raise BadValue("a bool (or, before 1.3, a ModelCheckpoint)")


def _terminate_on_nan(value: Any, rw: Rewrite) -> str | None:
    if not value:
        return None
    rw.set("detect_anomaly", True)
    return "detect_anomaly=True"


def _flush_logs_every_n_steps(value: Any, rw: Rewrite) -> str | None:
    if value is None or _count(value, 1) == 100:
        return None  # 1.x's default is the CSVLogger's
    rw.flush_logs_every_n_steps = value
    return f"logger=CSVLogger(save_dir, flush_logs_every_n_steps={value})"


def _log_gpu_memory(value: Any, rw: Rewrite) -> str | None:
    if value is None:
        return None
    if value not in ("min_max", "all"):
        raise BadValue("None, 'min_max' or 'all'")
    rw.callback(DeviceStatsMonitor())
    return "callbacks=[DeviceStatsMonitor()]"


def _stochastic_weight_avg(value: Any, rw: Rewrite) -> str | None:
    if not value:
        return None
    raise Refusal(
        "Lightning 2.x's StochasticWeightAveraging needs the SWA learning rate, which 1.x took "
        "from the optimizer",
        "pass callbacks=[StochasticWeightAveraging(swa_lrs=<your learning rate>)]",
    )


def _prepare_data_per_node(value: Any, rw: Rewrite) -> str | None:
    if value is None or value is True:
        return None
    rw.prepare_data_per_node = bool(value)
    return "self.prepare_data_per_node = False in the LightningModule and the LightningDataModule"


def _track_grad_norm(value: Any, rw: Rewrite) -> str | None:
    if value == -1:
        return None
    try:
        norm = float(value)
    except (TypeError, ValueError):
        norm = 0.0
    if isinstance(value, bool) or not norm > 0:
        raise BadValue("-1, a positive number or 'inf'")
    rw.callback(GradNormLogger(norm))
    shown = "'inf'" if norm == float("inf") else f"{norm:g}"
    return f"self.log_dict(grad_norm(self, norm_type={shown})) in on_before_optimizer_step"


def _auto_select_gpus(value: Any, rw: Rewrite) -> str | None:
    if not value:
        return None
    flag = "gpus" if "gpus" in rw.kwargs else "devices"
    count = rw.kwargs.get(flag)
    on_gpu = flag == "gpus" or rw.kwargs.get("accelerator") in ("gpu", "cuda")
    if not on_gpu or isinstance(count, bool) or not isinstance(count, int) or count < 1:
        return None  # 1.x picked GPUs only for an integer count of them
    from lightning_fabric.accelerators.cuda import find_usable_cuda_devices, num_cuda_devices

    if num_cuda_devices() == 0:
        return None  # nothing to pick from: the connector says so, with the fix

    rw.kwargs[flag] = find_usable_cuda_devices(count)
    return f"devices=find_usable_cuda_devices({count})"


def _refused(why: str, fix: str, *, default: Any = None) -> Any:
    """A handler for a keyword whose only accepted value is its 1.x default."""

    def handler(value: Any, rw: Rewrite) -> str | None:
        if value is None or value == default:
            return None
        raise Refusal(why, fix.format(value=value))

    return handler


def _multiple_trainloader_mode(value: Any, rw: Rewrite) -> str | None:
    if value == "max_size_cycle":
        return None
    if value != "min_size":
        raise BadValue("'max_size_cycle' or 'min_size'")
    raise Refusal(
        "Lightning 2.x takes the mode from the loader",
        "return CombinedLoader(loaders, mode='min_size') from train_dataloader()",
    )


def _amp_backend(value: Any, rw: Rewrite) -> str | None:
    if value in (None, "native"):
        return None
    raise Refusal(_APEX, "drop it and pass precision='16-mixed' (torch's own AMP)")


def _replace_sampler_ddp(value: Any, rw: Rewrite) -> str | None:
    rw.set("use_distributed_sampler", bool(value))
    return f"use_distributed_sampler={bool(value)}"


def _reload_dataloaders_every_epoch(value: Any, rw: Rewrite) -> str | None:
    if not value:
        return None
    rw.set("reload_dataloaders_every_n_epochs", 1)
    return "reload_dataloaders_every_n_epochs=1"


def _distributed_backend(value: Any, rw: Rewrite) -> str | None:
    if value is None:
        return None
    rw.set("accelerator", value)
    return f"accelerator={value!r}, resolved with the device flags (see their warning)"


def _auto_lr_find(value: Any, rw: Rewrite) -> str | None:
    if value is False:
        return None
    attr = "" if value is True else str(value)
    rw.tune["lr_find"] = attr
    shown = f", attr_name={attr!r}" if attr else ""
    return f"Tuner(trainer).lr_find(model{shown}), which trainer.tune(model) runs"


def _auto_scale_batch_size(value: Any, rw: Rewrite) -> str | None:
    if value is False:
        return None
    mode = "power" if value is True else value
    if mode not in ("power", "binsearch"):
        raise BadValue("False, True, 'power' or 'binsearch'")
    rw.tune["scale_batch_size"] = mode
    return f"Tuner(trainer).scale_batch_size(model, mode={mode!r}), which trainer.tune(model) runs"


def _accumulate_grad_batches(value: Any, rw: Rewrite) -> str | None:
    if value is None:
        rw.kwargs["accumulate_grad_batches"] = 1
        return None
    if not isinstance(value, Mapping):
        return ""
    rw.kwargs["accumulate_grad_batches"] = 1
    rw.callback(GradientAccumulationScheduler(scheduling=dict(value)))
    return f"callbacks=[GradientAccumulationScheduler(scheduling={dict(value)!r})]"


def _max_steps(value: Any, rw: Rewrite) -> str | None:
    if value is not None:
        return ""
    rw.kwargs["max_steps"] = -1
    return "max_steps=-1"


def _profiler(value: Any, rw: Rewrite) -> str | None:
    if not isinstance(value, bool):
        return ""
    rw.kwargs["profiler"] = "simple" if value else None
    return "profiler='simple'" if value else "profiler=None"


_APEX = "NVIDIA Apex went with it"
_REMOVED: list[tuple[str, str, Any]] = [
    ("resume_from_checkpoint", "2.0", _resume_from_checkpoint),
    ("progress_bar_refresh_rate", "1.7", _progress_bar_refresh_rate),
    ("process_position", "1.7", _process_position),
    ("weights_summary", "1.7", _weights_summary),
    ("checkpoint_callback", "1.7", _checkpoint_callback),
    ("terminate_on_nan", "1.7", _terminate_on_nan),
    ("flush_logs_every_n_steps", "1.7", _flush_logs_every_n_steps),
    ("log_gpu_memory", "1.7", _log_gpu_memory),
    ("stochastic_weight_avg", "1.7", _stochastic_weight_avg),
    ("prepare_data_per_node", "1.7", _prepare_data_per_node),
    ("track_grad_norm", "2.0", _track_grad_norm),
    ("auto_select_gpus", "2.0", _auto_select_gpus),
    (
        "tpu_cores",
        "2.0",
        _refused(
            "ddpkit's connector resolves CPUs and CUDA GPUs only",
            "pass accelerator='tpu', devices={value!r} and no 1.x device flag",
        ),
    ),
    (
        "ipus",
        "2.0",
        _refused(
            "IPUs moved to the lightning-graphcore package",
            "install lightning-graphcore; pass accelerator=IPUAccelerator(), devices={value!r}",
        ),
    ),
    (
        "move_metrics_to_cpu",
        "2.0",
        _refused(
            "Lightning 2.x has no such switch",
            "drop it (call .cpu() on a tensor before self.log if GPU memory is short)",
            default=False,
        ),
    ),
    ("multiple_trainloader_mode", "2.0", _multiple_trainloader_mode),
    ("amp_backend", "2.0", _amp_backend),
    ("amp_level", "2.0", _refused(_APEX, "drop it and pass precision='16-mixed'")),
    ("replace_sampler_ddp", "2.0", _replace_sampler_ddp),
    ("reload_dataloaders_every_epoch", "1.6", _reload_dataloaders_every_epoch),
    (
        "truncated_bptt_steps",
        "2.0",
        _refused(
            "truncated backpropagation through time went with it",
            "split the sequence in training_step, with manual optimization "
            "(self.automatic_optimization = False)",
            default=0,
        ),
    ),
    ("distributed_backend", "1.5", _distributed_backend),
    (
        "automatic_optimization",
        "1.3",
        _refused(
            "the switch moved to the module",
            "set self.automatic_optimization = False in your LightningModule",
            default=True,
        ),
    ),
    (
        "enable_pl_optimizer",
        "1.3",
        _refused(
            "Lightning 2.x always wraps optimizers in LightningOptimizer", "drop it", default=True
        ),
    ),
    (
        "weights_save_path",
        "1.8",
        _refused(
            "Lightning 2.x saves checkpoints where each ModelCheckpoint says",
            "pass callbacks=[ModelCheckpoint(dirpath={value!r})]",
        ),
    ),
    ("auto_lr_find", "2.0", _auto_lr_find),
    ("auto_scale_batch_size", "2.0", _auto_scale_batch_size),
]
#: Keywords Lightning 2.x kept, with 1.x values it no longer takes.
_KEPT: list[tuple[str, str, Any]] = [
    ("accumulate_grad_batches", "2.0", _accumulate_grad_batches),
    ("max_steps", "1.7", _max_steps),
    ("profiler", "1.3", _profiler),
]

#: Every 1.x keyword ddpkit knows, by name, in the order they are applied.
KEYWORDS: dict[str, Keyword] = {
    name: Keyword(name, removed, handler, still_a_keyword=kept)
    for rows, kept in ((_REMOVED, False), (_KEPT, True))
    for name, removed, handler in rows
}
