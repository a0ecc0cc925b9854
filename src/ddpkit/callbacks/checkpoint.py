"""``ModelCheckpoint``: Lightning's checkpoint callback (same arguments, names and file layout).

Every decision (save or not, which file, which old file goes) is made on global rank zero from
its metrics and broadcast, so all ranks hold the same ``best_model_path`` and call
``trainer.save_checkpoint`` the same number of times; only rank zero writes (atomically).
"""

from __future__ import annotations

import json
import math
import os
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch

from ddpkit._runtime.restart.attempt import current_attempt
from ddpkit.callbacks.base import Callback
from ddpkit.callbacks.checkpoint_plan import (
    STATE,
    CheckpointPlanner,
    Plan,
    check_arguments,
    check_paths,
    format_checkpoint_name,
    link,
)
from ddpkit.errors import DDPKitWarning, MisconfigurationError
from ddpkit.utilities._files import atomic_write, sweep_partials
from ddpkit.utilities._rank_zero import rank_zero_info, rank_zero_warn

__all__ = ["ModelCheckpoint", "format_checkpoint_name"]


class ModelCheckpoint(CheckpointPlanner, Callback):
    """Save the model during ``fit``: the ``save_top_k`` best by ``monitor`` (or the latest when
    ``monitor`` is None), plus ``last.ckpt`` with ``save_last``; after validation every
    ``every_n_epochs`` epochs by default, or every ``every_n_train_steps`` steps, or every
    ``train_time_interval``. Files go to ``dirpath`` (default: the first logger's
    ``log_dir/checkpoints``, else ``default_root_dir/checkpoints``)."""

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
        check_paths(dirpath, filename)
        check_arguments(
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
        if monitor is None and save_top_k == -1 and save_last is True:  # 1.x said so too
            rank_zero_info(
                "ModelCheckpoint(save_last=True, save_top_k=-1, monitor=None) will duplicate the "
                "last checkpoint saved."
            )
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
        self._last_checkpoint_saved = ""

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
        if stage != "fit":
            return  # it saves during fit only (and a broadcast here would join every stage)
        self.dirpath = trainer.strategy.broadcast_json(self._resolve_dir(trainer))
        # A directory this callback wrote in an earlier fit, or in the attempt before this
        # restart, is no surprise.
        written = self.best_model_path or self.last_model_path or current_attempt().number > 0
        if trainer.is_global_zero:
            # What a writer killed in an earlier run left (its partial files), goes now.
            sweep_partials(self.dirpath)
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
        # Saving by epoch only (the default): nothing to do per step, and this runs every step.
        if self._every_n_train_steps < 1 and self._train_time_interval is None:
            return
        if self._skip(trainer):
            return
        every = self._every_n_train_steps
        due = every >= 1 and trainer.global_step % every == 0
        due = self._time_due(trainer) or due
        if due:
            self._save(trainer, topk=True)

    def _time_due(self, trainer: Any) -> bool:
        """``train_time_interval`` passed since the last save (the clock read once: rank zero's
        decides, as ranks' clocks differ)."""
        if self._train_time_interval is None or self._last_time_checked is None:
            return False
        now = time.monotonic()
        late = now - self._last_time_checked >= self._train_time_interval.total_seconds()
        late = bool(trainer.strategy.broadcast_json(late))
        if late:
            self._last_time_checked = now
        return late

    def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        if not self._skip(trainer) and self._on_train_epoch_end(trainer):
            self._save(trainer, topk=self._epoch_due(trainer))

    def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
        if not self._skip(trainer) and not self._on_train_epoch_end(trainer):
            self._save(trainer, topk=self._epoch_due(trainer))

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        if trainer.fast_dev_run:
            return
        if self.save_last and not self._last_checkpoint_saved and trainer.global_step > 0:
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

    def to_yaml(self, filepath: str | os.PathLike[str] | None = None) -> None:
        """Write ``best_k_models`` (path: score) to ``filepath``, by default
        ``<dirpath>/best_k_models.yaml`` (Lightning's; written as JSON, which is YAML)."""
        best_k = {path: float(score) for path, score in self.best_k_models.items()}
        if filepath is None:
            if self.dirpath is None:
                raise MisconfigurationError(
                    "ModelCheckpoint.to_yaml(): the callback has no dirpath before a fit set it "
                    "up. Fix: pass a filepath, or call it after trainer.fit(...)."
                )
            filepath = os.path.join(self.dirpath, "best_k_models.yaml")
        target = Path(filepath)
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(target, (json.dumps(best_k, indent=2, sort_keys=True) + "\n").encode())

    def folders_to_write(self, trainer: Any) -> list[str]:
        """The folder this callback will save into (checked before a fit starts)."""
        return [self._resolve_dir(trainer)] if self.save_top_k != 0 or self.save_last else []

    def state_dict(self) -> dict[str, Any]:
        return {"monitor": self.monitor, "dirpath": self.dirpath, **self._state()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if state_dict.get("dirpath", self.dirpath) == self.dirpath:
            for name in STATE:
                if name in state_dict:
                    setattr(self, name, state_dict[name])
        self.best_model_path = state_dict.get("best_model_path", self.best_model_path)

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

    def _save(self, trainer: Any, *, topk: bool, force_last: bool = False) -> None:
        decided = None
        if trainer.is_global_zero:
            decided = self._plan(trainer, topk=topk, force_last=force_last).to_json()
        plan = Plan.from_json(trainer.strategy.broadcast_json(decided))
        for name, value in plan.state.items():
            setattr(self, name, value)
        last = self.last_model_path
        for path in plan.saves:
            # a top-k file carries the last.ckpt named before it, as Lightning's (written first)
            self.last_model_path = last if path == last else plan.previous_last
            trainer.save_checkpoint(path, weights_only=self.save_weights_only)
            self._last_global_step_saved, self._last_checkpoint_saved = trainer.global_step, path
        self.last_model_path = last
        if trainer.is_global_zero:
            if plan.link is not None:
                link(*plan.link)
            for path in plan.removes:
                Path(path).unlink(missing_ok=True)
            if plan.saves or plan.link:
                for logger in trainer.loggers:
                    getattr(logger, "after_save_checkpoint", lambda _: None)(self)
        trainer.strategy.barrier("ModelCheckpoint")
