"""``LearningRateMonitor``: log each optimizer's learning rate (Lightning's names and timing)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import torch

from ddpkit.callbacks.base import Callback
from ddpkit.errors import MisconfigurationError

__all__ = ["LearningRateMonitor"]


class LearningRateMonitor(Callback):
    """Logs ``lr-<Optimizer>`` (``-1``, ``-2`` ... for a second optimizer of the same class;
    ``/pg1``, ``/pg2`` or the group's ``name`` for several parameter groups; a scheduler config's
    ``name`` replaces it) to every logger: for a scheduler, at its own interval; for an
    optimizer without one, every logged step. ``logging_interval`` forces "step" or "epoch";
    ``log_momentum`` / ``log_weight_decay`` add ``<name>-momentum`` / ``<name>-weight_decay``."""

    def __init__(
        self,
        logging_interval: str | None = None,
        log_momentum: bool = False,
        log_weight_decay: bool = False,
    ) -> None:
        if logging_interval not in (None, "step", "epoch"):
            raise MisconfigurationError(
                f"LearningRateMonitor(logging_interval={logging_interval!r}): choose 'epoch', "
                f"'step' or None (each scheduler's own interval)."
            )
        self.logging_interval = logging_interval
        self.log_momentum, self.log_weight_decay = log_momentum, log_weight_decay
        self.lrs: dict[str, list[float]] = {}

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        if not trainer.loggers:
            raise MisconfigurationError(
                "Trainer(callbacks=[LearningRateMonitor()], logger=False): the monitor writes to "
                "the loggers and there is none. Fix: Trainer(logger=True) or pass a logger."
            )
        self.lrs = {name: [] for name, _, _ in self._groups(trainer)}

    def on_train_batch_start(
        self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int
    ) -> None:
        every = trainer.log_every_n_steps
        if self.logging_interval == "epoch" or not every or (trainer.global_step + 1) % every:
            return
        self._log(trainer, "step" if self.logging_interval is None else "any")

    def on_train_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        if self.logging_interval != "step":
            self._log(trainer, "epoch" if self.logging_interval is None else "any")

    def _groups(self, trainer: Any) -> list[tuple[str, dict[str, Any], str]]:
        """``(name, param_group, interval)`` for every parameter group of every optimizer."""
        by_optimizer: dict[int, tuple[str | None, str]] = {}
        for config in trainer.lr_scheduler_configs:
            by_optimizer[id(config.scheduler.optimizer)] = (config.name, config.interval)
        seen: Counter[type] = Counter()
        found: list[tuple[str, dict[str, Any], str]] = []
        for optimizer in trainer.optimizers:
            given, interval = by_optimizer.get(id(optimizer), (None, "step"))
            name = given
            if name is None:
                seen[type(optimizer)] += 1
                count = seen[type(optimizer)]
                name = f"lr-{type(optimizer).__name__}" + (f"-{count - 1}" if count > 1 else "")
            groups = optimizer.param_groups
            for i, group in enumerate(groups):
                suffix = group.get("name") or (f"pg{i + 1}" if len(groups) > 1 else None)
                found.append((f"{name}/{suffix}" if suffix else name, group, interval))
        return found

    def _log(self, trainer: Any, interval: str) -> None:
        stats: dict[str, float] = {}
        for name, group, own in self._groups(trainer):
            if interval not in (own, "any"):
                continue
            stats[name] = float(group["lr"])
            self.lrs.setdefault(name, []).append(stats[name])
            if self.log_momentum:
                betas = group.get("betas")
                stats[f"{name}-momentum"] = float(betas[0] if betas else group.get("momentum", 0))
            if self.log_weight_decay:
                stats[f"{name}-weight_decay"] = float(group.get("weight_decay", 0))
        if not stats:
            return
        trainer.callback_metrics.update({k: torch.tensor(v) for k, v in stats.items()})
        for logger in trainer.loggers:
            logger.log_metrics(stats, step=trainer.global_step)
