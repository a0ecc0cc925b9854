"""Checking the loop keywords of ``Trainer(...)`` one by one, and the keywords it refuses.

Every message quotes the call as written (``Trainer(max_steps=None)``), states the problem and
ends with one fix. Keywords of Lightning 1.x that 2.x removed are mapped (with a
``DDPKitDeprecationWarning`` naming the modern spelling) or refused naming the replacement;
anything else unknown gets a did-you-mean.
"""

from __future__ import annotations

import difflib
import math
import os
import re
from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import Any

from ddpkit.errors import DDPKitDeprecationWarning, MisconfigurationError
from ddpkit.utilities.rank_zero import rank_zero_warn

__all__ = [
    "LEGACY_MAPPED",
    "LEGACY_REFUSED",
    "check_bool",
    "check_int",
    "check_limit",
    "check_path",
    "map_legacy",
    "parse_max_time",
    "unknown_keyword",
]


def call(name: str, value: Any) -> str:
    return f"Trainer({name}={value!r})"


def bad(name: str, value: Any, problem: str) -> MisconfigurationError:
    return MisconfigurationError(f"{call(name, value)}: {problem}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_bool(name: str, value: Any, *, allow_none: bool = False) -> bool | None:
    if value is None and allow_none:
        return None
    if not isinstance(value, bool):
        raise bad(name, value, f"pass True or False. Fix: Trainer({name}=True).")
    return value


def check_int(
    name: str, value: Any, *, minimum: int, allow_none: bool = False, meaning: str = ""
) -> int | None:
    """An int ≥ ``minimum`` (``meaning`` says what the lowest values do)."""
    if value is None and allow_none:
        return None
    hint = f" ({meaning})" if meaning else ""
    if not _is_int(value):
        kind = "None" if value is None else type(value).__name__
        raise bad(
            name,
            value,
            f"got {kind}; pass an int ≥ {minimum}{hint}. Fix: Trainer({name}={max(minimum, 1)}).",
        )
    if value < minimum:
        raise bad(
            name, value, f"must be ≥ {minimum}{hint}. Fix: Trainer({name}={max(minimum, 1)})."
        )
    return int(value)


def check_limit(name: str, value: Any, *, allow_none: bool = True) -> int | float | None:
    """A count of batches (int ≥ 0) or a fraction of the loader (float in [0, 1])."""
    if value is None and allow_none:
        return None
    if _is_int(value):
        if value < 0:
            raise bad(name, value, f"a count of batches must be ≥ 0. Fix: Trainer({name}=10).")
        return int(value)
    if isinstance(value, float):
        if math.isnan(value) or not 0.0 <= value <= 1.0:
            raise bad(
                name,
                value,
                f"a fraction of the batches must lie in [0.0, 1.0]; an int counts batches. "
                f"Fix: Trainer({name}=0.25).",
            )
        return value
    raise bad(
        name,
        value,
        f"pass an int (batches) or a float in [0.0, 1.0] (a fraction). Fix: Trainer({name}=0.25).",
    )


def check_path(name: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str | os.PathLike):
        raise bad(
            name, value, f"pass a folder path (str or pathlib.Path). Fix: Trainer({name}='runs')."
        )
    return os.fspath(value)


_TIME = re.compile(r"^(\d+):(\d{1,2}):(\d{1,2}):(\d{1,2})$")
_TIME_UNITS = ("days", "hours", "minutes", "seconds", "milliseconds", "microseconds", "weeks")


def parse_max_time(name: str, value: Any) -> timedelta | None:
    """``"DD:HH:MM:SS"``, a ``timedelta`` or a dict of ``timedelta`` keywords."""
    fix = f"Fix: Trainer({name}='00:12:00:00') (12 hours) or {name}={{'hours': 12}}."
    if value is None:
        return None
    if isinstance(value, timedelta):
        found = value
    elif isinstance(value, str):
        match = _TIME.match(value.strip())
        if match is None:
            raise bad(name, value, f"a string must read DD:HH:MM:SS. {fix}")
        d, h, m, s = (int(g) for g in match.groups())
        found = timedelta(days=d, hours=h, minutes=m, seconds=s)
    elif isinstance(value, dict):
        unknown = sorted(str(k) for k in value if k not in _TIME_UNITS)
        if unknown:
            raise bad(name, value, f"unknown units {unknown}; use {sorted(_TIME_UNITS)}. {fix}")
        if not all(
            isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
            for v in value.values()
        ):
            raise bad(name, value, f"every unit needs a finite number. {fix}")
        try:
            found = timedelta(**value)
        except OverflowError as error:
            raise bad(name, value, f"{error}. {fix}") from error
    else:
        raise bad(name, value, f"pass 'DD:HH:MM:SS', a datetime.timedelta or a dict. {fix}")
    if found <= timedelta(0):
        raise bad(name, value, f"the duration must be positive. {fix}")
    return found


# -- Lightning 1.x keywords ---------------------------------------------------------------------

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
            f"a Lightning 1.x keyword that takes {_ACCEPTS[name]}. Fix: {spell(_EXAMPLES[name])}.",
        )
    message = (
        f"{call(name, value)} is a Lightning 1.x keyword; ddpkit still honours it. The same, "
        f"spelled today: {spell(value)}."
    )
    return mapping(value), lambda: rank_zero_warn(message, DDPKitDeprecationWarning)


def unknown_keyword(name: str, value: Any, known: Iterable[str]) -> MisconfigurationError:
    names = sorted(set(known) | set(LEGACY_MAPPED) | set(LEGACY_REFUSED))
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    if close:
        return bad(name, value, f"no such keyword. Did you mean {close[0]}?")
    return bad(name, value, f"no such keyword. The keywords are: {', '.join(names)}.")
