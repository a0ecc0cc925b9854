"""Lightning 1.x keywords of ``Trainer(...)``: mapped onto 2.x (with a
``DDPKitDeprecationWarning`` naming the modern spelling) or refused naming the replacement."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from ddpkit.errors import DDPKitDeprecationWarning
from ddpkit.trainer.keywords import bad, call
from ddpkit.utilities.rank_zero import rank_zero_warn

__all__ = ["LEGACY_MAPPED", "LEGACY_REFUSED", "map_legacy"]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


#: 1.x keyword → (the modern spelling, how the value maps onto 2.x keywords)
LEGACY_MAPPED: dict[str, tuple[Callable[[Any], str], Callable[[Any], dict[str, Any]]]] = {
    "replace_sampler_ddp": (
        lambda v: f"Trainer(use_distributed_sampler={v!r})",
        lambda v: {"use_distributed_sampler": v},
    ),
    "checkpoint_callback": (
        lambda v: f"Trainer(enable_checkpointing={v!r})",
        lambda v: {"enable_checkpointing": v},
    ),
    "progress_bar_refresh_rate": (
        lambda v: f"Trainer(enable_progress_bar={bool(v)!r})",
        lambda v: {"enable_progress_bar": bool(v)},
    ),
    "weights_summary": (
        lambda v: (
            "Trainer(enable_model_summary=False)"
            if v is None
            else f"Trainer(callbacks=[ModelSummary(max_depth={-1 if v == 'full' else 1})])"
        ),
        lambda v: {
            "enable_model_summary": v is not None,
            "_summary_depth": -1 if v == "full" else 1,
        },
    ),
    "resume_from_checkpoint": (
        lambda v: f"trainer.fit(model, ckpt_path={str(v)!r})",
        lambda v: {"_resume_from_checkpoint": v},
    ),
    "reload_dataloaders_every_epoch": (
        lambda v: f"Trainer(reload_dataloaders_every_n_epochs={int(bool(v))})",
        lambda v: {"reload_dataloaders_every_n_epochs": int(bool(v))},
    ),
}

_CHECKS: dict[str, Callable[[Any], bool]] = {
    "replace_sampler_ddp": lambda v: isinstance(v, bool),
    "checkpoint_callback": lambda v: isinstance(v, bool),
    "progress_bar_refresh_rate": lambda v: _is_int(v) and v >= 0,
    "weights_summary": lambda v: v in (None, "top", "full"),
    "resume_from_checkpoint": lambda v: isinstance(v, str | os.PathLike),
    "reload_dataloaders_every_epoch": lambda v: isinstance(v, bool),
}
_EXAMPLES: dict[str, Any] = {
    "replace_sampler_ddp": False,
    "checkpoint_callback": False,
    "progress_bar_refresh_rate": 0,
    "weights_summary": None,
    "resume_from_checkpoint": "last.ckpt",
    "reload_dataloaders_every_epoch": True,
}
_ACCEPTS = {
    "replace_sampler_ddp": "True or False",
    "checkpoint_callback": "True or False (a ModelCheckpoint goes in callbacks=[...])",
    "progress_bar_refresh_rate": "an int ≥ 0",
    "weights_summary": "None, 'top' or 'full'",
    "resume_from_checkpoint": "a checkpoint path",
    "reload_dataloaders_every_epoch": "True or False",
}

#: 1.x (and 0.x) keyword → why it is gone and what to use instead
LEGACY_REFUSED: dict[str, str] = {
    "amp_backend": (
        "mixed precision has one backend (torch.autocast). Fix: Trainer(precision='16-mixed')."
    ),
    "amp_level": "apex's levels are gone with apex. Fix: Trainer(precision='16-mixed').",
    "auto_lr_find": (
        "Lightning 2.x moved it to its Tuner. Fix: ddpkit.lightning.Trainer with "
        "pytorch_lightning.tuner.Tuner(trainer).lr_find(model)."
    ),
    "auto_scale_batch_size": (
        "Lightning 2.x moved it to its Tuner. Fix: ddpkit.lightning.Trainer with "
        "pytorch_lightning.tuner.Tuner(trainer).scale_batch_size(model)."
    ),
    "auto_select_gpus": (
        "removed in Lightning 2.0. Fix: Trainer(accelerator='gpu', devices=N) (or devices=[0, 1])."
    ),
    "default_save_path": "renamed. Fix: Trainer(default_root_dir=...).",
    "distributed_backend": (
        "renamed in Lightning 1.x. Fix: Trainer(strategy='ddp') (or 'ddp_spawn')."
    ),
    "early_stop_callback": (
        "callbacks go in one list. Fix: Trainer(callbacks=[EarlyStopping(monitor='val_loss')])."
    ),
    "enable_pl_optimizer": "removed in Lightning 1.5; nothing to set. Fix: leave it out.",
    "flush_logs_every_n_steps": (
        "moved to the logger in Lightning 1.5. Fix: Trainer(logger=CSVLogger(save_dir, "
        "flush_logs_every_n_steps=100))."
    ),
    "gradient_clip": "renamed. Fix: Trainer(gradient_clip_val=...).",
    "hpus": "no HPU support in ddpkit. Fix: Trainer(accelerator='cpu') or 'gpu'.",
    "ipus": "no IPU support in ddpkit. Fix: Trainer(accelerator='cpu') or 'gpu'.",
    "log_gpu_memory": (
        "removed in Lightning 1.7. Fix: log torch.cuda.memory_allocated() with self.log in a hook."
    ),
    "log_save_interval": "removed. Fix: Trainer(log_every_n_steps=...).",
    "max_nb_epochs": "renamed. Fix: Trainer(max_epochs=...).",
    "min_nb_epochs": "renamed. Fix: Trainer(min_epochs=...).",
    "move_metrics_to_cpu": (
        "removed in Lightning 2.0: logged values reach the host only when read. Fix: leave it out."
    ),
    "multiple_trainloader_mode": (
        "removed in Lightning 2.0 (a CombinedLoader's mode). Fix: one train loader."
    ),
    "nb_sanity_val_steps": "renamed. Fix: Trainer(num_sanity_val_steps=...).",
    "num_tpu_cores": "no TPU support in ddpkit. Fix: Trainer(accelerator='cpu') or 'gpu'.",
    "overfit_pct": "renamed. Fix: Trainer(overfit_batches=...).",
    "prepare_data_per_node": (
        "moved to the module in Lightning 1.5. Fix: set prepare_data_per_node = False on the "
        "DataModule (or module) class."
    ),
    "print_nan_grads": "removed. Fix: Trainer(detect_anomaly=True).",
    "process_position": "removed in Lightning 1.7 (a progress-bar position). Fix: leave it out.",
    "row_log_interval": "renamed. Fix: Trainer(log_every_n_steps=...).",
    "show_progress_bar": "renamed. Fix: Trainer(enable_progress_bar=...).",
    "stochastic_weight_avg": (
        "removed in Lightning 2.0 (a callback there). Fix: "
        "torch.optim.swa_utils.AveragedModel in your module, or ddpkit.lightning.Trainer with"
        " StochasticWeightAveraging."
    ),
    "terminate_on_nan": (
        "removed in Lightning 1.7. Fix: Trainer(detect_anomaly=True) to find the op, or "
        "callbacks=[EarlyStopping(monitor='train_loss', check_finite=True)] to stop."
    ),
    "test_percent_check": "renamed. Fix: Trainer(limit_test_batches=...).",
    "tpu_cores": "no TPU support in ddpkit. Fix: Trainer(accelerator='cpu') or 'gpu'.",
    "track_grad_norm": (
        "removed in Lightning 2.0. Fix: log torch.nn.utils.get_total_norm(...) in "
        "on_before_optimizer_step."
    ),
    "train_percent_check": "renamed. Fix: Trainer(limit_train_batches=...).",
    "truncated_bptt_steps": "removed in Lightning 2.0. Fix: split the sequence in training_step.",
    "use_amp": "removed. Fix: Trainer(precision='16-mixed').",
    "val_percent_check": "renamed. Fix: Trainer(limit_val_batches=...).",
    "weights_save_path": (
        "removed in Lightning 1.8. Fix: Trainer(callbacks=[ModelCheckpoint(dirpath=...)])."
    ),
}


def map_legacy(name: str, value: Any) -> tuple[dict[str, Any], Callable[[], None]]:
    """A 1.x keyword in 2.x terms and the warning that says so (to give once the rest is
    checked), or a refusal naming the replacement."""
    if name in LEGACY_REFUSED:
        raise bad(name, value, f"a Lightning 1.x keyword, {LEGACY_REFUSED[name]}")
    spell, mapping = LEGACY_MAPPED[name]
    if not _CHECKS[name](value):
        raise bad(
            name,
            value,
            f"Invalid type provided for {name}: a Lightning 1.x keyword that takes "
            f"{_ACCEPTS[name]}. Fix: {spell(_EXAMPLES[name])}.",
        )
    message = (
        f"{call(name, value)} is a Lightning 1.x keyword; ddpkit still honours it. The same, "
        f"spelled today: {spell(value)}."
    )
    return mapping(value), lambda: rank_zero_warn(message, DDPKitDeprecationWarning)
