"""Lightning 1.x hooks in a module or callback, found before any rank starts.

Lightning 2.x never calls the removed hooks (``on_epoch_end``, ``on_batch_end``,
``training_step_end`` ...) and says nothing; and a 1.x signature of a hook it still has
(``on_train_batch_start(..., dataloader_idx)``) is a ``TypeError`` deep in the loop, inside every
rank. ddpkit looks before the stage starts: a hook Lightning would call with fewer arguments than
it takes is a ``MisconfigurationError`` naming the parameter; a hook Lightning would never call is
a ``DDPKitDeprecationWarning`` naming the 2.x hook to move it to. (The 1.x epoch-end hooks, which
Lightning 2.x refuses, keep running: :mod:`ddpkit.lightning.epoch_end`.)
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterable, Iterator
from typing import Any

import pytorch_lightning as pl

from ddpkit.core.optimizer_hooks import HOOKS, as_2x, takes_optimizer_idx
from ddpkit.errors import DDPKitDeprecationWarning, MisconfigurationError
from ddpkit.utilities.rank_zero import rank_zero_warn

__all__ = ["check_hooks", "one_optimizer_1x_hooks"]

_EPOCH = "on_train_epoch_{0}, on_validation_epoch_{0} or on_test_epoch_{0}"
#: Module hooks Lightning 2.x never calls.
IGNORED_MODULE_HOOKS = {
    "training_step_end": ("2.0", "the end of training_step, or on_train_batch_end"),
    "validation_step_end": ("2.0", "the end of validation_step, or on_validation_batch_end"),
    "test_step_end": ("2.0", "the end of test_step, or on_test_batch_end"),
    "on_epoch_start": ("1.8", _EPOCH.format("start")),
    "on_epoch_end": ("1.8", _EPOCH.format("end")),
    "on_pretrain_routine_start": ("1.8", "on_fit_start"),
    "on_pretrain_routine_end": ("1.8", "on_fit_start"),
    "on_hpc_save": ("1.8", "on_save_checkpoint"),
    "on_hpc_load": ("1.8", "on_load_checkpoint"),
    "on_post_move_to_device": ("1.7", "setup or configure_model"),
    "get_progress_bar_dict": ("1.7", "TQDMProgressBar.get_metrics"),
}
#: Callback hooks Lightning 2.x never calls.
IGNORED_CALLBACK_HOOKS = {
    "on_init_start": ("1.8", "the callback's __init__"),
    "on_init_end": ("1.8", "setup"),
    "on_epoch_start": ("1.8", _EPOCH.format("start")),
    "on_epoch_end": ("1.8", _EPOCH.format("end")),
    "on_batch_start": ("1.8", "on_train_batch_start"),
    "on_batch_end": ("1.8", "on_train_batch_end"),
    "on_pretrain_routine_start": ("1.8", "on_fit_start"),
    "on_pretrain_routine_end": ("1.8", "on_fit_start"),
    "on_keyboard_interrupt": ("1.7", "on_exception"),
    "on_configure_sharded_model": ("1.8", "setup"),
    "on_before_accelerator_backend_setup": ("1.8", "setup"),
}


def _defines(obj: Any, name: str) -> bool:
    return callable(getattr(type(obj), name, None))


def _required(function: Any) -> list[str]:
    """The positional parameters a bound hook requires (``self`` already bound)."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return []
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return [p.name for p in parameters if p.kind in kinds and p.default is p.empty]


def _check_signatures(obj: Any, base: type) -> None:
    """A hook Lightning 2.x still calls, overridden with more required parameters than it
    passes (1.x's ``dataloader_idx`` of the train batch hooks, ``outputs`` of
    ``on_train_epoch_end``): refused here, not a ``TypeError`` inside the loop."""
    for name, hook in inspect.getmembers(base, inspect.isfunction):
        if not name.startswith("on_") or getattr(type(obj), name, hook) is hook:
            continue
        theirs = _required(getattr(obj, name))
        ours = _required(hook.__get__(obj))
        if len(theirs) > len(ours):
            extra = ", ".join(theirs[len(ours) :])
            raise MisconfigurationError(
                f"{type(obj).__name__}.{name}({', '.join(theirs)}): Lightning 2.x calls "
                f"{name}({', '.join(ours)}); {extra} came from Lightning 1.x and is not "
                f"always passed. Fix: drop {extra}, or give it a default."
            )


def check_hooks(model: Any, callbacks: Iterable[Any]) -> None:
    """Refuse or warn about the 1.x hooks of ``model`` and of each callback (see the module)."""
    if isinstance(model, pl.LightningModule):
        _check_signatures(model, pl.LightningModule)
        _warn_ignored(model, IGNORED_MODULE_HOOKS)
    for callback in callbacks:
        if isinstance(callback, pl.Callback):
            _check_signatures(callback, pl.Callback)
            _warn_ignored(callback, IGNORED_CALLBACK_HOOKS)


def _warn_ignored(obj: Any, table: dict[str, tuple[str, str]]) -> None:
    for name, (removed, instead) in table.items():
        if _defines(obj, name):
            rank_zero_warn(
                f"{type(obj).__name__}.{name}: removed in Lightning {removed}, and Lightning 2.x "
                f"never calls it. Move it to {instead}.",
                DDPKitDeprecationWarning,
            )


@contextlib.contextmanager
def one_optimizer_1x_hooks(trainer: pl.Trainer, model: Any) -> Iterator[None]:
    """For one stage: a 1.x ``optimizer_step`` / ``optimizer_zero_grad`` /
    ``configure_gradient_clipping`` of a one-optimizer module (the learning-rate warm-up of 1.x's
    docs), which Lightning 2.x would call without ``optimizer_idx``, gets 1.x's arguments
    (:mod:`ddpkit.core.optimizer_hooks`). Several optimizers: ``multi_optimizer_stage`` does it."""
    installed = []
    if isinstance(model, pl.LightningModule):
        native_amp = getattr(trainer.precision_plugin, "scaler", None) is not None
        for name in HOOKS:
            hook = getattr(model, name)
            if name not in vars(model) and takes_optimizer_idx(hook):
                setattr(model, name, as_2x(name, hook, native_amp=native_amp))
                installed.append(name)
    try:
        yield
    finally:
        for name in installed:
            delattr(model, name)
