"""Lightning 1.x's automatic optimization with several optimizers, on Lightning 2.x's manual one.

A 1.x module whose ``training_step(self, batch, batch_idx, optimizer_idx)`` takes the optimizer's
index (a GAN: ``configure_optimizers`` returns ``[opt_g, opt_d]``) is refused by Lightning 2.x,
which leaves several optimizers to manual optimization. For the length of ``fit``, ddpkit runs
it as 1.x did, written on Lightning's manual optimization (the loop, logging, checkpoints and
DDP stay Lightning's):

- per batch, each active optimizer in order — all of them, or with ``"frequency"`` in
  ``configure_optimizers``' dicts the one 1.x's cycle picks (``batch_idx`` modulo the sum of
  the frequencies) — gets :meth:`~pytorch_lightning.LightningModule.toggle_optimizer` (the
  other optimizers' parameters need no gradient), then a closure — ``training_step(batch,
  batch_idx, optimizer_idx)``, zero the gradients (``optimizer_zero_grad``), ``manual_backward``,
  ``Trainer(gradient_clip_val=...)`` through ``configure_gradient_clipping`` — run by the
  module's ``optimizer_step`` (a 1.x override taking ``optimizer_idx`` gets it) or
  ``optimizer.step(closure)``, then ``untoggle_optimizer``;
- learning-rate schedulers step where Lightning 2.x steps them in automatic optimization
  (``interval``, ``frequency``, ``monitor`` of the scheduler dicts, ``ReduceLROnPlateau`` after
  validation): Lightning's own scheduler update runs for this module — with optimizer
  ``"frequency"`` only for the schedulers of the optimizers active at that batch, counted across
  epochs (1.x's ``update_lr_schedulers``); the Trainer's scheduler configs keep each one's
  ``interval``, so ``LearningRateMonitor`` logs a step scheduler's rate at every step;
- ``training_epoch_end(outputs)`` gets ``outputs[batch][optimizer_idx]`` and
  ``on_train_batch_end`` a list of the outputs of the optimizers that ran, as 1.9 passed them
  (each a dict with the detached ``"loss"``; :mod:`ddpkit.lightning._batch_outputs`). Lightning
  2.x's manual loop takes a dict by optimizer index back from ``training_step``, which 1.x's
  list is made from.

Refused before any rank starts: ``accumulate_grad_batches`` other than 1 (1.x accumulated per
optimizer; Lightning 2.x's manual optimization leaves it to ``training_step``) and gradient
clipping with a gradient scaler (``precision=16``: the gradients are unscaled only after the
closure). Each optimizer's pass leaves the other's parameters without gradients, so DDP runs with
``find_unused_parameters=True`` (1.x's default) for such a module; a ``False`` is overridden for
the stage, with a warning that says so.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytorch_lightning as pl
from pytorch_lightning.callbacks import GradientAccumulationScheduler
from pytorch_lightning.core.optimizer import LightningOptimizer
from pytorch_lightning.strategies import DDPStrategy

from ddpkit._compat_1x.optimizer_hooks import keywords_of, takes_optimizer_idx
from ddpkit.errors import DDPKitWarning, MisconfigurationError
from ddpkit.lightning._adapters import step_output
from ddpkit.lightning._batch_outputs import epoch_end_outputs
from ddpkit.lightning._lightning_private import (
    _call_callback_hooks,
    _call_lightning_module_hook,
    _configure_optimizers,
    _configure_schedulers_automatic_opt,
)
from ddpkit.utilities._rank_zero import rank_zero_warn


def is_1x_multi_optimizer(model: Any) -> bool:
    """True for a module whose ``training_step`` takes 1.x's ``optimizer_idx``."""
    if not isinstance(model, pl.LightningModule):
        return False
    step = getattr(type(model), "training_step", None)
    return step is not None and "optimizer_idx" in inspect.signature(step).parameters


def _loss(output: Any) -> Any:
    return output.get("loss") if isinstance(output, dict) else output


def _epoch_output(output: Any) -> Any:
    """What 1.x kept of a step's output for ``training_epoch_end``: the loss detached."""
    if isinstance(output, dict):
        return {k: v.detach() if k == "loss" and hasattr(v, "detach") else v
                for k, v in output.items()}  # fmt: skip
    return None if output is None else {"loss": output.detach()}


