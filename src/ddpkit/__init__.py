"""ddpkit: one Trainer for one CPU, many CPU processes, a GPU box or a cluster — by flags only."""

from ddpkit.__about__ import __version__
from ddpkit.core.datamodule import DataModule
from ddpkit.core.module import Module
from ddpkit.errors import (
    ChildFailedError,
    DDPKitDeprecationWarning,
    DDPKitError,
    DDPKitWarning,
    LaunchError,
    MisconfigurationError,
)
from ddpkit.plugins import DDPPlugin, DDPSpawnPlugin, SingleDevicePlugin
from ddpkit.trainer.trainer import Trainer
from ddpkit.utilities.seed import seed_everything

__all__ = [
    "ChildFailedError",
    "DDPKitDeprecationWarning",
    "DDPKitError",
    "DDPKitWarning",
    "DDPPlugin",
    "DDPSpawnPlugin",
    "DataModule",
    "LaunchError",
    "MisconfigurationError",
    "Module",
    "SingleDevicePlugin",
    "Trainer",
    "__version__",
    "seed_everything",
]
