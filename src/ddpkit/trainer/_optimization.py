"""The optimizer step of ``fit``, with Lightning's optimization hooks in Lightning's order.

At an accumulation boundary the module's ``optimizer_step`` runs (the default steps the
optimizer directly), its closure running ``training_step``, ``on_before_zero_grad`` and
``optimizer_zero_grad`` (on a window's first batch), ``on_before_backward``, ``backward`` and
``on_after_backward``; then the gradients are unscaled (16-mixed), ``on_before_optimizer_step``
runs, the gradients are clipped (``configure_gradient_clipping``) and the precision plugin
steps. Between boundaries the closure runs under DDP's ``no_sync``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import torch
from torch import nn

from ddpkit._compat_1x.optimizer_hooks import as_2x, takes_optimizer_idx
from ddpkit.callbacks._dispatch import module_hook
from ddpkit.errors import MisconfigurationError
from ddpkit.plugins.precision._base import PrecisionPlugin
from ddpkit.plugins.training_type._base import TrainingTypePlugin
from ddpkit.trainer._context import StageContext
from ddpkit.trainer._evaluation import warn_legacy_hook
from ddpkit.trainer._optim import SchedulerConfig
from ddpkit.utilities._rank_zero import rank_zero_warn


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


def outputs_of(out: Any, loss: torch.Tensor | None) -> Any:
    """What ``on_train_batch_end`` gets: Lightning's dict with the detached loss."""
    if loss is None:
        return {}
    if isinstance(out, dict):
        return {**out, "loss": loss.detach()}
    return {"loss": loss.detach()}


class Optimization:
    """The optimizer steps of one ``fit`` on one rank; every hook looked up once."""

    def __init__(
        self,
        ctx: StageContext,
        optimizers: list[torch.optim.Optimizer],
        wrapped: nn.Module,
        step_module: StepModule,
    ) -> None:
        self.ctx, self.optimizers, self.wrapped = ctx, optimizers, wrapped
        model, plugin = ctx.model, ctx.plugin
        # One process: nothing wraps the module, so call the hook, not the wrapper module.
        self.forward = cast(Any, model).training_step if wrapped is step_module else wrapped
        # The stall watchdog's bracket around backward only where a plugin has one.
        self.watch_backward = type(plugin).collective is not TrainingTypePlugin.collective
        precision = type(ctx.precision)
        self.unscale = precision.unscale_gradients is not PrecisionPlugin.unscale_gradients
        self.custom_step = _2x(model, "optimizer_step", ctx.precision)
        self.custom_zero_grad = _2x(model, "optimizer_zero_grad", ctx.precision)
        self.custom_backward = module_hook(model, "backward")
        self.custom_clip = _2x(model, "configure_gradient_clipping", ctx.precision)
        self.step_end = warn_legacy_hook(
            model, "training_step_end", "do that work in training_step"
        )
        hooks = ctx.dispatch.hooks
        self.before_zero_grad = hooks("on_before_zero_grad")
        self.before_backward = hooks("on_before_backward")
        self.after_backward = hooks("on_after_backward")
        self.before_optimizer_step = hooks("on_before_optimizer_step")

    def run_batch(
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
            for opt in self.optimizers:
                for hook in self.before_zero_grad:
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
        for hook in self.before_backward:
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
        for hook in self.after_backward:
            hook()

    def _finish_step(self, opt: torch.optim.Optimizer) -> None:
        """Gradients unscaled (16-mixed), ``on_before_optimizer_step``, clipping, the step."""
        ctx, config = self.ctx, self.ctx.config
        if self.unscale:
            ctx.precision.unscale_gradients(opt)
        for hook in self.before_optimizer_step:
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


def _2x(model: nn.Module, name: str, precision: PrecisionPlugin) -> Callable[..., Any] | None:
    """The module's ``name`` hook, a 1.x signature (``optimizer_idx``) called as 2.x calls it."""
    hook = module_hook(model, name)
    if hook is None or not takes_optimizer_idx(hook):
        return hook
    return as_2x(name, hook, native_amp=getattr(precision, "scaler", None) is not None)


def step_scheduler(
    ctx: StageContext, custom: Callable[..., Any] | None, config: SchedulerConfig
) -> None:
    """One scheduler step (through the module's ``lr_scheduler_step`` when it has one); a
    ``ReduceLROnPlateau`` gets its monitored value."""
    metric = None
    if config.reduce_on_plateau:
        name = config.monitor
        value = ctx.state.metrics.callback_metrics.get(name) if name else None
        if value is None:
            if not config.strict:
                rank_zero_warn(
                    f"ReduceLROnPlateau conditioned on metric {name} which is not available "
                    f"but strict is set to `False`. Skipping learning rate update.",
                    RuntimeWarning,
                )
                return
            raise MisconfigurationError(
                f"ReduceLROnPlateau monitors {name!r}, which was not logged. Logged: "
                f"{sorted(ctx.state.metrics.callback_metrics)}. Fix: set 'monitor' to one of them."
            )
        metric = float(value)
    ctx.state.scheduler_steps += 1
    if custom is not None:
        custom(config.scheduler, metric)
    elif metric is None:
        config.scheduler.step()
    else:
        config.scheduler.step(metric)
