"""``Timer``: stop ``fit`` after a wall-clock duration (``Trainer(max_time=...)`` adds one)."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import torch

from ddpkit.callbacks.base import Callback
from ddpkit.errors import MisconfigurationError
from ddpkit.utilities.reprs import safe_repr

__all__ = ["Timer"]


class Timer(Callback):
    """Stop once ``duration`` has passed since training started, checked after every step
    (``interval="step"``) or every epoch. Ranks agree through one all-reduce of a flag per check
    (rank clocks differ), so all stop at the same step."""

    def __init__(self, duration: timedelta | None = None, interval: str = "step") -> None:
        if interval not in ("epoch", "step"):
            raise MisconfigurationError(
                f"Timer(interval={safe_repr(interval)}): choose 'epoch' or 'step'. Fix: "
                f"interval='step'."
            )
        self._duration = duration.total_seconds() if duration is not None else None
        self._interval = interval
        self._start: float | None = None
        self._offset = 0.0  # time already spent by the run a checkpoint resumed

    def time_elapsed(self) -> float:
        if self._start is None:
            return self._offset
        return self._offset + time.monotonic() - self._start

    def time_remaining(self) -> float | None:
        return None if self._duration is None else self._duration - self.time_elapsed()

    def state_dict(self) -> dict[str, Any]:
        return {"time_elapsed": {"train": self.time_elapsed()}}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._offset = float(state_dict.get("time_elapsed", {}).get("train", 0.0))

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        self._start = time.monotonic()

    def on_train_batch_end(
        self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        if self._interval == "step":
            self._check(trainer)

    def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        if self._interval == "epoch":
            self._check(trainer)

    def _check(self, trainer: Any) -> None:
        if self._duration is None:
            return
        late = torch.tensor(float(self.time_elapsed() >= self._duration))
        if trainer.world_size > 1:
            late = trainer.strategy.all_reduce(late.to(trainer.strategy.root_device), "max")
        if float(late) > 0:
            trainer.should_stop = True
