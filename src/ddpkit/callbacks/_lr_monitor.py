"""``LearningRateMonitor``: log each optimizer's learning rate (Lightning's names and timing)."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from ddpkit.callbacks._base import Callback
from ddpkit.errors import MisconfigurationError
from ddpkit.utilities._rank_zero import rank_zero_warn
from ddpkit.utilities._reprs import safe_repr

if TYPE_CHECKING:
    from ddpkit.core._protocols import CallbackTrainer


class LearningRateMonitor(Callback):
    """Logs ``lr-<Optimizer>`` to every logger (``-1``, ``-2`` ... for another optimizer of the
    same class; ``/pg1``, ``/pg2`` or the group's ``name`` for several parameter groups; a
    scheduler config's ``name`` replaces it): a scheduler's optimizer at the scheduler's own
    interval, an optimizer without a scheduler at every logged step and every epoch's start.
    ``logging_interval`` forces "step" or "epoch"; ``log_momentum`` / ``log_weight_decay`` add
    ``<name>-momentum`` / ``<name>-weight_decay``. ``lrs``, ``last_momentum_values`` and
    ``last_weight_decay_values`` hold what was logged. The naming, the order and the timing are
    Lightning 2.x's (``pytorch_lightning.callbacks.LearningRateMonitor``)."""

    def __init__(
        self,
        logging_interval: str | None = None,
        log_momentum: bool = False,
        log_weight_decay: bool = False,
    ) -> None:
        if logging_interval not in (None, "step", "epoch"):
            raise MisconfigurationError(
                f"LearningRateMonitor(logging_interval={safe_repr(logging_interval)}): choose "
                f"'epoch', 'step' or None (each scheduler's own interval). Fix: "
                f"logging_interval=None."
            )
        self.logging_interval = logging_interval
        self.log_momentum, self.log_weight_decay = log_momentum, log_weight_decay
        self.lrs: dict[str, list[float]] = {}
        self.last_momentum_values: dict[str, float | None] = {}
        self.last_weight_decay_values: dict[str, float | None] = {}
        #: Lightning 1.x's: each scheduler's name (``lr-Adam``, ``lr-Adam-1``, or its own),
        #: without the parameter groups' suffixes
        self.lr_sch_names: list[str] = []

    def on_train_start(self, trainer: CallbackTrainer, pl_module: nn.Module) -> None:
        if not trainer.loggers:
            raise MisconfigurationError(
                "Trainer(callbacks=[LearningRateMonitor()], logger=False): Cannot use "
                "`LearningRateMonitor` callback with `Trainer` that has no logger: the monitor "
                "writes to the loggers. Fix: Trainer(logger=True) or pass a logger."
            )
        if self.log_momentum and not _all_have_momentum(trainer):
            rank_zero_warn(
                "LearningRateMonitor(log_momentum=True): some optimizers do not have momentum "
                "(nor betas); their momentum is logged as 0. Fix: log_momentum=False, or "
                "optimizers with momentum.",
                RuntimeWarning,
            )
        self.lr_sch_names = []
        names = [name for name, _, _ in self._names(trainer, self.lr_sch_names)]
        self.lrs = {name: [] for name in names}
        self.last_momentum_values = {f"{name}-momentum": None for name in names}
        self.last_weight_decay_values = {f"{name}-weight_decay": None for name in names}

    def on_train_batch_start(
        self, trainer: CallbackTrainer, pl_module: nn.Module, batch: Any, batch_idx: int
    ) -> None:
        every = trainer.log_every_n_steps
        due = bool(every) and (trainer.global_step + 1) % every == 0
        if self.logging_interval == "epoch" or not (due or trainer.should_stop):
            return
        self._log(trainer, "step" if self.logging_interval is None else "any")

    def on_train_epoch_start(self, trainer: CallbackTrainer, pl_module: nn.Module) -> None:
        if self.logging_interval != "step":
            self._log(trainer, "epoch" if self.logging_interval is None else "any")

    # -- names ---------------------------------------------------------------------------------

    def _names(
        self, trainer: CallbackTrainer, schedulers: list[str] | None = None
    ) -> list[tuple[str, dict[str, Any], str | None]]:
        """Per scheduler config, then per optimizer without one: ``(name, param group, the
        interval)`` for each parameter group (None: an optimizer without a scheduler).
        ``schedulers``: gets each scheduler's name, without the groups' suffixes."""
        seen_types: defaultdict[type, int] = defaultdict(int)
        seen: list[Any] = []
        found = []
        for config in trainer.lr_scheduler_configs:
            optimizer = config.scheduler.optimizer
            name = config.name if config.name is not None else f"lr-{type(optimizer).__name__}"
            name, groups = self._group_names(optimizer, name, seen, seen_types, named=config.name)
            found += [(n, g, config.interval) for n, g in groups]
            if schedulers is not None:
                schedulers.append(name)  # Lightning's _add_prefix
        for optimizer in trainer.optimizers:
            if optimizer not in seen:
                name = f"lr-{type(optimizer).__name__}"
                _, groups = self._group_names(optimizer, name, seen, seen_types, named=None)
                found += [(n, g, None) for n, g in groups]
        return found

    @staticmethod
    def _group_names(
        optimizer: Any, name: str, seen: list[Any], seen_types: defaultdict[type, int], named: Any
    ) -> tuple[str, list[tuple[str, dict[str, Any]]]]:
        """The optimizer's name (``-1``, ``-2`` ... for another of its class), and each of its
        parameter groups' names."""
        seen.append(optimizer)
        kind = type(optimizer)
        if named is None:
            seen_types[kind] += 1
        groups = optimizer.param_groups
        given = [g.get("name", f"pg{i}") for i, g in enumerate(groups, start=1)]
        duplicates = sorted({n for n in given if given.count(n) > 1})
        if duplicates:
            raise MisconfigurationError(
                f"LearningRateMonitor: A single `Optimizer` cannot have multiple parameter groups "
                f"with identical `name` values: {name}'s share {duplicates}, so their learning "
                f"rates would be logged under one key. Fix: give each parameter group its own "
                f"'name' (or none)."
            )
        count = seen_types.get(kind, 0)
        if count > 1:
            name = f"{name}-{count - 1}"
        if len(groups) > 1:
            return name, [(f"{name}/{given_name}", g) for given_name, g in zip(given, groups)]
        own = groups[0].get("name")
        return name, [(f"{name}/{own}" if own else name, groups[0])]

    # -- logging -------------------------------------------------------------------------------

    def _log(self, trainer: CallbackTrainer, interval: str) -> None:
        stats: dict[str, float] = {}
        names = self._names(trainer)
        for name, _, _ in names:
            # an optimizer that gained a parameter group: its values continue under "/pg1"
            old = name.replace("/pg1", "")
            if name != old and old in self.lrs and name not in self.lrs:
                self.lrs[name] = self.lrs.pop(old)
        for name, param_group, own in names:
            if own is not None and interval not in (own, "any"):
                continue
            stats[name] = param_group["lr"]
            self.lrs.setdefault(name, []).append(param_group["lr"])
            if self.log_momentum:
                betas = param_group.get("betas")
                value = betas[0] if betas is not None else param_group.get("momentum", 0)
                key = f"{name}-momentum"
                stats[key] = self.last_momentum_values[key] = value
            if self.log_weight_decay:
                value = param_group["weight_decay"]
                key = f"{name}-weight_decay"
                stats[key] = self.last_weight_decay_values[key] = value
        if not stats:
            return
        device = trainer.strategy.root_device
        trainer.callback_metrics.update(
            {k: torch.tensor(v, device=device) for k, v in stats.items()}
        )
        for logger in trainer.loggers:
            logger.log_metrics(stats, step=trainer.global_step)


def _all_have_momentum(trainer: CallbackTrainer) -> bool:
    """Lightning's check: the schedulers' optimizers (or, without schedulers, the optimizers)
    all have ``momentum`` or all have ``betas`` in their defaults."""
    optimizers = [c.scheduler.optimizer for c in trainer.lr_scheduler_configs] or list(
        trainer.optimizers
    )

    def lacks(key: str) -> bool:
        return any(key not in o.defaults for o in optimizers)

    return not (lacks("momentum") and lacks("betas"))
