"""CPU ranks."""

from __future__ import annotations

import os
from typing import ClassVar

import torch

from ddpkit.accelerators._base import Accelerator
from ddpkit.utilities._procs import usable_cores


def cpu_threads_per_rank(cores: int, local_world_size: int) -> int:
    """Threads each rank may use so that ranks × threads ≤ cores (at least one)."""
    return max(1, cores // max(1, local_world_size))


class CPUAccelerator(Accelerator):
    """Each rank is a CPU process. Several ranks on one machine share its cores."""

    name: ClassVar[str] = "cpu"
    device_type: ClassVar[str] = "cpu"
    default_backend: ClassVar[str] = "gloo"

    def device(self, index: int) -> torch.device:
        return torch.device("cpu")

    def setup_process(self, device: torch.device, local_world_size: int) -> None:
        # Every rank would otherwise start one intra-op thread per core: with N ranks that is
        # N × cores threads fighting for the same cores. The user's OMP_NUM_THREADS wins.
        if local_world_size > 1 and "OMP_NUM_THREADS" not in os.environ:
            torch.set_num_threads(cpu_threads_per_rank(usable_cores(), local_world_size))
