"""Training types: how ranks cooperate."""

from ddpkit.plugins.training_type._base import TrainingTypePlugin
from ddpkit.plugins.training_type.ddp import DDPPlugin
from ddpkit.plugins.training_type.ddp_spawn import DDPSpawnPlugin
from ddpkit.plugins.training_type.single_device import SingleDevicePlugin

__all__ = ["DDPPlugin", "DDPSpawnPlugin", "SingleDevicePlugin", "TrainingTypePlugin"]