class OneXOptimization:
    """The state shared by the instance attributes a stage installs on the module."""

    def __init__(self, module: pl.LightningModule) -> None:
        self.module = module
        self.frequencies: list[int] = []
        self.scheduler_configs: list[Any] = []
        self.clip: tuple[Any, Any] = (None, None)
        #: each batch's outputs by optimizer index this epoch (kept for training_epoch_end)
        self.epoch_outputs: list[dict[int, Any]] = []
        self.keep_outputs = callable(getattr(type(module), "training_epoch_end", None))
        #: a configure_optimizers the instance holds (assigned by LightningCLI, or the user)
        self.own_configure: Any = vars(module).get("configure_optimizers")

    # -- configure_optimizers ------------------------------------------------------------------

    def configure_optimizers(self) -> Any:
        """The module's, with 1.x's ``frequency`` keys kept here and the schedulers parsed as
        automatic optimization parses them; Lightning's manual parser gets the bare objects."""
        own = self.own_configure  # one assigned on the instance (LightningCLI's) wins, as in 1.x
        conf: Any = (
            own() if own is not None else type(self.module).configure_optimizers(self.module)
        )
        dicts = isinstance(conf, list | tuple) and all(isinstance(d, dict) for d in conf)
        if dicts and conf:
            self.frequencies = [d["frequency"] for d in conf if d.get("frequency") is not None]
            conf = [{k: v for k, v in d.items() if k != "frequency"} for d in conf]
        elif isinstance(conf, dict) and "frequency" in conf:
            conf = {k: v for k, v in conf.items() if k != "frequency"}
        optimizers, schedulers, monitor = _configure_optimizers(conf)
        # 1.x's trainer.optimizer_frequencies, and (1.0–1.5) the schedulers' opt_idx, set for
        # optimizers given as dicts
        kept = vars(self.module.trainer)
        kept["_ddpkit_optimizer_frequencies"] = list(self.frequencies)
        kept["_ddpkit_scheduler_opt_idx"] = dicts
        self.scheduler_configs = _configure_schedulers_automatic_opt(schedulers, monitor)
        if self.frequencies and len(self.frequencies) != len(optimizers):
            raise MisconfigurationError(
                f"{type(self.module).__name__}.configure_optimizers(): {len(self.frequencies)} "
                f"of {len(optimizers)} optimizer dicts have a 'frequency'. Fix: give each one "
                f"a frequency, or none."
            )
        # The keys manual optimization keeps, which LearningRateMonitor reads (its interval).
        kept_keys = ("scheduler", "name", "interval", "frequency")
        return list(optimizers), [
            {key: getattr(c, key) for key in kept_keys} for c in self.scheduler_configs
        ]

    # -- training_step -------------------------------------------------------------------------

    def active(self, optimizers: list[Any], batch_idx: int) -> list[tuple[int, Any]]:
        """1.x's ``_get_active_optimizers``: every optimizer, or the one the frequencies pick."""
        if not self.frequencies:
            return list(enumerate(optimizers))
        cumulative = np.cumsum(self.frequencies)
        index = int(np.searchsorted(cumulative, batch_idx % int(cumulative[-1]), side="right"))
        return [(index, optimizers[index])]

    def schedulers(self, optimizers: list[Any], batch_idx: int) -> list[Any]:
        """The scheduler configs that step at ``batch_idx`` (counted across epochs). 1.x's rule
        with ``frequency``: only those of the active optimizer (1.x's ``update_lr_schedulers``)."""
        if not self.frequencies:
            return self.scheduler_configs
        active = {id(o) for _, o in self.active(optimizers, batch_idx)}
        return [c for c in self.scheduler_configs if id(c.scheduler.optimizer) in active]

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        module = self.module
        optimizers = module.optimizers()
        optimizers = optimizers if isinstance(optimizers, list) else [optimizers]
        outputs: dict[int, Any] = {}
        for n, (index, optimizer) in enumerate(self.active(optimizers, batch_idx)):
            if n:  # 1.x counted a batch as one step: the first optimizer's step counts it
                optimizer = _uncounted(optimizer, module.trainer)
            with self._toggled(optimizer, index, len(optimizers)):
                output = self._step(batch, batch_idx, index, optimizer, len(optimizers))
            kept = _epoch_output(output)
            if kept is not None:
                outputs[index] = kept
        if self.keep_outputs:  # a batch without outputs too: it counts in 1.x's squeeze
            self.epoch_outputs.append(dict(outputs))
        # Lightning's manual loop takes a dict (or a tensor, or None) back.
        if len(optimizers) == 1:
            return outputs.get(0)
        return outputs or None

    @contextlib.contextmanager
    def _toggled(self, optimizer: Any, index: int, count: int) -> Iterator[None]:
        if count == 1:
            yield
            return
        module = self.module
        toggle = type(module).toggle_optimizer
        if takes_optimizer_idx(toggle):  # a 1.x override
            module.toggle_optimizer(optimizer, index)  # type: ignore[call-arg]
        else:
            module.toggle_optimizer(optimizer)
        try:
            yield
        finally:
            untoggle: Any = module.untoggle_optimizer
            untoggle(index if takes_optimizer_idx(type(module).untoggle_optimizer) else optimizer)

    def _step(self, batch: Any, batch_idx: int, index: int, optimizer: Any, count: int) -> Any:
        module, trainer = self.module, self.module.trainer
        results: list[Any] = []
        vars(module)["_ddpkit_optimizer_idx"] = index  # a 1.x backward(loss, optimizer, idx)

        def closure() -> Any:
            args = (batch, batch_idx, index) if count > 1 or self._needs_index() else (
                batch, batch_idx)  # fmt: skip
            output = step_output(module, "training", type(module).training_step(module, *args))
            results.append(output)
            self._zero_grad(trainer, optimizer, index, batch_idx)
            loss = _loss(output)
            if loss is None:
                return None
            module.manual_backward(loss)
            self._clip_gradients(optimizer, index)
            return loss

        args: tuple[Any, ...] = (trainer.current_epoch, batch_idx, optimizer, closure)
        keywords: dict[str, Any] = {}
        if takes_optimizer_idx(type(module).optimizer_step):  # 1.x's signature
            args = (trainer.current_epoch, batch_idx, optimizer, index, closure)
            keywords = keywords_of(type(module).optimizer_step, {
                "on_tpu": False,
                "using_native_amp": getattr(trainer.precision_plugin, "scaler", None) is not None,
                "using_lbfgs": type(optimizer.optimizer).__name__ == "LBFGS",
            })  # fmt: skip
        _call_lightning_module_hook(trainer, "optimizer_step", *args, **keywords)
        return results[-1] if results else None

    def _needs_index(self) -> bool:
        parameter = inspect.signature(type(self.module).training_step).parameters["optimizer_idx"]
        return parameter.default is inspect.Parameter.empty

    def _zero_grad(self, trainer: pl.Trainer, optimizer: Any, index: int, batch_idx: int) -> None:
        _call_callback_hooks(trainer, "on_before_zero_grad", optimizer)
        _call_lightning_module_hook(trainer, "on_before_zero_grad", optimizer)
        args: tuple[Any, ...] = (trainer.current_epoch, batch_idx, optimizer)
        if takes_optimizer_idx(type(self.module).optimizer_zero_grad):
            args = (*args, index)
        _call_lightning_module_hook(trainer, "optimizer_zero_grad", *args)

    def _clip_gradients(self, optimizer: Any, index: int) -> None:
        value, algorithm = self.clip
        hook = type(self.module).configure_gradient_clipping
        if value is None and hook is pl.LightningModule.configure_gradient_clipping:
            return
        args = (optimizer, index) if takes_optimizer_idx(hook) else (optimizer,)  # 1.5–1.9: index
        clip: Any = self.module.configure_gradient_clipping
        clip(*args, gradient_clip_val=value, gradient_clip_algorithm=algorithm)

    def take_epoch_outputs(self) -> list[Any]:
        """``outputs`` of 1.x's ``training_epoch_end``: per batch, then per optimizer."""
        kept, self.epoch_outputs = self.epoch_outputs, []
        return epoch_end_outputs(kept, len(self.module.trainer.optimizers))


