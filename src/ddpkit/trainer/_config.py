"""``LoopConfig``: every loop keyword of ``Trainer(...)``, checked once and frozen.

The Trainer builds it in ``__init__``; nothing changes it afterwards. Device flags
(accelerator, strategy, devices, ...) are not here: ``ddpkit.connector`` resolves those.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from ddpkit.callbacks._timer import Timer
from ddpkit.errors import MisconfigurationError
from ddpkit.trainer._keywords import (
    bad,
    check_accumulation,
    check_bool,
    check_callbacks,
    check_gradient_clip,
    check_int,
    check_limit,
    check_logger,
    check_path,
    check_val_check_interval,
    parse_max_time,
    unknown_keyword,
)
from ddpkit.trainer._legacy import LEGACY_MAPPED, LEGACY_REFUSED, map_legacy
from ddpkit.utilities._rank_zero import rank_zero_info
from ddpkit.utilities._reprs import safe_repr


@dataclass(frozen=True, kw_only=True)
class LoopConfig:
    max_epochs: int
    """Epochs to train; -1: no limit (then ``max_steps`` or ``max_time`` ends the run)."""
    max_epochs_given: int | None
    """``max_epochs`` as given (None: not given)."""
    min_epochs: int
    """``should_stop`` (early stopping) is ignored until this many epochs ran."""
    min_epochs_given: int | None
    """``min_epochs`` as given (None: not given)."""
    max_steps: int
    """Optimizer steps to train; -1: no limit."""
    min_steps: int | None
    """``should_stop`` is ignored until this many steps ran (None, as Lightning reports it: 0)."""
    max_time: timedelta | None
    """Wall-clock limit of ``fit`` (a ``Timer`` callback checks it every step)."""
    limit_train_batches: int | float | None
    """Batches per epoch: an int, a fraction, or None for all. Same for the three below."""
    limit_val_batches: int | float | None
    limit_test_batches: int | float | None
    limit_predict_batches: int | float | None
    overfit_batches: int | float
    """Train (and validate) on the same few batches, unshuffled; 0: off."""
    val_check_interval: int | float
    """Validate every n training batches (int) or fraction of an epoch (float; 1.0: at the end)."""
    check_val_every_n_epoch: int | None
    """Validate every n epochs; None: ``val_check_interval`` counts batches across epochs."""
    num_sanity_val_steps: int
    """Validation batches before training (not logged); -1: the whole loader."""
    log_every_n_steps: int
    """A step row goes to the loggers every n optimizer steps; 0: no step rows."""
    enable_checkpointing: bool
    enable_progress_bar: bool
    enable_model_summary: bool
    summary_depth: int
    """The default ModelSummary's depth (1.x ``weights_summary='full'``: -1)."""
    checkpointing_keyword: str
    """The keyword that turned checkpointing off, for messages (``checkpoint_callback`` in
    1.x code, ``barebones``, or ``enable_checkpointing``)."""
    accumulate_grad_batches: int
    """Batches per optimizer step (the factor of epoch 0 under a schedule)."""
    accumulate_schedule: tuple[tuple[int, int], ...]
    """``(first epoch, factor)`` pairs from a dict ``accumulate_grad_batches``; () for an int."""
    gradient_clip_val: float | None
    gradient_clip_algorithm: str | None
    deterministic: bool | str
    benchmark: bool | None
    inference_mode: bool
    use_distributed_sampler: bool
    detect_anomaly: bool
    barebones: bool
    reload_dataloaders_every_n_epochs: int
    default_root_dir: str
    enable_autolog_hparams: bool
    fast_dev_run: int
    """Batches of everything in one epoch, nothing written; 0: off."""
    resume_from_checkpoint: str | None
    """1.x ``resume_from_checkpoint``: the ``ckpt_path`` of a ``fit`` that passes none."""
    max_restarts: int
    """A fit whose rank fails starts again on new ranks, from the newest complete checkpoint,
    up to this many times; 0: the failure ends the job."""
    logger: Any
    """True, False, a logger or a list of loggers (as given)."""
    callbacks: tuple[Any, ...]

    def accumulation(self, epoch: int) -> int:
        """Batches per optimizer step in ``epoch``."""
        factor = self.accumulate_grad_batches if not self.accumulate_schedule else 1
        for first, value in self.accumulate_schedule:
            if epoch >= first:
                factor = value
        return factor


