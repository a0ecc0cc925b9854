"""Lightning 1.x hooks that Lightning 2.x removed, by owner, and the 2.x spelling of each.

``ddpkit.lightning.Trainer`` calls each of them where 1.x did (:mod:`ddpkit.lightning._adapters`).
``ddpkit.Trainer`` calls the step and epoch ends (:data:`CALLED_BY_DDPKIT_TRAINER`, with a
deprecation warning) and refuses the others before any rank starts
(:func:`ddpkit._lightning_surface.check_defined`): a hook that is defined and never called would
leave the run silently different from the user's 1.x one. Source: the members of the 1.x wheels
(``ddpkit/lightning/_surface/facts_1x.json``), which a test holds :data:`REMOVED` to.
"""

from __future__ import annotations

_EPOCH = "on_train_epoch_{0}, on_validation_epoch_{0} and on_test_epoch_{0}"
_DATALOADERS = ("train", "val", "test", "predict")
_TBPTT = "truncated backpropagation through time: split the sequence in training_step"
_QUEUE = "log what rank zero must see (self.log) or save it to a file on rank zero"

#: A removed hook → its Lightning 2.x spelling.
INSTEAD = {
    "on_epoch_start": _EPOCH.format("start"),
    "on_epoch_end": _EPOCH.format("end"),
    "on_pretrain_routine_start": "on_fit_start",
    "on_pretrain_routine_end": "on_fit_start",
    "on_post_move_to_device": "setup",
    "training_step_end": "the end of training_step",
    "validation_step_end": "the end of validation_step",
    "test_step_end": "the end of test_step",
    "training_epoch_end": "on_train_epoch_end (collect the outputs in training_step)",
    "validation_epoch_end": "on_validation_epoch_end (collect the outputs in validation_step)",
    "test_epoch_end": "on_test_epoch_end (collect the outputs in test_step)",
    "get_progress_bar_dict": "a TQDMProgressBar subclass whose get_metrics returns the items",
    "log_grad_norm": "on_before_optimizer_step, logging the norms with self.log_dict",
    "on_init_start": "the callback's __init__",
    "on_init_end": "setup",
    "on_batch_start": "on_train_batch_start",
    "on_batch_end": "on_train_batch_end",
    "on_keyboard_interrupt": "on_exception (the exception is a KeyboardInterrupt)",
    "on_before_accelerator_backend_setup": "setup",
    "on_configure_sharded_model": "setup (configure_model on the module)",
    "on_save_checkpoint": "state_dict",
    "on_load_checkpoint": "load_state_dict",
    "on_hpc_save": "on_save_checkpoint",
    "on_hpc_load": "on_load_checkpoint",
    "predict": "predict_step(self, batch, batch_idx, dataloader_idx=0)",
    "tbptt_split_batch": _TBPTT,
    "add_to_queue": _QUEUE,
    "get_from_queue": _QUEUE,
    **{f"on_{s}_dataloader": f"the start of {s}_dataloader()" for s in _DATALOADERS},
}

#: Lightning's class → the hooks of its 1.x releases that 2.x removed from it.
REMOVED: dict[str, frozenset[str]] = {
    "Callback": frozenset({
        "on_init_start", "on_init_end", "on_epoch_start", "on_epoch_end", "on_batch_start",
        "on_batch_end", "on_pretrain_routine_start", "on_pretrain_routine_end",
        "on_keyboard_interrupt", "on_before_accelerator_backend_setup",
        "on_configure_sharded_model",
    }),
    "LightningDataModule": frozenset({
        "on_save_checkpoint", "on_load_checkpoint",
        *(f"on_{s}_dataloader" for s in _DATALOADERS),
    }),
    "LightningModule": frozenset({
        "on_epoch_start", "on_epoch_end", "on_pretrain_routine_start", "on_pretrain_routine_end",
        "on_post_move_to_device", "training_step_end", "validation_step_end", "test_step_end",
        "training_epoch_end", "validation_epoch_end", "test_epoch_end", "get_progress_bar_dict",
        "log_grad_norm", "on_hpc_save", "on_hpc_load", "predict", "tbptt_split_batch",
        "add_to_queue", "get_from_queue", *(f"on_{s}_dataloader" for s in _DATALOADERS),
    }),
}  # fmt: skip

#: The removed module hooks ddpkit.Trainer still calls where 1.x did (with a deprecation warning).
CALLED_BY_DDPKIT_TRAINER = frozenset({
    "training_step_end", "validation_step_end", "test_step_end",
    "training_epoch_end", "validation_epoch_end", "test_epoch_end",
})  # fmt: skip

#: Removed hooks whose name a user's own method may have for another purpose (a module's
#: ``predict(x)`` helper): ddpkit.Trainer never refuses them.
COMMON_NAMES = frozenset({"predict"})
