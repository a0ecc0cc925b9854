"""Checkpoints: what goes in (``dump_checkpoint``), what comes back (``restore_*``), and the
atomic write on global rank zero.

A checkpoint holds Lightning 2.x's keys, in its layout, so that Lightning loads and resumes it
(and ddpkit a checkpoint of Lightning's): ``epoch`` and ``global_step`` when it was written,
``pytorch-lightning_version`` (the layout's, :data:`LIGHTNING_FORMAT`), ``state_dict``,
``optimizer_states``, ``lr_schedulers``, ``callbacks`` (each callback's ``state_dict`` by
``state_key``), ``hyper_parameters``, ``loops`` (the fit loop's progress, from which a resumed
``fit`` continues: :mod:`ddpkit.trainer._lightning_loops`); plus the precision plugin's state,
the ddpkit version and ``ddpkit_rng`` (each rank's RNG states, which a restarted fit sets again
before its first epoch).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ddpkit.__about__ import __version__
from ddpkit.callbacks._dispatch import Dispatcher
from ddpkit.core._saving import HPARAMS_KEY
from ddpkit.errors import DDPKitWarning, MisconfigurationError
from ddpkit.plugins.precision._base import PrecisionPlugin
from ddpkit.trainer._lightning_loops import LIGHTNING_FORMAT, fit_loop_state, read_position
from ddpkit.trainer._optim import SchedulerConfig
from ddpkit.trainer._state import LoopState
from ddpkit.utilities._files import atomic_write, sweep_partials
from ddpkit.utilities._paths import local_path
from ddpkit.utilities._rank_zero import rank_zero_warn


def atomic_save(obj: Any, path: str | os.PathLike[str]) -> Path:
    """``torch.save`` to a temporary file in the same folder, fsync, rename (ddpkit's one
    atomic write, :func:`~ddpkit.utilities._files.atomic_write`).

    A crash at any point leaves either the previous file or the new one, never a truncated one
    (rename within one file system is atomic). The temporary file is removed when the save
    raises; a process killed outright (SIGKILL, power loss) can leave it behind as a hidden
    sibling ``.<name>.<writer>.<random>.tmp``, which no ``*.ckpt`` pattern matches: the next save
    in the folder removes it (:func:`~ddpkit.utilities._files.sweep_partials`) once its writer is
    gone.
    """
    target = local_path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    sweep_partials(target.parent)
    # private: a checkpoint has always been 0600 (it was written through mkstemp)
    return atomic_write(target, lambda fh: torch.save(obj, fh), private=True, durable=True)


def _hparams(obj: Any) -> dict[str, Any] | None:
    found = getattr(obj, "hparams", None)
    return dict(found) if found else None


def dump_checkpoint(
    state: LoopState,
    model: nn.Module,
    precision: PrecisionPlugin,
    dispatcher: Dispatcher | None,
    *,
    weights_only: bool = False,
    rng: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The checkpoint dict, after the callbacks' and the module's ``on_save_checkpoint``
    (``rng``: every rank's RNG states, kept under ``"ddpkit_rng"``)."""
    checkpoint: dict[str, Any] = {
        "epoch": state.current_epoch,
        "global_step": state.global_step,
        "pytorch-lightning_version": LIGHTNING_FORMAT,
        "ddpkit_version": __version__,
        "state_dict": model.state_dict(),
        "loops": fit_loop_state(state),
    }
    if not weights_only:
        checkpoint["optimizer_states"] = [o.state_dict() for o in state.optimizers]
        checkpoint["lr_schedulers"] = [c.scheduler.state_dict() for c in state.lr_scheduler_configs]
        checkpoint["precision"] = precision.state_dict()
        checkpoint["callbacks"] = {
            callback.state_key: found
            for callback in state.callbacks
            if (found := callback.state_dict())
        }
    if rng is not None:
        checkpoint["ddpkit_rng"] = rng
    for prefix, owner in (("", model), ("datamodule_", state.datamodule)):
        hparams = _hparams(owner) if owner is not None else None
        if hparams is None:
            continue
        if "_hparams_name" in vars(owner):  # Lightning's: how save_hyperparameters got them
            checkpoint[f"{prefix}hparams_name"] = vars(owner)["_hparams_name"]
        checkpoint[f"{prefix}{HPARAMS_KEY}"] = hparams
    datamodule = state.datamodule
    if datamodule is not None:
        dm_state: dict[str, Any] = getattr(datamodule, "state_dict", dict)()
        if dm_state:
            checkpoint[type(datamodule).__qualname__] = dm_state
    if dispatcher is not None:
        if not weights_only:
            dispatcher.call_callbacks("on_save_checkpoint", checkpoint)
        dispatcher.call_module("on_save_checkpoint", checkpoint)
    return checkpoint


