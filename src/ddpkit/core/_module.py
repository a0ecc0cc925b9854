"""``Module``: an ``nn.Module`` with LightningModule's hooks, ``self.log`` and hyperparameters."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, ClassVar, TypeVar

import torch
from torch import nn

from ddpkit._lightning_surface import refuse_attribute
from ddpkit.core._hooks import CheckpointHooks, DataHooks, ModelHooks
from ddpkit.core._hparams import HyperparametersMixin
from ddpkit.core._protocols import MetricSink, TrainerProtocol
from ddpkit.core._saving import HPARAMS_KEY, init_kwargs, load_checkpoint, load_hparams_file
from ddpkit.errors import MisconfigurationError
from ddpkit.utilities._reprs import safe_repr

M = TypeVar("M", bound="Module")

_CLIP_ALGORITHMS = ("norm", "value")
_torch_getattr = nn.Module.__getattr__  # parameters, buffers, submodules

#: Lightning's reduce_fx callables and the names ddpkit's metric store takes
_REDUCE_FUNCTIONS: dict[Any, str] = {
    torch.mean: "mean",
    torch.sum: "sum",
    torch.max: "max",
    torch.min: "min",
}


def _reduce_name(name: str, reduce_fx: Any) -> str:
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


@contextmanager
def jit_is_scripting() -> Iterator[None]:
    """Within it, ``module.trainer`` of a module not attached to a Trainer is None, not an
    error: ``torch.jit.trace`` (``SummaryWriter.add_graph``) reads every attribute of the module
    it traces (Lightning's ``_jit_is_scripting``, for pytorch/pytorch#67146)."""
    before = Module._jit_is_scripting
    Module._jit_is_scripting = True
    try:
        yield
    finally:
        Module._jit_is_scripting = before


class Module(HyperparametersMixin, ModelHooks, DataHooks, CheckpointHooks, nn.Module):
    """Subclass it and implement ``training_step`` and ``configure_optimizers``.

    Every LightningModule hook exists here with Lightning's name and signature (the loop calls
    those you override, in Lightning's order). Any ``nn.Module`` with the same hook names trains
    too (duck typing); ``Module`` adds ``self.log``, ``self.trainer``, hyperparameters and
    :meth:`load_from_checkpoint`.
    """

    #: True while torch.jit traces a module (:func:`jit_is_scripting`; Lightning's flag)
    _jit_is_scripting: ClassVar[bool] = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._trainer: TrainerProtocol | None = None
        # the attached trainer's metric store (None without one: self.log then records nothing,
        # as in Lightning's tests of a step)
        self._metric_sink: MetricSink | None = None
        self._automatic_optimization = True

    # -- what the trainer gives the module -----------------------------------------------------

    @property
    def trainer(self) -> TrainerProtocol:
        if self._trainer is None:
            if Module._jit_is_scripting:
                # torch.jit.trace reads every attribute: None there, not an error (Lightning's)
                return None  # type: ignore[return-value]
            raise RuntimeError(f"{type(self).__name__} is not attached to a Trainer")
        return self._trainer

    @trainer.setter
    def trainer(self, trainer: TrainerProtocol | None) -> None:
        self._trainer = trainer
        # self.log runs every step: look the sink up once, not through two properties a call.
        self._metric_sink = trainer.metric_store if trainer is not None else None

    @property
    def device(self) -> torch.device:
        for p in self.parameters():
            return p.device
        if self._trainer is not None:
            return self._trainer.root_device
        return torch.device("cpu")

    @property
    def global_rank(self) -> int:
        return self._trainer.global_rank if self._trainer is not None else 0

    @property
    def local_rank(self) -> int:
        return self._trainer.local_rank if self._trainer is not None else 0

    @property
    def current_epoch(self) -> int:
        return self._trainer.current_epoch if self._trainer is not None else 0

    @property
    def global_step(self) -> int:
        return self._trainer.global_step if self._trainer is not None else 0

    @property
    def logger(self) -> Any:
        return self._trainer.logger if self._trainer is not None else None

    @property
    def loggers(self) -> list[Any]:
        return self._trainer.loggers if self._trainer is not None else []

    @property
    def automatic_optimization(self) -> bool:
        """ddpkit's loop runs automatic optimization only (see docs/training.md)."""
        return self._automatic_optimization

    @automatic_optimization.setter
    def automatic_optimization(self, value: bool) -> None:
        self._automatic_optimization = value

    def optimizers(self, use_pl_optimizer: bool = True) -> Any:
        """The optimizer ``configure_optimizers`` returned (a list when there are several)."""
        found = self.trainer.optimizers
        return found[0] if len(found) == 1 else list(found)

    def lr_schedulers(self) -> Any:
        """The scheduler (a list when there are several; None without one)."""
        found = [config.scheduler for config in self.trainer.lr_scheduler_configs]
        if not found:
            return None
        return found[0] if len(found) == 1 else found

    def print(self, *args: Any, **kwargs: Any) -> None:
        """``print`` on global rank zero only."""
        if self._trainer is None or self._trainer.is_global_zero:
            print(*args, **kwargs)

    @property
    def example_input_array(self) -> Any:
        """An input of ``forward`` (None until set): ``TensorBoardLogger(log_graph=True)``
        traces the model's graph with it."""
        return self.__dict__.get("_example_input_array")

    @example_input_array.setter
    def example_input_array(self, example: Any) -> None:
        self.__dict__["_example_input_array"] = example

    def freeze(self) -> None:
        """Every parameter stops taking gradients, and the module goes to eval mode."""
        self.requires_grad_(False)
        self.eval()

    def unfreeze(self) -> None:
        """Every parameter takes gradients again, and the module goes to train mode."""
        self.requires_grad_(True)
        self.train()

    # -- self.log ------------------------------------------------------------------------------

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
        Refused where Lightning refuses it (``ddpkit.trainer._log_hooks``).
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
            reduce_fx=_reduce_name(name, reduce_fx),
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

    # -- the hooks a user implements -----------------------------------------------------------

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor | Mapping[str, Any]:
        raise NotImplementedError(f"{type(self).__name__}.training_step is not implemented")

    def configure_optimizers(self) -> Any:
        raise NotImplementedError(f"{type(self).__name__}.configure_optimizers is not implemented")

    def configure_callbacks(self) -> Any:
        """Callbacks this module brings; they replace the Trainer's callbacks of the same type."""
        return []

    def backward(self, loss: torch.Tensor, *args: Any, **kwargs: Any) -> None:
        loss.backward(*args, **kwargs)

    def optimizer_step(
        self,
        epoch: int,
        batch_idx: int,
        optimizer: Any,
        optimizer_closure: Any = None,
    ) -> None:
        """Runs the closure (``training_step``, ``zero_grad``, ``backward``), then the step."""
        optimizer.step(closure=optimizer_closure)

    def optimizer_zero_grad(
        self, epoch: int, batch_idx: int, optimizer: torch.optim.Optimizer
    ) -> None:
        optimizer.zero_grad()

    def lr_scheduler_step(self, scheduler: Any, metric: Any) -> None:
        if metric is None:
            scheduler.step()
        else:
            scheduler.step(metric)

    def configure_gradient_clipping(
        self,
        optimizer: torch.optim.Optimizer,
        gradient_clip_val: float | None = None,
        gradient_clip_algorithm: str | None = None,
    ) -> None:
        """Called before every optimizer step with the Trainer's clipping settings."""
        self.clip_gradients(optimizer, gradient_clip_val, gradient_clip_algorithm)

    def clip_gradients(
        self,
        optimizer: torch.optim.Optimizer,
        gradient_clip_val: float | None = None,
        gradient_clip_algorithm: str | None = None,
    ) -> None:
        """Clip the optimizer's gradients by norm (default) or by value."""
        if gradient_clip_val is None and self._trainer is not None:
            gradient_clip_val = self._trainer.gradient_clip_val
        if not gradient_clip_val:
            return
        algorithm = (gradient_clip_algorithm or "norm").lower()
        if algorithm not in _CLIP_ALGORITHMS:
            raise MisconfigurationError(
                f"clip_gradients(gradient_clip_algorithm={gradient_clip_algorithm!r}): choose "
                f"one of {', '.join(map(repr, _CLIP_ALGORITHMS))}."
            )
        params = [p for group in optimizer.param_groups for p in group["params"]]
        if algorithm == "value":
            torch.nn.utils.clip_grad_value_(params, gradient_clip_val)
        else:
            torch.nn.utils.clip_grad_norm_(params, gradient_clip_val)

    # -- checkpoints ---------------------------------------------------------------------------

    @classmethod
    def load_from_checkpoint(
        cls: type[M],
        checkpoint_path: str | os.PathLike[str],
        map_location: Any = None,
        hparams_file: str | os.PathLike[str] | None = None,
        strict: bool = True,
        weights_only: bool = True,
        **kwargs: Any,
    ) -> M:
        """A new ``cls`` built from the checkpoint's hyperparameters (``kwargs`` override them),
        with the checkpoint's weights. ``weights_only=True`` (``torch.load``'s safe loading)
        refuses to run code hidden in the file."""
        checkpoint = load_checkpoint(
            checkpoint_path, weights_only=weights_only, map_location=map_location or "cpu"
        )
        hparams = dict(checkpoint.get(HPARAMS_KEY) or {})
        if hparams_file is not None:
            hparams = load_hparams_file(hparams_file)
        hparams.update(kwargs)
        try:
            model = cls(**init_kwargs(cls, hparams))
        except TypeError as error:
            raise MisconfigurationError(
                f"{cls.__name__}.load_from_checkpoint({str(checkpoint_path)!r}): "
                f"{cls.__name__}(**{sorted(hparams)}) failed: {error}. Fix: call "
                f"save_hyperparameters() in __init__, or pass the missing arguments as keywords."
            ) from error
        configure = getattr(model, "configure_model", None)
        if callable(configure):
            configure()
        on_load = getattr(model, "on_load_checkpoint", None)
        if callable(on_load):
            on_load(checkpoint)
        model.load_state_dict(checkpoint["state_dict"], strict=strict)
        if isinstance(map_location, str | torch.device):
            model.to(map_location)
        return model

    def __getattr__(self, name: str) -> Any:
        # nn.Module's lookup (parameters, buffers, submodules) first; a Lightning name ddpkit
        # lacks (self.manual_backward) is refused with the way, anything else is torch's error.
        try:
            return _torch_getattr(self, name)
        except AttributeError:
            refuse_attribute(self, name)
            raise

    def __getstate__(self) -> dict[str, Any]:
        # Spawned ranks get the trainer through the launcher, not through the module.
        state = self.__dict__.copy()
        state["_trainer"] = None
        state["_metric_sink"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        # Modules pickled before these attributes existed.
        self.__dict__.setdefault("_metric_sink", None)
        self.__dict__.setdefault("_automatic_optimization", True)
