"""Plugins: training types, cluster environments and precisions."""

from ddpkit.plugins.environments import (
    ClusterEnvironment,
    LocalEnvironment,
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
    "LocalEnvironment",
    "MixedPrecisionPlugin",
    "PrecisionPlugin",
    "SLURMEnvironment",
    "SingleDevicePlugin",
    "TorchElasticEnvironment",
    "TrainingTypePlugin",
]
