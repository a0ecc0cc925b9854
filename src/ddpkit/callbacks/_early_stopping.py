"""``EarlyStopping``: stop ``fit`` when a logged metric stops improving (Lightning's callback).

Each rank judges its own value, then the ranks agree: if any rank wants to stop, every rank stops
at the end of the same epoch (one all-reduce of a flag per check, never per step), so no rank is
left waiting in a collective.
"""

from __future__ import annotations

import math
from enum import Enum
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from ddpkit.callbacks._base import Callback
from ddpkit.errors import MisconfigurationError, MisconfigurationRuntimeError
from ddpkit.utilities._rank_zero import log_info
from ddpkit.utilities._reprs import safe_repr

if TYPE_CHECKING:
    from ddpkit.core._protocols import CallbackTrainer


class EarlyStoppingReason(Enum):
    NOT_STOPPED = 0
    STOPPING_THRESHOLD = 1
    DIVERGENCE_THRESHOLD = 2
    PATIENCE_EXHAUSTED = 3
    NON_FINITE_METRIC = 4


_OPS = {"min": torch.lt, "max": torch.gt}


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


_ORDER = {"min": "<", "max": ">"}


def _check_arguments(
    monitor: Any,
    mode: Any,
    patience: Any,
    min_delta: Any,
    stopping_threshold: Any,
    divergence_threshold: Any,
    check_on_train_epoch_end: Any,
) -> None:
    """Every argument checked when the callback is built (a bad threshold was a TypeError at
    the first check, after an epoch's work)."""
    if not isinstance(mode, str) or mode not in _OPS:
        raise MisconfigurationError(
            f"EarlyStopping(mode={safe_repr(mode)}): `mode` can be min, max, got {mode}. "
            f"Fix: mode='min'."
        )
    if not isinstance(monitor, str) or not monitor:
        raise MisconfigurationError(
            f"EarlyStopping(monitor={safe_repr(monitor)}): pass the name of a logged metric. "
            f"Fix: EarlyStopping(monitor='val_loss')."
        )
    if isinstance(patience, bool) or not isinstance(patience, int) or patience < 0:
        raise MisconfigurationError(
            f"EarlyStopping(patience={safe_repr(patience)}): pass an int ≥ 0 (checks without "
            f"improvement before stopping). Fix: patience=3."
        )
    if not _is_number(min_delta) or math.isnan(min_delta):
        raise MisconfigurationError(
            f"EarlyStopping(min_delta={safe_repr(min_delta)}): pass a number ≥ 0. Fix: "
            f"min_delta=0.0."
        )
    for name, value in (
        ("stopping_threshold", stopping_threshold),
        ("divergence_threshold", divergence_threshold),
    ):
        if value is not None and (not _is_number(value) or math.isnan(value)):
            raise MisconfigurationError(
                f"EarlyStopping({name}={safe_repr(value)}): pass a number (the monitored "
                f"value to stop at) or None. Fix: {name}=None."
            )
    if check_on_train_epoch_end not in (None, True, False):
        raise MisconfigurationError(
            f"EarlyStopping(check_on_train_epoch_end={safe_repr(check_on_train_epoch_end)}): "
            f"pass True, False or None (decided from the Trainer). Fix: "
            f"check_on_train_epoch_end=None."
        )


