"""Why each 1.x module and name that Lightning 2.x dropped, and ddpkit does not provide, is
refused (with the 2.x fix) or out of scope: the rules the table builder applies
(:mod:`ddpkit.lightning._surface.build`)."""

from __future__ import annotations

#: The two statuses of a name ddpkit.lightning does not serve.
REFUSED, OUT = "refused", "out of scope"

_PL = "pytorch_lightning"

_INTERNAL = (
    "a part of Lightning 1.x's own machinery, rebuilt in Lightning 2.x and not an API a "
    "project uses; ddpkit.lightning runs Lightning 2.x's"
)
_HARDWARE = (
    "ddpkit.lightning resolves CPU and CUDA training (DDP over gloo or nccl); this belongs to "
    "hardware or a backend it does not run. Fix: Lightning 2.x's own flags for it, e.g. "
    "Trainer(accelerator='tpu'), in pytorch_lightning.Trainer"
)
_SHARDED = (
    "sharded training (fairscale, DeepSpeed, FSDP, Horovod, Bagua, ColossalAI, Hivemind) is "
    "outside what ddpkit.lightning resolves. Fix: Lightning 2.x's Trainer(strategy='fsdp') or "
    "strategy='deepspeed' in pytorch_lightning.Trainer"
)
_LOOPS = (
    "Lightning 1.5–1.9's loop API (custom Loop subclasses, trainer.fit_loop.connect(...)) became "
    "internal in Lightning 2.0. Fix: move the custom logic into the module's hooks or a Callback"
)
_PRECISION = (
    "precision plugins are chosen from Trainer(precision=...), which ddpkit's connector "
    "resolves. Fix: Trainer(precision=16) (or '16-mixed', 'bf16-mixed', 64)"
)
_TRAINING_TYPE_BASE = (
    "the base of 1.x's training-type plugins became Lightning 2.x's Strategy. Fix: subclass "
    "pytorch_lightning.strategies.Strategy (or DDPStrategy) and pass it as Trainer(strategy=...)"
)
_LITE = (
    "LightningLite became lightning_fabric.Fabric in Lightning 2.0, another API. Fix: fabric = "
    "Fabric(accelerator='cpu', devices=2); fabric.launch(run) (pip install lightning-fabric)"
)

#: A module Lightning 2.x still has that ddpkit.lightning does not serve, with the modules under
#: it → (status, why).
NOT_SERVED: dict[str, tuple[str, str]] = {
    f"{_PL}.serve": (
        OUT,
        "ServableModule (Lightning 1.7–1.9) checks that a model can be served "
        "over HTTP, which is not training; use pytorch_lightning.serve directly",
    ),
}