def _refuse_unsupported(given: dict[str, Any]) -> None:
    if given["profiler"] is not None:
        raise bad(
            "profiler",
            given["profiler"],
            "ddpkit's loop has no profiler. Fix: wrap trainer.fit(...) in "
            "torch.profiler.profile(), or run a LightningModule on ddpkit.lightning.Trainer.",
        )
    if given["model_registry"] is not None:
        raise bad(
            "model_registry",
            given["model_registry"],
            "Lightning's model registry needs Lightning's litmodels. Fix: leave it out and "
            "upload trainer.checkpoint_callback.best_model_path yourself.",
        )
    deterministic = given["deterministic"]
    if deterministic not in (None, True, False, "warn"):
        raise bad(
            "deterministic",
            deterministic,
            "pass True, False or 'warn'. Fix: Trainer(deterministic=True).",
        )


#: What ``barebones=True`` turns off, and the value it sets.
_BAREBONES_OFF: dict[str, Any] = {
    "logger": False,
    "enable_checkpointing": False,
    "enable_progress_bar": False,
    "enable_model_summary": False,
    "log_every_n_steps": 0,
    "num_sanity_val_steps": 0,
}


def _barebones(given: dict[str, Any], explicit: set[str]) -> None:
    """Lightning's barebones: every feature that costs speed off, and asking for one is an
    error."""
    if not check_bool("barebones", given["barebones"]):
        return
    for name, off in _BAREBONES_OFF.items():
        if name in explicit and given[name] not in (None, off):
            raise MisconfigurationError(
                f"Trainer(barebones=True, {name}={safe_repr(given[name])}): barebones turns "
                f"{name} off. "
                f"Fix: leave {name} out, or drop barebones=True."
            )
    given.update(_BAREBONES_OFF)


def build_config(
    given: dict[str, Any], defaults: dict[str, Any], extra: dict[str, Any]
) -> LoopConfig:
    """``given``: the loop keywords as passed (defaults filled in); ``defaults``: their defaults
    (``Trainer``'s); ``extra``: the keywords ``Trainer`` does not know by name (1.x ones,
    typos)."""
    given = dict(given)
    explicit = {k for k, v in given.items() if v is not defaults.get(k, v)}
    hidden: dict[str, Any] = {"_summary_depth": 1, "_resume_from_checkpoint": None}
    hidden["_checkpointing_keyword"] = (
        "checkpoint_callback"
        if "checkpoint_callback" in extra
        else ("barebones" if given["barebones"] is True else "enable_checkpointing")
    )
    for name, value in extra.items():
        if name not in LEGACY_MAPPED and name not in LEGACY_REFUSED:
            raise unknown_keyword(name, value, [*defaults, *LEGACY_MAPPED, *LEGACY_REFUSED])
        mapping, warn = map_legacy(name, value)
        for key, mapped in mapping.items():
            if key in explicit:
                raise MisconfigurationError(
                    f"Trainer({name}={safe_repr(value)}, {key}={safe_repr(given[key])}): both say "
                    "the same thing. "
                    f"Fix: keep {key}={safe_repr(given[key])} and drop {name}."
                )
            (hidden if key.startswith("_") else given)[key] = mapped
        warn()
    _refuse_unsupported(given)
    _barebones(given, explicit)
    return _resolve(given, hidden)


def _resolve(given: dict[str, Any], hidden: dict[str, Any]) -> LoopConfig:
    fields: dict[str, Any] = {}
    fields.update(_durations(given))
    fields.update(_evaluation(given))
    fields.update(_features(given, hidden))
    fields["accumulate_grad_batches"], fields["accumulate_schedule"] = check_accumulation(
        given["accumulate_grad_batches"]
    )
    fields["gradient_clip_val"], fields["gradient_clip_algorithm"] = check_gradient_clip(given)
    fast = given["fast_dev_run"]
    if isinstance(fast, bool):
        fields["fast_dev_run"] = int(fast)
    else:
        fields["fast_dev_run"] = check_int(
            "fast_dev_run", fast, minimum=0, meaning="True or n: n batches of everything"
        )
    _say_limits(given, fast_dev_run=bool(fields["fast_dev_run"]))
    if fields["fast_dev_run"]:
        _fast_dev_run(fields, fields["fast_dev_run"])
    return LoopConfig(**fields)


