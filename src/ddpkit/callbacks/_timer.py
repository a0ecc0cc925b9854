"""``Timer``: stop ``fit`` after a wall-clock duration (``Trainer(max_time=...)`` adds one), and
time the training, validation and test loops, as Lightning's does."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from ddpkit.callbacks._base import Callback
from ddpkit.errors import MisconfigurationError
from ddpkit.utilities._durations import parse_duration
from ddpkit.utilities._rank_zero import log_info
from ddpkit.utilities._reprs import safe_repr

if TYPE_CHECKING:
    from ddpkit.core._protocols import CallbackTrainer


#: Lightning's ``RunningStage`` values, in its order (its ``state_dict`` lists every one)
_STAGES = ("train", "sanity_check", "validate", "test", "predict")


class Timer(Callback):
    """Stop once ``duration`` has passed since training started, checked at ``on_fit_start``
    and after every step (``interval="step"``) or every epoch; ``verbose`` logs when it stops
    the run. ``duration`` is Lightning's: ``"DD:HH:MM:SS"``, a ``timedelta`` or a dict
    (``{"hours": 12}``); zero (or less) stops the fit before its first step. Ranks
    agree through one all-reduce of a flag per check (rank clocks differ), so all stop at the
    same step.

    As Lightning's, it also times the validation and test loops: ``time_elapsed(stage)``,
    ``start_time(stage)`` and ``end_time(stage)`` (``time.monotonic()`` readings) take
    ``"train"`` (the default), ``"validate"`` (the sanity check's and every validation run:
    the latest counts), ``"test"``, and ``"sanity_check"`` / ``"predict"``, never timed.
    A stage run again counts from its new start (Lightning's keeps the earlier end until the
    new one, so its time runs negative meanwhile: docs/flags.md, Differences)."""

    def __init__(
        self,
        duration: str | timedelta | dict[str, int] | None = None,
        interval: str = "step",
        verbose: bool = True,
    ) -> None:
        if interval not in ("epoch", "step"):
            # "Unsupported parameter value": Lightning's words, which code matching them finds
            raise MisconfigurationError(
                f"Timer(interval={safe_repr(interval)}): Unsupported parameter value; choose "
                f"'epoch' or 'step'. Fix: interval='step'."
            )
        found = parse_duration("Timer", "duration", duration)
        self._duration = found.total_seconds() if found is not None else None
        self._interval, self._verbose = interval, bool(verbose)
        self._start_time: dict[str, float | None] = dict.fromkeys(_STAGES)
        self._end_time: dict[str, float | None] = dict.fromkeys(_STAGES)
        self._offset = 0.0  # training time already spent by the run a checkpoint resumed

    def start_time(self, stage: str = "train") -> float | None:
        """When ``stage`` last started (``time.monotonic()``); None before it has."""
        return self._start_time[_stage("start_time", stage)]

    def end_time(self, stage: str = "train") -> float | None:
        """When ``stage`` last ended (``time.monotonic()``); None before, or while it runs."""
        return self._end_time[_stage("end_time", stage)]

    def time_elapsed(self, stage: str = "train") -> float:
        """Seconds ``stage`` has run (its latest run, fixed once it ended); training's include
        the time of the run a checkpoint resumed."""
        key = _stage("time_elapsed", stage)
        start, end = self._start_time[key], self._end_time[key]
        offset = self._offset if key == "train" else 0.0
        if start is None:
            return offset
        return offset + (time.monotonic() if end is None else end) - start

    def time_remaining(self, stage: str = "train") -> float | None:
        """Seconds left of ``duration`` after ``stage``'s time (None without a duration)."""
        key = _stage("time_remaining", stage)
        return None if self._duration is None else self._duration - self.time_elapsed(key)

    def state_dict(self) -> dict[str, Any]:
        # Lightning's layout (every stage's time), so either library resumes the other's
        return {"time_elapsed": {stage: self.time_elapsed(stage) for stage in _STAGES}}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._offset = float(state_dict.get("time_elapsed", {}).get("train", 0.0))

    def _started(self, stage: str) -> None:
        self._start_time[stage], self._end_time[stage] = time.monotonic(), None

    def _ended(self, stage: str) -> None:
        self._end_time[stage] = time.monotonic()

    def on_fit_start(self, trainer: CallbackTrainer, pl_module: nn.Module) -> None:
        # Lightning 2.x's: checked once the checkpoint's state is restored (its offset), before
        # any step, so a zero or used-up duration trains nothing (min_epochs / min_steps aside)
        self._check(trainer)

    def on_train_start(self, trainer: CallbackTrainer, pl_module: nn.Module) -> None:
        self._started("train")

    def on_train_end(self, trainer: CallbackTrainer, pl_module: nn.Module) -> None:
        self._ended("train")  # so time_elapsed() after fit is the fit's, not counting on

    def on_validation_start(self, trainer: CallbackTrainer, pl_module: nn.Module) -> None:
        self._started("validate")

    def on_validation_end(self, trainer: CallbackTrainer, pl_module: nn.Module) -> None:
        self._ended("validate")

    def on_test_start(self, trainer: CallbackTrainer, pl_module: nn.Module) -> None:
        self._started("test")

    def on_test_end(self, trainer: CallbackTrainer, pl_module: nn.Module) -> None:
        self._ended("test")

    def on_train_batch_end(
        self,
        trainer: CallbackTrainer,
        pl_module: nn.Module,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        if self._interval == "step":
            self._check(trainer)

    def on_train_epoch_end(self, trainer: CallbackTrainer, pl_module: nn.Module) -> None:
        if self._interval == "epoch":
            self._check(trainer)

    def _check(self, trainer: CallbackTrainer) -> None:
        if self._duration is None:
            return
        late = torch.tensor(float(self.time_elapsed() >= self._duration))
        if trainer.world_size > 1:
            late = trainer.strategy.all_reduce(late.to(trainer.strategy.root_device), "max")
        if float(late) > 0:
            trainer.should_stop = True
            if self._verbose and trainer.is_global_zero:
                elapsed = timedelta(seconds=int(self.time_elapsed()))
                log_info(
                    f"Time limit reached. Elapsed time is {elapsed}. Signaling Trainer to stop."
                )


def _stage(method: str, stage: Any) -> str:
    """``stage`` as Lightning's ``RunningStage(stage)`` takes it (a value, or the member), or a
    MisconfigurationError: a ValueError, as Lightning's refusal is."""
    value = getattr(stage, "value", stage)
    if isinstance(value, str) and value in _STAGES:
        return value
    raise MisconfigurationError(
        f"Timer.{method}(stage={safe_repr(stage)}): not a stage; Lightning's are "
        f"{', '.join(repr(name) for name in _STAGES)}. Fix: Timer.{method}('validate'), or "
        f"Timer.{method}() for training."
    )
