"""The training epochs of ``fit``, with Lightning's hooks in Lightning's order.

Per batch: ``on_train_batch_start``, then (at an accumulation boundary) the module's
``optimizer_step`` whose closure runs ``training_step``, ``on_before_zero_grad`` /
``optimizer_zero_grad`` (first batch of a window), ``on_before_backward``, ``backward``,
``on_after_backward``, then ``on_before_optimizer_step`` and gradient clipping before the step;
then the step-interval schedulers and ``on_train_batch_end``. Between boundaries the closure runs
under DDP's ``no_sync``. A hook nobody implements costs nothing: the lists are built once.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any, cast

import torch
from torch import nn

from ddpkit.callbacks.dispatch import module_hook
from ddpkit.errors import MisconfigurationError
from ddpkit.plugins.precision.base import PrecisionPlugin
from ddpkit.plugins.training_type.base import TrainingTypePlugin
from ddpkit.trainer.context import StageContext
from ddpkit.trainer.data import num_batches
from ddpkit.trainer.evaluation import evaluate, log_epoch_row, warn_legacy_hook
from ddpkit.trainer.optim import SchedulerConfig

__all__ = ["FitLoop", "StepModule", "StepOptimizer", "loss_of"]


class StepModule(nn.Module):
    """Routes DDP's forward to the training hook, so gradients sync through ``training_step``."""

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.module = module

    def forward(self, batch: Any, batch_idx: int) -> Any:
        return cast(Any, self.module).training_step(batch, batch_idx)


def loss_of(out: Any, where: str) -> torch.Tensor | None:
    if out is None:
        return None
    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, dict) and "loss" in out:
        return out["loss"]  # type: ignore[no-any-return]
    raise MisconfigurationError(
        f"{where} returned {type(out).__name__}; return the loss tensor, a dict with a 'loss' "
        f"key, or None to skip the batch."
    )


class StepOptimizer:
    """The optimizer a module's ``optimizer_step`` override receives (Lightning's
    ``LightningOptimizer``): ``step(closure)`` runs the closure, the pre-step hooks and clipping,
    then the precision plugin's step. Everything else is the wrapped optimizer's."""

    def __init__(self, optimizer: torch.optim.Optimizer, finish: Callable[[Any], None]) -> None:
        self.optimizer = optimizer
        self._finish = finish

    def step(self, closure: Callable[[], Any] | None = None) -> None:
        if closure is not None:
            closure()
        self._finish(self.optimizer)

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.optimizer.zero_grad(set_to_none=set_to_none)

    @property
    def param_groups(self) -> list[dict[str, Any]]:
        return self.optimizer.param_groups

    def __getattr__(self, name: str) -> Any:
        return getattr(self.optimizer, name)