#: what Lightning says a limit given as 1 (or 1.0) means, by keyword (else: "1 batch will be
#: used." / "100% of the batches will be used.")
_ONE = {
    "limit_train_batches": (
        "1 batch per epoch will be used.",
        "100% of the batches per epoch will be used.",
    ),
    "val_check_interval": (
        "validation will run after every batch.",
        "validation will run at the end of the training epoch.",
    ),
}


def _say_limits(given: dict[str, Any], *, fast_dev_run: bool) -> None:
    """Lightning's INFO line for a batch limit given as 1 or 1.0, which its type tells apart
    (one batch, or all of them), in Lightning's order (``_init_debugging_flags``):
    ``overfit_batches``; then, without fast_dev_run (which sets them), the limits overfitting
    leaves alone and ``val_check_interval``."""
    names = ["overfit_batches"]
    if not fast_dev_run:
        overfit = given["overfit_batches"]
        names += [] if overfit else ["limit_train_batches", "limit_val_batches"]
        names += ["limit_test_batches", "limit_predict_batches", "val_check_interval"]
    for name in names:
        value = given[name]
        one, whole = _ONE.get(name, ("1 batch will be used.", "100% of the batches will be used."))
        if isinstance(value, int) and not isinstance(value, bool) and value == 1:
            rank_zero_info(f"`Trainer({name}=1)` was configured so {one}")
        elif isinstance(value, float) and value == 1.0:
            # word for word, the doubled full stop included (Lightning's f-string adds one)
            rank_zero_info(f"`Trainer({name}=1.0)` was configured so {whole}.")


def _durations(given: dict[str, Any]) -> dict[str, Any]:
    max_steps = check_int("max_steps", given["max_steps"], minimum=-1, meaning="-1: no limit")
    max_time = parse_max_time("max_time", given["max_time"])
    max_epochs = check_int(
        "max_epochs", given["max_epochs"], minimum=-1, allow_none=True, meaning="-1: no limit"
    )
    max_epochs_given = max_epochs
    if max_epochs is None:
        # Lightning's (_parse_loop_limits): no epoch limit where steps or a Timer end the fit,
        # max_time's or one among the callbacks (a Timer without a duration included)
        timed = max_time is not None or _has_timer(given["callbacks"])
        max_epochs = 1000 if max_steps == -1 and not timed else -1
    min_epochs_given = check_int("min_epochs", given["min_epochs"], minimum=0, allow_none=True)
    min_epochs = min_epochs_given or 0
    min_steps = check_int("min_steps", given["min_steps"], minimum=0, allow_none=True)
    assert max_steps is not None
    for low, high, lo_name, hi_name in (
        (min_epochs, max_epochs, "min_epochs", "max_epochs"),
        (min_steps or 0, max_steps, "min_steps", "max_steps"),
    ):
        if high >= 0 and low > high:
            raise MisconfigurationError(
                f"Trainer({lo_name}={low}, {hi_name}={high}): {lo_name} exceeds {hi_name}. "
                f"Fix: Trainer({lo_name}={high}, {hi_name}={high})."
            )
    if min_epochs_given is None and min_steps is not None:
        min_epochs = 1  # Lightning's: a stop asked for in the first epoch waits for its end
    return {
        "max_epochs": max_epochs,
        "max_epochs_given": max_epochs_given,
        "min_epochs": min_epochs,
        "min_epochs_given": min_epochs_given,
        "max_steps": max_steps,
        "min_steps": min_steps,
        "max_time": max_time,
    }


def _root_dir(given: Any) -> str:
    """``default_root_dir`` as Lightning's property reads it: ``~`` expanded, normalized; the
    working directory when none is given."""
    return os.path.normpath(
        os.path.expanduser(check_path("default_root_dir", given) or os.getcwd())
    )


