"""What ``configure_optimizers`` may return, normalized."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ddpkit.errors import MisconfigurationError, MisconfigurationRuntimeError
from ddpkit.utilities._reprs import safe_repr


@dataclass
class SchedulerConfig:
    """Lightning's ``LRSchedulerConfig``: the scheduler and when it steps."""

    scheduler: Any
    interval: str = "epoch"
    frequency: int = 1
    monitor: str | None = None
    name: str | None = None
    strict: bool = True

    @property
    def reduce_on_plateau(self) -> bool:
        return isinstance(self.scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau)


def _scheduler(item: Any) -> SchedulerConfig:
    if isinstance(item, Mapping):
        if "scheduler" not in item:
            raise MisconfigurationError(
                "configure_optimizers: an lr_scheduler dict needs a 'scheduler' key."
            )
        interval = item.get("interval", "epoch")
        if interval not in ("epoch", "step"):
            raise MisconfigurationError(
                f"configure_optimizers: lr_scheduler interval={safe_repr(interval)}; choose "
                "'epoch' "
                f"or 'step'."
            )
        frequency = item.get("frequency", 1)
        if isinstance(frequency, bool) or not isinstance(frequency, int) or frequency < 1:
            raise MisconfigurationError(
                f"configure_optimizers: lr_scheduler frequency={safe_repr(frequency)}; pass an "
                "int ≥ 1."
            )
        return SchedulerConfig(
            item["scheduler"],
            interval,
            frequency,
            item.get("monitor"),
            item.get("name"),
            bool(item.get("strict", True)),
        )
    return SchedulerConfig(item)


def parse_optimizers(
    returned: Any,
) -> tuple[list[torch.optim.Optimizer], list[SchedulerConfig]]:
    """Accepts an optimizer; a list of them; ``([optimizers], [schedulers])``; a dict with
    ``optimizer`` and ``lr_scheduler``; or a list of such dicts. A ``ReduceLROnPlateau``
    without a monitor is refused here, before any training (Lightning's check)."""
    optimizers, schedulers = _parse(returned)
    if any(config.reduce_on_plateau and config.monitor is None for config in schedulers):
        raise MisconfigurationError(
            "`configure_optimizers` must include a monitor when a `ReduceLROnPlateau` scheduler "
            'is used. For example: {"optimizer": optimizer, "lr_scheduler": scheduler, '
            '"monitor": "metric_to_track"}'
        )
    return optimizers, schedulers


def _parse(returned: Any) -> tuple[list[torch.optim.Optimizer], list[SchedulerConfig]]:
    if isinstance(returned, torch.optim.Optimizer):
        return [returned], []
    if isinstance(returned, Mapping):
        if "optimizer" not in returned:
            raise MisconfigurationError(
                "configure_optimizers returned a dict without an 'optimizer' key."
            )
        scheds = [_scheduler(returned["lr_scheduler"])] if "lr_scheduler" in returned else []
        if scheds and scheds[0].monitor is None:
            scheds[0].monitor = returned.get("monitor")
        return [returned["optimizer"]], scheds
    if isinstance(returned, Sequence) and not isinstance(returned, str):
        items = list(returned)
        if (
            len(items) == 2
            and isinstance(items[0], Sequence)
            and all(isinstance(o, torch.optim.Optimizer) for o in items[0])
        ):
            scheds_in = items[1] if isinstance(items[1], Sequence) else [items[1]]
            return list(items[0]), [_scheduler(s) for s in scheds_in]
        if items and all(isinstance(o, torch.optim.Optimizer) for o in items):
            return items, []
        if items and all(isinstance(o, Mapping) for o in items):
            parsed = [_parse(item) for item in items]
            return [o for opts, _ in parsed for o in opts], [s for _, ss in parsed for s in ss]
    raise MisconfigurationError(
        f"configure_optimizers returned {type(returned).__name__}; return an optimizer, a "
        f"list of optimizers, ([optimizers], [schedulers]) or a dict with 'optimizer' and "
        f"'lr_scheduler'."
    )


def check_automatic(module: str, optimizers: list[torch.optim.Optimizer]) -> None:
    """What ddpkit's automatic optimization cannot step, refused when ``fit`` starts: an
    optimizer that needs a closure (LBFGS), and several optimizers (Lightning 2.x refuses them
    under automatic optimization too, which would step them all on one loss)."""
    closure_only = [type(o).__name__ for o in optimizers if isinstance(o, torch.optim.LBFGS)]
    if closure_only:
        raise MisconfigurationError(
            f"{module}.configure_optimizers returned {closure_only[0]}, whose step "
            f"evaluates the loss again and again through a closure: ddpkit's loop runs "
            f"training_step once, before the optimizer steps. Fix: another optimizer, or run "
            f"a pytorch_lightning.LightningModule on ddpkit.lightning.Trainer (Lightning steps "
            f"with the closure)."
        )
    if len(optimizers) > 1:
        names = ", ".join(type(o).__name__ for o in optimizers)
        raise MisconfigurationRuntimeError(
            f"{module}.configure_optimizers returned {len(optimizers)} optimizers "
            f"({names}): automatic optimization steps one optimizer on the loss training_step "
            f"returns (Lightning 2.x refuses several too). Fix: one optimizer (parameter groups "
            f"give parts of the model their own lr), or train a pytorch_lightning.LightningModule "
            f"with automatic_optimization = False on ddpkit.lightning.Trainer."
        )
