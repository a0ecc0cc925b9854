"""When a fit stops and when it validates: Lightning's limit rules (``max_epochs`` /
``max_steps``, ``min_epochs`` / ``min_steps`` against ``should_stop``, ``val_check_interval``),
with the INFO lines Lightning prints about them."""

from __future__ import annotations

import math
from typing import Any

from ddpkit.errors import MisconfigurationError
from ddpkit.trainer._context import StageContext


def continue_note(ctx: StageContext) -> None:
    """Lightning's INFO line, once per Trainer, when a stop must wait for the minimums."""
    config, said = ctx.config, ctx.state.said
    message = (
        f"Trainer was signaled to stop but the required `min_epochs={config.min_epochs!r}` or "
        f"`min_steps={config.min_steps!r}` has not been met. Training will continue..."
    )
    if message not in said:
        said.add(message)
        ctx.info(message)


def can_stop(ctx: StageContext) -> bool:
    """``should_stop`` counts once ``min_epochs`` and ``min_steps`` are met (Lightning's)."""
    state, config = ctx.state, ctx.config
    return state.current_epoch >= config.min_epochs and state.global_step >= (config.min_steps or 0)


def fit_done(ctx: StageContext, epoch: int) -> bool:
    state, config = ctx.state, ctx.config
    if 0 <= config.max_steps <= state.global_step:
        return True
    if 0 <= config.max_epochs <= epoch:
        return True
    met_min = epoch >= config.min_epochs and state.global_step >= (config.min_steps or 0)
    return state.should_stop and met_min


def check_val_interval(config: Any, n: int | None) -> None:
    """An int ``val_check_interval`` past the epoch's batches would never validate
    (Lightning's ValueError); counting across epochs (``check_val_every_n_epoch=None``) it
    may."""
    interval = config.val_check_interval
    if not isinstance(interval, int) or n is None or config.check_val_every_n_epoch is None:
        return
    if interval > n:
        raise MisconfigurationError(
            f"Trainer(val_check_interval={interval}): validation every {interval} training "
            f"batches, but an epoch has {n}{_limited(config.limit_train_batches)}, so it "
            f"would never run. Fix: Trainer(val_check_interval={n}) or lower, "
            f"limit_val_batches=0 to turn validation off, or check_val_every_n_epoch=None to "
            f"count batches across epochs."
        )


def say_why_fit_stopped(ctx: StageContext, n_train: int | None, epoch: int) -> None:
    """Lightning's INFO line when a limit ends the fit (an early stop says nothing)."""
    state, config = ctx.state, ctx.config
    if n_train == 0:
        reason = "No training batches."
    elif 0 <= config.max_steps <= state.global_step:
        reason = f"`max_steps={config.max_steps}` reached."
    elif 0 <= config.max_epochs <= epoch:
        reason = f"`max_epochs={config.max_epochs}` reached."
    else:
        return
    ctx.info(f"`Trainer.fit` stopped: {reason}")


def val_check_batch(interval: int | float, n: int | None) -> int | float:
    """Lightning's ``trainer.val_check_batch``: the int interval, else the fraction of the
    epoch's batches (at least 1); ``inf`` for a loader without a length."""
    if isinstance(interval, int):
        return interval
    if n is None:
        return math.inf
    return max(1, int(n * interval))


def _limited(limit: int | float | None) -> str:
    return "" if limit is None else f" (limit_train_batches={limit!r})"


def val_check_batches(interval: int | float, n: int | None) -> int | None:
    """Validate every this many training batches; None: at the epoch's end."""
    if isinstance(interval, int):
        return interval
    if interval == 1.0:
        return None
    if n is None:
        raise MisconfigurationError(
            f"Trainer(val_check_interval={interval}): a fraction needs a train loader with a "
            f"length; pass an int number of batches."
        )
    return max(1, math.floor(n * interval))
