"""The decisions behind the Lightning 2.x surface table, as data.

Everything ddpkit's counterpart has with a compatible signature is *same* without a word here
(:mod:`ddpkit._lightning_surface.build` finds it); a rule is needed only where ddpkit lacks a
name or does otherwise, and the table builder fails for any entry these rules leave without a
status. Keys: ``"Owner"`` (a class), ``"Owner.member"``, ``"Owner(keyword)"``.
"""

from __future__ import annotations

from typing import NamedTuple

SAME, REFUSED, DIFFERENCE, OUT = "same", "refused", "difference", "out of scope"
#: Every status, in the order the page lists them.
STATUSES = (SAME, REFUSED, DIFFERENCE, OUT)


class Rule(NamedTuple):
    status: str
    note: str
    """Why; for *refused*, ends with ``Fix: ...`` (ddpkit's spelling, or ddpkit.lightning)."""
    row: str = ""
    """*difference*: the start of its row's Lightning cell in docs/flags.md's "Differences from
    Lightning" table."""
    example: str = ""
    """A keyword ddpkit has but refuses some values of: a refused value (Python source)."""


#: Lightning's class → ddpkit's (``module:qualname``); the others are found by name in the
#: ddpkit package standing for the Lightning package that exports them (:data:`SEARCHED`).
COUNTERPARTS = {
    "Trainer": "ddpkit.trainer._trainer:Trainer",
    "LightningModule": "ddpkit.core._module:Module",
    "LightningDataModule": "ddpkit.core._datamodule:DataModule",
}
SEARCHED = {
    "pytorch_lightning.callbacks": "ddpkit.callbacks",
    "pytorch_lightning.loggers": "ddpkit.loggers",
}

#: Members of LightningModule and LightningDataModule that Lightning calls (hooks), besides
#: those of its hook mixins (``pytorch_lightning.core.hooks``); every Callback member but
#: ``state_key`` is a hook too.
HOOKS = (
    "training_step", "validation_step", "test_step", "predict_step", "configure_optimizers",
    "configure_callbacks", "configure_gradient_clipping", "configure_sharded_model",
    "optimizer_step", "optimizer_zero_grad", "backward", "lr_scheduler_step", "state_dict",
    "load_state_dict", "on_exception",
)  # fmt: skip
#: What the user's module sets and Lightning reads (refused ones are refused when defined).
SETTINGS = (
    "automatic_optimization", "example_input_array", "strict_loading",
    "prepare_data_per_node", "allow_zero_length_dataloader_with_multiple_devices",
)  # fmt: skip
#: Hooks ddpkit's loop calls when the user's class defines them, though ddpkit's base class
#: does not (the loop finds them by name: tests/surface/test_surface_2x.py runs each).
CALLED_WHEN_DEFINED = (
    "validation_step", "test_step", "predict_step",
    "train_dataloader", "val_dataloader", "test_dataloader", "predict_dataloader",
)  # fmt: skip

_LIGHTNING = "a LightningModule on ddpkit.lightning.Trainer (Lightning's own loop, ddpkit's flags)"
_FEATURE = "a feature of Lightning's loop that ddpkit's does not have; " + _LIGHTNING + " has it"
_MANUAL = (
    "ddpkit's loop runs automatic optimization only (docs/training.md). Fix: return the loss "
    "from training_step, or " + _LIGHTNING
)
_BAR = (
    "ddpkit draws its own progress bar (not a callback). Fix: Trainer(enable_progress_bar=True) "
    "(or False to turn it off)"
)
_LOADERS = (
    "ddpkit makes the loaders inside each rank and does not hand them out. Fix: "
    "trainer.num_training_batches / num_val_batches / num_test_batches / num_predict_batches "
    "for their lengths, trainer.estimated_stepping_batches for a scheduler's total steps"
)
_LOOPS = (
    "Lightning's loop objects (progress trackers, the epoch loop) are its internals; ddpkit's "
    "loop is its own. Fix: read trainer.current_epoch, global_step, is_last_batch, max_epochs; "
    "set Trainer(max_epochs=...) when building it"
)
_HPARAMS = "Fix: self.hparams.pop(name, None)"
_ZERO_LENGTH = (
    "Lightning's switch to let an empty loader through on several devices; ddpkit's loop has no "
    "such switch. Fix: drop it, and give every rank at least one batch"
)
_FROZEN = "a Trainer attribute set from user code"
_PROFILER = (
    "ddpkit's loop has no profiler. Fix: wrap trainer.fit(...) in torch.profiler.profile(), or "
    + _LIGHTNING
)
#: a logger of a hosted experiment tracker (its client library's name)
_TRACKER = (
    "ddpkit writes CSV and TensorBoard files. Fix: a ddpkit.loggers.Logger subclass whose "
    "log_metrics / log_hyperparams call {}, or " + _LIGHTNING
)
_INTERNAL = "a step of Lightning's own saving logic, not an API a project calls"

