"""``ModelCheckpoint``: Lightning's checkpoint callback (same arguments, names and file layout).

Every decision (save or not, which file, which old file goes) is made on global rank zero from
its metrics and broadcast (a :class:`SaveDecision`), so all ranks hold the same
``best_model_path`` and call ``trainer.save_checkpoint`` the same number of times; only rank
zero writes (atomically).

Lightning's rules: a name template formats logged values (``{epoch}-{val_loss:.2f}`` →
``epoch=3-val_loss=0.12``), an existing name gets ``-v1``, ``-v2``; a new best pushes the worst
of the k out; ``last.ckpt`` follows every save; only files in the callback's own directory are
ever removed.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from torch import nn

from ddpkit._runtime.restart.attempt import current_attempt
from ddpkit.callbacks._base import Callback
from ddpkit.errors import DDPKitWarning, MisconfigurationError
from ddpkit.loggers._base import write_yaml
from ddpkit.utilities._files import atomic_write, sweep_partials
from ddpkit.utilities._paths import local_path, refuse_nul
from ddpkit.utilities._rank_zero import log_info, rank_zero_info, rank_zero_warn
from ddpkit.utilities._reprs import safe_repr

if TYPE_CHECKING:
    from ddpkit.core._protocols import CallbackTrainer


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


#: the missing-monitor warnings given in this process (Lightning's WarningCache: each once)
_WARNED: set[str] = set()


@dataclass
class SaveDecision:
    """What rank zero decided at a save point: files to write (and link), files to remove, the
    new state.

    It goes to the other ranks as JSON (:meth:`to_json`), never as a pickle: the scores are
    float32 scalars, exact as JSON numbers."""

    saves: list[str] = field(default_factory=list)
    link: tuple[str, str] | None = None
    removes: list[str] = field(default_factory=list)
    state: dict[str, Any] = field(default_factory=dict)
    #: ``last_model_path`` before this point: what the top-k files written now carry (Lightning
    #: writes them before it names the new last.ckpt)
    previous_last: str = ""

    def to_json(self) -> dict[str, Any]:
        return {**vars(self), "state": _scores_as(float, self.state)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SaveDecision:
        link = data["link"]  # a JSON list
        state = _scores_as(_score, data["state"])
        return cls(**{**data, "state": state, "link": tuple(link) if link is not None else None})


def _score(value: float) -> torch.Tensor:
    return torch.tensor(value, dtype=torch.float32)


def _scores_as(convert: Callable[[Any], Any], state: dict[str, Any]) -> dict[str, Any]:
    """``state`` with every score (of ``_SCORES`` and ``best_k_models``) converted, None kept."""
    scores = {name: None if state[name] is None else convert(state[name]) for name in _SCORES}
    best_k = {path: convert(score) for path, score in state["best_k_models"].items()}
    return {**state, **scores, "best_k_models": best_k}


#: what rank zero's decision changes (broadcast to the other ranks; saved in checkpoints)
STATE = (
    "best_model_path",
    "best_model_score",
    "best_k_models",
    "kth_best_model_path",
    "kth_value",
    "last_model_path",
    "current_score",
)
#: the scalar tensors of STATE (best_k_models holds more of them)
_SCORES = ("best_model_score", "kth_value", "current_score")


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
        _check_paths(dirpath, filename)
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
        # the file this callback saved last (Lightning's): what save_last="link" points at
        self._last_checkpoint_saved = ""
        # a step save due before a validation produced its monitored value (Lightning's)
        self._defer_save_until_validation = False
        # the fit's latest validation ran a batch (Lightning's `val_loop._has_run`)
        self._validation_ran = False

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

    def setup(self, trainer: CallbackTrainer, pl_module: nn.Module, stage: str) -> None:
        if stage != "fit":
            return  # it saves during fit only (and a broadcast here would join every stage)
        self.dirpath = trainer.strategy.broadcast_json(self._resolve_dir(trainer))
        # A directory this callback wrote in an earlier fit, or in the attempt before this
        # restart, is no surprise.
        written = self.best_model_path or self.last_model_path or current_attempt().number > 0
        if trainer.is_global_zero:
            # What a writer killed in an earlier run left (its partial files), goes now.
            sweep_partials(self.dirpath)
            folder = local_path(self.dirpath)
            if self.save_top_k != 0 and not written and folder.is_dir() and any(folder.iterdir()):
                rank_zero_warn(
                    f"ModelCheckpoint: the checkpoint directory {self.dirpath} exists and is not "
                    f"empty; files of an earlier run may be replaced.",
                    DDPKitWarning,
                )

    def on_train_start(self, trainer: CallbackTrainer, pl_module: nn.Module) -> None:
        self._last_time_checked = time.monotonic()

    def on_validation_start(self, trainer: CallbackTrainer, pl_module: nn.Module) -> None:
        if trainer.state.fn == "fit":  # (a sanity check too: Lightning's loop resets then)
            self._validation_ran = False

    def on_validation_batch_end(
        self,
        trainer: CallbackTrainer,
        pl_module: nn.Module,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        # Lightning's val_loop._has_run: after it a missing monitor is an error
        if trainer.state.fn == "fit" and not trainer.sanity_checking:
            self._validation_ran = True

    def on_train_batch_end(
        self,
        trainer: CallbackTrainer,
        pl_module: nn.Module,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        # Saving by epoch only (the default): nothing to do per step, and this runs every step.
        if self._every_n_train_steps < 1 and self._train_time_interval is None:
            return
        if self._skip(trainer):
            return
        every = self._every_n_train_steps
        # the clock first: every rank takes part in its broadcast, whatever the step says
        if not self._time_due(trainer) and not (every >= 1 and trainer.global_step % every == 0):
            return
        if self.monitor is not None and (
            self.monitor not in trainer.callback_metrics
            or (getattr(pl_module, "automatic_optimization", True) and self._val_follows(trainer))
        ):
            # Lightning 2.x's: a save due before the monitored value exists, or at an epoch's
            # last batch with a validation to follow (the value would be stale), is made at that
            # validation's end instead (manual optimization defers only the first).
            self._defer_save_until_validation = True
            return
        self._save(trainer, topk=True, force_last=True)  # Lightning's: last.ckpt at every one

    def _val_follows(self, trainer: CallbackTrainer) -> bool:
        """This is the epoch's last batch, and its validation runs next (Lightning's test)."""
        if self._on_train_epoch_end(trainer) or not trainer.is_last_batch:
            return False
        every = trainer.check_val_every_n_epoch
        due = every is None or (trainer.current_epoch + 1) % every == 0
        return due and sum(trainer.num_val_batches) > 0

    def _time_due(self, trainer: CallbackTrainer) -> bool:
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

    def on_train_epoch_end(self, trainer: CallbackTrainer, pl_module: nn.Module) -> None:
        if not self._skip(trainer) and self._on_train_epoch_end(trainer):
            self._save(trainer, topk=self._epoch_due(trainer))

    def on_validation_end(self, trainer: CallbackTrainer, pl_module: nn.Module) -> None:
        if self._skip(trainer) or self._on_train_epoch_end(trainer):
            return
        if self._defer_save_until_validation:  # the step save put off until now
            self._defer_save_until_validation = False
            self._save(trainer, topk=True, force_last=True)
        else:
            self._save(trainer, topk=self._epoch_due(trainer))

    def on_train_end(self, trainer: CallbackTrainer, pl_module: nn.Module) -> None:
        if trainer.fast_dev_run:
            return
        if self.save_last and not self._last_checkpoint_saved and trainer.global_step > 0:
            self._save(trainer, topk=False, force_last=True)

    def on_exception(
        self, trainer: CallbackTrainer, pl_module: nn.Module, exception: BaseException
    ) -> None:
        # Only this rank may be alive: write without waiting for the others.
        if not (
            self.save_on_exception
            and trainer.is_global_zero
            and trainer.state.fn == "fit"
            and not trainer.fast_dev_run
            and not trainer.sanity_checking
            and self._last_global_step_saved != trainer.global_step
        ):
            return
        # Lightning's: the file its template names (over one of that name), then last.ckpt
        candidates = self._candidates(trainer)
        plan = SaveDecision(previous_last=self.last_model_path)
        plan.saves.append(self.format_checkpoint_name(candidates))
        if self.save_last:
            self._plan_last(plan, candidates)
        plan.state = self._state()
        self._carry_out(trainer, plan, barrier=False)
        # Lightning's line, its whitespace included (a backslash continuation in its f-string)
        log_info(
            f"An {type(exception).__name__} was raised with message: {' ' * 12}{exception}, "
            f"saved checkpoint to {plan.saves[0]}"
        )

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
        write_yaml(filepath, best_k)

    def folders_to_write(self, trainer: CallbackTrainer) -> list[str]:
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

    def _resolve_dir(self, trainer: CallbackTrainer) -> str:
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

    def _state(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in STATE}

    def _candidates(self, trainer: CallbackTrainer) -> dict[str, Any]:
        values = dict(trainer.callback_metrics)
        values["epoch"] = torch.tensor(trainer.current_epoch)
        values["step"] = torch.tensor(trainer.global_step)
        return values

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

    def _plan(self, trainer: CallbackTrainer, *, topk: bool, force_last: bool) -> SaveDecision:
        plan = SaveDecision(previous_last=self.last_model_path)
        candidates = self._candidates(trainer)
        if topk and self.save_top_k != 0:
            if self.monitor is None:
                self._plan_latest(plan, candidates)
            else:
                self._plan_monitored(trainer, plan, candidates)
        # Lightning's: last.ckpt when this point saved one, or a link to the one saved last
        linked = self.save_last == "link" and bool(self._last_checkpoint_saved)
        if self.save_last and (plan.saves or force_last or linked):
            self._plan_last(plan, candidates)
        plan.state = self._state()
        return plan

    def _free_name(self, candidates: dict[str, Any], *, keep: str = "", **kw: Any) -> str:
        """The formatted name, with -v1, -v2 ... when a file of that name exists already."""
        path = self.format_checkpoint_name(candidates, **kw)
        version = self.STARTING_VERSION
        while self._enable_version_counter and os.path.exists(local_path(path)) and path != keep:
            path = self.format_checkpoint_name(candidates, ver=version, **kw)
            version += 1
        return path

    def _plan_latest(self, plan: SaveDecision, candidates: dict[str, Any]) -> None:
        path = self._free_name(candidates, keep=self.best_model_path)
        previous, self.best_model_path = self.best_model_path, path
        plan.saves.append(path)
        if self.save_top_k == 1 and previous and previous != path and self._owned(previous):
            plan.removes.append(previous)

    def _plan_monitored(
        self, trainer: CallbackTrainer, plan: SaveDecision, candidates: dict[str, Any]
    ) -> None:
        assert self.monitor is not None
        current = candidates.get(self.monitor)
        if current is None:
            message = (
                f"ModelCheckpoint(monitor={safe_repr(self.monitor)}) could not find "
                f"{safe_repr(self.monitor)} in "
                f"the logged metrics {sorted(trainer.callback_metrics)}. Fix: "
                f"self.log({safe_repr(self.monitor)}, value) in the module, or monitor one of "
                "those."
            )
            if self._validation_ran:
                raise MisconfigurationError(message)
            # Lightning's: before the fit's first validation a missing value is a warning (once)
            # and no top-k save; the value may come with that validation.
            if message not in _WARNED:
                _WARNED.add(message)
                rank_zero_warn(
                    f"{message} No top-k checkpoint is saved until it is.", DDPKitWarning
                )
            if self.verbose:
                self._not_in_top_k(trainer)
            return
        current = torch.as_tensor(current).detach().float().cpu()
        if torch.isnan(current):
            current = torch.tensor(math.inf if self.mode == "min" else -math.inf)
        better = torch.lt if self.mode == "min" else torch.gt
        k = len(self.best_k_models) + 1 if self.save_top_k == -1 else self.save_top_k
        if len(self.best_k_models) >= k and not better(current, self.kth_value):
            if self.verbose:
                self._not_in_top_k(trainer)
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
            log_info(
                f"Epoch {trainer.current_epoch}, global step {trainer.global_step}: "
                f"{safe_repr(self.monitor)} reached "
                f"{float(current):.5f} "
                f"(best {float(self.best_model_score):.5f}), saving model to {safe_repr(path)} as "
                f"top {k}"
            )
        plan.saves.append(path)
        if dropped and dropped != path and self._owned(dropped):
            plan.removes.append(dropped)

    def _not_in_top_k(self, trainer: CallbackTrainer) -> None:
        log_info(
            f"Epoch {trainer.current_epoch}, global step {trainer.global_step}: "
            f"{self.monitor!r} was not in top {self.save_top_k}"
        )

    def _plan_last(self, plan: SaveDecision, candidates: dict[str, Any]) -> None:
        path = self._free_name(
            candidates, keep=self.last_model_path, filename=self.CHECKPOINT_NAME_LAST
        )
        previous, self.last_model_path = self.last_model_path, path
        target = plan.saves[-1] if plan.saves else self._last_checkpoint_saved
        if self.save_last == "link" and target and self.save_top_k != 0:
            plan.link = (target, path)
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

    def _skip(self, trainer: CallbackTrainer) -> bool:
        return (
            bool(trainer.fast_dev_run)
            or trainer.state.fn != "fit"
            or trainer.sanity_checking
            or self._last_global_step_saved == trainer.global_step
        )

    def _epoch_due(self, trainer: CallbackTrainer) -> bool:
        every = self._every_n_epochs
        return every >= 1 and (trainer.current_epoch + 1) % every == 0

    def _on_train_epoch_end(self, trainer: CallbackTrainer) -> bool:
        if self._save_on_train_epoch_end is not None:
            return self._save_on_train_epoch_end
        if trainer.check_val_every_n_epoch != 1:
            return False
        if sum(trainer.num_val_batches) == 0:
            return True
        return bool(trainer.val_check_interval == 1.0)

    def _save(self, trainer: CallbackTrainer, *, topk: bool, force_last: bool = False) -> None:
        decided = None
        if trainer.is_global_zero:
            decided = self._plan(trainer, topk=topk, force_last=force_last).to_json()
        plan = SaveDecision.from_json(trainer.strategy.broadcast_json(decided))
        self._carry_out(trainer, plan)
        trainer.strategy.barrier("ModelCheckpoint")

    def _carry_out(
        self, trainer: CallbackTrainer, plan: SaveDecision, barrier: bool = True
    ) -> None:
        """Take the plan's state, write its files (rank zero: its link and removals), tell the
        loggers."""
        for name, value in plan.state.items():
            setattr(self, name, value)
        last = self.last_model_path
        for path in plan.saves:
            # a top-k file carries the last.ckpt named before it, as Lightning's (written first)
            self.last_model_path = last if path == last else plan.previous_last
            trainer.save_checkpoint(path, weights_only=self.save_weights_only, barrier=barrier)
            self._last_global_step_saved, self._last_checkpoint_saved = trainer.global_step, path
        self.last_model_path = last
        if trainer.is_global_zero:
            if plan.link is not None:
                _link(*plan.link)
            for path in plan.removes:
                local_path(path).unlink(missing_ok=True)
            if plan.saves or plan.link:
                for logger in trainer.loggers:
                    getattr(logger, "after_save_checkpoint", lambda _: None)(self)


def _link(target_name: str, link_name: str) -> None:
    target, link = os.fspath(local_path(target_name)), os.fspath(local_path(link_name))
    if os.path.abspath(target) == os.path.abspath(link):
        return
    if os.path.islink(link) or os.path.isfile(link):
        os.remove(link)
    try:
        os.symlink(os.path.relpath(target, os.path.dirname(link)), link)
    except OSError:
        # No symlinks here: a copy, atomic like every checkpoint (never half a file under the
        # final name).
        with open(target, "rb") as src:
            atomic_write(link, lambda fh: shutil.copyfileobj(src, fh), private=True, durable=True)


def _check_paths(dirpath: Any, filename: Any) -> None:
    """``dirpath`` a folder (not a file) and ``filename`` a template that formats: refused
    when the callback is built, not at its first save (after an epoch's work)."""
    refuse_nul("ModelCheckpoint", "dirpath", dirpath)
    refuse_nul("ModelCheckpoint", "filename", filename)
    if dirpath is not None:
        if isinstance(dirpath, bytes) or not isinstance(dirpath, str | os.PathLike):
            raise MisconfigurationError(
                f"ModelCheckpoint(dirpath={safe_repr(dirpath)}): pass the folder to save into, a "
                f"str or pathlib.Path (None: the logger's or default_root_dir's). Fix: "
                f"ModelCheckpoint(dirpath='checkpoints')."
            )
        folder = os.path.expanduser(dirpath)
        if os.path.exists(folder) and not os.path.isdir(folder):
            raise MisconfigurationError(
                f"ModelCheckpoint(dirpath={os.fspath(dirpath)!r}): that is a file, not a folder. "
                f"Fix: pass a folder (created if missing), e.g. "
                f"{os.path.join(os.path.dirname(os.fspath(folder)), 'checkpoints')!r}."
            )
    if filename is None:
        return
    if not isinstance(filename, str):
        raise MisconfigurationError(
            f"ModelCheckpoint(filename={safe_repr(filename)}): pass a name template (str). Fix: "
            f"ModelCheckpoint(filename='{{epoch}}-{{val_loss:.2f}}')."
        )
    # Every name the template asks for, formatted as an int (epoch, step) or a float would be.
    names = {n: torch.tensor(0) for n in ("epoch", "step")}
    for group in re.findall(r"(\{.*?)[:\}]", filename):
        names.setdefault(group[1:], torch.tensor(0.0))
    try:
        format_checkpoint_name(filename, names)
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as err:
        raise MisconfigurationError(
            f"ModelCheckpoint(filename={filename!r}): the template does not format "
            f"({type(err).__name__}: {err}); it takes {{name}} or {{name:format}} per logged "
            f"value. Fix: ModelCheckpoint(filename='{{epoch}}-{{val_loss:.2f}}')."
        ) from None


def _bad(what: str, fix: str) -> MisconfigurationError:
    return MisconfigurationError(f"ModelCheckpoint({what}): {fix}")


def _check_arguments(
    save_top_k: Any,
    mode: Any,
    monitor: Any,
    save_last: Any,
    every_n_train_steps: Any,
    every_n_epochs: Any,
    train_time_interval: Any,
) -> None:
    if mode not in ("min", "max"):
        raise _bad(
            f"mode={safe_repr(mode)}", f"`mode` can be min, max but got {mode}. Fix: mode='min'."
        )
    if monitor is not None and not isinstance(monitor, str):
        raise _bad(
            f"monitor={safe_repr(monitor)}", "pass a logged metric's name. Fix: monitor='val_loss'."
        )
    if isinstance(save_top_k, bool) or not isinstance(save_top_k, int) or save_top_k < -1:
        raise _bad(
            f"save_top_k={safe_repr(save_top_k)}",
            "Must be >= -1: pass -1 (keep all), 0 (none) or a count ≥ 1. Fix: save_top_k=1.",
        )
    if monitor is None and save_top_k not in (-1, 0, 1):
        raise MisconfigurationError(
            f"ModelCheckpoint(save_top_k={save_top_k}, monitor=None) is not a valid "
            f"configuration: the best k need a metric to rank by. Fix: pass monitor='val_loss' (a "
            f"logged name)."
        )
    if save_last not in (None, True, False, "link"):
        raise _bad(
            f"save_last={safe_repr(save_last)}",
            "pass True, False, None or 'link'. Fix: save_last=True.",
        )
    triggers = {
        "every_n_train_steps": every_n_train_steps,
        "every_n_epochs": every_n_epochs,
        "train_time_interval": train_time_interval,
    }
    for name in ("every_n_train_steps", "every_n_epochs"):
        value = triggers[name]
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or value < 0
        ):
            raise _bad(
                f"{name}={safe_repr(value)}",
                "Must be >= 0: pass an int (0 turns it off) or None. Fix: " + f"{name}=1.",
            )
    if train_time_interval is not None and not isinstance(train_time_interval, timedelta):
        raise _bad(
            f"train_time_interval={safe_repr(train_time_interval)}",
            "pass a datetime.timedelta. Fix: train_time_interval=timedelta(minutes=30).",
        )
    given = [name for name, value in triggers.items() if value]
    if len(given) > 1:
        raise _bad(
            ", ".join(f"{name}={safe_repr(triggers[name])}" for name in given),
            "Combination of parameters every_n_train_steps, every_n_epochs and "
            "train_time_interval should be mutually exclusive. Fix: keep one of them.",
        )