def _outputs(out: Any, loss: torch.Tensor | None) -> Any:
    """What ``on_train_batch_end`` gets: Lightning's dict with the detached loss."""
    if loss is None:
        return {}
    if isinstance(out, dict):
        return {**out, "loss": loss.detach()}
    return {"loss": loss.detach()}


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
        self.ctx, self.optimizers, self.schedulers = ctx, optimizers, schedulers
        model, plugin = ctx.model, ctx.plugin
        self.wrapped = wrapped
        # One process: nothing wraps the module, so call the hook, not the wrapper module.
        self.forward = cast(Any, model).training_step if wrapped is step_module else wrapped
        # The stall watchdog's bracket around backward only where a plugin has one.
        self.watch_backward = type(plugin).collective is not TrainingTypePlugin.collective
        precision = type(ctx.precision)
        self.unscale = precision.unscale_gradients is not PrecisionPlugin.unscale_gradients
        self.custom_step = module_hook(model, "optimizer_step")
        self.custom_zero_grad = module_hook(model, "optimizer_zero_grad")
        self.custom_backward = module_hook(model, "backward")
        self.custom_clip = module_hook(model, "configure_gradient_clipping")
        self.custom_scheduler_step = module_hook(model, "lr_scheduler_step")
        self.step_end = warn_legacy_hook(
            model, "training_step_end", "do that work in training_step"
        )
        self.epoch_end = warn_legacy_hook(
            model,
            "training_epoch_end",
            "collect outputs in training_step and use on_train_epoch_end()",
        )
        self.epoch_outputs: list[Any] = []
        self.n_train: int | None = None
        self.val_loader: Any = None
        self.get_val: Callable[[], Any] | None = None
        self.total_batches = 0  # across epochs (check_val_every_n_epoch=None counts these)

    # -- the run -------------------------------------------------------------------------------

    def run(
        self,
        get_train: Callable[[], Any],
        get_val: Callable[[], Any],
        validation: bool,
        start_epoch: int,
    ) -> None:
        ctx, state, config = self.ctx, self.ctx.state, self.ctx.config
        if config.limit_train_batches == 0:
            return  # Lightning skips the loop, and its hooks, when there is nothing to train
        train = get_train()
        self.n_train = num_batches(train, config.limit_train_batches)
        state.num_training_batches = math.inf if self.n_train is None else self.n_train
        if self.n_train == 0 or self._done(start_epoch):
            return
        self.get_val = get_val if validation else None
        state.num_val_batches = [0]
        if validation and self._val_epoch(start_epoch):
            self._load_val()  # else on first use, as Lightning does
        ctx.dispatch.call("on_train_start")
        epoch = start_epoch
        while not self._done(epoch):
            every = config.reload_dataloaders_every_n_epochs
            if every and epoch > start_epoch and (epoch - start_epoch) % every == 0:
                train = get_train()
                self.n_train = num_batches(train, config.limit_train_batches)
                if self.val_loader is not None:
                    self._load_val()
            self._train_epoch(train, epoch)
            epoch += 1
            state.current_epoch = epoch
        ctx.dispatch.call("on_train_end")

    def _can_stop(self) -> bool:
        """``should_stop`` counts once ``min_epochs`` and ``min_steps`` are met (Lightning's)."""
        state, config = self.ctx.state, self.ctx.config
        return state.current_epoch >= config.min_epochs and state.global_step >= config.min_steps

    def _done(self, epoch: int) -> bool:
        state, config = self.ctx.state, self.ctx.config
        if 0 <= config.max_steps <= state.global_step:
            return True
        if 0 <= config.max_epochs <= epoch:
            return True
        met_min = epoch >= config.min_epochs and state.global_step >= config.min_steps
        return state.should_stop and met_min

    def _train_epoch(self, train: Any, epoch: int) -> None:
        ctx, state, metrics = self.ctx, self.ctx.state, self.ctx.state.metrics
        state.current_epoch = epoch
        set_epoch = getattr(getattr(train, "sampler", None), "set_epoch", None)
        if set_epoch is not None:
            set_epoch(epoch)  # a different shuffle every epoch, same on every rank
        metrics.stage, metrics.step_level = "train", False
        ctx.dispatch.call("on_train_epoch_start")
        metrics.step_level = True
        ran_out = self._batches(train, epoch)
        state.epochs_completed = epoch + 1
        if ran_out and self._val_due_at_end():
            self._validate()
        metrics.stage, metrics.step_level = "train", False
        if self.epoch_end is not None:
            self.epoch_end(self.epoch_outputs)
            self.epoch_outputs = []
        values = metrics.end_epoch("train")
        ctx.dispatch.train_epoch_end()
        values.update(metrics.end_epoch("train"))
        log_epoch_row(ctx, values)
        for config in self.schedulers:
            plateau = config.interval == "epoch" and config.reduce_on_plateau
            if plateau and ran_out and (epoch + 1) % config.frequency == 0:
                self._step_scheduler(config)
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
        val_every = self._val_check_batches()
        metrics.step_row_due = rows and (state.global_step + 1) % every == 0
        if state.progress.enabled:
            state.progress.start(n, f"epoch {epoch}")
        ran_out = True
        for batch_idx, raw, last in _with_last(loader, n):
            state.is_last_batch = last
            batch = ctx.batch(raw)
            for hook in batch_start:
                hook(batch, batch_idx)
            if module_start is not None and module_start(batch, batch_idx) == -1:
                ran_out = False
                break
            boundary = last or (batch_idx + 1) % accumulate == 0
            out, loss = self._run_batch(batch, batch_idx, epoch, boundary, accumulate)
            if boundary:
                state.global_step += 1
                for sched in step_schedulers:
                    if (batch_idx + 1) % sched.frequency == 0:
                        self._step_scheduler(sched)
                if last:
                    for sched in epoch_schedulers:
                        if (epoch + 1) % sched.frequency == 0:
                            self._step_scheduler(sched)
            if want_outputs:
                outputs = _outputs(out, loss)
                if self.epoch_end is not None:
                    self.epoch_outputs.append(outputs)
                for hook in batch_end:
                    hook(outputs, batch, batch_idx)
            if boundary:
                self._step_row(rows, every)
            if bar is not None:
                bar.update(metrics.bar_values)
            self.total_batches += 1
            count = (
                batch_idx + 1 if config.check_val_every_n_epoch is not None else self.total_batches
            )
            stopping = state.should_stop and self._can_stop()
            if (
                not last
                and self._val_epoch(epoch)
                and (stopping or (val_every and count % val_every == 0))
                and self._has_val()
            ):
                self._validate()  # an early stop still validates first, as in Lightning
                stopping = state.should_stop and self._can_stop()
            if stopping or 0 <= config.max_steps <= state.global_step:
                ran_out = last
                break
        state.progress.close()
        return ran_out

    def _step_row(self, rows: bool, every: int) -> None:
        """The step's logged values to the loggers, every ``log_every_n_steps`` steps; a value
        becomes a float only on the steps that write a row (``.item()`` waits for the device)."""
        state = self.ctx.state
        metrics = state.metrics
        pending = metrics.pending_step_row
        if pending and rows and state.global_step % every == 0:
            row = {**pending, "epoch": state.current_epoch}
            for logger in state.loggers:
                logger.log_metrics(row, step=state.global_step)
            state.step_rows += 1
        pending.clear()
        metrics.step_row_due = rows and (state.global_step + 1) % every == 0

    def _run_batch(
        self, batch: Any, batch_idx: int, epoch: int, boundary: bool, accumulate: int
    ) -> tuple[Any, torch.Tensor | None]:
        zero = batch_idx % accumulate == 0
        if not boundary:
            with self.ctx.plugin.no_sync(self.wrapped):
                return self._closure(batch, batch_idx, epoch, zero, accumulate)
        if self.custom_step is None:
            result = self._closure(batch, batch_idx, epoch, zero, accumulate)
            for opt in self.optimizers:
                self._finish_step(opt)
            return result
        box: list[tuple[Any, torch.Tensor | None]] = []

        def closure() -> torch.Tensor | None:
            box.append(self._closure(batch, batch_idx, epoch, zero, accumulate))
            return box[-1][1]

        for i, opt in enumerate(self.optimizers):
            wrapped = StepOptimizer(opt, self._finish_step)
            self.custom_step(epoch, batch_idx, wrapped, closure if i == 0 else None)
        if not box:
            raise MisconfigurationError(
                f"{type(self.ctx.model).__name__}.optimizer_step(...) did not run "
                f"optimizer_closure, so training_step never ran. Fix: call "
                f"optimizer.step(closure=optimizer_closure)."
            )
        return box[-1]

    def _closure(
        self, batch: Any, batch_idx: int, epoch: int, zero: bool, accumulate: int
    ) -> tuple[Any, torch.Tensor | None]:
        """``training_step``, ``zero_grad`` (first batch of a window), backward and its hooks."""
        ctx = self.ctx
        if ctx.plain_forward:
            out = self.forward(batch, batch_idx)
        else:
            with ctx.precision.forward_context():
                out = self.forward(batch, batch_idx)
        if self.step_end is not None:
            out = self.step_end(out)
        loss = loss_of(out, "training_step")
        if zero:
            before_zero = ctx.dispatch.hooks("on_before_zero_grad")
            for opt in self.optimizers:
                for hook in before_zero:
                    hook(opt)
                if self.custom_zero_grad is not None:
                    self.custom_zero_grad(epoch, batch_idx, opt)
                else:
                    opt.zero_grad()
        if loss is None:
            if ctx.plugin.world_size > 1:
                raise MisconfigurationError(
                    "training_step returned None under DDP: the other ranks wait for this "
                    "rank's gradients. Fix: return a loss on every rank (multiply it by 0 to "
                    "skip a batch)."
                )
            return out, None
        self._backward(loss / accumulate if accumulate > 1 else loss)
        return out, loss

    def _backward(self, loss: torch.Tensor) -> None:
        ctx = self.ctx
        for hook in ctx.dispatch.hooks("on_before_backward"):
            hook(loss)
        if self.custom_backward is not None:
            scaler = getattr(ctx.precision, "scaler", None)
            self.custom_backward(scaler.scale(loss) if scaler is not None else loss)
        elif self.watch_backward:
            # The all-reduce happens in backward: the stall watchdog must see it.
            with ctx.plugin.collective("backward"):
                ctx.precision.backward(loss)
        else:
            ctx.precision.backward(loss)
        for hook in ctx.dispatch.hooks("on_after_backward"):
            hook()

    def _finish_step(self, opt: torch.optim.Optimizer) -> None:
        """Gradients unscaled (16-mixed), ``on_before_optimizer_step``, clipping, the step."""
        ctx, config = self.ctx, self.ctx.config
        if self.unscale:
            ctx.precision.unscale_gradients(opt)
        for hook in ctx.dispatch.hooks("on_before_optimizer_step"):
            hook(opt)
        if self.custom_clip is not None:
            self.custom_clip(opt, config.gradient_clip_val, config.gradient_clip_algorithm)
        elif config.gradient_clip_val:
            params = [p for group in opt.param_groups for p in group["params"]]
            if config.gradient_clip_algorithm == "value":
                torch.nn.utils.clip_grad_value_(params, config.gradient_clip_val)
            else:
                torch.nn.utils.clip_grad_norm_(params, config.gradient_clip_val)
        ctx.precision.optimizer_step(opt)

    # -- validation and schedulers -------------------------------------------------------------

    def _load_val(self) -> None:
        assert self.get_val is not None
        self.val_loader = self.get_val()
        if self.val_loader is not None:
            n_val = num_batches(self.val_loader, self.ctx.config.limit_val_batches)
            self.ctx.state.num_val_batches = [math.inf if n_val is None else n_val]

    def _has_val(self) -> bool:
        """Validation is configured (its loader is made on first use)."""
        return self.val_loader is not None or self.get_val is not None

    def _val_epoch(self, epoch: int) -> bool:
        every = self.ctx.config.check_val_every_n_epoch
        return every is None or (epoch + 1) % every == 0

    def _val_check_batches(self) -> int | None:
        """Validate every this many batches inside the epoch; None: at the epoch's end."""
        interval, n = self.ctx.config.val_check_interval, self.n_train
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

    def _val_due_at_end(self) -> bool:
        ctx = self.ctx
        if not self._val_epoch(ctx.state.current_epoch) or not self._has_val():
            return False
        every = self._val_check_batches()
        if every is None:
            return True
        count = (
            self.n_train if ctx.config.check_val_every_n_epoch is not None else self.total_batches
        )
        return count is not None and count % every == 0

    def _validate(self) -> None:
        ctx = self.ctx
        state = ctx.state
        if module_hook(ctx.model, "on_validation_model_zero_grad") is not None:
            ctx.dispatch.call_module("on_validation_model_zero_grad")
        if self.val_loader is None:
            self._load_val()
            if self.val_loader is None:
                self.get_val = None  # the hook gave no loader: no validation in this fit
                return
        stage = state.status.stage
        state.status.stage = "validate"
        evaluate(ctx, "validate", self.val_loader, ctx.config.limit_val_batches)
        state.status.stage = stage
        for config in self.schedulers:
            if config.interval == "step" and config.reduce_on_plateau:
                self._step_scheduler(config)

    def _step_scheduler(self, config: SchedulerConfig) -> None:
        metric = None
        if config.reduce_on_plateau:
            name = config.monitor
            value = self.ctx.state.metrics.callback_metrics.get(name) if name else None
            if value is None:
                if not config.strict:
                    return
                raise MisconfigurationError(
                    f"ReduceLROnPlateau monitors {name!r}, which was not logged. Logged: "
                    f"{sorted(self.ctx.state.metrics.callback_metrics)}. Fix: set 'monitor' to "
                    f"one of them."
                )
            metric = float(value)
        if self.custom_scheduler_step is not None:
            self.custom_scheduler_step(config.scheduler, metric)
        elif metric is None:
            config.scheduler.step()
        else:
            config.scheduler.step(metric)


def _with_last(loader: Any, n: int | None) -> Iterator[tuple[int, Any, bool]]:
    """``(batch_idx, batch, is_last)`` for the epoch's batches. With a known count the last is
    the n-th; without one, the loader is read one batch ahead to know it."""
    if n is not None:
        for batch_idx, batch in enumerate(loader):
            if batch_idx >= n:
                return
            yield batch_idx, batch, batch_idx + 1 == n
        return
    iterator = iter(loader)
    try:
        ahead = next(iterator)
    except StopIteration:
        return
    batch_idx = 0
    while True:
        try:
            following = next(iterator)
        except StopIteration:
            yield batch_idx, ahead, True
            return
        yield batch_idx, ahead, False
        ahead, batch_idx = following, batch_idx + 1
