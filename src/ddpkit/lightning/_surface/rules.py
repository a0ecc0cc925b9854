"""The decisions behind the 1.x surface table: what moved, and what ddpkit provides (why the rest
is refused or out of scope: :mod:`ddpkit.lightning._surface.refusals`).

Everything Lightning 2.x still has at a 1.x path is *unchanged* without a word here; the table
builder (:mod:`ddpkit.lightning._surface.build`) finds a name that moved elsewhere in 2.x by
itself, and fails for any 1.x entry these rules leave without a status. Targets are
``"module:attribute"`` (or a module path).
"""

from __future__ import annotations

_PL = "pytorch_lightning"
_FABRIC_ENV = "lightning_fabric.plugins.environments"

#: A 1.x module → the 2.x module that holds its names now.
MOVED_MODULES: dict[str, str] = {
    f"{_PL}.callbacks.base": f"{_PL}.callbacks.callback",
    f"{_PL}.callbacks.progress.base": f"{_PL}.callbacks.progress.progress_bar",
    f"{_PL}.callbacks.progress.progress": f"{_PL}.callbacks.progress.tqdm_progress",
    f"{_PL}.callbacks.swa": f"{_PL}.callbacks.stochastic_weight_avg",
    f"{_PL}.cluster_environments": f"{_PL}.plugins.environments",
    f"{_PL}.cluster_environments.cluster_environment": f"{_FABRIC_ENV}.cluster_environment",
    f"{_PL}.cluster_environments.slurm_environment": f"{_FABRIC_ENV}.slurm",
    f"{_PL}.cluster_environments.torchelastic_environment": f"{_FABRIC_ENV}.torchelastic",
    f"{_PL}.core.lightning": f"{_PL}.core.module",
    f"{_PL}.core.memory": f"{_PL}.utilities.model_summary",
    f"{_PL}.core.mixins.device_dtype_mixin": "lightning_fabric.utilities.device_dtype_mixin",
    f"{_PL}.loggers.base": f"{_PL}.loggers.logger",
    f"{_PL}.plugins.environments.cluster_environment": f"{_FABRIC_ENV}.cluster_environment",
    f"{_PL}.plugins.environments.kubeflow_environment": f"{_FABRIC_ENV}.kubeflow",
    f"{_PL}.plugins.environments.lightning_environment": f"{_FABRIC_ENV}.lightning",
    f"{_PL}.plugins.environments.lsf_environment": f"{_FABRIC_ENV}.lsf",
    f"{_PL}.plugins.environments.slurm_environment": f"{_FABRIC_ENV}.slurm",
    f"{_PL}.plugins.environments.torchelastic_environment": f"{_FABRIC_ENV}.torchelastic",
    f"{_PL}.profiler": f"{_PL}.profilers",
    f"{_PL}.profiler.advanced": f"{_PL}.profilers.advanced",
    f"{_PL}.profiler.base": f"{_PL}.profilers.base",
    f"{_PL}.profiler.profiler": f"{_PL}.profilers.profiler",
    f"{_PL}.profiler.profilers": f"{_PL}.profilers",
    f"{_PL}.profiler.pytorch": f"{_PL}.profilers.pytorch",
    f"{_PL}.profiler.simple": f"{_PL}.profilers.simple",
    f"{_PL}.profiler.xla": f"{_PL}.profilers.xla",
    f"{_PL}.trainer.supporters": f"{_PL}.utilities.combined_loader",
    f"{_PL}.utilities.cli": f"{_PL}.cli",
    f"{_PL}.utilities.apply_func": "lightning_fabric.utilities.apply_func",
    f"{_PL}.utilities.cloud_io": "lightning_fabric.utilities.cloud_io",
    f"{_PL}.utilities.device_dtype_mixin": "lightning_fabric.utilities.device_dtype_mixin",
    f"{_PL}.utilities.device_parser": "lightning_fabric.utilities.device_parser",
    f"{_PL}.utilities.distributed": "lightning_fabric.utilities.distributed",
    f"{_PL}.utilities.model_utils": f"{_PL}.utilities.model_helpers",
    f"{_PL}.utilities.warning_utils": f"{_PL}.utilities.rank_zero",
}

_METRICS = "ddpkit.lightning._metrics"
_METRIC_MODULES = (
    "classification",
    "classification.accuracy",
    "classification.auc",
    "classification.auroc",
    "classification.average_precision",
    "classification.confusion_matrix",
    "classification.f_beta",
    "classification.hamming_distance",
    "classification.helpers",
    "classification.iou",
    "classification.precision_recall",
    "classification.precision_recall_curve",
    "classification.roc",
    "classification.stat_scores",
    "compositional",
    "metric",
    "regression",
    "regression.explained_variance",
    "regression.mean_absolute_error",
    "regression.mean_squared_error",
    "regression.mean_squared_log_error",
    "regression.psnr",
    "regression.r2score",
    "regression.ssim",
    "utils",
)

#: A 1.x module that ddpkit's own module stands for (1.x's metrics, now torchmetrics).
PROVIDED_MODULES: dict[str, str] = {
    f"{_PL}.metrics": _METRICS,
    f"{_PL}.metrics.functional": f"{_METRICS}.functional",
    **{f"{_PL}.metrics.{m}": _METRICS for m in _METRIC_MODULES},
    **{
        f"{_PL}.metrics.functional.{m}": f"{_METRICS}.functional"
        for m in (
            "accuracy",
            "auc",
            "auroc",
            "average_precision",
            "classification",
            "confusion_matrix",
            "explained_variance",
            "f_beta",
            "hamming_distance",
            "image_gradients",
            "iou",
            "mean_absolute_error",
            "mean_relative_error",
            "mean_squared_error",
            "mean_squared_log_error",
            "nlp",
            "precision_recall",
            "precision_recall_curve",
            "psnr",
            "r2score",
            "reduction",
            "roc",
            "self_supervised",
            "ssim",
            "stat_scores",
        )
    },
    f"{_PL}.utilities.argparse_utils": "ddpkit.lightning._arguments",
}


