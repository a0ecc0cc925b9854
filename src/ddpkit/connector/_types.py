"""The axes of a plan, as closed sets of names, and the limits of a request."""

from __future__ import annotations

from typing import Literal

#: the kind of device: "cpu" or "gpu" (CUDA)
AcceleratorName = Literal["cpu", "gpu"]
#: how ranks cooperate; "custom" is a user's TrainingTypePlugin subclass (one process)
TrainingTypeName = Literal["single_device", "ddp", "ddp_spawn", "custom"]
#: who starts the ranks: nobody (one process), ddpkit's subprocess, spawn or fork launcher, or
#: the launcher that started this process (torchrun, srun, the process that started this rank)
LauncherName = Literal["none", "subprocess", "spawn", "fork", "external"]
#: the numeric format
PrecisionName = Literal["32-true", "64-true", "16-mixed", "bf16-mixed"]
#: how a device spelling counts: a number, some ids, all visible, or the accelerator's default
DeviceKind = Literal["count", "ids", "all", "auto"]

#: more processes than this on one machine is a typo (``devices=10**7``), not a plan: the
#: operating system's limits (processes, ports, memory) end such a job long before it trains
MAX_PROCESSES_PER_NODE = 1024
#: torch.distributed numbers ranks with 32-bit integers; far below that, no job is this large
MAX_WORLD_SIZE = 1 << 20
