"""``Timer``: stop ``fit`` after a wall-clock duration (``Trainer(max_time=...)`` adds one)."""

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


class Timer(Callback):
    """Stop once ``duration`` has passed since training started, checked at ``on_fit_start``
    and after every step (``interval="step"``) or every epoch; ``verbose`` logs when it stops
    the run. ``duration`` is Lightning's: ``"DD:HH:MM:SS"``, a ``timedelta`` or a dict
    (``{"hours": 12}``); zero (or less) stops the fit before its first step. Ranks
    agree through one all-reduce of a flag per check (rank clocks differ), so all stop at the
    same step. It times training only (Lightning's ``stage="train"``)."""

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
        self._start: float | None = None
        self._offset = 0.0  # time already spent by the run a checkpoint resumed

    def time_elapsed(self, stage: str = "train") -> float:
        """Seconds of training so far (a resumed run's included)."""
        _check_stage("time_elapsed", stage)
        if self._start is None:
            return self._offset
        return self._offset + time.monotonic() - self._start

    def time_remaining(self, stage: str = "train") -> float | None:
        """Seconds left of ``duration`` (None without one)."""
        _check_stage("time_remaining", stage)
        return None if self._duration is None else self._duration - self.time_elapsed()

    def state_dict(self) -> dict[str, Any]:
        return {"time_elapsed": {"train": self.time_elapsed()}}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._offset = float(state_dict.get("time_elapsed", {}).get("train", 0.0))

    def on_fit_start(self, trainer: CallbackTrainer, pl_module: nn.Module) -> None:
        # Lightning 2.x's: checked once the checkpoint's state is restored (its offset), before
        # any step, so a zero or used-up duration trains nothing (min_epochs / min_steps aside)
        self._check(trainer)

    def on_train_start(self, trainer: CallbackTrainer, pl_module: nn.Module) -> None:
        self._start = time.monotonic()

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


def _check_stage(method: str, stage: Any) -> None:
    if str(getattr(stage, "value", stage)) != "train":
        raise MisconfigurationError(
            f"Timer.{method}(stage={safe_repr(stage)}): ddpkit's Timer times training only. "
            f"Fix: Timer.{method}() (or stage='train')."
        )
