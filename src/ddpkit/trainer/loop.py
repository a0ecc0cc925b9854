"""fit / validate / test / predict, as run on each rank."""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import torch
from torch import nn

from ddpkit.core.module import Module
from ddpkit.errors import MisconfigurationError
from ddpkit.plugins.precision.base import PrecisionPlugin
from ddpkit.plugins.training_type.base import TrainingTypePlugin
from ddpkit.trainer.data import distribute, move_to_device, num_batches
from ddpkit.trainer.optim import SchedulerConfig, parse_optimizers

if TYPE_CHECKING:
    from torch.utils.data import DataLoader

    from ddpkit.trainer.trainer import Trainer

__all__ = ["StageOutput", "run_stage"]

_EVAL_HOOKS = {"validate": "validation_step", "test": "test_step", "predict": "predict_step"}
_LOADER_HOOKS = {
    "train": "train_dataloader",
    "validate": "val_dataloader",
    "test": "test_dataloader",
    "predict": "predict_dataloader",
}


@dataclass
class StageOutput:
    """What a stage leaves behind on rank zero; the spawn launcher carries it to the parent."""

    result: Any = None
    callback_metrics: dict[str, torch.Tensor] = field(default_factory=dict)
    logged_metrics: dict[str, torch.Tensor] = field(default_factory=dict)
    current_epoch: int = 0
    global_step: int = 0
    checkpoint_path: str | None = None
    state_dict: dict[str, torch.Tensor] | None = None


class _StepModule(nn.Module):
    """Routes DDP's forward to the training hook, so gradients sync through ``training_step``."""

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.module = module

    def forward(self, batch: Any, batch_idx: int) -> Any:
        return cast(Any, self.module).training_step(batch, batch_idx)


def _loader(trainer: Trainer, model: nn.Module, stage: str, given: Any) -> DataLoader[Any] | None:
    if given is not None:
        return given  # type: ignore[no-any-return]
    hook = user_hook(model, _LOADER_HOOKS[stage])
    return hook() if hook is not None else None


def _on_host(batch: Any) -> bool:
    """The common CPU case, answered without rebuilding the batch: a tensor, or a list or tuple
    of tensors, already on the host (what a DataLoader yields)."""
    if type(batch) is torch.Tensor:
        return batch.is_cpu
    if type(batch) is list or type(batch) is tuple:
        for value in batch:  # noqa: SIM110 (all() over a generator costs twice as much)
            if type(value) is not torch.Tensor or not value.is_cpu:
                return False
        return True
    return False


def _loss_of(out: Any, where: str) -> torch.Tensor | None:
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


# Base classes whose hooks are placeholders: Lightning's raise or warn "must be implemented".
_FRAMEWORK_MODULES = ("ddpkit.core.", "pytorch_lightning.", "lightning.")


def user_hook(model: nn.Module, name: str) -> Any:
    """The hook ``name`` if the user's class defines it, else None: a placeholder inherited from
    ``ddpkit.Module`` or a LightningModule counts as not implemented."""
    for cls in type(model).__mro__:
        if name in cls.__dict__:
            if cls.__module__.startswith(_FRAMEWORK_MODULES) or cls.__module__.startswith("torch."):
                return None
            hook = getattr(model, name)
            return hook if callable(hook) else None
    return None


def _call_hook(model: nn.Module, name: str, *args: Any) -> Any:
    hook = user_hook(model, name)
    return hook(*args) if hook is not None else None


