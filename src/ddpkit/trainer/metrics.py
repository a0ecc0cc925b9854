"""What ``self.log`` records: step values, epoch means, and their cross-rank reduction."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ddpkit.errors import MisconfigurationError

__all__ = ["MetricStore"]

_REDUCE_FX = ("max", "mean", "min", "sum")


@dataclass
class _EpochAccumulator:
    total: float
    weight: float
    reduce_fx: str
    sync_dist: bool
    prog_bar: bool
    logger: bool
    names: tuple[str, ...]  # where the epoch value is published

    def add(self, value: float, weight: float) -> None:
        if self.reduce_fx in ("mean", "sum"):
            self.total += value * (weight if self.reduce_fx == "mean" else 1.0)
            self.weight += weight
        elif self.reduce_fx == "max":
            self.total = max(self.total, value)
        else:
            self.total = min(self.total, value)

    def local_value(self) -> float:
        if self.reduce_fx == "mean":
            return self.total / max(self.weight, 1e-12)
        return self.total


def _no_reduce(tensor: torch.Tensor, reduce_fx: str) -> torch.Tensor:
    return tensor


class MetricStore:
    """One per trainer. The loop sets ``stage`` and calls :meth:`end_epoch`; ``self.log`` calls
    :meth:`log`. ``reduce`` is the training type's all-reduce (identity in one process)."""

    def __init__(self) -> None:
        self.stage = "train"
        self.callback_metrics: dict[str, torch.Tensor] = {}
        self.logged_metrics: dict[str, torch.Tensor] = {}
        self.progress_bar_metrics: dict[str, float] = {}
        self.pending_step_row: dict[str, float] = {}
        # Per stage: a validation inside a training epoch closes its own epoch values only.
        self._epoch: dict[str, dict[str, _EpochAccumulator]] = {}
        self.reduce: Callable[[torch.Tensor, str], torch.Tensor] = _no_reduce
        self.enabled = True

    def log(
        self,
        name: str,
        value: Any,
        *,
        prog_bar: bool,
        logger: bool,
        on_step: bool | None,
        on_epoch: bool | None,
        sync_dist: bool,
        reduce_fx: str,
        batch_size: int | None,
    ) -> None:
        if not self.enabled:
            return
        if reduce_fx not in _REDUCE_FX:
            raise MisconfigurationError(
                f"self.log({name!r}, ..., reduce_fx={reduce_fx!r}): choose one of "
                f"{', '.join(map(repr, _REDUCE_FX))}."
            )
        training = self.stage == "train"
        on_step = training if on_step is None else on_step
        on_epoch = (not training) if on_epoch is None else on_epoch
        if isinstance(value, torch.Tensor):
            if value.numel() != 1:
                raise MisconfigurationError(
                    f"self.log({name!r}, <tensor of shape {tuple(value.shape)}>): log a scalar "
                    f"(e.g. value.mean())."
                )
            tensor = value.detach()
        else:
            tensor = torch.tensor(float(value))
        # Logged both ways, a metric is published as <name>_step and <name>_epoch, and as
        # <name> (the latest of the two) in callback_metrics, as Lightning does.
        both = on_step and on_epoch
        if on_step:
            step_value = self.reduce(tensor, reduce_fx) if sync_dist else tensor
            # .item() syncs a CUDA stream; only values someone reads are converted.
            step_name = f"{name}_step" if both else name
            cpu_value = step_value.cpu()
            self.callback_metrics[step_name] = cpu_value
            if both:
                self.callback_metrics[name] = cpu_value
            if logger:
                self.logged_metrics[step_name] = cpu_value
                self.pending_step_row[step_name] = float(step_value)
            if prog_bar:
                self.progress_bar_metrics[step_name] = float(step_value)
        if on_epoch:
            accumulators = self._epoch.setdefault(self.stage, {})
            acc = accumulators.get(name)
            v = float(tensor)
            if acc is None:
                init = 0.0 if reduce_fx in ("mean", "sum") else v
                names = (f"{name}_epoch", name) if both else (name,)
                acc = _EpochAccumulator(init, 0.0, reduce_fx, sync_dist, prog_bar, logger, names)
                accumulators[name] = acc
            acc.add(v, float(batch_size or 1))

    def end_epoch(self, stage: str | None = None) -> dict[str, float]:
        """Close the epoch: reduce (sync_dist) and publish each epoch value; return them."""
        out: dict[str, float] = {}
        accumulators = self._epoch.pop(self.stage if stage is None else stage, {})
        for _, acc in sorted(accumulators.items()):
            value = torch.tensor(acc.local_value(), dtype=torch.float64)
            if acc.sync_dist:
                if acc.reduce_fx == "mean":
                    # A weighted mean across ranks: reduce the sums and the weights.
                    both = torch.tensor([acc.total, acc.weight], dtype=torch.float64)
                    both = self.reduce(both, "sum")
                    value = both[0] / both[1].clamp_min(1e-12)
                else:
                    value = self.reduce(value, acc.reduce_fx)
            value = value.float().cpu()
            for published in acc.names:
                self.callback_metrics[published] = value
            first = acc.names[0]
            if acc.logger:
                self.logged_metrics[first] = value
            if acc.prog_bar:
                self.progress_bar_metrics[first] = float(value)
            out[first] = float(value)
        return out

    def discard_epoch(self, stage: str | None = None) -> None:
        self._epoch.pop(self.stage if stage is None else stage, None)
