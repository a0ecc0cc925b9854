"""Launchers: who starts the ranks."""

from __future__ import annotations

from ddpkit.launchers.base import Launcher
from ddpkit.launchers.spawn import SpawnLauncher
from ddpkit.launchers.subprocess import SubprocessLauncher
from ddpkit.plugins.training_type.base import TrainingTypePlugin
from ddpkit.plugins.training_type.ddp import DDPPlugin
from ddpkit.plugins.training_type.ddp_spawn import DDPSpawnPlugin

__all__ = ["Launcher", "SpawnLauncher", "SubprocessLauncher", "make_launcher"]


def make_launcher(name: str, plugin: TrainingTypePlugin) -> Launcher | None:
    """The launcher the plan named; ``None`` when this process is the only one or an external
    launcher (torchrun, srun) started every rank."""
    if name == "subprocess":
        assert isinstance(plugin, DDPPlugin)
        return SubprocessLauncher(plugin)
    if name == "spawn":
        assert isinstance(plugin, DDPSpawnPlugin)
        return SpawnLauncher(plugin)
    return None
