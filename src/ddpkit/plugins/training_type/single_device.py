"""One process, one device."""

from __future__ import annotations

from typing import ClassVar

import torch

from ddpkit.plugins.training_type.base import TrainingTypePlugin

__all__ = ["SingleDevicePlugin"]


class SingleDevicePlugin(TrainingTypePlugin):
    """Train in the user's own process on one device (``cpu`` or ``cuda:N``)."""

    name: ClassVar[str] = "single_device"
    launcher_name: ClassVar[str] = "none"

    def __init__(self, device: torch.device | str | int | None = None) -> None:
        dev = None if device is None else [torch.device(device)]
        super().__init__(parallel_devices=dev, num_nodes=1)

    @property
    def root_device(self) -> torch.device:
        devices = self.parallel_devices
        return devices[0] if devices else torch.device("cpu")

    def __repr__(self) -> str:
        return f"SingleDevicePlugin(device={str(self.root_device)!r})"
