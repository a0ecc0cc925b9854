"""How ``ModelCheckpoint`` decides (on global rank zero): the file names, the best k, ``last``.

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
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, ClassVar

import torch

from ddpkit.errors import MisconfigurationError
from ddpkit.utilities._files import atomic_write
from ddpkit.utilities._paths import refuse_nul
from ddpkit.utilities._rank_zero import log_info
from ddpkit.utilities._reprs import safe_repr

__all__ = [
    "CheckpointPlanner",
    "Plan",
    "check_arguments",
    "check_paths",
    "format_checkpoint_name",
    "link",
]


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
class Plan:
    """What rank zero decided: files to write (and link), files to remove, the new state.

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
        state = dict(self.state)
        state["best_k_models"] = {k: float(v) for k, v in state["best_k_models"].items()}
        for name in _SCORES:
            state[name] = None if state[name] is None else float(state[name])
        return {
            "saves": self.saves, "link": self.link, "removes": self.removes, "state": state,
            "previous_last": self.previous_last,
        }  # fmt: skip

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Plan:
        state = dict(data["state"])
        state["best_k_models"] = {k: _score(v) for k, v in state["best_k_models"].items()}
        for name in _SCORES:
            state[name] = None if state[name] is None else _score(state[name])
        link = data["link"]
        return cls(
            saves=list(data["saves"]),
            link=(str(link[0]), str(link[1])) if link is not None else None,
            removes=list(data["removes"]),
            state=state,
            previous_last=str(data["previous_last"]),
        )


def _score(value: float) -> torch.Tensor:
    return torch.tensor(value, dtype=torch.float32)


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


class CheckpointPlanner:
    """The deciding half of ``ModelCheckpoint`` (it mixes in; the state is the callback's)."""

    CHECKPOINT_JOIN_CHAR: ClassVar[str] = "-"
    CHECKPOINT_EQUALS_CHAR: ClassVar[str] = "="
    CHECKPOINT_NAME_LAST: ClassVar[str] = "last"
    FILE_EXTENSION: ClassVar[str] = ".ckpt"
    STARTING_VERSION: ClassVar[int] = 1

    dirpath: str | None
    filename: str | None
    monitor: str | None
    mode: str
    verbose: bool
    save_top_k: int
    save_last: bool | str | None
    auto_insert_metric_name: bool
    _enable_version_counter: bool
    best_model_path: str
    best_model_score: torch.Tensor | None
    best_k_models: dict[str, torch.Tensor]
    kth_best_model_path: str
    kth_value: torch.Tensor
    last_model_path: str
    current_score: torch.Tensor | None
    _last_checkpoint_saved: str
    """The file this callback saved last (Lightning's): what ``save_last="link"`` points at."""

    def _state(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in STATE}

    def _candidates(self, trainer: Any) -> dict[str, Any]:
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

    def _plan(self, trainer: Any, *, topk: bool, force_last: bool) -> Plan:
        plan = Plan(previous_last=self.last_model_path)
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
        while self._enable_version_counter and os.path.exists(path) and path != keep:
            path = self.format_checkpoint_name(candidates, ver=version, **kw)
            version += 1
        return path

    def _plan_latest(self, plan: Plan, candidates: dict[str, Any]) -> None:
        path = self._free_name(candidates, keep=self.best_model_path)
        previous, self.best_model_path = self.best_model_path, path
        plan.saves.append(path)
        if self.save_top_k == 1 and previous and previous != path and self._owned(previous):
            plan.removes.append(previous)

    def _plan_monitored(self, trainer: Any, plan: Plan, candidates: dict[str, Any]) -> None:
        assert self.monitor is not None
        current = candidates.get(self.monitor)
        if current is None:
            raise MisconfigurationError(
                f"ModelCheckpoint(monitor={safe_repr(self.monitor)}) could not find "
                f"{safe_repr(self.monitor)} in "
                f"the logged metrics {sorted(trainer.callback_metrics)}. Fix: "
                f"self.log({safe_repr(self.monitor)}, value) in the module, or monitor one of "
                "those."
            )
        current = torch.as_tensor(current).detach().float().cpu()
        if torch.isnan(current):
            current = torch.tensor(math.inf if self.mode == "min" else -math.inf)
        better = torch.lt if self.mode == "min" else torch.gt
        k = len(self.best_k_models) + 1 if self.save_top_k == -1 else self.save_top_k
        if len(self.best_k_models) >= k and not better(current, self.kth_value):
            if self.verbose:
                log_info(f"Epoch {trainer.current_epoch}: {self.monitor!r} was not in top {k}")
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
                f"Epoch {trainer.current_epoch}: {safe_repr(self.monitor)} reached "
                f"{float(current):.5f} "
                f"(best {float(self.best_model_score):.5f}), saving model to {safe_repr(path)} as "
                f"top {k}"
            )
        plan.saves.append(path)
        if dropped and dropped != path and self._owned(dropped):
            plan.removes.append(dropped)

    def _plan_last(self, plan: Plan, candidates: dict[str, Any]) -> None:
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


def link(target: str, link: str) -> None:
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


def check_paths(dirpath: Any, filename: Any) -> None:
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


def check_arguments(
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
        raise bad(
            f"mode={safe_repr(mode)}", f"`mode` can be min, max but got {mode}. Fix: mode='min'."
        )
    if monitor is not None and not isinstance(monitor, str):
        raise bad(
            f"monitor={safe_repr(monitor)}", "pass a logged metric's name. Fix: monitor='val_loss'."
        )
    if isinstance(save_top_k, bool) or not isinstance(save_top_k, int) or save_top_k < -1:
        raise bad(
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
        raise bad(
            f"save_last={safe_repr(save_last)}",
            "pass True, False, None or 'link'. Fix: save_last=True.",
        )
    _check_triggers(every_n_train_steps, every_n_epochs, train_time_interval)


def _check_triggers(
    every_n_train_steps: Any, every_n_epochs: Any, train_time_interval: Any
) -> None:
    def bad(what: str, fix: str) -> MisconfigurationError:
        return MisconfigurationError(f"ModelCheckpoint({what}): {fix}")

    for name, value in (
        ("every_n_train_steps", every_n_train_steps),
        ("every_n_epochs", every_n_epochs),
    ):
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or value < 0
        ):
            raise bad(
                f"{name}={safe_repr(value)}",
                "Must be >= 0: pass an int (0 turns it off) or None. Fix: " + f"{name}=1.",
            )
    if train_time_interval is not None and not isinstance(train_time_interval, timedelta):
        raise bad(
            f"train_time_interval={safe_repr(train_time_interval)}",
            "pass a datetime.timedelta. Fix: train_time_interval=timedelta(minutes=30).",
        )
    given = {
        "every_n_train_steps": every_n_train_steps,
        "every_n_epochs": every_n_epochs,
        "train_time_interval": train_time_interval,
    }
    triggers = [name for name, value in given.items() if value]
    if len(triggers) > 1:
        raise bad(
            ", ".join(f"{name}={safe_repr(given[name])}" for name in triggers),
            "Combination of parameters every_n_train_steps, every_n_epochs and "
            "train_time_interval should be mutually exclusive. Fix: keep one of them.",
        )
