"""Lightning 1.x's epoch-end hooks, called on Lightning 2.x's loop as 1.x called them.

``training_epoch_end(outputs)``, ``validation_epoch_end(outputs)`` and ``test_epoch_end(outputs)``
were removed in Lightning 2.0, which refuses a module that defines one. ddpkit keeps them
running: :class:`EpochEndOutputs`, a callback placed first, keeps each step's output (what
``on_*_batch_end`` receives: for training, ``{"loss": <detached loss>, ...}`` as in 1.x) and calls
the module's 1.x hook with the list at the end of the epoch — before the other callbacks'
``on_*_epoch_end`` and the module's own, and before the checkpoint and early-stopping callbacks
read the metrics, which is where 1.x called it. With several evaluation loaders, ``outputs`` is a
list per loader, as in 1.x. ``self.log`` in the hook logs per epoch.

For the length of the stage, the module's instance attribute of each such hook is ``None``, so
Lightning's check finds no 1.x hook; the stage removes it again when it ends.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytorch_lightning as pl

from ddpkit.errors import DDPKitDeprecationWarning
from ddpkit.utilities._rank_zero import rank_zero_warn

#: 1.x hook → the loop it belongs to, and the 2.x hook to move it to.
EPOCH_END_HOOKS = {
    "training_epoch_end": ("train", "on_train_epoch_end"),
    "validation_epoch_end": ("validation", "on_validation_epoch_end"),
    "test_epoch_end": ("test", "on_test_epoch_end"),
}


class EpochEndOutputs(pl.Callback):
    """Collects the step outputs and calls the module's 1.x epoch-end hooks (see the module)."""

    def __init__(self, hooks: dict[str, Any]) -> None:
        #: loop name → the module's 1.x hook (the function, called with the module)
        self.hooks = {EPOCH_END_HOOKS[name][0]: fn for name, fn in hooks.items()}
        self.outputs: dict[str, dict[int, list[Any]]] = {}

    def _keep(self, loop: str, outputs: Any, dataloader_idx: int = 0) -> None:
        if outputs is None or (
            loop == "train" and isinstance(outputs, dict | list) and not outputs
        ):
            return  # 1.x kept nothing of a step that returned None (2.x passes {}, 1.x [])
        if loop in self.hooks:
            self.outputs.setdefault(loop, {}).setdefault(dataloader_idx, []).append(outputs)

    def _call(self, loop: str, pl_module: pl.LightningModule, loaders: int = 1) -> None:
        if loop not in self.hooks:
            return
        kept = self.outputs.pop(loop, {})
        several: Any = vars(pl_module).get("training_step")
        if loop == "train" and hasattr(several, "state"):  # 1.x's optimizers, one pass each
            self.hooks[loop](pl_module, several.state.take_epoch_outputs())
            return
        outputs = [kept.get(i, []) for i in range(loaders)] if loaders > 1 else kept.get(0, [])
        self.hooks[loop](pl_module, outputs)

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, *_: Any) -> None:
        self._keep("train", outputs)

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._call("train", pl_module)

    def on_validation_batch_end(
        self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int, idx: int = 0
    ) -> None:
        self._keep("validation", outputs, idx)

    def on_validation_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._call("validation", pl_module, len(trainer.num_val_batches))

    def on_test_batch_end(
        self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int, idx: int = 0
    ) -> None:
        self._keep("test", outputs, idx)

    def on_test_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._call("test", pl_module, len(trainer.num_test_batches))


#: The 1.x epoch-end hooks each stage runs.
_STAGE_HOOKS = {
    "fit": ("training_epoch_end", "validation_epoch_end"),
    "validate": ("validation_epoch_end",),
    "test": ("test_epoch_end",),
    "predict": (),
}


@contextlib.contextmanager
def epoch_end_hooks(stage: str, model: Any, callbacks: list[Any]) -> Iterator[None]:
    """For one stage: the module's 1.x epoch-end hooks that the stage runs are called from an
    :class:`EpochEndOutputs` placed first in ``callbacks``, with one warning per hook naming its
    2.x replacement."""
    found = {
        name: getattr(type(model), name)
        for name in _STAGE_HOOKS[stage]
        if isinstance(model, pl.LightningModule) and callable(getattr(model, name, None))
    }
    if not found:
        yield
        return
    for name in found:
        rank_zero_warn(
            f"{type(model).__name__}.{name}(outputs): removed in Lightning 2.0; ddpkit calls it "
            f"at the end of each epoch with the step outputs, as 1.x did. Lightning 2.x's "
            f"spelling: {EPOCH_END_HOOKS[name][1]}, keeping what you need from each step in an "
            f"attribute of the module.",
            DDPKitDeprecationWarning,
        )
        setattr(model, name, None)  # Lightning's check sees no 1.x hook
    callback = EpochEndOutputs(found)
    callbacks.insert(0, callback)
    try:
        yield
    finally:
        callbacks.remove(callback)
        for name in found:
            vars(model).pop(name, None)