def restore_model(
    checkpoint: dict[str, Any],
    model: nn.Module,
    dispatcher: Dispatcher,
    state: LoopState,
    *,
    callbacks: bool,
) -> None:
    """The module's weights (after its ``on_load_checkpoint``), the DataModule's state, and with
    ``callbacks`` (a fit resuming, as in Lightning) the callbacks' state."""
    dispatcher.call_module("on_load_checkpoint", checkpoint)
    model.load_state_dict(checkpoint["state_dict"])
    datamodule = state.datamodule
    if datamodule is not None and type(datamodule).__qualname__ in checkpoint:
        datamodule.load_state_dict(checkpoint[type(datamodule).__qualname__])
    saved = checkpoint.get("callbacks")
    if not saved or not callbacks:
        return
    unknown = sorted(set(saved) - {cb.state_key for cb in state.callbacks})
    if unknown:
        rank_zero_warn(
            f"The checkpoint holds the state of callbacks this Trainer does not have: {unknown}. "
            f"Fix: pass the same callbacks to Trainer(callbacks=[...]) to restore them.",
            DDPKitWarning,
        )
    dispatcher.call_callbacks("on_load_checkpoint", checkpoint)
    for callback in state.callbacks:
        found = saved.get(callback.state_key)
        if found:
            callback.load_state_dict(dict(found))


def restore_training(
    checkpoint: dict[str, Any],
    state: LoopState,
    optimizers: list[torch.optim.Optimizer],
    schedulers: list[SchedulerConfig],
    precision: PrecisionPlugin,
) -> int:
    """Optimizers, schedulers, precision state and counters; returns the epoch to start at."""
    for opt, saved in zip(optimizers, checkpoint.get("optimizer_states", [])):
        opt.load_state_dict(saved)
    for config, saved in zip(schedulers, checkpoint.get("lr_schedulers", [])):
        config.scheduler.load_state_dict(saved)
    precision.load_state_dict(checkpoint.get("precision", {}))
    state.global_step = int(checkpoint["global_step"])
    state.restore_fit_progress({**read_position(checkpoint), "global_step": state.global_step})
    state.current_epoch = state.epochs_completed
    return state.epochs_completed


def resolve_ckpt_path(
    fn: str, ckpt_path: str | os.PathLike[str] | None, state: LoopState, model_given: bool
) -> str | None:
    """``"best"`` / ``"last"`` into the checkpoint callback's file; ``None`` without a model
    into ``"best"`` (as Lightning does, saying so)."""
    callback = _checkpoint_callback(state)
    if ckpt_path is None:
        if model_given or fn == "fit":
            return None
        if callback is None or not callback.best_model_path:
            return None  # the fitted module's current weights
        rank_zero_warn(
            f"Trainer.{fn}() got no model: it uses the fitted one, with the best checkpoint's "
            f"weights ({callback.best_model_path}). Fix: pass ckpt_path='best' (or 'last', or "
            f"a path) to say so and silence this warning.",
            DDPKitWarning,
        )
        ckpt_path = "best"
    if ckpt_path == "last":
        return _last_checkpoint(fn, callback)
    if ckpt_path == "best":
        found = callback.best_model_path if callback is not None else ""
        if not found:
            raise MisconfigurationError(
                f"Trainer.{fn}(ckpt_path='best'): there is no best checkpoint (no "
                f"ModelCheckpoint has saved one yet). Fix: fit first with "
                f"Trainer(callbacks=[ModelCheckpoint(monitor='val_loss')]), or pass a path."
            )
        return str(found)
    path = os.fspath(ckpt_path)
    if not local_path(path).is_file():
        raise MisconfigurationError(
            f"Trainer.{fn}(ckpt_path={path!r}): no such file. Fix: pass an existing .ckpt "
            f"path, 'best' or 'last'."
        )
    return path


def _last_checkpoint(fn: str, callback: Any) -> str | None:
    """``ckpt_path="last"`` as Lightning finds it: the newest of the ModelCheckpoint's last file
    of this run and the ``last*.ckpt`` files in its folder; with none, a warning and no
    checkpoint (Lightning's "set and forget": the first run of a script starts from scratch)."""
    candidates: set[Path] = set()
    if callback is not None:
        if callback.last_model_path:
            candidates.add(local_path(callback.last_model_path))
        folder = getattr(callback, "dirpath", None)
        name = re.escape(getattr(callback, "CHECKPOINT_NAME_LAST", None) or "last")
        found = local_path(folder) if folder else None
        if found is not None and found.is_dir():
            pattern = re.compile(rf"^{name}(-(\d+))?$")
            candidates |= {p for p in found.glob("*.ckpt") if pattern.match(p.stem)}
    present = [p for p in candidates if p.is_file()]
    if not present:
        rank_zero_warn(
            f'Trainer.{fn}(ckpt_path="last") is set, but there is no last checkpoint available. '
            f"No checkpoint will be loaded. HINT: Set `ModelCheckpoint(..., save_last=True)`.",
            DDPKitWarning,
        )
        return None
    return str(max(present, key=lambda p: p.stat().st_mtime))


def _checkpoint_callback(state: LoopState) -> Any:
    for callback in state.callbacks:
        if hasattr(callback, "best_model_path") and hasattr(callback, "last_model_path"):
            return callback
    return None
