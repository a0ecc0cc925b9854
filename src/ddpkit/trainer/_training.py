"""The training epochs of ``fit``, with Lightning's hooks in Lightning's order.

An epoch: ``on_train_epoch_start``; per batch ``on_train_batch_start``, the optimization
(``trainer/optimization.py``), the step-interval schedulers, ``on_train_batch_end``, the step's
row to the loggers and any validation due; at the end the epoch's validation, the epoch values,
``on_train_epoch_end`` (the metric-watching callbacks after the module) and the plateau
schedulers. A hook nobody implements costs nothing: the lists are built once.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from ddpkit.callbacks._dispatch import module_hook
from ddpkit.trainer._context import StageContext
from ddpkit.trainer._data import epoch_batches, num_batches, set_sampler_epoch
from ddpkit.trainer._evaluation import evaluate, log_epoch_row, log_row, warn_legacy_hook
from ddpkit.trainer._limits import (
    can_stop,
    check_val_interval,
    continue_note,
    fit_done,
    say_why_fit_stopped,
    val_check_batch,
    val_check_batches,
)
from ddpkit.trainer._optim import SchedulerConfig
from ddpkit.trainer._optimization import Optimization, StepModule, outputs_of, step_scheduler


class FitLoop:
    """The epochs of one ``fit`` on one rank."""

    def __init__(
        self,
        ctx: StageContext,
        optimizers: list[torch.optim.Optimizer],
        schedulers: list[SchedulerConfig],
        wrapped: nn.Module,
        step_module: StepModule,
    ) -> None:
        self.ctx, self.schedulers = ctx, schedulers
        model = ctx.model
        self.optimization = Optimization(ctx, optimizers, wrapped, step_module)
        self.custom_scheduler_step = module_hook(model, "lr_scheduler_step")
        self.epoch_end = warn_legacy_hook(
            model,
            "training_epoch_end",
            "collect outputs in training_step and use on_train_epoch_end()",
        )
        self.epoch_outputs: list[Any] = []
        self.n_train: int | None = None
        self.val_loader: Any = None
        self.val_loaded_at: float = -math.inf  # the epoch the val loader was made in
        self.get_val: Callable[[], Any] | None = None
        self.total_batches = 0  # across epochs (check_val_every_n_epoch=None counts these)
        #: resumed mid-epoch: the first epoch's batches to skip, and what runs after them
        self.resume_skip = 0
        self.resume_then: Callable[[], None] | None = None
        #: the step-interval plateau schedulers due at an epoch's last batch (after validation)
        self.last_batch_plateaus: list[Any] = []

    # -- the run -------------------------------------------------------------------------------

    def run(
        self,
        get_train: Callable[[], Any],
        get_val: Callable[[], Any],
        validation: bool,
        start_epoch: int,
        val_loaded: bool = False,
        before_epochs: Callable[[], None] | None = None,
        skip_batches: int = 0,
    ) -> None:
        """``val_loaded``: the sanity check made the val loader already (its count is known).
        ``before_epochs``: called just before the first epoch (a restart sets the RNG states of
        the checkpoint there, where the uninterrupted run stood). ``skip_batches``: the first
        epoch's batches a mid-epoch checkpoint had trained on; they are read and skipped, and
        ``before_epochs`` runs after them, before the first batch that trains."""
        ctx, state, config = self.ctx, self.ctx.state, self.ctx.config
        state.epochs_ended = False
        train = _first_loaders(self, get_train, get_val, validation, start_epoch, val_loaded)
        if train is None:
            return
        state.current_epoch = start_epoch  # a resumed fit's sanity check ran in the saved epoch
        ctx.dispatch.call("on_train_start")
        self.resume_skip, self.resume_then = skip_batches, None
        if skip_batches:
            self.resume_then = before_epochs
        elif before_epochs is not None:
            before_epochs()
        epoch = start_epoch
        while not fit_done(ctx, epoch):
            every = config.reload_dataloaders_every_n_epochs
            if every and epoch > start_epoch and (epoch - start_epoch) % every == 0:
                train = get_train()  # the val loader: when its validation runs (_validate)
                self.n_train = num_batches(train, config.limit_train_batches, "train")
            self._train_epoch(train, epoch)
            epoch += 1
            state.current_epoch = epoch
        say_why_fit_stopped(ctx, self.n_train, epoch)
        state.epochs_ended = True  # Lightning's epoch progress at on_train_end: all complete
        ctx.dispatch.call("on_train_end")

    def _train_epoch(self, train: Any, epoch: int) -> None:
        ctx, state, metrics = self.ctx, self.ctx.state, self.ctx.state.metrics
        state.current_epoch = epoch
        if state.epoch_batches == 0:  # a new epoch (a resumed one began before the checkpoint)
            state.epoch_start = (state.global_step, state.fit_batches, state.scheduler_steps)
            state.val_batches = (0, state.val_batches[1])  # Lightning's: validations per epoch
        set_sampler_epoch(train, epoch)  # a different shuffle every epoch, same on every rank
        metrics.stage, metrics.step_level = "train", False
        if not state.restarted_mid_epoch:  # (Lightning's: it ran before the checkpoint)
            ctx.dispatch.call("on_train_epoch_start")
        state.restarted_mid_epoch = False
        metrics.step_level = True
        ran_out = self._batches(train, epoch)
        state.epochs_completed, state.epoch_batches = epoch + 1, 0  # none of the next epoch yet
        # Lightning validates at the epoch's end inside its last batch, before that batch is
        # counted in the rows' step, and logs the epoch's row at that step too.
        state.batches_stepped -= 1
        if ran_out and self._val_due_at_end():
            self._validate()
        # Lightning's: the last batch's step plateaus after that validation (fresh metrics)
        for config in self.last_batch_plateaus:
            step_scheduler(self.ctx, self.custom_scheduler_step, config)
        metrics.stage, metrics.step_level = "train", False
        values = metrics.end_epoch("train", closing=True)
        if self.epoch_end is not None:
            # 1.x: after the epoch's values are published, before on_train_epoch_end
            self.epoch_end(self.epoch_outputs)
            self.epoch_outputs = []
        ctx.dispatch.train_epoch_end()
        values.update(metrics.end_epoch("train"))
        # Lightning's: the epoch plateaus after on_train_epoch_end, before the epoch's row
        for config in self.schedulers:
            plateau = config.interval == "epoch" and config.reduce_on_plateau
            if plateau and ran_out and (epoch + 1) % config.frequency == 0:
                step_scheduler(self.ctx, self.custom_scheduler_step, config)
        log_epoch_row(ctx, values)
        state.batches_stepped += 1
        state.progress.epoch_end(epoch, state.global_step, lambda: metrics.callback_metrics)
        for logger in state.loggers:
            logger.save()

    # -- one batch after the other (the hot path) ----------------------------------------------

    def _batches(self, loader: Any, epoch: int) -> bool:
        """Every batch of the epoch; True when the loader ran out (not cut short).

        Budget exemption (function ≤ 60 lines): the per-step path is kept in one frame on
        purpose — every attribute looked up once before the loop, every hook list tested as one
        tuple — because tiny models feel each call (see bench/)."""
        ctx, state, config = self.ctx, self.ctx.state, self.ctx.config
        metrics, dispatch = state.metrics, ctx.dispatch
        n = self.n_train
        accumulate = config.accumulation(epoch)
        batch_start = dispatch.callback_hooks("on_train_batch_start")
        module_start = module_hook(ctx.model, "on_train_batch_start")
        batch_end = dispatch.hooks("on_train_batch_end")
        want_outputs = bool(batch_end) or self.epoch_end is not None
        bar = state.progress if state.progress.enabled else None
        rows = bool(state.loggers) and ctx.plugin.is_global_zero and config.log_every_n_steps > 0
        every = config.log_every_n_steps or 1
        step_schedulers = [
            c for c in self.schedulers if c.interval == "step" and not c.reduce_on_plateau
        ]
        epoch_schedulers = [
            c for c in self.schedulers if c.interval == "epoch" and not c.reduce_on_plateau
        ]
        # Lightning's: after the batch's validation, on the monitored value of callback_metrics
        step_plateaus = [c for c in self.schedulers if c.interval == "step" and c.reduce_on_plateau]
        val_every = val_check_batches(self.ctx.config.val_check_interval, self.n_train)
        run_batch = self.optimization.run_batch
        skip, then = self.resume_skip, self.resume_then
        self.resume_skip, self.resume_then = 0, None  # the first epoch's alone
        batches = epoch_batches(loader, n, skip, then)
        state.epoch_batches = skip
        if state.progress.enabled:
            state.progress.start(n, f"epoch {epoch}")
        ran_out = True
        self.last_batch_plateaus = []
        for batch_idx, raw, last in batches:
            # Lightning's epoch loop asks before each batch: a stop counts once the minimums are
            # met (a callback's at on_train_epoch_start ends the epoch before its first batch)
            if state.should_stop:
                if can_stop(ctx):
                    ran_out = False
                    break
                continue_note(ctx)
            state.is_last_batch = last
            batch = metrics.batch = ctx.batch(raw)
            metrics.fx = "training_step"  # its hooks and the optimization's log as it does
            for hook in batch_start:
                hook(batch, batch_idx)
            if module_start is not None and module_start(batch, batch_idx) == -1:
                ran_out = False
                break
            boundary = last or (batch_idx + 1) % accumulate == 0
            out, loss = run_batch(batch, batch_idx, epoch, boundary, accumulate)
            state.epoch_batches = batch_idx + 1  # where a checkpoint written now resumes
            state.fit_batches += 1
            if boundary:
                state.global_step += 1
                for sched in step_schedulers:
                    if (batch_idx + 1) % sched.frequency == 0:
                        step_scheduler(self.ctx, self.custom_scheduler_step, sched)
                if last:
                    for sched in epoch_schedulers:
                        if (epoch + 1) % sched.frequency == 0:
                            step_scheduler(self.ctx, self.custom_scheduler_step, sched)
            if want_outputs:
                outputs = outputs_of(out, loss)
                if self.epoch_end is not None:
                    self.epoch_outputs.append(outputs)
                for hook in batch_end:
                    hook(outputs, batch, batch_idx)
            metrics.batch = metrics.fx = None
            if boundary:
                _step_row(ctx, rows, every)
            if bar is not None:
                bar.update(metrics.bar_values)
            self.total_batches += 1
            count = (
                batch_idx + 1 if config.check_val_every_n_epoch is not None else self.total_batches
            )
            stopping = state.should_stop and can_stop(ctx)
            if (
                not last
                and self._val_epoch(epoch)
                and (stopping or (val_every and count % val_every == 0))
                and self._has_val()
            ):
                self._validate()  # an early stop still validates first, as in Lightning
                stopping = state.should_stop and can_stop(ctx)
            if boundary:
                if step_plateaus:
                    self._step_plateaus(step_plateaus, batch_idx, last)
                state.batches_stepped += 1
            if stopping or 0 <= config.max_steps <= state.global_step:
                ran_out = last
                break
        metrics.batch = metrics.fx = None  # after a batch that stopped the epoch early
        state.progress.close()
        return ran_out

    # -- validation and schedulers -------------------------------------------------------------

    def _step_plateaus(self, plateaus: list[Any], batch_idx: int, last: bool) -> None:
        """The step-interval ReduceLROnPlateau schedulers due at this batch, after its
        validation, on the monitored value (Lightning's); the last batch's wait for the epoch's
        validation (:meth:`_train_epoch`)."""
        due = [config for config in plateaus if (batch_idx + 1) % config.frequency == 0]
        if last:
            self.last_batch_plateaus = due
            return
        for config in due:
            step_scheduler(self.ctx, self.custom_scheduler_step, config)

    def _load_val(self, epoch: int) -> None:
        assert self.get_val is not None
        self.val_loader, self.val_loaded_at = self.get_val(), epoch
        self.ctx.state.eval_rows_seen = 0  # a new loader: its rows count from 0 (Lightning's)
        if self.val_loader is not None:
            n_val = num_batches(self.val_loader, self.ctx.config.limit_val_batches, "val")
            self.ctx.state.num_val_batches = [math.inf if n_val is None else n_val]

    def _has_val(self) -> bool:
        """Validation is configured (its loader is made on first use)."""
        return self.val_loader is not None or self.get_val is not None

    def _val_epoch(self, epoch: int) -> bool:
        """``check_val_every_n_epoch``: whether epoch ``epoch`` validates."""
        every = self.ctx.config.check_val_every_n_epoch
        return every is None or (epoch + 1) % every == 0

    def _val_due_at_end(self) -> bool:
        """In a validating epoch: whether ``val_check_interval`` falls on the epoch's last batch
        (counted across epochs with ``check_val_every_n_epoch=None``)."""
        if not self._val_epoch(self.ctx.state.current_epoch) or not self._has_val():
            return False
        config = self.ctx.config
        every = val_check_batches(config.val_check_interval, self.n_train)
        if every is None:
            return True
        count = self.n_train if config.check_val_every_n_epoch is not None else self.total_batches
        return count is not None and count % every == 0

    def _validate(self) -> None:
        ctx = self.ctx
        state = ctx.state
        if module_hook(ctx.model, "on_validation_model_zero_grad") is not None:
            ctx.dispatch.call_module("on_validation_model_zero_grad")
        every = ctx.config.reload_dataloaders_every_n_epochs
        # Lightning's: made again when its validation runs n epochs after it was last made
        # (the sanity check's counts: made in the first epoch)
        if self.val_loader is None or (every and state.current_epoch - self.val_loaded_at >= every):
            self._load_val(state.current_epoch)
            if self.val_loader is None:
                self.get_val = None  # the hook gave no loader: no validation in this fit
                return
        stage = state.status.stage
        state.status.stage = "validate"
        evaluate(ctx, "validate", self.val_loader, ctx.config.limit_val_batches)
        state.status.stage = stage


def _step_row(ctx: StageContext, rows: bool, every: int) -> None:
    """The epoch's latest step values to the loggers, every ``log_every_n_steps`` steps and at
    every step once a stop is asked for (Lightning's ``should_update_logs``); a value becomes a
    float only on the steps that write a row (``.item()`` waits for the device)."""
    state = ctx.state
    pending = state.metrics.pending_step_row
    if pending and rows and (state.global_step % every == 0 or state.should_stop):
        log_row(ctx, {name: float(value) for name, value in pending.items()})
        state.step_rows += 1


def _first_loaders(
    loop: FitLoop,
    get_train: Callable[[], Any],
    get_val: Callable[[], Any],
    validation: bool,
    start_epoch: int,
    val_loaded: bool,
) -> Any:
    """The training loader of ``loop.run`` (and the val loader where the first epoch needs it
    now), or None where the fit has nothing to train."""
    ctx, state, config = loop.ctx, loop.ctx.state, loop.ctx.config
    if config.limit_train_batches == 0:
        return None  # Lightning skips the loop, and its hooks, when there is nothing to train
    train = get_train()
    loop.n_train = num_batches(train, config.limit_train_batches, "train")
    state.num_training_batches = math.inf if loop.n_train is None else loop.n_train
    state.val_check_batch = val_check_batch(config.val_check_interval, loop.n_train)
    check_val_interval(config, loop.n_train)
    if loop.n_train == 0 or fit_done(ctx, start_epoch):
        say_why_fit_stopped(ctx, loop.n_train, start_epoch)
        return None
    loop.get_val = get_val if validation else None
    state.num_val_batches = []  # Lightning's until the loader is made
    if validation and (val_loaded or loop._val_epoch(start_epoch)):
        loop._load_val(start_epoch)  # else on first use, as Lightning does
        if not loop._val_epoch(start_epoch):  # Lightning's: a sanity check's loader made
            loop.val_loaded_at = -math.inf  # outside a validation epoch does not count
    return train