def _uncounted(optimizer: Any, trainer: pl.Trainer) -> Any:
    """The same optimizer, stepping through the strategy as the Trainer's own wrapper does, but
    without counting a step (``trainer.global_step`` counts batches, as in 1.x)."""
    return LightningOptimizer._to_lightning_optimizer(optimizer.optimizer, trainer.strategy)


class _Hook:
    """An instance attribute standing in for one of the module's methods; ``__code__`` is the
    method's own (what Lightning's ``is_overridden`` compares), the call goes to the state's
    method of the same name."""

    def __init__(self, state: OneXOptimization, name: str) -> None:
        self.state, self.name = state, name

    @property
    def __code__(self) -> Any:
        return getattr(type(self.state.module), self.name).__code__

    def __call__(self, *args: Any) -> Any:
        return getattr(self.state, self.name)(*args)


def _update_learning_rates(
    loop: Any, state: OneXOptimization, interval: str, update_plateau_schedulers: bool
) -> None:
    """``_TrainingEpochLoop._update_learning_rates`` for this module (bound to the loop and the
    state): Lightning's own (which runs for automatic optimization only), on the scheduler
    configs automatic optimization parsed, of the optimizers active at the loop's batch."""
    module, strategy = state.module, state.module.trainer.strategy
    manual = strategy.lr_scheduler_configs
    module.automatic_optimization = True
    strategy.lr_scheduler_configs = state.schedulers(strategy.optimizers, loop.total_batch_idx)
    try:
        type(loop)._update_learning_rates(loop, interval, update_plateau_schedulers)
    finally:
        module.automatic_optimization = False
        strategy.lr_scheduler_configs = manual


