"""One process, one device."""

from __future__ import annotations

from typing import ClassVar

import torch

from ddpkit.errors import MisconfigurationError
from ddpkit.plugins.training_type._base import TrainingTypePlugin, plugin_call

__all__ = ["SingleDevicePlugin"]


class SingleDevicePlugin(TrainingTypePlugin):
    """Train in the user's own process on one device (``cpu`` or ``cuda:N``)."""

    name: ClassVar[str] = "single_device"

    def __init__(self, device: torch.device | str | int | None = None) -> None:
        if device is None:
            super().__init__(num_nodes=1)
            return
        call = plugin_call(type(self).__name__, {"device": device})
        try:
            # An int is a CUDA ordinal, as for torch.device itself.
            dev = torch.device(device)
        except (RuntimeError, TypeError, ValueError):
            raise MisconfigurationError(
                f"{call}: not a device. Fix: pass 'cpu', 'cuda:0', 0 or a torch.device."
            ) from None
        if dev.type not in ("cpu", "cuda"):
            raise MisconfigurationError(
                f"{call}: ddpkit runs on CPUs and CUDA GPUs only. Fix: pass 'cpu' or 'cuda:N'."
            )
        super().__init__(parallel_devices=[dev], num_nodes=1)

    def __repr__(self) -> str:
        return f"SingleDevicePlugin(device={str(self.root_device)!r})"