#: A 1.x module path prefix that Lightning 2.x dropped → (status, why; fix). The longest
#: matching prefix wins; a name ddpkit provides (PROVIDED) is served all the same.
MODULE_RULES: dict[str, tuple[str, str]] = {
    f"{_PL}.accelerators": (OUT, _INTERNAL),
    f"{_PL}.accelerators.gpu": (REFUSED, "Fix: Trainer(accelerator='gpu'), or "
                                "pytorch_lightning.accelerators.CUDAAccelerator"),
    f"{_PL}.accelerators.ipu": (OUT, _HARDWARE),
    f"{_PL}.accelerators.tpu_accelerator": (OUT, _HARDWARE),
    f"{_PL}.accelerators.horovod_accelerator": (OUT, _SHARDED),
    f"{_PL}.callbacks.fault_tolerance": (OUT, "Lightning 1.6–1.9's experimental fault-tolerant "
                                         "training. Fix: Trainer(max_restarts=N) of ddpkit"),
    f"{_PL}.callbacks.gpu_stats_monitor": (REFUSED, "GPUStatsMonitor was removed in Lightning "
                                           "1.7. Fix: callbacks=[DeviceStatsMonitor()]"),
    f"{_PL}.callbacks.quantization": (REFUSED, "QuantizationAwareTraining was removed in "
                                      "Lightning 2.0. Fix: torch.ao.quantization in your module "
                                      "(prepare_qat in setup, convert after fit)"),
    f"{_PL}.callbacks.xla_stats_monitor": (OUT, _HARDWARE),
    f"{_PL}.core.decorators": (REFUSED, "parameter_validation was removed in Lightning 1.7: "
                               "Lightning moves the model itself. Fix: drop the decorator"),
    f"{_PL}.core.grads": (REFUSED, "the GradInformation mixin (self.grad_norm) was removed in "
                          "Lightning 1.5. Fix: from pytorch_lightning.utilities import grad_norm;"
                          " grad_norm(self, norm_type=2)"),
    f"{_PL}.core.step_result": (REFUSED, "Result, TrainResult and EvalResult were removed in "
                                "Lightning 1.1. Fix: return the loss from training_step and log "
                                "with self.log(...)"),
    f"{_PL}.distributed": (OUT, _INTERNAL),
    f"{_PL}.lite": (REFUSED, _LITE),
    f"{_PL}.loggers.test_tube": (REFUSED, "TestTubeLogger was removed in Lightning 1.7 (test-tube "
                                 "is unmaintained). Fix: TensorBoardLogger(save_dir, name=...)"),
    f"{_PL}.loops": (OUT, _LOOPS),
    f"{_PL}.metrics": (REFUSED, "pytorch_lightning.metrics moved to torchmetrics in Lightning "
                       "1.5, and torchmetrics has no such name today. Fix: torchmetrics' class "
                       "or function for that metric (torchmetrics.F1Score, "
                       "torchmetrics.functional.f1_score, ...)"),
    f"{_PL}.info": (OUT, "1.x's package metadata. Fix: pytorch_lightning.__version__"),
    f"{_PL}.overrides": (OUT, _INTERNAL),
    f"{_PL}.plugins": (OUT, _INTERNAL),
    f"{_PL}.plugins.environments.bagua_environment": (OUT, _SHARDED),
    f"{_PL}.plugins.environments.xla_environment": (OUT, _HARDWARE),
    f"{_PL}.plugins.native_amp": (REFUSED, _PRECISION),
    f"{_PL}.plugins.apex": (REFUSED, "Apex was removed in Lightning 2.0. Fix: "
                            "Trainer(precision=16)"),
    f"{_PL}.plugins.precision": (REFUSED, _PRECISION),
    f"{_PL}.plugins.precision_plugin": (REFUSED, _PRECISION),
    f"{_PL}.plugins.precision.apex_amp": (REFUSED, "Apex was removed in Lightning 2.0. Fix: "
                                          "Trainer(precision=16)"),
    f"{_PL}.plugins.precision.colossalai": (OUT, _SHARDED),
    f"{_PL}.plugins.precision.fsdp_native_native_amp": (OUT, _SHARDED),
    f"{_PL}.plugins.precision.fully_sharded_native_amp": (OUT, _SHARDED),
    f"{_PL}.plugins.precision.sharded_native_amp": (OUT, _SHARDED),
    f"{_PL}.plugins.precision.deepspeed_precision": (OUT, _SHARDED),
    f"{_PL}.plugins.precision.ipu": (OUT, _HARDWARE),
    f"{_PL}.plugins.precision.ipu_precision": (OUT, _HARDWARE),
    f"{_PL}.plugins.precision.tpu_bfloat": (OUT, _HARDWARE),
    f"{_PL}.plugins.sharded_native_amp_plugin": (OUT, _SHARDED),
    f"{_PL}.plugins.sharded_plugin": (OUT, _SHARDED),
    f"{_PL}.plugins.ddp_sequential_plugin": (OUT, _SHARDED),
    f"{_PL}.plugins.rpc_plugin": (OUT, _SHARDED),
    f"{_PL}.plugins.training_type": (REFUSED, _TRAINING_TYPE_BASE),
    f"{_PL}.plugins.training_type.ddp2": (REFUSED, "ddp2 was removed in Lightning 1.8. Fix: "
                                          "Trainer(accelerator='gpu', devices=N, strategy='ddp')"),
    f"{_PL}.plugins.training_type.dp": (REFUSED, "DataParallel (dp) was removed in Lightning "
                                        "2.0. Fix: Trainer(accelerator='gpu', devices=N, "
                                        "strategy='ddp')"),
    f"{_PL}.plugins.training_type.deepspeed": (OUT, _SHARDED),
    f"{_PL}.plugins.training_type.fully_sharded": (OUT, _SHARDED),
    f"{_PL}.plugins.training_type.horovod": (OUT, _SHARDED),
    f"{_PL}.plugins.training_type.ipu": (OUT, _HARDWARE),
    f"{_PL}.plugins.training_type.rpc": (OUT, _SHARDED),
    f"{_PL}.plugins.training_type.rpc_sequential": (OUT, _SHARDED),
    f"{_PL}.plugins.training_type.sharded": (OUT, _SHARDED),
    f"{_PL}.plugins.training_type.sharded_spawn": (OUT, _SHARDED),
    f"{_PL}.plugins.training_type.single_tpu": (OUT, _HARDWARE),
    f"{_PL}.plugins.training_type.tpu_spawn": (OUT, _HARDWARE),
    f"{_PL}.plugins.training_type.utils": (OUT, _INTERNAL),
    f"{_PL}.strategies": (OUT, _SHARDED),
    f"{_PL}.strategies.ddp2": (REFUSED, "ddp2 was removed in Lightning 1.8. Fix: "
                               "Trainer(accelerator='gpu', devices=N, strategy='ddp')"),
    f"{_PL}.strategies.dp": (REFUSED, "DataParallel (dp) was removed in Lightning 2.0. Fix: "
                             "Trainer(accelerator='gpu', devices=N, strategy='ddp')"),
    f"{_PL}.strategies.ddp_spawn": (REFUSED, "DDPSpawnStrategy became DDPStrategy(start_method="
                                    "'spawn') in Lightning 2.0 (ddpkit.lightning provides "
                                    "DDPSpawnStrategy itself). Fix: DDPStrategy(start_method="
                                    "'spawn')"),
    f"{_PL}.strategies.fully_sharded_native": (OUT, _SHARDED),
    f"{_PL}.strategies.ipu": (OUT, _HARDWARE),
    f"{_PL}.strategies.tpu_spawn": (OUT, _HARDWARE),
    f"{_PL}.strategies.launchers": (OUT, _INTERNAL),
    f"{_PL}.strategies.strategy_registry": (OUT, _INTERNAL),
    f"{_PL}.strategies.utils": (OUT, _INTERNAL),
    f"{_PL}.trainer": (OUT, _INTERNAL),
    f"{_PL}.tuner.auto_gpu_select": (REFUSED, "auto_select_gpus was removed in Lightning 2.0. "
                                     "Fix: from lightning_fabric.accelerators import "
                                     "find_usable_cuda_devices; Trainer(devices="
                                     "find_usable_cuda_devices(N))"),
    f"{_PL}.utilities": (OUT, _INTERNAL),
    f"{_PL}.utilities.finite_checks": (REFUSED, "removed in Lightning 2.0. Fix: "
                                       "Trainer(detect_anomaly=True)"),
    f"{_PL}.utilities.meta": (OUT, _INTERNAL),
    f"{_PL}.utilities.xla_device": (OUT, _HARDWARE),
    f"{_PL}.utilities.xla_device_utils": (OUT, _HARDWARE),
}  # fmt: skip

