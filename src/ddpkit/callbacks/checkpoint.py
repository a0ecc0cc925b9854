"""``ModelCheckpoint``: Lightning's checkpoint callback (same arguments, names and file layout).

Every decision (save or not, which file, which old file goes) is made on global rank zero from
its metrics and broadcast, so all ranks hold the same ``best_model_path`` and call
``trainer.save_checkpoint`` the same number of times; only rank zero writes (atomically).
"""

from __future__ import annotations

import math
import os
import re
import shutil
import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, ClassVar

import torch

from ddpkit.callbacks.base import Callback
from ddpkit.errors import DDPKitWarning, MisconfigurationError
from ddpkit.utilities.rank_zero import rank_zero_warn

__all__ = ["ModelCheckpoint", "format_checkpoint_name"]

_STATE = (
    "best_model_path",
    "best_model_score",
    "best_k_models",
    "kth_best_model_path",
    "kth_value",
    "last_model_path",
    "current_score",
)


def format_checkpoint_name(
    template: str | None, metrics: dict[str, Any], auto_insert_metric_name: bool = True
) -> str:
    """``"{epoch}-{val_loss:.2f}"`` → ``"epoch=3-val_loss=0.12"`` (Lightning's rules: a name that
    was not logged formats as 0)."""
    filename = template or "{epoch}-{step}"
    groups = sorted(re.findall(r"(\{.*?)[:\}]", filename), key=len, reverse=True)
    values = dict(metrics)
    for group in groups:
        name = group[1:]
        if auto_insert_metric_name:
            filename = filename.replace(group, f"{name}={{{name}")
        filename = filename.replace(group, f"{{0[{name}]")
        values.setdefault(name, torch.tensor(0))
    return filename.format(values)


@dataclass
class _Plan:
    """What rank zero decided: files to write (and link), files to remove, the new state."""

    saves: list[str] = field(default_factory=list)
    link: tuple[str, str] | None = None
    removes: list[str] = field(default_factory=list)
    state: dict[str, Any] = field(default_factory=dict)