class _Run:
    """One stage on one rank."""

    def __init__(self, trainer: Trainer, model: nn.Module) -> None:
        self.trainer = trainer
        self.plugin = trainer.strategy
        self.precision = trainer.precision_plugin
        self.model = model
        self.device = self.plugin.root_device
        self.seed = int(os.environ.get("DDPKIT_SEED", "0"))
        # float32 leaves inputs and the forward pass alone: the training loop then skips those
        # calls (a generator-based context manager costs ~3 µs a step).
        kind = type(self.precision)
        self._plain_input = kind.convert_input is PrecisionPlugin.convert_input
        self._plain_forward = kind.forward_context is PrecisionPlugin.forward_context
        self._on_cpu = self.device.type == "cpu"

    def prepare(self, loader: DataLoader[Any], *, train: bool, predict: bool = False) -> Any:
        return distribute(
            loader,
            rank=self.plugin.global_rank,
            world_size=self.plugin.world_size,
            train=train,
            seed=self.seed,
            predict=predict,
            use_distributed_sampler=self.trainer.use_distributed_sampler,
        )

    def batch(self, batch: Any) -> Any:
        if not (self._on_cpu and _on_host(batch)):
            batch = move_to_device(batch, self.device)
        return batch if self._plain_input else self.precision.convert_input(batch)

    # -- evaluation --------------------------------------------------------------------------

    def evaluate(
        self, stage: str, loader: Any, limit: int | float | None, *, sanity: bool = False
    ) -> dict[str, float]:
        trainer, model = self.trainer, self.model
        step = user_hook(model, _EVAL_HOOKS[stage])
        if step is None:
            return {}
        n = num_batches(loader, limit)
        if n == 0:
            return {}
        metrics = trainer._metrics
        previous_stage, metrics.stage = metrics.stage, stage
        metrics.enabled = not sanity
        was_training = model.training
        model.eval()
        trainer._progress.start(n, "sanity check" if sanity else stage)
        with torch.no_grad():
            for batch_idx, batch in enumerate(loader):
                if n is not None and batch_idx >= n:
                    break
                with self.precision.forward_context():
                    step(self.batch(batch), batch_idx)
                trainer._progress.update(metrics.bar_values)
        trainer._progress.close()
        model.train(was_training)
        metrics.stage = previous_stage
        metrics.enabled = True
        if sanity:
            metrics.discard_epoch(stage)
            return {}
        values = metrics.end_epoch(stage)
        trainer._log_row(values)
        _call_hook(model, f"on_{'validation' if stage == 'validate' else stage}_epoch_end")
        return values

    def predict(self, loader: Any, limit: int | float | None) -> list[Any]:
        model = self.model
        n = num_batches(loader, limit)
        out: list[Any] = []
        model.eval()
        hook = user_hook(model, "predict_step")
        with torch.no_grad():
            for batch_idx, batch in enumerate(loader):
                if n is not None and batch_idx >= n:
                    break
                with self.precision.forward_context():
                    b = self.batch(batch)
                    pred = hook(b, batch_idx) if hook is not None else model(b)
                out.append(_to_cpu(pred))
        # Every rank returns every rank's predictions, rank-ordered.
        gathered = self.plugin.all_gather_object(out)
        return [p for rank_preds in gathered for p in rank_preds]

    # -- training ----------------------------------------------------------------------------

    def fit(
        self, train_loader: Any, val_loader: Any, ckpt_path: str | None, weights_only: bool
    ) -> None:
        trainer, model, plugin = self.trainer, self.model, self.plugin
        optimizers, schedulers = parse_optimizers(cast(Any, model).configure_optimizers())
        trainer._current_optim = (optimizers, schedulers)
        # Every fit is a run of its own: it counts from zero, unless it resumes a checkpoint
        # (a second fit on the same trainer would otherwise stop at once at max_steps).
        trainer.current_epoch = trainer.global_step = 0
        start_epoch = 0
        if ckpt_path is not None:
            start_epoch = trainer._restore(
                ckpt_path, model, optimizers, schedulers, weights_only=weights_only
            )
        step_module = _StepModule(model)
        wrapped = plugin.wrap_model(step_module)
        accumulate = trainer.accumulate_grad_batches
        n_train = num_batches(train_loader, trainer.limit_train_batches)
        n_val = trainer.limit_val_batches
        val_every = self._val_check_batches(n_train)

        if val_loader is not None and trainer.num_sanity_val_steps and start_epoch == 0:
            sanity_limit = (
                None if trainer.num_sanity_val_steps == -1 else trainer.num_sanity_val_steps
            )
            self.evaluate("validate", val_loader, sanity_limit, sanity=True)

        metrics = trainer._metrics
        # The per-step path does only what this run needs (tiny models feel every µs):
        # - one process: nothing wraps the module, so call the hook, not the wrapper module;
        training_step = cast(Any, model).training_step if wrapped is step_module else wrapped
        plain_forward = self._plain_forward
        # - the stall watchdog's bracket around backward only where a plugin has one;
        watch_backward = type(plugin).collective is not TrainingTypePlugin.collective
        # - no progress-bar call when there is no bar;
        bar = trainer._progress if trainer._progress.enabled else None
        # - a logged value becomes a float for the CSV row only on the steps that write one
        #   (the condition of Trainer._log_step_row): .item() waits for the device.
        csv_rows = trainer._csv is not None and trainer.is_global_zero
        every = trainer.log_every_n_steps
        metrics.step_row_due = csv_rows and (trainer.global_step + 1) % every == 0

        def forward(batch: Any, batch_idx: int) -> torch.Tensor | None:
            if plain_forward:
                return _loss_of(training_step(self.batch(batch), batch_idx), "training_step")
            with self.precision.forward_context():
                return _loss_of(training_step(self.batch(batch), batch_idx), "training_step")

        model.train()
        _call_hook(model, "on_fit_start")
        for epoch in range(start_epoch, trainer.max_epochs if trainer.max_epochs >= 0 else 10**9):
            if trainer._should_stop():
                break
            trainer.current_epoch = epoch
            set_epoch = getattr(getattr(train_loader, "sampler", None), "set_epoch", None)
            if set_epoch is not None:
                set_epoch(epoch)  # a different shuffle every epoch, same on every rank
            metrics.stage = "train"
            _call_hook(model, "on_train_epoch_start")
            trainer._progress.start(n_train, f"epoch {epoch}")
            for batch_idx, batch in enumerate(train_loader):
                if n_train is not None and batch_idx >= n_train:
                    break
                boundary = (batch_idx + 1) % accumulate == 0 or (
                    n_train is not None and batch_idx + 1 == n_train
                )
                if boundary:
                    loss = forward(batch, batch_idx)
                    if loss is not None:
                        if accumulate > 1:
                            loss = loss / accumulate
                        if watch_backward:
                            # The all-reduce happens in backward: the stall watchdog must see it.
                            with plugin.collective("backward"):
                                self.precision.backward(loss)
                        else:
                            self.precision.backward(loss)
                    self._optimizer_step(optimizers, schedulers)
                    trainer.global_step += 1
                    trainer._log_step_row()
                    metrics.step_row_due = csv_rows and (trainer.global_step + 1) % every == 0
                else:
                    with plugin.no_sync(wrapped):
                        loss = forward(batch, batch_idx)
                        if loss is not None:
                            self.precision.backward(loss / accumulate)
                if bar is not None:
                    bar.update(metrics.bar_values)
                if val_loader is not None and val_every and (batch_idx + 1) % val_every == 0:
                    self.evaluate("validate", val_loader, n_val)
                if trainer._should_stop():
                    break
            trainer._progress.close()
            trainer._log_row(metrics.end_epoch("train"))
            if (
                val_loader is not None
                and not val_every
                and (epoch + 1) % trainer.check_val_every_n_epoch == 0
            ):
                self.evaluate("validate", val_loader, n_val)
            _call_hook(model, "on_train_epoch_end")
            for config in schedulers:
                if config.interval == "epoch" and (epoch + 1) % config.frequency == 0:
                    self._step_scheduler(config)
            trainer.current_epoch = epoch + 1
        trainer.current_epoch = max(trainer.current_epoch, start_epoch)
        _call_hook(model, "on_fit_end")
        self._optimizers = optimizers
        self._schedulers = schedulers

    def _val_check_batches(self, n_train: int | None) -> int | None:
        interval = self.trainer.val_check_interval
        if interval is None or interval == 1.0:
            return None
        if isinstance(interval, int):
            return interval
        if n_train is None:
            raise MisconfigurationError(
                f"Trainer(val_check_interval={interval}): a fraction needs a train loader with a "
                f"length; pass an int number of batches."
            )
        return max(1, math.floor(n_train * interval))

    def _optimizer_step(
        self, optimizers: list[torch.optim.Optimizer], schedulers: list[SchedulerConfig]
    ) -> None:
        clip = self.trainer.gradient_clip_val
        for opt in optimizers:
            if clip:
                self.precision.unscale_gradients(opt)
                params = [p for group in opt.param_groups for p in group["params"]]
                torch.nn.utils.clip_grad_norm_(params, clip)
            self.precision.optimizer_step(opt)
            opt.zero_grad(set_to_none=True)
        for config in schedulers:
            if config.interval == "step" and (self.trainer.global_step + 1) % config.frequency == 0:
                self._step_scheduler(config)

    def _step_scheduler(self, config: SchedulerConfig) -> None:
        if isinstance(config.scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau):
            name = config.monitor
            value = self.trainer.callback_metrics.get(name) if name else None
            if value is None:
                raise MisconfigurationError(
                    f"ReduceLROnPlateau monitors {name!r}, which was not logged. Logged: "
                    f"{sorted(self.trainer.callback_metrics)}. Fix: set 'monitor' to one of them."
                )
            config.scheduler.step(float(value))
        else:
            config.scheduler.step()


