"""What ``self.log`` records: step values, epoch means, and their cross-rank reduction.

``self.log`` runs every step, so it never waits for the device: a value on a GPU stays there
(no ``.item()``, no ``.cpu()``) until someone reads it, and epoch values accumulate on the
device. Reading ``callback_metrics``, ``logged_metrics`` or ``progress_bar_metrics`` brings
them to the host; a CSV row is converted only on the steps it is written.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ddpkit.core._batch import batch_size_of
from ddpkit.errors import MisconfigurationError
from ddpkit.trainer._log_hooks import options_of

_REDUCE_FX = ("max", "mean", "min", "sum")


def _default_dtype() -> torch.dtype:
    """Lightning's accumulation dtype: the default dtype, no lower than float32."""
    dtype = torch.get_default_dtype()
    return dtype if dtype in (torch.float32, torch.float64) else torch.float32


@dataclass
class _EpochAccumulator:
    """One epoch value, accumulated with Lightning's arithmetic (its ``_ResultMetric``): in the
    logged value's float32 / float64, on its device, ``total + value * batch_size`` for a mean;
    so an epoch value is Lightning's to the last bit, not a float64 value rounded apart."""

    total: torch.Tensor
    weight: float
    reduce_fx: str
    sync_dist: bool
    prog_bar: bool
    logger: bool
    names: tuple[str, ...]  # where the epoch value is published
    #: added to since last published: a read publishes (and reduces) only these, as
    #: Lightning's result metrics compute (and sync) again only after an update
    fresh: bool = True

    def add(self, value: torch.Tensor, weight: float) -> None:
        self.fresh = True
        if self.reduce_fx == "mean":
            self.total = self.total + value * weight
        elif self.reduce_fx == "sum":
            self.total = self.total + value
        else:
            pick = torch.maximum if self.reduce_fx == "max" else torch.minimum
            self.total = pick(self.total, value)
        self.weight += weight

    def local_value(self) -> torch.Tensor:
        """The epoch value on this rank (on the device it was logged on)."""
        if self.reduce_fx == "mean":
            return self.total / max(self.weight, 1e-12)
        return self.total

    def sum_and_weight(self) -> torch.Tensor:
        weight = torch.tensor(self.weight, dtype=self.total.dtype, device=self.total.device)
        return torch.stack([self.total, weight])


def _no_reduce(tensor: torch.Tensor, reduce_fx: str) -> torch.Tensor:
    return tensor


def _on_device(tensor: torch.Tensor) -> bool:
    """True when reading the value would wait for a device (anything but the CPU); one
    function, so that a CPU-only test can take the device path (tests/bench/test_hot_path.py)."""
    return not tensor.is_cpu


def _scalar(name: str, value: Any) -> torch.Tensor:
    """A logged value as a one-element tensor, detached, where it lives (no device sync)."""
    if callable(getattr(value, "compute", None)) and callable(getattr(value, "update", None)):
        raise MisconfigurationError(
            f"self.log({name!r}, <{type(value).__name__}>): ddpkit.Trainer logs tensors and "
            f"numbers, not a torchmetrics Metric (Lightning computes and resets it for you). "
            f"Fix: log metric(preds, target) each step, or metric.compute() in the epoch-end "
            f"hook and metric.reset() after it."
        )
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            raise MisconfigurationError(
                f"self.log({name!r}, <tensor of shape {tuple(value.shape)}>): log a scalar "
                f"(e.g. value.mean())."
            )
        return value.detach() if value.requires_grad else value
    return torch.tensor(float(value))


def _to_host(values: dict[str, torch.Tensor]) -> None:
    for name, value in values.items():
        if not value.is_cpu:
            values[name] = value.cpu()