def _has_timer(callbacks: Any) -> bool:
    items = callbacks if isinstance(callbacks, list | tuple) else [callbacks]
    return any(isinstance(cb, Timer) for cb in items)


def _evaluation(given: dict[str, Any]) -> dict[str, Any]:
    check_val = check_int(
        "check_val_every_n_epoch", given["check_val_every_n_epoch"], minimum=1, allow_none=True
    )
    interval = check_val_check_interval(given["val_check_interval"])
    if check_val is None and isinstance(interval, float):
        raise MisconfigurationError(
            f"Trainer(check_val_every_n_epoch=None, val_check_interval={safe_repr(interval)}): "
            "without "
            f"epochs, the interval counts batches. Fix: val_check_interval=<an int>."
        )
    sanity = given["num_sanity_val_steps"]
    overfit = check_limit("overfit_batches", given["overfit_batches"], allow_none=False) or 0
    fields: dict[str, Any] = {
        f"limit_{stage}_batches": check_limit(
            f"limit_{stage}_batches", given[f"limit_{stage}_batches"]
        )
        for stage in ("train", "val", "test", "predict")
    }
    if overfit:
        fields["limit_train_batches"] = fields["limit_val_batches"] = overfit
    fields.update(
        overfit_batches=overfit,
        val_check_interval=interval,
        check_val_every_n_epoch=check_val,
        num_sanity_val_steps=check_int(
            "num_sanity_val_steps",
            2 if sanity is None else sanity,
            minimum=-1,
            meaning="-1: the whole loader",
        ),
    )
    return fields


def _features(given: dict[str, Any], hidden: dict[str, Any]) -> dict[str, Any]:
    every = given["log_every_n_steps"]
    fields: dict[str, Any] = {
        name: check_bool(name, given[name], allow_none=True) is not False
        for name in ("enable_checkpointing", "enable_progress_bar", "enable_model_summary")
    }
    for name in ("inference_mode", "use_distributed_sampler", "detect_anomaly", "barebones"):
        fields[name] = check_bool(name, given[name])
    fields["enable_autolog_hparams"] = check_bool(
        "enable_autolog_hparams", given["enable_autolog_hparams"]
    )
    resume = hidden["_resume_from_checkpoint"]
    fields.update(
        log_every_n_steps=check_int(
            "log_every_n_steps",
            50 if every is None else every,
            minimum=0,
            meaning="0: no step rows",
        ),
        summary_depth=int(hidden["_summary_depth"]),
        checkpointing_keyword=str(hidden["_checkpointing_keyword"]),
        deterministic=False if given["deterministic"] is None else given["deterministic"],
        benchmark=check_bool("benchmark", given["benchmark"], allow_none=True),
        reload_dataloaders_every_n_epochs=check_int(
            "reload_dataloaders_every_n_epochs",
            given["reload_dataloaders_every_n_epochs"],
            minimum=0,
            meaning="0: never",
        ),
        default_root_dir=_root_dir(given["default_root_dir"]),
        resume_from_checkpoint=os.fspath(resume) if resume is not None else None,
        max_restarts=check_int(
            "max_restarts", given["max_restarts"], minimum=0, meaning="0: a failure ends the job"
        ),
        logger=check_logger(given["logger"]),
        callbacks=check_callbacks(given["callbacks"]),
    )
    return fields


def _fast_dev_run(fields: dict[str, Any], n: int) -> None:
    """n batches of everything, one epoch, no sanity check, nothing written (Lightning's: the
    checkpoint callbacks stay, and skip saving)."""
    fields.update(
        max_epochs=1,
        max_steps=n,
        num_sanity_val_steps=0,
        check_val_every_n_epoch=1,
        val_check_interval=1.0,
        logger=False,  # nothing written (Lightning's DummyLogger); a ModelCheckpoint saves nothing
        limit_test_batches=n,
        limit_predict_batches=n,
    )
    if not fields["overfit_batches"]:
        fields["limit_train_batches"] = fields["limit_val_batches"] = n
