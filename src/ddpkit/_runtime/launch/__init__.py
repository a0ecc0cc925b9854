"""Launchers: who starts the ranks of this node, and supervises them."""

from __future__ import annotations

from ddpkit._runtime.launch._base import Launcher
from ddpkit._runtime.launch._spawn import SpawnLauncher
from ddpkit._runtime.launch._subprocess import SubprocessLauncher
from ddpkit.plugins.training_type._base import TrainingTypePlugin
from ddpkit.plugins.training_type.ddp import DDPPlugin
from ddpkit.plugins.training_type.ddp_spawn import DDPSpawnPlugin

__all__ = ["Launcher", "SpawnLauncher", "SubprocessLauncher", "make_launcher"]


def make_launcher(name: str, plugin: TrainingTypePlugin) -> Launcher | None:
    """The launcher the plan named; ``None`` when this process is the only one or an external
    launcher (torchrun, srun, the process that started this rank) started every rank. The plan
    only names a launcher its training type supports."""
    if name in ("spawn", "fork") and isinstance(plugin, DDPSpawnPlugin):
        return SpawnLauncher(plugin)
    if name == "subprocess" and isinstance(plugin, DDPPlugin):
        return SubprocessLauncher(plugin)
    if name in ("none", "external"):
        return None
    raise RuntimeError(f"the plan names launcher {name!r} for {plugin!r}")  # a bug, not input