#: Lightning's callback and logger classes that ddpkit does not have → why; their members and
#: keywords take the class's status.
CLASS_RULES: dict[str, Rule] = {
    "BasePredictionWriter": Rule(REFUSED, "Fix: write each prediction in a ddpkit Callback's "
                                 "on_predict_batch_end(trainer, pl_module, outputs, batch, "
                                 "batch_idx), or use what trainer.predict(...) returns"),
    "BatchSizeFinder": Rule(OUT, _FEATURE),
    "Checkpoint": Rule(REFUSED, "the base class of Lightning's checkpoint callbacks. Fix: "
                       "ddpkit.callbacks.ModelCheckpoint (isinstance(cb, ModelCheckpoint))"),
    "CometLogger": Rule(OUT, _TRACKER.format("Comet")),
    "DeviceStatsMonitor": Rule(OUT, _FEATURE),
    "EMAWeightAveraging": Rule(OUT, _FEATURE),
    "GradientAccumulationScheduler": Rule(REFUSED, "Fix: Trainer(accumulate_grad_batches="
                                          "{0: 1, 4: 2}) (epoch: factor), as Lightning 2.x "
                                          "spells the schedule too"),
    "LambdaCallback": Rule(REFUSED, "Fix: subclass ddpkit.callbacks.Callback and define the "
                           "hooks (def on_train_epoch_end(self, trainer, pl_module): ...)"),
    "LearningRateFinder": Rule(OUT, _FEATURE),
    "LitLogger": Rule(OUT, "Lightning AI's hosted experiment tracker; ddpkit writes CSV and "
                      "TensorBoard files"),
    "MLFlowLogger": Rule(OUT, _TRACKER.format("MLflow")),
    "ModelPruning": Rule(OUT, _FEATURE),
    "OnExceptionCheckpoint": Rule(REFUSED, "Fix: ModelCheckpoint(save_on_exception=True)"),
    "ProgressBar": Rule(REFUSED, _BAR),
    "RichModelSummary": Rule(REFUSED, "ddpkit prints Lightning's plain table. Fix: "
                             "ModelSummary(max_depth=...)"),
    "RichProgressBar": Rule(REFUSED, _BAR),
    "SpikeDetection": Rule(OUT, _FEATURE),
    "StochasticWeightAveraging": Rule(OUT, _FEATURE + " (or torch.optim.swa_utils in the "
                                      "module)"),
    "TQDMProgressBar": Rule(REFUSED, _BAR),
    "ThroughputMonitor": Rule(OUT, _FEATURE),
    "WandbLogger": Rule(OUT, _TRACKER.format("wandb")),
    "WeightAveraging": Rule(OUT, _FEATURE),
}  # fmt: skip

