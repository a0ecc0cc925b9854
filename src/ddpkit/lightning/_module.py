"""``LightningModule`` as a 1.x project knew it: Lightning 2.x's own, plus the 1.x members a
module's code *calls* that 2.x removed or changed (the 1.x hooks a module *defines* are carried by
:mod:`ddpkit.lightning._adapters`).

A subclass of ``pytorch_lightning.LightningModule``, so Lightning's Trainer, checkpoints and
``load_from_checkpoint`` take it as their own. It defines no hook of Lightning 2.x (Lightning
would think the user overrode it). A 1.x member ddpkit does not provide raises
:class:`~ddpkit.errors.LightningRemovedAttributeError` with the fix, as the 1.x surface table says.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping
from typing import Any

import pytorch_lightning as pl
import torch
from lightning_fabric.utilities.apply_func import move_data_to_device
from pytorch_lightning.core.optimizer import LightningOptimizer

from ddpkit.errors import MisconfigurationError
from ddpkit.lightning import _surface
from ddpkit.lightning._checkpoints import weights_only_for

_log = logging.getLogger("ddpkit.lightning")
_PRECISION_1X: dict[str, int | str] = {
    "32-true": 32,
    "16-mixed": 16,
    "16-true": 16,
    "bf16-mixed": "bf16",
    "bf16-true": "bf16",
    "64-true": 64,
}
#: 1.x ``log`` keywords 2.x dropped: ``tbptt_*`` applied to TBPTT only (which 2.x removed).
_LOG_DROPPED = ("tbptt_reduce_fx", "tbptt_pad_token")


def one_x_precision(trainer: pl.Trainer | None) -> int | str:
    """A Trainer's precision as 1.x spelled it: 32, 16, 64 or ``"bf16"``."""
    if trainer is None:
        return 32
    return _PRECISION_1X.get(str(trainer.precision), str(trainer.precision))


