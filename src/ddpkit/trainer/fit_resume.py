"""What ``fit`` does with the checkpoint it resumes from, before its first epoch: the training
state restored, Lightning's check that the checkpoint is not past ``max_epochs``, its INFO line."""

from __future__ import annotations

from typing import Any

from ddpkit.errors import MisconfigurationError
from ddpkit.trainer._lightning_loops import restart_stage
from ddpkit.trainer.checkpoint import restore_training
from ddpkit.trainer.context import StageContext
from ddpkit.utilities._rank_zero import rank_zero_info

__all__ = ["check_automatic_optimization", "resume_fit"]


def check_automatic_optimization(model: Any) -> None:
    """ddpkit's loop optimizes automatically; a module that asks otherwise is refused."""
    if not getattr(model, "automatic_optimization", True):
        raise MisconfigurationError(
            f"{type(model).__name__}.automatic_optimization = False: ddpkit's loop runs "
            f"automatic optimization only. Fix: subclass pytorch_lightning.LightningModule and "
            f"train it with ddpkit.lightning.Trainer (manual optimization), or leave it True."
        )


def resume_fit(
    ctx: StageContext,
    ckpt_path: Any,
    checkpoint: dict[str, Any],
    optimizers: list[Any],
    schedulers: list[Any],
) -> int:
    """Restore the training state of ``checkpoint``; the epoch the loop starts at."""
    state, config = ctx.state, ctx.config
    start_epoch = restore_training(checkpoint, state, optimizers, schedulers, ctx.precision)
    state.restarting, state.restarted_mid_epoch, one_more = restart_stage(
        checkpoint, config.max_steps
    )
    state.batches_stepped += one_more  # (Lightning's: the step row the batch writes)
    if "loops" in checkpoint:
        # Lightning's: until training goes on, the epoch is the one that wrote the checkpoint
        # (its sanity check runs in it); the loop then starts at start_epoch.
        state.current_epoch = int(checkpoint.get("epoch", start_epoch))
    if 0 <= config.max_epochs < state.current_epoch:
        raise MisconfigurationError(
            f"Trainer(max_epochs={config.max_epochs}).fit(ckpt_path={ckpt_path!r}): "
            f"You restored a checkpoint with current_epoch={state.current_epoch}, but you have "
            f"set Trainer(max_epochs={config.max_epochs}) (Lightning's check). Fix: "
            f"Trainer(max_epochs={state.current_epoch + 1}) or more, or another checkpoint."
        )
    if ctx.plugin.is_global_zero:
        rank_zero_info(f"Restored all states from the checkpoint at {ckpt_path}")
    return start_epoch
