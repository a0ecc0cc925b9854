"""The decisions for 1.x members that ddpkit neither provides nor finds unchanged in 2.x: why each
is refused (with the 2.x fix) or out of scope."""

from __future__ import annotations

_REFUSED, _OUT = "refused", "out of scope"

#: owner class → its name in ddpkit.lightning._adapters.ADAPTED
OWNERS = {
    "Trainer": "trainer",
    "LightningModule": "module",
    "LightningDataModule": "datamodule",
    "Callback": "callback",
}

_DATA_HOOKS = (
    "prepare_data",
    "setup",
    "teardown",
    "train_dataloader",
    "val_dataloader",
    "test_dataloader",
    "predict_dataloader",
    "transfer_batch_to_device",
    "state_dict",
    "load_state_dict",
)
#: Members a module or data module *defines* and Lightning calls (besides every ``on_*``).
HOOKS: dict[str, tuple[str, ...]] = {
    "LightningModule": (
        *_DATA_HOOKS,
        "training_step",
        "validation_step",
        "test_step",
        "predict_step",
        "training_step_end",
        "validation_step_end",
        "test_step_end",
        "training_epoch_end",
        "validation_epoch_end",
        "test_epoch_end",
        "configure_optimizers",
        "configure_callbacks",
        "configure_gradient_clipping",
        "configure_sharded_model",
        "optimizer_step",
        "optimizer_zero_grad",
        "backward",
        "lr_scheduler_step",
        "tbptt_split_batch",
        "get_progress_bar_dict",
        "forward",
        "add_to_queue",
        "get_from_queue",
        "log_grad_norm",
        "predict",
    ),
    "LightningDataModule": _DATA_HOOKS,
}

_INTERNAL = (
    "a part of Lightning 1.x's Trainer machinery (its connectors, loops and bookkeeping), "
    "rebuilt in Lightning 2.x; not an API a project uses"
)
_HOOK_CALLER = (
    "1.x's Trainer called its callbacks' hooks through this method; Lightning 2.x calls them "
    "itself. Fix: nothing to call"
)
_TBPTT = (
    "truncated backpropagation through time was removed in Lightning 2.0. Fix: split the "
    "sequence in training_step and step the optimizer per split with manual optimization"
)
_RELOAD = (
    "the Trainer's data-loader internals. Fix: Trainer(reload_dataloaders_every_n_epochs=1) "
    "to make the loaders again each epoch"
)

