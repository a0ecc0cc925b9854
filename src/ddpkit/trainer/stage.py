"""What ``fit`` / ``validate`` / ``test`` / ``predict`` check before any rank starts: the module,
and where the data comes from."""

from __future__ import annotations

from typing import Any

from torch import nn
from torch.utils.data import DataLoader

from ddpkit.callbacks.dispatch import module_hook
from ddpkit.errors import MisconfigurationError
from ddpkit.trainer.data import loader_hook, one_loader

__all__ = ["check_model", "is_datamodule", "is_lightning_module", "split_datamodule"]

_LIGHTNING_PACKAGES = ("pytorch_lightning", "lightning.pytorch", "lightning")
_LOADER_HOOKS = ("train_dataloader", "val_dataloader", "test_dataloader", "predict_dataloader")


def is_lightning_module(model: Any) -> bool:
    """A ``pytorch_lightning`` / ``lightning.pytorch`` ``LightningModule`` — found by the names
    in its class's MRO, without importing Lightning."""
    return any(
        cls.__name__ == "LightningModule"
        and cls.__module__.split(".")[0] in ("pytorch_lightning", "lightning")
        for cls in type(model).__mro__
    )


def check_model(fn: str, model: Any, fitted: nn.Module | None) -> nn.Module:
    """The module to run: the one given, else the fitted one."""
    if model is None:
        if fitted is None:
            raise MisconfigurationError(
                f"Trainer.{fn}(): no model, and this Trainer has not run one yet. Fix: "
                f"trainer.{fn}(model, ...)."
            )
        return fitted
    if is_lightning_module(model):
        raise MisconfigurationError(
            f"Trainer.{fn}(model=<{type(model).__name__}>): {type(model).__name__} is a "
            f"Lightning LightningModule, which needs Lightning's own loop (its self.log, "
            f"hooks, optimizers); ddpkit.Trainer runs ddpkit.Module and plain nn.Module. "
            f"Fix: from ddpkit.lightning import Trainer — a pytorch_lightning.Trainer that "
            f"takes the same flags."
        )
    if not isinstance(model, nn.Module):
        raise MisconfigurationError(
            f"Trainer.{fn}(model=<{type(model).__name__}>): pass a torch.nn.Module "
            f"(ddpkit.Module or any module with the hooks)."
        )
    return model


def is_datamodule(value: Any) -> bool:
    """A DataModule by its protocol (``ddpkit.DataModule``, a ``LightningDataModule``, ...):
    an object with ``*_dataloader`` methods that is not itself a loader."""
    if value is None or isinstance(value, DataLoader):
        return False
    return any(callable(getattr(value, name, None)) for name in _LOADER_HOOKS)


def split_datamodule(
    fn: str, loaders: tuple[Any, Any], datamodule: Any, model: nn.Module
) -> tuple[tuple[Any, Any], Any]:
    """A DataModule passed where loaders go is taken as the DataModule (Lightning's rule);
    loaders and a DataModule together are refused; a stage with no data at all is refused."""
    first, second = loaders
    for given, stage in ((first, "train" if fn == "fit" else fn), (second, "validate")):
        if given is not None and not is_datamodule(given):
            one_loader(stage, given)  # before any rank starts
    if datamodule is None and is_datamodule(first):
        datamodule, first = first, None
    if datamodule is not None:
        if not is_datamodule(datamodule):
            raise MisconfigurationError(
                f"Trainer.{fn}(datamodule=<{type(datamodule).__name__}>): not a DataModule "
                f"(no *_dataloader() method). Fix: subclass ddpkit.DataModule."
            )
        if first is not None or second is not None:
            names = "train_dataloaders / val_dataloaders" if fn == "fit" else "dataloaders"
            raise MisconfigurationError(
                f"Trainer.{fn}({names}=..., datamodule=...): pass the loaders or the "
                f"DataModule, not both. Fix: drop {names}."
            )
    stage = "train" if fn == "fit" else fn
    hook = loader_hook(stage)
    has_hook = any(
        source is not None and module_hook(source, hook) is not None
        for source in (datamodule, model)
    )
    if first is None and not has_hook:
        given = "train_dataloaders" if fn == "fit" else "dataloaders"
        raise MisconfigurationError(
            f"Trainer.{fn}: no {'training ' if fn == 'fit' else ''}data. Pass {given}=..., a "
            f"datamodule=..., or implement {hook}() on the module."
        )
    return (first, second), datamodule