_INCIDENTAL = (
    "a name 1.x's module bound for its own use (a logger, a cache, an import of another "
    "package), not an API; import it from where it comes from"
)
_AVAILABLE = (
    "1.x's flag for an optional package. Fix: importlib.util.find_spec('<package>') is not None"
)

#: A 1.x name Lightning 2.x dropped from a module it kept → (status, why; fix). Keyed by the
#: dotted name, or by the bare name for every module that had it.
NAME_RULES: dict[str, tuple[str, str]] = {
    **{name: (OUT, _INCIDENTAL) for name in (
        "log", "warning_cache", "amp", "torch_inf", "device_parser", "parsing", "memory",
        "API", "CometExperiment", "CometExistingExperiment", "CometOfflineExperiment",
        "comet_ml", "generate_guid", "mlflow", "MlflowClient", "Metric", "Param", "context",
        "resolve_tags", "MLFLOW_RUN_NAME", "neptune", "Experiment", "Run", "RunDisabled",
        "wandb", "Style", "Task", "tqdm", "OmegaConf", "xm", "xmp", "OSS", "T", "warnings",
    )},
    **{name: (OUT, _AVAILABLE) for name in (
        "APEX_AVAILABLE", "BOLTS_AVAILABLE", "FAIRSCALE_AVAILABLE", "FAIRSCALE_PIPE_AVAILABLE",
        "GROUP_AVAILABLE", "HOROVOD_AVAILABLE", "HYDRA_AVAILABLE", "HYDRA_EXPERIMENTAL_AVAILABLE",
        "NATIVE_AMP_AVAILABLE", "NATIVE_AMP_AVALAIBLE", "OMEGACONF_AVAILABLE", "RPC_AVAILABLE",
        "TPU_AVAILABLE", "XLA_AVAILABLE",
    )},
    "LoggerCollection": (REFUSED, "LoggerCollection was removed in Lightning 1.8. Fix: "
                         "Trainer(logger=[logger_a, logger_b]); trainer.loggers is the list"),
    "GPUStatsMonitor": (REFUSED, "removed in Lightning 1.7. Fix: callbacks=[DeviceStatsMonitor()]"),
    "XLAStatsMonitor": (OUT, _HARDWARE),
    "QuantizationAwareTraining": (REFUSED, "removed in Lightning 2.0. Fix: "
                                  "torch.ao.quantization in your module"),
    "TestTubeLogger": (REFUSED, "removed in Lightning 1.7. Fix: TensorBoardLogger(save_dir)"),
    "get_gpu_memory_map": (REFUSED, "removed in Lightning 1.9. Fix: "
                           "callbacks=[DeviceStatsMonitor()], or torch.cuda.memory_stats()"),
    "scale_batch_size": (REFUSED, "Fix: from pytorch_lightning.tuner import Tuner; "
                         "Tuner(trainer).scale_batch_size(model)"),
    "lr_find": (REFUSED, "Fix: from pytorch_lightning.tuner import Tuner; "
                "Tuner(trainer).lr_find(model)"),
    "upgrade_checkpoint": (REFUSED, "Fix: python -m pytorch_lightning.utilities.upgrade_checkpoint "
                           "PATH (the command line of Lightning 2.x)"),
    "ModelIO": (REFUSED, "the ModelIO mixin was folded into LightningModule in Lightning 2.0. "
                "Fix: YourModule.load_from_checkpoint(path)"),
    "track_data_hook_calls": (OUT, _INTERNAL),
    "trainer_state": (OUT, _INTERNAL),
    "is_lightning_optimizer": (OUT, _INTERNAL),
    "ConfigValidator": (OUT, _INTERNAL),
    "verify_loop_configurations": (OUT, _INTERNAL),
    "ACCELERATORS_BASE_MODULE": (OUT, _INTERNAL),
    "STRATEGIES_BASE_MODULE": (OUT, _INTERNAL),
    "BackendType": (OUT, _INTERNAL),
    "ReduceOp": (REFUSED, "Fix: torch.distributed.ReduceOp"),
    "xla_clip_grad_norm_": (OUT, _HARDWARE),
    "LightningDeepSpeedModule": (OUT, _SHARDED),
    **{name: (OUT, _INCIDENTAL) for name in (
        "NewCallback", "NewLightningModule", "NewAdvancedProfiler", "NewPassThroughProfiler",
        "NewProfiler", "NewPyTorchProfiler", "NewRegisterRecordFuncion", "NewScheduleWrapper",
        "NewSimpleProfiler", "NewXLAProfiler", "progress_base",
    )},
    **{name: (OUT, _INTERNAL) for name in (
        "prefix_metric_keys", "prefix_metrics_keys", "reset", "PARAMETER_NUM_UNITS",
        "UNKNOWN_SIZE", "ALLOWED_CONFIG_TYPES", "PRIMITIVE_TYPES", "DeviceDtypeModuleMixin",
    )},
    **{name: (OUT, "a column of RichProgressBar, which Lightning 2.x defines only when `rich` "
                   "is installed (pip install rich); not an API a project imports") for name in (
        "BatchesProcessedColumn", "CustomBarColumn", "CustomInfiniteTask", "CustomProgress",
        "CustomTimeColumn", "MetricsTextColumn", "ProcessingSpeedColumn",
    )},
}  # fmt: skip
