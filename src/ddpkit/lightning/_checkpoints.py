"""Checkpoints a run wrote load back as Lightning 1.x loaded them; any other file only as far as
``weights_only`` lets it.

1.x saved ``save_hyperparameters()`` whole — an ``nn.Module`` argument included — and loaded its
checkpoints with ``torch.load``, which unpickled anything (torch < 2.6). Torch 2.6 and later load
``weights_only`` by default, so such a checkpoint no longer loads back: ``trainer.test(
ckpt_path="best")`` after a fit failed inside the ranks. ddpkit.lightning loads with
``weights_only=False`` only a file this process's run wrote (a ``ModelCheckpoint``'s best, last
and top-k files of its Trainers, a ``trainer.save_checkpoint`` path) or ``"best"`` / ``"last"``,
which name those; every other file loads with torch's default (``weights_only=True``), and
``weights_only=False`` given by the caller is honoured as given.

What a stage restores from its ``ckpt_path`` is 1.x's too (:func:`callbacks_restored_in_fit_only`):
Lightning 2.x restores the callbacks' states at every stage, so ``trainer.test(ckpt_path="best")``
after a fit put ``EarlyStopping``'s wait count and ``ModelCheckpoint``'s last path back to the
checkpoint's; 1.x restored the module and the data module at every stage, the callbacks only
when fitting.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from ddpkit.lightning._adapters import OneXHooks

_TRUSTED: set[str] = set()


def _key(path: Any) -> str | None:
    if not isinstance(path, str | os.PathLike):
        return None
    return os.path.realpath(os.fspath(path))


def trust(path: Any) -> None:
    """``path`` was written by this run: it may be unpickled whole."""
    key = _key(path)
    if key is not None:
        _TRUSTED.add(key)


def trusted(path: Any) -> bool:
    return _key(path) in _TRUSTED


def trust_trainer(trainer: Any) -> None:
    """Every checkpoint a Trainer's ``ModelCheckpoint`` callbacks wrote (and still keep)."""
    for callback in getattr(trainer, "checkpoint_callbacks", ()):
        for path in (callback.best_model_path, callback.last_model_path, *callback.best_k_models):
            if path:
                trust(path)


def weights_only_for(path: Any, given: bool | None) -> bool | None:
    """``weights_only`` for loading ``path``: the caller's, else False for a file of this run
    (or ``"best"`` / ``"last"``), else None (torch's default, True)."""
    if given is not None or path is None:
        return given
    if path in ("best", "last") or trusted(path):
        return False
    return None


class _DataModuleOnly:
    """The checkpoint connector's ``restore_callbacks`` for a stage other than ``fit``: the
    callbacks keep their state; only a 1.x data module's ``on_load_checkpoint`` runs (1.0–1.5
    called it at every stage; ddpkit calls it from a callback of its own,
    :class:`~ddpkit.lightning._adapters.OneXHooks`)."""

    def __init__(self, trainer: Any) -> None:
        self.trainer = trainer

    def __call__(self) -> None:
        trainer = self.trainer
        checkpoint = trainer._checkpoint_connector._loaded_checkpoint
        if not checkpoint:
            return
        for callback in trainer.callbacks:
            if isinstance(callback, OneXHooks):
                callback.on_load_checkpoint(trainer, trainer.lightning_module, checkpoint)


@contextlib.contextmanager
def callbacks_restored_in_fit_only(trainer: Any, stage: str) -> Iterator[None]:
    """For one stage other than ``fit``: its ``ckpt_path`` restores the module and the data
    module, not the callbacks (see the module)."""
    if stage == "fit":
        yield
        return
    connector = trainer._checkpoint_connector
    vars(connector)["restore_callbacks"] = _DataModuleOnly(trainer)
    try:
        yield
    finally:
        vars(connector).pop("restore_callbacks", None)