#: The entries of the classes ddpkit has that the code alone cannot decide.
RULES: dict[str, Rule] = {
    # Trainer
    "Trainer(accelerator)": Rule(DIFFERENCE, "ddpkit runs on CPUs and CUDA GPUs", row="`dp`, "
                                 "`ddp2`"),
    "Trainer(strategy)": Rule(DIFFERENCE, "ddpkit runs DDP (subprocess, spawn, fork)",
                              row="`dp`, `ddp2`"),
    "Trainer(precision)": Rule(DIFFERENCE, "'16-true', 'bf16-true' and 'transformer-engine' are "
                               "refused with the choices", row="`precision='16-true'`"),
    "Trainer(logger)": Rule(DIFFERENCE, "logger=None / True writes default_root_dir/metrics.csv",
                            row="the Trainer's default logger"),
    "Trainer(plugins)": Rule(DIFFERENCE, "ddpkit's plugin objects, not Lightning's",
                             row="`plugins=[...]` takes Lightning's plugin objects"),
    "Trainer(val_check_interval)": Rule(DIFFERENCE, "a time-based interval is refused",
                                        row="`val_check_interval` as a time"),
    "Trainer(profiler)": Rule(REFUSED, _PROFILER, example="'simple'"),
    "Trainer.profiler": Rule(REFUSED, _PROFILER),
    "Trainer(model_registry)": Rule(REFUSED, "Lightning's model registry needs Lightning's "
                                    "litmodels. Fix: leave it out and upload "
                                    "trainer.checkpoint_callback.best_model_path yourself",
                                    example="'my-model'"),
    "Trainer.predict": Rule(DIFFERENCE, "under DDP it returns every prediction, in the "
                            "dataset's order, on every rank", row="`predict` under DDP"),
    "Trainer.estimated_stepping_batches": Rule(DIFFERENCE, "refused before a fit",
                                               row="`trainer.estimated_stepping_batches` before"),
    "Trainer.distributed_sampler_kwargs": Rule(REFUSED, "ddpkit adds the DistributedSampler "
                                               "itself. Fix: num_replicas=trainer.world_size, "
                                               "rank=trainer.global_rank"),
    "Trainer.enable_validation": Rule(REFUSED, "Fix: trainer.limit_val_batches != 0 with a "
                                      "validation loader (or val_dataloader())"),
    "Trainer.evaluating": Rule(REFUSED, "Fix: trainer.validating or trainer.testing"),
    "Trainer.fit_loop": Rule(REFUSED, _LOOPS),
    "Trainer.validate_loop": Rule(REFUSED, _LOOPS),
    "Trainer.test_loop": Rule(REFUSED, _LOOPS),
    "Trainer.predict_loop": Rule(REFUSED, _LOOPS),
    "Trainer.init_module": Rule(REFUSED, "Fix: build the module as usual (ddpkit moves it to each "
                                "rank's device), or build its layers in configure_model()"),
    "Trainer.train_dataloader": Rule(REFUSED, _LOADERS),
    "Trainer.val_dataloaders": Rule(REFUSED, _LOADERS),
    "Trainer.test_dataloaders": Rule(REFUSED, _LOADERS),
    "Trainer.predict_dataloaders": Rule(REFUSED, _LOADERS),
    "Trainer.print": Rule(REFUSED, "Fix: self.print(...) in the module (global rank zero only), "
                          "or print(...) under `if trainer.is_global_zero:`"),
    "Trainer.progress_bar_callback": Rule(REFUSED, _BAR),
    "Trainer.received_sigterm": Rule(OUT, "ddpkit's supervisor answers SIGTERM: it ends every "
                                      "rank and, with max_restarts, starts the job again "
                                      "(docs/reliability.md)"),
    "Trainer.scaler": Rule(REFUSED, "Fix: trainer.precision_plugin.scaler (precision='16-mixed')"),
    **{f"Trainer.{name}": Rule(DIFFERENCE, f"read-only: Trainer({name}=...) sets it",
                               row=_FROZEN)
       for name in ("accumulate_grad_batches", "barebones", "check_val_every_n_epoch",
                    "fast_dev_run", "gradient_clip_algorithm", "gradient_clip_val",
                    "limit_predict_batches", "limit_test_batches", "limit_train_batches",
                    "limit_val_batches", "log_every_n_steps", "num_sanity_val_steps",
                    "overfit_batches", "reload_dataloaders_every_n_epochs",
                    "val_check_interval", "callbacks", "logger", "ckpt_path",
                    "enable_autolog_hparams")},
    **{f"Trainer.{name}": Rule(DIFFERENCE, "read-only: the loop sets it", row=_FROZEN)
       for name in ("val_check_batch", "datamodule", "state", "loggers", "optimizers",
                    "training", "validating", "testing", "predicting", "sanity_checking")},
    # LightningModule and LightningDataModule
    **{f"{owner}.remove_ignored_hparams": Rule(REFUSED, _HPARAMS)
       for owner in ("LightningModule", "LightningDataModule")},
    **{f"{owner}.allow_zero_length_dataloader_with_multiple_devices": Rule(REFUSED, _ZERO_LENGTH)
       for owner in ("LightningModule", "LightningDataModule")},
    "LightningModule.all_gather": Rule(REFUSED, "Fix: self.log(name, value, sync_dist=True) for a "
                                       "reduced metric, or torch.distributed.all_gather(...) in "
                                       "the hook"),
    "LightningModule.configure_sharded_model": Rule(REFUSED, "Lightning 2.1 renamed it "
                                                    "configure_model, which ddpkit calls. Fix: "
                                                    "rename it configure_model"),
    "LightningModule.device_mesh": Rule(OUT, "Lightning's ModelParallelStrategy (tensor "
                                        "parallelism); ddpkit runs DDP"),
    "LightningModule.dtype": Rule(REFUSED, "Fix: next(self.parameters()).dtype"),
    "LightningModule.fabric": Rule(OUT, "Lightning Fabric's handle on a module it runs; ddpkit "
                                   "runs the module itself"),
    "LightningModule.manual_backward": Rule(REFUSED, _MANUAL),
    "LightningModule.toggle_optimizer": Rule(REFUSED, _MANUAL),
    "LightningModule.untoggle_optimizer": Rule(REFUSED, _MANUAL),
    "LightningModule.toggled_optimizer": Rule(REFUSED, _MANUAL),
    "LightningModule.on_gpu": Rule(REFUSED, "Fix: self.device.type == 'cuda'"),
    "LightningModule.strict_loading": Rule(REFUSED, "ddpkit restores a checkpoint's weights "
                                           "strictly. Fix: Module.load_from_checkpoint(path, "
                                           "strict=False), then fit without ckpt_path"),
    "LightningModule.to_onnx": Rule(REFUSED, "Fix: torch.onnx.export(model, example_input, "
                                    "path)"),
    "LightningModule.to_torchscript": Rule(REFUSED, "Fix: torch.jit.script(model), or "
                                           "torch.jit.trace(model, example_input)"),
    "LightningModule.to_tensorrt": Rule(OUT, "needs torch_tensorrt; torch_tensorrt.compile(model, "
                                        "...) does it"),
    "LightningDataModule.from_datasets": Rule(REFUSED, "Fix: pass DataLoader(dataset, "
                                              "batch_size=...) to trainer.fit, or a DataModule "
                                              "subclass whose train_dataloader() returns one"),
    "LightningDataModule.name": Rule(OUT, "Lightning's name for a data module in its CLI; "
                                     "ddpkit has no CLI for data modules"),
    "LightningDataModule.on_exception": Rule(REFUSED, "ddpkit calls on_exception on the "
                                             "callbacks. Fix: a Callback's on_exception(trainer, "
                                             "pl_module, exception)"),
    # callbacks
    "ModelCheckpoint.check_monitor_top_k": Rule(OUT, _INTERNAL),
    "ModelCheckpoint.file_exists": Rule(OUT, _INTERNAL),
    "ModelSummary.summarize": Rule(REFUSED, "Fix: from ddpkit.callbacks import summarize; "
                                   "summarize(model, max_depth=1) (the table as text)"),
    "ModelSummary(**summarize_kwargs)": Rule(REFUSED, "Lightning hands extra keywords to its "
                                             "table's renderer; ddpkit's plain table takes "
                                             "none. Fix: drop them"),
}  # fmt: skip