def _refuse(trainer: pl.Trainer, model: Any) -> None:
    name = f"{type(model).__name__}.training_step(batch, batch_idx, optimizer_idx)"
    accumulates = trainer.accumulate_grad_batches != 1 or any(
        isinstance(c, GradientAccumulationScheduler)
        for c in trainer.callbacks  # type: ignore[attr-defined]
    )
    if accumulates:
        raise MisconfigurationError(
            f"Trainer(accumulate_grad_batches=...) with {name}: Lightning 2.x does not "
            f"accumulate for several optimizers. Fix: drop accumulate_grad_batches, or step each "
            f"optimizer every N batches yourself with manual optimization "
            f"(self.automatic_optimization = False)."
        )
    scaler = getattr(trainer.precision_plugin, "scaler", None)
    if scaler is not None and trainer.gradient_clip_val:
        raise MisconfigurationError(
            f"Trainer(gradient_clip_val={trainer.gradient_clip_val}, precision="
            f"{trainer.precision!r}) with {name}: the gradients are unscaled only after the "
            f"closure that clips them. Fix: precision='bf16-mixed', or drop gradient_clip_val."
        )


def _unused_parameters(trainer: pl.Trainer, model: Any) -> tuple[Any, Any]:
    strategy = trainer.strategy
    if not isinstance(strategy, DDPStrategy):
        return None, None
    before = strategy._ddp_kwargs.get("find_unused_parameters", False)
    if not before:
        rank_zero_warn(
            f"{type(model).__name__}.training_step(batch, batch_idx, optimizer_idx): each "
            f"optimizer's pass leaves the other optimizers' parameters without gradients, which "
            f"DDP(find_unused_parameters=False) cannot reduce; ddpkit runs this fit with "
            f"find_unused_parameters=True, 1.x's default. Spell it so to silence this: "
            f"plugins=['ddp_find_unused_parameters_true'] or "
            f"DDPPlugin(find_unused_parameters=True).",
            DDPKitWarning,
        )
    strategy._ddp_kwargs["find_unused_parameters"] = True
    return strategy, before


@contextlib.contextmanager
def multi_optimizer_stage(trainer: pl.Trainer, model: Any) -> Iterator[None]:
    """For one ``fit`` of a 1.x multi-optimizer module: the module runs on manual optimization as
    1.x ran it (see the module), and everything is put back afterwards."""
    _refuse(trainer, model)
    state = OneXOptimization(model)
    state.clip = (trainer.gradient_clip_val, trainer.gradient_clip_algorithm)
    strategy, unused = _unused_parameters(trainer, model)
    loop = trainer.fit_loop.epoch_loop
    trainer.gradient_clip_val = None  # ddpkit clips (Lightning refuses it in manual mode)
    model.automatic_optimization = False
    model.training_step = _Hook(state, "training_step")
    model.configure_optimizers = _Hook(state, "configure_optimizers")
    loop.__dict__["_update_learning_rates"] = functools.partial(_update_learning_rates, loop, state)
    try:
        yield
    finally:
        trainer.gradient_clip_val = state.clip[0]
        # trainer.global_step reads the automatic loop's count once the module is automatic again
        steps = loop.manual_optimization.optim_step_progress.total
        loop.automatic_optimization.optim_progress.optimizer.step.total.completed = steps.completed
        loop.automatic_optimization.optim_progress.optimizer.step.total.ready = steps.ready
        model.automatic_optimization = True
        for name in ("training_step", "configure_optimizers"):
            vars(model).pop(name, None)
        if state.own_configure is not None:
            model.configure_optimizers = state.own_configure
        loop.__dict__.pop("_update_learning_rates", None)
        if strategy is not None:
            strategy._ddp_kwargs["find_unused_parameters"] = unused
