"""Plugins: training types, cluster environments and precisions."""

from ddpkit.plugins.environments import (
    ClusterEnvironment,
    KubeflowEnvironment,
    LocalEnvironment,
    LSFEnvironment,
    MPIEnvironment,
    SLURMEnvironment,
    TorchElasticEnvironment,
)
from ddpkit.plugins.precision import DoublePrecisionPlugin, MixedPrecisionPlugin, PrecisionPlugin
from ddpkit.plugins.training_type import (
    DDPPlugin,
    DDPSpawnPlugin,
    SingleDevicePlugin,
    TrainingTypePlugin,
)

__all__ = [
    "ClusterEnvironment",
    "DDPPlugin",
    "DDPSpawnPlugin",
    "DoublePrecisionPlugin",
    "KubeflowEnvironment",
    "LSFEnvironment",
    "LocalEnvironment",
    "MPIEnvironment",
    "MixedPrecisionPlugin",
    "PrecisionPlugin",
    "SLURMEnvironment",
    "SingleDevicePlugin",
    "TorchElasticEnvironment",
    "TrainingTypePlugin",
]
