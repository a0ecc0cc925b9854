"""What users subclass: the module and the DataModule."""

from ddpkit.core._datamodule import DataModule
from ddpkit.core._hparams import AttributeDict
from ddpkit.core._module import Module

__all__ = ["AttributeDict", "DataModule", "Module"]
