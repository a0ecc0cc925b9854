"""Accelerators: the kind of device each rank computes on."""

from ddpkit.accelerators.base import Accelerator
from ddpkit.accelerators.cpu import CPUAccelerator
from ddpkit.accelerators.gpu import GPUAccelerator

__all__ = ["Accelerator", "CPUAccelerator", "GPUAccelerator"]
