"""What users subclass: the module and the DataModule."""

from ddpkit.core.datamodule import DataModule
from ddpkit.core.hparams import AttributeDict
from ddpkit.core.module import Module

__all__ = ["AttributeDict", "DataModule", "Module"]
