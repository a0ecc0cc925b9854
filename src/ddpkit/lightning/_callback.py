"""``Callback`` as a 1.x project knew it: Lightning 2.x's, with 1.x's hooks 2.x removed as
no-ops, so that a 1.x callback's ``super().on_epoch_end(trainer, pl_module)`` runs. ddpkit calls
a callback's own 1.x hooks where 1.x called them (:mod:`ddpkit.lightning._adapters`);
``isinstance(c, Callback)`` holds for Lightning's own callbacks too (:class:`~ddpkit.lightning.
_module.Of2x`)."""

from __future__ import annotations

import pytorch_lightning as pl

from ddpkit.lightning._module import Of2x, _no_op

#: 1.x callback hooks 2.x removed → (the 1.x releases that had them, where 1.x called them).
CALLBACK_HOOKS_1X = {
    "on_init_start": ("1.0–1.7", "the start of the Trainer's __init__"),
    "on_init_end": ("1.0–1.7", "the end of the Trainer's __init__"),
    "on_epoch_start": ("1.0–1.7", "the start of every epoch"),
    "on_epoch_end": ("1.0–1.7", "the end of every epoch"),
    "on_batch_start": ("1.0–1.7", "the start of every training batch"),
    "on_batch_end": ("1.0–1.7", "the end of every training batch"),
    "on_pretrain_routine_start": ("1.0–1.7", "before the sanity check"),
    "on_pretrain_routine_end": ("1.0–1.7", "before the sanity check"),
    "on_keyboard_interrupt": ("1.0–1.6", "when training is interrupted"),
    "on_before_accelerator_backend_setup": ("1.2–1.7", "before setup"),
    "on_configure_sharded_model": ("1.3–1.7", "after setup"),
}


class Callback(pl.Callback, metaclass=Of2x):
    """Lightning 2.x's ``Callback`` with 1.x's removed hooks as no-ops (see the module)."""


for _name, _about in CALLBACK_HOOKS_1X.items():
    setattr(Callback, _name, _no_op(_name, *_about))