class EarlyStopping(Callback):
    """Stop when ``monitor`` has not improved by more than ``min_delta`` for ``patience``
    checks; also on a non-finite value (``check_finite``), past ``stopping_threshold`` or
    ``divergence_threshold``. It checks at the end of each training epoch (after that epoch's
    validation), or after each validation when validation runs more or less often than once an
    epoch (``check_on_train_epoch_end`` forces either)."""

    mode_dict = _OPS
    order_dict = _ORDER

    def __init__(
        self,
        monitor: str,
        min_delta: float = 0.0,
        patience: int = 3,
        verbose: bool = False,
        mode: str = "min",
        strict: bool = True,
        check_finite: bool = True,
        stopping_threshold: float | None = None,
        divergence_threshold: float | None = None,
        check_on_train_epoch_end: bool | None = None,
        log_rank_zero_only: bool = False,
    ) -> None:
        _check_arguments(
            monitor,
            mode,
            patience,
            min_delta,
            stopping_threshold,
            divergence_threshold,
            check_on_train_epoch_end,
        )
        self.monitor, self.patience, self.verbose, self.mode = monitor, patience, verbose, mode
        self.strict, self.check_finite = strict, check_finite
        self.stopping_threshold, self.divergence_threshold = (
            stopping_threshold,
            divergence_threshold,
        )
        self.log_rank_zero_only = log_rank_zero_only
        self._check_on_train_epoch_end = check_on_train_epoch_end
        # Lightning's sign convention: improving means beating best by |min_delta|.
        self.min_delta = abs(min_delta) * (1 if mode == "max" else -1)
        self.wait_count = 0
        self.stopped_epoch = 0
        self.best_score = torch.tensor(math.inf if mode == "min" else -math.inf)
        self.stopping_reason = EarlyStoppingReason.NOT_STOPPED
        self.stopping_reason_message: str | None = None

    @property
    def state_key(self) -> str:
        return self._generate_state_key(monitor=self.monitor, mode=self.mode)

    @property
    def monitor_op(self) -> Any:
        return _OPS[self.mode]

    def state_dict(self) -> dict[str, Any]:
        return {
            "wait_count": self.wait_count,
            "stopped_epoch": self.stopped_epoch,
            "best_score": self.best_score,
            "patience": self.patience,
            "stopping_reason": self.stopping_reason.value,
            "stopping_reason_message": self.stopping_reason_message,
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.wait_count = state_dict["wait_count"]
        self.stopped_epoch = state_dict["stopped_epoch"]
        self.best_score = state_dict["best_score"]
        self.patience = state_dict["patience"]
        self.stopping_reason = EarlyStoppingReason(state_dict.get("stopping_reason", 0))
        self.stopping_reason_message = state_dict.get("stopping_reason_message")

    def setup(self, trainer: CallbackTrainer, pl_module: nn.Module, stage: str) -> None:
        if self._check_on_train_epoch_end is None:
            self._check_on_train_epoch_end = (
                trainer.val_check_interval == 1.0 and trainer.check_val_every_n_epoch == 1
            )

    def on_train_epoch_end(self, trainer: CallbackTrainer, pl_module: nn.Module) -> None:
        if self._check_on_train_epoch_end and not self._skip(trainer):
            self._run_early_stopping_check(trainer)

    def on_validation_end(self, trainer: CallbackTrainer, pl_module: nn.Module) -> None:
        if not self._check_on_train_epoch_end and not self._skip(trainer):
            self._run_early_stopping_check(trainer)

    def _skip(self, trainer: CallbackTrainer) -> bool:
        return trainer.state.fn != "fit" or trainer.sanity_checking or bool(trainer.fast_dev_run)

    def _run_early_stopping_check(self, trainer: CallbackTrainer) -> None:
        logs = trainer.callback_metrics
        if self.monitor not in logs:
            if self.strict:  # a RuntimeError too, as Lightning's
                raise MisconfigurationRuntimeError(
                    f"EarlyStopping(monitor={safe_repr(self.monitor)}): {safe_repr(self.monitor)} "
                    "was not logged; "
                    f"logged: {sorted(logs)}. Fix: self.log({safe_repr(self.monitor)}, value) in "
                    "the "
                    f"module, monitor one of those, or pass strict=False to skip the check."
                )
            return
        current = torch.as_tensor(logs[self.monitor]).detach().float().cpu().squeeze()
        should_stop, reason = self._evaluate_stopping_criteria(current)
        # Every rank stops if any rank wants to: one all-reduce of a flag per check.
        flag = torch.tensor(float(should_stop), device=trainer.strategy.root_device)
        should_stop = bool(trainer.strategy.all_reduce(flag, "max").item() > 0)
        trainer.should_stop = trainer.should_stop or should_stop
        if should_stop:
            self.stopped_epoch = trainer.current_epoch
            self.stopping_reason_message = reason
        if reason and self.verbose:
            self._log_info(trainer, reason)

    def _log_info(self, trainer: CallbackTrainer, message: str) -> None:
        """Lightning's: to the log at INFO (``ddpkit``'s logger), prefixed with the rank when
        there are several; with ``log_rank_zero_only``, from rank zero only."""
        rank = trainer.global_rank
        if self.log_rank_zero_only and rank != 0:
            return
        log_info(f"[rank: {rank}] {message}" if trainer.world_size > 1 else message)

    def _evaluate_stopping_criteria(self, current: torch.Tensor) -> tuple[bool, str | None]:
        op = self.monitor_op
        if self.check_finite and not torch.isfinite(current):
            self.stopping_reason = EarlyStoppingReason.NON_FINITE_METRIC
            return True, (
                f"Monitored metric {self.monitor} = {float(current)} is not finite. Previous "
                f"best value was {float(self.best_score):.3f}. Signaling Trainer to stop."
            )
        if self.stopping_threshold is not None and op(current, self.stopping_threshold):
            self.stopping_reason = EarlyStoppingReason.STOPPING_THRESHOLD
            return True, (
                f"Stopping threshold reached: {self.monitor} = {float(current)} "
                f"{_ORDER[self.mode]} {self.stopping_threshold}. Signaling Trainer to stop."
            )
        if self.divergence_threshold is not None and op(-current, -self.divergence_threshold):
            self.stopping_reason = EarlyStoppingReason.DIVERGENCE_THRESHOLD
            return True, (
                f"Divergence threshold reached: {self.monitor} = {float(current)} "
                f"{_ORDER[self.mode]} {self.divergence_threshold}. Signaling Trainer to stop."
            )
        if op(current - self.min_delta, self.best_score):
            improved_by = abs(float(self.best_score) - float(current))
            message = (
                f"Metric {self.monitor} improved by {improved_by:.3f} >= min_delta = "
                f"{abs(self.min_delta)}. New best score: {float(current):.3f}"
                if torch.isfinite(self.best_score)
                else f"Metric {self.monitor} improved. New best score: {float(current):.3f}"
            )
            self.best_score, self.wait_count = current, 0
            return False, message
        self.wait_count += 1
        if self.wait_count >= self.patience:
            self.stopping_reason = EarlyStoppingReason.PATIENCE_EXHAUSTED
            return True, (
                f"Monitored metric {self.monitor} did not improve in the last {self.wait_count} "
                f"records. Best score: {float(self.best_score):.3f}. Signaling Trainer to stop."
            )
        return False, None
