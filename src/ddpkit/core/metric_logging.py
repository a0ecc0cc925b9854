"""``self.log`` and ``self.log_dict`` with Lightning's exact signatures, into the loop's metric
store (``Module`` mixes this in)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch

from ddpkit.core.protocols import MetricSink
from ddpkit.errors import MisconfigurationError
from ddpkit.utilities._reprs import safe_repr

__all__ = ["MetricLogging", "reduce_name"]

#: Lightning's reduce_fx callables and the names ddpkit's metric store takes
_REDUCE_FUNCTIONS: dict[Any, str] = {
    torch.mean: "mean",
    torch.sum: "sum",
    torch.max: "max",
    torch.min: "min",
}


def reduce_name(name: str, reduce_fx: Any) -> str:
    """``reduce_fx`` as the store's name: Lightning's strings ("avg" is "mean") and its torch
    functions; anything else is refused."""
    if isinstance(reduce_fx, str):
        return "mean" if reduce_fx == "avg" else reduce_fx
    found = _REDUCE_FUNCTIONS.get(reduce_fx) if callable(reduce_fx) else None
    if found is None:
        raise MisconfigurationError(
            f"self.log({name!r}, ..., reduce_fx={safe_repr(reduce_fx)}): ddpkit reduces with "
            f"'mean', 'sum', 'max' or 'min' (or torch.mean / torch.sum / torch.max / torch.min). "
            f"Fix: pass one of those, or reduce the values yourself and log the result."
        )
    return found


class MetricLogging:
    """The logging half of ``Module``: ``_metric_sink`` is the store of the attached trainer
    (None without one: ``self.log`` then records nothing, as in Lightning's tests of a step)."""

    _metric_sink: MetricSink | None

    def log(
        self,
        name: str,
        value: Any,
        prog_bar: bool = False,
        logger: bool | None = None,
        on_step: bool | None = None,
        on_epoch: bool | None = None,
        reduce_fx: str | Callable[..., Any] = "mean",
        enable_graph: bool = False,
        sync_dist: bool = False,
        sync_dist_group: Any = None,
        add_dataloader_idx: bool = True,
        batch_size: int | None = None,
        metric_attribute: str | None = None,
        rank_zero_only: bool = False,
    ) -> None:
        """Record a metric (Lightning's signature: a misspelt keyword is a ``TypeError``). In
        ``training_step`` it defaults to every step; in evaluation to the epoch mean, which
        weighs each value by ``batch_size`` (else the batch's size, inferred as Lightning does).
        Refused where Lightning refuses it (``ddpkit.trainer.log_hooks``).
        ``sync_dist=True`` reduces it across ranks (``reduce_fx``: "mean", "sum", "max", "min" or
        ``torch.mean`` / ``torch.sum`` / ``torch.max`` / ``torch.min``) so every rank sees the same
        value. ``enable_graph``, ``add_dataloader_idx``, ``metric_attribute`` and
        ``rank_zero_only`` change nothing in ddpkit's loop (one loader a stage, values detached,
        no torchmetrics objects); ``sync_dist_group`` other than None is refused."""
        sink = self._metric_sink
        if sink is None:
            return
        if sync_dist_group is not None:
            raise MisconfigurationError(
                f"self.log({name!r}, ..., sync_dist_group=...): ddpkit reduces over every rank. "
                f"Fix: leave sync_dist_group out (or reduce in your own group with "
                f"torch.distributed.all_reduce and log the result)."
            )
        sink.log(
            name,
            value,
            prog_bar=prog_bar,
            logger=True if logger is None else logger,
            on_step=on_step,
            on_epoch=on_epoch,
            sync_dist=sync_dist,
            reduce_fx=reduce_name(name, reduce_fx),
            batch_size=batch_size,
        )

    def log_dict(
        self,
        dictionary: Mapping[str, Any],
        prog_bar: bool = False,
        logger: bool | None = None,
        on_step: bool | None = None,
        on_epoch: bool | None = None,
        reduce_fx: str | Callable[..., Any] = "mean",
        enable_graph: bool = False,
        sync_dist: bool = False,
        sync_dist_group: Any = None,
        add_dataloader_idx: bool = True,
        batch_size: int | None = None,
        rank_zero_only: bool = False,
    ) -> None:
        """``self.log`` for every item (Lightning's signature)."""
        options = {k: v for k, v in locals().items() if k not in ("self", "dictionary")}
        for name, value in dictionary.items():
            self.log(name, value, **options)