def _at(paths: tuple[str, ...], name: str, target: str) -> dict[str, str]:
    return {f"{_PL}{path}.{name}": target for path in paths}


_TRAINER = "ddpkit.lightning._trainer:Trainer"
_MODULE = "ddpkit.lightning._module:LightningModule"
_DATAMODULE = "ddpkit.lightning._datamodule:LightningDataModule"
_CLI = "ddpkit.lightning._cli"
_ENUMS = "ddpkit.lightning._enums"

#: A 1.x name → the object ddpkit provides for it, with 1.x semantics. These win over a 2.x
#: name at the same path (1.x's ``callbacks.ProgressBar`` is the tqdm bar, 2.x's the base).
PROVIDED: dict[str, str] = {
    **_at(("", ".trainer", ".trainer.trainer"), "Trainer", _TRAINER),
    **_at(("", ".core", ".core.lightning", ".core.module"), "LightningModule", _MODULE),
    **_at(("", ".core", ".core.datamodule"), "LightningDataModule", _DATAMODULE),
    **_at((".plugins", ".plugins.training_type", ".plugins.training_type.ddp",
           ".plugins.ddp_plugin"), "DDPPlugin", "ddpkit.plugins:DDPPlugin"),
    **_at((".plugins", ".plugins.training_type", ".plugins.training_type.ddp_spawn"),
          "DDPSpawnPlugin", "ddpkit.plugins:DDPSpawnPlugin"),
    **_at(("", ".utilities.cli", ".cli"), "LightningCLI", f"{_CLI}:LightningCLI"),
    **{
        f"{_PL}.utilities.cli.{registry}_REGISTRY": f"{_CLI}:{registry}_REGISTRY"
        for registry in ("CALLBACK", "DATAMODULE", "LOGGER", "LR_SCHEDULER", "MODEL", "OPTIMIZER")
    },
    **_at(("",), "metrics", _METRICS),
    **_at((".utilities", ".utilities.enums"), "DistributedType", f"{_ENUMS}:DistributedType"),
    **_at((".utilities", ".utilities.enums"), "DeviceType", f"{_ENUMS}:DeviceType"),
    **_at((".utilities", ".utilities.enums"), "AMPType", f"{_ENUMS}:AMPType"),
    **_at((".utilities", ".utilities.enums"), "LightningEnum", f"{_ENUMS}:LightningEnum"),
    **_at((".utilities.enums",), "PrecisionType", f"{_ENUMS}:PrecisionType"),
    **_at((".utilities.types",), "EPOCH_OUTPUT", f"{_ENUMS}:EPOCH_OUTPUT"),
    **_at((".core.decorators",), "auto_move_data", "ddpkit.lightning._module:auto_move_data"),
    **_at((".strategies", ".strategies.ddp_spawn"), "DDPSpawnStrategy",
          "ddpkit.lightning._strategies:DDPSpawnStrategy"),
    **_at((".callbacks", ".callbacks.progress", ".callbacks.progress.progress",
           ".trainer.connectors.callback_connector"), "ProgressBar",
          f"{_PL}.callbacks.progress.tqdm_progress:TQDMProgressBar"),
    **_at((".callbacks", ".callbacks.progress", ".callbacks.progress.base"), "ProgressBarBase",
          f"{_PL}.callbacks.progress.progress_bar:ProgressBar"),
    **_at((".loggers", ".loggers.base", ".loggers.logger"), "LightningLoggerBase",
          f"{_PL}.loggers.logger:Logger"),
    **_at((".profiler", ".profiler.base", ".profiler.profilers", ".profilers", ".profilers.base"),
          "BaseProfiler", f"{_PL}.profilers.profiler:Profiler"),
    **_at((".profiler", ".profiler.base", ".profilers", ".profilers.base"), "AbstractProfiler",
          f"{_PL}.profilers.profiler:Profiler"),
    **_at((".plugins", ".plugins.layer_sync"), "NativeSyncBatchNorm",
          f"{_PL}.plugins.layer_sync:TorchSyncBatchNorm"),
    **_at((".accelerators", ".accelerators.gpu"), "GPUAccelerator",
          f"{_PL}.accelerators.cuda:CUDAAccelerator"),
    **{
        f"{_PL}.utilities.argparse.{name}": f"ddpkit.lightning._arguments:{name}"
        for name in (
            "add_argparse_args",
            "from_argparse_args",
            "get_init_arguments_and_types",
            "parse_argparser",
            "parse_env_variables",
        )
    },
}  # fmt: skip

#: Lightning 2.x's object → ddpkit's, wherever a 1.x path reaches it (1.x modules re-exported
#: ``Trainer`` and ``LightningModule`` from a dozen places: each is ddpkit's one).
SUBSTITUTES: dict[str, str] = {
    f"{_PL}.callbacks.callback:Callback": "ddpkit.lightning._callback:Callback",
    f"{_PL}.trainer.trainer:Trainer": _TRAINER,
    f"{_PL}.core.module:LightningModule": _MODULE,
    f"{_PL}.core.datamodule:LightningDataModule": _DATAMODULE,
    "lightning_fabric.plugins.environments.cluster_environment:ClusterEnvironment": (
        "ddpkit.plugins.environments:ClusterEnvironment"
    ),
    f"{_PL}.cli:LightningCLI": f"{_CLI}:LightningCLI",
}
