"""The kind of device a rank computes on."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

import torch


class LoaderHooks:
    """Lightning 1.x's loader hooks of an accelerator or a training type: a subclass may change
    (wrap) the loader a rank iterates. ddpkit calls the training type's, then the
    accelerator's, with each stage's loader after giving it the rank's shard."""

    _lightning_module: Any = None

    @property
    def lightning_module(self) -> Any:
        """Lightning 1.x's: the module of the running stage (set before these hooks run)."""
        return self._lightning_module

    def on_reset_train_dataloader(self, dataloader: Any) -> Any:
        return dataloader

    def on_reset_val_dataloader(self, dataloader: Any) -> Any:
        return dataloader

    def on_reset_test_dataloader(self, dataloader: Any) -> Any:
        return dataloader

    def on_reset_predict_dataloader(self, dataloader: Any) -> Any:
        return dataloader


class Accelerator(LoaderHooks, ABC):
    """A kind of device: where tensors live and which collective backend suits it.

    Lightning 1.x accelerators carried the training type and the precision plugin
    (``MyAccelerator(training_type_plugin=..., precision_plugin=...)``); ddpkit's accept them too,
    and the connector uses them as if they were in ``plugins=[...]``.
    """

    #: the name users pass as ``accelerator=...``
    name: ClassVar[str]
    #: torch's device type
    device_type: ClassVar[str]
    #: the process-group backend that suits this device
    default_backend: ClassVar[str]

    def __init__(self, training_type_plugin: Any = None, precision_plugin: Any = None) -> None:
        self.training_type_plugin = training_type_plugin
        self.precision_plugin = precision_plugin

    @abstractmethod
    def device(self, index: int) -> torch.device:
        """The torch device of the ``index``-th device this accelerator drives."""

    @abstractmethod
    def setup_process(self, device: torch.device, local_world_size: int) -> None:
        """Per-rank set-up before the model moves (current CUDA device, thread caps)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other)

    def __hash__(self) -> int:
        return hash(type(self))