#: "Owner.member" → (status, why; fix).
MEMBER_RULES: dict[str, tuple[str, str]] = {
    **{f"Trainer.{name}": (_OUT, _INTERNAL) for name in (
        "accelerator_connector", "callback_connector", "checkpoint_connector", "config_validator",
        "data_connector", "debugging_connector", "dev_debugger", "evaluation_loop",
        "logger_connector", "model_connector", "optimizer_connector", "plugin_connector",
        "precision_connector", "profile_connector", "signal_connector", "slurm_connector",
        "training_tricks_connector", "train_loop", "autocast_original_forward",
        "available_plugins", "interactive_ddp_procs", "is_slurm_managing_tasks",
        "num_requested_gpus", "num_slurm_tasks", "on_colab_kaggle", "prepared_for_backwards",
        "setup_trainer", "shown_warnings", "tpu_global_core_rank", "tpu_id",
        "tpu_local_core_rank", "configure_schedulers", "configure_sharded_model",
        "convert_to_lightning_optimizers", "detect_nan_tensors", "dispatch", "post_dispatch",
        "pre_dispatch", "has_arg", "init_optimizers", "is_function_implemented",
        "metrics_to_scalars", "print_nan_gradients", "process_dict_result",
        "reduce_distributed_output", "reinit_scheduler_properties", "run_evaluate",
        "run_evaluation", "run_predict", "run_sanity_check", "run_stage", "run_test",
        "run_train", "train", "train_or_test_or_predict", "track_output_for_epoch_end",
        "overridden_optimizer_step", "overridden_optimizer_zero_grad",
        "overriden_optimizer_step", "overriden_optimizer_zero_grad", "auto_add_sampler",
        "auto_add_worker_init_fn", "replace_sampler", "request_dataloader",
        "prepare_dataloader", "determine_data_use_amount", "require_distributed_sampler",
        "verbose_evaluate", "verbose_test", "hiddens", "split_idx", "batch_idx",
        "total_batch_idx", "root_device", "benchmark", "deterministic", "sync_batchnorm",
        "log_gpu_memory", "amp_level", "model",
    )},
    **{f"Trainer.{name}": (_OUT, _HOOK_CALLER) for name in (
        "call_hook", "call_setup_hook", "call_teardown_hook", "call_configure_sharded_model",
        "on_after_backward", "on_batch_end", "on_batch_start",
        "on_before_accelerator_backend_setup", "on_before_backward", "on_before_optimizer_step",
        "on_before_zero_grad", "on_configure_sharded_model", "on_epoch_end", "on_epoch_start",
        "on_exception", "on_fit_end", "on_fit_start", "on_init_end", "on_init_start",
        "on_keyboard_interrupt", "on_load_checkpoint", "on_predict_batch_end",
        "on_predict_batch_start", "on_predict_end", "on_predict_epoch_end",
        "on_predict_epoch_start", "on_predict_start", "on_pretrain_routine_end",
        "on_pretrain_routine_start", "on_sanity_check_end", "on_sanity_check_start",
        "on_save_checkpoint", "on_test_batch_end", "on_test_batch_start", "on_test_end",
        "on_test_epoch_end", "on_test_epoch_start", "on_test_start", "on_train_batch_end",
        "on_train_batch_start", "on_train_end", "on_train_epoch_end", "on_train_epoch_start",
        "on_train_start", "on_validation_batch_end", "on_validation_batch_start",
        "on_validation_end", "on_validation_epoch_end", "on_validation_epoch_start",
        "on_validation_start", "setup", "teardown",
    )},
    **{f"Trainer.{name}": (_REFUSED, _RELOAD) for name in (
        "reset_train_dataloader", "reset_val_dataloader", "reset_test_dataloader",
        "reset_predict_dataloader", "reset_train_val_dataloaders",
    )},
    "Trainer.accelerator_backend": (_REFUSED, "Fix: trainer.strategy (how the ranks train) or "
                                    "trainer.accelerator (the device kind)"),
    "Trainer.lightning_optimizers": (_REFUSED, "Fix: self.optimizers() in the LightningModule"),
    "Trainer.truncated_bptt_steps": (_REFUSED, _TBPTT),
    "LightningModule.tbptt_split_batch": (_REFUSED, _TBPTT),
    "LightningModule.truncated_bptt_steps": (_REFUSED, _TBPTT),
    "LightningModule.exp_save_path": (_OUT, _INTERNAL),
    "LightningModule.loaded_optimizer_states_dict": (_OUT, _INTERNAL),
    "LightningModule.running_stage": (_OUT, _INTERNAL),
    "LightningModule.from_compiled": (_REFUSED, "Lightning 2.x trains a compiled module as it "
                                      "is. Fix: trainer.fit(torch.compile(model))"),
    "LightningModule.to_uncompiled": (_REFUSED, "Fix: keep a reference to the module you "
                                      "compiled (torch.compile returns a wrapper)"),
    "LightningModule.manual_optimizer_step": (_REFUSED, "Fix: opt = self.optimizers(); "
                                              "opt.step() (manual optimization)"),
    "LightningModule.write_prediction": (_REFUSED, "Fix: callbacks=[a BasePredictionWriter "
                                         "subclass] with trainer.predict(...)"),
    "LightningModule.write_prediction_dict": (_REFUSED, "Fix: callbacks=[a BasePredictionWriter "
                                              "subclass] with trainer.predict(...)"),
    "LightningModule.predict": (_REFUSED, "Lightning 1.2's predict hook was renamed in 1.3. "
                                "Fix: rename it predict_step(self, batch, batch_idx, "
                                "dataloader_idx=0)"),
    "LightningModule.add_to_queue": (_REFUSED, "1.4–1.6's hook to send results from spawned "
                                     "ranks; ddpkit brings the weights, callback_metrics and "
                                     "the best checkpoint's path back itself. Fix: log what you "
                                     "need (self.log) or save it to a file on rank zero"),
    "LightningModule.get_from_queue": (_REFUSED, "see add_to_queue. Fix: read what rank zero "
                                       "logged (trainer.callback_metrics) or saved"),
    "LightningModule.on_hpc_save": (_OUT, "called only when SLURM requeued a job, which "
                                    "Lightning 2.x's SLURMEnvironment(auto_requeue=True) does "
                                    "with on_save_checkpoint: defined, it is never called"),
    "LightningModule.on_hpc_load": (_OUT, "called only when SLURM requeued a job; Lightning 2.x "
                                    "calls on_load_checkpoint then: defined, it is never called"),
}  # fmt: skip