#: ``Owner(keyword)`` or ``Owner.method(parameter)`` → ddpkit's default where it differs from
#: Lightning's, and why it means the same.
_TORCH_LOAD = "None is torch.load's default, True since torch 2.6 (ddpkit needs torch >= 2.6)"
EQUIVALENT_DEFAULTS: dict[str, str] = {
    "Trainer(devices)": "None is resolved as 'auto'",
    **{f"Trainer.{stage}(weights_only)": _TORCH_LOAD
       for stage in ("fit", "validate", "test", "predict")},
    "Trainer.save_checkpoint(weights_only)": "Lightning's None saves everything, as False does",
    "LightningModule.load_from_checkpoint(weights_only)": _TORCH_LOAD,
    "LightningDataModule.load_from_checkpoint(weights_only)": _TORCH_LOAD,
    "LightningModule.load_from_checkpoint(strict)": "None is the module's strict_loading, True "
                                                    "unless set (ddpkit refuses setting it)",
}  # fmt: skip

#: The comparison test that runs the same names through Lightning and ddpkit → those names.
COMPARED: dict[str, tuple[str, ...]] = {
    "tests/callbacks/test_hook_order.py::test_the_hooks_fire_in_lightnings_order": (
        "Callback.on_*", "Callback.setup", "Callback.teardown",
        *(f"LightningModule.{name}" for name in (
            "on_fit_*", "on_train_*", "on_validation_*", "on_test_*", "on_predict_*",
            "on_before_backward", "on_after_backward", "on_before_optimizer_step",
            "on_before_zero_grad", "on_load_checkpoint", "on_save_checkpoint", "setup",
            "teardown", "configure_model", "prepare_data", "configure_callbacks",
            "configure_optimizers", "optimizer_step", "optimizer_zero_grad", "lr_scheduler_step",
            "configure_gradient_clipping", "backward", "*_dataloader", "training_step",
            "validation_step", "test_step", "predict_step",
        )),
    ),
    "tests/callbacks/test_same_as_lightning.py::test_the_same_effects_as_lightning": (
        "Trainer.current_epoch", "Trainer.global_step", "Trainer.max_epochs",
        "Trainer.max_steps", "Trainer.min_epochs", "Trainer.min_steps",
        "Trainer.num_*_batches", "Trainer.num_sanity_val_batches", "Trainer.should_stop",
        "Trainer.is_last_batch", "Trainer.sanity_checking", "Trainer.training",
        "Trainer.validating", "Trainer.testing", "Trainer.predicting", "Trainer.interrupted",
        "Trainer.callback_metrics", "Trainer.logged_metrics", "Trainer.progress_bar_metrics",
        "Trainer.optimizers", "Trainer.fit", "Trainer.validate", "Trainer.test",
        "Trainer.predict", "Trainer(max_epochs)", "Trainer(max_steps)", "Trainer(max_time)",
        "Trainer(accumulate_grad_batches)", "Trainer(check_val_every_n_epoch)",
        "Trainer(log_every_n_steps)", "Trainer(limit_train_batches)",
        "Trainer(limit_val_batches)", "Trainer(overfit_batches)", "Trainer(num_sanity_val_steps)",
        "Trainer(fast_dev_run)", "Trainer(enable_checkpointing)", "LightningModule.log",
        "LearningRateMonitor(*)", "LearningRateMonitor.lrs",
        "LearningRateMonitor.last_momentum_values",
        "LearningRateMonitor.last_weight_decay_values", "ModelCheckpoint(monitor)",
        "ModelCheckpoint(save_top_k)", "ModelCheckpoint(save_last)", "ModelCheckpoint(filename)",
        "ModelCheckpoint(every_n_train_steps)", "EarlyStopping(monitor)", "EarlyStopping(mode)",
        "EarlyStopping(stopping_threshold)", "EarlyStopping(patience)",
        "EarlyStopping(min_delta)",
    ),
    "tests/callbacks/test_timer.py::test_the_same_timer_readings_as_lightning": (
        "Timer(duration)", "Timer.*",
    ),
    "tests/trainer/test_log_hooks.py": ("LightningModule.log", "LightningModule.log_dict"),
    "tests/trainer/test_stepping_batches.py": ("Trainer.estimated_stepping_batches",),
}  # fmt: skip
