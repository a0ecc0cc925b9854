"""CUDA GPU ranks."""

from __future__ import annotations

from typing import ClassVar

import torch

from ddpkit.accelerators._base import Accelerator


class GPUAccelerator(Accelerator):
    """Each rank drives one CUDA device; the rank's device becomes the current one."""

    name: ClassVar[str] = "gpu"
    device_type: ClassVar[str] = "cuda"
    default_backend: ClassVar[str] = "nccl"

    def device(self, index: int) -> torch.device:
        return torch.device("cuda", index)

    def setup_process(self, device: torch.device, local_world_size: int) -> None:
        # Without this, NCCL and every `.cuda()` call default to cuda:0 on every rank.
        torch.cuda.set_device(device)