def _to_cpu(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, dict):
        return {k: _to_cpu(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_to_cpu(v) for v in value)
    return value


@contextlib.contextmanager
def _deterministic(enabled: bool, device: torch.device) -> Iterator[None]:
    """``Trainer(deterministic=True)``: deterministic algorithms for the stage, then the
    process's own setting again (it is global state; a later stage or test must not inherit it).
    cuBLAS is deterministic only with a fixed workspace, so a CUDA stage also sets
    ``CUBLAS_WORKSPACE_CONFIG`` unless the user did."""
    if not enabled:
        yield
        return
    previous = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    set_cublas = device.type == "cuda" and "CUBLAS_WORKSPACE_CONFIG" not in os.environ
    if set_cublas:
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(previous, warn_only=warn_only)
        if set_cublas:
            os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)


def run_stage(
    trainer: Trainer,
    stage: str,
    model: nn.Module,
    loaders: tuple[Any, Any],
    ckpt_path: str | None,
    return_state: bool,
    *,
    weights_only: bool = True,
) -> StageOutput:
    """The body every rank runs for one stage; sets up and tears down the process group."""
    plugin = trainer.strategy
    with plugin.running(), _deterministic(trainer.deterministic, plugin.root_device):
        if isinstance(model, Module):
            model.trainer = trainer  # duck-typed modules (e.g. a LightningModule) keep theirs
        trainer._metrics.reduce = plugin.all_reduce
        model = trainer.precision_plugin.convert_module(model)
        model.to(plugin.root_device)
        trainer._current_model = model
        run = _Run(trainer, model)
        output = StageOutput()
        if stage == "fit":
            train = _loader(trainer, model, "train", loaders[0])
            if train is None:
                raise MisconfigurationError(
                    "Trainer.fit: no training data. Pass train_dataloaders=... or implement "
                    "train_dataloader() on the module."
                )
            val = _loader(trainer, model, "validate", loaders[1])
            if trainer.limit_val_batches == 0:
                val = None
            train = run.prepare(train, train=True)
            val = run.prepare(val, train=False) if val is not None else None
            run.fit(train, val, ckpt_path, weights_only)
            if trainer.enable_checkpointing:
                output.checkpoint_path = str(
                    trainer._save_default_checkpoint(model, run._optimizers, run._schedulers)
                )
        elif stage in ("validate", "test"):
            loader = _loader(trainer, model, stage, loaders[0])
            if loader is None:
                raise MisconfigurationError(
                    f"Trainer.{stage}: no data. Pass dataloaders=... or implement "
                    f"{_LOADER_HOOKS[stage]}() on the module."
                )
            if ckpt_path is not None:
                trainer._restore(
                    ckpt_path, model, [], [], weights_only_model=True, weights_only=weights_only
                )
            limit = trainer.limit_val_batches if stage == "validate" else trainer.limit_test_batches
            values = run.evaluate(stage, run.prepare(loader, train=False), limit)
            output.result = [values]
        else:
            loader = _loader(trainer, model, "predict", loaders[0])
            if loader is None:
                raise MisconfigurationError(
                    "Trainer.predict: no data. Pass dataloaders=... or implement "
                    "predict_dataloader() on the module."
                )
            output.result = run.predict(
                run.prepare(loader, train=False, predict=True), trainer.limit_predict_batches
            )
        trainer._flush_logs()
        output.callback_metrics = dict(trainer.callback_metrics)
        output.logged_metrics = dict(trainer.logged_metrics)
        output.current_epoch = trainer.current_epoch
        output.global_step = trainer.global_step
        if output.checkpoint_path is not None:
            trainer.checkpoint_path = output.checkpoint_path
        if return_state and plugin.is_global_zero:
            output.state_dict = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    return output
