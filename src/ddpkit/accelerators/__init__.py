"""Accelerators: the kind of device each rank computes on."""

from ddpkit.accelerators._base import Accelerator
from ddpkit.accelerators._cpu import CPUAccelerator
from ddpkit.accelerators._gpu import GPUAccelerator

__all__ = ["Accelerator", "CPUAccelerator", "GPUAccelerator"]
