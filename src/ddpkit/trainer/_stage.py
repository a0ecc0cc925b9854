"""What ``fit`` / ``validate`` / ``test`` / ``predict`` check before any rank starts: the module,
where the data comes from, and what only the file system can tell: that every folder the stage
will write into (checkpoints, logs) can be made and written — else an error now, not after an
epoch's work with nothing saved."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from torch import nn
from torch.utils.data import DataLoader

from ddpkit.callbacks._dispatch import module_hook
from ddpkit.core._protocols import CallbackTrainer
from ddpkit.errors import MisconfigurationError
from ddpkit.trainer._data import LOADER_HOOKS, no_data, one_loader
from ddpkit.utilities._reprs import safe_repr


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
    return any(callable(getattr(value, name, None)) for name in LOADER_HOOKS.values())


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
    hook = LOADER_HOOKS["train" if fn == "fit" else fn]
    has_hook = any(
        source is not None and module_hook(source, hook) is not None
        for source in (datamodule, model)
    )
    if first is None and not has_hook:
        raise no_data(fn)
    return (first, second), datamodule


def folders_of(
    trainer: CallbackTrainer, fn: str, callbacks: Iterable[Any], loggers: Iterable[Any]
) -> list[tuple[str, str]]:
    """``(who, folder)`` for every folder the stage writes into: the loggers' (every stage) and
    the checkpoint callbacks' (``fit``)."""
    found: list[tuple[str, str]] = []
    for logger in loggers:
        folders = getattr(logger, "folders_to_write", None)
        if callable(folders):
            save_dir = safe_repr(getattr(logger, "save_dir", None))
            who = f"{type(logger).__name__}(save_dir={save_dir})"
            found += [(who, f) for f in folders()]
    if fn == "fit" and not trainer.fast_dev_run:  # fast_dev_run saves no checkpoint
        for callback in callbacks:
            folders = getattr(callback, "folders_to_write", None)
            if callable(folders):
                given = getattr(callback, "dirpath", None)
                shown = f"dirpath={safe_repr(given)}" if given is not None else ""
                found += [(f"{type(callback).__name__}({shown})", f) for f in folders(trainer)]
    return found


def check_folders(fn: str, folders: Iterable[tuple[str, str]]) -> None:
    """Each folder exists as a folder or can be created, in a place this process may write.
    Reading only (``os.access`` on the nearest folder that exists): nothing is created here, so
    any process may run it."""
    for who, folder in folders:
        path = Path(folder).expanduser().absolute()
        existing = path
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        if not existing.is_dir():
            raise MisconfigurationError(
                f"Trainer.{fn}: {who} writes into {str(path)!r}, but {str(existing)!r} is a file, "
                f"so that folder cannot exist. Fix: point it at a folder (or move the file)."
            )
        if not os.access(existing, os.W_OK | os.X_OK):
            what = "that folder" if existing == path else f"{str(existing)!r}, where it would go,"
            raise MisconfigurationError(
                f"Trainer.{fn}: {who} writes into {str(path)!r}, but {what} is not writable by "
                f"this process (uid {getattr(os, 'geteuid', lambda: '?')()}). Fix: point it at "
                f"a folder you can write to, or change the folder's permissions."
            )