def auto_move_data(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Lightning 1.0–1.6's ``@auto_move_data``: the decorated method of a ``LightningModule``
    (``forward``, usually) gets its arguments on the module's device. Lightning 2.x moves each
    batch itself; this keeps the decorator working for calls made outside the loop."""

    @functools.wraps(fn)
    def moved(self: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(self, pl.LightningModule):
            args, kwargs = move_data_to_device((args, kwargs), self.device)
        return fn(self, *args, **kwargs)

    return moved


class Of2x(type):
    """The metaclass of ddpkit's 1.x classes: ``isinstance`` / ``issubclass`` of one holds for
    an object of the Lightning 2.x class it extends too (a Lightning callback, a module made by
    a library on Lightning 2.x), as both were one class in 1.x."""

    def __instancecheck__(cls, instance: Any) -> bool:
        base: Any = cls.__base__
        return type.__instancecheck__(cls, instance) or isinstance(instance, base)

    def __subclasscheck__(cls, subclass: type) -> bool:
        base: Any = cls.__base__
        return type.__subclasscheck__(cls, subclass) or issubclass(subclass, base)


def _no_op(name: str, since: str, doc: str) -> Any:
    def hook(self: Any, *args: Any, **kwargs: Any) -> None:
        return None

    hook.__name__ = hook.__qualname__ = name
    hook.__doc__ = f"Lightning {since}'s hook: {doc} (a no-op, for an override's ``super()``)."
    return hook


#: 1.x module hooks 2.x removed, as no-ops: 1.x code calls super().on_epoch_end() in its own.
#: ddpkit calls an override where 1.x did (ddpkit.lightning._adapters).
MODULE_HOOKS_1X = {
    "on_epoch_start": ("1.0–1.7", "the start of every epoch"),
    "on_epoch_end": ("1.0–1.7", "the end of every epoch"),
    "on_pretrain_routine_start": ("1.0–1.7", "before the sanity check"),
    "on_pretrain_routine_end": ("1.0–1.7", "before the sanity check"),
    "on_post_move_to_device": ("1.2–1.6", "after the module moved to its device"),
    **{f"on_{s}_dataloader": ("1.3–1.6", f"before {s}_dataloader()")
       for s in ("train", "val", "test", "predict")},
}  # fmt: skip


class LightningModule(pl.LightningModule, metaclass=Of2x):
    """Lightning 2.x's ``LightningModule`` with Lightning 1.x's members (see the module)."""

    # TorchScript leaves alone the properties 1.x's module had besides 2.x's (to_torchscript)
    __jit_unused_properties__: list[str] = [  # noqa: RUF012  (torch reads it)
        *pl.LightningModule.__jit_unused_properties__,
        "datamodule",
        "precision",
        "use_amp",
        "use_ddp",
        "use_dp",
        "use_ddp2",
        "use_tpu",
        "model_size",
    ]

    @classmethod
    def load_from_checkpoint(
        cls,
        checkpoint_path: Any,
        map_location: Any = None,
        hparams_file: Any = None,
        strict: bool | None = None,
        weights_only: bool | None = None,
        **kwargs: Any,
    ) -> Any:
        """Lightning's; as in 1.x, also called on an instance (it returns a new module), and a
        checkpoint this run wrote loads whole (``ddpkit.lightning._checkpoints``)."""
        load = vars(pl.LightningModule)["load_from_checkpoint"]
        method = getattr(load, "method", None) or load.__func__
        only = weights_only_for(checkpoint_path, weights_only)
        return method(cls, checkpoint_path, map_location, hparams_file, strict, only, **kwargs)

    # -- 1.x keywords of calls that 2.x still has -----------------------------------------

    def log(self, name: str, value: Any, *args: Any, **kwargs: Any) -> None:
        """Lightning's ``self.log``, taking 1.x's keywords too: ``sync_dist_op`` (1.0–1.5, the
        reduction of ``sync_dist``: 2.x's ``reduce_fx``), ``reduce_fx="default"`` (1.4–1.5:
        ``"mean"``) and the ``tbptt_*`` keywords (TBPTT only, which 2.x removed: dropped). A
        dict value (1.x logged it whole; its loggers flattened it): each item as
        ``name/key``, which Lightning 2.x takes (docs/flags.md, Differences)."""
        kwargs = _log_keywords(kwargs)
        if isinstance(value, Mapping):
            _check_1x_dict(name, value)
            for key, item in value.items():
                super().log(f"{name}/{key}", item, *args, **kwargs)
            return
        super().log(name, value, *args, **kwargs)

    def log_dict(self, dictionary: Any, *args: Any, **kwargs: Any) -> None:
        """Lightning's ``self.log_dict``, taking 1.x's keywords too (see :meth:`log`)."""
        super().log_dict(dictionary, *args, **_log_keywords(kwargs))

    def toggle_optimizer(self, optimizer: Any, optimizer_idx: int | None = None) -> None:
        """1.x's ``toggle_optimizer(optimizer, optimizer_idx)``: the index is not needed."""
        super().toggle_optimizer(optimizer)

    def untoggle_optimizer(self, optimizer: Any) -> None:
        """1.x's ``untoggle_optimizer(optimizer_idx)`` (an index), or 2.x's (the optimizer)."""
        if isinstance(optimizer, int):
            optimizer = self.trainer.optimizers[optimizer]
        super().untoggle_optimizer(optimizer)

    def manual_backward(self, loss: torch.Tensor, *args: Any, **kwargs: Any) -> None:
        """1.1–1.3's ``manual_backward(loss, optimizer, ...)`` took the optimizer second; 2.x
        does not (it would reach ``loss.backward`` as its gradient): dropped."""
        if args and isinstance(args[0], torch.optim.Optimizer | LightningOptimizer):
            args = args[1:]
        kwargs.pop("optimizer", None)
        super().manual_backward(loss, *args, **kwargs)

    def all_gather(
        self, data: Any = None, group: Any = None, sync_grads: bool = False, **kwargs: Any
    ) -> Any:
        """Lightning's ``all_gather``; 1.1 named its first argument ``tensor``."""
        if data is None and "tensor" in kwargs:
            data = kwargs.pop("tensor")
        return super().all_gather(data, group=group, sync_grads=sync_grads, **kwargs)

    # -- 1.x members 2.x removed -----------------------------------------------------------

    @property
    def datamodule(self) -> Any:
        """1.0–1.4's ``self.datamodule``: the Trainer's (``self.trainer.datamodule`` in 2.x)."""
        trainer: Any = self._trainer
        if trainer is not None and trainer.datamodule is not None:
            return trainer.datamodule
        return self.__dict__.get("_ddpkit_datamodule")

    @datamodule.setter
    def datamodule(self, value: Any) -> None:
        self.__dict__["_ddpkit_datamodule"] = value

    @property
    def precision(self) -> int | str:
        """1.x's ``self.precision``: 32, 16, 64 or ``"bf16"``, as the Trainer runs."""
        return one_x_precision(self._trainer)

    @property
    def use_amp(self) -> bool:
        """1.0–1.7's ``self.use_amp``: mixed precision on."""
        return self.precision in (16, "bf16")

    @property
    def use_ddp(self) -> bool:
        """1.0–1.1's ``self.use_ddp``: DDP (spawned or not)."""
        return bool(self._trainer is not None and self._trainer.world_size > 1)

    @property
    def use_dp(self) -> bool:
        """1.0–1.1's ``self.use_dp``: DataParallel, which Lightning 2.x removed: False."""
        return False

    use_ddp2 = use_tpu = use_dp

    @property
    def model_size(self) -> float:
        """1.2–1.6's ``self.model_size``: the parameters' size in MB."""
        from pytorch_lightning.utilities.model_summary.model_summary import ModelSummary

        return float(ModelSummary(self).model_size)

    def summarize(self, mode: str | None = "top", max_depth: int | None = None) -> Any:
        """1.0–1.6's ``self.summarize()``: the summary (``mode="full"`` every layer), logged."""
        from pytorch_lightning.utilities.model_summary.model_summary import ModelSummary

        depth = max_depth if max_depth is not None else (-1 if mode == "full" else 1)
        summary = ModelSummary(self, max_depth=depth)
        _log.info("\n%s", summary)
        return summary

    def grad_norm(self, norm_type: float | str) -> dict[str, float]:
        """1.0–1.4's ``self.grad_norm(norm_type)``: each gradient's norm and their total."""
        from pytorch_lightning.utilities import grad_norm

        return {k: float(v) for k, v in grad_norm(self, norm_type=norm_type).items()}

    def get_progress_bar_dict(self) -> dict[str, Any]:
        """1.0–1.6's: the progress bar's items (a 1.x override may add or drop some; ddpkit's
        bar shows what the override returns, :mod:`ddpkit.lightning._adapters`)."""
        from pytorch_lightning.callbacks.progress.progress_bar import get_standard_metrics

        trainer = self.trainer
        bar = trainer.progress_bar_callback
        if bar is not None:
            return dict(type(bar).get_metrics(bar, trainer, self))
        return {**get_standard_metrics(trainer), **trainer.progress_bar_metrics}

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            _surface.refuse_member("LightningModule", name)
            raise


for _name, _about in MODULE_HOOKS_1X.items():
    setattr(LightningModule, _name, _no_op(_name, *_about))


def _check_1x_dict(name: str, value: Mapping[str, Any]) -> None:
    """What 1.x refused of a dict given to ``self.log``, in its words (a ``ValueError``)."""
    for item in value.values():
        problem = ("nested dictionaries" if isinstance(item, Mapping)
                   else "`NoneType` values" if item is None else None)  # fmt: skip
        if problem is not None:
            raise MisconfigurationError(
                f"`self.log({name}, {value})` was called, but {problem} cannot be logged. Fix: "
                f"log each value under its own name, a number or a tensor."
            )


def _log_keywords(kwargs: dict[str, Any]) -> dict[str, Any]:
    """1.x's ``self.log`` keywords in 2.x's spelling (see :meth:`LightningModule.log`)."""
    for dropped in _LOG_DROPPED:
        kwargs.pop(dropped, None)
    op = kwargs.pop("sync_dist_op", None)
    if op is not None and kwargs.get("reduce_fx") in (None, "default", "mean", torch.mean):
        kwargs["reduce_fx"] = {"avg": "mean"}.get(str(op).lower(), str(op).lower())
    if kwargs.get("reduce_fx") == "default":
        kwargs["reduce_fx"] = "mean"
    return kwargs