class ModelCheckpoint(Callback):
    """Save the model during ``fit``: the ``save_top_k`` best by ``monitor`` (or the latest when
    ``monitor`` is None), plus ``last.ckpt`` with ``save_last``; after validation every
    ``every_n_epochs`` epochs by default, or every ``every_n_train_steps`` steps, or every
    ``train_time_interval``. Files go to ``dirpath`` (default: the first logger's
    ``log_dir/checkpoints``, else ``default_root_dir/checkpoints``)."""

    CHECKPOINT_JOIN_CHAR: ClassVar[str] = "-"
    CHECKPOINT_EQUALS_CHAR: ClassVar[str] = "="
    CHECKPOINT_NAME_LAST: ClassVar[str] = "last"
    FILE_EXTENSION: ClassVar[str] = ".ckpt"
    STARTING_VERSION: ClassVar[int] = 1

    def __init__(
        self,
        dirpath: str | os.PathLike[str] | None = None,
        filename: str | None = None,
        monitor: str | None = None,
        verbose: bool = False,
        save_last: bool | str | None = None,
        save_top_k: int = 1,
        save_on_exception: bool = False,
        save_weights_only: bool = False,
        mode: str = "min",
        auto_insert_metric_name: bool = True,
        every_n_train_steps: int | None = None,
        train_time_interval: timedelta | None = None,
        every_n_epochs: int | None = None,
        save_on_train_epoch_end: bool | None = None,
        enable_version_counter: bool = True,
    ) -> None:
        _check_arguments(
            save_top_k,
            mode,
            monitor,
            save_last,
            every_n_train_steps,
            every_n_epochs,
            train_time_interval,
        )
        self.dirpath = os.path.realpath(os.path.expanduser(dirpath)) if dirpath else None
        self.filename, self.monitor, self.verbose = filename, monitor, verbose
        self.save_last, self.save_top_k, self.mode = save_last, save_top_k, mode
        self.save_on_exception, self.save_weights_only = save_on_exception, save_weights_only
        self.auto_insert_metric_name = auto_insert_metric_name
        self._save_on_train_epoch_end = save_on_train_epoch_end
        self._enable_version_counter = enable_version_counter
        if every_n_train_steps is None and every_n_epochs is None and train_time_interval is None:
            every_n_epochs, every_n_train_steps = 1, 0
        self._every_n_epochs = every_n_epochs or 0
        self._every_n_train_steps = every_n_train_steps or 0
        self._train_time_interval = train_time_interval
        self._last_time_checked: float | None = None
        self._last_global_step_saved = 0  # nothing to save before the first step
        self.best_model_path = ""
        self.best_model_score: torch.Tensor | None = None
        self.best_k_models: dict[str, torch.Tensor] = {}
        self.kth_best_model_path = ""
        self.kth_value = torch.tensor(math.inf if mode == "min" else -math.inf)
        self.last_model_path = ""
        self.current_score: torch.Tensor | None = None

    @property
    def state_key(self) -> str:
        return self._generate_state_key(
            monitor=self.monitor,
            mode=self.mode,
            every_n_train_steps=self._every_n_train_steps,
            every_n_epochs=self._every_n_epochs,
            train_time_interval=self._train_time_interval,
        )

    @property
    def every_n_epochs(self) -> int:
        return self._every_n_epochs

    # -- hooks ---------------------------------------------------------------------------------

    def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
        self.dirpath = trainer.strategy.broadcast_object(self._resolve_dir(trainer))
        # A directory this callback wrote in an earlier fit is no surprise.
        written = self.best_model_path or self.last_model_path
        if trainer.is_global_zero and stage == "fit" and self.save_top_k != 0 and not written:
            folder = Path(self.dirpath)
            if folder.is_dir() and any(folder.iterdir()):
                rank_zero_warn(
                    f"ModelCheckpoint: the checkpoint directory {self.dirpath} exists and is not "
                    f"empty; files of an earlier run may be replaced.",
                    DDPKitWarning,
                )

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        self._last_time_checked = time.monotonic()

    def on_train_batch_end(
        self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        if self._skip(trainer):
            return
        every = self._every_n_train_steps
        due = every >= 1 and trainer.global_step % every == 0
        if self._train_time_interval is not None and self._last_time_checked is not None:
            elapsed = time.monotonic() - self._last_time_checked
            # Ranks' clocks differ: rank zero's decides.
            late = trainer.strategy.broadcast_object(
                elapsed >= self._train_time_interval.total_seconds()
            )
            if late:
                self._last_time_checked = time.monotonic()
            due = due or late
        if due:
            self._save(trainer, topk=True)

    def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        if not self._skip(trainer) and self._on_train_epoch_end(trainer):
            self._save(trainer, topk=self._epoch_due(trainer))

    def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
        if not self._skip(trainer) and not self._on_train_epoch_end(trainer):
            self._save(trainer, topk=self._epoch_due(trainer))

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        if self.save_last and not self.last_model_path and trainer.global_step > 0:
            self._save(trainer, topk=False, force_last=True)

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        # Only this rank may be alive: write without waiting for the others.
        if (
            self.save_on_exception
            and trainer.is_global_zero
            and trainer.state.fn == "fit"
            and not trainer.sanity_checking
            and self._last_global_step_saved != trainer.global_step
        ):
            path = self.format_checkpoint_name(self._candidates(trainer), prefix="exception")
            trainer.save_checkpoint(path, weights_only=self.save_weights_only, barrier=False)

    def state_dict(self) -> dict[str, Any]:
        return {"monitor": self.monitor, "dirpath": self.dirpath, **self._state()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if state_dict.get("dirpath", self.dirpath) == self.dirpath:
            for name in _STATE:
                if name in state_dict:
                    setattr(self, name, state_dict[name])
        self.best_model_path = state_dict.get("best_model_path", self.best_model_path)

    # -- names ---------------------------------------------------------------------------------

    def format_checkpoint_name(
        self,
        metrics: dict[str, Any],
        filename: str | None = None,
        ver: int | None = None,
        prefix: str | None = None,
    ) -> str:
        name = format_checkpoint_name(
            filename or self.filename, metrics, self.auto_insert_metric_name
        )
        if prefix is not None:
            name = self.CHECKPOINT_JOIN_CHAR.join([prefix, name])
        if ver is not None:
            name = self.CHECKPOINT_JOIN_CHAR.join([name, f"v{ver}"])
        name += self.FILE_EXTENSION
        return os.path.join(self.dirpath, name) if self.dirpath else name

    def _resolve_dir(self, trainer: Any) -> str:
        if self.dirpath is not None:
            return self.dirpath
        if trainer.loggers:
            first = trainer.loggers[0]
            save_dir = first.save_dir if first.save_dir is not None else trainer.default_root_dir
            version = (
                first.version if isinstance(first.version, str) else f"version_{first.version}"
            )
            return os.path.join(save_dir, str(first.name), version, "checkpoints")
        return os.path.join(trainer.default_root_dir, "checkpoints")

    # -- deciding ------------------------------------------------------------------------------

    def _skip(self, trainer: Any) -> bool:
        return (
            bool(trainer.fast_dev_run)
            or trainer.state.fn != "fit"
            or trainer.sanity_checking
            or self._last_global_step_saved == trainer.global_step
        )

    def _epoch_due(self, trainer: Any) -> bool:
        every = self._every_n_epochs
        return every >= 1 and (trainer.current_epoch + 1) % every == 0

    def _on_train_epoch_end(self, trainer: Any) -> bool:
        if self._save_on_train_epoch_end is not None:
            return self._save_on_train_epoch_end
        if trainer.check_val_every_n_epoch != 1:
            return False
        if sum(trainer.num_val_batches) == 0:
            return True
        return bool(trainer.val_check_interval == 1.0)

    def _candidates(self, trainer: Any) -> dict[str, Any]:
        values = dict(trainer.callback_metrics)
        values["epoch"] = torch.tensor(trainer.current_epoch)
        values["step"] = torch.tensor(trainer.global_step)
        return values

    def _state(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in _STATE}

    def _save(self, trainer: Any, *, topk: bool, force_last: bool = False) -> None:
        plan = None
        if trainer.is_global_zero:
            plan = self._plan(trainer, topk=topk, force_last=force_last)
        plan = trainer.strategy.broadcast_object(plan)
        assert isinstance(plan, _Plan)
        for name, value in plan.state.items():
            setattr(self, name, value)
        for path in plan.saves:
            trainer.save_checkpoint(path, weights_only=self.save_weights_only)
            self._last_global_step_saved = trainer.global_step
        if trainer.is_global_zero:
            if plan.link is not None:
                _link(*plan.link)
            for path in plan.removes:
                Path(path).unlink(missing_ok=True)
        trainer.strategy.barrier("ModelCheckpoint")

    def _plan(self, trainer: Any, *, topk: bool, force_last: bool) -> _Plan:
        plan = _Plan()
        candidates = self._candidates(trainer)
        if topk and self.save_top_k != 0:
            if self.monitor is None:
                self._plan_latest(plan, candidates)
            else:
                self._plan_monitored(trainer, plan, candidates)
        if self.save_last and (plan.saves or force_last or self.save_last == "link"):
            self._plan_last(plan, candidates)
        plan.state = self._state()
        return plan

    def _free_name(self, candidates: dict[str, Any], *, keep: str = "", **kw: Any) -> str:
        """The formatted name, with -v1, -v2 ... when a file of that name exists already."""
        path = self.format_checkpoint_name(candidates, **kw)
        version = self.STARTING_VERSION
        while self._enable_version_counter and os.path.exists(path) and path != keep:
            path = self.format_checkpoint_name(candidates, ver=version, **kw)
            version += 1
        return path

    def _plan_latest(self, plan: _Plan, candidates: dict[str, Any]) -> None:
        path = self._free_name(candidates, keep=self.best_model_path)
        previous, self.best_model_path = self.best_model_path, path
        plan.saves.append(path)
        if self.save_top_k == 1 and previous and previous != path and self._owned(previous):
            plan.removes.append(previous)

    def _plan_monitored(self, trainer: Any, plan: _Plan, candidates: dict[str, Any]) -> None:
        assert self.monitor is not None
        current = candidates.get(self.monitor)
        if current is None:
            raise MisconfigurationError(
                f"ModelCheckpoint(monitor={self.monitor!r}) could not find {self.monitor!r} in "
                f"the logged metrics {sorted(trainer.callback_metrics)}. Fix: "
                f"self.log({self.monitor!r}, value) in the module, or monitor one of those."
            )
        current = torch.as_tensor(current).detach().float().cpu()
        if torch.isnan(current):
            current = torch.tensor(math.inf if self.mode == "min" else -math.inf)
        better = torch.lt if self.mode == "min" else torch.gt
        k = len(self.best_k_models) + 1 if self.save_top_k == -1 else self.save_top_k
        if len(self.best_k_models) >= k and not better(current, self.kth_value):
            if self.verbose:
                print(f"Epoch {trainer.current_epoch}: {self.monitor!r} was not in top {k}")
            return
        dropped = ""
        if len(self.best_k_models) >= k:
            dropped = self.kth_best_model_path
            self.best_k_models.pop(dropped)
        path = self._free_name(candidates, keep=dropped)
        self.current_score = current
        self.best_k_models[path] = current
        pick = max if self.mode == "min" else min
        if len(self.best_k_models) == k:
            self.kth_best_model_path = pick(
                self.best_k_models, key=lambda p: float(self.best_k_models[p])
            )
            self.kth_value = self.best_k_models[self.kth_best_model_path]
        best = min if self.mode == "min" else max
        self.best_model_path = best(self.best_k_models, key=lambda p: float(self.best_k_models[p]))
        self.best_model_score = self.best_k_models[self.best_model_path]
        if self.verbose:
            print(
                f"Epoch {trainer.current_epoch}: {self.monitor!r} reached {float(current):.5f} "
                f"(best {float(self.best_model_score):.5f}), saving model to {path!r} as top {k}"
            )
        plan.saves.append(path)
        if dropped and dropped != path and self._owned(dropped):
            plan.removes.append(dropped)

    def _plan_last(self, plan: _Plan, candidates: dict[str, Any]) -> None:
        path = self._free_name(
            candidates, keep=self.last_model_path, filename=self.CHECKPOINT_NAME_LAST
        )
        previous, self.last_model_path = self.last_model_path, path
        if self.save_last == "link" and plan.saves:
            plan.link = (plan.saves[-1], path)
        else:
            plan.saves.append(path)
        if previous and previous != path and self._owned(previous):
            plan.removes.append(previous)

    def _owned(self, path: str) -> bool:
        """Only files in this callback's own directory are ever removed."""
        return (
            self.dirpath is not None
            and Path(self.dirpath).absolute() in Path(path).absolute().parents
        )


def _link(target: str, link: str) -> None:
    if os.path.abspath(target) == os.path.abspath(link):
        return
    if os.path.islink(link) or os.path.isfile(link):
        os.remove(link)
    try:
        os.symlink(os.path.relpath(target, os.path.dirname(link)), link)
    except OSError:
        shutil.copy(target, link)


def _check_arguments(
    save_top_k: Any,
    mode: Any,
    monitor: Any,
    save_last: Any,
    every_n_train_steps: Any,
    every_n_epochs: Any,
    train_time_interval: Any,
) -> None:
    def bad(what: str, fix: str) -> MisconfigurationError:
        return MisconfigurationError(f"ModelCheckpoint({what}): {fix}")

    if mode not in ("min", "max"):
        raise bad(f"mode={mode!r}", "choose 'max' or 'min'.")
    if isinstance(save_top_k, bool) or not isinstance(save_top_k, int) or save_top_k < -1:
        raise bad(f"save_top_k={save_top_k!r}", "pass -1 (keep all), 0 (none) or a count ≥ 1.")
    if monitor is None and save_top_k not in (-1, 0, 1):
        raise bad(
            f"save_top_k={save_top_k}, monitor=None",
            "the best k need a metric to rank by. Fix: pass monitor='val_loss' (a logged name).",
        )
    if save_last not in (None, True, False, "link"):
        raise bad(f"save_last={save_last!r}", "pass True, False, None or 'link'.")
    for name, value in (
        ("every_n_train_steps", every_n_train_steps),
        ("every_n_epochs", every_n_epochs),
    ):
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or value < 0
        ):
            raise bad(f"{name}={value!r}", "pass an int ≥ 0 (0 turns it off) or None.")
    if train_time_interval is not None and not isinstance(train_time_interval, timedelta):
        raise bad(
            f"train_time_interval={train_time_interval!r}",
            "pass a datetime.timedelta, e.g. timedelta(minutes=30).",
        )
    given = {
        "every_n_train_steps": every_n_train_steps,
        "every_n_epochs": every_n_epochs,
        "train_time_interval": train_time_interval,
    }
    triggers = [name for name, value in given.items() if value]
    if len(triggers) > 1:
        raise bad(
            ", ".join(f"{name}={given[name]!r}" for name in triggers),
            "they exclude each other. Fix: keep one of them.",
        )