class MetricStore:
    """One per trainer. The loop sets ``stage`` and calls :meth:`end_epoch`; ``self.log`` calls
    :meth:`log`. ``reduce`` is the training type's all-reduce (identity in one process)."""

    def __init__(self) -> None:
        self._stage = "train"
        self.reduce: Callable[[torch.Tensor, str], torch.Tensor] = _no_reduce
        #: the sanity check: no logger row; the logged, progress-bar and callback metrics hold
        #: its values until it ends, when the loop resets them (Lightning's)
        self.sanity = False
        #: in training_step and the batch-level hooks: ``self.log`` defaults to every step;
        #: elsewhere (epoch-end hooks, evaluation) to the epoch value
        self.step_level = True
        self.reset()

    def reset(self) -> None:
        """Forget every value (a new stage starts from nothing, as Lightning's does)."""
        self._callback_metrics: dict[str, torch.Tensor] = {}
        self._logged_metrics: dict[str, torch.Tensor] = {}
        self._bar: dict[str, torch.Tensor | float] = {}
        self._device_values = False  # some value above still lives on a device
        #: the latest ``on_step`` value of each name logged in this training epoch: every step
        #: row repeats it until the epoch ends, as Lightning's results collection does
        self.pending_step_row: dict[str, torch.Tensor] = {}
        # Per stage: a validation inside a training epoch closes its own epoch values only.
        self._epoch: dict[str, dict[str, _EpochAccumulator]] = {}
        #: step values logged in this evaluation epoch (``on_step=True``): the row Lightning
        #: writes after each batch (repeated until the epoch ends, as the training rows)
        self.eval_step_row: dict[str, torch.Tensor] = {}
        #: a step value went to the loggers' side of the store during this fit
        self.logged_step_value = False
        #: stages whose epoch is closing (between the two :meth:`end_epoch` calls around the
        #: epoch-end hooks): a value logged there is published at once, so a callback that
        #: runs after the hook that logged it reads it (Lightning's callback_metrics do)
        self._closing: set[str] = set()
        #: a batch has run since the last epoch's end or reset (Lightning's
        #: ``_first_loop_iter is not None``; a fit's validation keeps the training's): until
        #: then a read publishes the epoch values logged so far (:meth:`_read`)
        self.in_batches = False
        #: the batch being trained or evaluated (None between batches): an epoch mean weighs each
        #: value by its size when ``self.log`` is given none (Lightning's), so that a smaller
        #: last batch counts for what it holds
        #: the hook running now, as the loop names it (Lightning's ``_current_fx_name``):
        #: where ``self.log`` is refused, and its defaults (ddpkit.trainer._log_hooks)
        self.fx: str | None = None
        self._batch: Any = None
        self._sized: tuple[Any, int] | None = None  # the batch and its size, inferred once

    @property
    def stage(self) -> str:
        """Whose epoch values ``self.log`` adds to ("train", "validate", "test", ...).
        Setting it also sets the default of ``on_step``: every step in training only."""
        return self._stage

    @stage.setter
    def stage(self, stage: str) -> None:
        self._stage = stage
        self.step_level = stage == "train"

    @property
    def batch(self) -> Any:
        return self._batch

    @batch.setter
    def batch(self, batch: Any) -> None:
        self._batch = batch
        self._sized = None  # and no reference kept to the batch before
        if batch is not None:
            self.in_batches = True

    def _read(self) -> None:
        """Lightning's read: before the running epoch's first batch, reading the metrics
        publishes the epoch values logged so far (what ``on_train_start`` logs is read at
        ``on_train_epoch_start``; a ``sync_dist`` value is reduced then, on every rank that
        reads, as Lightning's is)."""
        stage = self._stage
        if not self.in_batches and stage not in self._closing:
            for acc in self._epoch.get(stage, {}).values():
                if acc.fresh:
                    self._publish(acc)
        if self._device_values:
            self._fetch()

    @property
    def callback_metrics(self) -> dict[str, torch.Tensor]:
        self._read()
        return self._callback_metrics

    @callback_metrics.setter
    def callback_metrics(self, values: dict[str, torch.Tensor]) -> None:
        self._callback_metrics = values

    @property
    def logged_metrics(self) -> dict[str, torch.Tensor]:
        self._read()
        return self._logged_metrics

    @logged_metrics.setter
    def logged_metrics(self, values: dict[str, torch.Tensor]) -> None:
        self._logged_metrics = values

    @property
    def progress_bar_metrics(self) -> dict[str, float]:
        """The values the progress bar shows, as floats (converted when read)."""
        self._read()
        return self.bar_values()

    def bar_values(self) -> dict[str, float]:
        return {name: float(value) for name, value in self._bar.items()}

    def _fetch(self) -> None:
        _to_host(self._callback_metrics)
        _to_host(self._logged_metrics)
        self._device_values = False

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
        if reduce_fx not in _REDUCE_FX:
            raise MisconfigurationError(
                f"self.log({name!r}, ..., reduce_fx={reduce_fx!r}): choose one of "
                f"{', '.join(map(repr, _REDUCE_FX))}."
            )
        on_step, on_epoch = self._levels(name, on_step, on_epoch)
        tensor = _scalar(name, value)
        # Logged both ways, a metric is published as <name>_step and <name>_epoch, and as
        # <name> (the latest of the two) in callback_metrics, as Lightning does.
        both = on_step and on_epoch
        if on_step:
            step_value = self.reduce(tensor, reduce_fx) if sync_dist else tensor
            # .item() / .cpu() wait for the device: a device value is read when read (above)
            step_name = f"{name}_step" if both else name
            if _on_device(step_value):
                self._device_values = True
            if self.stage == "train":  # callbacks read an evaluation's epoch values only
                self._callback_metrics[step_name] = step_value
                if both:
                    self._callback_metrics[name] = step_value
            if logger:
                self._logged_metrics[step_name] = step_value
                if self.stage == "train":
                    self.logged_step_value = True
                    self.pending_step_row[step_name] = step_value
                elif not self.sanity:  # the sanity check's values make no logger row
                    self.eval_step_row[step_name] = step_value
            if prog_bar:
                self._bar[step_name] = step_value
        if on_epoch:
            accumulators = self._epoch.setdefault(self.stage, {})
            acc = accumulators.get(name)
            # Lightning's: a float32 / float64 value as it is, anything else as the default dtype
            v = (
                tensor
                if tensor.dtype in (torch.float32, torch.float64)
                else tensor.to(_default_dtype())
            )
            if acc is None:
                zero = torch.zeros((), dtype=_default_dtype(), device=v.device)
                init = zero if reduce_fx in ("mean", "sum") else v
                names = (f"{name}_epoch", name) if both else (name,)
                acc = _EpochAccumulator(init, 0.0, reduce_fx, sync_dist, prog_bar, logger, names)
                accumulators[name] = acc
            if batch_size is None:
                batch_size = self._batch_size() if reduce_fx == "mean" else 1
            acc.add(v, float(batch_size))
            if self.stage in self._closing:
                self._publish(acc)  # every rank logs here alike: a sync_dist reduce is safe

    def _levels(self, name: str, on_step: bool | None, on_epoch: bool | None) -> tuple[bool, bool]:
        """``on_step`` and ``on_epoch``: the running hook's defaults and Lightning's check of
        them (``log_hooks``), else the stage's defaults; never both False."""
        fx = self.fx
        if fx is not None and (options := options_of(fx)) is not None:
            on_step, on_epoch = options.resolve(fx, on_step, on_epoch)
        else:
            on_step = self.step_level if on_step is None else on_step
            on_epoch = (not self.step_level) if on_epoch is None else on_epoch
        if not on_step and not on_epoch:
            raise MisconfigurationError(
                f"self.log({name!r}, ..., on_step=False, on_epoch=False) is not useful "
                f"(Lightning refuses it too): the value goes nowhere. Fix: on_step=True, "
                f"on_epoch=True, or both."
            )
        return on_step, on_epoch

    def _batch_size(self) -> int:
        """The size of the batch being run, inferred once a batch; 1 between batches."""
        if self._batch is None:
            return 1
        if self._sized is None:
            self._sized = (self._batch, batch_size_of(self._batch))
        return self._sized[1]

    def _publish(self, acc: _EpochAccumulator) -> float:
        """Reduce (sync_dist) and publish one epoch value; return it."""
        acc.fresh = False
        value = acc.local_value()
        if acc.sync_dist:
            if acc.reduce_fx == "mean":
                # A weighted mean across ranks: reduce the sums and the weights.
                both = self.reduce(acc.sum_and_weight(), "sum")
                value = both[0] / both[1].clamp_min(1e-12)
            else:
                value = self.reduce(value, acc.reduce_fx)
        value = value.float().cpu()
        for published in acc.names:
            self._callback_metrics[published] = value
        first = acc.names[0]
        if acc.logger:
            self._logged_metrics[first] = value
        if acc.prog_bar:
            self._bar[first] = value
        return float(value)

    def end_epoch(self, stage: str | None = None, *, closing: bool = False) -> dict[str, float]:
        """Close the epoch: reduce (sync_dist) and publish each epoch value; return those for
        the loggers (``logger=True``: the epoch's row, and what validate / test return).
        ``closing``: the epoch-end hooks run next, and what they log is published as it is
        logged; the loop then calls this again without it, which ends the closing."""
        stage = self.stage if stage is None else stage
        accumulators = self._epoch.pop(stage, {})
        out = {}
        for _, acc in sorted(accumulators.items()):
            value = self._publish(acc)
            if acc.logger and not self.sanity:
                out[acc.names[0]] = value
        if closing:
            self._closing.add(stage)
        else:
            self._closing.discard(stage)
            self.in_batches = False
            (self.pending_step_row if stage == "train" else self.eval_step_row).clear()
        return out
